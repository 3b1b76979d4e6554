//! Tensor views: a shape, strides and an offset laid over a caller-owned slice.
//!
//! Views never own or allocate memory. Layout changes (transpose, permute, slice,
//! broadcast, reshape of contiguous data) produce new views over the same slice.
//! [`Offsets`] walks the element offsets of any strided layout in row-major order,
//! and [`RowWalker`] walks the starting offsets of its last-axis rows.

use crate::dtype::Element;
use crate::error::{Error, Result};
use crate::shape::{MAX_RANK, Shape, Strides, broadcast_strides, normalize_axis};

/// An immutable strided view of `T` elements in a caller slice.
#[derive(Clone, Copy, Debug)]
pub struct TensorView<'a, T> {
    data: &'a [T],
    layout: Layout,
}

/// A mutable strided view of `T` elements in a caller slice.
#[derive(Debug)]
pub struct TensorViewMut<'a, T> {
    data: &'a mut [T],
    layout: Layout,
}

/// Shape, strides and offset: where each element of a view lies in its slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Axis sizes.
    pub shape: Shape,
    /// Per-axis steps in elements.
    pub strides: Strides,
    /// Offset of element `[0, 0, …]` in the slice.
    pub offset: usize,
}

impl Layout {
    /// The dense row-major layout of `shape` starting at offset 0.
    pub fn contiguous(shape: Shape) -> Layout {
        Layout {
            shape,
            strides: shape.contiguous_strides(),
            offset: 0,
        }
    }

    /// Checks that every element this layout can address lies in a slice of `len`
    /// elements, and that shape and strides have the same rank.
    pub fn check_fits(&self, len: usize) -> Result<()> {
        if self.shape.rank() != self.strides.rank() {
            return Err(Error::ShapeMismatch { op: "strides" });
        }
        if self.shape.numel_checked()? == 0 {
            return Ok(());
        }
        let mut last = self.offset;
        for (&d, &s) in self.shape.dims().iter().zip(self.strides.steps()) {
            let span = (d - 1).checked_mul(s).ok_or(Error::Overflow)?;
            last = last.checked_add(span).ok_or(Error::Overflow)?;
        }
        let needed = last.checked_add(1).ok_or(Error::Overflow)?;
        if needed > len {
            return Err(Error::BufferTooSmall { needed, got: len });
        }
        Ok(())
    }

