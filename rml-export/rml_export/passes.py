"""Clean-up passes shared by every route, run by :func:`clean_up` before writing.

Each pass takes a :class:`~rml_export.ir.Graph`, rewrites it in place and returns whether
it changed anything; :func:`clean_up` repeats them until none does. The graph's input and
output names never change: a pass that would remove a graph output renames the value
that replaces it instead.
"""

from __future__ import annotations

import numpy as np

from .ir import Graph, ValueType

#: Attribute defaults of docs/graph-ir.md; an attribute equal to its default is dropped,
#: so the three routes write the same node for the same op.
DEFAULT_ATTRS = {
    "matmul": {"transpose_a": False, "transpose_b": False},
    "layer_norm": {"axis": -1, "epsilon": 1e-5},
    "rms_norm": {"epsilon": 1e-6},
    "group_norm": {"epsilon": 1e-5},
    "batch_norm": {"epsilon": 1e-5},
    "softmax": {"axis": -1},
    "log_softmax": {"axis": -1},
    "scaled_dot_product_attention": {"causal": False},
    "leaky_relu": {"alpha": 0.01},
    "elu": {"alpha": 1.0},
    "flatten": {"start": 1, "end": -1},
    "gather": {"axis": 0},
    "pad": {"mode": "constant", "value": 0.0},
    "conv1d": {"stride": 1, "padding": [0, 0], "dilation": 1, "groups": 1},
    "conv2d": {"stride": [1, 1], "padding": [[0, 0], [0, 0]], "dilation": [1, 1], "groups": 1},
    "conv_transpose1d": {
        "stride": 1, "padding": [0, 0], "dilation": 1, "groups": 1, "output_padding": 0,
    },
    "conv_transpose2d": {
        "stride": [1, 1], "padding": [[0, 0], [0, 0]], "dilation": [1, 1], "groups": 1,
        "output_padding": [0, 0],
    },
    "reduce_sum": {"keepdims": False},
    "reduce_max": {"keepdims": False},
    "reduce_min": {"keepdims": False},
    "reduce_prod": {"keepdims": False},
    "reduce_mean": {"keepdims": False},
    "variance": {"keepdims": False, "correction": 0},
    "argmax": {"keepdims": False},
    "argmin": {"keepdims": False},
}

#: Ops that only move or relabel data, folded with NumPy when their input is constant.
_FOLDABLE = {"transpose", "reshape", "squeeze", "unsqueeze", "cast", "flatten", "identity"}

_NUMPY_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64,
    "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_,
}


def _normalized(value):
    if isinstance(value, tuple):
        return [_normalized(v) for v in value]
    if isinstance(value, list):
        return [_normalized(v) for v in value]
    return value


def canonical_attrs(graph: Graph) -> bool:
    """Drop attributes equal to their documented default; tuples become lists."""
    changed = False
    for node in graph.nodes:
        defaults = DEFAULT_ATTRS.get(node.op, {})
        attrs = {k: _normalized(v) for k, v in node.attrs.items()}
        kept = {k: v for k, v in attrs.items() if not (k in defaults and defaults[k] == v)}
        if kept != node.attrs:
            node.attrs = kept
            changed = True
    return changed


def dead_code(graph: Graph) -> bool:
    """Remove nodes none of whose outputs reach a graph output, and unused constants."""
    live = set(graph.outputs)
    kept = []
    for node in reversed(graph.nodes):
        if any(v in live for v in node.outputs):
            kept.append(node)
            live.update(v for v in node.inputs if v)
    kept.reverse()
    unused = [c for c in graph.constants if c not in live]
    for name in unused:
        del graph.constants[name]
    changed = len(kept) != len(graph.nodes) or bool(unused)
    graph.nodes = kept
    return changed


def dedup_constants(graph: Graph) -> bool:
    """Give constants with the same dtype, shape and bytes one name."""
    seen: dict[tuple, str] = {}
    mapping: dict[str, str] = {}
    for name, array in graph.constants.items():
        key = (array.dtype.str, array.shape, array.tobytes())
        if key in seen and name not in graph.outputs:
            mapping[name] = seen[key]
        else:
            seen.setdefault(key, name)
    for name in mapping:
        del graph.constants[name]
    graph.rename_uses(mapping)
    return bool(mapping)


