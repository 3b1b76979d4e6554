"""The zoo's models in TensorFlow: ``functional``'s bodies in a ``tf.Module``.

``build(name, size)`` returns a ``tf.Module`` called as ``module(**inputs)``; it holds
one ``tf.Variable`` per weight, named by the weight's PyTorch name. Linear weights keep
PyTorch's ``[out, in]`` (``tf.matmul(..., transpose_b=True)``); convolution kernels are
stored in TensorFlow's layouts (``HWIO``; ``[kh, kw, out, in]`` for transposed ones).
Images stay NCHW between layers; each convolution, pooling and resize transposes to
NHWC and back (TensorFlow's CPU kernels are NHWC only), transposes an exporter's
clean-up passes cancel where they meet. Padding is explicit, as PyTorch's.
"""

import numpy as np
import tensorflow as tf

from . import functional, shared
from .models import EPS, config
from .weights import weights

_TO_NHWC, _TO_NCHW = (0, 2, 3, 1), (0, 3, 1, 2)


def _pads(pad):
    return "VALID" if pad == 0 else [[0, 0], [pad, pad], [pad, pad], [0, 0]]


class TfOps:
    """The array backend ``functional`` runs on."""

    relu = staticmethod(tf.nn.relu)
    silu = staticmethod(tf.nn.silu)
    sigmoid = staticmethod(tf.math.sigmoid)
    tanh = staticmethod(tf.math.tanh)
    exp = staticmethod(tf.math.exp)
    sqrt = staticmethod(tf.math.sqrt)
    sin = staticmethod(tf.math.sin)
    cos = staticmethod(tf.math.cos)
    matmul = staticmethod(tf.linalg.matmul)
    transpose = staticmethod(tf.transpose)
    reshape = staticmethod(tf.reshape)
    broadcast_to = staticmethod(tf.broadcast_to)
    const = staticmethod(tf.constant)
    zeros = staticmethod(tf.zeros)
    softmax = staticmethod(tf.nn.softmax)
    log_softmax = staticmethod(tf.nn.log_softmax)
    take = staticmethod(tf.gather)
    concat = staticmethod(tf.concat)
    stack = staticmethod(tf.stack)
    split = staticmethod(tf.split)
    sum = staticmethod(tf.reduce_sum)
    mean = staticmethod(tf.reduce_mean)
    max = staticmethod(tf.reduce_max)

    @staticmethod
    def shape(x):
        """The static shape as a tuple of ints."""
        return tuple(x.shape.as_list())

    @staticmethod
    def where(cond, a, b):
        """``cond ? a : b``, broadcast; a Python float takes the other operand's dtype."""
        dtype = (b if isinstance(a, float) else a).dtype
        return tf.where(cond, tf.cast(a, dtype), tf.cast(b, dtype))

    @staticmethod
    def gelu(x):
        """Exact (erf) GELU."""
        return tf.nn.gelu(x, approximate=False)

    @staticmethod
    def linear(x, w, b=None):
        """``x @ w.T + b`` with a PyTorch-layout ``[out, in]`` weight."""
        y = tf.linalg.matmul(x, w, transpose_b=True)
        return y if b is None else y + b

    @staticmethod
    def _normalize(x, axis):
        mean = tf.reduce_mean(x, axis, keepdims=True)
        var = tf.reduce_mean(tf.square(x - mean), axis, keepdims=True)
        return (x - mean) * tf.math.rsqrt(var + EPS)

    @classmethod
    def layer_norm(cls, x, w, b):
        """Layer norm over the last axis (epsilon ``models.EPS``)."""
        return cls._normalize(x, -1) * w + b

    @classmethod
    def group_norm(cls, x, w, b, groups):
        """Group norm of an NCHW image over ``groups`` channel groups."""
        n, c, h, wd = x.shape.as_list()
        y = tf.reshape(cls._normalize(tf.reshape(x, (n, groups, -1)), -1), (n, c, h, wd))
        return y * w[:, None, None] + b[:, None, None]

    @staticmethod
    def batch_norm(x, mean, var, w, b):
        """Eval-mode batch norm of an NCHW image over running statistics."""
        def per_channel(v):
            return tf.reshape(v, (-1, 1, 1))

        return tf.nn.batch_normalization(x, per_channel(mean), per_channel(var),
                                         per_channel(b), per_channel(w), EPS)

    @staticmethod
    def conv2d(x, w, b, stride, pad):
        """2-D convolution of an NCHW image with square stride and symmetric padding."""
        y = tf.nn.conv2d(tf.transpose(x, _TO_NHWC), w, stride, _pads(pad)) + b
        return tf.transpose(y, _TO_NCHW)

    @staticmethod
    def conv_transpose2d(x, w, b, stride, pad):
        """2-D transposed convolution of an NCHW image (PyTorch's stride/padding meaning)."""
        n, _, h, wd = x.shape.as_list()
        k, c_out = w.shape[0], w.shape[2]
        size = [(d - 1) * stride - 2 * pad + k for d in (h, wd)]
        y = tf.nn.conv2d_transpose(tf.transpose(x, _TO_NHWC), w, [n, *size, c_out], stride,
                                   _pads(pad)) + b
        return tf.transpose(y, _TO_NCHW)

    @staticmethod
    def max_pool2d(x, k):
        """``k`` x ``k`` max pooling with stride ``k`` of an NCHW image."""
        return tf.transpose(tf.nn.max_pool2d(tf.transpose(x, _TO_NHWC), k, k, "VALID"), _TO_NCHW)

    @staticmethod
    def upsample2x(x):
        """Nearest-neighbour 2x upsampling of an NCHW image."""
        h, w = x.shape.as_list()[2:]
        y = tf.image.resize(tf.transpose(x, _TO_NHWC), [2 * h, 2 * w], method="nearest")
        return tf.transpose(y, _TO_NCHW)

    @staticmethod
    def scan(step, init, xs, axis):
        """``step(carry, x_t) -> (carry, y_t)`` unrolled along ``axis`` in Python."""
        carry, ys = init, []
        for x_t in tf.unstack(xs, axis=axis):
            carry, y = step(carry, x_t)
            ys.append(y)
        return tf.stack(ys, axis)