    /// True when elements are dense and in row-major order (size-1 axes ignored).
    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1usize;
        for (&d, &s) in self.shape.dims().iter().zip(self.strides.steps()).rev() {
            if d != 1 && s != expected {
                return false;
            }
            expected = expected.saturating_mul(d);
        }
        true
    }

    /// Offset in the slice of the element at `index` (one entry per axis).
    pub fn offset_of(&self, index: &[usize]) -> Result<usize> {
        if index.len() != self.shape.rank() {
            return Err(Error::ShapeMismatch { op: "index" });
        }
        let mut at = self.offset;
        for ((&i, &d), &s) in index
            .iter()
            .zip(self.shape.dims())
            .zip(self.strides.steps())
        {
            if i >= d {
                return Err(Error::IndexOutOfRange {
                    index: i as i64,
                    len: d,
                });
            }
            at += i * s;
        }
        Ok(at)
    }

    /// Swaps two axes.
    pub fn transpose(&self, a: isize, b: isize) -> Result<Layout> {
        let rank = self.shape.rank();
        let (a, b) = (normalize_axis(a, rank)?, normalize_axis(b, rank)?);
        let mut order = [0usize; MAX_RANK];
        for (i, o) in order.iter_mut().enumerate().take(rank) {
            *o = i;
        }
        order.swap(a, b);
        self.permute(&order[..rank])
    }

    /// Reorders axes: axis `i` of the result is axis `order[i]` of this layout.
    pub fn permute(&self, order: &[usize]) -> Result<Layout> {
        let rank = self.shape.rank();
        if order.len() != rank {
            return Err(Error::ShapeMismatch { op: "permute" });
        }
        let mut seen = [false; MAX_RANK];
        let mut dims = [0usize; MAX_RANK];
        let mut steps = [0usize; MAX_RANK];
        for (i, &axis) in order.iter().enumerate() {
            if axis >= rank || seen[axis] {
                return Err(Error::InvalidArgument("permute order is not a permutation"));
            }
            seen[axis] = true;
            dims[i] = self.shape.dim(axis);
            steps[i] = self.strides.steps()[axis];
        }
        Ok(Layout {
            shape: Shape::new(&dims[..rank])?,
            strides: Strides::new(&steps[..rank])?,
            offset: self.offset,
        })
    }

    /// Restricts axis `axis` to `start..end` with the given positive `step`.
    pub fn slice(&self, axis: isize, start: usize, end: usize, step: usize) -> Result<Layout> {
        let axis = normalize_axis(axis, self.shape.rank())?;
        let len = self.shape.dim(axis);
        if step == 0 {
            return Err(Error::InvalidArgument("slice step must be positive"));
        }
        if start > end || end > len {
            return Err(Error::IndexOutOfRange {
                index: end.max(start) as i64,
                len,
            });
        }
        let stride = self.strides.steps()[axis];
        let mut out = *self;
        out.shape = self.shape.with_dim(axis, (end - start).div_ceil(step))?;
        out.strides.set(axis, stride * step);
        if end > start {
            out.offset = self.offset + start * stride;
        }
        Ok(out)
    }

    /// Views this layout as the broadcast shape `to` (size-1 axes get stride 0).
    pub fn broadcast_to(&self, to: &Shape) -> Result<Layout> {
        Ok(Layout {
            shape: *to,
            strides: broadcast_strides(&self.shape, &self.strides, to)?,
            offset: self.offset,
        })
    }

    /// A new shape over the same elements; the layout must be contiguous.
    pub fn reshape(&self, dims: &[usize]) -> Result<Layout> {
        let shape = Shape::new(dims)?;
        if shape.numel_checked()? != self.shape.numel_checked()? {
            return Err(Error::ShapeMismatch { op: "reshape" });
        }
        if !self.is_contiguous() {
            return Err(Error::NotContiguous);
        }
        Ok(Layout {
            shape,
            strides: shape.contiguous_strides(),
            offset: self.offset,
        })
    }

    /// Inserts a size-1 axis at `axis` (`0..=rank`).
    pub fn unsqueeze(&self, axis: usize) -> Result<Layout> {
        let rank = self.shape.rank();
        if axis > rank {
            return Err(Error::AxisOutOfRange {
                axis: axis as isize,
                rank,
            });
        }
        let mut dims = [1usize; MAX_RANK + 1];
        let mut steps = [0usize; MAX_RANK + 1];
        dims[..axis].copy_from_slice(&self.shape.dims()[..axis]);
        steps[..axis].copy_from_slice(&self.strides.steps()[..axis]);
        dims[axis + 1..=rank].copy_from_slice(&self.shape.dims()[axis..]);
        steps[axis + 1..=rank].copy_from_slice(&self.strides.steps()[axis..]);
        Ok(Layout {
            shape: Shape::new(&dims[..=rank])?,
            strides: Strides::new(&steps[..=rank])?,
            offset: self.offset,
        })
    }

    /// Element offsets in row-major logical order.
    pub fn offsets(&self) -> Offsets {
        Offsets::new(self)
    }

    /// Start offsets of each last-axis row, with the row length and element stride.
    pub fn rows(&self) -> RowWalker {
        RowWalker::new(self)
    }
}

/// Iterator over the slice offsets of every element of a layout, in row-major order.
#[derive(Clone, Debug)]
pub struct Offsets {
    layout: Layout,
    index: [usize; MAX_RANK],
    next: usize,
    remaining: usize,
}

impl Offsets {
    fn new(layout: &Layout) -> Offsets {
        Offsets {
            layout: *layout,
            index: [0; MAX_RANK],
            next: layout.offset,
            remaining: layout.shape.numel(),
        }
    }
}

impl Iterator for Offsets {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let current = self.next;
        let dims = self.layout.shape.dims();
        let steps = self.layout.strides.steps();
        for axis in (0..dims.len()).rev() {
            self.index[axis] += 1;
            self.next += steps[axis];
            if self.index[axis] < dims[axis] {
                break;
            }
            self.next -= steps[axis] * dims[axis];
            self.index[axis] = 0;
        }
        Some(current)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Offsets {}

/// Walks the rows (last axis) of a strided layout: each item is the slice offset of a
/// row's first element. Every row has [`RowWalker::row_len`] elements spaced
/// [`RowWalker::row_stride`] apart. A rank-0 layout is one row of one element.
#[derive(Clone, Debug)]
pub struct RowWalker {
    outer: Offsets,
    row_len: usize,
    row_stride: usize,
}

impl RowWalker {
    fn new(layout: &Layout) -> RowWalker {
        let rank = layout.shape.rank();
        if rank == 0 {
            return RowWalker {
                outer: Offsets::new(layout),
                row_len: 1,
                row_stride: 1,
            };
        }
        let row_len = layout.shape.dim(rank - 1);
        let row_stride = layout.strides.steps()[rank - 1];
        let mut outer = *layout;
        // The walker iterates the outer axes only; an empty row means no rows at all.
        outer.shape = layout
            .shape
            .with_dim(rank - 1, usize::from(row_len > 0))
            .unwrap_or(outer.shape);
        RowWalker {
            outer: Offsets::new(&outer),
            row_len,
            row_stride,
        }
    }

