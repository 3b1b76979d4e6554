//! Decoding with a prepared `Workspace` and KV cache allocates nothing: a counting
//! global allocator watches the test thread while prefill and decode steps run.

use std::path::PathBuf;

use rml_llm::{Config, GgufSource, KvDtype, Logits, Model, SafetensorsSource};

#[path = "support/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::allocations;

fn fixture(family: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/decoder")
        .join(family)
}

fn hf_model(family: &str) -> Model {
    let dir = fixture(family);
    let config = Config::from_hf_dir(&dir).unwrap();
    Model::load(config, &SafetensorsSource::open(&dir).unwrap()).unwrap()
}

fn assert_decode_allocates_nothing(name: &str, model: &Model, kv: KvDtype) {
    let mut cache = model.new_cache_with(24, kv);
    // Ten prompt tokens take the packed-GEMM prefill path, single tokens the GEMV.
    let mut ws = model.workspace(10, cache.capacity()).unwrap();
    let prompt: Vec<u32> = (1..=10).collect();
    let n = allocations(|| {
        model
            .forward_with(&prompt, &mut cache, &mut ws, Logits::All)
            .unwrap();
        for tok in 11..18 {
            let logits = model
                .forward_with(&[tok], &mut cache, &mut ws, Logits::Last)
                .unwrap();
            assert!(logits.iter().all(|v| v.is_finite()));
        }
    });
    assert_eq!(n, 0, "{name}: {n} allocations during prefill and decode");
    assert_eq!(cache.len(), 17);
}

#[test]
fn dense_moe_gemma_and_quantized_models_decode_without_allocating() {
    let probe = allocations(|| drop(std::hint::black_box(vec![0u8; 64])));
    assert_eq!(probe, 1, "the counter must see allocations");
    for family in ["llama", "mixtral", "qwen3_moe", "gemma2", "gemma3", "phi3"] {
        assert_decode_allocates_nothing(family, &hf_model(family), KvDtype::F32);
    }
    let src = GgufSource::open(fixture("llama").join("model-q8_0.gguf")).unwrap();
    let q8 = Model::load(Config::from_metadata(&src).unwrap(), &src).unwrap();
    assert_decode_allocates_nothing("llama q8_0", &q8, KvDtype::F32);
    assert_decode_allocates_nothing("llama q8_0, f16 cache", &q8, KvDtype::F16);
}

#[test]
fn decode_split_across_a_pool_allocates_nothing_on_the_calling_thread() {
    use std::sync::Arc;

    let pool = Arc::new(
        rml_host::ThreadPool::new(2)
            .unwrap()
            .with_min_parallel_cost(0),
    );
    let src = GgufSource::open(fixture("llama").join("model-q8_0.gguf")).unwrap();
    let model = Model::load(Config::from_metadata(&src).unwrap(), &src).unwrap();
    let mut cache = model.new_cache(24);
    let mut ws = model.workspace(1, cache.capacity()).unwrap();
    ws.set_pool(Some(pool));
    // The first call starts the pool's team (that allocates); later ones do not.
    model
        .forward_with(&[1], &mut cache, &mut ws, Logits::Last)
        .unwrap();
    let n = allocations(|| {
        for tok in 2..10 {
            model
                .forward_with(&[tok], &mut cache, &mut ws, Logits::Last)
                .unwrap();
        }
    });
    assert_eq!(n, 0, "{n} allocations during threaded decode");
}

#[test]
fn workspace_too_small_is_an_error() {
    let model = hf_model("qwen2");
    let mut cache = model.new_cache(8);
    let mut ws = model.workspace(1, 8).unwrap();
    let err = model
        .forward_with(&[1, 2], &mut cache, &mut ws, Logits::All)
        .unwrap_err();
    assert!(err.to_string().contains("workspace"), "{err}");
    let err = model
        .forward_with(&[9999], &mut cache, &mut ws, Logits::All)
        .unwrap_err();
    assert!(err.to_string().contains("vocabulary"), "{err}");
    let mut full = model.new_cache(1);
    model.forward(&[1], &mut full).unwrap();
    let err = model.forward(&[2], &mut full).unwrap_err();
    assert!(err.to_string().contains("KV cache"), "{err}");
}

#[test]
fn last_logits_equal_the_last_row_of_all_logits() {
    for family in ["gemma2", "phi3"] {
        let model = hf_model(family);
        let vocab = model.config().vocab_size;
        let prompt = [5, 17, 3, 250, 9, 9, 1, 44, 2, 100, 7];
        let all = model.forward(&prompt, &mut model.new_cache(16)).unwrap();
        let mut cache = model.new_cache(16);
        let mut ws = model.workspace(prompt.len(), 16).unwrap();
        let last = model
            .forward_with(&prompt, &mut cache, &mut ws, Logits::Last)
            .unwrap();
        // One row runs on the GEMV, eleven on the GEMM: equal up to rounding.
        let want = &all[all.len() - vocab..];
        assert_eq!(last.len(), vocab);
        for (a, b) in last.iter().zip(want) {
            assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
        }
        let err = model
            .forward_with(&[], &mut cache, &mut ws, Logits::Last)
            .unwrap_err();
        assert!(err.to_string().contains("no tokens"), "{err}");
    }
}
