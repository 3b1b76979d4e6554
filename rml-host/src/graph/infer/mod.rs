//! Dtype and shape inference for one node, over symbolic [`Dim`]s.
//!
//! The same code runs at load (dims may be symbols) and at bind time (every dim
//! fixed), so there is one set of rules. When the dims an op reads are all fixed,
//! window ops defer to rml-core's `*_output_shape` helpers and broadcasting to
//! [`rml_core::broadcast_shapes`]; the symbolic rules only decide which dims pass
//! through (a batch `N`), which multiply (`reshape`, `flatten`, `upsample`) and which
//! become [`Dim::Unknown`] until binding.

mod check;
mod dims;
mod layout;
mod linalg;
mod window;

use rml_core::DType;
use rml_core::ops::conv::{
    conv_transpose1d_output_shape, conv_transpose2d_output_shape, conv1d_output_shape,
    conv2d_output_shape,
};
use rml_core::ops::pool::{pool1d_output_shape, pool2d_output_shape};

use self::check::{
    axis_of, axis_set, expect_dims, float, numeric, rank_n, same_dtype, same_float, signed,
};
use self::dims::{agree, broadcast};
use self::layout::{concat, expand, keep_axes, pad, reduce_dims, reshape, slice_dim, split};
use self::linalg::{attention, matmul};
use self::window::{channels, conv, per_channel, windowed};
use super::dim::Dim;
use super::ir::TensorType;
use super::op::{Op, ReduceKind, Resize, UnaryFn};

/// One present input of a node: its value name and type.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Arg<'a> {
    /// The value's name.
    pub name: &'a str,
    /// Its dtype and shape.
    pub ty: &'a TensorType,
}

/// Inference failures are messages; the caller adds the node.
type R<T> = Result<T, String>;

impl std::fmt::Display for Arg<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "input {:?} ({})", self.name, self.ty)
    }
}

