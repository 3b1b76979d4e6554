//! AVX2 + FMA + F16C quantized kernels (x86_64).
//!
//! The entry points (`rows_dot`, `quantize_act`, `dequantize`) are safe: they check
//! that the CPU has the features and that every length is consistent, then run the
//! `unsafe` block kernels, which read blocks through raw pointers with unaligned loads
//! (GGUF data and caller scratch need no alignment).
//!
//! Integer products use `maddubs` (u8 × i8 → pairs of i16) and `madd` (→ i32). For a
//! signed × signed product the sign of the weight is moved onto the activation
//! (`sign_epi8`), which is exact as long as activations avoid −128 — rml's Q8
//! quantizers never produce it (|q| ≤ 127), as in ggml.

use core::arch::x86_64::*;

use rml_core::DType;

use super::block_bytes;
use crate::isa::Isa;

/// Offsets of the fields inside the activation blocks.
const Q8_0_QS: usize = 2;
const Q8_1_QS: usize = 4;
const Q8K_QS: usize = 4;
const Q8K_BSUMS: usize = 260;

type RowKernel = unsafe fn(*const u8, *const u8, usize) -> f32;
/// A whole-GEMV kernel: rows at `w` (`rb` apart), activation, blocks per row, the
/// one-row kernel for a ragged tail, outputs.
type GemvKernel = unsafe fn(*const u8, usize, *const u8, usize, RowKernel, &mut [f32]);
/// A whole-GEMV kernel without a tail kernel: rows at `w` (`rb` apart), activation,
/// blocks per row, outputs.
type GemvRows = unsafe fn(*const u8, usize, *const u8, usize, &mut [f32]);

/// `out[i]` = row `i` of `w` · `a`. Returns false (and does nothing) when AVX2 is not
/// available, the type has no kernel here, or the lengths are inconsistent. `cached`
/// says the rows are hot in cache (a GEMM tile): Q4_0 then runs four rows per pass,
/// which pays off when compute-bound; streaming (GEMV) the nibble types run
/// [`gemv_nibbles`], which prepares the activation once per call. The two agree to f32
/// rounding. Q8_0 runs [`gemv_q8_0`] (eight blocks per step) either way; streaming
/// Q4_K and Q6_K run [`gemv_q4_k`] and [`gemv_q6_k`], or their AVX512-VNNI twins
/// ([`gemv_q4_k_vnni`], [`gemv_q6_k_vnni`], bit for bit the same results) where the CPU
/// has it (Q4_K's runs 512-bit vectors and needs AVX512BW too). The streaming kernels keep four rows in flight ([`four_streams`]) with the
/// same per-row arithmetic as one row.
pub(super) fn rows_dot(weight: DType, w: &[u8], a: &[u8], out: &mut [f32], cached: bool) -> bool {
    if !Isa::Avx2.is_supported() || out.is_empty() {
        return out.is_empty();
    }
    let (kernel, act): (RowKernel, DType) = match weight {
        DType::Q4_0 => (dot_q4_0, DType::Q8_0),
        DType::Q4_1 => (dot_q4_1, DType::Q8_1),
        DType::Q5_0 => (dot_q5_0, DType::Q8_0),
        DType::Q5_1 => (dot_q5_1, DType::Q8_1),
        DType::Q8_0 => (dot_q8_0, DType::Q8_0),
        DType::Q2K => (dot_q2_k, DType::Q8K),
        DType::Q3K => (dot_q3_k, DType::Q8K),
        DType::Q4K => (dot_q4_k, DType::Q8K),
        DType::Q5K => (dot_q5_k, DType::Q8K),
        DType::Q6K => (dot_q6_k, DType::Q8K),
        _ => return false,
    };
    let (bw, ba) = (block_bytes(weight), block_bytes(act));
    let nb = a.len() / ba;
    let rb = nb * bw;
    if a.len() != nb * ba || w.len() != out.len() * rb {
        return false;
    }
    let gemv: Option<GemvKernel> = match weight {
        _ if cached => None,
        DType::Q4_0 => Some(gemv_nibbles::<18, 2, 0, false, 8>),
        DType::Q4_1 => Some(gemv_nibbles::<20, 4, 0, true, 0>),
        DType::Q5_0 => Some(gemv_nibbles::<22, 6, 2, false, 16>),
        DType::Q5_1 => Some(gemv_nibbles::<24, 8, 4, true, 0>),
        _ => None,
    };
    if let Some(gemv) = gemv {
        // SAFETY: AVX2/FMA/F16C are present; `w` holds `out.len()` rows of `nb` blocks,
        // `rb` bytes apart, `a` holds `nb` activation blocks, and `kernel` is the
        // one-row kernel of `weight`.
        unsafe { gemv(w.as_ptr(), rb, a.as_ptr(), nb, kernel, out) };
        return true;
    }
    let rows_kernel: Option<GemvRows> = match weight {
        DType::Q8_0 => Some(gemv_q8_0),
        _ if cached => None,
        DType::Q4K if vnni512_supported() => Some(gemv_q4_k_vnni),
        DType::Q4K => Some(gemv_q4_k),
        DType::Q6K if super::gemm_avx2::vnni::supported() => Some(gemv_q6_k_vnni),
        DType::Q6K => Some(gemv_q6_k),
        _ => None,
    };
    if let Some(gemv) = rows_kernel {
        // SAFETY: AVX2/FMA/F16C are present; `w` holds `out.len()` rows of `nb` blocks of
        // `weight`, `rb` bytes apart, and `a` holds `nb` blocks of its activation type.
        unsafe { gemv(w.as_ptr(), rb, a.as_ptr(), nb, out) };
        return true;
    }
    if weight == DType::Q4_0 {
        // Four rows share each activation block; a remainder runs the same code with
        // fewer rows, so every row's result is independent of the grouping. (Streaming
        // from DRAM, four adjacent rows interleaved measured ~2× slower than one row;
        // far-apart rows are what [`four_streams`] interleaves.)
        let mut chunks = out.chunks_exact_mut(4);
        let mut r = 0;
        for o in &mut chunks {
            // SAFETY: AVX2 present; rows r..r+4 lie inside `w` (w.len() == n·rb).
            o.copy_from_slice(&unsafe {
                dot_q4_0_rows::<4>(w.as_ptr().add(r * rb), rb, a.as_ptr(), nb)
            });
            r += 4;
        }
        for o in chunks.into_remainder() {
            // SAFETY: as above, for the single row r < n.
            *o = unsafe { dot_q4_0_rows::<1>(w.as_ptr().add(r * rb), rb, a.as_ptr(), nb) }[0];
            r += 1;
        }
        return true;
    }
    for (i, o) in out.iter_mut().enumerate() {
        // SAFETY: AVX2/FMA/F16C are present (checked above); row i is the `nb` blocks
        // of `bw` bytes at `w[i*rb..(i+1)*rb]`, and `a` holds `nb` blocks of `ba` bytes.
        *o = unsafe { kernel(w.as_ptr().add(i * rb), a.as_ptr(), nb) };
    }
    true
}

/// True when the CPU has what [`gemv_q4_k_vnni`] needs: AVX512-VNNI/VL (as the
/// 256-bit VNNI kernels) and AVX512BW for its 512-bit byte operations.
fn vnni512_supported() -> bool {
    super::gemm_avx2::vnni::supported() && avx512bw()
}

/// AVX512BW (with AVX512F) on this CPU.
#[cfg(feature = "std")]
fn avx512bw() -> bool {
    !cfg!(miri) && std::is_x86_feature_detected!("avx512bw")
}

/// AVX512BW (with AVX512F) in the build's target features (no run-time detection
/// without `std`).
#[cfg(not(feature = "std"))]
fn avx512bw() -> bool {
    cfg!(target_feature = "avx512bw")
}

/// Q4_0 · Q8_0 for `R` (1..=4) rows `rb` bytes apart, sharing each activation block:
/// Σ(q − 8)·y is computed as `maddubs(q, y) − maddubs(8, y)` (the second shared by
/// all rows); scales as in [`scale_product`], the activation's shared. Each row keeps two
/// accumulators, for even and odd blocks, so consecutive blocks' FMAs are independent
/// (one 4-cycle FMA chain per row capped single-row GEMV at ~64 % of read bandwidth);
/// the arithmetic per row is the same for every `R`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q4_0_rows<const R: usize>(
    w: *const u8,
    rb: usize,
    a: *const u8,
    nb: usize,
) -> [f32; R] {
    let mut acc = [[_mm256_setzero_ps(); R]; 2];
    let eight = _mm256_set1_epi8(8);
    let ones = _mm256_set1_epi16(1);
    // SAFETY: the caller guarantees R rows of `nb` 18-byte blocks, `rb` bytes apart,
    // at `w`, and `nb` 34-byte blocks at `a`.
    unsafe {
        let step = |i: usize, acc: &mut [__m256; R]| {
            let ab = a.add(34 * i);
            let y = ld256(ab.add(Q8_0_QS));
            let e = _mm256_maddubs_epi16(eight, y);
            let da = f16x4(ab);
            for (r, acc) in acc.iter_mut().enumerate() {
                let wb = w.add(r * rb + 18 * i);
                let q = nibbles(ld128(wb.add(2)));
                let p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, y), e);
                let s = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
                let d = _mm256_broadcastss_ps(_mm_mul_ps(f16x4(wb), da));
                *acc = _mm256_fmadd_ps(d, s, *acc);
            }
        };
        let [even, odd] = &mut acc;
        let mut i = 0;
        while i + 2 <= nb {
            step(i, even);
            step(i + 1, odd);
            i += 2;
        }
        if i < nb {
            step(i, even);
        }
    }
    core::array::from_fn(|r| hsum_ps(_mm256_add_ps(acc[0][r], acc[1][r])))
}

