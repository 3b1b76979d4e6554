//! Samplers built on any [`Rng`]: uniform (floats and integers), normal, truncated
//! normal, Bernoulli and categorical, and a shuffle. Each has a one-value form and a `fill_*` form writing a caller slice.
//!
//! Arguments are checked before anything is drawn, so a rejected call leaves the
//! generator where it was. Internally everything is computed in `f64` (`libm` for
//! `log`, `sqrt`, `sin`, `cos`, `exp`); `f32` outputs are rounded from it once.
//!
//! Draw counts are part of the contract, so that results stay reproducible:
//! - uniform: one [`Rng::next_f32`] (for `f32`) or [`Rng::next_f64`] (for `f64`) per value;
//! - normal: two [`Rng::next_f64`] per *pair* of values;
//! - Bernoulli and categorical: one [`Rng::next_f64`] per value;
//! - integers below `n` and shuffles: a variable number (rejection sampling);
//! - truncated normal: a variable number (rejection sampling).

use super::Rng;
use crate::error::{Error, Result};

/// Checks a `[lo, hi)` interval: finite ends, `lo < hi`, and a finite width.
fn check_interval(lo: f64, hi: f64) -> Result<()> {
    if !(lo.is_finite() && hi.is_finite() && lo < hi && (hi - lo).is_finite()) {
        return Err(Error::InvalidArgument(
            "uniform bounds must be finite with lo < hi",
        ));
    }
    Ok(())
}

/// [`check_interval`] for `f32` bounds, whose width must also be a finite `f32`.
fn check_interval_f32(lo: f32, hi: f32) -> Result<()> {
    check_interval(f64::from(lo), f64::from(hi))?;
    if !(hi - lo).is_finite() {
        return Err(Error::InvalidArgument(
            "uniform bounds must be finite with lo < hi",
        ));
    }
    Ok(())
}

/// A uniform `f32` in `[lo, hi)`: `lo + (hi - lo) * u` with `u = rng.next_f32()`. When
/// rounding lands exactly on `hi`, the largest `f32` below `hi` is returned instead, so
/// the upper bound is never produced. `lo` and `hi` must be finite with `lo < hi`.
pub fn uniform_f32<R: Rng + ?Sized>(rng: &mut R, lo: f32, hi: f32) -> Result<f32> {
    check_interval_f32(lo, hi)?;
    Ok(scale_f32(rng.next_f32(), lo, hi))
}

/// `lo + (hi - lo) * u`, kept below `hi`.
fn scale_f32(u: f32, lo: f32, hi: f32) -> f32 {
    let x = lo + (hi - lo) * u;
    if x < hi { x } else { hi.next_down() }
}

/// A uniform `f64` in `[lo, hi)`: `lo + (hi - lo) * u` with `u = rng.next_f64()`, kept
/// below `hi` as in [`uniform_f32`].
pub fn uniform_f64<R: Rng + ?Sized>(rng: &mut R, lo: f64, hi: f64) -> Result<f64> {
    check_interval(lo, hi)?;
    Ok(scale_f64(rng.next_f64(), lo, hi))
}

/// `lo + (hi - lo) * u`, kept below `hi`.
fn scale_f64(u: f64, lo: f64, hi: f64) -> f64 {
    let x = lo + (hi - lo) * u;
    if x < hi { x } else { hi.next_down() }
}

/// Fills `out` with uniform values in `[lo, hi)` (see [`uniform_f32`]).
pub fn fill_uniform_f32<R: Rng + ?Sized>(
    rng: &mut R,
    out: &mut [f32],
    lo: f32,
    hi: f32,
) -> Result<()> {
    check_interval_f32(lo, hi)?;
    for x in out {
        *x = scale_f32(rng.next_f32(), lo, hi);
    }
    Ok(())
}

