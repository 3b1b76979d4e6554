//! K-quant weights × Q8_K activations: 256-element super-blocks with integer
//! sub-block scales.
//!
//! Every K-quant is packed to the same form: unsigned quants `u`, an i16 scale per
//! group of `4·G` elements, an i16 correction coefficient `c` per 16 elements, and two
//! f32 factors, so that a super-block's dot is
//! `d_a·(d·Σ_g sc_g·Σ u·y + dc·Σ_j c_j·bsum_j)` with the activation's 16-element
//! sums `bsum_j` (Q4_K: `sc`, `c = m`, `dc = −dmin`; Q6_K: `c = −32·sc`, `dc = d`).
//! The integer sums stay exact in i32 for a whole super-block; the f32 work is two
//! FMAs per super-block and 8 rows.

use core::arch::x86_64::*;

use super::{KC, OutTile, Panel, Tile, bcast4, dual_call, dual_compiled, ldv, store_interleaved};
use crate::quant::avx2::{k4_scales_mins, ld256};

/// Bytes of a Q8_K block and the offsets of its fields.
const Q8K_BYTES: usize = 292;
const Q8K_QS: usize = 4;
const Q8K_BSUMS: usize = 260;
/// Super-blocks per K chunk.
const KCB: usize = KC / 256;

/// One row's super-block, unpacked.
struct Unpacked {
    /// Unsigned quants, 32 elements per vector, in element order.
    q: [__m256i; 8],
    /// Scale per group (`64 / G` used).
    sc: [i16; 16],
    /// Correction coefficient per 16 elements.
    c: [i16; 16],
    d: f32,
    dc: f32,
}

impl Unpacked {
    const ZERO: Unpacked = Unpacked {
        // SAFETY: an all-zero __m256i is a valid value.
        q: unsafe { core::mem::zeroed() },
        sc: [0; 16],
        c: [0; 16],
        d: 0.0,
        dc: 0.0,
    };
}

/// A K-quant format: block bytes, group shape and tile shape.
trait Format {
    /// Bytes per super-block.
    const BYTES: usize;
    /// 4-element steps per scale group (8: 32-element groups, 4: 16-element groups).
    const G: usize;
    /// `maddubs` results summed in i16 before widening (bounded by the quant range).
    const SPLIT: usize;
    /// Vectors of 8 weight rows per panel.
    const NV: usize;
    /// Activation rows per micro-kernel call.
    const MR: usize;
    /// Unpacks the super-block at `b`. Implementations are `#[inline(always)]`, with
    /// no `#[target_feature]` of their own, so that each copy of `pack` compiles its
    /// own (left out of line, Q2_K's cost the EVEX copy 5 % at 8 rows).
    ///
    /// # Safety
    /// AVX2 present; a whole super-block at `b`.
    unsafe fn unpack(b: *const u8) -> Unpacked;
}

/// The [`Tile`] of a K-quant format `F`.
pub(super) struct KQuant<F>(core::marker::PhantomData<F>);

/// Q4_K weights.
pub(super) struct Q4K;
/// Q6_K weights.
pub(super) struct Q6K;
/// Q5_K weights.
pub(super) struct Q5K;
/// Q2_K weights.
pub(super) struct Q2K;
/// Q3_K weights.
pub(super) struct Q3K;

fn f16(b: [u8; 2]) -> f32 {
    half::f16::from_le_bytes(b).to_f32()
}

/// d, −dmin, the 8 scales and the mins (per 16 elements) of a Q4_K/Q5_K block.
///
/// # Safety
/// 16 readable bytes at `b`.
unsafe fn k4_header(b: *const u8, u: &mut Unpacked) {
    // SAFETY: forwarded from the caller.
    unsafe {
        u.d = f16([*b, *b.add(1)]);
        u.dc = -f16([*b.add(2), *b.add(3)]);
        let sm: [u8; 16] = bytemuck::cast(k4_scales_mins(b.add(4)));
        for j in 0..8 {
            u.sc[j] = i16::from(sm[j]);
            u.c[2 * j] = i16::from(sm[8 + j]);
            u.c[2 * j + 1] = i16::from(sm[8 + j]);
        }
    }
}

impl Format for Q4K {
    const BYTES: usize = 144;
    const G: usize = 8;
    const SPLIT: usize = 8;
    const NV: usize = 2;
    const MR: usize = 2;
    #[inline(always)]
    unsafe fn unpack(b: *const u8) -> Unpacked {
        let mut u = Unpacked::ZERO;
        // SAFETY: a 144-byte block at `b`; AVX2 present (caller).
        unsafe {
            k4_header(b, &mut u);
            let m4 = _mm256_set1_epi8(0x0f);
            for c in 0..4 {
                let q = ld256(b.add(16 + 32 * c));
                u.q[2 * c] = _mm256_and_si256(q, m4);
                u.q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
            }
        }
        u
    }
}

