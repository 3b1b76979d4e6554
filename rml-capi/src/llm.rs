//! The LLM entry points: load a model with its tokenizer, tokenize, detokenize, and
//! generate with a text callback.
//!
//! Each `rml_llm_generate` call starts a new sequence with its own KV cache and
//! sampler, so one LLM handle may serve several threads at once, and a callback may
//! call back into the library (even free the handle: the model lives until the call
//! returns). Text passed to the callback is borrowed for the callback's duration.

use std::ffi::{c_char, c_void};
use std::ops::ControlFlow;
use std::path::Path;

use rml_llm::sample::{Sampler, SamplerConfig};
use rml_llm::stop::{StopConfig, StopReason};
use rml_llm::tokenizer::{EncodeOptions, Tokenizer};
use rml_llm::{Model, Session};

use crate::args;
use crate::registry::{LLM_TAG, Registry};
use crate::status::{Outcome, RmlStatus, fail, guard};

/// A loaded model with its tokenizer: an opaque handle, never 0 for a live model.
pub type RmlLlm = u64;

/// `rml_llm_tokenize` flag: add the tokenizer's special tokens (BOS/EOS templates).
pub const RML_TOKENIZE_ADD_SPECIAL: u32 = 1;
/// `rml_llm_tokenize` flag: read special tokens written in the text (`<s>`, ...) as
/// those tokens. Leave it off for untrusted text.
pub const RML_TOKENIZE_PARSE_SPECIAL: u32 = 2;
/// `rml_llm_detokenize` flag: leave special tokens out of the text.
pub const RML_DETOKENIZE_SKIP_SPECIAL: u32 = 1;

/// The token budget of [`rml_generate_options_default`].
const DEFAULT_MAX_TOKENS: usize = 128;

/// Receives each piece of generated text as soon as it may be shown: `len` bytes of
/// UTF-8 at `text`, followed by a NUL, valid during the call only. Return 0 to go
/// on, anything else to stop (the generation then ends with
/// `RML_STOP_REASON_CANCELLED`).
pub type RmlTokenCallback =
    Option<unsafe extern "C" fn(text: *const c_char, len: usize, user_data: *mut c_void) -> i32>;

/// How `rml_llm_generate` samples and when it stops. Start from
/// [`rml_generate_options_default`] and change fields.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RmlGenerateOptions {
    /// The most tokens to generate (0 generates nothing).
    pub max_tokens: usize,
    /// Sampling temperature, finite and `>= 0` (0: greedy).
    pub temperature: f32,
    /// Keep the k most likely tokens (0: off).
    pub top_k: usize,
    /// Nucleus mass in `(0, 1]` (1: off).
    pub top_p: f32,
    /// Drop tokens below this fraction of the best one's probability, in `[0, 1]`.
    pub min_p: f32,
    /// Repetition penalty, `> 0` (1: off).
    pub repetition_penalty: f32,
    /// Seed of the sampler's random stream.
    pub seed: u64,
    /// Non-zero: stop at the end-of-sequence and end-of-turn tokens the vocabulary
    /// knows.
    pub stop_at_eos: u32,
    /// `n_stop_strings` NUL-terminated UTF-8 strings that end the generation and are
    /// not shown (may be null when `n_stop_strings` is 0). Read during the call only.
    pub stop_strings: *const *const c_char,
    /// Number of `stop_strings`.
    pub n_stop_strings: usize,
    /// KV-cache positions to allocate; 0 sizes it to the prompt plus `max_tokens`
    /// (at most the model's context).
    pub context: usize,
}

/// Why a generation ended.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmlStopReason {
    /// An end-of-sequence or end-of-turn token was generated.
    EndToken = 0,
    /// One of the stop strings appeared.
    StopString = 1,
    /// `max_tokens` tokens were generated.
    MaxTokens = 2,
    /// The context is full.
    ContextFull = 3,
    /// The callback asked to stop.
    Cancelled = 4,
}

/// What `rml_llm_generate` did.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RmlGeneration {
    /// Tokens generated (an end token included).
    pub n_tokens: usize,
    /// Tokens run in the prefill.
    pub prompt_tokens: usize,
    /// Why it stopped.
    pub stop_reason: RmlStopReason,
    /// Seconds spent on the prompt.
    pub prefill_seconds: f64,
    /// Seconds spent generating.
    pub decode_seconds: f64,
}

