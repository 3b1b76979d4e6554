"""The TensorFlow route: small tf.Modules per op family, exported, run in rml (``rml-host
run``) and compared with TensorFlow's own output; plus the unsupported-op error."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

tf = pytest.importorskip("tensorflow")

import rml_export  # noqa: E402
from rml_runner import assert_outputs_close, run_exported  # noqa: E402

RNG = np.random.default_rng(7)


def rand(*shape, low=-1.0, high=1.0):
    """Uniform float32 test data."""
    return RNG.uniform(low, high, shape).astype(np.float32)


class Fn(tf.Module):
    """A tf.Module calling ``fn(self, **inputs)``; ``weights`` become named variables."""

    def __init__(self, fn, **weights):
        super().__init__()
        self.fn = fn
        self.w = {k: tf.Variable(v, name=k) for k, v in weights.items()}

    def __call__(self, **inputs):
        return self.fn(self.w, **inputs)


def tf_outputs(module, inputs):
    """TF's own outputs by rml output name (single -> "y", dict -> keys, tuple -> yN)."""
    out = module(**{k: tf.constant(v) for k, v in inputs.items()})
    if isinstance(out, (tuple, list)):
        out = {f"y{i}": v for i, v in enumerate(out)}
    return {k: v.numpy() for k, v in (out if isinstance(out, dict) else {"y": out}).items()}


def check(module, inputs, tmp_path, rtol=1e-4, atol=1e-4, **options):
    """Export, run in rml, compare with TF; returns the graph."""
    graph = rml_export.export_tf(module, inputs, **options)
    got = run_exported(graph, inputs, tmp_path)
    assert_outputs_close(got, tf_outputs(module, inputs), rtol=rtol, atol=atol)
    return graph


def ops(graph):
    return [n.op for n in graph.nodes]


# -- linear algebra ------------------------------------------------------------------------

def test_dense_layers_keep_variable_names_and_become_linear(tmp_path):
    def fn(w, x):
        h = tf.nn.relu(tf.nn.bias_add(tf.matmul(x, w["fc1/kernel"]), w["fc1/bias"]))
        return tf.matmul(h, w["fc2.weight"], transpose_b=True) + w["fc2.bias"]

    m = Fn(fn, **{"fc1/kernel": rand(8, 16), "fc1/bias": rand(16),
                  "fc2.weight": rand(4, 16), "fc2.bias": rand(4)})
    graph = check(m, {"x": rand(3, 8)}, tmp_path)
    assert ops(graph) == ["linear", "relu", "linear"]
    assert set(graph.constants) == {"fc1.kernel", "fc1.bias", "fc2.weight", "fc2.bias"}
    np.testing.assert_array_equal(graph.constants["fc1.kernel"], m.w["fc1/kernel"].numpy().T)


def test_symbolic_batch_runs_at_another_batch(tmp_path):
    def fn(w, x):
        h = tf.matmul(x, w["k"]) + w["b"] + tf.zeros([x.shape[0], 6])  # a batch-sized Const
        h = tf.reshape(h, [tf.shape(h)[0], 2, 3])
        cls = tf.broadcast_to(w["cls"], [x.shape[0], 1, 3])
        return tf.nn.softmax(tf.concat([cls, h], 1), axis=1)

    m = Fn(fn, k=rand(5, 6), b=rand(6), cls=rand(1, 1, 3))
    graph = rml_export.export_tf(m, {"x": rand(2, 5)}, symbols={"x": {0: "N"}})
    assert graph.types["x"].shape == ["N", 5]
    x = rand(7, 5)
    got = run_exported(graph, {"x": x}, tmp_path)
    assert_outputs_close(got, tf_outputs(m, {"x": x}))


