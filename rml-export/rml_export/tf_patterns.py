"""Rewrites of the TF route's graph: recover high-level ops TF decomposes, and sink the
NHWC <-> NCHW transposes so the shared passes cancel them.

Run by :func:`run` between two rounds of the shared clean-up. Each rewrite replaces a
node in place (its output name is kept), so graph outputs never change name; what the
replaced nodes leave unused is removed by the shared ``dead_code`` pass.

- ``cse``: identical nodes (same op, inputs and attributes) computed once.
- ``linear_bias``: ``add(linear(x, w), b)`` -> ``linear(x, w, b)``; likewise a
  convolution followed by a per-channel add.
- ``gelu`` / ``gelu_tanh`` / ``silu``: TF's ``0.5·x·erfc(−x/√2)``, the tanh form and
  ``x·sigmoid(x)``.
- ``layer_norm``: ``tf.nn.moments`` + ``(x − mean)·rsqrt(var + ε)·γ + β`` and the
  ``tf.nn.batch_normalization`` form over trailing axes.
- ``group_norm``: ``reshape [N, G, -1] → layer_norm → reshape back``, then a
  per-channel ``·γ + β``.
- ``attention``: ``softmax(q·kᵀ·scale [masked]) · v`` ->
  ``scaled_dot_product_attention`` (a constant lower-triangular mask -> ``causal``).
- ``softmax_axis``: ``transpose → softmax → transpose back`` -> ``softmax(axis)``.
- ``upsample``: two ``unsqueeze → expand → reshape`` repeats over the spatial axes
  (Keras's ``UpSampling2D``) -> ``upsample_nearest2d`` (between transposes for NHWC).
- ``gather_wrap``: ``gather(t, where(i < 0, i + n, i))`` (Keras's embedding) ->
  ``gather(t, i)``: rml's ``gather`` counts negative indices from the end itself.
- ``sink_transposes``: a transpose feeding an elementwise op, a reduction, ``pad`` or
  ``concat`` is moved after it (constants are permuted instead), so the NHWC wrappers
  of consecutive convolutions meet and cancel.
"""

from __future__ import annotations

import json

import numpy as np

from .ir import Graph, Node, ValueType
from .passes import clean_up

#: rml ops a transpose sinks through (elementwise, one input).
UNARY = {"relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "neg", "abs", "sin", "cos",
         "softplus", "erf", "leaky_relu", "elu", "gelu", "gelu_tanh", "silu", "clip", "cast"}
#: Broadcasting rml ops a transpose sinks through (constant operands are permuted).
BINARY = {"add", "sub", "mul", "div", "pow", "maximum", "minimum"}
#: Reductions a transpose sinks through (axes permuted).
REDUCE = {"reduce_mean", "reduce_sum", "reduce_max", "reduce_min", "reduce_prod"}
#: Convolutions a per-channel constant add fuses into as the bias.
CONV = {"conv2d", "conv_transpose2d"}


def run(graph: Graph) -> None:
    """Apply the rewrites until none applies (cleaning up in between)."""
    clean_up(graph)
    for _ in range(20):
        changed = False
        for rewrite in (cse, linear_bias, gelu, silu, layer_norm, group_norm, attention,
                        softmax_axis, gather_wrap, upsample, sink_transposes):
            changed |= rewrite(graph)
        if not changed:
            break
        clean_up(graph)