/// What an LLM handle holds.
struct LoadedLlm {
    model: Model,
    tok: Tokenizer,
    /// The end-of-sequence and end-of-turn ids.
    end_tokens: Vec<u32>,
}

/// Every live model.
static LLMS: Registry<LoadedLlm> = Registry::new("LLM", LLM_TAG);

/// Fails when `flags` has bits outside `known`.
fn check_flags(flags: u32, known: u32, what: &str) -> Outcome {
    if flags & !known != 0 {
        return Err(fail(
            RmlStatus::InvalidArgument,
            format!("{what}: unknown flag bits {:#x}", flags & !known),
        ));
    }
    Ok(())
}

/// Loads a model (a `.gguf` file, or a Hugging Face folder with `config.json`,
/// safetensors weights and `tokenizer.json`) and stores a new handle in `*out`. On
/// failure `*out` is set to 0.
///
/// # Safety
/// `path` is null or a NUL-terminated string; `out` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rml_llm_load(path: *const c_char, out: *mut RmlLlm) -> RmlStatus {
    guard(|| {
        // SAFETY: the caller's promise on `out`.
        unsafe { args::write(out, 0, "out")? };
        // SAFETY: the caller's promise on `path`.
        let path = unsafe { args::string(path, "path")? };
        let (model, tok) =
            rml_llm::open::load(Path::new(path)).map_err(|e| fail(RmlStatus::Load, e))?;
        let end_tokens = rml_llm::open::stop_tokens(&tok);
        let id = LLMS.insert(LoadedLlm {
            model,
            tok,
            end_tokens,
        });
        // SAFETY: as above.
        unsafe { args::write(out, id, "out") }
    })
}

/// Frees a model. Its handle becomes invalid at once; a generation still running on
/// it finishes first.
#[unsafe(no_mangle)]
pub extern "C" fn rml_llm_free(llm: RmlLlm) -> RmlStatus {
    guard(|| LLMS.remove(llm))
}

/// Encodes `text` into token ids. `flags` combines `RML_TOKENIZE_*` bits. `*count`
/// receives the number of ids; they are written to `tokens` when `capacity` holds
/// them all, else the call returns `RML_STATUS_BUFFER_TOO_SMALL` (pass `tokens =
/// NULL, capacity = 0` to ask for the count).
///
/// # Safety
/// `text` is null or NUL-terminated; `tokens` is null or holds `capacity` writable
/// ids; `count` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rml_llm_tokenize(
    llm: RmlLlm,
    text: *const c_char,
    flags: u32,
    tokens: *mut u32,
    capacity: usize,
    count: *mut usize,
) -> RmlStatus {
    guard(|| {
        let l = LLMS.get(llm)?;
        // SAFETY: the caller's promise on `text`.
        let text = unsafe { args::string(text, "text")? };
        check_flags(
            flags,
            RML_TOKENIZE_ADD_SPECIAL | RML_TOKENIZE_PARSE_SPECIAL,
            "flags",
        )?;
        let options = EncodeOptions {
            add_special_tokens: flags & RML_TOKENIZE_ADD_SPECIAL != 0,
            parse_special: flags & RML_TOKENIZE_PARSE_SPECIAL != 0,
        };
        let ids = l
            .tok
            .encode_with(text, options)
            .map_err(|e| fail(RmlStatus::InvalidArgument, format!("tokenize: {e}")))?;
        // SAFETY: the caller's promise on `count`.
        unsafe { args::write(count, ids.len(), "count")? };
        if capacity < ids.len() {
            return Err(fail(
                RmlStatus::BufferTooSmall,
                format!("{} token ids do not fit a buffer of {capacity}", ids.len()),
            ));
        }
        // SAFETY: the caller's promise on `tokens`.
        let out = unsafe { args::slice_mut(tokens, ids.len(), "tokens")? };
        out.copy_from_slice(&ids);
        Ok(())
    })
}