    /// Elements per row.
    pub fn row_len(&self) -> usize {
        self.row_len
    }

    /// Distance between consecutive elements of a row.
    pub fn row_stride(&self) -> usize {
        self.row_stride
    }
}

impl Iterator for RowWalker {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        self.outer.next()
    }
}

/// Reinterprets bytes as `T` elements, checking alignment and length.
fn cast_bytes<T: Element>(bytes: &[u8]) -> Result<&[T]> {
    bytemuck::try_cast_slice(bytes).map_err(|e| cast_error::<T>(e, bytes.len()))
}

/// Mutable counterpart of [`cast_bytes`].
fn cast_bytes_mut<T: Element>(bytes: &mut [u8]) -> Result<&mut [T]> {
    let len = bytes.len();
    bytemuck::try_cast_slice_mut(bytes).map_err(|e| cast_error::<T>(e, len))
}

fn cast_error<T>(err: bytemuck::PodCastError, len: usize) -> Error {
    match err {
        bytemuck::PodCastError::TargetAlignmentGreaterAndInputNotAligned => Error::Misaligned {
            align: core::mem::align_of::<T>(),
        },
        _ => Error::LengthMismatch {
            expected: len / core::mem::size_of::<T>() * core::mem::size_of::<T>(),
            got: len,
        },
    }
}

impl<'a, T: Copy> TensorView<'a, T> {
    /// A dense row-major view of the first `shape.numel()` elements of `data`.
    pub fn new(data: &'a [T], shape: Shape) -> Result<Self> {
        Self::with_layout(data, Layout::contiguous(shape))
    }

    /// A view with explicit strides and offset; every addressable element must lie in
    /// `data`.
    pub fn with_layout(data: &'a [T], layout: Layout) -> Result<Self> {
        layout.check_fits(data.len())?;
        Ok(TensorView { data, layout })
    }

    /// The view's layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The view's shape.
    pub fn shape(&self) -> &Shape {
        &self.layout.shape
    }

    /// The whole underlying slice (not just the viewed elements).
    pub fn data(&self) -> &'a [T] {
        self.data
    }

    /// The viewed elements as one slice, when the view is contiguous.
    pub fn as_slice(&self) -> Result<&'a [T]> {
        if !self.layout.is_contiguous() {
            return Err(Error::NotContiguous);
        }
        let start = self.layout.offset;
        Ok(&self.data[start..start + self.layout.shape.numel()])
    }

    /// The element at `index`.
    pub fn get(&self, index: &[usize]) -> Result<T> {
        Ok(self.data[self.layout.offset_of(index)?])
    }

    /// The elements in row-major logical order.
    pub fn iter(&self) -> impl Iterator<Item = T> + 'a {
        let data = self.data;
        self.layout.offsets().map(move |o| data[o])
    }

    /// Applies a layout change, keeping the same data.
    fn relayout(&self, layout: Result<Layout>) -> Result<Self> {
        Ok(TensorView {
            data: self.data,
            layout: layout?,
        })
    }

    /// Swaps two axes (negative axes count from the end).
    pub fn transpose(&self, a: isize, b: isize) -> Result<Self> {
        self.relayout(self.layout.transpose(a, b))
    }

    /// Reorders axes: axis `i` of the result is axis `order[i]` of this view.
    pub fn permute(&self, order: &[usize]) -> Result<Self> {
        self.relayout(self.layout.permute(order))
    }

    /// Restricts `axis` to `start..end` stepping by `step`.
    pub fn slice(&self, axis: isize, start: usize, end: usize, step: usize) -> Result<Self> {
        self.relayout(self.layout.slice(axis, start, end, step))
    }

    /// Broadcasts to `shape` without copying.
    pub fn broadcast_to(&self, shape: &Shape) -> Result<Self> {
        self.relayout(self.layout.broadcast_to(shape))
    }

    /// Reshapes a contiguous view.
    pub fn reshape(&self, dims: &[usize]) -> Result<Self> {
        self.relayout(self.layout.reshape(dims))
    }

    /// Inserts a size-1 axis.
    pub fn unsqueeze(&self, axis: usize) -> Result<Self> {
        self.relayout(self.layout.unsqueeze(axis))
    }

    /// Start offsets of each last-axis row (see [`RowWalker`]).
    pub fn rows(&self) -> RowWalker {
        self.layout.rows()
    }
}

