//! The executor's rml-kernels paths against the reference interpreter: packed GEMM
//! linears within a rounding bound derived from K, vector transcendentals in fused
//! programs within the kernels' documented ULP bounds, and the layer-norm /
//! RMS-norm / softmax row kernels; fusion on/off and 1–3 threads agree bit for bit.

mod exec_support;

use rml_core::Shape;
use rml_host::graph::{
    Buffer, DenseTensor, Executor, Graph, MemoryConstants, Options, load_graph, run,
};
use rml_kernels::math;
use serde_json::{Value, json};

/// Unit roundoff of f32 (half an ulp of 1): each multiply-add of a dot product
/// rounds by at most this relative amount.
const UNIT_ROUNDOFF: f64 = f32::EPSILON as f64 / 2.0;

/// Both the executor and the interpreter are within `γ_(K+1) · Σ|x·w| + |b|` of the
/// exact value (K products and the bias add), so they differ by at most twice that;
/// this factor is that 2.
const BOTH_SIDES: f64 = 2.0;

/// The interpreter rounds an f64 result to f32 (half an ulp) and the kernel's bound
/// is against the exact value: one extra ulp covers both.
const REFERENCE_ULP: f64 = 1.0;

/// Float outputs of `graph` on the executor for fusion on/off and 1–3 threads,
/// asserted bitwise equal to each other; returns one of them.
fn exec_all(graph: &Graph, constants: &MemoryConstants, inputs: &[DenseTensor]) -> Vec<Vec<f32>> {
    let mut base: Option<Vec<DenseTensor>> = None;
    for fusion in [true, false] {
        for threads in [1, 2, 3] {
            let options = Options {
                threads,
                fusion,
                profile: false,
            };
            let mut e = Executor::new(graph.clone(), constants, options).unwrap();
            let got = e.run(inputs).unwrap().to_vec();
            match &base {
                Some(b) => assert_eq!(&got, b, "fusion {fusion}, {threads} threads"),
                None => base = Some(got),
            }
        }
    }
    base.unwrap().into_iter().map(|t| f32s(&t.data)).collect()
}

fn f32s(b: &Buffer) -> Vec<f32> {
    match b {
        Buffer::F32(v) => v.clone(),
        _ => panic!("F32 outputs only"),
    }
}

fn decl(name: &str, shape: Value) -> Value {
    json!({"name": name, "dtype": "F32", "shape": shape})
}

/// One-op graphs `y = op(x)` for `x [N, width]`.
fn graph(nodes: Vec<Value>, constants: Vec<Value>, width: usize, outputs: &[&str]) -> String {
    json!({
        "format": "rml-graph", "version": 1, "weights": "w.safetensors",
        "inputs": [decl("x", json!(["N", width]))],
        "constants": constants, "nodes": nodes,
        "outputs": outputs.iter().map(|o| decl(o, json!(["N", width]))).collect::<Vec<_>>()
    })
    .to_string()
}

#[test]
fn packed_linears_match_the_interpreter_within_a_k_bound() {
    // K below, at and above the GEMM's K block (256); M not a multiple of the
    // 16-wide panel; 37 rows (not a multiple of the 6-row tile) and 20 rows (three
    // threads get 7-row blocks, the GEMM's small-M path, one thread all 20).
    let m = 40;
    for (rows, k) in [(37, 3), (37, 256), (37, 600), (20, 300)] {
        for op in ["linear", "matmul"] {
            let w_dims = if op == "linear" { [m, k] } else { [k, m] };
            let w = exec_support::values(m * k, k as u64);
            let b = exec_support::values(m, 9);
            let mut constants = MemoryConstants::new();
            constants.insert("w", &w_dims, Buffer::F32(w.clone()));
            let mut decls = vec![decl("w", json!(w_dims))];
            let mut inputs = vec!["x", "w"];
            if op == "linear" {
                constants.insert("b", &[m], Buffer::F32(b.clone()));
                decls.push(decl("b", json!([m])));
                inputs.push("b");
            }
            let nodes = vec![json!({"op": op, "inputs": inputs, "outputs": ["y"]})];
            let text = json!({
                "format": "rml-graph", "version": 1, "weights": "w.safetensors",
                "inputs": [decl("x", json!(["N", k]))],
                "constants": decls, "nodes": nodes,
                "outputs": [decl("y", json!(["N", m]))]
            })
            .to_string();
            let g = load_graph(&text, &constants).unwrap();
            let x = exec_support::tensor(&[rows, k], 3);
            let xs = f32s(&x.data);
            let want = f32s(&run(&g, &constants, std::slice::from_ref(&x)).unwrap()[0].data);
            let got = &exec_all(&g, &constants, &[x])[0];
            let gamma = (k + 1) as f64 * UNIT_ROUNDOFF / (1.0 - (k + 1) as f64 * UNIT_ROUNDOFF);
            for r in 0..rows {
                for j in 0..m {
                    let weight = |kk: usize| {
                        if op == "linear" {
                            w[j * k + kk]
                        } else {
                            w[kk * m + j]
                        }
                    };
                    let mut magnitude: f64 = (0..k)
                        .map(|kk| f64::from((xs[r * k + kk] * weight(kk)).abs()))
                        .sum();
                    if op == "linear" {
                        magnitude += f64::from(b[j].abs());
                    }
                    let tol = BOTH_SIDES * gamma * magnitude;
                    let (g, e) = (got[r * m + j], want[r * m + j]);
                    let err = f64::from((g - e).abs());
                    assert!(
                        err <= tol,
                        "{op} K={k} [{r}, {j}]: {g} vs {e} (bound {tol})"
                    );
                }
            }
        }
    }
}

