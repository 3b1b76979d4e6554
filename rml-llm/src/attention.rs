//! Causal multi-head attention over the KV cache, for a block of new positions
//! (prefill) or one (decode): grouped-query heads, optional sliding window, optional
//! score soft-capping.

use std::ops::Range;

use rml_kernels::attention::{CachedRows, HeadGroups, attention_scores, attention_values};
use rml_kernels::gemm::Weight;
use rml_kernels::softmax::softmax_parts_inplace;

use crate::error::{Error, Result};
use crate::kv_cache::KvElement;
use crate::ops::softcap;
use crate::prefill_attention::segments;

/// One layer's cached keys and values: `slots` rows each, position `p` in row
/// `p % slots`.
#[derive(Clone, Copy, Debug)]
pub struct KvRing<'a, T> {
    /// Keys, `slots × n_kv_heads·head_dim`.
    pub keys: &'a [T],
    /// Values, shaped like `keys`.
    pub values: &'a [T],
    /// Rows held.
    pub slots: usize,
}

/// The shape of one layer's attention.
#[derive(Clone, Copy, Debug)]
pub struct AttentionSpec {
    /// Query heads.
    pub n_heads: usize,
    /// Key/value heads; query head `h` reads key head `h / (n_heads / n_kv_heads)`.
    pub n_kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Multiplier of `q·k`.
    pub scale: f32,
    /// Soft-cap of the scaled scores.
    pub softcap: Option<f32>,
    /// Positions a query sees (itself included); `None` for all earlier ones.
    pub window: Option<usize>,
}

impl AttentionSpec {
    /// The first key position that query position `pos` may attend to.
    pub fn first_visible(&self, pos: usize) -> usize {
        match self.window {
            Some(w) => (pos + 1).saturating_sub(w),
            None => 0,
        }
    }

    /// Attention of the queries `q` (`rows × n_heads·head_dim`, positions
    /// `start..start + rows`) over the cached keys and values (every visible
    /// position present) into `out` (shaped like `q`), one query row at a time:
    /// [`AttentionSpec::attend_blocks`] over all of the row's blocks, then
    /// [`AttentionSpec::combine`].
    pub fn run<T: KvElement + Weight>(
        &self,
        q: &[f32],
        kv: KvRing<'_, T>,
        start: usize,
        out: &mut [f32],
        scratch: &mut DecodeScratch,
    ) -> Result<()> {
        let q_dim = self.n_heads * self.head_dim;
        let rows = q.len() / q_dim.max(1);
        for t in 0..rows {
            let (q, out) = (&q[t * q_dim..][..q_dim], &mut out[t * q_dim..][..q_dim]);
            let pos = start + t;
            let (scores, partials) = scratch.parts(self, pos);
            self.attend_blocks(q, kv, pos, 0..self.blocks(pos), scores, partials)?;
            self.combine(partials, out)?;
        }
        Ok(())
    }

    /// Positions a query at `pos` reads.
    fn visible(&self, pos: usize) -> usize {
        pos + 1 - self.first_visible(pos)
    }

    /// Blocks of [`AttentionSpec::block_len`] visible positions (the last one
    /// shorter) that a query at `pos` reads.
    pub fn blocks(&self, pos: usize) -> usize {
        self.visible(pos).div_ceil(self.block_len(pos))
    }

    /// Positions per block for a query at `pos` (see [`block_len`]).
    pub fn block_len(&self, pos: usize) -> usize {
        block_len(self.visible(pos))
    }

    /// Values of one block's partial result: the unnormalized output of every query
    /// head, then each head's score maximum, then its sum of exponentials.
    pub fn partial_len(&self) -> usize {
        self.n_heads * (self.head_dim + 2)
    }

    /// Values of one block's scores for a query at `pos`: one row of
    /// [`AttentionSpec::block_len`] per query head.
    pub fn block_scores_len(&self, pos: usize) -> usize {
        self.n_heads * self.block_len(pos)
    }

