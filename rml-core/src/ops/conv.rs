//! Convolution: [`conv2d`], [`conv1d`], [`conv_transpose2d`] and [`conv_transpose1d`]
//! in f32, with `*_output_shape` helpers that validate every parameter before any
//! work is done.
//!
//! Layouts follow PyTorch: activations are `[N, C, H, W]` (`[N, C, L]` in 1-D),
//! convolution weights are `[C_out, C_in / groups, kH, kW]` and transposed-convolution
//! weights `[C_in, C_out / groups, kH, kW]`. With `groups = g` the channels split
//! into `g` independent slices; `groups == C_in` with one weight per channel is the
//! depthwise convolution. Each output element is accumulated in f32, starting from
//! the bias and adding taps in (input channel, kernel row, kernel column) order.
//! Views may have any strides; the output is written once per element.

use crate::error::{Error, Result};
use crate::ops::window::{Padding2d, dims4, ncl_as_nchw, ncl_as_nchw_mut, windows_2d};
use crate::shape::Shape;
use crate::view::{TensorView, TensorViewMut};

/// Parameters of a 2-D convolution. Pairs are `[height, width]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dParams {
    /// Step between output positions, per axis (at least 1).
    pub stride: [usize; 2],
    /// Zero padding on each side of the input.
    pub padding: Padding2d,
    /// Spacing between kernel taps, per axis (1 is a dense kernel).
    pub dilation: [usize; 2],
    /// Number of channel groups; input and output channels must divide by it.
    pub groups: usize,
}

impl Default for Conv2dParams {
    /// Stride 1, no padding, no dilation, one group.
    fn default() -> Self {
        Conv2dParams {
            stride: [1, 1],
            padding: Padding2d::ZERO,
            dilation: [1, 1],
            groups: 1,
        }
    }
}

/// Parameters of a 1-D convolution over `[N, C, L]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv1dParams {
    /// Step between output positions (at least 1).
    pub stride: usize,
    /// Zero padding `[before, after]` the sequence.
    pub padding: [usize; 2],
    /// Spacing between kernel taps (1 is a dense kernel).
    pub dilation: usize,
    /// Number of channel groups.
    pub groups: usize,
}

impl Default for Conv1dParams {
    /// Stride 1, no padding, no dilation, one group.
    fn default() -> Self {
        Conv1dParams {
            stride: 1,
            padding: [0, 0],
            dilation: 1,
            groups: 1,
        }
    }
}

impl Conv1dParams {
    /// The same convolution as a 2-D one over a height-1 image.
    fn as_2d(&self) -> Conv2dParams {
        Conv2dParams {
            stride: [1, self.stride],
            padding: Padding2d {
                top: 0,
                bottom: 0,
                left: self.padding[0],
                right: self.padding[1],
            },
            dilation: [1, self.dilation],
            groups: self.groups,
        }
    }
}

/// Parameters of a 2-D transposed convolution (the gradient of [`conv2d`] with
/// respect to its input, used for learned upsampling). Pairs are `[height, width]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTranspose2dParams {
    /// Stride of the forward convolution this one transposes.
    pub stride: [usize; 2],
    /// Padding of that forward convolution: removed from the output's edges.
    pub padding: Padding2d,
    /// Extra rows/columns added at the bottom/right of the output to pick among the
    /// sizes a strided forward convolution maps to the same input size; must be
    /// smaller than the stride or the dilation.
    pub output_padding: [usize; 2],
    /// Spacing between kernel taps.
    pub dilation: [usize; 2],
    /// Number of channel groups.
    pub groups: usize,
}

impl Default for ConvTranspose2dParams {
    /// Stride 1, no padding or output padding, no dilation, one group.
    fn default() -> Self {
        ConvTranspose2dParams {
            stride: [1, 1],
            padding: Padding2d::ZERO,
            output_padding: [0, 0],
            dilation: [1, 1],
            groups: 1,
        }
    }
}

