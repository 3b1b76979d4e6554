//! Blocked causal attention for a prompt (many new positions at once), on the
//! packed `rml-kernels` f32 GEMM: per query head and block of [`QUERY_BLOCK`]
//! query rows, `S = scale·Q·Kᵀ` over the keys the block can see, soft-cap, causal
//! (and window) mask with a vectorized row softmax, then `O = P·V`. Only the keys
//! from the block's first visible position to its last query are multiplied, so the
//! work above the diagonal is at most half a block per row. The summation order
//! depends only on the shapes (never on a thread count), so results are
//! deterministic; they agree with [`AttentionSpec::run`] (one query row at a time on
//! the GEMV kernels, used for decode) up to rounding.

use rml_kernels::gemm::{Epilogue, MatMut, MatRef, Weight, gemm_ex, gemm_scratch_len};
use rml_kernels::softmax::softmax_rows_inplace;

use crate::attention::{AttentionSpec, KvRing};
use crate::error::{Error, Result};
use crate::kv_cache::KvElement;
use crate::ops::softcap;

/// Query rows per block: a block's scores are `QUERY_BLOCK × keys` values.
pub const QUERY_BLOCK: usize = 64;

/// Scratch of [`run`]: one block's scores and the GEMM's packing buffers.
#[derive(Clone, Debug, Default)]
pub struct PrefillScratch {
    scores: Vec<f32>,
    gemm: Vec<f32>,
}

impl PrefillScratch {
    /// Room for calls of up to `max_tokens` rows with up to `max_positions`
    /// positions in the cache, heads `head_dim` wide (a call never grows it then).
    pub fn with_capacity(max_tokens: usize, max_positions: usize, head_dim: usize) -> Self {
        let (qb, n) = (max_tokens.min(QUERY_BLOCK), max_positions);
        PrefillScratch {
            scores: Vec::with_capacity(qb * n),
            gemm: Vec::with_capacity(gemm_len(qb, n, head_dim)),
        }
    }
}

/// GEMM scratch for one block: `qb × head_dim` by `head_dim × n`, then `qb × n` by
/// `n × head_dim`.
fn gemm_len(qb: usize, n: usize, head_dim: usize) -> usize {
    gemm_scratch_len(qb, n, head_dim).max(gemm_scratch_len(qb, head_dim, n))
}

/// The cache rows holding positions `lo..lo + n`: one run, or two when the ring
/// wraps. Each entry is `(first slot, length)`.
pub(crate) fn segments(lo: usize, n: usize, slots: usize) -> [(usize, usize); 2] {
    let s0 = lo % slots;
    let first = n.min(slots - s0);
    [(s0, first), (0, n - first)]
}

/// [`AttentionSpec::run`] for a block of queries: `q` is `rows × n_heads·head_dim`
/// at positions `start..start + rows`, every visible position is in `kv`, `out` is
/// shaped like `q`.
pub fn run<T: KvElement + Weight>(
    spec: &AttentionSpec,
    q: &[f32],
    kv: KvRing<'_, T>,
    start: usize,
    out: &mut [f32],
    scratch: &mut PrefillScratch,
) -> Result<()> {
    let hd = spec.head_dim;
    let q_dim = spec.n_heads * hd;
    let group = spec.n_heads / spec.n_kv_heads.max(1);
    let rows = q.len() / q_dim.max(1);
    if out.len() != q.len() || rows * q_dim != q.len() || group == 0 {
        return Err(Error::Input(format!(
            "prefill attention: {} query and {} output values for {} heads of {hd}",
            q.len(),
            out.len(),
            spec.n_heads
        )));
    }
    for h in 0..spec.n_heads {
        for i0 in (0..rows).step_by(QUERY_BLOCK) {
            let bq = (rows - i0).min(QUERY_BLOCK);
            head_block(spec, q, kv, start, h, i0..i0 + bq, out, scratch)?;
        }
    }
    Ok(())
}

