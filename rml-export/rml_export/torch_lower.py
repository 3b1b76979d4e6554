"""Walks a ``torch.export`` program's ATen graph and builds the rml-graph.

:class:`Lowerer` owns the bookkeeping the op table (:mod:`rml_export.torch_ops`) relies
on: values (:class:`V`: name, dtype, shape), constants, symbolic dims, scalar operands,
casts, and folding of nodes whose inputs are all constants.
"""

from __future__ import annotations

import operator
import os
import re
from dataclasses import dataclass

import numpy as np

from .errors import ExportError
from .ir import Graph, ValueType

#: torch dtype name -> rml-graph dtype.
_DTYPES = {
    "float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
    "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8", "bool": "BOOL",
}

#: ATen ops that only check or constrain shapes at run time; nothing to lower.
_ASSERTS = {
    "aten._assert_scalar.default", "aten._assert_tensor_metadata.default",
    "aten.sym_constrain_range_for_size.default", "aten._assert_async.msg",
    "aten.sym_constrain_range.default",
}

_FRAME = re.compile(r'File "([^"]+)", line (\d+)')

#: ATen op name (``"aten.relu.default"``) -> lowering ``fn(lowerer, fx_node, args) -> V``,
#: where ``args`` are the op's schema arguments by name. Filled by torch_math and
#: torch_layout (imported by :mod:`rml_export.torch_ops`).
LOWERINGS: dict = {}


def lowers(*names: str, fold: bool = False):
    """Register the decorated function as the lowering of the ATen ops ``names``.

    ``fold``: when every input is a constant, evaluate the op with PyTorch instead
    (creation ops such as ``arange`` and ``full`` that have no other lowering).
    """
    def register(fn):
        fn.fold = fold
        for name in names:
            LOWERINGS[name] = fn
        return fn
    return register


def dtype_of(dtype) -> str:
    """The rml-graph name of a torch dtype."""
    name = str(dtype).removeprefix("torch.")
    if name not in _DTYPES:
        raise ValueError(f"torch dtype {name} has no rml-graph equivalent")
    return _DTYPES[name]


def out_val(node):
    """The fx node's result as PyTorch traced it (a FakeTensor, or a list of them)."""
    return node.meta["val"]


def norm_axis(d: int, rank: int) -> int:
    """``d`` counted from the front (``-1`` of rank 3 is ``2``)."""
    return d % rank if rank else 0


@dataclass
class V:
    """A lowered tensor value: its rml-graph name, torch dtype and shape (ints/SymInts)."""

    name: str
    dtype: object
    shape: tuple

    @property
    def rank(self) -> int:
        """Number of axes."""
        return len(self.shape)


def location(node) -> str | None:
    """``file.py:LINE`` of the innermost frame of the model's own code (else the last)."""
    frames = _FRAME.findall(node.meta.get("stack_trace") or "")
    if not frames:
        return None
    user = [f for f in frames if f"{os.sep}torch{os.sep}" not in f[0]]
    path, line = (user or frames)[-1]
    return f"{os.path.basename(path)}:{line}"


