//! Dtype and shape inference for one node, over symbolic [`Dim`]s.
//!
//! The same code runs at load (dims may be symbols) and at bind time (every dim
//! fixed), so there is one set of rules. When the dims an op reads are all fixed,
//! window ops defer to rml-core's `*_output_shape` helpers and broadcasting to
//! [`rml_core::broadcast_shapes`]; the symbolic rules only decide which dims pass
//! through (a batch `N`), which multiply (`reshape`, `flatten`, `upsample`) and which
//! become [`Dim::Unknown`] until binding.

use rml_core::ops::conv::{
    conv_transpose1d_output_shape, conv_transpose2d_output_shape, conv1d_output_shape,
    conv2d_output_shape,
};
use rml_core::ops::layout::resolve_slice;
use rml_core::ops::pool::{pool1d_output_shape, pool2d_output_shape};
use rml_core::shape::normalize_axis;
use rml_core::{DType, Shape, broadcast_shapes};

use super::dim::{Dim, show_dims};
use super::ir::TensorType;
use super::op::{Op, PadKind, ReduceKind, Resize, ShapeEntry, UnaryFn};

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

/// A symbolic size standing in for an unknown spatial extent when a window op's
/// formula is evaluated only to learn its other output dims.
const PROBE: usize = 1 << 20;

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
fn ty(dtype: DType, shape: Vec<Dim>) -> TensorType {
    TensorType { dtype, shape }
}

/// Required input `i`.
fn req<'a>(args: &[Option<Arg<'a>>], i: usize) -> R<Arg<'a>> {
    args.get(i)
        .copied()
        .flatten()
        .ok_or_else(|| format!("input {i} is required"))
}

/// Fails unless `a` is a floating-point tensor.
fn float(a: Arg<'_>) -> R<()> {
    if a.ty.dtype.is_float() {
        Ok(())
    } else {
        Err(format!("{a}: expected a float dtype"))
    }
}

/// Fails unless `a` is float or a signed integer.
fn signed(a: Arg<'_>) -> R<()> {
    match a.ty.dtype {
        DType::I64 | DType::I32 | DType::I16 | DType::I8 => Ok(()),
        _ => float(a),
    }
}

/// Fails unless `a` is float or integer (not BOOL).
fn numeric(a: Arg<'_>) -> R<()> {
    if a.ty.dtype.is_float() || a.ty.dtype.is_int() {
        Ok(())
    } else {
        Err(format!("{a}: expected a numeric dtype"))
    }
}

