//! The executor's rml-kernels paths against the reference interpreter: packed GEMM
//! linears within a rounding bound derived from K, vector transcendentals in fused
//! programs within the kernels' documented ULP bounds, and the layer-norm /
//! RMS-norm / softmax row kernels; fusion on/off and 1–3 threads agree bit for bit.

mod exec_support;

use exec_support::{decl, exec_all, f32s};
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

/// The graph of `nodes` on `x [N, width]` with outputs `outputs` (each `[N, width]`)
/// and one `[width]` parameter per name of `params`, filled from `seed`, `seed + 1`, …
fn rows_graph(
    width: usize,
    params: &[&str],
    seed: u64,
    nodes: Vec<Value>,
    outputs: &[&str],
) -> (Graph, MemoryConstants) {
    let mut constants = MemoryConstants::new();
    for (i, name) in params.iter().enumerate() {
        let values = exec_support::values(width, seed + i as u64);
        constants.insert(name, &[width], Buffer::F32(values));
    }
    let decls = params.iter().map(|c| decl(c, json!([width]))).collect();
    let doc = exec_support::rows_graph(width, decls, nodes, outputs);
    let g = load_graph(&doc.to_string(), &constants).unwrap();
    (g, constants)
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
    let doc = exec_support::rows_graph(width, vec![decl("eight", json!([]))], nodes, &names);
    let g = load_graph(&doc.to_string(), &constants).unwrap();
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
    let nodes = vec![
        json!({"op": "layer_norm", "inputs": ["x", "g", "b"], "outputs": ["ln"]}),
        json!({"op": "layer_norm", "inputs": ["x"], "outputs": ["ln_plain"]}),
        json!({"op": "rms_norm", "inputs": ["x", "g"], "outputs": ["rms"]}),
        json!({"op": "softmax", "inputs": ["x"], "outputs": ["sm"]}),
    ];
    let names = ["ln", "ln_plain", "rms", "sm"];
    let (g, constants) = rows_graph(width, &["g", "b"], 20, nodes, &names);
    // 150 rows: 2 and 3 threads split them (`exec_all` splits every step).
    rows_match_the_interpreter(&g, &constants, [150, width], 5, &names);
}

/// Runs `g` on `[rows, width]` values (seed `seed`, in ±4) through the interpreter
/// and through the executor (fusion on/off, 1–3 threads, bit for bit), and checks
/// the outputs `names` agree within the row sums' rounding: `width` terms summed in
/// another order, a few ulps of the row's scale.
fn rows_match_the_interpreter(
    g: &Graph,
    constants: &MemoryConstants,
    [rows, width]: [usize; 2],
    seed: u64,
    names: &[&str],
) {
    let x = DenseTensor {
        shape: Shape::new(&[rows, width]).unwrap(),
        data: Buffer::F32(
            exec_support::values(rows * width, seed)
                .iter()
                .map(|v| 4.0 * v)
                .collect(),
        ),
    };
    let want = run(g, constants, std::slice::from_ref(&x)).unwrap();
    let got = exec_all(g, constants, &[x]);
    let tol = 8.0 * width as f32 * f32::EPSILON;
    for ((name, w), got) in names.iter().zip(want).zip(got) {
        for (&a, &b) in got.iter().zip(&f32s(&w.data)) {
            assert!((a - b).abs() <= tol * (1.0 + b.abs()), "{name}: {a} vs {b}");
        }
    }
}