/// Fills `out` with uniform values in `[lo, hi)` (see [`uniform_f64`]).
pub fn fill_uniform_f64<R: Rng + ?Sized>(
    rng: &mut R,
    out: &mut [f64],
    lo: f64,
    hi: f64,
) -> Result<()> {
    check_interval(lo, hi)?;
    for x in out {
        *x = scale_f64(rng.next_f64(), lo, hi);
    }
    Ok(())
}

/// Two independent standard normal values by the Box–Muller transform.
///
/// With `u1 = 1 - rng.next_f64()` in `(0, 1]` (so the logarithm is finite) and
/// `u2 = rng.next_f64()` in `[0, 1)`, the radius is `r = sqrt(-2 ln u1)` and the angle
/// `t = 2 pi u2`; the pair is `(r cos t, r sin t)`. Because `u1 >= 2^-53`, `|z|` never
/// exceeds `sqrt(106 ln 2) ~ 8.57`.
pub fn standard_normal_pair<R: Rng + ?Sized>(rng: &mut R) -> (f64, f64) {
    let u1 = 1.0 - rng.next_f64();
    let u2 = rng.next_f64();
    let r = libm::sqrt(-2.0 * libm::log(u1));
    let (sin, cos) = libm::sincos(core::f64::consts::TAU * u2);
    (r * cos, r * sin)
}

/// One standard normal value: the first of a [`standard_normal_pair`] (the second is
/// discarded; use the `fill_*` functions to use both).
pub fn standard_normal<R: Rng + ?Sized>(rng: &mut R) -> f64 {
    standard_normal_pair(rng).0
}

/// Checks a location and scale: both finite, scale non-negative.
fn check_mean_std(mean: f64, std: f64) -> Result<()> {
    if !(mean.is_finite() && std.is_finite() && std >= 0.0) {
        return Err(Error::InvalidArgument(
            "mean must be finite and std finite and non-negative",
        ));
    }
    Ok(())
}

/// Fills `out` with normal values `mean + std * z` (computed in `f64`, rounded once).
/// Values come from consecutive Box–Muller pairs: `out[2i]` is the cosine and
/// `out[2i + 1]` the sine value of pair `i`; for an odd length the last sine value is
/// dropped.
pub fn fill_normal_f32<R: Rng + ?Sized>(
    rng: &mut R,
    out: &mut [f32],
    mean: f32,
    std: f32,
) -> Result<()> {
    let (mean, std) = (f64::from(mean), f64::from(std));
    check_mean_std(mean, std)?;
    for pair in out.chunks_mut(2) {
        let (z0, z1) = standard_normal_pair(rng);
        for (x, z) in pair.iter_mut().zip([z0, z1]) {
            *x = (mean + std * z) as f32;
        }
    }
    Ok(())
}

/// Fills `out` with normal values `mean + std * z`, pairing values as
/// [`fill_normal_f32`] does.
pub fn fill_normal_f64<R: Rng + ?Sized>(
    rng: &mut R,
    out: &mut [f64],
    mean: f64,
    std: f64,
) -> Result<()> {
    check_mean_std(mean, std)?;
    for pair in out.chunks_mut(2) {
        let (z0, z1) = standard_normal_pair(rng);
        for (x, z) in pair.iter_mut().zip([z0, z1]) {
            *x = mean + std * z;
        }
    }
    Ok(())
}

/// Beyond this many standard deviations the normal tail above `a` is narrower (about
/// `1/a`) than half an ulp of `a`, so a sample from `[a, b]` rounds to `a`.
const DEEP_TAIL: f64 = 1e12;

/// Checks truncation bounds: not NaN and `lo < hi` (infinite bounds are allowed).
fn check_bounds(lo: f64, hi: f64) -> Result<()> {
    if lo.is_nan() || hi.is_nan() || lo >= hi {
        return Err(Error::InvalidArgument(
            "truncated normal bounds must satisfy lo < hi",
        ));
    }
    Ok(())
}

