//! Reductions over one or several axes (sum, mean, max, min, prod, variance,
//! argmax, argmin) and the running sum `cumsum`.
//!
//! Sums, products and variances accumulate in f64, in row-major order of the
//! reduced elements, and round to f32 once: within about half an f32 ulp of the
//! exact result for well-conditioned data, so a fast f32 kernel is judged against
//! something better than itself. Max, min and the arg-reductions propagate NaN as
//! NumPy does.
//!
//! `axes` lists the reduced axes (negative ones count from the end); an empty list
//! reduces nothing and all axes reduce to a single value, as a tuple `axis=` does in
//! NumPy. With `keepdims` the reduced axes stay as size 1.

use crate::error::{Error, Result};
use crate::ops::walk::{Split, axis_mask, group_offsets, paired_groups, split_layout};
use crate::shape::{MAX_RANK, Shape};
use crate::view::{TensorView, TensorViewMut};

/// A reduction to one f32 per group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Sum (0 over no elements).
    Sum,
    /// Arithmetic mean.
    Mean,
    /// Largest value (NaN if any is NaN).
    Max,
    /// Smallest value (NaN if any is NaN).
    Min,
    /// Product (1 over no elements).
    Prod,
    /// Variance `Σ (x - mean)² / (n - ddof)`, computed in two passes.
    Var {
        /// Delta degrees of freedom: 0 for the population variance, 1 for the
        /// unbiased sample variance.
        ddof: usize,
    },
}

/// The shape of a reduction of `input` over `axes`.
///
/// Errors: an axis out of range ([`Error::AxisOutOfRange`]) or listed twice
/// ([`Error::InvalidArgument`]).
pub fn reduce_shape(input: &Shape, axes: &[isize], keepdims: bool) -> Result<Shape> {
    let mask = axis_mask(axes, input.rank())?;
    let mut dims = [0usize; MAX_RANK];
    let mut rank = 0;
    for (axis, &d) in input.dims().iter().enumerate() {
        if !mask[axis] {
            dims[rank] = d;
            rank += 1;
        } else if keepdims {
            dims[rank] = 1;
            rank += 1;
        }
    }
    Shape::new(&dims[..rank])
}

/// Checks `out` against the reduction's shape and splits `x` into the groups to
/// reduce: one group per output element, in the output's row-major order.
fn reduction_groups<O: Copy>(
    x: &TensorView<'_, f32>,
    axes: &[isize],
    keepdims: bool,
    out: &TensorViewMut<'_, O>,
) -> Result<Split> {
    if reduce_shape(x.shape(), axes, keepdims)? != *out.shape() {
        return Err(Error::ShapeMismatch { op: "reduce" });
    }
    let mask = axis_mask(axes, x.shape().rank())?;
    Ok(split_layout(x.layout(), &mask))
}

/// The error for a reduction with no value over too few elements.
const EMPTY_REDUCTION: Error =
    Error::InvalidArgument("reduction over too few elements has no value");

/// Reduces `x` over `axes` with `op` into `out`, whose shape must be
/// [`reduce_shape`]`(x, axes, keepdims)` ([`Error::ShapeMismatch`] otherwise).
///
/// Mean, max and min over zero elements, and a variance over `ddof` or fewer, have
/// no value: they are [`Error::InvalidArgument`] (NumPy warns and returns NaN, or
/// raises). Sum and prod of nothing are 0 and 1.
pub fn reduce(
    op: ReduceOp,
    x: &TensorView<'_, f32>,
    axes: &[isize],
    keepdims: bool,
    out: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    let split = reduction_groups(x, axes, keepdims, out)?;
    let count = split.inner.shape.numel();
    let minimum = match op {
        ReduceOp::Sum | ReduceOp::Prod => 0,
        ReduceOp::Mean | ReduceOp::Max | ReduceOp::Min => 1,
        ReduceOp::Var { ddof } => ddof.saturating_add(1),
    };
    if count < minimum && out.shape().numel() > 0 {
        return Err(EMPTY_REDUCTION);
    }
    let data = x.data();
    let outputs = out.layout().offsets();
    let out_data = out.data_mut();
    for (base, o) in split.outer.offsets().zip(outputs) {
        let values = group_offsets(base, &split.inner).map(|i| f64::from(data[i]));
        out_data[o] = reduce_values(op, values, count) as f32;
    }
    Ok(())
}

