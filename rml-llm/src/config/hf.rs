//! Reading a Hugging Face `config.json` into a [`Config`].

use std::path::Path;

use serde_json::{Map, Value};

use super::{
    Activation, Config, Family, LayerKind, MoeConfig, ROPE_TYPES, RopeConfig, RopeScaling,
    check_heads, unsupported, windowed_layers,
};
use crate::error::{Error, Result};

/// Typed, defaulted reads from a `config.json` object.
struct Json<'a> {
    obj: &'a Map<String, Value>,
    source: &'a str,
}

impl Json<'_> {
    fn get(&self, key: &str) -> Option<&Value> {
        self.obj.get(key).filter(|v| !v.is_null())
    }

    fn opt_usize(&self, key: &str) -> Result<Option<usize>> {
        self.get(key)
            .map(|v| {
                v.as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| {
                        Error::config(self.source, key, "expected a non-negative integer")
                    })
            })
            .transpose()
    }

    fn usize(&self, key: &str) -> Result<usize> {
        self.opt_usize(key)?
            .ok_or_else(|| Error::config(self.source, key, "missing"))
    }

    fn opt_f64(&self, key: &str) -> Result<Option<f64>> {
        self.get(key)
            .map(|v| {
                v.as_f64()
                    .ok_or_else(|| Error::config(self.source, key, "expected a number"))
            })
            .transpose()
    }

    fn f64_or(&self, key: &str, default: f64) -> Result<f64> {
        Ok(self.opt_f64(key)?.unwrap_or(default))
    }

    fn bool_or(&self, key: &str, default: bool) -> Result<bool> {
        self.get(key)
            .map(|v| {
                v.as_bool()
                    .ok_or_else(|| Error::config(self.source, key, "expected a boolean"))
            })
            .transpose()
            .map(|b| b.unwrap_or(default))
    }

    fn opt_str(&self, key: &str) -> Result<Option<&str>> {
        self.get(key)
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| Error::config(self.source, key, "expected a string"))
            })
            .transpose()
    }

    fn opt_f32_list(&self, key: &str) -> Result<Option<Vec<f32>>> {
        self.get(key)
            .map(|v| {
                v.as_array()
                    .and_then(|a| a.iter().map(|x| x.as_f64().map(|x| x as f32)).collect())
                    .ok_or_else(|| Error::config(self.source, key, "expected a list of numbers"))
            })
            .transpose()
    }

    fn child(&self, key: &str) -> Result<Option<Json<'_>>> {
        self.get(key)
            .map(|v| {
                v.as_object()
                    .map(|obj| Json {
                        obj,
                        source: self.source,
                    })
                    .ok_or_else(|| Error::config(self.source, key, "expected an object"))
            })
            .transpose()
    }
}

/// Parses an HF rope-scaling object (`rope_scaling`, or one `rope_parameters`);
/// `top` is the whole config, whose `max_position_embeddings` and (Phi-3's)
/// top-level `original_max_position_embeddings` YaRN and LongRoPE also read.
fn hf_rope_scaling(j: &Json<'_>, top: &Json<'_>) -> Result<RopeScaling> {
    let kind = match j.opt_str("rope_type")? {
        Some(k) => k,
        None => j.opt_str("type")?.unwrap_or("default"),
    };
    Ok(match kind {
        "default" | "none" => RopeScaling::None,
        "linear" => RopeScaling::Linear {
            factor: j.f64_or("factor", 1.0)?,
        },
        "llama3" => RopeScaling::Llama3 {
            factor: j.f64_or("factor", 8.0)?,
            low_freq_factor: j.f64_or("low_freq_factor", 1.0)?,
            high_freq_factor: j.f64_or("high_freq_factor", 4.0)?,
            original_max_positions: j.f64_or("original_max_position_embeddings", 8192.0)?,
        },
        "yarn" => {
            let (max, original) = original_context(j, top)?;
            let factor = j.f64_or("factor", max / original)?;
            let attention_factor = match j.opt_f64("attention_factor")? {
                Some(a) => a,
                None => match (j.opt_f64("mscale")?, j.opt_f64("mscale_all_dim")?) {
                    (Some(m), Some(all)) if m != 0.0 && all != 0.0 => {
                        RopeScaling::yarn_mscale(factor, m) / RopeScaling::yarn_mscale(factor, all)
                    }
                    _ => RopeScaling::yarn_mscale(factor, 1.0),
                },
            };
            RopeScaling::Yarn {
                factor,
                original_max_positions: original,
                beta_fast: j
                    .opt_f64("beta_fast")?
                    .filter(|b| *b != 0.0)
                    .unwrap_or(32.0),
                beta_slow: j.opt_f64("beta_slow")?.filter(|b| *b != 0.0).unwrap_or(1.0),
                attention_factor,
                truncate: j.bool_or("truncate", true)?,
            }
        }
        "longrope" | "su" => {
            let (max, original) = original_context(j, top)?;
            let list = |key: &str| {
                j.opt_f32_list(key)?
                    .ok_or_else(|| Error::config(j.source, key, "missing (rope type longrope)"))
            };
            let factor = j.f64_or("factor", max / original)?;
            let attention_factor = match j.opt_f64("attention_factor")? {
                Some(a) => a,
                None => RopeScaling::longrope_mscale(factor * original, original),
            };
            RopeScaling::LongRope {
                short: list("short_factor")?,
                long: list("long_factor")?,
                original_max_positions: original as usize,
                attention_factor,
            }
        }
        other => return Err(unsupported("rope type", other, ROPE_TYPES)),
    })
}