class _View:
    """Producers and use counts of a graph, rebuilt for every rewrite."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.prod = graph.producers()
        self.uses = {v: len(u) for v, u in graph.users().items()}
        for v in graph.outputs:
            self.uses[v] = self.uses.get(v, 0) + 1

    def node(self, value: str, op: str | set, single_use: bool = False) -> Node | None:
        """The producer of ``value`` when it is ``op`` (and, if asked, read only once)."""
        node = self.prod.get(value)
        ops = {op} if isinstance(op, str) else op
        if node is None or node.op not in ops or len(node.outputs) != 1:
            return None
        if single_use and self.uses.get(value, 0) != 1:
            return None
        return node

    def scalar(self, value: str) -> float | None:
        """The value of a one-element float constant."""
        array = self.graph.constants.get(value)
        if array is None or array.size != 1 or array.dtype.kind != "f":
            return None
        return float(array.reshape(()))

    def shape(self, value: str):
        vtype = self.graph.types.get(value)
        return None if vtype is None else vtype.shape


def _replace(node: Node, op: str, inputs: list[str], attrs: dict | None = None) -> None:
    node.op, node.inputs, node.attrs = op, list(inputs), dict(attrs or {})


def _close(a: float | None, b: float, tol: float = 1e-6) -> bool:
    return a is not None and abs(a - b) <= tol * max(1.0, abs(b))


def _pairs(node: Node):
    """Both orders of a commutative node's two inputs."""
    a, b = node.inputs
    return ((a, b), (b, a))


def cse(graph: Graph) -> bool:
    """Compute identical nodes once."""
    seen: dict[tuple, Node] = {}
    mapping: dict[str, str] = {}
    for node in graph.nodes:
        inputs = [mapping.get(v, v) for v in node.inputs]
        node.inputs = inputs
        key = (node.op, tuple(inputs), json.dumps(node.attrs, sort_keys=True), len(node.outputs))
        first = seen.get(key)
        if first is None or any(v in graph.outputs for v in node.outputs):
            seen.setdefault(key, node)
            continue
        mapping.update(zip(node.outputs, first.outputs))
    graph.rename_uses(mapping)
    return bool(mapping)


def linear_bias(graph: Graph) -> bool:
    """``add(linear(x, w), b[M])`` -> ``linear(x, w, b)``; ``add(conv(x, w), b[1, C, 1, 1])``
    -> ``conv(x, w, b)``."""
    v = _View(graph)
    changed = False
    for node in graph.nodes:
        if node.op != "add":
            continue
        for a, b in _pairs(node):
            bias = graph.constants.get(b)
            lin = v.node(a, {"linear"} | CONV, single_use=True)
            if bias is None or lin is None or len(lin.inputs) > 2:
                continue
            if lin.op == "linear":
                weight = graph.constants.get(lin.inputs[1])
                ok = weight is not None and bias.shape == weight.shape[:1]
            else:
                out = v.shape(a)
                ok = (bias.ndim in (3, 4) and out is not None and isinstance(out[1], int)
                      and bias.shape[-3:] == (out[1], 1, 1) and bias.size == out[1])
                if ok:
                    b = _reshaped(v, b, [out[1]])
            if ok:
                _replace(node, lin.op, lin.inputs + [b], lin.attrs)
                changed = True
                break
    return changed


def _reshaped(v: _View, name: str, shape: list[int]) -> str:
    """Constant ``name`` reshaped: in place when this is its only use, else a copy."""
    array = np.ascontiguousarray(v.graph.constants[name].reshape(shape))
    if v.uses.get(name) != 1:
        return v.graph.add_constant(array, name)
    v.graph.constants[name] = array
    v.graph.types[name] = ValueType(v.graph.types[name].dtype, list(shape))
    return name


def _rewrite(graph: Graph, op: str, match) -> bool:
    """Replace every ``op`` node for which ``match(view, node)`` gives ``(op, inputs)``."""
    v = _View(graph)
    changed = False
    for node in graph.nodes:
        found = match(v, node) if node.op == op else None
        if found is not None:
            _replace(node, *found)
            changed = True
    return changed


def gelu(graph: Graph) -> bool:
    """``0.5·x·(1 ± erf(±x/√2))`` -> ``gelu``; the tanh form -> ``gelu_tanh``."""
    return _rewrite(graph, "mul", _match_gelu)


def _match_gelu(v: _View, node: Node):
    for half_x, rest in _pairs(node):
        # (0.5·x)·(1 + …), or x·(0.5·(1 + …))
        for x, term in ((_times(v, half_x, 0.5), rest), (half_x, _times(v, rest, 0.5))):
            if x is None or term is None:
                continue
            if _erf_term(v, term, x):
                return "gelu", [x]
            if _tanh_term(v, term, x):
                return "gelu_tanh", [x]
    return None