def test_batch_matmul_and_einsum(tmp_path):
    def fn(w, q, k):
        s = tf.einsum("bhqd,bhkd->bhqk", q, k)
        a = tf.matmul(tf.nn.softmax(s), k)
        p = tf.einsum("bhsd,de->bshe", a, w["proj"])
        return {"scores": s, "mix": tf.einsum("bshe,bhse->bs", p, tf.transpose(p, [0, 2, 1, 3])),
                "proj": p}

    graph = check(Fn(fn, proj=rand(4, 3)), {"q": rand(2, 3, 5, 4), "k": rand(2, 3, 6, 4)},
                  tmp_path)
    assert "linear" in ops(graph)


# -- elementwise ---------------------------------------------------------------------------

def test_unary_activations(tmp_path):
    def fn(w, x):
        pos = tf.abs(x) + 0.5
        return {
            "relu6": tf.nn.relu6(x * 8), "elu": tf.nn.elu(x), "leaky": tf.nn.leaky_relu(x, 0.2),
            "sigmoid": tf.sigmoid(x), "tanh": tf.tanh(x), "softplus": tf.nn.softplus(x),
            "erf": tf.math.erf(x), "exp": tf.exp(x), "log": tf.math.log(pos),
            "sqrt": tf.sqrt(pos), "rsqrt": tf.math.rsqrt(pos), "neg": -x, "sin": tf.sin(x),
            "cos": tf.cos(x), "square": tf.square(x), "recip": tf.math.reciprocal(pos),
            "gelu": tf.nn.gelu(x), "gelu_tanh": tf.nn.gelu(x, approximate=True),
            "silu": tf.nn.silu(x), "log1p": tf.math.log1p(pos), "expm1": tf.math.expm1(x),
            "selu": tf.nn.selu(x), "softsign": tf.nn.softsign(x),
        }

    graph = check(Fn(fn), {"x": rand(3, 7, low=-3, high=3)}, tmp_path)
    assert {"gelu", "gelu_tanh", "silu", "clip"} <= set(ops(graph))


def test_binary_and_comparisons(tmp_path):
    def fn(w, a, b):
        return {
            "sub": a - b, "mul": a * b, "div": a / (tf.abs(b) + 1), "max": tf.maximum(a, b),
            "min": tf.minimum(a, b), "pow": tf.pow(tf.abs(a) + 1, b),
            "sqdiff": tf.math.squared_difference(a, b), "addn": tf.add_n([a, a * b, a]),
            "where": tf.where(a > b, a, 0.1 * b),
            "select_rows": tf.compat.v1.where(a[:, 0] > 0, a, 2 * a),  # v1 Select
            "mask": tf.cast(tf.logical_and(a >= 0, tf.logical_not(b < 0)), tf.float32)
            + tf.cast(tf.logical_or(tf.equal(a, b), tf.not_equal(a, 0.0)), tf.float32)
            + tf.cast(a <= b, tf.float32),
        }

    check(Fn(fn), {"a": rand(4, 5), "b": rand(5)}, tmp_path)


# -- normalization -------------------------------------------------------------------------

def test_softmax_and_layer_norm_forms(tmp_path):
    def fn(w, x):
        mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
        ln = (x - mean) * tf.math.rsqrt(var + 1e-5) * w["ln.weight"] + w["ln.bias"]
        bn = tf.nn.batch_normalization(x, mean, var, w["ln.bias"], w["ln.weight"], 1e-5)
        return {"ln": ln, "bn": bn, "sm1": tf.nn.softmax(x, axis=1),
                "lsm": tf.nn.log_softmax(x)}

    graph = check(Fn(fn, **{"ln.weight": rand(6), "ln.bias": rand(6)}),
                  {"x": rand(2, 3, 6)}, tmp_path)
    assert "layer_norm" in ops(graph)


