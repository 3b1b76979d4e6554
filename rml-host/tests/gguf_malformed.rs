//! The malformed-GGUF corpus (`scripts/fixtures/gguf_malformed.py`): every file must
//! fail with the typed error that names the broken field; every prefix and many
//! byte flips of valid files must fail cleanly (an error, never a panic).

use std::path::{Path, PathBuf};

use rml_core::GgmlType;
use rml_host::formats::gguf::{Gguf, GgufError, GgufFile, ReadOptions};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/malformed/gguf")
}

type Check = fn(&GgufError) -> bool;

/// File name → the error it must produce.
fn expectations() -> Vec<(&'static str, Check)> {
    use GgufError as E;
    vec![
        (
            "empty.gguf",
            |e| matches!(e, E::Truncated { what, offset: 0, .. } if what == "magic"),
        ),
        (
            "truncated_header.gguf",
            |e| matches!(e, E::Truncated { what, offset: 4, needed: 4, available: 2 } if what == "version"),
        ),
        (
            "truncated_counts.gguf",
            |e| matches!(e, E::Truncated { what, offset: 16, .. } if what == "metadata_kv_count"),
        ),
        (
            "bad_magic.gguf",
            |e| matches!(e, E::BadMagic { found } if found == b"GGML"),
        ),
        ("version_0.gguf", |e| {
            matches!(e, E::UnsupportedVersion { version: 0 })
        }),
        ("version_1.gguf", |e| {
            matches!(e, E::UnsupportedVersion { version: 1 })
        }),
        ("version_4.gguf", |e| {
            matches!(e, E::UnsupportedVersion { version: 4 })
        }),
        ("version_byte_swapped.gguf", |e| {
            matches!(
                e,
                E::ByteSwapped {
                    version_le: 0x0300_0000
                }
            )
        }),
        ("magic_byte_swapped.gguf", |e| {
            matches!(e, E::ByteSwapped { .. })
        }),
        ("big_endian_writer.gguf", |e| {
            matches!(
                e,
                E::ByteSwapped {
                    version_le: 0x0300_0000
                }
            )
        }),
        (
            "huge_key_length.gguf",
            |e| matches!(e, E::StringTooLong { what, offset: 24, len: 0x100_0000_0000, .. } if what == "key #0"),
        ),
        ("huge_string_value.gguf", |e| {
            matches!(e, E::StringTooLong { what, len: 0x100_0000_0000, .. }
                if what == "value of key general.name")
        }),
        ("huge_array_count.gguf", |e| {
            matches!(e, E::CountTooLarge { what, count, .. }
                if what == "array length of key t.arr" && *count == 1 << 60)
        }),
        ("array_count_overflow.gguf", |e| {
            matches!(e, E::CountTooLarge { what, count, .. }
                if what == "array length of key t.arr" && *count == 1 << 61)
        }),
        ("huge_string_array_count.gguf", |e| {
            matches!(e, E::CountTooLarge { what, .. }
                if what == "array length of key tokenizer.ggml.tokens")
        }),
        ("huge_tensor_count.gguf", |e| {
            matches!(e, E::CountTooLarge { what, offset: 8, count, .. }
                if what == "tensor_count" && *count == 1 << 60)
        }),
        (
            "huge_kv_count.gguf",
            |e| matches!(e, E::CountTooLarge { what, offset: 16, .. } if what == "metadata_kv_count"),
        ),
        (
            "tensor_count_overflow.gguf",
            |e| matches!(e, E::CountTooLarge { what, count: u64::MAX, .. } if what == "tensor_count"),
        ),
        (
            "nested_array_depth_bomb.gguf",
            |e| matches!(e, E::NestingTooDeep { key, .. } if key == "t.bomb"),
        ),
        (
            "unknown_value_type.gguf",
            |e| matches!(e, E::UnknownValueType { key, type_id: 13, .. } if key == "t.x"),
        ),
        (
            "unknown_array_element_type.gguf",
            |e| matches!(e, E::UnknownValueType { key, type_id: 99, .. } if key == "t.arr"),
        ),
        ("empty_key.gguf", |e| {
            matches!(e, E::EmptyKey { offset: 24 })
        }),
        (
            "duplicate_key.gguf",
            |e| matches!(e, E::DuplicateKey { key, .. } if key == "t.k"),
        ),
        (
            "non_utf8_key.gguf",
            |e| matches!(e, E::InvalidUtf8 { what, offset: 32 } if what == "key #0"),
        ),
        (
            "non_utf8_string_value.gguf",
            |e| matches!(e, E::InvalidUtf8 { what, .. } if what == "value of key general.name"),
        ),
        (
            "non_utf8_tensor_name.gguf",
            |e| matches!(e, E::InvalidUtf8 { what, .. } if what == "tensor info #0 name"),
        ),
        ("alignment_zero.gguf", |e| {
            matches!(e, E::BadAlignment { alignment: 0 })
        }),
        ("alignment_not_power_of_two.gguf", |e| {
            matches!(e, E::BadAlignment { alignment: 48 })
        }),
        (
            "alignment_wrong_type.gguf",
            |e| matches!(e, E::WrongType { key, expected: "u32", found } if key == "general.alignment" && found == "u64"),
        ),
        (
            "n_dims_over_4.gguf",
            |e| matches!(e, E::TooManyDims { tensor, n_dims: 5 } if tensor == "w"),
        ),
        (
            "n_dims_huge.gguf",
            |e| matches!(e, E::TooManyDims { tensor, n_dims: u32::MAX } if tensor == "w"),
        ),
        (
            "zero_dim.gguf",
            |e| matches!(e, E::ZeroDim { tensor, axis: 1 } if tensor == "w"),
        ),
        (
            "dims_product_overflow.gguf",
            |e| matches!(e, E::SizeOverflow { tensor, .. } if tensor == "w"),
        ),
        (
            "byte_size_overflow.gguf",
            |e| matches!(e, E::SizeOverflow { tensor, .. } if tensor == "w"),
        ),
        (
            "unknown_tensor_type.gguf",
            |e| matches!(e, E::UnknownTensorType { tensor, type_id: 99 } if tensor == "w"),
        ),
        (
            "removed_tensor_type_4.gguf",
            |e| matches!(e, E::RemovedTensorType { tensor, ty: GgmlType::Q4_2 } if tensor == "w"),
        ),
        ("unsupported_iq2_xxs.gguf", |e| {
            matches!(e, E::UnsupportedTensorType { tensor, ty: GgmlType::IQ2_XXS }
                if tensor == "blk.0.ffn_down.weight")
        }),
        (
            "row_not_block_multiple.gguf",
            |e| matches!(e, E::RowNotBlockMultiple { tensor, ne0: 16, block: 32 } if tensor == "w"),
        ),
        (
            "duplicate_tensor_name.gguf",
            |e| matches!(e, E::DuplicateTensor { tensor } if tensor == "w"),
        ),
        (
            "tensor_offset_past_end.gguf",
            |e| matches!(e, E::TensorOutOfBounds { tensor, size: 16, .. } if tensor == "w"),
        ),
        (
            "tensor_offset_overflow.gguf",
            |e| matches!(e, E::TensorOutOfBounds { tensor, .. } if tensor == "w"),
        ),
        (
            "tensor_misaligned.gguf",
            |e| matches!(e, E::MisalignedTensor { tensor, offset: 16, alignment: 32 } if tensor == "w"),
        ),
        (
            "tensors_overlap.gguf",
            |e| matches!(e, E::OverlappingTensors { first, second } if first == "a" && second == "b"),
        ),
        ("data_section_past_end.gguf", |e| {
            matches!(e, E::DataOutOfBounds { .. })
        }),
        (
            "truncated_tensor_data.gguf",
            |e| matches!(e, E::TensorOutOfBounds { tensor, .. } if tensor == "b"),
        ),
        ("truncated_in_kv.gguf", |e| {
            matches!(e, E::Truncated { what, offset: 98, needed: 4, available: 2 }
                if what == "value of key llama.block_count")
        }),
        (
            "truncated_in_tensor_info.gguf",
            |e| matches!(e, E::Truncated { what, .. } if what == "dims[0] of tensor a"),
        ),
    ]
}

