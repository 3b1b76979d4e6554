//! The aarch64 Advanced SIMD (NEON) implementation of [`Simd`]: four f32 lanes.
//!
//! NEON is part of the aarch64 baseline this module is compiled for (it is gated on
//! `target_feature = "neon"`), so every intrinsic is available; the `unsafe`
//! blocks below only discharge that and the checked slice lengths. Half-precision
//! conversion uses `fcvtl`/`fcvtn` through `asm!` because the `float16x4_t`
//! intrinsics are not stable Rust.

use core::arch::aarch64::*;
use core::arch::asm;

use super::{SQRT_HALF_BITS, Simd, halves};

/// Four f32 lanes in a q register.
#[derive(Clone, Copy, Debug)]
pub(crate) struct F32x4(float32x4_t);

impl F32x4 {
    /// The q register, for kernels outside this module (the GEMV weight loads).
    #[inline(always)]
    pub(crate) fn into_raw(self) -> float32x4_t {
        self.0
    }
}

/// Sixteen f32 as the four byte vectors a `tbl`/`tbx` lookup reads.
#[inline(always)]
fn table_bytes(table: &[f32; 16]) -> uint8x16x4_t {
    let p = table.as_ptr();
    // SAFETY: `table` holds 16 f32 = 64 readable bytes; NEON is baseline.
    unsafe {
        uint8x16x4_t(
            vld1q_u8(p.cast()),
            vld1q_u8(p.add(4).cast()),
            vld1q_u8(p.add(8).cast()),
            vld1q_u8(p.add(12).cast()),
        )
    }
}

/// The byte indices `4i..4i+3` of each lane's table entry `i = bits & mask`
/// (`mask` 15 or 31), as a `tbl`/`tbx` lookup takes them.
#[inline(always)]
fn entry_bytes(lanes: float32x4_t, mask: u32) -> uint8x16_t {
    // SAFETY: NEON is baseline.
    unsafe {
        let i = vandq_u32(vreinterpretq_u32_f32(lanes), vdupq_n_u32(mask));
        let bytes = vmlaq_u32(vdupq_n_u32(0x0302_0100), i, vdupq_n_u32(0x0404_0404));
        vreinterpretq_u8_u32(bytes)
    }
}

/// Eight bfloat16 values widened exactly into two vectors. NaNs come out quiet
/// (the quiet bit set), as `half` does: the test and the bit on the eight 16-bit
/// values, before widening.
#[inline(always)]
fn widen_bf16x8(h: uint16x8_t) -> [F32x4; 2] {
    // SAFETY: NEON is baseline (module docs).
    unsafe {
        let abs = vandq_u16(h, vdupq_n_u16(0x7fff));
        let nan = vcgtq_u16(abs, vdupq_n_u16(0x7f80));
        let h = vorrq_u16(h, vandq_u16(nan, vdupq_n_u16(0x0040)));
        [
            F32x4(vreinterpretq_f32_u32(vshll_n_u16::<16>(vget_low_u16(h)))),
            F32x4(vreinterpretq_f32_u32(vshll_high_n_u16::<16>(h))),
        ]
    }
}

impl Simd for F32x4 {
    const LANES: usize = 4;
    const FAST_LOOKUP: bool = false;
    const FAST_LOOKUP16: bool = false;
    type Mask = uint32x4_t;

