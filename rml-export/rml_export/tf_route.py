"""The TensorFlow route: a concrete function frozen to a GraphDef, lowered op by op.

:func:`export` wraps the model in a ``tf.function`` whose input signature comes from the
example inputs, freezes the concrete function with ``convert_variables_to_constants_v2``
(variables become ``Const`` nodes) and walks the frozen graph from its outputs:

- **Static values.** A node whose value depends only on constants and on *shapes* (the
  ``Shape`` → ``StridedSlice`` → ``Pack`` chains TF builds for every reshape, the
  ``Range``/``Rank`` chains of ``softmax(axis=1)``) is evaluated by TensorFlow itself and
  becomes a NumPy value: an attribute where an op needs one, a constant otherwise.
- **Lowered values.** Every other node is lowered onto rml-graph ops by
  :mod:`rml_export.tf_ops`; an op it has no lowering for raises
  :class:`~rml_export.ExportError` naming the op, its node and the Python line that made it.
- **Symbols.** ``symbols={"x": {0: "N"}}`` traces the model once more per symbol with
  that size changed; sizes and shape attributes that follow the symbol are written with
  it (``"N"``, ``"8*N"``), so TF's run-time shape arithmetic never reaches the graph.

Weights keep their variable names (``":0"`` stripped, ``"/"`` → ``"."``); the
``NHWC`` layout of convolutions and pooling is handled by explicit transposes, which
:mod:`rml_export.tf_patterns` sinks and cancels before the shared clean-up passes run.
"""

from __future__ import annotations

import os

import numpy as np

from .errors import ExportError
from .ir import Graph, ValueType, dtype_name
from .passes import clean_up

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

#: Ops whose value is the value of their first input.
PASS_THROUGH = {
    "Identity", "IdentityN", "StopGradient", "PreventGradient", "Snapshot", "EnsureShape",
    "CheckNumerics",
}
#: Control flow ops: the export fails on them by name.
CONTROL_FLOW = {"While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase"}
#: Ops that may rearrange a weight without changing its elements.
REARRANGE = {"Reshape", "ExpandDims", "Squeeze", "StridedSlice", "Transpose", "Cast"}
#: Ops whose output may be larger than their input: lowered (not folded) when the output
#: shape follows a symbol.
EXPANDING = {"BroadcastTo", "Tile", "Fill"}
#: Ops that read only their input's shape, static whenever that shape is fully known.
SHAPE_OPS = {"Shape", "ShapeN", "Size", "Rank", "ZerosLike", "OnesLike"}


def export(module_or_fn, example_inputs: dict, *, symbols: dict | None = None) -> Graph:
    """Export a ``tf.Module`` or function called as ``module_or_fn(**example_inputs)``.

    ``example_inputs`` maps input names to arrays (their dtypes and shapes make the input
    signature); ``symbols`` optionally names symbolic input dims, ``{"x": {0: "N"}}``.
    Returns the cleaned-up :class:`~rml_export.Graph`.
    """
    from . import tf_patterns
    from .tf_ops import lower_node

    inputs = {k: np.asarray(v) for k, v in example_inputs.items()}
    symbols = {k: dict(v) for k, v in (symbols or {}).items()}
    dtypes = {k: v.dtype for k, v in inputs.items()}
    main = _Trace(module_or_fn, {k: v.shape for k, v in inputs.items()}, dtypes)
    alts = [
        (sym, size, _Trace(module_or_fn, _vary(inputs, symbols, sym, size), dtypes))
        for sym, size in _symbol_sizes(inputs, symbols).items()
    ]
    lowering = Lowering(main, alts)
    graph = lowering.graph
    graph.metadata = {"producer": "rml-export 0.1", "framework": "tf"}
    for name, value in inputs.items():
        dims = [symbols.get(name, {}).get(i, d) for i, d in enumerate(value.shape)]
        graph.add_input(name, dtype_name(value.dtype), dims)
        if name in main.placeholders:
            lowering.values[main.placeholders[name]] = name
    lowering.lower_outputs(lower_node)
    tf_patterns.run(graph)
    return clean_up(graph)


def _symbol_sizes(inputs, symbols) -> dict[str, int]:
    """Each symbol's size in the example inputs (every use must agree)."""
    sizes: dict[str, int] = {}
    for name, dims in symbols.items():
        if name not in inputs:
            raise ValueError(f"symbols: {name!r} is not an input")
        for axis, sym in dims.items():
            size = inputs[name].shape[axis]
            if sizes.setdefault(sym, size) != size:
                raise ValueError(f"symbols: {sym!r} has sizes {sizes[sym]} and {size}")
    return sizes


