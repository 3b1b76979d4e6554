//! AVX-512 kernels: the f32 GEMM micro-kernel, an `MR × 32` tile over two adjacent
//! `NR = 16` B micro-panels, and the GEMV loops on 32 registers.
//!
//! The packed layout stays the one of every ISA (`MR = 6`, `NR = 16`), so weights
//! pre-packed at load run here unchanged: one zmm register holds a whole B panel row,
//! and the kernel takes two panels at once to keep `2·MR` = 12 zmm accumulators, as
//! many independent FMA chains as the AVX2 kernel (enough for the 4-cycle latency on
//! two 512-bit FMA pipes). Per K step it loads two B vectors, broadcasts `MR` A values
//! and issues 12 FMAs of 16 lanes: twice the AVX2 kernel's work per step. Each C
//! element is one FMA chain down K, as in the AVX2 kernel, so the two give the same
//! bits. Ragged tiles (fewer than 32 columns left, a strided C) go to the AVX2 kernel.
//! An A read in place is not tied to the packed layout: there a pair takes up to
//! eight rows ([`PAIR_MR`](super::tile::PAIR_MR), 16 accumulators). The driver hands
//! the kernel a whole column of equal tiles at a time ([`Avx512::pair_column`]).
//!
//! The GEMV kernels are the AVX2 loops (`x86_avx2::nk_rows_kernel`,
//! `x86_avx2::kn_chunk_kernel`) compiled with AVX-512VL: the same ymm instructions,
//! EVEX-encoded, reach 32 registers, so each x row meets more weight rows per step
//! ([`nk_rows_evex`], [`kn_chunk_evex`]).
//!
//! Like `x86_avx2`, each kernel is an `unsafe` `#[target_feature]` function behind a
//! safe method of [`Avx512`], a token that exists only when the CPU runs AVX-512F and
//! AVX-512VL on top of the AVX2 level; the methods check every extent first. Miri runs none of it
//! (its builds do not enable AVX-512F, so the ISA is never supported there).

use core::arch::x86_64::*;

use super::tile::{Column, TileSpec};
use super::x86_avx2::{
    Avx2, Load8, by_x_rows, k_steps, kn_chunk_kernel, nk_rows_kernel, prefetch_c_rows, strides,
};
use super::{MR, NR};
use crate::isa::Isa;

/// Proof that this CPU runs AVX-512F and AVX-512VL, with the AVX2 level's token for
/// everything else.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Avx512(Avx2);

impl Avx512 {
    /// The token when `isa` is AVX-512 and the CPU supports it.
    #[inline]
    pub(crate) fn new(isa: Isa) -> Option<Avx512> {
        if isa != Isa::Avx512 || !isa.is_supported() {
            return None;
        }
        Avx2::new(isa).map(Avx512)
    }

    /// The AVX2 kernels' token (ragged tiles, GEMV, packing).
    #[inline]
    pub(crate) fn avx2(self) -> Avx2 {
        self.0
    }

    /// [`Avx2::gemv_nk`] with twice the registers: per x row, as many weight rows at
    /// a time as fill about 24 accumulators (see [`nk_rows_evex`]).
    pub(crate) fn gemv_nk<W: Load8>(
        self,
        d: &super::gemv::NkSpec,
        x: &[f32],
        w: &[W],
        y: &mut [f32],
    ) {
        d.assert_fits(x.len(), w.len(), y.len());
        let ahead = self.0.gemv_ahead;
        let (x, w, y) = (x.as_ptr(), w.as_ptr(), y.as_mut_ptr());
        // SAFETY: the token proves AVX2+FMA+F16C and AVX-512F+VL; `assert_fits` proved
        // every x, w and y element addressed by the spec lies in its slice.
        unsafe {
            by_x_rows!(
                d.m,
                nk_rows_evex::<W>,
                [8, 8, 6, 6, 4, 4, 3, 3],
                (d, x, w, y, ahead)
            )
        }
    }

