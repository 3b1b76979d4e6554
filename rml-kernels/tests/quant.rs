//! Quantized kernels on every ISA this machine runs, against rml-core's reference:
//! activation quantizers and dequantizers bit for bit, dots/GEMV/GEMM to f32 rounding
//! and against the f32 dot of the dequantized operands.

use rml_kernels::testing::MIRI;
use std::sync::Mutex;

use rml_kernels::isa::{self, ALL_ISAS, Isa};
use rml_kernels::quant as kq;
use rml_kernels::rml_core::quant::{self as rq, vec_dot_type};
use rml_kernels::rml_core::{DType, Error};

/// `isa::force` is global: tests that switch ISAs take this lock.
static ISA_LOCK: Mutex<()> = Mutex::new(());

const WEIGHTS: [DType; 10] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q2K,
    DType::Q3K,
    DType::Q4K,
    DType::Q5K,
    DType::Q6K,
];

struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn uniform(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 + 0.5) / (1u64 << 24) as f32
    }
    fn normal(&mut self) -> f32 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos()
    }
    /// Gaussian values with a per-32-block scale, an all-zero block and exact ties.
    fn data(&mut self, n: usize) -> Vec<f32> {
        let mut x: Vec<f32> = (0..n).map(|_| self.normal()).collect();
        for (b, chunk) in x.chunks_mut(32).enumerate() {
            let s = [0.01f32, 1.0, 30.0, 0.0003][b % 4] * (1.0 + self.uniform());
            chunk.iter_mut().for_each(|v| *v *= s);
            if b % 7 == 5 {
                chunk.fill(0.0);
            }
            if b % 11 == 3 {
                for (i, v) in chunk.iter_mut().enumerate() {
                    *v = (i as f32 - 16.0) * 0.5;
                }
            }
        }
        x
    }
}

fn isas() -> Vec<Isa> {
    ALL_ISAS.into_iter().filter(|i| i.is_supported()).collect()
}

fn ref_quantize(dtype: DType, x: &[f32]) -> Vec<u8> {
    // u32 backing keeps the bytes aligned for every block type.
    let n = dtype.storage_bytes(x.len()).unwrap();
    let mut words = vec![0u32; n.div_ceil(4)];
    let bytes = &mut bytemuck::cast_slice_mut::<u32, u8>(&mut words)[..n];
    rq::quantize_bytes(dtype, x, bytes).unwrap();
    bytes.to_vec()
}

/// Runs `f` on a copy of `b` in u32-backed storage: the reference reads blocks as
/// typed structs, which need their natural alignment (a `Vec<u8>` only guarantees 1,
/// and Miri hands out exactly that).
fn with_aligned<R>(b: &[u8], f: impl FnOnce(&[u8]) -> R) -> R {
    let mut words = vec![0u32; b.len().div_ceil(4)];
    let bytes = &mut bytemuck::cast_slice_mut::<u32, u8>(&mut words)[..b.len()];
    bytes.copy_from_slice(b);
    f(bytes)
}

fn ref_dequantize(dtype: DType, b: &[u8]) -> Vec<f32> {
    let n = b.len() / dtype.type_size() * dtype.block_size();
    let mut out = vec![0f32; n];
    with_aligned(b, |bytes| rq::dequantize_bytes(dtype, bytes, &mut out)).unwrap();
    out
}

/// A copy of `b` starting at an odd address (kernels must accept any alignment).
fn misaligned(b: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; b.len() + 1];
    v[1..].copy_from_slice(b);
    v
}

#[test]
fn activation_quantizers_are_bit_exact_on_every_isa() {
    let _g = ISA_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = Rng(1);
    let x = rng.data(256 * if MIRI { 2 } else { 6 });
    for isa in isas() {
        isa::force(isa).unwrap();
        for act in [DType::Q8_0, DType::Q8_1, DType::Q8K] {
            let want = ref_quantize(act, &x);
            let mut buf = vec![0u8; want.len() + 1];
            kq::quantize_act(act, &x, &mut buf[1..]).unwrap();
            assert_eq!(&buf[1..], &want[..], "{isa:?} {act}");
        }
    }
    isa::force(isa::detect()).unwrap();
}

#[test]
fn dequantizers_are_bit_exact_on_every_isa() {
    let _g = ISA_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = Rng(2);
    let x = rng.data(256 * if MIRI { 1 } else { 5 });
    for isa in isas() {
        isa::force(isa).unwrap();
        for dtype in WEIGHTS.into_iter().chain([DType::Q8_1, DType::Q8K]) {
            let q = ref_quantize(dtype, &x);
            let want = ref_dequantize(dtype, &q);
            let src = misaligned(&q);
            let mut got = vec![0f32; x.len()];
            kq::dequantize(dtype, &src[1..], &mut got).unwrap();
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert_eq!(g.to_bits(), w.to_bits(), "{isa:?} {dtype} element {i}");
            }
        }
    }
    isa::force(isa::detect()).unwrap();
}

