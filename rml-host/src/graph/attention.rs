//! `scaled_dot_product_attention` on f32 with rml-kernels' GEMM and row softmax.
//!
//! The queries of each batch entry (the broadcast leading axes of `q`, `k`, `v`)
//! are cut into blocks of rows ([`Layout::block`]: as many as keep the block's
//! scores within [`SCORE_FLOATS`], at least [`MIN_BLOCK`]). Per block: `S = scale · Q_blk · Kᵀ`
//! (GEMM, `K` read through strides: no transpose is copied), the causal and given
//! masks applied to `S`, rml-kernels' stable row softmax in place, then
//! `O_blk = S · V` (GEMM) straight into the output rows. With `causal`, a block
//! only multiplies the keys its last row can see. Blocks are the unit of work
//! across threads; their boundaries depend on the shapes alone, so results are
//! bitwise identical for every thread count. Scores and GEMM scratch live in
//! per-thread buffers that grow to the largest attention seen and are reused.

use std::cell::RefCell;
use std::sync::Mutex;

use rml_core::MAX_RANK;
use rml_kernels::gemm::{self, MatMut, MatRef};
use rml_kernels::softmax::softmax_rows_inplace;

use super::conv::{with_buffer, with_scratch};
use super::par::Parallel;
use crate::pool::chunk_range;

/// Scores a block of query rows may hold: 64 KiB, so one block's `rows × Sk`
/// scores stay in L2 through the softmax and the second product. Fewer, larger
/// blocks pack `Kᵀ` and `V` for the GEMMs fewer times (128 query rows by 128 keys:
/// once per head instead of four times).
pub const SCORE_FLOATS: usize = 16 * 1024;

/// Fewest query rows per block (for long key sequences).
pub const MIN_BLOCK: usize = 32;

/// Most chunks [`Attention::run`] splits the work into.
pub const MAX_CHUNKS: usize = 16;

thread_local! {
    /// The score block of the attention unit running on this thread.
    static SCORES: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// An attention mask's elements: a `BOOL` mask keeps `true` (nonzero) positions, a
/// float mask is added to the scores.
#[derive(Clone, Copy, Debug)]
pub enum Mask<'a> {
    /// Keep positions whose byte is nonzero; the others become `-inf`.
    Keep(&'a [u8]),
    /// Added to the scaled scores.
    Add(&'a [f32]),
}

impl Mask<'_> {
    fn len(&self) -> usize {
        match self {
            Mask::Keep(m) => m.len(),
            Mask::Add(m) => m.len(),
        }
    }
}

/// An f32 operand: a row-major tensor `dims`, seen through the axis permutation
/// `perm` (axis `a` of the view is axis `perm[a]` of the tensor, as `transpose`;
/// empty: no permutation).
#[derive(Clone, Copy, Debug)]
pub struct Operand<'a> {
    /// The tensor's elements.
    pub data: &'a [f32],
    /// The tensor's dims.
    pub dims: &'a [usize],
    /// The view's axis order.
    pub perm: &'a [usize],
}

impl Operand<'_> {
    /// The view's dims and strides (in elements); `None` when `perm` is not a
    /// permutation of the axes or the data does not hold `dims`.
    fn view(&self) -> Option<([usize; MAX_RANK], [usize; MAX_RANK], usize)> {
        let rank = self.dims.len();
        if rank > MAX_RANK || self.data.len() != numel(self.dims) {
            return None;
        }
        let strides = row_major(self.dims);
        let (mut dims, mut view_strides) = ([0; MAX_RANK], strides);
        dims[..rank].copy_from_slice(self.dims);
        if !self.perm.is_empty() {
            let mut seen = [false; MAX_RANK];
            if self.perm.len() != rank {
                return None;
            }
            for (a, &p) in self.perm.iter().enumerate() {
                if p >= rank || std::mem::replace(&mut seen[p], true) {
                    return None;
                }
                dims[a] = self.dims[p];
                view_strides[a] = strides[p];
            }
        }
        Some((dims, view_strides, rank))
    }
}

