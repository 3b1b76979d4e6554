//! Between the host's files and the graph stack: `.npy`-read [`Tensor`]s to and from
//! [`DenseTensor`]s, a safetensors file as [`MemoryConstants`], and a graph file with
//! its weights.

use std::path::Path;

use rml_core::{DType, Shape};

use super::buffer::{Buffer, DenseTensor};
use super::constants::MemoryConstants;
use super::ir::Graph;
use super::load::load_graph;
use crate::Tensor;
use crate::formats::safetensors::SafeTensors;

/// `t` as a dense tensor of dtype `want` (`F32`, `I64` or `BOOL`); a float file feeds
/// an `F32` input whatever its width.
pub fn to_dense(t: &Tensor, want: DType) -> Result<DenseTensor, String> {
    let shape = Shape::new(t.dims()).map_err(|e| e.to_string())?;
    let err = |e: crate::Error| e.to_string();
    let data = match (want, t.dtype()) {
        (DType::F32, DType::F32) => Buffer::F32(t.to_vec::<f32>().map_err(err)?),
        (DType::F32, d) if d.is_float() => Buffer::F32(
            t.to_f64_vec()
                .map_err(err)?
                .into_iter()
                .map(|v| v as f32)
                .collect(),
        ),
        (DType::I64, DType::I64) => Buffer::I64(t.to_vec::<i64>().map_err(err)?),
        (DType::Bool, DType::Bool) => Buffer::Bool(t.contiguous().to_bytes()),
        (want, got) => return Err(format!("expected {want} data, the file holds {got}")),
    };
    Ok(DenseTensor { shape, data })
}

/// `t` as a host tensor (for writing `.npy`).
pub fn to_tensor(t: &DenseTensor) -> Result<Tensor, crate::Error> {
    let dims = t.shape.dims();
    match &t.data {
        Buffer::F32(v) => Tensor::from_slice(v, dims),
        Buffer::I64(v) => Tensor::from_slice(v, dims),
        Buffer::Bool(v) => {
            let bools: Vec<bool> = v.iter().map(|&b| b != 0).collect();
            Tensor::from_bools(&bools, dims)
        }
    }
}

/// Every tensor of a safetensors file as constants: `F32`, `I64` and `BOOL` with
/// their data, other dtypes described only (a graph using them fails when it runs).
pub fn load_weights(path: &Path) -> Result<MemoryConstants, crate::Error> {
    let file = SafeTensors::open(path)?;
    let mut constants = MemoryConstants::new();
    for (name, t) in file.load_all()? {
        match to_dense(&t, t.dtype()) {
            Ok(d) => constants.insert(&name, t.dims(), d.data),
            Err(_) => constants.describe_tensor(&name, t.dtype(), t.dims()),
        };
    }
    Ok(constants)
}

/// Loads the graph file at `path` and the safetensors file its `weights` key names
/// (relative to the graph's folder); a graph without one gets no constants. The
/// error names the file.
pub fn load_graph_file(path: &Path) -> Result<(Graph, MemoryConstants), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let doc: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let weights = match doc.get("weights").and_then(|w| w.as_str()) {
        Some(w) => load_weights(&dir.join(w)).map_err(|e| e.to_string())?,
        None => MemoryConstants::new(),
    };
    let graph = load_graph(&text, &weights).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((graph, weights))
}
