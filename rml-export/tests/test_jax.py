"""The JAX route: small functions per primitive family, exported, run through rml
(``rml-host run``) and compared with JAX's own output."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = jax.numpy

import rml_export  # noqa: E402
from rml_export import ExportError  # noqa: E402
from rml_runner import assert_outputs_close, run_exported, run_graph  # noqa: E402

RNG = np.random.default_rng(7)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def reference(fn, params, inputs) -> dict:
    """JAX's own outputs, named as the exporter names them."""
    out = fn(params, **inputs)
    if isinstance(out, dict):
        return {k: np.asarray(v) for k, v in out.items()}
    if isinstance(out, (tuple, list)):
        return {f"y{i}": np.asarray(v) for i, v in enumerate(out)}
    return {"y": np.asarray(out)}


def check(tmp_path, fn, params, inputs, rtol=1e-4, atol=1e-4):
    """Export, run in rml, compare with JAX; returns the graph for op assertions."""
    graph = rml_export.export_jax(fn, params, inputs)
    got = run_exported(graph, inputs, tmp_path)
    want = reference(fn, params, inputs)
    for name in want:
        if want[name].dtype.kind in "iu":
            want[name] = want[name].astype(np.int64)
    assert_outputs_close(got, want, rtol=rtol, atol=atol)
    return graph


def ops(graph) -> list[str]:
    return [n.op for n in graph.nodes]


def test_mlp_becomes_linear_relu_with_named_weights(tmp_path):
    params = {"fc1": {"weight": rand(8, 5), "bias": rand(8)},
              "fc2": {"weight": rand(3, 8), "bias": rand(3)}}

    def mlp(p, x):
        h = jax.nn.relu(x @ p["fc1"]["weight"].T + p["fc1"]["bias"])
        return h @ p["fc2"]["weight"].T + p["fc2"]["bias"]

    graph = check(tmp_path, mlp, params, {"x": rand(2, 5)})
    assert ops(graph) == ["linear", "relu", "linear"]
    assert set(graph.constants) == {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}


def test_elementwise_family(tmp_path):
    def f(p, x, z):
        a = jnp.exp(x) + jnp.log(jnp.abs(x) + 1.0) - jnp.tanh(z) * jax.nn.sigmoid(x)
        b = jax.lax.rsqrt(jnp.abs(z) + 0.5) / jnp.sqrt(jnp.abs(x) + 1.0)
        c = jnp.maximum(x, z) - jnp.minimum(x, 0.3) + x**3 + jax.lax.integer_pow(z, 2)
        d = jax.scipy.special.erf(x) + jnp.sin(z) * jnp.cos(x) + jnp.log1p(jnp.abs(z))
        e = jnp.where(x > z, x, -z) + jnp.clip(z, -0.5, 0.5) + jnp.expm1(x * 0.1)
        return {"a": a + jax.lax.stop_gradient(b), "b": c * d - e, "ge": x >= z}

    check(tmp_path, f, {}, {"x": rand(3, 4), "z": rand(3, 4)})


def test_reductions_and_casts(tmp_path):
    def f(p, x):
        s = x.sum(axis=1) + x.max(axis=1) - x.min(axis=1) + x.mean(axis=1)
        i = jnp.argmax(x, axis=-1)
        cast = (x > 0).astype(jnp.float32).sum(axis=0)
        return s, i, cast, jnp.cumsum(x, axis=1), jnp.prod(x[:, :3], axis=1)

    check(tmp_path, f, {}, {"x": rand(4, 6)})


def test_layout_family(tmp_path):
    def f(p, x, w):
        a = jnp.transpose(x, (2, 0, 1)).reshape(4, 6)
        b = jnp.concatenate([x[:, :1], x[:, 1:] * 2.0], axis=1)
        c = jnp.pad(x, ((0, 0), (1, 2), (0, 0)), constant_values=0.5)
        d = jax.lax.dynamic_slice(x, (0, 1, 1), (2, 2, 2))
        e = jnp.expand_dims(w, 0) + jnp.squeeze(x[:, :1], 1)[:, None, :]
        g = jnp.broadcast_to(w[:, :1], (3, 4)) + x[0, 2]
        return a, b, c, d, e, g, jnp.flip(x, axis=1), x[:, ::2]

    check(tmp_path, f, {}, {"x": rand(2, 3, 4), "w": rand(3, 4)})