// ---------------------------------------------------------------------------------
// GEMV of the 32-element nibble types: the activation prepared once per call, eight
// blocks per step

/// Blocks per group of the nibble-type GEMV kernel.
const GROUP: usize = 8;
/// Bytes of one prepared activation group: for each block pair (2j, 2j + 1) the quants
/// 0..16 of both blocks, then 16..32 of both (64 bytes), matching how one 256-bit load
/// of the pair's nibbles unpacks; then an activation-only term per block (for Q8_0 the
/// weight type's offset times Σy, i32 × 8; for Q8_1 its `s`, f32 × 8) and the
/// activation scales (f32 × 8), both in the lane order of [`group_sums`].
const PREP_BYTES: usize = 4 * 64 + 32 + 32;
/// Groups prepared per pass (512 blocks, so k ≤ 16384 takes one pass; 20 KiB of stack).
const PREP_GROUPS: usize = 64;
/// Byte offsets of the per-block term and of the scales in a prepared group.
const PREP_TERM: usize = 4 * 64;
const PREP_SCALE: usize = PREP_TERM + 32;

/// Quantized GEMV of nibble-type rows (`rb` bytes apart, `nb` blocks each, `out.len()`
/// rows) with one activation row (Q8_0 or, for types with a min, Q8_1). The weight
/// blocks are BW bytes with the quant nibbles at QS, their 5th bits at QH (Q5_0/Q5_1;
/// 0 for none), an f16 min after the scale if MIN (Q4_1/Q5_1), and otherwise OFF
/// subtracted from every quant (8 for Q4_0, 16 for Q5_0). The activation
/// is rearranged once per call (and per 512 blocks) by [`prep_groups`], which takes the
/// activation-only work — the offset term, the scale conversion — out of the per-row
/// loop; the rows then run [`nibble_group`] per group, four rows in flight
/// ([`four_streams`], four groups of a row per turn), and the last `nb mod 8` blocks of each row `tail` (the one-block
/// kernel).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemv_nibbles<
    const BW: usize,
    const QS: usize,
    const QH: usize,
    const MIN: bool,
    const OFF: i8,
>(
    w: *const u8,
    rb: usize,
    a: *const u8,
    nb: usize,
    tail: RowKernel,
    out: &mut [f32],
) {
    let ba = if MIN { 36 } else { 34 };
    let mut prep = [0u8; PREP_GROUPS * PREP_BYTES];
    let ng = nb / GROUP;
    out.fill(0.0);
    let mut g0 = 0;
    // SAFETY: the caller guarantees `out.len()` rows of `nb` BW-byte blocks at `w`, `rb`
    // bytes apart, and `nb` activation blocks at `a`; groups g0..g1 < ng and the tail
    // blocks lie inside them, and `prep` holds PREP_GROUPS groups.
    unsafe {
        while g0 < ng {
            let g1 = (g0 + PREP_GROUPS).min(ng);
            prep_groups(a.add(ba * GROUP * g0), MIN, OFF, g1 - g0, prep.as_mut_ptr());
            let (row0, pp) = (w.add(BW * GROUP * g0), prep.as_ptr());
            four_streams::<4, _>(
                out.len(),
                g1 - g0,
                _mm256_setzero_ps(),
                |r, g, acc| {
                    let wg = row0.add(r * rb + BW * GROUP * g);
                    nibble_group::<BW, QS, QH, MIN>(wg, pp.add(PREP_BYTES * g), acc)
                },
                |r, acc| out[r] += hsum_ps(acc),
            );
            g0 = g1;
        }
        let done = GROUP * ng;
        if done < nb {
            for (r, o) in out.iter_mut().enumerate() {
                *o += tail(w.add(r * rb + BW * done), a.add(ba * done), nb - done);
            }
        }
    }
}

/// Runs one row kernel over `n` rows as four sequential streams in flight: the rows are
/// cut into four equal parts and row `r` of each part advances together, `step(row, i,
/// state)` over `i in 0..steps`, each row with its own state (named locals, which stay
/// in registers), `U` steps of one row before the next row's `U`; then `emit(row,
/// state)`. The last `steps mod U` steps go one per row, and the last `n mod 4` rows
/// run alone. Every row sees the same sequence of `step` calls either way, so its
/// result does not depend on the rows around it or on `U`. Four far-apart streams keep
/// more DRAM reads in flight than one (the hardware prefetchers follow each); adjacent
/// rows interleaved measured ~3× slower than one stream, and 2, 3, 6 or 8 far-apart
/// streams slower than four (docs/kernels.md, session 7b).
#[inline(always)]
fn four_streams<const U: usize, A: Copy>(
    n: usize,
    steps: usize,
    init: A,
    step: impl Fn(usize, usize, A) -> A,
    mut emit: impl FnMut(usize, A),
) {
    let h = n / 4;
    let run = |r: usize, i: usize, mut a: A| {
        for u in 0..U {
            a = step(r, i + u, a);
        }
        a
    };
    let whole = steps / U * U;
    for r in 0..h {
        let (mut a0, mut a1, mut a2, mut a3) = (init, init, init, init);
        for i in (0..whole).step_by(U) {
            a0 = run(r, i, a0);
            a1 = run(r + h, i, a1);
            a2 = run(r + 2 * h, i, a2);
            a3 = run(r + 3 * h, i, a3);
        }
        for i in whole..steps {
            a0 = step(r, i, a0);
            a1 = step(r + h, i, a1);
            a2 = step(r + 2 * h, i, a2);
            a3 = step(r + 3 * h, i, a3);
        }
        emit(r, a0);
        emit(r + h, a1);
        emit(r + 2 * h, a2);
        emit(r + 3 * h, a3);
    }
    for r in 4 * h..n {
        let mut a = init;
        for i in 0..steps {
            a = step(r, i, a);
        }
        emit(r, a);
    }
}

/// Rearranges `ng` groups of eight activation blocks at `a` (Q8_1 if `q8_1`, else
/// Q8_0 with the weight's quant `offset`) into the layout of [`PREP_BYTES`] at `dst`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn prep_groups(a: *const u8, q8_1: bool, offset: i8, ng: usize, dst: *mut u8) {
    let (ba, qs) = if q8_1 { (36, Q8_1_QS) } else { (34, Q8_0_QS) };
    let off = _mm256_set1_epi8(offset);
    // SAFETY: the caller guarantees `ng` groups of 8 activation blocks at `a` and
    // `ng·PREP_BYTES` writable bytes at `dst`.
    unsafe {
        for g in 0..ng {
            let (ag, dg) = (a.add(ba * GROUP * g), dst.add(PREP_BYTES * g));
            let sums = core::array::from_fn(|j| {
                let y0 = ag.add(2 * ba * j + qs);
                let y1 = y0.add(ba);
                let lo = _mm256_set_m128i(ld128(y1), ld128(y0));
                let hi = _mm256_set_m128i(ld128(y1.add(16)), ld128(y0.add(16)));
                _mm256_storeu_si256(dg.add(64 * j).cast(), lo);
                _mm256_storeu_si256(dg.add(64 * j + 32).cast(), hi);
                _mm256_add_epi16(_mm256_maddubs_epi16(off, lo), _mm256_maddubs_epi16(off, hi))
            });
            if q8_1 {
                _mm256_storeu_ps(dg.add(PREP_TERM).cast(), f16_group(ag.add(2), ba));
            } else {
                _mm256_storeu_si256(dg.add(PREP_TERM).cast(), group_sums(sums));
            }
            _mm256_storeu_ps(dg.add(PREP_SCALE).cast(), f16_group(ag, ba));
        }
    }
}

/// One group of eight nibble-type blocks at `wg` · the prepared group at `pg`, added to
/// `acc`. Per pair of blocks: one 256-bit load of both blocks'
/// nibbles (low 128 bits block 2j, high 2j + 1), two masks (and the 5th bits, for
/// QH ≠ 0), two `maddubs` against the prepared halves; per group: [`group_sums`]
/// (or [`group_sums_wide`] for 5-bit quants), minus the prepared offset term, times
/// the eight weight scales (converted together) and the activation scales, one FMA
/// (and for MIN one more, of the eight mins with the prepared `s`).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn nibble_group<const BW: usize, const QS: usize, const QH: usize, const MIN: bool>(
    wg: *const u8,
    pg: *const u8,
    mut acc: __m256,
) -> __m256 {
    let m4 = _mm256_set1_epi8(0x0f);
    let x10 = _mm256_set1_epi8(0x10);
    // SAFETY: the caller guarantees 8 BW-byte blocks at `wg` and a prepared group at
    // `pg`.
    unsafe {
        let sums = core::array::from_fn(|j| {
            let b0 = wg.add(2 * BW * j);
            let q = _mm256_set_m128i(ld128(b0.add(BW + QS)), ld128(b0.add(QS)));
            let mut lo = _mm256_and_si256(q, m4);
            let mut hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
            if QH != 0 {
                let (hl, hh) = fifth_bits(u32_at(b0.add(QH)), u32_at(b0.add(BW + QH)));
                lo = _mm256_or_si256(lo, _mm256_and_si256(hl, x10));
                hi = _mm256_or_si256(hi, _mm256_and_si256(hh, x10));
            }
            _mm256_add_epi16(
                _mm256_maddubs_epi16(lo, ld256(pg.add(64 * j))),
                _mm256_maddubs_epi16(hi, ld256(pg.add(64 * j + 32))),
            )
        });
        let mut s = if QH != 0 {
            group_sums_wide(sums)
        } else {
            group_sums(sums)
        };
        if !MIN {
            s = _mm256_sub_epi32(s, ld256(pg.add(PREP_TERM)));
        }
        let d = _mm256_mul_ps(
            f16_group(wg, BW),
            _mm256_loadu_ps(pg.add(PREP_SCALE).cast()),
        );
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), d, acc);
        if MIN {
            let term = _mm256_loadu_ps(pg.add(PREP_TERM).cast());
            acc = _mm256_fmadd_ps(f16_group(wg.add(2), BW), term, acc);
        }
    }
    acc
}

