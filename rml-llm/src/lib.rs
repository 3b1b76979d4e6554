//! # rml-llm
//!
//! The LLM runtime of rml. It will hold the tokenizers (tokenizer.json and GGUF
//! vocabularies), chat templates, model configuration, the weight source over GGUF or
//! safetensors, the decoder with its per-family hooks, the KV cache, samplers, the
//! generation loop and the `rml-llm` CLI.
//!
//! It depends on `rml-host` and the crates below it.

pub mod sample;
pub mod stop;
