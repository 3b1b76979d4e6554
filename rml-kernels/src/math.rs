//! Vectorized transcendental functions on f32: exp, log, tanh, sigmoid, erf, GELU
//! (erf and tanh forms), SiLU and softplus.
//!
//! Every function is one branch-free algorithm written over [`crate::simd::Simd`],
//! so the AVX2, NEON and scalar paths compute the same formulas (the scalar path
//! rounds `a * b + c` twice where the others fuse it), except erf, which has a
//! table-driven form for the ISAs whose table lookup is one instruction (AVX2). The slice functions here
//! check lengths and dispatch through [`crate::elementwise::unary`].
//!
//! # Algorithms
//! - `exp`: `x = n ln2 + r`, `|r| <= ln2/2` (Cody–Waite two-constant reduction),
//!   `e^r = 1 + r + r^2 q(r)` with a degree-4 near-minimax `q`, then scaling by
//!   `2^n` as two factors `2^n1 * 2^n2` so results near overflow and in the
//!   subnormal range are rounded once. Where the result is known to be normal
//!   (erf, tanh, GELU's and softplus' common cases) one factor `2^n` and no clamp.
//! - Common cases: `log`, softplus and GELU test each vector once (`all_in`, a
//!   compare and a mask test) and, when every lane lies in the range where no
//!   special value, subnormal or clamp can occur, run a shorter formula that gives
//!   the same values as the full one there (tested lane for lane); otherwise the
//!   full, branch-free formula. The one-lane scalar path always runs the full one.
//! - `log`: `x = 2^e m`, `m` in `[sqrt(1/2), sqrt(2))` straight from the bits
//!   (subtract the bits of `sqrt(1/2)`, shift and mask: no compare or select),
//!   `s = (m-1)/(m+1)`, `log m = 2s + s^3 R(s^2)` (degree-3 `R`), plus `e ln2` in
//!   two parts; subnormals are prescaled by `2^23` and special values patched in
//!   by selects, both skipped in the common case (positive normal finite lanes). (A division-free `f - f^2/2 + f^3 P(f)`,
//!   `f = m - 1`, degree-7 `P`, was more accurate, 0.89 ULP, and no faster on
//!   AVX2: 1.50 µs against 1.28 µs per 2048 values in one quiet A/B pair.)
//! - `tanh`: `E / (E + 2)` with `E = e^{2|x|} - 1 = 2^n (e^r - 1) + (2^n - 1)`
//!   (`e^r - 1 = r + r^2 q(r)`, exp's polynomial without its `1 +`, so `E` keeps
//!   full relative precision near 0 and one formula serves every `x`), `|x|`
//!   clamped to 10 (tanh rounds to 1 from 9.01), the sign restored.
//! - `sigmoid`: `1 / (1 + e^{-|x|})`, or `e^{-|x|} / (1 + e^{-|x|})` for `x < 0`,
//!   with `e^{-|x|}` carried scaled by `2^24` so negative inputs keep full
//!   relative precision down to the subnormal range (also in SiLU, GELU-tanh).
//! - `erf`: `x Q(x^2)` (degree-7 `Q`) for `|x| < 0.875`, else
//!   `1 - e^{-x^2} H(|x| - 0.875)` (degree-8 `H`, `|x|` clamped to 4, where erf
//!   rounds to 1), sign restored: no division. On AVX2 instead `c_i + t P_i(t)`
//!   on eight intervals of `|x|` (`i = round(2|x|)`, `t = |x| - i/2`, degree-5
//!   `P_i`), the coefficients read from `vpermps` tables (`erf_table_v`).
//! - GELU (erf form) `x/2 (1 + erf(x/sqrt2))`: `x/2 erfc(|z|)` for `x < 0`, else
//!   `x - x/2 erfc(|z|)`, `z = x/sqrt2` (neither cancels, so one formula serves
//!   every `x`, with no small-argument branch), `erfc(a) = e^{-a^2} G(1 / (1 +
//!   a/2))` (degree-10 `G` fitted on `[0, 10]`, relative error 1.3e-8), and `x^2/2`
//!   carried as an exact two-float product so the negative tail is accurate
//!   relative to its tiny value. The common case `|x| < 12` drops the clamp and
//!   the `2^24` scaling that keeps subnormal results of the far negative tail
//!   accurate. On AVX2, lanes with `|x| < 3.75` instead take `relu(x) - a
//!   Phi(-a)`, `a = |x|`, with the normal tail `Phi(-a)` from eight `vpermps`
//!   tables (degree-6 `P_i` per interval, `gelu_table_v`): no division, no
//!   exponential, 1.9x faster.
//! - GELU (tanh form) `x/2 (1 + tanh(u))`, `u = sqrt(2/pi) (x + 0.044715 x^3)`:
//!   computed as the identical `x sigmoid(2u)`, free of cancellation.
//! - SiLU `x sigmoid(x)`; softplus `max(x, 0) + log1p(e^{-|x|})` with
//!   `log1p(t) = 2 atanh(s) = 2s + s^3 R(s^2)`, `s = t/(2+t)` in `[0, 1/3]`
//!   (degree-4 `R`): no rounded `1 + t` to correct and no exponent split (a NaN
//!   input reaches the result through `t`); the common case `|x| < 87` takes
//!   `e^{-|x|}` with one scaling.
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
/// Max error of [`tanh`] in ULP (measured 1.67).
pub const TANH_MAX_ULP: f64 = 2.0;
/// Max error of [`sigmoid`] in ULP (normal results; measured 2.52).
pub const SIGMOID_MAX_ULP: f64 = 3.0;
/// Max error of [`erf`] in ULP (measured 2.44 on the portable paths, in the
/// `|x| < 0.875` branch; 2.21 with the AVX2 table form).
pub const ERF_MAX_ULP: f64 = 3.0;
/// Max error of [`gelu`] (erf form) in ULP (normal results; measured 6.30).
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
/// Max error of [`softplus`] in ULP (normal results; measured 2.53).
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
/// `log1p(t) = 2s + s^3 R(s^2)`, `s = t/(2+t)` in `[0, 1/3]` (softplus).
const LOG1P_R: [f32; 5] = [
    0.242_895_54,
    0.214_307_41,
    0.286_165_95,
    0.399_988_9,
    0.666_666_75,
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
/// `erf a = c_i + t P_i(t)` on eight intervals (see `erf_table_v`): rows 0-5 are
/// the coefficients of `P_i`, highest degree first, row 6 the `c_i` (erf(i/2)
/// in f32); column `i` is interval `i`. Max relative error 5.3e-8 in float64
/// with these f32 coefficients.
const ERF_T: [[f32; 8]; 7] = [
    [
        -0.019_444_201,
        -0.049_170_81,
        0.003_955_439_7,
        0.017_908_396,
        -0.001_422_678,
        0.000_829_642_7,
        0.002_131_080_5,
        -2.782_538_1e-5,
    ],
    [
        0.118_207_06,
        0.007_835_806,
        -0.067_656_845,
        -0.015_223_33,
        0.012_849_548,
        0.006_150_576_3,
        0.001_041_282_2,
        8.970_303e-6,
    ],
    [
        -0.000_688_137,
        0.183_070_12,
        0.069_203_146,
        -0.044_463_567,
        -0.034_238_22,
        -0.008_964_669,
        -0.001_317_369_9,
        -3.407_416_8e-5,
    ],
    [
        -0.376_086_38,
        -0.146_476_27,
        0.138_327_91,
        0.138_757_21,
        0.048_226_12,
        0.008_349_706,
        0.000_788_807_35,
        4.534_143_6e-5,
    ],
    [
        -8.518_419e-7,
        -0.439_391_82,
        -0.415_107_07,
        -0.178_399_19,
        -0.041_339_51,
        -0.005_437_606,
        -0.000_411_278_5,
        -2.164_486_8e-5,
    ],
    [
        core::f32::consts::FRAC_2_SQRT_PI,
        0.878_782_63,
        0.415_107_7,
        0.118_930_29,
        0.020_666_987,
        0.002_178_284,
        0.000_139_253_05,
        5.399_427e-6,
    ],
    [
        0.0,
        0.520_499_9,
        0.842_700_8,
        0.966_105_16,
        0.995_322_3,
        0.999_593,
        0.999_977_9,
        0.999_999_3,
    ],
];
/// `erfc(a) e^{a^2} = G(1 / (1 + a/2))` on `[0, 10]`, relative error 1.3e-8.
const ERFC_G: [f32; 11] = [
    0.027_748_168,
    -0.209_857_23,
    0.640_463_9,
    -0.966_040_9,
    0.683_393_8,
    -0.251_372_84,
    0.285_076,
    0.223_446_34,
    0.285_290_06,
    0.281_844_17,
    8.570_462e-6,
];

const LOG2E: f32 = core::f32::consts::LOG2_E;
/// ln 2 split: the high part has 9 significant bits, so `n * LN2_HI` is exact for
/// `|n| <= 2^15`.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// Below this, `e^x * 2^k` is under half the smallest subnormal for `k <= 24`.
const EXP_LO: f32 = -125.0;
const EXP_HI: f32 = 88.8;
/// `tanh` is 1 in f32 beyond this (`2 e^{-20} < 2^-25`).
const TANH_ONE: f32 = 10.0;
/// `tanh` corrects the roundings of `e^{2|x|} - 1 + 2` and of its division
/// below this `e^{2|x|} - 1` (|x| < 6.9); above, they cost at most a ULP.
const TANH_FIX_MAX: f32 = 1_048_576.0;
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
    // Common case: every result a normal f32, so one scaling by 2^n and no clamp
    // (the same bits: both scalings of the full path are exact there).
    if common_case(x, EXP_NORMAL_LO, -EXP_NORMAL_LO) {
        return exp_normal_v(x);
    }
    exp_scaled_v(x, 0.0)
}

