//! Quantized kernels: activation quantizers, dequantization, dot products, the row-range
//! quantized GEMV used for LLM decode, and a small-M quantized GEMM for prompts.
//!
//! Weights stay in their GGML block bytes (as they lie in a GGUF mmap); activations are
//! quantized once per matmul input into the weight type's activation format
//! ([`vec_dot_type`]: Q8_0, Q8_1 or Q8_K) and each output is an integer dot product per
//! block, scaled. Every function takes byte slices, checks every length, and returns an
//! [`Error`] for a wrong one or an unsupported dtype.
//!
//! Paths: AVX2 (x86_64) has SIMD dots for all ten weight types, SIMD activation
//! quantizers and SIMD dequantization for Q4_0, Q8_0, Q4_K and Q6_K; NEON (aarch64) has
//! SIMD dots for all ten weight types and the Q8_0 quantizer. Everything else runs
//! the scalar path, which is rml-core's reference code. Activation quantizers are
//! bit-exact with the reference on every path; dots agree with the reference to f32
//! rounding (the summation order differs).
//!
//! Small-M GEMM: on AVX2, from 8 activation rows, every weight type runs a
//! register-blocked kernel (`gemm_avx2`: weight panels unpacked once per call into a
//! stack buffer, then an integer micro-kernel per group of activation rows); the other
//! paths and fewer rows run the GEMV row kernels over cache-resident tiles of weight
//! rows.
//!
//! Threading: [`gemv`] and [`gemm_quantized`] compute a caller-chosen range of weight
//! rows, so a host splits `0..n` into disjoint ranges, one per thread, with the
//! activations quantized once and shared read-only.

use core::ops::Range;

use rml_core::quant::{
    BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1, BlockQ5K, BlockQ6K,
    BlockQ8_0, BlockQ8_1, BlockQ8K, QuantBlock, QuantDot,
};
use rml_core::{DType, Error, Result};

use crate::isa;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod gemm_avx2;
#[cfg(target_arch = "aarch64")]
mod neon;
mod scalar;

pub use rml_core::quant::vec_dot_type;

/// Weight rows computed per tile in [`gemm_quantized`]: a tile of weight rows is reused
/// from cache for every activation row.
const GEMM_ROW_TILE: usize = 16;

/// Activation rows from which [`gemm_quantized`] runs the register-blocked AVX2
/// kernel (measured faster than the row kernels at 8 for every type; fewer rows are
/// not measured).
#[cfg(target_arch = "x86_64")]
const TILE_MIN_M: usize = 8;

/// True for the weight types these kernels compute with (the ten that have a dot product).
pub fn is_weight_type(dtype: DType) -> bool {
    vec_dot_type(dtype).is_ok()
}

/// Bytes of one row of `k` elements of `dtype` (`k` must be a multiple of its block).
pub fn row_bytes(dtype: DType, k: usize) -> Result<usize> {
    if !dtype.is_quantized() {
        return Err(Error::UnsupportedDType(dtype));
    }
    dtype.storage_bytes(k)
}

fn check_eq(expected: usize, got: usize) -> Result<()> {
    if expected != got {
        return Err(Error::LengthMismatch { expected, got });
    }
    Ok(())
}

/// Quantizes `x` (a whole number of blocks) into activation blocks of `act` (Q8_0, Q8_1
/// or Q8_K), bit-exact with rml-core's reference quantizer. `dst` must hold exactly
/// `act.storage_bytes(x.len())` bytes; any alignment is accepted.
pub fn quantize_act(act: DType, x: &[f32], dst: &mut [u8]) -> Result<()> {
    if !matches!(act, DType::Q8_0 | DType::Q8_1 | DType::Q8K) {
        return Err(Error::UnsupportedDType(act));
    }
    check_eq(act.storage_bytes(x.len())?, dst.len())?;
    match isa::active() {
        #[cfg(target_arch = "x86_64")]
        isa if isa.has_avx2() => avx2::quantize_act(act, x, dst),
        #[cfg(target_arch = "aarch64")]
        isa::Isa::Neon if act == DType::Q8_0 => neon::quantize_q8_0(x, dst),
        _ => scalar::quantize_act(act, x, dst),
    }
}

/// Dequantizes `src` (whole blocks of `dtype`, any of the twelve GGML block types) into
/// `dst`, bit-exact with rml-core's reference dequantizer.
pub fn dequantize(dtype: DType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    if !dtype.is_quantized() {
        return Err(Error::UnsupportedDType(dtype));
    }
    check_eq(dtype.storage_bytes(dst.len())?, src.len())?;
    #[cfg(target_arch = "x86_64")]
    if isa::active().has_avx2() && avx2::dequantize(dtype, src, dst) {
        return Ok(());
    }
    scalar::dequantize(dtype, src, dst)
}

