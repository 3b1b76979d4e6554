//! The x86_64 AVX2 + FMA + F16C implementation of [`Simd`]: eight f32 lanes.
//!
//! Every method is a safe wrapper over intrinsics. `F32x8` values are only created
//! inside [`run`], which `dispatch!` calls only after `isa::active()` said AVX2, so
//! the CPU has the features these intrinsics need; that is the safety argument of
//! every `unsafe` block below.

use core::arch::x86_64::*;

use super::{QUIET_BIT, SQRT_HALF_BITS, Simd, halves};

/// Eight f32 lanes in a ymm register.
#[derive(Clone, Copy, Debug)]
pub(crate) struct F32x8(pub(crate) __m256);

/// Runs `f` in a context compiled with AVX2, FMA and F16C enabled, so that the
/// generic kernel code `f` inlines is compiled for those features.
///
/// # Safety
/// The CPU must support AVX2, FMA and F16C.
#[inline]
pub(crate) unsafe fn run<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: the caller guarantees the CPU features `run_avx2` is compiled for.
    unsafe { run_avx2(f) }
}

// Under Miri, which implements no F16C intrinsics, the path runs without F16C
// (`isa` then selects AVX2 without it and the f16 conversions use `half`).
#[cfg_attr(not(miri), target_feature(enable = "avx2,fma,f16c"))]
#[cfg_attr(miri, target_feature(enable = "avx2,fma"))]
fn run_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Eight bfloat16 values at `p` widened exactly (a NaN keeps its bits). They are
/// loaded into both 128-bit halves of a register (a load, no shuffle), and one
/// byte shuffle puts values 0-3 of the first half and 4-7 of the second in the
/// high halves of the 32-bit lanes: one shuffle a vector, where a 256-bit load
/// needs three for two (Zen 3, 2048 values in L1: 162 -> 139-141 ns).
///
/// # Safety
/// Eight `u16` must be readable at `p`.
#[inline(always)]
unsafe fn widen_bf16x8(p: *const u16) -> __m256 {
    // SAFETY: 16 bytes readable (the caller's contract); AVX2 available (module
    // docs).
    unsafe {
        let eight = _mm256_broadcastsi128_si256(_mm_loadu_si128(p.cast()));
        let to_high_halves = _mm256_setr_epi8(
            -1, -1, 0, 1, -1, -1, 2, 3, -1, -1, 4, 5, -1, -1, 6, 7, -1, -1, 8, 9, -1, -1, 10, 11,
            -1, -1, 12, 13, -1, -1, 14, 15,
        );
        _mm256_castsi256_ps(_mm256_shuffle_epi8(eight, to_high_halves))
    }
}

/// Lane-wise bitwise or of two vectors' bits.
#[inline(always)]
fn or(a: __m256, b: __m256) -> __m256 {
    // SAFETY: AVX available (module docs).
    unsafe { _mm256_or_ps(a, b) }
}

/// All ones in each lane where `a` or `b` is NaN (one unordered compare of the
/// two), so that one [`any_lane`] tests both.
#[inline(always)]
fn unordered(a: __m256, b: __m256) -> __m256 {
    // SAFETY: AVX available (module docs).
    unsafe { _mm256_cmp_ps::<_CMP_UNORD_Q>(a, b) }
}

/// Whether any lane of the compare mask `mask` is set (one `vtestps`), so that
/// the bf16 conversions skip their NaN handling in the usual case.
#[inline(always)]
fn any_lane(mask: __m256) -> bool {
    // SAFETY: AVX available (module docs).
    unsafe { _mm256_testz_ps(mask, mask) == 0 }
}

/// `v` with the quiet bit set in its NaN lanes, as `half` sets it when it widens
/// a NaN.
#[inline(always)]
fn quieted(v: __m256) -> __m256 {
    // SAFETY: AVX available (module docs).
    unsafe {
        let quiet_bit = _mm256_castsi256_ps(_mm256_set1_epi32(QUIET_BIT));
        or(v, _mm256_and_ps(unordered(v, v), quiet_bit))
    }
}

