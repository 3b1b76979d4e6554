//! GGML block quantization: the block layouts, reference quantizers and dequantizers,
//! and reference dot products.
//!
//! Every GGML quantized type packs a fixed number of weights (32 for the "legacy"
//! types, 256 for the K-quant super-blocks) into a fixed number of bytes. Each layout
//! here is a `#[repr(C)]` [`bytemuck::Pod`] struct whose size is asserted at compile
//! time, so a slice of blocks can be viewed directly over the bytes of a GGUF file
//! ([`blocks_from_bytes`]).
//!
//! The quantizers reproduce ggml's reference C code (`quantize_row_*_ref` in
//! `ggml-quants.c`) operation for operation, in f32, in the same order, so their output
//! is the same bytes that the `gguf` Python package and llama.cpp produce (the tests in
//! `rml-core/tests/` check this against committed fixtures). This includes the
//! iterative scale searches of the K-quants (see [`kquants`]).
//!
//! | type | block | bytes | layout struct | dot product activation |
//! |---|---|---|---|---|
//! | Q4_0 | 32 | 18 | [`BlockQ4_0`] | Q8_0 |
//! | Q4_1 | 32 | 20 | [`BlockQ4_1`] | Q8_1 |
//! | Q5_0 | 32 | 22 | [`BlockQ5_0`] | Q8_0 |
//! | Q5_1 | 32 | 24 | [`BlockQ5_1`] | Q8_1 |
//! | Q8_0 | 32 | 34 | [`BlockQ8_0`] | Q8_0 |
//! | Q8_1 | 32 | 36 | [`BlockQ8_1`] | (activations) |
//! | Q2_K | 256 | 84 | [`BlockQ2K`] | Q8_K |
//! | Q3_K | 256 | 110 | [`BlockQ3K`] | Q8_K |
//! | Q4_K | 256 | 144 | [`BlockQ4K`] | Q8_K |
//! | Q5_K | 256 | 176 | [`BlockQ5K`] | Q8_K |
//! | Q6_K | 256 | 210 | [`BlockQ6K`] | Q8_K |
//! | Q8_K | 256 | 292 | [`BlockQ8K`] | (activations) |
//!
//! All functions check lengths and return an [`Error`] rather than panic.

pub mod kquants;
pub mod legacy;

pub use kquants::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K, BlockQ8K, QK_K};
pub use legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, QK};

use crate::dtype::DType;
use crate::error::{Error, Result};

/// One GGML block type: its layout, and its reference quantizer and dequantizer.
///
/// `quantize` and `dequantize` work on whole rows of blocks; the per-block functions
/// are what a type implements.
pub trait QuantBlock: bytemuck::Pod + bytemuck::Zeroable + core::fmt::Debug + 'static {
    /// The dtype these blocks store.
    const DTYPE: DType;
    /// Elements per block (32 or 256).
    const BLOCK: usize;

    /// Quantizes exactly `Self::BLOCK` values into one block.
    fn quantize_block(x: &[f32]) -> Self;

    /// Writes the `Self::BLOCK` values this block stands for into `out`.
    fn dequantize_block(&self, out: &mut [f32]);

    /// Quantizes `x` into `out`: `x.len()` must be `out.len() * Self::BLOCK`.
    fn quantize(x: &[f32], out: &mut [Self]) -> Result<()> {
        check_len(x.len(), out.len(), Self::BLOCK)?;
        for (block, chunk) in out.iter_mut().zip(x.chunks_exact(Self::BLOCK)) {
            *block = Self::quantize_block(chunk);
        }
        Ok(())
    }

    /// Dequantizes `blocks` into `out`: `out.len()` must be `blocks.len() * Self::BLOCK`.
    fn dequantize(blocks: &[Self], out: &mut [f32]) -> Result<()> {
        check_len(out.len(), blocks.len(), Self::BLOCK)?;
        for (block, chunk) in blocks.iter().zip(out.chunks_exact_mut(Self::BLOCK)) {
            block.dequantize_block(chunk);
        }
        Ok(())
    }
}

