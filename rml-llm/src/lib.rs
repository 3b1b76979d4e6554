//! # rml-llm
//!
//! The LLM runtime of rml. It holds the model configuration ([`config`]), the weight
//! source over safetensors or GGUF ([`weights`]), the decoder with its per-family
//! hooks ([`model`]), the KV cache ([`kv_cache`]) and the numeric pieces they share
//! ([`rope`], [`attention`], [`ffn`], [`linear`], [`ops`]). Tokenizers, chat templates,
//! samplers, the generation loop ([`generate`]), speculative decoding ([`speculative`]),
//! opening a model with its tokenizer ([`open`]) and the `rml-llm` CLI live here too.
//!
//! It depends on `rml-host` and the crates below it.

pub mod attention;
pub mod chat;
pub mod config;
pub mod convert;
pub mod error;
pub mod ffn;
pub mod generate;
pub mod kv_cache;
pub mod linear;
pub mod model;
pub mod open;
pub mod ops;
mod parallel;
pub mod prefill_attention;
pub mod quantize;
pub mod rope;
pub mod tokenizer;
pub mod weights;

pub use config::{Config, Family};
pub use error::{Error, Result};
pub use generate::{Generation, GenerationStats, PrefillProgress, Session};
pub use kv_cache::{KvCache, KvDtype};
pub use model::{LoadOptions, Logits, Model, Workspace};
pub use speculative::{SpeculativeSession, SpeculativeStats};
pub use weights::{Convention, GgufSource, MemorySource, SafetensorsSource, WeightSource};
pub mod sample;
pub mod speculative;
pub mod stop;
