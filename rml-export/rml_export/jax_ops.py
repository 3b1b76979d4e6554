"""Lowerings of JAX primitives onto rml-graph ops, one function per primitive family.

Each lowering takes the :class:`~rml_export.jax_route.Lowering` (the graph being built),
the jaxpr equation and its input value names, and returns the output value name(s).
``LOWERINGS`` maps a primitive name to its lowering; a primitive missing from it fails
the export by name. Shapes are fixed: the equation's avals give every output type.
"""

from __future__ import annotations

import math

import numpy as np


#: Primitives never evaluated at export time even on constants (``dim_as_value`` turns
#: a symbolic dim into a number, which a graph cannot hold).
NO_FOLD = {"scan", "while", "cond", "dim_as_value"}


def _out(eqn, k: int = 0):
    from .jax_route import graph_dtype

    aval = eqn.outvars[k].aval
    return list(aval.shape), graph_dtype(aval.dtype)


def _unary(op: str):
    def lower(lw, eqn, ins):
        shape, dtype = _out(eqn)
        return lw.emit(op, [ins[0]], None, shape, dtype)

    return lower


def _binary(op: str):
    def lower(lw, eqn, ins):
        shape, dtype = _out(eqn)
        return lw.emit(op, list(ins), None, shape, dtype)

    return lower


def _known_scalar(lw, value: str):
    """The value of a known constant whose elements are all equal, else ``None``."""
    array = lw.known.get(value)
    if array is None or array.size == 0:
        return None
    flat = array.reshape(-1)
    if np.all(flat == flat[0]) or np.all(np.isnan(flat)):
        return flat[0].item()
    return None


def _max(lw, eqn, ins):
    shape, dtype = _out(eqn)
    for a, b in (ins, ins[::-1]):
        c = _known_scalar(lw, b)
        if c is None or lw.shape(a) != shape:
            continue
        if c == -math.inf:
            return a
        if c == 0 and dtype.startswith(("F", "BF")):
            return lw.emit("relu", [a], None, shape, dtype)
    return lw.emit("maximum", list(ins), None, shape, dtype)


def _logical(kind: str):
    def lower(lw, eqn, ins):
        shape, dtype = _out(eqn)
        if dtype != "BOOL":
            raise lw.error("bitwise ops on integers are not supported (only on booleans)")
        t, f = lw.constant(np.array(True)), lw.constant(np.array(False))
        if kind == "not":
            return lw.emit("where", [ins[0], f, t], None, shape, dtype, "not")
        a, b = ins
        args = [a, b, f] if kind == "and" else [a, t, b]
        return lw.emit("where", args, None, shape, dtype, kind)

    return lower


def _integer_pow(lw, eqn, ins):
    (x,), y = ins, eqn.params["y"]
    shape, dtype = _out(eqn)
    if y == 1:
        return x
    if y == 2:
        return lw.emit("mul", [x, x], None, shape, dtype, "square")
    if y == 3:
        sq = lw.emit("mul", [x, x], None, shape, dtype, "square")
        return lw.emit("mul", [sq, x], None, shape, dtype, "cube")
    if y == -1:
        return lw.emit("div", [lw.scalar(1.0, x), x], None, shape, dtype, "reciprocal")
    return lw.emit("pow", [x, lw.scalar(float(y), x)], None, shape, dtype)


def _square(lw, eqn, ins):
    shape, dtype = _out(eqn)
    return lw.emit("mul", [ins[0], ins[0]], None, shape, dtype, "square")


def _erfc(lw, eqn, ins):
    shape, dtype = _out(eqn)
    e = lw.emit("erf", [ins[0]], None, shape, dtype)
    return lw.emit("sub", [lw.scalar(1.0, ins[0]), e], None, shape, dtype, "erfc")


def _log1p(lw, eqn, ins):
    shape, dtype = _out(eqn)
    a = lw.emit("add", [ins[0], lw.scalar(1.0, ins[0])], None, shape, dtype)
    return lw.emit("log", [a], None, shape, dtype, "log1p")


def _expm1(lw, eqn, ins):
    shape, dtype = _out(eqn)
    e = lw.emit("exp", [ins[0]], None, shape, dtype)
    return lw.emit("sub", [e, lw.scalar(1.0, ins[0])], None, shape, dtype, "expm1")


