//! Elementwise comparisons producing bool tensors (one byte, 0 or 1), and
//! `where_`, which selects between two tensors by a bool tensor. Both broadcast
//! like NumPy. Comparisons with NaN are false, except `Ne`, which is true.

use crate::error::Result;
use crate::ops::walk::{map_binary, map_ternary};
use crate::view::{TensorView, TensorViewMut};

/// A comparison of two values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    /// `a == b`.
    Eq,
    /// `a != b`.
    Ne,
    /// `a < b`.
    Lt,
    /// `a <= b`.
    Le,
    /// `a > b`.
    Gt,
    /// `a >= b`.
    Ge,
}

/// Compares one pair of values with IEEE semantics for floats.
pub fn apply<T: PartialOrd>(op: CompareOp, a: T, b: T) -> bool {
    match op {
        CompareOp::Eq => a == b,
        CompareOp::Ne => a != b,
        CompareOp::Lt => a < b,
        CompareOp::Le => a <= b,
        CompareOp::Gt => a > b,
        CompareOp::Ge => a >= b,
    }
}

/// Writes `op(a, b)` as 0 or 1 into the bool tensor `out`, with NumPy
/// broadcasting; `out` must have the broadcast shape. Works for any ordered
/// element type (floats, integers, f16, bf16).
pub fn compare<T: Copy + PartialOrd>(
    op: CompareOp,
    a: &TensorView<'_, T>,
    b: &TensorView<'_, T>,
    out: &mut TensorViewMut<'_, u8>,
) -> Result<()> {
    map_binary("compare", a, b, out, |x, y| u8::from(apply(op, x, y)))
}

/// `out = cond ? a : b` elementwise, broadcasting all three like `numpy.where`.
/// Any non-zero byte of `cond` counts as true.
pub fn where_<T: Copy>(
    cond: &TensorView<'_, u8>,
    a: &TensorView<'_, T>,
    b: &TensorView<'_, T>,
    out: &mut TensorViewMut<'_, T>,
) -> Result<()> {
    map_ternary(
        "where",
        cond,
        a,
        b,
        out,
        |c, x, y| if c != 0 { x } else { y },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Error, Shape};

    fn s(d: &[usize]) -> Shape {
        Shape::new(d).unwrap()
    }

    #[test]
    fn nan_compares_unequal() {
        assert!(!apply(CompareOp::Eq, f32::NAN, f32::NAN));
        assert!(apply(CompareOp::Ne, f32::NAN, f32::NAN));
        assert!(!apply(CompareOp::Ge, f32::NAN, 0.0));
    }

    #[test]
    fn wrong_output_shapes_are_errors() {
        let a = [1i32, 2, 3];
        let av = TensorView::new(&a, s(&[3])).unwrap();
        let bv = TensorView::new(&a[..1], s(&[1, 1])).unwrap();
        let mut o = [0u8; 3];
        let mut flat = TensorViewMut::new(&mut o, s(&[3])).unwrap();
        // The broadcast of [3] and [1, 1] is [1, 3], not [3].
        assert_eq!(
            compare(CompareOp::Lt, &av, &bv, &mut flat),
            Err(Error::ShapeMismatch { op: "compare" })
        );
        let cond = [1u8, 0];
        let cv = TensorView::new(&cond, s(&[2])).unwrap();
        let mut out = [0i32; 3];
        let mut ov = TensorViewMut::new(&mut out, s(&[3])).unwrap();
        assert_eq!(
            where_(&cv, &av, &av, &mut ov),
            Err(Error::NotBroadcastable {
                axis: 0,
                lhs: 2,
                rhs: 3
            })
        );
        let cv = TensorView::new(&cond[..1], s(&[1])).unwrap();
        let mut o2 = [0i32; 6];
        let mut ov = TensorViewMut::new(&mut o2, s(&[2, 3])).unwrap();
        assert_eq!(
            where_(&cv, &av, &av, &mut ov),
            Err(Error::ShapeMismatch { op: "where" })
        );
    }
}
