//! The thread pool: a thread count, a persistent spinning [`Team`] of workers
//! (started on first use) and the **deterministic static split** every parallel
//! caller uses.
//!
//! [`ThreadPool::run_team`] calls `f(i)` for each task index on the team, the
//! calling thread included. Callers split their work into chunks with the
//! functions here: [`split_count`] picks how many chunks (each at least a grain of
//! items, at most a bound such as the thread count), [`chunk_range`] says which
//! items chunk `i` covers, and [`row_blocks`] cuts an output of whole rows into
//! those chunks' disjoint blocks. The split depends only on the sizes and the
//! thread count — never on which worker is free first — so chunk `i` always covers
//! the same range, and a computation that combines per-chunk results in chunk
//! order gives the same bits on every run.
//!
//! Small jobs stay on the calling thread: callers compare their estimated work
//! with [`ThreadPool::min_parallel_cost`] and run the same chunks one after another
//! when it is below (so the result does not change), skipping the hand-off.
//!
//! The thread count is set by [`ThreadPool::new`] or, for [`ThreadPool::global`], by
//! the `RML_NUM_THREADS` environment variable (default: the number of CPUs).
#![forbid(unsafe_code)]

use std::ops::Range;
use std::sync::OnceLock;

use crate::error::{Error, Result};
use crate::team::{Team, spin_from_env};

/// Default work (in abstract cost units, roughly "simple flops") below which a
/// caller runs its chunks on the calling thread.
pub const DEFAULT_MIN_PARALLEL_COST: usize = 1 << 15;

/// The environment variable that sets the global pool's thread count.
pub const THREADS_ENV: &str = "RML_NUM_THREADS";

/// A fixed number of threads (workers started on first use) with deterministic
/// work splitting.
#[derive(Debug)]
pub struct ThreadPool {
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

/// Number of chunks to split `n` items into so that every chunk (by
/// [`chunk_range`]) gets at least `grain` items (a `grain` of 0 counts as 1): as
/// many as possible, at most `most`, at least 1.
pub fn split_count(n: usize, grain: usize, most: usize) -> usize {
    (n / grain.max(1)).min(most).max(1)
}

/// Cuts `out`, `rows` rows of `row_len` values, into `chunks` (at least 1)
/// consecutive blocks of whole rows, block `i` holding rows
/// `chunk_range(rows, chunks, i)`; yields each block's rows and values in chunk
/// order. A short `out` (a last row cut short, as for column blocks of a row
/// whose length is not a multiple of the block) ends the blocks with `out`.
/// Allocates nothing.
pub fn row_blocks<T>(
    out: &mut [T],
    [rows, row_len]: [usize; 2],
    chunks: usize,
) -> impl Iterator<Item = (Range<usize>, &mut [T])> {
    let chunks = chunks.max(1);
    let mut rest = out;
    (0..chunks).map(move |i| {
        let range = chunk_range(rows, chunks, i);
        let rest_len = rest.len();
        let (head, tail) =
            std::mem::take(&mut rest).split_at_mut((range.len() * row_len).min(rest_len));
        rest = tail;
        (range, head)
    })
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
    /// workers are started by the first [`ThreadPool::run_team`]). `threads` must
    /// be at least 1.
    pub fn new(threads: usize) -> Result<ThreadPool> {
        if threads == 0 {
            return Err(Error::InvalidArgument(
                "a thread pool needs at least one thread".to_string(),
            ));
        }
        Ok(ThreadPool {
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

    /// Work below which callers run their chunks on the calling thread (see the
    /// module docs).
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
}

fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn chunk_ranges_are_near_equal_and_cover_everything() {
        assert_eq!(chunk_range(10, 3, 0), 0..4);
        assert_eq!(chunk_range(10, 3, 1), 4..7);
        assert_eq!(chunk_range(10, 3, 2), 7..10);
        for n in [0usize, 1, 5, 7, 100, 1001] {
            for chunks in 1..=9 {
                let mut next = 0;
                for i in 0..chunks {
                    let r = chunk_range(n, chunks, i);
                    assert_eq!(r.start, next);
                    assert!(r.len() == n / chunks || r.len() == n / chunks + 1);
                    next = r.end;
                }
                assert_eq!(next, n, "n {n}, {chunks} chunks");
            }
        }
    }

    #[test]
    fn split_count_is_the_most_chunks_of_at_least_grain_items() {
        for n in 0..200usize {
            for grain in 0..12usize {
                for most in 0..10usize {
                    let c = split_count(n, grain, most);
                    assert!(
                        c >= 1 && c <= most.max(1),
                        "n {n} grain {grain} most {most}"
                    );
                    // Brute force: the largest count up to `most` whose smallest chunk
                    // still has `grain` items (1 when none has; a grain of 0 counts as 1).
                    let want = (1..=most)
                        .filter(|&k| (0..k).all(|i| chunk_range(n, k, i).len() >= grain.max(1)))
                        .max()
                        .unwrap_or(1);
                    assert_eq!(c, want, "n {n} grain {grain} most {most}");
                }
            }
        }
    }

    #[test]
    fn row_blocks_cut_whole_rows_in_chunk_order() {
        for (rows, row_len, chunks) in [(7usize, 3usize, 3usize), (2, 5, 4), (0, 4, 2), (9, 1, 1)] {
            let mut out = vec![0usize; rows * row_len + 2];
            let mut seen = 0;
            for (i, (range, block)) in row_blocks(&mut out, [rows, row_len], chunks).enumerate() {
                assert_eq!(range, chunk_range(rows, chunks, i));
                assert_eq!(block.len(), range.len() * row_len);
                for (j, v) in block.iter_mut().enumerate() {
                    *v = range.start * row_len + j + 1;
                }
                seen += 1;
            }
            assert_eq!(seen, chunks);
            // Every value of the rows written once, in place; the tail untouched.
            let want: Vec<usize> = (1..=rows * row_len).chain([0, 0]).collect();
            assert_eq!(out, want);
        }
        // A last row cut short: 3 rows of 4 in 10 values, the last block ends there.
        let mut out = [0u8; 10];
        let lens: Vec<usize> = row_blocks(&mut out, [3, 4], 2)
            .map(|(_, b)| b.len())
            .collect();
        assert_eq!(lens, [8, 2]);
    }

    #[test]
    fn thread_counts_parse() {
        assert_eq!(parse_thread_count(" 3 ").unwrap(), 3);
        assert!(parse_thread_count("0").is_err());
        assert!(parse_thread_count("many").is_err());
        assert!(ThreadPool::new(0).is_err());
    }

    #[test]
    fn every_task_runs_once_on_every_pool() {
        for pool in [
            ThreadPool::serial(),
            ThreadPool::new(2).unwrap(),
            ThreadPool::new(5).unwrap(),
        ] {
            for tasks in [0usize, 1, 2, 5, 11] {
                let hits: Vec<AtomicUsize> = (0..tasks).map(|_| AtomicUsize::new(0)).collect();
                pool.run_team(tasks, &|i| {
                    hits[i].fetch_add(1, Ordering::Relaxed);
                });
                assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
            }
        }
    }

    #[test]
    fn a_serial_pool_runs_on_the_calling_thread() {
        let caller = std::thread::current().id();
        let off_thread = AtomicUsize::new(0);
        ThreadPool::serial().run_team(4, &|_| {
            if std::thread::current().id() != caller {
                off_thread.fetch_add(1, Ordering::Relaxed);
            }
        });
        assert_eq!(off_thread.load(Ordering::Relaxed), 0);
    }

    fn data(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 7919) % 1000) as f32 * 0.001 + 0.1)
            .collect()
    }