def test_attention_and_group_norm_patterns_with_a_symbolic_batch(tmp_path):
    def fn(w, x, image):
        b, s = tf.shape(x)[0], x.shape[1]
        qkv = [tf.transpose(tf.reshape(tf.matmul(x, w[n], transpose_b=True), [b, s, 2, 4]),
                            [0, 2, 1, 3]) for n in ("q", "k", "v")]
        scores = tf.matmul(qkv[0], qkv[1], transpose_b=True) * 0.5
        scores = tf.where(np.tril(np.ones((s, s), bool)), scores, -np.inf)
        a = tf.matmul(tf.nn.softmax(scores), qkv[2])
        g = tf.reshape(image, [tf.shape(image)[0], 2, -1])
        mean = tf.reduce_mean(g, -1, keepdims=True)
        var = tf.reduce_mean(tf.square(g - mean), -1, keepdims=True)
        g = tf.reshape((g - mean) * tf.math.rsqrt(var + 1e-5), tf.shape(image))
        return {"attn": tf.reshape(tf.transpose(a, [0, 2, 1, 3]), [b, s, 8]),
                "gn": g * w["gn.weight"][:, None, None] + w["gn.bias"][:, None, None]}

    m = Fn(fn, q=rand(8, 8), k=rand(8, 8), v=rand(8, 8),
           **{"gn.weight": rand(4), "gn.bias": rand(4)})
    graph = rml_export.export_tf(m, {"x": rand(2, 5, 8), "image": rand(2, 4, 3, 3)},
                                 symbols={"x": {0: "B"}, "image": {0: "B"}})
    kinds = {n.op: n for n in graph.nodes}
    assert kinds["scaled_dot_product_attention"].attrs == {"causal": True}
    assert kinds["group_norm"].attrs == {"num_groups": 2}
    assert kinds["group_norm"].inputs[1:] == ["gn.weight", "gn.bias"]
    inputs = {"x": rand(3, 5, 8), "image": rand(3, 4, 3, 3)}
    assert_outputs_close(run_exported(graph, inputs, tmp_path), tf_outputs(m, inputs))


def test_reductions(tmp_path):
    def fn(w, x):
        return {
            "mean": tf.reduce_mean(x, axis=[1, 2]), "sum": tf.reduce_sum(x, -1, keepdims=True),
            "max": tf.reduce_max(x, 0), "min": tf.reduce_min(x, 1), "prod": tf.reduce_prod(x, 2),
            "argmax": tf.argmax(x, -1), "argmin": tf.cast(tf.argmin(x, 1), tf.float32),
            "cumsum": tf.cumsum(x, axis=1),
        }

    check(Fn(fn), {"x": rand(2, 3, 4)}, tmp_path)


# -- shape and layout ----------------------------------------------------------------------

def test_shape_ops(tmp_path):
    def fn(w, x):
        a, b = tf.split(x, 2, axis=-1)
        c, d = tf.split(x, [1, 3], axis=1)
        parts = tf.unstack(x, axis=1)
        return {
            "reshape": tf.reshape(x, [tf.shape(x)[0], -1]),
            "transpose": tf.transpose(x, [2, 0, 1]),
            "expand": tf.expand_dims(x, -1), "squeeze": tf.squeeze(c, axis=1),
            "concat": tf.concat([a, b, a], axis=-1), "concat1": tf.concat([d, c], 1),
            "stack": tf.stack([a, b], axis=1),
            "unstack": parts[2], "strided": x[:, 1:3, ::2], "index": x[..., 0],
            "newaxis": x[:, tf.newaxis, -1], "reverse": x[::-1],
            "slice": tf.slice(x, [0, 1, 0], [-1, 2, 3]),
            "tile": tf.tile(x, [1, 2, 1]), "broadcast": tf.broadcast_to(x[:, :1], [2, 4, 4]),
            "fill": tf.fill([2, 3], 0.5) + x[:, 0, :3],
        }

    check(Fn(fn), {"x": rand(2, 4, 4)}, tmp_path)


