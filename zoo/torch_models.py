"""The zoo's models as ``torch.nn`` modules, loaded from ``weights.weights``.

``build(name, size)`` returns an ``nn.Module`` in eval mode called as
``model(**weights.inputs(name, size))``; it returns one tensor or a dict of tensors.
Shared semantics (the JAX and TensorFlow definitions match them): exact (erf) GELU,
norm epsilon ``models.EPS``, attention heads split as ``[B, S, H, D/H] -> [B, H, S, D/H]``
with scale ``1/sqrt(D/H)``, nearest upsampling, eval-mode batch norm.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from . import shared
from .models import EPS, config
from .weights import weights


class Attention(nn.Module):
    """Multi-head self-attention with separate q, k, v, o projections."""

    def __init__(self, dim, heads, causal):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim) for _ in range(4))
        self.heads, self.causal = heads, causal

    def forward(self, x):
        b, s, d = x.shape

        def split(t):
            return t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)

        a = F.scaled_dot_product_attention(
            split(self.q(x)), split(self.k(x)), split(self.v(x)), is_causal=self.causal)
        return self.o(a.transpose(1, 2).reshape(b, s, d))


class Mlp(nn.Module):
    """Linear, GELU, linear."""

    def __init__(self, dim, ff):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, ff), nn.Linear(ff, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    """A transformer block: pre-norm (``x + f(ln(x))``) or post-norm (``ln(x + f(x))``)."""

    def __init__(self, c, causal=False, pre_norm=True):
        super().__init__()
        dim = c["dim"]
        self.ln1, self.ln2 = nn.LayerNorm(dim, eps=EPS), nn.LayerNorm(dim, eps=EPS)
        self.attn = Attention(dim, c["heads"], causal)
        self.mlp = Mlp(dim, c["ff"])
        self.pre_norm = pre_norm

    def forward(self, x):
        if self.pre_norm:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.mlp(x))


def _blocks(c, **kw):
    return nn.ModuleList(Block(c, **kw) for _ in range(c["layers"]))


class Mlp3(nn.Module):
    """``mlp``: linear layers with ReLU between them."""

    def __init__(self, c):
        super().__init__()
        dims = c["dims"]
        for i in range(len(dims) - 1):
            setattr(self, f"fc{i + 1}", nn.Linear(dims[i], dims[i + 1]))
        self.n = len(dims) - 1

    def forward(self, x):
        for i in range(1, self.n + 1):
            x = getattr(self, f"fc{i}")(x)
            if i < self.n:
                x = F.relu(x)
        return x


class Cnn(nn.Module):
    """``cnn``: conv, ReLU, max pool, conv, batch norm, ReLU, global average pool, linear."""

    def __init__(self, c):
        super().__init__()
        c0, c1, c2 = c["channels"]
        self.conv1 = nn.Conv2d(c0, c1, 3, padding=1)
        self.conv2 = nn.Conv2d(c1, c2, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(c2, eps=EPS)
        self.fc = nn.Linear(c2, c["classes"])

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.relu(self.bn2(self.conv2(x)))
        return self.fc(x.mean((2, 3)))


class TransformerBlock(nn.Module):
    """``transformer_block``: one pre-norm block."""

    def __init__(self, c):
        super().__init__()
        self.block = Block(c)

    def forward(self, x):
        return self.block(x)


class LayernormGelu(nn.Module):
    """``layernorm_gelu``: layer norm, linear, GELU, linear."""

    def __init__(self, c):
        super().__init__()
        self.ln = nn.LayerNorm(c["dim"], eps=EPS)
        self.fc1, self.fc2 = nn.Linear(c["dim"], c["ff"]), nn.Linear(c["ff"], c["dim"])

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(self.ln(x))))


class Vision(nn.Module):
    """Patch embedding, class token, positions, pre-norm blocks, final norm; returns
    the class token's features."""

    def __init__(self, c):
        super().__init__()
        d = c["dim"]
        self.patch = nn.Conv2d(3, d, c["patch"], stride=c["patch"])
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.zeros((c["image"] // c["patch"]) ** 2 + 1, d))
        self.blocks = _blocks(c)
        self.ln = nn.LayerNorm(d, eps=EPS)

    def forward(self, image):
        x = self.patch(image).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.ln(x)[:, 0]


class Vit(Vision):
    """``vit``: the vision tower and a classification head."""

    def __init__(self, c):
        super().__init__(c)
        self.head = nn.Linear(c["dim"], c["classes"])

    def forward(self, x):
        return self.head(super().forward(x))


class Text(nn.Module):
    """Token and position embeddings, causal pre-norm blocks, final norm."""

    def __init__(self, c):
        super().__init__()
        self.tok_emb = nn.Embedding(c["vocab"], c["dim"])
        self.pos_emb = nn.Parameter(torch.zeros(c["seq"], c["dim"]))
        self.blocks = _blocks(c, causal=True)
        self.ln = nn.LayerNorm(c["dim"], eps=EPS)

    def forward(self, ids):
        x = self.tok_emb(ids) + self.pos_emb[: ids.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.ln(x)


class TinyGpt(Text):
    """``tiny_gpt``: the causal text stack with the LM head tied to the token embedding."""

    def forward(self, ids):
        return F.linear(super().forward(ids), self.tok_emb.weight)


class Encoder(nn.Module):
    """``encoder``: embeddings, embedding norm, bidirectional post-norm blocks."""

    def __init__(self, c):
        super().__init__()
        self.tok_emb = nn.Embedding(c["vocab"], c["dim"])
        self.pos_emb = nn.Parameter(torch.zeros(c["seq"], c["dim"]))
        self.ln_emb = nn.LayerNorm(c["dim"], eps=EPS)
        self.blocks = _blocks(c, pre_norm=False)

    def forward(self, ids):
        x = self.ln_emb(self.tok_emb(ids) + self.pos_emb[: ids.shape[1]])
        for block in self.blocks:
            x = block(x)
        return x


class Cell(nn.Module):
    """Recurrent cell weights in PyTorch's ``nn.RNN``/``nn.LSTM`` layout."""

    def __init__(self, c, gates):
        super().__init__()
        h, i = c["hidden"], c["input"]
        self.weight_ih = nn.Parameter(torch.zeros(gates * h, i))
        self.weight_hh = nn.Parameter(torch.zeros(gates * h, h))
        self.bias_ih = nn.Parameter(torch.zeros(gates * h))
        self.bias_hh = nn.Parameter(torch.zeros(gates * h))

    def pre(self, x_t, h):
        """``W_ih x_t + b_ih + W_hh h + b_hh``; ``h = None`` is the zero state."""
        g = F.linear(x_t, self.weight_ih, self.bias_ih) + self.bias_hh
        return g if h is None else g + F.linear(h, self.weight_hh)


class Rnn(nn.Module):
    """``rnn``: an Elman tanh RNN unrolled over time, then a linear head on the last state."""

    def __init__(self, c):
        super().__init__()
        self.cell, self.fc = Cell(c, 1), nn.Linear(c["hidden"], c["out"])

    def forward(self, x):
        h = None
        for t in range(x.shape[1]):
            h = torch.tanh(self.cell.pre(x[:, t], h))
        return self.fc(h)


class Lstm(nn.Module):
    """``lstm``: an LSTM (gates i, f, g, o as PyTorch) unrolled, linear head on the last h."""

    def __init__(self, c):
        super().__init__()
        self.cell, self.fc = Cell(c, 4), nn.Linear(c["hidden"], c["out"])

    def forward(self, x):
        h = cell = None
        for t in range(x.shape[1]):
            i, f, g, o = self.cell.pre(x[:, t], h).chunk(4, dim=-1)
            i, f, g, o = torch.sigmoid(i), torch.sigmoid(f), torch.tanh(g), torch.sigmoid(o)
            cell = i * g if cell is None else f * cell + i * g
            h = o * torch.tanh(cell)
        return self.fc(h)


class Ssm(nn.Module):
    """``ssm``: a diagonal linear state-space layer, ``h_t = a*h_{t-1} + b*u_t``,
    ``y_t = sum(c*h_t) + d*u_t`` per channel, with ``a = exp(-exp(a_log))``, scanned
    sequentially between an input and an output projection."""

    def __init__(self, c):
        super().__init__()
        dim, n = c["dim"], c["state"]
        self.in_proj, self.out_proj = nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.a_log, self.b, self.c = (nn.Parameter(torch.zeros(dim, n)) for _ in range(3))
        self.d = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        u = self.in_proj(x)
        a = torch.exp(-torch.exp(self.a_log))
        h, ys = None, []
        for t in range(u.shape[1]):
            bu = self.b * u[:, t, :, None]
            h = bu if h is None else a * h + bu
            ys.append((h * self.c).sum(-1) + self.d * u[:, t])
        return self.out_proj(torch.stack(ys, dim=1))


class Autoencoder(nn.Module):
    """``autoencoder``: a ReLU encoder to a code and a ReLU decoder with a sigmoid output."""

    def __init__(self, c):
        super().__init__()
        dims = c["dims"]
        n = len(dims) - 1
        self.enc = nn.ModuleList(nn.Linear(dims[i], dims[i + 1]) for i in range(n))
        self.dec = nn.ModuleList(nn.Linear(dims[-1 - i], dims[-2 - i]) for i in range(n))

    def forward(self, x):
        def stack(layers, h):
            for i, layer in enumerate(layers):
                h = layer(h)
                if i < len(layers) - 1:
                    h = F.relu(h)
            return h

        code = stack(self.enc, x)
        return {"code": code, "recon": torch.sigmoid(stack(self.dec, code))}


class Vae(nn.Module):
    """``vae``: encoder to mean and log-variance, ``z = mu + exp(0.5 logvar) * eps``
    with the noise an input, decoder with a sigmoid output."""

    def __init__(self, c):
        super().__init__()
        i, h, z = c["input"], c["hidden"], c["latent"]
        self.enc, self.mu, self.logvar = nn.Linear(i, h), nn.Linear(h, z), nn.Linear(h, z)
        self.dec1, self.dec2 = nn.Linear(z, h), nn.Linear(h, i)

    def forward(self, x, eps):
        h = F.relu(self.enc(x))
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.exp(0.5 * logvar) * eps
        recon = torch.sigmoid(self.dec2(F.relu(self.dec1(z))))
        return {"recon": recon, "mu": mu, "logvar": logvar}


class GanGenerator(nn.Module):
    """``gan_generator``: DCGAN-style: linear to 4x4, then transposed convolutions
    (kernel 4, stride 2, padding 1) doubling the size, batch norm + ReLU between, tanh."""

    def __init__(self, c):
        super().__init__()
        ch = c["channels"]
        self.c0 = ch[0]
        self.fc = nn.Linear(c["z"], ch[0] * 16)
        self.bn0 = nn.BatchNorm2d(ch[0], eps=EPS)
        self.n = len(ch) - 1
        for i in range(self.n):
            setattr(self, f"up{i}", nn.ConvTranspose2d(ch[i], ch[i + 1], 4, 2, 1))
            if i < self.n - 1:
                setattr(self, f"bn{i + 1}", nn.BatchNorm2d(ch[i + 1], eps=EPS))

    def forward(self, z):
        x = F.relu(self.bn0(self.fc(z).reshape(z.shape[0], self.c0, 4, 4)))
        for i in range(self.n):
            x = getattr(self, f"up{i}")(x)
            x = F.relu(getattr(self, f"bn{i + 1}")(x)) if i < self.n - 1 else torch.tanh(x)
        return x


class TimeMlp(nn.Module):
    """Sinusoidal timestep embedding (``shared.time_frequencies``; sin then cos),
    then linear, SiLU, linear."""

    def __init__(self, temb, out):
        super().__init__()
        freqs = torch.from_numpy(shared.time_frequencies(temb))
        self.register_buffer("freqs", freqs, persistent=False)
        self.fc1, self.fc2 = nn.Linear(temb, out), nn.Linear(out, out)

    def forward(self, t):
        args = t[:, None] * self.freqs
        emb = torch.cat([torch.sin(args), torch.cos(args)], dim=-1)
        return self.fc2(F.silu(self.fc1(emb)))


def _alpha_bar(t, steps):
    """The cosine schedule's cumulative alpha at (float) step ``t`` (``shared.alpha_bar``)."""
    f = torch.cos((t / steps + shared.COSINE_S) / (1 + shared.COSINE_S) * (math.pi / 2))
    return f * f


class DiffusionMlp(nn.Module):
    """``diffusion_mlp``: predicts the noise of ``x`` at step ``t`` and takes one DDIM
    step to ``t - 1`` under the cosine schedule; returns ``eps`` and ``x_prev``."""

    def __init__(self, c):
        super().__init__()
        self.steps = c["steps"]
        self.time = TimeMlp(c["temb"], c["hidden"])
        self.inp = nn.Linear(c["dim"], c["hidden"])
        self.mid = nn.Linear(c["hidden"], c["hidden"])
        self.out = nn.Linear(c["hidden"], c["dim"])

    def forward(self, x, t):
        h = F.silu(self.inp(x) + self.time(t))
        eps = self.out(F.silu(self.mid(h)))
        ab, ab_prev = _alpha_bar(t, self.steps)[:, None], _alpha_bar(t - 1, self.steps)[:, None]
        x0 = (x - torch.sqrt(1 - ab) * eps) / torch.sqrt(ab)
        return {"eps": eps, "x_prev": torch.sqrt(ab_prev) * x0 + torch.sqrt(1 - ab_prev) * eps}


class ResBlock(nn.Module):
    """GroupNorm, SiLU, conv, + timestep projection, GroupNorm, SiLU, conv, + skip
    (a 1x1 conv when the channel count changes)."""

    def __init__(self, c_in, c_out, temb, groups):
        super().__init__()
        self.gn1 = nn.GroupNorm(groups, c_in, eps=EPS)
        self.conv1 = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.temb = nn.Linear(temb, c_out)
        self.gn2 = nn.GroupNorm(groups, c_out, eps=EPS)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1)
        self.skip = nn.Conv2d(c_in, c_out, 1) if c_in != c_out else None

    def forward(self, x, temb):
        h = self.conv1(F.silu(self.gn1(x))) + self.temb(F.silu(temb))[:, :, None, None]
        h = self.conv2(F.silu(self.gn2(h)))
        return h + (x if self.skip is None else self.skip(x))


class Unet(nn.Module):
    """``unet``: one down level (stride-2 conv) and one up level (nearest upsampling,
    conv, concatenated skip), residual blocks with timestep input; predicts the noise."""

    def __init__(self, c):
        super().__init__()
        b, t, g = c["base"], c["temb"], c["groups"]
        self.time = TimeMlp(t, t)
        self.conv_in = nn.Conv2d(c["channels"], b, 3, padding=1)
        self.res1 = ResBlock(b, b, t, g)
        self.down = nn.Conv2d(b, 2 * b, 3, stride=2, padding=1)
        self.res2 = ResBlock(2 * b, 2 * b, t, g)
        self.up = nn.Conv2d(2 * b, b, 3, padding=1)
        self.res3 = ResBlock(2 * b, b, t, g)
        self.gn_out = nn.GroupNorm(g, b, eps=EPS)
        self.conv_out = nn.Conv2d(b, c["channels"], 3, padding=1)

    def forward(self, x, t):
        temb = self.time(t)
        h1 = self.res1(self.conv_in(x), temb)
        h2 = self.res2(self.down(h1), temb)
        u = self.up(F.interpolate(h2, scale_factor=2, mode="nearest"))
        h3 = self.res3(torch.cat([u, h1], dim=1), temb)
        return self.conv_out(F.silu(self.gn_out(h3)))


class Gcn(nn.Module):
    """``gcn``: two graph convolutions ``adj @ (h W^T + b)`` over a dense normalized
    adjacency, ReLU between, log-softmax over the classes."""

    def __init__(self, c):
        super().__init__()
        self.gc1 = nn.Linear(c["features"], c["hidden"])
        self.gc2 = nn.Linear(c["hidden"], c["classes"])

    def forward(self, x, adj):
        h = F.relu(adj @ self.gc1(x))
        return F.log_softmax(adj @ self.gc2(h), dim=-1)


class Tower(nn.Module):
    """An id embedding concatenated with dense features, linear, ReLU, linear."""

    def __init__(self, c):
        super().__init__()
        self.fc1 = nn.Linear(c["emb"] + c["features"], c["hidden"])
        self.fc2 = nn.Linear(c["hidden"], c["out"])

    def forward(self, emb, feat):
        return self.fc2(F.relu(self.fc1(torch.cat([emb, feat], dim=-1))))


class TwoTower(nn.Module):
    """``two_tower``: user and item towers; the score is their dot product."""

    def __init__(self, c):
        super().__init__()
        self.user_emb = nn.Embedding(c["users"], c["emb"])
        self.item_emb = nn.Embedding(c["items"], c["emb"])
        self.user, self.item = Tower(c), Tower(c)

    def forward(self, user_id, user_feat, item_id, item_feat):
        u = self.user(self.user_emb(user_id), user_feat)
        v = self.item(self.item_emb(item_id), item_feat)
        return (u * v).sum(-1)


def _l2_normalize(x):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True))


