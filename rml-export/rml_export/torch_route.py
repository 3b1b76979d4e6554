"""The PyTorch route: ``torch.export`` -> ATen graph -> rml-graph.

The model is captured with ``torch.export.export`` (non-strict) and its ATen graph is
lowered node by node with the table in :mod:`rml_export.torch_ops`. High-level ops
(``linear``, ``layer_norm``, ``gelu``, ``softmax``, ``scaled_dot_product_attention``,
convolutions, norms …) are kept: the graph is first taken with an empty decomposition
table, and only the ops the table cannot lower are then decomposed with PyTorch's own
decompositions, repeating until every op is lowered or none can be decomposed further.
An op that is still left fails the export with :class:`~rml_export.ExportError` naming
the ATen op and the model's source line.

Parameters and buffers become constants named by their fully qualified names
(``fc1.weight``), lifted tensor constants by their lifted names; inputs keep the names of
``example_inputs``; outputs are ``y`` (one tensor), the dict's keys, or ``y0``, ``y1``, …
(a tuple or list).
"""

from __future__ import annotations

import sys

import numpy as np

from .errors import ExportError
from .ir import Graph
from .passes import clean_up
from .torch_lower import Lowerer
from .torch_ops import LOWERINGS

#: How often ops the table cannot lower are decomposed before giving up.
_DECOMPOSE_ROUNDS = 8


def export(model, example_inputs: dict[str, np.ndarray], *, symbols=None, **options) -> Graph:
    """Export ``model`` (called as ``model(**example_inputs)``) to an rml-graph.

    ``symbols`` marks input dims as symbolic, ``{"x": {0: "N"}}``: the graph then accepts
    any size there (a ``torch.export.Dim`` per symbol name; inputs sharing a name share
    the size). The model is switched to ``eval()`` mode first: the graph is inference-only.
    """
    import torch

    if options:
        raise TypeError(f"export_torch: unknown options {sorted(options)}")
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"export_torch: expected a torch.nn.Module, got {type(model).__name__}")
    tensors = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in example_inputs.items()}
    _keep_triton_out()
    model.eval()
    with torch.no_grad():
        program = torch.export.export(
            model, (), tensors, dynamic_shapes=_dynamic_shapes(symbols, tensors), strict=False
        )
    program = _decompose(program)
    graph = Lowerer(program, list(tensors), symbols or {}).run()
    graph.metadata = {"producer": "rml-export", "framework": "torch",
                      "model": type(model).__name__}
    return clean_up(graph)


def _keep_triton_out() -> None:
    """``torch.export`` imports ``torch._dynamo``, which imports Triton when it is
    installed; Triton's LLVM aborts the process when TensorFlow's or jaxlib's LLVM is
    loaded already. Exporting runs on the CPU and never needs Triton, so in that case
    Triton is marked unavailable (it could not be imported in this process anyway)."""
    if "triton" not in sys.modules and ({"tensorflow", "jaxlib"} & set(sys.modules)):
        sys.modules["triton"] = None


def _dynamic_shapes(symbols, tensors):
    """``{"x": {0: "N"}}`` -> torch.export's ``dynamic_shapes``, one ``Dim`` per name."""
    if not symbols:
        return None
    import torch

    unknown = set(symbols) - set(tensors)
    if unknown:
        raise ValueError(f"symbols: {sorted(unknown)} are not example inputs")
    dims: dict[str, object] = {}
    spec = {}
    for name in tensors:
        axes = {}
        for axis, sym in (symbols.get(name) or {}).items():
            if not isinstance(sym, str):
                sym = sym.__name__  # a torch.export.Dim
            if tensors[name].shape[int(axis)] < 2:
                raise ValueError(
                    f"symbols: input {name!r} axis {axis} ({sym}) has example size "
                    f"{tensors[name].shape[int(axis)]}; torch.export fixes sizes 0 and 1, "
                    "so give an example of size 2 or more there")
            dims.setdefault(sym, torch.export.Dim(sym, min=1))
            axes[int(axis)] = dims[sym]
        spec[name] = axes or None
    return spec


def _decompose(program):
    """Run decompositions: none at first, then only for ops the table cannot lower."""
    import torch

    program = program.run_decompositions({})
    table = torch.export.default_decompositions()
    for _ in range(_DECOMPOSE_ROUNDS):
        todo = {
            node.target
            for node in program.graph.nodes
            if node.op == "call_function"
            and isinstance(node.target, torch._ops.OpOverload)
            and str(node.target) not in LOWERINGS
            and node.target in table
        }
        if not todo:
            break
        program = program.run_decompositions({op: table[op] for op in todo})
    return program


__all__ = ["export", "ExportError"]
