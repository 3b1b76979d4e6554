//! The generation loop allocates nothing per token beyond what the tokenizer's
//! `DecodeStream` needs: a counting global allocator watches the test thread while
//! `Session::generate` runs, and the count is compared with a `DecodeStream` alone
//! over the same tokens.

use std::path::PathBuf;

use std::ops::ControlFlow;

use rml_llm::sample::{Sampler, SamplerConfig};
use rml_llm::stop::StopConfig;
use rml_llm::tokenizer::Tokenizer;
use rml_llm::{Model, Session};

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::allocations;

/// Allocations of one greedy generation of `n` tokens, beyond those of decoding the
/// same tokens with a `DecodeStream` alone.
fn extra_allocations(model: &Model, tok: &Tokenizer, n: usize) -> (usize, usize) {
    let prompt = tok.encode("The for statement", false).unwrap();
    let mut session = Session::new(model, 256).unwrap();
    let mut sampler = Sampler::new(SamplerConfig::greedy(), model.config().vocab_size).unwrap();
    let stop = StopConfig {
        strings: vec!["never \u{1}".into()],
        max_tokens: Some(n),
        ..StopConfig::default()
    };
    let mut tokens = Vec::new();
    let looped = allocations(|| {
        let out = session
            .generate(tok, &prompt, &mut sampler, &stop, |_| {
                ControlFlow::Continue(())
            })
            .unwrap();
        tokens = out.tokens;
    });
    assert_eq!(tokens.len(), n);
    let streamed = allocations(|| {
        let mut stream = tok.decode_stream(false);
        for (i, &t) in tokens.iter().enumerate() {
            let mut text = stream.step(t).unwrap_or_default();
            if i + 1 == tokens.len() {
                text.push_str(&stream.finish().unwrap_or_default());
            }
            std::hint::black_box(text);
        }
    });
    (looped, streamed)
}

#[test]
fn generation_allocates_only_for_detokenization_per_token() {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/default/rml-tiny-llama.gguf");
    let model = Model::open(&path).unwrap();
    let tok = Tokenizer::from_gguf_file(&path).unwrap();
    let (short_loop, short_stream) = extra_allocations(&model, &tok, 8);
    let (long_loop, long_stream) = extra_allocations(&model, &tok, 64);
    let short = short_loop.saturating_sub(short_stream);
    let long = long_loop.saturating_sub(long_stream);
    // What the loop adds itself is set up once (the stopper, the shown-text buffer and
    // a few of its regrowths), not paid per token: 56 more tokens add almost nothing.
    assert!(short <= 16, "{short_loop} vs {short_stream}");
    assert!(
        long <= short + 6,
        "{long_loop} vs {long_stream} (short: {short})"
    );
}
