//! Times prompt processing and single-sequence decode of one model file, for
//! `scripts/bench/llm_llama_cpp.py` (which runs llama.cpp on the same file).
//!
//! Usage: `llm_bench MODEL THREADS PROMPT_TOKENS DECODE_TOKENS REPS [f32|f16]` (the
//! KV cache's element type, f32 by default). After an
//! untimed warm-up (an 8-token prefill and 2 decode steps, which reads every
//! weight once), each of REPS rounds prefills PROMPT_TOKENS fixed token ids
//! into a fresh cache (last-token logits only) and then decodes DECODE_TOKENS greedy
//! tokens one at a time; it prints one line per round:
//! `{"pp_tok_s": …, "tg_tok_s": …, "pp_cpu_ms": …, "tg_cpu_ms_per_tok": …}`
//! (wall-clock tokens per second; CPU time of every thread of the process for the
//! prefill and per decoded token, from `/proc/self/task/*/schedstat`, 0 where
//! those files do not exist: what to compare on a loaded machine), then one line
//! `{"peak_rss_kb": …, "kv_bytes": …, "parameter_bytes": …}`: the process's peak
//! resident set (`VmHWM` of `/proc/self/status`, mapped file pages included; 0
//! where that file does not exist), the KV cache's bytes and
//! `Model::parameter_bytes`.

use std::sync::Arc;
use std::time::Instant;

use rml_llm::{KvDtype, Logits, Model};

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
        .ok_or("usage: llm_bench MODEL THREADS PROMPT DECODE REPS [f32|f16]")?;
    let threads: usize = arg(args, 2, "THREADS")?;
    let pp: usize = arg(args, 3, "PROMPT_TOKENS")?;
    let tg: usize = arg(args, 4, "DECODE_TOKENS")?;
    let reps: usize = arg(args, 5, "REPS")?;
    let dtype: KvDtype = args.get(6).map_or(Ok(KvDtype::F32), |s| s.parse())?;
    let model = Model::open(path)?;
    let vocab = model.config().vocab_size;
    let prompt: Vec<u32> = (0..pp).map(|i| ((i * 7919 + 13) % vocab) as u32).collect();
    let mut ws = model.workspace(pp.max(1), pp + tg)?;
    if threads > 1 {
        ws.set_pool(Some(Arc::new(rml_host::ThreadPool::new(threads)?)));
    }
    let mut kv_bytes = 0;
    for round in 0..=reps {
        let (pp, tg) = if round == 0 { (pp.min(8), 2) } else { (pp, tg) };
        let mut cache = model.new_cache_with(prompt.len() + tg, dtype);
        kv_bytes = cache.bytes();
        let (start, cpu0) = (Instant::now(), cpu_ns());
        let last = model.forward_with(&prompt[..pp], &mut cache, &mut ws, Logits::Last)?;
        let mut token = argmax(last);
        let prefill = start.elapsed().as_secs_f64();
        let (start, cpu1) = (Instant::now(), cpu_ns());
        for _ in 0..tg {
            token = argmax(model.forward_with(&[token], &mut cache, &mut ws, Logits::Last)?);
        }
        let decode = start.elapsed().as_secs_f64();
        let cpu2 = cpu_ns();
        if round > 0 {
            println!(
                "{{\"pp_tok_s\": {:.3}, \"tg_tok_s\": {:.3}, \"pp_cpu_ms\": {:.3}, \"tg_cpu_ms_per_tok\": {:.4}}}",
                pp as f64 / prefill,
                tg as f64 / decode.max(1e-9),
                cpu1.saturating_sub(cpu0) as f64 / 1e6,
                cpu2.saturating_sub(cpu1) as f64 / 1e6 / tg.max(1) as f64
            );
        }
    }
    println!(
        "{{\"peak_rss_kb\": {}, \"kv_bytes\": {kv_bytes}, \"parameter_bytes\": {}}}",
        peak_rss_kb(),
        model.parameter_bytes()
    );
    Ok(())
}

/// CPU time in ns of every thread of this process (the first field of each
/// `/proc/self/task/*/schedstat`; 0 where those files do not exist).
fn cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// `VmHWM` of `/proc/self/status` in kB (0 when unavailable).
fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Err(e) = run(&args) {
        eprintln!("llm_bench: error: {e}");
        std::process::exit(1);
    }
}
