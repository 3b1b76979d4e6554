//! Randomized tests of every GEMM/GEMV path this machine can run against a plain
//! triple-loop reference computed in f64.
//!
//! Tolerances follow the standard bound for a length-`k` f32 dot product,
//! `|err| ≤ γ_k · Σ|aᵢ·bᵢ|` with `γ_k ≈ k·ε`; [`DOT_TOL_FACTOR`] leaves headroom for the
//! alpha/beta update and blocked (K-split) accumulation.

use std::vec;
use std::vec::Vec;

use super::*;
use crate::isa::force;
use crate::testing::for_each_isa;

/// Multiplier on `(k + 2)·ε·Σ|terms|` allowed between kernel and reference.
const DOT_TOL_FACTOR: f64 = 2.0;
/// Extra relative slack for one libm activation evaluation (erf, tanh, exp) in f32.
const ACT_REL_TOL: f64 = 16.0 * f32::EPSILON as f64;
/// Extra absolute slack for an activation near zero.
const ACT_ABS_TOL: f64 = 1e-6;
/// Largest slope of GELU, GELU-tanh and SiLU (≈ 1.13 and 1.10), rounded up: an
/// input error δ becomes at most this times δ.
const ACT_SLOPE: f64 = 1.2;
/// Values written after every output buffer; they must survive each call.
const GUARD: f32 = 12345.0;
const GUARD_LEN: usize = 37;

/// xorshift64*: deterministic test data without dependencies.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn f32(&mut self) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// How a test matrix is laid out in its slice.
#[derive(Clone, Copy, Debug)]
enum Lay {
    RowMajor,
    ColMajor,
    /// Row-major with padded rows and a leading offset.
    Padded,
    /// Column stride 2 (neither unit stride).
    Gapped,
}
const LAYS: [Lay; 4] = [Lay::RowMajor, Lay::ColMajor, Lay::Padded, Lay::Gapped];

/// A dense logical matrix plus its slice and strides.
struct TMat {
    vals: Vec<f32>,
    rows: usize,
    cols: usize,
    buf: Vec<f32>,
    off: usize,
    rs: usize,
    cs: usize,
}

impl TMat {
    fn new(rng: &mut Rng, rows: usize, cols: usize, lay: Lay, fill: f32) -> TMat {
        let vals: Vec<f32> = (0..rows * cols).map(|_| rng.f32()).collect();
        let (off, rs, cs) = match lay {
            Lay::RowMajor => (0, cols, 1),
            Lay::ColMajor => (0, 1, rows),
            Lay::Padded => (3, cols + 5, 1),
            Lay::Gapped => (1, 2 * cols + 1, 2),
        };
        let len = off
            + if rows * cols == 0 {
                0
            } else {
                (rows - 1) * rs + (cols - 1) * cs + 1
            };
        let mut buf = vec![fill; len + GUARD_LEN];
        buf[len..].fill(GUARD);
        for i in 0..rows {
            for j in 0..cols {
                buf[off + i * rs + j * cs] = vals[i * cols + j];
            }
        }
        TMat {
            vals,
            rows,
            cols,
            buf,
            off,
            rs,
            cs,
        }
    }
    fn view(&self) -> MatRef<'_, f32> {
        let end = self.buf.len() - GUARD_LEN;
        MatRef::new(
            &self.buf[self.off..end],
            self.rows,
            self.cols,
            self.rs,
            self.cs,
        )
        .unwrap()
    }
    fn view_mut(&mut self) -> MatMut<'_> {
        let end = self.buf.len() - GUARD_LEN;
        MatMut::new(
            &mut self.buf[self.off..end],
            self.rows,
            self.cols,
            self.rs,
            self.cs,
        )
        .unwrap()
    }
    fn get(&self, i: usize, j: usize) -> f32 {
        self.buf[self.off + i * self.rs + j * self.cs]
    }
    fn assert_guard(&self) {
        let n = self.buf.len();
        assert!(
            self.buf[n - GUARD_LEN..].iter().all(|&v| v == GUARD),
            "wrote past the end"
        );
    }
    /// The values as another weight type, in the same layout.
    fn convert<T: Weight>(&self, f: impl Fn(f32) -> T) -> Vec<T> {
        self.buf.iter().map(|&v| f(v)).collect()
    }
}

/// Reference `act(s·(alpha·A·B + beta·C) + bias + R)` in f64, with its tolerance.
#[allow(clippy::too_many_arguments)]
fn reference(
    alpha: f32,
    a: &dyn Fn(usize, usize) -> f32,
    b: &dyn Fn(usize, usize) -> f32,
    beta: f32,
    c: &dyn Fn(usize, usize) -> f32,
    epi: &Epilogue<'_>,
    (m, k, n): (usize, usize, usize),
) -> Vec<(f64, f64)> {
    let eps = f32::EPSILON as f64;
    let mut out = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            let (mut s, mut mag) = (0.0f64, 0.0f64);
            for p in 0..k {
                let t = a(i, p) as f64 * b(p, j) as f64;
                s += t;
                mag += t.abs();
            }
            let mut v = alpha as f64 * s;
            mag *= (alpha as f64).abs();
            if beta != 0.0 {
                let cb = beta as f64 * c(i, j) as f64;
                v += cb;
                mag += cb.abs();
            }
            let mut tol = DOT_TOL_FACTOR * (k as f64 + 2.0) * eps * mag;
            if let Some(sc) = epi.col_scale {
                v *= sc[j] as f64;
                tol = tol * (sc[j] as f64).abs() + eps * v.abs();
            }
            if let Some(bias) = epi.bias {
                v += bias[j] as f64;
                tol += eps * v.abs();
            }
            if let Some(r) = &epi.residual {
                v += r.get(i, j).unwrap() as f64;
                tol += eps * v.abs();
            }
            let act = epi.activation;
            if act != Activation::None {
                let x = v;
                v = match act {
                    Activation::Relu => x.max(0.0),
                    Activation::Gelu => 0.5 * x * (1.0 + libm::erf(x / core::f64::consts::SQRT_2)),
                    Activation::GeluTanh => {
                        let u = (2.0 / core::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
                        0.5 * x * (1.0 + libm::tanh(u))
                    }
                    Activation::Silu => x / (1.0 + libm::exp(-x)),
                    Activation::None => x,
                };
                tol = ACT_SLOPE * tol + ACT_REL_TOL * v.abs() + ACT_ABS_TOL;
            }
            out.push((v, tol + 1e-30));
        }
    }
    out
}