def test_gather_embedding_one_hot_and_pad(tmp_path):
    def fn(w, ids, x):
        emb = tf.nn.embedding_lookup(w["embed/table"], ids)
        return {
            "emb": emb, "cols": tf.gather(x, [2, 0], axis=1),
            "one_hot": tf.one_hot(ids, 5), "pad": tf.pad(x, [[0, 1], [2, 0]]),
            "pad_value": tf.pad(x, [[1, 1], [0, 0]], constant_values=2.0),
            "reflect": tf.pad(x, [[1, 1], [2, 1]], mode="REFLECT"),
        }

    graph = check(Fn(fn, **{"embed/table": rand(5, 3)}),
                  {"ids": np.array([[1, 4], [0, 2]], np.int64), "x": rand(3, 4)}, tmp_path)
    assert "embed.table" in graph.constants


# -- convolution and pooling (NHWC) --------------------------------------------------------

def test_conv_stack_keeps_one_transpose_at_each_end(tmp_path):
    def fn(w, image):
        h = tf.nn.conv2d(image, w["conv1/kernel"], strides=2, padding="SAME") + w["conv1/bias"]
        h = tf.nn.relu(h)
        h = tf.nn.conv2d(h, w["conv2/kernel"], strides=1, padding="VALID")
        h = tf.nn.max_pool2d(h, 2, 2, "VALID")
        return tf.reduce_mean(h, axis=[1, 2])

    graph = check(Fn(fn, **{"conv1/kernel": rand(3, 3, 3, 4), "conv1/bias": rand(4),
                            "conv2/kernel": rand(3, 3, 4, 8)}),
                  {"image": rand(2, 9, 9, 3)}, tmp_path)
    assert ops(graph).count("transpose") == 1, ops(graph)


def test_depthwise_transposed_conv_pooling_batch_norm_resize(tmp_path):
    def fn(w, image):
        dw = tf.nn.depthwise_conv2d(image, w["dw"], [1, 1, 1, 1], "SAME")
        up = tf.nn.conv2d_transpose(image, w["up"], [2, 16, 16, 5], 2, "SAME")
        up_valid = tf.nn.conv2d_transpose(image, w["up"], [2, 17, 17, 5], 2, "VALID")
        bn, _, _ = tf.compat.v1.nn.fused_batch_norm(
            image, w["bn.scale"], w["bn.offset"], w["bn.mean"], w["bn.var"],
            epsilon=1e-3, is_training=False)
        stats = [w[k] for k in ("bn.mean", "bn.var", "bn.offset", "bn.scale")]
        nchw = tf.nn.batch_normalization(tf.transpose(image, [0, 3, 1, 2]),
                                         *[s[:, None, None] for s in stats], 1e-3)
        return {"depthwise": dw, "up_same": up, "up_valid": up_valid, "bn_nchw": nchw,
                "bn_nhwc": tf.nn.batch_normalization(image, *stats, 1e-3),
                "avg": tf.nn.avg_pool2d(image, 3, 2, "SAME"), "bn": bn,
                "resize": tf.image.resize(image, [16, 16], method="nearest"),
                "dilated": tf.nn.conv2d(image, w["k"], 1, "SAME", dilations=2)}

    m = Fn(fn, dw=rand(3, 3, 3, 2), up=rand(3, 3, 5, 3), k=rand(3, 3, 3, 4),
           **{"bn.scale": rand(3), "bn.offset": rand(3), "bn.mean": rand(3),
              "bn.var": rand(3, low=0.5, high=1.5)})
    graph = check(m, {"image": rand(2, 8, 8, 3)}, tmp_path)
    # the NHWC batch norm is the NCHW one between transposes: computed once (cse)
    assert ops(graph).count("batch_norm") == 2
    assert {"bn.mean", "bn.var", "bn.offset", "bn.scale", "dw", "up", "k"} == set(graph.constants)


# -- Keras ---------------------------------------------------------------------------------

