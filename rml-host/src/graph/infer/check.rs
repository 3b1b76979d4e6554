//! Dtype, rank and axis checks shared by the per-op rules.

use rml_core::DType;
use rml_core::shape::normalize_axis;

use super::dims::agree;
use super::{Arg, R};
use crate::graph::dim::{Dim, show_dims};

/// Fails unless `a` is a floating-point tensor.
pub(super) fn float(a: Arg<'_>) -> R<()> {
    if a.ty.dtype.is_float() {
        Ok(())
    } else {
        Err(format!("{a}: expected a float dtype"))
    }
}

/// Fails unless `a` is float or a signed integer.
pub(super) fn signed(a: Arg<'_>) -> R<()> {
    match a.ty.dtype {
        DType::I64 | DType::I32 | DType::I16 | DType::I8 => Ok(()),
        _ => float(a),
    }
}

/// Fails unless `a` is float or integer (not BOOL).
pub(super) fn numeric(a: Arg<'_>) -> R<()> {
    if a.ty.dtype.is_float() || a.ty.dtype.is_int() {
        Ok(())
    } else {
        Err(format!("{a}: expected a numeric dtype"))
    }
}

/// Fails unless every arg has the first one's dtype.
pub(super) fn same_dtype(args: &[Arg<'_>]) -> R<()> {
    match args.iter().find(|a| a.ty.dtype != args[0].ty.dtype) {
        Some(other) => Err(format!(
            "{other} must have the dtype of {} (insert a cast)",
            args[0]
        )),
        None => Ok(()),
    }
}

/// Fails unless every arg is float with one dtype.
pub(super) fn same_float(args: &[Arg<'_>]) -> R<()> {
    float(args[0])?;
    same_dtype(args)
}

/// The dims of `a`, which must have rank `N`.
pub(super) fn rank_n<const N: usize>(a: Arg<'_>) -> R<[Dim; N]> {
    a.ty.shape
        .clone()
        .try_into()
        .map_err(|_| format!("{a}: expected rank {N}"))
}

/// Resolves attribute `attr`'s axis against `rank`.
pub(super) fn axis_of(axis: isize, rank: usize, attr: &str) -> R<usize> {
    normalize_axis(axis, rank)
        .map_err(|_| format!("attribute {attr:?}: axis {axis} is out of range for rank {rank}"))
}

/// Resolves a list of distinct axes.
pub(super) fn axis_set(axes: &[isize], rank: usize, attr: &str) -> R<Vec<usize>> {
    let mut out = Vec::with_capacity(axes.len());
    for &axis in axes {
        let a = axis_of(axis, rank, attr)?;
        if out.contains(&a) {
            return Err(format!("attribute {attr:?}: axis {a} is listed twice"));
        }
        out.push(a);
    }
    Ok(out)
}

/// Fails unless `a` has exactly `expected` dims (up to symbols).
pub(super) fn expect_dims(a: Arg<'_>, expected: &[Dim]) -> R<()> {
    let mismatch = || format!("{a}: expected shape {}", show_dims(expected));
    if a.ty.shape.len() != expected.len() {
        return Err(mismatch());
    }
    for (d, e) in a.ty.shape.iter().zip(expected) {
        agree(d, e, mismatch)?;
    }
    Ok(())
}
