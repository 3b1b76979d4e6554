//! The bundled default model (`models/default`, written by
//! `scripts/train_default_model.py`) is a well-formed llama-architecture GGUF with a
//! byte-level BPE vocabulary and a chat template, small enough to ship.

use std::path::PathBuf;

use rml_host::formats::gguf::{GgufFile, Value};

fn models() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/default")
}

fn int(g: &GgufFile, key: &str) -> i128 {
    g.get(key)
        .and_then(|v| v.as_integer())
        .unwrap_or_else(|| panic!("{key}"))
}

fn string<'a>(g: &'a GgufFile, key: &str) -> &'a str {
    match g.get(key) {
        Some(Value::String(s)) => s,
        other => panic!("{key}: {other:?}"),
    }
}

#[test]
fn default_model_gguf_is_a_tiny_llama() {
    let path = models().join("rml-tiny-llama.gguf");
    let g = GgufFile::open(&path).unwrap();
    assert_eq!(string(&g, "general.architecture"), "llama");
    assert_eq!(string(&g, "tokenizer.ggml.model"), "gpt2");
    assert_eq!(string(&g, "tokenizer.ggml.pre"), "gpt-2");
    assert!(string(&g, "tokenizer.chat_template").contains("<|im_start|>"));
    let (embd, layers, heads, kv) = (
        int(&g, "llama.embedding_length") as u64,
        int(&g, "llama.block_count"),
        int(&g, "llama.attention.head_count") as u64,
        int(&g, "llama.attention.head_count_kv") as u64,
    );
    let vocab = int(&g, "llama.vocab_size") as u64;
    assert!(kv < heads, "grouped-query attention");
    match g.get("tokenizer.ggml.tokens") {
        Some(Value::Array(a)) => assert_eq!(a.len(), vocab),
        other => panic!("tokens: {other:?}"),
    }
    assert_eq!(int(&g, "tokenizer.ggml.bos_token_id"), 0);
    assert_eq!(
        g.tensor("token_embd.weight").unwrap().info.dims(),
        &[embd, vocab]
    );
    assert_eq!(
        g.tensor("output.weight").unwrap().info.dims(),
        &[embd, vocab]
    );
    let head_dim = embd / heads;
    for i in 0..layers {
        let t = |n: &str| g.tensor(&format!("blk.{i}.{n}.weight")).unwrap();
        assert_eq!(t("attn_q").info.dims(), &[embd, embd]);
        assert_eq!(t("attn_k").info.dims(), &[embd, kv * head_dim]);
        assert_eq!(t("attn_v").info.dims(), &[embd, kv * head_dim]);
        assert_eq!(t("attn_norm").info.dims(), &[embd]);
        assert_eq!(t("ffn_norm").info.dims(), &[embd]);
        for n in ["attn_output", "ffn_gate", "ffn_up", "ffn_down"] {
            assert_eq!(t(n).info.dims().len(), 2);
        }
    }
    assert_eq!(g.tensors().count() as i128, 3 + 9 * layers);
}

#[test]
fn default_model_files_stay_small() {
    let mut total = 0;
    for name in [
        "rml-tiny-llama.gguf",
        "hf/config.json",
        "hf/generation_config.json",
        "hf/model.safetensors",
        "hf/tokenizer.json",
        "hf/tokenizer_config.json",
    ] {
        total += std::fs::metadata(models().join(name)).unwrap().len();
    }
    assert!(total < 6 << 20, "{total} bytes");
}