def _clamp(lw, eqn, ins):
    lo, x, hi = ins
    shape, dtype = _out(eqn)
    a, b = _known_scalar(lw, lo), _known_scalar(lw, hi)
    if a is not None and b is not None and lw.shape(x) == shape and dtype == "F32":
        return lw.emit("clip", [x], {"min": float(a), "max": float(b)}, shape, dtype)
    m = lw.emit("maximum", [x, lo], None, shape, dtype)
    return lw.emit("minimum", [m, hi], None, shape, dtype, "clamp")


def _select_n(lw, eqn, ins):
    pred, cases = ins[0], ins[1:]
    shape, dtype = _out(eqn)
    if len(cases) == 1:
        return cases[0]
    if len(cases) != 2 or lw.dtype(pred) != "BOOL":
        raise lw.error("only a two-way select on a boolean predicate is supported")
    return lw.emit("where", [pred, cases[1], cases[0]], None, shape, dtype, "where")


def _convert(lw, eqn, ins):
    shape, dtype = _out(eqn)
    if lw.dtype(ins[0]) == dtype:
        return ins[0]
    return lw.emit("cast", [ins[0]], {"to": dtype}, shape, dtype)


def _reduce(op: str):
    def lower(lw, eqn, ins):
        shape, dtype = _out(eqn)
        axes = [int(a) for a in eqn.params["axes"]]
        if not axes:
            return ins[0]
        return lw.emit(op, [ins[0]], {"axes": axes}, shape, dtype)

    return lower


def _arg(op: str):
    def lower(lw, eqn, ins):
        shape, dtype = _out(eqn)
        (axis,) = eqn.params["axes"]
        return lw.emit(op, [ins[0]], {"axis": int(axis)}, shape, "I64")

    return lower


def _cumsum(lw, eqn, ins):
    if eqn.params.get("reverse"):
        raise lw.error("a reversed cumulative sum is not supported")
    shape, dtype = _out(eqn)
    return lw.emit("cumsum", [ins[0]], {"axis": int(eqn.params["axis"])}, shape, dtype)


def reshape_to(lw, x: str, shape: list[int]) -> str:
    """``x`` reshaped to the fixed ``shape`` (nothing emitted when it already is)."""
    if lw.shape(x) == list(shape):
        return x
    return lw.layout("reshape", x, {"shape": list(shape)}, list(shape))


def transpose(lw, x: str, perm: list[int]) -> str:
    """``x`` with its axes permuted (nothing emitted for the identity)."""
    perm = [int(p) for p in perm]
    if perm == list(range(len(perm))):
        return x
    shape = lw.shape(x)
    return lw.layout("transpose", x, {"perm": perm}, [shape[p] for p in perm])


def _broadcast_in_dim(lw, eqn, ins):
    x = ins[0]
    shape, dtype = _out(eqn)
    dims = eqn.params["broadcast_dimensions"]
    src = lw.shape(x)
    inserted = [1] * len(shape)
    for i, d in enumerate(dims):
        inserted[d] = src[i]
    x = reshape_to(lw, x, inserted)
    if inserted == shape:
        return x
    return lw.emit("expand", [x], {"shape": lw.shape_attr(inserted, shape, "expand")}, shape,
                   dtype)


def _reshape(lw, eqn, ins):
    if eqn.params.get("dimensions") is not None:
        raise lw.error("reshape with a dimension order is not supported")
    shape, _ = _out(eqn)
    return reshape_to(lw, ins[0], shape)


def _squeeze(lw, eqn, ins):
    shape, _ = _out(eqn)
    return reshape_to(lw, ins[0], shape)


def _transpose(lw, eqn, ins):
    return transpose(lw, ins[0], eqn.params["permutation"])


def _concatenate(lw, eqn, ins):
    shape, dtype = _out(eqn)
    if len(ins) == 1:
        return ins[0]
    return lw.emit("concat", list(ins), {"axis": int(eqn.params["dimension"])}, shape, dtype)


def _split(lw, eqn, ins):
    sizes = [int(s) for s in eqn.params["sizes"]]
    outs = lw.graph.add_node("split", [ins[0]], {"axis": int(eqn.params["axis"]),
                                                 "sizes": sizes}, outputs=["split"] * len(sizes))
    for k, value in enumerate(outs):
        shape, dtype = _out(eqn, k)
        lw.define(value, dtype, shape)
    return outs


