//! A bounds-checked little-endian reader over a byte slice. Every read checks the
//! bytes left first, so nothing is ever sized by an unchecked number from the file.

#![forbid(unsafe_code)]

use super::error::{GgufError, Result};

/// A position in a byte slice, reading little-endian fields.
#[derive(Clone, Debug)]
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at `pos` (clamped to the end).
    pub(crate) fn new(bytes: &'a [u8], pos: usize) -> Self {
        Cursor {
            bytes,
            pos: pos.min(bytes.len()),
        }
    }

    /// The absolute position.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// The bytes left.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// The whole underlying slice.
    pub(crate) fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Takes `n` bytes or fails naming the field.
    pub(crate) fn take(&mut self, n: u64, what: impl FnOnce() -> String) -> Result<&'a [u8]> {
        let available = self.remaining();
        match usize::try_from(n) {
            Ok(n) if n <= available => {
                let out = &self.bytes[self.pos..self.pos + n];
                self.pos += n;
                Ok(out)
            }
            _ => Err(GgufError::Truncated {
                what: what(),
                offset: self.pos as u64,
                needed: n,
                available: available as u64,
            }),
        }
    }

    /// Takes exactly `N` bytes as an array.
    pub(crate) fn array<const N: usize>(
        &mut self,
        what: impl FnOnce() -> String,
    ) -> Result<[u8; N]> {
        let s = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(s);
        Ok(out)
    }

    /// Reads a little-endian `u32`.
    pub(crate) fn u32(&mut self, what: impl FnOnce() -> String) -> Result<u32> {
        self.array::<4>(what).map(u32::from_le_bytes)
    }

    /// Reads a little-endian `u64`.
    pub(crate) fn u64(&mut self, what: impl FnOnce() -> String) -> Result<u64> {
        self.array::<8>(what).map(u64::from_le_bytes)
    }

    /// Reads a GGUF string: a `u64` byte length, then that many UTF-8 bytes.
    pub(crate) fn string(&mut self, what: impl Fn() -> String) -> Result<&'a str> {
        let offset = self.pos as u64;
        let len = self.u64(|| format!("{} length", what()))?;
        let available = self.remaining() as u64;
        if len > available {
            return Err(GgufError::StringTooLong {
                what: what(),
                offset,
                len,
                available,
            });
        }
        let start = self.pos as u64;
        let raw = self.take(len, &what)?;
        std::str::from_utf8(raw).map_err(|_| GgufError::InvalidUtf8 {
            what: what(),
            offset: start,
        })
    }
}