/// Quantized GEMV of Q8_0 rows (`rb` bytes apart, `nb` blocks each, `out.len()` rows)
/// with one Q8_0 activation row, eight blocks per step: each block's 32 products
/// become eight i32 lanes (`maddubs` of |w| and the sign-moved activation, then
/// `madd`), the eight blocks' vectors are reduced together by [`block_totals`] to one
/// i32 per block, and the eight weight and activation scales are converted together
/// ([`f16_group`]) for one FMA per eight blocks (the per-block kernel spends a scale
/// conversion, a product, a broadcast, a conversion and an FMA on every block). The
/// last `nb mod 8` blocks run [`dot_q8_0`]. Four rows are in flight
/// ([`four_streams`], four steps of a row per turn); a row's result does not depend on
/// the rows around it.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemv_q8_0(w: *const u8, rb: usize, a: *const u8, nb: usize, out: &mut [f32]) {
    let ng = nb / GROUP;
    let done = GROUP * ng;
    // SAFETY: the caller guarantees `out.len()` rows of `nb` 34-byte blocks at `w`,
    // `rb` bytes apart, and `nb` 34-byte blocks at `a`; every offset below is a
    // block < nb of a row r < out.len().
    unsafe {
        let row = |r: usize| w.add(r * rb);
        four_streams::<4, _>(
            out.len(),
            ng,
            _mm256_setzero_ps(),
            |r, g, acc| q8_0_group(row(r).add(34 * GROUP * g), a.add(34 * GROUP * g), acc),
            |r, acc| {
                out[r] = hsum_ps(acc);
                if done < nb {
                    out[r] += dot_q8_0(row(r).add(34 * done), a.add(34 * done), nb - done);
                }
            },
        );
    }
}

/// One group of eight Q8_0 blocks at `wg` · eight at `ag`, added to `acc` (see
/// [`gemv_q8_0`]).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0_group(wg: *const u8, ag: *const u8, acc: __m256) -> __m256 {
    let ones = _mm256_set1_epi16(1);
    // SAFETY: the caller guarantees eight 34-byte blocks at `wg` and at `ag`.
    unsafe {
        let v: [__m256i; GROUP] = core::array::from_fn(|j| {
            let x = ld256(wg.add(34 * j + 2));
            let y = ld256(ag.add(34 * j + Q8_0_QS));
            let p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
            _mm256_madd_epi16(p, ones)
        });
        let d = _mm256_mul_ps(f16_group(wg, 34), f16_group(ag, 34));
        _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_totals(v)), d, acc)
    }
}

/// The totals of eight vectors of eight i32 (one vector per block of a group), as i32
/// lanes in the order of [`f16_group`]: [0, 2, 4, 6, 1, 3, 5, 7].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn block_totals(v: [__m256i; GROUP]) -> __m256i {
    // Per 128-bit half: even blocks in `e`, odd in `o`, each lane a half's partial sum.
    let e = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[2]), _mm256_hadd_epi32(v[4], v[6]));
    let o = _mm256_hadd_epi32(_mm256_hadd_epi32(v[1], v[3]), _mm256_hadd_epi32(v[5], v[7]));
    _mm256_add_epi32(
        _mm256_permute2x128_si256::<0x20>(e, o),
        _mm256_permute2x128_si256::<0x31>(e, o),
    )
}

/// The 5th bits of a block pair as byte masks (0xFF where set) in the layout of the
/// pair's nibbles: for the low nibbles bits 0..16 of `h0` then of `h1`, for the high
/// nibbles bits 16..32 of each.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn fifth_bits(h0: u32, h1: u32) -> (__m256i, __m256i) {
    let v = _mm256_set_m128i(_mm_set1_epi32(h1 as i32), _mm_set1_epi32(h0 as i32));
    let spread = |lo: i64| {
        let hi = lo + 0x0101_0101_0101_0101;
        let bytes = _mm256_shuffle_epi8(v, _mm256_set_epi64x(hi, lo, hi, lo));
        let bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe));
        _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1))
    };
    (spread(0), spread(0x0202_0202_0202_0202))
}

/// The eight per-block sums of a group from its four pair vectors (pair j: i16 lanes
/// 0..8 belong to block 2j, 8..16 to block 2j + 1), as i32 lanes in the order
/// [0, 2, 4, 6, 1, 3, 5, 7]. The i16 partial sums stay exact as long as 16 products
/// fit in an i16 (4-bit quants × Q8: 16·15·127 < 2¹⁵).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn group_sums(p: [__m256i; 4]) -> __m256i {
    let h01 = _mm256_hadd_epi16(p[0], p[1]);
    let h23 = _mm256_hadd_epi16(p[2], p[3]);
    _mm256_madd_epi16(_mm256_hadd_epi16(h01, h23), _mm256_set1_epi16(1))
}

/// [`group_sums`] for 5-bit quants, whose 16-product sums can exceed an i16
/// (16·31·127): widened to i32 after 8 products.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn group_sums_wide(p: [__m256i; 4]) -> __m256i {
    let ones = _mm256_set1_epi16(1);
    let h01 = _mm256_madd_epi16(_mm256_hadd_epi16(p[0], p[1]), ones);
    let h23 = _mm256_madd_epi16(_mm256_hadd_epi16(p[2], p[3]), ones);
    _mm256_hadd_epi32(h01, h23)
}

/// The f16 scales at `p + stride·j` of the eight blocks j of a group, converted
/// together, in the lane order of [`group_sums`]. The halves are gathered with scalar
/// loads and shifts, which leave the vector pipes free.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_group(p: *const u8, stride: usize) -> __m256 {
    // SAFETY: the caller guarantees 2 readable bytes at `p + stride·j`, j < 8.
    let h = |j: usize| u64::from(unsafe { p.add(stride * j).cast::<u16>().read_unaligned() });
    let even = h(0) | h(2) << 16 | h(4) << 32 | h(6) << 48;
    let odd = h(1) | h(3) << 16 | h(5) << 32 | h(7) << 48;
    _mm256_cvtph_ps(_mm_set_epi64x(odd as i64, even as i64))
}

// ---------------------------------------------------------------------------------
// Helpers

/// Loads 32 bytes from `p`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn ld256(p: *const u8) -> __m256i {
    // SAFETY: the caller guarantees 32 readable bytes at `p`; the load is unaligned.
    unsafe { _mm256_loadu_si256(p.cast()) }
}

/// Loads 16 bytes from `p`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn ld128(p: *const u8) -> __m128i {
    // SAFETY: the caller guarantees 16 readable bytes at `p`; the load is unaligned.
    unsafe { _mm_loadu_si128(p.cast()) }
}

/// Reads the little-endian f16 at `p` as f32.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_at(p: *const u8) -> f32 {
    // SAFETY: the caller guarantees 2 readable bytes at `p`.
    let bits = unsafe { p.cast::<u16>().read_unaligned() };
    // A broadcast, not `cvtsi32_si128`: LLVM lowers the latter to a `vpinsrw` into
    // whatever register is free, which can chain every block onto an accumulator.
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16(bits as i16)))
}

/// The f16 at `p` converted and broadcast to 8 lanes. Every lane is used, so LLVM
/// keeps the `vpbroadcastw` load instead of inserting into a live register.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16x8(p: *const u8) -> __m256 {
    // SAFETY: the caller guarantees 2 readable bytes at `p`.
    let bits = unsafe { p.cast::<u16>().read_unaligned() };
    _mm256_cvtph_ps(_mm_set1_epi16(bits as i16))
}

/// The f16 at `p` converted to 4 lanes (a 4-lane conversion is one µop, the 8-lane
/// [`f16x8`] two).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16x4(p: *const u8) -> __m128 {
    // SAFETY: the caller guarantees 2 readable bytes at `p`.
    let bits = unsafe { p.cast::<u16>().read_unaligned() };
    _mm_cvtph_ps(_mm_set1_epi16(bits as i16))
}

/// `d_w·d_a` broadcast to 8 lanes from the f16 scales at `w` and `a`: two 4-lane
/// conversions, a 4-lane product and a broadcast — fewer µops than multiplying two
/// [`f16x8`], which limits the light blocks (Q4_0, Q5_0, Q8_0).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scale_product(w: *const u8, a: *const u8) -> __m256 {
    // SAFETY: the caller guarantees 2 readable bytes at `w` and at `a`.
    _mm256_broadcastss_ps(unsafe { _mm_mul_ps(f16x4(w), f16x4(a)) })
}

/// Reads the little-endian f32 at `p`.
#[inline]
unsafe fn f32_at(p: *const u8) -> f32 {
    // SAFETY: the caller guarantees 4 readable bytes at `p`.
    unsafe { p.cast::<f32>().read_unaligned() }
}

