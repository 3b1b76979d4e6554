//! Pooling over `[N, C, H, W]` (and `[N, C, L]`) in f32: [`max_pool2d`],
//! [`avg_pool2d`], their 1-D forms, and the global pools.
//!
//! Windows follow PyTorch: kernel, stride, per-side padding, dilation and
//! `ceil_mode` (which adds a last, partial window when the input does not divide
//! evenly, unless that window would start in the end padding). Max pooling treats
//! padding as -∞ and propagates NaN; average pooling treats padding as 0 and divides
//! by the taps on real input, or — with `count_include_pad` — by the taps on input
//! or padding (taps past the padding, which only `ceil_mode` creates, never count).
//! A window made only of padding is rejected when the output shape is computed.

use crate::error::{Error, Result};
use crate::ops::window::{AxisWindow, Padding2d, dims4, ncl_as_nchw, ncl_as_nchw_mut, windows_2d};
use crate::shape::Shape;
use crate::view::{TensorView, TensorViewMut};

/// Parameters of a 2-D pooling window. Pairs are `[height, width]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool2dParams {
    /// Window size per axis.
    pub kernel: [usize; 2],
    /// Step between windows per axis (PyTorch's default is the kernel size).
    pub stride: [usize; 2],
    /// Padding on each side of the input.
    pub padding: Padding2d,
    /// Spacing between taps per axis (1 is a dense window).
    pub dilation: [usize; 2],
    /// Round the window count up instead of down.
    pub ceil_mode: bool,
}

impl Pool2dParams {
    /// A `kernel` window stepping by its own size, unpadded, dense, floor mode
    /// (PyTorch's defaults).
    pub const fn new(kernel: [usize; 2]) -> Pool2dParams {
        Pool2dParams {
            kernel,
            stride: kernel,
            padding: Padding2d::ZERO,
            dilation: [1, 1],
            ceil_mode: false,
        }
    }

    fn windows(&self) -> [AxisWindow; 2] {
        windows_2d(self.kernel, self.stride, self.dilation, self.padding)
    }
}

/// Parameters of a 1-D pooling window over `[N, C, L]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool1dParams {
    /// Window size.
    pub kernel: usize,
    /// Step between windows.
    pub stride: usize,
    /// Padding `[before, after]` the sequence.
    pub padding: [usize; 2],
    /// Spacing between taps.
    pub dilation: usize,
    /// Round the window count up instead of down.
    pub ceil_mode: bool,
}

impl Pool1dParams {
    /// A `kernel` window stepping by its own size, unpadded, dense, floor mode.
    pub const fn new(kernel: usize) -> Pool1dParams {
        Pool1dParams {
            kernel,
            stride: kernel,
            padding: [0, 0],
            dilation: 1,
            ceil_mode: false,
        }
    }

    /// The same pooling as a 2-D one over a height-1 image.
    fn as_2d(&self) -> Pool2dParams {
        Pool2dParams {
            kernel: [1, self.kernel],
            stride: [1, self.stride],
            padding: Padding2d {
                top: 0,
                bottom: 0,
                left: self.padding[0],
                right: self.padding[1],
            },
            dilation: [1, self.dilation],
            ceil_mode: self.ceil_mode,
        }
    }
}

/// The output shape `[N, C, H_out, W_out]` of a 2-D pooling of `input`
/// (`[N, C, H, W]`). Errors for a wrong rank, a zero kernel/stride/dilation, a
/// window longer than the padded input, or a window that covers only padding.
pub fn pool2d_output_shape(input: &Shape, params: &Pool2dParams) -> Result<Shape> {
    let [n, c, h, w] = dims4(input, "pooling input must have rank 4 [N, C, H, W]")?;
    let [win_h, win_w] = params.windows();
    let out_h = win_h.output_len(h, params.ceil_mode)?;
    let out_w = win_w.output_len(w, params.ceil_mode)?;
    if !win_h.every_window_touches_input(h, out_h) || !win_w.every_window_touches_input(w, out_w) {
        return Err(Error::InvalidArgument(
            "a pooling window lies entirely in the padding",
        ));
    }
    Shape::new(&[n, c, out_h, out_w])
}

/// The output shape `[N, C, L_out]` of a 1-D pooling of `input` (`[N, C, L]`).
pub fn pool1d_output_shape(input: &Shape, params: &Pool1dParams) -> Result<Shape> {
    let as_image = ncl_as_nchw(input, "1-D pooling input must have rank 3 [N, C, L]")?;
    pool2d_output_shape(&as_image, &params.as_2d())?.without_axis(2)
}

