//! Row reductions: sum, max, mean and variance of each row of a row-major matrix.
//!
//! Sums run in `4 * LANES` independent partial sums (pairwise across lanes at the
//! end), so results differ from a sequential sum by rounding only; the order is
//! fixed per ISA, so a given ISA is deterministic.

use core::ops::Range;

use rml_core::{Error, Result};

use crate::elementwise::check_rows;
use crate::simd::{Simd, dispatch, load_tail};

/// A reduction over the last axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Sum of the row (0 for an empty row).
    Sum,
    /// Maximum of the row, NaN if any element is NaN (`-inf` for an empty row).
    Max,
    /// Mean of the row (NaN for an empty row).
    Mean,
    /// Population variance `mean((x - mean)^2)` (two passes; NaN for an empty row).
    Variance,
}

impl ReduceOp {
    /// Every reduction.
    pub const ALL: [ReduceOp; 4] = [
        ReduceOp::Sum,
        ReduceOp::Max,
        ReduceOp::Mean,
        ReduceOp::Variance,
    ];

    /// Lower-case name.
    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Mean => "mean",
            ReduceOp::Variance => "variance",
        }
    }
}

/// Sum of `f(x[i])` over a row, with four vector accumulators.
#[inline(always)]
pub(crate) fn row_sum_map<V: Simd>(x: &[f32], f: impl Fn(V) -> V) -> f32 {
    let l = V::LANES;
    let zero = V::splat(0.0);
    let mut acc = [zero; 4];
    let big = x.len() - x.len() % (4 * l);
    for c in x[..big].chunks_exact(4 * l) {
        for (k, a) in acc.iter_mut().enumerate() {
            *a = a.add(f(V::load(&c[k * l..])));
        }
    }
    let rest = &x[big..];
    let main = rest.len() - rest.len() % l;
    for c in rest[..main].chunks_exact(l) {
        acc[0] = acc[0].add(f(V::load(c)));
    }
    if main < rest.len() {
        // The padding lanes must contribute 0 after `f`: mask them out.
        let t = &rest[main..];
        let mut mask = [0.0f32; crate::simd::MAX_LANES];
        mask[..t.len()].fill(1.0);
        let v = f(load_tail::<V>(t, 0.0));
        let keep = V::load(&mask).eq(V::splat(1.0));
        acc[1] = acc[1].add(V::select(keep, v, zero));
    }
    acc[0].add(acc[1]).add(acc[2].add(acc[3])).reduce_sum()
}

/// Maximum of a row (NaN-propagating; `-inf` when empty).
#[inline(always)]
pub(crate) fn row_max<V: Simd>(x: &[f32]) -> f32 {
    let l = V::LANES;
    let mut acc = [V::splat(f32::NEG_INFINITY); 4];
    let big = x.len() - x.len() % (4 * l);
    for c in x[..big].chunks_exact(4 * l) {
        for (k, a) in acc.iter_mut().enumerate() {
            *a = a.max(V::load(&c[k * l..]));
        }
    }
    let rest = &x[big..];
    let main = rest.len() - rest.len() % l;
    for c in rest[..main].chunks_exact(l) {
        acc[0] = acc[0].max(V::load(c));
    }
    if main < rest.len() {
        acc[1] = acc[1].max(load_tail::<V>(&rest[main..], f32::NEG_INFINITY));
    }
    acc[0].max(acc[1]).max(acc[2].max(acc[3])).reduce_max()
}

#[inline(always)]
pub(crate) fn row_mean_var<V: Simd>(x: &[f32]) -> (f32, f32) {
    let n = x.len() as f32;
    let mean = row_sum_map::<V>(
        x,
        #[inline(always)]
        |v| v,
    ) / n;
    let m = V::splat(mean);
    let var = row_sum_map::<V>(
        x,
        #[inline(always)]
        |v| {
            let d = v.sub(m);
            d.mul(d)
        },
    ) / n;
    (mean, var)
}

#[inline(always)]
fn reduce_v<V: Simd>(op: ReduceOp, x: &[f32]) -> f32 {
    match op {
        ReduceOp::Sum => row_sum_map::<V>(
            x,
            #[inline(always)]
            |v| v,
        ),
        ReduceOp::Max => row_max::<V>(x),
        ReduceOp::Mean => {
            row_sum_map::<V>(
                x,
                #[inline(always)]
                |v| v,
            ) / x.len() as f32
        }
        ReduceOp::Variance => row_mean_var::<V>(x).1,
    }
}

