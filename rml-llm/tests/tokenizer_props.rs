//! Property and error-path tests of the tokenizer: byte-level round trips, no panics on
//! any input, clear load errors, GGUF vocabularies.

use std::path::PathBuf;

use proptest::prelude::*;
use rml_llm::tokenizer::gguf::{GgufVocab, TOKEN_BYTE, TOKEN_CONTROL, TOKEN_NORMAL};
use rml_llm::tokenizer::{EncodeOptions, Tokenizer};

fn load(name: &str) -> Tokenizer {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizers");
    Tokenizer::from_file(dir.join(format!("{name}.tokenizer.json"))).unwrap()
}

fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        proptest::collection::vec(
            prop_oneof![
                Just(" ".to_string()),
                Just("\n".to_string()),
                Just("\t".to_string()),
                Just("'s".to_string()),
                Just("123456".to_string()),
                Just("é".to_string()),
                Just("e\u{301}".to_string()),
                Just("👨‍👩‍👧".to_string()),
                Just("漢字".to_string()),
                Just("<|eot_id|>".to_string()),
                Just("<s>".to_string()),
                "[a-zA-Z]{1,8}",
            ],
            0..20
        )
        .prop_map(|v| v.concat()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn byte_level_round_trips(s in any_text()) {
        for name in ["bpe_llama3", "bpe_gpt2"] {
            let tok = load(name);
            let ids = tok
                .encode_with(&s, EncodeOptions { add_special_tokens: false, parse_special: false })
                .unwrap();
            prop_assert_eq!(tok.decode(&ids, false), s.clone(), "{}", name);
        }
    }

    #[test]
    fn no_input_panics(s in any_text()) {
        for name in ["bpe_qwen2", "bpe_spm", "bpe_metaspace", "wordpiece_bert", "unigram"] {
            let tok = load(name);
            let ids = tok.encode(&s, true).unwrap();
            let text = tok.decode(&ids, true);
            let mut stream = tok.decode_stream(true);
            let mut streamed = String::new();
            for id in &ids {
                streamed.extend(stream.step(*id));
            }
            streamed.extend(stream.finish());
            prop_assert_eq!(streamed, text, "{}", name);
        }
    }

    #[test]
    fn corrupt_files_never_panic(pos in 0usize..4000, len in 0usize..6, with in "[\\[\\]{}\",:0-9a-z ]{0,6}") {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizers");
        let text = std::fs::read_to_string(dir.join("wordpiece_bert.tokenizer.json")).unwrap();
        let mut bytes = text.into_bytes();
        let at = pos.min(bytes.len());
        let end = (at + len).min(bytes.len());
        bytes.splice(at..end, with.bytes());
        if let Ok(t) = String::from_utf8(bytes)
            && let Ok(tok) = Tokenizer::from_json_str(&t)
        {
            let ids = tok.encode("Hello, wörld! [SEP] 123", true).unwrap_or_default();
            let _ = tok.decode(&ids, true);
        }
    }

    #[test]
    fn hand_matchers_equal_fancy_regex(
        s in proptest::collection::vec(
            prop_oneof![
                Just(' '), Just('\n'), Just('\r'), Just('\t'), Just('\''), Just('s'), Just('L'),
                Just('é'), Just('\u{301}'), Just('7'), Just('½'), Just('!'), Just('.'), Just('漢'),
                Just('😀'), Just('\u{a0}'), Just('\u{2003}'), Just('_'), Just('R'), Just('e'),
            ],
            0..24,
        ).prop_map(|v| v.into_iter().collect::<String>())
    ) {
        use rml_llm::tokenizer::pattern::{GPT2_PATTERN, LLAMA3_PATTERN, Pattern, QWEN2_PATTERN, QWEN35_PATTERN};
        for source in [GPT2_PATTERN, LLAMA3_PATTERN, QWEN2_PATTERN, QWEN35_PATTERN] {
            let hand = Pattern::regex(source).unwrap();
            let fancy = Pattern::fancy(source).unwrap();
            prop_assert_eq!(hand.find_all(&s), fancy.find_all(&s), "{} on {:?}", source, s);
        }
    }

    #[test]
    fn decode_never_panics(ids in proptest::collection::vec(0u32..1300, 0..40)) {
        let tok = load("bpe_spm");
        let _ = tok.decode(&ids, false);
        let mut stream = tok.decode_stream(false);
        for id in ids {
            let _ = stream.step(id);
        }
        let _ = stream.finish();
    }
}

