//! A [`Config`] as GGUF metadata: the `{arch}.` keys llama.cpp's converter writes,
//! the inverse of [`Config::from_metadata`], plus the rope tensors GGUF carries
//! instead of keys (`rope_freqs.weight` for Llama 3 scaling,
//! `rope_factors_{short,long}.weight` for LongRoPE).
//!
//! [`check_round_trip`] reads the keys back with [`Config::from_metadata`] and names
//! the first field that a GGUF file could not express (for example Qwen2's
//! `max_window_layers`), so a conversion never silently changes the model.

use std::collections::BTreeMap;

use rml_host::formats::gguf::OwnedValue;

use crate::config::{Config, Family, LayerKind, MetaValue, RopeConfig, RopeScaling};
use crate::error::{Error, Result};
use crate::rope::inv_freq;

/// The GGUF `general.architecture` of a family (Mistral and Mixtral are `llama`).
pub fn gguf_arch(family: Family) -> &'static str {
    match family {
        Family::Llama | Family::Mistral | Family::Mixtral => "llama",
        Family::Qwen2 => "qwen2",
        Family::Qwen3 => "qwen3",
        Family::Qwen3Moe => "qwen3moe",
        Family::Gemma2 => "gemma2",
        Family::Gemma3 => "gemma3",
        Family::Phi3 => "phi3",
    }
}

/// Metadata keys and the extra f32 rope tensors (`name`, values) of `c`.
pub type Extras = (Vec<(String, OwnedValue)>, Vec<(String, Vec<f32>)>);

/// The `general.architecture` and `{arch}.` keys for `c`, and the rope tensors.
pub fn model_metadata(c: &Config) -> Result<Extras> {
    let arch = gguf_arch(c.family);
    let mut kv: Vec<(String, OwnedValue)> = vec![("general.architecture".into(), arch.into())];
    let mut put = |k: &str, v: OwnedValue| kv.push((format!("{arch}.{k}"), v));
    let u = |n: usize| OwnedValue::U32(n as u32);
    put("context_length", u(c.max_positions));
    put("embedding_length", u(c.hidden_size));
    put("block_count", u(c.n_layers));
    put("feed_forward_length", u(c.intermediate_size));
    put("vocab_size", u(c.vocab_size));
    put("attention.head_count", u(c.n_heads));
    put("attention.head_count_kv", u(c.n_kv_heads));
    put("attention.key_length", u(c.head_dim));
    put("attention.value_length", u(c.head_dim));
    put(
        "attention.layer_norm_rms_epsilon",
        OwnedValue::F32(c.rms_eps),
    );
    put("rope.dimension_count", u(c.rope.rotary_dim));
    put("rope.freq_base", OwnedValue::F32(c.rope.theta as f32));
    if let Some(w) = c.sliding_window
        && c.layer_kinds.contains(&LayerKind::Sliding)
    {
        put("attention.sliding_window", u(w));
        if c.family == Family::Gemma3 {
            let pattern = (1..=c.n_layers + 1)
                .find(|p| crate::config::windowed_layers(c.n_layers, 0, Some(*p)) == c.layer_kinds)
                .unwrap_or(c.n_layers + 1);
            put("attention.sliding_window_pattern", u(pattern));
        }
    }
    if let Some(local) = &c.local_rope {
        put("rope.freq_base_swa", OwnedValue::F32(local.theta as f32));
    }
    if let Some(cap) = c.attn_softcap {
        put("attn_logit_softcapping", OwnedValue::F32(cap));
    }
    if let Some(cap) = c.final_softcap {
        put("final_logit_softcapping", OwnedValue::F32(cap));
    }
    let default_scale = (c.head_dim as f64).powf(-0.5) as f32;
    if (c.query_scale - default_scale).abs() > f32::EPSILON * default_scale {
        put("attention.scale", OwnedValue::F32(c.query_scale));
    }
    if let Some(moe) = &c.moe {
        put("expert_count", u(moe.n_experts));
        put("expert_used_count", u(moe.top_k));
        if c.family == Family::Qwen3Moe {
            put("expert_feed_forward_length", u(moe.expert_intermediate));
        }
        put("expert_weights_norm", OwnedValue::Bool(moe.normalize_top_k));
    }
    let mut tensors = Vec::new();
    match &c.rope.scaling {
        RopeScaling::None => {}
        RopeScaling::Linear { factor } => {
            put("rope.scaling.type", "linear".into());
            put("rope.scaling.factor", OwnedValue::F32(*factor as f32));
        }
        RopeScaling::Llama3 { .. } | RopeScaling::Divisors(_) => {
            tensors.push(("rope_freqs.weight".into(), divisors(&c.rope)));
        }
        RopeScaling::Yarn {
            factor,
            original_max_positions,
            beta_fast,
            beta_slow,
            attention_factor,
            truncate: _,
        } => {
            put("rope.scaling.type", "yarn".into());
            put("rope.scaling.factor", OwnedValue::F32(*factor as f32));
            put(
                "rope.scaling.original_context_length",
                u(*original_max_positions as usize),
            );
            put(
                "rope.scaling.yarn_beta_fast",
                OwnedValue::F32(*beta_fast as f32),
            );
            put(
                "rope.scaling.yarn_beta_slow",
                OwnedValue::F32(*beta_slow as f32),
            );
            // llama.cpp multiplies its own `0.1·ln(factor) + 1` by this.
            let own = RopeScaling::yarn_mscale(*factor, 1.0);
            put(
                "rope.scaling.attn_factor",
                OwnedValue::F32((attention_factor / own) as f32),
            );
        }
        RopeScaling::LongRope {
            short,
            long,
            original_max_positions,
            attention_factor,
        } => {
            put(
                "rope.scaling.original_context_length",
                u(*original_max_positions),
            );
            put(
                "rope.scaling.attn_factor",
                OwnedValue::F32(*attention_factor as f32),
            );
            tensors.push(("rope_factors_short.weight".into(), short.clone()));
            tensors.push(("rope_factors_long.weight".into(), long.clone()));
        }
    }
    Ok((kv, tensors))
}

