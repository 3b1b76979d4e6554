//! Decode attention streamed over a row-major key/value cache: the scores of a
//! query's heads against each cached row ([`attention_scores`]) and the
//! probability-weighted sum of the value rows ([`attention_values`]).
//!
//! A cached row holds every key/value head of one position side by side. Both
//! kernels read each row front to back once for all the query heads that share its
//! heads (a grouped-query group), so the cache streams sequentially, page after
//! page. A GEMV per query head instead reads one head's slice of every row: at the
//! row stride that touches a new 4 KiB page per row, which the hardware prefetchers
//! do not follow, and reads each slice once per query head of the group.
//!
//! Both take the query heads of a group two at a time, so each loaded key or value
//! vector serves two heads. Scores go one row at a time with two partial sums per
//! head (four independent FMA chains; blocks of four rows were faster from L2 but
//! slower streaming from memory); value sums take four rows at a time, so each
//! output vector (which stays in L1) is loaded and stored once per four rows. Keys
//! and values may be f32, f16 or bf16 (widened while loaded); accumulation is f32.

use rml_core::{DType, Error, Result};

use crate::gemm::Weight;
use crate::simd::{Simd, dispatch};

/// The heads one call covers: `kv_heads · group` query heads, query head `h`
/// reading key/value head `h / group`.
#[derive(Clone, Copy, Debug)]
pub struct HeadGroups {
    /// Key/value heads (side by side at the start of each cached row).
    pub kv_heads: usize,
    /// Query heads per key/value head.
    pub group: usize,
    /// Values per head.
    pub head_dim: usize,
}

/// `rows` cached rows: row `r` starts at `data[r · stride]` and holds
/// `kv_heads · head_dim` values (the heads of a [`HeadGroups`]).
#[derive(Clone, Copy, Debug)]
pub struct CachedRows<'a, T> {
    /// The rows.
    pub data: &'a [T],
    /// Rows to read.
    pub rows: usize,
    /// Distance between the starts of consecutive rows, in elements.
    pub stride: usize,
}

impl HeadGroups {
    fn heads(&self) -> usize {
        self.kv_heads * self.group
    }

