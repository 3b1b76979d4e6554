//! The `rml-llm` command line.
//!
//! `rml-llm tokenize --tokenizer FILE "text"` prints the ids and pieces of a text.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use rml_llm::tokenizer::{EncodeOptions, Tokenizer};

/// The rml LLM runtime.
#[derive(Parser)]
#[command(name = "rml-llm", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Encode a text and print its token ids and pieces.
    Tokenize {
        /// A tokenizer.json file, or a .gguf model file (its vocabulary is used).
        #[arg(long)]
        tokenizer: std::path::PathBuf,
        /// Do not add the post-processor's special tokens (BOS/EOS).
        #[arg(long)]
        no_special: bool,
        /// Treat special tokens written in the text as plain text.
        #[arg(long)]
        no_parse_special: bool,
        /// The text to encode.
        text: String,
    },
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Tokenize {
            tokenizer,
            no_special,
            no_parse_special,
            text,
        } => {
            let is_gguf = tokenizer
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
            let tok = if is_gguf {
                Tokenizer::from_gguf_file(&tokenizer)
            } else {
                Tokenizer::from_file(&tokenizer)
            }
            .map_err(|e| e.to_string())?;
            let options = EncodeOptions {
                add_special_tokens: !no_special,
                parse_special: !no_parse_special,
            };
            let ids = tok.encode_with(&text, options).map_err(|e| e.to_string())?;
            let joined: Vec<String> = ids.iter().map(u32::to_string).collect();
            println!("ids ({}): [{}]", ids.len(), joined.join(", "));
            for id in &ids {
                let piece = tok.id_to_token(*id).unwrap_or("");
                let mark = if tok.is_special(*id) {
                    " (special)"
                } else {
                    ""
                };
                println!("{id:>8}  {piece:?}{mark}");
            }
            println!("decoded: {:?}", tok.decode(&ids, false));
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rml-llm: error: {e}");
            ExitCode::FAILURE
        }
    }
}