/// Attention of query head `h` for query rows `block` (of the call's rows).
#[allow(clippy::too_many_arguments)]
fn head_block<T: KvElement + Weight>(
    spec: &AttentionSpec,
    q: &[f32],
    kv: KvRing<'_, T>,
    start: usize,
    h: usize,
    block: core::ops::Range<usize>,
    out: &mut [f32],
    scratch: &mut PrefillScratch,
) -> Result<()> {
    let ctx = || Error::core("prefill attention");
    let hd = spec.head_dim;
    let (q_dim, kv_dim) = (spec.n_heads * hd, spec.n_kv_heads * hd);
    let kvh = h / (spec.n_heads / spec.n_kv_heads);
    let bq = block.len();
    let lo = spec.first_visible(start + block.start);
    let hi = start + block.end;
    let n = hi - lo;
    scratch.scores.resize(bq * n, 0.0);
    scratch.gemm.resize(gemm_len(bq, n, hd), 0.0);
    let (scores, gemm) = (&mut scratch.scores, &mut scratch.gemm);
    let epi = Epilogue::default();
    let qa = MatRef::new(&q[block.start * q_dim + h * hd..], bq, hd, q_dim, 1).map_err(ctx())?;
    let mut col = 0;
    for (slot, len) in segments(lo, n, kv.slots) {
        if len == 0 {
            continue;
        }
        let keys =
            MatRef::new(&kv.keys[slot * kv_dim + kvh * hd..], len, hd, kv_dim, 1).map_err(ctx())?;
        let s = MatMut::new(&mut scores[col..], bq, len, n, 1).map_err(ctx())?;
        gemm_ex(spec.scale, qa, keys.t(), 0.0, s, &epi, gemm).map_err(ctx())?;
        col += len;
    }
    for (r, row) in scores.chunks_exact_mut(n).enumerate() {
        let pos = start + block.start + r;
        let (first, last) = (spec.first_visible(pos) - lo, pos - lo);
        let seen = &mut row[first..=last];
        if let Some(cap) = spec.softcap {
            softcap(seen, cap);
        }
        softmax_rows_inplace(seen, last + 1 - first).map_err(ctx())?;
        row[..first].fill(0.0);
        row[last + 1..].fill(0.0);
    }
    let mut col = 0;
    for (slot, len) in segments(lo, n, kv.slots) {
        if len == 0 {
            continue;
        }
        let p = MatRef::new(&scores[col..], bq, len, n, 1).map_err(ctx())?;
        let values = MatRef::new(&kv.values[slot * kv_dim + kvh * hd..], len, hd, kv_dim, 1)
            .map_err(ctx())?;
        let o = MatMut::new(&mut out[block.start * q_dim + h * hd..], bq, hd, q_dim, 1)
            .map_err(ctx())?;
        let beta = if col == 0 { 0.0 } else { 1.0 };
        gemm_ex(1.0, p, values, beta, o, &epi, gemm).map_err(ctx())?;
        col += len;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use half::f16;

    use super::*;
    use crate::attention::DecodeScratch;

    /// Deterministic values in [-1, 1).
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    struct Case {
        spec: AttentionSpec,
        rows: usize,
        start: usize,
        slots: usize,
    }

    /// The blocked form against the readable one: the same queries over the same
    /// ring, every output within `tol` of it.
    fn check<T: KvElement + Weight>(c: &Case, tol: f32) {
        let s = &c.spec;
        let (q_dim, kv_dim) = (s.n_heads * s.head_dim, s.n_kv_heads * s.head_dim);
        let q = values(c.rows * q_dim, 1);
        let conv = |v: Vec<f32>| v.into_iter().map(T::from_f32).collect::<Vec<T>>();
        let keys = conv(values(c.slots * kv_dim, 2));
        let vals = conv(values(c.slots * kv_dim, 3));
        let ring = KvRing {
            keys: &keys,
            values: &vals,
            slots: c.slots,
        };
        let mut want = vec![0.0; q.len()];
        let mut decode = DecodeScratch::default();
        s.run(&q, ring, c.start, &mut want, &mut decode).unwrap();
        let mut got = vec![f32::NAN; q.len()];
        let mut scratch = PrefillScratch::default();
        run(s, &q, ring, c.start, &mut got, &mut scratch).unwrap();
        let err = want
            .iter()
            .zip(&got)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f32::max);
        assert!(
            err <= tol,
            "max error {err} for rows {} start {}",
            c.rows,
            c.start
        );
    }

    fn spec(n_heads: usize, n_kv_heads: usize, head_dim: usize) -> AttentionSpec {
        AttentionSpec {
            n_heads,
            n_kv_heads,
            head_dim,
            scale: 1.0 / (head_dim as f32).sqrt(),
            softcap: None,
            window: None,
        }
    }

    #[test]
    fn matches_the_readable_form_for_ragged_blocks_and_offsets() {
        for (rows, start) in [(9, 0), (64, 0), (65, 3), (130, 17), (200, 0)] {
            let case = Case {
                spec: spec(4, 2, 24),
                rows,
                start,
                slots: start + rows,
            };
            check::<f32>(&case, 1e-5);
        }
        let case = Case {
            spec: spec(3, 1, 17),
            rows: 70,
            start: 5,
            slots: 80,
        };
        check::<f32>(&case, 1e-5);
    }

    #[test]
    fn windows_soft_caps_ring_wrap_and_f16_match() {
        let mut s = spec(4, 4, 16);
        s.window = Some(20);
        s.softcap = Some(0.5);
        // A ring of W + rows − 1 slots that wraps inside the call.
        let case = Case {
            spec: s,
            rows: 90,
            start: 45,
            slots: 20 + 90 - 1,
        };
        check::<f32>(&case, 1e-5);
        check::<f16>(&case, 1e-5);
        let case = Case {
            spec: spec(2, 1, 32),
            rows: 100,
            start: 0,
            slots: 100,
        };
        check::<f16>(&case, 1e-5);
    }

    #[test]
    fn a_mismatched_output_is_an_error() {
        let s = spec(2, 1, 4);
        let keys = [0.0f32; 8];
        let ring = KvRing {
            keys: &keys,
            values: &keys,
            slots: 1,
        };
        let mut out = [0.0; 4];
        let err = run(
            &s,
            &[0.0; 8],
            ring,
            0,
            &mut out,
            &mut PrefillScratch::default(),
        );
        assert!(err.is_err());
    }
}