/// Fails unless every arg has the first one's dtype.
fn same_dtype(args: &[Arg<'_>]) -> R<()> {
    match args.iter().find(|a| a.ty.dtype != args[0].ty.dtype) {
        Some(other) => Err(format!(
            "{other} must have the dtype of {} (insert a cast)",
            args[0]
        )),
        None => Ok(()),
    }
}

/// Fails unless every arg is float with one dtype.
fn same_float(args: &[Arg<'_>]) -> R<()> {
    float(args[0])?;
    same_dtype(args)
}

/// The dims of `a`, which must have rank `N`.
fn rank_n<const N: usize>(a: Arg<'_>) -> R<[Dim; N]> {
    a.ty.shape
        .clone()
        .try_into()
        .map_err(|_| format!("{a}: expected rank {N}"))
}

/// Resolves attribute `attr`'s axis against `rank`.
fn axis_of(axis: isize, rank: usize, attr: &str) -> R<usize> {
    normalize_axis(axis, rank)
        .map_err(|_| format!("attribute {attr:?}: axis {axis} is out of range for rank {rank}"))
}

/// Resolves a list of distinct axes.
fn axis_set(axes: &[isize], rank: usize, attr: &str) -> R<Vec<usize>> {
    let mut out = Vec::with_capacity(axes.len());
    for &axis in axes {
        let a = axis_of(axis, rank, attr)?;
        if out.contains(&a) {
            return Err(format!("attribute {attr:?}: axis {a} is listed twice"));
        }
        out.push(a);
    }
    Ok(out)
}

/// Fails when two dims are both fixed and differ.
fn agree(a: &Dim, b: &Dim, message: impl FnOnce() -> String) -> R<()> {
    match (a.fixed(), b.fixed()) {
        (Some(x), Some(y)) if x != y => Err(message()),
        _ => Ok(()),
    }
}

/// The better-known of two dims that must be equal (fixed over symbolic).
fn unify(a: &Dim, b: &Dim, message: impl FnOnce() -> String) -> R<Dim> {
    agree(a, b, message)?;
    Ok(match (a, b) {
        (Dim::Fixed(_), _) => a.clone(),
        (_, Dim::Fixed(_)) => b.clone(),
        (Dim::Unknown, _) => b.clone(),
        _ => a.clone(),
    })
}

/// Fails unless `a` has exactly `expected` dims (up to symbols).
fn expect_dims(a: Arg<'_>, expected: &[Dim]) -> R<()> {
    let mismatch = || format!("{a}: expected shape {}", show_dims(expected));
    if a.ty.shape.len() != expected.len() {
        return Err(mismatch());
    }
    for (d, e) in a.ty.shape.iter().zip(expected) {
        agree(d, e, mismatch)?;
    }
    Ok(())
}

/// Fixed dims as an rml-core shape, or `None` when any is symbolic.
fn concrete(dims: &[Dim]) -> Option<Shape> {
    let sizes: Option<Vec<usize>> = dims.iter().map(Dim::fixed).collect();
    Shape::new(&sizes?).ok()
}

/// An rml-core shape as fixed dims.
fn dims_of(shape: &Shape) -> Vec<Dim> {
    shape.dims().iter().map(|&d| Dim::Fixed(d)).collect()
}

/// NumPy broadcasting of several inputs' shapes.
fn broadcast(args: &[Arg<'_>]) -> R<Vec<Dim>> {
    args.iter().try_fold(Vec::new(), |acc, a| {
        broadcast2(&acc, &a.ty.shape).map_err(|()| {
            let shapes: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            format!("{} do not broadcast", shapes.join(" and "))
        })
    })
}

/// NumPy broadcasting of two dim lists; rml-core's rule when both are fixed.
fn broadcast2(a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>, ()> {
    if let (Some(x), Some(y)) = (concrete(a), concrete(b)) {
        return broadcast_shapes(&x, &y)
            .map(|s| dims_of(&s))
            .map_err(|_| ());
    }
    let rank = a.len().max(b.len());
    let at = |d: &[Dim], i: usize| {
        (i + d.len())
            .checked_sub(rank)
            .map_or(Dim::Fixed(1), |j| d[j].clone())
    };
    (0..rank)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y => Ok(x),
            (Dim::Fixed(1), y) => Ok(y),
            (x, Dim::Fixed(1)) => Ok(x),
            (Dim::Fixed(_), Dim::Fixed(_)) => Err(()),
            (x @ Dim::Fixed(_), _) | (_, x @ Dim::Fixed(_)) => Ok(x),
            _ => Ok(Dim::Unknown),
        })
        .collect()
}

/// `op(a) @ op(b)`: batch axes broadcast, then `[m, n]`.
fn matmul(a: Arg<'_>, b: Arg<'_>, ta: bool, tb: bool) -> R<Vec<Dim>> {
    let split = |x: Arg<'_>, t: bool| -> R<(Vec<Dim>, Dim, Dim)> {
        let r = x.ty.shape.len();
        if r < 2 {
            return Err(format!("{x}: matmul operands need rank >= 2"));
        }
        let (p, q) = (x.ty.shape[r - 2].clone(), x.ty.shape[r - 1].clone());
        let (rows, cols) = if t { (q, p) } else { (p, q) };
        Ok((x.ty.shape[..r - 2].to_vec(), rows, cols))
    };
    let (ba, m, k) = split(a, ta)?;
    let (bb, k_b, n) = split(b, tb)?;
    agree(&k, &k_b, || {
        format!("{a} and {b}: inner sizes {k} and {k_b} differ")
    })?;
    let mut out =
        broadcast2(&ba, &bb).map_err(|()| format!("{a} and {b}: batch axes do not broadcast"))?;
    out.extend([m, n]);
    Ok(out)
}

/// Convolutions: float input and weight of one dtype, optional bias `[C_out]`,
/// fixed channels, output from rml-core's shape helper.
fn conv(
    args: &[Option<Arg<'_>>],
    compute: impl Fn(&Shape, &Shape) -> rml_core::Result<Shape>,
) -> R<Vec<TensorType>> {
    let (x, w) = (req(args, 0)?, req(args, 1)?);
    same_float(&[x, w])?;
    let weight =
        concrete(&w.ty.shape).ok_or_else(|| format!("{w}: a weight must have a fixed shape"))?;
    let out = windowed(x, Some(w), |i| compute(i, &weight))?;
    if let Some(b) = args.get(2).copied().flatten() {
        same_float(&[x, b])?;
        expect_dims(b, std::slice::from_ref(&out[1]))?;
    }
    Ok(vec![ty(x.ty.dtype, out)])
}

/// A window op over `[N, C, spatial…]`: evaluates rml-core's formula with the batch
/// (and, without a weight, the channels) standing in as 1 and symbolic spatial
/// sizes as [`PROBE`]; restores the symbolic batch and channels, and leaves spatial
/// outputs of symbolic inputs unknown.
fn windowed(
    x: Arg<'_>,
    weight: Option<Arg<'_>>,
    compute: impl Fn(&Shape) -> rml_core::Result<Shape>,
) -> R<Vec<Dim>> {
    let dims = &x.ty.shape;
    let mut probe = Vec::with_capacity(dims.len());
    for (axis, d) in dims.iter().enumerate() {
        probe.push(match (d.fixed(), axis) {
            (Some(n), _) => n,
            (None, 0) => 1,
            (None, 1) if weight.is_some() => {
                return Err(format!("{x}: convolution channels must be a fixed size"));
            }
            (None, 1) => 1,
            (None, _) => PROBE,
        });
    }
    let shape = Shape::new(&probe).map_err(|e| format!("{x}: {e}"))?;
    let out = compute(&shape).map_err(|e| match weight {
        Some(w) => format!("{x} with weight {w}: {e}"),
        None => format!("{x}: {e}"),
    })?;
    Ok(out
        .dims()
        .iter()
        .enumerate()
        .map(|(axis, &n)| match dims.get(axis) {
            Some(d) if d.fixed().is_none() && axis < 2 => d.clone(),
            Some(d) if d.fixed().is_none() => Dim::Unknown,
            _ => Dim::Fixed(n),
        })
        .collect())
}

/// The channel dim of a float `[N, C, …]` input.
fn channels(x: Arg<'_>) -> R<Dim> {
    float(x)?;
    x.ty.shape
        .get(1)
        .cloned()
        .filter(|_| x.ty.shape.len() >= 2)
        .ok_or_else(|| format!("{x}: expected rank >= 2 ([N, C, …])"))
}

/// Inputs from `first` on, when present, are float vectors `[C]`.
fn per_channel(args: &[Option<Arg<'_>>], first: usize, c: &Dim) -> R<()> {
    let x = req(args, 0)?;
    for p in args[first..].iter().flatten() {
        same_float(&[x, *p])?;
        expect_dims(*p, std::slice::from_ref(c))?;
    }
    Ok(())
}

/// `scaled_dot_product_attention(q, k, v, mask?)`.
fn attention(q: Arg<'_>, k: Arg<'_>, v: Arg<'_>, mask: Option<Arg<'_>>) -> R<Vec<TensorType>> {
    same_float(&[q, k, v])?;
    let parts = |a: Arg<'_>| -> R<(Vec<Dim>, Dim, Dim)> {
        let r = a.ty.shape.len();
        if r < 2 {
            return Err(format!("{a}: expected rank >= 2 ([…, S, D])"));
        }
        Ok((
            a.ty.shape[..r - 2].to_vec(),
            a.ty.shape[r - 2].clone(),
            a.ty.shape[r - 1].clone(),
        ))
    };
    let ((bq, sq, dq), (bk, sk, dk), (bv, sv, dv)) = (parts(q)?, parts(k)?, parts(v)?);
    agree(&dq, &dk, || format!("{q} and {k}: head sizes differ"))?;
    agree(&sk, &sv, || format!("{k} and {v}: key lengths differ"))?;
    let fail = |()| format!("{q}, {k} and {v}: batch axes do not broadcast");
    let batch = broadcast2(&broadcast2(&bq, &bk).map_err(fail)?, &bv).map_err(fail)?;
    if let Some(m) = mask {
        if m.ty.dtype != DType::Bool {
            same_dtype(&[q, m])?;
        }
        let mut scores = batch.clone();
        scores.extend([sq.clone(), sk.clone()]);
        let fits = broadcast2(&m.ty.shape, &scores).is_ok_and(|d| {
            d.len() == scores.len()
                && d.iter()
                    .zip(&scores)
                    .all(|(a, b)| agree(a, b, String::new).is_ok())
        });
        if !fits {
            return Err(format!(
                "{m}: the mask must broadcast to the scores {}",
                show_dims(&scores)
            ));
        }
    }
    let mut out = batch;
    out.extend([sq, dv]);
    Ok(vec![ty(q.ty.dtype, out)])
}

/// `reshape` with `0` (copy) and `-1` (infer) entries.
fn reshape(x: Arg<'_>, spec: &[ShapeEntry], symbol: &dyn Fn(&str) -> Option<Dim>) -> R<Vec<Dim>> {
    let mut out = Vec::with_capacity(spec.len());
    for (i, entry) in spec.iter().enumerate() {
        out.push(match entry {
            ShapeEntry::Fixed(n) => Dim::Fixed(*n),
            ShapeEntry::Symbol(s) => resolve(s, symbol)?,
            ShapeEntry::Copy => x.ty.shape.get(i).cloned().ok_or_else(|| {
                format!("attribute \"shape\": entry {i} is 0 (copy) but {x} has no axis {i}")
            })?,
            ShapeEntry::Infer => Dim::Unknown,
        });
    }
    let total = Dim::product(&x.ty.shape);
    let show = |out: &[Dim]| format!("cannot reshape {x} into {}", show_dims(out));
    if let Some(i) = spec.iter().position(|e| *e == ShapeEntry::Infer) {
        let known = Dim::product(
            out.iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, d)| d),
        );
        if known == Dim::Fixed(0) {
            return Err(format!(
                "attribute \"shape\": -1 is ambiguous next to a 0-size axis ({})",
                show(&out)
            ));
        }
        // When the symbols divide but the coefficients do not, no binding helps.
        let symbols_divide = total
            .symbolic_part()
            .div_exact(&known.symbolic_part())
            .is_some();
        out[i] = match total.div_exact(&known) {
            Some(d) => d,
            None if symbols_divide => return Err(show(&out)),
            None => Dim::Unknown,
        };
    } else if let (Some(a), Some(b)) = (total.fixed(), Dim::product(&out).fixed())
        && a != b
    {
        return Err(show(&out));
    }
    Ok(out)
}