/// `(n, e^r - 1)` with `x = n ln2 + r`, `|r| <= ln2/2` (for `|x| < 126`):
/// `e^r - 1 = r + r^2 q(r)`.
#[inline(always)]
fn expm1_reduce<V: Simd>(x: V) -> (V, V) {
    let n = x.mul(V::splat(LOG2E)).round();
    let r = n.mul_add(V::splat(-LN2_HI), x);
    let r = n.mul_add(V::splat(-LN2_LO), r);
    (n, r.mul(r).mul_add(horner(r, &EXP_Q), r))
}

/// `(n, e^r)` with `x = n ln2 + r`, `|r| <= ln2/2` (for `|x| < 126`).
#[inline(always)]
fn exp_reduce<V: Simd>(x: V) -> (V, V) {
    let (n, m) = expm1_reduce(x);
    (n, m.add(V::splat(1.0)))
}

/// `e^x` for `x` in `[EXP_NORMAL_LO, 88]`, where it is a normal f32: no
/// clamp and a single scaling by `2^n`, the same value as [`exp_v`] there (both
/// scalings are exact on normal results). NaN gives NaN.
#[inline(always)]
fn exp_normal_v<V: Simd>(x: V) -> V {
    let (n, p) = exp_reduce(x);
    p.mul_pow2(n)
}

