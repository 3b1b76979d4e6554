//! `rml-llm generate`: continue a prompt, optionally with a draft model
//! (speculative decoding). Ctrl-C stops it: the text so far and a newline are
//! written and the exit status is 130.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

use clap::Args;
use rml_llm::sample::Sampler;
use rml_llm::stop::StopReason;
use rml_llm::tokenizer::Tokenizer;
use rml_llm::{Generation, Model, SpeculativeSession, SpeculativeStats};

use super::{
    GenerateArgs, Runner, is_closed, load_model, load_tokenizer, print_stats, write_stream,
};

/// Continue a prompt; prints only the generated text.
#[derive(Args)]
pub struct GenerateCommand {
    /// A .gguf file or a Hugging Face directory (default: the bundled model).
    model: Option<PathBuf>,
    /// The prompt (special tokens written in it are parsed).
    #[arg(short, long)]
    prompt: String,
    #[command(flatten)]
    options: GenerateArgs,
    /// A draft model sharing the tokenizer: speculative decoding.
    #[arg(long)]
    draft: Option<PathBuf>,
    /// Tokens the draft proposes per round (with --draft).
    #[arg(long, default_value_t = 4, requires = "draft")]
    draft_tokens: usize,
    /// Print token counts and speeds (and the draft's acceptance rate) on stderr.
    #[arg(short, long)]
    verbose: bool,
}

/// The exit status after Ctrl-C (128 + SIGINT, as a shell reports it).
pub const INTERRUPTED: u8 = 130;

/// Set by the first Ctrl-C; the session sees it between prompt chunks (and, with a
/// draft, before each draft step and verification), the text callback after that.
static CANCEL: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// The first Ctrl-C stops generation cleanly; a second one exits at once.
fn install_interrupt_handler() -> Result<(), String> {
    ctrlc::set_handler(|| {
        if CANCEL.swap(true, Ordering::SeqCst) {
            std::process::exit(i32::from(INTERRUPTED));
        }
    })
    .map_err(|e| format!("installing the Ctrl-C handler: {e}"))
}

impl GenerateCommand {
    /// Streams the continuation to stdout, then a newline. Exit status 0, or
    /// [`INTERRUPTED`] when Ctrl-C stopped it.
    pub fn run(self) -> Result<ExitCode, String> {
        install_interrupt_handler()?;
        let runner = Runner::new(self.model, self.options)?;
        let ids = runner
            .tok
            .encode_prompt(&self.prompt)
            .map_err(|e| e.to_string())?;
        let mut stdout = std::io::stdout().lock();
        let result = match &self.draft {
            None => {
                let (mut session, mut sampler) = runner.session()?;
                session.set_cancel(Some(Arc::clone(&CANCEL)));
                runner
                    .stream(&mut session, &mut sampler, &ids, &mut stdout, Some(&CANCEL))?
                    .map(|g| (g, None))
            }
            Some(path) => {
                let draft = load_model(path)?;
                // A draft file without a tokenizer is compared by vocabulary size only.
                let draft_tok = load_tokenizer(path).ok();
                check_same_vocabulary(&runner, &draft, draft_tok.as_ref(), path)?;
                speculative(&runner, &draft, self.draft_tokens, &ids, &mut stdout)?
                    .map(|(g, s)| (g, Some(s)))
            }
        };
        let Some((out, spec)) = result else {
            return Ok(ExitCode::SUCCESS);
        };
        let status = if out.reason == StopReason::Cancelled {
            ExitCode::from(INTERRUPTED)
        } else {
            ExitCode::SUCCESS
        };
        if let Err(e) = writeln!(stdout).and_then(|()| stdout.flush()) {
            return if is_closed(&e) {
                Ok(status)
            } else {
                Err(format!("writing the output: {e}"))
            };
        }
        if self.verbose {
            print_stats(&out);
            if let Some(s) = spec {
                eprintln!(
                    "draft: {} rounds, {} drafted, {} accepted ({:.1}%), {:.2} tokens per target call",
                    s.rounds,
                    s.drafted,
                    s.accepted,
                    100.0 * s.acceptance_rate(),
                    out.tokens.len() as f64 / s.rounds.max(1) as f64
                );
            }
        }
        Ok(status)
    }
}

/// Speculative generation of `ids`' continuation with `draft`, streamed to `out`.
fn speculative(
    runner: &Runner,
    draft: &Model,
    k: usize,
    ids: &[u32],
    out: &mut impl Write,
) -> Result<Option<(Generation, SpeculativeStats)>, String> {
    if runner.stop.max_tokens == Some(0) {
        return Ok(None);
    }
    let context = runner
        .model
        .config()
        .max_positions
        .min(draft.config().max_positions);
    let mut session =
        SpeculativeSession::new(&runner.model, draft, k, context).map_err(|e| e.to_string())?;
    session.set_pool(runner.pool.clone());
    session.set_cancel(Some(Arc::clone(&CANCEL)));
    let mut sampler = Sampler::new(runner.sampler.clone(), runner.model.config().vocab_size)
        .map_err(|e| e.to_string())?;
    write_stream(out, Some(&CANCEL), |on_text| {
        session.generate(&runner.tok, ids, &mut sampler, &runner.stop, on_text)
    })
}

/// The draft must use the target's vocabulary: same size in both configurations and,
/// when the draft file has a tokenizer, the same token text for every id.
fn check_same_vocabulary(
    runner: &Runner,
    draft: &Model,
    draft_tok: Option<&Tokenizer>,
    path: &std::path::Path,
) -> Result<(), String> {
    let (t, d) = (runner.model.config().vocab_size, draft.config().vocab_size);
    if t != d {
        return Err(format!(
            "{}: the draft model's vocabulary has {d} tokens but the target's has {t}",
            path.display()
        ));
    }
    let Some(draft_tok) = draft_tok else {
        return Ok(());
    };
    let n = runner.tok.vocab_size();
    if draft_tok.vocab_size() != n {
        return Err(format!(
            "{}: the draft's tokenizer has {} tokens but the target's has {n}",
            path.display(),
            draft_tok.vocab_size()
        ));
    }
    for id in 0..n as u32 {
        if runner.tok.id_to_token(id) != draft_tok.id_to_token(id) {
            return Err(format!(
                "{}: the draft's tokenizer differs from the target's at token {id} ({:?} vs {:?})",
                path.display(),
                draft_tok.id_to_token(id).unwrap_or(""),
                runner.tok.id_to_token(id).unwrap_or("")
            ));
        }
    }
    Ok(())
}
