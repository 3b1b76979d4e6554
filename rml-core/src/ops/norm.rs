//! Normalization layers: layer norm, RMS norm, group norm and inference-mode batch
//! norm, all `y = (x - mean) / sqrt(var + eps) * weight + bias` over different
//! groups of elements (RMS norm skips the mean).
//!
//! Statistics are computed in f64 with two passes (mean, then mean squared
//! deviation, the population variance as PyTorch uses), the output in f64, rounded
//! once to f32.

use crate::error::{Error, Result};
use crate::ops::walk::{paired_groups, trailing_mask};
use crate::shape::Shape;
use crate::view::{Layout, TensorView, TensorViewMut};

/// The optional learned scale (`weight`) and shift (`bias`) applied after
/// normalizing; a missing weight is 1, a missing bias 0.
#[derive(Clone, Copy, Debug, Default)]
pub struct Affine<'a> {
    /// Per-element (layer norm) or per-channel (group/batch norm) scale.
    pub weight: Option<TensorView<'a, f32>>,
    /// Per-element (layer norm) or per-channel (group/batch norm) shift.
    pub bias: Option<TensorView<'a, f32>>,
}

impl Affine<'_> {
    /// Checks that each present parameter has shape `shape`.
    fn check(&self, shape: &Shape, op: &'static str) -> Result<()> {
        for param in [self.weight, self.bias].iter().flatten() {
            if param.shape() != shape {
                return Err(Error::ShapeMismatch { op });
            }
        }
        Ok(())
    }

    /// Weight and bias of channel `c` (per-channel parameters of shape `[C]`).
    fn channel(&self, c: usize) -> Result<(f64, f64)> {
        Ok((param_at(self.weight, c, 1.0)?, param_at(self.bias, c, 0.0)?))
    }
}

/// Element `i` of a 1-D parameter, or `default` when the parameter is absent.
fn param_at(param: Option<TensorView<'_, f32>>, i: usize, default: f32) -> Result<f64> {
    Ok(f64::from(match param {
        Some(view) => view.get(&[i])?,
        None => default,
    }))
}

/// The values of a parameter in row-major order, or `default` when it is absent.
/// Callers zip this with a group of exactly the parameter's length (checked by
/// [`Affine::check`]), so the trailing `default`s are only ever read when the
/// parameter is absent.
fn param_values<'a>(
    param: Option<TensorView<'a, f32>>,
    default: f32,
) -> impl Iterator<Item = f64> + 'a {
    let stored = param.into_iter().flat_map(|view| {
        let data = view.data();
        view.layout().offsets().map(move |o| data[o])
    });
    stored.chain(core::iter::repeat(default)).map(f64::from)
}

/// Rejects a negative or NaN epsilon.
fn check_eps(eps: f32) -> Result<()> {
    if eps >= 0.0 {
        Ok(())
    } else {
        Err(Error::InvalidArgument("eps must be non-negative"))
    }
}

/// Mean and population variance of the values at `offsets` (f64, two passes, each
/// sum in offset order): the moments every normalization here takes, and the
/// reference for faster kernels that keep its bits.
pub fn moments(data: &[f32], offsets: impl Iterator<Item = usize> + Clone) -> (f64, f64) {
    let count = offsets.clone().count() as f64;
    let mean = offsets.clone().map(|o| f64::from(data[o])).sum::<f64>() / count;
    let var = offsets
        .map(|o| (f64::from(data[o]) - mean) * (f64::from(data[o]) - mean))
        .sum::<f64>()
        / count;
    (mean, var)
}

/// `y = (x - mean) / sqrt(var + eps) * weight + bias` for one group, in f64.
#[derive(Clone, Copy, Debug)]
struct Normalizer {
    mean: f64,
    inv_std: f64,
}

impl Normalizer {
    /// From a group's mean and variance (for RMS norm: 0 and the mean square).
    fn new(mean: f64, var: f64, eps: f32) -> Normalizer {
        Normalizer {
            mean,
            inv_std: 1.0 / libm::sqrt(var + f64::from(eps)),
        }
    }

    /// One output value, rounded once to f32.
    fn apply(&self, x: f32, weight: f64, bias: f64) -> f32 {
        ((f64::from(x) - self.mean) * self.inv_std * weight + bias) as f32
    }
}

