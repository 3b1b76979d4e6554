//! The executor's convolution-family paths: `conv_transpose2d` as GEMM + col2im
//! against a direct f64 transposed convolution within the GEMM's K-term rounding
//! bound, also with a program as its epilogue; fusion on/off and 1–3 threads agree
//! bit for bit.

mod exec_support;

use exec_support::{decl, exec_all, f32s};
use rml_host::graph::{Buffer, MemoryConstants, load_graph};
use serde_json::json;

/// Unit roundoff of f32 (half an ulp of 1).
const UNIT_ROUNDOFF: f64 = f32::EPSILON as f64 / 2.0;

/// One `conv_transpose2d` case: input dims `[N, C_in, H, W]`, output channels,
/// kernel, stride, padding `[[top, bottom], [left, right]]`, output padding,
/// dilation, groups, bias.
struct Case {
    x: [usize; 4],
    co: usize,
    k: [usize; 2],
    stride: [usize; 2],
    pad: [[usize; 2]; 2],
    out_pad: [usize; 2],
    dilation: [usize; 2],
    groups: usize,
    bias: bool,
}

impl Case {
    /// Output dims: `(in − 1)·s + d·(k − 1) + 1 + output_padding − pads`.
    fn out(&self) -> [usize; 4] {
        let len = |a: usize| {
            (self.x[2 + a] - 1) * self.stride[a] + self.dilation[a] * (self.k[a] - 1) + 1
                - self.pad[a][0]
                - self.pad[a][1]
                + self.out_pad[a]
        };
        [self.x[0], self.co, len(0), len(1)]
    }

