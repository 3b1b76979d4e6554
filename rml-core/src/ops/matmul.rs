//! Batched matrix multiplication, `out = op(a) @ op(b)`, like `numpy.matmul`.
//!
//! The last two axes of each operand are the matrix (`op` optionally swaps them);
//! all axes before them are batch axes and broadcast like NumPy. Both operands need
//! at least two axes (unlike NumPy, a 1-D operand is not promoted; unsqueeze it).
//!
//! **Accumulation order.** Each output element is an f32 sum that starts at `0.0`
//! and adds the products `a[i, p] * b[p, j]` for `p = 0, 1, …, k-1` in that order,
//! each product and each sum rounded to f32 (no fused multiply-add). A fast kernel
//! that blocks or reorders `p` differs by rounding only, bounded by
//! `k · ε · Σ_p |a[i, p]| · |b[p, j]|` (ε = f32 machine epsilon).

use crate::error::{Error, Result};
use crate::ops::walk::{split_layout, trailing_mask};
use crate::shape::{MAX_RANK, Shape, broadcast_shapes};
use crate::view::{TensorView, TensorViewMut};

/// Whether each operand is used as stored or with its last two axes swapped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatmulOptions {
    /// Use `aᵀ` (last two axes of `a` swapped).
    pub transpose_a: bool,
    /// Use `bᵀ` (last two axes of `b` swapped).
    pub transpose_b: bool,
}

/// The matrix part of an operand: `(rows, cols)` after the optional transpose.
fn matrix_dims(shape: &Shape, transpose: bool) -> Result<(usize, usize)> {
    let rank = shape.rank();
    if rank < 2 {
        return Err(Error::InvalidArgument(
            "matmul operands need at least two axes",
        ));
    }
    let (rows, cols) = (shape.dim(rank - 2), shape.dim(rank - 1));
    Ok(if transpose {
        (cols, rows)
    } else {
        (rows, cols)
    })
}

/// `batch` followed by `rows, cols`.
fn with_matrix(batch: &Shape, rows: usize, cols: usize) -> Result<Shape> {
    let rank = batch.rank();
    let mut dims = [0usize; MAX_RANK + 2];
    dims[..rank].copy_from_slice(batch.dims());
    dims[rank] = rows;
    dims[rank + 1] = cols;
    Shape::new(&dims[..rank + 2])
}

/// The batch axes of a shape of rank ≥ 2 (all but the last two).
fn batch_of(shape: &Shape) -> Result<Shape> {
    Shape::new(&shape.dims()[..shape.rank() - 2])
}

/// The shape of `op(a) @ op(b)`: broadcast batch axes, then `[m, n]`.
///
/// Errors: an operand with fewer than two axes ([`Error::InvalidArgument`]),
/// inner sizes that differ ([`Error::ShapeMismatch`]), batch axes that do not
/// broadcast ([`Error::NotBroadcastable`]).
pub fn matmul_shape(a: &Shape, b: &Shape, options: MatmulOptions) -> Result<Shape> {
    let (m, k) = matrix_dims(a, options.transpose_a)?;
    let (k_b, n) = matrix_dims(b, options.transpose_b)?;
    if k != k_b {
        return Err(Error::ShapeMismatch { op: "matmul" });
    }
    let batch = broadcast_shapes(&batch_of(a)?, &batch_of(b)?)?;
    with_matrix(&batch, m, n)
}