/// A symbol named in an attribute, or an error.
fn resolve(name: &str, symbol: &dyn Fn(&str) -> Option<Dim>) -> R<Dim> {
    symbol(name).ok_or_else(|| {
        format!("attribute \"shape\": symbol {name:?} is not bound by any graph input")
    })
}

/// `expand`: broadcast `x` to the target, `-1` keeping the input's size.
fn expand(x: Arg<'_>, spec: &[ShapeEntry], symbol: &dyn Fn(&str) -> Option<Dim>) -> R<Vec<Dim>> {
    let (rank, target) = (x.ty.shape.len(), spec.len());
    if target < rank {
        return Err(format!(
            "attribute \"shape\": {target} entries cannot hold {x}"
        ));
    }
    let lead = target - rank;
    let mut out = Vec::with_capacity(target);
    for (i, entry) in spec.iter().enumerate() {
        let have = i.checked_sub(lead).map(|j| &x.ty.shape[j]);
        let want = match entry {
            ShapeEntry::Fixed(n) => Dim::Fixed(*n),
            ShapeEntry::Symbol(s) => resolve(s, symbol)?,
            ShapeEntry::Infer | ShapeEntry::Copy => match have {
                Some(d) => d.clone(),
                None => {
                    return Err(format!(
                        "attribute \"shape\": entry {i} is -1 but {x} has no matching axis"
                    ));
                }
            },
        };
        out.push(match have {
            Some(Dim::Fixed(1)) | None => want,
            Some(d) => unify(d, &want, || {
                format!("cannot expand {x} to size {want} on axis {i}")
            })?,
        });
    }
    Ok(out)
}

