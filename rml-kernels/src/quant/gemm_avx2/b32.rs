//! The 32-element weight types: Q4_0, Q5_0, Q8_0 × Q8_0 and Q4_1, Q5_1 × Q8_1
//! activations, one f16 scale (and for Q4_1/Q5_1 an f16 min) per block.
//!
//! Weights are packed as unsigned quants `u` with a fixed offset `o` (`w = u − o`):
//! Q4_0 as its nibbles (`o = 8`), Q5_0 with its 5th bit (`o = 16`), Q4_1/Q5_1 as they
//! are (`o = 0`); Q8_0 as `w + 128` split into two nibble planes (`u = 16·h + l`,
//! `o = 128`), since a full `u8 × i8` pair sum overflows `maddubs`'s i16. A block's
//! dot is then `d_w·d_a·(Σu·y − o·Σy) + m·s`, with `o·Σy` of each activation block
//! computed once per chunk into the table (and `s = d_a·Σy` of Q8_1 read there).

use core::arch::x86_64::*;

use super::{
    KC, MC, OutTile, Panel, Tile, bcast4, dual_call, dual_compiled, ldv, store_interleaved,
};
use crate::quant::avx2::{bits_to_bytes, ld128, ld256, nibbles};

/// Blocks per K chunk.
const KCB: usize = KC / 32;

/// Per activation row and block of the chunk: `d_a`, `o·Σy` and Q8_1's `s`.
pub(super) struct ActTable(pub(super) [[(f32, i32, f32); KCB]; MC]);

impl Default for ActTable {
    fn default() -> Self {
        ActTable([[(0.0, 0, 0.0); KCB]; MC])
    }
}