/// `out[i] = op(row rows.start + i)` for a row-major matrix `x` of `cols` columns.
///
/// `x` must hold at least `rows.end * cols` values ([`Error::BufferTooSmall`]) and
/// `out` exactly `rows.len()` ([`Error::LengthMismatch`]).
pub fn reduce_rows(
    op: ReduceOp,
    x: &[f32],
    cols: usize,
    rows: Range<usize>,
    out: &mut [f32],
) -> Result<()> {
    let (first, count) = check_rows(x.len(), cols, &rows)?;
    if out.len() != rows.len() {
        return Err(Error::LengthMismatch {
            expected: rows.len(),
            got: out.len(),
        });
    }
    let x = &x[first..first + count];
    dispatch!(|V| {
        if cols == 0 {
            out.fill(reduce_v::<V>(op, &[]));
        } else {
            for (o, row) in out.iter_mut().zip(x.chunks_exact(cols)) {
                *o = reduce_v::<V>(op, row);
            }
        }
    });
    Ok(())
}

/// `Ok` when `cols` is positive and `x` holds exactly `rows` rows of `cols` values
/// ([`Error::LengthMismatch`] otherwise).
fn check_whole_rows(x: &[f32], cols: usize, rows: usize) -> Result<()> {
    let expected = rows.saturating_mul(cols);
    if cols == 0 || x.len() != expected {
        return Err(Error::LengthMismatch {
            expected,
            got: x.len(),
        });
    }
    Ok(())
}

/// `out[j]` = `[mean, variance]` of row `j` of `x` (`cols` values) in f64, two
/// passes as rml-core's normalizations take them: the mean is the in-order f64 sum
/// divided by `cols`, the variance the in-order f64 sum of `(v − mean)²` divided
/// by `cols`, so the bits equal rml-core's whatever the ISA (four rows side by
/// side, [`Simd::sum4_rows_f64`](crate::simd::Simd) and `sum4_sq_dev_rows_f64`).
///
/// `cols` must be positive and `x` hold exactly `out.len() * cols` values
/// ([`Error::LengthMismatch`]).
pub fn moments_rows_f64(x: &[f32], cols: usize, out: &mut [[f64; 2]]) -> Result<()> {
    check_whole_rows(x, cols, out.len())?;
    let count = cols as f64;
    dispatch!(|V| {
        for (block, rows) in out.chunks_mut(4).zip(x.chunks(4 * cols)) {
            if let Ok(block) = <&mut [[f64; 2]; 4]>::try_from(&mut *block) {
                let means = V::sum4_rows_f64(rows, cols).map(|sum| sum / count);
                let squares = V::sum4_sq_dev_rows_f64(rows, cols, means);
                for ((o, mean), square) in block.iter_mut().zip(means).zip(squares) {
                    *o = [mean, square / count];
                }
            } else {
                for (o, row) in block.iter_mut().zip(rows.chunks_exact(cols)) {
                    let (mean, var) = rml_core::ops::norm::moments(row, 0..cols);
                    *o = [mean, var];
                }
            }
        }
    });
    Ok(())
}

/// `out[j]` = the f64 sum of row `j` of `x` (`cols` values), adding its values in
/// order from `-0.0` and rounding to f32 once (divided by `cols` first when
/// `mean`): the bits of rml-core's `reduce_sum`/`reduce_mean` over a last axis,
/// four rows side by side ([`Simd::sum4_rows_f64`](crate::simd::Simd)).
///
/// `cols` must be positive and `x` hold exactly `out.len() * cols` values
/// ([`Error::LengthMismatch`]).
pub fn sum_rows_f64(x: &[f32], cols: usize, mean: bool, out: &mut [f32]) -> Result<()> {
    check_whole_rows(x, cols, out.len())?;
    let finish = |sum: f64| if mean { sum / cols as f64 } else { sum } as f32;
    dispatch!(|V| {
        for (block, rows) in out.chunks_mut(4).zip(x.chunks(4 * cols)) {
            if block.len() == 4 {
                for (o, sum) in block.iter_mut().zip(V::sum4_rows_f64(rows, cols)) {
                    *o = finish(sum);
                }
            } else {
                for (o, row) in block.iter_mut().zip(rows.chunks_exact(cols)) {
                    *o = finish(row.iter().map(|&v| f64::from(v)).sum());
                }
            }
        }
    });
    Ok(())
}
