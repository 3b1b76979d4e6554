//! Elementwise f32 arithmetic of two tensors with NumPy broadcasting.
//!
//! `add`, `sub`, `mul` and `div` are single IEEE operations, so they agree with
//! NumPy bit for bit. `pow` is computed in f64 and rounded once. `maximum` and
//! `minimum` propagate NaN, as NumPy's do (unlike `f32::max`).

use crate::error::Result;
use crate::ops::walk::map_binary;
use crate::view::{TensorView, TensorViewMut};

/// An elementwise function of two values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
    /// `a` raised to the power `b`.
    Pow,
    /// The larger of `a` and `b`; NaN if either is NaN.
    Maximum,
    /// The smaller of `a` and `b`; NaN if either is NaN.
    Minimum,
}

/// Applies `op` to one pair of values.
pub fn apply(op: BinaryOp, a: f32, b: f32) -> f32 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Pow => libm::pow(f64::from(a), f64::from(b)) as f32,
        BinaryOp::Maximum => nan_or(a, b, if a >= b { a } else { b }),
        BinaryOp::Minimum => nan_or(a, b, if a <= b { a } else { b }),
    }
}

/// NaN when either input is NaN, else `value`.
fn nan_or(a: f32, b: f32, value: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else {
        value
    }
}

/// Writes `op(a, b)` into `out` with NumPy broadcasting.
///
/// `a` and `b` must broadcast together ([`crate::Error::NotBroadcastable`]) and
/// `out` must have exactly the broadcast shape ([`crate::Error::ShapeMismatch`]).
pub fn binary(
    op: BinaryOp,
    a: &TensorView<'_, f32>,
    b: &TensorView<'_, f32>,
    out: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    map_binary("binary", a, b, out, |x, y| apply(op, x, y))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Error, Shape};

    fn s(d: &[usize]) -> Shape {
        Shape::new(d).unwrap()
    }

    #[test]
    fn output_must_have_the_broadcast_shape() {
        let a = [1.0f32; 6];
        let b = [2.0f32; 3];
        let mut o = [0.0f32; 6];
        let av = TensorView::new(&a, s(&[2, 3])).unwrap();
        let bv = TensorView::new(&b, s(&[3])).unwrap();
        let mut wrong = TensorViewMut::new(&mut o, s(&[6])).unwrap();
        assert_eq!(
            binary(BinaryOp::Add, &av, &bv, &mut wrong),
            Err(Error::ShapeMismatch { op: "binary" })
        );
        let cv = TensorView::new(&a[..2], s(&[2])).unwrap();
        let mut out = TensorViewMut::new(&mut o, s(&[2, 3])).unwrap();
        assert_eq!(
            binary(BinaryOp::Add, &av, &cv, &mut out),
            Err(Error::NotBroadcastable {
                axis: 0,
                lhs: 3,
                rhs: 2
            })
        );
        // A rank-0 output cannot hold a [3] broadcast result.
        let mut one = [0.0f32; 1];
        let mut scalar = TensorViewMut::new(&mut one, Shape::scalar()).unwrap();
        assert_eq!(
            binary(BinaryOp::Mul, &bv, &bv, &mut scalar),
            Err(Error::ShapeMismatch { op: "binary" })
        );
    }

    #[test]
    fn maximum_and_minimum_propagate_nan() {
        assert!(apply(BinaryOp::Maximum, f32::NAN, 1.0).is_nan());
        assert!(apply(BinaryOp::Minimum, 1.0, f32::NAN).is_nan());
        assert_eq!(apply(BinaryOp::Maximum, -1.0, 2.0), 2.0);
        assert_eq!(apply(BinaryOp::Minimum, -1.0, 2.0), -1.0);
    }
}