/// `e^x - 1` for `x` in `[0, 88]`, with full relative precision near 0: `2^n
/// (e^r - 1) + (2^n - 1)`, where `e^r - 1 = r + r^2 q(r)` has no rounded `1 +`
/// and `2^n - 1` is exact. NaN gives NaN.
#[inline(always)]
fn expm1_normal_v<V: Simd>(x: V) -> V {
    let (n, m) = expm1_reduce(x);
    let p = n.pow2();
    p.mul_add(m, p.sub(V::splat(1.0)))
}

/// The lower end of [`exp_normal_v`]'s range (`n = round(x log2 e) >= -126`).
const EXP_NORMAL_LO: f32 = -87.0;

/// Whether a kernel may take its common-case path for the vector `x`: every lane
/// in `[lo, hi)`, where the common-case formula gives the same values as the full
/// one. The one-lane scalar type always runs the full path, which is branch-free,
/// so LLVM keeps auto-vectorizing its loop (a branch per element would stop that).
#[inline(always)]
fn common_case<V: Simd>(x: V, lo: f32, hi: f32) -> bool {
    V::LANES > 1 && x.all_in(lo, hi)
}

/// `e^x * 2^k` for integral `k` in `[0, 50]`, rounded once: lets callers form
/// tiny results whose intermediate `e^x` would be subnormal.
#[inline(always)]
pub(crate) fn exp_scaled_v<V: Simd>(x: V, k: f32) -> V {
    let x = clamp(x, EXP_LO, EXP_HI);
    let (n, p) = exp_reduce(x);
    let n1 = n.mul(V::splat(0.5)).round();
    let n2 = n.sub(n1).add(V::splat(k));
    p.mul_pow2(n1).mul_pow2(n2)
}

/// `(e, ln m)` with `x = 2^e m`, for positive normal finite `x` (no special
/// values: the caller handles them, or cannot meet them).
#[inline(always)]
fn log_parts<V: Simd>(x: V) -> (V, V) {
    let (e, m) = x.exponent_mantissa();
    let one = V::splat(1.0);
    let s = m.sub(one).div(m.add(one));
    let u = s.mul(s);
    (e, s.mul(u).mul_add(horner(u, &LOG_R), s.add(s)))
}

