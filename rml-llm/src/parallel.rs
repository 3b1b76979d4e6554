//! Splitting projections' outputs across an `rml_host::ThreadPool`'s team in one
//! hand-off: decode divides each output's features (each thread streams its own
//! weight rows; every output is computed exactly as on one thread), prefill divides
//! the token rows (each thread runs the GEMM on its rows). Several outputs of one
//! input (q/k/v, gate/up) go out together, task `t` taking chunk `t` of each.
//!
//! The split is `rml_host::pool`'s and depends only on the shapes and the thread
//! count: chunk `t` of `rows` rows is `chunk_range(rows, split_count(rows, grain,
//! threads · per_thread), t)`, and every chunk has at least `grain` rows, so a
//! kernel chosen by row count sees the same choice on every thread as a single
//! thread would. The team's threads claim the tasks one by one, so with several
//! chunks per thread ([`Split::decode`]) a thread that runs slower for a while (a
//! neighbour on its core, a smaller share of the memory bandwidth) takes fewer
//! chunks instead of holding the others up.

use std::ops::Range;
use std::sync::Mutex;

use rml_host::ThreadPool;
use rml_host::pool::{self, row_blocks};

use crate::error::{Error, Result};

/// The most chunks one split uses (pools with more threads use this many).
const MAX_CHUNKS: usize = 64;

/// Chunks per thread of a decode step's splits. Measured with Qwen3-0.6B on two
/// threads (medians of 9–12 32-token decodes after a 64-token prompt, in interleaved
/// rounds): while other tenants loaded the machine, Q8_0 decoded at 31 tok/s with one
/// chunk per thread, 40 with two, 41 with four; on the quiet machine Q4_0 at 79.0,
/// 76.5 and 70.0 (each chunk restarts its weight streams) and Q8_0 at 48.6, 48.2
/// and 47.0. Two keeps most of the gain under load for 3 % when quiet.
pub(crate) const DECODE_CHUNKS_PER_THREAD: usize = 2;

/// How a phase is cut into chunks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Split {
    /// The fewest rows in a chunk.
    pub grain: usize,
    /// The most chunks per thread.
    pub per_thread: usize,
}

impl Split {
    /// A decode step's split: [`DECODE_CHUNKS_PER_THREAD`] chunks per thread of at
    /// least `grain` rows, claimed dynamically.
    pub(crate) fn decode(grain: usize) -> Split {
        Split {
            grain,
            per_thread: DECODE_CHUNKS_PER_THREAD,
        }
    }

    /// One chunk per thread of at least `grain` rows (prefill, where each chunk
    /// packs its own operands).
    pub(crate) fn one_per_thread(grain: usize) -> Split {
        Split {
            grain,
            per_thread: 1,
        }
    }

    /// Number of chunks `rows` rows are split into on `threads` threads: as many as
    /// possible with at least `grain` rows each, at most `per_thread` per thread (and
    /// [`MAX_CHUNKS`]), at least 1.
    pub(crate) fn count(&self, rows: usize, threads: usize) -> usize {
        let most = threads.saturating_mul(self.per_thread).min(MAX_CHUNKS);
        pool::split_count(rows, self.grain, most)
    }
}

/// Calls `f(j, rows, piece)` for each chunk of each output `outs[j]` (rows of
/// `row_lens[j]` values; `piece` is the chunk's rows, cut by `split`), task `t` of
/// the pool's team taking chunk `t` of every output, in one hand-off; on the calling
/// thread, the same chunks in turn, when `cost` is below the pool's threshold. The
/// first error wins.
pub(crate) fn for_each_chunk<const N: usize, F>(
    pool: &ThreadPool,
    outs: [&mut [f32]; N],
    row_lens: [usize; N],
    split: Split,
    cost: usize,
    f: F,
) -> Result<()>
where
    F: Fn(usize, Range<usize>, &mut [f32]) -> Result<()> + Sync,
{
    for_each_task(pool, outs, row_lens, split, cost, |pieces| {
        for (j, piece) in pieces.into_iter().enumerate() {
            if let Some((rows, piece)) = piece {
                f(j, rows, piece)?;
            }
        }
        Ok(())
    })
}

