//! `scaled_dot_product_attention` on the executor's GEMM + row-softmax path against
//! a direct f64 attention written here, within a rounding bound derived from the
//! head size `D` and the key count `Sk`: causal and not, boolean and additive masks
//! (broadcast), a broadcast head axis (grouped-query attention), an explicit scale,
//! `D` across the GEMM's K block, query counts across the executor's 32-row blocks,
//! a fully masked row (NaN). Fusion on/off and 1–3 threads agree bit for bit; the
//! reference interpreter meets the same bound.

mod exec_support;

use rml_core::Shape;
use rml_host::graph::{Buffer, DenseTensor, Executor, MemoryConstants, Options, load_graph, run};
use rml_kernels::math::EXP_MAX_ULP;
use serde_json::{Value, json};

/// Unit roundoff of f32.
const U: f64 = f32::EPSILON as f64 / 2.0;

/// `γ_n = n·u / (1 − n·u)`: the relative error bound of an `n`-term f32 dot product.
fn gamma(n: usize) -> f64 {
    n as f64 * U / (1.0 - n as f64 * U)
}

/// The mask of a case.
#[derive(Clone, Copy, PartialEq)]
enum MaskKind {
    None,
    /// `BOOL`, keeping positions where a pseudo-random value is above -0.6.
    Keep,
    /// `F32`, added.
    Add,
    /// `BOOL` with query row 0 fully masked (that output row is NaN).
    EmptyRow,
}

struct Case {
    q: Vec<usize>,
    k: Vec<usize>,
    v: Vec<usize>,
    mask: (MaskKind, Vec<usize>),
    causal: bool,
    scale: Option<f32>,
}

/// Batch dims of a tensor's dims, right-aligned into `rank` axes (missing are 1).
fn padded(dims: &[usize], rank: usize) -> Vec<usize> {
    let lead = dims.len() - 2;
    let mut d = vec![1; rank - lead];
    d.extend_from_slice(&dims[..lead]);
    d
}

/// Flat index into row-major `dims` of the broadcast index `idx` (right-aligned).
fn at(dims: &[usize], idx: &[usize]) -> usize {
    let skip = idx.len() - dims.len();
    dims.iter()
        .zip(&idx[skip..])
        .fold(0, |acc, (&d, &i)| acc * d + if d == 1 { 0 } else { i })
}

