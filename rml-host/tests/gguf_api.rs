//! The GGUF API over files rml builds in memory: typed getters and their messages,
//! value display, writer validation, and split-set checks.

use std::path::PathBuf;

use rml_core::GgmlType;
use rml_host::formats::gguf::{
    Gguf, GgufError, GgufSet, GgufWriter, OwnedValue, Value, ValueType, split_path,
};

fn sample() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.add_kv("general.architecture", "llama").unwrap();
    w.add_kv("llama.block_count", "two").unwrap();
    w.add_kv("llama.context_length", 4096u64).unwrap();
    w.add_kv("llama.neg", -1i32).unwrap();
    w.add_kv("t.tokens", OwnedValue::strings(["a", "b"]))
        .unwrap();
    w.add_kv("t.types", OwnedValue::array([1u8, 2, 3])).unwrap();
    w.add_kv(
        "t.nested",
        OwnedValue::Array {
            element_type: ValueType::Array,
            items: vec![OwnedValue::array([1i32, 2]), OwnedValue::array([3i32])],
        },
    )
    .unwrap();
    w.add_kv("t.many", OwnedValue::array((0..20).map(|i| i as f32)))
        .unwrap();
    w.to_bytes().unwrap()
}

#[test]
fn typed_getters_name_key_and_types() {
    let bytes = sample();
    let g = Gguf::parse(&bytes[..]).unwrap();
    let err = g.get_u32("llama.block_count").unwrap_err();
    assert_eq!(
        err.to_string(),
        "key llama.block_count: expected u32, found string"
    );
    assert!(matches!(
        g.get_u32("llama.missing").unwrap_err(),
        GgufError::MissingKey { ref key } if key == "llama.missing"
    ));
    assert_eq!(
        g.get_str("t.tokens").unwrap_err().to_string(),
        "key t.tokens: expected string, found array of string"
    );
    assert_eq!(
        g.get_f32_array("t.tokens").unwrap_err().to_string(),
        "key t.tokens: expected array of f32, found array of string"
    );
    // Lenient integers: any width that fits.
    assert_eq!(g.get_int::<u32>("llama.context_length").unwrap(), 4096);
    assert_eq!(g.get_int::<i8>("llama.neg").unwrap(), -1);
    assert_eq!(
        g.get_int::<u64>("llama.neg").unwrap_err().to_string(),
        "key llama.neg: value -1 does not fit in u64"
    );
    assert_eq!(
        g.get_int::<u32>("general.architecture")
            .unwrap_err()
            .to_string(),
        "key general.architecture: expected integer, found string"
    );
    assert_eq!(g.get_int_array("t.types").unwrap(), [1, 2, 3]);
    assert_eq!(g.get_str_array("t.tokens").unwrap(), ["a", "b"]);
}

#[test]
fn values_display_for_inspect() {
    let bytes = sample();
    let g = Gguf::parse(&bytes[..]).unwrap();
    let shown: Vec<String> = g.metadata().map(|(k, v)| format!("{k} = {v}")).collect();
    assert_eq!(
        shown,
        [
            "general.architecture = \"llama\"",
            "llama.block_count = \"two\"",
            "llama.context_length = 4096",
            "llama.neg = -1",
            "t.tokens = [string; 2] [\"a\", \"b\"]",
            "t.types = [u8; 3] [1, 2, 3]",
            "t.nested = [array; 2] [[i32; 2] [1, 2], [i32; 1] [3]]",
            "t.many = [f32; 20] [0, 1, 2, 3, 4, 5, 6, 7, …]",
        ]
    );
    let Some(Value::Array(nested)) = g.get("t.nested") else {
        panic!("not an array")
    };
    let inner: Vec<Value<'_>> = nested.iter().collect();
    assert_eq!(inner.len(), 2);
    // Read values convert back to what was written.
    assert_eq!(
        g.get("t.nested").unwrap().to_owned_value(),
        OwnedValue::Array {
            element_type: ValueType::Array,
            items: vec![OwnedValue::array([1i32, 2]), OwnedValue::array([3i32])],
        }
    );
}

#[test]
fn writer_rejects_what_ggml_would() {
    let data = [0u8; 64];
    let mut w = GgufWriter::new();
    w.add_kv("a", 1u32).unwrap();
    let msg = |e: GgufError| e.to_string();
    assert_eq!(
        msg(w.add_kv("a", 2u32).unwrap_err()),
        "cannot write key a: duplicate key"
    );
    assert!(w.add_kv("", 2u32).is_err());
    assert!(msg(w.set_alignment(48).unwrap_err()).contains("not a non-zero power of two"));
    assert!(msg(w.add_kv("general.alignment", 64u64).unwrap_err()).contains("must be u32"));
    let mixed = OwnedValue::Array {
        element_type: ValueType::U8,
        items: vec![OwnedValue::U8(1), OwnedValue::U16(2)],
    };
    assert!(msg(w.add_kv("mixed", mixed).unwrap_err()).contains("array element 1 is u16"));
    assert!(msg(w.add_tensor("t", GgmlType::F32, &[4], &data).unwrap_err()).contains("need 16"));
    assert!(
        w.add_tensor("t", GgmlType::Q4_0, &[16], &data[..9])
            .is_err()
    );
    assert!(w.add_tensor("t", GgmlType::F32, &[4, 0], &[]).is_err());
    assert!(
        w.add_tensor("t", GgmlType::F32, &[1, 1, 1, 1, 1], &data[..4])
            .is_err()
    );
    assert!(
        w.add_tensor("t", GgmlType::Q4_2, &[32], &data[..18])
            .is_err()
    );
    assert!(
        w.add_tensor(&"x".repeat(64), GgmlType::F32, &[1], &data[..4])
            .is_err()
    );
    w.add_tensor("t", GgmlType::F32, &[4], &data[..16]).unwrap();
    assert!(w.add_tensor("t", GgmlType::F32, &[4], &data[..16]).is_err());
    assert!(w.set_version(1).is_err());
}