/// The output types of `op` applied to `args` (absent optional inputs are `None`)
/// with `n_outputs` outputs; `symbol` resolves a symbol named in an attribute.
pub(crate) fn infer(
    op: &Op,
    args: &[Option<Arg<'_>>],
    n_outputs: usize,
    symbol: &dyn Fn(&str) -> Option<Dim>,
) -> R<Vec<TensorType>> {
    let x = args[0].ok_or("input 0 is required")?;
    let opt = |i: usize| args.get(i).copied().flatten();
    let one = |shape: Vec<Dim>| Ok(vec![ty(x.ty.dtype, shape)]);
    match op {
        Op::MatMul {
            transpose_a,
            transpose_b,
        } => {
            let b = req(args, 1)?;
            same_float(&[x, b])?;
            one(matmul(x, b, *transpose_a, *transpose_b)?)
        }
        Op::Linear => {
            let w = req(args, 1)?;
            same_float(&[x, w])?;
            let k =
                x.ty.shape
                    .last()
                    .ok_or_else(|| format!("{x}: expected rank >= 1"))?;
            let [m, k_w] = rank_n::<2>(w)?;
            agree(k, &k_w, || {
                format!("{x} and weight {w}: inner sizes differ")
            })?;
            if let Some(b) = opt(2) {
                same_float(&[x, b])?;
                expect_dims(b, std::slice::from_ref(&m))?;
            }
            let mut out = x.ty.shape.clone();
            *out.last_mut().expect("rank checked") = m;
            one(out)
        }
        Op::Conv1d(p) => conv(args, |i, w| conv1d_output_shape(i, w, p)),
        Op::Conv2d(p) => conv(args, |i, w| conv2d_output_shape(i, w, p)),
        Op::ConvTranspose1d(p) => conv(args, |i, w| conv_transpose1d_output_shape(i, w, p)),
        Op::ConvTranspose2d(p) => conv(args, |i, w| conv_transpose2d_output_shape(i, w, p)),
        Op::Pool1d { params, .. } => {
            float(x)?;
            one(windowed(x, None, |i| pool1d_output_shape(i, params))?)
        }
        Op::Pool2d { params, .. } => {
            float(x)?;
            one(windowed(x, None, |i| pool2d_output_shape(i, params))?)
        }
        Op::GlobalPool2d { .. } => {
            float(x)?;
            let [n, c, _, _] = rank_n::<4>(x)?;
            one(vec![n, c, Dim::Fixed(1), Dim::Fixed(1)])
        }
        Op::UpsampleNearest2d(resize) => {
            let [n, c, h, w] = rank_n::<4>(x)?;
            one(match resize {
                Resize::Scale([sh, sw]) => {
                    vec![n, c, h.mul(&Dim::Fixed(*sh)), w.mul(&Dim::Fixed(*sw))]
                }
                Resize::Size([oh, ow]) => vec![n, c, Dim::Fixed(*oh), Dim::Fixed(*ow)],
            })
        }
        Op::LayerNorm { axis, .. } => {
            float(x)?;
            let from = axis_of(*axis, x.ty.shape.len(), "axis")?;
            for i in 1..args.len() {
                if let Some(p) = opt(i) {
                    same_float(&[x, p])?;
                    expect_dims(p, &x.ty.shape[from..])?;
                }
            }
            one(x.ty.shape.clone())
        }
        Op::RmsNorm { .. } => {
            float(x)?;
            let last =
                x.ty.shape
                    .last()
                    .ok_or_else(|| format!("{x}: expected rank >= 1"))?;
            if let Some(g) = opt(1) {
                same_float(&[x, g])?;
                expect_dims(g, std::slice::from_ref(last))?;
            }
            one(x.ty.shape.clone())
        }
        Op::GroupNorm { num_groups, .. } => {
            let c = channels(x)?;
            if let Some(c) = c.fixed().filter(|c| !c.is_multiple_of(*num_groups)) {
                return Err(format!(
                    "attribute \"num_groups\": {num_groups} does not divide the {c} channels of {x}"
                ));
            }
            per_channel(args, 1, &c)?;
            one(x.ty.shape.clone())
        }
        Op::BatchNorm { .. } => {
            let c = channels(x)?;
            per_channel(args, 1, &c)?;
            one(x.ty.shape.clone())
        }
        Op::Softmax { axis, .. } => {
            float(x)?;
            axis_of(*axis, x.ty.shape.len(), "axis")?;
            one(x.ty.shape.clone())
        }
        Op::Attention { .. } => attention(x, req(args, 1)?, req(args, 2)?, opt(3)),
        Op::Unary(f) => {
            if matches!(f, UnaryFn::Neg | UnaryFn::Abs) {
                signed(x)?;
            } else {
                float(x)?;
            }
            one(x.ty.shape.clone())
        }
        Op::Clip { .. } => {
            float(x)?;
            one(x.ty.shape.clone())
        }
        Op::Binary(_) => {
            let b = req(args, 1)?;
            same_dtype(&[x, b])?;
            numeric(x)?;
            one(broadcast(&[x, b])?)
        }
        Op::Compare(_) => {
            let b = req(args, 1)?;
            same_dtype(&[x, b])?;
            Ok(vec![ty(DType::Bool, broadcast(&[x, b])?)])
        }
        Op::Where => {
            let (a, b) = (req(args, 1)?, req(args, 2)?);
            if x.ty.dtype != DType::Bool {
                return Err(format!("{x}: the condition must be BOOL"));
            }
            same_dtype(&[a, b])?;
            Ok(vec![ty(a.ty.dtype, broadcast(&[x, a, b])?)])
        }
        Op::Cast { to } => Ok(vec![ty(*to, x.ty.shape.clone())]),
        Op::Reshape { shape } => one(reshape(x, shape, symbol)?),
        Op::Flatten { start, end } => {
            let rank = x.ty.shape.len();
            let (s, e) = (axis_of(*start, rank, "start")?, axis_of(*end, rank, "end")?);
            if s > e {
                return Err(format!(
                    "attribute \"start\": axis {s} comes after \"end\" axis {e}"
                ));
            }
            let dims = &x.ty.shape;
            let mut out = dims[..s].to_vec();
            out.push(Dim::product(&dims[s..=e]));
            out.extend_from_slice(&dims[e + 1..]);
            one(out)
        }
        Op::Squeeze { axes } => {
            let axes = axis_set(axes, x.ty.shape.len(), "axes")?;
            if let Some(&a) = axes.iter().find(|&&a| x.ty.shape[a] != Dim::Fixed(1)) {
                return Err(format!(
                    "attribute \"axes\": axis {a} of {x} has size {}, squeeze needs 1",
                    x.ty.shape[a]
                ));
            }
            one(keep_axes(&x.ty.shape, |a| !axes.contains(&a)))
        }
        Op::Unsqueeze { axes } => {
            let rank = x.ty.shape.len() + axes.len();
            let axes = axis_set(axes, rank, "axes")?;
            let mut rest = x.ty.shape.iter();
            let out = (0..rank)
                .map(|a| {
                    if axes.contains(&a) {
                        Dim::Fixed(1)
                    } else {
                        rest.next().expect("counted").clone()
                    }
                })
                .collect();
            one(out)
        }
        Op::Transpose { perm } => {
            let rank = x.ty.shape.len();
            let mut sorted = perm.clone();
            sorted.sort_unstable();
            if sorted != (0..rank).collect::<Vec<_>>() {
                return Err(format!(
                    "attribute \"perm\": {perm:?} is not a permutation of the {rank} axes of {x}"
                ));
            }
            one(perm.iter().map(|&p| x.ty.shape[p].clone()).collect())
        }
        Op::Expand { shape } => one(expand(x, shape, symbol)?),
        Op::Concat { axis } => concat(args, *axis),
        Op::Split { axis, sizes } => split(x, *axis, sizes.as_deref(), n_outputs),
        Op::Slice {
            starts,
            ends,
            axes,
            steps,
        } => {
            let rank = x.ty.shape.len();
            let axes = axis_set(axes, rank, "axes")?;
            let mut out = x.ty.shape.clone();
            for (i, &a) in axes.iter().enumerate() {
                out[a] = slice_dim(&out[a], starts[i], ends[i], steps[i])?;
            }
            one(out)
        }
        Op::Gather { axis } => {
            let idx = req(args, 1)?;
            if !matches!(idx.ty.dtype, DType::I64 | DType::I32) {
                return Err(format!("{idx}: indices must be I64 or I32"));
            }
            let a = axis_of(*axis, x.ty.shape.len(), "axis")?;
            let mut out = x.ty.shape[..a].to_vec();
            out.extend_from_slice(&idx.ty.shape);
            out.extend_from_slice(&x.ty.shape[a + 1..]);
            one(out)
        }
        Op::Pad { pads, mode, .. } => one(pad(x, pads, *mode)?),
        Op::Identity => one(x.ty.shape.clone()),
        Op::Reduce {
            kind,
            axes,
            keepdims,
        } => {
            if matches!(kind, ReduceKind::Mean | ReduceKind::Variance { .. }) {
                float(x)?;
            } else {
                numeric(x)?;
            }
            let rank = x.ty.shape.len();
            let axes = match axes {
                Some(axes) => axis_set(axes, rank, "axes")?,
                None => (0..rank).collect(),
            };
            one(reduce_dims(&x.ty.shape, &axes, *keepdims))
        }
        Op::ArgReduce { axis, keepdims, .. } => {
            numeric(x)?;
            let a = axis_of(*axis, x.ty.shape.len(), "axis")?;
            Ok(vec![ty(
                DType::I64,
                reduce_dims(&x.ty.shape, &[a], *keepdims),
            )])
        }
        Op::CumSum { axis } => {
            numeric(x)?;
            axis_of(*axis, x.ty.shape.len(), "axis")?;
            one(x.ty.shape.clone())
        }
    }
}

/// A tensor type.
pub(super) fn ty(dtype: DType, shape: Vec<Dim>) -> TensorType {
    TensorType { dtype, shape }
}

/// Required input `i`.
pub(super) fn req<'a>(args: &[Option<Arg<'a>>], i: usize) -> R<Arg<'a>> {
    args.get(i)
        .copied()
        .flatten()
        .ok_or_else(|| format!("input {i} is required"))
}