impl<'a, T: Element> TensorView<'a, T> {
    /// A dense view of little-endian bytes as `T`; the bytes must be aligned for `T`
    /// and hold exactly `shape.numel()` elements.
    pub fn from_bytes(bytes: &'a [u8], shape: Shape) -> Result<Self> {
        let data = cast_bytes::<T>(bytes)?;
        let expected = shape.numel_checked()?;
        if data.len() != expected {
            return Err(Error::LengthMismatch {
                expected,
                got: data.len(),
            });
        }
        Self::new(data, shape)
    }
}

impl<'a, T: Copy> TensorViewMut<'a, T> {
    /// A dense row-major mutable view of the first `shape.numel()` elements of `data`.
    pub fn new(data: &'a mut [T], shape: Shape) -> Result<Self> {
        Self::with_layout(data, Layout::contiguous(shape))
    }

    /// A mutable view with explicit layout. Overlapping layouts (stride 0 on an axis
    /// longer than 1) are rejected since writes would alias.
    pub fn with_layout(data: &'a mut [T], layout: Layout) -> Result<Self> {
        layout.check_fits(data.len())?;
        // A view with no elements cannot alias (and a dense layout with a zero-size
        // axis legitimately has stride 0 on the axes before it).
        let aliases = layout.shape.numel() > 0
            && layout
                .shape
                .dims()
                .iter()
                .zip(layout.strides.steps())
                .any(|(&d, &s)| d > 1 && s == 0);
        if aliases {
            return Err(Error::InvalidArgument("a mutable view cannot broadcast"));
        }
        Ok(TensorViewMut { data, layout })
    }

    /// The view's layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The view's shape.
    pub fn shape(&self) -> &Shape {
        &self.layout.shape
    }

    /// A read-only view of the same elements.
    pub fn as_view(&self) -> TensorView<'_, T> {
        TensorView {
            data: self.data,
            layout: self.layout,
        }
    }

    /// The viewed elements as one mutable slice, when the view is contiguous.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        if !self.layout.is_contiguous() {
            return Err(Error::NotContiguous);
        }
        let start = self.layout.offset;
        Ok(&mut self.data[start..start + self.layout.shape.numel()])
    }

    /// Writes `value` at `index`.
    pub fn set(&mut self, index: &[usize], value: T) -> Result<()> {
        let at = self.layout.offset_of(index)?;
        self.data[at] = value;
        Ok(())
    }

    /// Sets every viewed element to `value`.
    pub fn fill(&mut self, value: T) {
        for o in self.layout.offsets() {
            self.data[o] = value;
        }
    }

    /// Writes `values` to the viewed elements in row-major order; the iterator must
    /// yield exactly `numel` values.
    pub fn assign(&mut self, values: impl IntoIterator<Item = T>) -> Result<()> {
        let mut offsets = self.layout.offsets();
        let expected = offsets.len();
        let mut written = 0usize;
        for v in values {
            let Some(o) = offsets.next() else {
                return Err(Error::LengthMismatch {
                    expected,
                    got: written + 1,
                });
            };
            self.data[o] = v;
            written += 1;
        }
        if written != expected {
            return Err(Error::LengthMismatch {
                expected,
                got: written,
            });
        }
        Ok(())
    }

    /// Mutable element access by slice offset (as produced by [`Layout::offsets`]).
    pub fn data_mut(&mut self) -> &mut [T] {
        self.data
    }

    /// Applies a layout change, reborrowing the same data.
    fn relayout(self, layout: Result<Layout>) -> Result<Self> {
        Ok(TensorViewMut {
            data: self.data,
            layout: layout?,
        })
    }

    /// Swaps two axes.
    pub fn transpose(self, a: isize, b: isize) -> Result<Self> {
        let layout = self.layout.transpose(a, b);
        self.relayout(layout)
    }

    /// Restricts `axis` to `start..end` stepping by `step`.
    pub fn slice(self, axis: isize, start: usize, end: usize, step: usize) -> Result<Self> {
        let layout = self.layout.slice(axis, start, end, step);
        self.relayout(layout)
    }

    /// Reshapes a contiguous view.
    pub fn reshape(self, dims: &[usize]) -> Result<Self> {
        let layout = self.layout.reshape(dims);
        self.relayout(layout)
    }
}

