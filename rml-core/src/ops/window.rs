//! Sliding-window arithmetic shared by convolution and pooling.
//!
//! Along one spatial axis, a window of `kernel` taps spaced `dilation` apart slides
//! over the input in steps of `stride`, after the input has been padded with
//! `pad_begin` virtual elements in front and `pad_end` behind. Output position `o`,
//! tap `k` reads padded position `o * stride + k * dilation`, which is input element
//! `o * stride + k * dilation - pad_begin` when that lies inside the input and
//! padding otherwise. Conv and pooling both use [`AxisWindow`] so that the output
//! size formula and the tap arithmetic exist once; [`Padding2d`] names the four
//! sides of an image's padding for both.

use crate::error::{Error, Result};
use crate::shape::Shape;
use crate::view::TensorViewMut;

/// Padding on the four sides of an image, in elements. Sides are separate so that
/// the asymmetric "same" padding some frameworks export (one more row at the bottom
/// than at the top, say) is expressed exactly.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Padding2d {
    /// Rows added above the first row.
    pub top: usize,
    /// Rows added below the last row.
    pub bottom: usize,
    /// Columns added left of the first column.
    pub left: usize,
    /// Columns added right of the last column.
    pub right: usize,
}

impl Padding2d {
    /// No padding.
    pub const ZERO: Padding2d = Padding2d {
        top: 0,
        bottom: 0,
        left: 0,
        right: 0,
    };

    /// `h` rows above and below, `w` columns left and right (PyTorch's `padding=(h, w)`).
    pub const fn symmetric(h: usize, w: usize) -> Padding2d {
        Padding2d {
            top: h,
            bottom: h,
            left: w,
            right: w,
        }
    }
}

/// The windows sweeping the height and width axes for a 2-D kernel of
/// `kernel = [kh, kw]` with the given per-axis stride and dilation (`[h, w]` order).
pub fn windows_2d(
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    padding: Padding2d,
) -> [AxisWindow; 2] {
    [
        AxisWindow {
            kernel: kernel[0],
            stride: stride[0],
            dilation: dilation[0],
            pad_begin: padding.top,
            pad_end: padding.bottom,
        },
        AxisWindow {
            kernel: kernel[1],
            stride: stride[1],
            dilation: dilation[1],
            pad_begin: padding.left,
            pad_end: padding.right,
        },
    ]
}

/// `[N, C, L]` as the height-1 image shape `[N, C, 1, L]`, or `what` as an error when
/// the rank is not 3: 1-D convolution and pooling run as their 2-D forms this way.
pub(crate) fn ncl_as_nchw(shape: &Shape, what: &'static str) -> Result<Shape> {
    match *shape.dims() {
        [n, c, l] => Shape::new(&[n, c, 1, l]),
        _ => Err(Error::InvalidArgument(what)),
    }
}

/// A rank-3 `[N, C, L]` output view reborrowed as `[N, C, 1, L]`.
pub(crate) fn ncl_as_nchw_mut<'b, T: Copy>(
    output: &'b mut TensorViewMut<'_, T>,
) -> Result<TensorViewMut<'b, T>> {
    let layout = output.layout().unsqueeze(2)?;
    TensorViewMut::with_layout(output.data_mut(), layout)
}

/// The four axis sizes of an `[N, C, H, W]` shape, or an error naming `what` (for
/// example `"conv2d input must have rank 4"`) when the rank is not 4.
pub(crate) fn dims4(shape: &Shape, what: &'static str) -> Result<[usize; 4]> {
    match *shape.dims() {
        [a, b, c, d] => Ok([a, b, c, d]),
        _ => Err(Error::InvalidArgument(what)),
    }
}

/// How a window sweeps one spatial axis: kernel size, stride, dilation and the
/// (possibly asymmetric) padding on each side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisWindow {
    /// Number of taps in the window (at least 1).
    pub kernel: usize,
    /// Step between consecutive window positions (at least 1).
    pub stride: usize,
    /// Distance between consecutive taps (at least 1; 1 means dense).
    pub dilation: usize,
    /// Virtual elements added before the first input element.
    pub pad_begin: usize,
    /// Virtual elements added after the last input element.
    pub pad_end: usize,
}

impl AxisWindow {
    /// Distance from the first to the last tap plus one: `dilation * (kernel - 1) + 1`.
    /// Fails on a zero kernel, stride or dilation, since no window exists then.
    pub fn span(&self) -> Result<usize> {
        if self.kernel == 0 {
            return Err(Error::InvalidArgument("kernel size must be positive"));
        }
        if self.stride == 0 {
            return Err(Error::InvalidArgument("stride must be positive"));
        }
        if self.dilation == 0 {
            return Err(Error::InvalidArgument("dilation must be positive"));
        }
        self.dilation
            .checked_mul(self.kernel - 1)
            .and_then(|s| s.checked_add(1))
            .ok_or(Error::Overflow)
    }

