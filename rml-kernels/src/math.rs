//! Vectorized transcendental functions on f32: exp, log, tanh, sigmoid, erf, GELU
//! (erf and tanh forms), SiLU and softplus.
//!
//! Every function is one branch-free algorithm written over [`crate::simd::Simd`],
//! so the AVX2, NEON and scalar paths compute the same formulas (the scalar path
//! rounds `a * b + c` twice where the others fuse it). The slice functions here
//! check lengths and dispatch through [`crate::elementwise::unary`].
//!
//! # Algorithms
//! - `exp`: `x = n ln2 + r`, `|r| <= ln2/2` (Cody–Waite two-constant reduction),
//!   `e^r = 1 + r + r^2 q(r)` with a degree-4 near-minimax `q`, then scaling by
//!   `2^n` as two factors `2^n1 * 2^n2` so results near overflow and in the
//!   subnormal range are rounded once.
//! - `log`: `x = 2^e m`, `m` in `[sqrt(1/2), sqrt(2))` straight from the bits
//!   (subtract the bits of `sqrt(1/2)`, shift and mask: no compare or select),
//!   `s = (m-1)/(m+1)`, `log m = 2s + s^3 R(s^2)` (degree-3 `R`), plus `e ln2` in
//!   two parts; subnormals are prescaled by `2^23`. (A division-free `f - f^2/2 + f^3 P(f)`,
//!   `f = m - 1`, degree-7 `P`, was more accurate, 0.89 ULP, and no faster on
//!   AVX2: 1.50 µs against 1.28 µs per 2048 values in one quiet A/B pair.)
//! - `tanh`: `x + x^3 P(x^2)` (degree-5 `P`) for `|x| < 0.55`, else
//!   `1 - 2 / (e^{2|x|} + 1)` with the sign restored.
//! - `sigmoid`: `1 / (1 + e^{-|x|})`, or `e^{-|x|} / (1 + e^{-|x|})` for `x < 0`,
//!   with `e^{-|x|}` carried scaled by `2^24` so negative inputs keep full
//!   relative precision down to the subnormal range (also in SiLU, GELU-tanh).
//! - `erf`: `x Q(x^2)` (degree-7 `Q`) for `|x| < 0.875`, else
//!   `1 - e^{-x^2} H(|x| - 0.875)` (degree-8 `H`, `|x|` clamped to 4, where erf
//!   rounds to 1), sign restored: no division.
//! - GELU (erf form) `x/2 (1 + erf(x/sqrt2))`: written as `x/2 erfc(-x/sqrt2)`
//!   with `erfc` from `Q` and `e^{-x^2} G(1 / (1 + |x|/2))` (degree-10 `G`, valid
//!   to 10), and `x^2/2` carried as an exact
//!   two-float product so the negative tail is accurate relative to its tiny
//!   value.
//! - GELU (tanh form) `x/2 (1 + tanh(u))`, `u = sqrt(2/pi) (x + 0.044715 x^3)`:
//!   computed as the identical `x sigmoid(2u)`, free of cancellation.
//! - SiLU `x sigmoid(x)`; softplus `max(x, 0) + log1p(e^{-|x|})` with
//!   `log1p(t) = log(u) + (t - (u - 1)) / u`, `u = 1 + t` rounded, where the
//!   division is a rough polynomial (the numerator is `u`'s tiny rounding error)
//!   and `log(u)`, `u` in `[1, 2]`, skips `log`'s subnormal and special-value
//!   handling (a NaN input reaches the result through `t`).
//!
//! Polynomial coefficients come from `rml-kernels/scripts/fit_math.py` (Lawson
//! near-minimax fits in float64, rounded to f32).
//!
//! # Accuracy
//! The constants `*_MAX_ULP` state the largest error, in units in the last place of
//! the f32 result, against the correctly rounded value (from f64 libm), over every
//! input whose result is a normal f32 (measured values in each constant's doc, on
//! every 509th f32 bit pattern, AVX2 and scalar alike); `MATH_SUBNORMAL_ABS`
//! bounds the absolute error where the result is subnormal. Special values: NaN in gives NaN out;
//! infinities give the mathematical limits (`exp(-inf) = 0`, `log(0) = -inf`,
//! `log(x < 0) = NaN`, `tanh(±inf) = ±1`, …) except `gelu(-inf)`,
//! `gelu_tanh(-inf)` and `silu(-inf)`, which are NaN (`-inf * 0`) as in the
//! frameworks. The tests in this module and `examples/math_error.rs` measure these
//! bounds over dense sweeps of the f32 range on every path the machine runs.

