//! Iteration helpers shared by the reference ops, so each op states only its
//! arithmetic.
//!
//! * [`map_unary`], [`map_binary`] and [`map_ternary`] visit every element of an
//!   output view together with the matching elements of its inputs (NumPy
//!   broadcasting for two and three inputs), in row-major order.
//! * [`axis_mask`] and [`split_layout`] cut a layout into *outer* and *inner*
//!   axes: reductions, softmax, norms, cumsum and the matmul batch loop walk the
//!   outer offsets and, for each, the inner offsets (element = outer + inner).

use crate::error::{Error, Result};
use crate::shape::{MAX_RANK, Shape, broadcast_shapes, normalize_axis};
use crate::view::{Layout, Offsets, TensorView, TensorViewMut};

/// Writes `f(a)` for every element of `a` into `out`; the shapes must be equal
/// (no broadcasting), otherwise [`Error::ShapeMismatch`] naming `op`.
pub fn map_unary<A: Copy, O: Copy>(
    op: &'static str,
    a: &TensorView<'_, A>,
    out: &mut TensorViewMut<'_, O>,
    mut f: impl FnMut(A) -> O,
) -> Result<()> {
    if a.shape() != out.shape() {
        return Err(Error::ShapeMismatch { op });
    }
    let offsets = out.layout().offsets();
    let data = out.data_mut();
    for (x, o) in a.iter().zip(offsets) {
        data[o] = f(x);
    }
    Ok(())
}

/// Writes `f(a, b)` into `out` with NumPy broadcasting. The inputs must broadcast
/// together ([`Error::NotBroadcastable`] otherwise) and `out` must have exactly
/// the broadcast shape ([`Error::ShapeMismatch`] naming `op` otherwise).
pub fn map_binary<A: Copy, B: Copy, O: Copy>(
    op: &'static str,
    a: &TensorView<'_, A>,
    b: &TensorView<'_, B>,
    out: &mut TensorViewMut<'_, O>,
    mut f: impl FnMut(A, B) -> O,
) -> Result<()> {
    let shape = broadcast_shapes(a.shape(), b.shape())?;
    if shape != *out.shape() {
        return Err(Error::ShapeMismatch { op });
    }
    let (a, b) = (a.broadcast_to(&shape)?, b.broadcast_to(&shape)?);
    let offsets = out.layout().offsets();
    let data = out.data_mut();
    for ((x, y), o) in a.iter().zip(b.iter()).zip(offsets) {
        data[o] = f(x, y);
    }
    Ok(())
}

/// Three-input [`map_binary`]: `out` must have the broadcast shape of all three.
pub fn map_ternary<A: Copy, B: Copy, C: Copy, O: Copy>(
    op: &'static str,
    a: &TensorView<'_, A>,
    b: &TensorView<'_, B>,
    c: &TensorView<'_, C>,
    out: &mut TensorViewMut<'_, O>,
    mut f: impl FnMut(A, B, C) -> O,
) -> Result<()> {
    let shape = broadcast_shapes(&broadcast_shapes(a.shape(), b.shape())?, c.shape())?;
    if shape != *out.shape() {
        return Err(Error::ShapeMismatch { op });
    }
    let (a, b, c) = (
        a.broadcast_to(&shape)?,
        b.broadcast_to(&shape)?,
        c.broadcast_to(&shape)?,
    );
    let offsets = out.layout().offsets();
    let data = out.data_mut();
    for (((x, y), z), o) in a.iter().zip(b.iter()).zip(c.iter()).zip(offsets) {
        data[o] = f(x, y, z);
    }
    Ok(())
}

/// Which axes of a tensor an op works *along* (`true`) versus across (`false`).
pub type AxisMask = [bool; MAX_RANK];

/// Resolves `axes` (negative ones count from the end) for a tensor of rank `rank`
/// into a mask. An axis out of range is [`Error::AxisOutOfRange`]; the same axis
/// twice is [`Error::InvalidArgument`].
pub fn axis_mask(axes: &[isize], rank: usize) -> Result<AxisMask> {
    check_rank(rank)?;
    let mut mask = [false; MAX_RANK];
    for &axis in axes {
        let resolved = normalize_axis(axis, rank)?;
        if mask[resolved] {
            return Err(Error::InvalidArgument("an axis is listed twice"));
        }
        mask[resolved] = true;
    }
    Ok(mask)
}

/// Masks have room for [`MAX_RANK`] axes.
fn check_rank(rank: usize) -> Result<()> {
    if rank > MAX_RANK {
        return Err(Error::RankTooHigh {
            rank,
            max: MAX_RANK,
        });
    }
    Ok(())
}

/// A mask selecting the last `count` axes of a tensor of rank `rank`
/// ([`Error::InvalidArgument`] when `count > rank`).
pub fn trailing_mask(count: usize, rank: usize) -> Result<AxisMask> {
    check_rank(rank)?;
    if count > rank {
        return Err(Error::InvalidArgument("more trailing axes than the rank"));
    }
    let mut mask = [false; MAX_RANK];
    for flag in &mut mask[rank - count..rank] {
        *flag = true;
    }
    Ok(mask)
}