/// The distance in ulps of `got` from `want` (at `want`'s spacing).
fn ulps(got: f32, want: f32) -> f64 {
    if got == want || (got.is_nan() && want.is_nan()) {
        return 0.0;
    }
    let spacing = f64::from(want.abs().max(f32::MIN_POSITIVE)) * f64::from(f32::EPSILON);
    f64::from(got - want).abs() / spacing
}

/// GELU (tanh form) in f64 as `x · sigmoid(2u)`. rml-core's reference evaluates
/// `x/2 · (1 + tanh(u))`, which cancels for large negative `x` (about 1e-3 relative
/// error at x = -6.7), so the kernel's tail bound is checked against this instead.
fn gelu_tanh_reference(x: f32) -> f32 {
    let x = f64::from(x);
    let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
    (x / (1.0 + (-2.0 * u).exp())) as f32
}

#[test]
fn fused_transcendentals_stay_within_the_kernel_ulp_bounds() {
    let width = 67;
    let ops: [(&str, f64); 8] = [
        ("exp", math::EXP_MAX_ULP),
        ("tanh", math::TANH_MAX_ULP),
        ("sigmoid", math::SIGMOID_MAX_ULP),
        ("erf", math::ERF_MAX_ULP),
        ("gelu", math::GELU_MAX_ULP),
        ("gelu_tanh", math::GELU_TANH_MAX_ULP),
        ("silu", math::SILU_MAX_ULP),
        ("softplus", math::SOFTPLUS_MAX_ULP),
    ];
    // x spans [-8, 8): scale the [-1, 1) test values by a constant.
    let mut constants = MemoryConstants::new();
    constants.insert("eight", &[], Buffer::F32(vec![8.0]));
    let mut nodes = vec![json!({"op": "mul", "inputs": ["x", "eight"], "outputs": ["s"]})];
    let outs: Vec<String> = ops.iter().map(|(op, _)| format!("y_{op}")).collect();
    for ((op, _), out) in ops.iter().zip(&outs) {
        nodes.push(json!({"op": op, "inputs": ["s"], "outputs": [out]}));
    }
    let names: Vec<&str> = outs.iter().map(String::as_str).collect();
    let text = graph(nodes, vec![decl("eight", json!([]))], width, &names);
    let g = load_graph(&text, &constants).unwrap();
    let x = exec_support::tensor(&[50, width], 11);
    let xs = f32s(&x.data);
    let want = run(&g, &constants, std::slice::from_ref(&x)).unwrap();
    let got = exec_all(&g, &constants, &[x]);
    for (((op, bound), w), got) in ops.iter().zip(want).zip(got) {
        for ((&a, &b), &xv) in got.iter().zip(&f32s(&w.data)).zip(&xs) {
            let b = if *op == "gelu_tanh" {
                gelu_tanh_reference(8.0 * xv)
            } else {
                b
            };
            let bound = if *op == "gelu_tanh" && 8.0 * xv < math::GELU_TANH_TAIL_X {
                math::GELU_TANH_TAIL_MAX_ULP
            } else {
                *bound
            };
            let ok = ulps(a, b) <= bound + REFERENCE_ULP
                || f64::from((a - b).abs()) <= math::MATH_SUBNORMAL_ABS;
            assert!(ok, "{op}({}): {a} vs {b}", 8.0 * xv);
        }
    }
}

#[test]
fn norm_and_softmax_row_kernels_match_the_interpreter() {
    let width = 67;
    let mut constants = MemoryConstants::new();
    for (i, c) in ["g", "b"].iter().enumerate() {
        constants.insert(
            c,
            &[width],
            Buffer::F32(exec_support::values(width, 20 + i as u64)),
        );
    }
    let nodes = vec![
        json!({"op": "layer_norm", "inputs": ["x", "g", "b"], "outputs": ["ln"]}),
        json!({"op": "layer_norm", "inputs": ["x"], "outputs": ["ln_plain"]}),
        json!({"op": "rms_norm", "inputs": ["x", "g"], "outputs": ["rms"]}),
        json!({"op": "softmax", "inputs": ["x"], "outputs": ["sm"]}),
    ];
    let names = ["ln", "ln_plain", "rms", "sm"];
    let decls = vec![decl("g", json!([width])), decl("b", json!([width]))];
    let g = load_graph(&graph(nodes, decls, width, &names), &constants).unwrap();
    let x = DenseTensor {
        shape: Shape::new(&[33, width]).unwrap(),
        data: Buffer::F32(
            exec_support::values(33 * width, 5)
                .iter()
                .map(|v| 4.0 * v)
                .collect(),
        ),
    };
    let want = run(&g, &constants, std::slice::from_ref(&x)).unwrap();
    let got = exec_all(&g, &constants, &[x]);
    // Row sums of `width` terms in another order: a few ulps of the row's scale.
    let tol = 8.0 * width as f32 * f32::EPSILON;
    for ((name, w), got) in names.iter().zip(want).zip(got) {
        for (&a, &b) in got.iter().zip(&f32s(&w.data)) {
            assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{name}: {a} vs {b}");
        }
    }
}