#[test]
fn row_norms_run_as_the_prologue_of_the_program_after_it() {
    // 300 columns: 6-row blocks, 37 rows end on a partial block; 3000 columns: a
    // row is larger than a block (one row per block). With and without the affine
    // parameters, the axis given as -1 or 1; `ln` also a graph output or not.
    for (op, width, affine, axis, ln_out) in [
        ("layer_norm", 300, true, -1, false),
        ("layer_norm", 300, false, 1, true),
        ("layer_norm", 3000, true, 1, false),
        ("rms_norm", 300, true, -1, false),
        ("rms_norm", 300, false, -1, true),
        ("rms_norm", 3000, true, -1, false),
    ] {
        let mut ln_inputs = vec!["x"];
        if affine {
            ln_inputs.push("g");
            if op == "layer_norm" {
                ln_inputs.push("b");
            }
        }
        let attrs = if op == "layer_norm" {
            json!({"axis": axis})
        } else {
            json!({})
        };
        let nodes = vec![
            json!({"op": op, "inputs": ln_inputs, "outputs": ["ln"], "attrs": attrs}),
            json!({"op": "mul", "inputs": ["ln", "s"], "outputs": ["m"]}),
            json!({"op": "gelu", "inputs": ["m"], "outputs": ["ge"]}),
            json!({"op": "add", "inputs": ["ge", "x"], "outputs": ["y"]}),
        ];
        let names: &[&str] = if ln_out { &["y", "ln"] } else { &["y"] };
        let (g, constants) = rows_graph(width, &["g", "b", "s"], 30, nodes, names);
        let mut e = Executor::new(g.clone(), &constants, Options::default()).unwrap();
        let labels: Vec<&str> = e.steps().iter().map(|s| s.label.as_str()).collect();
        assert_eq!(
            labels,
            [format!("{op} => mul + gelu + add")],
            "width {width}"
        );
        // The planner gives `ln` a buffer only when something besides the
        // epilogue reads it or a row is longer than the L1 block: `x` and `y`
        // (37 rows, 64-byte aligned), and then `ln`.
        let x = DenseTensor {
            shape: Shape::new(&[37, width]).unwrap(),
            data: Buffer::F32(exec_support::values(37 * width, 6)),
        };
        e.run(std::slice::from_ref(&x)).unwrap();
        let buffer = (37 * width * 4).div_ceil(64) * 64;
        let buffers = if ln_out || width > 2048 { 3 } else { 2 };
        assert_eq!(e.peak_bytes(), Some(buffers * buffer), "{op} width {width}");
        // Fusion on (the prologue) and off (a row-kernel node, then programs), 1-3
        // threads: bit for bit; against the interpreter: the row kernel's sums, then
        // GELU within its ULP bound.
        rows_match_the_interpreter(&g, &constants, [37, width], 6, names);
    }
}

#[test]
fn chained_binary_ops_match_the_interpreter() {
    // `mul` then `add` taking it on the right (a chain, operands swapped), `sub`
    // then `div` taking it on the left (a chain), `div` taking it on the right
    // (not commutative: no chain), and a product read twice (no chain).
    let nodes = vec![
        json!({"op": "mul", "inputs": ["x", "s"], "outputs": ["m"]}),
        json!({"op": "add", "inputs": ["b", "m"], "outputs": ["a"]}),
        json!({"op": "sub", "inputs": ["a", "x"], "outputs": ["d"]}),
        json!({"op": "div", "inputs": ["d", "s"], "outputs": ["q"]}),
        json!({"op": "div", "inputs": ["s", "q"], "outputs": ["r"]}),
        json!({"op": "mul", "inputs": ["r", "b"], "outputs": ["p"]}),
        json!({"op": "add", "inputs": ["p", "p"], "outputs": ["y"]}),
    ];
    let (g, constants) = rows_graph(300, &["s", "b"], 40, nodes, &["y", "a"]);
    let e = Executor::new(g.clone(), &constants, Options::default()).unwrap();
    assert_eq!(e.steps().len(), 1);
    // Fused (with the chains) and unfused, 1-3 threads, bit for bit; against the
    // interpreter (rml-core's scalar ops).
    rows_match_the_interpreter(&g, &constants, [37, 300], 8, &["y", "a"]);
}

#[test]
fn layer_norm_over_several_axes_is_not_a_prologue() {
    let nodes = vec![
        json!({"op": "layer_norm", "inputs": ["x"], "outputs": ["ln"], "attrs": {"axis": 0}}),
        json!({"op": "gelu", "inputs": ["ln"], "outputs": ["y"]}),
    ];
    let (g, constants) = rows_graph(8, &[], 0, nodes, &["y"]);
    let e = Executor::new(g, &constants, Options::default()).unwrap();
    let labels: Vec<&str> = e.steps().iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["layer_norm", "gelu"]);
}

/// One `conv2d` case: input dims `[N, C, H, W]`, output channels, kernel, stride,
/// padding `[[top, bottom], [left, right]]`, dilation, groups, bias.
struct ConvCase {
    x: [usize; 4],
    co: usize,
    k: [usize; 2],
    stride: [usize; 2],
    pad: [[usize; 2]; 2],
    dilation: [usize; 2],
    groups: usize,
    bias: bool,
}

