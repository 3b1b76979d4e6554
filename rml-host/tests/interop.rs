//! Interop with the reference implementations, both ways.
//!
//! - Files written by the Python `safetensors` package and by NumPy
//!   (`scripts/fixtures/host_formats.py` → `tests/fixtures/host_formats/`) must read
//!   back with the dtype, shape and values the script's `manifest.json` lists.
//! - rml's writers must produce the same bytes as the reference writers.
//! - `rml_writes_files_for_python` writes files (into `$RML_INTEROP_OUT` when set,
//!   else a temporary folder) that `scripts/interop/read_rml_files.py` checks with the
//!   Python packages (`ci/test interop`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rml_core::DType;
use rml_host::Tensor;
use rml_host::formats::checkpoint::Checkpoint;
use rml_host::formats::npy::{self, Npz};
use rml_host::formats::safetensors::{self, SafeTensors, ShardedSafeTensors};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/host_formats")
}

fn load(file: &str, name: &str) -> Tensor {
    let path = fixtures().join(file);
    if file.ends_with(".index.json") {
        ShardedSafeTensors::open(&path).unwrap().get(name).unwrap()
    } else if file.ends_with(".safetensors") {
        SafeTensors::open(&path).unwrap().get(name).unwrap()
    } else if file.ends_with(".npz") {
        Npz::open(&path).unwrap().get(name).unwrap()
    } else {
        npy::open(&path).unwrap()
    }
}