/// A 32-element weight format: block bytes, offset, planes and tile shape.
trait Format {
    /// Bytes per weight block.
    const BYTES: usize;
    /// The offset `o` of the packed unsigned quants.
    const OFFSET: i32;
    /// Whether the block has a min `m` (then the activations are Q8_1).
    const MIN: bool;
    /// `maddubs` results summed in i16 before widening (bounded by the quant range).
    const SPLIT: usize;
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
/// Q5_0 weights.
pub(super) struct Q5_0;
/// Q4_1 weights.
pub(super) struct Q4_1;
/// Q5_1 weights.
pub(super) struct Q5_1;

impl Format for Q4_0 {
    const BYTES: usize = 18;
    const OFFSET: i32 = 8;
    const MIN: bool = false;
    const SPLIT: usize = 8;
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
    const MIN: bool = false;
    const SPLIT: usize = 8;
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

impl Format for Q5_0 {
    const BYTES: usize = 22;
    const OFFSET: i32 = 16;
    const MIN: bool = false;
    const SPLIT: usize = 4;
    const P: usize = 1;
    const NV: usize = 2;
    const MR: usize = 2;
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn planes(b: *const u8) -> [__m256i; 2] {
        // SAFETY: a 22-byte block at `b`; AVX2 present (caller).
        let q = unsafe { fifth_bit(b.add(2), b.add(6)) };
        [q, q]
    }
}

impl Format for Q4_1 {
    const BYTES: usize = 20;
    const OFFSET: i32 = 0;
    const MIN: bool = true;
    const SPLIT: usize = 8;
    const P: usize = 1;
    const NV: usize = 2;
    const MR: usize = 4;
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn planes(b: *const u8) -> [__m256i; 2] {
        // SAFETY: a 20-byte block at `b`; AVX2 present (caller).
        let q = unsafe { nibbles(ld128(b.add(4))) };
        [q, q]
    }
}

impl Format for Q5_1 {
    const BYTES: usize = 24;
    const OFFSET: i32 = 0;
    const MIN: bool = true;
    const SPLIT: usize = 4;
    const P: usize = 1;
    const NV: usize = 2;
    const MR: usize = 2;
    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn planes(b: *const u8) -> [__m256i; 2] {
        // SAFETY: a 24-byte block at `b`; AVX2 present (caller).
        let q = unsafe { fifth_bit(b.add(4), b.add(8)) };
        [q, q]
    }
}

/// The 5-bit quants of a Q5_0/Q5_1 block: nibbles at `qs`, 5th bits at `qh`.
///
/// # Safety
/// 4 readable bytes at `qh`, 16 at `qs`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn fifth_bit(qh: *const u8, qs: *const u8) -> __m256i {
    // SAFETY: forwarded from the caller.
    unsafe {
        let bits = u32::from_le(qh.cast::<u32>().read_unaligned());
        let hi = _mm256_and_si256(bits_to_bytes(bits), _mm256_set1_epi8(0x10));
        _mm256_or_si256(nibbles(ld128(qs)), hi)
    }
}

/// Panel layout: quants `[block][step][v][plane]`, then scales `[block][v][d, m]`.
const fn quant_vecs<F: Format>(nb: usize) -> usize {
    nb * 8 * F::NV * F::P
}

/// Scale vectors per block and vector of rows: `d`, and `m` for the types with a min.
const fn scale_vecs<F: Format>() -> usize {
    1 + F::MIN as usize
}

/// Activation block bytes and the offset of its quants (Q8_1 for the types with a min).
const fn act_layout<F: Format>() -> (usize, usize) {
    if F::MIN { (36, 4) } else { (34, 2) }
}

const fn fits<F: Format>() -> bool {
    quant_vecs::<F>(KCB) + KCB * F::NV * scale_vecs::<F>() <= super::PANEL_VECS
        && F::MR <= super::MAX_MR
        && 8 * F::NV <= super::MAX_ROWS
        && 8 % F::SPLIT == 0
}

const _: () = assert!(fits::<Q4_0>() && fits::<Q5_0>() && fits::<Q8_0>());
const _: () = assert!(fits::<Q4_1>() && fits::<Q5_1>());

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
            let (ab, qs) = act_layout::<F>();
            for (e, b) in t.iter_mut().zip(blocks.clone()) {
                let blk = &a[b * ab..(b + 1) * ab];
                let d = half::f16::from_le_bytes([blk[0], blk[1]]).to_f32();
                let sum: i32 = blk[qs..].iter().map(|&q| i32::from(q as i8)).sum();
                // Q8_1's s = d·Σq as stored (f16), as the reference dot uses it.
                let s = half::f16::from_le_bytes([blk[2], blk[3]]).to_f32();
                *e = (d, F::OFFSET * sum, if F::MIN { s } else { 0.0 });
            }
        }
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
        unsafe { dual_call!(EVEX, pack::<F>(w, rb, n, blocks, panel)) }
    }

    // Out of line, as before the two copies: the layout the timings were taken with.
    #[inline(never)]
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
        // SAFETY: forwarded from the caller.
        unsafe {
            match mr {
                4 => dual_call!(EVEX, tile::<F, 4>(panel, nb, acts, arb, table, ti, out)),
                3 => dual_call!(EVEX, tile::<F, 3>(panel, nb, acts, arb, table, ti, out)),
                2 => dual_call!(EVEX, tile::<F, 2>(panel, nb, acts, arb, table, ti, out)),
                _ => dual_call!(EVEX, tile::<F, 1>(panel, nb, acts, arb, table, ti, out)),
            }
        }
    }
}

