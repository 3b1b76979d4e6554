"""The zoo's models as pure functions over a weight dict and an array backend.

JAX (``jax_models``) and TensorFlow (``tf_models``) run these same bodies, each with its
own backend ``o`` (the primitives: ``o.linear``, ``o.conv2d``, ``o.layer_norm``, …, all
on NCHW images and PyTorch-layout linear weights; a backend keeps convolution kernels in
its own layout). ``p`` maps the weight names of ``weights.weights`` to the backend's
arrays. PyTorch's definitions (``torch_models``) are written separately with ``torch.nn``
and are what these are checked against. Each function takes the config ``c`` and the
model's inputs by name and returns one array or a dict of arrays.
"""

import math

from . import shared


def attention(o, p, prefix, x, heads, causal):
    """Multi-head self-attention: heads split as ``[B, S, H, D/H] -> [B, H, S, D/H]``,
    scale ``1/sqrt(D/H)``, causal by a ``j <= i`` mask."""
    b, s, d = o.shape(x)
    dh = d // heads

    def split(name):
        t = o.linear(x, p[f"{prefix}.{name}.weight"], p[f"{prefix}.{name}.bias"])
        return o.transpose(o.reshape(t, (b, s, heads, dh)), (0, 2, 1, 3))

    q, k, v = split("q"), split("k"), split("v")
    scores = o.matmul(q, o.transpose(k, (0, 1, 3, 2))) * (1.0 / math.sqrt(dh))
    if causal:
        scores = o.where(o.const(shared.causal_mask(s)), scores, -math.inf)
    a = o.matmul(o.softmax(scores, -1), v)
    a = o.reshape(o.transpose(a, (0, 2, 1, 3)), (b, s, d))
    return o.linear(a, p[f"{prefix}.o.weight"], p[f"{prefix}.o.bias"])


def _lin(o, p, prefix, x):
    return o.linear(x, p[f"{prefix}.weight"], p.get(f"{prefix}.bias"))


def _ln(o, p, prefix, x):
    return o.layer_norm(x, p[f"{prefix}.weight"], p[f"{prefix}.bias"])


def _mlp_block(o, p, prefix, x):
    return _lin(o, p, f"{prefix}.fc2", o.gelu(_lin(o, p, f"{prefix}.fc1", x)))


def block(o, p, prefix, c, x, causal=False, pre_norm=True):
    """A transformer block, pre-norm or post-norm (as ``torch_models.Block``)."""

    def attn(h):
        return attention(o, p, f"{prefix}.attn", h, c["heads"], causal)

    if pre_norm:
        x = x + attn(_ln(o, p, f"{prefix}.ln1", x))
        return x + _mlp_block(o, p, f"{prefix}.mlp", _ln(o, p, f"{prefix}.ln2", x))
    x = _ln(o, p, f"{prefix}.ln1", x + attn(x))
    return _ln(o, p, f"{prefix}.ln2", x + _mlp_block(o, p, f"{prefix}.mlp", x))


def _blocks(o, p, prefix, c, x, **kw):
    for i in range(c["layers"]):
        x = block(o, p, f"{prefix}.{i}", c, x, **kw)
    return x


def mlp(o, p, c, x):
    """Linear layers with ReLU between them."""
    n = len(c["dims"]) - 1
    for i in range(1, n + 1):
        x = _lin(o, p, f"fc{i}", x)
        if i < n:
            x = o.relu(x)
    return x


def cnn(o, p, c, x):
    """Conv, ReLU, max pool, conv, batch norm, ReLU, global average pool, linear."""
    x = o.max_pool2d(o.relu(o.conv2d(x, p["conv1.weight"], p["conv1.bias"], 1, 1)), 2)
    x = o.conv2d(x, p["conv2.weight"], p["conv2.bias"], 1, 1)
    x = o.relu(_batch_norm(o, p, "bn2", x))
    return _lin(o, p, "fc", o.mean(x, (2, 3)))


def _batch_norm(o, p, prefix, x):
    return o.batch_norm(x, p[f"{prefix}.running_mean"], p[f"{prefix}.running_var"],
                        p[f"{prefix}.weight"], p[f"{prefix}.bias"])


def transformer_block(o, p, c, x):
    """One pre-norm transformer block."""
    return block(o, p, "block", c, x)


def layernorm_gelu(o, p, c, x):
    """Layer norm, linear, GELU, linear."""
    return _lin(o, p, "fc2", o.gelu(_lin(o, p, "fc1", _ln(o, p, "ln", x))))


def _vision(o, p, prefix, c, image):
    x = o.conv2d(image, p[f"{prefix}patch.weight"], p[f"{prefix}patch.bias"], c["patch"], 0)
    b, d = o.shape(x)[:2]
    x = o.transpose(o.reshape(x, (b, d, -1)), (0, 2, 1))
    cls = o.broadcast_to(p[f"{prefix}cls"], (b, 1, d))
    x = o.concat([cls, x], 1) + p[f"{prefix}pos"]
    x = _blocks(o, p, f"{prefix}blocks", c, x)
    return _ln(o, p, f"{prefix}ln", x)[:, 0]