/// `e ln 2 + lm`, with `ln 2` in two parts.
#[inline(always)]
fn log_join<V: Simd>(e: V, lm: V) -> V {
    e.mul_add(V::splat(LN2_HI), e.mul_add(V::splat(LN2_LO), lm))
}

/// `ln x`.
#[inline(always)]
pub(crate) fn log_v<V: Simd>(x: V) -> V {
    // Common case: every lane positive, normal and finite, so no lane needs the
    // subnormal prescale or a special value (below, `e + 0` is `e`).
    if common_case(x, f32::MIN_POSITIVE, f32::INFINITY) {
        let (e, lm) = log_parts(x);
        return log_join(e, lm);
    }
    let tiny = x.lt(V::splat(f32::MIN_POSITIVE));
    let xs = V::select(tiny, x.mul(V::splat(8_388_608.0)), x);
    let (e, lm) = log_parts(xs);
    let e = e.add(V::select(tiny, V::splat(-23.0), V::splat(0.0)));
    let y = log_join(e, lm);
    let zero = V::splat(0.0);
    let y = V::select(x.lt(zero), V::splat(f32::NAN), y);
    let y = V::select(x.eq(zero), V::splat(f32::NEG_INFINITY), y);
    let y = V::select(x.eq(V::splat(f32::INFINITY)), x, y);
    V::select(x.is_nan(), x, y)
}

/// `tanh x`.
#[inline(always)]
pub(crate) fn tanh_v<V: Simd>(x: V) -> V {
    // tanh rounds to ±1 from |x| = 9.01; the clamp keeps e^{2|x|} normal.
    let a = x.abs().min_bound(TANH_ONE);
    let e = expm1_normal_v(a.add(a));
    // q = e / d, d = e + 2 rounded; then one correction for the rounding of d
    // (`derr`, exact: |e| < 2 or the term is negligible) and of the division
    // (`q d - e`, exact by FMA), scaled by 1/d ~ (1 - q)/2.
    let two = V::splat(2.0);
    let d = e.add(two);
    let derr = two.sub(d).add(e);
    let q = e.div(d);
    let k = q.mul_add(derr, q.mul_err(d, e));
    let k = V::select(e.lt(V::splat(TANH_FIX_MAX)), k, V::splat(0.0));
    let half = V::splat(0.5);
    k.mul_add(q.mul_add(half, V::splat(-0.5)), q).copysign(x)
}

/// `2^24`, and its inverse: the scale of `exp_scaled_v` in sigmoid and SiLU.
const TWO_24: f32 = 16_777_216.0;
const TWO_M24: f32 = 1.0 / TWO_24;

/// Where every lane has `|x|` below this, the `e^{-|x|}` (≥ 1.8e-35) of sigmoid, SiLU
/// and GELU-tanh and the products formed from it are normal f32s: their common-case
/// path.
const SIGMOID_COMMON: f32 = 80.0;

/// Returns `(2^24 e^-|x|, 1 / (1 + e^-|x|))`.
#[inline(always)]
fn sigmoid_parts<V: Simd>(x: V) -> (V, V) {
    let e24 = exp_scaled_v(x.abs().mul(V::splat(-1.0)), 24.0);
    let e = e24.mul(V::splat(TWO_M24));
    let r = V::splat(1.0).div(V::splat(1.0).add(e));
    (e24, r)
}

/// Returns `(e^-|x|, 1 / (1 + e^-|x|))` for lanes with `|x| < SIGMOID_COMMON`:
/// one scaling by `2^n` where [`sigmoid_parts`] clamps and scales twice, and `e` is
/// its `e24 · 2^-24` exactly (every scaling is exact on normal values). So a product
/// `e·r` rounds like its `(e24·r)·2^-24`, and `(x·e)·r` like `((x·e24)·r)·2^-24`
/// (where `x·e` is subnormal, `e = 1` and `r = 1/2`, and both paths round `x/2`
/// once).
#[inline(always)]
fn sigmoid_parts_common<V: Simd>(x: V) -> (V, V) {
    let e = exp_normal_v(x.abs().mul(V::splat(-1.0)));
    let r = V::splat(1.0).div(V::splat(1.0).add(e));
    (e, r)
}

/// `1 / (1 + e^-x)`.
#[inline(always)]
pub(crate) fn sigmoid_v<V: Simd>(x: V) -> V {
    let negative = x.lt(V::splat(0.0));
    if common_case(x, -SIGMOID_COMMON, SIGMOID_COMMON) {
        let (e, r) = sigmoid_parts_common(x);
        return V::select(negative, e.mul(r), r);
    }
    // For x < 0: e^x / (1 + e^x), with e^x carried scaled by 2^24 so that a
    // subnormal result is rounded once.
    let (e24, r) = sigmoid_parts(x);
    let neg = e24.mul(r).mul(V::splat(TWO_M24));
    V::select(negative, neg, r)
}

