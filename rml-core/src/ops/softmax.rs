//! Softmax and log-softmax along one axis, in the numerically stable form that
//! subtracts each lane's maximum before exponentiating (so `exp` never overflows).
//!
//! The lane's sum of exponentials accumulates in f64 and each output is rounded to
//! f32 once. A lane holding a NaN or `+inf`, or only `-inf`, becomes all NaN, as the
//! same formula does in NumPy and PyTorch.

use crate::error::{Error, Result};
use crate::ops::walk::{axis_mask, paired_groups};
use crate::view::{TensorView, TensorViewMut};

/// Which of the two functions to compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SoftmaxKind {
    /// `e^(x - max) / Σ e^(x - max)`.
    Softmax,
    /// `(x - max) - ln Σ e^(x - max)`.
    LogSoftmax,
}

/// Writes softmax (or log-softmax) of `x` along `axis` into `out` (same shape).
///
/// Errors: an axis out of range ([`Error::AxisOutOfRange`]), an output of another
/// shape ([`Error::ShapeMismatch`]).
pub fn softmax_along(
    kind: SoftmaxKind,
    x: &TensorView<'_, f32>,
    axis: isize,
    out: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    if x.shape() != out.shape() {
        return Err(Error::ShapeMismatch { op: "softmax" });
    }
    let mask = axis_mask(&[axis], x.shape().rank())?;
    let data = x.data();
    let lanes = paired_groups(x.layout(), out.layout(), &mask);
    let out_data = out.data_mut();
    for (lane_in, lane_out) in lanes {
        let lane = lane_in.map(|i| f64::from(data[i]));
        let max = lane.clone().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = lane.clone().map(|v| libm::exp(v - max)).sum();
        let log_sum = libm::log(sum);
        for (v, o) in lane.zip(lane_out) {
            out_data[o] = match kind {
                SoftmaxKind::Softmax => libm::exp(v - max) / sum,
                SoftmaxKind::LogSoftmax => (v - max) - log_sum,
            } as f32;
        }
    }
    Ok(())
}

/// Stable softmax along `axis` (see [`softmax_along`]).
pub fn softmax(
    x: &TensorView<'_, f32>,
    axis: isize,
    out: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    softmax_along(SoftmaxKind::Softmax, x, axis, out)
}

/// Stable log-softmax along `axis` (see [`softmax_along`]).
pub fn log_softmax(
    x: &TensorView<'_, f32>,
    axis: isize,
    out: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    softmax_along(SoftmaxKind::LogSoftmax, x, axis, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Shape;

    fn s(d: &[usize]) -> Shape {
        Shape::new(d).unwrap()
    }

    #[test]
    fn bad_axis_and_shape_are_errors() {
        let x = [0.0f32; 6];
        let xv = TensorView::new(&x, s(&[2, 3])).unwrap();
        let mut o = [0.0f32; 6];
        let mut ov = TensorViewMut::new(&mut o, s(&[2, 3])).unwrap();
        assert_eq!(
            softmax(&xv, -3, &mut ov),
            Err(Error::AxisOutOfRange { axis: -3, rank: 2 })
        );
        let scalar = TensorView::new(&x, Shape::scalar()).unwrap();
        assert_eq!(
            log_softmax(&scalar, 0, &mut ov),
            Err(Error::ShapeMismatch { op: "softmax" })
        );
    }

    #[test]
    fn huge_logits_do_not_overflow() {
        // e^1000 overflows f64; subtracting the max first keeps the result exact.
        let x = [1000.0f32, 1000.0];
        let xv = TensorView::new(&x, s(&[2])).unwrap();
        let mut o = [0.0f32; 2];
        let mut ov = TensorViewMut::new(&mut o, s(&[2])).unwrap();
        softmax(&xv, 0, &mut ov).unwrap();
        assert_eq!(o, [0.5, 0.5]);
    }
}
