//! Quantizing a GGUF model, or converting a Hugging Face safetensors directory
//! ([`crate::convert`]), into a new GGUF file, with the tensor rules of llama.cpp's
//! `llama-quantize`:
//!
//! * A tensor is quantized when its name ends in `weight` and it has at least two
//!   dimensions; 1-D tensors (norms, biases) and the MoE router
//!   (`ffn_gate_inp.weight`), `rope_freqs.weight` and position embeddings keep
//!   their type.
//! * `token_embd.weight` and `output.weight` take the main type unless an override
//!   names another (llama-quantize's `--token-embedding-type` / `--output-tensor-type`).
//!   Plain types give every quantized tensor that type (llama-quantize's `--pure`);
//!   a K-quant mix ([`Mix`]: `Q4_K_M`, …) picks each tensor's type as llama-quantize
//!   does for it ([`mix`]).
//! * A row length that is not a whole number of the type's blocks falls back as
//!   llama.cpp does: Q2_K/Q3_K → Q4_0 (llama.cpp uses IQ4_NL, which rml does not
//!   have), Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0; if that fails too, F16.
//! * Source values are read as f32 (F16/BF16 widened, quantized tensors dequantized)
//!   and quantized with `rml-core`'s reference quantizers, which are ggml's
//!   `quantize_row_*_ref` bit for bit. A tensor already of the chosen type is copied.
//!
//! GGUF input: metadata (the alignment included) is copied. Hugging Face input: the
//! metadata is made from `config.json` and the tokenizer, every tensor is read as f32
//! and 1-D tensors, the router and rope factors are written as F32 (as llama.cpp's
//! converter does). Either way `general.file_type` is set to llama.cpp's
//! `LLAMA_FTYPE` for the type (or mix) and `general.quantization_version` to 2.

pub mod mix;

use std::path::Path;

use rml_core::{DType, GgmlType};
use rml_host::formats::gguf::{GgufFile, GgufWriter, OwnedValue};

use crate::convert::HfModel;
use crate::error::{Error, Result};
use crate::weights::transform::to_f32;
use crate::weights::{GgufSource, WeightSource};

pub use mix::Mix;

/// The types `quantize` writes.
pub const QUANT_TYPES: [DType; 12] = [
    DType::Q4_0,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q8_0,
    DType::Q2K,
    DType::Q3K,
    DType::Q4K,
    DType::Q5K,
    DType::Q6K,
    DType::F16,
    DType::F32,
];

/// Parses a type name among [`QUANT_TYPES`] or a [`Mix`] name (`Q4_K_M`, any case)
/// into the options' `(ty, mix)`.
pub fn parse_quant(name: &str) -> Result<(DType, Option<Mix>)> {
    match Mix::parse(name) {
        Some(m) => Ok((m.base(), Some(m))),
        None => parse_type(name).map(|ty| (ty, None)).map_err(|_| {
            let mut names: Vec<&str> = QUANT_TYPES.iter().map(|d| d.name()).collect();
            names.extend(Mix::ALL.iter().map(|m| m.name()));
            Error::Input(format!(
                "unknown quantization type {name:?}; one of {}",
                names.join(", ")
            ))
        }),
    }
}

/// Parses a type name (`Q4_0`, `q4_k`, `F16`, …) among [`QUANT_TYPES`].
pub fn parse_type(name: &str) -> Result<DType> {
    DType::parse(name)
        .ok()
        .filter(|d| QUANT_TYPES.contains(d))
        .ok_or_else(|| {
            let names: Vec<&str> = QUANT_TYPES.iter().map(|d| d.name()).collect();
            Error::Input(format!(
                "unknown quantization type {name:?}; one of {}",
                names.join(", ")
            ))
        })
}

/// What to quantize to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuantizeOptions {
    /// The type of the quantized tensors (with a mix, its base type).
    pub ty: DType,
    /// A K-quant mix choosing some tensors' types per tensor (`None`: every tensor
    /// `ty`).
    pub mix: Option<Mix>,
    /// The type of `token_embd.weight`, if not `ty`.
    pub token_embedding_type: Option<DType>,
    /// The type of `output.weight`, if not `ty`.
    pub output_type: Option<DType>,
}

/// One tensor of the output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorPlan {
    /// Its name.
    pub name: String,
    /// The type it had.
    pub from: GgmlType,
    /// The type it gets.
    pub to: GgmlType,
    /// Its bytes in the output.
    pub bytes: usize,
}

/// Whether llama-quantize would quantize a tensor of this name and rank.
pub fn is_quantizable(name: &str, n_dims: usize) -> bool {
    n_dims >= 2
        && name.ends_with("weight")
        && !name.contains("ffn_gate_inp")
        && !name.contains("rope_freqs")
        && !name.contains("position_embd")
        && !name.contains("pos_embd")
}

/// The type a tensor gets: see the [module](self) rules. `dims` are in ggml order
/// (`dims[0]` is the row length).
pub fn choose_type(
    name: &str,
    current: GgmlType,
    dims: &[u64],
    opts: &QuantizeOptions,
) -> GgmlType {
    if !is_quantizable(name, dims.len()) {
        return current;
    }
    let wanted = match name {
        "token_embd.weight" => opts.token_embedding_type.unwrap_or(opts.ty),
        "output.weight" => opts.output_type.unwrap_or(opts.ty),
        _ => opts.ty,
    };
    fit(wanted, current, dims)
}