/// Asserts that `got` (one output of a kernel) matches the reference dot of the
/// weight row `w` with the activation row `a` to f32 rounding, and the f64 dot of
/// their dequantized values `wdq`, `adq` to the activation quantization's error.
fn assert_dot_close(
    dtype: DType,
    w: &[u8],
    a: &[u8],
    wdq: &[f32],
    adq: &[f32],
    got: f32,
    ctx: &str,
) {
    let want = with_aligned(w, |w| with_aligned(a, |a| rq::dot_bytes(dtype, w, a))).unwrap();
    let f64dot: f64 = wdq
        .iter()
        .zip(adq)
        .map(|(x, y)| *x as f64 * *y as f64)
        .sum();
    let mag: f64 = wdq
        .iter()
        .zip(adq)
        .map(|(x, y)| (*x as f64 * *y as f64).abs())
        .sum();
    let tol = 2e-6 * mag + 1e-30;
    assert!(
        (got as f64 - want as f64).abs() <= tol,
        "{ctx}: kernel {got} vs reference {want}"
    );
    // The min terms of Q4_1/Q5_1 use the f16-rounded s = d·Σq of Q8_1.
    let tol_f = 1e-3 * mag + 1e-30;
    assert!(
        (got as f64 - f64dot).abs() <= tol_f,
        "{ctx}: kernel {got} vs f32 dot {f64dot}"
    );
}

/// GEMV on `n` rows against the reference dot of each row, and against the f32 dot of
/// the dequantized operands.
fn check_gemv(dtype: DType, n: usize, k: usize, rng: &mut Rng, isa: Isa) {
    let act_t = vec_dot_type(dtype).unwrap();
    let w = ref_quantize(dtype, &rng.data(n * k));
    let xa = rng.data(k);
    let a = ref_quantize(act_t, &xa);
    let rb = dtype.storage_bytes(k).unwrap();
    let wdq = ref_dequantize(dtype, &w);
    let adq = ref_dequantize(act_t, &a);
    let wm = misaligned(&w);
    let am = misaligned(&a);
    for rows in [0..n, 1..n - 1, 2..3] {
        let mut out = vec![f32::NAN; rows.len()];
        kq::gemv(dtype, &wm[1..], k, &am[1..], rows.clone(), &mut out).unwrap();
        for (r, got) in rows.clone().zip(&out) {
            let ctx = format!("{isa:?} {dtype} row {r}");
            let (wr, wd) = (&w[r * rb..(r + 1) * rb], &wdq[r * k..(r + 1) * k]);
            assert_dot_close(dtype, wr, &a, wd, &adq, *got, &ctx);
        }
    }
    // A row's result does not depend on the rows computed with it (the streaming
    // kernels interleave rows from the four quarters of the range): bit for bit the
    // same as the row alone.
    let mut all = vec![f32::NAN; n];
    kq::gemv(dtype, &w, k, &a, 0..n, &mut all).unwrap();
    for (r, got) in all.iter().enumerate() {
        let mut alone = [f32::NAN];
        kq::gemv(dtype, &w, k, &a, r..r + 1, &mut alone).unwrap();
        assert_eq!(
            got.to_bits(),
            alone[0].to_bits(),
            "{isa:?} {dtype} row {r} of {n}"
        );
    }
    // dot() is the one-row GEMV.
    let d = kq::dot(dtype, &w[..rb], &a).unwrap();
    let mut one = [0f32];
    kq::gemv(dtype, &w, k, &a, 0..1, &mut one).unwrap();
    assert_eq!(d.to_bits(), one[0].to_bits());
}

#[test]
fn gemv_matches_reference_on_every_isa() {
    let _g = ISA_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = Rng(3);
    for isa in isas() {
        isa::force(isa).unwrap();
        for dtype in WEIGHTS {
            let ks: &[usize] = match (dtype.block_size() == 32, MIRI) {
                // 608: whole groups of 8 blocks and a ragged tail (the Q4_0 GEMV kernel);
                // 16736: more than one pass of its prepared activation (512 blocks).
                // K-quants: 1536 (6 super-blocks) runs a streaming turn of four and a tail.
                (true, false) => &[32, 96, 512, 608, 16736],
                (false, false) => &[256, 768, 1536],
                (true, true) => &[64],
                (false, true) => &[256],
            };
            for &k in ks {
                // 9 rows: the streaming kernels' four quarters of 2 rows and one more.
                check_gemv(dtype, if MIRI { 5 } else { 9 }, k, &mut rng, isa);
            }
        }
    }
    isa::force(isa::detect()).unwrap();
}

