"""The zoo's models in JAX: ``functional``'s bodies over ``jax.numpy`` and ``jax.lax``.

``build(name, size)`` returns ``(fn, params)``: ``fn(params, **inputs)`` is a pure
function and ``params`` is ``weights.weights(name, size)`` (flat, PyTorch names and
layouts). Layer and group norm are written out (mean, variance, ``rsqrt``) as Flax does;
convolutions are ``lax.conv_general_dilated`` on NCHW/OIHW, transposed ones
``lax.conv_transpose`` with the kernel flipped (``transpose_kernel=True``); the ``ssm``
scan is a ``lax.scan``. Token ids run as int32 (JAX's default without x64).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import functional, shared
from .models import EPS, config
from .weights import weights

_CONV_LAYOUT = ("NCHW", "OIHW", "NCHW")


class JaxOps:
    """The array backend ``functional`` runs on."""

    relu = staticmethod(jax.nn.relu)
    silu = staticmethod(jax.nn.silu)
    sigmoid = staticmethod(jax.nn.sigmoid)
    tanh = staticmethod(jnp.tanh)
    exp = staticmethod(jnp.exp)
    sqrt = staticmethod(jnp.sqrt)
    sin = staticmethod(jnp.sin)
    cos = staticmethod(jnp.cos)
    matmul = staticmethod(jnp.matmul)
    transpose = staticmethod(jnp.transpose)
    reshape = staticmethod(jnp.reshape)
    broadcast_to = staticmethod(jnp.broadcast_to)
    where = staticmethod(jnp.where)
    const = staticmethod(jnp.asarray)
    zeros = staticmethod(jnp.zeros)
    softmax = staticmethod(jax.nn.softmax)
    log_softmax = staticmethod(jax.nn.log_softmax)
    concat = staticmethod(jnp.concatenate)
    stack = staticmethod(jnp.stack)
    split = staticmethod(jnp.split)
    sum = staticmethod(jnp.sum)
    mean = staticmethod(jnp.mean)
    max = staticmethod(jnp.max)

    @staticmethod
    def shape(x):
        """The static shape as a tuple of ints."""
        return tuple(x.shape)

    @staticmethod
    def gelu(x):
        """Exact (erf) GELU."""
        return jax.nn.gelu(x, approximate=False)

    @staticmethod
    def linear(x, w, b=None):
        """``x @ w.T + b`` with a PyTorch-layout ``[out, in]`` weight."""
        y = x @ w.T
        return y if b is None else y + b

    @staticmethod
    def _normalize(x, axes):
        mean = jnp.mean(x, axes, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axes, keepdims=True)
        return (x - mean) * lax.rsqrt(var + EPS)

    @classmethod
    def layer_norm(cls, x, w, b):
        """Layer norm over the last axis (epsilon ``models.EPS``)."""
        return cls._normalize(x, -1) * w + b

    @classmethod
    def group_norm(cls, x, w, b, groups):
        """Group norm of an NCHW image over ``groups`` channel groups."""
        n, c, h, wd = x.shape
        y = cls._normalize(x.reshape(n, groups, -1), -1).reshape(n, c, h, wd)
        return y * w[:, None, None] + b[:, None, None]

    @staticmethod
    def batch_norm(x, mean, var, w, b):
        """Eval-mode batch norm of an NCHW image over running statistics."""
        scale = w * lax.rsqrt(var + EPS)
        return (x - mean[:, None, None]) * scale[:, None, None] + b[:, None, None]

    @staticmethod
    def conv2d(x, w, b, stride, pad):
        """2-D convolution of an NCHW image with square stride and symmetric padding."""
        y = lax.conv_general_dilated(x, w, (stride, stride), [(pad, pad)] * 2,
                                     dimension_numbers=_CONV_LAYOUT)
        return y + b[:, None, None]

    @staticmethod
    def conv_transpose2d(x, w, b, stride, pad):
        """2-D transposed convolution of an NCHW image (PyTorch's stride/padding meaning)."""
        # PyTorch's [in, out, kh, kw] is the OIHW kernel of the convolution this transposes
        k = w.shape[2]
        y = lax.conv_transpose(x, w, (stride, stride), [(k - 1 - pad, k - 1 - pad)] * 2,
                               dimension_numbers=_CONV_LAYOUT, transpose_kernel=True)
        return y + b[:, None, None]

    @staticmethod
    def max_pool2d(x, k):
        """``k`` x ``k`` max pooling with stride ``k`` of an NCHW image."""
        return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, k, k), (1, 1, k, k), "VALID")

    @staticmethod
    def upsample2x(x):
        """Nearest-neighbour 2x upsampling of an NCHW image."""
        return jnp.repeat(jnp.repeat(x, 2, axis=2), 2, axis=3)

    @staticmethod
    def take(table, ids):
        """Rows of ``table`` by integer ``ids`` (an embedding lookup)."""
        return jnp.take(table, ids, axis=0)

    @staticmethod
    def scan(step, init, xs, axis):
        """``lax.scan`` of ``step(carry, x_t) -> (carry, y_t)`` along ``axis``; the ys
        stacked on ``axis``."""
        _, ys = lax.scan(step, init, jnp.moveaxis(xs, axis, 0))
        return jnp.moveaxis(ys, 0, axis)


def build(name: str, size: str):
    """``(fn, params)`` for model ``name`` at ``size``; ``fn(params, **inputs)``."""
    c = config(name, size)
    body = functional.MODEL_FUNCTIONS[name]

    def fn(params, **inputs):
        return body(JaxOps, params, c, **inputs)

    fn.__name__ = name
    return functools.wraps(body)(fn), weights(name, size)


def run(name: str, size: str, inputs: dict) -> dict:
    """Runs ``build(name, size)`` (jit-compiled) on NumPy inputs; outputs by export name."""
    fn, params = build(name, size)
    out = jax.jit(fn)(params, **inputs)
    return shared.named_outputs(out, np.asarray)