/// The dot product of one row of `weight` blocks with one row of activation blocks in
/// `vec_dot_type(weight)`, both `k` elements long.
pub fn dot(weight: DType, w: &[u8], act: &[u8]) -> Result<f32> {
    let mut out = [0f32];
    let act_t = vec_dot_type(weight)?;
    let k = w.len() / weight.type_size().max(1) * weight.block_size();
    check_eq(weight.storage_bytes(k)?, w.len())?;
    check_eq(act_t.storage_bytes(k)?, act.len())?;
    rows_dot(weight, w, act, &mut out, false)?;
    Ok(out[0])
}

/// Quantized GEMV over a row range: `out[r - rows.start] = W[r] · a` for `r` in `rows`.
///
/// `weights` holds the whole `n × k` matrix of `weight` blocks, row-major (`n` is its
/// length divided by the row size); `act` is one activation row of `k` elements already
/// quantized to `vec_dot_type(weight)` with [`quantize_act`]; `out.len()` must equal
/// `rows.len()`.
pub fn gemv(
    weight: DType,
    weights: &[u8],
    k: usize,
    act: &[u8],
    rows: Range<usize>,
    out: &mut [f32],
) -> Result<()> {
    let act_t = vec_dot_type(weight)?;
    let rb = row_bytes(weight, k)?;
    check_eq(row_bytes(act_t, k)?, act.len())?;
    check_eq(rows.len(), out.len())?;
    let w = row_slice(weights, rb, &rows)?;
    rows_dot(weight, w, act, out, false)
}

/// The weight bytes of `rows`, checked against the matrix size.
fn row_slice<'a>(weights: &'a [u8], rb: usize, rows: &Range<usize>) -> Result<&'a [u8]> {
    if rb == 0 || !weights.len().is_multiple_of(rb) {
        return Err(Error::InvalidArgument(
            "weight bytes are not a whole number of rows",
        ));
    }
    let n = weights.len() / rb;
    if rows.start > rows.end || rows.end > n {
        return Err(Error::IndexOutOfRange {
            index: rows.end as i64,
            len: n,
        });
    }
    Ok(&weights[rows.start * rb..rows.end * rb])
}

/// `out[i] = row i of w · act` for `out.len()` consecutive weight rows in `w`.
/// Lengths are already consistent; `cached` is true for GEMM tiles (rows hot in cache).
fn rows_dot(weight: DType, w: &[u8], act: &[u8], out: &mut [f32], cached: bool) -> Result<()> {
    #[cfg(not(target_arch = "x86_64"))]
    let _ = cached;
    let done = match isa::active() {
        #[cfg(target_arch = "x86_64")]
        isa if isa.has_avx2() => avx2::rows_dot(weight, w, act, out, cached),
        #[cfg(target_arch = "aarch64")]
        isa::Isa::Neon => neon::rows_dot(weight, w, act, out),
        _ => false,
    };
    if done {
        return Ok(());
    }
    scalar::rows_dot(weight, w, act, out)
}

/// Scratch bytes [`gemm`] needs to quantize `m` activation rows of `k` elements for a
/// `weight` matrix.
pub fn gemm_scratch_len(weight: DType, m: usize, k: usize) -> Result<usize> {
    row_bytes(vec_dot_type(weight)?, k)?
        .checked_mul(m)
        .ok_or(Error::Overflow)
}

/// Small-M quantized GEMM: `out[i·ldo + (r − rows.start)] = x_i · W[r]` for the `m`
/// activation rows `x_i` (row-major `m × k` f32) and the weight rows `r` in `rows`.
///
/// The activations are quantized once into `scratch` (at least
/// [`gemm_scratch_len`] bytes), then [`gemm_quantized`] runs. A threaded host should
/// instead quantize once with [`quantize_act`] and call [`gemm_quantized`] per thread.
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    weight: DType,
    weights: &[u8],
    k: usize,
    x: &[f32],
    m: usize,
    rows: Range<usize>,
    out: &mut [f32],
    ldo: usize,
    scratch: &mut [u8],
) -> Result<()> {
    let need = gemm_scratch_len(weight, m, k)?;
    if scratch.len() < need {
        return Err(Error::BufferTooSmall {
            needed: need,
            got: scratch.len(),
        });
    }
    check_eq(m.checked_mul(k).ok_or(Error::Overflow)?, x.len())?;
    let act_t = vec_dot_type(weight)?;
    let arb = row_bytes(act_t, k)?;
    let acts = &mut scratch[..need];
    for (xr, ar) in x
        .chunks_exact(k.max(1))
        .zip(acts.chunks_exact_mut(arb.max(1)))
    {
        quantize_act(act_t, xr, ar)?;
    }
    gemm_quantized(weight, weights, k, acts, m, rows, out, ldo)
}

