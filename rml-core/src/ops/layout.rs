//! Materializing layout ops, for any element type: [`copy`] (a strided view made
//! dense, which is how a transpose or permute is materialized), [`concat()`],
//! [`split`], [`slice()`] with NumPy semantics (negative bounds and steps), [`gather`]
//! along an axis (an embedding lookup is a gather on axis 0) and [`pad`] with
//! constant, reflect, edge and wrap modes.
//!
//! Views ([`TensorView::transpose`], [`TensorView::slice`], …) change layout without
//! copying; these ops write the result into a caller-supplied output view, which may
//! itself be strided. Each checks every shape, axis and index before writing, so a
//! failed call leaves the output untouched.

use crate::error::{Error, Result};
use crate::shape::{MAX_RANK, Shape, normalize_axis};
use crate::view::{TensorView, TensorViewMut};

/// Copies `input` into `output` element by element in row-major logical order. The
/// shapes must be equal; strides may differ, so copying a transposed or permuted view
/// into a dense output materializes the transpose (broadcast the input view first
/// to materialize a broadcast).
pub fn copy<T: Copy>(input: &TensorView<'_, T>, output: &mut TensorViewMut<'_, T>) -> Result<()> {
    if input.shape() != output.shape() {
        return Err(Error::ShapeMismatch { op: "copy" });
    }
    output.assign(input.iter())
}

/// The shape of concatenating tensors of shapes `inputs` along `axis`: the first
/// shape with `axis` resized to the sum of the inputs' sizes there. Every input must
/// have the same rank and the same sizes on every other axis.
pub fn concat_output_shape(inputs: &[Shape], axis: isize) -> Result<Shape> {
    let first = inputs
        .first()
        .ok_or(Error::InvalidArgument("concat needs at least one input"))?;
    let axis = normalize_axis(axis, first.rank())?;
    let total = inputs
        .iter()
        .filter(|s| s.rank() == first.rank())
        .try_fold(0usize, |acc, s| acc.checked_add(s.dim(axis)))
        .ok_or(Error::Overflow)?;
    let out = first.with_dim(axis, total)?;
    check_parts(inputs.iter().copied(), &out, axis, "concat")?;
    Ok(out)
}

