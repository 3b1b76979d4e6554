//! The sampler settings: which stages run, with which parameters, in which order.

use rml_core::{Error, Result};

/// One stage of the sampling chain.
///
/// Penalty and bias stages change logits; the truncation stages ([`Stage::TopK`],
/// [`Stage::TopP`], [`Stage::MinP`], [`Stage::Typical`]) remove candidates (their logits
/// become `-inf`); [`Stage::Temperature`] divides logits. A stage whose parameter makes
/// it a no-op (penalty 1, top-k 0, top-p 1, …) is skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Adds [`SamplerConfig::logit_bias`] to the listed tokens.
    LogitBias,
    /// CTRL / Hugging Face repetition penalty over the recent-token window.
    RepetitionPenalty,
    /// OpenAI frequency and presence penalties over the recent-token window.
    FrequencyPresence,
    /// Divides every logit by [`SamplerConfig::temperature`].
    Temperature,
    /// Keeps the tokens whose logit is at least the `k`-th largest.
    TopK,
    /// Keeps the smallest head of the distribution holding more than `p` of the mass.
    TopP,
    /// Keeps the tokens with probability at least `min_p` times the largest.
    MinP,
    /// Locally typical sampling: keeps the tokens closest to the expected surprisal.
    Typical,
}

impl Stage {
    /// Hugging Face `generate`'s order: logit bias (`SequenceBiasLogitsProcessor`),
    /// repetition penalty, then (frequency/presence, which Hugging Face lacks, next to
    /// the other penalty) temperature, top-k, top-p, min-p, typical.
    pub const DEFAULT_ORDER: [Stage; 8] = [
        Stage::LogitBias,
        Stage::RepetitionPenalty,
        Stage::FrequencyPresence,
        Stage::Temperature,
        Stage::TopK,
        Stage::TopP,
        Stage::MinP,
        Stage::Typical,
    ];
}

/// Everything a [`super::Sampler`] needs; [`Default`] gives CLI-friendly settings.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerConfig {
    /// Divides the logits; `0` means greedy (the largest surviving logit, no draw).
    pub temperature: f32,
    /// Top-k; `0` disables it.
    pub top_k: usize,
    /// Top-p (nucleus) mass in `(0, 1]`; `1` disables it.
    pub top_p: f32,
    /// Min-p ratio in `[0, 1]`; `0` disables it.
    pub min_p: f32,
    /// Typical-sampling mass in `(0, 1]`; `1` disables it.
    pub typical_p: f32,
    /// Repetition penalty (`> 0`); `1` disables it.
    pub repetition_penalty: f32,
    /// Frequency penalty, subtracted once per occurrence in the window.
    pub frequency_penalty: f32,
    /// Presence penalty, subtracted once if the token occurs in the window.
    pub presence_penalty: f32,
    /// How many of the most recent tokens the penalties look at; `0` disables them.
    pub penalty_last_n: usize,
    /// `(token, bias)` pairs added to the logits; `-inf` bans a token.
    pub logit_bias: Vec<(u32, f32)>,
    /// Seed of the Philox stream the final draw uses.
    pub seed: u64,
    /// The chain's order; stages not listed do not run, a stage listed twice runs twice.
    pub order: Vec<Stage>,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        Self {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            typical_p: 1.0,
            repetition_penalty: 1.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            penalty_last_n: 64,
            logit_bias: Vec::new(),
            seed: 0,
            order: Stage::DEFAULT_ORDER.to_vec(),
        }
    }
}

impl SamplerConfig {
    /// Temperature 1 and every other stage off: draws from the model's own softmax.
    pub fn unfiltered() -> Self {
        Self {
            temperature: 1.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            ..Self::default()
        }
    }

    /// Greedy decoding: temperature 0 and every other stage off.
    pub fn greedy() -> Self {
        Self {
            temperature: 0.0,
            ..Self::unfiltered()
        }
    }

    /// Whether the chain ends by taking the largest logit instead of drawing.
    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0
    }

    /// Checks every parameter's range and that bias tokens lie below `vocab`.
    pub fn validate(&self, vocab: usize) -> Result<()> {
        let check = |ok: bool, msg: &'static str| {
            if ok {
                Ok(())
            } else {
                Err(Error::InvalidArgument(msg))
            }
        };
        check(
            self.temperature >= 0.0 && self.temperature.is_finite(),
            "temperature must be finite and >= 0",
        )?;
        check(
            self.top_p > 0.0 && self.top_p <= 1.0,
            "top_p must be in (0, 1]",
        )?;
        check((0.0..=1.0).contains(&self.min_p), "min_p must be in [0, 1]")?;
        check(
            self.typical_p > 0.0 && self.typical_p <= 1.0,
            "typical_p must be in (0, 1]",
        )?;
        check(
            self.repetition_penalty > 0.0 && self.repetition_penalty.is_finite(),
            "repetition_penalty must be finite and > 0",
        )?;
        check(
            self.frequency_penalty.is_finite() && self.presence_penalty.is_finite(),
            "frequency and presence penalties must be finite",
        )?;
        check(vocab > 0, "the vocabulary must not be empty")?;
        for &(token, bias) in &self.logit_bias {
            check(
                (token as usize) < vocab,
                "logit_bias token out of the vocabulary",
            )?;
            check(
                !bias.is_nan() && bias != f32::INFINITY,
                "logit_bias must be finite or -inf",
            )?;
        }
        Ok(())
    }
}