/// `(value, bound)` per output element: direct f64 attention and the distance the
/// executor's f32 result may be from it.
fn reference(
    c: &Case,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    mask: Option<&Buffer>,
) -> (Vec<usize>, Vec<(f64, f64)>) {
    let rank = [&c.q, &c.k, &c.v]
        .iter()
        .map(|d| d.len() - 2)
        .max()
        .unwrap();
    let (bq, bk, bv) = (padded(&c.q, rank), padded(&c.k, rank), padded(&c.v, rank));
    let batch: Vec<usize> = (0..rank).map(|a| bq[a].max(bk[a]).max(bv[a])).collect();
    let (sq, d) = (c.q[c.q.len() - 2], c.q[c.q.len() - 1]);
    let (sk, dv) = (c.k[c.k.len() - 2], c.v[c.v.len() - 1]);
    let scale = f64::from(c.scale.unwrap_or(1.0 / (d as f32).sqrt()));
    let entries: usize = batch.iter().product();
    let mut out = Vec::new();
    for e in 0..entries {
        let mut idx = vec![0; rank + 2];
        let mut rest = e;
        for a in (0..rank).rev() {
            idx[a] = rest % batch[a];
            rest /= batch[a];
        }
        let base = |dims: &[usize], pad: &[usize]| {
            let b: usize = (0..rank).fold(0, |acc, a| {
                acc * pad[a] + if pad[a] == 1 { 0 } else { idx[a] }
            });
            b * dims[dims.len() - 2] * dims[dims.len() - 1]
        };
        let (qo, ko, vo) = (base(&c.q, &bq), base(&c.k, &bk), base(&c.v, &bv));
        for i in 0..sq {
            // Scores, each with its rounding bound (D products, the scale, the mask add).
            let mut s = vec![f64::NEG_INFINITY; sk];
            let mut delta: f64 = 0.0;
            for (j, sj) in s.iter_mut().enumerate() {
                if c.causal && j > i {
                    continue;
                }
                let (mut dot, mut mag) = (0.0, 0.0);
                for t in 0..d {
                    let p = f64::from(q[qo + i * d + t]) * f64::from(k[ko + j * d + t]);
                    dot += p;
                    mag += p.abs();
                }
                let (mut value, mut err) = (dot * scale, gamma(d + 1) * mag * scale);
                idx[rank] = i;
                idx[rank + 1] = j;
                match mask {
                    Some(Buffer::Bool(m)) if m[at(&c.mask.1, &idx)] == 0 => continue,
                    Some(Buffer::F32(m)) => {
                        let add = f64::from(m[at(&c.mask.1, &idx)]);
                        value += add;
                        err += U * (value.abs() + add.abs());
                    }
                    _ => {}
                }
                *sj = value;
                delta = delta.max(err);
            }
            let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if max == f64::NEG_INFINITY {
                out.extend((0..dv).map(|_| (f64::NAN, 0.0)));
                continue;
            }
            let spread = s
                .iter()
                .filter(|x| x.is_finite())
                .map(|x| max - x)
                .fold(0.0, f64::max);
            let weights: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
            let total: f64 = weights.iter().sum();
            // Relative error of each probability: the score errors (both the entry and
            // the normalizing sum move, e^{2δ} − 1), the kernel's exp (its ulps, and
            // the rounding of x − max, u·spread), the Sk-term sum and the scaling.
            let eps_p = (2.0 * delta).exp_m1()
                + 2.0 * U * spread
                + (2.0 * EXP_MAX_ULP + 4.0) * U
                + gamma(sk);
            for col in 0..dv {
                let (mut value, mut mag) = (0.0, 0.0);
                for (j, w) in weights.iter().enumerate() {
                    let x = w / total * f64::from(v[vo + j * dv + col]);
                    value += x;
                    mag += x.abs();
                }
                // Σ|Δp·v| plus the Sk-term P·V product; 2 covers second-order terms.
                let bound = 2.0 * (eps_p + gamma(sk)) * mag + f64::from(f32::MIN_POSITIVE);
                out.push((value, bound));
            }
        }
    }
    let mut dims = batch;
    dims.extend([sq, dv]);
    (dims, out)
}

fn decl(name: &str, dtype: &str, dims: &[usize]) -> Value {
    json!({"name": name, "dtype": dtype, "shape": dims})
}

fn f32s(b: &Buffer) -> Vec<f32> {
    match b {
        Buffer::F32(v) => v.clone(),
        _ => panic!("F32 outputs only"),
    }
}

fn check(ci: usize, c: &Case) {
    let (kind, mask_dims) = &c.mask;
    let tensor = |dims: &[usize], seed: u64| exec_support::tensor(dims, seed + 10 * ci as u64);
    let mut inputs = vec![tensor(&c.q, 1), tensor(&c.k, 2), tensor(&c.v, 3)];
    let mut decls = vec![
        decl("q", "F32", &c.q),
        decl("k", "F32", &c.k),
        decl("v", "F32", &c.v),
    ];
    let n: usize = mask_dims.iter().product();
    let noise = exec_support::values(n, 4 + ci as u64);
    let mask = match kind {
        MaskKind::None => None,
        MaskKind::Keep => Some(Buffer::Bool(
            noise.iter().map(|&x| u8::from(x > -0.6)).collect(),
        )),
        MaskKind::EmptyRow => {
            let cols = mask_dims[mask_dims.len() - 1];
            let rows = mask_dims[mask_dims.len() - 2];
            let keep = (0..n).map(|i| u8::from((i / cols) % rows != 0)).collect();
            Some(Buffer::Bool(keep))
        }
        MaskKind::Add => Some(Buffer::F32(noise.iter().map(|x| 3.0 * x).collect())),
    };
    if let Some(m) = &mask {
        let dtype = if matches!(m, Buffer::Bool(_)) {
            "BOOL"
        } else {
            "F32"
        };
        decls.push(decl("mask", dtype, mask_dims));
        inputs.push(DenseTensor {
            shape: Shape::new(mask_dims).unwrap(),
            data: m.clone(),
        });
    }
    let (q, k, v) = (
        f32s(&inputs[0].data),
        f32s(&inputs[1].data),
        f32s(&inputs[2].data),
    );
    let (out_dims, want) = reference(c, &q, &k, &v, mask.as_ref());
    let mut attrs = json!({"causal": c.causal});
    if let Some(s) = c.scale {
        attrs["scale"] = json!(s);
    }
    let names: Vec<&str> = ["q", "k", "v", "mask"][..decls.len()].to_vec();
    let text = json!({
        "format": "rml-graph", "version": 1,
        "inputs": decls,
        "nodes": [{"op": "scaled_dot_product_attention", "inputs": names,
                   "outputs": ["y"], "attrs": attrs}],
        "outputs": [decl("y", "F32", &out_dims)]
    })
    .to_string();
    let constants = MemoryConstants::new();
    let g = load_graph(&text, &constants).unwrap();
    let interpreted = f32s(&run(&g, &constants, &inputs).unwrap()[0].data);
    let mut base: Option<Vec<f32>> = None;
    for fusion in [true, false] {
        for threads in [1, 2, 3] {
            let options = Options {
                threads,
                fusion,
                profile: false,
            };
            let mut e = Executor::new(g.clone(), &constants, options).unwrap();
            e.set_min_chunk_ps(0);
            let got = f32s(&e.run(&inputs).unwrap()[0].data);
            match &base {
                Some(b) => assert!(
                    b.iter().zip(&got).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "case {ci}: fusion {fusion}, {threads} threads differ"
                ),
                None => base = Some(got),
            }
        }
    }
    let got = base.unwrap();
    assert_eq!(got.len(), want.len(), "case {ci}");
    for (who, values) in [("executor", &got), ("interpreter", &interpreted)] {
        for (i, (&g, &(w, bound))) in values.iter().zip(&want).enumerate() {
            if w.is_nan() {
                assert!(g.is_nan(), "case {ci} {who} element {i}: {g}, want NaN");
                continue;
            }
            let err = (f64::from(g) - w).abs();
            assert!(
                err <= bound,
                "case {ci} {who} element {i}: {g} vs {w} (bound {bound:e})"
            );
        }
    }
}

