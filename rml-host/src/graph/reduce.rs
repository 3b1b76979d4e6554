//! Reductions on contiguous f32 data: `reduce_sum/mean/max/min/prod` over one
//! contiguous run of axes, and `global_avg_pool2d`/`global_max_pool2d`, on plain
//! slices in the reference's order and arithmetic (f64 folds for the reductions,
//! rml-core's f32 sum for the global mean), so they equal rml-core bit for bit
//! without a checked multi-index access per element. Outputs split across threads.

use super::op::ReduceKind;
use super::par::{Parallel, for_row_blocks};

/// What one output computes from its group of values.
#[derive(Clone, Copy, Debug)]
pub enum Fold {
    /// A `reduce_*` op, accumulated in f64 (`Variance` is not handled here).
    Reduce(ReduceKind),
    /// `global_avg_pool2d`: an f32 sum divided by the count.
    GlobalAvg,
    /// `global_max_pool2d`: the largest value, NaN if any.
    GlobalMax,
}

/// The input as `[outer, reduced, inner]` when `axes` (negative from the end; `None`
/// = all) name one contiguous run of the axes of `dims`; `None` otherwise (or for an
/// empty axis list, an axis out of range, a repeated axis).
pub fn split(dims: &[usize], axes: Option<&[isize]>) -> Option<[usize; 3]> {
    let rank = dims.len();
    let (first, last) = match axes {
        None => (0, rank.checked_sub(1)?),
        Some(axes) => {
            let mut seen = [false; 8];
            for &a in axes {
                let a = if a < 0 { a + rank as isize } else { a };
                let a = usize::try_from(a).ok().filter(|&a| a < rank.min(8))?;
                if std::mem::replace(&mut seen[a], true) {
                    return None;
                }
            }
            let first = seen.iter().position(|&s| s)?;
            let last = seen.iter().rposition(|&s| s)?;
            if last + 1 - first != axes.len() {
                return None;
            }
            (first, last)
        }
    };
    let product = |d: &[usize]| d.iter().product::<usize>();
    Some([
        product(&dims[..first]),
        product(&dims[first..=last]),
        product(&dims[last + 1..]),
    ])
}

/// Reduces `x` (`[outer, reduced, inner]`) into `out` (`outer · inner` values),
/// output `o · inner + i` folding `x[(o · reduced + r) · inner + i]` over `r` in
/// order; `false` (nothing written) for `Variance`, an empty group or a length
/// mismatch, leaving the node to rml-core.
pub fn reduce(
    fold: Fold,
    x: &[f32],
    [outer, reduced, inner]: [usize; 3],
    out: &mut [f32],
    chunks: usize,
    parallel: Parallel<'_>,
) -> bool {
    let fits = reduced > 0
        && x.len() == outer * reduced * inner
        && out.len() == outer * inner
        && !matches!(fold, Fold::Reduce(ReduceKind::Variance { .. }));
    if !fits {
        return false;
    }
    for_row_blocks(
        out,
        [outer * inner, 1],
        chunks,
        parallel,
        &|range, block| {
            if inner == 1 && sums_rows(fold, &x[range.start * reduced..], reduced, block) {
                return;
            }
            for (j, v) in range.zip(block.iter_mut()) {
                let (o, i) = (j / inner, j % inner);
                let group = x[o * reduced * inner + i..]
                    .iter()
                    .step_by(inner)
                    .take(reduced);
                *v = fold_group(fold, group, reduced);
            }
        },
    );
    true
}

/// `reduce_sum`/`reduce_mean` over the last axis (`inner == 1`): output `j` of
/// `out` from row `x[j · reduced..][..reduced]`, on rml-kernels' f64 row sums
/// (four rows side by side, each added in order from `-0.0`: [`fold_group`]'s
/// bits); `false` (nothing written) for other folds.
fn sums_rows(fold: Fold, x: &[f32], reduced: usize, out: &mut [f32]) -> bool {
    let mean = match fold {
        Fold::Reduce(ReduceKind::Sum) => false,
        Fold::Reduce(ReduceKind::Mean) => true,
        _ => return false,
    };
    let rows = &x[..out.len() * reduced];
    rml_kernels::reduce::sum_rows_f64(rows, reduced, mean, out).is_ok()
}

/// One output of [`reduce`] from its `count` values.
fn fold_group<'a>(fold: Fold, values: impl Iterator<Item = &'a f32>, count: usize) -> f32 {
    if let Fold::GlobalAvg = fold {
        return values.copied().sum::<f32>() / count as f32;
    }
    let wide = values.map(|&v| f64::from(v));
    let value = match fold {
        Fold::Reduce(ReduceKind::Sum) => wide.sum::<f64>(),
        Fold::Reduce(ReduceKind::Mean) => wide.sum::<f64>() / count as f64,
        Fold::Reduce(ReduceKind::Prod) => wide.product::<f64>(),
        Fold::Reduce(ReduceKind::Max) | Fold::GlobalMax => {
            wide.fold(f64::NEG_INFINITY, |m, v| extreme(m, v, v > m))
        }
        Fold::Reduce(ReduceKind::Min) => wide.fold(f64::INFINITY, |m, v| extreme(m, v, v < m)),
        Fold::Reduce(ReduceKind::Variance { .. }) | Fold::GlobalAvg => {
            unreachable!("handled above or refused by reduce")
        }
    };
    value as f32
}

/// One step of a NaN-propagating max/min (rml-core's rule): NaN once either is
/// NaN, else `v` when it is `better`, else `m`.
fn extreme(m: f64, v: f64, better: bool) -> f64 {
    if m.is_nan() || v.is_nan() {
        f64::NAN
    } else if better {
        v
    } else {
        m
    }
}
