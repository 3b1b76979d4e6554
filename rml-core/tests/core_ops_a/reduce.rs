//! Reductions, arg-reductions and cumsum against NumPy in float64.

use rml_core::ops::reduce::{ArgOp, ReduceOp, arg_reduce, cumsum, reduce, reduce_shape};
use serde_json::Value;

use super::fixture::{Output, Tensor, assert_close, expected_f32, isizes, load, usizes};

/// rml accumulates in f64 (sequentially), NumPy in f64 (pairwise): both are within
/// ~n·2^-53·Σ|x| ≈ 1e-14 relative of the exact value for these data (n ≤ 60, no
/// catastrophic cancellation), so after rounding to f32 they differ by at most one ulp.
const REDUCE_MAX_ULPS: u64 = 1;

fn reduce_op(case: &Value) -> ReduceOp {
    match case["op"].as_str().unwrap() {
        "sum" => ReduceOp::Sum,
        "mean" => ReduceOp::Mean,
        "max" => ReduceOp::Max,
        "min" => ReduceOp::Min,
        "prod" => ReduceOp::Prod,
        "var" => ReduceOp::Var {
            ddof: case["ddof"].as_u64().unwrap() as usize,
        },
        other => panic!("unknown reduction {other}"),
    }
}

#[test]
fn reductions_match_numpy() {
    for (n, case) in load("reduce.json").iter().enumerate() {
        let op = reduce_op(case);
        let x = Tensor::f32(&case["x"]);
        let axes = isizes(&case["axes"]);
        let keepdims = case["keepdims"].as_bool().unwrap();
        let (shape, want) = expected_f32(&case["expected"]);
        assert_eq!(
            reduce_shape(&x.shape(), &axes, keepdims).unwrap().dims(),
            &shape[..],
            "reduce case {n}: shape"
        );
        let mut out = Output::new(case, &shape, -12345.0f32);
        reduce(op, &x.view(), &axes, keepdims, &mut out.view_mut()).unwrap();
        let context = format!("reduce case {n} ({op:?} over {axes:?})");
        assert_close(&out.values(), &want, REDUCE_MAX_ULPS, 0.0, &context);
    }
}

#[test]
fn arg_reductions_pick_the_first_extreme_like_numpy() {
    for (n, case) in load("arg_reduce.json").iter().enumerate() {
        let op = match case["op"].as_str().unwrap() {
            "argmax" => ArgOp::Max,
            _ => ArgOp::Min,
        };
        let x = Tensor::f32(&case["x"]);
        let axes = isizes(&case["axes"]);
        let keepdims = case["keepdims"].as_bool().unwrap();
        let want = Tensor::<i64>::int(&case["expected"]).data;
        let shape = usizes(&case["expected"]["shape"]);
        let mut out = Output::new(case, &shape, -7i64);
        arg_reduce(op, &x.view(), &axes, keepdims, &mut out.view_mut()).unwrap();
        assert_eq!(out.values(), want, "arg case {n} ({op:?} over {axes:?})");
    }
}

#[test]
fn cumsum_matches_numpy() {
    for (n, case) in load("cumsum.json").iter().enumerate() {
        let x = Tensor::f32(&case["x"]);
        let axis = case["axis"].as_i64().unwrap() as isize;
        let (shape, want) = expected_f32(&case["expected"]);
        let mut out = Output::new(case, &shape, -12345.0f32);
        cumsum(&x.view(), axis, &mut out.view_mut()).unwrap();
        // Each running sum is an f64 sum of ≤ 7 terms, rounded once: as reductions.
        let context = format!("cumsum case {n}");
        assert_close(&out.values(), &want, REDUCE_MAX_ULPS, 0.0, &context);
    }
}
