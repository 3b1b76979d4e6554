//! `rml-llm quantize` from Hugging Face safetensors directories: each tiny
//! random-weight family fixture (`scripts/fixtures/decoder.py`, `decoder_rope.py`)
//! converted to F32 and Q8_0 GGUF must give `transformers`' reference logits through
//! rml's GGUF loader; tokenizers converted to `tokenizer.ggml.*` metadata must encode
//! like Hugging Face `tokenizers` (`scripts/fixtures/llm_tokenizers.py`); the bundled
//! model's HF directory, converted by the real binary, must greedy-decode the
//! `transformers` tokens (`scripts/fixtures/generate.py`).

#[path = "support/json.rs"]
mod json;
use json::ids;

#[path = "support/cli.rs"]
mod cli;
use cli::*;

use std::path::{Path, PathBuf};

use rml_core::DType;
use rml_host::formats::gguf::{Gguf, GgufWriter};
use rml_host::formats::safetensors::SafeTensors;
use rml_llm::Model;
use rml_llm::convert::vocab::vocab_metadata;
use rml_llm::quantize::{QuantizeOptions, quantize_model};
use rml_llm::tokenizer::Tokenizer;
use rml_llm::tokenizer::gguf::GgufVocab;
use serde_json::Value;

/// The float bound of `tests/decoder.rs` (F32 files are the same numbers).
const REL_TOL: f32 = 1e-4;
/// Q8_0 rounds every weight to 8 bits per 32-block scale; on these tiny random
/// models the error reaches 5.3e-2 (Gemma 2, whose tied embedding is also quantized).
const Q8_0_REL_TOL: f32 = 1e-1;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// `(tokens, logits)` of each reference prompt of a decoder fixture.
fn prompts(dir: &Path) -> Vec<(Vec<u32>, Vec<f32>)> {
    let st = SafeTensors::open(dir.join("reference.safetensors")).unwrap();
    (0..)
        .map_while(|p| {
            let tokens = st.get(&format!("tokens.{p}")).ok()?;
            let logits = st.get(&format!("logits.{p}")).unwrap();
            let tokens = tokens.to_vec::<i64>().unwrap();
            Some((
                tokens.into_iter().map(|t| t as u32).collect(),
                logits.to_vec::<f32>().unwrap(),
            ))
        })
        .collect()
}

fn rel_err(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    let diff = got
        .iter()
        .zip(want)
        .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    diff / scale
}

/// Converts the fixture `name` to `ty` and returns the worst relative error of the
/// GGUF model over the reference prompts (prefill, then token by token).
fn convert_and_check(name: &str, ty: DType) -> f32 {
    let dir = fixtures().join("decoder").join(name);
    let out = temp_dir("convert-hf", &format!("{name}-{}", ty.name())).join("model.gguf");
    let opts = QuantizeOptions {
        ty,
        mix: None,
        token_embedding_type: None,
        output_type: None,
    };
    quantize_model(&dir, &out, &opts, |_, _| {}).unwrap();
    let model = Model::open(&out).unwrap();
    let mut worst = 0f32;
    for (tokens, want) in prompts(&dir) {
        // A cache the prompt's size, so LongRoPE picks its factors as transformers does.
        let mut cache = model.new_cache(tokens.len());
        worst = worst.max(rel_err(&model.forward(&tokens, &mut cache).unwrap(), &want));
        cache.clear();
        let mut stepped = model.forward(&tokens[..1], &mut cache).unwrap();
        for &t in &tokens[1..] {
            stepped.extend(model.forward(&[t], &mut cache).unwrap());
        }
        worst = worst.max(rel_err(&stepped, &want));
    }
    std::fs::remove_file(&out).unwrap();
    eprintln!("{name} {}: max relative error {worst:e}", ty.name());
    worst
}

macro_rules! family_tests {
    ($($test:ident => $dir:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                let err = convert_and_check($dir, DType::F32);
                assert!(err <= REL_TOL, "{}: F32 GGUF relative error {err}", $dir);
                let err = convert_and_check($dir, DType::Q8_0);
                assert!(err <= Q8_0_REL_TOL, "{}: Q8_0 GGUF relative error {err}", $dir);
                assert!(err > 0.0, "Q8_0 weights cannot be exact");
            }
        )*
    };
}