/// Parameters of a 1-D transposed convolution over `[N, C, L]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTranspose1dParams {
    /// Stride of the forward convolution this one transposes.
    pub stride: usize,
    /// Padding `[before, after]` of that forward convolution, removed from the output.
    pub padding: [usize; 2],
    /// Extra elements appended to the output; smaller than the stride or dilation.
    pub output_padding: usize,
    /// Spacing between kernel taps.
    pub dilation: usize,
    /// Number of channel groups.
    pub groups: usize,
}

impl Default for ConvTranspose1dParams {
    /// Stride 1, no padding or output padding, no dilation, one group.
    fn default() -> Self {
        ConvTranspose1dParams {
            stride: 1,
            padding: [0, 0],
            output_padding: 0,
            dilation: 1,
            groups: 1,
        }
    }
}

impl ConvTranspose1dParams {
    /// The same transposed convolution as a 2-D one over a height-1 image.
    fn as_2d(&self) -> ConvTranspose2dParams {
        ConvTranspose2dParams {
            stride: [1, self.stride],
            padding: Padding2d {
                top: 0,
                bottom: 0,
                left: self.padding[0],
                right: self.padding[1],
            },
            output_padding: [0, self.output_padding],
            dilation: [1, self.dilation],
            groups: self.groups,
        }
    }
}

/// Checks a group count against the channel counts it must divide.
fn check_groups(groups: usize, c_in: usize, c_out: usize) -> Result<()> {
    if groups == 0 {
        return Err(Error::InvalidArgument("groups must be positive"));
    }
    if !c_in.is_multiple_of(groups) {
        return Err(Error::InvalidArgument(
            "input channels are not divisible by groups",
        ));
    }
    if !c_out.is_multiple_of(groups) {
        return Err(Error::InvalidArgument(
            "output channels are not divisible by groups",
        ));
    }
    Ok(())
}

/// The output shape `[N, C_out, H_out, W_out]` of [`conv2d`] for an input
/// `[N, C_in, H, W]` and weight `[C_out, C_in / groups, kH, kW]`, or an error for a
/// wrong rank, a weight whose channel count does not match, channels not divisible by
/// `groups`, a zero stride/dilation/kernel, or a kernel longer than the padded input.
pub fn conv2d_output_shape(input: &Shape, weight: &Shape, params: &Conv2dParams) -> Result<Shape> {
    let [n, c_in, h, w] = dims4(input, "conv2d input must have rank 4 [N, C, H, W]")?;
    let [c_out, c_in_per_group, kh, kw] = dims4(
        weight,
        "conv2d weight must have rank 4 [C_out, C_in/groups, kH, kW]",
    )?;
    check_groups(params.groups, c_in, c_out)?;
    if c_in_per_group != c_in / params.groups {
        return Err(Error::ShapeMismatch {
            op: "conv2d weight input channels (C_in / groups)",
        });
    }
    let [win_h, win_w] = windows_2d([kh, kw], params.stride, params.dilation, params.padding);
    Shape::new(&[
        n,
        c_out,
        win_h.output_len(h, false)?,
        win_w.output_len(w, false)?,
    ])
}

/// The output shape `[N, C_out, L_out]` of [`conv1d`] for an input `[N, C_in, L]` and
/// weight `[C_out, C_in / groups, K]`; errors as for [`conv2d_output_shape`].
pub fn conv1d_output_shape(input: &Shape, weight: &Shape, params: &Conv1dParams) -> Result<Shape> {
    let shape_2d = conv2d_output_shape(
        &ncl_as_nchw(input, "conv1d input must have rank 3 [N, C, L]")?,
        &ncl_as_nchw(
            weight,
            "conv1d weight must have rank 3 [C_out, C_in/groups, K]",
        )?,
        &params.as_2d(),
    )?;
    shape_2d.without_axis(2)
}

