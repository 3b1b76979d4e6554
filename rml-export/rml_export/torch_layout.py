"""ATen lowerings: reshapes and layout, joining and splitting, slicing and indexing,
padding, copies and casts, and tensor creation (folded to constants).

Shapes in attributes come from the fx node's own (possibly symbolic) output shape, so a
``view(x.shape[0], -1)`` becomes ``reshape ["N", 16]`` without shape arithmetic.
"""

from __future__ import annotations

from .torch_lower import V, lowers, norm_axis, out_val

#: ``slice`` end meaning "to the end of the axis".
_OPEN_END = 2**63 - 1


def shape_entries(cx, shape) -> list:
    """A shape as ``reshape``/``expand`` entries: ints, plain symbols, at most one -1."""
    entries = [cx.dim(d) for d in shape]
    computed = [i for i, e in enumerate(entries) if isinstance(e, str) and not e.isidentifier()]
    if len(computed) > 1:
        cx.fail(f"a shape with several computed symbolic sizes {entries}")
    for i in computed:
        entries[i] = -1
    return entries


# -- copies, casts, no-ops ------------------------------------------------------------

@lowers("aten.clone.default", "aten.contiguous.default", "aten.alias.default",
        "aten.detach.default", "aten.lift_fresh_copy.default", "aten.dropout.default",
        "aten.alias_copy.default", "aten.feature_dropout.default")
def same(cx, node, a):
    """The input itself (inference: dropout is the identity)."""
    if a.get("train"):
        cx.fail("dropout in training mode; call model.eval() before exporting")
    return a.get("self", a.get("input"))


@lowers("aten._to_copy.default", "aten.to.dtype", "aten.to.dtype_layout",
        "aten.type_as.default")
def to_dtype(cx, node, a):
    """cast to the output dtype (nothing when it is unchanged)."""
    return cx.cast(a.get("self"), out_val(node).dtype)


# -- reshapes and permutations --------------------------------------------------------

@lowers("aten.view.default", "aten._unsafe_view.default", "aten.reshape.default",
        "aten.view_copy.default")
def reshape(cx, node, a):
    """reshape to the node's output shape."""
    return cx.emit("reshape", [a["self"]], {"shape": shape_entries(cx, out_val(node).shape)})


@lowers("aten.flatten.using_ints")
def flatten(cx, node, a):
    """flatten start..end."""
    x = a["self"]
    if x.rank == 0:
        return cx.emit("reshape", [x], {"shape": [1]})
    return cx.emit("flatten", [x], {"start": int(a["start_dim"]), "end": int(a["end_dim"])})


@lowers("aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default")
def squeeze(cx, node, a):
    """squeeze the listed (or all) size-1 axes; other listed axes stay, as in torch."""
    x = a["self"]
    dims = a.get("dim")
    dims = range(x.rank) if dims is None else ([dims] if isinstance(dims, int) else dims)
    axes = sorted({norm_axis(d, x.rank) for d in dims if x.shape[norm_axis(d, x.rank)] == 1})
    if not axes:
        return x
    return cx.emit("squeeze", [x], {"axes": axes})


@lowers("aten.unsqueeze.default")
def unsqueeze(cx, node, a):
    """unsqueeze one axis."""
    x = a["self"]
    return cx.emit("unsqueeze", [x], {"axes": [norm_axis(a["dim"], x.rank + 1)]})


@lowers("aten.permute.default", "aten.transpose.int", "aten.t.default",
        "aten.permute_copy.default")
def transpose(cx, node, a):
    """transpose with the permutation torch applies."""
    x = a["self"]
    if "permute" in str(node.target):
        perm = [norm_axis(d, x.rank) for d in a["dims"]]
    else:
        perm = list(range(x.rank))
        if x.rank < 2:
            return x
        d0, d1 = (0, 1) if str(node.target) == "aten.t.default" else (
            norm_axis(a["dim0"], x.rank), norm_axis(a["dim1"], x.rank))
        perm[d0], perm[d1] = perm[d1], perm[d0]
    return cx.emit("transpose", [x], {"perm": perm})