def keras_outputs_close(model, inputs, tmp_path):
    """Export a Keras model (inference mode), run it in rml, compare; returns the graph."""
    graph = rml_export.export_tf(lambda **kw: model(*kw.values(), training=False), inputs)
    want = model(*[tf.constant(v) for v in inputs.values()], training=False).numpy()
    assert_outputs_close(run_exported(graph, inputs, tmp_path), {"y": want})
    return graph


def test_keras_transformer_layers(tmp_path):
    keras = pytest.importorskip("keras")
    keras.utils.set_random_seed(1)
    ids = keras.Input((6,), dtype="int64")
    h = keras.layers.Embedding(10, 16)(ids)
    h = keras.layers.LayerNormalization()(h + keras.layers.MultiHeadAttention(2, 8)(h, h))
    h = keras.layers.Dense(32, activation="gelu")(h)
    model = keras.Model(ids, keras.layers.Dense(4)(h))
    graph = keras_outputs_close(model, {"ids": RNG.integers(0, 10, (2, 6))}, tmp_path)
    assert {"gather", "layer_norm", "scaled_dot_product_attention", "gelu"} <= set(ops(graph))


def test_keras_conv_layers_and_unrolled_rnns(tmp_path):
    keras = pytest.importorskip("keras")
    keras.utils.set_random_seed(2)
    layers = keras.layers
    cnn = keras.Sequential([
        keras.Input((8, 8, 3)), layers.Conv2D(4, 3, padding="same", activation="relu"),
        layers.BatchNormalization(), layers.Conv2DTranspose(4, 3, strides=2, padding="same"),
        layers.DepthwiseConv2D(3, padding="same"), layers.AveragePooling2D(2),
        layers.MaxPooling2D(), layers.UpSampling2D(), layers.GlobalAveragePooling2D(),
        layers.Dropout(0.5), layers.Dense(5, activation="softmax")])
    graph = keras_outputs_close(cnn, {"x": rand(2, 8, 8, 3)}, tmp_path / "cnn")
    assert {"batch_norm", "upsample_nearest2d"} <= set(ops(graph))
    assert ops(graph).count("transpose") == 1  # NCHW from the first layer on
    rnn = keras.Sequential([keras.Input((5, 4)), layers.LSTM(6, return_sequences=True,
                                                             unroll=True),
                            layers.GRU(3, unroll=True), layers.Dense(2)])
    keras_outputs_close(rnn, {"x": rand(2, 5, 4)}, tmp_path / "rnn")


# -- errors --------------------------------------------------------------------------------

def test_unsupported_op_names_the_op_and_the_line():
    m = Fn(lambda w, x: tf.linalg.inv(x) + 1.0)
    with pytest.raises(rml_export.ExportError) as err:
        rml_export.export_tf(m, {"x": rand(3, 3)})
    assert err.value.framework == "tf"
    assert err.value.op == "MatrixInverse"
    assert "MatrixInverse" in str(err.value) and "test_tf.py:" in str(err.value)


def test_runtime_shape_is_an_error():
    m = Fn(lambda w, x, n: tf.reshape(x, tf.stack([n, -1])))
    with pytest.raises(rml_export.ExportError, match="Reshape|computed at run time"):
        rml_export.export_tf(m, {"x": rand(4, 3), "n": np.array(2, np.int32)})


def test_nested_outputs_are_refused():
    m = Fn(lambda w, x: {"pair": (x, 2 * x)})
    with pytest.raises(ValueError, match="dict or tuple of tensors"):
        rml_export.export_tf(m, {"x": rand(2)})


def test_a_loop_is_an_error_naming_the_while_op():
    def fn(w, x):
        for _ in tf.range(3):  # autograph: a While op
            x = x * 2.0
        return x

    with pytest.raises(rml_export.ExportError, match="unroll") as err:
        rml_export.export_tf(Fn(fn), {"x": rand(2)})
    assert err.value.op in ("While", "StatelessWhile")