/// Reads the little-endian u32 at `p`.
#[inline]
unsafe fn u32_at(p: *const u8) -> u32 {
    // SAFETY: the caller guarantees 4 readable bytes at `p`.
    u32::from_le(unsafe { p.cast::<u32>().read_unaligned() })
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum_ps(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum_epi32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s)))
}

/// Σ of u8 × i8 products, 4 per i32 lane.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn mul_sum_us8(u: __m256i, s: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
}

/// Σ of i8 × i8 products, 4 per i32 lane (y must not hold −128).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn mul_sum_ss8(x: __m256i, y: __m256i) -> __m256i {
    mul_sum_us8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x))
}

/// 16 bytes of nibbles → 32 bytes: low nibbles first (elements 0..16), then high.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn nibbles(x: __m128i) -> __m256i {
    let hi = _mm_srli_epi16::<4>(x);
    _mm256_and_si256(_mm256_set_m128i(hi, x), _mm256_set1_epi8(0x0f))
}

/// 32 bits → 32 bytes, 0xFF where the bit is set.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn bits_to_bytes(x: u32) -> __m256i {
    let shuf = _mm256_set_epi64x(
        0x0303_0303_0303_0303,
        0x0202_0202_0202_0202,
        0x0101_0101_0101_0101,
        0,
    );
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(x as i32), shuf);
    let bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe));
    _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1))
}

/// The 16 i8 scales of a K-quant super-block, sign-extended to i16 (`s16`, as
/// `_mm256_cvtepi8_epi16` gives them), in the form [`scale_pair`] picks from: scales
/// 0..8 in both 128-bit halves, then 8..16 in both.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scale_halves(s16: __m256i) -> [__m256i; 2] {
    [
        _mm256_permute4x64_epi64::<0x44>(s16),
        _mm256_permute4x64_epi64::<0xee>(s16),
    ]
}

/// The i16 scale vector for a 32-element run covering sub-blocks `s` and `s + 1` (`s`
/// even) of 16: lanes 0..8 hold scale `s`, lanes 8..16 scale `s + 1`; one in-lane byte
/// shuffle of [`scale_halves`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scale_pair(halves: &[__m256i; 2], s: usize) -> __m256i {
    let t = (s % 8) as i16;
    let lo = ((2 * t + 1) << 8) | (2 * t);
    let hi = ((2 * t + 3) << 8) | (2 * t + 2);
    _mm256_shuffle_epi8(
        halves[s / 8],
        _mm256_set_m128i(_mm_set1_epi16(hi), _mm_set1_epi16(lo)),
    )
}

// ---------------------------------------------------------------------------------
// 32-element weight types × Q8_0 / Q8_1

/// Runs `block` over the `nb` blocks of one row, two blocks per iteration into two
/// independent accumulator pairs, so consecutive blocks' FMAs do not wait on each
/// other (one chain of 4-cycle FMAs capped Q4_0 at ~64 % of read bandwidth).
/// `block(w, a, (acc, summ))` adds one block's contribution: the products into `acc`
/// (all 8 lanes summed at the end) and, for the types with a min, `m·s` into lane 1 of
/// `summ` (see [`affine_scales`]).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn sum_blocks<const BW: usize, const BA: usize>(
    w: *const u8,
    a: *const u8,
    nb: usize,
    block: impl Fn(*const u8, *const u8, (__m256, __m256)) -> (__m256, __m256),
) -> f32 {
    let zero = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let (mut s0, mut s1) = (zero, zero);
    let mut i = 0;
    // SAFETY: the caller guarantees `nb` blocks of BW bytes at `w` and BA at `a`;
    // every offset below addresses a block < nb.
    unsafe {
        while i + 2 <= nb {
            s0 = block(w.add(BW * i), a.add(BA * i), s0);
            s1 = block(w.add(BW * (i + 1)), a.add(BA * (i + 1)), s1);
            i += 2;
        }
        if i < nb {
            s0 = block(w.add(BW * i), a.add(BA * i), s0);
        }
    }
    let summ = _mm256_castps256_ps128(_mm256_add_ps(s0.1, s1.1));
    hsum_ps(_mm256_add_ps(s0.0, s1.0)) + _mm_cvtss_f32(_mm_movehdup_ps(summ))
}

/// Q4_0 · Q8_0 over `nb` blocks of one row (the one-row case of [`dot_q4_0_rows`]).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q4_0(w: *const u8, a: *const u8, nb: usize) -> f32 {
    // SAFETY: forwarded from the caller: one row of `nb` blocks at `w`, `nb` at `a`.
    unsafe { dot_q4_0_rows::<1>(w, 0, a, nb)[0] }
}

/// Q8_0 · Q8_0 over `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q8_0(w: *const u8, a: *const u8, nb: usize) -> f32 {
    // SAFETY: `nb` blocks of 34 bytes at both `w` and `a`.
    unsafe {
        sum_blocks::<34, 34>(w, a, nb, |wb, ab, (acc, summ)| {
            let p = mul_sum_ss8(ld256(wb.add(2)), ld256(ab.add(Q8_0_QS)));
            let d = scale_product(wb, ab);
            (_mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc), summ)
        })
    }
}

/// For a Q4_1/Q5_1 block at `w` (f16 d, m) and its Q8_1 block at `a` (f16 d, s):
/// `d·d_a` broadcast to 8 lanes, and `m·s` added into lane 1 of `summ`. Both pairs
/// are converted with one 4-lane conversion each (cheaper than four 8-lane ones).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn affine_scales(w: *const u8, a: *const u8, summ: __m256) -> (__m256, __m256) {
    // SAFETY: the caller guarantees 4 readable bytes at `w` and at `a`.
    let (wd, ad) = unsafe { (u32_at(w), u32_at(a)) };
    let prod = _mm_mul_ps(
        _mm_cvtph_ps(_mm_set1_epi32(wd as i32)),
        _mm_cvtph_ps(_mm_set1_epi32(ad as i32)),
    );
    (
        _mm256_broadcastss_ps(prod),
        _mm256_add_ps(summ, _mm256_zextps128_ps256(prod)),
    )
}

/// Q4_1 · Q8_1 over `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q4_1(w: *const u8, a: *const u8, nb: usize) -> f32 {
    // SAFETY: `nb` blocks of 20 bytes at `w` and of 36 at `a`.
    unsafe {
        sum_blocks::<20, 36>(w, a, nb, |wb, ab, (acc, summ)| {
            let q = nibbles(ld128(wb.add(4)));
            let p = _mm256_cvtepi32_ps(mul_sum_us8(q, ld256(ab.add(Q8_1_QS))));
            let (d, summ) = affine_scales(wb, ab, summ);
            (_mm256_fmadd_ps(d, p, acc), summ)
        })
    }
}

/// Q5_0 · Q8_0 over `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q5_0(w: *const u8, a: *const u8, nb: usize) -> f32 {
    let f0 = _mm256_set1_epi8(0xf0u8 as i8);
    // SAFETY: `nb` blocks of 22 bytes at `w` and of 34 at `a`.
    unsafe {
        sum_blocks::<22, 34>(w, a, nb, |wb, ab, (acc, summ)| {
            // q − 16: a clear 5th bit sets the high nibble to 0xF (−16 as i8 offset).
            let hi = _mm256_andnot_si256(bits_to_bytes(u32_at(wb.add(2))), f0);
            let q = _mm256_or_si256(nibbles(ld128(wb.add(6))), hi);
            let p = _mm256_cvtepi32_ps(mul_sum_ss8(q, ld256(ab.add(Q8_0_QS))));
            (_mm256_fmadd_ps(scale_product(wb, ab), p, acc), summ)
        })
    }
}

/// Q5_1 · Q8_1 over `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q5_1(w: *const u8, a: *const u8, nb: usize) -> f32 {
    let x10 = _mm256_set1_epi8(0x10);
    // SAFETY: `nb` blocks of 24 bytes at `w` and of 36 at `a`.
    unsafe {
        sum_blocks::<24, 36>(w, a, nb, |wb, ab, (acc, summ)| {
            let hi = _mm256_and_si256(bits_to_bytes(u32_at(wb.add(4))), x10);
            let q = _mm256_or_si256(nibbles(ld128(wb.add(8))), hi);
            let p = _mm256_cvtepi32_ps(mul_sum_us8(q, ld256(ab.add(Q8_1_QS))));
            let (d, summ) = affine_scales(wb, ab, summ);
            (_mm256_fmadd_ps(d, p, acc), summ)
        })
    }
}

// ---------------------------------------------------------------------------------
// K-quants × Q8_K

/// The 8 scales (bytes 0..8) and 8 mins (bytes 8..16) of a Q4_K/Q5_K block.
#[inline]
pub(super) unsafe fn k4_scales_mins(p: *const u8) -> [u32; 4] {
    const M1: u32 = 0x3f3f_3f3f;
    const M2: u32 = 0x0f0f_0f0f;
    const M3: u32 = 0x0303_0303;
    // SAFETY: the caller guarantees 12 readable bytes at `p`.
    let (u0, u1, u2) = unsafe { (u32_at(p), u32_at(p.add(4)), u32_at(p.add(8))) };
    [
        u0 & M1,
        (u2 & M2) | (((u0 >> 6) & M3) << 4),
        u1 & M1,
        ((u2 >> 4) & M2) | (((u1 >> 6) & M3) << 4),
    ]
}