def _replace_value(graph: Graph, old: str, new: str) -> bool:
    """Make every use of ``old`` read ``new``; refused (False) when that would rename a
    graph output or input."""
    if old in graph.outputs:
        if new in graph.inputs or new in graph.constants or new in graph.outputs:
            return False
        # Keep the output's name: the producer of `new` writes `old` instead.
        producer = graph.producers().get(new)
        if producer is None:
            return False
        producer.outputs = [old if v == new else v for v in producer.outputs]
        for node in graph.nodes:
            node.inputs = [old if v == new else v for v in node.inputs]
        graph.types[old] = graph.types.get(old) or graph.types.get(new)
        return True
    graph.rename_uses({old: new})
    return True


def remove_identities(graph: Graph) -> bool:
    """Bypass ``identity`` nodes (and reshapes/transposes that change nothing)."""
    changed = False
    for node in list(graph.nodes):
        if node not in graph.nodes or not _is_noop(graph, node):
            continue
        out, src = node.outputs[0], node.inputs[0]
        if _replace_value(graph, out, src):
            graph.nodes.remove(node)
            changed = True
    return changed


def _is_noop(graph: Graph, node) -> bool:
    if node.op == "identity":
        return True
    if node.op == "transpose":
        perm = node.attrs["perm"]
        return list(perm) == list(range(len(perm)))
    if node.op == "reshape":
        src = graph.types.get(node.inputs[0])
        dst = graph.types.get(node.outputs[0])
        return (
            src is not None and dst is not None and src.shape is not None
            and src.shape == dst.shape
            and all(isinstance(d, int) for d in src.shape)
        )
    return False


def merge_layout_chains(graph: Graph) -> bool:
    """``transpose(transpose(x))`` -> one transpose; ``reshape(reshape(x))`` -> one reshape.

    The second op is rewritten to read the first one's input; dead_code then removes the
    first when nothing else reads it. A reshape whose shape copies input sizes (``0``)
    is left alone: those sizes change meaning when the input changes.
    """
    producers = graph.producers()
    changed = False
    for node in graph.nodes:
        first = producers.get(node.inputs[0]) if node.inputs else None
        if first is None or first.op != node.op:
            continue
        if node.op == "transpose":
            p1, p2 = first.attrs["perm"], node.attrs["perm"]
            node.attrs = {"perm": [p1[i] for i in p2]}
            node.inputs = [first.inputs[0]]
            changed = True
        elif node.op == "reshape" and 0 not in node.attrs["shape"]:
            node.inputs = [first.inputs[0]]
            changed = True
    return changed


def fold_constants(graph: Graph) -> bool:
    """Evaluate layout-only ops (transpose, reshape, cast, …) on constants with NumPy,
    so a weight the framework transposes at run time is stored transposed instead."""
    changed = False
    for node in list(graph.nodes):
        if node.op not in _FOLDABLE or not node.inputs or node.inputs[0] not in graph.constants:
            continue
        if node.outputs[0] in graph.outputs:
            continue
        value = _fold(graph, node, graph.constants[node.inputs[0]])
        if value is None:
            continue
        name = graph.fresh_name(node.outputs[0] + ".folded")
        graph.constants[name] = np.asarray(value, order="C")
        graph.types[name] = ValueType(graph.types[node.outputs[0]].dtype
                                      if node.outputs[0] in graph.types
                                      else graph.types[node.inputs[0]].dtype, list(value.shape))
        graph.rename_uses({node.outputs[0]: name})
        graph.nodes.remove(node)
        changed = True
    return changed


def _fold(graph: Graph, node, x: np.ndarray):
    attrs = node.attrs
    if node.op == "identity":
        return x
    if node.op == "transpose":
        return np.transpose(x, attrs["perm"])
    if node.op == "cast":
        return x.astype(_NUMPY_DTYPES[attrs["to"].upper()])
    out = graph.types.get(node.outputs[0])
    if out is None or out.shape is None or not all(isinstance(d, int) for d in out.shape):
        return None
    return x.reshape(out.shape)


#: The passes in the order :func:`clean_up` runs them.
PASSES = (
    canonical_attrs,
    fold_constants,
    merge_layout_chains,
    remove_identities,
    dedup_constants,
    dead_code,
)


def clean_up(graph: Graph, max_rounds: int = 20) -> Graph:
    """Run every pass until the graph stops changing; returns the same graph."""
    for _ in range(max_rounds):
        if not any([p(graph) for p in PASSES]):
            break
    return graph