/// Layer norm over the last `normalized_axes` axes of `x` into `out` (same shape).
/// `weight` and `bias`, when given, have the shape of those trailing axes.
///
/// Errors: `out` or a parameter of the wrong shape ([`Error::ShapeMismatch`]),
/// `normalized_axes` of 0 or above the rank, or a negative `eps`
/// ([`Error::InvalidArgument`]).
pub fn layer_norm(
    x: &TensorView<'_, f32>,
    normalized_axes: usize,
    affine: Affine<'_>,
    eps: f32,
    out: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    if x.shape() != out.shape() {
        return Err(Error::ShapeMismatch { op: "layer_norm" });
    }
    if normalized_axes == 0 {
        return Err(Error::InvalidArgument(
            "layer_norm needs at least one normalized axis",
        ));
    }
    check_eps(eps)?;
    let rank = x.shape().rank();
    let mask = trailing_mask(normalized_axes, rank)?;
    let normalized = Shape::new(&x.shape().dims()[rank - normalized_axes..])?;
    affine.check(&normalized, "layer_norm")?;
    let data = x.data();
    let lanes = paired_groups(x.layout(), out.layout(), &mask);
    let out_data = out.data_mut();
    for (group, targets) in lanes {
        let (mean, var) = moments(data, group.clone());
        let norm = Normalizer::new(mean, var, eps);
        let params = param_values(affine.weight, 1.0).zip(param_values(affine.bias, 0.0));
        for ((i, o), (w, b)) in group.zip(targets).zip(params) {
            out_data[o] = norm.apply(data[i], w, b);
        }
    }
    Ok(())
}

/// RMS norm over the last axis: `x / sqrt(mean(x²) + eps) * weight`, with `weight`
/// (shape `[D]`, the last axis) optional.
///
/// Errors: as [`layer_norm`]; a rank-0 `x` has no last axis
/// ([`Error::InvalidArgument`]).
pub fn rms_norm(
    x: &TensorView<'_, f32>,
    weight: Option<TensorView<'_, f32>>,
    eps: f32,
    out: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    if x.shape() != out.shape() {
        return Err(Error::ShapeMismatch { op: "rms_norm" });
    }
    check_eps(eps)?;
    let rank = x.shape().rank();
    if rank == 0 {
        return Err(Error::InvalidArgument("rms_norm needs at least one axis"));
    }
    let affine = Affine { weight, bias: None };
    affine.check(&Shape::new(&x.shape().dims()[rank - 1..])?, "rms_norm")?;
    let mask = trailing_mask(1, rank)?;
    let data = x.data();
    let lanes = paired_groups(x.layout(), out.layout(), &mask);
    let out_data = out.data_mut();
    for (row, targets) in lanes {
        let count = row.clone().count() as f64;
        let mean_square = row
            .clone()
            .map(|i| f64::from(data[i]) * f64::from(data[i]))
            .sum::<f64>()
            / count;
        let norm = Normalizer::new(0.0, mean_square, eps);
        for ((i, o), w) in row.zip(targets).zip(param_values(weight, 1.0)) {
            out_data[o] = norm.apply(data[i], w, 0.0);
        }
    }
    Ok(())
}

/// The elements of sample `n`, channels `channels` of a `[N, C, …]` layout.
fn channel_block(layout: &Layout, n: usize, channels: core::ops::Range<usize>) -> Result<Layout> {
    layout
        .slice(0, n, n + 1, 1)?
        .slice(1, channels.start, channels.end, 1)
}

/// Writes channel `c` of sample `n` of `[N, C, …]` input `x`, normalized by `norm`
/// and scaled by channel `c` of `affine`, into the same place of `out`.
fn normalize_channel(
    x: &TensorView<'_, f32>,
    out: &mut TensorViewMut<'_, f32>,
    (n, c): (usize, usize),
    norm: Normalizer,
    affine: &Affine<'_>,
) -> Result<()> {
    let (w, b) = affine.channel(c)?;
    let source = channel_block(x.layout(), n, c..c + 1)?.offsets();
    let target = channel_block(out.layout(), n, c..c + 1)?.offsets();
    let (data, out_data) = (x.data(), out.data_mut());
    for (i, o) in source.zip(target) {
        out_data[o] = norm.apply(data[i], w, b);
    }
    Ok(())
}

/// Checks the common `[N, C, …]` input of group and batch norm; returns `(N, C)`.
fn check_channels_first(
    x: &TensorView<'_, f32>,
    out: &TensorViewMut<'_, f32>,
    eps: f32,
    op: &'static str,
) -> Result<(usize, usize)> {
    if x.shape() != out.shape() {
        return Err(Error::ShapeMismatch { op });
    }
    if x.shape().rank() < 2 {
        return Err(Error::InvalidArgument("input must be [N, C, ...]"));
    }
    check_eps(eps)?;
    Ok((x.shape().dim(0), x.shape().dim(1)))
}

/// Group norm of a `[N, C, …]` tensor: the `C` channels split into `num_groups`
/// equal groups, each (sample, group) normalized over its channels and all
/// trailing axes; then `weight[c]` and `bias[c]` (shape `[C]`) per channel.
///
/// Errors: `num_groups` of 0 or not dividing `C`, rank below 2, negative `eps`
/// ([`Error::InvalidArgument`]); a wrong `out` or parameter shape
/// ([`Error::ShapeMismatch`]).
pub fn group_norm(
    x: &TensorView<'_, f32>,
    num_groups: usize,
    affine: Affine<'_>,
    eps: f32,
    out: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    let (batch, channels) = check_channels_first(x, out, eps, "group_norm")?;
    if num_groups == 0 || !channels.is_multiple_of(num_groups) {
        return Err(Error::InvalidArgument(
            "num_groups must be positive and divide the channel count",
        ));
    }
    affine.check(&Shape::new(&[channels])?, "group_norm")?;
    let per_group = channels / num_groups;
    for n in 0..batch {
        for g in 0..num_groups {
            let members = g * per_group..(g + 1) * per_group;
            let group = channel_block(x.layout(), n, members.clone())?;
            let (mean, var) = moments(x.data(), group.offsets());
            for c in members {
                normalize_channel(x, out, (n, c), Normalizer::new(mean, var, eps), &affine)?;
            }
        }
    }
    Ok(())
}