def test_dot_general_layouts(tmp_path):
    params = {"w": rand(4, 6), "v": rand(6)}

    def f(p, x, q, k):
        lin = x @ p["w"]                                   # contracts the weight's dim 0
        vec = x @ p["w"] @ p["v"]                          # matrix @ vector
        att = jnp.einsum("bhsd,bhtd->bhst", q, k)          # batched, transposed rhs
        mix = jnp.einsum("bshd,bthd->bhst", q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3))
        outer = jnp.einsum("bi,bj->bij", x, x)
        return lin, vec, att, mix, outer, jnp.dot(x.T, x)

    check(tmp_path, f, params, {"x": rand(3, 4), "q": rand(2, 2, 3, 5), "k": rand(2, 2, 4, 5)})


def test_conv2d_nhwc_and_nchw(tmp_path):
    params = {"k_hwio": rand(3, 3, 2, 4), "k_oihw": rand(4, 2, 3, 3), "b": rand(4)}

    def f(p, x):
        nhwc = jax.lax.conv_general_dilated(
            jnp.transpose(x, (0, 2, 3, 1)), p["k_hwio"], (2, 1), ((1, 1), (0, 2)),
            rhs_dilation=(1, 2), dimension_numbers=("NHWC", "HWIO", "NHWC")) + p["b"]
        nchw = jax.lax.conv_general_dilated(x, p["k_oihw"], (1, 1), "SAME")
        return nhwc, nchw

    check(tmp_path, f, params, {"x": rand(2, 2, 7, 8)})


def test_grouped_conv1d(tmp_path):
    params = {"k": rand(4, 1, 3)}

    def f(p, x):
        return jax.lax.conv_general_dilated(x, p["k"], (2,), ((1, 1),),
                                            feature_group_count=4)

    graph = check(tmp_path, f, params, {"x": rand(1, 4, 9)})
    assert "conv1d" in ops(graph)


@pytest.mark.parametrize("padding", ["SAME", "VALID", ((1, 2), (0, 1))])
def test_conv_transpose(tmp_path, padding):
    params = {"k": rand(3, 3, 2, 5)}

    def f(p, x):
        return jax.lax.conv_transpose(x, p["k"], (2, 2), padding,
                                      dimension_numbers=("NHWC", "HWIO", "NHWC"))

    graph = check(tmp_path, f, params, {"x": rand(1, 4, 5, 2)})
    assert "conv_transpose2d" in ops(graph)


def test_embedding_lookups(tmp_path):
    params = {"emb": rand(10, 4)}

    def f(p, ids):
        return p["emb"][ids] + jnp.take(p["emb"], ids, axis=0)

    graph = check(tmp_path, f, params, {"ids": np.array([[1, 9, 0], [3, 3, 2]], np.int64)})
    assert ops(graph).count("gather") == 2


def test_takes_along_other_axes(tmp_path):
    def f(p, x, ids):
        return x[:, 2], x[:, ids], jnp.take(x, ids, axis=2), x[:, jnp.array([0, 3])]

    check(tmp_path, f, {}, {"x": rand(2, 4, 5), "ids": np.array([3, 1, 1], np.int64)})


def test_top_k_routing(tmp_path):
    params = {"router": rand(4, 6), "experts": rand(4, 5, 6)}

    def f(p, x):
        logits = x @ p["router"].T                           # [T, 4 experts]
        weights, chosen = jax.lax.top_k(logits, 2)
        gates = jax.nn.softmax(weights, axis=-1)
        mask = jax.nn.one_hot(chosen, 4) * gates[..., None]   # [T, 2, 4]
        outs = jnp.einsum("td,eod->teo", x, p["experts"])   # [T, 4, 5]
        return jnp.einsum("tke,teo->to", mask, outs), chosen, jax.lax.top_k(x, 1)[0]

    check(tmp_path, f, params, {"x": rand(7, 6)})


