//! Linear layers over f32 or GGML-quantized weights.
//!
//! A [`Matrix`] is kept in the form the file had when a quantized dot product exists
//! for it (Q4_0 … Q8_0, K-quants): the activations are quantized once per call to the
//! weight's `vec_dot_type` and the `rml-kernels` quantized GEMM runs on the blocks.
//! Float weights stay in their file type (F32, F16, BF16; mapped in place when
//! aligned) and run on the `rml-kernels` GEMV/GEMM, which convert f16/bf16 to f32
//! on the fly and accumulate in f32.

use half::{bf16, f16};
use rml_core::DType;
use std::sync::Arc;

use rml_host::{Tensor, ThreadPool};
use rml_kernels::quant;

use crate::error::{Error, Result};
use crate::ops::{project, project_scratch_len};
use crate::parallel::for_each_row_chunk;
use crate::weights::transform::{split_rows, to_f32};
use rml_kernels::gemm::{SMALL_M, Weight};

/// Where a weight's values live: an owned copy, or the file's mapped tensor (no
/// copy; f32 only when the mapped bytes are 4-byte aligned).
#[derive(Clone, Debug)]
pub enum Store<T> {
    /// Values owned by the model.
    Owned(Vec<T>),
    /// A contiguous, aligned tensor sharing the file's memory.
    Mapped(Box<Tensor>),
}

impl<T: bytemuck::Pod> Store<T> {
    /// A mapped store when `t` is contiguous and its bytes can be read as `T` in place.
    fn mapped(t: &Tensor) -> Option<Store<T>> {
        let bytes = t.contiguous_bytes().ok()?;
        bytemuck::try_cast_slice::<u8, T>(bytes).ok()?;
        Some(Store::Mapped(Box::new(t.clone())))
    }

    /// The values.
    pub fn as_slice(&self) -> &[T] {
        match self {
            Store::Owned(v) => v,
            // Contiguity and alignment were checked when the store was made.
            Store::Mapped(t) => t
                .contiguous_bytes()
                .ok()
                .and_then(|b| bytemuck::try_cast_slice(b).ok())
                .unwrap_or(&[]),
        }
    }

    /// The mapped store, or an owned copy of the values when they cannot be read in
    /// place (not contiguous or misaligned).
    fn mapped_or_copied(t: &Tensor) -> Result<Store<T>>
    where
        T: rml_core::dtype::Element,
    {
        match Store::mapped(t) {
            Some(store) => Ok(store),
            None => Ok(Store::Owned(t.to_vec::<T>()?)),
        }
    }

    /// True when the values are the file's own bytes.
    pub fn is_mapped(&self) -> bool {
        matches!(self, Store::Mapped(_))
    }
}

/// The weight of a linear layer, row-major `[out, in]`.
#[derive(Clone, Debug)]
pub enum Matrix {
    /// f32 values.
    F32(Store<f32>),
    /// f16 values (F16 GGUF or safetensors), converted in the kernels.
    F16(Store<f16>),
    /// bf16 values (BF16 safetensors or GGUF), converted in the kernels.
    BF16(Store<bf16>),
    /// GGML blocks of `dtype`, one row after the other.
    Quantized {
        /// The block type.
        dtype: DType,
        /// The blocks.
        bytes: Store<u8>,
    },
}

impl Matrix {
    /// An owned f32 matrix.
    pub fn from_f32(values: Vec<f32>) -> Matrix {
        Matrix::F32(Store::Owned(values))
    }