/// `x sigmoid(x)`.
#[inline(always)]
pub(crate) fn silu_v<V: Simd>(x: V) -> V {
    times_sigmoid(x, x)
}

/// `x sigmoid(v)`, for SiLU (`v = x`) and GELU-tanh; `x` and `v` have the same sign.
#[inline(always)]
fn times_sigmoid<V: Simd>(x: V, v: V) -> V {
    let negative = v.lt(V::splat(0.0));
    if common_case(v, -SIGMOID_COMMON, SIGMOID_COMMON) {
        let (e, r) = sigmoid_parts_common(v);
        return V::select(negative, x.mul(e).mul(r), x.mul(r));
    }
    let (e24, r) = sigmoid_parts(v);
    let neg = x.mul(e24).mul(r).mul(V::splat(TWO_M24));
    V::select(negative, neg, x.mul(r))
}

/// `ln(1 + e^x)`.
#[inline(always)]
pub(crate) fn softplus_v<V: Simd>(x: V) -> V {
    let zero = V::splat(0.0);
    let na = x.abs().mul(V::splat(-1.0));
    // Where e^{-|x|} is normal (and x not NaN), one scaling by 2^n suffices.
    let t = if common_case(x, EXP_NORMAL_LO, -EXP_NORMAL_LO) {
        exp_normal_v(na)
    } else {
        exp_v(na)
    };
    // log1p(t) = 2 atanh(s), s = t/(2+t) in [0, 1/3]: no rounding of 1 + t to
    // correct, no exponent split (a NaN input reaches l through t).
    let s = t.div(V::splat(2.0).add(t));
    let u = s.mul(s);
    let l = s.mul(u).mul_add(horner(u, &LOG1P_R), s.add(s));
    // max(x, 0), one `maxps` on x86 (a NaN x gives NaN through `l` either way).
    zero.max_skip_nan(x).add(l)
}

/// `erf x`.
#[inline(always)]
pub(crate) fn erf_v<V: Simd>(x: V) -> V {
    if V::FAST_LOOKUP {
        return erf_table_v(x);
    }
    let u = x.mul(x);
    let small = x.mul(horner(u, &ERF_Q));
    let a = clamp(x.abs(), 0.0, 4.0);
    let h = horner(a.sub(V::splat(ERF_SMALL)), &ERF_H);
    // -a^2 >= -16: e^{-a^2} is normal.
    let e = exp_normal_v(a.mul(a).mul(V::splat(-1.0)));
    let large = V::splat(1.0).sub(h.mul(e)).copysign(x);
    V::select(x.abs().lt(V::splat(ERF_SMALL)), small, large)
}

/// GELU's table range: `|x| < 3.75`, where [`gelu_table_v`] applies.
const GELU_TABLE_MAX: f32 = 3.75;

/// `-Phi(-a) = c_i + t P_i(t)` (minus the standard normal's lower tail,
/// `erfc(a/sqrt2)/2`) on eight intervals (see `gelu_table_v`): rows 0-5 are the
/// coefficients of the degree-6 `P_i`, highest degree first, row 6 the `c_i`
/// (`-Phi(-i/2)` in f32); column `i` is interval `i`. Max relative error 1.03e-7
/// in float64 with these f32 coefficients (`scripts/fit_math.py`).
const GELU_T: [[f32; 8]; 7] = [
    [
        -0.001_394_958_6,
        -0.002_673_986_1,
        -0.001_770_407,
        0.000_850_408,
        0.001_321_910_1,
        0.000_495_811_17,
        -0.000_112_293_32,
        -0.000_176_702_57,
    ],
    [
        0.010_595_649,
        0.004_568_007_3,
        -0.003_963_401,
        -0.005_818_682_7,
        -0.002_259_376_7,
        0.000_640_596_67,
        0.001_099_478_6,
        0.000_580_656_87,
    ],
    [
        -0.000_133_455_8,
        0.020_131_102,
        0.020_140_832,
        0.006_051_36,
        -0.004_497_476_4,
        -0.005_932_472,
        -0.003_323_543_1,
        -0.001_177_487_8,
    ],
    [
        -0.066_476_11,
        -0.044_008_13,
        -1.635_691_8e-6,
        0.026_981_696,
        0.026_995_64,
        0.015_337_931,
        0.005_909_361,
        0.001_636_227_7,
    ],
    [
        -6.970_736e-7,
        -0.088_015_296,
        -0.120_984_785,
        -0.097_137_71,
        -0.053_991,
        -0.021_910_401,
        -0.006_647_778_7,
        -0.001_527_189_6,
    ],
    [
        0.398_942_3,
        0.352_065_32,
        0.241_970_73,
        0.129_517_6,
        0.053_990_968,
        0.017_528_297,
        0.004_431_847,
        0.000_872_682_95,
    ],
    [
        -0.5,
        -0.308_537_54,
        -0.158_655_26,
        -0.066_807_2,
        -0.022_750_132,
        -0.006_209_665_4,
        -0.001_349_898,
        -0.000_232_629_09,
    ],
];

