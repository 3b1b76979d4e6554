"""TF op -> rml-graph lowerings, one function per op family (see docs/exporters.md).

Each lowering gets the :class:`~rml_export.tf_route.Lowering` walk and one TF operation
(``op.type``, ``op.inputs``, ``op.get_attr``) and adds the rml nodes computing the op's
outputs. Static inputs (axes, shapes, paddings) are read with ``L.static``; output
shapes, symbolic where the batch is, with ``L.dims``. NHWC ops are wrapped in explicit
transposes to rml's NCHW.
"""

from __future__ import annotations

import numpy as np

from .ir import dtype_name

#: Open slice bounds (NumPy ``:`` forward and backward).
INT_MAX = 2**63 - 1
INT_MIN = -(2**63)

#: NHWC -> NCHW and back.
TO_NCHW = [0, 3, 1, 2]
TO_NHWC = [0, 2, 3, 1]

#: TF ops that are one rml op of one input.
UNARY = {
    "Relu": "relu", "Elu": "elu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Softplus": "softplus",
    "Erf": "erf", "Exp": "exp", "Log": "log", "Sqrt": "sqrt", "Rsqrt": "rsqrt", "Neg": "neg",
    "Abs": "abs", "Sin": "sin", "Cos": "cos", "Softmax": "softmax", "LogSoftmax": "log_softmax",
}
#: TF ops that are one rml op of all their inputs (broadcasting as in TF).
BINARY = {
    "AddV2": "add", "Add": "add", "Sub": "sub", "Mul": "mul", "RealDiv": "div", "Div": "div",
    "Maximum": "maximum", "Minimum": "minimum", "Pow": "pow", "Equal": "equal",
    "NotEqual": "not_equal", "Less": "less", "LessEqual": "less_equal", "Greater": "greater",
    "GreaterEqual": "greater_equal", "SelectV2": "where",
}
#: TF reductions (axes from a static input, ``keep_dims``).
REDUCE = {"Mean": "reduce_mean", "Sum": "reduce_sum", "Max": "reduce_max", "Min": "reduce_min",
          "Prod": "reduce_prod"}


def lower_node(L, op) -> None:
    """Lower one TF op, or raise the ExportError naming it."""
    if op.type in UNARY:
        L.emit(op, UNARY[op.type], [L.value(op.inputs[0])])
    elif op.type == "AddV2" and _batch_normalization(L, op):
        pass
    elif op.type == "Div" and not op.outputs[0].dtype.is_floating:
        raise L.fail(op, "integer division (TF rounds toward zero) has no rml-graph equivalent")
    elif op.type in BINARY:
        L.emit(op, BINARY[op.type], [L.value(t) for t in op.inputs])
    elif op.type in REDUCE:
        _reduce(L, op)
    elif op.type in LOWERINGS:
        LOWERINGS[op.type](L, op)
    else:
        raise L.fail(op, "rml-graph has no equivalent and the TF route has no lowering for it")


def _dtype(tensor) -> str:
    return dtype_name(tensor.dtype.as_numpy_dtype)


def _rank(tensor) -> int:
    return tensor.shape.rank


def _axis(axis: int, rank: int) -> int:
    return int(axis) + rank if axis < 0 else int(axis)


def _scalar(L, value: float, like) -> str:
    return L.constant(np.asarray(value, dtype=like.dtype.as_numpy_dtype), "scalar")


def _shape_attr(L, op, dims: list, source=None) -> list:
    """A ``reshape``/``expand`` shape: integers and plain symbols as they are; one
    product of symbols becomes ``-1`` (``expand``: a size the input keeps)."""
    out, inferred = [], False
    for i, d in enumerate(dims):
        if isinstance(d, int) or d.isidentifier():
            out.append(d)
        elif source is not None and i < len(source) and source[i] == d:
            out.append(-1)
        elif not inferred and source is None:
            out.append(-1)
            inferred = True
        else:
            raise L.fail(op, f"the shape {dims} has more than one size computed from symbols")
    return out


# -- linear algebra -----------------------------------------------------------------------

def _matmul(L, op, a, b, ta: bool, tb: bool) -> None:
    if L.is_static(b) and _rank(b) == 2 and not ta:
        w = L.static(op, 1, "weight")
        L.emit(op, "linear", [L.value(a), L.weight(op, 1, w if tb else w.T)])
        return
    L.emit(op, "matmul", [L.value(a), L.value(b)], {"transpose_a": ta, "transpose_b": tb})


