"""ATen lowerings: elementwise math, matmul, convolution, pooling, norms, reductions.

Each function gets the :class:`~rml_export.torch_lower.Lowerer` ``cx``, the fx node and
the op's arguments by schema name, and returns the lowered value(s). See the table in
docs/exporters.md (PyTorch section).
"""

from __future__ import annotations

import math

from .torch_lower import V, lowers, norm_axis, out_val


def _axes(dims, rank: int) -> list[int] | None:
    """Reduction axes; ``None`` (all axes) for an absent or empty list."""
    if dims is None:
        return None
    dims = [dims] if isinstance(dims, int) else list(dims)
    return [norm_axis(d, rank) for d in dims] or None


def _ntuple(value, n: int) -> list[int]:
    if isinstance(value, int):
        return [value] * n
    value = list(value)
    return value * n if len(value) == 1 else value


# -- elementwise ----------------------------------------------------------------------

_UNARY = {
    "relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "log": "log",
    "sqrt": "sqrt", "rsqrt": "rsqrt", "neg": "neg", "abs": "abs", "sin": "sin",
    "cos": "cos", "erf": "erf", "silu": "silu",
}


def _unary(op: str):
    def lower(cx, node, a):
        return cx.emit(op, [cx.cast(a["self"], out_val(node).dtype)])

    lower.__doc__ = f"``{op}``"
    return lower


for _aten, _op in _UNARY.items():
    lowers(f"aten.{_aten}.default")(_unary(_op))


@lowers("aten.gelu.default")
def gelu(cx, node, a):
    """``approximate="none"`` -> gelu, ``"tanh"`` -> gelu_tanh."""
    op = {"none": "gelu", "tanh": "gelu_tanh"}.get(a["approximate"])
    if op is None:
        cx.fail(f"approximate={a['approximate']!r}")
    return cx.emit(op, [a["self"]])


@lowers("aten.softplus.default")
def softplus(cx, node, a):
    """softplus(βx)/β; the threshold (linear above it) is within f32 rounding."""
    x, beta = a["self"], a["beta"]
    if beta == 1:
        return cx.emit("softplus", [x])
    bx = cx.emit("mul", [x, cx.scalar(beta, x.dtype)], hint=f"{node.name}.scaled")
    sp = cx.emit("softplus", [bx], hint=f"{node.name}.sp")
    return cx.emit("div", [sp, cx.scalar(beta, x.dtype)])


@lowers("aten.leaky_relu.default")
def leaky_relu(cx, node, a):
    """leaky_relu with ``alpha`` = negative_slope."""
    return cx.emit("leaky_relu", [a["self"]], {"alpha": float(a["negative_slope"])})


@lowers("aten.elu.default")
def elu(cx, node, a):
    """scale · elu(x) (selu's scale as a ``mul``; input_scale must be 1)."""
    x = a["self"]
    if a["input_scale"] != 1:
        cx.fail("elu with input_scale other than 1 is not supported")
    if a["scale"] == 1:
        return cx.emit("elu", [x], {"alpha": float(a["alpha"])})
    y = cx.emit("elu", [x], {"alpha": float(a["alpha"])}, hint=f"{node.name}.elu")
    return cx.emit("mul", [y, cx.scalar(a["scale"], x.dtype)])


@lowers("aten.log1p.default", "aten.expm1.default")
def log1p_expm1(cx, node, a):
    """log(x + 1) and exp(x) − 1."""
    x = cx.cast(a["self"], out_val(node).dtype)
    one = cx.scalar(1.0, x.dtype)
    if "log1p" in str(node.target):
        return cx.emit("log", [cx.emit("add", [x, one], hint=f"{node.name}.add")])
    return cx.emit("sub", [cx.emit("exp", [x], hint=f"{node.name}.exp"), one])


@lowers("aten.sign.default")
def sign(cx, node, a):
    """(x > 0) − (x < 0), in x's dtype."""
    import torch

    x = a["self"]
    zero = cx.scalar(0, x.dtype)
    parts = []
    for op in ("greater", "less"):
        c = cx.emit(op, [x, zero], dtype=torch.bool, hint=f"{node.name}.{op}")
        parts.append(cx.cast(c, x.dtype))
    return cx.emit("sub", parts)


