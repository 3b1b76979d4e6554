//! The chain itself: runs the configured stages over a logits slice and draws a token.

use rml_core::random::Philox4x64Stream;
use rml_core::random::distributions::categorical;
use rml_core::{Error, Result};

use super::candidates::Candidates;
use super::config::{SamplerConfig, Stage};
use super::window::TokenWindow;
use super::{penalty, warp};

/// A sampling chain for one generation: the configuration, buffers sized to the
/// vocabulary, the recent-token window and the seeded Philox stream.
///
/// Nothing is allocated per token: [`Sampler::sample`] works in the caller's logits
/// slice and the buffers made by [`Sampler::new`].
#[derive(Clone, Debug)]
pub struct Sampler {
    config: SamplerConfig,
    vocab: usize,
    candidates: Candidates,
    window: TokenWindow,
    rng: Philox4x64Stream,
}

impl Sampler {
    /// A sampler over a vocabulary of `vocab` tokens; fails if `config` is out of range.
    pub fn new(config: SamplerConfig, vocab: usize) -> Result<Self> {
        config.validate(vocab)?;
        Ok(Self {
            vocab,
            candidates: Candidates::new(vocab),
            window: TokenWindow::new(config.penalty_last_n, vocab),
            rng: Philox4x64Stream::from_seed(config.seed),
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// Records `token` in the penalty window (call it for each prompt token; sampled
    /// tokens are recorded by [`Sampler::sample`] itself).
    pub fn accept(&mut self, token: u32) -> Result<()> {
        if token as usize >= self.vocab {
            return Err(Error::InvalidArgument("token id out of the vocabulary"));
        }
        self.window.push(token);
        Ok(())
    }

    /// Forgets the window and restarts the random stream from the seed, so the next
    /// generation repeats the first one given the same logits.
    pub fn reset(&mut self) {
        self.window.clear();
        self.rng = Philox4x64Stream::from_seed(self.config.seed);
    }

    /// Runs every stage of the chain over `logits` in place: afterwards the logits are
    /// the processed ones (penalised, biased, scaled) and every token the truncations
    /// removed is `-inf`, as with Hugging Face's processors. [`Sampler::candidates`]
    /// lists the survivors. Nothing is drawn and nothing is recorded.
    pub fn apply(&mut self, logits: &mut [f32]) -> Result<()> {
        if logits.len() != self.vocab {
            return Err(Error::LengthMismatch {
                expected: self.vocab,
                got: logits.len(),
            });
        }
        let cfg = &self.config;
        let c = &mut self.candidates;
        c.reset(logits);
        for &stage in &cfg.order {
            match stage {
                Stage::LogitBias if !cfg.logit_bias.is_empty() => {
                    penalty::logit_bias(logits, &cfg.logit_bias);
                    c.reset(logits);
                }
                Stage::RepetitionPenalty if cfg.repetition_penalty != 1.0 => {
                    penalty::repetition(logits, &mut self.window, cfg.repetition_penalty);
                    c.logits_changed();
                }
                Stage::FrequencyPresence
                    if cfg.frequency_penalty != 0.0 || cfg.presence_penalty != 0.0 =>
                {
                    penalty::frequency_presence(
                        logits,
                        &mut self.window,
                        cfg.frequency_penalty,
                        cfg.presence_penalty,
                    );
                    c.logits_changed();
                }
                Stage::Temperature if cfg.temperature > 0.0 && cfg.temperature != 1.0 => {
                    warp::temperature(c, logits, cfg.temperature);
                }
                Stage::TopK => warp::top_k(c, logits, cfg.top_k),
                Stage::TopP => warp::top_p(c, logits, cfg.top_p),
                Stage::MinP => warp::min_p(c, logits, cfg.min_p),
                Stage::Typical => warp::typical(c, logits, cfg.typical_p),
                _ => {}
            }
        }
        if c.is_empty() {
            return Err(Error::InvalidArgument(
                "no token left to sample: every logit is -inf or NaN",
            ));
        }
        Ok(())
    }

    /// The tokens that survived the last [`Sampler::apply`], in the chain's last order.
    pub fn candidates(&self) -> &[u32] {
        self.candidates.ids()
    }

    /// After [`Sampler::apply`], writes the probability of every token under the
    /// processed logits (0 for removed tokens) to `out`, which must be vocabulary-sized.
    pub fn probabilities(&mut self, logits: &[f32], out: &mut [f32]) -> Result<()> {
        if out.len() != self.vocab {
            return Err(Error::LengthMismatch {
                expected: self.vocab,
                got: out.len(),
            });
        }
        out.fill(0.0);
        let (ids, w, sum) = self.candidates.exp_weights(logits);
        for (&id, &w) in ids.iter().zip(w) {
            out[id as usize] = (w / sum) as f32;
        }
        Ok(())
    }

    /// One token: runs the chain over `logits` (in place, see [`Sampler::apply`]), then
    /// takes the largest surviving logit if the temperature is 0, else draws from the
    /// softmax of the survivors with one `next_f64` of the Philox stream (inverse CDF
    /// over the survivors in the chain's order), and records the token in the window.
    pub fn sample(&mut self, logits: &mut [f32]) -> Result<u32> {
        self.apply(logits)?;
        let token = if self.config.is_greedy() {
            self.candidates.argmax(logits).unwrap_or(0)
        } else {
            let (ids, w, _) = self.candidates.exp_weights(logits);
            ids[categorical(&mut self.rng, w)?]
        };
        self.window.push(token);
        Ok(token)
    }

    /// Draws a token from `probs` (vocabulary-sized, finite, non-negative, not all
    /// zero) with one `next_f64` of the stream, and records it in the window. The
    /// speculative loop draws from the draft's and the residual distributions with it.
    pub fn draw(&mut self, probs: &[f32]) -> Result<u32> {
        if probs.len() != self.vocab {
            return Err(Error::LengthMismatch {
                expected: self.vocab,
                got: probs.len(),
            });
        }
        let token = categorical(&mut self.rng, probs)? as u32;
        self.window.push(token);
        Ok(token)
    }

    /// The seeded random stream, for draws that are not tokens (the speculative
    /// acceptance test).
    pub fn rng(&mut self) -> &mut Philox4x64Stream {
        &mut self.rng
    }

    /// Makes this sampler's penalty window a copy of `other`'s (the random stream is
    /// kept), so a draft model's chain sees the same recent tokens as the target's.
    pub fn copy_window_from(&mut self, other: &Sampler) {
        self.window.clone_from(&other.window);
    }
}
