"""rml-export: PyTorch, JAX and TensorFlow models to rml-graph.

Each route walks its framework's own graph (``torch.export``, the jaxpr, a frozen TF
GraphDef), lowers every op onto rml-graph's small op set or fails naming the op, then the
shared clean-up passes run and the writer saves ``graph.json`` + safetensors weights::

    import rml_export
    graph = rml_export.export_torch(model, {"x": x})       # or export_jax / export_tf
    rml_export.save(graph, "out/graph.json", weights_file="weights.safetensors")

Frameworks are imported only when their route is used.
"""

from .errors import ExportError
from .ir import Graph, Node, ValueType
from .passes import clean_up
from .writer import save

__all__ = [
    "ExportError", "Graph", "Node", "ValueType", "clean_up", "save",
    "export_torch", "export_jax", "export_tf",
]


def export_torch(model, example_inputs, **options) -> Graph:
    """Export a ``torch.nn.Module`` called as ``model(**example_inputs)`` (see
    :mod:`rml_export.torch_route`)."""
    from .torch_route import export

    return export(model, example_inputs, **options)


def export_jax(fn, params, example_inputs, **options) -> Graph:
    """Export a pure function called as ``fn(params, **example_inputs)`` (see
    :mod:`rml_export.jax_route`)."""
    from .jax_route import export

    return export(fn, params, example_inputs, **options)


def export_tf(module, example_inputs, **options) -> Graph:
    """Export a ``tf.Module`` or function called as ``module(**example_inputs)`` (see
    :mod:`rml_export.tf_route`)."""
    from .tf_route import export

    return export(module, example_inputs, **options)