#[test]
fn python_written_fixtures_read_back_exactly() {
    let text = std::fs::read_to_string(fixtures().join("manifest.json")).unwrap();
    let manifest: serde_json::Value = serde_json::from_str(&text).unwrap();
    let entries = manifest.as_array().unwrap();
    assert!(
        entries.len() >= 40,
        "manifest lists {} tensors",
        entries.len()
    );
    for e in entries {
        let file = e["file"].as_str().unwrap();
        let name = e["name"].as_str().unwrap();
        let t = load(file, name);
        let what = format!("{file}:{name}");
        assert_eq!(t.dtype().name(), e["dtype"].as_str().unwrap(), "{what}");
        let shape: Vec<usize> = e["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect();
        assert_eq!(t.dims(), shape.as_slice(), "{what}");
        let expected: Vec<f64> = e["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(t.to_f64_vec().unwrap(), expected, "{what}");
    }
}

#[test]
fn metadata_and_zero_copy_storage() {
    let st = SafeTensors::open(fixtures().join("dtypes.safetensors")).unwrap();
    assert_eq!(st.metadata()["source"], "safetensors-python");
    let t = st.get("t_float32").unwrap();
    assert_eq!(t.storage_kind(), rml_host::StorageKind::Mapped);
    assert!(t.shares_storage_with(&st.get("t_int8").unwrap()));
    // The official writer aligns every tensor, so views are zero-copy.
    for info in st.tensors() {
        assert!(st.tensor(info).unwrap().is_aligned(), "{}", info.name);
    }
    let v = t.view::<f32>().unwrap();
    assert_eq!(v.shape().dims(), &[5]);
    let f = npy::open(fixtures().join("fortran_f4.npy")).unwrap();
    assert!(!f.is_contiguous());
    assert_eq!(f.storage_kind(), rml_host::StorageKind::Mapped);
    let set =
        ShardedSafeTensors::open(fixtures().join("sharded/model.safetensors.index.json")).unwrap();
    assert_eq!(set.len(), 4);
    assert_eq!(set.shards().len(), 2);
    let npz = Npz::open(fixtures().join("arrays_compressed.npz")).unwrap();
    assert!(npz.members().iter().all(|m| m.compressed));
}

#[test]
fn rml_writers_match_the_reference_writers_byte_for_byte() {
    for file in [
        "dtypes.safetensors",
        "special.safetensors",
        "bf16.safetensors",
        "sharded/model-00001-of-00002.safetensors",
        "sharded/model-00002-of-00002.safetensors",
    ] {
        let bytes = std::fs::read(fixtures().join(file)).unwrap();
        let st = SafeTensors::from_bytes(&bytes).unwrap();
        let all = st.load_all().unwrap();
        let named: Vec<(&str, &Tensor)> = all.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let meta = st.header().has_metadata.then(|| st.metadata().clone());
        let ours = safetensors::serialize(&named, meta.as_ref()).unwrap();
        assert!(
            ours == bytes,
            "{file}: rml's bytes differ from the official writer's"
        );
    }
    for file in [
        "f2.npy",
        "f4.npy",
        "f8.npy",
        "i1.npy",
        "i2.npy",
        "i4.npy",
        "i8.npy",
        "u1.npy",
        "b1.npy",
        "scalar_f8.npy",
        "empty_i8.npy",
    ] {
        let bytes = std::fs::read(fixtures().join(file)).unwrap();
        let t = npy::from_bytes(&bytes).unwrap();
        assert!(
            npy::to_bytes(&t).unwrap() == bytes,
            "{file}: header or data differs from np.save"
        );
    }
}

/// Deterministic values for the files rml writes (exact in every dtype).
fn sample(dtype: DType, dims: &[usize], seed: i64) -> Tensor {
    let n: usize = dims.iter().product();
    let ints: Vec<i64> = (0..n as i64).map(|i| (i * 7 + seed) % 200 - 100).collect();
    let floats: Vec<f64> = (0..n as i64)
        .map(|i| i as f64 * 0.25 - 1.5 + seed as f64)
        .collect();
    match dtype {
        DType::F64 => Tensor::from_vec(floats, dims),
        DType::F32 => Tensor::from_vec(floats.iter().map(|&v| v as f32).collect::<Vec<_>>(), dims),
        DType::F16 => Tensor::from_vec(
            floats
                .iter()
                .map(|&v| half::f16::from_f64(v))
                .collect::<Vec<_>>(),
            dims,
        ),
        DType::BF16 => Tensor::from_vec(
            floats
                .iter()
                .map(|&v| half::bf16::from_f64(v))
                .collect::<Vec<_>>(),
            dims,
        ),
        DType::I64 => Tensor::from_vec(ints, dims),
        DType::I32 => Tensor::from_vec(ints.iter().map(|&v| v as i32).collect::<Vec<_>>(), dims),
        DType::I16 => Tensor::from_vec(ints.iter().map(|&v| v as i16).collect::<Vec<_>>(), dims),
        DType::I8 => Tensor::from_vec(ints.iter().map(|&v| v as i8).collect::<Vec<_>>(), dims),
        DType::U8 => Tensor::from_vec(
            (0..n as i64)
                .map(|i| ((i * 37 + seed) % 256) as u8)
                .collect::<Vec<_>>(),
            dims,
        ),
        DType::Bool => Tensor::from_bools(
            &(0..n as i64)
                .map(|i| (i + seed) % 3 == 0)
                .collect::<Vec<_>>(),
            dims,
        ),
        other => panic!("no sample for {other}"),
    }
    .unwrap()
}

fn manifest_entry(file: &str, name: &str, t: &Tensor) -> serde_json::Value {
    serde_json::json!({
        "file": file,
        "name": name,
        "dtype": t.dtype().name(),
        "shape": t.dims(),
        "values": t.to_f64_vec().unwrap(),
    })
}

#[test]
fn rml_writes_files_for_python() {
    let out = match std::env::var_os("RML_INTEROP_OUT") {
        Some(dir) => PathBuf::from(dir),
        None => std::env::temp_dir().join(format!("rml-interop-{}", std::process::id())),
    };
    std::fs::create_dir_all(&out).unwrap();
    let mut manifest = Vec::new();

    let scalar_dtypes = [
        DType::F64,
        DType::F32,
        DType::F16,
        DType::I64,
        DType::I32,
        DType::I16,
        DType::I8,
        DType::U8,
        DType::Bool,
    ];
    // safetensors with every numpy-expressible dtype and one metadata key.
    let tensors: Vec<(String, Tensor)> = scalar_dtypes
        .iter()
        .enumerate()
        .map(|(k, &d)| {
            (
                format!("t_{}", d.name().to_lowercase()),
                sample(d, &[2, k + 1], k as i64),
            )
        })
        .collect();
    let named: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut meta = BTreeMap::new();
    meta.insert("writer".to_string(), "rml".to_string());
    safetensors::save(out.join("rml_dtypes.safetensors"), &named, Some(&meta)).unwrap();
    for (n, t) in &tensors {
        manifest.push(manifest_entry("rml_dtypes.safetensors", n, t));
    }
    // BF16, a transposed (non-contiguous) tensor, a scalar and an empty tensor.
    let bf16 = sample(DType::BF16, &[3, 2], 1);
    let transposed = sample(DType::F32, &[2, 3], 2).transpose(0, 1).unwrap();
    let scalar = sample(DType::F64, &[], 3);
    let empty = sample(DType::I32, &[0, 4], 0);
    let extra = [
        ("bf16", &bf16),
        ("transposed", &transposed),
        ("scalar", &scalar),
        ("empty", &empty),
    ];
    safetensors::save(out.join("rml_special.safetensors"), &extra, None).unwrap();
    for (n, t) in extra {
        manifest.push(manifest_entry("rml_special.safetensors", n, t));
    }
    // .npy of every dtype, and a non-contiguous one.
    for (k, &d) in scalar_dtypes.iter().enumerate() {
        let t = sample(d, &[3, 2], k as i64);
        let file = format!("rml_{}.npy", d.name().to_lowercase());
        npy::save(out.join(&file), &t).unwrap();
        manifest.push(manifest_entry(&file, "", &t));
    }
    npy::save(out.join("rml_transposed.npy"), &transposed).unwrap();
    manifest.push(manifest_entry("rml_transposed.npy", "", &transposed));
    // .npz (stored members).
    let a = sample(DType::F32, &[2, 2], 4);
    let b = sample(DType::I64, &[3], 5);
    npy::save_npz(out.join("rml_arrays.npz"), &[("a", &a), ("b", &b)]).unwrap();
    manifest.push(manifest_entry("rml_arrays.npz", "a", &a));
    manifest.push(manifest_entry("rml_arrays.npz", "b", &b));
    // A checkpoint.
    let mut ck = Checkpoint::new(42);
    ck.metadata.insert("optimizer".into(), "sgd".into());
    ck.insert("layer.w", sample(DType::F32, &[2, 3], 6));
    ck.save(out.join("rml_checkpoint.safetensors")).unwrap();
    manifest.push(manifest_entry(
        "rml_checkpoint.safetensors",
        "layer.w",
        &ck.tensors["layer.w"],
    ));

    let text = serde_json::to_string_pretty(&serde_json::Value::Array(manifest.clone())).unwrap();
    std::fs::write(out.join("manifest.json"), text).unwrap();

    // rml reads back what it wrote.
    for e in &manifest {
        let file = e["file"].as_str().unwrap();
        let name = e["name"].as_str().unwrap();
        let path = out.join(file);
        let t = if file.ends_with(".safetensors") {
            SafeTensors::open(&path).unwrap().get(name).unwrap()
        } else if file.ends_with(".npz") {
            Npz::open(&path).unwrap().get(name).unwrap()
        } else {
            npy::open(&path).unwrap()
        };
        let values: Vec<f64> = e["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(t.to_f64_vec().unwrap(), values, "{file}:{name}");
    }
    let back = Checkpoint::load(out.join("rml_checkpoint.safetensors")).unwrap();
    assert_eq!(back.step, 42);
    assert_eq!(back.metadata["optimizer"], "sgd");
    if std::env::var_os("RML_INTEROP_OUT").is_none() {
        std::fs::remove_dir_all(&out).unwrap();
    }
}
