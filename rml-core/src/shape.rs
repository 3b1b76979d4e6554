//! Shapes, strides and NumPy broadcasting, with a fixed maximum rank so they live on
//! the stack without allocation.

use core::fmt;

use crate::error::{Error, Result};

/// The largest rank a [`Shape`] can hold.
pub const MAX_RANK: usize = 8;

/// The sizes of a tensor's axes, outermost first (row-major order).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shape {
    dims: [usize; MAX_RANK],
    rank: usize,
}

/// Element strides, one per axis, in elements (not bytes). A stride of 0 repeats an
/// axis without storing it: that is how broadcasting views work.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Strides {
    steps: [usize; MAX_RANK],
    rank: usize,
}

impl Shape {
    /// A shape from its axis sizes; more than [`MAX_RANK`] axes is an error.
    pub fn new(dims: &[usize]) -> Result<Shape> {
        if dims.len() > MAX_RANK {
            return Err(Error::RankTooHigh {
                rank: dims.len(),
                max: MAX_RANK,
            });
        }
        let mut shape = Shape {
            dims: [0; MAX_RANK],
            rank: dims.len(),
        };
        shape.dims[..dims.len()].copy_from_slice(dims);
        Ok(shape)
    }

    /// The rank-0 shape of a scalar (one element).
    pub const fn scalar() -> Shape {
        Shape {
            dims: [0; MAX_RANK],
            rank: 0,
        }
    }

    /// The axis sizes.
    pub fn dims(&self) -> &[usize] {
        &self.dims[..self.rank]
    }

    /// Number of axes.
    pub const fn rank(&self) -> usize {
        self.rank
    }

    /// Size of axis `axis` (which must be `< rank`; see [`Shape::axis`] for checked
    /// access with negative indices).
    pub fn dim(&self, axis: usize) -> usize {
        self.dims()[axis]
    }

    /// Number of elements, or [`Error::Overflow`] when the product overflows.
    pub fn numel_checked(&self) -> Result<usize> {
        self.dims()
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .ok_or(Error::Overflow)
    }

    /// Number of elements. Saturates at `usize::MAX` on overflow; use
    /// [`Shape::numel_checked`] for shapes from untrusted input.
    pub fn numel(&self) -> usize {
        self.numel_checked().unwrap_or(usize::MAX)
    }

    /// Resolves a possibly negative axis (`-1` is the last) to `0..rank`.
    pub fn axis(&self, axis: isize) -> Result<usize> {
        normalize_axis(axis, self.rank)
    }

    /// The row-major (C order) strides of a dense tensor of this shape.
    pub fn contiguous_strides(&self) -> Strides {
        let mut strides = Strides {
            steps: [0; MAX_RANK],
            rank: self.rank,
        };
        let mut step = 1usize;
        for axis in (0..self.rank).rev() {
            strides.steps[axis] = step;
            step = step.saturating_mul(self.dims[axis]);
        }
        strides
    }

    /// This shape with axis `axis` replaced by `size`.
    pub fn with_dim(&self, axis: usize, size: usize) -> Result<Shape> {
        if axis >= self.rank {
            return Err(Error::AxisOutOfRange {
                axis: axis as isize,
                rank: self.rank,
            });
        }
        let mut out = *self;
        out.dims[axis] = size;
        Ok(out)
    }

    /// This shape with axis `axis` removed (as a reduction without `keepdims` does).
    pub fn without_axis(&self, axis: usize) -> Result<Shape> {
        if axis >= self.rank {
            return Err(Error::AxisOutOfRange {
                axis: axis as isize,
                rank: self.rank,
            });
        }
        let mut out = Shape::scalar();
        for (i, &d) in self.dims().iter().enumerate().filter(|(i, _)| *i != axis) {
            out.dims[i - usize::from(i > axis)] = d;
        }
        out.rank = self.rank - 1;
        Ok(out)
    }
}

impl Strides {
    /// Strides from explicit per-axis steps (in elements).
    pub fn new(steps: &[usize]) -> Result<Strides> {
        if steps.len() > MAX_RANK {
            return Err(Error::RankTooHigh {
                rank: steps.len(),
                max: MAX_RANK,
            });
        }
        let mut strides = Strides {
            steps: [0; MAX_RANK],
            rank: steps.len(),
        };
        strides.steps[..steps.len()].copy_from_slice(steps);
        Ok(strides)
    }

    /// The per-axis steps.
    pub fn steps(&self) -> &[usize] {
        &self.steps[..self.rank]
    }

    /// Number of axes.
    pub const fn rank(&self) -> usize {
        self.rank
    }

    pub(crate) fn set(&mut self, axis: usize, step: usize) {
        self.steps[axis] = step;
    }
}