/// A standard normal value conditioned on `lo <= z <= hi` (bounds in standard
/// deviations; either may be infinite; `lo < hi` required).
///
/// Sampling is exact rejection sampling (C. P. Robert, "Simulation of truncated normal
/// variables", Statistics and Computing 5, 1995), choosing a proposal that keeps the
/// acceptance rate above roughly 20% for any interval:
/// - an interval containing 0 and at least 2.5 wide: draw standard normals until one
///   falls inside;
/// - an interval containing 0 and narrower: a uniform proposal on `[lo, hi)`, accepted
///   with probability `exp(-x^2 / 2)`;
/// - an interval on one side of 0 (mirrored to `0 <= a < b`): with
///   `alpha = (a + sqrt(a^2 + 4)) / 2`, an exponential proposal `a + Exp(alpha)`
///   accepted with probability `exp(-(x - alpha)^2 / 2)` when `b - a >= 1 / alpha`,
///   else a uniform proposal on `[a, b)` accepted with probability
///   `exp((a^2 - x^2) / 2)`.
///
/// Unlike inverse-CDF sampling this stays exact far in the tails. Beyond `1e12`
/// standard deviations the sample is the near bound itself, which is what the exact
/// distribution rounds to in `f64`.
pub fn truncated_normal<R: Rng + ?Sized>(rng: &mut R, lo: f64, hi: f64) -> Result<f64> {
    check_bounds(lo, hi)?;
    Ok(truncated_unchecked(rng, lo, hi))
}

/// [`truncated_normal`] after the bounds were checked.
fn truncated_unchecked<R: Rng + ?Sized>(rng: &mut R, lo: f64, hi: f64) -> f64 {
    if lo >= 0.0 {
        one_sided(rng, lo, hi)
    } else if hi <= 0.0 {
        -one_sided(rng, -hi, -lo)
    } else if hi - lo >= 2.5 {
        loop {
            let (z0, z1) = standard_normal_pair(rng);
            if lo <= z0 && z0 <= hi {
                return z0;
            }
            if lo <= z1 && z1 <= hi {
                return z1;
            }
        }
    } else {
        loop {
            let x = lo + (hi - lo) * rng.next_f64();
            if rng.next_f64() < libm::exp(-0.5 * x * x) {
                return x;
            }
        }
    }
}

/// A standard normal value conditioned on `a <= z <= b`, for `0 <= a < b`.
fn one_sided<R: Rng + ?Sized>(rng: &mut R, a: f64, b: f64) -> f64 {
    if a > DEEP_TAIL {
        return a;
    }
    let alpha = 0.5 * (a + libm::sqrt(a * a + 4.0));
    if (b - a) * alpha < 1.0 {
        loop {
            let x = a + (b - a) * rng.next_f64();
            if rng.next_f64() < libm::exp(-0.5 * (x - a) * (x + a)) {
                return x;
            }
        }
    } else {
        loop {
            let x = a - libm::log(1.0 - rng.next_f64()) / alpha;
            let accept = libm::exp(-0.5 * (x - alpha) * (x - alpha));
            if rng.next_f64() < accept && x <= b {
                return x;
            }
        }
    }
}

/// Fills `out` with `mean + std * z`, each `z` a [`truncated_normal`] value in
/// `[lo, hi]` standard deviations (the `f32` rounding may land a value on a bound).
pub fn fill_truncated_normal_f32<R: Rng + ?Sized>(
    rng: &mut R,
    out: &mut [f32],
    mean: f32,
    std: f32,
    lo: f64,
    hi: f64,
) -> Result<()> {
    let (mean, std) = (f64::from(mean), f64::from(std));
    check_mean_std(mean, std)?;
    check_bounds(lo, hi)?;
    for x in out {
        *x = (mean + std * truncated_unchecked(rng, lo, hi)) as f32;
    }
    Ok(())
}

