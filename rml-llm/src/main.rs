//! The `rml-llm` command line.
//!
//! * `rml-llm generate [MODEL] -p PROMPT [options]` prints a continuation of the prompt.
//! * `rml-llm info [MODEL]` describes a model.
//! * `rml-llm tokenize --tokenizer FILE "text"` prints the ids and pieces of a text.
//!
//! MODEL defaults to the bundled `models/default/rml-tiny-llama.gguf`. Every failure is
//! one line on stderr and exit status 1.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use rml_host::formats::gguf::{GgufFile, Value};
use rml_llm::sample::{Sampler, SamplerConfig};
use rml_llm::stop::{StopConfig, StopReason};
use rml_llm::tokenizer::{EncodeOptions, Tokenizer};
use rml_llm::{Model, Session};

/// The bundled model, relative to the current directory.
const DEFAULT_MODEL: &str = "models/default/rml-tiny-llama.gguf";
/// The bundled model in the source tree this binary was built from.
const BUILT_IN_MODEL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../models/default/rml-tiny-llama.gguf"
);

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
    Generate {
        /// A .gguf file or a Hugging Face directory (default: the bundled model).
        model: Option<PathBuf>,
        /// The prompt (special tokens written in it are parsed).
        #[arg(short, long)]
        prompt: String,
        /// The most tokens to generate.
        #[arg(short = 'n', long, default_value_t = 128)]
        max_tokens: usize,
        /// Sampling temperature (0: greedy).
        #[arg(long, default_value_t = 0.8)]
        temp: f32,
        /// Keep the K most likely tokens (0: off).
        #[arg(long, default_value_t = 40)]
        top_k: usize,
        /// Nucleus sampling threshold (1: off).
        #[arg(long, default_value_t = 0.95)]
        top_p: f32,
        /// Drop tokens below this fraction of the best one's probability (0: off).
        #[arg(long, default_value_t = 0.05)]
        min_p: f32,
        /// Repetition penalty (1: off).
        #[arg(long, default_value_t = 1.0)]
        repeat_penalty: f32,
        /// Random seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// A stop string (repeatable); it is not printed.
        #[arg(long)]
        stop: Vec<String>,
        /// Threads for decode projections (1: the calling thread only).
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Print token counts and speeds on stderr.
        #[arg(short, long)]
        verbose: bool,
    },
    /// Describe a model: family, sizes, weight types, tokenizer, chat template.
    Info {
        /// A .gguf file or a Hugging Face directory (default: the bundled model).
        model: Option<PathBuf>,
    },
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

/// The model path: the one given, else the bundled model relative to the current
/// directory, else the one in the source tree the binary was built from.
fn resolve_model(given: Option<PathBuf>) -> Result<PathBuf, String> {
    let path = match given {
        Some(p) => p,
        None => [DEFAULT_MODEL, BUILT_IN_MODEL]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .ok_or_else(|| {
                format!("no model given and the default model {DEFAULT_MODEL} is not here")
            })?,
    };
    if !path.exists() {
        return Err(format!("model not found: {}", path.display()));
    }
    Ok(path)
}

fn is_gguf(path: &Path) -> bool {
    path.is_file()
}

/// The model and its tokenizer (a GGUF's vocabulary, or a directory's
/// `tokenizer.json`).
fn load(path: &Path) -> Result<(Model, Tokenizer), String> {
    let model = Model::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let tok = if is_gguf(path) {
        Tokenizer::from_gguf_file(path)
    } else {
        Tokenizer::from_file(path.join("tokenizer.json"))
    }
    .map_err(|e| format!("{}: tokenizer: {e}", path.display()))?;
    Ok((model, tok))
}

/// End-of-sequence plus the end-of-turn tokens the vocabulary knows.
fn stop_tokens(tok: &Tokenizer) -> Vec<u32> {
    let mut ids: Vec<u32> = tok.eos_id().into_iter().collect();
    for name in ["<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|endoftext|>"] {
        if let Some(id) = tok.token_to_id(name).filter(|id| !ids.contains(id)) {
            ids.push(id);
        }
    }
    ids
}

/// Whether an I/O error means the reader of our output went away.
fn is_closed(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::BrokenPipe
}