@lowers("aten.hardtanh.default", "aten.clamp.default")
def clip(cx, node, a):
    """clip with the given scalar bounds."""
    lo = a.get("min_val", a.get("min"))
    hi = a.get("max_val", a.get("max"))
    attrs = {k: float(v) for k, v in (("min", lo), ("max", hi)) if v is not None}
    return cx.emit("clip", [cx.cast(a["self"], out_val(node).dtype)], attrs)


@lowers("aten.clamp.Tensor")
def clamp_tensor(cx, node, a):
    """maximum/minimum with tensor bounds."""
    x, dtype = a["self"], out_val(node).dtype
    if a["min"] is not None:
        x = cx.emit("maximum", [cx.as_tensor(x, dtype), cx.as_tensor(a["min"], dtype)],
                    hint=f"{node.name}.lo")
    if a["max"] is not None:
        x = cx.emit("minimum", [cx.as_tensor(x, dtype), cx.as_tensor(a["max"], dtype)])
    return x


@lowers("aten.hardsigmoid.default", "aten.hardswish.default")
def hard_sigmoid(cx, node, a):
    """clip(x/6 + 1/2, 0, 1), times x for hardswish."""
    x = a["self"]
    h = cx.emit("div", [x, cx.scalar(6.0, x.dtype)], hint=f"{node.name}.div")
    h = cx.emit("add", [h, cx.scalar(0.5, x.dtype)], hint=f"{node.name}.add")
    if "hardsigmoid" in str(node.target):
        return cx.emit("clip", [h], {"min": 0.0, "max": 1.0})
    h = cx.emit("clip", [h], {"min": 0.0, "max": 1.0}, hint=f"{node.name}.clip")
    return cx.emit("mul", [x, h])


@lowers("aten.mish.default")
def mish(cx, node, a):
    """x · tanh(softplus(x))."""
    x = a["self"]
    t = cx.emit("tanh", [cx.emit("softplus", [x], hint=f"{node.name}.sp")],
                hint=f"{node.name}.tanh")
    return cx.emit("mul", [x, t])


@lowers("aten.reciprocal.default")
def reciprocal(cx, node, a):
    """1 / x."""
    dtype = out_val(node).dtype
    return cx.emit("div", [cx.scalar(1.0, dtype), cx.cast(a["self"], dtype)])


def _binary(op: str, alpha: bool = False, swap: bool = False):
    """``op(self, other)`` in the output dtype; ``alpha`` scales ``other``; ``swap`` for
    rsub (``other - alpha·self``)."""

    def lower(cx, node, a):
        dtype = out_val(node).dtype
        other = a["exponent"] if "exponent" in a else a["other"]
        x, y = (other, a["self"]) if swap else (a["self"], other)
        x, y = cx.as_tensor(x, dtype), cx.as_tensor(y, dtype)
        if alpha and a.get("alpha", 1) != 1:
            y = cx.emit("mul", [y, cx.scalar(a["alpha"], dtype)], shape=y.shape,
                        hint=f"{node.name}.alpha")
        return cx.emit(op, [x, y])

    lower.__doc__ = f"``{op}``"
    return lower


for _aten, _op in (("add", "add"), ("sub", "sub"), ("rsub", "sub")):
    for _kind in ("Tensor", "Scalar"):
        lowers(f"aten.{_aten}.{_kind}")(_binary(_op, alpha=True, swap=_aten == "rsub"))
for _aten, _op in (("mul", "mul"), ("div", "div")):
    for _kind in ("Tensor", "Scalar"):
        lowers(f"aten.{_aten}.{_kind}")(_binary(_op))
for _aten in ("maximum", "minimum"):
    lowers(f"aten.{_aten}.default")(_binary(_aten))
lowers("aten.pow.Tensor_Tensor")(_binary("pow"))