def vit(o, p, c, x):
    """The vision tower and a classification head on the class token."""
    return _lin(o, p, "head", _vision(o, p, "", c, x))


def _text(o, p, prefix, c, ids):
    s = o.shape(ids)[1]
    x = o.take(p[f"{prefix}tok_emb.weight"], ids) + p[f"{prefix}pos_emb"][:s]
    x = _blocks(o, p, f"{prefix}blocks", c, x, causal=True)
    return _ln(o, p, f"{prefix}ln", x)


def tiny_gpt(o, p, c, ids):
    """The causal text stack; LM head tied to the token embedding."""
    return o.linear(_text(o, p, "", c, ids), p["tok_emb.weight"])


def encoder(o, p, c, ids):
    """Embeddings, embedding norm, bidirectional post-norm blocks."""
    s = o.shape(ids)[1]
    x = _ln(o, p, "ln_emb", o.take(p["tok_emb.weight"], ids) + p["pos_emb"][:s])
    return _blocks(o, p, "blocks", c, x, pre_norm=False)


def _cell(o, p, x_t, h):
    g = o.linear(x_t, p["cell.weight_ih"], p["cell.bias_ih"]) + p["cell.bias_hh"]
    return g if h is None else g + o.linear(h, p["cell.weight_hh"])


def rnn(o, p, c, x):
    """An Elman tanh RNN unrolled over time; linear head on the last state."""
    h = None
    for t in range(o.shape(x)[1]):
        h = o.tanh(_cell(o, p, x[:, t], h))
    return _lin(o, p, "fc", h)


def lstm(o, p, c, x):
    """An LSTM (gates i, f, g, o) unrolled over time; linear head on the last h."""
    h = cell = None
    for t in range(o.shape(x)[1]):
        i, f, g, out = o.split(_cell(o, p, x[:, t], h), 4, -1)
        i, f, g, out = o.sigmoid(i), o.sigmoid(f), o.tanh(g), o.sigmoid(out)
        cell = i * g if cell is None else f * cell + i * g
        h = out * o.tanh(cell)
    return _lin(o, p, "fc", h)


def ssm(o, p, c, x):
    """A diagonal linear state-space layer scanned over time (``o.scan``)."""
    u = _lin(o, p, "in_proj", x)
    a = o.exp(-o.exp(p["a_log"]))

    def step(h, u_t):
        h = a * h + p["b"] * u_t[..., None]
        return h, o.sum(h * p["c"], -1) + p["d"] * u_t

    b, _, d = o.shape(u)
    ys = o.scan(step, o.zeros((b, d, c["state"])), u, 1)
    return _lin(o, p, "out_proj", ys)


def autoencoder(o, p, c, x):
    """ReLU encoder to a code, ReLU decoder with a sigmoid output."""
    n = len(c["dims"]) - 1

    def stack(side, h):
        for i in range(n):
            h = _lin(o, p, f"{side}.{i}", h)
            if i < n - 1:
                h = o.relu(h)
        return h

    code = stack("enc", x)
    return {"code": code, "recon": o.sigmoid(stack("dec", code))}


def vae(o, p, c, x, eps):
    """Encoder to mean and log-variance, reparameterized sample, decoder."""
    h = o.relu(_lin(o, p, "enc", x))
    mu, logvar = _lin(o, p, "mu", h), _lin(o, p, "logvar", h)
    z = mu + o.exp(0.5 * logvar) * eps
    recon = o.sigmoid(_lin(o, p, "dec2", o.relu(_lin(o, p, "dec1", z))))
    return {"recon": recon, "mu": mu, "logvar": logvar}


def gan_generator(o, p, c, z):
    """Linear to 4x4, transposed convolutions with batch norm and ReLU, tanh."""
    ch = c["channels"]
    n = len(ch) - 1
    x = o.reshape(_lin(o, p, "fc", z), (o.shape(z)[0], ch[0], 4, 4))
    x = o.relu(_batch_norm(o, p, "bn0", x))
    for i in range(n):
        x = o.conv_transpose2d(x, p[f"up{i}.weight"], p[f"up{i}.bias"], 2, 1)
        x = o.relu(_batch_norm(o, p, f"bn{i + 1}", x)) if i < n - 1 else o.tanh(x)
    return x


def _time_mlp(o, p, prefix, c, t):
    args = t[:, None] * o.const(shared.time_frequencies(c["temb"]))
    emb = o.concat([o.sin(args), o.cos(args)], -1)
    return _lin(o, p, f"{prefix}.fc2", o.silu(_lin(o, p, f"{prefix}.fc1", emb)))


def _alpha_bar(o, t, steps):
    f = o.cos((t / steps + shared.COSINE_S) / (1 + shared.COSINE_S) * (math.pi / 2))
    return f * f