def _mat_mul(L, op) -> None:
    _matmul(L, op, op.inputs[0], op.inputs[1], op.get_attr("transpose_a"),
            op.get_attr("transpose_b"))


def _batch_mat_mul(L, op) -> None:
    _matmul(L, op, op.inputs[0], op.inputs[1], op.get_attr("adj_x"), op.get_attr("adj_y"))


def _bias_add(L, op) -> None:
    x, b = L.value(op.inputs[0]), L.value(op.inputs[1])
    if op.get_attr("data_format") == b"NCHW" and _rank(op.inputs[0]) > 2:
        trailing = _rank(op.inputs[0]) - 2
        b = L.tmp(op, "unsqueeze", [b], {"axes": list(range(1, 1 + trailing))})
    L.emit(op, "add", [x, b])


def _einsum(L, op) -> None:
    """Two-operand einsum without ``...``: transposes, reshapes and one ``matmul``."""
    equation = op.get_attr("equation").decode().replace(" ", "")
    lhs, _, out = equation.partition("->")
    terms = lhs.split(",")
    if "." in equation or not _ or len(terms) != 2 or len(op.inputs) != 2:
        raise L.fail(op, f"einsum {equation!r}: only two operands without '...' are lowered")
    sa, sb = terms
    if any(len(set(s)) != len(s) for s in (sa, sb, out)) or not set(out) <= set(sa + sb):
        raise L.fail(op, f"einsum {equation!r}: repeated or unknown output indices")
    if (set(sa) ^ set(sb)) - set(out):
        raise L.fail(op, f"einsum {equation!r}: an index summed over one operand only")
    batch = [c for c in out if c in sa and c in sb]
    free_a = [c for c in out if c in sa and c not in sb]
    free_b = [c for c in out if c in sb and c not in sa]
    contract = [c for c in sa if c in sb and c not in out]
    a_t, b_t = op.inputs
    size = {c: d for s, t in ((sa, a_t), (sb, b_t)) for c, d in zip(s, L.dims(t))}
    dtype = _dtype(op.outputs[0])
    k = _product([size[c] for c in contract])
    n = _product([size[c] for c in free_b])
    m_dims = [size[c] for c in free_a] or [1]
    extra = max(len(free_a) - 1, 0)  # b gets size-1 axes so matmul broadcasts free_a

    def arrange(value, sub, order, shape, reshape):
        perm = [sub.index(c) for c in order]
        if perm != list(range(len(perm))):
            value = L.tmp(op, "transpose", [value], {"perm": perm}, dtype,
                          [size[c] for c in order])
        if reshape:
            value = L.tmp(op, "reshape", [value], {"shape": _shape_attr(L, op, shape)}, dtype,
                          shape)
        return value

    batch_dims = [size[c] for c in batch]
    a = arrange(L.value(a_t), sa, batch + free_a + contract, batch_dims + m_dims + [k],
                len(contract) != 1 or not free_a)
    if not batch and L.is_static(b_t):  # linear broadcasts over every free_a axis
        w = np.transpose(L.static(op, 1, "weight"), [sb.index(c) for c in contract + free_b])
        y = L.tmp(op, "linear", [a, L.weight(op, 1, w.reshape(k, n).T)], None, dtype,
                  m_dims + [n])
    else:
        b = arrange(L.value(b_t), sb, batch + contract + free_b,
                    batch_dims + [1] * extra + [k, n],
                    len(contract) != 1 or len(free_b) != 1 or extra > 0)
        y = L.tmp(op, "matmul", [a, b], None, dtype, batch_dims + m_dims + [n])
    got = batch + free_a + free_b
    if not free_a or len(free_b) != 1:
        shape = [size[c] for c in got]
        y = L.tmp(op, "reshape", [y], {"shape": _shape_attr(L, op, shape)}, dtype, shape)
    L.emit(op, "transpose", [y], {"perm": [got.index(c) for c in out]})


def _product(dims: list):
    """The product of dims; symbolic factors joined with ``*``."""
    fixed, syms = 1, []
    for d in dims:
        if isinstance(d, int):
            fixed *= d
        else:
            head, *rest = d.split("*")
            if head.isdigit():
                fixed *= int(head)
                syms += rest
            else:
                syms += [head] + rest
    if not syms:
        return fixed
    return "*".join(([str(fixed)] if fixed != 1 else []) + sorted(syms))