#[test]
fn attention_matches_a_direct_f64_attention_within_a_rounding_bound() {
    let case = |q: &[usize], k: &[usize], v: &[usize], causal| Case {
        q: q.to_vec(),
        k: k.to_vec(),
        v: v.to_vec(),
        mask: (MaskKind::None, vec![]),
        causal,
        scale: None,
    };
    let with_mask = |c: Case, kind, dims: &[usize]| Case {
        mask: (kind, dims.to_vec()),
        ..c
    };
    let cases = [
        // Plain multi-head, Sq ≠ Sk, Dv ≠ D.
        case(&[2, 3, 5, 8], &[2, 3, 7, 8], &[2, 3, 7, 6], false),
        // Causal, 70 query rows in one block.
        case(&[1, 2, 70, 16], &[1, 2, 70, 16], &[1, 2, 70, 16], true),
        // 600 keys: blocks of 32 query rows (600 · 32 scores ≥ SCORE_FLOATS), four
        // of them with a ragged last one, causal with more keys than queries.
        case(&[1, 2, 100, 8], &[1, 2, 600, 8], &[1, 2, 600, 8], true),
        // Grouped-query attention: one key/value head broadcast over four query heads.
        case(&[2, 4, 9, 16], &[2, 1, 9, 16], &[2, 1, 9, 16], true),
        // Causal with more keys than queries and fewer.
        case(&[3, 40, 8], &[3, 50, 8], &[3, 50, 5], true),
        case(&[2, 50, 8], &[2, 20, 8], &[2, 20, 8], true),
        // One query (decode), no batch axes; D across the GEMM's K block (256).
        Case {
            scale: Some(0.3),
            ..case(&[1, 300], &[40, 300], &[40, 24], false)
        },
        // A key-padding mask [N, 1, 1, Sk] and a boolean mask per (query, key).
        with_mask(
            case(&[2, 3, 6, 8], &[2, 3, 11, 8], &[2, 3, 11, 8], false),
            MaskKind::Keep,
            &[2, 1, 1, 11],
        ),
        with_mask(
            case(&[2, 2, 37, 8], &[2, 2, 37, 8], &[2, 2, 37, 8], true),
            MaskKind::Keep,
            &[37, 37],
        ),
        // An additive mask, broadcast over the batch, with causal.
        with_mask(
            case(&[2, 2, 33, 16], &[2, 2, 33, 16], &[2, 2, 33, 4], true),
            MaskKind::Add,
            &[1, 33, 33],
        ),
        // Query row 0 sees no key: NaN, as in PyTorch.
        with_mask(
            case(&[2, 5, 8], &[2, 6, 8], &[2, 6, 8], false),
            MaskKind::EmptyRow,
            &[5, 6],
        ),
    ];
    for (ci, c) in cases.iter().enumerate() {
        check(ci, c);
    }
}