class Lowerer:
    """Lowers one exported program; :meth:`run` returns the (not yet cleaned) Graph."""

    def __init__(self, program, input_names: list[str], symbols: dict):
        from .torch_ops import LOWERINGS

        self.program = program
        self.input_names = input_names
        self.symbols = symbols
        self.lowerings = LOWERINGS
        self.g = Graph()
        self.known: dict[str, object] = {}  # constant value name -> torch tensor
        self.symnames: dict[object, str] = {}  # sympy symbol -> user symbol name
        self.reserved: set[str] = set()
        self.node = None  # the fx node being lowered, for messages

    # -- errors -----------------------------------------------------------------------

    def fail(self, reason: str, node=None):
        """Raise ExportError naming the ATen op being lowered."""
        node = node or self.node
        if node is None:
            raise ExportError("torch", "placeholder", reason)
        original = node.meta.get("original_aten")
        if original is not None and str(original) != str(node.target):
            reason += f" (it comes from PyTorch's decomposition of {original})"
        raise ExportError("torch", str(node.target), reason, location(node))

    # -- values -----------------------------------------------------------------------

    def dim(self, d):
        """A torch size as a graph dim: int, a symbol name, a product ``"2*N"`` or ``"?"``."""
        if isinstance(d, int):
            return d
        expr = d.node.expr
        if expr.is_Integer:
            return int(expr)
        coeff, rest = expr.as_coeff_Mul()
        parts = [] if coeff == 1 else [str(coeff)]
        for factor in rest.as_ordered_factors():
            base, exp = factor.as_base_exp()
            if base not in self.symnames or not (exp.is_Integer and exp > 0):
                return "?"
            parts += [self.symnames[base]] * int(exp)
        return "*".join(parts) if coeff.is_Integer else "?"

    def vtype(self, dtype, shape) -> ValueType:
        """The graph ValueType of a torch dtype and shape."""
        return ValueType(dtype_of(dtype), [self.dim(d) for d in shape])

    def hint(self, hint: str) -> str:
        """A name hint that never asks for a graph output's reserved name."""
        return hint + "_" if hint in self.reserved else hint

    def emit(self, op, inputs, attrs=None, *, dtype=None, shape=None, hint=None) -> V:
        """Append one node with one output; dtype/shape default to the fx node's value."""
        val = self.node.meta.get("val") if self.node is not None else None
        dtype = dtype if dtype is not None else val.dtype
        shape = tuple(shape if shape is not None else val.shape)
        names = [v.name if isinstance(v, V) else (v or "") for v in inputs]
        out = self.hint(hint or (self.node.name if self.node is not None else op))
        (produced,) = self.g.add_node(op, names, attrs, name=self.module_name(),
                                      outputs=[out], types=[self.vtype(dtype, shape)])
        return V(produced, dtype, shape)

    def emit_multi(self, op, inputs, attrs, outs: list[tuple]) -> list[V]:
        """Append one node with several outputs, ``outs`` = [(dtype, shape)]."""
        names = [v.name for v in inputs]
        hints = [self.hint(f"{self.node.name}_{i}") for i in range(len(outs))]
        produced = self.g.add_node(op, names, attrs, name=self.module_name(), outputs=hints,
                                   types=[self.vtype(d, s) for d, s in outs])
        return [V(n, d, tuple(s)) for n, (d, s) in zip(produced, outs)]

    def module_name(self) -> str | None:
        """The FQN of the module the current node comes from (``layers.0.attn``)."""
        stack = (self.node.meta.get("nn_module_stack") or {}) if self.node is not None else {}
        if not stack:
            return None
        path = list(stack.values())[-1][0]
        return re.sub(r"^L\['self'\]\.?|^L__self___", "", path) or None

    def constant(self, array, hint: str) -> V:
        """Add a constant (a torch tensor or NumPy array); returns its value."""
        import torch

        tensor = array if isinstance(array, torch.Tensor) else torch.as_tensor(np.asarray(array))
        tensor = tensor.detach().cpu().contiguous()
        if tensor.dtype == torch.bfloat16:
            self.fail(f"constant {hint!r} is bfloat16; convert the model to float32 first")
        name = self.g.add_constant(tensor.numpy(), self.hint(hint))
        self.known[name] = tensor
        return V(name, tensor.dtype, tuple(tensor.shape))

    def scalar(self, value, dtype) -> V:
        """A rank-0 constant of ``dtype`` holding ``value``."""
        import torch

        return self.constant(torch.tensor(value, dtype=dtype), "scalar")

    def iota(self, size: int, axis: int, rank: int) -> V:
        """``0..size`` as an ``I64`` constant that broadcasts along ``axis`` of a rank-``rank``
        value (shape ``[size, 1, …]`` with ``rank - axis - 1`` trailing ones)."""
        import torch

        shape = (size,) + (1,) * (rank - axis - 1)
        return self.constant(torch.arange(size).reshape(shape), "iota")

    def as_tensor(self, x, dtype) -> V:
        """``x`` (a V or a Python scalar) as a value of ``dtype``, casting when needed."""
        if not isinstance(x, V):
            return self.scalar(x, dtype)
        return self.cast(x, dtype)

    def cast(self, x: V, dtype) -> V:
        """``x`` converted to ``dtype`` (itself when it already is)."""
        if x.dtype == dtype:
            return x
        return self.emit("cast", [x], {"to": dtype_of(dtype)}, dtype=dtype, shape=x.shape,
                         hint=f"{x.name}.cast")

    # -- walking ----------------------------------------------------------------------

    def run(self) -> Graph:
        """Lower every node; declare inputs, constants and outputs."""
        import torch

        program = self.program
        fx = program.graph_module.graph
        out_spec = program.call_spec.out_spec
        out_names = _output_names(out_spec)
        self.reserved = set(out_names)
        env: dict = {}
        specs = {s.arg.name: s for s in program.graph_signature.input_specs}
        user = [s.arg.name for s in program.graph_signature.input_specs
                if s.kind.name == "USER_INPUT"]
        if sorted(user) != sorted(self.input_names):
            raise ValueError(f"export_torch: the program's inputs {user} do not match the "
                             f"example inputs {self.input_names}")
        placeholders = {n.name: n for n in fx.nodes if n.op == "placeholder"}
        for name in self.input_names:
            node = placeholders[name]
            val = node.meta["val"]
            for axis, d in enumerate(val.shape):
                sym = (self.symbols.get(name) or {}).get(axis)
                if sym is not None and not isinstance(d, int):
                    self.symnames[d.node.expr] = sym if isinstance(sym, str) else sym.__name__
            self.g.add_input(name, dtype_of(val.dtype),
                             [self.dim(d) for d in val.shape])
            env[node] = V(name, val.dtype, tuple(val.shape))
        for node in fx.nodes:
            if node.op == "placeholder" and node.name not in self.input_names:
                env[node] = self._lifted(specs[node.name])
        live = _live_nodes(fx)
        for node in fx.nodes:
            self.node = node
            if node.op == "call_function":
                if node in live:
                    env[node] = self._call(node, env)
            elif node.op == "output":
                leaves = node.args[0]
                if len(leaves) != len(out_names):
                    raise ValueError("export_torch: output structure does not match its spec")
                for name, leaf in zip(out_names, leaves):
                    self._output(name, env.get(leaf) if isinstance(leaf, torch.fx.Node)
                                 else leaf)
            elif node.op != "placeholder":
                self.fail(f"fx node kind {node.op!r} is not supported")
        return self.g

    def _lifted(self, spec) -> V | None:
        """A parameter, buffer or lifted constant as a graph constant (its FQN)."""
        program = self.program
        kind = spec.kind.name
        if kind in ("PARAMETER", "BUFFER") and spec.target in program.state_dict:
            tensor = program.state_dict[spec.target]
        elif spec.target in program.constants:
            tensor = program.constants[spec.target]
        else:
            return None  # tokens and custom objects: nothing to hold
        return self.constant(tensor, spec.target)

    def _call(self, node, env):
        import torch

        target = node.target
        key = str(target)
        if target is operator.getitem:
            seq, index = node.args
            return env[seq][index]
        if key in _ASSERTS:
            return None
        val = node.meta.get("val")
        if not isinstance(val, (torch.Tensor, list, tuple)) or key.startswith("aten.sym_"):
            # Sizes and size arithmetic: keep the (symbolic) Python value.
            return val

        def resolve(a):
            if isinstance(a, torch.fx.Node):
                return env[a]
            if isinstance(a, (list, tuple)):
                return type(a)(resolve(x) for x in a)
            return a

        args = [resolve(a) for a in node.args]
        kwargs = {k: resolve(v) for k, v in node.kwargs.items()}
        lower = self.lowerings.get(key)
        if self._all_constant(args, kwargs) and (lower is None or _folds(lower, val)):
            return self._fold(node, args, kwargs)
        if lower is None:
            self.fail("rml-graph has no lowering for this op and PyTorch has no "
                      "decomposition of it into ops that have one")
        try:
            return lower(self, node, _bind(target, args, kwargs))
        except (ExportError, KeyboardInterrupt):
            raise
        except Exception as e:  # a case the lowering does not handle: name the op
            self.fail(f"lowering failed on these arguments ({type(e).__name__}: {e})")

    def _all_constant(self, args, kwargs) -> bool:
        values = [v for v in _flat(list(args) + list(kwargs.values())) if isinstance(v, V)]
        symbolic = [v for v in _flat(list(args) + list(kwargs.values()))
                    if type(v).__name__ in ("SymInt", "SymFloat")]
        return not symbolic and all(v.name in self.known for v in values)

    def _fold(self, node, args, kwargs):
        """Evaluate a node whose inputs are all constants with PyTorch itself."""
        def real(a):
            if isinstance(a, V):
                return self.known[a.name]
            if isinstance(a, (list, tuple)):
                return type(a)(real(x) for x in a)
            return a

        result = node.target(*[real(a) for a in args], **{k: real(v) for k, v in kwargs.items()})
        if isinstance(result, (list, tuple)):
            return [self.constant(r, f"{node.name}_{i}") for i, r in enumerate(result)]
        return self.constant(result, node.name)

    def _output(self, name: str, value):
        if not isinstance(value, V):
            raise ValueError(f"export_torch: output {name!r} is not a tensor")
        if name in self.g.inputs:
            raise ValueError(f"export_torch: output {name!r} has the name of an input; "
                             "rename the input")
        vtype = self.vtype(value.dtype, value.shape)
        (out,) = self.g.add_node("identity", [value.name], outputs=[name], types=[vtype])
        self.g.add_output(out, vtype.dtype, vtype.shape)