# -- elementwise --------------------------------------------------------------------------

def _relu6(L, op) -> None:
    L.emit(op, "clip", [L.value(op.inputs[0])], {"min": 0.0, "max": 6.0})


def _leaky_relu(L, op) -> None:
    L.emit(op, "leaky_relu", [L.value(op.inputs[0])], {"alpha": float(op.get_attr("alpha"))})


def _erfc(L, op) -> None:
    e = L.tmp(op, "erf", [L.value(op.inputs[0])])
    L.emit(op, "sub", [_scalar(L, 1.0, op.inputs[0]), e])


def _log1p(L, op) -> None:
    x = L.tmp(op, "add", [L.value(op.inputs[0]), _scalar(L, 1.0, op.inputs[0])])
    L.emit(op, "log", [x])


def _expm1(L, op) -> None:
    e = L.tmp(op, "exp", [L.value(op.inputs[0])])
    L.emit(op, "sub", [e, _scalar(L, 1.0, op.inputs[0])])


def _selu(L, op) -> None:
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    e = L.tmp(op, "elu", [L.value(op.inputs[0])], {"alpha": alpha})
    L.emit(op, "mul", [e, _scalar(L, scale, op.inputs[0])])


def _softsign(L, op) -> None:
    x = L.value(op.inputs[0])
    a = L.tmp(op, "abs", [x])
    d = L.tmp(op, "add", [a, _scalar(L, 1.0, op.inputs[0])])
    L.emit(op, "div", [x, d])


def _square(L, op) -> None:
    x = L.value(op.inputs[0])
    L.emit(op, "mul", [x, x])


def _squared_difference(L, op) -> None:
    d = L.tmp(op, "sub", [L.value(op.inputs[0]), L.value(op.inputs[1])])
    L.emit(op, "mul", [d, d])


def _reciprocal(L, op) -> None:
    L.emit(op, "div", [_scalar(L, 1.0, op.inputs[0]), L.value(op.inputs[0])])


def _add_n(L, op) -> None:
    values = [L.value(t) for t in op.inputs]
    acc = values[0]
    for v in values[1:-1]:
        acc = L.tmp(op, "add", [acc, v])
    if len(values) == 1:
        L.bind(op, acc)
    else:
        L.emit(op, "add", [acc, values[-1]])


def _select(L, op) -> None:
    cond, a, b = (L.value(t) for t in op.inputs)
    extra = _rank(op.inputs[1]) - _rank(op.inputs[0])
    if _rank(op.inputs[0]) == 1 and extra > 0:  # v1 Select picks whole rows
        cond = L.tmp(op, "unsqueeze", [cond], {"axes": list(range(1, 1 + extra))}, "BOOL")
    L.emit(op, "where", [cond, a, b])


def _logical_not(L, op) -> None:
    L.emit(op, "equal", [L.value(op.inputs[0]), L.constant(np.bool_(False), "false")])


def _logical_and(L, op) -> None:
    a, b = (L.value(t) for t in op.inputs)
    L.emit(op, "where", [a, b, L.constant(np.bool_(False), "false")])


def _logical_or(L, op) -> None:
    a, b = (L.value(t) for t in op.inputs)
    L.emit(op, "where", [a, L.constant(np.bool_(True), "true"), b])


def _cast(L, op) -> None:
    L.emit(op, "cast", [L.value(op.inputs[0])], {"to": _dtype(op.outputs[0])})


def _one_hot(L, op) -> None:
    indices, depth, on, off = op.inputs
    n = int(L.static(op, 1, "depth"))
    axis = op.get_attr("axis")
    rank = _rank(op.outputs[0])
    axis = rank - 1 if axis == -1 else axis
    ids = L.tmp(op, "unsqueeze", [L.value(indices)], {"axes": [axis]}, _dtype(indices))
    table = np.arange(n, dtype=indices.dtype.as_numpy_dtype).reshape(
        [n] + [1] * (rank - 1 - axis))
    hit = L.tmp(op, "equal", [ids, L.constant(table, "one_hot.range")], None, "BOOL")
    L.emit(op, "where", [hit, L.value(on), L.value(off)])