family_tests! {
    llama_llama3_rope_to_gguf_matches_transformers => "llama",
    llama_yarn_to_gguf_matches_transformers => "llama_yarn",
    mistral_to_gguf_matches_transformers => "mistral",
    mixtral_to_gguf_matches_transformers => "mixtral",
    qwen2_to_gguf_matches_transformers => "qwen2",
    qwen3_to_gguf_matches_transformers => "qwen3",
    gemma2_to_gguf_matches_transformers => "gemma2",
    gemma3_to_gguf_matches_transformers => "gemma3",
    phi3_to_gguf_matches_transformers => "phi3",
    phi3_longrope_to_gguf_matches_transformers => "phi3_longrope",
}

/// The tokenizer that rml reads back from the GGUF metadata converted from
/// `dir/tokenizer.json`.
fn converted_tokenizer(dir: &Path, vocab_size: usize) -> Tokenizer {
    let keys = vocab_metadata(dir, vocab_size).unwrap().unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in keys {
        w.add_kv(&k, v).unwrap();
    }
    let g = Gguf::parse(w.to_bytes().unwrap()).unwrap();
    GgufVocab::from_gguf(&g).unwrap().build().unwrap()
}

#[test]
fn converted_tokenizers_encode_like_hugging_face() {
    for name in ["bpe_gpt2", "bpe_llama3", "bpe_qwen2", "bpe_spm"] {
        let dir = temp_dir("convert-hf", name);
        let src = fixtures().join("tokenizers");
        std::fs::copy(
            src.join(format!("{name}.tokenizer.json")),
            dir.join("tokenizer.json"),
        )
        .unwrap();
        let original = Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
        let tok = converted_tokenizer(&dir, original.vocab_size());
        let text = std::fs::read_to_string(src.join(format!("{name}.expected.json"))).unwrap();
        let expected: Value = serde_json::from_str(&text).unwrap();
        let (mut checked, mut skipped) = (0, 0);
        for case in expected["cases"].as_array().unwrap() {
            let input = case["text"].as_str().unwrap();
            // llama.cpp's rules around special tokens differ from Hugging Face's
            // (a space prefix after each one for SentencePiece); plain text only.
            if original
                .added_tokens()
                .iter()
                .any(|a| input.contains(a.content.as_str()))
            {
                skipped += 1;
                continue;
            }
            // GGUF has no normalizer: Qwen2's NFC step is lost (as in llama.cpp), so
            // text with combining marks is not compared.
            if name == "bpe_qwen2" && input.chars().any(|c| ('\u{300}'..='\u{36f}').contains(&c)) {
                skipped += 1;
                continue;
            }
            let want = ids(&case["ids_plain"]);
            let got = tok.encode(input, false).unwrap();
            assert_eq!(got, want, "{name}: ids of {input:?}");
            checked += 1;
        }
        assert!(checked >= 10, "{name}: only {checked} cases checked");
        eprintln!("{name}: {checked} cases equal, {skipped} skipped (special tokens, NFC)");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn unsupported_tokenizers_are_refused_by_name() {
    let dir = temp_dir("convert-hf", "unigram");
    std::fs::copy(
        fixtures().join("tokenizers/unigram.tokenizer.json"),
        dir.join("tokenizer.json"),
    )
    .unwrap();
    let err = vocab_metadata(&dir, 100_000).unwrap_err().to_string();
    assert!(err.contains("Unigram"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_bundled_hf_directory_converts_through_the_binary_and_decodes_like_transformers() {
    let hf = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/default/hf");
    let out = temp_dir("convert-hf", "bundled").join("tiny-f32.gguf");
    let (ok, stderr) = quantize(&hf, &out, "f32");
    assert!(ok, "{stderr}");
    assert!(stderr.contains("tensors converted"), "{stderr}");
    let model = Model::open(&out).unwrap();
    let tok = Tokenizer::from_gguf_file(&out).unwrap();
    let original = Tokenizer::from_file(hf.join("tokenizer.json")).unwrap();
    let g = Gguf::parse(std::fs::read(&out).unwrap()).unwrap();
    assert!(g.contains_key("tokenizer.chat_template"));
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("generate/generate.json")).unwrap(),
    )
    .unwrap();
    let steps = doc["steps"].as_u64().unwrap() as usize;
    for case in doc["cases"].as_array().unwrap() {
        let text = case["prompt"].as_str().unwrap();
        let prompt = ids(&case["prompt_ids"]);
        assert_eq!(tok.encode(text, false).unwrap(), prompt, "{text:?}");
        assert_eq!(original.encode(text, false).unwrap(), prompt, "{text:?}");
        // Greedy continuation through the KV cache.
        let mut cache = model.new_cache(256);
        let mut logits = model.forward(&prompt, &mut cache).unwrap();
        let mut got = Vec::new();
        for _ in 0..steps {
            let vocab = model.config().vocab_size;
            let last = &logits[logits.len() - vocab..];
            let next = (0..vocab)
                .max_by(|&a, &b| last[a].total_cmp(&last[b]))
                .unwrap() as u32;
            got.push(next);
            logits = model.forward(&[next], &mut cache).unwrap();
        }
        assert_eq!(got, ids(&case["greedy_ids"]), "{text:?}");
    }
    std::fs::remove_file(&out).unwrap();
}

#[test]
fn qwen3_moe_with_dense_layers_is_refused() {
    // `mlp_only_layers`: GGUF's qwen3moe has experts in every layer.
    let dir = fixtures().join("decoder/qwen3_moe");
    let out = temp_dir("convert-hf", "qwen3-moe").join("out.gguf");
    assert_quantize_refused(&dir, &out, "f32", "MoE layers");
}

#[test]
fn a_config_gguf_cannot_express_is_refused() {
    // Qwen2 sliding only above `max_window_layers`: GGUF has no key for it.
    let dir = temp_dir("convert-hf", "qwen2-window");
    let src = fixtures().join("decoder/qwen2");
    let mut config: Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("config.json")).unwrap()).unwrap();
    config["use_sliding_window"] = Value::Bool(true);
    config["sliding_window"] = 5.into();
    config["max_window_layers"] = 1.into();
    std::fs::write(dir.join("config.json"), config.to_string()).unwrap();
    std::fs::copy(src.join("model.safetensors"), dir.join("model.safetensors")).unwrap();
    let out = dir.join("out.gguf");
    assert_quantize_refused(&dir, &out, "q8_0", "sliding window");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs `rml-llm quantize INPUT OUT TY`: (success, stderr).
fn quantize(input: &Path, out: &Path, ty: &str) -> (bool, String) {
    let (ok, _, stderr) = run(&[
        "quantize",
        input.to_str().unwrap(),
        out.to_str().unwrap(),
        ty,
    ]);
    (ok, stderr)
}

/// `rml-llm quantize INPUT OUT TY` fails with one error line mentioning `mentions`.
fn assert_quantize_refused(input: &Path, out: &Path, ty: &str, mentions: &str) {
    let (ok, stderr) = quantize(input, out, ty);
    assert_one_error_line(ok, &stderr, mentions);
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn the_bundled_hf_directory_converts_to_the_gguf_gguf_py_wrote() {
    // `scripts/train_default_model.py` wrote models/default/rml-tiny-llama.gguf from
    // the same weights with gguf-py and its own Q/K permutation: the converted F16 file
    // must have the same tensors (names, dims, matrix bytes) and the same metadata.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/default");
    let out = temp_dir("convert-hf", "bundled-f16").join("tiny-f16.gguf");
    let opts = QuantizeOptions {
        ty: DType::F16,
        mix: None,
        token_embedding_type: None,
        output_type: None,
    };
    quantize_model(&root.join("hf"), &out, &opts, |_, _| {}).unwrap();
    let ours = Gguf::parse(std::fs::read(&out).unwrap()).unwrap();
    let theirs = Gguf::parse(std::fs::read(root.join("rml-tiny-llama.gguf")).unwrap()).unwrap();
    assert_eq!(ours.tensor_count(), theirs.tensor_count());
    for t in theirs.tensors() {
        let name = t.info.name();
        let mine = ours
            .tensor(name)
            .unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(mine.info.dims(), t.info.dims(), "{name}");
        assert_eq!(mine.info.ggml_type(), t.info.ggml_type(), "{name}");
        if t.info.dims().len() == 2 {
            assert!(mine.data == t.data, "{name}: bytes differ");
        } else {
            // Norms: F32 in both, from f16 (HF file) vs f32 (training) values.
            let a = f32s(mine.data);
            let b = f32s(t.data);
            assert!(
                a.iter()
                    .zip(&b)
                    .all(|(x, y)| (x - y).abs() <= 1e-3 * y.abs()),
                "{name}"
            );
        }
    }
    for (key, value) in theirs.metadata() {
        if key == "general.name" || key == "general.file_type" {
            continue;
        }
        let mine = ours.get(key).unwrap_or_else(|| panic!("{key} missing"));
        assert_eq!(
            mine.to_owned_value(),
            value.to_owned_value(),
            "metadata {key}"
        );
    }
    std::fs::remove_file(&out).unwrap();
}

#[test]
fn a_directory_without_config_is_one_error_line() {
    let dir = temp_dir("convert-hf", "empty");
    let out = dir.join("out.gguf");
    assert_quantize_refused(&dir, &out, "q8_0", "config.json");
    std::fs::remove_dir_all(&dir).unwrap();
}
