//! The x86_64 AVX-512F implementation of [`Simd`]: sixteen f32 lanes in a zmm
//! register, for the CPUs that run the `avx512` ISA (AVX2, FMA and F16C as well).
//!
//! Every method is a safe wrapper over intrinsics. `F32x16` values are only created
//! inside [`run`], which `dispatch!` calls only after `isa::active()` said AVX-512,
//! so the CPU has the features these intrinsics need; that is the safety argument
//! of every `unsafe` block below. Only AVX-512F instructions are used (no DQ or BW),
//! and each operation rounds as its AVX2 twin does, lane for lane; what differs is
//! the order in which [`Simd::reduce_sum`] adds lanes (the halves, then AVX2's
//! order), and the kernels' partial sums, which are per lane.

use core::arch::x86_64::*;

use super::{QUIET_BIT, SQRT_HALF_BITS, Simd, avx2};

/// Sixteen f32 lanes in a zmm register.
#[derive(Clone, Copy, Debug)]
pub(crate) struct F32x16(__m512);

/// Runs `f` in a context compiled with AVX-512F, AVX2, FMA and F16C enabled, so
/// that the generic kernel code `f` inlines is compiled for those features.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2, FMA and F16C.
#[inline]
pub(crate) unsafe fn run<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: the caller guarantees the CPU features `run_avx512` is compiled for.
    unsafe { run_avx512(f) }
}

#[target_feature(enable = "avx512f,avx2,fma,f16c")]
fn run_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// The bits of `v` as sixteen i32 lanes.
#[inline(always)]
fn bits(v: __m512) -> __m512i {
    // SAFETY: a bit cast (AVX-512F, module docs).
    unsafe { _mm512_castps_si512(v) }
}

/// Sixteen i32 lanes as f32 bits.
#[inline(always)]
fn floats(v: __m512i) -> __m512 {
    // SAFETY: a bit cast (AVX-512F, module docs).
    unsafe { _mm512_castsi512_ps(v) }
}

/// Every i32 lane set to `v`.
#[inline(always)]
fn splat_i32(v: i32) -> __m512i {
    // SAFETY: AVX-512F available (module docs).
    unsafe { _mm512_set1_epi32(v) }
}

/// The mask of the first `n` lanes (panics unless `n <= 16`).
#[inline(always)]
fn lanes_below(n: usize) -> __mmask16 {
    assert!(n <= 16);
    ((1u32 << n) - 1) as __mmask16
}

/// Sixteen bfloat16 values at `p` widened to f32 bits, NaNs left as they are.
///
/// # Safety
/// 32 bytes at `p` readable; AVX-512F available (module docs).
#[inline(always)]
unsafe fn widen_bf16x16(p: *const u16) -> __m512 {
    // SAFETY: the caller's contract.
    unsafe {
        floats(_mm512_slli_epi32::<16>(_mm512_cvtepu16_epi32(
            _mm256_loadu_si256(p.cast()),
        )))
    }
}

/// The lanes where `a` or `b` is NaN.
#[inline(always)]
fn unordered(a: __m512, b: __m512) -> __mmask16 {
    // SAFETY: AVX-512F available (module docs).
    unsafe { _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, b) }
}

/// Whether any lane of the four vectors is NaN: two compares and one mask test,
/// the one NaN test of [`Simd::load_bf16_quad`] and [`Simd::store_bf16_quad`].
#[inline(always)]
fn any_nan_of_four([a, b, c, d]: [__m512; 4]) -> bool {
    unordered(a, b) | unordered(c, d) != 0
}

/// `v` with the quiet bit set in its NaN lanes, as `half` sets it when it widens
/// a NaN.
#[inline(always)]
fn quieted(v: __m512) -> __m512 {
    let b = bits(v);
    // SAFETY: AVX-512F available (module docs).
    floats(unsafe { _mm512_mask_or_epi32(b, unordered(v, v), b, splat_i32(QUIET_BIT)) })
}

/// Each lane's f32 bits rounded to nearest even at bit 16, so the high half holds
/// the bfloat16 bits: add 0x7fff plus the lowest kept bit. The lanes in `nan`
/// instead keep their bits with the quiet bit set (a NaN's payload could carry
/// into its sign), so their high halves are the NaN's top bits made quiet, as
/// `half` narrows.
#[inline(always)]
fn bf16_rounded(v: __m512, nan: __mmask16) -> __m512i {
    let b = bits(v);
    // SAFETY: AVX-512F available (module docs).
    unsafe {
        let lowest_kept = _mm512_and_si512(_mm512_srli_epi32::<16>(b), splat_i32(1));
        let bias = _mm512_add_epi32(lowest_kept, splat_i32(0x7fff));
        let rounded = _mm512_add_epi32(b, bias);
        _mm512_mask_or_epi32(rounded, nan, b, splat_i32(QUIET_BIT))
    }
}