def slice_(lw, x: str, starts, ends, steps=None, shape=None) -> str:
    """NumPy ``x[starts:ends:steps]`` over every axis (only the axes that change)."""
    src = lw.shape(x)
    steps = list(steps or [1] * len(src))
    axes = [a for a in range(len(src))
            if (starts[a], ends[a], steps[a]) != (0, src[a], 1)]
    if not axes:
        return x
    if shape is None:
        shape = [len(range(starts[a], ends[a], steps[a])) if a in axes else src[a]
                 for a in range(len(src))]
    if any(not isinstance(v, int) for a in axes for v in (starts[a], src[a])):
        raise lw.error("slicing a symbolic dim is not supported")
    attrs = {"starts": [int(starts[a]) for a in axes], "ends": [int(ends[a]) for a in axes],
             "axes": axes}
    if any(steps[a] != 1 for a in axes):
        attrs["steps"] = [int(steps[a]) for a in axes]
    return lw.emit("slice", [x], attrs, shape, lw.dtype(x))


def _slice(lw, eqn, ins):
    shape, _ = _out(eqn)
    p = eqn.params
    return slice_(lw, ins[0], list(p["start_indices"]), list(p["limit_indices"]),
                  list(p["strides"]) if p["strides"] else None, shape)


def _static_starts(lw, values: list[str], sizes, src) -> list[int]:
    starts = []
    for v, size, dim in zip(values, sizes, src):
        if v not in lw.known:
            raise lw.error("the slice start depends on the inputs; only starts known while "
                           "tracing are supported")
        starts.append(0 if size == dim else int(np.clip(int(lw.known[v]), 0, dim - size)))
    return starts


def _dynamic_slice(lw, eqn, ins):
    x, index = ins[0], ins[1:]
    sizes = [int(s) for s in eqn.params["slice_sizes"]]
    starts = _static_starts(lw, index, sizes, lw.shape(x))
    shape, _ = _out(eqn)
    return slice_(lw, x, starts, [s + n for s, n in zip(starts, sizes)], shape=shape)


def _dynamic_update_slice(lw, eqn, ins):
    x, update, index = ins[0], ins[1], ins[2:]
    src, upd = lw.shape(x), lw.shape(update)
    starts = _static_starts(lw, index, upd, src)
    changed = [a for a in range(len(src)) if upd[a] != src[a]]
    if len(changed) > 1:
        raise lw.error("an update slice narrower than the operand on more than one axis "
                       "is not supported")
    if not changed:
        return update
    (axis,) = changed
    parts = []
    s, n = starts[axis], upd[axis]
    if s > 0:
        ends = list(src)
        ends[axis] = s
        parts.append(slice_(lw, x, [0] * len(src), ends))
    parts.append(update)
    if s + n < src[axis]:
        begin = [0] * len(src)
        begin[axis] = s + n
        parts.append(slice_(lw, x, begin, list(src)))
    shape, dtype = _out(eqn)
    return lw.emit("concat", parts, {"axis": axis}, shape, dtype, "update_slice")


def _pad(lw, eqn, ins):
    x, value = ins
    fill = _known_scalar(lw, value)
    if fill is None:
        raise lw.error("the padding value must be a constant")
    config = eqn.params["padding_config"]
    if any(interior for _, _, interior in config):
        raise lw.error("interior padding is not supported")
    src = lw.shape(x)
    pads = [[max(0, lo), max(0, hi)] for lo, hi, _ in config]
    out_shape = [d + a + b for d, (a, b) in zip(src, pads)]
    if any(p != [0, 0] for p in pads):
        attrs = {"pads": pads}
        if fill != 0:
            attrs["value"] = float(fill)
        x = lw.emit("pad", [x], attrs, out_shape, lw.dtype(x))
    starts = [-min(0, lo) for lo, _, _ in config]
    ends = [d - (-min(0, hi)) for d, (_, hi, _) in zip(out_shape, config)]
    return slice_(lw, x, starts, ends)


