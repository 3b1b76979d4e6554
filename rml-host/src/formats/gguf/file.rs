//! Opening GGUF files by mmap: [`MappedFile`] and [`GgufFile`]. The one `unsafe`
//! call (creating the mapping) is rml-host's single `mmap` module, called by `map_file`.

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

/// Maps `file` read-only, through the crate's one `unsafe` block
/// (`crate::mmap::map_read_only`, whose `SAFETY` comment states the contract: the
/// file must not be truncated or rewritten while it is mapped).
fn map_file(file: &File) -> std::io::Result<Mmap> {
    crate::mmap::map_read_only(file)
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
