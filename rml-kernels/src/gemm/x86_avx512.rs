//! AVX-512F GEMM micro-kernel: a `MR × 32` tile over two adjacent `NR = 16` B
//! micro-panels.
//!
//! The packed layout stays the one of every ISA (`MR = 6`, `NR = 16`), so weights
//! pre-packed at load run here unchanged: one zmm register holds a whole B panel row,
//! and the kernel takes two panels at once to keep `2·MR` = 12 zmm accumulators, as
//! many independent FMA chains as the AVX2 kernel (enough for the 4-cycle latency on
//! two 512-bit FMA pipes). Per K step it loads two B vectors, broadcasts `MR` A values
//! and issues 12 FMAs of 16 lanes: twice the AVX2 kernel's work per step. Each C
//! element is one FMA chain down K, as in the AVX2 kernel, so the two give the same
//! bits. Ragged tiles (fewer than 32 columns left, a strided C) go to the AVX2 kernel.
//!
//! Like `x86_avx2`, the kernel is an `unsafe` `#[target_feature]` function behind a
//! safe method of [`Avx512`], a token that exists only when the CPU runs AVX-512F on
//! top of the AVX2 level; the method checks every extent first. Miri runs none of it
//! (its builds do not enable AVX-512F, so the ISA is never supported there).

use core::arch::x86_64::*;

use super::tile::TileSpec;
use super::x86_avx2::{Avx2, k_steps, prefetch_c_rows, strides};
use super::{MR, NR};
use crate::isa::Isa;

/// Proof that this CPU runs AVX-512F, with the AVX2 level's token for everything
/// else.
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

    /// Two side-by-side full tiles (see [`TileSpec::assert_fits_pair`]): columns
    /// `0..NR` from the B panel at `b`, columns `NR..2·NR` from the one `b_step`
    /// floats further.
    #[inline]
    pub(crate) fn tile_pair(
        self,
        spec: &TileSpec,
        a: &[f32],
        b: &[f32],
        b_step: usize,
        c: &mut [f32],
    ) {
        spec.assert_fits_pair(a.len(), b.len(), c.len(), b_step);
        let (a, b, c) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
        // SAFETY: the token proves AVX-512F; `assert_fits_pair` proved that every
        // element the tile reads (A: `mr` rows × `kc` steps; B: `kc` rows of 16 columns
        // at `b` and at `b + b_step`) and writes (C: `mr` rows × 32) lies inside the
        // three slices.
        unsafe {
            if spec.mr == MR && spec.reads_packed() {
                // Both operands packed: constant strides, constant address offsets.
                pair_mr::<MR, true>(spec, a, b, b_step, c)
            } else {
                match spec.mr {
                    1 => pair_mr::<1, false>(spec, a, b, b_step, c),
                    2 => pair_mr::<2, false>(spec, a, b, b_step, c),
                    3 => pair_mr::<3, false>(spec, a, b, b_step, c),
                    4 => pair_mr::<4, false>(spec, a, b, b_step, c),
                    5 => pair_mr::<5, false>(spec, a, b, b_step, c),
                    _ => pair_mr::<6, false>(spec, a, b, b_step, c),
                }
            }
        }
    }
}

/// The `M × 32` micro-kernel. With `PACKED`, the strides are the packed ones
/// (`rs_a = 1`, `cs_a = M`, `rs_b = 16`) known at compile time.
///
/// # Safety
/// AVX-512F available; `spec` in bounds for `a`, `b`, `c` and `b_step` as checked by
/// `TileSpec::assert_fits_pair` with `spec.mr == M`.
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