class ClipText(Text):
    """The CLIP text tower: the causal text stack, the last token's features, projected."""

    def __init__(self, c):
        super().__init__(c)
        self.proj = nn.Linear(c["dim"], c["embed"], bias=False)

    def forward(self, ids):
        return self.proj(super().forward(ids)[:, -1])


class ClipVision(Vision):
    """The CLIP image tower: the vision tower's class token, projected."""

    def __init__(self, c):
        super().__init__(c)
        self.proj = nn.Linear(c["dim"], c["embed"], bias=False)

    def forward(self, image):
        return self.proj(super().forward(image))


class Clip(nn.Module):
    """``clip``: L2-normalized image and text embeddings and their similarity logits
    ``exp(logit_scale) * img @ txt^T``."""

    def __init__(self, c):
        super().__init__()
        self.visual, self.text = ClipVision(c), ClipText(c)
        self.logit_scale = nn.Parameter(torch.zeros(()))

    def forward(self, image, ids):
        img = _l2_normalize(self.visual(image))
        txt = _l2_normalize(self.text(ids))
        logits = torch.exp(self.logit_scale) * img @ txt.T
        return {"logits": logits, "image_embeds": img, "text_embeds": txt}


class Moe(nn.Module):
    """``moe``: top-k routed experts computed densely: the router's k-th largest logit
    (found by k-1 rounds of masking the maximum) thresholds the logits, a softmax over the
    kept logits gives the gates (the others get -inf, so gate 0), and the output is the
    gate-weighted sum of every expert's GELU MLP."""

    def __init__(self, c):
        super().__init__()
        self.router = nn.Linear(c["dim"], c["experts"])
        self.experts = nn.ModuleList(Mlp(c["dim"], c["ff"]) for _ in range(c["experts"]))
        self.top_k = c["top_k"]

    def forward(self, x):
        logits = self.router(x)
        kth = logits.amax(-1, keepdim=True)
        for _ in range(self.top_k - 1):
            kth = torch.where(logits >= kth, -math.inf, logits).amax(-1, keepdim=True)
        gates = torch.softmax(torch.where(logits >= kth, logits, -math.inf), dim=-1)
        outs = torch.stack([e(x) for e in self.experts], dim=-2)
        return (gates[..., None] * outs).sum(-2)


