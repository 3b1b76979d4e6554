//! Exact parity with Hugging Face `tokenizers` on the committed fixtures written by
//! `scripts/fixtures/llm_tokenizers.py`: ids with and without special tokens, and the
//! decoded text with and without skipping special tokens, for every sample, and the ids
//! of text pairs joined by the pair template.

#[path = "support/json.rs"]
mod json;
use json::ids;

use std::path::PathBuf;

use rml_llm::tokenizer::Tokenizer;
use serde_json::Value;

fn fixture_dir(name: &str) -> PathBuf {
    // The Precompiled-normalizer tokenizer has its own script and folder.
    let folder = if name == "unigram_precompiled" {
        "tokenizers_precompiled"
    } else {
        "tokenizers"
    };
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(folder)
}

/// Checks every case of one fixture; returns (cases, failures as messages).
fn check(name: &str) -> (usize, Vec<String>) {
    let dir = fixture_dir(name);
    let tok = Tokenizer::from_file(dir.join(format!("{name}.tokenizer.json"))).unwrap();
    let text = std::fs::read_to_string(dir.join(format!("{name}.expected.json"))).unwrap();
    let expected: Value = serde_json::from_str(&text).unwrap();
    let cases = expected["cases"].as_array().unwrap();
    let mut failures = Vec::new();
    for pair in expected["pairs"].as_array().unwrap() {
        let (a, b) = (pair["a"].as_str().unwrap(), pair["b"].as_str().unwrap());
        let got = tok.encode_pair(a, b, true).unwrap();
        if got != ids(&pair["ids"]) {
            failures.push(format!(
                "{name}: pair {a:?} + {b:?}\n  want {:?}\n  got  {got:?}",
                ids(&pair["ids"])
            ));
        }
    }
    for case in cases {
        let input = case["text"].as_str().unwrap();
        let want = ids(&case["ids"]);
        let got = tok.encode(input, true).unwrap();
        if got != want {
            failures.push(format!(
                "{name}: ids of {input:?}\n  want {want:?}\n  got  {got:?}"
            ));
        }
        let want_plain = ids(&case["ids_plain"]);
        let got_plain = tok.encode(input, false).unwrap();
        if got_plain != want_plain {
            failures.push(format!(
                "{name}: ids_plain of {input:?}\n  want {want_plain:?}\n  got  {got_plain:?}"
            ));
        }
        for (key, skip) in [("decoded", false), ("decoded_skip", true)] {
            let want = case[key].as_str().unwrap();
            let got = tok.decode(&ids(&case["ids"]), skip);
            if got != want {
                failures.push(format!(
                    "{name}: {key} of {input:?}\n  want {want:?}\n  got  {got:?}"
                ));
            }
            // Streaming gives the same text as one-shot decoding.
            let mut stream = tok.decode_stream(skip);
            let mut streamed = String::new();
            for id in ids(&case["ids"]) {
                if let Some(t) = stream.step(id) {
                    streamed.push_str(&t);
                }
            }
            if let Some(t) = stream.finish() {
                streamed.push_str(&t);
            }
            if streamed != got {
                failures.push(format!(
                    "{name}: streamed {key} of {input:?}\n  want {got:?}\n  got  {streamed:?}"
                ));
            }
        }
    }
    (cases.len(), failures)
}

fn assert_fixture(name: &str) {
    let (n, failures) = check(name);
    assert!(n > 40, "{name}: only {n} cases");
    assert!(
        failures.is_empty(),
        "{name}: {} mismatches over {n} cases\n{}",
        failures.len(),
        failures
            .iter()
            .take(8)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn bpe_llama3() {
    assert_fixture("bpe_llama3");
}

#[test]
fn bpe_qwen2() {
    assert_fixture("bpe_qwen2");
}

#[test]
fn bpe_gpt2() {
    assert_fixture("bpe_gpt2");
}

#[test]
fn bpe_spm() {
    assert_fixture("bpe_spm");
}

#[test]
fn bpe_metaspace() {
    assert_fixture("bpe_metaspace");
}

#[test]
fn wordpiece_bert() {
    assert_fixture("wordpiece_bert");
}

#[test]
fn unigram() {
    assert_fixture("unigram");
}

#[test]
fn unigram_precompiled() {
    assert_fixture("unigram_precompiled");
}

#[test]
fn unigram_bytes() {
    assert_fixture("unigram_bytes");
}

#[test]
fn wordlevel_misc() {
    assert_fixture("wordlevel_misc");
}

#[test]
fn bpe_suffix() {
    assert_fixture("bpe_suffix");
}

#[test]
fn split_variants() {
    assert_fixture("split_variants");
}
