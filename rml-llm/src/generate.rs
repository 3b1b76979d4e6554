//! The generation loop: prefill a prompt, then sample, stop-check, stream and feed
//! back one token at a time.
//!
//! A [`Session`] owns a KV cache, a [`Workspace`] and a logits buffer, all sized once
//! in [`Session::new`]. [`Session::generate`] appends its prompt after whatever the
//! cache already holds, so a chat continues without re-running its history:
//!
//! * **Prefill** runs the prompt in chunks of at most [`Session::PREFILL_CHUNK`] tokens
//!   (so the workspace does not grow with the context) and keeps only the last
//!   token's logits. A cancel flag ([`Session::set_cancel`]) is checked between
//!   chunks: a prompt cancelled there is undone (the cache and the pending token are
//!   as before the call) and the call returns [`StopReason::Cancelled`] with no token.
//! * **Decode** samples a token, hands it to the [`Stopper`] (stop ids such as EOS,
//!   stop strings caught across token boundaries and never shown, the token budget),
//!   passes the text that may be shown to the callback, and runs the token through the
//!   model. The callback returns [`ControlFlow::Break`] to cancel
//!   ([`StopReason::Cancelled`]).
//! * **Context policy.** A prompt that does not fit in the cache (together with what
//!   it already holds) is an [`Error::Input`] naming both numbers, and nothing is
//!   run. When the cache fills up during decode, generation stops with
//!   [`StopReason::ContextFull`]: the last sampled token is shown but cannot be run.
//! * **Continuation.** The last sampled token (a stop token, the token after which a
//!   stop string completed, the last one of the budget) is not yet in the cache when
//!   a call returns; the next call runs it first, before its own prompt. So after a
//!   chat reply ended with an end-of-turn token, the next turn's prompt only needs the
//!   text that follows it. [`Session::reset`] forgets everything.
//! * **Allocation.** The loop allocates nothing per token beyond what the tokenizer's
//!   [`DecodeStream`] needs to turn an id into text
//!   (one `String` per decoded chunk) and the returned token list, which is reserved up
//!   front for the remaining context. The model call uses the session's workspace; the
//!   shown-text buffer is reused. Running the workspace on a thread pool spawns tasks
//!   (see [`Workspace::set_pool`]).

use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rml_host::ThreadPool;

use crate::error::{Error, Result};
use crate::kv_cache::KvCache;
use crate::model::{Logits, Model, Workspace};
use crate::sample::Sampler;
use crate::stop::{StopConfig, StopReason, Stopper};
use crate::tokenizer::{DecodeStream, Tokenizer};

/// Counts and timings of one [`Session::generate`] call.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GenerationStats {
    /// Tokens run in the prefill (the prompt, plus the previous call's last token).
    pub prompt_tokens: usize,
    /// Tokens sampled (stop tokens included).
    pub generated_tokens: usize,
    /// Seconds spent in the prefill.
    pub prefill_seconds: f64,
    /// Seconds spent sampling and running generated tokens.
    pub decode_seconds: f64,
}

impl GenerationStats {
    /// Prefill throughput in tokens per second (0 when nothing was timed).
    pub fn prefill_tokens_per_second(&self) -> f64 {
        rate(self.prompt_tokens, self.prefill_seconds)
    }

    /// Decode throughput in tokens per second (0 when nothing was timed).
    pub fn decode_tokens_per_second(&self) -> f64 {
        rate(self.generated_tokens, self.decode_seconds)
    }
}

fn rate(n: usize, seconds: f64) -> f64 {
    if seconds > 0.0 {
        n as f64 / seconds
    } else {
        0.0
    }
}

/// What one [`Session::generate`] call produced.
#[derive(Clone, Debug, PartialEq)]
pub struct Generation {
    /// Every sampled token id, in order (a stop token included).
    pub tokens: Vec<u32>,
    /// Why generation stopped.
    pub reason: StopReason,
    /// Counts and timings.
    pub stats: GenerationStats,
}

/// The context policy for a new prompt: `in_use + new` positions must fit in
/// `context`, and there must be something to continue from.
pub(crate) fn check_room(in_use: usize, new: usize, context: usize) -> Result<()> {
    let needed = in_use + new;
    if needed > context {
        return Err(Error::Input(format!(
            "the prompt needs {needed} positions ({in_use} in use + {new} new) but the context holds {context}"
        )));
    }
    if needed == 0 {
        return Err(Error::Input(
            "an empty prompt with nothing before it to continue".into(),
        ));
    }
    Ok(())
}