#[test]
fn spm_byte_fallback_round_trips_rare_characters() {
    let tok = load("bpe_spm");
    let s = "x 😀 漢 ∮";
    let ids = tok.encode(s, false).unwrap();
    assert!(
        ids.iter()
            .any(|&i| tok.id_to_token(i).is_some_and(|t| t.starts_with("<0x")))
    );
    assert_eq!(tok.decode(&ids, false), s);
}

#[test]
fn stream_waits_for_complete_characters() {
    let tok = load("bpe_spm");
    let ids = tok.encode("😀", false).unwrap();
    let mut stream = tok.decode_stream(false);
    let out: Vec<Option<String>> = ids.iter().map(|&i| stream.step(i)).collect();
    let emitted: Vec<&String> = out.iter().flatten().collect();
    assert_eq!(emitted.len(), 1, "{out:?}");
    assert_eq!(emitted[0], "😀");
}

fn error_of(json: &str) -> String {
    Tokenizer::from_json_str(json).unwrap_err().to_string()
}

#[test]
fn load_errors_name_the_field() {
    assert!(error_of("{").contains("not valid JSON"));
    assert!(error_of("{}").contains("model: missing"));
    let bad_merge = r#"{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}}"#;
    assert!(
        error_of(bad_merge).contains("model.merges[0]"),
        "{}",
        error_of(bad_merge)
    );
    let bad_unk =
        r#"{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "unk_token": "<unk>"}}"#;
    assert!(error_of(bad_unk).contains("unk_token"));
    let no_bytes =
        r#"{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "byte_fallback": true}}"#;
    assert!(error_of(no_bytes).contains("<0x00>"));
    let far = r#"{"model": {"type": "BPE", "vocab": {"a": 0, "b": 4000000000}, "merges": []}}"#;
    assert!(error_of(far).contains("far beyond"), "{}", error_of(far));
    let dup = r#"{"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}}"#;
    assert!(error_of(dup).contains("id 0 is used by both"));
    let bad_post = r#"{"model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"},
        "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 7], "cls": ["[CLS]", 8]}}"#;
    assert!(error_of(bad_post).contains("post_processor"));
    let bad_regex = r#"{"model": {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"},
        "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "("}, "behavior": "Isolated"}}"#;
    assert!(error_of(bad_regex).contains("pre_tokenizer.pattern"));
    let unknown = r#"{"model": {"type": "Nope"}}"#;
    assert!(error_of(unknown).contains("Nope"));
    let missing = Tokenizer::from_file("/nonexistent/tokenizer.json")
        .unwrap_err()
        .to_string();
    assert!(missing.contains("/nonexistent/tokenizer.json"));
}

#[test]
fn untrusted_text_keeps_special_tokens_as_text() {
    let tok = load("bpe_llama3");
    let eot = tok.token_to_id("<|eot_id|>").unwrap();
    let parsed = tok.encode("a<|eot_id|>", false).unwrap();
    assert!(parsed.contains(&eot));
    let plain = tok
        .encode_with(
            "a<|eot_id|>",
            EncodeOptions {
                add_special_tokens: false,
                parse_special: false,
            },
        )
        .unwrap();
    assert!(!plain.contains(&eot));
    assert_eq!(tok.decode(&plain, false), "a<|eot_id|>");
    assert_eq!(tok.bos_id(), tok.token_to_id("<|begin_of_text|>"));
}

#[test]
fn rendered_prompts_get_one_bos() {
    let tok = load("bpe_llama3");
    let bos = tok.bos_id().unwrap();
    let with = tok.encode_prompt("<|begin_of_text|>hi").unwrap();
    let without = tok.encode_prompt("hi").unwrap();
    assert_eq!(with.iter().filter(|&&i| i == bos).count(), 1);
    assert_eq!(without.iter().filter(|&&i| i == bos).count(), 1);
    assert_eq!(with, without);
}

fn spm_vocab() -> GgufVocab {
    let mut tokens = vec!["<unk>".to_string(), "<s>".to_string(), "</s>".to_string()];
    let mut types = vec![2, TOKEN_CONTROL, TOKEN_CONTROL];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(TOKEN_BYTE);
    }
    for piece in [
        "▁", "h", "e", "l", "o", "w", "r", "d", "he", "ll", "llo", "hello", "▁hello", "▁w", "or",
        "▁wor", "ld", "▁world",
    ] {
        tokens.push(piece.to_string());
        types.push(TOKEN_NORMAL);
    }
    let scores = (0..tokens.len())
        .map(|i| {
            if i < 259 {
                0.0
            } else {
                -(i as f32) / 10.0 + (tokens[i].len() as f32)
            }
        })
        .collect();
    GgufVocab {
        model: "llama".into(),
        tokens,
        scores: Some(scores),
        token_types: Some(types),
        bos_token_id: Some(1),
        eos_token_id: Some(2),
        unknown_token_id: Some(0),
        ..GgufVocab::default()
    }
}