def _times(v: _View, value: str, k: float) -> str | None:
    """``x`` when ``value`` is ``k·x`` (either order)."""
    node = v.node(value, "mul")
    if node is None:
        return None
    for a, b in _pairs(node):
        if _close(v.scalar(a), k):
            return b
    return None


def _scaled(v: _View, value: str, x: str, k: float) -> bool:
    """Whether ``value`` is ``k·x`` (``mul`` by k or ``div`` by 1/k)."""
    if _times(v, value, k) == x:
        return True
    node = v.node(value, "div")
    return node is not None and node.inputs[0] == x and _close(v.scalar(node.inputs[1]), 1 / k)


def _erf_term(v: _View, value: str, x: str) -> bool:
    """``1 + erf(x/√2)`` or TF's ``1 − erf(−x/√2)`` (``erfc``)."""
    r = 1 / np.sqrt(2.0)
    for op, sign in (("add", 1), ("sub", -1)):
        node = v.node(value, op)
        if node is None:
            continue
        pairs = _pairs(node) if op == "add" else [tuple(node.inputs)]
        for one, e in pairs:
            erf = v.node(e, "erf")
            if not _close(v.scalar(one), 1.0) or erf is None:
                continue
            arg = erf.inputs[0]
            if sign == 1 and _scaled(v, arg, x, r):
                return True
            neg = v.node(arg, "neg")
            if sign == -1 and neg is not None and _scaled(v, neg.inputs[0], x, r):
                return True
            inner = _times(v, arg, r)
            neg = v.node(inner, "neg") if inner else None
            if sign == -1 and neg is not None and neg.inputs[0] == x:
                return True
    return False


def _tanh_term(v: _View, value: str, x: str) -> bool:
    """``1 + tanh(√(2/π)·(x + 0.044715·x³))``."""
    node = v.node(value, "add")
    if node is None:
        return False
    for one, t in _pairs(node):
        tanh = v.node(t, "tanh")
        if not _close(v.scalar(one), 1.0) or tanh is None:
            continue
        inner = _times(v, tanh.inputs[0], float(np.sqrt(2 / np.pi)))
        add = v.node(inner, "add") if inner else None
        if add is None:
            continue
        for a, cube in _pairs(add):
            c = _times(v, cube, 0.044715)
            pw = v.node(c, "pow") if c else None
            if a == x and pw is not None and pw.inputs[0] == x and _close(
                    v.scalar(pw.inputs[1]), 3.0):
                return True
    return False


def silu(graph: Graph) -> bool:
    """``x·sigmoid(x)`` (or ``sigmoid(1·x)``) -> ``silu``."""
    return _rewrite(graph, "mul", _match_silu)


def _match_silu(v: _View, node: Node):
    for x, s in _pairs(node):
        sig = v.node(s, "sigmoid")
        if sig is not None and (sig.inputs[0] == x or _times(v, sig.inputs[0], 1.0) == x):
            return "silu", [x]
    return None


def layer_norm(graph: Graph) -> bool:
    """``(x − mean)·rsqrt(var + ε)`` over trailing axes -> ``layer_norm``; then a
    following ``·γ`` and ``+ β`` (constants) become its scale and bias; the
    ``tf.nn.batch_normalization`` form ``x·inv + (β − mean·inv)`` at once."""
    v = _View(graph)
    changed = False
    for node in graph.nodes:
        found = None
        if node.op in ("mul", "div"):
            found = _normalized(v, node)
        if found is None and node.op == "add":
            found = next(filter(None, (_batchnorm_form(v, a, b) for a, b in _pairs(node))),
                         None)
        if found is not None:
            x, axis, eps, scale, bias = found
            _replace(node, "layer_norm", _norm_inputs(x, scale, bias),
                     {"axis": axis, "epsilon": eps})
            changed = True
        elif node.op in ("mul", "add"):
            changed |= _absorb_param(v, node)
    return changed


def _norm_inputs(x: str, scale: str | None, bias: str | None) -> list[str]:
    inputs = [x, scale or "", bias or ""]
    while not inputs[-1]:
        inputs.pop()
    return inputs


