//! Decode attention alone, on a KV cache larger than the last-level cache, in GB/s of
//! keys and values read, next to a plain read of the same bytes.
//!
//! Usage: `decode_attention [LAYERS POSITIONS ROUNDS f32|f16]` (defaults: 28 layers,
//! 512 positions, 7 rounds, f32; the head shape is Qwen3-0.6B's: 16 query heads,
//! 8 key/value heads of 128). Each round times, on this one thread, one sweep of
//! [`AttentionSpec::run`] for the query at the last position over every layer's cache,
//! and one plain read (a sum) of every layer's keys and values; it repeats each until
//! ~0.25 s have passed and prints the thread CPU time per sweep
//! (`/proc/thread-self/schedstat`, falling back to wall time where that file does not
//! exist). The last line gives the medians.

use std::time::Instant;

use rml_kernels::gemm::Weight;
use rml_llm::attention::{AttentionSpec, DecodeScratch, KvRing};
use rml_llm::kv_cache::{KvElement, KvSlices};
use rml_llm::{KvCache, KvDtype};

const N_HEADS: usize = 16;
const N_KV_HEADS: usize = 8;
const HEAD_DIM: usize = 128;

/// Nanoseconds this thread has run, else wall-clock nanoseconds since `t0`.
fn clock(t0: Instant) -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| t0.elapsed().as_nanos() as u64)
}

/// Mean nanoseconds of one call of `f`, repeated for at least 0.25 s.
fn time(mut f: impl FnMut()) -> f64 {
    let t0 = Instant::now();
    let (c0, mut calls) = (clock(t0), 0u32);
    while t0.elapsed().as_secs_f64() < 0.25 {
        f();
        calls += 1;
    }
    (clock(t0) - c0) as f64 / calls as f64
}

/// Wrapping sum of every 32-bit word of `x`, in 16 independent lanes (the loop
/// vectorizes; no conversion, so f16 caches read at the same speed as f32 ones).
fn plain_read<T: bytemuck::Pod>(x: &[T]) -> u32 {
    let words: &[u32] = bytemuck::cast_slice(x);
    let mut acc = [0u32; 16];
    for c in words.chunks_exact(16) {
        for (a, v) in acc.iter_mut().zip(c) {
            *a = a.wrapping_add(*v);
        }
    }
    acc.iter().fold(0, |s, a| s.wrapping_add(*a))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Decode attention of `q` as the last of a full layer's cached positions (one row
/// each in `keys` and `values`).
fn attend_layer<T: KvElement + Weight>(
    spec: &AttentionSpec,
    q: &[f32],
    keys: &[T],
    values: &[T],
    out: &mut [f32],
    scratch: &mut DecodeScratch,
) -> rml_llm::Result<()> {
    let slots = keys.len() / (spec.n_kv_heads * spec.head_dim);
    let kv = KvRing {
        keys,
        values,
        slots,
    };
    spec.run(q, kv, slots - 1, out, scratch)
}

fn run(args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let num = |i: usize, default: usize| -> Result<usize, String> {
        args.get(i).map_or(Ok(default), |s| {
            s.parse()
                .map_err(|_| format!("argument {i} must be a number"))
        })
    };
    let (layers, positions, rounds) = (num(1, 28)?, num(2, 512)?, num(3, 7)?.max(1));
    let dtype: KvDtype = args.get(4).map_or(Ok(KvDtype::F32), |s| s.parse())?;
    if positions == 0 {
        return Err("POSITIONS must be at least 1".into());
    }
    let kv_dim = N_KV_HEADS * HEAD_DIM;
    let mut cache = KvCache::with_dtype(layers, kv_dim, positions, dtype);
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let (mut k, mut v) = (vec![0.0f32; kv_dim], vec![0.0f32; kv_dim]);
    for layer in 0..layers {
        for pos in 0..positions {
            k.iter_mut().chain(v.iter_mut()).for_each(|x| *x = rand());
            cache.store(layer, pos, &k, &v);
        }
    }
    cache.advance(positions);
    let spec = AttentionSpec {
        n_heads: N_HEADS,
        n_kv_heads: N_KV_HEADS,
        head_dim: HEAD_DIM,
        scale: (HEAD_DIM as f32).powf(-0.5),
        softcap: None,
        window: None,
    };
    let q: Vec<f32> = (0..N_HEADS * HEAD_DIM).map(|_| rand()).collect();
    let mut out = vec![0.0f32; q.len()];
    let mut scratch = DecodeScratch::with_capacity(N_HEADS, HEAD_DIM, positions);
    let mut attend = || -> rml_llm::Result<()> {
        for layer in 0..layers {
            match cache.layer(layer) {
                KvSlices::F32(keys, values) => {
                    attend_layer(&spec, &q, keys, values, &mut out, &mut scratch)?
                }
                KvSlices::F16(keys, values) => {
                    attend_layer(&spec, &q, keys, values, &mut out, &mut scratch)?
                }
            }
        }
        Ok(())
    };
    let mut sink = 0u32;
    let mut read = || {
        for layer in 0..layers {
            let sum = match cache.layer(layer) {
                KvSlices::F32(keys, values) => plain_read(keys) ^ plain_read(values),
                KvSlices::F16(keys, values) => plain_read(keys) ^ plain_read(values),
            };
            sink = sink.wrapping_add(sum);
        }
    };
    let bytes = cache.bytes() as f64;
    println!(
        "{layers} layers x {positions} positions, {N_HEADS}/{N_KV_HEADS} heads of {HEAD_DIM}, \
         {dtype:?} cache: {:.1} MB of keys and values",
        bytes / 1e6
    );
    attend()?;
    let (mut att, mut plain) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let mut err = Ok(());
        let a = time(|| {
            if let Err(e) = attend() {
                err = Err(e);
            }
        });
        err?;
        let p = time(&mut read);
        println!(
            "round {round}: attention {:.2} ms ({:.1} GB/s), plain read {:.2} ms ({:.1} GB/s)",
            a / 1e6,
            bytes / a,
            p / 1e6,
            bytes / p
        );
        att.push(a);
        plain.push(p);
    }
    let (a, p) = (median(&mut att), median(&mut plain));
    println!(
        "median: attention {:.2} ms ({:.1} GB/s), plain read {:.2} ms ({:.1} GB/s), ratio {:.2} (sink {sink:x})",
        a / 1e6,
        bytes / a,
        p / 1e6,
        bytes / p,
        a / p
    );
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Err(e) = run(&args) {
        eprintln!("decode_attention: {e}");
        std::process::exit(1);
    }
}