/// Decodes `n_tokens` ids into UTF-8 text (ids past the vocabulary are skipped).
/// `flags` combines `RML_DETOKENIZE_*` bits. `*len` receives the text's length in
/// bytes; the text and a NUL are written to `text` when `capacity >= *len + 1`,
/// else the call returns `RML_STATUS_BUFFER_TOO_SMALL`.
///
/// # Safety
/// `tokens` is null or holds `n_tokens` ids; `text` is null or holds `capacity`
/// writable bytes; `len` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rml_llm_detokenize(
    llm: RmlLlm,
    tokens: *const u32,
    n_tokens: usize,
    flags: u32,
    text: *mut c_char,
    capacity: usize,
    len: *mut usize,
) -> RmlStatus {
    guard(|| {
        let l = LLMS.get(llm)?;
        // SAFETY: the caller's promise on `tokens`.
        let ids = unsafe { args::slice(tokens, n_tokens, "tokens")? };
        check_flags(flags, RML_DETOKENIZE_SKIP_SPECIAL, "flags")?;
        let decoded = l.tok.decode(ids, flags & RML_DETOKENIZE_SKIP_SPECIAL != 0);
        // SAFETY: the caller's promise on `len`.
        unsafe { args::write(len, decoded.len(), "len")? };
        if capacity <= decoded.len() {
            return Err(fail(
                RmlStatus::BufferTooSmall,
                format!(
                    "the text needs {} bytes with its NUL, the buffer holds {capacity}",
                    decoded.len() + 1
                ),
            ));
        }
        // SAFETY: the caller's promise on `text`.
        let out = unsafe { args::slice_mut(text.cast::<u8>(), decoded.len() + 1, "text")? };
        out[..decoded.len()].copy_from_slice(decoded.as_bytes());
        out[decoded.len()] = 0;
        Ok(())
    })
}

/// The default generation options: 128 tokens, the CLI's sampling defaults
/// (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, no repetition penalty),
/// seed 0, stop at end tokens, no stop strings, context sized to fit.
#[unsafe(no_mangle)]
pub extern "C" fn rml_generate_options_default() -> RmlGenerateOptions {
    let s = SamplerConfig::default();
    RmlGenerateOptions {
        max_tokens: DEFAULT_MAX_TOKENS,
        temperature: s.temperature,
        top_k: s.top_k,
        top_p: s.top_p,
        min_p: s.min_p,
        repetition_penalty: s.repetition_penalty,
        seed: s.seed,
        stop_at_eos: 1,
        stop_strings: std::ptr::null(),
        n_stop_strings: 0,
        context: 0,
    }
}

/// The stop strings of `o`.
///
/// # Safety
/// `o.stop_strings` keeps the promise documented on the field.
unsafe fn stop_strings(o: &RmlGenerateOptions) -> Outcome<Vec<String>> {
    // SAFETY: the caller's promise.
    let ptrs = unsafe { args::slice(o.stop_strings, o.n_stop_strings, "options.stop_strings")? };
    ptrs.iter()
        .enumerate()
        .map(|(i, &p)| {
            // SAFETY: the caller's promise on each string.
            let s = unsafe { args::string(p, &format!("options.stop_strings[{i}]"))? };
            if s.is_empty() {
                return Err(fail(
                    RmlStatus::InvalidArgument,
                    format!("options.stop_strings[{i}] is empty"),
                ));
            }
            Ok(s.to_string())
        })
        .collect()
}

/// The C form of a stop reason.
fn stop_reason(r: StopReason) -> RmlStopReason {
    match r {
        StopReason::Token(_) => RmlStopReason::EndToken,
        StopReason::String(_) => RmlStopReason::StopString,
        StopReason::MaxTokens => RmlStopReason::MaxTokens,
        StopReason::ContextFull => RmlStopReason::ContextFull,
        StopReason::Cancelled => RmlStopReason::Cancelled,
    }
}