/// Per-frequency divisors `plain_i / scaled_i` (GGUF `rope_freqs.weight`).
fn divisors(rope: &RopeConfig) -> Vec<f32> {
    let plain = inv_freq(&RopeConfig {
        scaling: RopeScaling::None,
        ..rope.clone()
    });
    plain
        .iter()
        .zip(inv_freq(rope))
        .map(|(p, s)| p / s)
        .collect()
}

fn meta_value(v: &OwnedValue) -> MetaValue {
    match v {
        OwnedValue::U8(n) => MetaValue::U64(u64::from(*n)),
        OwnedValue::U16(n) => MetaValue::U64(u64::from(*n)),
        OwnedValue::U32(n) => MetaValue::U64(u64::from(*n)),
        OwnedValue::U64(n) => MetaValue::U64(*n),
        OwnedValue::I8(n) => MetaValue::I64(i64::from(*n)),
        OwnedValue::I16(n) => MetaValue::I64(i64::from(*n)),
        OwnedValue::I32(n) => MetaValue::I64(i64::from(*n)),
        OwnedValue::I64(n) => MetaValue::I64(*n),
        OwnedValue::F32(x) => MetaValue::F64(f64::from(*x)),
        OwnedValue::F64(x) => MetaValue::F64(*x),
        OwnedValue::Bool(b) => MetaValue::Bool(*b),
        OwnedValue::String(s) => MetaValue::Str(s.clone()),
        OwnedValue::Array { items, .. } => MetaValue::ArrayLen(items.len()),
    }
}

/// Reads `keys` back with [`Config::from_metadata`] and checks every field the
/// decoder uses survived (rope scaling and the tied output are decided from tensors
/// at load and are not compared). The error names the first field that differs.
pub fn check_round_trip(c: &Config, keys: &[(String, OwnedValue)]) -> Result<()> {
    let map: BTreeMap<String, MetaValue> = keys
        .iter()
        .map(|(k, v)| (k.clone(), meta_value(v)))
        .collect();
    let back = Config::from_metadata(&map)?;
    let close = |a: f32, b: f32| (a - b).abs() <= 1e-6 * a.abs().max(b.abs());
    let mismatch: Option<&str> = if back.vocab_size != c.vocab_size
        || back.hidden_size != c.hidden_size
        || back.intermediate_size != c.intermediate_size
        || back.n_layers != c.n_layers
        || back.n_heads != c.n_heads
        || back.n_kv_heads != c.n_kv_heads
        || back.head_dim != c.head_dim
    {
        Some("sizes")
    } else if !close(back.rms_eps, c.rms_eps) {
        Some("rms_norm_eps")
    } else if back.activation != c.activation {
        Some("activation")
    } else if back.layer_kinds != c.layer_kinds {
        Some("layer kinds (which layers use the sliding window)")
    } else if back.sliding_window.is_some() != c.layer_kinds.contains(&LayerKind::Sliding) {
        Some("sliding_window")
    } else if back.attn_softcap != c.attn_softcap || back.final_softcap != c.final_softcap {
        Some("soft-caps")
    } else if !close(back.query_scale, c.query_scale) {
        Some("query scale")
    } else if back.embed_scale != c.embed_scale {
        Some("embedding scale")
    } else if back.moe != c.moe || back.moe_layers != c.moe_layers {
        Some("experts (count, top-k, size, renormalization or MoE layers)")
    } else if back.qk_norm != c.qk_norm || back.sandwich_norms != c.sandwich_norms {
        Some("norm layout")
    } else if back.rope.rotary_dim != c.rope.rotary_dim
        || !close(back.rope.theta as f32, c.rope.theta as f32)
        || back.local_rope.as_ref().map(|r| r.theta as f32)
            != c.local_rope.as_ref().map(|r| r.theta as f32)
    {
        Some("rope base or rotary dimensions")
    } else {
        None
    };
    match mismatch {
        Some(field) => Err(Error::Input(format!(
            "this {:?} model's {field} cannot be written as GGUF metadata that reads back the same",
            c.family
        ))),
        None => Ok(()),
    }
}