def _vary(inputs, symbols, sym: str, size: int) -> dict[str, tuple]:
    """The input shapes with every dim named ``sym`` one larger."""
    shapes = {}
    for name, value in inputs.items():
        shape = list(value.shape)
        for axis, s in symbols.get(name, {}).items():
            if s == sym:
                shape[axis] = size + 1
        shapes[name] = tuple(shape)
    return shapes


class _Trace:
    """The model traced at fixed input shapes and frozen, with a session to evaluate the
    static part of the frozen graph."""

    def __init__(self, module_or_fn, shapes: dict[str, tuple], dtypes: dict[str, np.dtype]):
        import tensorflow as tf
        from tensorflow.python.framework.convert_to_constants import (
            convert_variables_to_constants_v2,
        )

        self.names = list(shapes)
        self.shapes = shapes
        self.dtypes = dtypes
        self.output_keys: list[str] = []
        keys = self.output_keys

        def call(*args):
            out = module_or_fn(**dict(zip(self.names, args)))
            if isinstance(out, dict):
                keys[:] = [str(k) for k in out]
                return [out[k] for k in out]
            if isinstance(out, (tuple, list)):
                keys[:] = [f"y{i}" for i in range(len(out))]
                return list(out)
            keys[:] = ["y"]
            return [out]

        spec = [tf.TensorSpec(shapes[n], tf.as_dtype(dtypes[n]), name=n) for n in self.names]
        concrete = tf.function(call, input_signature=spec).get_concrete_function()
        # Loops stay `While` ops (failing by name) instead of becoming v1 control flow.
        frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=False)
        self.source = concrete.graph
        self.variable_names = _variable_names(concrete)
        self.graph = tf.Graph()
        with self.graph.as_default():
            tf.graph_util.import_graph_def(frozen.graph.as_graph_def(), name="")
        self.outputs = [self.graph.get_tensor_by_name(t.name) for t in frozen.outputs]
        if len(self.outputs) != len(keys):
            raise ValueError("the model must return a tensor, or a dict or tuple of tensors "
                             f"(it returned {len(self.outputs)} tensors for outputs {keys})")
        self.placeholders = {
            op.name: op.outputs[0] for op in self.graph.get_operations() if op.type == "Placeholder"
        }
        self.session = tf.compat.v1.Session(graph=self.graph)

    def evaluate(self, tensors: list) -> list[np.ndarray]:
        """The values of static tensors (given by name), computed by TensorFlow on zeros
        of the traced input shapes (a static value never reads the input data)."""
        if not tensors:
            return []
        feed = {
            self.placeholders[n]: np.zeros(self.shapes[n], self.dtypes[n]) for n in self.names
            if n in self.placeholders
        }
        fetch = [self.graph.get_tensor_by_name(t) for t in tensors]
        return [np.asarray(v) for v in self.session.run(fetch, feed_dict=feed)]

    def location(self, op_name: str) -> str | None:
        """``file:line`` of the user code that created ``op_name``, when TF recorded it."""
        try:
            frames = self.source.get_operation_by_name(op_name).traceback
        except (KeyError, ValueError):
            return None
        here = os.path.dirname(os.path.abspath(__file__))
        for frame in reversed(list(frames or [])):
            filename, lineno = frame[0], frame[1]
            if "tensorflow" in filename or "keras" in filename or filename.startswith(here):
                continue
            return f"{os.path.basename(filename)}:{lineno}"
        return None


def _variable_names(concrete) -> dict[str, str]:
    """Frozen ``Const`` node name -> variable name (``fc1/kernel:0`` -> ``fc1.kernel``)."""
    by_handle = {}
    for var in concrete.graph.variables:
        by_handle[id(var.handle)] = var.name
    names = {}
    for external, internal in concrete.graph.captures:
        name = by_handle.get(id(external))
        if name is not None:
            names[internal.op.name] = _clean_name(name)
    return names


def _clean_name(name: str) -> str:
    if name.endswith(":0"):
        name = name[:-2]
    return name.replace("/", ".")