def _rev(lw, eqn, ins):
    shape, _ = _out(eqn)
    axes = [int(a) for a in eqn.params["dimensions"]]
    if ins[0] in lw.graph.constants:  # a kernel flipped for a transposed convolution
        return lw.derive(ins[0], np.flip(lw.graph.constants[ins[0]], axes))
    starts = [-1 if a in axes else 0 for a in range(len(shape))]
    ends = [-(2**63) if a in axes else d for a, d in enumerate(shape)]
    steps = [-1 if a in axes else 1 for a in range(len(shape))]
    return slice_(lw, ins[0], starts, ends, steps, shape)


def _stack(lw, eqn, ins):
    shape, dtype = _out(eqn)
    axis = int(eqn.params["axis"])
    rows = [reshape_to(lw, v, shape[:axis] + [1] + shape[axis + 1:]) for v in ins]
    if len(rows) == 1:
        return rows[0]
    return lw.emit("concat", rows, {"axis": axis}, shape, dtype, "stack")


def _max_pool(lw, eqn, ins):
    p = eqn.params
    shape, dtype = _out(eqn)
    rank = len(shape)
    window = [int(w) for w in p["window_dimensions"]]
    strides = [int(s) for s in p["window_strides"]]
    pads = [[int(a), int(b)] for a, b in p["padding"]]
    dilation = [int(d) for d in p["window_dilation"]]
    if any(int(d) != 1 for d in p["base_dilation"]):
        raise lw.error("a pooling window over a dilated input is not supported")
    spatial = [a for a in range(rank)
               if (window[a], strides[a], pads[a], dilation[a]) != (1, 1, [0, 0], 1)]
    if rank == 4 and set(spatial) <= {1, 2}:  # NHWC: pool in NCHW between transposes
        x = transpose(lw, ins[0], [0, 3, 1, 2])
        perm, back = [0, 3, 1, 2], [0, 2, 3, 1]
    elif rank in (3, 4) and set(spatial) <= set(range(2, rank)):
        x, perm, back = ins[0], list(range(rank)), None
    else:
        raise lw.error("only pooling over the trailing (NCHW / NCL) or the middle (NHWC) "
                       "axes is supported")
    w, s, d = ([v[a] for a in perm[2:]] for v in (window, strides, dilation))
    pad = [pads[a] for a in perm[2:]]
    pooled_shape = [shape[a] for a in perm]
    if rank == 4:
        attrs = {"kernel": w, "stride": s, "padding": pad, "dilation": d}
        y = lw.emit("max_pool2d", [x], attrs, pooled_shape, dtype)
    else:
        attrs = {"kernel": w[0], "stride": s[0], "padding": pad[0], "dilation": d[0]}
        y = lw.emit("max_pool1d", [x], attrs, pooled_shape, dtype)
    return transpose(lw, y, back) if back else y


def _top_k(lw, eqn, ins):
    """``lax.top_k`` as ``k`` rounds of max + argmax over the last axis, each masking
    the winner with ``-inf`` (ties go to the lower index, as in JAX)."""
    x = ins[0]
    k = int(eqn.params["k"])
    shape = lw.shape(x)
    dtype = lw.dtype(x)
    if not dtype.startswith(("F", "BF")) or not isinstance(shape[-1], int):
        raise lw.error("top_k is supported on floats over a fixed last axis")
    one = shape[:-1] + [1]
    positions = lw.constant(np.arange(shape[-1], dtype=np.int64), "positions")
    lowest = lw.scalar(-np.inf, x)
    values, indices = [], []
    for j in range(k):
        values.append(lw.emit("reduce_max", [x], {"axes": [-1], "keepdims": True}, one, dtype))
        indices.append(lw.emit("argmax", [x], {"axis": -1, "keepdims": True}, one, "I64"))
        if j + 1 < k:
            hit = lw.emit("equal", [positions, indices[-1]], None, shape, "BOOL")
            x = lw.emit("where", [hit, lowest, x], None, shape, dtype)
    out = shape[:-1] + [k]
    if k == 1:
        return [reshape_to(lw, values[0], out), reshape_to(lw, indices[0], out)]
    return [lw.emit("concat", values, {"axis": -1}, out, dtype, "top_k_values"),
            lw.emit("concat", indices, {"axis": -1}, out, "I64", "top_k_indices")]


