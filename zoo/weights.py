"""Every zoo model's weights and example inputs, from seeded NumPy generators.

``weights(name, size)`` draws each parameter, in a fixed order, from
``np.random.default_rng(crc32(name))``; the names are the PyTorch state-dict names
(``fc1.weight``, ``blocks.0.attn.q.weight``) and the layouts PyTorch's (linear
``[out, in]``, conv ``[out, in, kh, kw]``, transposed conv ``[in, out, kh, kw]``). The
JAX and TensorFlow definitions read the same dict (TensorFlow stores convolution kernels
in its own layout, see ``tf_models``). Scales keep activations of order one, so the
three frameworks' outputs can be compared with tight tolerances.
"""

import zlib

import numpy as np

from .models import config


class _Draw:
    """Draws named parameters in call order from one generator."""

    def __init__(self, name: str):
        self.rng = np.random.default_rng(zlib.crc32(name.encode()))
        self.out = {}

    def normal(self, name, shape, std):
        self.out[name] = (self.rng.standard_normal(shape) * std).astype(np.float32)

    def linear(self, prefix, fan_in, fan_out, bias=True):
        self.normal(f"{prefix}.weight", (fan_out, fan_in), fan_in ** -0.5)
        if bias:
            self.normal(f"{prefix}.bias", (fan_out,), 0.1)

    def conv(self, prefix, c_in, c_out, k):
        self.normal(f"{prefix}.weight", (c_out, c_in, k, k), (c_in * k * k) ** -0.5)
        self.normal(f"{prefix}.bias", (c_out,), 0.1)

    def conv_transpose(self, prefix, c_in, c_out, k, stride):
        # each output pixel sees c_in * (k / stride)^2 taps
        fan_in = c_in * (k // stride) ** 2
        self.normal(f"{prefix}.weight", (c_in, c_out, k, k), fan_in ** -0.5)
        self.normal(f"{prefix}.bias", (c_out,), 0.1)

    def norm(self, prefix, c):
        self.out[f"{prefix}.weight"] = (1 + 0.1 * self.rng.standard_normal(c)).astype(np.float32)
        self.normal(f"{prefix}.bias", (c,), 0.1)

    def batch_norm(self, prefix, c):
        self.norm(prefix, c)
        self.normal(f"{prefix}.running_mean", (c,), 0.1)
        self.out[f"{prefix}.running_var"] = self.rng.uniform(0.5, 1.5, c).astype(np.float32)

    def block(self, prefix, dim, ff):
        """A transformer block (see ``torch_models.Block``)."""
        self.norm(f"{prefix}.ln1", dim)
        for proj in "qkvo":
            self.linear(f"{prefix}.attn.{proj}", dim, dim)
        self.norm(f"{prefix}.ln2", dim)
        self.linear(f"{prefix}.mlp.fc1", dim, ff)
        self.linear(f"{prefix}.mlp.fc2", ff, dim)

    def blocks(self, prefix, c):
        for i in range(c["layers"]):
            self.block(f"{prefix}.{i}", c["dim"], c["ff"])

    def vision(self, prefix, c):
        """Patch embedding, class token, positions, blocks, final norm."""
        self.conv(f"{prefix}patch", 3, c["dim"], c["patch"])
        self.normal(f"{prefix}cls", (1, 1, c["dim"]), 0.5)
        patches = (c["image"] // c["patch"]) ** 2
        self.normal(f"{prefix}pos", (patches + 1, c["dim"]), 0.5)
        self.blocks(f"{prefix}blocks", c)
        self.norm(f"{prefix}ln", c["dim"])

    def text(self, prefix, c):
        """Token and position embeddings, blocks, final norm."""
        self.normal(f"{prefix}tok_emb.weight", (c["vocab"], c["dim"]), 1.0)
        self.normal(f"{prefix}pos_emb", (c["seq"], c["dim"]), 0.5)
        self.blocks(f"{prefix}blocks", c)
        self.norm(f"{prefix}ln", c["dim"])

    def time_mlp(self, prefix, temb, out):
        self.linear(f"{prefix}.fc1", temb, out)
        self.linear(f"{prefix}.fc2", out, out)

    def res_block(self, prefix, c_in, c_out, temb):
        """A U-Net residual block with a timestep projection."""
        self.norm(f"{prefix}.gn1", c_in)
        self.conv(f"{prefix}.conv1", c_in, c_out, 3)
        self.linear(f"{prefix}.temb", temb, c_out)
        self.norm(f"{prefix}.gn2", c_out)
        self.conv(f"{prefix}.conv2", c_out, c_out, 3)
        if c_in != c_out:
            self.conv(f"{prefix}.skip", c_in, c_out, 1)


def _mlp(d, c):
    dims = c["dims"]
    for i in range(len(dims) - 1):
        d.linear(f"fc{i + 1}", dims[i], dims[i + 1])


def _cnn(d, c):
    c0, c1, c2 = c["channels"]
    d.conv("conv1", c0, c1, 3)
    d.conv("conv2", c1, c2, 3)
    d.batch_norm("bn2", c2)
    d.linear("fc", c2, c["classes"])


def _transformer_block(d, c):
    d.block("block", c["dim"], c["ff"])


def _layernorm_gelu(d, c):
    d.norm("ln", c["dim"])
    d.linear("fc1", c["dim"], c["ff"])
    d.linear("fc2", c["ff"], c["dim"])


def _vit(d, c):
    d.vision("", c)
    d.linear("head", c["dim"], c["classes"])


def _encoder(d, c):
    d.normal("tok_emb.weight", (c["vocab"], c["dim"]), 1.0)
    d.normal("pos_emb", (c["seq"], c["dim"]), 0.5)
    d.norm("ln_emb", c["dim"])
    d.blocks("blocks", c)


def _tiny_gpt(d, c):
    d.text("", c)


def _rnn(d, c, gates=1):
    h = c["hidden"]
    d.normal("cell.weight_ih", (gates * h, c["input"]), c["input"] ** -0.5)
    d.normal("cell.weight_hh", (gates * h, h), h ** -0.5)
    d.normal("cell.bias_ih", (gates * h,), 0.1)
    d.normal("cell.bias_hh", (gates * h,), 0.1)
    d.linear("fc", h, c["out"])


def _lstm(d, c):
    _rnn(d, c, gates=4)


def _ssm(d, c):
    dim, n = c["dim"], c["state"]
    d.linear("in_proj", dim, dim)
    # decay exp(-exp(a_log)) spread over (0.37, 0.99): slow and fast channels
    d.out["a_log"] = np.log(d.rng.uniform(0.01, 1.0, (dim, n))).astype(np.float32)
    d.normal("b", (dim, n), 0.5)
    d.normal("c", (dim, n), n ** -0.5)
    d.normal("d", (dim,), 0.5)
    d.linear("out_proj", dim, dim)


def _autoencoder(d, c):
    dims = c["dims"]
    for i in range(len(dims) - 1):
        d.linear(f"enc.{i}", dims[i], dims[i + 1])
    for i in range(len(dims) - 1):
        d.linear(f"dec.{i}", dims[-1 - i], dims[-2 - i])


def _vae(d, c):
    d.linear("enc", c["input"], c["hidden"])
    d.linear("mu", c["hidden"], c["latent"])
    d.linear("logvar", c["hidden"], c["latent"])
    d.linear("dec1", c["latent"], c["hidden"])
    d.linear("dec2", c["hidden"], c["input"])


def _gan_generator(d, c):
    ch = c["channels"]
    d.linear("fc", c["z"], ch[0] * 16)
    d.batch_norm("bn0", ch[0])
    for i in range(len(ch) - 1):
        d.conv_transpose(f"up{i}", ch[i], ch[i + 1], 4, 2)
        if i < len(ch) - 2:
            d.batch_norm(f"bn{i + 1}", ch[i + 1])


def _diffusion_mlp(d, c):
    d.time_mlp("time", c["temb"], c["hidden"])
    d.linear("inp", c["dim"], c["hidden"])
    d.linear("mid", c["hidden"], c["hidden"])
    d.linear("out", c["hidden"], c["dim"])


def _unet(d, c):
    b, t = c["base"], c["temb"]
    d.time_mlp("time", c["temb"], t)
    d.conv("conv_in", c["channels"], b, 3)
    d.res_block("res1", b, b, t)
    d.conv("down", b, 2 * b, 3)
    d.res_block("res2", 2 * b, 2 * b, t)
    d.conv("up", 2 * b, b, 3)
    d.res_block("res3", 2 * b, b, t)
    d.norm("gn_out", b)
    d.conv("conv_out", b, c["channels"], 3)


def _gcn(d, c):
    d.linear("gc1", c["features"], c["hidden"])
    d.linear("gc2", c["hidden"], c["classes"])


def _two_tower(d, c):
    for side, n in (("user", c["users"]), ("item", c["items"])):
        d.normal(f"{side}_emb.weight", (n, c["emb"]), 1.0)
        d.linear(f"{side}.fc1", c["emb"] + c["features"], c["hidden"])
        d.linear(f"{side}.fc2", c["hidden"], c["out"])


def _clip(d, c):
    d.vision("visual.", c)
    d.linear("visual.proj", c["dim"], c["embed"], bias=False)
    d.text("text.", c)
    d.linear("text.proj", c["dim"], c["embed"], bias=False)
    d.out["logit_scale"] = np.array(np.log(10.0), dtype=np.float32)


def _moe(d, c):
    d.linear("router", c["dim"], c["experts"])
    for e in range(c["experts"]):
        d.linear(f"experts.{e}.fc1", c["dim"], c["ff"])
        d.linear(f"experts.{e}.fc2", c["ff"], c["dim"])


_WEIGHTS = {
    "mlp": _mlp, "cnn": _cnn, "transformer_block": _transformer_block,
    "layernorm_gelu": _layernorm_gelu, "vit": _vit, "encoder": _encoder,
    "tiny_gpt": _tiny_gpt, "rnn": _rnn, "lstm": _lstm, "ssm": _ssm,
    "autoencoder": _autoencoder, "vae": _vae, "gan_generator": _gan_generator,
    "diffusion_mlp": _diffusion_mlp, "unet": _unet, "gcn": _gcn, "two_tower": _two_tower,
    "clip": _clip, "moe": _moe,
}


def weights(name: str, size: str) -> dict:
    """Model ``name``'s float32 weights at ``size``, keyed by PyTorch state-dict name."""
    c = config(name, size)
    d = _Draw(name)
    _WEIGHTS[name](d, c)
    return d.out


def _normalized_adjacency(rng, batch, nodes):
    """``D^-1/2 (A + I) D^-1/2`` of random undirected graphs (edge probability 0.3)."""
    a = rng.random((batch, nodes, nodes)) < 0.3
    a = np.triu(a, 1)
    a = (a | a.transpose(0, 2, 1)).astype(np.float64) + np.eye(nodes)
    inv_sqrt = a.sum(-1) ** -0.5
    return (a * inv_sqrt[:, :, None] * inv_sqrt[:, None, :]).astype(np.float32)


def inputs(name: str, size: str, batch: int | None = None) -> dict:
    """Model ``name``'s example inputs at ``size`` (default batch: the config's), keyed by
    the input names the models take; float32, token and row ids int64."""
    c = config(name, size)
    b = c["batch"] if batch is None else batch
    rng = np.random.default_rng(zlib.crc32(f"{name}:inputs".encode()))

    def normal(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    def ids(high, *shape):
        return rng.integers(0, high, shape, dtype=np.int64)

    def image():
        return normal(b, 3, c["image"], c["image"])

    def timesteps():
        # mid-schedule steps: the DDIM coefficients stay well conditioned
        return rng.uniform(50, 800, b).round().astype(np.float32)

    table = {
        "mlp": lambda: {"x": normal(b, c["dims"][0])},
        "cnn": lambda: {"x": image()},
        "transformer_block": lambda: {"x": normal(b, c["seq"], c["dim"])},
        "layernorm_gelu": lambda: {"x": normal(b, c["seq"], c["dim"])},
        "vit": lambda: {"x": image()},
        "encoder": lambda: {"ids": ids(c["vocab"], b, c["seq"])},
        "tiny_gpt": lambda: {"ids": ids(c["vocab"], b, c["seq"])},
        "rnn": lambda: {"x": normal(b, c["seq"], c["input"])},
        "lstm": lambda: {"x": normal(b, c["seq"], c["input"])},
        "ssm": lambda: {"x": normal(b, c["seq"], c["dim"])},
        "autoencoder": lambda: {"x": rng.random((b, c["dims"][0]), dtype=np.float32)},
        "vae": lambda: {"x": rng.random((b, c["input"]), dtype=np.float32),
                        "eps": normal(b, c["latent"])},
        "gan_generator": lambda: {"z": normal(b, c["z"])},
        "diffusion_mlp": lambda: {"x": normal(b, c["dim"]), "t": timesteps()},
        "unet": lambda: {"x": normal(b, c["channels"], c["image"], c["image"]),
                         "t": timesteps()},
        "gcn": lambda: {"x": normal(b, c["nodes"], c["features"]),
                        "adj": _normalized_adjacency(rng, b, c["nodes"])},
        "two_tower": lambda: {"user_id": ids(c["users"], b),
                              "user_feat": normal(b, c["features"]),
                              "item_id": ids(c["items"], b),
                              "item_feat": normal(b, c["features"])},
        "clip": lambda: {"image": image(), "ids": ids(c["vocab"], b, c["seq"])},
        "moe": lambda: {"x": normal(b, c["seq"], c["dim"])},
    }
    return table[name]()
