"""The PyTorch route: small modules per op family, exported, run in rml and compared
with PyTorch's own output; naming, symbolic batch and error cases."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import rml_export  # noqa: E402
from rml_export import ExportError  # noqa: E402
from rml_runner import assert_outputs_close, run_exported, run_graph  # noqa: E402


class Fn(nn.Module):
    """``fn(x)`` or ``fn(x, y)`` as a module, with optional submodules/parameters."""

    def __init__(self, fn, **parts):
        super().__init__()
        self.fn = fn
        for name, part in parts.items():
            setattr(self, name, part)

    def forward(self, x, b=None):
        return self.fn(self, x) if b is None else self.fn(self, x, b)


def rand(*shape, seed=0, low=-2.0, high=2.0):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


def torch_outputs(model, inputs):
    with torch.no_grad():
        out = model(**{k: torch.from_numpy(v) for k, v in inputs.items()})
    if isinstance(out, dict):
        return {k: v.numpy() for k, v in out.items()}
    if isinstance(out, (tuple, list)):
        return {f"y{i}": v.numpy() for i, v in enumerate(out)}
    return {"y": out.numpy()}


def check(model, inputs, tmp_path, rtol=1e-4, atol=1e-4, **options):
    """Export ``model``, run it in rml, compare with PyTorch; returns the graph."""
    torch.manual_seed(0)
    model.eval()
    want = torch_outputs(model, inputs)
    graph = rml_export.export_torch(model, inputs, **options)
    got = run_exported(graph, inputs, tmp_path)
    assert_outputs_close(got, want, rtol=rtol, atol=atol)
    return graph


def ops(graph):
    return [n.op for n in graph.nodes]


# -- elementwise ----------------------------------------------------------------------

UNARY = {
    "relu": torch.relu, "sigmoid": torch.sigmoid, "tanh": torch.tanh, "exp": torch.exp,
    "log": lambda x: torch.log(x.abs() + 0.5), "sqrt": lambda x: torch.sqrt(x.abs()),
    "rsqrt": lambda x: torch.rsqrt(x.abs() + 0.5), "neg": torch.neg, "abs": torch.abs,
    "sin": torch.sin, "cos": torch.cos, "erf": torch.erf, "silu": F.silu, "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "softplus": F.softplus,
    "softplus_beta": lambda x: F.softplus(x, beta=2.0),
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2), "elu": lambda x: F.elu(x, 0.7),
    "hardtanh": F.hardtanh, "relu6": F.relu6, "clamp": lambda x: x.clamp(-0.5, 1.5),
    "clamp_min": lambda x: x.clamp(min=0.25), "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish, "mish": F.mish, "reciprocal": lambda x: 1.0 / (x.abs() + 1),
    "square": torch.square, "pow3": lambda x: x ** 3, "pow_half": lambda x: x.abs() ** 0.5,
    "exp2_base": lambda x: 2.0 ** x, "selu": F.selu, "logsigmoid": F.logsigmoid,
    "log1p": lambda x: torch.log1p(x.abs()), "expm1": torch.expm1, "sign": torch.sign,
    "softsign": F.softsign,
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, tmp_path):
    fn = UNARY[name]
    check(Fn(lambda m, x: fn(x)), {"x": rand(3, 7)}, tmp_path)


BINARY = {
    "add": lambda x, y: x + y, "add_alpha": lambda x, y: torch.add(x, y, alpha=2.5),
    "sub": lambda x, y: x - y, "rsub": lambda x, y: 1.5 - x, "mul": lambda x, y: x * y,
    "div": lambda x, y: x / (y.abs() + 1), "scalar_div": lambda x, y: x / 3.0,
    "pow": lambda x, y: (x.abs() + 0.1) ** y, "maximum": torch.maximum,
    "minimum": torch.minimum, "broadcast": lambda x, y: x * y[:1],
    "where": lambda x, y: torch.where(x > y, x, y * 2),
    "where_scalar": lambda x, y: torch.where(x >= 0.5, x, 0.0),
    "masked_fill": lambda x, y: x.masked_fill(y < 0, -3.0),
    "compare_cast": lambda x, y: ((x < y).float() + (x <= 0.1).float() + (x == x).float()
                                  + (x != y).float() + (x > 1).float()),
    "clamp_tensor": lambda x, y: torch.clamp(x, min=y - 1, max=y + 1),
    "logical": lambda x, y: (((x > 0) & (y < 1)) | ~(x > y)).float(),
    "logical_fn": lambda x, y: torch.logical_xor(x > 0, y > 0).float()
    + torch.logical_or(x > 1, y > 1).float(),
}


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name, tmp_path):
    fn = BINARY[name]
    check(Fn(lambda m, x, y: fn(x, y)), {"x": rand(4, 5), "b": rand(4, 5, seed=1)}, tmp_path)


def test_comparison_output_is_bool(tmp_path):
    graph = check(Fn(lambda m, x, y: x > y), {"x": rand(4, 5), "b": rand(4, 5, seed=1)},
                  tmp_path)
    assert graph.types["y"].dtype == "BOOL"


# -- linear algebra -------------------------------------------------------------------

MATMUL = {
    "linear_no_bias": (Fn(lambda m, x: m.fc(x), fc=nn.Linear(6, 4, bias=False)), [3, 6]),
    "linear_3d": (Fn(lambda m, x: m.fc(x), fc=nn.Linear(6, 4)), [2, 3, 6]),
    "matmul_param": (Fn(lambda m, x: x @ m.w, w=nn.Parameter(torch.randn(6, 5))), [2, 3, 6]),
    "matmul_vec": (Fn(lambda m, x: x @ m.v, v=nn.Parameter(torch.randn(6))), [3, 6]),
    "vec_matmul": (Fn(lambda m, x: m.v @ x, v=nn.Parameter(torch.randn(3))), [3, 6]),
    "bmm": (Fn(lambda m, x: torch.bmm(x, x.transpose(1, 2))), [2, 3, 6]),
    "addmm": (Fn(lambda m, x: torch.addmm(m.b, x, m.w, beta=0.5, alpha=2.0),
                 b=nn.Parameter(torch.randn(5)), w=nn.Parameter(torch.randn(6, 5))), [3, 6]),
    "baddbmm": (Fn(lambda m, x: torch.baddbmm(x[:, :, :3], x, x.transpose(1, 2))), [2, 3, 6]),
    "einsum": (Fn(lambda m, x: torch.einsum("bij,kj->bik", x, m.w),
                  w=nn.Parameter(torch.randn(4, 6))), [2, 3, 6]),
}


@pytest.mark.parametrize("name", sorted(MATMUL))
def test_matmul(name, tmp_path):
    model, shape = MATMUL[name]
    check(model, {"x": rand(*shape)}, tmp_path)


def test_linear_is_kept_and_named_by_fqn(tmp_path):
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    graph = check(model, {"input": rand(2, 8)}, tmp_path)
    assert ops(graph) == ["linear", "relu", "linear"]
    assert sorted(graph.constants) == ["0.bias", "0.weight", "2.bias", "2.weight"]


# -- convolution, pooling, upsampling -------------------------------------------------

CONV = {
    "conv2d": (nn.Conv2d(3, 4, 3, stride=2, padding=1), [2, 3, 9, 8]),
    "conv2d_dilated_groups": (nn.Conv2d(4, 6, 3, dilation=2, groups=2), [1, 4, 9, 9]),
    "conv2d_same": (nn.Conv2d(3, 4, (3, 4), padding="same"), [1, 3, 7, 8]),
    "conv2d_valid_no_bias": (nn.Conv2d(3, 4, 2, padding="valid", bias=False), [1, 3, 5, 5]),
    "conv1d": (nn.Conv1d(3, 5, 3, stride=2, padding=2), [2, 3, 11]),
    "conv_transpose2d": (nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1),
                         [2, 4, 5, 5]),
    "conv_transpose1d": (nn.ConvTranspose1d(4, 2, 4, stride=2, padding=1), [2, 4, 6]),
    "max_pool2d": (nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), [1, 2, 8, 7]),
    "avg_pool2d": (nn.AvgPool2d(2, padding=1, count_include_pad=False), [1, 2, 7, 7]),
    "max_pool1d": (nn.MaxPool1d(2), [1, 3, 9]),
    "avg_pool1d": (nn.AvgPool1d(3, stride=2), [1, 3, 9]),
    "adaptive_avg_1": (nn.AdaptiveAvgPool2d(1), [2, 3, 5, 6]),
    "adaptive_avg_2": (nn.AdaptiveAvgPool2d((2, 3)), [2, 3, 4, 6]),
    "adaptive_max_1": (nn.AdaptiveMaxPool2d(1), [2, 3, 5, 6]),
    "upsample_scale": (nn.Upsample(scale_factor=2), [1, 2, 3, 4]),
    "upsample_size": (nn.Upsample(size=(5, 7)), [1, 2, 3, 4]),
}


@pytest.mark.parametrize("name", sorted(CONV))
def test_conv_and_pool(name, tmp_path):
    module, shape = CONV[name]
    check(Fn(lambda m, x: m.mod(x), mod=module), {"x": rand(*shape)}, tmp_path)


def test_conv_keeps_high_level_op(tmp_path):
    graph = check(nn.Conv2d(3, 4, 3, padding=1), {"input": rand(1, 3, 6, 6)}, tmp_path)
    assert ops(graph) == ["conv2d"]
    assert graph.nodes[0].attrs == {"padding": [[1, 1], [1, 1]]}


# -- normalization, softmax, attention ------------------------------------------------

def _bn():
    bn = nn.BatchNorm2d(3)
    with torch.no_grad():
        bn.running_mean.copy_(torch.tensor([0.1, -0.2, 0.3]))
        bn.running_var.copy_(torch.tensor([0.5, 1.5, 2.0]))
        bn.weight.copy_(torch.tensor([1.0, 0.5, 2.0]))
    return bn


NORM = {
    "layer_norm": (nn.LayerNorm(6), [2, 3, 6], "layer_norm"),
    "layer_norm_2d": (nn.LayerNorm([3, 6], eps=1e-3), [2, 3, 6], "layer_norm"),
    "layer_norm_no_affine": (nn.LayerNorm(6, elementwise_affine=False), [2, 6], "layer_norm"),
    "rms_norm": (nn.RMSNorm(6, eps=1e-6), [2, 3, 6], "rms_norm"),
    "group_norm": (nn.GroupNorm(2, 4), [2, 4, 3, 3], "group_norm"),
    "batch_norm": (_bn(), [2, 3, 4, 4], "batch_norm"),
    "instance_norm": (nn.InstanceNorm2d(3, affine=True), [2, 3, 4, 4], "group_norm"),
    "softmax": (nn.Softmax(dim=1), [2, 5, 3], "softmax"),
    "log_softmax": (nn.LogSoftmax(dim=-1), [2, 5], "log_softmax"),
}


@pytest.mark.parametrize("name", sorted(NORM))
def test_norm_and_softmax(name, tmp_path):
    module, shape, op = NORM[name]
    graph = check(Fn(lambda m, x: m.mod(x), mod=module), {"x": rand(*shape)}, tmp_path)
    assert op in ops(graph)


ATTENTION = {
    "plain": lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v),
    "causal": lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    "scale": lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, scale=0.3),
    "bool_mask": lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m > 0),
    "float_mask": lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
    "gqa": lambda q, k, v, m: F.scaled_dot_product_attention(
        q, k[:, :2], v[:, :2], enable_gqa=True),
}


@pytest.mark.parametrize("name", sorted(ATTENTION))
def test_attention(name, tmp_path):
    fn = ATTENTION[name]

    def forward(m, x, mask):
        q, k, v = x.chunk(3, dim=-1)
        return fn(q, k, v, mask)

    graph = check(Fn(forward), {"x": rand(2, 4, 5, 24), "b": rand(5, 5, seed=3)}, tmp_path)
    assert "scaled_dot_product_attention" in ops(graph)


# -- reductions -----------------------------------------------------------------------

REDUCE = {
    "sum": lambda x: x.sum(dim=1), "sum_all": lambda x: x.sum(),
    "mean_keep": lambda x: x.mean(dim=(1, 2), keepdim=True), "amax": lambda x: x.amax(-1),
    "amin": lambda x: x.amin(0), "max_dim": lambda x: x.max(dim=1),
    "min_dim": lambda x: x.min(dim=-1, keepdim=True), "max_all": lambda x: x.max(),
    "argmax": lambda x: x.argmax(-1), "argmin_all": lambda x: x.argmin(),
    "var": lambda x: x.var(dim=1), "var_pop": lambda x: x.var(dim=-1, unbiased=False),
    "std": lambda x: x.std(dim=2, keepdim=True), "prod": lambda x: x.prod(dim=1),
    "cumsum": lambda x: x.cumsum(dim=1), "norm2": lambda x: torch.linalg.vector_norm(x, dim=-1),
    "norm1": lambda x: x.norm(p=1, dim=1), "logsumexp": lambda x: x.logsumexp(dim=-1),
    "topk": lambda x: x.topk(3), "topk_smallest": lambda x: x.topk(2, dim=1, largest=False),
    "topk_1": lambda x: x.topk(1, dim=0),
    "gather": lambda x: torch.gather(x, 2, torch.tensor([[[0, 3], [1, 1], [2, 0]]] * 2)),
    "gather_topk": lambda x: torch.gather(x, 1, x.topk(2, dim=1).indices),
    "topk_routing": lambda x: (x.topk(2).values.softmax(-1).unsqueeze(-1)
                               * torch.gather(x, -1, x.topk(2).indices).unsqueeze(-2)).sum(-1),
}


@pytest.mark.parametrize("name", sorted(REDUCE))
def test_reduce(name, tmp_path):
    fn = REDUCE[name]
    check(Fn(lambda m, x: fn(x)), {"x": rand(2, 3, 4, low=0.5, high=1.5)}, tmp_path)


# -- shapes, indexing, padding, creation ----------------------------------------------

LAYOUT = {
    "view": lambda m, x: x.view(2, -1), "flatten": lambda m, x: x.flatten(1),
    "squeeze": lambda m, x: x[:, :1].squeeze(1), "unsqueeze": lambda m, x: x.unsqueeze(-1),
    "permute": lambda m, x: x.permute(2, 0, 1), "transpose": lambda m, x: x.transpose(0, 2),
    "t": lambda m, x: x[0].t(), "expand": lambda m, x: x[:, :1].expand(2, 5, 4),
    "repeat": lambda m, x: x.repeat(2, 1, 3), "repeat_lead": lambda m, x: x[0].repeat(2, 1, 1),
    "cat": lambda m, x: torch.cat([x, x * 2], dim=1),
    "stack": lambda m, x: torch.stack([x, -x], dim=1),
    "split": lambda m, x: torch.split(x, [1, 2], dim=1),
    "chunk": lambda m, x: x.chunk(2, dim=-1), "unbind": lambda m, x: x.unbind(1),
    "slice_step": lambda m, x: x[:, ::2, 1:-1], "select": lambda m, x: x[:, -1],
    "narrow": lambda m, x: x.narrow(2, 1, 2), "index_tensor": lambda m, x: x[:, m.idx],
    "index_select": lambda m, x: x.index_select(2, m.idx),
    "embedding": lambda m, x: m.emb(m.idx) + x[0, :2, :],
    "pad_constant": lambda m, x: F.pad(x, (1, 2, 0, 1), value=0.5),
    "pad_reflect": lambda m, x: F.pad(x, (1, 2), mode="reflect"),
    "pad_replicate": lambda m, x: F.pad(x, (2, 1), mode="replicate"),
    "pad_circular": lambda m, x: F.pad(x, (1, 1), mode="circular"),
    "full_like": lambda m, x: x + torch.full_like(x, 2.0),
    "causal_mask": lambda m, x: x[0].masked_fill(
        torch.triu(torch.ones(3, 4, dtype=torch.bool), 1), 0.0),
    "arange": lambda m, x: x * torch.arange(4.0),
    "to_int_and_back": lambda m, x: (x * 3).to(torch.int64).to(torch.float32),
    "contiguous_clone": lambda m, x: x.transpose(0, 1).contiguous().clone(),
    "one_hot": lambda m, x: F.one_hot(x.argmax(-1), 5).float(),
    "flip": lambda m, x: x.flip(0, 2), "roll": lambda m, x: x.roll(1, -1),
}


@pytest.mark.parametrize("name", sorted(LAYOUT))
def test_layout(name, tmp_path):
    fn = LAYOUT[name]
    model = Fn(fn, emb=nn.Embedding(5, 4))
    model.register_buffer("idx", torch.tensor([1, 0]))
    check(model, {"x": rand(2, 3, 4)}, tmp_path)


def test_integer_input_gather(tmp_path):
    model = Fn(lambda m, x: m.emb(x).sum(1), emb=nn.Embedding(10, 6))
    graph = check(model, {"x": np.array([[1, 2, 9], [0, 0, 3]], np.int64)}, tmp_path)
    assert "gather" in ops(graph)
    assert graph.types["x"].dtype == "I64"


# -- whole torch.nn modules -----------------------------------------------------------

def _mod(module, fn=None):
    return Fn((lambda m, x: fn(m.mod, x)) if fn else (lambda m, x: m.mod(x)), mod=module)


MODULES = {
    "multihead_attention": (_mod(nn.MultiheadAttention(16, 2, batch_first=True),
                                 lambda m, x: m(x, x, x, need_weights=False)[0]), [2, 5, 16]),
    "attention_weights": (_mod(nn.MultiheadAttention(16, 2, batch_first=True),
                               lambda m, x: m(x, x, x)[1]), [2, 5, 16]),
    "encoder_layer_causal": (_mod(
        nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True, norm_first=True),
        lambda m, x: m(x, src_mask=nn.Transformer.generate_square_subsequent_mask(5),
                       is_causal=True)), [2, 5, 16]),
    "lstm": (_mod(nn.LSTM(8, 6, batch_first=True), lambda m, x: m(x)[0]), [2, 4, 8]),
    "gru": (_mod(nn.GRU(8, 6, batch_first=True), lambda m, x: m(x)[0]), [2, 4, 8]),
    "rnn_2_layers": (_mod(nn.RNN(8, 6, num_layers=2), lambda m, x: m(x)[1]), [4, 2, 8]),
    "pixel_shuffle": (_mod(nn.PixelShuffle(2)), [1, 8, 3, 3]),
    "resnet_stem": (_mod(nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))), [2, 3, 8, 8]),
    "prelu": (_mod(nn.PReLU(3)), [2, 3, 4]),
    "glu": (_mod(nn.GLU()), [2, 6]),
    "cosine_similarity": (_mod(nn.CosineSimilarity(), lambda m, x: m(x, x.flip(0))), [2, 6]),
    "normalize": (Fn(lambda m, x: F.normalize(x, dim=-1)), [2, 6]),
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module(name, tmp_path):
    model, shape = MODULES[name]
    check(model, {"x": rand(*shape)}, tmp_path)


# -- names, outputs, symbols ----------------------------------------------------------

class TwoOut(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind
        self.fc = nn.Linear(4, 3)
        self.register_buffer("shift", torch.tensor([1.0, 2.0, 3.0]))

    def forward(self, x):
        h = self.fc(x)
        if self.kind == "dict":
            return {"logits": h, "shifted": h + self.shift}
        return h, h + self.shift


@pytest.mark.parametrize("kind", ["dict", "tuple"])
def test_output_names(kind, tmp_path):
    graph = check(TwoOut(kind), {"x": rand(2, 4)}, tmp_path)
    assert graph.outputs == (["logits", "shifted"] if kind == "dict" else ["y0", "y1"])
    assert {"fc.weight", "fc.bias", "shift"} <= set(graph.constants)
    doc = json.loads((tmp_path / "graph.json").read_text())
    assert [o["shape"] for o in doc["outputs"]] == [[2, 3], [2, 3]]
    assert doc["metadata"]["framework"] == "torch"


class Attn(nn.Module):
    """A batch-dependent view and attention, to check symbolic batch shapes."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(8, 24)
        self.ln = nn.LayerNorm(8)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.ln(x)).view(b, s, 3, 2, 4).permute(2, 0, 3, 1, 4)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return o.transpose(1, 2).reshape(b, s, 8)