    /// The tensor's values, kept quantized when `keep_quantized` and a quantized dot
    /// product exists for its dtype (else converted to f32); F32, F16 and BF16 kept
    /// as they are. Tensors kept in their type are used in place (no copy) when
    /// contiguous and aligned, else copied once.
    pub fn from_tensor(name: &str, t: &Tensor, keep_quantized: bool) -> Result<Matrix> {
        let dtype = t.dtype();
        if keep_quantized && dtype.is_quantized() && quant::is_weight_type(dtype) {
            let bytes = match Store::mapped(t) {
                Some(store) => store,
                None => Store::Owned(t.contiguous_bytes()?.to_vec()),
            };
            return Ok(Matrix::Quantized { dtype, bytes });
        }
        Ok(match dtype {
            DType::F16 => Matrix::F16(Store::mapped_or_copied(t)?),
            DType::BF16 => Matrix::BF16(Store::mapped_or_copied(t)?),
            DType::F32 => match Store::mapped(t) {
                Some(store) => Matrix::F32(store),
                None => Matrix::from_f32(t.to_vec::<f32>()?),
            },
            _ => Matrix::from_f32(to_f32(name, t)?),
        })
    }

    /// Splits a `[Σ rows, cols]` matrix into consecutive row blocks (copies).
    pub fn split_rows(self, cols: usize, rows: &[usize]) -> Result<Vec<Matrix>> {
        match self {
            Matrix::F32(w) => Ok(split_rows(w.as_slice(), cols, rows)
                .into_iter()
                .map(Matrix::from_f32)
                .collect()),
            Matrix::F16(w) => Ok(split_rows(w.as_slice(), cols, rows)
                .into_iter()
                .map(|v| Matrix::F16(Store::Owned(v)))
                .collect()),
            Matrix::BF16(w) => Ok(split_rows(w.as_slice(), cols, rows)
                .into_iter()
                .map(|v| Matrix::BF16(Store::Owned(v)))
                .collect()),
            Matrix::Quantized { dtype, bytes } => {
                let rb =
                    quant::row_bytes(dtype, cols).map_err(Error::core("split quantized rows"))?;
                Ok(split_rows_bytes(bytes.as_slice(), rb, rows)
                    .into_iter()
                    .map(|b| Matrix::Quantized {
                        dtype,
                        bytes: Store::Owned(b),
                    })
                    .collect())
            }
        }
    }

    /// The element type the values are held in (F32, F16, BF16 or a GGML block type).
    pub fn dtype(&self) -> DType {
        match self {
            Matrix::F32(_) => DType::F32,
            Matrix::F16(_) => DType::F16,
            Matrix::BF16(_) => DType::BF16,
            Matrix::Quantized { dtype, .. } => *dtype,
        }
    }

    /// Row `row` of a matrix `cols` wide as f32 into `out` (`cols` values): copied,
    /// widened, or dequantized from that row's blocks only (a token-embedding lookup
    /// reads one row, never the table).
    pub fn row_f32(&self, row: usize, cols: usize, out: &mut [f32]) -> Result<()> {
        fn widen<T: Weight>(w: &[T], row: usize, cols: usize, out: &mut [f32]) -> Result<()> {
            let src = w
                .get(row * cols..(row + 1) * cols)
                .ok_or_else(|| out_of_range(row))?;
            out.iter_mut().zip(src).for_each(|(o, v)| *o = v.to_f32());
            Ok(())
        }
        let out = &mut out[..cols];
        match self {
            Matrix::F32(w) => widen(w.as_slice(), row, cols, out),
            Matrix::F16(w) => widen(w.as_slice(), row, cols, out),
            Matrix::BF16(w) => widen(w.as_slice(), row, cols, out),
            Matrix::Quantized { dtype, bytes } => {
                let rb = quant::row_bytes(*dtype, cols).map_err(Error::core("matrix row"))?;
                let src = bytes
                    .as_slice()
                    .get(row * rb..(row + 1) * rb)
                    .ok_or_else(|| out_of_range(row))?;
                quant::dequantize(*dtype, src, out).map_err(Error::core("dequantize row"))
            }
        }
    }

