//! `rml-llm quantize`: a GGUF model to a GGUF with quantized weights.

use std::path::PathBuf;

use clap::Args;
use rml_llm::quantize::{QuantizeOptions, parse_type, quantize_gguf};

use super::progress::Progress;

/// Quantize a GGUF model's weights into a new GGUF file.
#[derive(Args)]
pub struct QuantizeCommand {
    /// The GGUF model to read.
    input: PathBuf,
    /// The GGUF file to write.
    output: PathBuf,
    /// Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (or F16, F32).
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
        let opts = QuantizeOptions {
            ty: parse(&self.ty)?,
            token_embedding_type: self
                .token_embedding_type
                .as_deref()
                .map(parse)
                .transpose()?,
            output_type: self.output_tensor_type.as_deref().map(parse).transpose()?,
        };
        if !self.input.is_file() {
            return Err(format!("model not found: {}", self.input.display()));
        }
        let bar = Progress::bar("quantizing", 0);
        let plans = quantize_gguf(&self.input, &self.output, &opts, |done, total| {
            bar.set(done, total)
        })
        .map_err(|e| format!("{}: {e}", self.input.display()))?;
        bar.finish();
        let before: u64 = std::fs::metadata(&self.input).map_or(0, |m| m.len());
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
