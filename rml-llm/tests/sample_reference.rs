//! The sampling chain against Hugging Face `transformers`' logits processors and
//! warpers (and a NumPy frequency/presence penalty), from the fixtures that
//! `scripts/fixtures/sampling.py` wrote.

use rml_llm::sample::{Sampler, SamplerConfig};
use serde_json::Value;

fn f32_hex(v: &Value) -> f32 {
    let s = v.as_str().expect("hex string");
    f32::from_bits(u32::from_str_radix(s, 16).expect("hex float"))
}

fn f32_list(v: &Value) -> Vec<f32> {
    v.as_array().expect("list").iter().map(f32_hex).collect()
}

fn config(p: &Value) -> SamplerConfig {
    let f = |k: &str| p[k].as_f64().unwrap_or_else(|| panic!("{k}")) as f32;
    let u = |k: &str| p[k].as_u64().unwrap_or_else(|| panic!("{k}")) as usize;
    SamplerConfig {
        temperature: f("temperature"),
        top_k: u("top_k"),
        top_p: f("top_p"),
        min_p: f("min_p"),
        typical_p: f("typical_p"),
        repetition_penalty: f("repetition_penalty"),
        frequency_penalty: f("frequency_penalty"),
        presence_penalty: f("presence_penalty"),
        penalty_last_n: u("penalty_last_n"),
        logit_bias: p["logit_bias"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| (b[0].as_u64().unwrap() as u32, f32_hex(&b[1])))
            .collect(),
        ..SamplerConfig::unfiltered()
    }
}

/// The largest difference between two values, relative to `max(1, |expected|)`;
/// infinities must agree exactly.
fn diff(got: f32, want: f32) -> f64 {
    if want.is_infinite() || got.is_infinite() {
        return if got == want { 0.0 } else { f64::INFINITY };
    }
    f64::from((got - want).abs()) / f64::from(want.abs().max(1.0))
}

#[test]
fn processors_match_transformers() {
    let text = include_str!("fixtures/sampling/processors.json");
    let root: Value = serde_json::from_str(text).unwrap();
    let cases = root["cases"].as_array().unwrap();
    assert!(cases.len() > 100);
    let (mut worst_logit, mut worst_prob) = (0.0f64, 0.0f64);
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let mut logits = f32_list(&case["logits"]);
        let expected = f32_list(&case["expected"]);
        let probs = f32_list(&case["probs"]);
        let mut sampler = Sampler::new(config(&case["params"]), logits.len()).unwrap();
        for t in case["history"].as_array().unwrap() {
            sampler.accept(t.as_u64().unwrap() as u32).unwrap();
        }
        sampler.apply(&mut logits).unwrap();
        let mut got_probs = vec![0.0; logits.len()];
        sampler.probabilities(&logits, &mut got_probs).unwrap();
        for i in 0..logits.len() {
            let d = diff(logits[i], expected[i]);
            if d > 2e-6 {
                failures.push(format!(
                    "{name}: logit {i}: rml {} vs transformers {}",
                    logits[i], expected[i]
                ));
                continue;
            }
            worst_logit = worst_logit.max(d);
            let d = f64::from((got_probs[i] - probs[i]).abs());
            if d > 2e-6 {
                failures.push(format!(
                    "{name}: probability {i}: rml {} vs torch {}",
                    got_probs[i], probs[i]
                ));
            }
            worst_prob = worst_prob.max(d);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!(
        "{} cases; max relative logit difference {worst_logit:.3e}, max probability difference {worst_prob:.3e}",
        cases.len()
    );
}
