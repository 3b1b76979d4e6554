//! `rml-llm quantize` with llama.cpp's K-quant mixes (`Q3_K_M`, `Q4_K_S`, `Q4_K_M`,
//! `Q5_K_S`, `Q5_K_M`): the type of every tensor equals the one llama.cpp's own
//! quantizer picked for the same model (`scripts/fixtures/quant_mixes.py` records
//! them, with the models' metadata and tensor shapes, in `mixes.json`), the file type
//! is llama.cpp's, and rml loads and runs the output.

use std::path::{Path, PathBuf};

use rml_core::GgmlType;
use rml_host::formats::gguf::{GgufFile, GgufWriter, OwnedValue};
use rml_llm::Model;
use rml_llm::quantize::{Mix, QuantizeOptions, parse_quant, quantize_gguf};
use rml_llm::{KvCache, Logits, Workspace};

fn fixture() -> serde_json::Value {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/quant_mixes/mixes.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Writes the fixture's model `spec` as an F32 GGUF (the types depend on names,
/// shapes and metadata only; the values are a fixed pattern).
fn write_model(spec: &serde_json::Value, path: &Path) {
    let mut w = GgufWriter::new();
    w.add_kv("general.architecture", OwnedValue::String("llama".into()))
        .unwrap();
    w.add_kv("general.file_type", 0u32).unwrap();
    for (key, value) in spec["metadata"].as_object().unwrap() {
        if let Some(i) = value.as_u64() {
            w.add_kv(key, u32::try_from(i).unwrap()).unwrap();
        } else {
            w.add_kv(key, value.as_f64().unwrap() as f32).unwrap();
        }
    }
    w.add_kv("tokenizer.ggml.model", OwnedValue::String("none".into()))
        .unwrap();
    let mut data = Vec::new();
    for t in spec["tensors"].as_array().unwrap() {
        let dims: Vec<u64> = t[1]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        let n: u64 = dims.iter().product();
        let values: Vec<f32> = (0..n)
            .map(|i| ((i * 7919 % 1009) as f32 / 1009.0 - 0.5) * 0.1)
            .collect();
        data.push((t[0].as_str().unwrap().to_string(), dims, values));
    }
    for (name, dims, values) in &data {
        w.add_tensor(name, GgmlType::F32, dims, bytemuck::cast_slice(values))
            .unwrap();
    }
    w.write_file(path).unwrap();
}

#[test]
fn mixes_pick_llama_cpp_types_for_every_tensor() {
    let doc = fixture();
    let dir = std::env::temp_dir().join(format!("rml-quant-mixes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (model, spec) in doc["models"].as_object().unwrap() {
        let src = dir.join(format!("{model}-f32.gguf"));
        write_model(spec, &src);
        for (mix_name, types) in spec["types"].as_object().unwrap() {
            let (ty, mix) = parse_quant(mix_name).unwrap();
            let mix = mix.unwrap_or_else(|| panic!("{mix_name} is a mix"));
            let opts = QuantizeOptions {
                ty,
                mix: Some(mix),
                token_embedding_type: None,
                output_type: None,
            };
            let out = dir.join(format!("{model}-{mix_name}.gguf"));
            let plans = quantize_gguf(&src, &out, &opts, |_, _| {}).unwrap();
            let types = types.as_object().unwrap();
            assert_eq!(plans.len(), types.len(), "{model} {mix_name}");
            for p in &plans {
                let want = types[&p.name].as_str().unwrap();
                assert!(
                    p.to.name().eq_ignore_ascii_case(want),
                    "{model} {mix_name}: {} is {} in rml, {want} in llama.cpp",
                    p.name,
                    p.to.name()
                );
            }
            let file = GgufFile::open(&out).unwrap();
            let ftype: u32 = file.get_int("general.file_type").unwrap();
            assert_eq!(ftype, mix.file_type(), "{model} {mix_name}");
            if mix == Mix::Q4KM {
                runs(&out);
            }
            std::fs::remove_file(&out).unwrap();
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// rml loads the mixed file and one forward call gives finite logits.
fn runs(path: &Path) {
    let model = Model::open(path).unwrap();
    let mut cache: KvCache = model.new_cache(8);
    let mut ws: Workspace = model.workspace(4, 8).unwrap();
    let logits = model
        .forward_with(&[1, 2, 3], &mut cache, &mut ws, Logits::Last)
        .unwrap();
    assert!(logits.iter().all(|x| x.is_finite()), "{}", path.display());
}

#[test]
fn mix_names_parse_and_bad_names_list_them() {
    assert_eq!(parse_quant("q4_k_m").unwrap().1, Some(Mix::Q4KM));
    assert_eq!(parse_quant("Q5_K_S").unwrap().1, Some(Mix::Q5KS));
    assert_eq!(parse_quant("Q4_K").unwrap().1, None);
    let err = parse_quant("Q4_K_L").unwrap_err().to_string();
    assert!(
        err.contains("Q4_K_L") && err.contains("Q3_K_M") && err.contains("Q8_0"),
        "{err}"
    );
}