/// Q4_K · Q8_K over `nb` super-blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q4_k(w: *const u8, a: *const u8, nb: usize) -> f32 {
    let masks = k4_scale_masks();
    let mut s = (_mm256_setzero_ps(), _mm256_setzero_ps());
    for i in 0..nb {
        // SAFETY: `nb` blocks of 144 bytes at `w` and of 292 at `a`.
        s = unsafe { q4_k_block(w.add(144 * i), a.add(292 * i), s, &masks) };
    }
    hsum_ps(_mm256_sub_ps(s.0, s.1))
}

/// Streaming GEMV of Q4_K rows (`rb` bytes apart, `nb` super-blocks each) with one
/// Q8_K row: [`q4_k_block`] over [`four_streams`], each row as [`dot_q4_k`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemv_q4_k(w: *const u8, rb: usize, a: *const u8, nb: usize, out: &mut [f32]) {
    let masks = k4_scale_masks();
    let zero = (_mm256_setzero_ps(), _mm256_setzero_ps());
    four_streams::<1, _>(
        out.len(),
        nb,
        zero,
        // SAFETY: the caller guarantees `out.len()` rows of `nb` 144-byte blocks at `w`,
        // `rb` bytes apart, and `nb` 292-byte blocks at `a`.
        |r, i, s| unsafe { q4_k_block(w.add(r * rb + 144 * i), a.add(292 * i), s, &masks) },
        |r, s| out[r] = hsum_ps(_mm256_sub_ps(s.0, s.1)),
    );
}

/// The `vpshufb` masks of [`q4_k_block_with`]: mask `j` (0..8) spreads byte `j` of
/// a register holding the eight scale bytes in every 64-bit lane over every i16 lane
/// (zero-extended); mask 8 spreads the eight min bytes the same way in pairs, min `j`
/// in i16 lanes `2j` and `2j + 1`. Hidden from the optimizer (`black_box`, once per
/// call): seen as constants, LLVM rewrites such shuffles into two µops (a shift and
/// a `vpbroadcastw`) instead of one.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn k4_scale_masks() -> [__m256i; 9] {
    let pick = |j: usize| (0x8000 | j) as u16 as i16;
    let pairs: [i16; 16] = core::array::from_fn(|l| pick(l / 2));
    core::hint::black_box(core::array::from_fn(|j| match j {
        0..8 => _mm256_set1_epi16(pick(j)),
        // SAFETY: `pairs` is 32 readable bytes.
        _ => unsafe { _mm256_loadu_si256(pairs.as_ptr().cast()) },
    }))
}

/// One Q4_K super-block at `wb` · its Q8_K block at `ab` on AVX2: [`q4_k_block_with`]
/// with each 32-element sub-block's scale spread by one `vpshufb` and its pair sums
/// added with `madd` and `add`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_k_block(
    wb: *const u8,
    ab: *const u8,
    acc: (__m256, __m256),
    masks: &[__m256i; 9],
) -> (__m256, __m256) {
    // SAFETY: forwarded from the caller.
    unsafe {
        q4_k_block_with(wb, ab, acc, masks[8], |scales| {
            let (m4, sc) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi64x(scales));
            let mut sumi = _mm256_setzero_si256();
            for c in 0..4 {
                let q = ld256(wb.add(16 + 32 * c));
                let lo = _mm256_and_si256(q, m4);
                let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
                let ylo = ld256(ab.add(Q8K_QS + 64 * c));
                let yhi = ld256(ab.add(Q8K_QS + 64 * c + 32));
                let s0 = _mm256_shuffle_epi8(sc, masks[2 * c]);
                let s1 = _mm256_shuffle_epi8(sc, masks[2 * c + 1]);
                let p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, ylo), s0);
                let p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, yhi), s1);
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
            }
            sumi
        })
    }
}

/// One Q4_K super-block at `wb` · its Q8_K block at `ab`: the scaled products added to
/// `acc`, the min term (Σ_j m_j·bsum_j, times `dmin`) to `acc_m`. `sub_sums(scales)`
/// returns Σ over the eight sub-blocks of scale × `maddubs` pair sums, with `madd`'s
/// i32 lanes (lane `k` holds bytes `4k..4k + 4` of every 32-byte sub-block), given the
/// eight scale bytes as one i64: the lanes hold the same integers however they are
/// computed, so every `sub_sums` gives the same result. `min_mask` is mask 8 of
/// [`k4_scale_masks`].
///
/// # Safety
/// AVX2/FMA/F16C present, and whatever `sub_sums` needs; 144 readable bytes at `wb`
/// and 292 at `ab`.
#[inline(always)]
unsafe fn q4_k_block_with(
    wb: *const u8,
    ab: *const u8,
    (acc, acc_m): (__m256, __m256),
    min_mask: __m256i,
    sub_sums: impl Fn(i64) -> __m256i,
) -> (__m256, __m256) {
    // SAFETY: the caller guarantees the features and 144 readable bytes at `wb` and
    // 292 at `ab`.
    unsafe {
        // d and dmin converted together (4 lanes: d, dmin, d, dmin), times the
        // activation's scale, then each broadcast.
        let dd = _mm_cvtph_ps(_mm_set1_epi32(u32_at(wb) as i32));
        let dd = _mm_mul_ps(_mm_set1_ps(f32_at(ab)), dd);
        let d = _mm256_broadcastss_ps(dd);
        let dmin = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(dd), _mm256_set1_epi32(1));
        let u = k4_scales_mins(wb.add(4));
        // The eight min bytes in every 64-bit lane.
        let mn = _mm256_set1_epi64x((u64::from(u[2]) | u64::from(u[3]) << 32) as i64);
        // mins: Σ_j m_j · (bsum_2j + bsum_2j+1), with m_j spread over lane pairs.
        let mins = _mm256_shuffle_epi8(mn, min_mask);
        let msum = _mm256_madd_epi16(ld256(ab.add(Q8K_BSUMS)), mins);
        let acc_m = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(msum), acc_m);
        let sumi = sub_sums((u64::from(u[0]) | u64::from(u[1]) << 32) as i64);
        (_mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc), acc_m)
    }
}

/// The `vpshufb` masks of [`q4_k_sub_sums_512`]: for the 64 quant bytes `p` (0..2),
/// mask `2p` spreads scale byte `4p` over the low 256 bits and `4p + 2` over the high
/// 256 (the low nibbles of 32-byte chunks `2p` and `2p + 1`, in i16 lanes,
/// zero-extended), mask `2p + 1` bytes `4p + 1` and `4p + 3` (their high nibbles);
/// hidden from the optimizer as in [`k4_scale_masks`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw")]
fn k4_scale_masks_512() -> [__m512i; 4] {
    let pick = |j: usize| (0x8000 | j) as u16 as i16;
    core::hint::black_box(core::array::from_fn(|m| {
        let j = 4 * (m / 2) + m % 2;
        _mm512_inserti64x4::<1>(_mm512_set1_epi16(pick(j)), _mm256_set1_epi16(pick(j + 2)))
    }))
}

/// The `sub_sums` of [`q4_k_block_with`] on AVX512-BW/VNNI: 64 quant bytes (two
/// 32-byte chunks) per 512-bit step, each scale product and add one `vpdpwssd`, and
/// the two 256-bit halves added at the end: the same i32 lanes as the AVX2 `madd`
/// sums (both halves read whole 32-byte sub-blocks).
///
/// # Safety
/// AVX512F/BW/VNNI present; 144 readable bytes at `wb` and 292 at `ab`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vnni")]
unsafe fn q4_k_sub_sums_512(
    wb: *const u8,
    ab: *const u8,
    scales: i64,
    masks: &[__m512i; 4],
) -> __m256i {
    // SAFETY: the caller guarantees 144 readable bytes at `wb` and 292 at `ab`.
    unsafe {
        let (m4, sc) = (_mm512_set1_epi8(0x0f), _mm512_set1_epi64(scales));
        let ld2 = |a: *const u8, b: *const u8| {
            _mm512_inserti64x4::<1>(_mm512_castsi256_si512(ld256(a)), ld256(b))
        };
        let mut sumi = _mm512_setzero_si512();
        for p in 0..2 {
            let q = _mm512_loadu_si512(wb.add(16 + 64 * p).cast());
            let lo = _mm512_and_si512(q, m4);
            let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(q), m4);
            let y = ab.add(Q8K_QS + 128 * p);
            let (ylo, yhi) = (ld2(y, y.add(64)), ld2(y.add(32), y.add(96)));
            let s0 = _mm512_shuffle_epi8(sc, masks[2 * p]);
            let s1 = _mm512_shuffle_epi8(sc, masks[2 * p + 1]);
            sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(lo, ylo), s0);
            sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(hi, yhi), s1);
        }
        _mm256_add_epi32(
            _mm512_castsi512_si256(sumi),
            _mm512_extracti64x4_epi64::<1>(sumi),
        )
    }
}

