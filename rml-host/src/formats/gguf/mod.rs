//! GGUF, the model file format of ggml and llama.cpp: reading (v2 and v3), writing
//! (v3, or v2 on request) and split sets.
//!
//! - [`Gguf`] parses and validates a whole file held in any byte storage; every count
//!   and length read from the file is checked against the bytes left before anything
//!   is sized by it, all offset arithmetic is overflow-checked, and tensor data is
//!   served as zero-copy `&[u8]` windows. [`GgufFile`] is a `Gguf` over an mmap.
//! - [`GgufSet`] opens a split set (`name-00001-of-00003.gguf`) as one tensor map.
//! - [`GgufWriter`] writes the layout ggml requires.
//! - [`GgufError`] says what was wrong and where (key, tensor, byte offset, path).
//!
//! What is accepted and rejected is listed in `docs/formats.md` (section GGUF).
//! Parsing is safe Rust; the one `unsafe` call (creating the mmap) is fenced in
//! `file.rs`.

#![deny(unsafe_code)]

mod cursor;
mod error;
mod file;
mod reader;
mod split;
mod value;
mod writer;

pub use error::{GgufError, Result};
pub use file::{GgufFile, MappedFile};
pub use reader::{Gguf, ReadOptions, TensorInfo, TensorRef};
pub use split::{
    GgufSet, KEY_SPLIT_COUNT, KEY_SPLIT_NO, KEY_SPLIT_TENSORS_COUNT, parse_split_name, split_path,
};
pub use value::{ArrayElement, ArrayIter, ArrayValue, OwnedValue, Value, ValueType};
pub use writer::GgufWriter;

/// The four bytes every GGUF file starts with.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// Data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The key that sets the data alignment (u32, a non-zero power of two).
pub const KEY_ALIGNMENT: &str = "general.alignment";
/// The most dimensions a tensor may have (`GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;
/// The deepest array nesting accepted (an array of arrays is depth 2). ggml itself
/// rejects nested arrays; gguf-py reads them.
pub const MAX_ARRAY_DEPTH: usize = 8;
/// The longest tensor name ggml accepts (`GGML_MAX_NAME - 1`); enforced by the writer.
pub const MAX_TENSOR_NAME_LEN: usize = 63;