/// [`reference`] of a product that ignores C (`beta = 0`).
fn reference_no_c(
    alpha: f32,
    a: &dyn Fn(usize, usize) -> f32,
    b: &dyn Fn(usize, usize) -> f32,
    epi: &Epilogue<'_>,
    mkn: (usize, usize, usize),
) -> Vec<(f64, f64)> {
    reference(alpha, a, b, 0.0, &|_, _| 0.0, epi, mkn)
}

fn assert_close(
    got: &dyn Fn(usize, usize) -> f32,
    want: &[(f64, f64)],
    m: usize,
    n: usize,
    what: &str,
) {
    for i in 0..m {
        for j in 0..n {
            let (w, tol) = want[i * n + j];
            let g = got(i, j) as f64;
            assert!(
                (g - w).abs() <= tol,
                "{what}: C[{i},{j}] = {g}, want {w} (tol {tol:e})"
            );
        }
    }
}

const ALPHA_BETA: [(f32, f32); 5] = [(1.0, 0.0), (0.5, 0.0), (1.0, 1.0), (-2.0, 0.75), (0.0, 2.0)];
/// Sizes hitting 0, 1, primes, and non-multiples of MR = 6 and NR = 16.
/// Edge sizes around the 6×16 tile; under Miri (which interprets every instruction) a
/// subset that still covers empty, single, ragged and multi-tile shapes.
const SIZES: &[usize] = if crate::testing::MIRI {
    &[0, 1, 7, 17]
} else {
    &[0, 1, 2, 5, 6, 7, 13, 16, 17, 37]
};

#[allow(clippy::too_many_arguments)]
fn check_gemm(
    rng: &mut Rng,
    isa: Isa,
    (m, k, n): (usize, usize, usize),
    (la, lb, lc): (Lay, Lay, Lay),
    (alpha, beta): (f32, f32),
) {
    let a = TMat::new(rng, m, k, la, 0.0);
    let b = TMat::new(rng, k, n, lb, 0.0);
    // beta = 0 must ignore C, even NaN.
    let mut c = TMat::new(rng, m, n, lc, f32::NAN);
    if beta == 0.0 {
        for i in 0..m {
            for j in 0..n {
                c.buf[c.off + i * c.rs + j * c.cs] = f32::NAN;
            }
        }
    }
    let c0 = TMat {
        vals: c.vals.clone(),
        rows: m,
        cols: n,
        buf: c.buf.clone(),
        off: c.off,
        rs: c.rs,
        cs: c.cs,
    };
    let want = reference(
        alpha,
        &|i, p| a.vals[i * k + p],
        &|p, j| b.vals[p * n + j],
        beta,
        &|i, j| c0.get(i, j),
        &Epilogue::default(),
        (m, k, n),
    );
    let mut scratch = vec![0.0; gemm_scratch_len(m, n, k)];
    gemm(alpha, a.view(), b.view(), beta, c.view_mut(), &mut scratch).unwrap();
    c.assert_guard();
    let what =
        std::format!("{isa:?} gemm m={m} k={k} n={n} {la:?}/{lb:?}/{lc:?} a={alpha} b={beta}");
    assert_close(&|i, j| c.get(i, j), &want, m, n, &what);
}

#[test]
fn gemm_small_sizes_layouts_alpha_beta() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for_each_isa(|isa| {
        for &m in SIZES {
            for &k in SIZES {
                for &n in SIZES {
                    let lays = (LAYS[rng.below(4)], LAYS[rng.below(4)], LAYS[rng.below(4)]);
                    let ab = ALPHA_BETA[rng.below(ALPHA_BETA.len())];
                    check_gemm(&mut rng, isa, (m, k, n), lays, ab);
                }
            }
        }
    });
}

#[test]
fn gemm_crosses_every_block_boundary() {
    let mut rng = Rng(7);
    // M past MC (144) and SMALL_M, K past KC (256) twice, N past NC (3072).
    // Under Miri only the K boundary is crossed (the others take minutes there).
    // Shapes with M > SMALL_M and B over 16 KiB pack B inside the first row tile
    // (ragged last panel, K blocks, MC blocks after the first reuse the panels).
    let shapes: &[(usize, usize, usize)] = if crate::testing::MIRI {
        &[(8, 257, 17), (9, 70, 61)]
    } else {
        &[
            (150, 300, 40),
            (9, 520, 33),
            (8, 257, 50),
            (3, 5, 3100),
            (145, 17, 3073),
            (64, 256, 256),
            (13, 100, 45),
            (20, 300, 53),
            (151, 70, 70),
            (7 * MR + 1, 33, 129),
            // One B panel wide: A read in place across MC and KC blocks.
            (150, 600, NR),
            (151, 300, 11),
        ]
    };
    for_each_isa(|isa| {
        for (t, &s) in shapes.iter().enumerate() {
            for (u, &lay) in LAYS.iter().enumerate() {
                let lays = (lay, LAYS[(u + t) % 4], LAYS[(u + 2 * t + 1) % 4]);
                let ab = ALPHA_BETA[(t + u) % ALPHA_BETA.len()];
                check_gemm(&mut rng, isa, s, lays, ab);
            }
        }
    });
}

