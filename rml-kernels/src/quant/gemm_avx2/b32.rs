//! Q4_0 and Q8_0 weights × Q8_0 activations: 32-element blocks, one f16 scale each.
//!
//! Weights are packed as unsigned quants `u` with a fixed offset `o` (`w = u − o`):
//! Q4_0 as its nibbles (`o = 8`); Q8_0 as `w + 128` split into two nibble planes
//! (`u = 16·h + l`, `o = 128`), since a full `u8 × i8` pair sum overflows `maddubs`'s
//! i16. A block's dot is then `Σu·y − o·Σy`, with `o·Σy` of each activation block
//! computed once per chunk into the table, and scaled by `d_w·d_a` in f32.

use core::arch::x86_64::*;

use super::{KC, MC, OutTile, Panel, Tile, bcast4, ldv, store_interleaved};
use crate::quant::avx2::{ld128, ld256, nibbles};

/// Bytes of a Q8_0 block and the offset of its quants.
const Q8_0_BYTES: usize = 34;
/// Blocks per K chunk.
const KCB: usize = KC / 32;

/// Per activation row and block of the chunk: `d_a` and `o·Σy`.
pub(super) struct ActTable([[(f32, i32); KCB]; MC]);

impl Default for ActTable {
    fn default() -> Self {
        ActTable([[(0.0, 0); KCB]; MC])
    }
}

/// A 32-element weight format: block bytes, offset, planes and tile shape.
trait Format {
    /// Bytes per weight block.
    const BYTES: usize;
    /// The offset `o` of the packed unsigned quants.
    const OFFSET: i32;
    /// Nibble planes per element (1, or 2 for `16·h + l`).
    const P: usize;
    /// Vectors of 8 weight rows per panel.
    const NV: usize;
    /// Activation rows per micro-kernel call.
    const MR: usize;
    /// The 32 unsigned quants of the block at `b`, one vector per plane (high first).
    ///
    /// # Safety
    /// AVX2 present; a whole block at `b`.
    unsafe fn planes(b: *const u8) -> [__m256i; 2];
}

/// The [`Tile`] of a 32-element format `F`.
pub(super) struct B32<F>(core::marker::PhantomData<F>);

/// Q4_0 weights.
pub(super) struct Q4_0;
/// Q8_0 weights.
pub(super) struct Q8_0;

impl Format for Q4_0 {
    const BYTES: usize = 18;
    const OFFSET: i32 = 8;
    const P: usize = 1;
    const NV: usize = 2;
    const MR: usize = 4;
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn planes(b: *const u8) -> [__m256i; 2] {
        // SAFETY: an 18-byte block at `b`; AVX2 present (caller).
        let q = unsafe { nibbles(ld128(b.add(2))) };
        [q, q]
    }
}

impl Format for Q8_0 {
    const BYTES: usize = 34;
    const OFFSET: i32 = 128;
    const P: usize = 2;
    const NV: usize = 1;
    const MR: usize = 4;
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn planes(b: *const u8) -> [__m256i; 2] {
        // SAFETY: a 34-byte block at `b`; AVX2 present (caller).
        unsafe {
            let u = _mm256_xor_si256(ld256(b.add(2)), _mm256_set1_epi8(-128));
            let m4 = _mm256_set1_epi8(0x0f);
            [
                _mm256_and_si256(_mm256_srli_epi16::<4>(u), m4),
                _mm256_and_si256(u, m4),
            ]
        }
    }
}

/// Panel layout: quants `[block][step][v][plane]`, then scales `[block][v]`.
const fn quant_vecs<F: Format>(nb: usize) -> usize {
    nb * 8 * F::NV * F::P
}

const _: () = {
    assert!(quant_vecs::<Q4_0>(KCB) + KCB * Q4_0::NV <= super::PANEL_VECS);
    assert!(quant_vecs::<Q8_0>(KCB) + KCB * Q8_0::NV <= super::PANEL_VECS);
    assert!(Q4_0::MR <= super::MAX_MR && Q8_0::MR <= super::MAX_MR);
    assert!(8 * Q4_0::NV <= super::MAX_ROWS && 8 * Q8_0::NV <= super::MAX_ROWS);
};

impl<F: Format> Tile for B32<F> {
    const ROWS: usize = 8 * F::NV;
    const MR: usize = F::MR;
    type Table = ActTable;

