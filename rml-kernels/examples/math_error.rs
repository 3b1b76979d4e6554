//! Measures the error of the vector math functions against f64 libm over a sweep
//! of f32 bit patterns, on every ISA path this machine runs.
//!
//! `cargo run --release -p rml-kernels --example math_error [STRIDE]` visits every
//! STRIDE-th bit pattern (default 16; 1 = all 2^32 inputs) and prints, per function
//! and ISA, the max ULP error over normal results (and where it occurs), and the max
//! absolute error over subnormal results, and the max ULP error on the
//! GELU-tanh tail (x < -3).

use rml_kernels::elementwise::{UnaryOp, unary};
use rml_kernels::isa::{ALL_ISAS, force};
use rml_kernels::testing::{ulp_error, unary_reference};

/// Inputs below this use the absolute bound only (the GELU tails).
fn tail(op: UnaryOp) -> f32 {
    match op {
        UnaryOp::GeluTanh => -3.0,
        _ => f32::NEG_INFINITY,
    }
}

fn main() {
    let stride: u64 = std::env::args()
        .nth(1)
        .map_or(16, |s| s.parse().expect("STRIDE"));
    let ops = [
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Erf,
        UnaryOp::Gelu,
        UnaryOp::GeluTanh,
        UnaryOp::Silu,
        UnaryOp::Softplus,
    ];
    const CHUNK: u64 = 1 << 16;
    let mut x = vec![0.0f32; CHUNK as usize];
    let mut y = vec![0.0f32; CHUNK as usize];
    println!(
        "stride {stride}: {} inputs per function",
        (1u64 << 32).div_ceil(stride)
    );
    for isa in ALL_ISAS.into_iter().filter(|i| i.is_supported()) {
        force(isa).expect("supported");
        for op in ops {
            let (mut worst, mut at, mut worst_abs, mut bad) = (0.0f64, 0.0f32, 0.0f64, 0u64);
            let mut worst_tail = 0.0f64;
            let mut i = 0u64;
            while i < 1 << 32 {
                let n = ((1u64 << 32) - i).div_ceil(stride).min(CHUNK) as usize;
                for (k, v) in x[..n].iter_mut().enumerate() {
                    *v = f32::from_bits((i + k as u64 * stride) as u32);
                }
                unary(op, &x[..n], &mut y[..n]).expect("lengths");
                for (&xi, &yi) in x[..n].iter().zip(&y[..n]) {
                    let want = unary_reference(op, xi as f64);
                    let normal = want.is_nan()
                        || want.is_infinite()
                        || want.abs() >= f32::MIN_POSITIVE as f64;
                    if normal && xi < tail(op) {
                        worst_tail = worst_tail.max(ulp_error(yi, want));
                    } else if normal {
                        let e = ulp_error(yi, want);
                        if e.is_infinite() {
                            bad += 1;
                        } else if e > worst {
                            worst = e;
                            at = xi;
                        }
                    } else {
                        worst_abs = worst_abs.max((yi as f64 - want).abs());
                    }
                }
                i += n as u64 * stride;
            }
            println!(
                "{:>6} {:>10}: max {worst:6.3} ulp at x = {at:e}; max abs (subnormal) {worst_abs:.2e}; tail {worst_tail:.1} ulp; special mismatches {bad}",
                isa.name(),
                op.name()
            );
        }
    }
}
