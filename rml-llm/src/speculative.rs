//! Speculative decoding: a small draft model proposes up to `k` tokens one at a time,
//! the target model checks them all in one forward call, and the tokens it agrees
//! with are kept, so one target call yields between 1 and `k + 1` tokens.
//!
//! Per round, with `h` the sequence so far (its last token not yet in the target's
//! cache):
//!
//! 1. The draft runs what of `h` it has not seen, then proposes `d_0 … d_{k−1}`,
//!    drawing each from its own processed distribution `q_i` (the same sampler chain
//!    as the target, its own random stream), or taking its argmax when greedy.
//! 2. The target runs `[last of h, d_0 … d_{k−1}]` in one call with every row's
//!    logits: row `i` is the target's distribution `p_i` for the position of `d_i`,
//!    row `k` the one after `d_{k−1}`.
//! 3. Rows are checked in order. **Greedy**: the target's own greedy choice `t_i`
//!    is emitted; the round goes on while `t_i = d_i`. **Sampled** (the rule of
//!    Leviathan et al. 2023 and Chen et al. 2023, see [`verify_draft`]): `d_i` is
//!    kept with probability `min(1, p_i(d_i) / q_i(d_i))`; otherwise a token is drawn
//!    from `max(0, p_i − q_i)` normalised and the round ends. Either way each
//!    emitted token is distributed exactly as the target alone would sample it.
//!    When all `k` are kept, a bonus token is sampled from row `k`.
//! 4. The target's cache is cut back to the kept tokens ([`KvCache::truncate`]), the
//!    draft's to what it proposed and was kept.
//!
//! Greedy output is the target's own greedy output (up to the rounding difference of
//! running several rows in one call instead of one; the tests show equal ids).
//! Penalties work: the target's window receives each emitted token before the next
//! row is processed, and the draft's window is copied from it every round. Stop
//! handling, the context policy and continuation are those of
//! [`Session`]: the same `Emitter` runs over every emitted token,
//! and `k` shrinks near the end of the context or of the token budget.
//!
//! **Cancellation.** A flag ([`SpeculativeSession::set_cancel`]) is checked before
//! each prefill chunk of either model, before each draft step and before each
//! verification call. Set before the first token is emitted, the call is undone (the
//! caches, the sequence and the sampler are as before it) and returns
//! [`StopReason::Cancelled`] with no token, as [`Session`] does for a
//! cancelled prompt; set later, the round stops there and the call returns the tokens
//! emitted so far with [`StopReason::Cancelled`], the caches cut back to them, so the
//! next call continues as after any other stop.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rml_core::random::Rng;
use rml_core::random::distributions::categorical;
use rml_host::ThreadPool;

use crate::error::{Error, Result};
use crate::generate::{Emitter, Generation, GenerationStats, Session, check_room};
use crate::kv_cache::KvCache;
use crate::model::{Logits, Model, Workspace};
use crate::sample::{Sampler, SamplerConfig};
use crate::stop::{StopConfig, StopReason};
use crate::tokenizer::Tokenizer;

/// What checking one drafted token decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The drafted token is kept.
    Accept,
    /// The drafted token is rejected; this token (drawn from the residual
    /// distribution) is emitted instead and the round ends.
    Reject(u32),
}

/// The sampled acceptance rule for one drafted token `token`, drawn from `q`, when the
/// target's distribution is `p` (both vocabulary-sized probability vectors): with
/// `u` uniform in `[0, 1)` (one `next_f64` of `rng`), accept if
/// `u · q(token) < p(token)`; else draw from `residual = max(0, p − q)` (written to
/// `residual`, then normalised by the draw). The emitted token is then distributed as
/// `p`. If the residual is all zero (only possible by rounding, as `p = q` accepts
/// surely), the draw is from `p`.
pub fn verify_draft<R: Rng + ?Sized>(
    p: &[f32],
    q: &[f32],
    token: u32,
    rng: &mut R,
    residual: &mut [f32],
) -> Result<Verdict> {
    let n = p.len();
    if q.len() != n || residual.len() != n {
        return Err(Error::Input(format!(
            "verify_draft: p has {n} entries, q {} and residual {}",
            q.len(),
            residual.len()
        )));
    }
    let t = token as usize;
    if t >= n {
        return Err(Error::Input(format!(
            "verify_draft: token {token} outside a vocabulary of {n}"
        )));
    }
    let u = rng.next_f64();
    if u * f64::from(q[t]) < f64::from(p[t]) {
        return Ok(Verdict::Accept);
    }
    let mut any = false;
    for ((r, &pi), &qi) in residual.iter_mut().zip(p).zip(q) {
        *r = (pi - qi).max(0.0);
        any |= *r > 0.0;
    }
    let from = if any { &*residual } else { p };
    let drawn = categorical(rng, from).map_err(Error::core("residual draw"))?;
    Ok(Verdict::Reject(drawn as u32))
}

