//! Elementwise f32 functions of one argument (activations and math functions).
//!
//! Each value is computed in f64 with `libm` and rounded to f32 once, so the result
//! is within about half an f32 ulp of the exact value: a sharp reference for the
//! vectorized approximations in `rml-kernels`.

use crate::error::Result;
use crate::ops::walk::map_unary;
use crate::view::{TensorView, TensorViewMut};

/// A unary elementwise function. Parameterized variants carry their constant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    /// `-x`.
    Neg,
    /// `|x|`.
    Abs,
    /// `e^x`.
    Exp,
    /// Natural logarithm (`-inf` at 0, NaN below).
    Log,
    /// Square root (NaN below 0).
    Sqrt,
    /// `1 / sqrt(x)`.
    Rsqrt,
    /// Hyperbolic tangent.
    Tanh,
    /// Logistic function `1 / (1 + e^-x)`.
    Sigmoid,
    /// `max(x, 0)`.
    Relu,
    /// `x` for `x >= 0`, else `alpha * x`.
    LeakyRelu(f32),
    /// `x` for `x > 0`, else `alpha * (e^x - 1)`.
    Elu(f32),
    /// `ln(1 + e^x)`, evaluated as `max(x, 0) + ln(1 + e^-|x|)` so it never overflows.
    Softplus,
    /// The error function.
    Erf,
    /// Exact GELU: `x * Φ(x) = x/2 * erfc(-x/√2)` (erfc avoids cancellation for x < 0).
    Gelu,
    /// Tanh-approximated GELU: `x/2 * (1 + tanh(√(2/π) * (x + 0.044715 x³)))`.
    GeluTanh,
    /// SiLU (swish): `x * sigmoid(x)`.
    Silu,
    /// Sine.
    Sin,
    /// Cosine.
    Cos,
}

/// The logistic function in f64, in the form that cannot overflow `exp`.
fn sigmoid64(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + libm::exp(-x))
    } else {
        let e = libm::exp(x);
        e / (1.0 + e)
    }
}

/// Applies `op` to one value (computed in f64, rounded once to f32).
pub fn apply(op: UnaryOp, x: f32) -> f32 {
    let v = f64::from(x);
    let y = match op {
        UnaryOp::Neg => -v,
        UnaryOp::Abs => libm::fabs(v),
        UnaryOp::Exp => libm::exp(v),
        UnaryOp::Log => libm::log(v),
        UnaryOp::Sqrt => libm::sqrt(v),
        UnaryOp::Rsqrt => 1.0 / libm::sqrt(v),
        UnaryOp::Tanh => libm::tanh(v),
        UnaryOp::Sigmoid => sigmoid64(v),
        // `max` would turn NaN into 0; a comparison keeps NaN as NaN.
        UnaryOp::Relu => {
            if v < 0.0 {
                0.0
            } else {
                v
            }
        }
        UnaryOp::LeakyRelu(alpha) => {
            if v >= 0.0 {
                v
            } else {
                f64::from(alpha) * v
            }
        }
        UnaryOp::Elu(alpha) => {
            if v > 0.0 {
                v
            } else {
                f64::from(alpha) * libm::expm1(v)
            }
        }
        UnaryOp::Softplus => {
            let positive = if v > 0.0 { v } else { 0.0 };
            positive + libm::log1p(libm::exp(-libm::fabs(v)))
        }
        UnaryOp::Erf => libm::erf(v),
        UnaryOp::Gelu => 0.5 * v * libm::erfc(-v * core::f64::consts::FRAC_1_SQRT_2),
        UnaryOp::GeluTanh => {
            // √(2/π) = (2/√π) / √2.
            let k = core::f64::consts::FRAC_2_SQRT_PI * core::f64::consts::FRAC_1_SQRT_2;
            0.5 * v * (1.0 + libm::tanh(k * (v + 0.044715 * v * v * v)))
        }
        UnaryOp::Silu => v * sigmoid64(v),
        UnaryOp::Sin => libm::sin(v),
        UnaryOp::Cos => libm::cos(v),
    };
    y as f32
}

/// Writes `op(x)` for every element of `x` into `out`, which must have the same
/// shape ([`crate::Error::ShapeMismatch`] otherwise). Both views may be strided.
pub fn unary(op: UnaryOp, x: &TensorView<'_, f32>, out: &mut TensorViewMut<'_, f32>) -> Result<()> {
    map_unary("unary", x, out, |v| apply(op, v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Error, Shape};

    #[test]
    fn output_of_another_shape_is_an_error() {
        // Same element count, different shape: still a mismatch (no implicit reshape).
        let x = [1.0f32; 6];
        let mut o = [0.0f32; 6];
        let xv = TensorView::new(&x, Shape::new(&[2, 3]).unwrap()).unwrap();
        let mut ov = TensorViewMut::new(&mut o, Shape::new(&[6]).unwrap()).unwrap();
        assert_eq!(
            unary(UnaryOp::Exp, &xv, &mut ov),
            Err(Error::ShapeMismatch { op: "unary" })
        );
        assert_eq!(o, [0.0; 6], "nothing written on error");
    }

    #[test]
    fn stable_forms_do_not_overflow_and_keep_nan() {
        // Naive ln(1 + e^x) and 1/(1 + e^-x) overflow at |x| = 100 in f32 or f64
        // exponent ranges of intermediate values; the stable forms give x and 0/1.
        assert_eq!(apply(UnaryOp::Softplus, 100.0), 100.0);
        assert_eq!(apply(UnaryOp::Softplus, -200.0), 0.0);
        assert_eq!(apply(UnaryOp::Sigmoid, -800.0), 0.0);
        assert_eq!(apply(UnaryOp::Sigmoid, 800.0), 1.0);
        assert!(apply(UnaryOp::Relu, f32::NAN).is_nan());
        assert_eq!(apply(UnaryOp::Relu, -0.5), 0.0);
        assert_eq!(apply(UnaryOp::LeakyRelu(0.25), -2.0), -0.5);
        assert_eq!(apply(UnaryOp::Log, 0.0), f32::NEG_INFINITY);
        assert!(apply(UnaryOp::Sqrt, -1.0).is_nan());
    }
}