/// Writes `op(a) @ op(b)` into `out`, which must have [`matmul_shape`]'s shape.
/// Any operand or the output may be strided; batch axes broadcast. The sum order
/// is documented in the module docs.
pub fn matmul(
    a: &TensorView<'_, f32>,
    b: &TensorView<'_, f32>,
    out: &mut TensorViewMut<'_, f32>,
    options: MatmulOptions,
) -> Result<()> {
    let shape = matmul_shape(a.shape(), b.shape(), options)?;
    if shape != *out.shape() {
        return Err(Error::ShapeMismatch { op: "matmul" });
    }
    let a = if options.transpose_a {
        a.transpose(-1, -2)?
    } else {
        *a
    };
    let b = if options.transpose_b {
        b.transpose(-1, -2)?
    } else {
        *b
    };
    let rank = shape.rank();
    let (m, n) = (shape.dim(rank - 2), shape.dim(rank - 1));
    let k = a.shape().dim(a.shape().rank() - 1);
    let batch = batch_of(&shape)?;
    // Give both operands the full batch shape, so one batch walk serves all three.
    let a = a.broadcast_to(&with_matrix(&batch, m, k)?)?;
    let b = b.broadcast_to(&with_matrix(&batch, k, n)?)?;

    let mask = trailing_mask(2, rank)?;
    let batches_a = split_layout(a.layout(), &mask).outer.offsets();
    let batches_b = split_layout(b.layout(), &mask).outer.offsets();
    let batches_out = split_layout(out.layout(), &mask).outer.offsets();
    let [a_row, a_col] = last_two_strides(a.layout().strides.steps());
    let [b_row, b_col] = last_two_strides(b.layout().strides.steps());
    let [o_row, o_col] = last_two_strides(out.layout().strides.steps());
    let (a_data, b_data) = (a.data(), b.data());
    let out_data = out.data_mut();

    for ((a0, b0), o0) in batches_a.zip(batches_b).zip(batches_out) {
        for i in 0..m {
            for j in 0..n {
                let mut acc = 0.0f32;
                for p in 0..k {
                    acc += a_data[a0 + i * a_row + p * a_col] * b_data[b0 + p * b_row + j * b_col];
                }
                out_data[o0 + i * o_row + j * o_col] = acc;
            }
        }
    }
    Ok(())
}

/// The strides of the last two axes (the caller guarantees rank ≥ 2).
fn last_two_strides(steps: &[usize]) -> [usize; 2] {
    [steps[steps.len() - 2], steps[steps.len() - 1]]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(d: &[usize]) -> Shape {
        Shape::new(d).unwrap()
    }

    #[test]
    fn shapes_follow_numpy_matmul() {
        let plain = MatmulOptions::default();
        assert_eq!(
            matmul_shape(&s(&[5, 1, 2, 3]), &s(&[4, 3, 7]), plain),
            Ok(s(&[5, 4, 2, 7]))
        );
        let both = MatmulOptions {
            transpose_a: true,
            transpose_b: true,
        };
        assert_eq!(matmul_shape(&s(&[3, 2]), &s(&[7, 3]), both), Ok(s(&[2, 7])));
    }

    #[test]
    fn bad_shapes_are_errors() {
        let plain = MatmulOptions::default();
        assert_eq!(
            matmul_shape(&s(&[2, 3]), &s(&[4, 5]), plain),
            Err(Error::ShapeMismatch { op: "matmul" })
        );
        assert!(matches!(
            matmul_shape(&s(&[3]), &s(&[3, 5]), plain),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(
            matmul_shape(&s(&[2, 2, 3]), &s(&[4, 3, 5]), plain),
            Err(Error::NotBroadcastable {
                axis: 0,
                lhs: 2,
                rhs: 4
            })
        );
        let a = [1.0f32; 6];
        let mut o = [0.0f32; 4];
        let av = TensorView::new(&a, s(&[2, 3])).unwrap();
        let bv = TensorView::new(&a, s(&[3, 2])).unwrap();
        let mut wrong = TensorViewMut::new(&mut o, s(&[1, 2, 2])).unwrap();
        assert_eq!(
            matmul(&av, &bv, &mut wrong, plain),
            Err(Error::ShapeMismatch { op: "matmul" })
        );
    }

    #[test]
    fn empty_inner_axis_gives_zeros() {
        let none: [f32; 0] = [];
        let mut o = [7.0f32; 6];
        let av = TensorView::new(&none, s(&[2, 0])).unwrap();
        let bv = TensorView::new(&none, s(&[0, 3])).unwrap();
        let mut out = TensorViewMut::new(&mut o, s(&[2, 3])).unwrap();
        matmul(&av, &bv, &mut out, MatmulOptions::default()).unwrap();
        assert_eq!(o, [0.0; 6]);
    }
}
