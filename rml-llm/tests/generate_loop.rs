//! The generation loop on the bundled default model: greedy parity with
//! `transformers` (fixture from `scripts/fixtures/generate.py`), stop strings, the token
//! budget, cancellation, the context policy and cache reuse across calls.

#[path = "support/json.rs"]
mod json;
use json::ids;

use std::ops::ControlFlow;
use std::path::PathBuf;

use rml_llm::sample::{Sampler, SamplerConfig};
use rml_llm::stop::{StopConfig, StopReason};
use rml_llm::tokenizer::Tokenizer;
use rml_llm::{Model, Session};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn load() -> (Model, Tokenizer) {
    let path = root().join("models/default/rml-tiny-llama.gguf");
    (
        Model::open(&path).unwrap(),
        Tokenizer::from_gguf_file(&path).unwrap(),
    )
}

fn greedy(model: &Model) -> Sampler {
    Sampler::new(SamplerConfig::greedy(), model.config().vocab_size).unwrap()
}

fn budget(n: usize) -> StopConfig {
    StopConfig {
        max_tokens: Some(n),
        ..StopConfig::default()
    }
}

#[test]
fn greedy_tokens_match_transformers() {
    let (model, tok) = load();
    let text =
        std::fs::read_to_string(root().join("rml-llm/tests/fixtures/generate/generate.json"))
            .unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let steps = doc["steps"].as_u64().unwrap() as usize;
    for case in doc["cases"].as_array().unwrap() {
        let prompt = ids(&case["prompt_ids"]);
        let prompt_text = case["prompt"].as_str().unwrap();
        let encoded = tok
            .encode_with(
                prompt_text,
                rml_llm::tokenizer::EncodeOptions {
                    add_special_tokens: false,
                    parse_special: true,
                },
            )
            .unwrap();
        assert_eq!(encoded, prompt, "tokenization of {prompt_text:?}");
        let mut session = Session::new(&model, 256).unwrap();
        let mut shown = String::new();
        // No stop tokens: the reference records all `steps` tokens.
        let out = session
            .generate(&tok, &prompt, &mut greedy(&model), &budget(steps), |t| {
                shown.push_str(t);
                ControlFlow::Continue(())
            })
            .unwrap();
        assert_eq!(
            out.tokens,
            ids(&case["greedy_ids"]),
            "greedy continuation of {prompt_text:?}"
        );
        assert_eq!(out.reason, StopReason::MaxTokens);
        assert_eq!(shown, tok.decode(&out.tokens, false));
        assert_eq!(out.stats.prompt_tokens, prompt.len());
        assert_eq!(out.stats.generated_tokens, steps);
    }
}

fn run(
    session: &mut Session<'_>,
    tok: &Tokenizer,
    prompt: &[u32],
    stop: &StopConfig,
) -> (rml_llm::Generation, String) {
    let mut shown = String::new();
    let mut sampler = greedy(session.model());
    let out = session
        .generate(tok, prompt, &mut sampler, stop, |t| {
            shown.push_str(t);
            ControlFlow::Continue(())
        })
        .unwrap();
    (out, shown)
}

#[test]
fn stop_string_split_across_tokens_is_never_shown() {
    let (model, tok) = load();
    let prompt = tok.encode("The for statement", false).unwrap();
    let mut session = Session::new(&model, 256).unwrap();
    let (free, free_text) = run(&mut session, &tok, &prompt, &budget(24));
    assert_eq!(free.reason, StopReason::MaxTokens);
    // A stop string that straddles two tokens of the free continuation.
    let pieces: Vec<String> = free
        .tokens
        .iter()
        .map(|&t| tok.decode(&[t], false))
        .collect();
    let i = (1..pieces.len())
        .find(|&i| !pieces[i - 1].is_empty() && !pieces[i].is_empty())
        .unwrap();
    let stop_str = format!(
        "{}{}",
        &pieces[i - 1][pieces[i - 1].len() - 1..],
        &pieces[i][..1]
    );
    let at = free_text.find(&stop_str).unwrap();
    session.reset();
    let stop = StopConfig {
        strings: vec!["never appears \u{1}".into(), stop_str.clone()],
        ..budget(24)
    };
    let (out, shown) = run(&mut session, &tok, &prompt, &stop);
    assert_eq!(out.reason, StopReason::String(1));
    assert_eq!(shown, free_text[..at]);
    assert!(!shown.contains(&stop_str));
}

#[test]
fn budget_stop_tokens_and_cancel() {
    let (model, tok) = load();
    let prompt = tok.encode("Identifiers", false).unwrap();
    let mut session = Session::new(&model, 256).unwrap();
    let (free, _) = run(&mut session, &tok, &prompt, &budget(5));
    assert_eq!(free.tokens.len(), 5);
    assert_eq!(free.reason, StopReason::MaxTokens);

    session.reset();
    let stop = StopConfig {
        tokens: vec![free.tokens[2]],
        ..budget(50)
    };
    let (out, shown) = run(&mut session, &tok, &prompt, &stop);
    assert_eq!(out.reason, StopReason::Token(free.tokens[2]));
    assert_eq!(out.tokens, free.tokens[..3]);
    assert_eq!(shown, tok.decode(&free.tokens[..2], false));

    session.reset();
    let mut calls = 0;
    let out = session
        .generate(&tok, &prompt, &mut greedy(&model), &budget(50), |_| {
            calls += 1;
            ControlFlow::Break(())
        })
        .unwrap();
    assert_eq!(out.reason, StopReason::Cancelled);
    assert_eq!(calls, 1);
}

