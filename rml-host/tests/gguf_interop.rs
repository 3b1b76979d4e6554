//! GGUF interop: rml reads the files gguf-py's `GGUFWriter` wrote
//! (`scripts/fixtures/gguf_files.py`), exactly as their manifests describe; rml's writer
//! reproduces gguf-py's bytes; and rml writes files for
//! `scripts/interop/read_rml_gguf.py` to check with `gguf.GGUFReader`.

use std::path::{Path, PathBuf};

use rml_core::GgmlType;
use rml_host::formats::gguf::{
    Gguf, GgufFile, GgufSet, GgufWriter, OwnedValue, Value, parse_split_name,
};
use serde_json::Value as Json;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compares a value read by rml with its manifest entry (`type`, `element_type`,
/// `value`), returning a description of the first difference.
fn check_value(v: &Value<'_>, expected: &Json, path: &str) -> Result<(), String> {
    let ty = expected["type"].as_str().unwrap();
    if v.value_type().name() != ty {
        return Err(format!("{path}: type {} vs {ty}", v.value_type()));
    }
    let want = &expected["value"];
    let ok = match *v {
        Value::Array(a) => {
            let elem = expected["element_type"].as_str().unwrap();
            if a.element_type().name() != elem {
                return Err(format!(
                    "{path}: element type {} vs {elem}",
                    a.element_type()
                ));
            }
            let items = want.as_array().unwrap();
            if a.len() != items.len() as u64 {
                return Err(format!("{path}: len {} vs {}", a.len(), items.len()));
            }
            for (i, (got, want)) in a.iter().zip(items).enumerate() {
                let want = if elem == "array" {
                    want.clone()
                } else {
                    serde_json::json!({"type": elem, "value": want})
                };
                check_value(&got, &want, &format!("{path}[{i}]"))?;
            }
            true
        }
        Value::String(s) => want.as_str() == Some(s),
        Value::Bool(b) => want.as_bool() == Some(b),
        Value::F32(x) => want.as_f64() == Some(f64::from(x)),
        Value::F64(x) => want.as_f64() == Some(x),
        Value::U64(x) => want.as_u64() == Some(x),
        ref other => {
            let i = other.as_integer().unwrap();
            want.as_i64().map(i128::from) == Some(i) || want.as_u64().map(i128::from) == Some(i)
        }
    };
    if ok {
        Ok(())
    } else {
        Err(format!("{path}: value {v} vs {want}"))
    }
}

fn check_against_manifest<B: AsRef<[u8]>>(g: &Gguf<B>, manifest: &Json, name: &str) {
    assert_eq!(
        u64::from(g.version()),
        manifest["version"].as_u64().unwrap(),
        "{name}"
    );
    assert_eq!(
        g.alignment(),
        manifest["alignment"].as_u64().unwrap(),
        "{name}"
    );
    let meta = manifest["metadata"].as_array().unwrap();
    let got: Vec<_> = g.metadata().collect();
    assert_eq!(got.len(), meta.len(), "{name}: metadata count");
    for ((key, value), want) in got.iter().zip(meta) {
        assert_eq!(*key, want["key"].as_str().unwrap(), "{name}: key order");
        if let Err(e) = check_value(value, want, key) {
            panic!("{name}: {e}");
        }
        assert_eq!(g.get(key).as_ref(), Some(value));
    }
    let tensors = manifest["tensors"].as_array().unwrap();
    assert_eq!(g.tensor_count(), tensors.len(), "{name}: tensor count");
    for (t, want) in g.tensors().zip(tensors) {
        let info = t.info;
        assert_eq!(info.name(), want["name"].as_str().unwrap());
        assert_eq!(info.ggml_type().name(), want["type"].as_str().unwrap());
        let dims: Vec<u64> = want["dims"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        assert_eq!(info.dims(), &dims[..], "{name}: {}", info.name());
        assert_eq!(info.file_offset(), want["file_offset"].as_u64().unwrap());
        assert_eq!(hex(t.data), want["data_hex"].as_str().unwrap());
        assert_eq!(t.data.len() as u64, info.size_bytes());
        assert_eq!(g.tensor(info.name()).unwrap().data, t.data);
        // The data is a window into the file, not a copy.
        let base = g.bytes().as_ptr() as usize;
        assert_eq!(t.data.as_ptr() as usize - base, info.file_offset() as usize);
    }
}

fn manifest(path: &Path) -> Json {
    serde_json::from_str(&std::fs::read_to_string(path.with_extension("json")).unwrap()).unwrap()
}

fn fixture_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "gguf"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_gguf_py_fixture_reads_as_its_manifest_says() {
    let files = fixture_files();
    assert!(
        files.len() >= 7,
        "fixtures missing: run scripts/fixtures/gguf_files.py"
    );
    for path in files {
        let g = GgufFile::open(&path).unwrap_or_else(|e| panic!("{e}"));
        check_against_manifest(&g, &manifest(&path), &path.display().to_string());
    }
}

#[test]
fn all_value_types_and_tensor_types_are_covered() {
    let g = GgufFile::open(fixtures().join("all_types.gguf")).unwrap();
    let mut types: Vec<&str> = g.metadata().map(|(_, v)| v.value_type().name()).collect();
    for (_, v) in g.metadata() {
        if let Value::Array(a) = v {
            types.push(a.element_type().name());
        }
    }
    for t in [
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64",
        "f64",
    ] {
        assert!(types.contains(&t), "no {t} value in all_types.gguf");
    }
    let tys: Vec<GgmlType> = g.tensor_infos().iter().map(|t| t.ggml_type()).collect();
    for t in [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q8_0,
        GgmlType::Q4K,
    ] {
        assert!(tys.contains(&t), "no {} tensor", t.name());
    }
    // Typed getters over what gguf-py wrote.
    assert_eq!(g.get_str("general.architecture").unwrap(), "rmltest");
    assert_eq!(g.get_u32("llama.block_count").unwrap(), 2);
    assert_eq!(g.get_int::<usize>("llama.block_count").unwrap(), 2);
    assert_eq!(
        g.get_int::<u8>("t.u16")
            .map_err(|e| e.to_string())
            .unwrap_err(),
        "key t.u16: value 60000 does not fit in u8"
    );
    assert_eq!(
        g.get_str_array("t.arr_string").unwrap(),
        ["<unk>", "<s>", "</s>", "▁the", "", "日本"]
    );
    assert_eq!(g.get_f32_array("t.arr_f32").unwrap(), [0.5, -0.25, 3.0]);
    assert_eq!(g.get_int_array("t.arr_i32").unwrap(), [-7, 8, -9, 10]);
    let f32w = g.tensor("f32.weight").unwrap();
    assert_eq!(f32w.info.shape(), [2, 3]);
    let vals: Vec<f32> = f32w
        .data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(vals, [-1.0, -0.5, 0.0, 0.5, 1.0, 1.5]);
    assert_eq!(f32w.info.dtype().unwrap(), rml_core::DType::F32);
}

#[test]
fn split_set_is_one_tensor_map() {
    let dir = fixtures();
    let first = dir.join("split-00001-of-00003.gguf");
    assert_eq!(parse_split_name(&first), Some((dir.join("split"), 1, 3)));
    // Any part opens the whole set.
    let set = GgufSet::open(dir.join("split-00002-of-00003.gguf")).unwrap();
    assert_eq!(set.parts().len(), 3);
    assert_eq!(set.tensor_count(), 3);
    assert_eq!(set.metadata().get_str("general.name").unwrap(), "split set");
    let names: Vec<&str> = set.tensors().map(|t| t.info.name()).collect();
    assert_eq!(
        names,
        ["token_embd.weight", "blk.0.attn_q.weight", "output.weight"]
    );
    for (i, path) in set.paths().iter().enumerate() {
        let m = manifest(path);
        for want in m["tensors"].as_array().unwrap() {
            let t = set.tensor(want["name"].as_str().unwrap()).unwrap();
            assert_eq!(hex(t.data), want["data_hex"].as_str().unwrap(), "part {i}");
        }
    }
    // A plain file is a set of one.
    let single = GgufSet::open(dir.join("v2.gguf")).unwrap();
    assert_eq!(single.parts().len(), 1);
    assert!(single.tensor("w").is_some());
}

/// Copies a parsed file into a writer: same metadata order, tensors, alignment.
fn rewrite<'a, B: AsRef<[u8]>>(g: &'a Gguf<B>) -> GgufWriter<'a> {
    let mut w = GgufWriter::new();
    w.set_version(g.version()).unwrap();
    for (k, v) in g.metadata() {
        w.add_kv(k, v.to_owned_value()).unwrap();
    }
    for t in g.tensors() {
        w.add_tensor(t.info.name(), t.info.ggml_type(), t.info.dims(), t.data)
            .unwrap();
    }
    w
}