    fn table(
        table: &mut ActTable,
        acts: &[u8],
        arb: usize,
        rows: core::ops::Range<usize>,
        blocks: core::ops::Range<usize>,
    ) {
        for (t, row) in table.0.iter_mut().zip(rows) {
            let a = &acts[row * arb..(row + 1) * arb];
            for (e, b) in t.iter_mut().zip(blocks.clone()) {
                let blk = &a[b * Q8_0_BYTES..(b + 1) * Q8_0_BYTES];
                let d = half::f16::from_le_bytes([blk[0], blk[1]]).to_f32();
                let s: i32 = blk[2..].iter().map(|&q| i32::from(q as i8)).sum();
                *e = (d, F::OFFSET * s);
            }
        }
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn pack(
        w: *const u8,
        rb: usize,
        n: usize,
        blocks: core::ops::Range<usize>,
        panel: &mut Panel,
    ) {
        let nb = blocks.len();
        let q = panel.0.as_mut_ptr();
        // SAFETY: rows < n of `rb` bytes at `w` hold blocks `blocks`;
        // every panel index is below quant_vecs + nb·NV ≤ PANEL_VECS (asserted).
        unsafe {
            let scales = q.add(quant_vecs::<F>(nb));
            for v in 0..F::NV {
                for (bl, b) in blocks.clone().enumerate() {
                    let mut hi = [_mm256_setzero_si256(); 8];
                    let mut lo = [_mm256_setzero_si256(); 8];
                    let mut d = [0u16; 8];
                    for r in 0..8 {
                        let row = 8 * v + r;
                        if row < n {
                            let blk = w.add(row * rb + b * F::BYTES);
                            [hi[r], lo[r]] = F::planes(blk);
                            d[r] = blk.cast::<u16>().read_unaligned();
                        }
                    }
                    let base = q.add(((bl * 8) * F::NV + v) * F::P);
                    store_interleaved(hi, base, F::NV * F::P);
                    if F::P == 2 {
                        store_interleaved(lo, base.add(1), F::NV * F::P);
                    }
                    let dv = _mm256_cvtph_ps(_mm_loadu_si128(d.as_ptr().cast()));
                    _mm256_store_ps(scales.add(bl * F::NV + v).cast(), dv);
                }
            }
        }
    }

    unsafe fn tile(
        mr: usize,
        panel: &Panel,
        nb: usize,
        acts: *const u8,
        arb: usize,
        table: &ActTable,
        ti: usize,
        out: &mut OutTile,
    ) {
        // SAFETY: forwarded from the caller.
        unsafe {
            match mr {
                4 => tile::<F, 4>(panel, nb, acts, arb, table, ti, out),
                3 => tile::<F, 3>(panel, nb, acts, arb, table, ti, out),
                2 => tile::<F, 2>(panel, nb, acts, arb, table, ti, out),
                _ => tile::<F, 1>(panel, nb, acts, arb, table, ti, out),
            }
        }
    }
}

/// The micro-kernel for `R` activation rows × `8·NV` weight rows.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile<F: Format, const R: usize>(
    panel: &Panel,
    nb: usize,
    acts: *const u8,
    arb: usize,
    table: &ActTable,
    ti: usize,
    out: &mut OutTile,
) {
    // Fixed sizes so the accumulators stay in registers; only NV·P entries are used.
    let mut acc = [[_mm256_setzero_ps(); 2]; R];
    let ones = _mm256_set1_epi16(1);
    let sixteen = _mm256_set1_epi16(16);
    let q = panel.0.as_ptr();
    // SAFETY: the panel holds `nb` blocks in the layout of
    // `quant_vecs`; each activation row holds `nb` 34-byte blocks at `acts + i·arb`.
    unsafe {
        let scales = q.add(quant_vecs::<F>(nb));
        for bl in 0..nb {
            let mut s16 = [[[_mm256_setzero_si256(); 2]; 2]; R];
            for s in 0..8 {
                let wv = q.add((bl * 8 + s) * F::NV * F::P);
                for (i, s16) in s16.iter_mut().enumerate() {
                    let y = bcast4(acts.add(i * arb + bl * Q8_0_BYTES + 2 + 4 * s));
                    for (v, s16) in s16.iter_mut().enumerate().take(F::NV) {
                        for (p, s16) in s16.iter_mut().enumerate().take(F::P) {
                            let u = ldv(wv.add(v * F::P + p));
                            *s16 = _mm256_add_epi16(*s16, _mm256_maddubs_epi16(u, y));
                        }
                    }
                }
            }
            for (i, (acc, s16)) in acc.iter_mut().zip(&s16).enumerate() {
                let (da, c) = table.0[ti + i][bl];
                let (da, c) = (_mm256_set1_ps(da), _mm256_set1_epi32(c));
                for (v, (acc, s16)) in acc.iter_mut().zip(s16).enumerate().take(F::NV) {
                    let sumi = if F::P == 2 {
                        _mm256_add_epi32(
                            _mm256_madd_epi16(s16[0], sixteen),
                            _mm256_madd_epi16(s16[1], ones),
                        )
                    } else {
                        _mm256_madd_epi16(s16[0], ones)
                    };
                    let dw = _mm256_load_ps(scales.add(bl * F::NV + v).cast());
                    let f = _mm256_cvtepi32_ps(_mm256_sub_epi32(sumi, c));
                    *acc = _mm256_fmadd_ps(f, _mm256_mul_ps(dw, da), *acc);
                }
            }
        }
    }
    for (o, acc) in out.iter_mut().zip(&acc) {
        for (v, a) in acc.iter().enumerate().take(F::NV) {
            // SAFETY: lanes 8v..8v+8 < MAX_ROWS (asserted above).
            unsafe { _mm256_storeu_ps(o.as_mut_ptr().add(8 * v), *a) };
        }
    }
}
