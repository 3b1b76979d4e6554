"""The JAX route: trace ``fn(params, **inputs)`` to a jaxpr and lower it onto rml-graph.

``jax.make_jaxpr`` gives the program as equations over primitives. The walker
(:class:`Lowering`) inlines nested calls (``jit``/``pjit``, ``closed_call``,
``custom_jvp_call``, ``custom_vjp_call``, ``checkpoint``), unrolls ``scan`` and ``while``
loops whose trip count is known while tracing, evaluates with JAX itself every equation
whose inputs are all constants that do not come from ``params`` (iota, masks, loop
counters), and hands every other equation to its lowering in :mod:`rml_export.jax_ops`.
:mod:`rml_export.jax_patterns` then recovers high-level ops (softmax, layer_norm, gelu,
…) from the decomposed forms JAX writes, and the shared clean-up passes finish.

``params`` leaves become constants named by their key path joined with ``"."``
(``{"fc1": {"weight": w}}`` -> ``fc1.weight``). Integer values are ``I64`` in the graph
(JAX computes indices in ``int32``); that is exact for any index a graph can use.
"""

from __future__ import annotations

import math
import re

import numpy as np

from . import jax_ops, jax_patterns
from .errors import ExportError
from .ir import Graph, Node, ValueType, dtype_name
from .passes import clean_up

#: Constant-folding limit: a fold whose result has more elements than this (and more
#: than its largest input) is lowered as ops instead, so ``zeros((B, H))`` does not
#: become a large constant.
FOLD_LIMIT = 4096

#: Most iterations a ``while`` loop may unroll to.
MAX_UNROLL = 100_000

#: Call-like primitives whose body is inlined, with the parameter holding the body.
_CALLS = {
    "pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
    "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr",
    "custom_vjp_call_jaxpr": "fun_jaxpr", "checkpoint": "jaxpr", "remat": "jaxpr",
    "remat2": "jaxpr", "custom_lin": None,
}


def graph_dtype(dtype) -> str:
    """The rml-graph dtype of a JAX/NumPy dtype: every integer type is ``I64``."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return "I64"
    return dtype_name(dtype)


def widen(array: np.ndarray) -> np.ndarray:
    """``array`` as the graph stores it (integers as ``int64``)."""
    array = np.asarray(array)
    if array.dtype.kind in "iu" and array.dtype != np.int64:
        return array.astype(np.int64)
    return array


_MONOMIAL = re.compile(r"^(\d+\*)?[A-Za-z_]\w*(\*[A-Za-z_]\w*)*$")


def graph_dim(dim):
    """A traced dim as rml-graph writes it: an integer, a monomial such as ``"N"`` or
    ``"8*N"`` (a symbolic dim of ``symbols=``), else ``"?"`` (not declared)."""
    if isinstance(dim, (int, np.integer)):
        return int(dim)
    text = str(dim).replace(" ", "")
    return text if _MONOMIAL.match(text) else "?"


def graph_shape(shape) -> list:
    """:func:`graph_dim` of every dim."""
    return [graph_dim(d) for d in shape]


def is_fixed(shape) -> bool:
    """True when every dim of a traced shape is an integer."""
    return all(isinstance(d, (int, np.integer)) for d in shape)


def _key_name(entry) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(entry, attr):
            return str(getattr(entry, attr))
    return str(entry)


def _path_name(path) -> str:
    return ".".join(_key_name(e) for e in path)


def _user_frame(eqn) -> str | None:
    """The innermost frame of ``eqn``'s traceback outside JAX and rml_export."""
    import os

    import jax

    skip = (os.path.dirname(jax.__file__), os.path.dirname(__file__))
    traceback = getattr(eqn.source_info, "traceback", None)
    for frame in getattr(traceback, "frames", None) or []:
        if not frame.file_name.startswith(skip):
            return f"{frame.file_name}:{frame.line_num} ({frame.function_name})"
    return None


def location(eqns) -> str | None:
    """The user source line JAX recorded for the innermost of ``eqns`` that has one
    (``model.py:42 (fn)``): an op inside a library call reports the user's call."""
    for eqn in reversed(eqns):
        try:
            found = _user_frame(eqn)
        except Exception:  # noqa: BLE001 - JAX internals; a location is only a nicety
            found = None
        if found:
            return found
    return None


