//! The `rml-llm` command line.
//!
//! * `rml-llm generate [MODEL] -p PROMPT [options]` prints a continuation of the prompt.
//! * `rml-llm info [MODEL]` describes a model.
//! * `rml-llm chat [MODEL] [options]` chats over stdin lines with the chat template.
//! * `rml-llm tokenize --tokenizer FILE "text"` prints the ids and pieces of a text.
//!
//! MODEL defaults to the bundled `models/default/rml-tiny-llama.gguf`. Every failure is
//! one line on stderr and exit status 1.

use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use rml_host::formats::gguf::{GgufFile, Value};
use rml_llm::chat::{ChatTemplate, RenderOptions, TokenizerConfig};
use rml_llm::open::{is_gguf, load, stop_tokens};
use rml_llm::sample::{Sampler, SamplerConfig};
use rml_llm::stop::{StopConfig, StopReason};
use rml_llm::tokenizer::{EncodeOptions, Tokenizer};
use rml_llm::{Generation, Model, Session};

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
        #[command(flatten)]
        options: GenerateArgs,
        /// Print token counts and speeds on stderr.
        #[arg(short, long)]
        verbose: bool,
    },
    /// Chat over stdin lines with the model's chat template. Commands: `/reset`,
    /// `/system TEXT`, `/stats`, `/quit`; end of input exits.
    Chat {
        /// A .gguf file or a Hugging Face directory (default: the bundled model).
        model: Option<PathBuf>,
        #[command(flatten)]
        options: GenerateArgs,
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

fn generate(
    model: Option<PathBuf>,
    prompt: &str,
    args: GenerateArgs,
    verbose: bool,
) -> Result<(), String> {
    let runner = Runner::new(model, args)?;
    let ids = runner
        .tok
        .encode_prompt(prompt)
        .map_err(|e| e.to_string())?;
    let (mut session, mut sampler) = runner.session()?;
    let mut stdout = std::io::stdout().lock();
    let Some(out) = runner.stream(&mut session, &mut sampler, &ids, &mut stdout)? else {
        return Ok(());
    };
    if let Err(e) = writeln!(stdout).and_then(|()| stdout.flush()) {
        return if is_closed(&e) {
            Ok(())
        } else {
            Err(format!("writing the output: {e}"))
        };
    }
    if verbose {
        print_stats(&out);
    }
    Ok(())
}

fn gguf_str<'a>(g: &'a GgufFile, key: &str) -> Option<&'a str> {
    match g.get(key) {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// The chat template source of a GGUF file's metadata or a directory's
/// `tokenizer_config.json`, if it has one.
fn chat_template(path: &Path) -> Result<Option<String>, String> {
    if is_gguf(path) {
        let g = GgufFile::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        return Ok(gguf_str(&g, "tokenizer.chat_template").map(str::to_string));
    }
    let file = path.join("tokenizer_config.json");
    match std::fs::read_to_string(&file) {
        Ok(text) => Ok(TokenizerConfig::from_json_str(&text)
            .map_err(|e| format!("{}: {e}", file.display()))?
            .chat_template),
        Err(_) => Ok(None),
    }
}

/// The chat REPL's state: the conversation and the text already in the session's
/// cache, so each turn only runs what the template adds after it.
struct Chat<'r> {
    runner: &'r Runner,
    template: ChatTemplate,
    options: RenderOptions,
    system: Option<String>,
    messages: Vec<serde_json::Value>,
    /// The rendered text the session's cache (with its pending token) holds.
    fed: String,
    last: Option<Generation>,
}

impl Chat<'_> {
    fn reset(&mut self, session: &mut Session<'_>, sampler: &mut Sampler) {
        self.messages.clear();
        if let Some(system) = &self.system {
            self.messages
                .push(serde_json::json!({"role": "system", "content": system}));
        }
        self.fed.clear();
        session.reset();
        sampler.reset();
    }

    /// One user turn: render, run what is new, stream the reply. `Ok(false)` when
    /// stdout was closed.
    fn turn(
        &mut self,
        line: &str,
        session: &mut Session<'_>,
        sampler: &mut Sampler,
        out: &mut impl Write,
    ) -> Result<bool, String> {
        let tok = &self.runner.tok;
        self.messages
            .push(serde_json::json!({"role": "user", "content": line}));
        let rendered = self
            .template
            .render(
                &serde_json::Value::from(self.messages.clone()),
                &self.options,
            )
            .map_err(|e| e.to_string())?;
        let ids = match rendered.strip_prefix(self.fed.as_str()) {
            Some(new) if !self.fed.is_empty() => tok.encode_with(
                new,
                EncodeOptions {
                    add_special_tokens: false,
                    parse_special: true,
                },
            ),
            _ => {
                session.reset();
                tok.encode_prompt(&rendered)
            }
        }
        .map_err(|e| e.to_string())?;
        let mut reply = Vec::new();
        let generation = {
            let mut tee = Tee {
                out: &mut *out,
                copy: &mut reply,
            };
            self.runner.stream(session, sampler, &ids, &mut tee)
        };
        let generation = match generation {
            Ok(Some(g)) => g,
            Ok(None) => return Ok(false),
            Err(e) => {
                self.messages.pop();
                session.reset();
                self.fed.clear();
                return Err(e);
            }
        };
        let reply = String::from_utf8_lossy(&reply).into_owned();
        self.fed = rendered + &reply;
        if let StopReason::Token(t) = generation.reason {
            self.fed += &tok.decode(&[t], false);
        }
        self.messages
            .push(serde_json::json!({"role": "assistant", "content": reply}));
        self.last = Some(generation);
        Ok(writeln!(out).and_then(|()| out.flush()).is_ok())
    }
}

