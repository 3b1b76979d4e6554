//! `rml-llm quantize`: a GGUF model or a Hugging Face safetensors directory to a GGUF
//! with quantized weights.

use std::path::PathBuf;

use clap::Args;
use rml_llm::convert::HfModel;
use rml_llm::quantize::{
    QuantizeOptions, TensorPlan, parse_quant, parse_type, quantize_gguf, quantize_hf,
};

use super::progress::Progress;

/// Quantize a GGUF model, or convert a Hugging Face safetensors directory, into a GGUF file.
#[derive(Args)]
pub struct QuantizeCommand {
    /// The GGUF model, or the Hugging Face directory (config.json, *.safetensors,
    /// tokenizer.json), to read.
    input: PathBuf,
    /// The GGUF file to write.
    output: PathBuf,
    /// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, F16, F32 (every
    /// tensor that type), or a llama.cpp K-quant mix: Q3_K_M, Q4_K_S, Q4_K_M, Q5_K_S,
    /// Q5_K_M.
    #[arg(value_name = "TYPE")]
    ty: String,
    /// The type of token_embd.weight (default: TYPE).
    #[arg(long)]
    token_embedding_type: Option<String>,
    /// The type of output.weight (default: TYPE).
    #[arg(long)]
    output_tensor_type: Option<String>,
    /// Print every tensor's old and new type.
    #[arg(short, long)]
    verbose: bool,
}

impl QuantizeCommand {
    /// Writes the output and prints a one-line summary.
    pub fn run(self) -> Result<(), String> {
        let parse = |s: &str| parse_type(s).map_err(|e| e.to_string());
        let (ty, mix) = parse_quant(&self.ty).map_err(|e| e.to_string())?;
        let opts = QuantizeOptions {
            ty,
            mix,
            token_embedding_type: self
                .token_embedding_type
                .as_deref()
                .map(parse)
                .transpose()?,
            output_type: self.output_tensor_type.as_deref().map(parse).transpose()?,
        };
        let bar = Progress::bar("quantizing", 0);
        let progress = |done, total| bar.set(done, total);
        let here = |e: rml_llm::Error| format!("{}: {e}", self.input.display());
        let (plans, before): (Vec<TensorPlan>, u64) = if self.input.is_dir() {
            let model = HfModel::open(&self.input).map_err(here)?;
            if !model.has_tokenizer {
                eprintln!(
                    "rml-llm: warning: {} has no tokenizer.json; the GGUF gets no vocabulary (rml loads it, llama.cpp does not)",
                    self.input.display()
                );
            }
            let before = std::fs::read_dir(&self.input)
                .map(|d| {
                    d.flatten()
                        .filter(|e| e.path().extension().is_some_and(|x| x == "safetensors"))
                        .filter_map(|e| e.metadata().ok())
                        .map(|m| m.len())
                        .sum()
                })
                .unwrap_or(0);
            (
                quantize_hf(&model, &self.output, &opts, progress).map_err(here)?,
                before,
            )
        } else if self.input.is_file() {
            let before = std::fs::metadata(&self.input).map_or(0, |m| m.len());
            (
                quantize_gguf(&self.input, &self.output, &opts, progress).map_err(here)?,
                before,
            )
        } else {
            return Err(format!("model not found: {}", self.input.display()));
        };
        bar.finish();
        let after: u64 = std::fs::metadata(&self.output).map_or(0, |m| m.len());
        if self.verbose {
            for p in &plans {
                eprintln!(
                    "{:<32} {:>6} -> {:<6} {} bytes",
                    p.name,
                    p.from.name(),
                    p.to.name(),
                    p.bytes
                );
            }
        }
        let changed = plans.iter().filter(|p| p.from != p.to).count();
        eprintln!(
            "{}: {changed} of {} tensors converted, {before} -> {after} bytes",
            self.output.display(),
            plans.len()
        );
        Ok(())
    }
}