/// Streaming Q4_K GEMV as [`gemv_q4_k`] on AVX512-BW/VNNI ([`q4_k_sub_sums_512`]),
/// with the same i32 lanes (so the same results); each stream runs four super-blocks
/// (576 contiguous bytes) per turn (streaming measured ~9 % faster than one;
/// docs/kernels.md, session 7b).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vnni,avx512vl")]
unsafe fn gemv_q4_k_vnni(w: *const u8, rb: usize, a: *const u8, nb: usize, out: &mut [f32]) {
    let min_mask = k4_scale_masks()[8];
    let masks = k4_scale_masks_512();
    let zero = (_mm256_setzero_ps(), _mm256_setzero_ps());
    four_streams::<4, _>(
        out.len(),
        nb,
        zero,
        // SAFETY: as in `gemv_q4_k`; AVX512F/BW/VNNI/VL are present.
        |r, i, s| unsafe {
            let (wb, ab) = (w.add(r * rb + 144 * i), a.add(292 * i));
            q4_k_block_with(wb, ab, s, min_mask, |scales| {
                q4_k_sub_sums_512(wb, ab, scales, &masks)
            })
        },
        |r, s| out[r] = hsum_ps(_mm256_sub_ps(s.0, s.1)),
    );
}

/// Q5_K · Q8_K over `nb` super-blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q5_k(w: *const u8, a: *const u8, nb: usize) -> f32 {
    let (mut acc, mut acc_m) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let m4 = _mm256_set1_epi8(0x0f);
    let x10 = _mm256_set1_epi8(0x10);
    // SAFETY: `nb` blocks of 176 bytes at `w` and of 292 at `a`.
    unsafe {
        for i in 0..nb {
            let (wb, ab) = (w.add(176 * i), a.add(292 * i));
            let yd = _mm256_set1_ps(f32_at(ab));
            let d = _mm256_mul_ps(yd, f16x8(wb));
            let dmin = _mm256_mul_ps(yd, f16x8(wb.add(2)));
            let u = k4_scales_mins(wb.add(4));
            let sm = _mm_set_epi32(u[3] as i32, u[2] as i32, u[1] as i32, u[0] as i32);
            let mins = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
            let msum = _mm256_madd_epi16(ld256(ab.add(Q8K_BSUMS)), mins);
            acc_m = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(msum), acc_m);
            let sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
            let mut hb = ld256(wb.add(16));
            let mut sumi = _mm256_setzero_si256();
            for c in 0..4 {
                let q = ld256(wb.add(48 + 32 * c));
                let lo = _mm256_or_si256(
                    _mm256_and_si256(q, m4),
                    _mm256_and_si256(_mm256_slli_epi16::<4>(hb), x10),
                );
                let hi = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4),
                    _mm256_and_si256(_mm256_slli_epi16::<3>(hb), x10),
                );
                hb = _mm256_srli_epi16::<2>(hb);
                let ylo = ld256(ab.add(Q8K_QS + 64 * c));
                let yhi = ld256(ab.add(Q8K_QS + 64 * c + 32));
                let s0 = _mm256_shuffle_epi8(
                    sc,
                    _mm256_set1_epi16((((4 * c + 1) << 8) | (4 * c)) as i16),
                );
                let s1 = _mm256_shuffle_epi8(
                    sc,
                    _mm256_set1_epi16((((4 * c + 3) << 8) | (4 * c + 2)) as i16),
                );
                let p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, ylo), s0);
                let p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, yhi), s1);
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
            }
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    hsum_ps(_mm256_sub_ps(acc, acc_m))
}

/// Q6_K · Q8_K over `nb` super-blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q6_k(w: *const u8, a: *const u8, nb: usize) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for i in 0..nb {
        // SAFETY: `nb` blocks of 210 bytes at `w` and of 292 at `a`.
        acc = unsafe { q6_k_block(w.add(210 * i), a.add(292 * i), acc) };
    }
    hsum_ps(acc)
}

/// Streaming GEMV of Q6_K rows (`rb` bytes apart, `nb` super-blocks each) with one
/// Q8_K row: [`q6_k_block`] over [`four_streams`], each row as [`dot_q6_k`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemv_q6_k(w: *const u8, rb: usize, a: *const u8, nb: usize, out: &mut [f32]) {
    four_streams::<1, _>(
        out.len(),
        nb,
        _mm256_setzero_ps(),
        // SAFETY: the caller guarantees `out.len()` rows of `nb` 210-byte blocks at `w`,
        // `rb` bytes apart, and `nb` 292-byte blocks at `a`.
        |r, i, acc| unsafe { q6_k_block(w.add(r * rb + 210 * i), a.add(292 * i), acc) },
        |r, acc| out[r] = hsum_ps(acc),
    );
}

/// The 128 unsigned 6-bit quants (0..64) of half `n` (0 or 1) of the Q6_K
/// super-block at `b`, as four vectors of 32: low nibbles from `ql`, high two bits
/// from `qh`, in the block's element order.
///
/// # Safety
/// AVX2 present; 192 readable bytes at `b` (the `ql` and `qh` planes).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6_k_quants(b: *const u8, n: usize) -> [__m256i; 4] {
    let m4 = _mm256_set1_epi8(0x0f);
    let m30 = _mm256_set1_epi8(0x30);
    // SAFETY: `n < 2`, so every load lies in the first 192 bytes at `b`.
    unsafe {
        let ql0 = ld256(b.add(64 * n));
        let ql1 = ld256(b.add(64 * n + 32));
        let qh = ld256(b.add(128 + 32 * n));
        [
            _mm256_or_si256(
                _mm256_and_si256(ql0, m4),
                _mm256_and_si256(_mm256_slli_epi16::<4>(qh), m30),
            ),
            _mm256_or_si256(
                _mm256_and_si256(ql1, m4),
                _mm256_and_si256(_mm256_slli_epi16::<2>(qh), m30),
            ),
            _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4),
                _mm256_and_si256(qh, m30),
            ),
            _mm256_or_si256(
                _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4),
                _mm256_and_si256(_mm256_srli_epi16::<2>(qh), m30),
            ),
        ]
    }
}

/// One Q6_K super-block at `wb` · its Q8_K block at `ab`, added to `acc`, on AVX2:
/// [`q6_k_block_with`] with `madd` and `add`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6_k_block(wb: *const u8, ab: *const u8, acc: __m256) -> __m256 {
    // SAFETY: forwarded from the caller.
    unsafe {
        q6_k_block_with(wb, ab, acc, |sumi, p, s| {
            _mm256_add_epi32(sumi, _mm256_madd_epi16(p, s))
        })
    }
}

/// One Q6_K super-block at `wb` · its Q8_K block at `ab`, added to `acc`; each
/// 32-element run's `maddubs` pair sums meet their scales in `dot_add` as in
/// [`q4_k_block_with`] (same i32 lanes whichever `dot_add`).
///
/// # Safety
/// AVX2/FMA/F16C present, and whatever `dot_add` needs; 210 readable bytes at `wb`
/// and 292 at `ab`.
#[inline(always)]
unsafe fn q6_k_block_with(
    wb: *const u8,
    ab: *const u8,
    acc: __m256,
    dot_add: impl Fn(__m256i, __m256i, __m256i) -> __m256i,
) -> __m256 {
    // SAFETY: the caller guarantees the features, 210 readable bytes at `wb` and 292
    // at `ab`.
    unsafe {
        let d = _mm256_mul_ps(_mm256_set1_ps(f32_at(ab)), f16x8(wb.add(208)));
        let s16 = _mm256_cvtepi8_epi16(ld128(wb.add(192)));
        let sc = scale_halves(s16);
        // Σ_j sc_j · 32 · bsum_j: the −32 offset of every quant, applied once.
        let off = _mm256_madd_epi16(ld256(ab.add(Q8K_BSUMS)), s16);
        let mut sumi = _mm256_setzero_si256();
        for n in 0..2 {
            let q = q6_k_quants(wb, n);
            for (k, qk) in q.into_iter().enumerate() {
                let y = ld256(ab.add(Q8K_QS + 128 * n + 32 * k));
                let p = _mm256_maddubs_epi16(qk, y);
                sumi = dot_add(sumi, p, scale_pair(&sc, 8 * n + 2 * k));
            }
        }
        sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32::<5>(off));
        _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc)
    }
}

/// Streaming Q6_K GEMV as [`gemv_q6_k`] on AVX512-VNNI/VL: each run's scale product
/// and add is one `vpdpwssd`, with the same i32 lanes (so the same results); each
/// stream runs four super-blocks (840 contiguous bytes) per turn (docs/kernels.md,
/// session 7b).
#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
unsafe fn gemv_q6_k_vnni(w: *const u8, rb: usize, a: *const u8, nb: usize, out: &mut [f32]) {
    four_streams::<4, _>(
        out.len(),
        nb,
        _mm256_setzero_ps(),
        // SAFETY: as in `gemv_q6_k`; VNNI/VL are present.
        |r, i, acc| unsafe {
            q6_k_block_with(
                w.add(r * rb + 210 * i),
                a.add(292 * i),
                acc,
                |sumi, p, s| _mm256_dpwssd_epi32(sumi, p, s),
            )
        },
        |r, acc| out[r] = hsum_ps(acc),
    );
}