class Lowering:
    """Walks jaxpr equations, appending rml-graph nodes to :attr:`graph`.

    Every jaxpr variable maps to a graph value name. :attr:`known` holds the contents of
    the values that are constant and independent of ``params`` (they may be folded with
    JAX); :attr:`derived` maps a constant made from a parameter by a layout change
    (a transposed kernel) to that parameter's name, so it can take the name over when the
    original is no longer used.
    """

    def __init__(self, graph: Graph):
        self.graph = graph
        self.known: dict[str, np.ndarray] = {}
        self.derived: dict[str, str] = {}
        self.eqn = None
        self.calls: list = []
        self.dims: dict[str, list] = {}

    # -- values -------------------------------------------------------------------------

    def shape(self, value: str) -> list:
        """The traced shape of a graph value: integers, and JAX's symbolic dims where the
        export has ``symbols``."""
        if value in self.dims:
            return list(self.dims[value])
        return list(self.graph.types[value].shape)

    def define(self, value: str, dtype: str, shape) -> None:
        """Record a value's dtype and traced shape (the graph gets :func:`graph_shape`)."""
        self.dims[value] = list(shape)
        self.graph.types[value] = ValueType(dtype, graph_shape(shape))

    def shape_attr(self, src, dst, op: str) -> list:
        """The ``shape`` attribute of a ``reshape`` (``op``) or ``expand`` from traced
        shape ``src`` to ``dst``: integers and symbols as they are, another symbolic dim
        as ``0`` (reshape: same as the input's) or ``-1`` (expand: keep; reshape: the
        one inferred entry)."""
        attr, inferred = [], 0
        offset = len(dst) - len(src)
        for i, d in enumerate(dst):
            name = graph_dim(d)
            if isinstance(name, int) or (name != "?" and "*" not in name):
                attr.append(name)
                continue
            j = i if op == "reshape" else i - offset
            if op == "expand" and 0 <= j < len(src) and src[j] == d:
                attr.append(-1)
            elif op == "reshape" and j < len(src) and src[j] == d:
                attr.append(0)
            elif op == "reshape" and not inferred:
                attr.append(-1)
                inferred = 1
            else:
                raise self.error(f"cannot write the symbolic {op} target {graph_shape(dst)}")
        return attr

    def dtype(self, value: str) -> str:
        """The rml-graph dtype of a graph value."""
        return self.graph.types[value].dtype

    def constant(self, array, hint: str = "const") -> str:
        """A known constant (not from ``params``); ``array`` keeps JAX's dtype for folding."""
        array = np.asarray(array)
        name = self.graph.add_constant(widen(array), hint)
        self.known[name] = array
        return name

    def scalar(self, value, like: str) -> str:
        """A rank-0 constant of ``value`` with the dtype of graph value ``like``."""
        dtypes = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64,
                  "BOOL": np.bool_}
        return self.constant(np.asarray(value, dtypes.get(self.dtype(like), np.float32)))

    def emit(self, op: str, inputs: list[str], attrs: dict | None, shape, dtype: str,
             hint: str | None = None) -> str:
        """Append one single-output node whose output has ``shape`` and ``dtype``."""
        (out,) = self.graph.add_node(op, inputs, attrs, outputs=[hint or op])
        self.define(out, dtype, shape)
        return out

    def layout(self, op: str, x: str, attrs: dict, shape) -> str:
        """A layout op (transpose, reshape, …). On a known constant, and for a transpose
        of a parameter (a kernel in another layout), it is evaluated right away, remembering
        which parameter the result came from; other parameter reshapes stay nodes so the
        patterns can still see the bias they broadcast."""
        if x in self.known or (op == "transpose" and x in self.graph.constants):
            if op == "transpose":
                return self.derive(x, np.transpose(self.constant_value(x), attrs["perm"]))
            return self.derive(x, self.constant_value(x).reshape(shape))
        if op == "reshape":
            attrs = {"shape": self.shape_attr(self.shape(x), shape, "reshape")}
        return self.emit(op, [x], attrs, shape, self.dtype(x))

    def constant_value(self, x: str) -> np.ndarray:
        """A constant's contents (JAX's dtype for a known one)."""
        return self.known[x] if x in self.known else self.graph.constants[x]

    def derive(self, x: str, array: np.ndarray) -> str:
        """A new constant computed from constant ``x`` by a layout change: known when
        ``x`` is, else remembered as derived from ``x``'s parameter."""
        if x in self.known:
            return self.constant(array, "const")
        root = self.derived.get(x, x)
        name = self.graph.add_constant(np.ascontiguousarray(array), root)
        self.derived[name] = root
        return name

    def error(self, reason: str, op: str | None = None) -> ExportError:
        """An :class:`ExportError` for the equation being lowered."""
        eqn = self.eqn
        name = op or (eqn.primitive.name if eqn is not None else "?")
        where = location([*self.calls, eqn] if eqn is not None else self.calls)
        return ExportError("jax", name, reason, where)

    # -- walking ------------------------------------------------------------------------

    def read(self, env: dict, atom) -> str:
        """The graph value of a jaxpr atom (a literal becomes a known constant)."""
        from jax.extend.core import Literal

        if isinstance(atom, Literal):
            return self.constant(np.asarray(atom.val, dtype=atom.aval.dtype))
        return env[atom]

    def run(self, jaxpr, consts: list, args: list[str]) -> list[str]:
        """Lower an open jaxpr with ``consts`` (arrays or value names) and ``args``."""
        env: dict = {}
        for var, value in zip(jaxpr.constvars, consts):
            env[var] = value if isinstance(value, str) else self.constant(value, "jaxpr_const")
        for var, value in zip(jaxpr.invars, args):
            env[var] = value
        for eqn in jaxpr.eqns:
            ins = [self.read(env, a) for a in eqn.invars]
            outs = self.equation(eqn, ins)
            for var, value in zip(eqn.outvars, outs):
                env[var] = value
        return [self.read(env, a) for a in jaxpr.outvars]

    def run_closed(self, closed, args: list[str]) -> list[str]:
        """Lower a ``ClosedJaxpr`` (or an open one without consts) on ``args``."""
        if hasattr(closed, "jaxpr") and hasattr(closed, "consts"):
            return self.run(closed.jaxpr, list(closed.consts), args)
        return self.run(closed, [], args)

    def equation(self, eqn, ins: list[str]) -> list[str]:
        """Lower one equation: inline, unroll, fold or hand to :mod:`jax_ops`."""
        name = eqn.primitive.name
        self.eqn = eqn
        if name in _CALLS:
            body = eqn.params.get(_CALLS[name]) if _CALLS[name] else None
            if body is None:
                raise self.error("the call has no body to inline")
            if name == "custom_jvp_call" or name.startswith("custom_vjp"):
                ins = ins[: len(body.jaxpr.invars if hasattr(body, "jaxpr") else body.invars)]
            self.calls.append(eqn)
            try:
                return self.run_closed(body, ins)
            finally:
                self.calls.pop()
        if name in ("scan", "while", "cond"):
            self.calls.append(eqn)
            try:
                return getattr(self, f"_{name}")(eqn, ins)
            finally:
                self.calls.pop()
        folded = self.fold(eqn, ins)
        if folded is not None:
            return folded
        lower = jax_ops.LOWERINGS.get(name)
        if lower is None:
            raise self.error("rml-graph has no equivalent of this JAX primitive")
        self.eqn = eqn
        outs = lower(self, eqn, ins)
        return outs if isinstance(outs, list) else [outs]

    def fold(self, eqn, ins: list[str]) -> list[str] | None:
        """Evaluate ``eqn`` with JAX when every input is a known constant and the result is
        small; ``None`` when it must be lowered instead."""
        if not all(v in self.known for v in ins) or eqn.primitive.name in jax_ops.NO_FOLD:
            return None
        if not all(is_fixed(v.aval.shape) for v in eqn.outvars):
            return None
        sizes = [self.known[v].size for v in ins]
        out_size = sum(math.prod(v.aval.shape) for v in eqn.outvars)
        if out_size > max([FOLD_LIMIT, *sizes]):
            return None
        import jax

        with jax.ensure_compile_time_eval():
            result = eqn.primitive.bind(*[self.known[v] for v in ins], **eqn.params)
        results = result if eqn.primitive.multiple_results else [result]
        return [self.constant(np.asarray(r), eqn.primitive.name) for r in results]

    # -- control flow -------------------------------------------------------------------

    def _scan(self, eqn, ins: list[str]) -> list[str]:
        p = eqn.params
        length = p["length"]
        if "num_consts" in p:
            n_consts, n_carry = p["num_consts"], p["num_carry"]
        else:  # newer JAX: the flat-tree layout of (consts, carry, xs)
            consts_tree, carry_tree, _ = p["ft_in"].unpack()
            n_consts, n_carry = len(consts_tree), len(carry_tree)
        consts, carry = ins[:n_consts], ins[n_consts:n_consts + n_carry]
        xs = ins[n_consts + n_carry:]
        steps = range(length - 1, -1, -1) if p["reverse"] else range(length)
        ys_per_step: dict[int, list[str]] = {}
        for i in steps:
            x_i = [jax_ops.index_axis0(self, x, i) for x in xs]
            self.eqn = eqn
            outs = self.run_closed(p["jaxpr"], consts + carry + x_i)
            carry, ys_per_step[i] = outs[:n_carry], outs[n_carry:]
        self.eqn = eqn
        stacked = []
        for k, var in enumerate(eqn.outvars[n_carry:]):
            parts = [ys_per_step[i][k] for i in range(length)]
            stacked.append(jax_ops.stack(self, parts, list(var.aval.shape)))
        return carry + stacked

    def _while(self, eqn, ins: list[str]) -> list[str]:
        p = eqn.params
        cn, bn = p["cond_nconsts"], p["body_nconsts"]
        cond_consts, body_consts, carry = ins[:cn], ins[cn:cn + bn], ins[cn + bn:]
        for _ in range(MAX_UNROLL):
            (pred,) = self.run_closed(p["cond_jaxpr"], cond_consts + carry)
            self.eqn = eqn
            if pred not in self.known:
                raise self.error("the loop condition depends on the inputs: only loops with "
                                 "a trip count known while tracing can be unrolled")
            if not bool(self.known[pred]):
                return carry
            carry = self.run_closed(p["body_jaxpr"], body_consts + carry)
        raise self.error(f"the loop runs more than {MAX_UNROLL} iterations")

    def _cond(self, eqn, ins: list[str]) -> list[str]:
        index, operands = ins[0], ins[1:]
        if index not in self.known:
            raise self.error("the branch taken depends on the inputs (rml-graph has no "
                             "control flow)")
        branches = eqn.params["branches"]
        k = int(np.clip(int(self.known[index]), 0, len(branches) - 1))
        return self.run_closed(branches[k], operands)