use rml_core::Result;

use crate::elementwise::{UnaryOp, unary, unary_inplace};
use crate::simd::{Simd, clamp};

/// Max error of [`exp`] in ULP (normal results; measured 0.98).
pub const EXP_MAX_ULP: f64 = 1.5;
/// Max error of [`log`] in ULP (measured 1.86).
pub const LOG_MAX_ULP: f64 = 2.5;
/// Max error of [`tanh`] in ULP (measured 1.39).
pub const TANH_MAX_ULP: f64 = 2.0;
/// Max error of [`sigmoid`] in ULP (normal results; measured 2.52).
pub const SIGMOID_MAX_ULP: f64 = 3.0;
/// Max error of [`erf`] in ULP (measured 2.44, in the `|x| < 0.875` branch).
pub const ERF_MAX_ULP: f64 = 3.0;
/// Max error of [`gelu`] (erf form) in ULP (normal results; measured 6.39).
pub const GELU_MAX_ULP: f64 = 8.0;
/// Max error of [`gelu_tanh`] in ULP for `x >= GELU_TANH_TAIL_X` (measured 12.4).
/// The f32 rounding of `u` is amplified by `|u|` through the exponential, as in
/// any f32 evaluation of this formula.
pub const GELU_TANH_MAX_ULP: f64 = 20.0;
/// Below this input, [`GELU_TANH_TAIL_MAX_ULP`] applies instead.
pub const GELU_TANH_TAIL_X: f32 = -3.0;
/// Max error of [`gelu_tanh`] in ULP for `x < GELU_TANH_TAIL_X`, normal results
/// (measured 174).
pub const GELU_TANH_TAIL_MAX_ULP: f64 = 256.0;
/// Max error of [`silu`] in ULP (normal results; measured 2.97).
pub const SILU_MAX_ULP: f64 = 4.0;
/// Max error of [`softplus`] in ULP (normal results; measured 2.92).
pub const SOFTPLUS_MAX_ULP: f64 = 4.0;
/// Max absolute error where a result is subnormal (measured 1.1e-43 for
/// [`gelu_tanh`], at most 1e-44 for the others).
pub const MATH_SUBNORMAL_ABS: f64 = 1.5e-43;

// --- coefficients (from scripts/fit_math.py; highest degree first) ---------------

const EXP_Q: [f32; 5] = [
    0.001_381_461_3,
    0.008_368_71,
    0.041_668_39,
    0.166_665_21,
    0.499_999_94,
];
const LOG_R: [f32; 4] = [0.235_814_72, 0.285_373_48, 0.400_003_34, 0.666_666_6];
/// `1/(1+t) ≈ 1 - t R(t)` on `[0, 1]` to 1% (only corrects an argument rounding).
const RECIP_1P: [f32; 3] = [0.343_145_25, -0.828_426_66, 0.992_640_6];
const TANH_P: [f32; 6] = [
    0.002_395_822_4,
    -0.008_413_957,
    0.021_782_827,
    -0.053_959_65,
    0.133_332_94,
    -0.333_333_3,
];
const ERF_Q: [f32; 8] = [
    -1.067_265_7e-5,
    0.000_115_545_75,
    -0.000_851_662_8,
    0.005_222_850_5,
    -0.026_865_952,
    0.112_837_9,
    -0.376_126_38,
    // The fitted constant term is 2/sqrt(pi) rounded to f32.
    core::f32::consts::FRAC_2_SQRT_PI,
];
/// `erfc(x) e^{x^2} = H(x - ERF_SMALL)` on `[ERF_SMALL, 4]` (erf only; GELU's wider
/// range uses `ERFC_G`).
const ERF_H: [f32; 9] = [
    0.000_145_499_91,
    -0.001_452_804,
    0.006_749_852_6,
    -0.020_502_11,
    0.048_722_487,
    -0.100_634_93,
    0.187_922_7,
    -0.315_832_35,
    0.464_311_57,
];
const ERFC_G: [f32; 11] = [
    -0.041_630_015,
    0.104_424_21,
    0.013_704_732,
    -0.242_975_95,
    0.150_169_63,
    0.010_712_388,
    0.198_297_59,
    0.242_526_92,
    0.282_627_14,
    0.282_057,
    1.172_287_7e-6,
];