/// `wanted`, or its fallback when a row of `dims` is not a whole number of its blocks.
fn fit(wanted: DType, current: GgmlType, dims: &[u64]) -> GgmlType {
    let fits = |d: DType| dims[0].is_multiple_of(d.block_size() as u64);
    let ty = if fits(wanted) {
        wanted
    } else {
        let fallback = match wanted {
            DType::Q2K | DType::Q3K => DType::Q4_0,
            DType::Q4K => DType::Q5_0,
            DType::Q5K => DType::Q5_1,
            DType::Q6K => DType::Q8_0,
            _ => DType::F16,
        };
        if fits(fallback) { fallback } else { DType::F16 }
    };
    ty.ggml_type().unwrap_or(current)
}

/// Chooses every tensor's type for one file: [`choose_type`], or with a mix the
/// mix's rules (overrides first, the row-length fallback last).
struct Chooser<'o> {
    opts: &'o QuantizeOptions,
    /// The mix with the model's shape and each `attn_v`-like tensor's index in
    /// llama.cpp's order.
    mix: Option<(Mix, mix::ModelShape, Vec<String>)>,
}

impl<'o> Chooser<'o> {
    fn new(opts: &'o QuantizeOptions, metadata: &[(String, OwnedValue)], names: &[&str]) -> Self {
        let mix = opts.mix.map(|m| {
            let shape = mix::ModelShape::new(metadata, names.iter().copied());
            let mut attn_v: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| mix::is_attn_v(n))
                .collect();
            attn_v.sort_by_key(|n| mix::llama_order(n));
            (m, shape, attn_v.into_iter().map(String::from).collect())
        });
        Self { opts, mix }
    }

    fn choose(&self, name: &str, current: GgmlType, dims: &[u64]) -> GgmlType {
        let Some((m, shape, attn_v)) = &self.mix else {
            return choose_type(name, current, dims, self.opts);
        };
        if !is_quantizable(name, dims.len()) {
            return current;
        }
        let wanted = match name {
            "token_embd.weight" if self.opts.token_embedding_type.is_some() => {
                self.opts.token_embedding_type
            }
            "output.weight" if self.opts.output_type.is_some() => self.opts.output_type,
            _ => None,
        };
        let wanted = wanted.unwrap_or_else(|| {
            let index = attn_v.iter().position(|n| n == name).unwrap_or(0);
            m.wanted(shape, name, dims[0], index)
        });
        fit(wanted, current, dims)
    }
}

/// llama.cpp's `LLAMA_FTYPE` for a file of `opts` (without a mix, the `_S` variants
/// for K-quants, as every tensor gets the same type).
fn file_type(opts: &QuantizeOptions) -> u32 {
    if let Some(m) = opts.mix {
        return m.file_type();
    }
    match opts.ty {
        DType::F32 => 0,
        DType::F16 => 1,
        DType::Q4_0 => 2,
        DType::Q4_1 => 3,
        DType::Q8_0 => 7,
        DType::Q5_0 => 8,
        DType::Q5_1 => 9,
        DType::Q2K => 10,
        DType::Q3K => 11,
        DType::Q4K => 14,
        DType::Q5K => 16,
        _ => 18,
    }
}

/// Writes `ty` blocks of `values` into a fresh, 8-byte aligned buffer.
fn encode(ty: DType, values: &[f32]) -> std::result::Result<Vec<u64>, rml_core::Error> {
    let bytes = ty.storage_bytes(values.len())?;
    let mut buf = vec![0u64; bytes.div_ceil(8)];
    let dst = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut buf)[..bytes];
    match ty {
        DType::F32 => dst.copy_from_slice(bytemuck::cast_slice(values)),
        DType::F16 => {
            for (d, v) in dst.chunks_exact_mut(2).zip(values) {
                d.copy_from_slice(&half::f16::from_f32(*v).to_le_bytes());
            }
        }
        _ => rml_core::quant::quantize_bytes(ty, values, dst)?,
    }
    Ok(buf)
}

/// Quantizes the model `input` (a GGUF file, or a Hugging Face directory) into the
/// GGUF file `output` with `opts`. `progress(done, total)` is called after each
/// tensor. Returns every tensor's plan.
pub fn quantize_model(
    input: &Path,
    output: &Path,
    opts: &QuantizeOptions,
    progress: impl FnMut(usize, usize),
) -> Result<Vec<TensorPlan>> {
    if input.is_dir() {
        quantize_hf(&HfModel::open(input)?, output, opts, progress)
    } else {
        quantize_gguf(input, output, opts, progress)
    }
}