impl Format for Q5K {
    const BYTES: usize = 176;
    const G: usize = 8;
    const SPLIT: usize = 4;
    const NV: usize = 2;
    const MR: usize = 2;
    #[inline(always)]
    unsafe fn unpack(b: *const u8) -> Unpacked {
        let mut u = Unpacked::ZERO;
        // SAFETY: a 176-byte block at `b`; AVX2 present (caller).
        unsafe {
            k4_header(b, &mut u);
            let m4 = _mm256_set1_epi8(0x0f);
            let x10 = _mm256_set1_epi8(0x10);
            let mut hb = ld256(b.add(16));
            for c in 0..4 {
                let q = ld256(b.add(48 + 32 * c));
                u.q[2 * c] = _mm256_or_si256(
                    _mm256_and_si256(q, m4),
                    _mm256_and_si256(_mm256_slli_epi16::<4>(hb), x10),
                );
                u.q[2 * c + 1] = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4),
                    _mm256_and_si256(_mm256_slli_epi16::<3>(hb), x10),
                );
                hb = _mm256_srli_epi16::<2>(hb);
            }
        }
        u
    }
}

impl Format for Q2K {
    const BYTES: usize = 84;
    const G: usize = 4;
    const SPLIT: usize = 4;
    const NV: usize = 2;
    const MR: usize = 2;
    #[inline(always)]
    unsafe fn unpack(b: *const u8) -> Unpacked {
        let mut u = Unpacked::ZERO;
        // SAFETY: an 84-byte block at `b`; AVX2 present (caller).
        unsafe {
            u.d = f16([*b.add(80), *b.add(81)]);
            u.dc = -f16([*b.add(82), *b.add(83)]);
            for s in 0..16 {
                let v = *b.add(s);
                u.sc[s] = i16::from(v & 0x0f);
                u.c[s] = i16::from(v >> 4);
            }
            let m3 = _mm256_set1_epi8(3);
            for n in 0..2 {
                let q = ld256(b.add(16 + 32 * n));
                u.q[4 * n] = _mm256_and_si256(q, m3);
                u.q[4 * n + 1] = _mm256_and_si256(_mm256_srli_epi16::<2>(q), m3);
                u.q[4 * n + 2] = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m3);
                u.q[4 * n + 3] = _mm256_and_si256(_mm256_srli_epi16::<6>(q), m3);
            }
        }
        u
    }
}

impl Format for Q3K {
    const BYTES: usize = 110;
    const G: usize = 4;
    const SPLIT: usize = 4;
    const NV: usize = 2;
    const MR: usize = 2;
    #[inline(always)]
    unsafe fn unpack(b: *const u8) -> Unpacked {
        let mut u = Unpacked::ZERO;
        // SAFETY: a 110-byte block at `b`; AVX2 present (caller).
        unsafe {
            u.d = f16([*b.add(108), *b.add(109)]);
            u.dc = u.d;
            // The 16 6-bit scales: low nibbles from bytes 96..104, high 2 bits from
            // 104..108, stored with +32.
            const K1: u32 = 0x0303_0303;
            const K2: u32 = 0x0f0f_0f0f;
            let rd = |o: usize| b.add(o).cast::<u32>().read_unaligned();
            let (u0, u1, u2) = (rd(96), rd(100), rd(104));
            let sc: [u8; 16] = bytemuck::cast([
                (u0 & K2) | ((u2 & K1) << 4),
                (u1 & K2) | (((u2 >> 2) & K1) << 4),
                ((u0 >> 4) & K2) | (((u2 >> 4) & K1) << 4),
                ((u1 >> 4) & K2) | (((u2 >> 6) & K1) << 4),
            ]);
            for (s, &v) in sc.iter().enumerate() {
                let v = i16::from(v) - 32;
                u.sc[s] = v;
                u.c[s] = -4 * v;
            }
            // q = 2 low bits + 4 when the high-mask bit is set; the value is q − 4.
            let (m3, four) = (_mm256_set1_epi8(3), _mm256_set1_epi8(4));
            let hm = ld256(b);
            for n in 0..2 {
                let q = ld256(b.add(32 + 32 * n));
                let lows = [
                    _mm256_and_si256(q, m3),
                    _mm256_and_si256(_mm256_srli_epi16::<2>(q), m3),
                    _mm256_and_si256(_mm256_srli_epi16::<4>(q), m3),
                    _mm256_and_si256(_mm256_srli_epi16::<6>(q), m3),
                ];
                for (p, low) in lows.into_iter().enumerate() {
                    let bit = _mm256_set1_epi8((1u8 << (4 * n + p)) as i8);
                    let set = _mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit);
                    u.q[4 * n + p] = _mm256_or_si256(low, _mm256_and_si256(set, four));
                }
            }
        }
        u
    }
}