/// One attention's operands: `q [..., Sq, D]`, `k [..., Sk, D]`, `v [..., Sk, Dv]`
/// (each possibly read through a permutation), an optional row-major mask
/// broadcasting to the scores `[..., Sq, Sk]`; leading axes broadcast.
pub struct Attention<'a> {
    /// Queries.
    pub q: Operand<'a>,
    /// Keys.
    pub k: Operand<'a>,
    /// Values.
    pub v: Operand<'a>,
    /// The mask, if any.
    pub mask: Option<(Mask<'a>, &'a [usize])>,
    /// Mask key `j` for query `i` when `j > i`.
    pub causal: bool,
    /// Score scale (`None`: `1/√D`).
    pub scale: Option<f32>,
}

/// Where each operand's data lies for every batch entry and query row: strides (in
/// elements, 0 on broadcast axes) over the output's batch axes.
pub struct Layout {
    batch: [usize; MAX_RANK],
    rank: usize,
    entries: usize,
    /// Batch entries per work unit: 1, or the last batch axis (the heads) when the
    /// output is stored heads-last (`[..., Sq, H, Dv]`).
    inner: usize,
    sq: usize,
    sk: usize,
    d: usize,
    dv: usize,
    /// Batch-axis strides of q, k, v and the mask.
    strides: [[usize; MAX_RANK]; 4],
    /// Row and column strides of q, k and v.
    matrices: [[usize; 2]; 3],
    /// The mask's strides along the query and key axes.
    mask_rows: [usize; 2],
}

/// The strides of axes `dims` (with strides `strides`) over `target`, aligned from
/// the right, 0 on broadcast axes; `None` when `dims` does not broadcast to `target`.
fn broadcast_strides(
    dims: &[usize],
    strides: &[usize],
    target: &[usize],
) -> Option<[usize; MAX_RANK]> {
    let lead = target.len().checked_sub(dims.len())?;
    let mut out = [0; MAX_RANK];
    for (i, (&size, &stride)) in dims.iter().zip(strides).enumerate() {
        if size != target[lead + i] && size != 1 {
            return None;
        }
        out[lead + i] = if size == 1 { 0 } else { stride };
    }
    Some(out)
}

/// Row-major strides of `dims`.
fn row_major(dims: &[usize]) -> [usize; MAX_RANK] {
    let mut strides = [0; MAX_RANK];
    let mut step = 1;
    for (s, &d) in strides.iter_mut().zip(dims).rev() {
        *s = step;
        step *= d;
    }
    strides
}

/// Splits `dims` into its leading (batch) axes and its last two sizes.
fn matrix(dims: &[usize]) -> Option<(&[usize], usize, usize)> {
    match dims {
        [batch @ .., rows, cols] => Some((batch, *rows, *cols)),
        _ => None,
    }
}

