//! Layer, RMS, group and batch norm against NumPy in float64.

use rml_core::ops::norm::{Affine, batch_norm, group_norm, layer_norm, rms_norm};
use serde_json::Value;

use super::fixture::{Output, Tensor, assert_close, expected_f32, load};

/// Statistics and outputs are f64 on both sides, rounded once: one f32 ulp.
const NORM_MAX_ULPS: u64 = 1;
/// Where `x̂·w + b` cancels to near 0, each side's f64 error is ≤ 2^-52·(|x̂·w| + |b|)
/// ≈ 2e-15 for the fixtures' magnitudes (≤ 10): an absolute floor above that.
const NORM_ABS: f32 = 1e-14;

/// An optional parameter tensor of a case.
fn param(case: &Value, key: &str) -> Option<Tensor<f32>> {
    case.get(key).map(Tensor::f32)
}

#[test]
fn norms_match_numpy() {
    for (n, case) in load("norm.json").iter().enumerate() {
        let x = Tensor::f32(&case["x"]);
        let eps = case["eps"].as_f64().unwrap() as f32;
        let (weight, bias) = (param(case, "weight"), param(case, "bias"));
        let affine = Affine {
            weight: weight.as_ref().map(Tensor::view),
            bias: bias.as_ref().map(Tensor::view),
        };
        let (shape, want) = expected_f32(&case["expected"]);
        let mut out = Output::new(case, &shape, -12345.0f32);
        let kind = case["kind"].as_str().unwrap();
        let x = x.view();
        let result = match kind {
            "layer_norm" => {
                let k = case["k"].as_u64().unwrap() as usize;
                layer_norm(&x, k, affine, eps, &mut out.view_mut())
            }
            "rms_norm" => rms_norm(&x, affine.weight, eps, &mut out.view_mut()),
            "group_norm" => {
                let groups = case["groups"].as_u64().unwrap() as usize;
                group_norm(&x, groups, affine, eps, &mut out.view_mut())
            }
            "batch_norm" => {
                let mean = Tensor::f32(&case["mean"]);
                let var = Tensor::f32(&case["var"]);
                batch_norm(
                    &x,
                    &mean.view(),
                    &var.view(),
                    affine,
                    eps,
                    &mut out.view_mut(),
                )
            }
            other => panic!("unknown norm {other}"),
        };
        result.unwrap();
        let context = format!("norm case {n} ({kind})");
        assert_close(&out.values(), &want, NORM_MAX_ULPS, NORM_ABS, &context);
    }
}
