//! The executor's thread policy and the split of a node's output into contiguous
//! row blocks, one per chunk, run through its thread pool; each chunk writes only
//! its own block.
//!
//! **Policy.** A step is split only when each chunk gets at least
//! [`MIN_CHUNK_PS`] of estimated single-thread work: handing a chunk to another
//! thread and joining it costs microseconds of wall and CPU time (more when the
//! machine is busy and the worker must be scheduled first), so smaller steps stay
//! on the calling thread and a step gets fewer chunks than threads when it is only
//! a little above the bar. Work is estimated in picoseconds from what the step
//! does ([`Cost`]), not from its row count.

use std::ops::Range;
use std::sync::Mutex;

use crate::pool::{chunk_range, row_blocks, split_count};

/// Most chunks an output is split into.
pub const MAX_CHUNKS: usize = 16;

/// Least estimated work (picoseconds) a chunk must get for a step to be split.
pub const MIN_CHUNK_PS: usize = 50_000_000;

/// A step's estimated single-thread work, by kind (rates measured on this
/// project's AVX2 machine; they only need to be right within a small factor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cost {
    /// Multiply-adds of a packed GEMM (a linear, a convolution, an attention).
    Fma(usize),
    /// Already in picoseconds (a fused program: [`super::fuse::Program::cost_ps`]).
    Ps(usize),
    /// Elements of a row kernel (layer/RMS norm, softmax: a few passes per row).
    RowElements(usize),
    /// Elements read by a single-pass fold or copy (reductions, pooling).
    Elements(usize),
    /// Elements of an f64 per-element formula (group norm).
    F64Elements(usize),
    /// Bytes of a weight streamed once by a GEMV (from L3 or memory).
    WeightBytes(usize),
}

impl Cost {
    /// Estimated picoseconds on one thread.
    pub fn ps(self) -> usize {
        match self {
            Cost::Fma(n) => n.saturating_mul(40),
            Cost::Ps(n) => n,
            Cost::RowElements(n) => n.saturating_mul(300),
            Cost::Elements(n) => n.saturating_mul(100),
            Cost::F64Elements(n) => n.saturating_mul(1000),
            Cost::WeightBytes(n) => n.saturating_mul(21),
        }
    }
}

/// Chunks to split `n` items of a step costing `cost` into on `threads` threads: at
/// most one per item and per `min_chunk_ps` of work, 1 when the step is too small
/// to split.
pub fn chunk_count(threads: usize, n: usize, cost: Cost, min_chunk_ps: usize) -> usize {
    let by_work = cost.ps() / min_chunk_ps.max(1);
    threads.min(n).min(by_work).clamp(1, MAX_CHUNKS)
}

/// Runs chunks `0..n` of a job, possibly in parallel.
pub type Parallel<'a> = &'a dyn Fn(usize, &(dyn Fn(usize) + Sync));

/// At most `chunks`, fewer where needed so that splitting `items` items of
/// `rows_per_item` rows each of one plain GEMM (`rml_kernels::gemm::gemm`, whose
/// small-M path accumulates in another order than its blocked path) gives every
/// chunk more than `SMALL_M` rows, or 1 when the whole has no more than that: the
/// same path for every row whatever the thread count, so the same bits.
pub fn gemm_chunks(chunks: usize, items: usize, rows_per_item: usize) -> usize {
    let small = rml_kernels::gemm::SMALL_M;
    if items.saturating_mul(rows_per_item) <= small {
        return 1;
    }
    // Every chunk gets at least the fewest items whose rows are more than `small`.
    split_count(items, small / rows_per_item + 1, chunks)
}

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
    for (slot, (_, block)) in slots.iter().zip(row_blocks(out, [rows, row_len], chunks)) {
        *slot.lock().expect("fresh mutex") = Some(block);
    }
    parallel(chunks, &|i| {
        if let Some(block) = slots[i].lock().ok().and_then(|mut s| s.take()) {
            f(chunk_range(rows, chunks, i), block);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::{Cost, MIN_CHUNK_PS, chunk_count, chunk_range, gemm_chunks};

    #[test]
    fn small_steps_stay_on_one_chunk() {
        // A tiny linear (16 rows x 32 x 64): far below the bar.
        assert_eq!(chunk_count(2, 16, Cost::Fma(16 * 32 * 64), MIN_CHUNK_PS), 1);
        // Work for one and a half chunks: still one.
        let ps = MIN_CHUNK_PS * 3 / 2;
        assert_eq!(chunk_count(4, 100, Cost::Ps(ps), MIN_CHUNK_PS), 1);
        // Work for three chunks on four threads: three.
        assert_eq!(
            chunk_count(4, 100, Cost::Ps(3 * MIN_CHUNK_PS), MIN_CHUNK_PS),
            3
        );
        // Never more chunks than items or threads.
        assert_eq!(chunk_count(4, 2, Cost::Ps(usize::MAX), MIN_CHUNK_PS), 2);
        assert_eq!(chunk_count(1, 100, Cost::Ps(usize::MAX), MIN_CHUNK_PS), 1);
        // A zero bar splits whatever has items.
        assert_eq!(chunk_count(3, 100, Cost::Fma(1), 0), 3);
    }

    #[test]
    fn gemm_chunks_keep_every_chunk_off_the_small_m_path() {
        let small = rml_kernels::gemm::SMALL_M;
        // A GEMM on the small-M path as a whole is never split.
        assert_eq!(gemm_chunks(3, small, 1), 1);
        assert_eq!(gemm_chunks(3, 2, small / 2), 1);
        // Every chunk keeps more than SMALL_M rows.
        assert_eq!(gemm_chunks(3, 2 * small + 1, 1), 1);
        assert_eq!(gemm_chunks(3, 2 * small + 2, 1), 2);
        assert_eq!(gemm_chunks(3, 3 * small + 3, 1), 3);
        assert_eq!(gemm_chunks(4, 6, small / 2 + 1), 3);
        // Brute force: the most chunks up to the bound whose every chunk has more
        // than SMALL_M rows (1 when none).
        for (chunks, items, per) in (1..=5).flat_map(|c| {
            (0..4 * small).flat_map(move |i| [1, 2, 3, small].map(move |p| (c, i, p)))
        }) {
            let want = (1..=chunks)
                .filter(|&k| (0..k).all(|t| chunk_range(items, k, t).len() * per > small))
                .max()
                .unwrap_or(1);
            assert_eq!(
                gemm_chunks(chunks, items, per),
                want,
                "{chunks} {items} {per}"
            );
        }
    }
}