@lowers("aten.div.Tensor_mode", "aten.div.Scalar_mode")
def div_mode(cx, node, a):
    """True division only (``rounding_mode=None``)."""
    if a["rounding_mode"] is not None:
        cx.fail(f"division with rounding_mode={a['rounding_mode']!r} is not supported")
    return _binary("div")(cx, node, a)


@lowers("aten.pow.Tensor_Scalar")
def pow_scalar(cx, node, a):
    """x², √x, 1/√x as mul/sqrt/rsqrt; other exponents as pow."""
    dtype = out_val(node).dtype
    x, e = cx.cast(a["self"], dtype), a["exponent"]
    if e == 1:
        return x
    special = {2: ("mul", [x, x]), 0.5: ("sqrt", [x]), -0.5: ("rsqrt", [x])}
    if e in special:
        op, inputs = special[e]
        return cx.emit(op, inputs)
    return cx.emit("pow", [x, cx.scalar(e, dtype)])


@lowers("aten.pow.Scalar")
def pow_scalar_base(cx, node, a):
    """base ** x with a scalar base."""
    dtype = out_val(node).dtype
    return cx.emit("pow", [cx.scalar(a["self"], dtype), cx.cast(a["exponent"], dtype)])


def promoted(x, y):
    """The dtype PyTorch compares ``x`` and ``y`` in (tensors or Python scalars)."""
    import torch

    if isinstance(x, V) and isinstance(y, V):
        return torch.promote_types(x.dtype, y.dtype)
    t, s = (x, y) if isinstance(x, V) else (y, x)
    if isinstance(s, float) and not t.dtype.is_floating_point:
        return torch.get_default_dtype()
    return t.dtype


def _compare(op: str):
    def lower(cx, node, a):
        dtype = promoted(a["self"], a["other"])
        return cx.emit(op, [cx.as_tensor(a["self"], dtype), cx.as_tensor(a["other"], dtype)])

    lower.__doc__ = f"``{op}``"
    return lower


for _aten, _op in (("eq", "equal"), ("ne", "not_equal"), ("lt", "less"),
                   ("le", "less_equal"), ("gt", "greater"), ("ge", "greater_equal")):
    for _kind in ("Tensor", "Scalar"):
        lowers(f"aten.{_aten}.{_kind}")(_compare(_op))


@lowers("aten.where.self", "aten.where.ScalarSelf", "aten.where.ScalarOther",
        "aten.where.Scalar")
def where(cx, node, a):
    """where(cond, a, b) in the output dtype."""
    import torch

    dtype = out_val(node).dtype
    cond = cx.cast(a["condition"], torch.bool)
    return cx.emit("where", [cond, cx.as_tensor(a["self"], dtype),
                             cx.as_tensor(a["other"], dtype)])


@lowers("aten.logical_not.default", "aten.logical_and.default", "aten.logical_or.default",
        "aten.logical_xor.default", "aten.bitwise_not.default", "aten.bitwise_and.Tensor",
        "aten.bitwise_or.Tensor", "aten.bitwise_xor.Tensor")
def logical(cx, node, a):
    """Boolean not/and/or/xor as ``where`` with constant true/false."""
    import torch

    target = str(node.target)
    operands = [a["self"]] + ([a["other"]] if "other" in a else [])
    if "bitwise" in target and any(v.dtype != torch.bool for v in operands):
        cx.fail("bitwise ops on integers are not supported (only on booleans)")
    x, *rest = [cx.cast(v, torch.bool) for v in operands]
    true, false = cx.scalar(True, torch.bool), cx.scalar(False, torch.bool)
    if "not" in target:
        return cx.emit("where", [x, false, true])
    if "xor" in target:
        return cx.emit("not_equal", [x, rest[0]])
    if "and" in target:
        return cx.emit("where", [x, rest[0], false])
    return cx.emit("where", [x, true, rest[0]])