#[test]
fn gguf_spm_vocab() {
    let v = spm_vocab();
    let tok = v.build().unwrap();
    let ids = tok.encode("hello world", true).unwrap();
    let pieces: Vec<&str> = ids.iter().map(|&i| tok.id_to_token(i).unwrap()).collect();
    assert_eq!(pieces, ["<s>", "▁hello", "▁world"]);
    assert_eq!(tok.decode(&ids, true), "hello world");
    // A character outside the vocabulary falls back to bytes and decodes back.
    let ids = tok.encode("hello ß", false).unwrap();
    assert_eq!(tok.decode(&ids, false), "hello ß");
    // Special tokens in text; a space prefix follows them as in llama.cpp.
    let ids = tok.encode("hello</s>world", false).unwrap();
    let pieces: Vec<&str> = ids.iter().map(|&i| tok.id_to_token(i).unwrap()).collect();
    assert_eq!(pieces, ["▁hello", "</s>", "▁world"]);
    let mut no_bos = spm_vocab();
    no_bos.add_bos_token = Some(false);
    assert_eq!(
        no_bos.build().unwrap().encode("hello", true).unwrap().len(),
        1
    );
}

#[test]
fn gguf_errors() {
    let mut v = spm_vocab();
    v.scores = None;
    assert!(v.build().unwrap_err().to_string().contains("scores"));
    let mut v = spm_vocab();
    v.bos_token_id = Some(100_000);
    assert!(v.build().unwrap_err().to_string().contains("bos_token_id"));
    let mut v = spm_vocab();
    v.model = "gpt2".into();
    v.pre = Some("mystery".into());
    v.merges = Some(vec![]);
    assert!(v.build().unwrap_err().to_string().contains("mystery"));
    let mut v = spm_vocab();
    v.model = "rwkv".into();
    assert!(v.build().unwrap_err().to_string().contains("rwkv"));
}

