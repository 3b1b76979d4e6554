//! Times prompt processing and single-sequence decode of one model file, for
//! `scripts/bench/llm_llama_cpp.py` (which runs llama.cpp on the same file).
//!
//! Usage: `llm_bench MODEL THREADS PROMPT_TOKENS DECODE_TOKENS REPS`. After one
//! untimed warm-up round, each of REPS rounds prefills PROMPT_TOKENS fixed token ids
//! into a fresh cache (last-token logits only) and then decodes DECODE_TOKENS greedy
//! tokens one at a time; it prints one line per round:
//! `{"pp_tok_s": …, "tg_tok_s": …}` (wall-clock tokens per second).

use std::sync::Arc;
use std::time::Instant;

use rml_llm::{Logits, Model};

fn argmax(row: &[f32]) -> u32 {
    (0..row.len()).fold(0, |b, i| if row[i] > row[b] { i } else { b }) as u32
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> Result<T, String> {
    args.get(i)
        .ok_or_else(|| format!("missing {what}"))?
        .parse()
        .map_err(|_| format!("{what} must be a number"))
}

fn run(args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let path = args
        .get(1)
        .ok_or("usage: llm_bench MODEL THREADS PROMPT DECODE REPS")?;
    let threads: usize = arg(args, 2, "THREADS")?;
    let pp: usize = arg(args, 3, "PROMPT_TOKENS")?;
    let tg: usize = arg(args, 4, "DECODE_TOKENS")?;
    let reps: usize = arg(args, 5, "REPS")?;
    let model = Model::open(path)?;
    let vocab = model.config().vocab_size;
    let prompt: Vec<u32> = (0..pp).map(|i| ((i * 7919 + 13) % vocab) as u32).collect();
    let mut ws = model.workspace(pp.max(1), pp + tg)?;
    if threads > 1 {
        ws.set_pool(Some(Arc::new(rml_host::ThreadPool::new(threads)?)));
    }
    for round in 0..=reps {
        let mut cache = model.new_cache(pp + tg);
        let start = Instant::now();
        let mut token = argmax(model.forward_with(&prompt, &mut cache, &mut ws, Logits::Last)?);
        let prefill = start.elapsed().as_secs_f64();
        let start = Instant::now();
        for _ in 0..tg {
            token = argmax(model.forward_with(&[token], &mut cache, &mut ws, Logits::Last)?);
        }
        let decode = start.elapsed().as_secs_f64();
        if round > 0 {
            println!(
                "{{\"pp_tok_s\": {:.3}, \"tg_tok_s\": {:.3}}}",
                pp as f64 / prefill,
                tg as f64 / decode
            );
        }
    }
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Err(e) = run(&args) {
        eprintln!("llm_bench: error: {e}");
        std::process::exit(1);
    }
}