/// The output shape `[N, C_out, H_out, W_out]` of [`conv_transpose2d`] for an input
/// `[N, C_in, H, W]` and weight `[C_in, C_out / groups, kH, kW]`, where
/// `H_out = (H - 1) * stride + dilation * (kH - 1) + 1 + output_padding - top - bottom`
/// (likewise for `W_out`). Errors for a wrong rank, mismatched channels, channels not
/// divisible by `groups`, a zero stride/dilation/kernel, an empty spatial input, an
/// `output_padding` not below the stride or dilation, and padding that removes the
/// whole output.
pub fn conv_transpose2d_output_shape(
    input: &Shape,
    weight: &Shape,
    params: &ConvTranspose2dParams,
) -> Result<Shape> {
    let [n, c_in, h, w] = dims4(
        input,
        "conv_transpose2d input must have rank 4 [N, C, H, W]",
    )?;
    let [w_c_in, c_out_per_group, kh, kw] = dims4(
        weight,
        "conv_transpose2d weight must have rank 4 [C_in, C_out/groups, kH, kW]",
    )?;
    if w_c_in != c_in {
        return Err(Error::ShapeMismatch {
            op: "conv_transpose2d weight input channels (C_in)",
        });
    }
    let c_out = c_out_per_group
        .checked_mul(params.groups)
        .ok_or(Error::Overflow)?;
    check_groups(params.groups, c_in, c_out)?;
    let [win_h, win_w] = windows_2d([kh, kw], params.stride, params.dilation, params.padding);
    Shape::new(&[
        n,
        c_out,
        win_h.transposed_output_len(h, params.output_padding[0])?,
        win_w.transposed_output_len(w, params.output_padding[1])?,
    ])
}

/// The output shape `[N, C_out, L_out]` of [`conv_transpose1d`] for an input
/// `[N, C_in, L]` and weight `[C_in, C_out / groups, K]`; errors as for
/// [`conv_transpose2d_output_shape`].
pub fn conv_transpose1d_output_shape(
    input: &Shape,
    weight: &Shape,
    params: &ConvTranspose1dParams,
) -> Result<Shape> {
    let shape_2d = conv_transpose2d_output_shape(
        &ncl_as_nchw(input, "conv_transpose1d input must have rank 3 [N, C, L]")?,
        &ncl_as_nchw(
            weight,
            "conv_transpose1d weight must have rank 3 [C_in, C_out/groups, K]",
        )?,
        &params.as_2d(),
    )?;
    shape_2d.without_axis(2)
}

/// 2-D convolution (cross-correlation, as in every framework):
/// `out[n, co, oh, ow] = bias[co] + Σ input[n, ci, ih, iw] * weight[co, ci', kh, kw]`
/// over the input channels `ci` of `co`'s group (`ci'` counting within the group)
/// and the kernel taps that land on the input (taps on padding add zero), where
/// `ih = oh * stride_h + kh * dilation_h - top` (likewise for `iw`).
///
/// `bias`, when given, has shape `[C_out]`; `output` must have the shape
/// [`conv2d_output_shape`] returns.
pub fn conv2d(
    input: &TensorView<'_, f32>,
    weight: &TensorView<'_, f32>,
    bias: Option<&TensorView<'_, f32>>,
    params: &Conv2dParams,
    output: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    let out_shape = conv2d_output_shape(input.shape(), weight.shape(), params)?;
    let [_, c_out, out_h, out_w] = dims4(&out_shape, "conv2d output must have rank 4")?;
    check_bias(bias, c_out, "conv2d bias must have shape [C_out]")?;
    if *output.shape() != out_shape {
        return Err(Error::ShapeMismatch {
            op: "conv2d output",
        });
    }
    let [n, _, h, w] = dims4(input.shape(), "conv2d input must have rank 4")?;
    let [_, c_in_per_group, kh, kw] = dims4(weight.shape(), "conv2d weight must have rank 4")?;
    let c_out_per_group = c_out / params.groups;
    let [win_h, win_w] = windows_2d([kh, kw], params.stride, params.dilation, params.padding);

    for b in 0..n {
        for co in 0..c_out {
            let group = co / c_out_per_group;
            let first_in_channel = group * c_in_per_group;
            let start = bias_at(bias, co)?;
            for oh in 0..out_h {
                for ow in 0..out_w {
                    let mut acc = start;
                    for ci in 0..c_in_per_group {
                        for ky in 0..kh {
                            let Some(ih) = win_h.input_index(oh, ky, h) else {
                                continue;
                            };
                            for kx in 0..kw {
                                let Some(iw) = win_w.input_index(ow, kx, w) else {
                                    continue;
                                };
                                let x = input.get(&[b, first_in_channel + ci, ih, iw])?;
                                acc += x * weight.get(&[co, ci, ky, kx])?;
                            }
                        }
                    }
                    output.set(&[b, co, oh, ow], acc)?;
                }
            }
        }
    }
    Ok(())
}

