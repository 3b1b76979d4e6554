//! The decoder on GGUF files written by the `gguf` Python package (converted as
//! llama.cpp's converter does: permuted Q/K rows for arch `llama`, Gemma norms + 1,
//! stacked Mixtral experts, Llama 3.1 `rope_freqs`, tied output omitted) must give
//! the same Hugging Face reference logits as the safetensors checkpoints.

use std::path::PathBuf;

use rml_host::formats::safetensors::SafeTensors;
use rml_llm::config::LayerKind;
use rml_llm::linear::Matrix;
use rml_llm::{Config, Family, GgufSource, LoadOptions, Model};

/// Float files hold the reference's exact weights (F16 holds BF16 values exactly).
const REL_TOL: f32 = 1e-4;
/// Q8_0 rounds every weight to 8 bits per 32-block scale.
const Q8_0_REL_TOL: f32 = 5e-2;

fn dir(family: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/decoder")
        .join(family)
}

fn load(family: &str, file: &str) -> Model {
    let src = GgufSource::open(dir(family).join(file)).unwrap();
    let config = Config::from_metadata(&src).unwrap();
    Model::load(config, &src).unwrap()
}

/// Largest relative error over the reference prompts, prefill and decode.
fn worst_error(family: &str, model: &Model) -> f32 {
    let st = SafeTensors::open(dir(family).join("reference.safetensors")).unwrap();
    let mut worst = 0f32;
    for p in 0.. {
        let Ok(tokens) = st.get(&format!("tokens.{p}")) else {
            break;
        };
        let tokens: Vec<u32> = tokens
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
        let scale = want.iter().fold(0f32, |m, v| m.max(v.abs()));
        let mut cache = model.new_cache(16);
        let mut got = model.forward(&tokens[..1], &mut cache).unwrap();
        got.extend(model.forward(&tokens[1..], &mut cache).unwrap());
        let diff = got
            .iter()
            .zip(&want)
            .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
        worst = worst.max(diff / scale);
    }
    eprintln!("{family}: max relative error {worst:e}");
    worst
}

#[test]
fn llama_f32_gguf_with_permuted_qk_and_rope_freqs_matches_transformers() {
    let model = load("llama", "model-f32.gguf");
    assert_eq!(model.config().family, Family::Llama);
    assert!(worst_error("llama", &model) <= REL_TOL);
}

#[test]
fn llama_q8_0_gguf_stays_close_to_transformers_quantized_or_dequantized() {
    let err = worst_error("llama", &load("llama", "model-q8_0.gguf"));
    assert!(
        err <= Q8_0_REL_TOL,
        "quantized dot products: relative error {err}"
    );
    assert!(err > 0.0, "Q8_0 weights cannot be exact");
    let src = GgufSource::open(dir("llama").join("model-q8_0.gguf")).unwrap();
    let config = Config::from_metadata(&src).unwrap();
    let options = LoadOptions { dequantize: true };
    let dequantized = Model::load_with(config, &src, options).unwrap();
    let err = worst_error("llama", &dequantized);
    assert!(
        err <= Q8_0_REL_TOL,
        "dequantized weights: relative error {err}"
    );
}

#[test]
fn quantized_projections_stay_quantized_and_use_less_memory() {
    let q8 = load("llama", "model-q8_0.gguf");
    let f32 = load("llama", "model-f32.gguf");
    assert!(q8.parameter_bytes() < f32.parameter_bytes() / 2);
    assert!(matches!(
        q8.layer(0).unwrap().q().weight(),
        Matrix::Quantized { .. }
    ));
    // Both files' projections are used where they lie in the mapped file.
    assert!(q8.layer(1).unwrap().q().weight().is_mapped());
    assert!(f32.layer(1).unwrap().q().weight().is_mapped());
}

#[test]
fn f16_gguf_projections_stay_f16_in_the_mapped_file() {
    let model = load("gemma2", "model-f16.gguf");
    let q = model.layer(0).unwrap().q().weight();
    assert!(matches!(q, Matrix::F16(s) if s.is_mapped()), "{q:?}");
}

#[test]
fn mixtral_f16_gguf_with_stacked_experts_matches_transformers() {
    let model = load("mixtral", "model-f16.gguf");
    assert_eq!(model.config().family, Family::Mixtral);
    assert!(worst_error("mixtral", &model) <= REL_TOL);
}

#[test]
fn gemma2_f16_gguf_with_tied_output_matches_transformers() {
    let model = load("gemma2", "model-f16.gguf");
    let c = model.config();
    assert_eq!(c.family, Family::Gemma2);
    assert_eq!(
        c.layer_kinds,
        [LayerKind::Sliding, LayerKind::Full, LayerKind::Sliding]
    );
    assert!(worst_error("gemma2", &model) <= REL_TOL);
}
