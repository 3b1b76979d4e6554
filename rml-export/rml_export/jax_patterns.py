"""Graph rewrites that recover rml-graph's high-level ops from the decomposed forms JAX
writes, run on the lowered graph before the shared clean-up passes.

JAX has no softmax, layer norm or GELU primitive: ``jax.nn.softmax`` is
``exp(x - max) / sum``, a Flax-style layer norm is ``(x - mean) * rsqrt(var + eps)``,
exact GELU is ``0.5·x·erfc(−x/√2)``. Each rewrite below recognises one such form
(structurally, on the nodes :mod:`rml_export.jax_ops` writes) and replaces the node that
produces its result with the single rml-graph op; the dead remainder is removed by the
clean-up passes. A form that does not match exactly is left as it is: still correct,
only slower.
"""

from __future__ import annotations

import math

import numpy as np

from .ir import Graph, Node
from .passes import dead_code, remove_identities

_BROADCASTING = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "equal",
                 "not_equal", "less", "less_equal", "greater", "greater_equal", "where"}


class _View:
    """Producers, users and constants of a graph, refreshed after each rewrite."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.producers = graph.producers()
        self.users = graph.users()

    def node(self, value: str, op: str | tuple | None = None) -> Node | None:
        """The node producing ``value`` (when its op is ``op``, if given)."""
        node = self.producers.get(value)
        if node is None or op is None:
            return node
        return node if node.op in ((op,) if isinstance(op, str) else op) else None

    def scalar(self, value: str) -> float | None:
        """The value of a one-element constant."""
        array = self.graph.constants.get(value)
        if array is None or array.size != 1:
            return None
        return float(array.reshape(-1)[0])

    def shape(self, value: str):
        vtype = self.graph.types.get(value)
        return None if vtype is None or vtype.shape is None else list(vtype.shape)

    def single_use(self, value: str) -> bool:
        return len(self.users.get(value, [])) == 1 and value not in self.graph.outputs

    def replace(self, old: Node, op: str, inputs: list[str], attrs: dict | None = None):
        """Put a new node computing ``old``'s output where ``old`` was."""
        index = self.graph.nodes.index(old)
        new = Node(op, inputs, list(old.outputs), dict(attrs or {}), old.name)
        self.graph.nodes[index] = new
        for value in old.outputs:
            self.producers[value] = new
        for value in old.inputs:
            if value and old in self.users.get(value, []):
                self.users[value].remove(old)
        for value in inputs:
            if value:
                self.users.setdefault(value, []).append(new)


def _close(a: float | None, b: float, rel: float = 1e-5) -> bool:
    return a is not None and math.isclose(a, b, rel_tol=rel)


def _pair(view: _View, node: Node, op_a, op_b):
    """``(a_node, b_value)`` when one input of the binary ``node`` is produced by an
    ``op_a`` node and the other satisfies ``op_b`` (a predicate on the value)."""
    for a, b in (node.inputs, node.inputs[::-1]):
        found = view.node(a, op_a)
        if found is not None and op_b(b):
            return found, b
    return None, None


# -- broadcasting ----------------------------------------------------------------------


