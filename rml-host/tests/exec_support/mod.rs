//! Graphs built in memory for the executor tests and benches: a layer-norm + GELU
//! chain, an MLP of linears and activations, a 20-node graph of tiny tensors, a
//! small convolutional net;
//! deterministic pseudo-random data; running a graph for fusion on/off and 1–3 threads.

#![allow(dead_code)]

use rml_core::Shape;
use rml_host::graph::{Buffer, DenseTensor, Executor, Graph, MemoryConstants, Options, load_graph};
use serde_json::{Value, json};

/// `n` deterministic values in `[-1, 1)` from `seed`.
pub fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// An F32 tensor of `dims` with values from `seed`.
pub fn tensor(dims: &[usize], seed: u64) -> DenseTensor {
    let n = dims.iter().product();
    DenseTensor {
        shape: Shape::new(dims).unwrap(),
        data: Buffer::F32(values(n, seed)),
    }
}

/// Loads a graph document whose constants are F32 and filled from seeds.
pub fn build(doc: &Value) -> (Graph, MemoryConstants) {
    let mut constants = MemoryConstants::new();
    for (i, c) in doc["constants"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let dims: Vec<usize> = c["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        let t = tensor(&dims, 100 + i as u64);
        constants.insert(c["name"].as_str().unwrap(), &dims, t.data);
    }
    let graph = load_graph(&doc.to_string(), &constants).unwrap();
    (graph, constants)
}

/// A declaration `{name, dtype: F32, shape}`.
pub fn decl(name: &str, shape: Value) -> Value {
    json!({"name": name, "dtype": "F32", "shape": shape})
}

/// A graph document on one input `x [N, width]`: the `constants` declared, the
/// `nodes`, and the F32 `outputs`, each `[N, width]`.
pub fn rows_graph(
    width: usize,
    constants: Vec<Value>,
    nodes: Vec<Value>,
    outputs: &[&str],
) -> Value {
    json!({
        "format": "rml-graph", "version": 1, "weights": "w.safetensors",
        "inputs": [decl("x", json!(["N", width]))],
        "constants": constants, "nodes": nodes,
        "outputs": outputs.iter().map(|o| decl(o, json!(["N", width]))).collect::<Vec<_>>()
    })
}

/// `x [N, width]` through `layers` of layer_norm, then
/// `gelu(x * s + b) + x` (an elementwise run the fusion pass merges).
pub fn norm_gelu_chain(width: usize, layers: usize) -> Value {
    let mut constants = Vec::new();
    let mut nodes = Vec::new();
    let mut x = "x".to_string();
    for l in 0..layers {
        let (g, bb, s, b) = (
            format!("g{l}"),
            format!("bb{l}"),
            format!("s{l}"),
            format!("b{l}"),
        );
        for c in [&g, &bb, &s, &b] {
            constants.push(decl(c, json!([width])));
        }
        let n = |k: &str| format!("{k}{l}");
        nodes.push(json!({"op": "layer_norm", "inputs": [x, g, bb], "outputs": [n("ln")]}));
        nodes.push(json!({"op": "mul", "inputs": [n("ln"), s], "outputs": [n("m")]}));
        nodes.push(json!({"op": "add", "inputs": [n("m"), b], "outputs": [n("a")]}));
        nodes.push(json!({"op": "gelu", "inputs": [n("a")], "outputs": [n("ge")]}));
        nodes.push(json!({"op": "add", "inputs": [n("ge"), x], "outputs": [n("r")]}));
        x = n("r");
    }
    rows_graph(width, constants, nodes, &[&x])
}

/// Causal self-attention of `x [N, width]` on itself (queries, keys and values are
/// `x`: one head of `N` positions), then a linear: attention on the GEMM.
pub fn self_attention(width: usize) -> Value {
    let nodes = vec![
        json!({"op": "scaled_dot_product_attention", "inputs": ["x", "x", "x"],
               "outputs": ["a"], "attrs": {"causal": true}}),
        json!({"op": "linear", "inputs": ["a", "w"], "outputs": ["y"]}),
    ];
    rows_graph(width, vec![decl("w", json!([width, width]))], nodes, &["y"])
}

/// `x [N, width]` through `layers` of `relu(x * s + b) + x`: elementwise only, where
/// fusion saves memory traffic rather than arithmetic.
pub fn bias_relu_chain(width: usize, layers: usize) -> Value {
    let mut constants = Vec::new();
    let mut nodes = Vec::new();
    let mut x = "x".to_string();
    for l in 0..layers {
        let n = |k: &str| format!("{k}{l}");
        constants.push(decl(&n("s"), json!([width])));
        constants.push(decl(&n("b"), json!([width])));
        nodes.push(json!({"op": "mul", "inputs": [x, n("s")], "outputs": [n("m")]}));
        nodes.push(json!({"op": "add", "inputs": [n("m"), n("b")], "outputs": [n("a")]}));
        nodes.push(json!({"op": "relu", "inputs": [n("a")], "outputs": [n("r")]}));
        nodes.push(json!({"op": "add", "inputs": [n("r"), x], "outputs": [n("y")]}));
        x = n("y");
    }
    rows_graph(width, constants, nodes, &[&x])
}

/// `x [N, width]` through `layers` of `relu(linear(x))`, then a `tanh` and a
/// comparison-and-select on the result.
pub fn mlp(width: usize, layers: usize) -> Value {
    let mut constants = Vec::new();
    let mut nodes = Vec::new();
    let mut x = "x".to_string();
    for l in 0..layers {
        let (w, b) = (format!("w{l}"), format!("b{l}"));
        constants.push(decl(&w, json!([width, width])));
        constants.push(decl(&b, json!([width])));
        let (h, a) = (format!("h{l}"), format!("a{l}"));
        nodes.push(json!({"op": "linear", "inputs": [x, w, b], "outputs": [h]}));
        nodes.push(json!({"op": "relu", "inputs": [h], "outputs": [a]}));
        x = a;
    }
    constants.push(decl("zero", json!([])));
    nodes.push(json!({"op": "tanh", "inputs": [x], "outputs": ["t"]}));
    nodes.push(json!({"op": "greater", "inputs": ["t", "zero"], "outputs": ["pos"]}));
    nodes.push(json!({"op": "where", "inputs": ["pos", "t", x], "outputs": ["y"]}));
    json!({
        "format": "rml-graph", "version": 1, "weights": "w.safetensors",
        "inputs": [decl("x", json!(["N", width]))],
        "constants": constants, "nodes": nodes,
        "outputs": [decl("y", json!(["N", width])), {"name": "pos", "dtype": "BOOL", "shape": ["N", width]}]
    })
}

/// 20 nodes on `[N, 4]` tensors: linears, reshapes and elementwise ops, for the
/// executor's per-run overhead.
pub fn tiny20() -> Value {
    let mut nodes = Vec::new();
    let mut constants = vec![decl("w", json!([4, 4])), decl("b", json!([4]))];
    constants.push(decl("c", json!([4])));
    let mut x = "x".to_string();
    for l in 0..4 {
        let n = |k: &str| format!("{k}{l}");
        nodes.push(json!({"op": "linear", "inputs": [x, "w", "b"], "outputs": [n("h")]}));
        nodes.push(json!({"op": "reshape", "inputs": [n("h")], "outputs": [n("r")], "attrs": {"shape": [0, 2, 2]}}));
        nodes.push(json!({"op": "flatten", "inputs": [n("r")], "outputs": [n("f")]}));
        nodes.push(json!({"op": "add", "inputs": [n("f"), "c"], "outputs": [n("a")]}));
        nodes.push(json!({"op": "tanh", "inputs": [n("a")], "outputs": [n("t")]}));
        x = n("t");
    }
    rows_graph(4, constants, nodes, &[&x])
}

/// A small convolutional net on `x [N, 4, 8, 8]`: conv2d, group_norm, relu,
/// max_pool2d, conv_transpose2d (stride 2), upsample_nearest2d, global_avg_pool2d,
/// reduce_mean, to `y [N, 4]`.
pub fn conv_net() -> Value {
    let node = |op: &str, inputs: &[&str], out: &str, attrs: Value| json!({"op": op, "inputs": inputs, "outputs": [out], "attrs": attrs});
    let pad1 = json!([[1, 1], [1, 1]]);
    json!({
        "format": "rml-graph", "version": 1, "weights": "w.safetensors",
        "inputs": [decl("x", json!(["N", 4, 8, 8]))],
        "constants": [
            decl("w1", json!([8, 4, 3, 3])), decl("b1", json!([8])),
            decl("g", json!([8])), decl("b", json!([8])),
            decl("w2", json!([8, 4, 4, 4])), decl("b2", json!([4])),
        ],
        "nodes": [
            node("conv2d", &["x", "w1", "b1"], "c", json!({"padding": pad1})),
            node("group_norm", &["c", "g", "b"], "n", json!({"num_groups": 2})),
            node("relu", &["n"], "r", json!({})),
            node("max_pool2d", &["r"], "p", json!({"kernel": [2, 2]})),
            node("conv_transpose2d", &["p", "w2", "b2"], "t",
                 json!({"stride": [2, 2], "padding": pad1})),
            node("upsample_nearest2d", &["t"], "u", json!({"scale": [2, 2]})),
            node("global_avg_pool2d", &["u"], "a", json!({})),
            node("reduce_mean", &["a"], "y", json!({"axes": [2, 3]})),
        ],
        "outputs": [decl("y", json!(["N", 4]))]
    })
}

/// Float outputs of `graph` on the executor for fusion on/off and 1–3 threads,
/// asserted bitwise equal to each other; returns one of them.
pub fn exec_all(
    graph: &Graph,
    constants: &MemoryConstants,
    inputs: &[DenseTensor],
) -> Vec<Vec<f32>> {
    let mut base: Option<Vec<DenseTensor>> = None;
    for fusion in [true, false] {
        for threads in [1, 2, 3] {
            let options = Options {
                threads,
                fusion,
                profile: false,
            };
            let mut e = Executor::new(graph.clone(), constants, options).unwrap();
            // Split every step, however small, so the chunk boundaries are exercised.
            e.set_min_chunk_ps(0);
            let got = e.run(inputs).unwrap().to_vec();
            match &base {
                Some(b) => assert_eq!(&got, b, "fusion {fusion}, {threads} threads"),
                None => base = Some(got),
            }
        }
    }
    base.unwrap().into_iter().map(|t| f32s(&t.data)).collect()
}

/// The values of an F32 buffer (panics on another dtype).
pub fn f32s(b: &Buffer) -> Vec<f32> {
    match b {
        Buffer::F32(v) => v.clone(),
        _ => panic!("F32 outputs only"),
    }
}

/// An Elman RNN unrolled over `steps` as exporters write it: `x [N, steps·k]` is
/// reshaped to `[N, steps, k]`, each step reads `squeeze(slice(x, t))` through a
/// shared-weight input linear (which the executor hoists) plus a recurrent linear
/// and `tanh`; the states are concatenated, transposed and split in two.
pub fn unrolled_rnn(k: usize, h: usize, steps: usize) -> Value {
    let constants = vec![
        decl("w_ih", json!([h, k])),
        decl("b_ih", json!([h])),
        decl("w_hh", json!([h, h])),
    ];
    let mut nodes = vec![
        json!({"op": "reshape", "inputs": ["x"], "outputs": ["xs"], "attrs": {"shape": [0, steps, k]}}),
    ];
    let mut states = Vec::new();
    for t in 0..steps {
        let n = |s: &str| format!("{s}{t}");
        nodes.push(
            json!({"op": "slice", "inputs": ["xs"], "outputs": [n("sl")],
            "attrs": {"axes": [1], "starts": [t], "ends": [t + 1]}}),
        );
        nodes.push(json!({"op": "squeeze", "inputs": [n("sl")], "outputs": [n("xt")], "attrs": {"axes": [-2]}}));
        nodes.push(
            json!({"op": "linear", "inputs": [n("xt"), "w_ih", "b_ih"], "outputs": [n("u")]}),
        );
        let pre = if t == 0 {
            n("u")
        } else {
            nodes.push(json!({"op": "linear", "inputs": [format!("h{}", t - 1), "w_hh"], "outputs": [n("r")]}));
            nodes.push(json!({"op": "add", "inputs": [n("u"), n("r")], "outputs": [n("p")]}));
            n("p")
        };
        nodes.push(json!({"op": "tanh", "inputs": [pre], "outputs": [n("h")]}));
        states.push(n("h"));
    }
    nodes.push(json!({"op": "concat", "inputs": states, "outputs": ["hs"], "attrs": {"axis": -1}}));
    nodes.push(json!({"op": "reshape", "inputs": ["hs"], "outputs": ["hs3"], "attrs": {"shape": [0, steps, h]}}));
    nodes.push(json!({"op": "transpose", "inputs": ["hs3"], "outputs": ["ht"], "attrs": {"perm": [0, 2, 1]}}));
    nodes.push(json!({"op": "split", "inputs": ["ht"], "outputs": ["lo", "hi"], "attrs": {"axis": 1, "sizes": [h / 2, h - h / 2]}}));
    json!({
        "format": "rml-graph", "version": 1, "weights": "w.safetensors",
        "inputs": [decl("x", json!(["N", steps * k]))],
        "constants": constants, "nodes": nodes,
        "outputs": [decl("lo", json!(["N", h / 2, steps])), decl("hi", json!(["N", h - h / 2, steps]))]
    })
}

/// Named batch-norm parameters: mean, variance, scale, shift.
pub type BnParams = [(&'static str, Vec<f32>); 4];

/// Batch-norm parameters for `c` channels from `seed`: mean, variance (positive),
/// scale, shift.
pub fn bn_params(c: usize, seed: u64) -> BnParams {
    let var = values(c, seed + 1).iter().map(|v| v + 1.5).collect();
    [
        ("mean", values(c, seed)),
        ("var", var),
        (
            "gamma",
            values(c, seed + 2).iter().map(|v| 2.0 * v).collect(),
        ),
        ("beta", values(c, seed + 3)),
    ]
}

/// Loads a graph of one convolution node `op` (`attrs`) on `x [x_dims]` with weight
/// `w [w_dims]` and an optional bias, output dims `out`; with `bn = Some((params,
/// ε))` followed by `batch_norm(params, ε) → relu`. Returns it with its constants.
pub fn conv_chain(
    (op, attrs): (&str, Value),
    (x_dims, out): (&[usize], &[usize]),
    (w_dims, w, bias): (&[usize], &[f32], Option<&[f32]>),
    bn: Option<(&BnParams, f32)>,
) -> (Graph, MemoryConstants) {
    let mut constants = MemoryConstants::new();
    constants.insert("w", w_dims, Buffer::F32(w.to_vec()));
    let mut decls = vec![decl("w", json!(w_dims))];
    let mut inputs = vec!["x", "w"];
    if let Some(b) = bias {
        constants.insert("b", &[b.len()], Buffer::F32(b.to_vec()));
        decls.push(decl("b", json!([b.len()])));
        inputs.push("b");
    }
    let mut nodes = vec![json!({"op": op, "inputs": inputs, "outputs": ["y"], "attrs": attrs})];
    let mut output = "y";
    if let Some((params, epsilon)) = bn {
        for (name, v) in params {
            constants.insert(name, &[v.len()], Buffer::F32(v.clone()));
            decls.push(decl(name, json!([v.len()])));
        }
        nodes.push(
            json!({"op": "batch_norm", "inputs": ["y", "mean", "var", "gamma", "beta"],
                          "outputs": ["n"], "attrs": {"epsilon": epsilon}}),
        );
        nodes.push(json!({"op": "relu", "inputs": ["n"], "outputs": ["z"]}));
        output = "z";
    }
    let text = json!({
        "format": "rml-graph", "version": 1, "weights": "w.safetensors",
        "inputs": [decl("x", json!(x_dims))],
        "constants": decls,
        "nodes": nodes,
        "outputs": [decl(output, json!(out))]
    })
    .to_string();
    (load_graph(&text, &constants).unwrap(), constants)
}

/// Runs a convolution → `batch_norm(params, ε)` → relu graph with fusion on and off
/// (the batch norm folded into the convolution either way), 1 thread, checks that
/// no batch-norm step is left, and checks each
/// output against `relu((v − mean)·s + β)`, `s = γ/√(var + ε)`, where `(v, m)` in
/// `direct` are the exact convolution and its `Σ|x·w| + |b|`: within the GEMM's
/// bound for `terms` rounded operations scaled by `s`, plus the folded weight's,
/// bias's (or the batch norm's) and the result's roundings. `plane` is the output
/// plane size.
pub fn assert_bn_folded(
    (graph, constants, x): (&Graph, &MemoryConstants, &DenseTensor),
    direct: &[(f64, f64)],
    (params, epsilon): (&BnParams, f32),
    [plane, terms]: [usize; 2],
) {
    let u = f64::from(f32::EPSILON) / 2.0;
    let gamma_k = terms as f64 * u / (1.0 - terms as f64 * u);
    let [mean, var, gamma, beta] = params.each_ref().map(|(_, v)| v);
    for fusion in [true, false] {
        let options = Options {
            threads: 1,
            fusion,
            profile: false,
        };
        let mut e = Executor::new(graph.clone(), constants, options).unwrap();
        let folded = !e.steps().iter().any(|s| s.label.contains("batch_norm"));
        assert!(folded, "the batch norm is folded (fusion {fusion})");
        let got = f32s(&e.run(std::slice::from_ref(x)).unwrap()[0].data);
        assert_eq!(got.len(), direct.len());
        for (i, (&g, &(v, mag))) in got.iter().zip(direct).enumerate() {
            let o = i / plane % mean.len();
            let s = f64::from(gamma[o]) / (f64::from(var[o]) + f64::from(epsilon)).sqrt();
            let shift = f64::from(beta[o]) - f64::from(mean[o]) * s;
            let want = (v * s + shift).max(0.0);
            let tol = (gamma_k + 3.0 * u) * (s.abs() * mag + shift.abs())
                + f64::from(f32::EPSILON) * want.abs();
            assert!(
                (f64::from(g) - want).abs() <= tol,
                "fusion {fusion} element {i}: {g} vs {want} (bound {tol})"
            );
        }
    }
}

/// Checks `got` = `silu(conv) + residual` element by element, where `(v, m)` in
/// `direct` are the exact convolution and its `Σ|x·w| + |b|`: within the GEMM's bound
/// for `terms` rounded operations carried through SiLU (slope at most 1.1), plus the
/// SiLU kernel's bound and the add's rounding. `n` (images) names the case.
pub fn assert_silu_residual(
    got: &[f32],
    direct: &[(f64, f64)],
    residual: &[f32],
    terms: usize,
    n: usize,
) {
    let u = f64::from(f32::EPSILON) / 2.0;
    let gamma = terms as f64 * u / (1.0 - terms as f64 * u);
    assert_eq!(got.len(), direct.len());
    for (i, ((&g, &(v, mag)), &r)) in got.iter().zip(direct).zip(residual).enumerate() {
        let silu = v / (1.0 + (-v).exp());
        let want = silu + f64::from(r);
        let conv = gamma * mag + f64::from(f32::EPSILON) * v.abs();
        let tol = 1.1 * conv
            + (rml_kernels::math::SILU_MAX_ULP + 1.0) * f64::from(f32::EPSILON) * silu.abs()
            + f64::from(f32::EPSILON) * want.abs();
        assert!(
            (f64::from(g) - want).abs() <= tol,
            "{n} images, element {i}: {g} vs {want} (bound {tol})"
        );
    }
}