def _absorb_param(v: _View, node: Node, norm_op: str = "layer_norm", fits=None) -> bool:
    """``norm(x)·γ`` -> ``norm(x, γ)``; ``norm(x, γ?) + β`` -> ``norm(x, γ?, β)`` when
    ``fits(view, constant, x, attrs)`` accepts the constant (a layer norm's by default)."""
    fits = fits or (lambda v, p, x, attrs: _param(v, p, x, attrs.get("axis", -1)))
    for a, p in _pairs(node):
        norm = v.node(a, norm_op, single_use=True)
        if norm is None or p not in v.graph.constants or v.uses.get(p) != 1:
            continue
        x, scale, bias = (norm.inputs + ["", ""])[:3]
        if bias or (node.op == "mul" and scale) or not fits(v, p, x, norm.attrs):
            continue
        scale, bias = (p, bias) if node.op == "mul" else (scale, p)
        _replace(node, norm_op, _norm_inputs(x, scale, bias), norm.attrs)
        return True
    return False


def _normalized(v: _View, node: Node):
    """``(x, axis, eps, None, None)`` when ``node`` is ``(x − mean)·rsqrt(var + ε)`` or
    ``(x − mean) / sqrt(var + ε)``."""
    pairs = _pairs(node) if node.op == "mul" else [tuple(node.inputs)]
    for centered, r in pairs:
        stats = _stats(v, centered)
        root = v.node(r, "rsqrt" if node.op == "mul" else "sqrt")
        add = v.node(root.inputs[0], "add") if root else None
        if stats is None or add is None:
            continue
        x, mean, axis = stats
        for var, e in _pairs(add):
            eps = v.scalar(e)
            if eps is not None and eps > 0 and _is_variance(v, var, x, mean):
                return x, axis, float(str(np.float32(eps))), None, None
    return None


def _stats(v: _View, centered: str):
    """``(x, mean, axis)`` when ``centered`` is ``x − reduce_mean(x, trailing axes)``."""
    sub = v.node(centered, "sub")
    if sub is None:
        return None
    x, mean = sub.inputs
    red = v.node(mean, "reduce_mean")
    shape = v.shape(x)
    if red is None or red.inputs[0] != x or not red.attrs.get("keepdims") or shape is None:
        return None
    rank = len(shape)
    axes = sorted(a % rank for a in red.attrs.get("axes", range(rank)))
    if axes != list(range(axes[0], rank)):
        return None
    return x, mean, axes[0] - rank


def _is_variance(v: _View, var: str, x: str, mean: str) -> bool:
    red = v.node(var, "reduce_mean")
    sq = v.node(red.inputs[0], "mul") if red else None
    if sq is None or sq.inputs[0] != sq.inputs[1] or not red.attrs.get("keepdims"):
        return False
    d = v.node(sq.inputs[0], "sub")
    mean_node = v.node(mean, "reduce_mean")
    return (d is not None and d.inputs == [x, mean]
            and red.attrs.get("axes") == mean_node.attrs.get("axes"))


def _param(v: _View, name: str, x: str, axis: int) -> bool:
    """Whether constant ``name`` is a layer-norm parameter of ``x.shape[axis:]``; it is
    reshaped in place (``[1, 1, D]`` -> ``[D]``) when needed."""
    array = v.graph.constants.get(name)
    shape = v.shape(x)
    want = shape[axis:] if shape else None
    if array is None or want is None or not all(isinstance(d, int) for d in want):
        return False
    if list(array.shape) == want:
        return True
    if array.size != int(np.prod(want)) or v.uses.get(name) != 1:
        return False
    lead = array.shape[: array.ndim - len(want)]
    if array.ndim < len(want) or any(d != 1 for d in lead) or list(
            array.shape[array.ndim - len(want):]) != want:
        return False
    _reshaped(v, name, want)
    return True


