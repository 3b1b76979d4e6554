//! Weight sources beyond one safetensors file: a sharded set with its index, an
//! in-memory source, GGUF files with per-expert (pre-stacking) Mixtral names, and
//! the errors a source with missing or misshapen tensors gives.

use std::path::{Path, PathBuf};

use rml_host::Tensor;
use rml_host::formats::safetensors::{self, SafeTensors};
use rml_llm::weights::{GgufSource, MemorySource};
use rml_llm::{Config, Convention, Error, Model, SafetensorsSource, WeightSource};

fn fixture(family: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/decoder")
        .join(family)
}

fn config(family: &str) -> Config {
    Config::from_hf_dir(&fixture(family)).unwrap()
}

fn logits(model: &Model) -> Vec<f32> {
    model
        .forward(&[3, 1, 4, 1, 5, 9, 2, 6], &mut model.new_cache(8))
        .unwrap()
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rml-llm-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Every tensor of a safetensors file, by name.
fn all_tensors(path: &Path) -> Vec<(String, Tensor)> {
    SafeTensors::open(path).unwrap().load_all().unwrap()
}

#[test]
fn sharded_safetensors_give_the_same_logits() {
    let dir = scratch_dir("sharded");
    let tensors = all_tensors(&fixture("qwen3_moe").join("model.safetensors"));
    let (a, b) = tensors.split_at(tensors.len() / 2);
    let mut map = serde_json::Map::new();
    for (shard, part) in [
        ("model-00001-of-00002.safetensors", a),
        ("model-00002-of-00002.safetensors", b),
    ] {
        let refs: Vec<(&str, &Tensor)> = part.iter().map(|(n, t)| (n.as_str(), t)).collect();
        safetensors::save(dir.join(shard), &refs, None).unwrap();
        for (name, _) in part {
            map.insert(name.clone(), shard.into());
        }
    }
    let index = serde_json::json!({"metadata": {}, "weight_map": map});
    std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();

    let single = Model::load(
        config("qwen3_moe"),
        &SafetensorsSource::open(fixture("qwen3_moe")).unwrap(),
    )
    .unwrap();
    let src = SafetensorsSource::open(&dir).unwrap();
    assert!(matches!(src, SafetensorsSource::Sharded(_)));
    let sharded = Model::load(config("qwen3_moe"), &src).unwrap();
    assert_eq!(logits(&sharded), logits(&single));
    assert!(
        single.layer(0).unwrap().q().weight().is_mapped()
            && sharded.layer(0).unwrap().q().weight().is_mapped(),
        "BF16 weights are used in place, in one file or a shard"
    );
    let llama = SafetensorsSource::open(fixture("llama")).unwrap();
    let f32_model = Model::load(config("llama"), &llama).unwrap();
    assert!(
        f32_model.layer(0).unwrap().q().weight().is_mapped(),
        "F32 weights are used in place"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

fn memory_copy(family: &str) -> MemorySource {
    let mut mem = MemorySource::new(Convention::HuggingFace);
    for (name, t) in all_tensors(&fixture(family).join("model.safetensors")) {
        mem.insert(name, t);
    }
    mem
}

#[test]
fn missing_and_misshapen_tensors_are_named() {
    let mut mem = memory_copy("llama");
    let good = Model::load(config("llama"), &mem).unwrap();
    assert_eq!(good.config().n_layers, 2);

    let q = "model.layers.1.self_attn.q_proj.weight";
    mem.insert(q, Tensor::from_vec(vec![0f32; 64 * 32], &[32, 64]).unwrap());
    match Model::load(config("llama"), &mem).unwrap_err() {
        Error::TensorShape {
            name,
            expected,
            got,
        } => {
            assert_eq!(
                (name.as_str(), expected, got),
                (q, vec![64, 64], vec![32, 64])
            );
        }
        other => panic!("unexpected {other}"),
    }

    let full = memory_copy("llama");
    let mut without_head = MemorySource::new(Convention::HuggingFace);
    for name in full.names().filter(|n| *n != "lm_head.weight") {
        without_head.insert(name, full.tensor(name).unwrap().unwrap());
    }
    let err = Model::load(config("llama"), &without_head)
        .unwrap_err()
        .to_string();
    assert!(err.contains("lm_head.weight"), "{err}");
}

#[test]
fn gguf_mixtral_with_per_expert_names_loads_like_the_stacked_file() {
    let src = GgufSource::open(fixture("mixtral").join("model-f16.gguf")).unwrap();
    let cfg = Config::from_metadata(&src).unwrap();
    let moe = cfg.moe.clone().unwrap();
    let mut mem = MemorySource::new(Convention::Gguf);
    for info in src.file().tensor_infos() {
        let name = info.name();
        let t = src.tensor(name).unwrap().unwrap();
        let Some((prefix, kind)) = name
            .strip_suffix("_exps.weight")
            .and_then(|s| s.rsplit_once('.'))
        else {
            mem.insert(name, t);
            continue;
        };
        // Old files: blk.N.ffn_gate.E.weight, one tensor per expert.
        let dims = t.dims().to_vec();
        for e in 0..moe.n_experts {
            let expert = t
                .slice(0, e, e + 1, 1)
                .unwrap()
                .reshape(&dims[1..])
                .unwrap();
            mem.insert(format!("{prefix}.{kind}.{e}.weight"), expert.contiguous());
        }
    }
    let stacked = Model::load(cfg.clone(), &src).unwrap();
    let per_expert = Model::load(cfg, &mem).unwrap();
    assert_eq!(logits(&per_expert), logits(&stacked));
}

#[test]
fn open_reads_a_hugging_face_directory_or_a_gguf_file() {
    let dir = Model::open(fixture("llama")).unwrap();
    let explicit = Model::load(
        config("llama"),
        &SafetensorsSource::open(fixture("llama")).unwrap(),
    )
    .unwrap();
    assert_eq!(logits(&dir), logits(&explicit));
    let gguf = Model::open(fixture("llama").join("model-f32.gguf")).unwrap();
    let want = logits(&explicit);
    for (a, b) in logits(&gguf).iter().zip(&want) {
        assert!((a - b).abs() <= 1e-4 * (1.0 + b.abs()), "{a} vs {b}");
    }
    let missing = Model::open(fixture("no-such-model"))
        .unwrap_err()
        .to_string();
    assert!(missing.contains("no-such-model"), "{missing}");
}

#[test]
fn decode_split_across_threads_gives_identical_logits() {
    use std::sync::Arc;

    use rml_host::ThreadPool;
    use rml_llm::Logits;

    let pool = Arc::new(ThreadPool::new(3).unwrap().with_min_parallel_cost(0));
    let gguf = GgufSource::open(fixture("llama").join("model-q8_0.gguf")).unwrap();
    let q8 = Model::load(Config::from_metadata(&gguf).unwrap(), &gguf).unwrap();
    for model in [
        Model::open(fixture("qwen2")).unwrap(),
        Model::open(fixture("mixtral")).unwrap(),
        q8,
    ] {
        // The prompt's logits, then those of four decoded tokens.
        let decode = |prompt: &[u32], pool: Option<Arc<ThreadPool>>| {
            let mut cache = model.new_cache(prompt.len() + 4);
            let mut ws = model.workspace(prompt.len(), prompt.len() + 4).unwrap();
            ws.set_pool(pool);
            let mut out = model
                .forward_with(prompt, &mut cache, &mut ws, Logits::All)
                .unwrap()
                .to_vec();
            for tok in [10, 11, 12, 13] {
                out.extend_from_slice(
                    model
                        .forward_with(&[tok], &mut cache, &mut ws, Logits::Last)
                        .unwrap(),
                );
            }
            out
        };
        assert_eq!(
            decode(&[7, 8, 9], Some(pool.clone())),
            decode(&[7, 8, 9], None)
        );
        // Decode after 48 positions: attention's two blocks of positions split too.
        let long: Vec<u32> = (20..68).collect();
        assert_eq!(decode(&long, Some(pool.clone())), decode(&long, None));
        // Prefill token rows split across threads (20 rows: 2 chunks of 10).
        let prefill = |pool: Option<Arc<ThreadPool>>| {
            let prompt: Vec<u32> = (20..40).collect();
            let mut cache = model.new_cache(24);
            let mut ws = model.workspace(20, 24).unwrap();
            ws.set_pool(pool);
            model
                .forward_with(&prompt, &mut cache, &mut ws, Logits::All)
                .unwrap()
                .to_vec()
        };
        // Every chunk has at least 9 rows, so it runs the kernel one thread runs.
        let two = Arc::new(ThreadPool::new(2).unwrap().with_min_parallel_cost(0));
        let alone = prefill(None);
        assert_eq!(prefill(Some(pool.clone())), alone);
        assert_eq!(prefill(Some(two)), alone);
    }
}