/// A weight block type whose dot product runs against quantized activations of type
/// [`QuantDot::Act`] (ggml's `vec_dot_type`).
pub trait QuantDot: QuantBlock {
    /// The activation block format: [`BlockQ8_0`], [`BlockQ8_1`] or [`BlockQ8K`].
    type Act: QuantBlock;

    /// The dot product of one weight block with one activation block, computed the
    /// readable way: integer products per sub-block, then the scales.
    fn dot_block(&self, act: &Self::Act) -> f32;

    /// Σ over blocks of [`QuantDot::dot_block`]; the two slices must have equal length.
    fn dot(w: &[Self], act: &[Self::Act]) -> Result<f32> {
        if w.len() != act.len() {
            return Err(Error::LengthMismatch {
                expected: w.len(),
                got: act.len(),
            });
        }
        Ok(w.iter().zip(act).map(|(w, a)| w.dot_block(a)).sum())
    }
}

/// Checks that `values == blocks * block`.
fn check_len(values: usize, blocks: usize, block: usize) -> Result<()> {
    let expected = blocks.checked_mul(block).ok_or(Error::Overflow)?;
    if values != expected {
        return Err(Error::LengthMismatch {
            expected,
            got: values,
        });
    }
    Ok(())
}

/// Views bytes (for example a GGUF tensor's data) as blocks. The length must be a whole
/// number of blocks and the address a multiple of the block's alignment (2, or 4 for
/// [`BlockQ8K`]).
pub fn blocks_from_bytes<B: QuantBlock>(bytes: &[u8]) -> Result<&[B]> {
    let size = core::mem::size_of::<B>();
    if !bytes.len().is_multiple_of(size) {
        return Err(Error::InvalidArgument(
            "byte length is not a whole number of quantized blocks",
        ));
    }
    bytemuck::try_cast_slice(bytes).map_err(|_| Error::Misaligned {
        align: core::mem::align_of::<B>(),
    })
}

/// Mutable version of [`blocks_from_bytes`].
pub fn blocks_from_bytes_mut<B: QuantBlock>(bytes: &mut [u8]) -> Result<&mut [B]> {
    let size = core::mem::size_of::<B>();
    if !bytes.len().is_multiple_of(size) {
        return Err(Error::InvalidArgument(
            "byte length is not a whole number of quantized blocks",
        ));
    }
    bytemuck::try_cast_slice_mut(bytes).map_err(|_| Error::Misaligned {
        align: core::mem::align_of::<B>(),
    })
}

/// Calls `$body` with `$B` bound to the block type of a quantized dtype.
macro_rules! with_block_type {
    ($dtype:expr, $B:ident => $body:expr) => {
        match $dtype {
            DType::Q4_0 => {
                type $B = BlockQ4_0;
                $body
            }
            DType::Q4_1 => {
                type $B = BlockQ4_1;
                $body
            }
            DType::Q5_0 => {
                type $B = BlockQ5_0;
                $body
            }
            DType::Q5_1 => {
                type $B = BlockQ5_1;
                $body
            }
            DType::Q8_0 => {
                type $B = BlockQ8_0;
                $body
            }
            DType::Q8_1 => {
                type $B = BlockQ8_1;
                $body
            }
            DType::Q2K => {
                type $B = BlockQ2K;
                $body
            }
            DType::Q3K => {
                type $B = BlockQ3K;
                $body
            }
            DType::Q4K => {
                type $B = BlockQ4K;
                $body
            }
            DType::Q5K => {
                type $B = BlockQ5K;
                $body
            }
            DType::Q6K => {
                type $B = BlockQ6K;
                $body
            }
            DType::Q8K => {
                type $B = BlockQ8K;
                $body
            }
            other => Err(Error::UnsupportedDType(other)),
        }
    };
}

/// Quantizes `x` into the bytes of `dtype` blocks (`dst.len()` must equal
/// `dtype.storage_bytes(x.len())`, and `dst` be aligned for the block).
pub fn quantize_bytes(dtype: DType, x: &[f32], dst: &mut [u8]) -> Result<()> {
    with_block_type!(dtype, B => B::quantize(x, blocks_from_bytes_mut::<B>(dst)?))
}