/// `(max_position_embeddings, original_max_position_embeddings)` for YaRN and
/// LongRoPE: the original context from the top level (Phi-3), else the rope object,
/// else the maximum itself, as transformers does.
fn original_context(j: &Json<'_>, top: &Json<'_>) -> Result<(f64, f64)> {
    let max = top.f64_or("max_position_embeddings", 2048.0)?;
    let original = match top.opt_f64("original_max_position_embeddings")? {
        Some(o) => o,
        None => j.f64_or("original_max_position_embeddings", max)?,
    };
    if original < 1.0 {
        return Err(Error::config(
            j.source,
            "original_max_position_embeddings",
            "must be at least 1",
        ));
    }
    Ok((max, original))
}

/// The global and local rope of an HF config (both the 4.x `rope_theta` /
/// `rope_scaling` keys and the 5.x `rope_parameters` object are read).
fn hf_ropes(
    j: &Json<'_>,
    family: Family,
    rotary_dim: usize,
) -> Result<(RopeConfig, Option<RopeConfig>)> {
    let default_theta = if matches!(family, Family::Gemma3 | Family::Mixtral) {
        1_000_000.0
    } else {
        10_000.0
    };
    let rope_of = |p: &Json<'_>, theta_default: f64| -> Result<RopeConfig> {
        Ok(RopeConfig {
            theta: p.f64_or("rope_theta", theta_default)?,
            scaling: hf_rope_scaling(p, j)?,
            rotary_dim,
        })
    };
    if let Some(params) = j.child("rope_parameters")? {
        if let Some(full) = params.child("full_attention")? {
            let local = params
                .child("sliding_attention")?
                .map(|p| rope_of(&p, 10_000.0))
                .transpose()?;
            return Ok((rope_of(&full, default_theta)?, local));
        }
        return Ok((
            rope_of(&params, j.f64_or("rope_theta", default_theta)?)?,
            None,
        ));
    }
    let scaling = match j.child("rope_scaling")? {
        Some(s) => hf_rope_scaling(&s, j)?,
        None => RopeScaling::None,
    };
    let global = RopeConfig {
        theta: j.f64_or("rope_theta", default_theta)?,
        scaling,
        rotary_dim,
    };
    let local = if family == Family::Gemma3 {
        Some(RopeConfig {
            theta: j.f64_or("rope_local_base_freq", 10_000.0)?,
            scaling: RopeScaling::None,
            rotary_dim,
        })
    } else {
        None
    };
    Ok((global, local))
}