def _rename_derived(lowering: Lowering) -> None:
    """A constant made from a parameter (a transposed or flipped kernel) takes the
    parameter's name when it is the only one left."""
    graph = lowering.graph
    by_root: dict[str, list[str]] = {}
    for name, root in lowering.derived.items():
        if name in graph.constants:
            by_root.setdefault(root, []).append(name)
    mapping = {}
    for root, names in by_root.items():
        if root not in graph.constants and len(names) == 1:
            mapping[names[0]] = root
    if not mapping:
        return
    graph.constants = {mapping.get(k, k): v for k, v in graph.constants.items()}
    for old, new in mapping.items():
        graph.types[new] = graph.types[old]
    graph.rename_uses(mapping)


def _symbolic_specs(inputs: dict, symbols: dict) -> dict:
    """``jax.ShapeDtypeStruct`` s for the inputs, with the dims ``symbols`` names
    (``{"x": {0: "N"}}``) symbolic; one JAX symbol per name across inputs."""
    import jax

    names = sorted({str(n) for dims in symbols.values() for n in dims.values()})
    for name in names:
        if not _MONOMIAL.match(name) or "*" in name or name[0].isdigit():
            raise ExportError("jax", "symbols", f"{name!r} is not a symbol name (letters, "
                              "digits and _, not starting with a digit)")
    scope = dict(zip(names, jax.export.symbolic_shape(", ".join(names))))
    specs = {}
    for key, value in inputs.items():
        dims = list(value.shape)
        for axis, name in symbols.get(key, {}).items():
            if not -len(dims) <= axis < len(dims):
                raise ExportError("jax", "symbols", f"input {key!r} has no axis {axis}")
            dims[axis] = scope[str(name)]
        dtype = value.dtype if value.dtype.kind not in "iu" else np.int32
        specs[key] = jax.ShapeDtypeStruct(tuple(dims), dtype)
    unknown = set(symbols) - set(inputs)
    if unknown:
        raise ExportError("jax", "symbols", f"no input named {sorted(unknown)}")
    return specs


