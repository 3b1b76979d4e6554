"""Matching helpers for the JAX route's graph rewrites (:mod:`rml_export.jax_patterns`):
a :class:`View` of a graph's producers and users, and small predicates that recognise
constants, broadcasts, reductions and means among the nodes :mod:`rml_export.jax_ops`
writes."""

from __future__ import annotations

import math

import numpy as np

from .ir import Graph, Node


class View:
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
        """The value of a one-element constant; a float32 one as its shortest decimal
        (``1e-05``, not ``9.999999747378752e-06``), so attributes such as ``epsilon``
        read as written and defaults are recognised."""
        array = self.graph.constants.get(value)
        if array is None or array.size != 1:
            return None
        item = array.reshape(-1)[0]
        return float(str(item)) if array.dtype == np.float32 else float(item)

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


def close(a: float | None, b: float, rel: float = 1e-5) -> bool:
    return a is not None and math.isclose(a, b, rel_tol=rel)


def pair_with(view: View, node: Node, op_a, op_b):
    """``(a_node, b_value)`` when one input of the binary ``node`` is produced by an
    ``op_a`` node and the other satisfies ``op_b`` (a predicate on the value)."""
    for a, b in (node.inputs, node.inputs[::-1]):
        found = view.node(a, op_a)
        if found is not None and op_b(b):
            return found, b
    return None, None


def broadcast_shape(shapes):
    """NumPy's broadcast of graph shapes whose dims may be symbols (``"N"``); ``None``
    when they do not broadcast."""
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        dims = {s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0} - {1}
        if len(dims) > 1:
            return None
        out.append(dims.pop() if dims else 1)
    return out


def fixed_count(shape, axes) -> int | None:
    """The number of elements over ``axes`` of ``shape``, when those dims are fixed."""
    dims = [shape[a] for a in axes]
    return math.prod(dims) if all(isinstance(d, int) for d in dims) else None


def strip_ones(shape):
    shape = list(shape)
    while shape and shape[0] == 1:
        shape.pop(0)
    return shape


def reduced(view: View, value: str, op: str):
    """``(x, axes)`` when ``value`` is ``op(x, axes)`` with its reduced axes kept as 1
    (``keepdims`` or a reshape), or with only leading axes reduced (which broadcast
    the same way)."""
    node = view.node(value, "reshape")
    if node is not None:
        inner = view.node(node.inputs[0], op)
        if inner is not None and not inner.attrs.get("keepdims"):
            x = inner.inputs[0]
            axes = reduced_axes(view, inner)
            kept = [1 if a in axes else d for a, d in enumerate(view.shape(x))]
            if view.shape(value) == kept:
                return x, axes
        return None
    node = view.node(value, op)
    if node is None:
        return None
    axes = reduced_axes(view, node)
    if node.attrs.get("keepdims") or axes == list(range(len(axes))):
        return node.inputs[0], axes
    return None


def reduced_axes(view: View, node: Node) -> list[int]:
    rank = len(view.shape(node.inputs[0]))
    axes = node.attrs.get("axes", list(range(rank)))
    return sorted(a % rank for a in axes)


def mean_of(view: View, value: str):
    """``(x, axes)`` when ``value`` is the mean of ``x`` over ``axes`` (kept dims)."""
    node = view.node(value, ("div", "mul"))
    if node is not None:
        k, c = node.inputs
        found = reduced(view, k, "reduce_sum")
        if found is not None:
            n = fixed_count(view.shape(found[0]), found[1])
            factor = view.scalar(c)
            if n and (close(factor, n) if node.op == "div" else close(factor, 1.0 / n)):
                return found
    return reduced(view, value, "reduce_mean")


def constant_of_shape(view: View, value: str, shape) -> str | None:
    """``value`` (or the constant a reshape of it reads) when it holds ``shape``'s
    elements and broadcasts like them."""
    src = view.node(value, "reshape")
    if src is not None and strip_ones(view.shape(value)) == strip_ones(shape):
        value = src.inputs[0]
    if value in view.graph.constants and view.shape(value) == list(shape):
        return value
    return None


def channel_constant(view: View, value: str, shape) -> str | None:
    """The ``[C]`` constant that ``value`` reshapes to ``[C, 1, …]``: one number per
    channel (axis 1) of a tensor of ``shape`` ``[N, C, …]``."""
    src = view.node(value, "reshape")
    if src is None or strip_ones(view.shape(value)) != [shape[1]] + [1] * (len(shape) - 2):
        return None
    return constant_of_shape(view, src.inputs[0], [shape[1]])


def scalar_last(view: View, node: Node):
    a, b = node.inputs
    return (a, b) if view.scalar(a) is not None else (b, a)


def scaled_by(view: View, node: Node, factor: float) -> str | None:
    """``x`` when ``node`` is ``x * factor`` (either order)."""
    for a, b in (node.inputs, node.inputs[::-1]):
        if close(view.scalar(b), factor):
            return a
    return None


def absorb_constant(view: View, node: Node, ops: tuple, arity: int, param) -> bool:
    """``node`` = ``layer ⊕ c`` where ``layer`` (an op in ``ops`` with ``arity`` inputs,
    read only by ``node``) takes ``c`` as its next, optional input (a bias, a norm's
    scale): ``param(layer, c)`` gives the constant to append, or ``None``. On a match,
    ``node`` becomes ``layer`` with that input."""
    for a, b in (node.inputs, node.inputs[::-1]):
        layer = view.node(a, ops)
        if layer is None or not view.single_use(a) or len(layer.inputs) != arity:
            continue
        if view.shape(node.outputs[0]) != view.shape(a):
            continue
        constant = param(layer, b)
        if constant is None:
            continue
        view.replace(node, layer.op, layer.inputs + [constant], layer.attrs)
        return True
    return False