def _batchnorm_form(v: _View, a: str, b: str):
    """``x·inv + shift`` with ``inv = rsqrt(var + ε)[·γ]`` and ``shift`` one of
    ``β − mean·inv`` (``tf.nn.batch_normalization``), ``(−mean)·inv [+ β]`` (Keras)."""
    xm = v.node(a, "mul")
    shift = _shift(v, b)
    if xm is None or shift is None:
        return None
    bias, mean, inv = shift
    for x, inv_x in _pairs(xm):
        red = v.node(mean, "reduce_mean")
        stats = _stats_of(v, x, red) if red is not None and red.inputs[0] == x else None
        if inv_x != inv or stats is None:
            continue
        inv_node = v.node(inv, {"mul", "rsqrt"})
        if inv_node is None:
            continue
        scaled = _pairs(inv_node) if inv_node.op == "mul" else [(inv, None)]
        for r, scale in scaled:
            rsqrt = v.node(r, "rsqrt")
            add = v.node(rsqrt.inputs[0], "add") if rsqrt else None
            if add is None:
                continue
            for var, e in _pairs(add):
                eps = v.scalar(e)
                if (eps is not None and eps > 0 and _is_variance(v, var, x, mean)
                        and all(p is None or _param(v, p, x, stats) for p in (scale, bias))):
                    return x, stats, float(str(np.float32(eps))), scale, bias
    return None


def _shift(v: _View, value: str):
    """``(β or None, mean, inv)`` when ``value`` is ``β − mean·inv``, ``(−mean)·inv + β``
    or ``(−mean)·inv`` (β a constant)."""
    sub = v.node(value, "sub")
    if sub is not None:
        bias, mm = sub.inputs
        mm = v.node(mm, "mul")
        if mm is None or bias not in v.graph.constants:
            return None
        mean, inv = mm.inputs if v.node(mm.inputs[0], "reduce_mean") else mm.inputs[::-1]
        return bias, mean, inv
    add = v.node(value, "add")
    for term, bias in _pairs(add) if add is not None else [(value, None)]:
        if bias is not None and bias not in v.graph.constants:
            continue
        mm = v.node(term, "mul")
        for neg, inv in _pairs(mm) if mm is not None else []:
            neg_node = v.node(neg, "neg")
            if neg_node is not None:
                return bias, neg_node.inputs[0], inv
    return None


def _stats_of(v: _View, x: str, red: Node):
    shape = v.shape(x)
    if shape is None or not red.attrs.get("keepdims"):
        return None
    rank = len(shape)
    axes = sorted(a % rank for a in red.attrs.get("axes", range(rank)))
    return axes[0] - rank if axes == list(range(axes[0], rank)) else None


def group_norm(graph: Graph) -> bool:
    """``reshape(x, [N, G, -1]) → layer_norm(-1) → reshape(x.shape)`` -> ``group_norm``;
    a following per-channel ``·γ`` / ``+ β`` (``[C, 1, 1]`` constants) joins it."""
    v = _View(graph)
    changed = False
    for node in graph.nodes:
        if node.op == "reshape":
            found = _group_norm(v, node)
            if found is not None:
                x, groups, eps = found
                _replace(node, "group_norm", [x], {"num_groups": groups, "epsilon": eps})
                changed = True
        elif node.op in ("mul", "add"):
            changed |= _absorb_param(v, node, "group_norm", _channel_param)
    return changed


def _group_norm(v: _View, node: Node):
    ln = v.node(node.inputs[0], "layer_norm", single_use=True)
    first = v.node(ln.inputs[0], "reshape", single_use=True) if ln else None
    if first is None or len(ln.inputs) != 1 or ln.attrs.get("axis", -1) not in (-1, 2):
        return None
    x = first.inputs[0]
    shape, grouped, out = v.shape(x), v.shape(first.outputs[0]), v.shape(node.outputs[0])
    if (shape is None or grouped is None or out != shape or len(shape) < 3
            or len(grouped) != 3 or grouped[0] != shape[0] or not isinstance(shape[1], int)
            or not isinstance(grouped[1], int) or shape[1] % grouped[1]):
        return None
    return x, grouped[1], ln.attrs.get("epsilon", 1e-5)