/// Generates a continuation of the `prompt_len` token ids at `prompt` (from
/// `rml_llm_tokenize`, with `RML_TOKENIZE_ADD_SPECIAL` for a fresh prompt), as a new
/// sequence. `options` may be null for the defaults. Each piece of text goes to
/// `on_text` (may be null) with `user_data`. The generated ids are written to
/// `tokens` (may be null), at most `tokens_capacity` of them; `*result` (may be
/// null) receives the counts, the stop reason and timings.
///
/// # Safety
/// `prompt` is null or holds `prompt_len` ids; `options` is null or valid (its stop
/// strings included); `on_text` is null or a function that may be called with
/// `user_data`; `tokens` is null or holds `tokens_capacity` writable ids; `result` is
/// null or writable.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn rml_llm_generate(
    llm: RmlLlm,
    prompt: *const u32,
    prompt_len: usize,
    options: *const RmlGenerateOptions,
    on_text: RmlTokenCallback,
    user_data: *mut c_void,
    tokens: *mut u32,
    tokens_capacity: usize,
    result: *mut RmlGeneration,
) -> RmlStatus {
    guard(|| {
        let l = LLMS.get(llm)?;
        // SAFETY: the caller's promises on each pointer, passed on.
        let (prompt, options, strings, out_tokens) = unsafe {
            let prompt = args::slice(prompt, prompt_len, "prompt")?;
            let options = args::optional(options, "options")?
                .copied()
                .unwrap_or_else(|| rml_generate_options_default());
            let strings = stop_strings(&options)?;
            let out_tokens = args::slice_mut(tokens, tokens_capacity, "tokens")?;
            (prompt, options, strings, out_tokens)
        };
        if !result.is_null() {
            let empty = RmlGeneration {
                n_tokens: 0,
                prompt_tokens: 0,
                stop_reason: RmlStopReason::MaxTokens,
                prefill_seconds: 0.0,
                decode_seconds: 0.0,
            };
            // SAFETY: the caller's promise on `result`.
            unsafe { args::write(result, empty, "result")? };
        }
        let config = l.model.config();
        if let Some((i, id)) = prompt
            .iter()
            .enumerate()
            .find(|(_, id)| **id as usize >= config.vocab_size)
        {
            return Err(fail(
                RmlStatus::InvalidArgument,
                format!(
                    "prompt[{i}] = {id} is past the vocabulary of {} tokens",
                    config.vocab_size
                ),
            ));
        }
        if prompt.is_empty() {
            return Err(fail(RmlStatus::InvalidArgument, "the prompt is empty"));
        }
        let sampler_config = SamplerConfig {
            temperature: options.temperature,
            top_k: options.top_k,
            top_p: options.top_p,
            min_p: options.min_p,
            repetition_penalty: options.repetition_penalty,
            seed: options.seed,
            ..SamplerConfig::default()
        };
        let mut sampler = Sampler::new(sampler_config, config.vocab_size)
            .map_err(|e| fail(RmlStatus::InvalidArgument, format!("options: {e}")))?;
        if options.max_tokens == 0 {
            return Ok(());
        }
        let context = match options.context {
            0 => (prompt
                .len()
                .saturating_add(options.max_tokens)
                .saturating_add(1))
            .min(config.max_positions),
            n => n,
        };
        let mut session = Session::new(&l.model, context)
            .map_err(|e| fail(RmlStatus::InvalidArgument, format!("options.context: {e}")))?;
        let stop = StopConfig {
            strings,
            tokens: if options.stop_at_eos != 0 {
                l.end_tokens.clone()
            } else {
                Vec::new()
            },
            max_tokens: Some(options.max_tokens),
        };
        let mut piece: Vec<u8> = Vec::new();
        let generation = session
            .generate(&l.tok, prompt, &mut sampler, &stop, |text| {
                let Some(callback) = on_text else {
                    return ControlFlow::Continue(());
                };
                piece.clear();
                piece.extend_from_slice(text.as_bytes());
                piece.push(0);
                // SAFETY: the caller's promise on `on_text` and `user_data`; the text
                // is NUL-terminated and lives until the callback returns.
                let code = unsafe { callback(piece.as_ptr().cast(), text.len(), user_data) };
                if code == 0 {
                    ControlFlow::Continue(())
                } else {
                    ControlFlow::Break(())
                }
            })
            .map_err(|e| {
                let status = match e {
                    rml_llm::Error::Input(_) => RmlStatus::InvalidArgument,
                    _ => RmlStatus::Run,
                };
                fail(status, format!("generate: {e}"))
            })?;
        for (o, t) in out_tokens.iter_mut().zip(&generation.tokens) {
            *o = *t;
        }
        if !result.is_null() {
            let s = generation.stats;
            let value = RmlGeneration {
                n_tokens: generation.tokens.len(),
                prompt_tokens: s.prompt_tokens,
                stop_reason: stop_reason(generation.reason),
                prefill_seconds: s.prefill_seconds,
                decode_seconds: s.decode_seconds,
            };
            // SAFETY: as above.
            unsafe { args::write(result, value, "result")? };
        }
        Ok(())
    })
}
