//! Splitting a projection's outputs across an `rml_host::ThreadPool`, by the pool's
//! static partition: decode divides one row's output features (each thread streams
//! its own weight rows; every output is computed exactly as on one thread), prefill
//! divides the token rows (each thread runs the GEMM on its rows).

use std::ops::Range;
use std::sync::Mutex;

use rml_host::ThreadPool;
use rml_host::pool::{chunk_count, chunk_range};

use crate::error::{Error, Result};

/// The most chunks one split uses (pools with more threads run serially here).
const MAX_CHUNKS: usize = 64;

/// Calls `f(rows, piece)` for each chunk of the pool's static partition of the
/// `y.len() / row_len` rows of `y` (at least `grain` rows a chunk), `piece` being
/// those rows, in parallel when the pool judges `cost_per_row × rows` worth it.
pub(crate) fn for_each_row_chunk<F>(
    pool: &ThreadPool,
    y: &mut [f32],
    row_len: usize,
    grain: usize,
    cost_per_row: usize,
    f: F,
) -> Result<()>
where
    F: Fn(Range<usize>, &mut [f32]) -> Result<()> + Sync,
{
    let row_len = row_len.max(1);
    let n = y.len() / row_len;
    let chunks = chunk_count(n, grain, pool.threads());
    if chunks > MAX_CHUNKS {
        return f(0..n, y);
    }
    let slots: [Mutex<Option<&mut [f32]>>; MAX_CHUNKS] = std::array::from_fn(|_| Mutex::new(None));
    let mut rest = y;
    for (i, slot) in slots.iter().enumerate().take(chunks) {
        let len = chunk_range(n, chunks, i).len() * row_len;
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(len);
        *slot.lock().map_err(|_| poisoned())? = Some(head);
        rest = tail;
    }
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    pool.parallel_for_cost(n, grain, cost_per_row, |i, range| {
        let piece = slots[i].lock().ok().and_then(|mut s| s.take());
        let result = match piece {
            Some(piece) => f(range, piece),
            None => Err(poisoned()),
        };
        if let Err(e) = result
            && let Ok(mut slot) = failure.lock()
        {
            slot.get_or_insert(e);
        }
    });
    match failure.into_inner() {
        Ok(None) => Ok(()),
        Ok(Some(e)) => Err(e),
        Err(_) => Err(poisoned()),
    }
}

fn poisoned() -> Error {
    Error::Input("a worker thread panicked".into())
}