#[test]
fn small_m_with_b_rows_4_kib_apart_packs_b_in_narrow_blocks() {
    // Two row tiles (M = 7, 8) over a row-major B whose rows are 1024 or 2048
    // floats apart: B is packed 256 columns at a time (full blocks, a ragged last
    // block, K past KC natively); one row tile (M = 6, and M = 7, 8 in AVX-512's
    // eight-row tile pairs) still reads it in place.
    // Under Miri one packed case (ragged last block) alone: it takes minutes there.
    let mut rng = Rng(41);
    let (k, widths, rows): (usize, &[(usize, usize)], &[usize]) = if crate::testing::MIRI {
        (5, &[(1024, 900)], &[SMALL_M])
    } else {
        let widths = &[(1024, 1024), (2048, 2048), (1024, 300), (2048, 37)];
        (300, widths, &[6, 7, SMALL_M])
    };
    for_each_isa(|isa| {
        for &m in rows {
            for &(stride, n) in widths {
                let a = TMat::new(&mut rng, m, k, Lay::RowMajor, 0.0);
                let b = TMat::new(&mut rng, k, stride, Lay::RowMajor, 0.0);
                let b_view = b.view().sub(0..k, 0..n).unwrap();
                let want = reference_no_c(
                    1.0,
                    &|i, p| a.vals[i * k + p],
                    &|p, j| b.vals[p * stride + j],
                    &Epilogue::default(),
                    (m, k, n),
                );
                let mut c = TMat::new(&mut rng, m, n, Lay::Padded, f32::NAN);
                let mut scratch = vec![0.0; gemm_scratch_len(m, n, k)];
                gemm(1.0, a.view(), b_view, 0.0, c.view_mut(), &mut scratch).unwrap();
                c.assert_guard();
                let what = std::format!("{isa:?} m={m} k={k} n={n} B row stride {stride}");
                assert_close(&|i, j| c.get(i, j), &want, m, n, &what);
            }
        }
    });
}

#[test]
fn small_m_over_a_b_past_the_l3_share_streams_or_packs_whole_blocks() {
    // A row-major B of 17 MB (over `STREAMED_B_MIN_BYTES`): with a row-major A up to
    // four rows stream its rows (`gemv_kn`), and under AVX2 five to eight rows too,
    // in two passes over blocks of B; other kernels pack B for more than four rows,
    // and so does an A that is not row-contiguous, in NC-wide blocks (K past KC
    // four times, N past NC, both ragged). Too large for Miri.
    if crate::testing::MIRI {
        return;
    }
    let mut rng = Rng(53);
    let (k, n) = (1100, 3900);
    assert!(k * n * 4 > super::STREAMED_B_MIN_BYTES);
    let streamed = (Lay::RowMajor, Lay::RowMajor, Lay::Padded);
    let packed = (Lay::ColMajor, Lay::RowMajor, Lay::Padded);
    for_each_isa(|isa| {
        for m in [1, 3, 5, SMALL_M] {
            check_gemm(&mut rng, isa, (m, k, n), streamed, (0.5, 0.0));
        }
        check_gemm(&mut rng, isa, (SMALL_M, k, n), packed, (0.5, 0.0));
    });
}

#[test]
fn gemm_transposed_views() {
    let mut rng = Rng(11);
    for_each_isa(|isa| {
        for &(m, k, n) in &[(7, 19, 23), (31, 5, 17), (2, 40, 3)] {
            let a_t = TMat::new(&mut rng, k, m, Lay::RowMajor, 0.0); // stores Aᵀ
            let b_t = TMat::new(&mut rng, n, k, Lay::Padded, 0.0); // stores Bᵀ
            let mut c = TMat::new(&mut rng, m, n, Lay::RowMajor, f32::NAN);
            let want = reference_no_c(
                1.5,
                &|i, p| a_t.vals[p * m + i],
                &|p, j| b_t.vals[j * k + p],
                &Epilogue::default(),
                (m, k, n),
            );
            let mut s = vec![0.0; gemm_scratch_len(m, n, k)];
            gemm(
                1.5,
                a_t.view().t(),
                b_t.view().t(),
                0.0,
                c.view_mut(),
                &mut s,
            )
            .unwrap();
            c.assert_guard();
            assert_close(
                &|i, j| c.get(i, j),
                &want,
                m,
                n,
                &std::format!("{isa:?} transposed"),
            );
        }
    });
}

fn epilogues<'a>(bias: &'a [f32], scale: &'a [f32], res: MatRef<'a, f32>) -> Vec<Epilogue<'a>> {
    let mut v = Vec::new();
    for act in [
        Activation::None,
        Activation::Relu,
        Activation::Gelu,
        Activation::GeluTanh,
        Activation::Silu,
    ] {
        v.push(Epilogue {
            activation: act,
            ..Default::default()
        });
        v.push(Epilogue {
            bias: Some(bias),
            activation: act,
            ..Default::default()
        });
        v.push(Epilogue {
            col_scale: Some(scale),
            bias: Some(bias),
            residual: Some(res),
            activation: act,
        });
    }
    v
}

