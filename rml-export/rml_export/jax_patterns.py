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

from . import jax_attention, jax_norms
from .ir import Graph, Node
from .jax_match import (
    View, absorb_constant, broadcast_shape, channel_constant, close, constant_of_shape,
    fixed_count, reduced, scaled_by, scalar_last, strip_ones,
)
from .passes import dead_code, remove_identities

_BROADCASTING = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "equal",
                 "not_equal", "less", "less_equal", "greater", "greater_equal", "where"}


def _drop_broadcasts(view: View) -> bool:
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
            if src.op == "reshape" and strip_ones(inner) != strip_ones(outer):
                continue
            trial = list(node.inputs)
            trial[i] = src.inputs[0]
            shapes = [view.shape(v) for v in trial]
            if any(s is None for s in shapes) or broadcast_shape(shapes) != out:
                continue
            node.inputs = trial
            changed = True
    return changed


def _softmax(view: View, node: Node) -> bool:
    """``exp(x - max(x)) / sum(exp(x - max(x)))`` -> ``softmax``; ``(x - max) -
    log(sum(exp(x - max)))`` -> ``log_softmax``."""
    if node.op == "div":
        e, total = node.inputs
        shifted = view.node(e, "exp")
        summed = reduced(view, total, "reduce_sum")
        if shifted is None or summed is None or summed[0] != e:
            return False
        centred, op = shifted.inputs[0], "softmax"
    elif node.op == "sub":
        centred, logsum = node.inputs
        log = view.node(logsum, "log")
        summed = reduced(view, log.inputs[0], "reduce_sum") if log else None
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
    found = reduced(view, peak, "reduce_max")
    if found is None or found != (x, summed[1]):
        return False
    axis = summed[1][0] - len(view.shape(x))
    view.replace(node, op, [x], {"axis": axis})
    return True


def _linear_bias(view: View, node: Node) -> bool:
    """``linear(x, w) + b`` (``b`` a constant ``[M]``) -> ``linear(x, w, b)``; a
    convolution plus a per-channel constant -> the convolution with its bias."""
    if node.op != "add":
        return False

    def bias(layer, value):
        out = view.shape(layer.outputs[0])
        if layer.op == "linear":
            return constant_of_shape(view, value, [out[-1]])
        return channel_constant(view, value, out)

    return absorb_constant(view, node, ("linear", "conv1d", "conv2d", "conv_transpose1d",
                                        "conv_transpose2d"), 2, bias)


def _gelu(view: View, node: Node) -> bool:
    """``(0.5·x)·erfc(−x/√2)`` (``erfc`` as ``1 − erf``) and ``x·0.5·(1 + erf(x/√2))``
    -> ``gelu``."""
    if node.op != "mul":
        return False
    for a, b in (node.inputs, node.inputs[::-1]):
        half = view.node(a, "mul")
        x = scaled_by(view, half, 0.5) if half is not None else None
        if x is not None and _is_erf_term(view, b, x):
            view.replace(node, "gelu", [x])
            return True
        inner = view.node(b, "mul")
        for c, d in (inner.inputs, inner.inputs[::-1]) if inner is not None else ():
            if close(view.scalar(c), 0.5) and _is_erf_term(view, d, a):
                view.replace(node, "gelu", [a])
                return True
    return False


def _is_erf_term(view: View, value: str, x: str) -> bool:
    """``1 − erf(−x/√2)`` or ``1 + erf(x/√2)``."""
    node = view.node(value, ("sub", "add"))
    if node is None:
        return False
    one, e = node.inputs if node.op == "sub" else scalar_last(view, node)
    erf = view.node(e, "erf") if e else None
    if not close(view.scalar(one), 1.0) or erf is None:
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
        if sign < 0 and close(c, math.sqrt(0.5)):
            neg = view.node(a, "neg")
            if neg is not None and neg.inputs[0] == x:
                return True
        if sign < 0 and close(c, -math.sqrt(0.5)) and a == x:
            return True
        if sign > 0 and close(c, math.sqrt(0.5)) and a == x:
            return True
    return False


def _silu(view: View, node: Node) -> bool:
    """``x * sigmoid(x)`` -> ``silu``."""
    if node.op != "mul":
        return False
    for a, b in (node.inputs, node.inputs[::-1]):
        sig = view.node(b, "sigmoid")
        if sig is not None and sig.inputs[0] == a:
            view.replace(node, "silu", [a])
            return True
    return False


def _upsample(view: View, node: Node) -> bool:
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
    if len(xs) != 4 or fixed_count(xs, (2, 3)) is None:
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


_REWRITES = (
    jax_attention.matmul_unit_batch, jax_norms.batch_norm, jax_attention.attention, _softmax,
    jax_norms.layer_norm, jax_norms.norm_affine, jax_norms.group_norm, _linear_bias, _gelu,
    _silu, jax_norms.reduce_mean, _upsample,
)


def fuse(graph: Graph, max_rounds: int = 50) -> Graph:
    """Apply every pattern until none matches; returns the same graph."""
    remove_identities(graph)
    for _ in range(max_rounds):
        changed = _drop_broadcasts(View(graph))
        view = View(graph)
        for node in list(graph.nodes):
            if any(rewrite(view, node) for rewrite in _REWRITES):
                changed = True
        dead_code(graph)  # so that the next round counts only live users
        if not changed:
            break
    return graph
