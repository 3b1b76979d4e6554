//! Sampling: turning a logits vector into the next token.
//!
//! A [`Sampler`] runs a chain of [`Stage`]s over the caller's logits slice, in the order
//! [`SamplerConfig::order`] gives (by default Hugging Face's: logit bias, repetition
//! penalty, frequency/presence penalties, temperature, top-k, top-p, min-p, typical),
//! then draws from what is left with a seeded Philox stream, or takes the largest logit
//! when the temperature is 0. Buffers are sized to the vocabulary once; no stage
//! allocates per token. `docs/sampling.md` gives every formula.
//!
//! - [`config`]: [`SamplerConfig`] and [`Stage`].
//! - [`window`]: the recent-token window the penalties read.
//! - [`penalty`]: repetition, frequency/presence penalties and logit bias.
//! - [`candidates`]: the surviving-token set one step works on.
//! - [`warp`]: temperature, top-k, top-p, min-p, typical.
//! - [`sampler`]: [`Sampler`], the chain and the final draw.

pub mod candidates;
pub mod config;
pub mod penalty;
pub mod sampler;
pub mod warp;
pub mod window;

pub use config::{SamplerConfig, Stage};
pub use sampler::Sampler;