def tf_layout(name: str, value: np.ndarray) -> np.ndarray:
    """A PyTorch-layout weight in the layout the TensorFlow model stores: conv kernels
    ``[out, in, kh, kw] -> [kh, kw, in, out]``, transposed-conv kernels
    ``[in, out, kh, kw] -> [kh, kw, out, in]`` (both are a transpose by (2, 3, 1, 0));
    everything else unchanged."""
    return value.transpose(2, 3, 1, 0) if value.ndim == 4 else value


class ZooModule(tf.Module):
    """One zoo model: its variables and the shared functional body."""

    def __init__(self, name: str, size: str):
        super().__init__(name=name)
        self.config = config(name, size)
        self.body = functional.MODEL_FUNCTIONS[name]
        self.weights = {k: tf.Variable(tf_layout(k, v), name=k, trainable=False)
                        for k, v in weights(name, size).items()}

    def __call__(self, **inputs):
        inputs = {k: tf.convert_to_tensor(v) for k, v in inputs.items()}
        return self.body(TfOps, dict(self.weights), self.config, **inputs)


def build(name: str, size: str) -> tf.Module:
    """Model ``name`` at ``size`` as a ``tf.Module`` called as ``module(**inputs)``."""
    return ZooModule(name, size)


def run(name: str, size: str, inputs: dict) -> dict:
    """Runs ``build(name, size)`` (as a ``tf.function``) on NumPy inputs; outputs by
    export name."""
    module = build(name, size)
    out = tf.function(module.__call__)(**inputs)
    return shared.named_outputs(out, lambda t: t.numpy())