/// Stores the high halves of the sixteen lanes of `v` as sixteen u16 at `p`.
///
/// # Safety
/// 32 bytes at `p` writable; AVX-512F available (module docs).
#[inline(always)]
unsafe fn store_high_halves(v: __m512i, p: *mut u16) {
    // SAFETY: the caller's contract. Every shifted lane is below 2^16: the
    // truncating narrow keeps it exactly.
    unsafe { _mm256_storeu_si256(p.cast(), _mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(v))) }
}

/// Stores the bfloat16 bits of the four vectors of `quad` as 64 u16 at `p`, the
/// NaN lanes made quiet when `NAN` (without it, the vectors must hold no NaN).
///
/// # Safety
/// 128 bytes at `p` writable; AVX-512F available (module docs).
#[inline(always)]
unsafe fn store_bf16_quad_at<const NAN: bool>(quad: [F32x16; 4], p: *mut u16) {
    for (k, v) in quad.into_iter().enumerate() {
        let nan = if NAN { v.is_nan() } else { 0 };
        // SAFETY: the caller's contract, `k < 4`.
        unsafe { store_high_halves(bf16_rounded(v.0, nan), p.add(16 * k)) }
    }
}

impl Simd for F32x16 {
    const LANES: usize = 16;
    const FAST_LOOKUP: bool = true;
    const FAST_LOOKUP16: bool = true;
    type Mask = __mmask16;

