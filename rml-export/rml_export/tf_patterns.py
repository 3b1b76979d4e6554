"""Rewrites of the TF route's graph before the shared clean-up (placeholder)."""


def run(graph) -> None:
    """Apply the TF-specific rewrites to ``graph`` in place."""
