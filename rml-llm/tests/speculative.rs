//! Speculative decoding: the sampled acceptance rule against NumPy's reference
//! distributions (`scripts/fixtures/speculative.py`), greedy output equal to
//! `transformers`' greedy ids (`scripts/fixtures/generate.py`) and to plain decoding
//! with a same-weights draft and with a Q4_0 draft (which disagrees often, so
//! rejection and cache rollback run), stop handling, continuation, the cancel flag
//! and errors.

#[path = "support/json.rs"]
mod json;
use json::ids;

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rml_core::DType;
use rml_core::random::Philox4x64Stream;
use rml_core::random::distributions::categorical;
use rml_llm::quantize::{QuantizeOptions, quantize_gguf};
use rml_llm::sample::{Sampler, SamplerConfig};
use rml_llm::speculative::{Verdict, verify_draft};
use rml_llm::stop::{StopConfig, StopReason};
use rml_llm::tokenizer::Tokenizer;
use rml_llm::{Generation, Model, Session, SpeculativeSession, SpeculativeStats};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn default_model() -> PathBuf {
    root().join("models/default/rml-tiny-llama.gguf")
}

fn json(path: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(root().join(path)).unwrap()).unwrap()
}

fn floats(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().parse().unwrap())
        .collect()
}

/// `|observed − expected| ≤ 5 σ` for a frequency out of `n` draws (plus a little
/// slack for the float32 inputs).
fn assert_frequency(what: &str, count: usize, n: usize, expected: f64) {
    let f = count as f64 / n as f64;
    let sigma = (expected * (1.0 - expected) / n as f64).sqrt();
    assert!(
        (f - expected).abs() <= 5.0 * sigma + 1e-6,
        "{what}: observed {f:.5} over {n} draws, expected {expected:.5} (σ {sigma:.2e})"
    );
}

#[test]
fn acceptance_rule_matches_numpy_reference() {
    const N: usize = 200_000;
    let doc = json("rml-llm/tests/fixtures/speculative/acceptance.json");
    for case in doc["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let p: Vec<f32> = floats(&case["p"]).iter().map(|&x| x as f32).collect();
        let q: Vec<f32> = floats(&case["q"]).iter().map(|&x| x as f32).collect();
        let alpha: f64 = case["alpha"].as_str().unwrap().parse().unwrap();
        let residual = floats(&case["residual"]);
        let output = floats(&case["output"]);
        let vocab = p.len();
        let mut draft_rng = Philox4x64Stream::from_seed(1);
        let mut rng = Philox4x64Stream::from_seed(2);
        let mut buf = vec![0.0f32; vocab];
        let (mut accepted, mut emitted, mut rejected) = (0, vec![0; vocab], vec![0; vocab]);
        for _ in 0..N {
            let d = categorical(&mut draft_rng, &q).unwrap() as u32;
            match verify_draft(&p, &q, d, &mut rng, &mut buf).unwrap() {
                Verdict::Accept => {
                    accepted += 1;
                    emitted[d as usize] += 1;
                }
                Verdict::Reject(t) => {
                    rejected[t as usize] += 1;
                    emitted[t as usize] += 1;
                }
            }
        }
        assert_frequency(&format!("{name}: acceptance"), accepted, N, alpha);
        for x in 0..vocab {
            assert_frequency(&format!("{name}: emitted {x}"), emitted[x], N, output[x]);
            if N - accepted > 1000 {
                let r = N - accepted;
                assert_frequency(
                    &format!("{name}: residual {x}"),
                    rejected[x],
                    r,
                    residual[x],
                );
            }
        }
    }
}

#[test]
fn verify_draft_rejects_bad_input() {
    let mut rng = Philox4x64Stream::from_seed(0);
    let (p, q) = ([0.5f32, 0.5], [0.5f32, 0.5]);
    let mut buf = [0.0f32; 2];
    assert!(verify_draft(&p, &q[..1], 0, &mut rng, &mut buf).is_err());
    assert!(verify_draft(&p, &q, 2, &mut rng, &mut buf).is_err());
}

