//! What two cores stream **together**: quantized GEMV (or a plain read) of a matrix
//! larger than L3, on one thread and on two threads splitting the rows in halves.
//!
//! Each 2-thread call starts on both threads behind a spin barrier (as a pool hands off
//! a matmul) and is timed by wall clock; only calls during which neither thread was
//! switched out (context-switch counts in `/proc/thread-self/status` unchanged) and
//! whose two halves overlapped for ≥ 95 % of the longer one are kept, so on a shared
//! machine the figure is what the two cores did while both ran. 1-thread calls are
//! filtered the same way. Linux only. Prints medians in GB/s.
//!
//! ```text
//! cargo run --release -p rml-kernels --example gemv_pair -- WHAT N K
//!   WHAT: q4_0 | q8_0 | q4_k | q6_k, or readS (S sequential streams per thread over a
//!         Q8_0-sized matrix); env CALLS (default 1000), TOTAL_MB (buffers cycled, 192)
//! ```

use std::hint::black_box;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rml_kernels::quant as kq;
use rml_kernels::rml_core::DType;

#[path = "../benches/common/quant_blocks.rs"]
mod quant_blocks;
use quant_blocks::{Rng, activations, copies_beyond, random_blocks};

/// Voluntary plus involuntary context switches of this thread so far.
fn switches() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/status").expect("Linux /proc");
    s.lines()
        .filter(|l| l.contains("ctxt_switches"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// Sum of the u64 words of `b`, read as `streams` equal parts advancing together.
fn read_sum(b: &[u8], streams: usize) -> u64 {
    let part = b.len() / streams / 32 * 32;
    let mut acc = [0u64; 4];
    for i in (0..part).step_by(32) {
        for s in 0..streams {
            let c = &b[s * part + i..s * part + i + 32];
            for (a, w) in acc.iter_mut().zip(c.chunks_exact(8)) {
                *a = a.wrapping_add(u64::from_le_bytes(w.try_into().unwrap()));
            }
        }
    }
    acc.iter().fold(0, |s, &a| s.wrapping_add(a))
}

/// Median of `v` (0 when empty) and how many values it had.
fn median(mut v: Vec<f64>) -> (f64, usize) {
    v.sort_by(f64::total_cmp);
    (v.get(v.len() / 2).copied().unwrap_or(0.0), v.len())
}

/// One timed call on one thread: seconds, and whether it ran without a switch.
#[derive(Clone, Copy)]
struct Call {
    start: Instant,
    secs: f64,
    clean: bool,
}

fn timed(f: impl FnOnce()) -> Call {
    let s0 = switches();
    let start = Instant::now();
    f();
    let secs = start.elapsed().as_secs_f64();
    Call {
        start,
        secs,
        clean: switches() == s0,
    }
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).map_or(default, |v| v.parse().expect("a number"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, what, n, k] = &args[..] else {
        panic!("usage: gemv_pair WHAT N K (see the module docs)");
    };
    let (n, k): (usize, usize) = (n.parse().unwrap(), k.parse().unwrap());
    let t = match what.as_str() {
        "q4_0" => DType::Q4_0,
        "q4_k" => DType::Q4K,
        "q6_k" => DType::Q6K,
        _ => DType::Q8_0,
    };
    let streams: usize = what.strip_prefix("read").map_or(0, |s| s.parse().unwrap());
    let (calls, total) = (env("CALLS", 1000), env("TOTAL_MB", 192) << 20);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let one = random_blocks(t, n * k, &mut rng);
    let mats = copies_beyond(&one, total);
    let copies = mats.len();
    let a = activations(t, k, &mut rng);
    let run = |rows: Range<usize>, m: &[u8], out: &mut [f32]| {
        if streams > 0 {
            let rb = m.len() / n;
            black_box(read_sum(&m[rows.start * rb..rows.end * rb], streams));
        } else {
            kq::gemv(t, m, k, &a, rows, out).unwrap();
            black_box(&out);
        }
    };
    let gbs = |secs: f64| one.len() as f64 / secs / 1e9;

    let mut out = vec![0f32; n];
    let one_t: Vec<f64> = (0..calls)
        .map(|c| timed(|| run(0..n, &mats[c % copies], &mut out)))
        .filter(|c| c.clean)
        .map(|c| gbs(c.secs))
        .collect();

    let arrived = AtomicUsize::new(0);
    let halves: Vec<Vec<Call>> = std::thread::scope(|s| {
        let handles: Vec<_> = [0..n / 2, n / 2..n]
            .map(|rows| {
                let (arrived, mats, run) = (&arrived, &mats, &run);
                s.spawn(move || {
                    let mut out = vec![0f32; rows.len()];
                    (0..calls)
                        .map(|c| {
                            arrived.fetch_add(1, Ordering::SeqCst);
                            while arrived.load(Ordering::SeqCst) < 2 * (c + 1) {
                                std::hint::spin_loop();
                            }
                            timed(|| run(rows.clone(), &mats[c % copies], &mut out))
                        })
                        .collect()
                })
            })
            .into_iter()
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let end = |c: &Call| c.start + Duration::from_secs_f64(c.secs);
    let two_t: Vec<f64> = halves[0]
        .iter()
        .zip(&halves[1])
        .filter(|(x, y)| {
            let overlap = end(x)
                .min(end(y))
                .saturating_duration_since(x.start.max(y.start));
            x.clean && y.clean && overlap.as_secs_f64() >= 0.95 * x.secs.max(y.secs)
        })
        .map(|(x, y)| gbs(x.secs.max(y.secs)))
        .collect();
    let ((m1, c1), (m2, c2)) = (median(one_t), median(two_t));
    println!(
        "{what} {n}x{k}: 1t {m1:.1} GB/s ({c1} clean calls), 2t {m2:.1} GB/s ({c2} clean), 2t/1t {:.2}",
        m2 / m1
    );
}