/// Each lane's f32 bits rounded to nearest even at bit 16, so its high half
/// holds the bfloat16 bits: add 0x7fff, which carries into the kept bits past
/// the halfway point, and one more on a tie (low half 0x8000) whose lowest kept
/// bit is odd. Only for lanes that are not NaN: a NaN's payload could carry into
/// its sign.
///
/// No shifts: on the Zen 3 shifts and shuffles share one pipe, which the pair's
/// narrowing keeps busy with three shuffles. (A test of the lowest kept bit
/// alone, LLVM turns into a shift: 4 % slower.)
#[inline(always)]
fn bf16_rounded_not_nan(v: __m256) -> __m256i {
    // SAFETY: AVX2 available (module docs).
    unsafe {
        let bits = _mm256_castps_si256(v);
        let odd_tie = _mm256_cmpeq_epi32(
            _mm256_and_si256(bits, _mm256_set1_epi32(0x1_ffff)),
            _mm256_set1_epi32(0x1_8000),
        );
        // `odd_tie` is −1 on an odd tie: subtracting it adds one.
        _mm256_sub_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), odd_tie)
    }
}

/// [`bf16_rounded_not_nan`] for any lanes: a NaN lane keeps its bits with the
/// quiet bit set, so its high half is the NaN's top bits made quiet, as `half`
/// narrows.
#[inline(always)]
fn bf16_rounded(v: __m256) -> __m256i {
    // SAFETY: AVX2 available (module docs).
    unsafe {
        let nan = _mm256_castps_si256(F32x8(v).is_nan());
        let quiet = _mm256_or_si256(_mm256_castps_si256(v), _mm256_set1_epi32(QUIET_BIT));
        _mm256_blendv_epi8(bf16_rounded_not_nan(v), quiet, nan)
    }
}

/// The high halves of the four 32-bit lanes of each 128-bit half of `v`, in the
/// first eight bytes of that half when `AT_LOW`, else in its last eight; the
/// other bytes zero.
#[inline(always)]
fn high_halves<const AT_LOW: bool>(v: __m256i) -> __m256i {
    // SAFETY: AVX2 available (module docs).
    unsafe {
        let order = if AT_LOW {
            _mm256_setr_epi8(
                2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1, 2, 3, 6, 7, 10, 11, 14,
                15, -1, -1, -1, -1, -1, -1, -1, -1,
            )
        } else {
            _mm256_setr_epi8(
                -1, -1, -1, -1, -1, -1, -1, -1, 2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1, -1, -1,
                -1, -1, 2, 3, 6, 7, 10, 11, 14, 15,
            )
        };
        _mm256_shuffle_epi8(v, order)
    }
}

/// Stores the high halves of two vectors' lanes (their bfloat16 bits, once
/// [`bf16_rounded`] or [`bf16_rounded_not_nan`] has rounded them), `lo`'s then
/// `hi`'s, as sixteen u16 at the start of `s`: two byte shuffles and one reorder
/// gather them into one store.
#[inline(always)]
fn store_rounded_pair(lo: __m256i, hi: __m256i, s: &mut [u16]) {
    assert!(s.len() >= 16);
    // SAFETY: 32 bytes writable (checked); AVX2 available (module docs).
    unsafe {
        // Per 128-bit half: lo 0-3, hi 0-3 (then lo 4-7, hi 4-7); quarters
        // reordered to 0, 2, 1, 3; one store.
        let halves = _mm256_or_si256(high_halves::<true>(lo), high_halves::<false>(hi));
        let ordered = _mm256_permute4x64_epi64::<0b11_01_10_00>(halves);
        _mm256_storeu_si256(s.as_mut_ptr().cast(), ordered);
    }
}

/// All ones in the first `n` i32 lanes, zero in the others (panics unless
/// `n <= 8`): the mask of a partial vector's masked load and store.
#[inline(always)]
fn lanes_below(n: usize) -> __m256i {
    assert!(n <= 8);
    // SAFETY: AVX2 available (module docs).
    unsafe {
        let index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        _mm256_cmpgt_epi32(_mm256_set1_epi32(n as i32), index)
    }
}

impl Simd for F32x8 {
    const LANES: usize = 8;
    const FAST_LOOKUP: bool = true;
    const FAST_LOOKUP16: bool = false;
    type Mask = __m256;

