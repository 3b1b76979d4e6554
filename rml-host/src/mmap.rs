//! The one place in rml-host that uses `unsafe`: creating a read-only memory map.
//!
//! Everything else in the crate is safe Rust; the parsers are `#![forbid(unsafe_code)]`.
#![allow(unsafe_code)]

use std::fs::File;

use memmap2::{Mmap, MmapOptions};

/// Maps all of `file` read-only.
pub(crate) fn map_read_only(file: &File) -> std::io::Result<Mmap> {
    // SAFETY: memmap2 requires that the mapped file is not modified or truncated by
    // anyone while the map is alive, which no type system can promise. rml maps model
    // and data files read-only and never writes through the map; like every mmap-based
    // loader, it documents (docs/formats.md) that a file must not be changed while it
    // is open. Every byte of the map is validated before it is used, so a file changed
    // before opening is caught like any other malformed file.
    unsafe { MmapOptions::new().map(file) }
}