/// Resolves a possibly negative axis for a tensor of rank `rank`.
pub fn normalize_axis(axis: isize, rank: usize) -> Result<usize> {
    let resolved = if axis < 0 { axis + rank as isize } else { axis };
    if resolved < 0 || resolved as usize >= rank {
        return Err(Error::AxisOutOfRange { axis, rank });
    }
    Ok(resolved as usize)
}

/// The NumPy broadcast of two shapes: align from the right; each pair of sizes must be
/// equal or one of them 1.
pub fn broadcast_shapes(lhs: &Shape, rhs: &Shape) -> Result<Shape> {
    let rank = lhs.rank.max(rhs.rank);
    let mut out = Shape {
        dims: [0; MAX_RANK],
        rank,
    };
    for from_right in 0..rank {
        let l = dim_from_right(lhs, from_right);
        let r = dim_from_right(rhs, from_right);
        let size = match (l, r) {
            (a, b) if a == b => a,
            (1, b) => b,
            (a, 1) => a,
            (a, b) => {
                return Err(Error::NotBroadcastable {
                    axis: from_right,
                    lhs: a,
                    rhs: b,
                });
            }
        };
        out.dims[rank - 1 - from_right] = size;
    }
    Ok(out)
}

/// Size of the axis `from_right` places from the end, or 1 past the front (NumPy's
/// implicit leading ones).
fn dim_from_right(shape: &Shape, from_right: usize) -> usize {
    if from_right < shape.rank {
        shape.dims[shape.rank - 1 - from_right]
    } else {
        1
    }
}

/// Strides that read a tensor of shape `from` (with `strides`) as if it had the
/// broadcast shape `to`: broadcast axes get stride 0.
pub fn broadcast_strides(from: &Shape, strides: &Strides, to: &Shape) -> Result<Strides> {
    if from.rank > to.rank {
        return Err(Error::ShapeMismatch { op: "broadcast_to" });
    }
    let lead = to.rank - from.rank;
    let mut out = Strides {
        steps: [0; MAX_RANK],
        rank: to.rank,
    };
    for axis in 0..from.rank {
        let (f, t) = (from.dims[axis], to.dims[lead + axis]);
        out.steps[lead + axis] = if f == t {
            strides.steps[axis]
        } else if f == 1 {
            0
        } else {
            return Err(Error::NotBroadcastable {
                axis: from.rank - 1 - axis,
                lhs: f,
                rhs: t,
            });
        };
    }
    Ok(out)
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.dims()).finish()
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.dims().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

impl fmt::Debug for Strides {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.steps()).finish()
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for Shape {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "{=[usize]}", self.dims())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(d: &[usize]) -> Shape {
        Shape::new(d).unwrap()
    }

    #[test]
    fn rank_over_the_maximum_is_an_error() {
        assert_eq!(
            Shape::new(&[1; 9]),
            Err(Error::RankTooHigh { rank: 9, max: 8 })
        );
        assert!(Shape::new(&[1; 8]).is_ok());
    }

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(
            broadcast_shapes(&s(&[8, 1, 6, 1]), &s(&[7, 1, 5])).unwrap(),
            s(&[8, 7, 6, 5])
        );
        assert_eq!(broadcast_shapes(&s(&[]), &s(&[3])).unwrap(), s(&[3]));
        assert_eq!(broadcast_shapes(&s(&[0]), &s(&[1])).unwrap(), s(&[0]));
        assert_eq!(
            broadcast_shapes(&s(&[2, 3]), &s(&[4, 3])),
            Err(Error::NotBroadcastable {
                axis: 1,
                lhs: 2,
                rhs: 4
            })
        );
    }

    #[test]
    fn contiguous_strides_are_row_major() {
        assert_eq!(s(&[2, 3, 4]).contiguous_strides().steps(), &[12, 4, 1]);
        assert_eq!(
            Shape::scalar().contiguous_strides().steps(),
            &[] as &[usize]
        );
    }

    #[test]
    fn negative_axes_resolve_and_out_of_range_fails() {
        assert_eq!(s(&[2, 3]).axis(-1), Ok(1));
        assert_eq!(
            s(&[2, 3]).axis(2),
            Err(Error::AxisOutOfRange { axis: 2, rank: 2 })
        );
        assert_eq!(
            s(&[2, 3]).axis(-3),
            Err(Error::AxisOutOfRange { axis: -3, rank: 2 })
        );
    }

    #[test]
    fn numel_overflow_is_reported() {
        assert_eq!(s(&[usize::MAX, 2]).numel_checked(), Err(Error::Overflow));
        assert_eq!(s(&[2, 0, 5]).numel(), 0);
        assert_eq!(Shape::scalar().numel(), 1);
    }

    #[test]
    fn without_axis_drops_one_axis() {
        assert_eq!(s(&[2, 3, 4]).without_axis(1).unwrap(), s(&[2, 4]));
        assert!(s(&[2]).without_axis(1).is_err());
    }
}