#[test]
fn gemm_fused_epilogues_and_weight_types() {
    let mut rng = Rng(23);
    for_each_isa(|isa| {
        let shapes: &[(usize, usize, usize)] = if crate::testing::MIRI {
            &[(1, 9, 5), (7, 33, 19)]
        } else {
            &[(1, 9, 5), (7, 33, 19), (20, 70, 41), (13, 300, 16)]
        };
        for &(m, k, n) in shapes {
            let a = TMat::new(&mut rng, m, k, Lay::RowMajor, 0.0);
            let b = TMat::new(&mut rng, k, n, LAYS[n % 4], 0.0);
            let bias: Vec<f32> = (0..n).map(|_| rng.f32()).collect();
            let scale: Vec<f32> = (0..n).map(|_| 2.0 * rng.f32()).collect();
            let r = TMat::new(&mut rng, m, n, Lay::Gapped, 0.0);
            let c_init = TMat::new(&mut rng, m, n, Lay::ColMajor, 0.0);
            for (e, epi) in epilogues(&bias, &scale, r.view()).iter().enumerate() {
                let beta = if e % 2 == 0 { 0.0 } else { 0.5 };
                for wt in 0..3 {
                    // Weights as f32, f16 or bf16: the reference multiplies by the
                    // exact f32 value of each rounded weight.
                    let round = |v: f32| match wt {
                        0 => v,
                        1 => half::f16::from_f32(v).to_f32(),
                        _ => half::bf16::from_f32(v).to_f32(),
                    };
                    let want = reference(
                        0.75,
                        &|i, p| a.vals[i * k + p],
                        &|p, j| round(b.vals[p * n + j]),
                        beta,
                        &|i, j| c_init.get(i, j),
                        epi,
                        (m, k, n),
                    );
                    let mut c = TMat {
                        vals: Vec::new(),
                        rows: m,
                        cols: n,
                        buf: c_init.buf.clone(),
                        off: c_init.off,
                        rs: c_init.rs,
                        cs: c_init.cs,
                    };
                    let mut s = vec![0.0; gemm_scratch_len(m, n, k)];
                    let end = b.buf.len() - GUARD_LEN;
                    match wt {
                        0 => gemm_ex(0.75, a.view(), b.view(), beta, c.view_mut(), epi, &mut s),
                        1 => {
                            let h = b.convert(half::f16::from_f32);
                            let bv = MatRef::new(&h[b.off..end], k, n, b.rs, b.cs).unwrap();
                            gemm_ex(0.75, a.view(), bv, beta, c.view_mut(), epi, &mut s)
                        }
                        _ => {
                            let h = b.convert(half::bf16::from_f32);
                            let bv = MatRef::new(&h[b.off..end], k, n, b.rs, b.cs).unwrap();
                            gemm_ex(0.75, a.view(), bv, beta, c.view_mut(), epi, &mut s)
                        }
                    }
                    .unwrap();
                    c.assert_guard();
                    let what = std::format!("{isa:?} epilogue {e} weights {wt} m={m} k={k} n={n}");
                    assert_close(&|i, j| c.get(i, j), &want, m, n, &what);
                }
            }
        }
    });
}

/// A random `m × k` A (padded rows) and `k × n` B laid out as `lay`, the f64
/// reference of `epi(A·B)`, and B packed by [`pack_b`].
fn packed_b_case(
    rng: &mut Rng,
    (m, k, n): (usize, usize, usize),
    lay: Lay,
    epi: &Epilogue<'_>,
) -> (TMat, TMat, Vec<(f64, f64)>, Vec<f32>) {
    let a = TMat::new(rng, m, k, Lay::Padded, 0.0);
    let b = TMat::new(rng, k, n, lay, 0.0);
    let want = reference_no_c(
        1.0,
        &|i, p| a.vals[i * k + p],
        &|p, j| b.vals[p * n + j],
        epi,
        (m, k, n),
    );
    let mut packed = vec![f32::NAN; packed_b_len(k, n).unwrap()];
    pack_b(b.view(), &mut packed).unwrap();
    (a, b, want, packed)
}

