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

    /// f32 GEMV over [N, K] weights (contract as `Avx2::gemv_nk`).
    pub(crate) fn gemv_nk(self, d: &NkSpec, x: &[f32], w: &[f32], y: &mut [f32]) {
        d.assert_fits(x.len(), w.len(), y.len());
        let k4 = d.k - d.k % 4;
        for j in 0..d.n {
            let wr = &w[j * d.rs_w..j * d.rs_w + d.k];
            for i in 0..d.m {
                let xr = &x[i * d.rs_x..i * d.rs_x + d.k];
                // SAFETY: NEON proven; `p + 4 ≤ k4 ≤ k` elements of both rows are read.
                let mut s = unsafe {
                    let mut acc = vdupq_n_f32(0.0);
                    let mut p = 0;
                    while p < k4 {
                        acc = vfmaq_f32(
                            acc,
                            vld1q_f32(xr.as_ptr().add(p)),
                            vld1q_f32(wr.as_ptr().add(p)),
                        );
                        p += 4;
                    }
                    vaddvq_f32(acc)
                };
                for q in k4..d.k {
                    s += xr[q] * wr[q];
                }
                let v = &mut y[i * d.rs_y + j * d.cs_y];
                *v = if d.beta == 0.0 {
                    d.alpha * s
                } else {
                    d.alpha * s + d.beta * *v
                };
            }
        }
    }

    /// f32 GEMV over [K, N] weights, one column chunk (contract as `Avx2::gemv_kn`).
    pub(crate) fn gemv_kn(self, d: &KnSpec, x: &[f32], b: &[f32], ybuf: &mut [f32]) {
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
                            vfmaq_n_f32(vld1q_f32(yp), vld1q_f32(br.as_ptr().add(j)), a),
                        );
                        j += 4;
                    }
                }
                for j in cw4..d.cw {
                    yr[j] += a * br[j];
                }
            }
        }
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