dual_compiled! {
    /// Packs blocks `blocks` of the `n` (≤ 8·NV) weight rows at `w` (`rb` bytes apart)
    /// into `panel` ([`Tile::pack`]).
    ///
    /// # Safety
    /// As [`Tile::pack`].
    pub(super) unsafe fn pack<F: Format>(
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
                    let (mut d, mut m) = ([0u16; 8], [0u16; 8]);
                    for r in 0..8 {
                        let row = 8 * v + r;
                        if row < n {
                            let blk = w.add(row * rb + b * F::BYTES);
                            [hi[r], lo[r]] = F::planes(blk);
                            d[r] = blk.cast::<u16>().read_unaligned();
                            m[r] = blk.add(2).cast::<u16>().read_unaligned();
                        }
                    }
                    let base = q.add(((bl * 8) * F::NV + v) * F::P);
                    store_interleaved(hi, base, F::NV * F::P);
                    if F::P == 2 {
                        store_interleaved(lo, base.add(1), F::NV * F::P);
                    }
                    let at = scales.add((bl * F::NV + v) * scale_vecs::<F>());
                    let dv = _mm256_cvtph_ps(_mm_loadu_si128(d.as_ptr().cast()));
                    _mm256_store_ps(at.cast(), dv);
                    if F::MIN {
                        let mv = _mm256_cvtph_ps(_mm_loadu_si128(m.as_ptr().cast()));
                        _mm256_store_ps(at.add(1).cast(), mv);
                    }
                }
            }
        }
    }

    /// The micro-kernel for `R` activation rows × `8·NV` weight rows.
    ///
    /// # Safety
    /// As [`Tile::tile`], for `R` rows.
    pub(super) unsafe fn tile<F: Format, const R: usize>(
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
        let (ab, qs) = act_layout::<F>();
        // The i16 sums (one per plane) widened to i32.
        let widen = |s16: &[__m256i; 2]| {
            if F::P == 2 {
                _mm256_add_epi32(
                    _mm256_madd_epi16(s16[0], sixteen),
                    _mm256_madd_epi16(s16[1], ones),
                )
            } else {
                _mm256_madd_epi16(s16[0], ones)
            }
        };
        // SAFETY: the panel holds `nb` blocks in the layout of `quant_vecs`; each
        // activation row holds `nb` blocks of `ab` bytes at `acts + i·arb`.
        unsafe {
            let scales = q.add(quant_vecs::<F>(nb));
            for bl in 0..nb {
                let mut s32 = [[_mm256_setzero_si256(); 2]; R];
                let mut s16 = [[[_mm256_setzero_si256(); 2]; 2]; R];
                for s in 0..8 {
                    let wv = q.add((bl * 8 + s) * F::NV * F::P);
                    for (i, s16) in s16.iter_mut().enumerate() {
                        let y = bcast4(acts.add(i * arb + bl * ab + qs + 4 * s));
                        for (v, s16) in s16.iter_mut().enumerate().take(F::NV) {
                            for (p, s16) in s16.iter_mut().enumerate().take(F::P) {
                                let u = ldv(wv.add(v * F::P + p));
                                *s16 = _mm256_add_epi16(*s16, _mm256_maddubs_epi16(u, y));
                            }
                        }
                    }
                    if (s + 1) % F::SPLIT == 0 {
                        for (s32, s16) in s32.iter_mut().zip(&mut s16) {
                            for (s32, s16) in s32.iter_mut().zip(s16).take(F::NV) {
                                *s32 = _mm256_add_epi32(*s32, widen(s16));
                                *s16 = [_mm256_setzero_si256(); 2];
                            }
                        }
                    }
                }
                for (i, (acc, s32)) in acc.iter_mut().zip(&s32).enumerate() {
                    let (da, c, sa) = table.0[ti + i][bl];
                    let (da, c) = (_mm256_set1_ps(da), _mm256_set1_epi32(c));
                    for (v, (acc, s32)) in acc.iter_mut().zip(s32).enumerate().take(F::NV) {
                        let at = scales.add((bl * F::NV + v) * scale_vecs::<F>());
                        let dw = _mm256_load_ps(at.cast());
                        let f = _mm256_cvtepi32_ps(_mm256_sub_epi32(*s32, c));
                        *acc = _mm256_fmadd_ps(f, _mm256_mul_ps(dw, da), *acc);
                        if F::MIN {
                            let m = _mm256_load_ps(at.add(1).cast());
                            *acc = _mm256_fmadd_ps(m, _mm256_set1_ps(sa), *acc);
                        }
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
}