#[test]
fn rml_writer_reproduces_gguf_py_bytes() {
    for path in fixture_files() {
        let original = std::fs::read(&path).unwrap();
        let g = Gguf::parse(&original[..]).unwrap();
        let bytes = rewrite(&g).to_bytes().unwrap();
        assert!(
            bytes == original,
            "{}: rml's bytes differ from gguf-py's",
            path.display()
        );
    }
}

/// Files rml writes for `scripts/interop/read_rml_gguf.py`; that script holds the
/// same expectations and checks them with `gguf.GGUFReader`.
fn interop_files() -> Vec<(&'static str, Vec<u8>)> {
    let f32s: Vec<u8> = (0..12)
        .flat_map(|i| (i as f32 * 0.25 - 1.0).to_le_bytes())
        .collect();
    let f16s: Vec<u8> = [1.0f32, -2.0, 0.5, 0.0]
        .iter()
        .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
        .collect();
    // Q8_0: two blocks, scale 0.5 (f16 0x3800), quants -16..16.
    let q8: Vec<u8> = (0..2)
        .flat_map(|_| {
            let mut b = vec![0x00, 0x38];
            b.extend((0..32).map(|i| (i as i8 - 16) as u8));
            b
        })
        .collect();
    let q4k: Vec<u8> = (0..144u32).map(|i| (i * 7 % 256) as u8).collect();

    let mut out = Vec::new();
    let mut w = GgufWriter::new();
    w.add_kv("general.architecture", "llama").unwrap();
    w.add_kv("general.name", "rml interop ✓").unwrap();
    w.add_kv("llama.block_count", 2u32).unwrap();
    w.add_kv("t.u8", 200u8).unwrap();
    w.add_kv("t.i8", -100i8).unwrap();
    w.add_kv("t.u16", 60000u16).unwrap();
    w.add_kv("t.i16", -30000i16).unwrap();
    w.add_kv("t.i32", -2_000_000_000i32).unwrap();
    w.add_kv("t.f32", 1.5f32).unwrap();
    w.add_kv("t.bool", true).unwrap();
    w.add_kv("t.u64", u64::MAX).unwrap();
    w.add_kv("t.i64", i64::MIN).unwrap();
    w.add_kv("t.f64", -0.125f64).unwrap();
    w.add_kv(
        "tokenizer.ggml.tokens",
        OwnedValue::strings(["<s>", "</s>", "▁hi", ""]),
    )
    .unwrap();
    w.add_kv(
        "tokenizer.ggml.scores",
        OwnedValue::array([0.0f32, -1.0, -2.5, 3.0]),
    )
    .unwrap();
    w.add_kv("t.arr_i64", OwnedValue::array([i64::MIN, 0, i64::MAX]))
        .unwrap();
    w.add_tensor("f32.weight", GgmlType::F32, &[4, 3], &f32s)
        .unwrap();
    w.add_tensor("f16.weight", GgmlType::F16, &[4], &f16s)
        .unwrap();
    w.add_tensor("q8_0.weight", GgmlType::Q8_0, &[64], &q8)
        .unwrap();
    w.add_tensor("q4_k.weight", GgmlType::Q4K, &[256], &q4k)
        .unwrap();
    out.push(("rml_basic.gguf", w.to_bytes().unwrap()));

    let mut w = GgufWriter::new();
    w.add_kv("general.architecture", "llama").unwrap();
    w.set_alignment(64).unwrap();
    w.add_tensor("a", GgmlType::F32, &[3], &f32s[..12]).unwrap();
    w.add_tensor("b", GgmlType::F16, &[2, 2], &f16s).unwrap();
    out.push(("rml_align64.gguf", w.to_bytes().unwrap()));

    let mut w = GgufWriter::new();
    w.set_version(2).unwrap();
    w.add_kv("general.architecture", "llama").unwrap();
    w.add_tensor("w", GgmlType::F32, &[12], &f32s).unwrap();
    out.push(("rml_v2.gguf", w.to_bytes().unwrap()));
    out
}

#[test]
fn rml_writes_files_for_gguf_py() {
    let dir = match std::env::var_os("RML_INTEROP_OUT") {
        Some(d) => PathBuf::from(d),
        None => std::env::temp_dir().join(format!("rml-gguf-interop-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in interop_files() {
        // rml reads back what it wrote, and the layout is what ggml demands: each
        // tensor at the running sum of the previous padded sizes.
        let g = Gguf::parse(&bytes[..]).unwrap();
        let mut expect = 0;
        for t in g.tensor_infos() {
            assert_eq!(t.offset(), expect, "{name}: {}", t.name());
            expect += t.size_bytes().div_ceil(g.alignment()) * g.alignment();
        }
        assert_eq!(
            bytes.len() as u64,
            g.data_offset() + expect,
            "{name}: trailing padding"
        );
        std::fs::write(dir.join(name), &bytes).unwrap();
        let reopened = GgufFile::open(dir.join(name)).unwrap();
        assert_eq!(reopened.metadata_len(), g.metadata_len());
    }
    if std::env::var_os("RML_INTEROP_OUT").is_none() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