/// Counts of one speculative generation, besides the usual [`GenerationStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SpeculativeStats {
    /// Target verification calls (rounds).
    pub rounds: usize,
    /// Tokens the draft proposed.
    pub drafted: usize,
    /// Drafted tokens the target kept.
    pub accepted: usize,
}

impl SpeculativeStats {
    /// Kept drafted tokens over proposed ones (0 when nothing was drafted).
    pub fn acceptance_rate(&self) -> f64 {
        if self.drafted == 0 {
            0.0
        } else {
            self.accepted as f64 / self.drafted as f64
        }
    }
}

/// One model's side of the loop: its cache, workspace and the logits it keeps.
#[derive(Debug)]
struct Side<'m> {
    model: &'m Model,
    cache: KvCache,
    ws: Workspace,
}

impl<'m> Side<'m> {
    fn new(model: &'m Model, context: usize, max_tokens: usize) -> Result<Self> {
        Ok(Self {
            model,
            cache: model.new_cache(context),
            ws: model.workspace(max_tokens.min(context), context)?,
        })
    }

    /// Runs `tokens` in workspace-sized chunks; `out` receives the last logits
    /// (`Logits::Last`) or every row of a single chunk (`Logits::All`).
    fn run(&mut self, tokens: &[u32], which: Logits, out: &mut [f32]) -> Result<()> {
        self.run_unless(tokens, which, out, || false).map(|_| ())
    }

    /// [`Side::run`], checking `cancelled` before each chunk: `Ok(false)` when it
    /// said so (the chunks before it are in the cache).
    fn run_unless(
        &mut self,
        tokens: &[u32],
        which: Logits,
        out: &mut [f32],
        cancelled: impl Fn() -> bool,
    ) -> Result<bool> {
        for chunk in tokens.chunks(self.ws.max_tokens()) {
            if cancelled() {
                return Ok(false);
            }
            let logits = self
                .model
                .forward_with(chunk, &mut self.cache, &mut self.ws, which)?;
            out[..logits.len()].copy_from_slice(logits);
        }
        Ok(true)
    }
}

/// True when `flag` is set.
fn is_set(flag: &Option<Arc<AtomicBool>>) -> bool {
    flag.as_ref().is_some_and(|c| c.load(Ordering::Relaxed))
}

/// A target and a draft model with their caches: see the [module](self) docs.
#[derive(Debug)]
pub struct SpeculativeSession<'m> {
    target: Side<'m>,
    draft: Side<'m>,
    k: usize,
    vocab: usize,
    /// Every token of the sequence; the last is not yet in the target's cache.
    history: Vec<u32>,
    /// `(k + 1) × vocab` target logits of a verification call.
    target_logits: Vec<f32>,
    /// The draft's last logits.
    draft_logits: Vec<f32>,
    /// `k × vocab` draft probabilities of the proposed tokens (sampled mode).
    draft_probs: Vec<f32>,
    /// The target's processed probabilities of one row.
    target_probs: Vec<f32>,
    residual: Vec<f32>,
    drafted: Vec<u32>,
    cancel: Option<Arc<AtomicBool>>,
}

impl<'m> SpeculativeSession<'m> {
    /// A session drafting `k ≥ 1` tokens per round with `draft` for `target`, with
    /// room for `context` positions (at most either model's `max_positions`). The
    /// two models must share the vocabulary size (the caller checks that the
    /// tokenizers agree).
    pub fn new(target: &'m Model, draft: &'m Model, k: usize, context: usize) -> Result<Self> {
        let vocab = target.config().vocab_size;
        if draft.config().vocab_size != vocab {
            return Err(Error::Input(format!(
                "the draft model's vocabulary has {} tokens but the target's has {vocab}",
                draft.config().vocab_size
            )));
        }
        if k == 0 {
            return Err(Error::Input(
                "speculative decoding needs at least 1 draft token per round".into(),
            ));
        }
        let max = target
            .config()
            .max_positions
            .min(draft.config().max_positions);
        if context == 0 || context > max {
            return Err(Error::Input(format!(
                "a context of {context} positions is outside the models' 1..={max}"
            )));
        }
        let chunk = Session::PREFILL_CHUNK.max(k + 1);
        Ok(Self {
            target: Side::new(target, context, chunk)?,
            draft: Side::new(draft, context, chunk)?,
            k,
            vocab,
            history: Vec::with_capacity(context + 1),
            target_logits: vec![0.0; (k + 1) * vocab],
            draft_logits: vec![0.0; vocab],
            draft_probs: vec![0.0; k * vocab],
            target_probs: vec![0.0; vocab],
            residual: vec![0.0; vocab],
            drafted: Vec::with_capacity(k),
            cancel: None,
        })
    }