    /// [`Avx2::gemv_kn`] with twice the registers: eight B rows at a time for every
    /// number of x rows (see [`kn_chunk_evex`]).
    pub(crate) fn gemv_kn<W: Load8>(
        self,
        d: &super::gemv::KnSpec,
        x: &[f32],
        b: &[W],
        ybuf: &mut [f32],
    ) {
        d.assert_fits(x.len(), b.len(), ybuf.len());
        let ahead = self.0.gemv_ahead;
        let (x, b, y) = (x.as_ptr(), b.as_ptr(), ybuf.as_mut_ptr());
        // SAFETY: the token proves AVX2+FMA+F16C and AVX-512F+VL; `assert_fits` proved
        // every x, B and y-buffer element addressed by the spec lies in its slice.
        unsafe {
            by_x_rows!(
                d.m,
                kn_chunk_evex::<W>,
                [8, 8, 8, 8, 8, 8, 8, 8],
                (d, x, b, y, ahead)
            )
        }
    }

    /// A [`Column`] of tile pairs (see [`TileSpec::assert_fits_pair_column`]): per
    /// tile, columns `0..NR` from the B panel at `b`, columns `NR..2·NR` from the
    /// one `b_step` floats further. One bounds check and one call for the column:
    /// a call per tile cost about 2 % of a 64³ product (Zen 4, session 51).
    pub(crate) fn pair_column(
        self,
        spec: &TileSpec,
        col: Column,
        a: &[f32],
        b: &[f32],
        b_step: usize,
        c: &mut [f32],
    ) {
        spec.assert_fits_pair_column(a.len(), b.len(), c.len(), b_step, col);
        let (a, b, c) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
        // SAFETY: the token proves AVX-512F; `assert_fits_pair_column` proved that
        // every element each tile reads (A: `mr` rows × `kc` steps from `t·a_step`;
        // B: `kc` rows of 16 columns at `b` and at `b + b_step`) and writes (C: `mr`
        // rows × 32 from `t·mr·rs_c`) lies inside the three slices.
        unsafe {
            if spec.mr == MR && spec.reads_packed() {
                // Both operands packed: constant strides, constant address offsets.
                pair_column_mr::<MR, true>(spec, col, a, b, b_step, c)
            } else {
                match spec.mr {
                    1 => pair_column_mr::<1, false>(spec, col, a, b, b_step, c),
                    2 => pair_column_mr::<2, false>(spec, col, a, b, b_step, c),
                    3 => pair_column_mr::<3, false>(spec, col, a, b, b_step, c),
                    4 => pair_column_mr::<4, false>(spec, col, a, b, b_step, c),
                    5 => pair_column_mr::<5, false>(spec, col, a, b, b_step, c),
                    6 => pair_column_mr::<6, false>(spec, col, a, b, b_step, c),
                    7 => pair_column_mr::<7, false>(spec, col, a, b, b_step, c),
                    _ => pair_column_mr::<8, false>(spec, col, a, b, b_step, c),
                }
            }
        }
    }
}

/// The `M × 32` tile pair down a [`Column`] (see [`Avx512::pair_column`]).
///
/// # Safety
/// AVX-512F available; `spec` and `col` in bounds for `a`, `b`, `c` and `b_step` as
/// checked by `TileSpec::assert_fits_pair_column` with `spec.mr == M`.
#[target_feature(enable = "avx512f")]
unsafe fn pair_column_mr<const M: usize, const PACKED: bool>(
    spec: &TileSpec,
    col: Column,
    a: *const f32,
    b: *const f32,
    b_step: usize,
    c: *mut f32,
) {
    for t in 0..col.tiles {
        // SAFETY: tile `t`'s operands are in bounds (caller contract).
        unsafe {
            let (a, c) = (a.add(t * col.a_step), c.add(t * M * spec.rs_c));
            pair_mr::<M, PACKED>(spec, a, b, b_step, c)
        }
    }
}