def _iota(lw, eqn, ins):
    import jax

    with jax.ensure_compile_time_eval():
        value = eqn.primitive.bind(**eqn.params)
    return lw.constant(np.asarray(value), "iota")


def index_axis0(lw, x: str, i: int) -> str:
    """``x[i]`` for a static ``i`` (a scan step's slice of its inputs)."""
    if x in lw.known:
        return lw.constant(lw.known[x][i], "scan_x")
    src = lw.shape(x)
    part = slice_(lw, x, [i] + [0] * (len(src) - 1), [i + 1] + src[1:])
    return reshape_to(lw, part, src[1:])


def stack(lw, parts: list[str], shape: list[int]) -> str:
    """The values ``parts`` stacked along a new axis 0 (a scan's outputs)."""
    if all(p in lw.known for p in parts):
        return lw.constant(np.stack([lw.known[p] for p in parts]), "scan_y")
    rows = [reshape_to(lw, p, [1] + shape[1:]) for p in parts]
    if len(rows) == 1:
        return rows[0]
    return lw.emit("concat", rows, {"axis": 0}, shape, lw.dtype(parts[0]), "stack")


def _strip_index_wrap(lw, ids: str) -> str:
    """``where(ids < 0, ids + n, ids)`` (JAX's negative-index fix-up) -> ``ids``: rml's
    ``gather`` counts negative indices from the end itself."""
    producers = lw.graph.producers()
    node = producers.get(ids)
    if node is None or node.op != "where":
        return ids
    pred, wrapped, plain = node.inputs
    p, w = producers.get(pred), producers.get(wrapped)
    if (p is not None and p.op == "less" and p.inputs[0] == plain
            and _known_scalar(lw, p.inputs[1]) == 0
            and w is not None and w.op == "add" and plain in w.inputs):
        return plain
    return ids


def _take_axis(eqn, src, idx) -> int | None:
    """The axis ``a`` when the gather is NumPy ``take(operand, indices[..., 0], axis=a)``
    (an embedding lookup ``table[ids]``, ``x[:, t]``): one collapsed axis, the rest of
    the operand kept whole, the index batch dims in place of axis ``a``."""
    dn = eqn.params["dimension_numbers"]
    collapsed = tuple(dn.collapsed_slice_dims)
    if (len(collapsed) != 1 or tuple(dn.start_index_map) != collapsed or not idx
            or idx[-1] != 1 or tuple(getattr(dn, "operand_batching_dims", ()))):
        return None
    (a,) = collapsed
    batch = len(idx) - 1
    offsets = tuple(range(a)) + tuple(range(a + batch, batch + len(src) - 1))
    sizes = tuple(1 if j == a else d for j, d in enumerate(src))
    if tuple(dn.offset_dims) != offsets or tuple(eqn.params["slice_sizes"]) != sizes:
        return None
    return a


def _gather(lw, eqn, ins):
    data, indices = ins
    src, idx = lw.shape(data), lw.shape(indices)
    shape, dtype = _out(eqn)
    axis = _take_axis(eqn, src, idx)
    if axis is not None and indices in lw.known:
        picked = lw.known[indices].reshape(idx[:-1]).astype(np.int64)
        if isinstance(src[axis], int) and np.all((picked >= 0) & (picked < src[axis])):
            ids = lw.constant(picked, "index")
            return lw.emit("gather", [data, ids], {"axis": axis}, shape, dtype)
    elif axis is not None:
        node = lw.graph.producers().get(indices)
        if node is not None and node.op == "reshape" and lw.shape(node.inputs[0]) == idx[:-1]:
            ids = node.inputs[0]
        else:
            ids = reshape_to(lw, indices, idx[:-1])
        ids = _strip_index_wrap(lw, ids)
        return lw.emit("gather", [data, ids], {"axis": axis}, shape, dtype)
    if indices in lw.known:
        return _static_gather(lw, eqn, data, indices)
    raise lw.error("only NumPy-style takes along one axis (embedding lookups, x[:, ids]) "
                   "and gathers at constant indices are supported")