    /// Bytes held (mapped or owned).
    pub fn bytes(&self) -> usize {
        match self {
            Matrix::F32(w) => size_of_val(w.as_slice()),
            Matrix::F16(w) => size_of_val(w.as_slice()),
            Matrix::BF16(w) => size_of_val(w.as_slice()),
            Matrix::Quantized { bytes, .. } => bytes.as_slice().len(),
        }
    }

    /// True when the values are used in place in the mapped file.
    pub fn is_mapped(&self) -> bool {
        match self {
            Matrix::F32(w) => w.is_mapped(),
            Matrix::F16(w) => w.is_mapped(),
            Matrix::BF16(w) => w.is_mapped(),
            Matrix::Quantized { bytes, .. } => bytes.is_mapped(),
        }
    }
}

fn out_of_range(row: usize) -> Error {
    Error::Input(format!("row {row} is outside the matrix"))
}

fn split_rows_bytes(bytes: &[u8], row_bytes: usize, rows: &[usize]) -> Vec<Vec<u8>> {
    let mut start = 0;
    rows.iter()
        .map(|&r| {
            let block = bytes[start * row_bytes..(start + r) * row_bytes].to_vec();
            start += r;
            block
        })
        .collect()
}

/// `y = x·Wᵀ + b`.
#[derive(Clone, Debug)]
pub struct Linear {
    weight: Matrix,
    bias: Option<Vec<f32>>,
    out_dim: usize,
    in_dim: usize,
}

impl Linear {
    /// A layer from a `[out_dim, in_dim]` weight and an optional bias.
    pub fn new(weight: Matrix, bias: Option<Vec<f32>>, out_dim: usize, in_dim: usize) -> Linear {
        Linear {
            weight,
            bias,
            out_dim,
            in_dim,
        }
    }

    /// A layer over f32 values.
    pub fn from_f32(
        weight: Vec<f32>,
        bias: Option<Vec<f32>>,
        out_dim: usize,
        in_dim: usize,
    ) -> Linear {
        Linear::new(Matrix::from_f32(weight), bias, out_dim, in_dim)
    }

    /// Outputs per row.
    pub fn out_dim(&self) -> usize {
        self.out_dim
    }

    /// Inputs per row.
    pub fn in_dim(&self) -> usize {
        self.in_dim
    }

    /// The weight.
    pub fn weight(&self) -> &Matrix {
        &self.weight
    }

    /// Bytes of parameters held.
    pub fn bytes(&self) -> usize {
        self.weight.bytes() + self.bias.as_ref().map_or(0, Vec::len) * size_of::<f32>()
    }

    /// The scratch [`Linear::forward`] needs for `m` rows.
    pub fn scratch_need(&self, m: usize) -> Result<LinearScratch> {
        let (quant, gemm) = match &self.weight {
            Matrix::F32(_) | Matrix::F16(_) | Matrix::BF16(_) => {
                (0, project_scratch_len(m, self.out_dim, self.in_dim))
            }
            Matrix::Quantized { dtype, .. } => (
                quant::gemm_scratch_len(*dtype, m, self.in_dim)
                    .map_err(Error::core("quantized linear"))?,
                0,
            ),
        };
        Ok(LinearScratch::with_capacity(quant, gemm))
    }