#[test]
fn continuing_a_session_equals_one_long_generation() {
    let (model, tok) = load();
    let prompt = tok.encode("The with statement", false).unwrap();
    let mut one = Session::new(&model, 256).unwrap();
    let (whole, _) = run(&mut one, &tok, &prompt, &budget(12));

    let mut two = Session::new(&model, 256).unwrap();
    let (first, _) = run(&mut two, &tok, &prompt, &budget(6));
    assert_eq!(two.position(), prompt.len() + 6);
    // Continue with an empty prompt: the pending last token is run first.
    let (second, _) = run(&mut two, &tok, &[], &budget(6));
    assert_eq!(second.stats.prompt_tokens, 1);
    let joined: Vec<u32> = first.tokens.iter().chain(&second.tokens).copied().collect();
    assert_eq!(joined, whole.tokens);
}

#[test]
fn context_policy() {
    let (model, tok) = load();
    let prompt = tok.encode("The for statement", false).unwrap();
    let n = prompt.len();
    let mut session = Session::new(&model, n + 3).unwrap();
    let (out, _) = run(&mut session, &tok, &prompt, &budget(100));
    assert_eq!(out.reason, StopReason::ContextFull);
    assert_eq!(out.tokens.len(), 4, "three run, the fourth shown only");

    let mut small = Session::new(&model, n - 1).unwrap();
    let err = small
        .generate(&tok, &prompt, &mut greedy(&model), &budget(4), |_| {
            ControlFlow::Continue(())
        })
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&n.to_string()) && err.contains(&(n - 1).to_string()),
        "{err}"
    );
    assert!(Session::new(&model, model.config().max_positions + 1).is_err());
    assert!(
        session
            .generate(&tok, &[], &mut greedy(&model), &budget(1), |_| {
                ControlFlow::Continue(())
            })
            .is_err(),
        "a full context cannot continue"
    );
}

#[test]
fn long_prompts_report_prefill_progress_per_chunk() {
    use std::sync::{Arc, Mutex};
    let (model, tok) = load();
    let (chunk, prompt_len) = (100, 244);
    let calls = Arc::new(Mutex::new(Vec::new()));
    let seen = calls.clone();
    let mut session = Session::with_prefill_chunk(&model, 256, chunk).unwrap();
    session.set_prefill_progress(Some(rml_llm::PrefillProgress(Arc::new(move |d, t| {
        seen.lock().unwrap().push((d, t));
    }))));
    let prompt = vec![3u32; prompt_len];
    session
        .generate(&tok, &prompt, &mut greedy(&model), &budget(2), |_| {
            ControlFlow::Continue(())
        })
        .unwrap();
    let want = vec![
        (100, prompt_len),
        (200, prompt_len),
        (prompt_len, prompt_len),
    ];
    assert_eq!(*calls.lock().unwrap(), want);
    // A prompt of one chunk reports nothing.
    calls.lock().unwrap().clear();
    session
        .generate(&tok, &[5, 6], &mut greedy(&model), &budget(2), |_| {
            ControlFlow::Continue(())
        })
        .unwrap();
    assert!(calls.lock().unwrap().is_empty());
}

#[test]
fn cancelling_during_the_prompt_undoes_the_turn() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let (model, tok) = load();
    let first = tok.encode("The with statement", false).unwrap();
    let long: Vec<u32> = (0..60).map(|i| 10 + i % 50).collect();
    let next = tok.encode("The for statement", false).unwrap();

    // Reference: the first turn, then the next one, with no cancelled turn between.
    let mut plain = Session::new(&model, 256).unwrap();
    run(&mut plain, &tok, &first, &budget(6));
    let (want, _) = run(&mut plain, &tok, &next, &budget(8));

    let cancel = Arc::new(AtomicBool::new(false));
    let flag = cancel.clone();
    let mut session = Session::with_prefill_chunk(&model, 256, 16).unwrap();
    session.set_cancel(Some(cancel.clone()));
    // Ctrl-C arrives after the first chunk of the long prompt.
    session.set_prefill_progress(Some(rml_llm::PrefillProgress(Arc::new(move |_, _| {
        flag.store(true, Ordering::SeqCst)
    }))));
    run(&mut session, &tok, &first, &budget(6));
    let before = session.position();
    let mut shown = 0;
    let out = session
        .generate(&tok, &long, &mut greedy(&model), &budget(8), |_| {
            shown += 1;
            ControlFlow::Continue(())
        })
        .unwrap();
    assert_eq!(out.reason, StopReason::Cancelled);
    assert!(out.tokens.is_empty() && shown == 0);
    assert_eq!(session.position(), before, "the cancelled prompt is undone");
    cancel.store(false, Ordering::SeqCst);
    session.set_prefill_progress(None);
    let (got, _) = run(&mut session, &tok, &next, &budget(8));
    assert_eq!(got.tokens, want.tokens);
}