def _static_gather(lw, eqn, data, indices):
    """A gather at known indices, as ``gather`` over the flattened operand at the flat
    positions the same gather picks from an arange."""
    import jax

    src = lw.shape(data)
    if not all(isinstance(d, int) for d in src):
        raise lw.error("a gather at constant indices from a symbolically shaped operand is "
                       "not supported")
    positions = np.arange(math.prod(src), dtype=np.int32).reshape(src)
    with jax.ensure_compile_time_eval():
        picked = np.asarray(eqn.primitive.bind(positions, lw.known[indices], **eqn.params))
    flat = reshape_to(lw, data, [math.prod(src)])
    shape, dtype = _out(eqn)
    return lw.emit("gather", [flat, lw.constant(picked, "gather_index")], None, shape, dtype)


def _dot_general(lw, eqn, ins):
    lhs, rhs = ins
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lc, rc, lb, rb = (list(map(int, d)) for d in (lc, rc, lb, rb))
    ls, rs = lw.shape(lhs), lw.shape(rhs)
    shape, dtype = _out(eqn)
    if lw.dtype(lhs) != dtype or lw.dtype(rhs) != dtype:
        raise lw.error("a dot product whose result type differs from its operands' is "
                       "not supported")
    lfree = [d for d in range(len(ls)) if d not in lc and d not in lb]
    rfree = [d for d in range(len(rs)) if d not in rc and d not in rb]
    if not lb and len(rs) == 2 and len(rc) == 1 and lc == [len(ls) - 1]:
        if rhs in lw.graph.constants and len(ls) >= 1:
            weight = rhs if rc == [1] else transpose(lw, rhs, [1, 0])
            return lw.emit("linear", [lhs, weight], None, shape, dtype)
        if len(ls) >= 2:
            attrs = {"transpose_b": True} if rc == [1] else None
            return lw.emit("matmul", [lhs, rhs], attrs, shape, dtype)
    batch = [ls[d] for d in lb]
    m = math.prod(ls[d] for d in lfree)
    n = math.prod(rs[d] for d in rfree)
    k = math.prod(ls[d] for d in lc)
    attrs = {}
    if len(lfree) == 1 and len(lc) == 1 and lb + lc + lfree == list(range(len(ls))):
        a, attrs["transpose_a"] = reshape_to(lw, lhs, batch + [k, m]), True
    else:
        a = reshape_to(lw, transpose(lw, lhs, lb + lfree + lc), batch + [m, k])
    if len(rfree) == 1 and len(rc) == 1 and rb + rfree + rc == list(range(len(rs))):
        b, attrs["transpose_b"] = reshape_to(lw, rhs, batch + [n, k]), True
    else:
        b = reshape_to(lw, transpose(lw, rhs, rb + rc + rfree), batch + [k, n])
    out = lw.emit("matmul", [a, b], attrs, batch + [m, n], dtype)
    return reshape_to(lw, out, shape)


def _conv(lw, eqn, ins):
    lhs, rhs = ins
    p = eqn.params
    dn = p["dimension_numbers"]
    lhs_spec, rhs_spec, out_spec = (list(map(int, s)) for s in dn)
    nd = len(lhs_spec) - 2
    if nd not in (1, 2):
        raise lw.error(f"{nd}-D convolutions are not supported (only 1-D and 2-D)")
    if p["batch_group_count"] != 1:
        raise lw.error("batch_group_count > 1 is not supported")
    shape, dtype = _out(eqn)
    x = transpose(lw, lhs, lhs_spec)
    w = transpose(lw, rhs, rhs_spec)
    strides = [int(s) for s in p["window_strides"]]
    lhs_dil = [int(s) for s in (p["lhs_dilation"] or [1] * nd)]
    rhs_dil = [int(s) for s in (p["rhs_dilation"] or [1] * nd)]
    pads = [[int(a), int(b)] for a, b in p["padding"]]
    groups = int(p["feature_group_count"])
    ncl = [shape[d] for d in out_spec]
    if all(d == 1 for d in lhs_dil):
        if any(v < 0 for pair in pads for v in pair):
            raise lw.error("negative convolution padding is not supported")
        attrs = {"stride": strides, "padding": pads, "dilation": rhs_dil, "groups": groups}
        op = "conv2d"
    else:
        if any(s != 1 for s in strides) or groups != 1:
            raise lw.error("a dilated-input convolution must have unit strides and one group "
                           "(the form jax.lax.conv_transpose writes)")
        w, attrs = _transposed_kernel(lw, w, pads, rhs_dil, lhs_dil)
        attrs.update(stride=lhs_dil, dilation=rhs_dil)
        op = "conv_transpose2d"
    if nd == 1:
        op = op.replace("2d", "1d")
        attrs = {k: v[0] if isinstance(v, list) else v for k, v in attrs.items()}
    y = lw.emit(op, [x, w], attrs, ncl, dtype)
    inverse = [out_spec.index(i) for i in range(len(out_spec))]
    return transpose(lw, y, inverse)