/// Turns sampled tokens into shown text and stop decisions: the [`Stopper`], the
/// tokenizer's decode stream and a reused text buffer. Shared by [`Session`] and the
/// speculative loop.
pub(crate) struct Emitter<'t> {
    stop: &'t StopConfig,
    stopper: Stopper,
    stream: DecodeStream<'t>,
    shown: String,
}

impl<'t> Emitter<'t> {
    /// An emitter for one generation.
    pub(crate) fn new(tokenizer: &'t Tokenizer, stop: &'t StopConfig) -> Self {
        Self {
            stop,
            stopper: Stopper::new(stop),
            stream: tokenizer.decode_stream(false),
            shown: String::new(),
        }
    }

    /// Feeds one sampled token: passes the text that may now be shown to `on_text` and
    /// returns why generation ends with this token, if it does. `context_full` says
    /// the token cannot be run (held-back text is then flushed).
    pub(crate) fn emit(
        &mut self,
        token: u32,
        context_full: bool,
        on_text: &mut impl FnMut(&str) -> ControlFlow<()>,
    ) -> Option<StopReason> {
        let budget_spent = self
            .stop
            .max_tokens
            .is_some_and(|m| self.stopper.generated() + 1 >= m);
        self.shown.clear();
        let reason = if self.stop.tokens.contains(&token) {
            self.stopper.push(token, b"", &mut self.shown)
        } else {
            let mut text = self.stream.step(token).unwrap_or_default();
            if context_full || budget_spent {
                text.push_str(&self.stream.finish().unwrap_or_default());
            }
            let r = self.stopper.push(token, text.as_bytes(), &mut self.shown);
            if r.is_none() && context_full {
                self.stopper.finish(&mut self.shown);
            }
            r
        };
        let reason = reason.or(context_full.then_some(StopReason::ContextFull));
        if !self.shown.is_empty() && on_text(&self.shown).is_break() {
            return Some(StopReason::Cancelled);
        }
        reason
    }
}

/// A model with its KV cache and buffers: see the [module](self) documentation.
#[derive(Debug)]
pub struct Session<'m> {
    model: &'m Model,
    cache: KvCache,
    ws: Workspace,
    logits: Vec<f32>,
    /// The last sampled token, not yet run through the model.
    pending: Option<u32>,
    progress: Option<PrefillProgress>,
    cancel: Option<Arc<AtomicBool>>,
}

/// A callback told `(tokens run, prompt tokens)` after each prefill chunk of a prompt
/// longer than one chunk (the CLI draws a progress bar with it).
#[derive(Clone)]
pub struct PrefillProgress(pub Arc<dyn Fn(usize, usize) + Send + Sync>);

impl std::fmt::Debug for PrefillProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PrefillProgress")
    }
}

impl<'m> Session<'m> {
    /// The most prompt tokens one prefill forward call runs.
    pub const PREFILL_CHUNK: usize = 256;

    /// A session over `model` with room for `context` positions (at most the model's
    /// `max_positions`).
    pub fn new(model: &'m Model, context: usize) -> Result<Self> {
        Self::with_prefill_chunk(model, context, Self::PREFILL_CHUNK)
    }

    /// [`Session::new`] running prompts in chunks of at most `chunk ≥ 1` tokens
    /// (the workspace holds `min(chunk, context)` rows).
    pub fn with_prefill_chunk(model: &'m Model, context: usize, chunk: usize) -> Result<Self> {
        if chunk == 0 {
            return Err(Error::Input("a prefill chunk of 0 tokens".into()));
        }
        let max = model.config().max_positions;
        if context == 0 || context > max {
            return Err(Error::Input(format!(
                "a context of {context} positions is outside the model's 1..={max}"
            )));
        }
        let cache = model.new_cache(context);
        let ws = model.workspace(chunk.min(context), context)?;
        Ok(Self {
            model,
            cache,
            ws,
            logits: vec![0.0; model.config().vocab_size],
            pending: None,
            progress: None,
            cancel: None,
        })
    }