const LOG2E: f32 = core::f32::consts::LOG2_E;
/// ln 2 split: the high part has 9 significant bits, so `n * LN2_HI` is exact for
/// `|n| <= 2^15`.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// Below this, `e^x * 2^k` is under half the smallest subnormal for `k <= 24`.
const EXP_LO: f32 = -125.0;
const EXP_HI: f32 = 88.8;
const TANH_SMALL: f32 = 0.55;
const ERF_SMALL: f32 = 0.875;
const FRAC_1_SQRT_2: f32 = core::f32::consts::FRAC_1_SQRT_2;

#[inline(always)]
fn horner<V: Simd>(x: V, c: &[f32]) -> V {
    let mut acc = V::splat(c[0]);
    for &k in &c[1..] {
        acc = acc.mul_add(x, V::splat(k));
    }
    acc
}

/// `e^x`.
#[inline(always)]
pub(crate) fn exp_v<V: Simd>(x: V) -> V {
    exp_scaled_v(x, 0.0)
}

/// `e^x * 2^k` for integral `k` in `[0, 50]`, rounded once: lets callers form
/// tiny results whose intermediate `e^x` would be subnormal.
#[inline(always)]
pub(crate) fn exp_scaled_v<V: Simd>(x: V, k: f32) -> V {
    let x = clamp(x, EXP_LO, EXP_HI);
    let n = x.mul(V::splat(LOG2E)).round();
    let r = n.mul_add(V::splat(-LN2_HI), x);
    let r = n.mul_add(V::splat(-LN2_LO), r);
    let q = horner(r, &EXP_Q);
    let p = r.mul(r).mul_add(q, r).add(V::splat(1.0));
    let n1 = n.mul(V::splat(0.5)).round();
    let n2 = n.sub(n1).add(V::splat(k));
    p.mul(n1.pow2()).mul(n2.pow2())
}

/// `ln x + e0 ln 2` for positive normal finite `x` and integral `e0` (no special
/// values: the caller handles them, or cannot meet them).
#[inline(always)]
fn log_normal_v<V: Simd>(x: V, e0: V) -> V {
    let (e, m) = x.exponent_mantissa();
    let e = e.add(e0);
    let one = V::splat(1.0);
    let s = m.sub(one).div(m.add(one));
    let u = s.mul(s);
    let lm = s.mul(u).mul_add(horner(u, &LOG_R), s.add(s));
    e.mul_add(V::splat(LN2_HI), e.mul_add(V::splat(LN2_LO), lm))
}

/// `ln x`.
#[inline(always)]
pub(crate) fn log_v<V: Simd>(x: V) -> V {
    let tiny = x.lt(V::splat(f32::MIN_POSITIVE));
    let xs = V::select(tiny, x.mul(V::splat(8_388_608.0)), x);
    let y = log_normal_v(xs, V::select(tiny, V::splat(-23.0), V::splat(0.0)));
    let zero = V::splat(0.0);
    let y = V::select(x.lt(zero), V::splat(f32::NAN), y);
    let y = V::select(x.eq(zero), V::splat(f32::NEG_INFINITY), y);
    let y = V::select(x.eq(V::splat(f32::INFINITY)), x, y);
    V::select(x.is_nan(), x, y)
}

/// `tanh x`.
#[inline(always)]
pub(crate) fn tanh_v<V: Simd>(x: V) -> V {
    let a = x.abs();
    let u = x.mul(x);
    let small = x.mul(u).mul_add(horner(u, &TANH_P), x);
    let e = exp_v(a.add(a));
    let one = V::splat(1.0);
    let large = one.sub(V::splat(2.0).div(e.add(one))).copysign(x);
    V::select(a.lt(V::splat(TANH_SMALL)), small, large)
}