/// `1.5 * 2^23`: adding it to `s` in `[0, 2^22)` rounds `s` to an integer `i`
/// held in the low mantissa bits (what [`Simd::lookup8`] reads); subtracting it
/// again gives `i` as a float.
const ROUND_MAGIC: f32 = 12_582_912.0;

/// `erf x` as a piecewise polynomial: `erf a = c_i + t P_i(t)`, `a = |x|` clamped
/// to 4, `i = round(2a)` clamped to 7, `t = a - i/2` (exact), degree-5 `P_i`; the
/// coefficients of all eight intervals of a power sit in one `vpermps` table.
/// Interval 0 has `c_0 = 0` and `t = a`, so small arguments keep full relative
/// precision. Taken where [`Simd::lookup8`] is one instruction (AVX2).
#[inline(always)]
fn erf_table_v<V: Simd>(x: V) -> V {
    let a = x.abs().min_bound(4.0);
    // NaN stays NaN through the index and `t` (its lookup index is 0).
    half_step_table(a, a.add(a).min_bound(7.0), &ERF_T).copysign(x)
}

/// The piecewise polynomial of a table like [`ERF_T`] at `a`: `c_i + t P_i(t)`
/// with interval `i = round(two_a)` (the caller's `2a`, clamped as it needs),
/// `t = a - i/2` (exact), the rows holding `P_i`'s coefficients highest degree
/// first, then `c_i`, eight intervals per row (one [`Simd::lookup8`] each).
#[inline(always)]
fn half_step_table<V: Simd>(a: V, two_a: V, table: &[[f32; 8]]) -> V {
    let s = two_a.add(V::splat(ROUND_MAGIC));
    let t = s.sub(V::splat(ROUND_MAGIC)).mul_add(V::splat(-0.5), a);
    let mut p = s.lookup8(&table[0]);
    for row in &table[1..] {
        p = p.mul_add(t, s.lookup8(row));
    }
    p
}

/// GELU's common case: inputs in `[-GELU_FAST, GELU_FAST)`, where `e^{-x^2/2}`,
/// `erfc(|x|/sqrt2)` and the result are normal (or the input is).
const GELU_FAST: f32 = 12.0;
/// Below this input GELU rounds to -0, above its negation to `x`.
const GELU_ZERO: f32 = -14.5;

/// For GELU at `x` (`xc`: `x` clamped to `±14.5`): `(x/2, G(t) (1 - lo), -x^2/2)`
/// with `erfc(|x|/sqrt2) = e^{-x^2/2} G(t) (1 - lo)`; `x^2/2 = sq + lo` exactly.
#[inline(always)]
fn gelu_parts<V: Simd>(x: V, xc: V) -> (V, V, V) {
    let half = V::splat(0.5);
    let one = V::splat(1.0);
    // 1 / (1 + a/2) with a = |x|/sqrt2.
    let t = one.div(xc.abs().mul_add(V::splat(FRAC_1_SQRT_2 * 0.5), one));
    let p = xc.mul(xc);
    let lo = xc.mul_err(xc, p);
    // e^{-(sq + lo)} = e^{-sq} (1 - lo) to first order (|lo| < 2^-20 sq).
    let g = horner(t, &ERFC_G).mul(lo.mul_add(V::splat(-0.5), one));
    (x.mul(half), g, p.mul(V::splat(-0.5)))
}