#[test]
fn every_corpus_file_fails_with_its_typed_error() {
    let table = expectations();
    let mut files: Vec<String> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".gguf") && n != "valid.gguf")
        .collect();
    files.sort();
    assert!(
        files.len() >= 20,
        "corpus missing: run scripts/fixtures/gguf_malformed.py"
    );
    for name in &files {
        let check = table
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("{name}: corpus file without an expectation"))
            .1;
        let path = corpus_dir().join(name);
        let err = GgufFile::open(&path).expect_err(name);
        // Errors from files name the file.
        assert!(
            err.to_string().starts_with(&path.display().to_string()),
            "{err}"
        );
        assert!(
            check(err.root()),
            "{name}: unexpected error {:?} ({})",
            err.root(),
            err.root()
        );
        // Parsing from a slice gives the same error, without the path.
        let bytes = std::fs::read(&path).unwrap();
        let slice_err = Gguf::parse(&bytes[..]).unwrap_err();
        assert_eq!(slice_err.to_string(), err.root().to_string(), "{name}");
    }
    for (name, _) in &table {
        assert!(
            files.iter().any(|f| f == name),
            "{name}: expected file missing from corpus"
        );
    }
}

#[test]
fn messages_name_the_field() {
    let read = |name: &str| {
        let bytes = std::fs::read(corpus_dir().join(name)).unwrap();
        Gguf::parse(bytes).unwrap_err().to_string()
    };
    assert_eq!(
        read("version_1.gguf"),
        "GGUF version 1 is not supported (32-bit lengths; re-convert the model)"
    );
    assert!(read("version_byte_swapped.gguf").contains("byte-swapped"));
    assert_eq!(
        read("unsupported_iq2_xxs.gguf"),
        "tensor blk.0.ffn_down.weight: type IQ2_XXS is not supported by rml"
    );
    assert_eq!(
        read("huge_array_count.gguf"),
        "array length of key t.arr at byte 45 is 1152921504606846976, but the rest of the \
         file can hold at most 2"
    );
    assert_eq!(
        read("alignment_wrong_type.gguf"),
        "key general.alignment: expected u32, found u64"
    );
}