/// `2^24`, and its inverse: the scale of `exp_scaled_v` in sigmoid and SiLU.
const TWO_24: f32 = 16_777_216.0;
const TWO_M24: f32 = 1.0 / TWO_24;

/// Returns `(x, 2^24 e^-|x|, 1 / (1 + e^-|x|))`.
#[inline(always)]
fn sigmoid_parts<V: Simd>(x: V) -> (V, V) {
    let e24 = exp_scaled_v(x.abs().mul(V::splat(-1.0)), 24.0);
    let e = e24.mul(V::splat(TWO_M24));
    let r = V::splat(1.0).div(V::splat(1.0).add(e));
    (e24, r)
}

/// `1 / (1 + e^-x)`.
#[inline(always)]
pub(crate) fn sigmoid_v<V: Simd>(x: V) -> V {
    // For x < 0: e^x / (1 + e^x), with e^x carried scaled by 2^24 so that a
    // subnormal result is rounded once.
    let (e24, r) = sigmoid_parts(x);
    let neg = e24.mul(r).mul(V::splat(TWO_M24));
    V::select(x.lt(V::splat(0.0)), neg, r)
}

/// `x sigmoid(x)`.
#[inline(always)]
pub(crate) fn silu_v<V: Simd>(x: V) -> V {
    let (e24, r) = sigmoid_parts(x);
    let neg = x.mul(e24).mul(r).mul(V::splat(TWO_M24));
    V::select(x.lt(V::splat(0.0)), neg, x.mul(r))
}

/// `ln(1 + e^x)`.
#[inline(always)]
pub(crate) fn softplus_v<V: Simd>(x: V) -> V {
    let zero = V::splat(0.0);
    let t = exp_v(x.abs().mul(V::splat(-1.0)));
    let u = V::splat(1.0).add(t);
    // log1p(t) = log(u) + (t - (u - 1)) / u: `t - (u - 1)` is the exact rounding
    // error of `u` (t <= 1), so 1/u is needed only roughly (`RECIP_1P`).
    let err = t.sub(u.sub(V::splat(1.0)));
    let inv = V::splat(1.0).sub(t.mul(horner(t, &RECIP_1P)));
    // u is in [1, 2] (or NaN, which `err` carries into l): no special values.
    let l = err.mul_add(inv, log_normal_v(u, zero));
    V::select(zero.lt(x), x, zero).add(l)
}

/// `erfc(a) = e^{-a^2} G(t)` for `a >= ERF_SMALL`, given `a^2 = sq + sq_lo`:
/// returns `(G(t) (1 - sq_lo), e^{-sq} 2^k)` for the caller to multiply in the
/// order that keeps tiny results accurate.
#[inline(always)]
fn erfc_parts<V: Simd>(a: V, sq: V, sq_lo: V, k: f32) -> (V, V) {
    let t = V::splat(1.0).div(a.mul_add(V::splat(0.5), V::splat(1.0)));
    let g = horner(t, &ERFC_G);
    // e^{-(sq + lo)} = e^{-sq} (1 - lo) to first order (|lo| < 2^-20 sq).
    (
        g.mul(V::splat(1.0).sub(sq_lo)),
        exp_scaled_v(sq.mul(V::splat(-1.0)), k),
    )
}

/// `erf x`.
#[inline(always)]
pub(crate) fn erf_v<V: Simd>(x: V) -> V {
    let u = x.mul(x);
    let small = x.mul(horner(u, &ERF_Q));
    let a = clamp(x.abs(), 0.0, 4.0);
    let h = horner(a.sub(V::splat(ERF_SMALL)), &ERF_H);
    let e = exp_v(a.mul(a).mul(V::splat(-1.0)));
    let large = V::splat(1.0).sub(h.mul(e)).copysign(x);
    V::select(x.abs().lt(V::splat(ERF_SMALL)), small, large)
}

