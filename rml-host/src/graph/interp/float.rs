//! Arithmetic ops in f32 on rml-core's reference ops: linear algebra, convolution,
//! pooling, normalization, softmax, attention, elementwise functions, reductions.

use rml_core::ops::binary::{BinaryOp, binary};
use rml_core::ops::conv::{conv_transpose1d, conv_transpose2d, conv1d, conv2d};
use rml_core::ops::matmul::{MatmulOptions, matmul, matmul_shape};
use rml_core::ops::norm::{Affine, batch_norm, group_norm, layer_norm, rms_norm};
use rml_core::ops::pool::{
    avg_pool1d, avg_pool2d, global_avg_pool2d, global_max_pool2d, max_pool1d, max_pool2d,
};
use rml_core::ops::reduce::{ArgOp, ReduceOp, arg_reduce, cumsum, reduce};
use rml_core::ops::softmax::{SoftmaxKind, softmax_along};
use rml_core::ops::unary::{UnaryOp, unary};
use rml_core::ops::walk::map_unary;
use rml_core::{Shape, TensorView, TensorViewMut};

use super::{In, R, core, output, req};
use crate::graph::buffer::Buffer;
use crate::graph::op::{BinaryFn, Op, PoolKind, ReduceKind, UnaryFn};

/// Runs `op` on f32 inputs into an output of shape `out`.
pub(super) fn run(op: &Op, args: &[Option<In<'_>>], out: &Shape) -> R<Buffer> {
    let x = req(args, 0)?.view::<f32>()?;
    let opt = |i: usize| {
        args.get(i)
            .copied()
            .flatten()
            .map(|a| a.view::<f32>())
            .transpose()
    };
    let arg = |i: usize| req(args, i)?.view::<f32>();
    match op {
        Op::Linear => linear(&x, &arg(1)?, opt(2)?.as_ref(), out),
        Op::Attention { causal, scale } => {
            let mask = args.get(3).copied().flatten();
            attention(&x, &arg(1)?, &arg(2)?, mask, *causal, *scale, out)
        }
        Op::ArgReduce {
            max,
            axis,
            keepdims,
        } => {
            let op = if *max { ArgOp::Max } else { ArgOp::Min };
            output::<i64>(out, |o| arg_reduce(op, &x, &[*axis], *keepdims, o))
        }
        _ => {
            for i in required(op) {
                req(args, i)?;
            }
            let mut views = [None; 5];
            for (i, v) in views.iter_mut().enumerate() {
                *v = opt(i)?;
            }
            output::<f32>(out, |o| {
                fill(op, &views, o).unwrap_or(Err(rml_core::Error::InvalidArgument(
                    "not an arithmetic op",
                )))
            })
        }
    }
}

/// The inputs `op` cannot run without.
fn required(op: &Op) -> std::ops::Range<usize> {
    match op {
        Op::MatMul { .. }
        | Op::Conv1d(_)
        | Op::Conv2d(_)
        | Op::ConvTranspose1d(_)
        | Op::ConvTranspose2d(_)
        | Op::Binary(_) => 0..2,
        Op::BatchNorm { .. } => 0..3,
        _ => 0..1,
    }
}

/// Fills `o` with `op` over f32 inputs `ins` (by position; `None` for an absent
/// optional input): every arithmetic op that is one rml-core call writing an f32
/// output. `None` for the others (`linear`, attention, arg-reductions, data
/// movement). The executor calls it on views of its arena; the interpreter on its
/// own buffers. Required inputs must be present (the loader checks arity).
pub(crate) fn fill(
    op: &Op,
    ins: &[Option<TensorView<'_, f32>>],
    o: &mut TensorViewMut<'_, f32>,
) -> Option<rml_core::Result<()>> {
    let x = ins.first().copied().flatten()?;
    let opt = |i: usize| ins.get(i).copied().flatten();
    let arg = |i: usize| opt(i).expect("required inputs are checked at load");
    Some(match op {
        Op::MatMul {
            transpose_a,
            transpose_b,
        } => {
            let options = MatmulOptions {
                transpose_a: *transpose_a,
                transpose_b: *transpose_b,
            };
            matmul(&x, &arg(1), o, options)
        }
        Op::Conv1d(p) => conv1d(&x, &arg(1), opt(2).as_ref(), p, o),
        Op::Conv2d(p) => conv2d(&x, &arg(1), opt(2).as_ref(), p, o),
        Op::ConvTranspose1d(p) => conv_transpose1d(&x, &arg(1), opt(2).as_ref(), p, o),
        Op::ConvTranspose2d(p) => conv_transpose2d(&x, &arg(1), opt(2).as_ref(), p, o),
        Op::Pool1d { kind, params } => match kind {
            PoolKind::Max => max_pool1d(&x, params, o),
            PoolKind::Avg { count_include_pad } => avg_pool1d(&x, params, *count_include_pad, o),
        },
        Op::Pool2d { kind, params } => match kind {
            PoolKind::Max => max_pool2d(&x, params, o),
            PoolKind::Avg { count_include_pad } => avg_pool2d(&x, params, *count_include_pad, o),
        },
        Op::GlobalPool2d { kind } => match kind {
            PoolKind::Max => global_max_pool2d(&x, o),
            PoolKind::Avg { .. } => global_avg_pool2d(&x, o),
        },
        Op::LayerNorm { axis, epsilon } => {
            let first = match x.shape().axis(*axis) {
                Ok(first) => first,
                Err(e) => return Some(Err(e)),
            };
            let affine = Affine {
                weight: opt(1),
                bias: opt(2),
            };
            layer_norm(&x, x.shape().rank() - first, affine, *epsilon, o)
        }
        Op::RmsNorm { epsilon } => rms_norm(&x, opt(1), *epsilon, o),
        Op::GroupNorm {
            num_groups,
            epsilon,
        } => {
            let affine = Affine {
                weight: opt(1),
                bias: opt(2),
            };
            group_norm(&x, *num_groups, affine, *epsilon, o)
        }
        Op::BatchNorm { epsilon } => {
            let affine = Affine {
                weight: opt(3),
                bias: opt(4),
            };
            batch_norm(&x, &arg(1), &arg(2), affine, *epsilon, o)
        }
        Op::Softmax { log, axis } => {
            let kind = if *log {
                SoftmaxKind::LogSoftmax
            } else {
                SoftmaxKind::Softmax
            };
            softmax_along(kind, &x, *axis, o)
        }
        Op::Unary(f) => unary(unary_op(*f), &x, o),
        Op::Clip { min, max } => {
            let (lo, hi) = (
                min.unwrap_or(f32::NEG_INFINITY),
                max.unwrap_or(f32::INFINITY),
            );
            // Comparisons keep NaN, as PyTorch's clamp does.
            let clip = |v: f32| {
                if v < lo {
                    lo
                } else if v > hi {
                    hi
                } else {
                    v
                }
            };
            map_unary("clip", &x, o, clip)
        }
        Op::Binary(f) => binary(binary_op(*f), &x, &arg(1), o),
        Op::Reduce {
            kind,
            axes,
            keepdims,
        } => {
            let all: [isize; 8] = [0, 1, 2, 3, 4, 5, 6, 7];
            let axes = axes.as_deref().unwrap_or(&all[..x.shape().rank()]);
            reduce(reduce_op(*kind), &x, axes, *keepdims, o)
        }
        Op::CumSum { axis } => cumsum(&x, *axis, o),
        _ => return None,
    })
}

/// `x · wᵀ + bias` as an rml-core matmul (a rank-1 `x` as one row) and a
/// broadcast add.
fn linear(
    x: &TensorView<'_, f32>,
    w: &TensorView<'_, f32>,
    bias: Option<&TensorView<'_, f32>>,
    out: &Shape,
) -> R<Buffer> {
    let options = MatmulOptions {
        transpose_a: false,
        transpose_b: true,
    };
    let rows = if x.shape().rank() == 1 {
        x.reshape(&[1, x.shape().dim(0)]).map_err(core)?
    } else {
        *x
    };
    let product_shape = matmul_shape(rows.shape(), w.shape(), options).map_err(core)?;
    let product = output::<f32>(&product_shape, |o| matmul(&rows, w, o, options))?;
    let Buffer::F32(data) = product else {
        unreachable!("output::<f32> makes F32")
    };
    let product = TensorView::new(&data, *out).map_err(core)?;
    match bias {
        Some(b) => output::<f32>(out, |o| binary(BinaryOp::Add, &product, b, o)),
        None => Ok(Buffer::F32(data.clone())),
    }
}

/// `softmax(q·kᵀ·scale + mask)·v`, with the causal mask applied to the scores.
fn attention(
    q: &TensorView<'_, f32>,
    k: &TensorView<'_, f32>,
    v: &TensorView<'_, f32>,
    mask: Option<In<'_>>,
    causal: bool,
    scale: Option<f32>,
    out: &Shape,
) -> R<Buffer> {
    let qk = MatmulOptions {
        transpose_a: false,
        transpose_b: true,
    };
    let scores_shape = matmul_shape(q.shape(), k.shape(), qk).map_err(core)?;
    let rank = scores_shape.rank();
    let (sq, sk) = (scores_shape.dim(rank - 2), scores_shape.dim(rank - 1));
    let head = q.shape().dim(q.shape().rank() - 1);
    let scale = scale.unwrap_or(1.0 / (head as f32).sqrt());
    let Buffer::F32(mut scores) = output::<f32>(&scores_shape, |o| matmul(q, k, o, qk))? else {
        unreachable!("output::<f32> makes F32")
    };
    for (flat, s) in scores.iter_mut().enumerate() {
        let (i, j) = ((flat / sk) % sq, flat % sk);
        *s = if causal && j > i {
            f32::NEG_INFINITY
        } else {
            *s * scale
        };
    }
    if let Some(mask) = mask {
        let view = TensorView::new(&scores, scores_shape).map_err(core)?;
        let masked = match mask.data {
            Buffer::Bool(_) => {
                let keep = mask.view::<u8>()?;
                let neg_inf = [f32::NEG_INFINITY];
                let fill = TensorView::new(&neg_inf, Shape::scalar()).map_err(core)?;
                output::<f32>(&scores_shape, |o| {
                    rml_core::ops::compare::where_(&keep, &view, &fill, o)
                })?
            }
            _ => {
                let add = mask.view::<f32>()?;
                output::<f32>(&scores_shape, |o| binary(BinaryOp::Add, &view, &add, o))?
            }
        };
        let Buffer::F32(masked) = masked else {
            unreachable!("output::<f32> makes F32")
        };
        scores = masked;
    }
    let view = TensorView::new(&scores, scores_shape).map_err(core)?;
    let Buffer::F32(probs) = output::<f32>(&scores_shape, |o| {
        softmax_along(SoftmaxKind::Softmax, &view, -1, o)
    })?
    else {
        unreachable!("output::<f32> makes F32")
    };
    let probs = TensorView::new(&probs, scores_shape).map_err(core)?;
    output::<f32>(out, |o| matmul(&probs, v, o, MatmulOptions::default()))
}

/// The rml-core function for a graph unary op.
pub(crate) fn unary_op(f: UnaryFn) -> UnaryOp {
    match f {
        UnaryFn::Neg => UnaryOp::Neg,
        UnaryFn::Abs => UnaryOp::Abs,
        UnaryFn::Exp => UnaryOp::Exp,
        UnaryFn::Log => UnaryOp::Log,
        UnaryFn::Sqrt => UnaryOp::Sqrt,
        UnaryFn::Rsqrt => UnaryOp::Rsqrt,
        UnaryFn::Tanh => UnaryOp::Tanh,
        UnaryFn::Sigmoid => UnaryOp::Sigmoid,
        UnaryFn::Relu => UnaryOp::Relu,
        UnaryFn::LeakyRelu(a) => UnaryOp::LeakyRelu(a),
        UnaryFn::Elu(a) => UnaryOp::Elu(a),
        UnaryFn::Softplus => UnaryOp::Softplus,
        UnaryFn::Erf => UnaryOp::Erf,
        UnaryFn::Gelu => UnaryOp::Gelu,
        UnaryFn::GeluTanh => UnaryOp::GeluTanh,
        UnaryFn::Silu => UnaryOp::Silu,
        UnaryFn::Sin => UnaryOp::Sin,
        UnaryFn::Cos => UnaryOp::Cos,
    }
}

/// The rml-core function for a graph binary op.
pub(crate) fn binary_op(f: BinaryFn) -> BinaryOp {
    match f {
        BinaryFn::Add => BinaryOp::Add,
        BinaryFn::Sub => BinaryOp::Sub,
        BinaryFn::Mul => BinaryOp::Mul,
        BinaryFn::Div => BinaryOp::Div,
        BinaryFn::Pow => BinaryOp::Pow,
        BinaryFn::Maximum => BinaryOp::Maximum,
        BinaryFn::Minimum => BinaryOp::Minimum,
    }
}

/// The rml-core reduction for a graph reduction.
fn reduce_op(kind: ReduceKind) -> ReduceOp {
    match kind {
        ReduceKind::Sum => ReduceOp::Sum,
        ReduceKind::Mean => ReduceOp::Mean,
        ReduceKind::Max => ReduceOp::Max,
        ReduceKind::Min => ReduceOp::Min,
        ReduceKind::Prod => ReduceOp::Prod,
        ReduceKind::Variance { correction } => ReduceOp::Var { ddof: correction },
    }
}