/// `(value, Σ|x·w| + |b|)` per output element of a direct f64 convolution.
fn direct_conv(c: &ConvCase, x: &[f32], w: &[f32], b: &[f32], out: [usize; 4]) -> Vec<(f64, f64)> {
    let [n, ci, h, wd] = c.x;
    let (cig, cog) = (ci / c.groups, c.co / c.groups);
    let mut res = Vec::new();
    for img in 0..n {
        for (o, &bo) in b.iter().enumerate().take(c.co) {
            let g = o / cog;
            for oy in 0..out[2] {
                for ox in 0..out[3] {
                    let bias = if c.bias { f64::from(bo) } else { 0.0 };
                    let (mut v, mut mag) = (bias, bias.abs());
                    for i in 0..cig {
                        for ky in 0..c.k[0] {
                            for kx in 0..c.k[1] {
                                let y = (oy * c.stride[0] + ky * c.dilation[0]) as isize
                                    - c.pad[0][0] as isize;
                                let xx = (ox * c.stride[1] + kx * c.dilation[1]) as isize
                                    - c.pad[1][0] as isize;
                                if y < 0 || xx < 0 || y >= h as isize || xx >= wd as isize {
                                    continue;
                                }
                                let xi =
                                    ((img * ci + g * cig + i) * h + y as usize) * wd + xx as usize;
                                let wi = ((o * cig + i) * c.k[0] + ky) * c.k[1] + kx;
                                let p = f64::from(x[xi]) * f64::from(w[wi]);
                                v += p;
                                mag += p.abs();
                            }
                        }
                    }
                    res.push((v, mag));
                }
            }
        }
    }
    res
}

#[test]
fn conv2d_gemm_matches_a_direct_convolution_within_a_k_bound() {
    let case = |x, co, k, stride, pad, dilation, groups, bias| ConvCase {
        x,
        co,
        k,
        stride,
        pad,
        dilation,
        groups,
        bias,
    };
    let cases = [
        // 3×3 same padding, K = 288 crosses the GEMM's K block; 2 images.
        case(
            [2, 32, 9, 7],
            20,
            [3, 3],
            [1, 1],
            [[1, 1], [1, 1]],
            [1, 1],
            1,
            true,
        ),
        // stride 2, asymmetric padding, no bias, 1 output channel row per thread.
        case(
            [1, 3, 11, 10],
            3,
            [3, 2],
            [2, 3],
            [[0, 2], [1, 0]],
            [1, 1],
            1,
            false,
        ),
        // dilation and groups.
        case(
            [1, 8, 12, 12],
            6,
            [3, 3],
            [1, 2],
            [[2, 2], [2, 2]],
            [2, 2],
            2,
            true,
        ),
        // depthwise, 1×1 and a kernel wider than the padded input is not (valid).
        case(
            [2, 4, 5, 6],
            4,
            [1, 1],
            [1, 1],
            [[0, 0], [0, 0]],
            [1, 1],
            4,
            true,
        ),
        case(
            [1, 5, 6, 6],
            7,
            [6, 6],
            [1, 1],
            [[0, 0], [0, 0]],
            [1, 1],
            1,
            true,
        ),
        // K = 576 over 29-wide rows: several bands of output rows, the last partial.
        case(
            [1, 64, 23, 29],
            10,
            [3, 3],
            [1, 1],
            [[1, 1], [1, 1]],
            [1, 1],
            1,
            true,
        ),
        // stride 1 with output rows as long as the input's (each unrolled row one
        // shifted run of the input): dilation 2, padding on the bottom and right
        // only or uneven, 13-wide rows (panels straddle output rows).
        case(
            [2, 3, 10, 13],
            5,
            [3, 3],
            [1, 1],
            [[0, 4], [1, 3]],
            [2, 2],
            1,
            true,
        ),
        // K = 216 over 520-wide rows: one output row per band, so a band's top
        // and bottom taps lie wholly in the padding rows.
        case(
            [1, 24, 3, 520],
            3,
            [3, 3],
            [1, 1],
            [[1, 1], [1, 1]],
            [1, 1],
            1,
            true,
        ),
        // stride 2 with bands, two images.
        case(
            [2, 96, 40, 20],
            5,
            [3, 3],
            [2, 2],
            [[1, 1], [1, 1]],
            [1, 1],
            1,
            false,
        ),
    ];
    for (ci, c) in cases.iter().enumerate() {
        let cig = c.x[1] / c.groups;
        let (g, constants, (wv, bv, out)) = conv_graph(c, ci as u64, None);
        let x = exec_support::tensor(&c.x, 3 + ci as u64);
        let want = direct_conv(c, &f32s(&x.data), &wv, &bv, out);
        let got = &exec_all(&g, &constants, &[x])[0];
        assert_eq!(got.len(), want.len(), "case {ci}");
        let terms = cig * c.k[0] * c.k[1] + 1;
        let gamma = terms as f64 * UNIT_ROUNDOFF / (1.0 - terms as f64 * UNIT_ROUNDOFF);
        for (i, (&g, &(v, mag))) in got.iter().zip(&want).enumerate() {
            // The f32 result against the exact sum, plus its own rounding to f32.
            let tol = gamma * mag + f64::from(f32::EPSILON) * v.abs();
            assert!(
                (f64::from(g) - v).abs() <= tol,
                "case {ci} element {i}: {g} vs {v} (bound {tol})"
            );
        }
    }
}