    /// The partial results of blocks `blocks` (of [`AttentionSpec::blocks`]) of one
    /// query row `q` (`n_heads·head_dim`, at position `pos`): `partials` holds
    /// `blocks.len()` rows of [`AttentionSpec::partial_len`], `scores` as many rows
    /// of [`AttentionSpec::block_scores_len`] (scratch). Each block is computed on
    /// its own, the same whichever call computes it, so a decode step can split the
    /// blocks across threads and still give the bits one thread gives.
    ///
    /// The blocks stream their cached rows through [`attention_scores`] (every
    /// block's keys, in order) and then [`attention_values`] (every block's values):
    /// each row is read once, front to back, for every query head, and the cache is
    /// read as two long runs rather than restarting the hardware prefetchers at each
    /// block. Between the two, [`softmax_parts_inplace`] leaves each block's
    /// probabilities unscaled, with the block's maximum and sum beside them.
    pub fn attend_blocks<T: KvElement + Weight>(
        &self,
        q: &[f32],
        kv: KvRing<'_, T>,
        pos: usize,
        blocks: Range<usize>,
        scores: &mut [f32],
        partials: &mut [f32],
    ) -> Result<()> {
        let (plen, slen) = (self.partial_len(), self.block_scores_len(pos));
        if blocks.end > self.blocks(pos)
            || scores.len() < blocks.len() * slen
            || partials.len() < blocks.len() * plen
        {
            return Err(Error::Input(format!(
                "decode attention: blocks {blocks:?} of a query at {pos} need {} score and \
                 {} partial values, got {} and {}",
                blocks.len() * slen,
                blocks.len() * plen,
                scores.len(),
                partials.len()
            )));
        }
        let heads = HeadGroups {
            kv_heads: self.n_kv_heads,
            group: self.n_heads / self.n_kv_heads,
            head_dim: self.head_dim,
        };
        let ctx = || Error::core("decode attention");
        let (first, block) = (self.first_visible(pos), self.block_len(pos));
        // Block `b`'s first position and length.
        let span = |b: usize| {
            let lo = first + b * block;
            (lo, block.min(pos + 1 - lo))
        };
        for ((b, scores), partial) in blocks
            .clone()
            .zip(scores.chunks_exact_mut(slen))
            .zip(partials.chunks_exact_mut(plen))
        {
            let (lo, len) = span(b);
            let probs = &mut scores[..self.n_heads * len];
            let mut col = 0;
            for (rows, n) in self.ring_rows(kv.keys, kv.slots, lo, len)? {
                attention_scores(self.scale, q, rows, heads, &mut probs[col..], len)
                    .map_err(ctx())?;
                col += n;
            }
            if let Some(cap) = self.softcap {
                softcap(probs, cap);
            }
            let (maxes, sums) = partial[self.n_heads * self.head_dim..].split_at_mut(self.n_heads);
            softmax_parts_inplace(probs, len, maxes, sums).map_err(ctx())?;
        }
        for ((b, scores), partial) in blocks
            .zip(scores.chunks_exact(slen))
            .zip(partials.chunks_exact_mut(plen))
        {
            let (lo, len) = span(b);
            let out = &mut partial[..self.n_heads * self.head_dim];
            let mut col = 0;
            for (rows, n) in self.ring_rows(kv.values, kv.slots, lo, len)? {
                attention_values(&scores[col..], len, rows, heads, out, col > 0).map_err(ctx())?;
                col += n;
            }
        }
        Ok(())
    }

    /// The cached rows of positions `lo..lo + len` in a ring of `slots` rows: one
    /// run, or two where the ring wraps, each with its length.
    fn ring_rows<'a, T>(
        &self,
        data: &'a [T],
        slots: usize,
        lo: usize,
        len: usize,
    ) -> Result<impl Iterator<Item = (CachedRows<'a, T>, usize)>> {
        let kv_dim = self.n_kv_heads * self.head_dim;
        if data.len() < slots * kv_dim {
            return Err(Error::Input(
                "decode attention: KV ring shorter than its slots".into(),
            ));
        }
        Ok(segments(lo, len, slots)
            .into_iter()
            .filter(|&(_, n)| n > 0)
            .map(move |(slot, n)| {
                let rows = CachedRows {
                    data: &data[slot * kv_dim..],
                    rows: n,
                    stride: kv_dim,
                };
                (rows, n)
            }))
    }

    /// Combines the partial results of all of a query's blocks (`partials`, in
    /// block order; each maximum is overwritten with its block's weight) into
    /// `out` (`n_heads·head_dim`): per head, block `b` weighs
    /// `exp(max_b − max) / Σ_b exp(max_b − max)·sum_b`, summed in block order.
    pub fn combine(&self, partials: &mut [f32], out: &mut [f32]) -> Result<()> {
        let (hd, heads, plen) = (self.head_dim, self.n_heads, self.partial_len());
        if !partials.len().is_multiple_of(plen) || out.len() != heads * hd {
            return Err(Error::Input(format!(
                "decode attention: {} partial values and {} outputs for {heads} heads of {hd}",
                partials.len(),
                out.len()
            )));
        }
        let stat = |b: usize, h: usize| b * plen + heads * hd + h;
        let blocks = partials.len().checked_div(plen).unwrap_or(0);
        for (h, out) in out.chunks_exact_mut(hd).enumerate() {
            let max = (0..blocks).fold(f32::NEG_INFINITY, |m, b| m.max(partials[stat(b, h)]));
            let mut total = 0.0;
            for b in 0..blocks {
                let weight = (partials[stat(b, h)] - max).exp();
                partials[stat(b, h)] = weight;
                total += weight * partials[stat(b, h + heads)];
            }
            out.fill(0.0);
            for b in 0..blocks {
                let weight = partials[stat(b, h)] / total;
                let o = &partials[b * plen + h * hd..][..hd];
                out.iter_mut().zip(o).for_each(|(y, v)| *y += weight * v);
            }
        }
        Ok(())
    }
}

