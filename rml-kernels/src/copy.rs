//! Bulk copies that stay fast where the C library's `memcpy` is not.
//!
//! glibc (2.36 here) copies 4 KiB and more with `rep movsb`. On this project's AMD
//! EPYC vCPUs that instruction runs at about 3 bytes per nanosecond when the source
//! and destination share their offset within a 4 KiB page, which fixed-size tiles
//! and buffers often do: a 4-64 KiB copy between L1-resident buffers took 30 times
//! as long as glibc's vector loop (measured 2026-12-01: 3 B/ns against 84-96 B/ns).
//! Shorter copies take the vector loop, so [`copy`] hands `memcpy` pieces of at
//! most [`COPY_PIECE_BYTES`].

use rml_core::{Error, Result};

/// Largest piece [`copy`] hands to `memcpy` at once: below glibc's `rep movsb`
/// threshold on every x86 configuration (4 KiB or more).
pub const COPY_PIECE_BYTES: usize = 2048;

/// `dst = src`, in pieces of at most [`COPY_PIECE_BYTES`] (see the module docs).
/// Errors with [`Error::LengthMismatch`] unless the lengths agree.
pub fn copy<T: Copy>(src: &[T], dst: &mut [T]) -> Result<()> {
    if src.len() != dst.len() {
        return Err(Error::LengthMismatch {
            expected: dst.len(),
            got: src.len(),
        });
    }
    let piece = (COPY_PIECE_BYTES / size_of::<T>().max(1)).max(1);
    for (d, s) in dst.chunks_mut(piece).zip(src.chunks(piece)) {
        d.copy_from_slice(s);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_every_length_and_type() {
        for n in [0, 1, 7, 511, 512, 513, 1024, 5000] {
            let src: Vec<f32> = (0..n).map(|i| i as f32 * 0.5 - 3.0).collect();
            let mut dst = vec![f32::NAN; n];
            copy(&src, &mut dst).unwrap();
            assert_eq!(src, dst, "f32 x {n}");
            let bytes: Vec<u8> = (0..3 * n).map(|i| (i * 7) as u8).collect();
            let mut out = vec![0u8; 3 * n];
            copy(&bytes, &mut out).unwrap();
            assert_eq!(bytes, out, "u8 x {}", 3 * n);
        }
    }

    #[test]
    fn lengths_must_agree() {
        let mut dst = [0.0f32; 3];
        assert!(matches!(
            copy(&[1.0f32; 4], &mut dst),
            Err(Error::LengthMismatch {
                expected: 3,
                got: 4
            })
        ));
        assert_eq!(dst, [0.0; 3]);
    }
}
