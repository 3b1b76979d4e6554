//! Data-movement ops on any held dtype (`F32`, `I64`, `BOOL`): reshapes, transposes,
//! broadcasts, concat/split/slice/gather/pad, `where`, comparisons, nearest
//! upsampling and `cast`, each on rml-core's generic reference ops.

use rml_core::ops::cast::{CastElement, cast as core_cast, cast_to_bool};
use rml_core::ops::compare::{CompareOp, compare, where_};
use rml_core::ops::layout::{PadMode, concat, copy, gather, pad, resolve_slice, slice, split};
use rml_core::ops::upsample::{upsample_nearest2d, upsample_nearest2d_scale};
use rml_core::{DType, Shape, TensorView, TensorViewMut};

use super::{In, R, core, output, req};
use crate::graph::buffer::{Buffer, BufferElement};
use crate::graph::op::{CompareFn, Op, PadKind, Resize};

/// True for the ops this module runs.
pub(super) fn handles(op: &Op) -> bool {
    matches!(
        op,
        Op::Reshape { .. }
            | Op::Flatten { .. }
            | Op::Squeeze { .. }
            | Op::Unsqueeze { .. }
            | Op::Identity
            | Op::Transpose { .. }
            | Op::Expand { .. }
            | Op::Concat { .. }
            | Op::Split { .. }
            | Op::Slice { .. }
            | Op::Gather { .. }
            | Op::Pad { .. }
            | Op::Where
            | Op::Compare(_)
            | Op::UpsampleNearest2d(_)
    )
}

