//! Rotary position embedding in both pairing layouts.
//!
//! * [`RopeLayout::RotateHalf`] ("NeoX", Hugging Face): dimension `i` pairs with
//!   `i + d/2`.
//! * [`RopeLayout::Adjacent`] ("NORM", GGUF `llama` after the converter's Q/K row
//!   permutation): dimension `2i` pairs with `2i + 1`.
//!
//! Pair `i` rotates by `pos · f_i`, with `f_i = base^(−2i/d)` rescaled as the
//! [`RopeScaling`] says (linear, llama3, divisors, YaRN, LongRoPE), and cos/sin
//! multiplied by the scaling's attention factor (YaRN, LongRoPE). Frequencies are
//! computed as Hugging Face does (in f32: `1 / base^(2i/d)`), so positions agree to
//! rounding.

use crate::config::{RopeConfig, RopeScaling};

/// Which dimensions of a head rotate together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeLayout {
    /// Pairs `(i, i + d/2)`: Hugging Face checkpoints and NEOX-type GGUF archs.
    RotateHalf,
    /// Pairs `(2i, 2i + 1)`: GGUF `llama`-arch files (Q/K rows permuted).
    Adjacent,
}

/// Precomputed frequencies of one rotary configuration.
#[derive(Clone, Debug)]
pub struct Rope {
    inv_freq: Vec<f32>,
    /// LongRoPE's frequencies for a context longer than the `usize` positions.
    long: Option<(Vec<f32>, usize)>,
    /// Multiplier of cos and sin.
    mscale: f32,
    head_dim: usize,
    layout: RopeLayout,
}

/// `base^(2i/d)` for `i < d/2` in f32, as `base ** (arange(0, d, 2) / d)`.
fn powers(theta: f64, dim: usize) -> impl Iterator<Item = f32> {
    (0..dim / 2).map(move |i| {
        let exponent = (2 * i) as f32 / dim as f32;
        theta.powf(f64::from(exponent)) as f32
    })
}

/// YaRN's frequencies (Hugging Face `_compute_yarn_parameters`): a linear ramp over
/// the dimensions between the ones that rotate `beta_fast` and `beta_slow` times
/// over the original context blends the kept and the divided frequency.
fn yarn(
    theta: f64,
    dim: usize,
    factor: f64,
    original: f64,
    beta: (f64, f64),
    truncate: bool,
) -> Vec<f32> {
    let correction_dim = |rotations: f64| {
        dim as f64 * (original / (rotations * 2.0 * std::f64::consts::PI)).ln() / (2.0 * theta.ln())
    };
    let (mut low, mut high) = (correction_dim(beta.0), correction_dim(beta.1));
    if truncate {
        (low, high) = (low.floor(), high.ceil());
    }
    let (low, mut high) = (low.max(0.0) as f32, high.min(dim as f64 - 1.0) as f32);
    if low == high {
        high += 0.001;
    }
    powers(theta, dim)
        .enumerate()
        .map(|(i, p)| {
            let ramp = ((i as f32 - low) / (high - low)).clamp(0.0, 1.0);
            let keep = 1.0 - ramp;
            let interpolated = 1.0 / (factor as f32 * p);
            interpolated * (1.0 - keep) + (1.0 / p) * keep
        })
        .collect()
}

/// `1 / (divisor_i · base^(2i/d))` (LongRoPE factors, missing ones 1).
fn divided(theta: f64, dim: usize, divisors: &[f32]) -> Vec<f32> {
    powers(theta, dim)
        .enumerate()
        .map(|(i, p)| 1.0 / (divisors.get(i).copied().unwrap_or(1.0) * p))
        .collect()
}

/// The rotary frequencies `f_i`, `i < rotary_dim/2`, after scaling (LongRoPE: the
/// short-context set).
pub fn inv_freq(cfg: &RopeConfig) -> Vec<f32> {
    let dim = cfg.rotary_dim;
    match &cfg.scaling {
        RopeScaling::Yarn {
            factor,
            original_max_positions,
            beta_fast,
            beta_slow,
            truncate,
            ..
        } => {
            return yarn(
                cfg.theta,
                dim,
                *factor,
                *original_max_positions,
                (*beta_fast, *beta_slow),
                *truncate,
            );
        }
        RopeScaling::LongRope { short, .. } => return divided(cfg.theta, dim, short),
        _ => {}
    }
    powers(cfg.theta, dim)
        .enumerate()
        .map(|(i, base)| {
            let f = 1.0 / base;
            match &cfg.scaling {
                RopeScaling::None | RopeScaling::Yarn { .. } | RopeScaling::LongRope { .. } => f,
                RopeScaling::Linear { factor } => (f64::from(f) / factor) as f32,
                RopeScaling::Divisors(d) => f / d.get(i).copied().unwrap_or(1.0),
                RopeScaling::Llama3 {
                    factor,
                    low_freq_factor,
                    high_freq_factor,
                    original_max_positions,
                } => {
                    let f = f64::from(f);
                    let wavelen = 2.0 * std::f64::consts::PI / f;
                    let low_wavelen = original_max_positions / low_freq_factor;
                    let high_wavelen = original_max_positions / high_freq_factor;
                    let scaled = if wavelen < high_wavelen {
                        f
                    } else if wavelen > low_wavelen {
                        f / factor
                    } else {
                        let s = (original_max_positions / wavelen - low_freq_factor)
                            / (high_freq_factor - low_freq_factor);
                        (1.0 - s) * f / factor + s * f
                    };
                    scaled as f32
                }
            }
        })
        .collect()
}

