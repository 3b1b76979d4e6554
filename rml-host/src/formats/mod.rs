//! File formats, each read by mmap and validated completely before use, each with a
//! writer: [`safetensors`] (single files and sharded sets), [`npy`] (`.npy` and
//! `.npz`), and [`checkpoint`] (named tensors plus training metadata, stored as
//! safetensors).
//!
//! Readers take a file image (`&[u8]` or a [`crate::Buffer`]) so they can be fuzzed
//! without touching the file system; the `open` functions map the file and attach its
//! path to errors.
#![deny(unsafe_code)]

pub mod checkpoint;
pub mod gguf;
pub mod npy;
pub mod safetensors;
mod zip;

use std::io::{BufWriter, Write};
use std::path::Path;

use crate::error::{Error, Result};

/// The formats [`detect`] recognises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A single safetensors file.
    SafeTensors,
    /// A sharded safetensors set's `*.index.json`.
    SafeTensorsIndex,
    /// A GGUF file.
    Gguf,
    /// A NumPy `.npy` array.
    Npy,
    /// A NumPy `.npz` archive (a zip file).
    Npz,
    /// An rml-graph document (`*.json` other than a sharded safetensors index).
    Graph,
}

/// Guesses a file's format from its first bytes and its name: `\x93NUMPY` is `.npy`,
/// `PK\x03\x04` or `PK\x05\x06` a `.npz`, `GGUF` a GGUF file, a name ending in
/// `.index.json` a sharded safetensors index, any other `.json` an rml-graph, and
/// anything else safetensors.
pub fn detect(path: &Path, head: &[u8]) -> FileKind {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if head.starts_with(npy::MAGIC) {
        FileKind::Npy
    } else if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        FileKind::Npz
    } else if head.starts_with(b"GGUF") {
        FileKind::Gguf
    } else if name.ends_with(".index.json") {
        FileKind::SafeTensorsIndex
    } else if name.ends_with(".json") {
        FileKind::Graph
    } else {
        FileKind::SafeTensors
    }
}

/// Writes `path` through a temporary sibling file that is renamed into place once
/// `fill` has written everything and the data is flushed.
pub(crate) fn write_atomically(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    let file_name = path
        .file_name()
        .ok_or_else(|| Error::InvalidArgument(format!("{} is not a file path", path.display())))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(file_name);
    tmp_name.push(format!(".tmp{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let result = (|| {
        let file = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, "create", e))?;
        let mut w = BufWriter::new(file);
        fill(&mut w)?;
        let file = w
            .into_inner()
            .map_err(|e| Error::io(&tmp, "write", e.into_error()))?;
        file.sync_all().map_err(|e| Error::io(&tmp, "sync", e))?;
        std::fs::rename(&tmp, path).map_err(|e| Error::io(path, "rename into", e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