/// A convolution graph, its constants, and its weight, bias and output dims.
type ConvFixture = (Graph, MemoryConstants, (Vec<f32>, Vec<f32>, [usize; 4]));

/// A single-node `conv2d` graph for `c` (input `x`, weights from `seed`), or with
/// `bn = Some(ε)` a `conv2d → batch_norm → relu` chain; the constants, and the
/// weight, bias and output dims.
fn conv_graph(c: &ConvCase, seed: u64, bn: Option<f32>) -> ConvFixture {
    let [n, chans, h, w] = c.x;
    let cig = chans / c.groups;
    let windows = |size: usize, pad: [usize; 2], k: usize, d: usize, s: usize| {
        (size + pad[0] + pad[1] - (d * (k - 1) + 1)) / s + 1
    };
    let out = [
        n,
        c.co,
        windows(h, c.pad[0], c.k[0], c.dilation[0], c.stride[0]),
        windows(w, c.pad[1], c.k[1], c.dilation[1], c.stride[1]),
    ];
    let w_dims = [c.co, cig, c.k[0], c.k[1]];
    let wv = exec_support::values(w_dims.iter().product(), 11 + seed);
    let bv = exec_support::values(c.co, 5);
    let attrs = json!({"stride": c.stride, "padding": c.pad, "dilation": c.dilation,
                       "groups": c.groups});
    let params = exec_support::bn_params(c.co, 41);
    let (g, constants) = exec_support::conv_chain(
        ("conv2d", attrs),
        (&c.x, &out),
        (&w_dims, &wv, c.bias.then_some(&bv[..])),
        bn.map(|epsilon| (&params, epsilon)),
    );
    (g, constants, (wv, bv, out))
}

#[test]
fn batch_norm_folded_into_conv2d_matches_a_direct_convolution() {
    // (case, ε): groups with asymmetric padding; bands of rows with no conv bias.
    let cases = [
        (
            ConvCase {
                x: [2, 6, 9, 11],
                co: 4,
                k: [3, 3],
                stride: [1, 2],
                pad: [[1, 1], [0, 1]],
                dilation: [1, 1],
                groups: 2,
                bias: true,
            },
            1e-3,
        ),
        (
            ConvCase {
                x: [1, 64, 23, 29],
                co: 7,
                k: [3, 3],
                stride: [1, 1],
                pad: [[1, 1], [1, 1]],
                dilation: [1, 1],
                groups: 1,
                bias: false,
            },
            1e-5,
        ),
    ];
    for (ci, (c, epsilon)) in cases.iter().enumerate() {
        let (g, constants, (wv, bv, out)) = conv_graph(c, ci as u64, Some(*epsilon));
        let x = exec_support::tensor(&c.x, 60 + ci as u64);
        let direct = direct_conv(c, &f32s(&x.data), &wv, &bv, out);
        let terms = c.x[1] / c.groups * c.k[0] * c.k[1] + 1;
        exec_support::assert_bn_folded(
            (&g, &constants, &x),
            &direct,
            (&exec_support::bn_params(c.co, 41), *epsilon),
            [out[2] * out[3], terms],
        );
    }
}