/// Writes to `out` and keeps a copy.
struct Tee<'a, W: Write> {
    out: &'a mut W,
    copy: &'a mut Vec<u8>,
}

impl<W: Write> Write for Tee<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.out.write(buf)?;
        self.copy.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

fn chat(model: Option<PathBuf>, args: GenerateArgs) -> Result<(), String> {
    let runner = Runner::new(model, args)?;
    let source = chat_template(&runner.path)?
        .ok_or_else(|| format!("{}: the model has no chat template", runner.path.display()))?;
    let template = ChatTemplate::new(&source).map_err(|e| e.to_string())?;
    let token_text = |id: Option<u32>| {
        id.and_then(|i| runner.tok.id_to_token(i))
            .unwrap_or("")
            .to_string()
    };
    let options = RenderOptions {
        add_generation_prompt: true,
        bos_token: token_text(runner.tok.bos_id()),
        eos_token: token_text(runner.tok.eos_id()),
        ..RenderOptions::default()
    };
    let (mut session, mut sampler) = runner.session()?;
    let mut state = Chat {
        runner: &runner,
        template,
        options,
        system: None,
        messages: Vec::new(),
        fed: String::new(),
        last: None,
    };
    let mut stdout = std::io::stdout().lock();
    for line in std::io::stdin().lines() {
        let line = line.map_err(|e| format!("reading stdin: {e}"))?;
        let line = line.trim_end_matches('\r');
        match line.split_once(' ').unwrap_or((line, "")) {
            ("/quit", _) => break,
            ("/reset", _) => state.reset(&mut session, &mut sampler),
            ("/system", text) => {
                state.system = Some(text.to_string()).filter(|t| !t.is_empty());
                state.reset(&mut session, &mut sampler);
            }
            ("/stats", _) => match &state.last {
                Some(g) => print_stats(g),
                None => eprintln!("no reply yet"),
            },
            _ if line.trim().is_empty() => {}
            _ => match state.turn(line, &mut session, &mut sampler, &mut stdout) {
                Ok(true) => {}
                Ok(false) => return Ok(()),
                Err(e) => eprintln!("rml-llm: error: {e}"),
            },
        }
    }
    Ok(())
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

/// Sampling, stopping and threading options shared by `generate` and `chat`.
#[derive(Args)]
struct GenerateArgs {
    /// The most tokens to generate (per reply in `chat`).
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
}

/// A loaded model ready to generate: the model, its tokenizer and the options.
struct Runner {
    model: Model,
    tok: Tokenizer,
    path: PathBuf,
    sampler: SamplerConfig,
    stop: StopConfig,
    pool: Option<Arc<rml_host::ThreadPool>>,
}

impl Runner {
    fn new(model: Option<PathBuf>, args: GenerateArgs) -> Result<Runner, String> {
        let path = resolve_model(model)?;
        let (model, tok) = load(&path)?;
        let pool = if args.threads > 1 {
            let pool = rml_host::ThreadPool::new(args.threads).map_err(|e| e.to_string())?;
            Some(Arc::new(pool))
        } else {
            None
        };
        let stop = StopConfig {
            strings: args.stop,
            tokens: stop_tokens(&tok),
            max_tokens: Some(args.max_tokens),
        };
        let sampler = SamplerConfig {
            temperature: args.temp,
            top_k: args.top_k,
            top_p: args.top_p,
            min_p: args.min_p,
            repetition_penalty: args.repeat_penalty,
            seed: args.seed,
            ..SamplerConfig::default()
        };
        Ok(Runner {
            model,
            tok,
            path,
            sampler,
            stop,
            pool,
        })
    }

    fn session(&self) -> Result<(Session<'_>, Sampler), String> {
        let mut session = Session::new(&self.model, self.model.config().max_positions)
            .map_err(|e| e.to_string())?;
        session.set_pool(self.pool.clone());
        let sampler = Sampler::new(self.sampler.clone(), self.model.config().vocab_size)
            .map_err(|e| e.to_string())?;
        Ok((session, sampler))
    }

    /// Generates after `ids`, writing the text to `out` as it comes. `Ok(None)` when
    /// `out` was closed (generation then stops quietly) or the budget is 0.
    fn stream(
        &self,
        session: &mut Session<'_>,
        sampler: &mut Sampler,
        ids: &[u32],
        out: &mut impl Write,
    ) -> Result<Option<Generation>, String> {
        if self.stop.max_tokens == Some(0) {
            return Ok(None);
        }
        let mut write_error = None;
        let generation = session
            .generate(&self.tok, ids, sampler, &self.stop, |text| {
                match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                    Ok(()) => ControlFlow::Continue(()),
                    Err(e) => {
                        write_error = Some(e);
                        ControlFlow::Break(())
                    }
                }
            })
            .map_err(|e| e.to_string())?;
        match write_error {
            Some(e) if is_closed(&e) => Ok(None),
            Some(e) => Err(format!("writing the output: {e}")),
            None => Ok(Some(generation)),
        }
    }
}

fn print_stats(out: &Generation) {
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

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Generate {
            model,
            prompt,
            options,
            verbose,
        } => generate(model, &prompt, options, verbose),
        Command::Chat { model, options } => chat(model, options),
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