/// Fills `out` with `mean + std * z`, each `z` a [`truncated_normal`] value in
/// `[lo, hi]` standard deviations.
pub fn fill_truncated_normal_f64<R: Rng + ?Sized>(
    rng: &mut R,
    out: &mut [f64],
    mean: f64,
    std: f64,
    lo: f64,
    hi: f64,
) -> Result<()> {
    check_mean_std(mean, std)?;
    check_bounds(lo, hi)?;
    for x in out {
        *x = mean + std * truncated_unchecked(rng, lo, hi);
    }
    Ok(())
}

/// Checks a probability: `0 <= p <= 1` (not NaN).
fn check_probability(p: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::InvalidArgument("probability must be in [0, 1]"));
    }
    Ok(())
}

/// `true` with probability `p`: `rng.next_f64() < p`. `p = 0` never and `p = 1`
/// always gives `true`.
pub fn bernoulli<R: Rng + ?Sized>(rng: &mut R, p: f64) -> Result<bool> {
    check_probability(p)?;
    Ok(rng.next_f64() < p)
}

/// Fills `out` with independent [`bernoulli`] draws.
pub fn fill_bernoulli<R: Rng + ?Sized>(rng: &mut R, out: &mut [bool], p: f64) -> Result<()> {
    check_probability(p)?;
    for x in out {
        *x = rng.next_f64() < p;
    }
    Ok(())
}

/// Checks categorical weights (non-empty, finite, non-negative, positive finite sum)
/// and returns their sum.
fn weight_total<W: Copy + Into<f64>>(weights: &[W]) -> Result<f64> {
    let mut total = 0.0f64;
    for &w in weights {
        let w: f64 = w.into();
        if !(w.is_finite() && w >= 0.0) {
            return Err(Error::InvalidArgument(
                "categorical weights must be finite and non-negative",
            ));
        }
        total += w;
    }
    if !(total > 0.0 && total.is_finite()) {
        return Err(Error::InvalidArgument(
            "categorical weights must have a positive finite sum",
        ));
    }
    Ok(total)
}

/// Inverse-CDF pick: the first index whose running weight sum exceeds `u * total`.
fn pick<W: Copy + Into<f64>>(u: f64, weights: &[W], total: f64) -> usize {
    let target = u * total;
    let mut acc = 0.0f64;
    let mut last_positive = 0;
    for (i, &w) in weights.iter().enumerate() {
        let w: f64 = w.into();
        if w > 0.0 {
            acc += w;
            last_positive = i;
            if target < acc {
                return i;
            }
        }
    }
    // Rounding in the running sum can leave `target` just above it; the draw then
    // belongs to the last category that has weight.
    last_positive
}

/// An index `i` drawn with probability `weights[i] / sum(weights)`, by one
/// [`Rng::next_f64`] and a linear scan of the running sum. Weights need not be
/// normalised; a zero weight is never drawn. Weights must be finite, non-negative and
/// not all zero.
pub fn categorical<R: Rng + ?Sized, W: Copy + Into<f64>>(
    rng: &mut R,
    weights: &[W],
) -> Result<usize> {
    let total = weight_total(weights)?;
    Ok(pick(rng.next_f64(), weights, total))
}

/// Fills `out` with independent [`categorical`] draws over `weights`.
pub fn fill_categorical<R: Rng + ?Sized, W: Copy + Into<f64>>(
    rng: &mut R,
    weights: &[W],
    out: &mut [usize],
) -> Result<()> {
    let total = weight_total(weights)?;
    for x in out {
        *x = pick(rng.next_f64(), weights, total);
    }
    Ok(())
}

/// A uniform integer in `[0, n)` by Lemire's multiply-and-reject method (D. Lemire,
/// "Fast Random Integer Generation in an Interval", ACM TOMACS 29(1), 2019): the top
/// half of `x * n` for a random word `x`, redrawing while the low half is below
/// `2^w mod n`, which removes the bias exactly.
///
/// For `n <= 2^32` the words are 32-bit ([`Rng::next_u32`], `w = 32`), beyond that
/// 64-bit ([`Rng::next_u64`], `w = 64`); `n = 1` returns 0 without drawing. These are
/// NumPy's choices, so on a [`super::Philox4x64Stream::numpy`] stream this equals
/// `Generator.integers(0, n)`. `n = 0` is an error.
pub fn uniform_below<R: Rng + ?Sized>(rng: &mut R, n: u64) -> Result<u64> {
    if n == 0 {
        return Err(Error::InvalidArgument("uniform_below needs n > 0"));
    }
    Ok(below(rng, n))
}

