//! NEON GEMM and GEMV kernels (aarch64, where NEON is baseline).
//!
//! The micro-kernel holds the same `MR × 16` tile as AVX2 in `4·MR` q-register
//! accumulators (24 for the full 6×16 tile), plus 4 B vectors and the A values:
//! 30 of the 32 vector registers, 24 FMAs per 4 B loads and 6 A loads. Ragged columns
//! go through a 16-wide stack row (NEON has no masked loads); edge tiles are rare.

use core::arch::aarch64::*;

use super::NR;
use super::gemv::{KnSpec, NkSpec};
use super::tile::TileSpec;
use crate::isa::Isa;
use crate::simd::Simd;
use crate::simd::neon::F32x4;

/// Proof that NEON is available (always true on aarch64 targets with `neon`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Neon(());

impl Neon {
    /// The token when `isa` is NEON and supported.
    #[inline]
    pub(crate) fn new(isa: Isa) -> Option<Neon> {
        (isa == Isa::Neon && isa.is_supported()).then_some(Neon(()))
    }

    /// One GEMM micro-tile (see `tile.rs` for the contract).
    #[inline]
    pub(crate) fn tile(self, spec: &TileSpec, a: &[f32], b: &[f32], c: &mut [f32]) {
        spec.assert_fits(a.len(), b.len(), c.len());
        let (a, b, c) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
        // SAFETY: the token proves NEON; `assert_fits` proved every A, B (first `nr`
        // columns) and C (`mr × nr`) element the tile touches is in bounds.
        unsafe {
            match spec.mr {
                1 => tile_mr::<1>(spec, a, b, c),
                2 => tile_mr::<2>(spec, a, b, c),
                3 => tile_mr::<3>(spec, a, b, c),
                4 => tile_mr::<4>(spec, a, b, c),
                5 => tile_mr::<5>(spec, a, b, c),
                _ => tile_mr::<6>(spec, a, b, c),
            }
        }
    }

    /// GEMV over [N, K] weights in f32, f16 or bf16 (contract as `Avx2::gemv_nk`):
    /// four weight rows at a time, one accumulator per row, each x vector loaded once
    /// per four rows; f16 and bf16 widen in registers (`fcvtl`, shift).
    pub(crate) fn gemv_nk<W: Load4>(self, d: &NkSpec, x: &[f32], w: &[W], y: &mut [f32]) {
        const R: usize = 4;
        d.assert_fits(x.len(), w.len(), y.len());
        let k4 = d.k - d.k % 4;
        let mut j = 0;
        while j < d.n {
            let r_here = R.min(d.n - j);
            // Rows past `n` reuse the last valid row (computed, then discarded).
            let rows: [&[W]; R] = core::array::from_fn(|r| {
                let o = (j + r.min(r_here - 1)) * d.rs_w;
                &w[o..o + d.k]
            });
            for i in 0..d.m {
                let xr = &x[i * d.rs_x..i * d.rs_x + d.k];
                // SAFETY: NEON proven; `p + 4 ≤ k4 ≤ k` elements of x and of each row
                // (all of length `k`) are read.
                let mut s: [f32; R] = unsafe {
                    let mut acc = [vdupq_n_f32(0.0); R];
                    let mut p = 0;
                    while p < k4 {
                        let xv = vld1q_f32(xr.as_ptr().add(p));
                        for (a, row) in acc.iter_mut().zip(&rows) {
                            *a = vfmaq_f32(*a, xv, W::load4(row.as_ptr().add(p)));
                        }
                        p += 4;
                    }
                    acc.map(|a| vaddvq_f32(a))
                };
                for (sr, row) in s.iter_mut().zip(&rows) {
                    for q in k4..d.k {
                        *sr += xr[q] * row[q].to_f32();
                    }
                }
                for (r, sr) in s.iter().enumerate().take(r_here) {
                    let v = &mut y[i * d.rs_y + (j + r) * d.cs_y];
                    *v = if d.beta == 0.0 {
                        d.alpha * sr
                    } else {
                        d.alpha * sr + d.beta * *v
                    };
                }
            }
            j += R;
        }
    }

