//! Opening GGUF files by mmap: [`MappedFile`] and [`GgufFile`]. The one `unsafe`
//! call of the GGUF module (creating the mapping) lives in [`map_file`].

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;

use super::error::{GgufError, Result};
use super::reader::{Gguf, ReadOptions};

/// A read-only memory map of a whole file, cheap to clone (shared).
#[derive(Clone, Debug)]
pub struct MappedFile {
    map: Option<Arc<Mmap>>,
}

impl AsRef<[u8]> for MappedFile {
    fn as_ref(&self) -> &[u8] {
        self.map.as_deref().map_or(&[], |m| &m[..])
    }
}

/// Maps `file` read-only.
#[allow(unsafe_code)]
fn map_file(file: &File) -> std::io::Result<Mmap> {
    // SAFETY: `Mmap::map` is unsafe because another process could truncate or
    // rewrite the file while it is mapped, changing memory Rust code believes is
    // immutable. The mapping is read-only and private to this process; model files
    // are not modified while loaded, and every read through it is bounds-checked
    // against the length taken when it was mapped. This is the accepted contract for
    // mmap-based model loading (as in llama.cpp and safetensors).
    unsafe { Mmap::map(file) }
}

impl MappedFile {
    /// Maps the file at `path`.
    pub fn open(path: &Path) -> Result<MappedFile> {
        let io = |source| GgufError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        if len == 0 {
            // A zero-length mapping is an error on some platforms; an empty file
            // needs no mapping.
            return Ok(MappedFile { map: None });
        }
        let map = map_file(&file).map_err(io)?;
        Ok(MappedFile {
            map: Some(Arc::new(map)),
        })
    }
}

/// A GGUF file opened by mmap.
pub type GgufFile = Gguf<MappedFile>;

impl Gguf<MappedFile> {
    /// Maps and parses the file at `path`; errors name the path.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        Self::open_with(path, ReadOptions::default())
    }

    /// Maps and parses the file at `path` with `options`.
    pub fn open_with(path: impl AsRef<Path>, options: ReadOptions) -> Result<GgufFile> {
        let path = path.as_ref();
        let map = MappedFile::open(path)?;
        Gguf::parse_with(map, options).map_err(|e| e.in_file(path))
    }
}