impl Attention<'_> {
    /// The layout for output dims `out` (`[..., Sq, Dv]`), when every operand fits it
    /// (shapes agree and broadcast, lengths match, no empty axis); `None` leaves the
    /// node to the interpreter, which reports what is wrong. With `heads_last` the
    /// output is stored with its last batch axis and `Sq` swapped (`[..., Sq, H,
    /// Dv]`, the following `transpose(-3, -2)` done in place).
    pub fn layout(&self, out: &[usize], heads_last: bool) -> Option<Layout> {
        let (batch, sq, dv) = matrix(out)?;
        let rank = batch.len();
        let inner = if heads_last { *batch.last()? } else { 1 };
        if inner == 0 {
            return None;
        }
        let (q, k, v) = (self.q.view()?, self.k.view()?, self.v.view()?);
        let (_, q_rows, d) = matrix(&q.0[..q.2])?;
        let (_, sk, k_cols) = matrix(&k.0[..k.2])?;
        let (_, v_rows, v_cols) = matrix(&v.0[..v.2])?;
        let fits = out.len() <= MAX_RANK
            && (q_rows, k_cols, v_rows, v_cols) == (sq, d, sk, dv)
            && [sq, sk, d, dv].iter().all(|&n| n > 0);
        if !fits {
            return None;
        }
        let operand = |(dims, strides, r): ([usize; MAX_RANK], [usize; MAX_RANK], usize)| {
            let batch_strides = broadcast_strides(&dims[..r - 2], &strides[..r - 2], batch)?;
            Some((batch_strides, [strides[r - 2], strides[r - 1]]))
        };
        let ((qs, qm), (ks, km), (vs, vm)) = (operand(q)?, operand(k)?, operand(v)?);
        let mut strides = [qs, ks, vs, [0; MAX_RANK]];
        let mut mask_rows = [0; 2];
        if let Some((mask, dims)) = self.mask {
            let mut scores = [0; MAX_RANK];
            scores[..rank].copy_from_slice(batch);
            scores[rank..rank + 2].copy_from_slice(&[sq, sk]);
            let all = broadcast_strides(dims, &row_major(dims), &scores[..rank + 2])?;
            if mask.len() != numel(dims) {
                return None;
            }
            strides[3] = all;
            mask_rows = [all[rank], all[rank + 1]];
        }
        let mut dims = [0; MAX_RANK];
        dims[..rank].copy_from_slice(batch);
        Some(Layout {
            batch: dims,
            rank,
            entries: batch.iter().product(),
            inner,
            sq,
            sk,
            d,
            dv,
            strides,
            matrices: [qm, km, vm],
            mask_rows,
        })
    }

    /// Writes the attention into `out` (laid out by [`Attention::layout`], so `out`
    /// holds `entries · Sq · Dv` values), the work units split into `chunks`
    /// (at most [`MAX_CHUNKS`]) pieces run by `parallel`.
    pub fn run(&self, l: &Layout, out: &mut [f32], chunks: usize, parallel: Parallel<'_>) {
        let units = l.units();
        let chunks = chunks.clamp(1, units.min(MAX_CHUNKS));
        if chunks == 1 {
            self.units(l, 0..units, out);
            return;
        }
        let slots: [Mutex<Option<&mut [f32]>>; MAX_CHUNKS] =
            std::array::from_fn(|_| Mutex::new(None));
        let mut rest = out;
        for (c, slot) in slots.iter().enumerate().take(chunks) {
            let range = chunk_range(units, chunks, c);
            let len = l.unit_start(range.end) - l.unit_start(range.start);
            let (head, tail) = rest.split_at_mut(len);
            *slot.lock().expect("fresh mutex") = Some(head);
            rest = tail;
        }
        parallel(chunks, &|c| {
            if let Some(piece) = slots[c].lock().ok().and_then(|mut s| s.take()) {
                self.units(l, chunk_range(units, chunks, c), piece);
            }
        });
    }

    /// Runs work units `units` into `out`, which holds exactly their output rows.
    fn units(&self, l: &Layout, units: std::ops::Range<usize>, out: &mut [f32]) {
        let rows = l.block().min(l.sq);
        let scratch =
            gemm::gemm_scratch_len(rows, l.sk, l.d).max(gemm::gemm_scratch_len(rows, l.dv, l.sk));
        with_buffer(&SCORES, rows * l.sk, |scores| {
            with_scratch(scratch, |scratch| {
                let base = l.unit_start(units.start);
                for u in units {
                    let piece = &mut out[l.unit_start(u) - base..l.unit_start(u + 1) - base];
                    let done = self.unit(l, u, piece, scores, scratch);
                    debug_assert!(done.is_ok(), "dims are checked by Attention::layout");
                }
            });
        });
    }

    /// One work unit: a block of query rows of `l.inner` batch entries, whose
    /// output rows `out` holds (interleaved when the output is heads-last).
    fn unit(
        &self,
        l: &Layout,
        unit: usize,
        out: &mut [f32],
        scores: &mut [f32],
        scratch: &mut [f32],
    ) -> rml_core::Result<()> {
        let block = l.block();
        let blocks = l.sq.div_ceil(block);
        let (outer, first) = (unit / blocks, unit % blocks * block);
        for h in 0..l.inner {
            let out = MatMut::new(
                &mut out[h * l.dv..],
                block.min(l.sq - first),
                l.dv,
                l.inner * l.dv,
                1,
            )?;
            self.block(l, outer * l.inner + h, first, out, scores, scratch)?;
        }
        Ok(())
    }

    /// Query rows `first..first + block` (or fewer) of batch entry `entry`: scores,
    /// masks, softmax, then the weighted values into `out`.
    fn block(
        &self,
        l: &Layout,
        entry: usize,
        first: usize,
        out: MatMut<'_>,
        scores: &mut [f32],
        scratch: &mut [f32],
    ) -> rml_core::Result<()> {
        let rows = l.block().min(l.sq - first);
        // Causal: the last row of the block sees keys 0..=first + rows - 1.
        let keys = if self.causal {
            l.sk.min(first + rows)
        } else {
            l.sk
        };
        let [qo, ko, vo, mo] = l.offsets(entry);
        let (d, dv) = (l.d, l.dv);
        let [[qr, qc], [kr, kc], [vr, vc]] = l.matrices;
        let scale = self.scale.unwrap_or(1.0 / (d as f32).sqrt());
        let s = &mut scores[..rows * keys];
        let q = MatRef::new(&self.q.data[qo + first * qr..], rows, d, qr, qc)?;
        let k = MatRef::new(&self.k.data[ko..], keys, d, kr, kc)?;
        gemm::gemm(
            scale,
            q,
            k.t(),
            0.0,
            MatMut::row_major(s, rows, keys)?,
            scratch,
        )?;
        for (t, row) in s.chunks_exact_mut(keys).enumerate() {
            let i = first + t;
            if self.causal && i + 1 < keys {
                row[i + 1..].fill(f32::NEG_INFINITY);
            }
            if let Some((mask, _)) = self.mask {
                let [rs, cs] = l.mask_rows;
                let at = |j: usize| mo + i * rs + j * cs;
                match mask {
                    Mask::Keep(m) => {
                        for (j, x) in row.iter_mut().enumerate() {
                            if m[at(j)] == 0 {
                                *x = f32::NEG_INFINITY;
                            }
                        }
                    }
                    Mask::Add(m) => {
                        for (j, x) in row.iter_mut().enumerate() {
                            *x += m[at(j)];
                        }
                    }
                }
            }
        }
        softmax_rows_inplace(s, keys)?;
        let p = MatRef::row_major(s, rows, keys)?;
        let v = MatRef::new(&self.v.data[vo..], keys, dv, vr, vc)?;
        gemm::gemm(1.0, p, v, 0.0, out, scratch)
    }
}

