"""Graph rewrites that recover rml-graph's high-level ops from the decomposed forms JAX
writes (softmax, layer_norm, gelu, …)."""

from __future__ import annotations

from .ir import Graph


def fuse(graph: Graph) -> Graph:
    """Apply every pattern until none matches; returns the same graph."""
    return graph