@lowers("aten.expand.default", "aten.expand_copy.default")
def expand(cx, node, a):
    """expand to the output shape (-1 where the input's size is kept)."""
    x = a["self"]
    out = tuple(out_val(node).shape)
    entries = []
    offset = len(out) - x.rank
    for i, d in enumerate(out):
        src = x.shape[i - offset] if i >= offset else None
        if src is not None and str(src) == str(d):
            entries.append(-1)
        else:
            entries.append(shape_entries(cx, (d,))[0])
    if entries.count(-1) == len(entries) and offset == 0:
        return x
    return cx.emit("expand", [x], {"shape": entries})


@lowers("aten.repeat.default")
def repeat(cx, node, a):
    """tile: unsqueeze a size-1 axis before each axis, expand it, merge the pairs."""
    x, reps = a["self"], list(a["repeats"])
    extra = len(reps) - x.rank
    if extra:
        x = cx.emit("unsqueeze", [x], {"axes": list(range(extra))},
                    shape=(1,) * extra + x.shape, hint=f"{node.name}.lead")
    pairs = [(1, d) for d in x.shape]
    u = cx.emit("unsqueeze", [x], {"axes": [2 * i for i in range(x.rank)]},
                shape=tuple(e for p in pairs for e in p), hint=f"{node.name}.u")
    e_shape = tuple(e for r, d in zip(reps, x.shape) for e in (r, d))
    e = cx.emit("expand", [u], {"shape": shape_entries(cx, e_shape)}, shape=e_shape,
                hint=f"{node.name}.e")
    return cx.emit("reshape", [e], {"shape": shape_entries(cx, out_val(node).shape)})


# -- joining and splitting ------------------------------------------------------------

@lowers("aten.cat.default", "aten.concat.default")
def cat(cx, node, a):
    """concat (inputs cast to the output dtype; legacy empty 1-D inputs dropped)."""
    out = out_val(node)
    parts = [cx.cast(t, out.dtype) for t in a["tensors"]
             if not (t.rank == 1 and t.shape[0] == 0)]
    return cx.emit("concat", parts, {"axis": norm_axis(a["dim"], len(out.shape))})


@lowers("aten.stack.default")
def stack(cx, node, a):
    """unsqueeze each input, then concat."""
    out = out_val(node)
    axis = norm_axis(a["dim"], len(out.shape))
    parts = []
    for i, t in enumerate(a["tensors"]):
        shape = t.shape[:axis] + (1,) + t.shape[axis:]
        parts.append(cx.emit("unsqueeze", [cx.cast(t, out.dtype)], {"axes": [axis]},
                             dtype=out.dtype, shape=shape, hint=f"{node.name}.{i}"))
    return cx.emit("concat", parts, {"axis": axis})


@lowers("aten.split.Tensor", "aten.split_with_sizes.default", "aten.chunk.default",
        "aten.unsafe_split.Tensor", "aten.split_with_sizes_copy.default")
def split(cx, node, a):
    """split into the parts torch makes (sizes read off the outputs)."""
    x = a["self"]
    axis = norm_axis(a["dim"], x.rank)
    outs = out_val(node)
    sizes = [o.shape[axis] for o in outs]
    if not all(isinstance(s, int) for s in sizes):
        cx.fail("splitting a symbolic axis")
    return cx.emit_multi("split", [x], {"axis": axis, "sizes": sizes},
                         [(o.dtype, o.shape) for o in outs])


@lowers("aten.unbind.int")
def unbind(cx, node, a):
    """split into size-1 parts, each squeezed."""
    x = a["self"]
    axis = norm_axis(a["dim"], x.rank)
    outs = out_val(node)
    if not isinstance(x.shape[axis], int):
        cx.fail("unbinding a symbolic axis")
    kept = [(o.dtype, o.shape[:axis] + (1,) + o.shape[axis:]) for o in outs]
    parts = cx.emit_multi("split", [x], {"axis": axis, "sizes": [1] * len(outs)}, kept)
    return [cx.emit("squeeze", [p], {"axes": [axis]}, dtype=o.dtype, shape=o.shape,
                    hint=f"{node.name}_{i}") for i, (p, o) in enumerate(zip(parts, outs))]