struct Fixture {
    model: Model,
    q4: Model,
    tok: Tokenizer,
}

fn fixture() -> Fixture {
    // Tests run in parallel threads of one process: each call gets its own directory, so one
    // test's clean-up never deletes the file another is still opening.
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("rml-speculative-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let q4_path = dir.join("draft-q4_0.gguf");
    let opts = QuantizeOptions {
        ty: DType::Q4_0,
        mix: None,
        token_embedding_type: None,
        output_type: None,
    };
    quantize_gguf(&default_model(), &q4_path, &opts, |_, _| {}).unwrap();
    let q4 = Model::open(&q4_path).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    Fixture {
        model: Model::open(default_model()).unwrap(),
        q4,
        tok: Tokenizer::from_gguf_file(default_model()).unwrap(),
    }
}

fn budget(n: usize) -> StopConfig {
    StopConfig {
        max_tokens: Some(n),
        ..StopConfig::default()
    }
}

fn sampler(model: &Model, config: SamplerConfig) -> Sampler {
    Sampler::new(config, model.config().vocab_size).unwrap()
}

fn speculate(
    session: &mut SpeculativeSession<'_>,
    tok: &Tokenizer,
    prompt: &[u32],
    sampler: &mut Sampler,
    stop: &StopConfig,
) -> (Generation, SpeculativeStats, String) {
    let mut shown = String::new();
    let (g, s) = session
        .generate(tok, prompt, sampler, stop, |t| {
            shown.push_str(t);
            ControlFlow::Continue(())
        })
        .unwrap();
    (g, s, shown)
}

fn plain(f: &Fixture, prompt: &[u32], stop: &StopConfig) -> (Generation, String) {
    let mut session = Session::new(&f.model, 256).unwrap();
    let mut shown = String::new();
    let mut s = sampler(&f.model, SamplerConfig::greedy());
    let g = session
        .generate(&f.tok, prompt, &mut s, stop, |t| {
            shown.push_str(t);
            ControlFlow::Continue(())
        })
        .unwrap();
    (g, shown)
}

#[test]
fn greedy_speculative_equals_transformers_and_plain_decoding() {
    let f = fixture();
    let doc = json("rml-llm/tests/fixtures/generate/generate.json");
    let steps = doc["steps"].as_u64().unwrap() as usize;
    let mut acceptance = Vec::new();
    for case in doc["cases"].as_array().unwrap() {
        let prompt = ids(&case["prompt_ids"]);
        let reference = ids(&case["greedy_ids"]);
        let (long, long_text) = plain(&f, &prompt, &budget(120));
        for (draft_name, draft) in [("same weights", &f.model), ("Q4_0", &f.q4)] {
            for k in [1, 3, 6] {
                let what = format!("{draft_name} draft, k = {k}");
                let mut session = SpeculativeSession::new(&f.model, draft, k, 256).unwrap();
                let mut s = sampler(&f.model, SamplerConfig::greedy());
                let (g, _, _) = speculate(&mut session, &f.tok, &prompt, &mut s, &budget(steps));
                assert_eq!(g.tokens, reference, "transformers' greedy ids, {what}");
                session.reset();
                let mut s = sampler(&f.model, SamplerConfig::greedy());
                let (g, stats, text) =
                    speculate(&mut session, &f.tok, &prompt, &mut s, &budget(120));
                assert_eq!(g.tokens, long.tokens, "plain greedy, {what}");
                assert_eq!(text, long_text, "{what}");
                assert_eq!(g.reason, long.reason, "{what}");
                if std::ptr::eq(draft, &f.model) {
                    assert_eq!(stats.accepted, stats.drafted, "{what}");
                } else {
                    acceptance.push(stats.acceptance_rate());
                }
                assert!(
                    stats.rounds >= 120usize.div_ceil(k + 1),
                    "{what}: {stats:?}"
                );
            }
        }
    }
    // The Q4_0 draft disagrees now and then: rejection and rollback were exercised.
    assert!(acceptance.iter().any(|&a| a < 1.0), "{acceptance:?}");
}

#[test]
fn stop_strings_and_context_end_as_in_plain_decoding() {
    let f = fixture();
    let prompt = f.tok.encode_prompt("The for statement").unwrap();
    let (reference, _) = plain(&f, &prompt, &budget(40));
    let text = f.tok.decode(&reference.tokens, false);
    // A stop string from the middle of the reference text, likely split over tokens.
    let cut = text.char_indices().nth(text.chars().count() / 2).unwrap().0;
    let stop_string: String = text[cut..].chars().take(5).collect();
    let stop = StopConfig {
        strings: vec![stop_string.clone()],
        max_tokens: Some(40),
        ..StopConfig::default()
    };
    let (want, want_text) = plain(&f, &prompt, &stop);
    let mut session = SpeculativeSession::new(&f.model, &f.q4, 4, 256).unwrap();
    let mut s = sampler(&f.model, SamplerConfig::greedy());
    let (got, _, got_text) = speculate(&mut session, &f.tok, &prompt, &mut s, &stop);
    assert_eq!(got.reason, want.reason);
    assert!(
        matches!(got.reason, StopReason::String(0)),
        "{:?}",
        got.reason
    );
    assert_eq!(got_text, want_text);
    assert!(!got_text.contains(&stop_string));

    // Filling the whole context: same tokens and the context-full stop.
    let long = StopConfig::default();
    let (want, want_text) = plain(&f, &prompt, &long);
    let mut session = SpeculativeSession::new(&f.model, &f.q4, 5, 256).unwrap();
    let mut s = sampler(&f.model, SamplerConfig::greedy());
    let (got, _, got_text) = speculate(&mut session, &f.tok, &prompt, &mut s, &long);
    assert_eq!(want.reason, StopReason::ContextFull);
    assert_eq!(
        (got.tokens, got.reason, got_text),
        (want.tokens, want.reason, want_text)
    );
    // As with Session: the full cache plus the last token, shown but not run.
    assert_eq!(session.position(), 257);
}

#[test]
fn continuation_equals_one_call() {
    let f = fixture();
    let prompt = f.tok.encode_prompt("Exceptions").unwrap();
    let mut session = SpeculativeSession::new(&f.model, &f.q4, 3, 256).unwrap();
    let mut s = sampler(&f.model, SamplerConfig::greedy());
    let (one, _, _) = speculate(&mut session, &f.tok, &prompt, &mut s, &budget(20));
    session.reset();
    let mut s = sampler(&f.model, SamplerConfig::greedy());
    let (a, _, _) = speculate(&mut session, &f.tok, &prompt, &mut s, &budget(9));
    let (b, _, _) = speculate(&mut session, &f.tok, &[], &mut s, &budget(11));
    assert_eq!([a.tokens, b.tokens].concat(), one.tokens);
}

#[test]
fn sampled_speculation_is_seeded_and_a_same_weights_draft_is_always_accepted() {
    let f = fixture();
    let prompt = f.tok.encode_prompt("The with statement").unwrap();
    let config = SamplerConfig {
        temperature: 0.9,
        top_k: 40,
        seed: 7,
        ..SamplerConfig::default()
    };
    let run = |draft: &Model| {
        let mut session = SpeculativeSession::new(&f.model, draft, 4, 256).unwrap();
        let mut s = sampler(&f.model, config.clone());
        speculate(&mut session, &f.tok, &prompt, &mut s, &budget(48))
    };
    let (a, stats, _) = run(&f.model);
    assert_eq!(stats.accepted, stats.drafted);
    assert_eq!(a.tokens.len(), 48);
    let (b, _, _) = run(&f.model);
    assert_eq!(a.tokens, b.tokens, "same seed, same tokens");
    let (c, stats, _) = run(&f.q4);
    assert_eq!(c.tokens.len(), 48);
    assert!(stats.accepted < stats.drafted, "{stats:?}");
}

#[test]
fn cancel_flag_undoes_a_prompt_and_stops_a_round() {
    let f = fixture();
    let prompt = f.tok.encode_prompt("The with statement").unwrap();
    let (want, want_text) = plain(&f, &prompt, &budget(40));
    let cancel = Arc::new(AtomicBool::new(false));
    let mut session = SpeculativeSession::new(&f.model, &f.q4, 3, 256).unwrap();
    session.set_cancel(Some(cancel.clone()));

    // Set before the call (Ctrl-C during the prompt): nothing is run or shown and the
    // session, sampler included, is as before, so sampling then repeats a fresh run.
    let config = SamplerConfig {
        temperature: 0.9,
        seed: 11,
        ..SamplerConfig::default()
    };
    let mut s = sampler(&f.model, config.clone());
    cancel.store(true, Ordering::SeqCst);
    let (g, stats, shown) = speculate(&mut session, &f.tok, &prompt, &mut s, &budget(12));
    assert_eq!(g.reason, StopReason::Cancelled);
    assert!(g.tokens.is_empty() && shown.is_empty() && stats.rounds == 0);
    assert_eq!(session.position(), 0, "the cancelled prompt is undone");
    cancel.store(false, Ordering::SeqCst);
    let (sampled, _, _) = speculate(&mut session, &f.tok, &prompt, &mut s, &budget(12));
    let mut fresh = SpeculativeSession::new(&f.model, &f.q4, 3, 256).unwrap();
    let mut s = sampler(&f.model, config);
    let (reference, _, _) = speculate(&mut fresh, &f.tok, &prompt, &mut s, &budget(12));
    assert_eq!(sampled.tokens, reference.tokens);

    // Set while text streams: the flag is seen at the next draft step or verification,
    // the call returns what was emitted, and the next call continues from there.
    session.reset();
    let mut s = sampler(&f.model, SamplerConfig::greedy());
    let (mut pieces, mut shown) = (0, String::new());
    let (g, _) = session
        .generate(&f.tok, &prompt, &mut s, &budget(40), |t| {
            shown.push_str(t);
            pieces += 1;
            if pieces == 5 {
                cancel.store(true, Ordering::SeqCst);
            }
            ControlFlow::Continue(())
        })
        .unwrap();
    assert_eq!(g.reason, StopReason::Cancelled);
    let n = g.tokens.len();
    assert!(
        (5..=5 + 3).contains(&n),
        "{n} tokens after the flag at the 5th piece"
    );
    assert_eq!(g.tokens, want.tokens[..n]);
    assert!(want_text.starts_with(&shown), "{shown:?} vs {want_text:?}");
    assert_eq!(session.position(), prompt.len() + n);
    cancel.store(false, Ordering::SeqCst);
    let (rest, _, _) = speculate(&mut session, &f.tok, &[], &mut s, &budget(40 - n));
    assert_eq!(rest.tokens, want.tokens[n..], "continued after the cancel");
}

#[test]
fn mismatched_draft_and_bad_settings_are_errors() {
    let f = fixture();
    let other =
        Model::open(root().join("rml-llm/tests/fixtures/decoder/llama/model-f32.gguf")).unwrap();
    let err = SpeculativeSession::new(&f.model, &other, 4, 128).unwrap_err();
    assert!(err.to_string().contains("vocabulary"), "{err}");
    assert!(SpeculativeSession::new(&f.model, &f.q4, 0, 128).is_err());
    assert!(SpeculativeSession::new(&f.model, &f.q4, 4, 100_000).is_err());
    let mut session = SpeculativeSession::new(&f.model, &f.q4, 4, 16).unwrap();
    let mut s = sampler(&f.model, SamplerConfig::greedy());
    let too_long = vec![1u32; 17];
    let err = session
        .generate(&f.tok, &too_long, &mut s, &budget(4), |_| {
            ControlFlow::Continue(())
        })
        .unwrap_err();
    assert!(err.to_string().contains("context holds 16"), "{err}");
}