    /// `y[m × out] = x[m × in]·Wᵀ + b`; `scratch` grows only when smaller than
    /// [`Linear::scratch_need`].
    pub fn forward(
        &self,
        x: &[f32],
        m: usize,
        y: &mut [f32],
        scratch: &mut LinearScratch,
    ) -> Result<()> {
        if let Some(pool) = scratch.pool.clone()
            && pool.threads() > 1
        {
            if m == 1 {
                return self.forward_row_threaded(&pool, x, &mut y[..self.out_dim], scratch);
            }
            if m > SMALL_M {
                return self.forward_rows_threaded(&pool, x, &mut y[..m * self.out_dim]);
            }
        }
        let bias = self.bias.as_deref();
        let (n, gemm) = (self.out_dim, &mut scratch.gemm);
        match &self.weight {
            Matrix::F32(w) => project(x, m, w.as_slice(), bias, n, y, gemm),
            Matrix::F16(w) => project(x, m, w.as_slice(), bias, n, y, gemm),
            Matrix::BF16(w) => project(x, m, w.as_slice(), bias, n, y, gemm),
            Matrix::Quantized { dtype, bytes } => {
                let ctx = || Error::core("quantized linear");
                let (k, n) = (self.in_dim, self.out_dim);
                let need = quant::gemm_scratch_len(*dtype, m, k).map_err(ctx())?;
                scratch.quant.resize(need, 0);
                let y = &mut y[..m * n];
                quant::gemm(
                    *dtype,
                    bytes.as_slice(),
                    k,
                    &x[..m * k],
                    m,
                    0..n,
                    y,
                    n,
                    &mut scratch.quant,
                )
                .map_err(ctx())?;
                self.add_bias(y);
                Ok(())
            }
        }
    }

    /// One row, output features split across `pool` (decode).
    fn forward_row_threaded(
        &self,
        pool: &ThreadPool,
        x: &[f32],
        y: &mut [f32],
        scratch: &mut LinearScratch,
    ) -> Result<()> {
        let k = self.in_dim;
        let x = &x[..k];
        match &self.weight {
            Matrix::F32(w) => self.float_row_threaded(pool, w.as_slice(), x, y),
            Matrix::F16(w) => self.float_row_threaded(pool, w.as_slice(), x, y),
            Matrix::BF16(w) => self.float_row_threaded(pool, w.as_slice(), x, y),
            Matrix::Quantized { dtype, bytes } => {
                let ctx = || Error::core("quantized linear");
                let act = quant::vec_dot_type(*dtype).map_err(ctx())?;
                scratch
                    .quant
                    .resize(quant::gemm_scratch_len(*dtype, 1, k).map_err(ctx())?, 0);
                quant::quantize_act(act, x, &mut scratch.quant).map_err(ctx())?;
                let (acts, weights) = (&scratch.quant[..], bytes.as_slice());
                for_each_row_chunk(pool, y, 1, 32, k, |rows, out| {
                    let ldo = rows.len();
                    quant::gemm_quantized(*dtype, weights, k, acts, 1, rows, out, ldo)
                        .map_err(ctx())
                })?;
                self.add_bias(y);
                Ok(())
            }
        }
    }

    /// One row on a float weight `w`, output features split across `pool`.
    fn float_row_threaded<T: Weight + Sync>(
        &self,
        pool: &ThreadPool,
        w: &[T],
        x: &[f32],
        y: &mut [f32],
    ) -> Result<()> {
        let k = self.in_dim;
        let bias = self.bias.as_deref();
        for_each_row_chunk(pool, y, 1, 32, k, |rows, out| {
            let b = bias.map(|b| &b[rows.clone()]);
            let rw = &w[rows.start * k..rows.end * k];
            project(x, 1, rw, b, rows.len(), out, &mut Vec::new())
        })
    }

    /// Many rows (prefill), token rows split across `pool`; each chunk runs the
    /// serial path on its rows with its own scratch.
    fn forward_rows_threaded(&self, pool: &ThreadPool, x: &[f32], y: &mut [f32]) -> Result<()> {
        let (k, n) = (self.in_dim, self.out_dim);
        let serial = LinearScratch::default();
        for_each_row_chunk(pool, y, n, SMALL_M + 1, k * n, |rows, out| {
            let mut own = serial.clone();
            self.forward(&x[rows.start * k..rows.end * k], rows.len(), out, &mut own)
        })
    }

    fn add_bias(&self, y: &mut [f32]) {
        if let Some(b) = &self.bias {
            for row in y.chunks_exact_mut(self.out_dim) {
                row.iter_mut().zip(b).for_each(|(v, b)| *v += b);
            }
        }
    }
}