/// Concatenates `inputs` along `axis` (negative counts from the end) into `output`.
/// Every input must have the output's rank and its sizes on every other axis; the
/// inputs' sizes along `axis` must add up to the output's.
pub fn concat<T: Copy>(
    inputs: &[TensorView<'_, T>],
    axis: isize,
    output: &mut TensorViewMut<'_, T>,
) -> Result<()> {
    if inputs.is_empty() {
        return Err(Error::InvalidArgument("concat needs at least one input"));
    }
    let axis = normalize_axis(axis, output.shape().rank())?;
    check_parts(
        inputs.iter().map(|v| *v.shape()),
        output.shape(),
        axis,
        "concat",
    )?;
    let mut start = 0;
    for input in inputs {
        let end = start + input.shape().dim(axis);
        let part = output.layout().slice(axis as isize, start, end, 1)?;
        TensorViewMut::with_layout(output.data_mut(), part)?.assign(input.iter())?;
        start = end;
    }
    Ok(())
}

/// Splits `input` along `axis` into `outputs`, in order: output `k` receives the
/// next `outputs[k].shape()[axis]` entries. Every output must have the input's rank
/// and its sizes on every other axis; their sizes along `axis` must add up to the
/// input's.
pub fn split<T: Copy>(
    input: &TensorView<'_, T>,
    axis: isize,
    outputs: &mut [TensorViewMut<'_, T>],
) -> Result<()> {
    let axis = normalize_axis(axis, input.shape().rank())?;
    check_parts(
        outputs.iter().map(|v| *v.shape()),
        input.shape(),
        axis,
        "split",
    )?;
    let mut start = 0;
    for output in outputs.iter_mut() {
        let end = start + output.shape().dim(axis);
        copy(&input.slice(axis as isize, start, end, 1)?, output)?;
        start = end;
    }
    Ok(())
}

/// Checks that `parts` tile `whole` along `axis`: same rank, same sizes off `axis`,
/// sizes along `axis` adding up to `whole`'s.
fn check_parts(
    parts: impl Iterator<Item = Shape>,
    whole: &Shape,
    axis: usize,
    op: &'static str,
) -> Result<()> {
    let mut total = 0usize;
    for part in parts {
        let same_elsewhere = part.rank() == whole.rank()
            && (0..whole.rank()).all(|a| a == axis || part.dim(a) == whole.dim(a));
        if !same_elsewhere {
            return Err(Error::ShapeMismatch { op });
        }
        total = total.checked_add(part.dim(axis)).ok_or(Error::Overflow)?;
    }
    if total != whole.dim(axis) {
        return Err(Error::ShapeMismatch { op });
    }
    Ok(())
}

/// A NumPy slice `start:end:step` of one axis, resolved against the axis length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResolvedSlice {
    /// Index of the first element taken.
    pub first: usize,
    /// Number of elements taken.
    pub len: usize,
    /// Signed distance between taken elements.
    pub step: i64,
}

/// Resolves `start:end:step` over an axis of `len` elements exactly as NumPy (and
/// ONNX `Slice`) do: negative bounds count from the end, bounds past either end are
/// clamped, and a negative step walks backwards (so `i64::MAX:i64::MIN:-1` reverses
/// the axis). A zero step is an error.
pub fn resolve_slice(len: usize, start: i64, end: i64, step: i64) -> Result<ResolvedSlice> {
    if step == 0 {
        return Err(Error::InvalidArgument("slice step must not be zero"));
    }
    let n = i64::try_from(len).map_err(|_| Error::Overflow)?;
    // Bounds are clamped to 0..=n walking forwards and to -1..=n-1 walking backwards
    // (-1 meaning "before the first element").
    let (low, high) = if step > 0 { (0, n) } else { (-1, n - 1) };
    let clamp = |bound: i64| {
        let from_front = if bound < 0 {
            bound.saturating_add(n)
        } else {
            bound
        };
        from_front.clamp(low, high)
    };
    let (start, end) = (clamp(start), clamp(end));
    let count = if step > 0 && end > start {
        (end - start - 1) / step + 1
    } else if step < 0 && start > end {
        (start - end - 1) / step.saturating_neg() + 1
    } else {
        0
    };
    Ok(ResolvedSlice {
        first: if count > 0 { start as usize } else { 0 },
        len: count as usize,
        step,
    })
}

/// Copies the NumPy slice `start:end:step` of `input` along `axis` into `output`
/// (see [`resolve_slice`]); unlike [`TensorView::slice`] it accepts negative bounds
/// and steps. `output` must have `input`'s shape with `axis` resized to the slice
/// length.
pub fn slice<T: Copy>(
    input: &TensorView<'_, T>,
    axis: isize,
    start: i64,
    end: i64,
    step: i64,
    output: &mut TensorViewMut<'_, T>,
) -> Result<()> {
    let axis = normalize_axis(axis, input.shape().rank())?;
    let taken = resolve_slice(input.shape().dim(axis), start, end, step)?;
    if *output.shape() != input.shape().with_dim(axis, taken.len)? {
        return Err(Error::ShapeMismatch { op: "slice output" });
    }
    let out_shape = *output.shape();
    for_each_index(&out_shape, |out_index| {
        let mut src = [0usize; MAX_RANK];
        let src = &mut src[..out_index.len()];
        src.copy_from_slice(out_index);
        // first + i * step stays inside the axis by construction of `resolve_slice`.
        let offset = out_index[axis] as i64 * taken.step;
        src[axis] = (taken.first as i64 + offset) as usize;
        output.set(out_index, input.get(src)?)
    })
}

/// Integer types usable as gather indices.
pub trait IndexElement: Copy {
    /// The index as an `i64` (exact for every implementing type).
    fn to_i64(self) -> i64;
}

impl IndexElement for i64 {
    fn to_i64(self) -> i64 {
        self
    }
}

impl IndexElement for i32 {
    fn to_i64(self) -> i64 {
        i64::from(self)
    }
}

/// Resolves a NumPy-style index into an axis of `len` elements: `-1` is the last
/// element; anything outside `-len..len` is [`Error::IndexOutOfRange`].
pub fn resolve_index(index: i64, len: usize) -> Result<usize> {
    let out_of_range = Error::IndexOutOfRange { index, len };
    let resolved = if index < 0 {
        let back = index.unsigned_abs();
        usize::try_from(back)
            .ok()
            .and_then(|b| len.checked_sub(b))
            .ok_or(out_of_range)?
    } else {
        usize::try_from(index).map_err(|_| out_of_range)?
    };
    if resolved >= len {
        return Err(out_of_range);
    }
    Ok(resolved)
}

/// The shape of [`gather`]ing `indices` along `axis` of `input`: `input`'s shape with
/// axis `axis` replaced by all of `indices`' axes (NumPy `take`, ONNX `Gather`).
pub fn gather_output_shape(input: &Shape, indices: &Shape, axis: isize) -> Result<Shape> {
    let axis = normalize_axis(axis, input.rank())?;
    let rank = input.rank() - 1 + indices.rank();
    if rank > MAX_RANK {
        return Err(Error::RankTooHigh {
            rank,
            max: MAX_RANK,
        });
    }
    let mut dims = [0usize; MAX_RANK];
    dims[..axis].copy_from_slice(&input.dims()[..axis]);
    dims[axis..axis + indices.rank()].copy_from_slice(indices.dims());
    dims[axis + indices.rank()..rank].copy_from_slice(&input.dims()[axis + 1..]);
    Shape::new(&dims[..rank])
}

/// Gathers entries of `input` along `axis` at `indices` (`i64` or `i32`, negative
/// counting from the end): `output[o.., i.., r..] = input[o.., indices[i..], r..]`.
/// An embedding lookup is `gather(table [V, D], token_ids [B, S], 0)` → `[B, S, D]`.
/// Every index is checked before anything is written; one outside `-len..len` is
/// [`Error::IndexOutOfRange`].
pub fn gather<T: Copy, I: IndexElement>(
    input: &TensorView<'_, T>,
    indices: &TensorView<'_, I>,
    axis: isize,
    output: &mut TensorViewMut<'_, T>,
) -> Result<()> {
    let out_shape = gather_output_shape(input.shape(), indices.shape(), axis)?;
    if *output.shape() != out_shape {
        return Err(Error::ShapeMismatch {
            op: "gather output",
        });
    }
    let axis = normalize_axis(axis, input.shape().rank())?;
    let len = input.shape().dim(axis);
    for index in indices.iter() {
        resolve_index(index.to_i64(), len)?;
    }
    let index_rank = indices.shape().rank();
    for_each_index(&out_shape, |out_index| {
        // The output index is [outer.., index position.., inner..]; the source index
        // is [outer.., indices[index position], inner..].
        let position = &out_index[axis..axis + index_rank];
        let mut src = [0usize; MAX_RANK];
        src[..axis].copy_from_slice(&out_index[..axis]);
        src[axis] = resolve_index(indices.get(position)?.to_i64(), len)?;
        let inner = &out_index[axis + index_rank..];
        src[axis + 1..axis + 1 + inner.len()].copy_from_slice(inner);
        let value = input.get(&src[..input.shape().rank()])?;
        output.set(out_index, value)
    })
}

/// How [`pad`] fills the new elements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode<T> {
    /// Every new element is this value.
    Constant(T),
    /// Mirror the axis without repeating its edge element: `[1, 2, 3]` padded by 2
    /// on each side is `[3, 2, 1, 2, 3, 2, 1]`. Padding must be smaller than the axis.
    Reflect,
    /// Repeat the edge element: `[1, 2, 3]` → `[1, 1, 1, 2, 3, 3, 3]`.
    Edge,
    /// Continue periodically (PyTorch's `circular`): `[1, 2, 3]` →
    /// `[2, 3, 1, 2, 3, 1, 2]`. Padding must not exceed the axis.
    Wrap,
}

