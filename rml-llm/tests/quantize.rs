//! `rml_llm::quantize` on the bundled model: llama-quantize's tensor rules, outputs
//! rml loads and runs with logits close to the F16 original, and clear errors.
//! (Byte equality with `gguf.quants` is checked by
//! `scripts/interop/check_rml_quantize.py`, the `quantize_interop` step of ci/test.)

#[path = "support/cli.rs"]
mod cli;
use cli::*;

use rml_core::{DType, GgmlType};
use rml_host::formats::gguf::GgufFile;
use rml_llm::Model;
use rml_llm::quantize::{QuantizeOptions, choose_type, parse_type, quantize_gguf};

fn opts(ty: DType) -> QuantizeOptions {
    QuantizeOptions {
        ty,
        mix: None,
        token_embedding_type: None,
        output_type: None,
    }
}

#[test]
fn type_rules_follow_llama_quantize() {
    let o = opts(DType::Q4K);
    // 1-D tensors, the MoE router and rope_freqs keep their type.
    assert_eq!(
        choose_type("blk.0.attn_norm.weight", GgmlType::F32, &[256], &o),
        GgmlType::F32
    );
    assert_eq!(
        choose_type("blk.0.ffn_gate_inp.weight", GgmlType::F32, &[256, 8], &o),
        GgmlType::F32
    );
    assert_eq!(
        choose_type("rope_freqs.weight", GgmlType::F32, &[256, 2], &o),
        GgmlType::F32
    );
    assert_eq!(
        choose_type("blk.0.attn_q.bias", GgmlType::F32, &[256, 2], &o),
        GgmlType::F32
    );
    assert_eq!(
        choose_type("blk.0.attn_q.weight", GgmlType::F16, &[256, 256], &o),
        GgmlType::Q4K
    );
    // Fallbacks for rows that are not whole super-blocks, then F16.
    for (ty, fallback) in [
        (DType::Q2K, GgmlType::Q4_0),
        (DType::Q3K, GgmlType::Q4_0),
        (DType::Q4K, GgmlType::Q5_0),
        (DType::Q5K, GgmlType::Q5_1),
        (DType::Q6K, GgmlType::Q8_0),
    ] {
        assert_eq!(
            choose_type("w.weight", GgmlType::F32, &[128, 4], &opts(ty)),
            fallback
        );
        assert_eq!(
            choose_type("w.weight", GgmlType::F32, &[40, 4], &opts(ty)),
            GgmlType::F16
        );
    }
    let o = QuantizeOptions {
        ty: DType::Q4_0,
        mix: None,
        token_embedding_type: Some(DType::Q8_0),
        output_type: Some(DType::F16),
    };
    assert_eq!(
        choose_type("token_embd.weight", GgmlType::F32, &[64, 9], &o),
        GgmlType::Q8_0
    );
    assert_eq!(
        choose_type("output.weight", GgmlType::F32, &[64, 9], &o),
        GgmlType::F16
    );
}

#[test]
fn parse_type_names() {
    assert_eq!(parse_type("q4_k").unwrap(), DType::Q4K);
    assert_eq!(parse_type("Q8_0").unwrap(), DType::Q8_0);
    let err = parse_type("Q8_K").unwrap_err().to_string();
    assert!(err.contains("Q8_K") && err.contains("Q4_0, Q4_1"), "{err}");
    assert!(parse_type("int4").is_err());
}

/// Largest |logit − reference| over the prompt, relative to the largest |reference|.
fn relative_logit_error(path: &std::path::Path, reference: &[f32], prompt: &[u32]) -> f32 {
    let model = Model::open(path).unwrap();
    let logits = model.forward(prompt, &mut model.new_cache(16)).unwrap();
    let scale = reference.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let err = logits
        .iter()
        .zip(reference)
        .fold(0.0f32, |m, (a, b)| m.max((a - b).abs()));
    err / scale
}

#[test]
fn quantized_models_load_and_stay_close_to_the_original() {
    let dir = temp_dir("quantize", "all");
    let original = Model::open(bundled()).unwrap();
    let prompt = [1u32, 50, 300, 7, 999, 12];
    let reference = original
        .forward(&prompt, &mut original.new_cache(16))
        .unwrap();
    let mut errors = Vec::new();
    // Bounds on the relative logit error (observed: Q8_0 0.019, Q5_1 0.10, Q5_0 0.11,
    // Q4_1 0.19, Q4_0 0.22), loose enough for any machine; the bundled
    // model's rows of 128 and 384 send the K-quants to their fallbacks.
    for (ty, bound) in [
        (DType::Q8_0, 0.03),
        (DType::Q5_1, 0.16),
        (DType::Q5_0, 0.16),
        (DType::Q4_1, 0.3),
        (DType::Q4_0, 0.3),
        (DType::Q6K, 0.03),
        (DType::Q4K, 0.16),
        (DType::Q2K, 0.3),
    ] {
        let out = dir.join(format!("{}.gguf", ty.name()));
        let plans = quantize_gguf(&bundled(), &out, &opts(ty), |_, _| {}).unwrap();
        let file = GgufFile::open(&out).unwrap();
        for p in &plans {
            let t = file.tensor(&p.name).unwrap();
            assert_eq!(t.info.ggml_type(), p.to, "{}", p.name);
            assert_eq!(t.data.len(), p.bytes, "{}", p.name);
            if p.name.ends_with("_norm.weight") {
                assert_eq!(p.to, GgmlType::F32, "norms stay f32");
            } else {
                assert_ne!(p.to, GgmlType::F16, "{} is quantized", p.name);
            }
        }
        let err = relative_logit_error(&out, &reference, &prompt);
        errors.push(err);
        assert!(err < bound, "{}: relative logit error {err}", ty.name());
    }
    // More bits, closer logits: Q8_0 < Q5_1 < Q5_0 < Q4_1 < Q4_0.
    assert!(errors[..5].windows(2).all(|w| w[0] < w[1]), "{errors:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn errors_name_the_problem() {
    let dir = temp_dir("quantize", "errors");
    let out = dir.join("out.gguf");
    let err = quantize_gguf(
        &dir.join("missing.gguf"),
        &out,
        &opts(DType::Q4_0),
        |_, _| {},
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("missing.gguf"), "{err}");
    let err = quantize_gguf(&bundled(), &bundled(), &opts(DType::Q4_0), |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("must differ"), "{err}");
    let truncated = dir.join("truncated.gguf");
    let bytes = std::fs::read(bundled()).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    assert!(quantize_gguf(&truncated, &out, &opts(DType::Q4_0), |_, _| {}).is_err());
    assert!(!out.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