/// Small-M GEMM of `m` rows against the reference dot of every (row, weight row)
/// pair. The weight range is ragged (not a multiple of the 8- or 16-row panels) and
/// `k` spans more than one K chunk of the AVX2 tile kernel.
fn check_gemm(dtype: DType, m: usize, n: usize, k: usize, rng: &mut Rng, isa: Isa) {
    let act_t = vec_dot_type(dtype).unwrap();
    let w = ref_quantize(dtype, &rng.data(n * k));
    let x = rng.data(m * k);
    let rb = dtype.storage_bytes(k).unwrap();
    let wdq = ref_dequantize(dtype, &w);
    let rows = 3..n;
    let ldo = rows.len() + 2;
    let mut out = vec![f32::NAN; (m - 1) * ldo + rows.len()];
    let mut scratch = vec![0u8; kq::gemm_scratch_len(dtype, m, k).unwrap() + 1];
    let wm = misaligned(&w);
    kq::gemm(
        dtype,
        &wm[1..],
        k,
        &x,
        m,
        rows.clone(),
        &mut out,
        ldo,
        &mut scratch[1..],
    )
    .unwrap();
    for i in 0..m {
        let a = ref_quantize(act_t, &x[i * k..(i + 1) * k]);
        let adq = ref_dequantize(act_t, &a);
        for (j, r) in rows.clone().enumerate() {
            let ctx = format!("{isa:?} {dtype} m {m} k {k} act row {i} weight row {r}");
            let (wr, wd) = (&w[r * rb..(r + 1) * rb], &wdq[r * k..(r + 1) * k]);
            assert_dot_close(dtype, wr, &a, wd, &adq, out[i * ldo + j], &ctx);
        }
        // The gap between output rows is left alone.
        if i + 1 < m {
            assert!(
                out[i * ldo + rows.len()..(i + 1) * ldo]
                    .iter()
                    .all(|v| v.is_nan())
            );
        }
    }
}

#[test]
fn gemm_matches_reference_on_every_isa() {
    let _g = ISA_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = Rng(4);
    let ms: &[usize] = if MIRI {
        &[1, 2]
    } else {
        &[1, 2, 3, 5, 8, 11, 17, 64, 65, 130]
    };
    for isa in isas() {
        isa::force(isa).unwrap();
        for dtype in WEIGHTS {
            // K: 33 blocks of 32 or 5 super-blocks (the AVX2 tile kernel's K chunk is
            // 1024 elements); 37 − 3 weight rows.
            let (n, k) = match (dtype.block_size() == 32, MIRI) {
                (true, false) => (37, 1056),
                (false, false) => (37, 1280),
                (true, true) => (8, 64),
                (false, true) => (8, 256),
            };
            for &m in ms {
                check_gemm(dtype, m, n, k, &mut rng, isa);
            }
        }
    }
    isa::force(isa::detect()).unwrap();
}

#[test]
fn bad_arguments_are_errors() {
    let w = vec![0u8; 18 * 4];
    let a = vec![0u8; 34 * 2];
    let mut out = vec![0f32; 2];
    assert!(kq::gemv(DType::Q4_0, &w, 64, &a, 0..2, &mut out).is_ok());
    assert!(kq::gemv(DType::Q4_0, &w, 64, &a, 1..3, &mut out).is_err());
    assert!(kq::gemv(DType::Q4_0, &w, 64, &a[..33], 0..2, &mut out).is_err());
    assert!(kq::gemv(DType::Q4_0, &w, 60, &a, 0..2, &mut out).is_err());
    assert!(kq::gemv(DType::Q4_0, &w[..71], 64, &a, 0..2, &mut out).is_err());
    assert!(kq::gemv(DType::Q4_0, &w, 64, &a, 0..1, &mut out).is_err());
    assert_eq!(
        kq::gemv(DType::Q8K, &w, 64, &a, 0..1, &mut out[..1]),
        Err(Error::UnsupportedDType(DType::Q8K))
    );
    assert!(kq::quantize_act(DType::Q4_0, &[0.0; 32], &mut [0u8; 18]).is_err());
    assert!(kq::quantize_act(DType::Q8_0, &[0.0; 32], &mut [0u8; 33]).is_err());
    assert!(kq::dequantize(DType::F32, &[0u8; 4], &mut [0.0; 1]).is_err());
    assert!(kq::dequantize(DType::Q8_0, &[0u8; 34], &mut [0.0; 31]).is_err());
    let mut scratch = [0u8; 10];
    let x = [0f32; 64];
    let mut o = [0f32; 4];
    assert!(matches!(
        kq::gemm(DType::Q4_0, &w, 64, &x, 1, 0..2, &mut o, 2, &mut scratch),
        Err(Error::BufferTooSmall { .. })
    ));
    let mut scratch = [0u8; 68];
    assert!(kq::gemm(DType::Q4_0, &w, 64, &x, 1, 0..2, &mut o, 1, &mut scratch).is_err());
    assert!(kq::gemm(DType::Q4_0, &w, 64, &x, 1, 0..2, &mut o, 2, &mut scratch).is_ok());
}