/// 1-D convolution over `[N, C_in, L]` with weight `[C_out, C_in / groups, K]` and
/// optional bias `[C_out]`: exactly [`conv2d`] on a height-1 image.
pub fn conv1d(
    input: &TensorView<'_, f32>,
    weight: &TensorView<'_, f32>,
    bias: Option<&TensorView<'_, f32>>,
    params: &Conv1dParams,
    output: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    let expected = conv1d_output_shape(input.shape(), weight.shape(), params)?;
    if *output.shape() != expected {
        return Err(Error::ShapeMismatch {
            op: "conv1d output",
        });
    }
    conv2d(
        &input.unsqueeze(2)?,
        &weight.unsqueeze(2)?,
        bias,
        &params.as_2d(),
        &mut ncl_as_nchw_mut(output)?,
    )
}

/// 2-D transposed convolution (PyTorch `conv_transpose2d`): every input element
/// `input[n, ci, ih, iw]` spreads `input * weight[ci, co', ky, kx]` onto output
/// position `(ih * stride_h + ky * dilation_h - top, iw * stride_w + kx * dilation_w - left)`
/// of each output channel `co` in `ci`'s group; positions cut by padding are dropped
/// and `bias[co]` is added everywhere.
///
/// Written here in gather form: each output element sums the (input, tap) pairs that
/// land on it, so it is written once and accumulates like [`conv2d`].
pub fn conv_transpose2d(
    input: &TensorView<'_, f32>,
    weight: &TensorView<'_, f32>,
    bias: Option<&TensorView<'_, f32>>,
    params: &ConvTranspose2dParams,
    output: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    let out_shape = conv_transpose2d_output_shape(input.shape(), weight.shape(), params)?;
    let [_, c_out, out_h, out_w] = dims4(&out_shape, "conv_transpose2d output must have rank 4")?;
    check_bias(bias, c_out, "conv_transpose2d bias must have shape [C_out]")?;
    if *output.shape() != out_shape {
        return Err(Error::ShapeMismatch {
            op: "conv_transpose2d output",
        });
    }
    let [n, c_in, h, w] = dims4(input.shape(), "conv_transpose2d input must have rank 4")?;
    let [_, c_out_per_group, kh, kw] =
        dims4(weight.shape(), "conv_transpose2d weight must have rank 4")?;
    let c_in_per_group = c_in / params.groups;
    let [win_h, win_w] = windows_2d([kh, kw], params.stride, params.dilation, params.padding);

    for b in 0..n {
        for co in 0..c_out {
            let group = co / c_out_per_group;
            let co_in_group = co % c_out_per_group;
            let start = bias_at(bias, co)?;
            for oh in 0..out_h {
                for ow in 0..out_w {
                    let mut acc = start;
                    for ci in group * c_in_per_group..(group + 1) * c_in_per_group {
                        for ky in 0..kh {
                            let Some(ih) = win_h.transposed_input_index(oh, ky, h) else {
                                continue;
                            };
                            for kx in 0..kw {
                                let Some(iw) = win_w.transposed_input_index(ow, kx, w) else {
                                    continue;
                                };
                                let x = input.get(&[b, ci, ih, iw])?;
                                acc += x * weight.get(&[ci, co_in_group, ky, kx])?;
                            }
                        }
                    }
                    output.set(&[b, co, oh, ow], acc)?;
                }
            }
        }
    }
    Ok(())
}