def _tidy_names(graph: Graph) -> None:
    """Name every intermediate value after the op that writes it, in node order
    (``layer_norm``, ``layer_norm_1``, …): the patterns keep the names of the nodes
    they replace, which would otherwise read ``add_3`` for a layer norm."""
    fixed = set(graph.inputs) | set(graph.constants) | set(graph.outputs)
    mapping, counts = {}, {}
    for node in graph.nodes:
        for value in node.outputs:
            if value in fixed:
                continue
            k = counts.get(node.op, 0)
            name = node.op if k == 0 else f"{node.op}_{k}"
            while name in fixed:
                k += 1
                name = f"{node.op}_{k}"
            counts[node.op] = k + 1
            mapping[value] = name
    for node in graph.nodes:
        node.inputs = [mapping.get(v, v) for v in node.inputs]
        node.outputs = [mapping.get(v, v) for v in node.outputs]
    types = {k: graph.types[k] for k in fixed if k in graph.types}
    types.update({new: graph.types[old] for old, new in mapping.items() if old in graph.types})
    graph.types = types
    graph._taken.update(mapping.values())  # noqa: SLF001 - keep fresh_name() correct


def export(fn, params, example_inputs, *, symbols=None) -> Graph:
    """Export ``fn(params, **example_inputs)`` as an rml-graph.

    ``params`` is a pytree (nested dicts) of arrays; every leaf becomes a constant named
    by its key path joined with ``"."``. ``example_inputs`` maps input names to arrays
    that fix the traced shapes; ``symbols`` (``{"x": {0: "N"}}``) makes input dims
    symbolic, traced with JAX's shape polymorphism (``jax.export.symbolic_shape``).
    Outputs: one array -> ``"y"``; a dict -> its keys in insertion order; a tuple or
    list -> ``"y0"``, ``"y1"``, …
    """
    import jax

    inputs = {k: np.asarray(v) for k, v in example_inputs.items()}
    specs = _symbolic_specs(inputs, symbols) if symbols else inputs
    layout: dict = {}

    def traced(p, kw):
        out = fn(p, **kw)
        if isinstance(out, dict):
            layout["names"] = list(out.keys())
        return out

    try:
        closed, out_shape = jax.make_jaxpr(traced, return_shape=True)(params, specs)
    except jax.export.InconclusiveDimensionOperation as e:  # a symbolic dim met a branch
        raise ExportError("jax", "symbols", f"the model cannot be traced with symbolic "
                          f"dims {symbols}: {e}") from None
    param_leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    input_leaves = jax.tree_util.tree_flatten_with_path(inputs)[0]
    if len(param_leaves) + len(input_leaves) != len(closed.jaxpr.invars):
        raise ExportError("jax", "make_jaxpr", "the traced function's inputs do not match "
                          "the params and example inputs")

    graph = Graph(metadata={"producer": "rml-export 0.1", "framework": "jax"})
    lowering = Lowering(graph)
    args = []
    for path, leaf in param_leaves:
        args.append(graph.add_constant(np.asarray(leaf), _path_name(path)))
    param_names = list(args)  # constants are written parameters first, in pytree order
    for (path, _), var in zip(input_leaves, closed.jaxpr.invars[len(param_leaves):]):
        name = _key_name(path[0])
        graph.add_input(name, graph_dtype(var.aval.dtype), graph_shape(var.aval.shape))
        lowering.dims[name] = list(var.aval.shape)
        args.append(name)

    out_leaves = jax.tree_util.tree_flatten_with_path(out_shape)[0]
    if isinstance(out_shape, dict):
        names_by_key = {_key_name(p[0]): p for p, _ in out_leaves}
        order = [names_by_key[k] for k in layout.get("names", names_by_key)]
        position = {p: i for i, (p, _) in enumerate(out_leaves)}
        out_names = [(_key_name(p[0]), position[p]) for p in order]
    elif len(out_leaves) == 1 and not isinstance(out_shape, (tuple, list)):
        out_names = [("y", 0)]
    else:
        out_names = [(f"y{i}", i) for i in range(len(out_leaves))]
    for name, _ in out_names:
        if graph.fresh_name(name) != name:
            raise ExportError("jax", "outputs", f"output name {name!r} is already an input "
                              "or parameter name")

    values = lowering.run(closed.jaxpr, list(closed.consts), args)
    for name, index in out_names:
        aval = closed.jaxpr.outvars[index].aval
        vtype = ValueType(graph_dtype(aval.dtype), graph_shape(aval.shape))
        graph.nodes.append(Node("identity", [values[index]], [name]))
        graph.types[name] = vtype
        graph.outputs.append(name)
    jax_patterns.fuse(graph)
    clean_up(graph)
    _rename_derived(lowering)
    _tidy_names(graph)
    order = {name: i for i, name in enumerate(param_names)}
    graph.constants = dict(sorted(graph.constants.items(),
                                  key=lambda kv: order.get(kv[0], len(order))))
    return graph