/// Per-layer attention kinds from `layer_types`, or from the family's rule.
fn hf_layer_kinds(
    j: &Json<'_>,
    family: Family,
    n_layers: usize,
    window: Option<usize>,
) -> Result<Vec<LayerKind>> {
    if let Some(types) = j.get("layer_types") {
        let list = types
            .as_array()
            .filter(|a| a.len() == n_layers)
            .ok_or_else(|| {
                Error::config(j.source, "layer_types", "expected one string per layer")
            })?;
        return list
            .iter()
            .map(|t| match t.as_str() {
                Some("full_attention") => Ok(LayerKind::Full),
                Some("sliding_attention") if window.is_some() => Ok(LayerKind::Sliding),
                Some("sliding_attention") => Err(Error::config(
                    j.source,
                    "layer_types",
                    "sliding layers need a sliding_window",
                )),
                _ => Err(unsupported(
                    "layer type",
                    &t.to_string(),
                    &["full_attention", "sliding_attention"],
                )),
            })
            .collect();
    }
    if window.is_none() {
        return Ok(vec![LayerKind::Full; n_layers]);
    }
    let pattern = j.gemma_global_every(family)?;
    let sliding_from = match family {
        Family::Qwen2 | Family::Qwen3 | Family::Qwen3Moe => {
            if !j.bool_or("use_sliding_window", false)? {
                return Ok(vec![LayerKind::Full; n_layers]);
            }
            j.opt_usize("max_window_layers")?.unwrap_or(0)
        }
        _ => 0,
    };
    Ok(windowed_layers(n_layers, sliding_from, pattern))
}

impl Json<'_> {
    /// Every `p`-th layer is global for the Gemma families (2 for Gemma 2,
    /// `sliding_window_pattern` (default 6) for Gemma 3); `None` elsewhere.
    fn gemma_global_every(&self, family: Family) -> Result<Option<usize>> {
        Ok(match family {
            Family::Gemma2 => Some(2),
            Family::Gemma3 => Some(
                self.opt_usize("sliding_window_pattern")?
                    .unwrap_or(6)
                    .max(1),
            ),
            _ => None,
        })
    }
}

impl Config {
    /// Reads `config.json` of a Hugging Face checkpoint directory; a file that
    /// cannot be read is an error naming its path.
    pub fn from_hf_dir(dir: &Path) -> Result<Config> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|e| {
            Error::config(&path.display().to_string(), "", format!("cannot read: {e}"))
        })?;
        Config::from_hf_json(&text)
    }

    /// Reads a Hugging Face `config.json` text. A multimodal Gemma 3 config is read
    /// from its `text_config`.
    pub fn from_hf_json(text: &str) -> Result<Config> {
        const SOURCE: &str = "config.json";
        let value: Value = serde_json::from_str(text)
            .map_err(|e| Error::config(SOURCE, "", format!("not valid JSON: {e}")))?;
        let obj = value
            .as_object()
            .ok_or_else(|| Error::config(SOURCE, "", "expected a JSON object"))?;
        let top = Json {
            obj,
            source: SOURCE,
        };
        let model_type = top
            .opt_str("model_type")?
            .ok_or_else(|| Error::config(SOURCE, "model_type", "missing"))?;
        let family = Family::from_hf(model_type)?;
        match top.child("text_config")? {
            Some(text) if model_type == "gemma3" => Self::from_hf_object(&text, family),
            _ => Self::from_hf_object(&top, family),
        }
    }

    fn from_hf_object(j: &Json<'_>, family: Family) -> Result<Config> {
        let hidden_size = j.usize("hidden_size")?;
        let n_heads = j.usize("num_attention_heads")?;
        let n_layers = j.usize("num_hidden_layers")?;
        let n_kv_heads = j.opt_usize("num_key_value_heads")?.unwrap_or(n_heads);
        check_heads(j.source, "num_key_value_heads", n_heads, n_kv_heads)?;
        let head_dim = match j.opt_usize("head_dim")? {
            Some(d) => d,
            None => hidden_size / n_heads,
        };
        let gemma = family.is_gemma();
        let act_name = match j.opt_str("hidden_activation")? {
            Some(a) if gemma => a,
            _ => {
                j.opt_str("hidden_act")?
                    .unwrap_or(if gemma { "gelu_pytorch_tanh" } else { "silu" })
            }
        };
        let activation = Activation::from_name(act_name)?;
        if j.bool_or("mlp_bias", false)? {
            return Err(Error::config(
                j.source,
                "mlp_bias",
                "MLP biases are not supported",
            ));
        }
        let rotary_dim = (head_dim as f64 * j.f64_or("partial_rotary_factor", 1.0)?) as usize;
        let (rope, local_rope) = hf_ropes(j, family, rotary_dim)?;
        let sliding_window = j.opt_usize("sliding_window")?;
        let layer_kinds = hf_layer_kinds(j, family, n_layers, sliding_window)?;
        let attention_bias = j.bool_or("attention_bias", false)?;
        let (qkv_bias, o_bias) = match family {
            Family::Qwen2 => (true, false),
            Family::Phi3 => (false, false),
            _ => (attention_bias, attention_bias),
        };
        let query_scale = if gemma {
            j.f64_or("query_pre_attn_scalar", 256.0)?.powf(-0.5) as f32
        } else {
            (head_dim as f64).powf(-0.5) as f32
        };
        let (attn_softcap, final_softcap) = match family {
            Family::Gemma2 => (
                Some(j.f64_or("attn_logit_softcapping", 50.0)? as f32),
                Some(j.f64_or("final_logit_softcapping", 30.0)? as f32),
            ),
            Family::Gemma3 => (
                j.opt_f64("attn_logit_softcapping")?.map(|v| v as f32),
                j.opt_f64("final_logit_softcapping")?.map(|v| v as f32),
            ),
            _ => (None, None),
        };
        let intermediate_size = j.usize("intermediate_size")?;
        let (moe, moe_layers) = hf_moe(j, family, n_layers, intermediate_size)?;
        let eps_default = family.default_rms_eps();
        Ok(Config {
            family,
            vocab_size: j.usize("vocab_size")?,
            hidden_size,
            intermediate_size,
            n_layers,
            n_heads,
            n_kv_heads,
            head_dim,
            rms_eps: j.f64_or("rms_norm_eps", eps_default)? as f32,
            max_positions: j.opt_usize("max_position_embeddings")?.unwrap_or(4096),
            activation,
            rope,
            local_rope,
            sliding_window,
            layer_kinds,
            attn_softcap,
            final_softcap,
            query_scale,
            embed_scale: gemma.then(|| (hidden_size as f64).sqrt() as f32),
            qkv_bias,
            o_bias,
            qk_norm: family.has_qk_norm(),
            sandwich_norms: gemma,
            moe,
            moe_layers,
            tie_embeddings: j.bool_or("tie_word_embeddings", gemma)?,
        })
    }
}

