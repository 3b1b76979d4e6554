//! The `rml-llm` command line: one module per subcommand under `cli/`.
//!
//! * `rml-llm generate [MODEL] -p PROMPT [options]` prints a continuation of the prompt
//!   (`--draft FILE` for speculative decoding).
//! * `rml-llm chat [MODEL] [options]` chats with the model's chat template.
//! * `rml-llm bench MODEL -p 512 -n 128 -t 1,2` measures prompt and decode speed.
//! * `rml-llm quantize IN OUT TYPE` writes a quantized GGUF.
//! * `rml-llm info [MODEL]` describes a model.
//! * `rml-llm tokenize --tokenizer FILE "text"` prints the ids and pieces of a text.
//!
//! MODEL defaults to the bundled `models/default/rml-tiny-llama.gguf`. Every failure is
//! one line on stderr and exit status 1; `generate` stopped by Ctrl-C exits with 130.

mod cli;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The rml LLM runtime.
#[derive(Parser)]
#[command(name = "rml-llm", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Continue a prompt; prints only the generated text.
    Generate(cli::generate::GenerateCommand),
    /// Chat with the model's chat template (line editing on a terminal; stdin lines
    /// otherwise). Commands: /help, /reset, /system TEXT, /stats, /exit.
    Chat(cli::chat::ChatCommand),
    /// Measure prompt-processing and generation speed (llama-bench's layout).
    Bench(cli::bench::BenchCommand),
    /// Quantize a GGUF model's weights into a new GGUF file.
    Quantize(cli::quantize::QuantizeCommand),
    /// Describe a model: family, sizes, weight types, tokenizer, chat template.
    Info(cli::info::InfoCommand),
    /// Encode a text and print its token ids and pieces.
    Tokenize(cli::tokenize::TokenizeCommand),
}

fn main() -> ExitCode {
    let done = |()| ExitCode::SUCCESS;
    if let Err(e) = rml_host::isa_env::force_from_env() {
        eprintln!("rml-llm: error: {e}");
        return ExitCode::FAILURE;
    }
    let result = match Cli::parse().command {
        Command::Generate(c) => c.run(),
        Command::Chat(c) => c.run().map(done),
        Command::Bench(c) => c.run().map(done),
        Command::Quantize(c) => c.run().map(done),
        Command::Info(c) => c.run().map(done),
        Command::Tokenize(c) => c.run().map(done),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rml-llm: error: {}", e.replace('\n', " "));
            ExitCode::FAILURE
        }
    }
}
