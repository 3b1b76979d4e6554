//! The subcommands of the `rml-llm` binary and what they share: finding and loading a
//! model, stop tokens, the sampling options and the streaming [`Runner`].

pub mod bench;
pub mod chat;
pub mod generate;
pub mod info;
pub mod input;
pub mod progress;
pub mod quantize;
pub mod tokenize;

use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use clap::Args;
use rml_host::formats::gguf::{GgufFile, Value};
use rml_llm::chat::TokenizerConfig;
pub use rml_llm::open::{is_gguf, load_tokenizer, stop_tokens};
use rml_llm::sample::{Sampler, SamplerConfig};
use rml_llm::stop::{StopConfig, StopReason};
use rml_llm::tokenizer::Tokenizer;
use rml_llm::{Generation, Model, PrefillProgress, Session};

/// The bundled model, relative to the current directory.
const DEFAULT_MODEL: &str = "models/default/rml-tiny-llama.gguf";
/// The bundled model in the source tree this binary was built from.
const BUILT_IN_MODEL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../models/default/rml-tiny-llama.gguf"
);
/// The model path: the one given, else the bundled model relative to the current
/// directory, else the one in the source tree the binary was built from.
pub fn resolve_model(given: Option<PathBuf>) -> Result<PathBuf, String> {
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

/// The model and its tokenizer (a GGUF's vocabulary, or a directory's
/// `tokenizer.json`), with a spinner on a terminal while the model loads.
pub fn load(path: &Path) -> Result<(Model, Tokenizer), String> {
    Ok((load_model(path)?, load_tokenizer(path)?))
}

/// The model alone, with a spinner on a terminal while it loads.
pub fn load_model(path: &Path) -> Result<Model, String> {
    let spinner = progress::Progress::spinner(&format!("loading {}", path.display()));
    let model = Model::open(path).map_err(|e| format!("{}: {e}", path.display()));
    spinner.finish();
    model
}

/// Whether an I/O error means the reader of our output went away.
pub fn is_closed(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::BrokenPipe
}

/// A stop reason in words.
pub fn describe(reason: StopReason) -> String {
    match reason {
        StopReason::String(i) => format!("stop string {i}"),
        StopReason::Token(t) => format!("stop token {t}"),
        StopReason::MaxTokens => "token budget".into(),
        StopReason::ContextFull => "context full".into(),
        StopReason::Cancelled => "cancelled".into(),
    }
}

/// A string metadata value of a GGUF file.
pub fn gguf_str<'a>(g: &'a GgufFile, key: &str) -> Option<&'a str> {
    match g.get(key) {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// The chat template source of a GGUF file's metadata or a directory's
/// `tokenizer_config.json`, if it has one.
pub fn chat_template(path: &Path) -> Result<Option<String>, String> {
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

/// Sampling, stopping and threading options shared by `generate` and `chat`.
#[derive(Args)]
pub struct GenerateArgs {
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
pub struct Runner {
    /// The model.
    pub model: Model,
    /// Its tokenizer.
    pub tok: Tokenizer,
    /// Where it was loaded from.
    pub path: PathBuf,
    /// The sampling chain's settings.
    pub sampler: SamplerConfig,
    /// Stop tokens, strings and the token budget.
    pub stop: StopConfig,
    /// The decode thread pool (none for one thread).
    pub pool: Option<Arc<rml_host::ThreadPool>>,
}

impl Runner {
    /// Loads the model and its tokenizer and turns `args` into sampler and stop settings.
    pub fn new(model: Option<PathBuf>, args: GenerateArgs) -> Result<Runner, String> {
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

    /// A fresh session (the model's whole context) and sampler.
    pub fn session(&self) -> Result<(Session<'_>, Sampler), String> {
        let mut session = Session::new(&self.model, self.model.config().max_positions)
            .map_err(|e| e.to_string())?;
        session.set_pool(self.pool.clone());
        session.set_prefill_progress(Some(prompt_progress()));
        let sampler = Sampler::new(self.sampler.clone(), self.model.config().vocab_size)
            .map_err(|e| e.to_string())?;
        Ok((session, sampler))
    }

    /// Generates after `ids`, writing the text to `out` as it comes. `Ok(None)` when
    /// `out` was closed (generation then stops quietly) or the budget is 0. Setting
    /// `cancel` stops the reply after the text shown so far.
    pub fn stream(
        &self,
        session: &mut Session<'_>,
        sampler: &mut Sampler,
        ids: &[u32],
        out: &mut impl Write,
        cancel: Option<&AtomicBool>,
    ) -> Result<Option<Generation>, String> {
        if self.stop.max_tokens == Some(0) {
            return Ok(None);
        }
        write_stream(out, cancel, |on_text| {
            session.generate(&self.tok, ids, sampler, &self.stop, on_text)
        })
    }
}

/// A progress bar for long prompts: made at a prompt's first chunk, cleared after its
/// last.
fn prompt_progress() -> PrefillProgress {
    let bar: Mutex<Option<progress::Progress>> = Mutex::new(None);
    PrefillProgress(Arc::new(move |done, total| {
        let Ok(mut bar) = bar.lock() else { return };
        let b = bar.get_or_insert_with(|| progress::Progress::bar("prompt", total as u64));
        b.set(done, total);
        if done >= total {
            b.finish();
            *bar = None;
        }
    }))
}

/// Runs `generate` with a text callback that writes to `out` and flushes, and stops
/// when `cancel` is set. `Ok(None)` when `out` was closed; a write error otherwise is
/// an error.
pub fn write_stream<T>(
    out: &mut impl Write,
    cancel: Option<&AtomicBool>,
    generate: impl FnOnce(&mut dyn FnMut(&str) -> ControlFlow<()>) -> rml_llm::Result<T>,
) -> Result<Option<T>, String> {
    let mut write_error = None;
    let result = generate(&mut |text: &str| {
        if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            return ControlFlow::Break(());
        }
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
        None => Ok(Some(result)),
    }
}

/// Prints a generation's counts, speeds and stop reason on stderr.
pub fn print_stats(out: &Generation) {
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