    /// GEMV over [K, N] weights in f32, f16 or bf16, one column chunk (contract as
    /// `Avx2::gemv_kn`).
    pub(crate) fn gemv_kn<W: Load4>(self, d: &KnSpec, x: &[f32], b: &[W], ybuf: &mut [f32]) {
        d.assert_fits(x.len(), b.len(), ybuf.len());
        let cw4 = d.cw - d.cw % 4;
        for p in 0..d.k {
            let br = &b[p * d.rs_b..p * d.rs_b + d.cw];
            for i in 0..d.m {
                let a = d.alpha * x[i * d.rs_x + p];
                let yr = &mut ybuf[i * d.rs_y..i * d.rs_y + d.cw];
                // SAFETY: NEON proven; columns `j..j+4 ≤ cw4 ≤ cw` of both rows.
                unsafe {
                    let mut j = 0;
                    while j < cw4 {
                        let yp = yr.as_mut_ptr().add(j);
                        vst1q_f32(
                            yp,
                            vfmaq_n_f32(vld1q_f32(yp), W::load4(br.as_ptr().add(j)), a),
                        );
                        j += 4;
                    }
                }
                for j in cw4..d.cw {
                    yr[j] += a * br[j].to_f32();
                }
            }
        }
    }
}

/// A weight element that loads 4 at a time as f32.
pub(crate) trait Load4: super::Weight {
    /// Loads 4 consecutive values as f32.
    ///
    /// # Safety
    /// 4 values readable at `p`.
    unsafe fn load4(p: *const Self) -> float32x4_t;
}

impl Load4 for f32 {
    #[inline(always)]
    unsafe fn load4(p: *const f32) -> float32x4_t {
        // SAFETY: caller contract; NEON is baseline.
        unsafe { vld1q_f32(p) }
    }
}

impl Load4 for half::f16 {
    #[inline(always)]
    unsafe fn load4(p: *const half::f16) -> float32x4_t {
        // SAFETY: caller contract (4 values = 4 u16 readable).
        let h = unsafe { core::slice::from_raw_parts(p.cast::<u16>(), 4) };
        F32x4::load_f16(h).into_raw()
    }
}

impl Load4 for half::bf16 {
    #[inline(always)]
    unsafe fn load4(p: *const half::bf16) -> float32x4_t {
        // SAFETY: caller contract (4 values = 4 u16 readable).
        let h = unsafe { core::slice::from_raw_parts(p.cast::<u16>(), 4) };
        F32x4::load_bf16(h).into_raw()
    }
}

/// The `M × 16` micro-kernel.
///
/// # Safety
/// NEON available; `spec` in bounds as checked by `TileSpec::assert_fits`,
/// `spec.mr == M`.
#[target_feature(enable = "neon")]
unsafe fn tile_mr<const M: usize>(spec: &TileSpec, a: *const f32, b: *const f32, c: *mut f32) {
    let mut acc = [[vdupq_n_f32(0.0); 4]; M];
    let mut pa = a;
    let mut pb = b;
    let full = spec.nr == NR;
    let mut row = [0.0f32; NR];
    for _ in 0..spec.kc {
        let src = if full {
            pb
        } else {
            // SAFETY: the first `nr` values of this B row are in bounds.
            unsafe { core::ptr::copy_nonoverlapping(pb, row.as_mut_ptr(), spec.nr) };
            row.as_ptr()
        };
        // SAFETY: `src` points at 16 readable values (a full B row or `row`).
        let bv = unsafe {
            [
                vld1q_f32(src),
                vld1q_f32(src.add(4)),
                vld1q_f32(src.add(8)),
                vld1q_f32(src.add(12)),
            ]
        };
        for (i, acc_i) in acc.iter_mut().enumerate() {
            // SAFETY: A row `i < M`, step `< kc` is in bounds.
            let ai = unsafe { *pa.add(i * spec.rs_a) };
            for (q, acc_iq) in acc_i.iter_mut().enumerate() {
                *acc_iq = vfmaq_n_f32(*acc_iq, bv[q], ai);
            }
        }
        pa = pa.wrapping_add(spec.cs_a);
        pb = pb.wrapping_add(spec.rs_b);
    }
    for (i, acc_i) in acc.iter().enumerate() {
        let cr = c.wrapping_add(i * spec.rs_c);
        let mut out = [0.0f32; NR];
        for (q, v) in acc_i.iter().enumerate() {
            // SAFETY: `out` has 16 slots.
            unsafe { vst1q_f32(out.as_mut_ptr().add(4 * q), vmulq_n_f32(*v, spec.alpha)) };
        }
        for (j, o) in out.iter().enumerate().take(spec.nr) {
            // SAFETY: C row `i < M`, column `j < nr` is in bounds.
            unsafe {
                let cp = cr.add(j);
                *cp = if spec.beta == 0.0 {
                    *o
                } else {
                    *o + spec.beta * *cp
                };
            }
        }
    }
}