def _live_nodes(fx) -> set:
    """The nodes the outputs depend on; run-time shape checks (``_assert_async`` and
    what only feeds them) are not lowered."""
    live: set = set()
    stack = [n for n in fx.nodes if n.op == "output"]
    while stack:
        for dep in stack.pop().all_input_nodes:
            if dep not in live:
                live.add(dep)
                stack.append(dep)
    return live


def _folds(lower, val) -> bool:
    """Fold a constant-only node when its lowering asks for it, or its result is not
    floating point (integer arithmetic is not something rml runs)."""
    if getattr(lower, "fold", False):
        return True
    vals = val if isinstance(val, (list, tuple)) else [val]
    return any(getattr(v, "dtype", None) is not None and not v.dtype.is_floating_point
               for v in vals)


def _flat(items):
    for item in items:
        if isinstance(item, (list, tuple)):
            yield from _flat(item)
        else:
            yield item


def _bind(target, args, kwargs) -> dict:
    """The op's arguments by schema name, defaults filled in."""
    bound = {}
    for i, arg in enumerate(target._schema.arguments):
        if i < len(args):
            bound[arg.name] = args[i]
        elif arg.name in kwargs:
            bound[arg.name] = kwargs[arg.name]
        elif arg.has_default_value():
            bound[arg.name] = arg.default_value
        else:
            bound[arg.name] = None
    return bound


def _output_names(spec) -> list[str]:
    """``y``; a dict's keys; ``y0, y1, …`` for a tuple or list (see the export plan)."""
    if spec.is_leaf():
        return ["y"]
    kind = spec.type
    if isinstance(kind, type) and issubclass(kind, dict):
        names = [str(k) for k in spec.context]
    else:  # tuple, list, named tuple, torch.return_types
        names = [f"y{i}" for i in range(spec.num_children)]
    children = spec.children() if hasattr(spec, "children") else spec.children_specs
    if any(not child.is_leaf() for child in children):
        raise ValueError("export_torch: nested model outputs are not supported; return "
                         "one tensor, a tuple of tensors or a dict of tensors")
    return names