@lowers("aten.masked_fill.Scalar", "aten.masked_fill.Tensor")
def masked_fill(cx, node, a):
    """where(mask, value, x)."""
    import torch

    dtype = out_val(node).dtype
    mask = cx.cast(a["mask"], torch.bool)
    return cx.emit("where", [mask, cx.as_tensor(a["value"], dtype), cx.cast(a["self"], dtype)])


# -- linear algebra -------------------------------------------------------------------

@lowers("aten.linear.default")
def linear(cx, node, a):
    """linear(x, weight, bias?) for a 2-D weight; matmul otherwise."""
    x, w, b = a["input"], a["weight"], a["bias"]
    if w.rank != 2:
        cx.fail("linear with a weight that is not 2-D")
    return cx.emit("linear", [x, w] + ([b] if b is not None else []))


@lowers("aten.matmul.default", "aten.mm.default", "aten.bmm.default")
def matmul(cx, node, a):
    """matmul; 1-D operands get a size-1 axis added and removed as torch.matmul does."""
    x = a["self"]
    w = a.get("other", a.get("mat2"))
    out = tuple(out_val(node).shape)
    if x.rank == 1 and w.rank == 1:
        prod = cx.emit("mul", [x, w], shape=x.shape, hint=f"{node.name}.mul")
        return cx.emit("reduce_sum", [prod])
    squeeze = []
    if x.rank == 1:
        x = cx.emit("unsqueeze", [x], {"axes": [0]}, shape=(1,) + x.shape,
                    hint=f"{node.name}.a")
        squeeze.append(len(out) - 1 if w.rank > 1 else 0)
    if w.rank == 1:
        w = cx.emit("unsqueeze", [w], {"axes": [1]}, shape=w.shape + (1,),
                    hint=f"{node.name}.b")
        squeeze.append(len(out) + len(squeeze))
    if not squeeze:
        return cx.emit("matmul", [x, w])
    full = list(out)
    for axis in sorted(squeeze):
        full.insert(axis, 1)
    y = cx.emit("matmul", [x, w], shape=tuple(full), hint=f"{node.name}.mm")
    return cx.emit("squeeze", [y], {"axes": sorted(squeeze)})


@lowers("aten.addmm.default", "aten.baddbmm.default")
def addmm(cx, node, a):
    """beta·self + alpha·(mat1 @ mat2) as matmul + add."""
    m1 = a.get("mat1", a.get("batch1"))
    m2 = a.get("mat2", a.get("batch2"))
    out = out_val(node)
    prod = cx.emit("matmul", [m1, m2], hint=f"{node.name}.mm")
    if a["alpha"] != 1:
        prod = cx.emit("mul", [prod, cx.scalar(a["alpha"], out.dtype)], hint=f"{node.name}.a")
    bias = a["self"]
    if a["beta"] == 0:
        return prod
    if a["beta"] != 1:
        bias = cx.emit("mul", [bias, cx.scalar(a["beta"], out.dtype)], shape=bias.shape,
                       hint=f"{node.name}.b")
    return cx.emit("add", [prod, bias])


# -- convolution and pooling ----------------------------------------------------------