    /// Checks the rows, a per-head operand of `heads · head_dim` values (`what`)
    /// and a `heads × rows` matrix of leading dimension `ld` (`table`).
    fn check<T>(
        &self,
        rows: &CachedRows<'_, T>,
        heads_op: (usize, &'static str),
        table: (usize, usize, &'static str),
    ) -> Result<()> {
        let bad = |what| Err(Error::InvalidArgument(what));
        let heads = self.kv_heads.checked_mul(self.group);
        let width = self.kv_heads.checked_mul(self.head_dim);
        let (Some(heads), Some(width)) = (heads, width) else {
            return bad("attention: head counts overflow");
        };
        if heads_op.0 < heads.saturating_mul(self.head_dim) {
            return bad(heads_op.1);
        }
        if rows.rows == 0 || heads == 0 || self.head_dim == 0 {
            return Ok(());
        }
        if rows.rows > 1 && rows.stride < width {
            return bad("attention: row stride shorter than the heads of a row");
        }
        let need = (rows.rows - 1)
            .checked_mul(rows.stride)
            .and_then(|n| n.checked_add(width));
        if need.is_none_or(|n| rows.data.len() < n) {
            return bad("attention: cached rows shorter than rows x stride");
        }
        let (len, ld, what) = table;
        let need = (heads - 1)
            .checked_mul(ld)
            .and_then(|n| n.checked_add(rows.rows));
        if ld < rows.rows || need.is_none_or(|n| len < n) {
            return bad(what);
        }
        Ok(())
    }
}

/// An element of cached rows: loads `V::LANES` of them widened to f32.
trait Row: bytemuck::Pod {
    fn load<V: Simd>(s: &[Self]) -> V;
}

impl Row for f32 {
    #[inline(always)]
    fn load<V: Simd>(s: &[f32]) -> V {
        V::load(s)
    }
}

impl Row for half::f16 {
    #[inline(always)]
    fn load<V: Simd>(s: &[half::f16]) -> V {
        V::load_f16(bytemuck::cast_slice(s))
    }
}

impl Row for half::bf16 {
    #[inline(always)]
    fn load<V: Simd>(s: &[half::bf16]) -> V {
        V::load_bf16(bytemuck::cast_slice(s))
    }
}

fn cast<T: Weight, R: Row>(rows: CachedRows<'_, T>) -> CachedRows<'_, R> {
    CachedRows {
        data: bytemuck::cast_slice(rows.data),
        rows: rows.rows,
        stride: rows.stride,
    }
}

/// Runs `$body` with `$R` the [`Row`] type of the cache element `$T` (a [`Weight`]).
macro_rules! with_row_type {
    ($T:ty, |$R:ident| $body:expr) => {
        match <$T as Weight>::DTYPE {
            DType::F32 => {
                type $R = f32;
                $body
            }
            DType::F16 => {
                type $R = half::f16;
                $body
            }
            _ => {
                type $R = half::bf16;
                $body
            }
        }
    };
}

/// Runs `$body` with `$V` the active ISA's vector when `head_dim` is a multiple of
/// its lanes, else the one-lane vector.
macro_rules! with_lanes {
    ($hd:expr, |$V:ident| $body:expr) => {
        dispatch!(|W| if $hd.is_multiple_of(W::LANES) {
            type $V = W;
            $body
        } else {
            type $V = crate::simd::scalar::F32x1;
            $body
        })
    };
}

/// Scores of the query heads against the cached keys:
/// `scores[h·ld + r] = scale · q[h·head_dim..][..head_dim] · key_r[(h / group)·head_dim..][..head_dim]`
/// for every query head `h` of `heads` and row `r` of `keys`. Summation order is
/// fixed per ISA (vector partial sums, then their lanes).
pub fn attention_scores<T: Weight>(
    scale: f32,
    q: &[f32],
    keys: CachedRows<'_, T>,
    heads: HeadGroups,
    scores: &mut [f32],
    ld: usize,
) -> Result<()> {
    heads.check(
        &keys,
        (q.len(), "attention: query shorter than heads x head_dim"),
        (
            scores.len(),
            ld,
            "attention: scores shorter than heads x ld",
        ),
    )?;
    if keys.rows == 0 || heads.heads() == 0 || heads.head_dim == 0 {
        return Ok(());
    }
    with_row_type!(T, |R| scores_of::<R>(
        scale,
        q,
        cast(keys),
        heads,
        scores,
        ld
    ));
    Ok(())
}

/// Probability-weighted sums of the cached values:
/// `out[h·head_dim + c] (+)= Σ_r probs[h·ld + r] · value_r[(h / group)·head_dim + c]`
/// for every query head `h` of `heads`; `accumulate` adds to `out`, otherwise `out`
/// is overwritten.
pub fn attention_values<T: Weight>(
    probs: &[f32],
    ld: usize,
    values: CachedRows<'_, T>,
    heads: HeadGroups,
    out: &mut [f32],
    accumulate: bool,
) -> Result<()> {
    heads.check(
        &values,
        (out.len(), "attention: output shorter than heads x head_dim"),
        (
            probs.len(),
            ld,
            "attention: probabilities shorter than heads x ld",
        ),
    )?;
    let out = &mut out[..heads.heads() * heads.head_dim];
    if !accumulate {
        out.fill(0.0);
    }
    if values.rows == 0 || out.is_empty() {
        return Ok(());
    }
    with_row_type!(T, |R| values_of::<R>(probs, ld, cast(values), heads, out));
    Ok(())
}

fn scores_of<R: Row>(
    scale: f32,
    q: &[f32],
    keys: CachedRows<'_, R>,
    g: HeadGroups,
    scores: &mut [f32],
    ld: usize,
) {
    with_lanes!(g.head_dim, |V| scores_rows::<V, R>(
        scale, q, keys, g, scores, ld
    ))
}

#[inline(always)]
fn scores_rows<V: Simd, R: Row>(
    scale: f32,
    q: &[f32],
    keys: CachedRows<'_, R>,
    g: HeadGroups,
    scores: &mut [f32],
    ld: usize,
) {
    for r in 0..keys.rows {
        score_row::<V, R>(scale, q, keys, r, g, scores, ld);
    }
}

/// Value rows taken at a time: each output vector loaded and stored once serves
/// this many rows.
const BLOCK: usize = 4;

/// The rows `r..r + N` of `data`, each `width` long.
#[inline(always)]
fn block<R: Row, const N: usize>(rows: CachedRows<'_, R>, r: usize, width: usize) -> [&[R]; N] {
    core::array::from_fn(|i| &rows.data[(r + i) * rows.stride..][..width])
}

/// The query heads of key/value head `j` as `(first, pair)`: two at a time
/// (`pair`), and a last one alone when `group` is odd. (Plain loops over this, not
/// closures, keep everything inside the target-feature function: see `dispatch!`.)
#[inline(always)]
fn head_pairs(g: HeadGroups, j: usize) -> impl Iterator<Item = (usize, bool)> {
    let (start, end) = (j * g.group, (j + 1) * g.group);
    (start..end).step_by(2).map(move |h| (h, h + 2 <= end))
}

/// Scores of row `r` for every query head.
#[inline(always)]
fn score_row<V: Simd, R: Row>(
    scale: f32,
    q: &[f32],
    keys: CachedRows<'_, R>,
    r: usize,
    g: HeadGroups,
    scores: &mut [f32],
    ld: usize,
) {
    let hd = g.head_dim;
    let [row] = block::<R, 1>(keys, r, g.kv_heads * hd);
    for j in 0..g.kv_heads {
        let k = &row[j * hd..][..hd];
        for (h, pair) in head_pairs(g, j) {
            if pair {
                let d = dots::<V, R, 2, 2>(k, q, h, hd);
                put_scores(scale, d, h, r, scores, ld);
            } else {
                let d = dots::<V, R, 1, 4>(k, q, h, hd);
                put_scores(scale, d, h, r, scores, ld);
            }
        }
    }
}

/// Stores `scale ·` the dot products `d` of query heads `h..h + M` with row `r`.
#[inline(always)]
fn put_scores<const M: usize>(
    scale: f32,
    d: [f32; M],
    h: usize,
    r: usize,
    scores: &mut [f32],
    ld: usize,
) {
    for (m, d) in d.into_iter().enumerate() {
        scores[(h + m) * ld + r] = scale * d;
    }
}

/// The dot products of query heads `h..h + M` with the key slice `k`: `M · P`
/// independent accumulators (`P` partial sums over alternating vectors of the
/// head), each key vector loaded once for the `M` heads.
#[inline(always)]
fn dots<V: Simd, R: Row, const M: usize, const P: usize>(
    k: &[R],
    q: &[f32],
    h: usize,
    hd: usize,
) -> [f32; M] {
    let qs: [&[f32]; M] = core::array::from_fn(|m| &q[(h + m) * hd..][..hd]);
    let mut acc = [[V::splat(0.0); P]; M];
    let l = V::LANES;
    let mut c = 0;
    while c + P * l <= hd {
        for p in 0..P {
            let kv = R::load::<V>(&k[c + p * l..]);
            for m in 0..M {
                acc[m][p] = V::load(&qs[m][c + p * l..]).mul_add(kv, acc[m][p]);
            }
        }
        c += P * l;
    }
    while c < hd {
        let kv = R::load::<V>(&k[c..]);
        for m in 0..M {
            acc[m][0] = V::load(&qs[m][c..]).mul_add(kv, acc[m][0]);
        }
        c += l;
    }
    core::array::from_fn(|m| {
        let sum = acc[m][1..].iter().fold(acc[m][0], |s, a| s.add(*a));
        sum.reduce_sum()
    })
}

fn values_of<R: Row>(
    probs: &[f32],
    ld: usize,
    values: CachedRows<'_, R>,
    g: HeadGroups,
    out: &mut [f32],
) {
    with_lanes!(g.head_dim, |V| {
        let mut r = 0;
        while r + BLOCK <= values.rows {
            add_block::<V, R, BLOCK>(probs, ld, values, r, g, out);
            r += BLOCK;
        }
        while r < values.rows {
            add_block::<V, R, 1>(probs, ld, values, r, g, out);
            r += 1;
        }
    })
}

/// Adds rows `r..r + N` of `values`, weighted by their probabilities, into every
/// query head's output.
#[inline(always)]
fn add_block<V: Simd, R: Row, const N: usize>(
    probs: &[f32],
    ld: usize,
    values: CachedRows<'_, R>,
    r: usize,
    g: HeadGroups,
    out: &mut [f32],
) {
    let hd = g.head_dim;
    let rows = block::<R, N>(values, r, g.kv_heads * hd);
    for j in 0..g.kv_heads {
        let v: [&[R]; N] = core::array::from_fn(|i| &rows[i][j * hd..][..hd]);
        for (h, pair) in head_pairs(g, j) {
            if pair {
                add_heads::<V, R, N, 2>(probs, ld, r, &v, h, hd, out);
            } else {
                add_heads::<V, R, N, 1>(probs, ld, r, &v, h, hd, out);
            }
        }
    }
}

/// `out` of query heads `h..h + M` += the value slices `v` of rows `r..r + N`
/// weighted by their probabilities: each value vector loaded once for the `M`
/// heads, each output vector loaded and stored once for the `N` rows.
#[inline(always)]
fn add_heads<V: Simd, R: Row, const N: usize, const M: usize>(
    probs: &[f32],
    ld: usize,
    r: usize,
    v: &[&[R]; N],
    h: usize,
    hd: usize,
    out: &mut [f32],
) {
    let p: [[V; M]; N] =
        core::array::from_fn(|i| core::array::from_fn(|m| V::splat(probs[(h + m) * ld + r + i])));
    let o = &mut out[h * hd..][..M * hd];
    for c in (0..hd).step_by(V::LANES) {
        let mut a: [V; M] = core::array::from_fn(|m| V::load(&o[m * hd + c..]));
        for i in 0..N {
            let x = R::load::<V>(&v[i][c..]);
            for m in 0..M {
                a[m] = p[i][m].mul_add(x, a[m]);
            }
        }
        for (m, a) in a.into_iter().enumerate() {
            a.store(&mut o[m * hd + c..]);
        }
    }
}

#[cfg(all(test, feature = "std"))]
mod tests {
    use super::*;
    use crate::testing::{Rng, for_each_isa, test_len};

    fn random(n: usize, seed: u64, lo: f32) -> Vec<f32> {
        let mut v = vec![0.0; n];
        Rng::new(seed).fill(&mut v, lo, 1.0);
        v
    }

    /// Scores and value sums of `heads` against `rows` cached rows (stride `stride`,
    /// element type `T`), by the kernels and in f64 from the formulas in the docs.
    fn check<T: Weight>(g: HeadGroups, rows: usize, stride: usize, from: fn(f32) -> T) {
        let (hd, heads) = (g.head_dim, g.heads());
        let data: Vec<T> = random(rows * stride + 3, 1, -1.0)
            .into_iter()
            .map(from)
            .collect();
        let cached = |data| CachedRows { data, rows, stride };
        let q = random(heads * hd, 2, -1.0);
        let ld = rows + 3;
        let mut scores = vec![f32::NAN; heads * ld];
        attention_scores(0.5, &q, cached(&data[3..]), g, &mut scores, ld).unwrap();
        let key = |r: usize, h: usize, c: usize| {
            data[3 + r * stride + h / g.group * hd + c].to_f32() as f64
        };
        for h in 0..heads {
            for r in 0..rows {
                let want: f64 = 0.5
                    * (0..hd)
                        .map(|c| q[h * hd + c] as f64 * key(r, h, c))
                        .sum::<f64>();
                let got = scores[h * ld + r] as f64;
                assert!(
                    (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                    "score h{h} r{r}: {got} vs {want}"
                );
            }
        }
        let probs = random(heads * ld, 3, 0.0);
        let mut out = random(heads * hd, 4, -1.0);
        let before = out.clone();
        for accumulate in [true, false] {
            out.copy_from_slice(&before);
            attention_values(&probs, ld, cached(&data[3..]), g, &mut out, accumulate).unwrap();
            for h in 0..heads {
                for c in 0..hd {
                    let base = if accumulate {
                        before[h * hd + c] as f64
                    } else {
                        0.0
                    };
                    let want = base
                        + (0..rows)
                            .map(|r| probs[h * ld + r] as f64 * key(r, h, c))
                            .sum::<f64>();
                    let got = out[h * hd + c] as f64;
                    assert!(
                        (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
                        "value h{h} c{c}: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn kernels_match_the_formulas_on_every_isa_and_element_type() {
        // Qwen3's heads natively; under Miri a smaller group of the same layout.
        let (kv, hd, rows) = (test_len(8, 2), test_len(128, 16), test_len(37, 5));
        for_each_isa(|_| {
            for (g, rows, stride) in [
                (
                    HeadGroups {
                        kv_heads: kv,
                        group: 2,
                        head_dim: hd,
                    },
                    rows,
                    kv * hd,
                ),
                (
                    HeadGroups {
                        kv_heads: 3,
                        group: 3,
                        head_dim: 24,
                    },
                    9,
                    80,
                ),
                (
                    HeadGroups {
                        kv_heads: 2,
                        group: 1,
                        head_dim: 5,
                    },
                    6,
                    11,
                ),
                (
                    HeadGroups {
                        kv_heads: 1,
                        group: 4,
                        head_dim: 16,
                    },
                    1,
                    16,
                ),
            ] {
                check(g, rows, stride, |v| v);
                check(g, rows, stride, half::f16::from_f32);
                check(g, rows, stride, half::bf16::from_f32);
            }
        });
    }

    #[test]
    fn short_operands_are_errors() {
        let g = HeadGroups {
            kv_heads: 2,
            group: 2,
            head_dim: 4,
        };
        let data = [0.0f32; 8 * 3];
        let rows = CachedRows {
            data: &data,
            rows: 3,
            stride: 8,
        };
        let mut s = [0.0f32; 4 * 3];
        assert!(attention_scores(1.0, &[0.0; 15], rows, g, &mut s, 3).is_err());
        assert!(attention_scores(1.0, &[0.0; 16], rows, g, &mut s[..11], 3).is_err());
        assert!(attention_scores(1.0, &[0.0; 16], rows, g, &mut s, 2).is_err());
        let short = CachedRows {
            data: &data[..23],
            ..rows
        };
        assert!(attention_scores(1.0, &[0.0; 16], short, g, &mut s, 3).is_err());
        let narrow = CachedRows { stride: 7, ..rows };
        assert!(attention_values(&s, 3, narrow, g, &mut [0.0; 16], false).is_err());
        assert!(attention_values(&s, 3, rows, g, &mut [0.0; 15], false).is_err());
        assert!(attention_scores(1.0, &[0.0; 16], rows, g, &mut s, 3).is_ok());
    }
}
