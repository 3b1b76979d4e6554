//! Splitting a node's output into contiguous row blocks, one per chunk, run through
//! the executor's thread pool; each chunk writes only its own block.

use std::ops::Range;
use std::sync::Mutex;

use crate::pool::chunk_range;

/// Most chunks an output is split into.
pub const MAX_CHUNKS: usize = 16;

/// Runs chunks `0..n` of a job, possibly in parallel.
pub type Parallel<'a> = &'a dyn Fn(usize, &(dyn Fn(usize) + Sync));

/// Splits `out` (`rows` rows of `row_len` values) into `chunks` near-equal blocks of
/// whole rows (at most [`MAX_CHUNKS`], at most one per row) and calls `f(rows, block)`
/// for each through `parallel`. Allocates nothing.
pub fn for_row_blocks(
    out: &mut [f32],
    [rows, row_len]: [usize; 2],
    chunks: usize,
    parallel: Parallel<'_>,
    f: &(dyn Fn(Range<usize>, &mut [f32]) + Sync),
) {
    let chunks = chunks.clamp(1, rows.clamp(1, MAX_CHUNKS));
    let slots: [Mutex<Option<&mut [f32]>>; MAX_CHUNKS] = std::array::from_fn(|_| Mutex::new(None));
    let mut rest = out;
    for (i, slot) in slots.iter().enumerate().take(chunks) {
        let len = chunk_range(rows, chunks, i).len() * row_len;
        let (head, tail) = std::mem::take(&mut rest).split_at_mut(len);
        *slot.lock().expect("fresh mutex") = Some(head);
        rest = tail;
    }
    parallel(chunks, &|i| {
        if let Some(block) = slots[i].lock().ok().and_then(|mut s| s.take()) {
            f(chunk_range(rows, chunks, i), block);
        }
    });
}