def _batch_normalization(L, op) -> bool:
    """``tf.nn.batch_normalization`` over constant statistics, ``x·inv + (β − mean·inv)``
    with ``inv = rsqrt(var + ε)·γ`` (TF folds ``inv`` and the sum into constants) ->
    ``batch_norm`` over the original, named statistics. False when it is not that."""
    def producer(tensor, kind):
        return tensor.op if tensor.op.type == kind else None

    for xm_t, sub_t in (op.inputs, op.inputs[::-1]):
        xm, sub = producer(xm_t, "Mul"), producer(sub_t, "Sub")
        if xm is None or sub is None or L.is_static(xm_t) or not L.is_static(sub_t):
            continue
        x_t, inv_t = xm.inputs if L.is_static(xm.inputs[1]) else xm.inputs[::-1]
        mm = producer(sub.inputs[1], "Mul")
        if mm is None or inv_t.name not in {t.name for t in mm.inputs}:
            continue
        mean_t = mm.inputs[0] if mm.inputs[1].name == inv_t.name else mm.inputs[1]
        inv = inv_t.op
        rsqrt_t, scale_t = inv.outputs[0], None
        if inv.type == "Mul":
            rsqrt_t, scale_t = inv.inputs if inv.inputs[0].op.type == "Rsqrt" else inv.inputs[::-1]
        add = producer(rsqrt_t.op.inputs[0], "AddV2") if rsqrt_t.op.type == "Rsqrt" else None
        if add is None:
            continue
        var_t, eps_t = add.inputs
        if var_t.shape.num_elements() == 1:
            var_t, eps_t = eps_t, var_t
        parts = [mean_t, var_t, scale_t, sub.inputs[0]]
        values = [None if t is None else L.inner_static(t) for t in parts]
        eps = L.inner_static(eps_t)
        if eps is None or eps.size != 1 or any(
                v is None for t, v in zip(parts, values) if t is not None):
            continue
        axis = _channel_axis(_rank(x_t), [v for v in values if v is not None])
        if axis is None:
            continue
        names = [L.constant(v.reshape(-1), L.constant_name(t)) if t is not None else ""
                 for t, v in zip(parts, values)]
        x = L.value(x_t)
        attrs = {"epsilon": float(str(np.float32(eps.reshape(()))))}
        if axis == 1:
            L.emit(op, "batch_norm", [x] + names, attrs)
            return True
        rank = _rank(x_t)
        perm = [0, rank - 1] + list(range(1, rank - 1))
        y = L.tmp(op, "transpose", [x], {"perm": perm})
        y = L.tmp(op, "batch_norm", [y] + names, attrs)
        L.emit(op, "transpose", [y], {"perm": [perm.index(i) for i in range(rank)]})
        return True
    return False


def _channel_axis(rank: int, params: list[np.ndarray]) -> int | None:
    """The one axis (1 or the last) along which per-channel parameters vary."""
    axes = set()
    for p in params:
        if p.ndim > rank:
            return None
        full = (1,) * (rank - p.ndim) + p.shape
        varying = [i for i, d in enumerate(full) if d != 1]
        if len(varying) != 1:
            return None
        axes.add(varying[0])
    if len(axes) != 1 or rank < 2:
        return None
    axis = axes.pop()
    return axis if axis in (1, rank - 1) else None


# -- reductions ---------------------------------------------------------------------------

def _reduce(L, op) -> None:
    rank = _rank(op.inputs[0])
    axes = sorted({_axis(a, rank) for a in np.atleast_1d(L.static(op, 1, "axis")).tolist()})
    x = L.value(op.inputs[0])
    if not axes:
        L.bind(op, x)
        return
    L.emit(op, REDUCE[op.type], [x], {"axes": axes, "keepdims": bool(op.get_attr("keep_dims"))})


def _arg_max(L, op) -> None:
    axis = _axis(int(L.static(op, 1, "axis")), _rank(op.inputs[0]))
    rml_op = "argmax" if op.type == "ArgMax" else "argmin"
    if op.outputs[0].dtype.as_numpy_dtype == np.int64:
        L.emit(op, rml_op, [L.value(op.inputs[0])], {"axis": axis})
        return
    idx = L.tmp(op, rml_op, [L.value(op.inputs[0])], {"axis": axis}, "I64")
    L.emit(op, "cast", [idx], {"to": _dtype(op.outputs[0])})