/// Q2_K · Q8_K over `nb` super-blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q2_k(w: *const u8, a: *const u8, nb: usize) -> f32 {
    let (mut acc, mut acc_m) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let m3 = _mm256_set1_epi8(3);
    let m4 = _mm_set1_epi8(0x0f);
    // SAFETY: `nb` blocks of 84 bytes at `w` and of 292 at `a`.
    unsafe {
        for i in 0..nb {
            let (wb, ab) = (w.add(84 * i), a.add(292 * i));
            let yd = _mm256_set1_ps(f32_at(ab));
            let d = _mm256_mul_ps(yd, f16x8(wb.add(80)));
            let dmin = _mm256_mul_ps(yd, f16x8(wb.add(82)));
            let raw = ld128(wb);
            let sc = scale_halves(_mm256_cvtepi8_epi16(_mm_and_si128(raw, m4)));
            let mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16::<4>(raw), m4));
            let msum = _mm256_madd_epi16(ld256(ab.add(Q8K_BSUMS)), mins);
            acc_m = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(msum), acc_m);
            let mut sumi = _mm256_setzero_si256();
            for n in 0..2 {
                let q = ld256(wb.add(16 + 32 * n));
                let planes = [
                    _mm256_and_si256(q, m3),
                    _mm256_and_si256(_mm256_srli_epi16::<2>(q), m3),
                    _mm256_and_si256(_mm256_srli_epi16::<4>(q), m3),
                    _mm256_and_si256(_mm256_srli_epi16::<6>(q), m3),
                ];
                for (p, qp) in planes.into_iter().enumerate() {
                    let y = ld256(ab.add(Q8K_QS + 128 * n + 32 * p));
                    let prod = _mm256_maddubs_epi16(qp, y);
                    sumi = _mm256_add_epi32(
                        sumi,
                        _mm256_madd_epi16(prod, scale_pair(&sc, 8 * n + 2 * p)),
                    );
                }
            }
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    hsum_ps(_mm256_sub_ps(acc, acc_m))
}

/// Q3_K · Q8_K over `nb` super-blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_q3_k(w: *const u8, a: *const u8, nb: usize) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let m3 = _mm256_set1_epi8(3);
    let four = _mm256_set1_epi8(4);
    // SAFETY: `nb` blocks of 110 bytes at `w` and of 292 at `a`.
    unsafe {
        for i in 0..nb {
            let (wb, ab) = (w.add(110 * i), a.add(292 * i));
            let d = _mm256_mul_ps(_mm256_set1_ps(f32_at(ab)), f16x8(wb.add(108)));
            // The 16 6-bit scales: low nibbles from bytes 0..8, high 2 bits from 8..12.
            const K1: u32 = 0x0303_0303;
            const K2: u32 = 0x0f0f_0f0f;
            let (u0, u1, u2) = (u32_at(wb.add(96)), u32_at(wb.add(100)), u32_at(wb.add(104)));
            let sc = _mm_sub_epi8(
                _mm_set_epi32(
                    (((u1 >> 4) & K2) | (((u2 >> 6) & K1) << 4)) as i32,
                    (((u0 >> 4) & K2) | (((u2 >> 4) & K1) << 4)) as i32,
                    ((u1 & K2) | (((u2 >> 2) & K1) << 4)) as i32,
                    ((u0 & K2) | ((u2 & K1) << 4)) as i32,
                ),
                _mm_set1_epi8(32),
            );
            let s16 = _mm256_cvtepi8_epi16(sc);
            let sc = scale_halves(s16);
            // Each quant is q' − 4 with q' = 2 low bits | high-mask bit << 2: the −4 is
            // applied once per super-block, Σ_j sc_j · 4 · bsum_j.
            let off = _mm256_madd_epi16(ld256(ab.add(Q8K_BSUMS)), s16);
            // High-mask bit b (plane b of the 8) moved to bit 2 of each byte; the shifts
            // never carry a bit across a byte into bit 2.
            let hm = ld256(wb);
            let hb = [
                _mm256_slli_epi16::<2>(hm),
                _mm256_slli_epi16::<1>(hm),
                hm,
                _mm256_srli_epi16::<1>(hm),
                _mm256_srli_epi16::<2>(hm),
                _mm256_srli_epi16::<3>(hm),
                _mm256_srli_epi16::<4>(hm),
                _mm256_srli_epi16::<5>(hm),
            ];
            let mut sumi = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32::<2>(off));
            for n in 0..2 {
                let q = ld256(wb.add(32 + 32 * n));
                let planes = [
                    _mm256_and_si256(q, m3),
                    _mm256_and_si256(_mm256_srli_epi16::<2>(q), m3),
                    _mm256_and_si256(_mm256_srli_epi16::<4>(q), m3),
                    _mm256_and_si256(_mm256_srli_epi16::<6>(q), m3),
                ];
                for (p, qp) in planes.into_iter().enumerate() {
                    let qp = _mm256_or_si256(qp, _mm256_and_si256(hb[4 * n + p], four));
                    let y = ld256(ab.add(Q8K_QS + 128 * n + 32 * p));
                    let prod = _mm256_maddubs_epi16(qp, y);
                    sumi = _mm256_add_epi32(
                        sumi,
                        _mm256_madd_epi16(prod, scale_pair(&sc, 8 * n + 2 * p)),
                    );
                }
            }
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    hsum_ps(acc)
}

// ---------------------------------------------------------------------------------
// Activation quantizers (bit-exact with rml-core's reference)

/// C `roundf` on 8 lanes: round half away from zero.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn round_away(t: __m256) -> __m256 {
    let sign = _mm256_set1_ps(-0.0);
    let tr = _mm256_round_ps::<{ _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC }>(t);
    let frac = _mm256_andnot_ps(sign, _mm256_sub_ps(t, tr));
    let up = _mm256_cmp_ps::<_CMP_GE_OQ>(frac, _mm256_set1_ps(0.5));
    let one = _mm256_or_ps(_mm256_and_ps(t, sign), _mm256_set1_ps(1.0));
    _mm256_add_ps(tr, _mm256_and_ps(up, one))
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hmax_ps(v: __m256) -> f32 {
    let m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)))
}

/// Four vectors of 8 i32 → 32 i8 in element order (values already in i8 range).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn pack_i8(v: [__m256i; 4]) -> __m256i {
    let a = _mm256_packs_epi32(v[0], v[1]);
    let b = _mm256_packs_epi32(v[2], v[3]);
    let c = _mm256_packs_epi16(a, b);
    _mm256_permutevar8x32_epi32(c, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
}

#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn f16_bits(v: f32) -> u16 {
    _mm_extract_epi16::<0>(_mm_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT }>(_mm_set_ss(v))) as u16
}

/// Quantizes 32 floats at `x` like the Q8_0 reference: returns (d, Σq) and stores the
/// 32 quants at `qs`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_block(x: *const f32, qs: *mut u8) -> (f32, i32) {
    // SAFETY: the caller guarantees 32 readable floats at `x` and 32 writable bytes at `qs`.
    unsafe {
        let v = [
            _mm256_loadu_ps(x),
            _mm256_loadu_ps(x.add(8)),
            _mm256_loadu_ps(x.add(16)),
            _mm256_loadu_ps(x.add(24)),
        ];
        let sign = _mm256_set1_ps(-0.0);
        let m = v.iter().fold(_mm256_setzero_ps(), |m, &v| {
            _mm256_max_ps(m, _mm256_andnot_ps(sign, v))
        });
        let d = hmax_ps(m) / 127.0;
        let id = _mm256_set1_ps(if d != 0.0 { 1.0 / d } else { 0.0 });
        let q = v.map(|v| _mm256_cvtps_epi32(round_away(_mm256_mul_ps(v, id))));
        let sum = hsum_epi32(_mm256_add_epi32(
            _mm256_add_epi32(q[0], q[1]),
            _mm256_add_epi32(q[2], q[3]),
        ));
        _mm256_storeu_si256(qs.cast(), pack_i8(q));
        (d, sum)
    }
}

/// Quantizes 256 floats at `x` into the Q8_K block at `dst`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8k_block(x: *const f32, dst: *mut u8) {
    // SAFETY: the caller guarantees 256 readable floats at `x` and 292 writable bytes
    // at `dst`.
    unsafe {
        let sign = _mm256_set1_ps(-0.0);
        let mut m = _mm256_setzero_ps();
        for j in 0..32 {
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x.add(8 * j))));
        }
        let amax = hmax_ps(m);
        if amax == 0.0 {
            core::ptr::write_bytes(dst, 0, 292);
            return;
        }
        // The signed value of the first element with the largest magnitude.
        let mut max = 0.0f32;
        for j in 0..256 {
            let v = *x.add(j);
            if v.abs() == amax {
                max = v;
                break;
            }
        }
        let iscale = -127.0 / max;
        let vs = _mm256_set1_ps(iscale);
        let cap = _mm256_set1_epi32(127);
        for c in 0..8 {
            let q: [__m256i; 4] = core::array::from_fn(|k| {
                let v = _mm256_loadu_ps(x.add(32 * c + 8 * k));
                _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(v, vs)), cap)
            });
            let b0 = hsum_epi32(_mm256_add_epi32(q[0], q[1])) as i16;
            let b1 = hsum_epi32(_mm256_add_epi32(q[2], q[3])) as i16;
            dst.add(Q8K_BSUMS + 4 * c)
                .cast::<i16>()
                .write_unaligned(b0.to_le());
            dst.add(Q8K_BSUMS + 4 * c + 2)
                .cast::<i16>()
                .write_unaligned(b1.to_le());
            _mm256_storeu_si256(dst.add(Q8K_QS + 32 * c).cast(), pack_i8(q));
        }
        dst.cast::<f32>().write_unaligned(1.0 / iscale);
    }
}

