//! One [`Config`] for every supported decoder family, read from a Hugging Face
//! `config.json` ([`Config::from_hf_json`]) or from GGUF metadata through the
//! [`Metadata`] accessor ([`Config::from_metadata`]).
//!
//! The family decides the hooks (norm style, biases, q/k norm, sliding layers,
//! soft-caps, MoE routing); the file supplies sizes and the values it has keys for.
//! Where a key is absent the Hugging Face class default of that family is used.
//! Unsupported architectures, rope types and activations are rejected by name, with
//! the list of supported ones.

mod gguf;
mod hf;

pub use gguf::{MetaValue, Metadata};

use crate::error::{Error, Result};

/// A decoder family: which per-family hooks the one decoder uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Llama 2 / 3 / 3.1 / 3.2 (HF `llama`).
    Llama,
    /// Mistral 7B: Llama with a sliding window (HF `mistral`).
    Mistral,
    /// Mixtral: Mistral with top-k routed experts (HF `mixtral`).
    Mixtral,
    /// Qwen2 / Qwen2.5: bias on q/k/v (HF `qwen2`).
    Qwen2,
    /// Qwen3 dense: per-head q/k RMSNorm (HF `qwen3`).
    Qwen3,
    /// Qwen3-MoE: Qwen3 attention with routed experts (HF `qwen3_moe`).
    Qwen3Moe,
    /// Gemma 2: (1+w) norms, sandwich norms, soft-caps, alternating sliding layers.
    Gemma2,
    /// Gemma 3 (text): Gemma 2 plus q/k norm, 5:1 local:global layers, two rope bases.
    Gemma3,
    /// Phi-3 / Phi-3.5: fused qkv and gate_up projections.
    Phi3,
}

/// The Hugging Face `model_type` values accepted by [`Config::from_hf_json`].
pub const HF_MODEL_TYPES: &[&str] = &[
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen3",
    "qwen3_moe",
    "gemma2",
    "gemma3_text",
    "gemma3",
    "phi3",
];

/// The GGUF `general.architecture` values accepted by [`Config::from_metadata`].
pub const GGUF_ARCHITECTURES: &[&str] = &[
    "llama", "qwen2", "qwen3", "qwen3moe", "gemma2", "gemma3", "phi3",
];

/// The activation names accepted for the MLP.
pub const ACTIVATIONS: &[&str] = &["silu", "swish", "gelu_pytorch_tanh", "gelu_tanh", "gelu"];

/// The rope types accepted (`rope_scaling.rope_type`, GGUF `rope.scaling.type`).
pub const ROPE_TYPES: &[&str] = &[
    "default", "none", "linear", "llama3", "yarn", "longrope", "su",
];

impl Family {
    /// The family of a Hugging Face `model_type`.
    pub fn from_hf(model_type: &str) -> Result<Family> {
        Ok(match model_type {
            "llama" => Family::Llama,
            "mistral" => Family::Mistral,
            "mixtral" => Family::Mixtral,
            "qwen2" => Family::Qwen2,
            "qwen3" => Family::Qwen3,
            "qwen3_moe" => Family::Qwen3Moe,
            "gemma2" => Family::Gemma2,
            "gemma3_text" | "gemma3" => Family::Gemma3,
            "phi3" => Family::Phi3,
            other => return Err(unsupported("architecture", other, HF_MODEL_TYPES)),
        })
    }

    /// True for the Gemma families (embedding scale, (1+w) norms in HF files,
    /// sandwich norms, GeGLU).
    pub fn is_gemma(self) -> bool {
        matches!(self, Family::Gemma2 | Family::Gemma3)
    }

    /// True where q and k get a per-head RMSNorm before RoPE.
    pub fn has_qk_norm(self) -> bool {
        matches!(self, Family::Qwen3 | Family::Qwen3Moe | Family::Gemma3)
    }

    /// The RMSNorm epsilon when a file does not give one (Phi-3's 1e-5, else 1e-6).
    pub fn default_rms_eps(self) -> f64 {
        if self == Family::Phi3 { 1e-5 } else { 1e-6 }
    }
}

/// The MLP's gate activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// `x·σ(x)` (SwiGLU MLPs).
    Silu,
    /// Tanh-approximated GELU (GeGLU MLPs, HF `gelu_pytorch_tanh`).
    GeluTanh,
    /// Exact (erf) GELU.
    Gelu,
}