def test_one_hot_and_iota(tmp_path):
    def f(p, ids, x):
        onehot = jax.nn.one_hot(ids, 5)
        pos = jnp.arange(x.shape[1], dtype=jnp.float32)
        return onehot * 2.0, x + pos

    check(tmp_path, f, {}, {"ids": np.array([0, 4, 2], np.int64), "x": rand(3, 4)})


def test_scan_fori_and_while_unroll(tmp_path):
    params = {"a": rand(4), "w": rand(4, 4)}

    def f(p, x, h0):
        def step(h, xt):
            h = jnp.tanh(xt @ p["w"] + h * p["a"])
            return h, h * 2.0

        h, ys = jax.lax.scan(step, h0, jnp.swapaxes(x, 0, 1))
        back = jax.lax.scan(step, h0, jnp.swapaxes(x, 0, 1), reverse=True)[1]
        loop = jax.lax.fori_loop(0, 3, lambda i, v: v * 0.5 + i, h)
        count = jax.lax.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, c[1] + 1.0),
                                   (0, h0))[1]
        return h, ys, back, loop, count

    check(tmp_path, f, params, {"x": rand(2, 5, 4), "h0": rand(2, 4)})


def test_nested_jit_custom_jvp_and_remat(tmp_path):
    @jax.jit
    def inner(x):
        return jax.nn.silu(x) + jax.nn.gelu(x, approximate=True)

    @jax.checkpoint
    def block(x):
        return inner(x) * 2.0

    @jax.custom_vjp
    def doubled_sin(x):
        return jnp.sin(x) * 2.0

    doubled_sin.defvjp(lambda x: (doubled_sin(x), x), lambda x, g: (2.0 * g * jnp.cos(x),))

    def f(p, x):
        return block(x) + jax.nn.softplus(x) + jax.nn.relu6(x) + doubled_sin(x)

    check(tmp_path, f, {}, {"x": rand(3, 5) * 3})


def test_softmax_layer_norm_and_gelu_become_single_ops(tmp_path):
    params = {"g": rand(6), "b": rand(6)}

    def f(p, x):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        h = (x - mean) / jnp.sqrt(var + 1e-5) * p["g"] + p["b"]
        return jax.nn.softmax(jax.nn.gelu(h, approximate=False), axis=-1)

    graph = check(tmp_path, f, params, {"x": rand(2, 3, 6)})
    assert ops(graph) == ["layer_norm", "gelu", "softmax"]


def test_attention_becomes_one_op(tmp_path):
    def f(p, q, k, v, keep):
        scores = jnp.einsum("bhsd,bhtd->bhst", q, k) * 0.25
        causal = jnp.tril(jnp.ones((4, 4), bool))
        a = jax.nn.softmax(jnp.where(causal, scores, -jnp.inf), axis=-1) @ v
        b = jax.nn.softmax(jnp.where(keep[:, None, None, :], scores, -jnp.inf), axis=-1) @ v
        return a, b

    keep = np.array([[True, True, False, True], [True, False, True, True]])
    graph = check(tmp_path, f, {}, {"q": rand(2, 2, 4, 8), "k": rand(2, 2, 4, 8),
                                    "v": rand(2, 2, 4, 8), "keep": keep})
    attention = [n for n in graph.nodes if n.op == "scaled_dot_product_attention"]
    assert [n.attrs.get("causal", False) for n in attention] == [True, False]
    assert ops(graph).count("softmax") == 0


