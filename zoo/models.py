"""The model zoo's registry: the 19 model names and their tiny and bench sizes.

``tiny`` is the size of the committed fixtures (a few KB of weights each); ``bench`` is
a size worth timing on a CPU, generated on demand. Every config holds ``batch``, the
batch the fixtures and benchmarks use. ``docs/zoo.md`` describes each model.
"""

MODELS = (
    "mlp", "cnn", "transformer_block", "layernorm_gelu", "vit", "encoder", "tiny_gpt",
    "rnn", "lstm", "ssm", "autoencoder", "vae", "gan_generator", "diffusion_mlp", "unet",
    "gcn", "two_tower", "clip", "moe",
)

SIZES = ("tiny", "bench")

FRAMEWORKS = ("torch", "jax", "tf")

#: Shared numeric conventions (all three frameworks): layer/group/batch norm epsilon.
EPS = 1e-5

CONFIGS = {
    "mlp": {
        "tiny": dict(batch=2, dims=[32, 64, 64, 10]),
        "bench": dict(batch=8, dims=[784, 1024, 1024, 10]),
    },
    "cnn": {
        "tiny": dict(batch=2, image=16, channels=[3, 8, 16], classes=10),
        "bench": dict(batch=1, image=64, channels=[3, 32, 64], classes=100),
    },
    "transformer_block": {
        "tiny": dict(batch=2, seq=8, dim=32, heads=2, ff=64),
        "bench": dict(batch=1, seq=128, dim=512, heads=8, ff=2048),
    },
    "layernorm_gelu": {
        "tiny": dict(batch=2, seq=8, dim=32, ff=64),
        "bench": dict(batch=1, seq=128, dim=768, ff=3072),
    },
    "vit": {
        "tiny": dict(batch=2, image=16, patch=8, dim=32, heads=2, ff=64, layers=1, classes=10),
        "bench": dict(batch=1, image=224, patch=16, dim=384, heads=6, ff=1536, layers=4,
                      classes=1000),
    },
    "encoder": {
        "tiny": dict(batch=2, seq=8, vocab=100, dim=32, heads=2, ff=64, layers=2),
        "bench": dict(batch=1, seq=128, vocab=8192, dim=512, heads=8, ff=2048, layers=4),
    },
    "tiny_gpt": {
        "tiny": dict(batch=2, seq=8, vocab=64, dim=32, heads=2, ff=64, layers=2),
        "bench": dict(batch=1, seq=128, vocab=8192, dim=768, heads=12, ff=3072, layers=4),
    },
    "rnn": {
        "tiny": dict(batch=2, seq=8, input=8, hidden=16, out=4),
        "bench": dict(batch=1, seq=64, input=128, hidden=512, out=16),
    },
    "lstm": {
        "tiny": dict(batch=2, seq=8, input=8, hidden=16, out=4),
        "bench": dict(batch=1, seq=64, input=128, hidden=512, out=16),
    },
    "ssm": {
        "tiny": dict(batch=2, seq=8, dim=16, state=4),
        "bench": dict(batch=1, seq=128, dim=256, state=16),
    },
    "autoencoder": {
        "tiny": dict(batch=2, dims=[64, 32, 8]),
        "bench": dict(batch=8, dims=[784, 512, 128, 32]),
    },
    "vae": {
        "tiny": dict(batch=2, input=64, hidden=32, latent=8),
        "bench": dict(batch=8, input=784, hidden=512, latent=32),
    },
    "gan_generator": {
        "tiny": dict(batch=2, z=16, channels=[16, 8, 3]),
        "bench": dict(batch=1, z=128, channels=[512, 256, 128, 64, 3]),
    },
    "diffusion_mlp": {
        "tiny": dict(batch=2, dim=16, hidden=32, temb=16, steps=1000),
        "bench": dict(batch=8, dim=512, hidden=1024, temb=128, steps=1000),
    },
    "unet": {
        "tiny": dict(batch=2, image=8, channels=3, base=8, groups=4, temb=16, steps=1000),
        "bench": dict(batch=1, image=64, channels=3, base=64, groups=8, temb=256, steps=1000),
    },
    "gcn": {
        "tiny": dict(batch=2, nodes=8, features=8, hidden=16, classes=4),
        "bench": dict(batch=1, nodes=512, features=128, hidden=256, classes=16),
    },
    "two_tower": {
        "tiny": dict(batch=2, users=50, items=60, emb=8, features=8, hidden=16, out=8),
        "bench": dict(batch=64, users=10000, items=20000, emb=64, features=64, hidden=256,
                      out=128),
    },
    "clip": {
        "tiny": dict(batch=2, image=16, patch=8, seq=8, vocab=64, dim=32, heads=2, ff=64,
                     layers=1, embed=16),
        "bench": dict(batch=2, image=224, patch=32, seq=64, vocab=8192, dim=512, heads=8,
                      ff=2048, layers=2, embed=512),
    },
    "moe": {
        "tiny": dict(batch=2, seq=8, dim=16, ff=32, experts=4, top_k=2),
        "bench": dict(batch=1, seq=128, dim=512, ff=1024, experts=8, top_k=2),
    },
}

assert tuple(CONFIGS) == MODELS


def config(name: str, size: str) -> dict:
    """The config of model ``name`` at ``size`` ("tiny" or "bench"), with a clear error
    for an unknown name or size."""
    if name not in CONFIGS:
        raise KeyError(f"unknown zoo model {name!r}; models: {', '.join(MODELS)}")
    if size not in SIZES:
        raise KeyError(f"unknown size {size!r}; sizes: {', '.join(SIZES)}")
    return CONFIGS[name][size]