/// Inference-mode batch norm of a `[N, C, …]` tensor with stored statistics:
/// `(x - running_mean[c]) / sqrt(running_var[c] + eps) * weight[c] + bias[c]`;
/// all four parameters have shape `[C]` (channel axis 1).
///
/// Errors: as [`group_norm`], and a statistic of the wrong shape
/// ([`Error::ShapeMismatch`]).
pub fn batch_norm(
    x: &TensorView<'_, f32>,
    running_mean: &TensorView<'_, f32>,
    running_var: &TensorView<'_, f32>,
    affine: Affine<'_>,
    eps: f32,
    out: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    let (batch, channels) = check_channels_first(x, out, eps, "batch_norm")?;
    // The statistics are per-channel parameters too: reuse the affine checks.
    let stats = Affine {
        weight: Some(*running_mean),
        bias: Some(*running_var),
    };
    let channel_shape = Shape::new(&[channels])?;
    stats.check(&channel_shape, "batch_norm")?;
    affine.check(&channel_shape, "batch_norm")?;
    for n in 0..batch {
        for c in 0..channels {
            let (mean, var) = stats.channel(c)?;
            normalize_channel(x, out, (n, c), Normalizer::new(mean, var, eps), &affine)?;
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
    fn layer_and_rms_norm_reject_bad_arguments() {
        let x = [1.0f32; 12];
        let xv = TensorView::new(&x, s(&[3, 4])).unwrap();
        let w = TensorView::new(&x[..3], s(&[3])).unwrap();
        let mut o = [0.0f32; 12];
        let mut ov = TensorViewMut::new(&mut o, s(&[3, 4])).unwrap();
        let wrong = Affine {
            weight: Some(w),
            bias: None,
        };
        assert_eq!(
            layer_norm(&xv, 1, wrong, 1e-5, &mut ov),
            Err(Error::ShapeMismatch { op: "layer_norm" })
        );
        assert!(matches!(
            layer_norm(&xv, 3, Affine::default(), 1e-5, &mut ov),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            layer_norm(&xv, 0, Affine::default(), 1e-5, &mut ov),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            layer_norm(&xv, 1, Affine::default(), -1.0, &mut ov),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(
            rms_norm(&xv, Some(w), 1e-5, &mut ov),
            Err(Error::ShapeMismatch { op: "rms_norm" })
        );
        let scalar = TensorView::new(&x, Shape::scalar()).unwrap();
        let mut so = [0.0f32; 1];
        let mut sv = TensorViewMut::new(&mut so, Shape::scalar()).unwrap();
        assert!(matches!(
            rms_norm(&scalar, None, 1e-5, &mut sv),
            Err(Error::InvalidArgument(_))
        ));
        let mut flat = TensorViewMut::new(&mut o, s(&[12])).unwrap();
        assert_eq!(
            rms_norm(&xv, None, 1e-5, &mut flat),
            Err(Error::ShapeMismatch { op: "rms_norm" })
        );
    }

    #[test]
    fn group_and_batch_norm_reject_bad_arguments() {
        let x = [1.0f32; 12];
        let xv = TensorView::new(&x, s(&[1, 6, 2])).unwrap();
        let mut o = [0.0f32; 12];
        let mut ov = TensorViewMut::new(&mut o, s(&[1, 6, 2])).unwrap();
        for groups in [0, 4] {
            assert!(matches!(
                group_norm(&xv, groups, Affine::default(), 1e-5, &mut ov),
                Err(Error::InvalidArgument(_))
            ));
        }
        let c5 = TensorView::new(&x[..5], s(&[5])).unwrap();
        let c6 = TensorView::new(&x[..6], s(&[6])).unwrap();
        let wrong = Affine {
            weight: None,
            bias: Some(c5),
        };
        assert_eq!(
            group_norm(&xv, 3, wrong, 1e-5, &mut ov),
            Err(Error::ShapeMismatch { op: "group_norm" })
        );
        assert_eq!(
            batch_norm(&xv, &c6, &c5, Affine::default(), 1e-5, &mut ov),
            Err(Error::ShapeMismatch { op: "batch_norm" })
        );
        let flat = TensorView::new(&x, s(&[12])).unwrap();
        let mut fo = TensorViewMut::new(&mut o, s(&[12])).unwrap();
        assert!(matches!(
            batch_norm(&flat, &c6, &c6, Affine::default(), 1e-5, &mut fo),
            Err(Error::InvalidArgument(_))
        ));
    }
}
