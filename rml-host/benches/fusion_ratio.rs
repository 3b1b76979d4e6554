//! Elementwise fusion on against off (1 thread), and 1 against 2 threads (fused), on
//! the executor bench's batch-64 graphs, with the executors interleaved run by run
//! so a busy machine slows every side alike: `cargo bench -p rml-host --bench
//! fusion_ratio [-- FILTER]` (`RML_ROUNDS=N` runs per executor, 300 by default;
//! only the graphs whose name contains `FILTER`).
//!
//! 1-thread runs are timed by the calling thread's CPU clock (what the step costs,
//! whatever else the machine runs); 1 against 2 threads by the wall clock, twice:
//! interleaved with the other executors (the 2-thread team's worker parks between
//! its runs, as in a server whose requests come a millisecond apart), and in turns
//! of [`TURN`] runs back to back (as `rml-host bench` runs them). (A process
//! CPU clock would not do: the 2-thread executor's worker spins for a while after
//! each of its runs, into the next executor's run.) Prints medians with p10/p90 and
//! the ratios of the medians.

#[path = "../tests/exec_support/mod.rs"]
mod exec_support;

use std::time::Instant;

use rml_host::graph::{Executor, Options};
use rustix::time::{ClockId, clock_gettime};
use serde_json::Value;

/// Nanoseconds on `clock`.
fn now_ns(clock: ClockId) -> u64 {
    let t = clock_gettime(clock);
    (t.tv_sec as u64) * 1_000_000_000 + t.tv_nsec as u64
}

/// Median, p10 and p90 of `v` (µs).
fn spread(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    (v[n / 2], v[n / 10], v[n * 9 / 10])
}

/// Times (thread CPU, wall per run) of each executor, interleaved.
fn interleaved(
    execs: &mut [Executor],
    inputs: &[rml_host::graph::DenseTensor],
    rounds: usize,
) -> Vec<[Vec<f64>; 2]> {
    let mut times: Vec<[Vec<f64>; 2]> = execs.iter().map(|_| Default::default()).collect();
    for e in execs.iter_mut() {
        e.run(inputs).unwrap();
    }
    for _ in 0..rounds {
        for (e, t) in execs.iter_mut().zip(&mut times) {
            let (thread, wall) = (now_ns(ClockId::ThreadCPUTime), Instant::now());
            e.run(inputs).unwrap();
            t[0].push((now_ns(ClockId::ThreadCPUTime) - thread) as f64 / 1e3);
            t[1].push(wall.elapsed().as_secs_f64() * 1e6);
        }
    }
    times
}

/// Runs per turn in [`in_turns`].
const TURN: usize = 10;

/// Wall times (µs) of executors `execs[which]` taking turns of [`TURN`] runs back
/// to back, `rounds` runs each in all.
fn in_turns(
    execs: &mut [Executor],
    which: [usize; 2],
    inputs: &[rml_host::graph::DenseTensor],
    rounds: usize,
) -> [Vec<f64>; 2] {
    let mut times: [Vec<f64>; 2] = Default::default();
    for _ in 0..rounds.div_ceil(TURN) {
        for (&e, t) in which.iter().zip(&mut times) {
            for _ in 0..TURN {
                let wall = Instant::now();
                execs[e].run(inputs).unwrap();
                t.push(wall.elapsed().as_secs_f64() * 1e6);
            }
        }
    }
    times
}

fn compare(name: &str, doc: &Value, batch: usize, width: usize, rounds: usize) {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    if filter.is_some_and(|f| !name.contains(&f)) {
        return;
    }
    let (graph, constants) = exec_support::build(doc);
    let inputs = [exec_support::tensor(&[batch, width], 1)];
    let configs = [(1, true), (1, false), (2, true)];
    let mut execs: Vec<Executor> = configs
        .iter()
        .map(|&(threads, fusion)| {
            let options = Options {
                threads,
                fusion,
                profile: false,
            };
            Executor::new(graph.clone(), &constants, options).unwrap()
        })
        .collect();
    let mut t = interleaved(&mut execs, &inputs, rounds);
    let f = spread(&mut t[0][0]);
    let u = spread(&mut t[1][0]);
    println!(
        "{name}: thread CPU us, 1 thread: fused {:.1} [{:.1}, {:.1}], unfused {:.1} [{:.1}, {:.1}]: fusion {:.2}x",
        f.0,
        f.1,
        f.2,
        u.0,
        u.1,
        u.2,
        u.0 / f.0
    );
    let (mut one, mut two) = (std::mem::take(&mut t[0][1]), std::mem::take(&mut t[2][1]));
    print_threads(name, "interleaved", &mut one, &mut two);
    let [mut b1, mut b2] = in_turns(&mut execs, [0, 2], &inputs, rounds);
    print_threads(name, &format!("in turns of {TURN}"), &mut b1, &mut b2);
}

/// Prints the wall times `one` (1 thread) and `two` (2 threads) of `mode`: median
/// [p10, p90] of each and the ratio of the medians.
fn print_threads(name: &str, mode: &str, one: &mut [f64], two: &mut [f64]) {
    let (w1, w2) = (spread(one), spread(two));
    println!(
        "{name}: fused, 1 vs 2 threads, {mode}: wall {:.1} [{:.1}, {:.1}] vs {:.1} [{:.1}, {:.1}] ({:.2}x)",
        w1.0,
        w1.1,
        w1.2,
        w2.0,
        w2.1,
        w2.2,
        w2.0 / w1.0
    );
}

fn main() {
    let rounds = std::env::var("RML_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(300);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("{rounds} interleaved rounds; load average {}", load.trim());
    compare(
        "norm_gelu_chain_b64",
        &exec_support::norm_gelu_chain(768, 4),
        64,
        768,
        rounds,
    );
    compare(
        "bias_relu_chain_b64",
        &exec_support::bias_relu_chain(4096, 4),
        64,
        4096,
        rounds,
    );
    compare("mlp_b64", &exec_support::mlp(256, 3), 64, 256, rounds);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average after: {}", load.trim());
}