    /// `(value, Σ|x·w| + |b|)` per output element, gathering for each output the
    /// input pixels whose tap lands on it (`o + pad − k·d` divisible by the stride).
    fn direct(&self, x: &[f32], w: &[f32], b: &[f32]) -> Vec<(f64, f64)> {
        let [n, ci, h, wd] = self.x;
        let [_, co, oh, ow] = self.out();
        let (cig, cog) = (ci / self.groups, co / self.groups);
        let source = |o: usize, k: usize, a: usize, size: usize| {
            let landed = (o + self.pad[a][0]).checked_sub(k * self.dilation[a])?;
            (landed % self.stride[a] == 0 && landed / self.stride[a] < size)
                .then_some(landed / self.stride[a])
        };
        let mut res = Vec::new();
        for img in 0..n {
            for (o, &bo) in b.iter().enumerate().take(co) {
                let (g, ol) = (o / cog, o % cog);
                for oy in 0..oh {
                    for ox in 0..ow {
                        let bias = if self.bias { f64::from(bo) } else { 0.0 };
                        let (mut v, mut mag) = (bias, bias.abs());
                        for i in g * cig..(g + 1) * cig {
                            for ky in 0..self.k[0] {
                                let Some(iy) = source(oy, ky, 0, h) else {
                                    continue;
                                };
                                for kx in 0..self.k[1] {
                                    let Some(ix) = source(ox, kx, 1, wd) else {
                                        continue;
                                    };
                                    let xi = ((img * ci + i) * h + iy) * wd + ix;
                                    let wi = ((i * cog + ol) * self.k[0] + ky) * self.k[1] + kx;
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
}

#[test]
fn conv_transpose2d_gemm_matches_a_direct_transposed_convolution_within_a_k_bound() {
    let case = |x, co, k, stride, pad, out_pad, dilation, groups, bias| Case {
        x,
        co,
        k,
        stride,
        pad,
        out_pad,
        dilation,
        groups,
        bias,
    };
    let cases = [
        // DCGAN's kernel 4, stride 2, padding 1; 2 images; K = 300 crosses the K block.
        case(
            [2, 300, 4, 3],
            5,
            [4, 4],
            [2, 2],
            [[1, 1], [1, 1]],
            [0, 0],
            [1, 1],
            1,
            true,
        ),
        // stride 3 with output padding, asymmetric padding, no bias.
        case(
            [1, 3, 5, 4],
            4,
            [3, 2],
            [3, 2],
            [[2, 0], [0, 1]],
            [2, 1],
            [1, 1],
            1,
            false,
        ),
        // dilation and groups; output padding below the dilation.
        case(
            [1, 6, 5, 6],
            4,
            [3, 3],
            [1, 2],
            [[1, 2], [2, 1]],
            [1, 0],
            [2, 2],
            2,
            true,
        ),
        // depthwise 1×1, stride 2 (gaps between the pixels), and a ragged 7×5 input.
        case(
            [2, 4, 7, 5],
            4,
            [1, 1],
            [2, 2],
            [[0, 0], [0, 0]],
            [1, 1],
            [1, 1],
            4,
            true,
        ),
        // Three 32×32 images of 1024 tap rows each: the images are multiplied two
        // at a time (their tap rows reach the 8 MiB budget), then the third alone.
        case(
            [3, 2, 32, 32],
            64,
            [4, 4],
            [2, 2],
            [[1, 1], [1, 1]],
            [0, 0],
            [1, 1],
            1,
            true,
        ),
        // stride 1, kernel larger than the input, many output channels.
        case(
            [1, 7, 2, 3],
            33,
            [5, 4],
            [1, 1],
            [[1, 0], [0, 2]],
            [0, 0],
            [1, 1],
            1,
            true,
        ),
    ];
    for (ci, c) in cases.iter().enumerate() {
        let (g, constants, (wv, bv)) = transpose_graph(c, ci as u64, None);
        let x = exec_support::tensor(&c.x, 100 + ci as u64);
        let want = c.direct(&f32s(&x.data), &wv, &bv);
        let got = &exec_all(&g, &constants, &[x])[0];
        assert_eq!(got.len(), want.len(), "case {ci}");
        // The GEMM sums C_in/g products per tap, col2im adds the taps to the bias:
        // at most C_in/g · kh · kw + 1 rounded additions on any element's path.
        let terms = c.x[1] / c.groups * c.k[0] * c.k[1] + 1;
        let gamma = terms as f64 * UNIT_ROUNDOFF / (1.0 - terms as f64 * UNIT_ROUNDOFF);
        for (i, (&g, &(v, mag))) in got.iter().zip(&want).enumerate() {
            let tol = gamma * mag + f64::from(f32::EPSILON) * v.abs();
            assert!(
                (f64::from(g) - v).abs() <= tol,
                "case {ci} element {i}: {g} vs {v} (bound {tol})"
            );
        }
    }
}

#[test]
fn conv_transpose2d_runs_the_program_after_it_as_its_epilogue() {
    // y = silu(conv_transpose2d(x) + b) + r with DCGAN's kernel 4 / stride 2: one
    // image (the output channels split across threads) and three (whole images
    // per thread); 12 output channels of 16 taps, so every split chunk has more
    // than SMALL_M GEMM rows.
    for n in [1, 3] {
        let c = Case {
            x: [n, 20, 4, 3],
            co: 12,
            k: [4, 4],
            stride: [2, 2],
            pad: [[1, 1], [1, 1]],
            out_pad: [0, 0],
            dilation: [1, 1],
            groups: 1,
            bias: true,
        };
        let out = c.out();
        let w_dims = [c.x[1], c.co, 4, 4];
        let wv = exec_support::values(w_dims.iter().product(), 31);
        let bv = exec_support::values(c.co, 32);
        let mut constants = MemoryConstants::new();
        constants.insert("w", &w_dims, Buffer::F32(wv.clone()));
        constants.insert("b", &[c.co], Buffer::F32(bv.clone()));
        let text = json!({
            "format": "rml-graph", "version": 1, "weights": "w.safetensors",
            "inputs": [decl("x", json!(c.x)), decl("r", json!(out))],
            "constants": [decl("w", json!(w_dims)), decl("b", json!([c.co]))],
            "nodes": [
                {"op": "conv_transpose2d", "inputs": ["x", "w", "b"], "outputs": ["c"],
                 "attrs": {"stride": c.stride, "padding": c.pad}},
                {"op": "silu", "inputs": ["c"], "outputs": ["s"]},
                {"op": "add", "inputs": ["s", "r"], "outputs": ["y"]},
            ],
            "outputs": [decl("y", json!(out))]
        })
        .to_string();
        let g = load_graph(&text, &constants).unwrap();
        let e = rml_host::graph::Executor::new(g.clone(), &constants, Default::default()).unwrap();
        let labels: Vec<&str> = e.steps().iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["conv_transpose2d => silu + add"]);
        let x = exec_support::tensor(&c.x, 33);
        let r = exec_support::tensor(&out, 34);
        let direct = c.direct(&f32s(&x.data), &wv, &bv);
        // Fusion on (the epilogue) and off (a conv step, then a program), 1-3
        // threads with every step split: bit for bit.
        let got = &exec_all(&g, &constants, &[x, r.clone()])[0];
        exec_support::assert_silu_residual(got, &direct, &f32s(&r.data), c.x[1] * 16 + 1, n);
    }
}

/// A transposed-convolution graph, its constants, and its weight and bias.
type TransposeFixture = (
    rml_host::graph::Graph,
    MemoryConstants,
    (Vec<f32>, Vec<f32>),
);

/// A single-node `conv_transpose2d` graph for `c` (input `x`, weights from `seed`),
/// or with `bn = Some(ε)` a `conv_transpose2d → batch_norm → relu` chain; the
/// constants, and the weight and bias values.
fn transpose_graph(c: &Case, seed: u64, bn: Option<f32>) -> TransposeFixture {
    let out = c.out();
    let w_dims = [c.x[1], c.co / c.groups, c.k[0], c.k[1]];
    let wv = exec_support::values(w_dims.iter().product(), 80 + seed);
    let bv = exec_support::values(c.co, 90 + seed);
    let attrs = json!({"stride": c.stride, "padding": c.pad, "dilation": c.dilation,
                       "output_padding": c.out_pad, "groups": c.groups});
    let params = exec_support::bn_params(c.co, 51);
    let (g, constants) = exec_support::conv_chain(
        ("conv_transpose2d", attrs),
        (&c.x, &out),
        (&w_dims, &wv, c.bias.then_some(&bv[..])),
        bn.map(|epsilon| (&params, epsilon)),
    );
    (g, constants, (wv, bv))
}

#[test]
fn batch_norm_folded_into_conv_transpose2d_matches_a_direct_transposed_convolution() {
    // Groups (the folded scale follows each group's output channels), and DCGAN's
    // kernel 4 / stride 2 without a bias.
    let cases = [
        Case {
            x: [1, 6, 5, 6],
            co: 4,
            k: [3, 3],
            stride: [1, 2],
            pad: [[1, 2], [2, 1]],
            out_pad: [1, 0],
            dilation: [2, 2],
            groups: 2,
            bias: true,
        },
        Case {
            x: [2, 12, 4, 3],
            co: 5,
            k: [4, 4],
            stride: [2, 2],
            pad: [[1, 1], [1, 1]],
            out_pad: [0, 0],
            dilation: [1, 1],
            groups: 1,
            bias: false,
        },
    ];
    let epsilon = 1e-5;
    for (ci, c) in cases.iter().enumerate() {
        let (g, constants, (wv, bv)) = transpose_graph(c, 10 + ci as u64, Some(epsilon));
        let x = exec_support::tensor(&c.x, 110 + ci as u64);
        let direct = c.direct(&f32s(&x.data), &wv, &bv);
        let [_, _, oh, ow] = c.out();
        let terms = c.x[1] / c.groups * c.k[0] * c.k[1] + 1;
        exec_support::assert_bn_folded(
            (&g, &constants, &x),
            &direct,
            (&exec_support::bn_params(c.co, 51), epsilon),
            [oh * ow, terms],
        );
    }
}

/// `y = op(x)` (output of rank `out_rank`, constants `extra`) for a one-node graph
/// on `dims`, run on the interpreter and on the executor (fusion on/off, 1–3 threads); asserts the two
/// equal bit for bit, NaNs included.
fn assert_exact(
    (op, attrs, out_rank): (&str, serde_json::Value, usize),
    extra: &[(&str, Vec<f32>)],
    x: &[f32],
    dims: &[usize],
) {
    let mut constants = MemoryConstants::new();
    let mut decls = Vec::new();
    let mut inputs = vec!["x"];
    for (name, values) in extra {
        constants.insert(name, &[values.len()], Buffer::F32(values.clone()));
        decls.push(decl(name, json!([values.len()])));
        inputs.push(name);
    }
    let text = json!({
        "format": "rml-graph", "version": 1, "weights": "w.safetensors",
        "inputs": [decl("x", json!(dims))],
        "constants": decls,
        "nodes": [{"op": op, "inputs": inputs, "outputs": ["y"], "attrs": attrs}],
        "outputs": [decl("y", json!(vec!["?"; out_rank]))]
    });
    let g = load_graph(&text.to_string(), &constants).unwrap();
    let x = rml_host::graph::DenseTensor {
        shape: rml_core::Shape::new(dims).unwrap(),
        data: Buffer::F32(x.to_vec()),
    };
    let inputs = [x];
    let want = f32s(&rml_host::graph::run(&g, &constants, &inputs).unwrap()[0].data);
    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
    let got = &exec_all_bits(&g, &constants, &inputs);
    assert_eq!(bits(got), bits(&want), "{op} {attrs}");
}

/// [`exec_all`] for outputs that may hold NaN (compared by bits).
fn exec_all_bits(
    g: &rml_host::graph::Graph,
    constants: &MemoryConstants,
    inputs: &[rml_host::graph::DenseTensor],
) -> Vec<f32> {
    let mut base: Option<Vec<u32>> = None;
    for fusion in [true, false] {
        for threads in [1, 2, 3] {
            let options = rml_host::graph::Options {
                threads,
                fusion,
                profile: false,
            };
            let mut e = rml_host::graph::Executor::new(g.clone(), constants, options).unwrap();
            e.set_min_chunk_ps(0);
            let got = f32s(&e.run(inputs).unwrap()[0].data);
            let bits: Vec<u32> = got.iter().map(|f| f.to_bits()).collect();
            match &base {
                Some(b) => assert_eq!(&bits, b, "fusion {fusion}, {threads} threads"),
                None => base = Some(bits),
            }
        }
    }
    base.unwrap().into_iter().map(f32::from_bits).collect()
}

#[test]
fn reductions_and_global_pools_equal_the_interpreter_exactly() {
    let dims = [2, 3, 9, 17];
    let mut x = exec_support::values(dims.iter().product(), 7);
    for op in [
        "reduce_sum",
        "reduce_mean",
        "reduce_max",
        "reduce_min",
        "reduce_prod",
    ] {
        for (axes, keepdims) in [
            (json!([2, 3]), false),
            (json!([-1]), true),
            (json!([0]), false),
            (json!([1, 2]), true),
            (json!([3, 1, 2]), false),
            (json!(null), false),
            // not one run of axes: the rml-core path.
            (json!([0, 2]), true),
        ] {
            let (attrs, reduced) = match axes.as_array() {
                None => (json!({"keepdims": keepdims}), 4),
                Some(a) => (json!({"axes": axes, "keepdims": keepdims}), a.len()),
            };
            let rank = if keepdims { 4 } else { 4 - reduced };
            assert_exact((op, attrs, rank), &[], &x, &dims);
        }
    }
    // Rows of negative zeros: a sum over the last axis keeps the sign (the rows
    // summed side by side start from -0.0, as the reference's fold does).
    let mut zeros = x.clone();
    zeros[..17 * 9].fill(-0.0);
    for op in ["reduce_sum", "reduce_mean"] {
        assert_exact(
            (op, json!({"axes": [-1], "keepdims": false}), 3),
            &[],
            &zeros,
            &dims,
        );
    }
    // A NaN propagates through max and min; global pools.
    x[40] = f32::NAN;
    for op in ["reduce_max", "reduce_min"] {
        assert_exact((op, json!({"axes": [2, 3]}), 2), &[], &x, &dims);
    }
    for op in ["global_avg_pool2d", "global_max_pool2d"] {
        assert_exact((op, json!({}), 4), &[], &x, &dims);
    }
}

#[test]
fn group_norm_and_upsample_equal_the_interpreter_exactly() {
    for (dims, groups, affine) in [
        (vec![2, 6, 5, 7], 3, true),
        (vec![3, 4, 9], 4, false),
        (vec![1, 8, 16, 16], 1, true),
        // Empty channels: an empty output, as the interpreter gives.
        (vec![2, 4, 0], 2, true),
    ] {
        let c = dims[1];
        let x = exec_support::values(dims.iter().product(), 30 + c as u64);
        let params = [
            ("gamma", exec_support::values(c, 31)),
            ("beta", exec_support::values(c, 32)),
        ];
        let extra: &[(&str, Vec<f32>)] = if affine { &params } else { &[] };
        let attrs = json!({"num_groups": groups, "epsilon": 1e-3});
        assert_exact(("group_norm", attrs, dims.len()), extra, &x, &dims);
    }
    let dims = [2, 3, 5, 4];
    let x = exec_support::values(dims.iter().product(), 33);
    for attrs in [
        json!({"scale": [2, 2]}),
        json!({"scale": [1, 3]}),
        json!({"size": [7, 9]}),
        json!({"size": [3, 2]}),
    ] {
        assert_exact(("upsample_nearest2d", attrs, 4), &[], &x, &dims);
    }
}

#[test]
fn group_norm_runs_the_program_after_it_as_its_epilogue() {
    // y = silu(group_norm(x)) + r, as in a U-Net block, at 1 and 3 images (blocks
    // split across threads): one step, and against a direct f64 group norm and
    // SiLU within a few f32 roundings of the output.
    for (dims, groups) in [([1, 8, 6, 5], 4), ([3, 6, 4, 4], 2)] {
        let [n, c, h, w] = dims;
        let len = n * c * h * w;
        let gamma = exec_support::values(c, 41);
        let beta = exec_support::values(c, 42);
        let mut constants = MemoryConstants::new();
        constants.insert("gamma", &[c], Buffer::F32(gamma.clone()));
        constants.insert("beta", &[c], Buffer::F32(beta.clone()));
        let text = json!({
            "format": "rml-graph", "version": 1, "weights": "w.safetensors",
            "inputs": [decl("x", json!(dims)), decl("r", json!(dims))],
            "constants": [decl("gamma", json!([c])), decl("beta", json!([c]))],
            "nodes": [
                {"op": "group_norm", "inputs": ["x", "gamma", "beta"], "outputs": ["g"],
                 "attrs": {"num_groups": groups, "epsilon": 1e-5}},
                {"op": "silu", "inputs": ["g"], "outputs": ["s"]},
                {"op": "add", "inputs": ["s", "r"], "outputs": ["y"]},
            ],
            "outputs": [decl("y", json!(dims))]
        })
        .to_string();
        let g = load_graph(&text, &constants).unwrap();
        let e = rml_host::graph::Executor::new(g.clone(), &constants, Default::default()).unwrap();
        let labels: Vec<&str> = e.steps().iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["group_norm => silu + add"]);
        let x = exec_support::tensor(&dims, 43);
        let r = exec_support::tensor(&dims, 44);
        let (xs, rs) = (f32s(&x.data), f32s(&r.data));
        let got = &exec_all(&g, &constants, &[x, r])[0];
        let block = c / groups * h * w;
        for (b, (xb, gb)) in xs.chunks(block).zip(got.chunks(block)).enumerate() {
            let mean = xb.iter().map(|&v| f64::from(v)).sum::<f64>() / block as f64;
            let var = xb
                .iter()
                .map(|&v| (f64::from(v) - mean).powi(2))
                .sum::<f64>()
                / block as f64;
            for (i, (&v, &y)) in xb.iter().zip(gb).enumerate() {
                let ch = (b % groups) * (c / groups) + i / (h * w);
                let norm = (f64::from(v) - mean) / (var + 1e-5).sqrt();
                let z = norm * f64::from(gamma[ch]) + f64::from(beta[ch]);
                let want = z / (1.0 + (-z).exp()) + f64::from(rs[b * block + i]);
                let err = (f64::from(y) - want).abs();
                assert!(
                    err <= 8.0 * UNIT_ROUNDOFF * (1.0 + want.abs() + z.abs()),
                    "{y} vs {want}"
                );
            }
        }
        assert_eq!(got.len(), len);
    }
}
