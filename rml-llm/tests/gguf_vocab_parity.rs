//! Parity with the reference tokenizations llama.cpp ships next to its vocabulary-only
//! GGUF files (`models/ggml-vocab-NAME.gguf` with `.gguf.inp` / `.gguf.out`, produced
//! from Hugging Face `tokenizers`). The files are several MB each and not committed: set
//! `RML_GGUF_VOCAB_DIR` to a folder holding them (e.g. `llama.cpp/models`) to run the
//! comparison; without it the test checks only the parser of the `.inp`/`.out` layout.

use std::path::Path;

use rml_llm::tokenizer::{EncodeOptions, Tokenizer};

/// The vocabularies whose `pre`/model rml supports.
const VOCABS: &[&str] = &[
    "llama-spm",
    "phi-3",
    "llama-bpe",
    "qwen2",
    "gpt-2",
    "mpt",
    "starcoder",
    "refact",
    "bert-bge",
    "command-r",
    "falcon",
    "deepseek-coder",
    "deepseek-llm",
    "qwen35",
];

/// Splits the `.inp` (texts separated by `__ggml_vocab_test__` lines) and `.out` (one
/// line of space-separated ids per text) files into pairs.
fn parse(inp: &str, out: &str) -> Vec<(String, Vec<u32>)> {
    let texts: Vec<&str> = inp.split("\n__ggml_vocab_test__\n").collect();
    let lines: Vec<&str> = out.lines().collect();
    texts
        .iter()
        .zip(lines)
        .map(|(t, l)| {
            (
                t.to_string(),
                l.split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect(),
            )
        })
        .collect()
}

fn check(dir: &Path, name: &str) -> (usize, usize, Vec<String>) {
    let base = dir.join(format!("ggml-vocab-{name}.gguf"));
    let tok = Tokenizer::from_gguf_file(&base).unwrap();
    let inp = std::fs::read_to_string(base.with_extension("gguf.inp")).unwrap();
    let out = std::fs::read_to_string(base.with_extension("gguf.out")).unwrap();
    let cases = parse(&inp, &out);
    let mut bad = Vec::new();
    for (text, want) in &cases {
        let got = tok
            .encode_with(
                text,
                EncodeOptions {
                    add_special_tokens: false,
                    parse_special: true,
                },
            )
            .unwrap();
        if &got != want {
            bad.push(format!("{name}: {text:?}\n  want {want:?}\n  got  {got:?}"));
        }
        // Streaming gives the one-shot decoding.
        let mut stream = tok.decode_stream(false);
        let mut streamed: String = got.iter().filter_map(|&id| stream.step(id)).collect();
        streamed.extend(stream.finish());
        if streamed != tok.decode_pieces(&got, false) {
            bad.push(format!(
                "{name}: streamed decode of {text:?} gives {streamed:?}"
            ));
        }
        // Byte-level vocabularies decode back to the exact text.
        let byte_level = !name.contains("spm") && name != "phi-3" && name != "bert-bge";
        if byte_level && tok.decode_pieces(&got, false) != *text {
            bad.push(format!(
                "{name}: decode of {text:?} gives {:?}",
                tok.decode_pieces(&got, false)
            ));
        }
    }
    (cases.len(), cases.len() - bad.len(), bad)
}

#[test]
fn layout_parser() {
    let cases = parse(
        "a\n__ggml_vocab_test__\n\n\n__ggml_vocab_test__\nb",
        " 1 2\n\n 3\n",
    );
    assert_eq!(
        cases,
        vec![
            ("a".into(), vec![1, 2]),
            ("\n".into(), vec![]),
            ("b".into(), vec![3])
        ]
    );
}

#[test]
fn llama_cpp_reference_tokenizations() {
    let Ok(dir) = std::env::var("RML_GGUF_VOCAB_DIR") else {
        eprintln!("RML_GGUF_VOCAB_DIR not set: GGUF vocabulary parity not checked");
        return;
    };
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for name in VOCABS {
        let (n, ok, bad) = check(Path::new(&dir), name);
        report.push(format!("{name}: {ok}/{n}"));
        failures.extend(bad);
    }
    eprintln!("GGUF vocab parity: {}", report.join(", "));
    assert!(
        failures.is_empty(),
        "{}\n{}",
        report.join(", "),
        failures.join("\n")
    );
}