def _cumsum(L, op) -> None:
    if op.get_attr("exclusive") or op.get_attr("reverse"):
        raise L.fail(op, "exclusive or reverse cumsum has no rml-graph equivalent")
    axis = _axis(int(L.static(op, 1, "axis")), _rank(op.inputs[0]))
    L.emit(op, "cumsum", [L.value(op.inputs[0])], {"axis": axis})


# -- shape and layout ---------------------------------------------------------------------

def _reshape(L, op) -> None:
    L.emit(op, "reshape", [L.value(op.inputs[0])],
           {"shape": _shape_attr(L, op, L.dims(op.outputs[0]))})


def _transpose(L, op) -> None:
    perm = [int(p) for p in L.static(op, 1, "permutation")]
    L.emit(op, "transpose", [L.value(op.inputs[0])], {"perm": perm})


def _expand_dims(L, op) -> None:
    axis = _axis(int(np.asarray(L.static(op, 1, "axis")).reshape(-1)[0]), _rank(op.outputs[0]))
    L.emit(op, "unsqueeze", [L.value(op.inputs[0])], {"axes": [axis]})


def _squeeze(L, op) -> None:
    rank = _rank(op.inputs[0])
    axes = [_axis(a, rank) for a in op.get_attr("squeeze_dims")]
    if not axes:
        axes = [i for i, d in enumerate(L.dims(op.inputs[0])) if d == 1]
    L.emit(op, "squeeze", [L.value(op.inputs[0])], {"axes": sorted(axes)})


def _concat(L, op) -> None:
    axis = _axis(int(L.static(op, len(op.inputs) - 1, "axis")), _rank(op.outputs[0]))
    _join(L, op, [L.value(t) for t in op.inputs[:-1]], axis)


def _pack(L, op) -> None:
    axis = _axis(op.get_attr("axis"), _rank(op.outputs[0]))
    _join(L, op, [L.tmp(op, "unsqueeze", [L.value(t)], {"axes": [axis]}, _dtype(t))
                  for t in op.inputs], axis)


def _join(L, op, values: list[str], axis: int) -> None:
    if len(values) == 1:
        L.bind(op, values[0])
    else:
        L.emit(op, "concat", values, {"axis": axis})


def _unpack(L, op) -> None:
    axis = _axis(op.get_attr("axis"), _rank(op.inputs[0]))
    n = len(op.outputs)
    parts = L.graph.add_node("split", [L.value(op.inputs[0])], {"axis": axis, "sizes": [1] * n},
                             name=op.name, outputs=n)
    for i, part in enumerate(parts):
        L.emit(op, "squeeze", [part], {"axes": [axis]}, i)


def _split(L, op) -> None:
    axis = _axis(int(L.static(op, 0, "axis")), _rank(op.inputs[1]))
    L.emit_all(op, "split", [L.value(op.inputs[1])], {"axis": axis})


def _split_v(L, op) -> None:
    axis = _axis(int(L.static(op, 2, "axis")), _rank(op.inputs[0]))
    sizes = [L.dims(t)[axis] for t in op.outputs]
    if not all(isinstance(s, int) for s in sizes):
        raise L.fail(op, "split sizes along a symbolic axis")
    L.emit_all(op, "split", [L.value(op.inputs[0])], {"axis": axis, "sizes": sizes})


def _slice(L, op) -> None:
    begin = [int(b) for b in L.static(op, 1, "begin")]
    size = [int(s) for s in L.static(op, 2, "size")]
    ends = [INT_MAX if s == -1 else b + s for b, s in zip(begin, size)]
    L.emit(op, "slice", [L.value(op.inputs[0])],
           {"starts": begin, "ends": ends, "axes": list(range(len(begin)))})