    /// Splits both models' decode projections across `pool`'s threads.
    pub fn set_pool(&mut self, pool: Option<Arc<ThreadPool>>) {
        self.target.ws.set_pool(pool.clone());
        self.draft.ws.set_pool(pool);
    }

    /// A flag checked before each prefill chunk, draft step and verification call
    /// (see the [module](self) docs); it is left set, the caller clears it.
    pub fn set_cancel(&mut self, cancel: Option<Arc<AtomicBool>>) {
        self.cancel = cancel;
    }

    /// Positions in use (the last sampled token included).
    pub fn position(&self) -> usize {
        self.history.len()
    }

    /// Forgets the sequence.
    pub fn reset(&mut self) {
        self.history.clear();
        self.target.cache.clear();
        self.draft.cache.clear();
    }

    /// Appends `prompt` and generates as [`Session::generate`] does, `sampler` being
    /// the target's chain. The draft's chain is the same configuration with another
    /// seed. Returns the generation and the drafting counts.
    pub fn generate(
        &mut self,
        tokenizer: &Tokenizer,
        prompt: &[u32],
        sampler: &mut Sampler,
        stop: &StopConfig,
        mut on_text: impl FnMut(&str) -> ControlFlow<()>,
    ) -> Result<(Generation, SpeculativeStats)> {
        let context = self.target.cache.capacity();
        check_room(self.history.len(), prompt.len(), context)?;
        let needed = self.history.len() + prompt.len();
        let mut draft_sampler = Sampler::new(
            SamplerConfig {
                seed: sampler.config().seed ^ 0x5eed_d4af_0000_0001,
                ..sampler.config().clone()
            },
            self.vocab,
        )
        .map_err(Error::core("draft sampler"))?;
        let mut stats = GenerationStats {
            prompt_tokens: needed - self.target.cache.len(),
            ..GenerationStats::default()
        };
        let mut spec = SpeculativeStats::default();
        let start = Instant::now();
        let undo = Undo {
            history: self.history.len(),
            target: self.target.cache.len(),
            draft: self.draft.cache.len(),
            sampler: self.cancel.is_some().then(|| sampler.clone()),
        };
        self.history.extend_from_slice(prompt);
        for &t in prompt {
            sampler.accept(t).map_err(Error::core("sampler"))?;
        }
        let last = self.history.len() - 1;
        let cancel = &self.cancel;
        let (history, target) = (&self.history, &mut self.target);
        let mut ran = target.run_unless(
            &history[target.cache.len()..last],
            Logits::Last,
            &mut self.target_logits,
            || is_set(cancel),
        )?;
        let draft = &mut self.draft;
        ran = ran
            && draft.run_unless(
                &history[draft.cache.len()..last],
                Logits::Last,
                &mut self.draft_logits,
                || is_set(cancel),
            )?;
        stats.prefill_seconds = start.elapsed().as_secs_f64();
        if !ran {
            self.undo(undo, sampler);
            stats.prompt_tokens = 0;
            return Ok((cancelled(Vec::new(), stats), spec));
        }

        let start = Instant::now();
        let mut tokens = Vec::with_capacity(context - last + 1);
        let mut emitter = Emitter::new(tokenizer, stop);
        let reason = 'rounds: loop {
            let before = self.history.len();
            let budget_left = stop
                .max_tokens
                .map_or(usize::MAX, |m| m.saturating_sub(tokens.len()));
            let k = self
                .k
                .min(context - before)
                .min(budget_left.saturating_sub(1));
            draft_sampler.copy_window_from(sampler);
            if !self.propose(k, &mut draft_sampler)? || is_set(&self.cancel) {
                let keep = self.history.len() - 1;
                let draft_len = self.draft.cache.len().min(keep);
                self.draft.cache.truncate(draft_len);
                break 'rounds StopReason::Cancelled;
            }
            spec.rounds += 1;
            spec.drafted += k;
            let run_from = self.target.cache.len();
            self.history.extend_from_slice(&self.drafted);
            self.target.run(
                &self.history[run_from..before + k],
                Logits::All,
                &mut self.target_logits,
            )?;
            self.history.truncate(before);
            let mut round_end = None;
            for i in 0..=k {
                let row = &mut self.target_logits[i * self.vocab..(i + 1) * self.vocab];
                let (token, last) = if i == k {
                    (sampler.sample(row).map_err(Error::core("sampler"))?, true)
                } else if sampler.config().is_greedy() {
                    let t = sampler.sample(row).map_err(Error::core("sampler"))?;
                    (t, t != self.drafted[i])
                } else {
                    sampler.apply(row).map_err(Error::core("sampler"))?;
                    sampler
                        .probabilities(row, &mut self.target_probs)
                        .map_err(Error::core("sampler"))?;
                    let q = &self.draft_probs[i * self.vocab..(i + 1) * self.vocab];
                    let verdict = verify_draft(
                        &self.target_probs,
                        q,
                        self.drafted[i],
                        sampler.rng(),
                        &mut self.residual,
                    )?;
                    let (t, last) = match verdict {
                        Verdict::Accept => (self.drafted[i], false),
                        Verdict::Reject(t) => (t, true),
                    };
                    sampler.accept(t).map_err(Error::core("sampler"))?;
                    (t, last)
                };
                if i < k && !last {
                    spec.accepted += 1;
                }
                tokens.push(token);
                let context_full = self.history.len() == context;
                self.history.push(token);
                if let Some(reason) = emitter.emit(token, context_full, &mut on_text) {
                    round_end = Some(reason);
                }
                if last || round_end.is_some() {
                    break;
                }
            }
            // Keep in each cache only what the sequence now holds (its last token
            // stays pending for the target).
            let keep = self.history.len() - 1;
            self.target.cache.truncate(keep);
            let draft_len = self.draft.cache.len().min(keep);
            self.draft.cache.truncate(draft_len);
            if let Some(reason) = round_end {
                break 'rounds reason;
            }
        };
        stats.decode_seconds = start.elapsed().as_secs_f64();
        if reason == StopReason::Cancelled && tokens.is_empty() {
            self.undo(undo, sampler);
            stats.prompt_tokens = 0;
            return Ok((cancelled(tokens, stats), spec));
        }
        stats.generated_tokens = tokens.len();
        Ok((
            Generation {
                tokens,
                reason,
                stats,
            },
            spec,
        ))
    }

    /// Puts the sequence, both caches and the sampler back as `undo` recorded them.
    fn undo(&mut self, undo: Undo, sampler: &mut Sampler) {
        self.history.truncate(undo.history);
        self.target.cache.truncate(undo.target);
        self.draft.cache.truncate(undo.draft);
        if let Some(before) = undo.sampler {
            *sampler = before;
        }
    }

    /// The draft catches up with the sequence and proposes `k` tokens into
    /// `self.drafted` (their probabilities into `draft_probs` when sampling).
    /// `Ok(false)` when the cancel flag was seen before a draft step.
    fn propose(&mut self, k: usize, sampler: &mut Sampler) -> Result<bool> {
        self.drafted.clear();
        if k == 0 {
            return Ok(true);
        }
        let from = self.draft.cache.len();
        let cancel = &self.cancel;
        if !self.draft.run_unless(
            &self.history[from..],
            Logits::Last,
            &mut self.draft_logits,
            || is_set(cancel),
        )? {
            return Ok(false);
        }
        for i in 0..k {
            if is_set(&self.cancel) {
                return Ok(false);
            }
            if i > 0 {
                let prev = [self.drafted[i - 1]];
                self.draft
                    .run(&prev, Logits::Last, &mut self.draft_logits)?;
            }
            let token = if sampler.config().is_greedy() {
                sampler.sample(&mut self.draft_logits)
            } else {
                let q = &mut self.draft_probs[i * self.vocab..(i + 1) * self.vocab];
                sampler
                    .apply(&mut self.draft_logits)
                    .and_then(|()| sampler.probabilities(&self.draft_logits, q))
                    .and_then(|()| sampler.draw(q))
            }
            .map_err(Error::core("draft sampler"))?;
            self.drafted.push(token);
        }
        Ok(true)
    }
}

/// What a call must restore when it is cancelled before its first token.
struct Undo {
    history: usize,
    target: usize,
    draft: usize,
    /// The sampler before the prompt was fed to it (kept only with a cancel flag).
    sampler: Option<Sampler>,
}

/// A generation cancelled with `tokens` emitted.
fn cancelled(tokens: Vec<u32>, stats: GenerationStats) -> Generation {
    Generation {
        tokens,
        reason: StopReason::Cancelled,
        stats,
    }
}