/// `x/2 (1 + erf(x / sqrt 2))`: from [`GELU_T`] where [`Simd::lookup8`] is one
/// instruction (AVX2) and `|x| < GELU_TABLE_MAX`, else by [`gelu_formula_v`].
/// Which of the two a lane gets depends on that lane alone, so an element's bits
/// do not depend on its neighbours.
#[inline(always)]
pub(crate) fn gelu_v<V: Simd>(x: V) -> V {
    if !V::FAST_LOOKUP {
        return gelu_formula_v(x);
    }
    let a = x.abs();
    let table = gelu_table_v(x, a);
    if a.all_in(0.0, GELU_TABLE_MAX) {
        return table;
    }
    V::select(a.lt(V::splat(GELU_TABLE_MAX)), table, gelu_formula_v(x))
}

/// GELU as `relu(x) - a Phi(-a)`, `a = |x|`, with the normal tail `Phi(-a)` from
/// a piecewise polynomial: `-Phi(-a) = c_i + t P_i(t)` ([`GELU_T`], negated so
/// the last step is one FMA), `i = round(2a)`, `t = a - i/2` (exact). For `x < 0`
/// that is `x Phi(x)`, for `x >= 0` it is `x - x Phi(-x)`, rounded once; neither
/// side cancels (the negative tail keeps its relative precision, and `Phi(-a) <=
/// 1/2`). No division and no exponential, against [`gelu_formula_v`]'s one of
/// each. Lanes with `a >= GELU_TABLE_MAX` (their index leaves the table) and NaN
/// get garbage, which the caller replaces.
#[inline(always)]
fn gelu_table_v<V: Simd>(x: V, a: V) -> V {
    let p = half_step_table(a, a.add(a), &GELU_T);
    let zero = V::splat(0.0);
    a.mul_add(p, V::select(zero.lt(x), x, zero))
}

/// `x/2 (1 + erf(x / sqrt 2))` as `x/2 erfc(-x/sqrt2)` with `erfc(a) = e^{-a^2}
/// G(1/(1 + a/2))`: every input, on every path.
#[inline(always)]
fn gelu_formula_v<V: Simd>(x: V) -> V {
    let neg = x.lt(V::splat(0.0));
    if common_case(x, -GELU_FAST, GELU_FAST) {
        // The full path below with every scaling by 2^24 dropped: exact here,
        // so both give the same values.
        let (hx, g, nsq) = gelu_parts(x, x);
        let m = hx.mul(g.mul(exp_normal_v(nsq)));
        return V::select(neg, m, x.sub(m));
    }
    let xc = clamp(x, GELU_ZERO, -GELU_ZERO);
    let (hx, g, nsq) = gelu_parts(x, xc);
    // erfc scaled by 2^24, so a subnormal result on the negative side is
    // rounded once, at the end.
    let ge24 = g.mul(exp_scaled_v(nsq, 24.0));
    let lower = hx.mul(ge24).mul(V::splat(TWO_M24));
    // Below the clamp the result rounds to -0 (and -inf gives NaN, `-inf * 0`).
    let lower = V::select(x.lt(V::splat(GELU_ZERO)), x.mul(V::splat(0.0)), lower);
    // Above the clamp the result is x (and +inf stays +inf, not `inf - inf`).
    let upper = x.sub(hx.mul(ge24.mul(V::splat(TWO_M24))));
    let upper = V::select(V::splat(-GELU_ZERO).lt(x), x, upper);
    V::select(neg, lower, upper)
}