impl Activation {
    /// Parses an HF `hidden_act` name.
    pub fn from_name(name: &str) -> Result<Activation> {
        Ok(match name {
            "silu" | "swish" => Activation::Silu,
            "gelu_pytorch_tanh" | "gelu_tanh" => Activation::GeluTanh,
            "gelu" => Activation::Gelu,
            other => return Err(unsupported("activation", other, ACTIVATIONS)),
        })
    }
}

/// How rotary frequencies are rescaled for long contexts.
#[derive(Clone, Debug, PartialEq)]
pub enum RopeScaling {
    /// Plain `base^(−2i/d)`.
    None,
    /// Every frequency divided by `factor` (position interpolation).
    Linear {
        /// The divisor.
        factor: f64,
    },
    /// Llama 3.1 "llama3" scaling: low frequencies divided by `factor`, high ones
    /// kept, a smooth blend between.
    Llama3 {
        /// Divisor of the low frequencies.
        factor: f64,
        /// `low_freq_factor`.
        low_freq_factor: f64,
        /// `high_freq_factor`.
        high_freq_factor: f64,
        /// `original_max_position_embeddings`.
        original_max_positions: f64,
    },
    /// Per-frequency divisors given as data (GGUF `rope_freqs.weight`).
    Divisors(Vec<f32>),
    /// YaRN: frequencies whose wavelength fits the original context many times are
    /// kept (extrapolated), slow ones divided by `factor` (interpolated), with a linear
    /// ramp between; cos and sin are multiplied by `attention_factor`.
    Yarn {
        /// Context extension factor.
        factor: f64,
        /// The pretraining context (`original_max_position_embeddings`).
        original_max_positions: f64,
        /// Rotations over the original context above which a frequency is kept.
        beta_fast: f64,
        /// Rotations below which a frequency is fully interpolated.
        beta_slow: f64,
        /// Multiplier of cos and sin (`0.1·ln(factor) + 1` unless given).
        attention_factor: f64,
        /// Round the ramp's ends outwards to whole dimensions (HF `truncate`).
        truncate: bool,
    },
    /// LongRoPE (Phi-3 `longrope`, formerly `su`): per-frequency divisors, `short`
    /// for contexts up to `original_max_positions` and `long` beyond, with cos and sin
    /// multiplied by `attention_factor`. Which set applies is decided by the KV cache's
    /// capacity (llama.cpp's rule; see [`crate::rope::Rope::apply`]).
    LongRope {
        /// Divisors for a context within the original one (`short_factor`).
        short: Vec<f32>,
        /// Divisors for a longer context (`long_factor`).
        long: Vec<f32>,
        /// The pretraining context.
        original_max_positions: usize,
        /// Multiplier of cos and sin (`sqrt(1 + ln(s)/ln(original))` for
        /// `s = max_positions / original` unless given).
        attention_factor: f64,
    },
}

impl RopeScaling {
    /// YaRN's attention factor `0.1·m·ln(factor) + 1` for a context extension
    /// `factor` (1 for `factor ≤ 1`); the default is `m = 1`.
    pub fn yarn_mscale(factor: f64, m: f64) -> f64 {
        if factor <= 1.0 {
            1.0
        } else {
            0.1 * m * factor.ln() + 1.0
        }
    }

    /// LongRoPE's default attention factor for `max_positions` over `original`.
    pub fn longrope_mscale(max_positions: f64, original: f64) -> f64 {
        let s = max_positions / original;
        if s <= 1.0 {
            1.0
        } else {
            (1.0 + s.ln() / original.ln()).sqrt()
        }
    }
}

/// Rotary embedding parameters of one kind of layer.
#[derive(Clone, Debug, PartialEq)]
pub struct RopeConfig {
    /// The base (`rope_theta`).
    pub theta: f64,
    /// Frequency rescaling.
    pub scaling: RopeScaling,
    /// Leading dimensions of each head that are rotated (the rest pass through).
    pub rotary_dim: usize,
}

/// Whether a layer attends to the whole prefix or to a sliding window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerKind {
    /// Causal attention over every earlier position.
    Full,
    /// Causal attention over the last `sliding_window` positions (itself included).
    Sliding,
}

