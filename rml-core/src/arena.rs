//! A bump allocator over a caller-supplied byte buffer, for kernels that need scratch
//! space in `no_std` code: each request returns an aligned, zeroed typed slice
//! borrowed from the buffer, and the whole arena is reset at once.

use crate::dtype::Element;
use crate::error::{Error, Result};

/// Hands out aligned typed slices from one caller buffer until it runs out.
#[derive(Debug)]
pub struct ScratchArena<'a> {
    rest: &'a mut [u8],
    used: usize,
}

impl<'a> ScratchArena<'a> {
    /// An arena over `buffer`.
    pub fn new(buffer: &'a mut [u8]) -> Self {
        ScratchArena {
            rest: buffer,
            used: 0,
        }
    }

    /// Bytes still available (before alignment padding).
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// Bytes handed out so far, padding included.
    pub fn used(&self) -> usize {
        self.used
    }

    /// Takes `len` zeroed elements of `T`, aligned for `T`. Fails with
    /// [`Error::ScratchExhausted`] when the buffer is too small.
    pub fn alloc<T: Element>(&mut self, len: usize) -> Result<&'a mut [T]> {
        let align = core::mem::align_of::<T>();
        let pad = self.rest.as_ptr().align_offset(align);
        let bytes = len
            .checked_mul(core::mem::size_of::<T>())
            .ok_or(Error::Overflow)?;
        let needed = pad.checked_add(bytes).ok_or(Error::Overflow)?;
        if needed > self.rest.len() {
            return Err(Error::ScratchExhausted {
                needed,
                left: self.rest.len(),
            });
        }
        let rest = core::mem::take(&mut self.rest);
        let (taken, rest) = rest.split_at_mut(needed);
        self.rest = rest;
        self.used += needed;
        let slot = &mut taken[pad..];
        slot.fill(0);
        bytemuck::try_cast_slice_mut(slot).map_err(|_| Error::Misaligned { align })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_out_aligned_slices_until_exhausted() {
        let mut buffer = [0xFFu8; 64];
        let mut arena = ScratchArena::new(&mut buffer[1..]);
        let a: &mut [u8] = arena.alloc(3).unwrap();
        assert_eq!(a, &[0, 0, 0]);
        let b: &mut [f32] = arena.alloc(4).unwrap();
        assert_eq!(b.as_ptr() as usize % 4, 0);
        b[3] = 1.0;
        let err = arena.alloc::<f64>(100).unwrap_err();
        assert!(matches!(err, Error::ScratchExhausted { .. }));
        assert!(arena.alloc::<f64>(usize::MAX).is_err());
    }
}