/// `x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`, i.e. `x sigmoid(2u)`.
#[inline(always)]
pub(crate) fn gelu_tanh_v<V: Simd>(x: V) -> V {
    // 2 sqrt(2/pi) and 2 sqrt(2/pi) 0.044715.
    const K0: f32 = 1.595_769_2;
    const K1: f32 = 0.071_354_814;
    let v = x.mul(x).mul_add(V::splat(K1), V::splat(K0)).mul(x);
    times_sigmoid(x, v)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elementwise::UnaryOp;
    use crate::simd::{MAX_LANES, dispatch};
    use crate::testing::{for_each_isa, test_len, ulp_error, unary_reference};

    /// `pow2` and `mul_pow2` (AVX-512: `vscalefps`) on every path against f64
    /// arithmetic: `2^n` exactly, and `p 2^n` rounded once, subnormal results too.
    #[test]
    fn pow2_scalings_are_exact_or_rounded_once() {
        let ps = [
            1.0f32,
            1.5,
            1.999_999_9,
            0.75,
            -1.25,
            1.234_567_9,
            0.500_000_06,
        ];
        // 2^n built from its bits (Miri perturbs `powi` within its error bound).
        let two_to = |n: i32| f64::from_bits(((n + 1023) as u64) << 52);
        for_each_isa(|isa| {
            for n in -126..=127 {
                let nf = n as f32;
                let mut out = [0.0f32; MAX_LANES];
                dispatch!(|V| V::splat(nf).pow2().store(&mut out));
                assert_eq!(out[0], two_to(n) as f32, "{}: pow2({n})", isa.name());
                for p in ps {
                    dispatch!(|V| V::splat(p).mul_pow2(V::splat(nf)).store(&mut out));
                    let want = (p as f64 * two_to(n)) as f32;
                    assert_eq!(
                        out[0].to_bits(),
                        want.to_bits(),
                        "{}: {p:e} * 2^{n} = {:e}, want {want:e}",
                        isa.name(),
                        out[0]
                    );
                }
            }
        });
    }

    /// The table-driven erf on every path's `lookup8`: AVX2 runs it in
    /// production, scalar and NEON only here. Against f64 libm, within the bound.
    #[test]
    fn erf_table_form_within_bound_on_every_path() {
        let n = test_len(200_000, 64);
        let mut xs: Vec<f32> = (0..n)
            .map(|i| -5.0 + 10.0 * (i as f32 / n as f32))
            .collect();
        xs.extend([
            0.0,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            f32::MIN_POSITIVE,
            -1e-40,
            0.25,
            3.75,
            3.92,
            4.0,
            1e30,
        ]);
        for_each_isa(|isa| {
            for &x in &xs {
                let mut out = [0.0f32; MAX_LANES];
                dispatch!(|V| erf_table_v(V::splat(x)).store(&mut out));
                let want = unary_reference(UnaryOp::Erf, x as f64);
                let e = ulp_error(out[0], want);
                assert!(
                    e <= ERF_MAX_ULP && out[0].is_sign_negative() == x.is_sign_negative()
                        || x.is_nan() && e == 0.0,
                    "{}: erf({x:e}) = {:e}, want {want:e} ({e} ulp)",
                    isa.name(),
                    out[0]
                );
            }
        });
    }

    /// The table-driven GELU on every path's `lookup8` (AVX2 runs it in
    /// production): dense over its range and at every interval's edges, against
    /// f64 libm, within the bound.
    #[test]
    fn gelu_table_form_within_bound_on_every_path() {
        let n = test_len(200_000, 64);
        let mut xs: Vec<f32> = (0..n)
            .map(|i| GELU_TABLE_MAX * (2.0 * i as f32 / n as f32 - 1.0))
            .collect();
        for edge in (0..8).map(|i| 0.25 + 0.5 * i as f32) {
            let bits = edge.to_bits();
            for x in (bits - 4..=bits + 4).map(f32::from_bits) {
                xs.extend([x, -x]);
            }
        }
        xs.extend([0.0, -0.0, f32::MIN_POSITIVE, -1e-40, 1e-30, -3.749_999_8]);
        for_each_isa(|isa| {
            for &x in xs.iter().filter(|x| x.abs() < GELU_TABLE_MAX) {
                let mut out = [0.0f32; MAX_LANES];
                let a = x.abs();
                dispatch!(|V| gelu_table_v(V::splat(x), V::splat(a)).store(&mut out));
                let want = unary_reference(UnaryOp::Gelu, x as f64);
                let e = ulp_error(out[0], want);
                assert!(
                    e <= GELU_MAX_ULP,
                    "{}: gelu({x:e}) = {:e}, want {want:e} ({e} ulp)",
                    isa.name(),
                    out[0]
                );
            }
        });
    }

    /// A vector mixing table lanes and formula lanes (|x| >= 3.75, NaN, inf)
    /// gives every lane the bits that input gets alone.
    #[test]
    fn gelu_lanes_do_not_depend_on_their_neighbours() {
        let xs = [
            1.0,
            3.75,
            -3.7,
            -3.75,
            0.3,
            12.5,
            -20.0,
            f32::NAN,
            -0.6,
            f32::NEG_INFINITY,
            2.0,
            -1e-3,
            3.749_999_8,
            -4.0,
            0.0,
            7.0,
        ];
        for_each_isa(|isa| {
            let mut together = [0.0f32; 16];
            gelu(&xs, &mut together).unwrap();
            for (&x, &y) in xs.iter().zip(&together) {
                let mut alone = [0.0f32; 1];
                gelu(&[x], &mut alone).unwrap();
                assert!(
                    y.to_bits() == alone[0].to_bits() || y.is_nan() && alone[0].is_nan(),
                    "{}: gelu({x:e}) = {y:e} among others, {:e} alone",
                    isa.name(),
                    alone[0]
                );
            }
        });
    }
}
