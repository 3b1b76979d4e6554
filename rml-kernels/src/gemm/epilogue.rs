//! Fused GEMM epilogues: what happens to a C tile after its last K block, while it
//! is still in L1.
//!
//! The order is fixed: `C ← act(s[j] · (alpha·op(A)·op(B) + beta·C) + bias[j] + R[i, j])`
//! where `s` is the per-column scale, `bias` the per-column bias and `R` the residual
//! matrix; every part is optional.

use super::mat::{MatMut, MatRef};
use crate::elementwise::{UnaryOp, unary_inplace};
use rml_core::{Error, Result};

/// Element-wise activation applied last in an [`Epilogue`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activation {
    /// Identity.
    #[default]
    None,
    /// `max(x, 0)`.
    Relu,
    /// Exact GELU, `x · Φ(x) = x/2 · (1 + erf(x/√2))`.
    Gelu,
    /// The tanh approximation of GELU, `x/2 · (1 + tanh(√(2/π)(x + 0.044715 x³)))`.
    GeluTanh,
    /// SiLU (swish), `x · sigmoid(x)`.
    Silu,
}

impl Activation {
    /// The activation of one value (scalar formula, also the test reference).
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::None => x,
            Activation::Relu => x.max(0.0),
            Activation::Gelu => 0.5 * x * (1.0 + libm::erff(x * core::f32::consts::FRAC_1_SQRT_2)),
            Activation::GeluTanh => {
                const SQRT_2_OVER_PI: f32 = 0.797_884_6;
                0.5 * x * (1.0 + libm::tanhf(SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x)))
            }
            Activation::Silu => x / (1.0 + libm::expf(-x)),
        }
    }
}

/// Work fused into the GEMM store; the default does nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Epilogue<'a> {
    /// Per-column scale `s` (length N), applied to `alpha·op(A)·op(B) + beta·C`.
    pub col_scale: Option<&'a [f32]>,
    /// Per-column bias (length N).
    pub bias: Option<&'a [f32]>,
    /// A residual matrix `R` (M × N) added before the activation.
    pub residual: Option<MatRef<'a, f32>>,
    /// Activation applied last.
    pub activation: Activation,
}

impl<'a> Epilogue<'a> {
    /// True when the epilogue changes nothing.
    pub fn is_identity(&self) -> bool {
        self.col_scale.is_none()
            && self.bias.is_none()
            && self.residual.is_none()
            && self.activation == Activation::None
    }

    /// Checks lengths against an `m × n` output.
    pub(crate) fn check(&self, m: usize, n: usize) -> Result<()> {
        for v in [self.col_scale, self.bias].into_iter().flatten() {
            if v.len() != n {
                return Err(Error::LengthMismatch {
                    expected: n,
                    got: v.len(),
                });
            }
        }
        if let Some(r) = &self.residual
            && (r.rows != m || r.cols != n)
        {
            return Err(Error::ShapeMismatch {
                op: "gemm residual",
            });
        }
        Ok(())
    }

    /// The epilogue of the sub-problem `rows × cols` (already checked).
    pub(crate) fn sub(
        &self,
        rows: core::ops::Range<usize>,
        cols: core::ops::Range<usize>,
    ) -> Result<Epilogue<'a>> {
        Ok(Epilogue {
            col_scale: self.col_scale.map(|s| &s[cols.clone()]),
            bias: self.bias.map(|s| &s[cols.clone()]),
            residual: match self.residual {
                Some(r) => Some(r.sub(rows, cols)?),
                None => None,
            },
            activation: self.activation,
        })
    }

    /// Applies the epilogue to rows `i0..i0+mr`, columns `j0..j0+nr` of `c`.
    pub(crate) fn apply_tile(
        &self,
        c: &mut MatMut<'_>,
        i0: usize,
        mr: usize,
        j0: usize,
        nr: usize,
    ) {
        for i in i0..i0 + mr {
            if c.cs == 1 {
                let s = i * c.rs + j0;
                self.apply_row(&mut c.data[s..s + nr], i, j0);
            } else {
                let mut buf = [0.0f32; super::NR];
                for start in (0..nr).step_by(buf.len()) {
                    let len = buf.len().min(nr - start);
                    for (q, v) in buf[..len].iter_mut().enumerate() {
                        *v = c.data[i * c.rs + (j0 + start + q) * c.cs];
                    }
                    self.apply_row(&mut buf[..len], i, j0 + start);
                    for (q, v) in buf[..len].iter().enumerate() {
                        c.data[i * c.rs + (j0 + start + q) * c.cs] = *v;
                    }
                }
            }
        }
    }

    /// Applies the epilogue to `row`, which holds row `i`, columns `j0..` of C.
    /// Each stage is its own loop so the simple ones vectorize.
    pub(crate) fn apply_row(&self, row: &mut [f32], i: usize, j0: usize) {
        let n = row.len();
        if let Some(s) = self.col_scale {
            for (v, s) in row.iter_mut().zip(&s[j0..j0 + n]) {
                *v *= *s;
            }
        }
        if let Some(b) = self.bias {
            for (v, b) in row.iter_mut().zip(&b[j0..j0 + n]) {
                *v += *b;
            }
        }
        if let Some(r) = &self.residual {
            if r.cs == 1 {
                let s = i * r.rs + j0;
                for (v, x) in row.iter_mut().zip(&r.data[s..s + n]) {
                    *v += *x;
                }
            } else {
                for (q, v) in row.iter_mut().enumerate() {
                    *v += r.data[i * r.rs + (j0 + q) * r.cs];
                }
            }
        }
        // The vectorized math kernels (`crate::math`, errors documented there),
        // not the scalar `Activation::apply`.
        let op = match self.activation {
            Activation::None => return,
            Activation::Relu => return row.iter_mut().for_each(|v| *v = v.max(0.0)),
            Activation::Gelu => UnaryOp::Gelu,
            Activation::GeluTanh => UnaryOp::GeluTanh,
            Activation::Silu => UnaryOp::Silu,
        };
        unary_inplace(op, row);
    }
}
