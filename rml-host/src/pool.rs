//! A thread pool over rayon with a **deterministic static partition**.
//!
//! [`ThreadPool::parallel_for`] splits `0..n` into at most `threads` contiguous chunks
//! of at least `grain` items. The split depends only on `n`, `grain` and the thread
//! count — never on which worker is free first — so chunk `i` always covers the same
//! range, and a computation that combines per-chunk results in chunk order gives the
//! same bits on every run. Results across *different* thread counts agree to rounding
//! (chunk boundaries move); elementwise work agrees bit for bit.
//!
//! Small jobs stay on the calling thread: when `n × cost_per_item` is below the pool's
//! [`ThreadPool::min_parallel_cost`], the chunks run one after another on the caller
//! (the same chunks, so the result does not change), and waking workers is skipped.
//!
//! [`ThreadPool::run_team`] runs one task per thread on a persistent spinning
//! [`Team`] (started on first use) instead of rayon: for callers that hand out many
//! short phases in a row, such as a decode step's projections.
//!
//! The thread count is set by [`ThreadPool::new`] or, for [`ThreadPool::global`], by
//! the `RML_NUM_THREADS` environment variable (default: the number of CPUs).
#![forbid(unsafe_code)]

use std::ops::Range;
use std::sync::OnceLock;

use crate::error::{Error, Result};
use crate::team::{Team, spin_from_env};

/// Default work (in abstract cost units, roughly "simple flops") below which a
/// parallel loop runs on the calling thread.
pub const DEFAULT_MIN_PARALLEL_COST: usize = 1 << 15;

/// The environment variable that sets the global pool's thread count.
pub const THREADS_ENV: &str = "RML_NUM_THREADS";

/// A fixed-size pool of worker threads with deterministic work splitting.
#[derive(Debug)]
pub struct ThreadPool {
    pool: Option<rayon::ThreadPool>,
    threads: usize,
    min_parallel_cost: usize,
    /// Started by the first [`ThreadPool::run_team`]; `None` inside when threads
    /// could not be started.
    team: OnceLock<Option<Team>>,
}

static GLOBAL: OnceLock<ThreadPool> = OnceLock::new();

/// The chunk `index` of `0..n` split into `chunks` near-equal contiguous ranges (the
/// first `n % chunks` chunks get one extra item).
pub fn chunk_range(n: usize, chunks: usize, index: usize) -> Range<usize> {
    let chunks = chunks.max(1);
    let base = n / chunks;
    let extra = n % chunks;
    let start = index * base + index.min(extra);
    let len = base + usize::from(index < extra);
    start..start + len
}

/// Number of chunks `parallel_for` uses for `n` items, `grain` items at least per
/// chunk, on `threads` threads: `min(threads, ceil(n / grain))`, at least 1.
pub fn chunk_count(n: usize, grain: usize, threads: usize) -> usize {
    let by_grain = n.div_ceil(grain.max(1));
    by_grain.min(threads).max(1)
}

/// Parses a thread count as `RML_NUM_THREADS` spells it (a positive integer).
pub fn parse_thread_count(text: &str) -> Result<usize> {
    match text.trim().parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Error::InvalidArgument(format!(
            "{THREADS_ENV}={text:?}: expected a positive integer"
        ))),
    }
}