fn describe(reason: StopReason) -> String {
    match reason {
        StopReason::String(i) => format!("stop string {i}"),
        StopReason::Token(t) => format!("stop token {t}"),
        StopReason::MaxTokens => "token budget".into(),
        StopReason::ContextFull => "context full".into(),
        StopReason::Cancelled => "cancelled".into(),
    }
}

#[allow(clippy::too_many_arguments)]
fn generate(
    model: Option<PathBuf>,
    prompt: &str,
    sampler: SamplerConfig,
    stop: Vec<String>,
    max_tokens: usize,
    threads: usize,
    verbose: bool,
) -> Result<(), String> {
    let path = resolve_model(model)?;
    let (model, tok) = load(&path)?;
    let ids = tok.encode_prompt(prompt).map_err(|e| e.to_string())?;
    let mut session =
        Session::new(&model, model.config().max_positions).map_err(|e| e.to_string())?;
    if threads > 1 {
        let pool = rml_host::ThreadPool::new(threads).map_err(|e| e.to_string())?;
        session.set_pool(Some(Arc::new(pool)));
    }
    let mut sampler =
        Sampler::new(sampler, model.config().vocab_size).map_err(|e| e.to_string())?;
    let stop = StopConfig {
        strings: stop,
        tokens: stop_tokens(&tok),
        max_tokens: Some(max_tokens),
    };
    let mut stdout = std::io::stdout().lock();
    let mut write_error = None;
    let out = if max_tokens == 0 {
        None
    } else {
        Some(
            session
                .generate(&tok, &ids, &mut sampler, &stop, |text| {
                    match stdout
                        .write_all(text.as_bytes())
                        .and_then(|()| stdout.flush())
                    {
                        Ok(()) => ControlFlow::Continue(()),
                        Err(e) => {
                            write_error = Some(e);
                            ControlFlow::Break(())
                        }
                    }
                })
                .map_err(|e| e.to_string())?,
        )
    };
    match write_error {
        Some(e) if is_closed(&e) => return Ok(()),
        Some(e) => return Err(format!("writing the output: {e}")),
        None => {}
    }
    if let Err(e) = writeln!(stdout).and_then(|()| stdout.flush()) {
        return if is_closed(&e) {
            Ok(())
        } else {
            Err(format!("writing the output: {e}"))
        };
    }
    if let (true, Some(out)) = (verbose, out) {
        let s = out.stats;
        eprintln!(
            "prompt: {} tokens in {:.3} s ({:.1} tok/s); generated: {} tokens in {:.3} s ({:.1} tok/s); stopped: {}",
            s.prompt_tokens,
            s.prefill_seconds,
            s.prefill_tokens_per_second(),
            s.generated_tokens,
            s.decode_seconds,
            s.decode_tokens_per_second(),
            describe(out.reason)
        );
    }
    Ok(())
}

fn gguf_str<'a>(g: &'a GgufFile, key: &str) -> Option<&'a str> {
    match g.get(key) {
        Some(Value::String(s)) => Some(s),
        _ => None,
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
    let (kind, template) = if is_gguf(&path) {
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
        (
            gguf_str(&g, "tokenizer.ggml.model")
                .unwrap_or("unknown")
                .to_string(),
            g.contains_key("tokenizer.chat_template"),
        )
    } else {
        let config =
            std::fs::read_to_string(path.join("tokenizer_config.json")).unwrap_or_default();
        (
            "tokenizer.json".to_string(),
            config.contains("\"chat_template\""),
        )
    };
    println!("tokenizer:    {kind} ({} tokens)", tok.vocab_size());
    println!("chat template: {}", if template { "yes" } else { "no" });
    Ok(())
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Generate {
            model,
            prompt,
            max_tokens,
            temp,
            top_k,
            top_p,
            min_p,
            repeat_penalty,
            seed,
            stop,
            threads,
            verbose,
        } => {
            let sampler = SamplerConfig {
                temperature: temp,
                top_k,
                top_p,
                min_p,
                repetition_penalty: repeat_penalty,
                seed,
                ..SamplerConfig::default()
            };
            generate(model, &prompt, sampler, stop, max_tokens, threads, verbose)
        }
        Command::Info { model } => info(model),
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
            eprintln!("rml-llm: error: {}", e.replace('\n', " "));
            ExitCode::FAILURE
        }
    }
}
