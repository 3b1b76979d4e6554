//! `rml-llm info`: what a model is.

use std::path::PathBuf;

use clap::Args;
use rml_host::formats::gguf::GgufFile;

use super::{chat_template, gguf_str, is_gguf, load, resolve_model};

/// Describe a model: family, sizes, weight types, tokenizer, chat template.
#[derive(Args)]
pub struct InfoCommand {
    /// A .gguf file or a Hugging Face directory (default: the bundled model).
    model: Option<PathBuf>,
}

impl InfoCommand {
    /// Prints the description on stdout.
    pub fn run(self) -> Result<(), String> {
        info(self.model)
    }
}

fn info(model: Option<PathBuf>) -> Result<(), String> {
    let path = resolve_model(model)?;
    let (model, tok) = load(&path)?;
    let c = model.config();
    println!("model:        {}", path.display());
    println!("family:       {:?}", c.family);
    println!("layers:       {}", c.n_layers);
    println!("hidden:       {}", c.hidden_size);
    println!("ffn:          {}", c.intermediate_size);
    println!("heads:        {} (head dim {})", c.n_heads, c.head_dim);
    println!("kv heads:     {}", c.n_kv_heads);
    println!("vocab:        {}", c.vocab_size);
    println!("context:      {}", c.max_positions);
    println!("parameters:   {} bytes in memory", model.parameter_bytes());
    let kind = if is_gguf(&path) {
        let g = GgufFile::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut types: Vec<(String, usize, u64)> = Vec::new();
        for t in g.tensors() {
            let name = format!("{:?}", t.info.ggml_type());
            match types.iter_mut().find(|(n, _, _)| *n == name) {
                Some(entry) => {
                    entry.1 += 1;
                    entry.2 += t.info.size_bytes();
                }
                None => types.push((name, 1, t.info.size_bytes())),
            }
        }
        for (name, count, bytes) in types {
            println!("weights:      {name}: {count} tensors, {bytes} bytes");
        }
        gguf_str(&g, "tokenizer.ggml.model")
            .unwrap_or("unknown")
            .to_string()
    } else {
        "tokenizer.json".to_string()
    };
    let template = chat_template(&path)?.is_some();
    println!("tokenizer:    {kind} ({} tokens)", tok.vocab_size());
    println!("chat template: {}", if template { "yes" } else { "no" });
    Ok(())
}