/// `concat` along `axis`.
fn concat(args: &[Option<Arg<'_>>], axis: isize) -> R<Vec<TensorType>> {
    let inputs: Vec<Arg<'_>> = args.iter().flatten().copied().collect();
    same_dtype(&inputs)?;
    let first = inputs[0];
    let rank = first.ty.shape.len();
    let a = axis_of(axis, rank, "axis")?;
    let mut out = first.ty.shape.clone();
    for other in &inputs[1..] {
        if other.ty.shape.len() != rank {
            return Err(format!("{other} must have the rank of {first}"));
        }
        for (i, d) in other.ty.shape.iter().enumerate() {
            out[i] = if i == a {
                out[i].add(d)
            } else {
                unify(&out[i], d, || {
                    format!("{other} and {first} differ on axis {i}")
                })?
            };
        }
    }
    Ok(vec![ty(first.ty.dtype, out)])
}

/// `split` into `n` outputs along `axis`.
fn split(x: Arg<'_>, axis: isize, sizes: Option<&[usize]>, n: usize) -> R<Vec<TensorType>> {
    let a = axis_of(axis, x.ty.shape.len(), "axis")?;
    let d = &x.ty.shape[a];
    let parts: Vec<Dim> = match sizes {
        Some(sizes) => {
            if sizes.len() != n {
                return Err(format!(
                    "attribute \"sizes\": {} sizes for {n} outputs",
                    sizes.len()
                ));
            }
            let sum: usize = sizes.iter().sum();
            agree(d, &Dim::Fixed(sum), || {
                format!(
                    "attribute \"sizes\": {sizes:?} add up to {sum}, not the {d} of {x} on axis {a}"
                )
            })?;
            sizes.iter().map(|&s| Dim::Fixed(s)).collect()
        }
        None => {
            let part = match (d.div_exact(&Dim::Fixed(n)), d.fixed()) {
                (Some(p), _) => p,
                (None, Some(_)) => {
                    return Err(format!(
                        "{x}: axis {a} of size {d} does not split into {n} equal parts"
                    ));
                }
                (None, None) => Dim::Unknown,
            };
            vec![part; n]
        }
    };
    Ok(parts
        .into_iter()
        .map(|p| {
            let mut shape = x.ty.shape.clone();
            shape[a] = p;
            ty(x.ty.dtype, shape)
        })
        .collect())
}

/// The length of `start:end:step` over an axis of size `d`.
fn slice_dim(d: &Dim, start: i64, end: i64, step: i64) -> R<Dim> {
    match d.fixed() {
        Some(len) => resolve_slice(len, start, end, step)
            .map(|s| Dim::Fixed(s.len))
            .map_err(|e| format!("attribute \"starts\"/\"ends\"/\"steps\": {e}")),
        None if start == 0 && step == 1 && end >= i64::from(i32::MAX) => Ok(d.clone()),
        None => Ok(Dim::Unknown),
    }
}

/// `pad` by `[before, after]` per axis, with the mode's size limits.
fn pad(x: Arg<'_>, pads: &[[usize; 2]], mode: PadKind) -> R<Vec<Dim>> {
    let rank = x.ty.shape.len();
    if pads.len() != rank {
        return Err(format!(
            "attribute \"pads\": {} pairs for the {rank} axes of {x}",
            pads.len()
        ));
    }
    let mut out = Vec::with_capacity(rank);
    for (axis, (d, &[before, after])) in x.ty.shape.iter().zip(pads).enumerate() {
        if let Some(len) = d.fixed() {
            let most = before.max(after);
            let fits = match mode {
                PadKind::Constant => true,
                PadKind::Reflect => most < len || most == 0,
                PadKind::Wrap => most <= len,
                PadKind::Edge => len > 0 || most == 0,
            };
            if !fits {
                return Err(format!(
                    "attribute \"pads\": {mode:?} padding of {most} does not fit axis {axis} of size {len}"
                ));
            }
        }
        out.push(d.add(&Dim::Fixed(before + after)));
    }
    Ok(out)
}

/// `dims` without (or with size 1 on) the reduced `axes`.
fn reduce_dims(dims: &[Dim], axes: &[usize], keepdims: bool) -> Vec<Dim> {
    if keepdims {
        (0..dims.len())
            .map(|a| {
                if axes.contains(&a) {
                    Dim::Fixed(1)
                } else {
                    dims[a].clone()
                }
            })
            .collect()
    } else {
        keep_axes(dims, |a| !axes.contains(&a))
    }
}

/// The dims on the axes `keep` accepts.
fn keep_axes(dims: &[Dim], keep: impl Fn(usize) -> bool) -> Vec<Dim> {
    dims.iter()
        .enumerate()
        .filter(|(a, _)| keep(*a))
        .map(|(_, d)| d.clone())
        .collect()
}