impl<'a, T: Element> TensorViewMut<'a, T> {
    /// A dense mutable view of bytes as `T` (aligned, exactly `shape.numel()` elements).
    pub fn from_bytes(bytes: &'a mut [u8], shape: Shape) -> Result<Self> {
        let data = cast_bytes_mut::<T>(bytes)?;
        let expected = shape.numel_checked()?;
        if data.len() != expected {
            return Err(Error::LengthMismatch {
                expected,
                got: data.len(),
            });
        }
        Self::new(data, shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(d: &[usize]) -> Shape {
        Shape::new(d).unwrap()
    }

    #[test]
    fn transpose_reads_columns() {
        let data = [0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0];
        let v = TensorView::new(&data, s(&[2, 3]))
            .unwrap()
            .transpose(0, 1)
            .unwrap();
        let mut out = [0.0f32; 6];
        for (o, x) in out.iter_mut().zip(v.iter()) {
            *o = x;
        }
        assert_eq!(out, [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        assert!(!v.layout().is_contiguous());
        assert_eq!(v.reshape(&[6]).unwrap_err(), Error::NotContiguous);
    }

    #[test]
    fn slice_with_step_and_broadcast() {
        let data: [i32; 10] = core::array::from_fn(|i| i as i32);
        let v = TensorView::new(&data, s(&[10]))
            .unwrap()
            .slice(0, 1, 8, 3)
            .unwrap();
        assert_eq!(v.shape(), &s(&[3]));
        assert_eq!(
            [
                v.get(&[0]).unwrap(),
                v.get(&[1]).unwrap(),
                v.get(&[2]).unwrap()
            ],
            [1, 4, 7]
        );
        let b = v.unsqueeze(0).unwrap().broadcast_to(&s(&[2, 3])).unwrap();
        assert_eq!(b.get(&[1, 2]), Ok(7));
    }

    #[test]
    fn short_buffers_and_bad_bytes_are_errors() {
        let data = [0u8; 5];
        assert_eq!(
            TensorView::new(&data[..], s(&[2, 3])).unwrap_err(),
            Error::BufferTooSmall { needed: 6, got: 5 }
        );
        let words = [0u32; 4];
        let bytes: &[u8] = bytemuck::cast_slice(&words);
        assert_eq!(
            TensorView::<f32>::from_bytes(&bytes[1..9], s(&[2])).unwrap_err(),
            Error::Misaligned { align: 4 }
        );
        assert!(matches!(
            TensorView::<f32>::from_bytes(&bytes[..7], s(&[1])).unwrap_err(),
            Error::LengthMismatch { .. }
        ));
        assert_eq!(
            TensorView::<f32>::from_bytes(&bytes[..8], s(&[3])).unwrap_err(),
            Error::LengthMismatch {
                expected: 3,
                got: 2
            }
        );
    }

    #[test]
    fn row_walker_visits_each_row_start() {
        let data: [f32; 12] = core::array::from_fn(|i| i as f32);
        let v = TensorView::new(&data, s(&[3, 4]))
            .unwrap()
            .transpose(0, 1)
            .unwrap();
        let rows = v.rows();
        assert_eq!((rows.row_len(), rows.row_stride()), (3, 4));
        let mut starts = [0usize; 4];
        for (slot, start) in starts.iter_mut().zip(rows) {
            *slot = start;
        }
        assert_eq!(starts, [0, 1, 2, 3]);
        let empty = TensorView::new(&data, s(&[3, 0])).unwrap();
        assert_eq!(empty.rows().count(), 0);
    }

    #[test]
    fn mutable_views_write_through_strides() {
        let mut data = [0i32; 6];
        let mut v = TensorViewMut::new(&mut data, s(&[2, 3]))
            .unwrap()
            .transpose(0, 1)
            .unwrap();
        v.assign([1, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(data, [1, 3, 5, 2, 4, 6]);
        let layout = Layout::contiguous(s(&[1, 3]))
            .broadcast_to(&s(&[2, 3]))
            .unwrap();
        assert!(TensorViewMut::with_layout(&mut data, layout).is_err());
    }

    #[test]
    fn zero_size_mutable_views_are_allowed() {
        // The dense strides of [2, 0] are [0, 1]: stride 0 on a size-2 axis, but
        // there is nothing to alias.
        let mut empty: [f32; 0] = [];
        let v = TensorViewMut::new(&mut empty, s(&[2, 0])).unwrap();
        assert_eq!(v.layout().offsets().count(), 0);
    }
}