    /// Per-chunk f32 sums (at least 1024 items a chunk) folded in chunk order.
    fn chunked_sum(pool: &ThreadPool, x: &[f32]) -> f32 {
        let chunks = split_count(x.len(), 1024, pool.threads());
        let sums: Vec<Mutex<f32>> = (0..chunks).map(|_| Mutex::new(0.0)).collect();
        pool.run_team(chunks, &|i| {
            *sums[i].lock().unwrap() = x[chunk_range(x.len(), chunks, i)].iter().sum();
        });
        sums.into_iter().map(|s| s.into_inner().unwrap()).sum()
    }

    /// `(v · 1.7 + 0.3)^½ · v` for each value, in blocks of 16-value rows.
    fn elementwise(pool: &ThreadPool, x: &[f32]) -> Vec<f32> {
        let mut out = vec![0.0f32; x.len()];
        let rows = x.len() / 16;
        let chunks = split_count(rows, 8, pool.threads());
        let blocks: Vec<Mutex<Option<_>>> = row_blocks(&mut out, [rows, 16], chunks)
            .map(|b| Mutex::new(Some(b)))
            .collect();
        pool.run_team(chunks, &|i| {
            let (range, block) = blocks[i].lock().unwrap().take().unwrap();
            for (o, &v) in block.iter_mut().zip(&x[range.start * 16..]) {
                *o = (v * 1.7 + 0.3).sqrt() * v;
            }
        });
        drop(blocks);
        out
    }

    #[test]
    fn results_are_bit_identical_across_runs_and_agree_across_thread_counts() {
        let x = data(200_003);
        let reference_sum: f64 = x.iter().map(|&v| f64::from(v)).sum();
        let rows = x.len() / 16 * 16;
        for threads in [1usize, 2, 3, 7] {
            let pool = ThreadPool::new(threads).unwrap();
            let first = chunked_sum(&pool, &x);
            for _ in 0..5 {
                assert_eq!(chunked_sum(&pool, &x).to_bits(), first.to_bits());
            }
            let rel = (f64::from(first) - reference_sum).abs() / reference_sum;
            assert!(rel < 1e-4, "threads {threads}: {first} vs {reference_sum}");
            // Each value within one rounding of the formula in f64; the tail past
            // the whole rows untouched.
            let e = elementwise(&pool, &x);
            for (i, (&v, &o)) in x.iter().zip(&e).enumerate().take(rows) {
                let v = f64::from(v);
                let want = (v * f64::from(1.7f32) + f64::from(0.3f32)).sqrt() * v;
                assert!(
                    (f64::from(o) - want).abs() <= 4.0 * f64::from(f32::EPSILON) * want,
                    "{i}"
                );
            }
            assert!(e[rows..].iter().all(|&o| o == 0.0));
            let one = elementwise(&ThreadPool::serial(), &x);
            assert!(
                one.iter().zip(&e).all(|(a, b)| a.to_bits() == b.to_bits()),
                "elementwise result differs at {threads} threads"
            );
        }
    }
}