/// The blocks a long context is cut into for decode attention: the units a decode
/// step splits across threads (each block's result does not depend on which
/// thread computed it, nor on how many there are).
pub const DECODE_BLOCKS: usize = 16;

/// The fewest positions in a block (shorter contexts have fewer blocks). 32 rows of
/// a Qwen3-0.6B layer are 128 KiB of keys and as much of values, against a partial
/// result of 8 KiB.
pub const MIN_DECODE_BLOCK: usize = 32;

/// Positions per block when `visible` positions are attended to: `visible /
/// DECODE_BLOCKS` rounded up to a multiple of 8, at least [`MIN_DECODE_BLOCK`], so
/// there are never more than [`DECODE_BLOCKS`] blocks. It depends only on the
/// context length, so results never depend on the thread count. Long contexts split
/// evenly across 2, 4, 8 or 16 threads, and combining costs at most 16 partial
/// results per head whatever the context. (Fixed 64-position blocks, tried first,
/// split a 544-position context 5 : 4 between two threads and decoded Qwen3-0.6B
/// there at 51–63 tokens/s against 68–75 for 32-position blocks.)
pub fn block_len(visible: usize) -> usize {
    visible
        .div_ceil(DECODE_BLOCKS)
        .next_multiple_of(8)
        .max(MIN_DECODE_BLOCK)
}

/// Scratch of decode attention ([`AttentionSpec::run`]): per block of a query's
/// positions, its scores and its partial result.
#[derive(Clone, Debug, Default)]
pub struct DecodeScratch {
    scores: Vec<f32>,
    partials: Vec<f32>,
}

impl DecodeScratch {
    /// Room for queries of `n_heads` heads of `head_dim` at up to `max_positions`
    /// positions (a call never grows it then).
    pub fn with_capacity(n_heads: usize, head_dim: usize, max_positions: usize) -> Self {
        // Blocks end less than a block past the context, and block lengths never
        // shrink as the context grows.
        let block = block_len(max_positions);
        DecodeScratch {
            scores: Vec::with_capacity(n_heads * (max_positions + block)),
            partials: Vec::with_capacity(DECODE_BLOCKS * n_heads * (head_dim + 2)),
        }
    }