#[test]
fn unsupported_types_can_be_listed_on_request() {
    let bytes = std::fs::read(corpus_dir().join("unsupported_iq2_xxs.gguf")).unwrap();
    let options = ReadOptions {
        allow_unsupported_types: true,
    };
    let g = Gguf::parse_with(&bytes[..], options).unwrap();
    let t = g.tensor("blk.0.ffn_down.weight").unwrap();
    assert_eq!(t.info.ggml_type(), GgmlType::IQ2_XXS);
    assert_eq!(t.data.len(), 66);
    let err = t.info.dtype().unwrap_err();
    assert!(matches!(
        err,
        GgufError::UnsupportedTensorType {
            ty: GgmlType::IQ2_XXS,
            ..
        }
    ));
}

/// The byte length a valid file needs: the end of its last tensor's data (or of its
/// header tables when it has no tensors). Shorter prefixes must fail; longer ones
/// (cutting only trailing padding) still parse.
fn needed_len(bytes: &[u8]) -> usize {
    let g = Gguf::parse(bytes).unwrap();
    g.tensor_infos()
        .iter()
        .map(|t| (t.file_offset() + t.size_bytes()) as usize)
        .max()
        .unwrap_or(0)
}

fn valid_files() -> Vec<PathBuf> {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf");
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixtures)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "gguf"))
        .collect();
    v.push(corpus_dir().join("valid.gguf"));
    v.sort();
    v
}

#[test]
fn every_prefix_of_a_valid_file_is_an_error() {
    for path in valid_files() {
        let bytes = std::fs::read(&path).unwrap();
        let g = Gguf::parse(&bytes[..]).unwrap();
        let needed = needed_len(&bytes);
        // The shortest prefix that parses; every shorter one must fail and every
        // longer one (cutting only trailing padding) must parse.
        let ok_from = (0..=bytes.len())
            .find(|&n| Gguf::parse(&bytes[..n]).is_ok())
            .unwrap();
        for n in 0..bytes.len() {
            let r = Gguf::parse(&bytes[..n]);
            assert_eq!(
                r.is_ok(),
                n >= ok_from,
                "{}: prefix of {n} bytes",
                path.display()
            );
        }
        if needed > 0 {
            assert_eq!(ok_from, needed, "{}", path.display());
        } else {
            // Without tensors the file ends with its tables, before the padding.
            let tables_end = g.data_offset() - g.alignment() + 1;
            assert!(ok_from >= tables_end as usize, "{}", path.display());
        }
    }
}

#[test]
fn byte_flips_never_panic() {
    for path in valid_files() {
        let bytes = std::fs::read(&path).unwrap();
        let mut copy = bytes.clone();
        for i in 0..bytes.len() {
            for v in [0x00, 0xFF, bytes[i] ^ 0x80, bytes[i].wrapping_add(1)] {
                copy[i] = v;
                if let Ok(g) = Gguf::parse_with(
                    &copy[..],
                    ReadOptions {
                        allow_unsupported_types: true,
                    },
                ) {
                    // Whatever parses can be fully walked.
                    for (_, v) in g.metadata() {
                        let _ = v.to_string();
                    }
                    for t in g.tensors() {
                        assert_eq!(t.data.len() as u64, t.info.size_bytes());
                    }
                }
            }
            copy[i] = bytes[i];
        }
    }
}
