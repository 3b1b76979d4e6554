//! Fuzzes tokenizer.json loading and the whole encode/decode path: any bytes must load
//! or fail with an error, and a tokenizer that loads must encode any text and decode any
//! ids without panicking or hanging.
//!
//! Input layout: the tokenizer.json bytes, optionally followed by a NUL byte and the text
//! to encode (a fixed multilingual sample when there is no NUL), so the committed
//! fixture files are seeds as they are.

#![no_main]

use libfuzzer_sys::fuzz_target;
use rml_llm::tokenizer::{EncodeOptions, Tokenizer};

const SAMPLE: &str = "Hello, world! 1234567 日本語 😀👍🏽 <s> [CLS] \t\n  x";

fuzz_target!(|data: &[u8]| {
    let (json, text) = match data.iter().position(|&b| b == 0) {
        Some(i) => (
            &data[..i],
            String::from_utf8_lossy(&data[i + 1..]).into_owned(),
        ),
        None => (data, SAMPLE.to_string()),
    };
    let Ok(json) = std::str::from_utf8(json) else {
        return;
    };
    let Ok(tok) = Tokenizer::from_json_str(json) else {
        return;
    };
    for (add_special_tokens, parse_special) in [(true, true), (false, false)] {
        let options = EncodeOptions {
            add_special_tokens,
            parse_special,
        };
        if let Ok(ids) = tok.encode_with(&text, options) {
            let _ = tok.decode(&ids, false);
            let _ = tok.decode(&ids, true);
            let mut stream = tok.decode_stream(false);
            for &id in &ids {
                let _ = stream.step(id);
            }
            let _ = stream.finish();
        }
    }
    // Ids outside the vocabulary are skipped, never a panic.
    let _ = tok.decode(&[u32::MAX, 0, 1, tok.vocab_size() as u32], false);
});
