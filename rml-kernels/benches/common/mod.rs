//! Thread CPU time for the criterion benches (`RML_BENCH_CPU_TIME=1`), and
//! DRAM-sized buffers on huge pages.
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

/// `len` zeroed values starting on a 64-byte boundary, as rml-host's arena places
/// every buffer (and PyTorch's CPU allocator its tensors): where a buffer starts
/// decides how many vector stores straddle two cache lines, and the kernels align
/// their stores to the *output* only, so operands with another alignment would
/// time the loads' line splits (a row operand at 16 bytes past a line, as `malloc`
/// returns, made `mul_row` in L1 1.5× slower; session 16).
///
/// When the buffer spans 4 MiB or more its memory is asked for transparent huge
/// pages before it is first touched: what NumPy does for its arrays
/// (`madvise(MADV_HUGEPAGE)`) and what the GEMM peer script does for rml's
/// buffers. With THP in `madvise` mode and 4 KiB pages, a kernel streaming 64 MiB
/// restarts the hardware prefetchers at every page (a read-only sum measured 27–33
/// GB/s on 4 KiB pages, 39–40 on 2 MiB ones, session 15).
pub struct Buffer<T> {
    v: Vec<T>,
    start: usize,
}

/// A [`Buffer`] of `len` zeroed values.
pub fn buffer<T: Copy + Default>(len: usize) -> Buffer<T> {
    let size = std::mem::size_of::<T>();
    let pad = 64 / size;
    let mut v = Vec::with_capacity(len + pad);
    let bytes = (len + pad) * size;
    if bytes >= 4 << 20 {
        let start = v.as_mut_ptr() as usize;
        let first = start.next_multiple_of(4096);
        let end = (start + bytes) & !4095;
        // SAFETY: the page-aligned range lies inside `v`'s allocation; the advice
        // changes no contents. A refusal only leaves 4 KiB pages.
        let _ = unsafe {
            rustix::mm::madvise(
                first as *mut _,
                end - first,
                rustix::mm::Advice::LinuxHugepage,
            )
        };
    }
    v.resize(len + pad, T::default());
    let start = v.as_ptr().align_offset(64);
    assert!(start <= pad, "element size divides 64");
    v.truncate(start + len);
    Buffer { v, start }
}

impl<T> std::ops::Deref for Buffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.v[self.start..]
    }
}

impl<T> std::ops::DerefMut for Buffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.v[self.start..]
    }
}