#[test]
fn conv2d_runs_the_program_after_it_as_its_epilogue() {
    // y = silu(conv2d(x) + b) + r: one image (the output-channel rows split across
    // threads) and three (whole images per thread); K = 72 in one band of output
    // rows, and K = 576 in three bands (one image: whole bands per thread).
    let co = 12;
    for (n, (ci, h, w)) in [1, 3]
        .into_iter()
        .flat_map(|n| [(8, 10, 9), (64, 20, 20)].map(|s| (n, s)))
    {
        let c = ConvCase {
            x: [n, ci, h, w],
            co,
            k: [3, 3],
            stride: [1, 1],
            pad: [[1, 1], [1, 1]],
            dilation: [1, 1],
            groups: 1,
            bias: true,
        };
        let wv = exec_support::values(co * ci * 9, 21);
        let bv = exec_support::values(co, 22);
        let mut constants = MemoryConstants::new();
        constants.insert("w", &[co, ci, 3, 3], Buffer::F32(wv.clone()));
        constants.insert("b", &[co], Buffer::F32(bv.clone()));
        let out = json!([n, co, h, w]);
        let text = json!({
            "format": "rml-graph", "version": 1, "weights": "w.safetensors",
            "inputs": [decl("x", json!(c.x)), decl("r", out.clone())],
            "constants": [decl("w", json!([co, ci, 3, 3])), decl("b", json!([co]))],
            "nodes": [
                {"op": "conv2d", "inputs": ["x", "w", "b"], "outputs": ["c"],
                 "attrs": {"padding": c.pad}},
                {"op": "silu", "inputs": ["c"], "outputs": ["s"]},
                {"op": "add", "inputs": ["s", "r"], "outputs": ["y"]},
            ],
            "outputs": [decl("y", out)]
        })
        .to_string();
        let g = load_graph(&text, &constants).unwrap();
        let e = Executor::new(g.clone(), &constants, Options::default()).unwrap();
        let labels: Vec<&str> = e.steps().iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["conv2d => silu + add"]);
        let x = exec_support::tensor(&c.x, 23);
        let r = exec_support::tensor(&[n, co, h, w], 24);
        let direct = direct_conv(&c, &f32s(&x.data), &wv, &bv, [n, co, h, w]);
        // Fusion on (the epilogue) and off (a conv step, then a program), 1-3
        // threads with every step split: bit for bit.
        let got = &exec_all(&g, &constants, &[x, r.clone()])[0];
        exec_support::assert_silu_residual(got, &direct, &f32s(&r.data), ci * 9 + 1, n);
    }
}

#[test]
fn max_pool2d_equals_the_interpreter_exactly() {
    // (kernel, stride, padding, dilation, ceil_mode) on [2, 3, 9, 8] inputs with a NaN.
    let cases = [
        ([2, 2], [2, 2], [[0, 0], [0, 0]], [1, 1], false),
        ([3, 3], [1, 1], [[1, 1], [1, 1]], [1, 1], false),
        ([3, 2], [2, 3], [[1, 0], [0, 1]], [2, 1], true),
        ([2, 3], [3, 2], [[1, 1], [1, 1]], [1, 2], true),
    ];
    for (ci, &(kernel, stride, padding, dilation, ceil_mode)) in cases.iter().enumerate() {
        let attrs = json!({"kernel": kernel, "stride": stride, "padding": padding,
                           "dilation": dilation, "ceil_mode": ceil_mode});
        let text = json!({
            "format": "rml-graph", "version": 1,
            "inputs": [decl("x", json!([2, 3, 9, 8]))],
            "nodes": [{"op": "max_pool2d", "inputs": ["x"], "outputs": ["y"], "attrs": attrs}],
            "outputs": [decl("y", json!([2, 3, "?", "?"]))]
        })
        .to_string();
        let constants = MemoryConstants::new();
        let g = load_graph(&text, &constants).unwrap();
        let x = exec_support::tensor(&[2, 3, 9, 8], 21 + ci as u64);
        let want = f32s(&run(&g, &constants, std::slice::from_ref(&x)).unwrap()[0].data);
        assert_eq!(
            exec_all(&g, &constants, std::slice::from_ref(&x))[0],
            want,
            "case {ci}"
        );
        // NaNs propagate as in the reference (compared apart: NaN != NaN); two of
        // them, at rows/columns 0/1 and 1/0 of a plane, so every case's windows see one.
        let mut x = x;
        if let Buffer::F32(v) = &mut x.data {
            v[73] = f32::NAN;
            v[80] = f32::NAN;
        }
        let want = f32s(&run(&g, &constants, std::slice::from_ref(&x)).unwrap()[0].data);
        let mut e = Executor::new(g, &constants, Options::default()).unwrap();
        let got = f32s(&e.run(&[x]).unwrap()[0].data);
        assert!(
            got.iter().any(|v| v.is_nan()),
            "case {ci}: the NaN propagates"
        );
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want), "case {ci} with a NaN");
    }
}