/// `x/2 (1 + erf(x / sqrt 2))`.
#[inline(always)]
pub(crate) fn gelu_v<V: Simd>(x: V) -> V {
    let xc = clamp(x, -14.5, 14.5);
    let z = xc.mul(V::splat(FRAC_1_SQRT_2));
    let a = z.abs();
    let half = V::splat(0.5);
    let hx = x.mul(half);
    // Small |z|: 1 + erf(z) directly.
    let small = hx.mul(V::splat(1.0).add(z.mul(horner(z.mul(z), &ERF_Q))));
    // Large |z|: erfc(|z|) with z^2 = x^2 / 2 carried exactly; on the negative
    // side the product is formed scaled by 2^24 and rounded once at the end.
    let p = xc.mul(xc);
    let lo = xc.mul_err(xc, p);
    let (g, e24) = erfc_parts(a, p.mul(half), lo.mul(half), 24.0);
    let neg = hx.mul(g).mul(e24).mul(V::splat(TWO_M24));
    // Below the clamp the result rounds to -0 (and -inf gives NaN, `-inf * 0`).
    let neg = V::select(x.lt(V::splat(-14.5)), x.mul(V::splat(0.0)), neg);
    let pos = hx.mul(V::splat(2.0).sub(g.mul(e24).mul(V::splat(TWO_M24))));
    let large = V::select(x.lt(V::splat(0.0)), neg, pos);
    V::select(a.lt(V::splat(ERF_SMALL)), small, large)
}

/// `x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, i.e. `x sigmoid(2u)`.
#[inline(always)]
pub(crate) fn gelu_tanh_v<V: Simd>(x: V) -> V {
    // 2 sqrt(2/pi) and 2 sqrt(2/pi) 0.044715.
    const K0: f32 = 1.595_769_2;
    const K1: f32 = 0.071_354_814;
    let v = x.mul(x).mul_add(V::splat(K1), V::splat(K0)).mul(x);
    let (e24, r) = sigmoid_parts(v);
    let neg = x.mul(e24).mul(r).mul(V::splat(TWO_M24));
    V::select(v.lt(V::splat(0.0)), neg, x.mul(r))
}

macro_rules! math_fn {
    ($(#[$doc:meta])* $name:ident, $inplace:ident, $op:ident) => {
        $(#[$doc])*
        ///
        /// `y[i] = f(x[i])`; `x` and `y` must have the same length
        /// ([`rml_core::Error::LengthMismatch`] otherwise).
        pub fn $name(x: &[f32], y: &mut [f32]) -> Result<()> {
            unary(UnaryOp::$op, x, y)
        }

        $(#[$doc])*
        ///
        /// In place: `x[i] = f(x[i])`.
        pub fn $inplace(x: &mut [f32]) {
            unary_inplace(UnaryOp::$op, x)
        }
    };
}

math_fn!(
    /// `e^x` (error: [`EXP_MAX_ULP`]).
    exp, exp_inplace, Exp
);
math_fn!(
    /// Natural logarithm (error: [`LOG_MAX_ULP`]).
    log, log_inplace, Log
);
math_fn!(
    /// Hyperbolic tangent (error: [`TANH_MAX_ULP`]).
    tanh, tanh_inplace, Tanh
);
math_fn!(
    /// Logistic sigmoid `1 / (1 + e^-x)` (error: [`SIGMOID_MAX_ULP`]).
    sigmoid, sigmoid_inplace, Sigmoid
);
math_fn!(
    /// Error function (error: [`ERF_MAX_ULP`]).
    erf, erf_inplace, Erf
);
math_fn!(
    /// GELU, exact (erf) form `x/2 (1 + erf(x/√2))` (error: [`GELU_MAX_ULP`]).
    gelu, gelu_inplace, Gelu
);
math_fn!(
    /// GELU, tanh approximation (error: [`GELU_TANH_MAX_ULP`]).
    gelu_tanh, gelu_tanh_inplace, GeluTanh
);
math_fn!(
    /// SiLU (swish) `x sigmoid(x)` (error: [`SILU_MAX_ULP`]).
    silu, silu_inplace, Silu
);
math_fn!(
    /// Softplus `ln(1 + e^x)` (error: [`SOFTPLUS_MAX_ULP`]).
    softplus, softplus_inplace, Softplus
);