def _channel_param(v: _View, p: str, x: str, attrs: dict) -> bool:
    """Whether constant ``p`` holds one value per channel of ``x`` (``[C, 1, 1]``);
    reshaped to ``[C]`` in place."""
    array = v.graph.constants[p]
    channels, rank = v.shape(x)[1], len(v.shape(x))
    shape = array.shape[max(array.ndim - (rank - 1), 0):]  # [1, C, 1, 1] -> [C, 1, 1]
    if array.size != channels or (shape and shape[0] != channels):
        return False
    _reshaped(v, p, [channels])  # single use: _absorb_param checked
    return True


def attention(graph: Graph) -> bool:
    """``matmul(softmax(mask(q·kᵀ·c)), v)`` -> ``scaled_dot_product_attention``."""
    v = _View(graph)
    changed = False
    for node in list(graph.nodes):
        if node.op != "matmul" or node.attrs.get("transpose_a") or node.attrs.get(
                "transpose_b"):
            continue
        sm = v.node(node.inputs[0], "softmax", single_use=True)
        if sm is None or sm.attrs.get("axis", -1) != -1:
            continue
        scores, mask, causal = sm.inputs[0], None, False
        where = v.node(scores, "where", single_use=True)
        if where is not None:
            cond, kept, fill = where.inputs
            array = graph.constants.get(cond)
            neg = graph.constants.get(fill)
            if array is None or neg is None or neg.size != 1 or not np.isneginf(neg).all():
                continue
            if array.ndim >= 2 and np.array_equal(
                    array.reshape(array.shape[-2:]) if array.size == np.prod(
                        array.shape[-2:]) else array, np.tril(np.ones(array.shape[-2:], bool))):
                causal = True
            else:
                mask = cond
            scores = kept
        scale = None
        scaled = v.node(scores, "mul", single_use=True)
        if scaled is not None:
            for a, c in _pairs(scaled):
                if v.scalar(c) is not None and v.node(a, "matmul", single_use=True):
                    scores, scale = a, v.scalar(c)
        qk = v.node(scores, "matmul", single_use=True)
        if qk is None or qk.attrs.get("transpose_a"):
            continue
        q, k = qk.inputs
        q_shape = v.shape(q)
        if q_shape is None or not isinstance(q_shape[-1], int):
            continue
        if not qk.attrs.get("transpose_b"):
            k = _swap_last(graph, v, k, qk)
        attrs = {}
        if causal:
            attrs["causal"] = True
        scale = 1.0 if scale is None else scale
        if not _close(scale, 1 / np.sqrt(q_shape[-1])):
            attrs["scale"] = float(str(np.float32(scale)))
        _replace(node, "scaled_dot_product_attention",
                 [q, k, node.inputs[1]] + ([mask] if mask else []), attrs)
        changed = True
        v = _View(graph)
    return changed


def _swap_last(graph: Graph, v: _View, value: str, before: Node) -> str:
    """``value`` with its last two axes swapped (a new transpose inserted before
    ``before``; two transposes in a row merge in clean-up)."""
    shape = v.shape(value)
    rank = len(shape)
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    out = graph.fresh_name(value + ".t")
    graph.types[out] = ValueType(graph.types[value].dtype, [shape[i] for i in perm])
    graph.nodes.insert(graph.nodes.index(before),
                       Node("transpose", [value], [out], {"perm": perm}, before.name))
    return out


def softmax_axis(graph: Graph) -> bool:
    """``transpose(p) → softmax/log_softmax(-1) → transpose(p⁻¹)`` -> one softmax."""
    v = _View(graph)
    changed = False
    for node in graph.nodes:
        if node.op != "transpose":
            continue
        sm = v.node(node.inputs[0], {"softmax", "log_softmax"}, single_use=True)
        first = v.node(sm.inputs[0], "transpose", single_use=True) if sm else None
        if first is None or sm.attrs.get("axis", -1) not in (-1, len(first.attrs["perm"]) - 1):
            continue
        p, q = first.attrs["perm"], node.attrs["perm"]
        if [p[i] for i in q] != list(range(len(p))):
            continue
        _replace(node, sm.op, [first.inputs[0]], {"axis": p[-1]})
        changed = True
    return changed


