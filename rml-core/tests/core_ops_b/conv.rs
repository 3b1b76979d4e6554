//! conv2d, conv1d and conv_transpose2d against the NumPy fixtures.

use rml_core::ops::conv::{
    Conv1dParams, Conv2dParams, ConvTranspose1dParams, ConvTranspose2dParams, conv_transpose1d,
    conv_transpose1d_output_shape, conv_transpose2d, conv_transpose2d_output_shape, conv1d,
    conv1d_output_shape, conv2d, conv2d_output_shape,
};
use rml_core::ops::window::Padding2d;
use rml_core::{Shape, TensorView, TensorViewMut};
use serde_json::Value;

use crate::fixture::{
    Tensor, accumulation_tolerance, assert_close, cases, f32_tensor, name, pair, usize_of, usizes,
};

/// Input, weight, optional bias and expected output of a case.
struct ConvCase {
    x: Tensor<f32>,
    w: Tensor<f32>,
    b: Option<Tensor<f32>>,
    expected: Tensor<f32>,
}

impl ConvCase {
    fn read(case: &Value) -> ConvCase {
        ConvCase {
            x: f32_tensor(&case["input"]),
            w: f32_tensor(&case["weight"]),
            b: (!case["bias"].is_null()).then(|| f32_tensor(&case["bias"])),
            expected: f32_tensor(&case["expected"]),
        }
    }

    /// Tolerance for an output that sums `taps` products `x * w` onto the bias in
    /// f32: `taps` products and `taps` additions round (m = 2 * taps), over values
    /// whose magnitudes add up to at most `|b| + taps * max|x| * max|w|` (see
    /// [`accumulation_tolerance`]). With inputs in [-1, 1] and at most 27 taps this
    /// stays below 1e-4, while a misplaced tap moves an output by ~0.1 or more.
    fn tolerance(&self, taps: usize) -> impl Fn(f32) -> f64 {
        let max_b = self.b.as_ref().map_or(0.0, Tensor::max_abs);
        let abs_sum = max_b + taps as f64 * self.x.max_abs() * self.w.max_abs();
        move |e| accumulation_tolerance(2 * taps, abs_sum, e)
    }
}

fn padding(v: &Value) -> Padding2d {
    let p = usizes(v);
    Padding2d {
        top: p[0],
        bottom: p[1],
        left: p[2],
        right: p[3],
    }
}

/// `[N, C, H, W]` data rearranged to `[N, H, W, C]` storage (done here with plain
/// index arithmetic, so the strided view below reads a genuinely different layout).
fn to_channels_last(t: &Tensor<f32>) -> Vec<f32> {
    let &[n, c, h, w] = t.shape.dims() else {
        panic!("rank 4")
    };
    let mut out = vec![0.0; t.data.len()];
    for b in 0..n {
        for ch in 0..c {
            for y in 0..h {
                for x in 0..w {
                    out[((b * h + y) * w + x) * c + ch] = t.data[((b * c + ch) * h + y) * w + x];
                }
            }
        }
    }
    out
}

#[test]
fn conv2d_matches_numpy() {
    for case in cases("conv2d.json") {
        let name = name(&case);
        let c = ConvCase::read(&case);
        let params = Conv2dParams {
            stride: pair(&case["stride"]),
            padding: padding(&case["padding"]),
            dilation: pair(&case["dilation"]),
            groups: usize_of(&case["groups"]),
        };
        let out_shape = conv2d_output_shape(&c.x.shape, &c.w.shape, &params).unwrap();
        assert_eq!(out_shape, c.expected.shape, "{name}: output shape");
        let taps = c.w.shape.dims()[1..].iter().product();
        let bias = c.b.as_ref().map(Tensor::view);

        let mut out = vec![f32::NAN; out_shape.numel()];
        let mut ov = TensorViewMut::new(&mut out, out_shape).unwrap();
        conv2d(&c.x.view(), &c.w.view(), bias.as_ref(), &params, &mut ov).unwrap();
        assert_close(name, &out, &c.expected.data, c.tolerance(taps));

        // The same convolution reading channels-last input and writing channels-last
        // output through permuted (non-contiguous) views.
        let nhwc = to_channels_last(&c.x);
        let d = c.x.shape.dims();
        let xv = TensorView::new(&nhwc, Shape::new(&[d[0], d[2], d[3], d[1]]).unwrap())
            .unwrap()
            .permute(&[0, 3, 1, 2])
            .unwrap();
        let o = out_shape.dims();
        let mut out_nhwc = vec![f32::NAN; out_shape.numel()];
        let mut ov = TensorViewMut::new(
            &mut out_nhwc,
            Shape::new(&[o[0], o[2], o[3], o[1]]).unwrap(),
        )
        .unwrap()
        .transpose(1, 3)
        .unwrap()
        .transpose(2, 3)
        .unwrap();
        assert_eq!(*ov.shape(), out_shape);
        conv2d(&xv, &c.w.view(), bias.as_ref(), &params, &mut ov).unwrap();
        let read_back: Vec<f32> = ov.as_view().iter().collect();
        assert_close(
            &format!("{name} (channels-last)"),
            &read_back,
            &c.expected.data,
            c.tolerance(taps),
        );
    }
}

