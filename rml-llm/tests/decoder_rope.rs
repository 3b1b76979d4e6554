//! RoPE scaling against Hugging Face `transformers` (`scripts/fixtures/decoder_rope.py`):
//! tiny random-weight models with YaRN (Llama) and LongRoPE (Phi-3) scaling, original
//! context 16, prompts of 24 tokens (past the original context) and 11 (inside it).

use std::path::PathBuf;

use rml_host::formats::safetensors::SafeTensors;
use rml_llm::config::RopeScaling;
use rml_llm::{Config, Model, SafetensorsSource};

/// `max |rml − reference|` relative to the largest reference logit, as for the
/// unscaled families (`tests/decoder.rs`).
const REL_TOL: f32 = 1e-4;

fn dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/decoder")
        .join(name)
}

fn config(name: &str) -> Config {
    Config::from_hf_dir(&dir(name)).unwrap()
}

fn load(name: &str, config: Config) -> Model {
    Model::load(config, &SafetensorsSource::open(dir(name)).unwrap()).unwrap()
}

/// Largest relative error of each prompt, run with a cache of `capacity(len)`
/// positions, as one prefill (`split == false`) or one token at a time.
fn errors(name: &str, model: &Model, capacity: impl Fn(usize) -> usize, split: bool) -> Vec<f32> {
    let st = SafeTensors::open(dir(name).join("reference.safetensors")).unwrap();
    (0..)
        .map_while(|p| {
            let tokens: Vec<u32> = st
                .get(&format!("tokens.{p}"))
                .ok()?
                .to_vec::<i64>()
                .unwrap()
                .iter()
                .map(|&t| t as u32)
                .collect();
            let want = st
                .get(&format!("logits.{p}"))
                .unwrap()
                .to_vec::<f32>()
                .unwrap();
            let mut cache = model.new_cache(capacity(tokens.len()));
            let got: Vec<f32> = if split {
                tokens
                    .iter()
                    .flat_map(|t| model.forward(&[*t], &mut cache).unwrap())
                    .collect()
            } else {
                model.forward(&tokens, &mut cache).unwrap()
            };
            let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
            let diff = got
                .iter()
                .zip(&want)
                .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
            Some(diff / scale)
        })
        .collect()
}

/// Matches the reference with the cache sized to the prompt, both ways, and returns
/// the errors of the prefill run.
fn check(name: &str) -> Vec<f32> {
    let model = load(name, config(name));
    for split in [true, false] {
        let e = errors(name, &model, |n| n, split);
        eprintln!("{name} (split {split}): {e:?}");
        assert_eq!(e.len(), 2);
        assert!(e.iter().all(|&e| e <= REL_TOL), "{name}: {e:?}");
    }
    errors(name, &model, |n| n, false)
}

#[test]
fn yarn_matches_transformers_past_the_original_context() {
    let c = config("llama_yarn");
    let RopeScaling::Yarn {
        factor,
        original_max_positions,
        attention_factor,
        ..
    } = c.rope.scaling
    else {
        panic!("not YaRN: {:?}", c.rope.scaling);
    };
    assert_eq!((factor, original_max_positions), (4.0, 16.0));
    assert!((attention_factor - (0.1 * 4f64.ln() + 1.0)).abs() < 1e-12);
    check("llama_yarn");
    // Without the scaling the same weights are far off: the test sees the rope.
    let mut plain = c.clone();
    plain.rope.scaling = RopeScaling::None;
    let e = errors("llama_yarn", &load("llama_yarn", plain), |n| n, false);
    assert!(e[0] > 100.0 * REL_TOL, "{e:?}");
}

#[test]
fn longrope_matches_transformers_with_short_and_long_factors() {
    let c = config("phi3_longrope");
    let RopeScaling::LongRope {
        short,
        long,
        original_max_positions,
        attention_factor,
    } = &c.rope.scaling
    else {
        panic!("not LongRoPE: {:?}", c.rope.scaling);
    };
    assert_eq!(
        (short.len(), long.len(), *original_max_positions),
        (4, 4, 16)
    );
    // max 64 over original 16: sqrt(1 + ln 4 / ln 16) = sqrt(1.5).
    assert!((attention_factor - 1.5f64.sqrt()).abs() < 1e-12);
    check("phi3_longrope");
    // The 11-token prompt in a 64-position cache runs on the long factors, which
    // transformers does not use for an 11-token sequence: the switch is observable.
    let model = load("phi3_longrope", c.clone());
    let e = errors("phi3_longrope", &model, |_| 64, false);
    assert!(e[0] <= REL_TOL && e[1] > 100.0 * REL_TOL, "{e:?}");
}

#[test]
fn longrope_with_wrong_factor_count_is_rejected_by_name() {
    let text = std::fs::read_to_string(dir("phi3_longrope").join("config.json")).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["rope_scaling"]["short_factor"] = serde_json::json!([1.0, 1.1, 1.5]);
    let bad = Config::from_hf_json(&json.to_string()).unwrap();
    let Err(err) = Model::load(bad, &SafetensorsSource::open(dir("phi3_longrope")).unwrap()) else {
        panic!("three short factors for four frequencies must fail");
    };
    let err = err.to_string();
    assert!(err.contains("LongRoPE") && err.contains("short"), "{err}");
}