impl Format for Q6K {
    const BYTES: usize = 210;
    const G: usize = 4;
    const SPLIT: usize = 2;
    const NV: usize = 2;
    const MR: usize = 2;
    #[inline(always)]
    unsafe fn unpack(b: *const u8) -> Unpacked {
        let mut u = Unpacked::ZERO;
        // SAFETY: a 210-byte block at `b`; AVX2 present (caller).
        unsafe {
            u.d = f16([*b.add(208), *b.add(209)]);
            u.dc = u.d;
            for s in 0..16 {
                let sc = i16::from(*b.add(192 + s) as i8);
                u.sc[s] = sc;
                u.c[s] = -32 * sc;
            }
            let m4 = _mm256_set1_epi8(0x0f);
            let m30 = _mm256_set1_epi8(0x30);
            for n in 0..2 {
                let ql0 = ld256(b.add(64 * n));
                let ql1 = ld256(b.add(64 * n + 32));
                let qh = ld256(b.add(128 + 32 * n));
                u.q[4 * n] = _mm256_or_si256(
                    _mm256_and_si256(ql0, m4),
                    _mm256_and_si256(_mm256_slli_epi16::<4>(qh), m30),
                );
                u.q[4 * n + 1] = _mm256_or_si256(
                    _mm256_and_si256(ql1, m4),
                    _mm256_and_si256(_mm256_slli_epi16::<2>(qh), m30),
                );
                u.q[4 * n + 2] = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4),
                    _mm256_and_si256(qh, m30),
                );
                u.q[4 * n + 3] = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4),
                    _mm256_and_si256(_mm256_srli_epi16::<2>(qh), m30),
                );
            }
        }
        u
    }
}

/// Panel layout of one super-block (vectors): quants `[step][v]` (64 steps), scale
/// pairs `[group][v]`, correction pairs `[pair][v]` (8), `d` `[v]`, `dc` `[v]`.
const fn sb_vecs<F: Format>() -> usize {
    (64 + 64 / F::G + 8 + 2) * F::NV
}

const fn fits<F: Format>() -> bool {
    KCB * sb_vecs::<F>() <= super::PANEL_VECS
        && F::MR <= 2 // the dispatch in `tile` covers 1 and 2 rows
        && 8 * F::NV <= super::MAX_ROWS
        && F::G % F::SPLIT == 0
}

const _: () = assert!(fits::<Q2K>() && fits::<Q3K>() && fits::<Q4K>());
const _: () = assert!(fits::<Q5K>() && fits::<Q6K>());

impl<F: Format> Tile for KQuant<F> {
    const ROWS: usize = 8 * F::NV;
    const MR: usize = F::MR;
    type Table = ();

    fn table(
        _: &mut (),
        _: &[u8],
        _: usize,
        _: core::ops::Range<usize>,
        _: core::ops::Range<usize>,
    ) {
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
        _: &(),
        _: usize,
        out: &mut OutTile,
    ) {
        // SAFETY: forwarded from the caller.
        unsafe {
            match mr {
                2 => dual_call!(EVEX, tile::<F, 2>(panel, nb, acts, arb, out)),
                _ => dual_call!(EVEX, tile::<F, 1>(panel, nb, acts, arb, out)),
            }
        }
    }
}