/// 2-D max pooling: each output is the largest input under its window (padding is
/// -∞; a NaN under the window makes the output NaN).
pub fn max_pool2d(
    input: &TensorView<'_, f32>,
    params: &Pool2dParams,
    output: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    pool2d(input, params, Reduction::Max, output)
}

/// 2-D average pooling: each output is the sum of the inputs under its window
/// divided by the number of taps on real input, or — when `count_include_pad` is
/// set — on input or padding.
pub fn avg_pool2d(
    input: &TensorView<'_, f32>,
    params: &Pool2dParams,
    count_include_pad: bool,
    output: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    pool2d(input, params, Reduction::Mean { count_include_pad }, output)
}

/// 1-D max pooling over `[N, C, L]`: [`max_pool2d`] on a height-1 image.
pub fn max_pool1d(
    input: &TensorView<'_, f32>,
    params: &Pool1dParams,
    output: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    check_pool1d_shapes(input, params, output)?;
    max_pool2d(
        &input.unsqueeze(2)?,
        &params.as_2d(),
        &mut ncl_as_nchw_mut(output)?,
    )
}

/// 1-D average pooling over `[N, C, L]`: [`avg_pool2d`] on a height-1 image.
pub fn avg_pool1d(
    input: &TensorView<'_, f32>,
    params: &Pool1dParams,
    count_include_pad: bool,
    output: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    check_pool1d_shapes(input, params, output)?;
    avg_pool2d(
        &input.unsqueeze(2)?,
        &params.as_2d(),
        count_include_pad,
        &mut ncl_as_nchw_mut(output)?,
    )
}

/// Global average pooling: `[N, C, H, W]` → `[N, C, 1, 1]`, the mean of each
/// channel's image (summed in f32 in row-major order, then divided by `H * W`).
pub fn global_avg_pool2d(
    input: &TensorView<'_, f32>,
    output: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    let [_, _, h, w] = dims4(input.shape(), "pooling input must have rank 4 [N, C, H, W]")?;
    global_pool2d(input, output, |image| image.sum::<f32>() / (h * w) as f32)
}

/// Global max pooling: `[N, C, H, W]` → `[N, C, 1, 1]`, the largest value of each
/// channel's image (NaN if the image holds one).
pub fn global_max_pool2d(
    input: &TensorView<'_, f32>,
    output: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    global_pool2d(input, output, |image| {
        image.fold(f32::NEG_INFINITY, max_propagating_nan)
    })
}

/// What a pooling window computes.
#[derive(Clone, Copy)]
enum Reduction {
    /// The largest tap.
    Max,
    /// The mean of the taps, with the divisor rule of `count_include_pad`.
    Mean { count_include_pad: bool },
}

/// The shared pooling loop: for each output `(n, c, oh, ow)`, visit the taps of its
/// window that land on the input (taps on padding are skipped) and store their
/// maximum or mean.
fn pool2d(
    input: &TensorView<'_, f32>,
    params: &Pool2dParams,
    reduction: Reduction,
    output: &mut TensorViewMut<'_, f32>,
) -> Result<()> {
    let out_shape = pool2d_output_shape(input.shape(), params)?;
    if *output.shape() != out_shape {
        return Err(Error::ShapeMismatch {
            op: "pooling output",
        });
    }
    let [n, c, h, w] = dims4(input.shape(), "pooling input must have rank 4")?;
    let [_, _, out_h, out_w] = dims4(&out_shape, "pooling output must have rank 4")?;
    let [win_h, win_w] = params.windows();
    for b in 0..n {
        for ch in 0..c {
            for oh in 0..out_h {
                for ow in 0..out_w {
                    let (mut max, mut sum, mut on_input) = (f32::NEG_INFINITY, 0.0f32, 0usize);
                    for ky in 0..win_h.kernel {
                        let Some(ih) = win_h.input_index(oh, ky, h) else {
                            continue;
                        };
                        for kx in 0..win_w.kernel {
                            let Some(iw) = win_w.input_index(ow, kx, w) else {
                                continue;
                            };
                            let x = input.get(&[b, ch, ih, iw])?;
                            max = max_propagating_nan(max, x);
                            sum += x;
                            on_input += 1;
                        }
                    }
                    let value = match reduction {
                        Reduction::Max => max,
                        Reduction::Mean { count_include_pad } => {
                            let divisor = if count_include_pad {
                                taps_inside_padding(&win_h, oh, h)
                                    * taps_inside_padding(&win_w, ow, w)
                            } else {
                                on_input
                            };
                            sum / divisor as f32
                        }
                    };
                    output.set(&[b, ch, oh, ow], value)?;
                }
            }
        }
    }
    Ok(())
}