/// Routed-expert MLP parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeConfig {
    /// Experts per MoE layer.
    pub n_experts: usize,
    /// Experts chosen per token.
    pub top_k: usize,
    /// Hidden size of one expert's MLP.
    pub expert_intermediate: usize,
    /// Renormalize the chosen experts' probabilities to sum to 1.
    pub normalize_top_k: bool,
}

/// Everything the decoder needs to know about a model, whatever file it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The family (selects the per-family hooks).
    pub family: Family,
    /// Vocabulary size (rows of the embedding).
    pub vocab_size: usize,
    /// Width of the residual stream.
    pub hidden_size: usize,
    /// Hidden size of the dense MLP.
    pub intermediate_size: usize,
    /// Decoder layers.
    pub n_layers: usize,
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads (GQA when fewer than `n_heads`).
    pub n_kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// RMSNorm epsilon.
    pub rms_eps: f32,
    /// Longest context the model was trained for (default KV-cache size).
    pub max_positions: usize,
    /// MLP gate activation.
    pub activation: Activation,
    /// Rotary parameters of full-attention layers (and of all layers unless
    /// `local_rope` is set).
    pub rope: RopeConfig,
    /// Rotary parameters of sliding-window layers, when they differ (Gemma 3).
    pub local_rope: Option<RopeConfig>,
    /// The sliding window, in positions (itself included).
    pub sliding_window: Option<usize>,
    /// Per layer: full or sliding attention.
    pub layer_kinds: Vec<LayerKind>,
    /// Attention scores are soft-capped: `c·tanh(s/c)` (Gemma 2).
    pub attn_softcap: Option<f32>,
    /// Output logits are soft-capped: `c·tanh(z/c)` (Gemma 2).
    pub final_softcap: Option<f32>,
    /// Multiplier of `q·k` (`1/sqrt(head_dim)`, or `query_pre_attn_scalar^(−1/2)`).
    pub query_scale: f32,
    /// Multiplier of the embeddings (`sqrt(hidden)` for Gemma).
    pub embed_scale: Option<f32>,
    /// Bias on the q, k and v projections.
    pub qkv_bias: bool,
    /// Bias on the output projection.
    pub o_bias: bool,
    /// Per-head RMSNorm of q and k before RoPE (Qwen3, Gemma 3).
    pub qk_norm: bool,
    /// Norms after attention and after the MLP as well as before (Gemma 2/3).
    pub sandwich_norms: bool,
    /// Routed experts, when the model has them.
    pub moe: Option<MoeConfig>,
    /// Per layer: true where the MLP is the routed-expert one.
    pub moe_layers: Vec<bool>,
    /// The output projection is the embedding matrix.
    pub tie_embeddings: bool,
}

/// Checks that `n_kv_heads` key/value heads can serve `n_heads` query heads.
pub(crate) fn check_heads(
    source: &str,
    key: &str,
    n_heads: usize,
    n_kv_heads: usize,
) -> Result<()> {
    if n_heads == 0 || n_kv_heads == 0 || !n_heads.is_multiple_of(n_kv_heads) {
        return Err(Error::config(
            source,
            key,
            format!("{n_kv_heads} key/value heads cannot serve {n_heads} query heads"),
        ));
    }
    Ok(())
}

/// Layer kinds when layers from `sliding_from` on slide, except every
/// `global_every`-th one (counting from 1), which stays global.
pub(crate) fn windowed_layers(
    n_layers: usize,
    sliding_from: usize,
    global_every: Option<usize>,
) -> Vec<LayerKind> {
    (0..n_layers)
        .map(|i| {
            let global = global_every.is_some_and(|p| (i + 1) % p == 0);
            if i >= sliding_from && !global {
                LayerKind::Sliding
            } else {
                LayerKind::Full
            }
        })
        .collect()
}

pub(crate) fn unsupported(
    what: &'static str,
    name: &str,
    supported: &'static [&'static str],
) -> Error {
    Error::Unsupported {
        what,
        name: name.to_owned(),
        supported,
    }
}

impl Config {
    /// The kind of layer `layer`.
    pub fn layer_kind(&self, layer: usize) -> LayerKind {
        self.layer_kinds[layer]
    }

    /// Width of all query heads together.
    pub fn q_dim(&self) -> usize {
        self.n_heads * self.head_dim
    }

    /// Width of all key (or value) heads together.
    pub fn kv_dim(&self) -> usize {
        self.n_kv_heads * self.head_dim
    }
}