#[test]
fn prepacked_b_and_ranges_match_plain_gemm() {
    let mut rng = Rng(31);
    let (m, k, n) = if crate::testing::MIRI {
        (13, 20, 35)
    } else {
        (29, 270, 53)
    };
    let bias: Vec<f32> = (0..n).map(|_| rng.f32()).collect();
    let epi = Epilogue {
        bias: Some(&bias),
        activation: Activation::Silu,
        ..Default::default()
    };
    // Packed once under one ISA; the layout is the same for every ISA.
    let (a, b, want, packed) = packed_b_case(&mut rng, (m, k, n), Lay::ColMajor, &epi);
    let pb = PackedB::new(&packed, k, n).unwrap();
    for_each_isa(|isa| {
        for small in [false, true] {
            // `small` runs the small-M path on a 5-row slice.
            let rows = if small { 0..5 } else { 0..m };
            let mm = rows.len();
            let mut c = TMat::new(&mut rng, mm, n, Lay::RowMajor, f32::NAN);
            let av = a.view().sub(rows.clone(), 0..k).unwrap();
            let mut s = vec![0.0; gemm_packed_scratch_len(mm, k)];
            gemm_packed(1.0, av, pb, 0.0, c.view_mut(), &epi, &mut s).unwrap();
            c.assert_guard();
            let sub: Vec<_> = want[..mm * n].to_vec();
            assert_close(
                &|i, j| c.get(i, j),
                &sub,
                mm,
                n,
                &std::format!("{isa:?} packed"),
            );
        }
        // Four blocks: rows split at 11, columns at 32 (a multiple of NR).
        let mut c = TMat::new(&mut rng, m, n, Lay::Padded, f32::NAN);
        let mut c2 = TMat::new(&mut rng, m, n, Lay::ColMajor, f32::NAN);
        for (rows, cols) in [
            (0..11, 0..32),
            (11..m, 0..32),
            (0..11, 32..n),
            (11..m, 32..n),
        ] {
            let mut s = vec![0.0; gemm_scratch_len(rows.len(), cols.len(), k)];
            gemm_packed_range(
                1.0,
                a.view(),
                pb,
                0.0,
                c.view_mut(),
                &epi,
                rows.clone(),
                cols.clone(),
                &mut s,
            )
            .unwrap();
            gemm_range(
                1.0,
                a.view(),
                b.view(),
                0.0,
                c2.view_mut(),
                &epi,
                rows,
                cols,
                &mut s,
            )
            .unwrap();
        }
        c.assert_guard();
        c2.assert_guard();
        assert_close(
            &|i, j| c.get(i, j),
            &want,
            m,
            n,
            &std::format!("{isa:?} packed range"),
        );
        assert_close(
            &|i, j| c2.get(i, j),
            &want,
            m,
            n,
            &std::format!("{isa:?} range"),
        );
    });
}

#[test]
fn prepacked_a_matches_the_reference_and_gemm_packed_bit_for_bit() {
    let mut rng = Rng(37);
    // More rows than MC and K past KC (every block boundary), a ragged last panel.
    let (m, k, n) = if crate::testing::MIRI {
        (13, 20, 35)
    } else {
        (151, 300, 45)
    };
    let epi = Epilogue {
        activation: Activation::Relu,
        ..Default::default()
    };
    let (a, _, want, packed_b) = packed_b_case(&mut rng, (m, k, n), Lay::RowMajor, &epi);
    let pb = PackedB::new(&packed_b, k, n).unwrap();
    let mut packed_a = vec![f32::NAN; packed_a_full_len(m, k).unwrap()];
    pack_a(a.view(), &mut packed_a).unwrap();
    let pa = PackedA::new(&packed_a, m, k).unwrap();
    for_each_isa(|isa| {
        // The whole A, and rows from a panel edge to a ragged end.
        for rows in [0..m, MR..m - 2] {
            let mm = rows.len();
            let mut c = TMat::new(&mut rng, mm, n, Lay::RowMajor, f32::NAN);
            let sub = pa.sub_rows(rows.clone()).unwrap();
            gemm_prepacked(1.0, sub, pb, 0.0, c.view_mut(), &epi).unwrap();
            c.assert_guard();
            let mut plain = TMat::new(&mut rng, mm, n, Lay::RowMajor, f32::NAN);
            let av = a.view().sub(rows.clone(), 0..k).unwrap();
            let mut s = vec![0.0; gemm_packed_scratch_len(mm, k)];
            gemm_packed(1.0, av, pb, 0.0, plain.view_mut(), &epi, &mut s).unwrap();
            for i in 0..mm {
                for j in 0..n {
                    assert_eq!(c.get(i, j).to_bits(), plain.get(i, j).to_bits(), "{isa:?}");
                }
            }
            let sub_want = want[rows.start * n..rows.end * n].to_vec();
            let what = std::format!("{isa:?} prepacked A rows {rows:?}");
            assert_close(&|i, j| c.get(i, j), &sub_want, mm, n, &what);
        }
    });
    assert!(pa.sub_rows(1..m).is_err());
    assert!(pa.sub_rows(0..m + 1).is_err());
    assert!(PackedA::new(&packed_a[1..], m, k).is_err());
    assert!(pack_a(a.view(), &mut packed_a[1..]).is_err());
}

/// The AVX-512 kernel's tile pairs run the AVX2 kernel's FMA chains, so they give
/// its bits: A and B packed or read in place, ragged column tails, alpha and beta,
/// columns of pairs of one to eight rows (64 rows in place are eight tiles of eight,
/// 13 are seven and six). (Both are checked against the f64 reference by the tests
/// above.)
#[test]
fn avx512_tile_pairs_give_the_avx2_bits() {
    let _guard = crate::testing::isa_lock();
    if !Isa::Avx512.is_supported() {
        return;
    }
    let before = crate::isa::active();
    let mut rng = Rng(43);
    for (m, k, n) in [
        (5, 7, 40),
        (13, 40, 64),
        (200, 300, 97),
        (64, 64, 64),
        (8, 33, 96),
    ] {
        let a = TMat::new(&mut rng, m, k, Lay::RowMajor, 0.0);
        let b = TMat::new(&mut rng, k, n, Lay::RowMajor, 0.0);
        let c0 = TMat::new(&mut rng, m, n, Lay::RowMajor, 0.0);
        let run = |isa| {
            force(isa).unwrap();
            let mut c = c0.vals.clone();
            let mut s = vec![0.0; gemm_scratch_len(m, n, k)];
            let cm = MatMut::row_major(&mut c, m, n).unwrap();
            gemm(0.5, a.view(), b.view(), 1.5, cm, &mut s).unwrap();
            c
        };
        let (avx2, avx512) = (run(Isa::Avx2), run(Isa::Avx512));
        let same = avx2
            .iter()
            .zip(&avx512)
            .all(|(x, y)| x.to_bits() == y.to_bits());
        assert!(same, "{m}x{k}x{n}");
    }
    force(before).unwrap();
}