    #[inline(always)]
    fn load(s: &[f32]) -> Self {
        assert!(s.len() >= 8);
        // SAFETY: `s` holds at least 8 f32 (checked); loadu has no alignment
        // requirement; AVX is available (module docs).
        F32x8(unsafe { _mm256_loadu_ps(s.as_ptr()) })
    }
    #[inline(always)]
    fn store(self, s: &mut [f32]) {
        assert!(s.len() >= 8);
        // SAFETY: `s` has room for 8 f32 (checked); storeu is unaligned; AVX is
        // available (module docs).
        unsafe { _mm256_storeu_ps(s.as_mut_ptr(), self.0) }
    }
    #[inline(always)]
    fn store_stream(self, s: &mut [f32]) {
        assert!(s.len() >= 8 && s.as_ptr().addr().is_multiple_of(32));
        // SAFETY: `s` has room for 8 f32 and starts on a 32-byte boundary
        // (checked), as `vmovntps` needs; AVX is available (module docs).
        unsafe { _mm256_stream_ps(s.as_mut_ptr(), self.0) }
    }
    #[inline(always)]
    fn load_tail(s: &[f32], pad: f32) -> Self {
        let mask = lanes_below(s.len());
        // SAFETY: the mask enables exactly the lanes `s` holds (at most 8,
        // checked); masked-off lanes are neither read nor faulted on; AVX is
        // available (module docs).
        F32x8(unsafe {
            let v = _mm256_maskload_ps(s.as_ptr(), mask);
            _mm256_blendv_ps(_mm256_set1_ps(pad), v, _mm256_castsi256_ps(mask))
        })
    }
    #[inline(always)]
    fn store_tail(self, s: &mut [f32]) {
        let mask = lanes_below(s.len());
        // SAFETY: the mask enables exactly the lanes `s` has room for (at most 8,
        // checked); masked-off lanes are not written; AVX is available (module
        // docs).
        unsafe { _mm256_maskstore_ps(s.as_mut_ptr(), mask, self.0) }
    }
    #[inline(always)]
    fn load_f16(s: &[u16]) -> Self {
        assert!(s.len() >= 8);
        #[cfg(miri)]
        {
            // Miri does not implement F16C; convert lane by lane as `half` does.
            let mut f = [0.0f32; 8];
            for (d, &h) in f.iter_mut().zip(s) {
                *d = half::f16::from_bits(h).to_f32();
            }
            Self::load(&f)
        }
        #[cfg(not(miri))]
        // SAFETY: 8 u16 = 16 bytes readable (checked); F16C available (module docs).
        F32x8(unsafe { _mm256_cvtph_ps(_mm_loadu_si128(s.as_ptr().cast())) })
    }
    #[inline(always)]
    fn store_f16(self, s: &mut [u16]) {
        assert!(s.len() >= 8);
        #[cfg(miri)]
        {
            // Miri does not implement F16C; convert lane by lane as `half` does.
            let mut f = [0.0f32; 8];
            self.store(&mut f);
            for (d, &v) in s.iter_mut().zip(&f) {
                *d = half::f16::from_f32(v).to_bits();
            }
        }
        #[cfg(not(miri))]
        // SAFETY: 16 bytes writable (checked); F16C available (module docs).
        unsafe {
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(self.0);
            _mm_storeu_si128(s.as_mut_ptr().cast(), h);
        }
    }
    #[inline(always)]
    fn load_bf16(s: &[u16]) -> Self {
        assert!(s.len() >= 8);
        // NaN inputs come out quiet (the quiet bit set), as `half` does.
        // SAFETY: 8 values readable (checked).
        F32x8(quieted(unsafe { widen_bf16x8(s.as_ptr()) }))
    }
    #[inline(always)]
    fn load_bf16_quad(s: &[u16]) -> [Self; 4] {
        assert!(s.len() >= 32);
        let p = s.as_ptr();
        // No closures here (an array `map` left them out of line, without the
        // path's features: 20x slower).
        // SAFETY: 32 values readable (checked).
        let [a, b, c, d] = unsafe {
            [
                widen_bf16x8(p),
                widen_bf16x8(p.add(8)),
                widen_bf16x8(p.add(16)),
                widen_bf16x8(p.add(24)),
            ]
        };
        // NaN inputs come out quiet, as `half` does. The usual four vectors hold
        // none: one test for all four (2048 values in L1 on the Zen 2: a test
        // per pair 127-133 ns, per four 102-107; with none at all 94-95).
        if !any_lane(or(unordered(a, b), unordered(c, d))) {
            return [F32x8(a), F32x8(b), F32x8(c), F32x8(d)];
        }
        [
            F32x8(quieted(a)),
            F32x8(quieted(b)),
            F32x8(quieted(c)),
            F32x8(quieted(d)),
        ]
    }
    #[inline(always)]
    fn store_bf16(self, s: &mut [u16]) {
        assert!(s.len() >= 8);
        // SAFETY: 16 bytes writable (checked); AVX2 available (module docs).
        unsafe {
            // Values 0-3 in the low quarter, 4-7 in the third: bring the third down.
            let halves = high_halves::<true>(bf16_rounded(self.0));
            let ordered = _mm256_permute4x64_epi64::<0b1000>(halves);
            _mm_storeu_si128(s.as_mut_ptr().cast(), _mm256_castsi256_si128(ordered));
        }
    }
    #[inline(always)]
    fn store_bf16_quad([a, b, c, d]: [Self; 4], s: &mut [u16]) {
        assert!(s.len() >= 32);
        // The usual four vectors hold no NaN and skip the NaN blend, which took
        // a third of the time (Zen 3, 2048 values in L1, a pair at a time:
        // 284-289 -> 210-212 ns; with a NaN in every pair 276 -> 260). One test
        // for four rather than one per pair: 201-212 -> 190-197 ns.
        // No closures (see `load_bf16_quad`).
        let [a, b, c, d] = if any_lane(or(unordered(a.0, b.0), unordered(c.0, d.0))) {
            [
                bf16_rounded(a.0),
                bf16_rounded(b.0),
                bf16_rounded(c.0),
                bf16_rounded(d.0),
            ]
        } else {
            [
                bf16_rounded_not_nan(a.0),
                bf16_rounded_not_nan(b.0),
                bf16_rounded_not_nan(c.0),
                bf16_rounded_not_nan(d.0),
            ]
        };
        let (first, second) = s.split_at_mut(16);
        store_rounded_pair(a, b, first);
        store_rounded_pair(c, d, second);
    }
    #[inline(always)]
    fn splat(v: f32) -> Self {
        // SAFETY: AVX available (module docs).
        F32x8(unsafe { _mm256_set1_ps(v) })
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        // SAFETY: AVX available (module docs).
        F32x8(unsafe { _mm256_add_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        // SAFETY: AVX available (module docs).
        F32x8(unsafe { _mm256_sub_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        // SAFETY: AVX available (module docs).
        F32x8(unsafe { _mm256_mul_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn div(self, o: Self) -> Self {
        // SAFETY: AVX available (module docs).
        F32x8(unsafe { _mm256_div_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        // SAFETY: FMA available (module docs).
        F32x8(unsafe { _mm256_fmadd_ps(self.0, b.0, c.0) })
    }
    #[inline(always)]
    fn mul_err(self, b: Self, p: Self) -> Self {
        // SAFETY: FMA available (module docs).
        F32x8(unsafe { _mm256_fmsub_ps(self.0, b.0, p.0) })
    }
    #[inline(always)]
    fn max(self, o: Self) -> Self {
        // SAFETY: AVX available (module docs).
        unsafe {
            // maxps returns its second operand when either is NaN; patch in a NaN
            // first operand so NaN wins from both sides.
            let m = _mm256_max_ps(self.0, o.0);
            let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(self.0, self.0);
            F32x8(_mm256_blendv_ps(m, self.0, nan))
        }
    }
    #[inline(always)]
    fn min(self, o: Self) -> Self {
        // SAFETY: AVX available (module docs).
        unsafe {
            let m = _mm256_min_ps(self.0, o.0);
            let nan = _mm256_cmp_ps::<_CMP_UNORD_Q>(self.0, self.0);
            F32x8(_mm256_blendv_ps(m, self.0, nan))
        }
    }
    #[inline(always)]
    fn min_bound(self, bound: f32) -> Self {
        // SAFETY: AVX available (module docs).
        // minps returns its second operand when either is NaN: `self`.
        F32x8(unsafe { _mm256_min_ps(_mm256_set1_ps(bound), self.0) })
    }
    #[inline(always)]
    fn max_skip_nan(self, o: Self) -> Self {
        // SAFETY: AVX available (module docs).
        // maxps returns its second operand unless the first is greater.
        F32x8(unsafe { _mm256_max_ps(self.0, o.0) })
    }
    #[inline(always)]
    fn abs(self) -> Self {
        // SAFETY: AVX available (module docs).
        F32x8(unsafe { _mm256_andnot_ps(_mm256_set1_ps(-0.0), self.0) })
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        // SAFETY: AVX available (module docs).
        F32x8(unsafe { _mm256_sqrt_ps(self.0) })
    }
    #[inline(always)]
    fn round(self) -> Self {
        // SAFETY: AVX available (module docs).
        F32x8(unsafe {
            _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(self.0)
        })
    }
    #[inline(always)]
    fn floor(self) -> Self {
        // SAFETY: AVX available (module docs).
        F32x8(unsafe { _mm256_floor_ps(self.0) })
    }
    #[inline(always)]
    fn lt(self, o: Self) -> __m256 {
        // SAFETY: AVX available (module docs).
        unsafe { _mm256_cmp_ps::<_CMP_LT_OQ>(self.0, o.0) }
    }
    #[inline(always)]
    fn eq(self, o: Self) -> __m256 {
        // SAFETY: AVX available (module docs).
        unsafe { _mm256_cmp_ps::<_CMP_EQ_OQ>(self.0, o.0) }
    }
    #[inline(always)]
    fn is_nan(self) -> __m256 {
        // SAFETY: AVX available (module docs).
        unsafe { _mm256_cmp_ps::<_CMP_UNORD_Q>(self.0, self.0) }
    }
    #[inline(always)]
    fn any_nan(self) -> bool {
        // SAFETY: AVX available (module docs).
        unsafe { _mm256_movemask_ps(self.is_nan()) != 0 }
    }
    #[inline(always)]
    fn all_in(self, lo: f32, hi: f32) -> bool {
        // SAFETY: AVX available (module docs).
        unsafe {
            if lo == -hi {
                // A symmetric range (the callers' constants: folded): one compare
                // of |x| (NaN compares false).
                let below = _mm256_cmp_ps::<_CMP_LT_OQ>(self.abs().0, _mm256_set1_ps(hi));
                return _mm256_movemask_ps(below) == 0xff;
            }
            let ge = _mm256_cmp_ps::<_CMP_GE_OQ>(self.0, _mm256_set1_ps(lo));
            let lt = _mm256_cmp_ps::<_CMP_LT_OQ>(self.0, _mm256_set1_ps(hi));
            _mm256_movemask_ps(_mm256_and_ps(ge, lt)) == 0xff
        }
    }
    #[inline(always)]
    fn select(m: __m256, a: Self, b: Self) -> Self {
        // SAFETY: AVX available (module docs).
        F32x8(unsafe { _mm256_blendv_ps(b.0, a.0, m) })
    }
    #[inline(always)]
    fn mul_pow2_normal(self, n: Self) -> Self {
        // SAFETY: AVX2 available (module docs).
        unsafe {
            let e = _mm256_slli_epi32::<23>(_mm256_cvtps_epi32(n.0));
            F32x8(_mm256_castsi256_ps(_mm256_add_epi32(
                _mm256_castps_si256(self.0),
                e,
            )))
        }
    }
    #[inline(always)]
    fn pow2(self) -> Self {
        // 1 and every 2^n in range are normal: 1.0's bits plus n << 23.
        Self::splat(1.0).mul_pow2_normal(self)
    }
    #[inline(always)]
    fn exponent_mantissa(self) -> (Self, Self) {
        // SAFETY: AVX2 available (module docs).
        unsafe {
            let t = _mm256_sub_epi32(
                _mm256_castps_si256(self.0),
                _mm256_set1_epi32(SQRT_HALF_BITS),
            );
            let e = _mm256_srai_epi32::<23>(t);
            let m = _mm256_add_epi32(
                _mm256_and_si256(t, _mm256_set1_epi32(0x007f_ffff)),
                _mm256_set1_epi32(SQRT_HALF_BITS),
            );
            (F32x8(_mm256_cvtepi32_ps(e)), F32x8(_mm256_castsi256_ps(m)))
        }
    }
    #[inline(always)]
    fn lookup8(self, table: &[f32; 8]) -> Self {
        // SAFETY: `table` holds 8 f32; loadu has no alignment requirement; AVX2
        // available (module docs). vpermps uses the low three bits of each index.
        F32x8(unsafe {
            _mm256_permutevar8x32_ps(_mm256_loadu_ps(table.as_ptr()), _mm256_castps_si256(self.0))
        })
    }
    #[inline(always)]
    fn lookup16(self, table: &[f32; 16]) -> Self {
        // SAFETY: `table` holds 16 f32, so both 8-float loads are in bounds; loadu
        // has no alignment requirement; AVX2 available (module docs). Each vpermps
        // uses the low three bits of the index; bit 3, shifted into the sign bit,
        // picks the table half.
        unsafe {
            let i = _mm256_castps_si256(self.0);
            let low = _mm256_permutevar8x32_ps(_mm256_loadu_ps(table.as_ptr()), i);
            let high = _mm256_permutevar8x32_ps(_mm256_loadu_ps(table.as_ptr().add(8)), i);
            F32x8(_mm256_blendv_ps(
                low,
                high,
                _mm256_castsi256_ps(_mm256_slli_epi32(i, 28)),
            ))
        }
    }
    #[inline(always)]
    fn lookup32(self, table: &[f32; 32]) -> Self {
        let (low, high) = halves(table);
        // SAFETY: AVX2 available (module docs). Bit 4 of the index, shifted into
        // the sign bit, picks the half.
        F32x8(unsafe {
            let pick = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(self.0), 27));
            _mm256_blendv_ps(self.lookup16(low).0, self.lookup16(high).0, pick)
        })
    }
    #[inline(always)]
    fn abs_max_bits(self, acc: Self) -> Self {
        // SAFETY: AVX2 available (module docs).
        unsafe {
            let magnitude =
                _mm256_and_si256(_mm256_castps_si256(self.0), _mm256_set1_epi32(0x7fff_ffff));
            F32x8(_mm256_castsi256_ps(_mm256_max_epu32(
                magnitude,
                _mm256_castps_si256(acc.0),
            )))
        }
    }
    #[inline(always)]
    fn copysign(self, sign: Self) -> Self {
        // SAFETY: AVX available (module docs).
        unsafe {
            let mask = _mm256_set1_ps(-0.0);
            F32x8(_mm256_or_ps(
                _mm256_andnot_ps(mask, self.0),
                _mm256_and_ps(mask, sign.0),
            ))
        }
    }
    #[inline(always)]
    fn sum4_rows_f64(rows: &[f32], cols: usize) -> [f64; 4] {
        let mut acc = [-0.0f64; 4];
        let whole = add4_columns_f64(rows, cols, &mut acc, None);
        for c in whole..cols {
            for (i, a) in acc.iter_mut().enumerate() {
                *a += f64::from(rows[i * cols + c]);
            }
        }
        acc
    }
    #[inline(always)]
    fn sum4_sq_dev_rows_f64(rows: &[f32], cols: usize, means: [f64; 4]) -> [f64; 4] {
        let mut acc = [-0.0f64; 4];
        let whole = add4_columns_f64(rows, cols, &mut acc, Some(means));
        for c in whole..cols {
            for (i, a) in acc.iter_mut().enumerate() {
                let d = f64::from(rows[i * cols + c]) - means[i];
                *a += d * d;
            }
        }
        acc
    }
    #[inline(always)]
    fn affine_f64(src: &[f32], dst: &mut [f32], params: [f64; 4]) {
        let n = src.len().min(dst.len());
        let (src, dst) = (&src[..n], &mut dst[..n]);
        let mut from = src.chunks_exact(4);
        let mut to = dst.chunks_exact_mut(4);
        // SAFETY: each load reads 4 f32 of a 4-value chunk and each store writes 4
        // f32 of one; AVX is available (module docs).
        unsafe {
            let [mean, inv_std, w, b] = params.map(|p| _mm256_set1_pd(p));
            for (s, d) in from.by_ref().zip(to.by_ref()) {
                let v = _mm256_cvtps_pd(_mm_loadu_ps(s.as_ptr()));
                let y = _mm256_mul_pd(_mm256_mul_pd(_mm256_sub_pd(v, mean), inv_std), w);
                _mm_storeu_ps(d.as_mut_ptr(), _mm256_cvtpd_ps(_mm256_add_pd(y, b)));
            }
        }
        super::scalar::F32x1::affine_f64(from.remainder(), to.into_remainder(), params);
    }
    #[inline(always)]
    fn reduce_sum(self) -> f32 {
        self.fold_lanes(
            #[inline(always)]
            // SAFETY: SSE is part of x86_64.
            |a, b| unsafe { _mm_add_ps(a, b) },
        )
    }
    #[inline(always)]
    fn reduce_max(self) -> f32 {
        if self.any_nan() {
            return f32::NAN;
        }
        self.reduce_max_ordered()
    }
}

impl F32x8 {
    /// The largest lane of a vector without NaN, by halving `maxps` steps:
    /// [`Simd::reduce_max`] tests for NaN once up front and then takes this tree
    /// of single instructions. Its lane-by-lane NaN-propagating fold held a
    /// 1024-value row maximum in L1 for longer than the row's loads (59 % of the
    /// time on a Zen 4: docs/kernels.md, session 44).
    #[inline(always)]
    pub(super) fn reduce_max_ordered(self) -> f32 {
        self.fold_lanes(
            #[inline(always)]
            // SAFETY: SSE is part of x86_64.
            |a, b| unsafe { _mm_max_ps(a, b) },
        )
    }

    /// Lane 0 of three halving steps of the lane-wise SSE operation `op`: the
    /// high half onto the low, the high pair onto the low pair, lane 1 onto lane
    /// 0 (the order of [`Simd::reduce_sum`]'s additions on this path).
    #[inline(always)]
    fn fold_lanes(self, op: impl Fn(__m128, __m128) -> __m128) -> f32 {
        // SAFETY: AVX available (module docs).
        unsafe {
            let m = op(
                _mm256_castps256_ps128(self.0),
                _mm256_extractf128_ps::<1>(self.0),
            );
            let m = op(m, _mm_movehl_ps(m, m));
            let m = op(m, _mm_shuffle_ps::<0b01>(m, m));
            _mm_cvtss_f32(m)
        }
    }
}

/// Adds each of the first `cols − cols % 4` columns of four rows of `cols` values
/// (`rows[i * cols..][..cols]`) to `acc` in column order, lane `i` taking row `i`
/// (with `means`, the squared deviation `(v − means[i])²` instead of `v`): 4 × 4
/// blocks transposed so that each column is one register of four f64. Returns the
/// columns done.
#[inline(always)]
fn add4_columns_f64(
    rows: &[f32],
    cols: usize,
    acc: &mut [f64; 4],
    means: Option<[f64; 4]>,
) -> usize {
    assert!(rows.len() >= 4 * cols);
    let whole = cols - cols % 4;
    // SAFETY: every load reads `rows[i * cols + c..][..4]` with `i < 4` and
    // `c + 4 <= whole <= cols`, inside `rows` (checked above); the loads and the
    // store of `acc` and `means` touch their four f64; AVX is available (module
    // docs).
    unsafe {
        let p = rows.as_ptr();
        let mut sums = _mm256_loadu_pd(acc.as_ptr());
        let m = means.map(|m| _mm256_loadu_pd(m.as_ptr()));
        let mut c = 0;
        while c < whole {
            let [r0, r1, r2, r3] = [0, 1, 2, 3].map(|i| _mm_loadu_ps(p.add(i * cols + c)));
            // Transpose: column j of the block holds value c + j of each row.
            let (lo01, lo23) = (_mm_unpacklo_ps(r0, r1), _mm_unpacklo_ps(r2, r3));
            let (hi01, hi23) = (_mm_unpackhi_ps(r0, r1), _mm_unpackhi_ps(r2, r3));
            for column in [
                _mm_movelh_ps(lo01, lo23),
                _mm_movehl_ps(lo23, lo01),
                _mm_movelh_ps(hi01, hi23),
                _mm_movehl_ps(hi23, hi01),
            ] {
                let v = _mm256_cvtps_pd(column);
                let term = match m {
                    Some(m) => {
                        let d = _mm256_sub_pd(v, m);
                        _mm256_mul_pd(d, d)
                    }
                    None => v,
                };
                sums = _mm256_add_pd(sums, term);
            }
            c += 4;
        }
        _mm256_storeu_pd(acc.as_mut_ptr(), sums);
    }
    whole
}