# -- slicing and indexing -------------------------------------------------------------

def _bound(cx, value, size, default):
    """A slice bound as an int; a symbolic bound equal to the axis size is open."""
    if value is None:
        return default
    if isinstance(value, int):
        return min(value, _OPEN_END)
    if str(value) == str(size):
        return _OPEN_END
    cx.fail(f"a slice bound that depends on a symbolic size ({value})")
    return None


@lowers("aten.slice.Tensor", "aten.slice_copy.Tensor", "aten.narrow.default")
def slice_(cx, node, a):
    """slice one axis (narrow: start..start+length)."""
    x = a["self"]
    axis = norm_axis(a["dim"], x.rank)
    size = x.shape[axis]
    start = _bound(cx, a["start"], size, 0)
    if "narrow" in str(node.target):
        end, step = start + int(a["length"]), 1
    else:
        end, step = _bound(cx, a["end"], size, _OPEN_END), int(a["step"])
    if start == 0 and step == 1 and (end == _OPEN_END or (isinstance(size, int) and end >= size)):
        return x
    return cx.emit("slice", [x], {"starts": [start], "ends": [end], "axes": [axis],
                                  "steps": [step]})


@lowers("aten.flip.default")
def flip(cx, node, a):
    """slice with step −1 on each flipped axis."""
    x = a["self"]
    axes = sorted({norm_axis(d, x.rank) for d in a["dims"]})
    if not axes:
        return x
    n = len(axes)
    return cx.emit("slice", [x], {"starts": [-1] * n, "ends": [-(2**63)] * n, "axes": axes,
                                  "steps": [-1] * n})


@lowers("aten.select.int")
def select(cx, node, a):
    """slice [i, i+1) then squeeze the axis."""
    x = a["self"]
    axis = norm_axis(a["dim"], x.rank)
    i = int(a["index"])
    end = _OPEN_END if i == -1 else i + 1
    shape = x.shape[:axis] + (1,) + x.shape[axis + 1:]
    s = cx.emit("slice", [x], {"starts": [i], "ends": [end], "axes": [axis]}, shape=shape,
                hint=f"{node.name}.slice")
    return cx.emit("squeeze", [s], {"axes": [axis]})


def _index_value(cx, index: V) -> V:
    import torch

    if index.dtype not in (torch.int64, torch.int32):
        cx.fail(f"indexing with a {index.dtype} tensor (boolean masks make the output "
                "size data-dependent)")
    return index


@lowers("aten.index.Tensor")
def index(cx, node, a):
    """``x[..., idx]`` with one index tensor: gather on its axis."""
    x, indices = a["self"], list(a["indices"])
    used = [i for i, t in enumerate(indices) if t is not None]
    if len(used) != 1:
        cx.fail("advanced indexing with more than one index tensor")
    return cx.emit("gather", [x, _index_value(cx, indices[used[0]])], {"axis": used[0]})