/// The fence in front of a column of tiles admits a column that ends exactly at the
/// ends of A and C and refuses one whose last tile would reach one value further;
/// for a column of AVX-512 tile pairs of eight rows, the end of the second B panel
/// too.
#[test]
#[cfg(target_arch = "x86_64")]
fn tile_column_fences_check_the_last_tile() {
    let rs_c = 40;
    let (tiles, a_step) = (4, 30);
    let col = tile::Column { tiles, a_step };
    for (mr, b_step) in [(MR, None), (tile::PAIR_MR, Some(50))] {
        let spec = tile::TileSpec {
            kc: 3,
            mr,
            nr: NR,
            rs_a: 1,
            cs_a: mr,
            rs_b: NR,
            rs_c,
            alpha: 1.0,
            beta: 0.0,
        };
        let fence = |a, b, c| match b_step {
            None => spec.assert_fits_column(a, b, c, col),
            Some(step) => spec.assert_fits_pair_column(a, b, c, step, col),
        };
        let width = NR * if b_step.is_some() { 2 } else { 1 };
        let a = (tiles - 1) * a_step + spec.kc * mr;
        let b = b_step.unwrap_or(0) + spec.kc * NR;
        let c = (tiles - 1) * mr * rs_c + (mr - 1) * rs_c + width;
        fence(a, b, c);
        for (a, b, c) in [(a - 1, b, c), (a, b - 1, c), (a, b, c - 1)] {
            let fits = std::panic::catch_unwind(|| fence(a, b, c));
            assert!(
                fits.is_err(),
                "{mr} rows: a {a}, b {b}, c {c} must be refused"
            );
        }
    }
}

#[test]
fn range_leaves_the_rest_of_c_untouched() {
    let mut rng = Rng(37);
    let (m, k, n) = (10, 12, 20);
    let a = TMat::new(&mut rng, m, k, Lay::RowMajor, 0.0);
    let b = TMat::new(&mut rng, k, n, Lay::RowMajor, 0.0);
    let mut c = vec![-7.0f32; m * n];
    let mut s = vec![0.0; gemm_scratch_len(m, n, k)];
    let cm = MatMut::row_major(&mut c, m, n).unwrap();
    gemm_range(
        1.0,
        a.view(),
        b.view(),
        0.0,
        cm,
        &Epilogue::default(),
        3..6,
        5..9,
        &mut s,
    )
    .unwrap();
    for i in 0..m {
        for j in 0..n {
            let inside = (3..6).contains(&i) && (5..9).contains(&j);
            assert_eq!(c[i * n + j] == -7.0, !inside, "element ({i},{j})");
        }
    }
}

#[test]
fn gemv_paths_match_reference() {
    let mut rng = Rng(41);
    for_each_isa(|isa| {
        let ms: &[usize] = if crate::testing::MIRI {
            &[1, 8, 9]
        } else {
            &[1, 2, 3, 4, 5, 6, 7, 8, 9, 17]
        };
        for &m in ms {
            let shapes: &[(usize, usize)] = if crate::testing::MIRI {
                &[(0, 3), (1, 1), (9, 17)]
            } else {
                &[
                    (0, 3),
                    (1, 1),
                    (7, 5),
                    (8, 4),
                    (9, 17),
                    (33, 65),
                    (100, 130),
                    // Rows of 34–68 KB: 7+ x rows pass twice over blocks of 3–7
                    // weight rows.
                    (17_000, 9),
                ]
            };
            for &(k, n) in shapes {
                for wt in 0..3 {
                    let x = TMat::new(&mut rng, m, k, Lay::Padded, 0.0);
                    let w = TMat::new(&mut rng, n, k, Lay::Padded, 0.0); // [N, K]
                    let bkn = TMat::new(&mut rng, k, n, Lay::Padded, 0.0); // [K, N]
                    let bias: Vec<f32> = (0..n).map(|_| rng.f32()).collect();
                    let epi = if m % 2 == 0 {
                        Epilogue {
                            bias: Some(&bias),
                            activation: Activation::Gelu,
                            ..Default::default()
                        }
                    } else {
                        Epilogue::default()
                    };
                    let (alpha, beta) = ALPHA_BETA[(m + k + wt) % ALPHA_BETA.len()];
                    let round = |v: f32| match wt {
                        0 => v,
                        1 => half::f16::from_f32(v).to_f32(),
                        _ => half::bf16::from_f32(v).to_f32(),
                    };
                    let y_lay = if (m + n + wt) % 2 == 0 {
                        Lay::Gapped
                    } else {
                        Lay::Padded
                    };
                    let c0 = TMat::new(&mut rng, m, n, y_lay, 0.0);
                    let want_nk = reference(
                        alpha,
                        &|i, p| x.vals[i * k + p],
                        &|p, j| round(w.vals[j * k + p]),
                        beta,
                        &|i, j| c0.get(i, j),
                        &epi,
                        (m, k, n),
                    );
                    let want_kn = reference(
                        alpha,
                        &|i, p| x.vals[i * k + p],
                        &|p, j| round(bkn.vals[p * n + j]),
                        beta,
                        &|i, j| c0.get(i, j),
                        &epi,
                        (m, k, n),
                    );
                    for (layout, want) in [("nk", &want_nk), ("kn", &want_kn)] {
                        let mut c = TMat {
                            vals: Vec::new(),
                            rows: m,
                            cols: n,
                            buf: c0.buf.clone(),
                            off: c0.off,
                            rs: c0.rs,
                            cs: c0.cs,
                        };
                        if beta == 0.0 {
                            for i in 0..m {
                                for j in 0..n {
                                    c.buf[c.off + i * c.rs + j * c.cs] = f32::NAN;
                                }
                            }
                        }
                        let src = if layout == "nk" { &w } else { &bkn };
                        let end = src.buf.len() - GUARD_LEN;
                        let (r, cc) = (src.rows, src.cols);
                        macro_rules! go {
                            ($buf:expr) => {{
                                let buf = $buf;
                                let v =
                                    MatRef::new(&buf[src.off..end], r, cc, src.rs, src.cs).unwrap();
                                if layout == "nk" {
                                    gemv_nk(alpha, x.view(), v, beta, c.view_mut(), &epi)
                                } else {
                                    gemv_kn(alpha, x.view(), v, beta, c.view_mut(), &epi)
                                }
                            }};
                        }
                        match wt {
                            0 => go!(&src.buf),
                            1 => go!(&src.convert(half::f16::from_f32)),
                            _ => go!(&src.convert(half::bf16::from_f32)),
                        }
                        .unwrap();
                        c.assert_guard();
                        let what = std::format!("{isa:?} gemv_{layout} m={m} k={k} n={n} w{wt}");
                        assert_close(&|i, j| c.get(i, j), want, m, n, &what);
                    }
                }
            }
        }
    });
}

