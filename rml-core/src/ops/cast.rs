//! Conversions between the scalar dtypes: f64, f32, f16, bf16, i64, i32, i16, i8,
//! u8 and bool (one byte, 0 or 1).
//!
//! Every value passes through a lossless [`Scalar`] (an f64 for floats, an i64 for
//! integers) and is then converted once to the target type. The rules:
//!
//! * **float → narrower float**: round to nearest, ties to even; too large → ±inf;
//!   NaN stays NaN. For f16/bf16 this is exact even from f64 (see [`f64_to_f16`]).
//! * **int → float**: round to nearest even (`as`). An i64 above 2^53 in magnitude
//!   reaches bf16 through f64 and may round twice (f16 cannot: it overflows first).
//! * **float → int**: truncate toward zero and **saturate** at the target's range;
//!   NaN becomes 0 (Rust's `as`). NumPy leaves out-of-range float→int undefined, so
//!   only in-range values are compared against it.
//! * **int → int**: two's-complement wrap, like NumPy's `astype` and Rust's `as`.
//! * **anything → bool**: `x != 0` (so NaN is true); **bool → anything**: 0 or 1.

use half::{bf16, f16};

use crate::dtype::{DType, Element};
use crate::error::{Error, Result};
use crate::ops::walk::map_unary;
use crate::shape::Shape;
use crate::view::{TensorView, TensorViewMut};

/// A scalar value held without loss: any supported float fits an f64, any
/// supported integer an i64.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scalar {
    /// A floating-point value.
    Float(f64),
    /// An integer value.
    Int(i64),
}

impl Scalar {
    /// True unless the value is zero (NaN counts as true, as in NumPy).
    pub fn is_nonzero(self) -> bool {
        match self {
            Scalar::Float(x) => x != 0.0,
            Scalar::Int(x) => x != 0,
        }
    }
}

/// Element types that take part in casts.
pub trait CastElement: Element {
    /// This value, exactly.
    fn to_scalar(self) -> Scalar;
    /// `value` converted to this type by the module's rules.
    fn from_scalar(value: Scalar) -> Self;
}

macro_rules! cast_int {
    ($($t:ty),*) => {$(
        impl CastElement for $t {
            fn to_scalar(self) -> Scalar {
                Scalar::Int(self as i64)
            }
            fn from_scalar(value: Scalar) -> Self {
                // `as` truncates and saturates from floats, and wraps between integers.
                match value {
                    Scalar::Float(x) => x as $t,
                    Scalar::Int(x) => x as $t,
                }
            }
        }
    )*};
}
cast_int!(i64, i32, i16, i8, u8);

impl CastElement for f64 {
    fn to_scalar(self) -> Scalar {
        Scalar::Float(self)
    }
    fn from_scalar(value: Scalar) -> Self {
        match value {
            Scalar::Float(x) => x,
            Scalar::Int(x) => x as f64,
        }
    }
}

impl CastElement for f32 {
    fn to_scalar(self) -> Scalar {
        Scalar::Float(f64::from(self))
    }
    fn from_scalar(value: Scalar) -> Self {
        // Both `as` conversions round once to nearest even.
        match value {
            Scalar::Float(x) => x as f32,
            Scalar::Int(x) => x as f32,
        }
    }
}

impl CastElement for f16 {
    fn to_scalar(self) -> Scalar {
        Scalar::Float(self.to_f64())
    }
    fn from_scalar(value: Scalar) -> Self {
        f64_to_f16(scalar_as_f64(value))
    }
}

impl CastElement for bf16 {
    fn to_scalar(self) -> Scalar {
        Scalar::Float(self.to_f64())
    }
    fn from_scalar(value: Scalar) -> Self {
        f64_to_bf16(scalar_as_f64(value))
    }
}

/// The value as an f64 (integers round to nearest beyond 2^53).
fn scalar_as_f64(value: Scalar) -> f64 {
    f64::from_scalar(value)
}

/// `x` with its low 32 mantissa bits folded into bit 32 as a "sticky" bit.
///
/// `half` converts f64 → f16/bf16 from the upper 32 bits only, so a value just
/// above a halfway point would be taken for the tie and rounded to even. Setting
/// bit 32 whenever any lower bit is set keeps "above the tie" visible; bit 32 is
/// always below the rounding position of both half types, so nothing else changes.
/// The folded value has at most 21 significant bits, so it is also exact as an f32:
/// `half`'s F16C path, which converts through f32, then rounds only once as well.
fn fold_sticky_bits(x: f64) -> f64 {
    let bits = x.to_bits();
    if bits & 0xFFFF_FFFF != 0 {
        f64::from_bits((bits & !0xFFFF_FFFF) | (1 << 32))
    } else {
        x
    }
}