def gather_wrap(graph: Graph) -> bool:
    """``gather(data, where(i < 0, i + n, i))`` with ``n`` the gathered axis's size ->
    ``gather(data, i)`` (negative indices wrap in rml-graph's ``gather`` too)."""
    v = _View(graph)
    changed = False
    for node in graph.nodes:
        where = v.node(node.inputs[1], "where") if node.op == "gather" else None
        if where is None:
            continue
        cond, wrapped, i = where.inputs
        less, add = v.node(cond, "less"), v.node(wrapped, "add")
        shape = v.shape(node.inputs[0])
        if less is None or add is None or shape is None or less.inputs[0] != i:
            continue
        zero = graph.constants.get(less.inputs[1])
        n = graph.constants.get(add.inputs[1])
        size = shape[node.attrs.get("axis", 0)]
        if (add.inputs[0] == i and zero is not None and zero.size == 1 and zero.item() == 0
                and n is not None and n.size == 1 and n.item() == size):
            node.inputs = [node.inputs[0], i]
            changed = True
    return changed


def upsample(graph: Graph) -> bool:
    """``repeat(repeat(x, r, h), s, w)`` over a 4-D value's spatial axes (``h, w`` =
    ``2, 3`` for NCHW, ``1, 2`` for NHWC) -> ``upsample_nearest2d(scale=[r, s])``."""
    v = _View(graph)
    for node in graph.nodes:
        outer = _repeat(v, node)
        inner = _repeat(v, v.prod.get(outer[0])) if outer else None
        if inner is None or v.uses.get(outer[0]) != 1:
            continue
        x, scale = inner[0], {inner[1]: inner[2], outer[1]: outer[2]}
        if len(v.shape(x) or []) != 4 or set(scale) not in ({2, 3}, {1, 2}):
            continue
        attrs = {"scale": [scale[a] for a in sorted(scale)]}
        if set(scale) == {2, 3}:
            _replace(node, "upsample_nearest2d", [x], attrs)
            return True
        n, h, w, c = v.shape(x)
        nchw = graph.fresh_name(x + ".nchw")
        graph.types[nchw] = ValueType(graph.types[x].dtype, [n, c, h, w])
        index = graph.nodes.index(node)
        graph.nodes.insert(index, Node("transpose", [x], [nchw], {"perm": [0, 3, 1, 2]},
                                       node.name))
        _replace(node, "upsample_nearest2d", [nchw], attrs)
        _after(graph, node, [nchw], attrs, [0, 2, 3, 1])
        return True
    return False


def _repeat(v: _View, node: Node | None):
    """``(x, axis, r)`` when ``node`` is ``reshape(expand(unsqueeze(x, axis + 1)))``
    repeating each element of ``x`` ``r`` times along ``axis``."""
    if node is None or node.op != "reshape":
        return None
    expand = v.node(node.inputs[0], "expand", single_use=True)
    unsq = v.node(expand.inputs[0], "unsqueeze", single_use=True) if expand else None
    if unsq is None or len(unsq.attrs["axes"]) != 1:
        return None
    x = unsq.inputs[0]
    shape, big, out = v.shape(x), v.shape(expand.outputs[0]), v.shape(node.outputs[0])
    k = unsq.attrs["axes"][0] % (len(shape) + 1) if shape else None
    if k is None or k == 0 or big is None or out is None or len(big) != len(shape) + 1:
        return None
    r = big[k]
    if (not isinstance(r, int) or not isinstance(shape[k - 1], int)
            or big[:k] + big[k + 1:] != shape
            or out != shape[:k - 1] + [shape[k - 1] * r] + shape[k:]):
        return None
    return x, k - 1, r


def sink_transposes(graph: Graph) -> bool:
    """Move a transpose read only by an elementwise op, reduction, ``pad`` or ``concat``
    after that op; the op reads the transpose's input (constants are permuted). Each move
    takes a transpose further down, so the loop ends."""
    changed = False
    for _ in range(4 * len(graph.nodes)):
        v = _View(graph)
        if not any(_sink(v, node) for node in graph.nodes):
            break
        changed = True
    return changed