/// One chunk of an output: its rows and their values.
pub(crate) type Piece<'a> = (Range<usize>, &'a mut [f32]);

/// [`for_each_chunk`] handing each task its chunk of every output in one call
/// (`None` where an output has fewer chunks): outputs with the same number of rows
/// are split alike, so a task can use one as scratch for the other.
pub(crate) fn for_each_task<const N: usize, F>(
    pool: &ThreadPool,
    outs: [&mut [f32]; N],
    row_lens: [usize; N],
    split: Split,
    cost: usize,
    f: F,
) -> Result<()>
where
    F: Fn([Option<Piece<'_>>; N]) -> Result<()> + Sync,
{
    let threads = pool.threads();
    let rows = std::array::from_fn::<usize, N, _>(|j| outs[j].len() / row_lens[j].max(1));
    let chunks = rows.map(|r| split.count(r, threads));
    let tasks = chunks.iter().copied().max().unwrap_or(1);
    let slots: [Mutex<[Option<Piece<'_>>; N]>; MAX_CHUNKS] =
        std::array::from_fn(|_| Mutex::new([const { None }; N]));
    for (j, out) in outs.into_iter().enumerate() {
        let blocks = row_blocks(out, [rows[j], row_lens[j].max(1)], chunks[j]);
        for (slot, piece) in slots.iter().zip(blocks) {
            lock(slot)[j] = Some(piece);
        }
    }
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    let task = |t: usize| {
        let pieces = std::mem::replace(&mut *lock(&slots[t]), [const { None }; N]);
        if let Err(e) = f(pieces) {
            lock(&failure).get_or_insert(e);
        }
    };
    if tasks > 1 && cost >= pool.min_parallel_cost() {
        pool.run_team(tasks, &task);
    } else {
        (0..tasks).for_each(task);
    }
    match failure.into_inner() {
        Ok(None) => Ok(()),
        Ok(Some(e)) => Err(e),
        Err(_) => Err(Error::Input("a worker thread panicked".into())),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_have_at_least_grain_rows_and_cover_everything() {
        let one = Split::one_per_thread(9);
        assert_eq!(one.count(10, 2), 1, "two chunks would have 5 rows");
        assert_eq!(one.count(18, 2), 2);
        assert_eq!(one.count(1000, 3), 3);
        assert_eq!(one.count(0, 3), 1);
        assert_eq!(Split::decode(9).count(1000, 3), 6);
        assert_eq!(Split::decode(9).count(1000, 40), MAX_CHUNKS);
        let pool = ThreadPool::new(3).unwrap().with_min_parallel_cost(0);
        let (mut a, mut b) = (vec![0.0f32; 7 * 4], vec![0.0f32; 100]);
        let split = Split::one_per_thread(2);
        for_each_chunk(
            &pool,
            [&mut a, &mut b],
            [4, 1],
            split,
            0,
            |j, rows, piece| {
                let len = [4, 1][j];
                assert_eq!(piece.len(), rows.len() * len);
                for (i, v) in piece.iter_mut().enumerate() {
                    *v = (rows.start * len + i) as f32 + 1000.0 * j as f32;
                }
                Ok(())
            },
        )
        .unwrap();
        assert!(a.iter().enumerate().all(|(i, &v)| v == i as f32));
        assert!(b.iter().enumerate().all(|(i, &v)| v == 1000.0 + i as f32));
    }

    #[test]
    fn the_first_error_comes_back() {
        let pool = ThreadPool::new(2).unwrap().with_min_parallel_cost(0);
        let mut y = vec![0.0f32; 64];
        let r = for_each_chunk(&pool, [&mut y], [1], Split::decode(1), 0, |_, rows, _| {
            if rows.start > 0 {
                Err(Error::Input("second chunk".into()))
            } else {
                Ok(())
            }
        });
        assert!(matches!(r, Err(Error::Input(m)) if m == "second chunk"));
    }
}