def _transposed_kernel(lw, w: str, pads, dilation, stride):
    """rml's ``conv_transpose`` kernel and padding for JAX's dilated-input convolution.

    JAX convolves the stride-dilated input with ``w [O, I, k…]`` padded by ``(lo, hi)``;
    a transposed convolution with kernel ``w[i, o, flip(k)]`` and padding
    ``d·(k−1) − lo`` / ``d·(k−1) − hi`` (any shortfall on the right becomes
    ``output_padding``) computes the same thing.
    """
    wshape = lw.shape(w)
    nd = len(wshape) - 2
    swapped = transpose(lw, w, [1, 0] + list(range(2, 2 + nd)))
    if swapped in lw.graph.constants:
        kernel = lw.derive(swapped, np.flip(lw.graph.constants[swapped],
                                            axis=tuple(range(2, 2 + nd))))
    else:
        s = lw.shape(swapped)
        kernel = slice_(lw, swapped, [0, 0] + [-1] * nd, s[:2] + [-(2**63)] * nd,
                        [1, 1] + [-1] * nd, s)
    padding, out_pad = [], []
    for (lo, hi), d, s, k in zip(pads, dilation, stride, wshape[2:]):
        before, after = d * (k - 1) - lo, d * (k - 1) - hi
        extra = max(0, -after)
        if before < 0 or (extra and extra >= max(s, d)):
            raise lw.error("this transposed-convolution padding has no rml-graph equivalent")
        padding.append([before, after + extra])
        out_pad.append(extra)
    attrs = {"padding": padding}
    if any(out_pad):
        attrs["output_padding"] = out_pad
    return kernel, attrs


_UNARY = {
    "neg": "neg", "exp": "exp", "log": "log", "tanh": "tanh", "logistic": "sigmoid",
    "sqrt": "sqrt", "rsqrt": "rsqrt", "abs": "abs", "erf": "erf", "sin": "sin", "cos": "cos",
    "copy": "identity", "copy_p": "identity", "stop_gradient": "identity",
    "reduce_precision": "identity", "optimization_barrier": "identity",
}
_BINARY = {
    "add": "add", "add_any": "add", "sub": "sub", "mul": "mul", "div": "div", "pow": "pow",
    "min": "minimum", "eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
    "gt": "greater", "ge": "greater_equal",
}

#: Primitive name -> lowering.
LOWERINGS = {
    **{k: _unary(v) for k, v in _UNARY.items()},
    **{k: _binary(v) for k, v in _BINARY.items()},
    "max": _max,
    "and": _logical("and"), "or": _logical("or"), "not": _logical("not"),
    "integer_pow": _integer_pow, "square": _square, "erfc": _erfc, "log1p": _log1p,
    "expm1": _expm1, "clamp": _clamp, "select_n": _select_n,
    "convert_element_type": _convert,
    "reduce_sum": _reduce("reduce_sum"), "reduce_max": _reduce("reduce_max"),
    "reduce_min": _reduce("reduce_min"), "reduce_prod": _reduce("reduce_prod"),
    "argmax": _arg("argmax"), "argmin": _arg("argmin"), "cumsum": _cumsum,
    "broadcast_in_dim": _broadcast_in_dim, "reshape": _reshape, "squeeze": _squeeze,
    "transpose": _transpose, "concatenate": _concatenate, "split": _split,
    "slice": _slice, "dynamic_slice": _dynamic_slice,
    "dynamic_update_slice": _dynamic_update_slice, "pad": _pad, "iota": _iota, "rev": _rev,
    "stack": _stack, "reduce_window_max": _max_pool, "top_k": _top_k,
    "gather": _gather, "dot_general": _dot_general, "conv_general_dilated": _conv,
}
