//! Max, average and global pooling against the NumPy fixtures.

use rml_core::TensorViewMut;
use rml_core::ops::pool::{
    Pool1dParams, Pool2dParams, avg_pool1d, avg_pool2d, global_avg_pool2d, global_max_pool2d,
    max_pool1d, max_pool2d, pool1d_output_shape, pool2d_output_shape,
};
use rml_core::ops::window::Padding2d;
use serde_json::Value;

use crate::fixture::{
    F32_UNIT_ROUNDOFF, Tensor, accumulation_tolerance, assert_close, cases, f32_tensor, name, pair,
    usize_of, usizes,
};

/// Max pooling copies one input value: it must match exactly.
const MAX_POOL_TOLERANCE: f64 = 0.0;

/// Tolerance for an average of at most `taps` values: the f32 sum rounds `taps`
/// times over magnitudes adding up to at most `taps * max|x|`; dividing by the count
/// (at least the number of values summed) scales that error down by the same
/// factor, so `γ_taps * max|x|` bounds it, and the division rounds once more
/// (`u * |expected|`, added to the reference's own rounding).
fn mean_tolerance(taps: usize, x: &Tensor<f32>) -> impl Fn(f32) -> f64 {
    let max_abs = x.max_abs();
    move |e| accumulation_tolerance(taps, max_abs, e) + F32_UNIT_ROUNDOFF * f64::from(e.abs())
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

#[test]
fn pool2d_matches_numpy() {
    for case in cases("pool2d.json") {
        let name = name(&case);
        let x = f32_tensor(&case["input"]);
        let expected = f32_tensor(&case["expected"]);
        let params = Pool2dParams {
            kernel: pair(&case["kernel"]),
            stride: pair(&case["stride"]),
            padding: padding(&case["padding"]),
            dilation: pair(&case["dilation"]),
            ceil_mode: case["ceil_mode"].as_bool().unwrap(),
        };
        let out_shape = pool2d_output_shape(&x.shape, &params).unwrap();
        assert_eq!(out_shape, expected.shape, "{name}: output shape");
        // Once from the dense input, once from an axis-reversed (strided) copy.
        let reversed = x.reversed();
        for (input, layout) in [(x.view(), "dense"), (reversed.view(), "strided")] {
            let name = format!("{name} ({layout})");
            let mut out = vec![f32::NAN; out_shape.numel()];
            let mut ov = TensorViewMut::new(&mut out, out_shape).unwrap();
            match case["kind"].as_str().unwrap() {
                "max" => {
                    max_pool2d(&input, &params, &mut ov).unwrap();
                    assert_close(&name, &out, &expected.data, |_| MAX_POOL_TOLERANCE);
                }
                "avg" => {
                    let include_pad = case["count_include_pad"].as_bool().unwrap();
                    avg_pool2d(&input, &params, include_pad, &mut ov).unwrap();
                    let taps = params.kernel[0] * params.kernel[1];
                    assert_close(&name, &out, &expected.data, mean_tolerance(taps, &x));
                }
                other => panic!("{name}: unknown pooling kind {other}"),
            }
        }
    }
}

#[test]
fn pool1d_matches_numpy() {
    for case in cases("pool1d.json") {
        let name = name(&case);
        let x = f32_tensor(&case["input"]);
        let expected = f32_tensor(&case["expected"]);
        let params = Pool1dParams {
            kernel: usize_of(&case["kernel"]),
            stride: usize_of(&case["stride"]),
            padding: pair(&case["padding"]),
            dilation: usize_of(&case["dilation"]),
            ceil_mode: case["ceil_mode"].as_bool().unwrap(),
        };
        let out_shape = pool1d_output_shape(&x.shape, &params).unwrap();
        assert_eq!(out_shape, expected.shape, "{name}: output shape");
        let mut out = vec![f32::NAN; out_shape.numel()];
        let mut ov = TensorViewMut::new(&mut out, out_shape).unwrap();
        match case["kind"].as_str().unwrap() {
            "max" => {
                max_pool1d(&x.view(), &params, &mut ov).unwrap();
                assert_close(name, &out, &expected.data, |_| MAX_POOL_TOLERANCE);
            }
            "avg" => {
                let include_pad = case["count_include_pad"].as_bool().unwrap();
                avg_pool1d(&x.view(), &params, include_pad, &mut ov).unwrap();
                let tol = mean_tolerance(params.kernel, &x);
                assert_close(name, &out, &expected.data, tol);
            }
            other => panic!("{name}: unknown pooling kind {other}"),
        }
    }
}

#[test]
fn global_pool2d_matches_numpy() {
    for case in cases("global_pool2d.json") {
        let name = name(&case);
        let x = f32_tensor(&case["input"]);
        let expected = f32_tensor(&case["expected"]);
        let mut out = vec![f32::NAN; expected.data.len()];
        let mut ov = TensorViewMut::new(&mut out, expected.shape).unwrap();
        match case["kind"].as_str().unwrap() {
            "max" => {
                global_max_pool2d(&x.view(), &mut ov).unwrap();
                assert_close(name, &out, &expected.data, |_| MAX_POOL_TOLERANCE);
            }
            "avg" => {
                global_avg_pool2d(&x.view(), &mut ov).unwrap();
                let image = x.shape.dims()[2] * x.shape.dims()[3];
                assert_close(name, &out, &expected.data, mean_tolerance(image, &x));
            }
            other => panic!("{name}: unknown pooling kind {other}"),
        }
    }
}