/// The routed-expert parameters of an HF config, and which layers use them.
fn hf_moe(
    j: &Json<'_>,
    family: Family,
    n_layers: usize,
    intermediate: usize,
) -> Result<(Option<MoeConfig>, Vec<bool>)> {
    let moe = match family {
        Family::Mixtral => MoeConfig {
            n_experts: j.opt_usize("num_local_experts")?.unwrap_or(8),
            top_k: j.opt_usize("num_experts_per_tok")?.unwrap_or(2),
            expert_intermediate: intermediate,
            normalize_top_k: true,
        },
        Family::Qwen3Moe => MoeConfig {
            n_experts: j.opt_usize("num_experts")?.unwrap_or(128),
            top_k: j.opt_usize("num_experts_per_tok")?.unwrap_or(8),
            expert_intermediate: j.usize("moe_intermediate_size")?,
            normalize_top_k: j.bool_or("norm_topk_prob", false)?,
        },
        _ => return Ok((None, vec![false; n_layers])),
    };
    if moe.top_k == 0 || moe.top_k > moe.n_experts {
        return Err(Error::config(
            j.source,
            "num_experts_per_tok",
            format!("cannot choose {} of {} experts", moe.top_k, moe.n_experts),
        ));
    }
    let step = j.opt_usize("decoder_sparse_step")?.unwrap_or(1).max(1);
    let dense_only: Vec<usize> = match j.get("mlp_only_layers") {
        Some(v) => v
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_u64)
                    .map(|n| n as usize)
                    .collect()
            })
            .ok_or_else(|| Error::config(j.source, "mlp_only_layers", "expected a list"))?,
        None => Vec::new(),
    };
    let layers = (0..n_layers)
        .map(|l| !dense_only.contains(&l) && (l + 1) % step == 0)
        .collect();
    Ok((Some(moe), layers))
}