/// f64 → f16, rounding to nearest even exactly.
pub fn f64_to_f16(x: f64) -> f16 {
    f16::from_f64(fold_sticky_bits(x))
}

/// f64 → bf16, rounding to nearest even exactly.
pub fn f64_to_bf16(x: f64) -> bf16 {
    bf16::from_f64(fold_sticky_bits(x))
}

/// Converts one value from `S` to `D` by the module's rules.
pub fn cast_value<S: CastElement, D: CastElement>(x: S) -> D {
    D::from_scalar(x.to_scalar())
}

/// Converts every element of `src` into `dst` (same shape; both may be strided).
pub fn cast<S: CastElement, D: CastElement>(
    src: &TensorView<'_, S>,
    dst: &mut TensorViewMut<'_, D>,
) -> Result<()> {
    map_unary("cast", src, dst, cast_value::<S, D>)
}

/// Writes `x != 0` as a bool byte (0 or 1) for every element of `src`. The
/// reverse direction is [`cast`] from `u8`, since bools are stored as 0/1 bytes.
pub fn cast_to_bool<S: CastElement>(
    src: &TensorView<'_, S>,
    dst: &mut TensorViewMut<'_, u8>,
) -> Result<()> {
    map_unary("cast", src, dst, |x| u8::from(x.to_scalar().is_nonzero()))
}

/// Casts a dense little-endian buffer of `src_dtype` into one of `dst_dtype`,
/// choosing the element types at run time (for data whose dtype comes from a
/// file). Both buffers must hold exactly `count` elements and be aligned for their
/// types; block-quantized dtypes are [`Error::UnsupportedDType`].
pub fn cast_bytes(
    src: &[u8],
    src_dtype: DType,
    dst: &mut [u8],
    dst_dtype: DType,
    count: usize,
) -> Result<()> {
    let shape = Shape::new(&[count])?;
    match src_dtype {
        DType::F64 => cast_bytes_from::<f64>(src, shape, dst, dst_dtype, false),
        DType::F32 => cast_bytes_from::<f32>(src, shape, dst, dst_dtype, false),
        DType::F16 => cast_bytes_from::<f16>(src, shape, dst, dst_dtype, false),
        DType::BF16 => cast_bytes_from::<bf16>(src, shape, dst, dst_dtype, false),
        DType::I64 => cast_bytes_from::<i64>(src, shape, dst, dst_dtype, false),
        DType::I32 => cast_bytes_from::<i32>(src, shape, dst, dst_dtype, false),
        DType::I16 => cast_bytes_from::<i16>(src, shape, dst, dst_dtype, false),
        DType::I8 => cast_bytes_from::<i8>(src, shape, dst, dst_dtype, false),
        DType::U8 => cast_bytes_from::<u8>(src, shape, dst, dst_dtype, false),
        // A bool source is read as its bytes; `normalize` makes any non-zero byte 1.
        DType::Bool => cast_bytes_from::<u8>(src, shape, dst, dst_dtype, true),
        other => Err(Error::UnsupportedDType(other)),
    }
}

/// Second half of [`cast_bytes`]: the source type is known, choose the target.
fn cast_bytes_from<S: CastElement>(
    src: &[u8],
    shape: Shape,
    dst: &mut [u8],
    dst_dtype: DType,
    src_is_bool: bool,
) -> Result<()> {
    let src = TensorView::<S>::from_bytes(src, shape)?;
    let read = |x: S| {
        let value = x.to_scalar();
        if src_is_bool {
            Scalar::Int(i64::from(value.is_nonzero()))
        } else {
            value
        }
    };
    match dst_dtype {
        DType::F64 => cast_bytes_into::<S, f64>(&src, dst, read),
        DType::F32 => cast_bytes_into::<S, f32>(&src, dst, read),
        DType::F16 => cast_bytes_into::<S, f16>(&src, dst, read),
        DType::BF16 => cast_bytes_into::<S, bf16>(&src, dst, read),
        DType::I64 => cast_bytes_into::<S, i64>(&src, dst, read),
        DType::I32 => cast_bytes_into::<S, i32>(&src, dst, read),
        DType::I16 => cast_bytes_into::<S, i16>(&src, dst, read),
        DType::I8 => cast_bytes_into::<S, i8>(&src, dst, read),
        DType::U8 => cast_bytes_into::<S, u8>(&src, dst, read),
        DType::Bool => {
            let mut out = TensorViewMut::<u8>::from_bytes(dst, *src.shape())?;
            map_unary("cast", &src, &mut out, |x| u8::from(read(x).is_nonzero()))
        }
        other => Err(Error::UnsupportedDType(other)),
    }
}

