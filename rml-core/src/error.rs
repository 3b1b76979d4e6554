//! The crate's error type: a small `Copy` enum that every fallible function returns.
//!
//! Errors carry just enough context to say what was wrong (the op, the axis, the
//! sizes involved) without allocating, so they can cross `no_std` boundaries and be
//! logged with `defmt` on firmware. Host crates wrap them with file, tensor and node
//! names.

use core::fmt;

use crate::dtype::{DType, GgmlType};

/// Result alias used throughout rml-core and rml-kernels.
pub type Result<T> = core::result::Result<T, Error>;

/// Everything a caller of rml-core can get wrong, plus the formats it cannot read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Error {
    /// A shape has more axes than [`crate::MAX_RANK`].
    RankTooHigh {
        /// The rank that was asked for.
        rank: usize,
        /// The supported maximum.
        max: usize,
    },
    /// Two shapes that must agree (or broadcast) do not.
    ShapeMismatch {
        /// The operation that checked the shapes.
        op: &'static str,
    },
    /// Two shapes cannot be broadcast together: on `axis` (counted from the right
    /// end of the broadcast shape) one has `lhs` and the other `rhs`.
    NotBroadcastable {
        /// Axis of the broadcast result where the sizes disagree.
        axis: usize,
        /// Size on the left operand.
        lhs: usize,
        /// Size on the right operand.
        rhs: usize,
    },
    /// A buffer holds `got` elements (or bytes) where `needed` are required.
    BufferTooSmall {
        /// Required length.
        needed: usize,
        /// Length provided.
        got: usize,
    },
    /// A buffer's length must equal `expected` exactly.
    LengthMismatch {
        /// Required length.
        expected: usize,
        /// Length provided.
        got: usize,
    },
    /// Bytes cannot be viewed as the requested type: their address is not a
    /// multiple of `align`.
    Misaligned {
        /// Alignment the element type requires.
        align: usize,
    },
    /// An axis index is outside `-rank..rank`.
    AxisOutOfRange {
        /// The axis given (negative counts from the end).
        axis: isize,
        /// Rank of the tensor.
        rank: usize,
    },
    /// An index (gather, slice bound, argument) is outside `0..len`.
    IndexOutOfRange {
        /// The index given.
        index: i64,
        /// Length of the indexed axis.
        len: usize,
    },
    /// The operation needs a contiguous (row-major, dense) layout.
    NotContiguous,
    /// A size computation overflowed `usize`.
    Overflow,
    /// An argument is outside its valid range; the string names it.
    InvalidArgument(&'static str),
    /// The operation does not support this dtype.
    UnsupportedDType(DType),
    /// A dtype name is known but not supported (for example `F8_E4M3`).
    UnsupportedDTypeName(&'static str),
    /// A dtype name is not known at all.
    UnknownDType,
    /// A GGML type id is known but rml cannot compute with it.
    UnsupportedQuantization(GgmlType),
    /// A GGML type id is not known at all.
    UnknownGgmlType(u32),
    /// A scratch arena has too few bytes left.
    ScratchExhausted {
        /// Bytes requested (including alignment padding).
        needed: usize,
        /// Bytes left.
        left: usize,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::RankTooHigh { rank, max } => {
                write!(f, "rank {rank} exceeds the maximum rank {max}")
            }
            Error::ShapeMismatch { op } => write!(f, "{op}: shapes do not match"),
            Error::NotBroadcastable { axis, lhs, rhs } => write!(
                f,
                "shapes are not broadcastable: size {lhs} vs {rhs} on axis -{}",
                axis + 1
            ),
            Error::BufferTooSmall { needed, got } => {
                write!(f, "buffer too small: need {needed}, got {got}")
            }
            Error::LengthMismatch { expected, got } => {
                write!(f, "length mismatch: expected {expected}, got {got}")
            }
            Error::Misaligned { align } => {
                write!(f, "buffer is not aligned to {align} bytes")
            }
            Error::AxisOutOfRange { axis, rank } => {
                write!(f, "axis {axis} out of range for rank {rank}")
            }
            Error::IndexOutOfRange { index, len } => {
                write!(f, "index {index} out of range for length {len}")
            }
            Error::NotContiguous => f.write_str("operation requires a contiguous layout"),
            Error::Overflow => f.write_str("size computation overflowed"),
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::UnsupportedDType(dtype) => write!(f, "unsupported dtype {}", dtype.name()),
            Error::UnsupportedDTypeName(name) => write!(f, "unsupported dtype {name}"),
            Error::UnknownDType => f.write_str("unknown dtype name"),
            Error::UnsupportedQuantization(t) => {
                write!(f, "unsupported quantization type {}", t.name())
            }
            Error::UnknownGgmlType(id) => write!(f, "unknown GGML type id {id}"),
            Error::ScratchExhausted { needed, left } => {
                write!(
                    f,
                    "scratch arena exhausted: need {needed} bytes, {left} left"
                )
            }
        }
    }
}

impl core::error::Error for Error {}
