"""The exporters' in-memory rml-graph: inputs, constants, nodes and outputs.

Every route (torch, jax, tf) builds a :class:`Graph` with the same few calls, the clean-up
passes (:mod:`rml_export.passes`) rewrite it, and :mod:`rml_export.writer` saves it as the
JSON + safetensors pair that ``rml-host`` loads (docs/graph-ir.md is the format). Nothing
here imports a framework.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: NumPy dtype -> rml-graph dtype name (the safetensors spelling).
DTYPE_NAMES = {
    np.dtype(np.float64): "F64",
    np.dtype(np.float32): "F32",
    np.dtype(np.float16): "F16",
    np.dtype(np.int64): "I64",
    np.dtype(np.int32): "I32",
    np.dtype(np.int16): "I16",
    np.dtype(np.int8): "I8",
    np.dtype(np.uint8): "U8",
    np.dtype(np.bool_): "BOOL",
}

#: A dim is a fixed size or a symbol such as ``"N"`` (see docs/graph-ir.md).
Dim = int | str


def dtype_name(dtype) -> str:
    """The rml-graph name of a NumPy dtype (``float32`` -> ``"F32"``); bf16 is ``"BF16"``."""
    dtype = np.dtype(dtype)
    if dtype.name == "bfloat16":
        return "BF16"
    try:
        return DTYPE_NAMES[dtype]
    except KeyError:
        raise ValueError(f"dtype {dtype} has no rml-graph equivalent") from None


@dataclass
class ValueType:
    """A value's dtype and shape, as far as the exporter knows them (``None``: unknown)."""

    dtype: str
    shape: list[Dim] | None


@dataclass
class Node:
    """One op application: value names in, value names out, JSON-ready attributes."""

    op: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict = field(default_factory=dict)
    name: str | None = None


@dataclass
class Graph:
    """An rml-graph under construction.

    Values are named strings, unique across inputs, constants and node outputs; nodes are
    kept in topological order because each is appended after the values it uses exist.
    ``types`` records what the framework told the exporter about each value; the passes
    use it where a rewrite depends on a shape.
    """

    inputs: list[str] = field(default_factory=list)
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    types: dict[str, ValueType] = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)
    _taken: set[str] = field(default_factory=set, repr=False)

    # -- names ------------------------------------------------------------------------

    def fresh_name(self, hint: str) -> str:
        """A value name not used yet: ``hint`` itself, else ``hint_1``, ``hint_2``, …"""
        hint = hint or "v"
        name, k = hint, 0
        while name in self._taken:
            k += 1
            name = f"{hint}_{k}"
        self._taken.add(name)
        return name

    # -- building ---------------------------------------------------------------------

    def add_input(self, name: str, dtype: str, shape: list[Dim]) -> str:
        """Declare a graph input; its symbols (``"N"``) define the graph's free sizes."""
        if name in self._taken:
            raise ValueError(f"input name {name!r} is already used")
        self._taken.add(name)
        self.inputs.append(name)
        self.types[name] = ValueType(dtype, list(shape))
        return name

    def add_constant(self, array, hint: str = "const") -> str:
        """Add a constant tensor (copied into a C-contiguous NumPy array); returns its name."""
        array = np.asarray(array, order="C")  # keeps rank 0 (ascontiguousarray would not)
        name = self.fresh_name(hint)
        self.constants[name] = array
        self.types[name] = ValueType(dtype_name(array.dtype), list(array.shape))
        return name

    def add_node(
        self,
        op: str,
        inputs: list[str],
        attrs: dict | None = None,
        *,
        name: str | None = None,
        outputs: int | list[str] = 1,
        types: list[ValueType | None] | None = None,
    ) -> list[str]:
        """Append ``op`` over ``inputs`` and return its output names.

        ``outputs`` is a count (names are made from ``name`` or ``op``) or explicit
        hints; ``types`` optionally records each output's dtype and shape.
        """
        for value in inputs:
            if value and value not in self._taken:
                raise ValueError(f"{op}: input {value!r} is not defined")
        hints = [name or op] * outputs if isinstance(outputs, int) else outputs
        out = [self.fresh_name(h) for h in hints]
        self.nodes.append(Node(op, list(inputs), out, dict(attrs or {}), name))
        for value, vtype in zip(out, types or []):
            if vtype is not None:
                self.types[value] = vtype
        return out

    def add_output(self, value: str, dtype: str | None = None, shape: list[Dim] | None = None):
        """Mark ``value`` as a graph output, recording its type when given."""
        if value not in self._taken:
            raise ValueError(f"output {value!r} is not defined")
        self.outputs.append(value)
        if dtype is not None:
            self.types[value] = ValueType(dtype, None if shape is None else list(shape))

    # -- queries ----------------------------------------------------------------------

    def users(self) -> dict[str, list[Node]]:
        """For every value, the nodes that read it (in node order)."""
        uses: dict[str, list[Node]] = {}
        for node in self.nodes:
            for value in node.inputs:
                if value:
                    uses.setdefault(value, []).append(node)
        return uses

    def producers(self) -> dict[str, Node]:
        """For every node output, the node that writes it."""
        return {value: node for node in self.nodes for value in node.outputs}

    def rename_uses(self, mapping: dict[str, str]) -> None:
        """Make every node input and graph output read ``mapping[v]`` instead of ``v``."""
        if not mapping:
            return

        def resolve(value: str) -> str:
            while value in mapping:
                value = mapping[value]
            return value

        for node in self.nodes:
            node.inputs = [resolve(v) if v else v for v in node.inputs]
        self.outputs = [resolve(v) for v in self.outputs]