/// Activation quantizer; lengths were checked by the caller (`dst` holds exactly the
/// blocks of `x`).
pub(super) fn quantize_act(act: DType, x: &[f32], dst: &mut [u8]) -> rml_core::Result<()> {
    let bb = block_bytes(act);
    let be = act.block_size();
    if !Isa::Avx2.is_supported()
        || bb == 0
        || x.len() / be * bb != dst.len()
        || !x.len().is_multiple_of(be)
    {
        return super::scalar::quantize_act(act, x, dst);
    }
    for (xs, d) in x.chunks_exact(be).zip(dst.chunks_exact_mut(bb)) {
        // SAFETY: AVX2 is present; `xs` has `be` floats and `d` has `bb` bytes, which
        // is what each block kernel reads and writes.
        unsafe {
            match act {
                DType::Q8_0 => {
                    let (s, _) = q8_block(xs.as_ptr(), d.as_mut_ptr().add(2));
                    d[..2].copy_from_slice(&f16_bits(s).to_le_bytes());
                }
                DType::Q8_1 => {
                    let (s, sum) = q8_block(xs.as_ptr(), d.as_mut_ptr().add(4));
                    d[..2].copy_from_slice(&f16_bits(s).to_le_bytes());
                    d[2..4].copy_from_slice(&f16_bits(sum as f32 * s).to_le_bytes());
                }
                _ => q8k_block(xs.as_ptr(), d.as_mut_ptr()),
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// Dequantization (bit-exact with the reference: products and differences, no FMA)

/// Stores 32 i8 lanes at `q`, converted to f32 and multiplied by `d`, to `y`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn store_scaled(q: __m256i, d: __m256, y: *mut f32) {
    let lo = _mm256_castsi256_si128(q);
    let hi = _mm256_extracti128_si256::<1>(q);
    let parts = [lo, _mm_srli_si128::<8>(lo), hi, _mm_srli_si128::<8>(hi)];
    // SAFETY: the caller guarantees 32 writable floats at `y`.
    unsafe {
        for (k, p) in parts.into_iter().enumerate() {
            let f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(p));
            _mm256_storeu_ps(y.add(8 * k), _mm256_mul_ps(f, d));
        }
    }
}

/// Stores 32 u8 lanes at `q` as `dl·q − ml` to `y`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn store_affine(q: __m256i, dl: f32, ml: f32, y: *mut f32) {
    let lo = _mm256_castsi256_si128(q);
    let hi = _mm256_extracti128_si256::<1>(q);
    let parts = [lo, _mm_srli_si128::<8>(lo), hi, _mm_srli_si128::<8>(hi)];
    let (dv, mv) = (_mm256_set1_ps(dl), _mm256_set1_ps(ml));
    // SAFETY: the caller guarantees 32 writable floats at `y`.
    unsafe {
        for (k, p) in parts.into_iter().enumerate() {
            let f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(p));
            _mm256_storeu_ps(y.add(8 * k), _mm256_sub_ps(_mm256_mul_ps(dv, f), mv));
        }
    }
}

/// Dequantizes Q4_0, Q8_0, Q4_K and Q6_K; returns false for the other types (or
/// without AVX2, or on inconsistent lengths) so the caller runs the scalar path.
pub(super) fn dequantize(dtype: DType, src: &[u8], dst: &mut [f32]) -> bool {
    if !Isa::Avx2.is_supported() {
        return false;
    }
    let (bb, be) = (block_bytes(dtype), dtype.block_size());
    if !matches!(dtype, DType::Q4_0 | DType::Q8_0 | DType::Q4K | DType::Q6K)
        || !dst.len().is_multiple_of(be)
        || dst.len() / be * bb != src.len()
    {
        return false;
    }
    for (b, y) in src.chunks_exact(bb).zip(dst.chunks_exact_mut(be)) {
        // SAFETY: AVX2 is present; `b` is one whole block and `y` its `be` outputs.
        unsafe {
            match dtype {
                DType::Q4_0 => dequant_q4_0(b.as_ptr(), y.as_mut_ptr()),
                DType::Q8_0 => {
                    let d = f16x8(b.as_ptr());
                    store_scaled(ld256(b.as_ptr().add(2)), d, y.as_mut_ptr());
                }
                DType::Q4K => dequant_q4_k(b.as_ptr(), y.as_mut_ptr()),
                _ => dequant_q6_k(b.as_ptr(), y.as_mut_ptr()),
            }
        }
    }
    true
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dequant_q4_0(b: *const u8, y: *mut f32) {
    // SAFETY: one 18-byte block at `b`, 32 floats at `y`.
    unsafe {
        let d = f16x8(b);
        let q = _mm256_sub_epi8(nibbles(ld128(b.add(2))), _mm256_set1_epi8(8));
        store_scaled(q, d, y);
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dequant_q4_k(b: *const u8, y: *mut f32) {
    // SAFETY: one 144-byte block at `b`, 256 floats at `y`.
    unsafe {
        let d = f16_at(b);
        let dmin = f16_at(b.add(2));
        let u = k4_scales_mins(b.add(4));
        let sm: [u8; 16] = bytemuck::cast(u);
        let m4 = _mm256_set1_epi8(0x0f);
        for c in 0..4 {
            let q = ld256(b.add(16 + 32 * c));
            let lo = _mm256_and_si256(q, m4);
            let hi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
            let (j0, j1) = (2 * c, 2 * c + 1);
            store_affine(
                lo,
                d * f32::from(sm[j0]),
                dmin * f32::from(sm[8 + j0]),
                y.add(64 * c),
            );
            store_affine(
                hi,
                d * f32::from(sm[j1]),
                dmin * f32::from(sm[8 + j1]),
                y.add(64 * c + 32),
            );
        }
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dequant_q6_k(b: *const u8, y: *mut f32) {
    // SAFETY: one 210-byte block at `b`, 256 floats at `y`.
    unsafe {
        let d = f16_at(b.add(208));
        let m32 = _mm256_set1_epi8(32);
        for n in 0..2 {
            let q = q6_k_quants(b, n);
            for (k, qk) in q.into_iter().enumerate() {
                let qs = _mm256_sub_epi8(qk, m32);
                let s = 8 * n + 2 * k;
                let y0 = y.add(128 * n + 32 * k);
                // Two sub-blocks of 16 with their own scales.
                let d0 = d * f32::from(*b.add(192 + s) as i8);
                let d1 = d * f32::from(*b.add(192 + s + 1) as i8);
                let lo = _mm256_castsi256_si128(qs);
                let hi = _mm256_extracti128_si256::<1>(qs);
                let parts = [lo, _mm_srli_si128::<8>(lo), hi, _mm_srli_si128::<8>(hi)];
                for (p, part) in parts.into_iter().enumerate() {
                    let dv = _mm256_set1_ps(if p < 2 { d0 } else { d1 });
                    let f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(part));
                    _mm256_storeu_ps(y0.add(8 * p), _mm256_mul_ps(dv, f));
                }
            }
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::testing::Rng;

    /// `n` rows of `k` random weights of `dtype`, quantized by the reference, and a
    /// quantized random activation.
    fn operands(dtype: DType, n: usize, k: usize, rng: &mut Rng) -> (Vec<u8>, Vec<u8>) {
        let quantize = |t: DType, len: usize, rng: &mut Rng| {
            let mut x = vec![0f32; len];
            rng.fill(&mut x, -1.0, 1.0);
            let mut b = vec![0u8; t.storage_bytes(len).unwrap()];
            rml_core::quant::quantize_bytes(t, &x, &mut b).unwrap();
            b
        };
        (quantize(dtype, n * k, rng), quantize(DType::Q8K, k, rng))
    }

    /// The VNNI Q4_K (512-bit) and Q6_K GEMVs give bit for bit the AVX2 GEMVs' and the one-row
    /// dots' results (the reference comparison in `tests/quant.rs` runs whichever this
    /// CPU picks), on a ragged row count.
    #[test]
    fn vnni_gemv_equals_avx2() {
        if !vnni512_supported() || !Isa::Avx2.is_supported() {
            return;
        }
        type Kernels = (DType, usize, GemvRows, GemvRows, RowKernel);
        let kernels: [Kernels; 2] = [
            (DType::Q4K, 144, gemv_q4_k, gemv_q4_k_vnni, dot_q4_k),
            (DType::Q6K, 210, gemv_q6_k, gemv_q6_k_vnni, dot_q6_k),
        ];
        let mut rng = Rng::new(7);
        // K = 768 (3 super-blocks per row: turns of one) and 1536 (6: a turn of four
        // in the VNNI kernels, then two of one).
        for ((dtype, bw, avx2_gemv, vnni_gemv, dot), k) in kernels
            .into_iter()
            .flat_map(|kern| [768, 1536].map(|k| (kern, k)))
        {
            let n = 11;
            let (w, a) = operands(dtype, n, k, &mut rng);
            let (rb, nb) = (bw * k / 256, k / 256);
            let (mut avx2, mut vnni) = (vec![0f32; n], vec![1f32; n]);
            // SAFETY: AVX2/FMA/F16C and AVX512-VNNI/VL present (checked); `w` holds `n`
            // rows of `nb` blocks, `a` `nb` Q8_K blocks.
            unsafe {
                avx2_gemv(w.as_ptr(), rb, a.as_ptr(), nb, &mut avx2);
                vnni_gemv(w.as_ptr(), rb, a.as_ptr(), nb, &mut vnni);
            }
            assert_eq!(avx2, vnni, "{dtype}");
            for (r, v) in vnni.iter().enumerate() {
                // SAFETY: as above, for row r.
                let d = unsafe { dot(w.as_ptr().add(r * rb), a.as_ptr(), nb) };
                assert_eq!(d.to_bits(), v.to_bits(), "{dtype} row {r}");
            }
            assert!(vnni.iter().any(|&v| v != 0.0));
        }
    }
}