/// The shape of padding `input` by `pads[axis] = [before, after]` on every axis.
pub fn pad_output_shape(input: &Shape, pads: &[[usize; 2]]) -> Result<Shape> {
    if pads.len() != input.rank() {
        return Err(Error::InvalidArgument(
            "pad needs one [before, after] pair per axis",
        ));
    }
    let mut dims = [0usize; MAX_RANK];
    for (axis, [before, after]) in pads.iter().enumerate() {
        dims[axis] = input
            .dim(axis)
            .checked_add(*before)
            .and_then(|d| d.checked_add(*after))
            .ok_or(Error::Overflow)?;
    }
    Shape::new(&dims[..input.rank()])
}

/// Pads `input` by `pads[axis] = [before, after]` elements on each axis, filling as
/// `mode` says, into `output` (shape from [`pad_output_shape`]). Reflect padding must
/// be smaller than the axis; wrap padding no larger than it; edge padding needs a
/// non-empty axis.
pub fn pad<T: Copy>(
    input: &TensorView<'_, T>,
    pads: &[[usize; 2]],
    mode: PadMode<T>,
    output: &mut TensorViewMut<'_, T>,
) -> Result<()> {
    let out_shape = pad_output_shape(input.shape(), pads)?;
    if *output.shape() != out_shape {
        return Err(Error::ShapeMismatch { op: "pad output" });
    }
    for (axis, &[before, after]) in pads.iter().enumerate() {
        let len = input.shape().dim(axis);
        let widest = before.max(after);
        if widest == 0 {
            continue;
        }
        match mode {
            PadMode::Constant(_) => {}
            PadMode::Reflect if widest >= len => {
                return Err(Error::InvalidArgument(
                    "reflect padding must be smaller than the padded axis",
                ));
            }
            PadMode::Edge if len == 0 => {
                return Err(Error::InvalidArgument("edge padding of an empty axis"));
            }
            PadMode::Wrap if widest > len => {
                return Err(Error::InvalidArgument(
                    "wrap padding must not exceed the padded axis",
                ));
            }
            _ => {}
        }
    }
    let rank = out_shape.rank();
    for_each_index(&out_shape, |out_index| {
        let mut src = [0usize; MAX_RANK];
        let mut in_padding = false;
        for axis in 0..rank {
            let len = input.shape().dim(axis);
            match pad_source(out_index[axis], pads[axis][0], len, &mode) {
                Some(i) => src[axis] = i,
                None => in_padding = true,
            }
        }
        let value = match mode {
            PadMode::Constant(fill) if in_padding => fill,
            _ => input.get(&src[..rank])?,
        };
        output.set(out_index, value)
    })
}