    #[inline(always)]
    fn load(s: &[f32]) -> Self {
        assert!(s.len() >= 4);
        // SAFETY: 4 f32 readable (checked); NEON is baseline (module docs).
        F32x4(unsafe { vld1q_f32(s.as_ptr()) })
    }
    #[inline(always)]
    fn store(self, s: &mut [f32]) {
        assert!(s.len() >= 4);
        // SAFETY: 4 f32 writable (checked); NEON is baseline.
        unsafe { vst1q_f32(s.as_mut_ptr(), self.0) }
    }
    #[inline(always)]
    fn load_f16(s: &[u16]) -> Self {
        assert!(s.len() >= 4);
        // SAFETY: 4 u16 readable (checked); `fcvtl` is baseline aarch64 SIMD and
        // only reads and writes the named registers.
        unsafe {
            let h = vld1_u16(s.as_ptr());
            let f: float32x4_t;
            asm!("fcvtl {f:v}.4s, {h:v}.4h", h = in(vreg) h, f = out(vreg) f,
                 options(pure, nomem, nostack, preserves_flags));
            F32x4(f)
        }
    }
    #[inline(always)]
    fn store_f16(self, s: &mut [u16]) {
        assert!(s.len() >= 4);
        // SAFETY: 4 u16 writable (checked); `fcvtn` rounds per FPCR (nearest-even,
        // the Linux default) and only touches the named registers.
        unsafe {
            let h: uint16x4_t;
            asm!("fcvtn {h:v}.4h, {f:v}.4s", f = in(vreg) self.0, h = out(vreg) h,
                 options(pure, nomem, nostack, preserves_flags));
            vst1_u16(s.as_mut_ptr(), h);
        }
    }
    #[inline(always)]
    fn load_bf16(s: &[u16]) -> Self {
        assert!(s.len() >= 4);
        // SAFETY: 4 u16 readable (checked); NEON is baseline.
        unsafe {
            let bits = vshll_n_u16::<16>(vld1_u16(s.as_ptr()));
            let abs = vandq_u32(bits, vdupq_n_u32(0x7fff_ffff));
            let nan = vcgtq_u32(abs, vdupq_n_u32(0x7f80_0000));
            let quiet = vandq_u32(nan, vdupq_n_u32(0x0040_0000));
            F32x4(vreinterpretq_f32_u32(vorrq_u32(bits, quiet)))
        }
    }
    #[inline(always)]
    fn load_bf16_quad(s: &[u16]) -> [Self; 4] {
        assert!(s.len() >= 16);
        // SAFETY: 16 u16 readable (checked); NEON is baseline.
        let (first, second) = unsafe { (vld1q_u16(s.as_ptr()), vld1q_u16(s.as_ptr().add(8))) };
        let ([a, b], [c, d]) = (widen_bf16x8(first), widen_bf16x8(second));
        [a, b, c, d]
    }
    #[inline(always)]
    fn store_bf16(self, s: &mut [u16]) {
        assert!(s.len() >= 4);
        // SAFETY: 4 u16 writable (checked); NEON is baseline.
        unsafe {
            let bits = vreinterpretq_u32_f32(self.0);
            let abs = vandq_u32(bits, vdupq_n_u32(0x7fff_ffff));
            let nan = vcgtq_u32(abs, vdupq_n_u32(0x7f80_0000));
            let lsb = vandq_u32(vshrq_n_u32::<16>(bits), vdupq_n_u32(1));
            let bias = vaddq_u32(lsb, vdupq_n_u32(0x7fff));
            let rounded = vshrn_n_u32::<16>(vaddq_u32(bits, bias));
            let quiet = vorr_u16(vshrn_n_u32::<16>(bits), vdup_n_u16(0x40));
            vst1_u16(s.as_mut_ptr(), vbsl_u16(vmovn_u32(nan), quiet, rounded));
        }
    }
    #[inline(always)]
    fn splat(v: f32) -> Self {
        // SAFETY: NEON is baseline.
        F32x4(unsafe { vdupq_n_f32(v) })
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        // SAFETY: NEON is baseline.
        F32x4(unsafe { vaddq_f32(self.0, o.0) })
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        // SAFETY: NEON is baseline.
        F32x4(unsafe { vsubq_f32(self.0, o.0) })
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        // SAFETY: NEON is baseline.
        F32x4(unsafe { vmulq_f32(self.0, o.0) })
    }
    #[inline(always)]
    fn div(self, o: Self) -> Self {
        // SAFETY: NEON is baseline.
        F32x4(unsafe { vdivq_f32(self.0, o.0) })
    }
    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        // SAFETY: NEON is baseline.
        F32x4(unsafe { vfmaq_f32(c.0, self.0, b.0) })
    }
    #[inline(always)]
    fn mul_err(self, b: Self, p: Self) -> Self {
        // SAFETY: NEON is baseline.
        F32x4(unsafe { vfmaq_f32(vnegq_f32(p.0), self.0, b.0) })
    }
    #[inline(always)]
    fn max(self, o: Self) -> Self {
        // SAFETY: NEON is baseline; fmax propagates NaN.
        F32x4(unsafe { vmaxq_f32(self.0, o.0) })
    }
    #[inline(always)]
    fn min(self, o: Self) -> Self {
        // SAFETY: NEON is baseline; fmin propagates NaN.
        F32x4(unsafe { vminq_f32(self.0, o.0) })
    }
    #[inline(always)]
    fn min_bound(self, bound: f32) -> Self {
        self.min(Self::splat(bound))
    }
    #[inline(always)]
    fn max_skip_nan(self, o: Self) -> Self {
        Self::select(o.lt(self), self, o)
    }
    #[inline(always)]
    fn abs(self) -> Self {
        // SAFETY: NEON is baseline.
        F32x4(unsafe { vabsq_f32(self.0) })
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        // SAFETY: NEON is baseline.
        F32x4(unsafe { vsqrtq_f32(self.0) })
    }
    #[inline(always)]
    fn round(self) -> Self {
        // SAFETY: NEON is baseline.
        F32x4(unsafe { vrndnq_f32(self.0) })
    }
    #[inline(always)]
    fn floor(self) -> Self {
        // SAFETY: NEON is baseline.
        F32x4(unsafe { vrndmq_f32(self.0) })
    }
    #[inline(always)]
    fn lt(self, o: Self) -> uint32x4_t {
        // SAFETY: NEON is baseline.
        unsafe { vcltq_f32(self.0, o.0) }
    }
    #[inline(always)]
    fn eq(self, o: Self) -> uint32x4_t {
        // SAFETY: NEON is baseline.
        unsafe { vceqq_f32(self.0, o.0) }
    }
    #[inline(always)]
    fn is_nan(self) -> uint32x4_t {
        // SAFETY: NEON is baseline.
        unsafe { vmvnq_u32(vceqq_f32(self.0, self.0)) }
    }
    #[inline(always)]
    fn any_nan(self) -> bool {
        // SAFETY: NEON is baseline.
        unsafe { vmaxvq_u32(self.is_nan()) != 0 }
    }
    #[inline(always)]
    fn all_in(self, lo: f32, hi: f32) -> bool {
        // SAFETY: NEON is baseline.
        unsafe {
            if lo == -hi {
                // A symmetric range (the callers' constants: folded): one compare
                // of |x| (NaN compares false).
                return vminvq_u32(vcltq_f32(vabsq_f32(self.0), vdupq_n_f32(hi))) != 0;
            }
            let ge = vcgeq_f32(self.0, vdupq_n_f32(lo));
            let lt = vcltq_f32(self.0, vdupq_n_f32(hi));
            vminvq_u32(vandq_u32(ge, lt)) != 0
        }
    }
    #[inline(always)]
    fn select(m: uint32x4_t, a: Self, b: Self) -> Self {
        // SAFETY: NEON is baseline.
        F32x4(unsafe { vbslq_f32(m, a.0, b.0) })
    }
    #[inline(always)]
    fn pow2(self) -> Self {
        // SAFETY: NEON is baseline.
        unsafe {
            let n = vcvtq_s32_f32(self.0);
            let e = vshlq_n_s32::<23>(vaddq_s32(n, vdupq_n_s32(127)));
            F32x4(vreinterpretq_f32_s32(e))
        }
    }
    #[inline(always)]
    fn exponent_mantissa(self) -> (Self, Self) {
        // SAFETY: NEON is baseline.
        unsafe {
            let t = vsubq_s32(vreinterpretq_s32_f32(self.0), vdupq_n_s32(SQRT_HALF_BITS));
            let e = vshrq_n_s32::<23>(t);
            let m = vaddq_s32(
                vandq_s32(t, vdupq_n_s32(0x007f_ffff)),
                vdupq_n_s32(SQRT_HALF_BITS),
            );
            (F32x4(vcvtq_f32_s32(e)), F32x4(vreinterpretq_f32_s32(m)))
        }
    }
    #[inline(always)]
    fn lookup8(self, table: &[f32; 8]) -> Self {
        // SAFETY: `table` holds 8 f32 = 32 readable bytes; NEON is baseline.
        unsafe {
            // Byte indices 4i, 4i+1, 4i+2, 4i+3 for lane index i = bits & 7.
            let i = vandq_u32(vreinterpretq_u32_f32(self.0), vdupq_n_u32(7));
            let bytes = vmlaq_u32(vdupq_n_u32(0x0302_0100), i, vdupq_n_u32(0x0404_0404));
            let t = uint8x16x2_t(
                vld1q_u8(table.as_ptr().cast()),
                vld1q_u8(table.as_ptr().add(4).cast()),
            );
            F32x4(vreinterpretq_f32_u8(vqtbl2q_u8(
                t,
                vreinterpretq_u8_u32(bytes),
            )))
        }
    }
    #[inline(always)]
    fn lookup16(self, table: &[f32; 16]) -> Self {
        // SAFETY: NEON is baseline.
        F32x4(unsafe {
            vreinterpretq_f32_u8(vqtbl4q_u8(table_bytes(table), entry_bytes(self.0, 15)))
        })
    }
    #[inline(always)]
    fn lookup32(self, table: &[f32; 32]) -> Self {
        let (low, high) = halves(table);
        let bytes = entry_bytes(self.0, 31);
        // SAFETY: NEON is baseline. `tbl` reads the first 64 bytes (0 where an
        // index is past them), `tbx` the other 64 at the indices less 64 (keeping
        // the lanes that wrap below 0, out of its range).
        F32x4(unsafe {
            let from_low = vqtbl4q_u8(table_bytes(low), bytes);
            let high_bytes = vsubq_u8(bytes, vdupq_n_u8(64));
            vreinterpretq_f32_u8(vqtbx4q_u8(from_low, table_bytes(high), high_bytes))
        })
    }
    #[inline(always)]
    fn abs_max_bits(self, acc: Self) -> Self {
        // SAFETY: NEON is baseline on aarch64.
        unsafe {
            let magnitude = vandq_u32(vreinterpretq_u32_f32(self.0), vdupq_n_u32(0x7fff_ffff));
            F32x4(vreinterpretq_f32_u32(vmaxq_u32(
                magnitude,
                vreinterpretq_u32_f32(acc.0),
            )))
        }
    }
    #[inline(always)]
    fn copysign(self, sign: Self) -> Self {
        // SAFETY: NEON is baseline.
        F32x4(unsafe { vbslq_f32(vdupq_n_u32(0x8000_0000), sign.0, self.0) })
    }
    #[inline(always)]
    fn reduce_sum(self) -> f32 {
        // SAFETY: NEON is baseline.
        unsafe { vaddvq_f32(self.0) }
    }
    #[inline(always)]
    fn reduce_max(self) -> f32 {
        // SAFETY: NEON is baseline; fmaxv propagates NaN.
        unsafe { vmaxvq_f32(self.0) }
    }
}