/// 1-D transposed convolution over `[N, C_in, L]` with weight
/// `[C_in, C_out / groups, K]` and optional bias `[C_out]`: exactly
/// [`conv_transpose2d`] on a height-1 image.
pub fn conv_transpose1d(
    input: &TensorView<'_, f32>,
    weight: &TensorView<'_, f32>,
    bias: Option<&TensorView<'_, f32>>,
    params: &ConvTranspose1dParams,
    output: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    let expected = conv_transpose1d_output_shape(input.shape(), weight.shape(), params)?;
    if *output.shape() != expected {
        return Err(Error::ShapeMismatch {
            op: "conv_transpose1d output",
        });
    }
    conv_transpose2d(
        &input.unsqueeze(2)?,
        &weight.unsqueeze(2)?,
        bias,
        &params.as_2d(),
        &mut ncl_as_nchw_mut(output)?,
    )
}

/// Checks that an optional bias has shape `[c_out]`.
fn check_bias(bias: Option<&TensorView<'_, f32>>, c_out: usize, what: &'static str) -> Result<()> {
    match bias {
        Some(b) if b.shape().dims() != [c_out] => Err(Error::InvalidArgument(what)),
        _ => Ok(()),
    }
}

/// The bias of output channel `co`, or 0 without a bias.
fn bias_at(bias: Option<&TensorView<'_, f32>>, co: usize) -> Result<f32> {
    bias.map_or(Ok(0.0), |b| b.get(&[co]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(d: &[usize]) -> Shape {
        Shape::new(d).unwrap()
    }

    #[test]
    fn hand_computed_3x3_with_padding_and_bias() {
        // Input 1..=9 in a 3x3 image, a 2x2 kernel of ones, padding 1 on top/left
        // only, bias 10: each output is 10 + the sum of the 2x2 block ending at
        // (oh, ow) of the input (rows/columns before 0 are zero).
        let x: [f32; 9] = core::array::from_fn(|i| (i + 1) as f32);
        let k = [1.0f32; 4];
        let bias = [10.0f32];
        let params = Conv2dParams {
            padding: Padding2d {
                top: 1,
                bottom: 0,
                left: 1,
                right: 0,
            },
            ..Conv2dParams::default()
        };
        let mut out = [0.0f32; 9];
        let xv = TensorView::new(&x, s(&[1, 1, 3, 3])).unwrap();
        let kv = TensorView::new(&k, s(&[1, 1, 2, 2])).unwrap();
        let bv = TensorView::new(&bias, s(&[1])).unwrap();
        let mut ov = TensorViewMut::new(&mut out, s(&[1, 1, 3, 3])).unwrap();
        conv2d(&xv, &kv, Some(&bv), &params, &mut ov).unwrap();
        assert_eq!(out, [11.0, 13.0, 15.0, 15.0, 22.0, 26.0, 21.0, 34.0, 38.0]);
    }

    #[test]
    fn transpose_of_stride_2_spreads_inputs() {
        // One input channel [1, 2] (1x2 image), kernel [1, 10] (1x2), stride 2: the
        // output row is [1*1, 1*10, 2*1, 2*10] and output_padding 1 appends a zero.
        let x = [1.0f32, 2.0];
        let k = [1.0f32, 10.0];
        let params = ConvTranspose2dParams {
            stride: [1, 2],
            output_padding: [0, 1],
            ..ConvTranspose2dParams::default()
        };
        let xv = TensorView::new(&x, s(&[1, 1, 1, 2])).unwrap();
        let kv = TensorView::new(&k, s(&[1, 1, 1, 2])).unwrap();
        assert_eq!(
            conv_transpose2d_output_shape(xv.shape(), kv.shape(), &params),
            Ok(s(&[1, 1, 1, 5]))
        );
        let mut out = [f32::NAN; 5];
        let mut ov = TensorViewMut::new(&mut out, s(&[1, 1, 1, 5])).unwrap();
        conv_transpose2d(&xv, &kv, None, &params, &mut ov).unwrap();
        assert_eq!(out, [1.0, 10.0, 2.0, 20.0, 0.0]);
    }

    #[test]
    fn conv1d_writes_through_a_strided_output() {
        // Kernel [-1, 1] is a forward difference; the output is written into every
        // other element of a 6-element buffer (a column of a [3, 2] matrix).
        let x = [1.0f32, 4.0, 9.0, 16.0];
        let k = [-1.0f32, 1.0];
        let xv = TensorView::new(&x, s(&[1, 1, 4])).unwrap();
        let kv = TensorView::new(&k, s(&[1, 1, 2])).unwrap();
        let mut out = [0.0f32; 6];
        let ov = TensorViewMut::new(&mut out, s(&[1, 3, 2])).unwrap();
        let mut ov = ov.slice(2, 0, 1, 1).unwrap().transpose(1, 2).unwrap();
        conv1d(&xv, &kv, None, &Conv1dParams::default(), &mut ov).unwrap();
        assert_eq!(out, [3.0, 0.0, 5.0, 0.0, 7.0, 0.0]);
    }

    #[test]
    fn invalid_parameters_are_errors() {
        let input = s(&[1, 4, 5, 5]);
        let weight = s(&[6, 2, 3, 3]);
        let ok = Conv2dParams {
            groups: 2,
            ..Conv2dParams::default()
        };
        assert_eq!(
            conv2d_output_shape(&input, &weight, &ok),
            Ok(s(&[1, 6, 3, 3]))
        );
        let bad = |p: Conv2dParams| conv2d_output_shape(&input, &weight, &p);
        assert_eq!(
            bad(Conv2dParams { groups: 0, ..ok }),
            Err(Error::InvalidArgument("groups must be positive"))
        );
        assert_eq!(
            bad(Conv2dParams { groups: 3, ..ok }),
            Err(Error::InvalidArgument(
                "input channels are not divisible by groups"
            ))
        );
        assert_eq!(
            conv2d_output_shape(
                &s(&[1, 4, 5, 5]),
                &s(&[5, 1, 3, 3]),
                &Conv2dParams { groups: 4, ..ok }
            ),
            Err(Error::InvalidArgument(
                "output channels are not divisible by groups"
            ))
        );
        assert_eq!(
            bad(Conv2dParams { groups: 1, ..ok }),
            Err(Error::ShapeMismatch {
                op: "conv2d weight input channels (C_in / groups)"
            })
        );
        assert_eq!(
            bad(Conv2dParams {
                stride: [1, 0],
                ..ok
            }),
            Err(Error::InvalidArgument("stride must be positive"))
        );
        assert_eq!(
            bad(Conv2dParams {
                dilation: [0, 1],
                ..ok
            }),
            Err(Error::InvalidArgument("dilation must be positive"))
        );
        assert_eq!(
            bad(Conv2dParams {
                dilation: [3, 1],
                ..ok
            }),
            Err(Error::InvalidArgument(
                "kernel (with dilation) is larger than the padded input"
            ))
        );
        assert!(
            conv2d_output_shape(&input, &s(&[6, 2, 0, 3]), &ok).is_err(),
            "zero kernel"
        );
        assert!(conv2d_output_shape(&s(&[4, 5, 5]), &weight, &ok).is_err());
        assert!(conv2d_output_shape(&input, &s(&[6, 2, 3]), &ok).is_err());
        assert!(conv1d_output_shape(&input, &weight, &Conv1dParams::default()).is_err());
        assert_eq!(
            conv1d_output_shape(
                &s(&[2, 3, 7]),
                &s(&[4, 3, 3]),
                &Conv1dParams {
                    stride: 2,
                    ..Conv1dParams::default()
                }
            ),
            Ok(s(&[2, 4, 3]))
        );
    }

    #[test]
    fn transposed_shape_errors() {
        let p = ConvTranspose2dParams::default();
        let input = s(&[1, 4, 3, 3]);
        assert_eq!(
            conv_transpose2d_output_shape(&input, &s(&[4, 3, 2, 2]), &p),
            Ok(s(&[1, 3, 4, 4]))
        );
        assert!(matches!(
            conv_transpose2d_output_shape(&input, &s(&[3, 3, 2, 2]), &p),
            Err(Error::ShapeMismatch { .. })
        ));
        assert!(
            conv_transpose2d_output_shape(
                &input,
                &s(&[4, 3, 2, 2]),
                &ConvTranspose2dParams { groups: 3, ..p }
            )
            .is_err()
        );
        assert_eq!(
            conv_transpose2d_output_shape(
                &input,
                &s(&[4, 3, 2, 2]),
                &ConvTranspose2dParams {
                    output_padding: [1, 0],
                    ..p
                }
            ),
            Err(Error::InvalidArgument(
                "output_padding must be smaller than the stride or the dilation"
            ))
        );
        assert!(
            conv_transpose2d_output_shape(
                &input,
                &s(&[4, 3, 1, 1]),
                &ConvTranspose2dParams {
                    padding: Padding2d::symmetric(2, 0),
                    ..p
                }
            )
            .is_err()
        );
        assert!(conv_transpose2d_output_shape(&s(&[1, 4, 0, 3]), &s(&[4, 3, 1, 1]), &p).is_err());
        assert!(conv_transpose2d_output_shape(&s(&[1, 4, 3]), &s(&[4, 3, 1, 1]), &p).is_err());
        assert_eq!(
            conv_transpose2d_output_shape(
                &input,
                &s(&[4, usize::MAX, 1, 1]),
                &ConvTranspose2dParams { groups: 2, ..p }
            ),
            Err(Error::Overflow)
        );
        let p1 = ConvTranspose1dParams {
            stride: 2,
            output_padding: 1,
            ..ConvTranspose1dParams::default()
        };
        assert_eq!(
            conv_transpose1d_output_shape(&s(&[1, 4, 5]), &s(&[4, 2, 3]), &p1),
            Ok(s(&[1, 2, 12]))
        );
        assert!(conv_transpose1d_output_shape(&input, &s(&[4, 2, 3]), &p1).is_err());
    }

    #[test]
    fn wrong_bias_or_output_shapes_are_errors() {
        let x = [0.0f32; 16];
        let k = [0.0f32; 9];
        let b = [0.0f32; 2];
        let xv = TensorView::new(&x, s(&[1, 1, 4, 4])).unwrap();
        let kv = TensorView::new(&k, s(&[1, 1, 3, 3])).unwrap();
        let bv = TensorView::new(&b, s(&[2])).unwrap();
        let p = Conv2dParams::default();
        let mut out = [0.0f32; 9];
        let mut ov = TensorViewMut::new(&mut out, s(&[1, 1, 2, 2])).unwrap();
        assert_eq!(
            conv2d(&xv, &kv, Some(&bv), &p, &mut ov),
            Err(Error::InvalidArgument(
                "conv2d bias must have shape [C_out]"
            ))
        );
        assert_eq!(
            conv2d(&xv, &kv, None, &p, &mut ov),
            Ok(()),
            "[1, 1, 2, 2] is the right output shape"
        );
        let mut ov = TensorViewMut::new(&mut out, s(&[1, 1, 3, 3])).unwrap();
        assert_eq!(
            conv2d(&xv, &kv, None, &p, &mut ov),
            Err(Error::ShapeMismatch {
                op: "conv2d output"
            })
        );
        let ct = ConvTranspose2dParams::default();
        assert!(conv_transpose2d(&xv, &kv, Some(&bv), &ct, &mut ov).is_err());
        assert!(conv_transpose2d(&xv, &kv, None, &ct, &mut ov).is_err());
        let x1 = [0.0f32; 4];
        let x1v = TensorView::new(&x1, s(&[1, 1, 4])).unwrap();
        let k1v = TensorView::new(&k[..3], s(&[1, 1, 3])).unwrap();
        let mut o1 = TensorViewMut::new(&mut out, s(&[1, 1, 3])).unwrap();
        assert_eq!(
            conv1d(&x1v, &k1v, None, &Conv1dParams::default(), &mut o1),
            Err(Error::ShapeMismatch {
                op: "conv1d output"
            })
        );
        let ct1 = ConvTranspose1dParams::default();
        assert_eq!(
            conv_transpose1d(&x1v, &k1v, None, &ct1, &mut o1),
            Err(Error::ShapeMismatch {
                op: "conv_transpose1d output"
            })
        );
        let mut o1 = TensorViewMut::new(&mut out, s(&[1, 1, 6])).unwrap();
        assert_eq!(conv_transpose1d(&x1v, &k1v, None, &ct1, &mut o1), Ok(()));
    }
}