/// Reduces one group of `count` values (at least the op's minimum).
fn reduce_values(op: ReduceOp, values: impl Iterator<Item = f64> + Clone, count: usize) -> f64 {
    match op {
        ReduceOp::Sum => values.sum(),
        ReduceOp::Mean => values.sum::<f64>() / count as f64,
        ReduceOp::Prod => values.product(),
        ReduceOp::Max => values.fold(f64::NEG_INFINITY, |m, v| extreme(m, v, v > m)),
        ReduceOp::Min => values.fold(f64::INFINITY, |m, v| extreme(m, v, v < m)),
        ReduceOp::Var { ddof } => {
            let mean = values.clone().sum::<f64>() / count as f64;
            let squares: f64 = values.map(|v| (v - mean) * (v - mean)).sum();
            squares / (count - ddof) as f64
        }
    }
}

/// One step of a NaN-propagating max/min: NaN once either is NaN, else `v` when it
/// is `better`, else the running value `m`.
fn extreme(m: f64, v: f64, better: bool) -> f64 {
    if m.is_nan() || v.is_nan() {
        f64::NAN
    } else if better {
        v
    } else {
        m
    }
}

/// Which extreme an arg-reduction looks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgOp {
    /// Index of the largest value.
    Max,
    /// Index of the smallest value.
    Min,
}

impl ArgOp {
    /// True when `v` is strictly more extreme than `best` (ties keep the first).
    fn beats(self, v: f32, best: f32) -> bool {
        match self {
            ArgOp::Max => v > best,
            ArgOp::Min => v < best,
        }
    }
}

/// Writes the index of the first largest (or smallest) value of each group into
/// the i64 tensor `out`, whose shape must be [`reduce_shape`]`(x, axes, keepdims)`.
///
/// The index counts the reduced elements in row-major order: with one axis it is
/// the position along that axis (`numpy.argmax(x, axis)`), with all axes it is the
/// flat index (`numpy.argmax(x)`). Ties give the first; a NaN wins (the first NaN),
/// as in NumPy. A group with no elements is [`Error::InvalidArgument`].
pub fn arg_reduce(
    op: ArgOp,
    x: &TensorView<'_, f32>,
    axes: &[isize],
    keepdims: bool,
    out: &mut TensorViewMut<'_, i64>,
) -> Result<()> {
    let split = reduction_groups(x, axes, keepdims, out)?;
    if split.inner.shape.numel() == 0 && out.shape().numel() > 0 {
        return Err(EMPTY_REDUCTION);
    }
    let data = x.data();
    let outputs = out.layout().offsets();
    let out_data = out.data_mut();
    for (base, o) in split.outer.offsets().zip(outputs) {
        let mut best: Option<(usize, f32)> = None;
        for (index, at) in group_offsets(base, &split.inner).enumerate() {
            let v = data[at];
            let take = match best {
                None => true,
                // The first NaN wins for good.
                Some((_, b)) if b.is_nan() => false,
                Some((_, b)) => v.is_nan() || op.beats(v, b),
            };
            if take {
                best = Some((index, v));
            }
        }
        out_data[o] = best.map_or(0, |(index, _)| index as i64);
    }
    Ok(())
}

/// `numpy.argmax`: [`arg_reduce`] with [`ArgOp::Max`].
pub fn argmax(
    x: &TensorView<'_, f32>,
    axes: &[isize],
    keepdims: bool,
    out: &mut TensorViewMut<'_, i64>,
) -> Result<()> {
    arg_reduce(ArgOp::Max, x, axes, keepdims, out)
}

/// `numpy.argmin`: [`arg_reduce`] with [`ArgOp::Min`].
pub fn argmin(
    x: &TensorView<'_, f32>,
    axes: &[isize],
    keepdims: bool,
    out: &mut TensorViewMut<'_, i64>,
) -> Result<()> {
    arg_reduce(ArgOp::Min, x, axes, keepdims, out)
}