/// [`uniform_below`] for `n > 0`.
fn below<R: Rng + ?Sized>(rng: &mut R, n: u64) -> u64 {
    if n == 1 {
        return 0;
    }
    if n <= 1 << 32 {
        // (2^32 - 1) * 2^32 < 2^64: the product fits in a u64.
        let mut m = u64::from(rng.next_u32()) * n;
        if m & 0xFFFF_FFFF < n {
            let threshold = (1u64 << 32) % n;
            while m & 0xFFFF_FFFF < threshold {
                m = u64::from(rng.next_u32()) * n;
            }
        }
        m >> 32
    } else {
        let wide = u128::from(n);
        let mut m = u128::from(rng.next_u64()) * wide;
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = u128::from(rng.next_u64()) * wide;
            }
        }
        (m >> 64) as u64
    }
}

/// Fills `out` with independent [`uniform_below`] draws.
pub fn fill_uniform_below<R: Rng + ?Sized>(rng: &mut R, out: &mut [u64], n: u64) -> Result<()> {
    if n == 0 {
        return Err(Error::InvalidArgument("uniform_below needs n > 0"));
    }
    for x in out {
        *x = below(rng, n);
    }
    Ok(())
}

/// Shuffles `items` uniformly in place (Fisher–Yates: for `i` from the last index
/// down to 1, swap item `i` with item [`uniform_below`]`(i + 1)`). This is not NumPy's
/// `shuffle`, which draws its indices differently.
pub fn shuffle<R: Rng + ?Sized, T>(rng: &mut R, items: &mut [T]) {
    for i in (1..items.len()).rev() {
        let j = below(rng, i as u64 + 1) as usize;
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replays fixed words, to drive the samplers with chosen inputs.
    struct Fixed<'a> {
        words: &'a [u64],
        at: usize,
    }

    impl Rng for Fixed<'_> {
        fn next_u32(&mut self) -> u32 {
            (self.next_u64() >> 32) as u32
        }
        fn next_u64(&mut self) -> u64 {
            let w = self.words[self.at % self.words.len()];
            self.at += 1;
            w
        }
    }

    #[test]
    fn uniform_range_never_returns_the_upper_bound() {
        let mut rng = Fixed {
            words: &[u64::MAX],
            at: 0,
        };
        let x = uniform_f32(&mut rng, 1.0, 1.0 + f32::EPSILON).unwrap();
        assert!(x < 1.0 + f32::EPSILON);
        let y = uniform_f64(&mut rng, -1.0, 1e-300).unwrap();
        assert!(y < 1e-300);
        let z = uniform_f64(&mut rng, 0.0, 1.0).unwrap();
        assert_eq!(z, 1.0 - f64::EPSILON / 2.0);
    }

    #[test]
    fn categorical_pick_follows_the_running_sum() {
        let w = [0.0f32, 1.0, 0.0, 3.0, 0.0];
        assert_eq!(pick(0.0, &w, 4.0), 1);
        assert_eq!(pick(0.2499, &w, 4.0), 1);
        assert_eq!(pick(0.25, &w, 4.0), 3);
        assert_eq!(pick(1.0, &w, 4.0), 3);
    }

    #[test]
    fn deep_tails_return_the_near_bound() {
        let mut rng = Fixed {
            words: &[1 << 63],
            at: 0,
        };
        assert_eq!(truncated_normal(&mut rng, 1e13, f64::INFINITY), Ok(1e13));
        assert_eq!(truncated_normal(&mut rng, -f64::INFINITY, -1e13), Ok(-1e13));
    }
}