def _strided_slice(L, op) -> None:
    """TF's masks -> one ``slice`` over the input axes, then ``squeeze``/``unsqueeze``."""
    begin, end, strides = (
        [int(v) for v in L.static(op, i, what)]
        for i, what in ((1, "begin"), (2, "end"), (3, "strides")))
    mask = {m: op.get_attr(m) for m in ("begin_mask", "end_mask", "ellipsis_mask",
                                        "new_axis_mask", "shrink_axis_mask")}
    rank = _rank(op.inputs[0])
    bit = lambda m, i: (mask[m] >> i) & 1  # noqa: E731
    consumed = sum(1 for i in range(len(begin))
                   if not bit("new_axis_mask", i) and not bit("ellipsis_mask", i))
    starts, ends, steps, axes, squeeze, final = [], [], [], [], [], []
    in_axis = 0
    for i in range(len(begin)):
        if bit("ellipsis_mask", i):
            for _ in range(rank - consumed):
                final.append(in_axis)
                in_axis += 1
            continue
        if bit("new_axis_mask", i):
            final.append(None)
            continue
        b, e, s = begin[i], end[i], strides[i]
        if bit("shrink_axis_mask", i):
            start, stop, s = b, (b + 1 if b != -1 else INT_MAX), 1
            squeeze.append(in_axis)
        else:
            start = (0 if s > 0 else INT_MAX) if bit("begin_mask", i) else b
            stop = (INT_MAX if s > 0 else INT_MIN) if bit("end_mask", i) else e
            final.append(in_axis)
        if (start, stop, s) != (0, INT_MAX, 1):
            starts.append(start), ends.append(stop), steps.append(s), axes.append(in_axis)
        in_axis += 1
    final += list(range(in_axis, rank))
    plan = []
    if axes:
        attrs = {"starts": starts, "ends": ends, "axes": axes}
        if any(s != 1 for s in steps):
            attrs["steps"] = steps
        plan.append(("slice", attrs))
    if squeeze:
        plan.append(("squeeze", {"axes": squeeze}))
    new = [i for i, a in enumerate(final) if a is None]
    if new:
        plan.append(("unsqueeze", {"axes": new}))
    L.chain(op, L.value(op.inputs[0]), plan)


def _gather(L, op) -> None:
    if op.get_attr("batch_dims"):
        raise L.fail(op, "gather with batch_dims has no rml-graph equivalent")
    axis = _axis(int(L.static(op, 2, "axis")), _rank(op.inputs[0]))
    indices = op.inputs[1]
    if L.is_static(indices):  # rml runs I64 indices; a fixed index list needs no I32
        ids = L.constant(L.static(op, 1, "indices").astype(np.int64), "indices")
    else:
        ids = L.value(indices)
    L.emit(op, "gather", [L.value(op.inputs[0]), ids], {"axis": axis})


def _pad(L, op) -> None:
    pads = [[int(b), int(a)] for b, a in L.static(op, 1, "paddings")]
    attrs = {"pads": pads}
    if op.type == "PadV2":
        attrs["value"] = float(L.static(op, 2, "pad value"))
    elif op.type == "MirrorPad":
        mode = op.get_attr("mode").decode()
        if mode != "REFLECT":
            raise L.fail(op, f"mirror padding mode {mode} has no rml-graph equivalent")
        attrs["mode"] = "reflect"
    L.emit(op, "pad", [L.value(op.inputs[0])], attrs)


def _broadcast_to(L, op) -> None:
    src = L.dims(op.inputs[0])
    out = L.dims(op.outputs[0])
    aligned = [None] * (len(out) - len(src)) + src
    L.emit(op, "expand", [L.value(op.inputs[0])], {"shape": _shape_attr(L, op, out, aligned)})


def _fill(L, op) -> None:
    out = L.dims(op.outputs[0])
    L.emit(op, "expand", [L.value(op.inputs[1])], {"shape": _shape_attr(L, op, out, [])})


def _tile(L, op) -> None:
    """``tile`` = ``expand`` where only size-1 axes repeat; else ``unsqueeze`` + ``expand``
    + ``reshape`` (a new axis before each repeated one)."""
    dims, out = L.dims(op.inputs[0]), L.dims(op.outputs[0])
    x = L.value(op.inputs[0])
    if all(d == o or d == 1 for d, o in zip(dims, out)):
        L.emit(op, "expand", [x], {"shape": _shape_attr(L, op, out, dims)})
        return
    reps = [int(r) for r in L.static(op, 1, "multiples")]
    repeated = [i for i, r in enumerate(reps) if r != 1 and dims[i] != 1]
    x = L.tmp(op, "unsqueeze", [x], {"axes": [i + k for k, i in enumerate(repeated)]})
    shape = []
    for i, r in enumerate(reps):
        shape += [r, -1] if i in repeated else [r if r != 1 else -1]
    x = L.tmp(op, "expand", [x], {"shape": shape})
    L.emit(op, "reshape", [x], {"shape": _shape_attr(L, op, out)})