/// Running sum along `axis` into `out` (same shape as `x`): element `i` of each lane
/// is the sum of elements `0..=i`, accumulated in f64 and rounded once per output.
pub fn cumsum(
    x: &TensorView<'_, f32>,
    axis: isize,
    out: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    if x.shape() != out.shape() {
        return Err(Error::ShapeMismatch { op: "cumsum" });
    }
    let mask = axis_mask(&[axis], x.shape().rank())?;
    let data = x.data();
    let lanes = paired_groups(x.layout(), out.layout(), &mask);
    let out_data = out.data_mut();
    for (lane_in, lane_out) in lanes {
        let mut running = 0.0f64;
        for (i, o) in lane_in.zip(lane_out) {
            running += f64::from(data[i]);
            out_data[o] = running as f32;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(d: &[usize]) -> Shape {
        Shape::new(d).unwrap()
    }

    #[test]
    fn shapes_drop_or_keep_axes() {
        assert_eq!(reduce_shape(&s(&[2, 3, 4]), &[0, -1], false), Ok(s(&[3])));
        assert_eq!(
            reduce_shape(&s(&[2, 3, 4]), &[0, -1], true),
            Ok(s(&[1, 3, 1]))
        );
        assert_eq!(reduce_shape(&s(&[2, 3]), &[], false), Ok(s(&[2, 3])));
        assert_eq!(
            reduce_shape(&s(&[2, 3]), &[2], false),
            Err(Error::AxisOutOfRange { axis: 2, rank: 2 })
        );
        assert!(matches!(
            reduce_shape(&s(&[2, 3]), &[1, 1], false),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn wrong_output_shape_and_empty_groups_are_errors() {
        let x = [1.0f32; 6];
        let xv = TensorView::new(&x, s(&[2, 3])).unwrap();
        let mut o = [0.0f32; 3];
        let mut kept = TensorViewMut::new(&mut o[..2], s(&[2, 1])).unwrap();
        assert_eq!(
            reduce(ReduceOp::Sum, &xv, &[1], false, &mut kept),
            Err(Error::ShapeMismatch { op: "reduce" })
        );
        let mut i = [0i64; 2];
        let mut iv = TensorViewMut::new(&mut i, s(&[2])).unwrap();
        assert_eq!(
            argmax(&xv, &[-3], false, &mut iv),
            Err(Error::AxisOutOfRange { axis: -3, rank: 2 })
        );
        let empty = TensorView::new(&x, s(&[2, 0])).unwrap();
        let mut ov = TensorViewMut::new(&mut o[..2], s(&[2])).unwrap();
        assert_eq!(
            reduce(ReduceOp::Max, &empty, &[1], false, &mut ov),
            Err(EMPTY_REDUCTION)
        );
        assert_eq!(argmax(&empty, &[1], false, &mut iv), Err(EMPTY_REDUCTION));
        reduce(ReduceOp::Sum, &empty, &[1], false, &mut ov).unwrap();
        assert_eq!(o[..2], [0.0, 0.0]);
        let mut ov = TensorViewMut::new(&mut o[..3], s(&[3])).unwrap();
        assert_eq!(
            reduce(ReduceOp::Var { ddof: 2 }, &xv, &[0], false, &mut ov),
            Err(EMPTY_REDUCTION)
        );
        let mut c = [0.0f32; 6];
        let mut cv = TensorViewMut::new(&mut c, s(&[2, 3])).unwrap();
        assert_eq!(
            cumsum(&xv, 2, &mut cv),
            Err(Error::AxisOutOfRange { axis: 2, rank: 2 })
        );
        let mut cv = TensorViewMut::new(&mut c, s(&[3, 2])).unwrap();
        assert_eq!(
            cumsum(&xv, 0, &mut cv),
            Err(Error::ShapeMismatch { op: "cumsum" })
        );
    }

    #[test]
    fn nan_propagates_and_wins_argmax() {
        let x = [1.0f32, f32::NAN, 3.0, f32::NAN];
        let xv = TensorView::new(&x, s(&[4])).unwrap();
        let mut o = [0.0f32];
        let mut ov = TensorViewMut::new(&mut o, Shape::scalar()).unwrap();
        reduce(ReduceOp::Max, &xv, &[0], false, &mut ov).unwrap();
        assert!(o[0].is_nan());
        let mut i = [9i64];
        let mut iv = TensorViewMut::new(&mut i, Shape::scalar()).unwrap();
        argmax(&xv, &[0], false, &mut iv).unwrap();
        assert_eq!(i[0], 1);
        let ties = [2.0f32, 5.0, 5.0];
        let tv = TensorView::new(&ties, s(&[3])).unwrap();
        let mut iv = TensorViewMut::new(&mut i, Shape::scalar()).unwrap();
        argmax(&tv, &[0], false, &mut iv).unwrap();
        assert_eq!(i[0], 1);
    }
}