    /// Splits decode projections across `pool`'s threads (see
    /// [`Workspace::set_pool`]).
    pub fn set_pool(&mut self, pool: Option<Arc<ThreadPool>>) {
        self.ws.set_pool(pool);
    }

    /// Reports prefill progress of long prompts to `progress`.
    pub fn set_prefill_progress(&mut self, progress: Option<PrefillProgress>) {
        self.progress = progress;
    }

    /// A flag checked between prefill chunks: when it is set, the prompt being run is
    /// undone and [`Session::generate`] returns [`StopReason::Cancelled`] with no
    /// token (the flag is left set; the caller clears it). During decode, cancel
    /// through the text callback.
    pub fn set_cancel(&mut self, cancel: Option<Arc<AtomicBool>>) {
        self.cancel = cancel;
    }

    /// The model.
    pub fn model(&self) -> &'m Model {
        self.model
    }

    /// Positions in use: the cache's length plus the pending last token.
    pub fn position(&self) -> usize {
        self.cache.len() + usize::from(self.pending.is_some())
    }

    /// The number of positions the session has room for.
    pub fn context(&self) -> usize {
        self.cache.capacity()
    }

    /// Forgets the cache and the pending token: the next call starts a new sequence.
    pub fn reset(&mut self) {
        self.cache.clear();
        self.pending = None;
    }

    /// Appends `prompt` (after the pending token of the previous call, if any), then
    /// generates until `stop` says so, the context is full, or `on_text` breaks.
    /// `on_text` receives every piece of text that may be shown, in order. The
    /// sampler's penalty window is fed the prompt; reset the sampler yourself for an
    /// unrelated generation.
    pub fn generate(
        &mut self,
        tokenizer: &Tokenizer,
        prompt: &[u32],
        sampler: &mut Sampler,
        stop: &StopConfig,
        mut on_text: impl FnMut(&str) -> ControlFlow<()>,
    ) -> Result<Generation> {
        let context = self.cache.capacity();
        let pending = usize::from(self.pending.is_some());
        check_room(self.cache.len() + pending, prompt.len(), context)?;
        let mut stats = GenerationStats {
            prompt_tokens: prompt.len() + pending,
            ..GenerationStats::default()
        };
        let start = Instant::now();
        let (cache_before, pending_before) = (self.cache.len(), self.pending);
        if let Some(last) = self.pending.take() {
            self.run(&[last])?;
        }
        let chunk_len = self.ws.max_tokens();
        for (i, chunk) in prompt.chunks(chunk_len).enumerate() {
            if self.cancelled() {
                self.cache.truncate(cache_before);
                self.pending = pending_before;
                stats.prompt_tokens = 0;
                stats.prefill_seconds = start.elapsed().as_secs_f64();
                return Ok(Generation {
                    tokens: Vec::new(),
                    reason: StopReason::Cancelled,
                    stats,
                });
            }
            self.run(chunk)?;
            if let Some(p) = self.progress.as_ref().filter(|_| prompt.len() > chunk_len) {
                (p.0)(
                    (i * chunk_len + chunk.len()).min(prompt.len()),
                    prompt.len(),
                );
            }
        }
        for &t in prompt {
            sampler.accept(t).map_err(Error::core("sampler"))?;
        }
        stats.prefill_seconds = start.elapsed().as_secs_f64();

        let start = Instant::now();
        let mut tokens = Vec::with_capacity(context - self.cache.len() + 1);
        let mut emitter = Emitter::new(tokenizer, stop);
        let reason = loop {
            let token = sampler
                .sample(&mut self.logits)
                .map_err(Error::core("sampler"))?;
            tokens.push(token);
            self.pending = Some(token);
            let context_full = self.cache.len() == context;
            if let Some(reason) = emitter.emit(token, context_full, &mut on_text) {
                break reason;
            }
            self.pending = None;
            self.run(&[token])?;
        };
        stats.generated_tokens = tokens.len();
        stats.decode_seconds = start.elapsed().as_secs_f64();
        Ok(Generation {
            tokens,
            reason,
            stats,
        })
    }

    fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    }

    /// Runs `tokens` through the model into the cache and keeps the last logits.
    fn run(&mut self, tokens: &[u32]) -> Result<()> {
        let logits =
            self.model
                .forward_with(tokens, &mut self.cache, &mut self.ws, Logits::Last)?;
        self.logits.copy_from_slice(logits);
        Ok(())
    }
}