def test_conv_norms_and_upsampling_become_single_ops(tmp_path):
    params = {"w": rand(4, 3, 3, 3), "b": rand(4), "mean": rand(4), "var": rand(4) ** 2,
              "g": rand(4), "beta": rand(4)}

    def f(p, x):
        y = jax.lax.conv_general_dilated(x, p["w"], (1, 1), "SAME") + p["b"][:, None, None]
        scale = p["g"] * jax.lax.rsqrt(p["var"] + 1e-5)
        y = (y - p["mean"][:, None, None]) * scale[:, None, None] + p["beta"][:, None, None]
        n, c, h, w = y.shape
        grouped = y.reshape(n, 2, -1)
        mean = grouped.mean(-1, keepdims=True)
        var = jnp.square(grouped - mean).mean(-1, keepdims=True)
        y = ((grouped - mean) * jax.lax.rsqrt(var + 1e-5)).reshape(n, c, h, w)
        y = jax.nn.silu(y * p["g"][:, None, None] + p["beta"][:, None, None])
        return jnp.repeat(jnp.repeat(y, 2, axis=2), 2, axis=3)

    graph = check(tmp_path, f, params, {"x": rand(2, 3, 5, 6)})
    assert ops(graph) == ["conv2d", "batch_norm", "group_norm", "silu", "upsample_nearest2d"]


def test_symbolic_batch_runs_at_other_batch_sizes(tmp_path):
    params = {"w": rand(6, 4), "emb": rand(10, 4), "g": rand(4), "b": rand(4)}

    def f(p, x, ids):
        h = x @ p["w"] + p["emb"][ids]                        # [N, S, 4]
        n, s, d = h.shape
        heads = h.reshape(n, s, 2, d // 2).transpose(0, 2, 1, 3)
        att = jax.nn.softmax(heads @ heads.transpose(0, 1, 3, 2), axis=-1) @ heads
        h = att.transpose(0, 2, 1, 3).reshape(n, s, d)
        mean = h.mean(-1, keepdims=True)
        var = jnp.square(h - mean).mean(-1, keepdims=True)
        h = (h - mean) * jax.lax.rsqrt(var + 1e-5) * p["g"] + p["b"]
        return {"h": h, "pooled": h.reshape(n * s, d).sum(0)}

    inputs = {"x": rand(2, 3, 6), "ids": RNG.integers(0, 10, (2, 3))}
    graph = rml_export.export_jax(f, params, inputs, symbols={"x": {0: "N"}, "ids": {0: "N"}})
    assert graph.types["x"].shape == ["N", 3, 6]
    assert graph.types["h"].shape == ["N", 3, 4]
    path = rml_export.save(graph, tmp_path / "graph.json")
    for batch in (2, 5):
        batch_inputs = {"x": rand(batch, 3, 6), "ids": RNG.integers(0, 10, (batch, 3))}
        got = run_graph(path, batch_inputs, tmp_path / f"b{batch}")
        assert_outputs_close(got, reference(f, params, batch_inputs))


def test_bad_symbols_are_refused():
    with pytest.raises(ExportError) as err:
        rml_export.export_jax(lambda p, x: x, {}, {"x": rand(2)}, symbols={"x": {3: "N"}})
    assert "no axis 3" in str(err.value)
    with pytest.raises(ExportError) as err:  # a symbolic size used as a number
        rml_export.export_jax(lambda p, x: x.mean(0), {}, {"x": rand(2, 3)},
                              symbols={"x": {0: "N"}})
    assert err.value.op == "dim_as_value"


def test_unsupported_primitive_names_it():
    with pytest.raises(ExportError) as err:
        rml_export.export_jax(lambda p, x: jnp.sort(x), {}, {"x": rand(4)})
    assert err.value.framework == "jax"
    assert err.value.op == "sort"
    assert "sort" in str(err.value)
    assert err.value.location and "test_jax.py" in err.value.location


def test_input_dependent_loop_is_refused():
    def f(p, x):
        return jax.lax.while_loop(lambda v: v.sum() < 10.0, lambda v: v * 2.0, x)

    with pytest.raises(ExportError) as err:
        rml_export.export_jax(f, {}, {"x": rand(3) + 2})
    assert err.value.op == "while"
