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

use std::ops::Range;

use rml_host::{Tensor, ThreadPool};
use rml_kernels::quant;

use crate::error::{Error, Result};
use crate::ops::{project, project_scratch_len};
use crate::parallel::{Split, for_each_chunk};
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
        Linear::forward_shared([self], x, m, [y], scratch)
    }

    /// `ys[j][m × out_j] = x·W_jᵀ + b_j` for projections of one input (q/k/v,
    /// gate/up), each equal to [`Linear::forward`]: `x` is quantized once per
    /// activation type the weights need, and with a pool the projections are split
    /// across its threads in one hand-off (decode: output features, bit-identical to
    /// one thread; prefill of more than `SMALL_M` rows: token rows, at least
    /// `SMALL_M + 1` a thread, so every thread runs the kernel one thread would).
    /// Weights that need different activation types run one after the other.
    pub fn forward_shared<const N: usize>(
        layers: [&Linear; N],
        x: &[f32],
        m: usize,
        ys: [&mut [f32]; N],
        scratch: &mut LinearScratch,
    ) -> Result<()> {
        let Some(first) = layers.first() else {
            return Ok(());
        };
        let k = first.in_dim;
        if layers.iter().any(|l| l.in_dim != k) {
            return Err(Error::Input(
                "projections of one input differ in width".into(),
            ));
        }
        let x = x.get(..m * k).ok_or_else(|| {
            Error::Input(format!("{} inputs are fewer than {m} rows of {k}", x.len()))
        })?;
        let mut ys = ys;
        for (l, y) in layers.iter().zip(ys.iter_mut()) {
            let need = m * l.out_dim;
            if y.len() < need {
                return Err(Error::Input(format!(
                    "{} outputs are fewer than {m} rows of {}",
                    y.len(),
                    l.out_dim
                )));
            }
            *y = &mut std::mem::take(y)[..need];
        }
        let Some(act) = shared_act_type(&layers)? else {
            // Weights needing different activations: one projection at a time.
            for (l, y) in layers.into_iter().zip(ys) {
                Linear::forward_shared([l], x, m, [y], scratch)?;
            }
            return Ok(());
        };
        if let Some(act) = act {
            let need = act
                .storage_bytes(m * k)
                .map_err(Error::core("quantized linear"))?;
            scratch.quant.resize(need, 0);
            let arb = need / m.max(1);
            for (xr, ar) in x
                .chunks_exact(k.max(1))
                .zip(scratch.quant.chunks_exact_mut(arb.max(1)))
            {
                quant::quantize_act(act, xr, ar).map_err(Error::core("quantize activations"))?;
            }
        }
        let input = match act {
            Some(_) => Input::Quantized(&scratch.quant, k, scratch.quant.len() / m.max(1)),
            None => Input::F32(x, k),
        };
        let pool = scratch.pool.clone().filter(|p| p.threads() > 1);
        match pool {
            Some(pool) if m == 1 || m > SMALL_M => {
                let cost = layers.iter().map(|l| l.out_dim * k * m).sum();
                let (row_lens, split) = if m == 1 {
                    ([1; N], Split::decode(FEATURE_GRAIN))
                } else {
                    (
                        layers.map(|l| l.out_dim),
                        Split::one_per_thread(SMALL_M + 1),
                    )
                };
                for_each_chunk(&pool, ys, row_lens, split, cost, |j, rows, out| {
                    let l = layers[j];
                    if m == 1 {
                        l.compute(&input, 0..1, rows, out, &mut Vec::new())
                    } else {
                        l.compute(&input, rows, 0..l.out_dim, out, &mut Vec::new())
                    }
                })
            }
            _ => {
                for (l, y) in layers.iter().zip(ys) {
                    l.compute(&input, 0..m, 0..l.out_dim, y, &mut scratch.gemm)?;
                }
                Ok(())
            }
        }
    }

    /// `out[(i − tokens.start)·features.len() + (r − features.start)] = x_i · W[r] + b[r]`
    /// for the token rows `i` and weight rows `r`; `gemm` is the float GEMM's scratch.
    fn compute(
        &self,
        input: &Input<'_>,
        tokens: Range<usize>,
        features: Range<usize>,
        out: &mut [f32],
        gemm: &mut Vec<f32>,
    ) -> Result<()> {
        let (m, n) = (tokens.len(), features.len());
        let bias = self.bias.as_deref().map(|b| &b[features.clone()]);
        let rows = |k: usize| features.start * k..features.end * k;
        match (input, &self.weight) {
            (Input::F32(x, k), weight) => {
                let x = &x[tokens.start * k..tokens.end * k];
                match weight {
                    Matrix::F32(w) => project(x, m, &w.as_slice()[rows(*k)], bias, n, out, gemm),
                    Matrix::F16(w) => project(x, m, &w.as_slice()[rows(*k)], bias, n, out, gemm),
                    Matrix::BF16(w) => project(x, m, &w.as_slice()[rows(*k)], bias, n, out, gemm),
                    Matrix::Quantized { .. } => {
                        Err(Error::Input("f32 input to quantized weights".into()))
                    }
                }
            }
            (Input::Quantized(acts, k, arb), Matrix::Quantized { dtype, bytes }) => {
                let acts = &acts[tokens.start * arb..tokens.end * arb];
                let out = &mut out[..m * n];
                quant::gemm_quantized(*dtype, bytes.as_slice(), *k, acts, m, features, out, n)
                    .map_err(Error::core("quantized linear"))?;
                if let Some(b) = bias {
                    for row in out.chunks_exact_mut(n.max(1)) {
                        row.iter_mut().zip(b).for_each(|(v, b)| *v += b);
                    }
                }
                Ok(())
            }
            (Input::Quantized(..), _) => {
                Err(Error::Input("quantized input to float weights".into()))
            }
        }
    }
}

/// Decode output features per chunk at least.
const FEATURE_GRAIN: usize = 32;

/// A projection's input as its weights need it: f32 rows, or rows of quantized
/// activation blocks (`k` elements, `arb` bytes each).
enum Input<'a> {
    F32(&'a [f32], usize),
    Quantized(&'a [u8], usize, usize),
}

/// The activation type every layer's weights need (`Some(None)` for float weights),
/// or `None` when they differ.
fn shared_act_type(layers: &[&Linear]) -> Result<Option<Option<DType>>> {
    let act = |l: &Linear| match &l.weight {
        Matrix::Quantized { dtype, .. } => quant::vec_dot_type(*dtype)
            .map(Some)
            .map_err(Error::core("quantized linear")),
        _ => Ok(None),
    };
    let first = layers.first().map_or(Ok(None), |l| act(l))?;
    for l in layers {
        if act(l)? != first {
            return Ok(None);
        }
    }
    Ok(Some(first))
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

    /// The pool projections are split across, if any.
    pub(crate) fn pool(&self) -> Option<&ThreadPool> {
        self.pool.as_deref()
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