def _pads(cx, padding, weight: V, dilation: list[int], n: int) -> list[list[int]]:
    if isinstance(padding, str):
        if padding == "valid":
            return [[0, 0]] * n
        if padding != "same":
            cx.fail(f"padding={padding!r}")
        pads = []
        for i in range(n):
            total = dilation[i] * (int(weight.shape[2 + i]) - 1)
            pads.append([total // 2, total - total // 2])
        return pads
    return [[p, p] for p in _ntuple(padding, n)]


def _window_attrs(n: int, **fields) -> dict:
    """Pair/pads attributes for 2-D; plain ints and ``[before, after]`` for 1-D."""
    attrs = {}
    for key, value in fields.items():
        if key == "padding":
            attrs[key] = value if n == 2 else value[0]
        elif isinstance(value, list):
            attrs[key] = value if n == 2 else value[0]
        else:
            attrs[key] = value
    return attrs


@lowers("aten.conv1d.default", "aten.conv2d.default", "aten.conv1d.padding",
        "aten.conv2d.padding", "aten.convolution.default", "aten.conv_transpose1d.input",
        "aten.conv_transpose2d.input")
def conv(cx, node, a):
    """conv1d/conv2d and their transposed forms."""
    x, w, b = a["input"], a["weight"], a["bias"]
    n = w.rank - 2
    if n not in (1, 2) or x.rank != n + 2:
        cx.fail(f"{n}-D convolution over a rank-{x.rank} input; rml-graph has batched "
                "1-D and 2-D convolutions")
    transposed = a.get("transposed", "transpose" in str(node.target))
    stride = _ntuple(a["stride"], n)
    dilation = _ntuple(a["dilation"], n)
    attrs = {
        "stride": stride,
        "padding": _pads(cx, a["padding"], w, dilation, n),
        "dilation": dilation,
    }
    attrs = _window_attrs(n, **attrs)
    attrs["groups"] = int(a["groups"])
    if transposed:
        attrs["output_padding"] = _window_attrs(n, o=_ntuple(a["output_padding"], n))["o"]
    op = ("conv_transpose" if transposed else "conv") + f"{n}d"
    return cx.emit(op, [x, w] + ([b] if b is not None else []), attrs)


@lowers("aten.max_pool1d.default", "aten.max_pool2d.default",
        "aten.max_pool2d_with_indices.default", "aten.avg_pool1d.default",
        "aten.avg_pool2d.default")
def pool(cx, node, a):
    """max/avg pooling (indices of max_pool2d_with_indices are not lowered)."""
    x = a["self"]
    n = x.rank - 2
    kernel = _ntuple(a["kernel_size"], n)
    stride = _ntuple(a["stride"], n) if a["stride"] else kernel
    attrs = _window_attrs(n, kernel=kernel, stride=stride,
                          padding=[[p, p] for p in _ntuple(a["padding"], n)],
                          dilation=_ntuple(a.get("dilation", 1), n))
    attrs["ceil_mode"] = bool(a["ceil_mode"])
    kind = "max" if "max_pool" in str(node.target) else "avg"
    if kind == "avg":
        del attrs["dilation"]
        attrs["count_include_pad"] = bool(a["count_include_pad"])
        if a.get("divisor_override") is not None:
            cx.fail("avg_pool with divisor_override is not supported")
    val = out_val(node)
    val = val[0] if isinstance(val, (list, tuple)) else val
    y = cx.emit(f"{kind}_pool{n}d", [x], attrs, dtype=val.dtype, shape=val.shape)
    return [y, None] if "with_indices" in str(node.target) else y


@lowers("aten.adaptive_avg_pool2d.default", "aten._adaptive_avg_pool2d.default",
        "aten.adaptive_max_pool2d.default")
def adaptive_pool(cx, node, a):
    """Output 1×1: global pooling; an exact divisor of the input: a plain pool."""
    x = a["self"]
    kind = "max" if "max" in str(node.target) else "avg"
    size = _ntuple(a["output_size"], 2)
    val = out_val(node)
    val = val[0] if isinstance(val, (list, tuple)) else val
    if size == [1, 1]:
        y = cx.emit(f"global_{kind}_pool2d", [x], dtype=val.dtype, shape=val.shape)
    else:
        hw = x.shape[2:]
        if not all(isinstance(d, int) and d % s == 0 for d, s in zip(hw, size)):
            cx.fail(f"adaptive pooling of {list(hw)} to {size}: only 1x1 or exact divisors")
        kernel = [d // s for d, s in zip(hw, size)]
        attrs = {"kernel": kernel, "stride": kernel}
        y = cx.emit(f"{kind}_pool2d", [x], attrs, dtype=val.dtype, shape=val.shape)
    return [y, None] if kind == "max" else y


@lowers("aten.upsample_nearest2d.vec", "aten.upsample_nearest2d.default")
def upsample_nearest(cx, node, a):
    """upsample_nearest2d by an integer scale, else to the output size."""
    x = a["input"] if "input" in a else a["self"]
    scales = a.get("scale_factors") or [a.get("scales_h"), a.get("scales_w")]
    if all(s is not None and float(s).is_integer() for s in scales):
        return cx.emit("upsample_nearest2d", [x], {"scale": [int(s) for s in scales]})
    size = [d for d in out_val(node).shape[2:]]
    if not all(isinstance(d, int) for d in size):
        cx.fail("upsampling a symbolic size by a non-integer scale")
    return cx.emit("upsample_nearest2d", [x], {"size": size})


# -- normalization and attention ------------------------------------------------------

def _first(node):
    val = out_val(node)
    return val[0] if isinstance(val, (list, tuple)) else val


def _optional(*values):
    """Optional trailing inputs: drop absent ones at the end, ``""`` for gaps."""
    values = list(values)
    while values and values[-1] is None:
        values.pop()
    return [v if v is not None else "" for v in values]


@lowers("aten.layer_norm.default", "aten.native_layer_norm.default")
def layer_norm(cx, node, a):
    """layer_norm over the normalized_shape axes."""
    x = a["input"]
    val = _first(node)
    y = cx.emit("layer_norm", [x] + _optional(a["weight"], a["bias"]),
                {"axis": -len(a["normalized_shape"]), "epsilon": float(a["eps"])},
                dtype=val.dtype, shape=val.shape)
    return [y, None, None] if "native" in str(node.target) else y


@lowers("aten.rms_norm.default")
def rms_norm(cx, node, a):
    """rms_norm over the last axis (eps None: the dtype's machine epsilon, as torch)."""
    import torch

    x = a["input"]
    if len(a["normalized_shape"]) != 1:
        cx.fail("rms_norm over more than the last axis")
    eps = a["eps"] if a["eps"] is not None else torch.finfo(x.dtype).eps
    return cx.emit("rms_norm", [x] + _optional(a["weight"]), {"epsilon": float(eps)})


@lowers("aten.group_norm.default", "aten.native_group_norm.default")
def group_norm(cx, node, a):
    """group_norm with num_groups."""
    x = a["input"]
    groups = a.get("num_groups", a.get("group"))
    eps = a.get("eps", 1e-5)
    y = cx.emit("group_norm", [x] + _optional(a["weight"], a["bias"]),
                {"num_groups": int(groups), "epsilon": float(eps)},
                dtype=x.dtype, shape=x.shape)
    return [y, None, None] if "native" in str(node.target) else y


@lowers("aten.instance_norm.default")
def instance_norm(cx, node, a):
    """Instance norm (input statistics) = group_norm with one group per channel."""
    x = a["input"]
    if not a["use_input_stats"]:
        return batch_norm(cx, node, a)
    return cx.emit("group_norm", [x] + _optional(a["weight"], a["bias"]),
                   {"num_groups": int(x.shape[1]), "epsilon": float(a["eps"])})


@lowers("aten._native_batch_norm_legit_no_training.default", "aten.batch_norm.default")
def batch_norm(cx, node, a):
    """Inference batch_norm with the running statistics."""
    if a.get("training"):
        cx.fail("training-mode batch norm; call model.eval() before exporting")
    x = a["input"]
    y = cx.emit("batch_norm", [x, a["running_mean"], a["running_var"]]
                + _optional(a["weight"], a["bias"]), {"epsilon": float(a["eps"])},
                dtype=x.dtype, shape=x.shape)
    return [y, None, None] if "native" in str(node.target) else y


@lowers("aten.softmax.int", "aten._softmax.default", "aten.log_softmax.int",
        "aten._log_softmax.default")
def softmax(cx, node, a):
    """softmax/log_softmax over ``dim`` (in the requested dtype)."""
    op = "log_softmax" if "log_softmax" in str(node.target) else "softmax"
    x = cx.cast(a["self"], out_val(node).dtype)
    return cx.emit(op, [x], {"axis": int(a["dim"])})


@lowers("aten.scaled_dot_product_attention.default")
def attention(cx, node, a):
    """scaled_dot_product_attention; grouped-query k/v are repeated to the query heads."""
    q, k, v, mask = a["query"], a["key"], a["value"], a["attn_mask"]
    if a["dropout_p"]:
        cx.fail("attention dropout; export in eval mode with dropout_p=0")
    if a.get("enable_gqa") and q.rank >= 3 and k.shape[-3] != q.shape[-3]:
        k, v = (_repeat_heads(cx, node, t, q.shape[-3]) for t in (k, v))
    inputs = [q, k, v]
    if mask is not None:
        import torch

        inputs.append(mask if mask.dtype == torch.bool else cx.cast(mask, q.dtype))
    attrs = {"causal": bool(a["is_causal"])}
    if a["scale"] is not None:
        attrs["scale"] = float(a["scale"])
    return cx.emit("scaled_dot_product_attention", inputs, attrs)


def _repeat_heads(cx, node, t: V, heads) -> V:
    """[..., Hk, S, D] -> [..., Hq, S, D], each kv head repeated Hq/Hk times."""
    from .torch_layout import shape_entries

    rep = int(heads) // int(t.shape[-3])
    lead = t.shape[:-2]
    s = cx.emit("unsqueeze", [t], {"axes": [t.rank - 2]},
                shape=lead + (1,) + t.shape[-2:], hint=f"{node.name}.kv")
    e_shape = lead + (rep,) + t.shape[-2:]
    e = cx.emit("expand", [s], {"shape": shape_entries(cx, e_shape)}, shape=e_shape,
                hint=f"{node.name}.kv")
    r_shape = t.shape[:-3] + (heads,) + t.shape[-2:]
    return cx.emit("reshape", [e], {"shape": shape_entries(cx, r_shape)}, shape=r_shape,
                   hint=f"{node.name}.kv")


# -- reductions -----------------------------------------------------------------------

def _reduce(op: str):
    def lower(cx, node, a):
        val = _first(node)
        x = cx.cast(a["self"], val.dtype)
        attrs = {"keepdims": bool(a.get("keepdim", False))}
        axes = _axes(a.get("dim"), x.rank)
        if axes is not None:
            attrs["axes"] = axes
        return cx.emit(op, [x], attrs, dtype=val.dtype, shape=val.shape)

    lower.__doc__ = f"``{op}``"
    return lower


for _names, _op in (
    (("aten.sum.dim_IntList", "aten.sum.default"), "reduce_sum"),
    (("aten.mean.dim", "aten.mean.default"), "reduce_mean"),
    (("aten.amax.default", "aten.max.default"), "reduce_max"),
    (("aten.amin.default", "aten.min.default"), "reduce_min"),
    (("aten.prod.dim_int", "aten.prod.default"), "reduce_prod"),
):
    lowers(*_names)(_reduce(_op))


@lowers("aten.max.dim", "aten.min.dim")
def max_dim(cx, node, a):
    """(values, indices): reduce_max/min and argmax/argmin over one axis."""
    kind = "max" if "max" in str(node.target) else "min"
    x, keep = a["self"], bool(a["keepdim"])
    values, indices = out_val(node)
    attrs = {"axes": [norm_axis(a["dim"], x.rank)], "keepdims": keep}
    v = cx.emit(f"reduce_{kind}", [x], attrs, dtype=values.dtype, shape=values.shape,
                hint=f"{node.name}_values")
    i = cx.emit(f"arg{kind}", [x], {"axis": a["dim"], "keepdims": keep},
                dtype=indices.dtype, shape=indices.shape, hint=f"{node.name}_indices")
    return [v, i]


@lowers("aten.topk.default")
def topk(cx, node, a):
    """k rounds of reduce_max + argmax (min for ``largest=False``), each round masking
    the position it found with ∓inf; values and indices concatenated along ``dim``.
    Ties are taken in index order."""
    import torch

    x, k = a["self"], int(a["k"])
    axis = norm_axis(a["dim"], x.rank)
    size = x.shape[axis]
    if not isinstance(size, int):
        cx.fail("topk over a symbolic axis")
    kind, fill = ("max", -math.inf) if a["largest"] else ("min", math.inf)
    values, indices = out_val(node)
    part = x.shape[:axis] + (1,) + x.shape[axis + 1:]
    iota = cx.iota(size, axis, x.rank) if k > 1 else None
    vals, idxs, cur = [], [], x
    for i in range(k):
        vals.append(cx.emit(f"reduce_{kind}", [cur], {"axes": [axis], "keepdims": True},
                            shape=part, dtype=x.dtype, hint=f"{node.name}.v{i}"))
        idxs.append(cx.emit(f"arg{kind}", [cur], {"axis": axis, "keepdims": True},
                            shape=part, dtype=torch.int64, hint=f"{node.name}.i{i}"))
        if i + 1 < k:
            hit = cx.emit("equal", [iota, idxs[-1]], dtype=torch.bool, shape=x.shape,
                          hint=f"{node.name}.hit{i}")
            cur = cx.emit("where", [hit, cx.scalar(fill, x.dtype), cur], shape=x.shape,
                          dtype=x.dtype, hint=f"{node.name}.rest{i}")
    if k == 1:
        return [vals[0], idxs[0]]
    return [cx.emit("concat", vals, {"axis": axis}, dtype=values.dtype, shape=values.shape,
                    hint=f"{node.name}_values"),
            cx.emit("concat", idxs, {"axis": axis}, dtype=indices.dtype, shape=indices.shape,
                    hint=f"{node.name}_indices")]


@lowers("aten.argmax.default", "aten.argmin.default")
def argmax(cx, node, a):
    """argmax/argmin over one axis (all axes: over the flattened tensor)."""
    op = "argmax" if "argmax" in str(node.target) else "argmin"
    x = a["self"]
    if a["dim"] is None:
        if a["keepdim"]:
            cx.fail(f"{op} over all axes with keepdim")
        x = cx.emit("reshape", [x], {"shape": [-1]}, dtype=x.dtype,
                    shape=(math.prod(x.shape),), hint=f"{node.name}.flat")
        return cx.emit(op, [x], {"axis": 0})
    return cx.emit(op, [x], {"axis": int(a["dim"]), "keepdims": bool(a["keepdim"])})


@lowers("aten.var.correction", "aten.std.correction")
def variance(cx, node, a):
    """variance (std: its square root) with torch's correction (default 1)."""
    x = a["self"]
    correction = a["correction"]
    attrs = {"keepdims": bool(a["keepdim"]),
             "correction": int(1 if correction is None else correction)}
    axes = _axes(a["dim"], x.rank)
    if axes is not None:
        attrs["axes"] = axes
    if "std" not in str(node.target):
        return cx.emit("variance", [x], attrs)
    return cx.emit("sqrt", [cx.emit("variance", [x], attrs, hint=f"{node.name}.var")])


@lowers("aten.cumsum.default")
def cumsum(cx, node, a):
    """cumsum along ``dim``."""
    x = cx.cast(a["self"], out_val(node).dtype)
    return cx.emit("cumsum", [x], {"axis": int(a["dim"])})


@lowers("aten.linalg_vector_norm.default")
def vector_norm(cx, node, a):
    """2-norm sqrt(Σx²), 1-norm Σ|x|, ∞-norm max|x|."""
    x, ord_ = a["self"], a["ord"]
    attrs = {"keepdims": bool(a["keepdim"])}
    axes = _axes(a["dim"], x.rank)
    if axes is not None:
        attrs["axes"] = axes
    if ord_ == 2:
        sq = cx.emit("mul", [x, x], shape=x.shape, hint=f"{node.name}.sq")
        return cx.emit("sqrt", [cx.emit("reduce_sum", [sq], attrs, hint=f"{node.name}.sum")])
    ab = cx.emit("abs", [x], shape=x.shape, hint=f"{node.name}.abs")
    if ord_ == 1:
        return cx.emit("reduce_sum", [ab], attrs)
    if ord_ == math.inf:
        return cx.emit("reduce_max", [ab], attrs)
    return cx.fail(f"vector norm of order {ord_}")
