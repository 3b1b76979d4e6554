//! Splitting projections' outputs across an `rml_host::ThreadPool`'s team in one
//! hand-off: decode divides each output's features (each thread streams its own
//! weight rows; every output is computed exactly as on one thread), prefill divides
//! the token rows (each thread runs the GEMM on its rows). Several outputs of one
//! input (q/k/v, gate/up) go out together, thread `t` taking chunk `t` of each.
//!
//! The split is `rml_host::pool`'s and depends only on the shapes and the thread
//! count: chunk `t` of `rows` rows is `chunk_range(rows, split_count(rows, grain,
//! threads), t)`, and every chunk has at least `grain` rows, so a kernel chosen by
//! row count sees the same choice on every thread as a single thread would.

use std::ops::Range;
use std::sync::Mutex;

use rml_host::ThreadPool;
use rml_host::pool::{self, row_blocks};

use crate::error::{Error, Result};

/// The most chunks one split uses (pools with more threads use this many).
const MAX_CHUNKS: usize = 64;

/// Number of chunks `rows` rows are split into on `threads` threads: as many as
/// possible with at least `grain` rows each, at most `threads` (and [`MAX_CHUNKS`]),
/// at least 1.
pub(crate) fn split_count(rows: usize, grain: usize, threads: usize) -> usize {
    pool::split_count(rows, grain, threads.min(MAX_CHUNKS))
}

/// Calls `f(j, rows, piece)` for each chunk of each output `outs[j]` (rows of
/// `row_lens[j]` values; `piece` is the chunk's rows), thread `t` of the pool's team
/// taking chunk `t` of every output, in one hand-off; on the calling thread, the same
/// chunks in turn, when `cost` is below the pool's threshold. The first error wins.
pub(crate) fn for_each_chunk<const N: usize, F>(
    pool: &ThreadPool,
    outs: [&mut [f32]; N],
    row_lens: [usize; N],
    grain: usize,
    cost: usize,
    f: F,
) -> Result<()>
where
    F: Fn(usize, Range<usize>, &mut [f32]) -> Result<()> + Sync,
{
    for_each_task(pool, outs, row_lens, grain, cost, |pieces| {
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
    grain: usize,
    cost: usize,
    f: F,
) -> Result<()>
where
    F: Fn([Option<Piece<'_>>; N]) -> Result<()> + Sync,
{
    let threads = pool.threads();
    let rows = std::array::from_fn::<usize, N, _>(|j| outs[j].len() / row_lens[j].max(1));
    let chunks = rows.map(|r| split_count(r, grain, threads));
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
        assert_eq!(split_count(10, 9, 2), 1, "two chunks would have 5 rows");
        assert_eq!(split_count(18, 9, 2), 2);
        assert_eq!(split_count(1000, 9, 3), 3);
        assert_eq!(split_count(0, 9, 3), 1);
        let pool = ThreadPool::new(3).unwrap().with_min_parallel_cost(0);
        let (mut a, mut b) = (vec![0.0f32; 7 * 4], vec![0.0f32; 100]);
        for_each_chunk(&pool, [&mut a, &mut b], [4, 1], 2, 0, |j, rows, piece| {
            let len = [4, 1][j];
            assert_eq!(piece.len(), rows.len() * len);
            for (i, v) in piece.iter_mut().enumerate() {
                *v = (rows.start * len + i) as f32 + 1000.0 * j as f32;
            }
            Ok(())
        })
        .unwrap();
        assert!(a.iter().enumerate().all(|(i, &v)| v == i as f32));
        assert!(b.iter().enumerate().all(|(i, &v)| v == 1000.0 + i as f32));
    }

    #[test]
    fn the_first_error_comes_back() {
        let pool = ThreadPool::new(2).unwrap().with_min_parallel_cost(0);
        let mut y = vec![0.0f32; 64];
        let r = for_each_chunk(&pool, [&mut y], [1], 1, 0, |_, rows, _| {
            if rows.start > 0 {
                Err(Error::Input("second chunk".into()))
            } else {
                Ok(())
            }
        });
        assert!(matches!(r, Err(Error::Input(m)) if m == "second chunk"));
    }
}
