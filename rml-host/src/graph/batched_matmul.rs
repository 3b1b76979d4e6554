//! `matmul` of two f32 activations (a constant 2-D right operand is a packed
//! [`super::steps::StepKind::Linear`] instead) with equal batch dims: one rml-kernels
//! GEMM per batch entry, transposes expressed as strides, split across threads by
//! batch entries (or, for one entry, by blocks of output rows). Broadcast batch dims
//! and empty dims are left to rml-core.

use rml_kernels::gemm::{self, MatMut, MatRef};

use super::conv::with_scratch;
use super::par::{Cost, Parallel, for_row_blocks, gemm_chunks};

/// How a step is split: `chunks(items, cost)` is the number of chunks the thread
/// policy gives `items` items of a step costing `cost` (the executor's
/// `chunk_count`), and `parallel` runs them.
pub struct Split<'a> {
    /// The thread policy.
    pub chunks: &'a dyn Fn(usize, Cost) -> usize,
    /// Runs chunks `0..n`, possibly in parallel.
    pub parallel: Parallel<'a>,
}

/// `out = op(a) · op(b)` per batch entry; `false` (nothing written) when the ranks,
/// batch dims, inner sizes or lengths do not fit.
///
/// With several batch entries the chunks are whole entries; with one, blocks of
/// more than `SMALL_M` output rows (`par::gemm_chunks`), so every row takes the
/// same GEMM path and gets the same bits whatever the thread count.
pub fn matmul(
    (a, a_dims): (&[f32], &[usize]),
    (b, b_dims): (&[f32], &[usize]),
    [transpose_a, transpose_b]: [bool; 2],
    out: &mut [f32],
    split: Split<'_>,
) -> bool {
    let rank = a_dims.len();
    if rank < 2 || b_dims.len() != rank || a_dims[..rank - 2] != b_dims[..rank - 2] {
        return false;
    }
    let (ra, ca, rb, cb) = (
        a_dims[rank - 2],
        a_dims[rank - 1],
        b_dims[rank - 2],
        b_dims[rank - 1],
    );
    let (m, k) = if transpose_a { (ca, ra) } else { (ra, ca) };
    let (k2, n) = if transpose_b { (cb, rb) } else { (rb, cb) };
    let batch: usize = a_dims[..rank - 2].iter().product();
    let fits = k == k2
        && m * k * n * batch > 0
        && a.len() == batch * ra * ca
        && b.len() == batch * rb * cb
        && out.len() == batch * m * n;
    if !fits {
        return false;
    }
    let operands = |e: usize| -> rml_core::Result<(MatRef<'_, f32>, MatRef<'_, f32>)> {
        let a = MatRef::row_major(&a[e * ra * ca..][..ra * ca], ra, ca)?;
        let b = MatRef::row_major(&b[e * rb * cb..][..rb * cb], rb, cb)?;
        Ok((
            if transpose_a { a.t() } else { a },
            if transpose_b { b.t() } else { b },
        ))
    };
    let cost = Cost::Fma(batch * m * n * k);
    let scratch = gemm::gemm_scratch_len(m, n, k);
    if batch > 1 {
        let chunks = (split.chunks)(batch, cost);
        for_row_blocks(
            out,
            [batch, m * n],
            chunks,
            split.parallel,
            &|entries, block| {
                with_scratch(scratch, |scratch| {
                    for (e, c) in entries.zip(block.chunks_exact_mut(m * n)) {
                        let done = operands(e).and_then(|(a, b)| {
                            gemm::gemm(1.0, a, b, 0.0, MatMut::row_major(c, m, n)?, scratch)
                        });
                        debug_assert!(done.is_ok(), "dims are checked above");
                    }
                });
            },
        );
    } else {
        let chunks = gemm_chunks((split.chunks)(m, cost), m, 1);
        for_row_blocks(out, [m, n], chunks, split.parallel, &|rows, c| {
            with_scratch(scratch, |scratch| {
                let done = operands(0).and_then(|(a, b)| {
                    let (rows, cols) = (rows.clone(), 0..k);
                    let c = MatMut::row_major(c, rows.len(), n)?;
                    gemm::gemm(1.0, a.sub(rows, cols)?, b, 0.0, c, scratch)
                });
                debug_assert!(done.is_ok(), "dims are checked above");
            });
        });
    }
    true
}
