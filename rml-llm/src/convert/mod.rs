//! Converting a Hugging Face checkpoint directory (`config.json`, `model.safetensors`
//! or a sharded set, `tokenizer.json`, `tokenizer_config.json`) into what a GGUF file
//! holds: metadata from the parsed [`Config`] ([`metadata`]), the tokenizer as
//! `tokenizer.ggml.*` keys ([`vocab`]) and the tensors under GGUF names and layouts
//! ([`tensors`]). [`crate::quantize::quantize_model`] writes the file.
//!
//! Supported: every family [`Config::from_hf_json`] reads (Llama, Mistral, Mixtral,
//! Qwen2, Qwen3, Qwen3-MoE, Gemma 2, Gemma 3 text, Phi-3), as far as GGUF metadata can
//! express the configuration (checked by [`metadata::check_round_trip`]).

pub mod metadata;
pub mod tensors;
pub mod vocab;

use std::path::Path;

use rml_host::formats::gguf::OwnedValue;

use crate::config::Config;
use crate::error::Result;
use crate::weights::SafetensorsSource;

pub use tensors::HfTensor;

/// A Hugging Face checkpoint ready to be written as GGUF.
#[derive(Debug)]
pub struct HfModel {
    /// The parsed `config.json`.
    pub config: Config,
    /// The weights.
    pub source: SafetensorsSource,
    /// GGUF metadata: `general.*`, the `{arch}.` keys and the tokenizer.
    pub metadata: Vec<(String, OwnedValue)>,
    /// The output tensors, in order.
    pub tensors: Vec<HfTensor>,
    /// Whether a tokenizer was found (`tokenizer.json`).
    pub has_tokenizer: bool,
}

impl HfModel {
    /// Reads the directory's configuration, tokenizer and tensor list.
    pub fn open(dir: &Path) -> Result<HfModel> {
        let config = Config::from_hf_dir(dir)?;
        let source = SafetensorsSource::open(dir)?;
        let (mut metadata, extra) = metadata::model_metadata(&config)?;
        metadata::check_round_trip(&config, &metadata)?;
        let name = dir
            .canonicalize()
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "model".into());
        metadata.push(("general.name".into(), name.into()));
        let vocab = vocab::vocab_metadata(dir, config.vocab_size)?;
        let has_tokenizer = vocab.is_some();
        metadata.extend(vocab.unwrap_or_default());
        let tensors = tensors::hf_tensors(&config, &source, extra)?;
        Ok(HfModel {
            config,
            source,
            metadata,
            tensors,
            has_tokenizer,
        })
    }
}
