//! `Config` from `config.json` and from GGUF metadata: family hooks, defaults, and
//! rejection of unsupported names with the supported list.

use std::collections::BTreeMap;

use rml_llm::config::{Activation, LayerKind, MetaValue, RopeScaling};
use rml_llm::{Config, Error, Family};

fn hf(extra: &str) -> String {
    format!(
        r#"{{"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
            "num_hidden_layers": 4, "intermediate_size": 96, "vocab_size": 256 {extra}}}"#
    )
}

#[test]
fn unsupported_architecture_is_named_with_the_supported_list() {
    let err = Config::from_hf_json(&hf(r#", "model_type": "falcon""#)).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(
        err,
        Error::Unsupported {
            what: "architecture",
            ..
        }
    ));
    assert!(
        msg.contains("\"falcon\"") && msg.contains("llama") && msg.contains("phi3"),
        "{msg}"
    );
}

#[test]
fn unsupported_rope_type_and_activation_are_rejected_by_name() {
    let dynamic =
        hf(r#", "model_type": "llama", "rope_scaling": {"rope_type": "dynamic", "factor": 4.0}"#);
    let msg = Config::from_hf_json(&dynamic).unwrap_err().to_string();
    assert!(
        msg.contains("rope type \"dynamic\"") && msg.contains("llama3") && msg.contains("yarn"),
        "{msg}"
    );
    let relu = hf(r#", "model_type": "qwen2", "hidden_act": "relu""#);
    let msg = Config::from_hf_json(&relu).unwrap_err().to_string();
    assert!(
        msg.contains("activation \"relu\"") && msg.contains("silu"),
        "{msg}"
    );
}

#[test]
fn missing_keys_and_bad_head_counts_name_the_key() {
    let msg = Config::from_hf_json(r#"{"model_type": "llama"}"#)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("hidden_size"), "{msg}");
    let bad = hf(r#", "model_type": "llama", "num_key_value_heads": 3"#);
    let msg = Config::from_hf_json(&bad).unwrap_err().to_string();
    assert!(msg.contains("num_key_value_heads"), "{msg}");
}

#[test]
fn gemma2_hooks_and_defaults() {
    let c = Config::from_hf_json(&hf(r#", "model_type": "gemma2", "sliding_window": 8"#)).unwrap();
    assert_eq!(c.family, Family::Gemma2);
    assert_eq!(c.activation, Activation::GeluTanh);
    assert_eq!(c.attn_softcap, Some(50.0));
    assert_eq!(c.final_softcap, Some(30.0));
    assert_eq!(c.query_scale, 1.0 / 16.0);
    assert_eq!(c.embed_scale, Some(8.0));
    assert!(c.tie_embeddings && c.sandwich_norms && !c.qk_norm);
    use LayerKind::{Full, Sliding};
    assert_eq!(c.layer_kinds, [Sliding, Full, Sliding, Full]);
}

#[test]
fn transformers_5_rope_parameters_are_read() {
    let text = hf(
        r#", "model_type": "gemma3_text", "sliding_window": 4, "head_dim": 16,
        "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
                            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}},
        "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]"#,
    );
    let c = Config::from_hf_json(&text).unwrap();
    assert_eq!(c.rope.theta, 1e6);
    assert_eq!(c.rope.scaling, RopeScaling::Linear { factor: 8.0 });
    assert_eq!(c.local_rope.as_ref().unwrap().theta, 1e4);
    assert_eq!(c.layer_kind(3), LayerKind::Full);
    assert_eq!(c.layer_kind(2), LayerKind::Sliding);
}

#[test]
fn qwen3_moe_marks_dense_only_layers() {
    let text = hf(
        r#", "model_type": "qwen3_moe", "num_experts": 8, "num_experts_per_tok": 2,
        "moe_intermediate_size": 32, "mlp_only_layers": [0], "decoder_sparse_step": 1"#,
    );
    let c = Config::from_hf_json(&text).unwrap();
    assert_eq!(c.moe_layers, [false, true, true, true]);
    let moe = c.moe.unwrap();
    assert_eq!(
        (moe.n_experts, moe.top_k, moe.expert_intermediate),
        (8, 2, 32)
    );
    assert!(
        !moe.normalize_top_k,
        "class default of norm_topk_prob is false"
    );
}

fn gguf(arch: &str, extra: &[(&str, MetaValue)]) -> BTreeMap<String, MetaValue> {
    let mut m = BTreeMap::new();
    m.insert("general.architecture".into(), MetaValue::Str(arch.into()));
    let keys = [
        ("embedding_length", 64),
        ("block_count", 2),
        ("feed_forward_length", 96),
        ("attention.head_count", 4),
        ("attention.head_count_kv", 2),
    ];
    for (k, v) in keys {
        m.insert(format!("{arch}.{k}"), MetaValue::U64(v));
    }
    m.insert("tokenizer.ggml.tokens".into(), MetaValue::ArrayLen(300));
    for (k, v) in extra {
        m.insert(format!("{arch}.{k}"), v.clone());
    }
    m
}

#[test]
fn gguf_llama_with_experts_is_mixtral() {
    let meta = gguf(
        "llama",
        &[
            ("expert_count", MetaValue::U64(8)),
            ("expert_used_count", MetaValue::U64(2)),
        ],
    );
    let c = Config::from_metadata(&meta).unwrap();
    assert_eq!(c.family, Family::Mixtral);
    assert_eq!(c.vocab_size, 300);
    assert_eq!(c.head_dim, 16);
    assert_eq!(c.moe.unwrap().top_k, 2);
    let dense = Config::from_metadata(&gguf("llama", &[])).unwrap();
    assert_eq!(dense.family, Family::Llama);
    assert!(dense.moe.is_none());
}

#[test]
fn gguf_gemma3_reads_swa_base_and_pattern() {
    let meta = gguf(
        "gemma3",
        &[
            ("attention.sliding_window", MetaValue::U64(512)),
            ("rope.freq_base_swa", MetaValue::F64(10_000.0)),
            ("rope.freq_base", MetaValue::F64(1e6)),
        ],
    );
    let c = Config::from_metadata(&meta).unwrap();
    assert_eq!(c.family, Family::Gemma3);
    assert_eq!(c.local_rope.unwrap().theta, 10_000.0);
    assert_eq!(c.layer_kinds, [LayerKind::Sliding, LayerKind::Sliding]);
    assert!(c.qk_norm && c.sandwich_norms);
}

#[test]
fn gguf_unknown_architecture_and_wrong_types_are_errors() {
    let msg = Config::from_metadata(&gguf("falcon", &[]))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("\"falcon\"") && msg.contains("qwen3moe"),
        "{msg}"
    );
    let bad = gguf("qwen2", &[("block_count", MetaValue::Str("two".into()))]);
    let msg = Config::from_metadata(&bad).unwrap_err().to_string();
    assert!(msg.contains("qwen2.block_count"), "{msg}");
}

#[test]
fn multimodal_gemma3_is_read_from_its_text_config() {
    let text = format!(
        r#"{{"model_type": "gemma3", "vision_config": {{}}, "text_config": {}}}"#,
        hf(r#", "model_type": "gemma3_text", "sliding_window": 4, "head_dim": 16"#)
    );
    let c = Config::from_hf_json(&text).unwrap();
    assert_eq!(c.family, Family::Gemma3);
    assert_eq!(c.hidden_size, 64);
    assert_eq!(c.rope.theta, 1e6, "Gemma 3 class default");
    assert_eq!(c.local_rope.unwrap().theta, 1e4);
    use LayerKind::Sliding;
    assert_eq!(
        c.layer_kinds, [Sliding; 4],
        "pattern 6: no global layer among four"
    );
}

#[test]
fn qwen2_slides_only_with_use_sliding_window_from_max_window_layers() {
    let off = hf(r#", "model_type": "qwen2", "sliding_window": 4"#);
    assert_eq!(
        Config::from_hf_json(&off).unwrap().layer_kinds,
        [LayerKind::Full; 4]
    );
    let on = hf(
        r#", "model_type": "qwen2", "sliding_window": 4, "use_sliding_window": true,
        "max_window_layers": 2"#,
    );
    use LayerKind::{Full, Sliding};
    assert_eq!(
        Config::from_hf_json(&on).unwrap().layer_kinds,
        [Full, Full, Sliding, Sliding]
    );
    let c = Config::from_hf_json(&on).unwrap();
    assert!(c.qkv_bias && !c.o_bias && !c.qk_norm && !c.tie_embeddings);
}

#[test]
fn gguf_yarn_and_phi3_longrope_metadata() {
    let meta = gguf(
        "qwen2",
        &[
            ("rope.scaling.type", MetaValue::Str("yarn".into())),
            ("rope.scaling.factor", MetaValue::F64(4.0)),
            (
                "rope.scaling.original_context_length",
                MetaValue::U64(32768),
            ),
            ("rope.scaling.yarn_beta_fast", MetaValue::F64(16.0)),
        ],
    );
    let c = Config::from_metadata(&meta).unwrap();
    assert_eq!(
        c.rope.scaling,
        RopeScaling::Yarn {
            factor: 4.0,
            original_max_positions: 32768.0,
            beta_fast: 16.0,
            beta_slow: 1.0,
            attention_factor: 0.1 * 4f64.ln() + 1.0,
            truncate: true,
        }
    );
    // Phi-3 long-context files: the factors come later from the tensors.
    let meta = gguf(
        "phi3",
        &[
            ("context_length", MetaValue::U64(131072)),
            ("rope.scaling.original_context_length", MetaValue::U64(4096)),
            ("rope.scaling.attn_factor", MetaValue::F64(1.19)),
        ],
    );
    let c = Config::from_metadata(&meta).unwrap();
    assert_eq!(
        c.rope.scaling,
        RopeScaling::LongRope {
            short: vec![],
            long: vec![],
            original_max_positions: 4096,
            attention_factor: 1.19,
        }
    );
}

#[test]
fn a_checkpoint_directory_is_read_through_its_config_json() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/decoder");
    // The values written in tests/fixtures/decoder/llama/config.json.
    let c = Config::from_hf_dir(&dir.join("llama")).unwrap();
    assert_eq!(c.family, Family::Llama);
    assert_eq!(
        [c.vocab_size, c.hidden_size, c.intermediate_size, c.n_layers],
        [256, 64, 96, 2]
    );
    assert_eq!([c.n_heads, c.n_kv_heads, c.head_dim], [4, 2, 16]);
    // A directory without one: an error naming the file.
    let err = Config::from_hf_dir(&dir).unwrap_err().to_string();
    assert!(
        err.contains("decoder/config.json") && err.contains("cannot read"),
        "{err}"
    );
}
