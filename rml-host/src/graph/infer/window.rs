//! Convolution, pooling and normalization inputs over `[N, C, spatial…]`: the
//! concrete output comes from rml-core's `*_output_shape` helpers; the batch and
//! channels pass through symbolically.

use rml_core::Shape;

use super::check::{expect_dims, float, same_float};
use super::dims::concrete;
use super::{Arg, R, req, ty};
use crate::graph::dim::Dim;
use crate::graph::ir::TensorType;

/// A symbolic size standing in for an unknown spatial extent when a window op's
/// formula is evaluated only to learn its other output dims.
pub(super) const PROBE: usize = 1 << 20;

/// Convolutions: float input and weight of one dtype, optional bias `[C_out]`,
/// fixed channels, output from rml-core's shape helper.
pub(super) fn conv(
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
pub(super) fn windowed(
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
pub(super) fn channels(x: Arg<'_>) -> R<Dim> {
    float(x)?;
    x.ty.shape
        .get(1)
        .cloned()
        .filter(|_| x.ty.shape.len() >= 2)
        .ok_or_else(|| format!("{x}: expected rank >= 2 ([N, C, …])"))
}

/// Inputs from `first` on, when present, are float vectors `[C]`.
pub(super) fn per_channel(args: &[Option<Arg<'_>>], first: usize, c: &Dim) -> R<()> {
    let x = req(args, 0)?;
    for p in args[first..].iter().flatten() {
        same_float(&[x, *p])?;
        expect_dims(*p, std::slice::from_ref(c))?;
    }
    Ok(())
}