/// Writes the converted Hugging Face checkpoint `model` as the GGUF file `output`.
pub fn quantize_hf(
    model: &HfModel,
    output: &Path,
    opts: &QuantizeOptions,
    mut progress: impl FnMut(usize, usize),
) -> Result<Vec<TensorPlan>> {
    let total = model.tensors.len();
    let names: Vec<&str> = model.tensors.iter().map(|t| t.name.as_str()).collect();
    let chooser = Chooser::new(opts, &model.metadata, &names);
    let mut plans = Vec::with_capacity(total);
    let mut owned = Vec::with_capacity(total);
    for (i, t) in model.tensors.iter().enumerate() {
        let dims = t.dims();
        let to = chooser.choose(&t.name, GgmlType::F32, &dims);
        let values = t.values(&model.config, &model.source)?;
        let (data, bytes) = encode_as(&t.name, to, &values)?;
        plans.push(TensorPlan {
            name: t.name.clone(),
            from: GgmlType::F32,
            to,
            bytes,
        });
        owned.push((dims, data));
        progress(i + 1, total);
    }
    let tensors = plans.iter().zip(&owned).map(|(p, (dims, data))| {
        (
            p,
            dims.as_slice(),
            &bytemuck::cast_slice::<u64, u8>(data)[..p.bytes],
        )
    });
    write_gguf(model.metadata.iter().cloned(), tensors, opts, output)?;
    Ok(plans)
}

/// `values` encoded as `to`, with the byte count.
fn encode_as(name: &str, to: GgmlType, values: &[f32]) -> Result<(Vec<u64>, usize)> {
    let ty = to.to_dtype().map_err(Error::core("quantize"))?;
    let data = encode(ty, values)
        .map_err(|e| Error::Input(format!("tensor {name:?}: quantizing to {}: {e}", ty.name())))?;
    let bytes = ty
        .storage_bytes(values.len())
        .map_err(Error::core("quantize"))?;
    Ok((data, bytes))
}

/// Writes `metadata` (with `general.file_type` and `general.quantization_version`
/// replaced) and `tensors` (plan, ggml dims, bytes) to `output`.
fn write_gguf<'a>(
    metadata: impl Iterator<Item = (String, OwnedValue)>,
    tensors: impl Iterator<Item = (&'a TensorPlan, &'a [u64], &'a [u8])>,
    opts: &QuantizeOptions,
    output: &Path,
) -> Result<()> {
    let mut writer = GgufWriter::new();
    for (key, value) in metadata {
        if key != "general.file_type" && key != "general.quantization_version" {
            writer.add_kv(&key, value).map_err(Error::Gguf)?;
        }
    }
    writer
        .add_kv("general.quantization_version", 2u32)
        .map_err(Error::Gguf)?;
    writer
        .add_kv("general.file_type", file_type(opts))
        .map_err(Error::Gguf)?;
    for (plan, dims, bytes) in tensors {
        writer
            .add_tensor(&plan.name, plan.to, dims, bytes)
            .map_err(Error::Gguf)?;
    }
    writer.write_file(output).map_err(Error::Gguf)?;
    Ok(())
}

/// Quantizes the GGUF model `input` into `output` with `opts`. `progress(done, total)`
/// is called after each tensor. Returns every tensor's plan.
pub fn quantize_gguf(
    input: &Path,
    output: &Path,
    opts: &QuantizeOptions,
    mut progress: impl FnMut(usize, usize),
) -> Result<Vec<TensorPlan>> {
    if input == output {
        return Err(Error::Input(
            "the output file must differ from the input file".into(),
        ));
    }
    let file = GgufFile::open(input).map_err(Error::Gguf)?;
    let source = GgufSource::open(input)?;
    let total = file.tensor_count();
    let metadata: Vec<(String, OwnedValue)> = file
        .metadata()
        .map(|(key, value)| (key.to_string(), value.to_owned_value()))
        .collect();
    let names: Vec<&str> = file.tensors().map(|t| t.info.name()).collect();
    let chooser = Chooser::new(opts, &metadata, &names);
    let mut plans = Vec::with_capacity(total);
    // Quantized data is owned here; unchanged tensors are borrowed from the mapping.
    let mut owned: Vec<Option<Vec<u64>>> = Vec::with_capacity(total);
    for (i, t) in file.tensors().enumerate() {
        let info = t.info;
        let name = info.name();
        let from = info.ggml_type();
        let to = chooser.choose(name, from, info.dims());
        let (data, bytes) = if to == from {
            (None, t.data.len())
        } else {
            let tensor = source
                .tensor(name)?
                .ok_or_else(|| Error::Input(format!("tensor {name:?} listed but not readable")))?;
            let (data, bytes) = encode_as(name, to, &to_f32(name, &tensor)?)?;
            (Some(data), bytes)
        };
        plans.push(TensorPlan {
            name: name.to_string(),
            from,
            to,
            bytes,
        });
        owned.push(data);
        progress(i + 1, total);
    }
    let tensors = file
        .tensors()
        .zip(&plans)
        .zip(&owned)
        .map(|((t, plan), data)| {
            let bytes = match data {
                Some(buf) => &bytemuck::cast_slice::<u64, u8>(buf)[..plan.bytes],
                None => t.data,
            };
            (plan, t.info.dims(), bytes)
        });
    write_gguf(metadata.into_iter(), tensors, opts, output)?;
    Ok(plans)
}