_CLASSES = {
    "mlp": Mlp3, "cnn": Cnn, "transformer_block": TransformerBlock,
    "layernorm_gelu": LayernormGelu, "vit": Vit, "encoder": Encoder, "tiny_gpt": TinyGpt,
    "rnn": Rnn, "lstm": Lstm, "ssm": Ssm, "autoencoder": Autoencoder, "vae": Vae,
    "gan_generator": GanGenerator, "diffusion_mlp": DiffusionMlp, "unet": Unet, "gcn": Gcn,
    "two_tower": TwoTower, "clip": Clip, "moe": Moe,
}


def build(name: str, size: str) -> nn.Module:
    """Model ``name`` at ``size`` with the zoo's weights, in eval mode. Every weight must
    land on a parameter or buffer and every parameter must get one."""
    model = _CLASSES[name](config(name, size))
    w = weights(name, size)
    state = model.state_dict()
    wanted = {k for k in state if not k.endswith("num_batches_tracked")}
    if wanted != set(w):
        raise AssertionError(f"{name}: weights {sorted(set(w) ^ wanted)} do not match")
    model.load_state_dict({**state, **{k: torch.from_numpy(v) for k, v in w.items()}})
    return model.eval()


def run(name: str, size: str, inputs: dict) -> dict:
    """Runs ``build(name, size)`` on NumPy inputs; outputs as a dict of NumPy arrays
    named as the exporters name them (``y`` for a single tensor)."""
    model = build(name, size)
    with torch.no_grad():
        out = model(**{k: torch.from_numpy(v) for k, v in inputs.items()})
    return shared.named_outputs(out, lambda t: t.numpy())

