//! Reading GGUF metadata into a [`Config`] through the [`Metadata`] accessor, so any
//! GGUF reader (or a test's map) can supply the keys.
//!
//! Keys follow llama.cpp's `{arch}.…` scheme (see `docs/llm.md`). Mistral and Mixtral
//! files use architecture `llama`; a `llama` file with `expert_count > 0` is read as
//! Mixtral. Llama 3.1 rope scaling arrives as the `rope_freqs.weight` tensor, which
//! the weight loader turns into [`RopeScaling::Divisors`]; Phi-3's LongRoPE factors
//! arrive as `rope_factors_{short,long}.weight`, also read by the loader.

use std::collections::BTreeMap;

use super::{
    Activation, Config, Family, GGUF_ARCHITECTURES, LayerKind, MoeConfig, ROPE_TYPES, RopeConfig,
    RopeScaling, check_heads, unsupported, windowed_layers,
};
use crate::error::{Error, Result};

/// One metadata value, as far as the configuration needs it.
#[derive(Clone, Debug, PartialEq)]
pub enum MetaValue {
    /// Any unsigned integer type.
    U64(u64),
    /// Any signed integer type.
    I64(i64),
    /// `f32` or `f64`.
    F64(f64),
    /// A boolean.
    Bool(bool),
    /// A string.
    Str(String),
    /// An array, by its length only.
    ArrayLen(usize),
}

/// Key → value access to a model file's metadata.
pub trait Metadata {
    /// The value of `key`, if present.
    fn value(&self, key: &str) -> Option<MetaValue>;
}

impl Metadata for BTreeMap<String, MetaValue> {
    fn value(&self, key: &str) -> Option<MetaValue> {
        self.get(key).cloned()
    }
}

const SOURCE: &str = "gguf metadata";

/// Typed reads of `{arch}.`-prefixed keys.
struct Keys<'a> {
    meta: &'a dyn Metadata,
    arch: String,
}

impl Keys<'_> {
    fn key(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.arch)
    }

    fn opt_usize(&self, suffix: &str) -> Result<Option<usize>> {
        let key = self.key(suffix);
        match self.meta.value(&key) {
            None => Ok(None),
            Some(MetaValue::U64(n)) => Ok(usize::try_from(n).ok()),
            Some(MetaValue::I64(n)) if n >= 0 => Ok(usize::try_from(n).ok()),
            Some(_) => Err(Error::config(
                SOURCE,
                &key,
                "expected a non-negative integer",
            )),
        }
    }

    fn usize(&self, suffix: &str) -> Result<usize> {
        self.opt_usize(suffix)?
            .ok_or_else(|| Error::config(SOURCE, &self.key(suffix), "missing"))
    }

    fn opt_f64(&self, suffix: &str) -> Result<Option<f64>> {
        let key = self.key(suffix);
        match self.meta.value(&key) {
            None => Ok(None),
            Some(MetaValue::F64(v)) => Ok(Some(v)),
            Some(MetaValue::U64(n)) => Ok(Some(n as f64)),
            Some(MetaValue::I64(n)) => Ok(Some(n as f64)),
            Some(_) => Err(Error::config(SOURCE, &key, "expected a number")),
        }
    }

    fn opt_str(&self, suffix: &str) -> Result<Option<String>> {
        let key = self.key(suffix);
        match self.meta.value(&key) {
            None => Ok(None),
            Some(MetaValue::Str(s)) => Ok(Some(s)),
            Some(_) => Err(Error::config(SOURCE, &key, "expected a string")),
        }
    }

    fn opt_bool(&self, suffix: &str) -> Result<Option<bool>> {
        let key = self.key(suffix);
        match self.meta.value(&key) {
            None => Ok(None),
            Some(MetaValue::Bool(b)) => Ok(Some(b)),
            Some(_) => Err(Error::config(SOURCE, &key, "expected a boolean")),
        }
    }
}

