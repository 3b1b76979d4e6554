//! GGUF vocabularies tokenize exactly as llama.cpp does.
//!
//! `scripts/fixtures/llm_gguf_vocabs.py` converts the locally trained tokenizers (byte-level
//! BPE with the Llama 3, Qwen2 and GPT-2 pre-tokenizers, SentencePiece BPE, WordPiece) into
//! vocabulary-only GGUF files the way llama.cpp's converter does, and records the ids and
//! text llama.cpp itself (through `llama-cpp-python`) produces for the hard corpus. rml reads
//! only the GGUF file and must give the same ids for every text: with BOS, without, and with
//! special tokens left unparsed, and the same detokenized text.

use std::path::{Path, PathBuf};

use rml_llm::tokenizer::{EncodeOptions, Tokenizer};
use serde_json::Value;

const VOCABS: &[&str] = &[
    "bpe_llama3",
    "bpe_qwen2",
    "bpe_gpt2",
    "bpe_spm",
    "wordpiece_bert",
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf_vocabs")
}

fn ids(case: &Value, key: &str) -> Vec<u32> {
    case[key]
        .as_array()
        .unwrap_or_else(|| panic!("fixture case lacks {key}"))
        .iter()
        .map(|v| v.as_u64().expect("id") as u32)
        .collect()
}

/// Compares every case of one vocabulary; returns (cases, mismatch descriptions).
fn check(name: &str) -> (usize, Vec<String>) {
    let dir = fixtures();
    let tok = Tokenizer::from_gguf_file(dir.join(format!("{name}.gguf")))
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let text = std::fs::read_to_string(dir.join(format!("{name}.llamacpp.json"))).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    let mut bad = Vec::new();
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let runs = [
            ("ids", true, true),
            ("ids_plain", false, true),
            ("ids_unparsed", false, false),
        ];
        for (key, add_special_tokens, parse_special) in runs {
            let options = EncodeOptions {
                add_special_tokens,
                parse_special,
            };
            let got = tok.encode_with(text, options).unwrap();
            let want = ids(case, key);
            if got != want {
                bad.push(format!(
                    "{name} {key} {text:?}\n  want {want:?}\n  got  {got:?}"
                ));
            }
        }
        let decoded = tok.decode(&ids(case, "ids_plain"), false);
        let want = case["decoded"].as_str().unwrap();
        if decoded != want {
            bad.push(format!(
                "{name} decode {text:?}\n  want {want:?}\n  got  {decoded:?}"
            ));
        }
    }
    (cases.len(), bad)
}

#[test]
fn gguf_vocabularies_match_llama_cpp() {
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for name in VOCABS {
        let (n, bad) = check(name);
        report.push(format!("{name}: {}/{n} texts", n - bad.len().min(n)));
        failures.extend(bad);
    }
    eprintln!("llama.cpp parity: {}", report.join(", "));
    assert!(
        failures.is_empty(),
        "{}\n{}",
        failures.len(),
        failures.join("\n")
    );
}
