//! Thread CPU time for the criterion benches (`RML_BENCH_CPU_TIME=1`).
//!
//! On a shared, overloaded machine wall-clock time mostly measures the other
//! processes. This thread's on-CPU time (`/proc/thread-self/schedstat`, Linux only)
//! excludes the time it spent descheduled; memory and cache contention from the
//! others stays in. Schedstat advances at scheduler ticks, so it is read around a
//! whole criterion sample (many calls), never around one call.

// Each bench uses part of this module.
#![allow(dead_code)]

use std::time::{Duration, Instant};

/// Nanoseconds this thread has run on a CPU, if the kernel reports it.
pub fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Whether `RML_BENCH_CPU_TIME` is set and this system reports thread CPU time.
pub fn cpu_clock() -> bool {
    std::env::var_os("RML_BENCH_CPU_TIME").is_some() && thread_cpu_ns().is_some()
}

/// Times `iters` calls of `f`: by this thread's CPU time when [`cpu_clock`], else (or
/// when a sample was too short to register a tick) by wall clock. For
/// `Bencher::iter_custom`.
pub fn time_iters(iters: u64, mut f: impl FnMut()) -> Duration {
    let cpu = cpu_clock();
    let (t0, c0) = (Instant::now(), thread_cpu_ns().unwrap_or(0));
    for _ in 0..iters {
        f();
    }
    let ns = thread_cpu_ns().unwrap_or(0).saturating_sub(c0);
    if cpu && ns > 0 {
        Duration::from_nanos(ns)
    } else {
        t0.elapsed()
    }
}