impl Config {
    /// Reads GGUF metadata (`general.architecture` and the `{arch}.` keys).
    pub fn from_metadata(meta: &dyn Metadata) -> Result<Config> {
        let arch = match meta.value("general.architecture") {
            Some(MetaValue::Str(s)) => s,
            Some(_) => {
                return Err(Error::config(
                    SOURCE,
                    "general.architecture",
                    "expected a string",
                ));
            }
            None => return Err(Error::config(SOURCE, "general.architecture", "missing")),
        };
        let k = Keys { meta, arch };
        let n_experts = k.opt_usize("expert_count")?.unwrap_or(0);
        let family = match k.arch.as_str() {
            "llama" if n_experts > 0 => Family::Mixtral,
            "llama" => Family::Llama,
            "qwen2" => Family::Qwen2,
            "qwen3" => Family::Qwen3,
            "qwen3moe" => Family::Qwen3Moe,
            "gemma2" => Family::Gemma2,
            "gemma3" => Family::Gemma3,
            "phi3" => Family::Phi3,
            other => return Err(unsupported("architecture", other, GGUF_ARCHITECTURES)),
        };
        let hidden_size = k.usize("embedding_length")?;
        let n_layers = k.usize("block_count")?;
        let n_heads = k.usize("attention.head_count")?;
        let n_kv_heads = k.opt_usize("attention.head_count_kv")?.unwrap_or(n_heads);
        check_heads(
            SOURCE,
            &k.key("attention.head_count_kv"),
            n_heads,
            n_kv_heads,
        )?;
        let head_dim = k
            .opt_usize("attention.key_length")?
            .unwrap_or(hidden_size / n_heads);
        let vocab_size = match k.opt_usize("vocab_size")? {
            Some(v) => v,
            None => match meta.value("tokenizer.ggml.tokens") {
                Some(MetaValue::ArrayLen(n)) => n,
                _ => {
                    return Err(Error::config(
                        SOURCE,
                        &k.key("vocab_size"),
                        "missing (and no tokenizer.ggml.tokens)",
                    ));
                }
            },
        };
        let gemma = family.is_gemma();
        let rotary_dim = k.opt_usize("rope.dimension_count")?.unwrap_or(head_dim);
        let context = k.opt_usize("context_length")?.unwrap_or(4096);
        let original = k.opt_usize("rope.scaling.original_context_length")?;
        let attn_factor = k.opt_f64("rope.scaling.attn_factor")?;
        let scaling = match k.opt_str("rope.scaling.type")?.as_deref() {
            None | Some("none") if family == Family::Phi3 && original.is_some() => {
                // Phi-3 long-context files: the factors are the `rope_factors_long` and
                // `rope_factors_short` tensors, filled in by the weight loader.
                let original = original.unwrap_or(context).max(1);
                RopeScaling::LongRope {
                    short: Vec::new(),
                    long: Vec::new(),
                    original_max_positions: original,
                    attention_factor: attn_factor.unwrap_or_else(|| {
                        RopeScaling::longrope_mscale(context as f64, original as f64)
                    }),
                }
            }
            None | Some("none") => RopeScaling::None,
            Some("linear") => RopeScaling::Linear {
                factor: k.opt_f64("rope.scaling.factor")?.unwrap_or(1.0),
            },
            Some("yarn") => {
                let factor = k.opt_f64("rope.scaling.factor")?.unwrap_or(1.0);
                RopeScaling::Yarn {
                    factor,
                    original_max_positions: original.unwrap_or(context).max(1) as f64,
                    beta_fast: k.opt_f64("rope.scaling.yarn_beta_fast")?.unwrap_or(32.0),
                    beta_slow: k.opt_f64("rope.scaling.yarn_beta_slow")?.unwrap_or(1.0),
                    // llama.cpp multiplies its own mscale by `attn_factor`.
                    attention_factor: RopeScaling::yarn_mscale(factor, 1.0)
                        * attn_factor.unwrap_or(1.0),
                    truncate: true,
                }
            }
            Some(other) => return Err(unsupported("rope type", other, ROPE_TYPES)),
        };
        let default_theta = if family == Family::Gemma3 {
            1_000_000.0
        } else {
            10_000.0
        };
        let rope = RopeConfig {
            theta: k.opt_f64("rope.freq_base")?.unwrap_or(default_theta),
            scaling,
            rotary_dim,
        };
        let local_rope = (family == Family::Gemma3)
            .then(|| -> Result<RopeConfig> {
                Ok(RopeConfig {
                    theta: k.opt_f64("rope.freq_base_swa")?.unwrap_or(10_000.0),
                    scaling: RopeScaling::None,
                    rotary_dim,
                })
            })
            .transpose()?;
        let sliding_window = k.opt_usize("attention.sliding_window")?;
        let pattern = match family {
            Family::Gemma2 => Some(2),
            Family::Gemma3 => Some(
                k.opt_usize("attention.sliding_window_pattern")?
                    .unwrap_or(6)
                    .max(1),
            ),
            _ => None,
        };
        let layer_kinds = match sliding_window {
            Some(_) => windowed_layers(n_layers, 0, pattern),
            None => vec![LayerKind::Full; n_layers],
        };
        let (attn_softcap, final_softcap) = if gemma {
            (
                k.opt_f64("attn_logit_softcapping")?.map(|v| v as f32),
                k.opt_f64("final_logit_softcapping")?.map(|v| v as f32),
            )
        } else {
            (None, None)
        };
        let intermediate_size = k.opt_usize("feed_forward_length")?.unwrap_or(0);
        let moe = (n_experts > 0)
            .then(|| -> Result<MoeConfig> {
                Ok(MoeConfig {
                    n_experts,
                    top_k: k.usize("expert_used_count")?,
                    expert_intermediate: k
                        .opt_usize("expert_feed_forward_length")?
                        .unwrap_or(intermediate_size),
                    // llama.cpp renormalizes for Mixtral and Qwen3-MoE whatever the file says.
                    normalize_top_k: k.opt_bool("expert_weights_norm")?.unwrap_or(true),
                })
            })
            .transpose()?;
        let eps = k
            .opt_f64("attention.layer_norm_rms_epsilon")?
            .unwrap_or(family.default_rms_eps());
        Ok(Config {
            family,
            vocab_size,
            hidden_size,
            intermediate_size,
            n_layers,
            n_heads,
            n_kv_heads,
            head_dim,
            rms_eps: eps as f32,
            max_positions: context,
            activation: if gemma {
                Activation::GeluTanh
            } else {
                Activation::Silu
            },
            rope,
            local_rope,
            sliding_window,
            layer_kinds,
            attn_softcap,
            final_softcap,
            // GGUF has no query_pre_attn_scalar; `attention.scale` when a file has it,
            // else 1/sqrt(head_dim) as llama.cpp does.
            query_scale: k
                .opt_f64("attention.scale")?
                .unwrap_or((head_dim as f64).powf(-0.5)) as f32,
            embed_scale: gemma.then(|| (hidden_size as f64).sqrt() as f32),
            // Biases are used when the file has them (see the weight loader).
            qkv_bias: family == Family::Qwen2,
            o_bias: false,
            qk_norm: family.has_qk_norm(),
            sandwich_norms: gemma,
            moe_layers: vec![moe.is_some(); n_layers],
            moe,
            // Decided by the weight loader: GGUF omits `output.weight` when tied.
            tie_embeddings: false,
        })
    }
}