    /// Length of the input once padded on both sides.
    pub fn padded_len(&self, input_len: usize) -> Result<usize> {
        input_len
            .checked_add(self.pad_begin)
            .and_then(|l| l.checked_add(self.pad_end))
            .ok_or(Error::Overflow)
    }

    /// Number of window positions over an input of `input_len` elements:
    /// `(padded - span) / stride + 1`, rounding the division down, or up when
    /// `ceil_mode` is set (pooling's `ceil_mode`). In ceil mode a last window that
    /// would start beyond the input and its front padding is dropped, as PyTorch does,
    /// so every window starts on real data or front padding.
    ///
    /// Fails when the window is longer than the padded input.
    pub fn output_len(&self, input_len: usize, ceil_mode: bool) -> Result<usize> {
        let span = self.span()?;
        let padded = self.padded_len(input_len)?;
        if span > padded {
            return Err(Error::InvalidArgument(
                "kernel (with dilation) is larger than the padded input",
            ));
        }
        let room = padded - span;
        let steps = if ceil_mode {
            room.div_ceil(self.stride)
        } else {
            room / self.stride
        };
        let last_start = steps.checked_mul(self.stride).ok_or(Error::Overflow)?;
        if ceil_mode && last_start >= input_len + self.pad_begin {
            return Ok(steps);
        }
        Ok(steps + 1)
    }

    /// The input element read by output position `out` at tap `tap`, or `None` when
    /// that tap falls in the padding (or past the padded end, in ceil mode).
    pub fn input_index(&self, out: usize, tap: usize, input_len: usize) -> Option<usize> {
        // Checked so that positions no validated window reaches answer `None`
        // rather than overflow.
        let padded_pos = out
            .checked_mul(self.stride)?
            .checked_add(tap.checked_mul(self.dilation)?)?;
        let index = padded_pos.checked_sub(self.pad_begin)?;
        (index < input_len).then_some(index)
    }

    /// True when every one of the `output_len` window positions reads at least one
    /// real input element. Pooling needs this: a window made only of padding has no
    /// maximum and no average.
    pub fn every_window_touches_input(&self, input_len: usize, output_len: usize) -> bool {
        (0..output_len)
            .all(|o| (0..self.kernel).any(|k| self.input_index(o, k, input_len).is_some()))
    }

    /// The input element that output position `out` of a *transposed* sweep receives
    /// through tap `tap`: the `i` with `i * stride + tap * dilation == out + pad_begin`,
    /// or `None` when no input element lands there (in between strides, or outside
    /// the input).
    pub fn transposed_input_index(
        &self,
        out: usize,
        tap: usize,
        input_len: usize,
    ) -> Option<usize> {
        let landed = out
            .checked_add(self.pad_begin)?
            .checked_sub(tap.checked_mul(self.dilation)?)?;
        if landed.checked_rem(self.stride)? != 0 {
            return None;
        }
        let index = landed / self.stride;
        (index < input_len).then_some(index)
    }

