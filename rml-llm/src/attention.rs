//! Causal multi-head attention over the KV cache, for a block of new positions
//! (prefill) or one (decode): grouped-query heads, optional sliding window, optional
//! score soft-capping.

use rml_kernels::attention::{CachedRows, HeadGroups, attention_scores, attention_values};
use rml_kernels::gemm::Weight;
use rml_kernels::softmax::softmax_rows_inplace;

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
    /// position present) into `out` (shaped like `q`). `scores` is scratch of at
    /// least `n_heads·(start + rows)` values.
    pub fn run<T: KvElement + Weight>(
        &self,
        q: &[f32],
        kv: KvRing<'_, T>,
        start: usize,
        out: &mut [f32],
        scores: &mut [f32],
    ) -> Result<()> {
        let q_dim = self.n_heads * self.head_dim;
        let rows = q.len() / q_dim;
        for t in 0..rows {
            let (q, out) = (&q[t * q_dim..][..q_dim], &mut out[t * q_dim..][..q_dim]);
            self.run_heads(q, kv, start + t, 0..self.n_kv_heads, out, scores)?;
        }
        Ok(())
    }

    /// Attention of one query row `q` (`n_heads·head_dim`, at position `pos`) for
    /// the query heads of the key/value heads `kv_heads` only, into `out` (those
    /// query heads: `kv_heads.len()·(n_heads / n_kv_heads)·head_dim` values); each
    /// head is computed exactly as by [`AttentionSpec::run`], so a decode step can
    /// split the heads across threads. `scores` is scratch of at least
    /// `kv_heads.len()·(n_heads / n_kv_heads)·(pos + 1)` values (one row per query
    /// head; the softmax runs in place).
    ///
    /// The cache streams row by row through [`attention_scores`] and
    /// [`attention_values`]: each cached row is read once, front to back, for all
    /// the query heads of `kv_heads`.
    pub fn run_heads<'a, T: KvElement + Weight>(
        &self,
        q: &[f32],
        kv: KvRing<'a, T>,
        pos: usize,
        kv_heads: std::ops::Range<usize>,
        out: &mut [f32],
        scores: &mut [f32],
    ) -> Result<()> {
        let (hd, kv_dim) = (self.head_dim, self.n_kv_heads * self.head_dim);
        let group = self.n_heads / self.n_kv_heads;
        let first = self.first_visible(pos);
        let n = pos + 1 - first;
        let heads = HeadGroups {
            kv_heads: kv_heads.len(),
            group,
            head_dim: hd,
        };
        let width = heads.kv_heads * group;
        let ctx = || Error::core("decode attention");
        let (Some(q), Some(probs)) = (
            q.get(kv_heads.start * group * hd..),
            scores.get_mut(..width * n),
        ) else {
            return Err(Error::Input(
                "decode attention: query or scores shorter than the heads".into(),
            ));
        };
        let rows = |data: &'a [T], slot: usize, len: usize| -> Result<CachedRows<'a, T>> {
            let data = data
                .get(slot * kv_dim + kv_heads.start * hd..)
                .ok_or_else(|| {
                    Error::Input("decode attention: KV ring shorter than its slots".into())
                })?;
            Ok(CachedRows {
                data,
                rows: len,
                stride: kv_dim,
            })
        };
        let mut col = 0;
        for (slot, len) in segments(first, n, kv.slots) {
            if len > 0 {
                let keys = rows(kv.keys, slot, len)?;
                attention_scores(self.scale, q, keys, heads, &mut probs[col..], n).map_err(ctx())?;
                col += len;
            }
        }
        if let Some(cap) = self.softcap {
            softcap(probs, cap);
        }
        softmax_rows_inplace(probs, n).map_err(ctx())?;
        let mut col = 0;
        for (slot, len) in segments(first, n, kv.slots) {
            if len > 0 {
                let values = rows(kv.values, slot, len)?;
                attention_values(&probs[col..], n, values, heads, out, col > 0).map_err(ctx())?;
                col += len;
            }
        }
        Ok(())
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
        let mut scratch = [0.0; 6];
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
}