/// Last step of [`cast_bytes`]: both types known.
fn cast_bytes_into<S: CastElement, D: CastElement>(
    src: &TensorView<'_, S>,
    dst: &mut [u8],
    read: impl Fn(S) -> Scalar,
) -> Result<()> {
    let mut out = TensorViewMut::<D>::from_bytes(dst, *src.shape())?;
    map_unary("cast", src, &mut out, |x| D::from_scalar(read(x)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_to_int_truncates_and_saturates() {
        assert_eq!(cast_value::<f32, i8>(-2.9), -2);
        assert_eq!(cast_value::<f32, i8>(1000.0), 127);
        assert_eq!(cast_value::<f32, u8>(-5.0), 0);
        assert_eq!(cast_value::<f32, i32>(f32::NAN), 0);
        assert_eq!(cast_value::<f64, i64>(f64::INFINITY), i64::MAX);
    }

    #[test]
    fn int_to_int_wraps_and_bool_is_nonzero() {
        assert_eq!(cast_value::<i64, i8>(300), 44);
        assert_eq!(cast_value::<i32, u8>(-1), 255);
        let data = [0.0f32, -0.0, 2.5, f32::NAN];
        let v = TensorView::new(&data, Shape::new(&[4]).unwrap()).unwrap();
        let mut out = [9u8; 4];
        let mut o = TensorViewMut::new(&mut out, Shape::new(&[4]).unwrap()).unwrap();
        cast_to_bool(&v, &mut o).unwrap();
        assert_eq!(out, [0, 0, 1, 1]);
    }

    #[test]
    fn f64_just_above_a_tie_rounds_up() {
        // 1 + 2^-11 is the f16 tie between 1 and 1 + 2^-10; a hair above it must
        // round up even though the extra bit lies in the low 32 mantissa bits.
        let above = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(f64_to_f16(above).to_bits(), 0x3C01);
        assert_eq!(f64_to_f16(1.0 + 2f64.powi(-11)).to_bits(), 0x3C00);
        let above = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        assert_eq!(f64_to_bf16(above).to_bits(), 0x3F81);
        assert_eq!(f64_to_bf16(1.0 + 2f64.powi(-8)).to_bits(), 0x3F80);
    }

    #[test]
    fn cast_bytes_checks_lengths_alignment_and_dtypes() {
        let words = [1.5f32, 0.0];
        let src: &[u8] = bytemuck::cast_slice(&words[..1]);
        let mut halves = [0u16; 2];
        let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut halves[..1]);
        cast_bytes(src, DType::F32, dst, DType::F16, 1).unwrap();
        assert_eq!(halves[0], 0x3E00);
        let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut halves[..1]);
        assert_eq!(
            cast_bytes(src, DType::F32, dst, DType::F16, 2),
            Err(Error::LengthMismatch {
                expected: 2,
                got: 1
            })
        );
        let all: &[u8] = bytemuck::cast_slice(&words);
        assert_eq!(
            cast_bytes(&all[1..5], DType::F32, dst, DType::F16, 1),
            Err(Error::Misaligned { align: 4 })
        );
        assert_eq!(
            cast_bytes(src, DType::Q4_0, dst, DType::F16, 1),
            Err(Error::UnsupportedDType(DType::Q4_0))
        );
        assert_eq!(
            cast_bytes(src, DType::F32, dst, DType::Q8_0, 1),
            Err(Error::UnsupportedDType(DType::Q8_0))
        );
        let bools = [0u8, 7];
        let mut ints = [0i64; 2];
        cast_bytes(
            &bools,
            DType::Bool,
            bytemuck::cast_slice_mut(&mut ints),
            DType::I64,
            2,
        )
        .unwrap();
        assert_eq!(ints, [0, 1], "a non-zero bool byte reads as 1");
    }

    #[test]
    fn view_cast_needs_equal_shapes() {
        let data = [1i32, 2, 3];
        let v = TensorView::new(&data, Shape::new(&[3]).unwrap()).unwrap();
        let mut out = [0.0f32; 3];
        let mut o = TensorViewMut::new(&mut out, Shape::new(&[1, 3]).unwrap()).unwrap();
        assert_eq!(cast(&v, &mut o), Err(Error::ShapeMismatch { op: "cast" }));
    }
}