/// The larger of `a` and `b`, or NaN when either is NaN (PyTorch's max-pool rule).
fn max_propagating_nan(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if b > a {
        b
    } else {
        a
    }
}

/// How many taps of window position `out` lie on the input or its padding (not past
/// the end padding, where only `ceil_mode` windows reach): `count_include_pad`'s
/// divisor along one axis.
fn taps_inside_padding(window: &AxisWindow, out: usize, input_len: usize) -> usize {
    let padded_len = input_len + window.pad_begin + window.pad_end;
    (0..window.kernel)
        .filter(|&k| out * window.stride + k * window.dilation < padded_len)
        .count()
}

/// Runs `reduce` over every `(n, c)` image of `input`, writing `[N, C, 1, 1]`.
fn global_pool2d(
    input: &TensorView<'_, f32>,
    output: &mut TensorViewMut<'_, f32>,
    reduce: impl Fn(&mut dyn Iterator<Item = f32>) -> f32,
) -> Result<()> {
    let [n, c, h, w] = dims4(input.shape(), "pooling input must have rank 4 [N, C, H, W]")?;
    if h == 0 || w == 0 {
        return Err(Error::InvalidArgument(
            "global pooling needs a non-empty image",
        ));
    }
    if output.shape().dims() != [n, c, 1, 1] {
        return Err(Error::ShapeMismatch {
            op: "global pooling output must be [N, C, 1, 1]",
        });
    }
    for b in 0..n {
        for ch in 0..c {
            let image = input.slice(0, b, b + 1, 1)?.slice(1, ch, ch + 1, 1)?;
            let value = reduce(&mut image.iter());
            output.set(&[b, ch, 0, 0], value)?;
        }
    }
    Ok(())
}