def _sink(v: _View, node: Node) -> bool:
    graph = v.graph
    if node.op in UNARY:
        t = v.node(node.inputs[0], "transpose", single_use=True)
        if t is None:
            return False
        perm = t.attrs["perm"]
        _after(graph, node, [t.inputs[0]] + node.inputs[1:], node.attrs, perm)
        return True
    if node.op in BINARY | {"concat"}:
        transposes = [v.node(x, "transpose", single_use=True) for x in node.inputs]
        perms = {tuple(t.attrs["perm"]) for t in transposes if t is not None}
        if len(perms) != 1:
            return False
        perm = list(perms.pop())
        for value, t in zip(node.inputs, transposes):
            if t is None and (node.op == "concat" or value not in graph.constants
                              or graph.constants[value].ndim > len(perm)):
                return False
        inputs = [t.inputs[0] if t is not None else _permute_constant(v, value, perm)
                  for value, t in zip(node.inputs, transposes)]
        attrs = dict(node.attrs)
        if node.op == "concat":
            attrs["axis"] = perm[attrs["axis"] % len(perm)]
        _after(graph, node, inputs, attrs, perm)
        return True
    if node.op in REDUCE or node.op == "pad":
        t = v.node(node.inputs[0], "transpose", single_use=True)
        if t is None:
            return False
        perm = t.attrs["perm"]
        rank = len(perm)
        if node.op == "pad":
            pads = node.attrs["pads"]
            inverse = [perm.index(i) for i in range(rank)]
            attrs = dict(node.attrs, pads=[pads[inverse[i]] for i in range(rank)])
            _after(graph, node, [t.inputs[0]], attrs, perm)
            return True
        axes = sorted(perm[a % rank] for a in node.attrs.get("axes", range(rank)))
        attrs = dict(node.attrs, axes=axes)
        if node.attrs.get("keepdims"):
            _after(graph, node, [t.inputs[0]], attrs, perm)
            return True
        kept = [perm[i] for i in range(rank) if perm[i] not in axes]
        rest = [sorted(kept).index(k) for k in kept]
        _after(graph, node, [t.inputs[0]], attrs, rest)
        return True
    return False


def _permute_constant(v: _View, name: str, perm: list[int]) -> str:
    """A constant broadcast against a transposed value, permuted back (in place when
    this is its only use, keeping its name)."""
    array = v.graph.constants[name]
    rank = len(perm)
    full = array.reshape((1,) * (rank - array.ndim) + array.shape)
    inverse = [perm.index(i) for i in range(rank)]
    moved = np.ascontiguousarray(np.transpose(full, inverse))
    if array.size == 1:
        return name
    if v.uses.get(name) == 1:
        v.graph.constants[name] = moved
        v.graph.types[name] = ValueType(v.graph.types[name].dtype, list(moved.shape))
        return name
    return v.graph.add_constant(moved, name)


def _after(graph: Graph, node: Node, inputs: list[str], attrs: dict, perm: list[int]) -> None:
    """Make ``node`` compute on ``inputs``, then transpose its result by ``perm`` for its
    readers. The node keeps its output name (the transpose, which usually cancels, gets a
    new one), except for a graph output, whose name stays on the transposed value."""
    out = node.outputs[0]
    old = graph.types.get(out) or ValueType("F32", None)
    moved = ValueType(old.dtype, None)
    if old.shape is not None and len(old.shape) == len(perm):
        moved.shape = [old.shape[perm.index(i)] for i in range(len(perm))]
    if out in graph.outputs:
        computed, transposed = graph.fresh_name(out + ".moved"), out
    else:
        computed, transposed = out, graph.fresh_name(out + ".t")
        graph.rename_uses({out: transposed})
    graph.types[computed], graph.types[transposed] = moved, old
    node.inputs, node.attrs, node.outputs = list(inputs), dict(attrs), [computed]
    graph.nodes.insert(graph.nodes.index(node) + 1,
                       Node("transpose", [computed], [transposed], {"perm": list(perm)},
                            node.name))