#[test]
fn conv1d_matches_numpy() {
    for case in cases("conv1d.json") {
        let name = name(&case);
        let c = ConvCase::read(&case);
        let params = Conv1dParams {
            stride: usize_of(&case["stride"]),
            padding: pair(&case["padding"]),
            dilation: usize_of(&case["dilation"]),
            groups: usize_of(&case["groups"]),
        };
        let out_shape = conv1d_output_shape(&c.x.shape, &c.w.shape, &params).unwrap();
        assert_eq!(out_shape, c.expected.shape, "{name}: output shape");
        let taps = c.w.shape.dims()[1..].iter().product();
        let bias = c.b.as_ref().map(Tensor::view);
        let mut out = vec![f32::NAN; out_shape.numel()];
        let mut ov = TensorViewMut::new(&mut out, out_shape).unwrap();
        conv1d(&c.x.view(), &c.w.view(), bias.as_ref(), &params, &mut ov).unwrap();
        assert_close(name, &out, &c.expected.data, c.tolerance(taps));
    }
}

#[test]
fn conv_transpose2d_matches_numpy() {
    for case in cases("conv_transpose2d.json") {
        let name = name(&case);
        let c = ConvCase::read(&case);
        let groups = usize_of(&case["groups"]);
        let params = ConvTranspose2dParams {
            stride: pair(&case["stride"]),
            padding: padding(&case["padding"]),
            output_padding: pair(&case["output_padding"]),
            dilation: pair(&case["dilation"]),
            groups,
        };
        let out_shape = conv_transpose2d_output_shape(&c.x.shape, &c.w.shape, &params).unwrap();
        assert_eq!(out_shape, c.expected.shape, "{name}: output shape");
        // An output gathers at most one product per (input channel of its group,
        // kernel tap).
        let d = c.w.shape.dims();
        let taps = d[0] / groups * d[2] * d[3];
        let bias = c.b.as_ref().map(Tensor::view);
        let mut out = vec![f32::NAN; out_shape.numel()];
        let mut ov = TensorViewMut::new(&mut out, out_shape).unwrap();
        conv_transpose2d(&c.x.view(), &c.w.view(), bias.as_ref(), &params, &mut ov).unwrap();
        assert_close(name, &out, &c.expected.data, c.tolerance(taps));
    }
}

#[test]
fn conv_transpose1d_matches_numpy() {
    for case in cases("conv_transpose1d.json") {
        let name = name(&case);
        let c = ConvCase::read(&case);
        let groups = usize_of(&case["groups"]);
        let params = ConvTranspose1dParams {
            stride: usize_of(&case["stride"]),
            padding: pair(&case["padding"]),
            output_padding: usize_of(&case["output_padding"]),
            dilation: usize_of(&case["dilation"]),
            groups,
        };
        let out_shape = conv_transpose1d_output_shape(&c.x.shape, &c.w.shape, &params).unwrap();
        assert_eq!(out_shape, c.expected.shape, "{name}: output shape");
        let d = c.w.shape.dims();
        let taps = d[0] / groups * d[2];
        let bias = c.b.as_ref().map(Tensor::view);
        let mut out = vec![f32::NAN; out_shape.numel()];
        let mut ov = TensorViewMut::new(&mut out, out_shape).unwrap();
        conv_transpose1d(&c.x.view(), &c.w.view(), bias.as_ref(), &params, &mut ov).unwrap();
        assert_close(name, &out, &c.expected.data, c.tolerance(taps));
    }
}
