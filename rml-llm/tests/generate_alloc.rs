//! The generation loop allocates nothing per token beyond what the tokenizer's
//! `DecodeStream` needs: a counting global allocator watches the test thread while
//! `Session::generate` runs, and the count is compared with a `DecodeStream` alone
//! over the same tokens.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::PathBuf;

use std::ops::ControlFlow;

use rml_llm::sample::{Sampler, SamplerConfig};
use rml_llm::stop::StopConfig;
use rml_llm::tokenizer::Tokenizer;
use rml_llm::{Model, Session};

struct Counting;

thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<usize> = const { Cell::new(0) };
}

fn note() {
    let _ = WATCHING.try_with(|w| {
        if w.get() {
            let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        }
    });
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counter
// only touches const-initialized thread-locals, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made on this thread while `f` runs.
fn allocations(f: impl FnOnce()) -> usize {
    COUNT.with(|c| c.set(0));
    WATCHING.with(|w| w.set(true));
    f();
    WATCHING.with(|w| w.set(false));
    COUNT.with(Cell::get)
}

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