#[test]
fn gguf_gpt2_vocab_matches_tokenizer_json() {
    // The Llama 3 fixture, re-expressed as GGUF metadata, must tokenize identically.
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/tokenizers/bpe_llama3.tokenizer.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let vocab = json["model"]["vocab"].as_object().unwrap();
    let mut tokens = vec![String::new(); vocab.len()];
    for (t, id) in vocab {
        tokens[id.as_u64().unwrap() as usize] = t.clone();
    }
    let types = (0..tokens.len())
        .map(|i| if i < 3 { TOKEN_CONTROL } else { TOKEN_NORMAL })
        .collect();
    let merges = json["model"]["merges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| format!("{} {}", m[0].as_str().unwrap(), m[1].as_str().unwrap()))
        .collect();
    let v = GgufVocab {
        model: "gpt2".into(),
        pre: Some("llama-bpe".into()),
        tokens,
        token_types: Some(types),
        merges: Some(merges),
        bos_token_id: Some(0),
        eos_token_id: Some(1),
        ..GgufVocab::default()
    };
    let from_gguf = v.build().unwrap();
    let reference = load("bpe_llama3");
    for s in [
        "Hello world! 12345 ",
        "<|begin_of_text|>x<|eot_id|>",
        "  tabs\t\tand\n\nlines",
        "日本語 😀",
    ] {
        assert_eq!(
            from_gguf.encode(s, true).unwrap(),
            reference.encode(s, true).unwrap(),
            "{s:?}"
        );
        let ids = reference.encode(s, true).unwrap();
        assert_eq!(from_gguf.decode(&ids, false), reference.decode(&ids, false));
    }
}

#[test]
fn gguf_file_through_the_reader() {
    use rml_host::formats::gguf::{GgufWriter, OwnedValue};
    let v = spm_vocab();
    let mut w = GgufWriter::new();
    w.add_kv("general.architecture", "llama").unwrap();
    w.add_kv("tokenizer.ggml.model", "llama").unwrap();
    w.add_kv(
        "tokenizer.ggml.tokens",
        OwnedValue::strings(v.tokens.clone()),
    )
    .unwrap();
    w.add_kv(
        "tokenizer.ggml.scores",
        OwnedValue::array(v.scores.clone().unwrap()),
    )
    .unwrap();
    w.add_kv(
        "tokenizer.ggml.token_type",
        OwnedValue::array(v.token_types.clone().unwrap()),
    )
    .unwrap();
    w.add_kv("tokenizer.ggml.bos_token_id", 1u32).unwrap();
    w.add_kv("tokenizer.ggml.eos_token_id", 2u32).unwrap();
    w.add_kv("tokenizer.ggml.unknown_token_id", 0u32).unwrap();
    w.add_kv("tokenizer.ggml.add_bos_token", true).unwrap();
    w.add_kv(
        "tokenizer.chat_template",
        "{{ bos_token }}{{ messages[0].content }}",
    )
    .unwrap();
    let path = std::env::temp_dir().join(format!("rml-tok-{}.gguf", std::process::id()));
    w.write_file(&path).unwrap();
    let tok = Tokenizer::from_gguf_file(&path);
    let g = rml_host::formats::gguf::Gguf::open(&path).unwrap();
    let read = GgufVocab::from_gguf(&g).unwrap();
    assert_eq!(
        read.chat_template.as_deref(),
        Some("{{ bos_token }}{{ messages[0].content }}")
    );
    assert_eq!(read.tokens, v.tokens);
    drop(g);
    let _ = std::fs::remove_file(&path);
    let tok = tok.unwrap();
    let direct = v.build().unwrap();
    for s in ["hello world", "wor ld</s> hello", ""] {
        assert_eq!(
            tok.encode(s, true).unwrap(),
            direct.encode(s, true).unwrap()
        );
    }
    let missing = Tokenizer::from_gguf_file("/nonexistent/model.gguf")
        .unwrap_err()
        .to_string();
    assert!(missing.contains("nonexistent"), "{missing}");
}

#[test]
fn gguf_bert_vocab() {
    let tokens: Vec<String> = [
        "[PAD]", "[UNK]", "[CLS]", "[SEP]", "▁hello", "▁wor", "ld", "▁,", "▁!", "▁漢",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let v = GgufVocab {
        model: "bert".into(),
        pre: Some("bert-bge".into()),
        tokens,
        unknown_token_id: Some(1),
        cls_token_id: Some(2),
        separator_token_id: Some(3),
        ..GgufVocab::default()
    };
    let tok = v.build().unwrap();
    let ids = tok.encode("Hello, WÖRLD!漢 xyz", true).unwrap();
    assert_eq!(ids, [2, 4, 7, 5, 6, 8, 9, 1, 3]);
    // llama.cpp keeps the first word's phantom space and cleans up punctuation spaces.
    assert_eq!(
        tok.decode(&ids[1..ids.len() - 1], false),
        " hello, world! 漢[UNK]"
    );
    assert_eq!(
        tok.decode_pieces(&ids[1..ids.len() - 1], false),
        " hello , world ! 漢[UNK]"
    );
}

#[test]
fn byte_level_prefix_space_applies_after_special_tokens() {
    // Expected pieces recorded from `tokenizers` 0.23.3 with the same file and
    // `add_prefix_space: true`.
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizers");
    let mut json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("bpe_gpt2.tokenizer.json")).unwrap(),
    )
    .unwrap();
    json["pre_tokenizer"]["add_prefix_space"] = serde_json::Value::Bool(true);
    let tok = Tokenizer::from_json_str(&json.to_string()).unwrap();
    let cases: [(&str, &[&str]); 4] = [
        ("a<|endoftext|>b", &["Ġa", "<|endoftext|>", "Ġb"]),
        ("hello world", &["Ġ", "h", "el", "lo", "Ġw", "or", "l", "d"]),
        (" x", &["Ġ", "x"]),
        ("<|endoftext|> y", &["<|endoftext|>", "Ġ", "y"]),
    ];
    for (text, want) in cases {
        let ids = tok.encode(text, false).unwrap();
        let got: Vec<&str> = ids.iter().map(|&i| tok.id_to_token(i).unwrap()).collect();
        assert_eq!(got, want, "{text:?}");
    }
}

#[test]
fn tokenizers_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Tokenizer>();
    check::<rml_llm::chat::ChatTemplate>();
}