    /// Output length of the *transposed* sweep (conv_transpose): the length whose
    /// forward sweep by this window gives `input_len` positions, plus
    /// `output_padding` extra elements at the end to pick among the lengths that
    /// round to the same count:
    /// `(input_len - 1) * stride + span + output_padding - pad_begin - pad_end`.
    ///
    /// Fails for an empty input, an `output_padding` not smaller than the stride or
    /// the dilation (PyTorch's rule), and padding that removes the whole output.
    pub fn transposed_output_len(&self, input_len: usize, output_padding: usize) -> Result<usize> {
        let span = self.span()?;
        if input_len == 0 {
            return Err(Error::InvalidArgument(
                "transposed convolution needs a non-empty spatial input",
            ));
        }
        if output_padding >= self.stride && output_padding >= self.dilation {
            return Err(Error::InvalidArgument(
                "output_padding must be smaller than the stride or the dilation",
            ));
        }
        let full = (input_len - 1)
            .checked_mul(self.stride)
            .and_then(|l| l.checked_add(span))
            .and_then(|l| l.checked_add(output_padding))
            .ok_or(Error::Overflow)?;
        let pads = self.pad_begin.checked_add(self.pad_end);
        match pads {
            Some(p) if p < full => Ok(full - p),
            _ => Err(Error::InvalidArgument(
                "padding removes the whole transposed-convolution output",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(kernel: usize, stride: usize, dilation: usize, pads: (usize, usize)) -> AxisWindow {
        AxisWindow {
            kernel,
            stride,
            dilation,
            pad_begin: pads.0,
            pad_end: pads.1,
        }
    }

    #[test]
    fn output_len_matches_hand_counts() {
        // 7 inputs, kernel 3, stride 2: windows start at 0, 2, 4 -> 3 outputs.
        assert_eq!(w(3, 2, 1, (0, 0)).output_len(7, false), Ok(3));
        // Padding 1 each side: padded 9, starts 0, 2, 4, 6 -> 4 outputs.
        assert_eq!(w(3, 2, 1, (1, 1)).output_len(7, false), Ok(4));
        // Dilation 2 makes the span 5: padded 7, starts 0, 1, 2 -> 3 outputs.
        assert_eq!(w(3, 1, 2, (0, 0)).output_len(7, false), Ok(3));
        // 6 inputs, kernel 2, stride 2, ceil: starts 0, 2, 4 (no overhang needed).
        assert_eq!(w(2, 2, 1, (0, 0)).output_len(6, true), Ok(3));
        // 5 inputs, kernel 2, stride 2: floor gives 2, ceil adds a window at 4.
        assert_eq!(w(2, 2, 1, (0, 0)).output_len(5, false), Ok(2));
        assert_eq!(w(2, 2, 1, (0, 0)).output_len(5, true), Ok(3));
    }

    #[test]
    fn ceil_mode_drops_a_window_starting_in_end_padding() {
        // 4 inputs, kernel 2, stride 2, pad 1/1: padded 6, ceil gives starts 0, 2, 4
        // (input positions -1, 1, 3); all start on input or front padding: 3 windows.
        assert_eq!(w(2, 2, 1, (1, 1)).output_len(4, true), Ok(3));
        // 3 inputs, kernel 2, stride 2, pad 1/1: padded 5, ceil would add a third
        // window at padded 4 = input 3, past the input: it is dropped.
        assert_eq!(w(2, 2, 1, (1, 1)).output_len(3, true), Ok(2));
        assert_eq!(w(2, 2, 1, (1, 1)).output_len(3, false), Ok(2));
    }

    #[test]
    fn invalid_windows_are_errors() {
        assert!(w(0, 1, 1, (0, 0)).output_len(3, false).is_err());
        assert!(w(2, 0, 1, (0, 0)).output_len(3, false).is_err());
        assert!(w(2, 1, 0, (0, 0)).output_len(3, false).is_err());
        assert!(w(4, 1, 1, (0, 0)).output_len(3, false).is_err());
        assert!(w(4, 1, 1, (1, 0)).output_len(3, false).is_ok());
        assert_eq!(
            w(2, 1, usize::MAX, (0, 0)).output_len(3, false),
            Err(Error::Overflow)
        );
        assert_eq!(
            w(1, 1, 1, (usize::MAX, 1)).output_len(3, false),
            Err(Error::Overflow)
        );
    }

    #[test]
    fn taps_in_padding_have_no_input_index() {
        let win = w(3, 2, 1, (1, 1));
        assert_eq!(win.input_index(0, 0, 5), None);
        assert_eq!(win.input_index(0, 1, 5), Some(0));
        assert_eq!(win.input_index(2, 2, 5), None);
        assert_eq!(win.input_index(2, 1, 5), Some(4));
        assert_eq!(win.input_index(usize::MAX, 0, 5), None);
        let no_stride = AxisWindow { stride: 0, ..win };
        assert_eq!(no_stride.transposed_input_index(3, 0, 5), None);
        assert_eq!(win.transposed_input_index(usize::MAX, 0, 5), None);
    }

    #[test]
    fn windows_entirely_in_padding_are_detected() {
        // Kernel 1 with padding 1: the first and last windows read only padding.
        let win = w(1, 1, 1, (1, 1));
        let out = win.output_len(3, false).unwrap();
        assert!(!win.every_window_touches_input(3, out));
        assert!(w(3, 1, 1, (1, 1)).every_window_touches_input(3, 3));
    }

    #[test]
    fn transposed_len_inverts_the_forward_len() {
        // Forward: 9 inputs, kernel 3, stride 2, pad 1/1 -> 5. Transposed: 5 -> 9,
        // and output_padding 1 gives 10 (which also sweeps back to 5).
        let win = w(3, 2, 1, (1, 1));
        assert_eq!(win.output_len(9, false), Ok(5));
        assert_eq!(win.transposed_output_len(5, 0), Ok(9));
        assert_eq!(win.transposed_output_len(5, 1), Ok(10));
        assert_eq!(win.output_len(10, false), Ok(5));
        assert!(win.transposed_output_len(5, 2).is_err());
        assert!(win.transposed_output_len(0, 0).is_err());
        assert!(w(1, 1, 1, (1, 0)).transposed_output_len(1, 0).is_err());
        assert_eq!(
            w(2, usize::MAX, 1, (0, 0)).transposed_output_len(3, 0),
            Err(Error::Overflow)
        );
        assert!(w(2, 0, 1, (0, 0)).transposed_output_len(3, 0).is_err());
    }
}