impl ThreadPool {
    /// A pool with `threads` threads (the caller counts as one: `threads - 1`
    /// workers are started). `threads` must be at least 1.
    pub fn new(threads: usize) -> Result<ThreadPool> {
        if threads == 0 {
            return Err(Error::InvalidArgument(
                "a thread pool needs at least one thread".to_string(),
            ));
        }
        let pool = if threads > 1 {
            Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("rml-worker-{i}"))
                    .build()
                    .map_err(|e| Error::InvalidArgument(format!("cannot start threads: {e}")))?,
            )
        } else {
            None
        };
        Ok(ThreadPool {
            pool,
            threads,
            min_parallel_cost: DEFAULT_MIN_PARALLEL_COST,
            team: OnceLock::new(),
        })
    }

    /// A pool sized by `RML_NUM_THREADS` if set (an invalid value is an error), else
    /// by the number of CPUs.
    pub fn from_env() -> Result<ThreadPool> {
        let threads = match std::env::var(THREADS_ENV) {
            Ok(text) => parse_thread_count(&text)?,
            Err(_) => default_threads(),
        };
        ThreadPool::new(threads)
    }

    /// The process-wide pool, created on first use by [`ThreadPool::from_env`] (an
    /// invalid `RML_NUM_THREADS` falls back to the CPU count with a warning on stderr).
    pub fn global() -> &'static ThreadPool {
        GLOBAL.get_or_init(|| {
            ThreadPool::from_env().unwrap_or_else(|e| {
                eprintln!("rml: {e}; using {} threads", default_threads());
                ThreadPool::new(default_threads()).unwrap_or_else(|_| ThreadPool::serial())
            })
        })
    }

    /// Sets the global pool's thread count; fails once the global pool exists.
    pub fn init_global(threads: usize) -> Result<()> {
        let pool = ThreadPool::new(threads)?;
        GLOBAL.set(pool).map_err(|_| {
            Error::InvalidArgument("the global thread pool is already initialised".to_string())
        })
    }

    /// A pool that runs everything on the calling thread.
    pub fn serial() -> ThreadPool {
        ThreadPool {
            pool: None,
            threads: 1,
            min_parallel_cost: DEFAULT_MIN_PARALLEL_COST,
            team: OnceLock::new(),
        }
    }

    /// This pool with a different cost threshold (see the module docs).
    pub fn with_min_parallel_cost(mut self, cost: usize) -> ThreadPool {
        self.min_parallel_cost = cost;
        self
    }

    /// Number of threads (including the calling thread).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Work below which loops stay on the calling thread.
    pub fn min_parallel_cost(&self) -> usize {
        self.min_parallel_cost
    }

    /// Calls `f(i)` for `i` in `0..tasks` on the pool's [`Team`] (the calling thread
    /// and the workers claim indices in turn), and returns when all are done;
    /// serially on the caller for one thread, one task, or when the team is busy or
    /// cannot start. Allocates nothing after the first call.
    pub fn run_team(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        if tasks <= 1 || self.threads <= 1 {
            (0..tasks).for_each(f);
            return;
        }
        match self
            .team
            .get_or_init(|| Team::new(self.threads, spin_from_env()))
        {
            Some(team) => team.run(tasks, f),
            None => (0..tasks).for_each(f),
        }
    }

    /// The ranges `parallel_for(n, grain, …)` hands out, in chunk order.
    pub fn partition(&self, n: usize, grain: usize) -> Vec<Range<usize>> {
        let chunks = chunk_count(n, grain, self.threads);
        (0..chunks).map(|i| chunk_range(n, chunks, i)).collect()
    }

    /// Calls `f(chunk_index, range)` for each chunk of the static partition of
    /// `0..n`, in parallel when the work is worth it (cost 1 per item).
    pub fn parallel_for<F>(&self, n: usize, grain: usize, f: F)
    where
        F: Fn(usize, Range<usize>) + Sync,
    {
        self.parallel_for_cost(n, grain, 1, f);
    }

    /// [`ThreadPool::parallel_for`] with an estimate of the cost of one item, used
    /// against the threshold to decide whether to use other threads.
    pub fn parallel_for_cost<F>(&self, n: usize, grain: usize, cost_per_item: usize, f: F)
    where
        F: Fn(usize, Range<usize>) + Sync,
    {
        let chunks = chunk_count(n, grain, self.threads);
        let cost = n.saturating_mul(cost_per_item);
        match &self.pool {
            Some(pool) if chunks > 1 && cost >= self.min_parallel_cost => {
                let f = &f;
                pool.scope(|scope| {
                    for i in 1..chunks {
                        scope.spawn(move |_| f(i, chunk_range(n, chunks, i)));
                    }
                    f(0, chunk_range(n, chunks, 0));
                });
            }
            _ => {
                for i in 0..chunks {
                    f(i, chunk_range(n, chunks, i));
                }
            }
        }
    }

    /// Maps each chunk of the static partition to a value; the values come back in
    /// chunk order, so folding them left to right is deterministic.
    pub fn map_chunks<R, F>(&self, n: usize, grain: usize, cost_per_item: usize, f: F) -> Vec<R>
    where
        R: Send,
        F: Fn(Range<usize>) -> R + Sync,
    {
        let chunks = chunk_count(n, grain, self.threads);
        let slots: Vec<std::sync::Mutex<Option<R>>> =
            (0..chunks).map(|_| std::sync::Mutex::new(None)).collect();
        self.parallel_for_cost(n, grain, cost_per_item, |i, range| {
            let value = f(range);
            if let Ok(mut slot) = slots[i].lock() {
                *slot = Some(value);
            }
        });
        slots
            .into_iter()
            .filter_map(|slot| slot.into_inner().ok().flatten())
            .collect()
    }

    /// Splits `out` into the static partition's chunks (of `row_len`-element rows)
    /// and calls `f(first_row, rows)` on each, in parallel when worth it.
    pub fn for_each_rows_mut<T, F>(&self, out: &mut [T], row_len: usize, grain: usize, f: F)
    where
        T: Send,
        F: Fn(usize, &mut [T]) + Sync,
    {
        let row_len = row_len.max(1);
        let cost = out.len();
        let rows = out.len() / row_len;
        let chunks = chunk_count(rows, grain, self.threads);
        let mut pieces = Vec::with_capacity(chunks);
        let mut rest = &mut out[..rows * row_len];
        for i in 0..chunks {
            let range = chunk_range(rows, chunks, i);
            let (head, tail) = rest.split_at_mut(range.len() * row_len);
            pieces.push((range.start, head));
            rest = tail;
        }
        let run = |(first, piece): (usize, &mut [T])| f(first, piece);
        match &self.pool {
            Some(pool) if chunks > 1 && cost >= self.min_parallel_cost => {
                let run = &run;
                pool.scope(|scope| {
                    let mut iter = pieces.into_iter();
                    let first = iter.next();
                    for piece in iter {
                        scope.spawn(move |_| run(piece));
                    }
                    if let Some(piece) = first {
                        run(piece);
                    }
                });
            }
            _ => pieces.into_iter().for_each(run),
        }
    }
}

fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn partition_is_static_and_covers_everything() {
        for threads in [1usize, 2, 3, 7] {
            let pool = ThreadPool::new(threads).unwrap();
            for n in [0usize, 1, 5, 7, 100, 1001] {
                for grain in [1usize, 4, 64] {
                    let parts = pool.partition(n, grain);
                    assert_eq!(parts, pool.partition(n, grain));
                    assert!(parts.len() <= threads);
                    let mut next = 0;
                    for r in &parts {
                        assert_eq!(r.start, next);
                        next = r.end;
                    }
                    assert_eq!(next, n);
                }
            }
        }
        assert_eq!(chunk_range(10, 3, 0), 0..4);
        assert_eq!(chunk_range(10, 3, 1), 4..7);
        assert_eq!(chunk_range(10, 3, 2), 7..10);
    }

    #[test]
    fn chunk_i_gets_range_i() {
        let pool = ThreadPool::new(3).unwrap().with_min_parallel_cost(0);
        let seen: Vec<std::sync::Mutex<Option<Range<usize>>>> =
            (0..3).map(|_| std::sync::Mutex::new(None)).collect();
        pool.parallel_for(30, 1, |i, r| *seen[i].lock().unwrap() = Some(r));
        let seen: Vec<_> = seen
            .into_iter()
            .map(|m| m.into_inner().unwrap().unwrap())
            .collect();
        assert_eq!(seen, vec![0..10, 10..20, 20..30]);
    }

    #[test]
    fn small_work_stays_on_the_calling_thread() {
        let pool = ThreadPool::new(4).unwrap();
        let caller = std::thread::current().id();
        let off_thread = AtomicUsize::new(0);
        pool.parallel_for(100, 1, |_, _| {
            if std::thread::current().id() != caller {
                off_thread.fetch_add(1, Ordering::Relaxed);
            }
        });
        assert_eq!(off_thread.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn thread_counts_parse() {
        assert_eq!(parse_thread_count(" 3 ").unwrap(), 3);
        assert!(parse_thread_count("0").is_err());
        assert!(parse_thread_count("many").is_err());
        assert!(ThreadPool::new(0).is_err());
    }

    fn data(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 7919) % 1000) as f32 * 0.001 + 0.1)
            .collect()
    }

    fn chunked_sum(pool: &ThreadPool, x: &[f32]) -> f32 {
        pool.map_chunks(x.len(), 1024, 1, |r| x[r].iter().sum::<f32>())
            .into_iter()
            .sum()
    }

    fn elementwise(pool: &ThreadPool, x: &[f32]) -> Vec<f32> {
        let mut out = vec![0.0f32; x.len()];
        pool.for_each_rows_mut(&mut out, 16, 8, |first_row, rows| {
            for (j, o) in rows.iter_mut().enumerate() {
                let v = x[first_row * 16 + j];
                *o = (v * 1.7 + 0.3).sqrt() * v;
            }
        });
        out
    }

    #[test]
    fn results_are_bit_identical_across_runs_and_agree_across_thread_counts() {
        let x = data(200_003);
        let reference_sum: f64 = x.iter().map(|&v| f64::from(v)).sum();
        let mut elementwise_ref: Option<Vec<f32>> = None;
        for threads in [1usize, 2, 3, 7] {
            let pool = ThreadPool::new(threads).unwrap().with_min_parallel_cost(0);
            let first = chunked_sum(&pool, &x);
            for _ in 0..5 {
                assert_eq!(chunked_sum(&pool, &x).to_bits(), first.to_bits());
            }
            let rel = (f64::from(first) - reference_sum).abs() / reference_sum;
            assert!(rel < 1e-4, "threads {threads}: {first} vs {reference_sum}");
            let e = elementwise(&pool, &x);
            match &elementwise_ref {
                None => elementwise_ref = Some(e),
                Some(r) => assert!(
                    r.iter().zip(&e).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "elementwise result differs at {threads} threads"
                ),
            }
        }
    }
}