    #[inline(always)]
    fn load(s: &[f32]) -> Self {
        assert!(s.len() >= 16);
        // SAFETY: `s` holds at least 16 f32 (checked); loadu has no alignment
        // requirement; AVX-512F is available (module docs).
        F32x16(unsafe { _mm512_loadu_ps(s.as_ptr()) })
    }
    #[inline(always)]
    fn store(self, s: &mut [f32]) {
        assert!(s.len() >= 16);
        // SAFETY: `s` has room for 16 f32 (checked); storeu is unaligned; AVX-512F
        // is available (module docs).
        unsafe { _mm512_storeu_ps(s.as_mut_ptr(), self.0) }
    }
    #[inline(always)]
    fn store_stream(self, s: &mut [f32]) {
        assert!(s.len() >= 16 && s.as_ptr().addr().is_multiple_of(64));
        // SAFETY: `s` has room for 16 f32 and starts on a 64-byte boundary
        // (checked), as `vmovntps` needs; AVX-512F is available (module docs).
        unsafe { _mm512_stream_ps(s.as_mut_ptr(), self.0) }
    }
    #[inline(always)]
    fn load_tail(s: &[f32], pad: f32) -> Self {
        let mask = lanes_below(s.len());
        // SAFETY: the mask enables exactly the lanes `s` holds (at most 16,
        // checked); masked-off lanes are neither read nor faulted on; AVX-512F is
        // available (module docs).
        F32x16(unsafe { _mm512_mask_loadu_ps(_mm512_set1_ps(pad), mask, s.as_ptr()) })
    }
    #[inline(always)]
    fn store_tail(self, s: &mut [f32]) {
        let mask = lanes_below(s.len());
        // SAFETY: the mask enables exactly the lanes `s` has room for (at most 16,
        // checked); masked-off lanes are not written; AVX-512F is available (module
        // docs).
        unsafe { _mm512_mask_storeu_ps(s.as_mut_ptr(), mask, self.0) }
    }
    #[inline(always)]
    fn load_f16(s: &[u16]) -> Self {
        assert!(s.len() >= 16);
        // SAFETY: 16 u16 = 32 bytes readable (checked); AVX-512F available (module
        // docs).
        F32x16(unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(s.as_ptr().cast())) })
    }
    #[inline(always)]
    fn store_f16(self, s: &mut [u16]) {
        assert!(s.len() >= 16);
        // SAFETY: 32 bytes writable (checked); AVX-512F available (module docs).
        unsafe {
            let h = _mm512_cvtps_ph::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(self.0);
            _mm256_storeu_si256(s.as_mut_ptr().cast(), h);
        }
    }
    #[inline(always)]
    fn load_bf16(s: &[u16]) -> Self {
        assert!(s.len() >= 16);
        // SAFETY: 16 values readable (checked).
        F32x16(quieted(unsafe { widen_bf16x16(s.as_ptr()) }))
    }
    #[inline(always)]
    fn load_bf16_quad(s: &[u16]) -> [Self; 4] {
        assert!(s.len() >= 64);
        let p = s.as_ptr();
        // SAFETY: 64 values readable (checked).
        let [a, b, c, d] = unsafe {
            [
                widen_bf16x16(p),
                widen_bf16x16(p.add(16)),
                widen_bf16x16(p.add(32)),
                widen_bf16x16(p.add(48)),
            ]
        };
        // NaN inputs come out quiet, as `half` does; the usual four vectors hold
        // none and skip that work (two compares and one mask test for all four).
        if !any_nan_of_four([a, b, c, d]) {
            return [F32x16(a), F32x16(b), F32x16(c), F32x16(d)];
        }
        [
            F32x16(quieted(a)),
            F32x16(quieted(b)),
            F32x16(quieted(c)),
            F32x16(quieted(d)),
        ]
    }
    #[inline(always)]
    fn store_bf16(self, s: &mut [u16]) {
        assert!(s.len() >= 16);
        let rounded = bf16_rounded(self.0, self.is_nan());
        // SAFETY: 16 values writable (checked).
        unsafe { store_high_halves(rounded, s.as_mut_ptr()) }
    }
    #[inline(always)]
    fn store_bf16_quad(quad: [Self; 4], s: &mut [u16]) {
        assert!(s.len() >= 64);
        // The usual four vectors hold no NaN and take no NaN blend: one test
        // for all four, as `load_bf16_quad` does.
        // A branch to two loops, not one loop choosing each vector's NaN mask:
        // chosen per vector, the mask took a compare and a blend even when no
        // lane is NaN (Zen 4, 2048 values in L1: 152-160 ns, 129-139 now).
        let [a, b, c, d] = quad;
        // SAFETY: 64 values writable (checked).
        unsafe {
            if !any_nan_of_four([a.0, b.0, c.0, d.0]) {
                store_bf16_quad_at::<false>(quad, s.as_mut_ptr())
            } else {
                store_bf16_quad_at::<true>(quad, s.as_mut_ptr())
            }
        }
    }
    #[inline(always)]
    fn splat(v: f32) -> Self {
        // SAFETY: AVX-512F available (module docs).
        F32x16(unsafe { _mm512_set1_ps(v) })
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        // SAFETY: AVX-512F available (module docs).
        F32x16(unsafe { _mm512_add_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        // SAFETY: AVX-512F available (module docs).
        F32x16(unsafe { _mm512_sub_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        // SAFETY: AVX-512F available (module docs).
        F32x16(unsafe { _mm512_mul_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn div(self, o: Self) -> Self {
        // SAFETY: AVX-512F available (module docs).
        F32x16(unsafe { _mm512_div_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        // SAFETY: AVX-512F available (module docs).
        F32x16(unsafe { _mm512_fmadd_ps(self.0, b.0, c.0) })
    }
    #[inline(always)]
    fn mul_err(self, b: Self, p: Self) -> Self {
        // SAFETY: AVX-512F available (module docs).
        F32x16(unsafe { _mm512_fmsub_ps(self.0, b.0, p.0) })
    }
    #[inline(always)]
    fn max(self, o: Self) -> Self {
        // SAFETY: AVX-512F available (module docs).
        unsafe {
            // maxps returns its second operand when either is NaN; patch in a NaN
            // first operand so NaN wins from both sides.
            let m = _mm512_max_ps(self.0, o.0);
            let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(self.0, self.0);
            F32x16(_mm512_mask_blend_ps(nan, m, self.0))
        }
    }
    #[inline(always)]
    fn min(self, o: Self) -> Self {
        // SAFETY: AVX-512F available (module docs).
        unsafe {
            let m = _mm512_min_ps(self.0, o.0);
            let nan = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(self.0, self.0);
            F32x16(_mm512_mask_blend_ps(nan, m, self.0))
        }
    }
    #[inline(always)]
    fn min_bound(self, bound: f32) -> Self {
        // SAFETY: AVX-512F available (module docs).
        // minps returns its second operand when either is NaN: `self`.
        F32x16(unsafe { _mm512_min_ps(_mm512_set1_ps(bound), self.0) })
    }
    #[inline(always)]
    fn max_skip_nan(self, o: Self) -> Self {
        // SAFETY: AVX-512F available (module docs).
        // maxps returns its second operand unless the first is greater.
        F32x16(unsafe { _mm512_max_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn abs(self) -> Self {
        F32x16(floats(
            // SAFETY: AVX-512F available (module docs).
            unsafe { _mm512_and_si512(bits(self.0), splat_i32(0x7fff_ffff)) },
        ))
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        // SAFETY: AVX-512F available (module docs).
        F32x16(unsafe { _mm512_sqrt_ps(self.0) })
    }
    #[inline(always)]
    fn round(self) -> Self {
        // SAFETY: AVX-512F available (module docs). Scale 0: round to an integer.
        F32x16(unsafe {
            _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(self.0)
        })
    }
    #[inline(always)]
    fn floor(self) -> Self {
        // SAFETY: AVX-512F available (module docs). Scale 0: round down to an integer.
        F32x16(unsafe {
            _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC }>(self.0)
        })
    }
    #[inline(always)]
    fn lt(self, o: Self) -> __mmask16 {
        // SAFETY: AVX-512F available (module docs).
        unsafe { _mm512_cmp_ps_mask::<_CMP_LT_OQ>(self.0, o.0) }
    }
    #[inline(always)]
    fn eq(self, o: Self) -> __mmask16 {
        // SAFETY: AVX-512F available (module docs).
        unsafe { _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(self.0, o.0) }
    }
    #[inline(always)]
    fn is_nan(self) -> __mmask16 {
        // SAFETY: AVX-512F available (module docs).
        unsafe { _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(self.0, self.0) }
    }
    #[inline(always)]
    fn any_nan(self) -> bool {
        self.is_nan() != 0
    }
    #[inline(always)]
    fn all_in(self, lo: f32, hi: f32) -> bool {
        // SAFETY: AVX-512F available (module docs).
        unsafe {
            if lo == -hi {
                // A symmetric range (the callers' constants: folded): one compare
                // of |x|, the `and` running beside the FP work.
                let below = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(self.abs().0, _mm512_set1_ps(hi));
                return below == 0xffff;
            }
            // The second compare runs under the first's mask: no mask `and`.
            let ge = _mm512_cmp_ps_mask::<_CMP_GE_OQ>(self.0, _mm512_set1_ps(lo));
            _mm512_mask_cmp_ps_mask::<_CMP_LT_OQ>(ge, self.0, _mm512_set1_ps(hi)) == 0xffff
        }
    }
    #[inline(always)]
    fn select(m: __mmask16, a: Self, b: Self) -> Self {
        // SAFETY: AVX-512F available (module docs).
        F32x16(unsafe { _mm512_mask_blend_ps(m, b.0, a.0) })
    }
    #[inline(always)]
    fn pow2(self) -> Self {
        // SAFETY: AVX-512F available (module docs). One scalef of 1.0 (exact for
        // integral lanes in range) where the bit construction takes three ops.
        F32x16(unsafe { _mm512_scalef_ps(_mm512_set1_ps(1.0), self.0) })
    }
    #[inline(always)]
    fn mul_pow2(self, n: Self) -> Self {
        // SAFETY: AVX-512F available (module docs). For integral `n`, scalef is
        // `self · 2^n` rounded once under the default MXCSR (nearest, no FTZ).
        F32x16(unsafe { _mm512_scalef_ps(self.0, n.0) })
    }
    #[inline(always)]
    fn mul_pow2_floor(self, n: Self) -> Self {
        // scalef is `self · 2^floor(n)`: it floors `n` itself.
        self.mul_pow2(n)
    }
    #[inline(always)]
    fn mul_pow2_floor_normal(self, n: Self) -> Self {
        self.mul_pow2_floor(n)
    }
    #[inline(always)]
    fn exponent_mantissa(self) -> (Self, Self) {
        // SAFETY: AVX-512F available (module docs).
        unsafe {
            let t = _mm512_sub_epi32(bits(self.0), splat_i32(SQRT_HALF_BITS));
            let e = _mm512_srai_epi32::<23>(t);
            let m = _mm512_add_epi32(
                _mm512_and_si512(t, splat_i32(0x007f_ffff)),
                splat_i32(SQRT_HALF_BITS),
            );
            (F32x16(_mm512_cvtepi32_ps(e)), F32x16(floats(m)))
        }
    }
    #[inline(always)]
    fn lookup8(self, table: &[f32; 8]) -> Self {
        // SAFETY: `table` holds 8 f32 (32 bytes); loadu has no alignment
        // requirement; AVX-512F available (module docs). The indices are masked
        // to 0..8, so only the eight loaded entries are selected.
        F32x16(unsafe {
            let t = _mm512_zextps256_ps512(_mm256_loadu_ps(table.as_ptr()));
            let i = _mm512_and_si512(bits(self.0), splat_i32(7));
            _mm512_permutexvar_ps(i, t)
        })
    }
    #[inline(always)]
    fn lookup16(self, table: &[f32; 16]) -> Self {
        // SAFETY: `table` holds 16 f32 (64 bytes); loadu has no alignment
        // requirement; AVX-512F available (module docs). vpermps on a zmm uses
        // the low four bits of each index.
        F32x16(unsafe { _mm512_permutexvar_ps(bits(self.0), _mm512_loadu_ps(table.as_ptr())) })
    }
    #[inline(always)]
    fn lookup32(self, table: &[f32; 32]) -> Self {
        // SAFETY: `table` holds 32 f32, so both 16-float loads are in bounds; loadu
        // has no alignment requirement; AVX-512F available (module docs).
        // vpermi2ps uses the low five bits of each index, bit 4 picking the table.
        F32x16(unsafe {
            let p = table.as_ptr();
            _mm512_permutex2var_ps(_mm512_loadu_ps(p), bits(self.0), _mm512_loadu_ps(p.add(16)))
        })
    }
    #[inline(always)]
    fn abs_max_bits(self, acc: Self) -> Self {
        // SAFETY: AVX-512F available (module docs).
        F32x16(floats(unsafe {
            let magnitude = _mm512_and_si512(bits(self.0), splat_i32(0x7fff_ffff));
            _mm512_max_epu32(magnitude, bits(acc.0))
        }))
    }
    #[inline(always)]
    fn copysign(self, sign: Self) -> Self {
        // SAFETY: AVX-512F available (module docs).
        F32x16(floats(unsafe {
            let magnitude = _mm512_and_si512(bits(self.0), splat_i32(0x7fff_ffff));
            let sign = _mm512_and_si512(bits(sign.0), splat_i32(i32::MIN));
            _mm512_or_si512(magnitude, sign)
        }))
    }
    #[inline(always)]
    fn sum4_rows_f64(rows: &[f32], cols: usize) -> [f64; 4] {
        avx2::F32x8::sum4_rows_f64(rows, cols)
    }
    #[inline(always)]
    fn sum4_sq_dev_rows_f64(rows: &[f32], cols: usize, means: [f64; 4]) -> [f64; 4] {
        avx2::F32x8::sum4_sq_dev_rows_f64(rows, cols, means)
    }
    #[inline(always)]
    fn affine_f64(src: &[f32], dst: &mut [f32], params: [f64; 4]) {
        let n = src.len().min(dst.len());
        let (src, dst) = (&src[..n], &mut dst[..n]);
        let mut from = src.chunks_exact(8);
        let mut to = dst.chunks_exact_mut(8);
        // SAFETY: each load reads 8 f32 of an 8-value chunk and each store writes 8
        // f32 of one; AVX-512F is available (module docs).
        unsafe {
            let [mean, inv_std, w, b] = params.map(|p| _mm512_set1_pd(p));
            for (s, d) in from.by_ref().zip(to.by_ref()) {
                let v = _mm512_cvtps_pd(_mm256_loadu_ps(s.as_ptr()));
                let y = _mm512_mul_pd(_mm512_mul_pd(_mm512_sub_pd(v, mean), inv_std), w);
                _mm256_storeu_ps(d.as_mut_ptr(), _mm512_cvtpd_ps(_mm512_add_pd(y, b)));
            }
        }
        avx2::F32x8::affine_f64(from.remainder(), to.into_remainder(), params);
    }
    #[inline(always)]
    fn reduce_sum(self) -> f32 {
        let (lo, hi) = self.halves();
        lo.add(hi).reduce_sum()
    }
    #[inline(always)]
    fn reduce_max(self) -> f32 {
        if self.any_nan() {
            return f32::NAN;
        }
        let (lo, hi) = self.halves();
        lo.max_skip_nan(hi).reduce_max_ordered()
    }
}

impl F32x16 {
    /// The low and high eight lanes.
    #[inline(always)]
    fn halves(self) -> (avx2::F32x8, avx2::F32x8) {
        // SAFETY: bit casts and a 256-bit extract (AVX-512F, module docs).
        unsafe {
            let hi = _mm512_extractf64x4_pd::<1>(_mm512_castps_pd(self.0));
            (
                avx2::F32x8(_mm512_castps512_ps256(self.0)),
                avx2::F32x8(_mm256_castpd_ps(hi)),
            )
        }
    }
}