@lowers("aten.gather.default")
def take_along(cx, node, a):
    """``torch.gather`` (take along ``dim``) through a one-hot selection:
    ``reduce_sum(where(unsqueeze(index) == iota, unsqueeze(x), 0))`` over the
    selected axis; exact, as every sum has one non-zero term."""
    import torch

    x, index = a["self"], _index_value(cx, a["index"])
    axis = norm_axis(a["dim"], x.rank)
    size = x.shape[axis]
    others = [i for i in range(x.rank) if i != axis]
    if not isinstance(size, int) or any(str(x.shape[i]) != str(index.shape[i]) for i in others):
        cx.fail("torch.gather needs a fixed size on dim and an index of the input's "
                "size on the other axes")
    wide = index.shape[:axis + 1] + (size,) + index.shape[axis + 1:]
    xe = cx.emit("unsqueeze", [x], {"axes": [axis]},
                 shape=x.shape[:axis] + (1,) + x.shape[axis:], hint=f"{node.name}.x")
    ie = cx.emit("unsqueeze", [index], {"axes": [axis + 1]}, dtype=index.dtype,
                 shape=index.shape[:axis + 1] + (1,) + index.shape[axis + 1:],
                 hint=f"{node.name}.idx")
    hit = cx.emit("equal", [ie, cx.cast(cx.iota(size, axis + 1, x.rank + 1), index.dtype)],
                  dtype=torch.bool, shape=wide, hint=f"{node.name}.hit")
    picked = cx.emit("where", [hit, xe, cx.scalar(0, x.dtype)], dtype=x.dtype, shape=wide,
                     hint=f"{node.name}.pick")
    return cx.emit("reduce_sum", [picked], {"axes": [axis + 1]})


@lowers("aten.index_select.default")
def index_select(cx, node, a):
    """gather along ``dim``."""
    x = a["self"]
    return cx.emit("gather", [x, _index_value(cx, a["index"])],
                   {"axis": norm_axis(a["dim"], x.rank)})


@lowers("aten.embedding.default")
def embedding(cx, node, a):
    """gather(weight, indices) (an embedding lookup)."""
    return cx.emit("gather", [a["weight"], _index_value(cx, a["indices"])])


# -- padding --------------------------------------------------------------------------

_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
              "circular": "wrap"}


@lowers("aten.constant_pad_nd.default", "aten.pad.default", "aten.reflection_pad1d.default",
        "aten.reflection_pad2d.default", "aten.replication_pad1d.default",
        "aten.replication_pad2d.default", "aten.circular_pad1d.default",
        "aten.circular_pad2d.default")
def pad(cx, node, a):
    """pad: torch lists (before, after) pairs from the last axis backward."""
    x = a["self"]
    target = str(node.target)
    flat = list(a.get("pad", a.get("padding")))
    if "reflection" in target:
        mode = "reflect"
    elif "replication" in target:
        mode = "edge"
    elif "circular" in target:
        mode = "wrap"
    else:
        mode = _PAD_MODES.get(a.get("mode") or "constant")
        if mode is None:
            cx.fail(f"padding mode {a.get('mode')!r}")
    if any(p < 0 for p in flat):
        cx.fail("negative padding (cropping)")
    pairs = [[flat[i], flat[i + 1]] for i in range(0, len(flat), 2)][::-1]
    pads = [[0, 0]] * (x.rank - len(pairs)) + pairs
    attrs = {"pads": pads, "mode": mode}
    if mode == "constant" and a.get("value"):
        attrs["value"] = float(a["value"])
    return cx.emit("pad", [x], attrs)


# -- creation -------------------------------------------------------------------------

@lowers("aten.full_like.default", "aten.zeros_like.default", "aten.ones_like.default",
        "aten.new_full.default", "aten.new_zeros.default", "aten.new_ones.default",
        "aten.full.default", "aten.zeros.default", "aten.ones.default", fold=True)
def full(cx, node, a):
    """A scalar constant expanded to the output shape (which may be symbolic)."""
    out = out_val(node)
    target = str(node.target)
    value = 0 if "zeros" in target else 1 if "ones" in target else a["fill_value"]
    scalar = cx.scalar(value, out.dtype)
    if not out.shape:
        return scalar
    return cx.emit("expand", [scalar], {"shape": shape_entries(cx, out.shape)})


@lowers("aten.arange.default", "aten.arange.start", "aten.arange.start_step",
        "aten.scalar_tensor.default", "aten.empty.memory_format", "aten.linspace.default",
        "aten.eye.default", "aten.tril.default", "aten.triu.default", "aten.tril_indices.default",
        "aten.triu_indices.default", fold=True)
def creation(cx, node, a):
    """Only foldable: these ops must not depend on a graph input or a symbolic size."""
    cx.fail("this op depends on a graph input or a symbolic size; rml-graph computes "
            "such tensors only as constants")