def diffusion_mlp(o, p, c, x, t):
    """Noise prediction at step ``t`` and one DDIM step under the cosine schedule."""
    h = o.silu(_lin(o, p, "inp", x) + _time_mlp(o, p, "time", c, t))
    eps = _lin(o, p, "out", o.silu(_lin(o, p, "mid", h)))
    ab = _alpha_bar(o, t, c["steps"])[:, None]
    ab_prev = _alpha_bar(o, t - 1, c["steps"])[:, None]
    x0 = (x - o.sqrt(1 - ab) * eps) / o.sqrt(ab)
    return {"eps": eps, "x_prev": o.sqrt(ab_prev) * x0 + o.sqrt(1 - ab_prev) * eps}


def _conv(o, p, prefix, x, stride=1, pad=1):
    return o.conv2d(x, p[f"{prefix}.weight"], p[f"{prefix}.bias"], stride, pad)


def _res_block(o, p, prefix, c, x, temb):
    g = c["groups"]

    def gn(name, h):
        return o.group_norm(h, p[f"{prefix}.{name}.weight"], p[f"{prefix}.{name}.bias"], g)

    h = _conv(o, p, f"{prefix}.conv1", o.silu(gn("gn1", x)))
    h = h + _lin(o, p, f"{prefix}.temb", o.silu(temb))[:, :, None, None]
    h = _conv(o, p, f"{prefix}.conv2", o.silu(gn("gn2", h)))
    skip = x if f"{prefix}.skip.weight" not in p else _conv(o, p, f"{prefix}.skip", x, 1, 0)
    return h + skip


def unet(o, p, c, x, t):
    """A one-level diffusion U-Net with timestep-conditioned residual blocks."""
    temb = _time_mlp(o, p, "time", c, t)
    h1 = _res_block(o, p, "res1", c, _conv(o, p, "conv_in", x), temb)
    h2 = _res_block(o, p, "res2", c, _conv(o, p, "down", h1, 2), temb)
    u = _conv(o, p, "up", o.upsample2x(h2))
    h3 = _res_block(o, p, "res3", c, o.concat([u, h1], 1), temb)
    h = o.silu(o.group_norm(h3, p["gn_out.weight"], p["gn_out.bias"], c["groups"]))
    return _conv(o, p, "conv_out", h)


def gcn(o, p, c, x, adj):
    """Two graph convolutions over a dense normalized adjacency; log-softmax."""
    h = o.relu(o.matmul(adj, _lin(o, p, "gc1", x)))
    return o.log_softmax(o.matmul(adj, _lin(o, p, "gc2", h)), -1)


def _tower(o, p, side, ids, feat):
    h = o.concat([o.take(p[f"{side}_emb.weight"], ids), feat], -1)
    return _lin(o, p, f"{side}.fc2", o.relu(_lin(o, p, f"{side}.fc1", h)))


def two_tower(o, p, c, user_id, user_feat, item_id, item_feat):
    """User and item towers; the score is their dot product."""
    u = _tower(o, p, "user", user_id, user_feat)
    v = _tower(o, p, "item", item_id, item_feat)
    return o.sum(u * v, -1)


def _l2_normalize(o, x):
    return x / o.sqrt(o.sum(x * x, -1, keepdims=True))


def clip(o, p, c, image, ids):
    """Normalized image and text embeddings and their scaled similarity logits."""
    img = _l2_normalize(o, o.linear(_vision(o, p, "visual.", c, image), p["visual.proj.weight"]))
    txt = o.linear(_text(o, p, "text.", c, ids)[:, -1], p["text.proj.weight"])
    txt = _l2_normalize(o, txt)
    logits = o.exp(p["logit_scale"]) * o.matmul(img, o.transpose(txt, (1, 0)))
    return {"logits": logits, "image_embeds": img, "text_embeds": txt}


def moe(o, p, c, x):
    """Top-k routed experts computed densely (see ``torch_models.Moe``)."""
    logits = _lin(o, p, "router", x)
    kth = o.max(logits, -1, keepdims=True)
    for _ in range(c["top_k"] - 1):
        kth = o.max(o.where(logits >= kth, -math.inf, logits), -1, keepdims=True)
    gates = o.softmax(o.where(logits >= kth, logits, -math.inf), -1)
    outs = o.stack([_mlp_block(o, p, f"experts.{e}", x) for e in range(c["experts"])], -2)
    return o.sum(gates[..., None] * outs, -2)


MODEL_FUNCTIONS = {
    "mlp": mlp, "cnn": cnn, "transformer_block": transformer_block,
    "layernorm_gelu": layernorm_gelu, "vit": vit, "encoder": encoder, "tiny_gpt": tiny_gpt,
    "rnn": rnn, "lstm": lstm, "ssm": ssm, "autoencoder": autoencoder, "vae": vae,
    "gan_generator": gan_generator, "diffusion_mlp": diffusion_mlp, "unet": unet,
    "gcn": gcn, "two_tower": two_tower, "clip": clip, "moe": moe,
}