/// Dequantizes the bytes of `dtype` blocks into `out` (`out.len()` elements).
pub fn dequantize_bytes(dtype: DType, src: &[u8], out: &mut [f32]) -> Result<()> {
    with_block_type!(dtype, B => B::dequantize(blocks_from_bytes::<B>(src)?, out))
}

/// The activation format a weight type's dot product uses (ggml's `vec_dot_type`):
/// Q8_0 for Q4_0/Q5_0/Q8_0, Q8_1 for Q4_1/Q5_1, Q8_K for the K-quants.
pub fn vec_dot_type(weight: DType) -> Result<DType> {
    match weight {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 => Ok(DType::Q8_0),
        DType::Q4_1 | DType::Q5_1 => Ok(DType::Q8_1),
        DType::Q2K | DType::Q3K | DType::Q4K | DType::Q5K | DType::Q6K => Ok(DType::Q8K),
        other => Err(Error::UnsupportedDType(other)),
    }
}

/// Reference dot product of `k` weights stored as `weight` blocks with `k` activations
/// stored as `vec_dot_type(weight)` blocks, both given as bytes.
pub fn dot_bytes(weight: DType, w: &[u8], act: &[u8]) -> Result<f32> {
    macro_rules! go {
        ($W:ty) => {
            <$W>::dot(blocks_from_bytes::<$W>(w)?, blocks_from_bytes(act)?)
        };
    }
    match weight {
        DType::Q4_0 => go!(BlockQ4_0),
        DType::Q4_1 => go!(BlockQ4_1),
        DType::Q5_0 => go!(BlockQ5_0),
        DType::Q5_1 => go!(BlockQ5_1),
        DType::Q8_0 => go!(BlockQ8_0),
        DType::Q2K => go!(BlockQ2K),
        DType::Q3K => go!(BlockQ3K),
        DType::Q4K => go!(BlockQ4K),
        DType::Q5K => go!(BlockQ5K),
        DType::Q6K => go!(BlockQ6K),
        other => Err(Error::UnsupportedDType(other)),
    }
}

/// ggml's `nearest_int`: rounds to the nearest integer, ties to even, by adding
/// 1.5·2²³ so the float unit does the rounding. Valid for |v| < 2²²; the K-quant
/// searches depend on exactly this rounding.
#[inline]
pub fn nearest_int(v: f32) -> i32 {
    let t = v + 12_582_912.0;
    (t.to_bits() & 0x007f_ffff) as i32 - 0x0040_0000
}

/// C `roundf`: rounds half away from zero (used by the Q8_0/Q8_1 quantizers).
#[inline]
pub fn round_away(v: f32) -> f32 {
    libm::roundf(v)
}

/// f32 → IEEE half, round to nearest even (ggml's `GGML_FP32_TO_FP16`).
#[inline]
pub fn f16_from(v: f32) -> half::f16 {
    half::f16::from_f32(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_ties_to_even() {
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(2.5), 2);
        assert_eq!(nearest_int(-0.5), 0);
        assert_eq!(nearest_int(-1.5), -2);
        assert_eq!(nearest_int(-3.7), -4);
        assert_eq!(nearest_int(31.49), 31);
        assert_eq!(round_away(2.5), 3.0);
        assert_eq!(round_away(-2.5), -3.0);
    }

    #[test]
    fn byte_views_check_length_and_type() {
        let bytes = [0u8; 36];
        let blocks: &[BlockQ4_0] = blocks_from_bytes(&bytes[..]).unwrap_or(&[]);
        // 36 bytes are two Q4_0 blocks when the address is even.
        assert!(blocks.len() == 2 || blocks.is_empty());
        assert!(blocks_from_bytes::<BlockQ4_0>(&bytes[..35]).is_err());
        let mut out = [0f32; 64];
        let err = dequantize_bytes(DType::F32, &bytes, &mut out);
        assert_eq!(err, Err(Error::UnsupportedDType(DType::F32)));
        assert_eq!(vec_dot_type(DType::Q6K), Ok(DType::Q8K));
        assert_eq!(vec_dot_type(DType::Q5_1), Ok(DType::Q8_1));
        assert!(vec_dot_type(DType::Q8K).is_err());
    }
}
