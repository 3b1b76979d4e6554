//! The Q8_0 tile on AVX-512 VNNI (256-bit `vpdpbusd`, AVX512VL): where the CPU has
//! it, one instruction sums 4 `u8 × i8` products per lane straight into i32, so Q8_0
//! weights are packed as one plane `u = w + 128` (not [`super::b32`]'s two nibble
//! planes, which `maddubs`'s i16 needs) and each 8 weight rows × 4 elements × 1
//! activation row costs one instruction instead of two `maddubs` and two adds. The
//! integer sums are exact either way and the f32 steps are [`super::b32`]'s, so the
//! results are identical to the AVX2 tile's.

use core::arch::x86_64::*;

use super::b32::{ActTable, B32, Q8_0};
use super::{
    OutTile, PANEL_VECS, Panel, Tile, bcast4, dual_call, dual_compiled, ldv, store_interleaved,
};
use crate::quant::avx2::ld256;

/// Vectors of 8 weight rows per panel.
const NV: usize = 2;
/// Activation rows per micro-kernel call.
const MR: usize = 4;
/// Bytes of a Q8_0 block (f16 scale, 32 quants).
const BYTES: usize = 34;

/// True when the CPU runs `vpdpbusd` on 256-bit vectors (AVX512-VNNI with AVX512VL).
#[cfg(feature = "std")]
pub(in crate::quant) fn supported() -> bool {
    !cfg!(miri)
        && std::is_x86_feature_detected!("avx512vnni")
        && std::is_x86_feature_detected!("avx512vl")
}

/// True when the build targets AVX512-VNNI with AVX512VL (no run-time detection
/// without `std`).
#[cfg(not(feature = "std"))]
pub(in crate::quant) fn supported() -> bool {
    cfg!(all(
        target_feature = "avx512vnni",
        target_feature = "avx512vl"
    ))
}

/// Panel vectors of the quants of `nb` blocks: `[block][step][v]`; the scales
/// (`[block][v]`, f32 × 8) follow.
const fn quant_vecs(nb: usize) -> usize {
    nb * 8 * NV
}

const _: () = assert!(quant_vecs(super::KC / 32) + (super::KC / 32) * NV <= PANEL_VECS);
const _: () = assert!(MR <= super::MAX_MR && 8 * NV <= super::MAX_ROWS);

/// The [`Tile`] of Q8_0 weights on VNNI.
pub(super) struct Q8Vnni;

impl Tile for Q8Vnni {
    const ROWS: usize = 8 * NV;
    const MR: usize = MR;
    type Table = ActTable;

    fn table(
        table: &mut ActTable,
        acts: &[u8],
        arb: usize,
        rows: core::ops::Range<usize>,
        blocks: core::ops::Range<usize>,
    ) {
        // The same `d_a` and `128·Σy` as the nibble-plane tile.
        <B32<Q8_0> as Tile>::table(table, acts, arb, rows, blocks);
    }

    #[inline(always)]
    unsafe fn pack<const EVEX: bool>(
        w: *const u8,
        rb: usize,
        n: usize,
        blocks: core::ops::Range<usize>,
        panel: &mut Panel,
    ) {
        // SAFETY: forwarded from the caller.
        unsafe { dual_call!(EVEX, pack(w, rb, n, blocks, panel)) }
    }

    /// One copy for both values of `EVEX`: the VNNI kernel runs on 32 registers.
    unsafe fn tile<const EVEX: bool>(
        mr: usize,
        panel: &Panel,
        nb: usize,
        acts: *const u8,
        arb: usize,
        table: &ActTable,
        ti: usize,
        out: &mut OutTile,
    ) {
        // SAFETY: forwarded from the caller; `Q8Vnni` is only chosen when
        // `supported()` holds.
        unsafe {
            match mr {
                4 => tile::<4>(panel, nb, acts, arb, table, ti, out),
                3 => tile::<3>(panel, nb, acts, arb, table, ti, out),
                2 => tile::<2>(panel, nb, acts, arb, table, ti, out),
                _ => tile::<1>(panel, nb, acts, arb, table, ti, out),
            }
        }
    }
}

dual_compiled! {
    /// Packs blocks `blocks` of the `n` (≤ 8·NV) Q8_0 weight rows at `w` (`rb` bytes
    /// apart) into `panel` as one plane `w + 128` ([`Tile::pack`]).
    ///
    /// # Safety
    /// As [`Tile::pack`].
    pub(super) unsafe fn pack(
        w: *const u8,
        rb: usize,
        n: usize,
        blocks: core::ops::Range<usize>,
        panel: &mut Panel,
    ) {
        let nb = blocks.len();
        let q = panel.0.as_mut_ptr();
        // SAFETY: rows < n of `rb` bytes at `w` hold blocks `blocks`; every panel
        // index is below quant_vecs(nb) + nb·NV ≤ PANEL_VECS (asserted).
        unsafe {
            let scales = q.add(quant_vecs(nb));
            for v in 0..NV {
                for (bl, b) in blocks.clone().enumerate() {
                    let mut u = [_mm256_setzero_si256(); 8];
                    let mut d = [0u16; 8];
                    for (r, (u, d)) in u.iter_mut().zip(&mut d).enumerate() {
                        let row = 8 * v + r;
                        if row < n {
                            let blk = w.add(row * rb + b * BYTES);
                            *u = _mm256_xor_si256(ld256(blk.add(2)), _mm256_set1_epi8(-128));
                            *d = blk.cast::<u16>().read_unaligned();
                        }
                    }
                    store_interleaved(u, q.add(bl * 8 * NV + v), NV);
                    let dv = _mm256_cvtph_ps(_mm_loadu_si128(d.as_ptr().cast()));
                    _mm256_store_ps(scales.add(bl * NV + v).cast(), dv);
                }
            }
        }
    }
}