def _broadcast(shapes):
    try:
        return list(np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        return None


def _drop_broadcasts(view: _View) -> bool:
    """A broadcasting op reads an ``expand``'s (or a leading-1 ``reshape``'s) input
    directly when NumPy broadcasting gives the same result shape."""
    changed = False
    for node in view.graph.nodes:
        if node.op not in _BROADCASTING:
            continue
        out = view.shape(node.outputs[0])
        for i, value in enumerate(node.inputs):
            src = view.node(value, ("expand", "reshape"))
            if src is None or src.inputs[0] in view.graph.outputs:
                continue
            inner, outer = view.shape(src.inputs[0]), view.shape(value)
            if inner is None or outer is None:
                continue
            if src.op == "reshape" and _strip_ones(inner) != _strip_ones(outer):
                continue
            trial = list(node.inputs)
            trial[i] = src.inputs[0]
            shapes = [view.shape(v) for v in trial]
            if any(s is None for s in shapes) or _broadcast(shapes) != out:
                continue
            node.inputs = trial
            changed = True
    return changed


def _strip_ones(shape):
    shape = list(shape)
    while shape and shape[0] == 1:
        shape.pop(0)
    return shape


# -- reductions ------------------------------------------------------------------------


def _reduced(view: _View, value: str, op: str):
    """``(x, axes)`` when ``value`` is ``op(x, axes)`` with its reduced axes kept as 1
    (``keepdims`` or a reshape), or with only leading axes reduced (which broadcast
    the same way)."""
    node = view.node(value, "reshape")
    if node is not None:
        inner = view.node(node.inputs[0], op)
        if inner is not None and not inner.attrs.get("keepdims"):
            x = inner.inputs[0]
            axes = _axes(view, inner)
            kept = [1 if a in axes else d for a, d in enumerate(view.shape(x))]
            if view.shape(value) == kept:
                return x, axes
        return None
    node = view.node(value, op)
    if node is None:
        return None
    axes = _axes(view, node)
    if node.attrs.get("keepdims") or axes == list(range(len(axes))):
        return node.inputs[0], axes
    return None


def _axes(view: _View, node: Node) -> list[int]:
    rank = len(view.shape(node.inputs[0]))
    axes = node.attrs.get("axes", list(range(rank)))
    return sorted(a % rank for a in axes)


def _mean(view: _View, value: str):
    """``(x, axes)`` when ``value`` is the mean of ``x`` over ``axes`` (kept dims)."""
    node = view.node(value, ("div", "mul"))
    if node is not None:
        k, c = node.inputs
        found = _reduced(view, k, "reduce_sum")
        if found is not None:
            n = int(np.prod([view.shape(found[0])[a] for a in found[1]]))
            factor = view.scalar(c)
            if (_close(factor, n) if node.op == "div" else _close(factor, 1.0 / n)):
                return found
    return _reduced(view, value, "reduce_mean")


# -- patterns --------------------------------------------------------------------------


def _softmax(view: _View, node: Node) -> bool:
    """``exp(x - max(x)) / sum(exp(x - max(x)))`` -> ``softmax``; ``(x - max) -
    log(sum(exp(x - max)))`` -> ``log_softmax``."""
    if node.op == "div":
        e, total = node.inputs
        shifted = view.node(e, "exp")
        summed = _reduced(view, total, "reduce_sum")
        if shifted is None or summed is None or summed[0] != e:
            return False
        centred, op = shifted.inputs[0], "softmax"
    elif node.op == "sub":
        centred, logsum = node.inputs
        log = view.node(logsum, "log")
        summed = _reduced(view, log.inputs[0], "reduce_sum") if log else None
        exp = view.node(summed[0], "exp") if summed else None
        if exp is None or exp.inputs[0] != centred:
            return False
        op = "log_softmax"
    else:
        return False
    sub = view.node(centred, "sub")
    if sub is None or len(summed[1]) != 1:
        return False
    x, peak = sub.inputs
    found = _reduced(view, peak, "reduce_max")
    if found is None or found != (x, summed[1]):
        return False
    axis = summed[1][0] - len(view.shape(x))
    view.replace(node, op, [x], {"axis": axis})
    return True


def _layer_norm(view: _View, node: Node) -> bool:
    """``(x - mean) * rsqrt(var + eps)`` (or ``/ sqrt(var + eps)``) over trailing axes,
    ``var = mean((x - mean)²)`` -> ``layer_norm`` without scale or bias."""
    if node.op == "mul":
        centred, inv = _pair(view, node, "sub", lambda v: view.node(v, "rsqrt") is not None)
        if centred is None:
            return False
        root = view.node(inv, "rsqrt")
    elif node.op == "div":
        centred, root = view.node(node.inputs[0], "sub"), view.node(node.inputs[1], "sqrt")
        if centred is None or root is None:
            return False
    else:
        return False
    x, mu = centred.inputs
    mean = _mean(view, mu)
    if mean is None or mean[0] != x:
        return False
    rank, axes = len(view.shape(x)), mean[1]
    if axes != list(range(axes[0], rank)):
        return False
    plus = view.node(root.inputs[0], "add")
    if plus is None:
        return False
    var, eps = None, None
    for a, b in (plus.inputs, plus.inputs[::-1]):
        if view.scalar(b) is not None:
            var, eps = a, view.scalar(b)
    if var is None or eps <= 0:
        return False
    spread = _mean(view, var)
    square = view.node(spread[0], "mul") if spread and spread[1] == axes else None
    if square is None or square.inputs[0] != square.inputs[1]:
        return False
    dev = view.node(square.inputs[0], "sub")
    if dev is None or dev.inputs[0] != x or _mean(view, dev.inputs[1]) != mean:
        return False
    view.replace(node, "layer_norm", [x], {"axis": axes[0] - rank, "epsilon": eps})
    return True


def _norm_affine(view: _View, node: Node) -> bool:
    """``layer_norm(x) * scale`` and ``layer_norm(x, scale) + bias`` with constants of
    the normalized shape -> one ``layer_norm``."""
    if node.op not in ("mul", "add"):
        return False
    slot = 1 if node.op == "mul" else 2
    for a, b in (node.inputs, node.inputs[::-1]):
        norm = view.node(a, "layer_norm")
        if norm is None or not view.single_use(a) or len(norm.inputs) != slot:
            continue
        rank = len(view.shape(norm.inputs[0]))
        tail = view.shape(norm.inputs[0])[norm.attrs.get("axis", -1) % rank:]
        param = _constant_of_shape(view, b, tail)
        if param is None:
            continue
        view.replace(node, "layer_norm", norm.inputs + [param], norm.attrs)
        return True
    return False


def _constant_of_shape(view: _View, value: str, shape) -> str | None:
    """``value`` (or the constant a reshape of it reads) when it holds ``shape``'s
    elements and broadcasts like them."""
    src = view.node(value, "reshape")
    if src is not None and _strip_ones(view.shape(value)) == _strip_ones(shape):
        value = src.inputs[0]
    if value in view.graph.constants and view.shape(value) == list(shape):
        return value
    return None


def _linear_bias(view: _View, node: Node) -> bool:
    """``linear(x, w) + b`` (``b`` a constant ``[M]``) -> ``linear(x, w, b)``; a
    convolution plus a per-channel constant -> the convolution with its bias."""
    if node.op != "add":
        return False
    for a, b in (node.inputs, node.inputs[::-1]):
        layer = view.node(a, ("linear", "conv1d", "conv2d", "conv_transpose1d",
                              "conv_transpose2d"))
        if layer is None or len(layer.inputs) != 2 or not view.single_use(a):
            continue
        out = view.shape(a)
        if view.shape(node.outputs[0]) != out:
            continue
        if layer.op == "linear":
            bias = _constant_of_shape(view, b, [out[-1]])
        else:
            channels = out[1]
            src = view.node(b, "reshape")
            bias = None
            if src is not None and _strip_ones(view.shape(b)) == [channels] + [1] * (
                    len(out) - 2):
                bias = _constant_of_shape(view, src.inputs[0], [channels])
        if bias is None:
            continue
        view.replace(node, layer.op, layer.inputs + [bias], layer.attrs)
        return True
    return False


def _gelu(view: _View, node: Node) -> bool:
    """``(0.5·x)·erfc(−x/√2)`` (``erfc`` as ``1 − erf``) and ``x·0.5·(1 + erf(x/√2))``
    -> ``gelu``."""
    if node.op != "mul":
        return False
    for a, b in (node.inputs, node.inputs[::-1]):
        half = view.node(a, "mul")
        x = _scaled(view, half, 0.5) if half is not None else None
        if x is not None and _is_erf_term(view, b, x):
            view.replace(node, "gelu", [x])
            return True
        inner = view.node(b, "mul")
        for c, d in (inner.inputs, inner.inputs[::-1]) if inner is not None else ():
            if _close(view.scalar(c), 0.5) and _is_erf_term(view, d, a):
                view.replace(node, "gelu", [a])
                return True
    return False


def _scaled(view: _View, node: Node, factor: float) -> str | None:
    """``x`` when ``node`` is ``x * factor`` (either order)."""
    for a, b in (node.inputs, node.inputs[::-1]):
        if _close(view.scalar(b), factor):
            return a
    return None


def _is_erf_term(view: _View, value: str, x: str) -> bool:
    """``1 − erf(−x/√2)`` or ``1 + erf(x/√2)``."""
    node = view.node(value, ("sub", "add"))
    if node is None:
        return False
    one, e = node.inputs if node.op == "sub" else _ordered_by_scalar(view, node)
    erf = view.node(e, "erf") if e else None
    if not _close(view.scalar(one), 1.0) or erf is None:
        return False
    arg = view.node(erf.inputs[0], ("mul", "div"))
    if arg is None:
        return False
    sign = -1.0 if node.op == "sub" else 1.0
    for a, b in (arg.inputs, arg.inputs[::-1]):
        c = view.scalar(b)
        if c is None:
            continue
        c = 1.0 / c if arg.op == "div" else c
        if sign < 0 and _close(c, math.sqrt(0.5)):
            neg = view.node(a, "neg")
            if neg is not None and neg.inputs[0] == x:
                return True
        if sign < 0 and _close(c, -math.sqrt(0.5)) and a == x:
            return True
        if sign > 0 and _close(c, math.sqrt(0.5)) and a == x:
            return True
    return False


def _ordered_by_scalar(view: _View, node: Node):
    a, b = node.inputs
    return (a, b) if view.scalar(a) is not None else (b, a)


def _silu(view: _View, node: Node) -> bool:
    """``x * sigmoid(x)`` -> ``silu``."""
    if node.op != "mul":
        return False
    for a, b in (node.inputs, node.inputs[::-1]):
        sig = view.node(b, "sigmoid")
        if sig is not None and sig.inputs[0] == a:
            view.replace(node, "silu", [a])
            return True
    return False


def _group_norm(view: _View, node: Node) -> bool:
    """``reshape(layer_norm(reshape(x, [N, G, -1])), x.shape)`` -> ``group_norm(x, G)``."""
    if node.op != "reshape":
        return False
    norm = view.node(node.inputs[0], "layer_norm")
    inner = view.node(norm.inputs[0], "reshape") if norm is not None else None
    if inner is None or len(norm.inputs) != 1 or norm.attrs.get("axis", -1) not in (-1, 2):
        return False
    x = inner.inputs[0]
    xs, grouped = view.shape(x), view.shape(inner.outputs[0])
    if (view.shape(node.outputs[0]) != xs or len(xs) < 3 or len(grouped) != 3
            or grouped[0] != xs[0] or xs[1] % grouped[1]
            or grouped[1] * grouped[2] != int(np.prod(xs[1:]))):
        return False
    attrs = {"num_groups": grouped[1]}
    if "epsilon" in norm.attrs:
        attrs["epsilon"] = norm.attrs["epsilon"]
    view.replace(node, "group_norm", [x], attrs)
    return True


def _group_affine(view: _View, node: Node) -> bool:
    """``group_norm(x) * scale[C, 1, 1] (+ bias[C, 1, 1])`` -> one ``group_norm``."""
    if node.op not in ("mul", "add"):
        return False
    slot = 1 if node.op == "mul" else 2
    for a, b in (node.inputs, node.inputs[::-1]):
        norm = view.node(a, "group_norm")
        if norm is None or not view.single_use(a) or len(norm.inputs) != slot:
            continue
        xs = view.shape(norm.inputs[0])
        src = view.node(b, "reshape")
        if src is None or _strip_ones(view.shape(b)) != [xs[1]] + [1] * (len(xs) - 2):
            continue
        param = _constant_of_shape(view, src.inputs[0], [xs[1]])
        if param is None or view.shape(node.outputs[0]) != xs:
            continue
        view.replace(node, "group_norm", norm.inputs + [param], norm.attrs)
        return True
    return False


def _channel_constant(view: _View, value: str, channels: int) -> str | None:
    """The ``[C]`` constant that ``value`` reshapes to ``[C, 1, …]`` (per channel)."""
    src = view.node(value, "reshape")
    if src is None or _strip_ones(view.shape(value))[:1] != [channels]:
        return None
    if any(d != 1 for d in _strip_ones(view.shape(value))[1:]):
        return None
    return _constant_of_shape(view, src.inputs[0], [channels])


def _batch_norm(view: _View, node: Node) -> bool:
    """``(x - mean) * (w * rsqrt(var + eps)) + b``, per channel with the running
    statistics as constants -> ``batch_norm``."""
    if node.op != "add":
        return False
    for a, b in (node.inputs, node.inputs[::-1]):
        scaled = view.node(a, "mul")
        xs = view.shape(a)
        if scaled is None or xs is None or len(xs) < 3 or not view.single_use(a):
            continue
        bias = _channel_constant(view, b, xs[1])
        centred, factor = _pair(view, scaled, "sub", lambda v: view.node(v, "reshape"))
        if bias is None or centred is None:
            continue
        x, mean = centred.inputs[0], _channel_constant(view, centred.inputs[1], xs[1])
        scale = view.node(view.node(factor, "reshape").inputs[0], "mul")
        if mean is None or scale is None or view.shape(x) != xs:
            continue
        root, weight = _pair(view, scale, "rsqrt", lambda v: v in view.graph.constants)
        plus = view.node(root.inputs[0], "add") if root is not None else None
        if plus is None:
            continue
        var, eps = _ordered_by_scalar(view, plus)[::-1]
        eps = view.scalar(eps)
        if eps is None or _constant_of_shape(view, var, [xs[1]]) is None:
            continue
        if _constant_of_shape(view, weight, [xs[1]]) is None:
            continue
        view.replace(node, "batch_norm", [x, mean, var, weight, bias], {"epsilon": eps})
        return True
    return False


def _reduce_mean(view: _View, node: Node) -> bool:
    """``reduce_sum(x, axes) / n`` (``n`` the reduced count) -> ``reduce_mean``."""
    if node.op != "div":
        return False
    total = view.node(node.inputs[0], "reduce_sum")
    if total is None or not view.single_use(node.inputs[0]):
        return False
    x = total.inputs[0]
    n = int(np.prod([view.shape(x)[a] for a in _axes(view, total)]))
    if not _close(view.scalar(node.inputs[1]), n) or view.shape(node.outputs[0]) != view.shape(
            total.outputs[0]):
        return False
    view.replace(node, "reduce_mean", [x], total.attrs)
    return True


def _attention(view: _View, node: Node) -> bool:
    """``softmax(q·kᵀ·scale [masked]) · v`` -> ``scaled_dot_product_attention``.

    The mask may be ``where(mask, scores, -inf)`` (a constant lower-triangular mask
    becomes ``causal``, any other boolean mask an input) or ``scores + float_mask``.
    """
    if node.op != "matmul" or node.attrs:
        return False
    probs, v = node.inputs
    soft = view.node(probs, "softmax")
    if soft is None or not view.single_use(probs) or soft.attrs.get("axis", -1) not in (
            -1, len(view.shape(probs)) - 1):
        return False
    scores, attrs, mask = soft.inputs[0], {}, None
    masked = view.node(scores, ("where", "add"))
    if masked is not None:
        found = _attention_mask(view, masked)
        if found is None:
            return False
        scores, mask, causal = found
        if causal:
            attrs["causal"] = True
    scaled = view.node(scores, ("mul", "div"))
    scale = 1.0
    if scaled is not None:
        for a, b in (scaled.inputs, scaled.inputs[::-1] if scaled.op == "mul" else ()):
            c = view.scalar(b)
            if c is not None and c > 0 and view.node(a, "matmul") is not None:
                scores, scale = a, (c if scaled.op == "mul" else 1.0 / c)
                break
    product = view.node(scores, "matmul")
    if product is None or product.attrs.get("transpose_a"):
        return False
    q, kt = product.inputs
    k = _untranspose(view, kt, product.attrs.get("transpose_b", False))
    if k is None:
        return False
    attrs["scale"] = scale
    inputs = [q, k, v] + ([mask] if mask else [])
    view.replace(node, "scaled_dot_product_attention", inputs, attrs)
    return True


def _attention_mask(view: _View, masked: Node):
    """``(scores, mask or None, causal)`` for a masking node, or ``None``."""
    if masked.op == "add":
        for a, b in (masked.inputs, masked.inputs[::-1]):
            if view.node(a, ("mul", "div", "matmul")) is not None:
                return a, b, False
        return None
    cond, scores, fill = masked.inputs
    fill_value = view.scalar(fill)
    if fill_value is None:
        array = view.graph.constants.get(fill)
        flat = array.reshape(-1) if array is not None and array.size else None
        if flat is None or not np.all(flat == flat[0]):
            return None
        fill_value = float(flat[0])
    array = view.graph.constants.get(cond)
    if array is not None and array.ndim >= 2 and array.dtype == np.bool_:
        rows, cols = array.shape[-2:]
        if np.array_equal(np.broadcast_to(np.tril(np.ones((rows, cols), bool)), array.shape),
                          array) and fill_value <= -1e9:
            return scores, None, True
    if fill_value != -math.inf:
        return None
    return scores, cond, False


def _untranspose(view: _View, kt: str, transposed_b: bool) -> str | None:
    """``k`` such that ``kt`` (as the matmul reads it) is ``kᵀ`` over the last two axes."""
    if transposed_b:
        return kt
    shape = view.shape(kt)
    rank = len(shape)
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    node = view.node(kt, "transpose")
    if node is not None:
        inner = node.attrs["perm"]
        perm = [inner[p] for p in perm]
        kt = node.inputs[0]
        shape = view.shape(kt)
    if perm == list(range(rank)):
        return kt
    out = view.graph.fresh_name("k")
    from .ir import ValueType

    index = view.graph.nodes.index(view.producers[kt]) + 1 if kt in view.producers else 0
    new = Node("transpose", [kt], [out], {"perm": perm})
    view.graph.nodes.insert(index, new)
    view.graph.types[out] = ValueType(view.graph.types[kt].dtype, [shape[p] for p in perm])
    view.producers[out] = new
    view.users.setdefault(kt, []).append(new)
    return out


def _upsample(view: _View, node: Node) -> bool:
    """``jnp.repeat(x, r, axis)`` on a spatial axis of ``[N, C, H, W]`` (a size-1 axis
    inserted, expanded to ``r`` and merged back) -> ``upsample_nearest2d``; two in a row
    become one."""
    if node.op != "reshape":
        return False
    grown = view.node(node.inputs[0], "expand")
    split = view.node(grown.inputs[0], "reshape") if grown is not None else None
    if split is None:
        return False
    x = split.inputs[0]
    xs, ys = view.shape(x), view.shape(node.outputs[0])
    if len(xs) != 4 or view.shape(grown.inputs[0]) is None:
        return False
    scale = None
    for axis in (2, 3):
        ones = xs[:axis + 1] + [1] + xs[axis + 1:]
        if view.shape(split.outputs[0]) != ones:
            continue
        r = view.shape(grown.outputs[0])[axis + 1]
        repeated = ones[:axis + 1] + [r] + ones[axis + 2:]
        if view.shape(grown.outputs[0]) == repeated and ys == xs[:axis] + [xs[axis] * r] + xs[
                axis + 1:]:
            scale = [r, 1] if axis == 2 else [1, r]
    if scale is None:
        return False
    inner = view.node(x, "upsample_nearest2d")
    if inner is not None and view.single_use(x) and "scale" in inner.attrs:
        scale = [a * b for a, b in zip(scale, inner.attrs["scale"])]
        x = inner.inputs[0]
    view.replace(node, "upsample_nearest2d", [x], {"scale": scale})
    return True


def _matmul_unit_batch(view: _View, node: Node) -> bool:
    """``reshape(matmul(reshape(a), reshape(b)))`` where the reshapes only drop and
    restore leading size-1 axes (``jnp.matmul`` on a batch of 1) -> ``matmul(a, b)``,
    whose broadcasting batch axes give the same result."""
    if node.op != "reshape":
        return False
    product = view.node(node.inputs[0], "matmul")
    if product is None or not view.single_use(node.inputs[0]):
        return False
    inputs = []
    for value in product.inputs:
        src = view.node(value, "reshape")
        if src is not None and _strip_ones(view.shape(src.inputs[0])) == _strip_ones(
                view.shape(value)):
            value = src.inputs[0]
        inputs.append(value)
    if inputs == product.inputs:
        return False
    a, b = (view.shape(v) for v in inputs)
    if len(a) < 2 or len(b) < 2:
        return False
    if product.attrs.get("transpose_a"):
        a = a[:-2] + [a[-1], a[-2]]
    if product.attrs.get("transpose_b"):
        b = b[:-2] + [b[-1], b[-2]]
    batch = _broadcast([a[:-2], b[:-2]])
    if batch is None or batch + [a[-2], b[-1]] != view.shape(node.outputs[0]):
        return False
    view.replace(node, "matmul", inputs, product.attrs)
    return True


_REWRITES = (_matmul_unit_batch, _batch_norm, _attention, _softmax, _layer_norm, _norm_affine, _group_norm, _group_affine, _linear_bias,
             _gelu, _silu, _reduce_mean, _upsample)


def fuse(graph: Graph, max_rounds: int = 50) -> Graph:
    """Apply every pattern until none matches; returns the same graph."""
    remove_identities(graph)
    for _ in range(max_rounds):
        changed = _drop_broadcasts(_View(graph))
        view = _View(graph)
        for node in list(graph.nodes):
            if any(rewrite(view, node) for rewrite in _REWRITES):
                changed = True
        dead_code(graph)  # so that the next round counts only live users
        if not changed:
            break
    return graph
