//! The decoder against Hugging Face `transformers`: tiny random-weight models of each
//! family (written by `scripts/fixtures/decoder.py`) must give the reference logits,
//! both when a prompt is run in one prefill call and when it is split into a prefill
//! and one-token decode steps through the KV cache.

use std::path::PathBuf;

use rml_host::formats::safetensors::SafeTensors;
use rml_llm::linear::Matrix;
use rml_llm::{Config, KvDtype, Model, SafetensorsSource};

/// Largest allowed `max |rml − reference|` over a prompt, relative to the largest
/// reference logit magnitude of that prompt.
const REL_TOL: f32 = 1e-4;

/// The same bound with an f16 KV cache (keys and values rounded to 11 bits).
const F16_KV_REL_TOL: f32 = 2e-3;

const FAMILIES: [&str; 9] = [
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen3",
    "qwen3_moe",
    "gemma2",
    "gemma3",
    "phi3",
];

fn fixture(family: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/decoder")
        .join(family)
}

fn load(family: &str) -> Model {
    let dir = fixture(family);
    let config = Config::from_hf_dir(&dir).unwrap();
    let src = SafetensorsSource::open(&dir).unwrap();
    Model::load(config, &src).unwrap()
}

/// `(tokens, logits)` of each reference prompt.
fn prompts(family: &str) -> Vec<(Vec<u32>, Vec<f32>)> {
    let st = SafeTensors::open(fixture(family).join("reference.safetensors")).unwrap();
    (0..)
        .map_while(|p| {
            let tokens = st.get(&format!("tokens.{p}")).ok()?;
            let logits = st.get(&format!("logits.{p}")).unwrap();
            let tokens = tokens
                .to_vec::<i64>()
                .unwrap()
                .into_iter()
                .map(|t| t as u32)
                .collect();
            Some((tokens, logits.to_vec::<f32>().unwrap()))
        })
        .collect()
}

/// Relative error of `got` against `want` (max abs difference / max abs reference).
fn rel_err(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
    let diff = got
        .iter()
        .zip(want)
        .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    diff / scale
}

/// Checks every prompt in one call and split into prefill + decode; returns the
/// largest relative error seen.
fn check(family: &str) -> f32 {
    let model = load(family);
    let mut worst = 0f32;
    let cases = prompts(family);
    assert!(cases.len() >= 2, "{family}: reference prompts missing");
    for (tokens, want) in cases {
        let mut cache = model.new_cache(32);
        let got = model.forward(&tokens, &mut cache).unwrap();
        assert_eq!(cache.len(), tokens.len());
        let err = rel_err(&got, &want);
        assert!(
            err <= REL_TOL,
            "{family} prefill of {} tokens: relative error {err}",
            tokens.len()
        );
        worst = worst.max(err);

        cache.clear();
        let split = tokens.len().div_ceil(2);
        let mut stepped = model.forward(&tokens[..split], &mut cache).unwrap();
        for &tok in &tokens[split..] {
            stepped.extend(model.forward(&[tok], &mut cache).unwrap());
        }
        let err = rel_err(&stepped, &want);
        assert!(
            err <= REL_TOL,
            "{family} decode of {} tokens: relative error {err}",
            tokens.len()
        );
        worst = worst.max(err);
    }
    eprintln!("{family}: max relative error {worst:e}");
    worst
}

macro_rules! family_tests {
    ($($name:ident => $dir:literal),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                check($dir);
            }
        )*
    };
}

family_tests! {
    llama_with_llama3_rope_scaling_matches_transformers => "llama",
    mistral_with_sliding_window_matches_transformers => "mistral",
    mixtral_moe_matches_transformers => "mixtral",
    qwen2_with_qkv_bias_matches_transformers => "qwen2",
    qwen3_with_qk_norm_matches_transformers => "qwen3",
    qwen3_moe_matches_transformers => "qwen3_moe",
    gemma2_with_softcaps_and_sliding_layers_matches_transformers => "gemma2",
    gemma3_with_local_and_global_rope_matches_transformers => "gemma3",
    phi3_with_fused_projections_matches_transformers => "phi3",
}

#[test]
fn f16_kv_cache_stays_close_for_every_family() {
    for family in FAMILIES {
        let model = load(family);
        let mut worst = 0f32;
        for (tokens, want) in prompts(family) {
            let mut cache = model.new_cache_with(16, KvDtype::F16);
            let split = tokens.len().div_ceil(2);
            let mut got = model.forward(&tokens[..split], &mut cache).unwrap();
            for &tok in &tokens[split..] {
                got.extend(model.forward(&[tok], &mut cache).unwrap());
            }
            worst = worst.max(rel_err(&got, &want));
        }
        eprintln!("{family} with f16 KV cache: max relative error {worst:e}");
        assert!(worst <= F16_KV_REL_TOL, "{family}: relative error {worst}");
    }
}

#[test]
fn windowed_cache_rings_give_the_same_logits_with_less_memory() {
    for family in ["mistral", "gemma2", "gemma3"] {
        let model = load(family);
        for max_block in [1, 3, 11] {
            for (tokens, want) in prompts(family) {
                let mut cache = model.new_windowed_cache(16, max_block, KvDtype::F32);
                assert!(cache.bytes() < model.new_cache(16).bytes());
                let mut got = Vec::new();
                for block in tokens.chunks(max_block) {
                    got.extend(model.forward(block, &mut cache).unwrap());
                }
                let err = rel_err(&got, &want);
                assert!(
                    err <= REL_TOL,
                    "{family}, blocks of {max_block}: relative error {err}"
                );
            }
        }
        let mut cache = model.new_windowed_cache(16, 2, KvDtype::F32);
        let err = model
            .forward(&[1, 2, 3], &mut cache)
            .unwrap_err()
            .to_string();
        assert!(err.contains("block of 2"), "{err}");
    }
}

#[test]
fn half_precision_projections_are_used_in_place_not_converted() {
    // Mistral is stored in BF16, Qwen2 in F16: their projections stay in that type,
    // read where they lie in the mapped file (the logits tests above cover them).
    let mistral = load("mistral");
    let q = mistral.layer(0).unwrap().q().weight();
    assert!(matches!(q, Matrix::BF16(s) if s.is_mapped()), "{q:?}");
    let qwen2 = load("qwen2");
    let q = qwen2.layer(1).unwrap().q().weight();
    assert!(matches!(q, Matrix::F16(s) if s.is_mapped()), "{q:?}");
    // Two bytes per projection weight: the f32 copy would be twice as large.
    assert_eq!(q.bytes(), 2 * 64 * 64);
}
