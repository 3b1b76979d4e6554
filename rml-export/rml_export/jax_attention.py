"""Attention rewrites of the JAX route: ``softmax(q·kᵀ·scale [mask])·v`` ->
``scaled_dot_product_attention``, and the unit-batch reshapes ``jnp.matmul`` adds."""

from __future__ import annotations

import math

import numpy as np

from .ir import Node, ValueType
from .jax_match import View, broadcast_shape, strip_ones


def attention(view: View, node: Node) -> bool:
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


def _attention_mask(view: View, masked: Node):
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


def _untranspose(view: View, kt: str, transposed_b: bool) -> str | None:
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
    index = view.graph.nodes.index(view.producers[kt]) + 1 if kt in view.producers else 0
    new = Node("transpose", [kt], [out], {"perm": perm})
    view.graph.nodes.insert(index, new)
    view.graph.types[out] = ValueType(view.graph.types[kt].dtype, [shape[p] for p in perm])
    view.producers[out] = new
    view.users.setdefault(kt, []).append(new)
    return out


def matmul_unit_batch(view: View, node: Node) -> bool:
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
        if src is not None and strip_ones(view.shape(src.inputs[0])) == strip_ones(
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
    batch = broadcast_shape([a[:-2], b[:-2]])
    if batch is None or batch + [a[-2], b[-1]] != view.shape(node.outputs[0]):
        return False
    view.replace(node, "matmul", inputs, product.attrs)
    return True