class Lowering:
    """The walk over a frozen graph: TF tensor -> rml value name or static NumPy value.

    :mod:`rml_export.tf_ops` lowers one node through the helpers here (``value``,
    ``static``, ``emit``, ``dims``, ``fail``)."""

    def __init__(self, main: _Trace, alts: list):
        self.main = main
        self.alts = alts
        self.graph = Graph()
        self.values: dict = {}  # tf.Tensor -> rml value name
        self.static_values: dict = {}  # tf.Tensor name -> np.ndarray (main trace)
        self._alt_static: dict = {}  # (symbol, tensor name) -> np.ndarray
        self._constants: dict[str, str] = {}  # tf tensor name -> rml constant name
        self._static_ops: set[str] = set()

    # -- setup --------------------------------------------------------------------------

    def lower_outputs(self, lower_node) -> None:
        """Lower everything the outputs need, then declare the outputs by their API names."""
        for key in self.main.output_keys:  # reserved: no weight or node takes these names
            if self.graph.fresh_name(key) != key:
                raise ValueError(f"output name {key!r} is also an input name")
        order = self._order(self.main.outputs)
        for op in order:
            if op.type in CONTROL_FLOW:
                raise self.fail(op, "control flow (tf.while_loop, a loop over tf.range, "
                                "tf.cond) cannot be exported: unroll loops in Python, "
                                "unroll=True for Keras RNNs")
        self._find_static(order)
        self._evaluate_static(order)
        for op in order:
            if op.name in self._static_ops or op.type in ("Placeholder", "NoOp"):
                continue
            if op.type in PASS_THROUGH:
                for i, out in enumerate(op.outputs):
                    self.values[out] = self.value(op.inputs[i if op.type == "IdentityN" else 0])
                continue
            lower_node(self, op)
        for key, tensor in zip(self.main.output_keys, self.main.outputs):
            src = self.value(tensor)
            self.graph._taken.discard(key)
            vtype = self.vtype(tensor)
            self.graph.add_node("identity", [src], outputs=[key], types=[vtype])
            self.graph.add_output(key, vtype.dtype, vtype.shape)

    def _order(self, outputs) -> list:
        """The ops the outputs depend on (data inputs only), inputs before users; a cycle
        (TF1 loop control flow) fails naming an op on it."""
        order, done, active = [], set(), set()
        stack = [(t.op, False) for t in reversed(outputs)]
        while stack:
            op, expanded = stack.pop()
            if op.name in done:
                continue
            if expanded:
                active.discard(op.name)
                done.add(op.name)
                order.append(op)
                continue
            if op.name in active:
                raise self.fail(op, "a loop in the graph (control flow) cannot be exported; "
                                "unroll it in Python")
            active.add(op.name)
            stack.append((op, True))
            for t in reversed(list(op.inputs)):
                if t.op.name not in done:
                    stack.append((t.op, False))
        return order

    def _find_static(self, order) -> None:
        for op in order:
            if op.type == "Const":
                self._static_ops.add(op.name)
            elif op.type in SHAPE_OPS:
                if all(t.shape.is_fully_defined() for t in op.inputs):
                    self._static_ops.add(op.name)
            elif (op.type in ("Placeholder", "NoOp") or op.op_def.is_stateful
                  or not all(t.dtype.is_numpy_compatible for t in op.outputs)):
                continue
            elif op.type in EXPANDING and self._varies(op.outputs[0]):
                continue  # lowered to `expand` to a symbolic shape
            elif op.inputs and all(t.op.name in self._static_ops for t in op.inputs):
                self._static_ops.add(op.name)
        # A broadcast of a constant that a lowered op reads stays an `expand` of the
        # (smaller, named) constant instead of a folded copy of every element.
        lowered = {t.op.name for op in order if op.name not in self._static_ops
                   for t in op.inputs} | {t.op.name for t in self.main.outputs}
        for op in order:
            if (op.type in EXPANDING and op.name in self._static_ops and op.name in lowered
                    and op.outputs[0].shape.num_elements()
                    > op.inputs[-1 if op.type == "Fill" else 0].shape.num_elements()):
                self._static_ops.discard(op.name)

    def _varies(self, tensor) -> bool:
        """Whether ``tensor``'s shape changes with a symbol."""
        return any(_alt_shape(trace.graph, tensor.name) != tensor.shape.as_list()
                   for _, _, trace in self.alts)

    def _evaluate_static(self, order) -> None:
        """Evaluate every static tensor a lowered op or an output reads (one session run)."""
        needed = []
        for op in order:
            if op.name in self._static_ops:
                continue
            needed += [t.name for t in op.inputs if t.op.name in self._static_ops]
        needed += [t.name for t in self.main.outputs if t.op.name in self._static_ops]
        needed = list(dict.fromkeys(needed))
        for name, value in zip(needed, self.main.evaluate(needed)):
            self.static_values[name] = value
        for sym, _, trace in self.alts:
            present = [n for n in needed if _has_tensor(trace.graph, n)]
            for name, value in zip(present, trace.evaluate(present)):
                self._alt_static[(sym, name)] = value

    # -- what tf_ops uses ---------------------------------------------------------------

    def is_static(self, tensor) -> bool:
        """Whether ``tensor`` is known at export time."""
        return tensor.name in self.static_values

    def inner_static(self, tensor) -> np.ndarray | None:
        """The value of any static tensor, also one inside a folded computation (a
        lowering that recognizes how a static input was computed reads its parts)."""
        if tensor.op.name not in self._static_ops:
            return None
        if tensor.name not in self.static_values:
            (self.static_values[tensor.name],) = self.main.evaluate([tensor.name])
        return self.static_values[tensor.name]

    def static(self, op, index: int, what: str = "value") -> np.ndarray:
        """Input ``index`` of ``op`` as an export-time NumPy value that does not depend on
        a symbol; fails naming ``what`` otherwise."""
        tensor = op.inputs[index]
        if tensor.name not in self.static_values:
            raise self.fail(op, f"the {what} is computed at run time; it must be static")
        value = self.static_values[tensor.name]
        for sym, _, _ in self.alts:
            alt = self._alt_static.get((sym, tensor.name))
            if alt is None or alt.shape != value.shape or not np.array_equal(alt, value):
                raise self.fail(op, f"the {what} depends on the size of symbol {sym!r}")
        return value

    def value(self, tensor) -> str:
        """The rml value of ``tensor``: its lowered value, or a constant for a static one."""
        if tensor in self.values:
            return self.values[tensor]
        if tensor.name in self._constants:
            return self._constants[tensor.name]
        if tensor.name not in self.static_values:
            raise self.fail(tensor.op, f"value {tensor.name!r} was not lowered")
        array = self.static_values[tensor.name]
        for sym, _, _ in self.alts:
            alt = self._alt_static.get((sym, tensor.name))
            if alt is not None and alt.shape == array.shape and np.array_equal(alt, array):
                continue
            if alt is None or not _uniform(array) or not _uniform(alt) or (
                    array.size and alt.size and alt.flat[0] != array.flat[0]):
                raise self.fail(tensor.op, f"this constant depends on the size of symbol {sym!r}")
            name = self._filled(tensor, array)
            break
        else:
            name = self.graph.add_constant(array, self.constant_name(tensor))
        self._constants[tensor.name] = name
        return name

    def _filled(self, tensor, array: np.ndarray) -> str:
        """A constant of one repeated value whose shape follows a symbol (``tf.zeros``
        of the batch size): the value ``expand``-ed to the symbolic shape."""
        dims = self.dims(tensor)
        if any(isinstance(d, str) and not d.isidentifier() for d in dims):
            raise self.fail(tensor.op, f"a filled constant of shape {dims}: rml-graph "
                            "`expand` takes plain symbols only")
        fill = self.graph.add_constant(array.reshape(-1)[:1].reshape(()), "fill")
        (out,) = self.graph.add_node("expand", [fill], {"shape": dims}, name=tensor.op.name,
                                     outputs=[_clean_name(tensor.op.name)],
                                     types=[self.vtype(tensor)])
        return out

    def constant(self, array, hint: str) -> str:
        """A new constant (scalars and tables a lowering adds)."""
        return self.graph.add_constant(np.asarray(array), hint)

    def constant_name(self, tensor) -> str:
        """A weight's name: its variable's name when it reads one through identities or
        ops that only rearrange all of its elements (``w[:, None, None]``, a reshape)."""
        op = tensor.op
        while op.inputs and (op.type in PASS_THROUGH or (
                op.type in REARRANGE and op.inputs[0].shape.num_elements()
                == op.outputs[0].shape.num_elements())):
            op = op.inputs[0].op
        if op.name in self.main.variable_names:
            return self.main.variable_names[op.name]
        return _clean_name(tensor.op.name)

    def weight(self, op, index: int, array: np.ndarray) -> str:
        """A constant derived from static input ``index`` (a kernel in rml's layout),
        named after that input's variable."""
        return self.graph.add_constant(array, self.constant_name(op.inputs[index]))

    def dims(self, tensor) -> list:
        """``tensor``'s shape with symbolic sizes written as symbols (``N``, ``4*N``)."""
        shape = tensor.shape
        if not shape.is_fully_defined():
            raise ExportError("tf", tensor.op.type,
                              f"the shape of {tensor.name!r} is not known at export time",
                              self.main.location(tensor.op.name))
        dims = list(shape.as_list())
        for i, d in enumerate(dims):
            factors = []
            for sym, size, trace in self.alts:
                other = _alt_shape(trace.graph, tensor.name)
                if other is None or len(other) != len(dims):
                    raise self.fail(tensor.op, f"the graph changes with the size of {sym!r}")
                if other[i] == d:
                    continue
                k = other[i] - d
                if k <= 0 or d != k * size:
                    raise self.fail(tensor.op, f"size {d} depends on symbol {sym!r} "
                                    "in a way rml-graph cannot write (not k*symbol)")
                factors.append(sym)
                d = k
            if factors:
                dims[i] = "*".join(([str(d)] if d != 1 else []) + factors)
        return dims

    def vtype(self, tensor) -> ValueType:
        """The :class:`ValueType` of a TF tensor."""
        return ValueType(dtype_name(tensor.dtype.as_numpy_dtype), self.dims(tensor))

    def emit(self, op, rml_op: str, inputs: list[str], attrs: dict | None = None,
             index: int = 0) -> str:
        """Add an rml node computing output ``index`` of ``op``; maps it and returns it."""
        (out,) = self.graph.add_node(rml_op, inputs, attrs, name=op.name,
                                     outputs=[self._out_name(op, index)],
                                     types=[self.vtype(op.outputs[index])])
        self.values[op.outputs[index]] = out
        return out

    def emit_all(self, op, rml_op: str, inputs: list[str], attrs: dict | None = None) -> list:
        """Add one rml node computing every output of ``op`` (``split``)."""
        outs = self.graph.add_node(
            rml_op, inputs, attrs, name=op.name,
            outputs=[self._out_name(op, i) for i in range(len(op.outputs))],
            types=[self.vtype(t) for t in op.outputs])
        for tensor, out in zip(op.outputs, outs):
            self.values[tensor] = out
        return outs

    @staticmethod
    def _out_name(op, index: int) -> str:
        return _clean_name(op.name) + (f".{index}" if index else "")

    def tmp(self, op, rml_op: str, inputs: list[str], attrs: dict | None = None,
            dtype: str | None = None, shape: list | None = None) -> str:
        """Add an intermediate node of a multi-node lowering of ``op`` (dtype defaults to
        the op's first output's, shape to unknown)."""
        dtype = dtype or dtype_name(op.outputs[0].dtype.as_numpy_dtype)
        (out,) = self.graph.add_node(rml_op, inputs, attrs, name=op.name,
                                     outputs=[_clean_name(op.name) + "." + rml_op],
                                     types=[ValueType(dtype, shape)])
        return out

    def chain(self, op, value: str, steps: list, index: int = 0) -> str:
        """Apply ``steps`` (``(rml_op, attrs)`` pairs) to ``value``; the last one computes
        output ``index`` of ``op`` (no steps: the output is ``value`` itself)."""
        if not steps:
            self.bind(op, value, index)
            return value
        for rml_op, attrs in steps[:-1]:
            value = self.tmp(op, rml_op, [value], attrs)
        rml_op, attrs = steps[-1]
        return self.emit(op, rml_op, [value], attrs, index)

    def bind(self, op, value: str, index: int = 0) -> None:
        """Make output ``index`` of ``op`` read an existing rml value."""
        self.values[op.outputs[index]] = value

    def fail(self, op, reason: str) -> ExportError:
        """The error for ``op`` (raise it): names the op type, node and source line."""
        where = self.main.location(op.name)
        location = f"node {op.name!r}" + (f", {where}" if where else "")
        return ExportError("tf", op.type, reason, location)


def _uniform(array: np.ndarray) -> bool:
    return array.size > 0 and bool((array == array.reshape(-1)[0]).all())


def _has_tensor(graph, name: str) -> bool:
    try:
        graph.get_tensor_by_name(name)
        return True
    except (KeyError, ValueError):
        return False


def _alt_shape(graph, name: str):
    try:
        return graph.get_tensor_by_name(name).shape.as_list()
    except (KeyError, ValueError):
        return None
