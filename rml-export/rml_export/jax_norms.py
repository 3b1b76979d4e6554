"""Normalization rewrites of the JAX route: the decomposed layer, group and batch norms
(and plain means) JAX writes -> ``layer_norm``, ``group_norm``, ``batch_norm`` and
``reduce_mean``."""

from __future__ import annotations

from .ir import Node
from .jax_match import (
    View, absorb_constant, channel_constant, close, constant_of_shape, fixed_count, mean_of,
    pair_with, reduced_axes, scalar_last,
)


def layer_norm(view: View, node: Node) -> bool:
    """``(x - mean) * rsqrt(var + eps)`` (or ``/ sqrt(var + eps)``) over trailing axes,
    ``var = mean((x - mean)²)`` -> ``layer_norm`` without scale or bias."""
    if node.op == "mul":
        centred, inv = pair_with(view, node, "sub", lambda v: view.node(v, "rsqrt") is not None)
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
    mean = mean_of(view, mu)
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
    spread = mean_of(view, var)
    square = view.node(spread[0], "mul") if spread and spread[1] == axes else None
    if square is None or square.inputs[0] != square.inputs[1]:
        return False
    dev = view.node(square.inputs[0], "sub")
    if dev is None or dev.inputs[0] != x or mean_of(view, dev.inputs[1]) != mean:
        return False
    view.replace(node, "layer_norm", [x], {"axis": axes[0] - rank, "epsilon": eps})
    return True


def norm_affine(view: View, node: Node) -> bool:
    """``norm(x) * scale`` and ``norm(x, scale) + bias`` with constant parameters ->
    one norm: of the normalized shape for ``layer_norm``, per channel (``[C, 1, …]``)
    for ``group_norm``."""
    if node.op not in ("mul", "add"):
        return False

    def param(norm, value):
        xs = view.shape(norm.inputs[0])
        if norm.op == "layer_norm":
            return constant_of_shape(view, value, xs[norm.attrs.get("axis", -1) % len(xs):])
        return channel_constant(view, value, xs)

    arity = 1 if node.op == "mul" else 2
    return absorb_constant(view, node, ("layer_norm", "group_norm"), arity, param)


def group_norm(view: View, node: Node) -> bool:
    """``reshape(layer_norm(reshape(x, [N, G, -1])), x.shape)`` -> ``group_norm(x, G)``."""
    if node.op != "reshape":
        return False
    norm = view.node(node.inputs[0], "layer_norm")
    inner = view.node(norm.inputs[0], "reshape") if norm is not None else None
    if inner is None or len(norm.inputs) != 1 or norm.attrs.get("axis", -1) not in (-1, 2):
        return False
    x = inner.inputs[0]
    xs, grouped = view.shape(x), view.shape(inner.outputs[0])
    per_sample = fixed_count(xs, range(1, len(xs)))
    if (view.shape(node.outputs[0]) != xs or len(xs) < 3 or len(grouped) != 3
            or grouped[0] != xs[0] or per_sample is None or xs[1] % grouped[1]
            or grouped[1] * grouped[2] != per_sample):
        return False
    attrs = {"num_groups": grouped[1]}
    if "epsilon" in norm.attrs:
        attrs["epsilon"] = norm.attrs["epsilon"]
    view.replace(node, "group_norm", [x], attrs)
    return True


def batch_norm(view: View, node: Node) -> bool:
    """``(x - mean) * (w * rsqrt(var + eps)) + b``, per channel with the running
    statistics as constants -> ``batch_norm``."""
    if node.op != "add":
        return False
    for a, b in (node.inputs, node.inputs[::-1]):
        scaled = view.node(a, "mul")
        xs = view.shape(a)
        if scaled is None or xs is None or len(xs) < 3 or not view.single_use(a):
            continue
        bias = channel_constant(view, b, xs)
        centred, factor = pair_with(view, scaled, "sub", lambda v: view.node(v, "reshape"))
        if bias is None or centred is None:
            continue
        x, mean = centred.inputs[0], channel_constant(view, centred.inputs[1], xs)
        scale = view.node(view.node(factor, "reshape").inputs[0], "mul")
        if mean is None or scale is None or view.shape(x) != xs:
            continue
        root, weight = pair_with(view, scale, "rsqrt", lambda v: v in view.graph.constants)
        plus = view.node(root.inputs[0], "add") if root is not None else None
        if plus is None:
            continue
        var, eps = scalar_last(view, plus)[::-1]
        eps = view.scalar(eps)
        if eps is None or constant_of_shape(view, var, [xs[1]]) is None:
            continue
        if constant_of_shape(view, weight, [xs[1]]) is None:
            continue
        view.replace(node, "batch_norm", [x, mean, var, weight, bias], {"epsilon": eps})
        return True
    return False


def reduce_mean(view: View, node: Node) -> bool:
    """``reduce_sum(x, axes) / n`` (``n`` the reduced count) -> ``reduce_mean``."""
    if node.op != "div":
        return False
    total = view.node(node.inputs[0], "reduce_sum")
    if total is None or not view.single_use(node.inputs[0]):
        return False
    x = total.inputs[0]
    n = fixed_count(view.shape(x), reduced_axes(view, total))
    if not n or not close(view.scalar(node.inputs[1]), n):
        return False
    if view.shape(node.outputs[0]) != view.shape(total.outputs[0]):
        return False
    view.replace(node, "reduce_mean", [x], total.attrs)
    return True