/// The input index that output index `out` of an axis padded by `before` copies
/// (for an input axis of `len`), or `None` when it is constant padding. The caller
/// has checked that reflect, edge and wrap padding stay in range.
fn pad_source<T>(out: usize, before: usize, len: usize, mode: &PadMode<T>) -> Option<usize> {
    // Position relative to the first input element; negative in the front padding.
    let pos = out as i64 - before as i64;
    let n = len as i64;
    if (0..n).contains(&pos) {
        return Some(pos as usize);
    }
    let mapped = match mode {
        PadMode::Constant(_) => return None,
        PadMode::Reflect if pos < 0 => -pos,
        PadMode::Reflect => 2 * (n - 1) - pos,
        PadMode::Edge => pos.clamp(0, n - 1),
        PadMode::Wrap => pos.rem_euclid(n),
    };
    Some(mapped as usize)
}

/// Calls `visit` with every index of `shape` in row-major order (once, with an empty
/// index, for a rank-0 shape; never for a shape with a zero axis), stopping at the
/// first error.
fn for_each_index(shape: &Shape, mut visit: impl FnMut(&[usize]) -> Result<()>) -> Result<()> {
    let dims = shape.dims();
    let mut index = [0usize; MAX_RANK];
    for _ in 0..shape.numel_checked()? {
        visit(&index[..dims.len()])?;
        // Advance like an odometer: bump the last axis, carrying into earlier ones.
        for axis in (0..dims.len()).rev() {
            index[axis] += 1;
            if index[axis] < dims[axis] {
                break;
            }
            index[axis] = 0;
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
    fn copy_materializes_a_transpose() {
        let x = [1, 2, 3, 4, 5, 6];
        let xt = TensorView::new(&x, s(&[2, 3]))
            .unwrap()
            .transpose(0, 1)
            .unwrap();
        let mut out = [0; 6];
        copy(&xt, &mut TensorViewMut::new(&mut out, s(&[3, 2])).unwrap()).unwrap();
        assert_eq!(out, [1, 4, 2, 5, 3, 6]);
        assert_eq!(
            copy(&xt, &mut TensorViewMut::new(&mut out, s(&[2, 3])).unwrap()),
            Err(Error::ShapeMismatch { op: "copy" })
        );
    }

    #[test]
    fn concat_and_split_round_trip_by_hand() {
        let a = [1, 2];
        let b = [3, 4, 5, 6];
        let av = TensorView::new(&a, s(&[2, 1])).unwrap();
        let bv = TensorView::new(&b, s(&[2, 2])).unwrap();
        let mut out = [0; 6];
        let mut ov = TensorViewMut::new(&mut out, s(&[2, 3])).unwrap();
        concat(&[av, bv], -1, &mut ov).unwrap();
        assert_eq!(out, [1, 3, 4, 2, 5, 6]);

        let whole = TensorView::new(&out, s(&[2, 3])).unwrap();
        let (mut left, mut right) = ([0; 2], [0; 4]);
        let mut parts = [
            TensorViewMut::new(&mut left, s(&[2, 1])).unwrap(),
            TensorViewMut::new(&mut right, s(&[2, 2])).unwrap(),
        ];
        split(&whole, 1, &mut parts).unwrap();
        assert_eq!((left, right), (a, b));
    }

    #[test]
    fn concat_and_split_errors() {
        let a = [0; 6];
        let av = TensorView::new(&a, s(&[2, 3])).unwrap();
        let mut out = [0; 12];
        let mut ov = TensorViewMut::new(&mut out, s(&[4, 3])).unwrap();
        assert!(matches!(
            concat::<i32>(&[], 0, &mut ov),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(
            concat(&[av], 0, &mut ov),
            Err(Error::ShapeMismatch { op: "concat" })
        );
        assert_eq!(
            concat(&[av, av], 2, &mut ov),
            Err(Error::AxisOutOfRange { axis: 2, rank: 2 })
        );
        let mut wide = TensorViewMut::new(&mut out, s(&[4, 2])).unwrap();
        assert_eq!(
            concat(&[av, av], 0, &mut wide),
            Err(Error::ShapeMismatch { op: "concat" })
        );
        let flat = TensorView::new(&a, s(&[6])).unwrap();
        let mut ov = TensorViewMut::new(&mut out, s(&[4, 3])).unwrap();
        assert_eq!(
            concat(&[av, flat], 0, &mut ov),
            Err(Error::ShapeMismatch { op: "concat" })
        );
        assert_eq!(concat(&[av, av], 0, &mut ov), Ok(()));
        let mut one = [0; 3];
        let mut parts = [TensorViewMut::new(&mut one, s(&[1, 3])).unwrap()];
        assert_eq!(
            split(&av, 0, &mut parts),
            Err(Error::ShapeMismatch { op: "split" })
        );
        assert!(split(&av, -3, &mut parts).is_err());
        assert_eq!(
            concat_output_shape(&[s(&[2, 3]), s(&[2, 1]), s(&[2, 4])], -1),
            Ok(s(&[2, 8]))
        );
        assert!(concat_output_shape(&[], 0).is_err());
        assert_eq!(
            concat_output_shape(&[s(&[2, 3]), s(&[3, 3])], 1),
            Err(Error::ShapeMismatch { op: "concat" })
        );
        assert_eq!(
            concat_output_shape(&[s(&[2, 3]), s(&[2, 3, 1])], 1),
            Err(Error::ShapeMismatch { op: "concat" })
        );
        assert!(concat_output_shape(&[s(&[2, 3])], 2).is_err());
        assert_eq!(
            concat_output_shape(&[s(&[usize::MAX]), s(&[1])], 0),
            Err(Error::Overflow)
        );
    }

    #[test]
    fn resolve_slice_follows_numpy() {
        let r = |start, end, step| {
            let x = resolve_slice(5, start, end, step).unwrap();
            (x.first, x.len)
        };
        assert_eq!(r(1, 4, 1), (1, 3)); // [1, 2, 3]
        assert_eq!(r(-2, i64::MAX, 1), (3, 2)); // [3, 4]
        assert_eq!(r(0, 5, 2), (0, 3)); // [0, 2, 4]
        assert_eq!(r(i64::MAX, i64::MIN, -1), (4, 5)); // reversed
        assert_eq!(r(-1, -4, -2), (4, 2)); // [4, 2]
        assert_eq!(r(3, 1, 1), (0, 0)); // empty
        assert_eq!(r(-100, 100, 1), (0, 5)); // clamped
        assert_eq!(r(1, 3, -1), (0, 0)); // empty backwards
        assert_eq!(
            resolve_slice(5, 0, 5, 0),
            Err(Error::InvalidArgument("slice step must not be zero"))
        );
        assert_eq!(resolve_slice(usize::MAX, 0, 1, 1), Err(Error::Overflow));
    }

    #[test]
    fn slice_reverses_a_middle_axis() {
        let x: [i32; 12] = core::array::from_fn(|i| i as i32);
        let xv = TensorView::new(&x, s(&[2, 3, 2])).unwrap();
        let mut out = [0; 8];
        let mut ov = TensorViewMut::new(&mut out, s(&[2, 2, 2])).unwrap();
        slice(&xv, 1, -1, i64::MIN, -2, &mut ov).unwrap();
        assert_eq!(out, [4, 5, 0, 1, 10, 11, 6, 7]);
        let mut wrong = TensorViewMut::new(&mut out, s(&[2, 1, 2])).unwrap();
        assert_eq!(
            slice(&xv, 1, -1, i64::MIN, -2, &mut wrong),
            Err(Error::ShapeMismatch { op: "slice output" })
        );
        assert!(slice(&xv, 1, 0, 3, 0, &mut wrong).is_err());
        assert!(slice(&xv, 3, 0, 3, 1, &mut wrong).is_err());
    }

    #[test]
    fn resolve_index_is_numpy_style() {
        assert_eq!(resolve_index(0, 3), Ok(0));
        assert_eq!(resolve_index(-1, 3), Ok(2));
        assert_eq!(resolve_index(-3, 3), Ok(0));
        assert_eq!(
            resolve_index(-4, 3),
            Err(Error::IndexOutOfRange { index: -4, len: 3 })
        );
        assert_eq!(
            resolve_index(3, 3),
            Err(Error::IndexOutOfRange { index: 3, len: 3 })
        );
        assert!(resolve_index(i64::MIN, 3).is_err());
        assert!(resolve_index(i64::MAX, 3).is_err());
        assert!(resolve_index(0, 0).is_err());
    }

    #[test]
    fn embedding_lookup_is_gather_on_axis_0() {
        let table = [0.0f32, 0.5, 1.0, 1.5, 2.0, 2.5]; // 3 tokens x 2 dims
        let tv = TensorView::new(&table, s(&[3, 2])).unwrap();
        let ids = [2i32, -3, 1];
        let iv = TensorView::new(&ids, s(&[1, 3])).unwrap();
        let shape = gather_output_shape(tv.shape(), iv.shape(), 0).unwrap();
        assert_eq!(shape, s(&[1, 3, 2]));
        let mut out = [0.0f32; 6];
        gather(
            &tv,
            &iv,
            0,
            &mut TensorViewMut::new(&mut out, shape).unwrap(),
        )
        .unwrap();
        assert_eq!(out, [2.0, 2.5, 0.0, 0.5, 1.0, 1.5]);
    }

    #[test]
    fn gather_errors_leave_output_untouched() {
        let x = [1i64, 2, 3, 4];
        let xv = TensorView::new(&x, s(&[2, 2])).unwrap();
        let idx = [0i64, 2];
        let iv = TensorView::new(&idx, s(&[2])).unwrap();
        let mut out = [9i64; 4];
        let mut ov = TensorViewMut::new(&mut out, s(&[2, 2])).unwrap();
        assert_eq!(
            gather(&xv, &iv, 1, &mut ov),
            Err(Error::IndexOutOfRange { index: 2, len: 2 })
        );
        assert_eq!(out, [9; 4]);
        let mut ov = TensorViewMut::new(&mut out, s(&[4])).unwrap();
        assert_eq!(
            gather(&xv, &iv, 1, &mut ov),
            Err(Error::ShapeMismatch {
                op: "gather output"
            })
        );
        assert!(gather(&xv, &iv, 2, &mut ov).is_err());
        assert_eq!(
            gather_output_shape(&s(&[1; 5]), &s(&[1; 5]), 0),
            Err(Error::RankTooHigh { rank: 9, max: 8 })
        );
        // A rank-0 index removes the axis.
        assert_eq!(gather_output_shape(&s(&[4, 5]), &s(&[]), 1), Ok(s(&[4])));
    }

    #[test]
    fn pad_modes_by_hand() {
        let x = [1, 2, 3];
        let xv = TensorView::new(&x, s(&[3])).unwrap();
        let mut out = [0; 7];
        let cases = [
            (PadMode::Constant(0), [0, 0, 1, 2, 3, 0, 0]),
            (PadMode::Reflect, [3, 2, 1, 2, 3, 2, 1]),
            (PadMode::Edge, [1, 1, 1, 2, 3, 3, 3]),
            (PadMode::Wrap, [2, 3, 1, 2, 3, 1, 2]),
        ];
        for (mode, expected) in cases {
            let mut ov = TensorViewMut::new(&mut out, s(&[7])).unwrap();
            pad(&xv, &[[2, 2]], mode, &mut ov).unwrap();
            assert_eq!(out, expected, "{mode:?}");
        }
    }

    #[test]
    fn pad_errors() {
        let x = [1, 2, 3];
        let xv = TensorView::new(&x, s(&[3])).unwrap();
        let mut out = [0; 9];
        let mut ov = TensorViewMut::new(&mut out, s(&[6])).unwrap();
        assert_eq!(
            pad(&xv, &[[3, 0]], PadMode::Reflect, &mut ov),
            Err(Error::InvalidArgument(
                "reflect padding must be smaller than the padded axis"
            ))
        );
        assert_eq!(pad(&xv, &[[3, 0]], PadMode::Wrap, &mut ov), Ok(()));
        let mut ov = TensorViewMut::new(&mut out, s(&[7])).unwrap();
        assert!(pad(&xv, &[[4, 0]], PadMode::Wrap, &mut ov).is_err());
        assert!(pad(&xv, &[[2, 2], [0, 0]], PadMode::Edge, &mut ov).is_err());
        assert_eq!(
            pad(&xv, &[[1, 1]], PadMode::Edge, &mut ov),
            Err(Error::ShapeMismatch { op: "pad output" })
        );
        let empty = TensorView::new(&x, s(&[0])).unwrap();
        let mut ov = TensorViewMut::new(&mut out, s(&[2])).unwrap();
        assert!(pad(&empty, &[[1, 1]], PadMode::Edge, &mut ov).is_err());
        assert_eq!(
            pad(&empty, &[[1, 1]], PadMode::Constant(7), &mut ov),
            Ok(())
        );
        assert_eq!(&out[..2], &[7, 7]);
        assert_eq!(
            pad_output_shape(&s(&[2]), &[[usize::MAX, 0]]),
            Err(Error::Overflow)
        );
    }
}
