//! The LLM entry points on the bundled tiny Llama: tokenization and greedy
//! generation against Hugging Face `transformers` (the fixture of
//! `scripts/fixtures/generate.py`), the callback, stop strings and budgets.

mod support;

use std::ffi::{CStr, CString, c_char, c_void};

use rml_capi::*;
use support::*;

/// The `transformers` fixture: (prompt text, prompt ids, greedy ids) per case.
fn cases() -> Vec<(String, Vec<u32>, Vec<u32>)> {
    let text =
        std::fs::read_to_string(root().join("rml-llm/tests/fixtures/generate/generate.json"))
            .unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let ids = |v: &serde_json::Value| -> Vec<u32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["prompt"].as_str().unwrap().to_string(),
                ids(&c["prompt_ids"]),
                ids(&c["greedy_ids"]),
            )
        })
        .collect()
}

fn tokenize(l: RmlLlm, text: &str, flags: u32) -> Vec<u32> {
    let text = CString::new(text).unwrap();
    let mut n = 0;
    // SAFETY: a count query: valid text and count.
    let st = unsafe { rml_llm_tokenize(l, text.as_ptr(), flags, std::ptr::null_mut(), 0, &mut n) };
    assert!(matches!(st, RmlStatus::Ok | RmlStatus::BufferTooSmall));
    let mut ids = vec![0u32; n];
    // SAFETY: `ids` holds n ids.
    ok(unsafe { rml_llm_tokenize(l, text.as_ptr(), flags, ids.as_mut_ptr(), n, &mut n) });
    ids
}

fn detokenize(l: RmlLlm, ids: &[u32]) -> String {
    let mut len = 0;
    let mut buf = vec![0 as c_char; 4096];
    // SAFETY: valid ids and a buffer of its stated size.
    ok(unsafe {
        rml_llm_detokenize(
            l,
            ids.as_ptr(),
            ids.len(),
            0,
            buf.as_mut_ptr(),
            buf.len(),
            &mut len,
        )
    });
    // SAFETY: NUL-terminated by the call.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_str()
        .unwrap()
        .to_string()
}

/// Collects the callback's text; stops after `stop_after` pieces when set.
struct Collect {
    text: String,
    pieces: usize,
    stop_after: Option<usize>,
}

unsafe extern "C" fn collect(text: *const c_char, len: usize, user: *mut c_void) -> i32 {
    // SAFETY: `user` is the `Collect` the test passed.
    let c = unsafe { &mut *user.cast::<Collect>() };
    // SAFETY: the library passes `len` bytes of UTF-8 followed by a NUL.
    let s = unsafe { CStr::from_ptr(text) }.to_str().unwrap();
    assert_eq!(s.len(), len);
    c.text.push_str(s);
    c.pieces += 1;
    i32::from(c.stop_after.is_some_and(|n| c.pieces >= n))
}

/// Generates greedily after `prompt`; returns the ids, the collected text and the
/// result.
fn generate(
    l: RmlLlm,
    prompt: &[u32],
    options: &RmlGenerateOptions,
    stop_after: Option<usize>,
) -> (Vec<u32>, Collect, RmlGeneration) {
    let mut c = Collect {
        text: String::new(),
        pieces: 0,
        stop_after,
    };
    let mut ids = vec![0u32; 512];
    let mut result = std::mem::MaybeUninit::<RmlGeneration>::uninit();
    // SAFETY: every pointer is valid for the call; `c` outlives it.
    ok(unsafe {
        rml_llm_generate(
            l,
            prompt.as_ptr(),
            prompt.len(),
            options,
            Some(collect),
            (&raw mut c).cast(),
            ids.as_mut_ptr(),
            ids.len(),
            result.as_mut_ptr(),
        )
    });
    // SAFETY: written by the successful call.
    let result = unsafe { result.assume_init() };
    ids.truncate(result.n_tokens.min(512));
    (ids, c, result)
}

fn greedy(max_tokens: usize) -> RmlGenerateOptions {
    RmlGenerateOptions {
        temperature: 0.0,
        max_tokens,
        stop_at_eos: 0,
        ..rml_generate_options_default()
    }
}

#[test]
fn tokenize_and_greedy_generation_match_transformers() {
    let l = bundled_llm();
    for (text, prompt_ids, greedy_ids) in cases() {
        assert_eq!(
            tokenize(l, &text, RML_TOKENIZE_PARSE_SPECIAL),
            prompt_ids,
            "{text:?}"
        );
        let (ids, c, result) = generate(l, &prompt_ids, &greedy(greedy_ids.len()), None);
        assert_eq!(ids, greedy_ids, "greedy continuation of {text:?}");
        assert_eq!(result.stop_reason, RmlStopReason::MaxTokens);
        assert_eq!(result.prompt_tokens, prompt_ids.len());
        assert_eq!(c.text, detokenize(l, &ids));
    }
    ok(rml_llm_free(l));
}

#[test]
fn the_callback_can_stop_generation() {
    let l = bundled_llm();
    let (_, prompt, _) = cases().remove(0);
    let (ids, c, result) = generate(l, &prompt, &greedy(24), Some(2));
    assert_eq!(result.stop_reason, RmlStopReason::Cancelled);
    assert_eq!(c.pieces, 2);
    assert!(ids.len() < 24);
    ok(rml_llm_free(l));
}

#[test]
fn stop_strings_end_generation_unseen() {
    let l = bundled_llm();
    let (_, prompt, greedy_ids) = cases().remove(0);
    let full = detokenize(l, &greedy_ids);
    // A stop string taken from the middle of the known continuation.
    let cut = full.char_indices().nth(full.chars().count() / 2).unwrap().0;
    let word = full[cut..].split_whitespace().next().unwrap().to_string();
    let stop = CString::new(word.clone()).unwrap();
    let strings = [stop.as_ptr()];
    let options = RmlGenerateOptions {
        stop_strings: strings.as_ptr(),
        n_stop_strings: 1,
        ..greedy(24)
    };
    let (_, c, result) = generate(l, &prompt, &options, None);
    assert_eq!(result.stop_reason, RmlStopReason::StopString);
    assert!(
        !c.text.contains(&word),
        "{:?} shows the stop string {word:?}",
        c.text
    );
    assert!(full.starts_with(&c.text));
    ok(rml_llm_free(l));
}

#[test]
fn sampling_is_seeded_and_zero_tokens_is_nothing() {
    let l = bundled_llm();
    let prompt = tokenize(
        l,
        "The for statement",
        RML_TOKENIZE_ADD_SPECIAL | RML_TOKENIZE_PARSE_SPECIAL,
    );
    let options = RmlGenerateOptions {
        max_tokens: 16,
        seed: 7,
        ..rml_generate_options_default()
    };
    let (a, _, _) = generate(l, &prompt, &options, None);
    let (b, _, _) = generate(l, &prompt, &options, None);
    assert_eq!(a, b);
    let (none, c, result) = generate(l, &prompt, &greedy(0), None);
    assert!(none.is_empty() && c.pieces == 0 && result.n_tokens == 0);
    ok(rml_llm_free(l));
}
