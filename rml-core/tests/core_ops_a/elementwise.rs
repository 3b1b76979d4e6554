//! Unary, binary, compare and where against NumPy.

use rml_core::ops::binary::{BinaryOp, binary};
use rml_core::ops::compare::{CompareOp, compare, where_};
use rml_core::ops::unary::{UnaryOp, unary};
use serde_json::Value;

use super::fixture::{Output, Tensor, assert_close, expected_f32, load, usizes};

/// Unary ops: rml and the reference both evaluate in f64 (each within a few f64 ulps
/// of the exact value, i.e. ~2^-50 relative) and round once to f32. Roundings can
/// only differ when the exact value lies that close to an f32 rounding boundary, and
/// then by one f32 ulp.
const UNARY_MAX_ULPS: u64 = 1;
/// Where a formula cancels in f64 (gelu_tanh's `1 + tanh(z)` for z ≪ 0), one f64 ulp
/// of `tanh` (2^-53) times `|x| / 2` (|x| ≤ 20 in the fixtures) is ≤ 2.2e-15
/// absolute, which can be many f32 ulps of a tiny result.
const UNARY_ABS: f32 = 5e-15;
/// `+ - * /`, maximum and minimum are single correctly rounded IEEE operations in both
/// libraries: bit-identical.
const EXACT_ULPS: u64 = 0;
/// `pow` is f64 `pow` (< 1 f64 ulp in both libms) rounded once: as for unary ops.
const POW_MAX_ULPS: u64 = 1;

fn unary_op(case: &Value) -> UnaryOp {
    let alpha = || case["alpha"].as_f64().expect("alpha") as f32;
    match case["op"].as_str().unwrap() {
        "neg" => UnaryOp::Neg,
        "abs" => UnaryOp::Abs,
        "exp" => UnaryOp::Exp,
        "log" => UnaryOp::Log,
        "sqrt" => UnaryOp::Sqrt,
        "rsqrt" => UnaryOp::Rsqrt,
        "tanh" => UnaryOp::Tanh,
        "sigmoid" => UnaryOp::Sigmoid,
        "relu" => UnaryOp::Relu,
        "leaky_relu" => UnaryOp::LeakyRelu(alpha()),
        "elu" => UnaryOp::Elu(alpha()),
        "softplus" => UnaryOp::Softplus,
        "erf" => UnaryOp::Erf,
        "gelu" => UnaryOp::Gelu,
        "gelu_tanh" => UnaryOp::GeluTanh,
        "silu" => UnaryOp::Silu,
        "sin" => UnaryOp::Sin,
        "cos" => UnaryOp::Cos,
        other => panic!("unknown unary op {other}"),
    }
}

#[test]
fn unary_ops_match_numpy() {
    let mut seen = std::collections::BTreeSet::new();
    for (n, case) in load("unary.json").iter().enumerate() {
        let op = unary_op(case);
        seen.insert(case["op"].as_str().unwrap().to_owned());
        let x = Tensor::f32(&case["x"]);
        let (shape, want) = expected_f32(&case["expected"]);
        let mut out = Output::new(case, &shape, -12345.0f32);
        unary(op, &x.view(), &mut out.view_mut()).unwrap();
        assert_close(
            &out.values(),
            &want,
            UNARY_MAX_ULPS,
            UNARY_ABS,
            &format!("unary case {n} ({op:?})"),
        );
    }
    assert_eq!(seen.len(), 18, "every unary op has fixtures");
}

fn binary_op(name: &str) -> BinaryOp {
    match name {
        "add" => BinaryOp::Add,
        "sub" => BinaryOp::Sub,
        "mul" => BinaryOp::Mul,
        "div" => BinaryOp::Div,
        "pow" => BinaryOp::Pow,
        "maximum" => BinaryOp::Maximum,
        "minimum" => BinaryOp::Minimum,
        other => panic!("unknown binary op {other}"),
    }
}

#[test]
fn binary_ops_broadcast_like_numpy() {
    for (n, case) in load("binary.json").iter().enumerate() {
        let op = binary_op(case["op"].as_str().unwrap());
        let (a, b) = (Tensor::f32(&case["a"]), Tensor::f32(&case["b"]));
        let (shape, want) = expected_f32(&case["expected"]);
        let mut out = Output::new(case, &shape, -12345.0f32);
        binary(op, &a.view(), &b.view(), &mut out.view_mut()).unwrap();
        let max_ulps = if op == BinaryOp::Pow {
            POW_MAX_ULPS
        } else {
            EXACT_ULPS
        };
        assert_close(
            &out.values(),
            &want,
            max_ulps,
            0.0,
            &format!("binary case {n} ({op:?})"),
        );
    }
}

fn compare_op(name: &str) -> CompareOp {
    match name {
        "eq" => CompareOp::Eq,
        "ne" => CompareOp::Ne,
        "lt" => CompareOp::Lt,
        "le" => CompareOp::Le,
        "gt" => CompareOp::Gt,
        "ge" => CompareOp::Ge,
        other => panic!("unknown comparison {other}"),
    }
}

/// Runs one comparison case for element type `T` and returns the bool bytes.
fn run_compare<T: Copy + PartialOrd>(case: &Value, a: Tensor<T>, b: Tensor<T>) -> Vec<u8> {
    let op = compare_op(case["op"].as_str().unwrap());
    let shape = usizes(&case["expected"]["shape"]);
    let mut out = Output::new(case, &shape, 77u8);
    compare(op, &a.view(), &b.view(), &mut out.view_mut()).unwrap();
    out.values()
}

#[test]
fn comparisons_match_numpy_including_nan() {
    for (n, case) in load("compare.json").iter().enumerate() {
        let got = match case["kind"].as_str().unwrap() {
            "f32" => run_compare(case, Tensor::f32(&case["a"]), Tensor::f32(&case["b"])),
            "i32" => run_compare::<i32>(case, Tensor::int(&case["a"]), Tensor::int(&case["b"])),
            other => panic!("unknown kind {other}"),
        };
        let want: Vec<u8> = Tensor::<u8>::int(&case["expected"]).data;
        assert_eq!(got, want, "compare case {n}");
    }
}

#[test]
fn where_broadcasts_three_ways() {
    for (n, case) in load("where.json").iter().enumerate() {
        let cond = Tensor::<u8>::int(&case["cond"]);
        let (a, b) = (Tensor::f32(&case["a"]), Tensor::f32(&case["b"]));
        let (shape, want) = expected_f32(&case["expected"]);
        let mut out = Output::new(case, &shape, -12345.0f32);
        where_(&cond.view(), &a.view(), &b.view(), &mut out.view_mut()).unwrap();
        // Selection copies values: exact.
        assert_close(
            &out.values(),
            &want,
            EXACT_ULPS,
            0.0,
            &format!("where case {n}"),
        );
    }
}
