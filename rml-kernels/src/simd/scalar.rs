//! The portable one-lane implementation of [`Simd`]: plain f32 arithmetic, no FMA
//! (so `mul_add` rounds twice and `mul_err` uses Dekker's exact product).

use super::{SQRT_HALF_BITS, Simd};

/// Runs a kernel's scalar instance out of line, as the SIMD paths' `run` do, so
/// the dispatching function keeps a small stack frame of its own.
#[inline(never)]
pub(crate) fn run<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// One f32 lane.
#[derive(Clone, Copy, Debug)]
pub(crate) struct F32x1(pub(crate) f32);

/// Splits `a` into two halves of at most 12 significant bits each (Veltkamp).
#[inline(always)]
fn split(a: f32) -> (f32, f32) {
    let c = 4097.0 * a;
    let hi = c - (c - a);
    (hi, a - hi)
}

impl Simd for F32x1 {
    const LANES: usize = 1;
    const FAST_LOOKUP: bool = false;
    const FAST_LOOKUP16: bool = false;
    type Mask = bool;

    #[inline(always)]
    fn load(s: &[f32]) -> Self {
        F32x1(s[0])
    }
    #[inline(always)]
    fn store(self, s: &mut [f32]) {
        s[0] = self.0;
    }
    #[inline(always)]
    fn load_f16(s: &[u16]) -> Self {
        F32x1(half::f16::from_bits(s[0]).to_f32())
    }
    #[inline(always)]
    fn store_f16(self, s: &mut [u16]) {
        s[0] = half::f16::from_f32(self.0).to_bits();
    }
    #[inline(always)]
    fn load_bf16(s: &[u16]) -> Self {
        F32x1(half::bf16::from_bits(s[0]).to_f32())
    }
    #[inline(always)]
    fn store_bf16(self, s: &mut [u16]) {
        s[0] = half::bf16::from_f32(self.0).to_bits();
    }
    #[inline(always)]
    fn splat(v: f32) -> Self {
        F32x1(v)
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        F32x1(self.0 + o.0)
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        F32x1(self.0 - o.0)
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        F32x1(self.0 * o.0)
    }
    #[inline(always)]
    fn div(self, o: Self) -> Self {
        F32x1(self.0 / o.0)
    }
    #[inline(always)]
    fn mul_add(self, b: Self, c: Self) -> Self {
        F32x1(self.0 * b.0 + c.0)
    }
    #[inline(always)]
    fn mul_add_cancel(self, b: Self, c: Self) -> Self {
        let p = self.mul(b);
        p.add(c).add(self.mul_err(b, p))
    }
    #[inline(always)]
    fn mul_err(self, b: Self, p: Self) -> Self {
        let (ah, al) = split(self.0);
        let (bh, bl) = split(b.0);
        F32x1(((ah * bh - p.0) + ah * bl + al * bh) + al * bl)
    }
    #[inline(always)]
    fn max(self, o: Self) -> Self {
        let (a, b) = (self.0, o.0);
        F32x1(if a.is_nan() || a > b { a } else { b })
    }
    #[inline(always)]
    fn min(self, o: Self) -> Self {
        let (a, b) = (self.0, o.0);
        F32x1(if a.is_nan() || a < b { a } else { b })
    }
    #[inline(always)]
    fn min_bound(self, bound: f32) -> Self {
        F32x1(if bound < self.0 { bound } else { self.0 })
    }
    #[inline(always)]
    fn max_skip_nan(self, o: Self) -> Self {
        F32x1(if self.0 > o.0 { self.0 } else { o.0 })
    }
    #[inline(always)]
    fn abs(self) -> Self {
        F32x1(f32::from_bits(self.0.to_bits() & 0x7fff_ffff))
    }
    #[inline(always)]
    fn sqrt(self) -> Self {
        F32x1(super::sqrt_f32(self.0))
    }
    #[inline(always)]
    fn round(self) -> Self {
        // Adding and subtracting 1.5 * 2^23 rounds to an integer in the current
        // (nearest-even) rounding mode for |x| < 2^22.
        const MAGIC: f32 = 12_582_912.0;
        F32x1((self.0 + MAGIC) - MAGIC)
    }
    #[inline(always)]
    fn floor(self) -> Self {
        F32x1(libm::floorf(self.0))
    }
    #[inline(always)]
    fn lt(self, o: Self) -> bool {
        self.0 < o.0
    }
    #[inline(always)]
    fn eq(self, o: Self) -> bool {
        self.0 == o.0
    }
    #[inline(always)]
    fn is_nan(self) -> bool {
        self.0.is_nan()
    }
    #[inline(always)]
    fn any_nan(self) -> bool {
        self.0.is_nan()
    }
    #[inline(always)]
    fn all_in(self, lo: f32, hi: f32) -> bool {
        lo <= self.0 && self.0 < hi
    }
    #[inline(always)]
    fn select(m: bool, a: Self, b: Self) -> Self {
        if m { a } else { b }
    }
    #[inline(always)]
    fn pow2(self) -> Self {
        F32x1(f32::from_bits((((self.0 as i32) + 127) as u32) << 23))
    }
    #[inline(always)]
    fn exponent_mantissa(self) -> (Self, Self) {
        let t = self.0.to_bits().wrapping_sub(SQRT_HALF_BITS as u32);
        let e = ((t as i32) >> 23) as f32;
        let m = f32::from_bits((t & 0x007f_ffff) + SQRT_HALF_BITS as u32);
        (F32x1(e), F32x1(m))
    }
    #[inline(always)]
    fn lookup8(self, table: &[f32; 8]) -> Self {
        F32x1(table[(self.0.to_bits() & 7) as usize])
    }
    #[inline(always)]
    fn lookup16(self, table: &[f32; 16]) -> Self {
        F32x1(table[(self.0.to_bits() & 15) as usize])
    }
    #[inline(always)]
    fn lookup32(self, table: &[f32; 32]) -> Self {
        F32x1(table[(self.0.to_bits() & 31) as usize])
    }
    #[inline(always)]
    fn abs_max_bits(self, acc: Self) -> Self {
        F32x1(f32::from_bits(
            (self.0.to_bits() & 0x7fff_ffff).max(acc.0.to_bits()),
        ))
    }
    #[inline(always)]
    fn copysign(self, sign: Self) -> Self {
        F32x1(f32::from_bits(
            (self.0.to_bits() & 0x7fff_ffff) | (sign.0.to_bits() & 0x8000_0000),
        ))
    }
    #[inline(always)]
    fn reduce_sum(self) -> f32 {
        self.0
    }
    #[inline(always)]
    fn reduce_max(self) -> f32 {
        self.0
    }
}
