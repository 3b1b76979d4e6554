//! Softmax and log-softmax against NumPy in float64.

use rml_core::ops::softmax::{log_softmax, softmax};

use super::fixture::{Output, Tensor, assert_close, expected_f32, load};

/// Both sides compute `exp(x - max)` and the lane sum in f64 and round once: one f32
/// ulp (see the unary tolerance).
const SOFTMAX_MAX_ULPS: u64 = 1;
/// log-softmax of a dominant element is `-ln(sum)` with `sum` just above 1: the f64
/// sum of ≤ 9 terms ≤ 1 carries ≤ 9·2^-53 ≈ 1e-15 absolute error, which `ln` passes
/// on unchanged — many f32 ulps of a result near 1e-9.
const LOG_SOFTMAX_ABS: f32 = 2e-15;

#[test]
fn softmax_and_log_softmax_match_numpy() {
    for (n, case) in load("softmax.json").iter().enumerate() {
        let x = Tensor::f32(&case["x"]);
        let axis = case["axis"].as_i64().unwrap() as isize;
        let (shape, want) = expected_f32(&case["expected"]);
        let mut out = Output::new(case, &shape, -12345.0f32);
        let kind = case["kind"].as_str().unwrap();
        match kind {
            "softmax" => softmax(&x.view(), axis, &mut out.view_mut()).unwrap(),
            _ => log_softmax(&x.view(), axis, &mut out.view_mut()).unwrap(),
        }
        let context = format!("case {n} ({kind} along {axis})");
        assert_close(
            &out.values(),
            &want,
            SOFTMAX_MAX_ULPS,
            LOG_SOFTMAX_ABS,
            &context,
        );
    }
}