#[test]
fn huge_alignment_pads_by_streaming() {
    let data = [0u8; 4];
    let mut w = GgufWriter::new();
    w.set_alignment(1 << 20).unwrap();
    w.add_tensor("t", GgmlType::F32, &[1], &data).unwrap();
    let written = w.write_to(std::io::sink()).unwrap();
    assert_eq!(written, 2 << 20);
    let bytes = w.to_bytes().unwrap();
    let g = Gguf::parse(&bytes[..]).unwrap();
    assert_eq!(g.data_offset(), 1 << 20);
    assert_eq!(g.tensor("t").unwrap().data, data);
}

fn part(no: u16, count: u16, total: i32, names: &[&str], data: &[u8]) -> Vec<u8> {
    let mut w = GgufWriter::new();
    if no == 0 {
        w.add_kv("general.architecture", "llama").unwrap();
    }
    w.add_kv("split.no", no).unwrap();
    w.add_kv("split.count", count).unwrap();
    w.add_kv("split.tensors.count", total).unwrap();
    for n in names {
        w.add_tensor(n, GgmlType::F32, &[1], data).unwrap();
    }
    w.to_bytes().unwrap()
}

fn set(parts: &[Vec<u8>]) -> Result<GgufSet<&[u8]>, GgufError> {
    GgufSet::from_parts(
        parts
            .iter()
            .enumerate()
            .map(|(i, b)| {
                (
                    split_path(&PathBuf::from("m"), i as u32 + 1, parts.len() as u32),
                    Gguf::parse(&b[..]).unwrap(),
                )
            })
            .collect(),
    )
}

#[test]
fn split_sets_are_checked() {
    let one = 1f32.to_le_bytes();
    let ok = [
        part(0, 2, 3, &["a", "b"], &one),
        part(1, 2, 3, &["c"], &one),
    ];
    let s = set(&ok).unwrap();
    assert_eq!(s.tensor_count(), 3);
    assert_eq!(s.tensor("c").unwrap().data, one);
    assert_eq!(s.paths()[1], PathBuf::from("m-00002-of-00002.gguf"));
    assert!(matches!(
        s.require_tensor("zz"),
        Err(GgufError::MissingTensor { .. })
    ));

    let swapped = [
        part(1, 2, 3, &["c"], &one),
        part(0, 2, 3, &["a", "b"], &one),
    ];
    assert!(
        set(&swapped)
            .unwrap_err()
            .to_string()
            .contains("split.no = 1")
    );
    let missing = [
        part(0, 3, 3, &["a", "b"], &one),
        part(1, 3, 3, &["c"], &one),
    ];
    assert!(
        set(&missing)
            .unwrap_err()
            .to_string()
            .contains("split.count = 3")
    );
    let wrong_total = [
        part(0, 2, 4, &["a", "b"], &one),
        part(1, 2, 4, &["c"], &one),
    ];
    assert!(
        set(&wrong_total)
            .unwrap_err()
            .to_string()
            .contains("split.tensors.count is 4")
    );
    let dup = [
        part(0, 2, 3, &["a", "b"], &one),
        part(1, 2, 3, &["a"], &one),
    ];
    let err = set(&dup).unwrap_err();
    assert!(matches!(err.root(), GgufError::DuplicateTensor { tensor } if tensor == "a"));
    assert!(err.to_string().starts_with("m-00002-of-00002.gguf: "));
    // A lone file claiming to be part of a set.
    assert!(set(&[part(0, 2, 2, &["a"], &one)]).is_err());
    assert!(set(&[]).is_err());
}

#[test]
fn split_names_parse_strictly() {
    use rml_host::formats::gguf::parse_split_name;
    let p = |s: &str| parse_split_name(std::path::Path::new(s));
    assert_eq!(
        p("dir/model-00002-of-00003.gguf"),
        Some((PathBuf::from("dir/model"), 2, 3))
    );
    for bad in [
        "model.gguf",
        "model-00000-of-00003.gguf",
        "model-00004-of-00003.gguf",
        "-00001-of-00002.gguf",
        "model-0001-of-00002.gguf",
        "model-00001-of-00002.bin",
        "modèle_00001-of-00002.gguf",
    ] {
        assert_eq!(p(bad), None, "{bad}");
    }
    assert_eq!(
        split_path(std::path::Path::new("dir/model"), 7, 12),
        PathBuf::from("dir/model-00007-of-00012.gguf")
    );
}