dual_compiled! {
    /// Packs super-blocks `blocks` of the `n` (≤ 8·NV) weight rows at `w` (`rb` bytes
    /// apart) into `panel` ([`Tile::pack`]).
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
        let p = panel.0.as_mut_ptr();
        let nv = F::NV;
        let (sc_at, c_at) = (64 * nv, (64 + 64 / F::G) * nv);
        let d_at = c_at + 8 * nv;
        // SAFETY: rows < n of `rb` bytes at `w` hold blocks `blocks`;
        // every panel index is below KCB·sb_vecs ≤ PANEL_VECS (asserted).
        unsafe {
            for (sb, b) in blocks.enumerate() {
                let base = p.add(sb * sb_vecs::<F>());
                for v in 0..nv {
                    let rows: [Unpacked; 8] = core::array::from_fn(|r| {
                        let row = 8 * v + r;
                        if row < n {
                            F::unpack(w.add(row * rb + b * F::BYTES))
                        } else {
                            Unpacked::ZERO
                        }
                    });
                    for c in 0..8 {
                        let q = core::array::from_fn(|r| rows[r].q[c]);
                        store_interleaved(q, base.add(8 * c * nv + v), nv);
                    }
                    for g in 0..64 / F::G {
                        let pairs: [i16; 16] = core::array::from_fn(|l| rows[l / 2].sc[g]);
                        base.add(sc_at + g * nv + v).write(bytemuck::cast(pairs));
                    }
                    for j in 0..8 {
                        let pairs: [i16; 16] =
                            core::array::from_fn(|l| rows[l / 2].c[2 * j + l % 2]);
                        base.add(c_at + j * nv + v).write(bytemuck::cast(pairs));
                    }
                    let d: [f32; 8] = core::array::from_fn(|r| rows[r].d);
                    let dc: [f32; 8] = core::array::from_fn(|r| rows[r].dc);
                    base.add(d_at + v).write(bytemuck::cast(d));
                    base.add(d_at + nv + v).write(bytemuck::cast(dc));
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
        out: &mut OutTile,
    ) {
        let nv = F::NV;
        let (sc_at, c_at) = (64 * nv, (64 + 64 / F::G) * nv);
        let d_at = c_at + 8 * nv;
        // Fixed sizes so the accumulators stay in registers; only NV entries are used.
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        // SAFETY: the panel holds `nb` super-blocks in the layout of
        // `sb_vecs`; each activation row holds `nb` Q8_K blocks at `acts + i·arb`.
        unsafe {
            for sb in 0..nb {
                let base = panel.0.as_ptr().add(sb * sb_vecs::<F>());
                let mut s32 = [[_mm256_setzero_si256(); 2]; R];
                for g in 0..64 / F::G {
                    let mut s16 = [[_mm256_setzero_si256(); 2]; R];
                    for s in 0..F::G {
                        let st = g * F::G + s;
                        for (i, s16) in s16.iter_mut().enumerate() {
                            let y = bcast4(acts.add(i * arb + sb * Q8K_BYTES + Q8K_QS + 4 * st));
                            for (v, s16) in s16.iter_mut().enumerate().take(nv) {
                                let u = ldv(base.add(st * nv + v));
                                *s16 = _mm256_add_epi16(*s16, _mm256_maddubs_epi16(u, y));
                            }
                        }
                        if (s + 1) % F::SPLIT == 0 {
                            for (s32, s16) in s32.iter_mut().zip(&mut s16) {
                                for v in 0..nv {
                                    let sc = ldv(base.add(sc_at + g * nv + v));
                                    let sum = _mm256_madd_epi16(s16[v], sc);
                                    s32[v] = _mm256_add_epi32(s32[v], sum);
                                    s16[v] = _mm256_setzero_si256();
                                }
                            }
                        }
                    }
                }
                for (i, (acc, s32)) in acc.iter_mut().zip(&s32).enumerate() {
                    let ab = acts.add(i * arb + sb * Q8K_BYTES);
                    let da = _mm256_set1_ps(ab.cast::<f32>().read_unaligned());
                    for v in 0..nv {
                        let mut m32 = _mm256_setzero_si256();
                        for j in 0..8 {
                            let c = ldv(base.add(c_at + j * nv + v));
                            let bs = bcast4(ab.add(Q8K_BSUMS + 4 * j));
                            m32 = _mm256_add_epi32(m32, _mm256_madd_epi16(c, bs));
                        }
                        let d = _mm256_load_ps(base.add(d_at + v).cast());
                        let dc = _mm256_load_ps(base.add(d_at + nv + v).cast());
                        let (s, m) = (_mm256_cvtepi32_ps(s32[v]), _mm256_cvtepi32_ps(m32));
                        let a = _mm256_fmadd_ps(s, _mm256_mul_ps(d, da), acc[v]);
                        acc[v] = _mm256_fmadd_ps(m, _mm256_mul_ps(dc, da), a);
                    }
                }
            }
        }
        for (o, acc) in out.iter_mut().zip(&acc) {
            for (v, a) in acc.iter().enumerate().take(nv) {
                // SAFETY: lanes 8v..8v+8 < MAX_ROWS (asserted above).
                unsafe { _mm256_storeu_ps(o.as_mut_ptr().add(8 * v), *a) };
            }
        }
    }
}
