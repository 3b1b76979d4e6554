//! Conversions between what a file stores and what the decoder computes with.
//!
//! * [`to_f32`]: any float or GGML-quantized tensor to f32 values.
//! * [`permute_qk`] / [`unpermute_qk`]: the llama.cpp converter's Q/K row order.
//!   Within each head, GGUF row `2i + j` is Hugging Face row `j·(d/2) + i`
//!   (`j ∈ {0, 1}`), so adjacent-pair RoPE on permuted rows equals rotate-half
//!   RoPE on the original ones.
//! * [`split_rows`]: fused projections (Phi-3 `qkv_proj`, `gate_up_proj`).

use rml_core::DType;
use rml_host::Tensor;

use crate::error::{Error, Result};

/// The tensor's values as f32 in row-major order (F32, F16, BF16, F64 exactly;
/// GGML block types dequantized).
pub fn to_f32(name: &str, t: &Tensor) -> Result<Vec<f32>> {
    match t.dtype() {
        DType::F32 => Ok(t.to_vec::<f32>()?),
        d if d.is_quantized() => {
            let bytes = t.contiguous_bytes()?;
            let mut out = vec![0.0; t.numel()];
            rml_kernels::quant::dequantize(d, bytes, &mut out)
                .map_err(Error::core("dequantize weight"))?;
            Ok(out)
        }
        DType::F16 | DType::BF16 | DType::F64 => {
            Ok(t.to_f64_vec()?.into_iter().map(|v| v as f32).collect())
        }
        other => Err(Error::Input(format!(
            "tensor {name:?} has dtype {other:?}, not a float or GGML block type"
        ))),
    }
}

/// Reorders the rows of a `[heads·head_dim, cols]` Q or K matrix (or a bias, with
/// `cols == 1`) from rotate-half order to the adjacent-pair order of GGUF `llama`.
pub fn permute_qk(w: &[f32], heads: usize, head_dim: usize, cols: usize) -> Vec<f32> {
    reorder_rows(w, heads, head_dim, cols, |i, j| {
        (2 * i + j, j * (head_dim / 2) + i)
    })
}

/// The inverse of [`permute_qk`]: adjacent-pair order back to rotate-half order.
pub fn unpermute_qk(w: &[f32], heads: usize, head_dim: usize, cols: usize) -> Vec<f32> {
    reorder_rows(w, heads, head_dim, cols, |i, j| {
        (j * (head_dim / 2) + i, 2 * i + j)
    })
}

/// Copies row `src` of each head to row `dst`, for `(dst, src) = map(i, j)`,
/// `i < head_dim/2`, `j ∈ {0, 1}`.
fn reorder_rows(
    w: &[f32],
    heads: usize,
    head_dim: usize,
    cols: usize,
    map: impl Fn(usize, usize) -> (usize, usize),
) -> Vec<f32> {
    let mut out = vec![0.0; w.len()];
    for h in 0..heads {
        let base = h * head_dim;
        for i in 0..head_dim / 2 {
            for j in 0..2 {
                let (dst, src) = map(i, j);
                let d = (base + dst) * cols;
                let s = (base + src) * cols;
                out[d..d + cols].copy_from_slice(&w[s..s + cols]);
            }
        }
    }
    out
}

/// Splits a row-major `[Σ rows, cols]` matrix into consecutive row blocks.
pub fn split_rows<T: Copy>(w: &[T], cols: usize, rows: &[usize]) -> Vec<Vec<T>> {
    let mut start = 0;
    rows.iter()
        .map(|&r| {
            let block = w[start * cols..(start + r) * cols].to_vec();
            start += r;
            block
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{RopeConfig, RopeScaling};
    use crate::rope::{Rope, RopeLayout};

    #[test]
    fn permutation_matches_the_index_formula_and_inverts() {
        let (heads, hd, cols) = (2, 8, 3);
        let w: Vec<f32> = (0..heads * hd * cols).map(|v| v as f32).collect();
        let p = permute_qk(&w, heads, hd, cols);
        // Head 1, new row 2·1 + 1 = 3 is old row 1·4 + 1 = 5.
        assert_eq!(
            &p[(8 + 3) * cols..(8 + 4) * cols],
            &w[(8 + 5) * cols..(8 + 6) * cols]
        );
        assert_eq!(unpermute_qk(&p, heads, hd, cols), w);
    }

    #[test]
    fn adjacent_rope_on_permuted_rows_equals_rotate_half_on_original() {
        let (heads, hd) = (3, 8);
        let cfg = RopeConfig {
            theta: 10_000.0,
            scaling: RopeScaling::None,
            rotary_dim: hd,
        };
        let q: Vec<f32> = (0..heads * hd).map(|v| (v as f32 * 0.731).cos()).collect();
        let mut neox = q.clone();
        Rope::new(&cfg, hd, RopeLayout::RotateHalf).apply(&mut neox, 7, 16);
        let mut adjacent = permute_qk(&q, heads, hd, 1);
        Rope::new(&cfg, hd, RopeLayout::Adjacent).apply(&mut adjacent, 7, 16);
        assert_eq!(permute_qk(&neox, heads, hd, 1), adjacent);
    }

    #[test]
    fn split_rows_takes_consecutive_blocks() {
        let w: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let parts = split_rows(&w, 2, &[1, 2, 3]);
        assert_eq!(parts[0], [0.0, 1.0]);
        assert_eq!(parts[1], [2.0, 3.0, 4.0, 5.0]);
        assert_eq!(parts[2], [6.0, 7.0, 8.0, 9.0, 10.0, 11.0]);
    }
}