def test_symbolic_batch(tmp_path):
    model = Attn().eval()
    graph = rml_export.export_torch(model, {"x": rand(2, 5, 8)}, symbols={"x": {0: "N"}})
    assert graph.types["x"].shape == ["N", 5, 8]
    assert graph.types["y"].shape == ["N", 5, 8]
    for batch in (1, 3):
        x = rand(batch, 5, 8, seed=batch)
        got = run_exported(graph, {"x": x}, tmp_path / str(batch))
        assert_outputs_close(got, torch_outputs(model, {"x": x}))


def test_symbol_on_an_example_size_of_one_is_refused():
    with pytest.raises(ValueError, match="example size 1"):
        rml_export.export_torch(Attn(), {"x": rand(1, 5, 8)}, symbols={"x": {0: "N"}})


class TakesY(nn.Module):
    def forward(self, y):
        return y + 1


def test_output_named_like_an_input_is_refused():
    with pytest.raises(ValueError, match="output 'y' has the name of an input"):
        rml_export.export_torch(TakesY(), {"y": rand(2)})


MODULE = """
import torch


def build():
    return torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.Flatten(), torch.nn.Tanh())
"""


def test_command_line(tmp_path):
    """``python -m rml_export torch``: the written weights, loaded back into the model by
    their FQNs, give PyTorch the output rml computes from the written graph."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from safetensors.torch import load_file

    (tmp_path / "cli_model.py").write_text(MODULE)
    x = rand(2, 2, 5, 5)
    np.savez(tmp_path / "inputs.npz", input=x)
    package = str(Path(rml_export.__file__).resolve().parents[1])
    done = subprocess.run(
        [sys.executable, "-m", "rml_export", "torch", "cli_model:build", "--inputs",
         "inputs.npz", "--out", "out/graph.json"],
        cwd=tmp_path, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": package},
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "out" / "graph.json").read_text())
    assert [n["op"] for n in doc["nodes"]] == ["conv2d", "reshape", "tanh"]
    model = nn.Sequential(nn.Conv2d(2, 3, 3), nn.Flatten(), nn.Tanh())
    model.load_state_dict(load_file(tmp_path / "out" / "graph.safetensors"))
    got = run_graph(tmp_path / "out" / "graph.json", {"input": x}, tmp_path / "run")
    assert_outputs_close(got, torch_outputs(model, {"input": x}))


# -- errors ---------------------------------------------------------------------------

def test_unsupported_op_names_aten_op_and_line():
    model = Fn(lambda m, x: torch.sort(x, dim=-1).values)
    with pytest.raises(ExportError) as err:
        rml_export.export_torch(model, {"x": rand(2, 3)})
    assert err.value.framework == "torch"
    assert err.value.op == "aten.sort.default"
    assert err.value.location.startswith("test_torch.py:")
    assert "aten.sort.default" in str(err.value)


def test_fft_is_an_error_naming_the_op():
    model = Fn(lambda m, x: torch.fft.rfft(x).abs())
    with pytest.raises(ExportError, match=r"torch: cannot export op 'aten\._fft_r2c"):
        rml_export.export_torch(model, {"x": rand(2, 8)})


def test_data_dependent_index_is_an_error():
    model = Fn(lambda m, x, y: x[:, y[0] > 0])
    with pytest.raises(ExportError):
        rml_export.export_torch(model, {"x": rand(2, 3), "b": rand(2, 3)})


# -- the zoo with a symbolic batch ----------------------------------------------------

try:
    from zoo.models import MODELS as ZOO
except ImportError:  # the zoo lives beside rml-export in the repository
    ZOO = ()


@pytest.mark.parametrize("name", ZOO)
def test_zoo_model_with_symbolic_batch(name, tmp_path):
    """Every zoo model exports with batch "N" and matches PyTorch at another batch (the
    committed fixtures cover the fixed batch)."""
    from zoo import torch_models, weights

    model = torch_models.build(name, "tiny")
    example = weights.inputs(name, "tiny")
    symbols = {k: {0: "N"} for k, v in example.items() if v.ndim >= 1}
    graph = rml_export.export_torch(model, example, symbols=symbols)
    assert all(graph.types[k].shape[0] == "N" for k in symbols)
    inputs = weights.inputs(name, "tiny", batch=3)
    got = run_exported(graph, inputs, tmp_path)
    assert_outputs_close(got, torch_outputs(model, inputs))