/// Runs `op`, choosing the element type from its data input.
pub(super) fn run(op: &Op, args: &[Option<In<'_>>], outs: &[Shape]) -> R<Vec<Buffer>> {
    let data = req(args, usize::from(matches!(op, Op::Where)))?;
    match data.data {
        Buffer::F32(_) => typed::<f32>(op, args, outs),
        Buffer::I64(_) => typed::<i64>(op, args, outs),
        Buffer::Bool(_) => typed::<u8>(op, args, outs),
    }
}

/// Runs `op` with elements of type `T`.
fn typed<T: BufferElement>(op: &Op, args: &[Option<In<'_>>], outs: &[Shape]) -> R<Vec<Buffer>> {
    let x = req(args, 0)?;
    let out = &outs[0];
    let buffer = match op {
        Op::Reshape { .. }
        | Op::Flatten { .. }
        | Op::Squeeze { .. }
        | Op::Unsqueeze { .. }
        | Op::Identity => x.data.clone(),
        Op::Transpose { perm } => {
            let view = x.view::<T>()?.permute(perm).map_err(core)?;
            output::<T>(out, |o| copy(&view, o))?
        }
        Op::Expand { .. } => {
            let view = x.view::<T>()?.broadcast_to(out).map_err(core)?;
            output::<T>(out, |o| copy(&view, o))?
        }
        Op::Concat { axis } => {
            let views = args
                .iter()
                .flatten()
                .map(|a| a.view::<T>())
                .collect::<R<Vec<_>>>()?;
            output::<T>(out, |o| concat(&views, *axis, o))?
        }
        Op::Split { axis, .. } => return split_into(&x.view::<T>()?, *axis, outs),
        Op::Slice {
            starts,
            ends,
            axes,
            steps,
        } => {
            let mut current = (*x.shape, x.data.clone());
            for (i, &axis) in axes.iter().enumerate() {
                current = slice_axis::<T>(&current, axis, starts[i], ends[i], steps[i])?;
            }
            current.1
        }
        Op::Gather { axis } => {
            let indices = req(args, 1)?.view::<i64>()?;
            let view = x.view::<T>()?;
            output::<T>(out, |o| gather(&view, &indices, *axis, o))?
        }
        Op::Pad { pads, mode, value } => {
            let mode = match mode {
                PadKind::Constant => PadMode::Constant(T::from_f32(*value)),
                PadKind::Reflect => PadMode::Reflect,
                PadKind::Edge => PadMode::Edge,
                PadKind::Wrap => PadMode::Wrap,
            };
            let view = x.view::<T>()?;
            output::<T>(out, |o| pad(&view, pads, mode, o))?
        }
        Op::Where => {
            let cond = x.view::<u8>()?;
            let (a, b) = (req(args, 1)?.view::<T>()?, req(args, 2)?.view::<T>()?);
            output::<T>(out, |o| where_(&cond, &a, &b, o))?
        }
        Op::Compare(f) => {
            let (a, b) = (x.view::<T>()?, req(args, 1)?.view::<T>()?);
            output::<u8>(out, |o| compare(compare_op(*f), &a, &b, o))?
        }
        Op::UpsampleNearest2d(resize) => {
            let view = x.view::<T>()?;
            match resize {
                Resize::Scale(scale) => {
                    output::<T>(out, |o| upsample_nearest2d_scale(&view, *scale, o))?
                }
                Resize::Size(_) => output::<T>(out, |o| upsample_nearest2d(&view, o))?,
            }
        }
        other => return Err(format!("{other:?} is not a data-movement op")),
    };
    Ok(vec![buffer])
}

/// `split` into one fresh buffer per output shape.
fn split_into<T: BufferElement>(
    x: &TensorView<'_, T>,
    axis: isize,
    outs: &[Shape],
) -> R<Vec<Buffer>> {
    let mut parts: Vec<Vec<T>> = outs.iter().map(|s| vec![T::default(); s.numel()]).collect();
    let mut views = parts
        .iter_mut()
        .zip(outs)
        .map(|(data, shape)| TensorViewMut::new(data, *shape))
        .collect::<rml_core::Result<Vec<_>>>()
        .map_err(core)?;
    split(x, axis, &mut views).map_err(core)?;
    drop(views);
    Ok(parts.into_iter().map(T::wrap).collect())
}

/// One axis of a multi-axis `slice`.
fn slice_axis<T: BufferElement>(
    (shape, data): &(Shape, Buffer),
    axis: isize,
    start: i64,
    end: i64,
    step: i64,
) -> R<(Shape, Buffer)> {
    let a = shape.axis(axis).map_err(core)?;
    let len = resolve_slice(shape.dim(a), start, end, step)
        .map_err(core)?
        .len;
    let out = shape.with_dim(a, len).map_err(core)?;
    let input = In {
        name: "slice input",
        shape,
        data,
    };
    let view = input.view::<T>()?;
    let buffer = output::<T>(&out, |o| slice(&view, axis, start, end, step, o))?;
    Ok((out, buffer))
}

/// The rml-core comparison for a graph comparison.
pub(crate) fn compare_op(f: CompareFn) -> CompareOp {
    match f {
        CompareFn::Equal => CompareOp::Eq,
        CompareFn::NotEqual => CompareOp::Ne,
        CompareFn::Less => CompareOp::Lt,
        CompareFn::LessEqual => CompareOp::Le,
        CompareFn::Greater => CompareOp::Gt,
        CompareFn::GreaterEqual => CompareOp::Ge,
    }
}

/// `cast` between the held dtypes with rml-core's conversion rules.
pub(super) fn cast(x: In<'_>, to: DType, out: &Shape) -> R<Buffer> {
    match x.data {
        Buffer::F32(_) => cast_from(&x.view::<f32>()?, to, out),
        Buffer::I64(_) => cast_from(&x.view::<i64>()?, to, out),
        Buffer::Bool(_) => cast_from(&x.view::<u8>()?, to, out),
    }
}

/// `cast` from elements of type `S`.
fn cast_from<S: CastElement>(x: &TensorView<'_, S>, to: DType, out: &Shape) -> R<Buffer> {
    match to {
        DType::F32 => output::<f32>(out, |o| core_cast(x, o)),
        DType::I64 => output::<i64>(out, |o| core_cast(x, o)),
        DType::Bool => output::<u8>(out, |o| cast_to_bool(x, o)),
        other => Err(format!(
            "the reference interpreter does not hold {other} values"
        )),
    }
}