# -- convolution, pooling, normalization (NHWC -> NCHW) ----------------------------------

def _nchw(L, op, index: int = 0) -> str:
    t = op.inputs[index]
    n, h, w, c = L.dims(t)
    return L.tmp(op, "transpose", [L.value(t)], {"perm": TO_NCHW}, _dtype(t), [n, c, h, w])


def _from_nchw(L, op, value: str) -> None:
    L.emit(op, "transpose", [value], {"perm": TO_NHWC})


def _nchw_out(L, op) -> list:
    n, h, w, c = L.dims(op.outputs[0])
    return [n, c, h, w]


def _check_nhwc(L, op) -> None:
    fmt = op.get_attr("data_format")
    if fmt not in (b"NHWC",):
        raise L.fail(op, f"data_format {fmt.decode()} (only NHWC is lowered)")


def _window(op, name: str) -> list[int]:
    v = list(op.get_attr(name))
    return [int(v[1]), int(v[2])]


def _same_pads(L, op, size, k, stride, dilation) -> list[int]:
    if not isinstance(size, int):
        raise L.fail(op, "SAME padding over a symbolic spatial size")
    out = -(-size // stride)
    total = max((out - 1) * stride + (k - 1) * dilation + 1 - size, 0)
    return [total // 2, total - total // 2]


def _pads(L, op, hw, kernel, strides, dilations) -> list:
    padding = op.get_attr("padding").decode()
    if padding == "VALID":
        return [[0, 0], [0, 0]]
    if padding == "SAME":
        return [_same_pads(L, op, hw[i], kernel[i], strides[i], dilations[i]) for i in range(2)]
    if padding == "EXPLICIT":
        p = list(op.get_attr("explicit_paddings"))
        return [[p[2], p[3]], [p[4], p[5]]]
    raise L.fail(op, f"padding {padding}")


def _conv2d(L, op) -> None:
    _check_nhwc(L, op)
    w = L.static(op, 1, "filter")  # [kH, kW, C_in, C_out] or depthwise [kH, kW, C, mult]
    strides, dilations = _window(op, "strides"), _window(op, "dilations")
    hw = L.dims(op.inputs[0])[1:3]
    attrs = {"stride": strides, "dilation": dilations,
             "padding": _pads(L, op, hw, w.shape[:2], strides, dilations)}
    if op.type == "DepthwiseConv2dNative":
        kh, kw, c, mult = w.shape
        weight = w.reshape(kh, kw, c * mult).transpose(2, 0, 1)[:, None]
        attrs["groups"] = int(c)
    else:
        weight = w.transpose(3, 2, 0, 1)
        groups = L.dims(op.inputs[0])[3] // w.shape[2]
        if groups != 1:
            attrs["groups"] = int(groups)
    y = L.tmp(op, "conv2d", [_nchw(L, op), L.weight(op, 1, weight)], attrs, None,
              _nchw_out(L, op))
    _from_nchw(L, op, y)


def _conv2d_transpose(L, op) -> None:
    _check_nhwc(L, op)
    w = L.static(op, 1, "filter")  # [kH, kW, C_out, C_in]
    out_hw = L.dims(op.outputs[0])[1:3]
    in_hw = L.dims(op.inputs[2])[1:3]
    strides, dilations = _window(op, "strides"), _window(op, "dilations")
    if not all(isinstance(d, int) for d in in_hw + out_hw):
        raise L.fail(op, "transposed convolution over a symbolic spatial size")
    padding = op.get_attr("padding").decode()
    pads, extra = [], []
    for i in range(2):
        full = (in_hw[i] - 1) * strides[i] + (w.shape[i] - 1) * dilations[i] + 1
        if padding == "VALID":
            before = after = 0
        elif padding == "SAME":
            total = max(full - out_hw[i], 0)
            before, after = total // 2, total - total // 2
        elif padding == "EXPLICIT":
            before, after = (int(p) for p in op.get_attr("explicit_paddings")[2 + 2 * i:4 + 2 * i])
        else:
            raise L.fail(op, f"padding {padding}")
        pads.append([before, after])
        extra.append(out_hw[i] - (full - before - after))
    if any(e < 0 or e >= max(strides[i], dilations[i]) for i, e in enumerate(extra)):
        raise L.fail(op, f"output size {out_hw} is not reachable with output padding")
    attrs = {"stride": strides, "dilation": dilations, "padding": pads, "output_padding": extra}
    weight = w.transpose(3, 2, 0, 1)  # [C_in, C_out, kH, kW]
    y = L.tmp(op, "conv_transpose2d", [_nchw(L, op, 2), L.weight(op, 1, weight)], attrs, None,
              _nchw_out(L, op))
    _from_nchw(L, op, y)


def _pool(L, op) -> None:
    _check_nhwc(L, op)
    kernel, strides = _window(op, "ksize"), _window(op, "strides")
    hw = L.dims(op.inputs[0])[1:3]
    attrs = {"kernel": kernel, "stride": strides,
             "padding": _pads(L, op, hw, kernel, strides, [1, 1])}
    rml_op = "max_pool2d" if op.type == "MaxPool" else "avg_pool2d"
    if rml_op == "avg_pool2d":
        attrs["count_include_pad"] = False  # TF averages over the window inside the image
    y = L.tmp(op, rml_op, [_nchw(L, op)], attrs, None, _nchw_out(L, op))
    _from_nchw(L, op, y)


def _fused_batch_norm(L, op) -> None:
    _check_nhwc(L, op)
    if op.get_attr("is_training"):
        raise L.fail(op, "training-mode batch norm (is_training=True) is not inference")
    scale, offset, mean, var = (L.value(t) for t in op.inputs[1:5])
    y = L.tmp(op, "batch_norm", [_nchw(L, op), mean, var, scale, offset],
              {"epsilon": float(op.get_attr("epsilon"))}, None, _nchw_out(L, op))
    _from_nchw(L, op, y)


def _resize_nearest(L, op) -> None:
    if op.get_attr("align_corners"):
        raise L.fail(op, "align_corners nearest resize has no rml-graph equivalent")
    n, h, w, c = L.dims(op.inputs[0])
    oh, ow = (int(v) for v in L.static(op, 1, "size"))
    if not isinstance(h, int) or not isinstance(w, int) or oh % h or ow % w:
        raise L.fail(op, "nearest resize by a non-integer scale")
    y = L.tmp(op, "upsample_nearest2d", [_nchw(L, op)], {"scale": [oh // h, ow // w]}, None,
              _nchw_out(L, op))
    _from_nchw(L, op, y)


#: The other TF ops, each with its lowering function.
LOWERINGS = {
    "MatMul": _mat_mul,
    "BatchMatMul": _batch_mat_mul,
    "BatchMatMulV2": _batch_mat_mul,
    "BatchMatMulV3": _batch_mat_mul,
    "Einsum": _einsum,
    "BiasAdd": _bias_add,
    "Relu6": _relu6,
    "LeakyRelu": _leaky_relu,
    "Erfc": _erfc,
    "Log1p": _log1p,
    "Expm1": _expm1,
    "Selu": _selu,
    "Softsign": _softsign,
    "Square": _square,
    "SquaredDifference": _squared_difference,
    "Reciprocal": _reciprocal,
    "Inv": _reciprocal,
    "AddN": _add_n,
    "Select": _select,
    "LogicalNot": _logical_not,
    "LogicalAnd": _logical_and,
    "LogicalOr": _logical_or,
    "Cast": _cast,
    "OneHot": _one_hot,
    "ArgMax": _arg_max,
    "ArgMin": _arg_max,
    "Cumsum": _cumsum,
    "Reshape": _reshape,
    "Transpose": _transpose,
    "ExpandDims": _expand_dims,
    "Squeeze": _squeeze,
    "ConcatV2": _concat,
    "Pack": _pack,
    "Unpack": _unpack,
    "Split": _split,
    "SplitV": _split_v,
    "Slice": _slice,
    "StridedSlice": _strided_slice,
    "GatherV2": _gather,
    "Pad": _pad,
    "PadV2": _pad,
    "MirrorPad": _pad,
    "BroadcastTo": _broadcast_to,
    "Fill": _fill,
    "Tile": _tile,
    "Conv2D": _conv2d,
    "DepthwiseConv2dNative": _conv2d,
    "Conv2DBackpropInput": _conv2d_transpose,
    "MaxPool": _pool,
    "AvgPool": _pool,
    "FusedBatchNorm": _fused_batch_norm,
    "FusedBatchNormV3": _fused_batch_norm,
    "ResizeNearestNeighbor": _resize_nearest,
}