/// A layout cut in two along an [`AxisMask`]: every element offset of the
/// original is one offset of `outer` plus one offset of `inner`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// The original with the masked axes shrunk to size 1 (same offset).
    pub outer: Layout,
    /// The original with the unmasked axes shrunk to size 1, at offset 0.
    pub inner: Layout,
}

/// Splits `layout` into the axes `mask` selects (inner) and the others (outer).
///
/// Walking `outer.offsets()` and, inside, `inner.offsets()` visits the groups an
/// op along the masked axes works on, in row-major order of the outer axes. A
/// masked axis of size 0 leaves the outer walk intact and the inner walk empty,
/// which is what a reduction over an empty axis needs.
pub fn split_layout(layout: &Layout, mask: &AxisMask) -> Split {
    let dims = layout.shape.dims();
    let mut outer_dims = [1usize; MAX_RANK];
    let mut inner_dims = [1usize; MAX_RANK];
    for (axis, &d) in dims.iter().enumerate() {
        if mask[axis] {
            inner_dims[axis] = d;
        } else {
            outer_dims[axis] = d;
        }
    }
    let rank = dims.len();
    Split {
        outer: Layout {
            shape: shape_of(&outer_dims[..rank]),
            ..*layout
        },
        inner: Layout {
            shape: shape_of(&inner_dims[..rank]),
            offset: 0,
            ..*layout
        },
    }
}

/// The slice offsets of one group: a base offset (from [`Split::outer`]) plus each
/// offset of the split's inner layout, in row-major order.
#[derive(Clone, Debug)]
pub struct Group {
    base: usize,
    inner: Offsets,
}

impl Iterator for Group {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        self.inner.next().map(|i| self.base + i)
    }
}

/// The group at `base` of a split whose inner layout is `inner`.
pub fn group_offsets(base: usize, inner: &Layout) -> Group {
    Group {
        base,
        inner: inner.offsets(),
    }
}

/// Walks an input and an output of the same shape group by group: each item holds
/// the input's and the output's offsets of one group, in matching order. This is the
/// loop of every op that maps a lane to a lane (softmax, cumsum, the norms). The
/// iterator copies the layouts, so the output's data may be borrowed mutably while
/// it runs.
pub fn paired_groups(
    input: &Layout,
    output: &Layout,
    mask: &AxisMask,
) -> impl Iterator<Item = (Group, Group)> + use<> {
    let (from, to) = (split_layout(input, mask), split_layout(output, mask));
    let outer = from.outer.offsets().zip(to.outer.offsets());
    outer.map(move |(a, b)| (group_offsets(a, &from.inner), group_offsets(b, &to.inner)))
}

/// A shape from at most [`MAX_RANK`] dims (the callers here never exceed it).
fn shape_of(dims: &[usize]) -> Shape {
    Shape::new(dims).unwrap_or(Shape::scalar())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(d: &[usize]) -> Shape {
        Shape::new(d).unwrap()
    }

    #[test]
    fn split_visits_every_element_once_in_groups() {
        let data: [u32; 24] = core::array::from_fn(|i| i as u32);
        let v = TensorView::new(&data, s(&[2, 3, 4])).unwrap();
        let split = split_layout(v.layout(), &axis_mask(&[1], 3).unwrap());
        let mut seen = [0u32; 24];
        let mut groups = 0;
        for (g, o) in split.outer.offsets().enumerate() {
            // Outer offsets run over axes 0 and 2; inner over axis 1 (stride 4).
            assert_eq!(o, (g / 4) * 12 + g % 4);
            for (k, i) in split.inner.offsets().enumerate() {
                assert_eq!(i, 4 * k);
                seen[o + i] += 1;
            }
            groups += 1;
        }
        assert_eq!(groups, 8);
        assert!(seen.iter().all(|&n| n == 1));
    }

    #[test]
    fn masks_reject_bad_axes() {
        assert_eq!(
            axis_mask(&[3], 3),
            Err(Error::AxisOutOfRange { axis: 3, rank: 3 })
        );
        assert!(matches!(
            axis_mask(&[1, -2], 3),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            trailing_mask(4, 3),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(trailing_mask(2, 3).unwrap()[..3], [false, true, true]);
        let too_high = Err(Error::RankTooHigh { rank: 9, max: 8 });
        assert_eq!(axis_mask(&[0], 9), too_high);
        assert_eq!(trailing_mask(1, 9), too_high);
    }

    #[test]
    fn walkers_check_shapes() {
        let a = [1.0f32; 6];
        let mut o = [0.0f32; 6];
        let x = TensorView::new(&a, s(&[2, 3])).unwrap();
        let y = TensorView::new(&a[..2], s(&[2])).unwrap();
        let mut out = TensorViewMut::new(&mut o, s(&[3, 2])).unwrap();
        assert_eq!(
            map_unary("t", &x, &mut out, |v| v),
            Err(Error::ShapeMismatch { op: "t" })
        );
        assert_eq!(
            map_binary("t", &x, &y, &mut out, |v, w| v + w),
            Err(Error::NotBroadcastable {
                axis: 0,
                lhs: 3,
                rhs: 2
            })
        );
        assert_eq!(
            map_ternary("t", &x, &x, &x, &mut out, |v, _, _| v),
            Err(Error::ShapeMismatch { op: "t" })
        );
    }
}