    /// The scores and partials of every block of a query of `spec` at `pos`.
    pub fn parts(&mut self, spec: &AttentionSpec, pos: usize) -> (&mut [f32], &mut [f32]) {
        let blocks = spec.blocks(pos);
        self.scores.resize(blocks * spec.block_scores_len(pos), 0.0);
        self.partials.resize(blocks * spec.partial_len(), 0.0);
        (&mut self.scores, &mut self.partials)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(window: Option<usize>) -> AttentionSpec {
        AttentionSpec {
            n_heads: 2,
            n_kv_heads: 1,
            head_dim: 2,
            scale: 1.0,
            softcap: None,
            window,
        }
    }

    #[test]
    fn first_position_copies_its_value_and_window_limits_the_past() {
        let keys = [0.0f32; 6];
        let values = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        let q = [1.0; 12];
        let mut out = [0.0; 12];
        let mut scratch = DecodeScratch::default();
        let ring = KvRing {
            keys: &keys,
            values: &values,
            slots: 3,
        };
        spec(None).run(&q, ring, 0, &mut out, &mut scratch).unwrap();
        // Equal scores: position p averages values 0..=p; both heads share kv head 0.
        assert_eq!(&out[..4], &[1.0, 2.0, 1.0, 2.0]);
        assert_eq!(&out[8..], &[3.0, 4.0, 3.0, 4.0]);
        spec(Some(2))
            .run(&q, ring, 0, &mut out, &mut scratch)
            .unwrap();
        assert_eq!(&out[8..], &[4.0, 5.0, 4.0, 5.0]);
    }

    /// Deterministic values in [-2, 2).
    fn noise(n: usize, seed: u64) -> Vec<f32> {
        let mut v = vec![0.0; n];
        rml_kernels::testing::Rng::new(seed).fill(&mut v, -2.0, 2.0);
        v
    }

    /// Attention of one query at `pos` straight from the definition, in f64: scaled
    /// (and soft-capped) scores of the visible positions, softmax, weighted values.
    fn reference(
        s: &AttentionSpec,
        q: &[f32],
        keys: &[f32],
        values: &[f32],
        slots: usize,
        pos: usize,
    ) -> Vec<f64> {
        let (hd, kv_dim) = (s.head_dim, s.n_kv_heads * s.head_dim);
        let group = s.n_heads / s.n_kv_heads;
        let mut out = vec![0.0; s.n_heads * hd];
        for h in 0..s.n_heads {
            let at = |data: &[f32], p: usize, i: usize| {
                f64::from(data[(p % slots) * kv_dim + (h / group) * hd + i])
            };
            let seen = s.first_visible(pos)..pos + 1;
            let scores: Vec<f64> = seen
                .clone()
                .map(|p| {
                    let dot: f64 = (0..hd)
                        .map(|i| f64::from(q[h * hd + i]) * at(keys, p, i))
                        .sum();
                    let x = dot * f64::from(s.scale);
                    s.softcap
                        .map_or(x, |c| f64::from(c) * (x / f64::from(c)).tanh())
                })
                .collect();
            let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let total: f64 = scores.iter().map(|x| (x - max).exp()).sum();
            for (p, x) in seen.zip(&scores) {
                let w = (x - max).exp() / total;
                for i in 0..hd {
                    out[h * hd + i] += w * at(values, p, i);
                }
            }
        }
        out
    }

    #[test]
    fn blocks_match_the_definition_and_any_split_gives_the_same_bits() {
        let mut s = AttentionSpec {
            n_heads: 6,
            n_kv_heads: 2,
            head_dim: 20,
            scale: 0.3,
            softcap: None,
            window: None,
        };
        let kv_dim = s.n_kv_heads * s.head_dim;
        let q_dim = s.n_heads * s.head_dim;
        let q = noise(q_dim, 1);
        // One block, a few 32-position blocks, and 16 longer blocks with a short last one.
        for (pos, slots, window, cap) in [
            (5, 6, None, None),
            (100, 101, None, Some(1.5)),
            (700, 701, None, None),
            // A sliding window over a ring that wraps inside the visible positions.
            (300, 90, Some(80), Some(2.0)),
        ] {
            (s.window, s.softcap) = (window, cap);
            let keys = noise(slots * kv_dim, 2);
            let values = noise(slots * kv_dim, 3);
            let ring = KvRing {
                keys: &keys,
                values: &values,
                slots,
            };
            let want = reference(&s, &q, &keys, &values, slots, pos);
            let mut out = vec![0.0; q_dim];
            let mut scratch = DecodeScratch::with_capacity(s.n_heads, s.head_dim, pos + 1);
            s.run(&q, ring, pos, &mut out, &mut scratch).unwrap();
            for (i, (got, want)) in out.iter().zip(&want).enumerate() {
                assert!(
                    (f64::from(*got) - want).abs() < 1e-5,
                    "pos {pos} value {i}: {got} vs {want}"
                );
            }
            // Blocks computed in two calls, the second first, combine to the same bits.
            let blocks = s.blocks(pos);
            let (plen, slen) = (s.partial_len(), s.block_scores_len(pos));
            let cut = blocks / 2;
            let mut partials = vec![f32::NAN; blocks * plen];
            let mut scores = vec![f32::NAN; blocks * slen];
            let (p0, p1) = partials.split_at_mut(cut * plen);
            let (s0, s1) = scores.split_at_mut(cut * slen);
            s.attend_blocks(&q, ring, pos, cut..blocks, s1, p1).unwrap();
            s.attend_blocks(&q, ring, pos, 0..cut, s0, p0).unwrap();
            let mut split = vec![0.0; q_dim];
            s.combine(&mut partials, &mut split).unwrap();
            assert!(
                out.iter()
                    .zip(&split)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
            );
        }
    }

    #[test]
    fn short_buffers_and_blocks_past_the_query_are_errors() {
        let s = spec(None);
        let (keys, q) = ([0.0f32; 8], [0.0f32; 4]);
        let ring = KvRing {
            keys: &keys,
            values: &keys,
            slots: 4,
        };
        let (plen, slen) = (s.partial_len(), s.block_scores_len(3));
        let (mut scores, mut partials) = (vec![0.0; slen], vec![0.0; plen]);
        assert!(
            s.attend_blocks(&q, ring, 3, 0..2, &mut scores, &mut partials)
                .is_err()
        );
        assert!(
            s.attend_blocks(&q, ring, 3, 0..1, &mut scores[..1], &mut partials)
                .is_err()
        );
        assert!(s.combine(&mut partials[..plen - 1], &mut [0.0; 4]).is_err());
        assert!(s.combine(&mut partials, &mut [0.0; 3]).is_err());
        let short = KvRing { slots: 5, ..ring };
        assert!(
            s.attend_blocks(&q, short, 3, 0..1, &mut scores, &mut partials)
                .is_err()
        );
    }
}
