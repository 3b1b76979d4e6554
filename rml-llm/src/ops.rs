//! The few numeric building blocks the decoder composes: the f32 projection on the
//! `rml-kernels` GEMV (decode) or packed GEMM (prefill), RMSNorm over rows on the
//! vectorized `rml-kernels` row kernel, soft-capping on the `rml-core` reference op,
//! and the MLP activations on the vectorized `rml-kernels` elementwise kernel.

use rml_core::ops::unary::{UnaryOp, apply};
use rml_kernels::elementwise::{UnaryOp as KernelOp, unary_inplace};
use rml_kernels::gemm::{
    Epilogue, MatMut, MatRef, SMALL_M, Weight, gemm_ex, gemm_scratch_len, gemv_nk,
};

use crate::config::Activation;
use crate::error::{Error, Result};

/// `y[m × out] = x[m × in]·Wᵀ + b` for a row-major `[out, in]` weight `w` in f32,
/// f16 or bf16 (converted inside the kernels, f32 accumulation). Up to
/// [`SMALL_M`] rows run on the `rml-kernels` GEMV (each weight row streamed once per
/// group of rows); more rows (prefill) on the packed GEMM, with `scratch` grown to
/// [`project_scratch_len`] values when smaller.
pub fn project<T: Weight>(
    x: &[f32],
    m: usize,
    w: &[T],
    bias: Option<&[f32]>,
    out_dim: usize,
    y: &mut [f32],
    scratch: &mut Vec<f32>,
) -> Result<()> {
    let ctx = || Error::core("linear");
    let in_dim = w.len() / out_dim.max(1);
    let x = MatRef::row_major(&x[..m * in_dim], m, in_dim).map_err(ctx())?;
    let w = MatRef::row_major(w, out_dim, in_dim).map_err(ctx())?;
    let y = MatMut::row_major(&mut y[..m * out_dim], m, out_dim).map_err(ctx())?;
    let epi = Epilogue {
        bias,
        ..Epilogue::default()
    };
    if m <= SMALL_M {
        return gemv_nk(1.0, x, w, 0.0, y, &epi).map_err(ctx());
    }
    scratch.resize(project_scratch_len(m, out_dim, in_dim), 0.0);
    gemm_ex(1.0, x, w.t(), 0.0, y, &epi, scratch).map_err(ctx())
}

/// Scratch values [`project`] needs for `m` rows of an `[out_dim, in_dim]` weight.
pub fn project_scratch_len(m: usize, out_dim: usize, in_dim: usize) -> usize {
    if m <= SMALL_M {
        0
    } else {
        gemm_scratch_len(m, out_dim, in_dim)
    }
}

/// RMSNorm of each `width`-wide row of `x` into `out`, scaled by `weight`, on the
/// vectorized `rml-kernels` row kernel.
pub fn rms_norm_rows(
    x: &[f32],
    weight: &[f32],
    eps: f32,
    width: usize,
    out: &mut [f32],
) -> Result<()> {
    let rows = x.len() / width.max(1);
    if rows * width != x.len() {
        return Err(Error::Input(format!(
            "rms_norm: {} values are not rows of {width}",
            x.len()
        )));
    }
    let ctx = || Error::core("rms_norm");
    rml_kernels::norm::rms_norm_rows(x, width, 0..rows, Some(weight), eps, out).map_err(ctx())
}

/// RMSNorm of `x`'s rows in place, using `scratch` (same length) as the copy.
pub fn rms_norm_in_place(
    x: &mut [f32],
    weight: &[f32],
    eps: f32,
    width: usize,
    scratch: &mut Vec<f32>,
) -> Result<()> {
    scratch.clear();
    scratch.extend_from_slice(x);
    rms_norm_rows(scratch, weight, eps, width, x)
}

/// `c·tanh(v/c)` for every value (Gemma 2 attention and logit soft-capping).
pub fn softcap(values: &mut [f32], cap: f32) {
    for v in values {
        *v = cap * apply(UnaryOp::Tanh, *v / cap);
    }
}

/// `act(gate) ⊙ up` into `gate`, the activation on the vectorized `rml-kernels`
/// elementwise kernel (a few ulp from the `rml-core` reference).
pub fn gated(activation: Activation, gate: &mut [f32], up: &[f32]) {
    let op = match activation {
        Activation::Silu => KernelOp::Silu,
        Activation::GeluTanh => KernelOp::GeluTanh,
        Activation::Gelu => KernelOp::Gelu,
    };
    unary_inplace(op, gate);
    for (g, u) in gate.iter_mut().zip(up) {
        *g *= u;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rms_norm_rows_normalizes_each_row() {
        let mut out = [0.0; 4];
        rms_norm_rows(&[3.0, 4.0, 1.0, 1.0], &[1.0, 2.0], 0.0, 2, &mut out).unwrap();
        let r = (12.5f32).sqrt();
        assert!((out[0] - 3.0 / r).abs() < 1e-6 && (out[1] - 8.0 / r).abs() < 1e-6);
        assert!((out[2] - 1.0).abs() < 1e-6 && (out[3] - 2.0).abs() < 1e-6);
    }

    #[test]
    fn softcap_bounds_values() {
        let mut v = [0.0, 1000.0, -1000.0];
        softcap(&mut v, 30.0);
        assert_eq!(v[0], 0.0);
        assert!((v[1] - 30.0).abs() < 1e-4 && (v[2] + 30.0).abs() < 1e-4);
    }
}
