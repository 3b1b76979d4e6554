//! Counter-based random numbers (Philox) and the distributions built on them.
//!
//! A counter-based generator is a keyed bijection: `block(counter)` turns a counter into
//! random-looking words, with no hidden state. A *stream* ([`Philox4x32Stream`],
//! [`Philox4x64Stream`]) walks consecutive counters and hands the words out one at a time;
//! because any position can be computed directly, streams can [`skip`](Philox4x32Stream::skip),
//! [`seek`](Philox4x32Stream::seek) and [`split`](Philox4x32Stream::split) without drawing
//! the numbers in between, which keeps results reproducible per stream regardless of
//! how work is divided across threads.
//!
//! - [`philox`]: the Philox4x32-10 and Philox4x64-10 generators of Salmon et al. and
//!   their streams. Philox4x64-10 reproduces NumPy's `numpy.random.Philox` bit for bit.
//! - [`distributions`]: uniform, normal, truncated normal, Bernoulli and categorical
//!   samplers that fill caller slices, integers below `n` and a shuffle.
//!
//! Every sampler takes `&mut impl Rng`, so any of the streams (or a caller's own source)
//! can drive it.

pub mod distributions;
pub mod philox;

pub use philox::{Philox4x32, Philox4x32Stream, Philox4x64, Philox4x64Stream};

/// A source of uniformly distributed random bits.
///
/// The float conversions are NumPy's: [`Rng::next_f32`] keeps the top 24 bits of a `u32`
/// and [`Rng::next_f64`] the top 53 bits of a `u64` (see [`unit_f32`] and [`unit_f64`]),
/// so both lie in `[0, 1)` on an evenly spaced grid.
pub trait Rng {
    /// The next 32 uniformly random bits.
    fn next_u32(&mut self) -> u32;

    /// The next 64 uniformly random bits.
    fn next_u64(&mut self) -> u64;

    /// A uniform `f32` in `[0, 1)`: `(next_u32() >> 8) * 2^-24`.
    fn next_f32(&mut self) -> f32 {
        unit_f32(self.next_u32())
    }

    /// A uniform `f64` in `[0, 1)`: `(next_u64() >> 11) * 2^-53`.
    fn next_f64(&mut self) -> f64 {
        unit_f64(self.next_u64())
    }

    /// Fills `out` with consecutive [`Rng::next_u32`] values.
    fn fill_u32(&mut self, out: &mut [u32]) {
        for x in out {
            *x = self.next_u32();
        }
    }

    /// Fills `out` with consecutive [`Rng::next_u64`] values.
    fn fill_u64(&mut self, out: &mut [u64]) {
        for x in out {
            *x = self.next_u64();
        }
    }
}

/// Maps 32 random bits to `[0, 1)`: the top 24 bits times `2^-24`. Every result is
/// exactly representable, so the conversion never rounds up to 1. This is NumPy's
/// `next_float` (used by `Generator.random(dtype=np.float32)`).
pub const fn unit_f32(bits: u32) -> f32 {
    (bits >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// Maps 64 random bits to `[0, 1)`: the top 53 bits times `2^-53`. Every result is
/// exactly representable, so the conversion never rounds up to 1. This is NumPy's
/// `next_double` (used by `Generator.random()`).
pub const fn unit_f64(bits: u64) -> f64 {
    (bits >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_conversions_hit_the_grid_ends_exactly() {
        assert_eq!(unit_f32(0), 0.0);
        assert_eq!(unit_f32(0xFF), 0.0);
        assert_eq!(unit_f32(0x100), 1.0 / 16_777_216.0);
        assert_eq!(unit_f32(u32::MAX), 1.0 - 1.0 / 16_777_216.0);
        assert_eq!(unit_f32(0x8000_0000), 0.5);
        assert_eq!(unit_f64(0), 0.0);
        assert_eq!(unit_f64(0x7FF), 0.0);
        assert_eq!(unit_f64(0x800), 1.0 / 9_007_199_254_740_992.0);
        assert_eq!(unit_f64(u64::MAX), 1.0 - 1.0 / 9_007_199_254_740_992.0);
        assert_eq!(unit_f64(1 << 63), 0.5);
    }
}