impl Layout {
    /// Query rows per block: as many as keep a block's scores within
    /// [`SCORE_FLOATS`], at least [`MIN_BLOCK`]; the shapes alone decide, so the
    /// bits do not depend on the thread count.
    pub fn block(&self) -> usize {
        (SCORE_FLOATS / self.sk.max(1)).max(MIN_BLOCK)
    }

    /// Work units: query blocks over all groups of [`Layout::inner`] batch entries.
    pub fn units(&self) -> usize {
        self.entries / self.inner * self.sq.div_ceil(self.block())
    }

    /// Multiply-adds of the two products (without the causal saving).
    pub fn work(&self) -> usize {
        self.entries
            .saturating_mul(self.sq * self.sk)
            .saturating_mul(self.d + self.dv)
    }

    /// Output offset of unit `u`'s first row (`u == units()` gives the end).
    fn unit_start(&self, u: usize) -> usize {
        let block = self.block();
        let blocks = self.sq.div_ceil(block);
        let row = (u / blocks) * self.sq + (u % blocks) * block;
        row * self.inner * self.dv
    }

    /// Offsets of batch entry `entry` in q, k, v and the mask.
    fn offsets(&self, entry: usize) -> [usize; 4] {
        let mut rest = entry;
        let mut offsets = [0; 4];
        for a in (0..self.rank).rev() {
            let i = rest % self.batch[a];
            rest /= self.batch[a];
            for (o, s) in offsets.iter_mut().zip(&self.strides) {
                *o += i * s[a];
            }
        }
        offsets
    }
}

/// Elements of a row-major tensor `dims`.
fn numel(dims: &[usize]) -> usize {
    dims.iter().product()
}