/// The micro-kernel for `R` activation rows × `8·NV` weight rows.
///
/// # Safety
/// AVX2/FMA/F16C and AVX512-VNNI/VL present; the panel holds `nb` blocks; each
/// activation row holds `nb` Q8_0 blocks at `acts + i·arb`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512vnni,avx512vl")]
unsafe fn tile<const R: usize>(
    panel: &Panel,
    nb: usize,
    acts: *const u8,
    arb: usize,
    table: &ActTable,
    ti: usize,
    out: &mut OutTile,
) {
    let mut acc = [[_mm256_setzero_ps(); NV]; R];
    let q = panel.0.as_ptr();
    // SAFETY: the panel holds `nb` blocks in the layout of `quant_vecs`; each
    // activation row holds `nb` blocks of 34 bytes (quants from byte 2).
    unsafe {
        let scales = q.add(quant_vecs(nb));
        for bl in 0..nb {
            let mut s32 = [[_mm256_setzero_si256(); NV]; R];
            for s in 0..8 {
                let wv = q.add((bl * 8 + s) * NV);
                let w = [ldv(wv), ldv(wv.add(1))];
                for (i, s32) in s32.iter_mut().enumerate() {
                    let y = bcast4(acts.add(i * arb + bl * BYTES + 2 + 4 * s));
                    for (s32, w) in s32.iter_mut().zip(&w) {
                        *s32 = _mm256_dpbusd_epi32(*s32, *w, y);
                    }
                }
            }
            for (i, (acc, s32)) in acc.iter_mut().zip(&s32).enumerate() {
                let (da, c, _) = table.0[ti + i][bl];
                let (da, c) = (_mm256_set1_ps(da), _mm256_set1_epi32(c));
                for (v, (acc, s32)) in acc.iter_mut().zip(s32).enumerate() {
                    let dw = _mm256_load_ps(scales.add(bl * NV + v).cast());
                    let f = _mm256_cvtepi32_ps(_mm256_sub_epi32(*s32, c));
                    *acc = _mm256_fmadd_ps(f, _mm256_mul_ps(dw, da), *acc);
                }
            }
        }
    }
    for (o, acc) in out.iter_mut().zip(&acc) {
        for (v, a) in acc.iter().enumerate() {
            // SAFETY: lanes 8v..8v+8 < MAX_ROWS (asserted above).
            unsafe { _mm256_storeu_ps(o.as_mut_ptr().add(8 * v), *a) };
        }
    }
}

#[cfg(test)]
mod tests {
    use rml_core::DType;

    use super::super::{Args, blocked};
    use super::*;

    /// Q8_0 blocks of pseudo-random quants in −127..=127 with scales in 2⁻⁸..2⁻⁷.
    fn blocks(rows: usize, k: usize, seed: u64) -> Vec<u8> {
        let mut s = seed;
        let mut next = move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) as u32
        };
        let mut out = Vec::new();
        for _ in 0..rows * k / 32 {
            let d = half::f16::from_f32((1.0 + (next() % 256) as f32 / 256.0) / 256.0);
            out.extend_from_slice(&d.to_le_bytes());
            out.extend((0..32).map(|_| ((next() % 255) as i32 - 127) as i8 as u8));
        }
        out
    }

    /// The VNNI tile gives bit for bit the AVX2 nibble-plane tile's results (the
    /// reference comparison in `tests/quant.rs` runs whichever this CPU picks).
    #[test]
    fn vnni_tile_equals_the_avx2_tile() {
        if !supported() || !crate::isa::Isa::Avx2.is_supported() {
            return;
        }
        // Ragged rows and rows per call, K over two K chunks.
        let (n, k, m) = (37, 1056, 11);
        let (w, acts) = (blocks(n, k, 1), blocks(m, k, 2));
        let args = Args {
            w: &w,
            k,
            acts: &acts,
            m,
            ldo: n,
        };
        let (mut a, mut b) = (vec![0.0f32; m * n], vec![1.0f32; m * n]);
        // SAFETY: AVX2 present (checked above).
        unsafe {
            blocked::<Q8Vnni>(&args, DType::Q8_0, &mut a, false);
            blocked::<B32<Q8_0>>(&args, DType::Q8_0, &mut b, false);
        }
        assert_eq!(a, b);
        assert!(a.iter().any(|&v| v != 0.0));
    }
}
