"""Write a :class:`~rml_export.ir.Graph` as rml-graph: ``graph.json`` + a safetensors file.

The output is deterministic (same graph, same bytes), so a re-export can be compared with
a committed fixture byte for byte.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from .ir import Graph

FORMAT_VERSION = 1


def _dims(shape) -> list:
    if shape is None:
        raise ValueError("a declared shape is unknown")
    return [d if isinstance(d, str) else int(d) for d in shape]


def _json_ready(value):
    """Attributes as plain JSON: tuples -> lists, NumPy scalars -> Python numbers."""
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if not math.isfinite(value):
            raise ValueError(f"attribute value {value} is not finite")
        return value
    return value


def to_json(graph: Graph, weights_file: str) -> dict:
    """The rml-graph document of ``graph`` (a dict ready for ``json.dump``)."""

    def declare(name: str) -> dict:
        vtype = graph.types.get(name)
        if vtype is None:
            raise ValueError(f"value {name!r}: dtype and shape are unknown, cannot declare it")
        return {"name": name, "dtype": vtype.dtype, "shape": _dims(vtype.shape)}

    doc = {"format": "rml-graph", "version": FORMAT_VERSION}
    if graph.constants:
        doc["weights"] = weights_file
    if graph.metadata:
        doc["metadata"] = _json_ready(graph.metadata)
    doc["inputs"] = [declare(v) for v in graph.inputs]
    doc["constants"] = [declare(v) for v in graph.constants]
    nodes = []
    for node in graph.nodes:
        entry = {"op": node.op}
        if node.name:
            entry["name"] = node.name
        entry["inputs"] = list(node.inputs)
        entry["outputs"] = list(node.outputs)
        if node.attrs:
            entry["attrs"] = _json_ready(node.attrs)
        nodes.append(entry)
    doc["nodes"] = nodes
    doc["outputs"] = [declare(v) for v in graph.outputs]
    return doc


def save(graph: Graph, path: str | Path, weights_file: str | None = None) -> Path:
    """Write ``path`` (the JSON) and its weights next to it; returns the JSON path.

    ``weights_file`` defaults to ``<stem>.safetensors`` beside the JSON. Constants are
    stored under their value names, C-contiguous, in graph order.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    weights_file = weights_file or f"{path.stem}.safetensors"
    doc = to_json(graph, weights_file)
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    path.write_text(text)
    if graph.constants:
        tensors = {k: np.asarray(v, order="C") for k, v in graph.constants.items()}
        save_file(tensors, str(path.parent / weights_file), metadata={"format": "rml-graph"})
    return path