/// Checks the ranks and output shape of a 1-D pooling before it runs as 2-D, so
/// errors name the 1-D shapes.
fn check_pool1d_shapes(
    input: &TensorView<'_, f32>,
    params: &Pool1dParams,
    output: &TensorViewMut<'_, f32>,
) -> Result<()> {
    if *output.shape() != pool1d_output_shape(input.shape(), params)? {
        return Err(Error::ShapeMismatch {
            op: "pooling output",
        });
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
    fn max_and_avg_by_hand() {
        // 1..=16 in a 4x4 image, 2x2 windows, stride 2: maxima are the bottom-right
        // corners, means the block centres.
        let x: [f32; 16] = core::array::from_fn(|i| (i + 1) as f32);
        let xv = TensorView::new(&x, s(&[1, 1, 4, 4])).unwrap();
        let p = Pool2dParams::new([2, 2]);
        let mut out = [0.0f32; 4];
        max_pool2d(
            &xv,
            &p,
            &mut TensorViewMut::new(&mut out, s(&[1, 1, 2, 2])).unwrap(),
        )
        .unwrap();
        assert_eq!(out, [6.0, 8.0, 14.0, 16.0]);
        avg_pool2d(
            &xv,
            &p,
            false,
            &mut TensorViewMut::new(&mut out, s(&[1, 1, 2, 2])).unwrap(),
        )
        .unwrap();
        assert_eq!(out, [3.5, 5.5, 11.5, 13.5]);
    }

    #[test]
    fn count_include_pad_and_ceil_mode_divisors() {
        // Row [1, 2, 3], kernel 2, stride 2, pad 1/1 and ceil mode: padded
        // [p, 1, 2, 3, p] gives windows {p, 1}, {2, 3}; a third at padded 4 would
        // start in the end padding and is dropped.
        let x = [1.0f32, 2.0, 3.0];
        let xv = TensorView::new(&x, s(&[1, 1, 3])).unwrap();
        let p = Pool1dParams {
            padding: [1, 1],
            ceil_mode: true,
            ..Pool1dParams::new(2)
        };
        assert_eq!(pool1d_output_shape(xv.shape(), &p), Ok(s(&[1, 1, 2])));
        let mut out = [0.0f32; 2];
        avg_pool1d(
            &xv,
            &p,
            true,
            &mut TensorViewMut::new(&mut out, s(&[1, 1, 2])).unwrap(),
        )
        .unwrap();
        assert_eq!(out, [0.5, 2.5]);
        avg_pool1d(
            &xv,
            &p,
            false,
            &mut TensorViewMut::new(&mut out, s(&[1, 1, 2])).unwrap(),
        )
        .unwrap();
        assert_eq!(out, [1.0, 2.5]);
        // Row [1, 2, 3, 4, 5], kernel 2, stride 2, ceil: the last window {5, past-end}
        // has one tap on input and one past the (zero) padding: divisor 1 either way.
        let x = [1.0f32, 2.0, 3.0, 4.0, 5.0];
        let xv = TensorView::new(&x, s(&[1, 1, 5])).unwrap();
        let p = Pool1dParams {
            ceil_mode: true,
            ..Pool1dParams::new(2)
        };
        let mut out = [0.0f32; 3];
        avg_pool1d(
            &xv,
            &p,
            true,
            &mut TensorViewMut::new(&mut out, s(&[1, 1, 3])).unwrap(),
        )
        .unwrap();
        assert_eq!(out, [1.5, 3.5, 5.0]);
        max_pool1d(
            &xv,
            &p,
            &mut TensorViewMut::new(&mut out, s(&[1, 1, 3])).unwrap(),
        )
        .unwrap();
        assert_eq!(out, [2.0, 4.0, 5.0]);
    }

    #[test]
    fn nan_propagates_through_max() {
        let x = [1.0f32, f32::NAN, 3.0, 0.0];
        let xv = TensorView::new(&x, s(&[1, 1, 2, 2])).unwrap();
        let mut out = [0.0f32; 1];
        max_pool2d(
            &xv,
            &Pool2dParams::new([2, 2]),
            &mut TensorViewMut::new(&mut out, s(&[1, 1, 1, 1])).unwrap(),
        )
        .unwrap();
        assert!(out[0].is_nan());
        global_max_pool2d(
            &xv,
            &mut TensorViewMut::new(&mut out, s(&[1, 1, 1, 1])).unwrap(),
        )
        .unwrap();
        assert!(out[0].is_nan());
        let y = [1.0f32, -2.0, 3.0, 0.0];
        let yv = TensorView::new(&y, s(&[1, 1, 2, 2])).unwrap();
        global_max_pool2d(
            &yv,
            &mut TensorViewMut::new(&mut out, s(&[1, 1, 1, 1])).unwrap(),
        )
        .unwrap();
        assert_eq!(out, [3.0]);
        global_avg_pool2d(
            &yv,
            &mut TensorViewMut::new(&mut out, s(&[1, 1, 1, 1])).unwrap(),
        )
        .unwrap();
        assert_eq!(out, [0.5]);
    }

    #[test]
    fn invalid_pooling_is_an_error() {
        let input = s(&[1, 1, 3, 3]);
        let all_padding = Pool2dParams {
            stride: [1, 1],
            padding: Padding2d::symmetric(1, 1),
            ..Pool2dParams::new([1, 1])
        };
        assert_eq!(
            pool2d_output_shape(&input, &all_padding),
            Err(Error::InvalidArgument(
                "a pooling window lies entirely in the padding"
            ))
        );
        assert!(pool2d_output_shape(&input, &Pool2dParams::new([4, 1])).is_err());
        assert!(pool2d_output_shape(&input, &Pool2dParams::new([0, 1])).is_err());
        let zero_stride = Pool2dParams {
            stride: [0, 1],
            ..Pool2dParams::new([1, 1])
        };
        assert_eq!(
            pool2d_output_shape(&input, &zero_stride),
            Err(Error::InvalidArgument("stride must be positive"))
        );
        assert!(pool2d_output_shape(&s(&[1, 3, 3]), &Pool2dParams::new([1, 1])).is_err());
        assert!(pool1d_output_shape(&input, &Pool1dParams::new(1)).is_err());

        let x = [0.0f32; 9];
        let xv = TensorView::new(&x, input).unwrap();
        let mut out = [0.0f32; 9];
        let mut wrong = TensorViewMut::new(&mut out, s(&[1, 1, 2, 2])).unwrap();
        let p = Pool2dParams::new([2, 2]);
        let mismatch = Err(Error::ShapeMismatch {
            op: "pooling output",
        });
        assert_eq!(max_pool2d(&xv, &p, &mut wrong), mismatch);
        assert_eq!(avg_pool2d(&xv, &p, true, &mut wrong), mismatch);
        assert!(global_avg_pool2d(&xv, &mut wrong).is_err());
        let empty = TensorView::new(&x, s(&[1, 1, 0, 3])).unwrap();
        let mut one = TensorViewMut::new(&mut out, s(&[1, 1, 1, 1])).unwrap();
        assert!(global_max_pool2d(&empty, &mut one).is_err());
        let x1 = TensorView::new(&x, s(&[1, 1, 9])).unwrap();
        let mut o1 = TensorViewMut::new(&mut out, s(&[1, 1, 4])).unwrap();
        assert_eq!(max_pool1d(&x1, &Pool1dParams::new(3), &mut o1), mismatch);
        assert_eq!(
            avg_pool1d(&x1, &Pool1dParams::new(3), false, &mut o1),
            mismatch
        );
    }
}