impl Rope {
    /// Frequencies for heads of width `head_dim` (the first `cfg.rotary_dim`
    /// dimensions rotate).
    pub fn new(cfg: &RopeConfig, head_dim: usize, layout: RopeLayout) -> Rope {
        let (long, mscale) = match &cfg.scaling {
            RopeScaling::Yarn {
                attention_factor, ..
            } => (None, *attention_factor),
            RopeScaling::LongRope {
                long,
                original_max_positions,
                attention_factor,
                ..
            } => (
                Some((
                    divided(cfg.theta, cfg.rotary_dim, long),
                    *original_max_positions,
                )),
                *attention_factor,
            ),
            _ => (None, 1.0),
        };
        Rope {
            inv_freq: inv_freq(cfg),
            long,
            mscale: mscale as f32,
            head_dim,
            layout,
        }
    }

    /// The frequencies used in a context of `context` positions: LongRoPE's long set
    /// when `context` exceeds the original context (llama.cpp's rule; transformers
    /// switches on the current sequence length instead, which is the same when the
    /// cache is sized to the sequence), else the one set.
    pub fn frequencies(&self, context: usize) -> &[f32] {
        match &self.long {
            Some((long, original)) if context > *original => long,
            _ => &self.inv_freq,
        }
    }

    /// The pairing layout.
    pub fn layout(&self) -> RopeLayout {
        self.layout
    }

    /// Rotates every head of `x` (`heads × head_dim` values) for position `pos` in a
    /// context (KV cache) of `context` positions.
    pub fn apply(&self, x: &mut [f32], pos: usize, context: usize) {
        let freqs = self.frequencies(context);
        let half = freqs.len();
        // One sine and cosine per frequency, shared by every head.
        for (i, &f) in freqs.iter().enumerate() {
            let angle = f64::from(pos as f32 * f);
            let (sin, cos) = (
                angle.sin() as f32 * self.mscale,
                angle.cos() as f32 * self.mscale,
            );
            let (a, b) = match self.layout {
                RopeLayout::RotateHalf => (i, i + half),
                RopeLayout::Adjacent => (2 * i, 2 * i + 1),
            };
            for head in x.chunks_exact_mut(self.head_dim) {
                let (x1, x2) = (head[a], head[b]);
                head[a] = x1 * cos - x2 * sin;
                head[b] = x2 * cos + x1 * sin;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(scaling: RopeScaling) -> RopeConfig {
        RopeConfig {
            theta: 10_000.0,
            scaling,
            rotary_dim: 16,
        }
    }

    #[test]
    fn plain_frequencies_are_powers_of_the_base() {
        let f = inv_freq(&cfg(RopeScaling::None));
        assert_eq!(f.len(), 8);
        for (i, v) in f.iter().enumerate() {
            let want = 10_000f64.powf(-(2.0 * i as f64) / 16.0);
            assert!((f64::from(*v) - want).abs() <= 1e-6 * want);
        }
    }

    #[test]
    fn llama3_keeps_high_divides_low_and_blends_between() {
        let plain = inv_freq(&cfg(RopeScaling::None));
        let scaled = inv_freq(&cfg(RopeScaling::Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_positions: 64.0,
        }));
        // Wavelengths: 2π·10^(i/2): i = 0 below 16 (kept), i = 1, 2 between 16 and 64
        // (blended), i ≥ 3 above 64 (divided by 8).
        assert_eq!(scaled[0], plain[0]);
        for i in 1..3 {
            assert!(scaled[i] < plain[i] && scaled[i] > plain[i] / 8.0);
        }
        for i in 3..8 {
            assert!((scaled[i] - plain[i] / 8.0).abs() <= 1e-6 * plain[i]);
        }
    }

    #[test]
    fn rotation_keeps_pair_norms_and_position_zero_is_identity() {
        let rope = Rope::new(&cfg(RopeScaling::None), 16, RopeLayout::RotateHalf);
        let orig: Vec<f32> = (0..32).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut x = orig.clone();
        rope.apply(&mut x, 0, 16);
        assert_eq!(x, orig);
        rope.apply(&mut x, 5, 16);
        for h in 0..2 {
            for i in 0..8 {
                let (a, b) = (h * 16 + i, h * 16 + i + 8);
                let before = orig[a].hypot(orig[b]);
                let after = x[a].hypot(x[b]);
                assert!((before - after).abs() < 1e-5);
            }
        }
    }
}