/// The `M × 32` micro-kernel. With `PACKED`, the strides are the packed ones
/// (`rs_a = 1`, `cs_a = M`, `rs_b = 16`) known at compile time.
///
/// # Safety
/// AVX-512F available; `spec` in bounds for `a`, `b`, `c` and `b_step` as checked by
/// `TileSpec::assert_fits_pair_column` for one tile with `spec.mr == M`.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn pair_mr<const M: usize, const PACKED: bool>(
    spec: &TileSpec,
    a: *const f32,
    b: *const f32,
    b_step: usize,
    c: *mut f32,
) {
    let mut acc = [[_mm512_setzero_ps(); 2]; M];
    let (rs_a, cs_a, rs_b) = strides::<M, PACKED>(spec);
    let mut pa = a;
    let mut pb = b;
    prefetch_c_rows::<M>(spec, c, 2 * NR - 1);
    macro_rules! step {
        () => {{
            // SAFETY: rows `< kc` of both B panels hold 16 in-bounds values; A rows
            // `< M`, steps `< kc` are in bounds (caller contract).
            let (b0, b1) = unsafe { (_mm512_loadu_ps(pb), _mm512_loadu_ps(pb.add(b_step))) };
            for (i, acc_i) in acc.iter_mut().enumerate() {
                // SAFETY: as above.
                let ai = _mm512_set1_ps(unsafe { *pa.add(i * rs_a) });
                acc_i[0] = _mm512_fmadd_ps(ai, b0, acc_i[0]);
                acc_i[1] = _mm512_fmadd_ps(ai, b1, acc_i[1]);
            }
            pa = pa.wrapping_add(cs_a);
            pb = pb.wrapping_add(rs_b);
        }};
    }
    k_steps!(spec.kc, step);
    let alpha = _mm512_set1_ps(spec.alpha);
    let beta = _mm512_set1_ps(spec.beta);
    for (i, acc_i) in acc.iter().enumerate() {
        let cr = c.wrapping_add(i * spec.rs_c);
        let mut v0 = _mm512_mul_ps(alpha, acc_i[0]);
        let mut v1 = _mm512_mul_ps(alpha, acc_i[1]);
        // SAFETY: row `i < M` of C holds 32 in-bounds values.
        unsafe {
            if spec.beta != 0.0 {
                v0 = _mm512_fmadd_ps(beta, _mm512_loadu_ps(cr), v0);
                v1 = _mm512_fmadd_ps(beta, _mm512_loadu_ps(cr.add(NR)), v1);
            }
            _mm512_storeu_ps(cr, v0);
            _mm512_storeu_ps(cr.add(NR), v1);
        }
    }
}

nk_rows_kernel!(
    /// The [N, K] GEMV loop with AVX-512VL's 32 ymm registers: `M × R` accumulators
    /// plus `R` weight vectors and one x vector. [`Avx512::gemv_nk`] takes eight weight
    /// rows for one or two x rows, six for three or four, four for five or six: about
    /// 24 accumulators, against 8, 4, 4, 3, 2, 2 weight rows on AVX2's 16 registers:
    /// more weight rows stream at once (one x row reads 20–23 GB/s with four weight
    /// rows, 30 with eight, session 37) and each x load serves more of them. Zen 4,
    /// 4096 × 4096 f32 weights, GFLOP/s, three runs of five rounds alternated with the
    /// AVX2 build (session 38): 2 x rows 19.8–21.2 → 26.4–26.8, 3 rows 27.7–31.0 →
    /// 33.2–34.0, 4 rows 31.8–33.1 → 39.9–46.3, 5 rows 30.8–31.3 → 43.7–47.6, 6 rows
    /// 34.1–34.7 → 47.7–50.9, 7 rows (two passes) 34.1–36.2 → 51.6–53.0, 8 rows (two
    /// passes of four) 41.4–45.3 → 51.8–54.0; one row unchanged (29.4–30.8 → 30.4–30.6).
    /// Twelve weight rows for one x row and ten for two were no faster; eight x rows
    /// in one pass of three weight rows were slower (42–44).
    ///
    /// # Safety
    /// AVX2+FMA+F16C and AVX-512F+VL available; extents checked by
    /// `NkSpec::assert_fits`, `d.m == M`.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
    nk_rows_evex
);

kn_chunk_kernel!(
    /// The [K, N] GEMV chunk with AVX-512VL's 32 ymm registers: `M × G` broadcast x
    /// values, `G` B vectors and `M` y vectors. [`Avx512::gemv_kn`] takes eight B
    /// rows at a time for every number of x rows, where the AVX2 loop takes four for
    /// two to four x rows (four x rows by eight B rows need 32 broadcasts alone).
    /// Zen 4, 4096 × 4096 f32 B, y rows 16 KiB apart (accumulated in place), GFLOP/s,
    /// four runs of five rounds alternated with the AVX2 build (session 38): 2 x rows
    /// 21.3–22.9 → 26.6–29.0, 3 rows 27.9–29.3 → 35.1–36.8, 4 rows 34.7–37.6 →
    /// 40.7–42.1; one row level (29.5–31.7 → 29.3–31.1; eight B rows in both).
    ///
    /// # Safety
    /// AVX2+FMA+F16C and AVX-512F+VL available; extents checked by
    /// `KnSpec::assert_fits`, `d.m == M`.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl")]
    kn_chunk_evex
);
