//! [`Buffer`]: shared, immutable bytes behind every tensor and file reader — a
//! read-only memory map of a file, or an 8-byte-aligned heap allocation.
//!
//! A `Buffer` is a cheap handle (`Arc`): cloning it, or taking a tensor out of a file,
//! keeps the mapping alive without copying.
#![forbid(unsafe_code)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};

/// Shared immutable bytes: a memory-mapped file or a heap allocation.
#[derive(Clone)]
pub struct Buffer(Arc<Inner>);

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &*self.0 {
            Inner::Mapped { map, path } => f
                .debug_struct("Buffer::Mapped")
                .field("path", path)
                .field("len", &map.len())
                .finish(),
            Inner::Heap(heap) => f
                .debug_struct("Buffer::Heap")
                .field("len", &heap.len)
                .finish(),
        }
    }
}

enum Inner {
    Mapped { map: memmap2::Mmap, path: PathBuf },
    Heap(HeapBytes),
}

/// Heap bytes stored in `u64` words so that every dtype rml knows is aligned.
#[derive(Clone, Default)]
pub(crate) struct HeapBytes {
    words: Vec<u64>,
    len: usize,
}

impl HeapBytes {
    pub(crate) fn zeroed(len: usize) -> HeapBytes {
        HeapBytes {
            words: vec![0u64; len.div_ceil(8)],
            len,
        }
    }

    pub(crate) fn from_slice(bytes: &[u8]) -> HeapBytes {
        let mut heap = HeapBytes::zeroed(bytes.len());
        heap.as_mut_bytes().copy_from_slice(bytes);
        heap
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &bytemuck::cast_slice::<u64, u8>(&self.words)[..self.len]
    }

    pub(crate) fn as_mut_bytes(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut::<u64, u8>(&mut self.words)[..self.len]
    }
}

impl Buffer {
    /// Maps the file at `path` read-only. The file must not be modified while any
    /// `Buffer` (or tensor) from it is alive. An empty file gives an empty heap buffer.
    pub fn map_file(path: impl AsRef<Path>) -> Result<Buffer> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| Error::io(path, "open", e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(path, "stat", e))?
            .len();
        if len == 0 {
            return Ok(Buffer::from_heap(HeapBytes::default()));
        }
        if usize::try_from(len).is_err() {
            return Err(Error::InvalidArgument(format!(
                "{}: file of {len} bytes does not fit the address space",
                path.display()
            )));
        }
        let map = crate::mmap::map_read_only(&file).map_err(|e| Error::io(path, "map", e))?;
        Ok(Buffer(Arc::new(Inner::Mapped {
            map,
            path: path.to_path_buf(),
        })))
    }

    /// Copies `bytes` into a new aligned heap buffer.
    pub fn from_bytes(bytes: &[u8]) -> Buffer {
        Buffer::from_heap(HeapBytes::from_slice(bytes))
    }

    pub(crate) fn from_heap(heap: HeapBytes) -> Buffer {
        Buffer(Arc::new(Inner::Heap(heap)))
    }

    /// All the bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match &*self.0 {
            Inner::Mapped { map, .. } => map,
            Inner::Heap(heap) => heap.as_bytes(),
        }
    }

    /// Mutable bytes, only for a heap buffer that no other handle shares.
    pub(crate) fn unique_heap_mut(&mut self) -> Option<&mut [u8]> {
        match Arc::get_mut(&mut self.0)? {
            Inner::Heap(heap) => Some(heap.as_mut_bytes()),
            Inner::Mapped { .. } => None,
        }
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.as_bytes().len()
    }

    /// True when the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when the bytes are a memory map of a file.
    pub fn is_mapped(&self) -> bool {
        matches!(&*self.0, Inner::Mapped { .. })
    }

    /// The mapped file's path, for a mapped buffer.
    pub fn path(&self) -> Option<&Path> {
        match &*self.0 {
            Inner::Mapped { path, .. } => Some(path),
            Inner::Heap(_) => None,
        }
    }

    /// True when both handles share the same bytes.
    pub fn same_as(&self, other: &Buffer) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_buffers_are_eight_byte_aligned() {
        for len in [0usize, 1, 7, 8, 9, 100] {
            let b = Buffer::from_bytes(&vec![3u8; len]);
            assert_eq!(b.len(), len);
            assert_eq!(b.as_bytes().as_ptr() as usize % 8, 0);
            assert!(b.as_bytes().iter().all(|&x| x == 3));
        }
    }

    #[test]
    fn missing_files_are_io_errors() {
        let err = Buffer::map_file("/nonexistent/rml/file").unwrap_err();
        assert!(matches!(err, Error::Io { op: "open", .. }), "{err}");
    }
}