/// `x [B, S, H, D]` → `[B, H, S, D]` (swaps axes 1 and 2).
fn heads_first<T: Copy>(x: &[T], [b, s, h, d]: [usize; 4]) -> Vec<T> {
    let mut out = Vec::with_capacity(x.len());
    for bi in 0..b {
        for hi in 0..h {
            for si in 0..s {
                let at = ((bi * s + si) * h + hi) * d;
                out.extend_from_slice(&x[at..at + d]);
            }
        }
    }
    out
}

#[test]
fn attention_reads_and_writes_transposed_operands_through_strides() {
    // torch's export: q, k, v `[B, S, H, D]` each transposed to `[B, H, S, D]`, the
    // output transposed back to `[B, S, H, D]`. The transposed k is also a graph
    // output, so its transpose stays; q's and v's (and the output's) fold into the
    // attention step.
    let (b, s, h, d) = (2, 35, 3, 8);
    let dims = [b, s, h, d];
    let t_dims = [b, h, s, d];
    let inputs: Vec<DenseTensor> = (0..3)
        .map(|i| exec_support::tensor(&dims, 90 + i))
        .collect();
    let t: Vec<Vec<f32>> = inputs
        .iter()
        .map(|x| heads_first(&f32s(&x.data), dims))
        .collect();
    let c = Case {
        q: t_dims.to_vec(),
        k: t_dims.to_vec(),
        v: t_dims.to_vec(),
        mask: (MaskKind::None, vec![]),
        causal: true,
        scale: None,
    };
    let (_, want) = reference(&c, &t[0], &t[1], &t[2], None);
    for transpose_out in [false, true] {
        let transpose = |from: &str, to: &str| {
            json!({"op": "transpose", "inputs": [from], "outputs": [to],
                   "attrs": {"perm": [0, 2, 1, 3]}})
        };
        let mut nodes: Vec<Value> = ["q", "k", "v"]
            .iter()
            .map(|n| transpose(n, &format!("{n}t")))
            .collect();
        let attention = if transpose_out { "a" } else { "y" };
        nodes.push(
            json!({"op": "scaled_dot_product_attention", "inputs": ["qt", "kt", "vt"],
                          "outputs": [attention], "attrs": {"causal": true}}),
        );
        if transpose_out {
            nodes.push(transpose("a", "y"));
        }
        let y_dims = if transpose_out { dims } else { t_dims };
        let decls: Vec<Value> = ["q", "k", "v"]
            .iter()
            .map(|n| decl(n, "F32", &dims))
            .collect();
        let text = json!({
            "format": "rml-graph", "version": 1,
            "inputs": decls,
            "nodes": nodes,
            "outputs": [decl("y", "F32", &y_dims), decl("kt", "F32", &t_dims)]
        })
        .to_string();
        let constants = MemoryConstants::new();
        let g = load_graph(&text, &constants).unwrap();
        let mut base: Option<Vec<DenseTensor>> = None;
        for threads in [1, 2, 3] {
            let options = Options {
                threads,
                ..Options::default()
            };
            let mut e = Executor::new(g.clone(), &constants, options).unwrap();
            e.set_min_chunk_ps(0);
            let transposes = e
                .steps()
                .iter()
                .filter(|s| s.label.starts_with("transpose"))
                .count();
            assert_eq!(transposes, 1, "only k's transpose stays");
            let got = e.run(&inputs).unwrap().to_vec();
            match &base {
                Some(x) => assert_eq!(&got, x, "{threads} threads"),
                None => base = Some(got),
            }
        }
        let got = base.unwrap();
        assert_eq!(f32s(&got[1].data), t[1], "the transposed k output");
        let want = if transpose_out {
            heads_first(&want, t_dims)
        } else {
            want.clone()
        };
        for (i, (&g, &(w, bound))) in f32s(&got[0].data).iter().zip(&want).enumerate() {
            let err = (f64::from(g) - w).abs();
            assert!(
                err <= bound,
                "transposed output {transpose_out}, element {i}: {g} vs {w} (bound {bound:e})"
            );
        }
    }
}