/// [K, N] GEMV into row-major y whose rows lie a multiple of 4 KiB apart (n = 1024,
/// 2048), accumulated in place: up to four x rows in one pass, five to eight in two
/// passes of at most four, more in groups of eight.
#[test]
fn gemv_kn_with_y_rows_4_kib_apart_matches_reference() {
    let mut rng = Rng(47);
    for_each_isa(|isa| {
        let shapes: &[(usize, usize, usize)] = if crate::testing::MIRI {
            &[(5, 3, 1024)]
        } else {
            &[
                (3, 5, 1024),
                (5, 3, 1024),
                (8, 9, 2048),
                (9, 4, 1024),
                (17, 2, 1024),
            ]
        };
        for &(m, k, n) in shapes {
            let x = TMat::new(&mut rng, m, k, Lay::RowMajor, 0.0);
            let b = TMat::new(&mut rng, k, n, Lay::RowMajor, 0.0);
            let mut y = TMat::new(&mut rng, m, n, Lay::RowMajor, 0.0);
            let (alpha, beta) = (0.5, 0.75);
            let want = reference(
                alpha,
                &|i, p| x.vals[i * k + p],
                &|p, j| b.vals[p * n + j],
                beta,
                &|i, j| y.vals[i * n + j],
                &Epilogue::default(),
                (m, k, n),
            );
            gemv_kn(
                alpha,
                x.view(),
                b.view(),
                beta,
                y.view_mut(),
                &Epilogue::default(),
            )
            .unwrap();
            y.assert_guard();
            let what = std::format!("{isa:?} gemv_kn m={m} k={k} n={n}");
            assert_close(&|i, j| y.buf[i * n + j], &want, m, n, &what);
        }
    });
}

/// [K, N] GEMV of five to eight x rows, two passes over blocks of B of whole rows
/// of up to 4096 f32 or 8192 f16 columns, 16 rows at a time: these shapes cut B
/// into ragged column blocks and ragged row blocks (shorter than the kernels' four
/// or eight B rows at a time), with f32 and f16 weights, beta and a bias.
#[test]
fn gemv_kn_two_passes_cover_ragged_blocks() {
    if crate::testing::MIRI {
        return;
    }
    let mut rng = Rng(59);
    for_each_isa(|isa| {
        for &(m, k, n) in &[(5, 37, 4100), (8, 41, 8200), (7, 3, 4097)] {
            for f16 in [false, true] {
                let x = TMat::new(&mut rng, m, k, Lay::RowMajor, 0.0);
                let b = TMat::new(&mut rng, k, n, Lay::RowMajor, 0.0);
                let mut y = TMat::new(&mut rng, m, n, Lay::RowMajor, 0.0);
                let bias: Vec<f32> = (0..n).map(|_| rng.f32()).collect();
                let epi = Epilogue {
                    bias: Some(&bias),
                    ..Default::default()
                };
                let (alpha, beta) = (1.5, 0.25);
                let round = |v: f32| match f16 {
                    true => half::f16::from_f32(v).to_f32(),
                    false => v,
                };
                let want = reference(
                    alpha,
                    &|i, p| x.vals[i * k + p],
                    &|p, j| round(b.vals[p * n + j]),
                    beta,
                    &|i, j| y.vals[i * n + j],
                    &epi,
                    (m, k, n),
                );
                let end = b.buf.len() - GUARD_LEN;
                if f16 {
                    let bh = b.convert(half::f16::from_f32);
                    let bv = MatRef::new(&bh[b.off..end], k, n, b.rs, b.cs).unwrap();
                    gemv_kn(alpha, x.view(), bv, beta, y.view_mut(), &epi)
                } else {
                    gemv_kn(alpha, x.view(), b.view(), beta, y.view_mut(), &epi)
                }
                .unwrap();
                y.assert_guard();
                let what = std::format!("{isa:?} gemv_kn m={m} k={k} n={n} f16={f16}");
                assert_close(&|i, j| y.buf[i * n + j], &want, m, n, &what);
            }
        }
    });
}