/// Small-M quantized GEMM on activations already quantized: `acts` holds `m` rows of
/// `k` elements in `vec_dot_type(weight)`. Output row `i` starts at `out[i·ldo]` and
/// holds `rows.len()` values, so `ldo ≥ rows.len()` and
/// `out.len() ≥ (m − 1)·ldo + rows.len()`. Weight rows are processed in tiles that stay
/// in cache while every activation row passes over them; `m = 1` is [`gemv`]; on AVX2
/// with `m ≥ 8` the tiles are unpacked once into a stack buffer (about 40 KiB of stack)
/// and the results agree with [`gemv`] to f32 rounding, not bit for bit.
#[allow(clippy::too_many_arguments)]
pub fn gemm_quantized(
    weight: DType,
    weights: &[u8],
    k: usize,
    acts: &[u8],
    m: usize,
    rows: Range<usize>,
    out: &mut [f32],
    ldo: usize,
) -> Result<()> {
    let act_t = vec_dot_type(weight)?;
    let rb = row_bytes(weight, k)?;
    let arb = row_bytes(act_t, k)?;
    check_eq(arb.checked_mul(m).ok_or(Error::Overflow)?, acts.len())?;
    let w = row_slice(weights, rb, &rows)?;
    let nr = rows.len();
    if m == 0 || nr == 0 {
        return Ok(());
    }
    if ldo < nr {
        return Err(Error::InvalidArgument("ldo is smaller than the row range"));
    }
    let need = (m - 1)
        .checked_mul(ldo)
        .and_then(|v| v.checked_add(nr))
        .ok_or(Error::Overflow)?;
    if out.len() < need {
        return Err(Error::BufferTooSmall {
            needed: need,
            got: out.len(),
        });
    }
    if m == 1 {
        // One activation row (decode): the rows stream once, as in [`gemv`].
        return rows_dot(weight, w, acts, &mut out[..nr], false);
    }
    #[cfg(target_arch = "x86_64")]
    if m >= TILE_MIN_M && gemm_avx2::gemm(isa::active(), weight, w, k, acts, m, out, ldo) {
        return Ok(());
    }
    let mut r0 = 0;
    while r0 < nr {
        let r1 = (r0 + GEMM_ROW_TILE).min(nr);
        let wt = &w[r0 * rb..r1 * rb];
        for i in 0..m {
            let a = &acts[i * arb..(i + 1) * arb];
            rows_dot(weight, wt, a, &mut out[i * ldo + r0..i * ldo + r1], true)?;
        }
        r0 = r1;
    }
    Ok(())
}

/// Typed convenience over [`dot`] for callers that hold block slices.
pub fn dot_blocks<W: QuantDot>(w: &[W], act: &[W::Act]) -> Result<f32> {
    check_eq(w.len() * W::BLOCK, act.len() * W::Act::BLOCK)?;
    dot(W::DTYPE, bytemuck::cast_slice(w), bytemuck::cast_slice(act))
}

/// Block size in bytes of each block type, for the per-arch modules.
pub(crate) const fn block_bytes(dtype: DType) -> usize {
    match dtype {
        DType::Q4_0 => core::mem::size_of::<BlockQ4_0>(),
        DType::Q4_1 => core::mem::size_of::<BlockQ4_1>(),
        DType::Q5_0 => core::mem::size_of::<BlockQ5_0>(),
        DType::Q5_1 => core::mem::size_of::<BlockQ5_1>(),
        DType::Q8_0 => core::mem::size_of::<BlockQ8_0>(),
        DType::Q8_1 => core::mem::size_of::<BlockQ8_1>(),
        DType::Q2K => core::mem::size_of::<BlockQ2K>(),
        DType::Q3K => core::mem::size_of::<BlockQ3K>(),
        DType::Q4K => core::mem::size_of::<BlockQ4K>(),
        DType::Q5K => core::mem::size_of::<BlockQ5K>(),
        DType::Q6K => core::mem::size_of::<BlockQ6K>(),
        DType::Q8K => core::mem::size_of::<BlockQ8K>(),
        _ => 0,
    }
}

const _: () = assert!(block_bytes(DType::Q8K) == 292 && BlockQ8_0::BLOCK == 32);
