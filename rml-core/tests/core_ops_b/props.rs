//! Randomized checks over many window parameters, each against an expectation that
//! is written out independently here: a convolution whose kernel has a single 1 just
//! moves input values, so its output can be stated with plain index arithmetic.

use proptest::prelude::*;
use rml_core::ops::conv::{
    Conv2dParams, ConvTranspose2dParams, conv_transpose2d, conv_transpose2d_output_shape, conv2d,
    conv2d_output_shape,
};
use rml_core::ops::window::Padding2d;
use rml_core::{Shape, TensorView, TensorViewMut};

/// Sizes and window parameters for one axis: (input, kernel, stride, dilation, pad
/// before, pad after, the tap holding the 1).
fn axis() -> impl Strategy<Value = (usize, usize, usize, usize, usize, usize, usize)> {
    (
        1usize..8,
        1usize..4,
        1usize..4,
        1usize..4,
        0usize..3,
        0usize..3,
    )
        .prop_flat_map(|(n, k, s, d, pb, pe)| (Just((n, k, s, d, pb, pe)), 0..k))
        .prop_map(|((n, k, s, d, pb, pe), tap)| (n, k, s, d, pb, pe, tap))
}

/// Distinct input values, so a value read from the wrong place is noticed.
fn distinct_input(len: usize) -> Vec<f32> {
    (0..len).map(|i| 1.0 + i as f32).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// conv2d with a one-hot kernel: output channel `co` copies input channel
    /// `group(co) * C_in/g + co % (C_in/g)` shifted to the hot tap, zero where that
    /// lands on padding. The output shape exists exactly when the dilated kernel fits
    /// the padded input.
    #[test]
    fn one_hot_conv2d_moves_values(
        batch in 1usize..3, groups in 1usize..3, cig in 1usize..3, cog in 1usize..3,
        (h, kh, sh, dh, top, bottom, ty) in axis(),
        (w, kw, sw, dw, left, right, tx) in axis(),
    ) {
        let (c_in, c_out) = (groups * cig, groups * cog);
        let params = Conv2dParams {
            stride: [sh, sw],
            padding: Padding2d { top, bottom, left, right },
            dilation: [dh, dw],
            groups,
        };
        let in_shape = Shape::new(&[batch, c_in, h, w]).unwrap();
        let w_shape = Shape::new(&[c_out, cig, kh, kw]).unwrap();
        let fits = dh * (kh - 1) < h + top + bottom && dw * (kw - 1) < w + left + right;
        let out_shape = conv2d_output_shape(&in_shape, &w_shape, &params);
        prop_assert_eq!(out_shape.is_ok(), fits);
        let Ok(out_shape) = out_shape else { return Ok(()) };
        let (oh_len, ow_len) = (out_shape.dim(2), out_shape.dim(3));
        prop_assert_eq!(oh_len, (h + top + bottom - dh * (kh - 1) - 1) / sh + 1);
        prop_assert_eq!(ow_len, (w + left + right - dw * (kw - 1) - 1) / sw + 1);

        let x = distinct_input(in_shape.numel());
        let mut weight = vec![0.0f32; w_shape.numel()];
        for co in 0..c_out {
            weight[((co * cig + co % cig) * kh + ty) * kw + tx] = 1.0;
        }
        let mut out = vec![f32::NAN; out_shape.numel()];
        conv2d(
            &TensorView::new(&x, in_shape).unwrap(),
            &TensorView::new(&weight, w_shape).unwrap(),
            None,
            &params,
            &mut TensorViewMut::new(&mut out, out_shape).unwrap(),
        ).unwrap();

        for b in 0..batch {
            for co in 0..c_out {
                let ci = co / cog * cig + co % cig;
                for oh in 0..oh_len {
                    for ow in 0..ow_len {
                        let ih = (oh * sh + ty * dh) as isize - top as isize;
                        let iw = (ow * sw + tx * dw) as isize - left as isize;
                        let inside = (0..h as isize).contains(&ih) && (0..w as isize).contains(&iw);
                        let expected = if inside {
                            x[((b * c_in + ci) * h + ih as usize) * w + iw as usize]
                        } else {
                            0.0
                        };
                        let got = out[((b * c_out + co) * oh_len + oh) * ow_len + ow];
                        prop_assert_eq!(got, expected, "at {:?}", (b, co, oh, ow));
                    }
                }
            }
        }
    }

    /// conv_transpose2d with a one-hot kernel: each input value is placed (scattered)
    /// at `i * stride + tap * dilation - pad_before` of the output channels that read
    /// its channel, and everything else is zero.
    #[test]
    fn one_hot_conv_transpose2d_scatters_values(
        batch in 1usize..3, groups in 1usize..3, cig in 1usize..3, cog in 1usize..3,
        (h, kh, sh, dh, top, bottom, ty) in axis(),
        (w, kw, sw, dw, left, right, tx) in axis(),
        out_pad in (0usize..3, 0usize..3),
    ) {
        let (c_in, c_out) = (groups * cig, groups * cog);
        let params = ConvTranspose2dParams {
            stride: [sh, sw],
            padding: Padding2d { top, bottom, left, right },
            output_padding: [out_pad.0, out_pad.1],
            dilation: [dh, dw],
            groups,
        };
        let in_shape = Shape::new(&[batch, c_in, h, w]).unwrap();
        let w_shape = Shape::new(&[c_in, cog, kh, kw]).unwrap();
        let full_h = (h - 1) * sh + dh * (kh - 1) + 1 + out_pad.0;
        let full_w = (w - 1) * sw + dw * (kw - 1) + 1 + out_pad.1;
        let valid = (out_pad.0 < sh || out_pad.0 < dh)
            && (out_pad.1 < sw || out_pad.1 < dw)
            && top + bottom < full_h
            && left + right < full_w;
        let out_shape = conv_transpose2d_output_shape(&in_shape, &w_shape, &params);
        prop_assert_eq!(out_shape.is_ok(), valid);
        let Ok(out_shape) = out_shape else { return Ok(()) };
        let (oh_len, ow_len) = (full_h - top - bottom, full_w - left - right);
        prop_assert_eq!((out_shape.dim(2), out_shape.dim(3)), (oh_len, ow_len));

        // Input channel ci feeds (within its group) the output channels whose
        // in-group index is congruent to ci's modulo cig.
        let x = distinct_input(in_shape.numel());
        let mut weight = vec![0.0f32; w_shape.numel()];
        for ci in 0..c_in {
            for co_local in (0..cog).filter(|c| c % cig == ci % cig) {
                weight[((ci * cog + co_local) * kh + ty) * kw + tx] = 1.0;
            }
        }
        let mut expected = vec![0.0f32; out_shape.numel()];
        for b in 0..batch {
            for ci in 0..c_in {
                let group = ci / cig;
                for co_local in (0..cog).filter(|c| c % cig == ci % cig) {
                    let co = group * cog + co_local;
                    for ih in 0..h {
                        for iw in 0..w {
                            let oh = (ih * sh + ty * dh) as isize - top as isize;
                            let ow = (iw * sw + tx * dw) as isize - left as isize;
                            if (0..oh_len as isize).contains(&oh) && (0..ow_len as isize).contains(&ow) {
                                let at = ((b * c_out + co) * oh_len + oh as usize) * ow_len + ow as usize;
                                expected[at] = x[((b * c_in + ci) * h + ih) * w + iw];
                            }
                        }
                    }
                }
            }
        }
        let mut out = vec![f32::NAN; out_shape.numel()];
        conv_transpose2d(
            &TensorView::new(&x, in_shape).unwrap(),
            &TensorView::new(&weight, w_shape).unwrap(),
            None,
            &params,
            &mut TensorViewMut::new(&mut out, out_shape).unwrap(),
        ).unwrap();
        prop_assert_eq!(out, expected);
    }
}