/// Scratch of [`Linear::forward`]: quantized activations, packed GEMM blocks, and
/// the thread pool single-row (decode) projections are split across, if any.
#[derive(Clone, Debug, Default)]
pub struct LinearScratch {
    quant: Vec<u8>,
    gemm: Vec<f32>,
    pool: Option<Arc<ThreadPool>>,
}

impl LinearScratch {
    /// Room for `quant` bytes of quantized activations and `gemm` f32 GEMM scratch.
    pub fn with_capacity(quant: usize, gemm: usize) -> LinearScratch {
        LinearScratch {
            quant: Vec::with_capacity(quant),
            gemm: Vec::with_capacity(gemm),
            pool: None,
        }
    }

    /// Room for both `self` and `other`.
    pub fn max(self, other: LinearScratch) -> LinearScratch {
        LinearScratch::with_capacity(
            self.quant.capacity().max(other.quant.capacity()),
            self.gemm.capacity().max(other.gemm.capacity()),
        )
    }

    /// Another scratch with the same room and pool (`clone` would keep only the
    /// contents).
    pub fn same_room(&self) -> LinearScratch {
        LinearScratch {
            pool: self.pool.clone(),
            ..LinearScratch::with_capacity(self.quant.capacity(), self.gemm.capacity())
        }
    }

    /// Splits single-row projections across `pool` from now on.
    pub fn set_pool(&mut self, pool: Option<Arc<ThreadPool>>) {
        self.pool = pool;
    }

    /// The f32 GEMM scratch (also used by projections outside a [`Linear`]).
    pub fn gemm(&mut self) -> &mut Vec<f32> {
        &mut self.gemm
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_linear_matches_a_hand_product() {
        let l = Linear::from_f32(
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            Some(vec![0.5, -1.0]),
            2,
            3,
        );
        let mut y = [0.0; 4];
        l.forward(
            &[1.0, 0.0, -1.0, 2.0, 1.0, 0.0],
            2,
            &mut y,
            &mut LinearScratch::default(),
        )
        .unwrap();
        assert_eq!(y, [-1.5, -3.0, 4.5, 12.0]);
    }

    #[test]
    fn q8_0_linear_is_close_to_the_dequantized_one_and_splits_by_rows() {
        let (n, k) = (6, 64);
        let w: Vec<f32> = (0..n * k)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
            .collect();
        let mut blocks = vec![0u8; DType::Q8_0.storage_bytes(n * k).unwrap()];
        rml_core::quant::quantize_bytes(DType::Q8_0, &w, &mut blocks).unwrap();
        let t = Tensor::from_raw(DType::Q8_0, &[n, k], &blocks).unwrap();
        let q = Matrix::from_tensor("w", &t, true).unwrap();
        let f = Matrix::from_tensor("w", &t, false).unwrap();
        assert!(matches!(q, Matrix::Quantized { .. }) && matches!(f, Matrix::F32(_)));
        let x: Vec<f32> = (0..2 * k).map(|i| (i as f32 * 0.1).sin()).collect();
        let (mut yq, mut yf) = (vec![0.0; 2 * n], vec![0.0; 2 * n]);
        let bias = Some(vec![1.0; n]);
        Linear::new(q.clone(), bias.clone(), n, k)
            .forward(&x, 2, &mut yq, &mut LinearScratch::default())
            .unwrap();
        Linear::new(f, bias, n, k)
            .forward(&x, 2, &mut yf, &mut LinearScratch::default())
            .unwrap();
        for (a, b) in yq.iter().zip(&yf) {
            assert!((a - b).abs() < 2e-2 * (1.0 + b.abs()), "{a} vs {b}");
        }
        let parts = q.split_rows(k, &[2, 4]).unwrap();
        assert_eq!(parts[0].bytes() * 2, parts[1].bytes());
        assert_eq!(parts[0].bytes() + parts[1].bytes(), blocks.len());
    }
}