#[test]
fn batch_norm_equals_the_interpreter_exactly() {
    // [N, C, …] of rank 4 and 3, with and without the affine parameters.
    for (ci, (dims, affine)) in [(vec![2, 5, 3, 4], true), (vec![3, 4, 7], false)]
        .into_iter()
        .enumerate()
    {
        let c = dims[1];
        let mut constants = MemoryConstants::new();
        let mut decls = Vec::new();
        let mut inputs = vec!["x".to_string()];
        let names: &[&str] = if affine {
            &["mean", "var", "gamma", "beta"]
        } else {
            &["mean", "var"]
        };
        for (i, name) in names.iter().enumerate() {
            let mut v = exec_support::values(c, 40 + i as u64);
            if *name == "var" {
                v.iter_mut().for_each(|x| *x = x.abs() + 0.1);
            }
            constants.insert(name, &[c], Buffer::F32(v));
            decls.push(decl(name, json!([c])));
            inputs.push(name.to_string());
        }
        let text = json!({
            "format": "rml-graph", "version": 1, "weights": "w.safetensors",
            "inputs": [decl("x", json!(dims))],
            "constants": decls,
            "nodes": [{"op": "batch_norm", "inputs": inputs, "outputs": ["y"],
                       "attrs": {"epsilon": 1e-3}}],
            "outputs": [decl("y", json!(dims))]
        })
        .to_string();
        let g = load_graph(&text, &constants).unwrap();
        let x = exec_support::tensor(&dims, 50 + ci as u64);
        let want = f32s(&run(&g, &constants, std::slice::from_ref(&x)).unwrap()[0].data);
        let got = &exec_all(&g, &constants, &[x])[0];
        assert_eq!(got, &want, "case {ci}");
    }
}

#[test]
fn matmul_of_two_activations_matches_the_interpreter_within_a_k_bound() {
    // Batched (rank 3 and 4) with each transpose combination, and K across the
    // GEMM's K block; both operands are graph inputs, so no weight is packed.
    // `exec_all` splits every step on 2 and 3 threads: by batch entries (5 entries
    // over 3 chunks), or for one entry by row blocks (40 rows: 3 chunks; 20 rows: 2,
    // each kept above the GEMM's small-M bound) — with the same bits.
    for (ci, (batch, m, k, n, ta, tb)) in [
        (vec![3], 5, 7, 4, false, false),
        (vec![2], 9, 300, 17, true, false),
        (vec![2, 2], 4, 6, 20, false, true),
        (vec![1], 1, 33, 8, true, true),
        (vec![5], 3, 10, 9, false, true),
        (vec![1], 40, 300, 20, false, false),
        (vec![1], 20, 12, 5, true, false),
    ]
    .into_iter()
    .enumerate()
    {
        let dims = |r: usize, c: usize, t: bool| {
            let mut d = batch.clone();
            d.extend(if t { [c, r] } else { [r, c] });
            d
        };
        let (a_dims, b_dims) = (dims(m, k, ta), dims(k, n, tb));
        let mut y_dims = batch.clone();
        y_dims.extend([m, n]);
        let text = json!({
            "format": "rml-graph", "version": 1,
            "inputs": [decl("a", json!(a_dims)), decl("b", json!(b_dims))],
            "nodes": [{"op": "matmul", "inputs": ["a", "b"], "outputs": ["y"],
                       "attrs": {"transpose_a": ta, "transpose_b": tb}}],
            "outputs": [decl("y", json!(y_dims))]
        })
        .to_string();
        let constants = MemoryConstants::new();
        let g = load_graph(&text, &constants).unwrap();
        let a = exec_support::tensor(&a_dims, 60 + ci as u64);
        let b = exec_support::tensor(&b_dims, 70 + ci as u64);
        let inputs = [a, b];
        let want = f32s(&run(&g, &constants, &inputs).unwrap()[0].data);
        let got = &exec_all(&g, &constants, &inputs)[0];
        // Values are in [-1, 1): |Σ a·b| ≤ K, so the bound is γ_K · K on both sides.
        let gamma = k as f64 * UNIT_ROUNDOFF / (1.0 - k as f64 * UNIT_ROUNDOFF);
        let tol = BOTH_SIDES * gamma * k as f64 + f64::from(f32::EPSILON);
        assert_eq!(got.len(), want.len(), "case {ci}");
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            let err = f64::from((g - w).abs());
            assert!(
                err <= tol,
                "case {ci} element {i}: {g} vs {w} (bound {tol})"
            );
        }
    }
}