#[test]
fn bad_arguments_are_errors() {
    let a = vec![0.0f32; 12];
    let b = vec![0.0f32; 12];
    let mut c = vec![0.0f32; 9];
    // Views that do not fit.
    assert!(MatRef::new(&a[..11], 3, 4, 4, 1).is_err());
    assert!(MatRef::new(&a, 3, 4, 5, 1).is_err());
    assert!(MatRef::new(&a, 2, 2, usize::MAX, 1).is_err());
    // Overlapping outputs.
    assert!(MatMut::new(&mut c, 3, 3, 0, 1).is_err());
    assert!(MatMut::new(&mut c, 3, 3, 2, 1).is_err());
    assert!(MatMut::new(&mut c, 1, 3, 0, 0).is_err());
    let av = MatRef::row_major(&a, 3, 4).unwrap();
    let bv = MatRef::row_major(&b, 4, 3).unwrap();
    let need = gemm_scratch_len(3, 3, 4);
    let mut s = vec![0.0; need];
    // Scratch too short.
    let cm = MatMut::row_major(&mut c, 3, 3).unwrap();
    assert_eq!(
        gemm(1.0, av, bv, 0.0, cm, &mut s[..need - 1]),
        Err(Error::BufferTooSmall {
            needed: need,
            got: need - 1
        })
    );
    // Shape mismatch.
    let cm = MatMut::row_major(&mut c, 3, 3).unwrap();
    assert!(gemm(1.0, av, av, 0.0, cm, &mut s).is_err());
    // Epilogue lengths.
    let short = [0.0f32; 2];
    let cm = MatMut::row_major(&mut c, 3, 3).unwrap();
    let epi = Epilogue {
        bias: Some(&short),
        ..Default::default()
    };
    assert!(gemm_ex(1.0, av, bv, 0.0, cm, &epi, &mut s).is_err());
    // Packed B too short, misaligned column range.
    let packed = vec![0.0f32; packed_b_len(4, 3).unwrap()];
    assert!(PackedB::new(&packed[..packed.len() - 1], 4, 3).is_err());
    let mut small = vec![0.0f32; 3];
    assert!(pack_b(bv, &mut small).is_err());
    let pb = PackedB::new(&packed, 4, 3).unwrap();
    assert!(pb.sub_cols(1..3).is_err());
    assert!(pb.sub_cols(0..4).is_err());
    // Ranges out of bounds.
    let cm = MatMut::row_major(&mut c, 3, 3).unwrap();
    assert!(
        gemm_range(
            1.0,
            av,
            bv,
            0.0,
            cm,
            &Epilogue::default(),
            2..4,
            0..3,
            &mut s
        )
        .is_err()
    );
    // GEMV needs unit column strides.
    let cm = MatMut::row_major(&mut c, 3, 3).unwrap();
    let wt = MatRef::col_major(&b, 3, 4).unwrap();
    assert_eq!(
        gemv_nk(1.0, av, wt, 0.0, cm, &Epilogue::default()),
        Err(Error::NotContiguous)
    );
    // Nothing was written by the failed calls.
    assert!(c.iter().all(|&v| v == 0.0));
}

#[test]
fn gemm_matches_rml_core_reference_matmul() {
    use rml_core::ops::matmul::{MatmulOptions, matmul};
    use rml_core::view::Layout;
    use rml_core::{Shape, Strides, TensorView, TensorViewMut};
    let mut rng = Rng(43);
    let eps = f32::EPSILON as f64;
    for_each_isa(|isa| {
        let shapes: &[(usize, usize, usize)] = if crate::testing::MIRI {
            &[(1, 1, 1), (7, 13, 17)]
        } else {
            &[
                (1, 1, 1),
                (7, 13, 17),
                (37, 300, 41),
                (6, 16, 96),
                (3, 64, 5),
            ]
        };
        for &(m, k, n) in shapes {
            let a = TMat::new(&mut rng, m, k, Lay::Padded, 0.0);
            let b = TMat::new(&mut rng, k, n, LAYS[(m + n) % 4], 0.0);
            let view = |t: &TMat| Layout {
                shape: Shape::new(&[t.rows, t.cols]).unwrap(),
                strides: Strides::new(&[t.rs, t.cs]).unwrap(),
                offset: t.off,
            };
            let av = TensorView::with_layout(&a.buf[..], view(&a)).unwrap();
            let bv = TensorView::with_layout(&b.buf[..], view(&b)).unwrap();
            let mut want = vec![0.0f32; m * n];
            let mut ov = TensorViewMut::new(&mut want, Shape::new(&[m, n]).unwrap()).unwrap();
            matmul(&av, &bv, &mut ov, MatmulOptions::default()).unwrap();
            let mut c = TMat::new(&mut rng, m, n, Lay::RowMajor, f32::NAN);
            let mut s = vec![0.0; gemm_scratch_len(m, n, k)];
            gemm(1.0, a.view(), b.view(), 0.0, c.view_mut(), &mut s).unwrap();
            for i in 0..m {
                for j in 0..n {
                    // Both sides round; each is within k·ε·Σ|a·b| of the exact value.
                    let mag: f64 = (0..k)
                        .map(|p| (a.vals[i * k + p] as f64 * b.vals[p * n + j] as f64).abs())
                        .sum();
                    let tol = 2.0 * DOT_TOL_FACTOR * (k as f64 + 2.0) * eps * mag + 1e-30;
                    let (g, w) = (c.get(i, j) as f64, want[i * n + j] as f64);
                    assert!(
                        (g - w).abs() <= tol,
                        "{isa:?} {m}x{k}x{n} [{i},{j}]: {g} vs {w}"
                    );
                }
            }
        }
    });
}
