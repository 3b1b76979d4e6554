//! Dim-level rules: agreement of two dims, NumPy broadcasting, and the switch to
//! rml-core's concrete helpers when every dim is fixed.

use rml_core::{Shape, broadcast_shapes};

use super::{Arg, R};
use crate::graph::dim::Dim;

/// Fails when two dims are both fixed and differ.
pub(super) fn agree(a: &Dim, b: &Dim, message: impl FnOnce() -> String) -> R<()> {
    match (a.fixed(), b.fixed()) {
        (Some(x), Some(y)) if x != y => Err(message()),
        _ => Ok(()),
    }
}

/// The better-known of two dims that must be equal (fixed over symbolic).
pub(super) fn unify(a: &Dim, b: &Dim, message: impl FnOnce() -> String) -> R<Dim> {
    agree(a, b, message)?;
    Ok(match (a, b) {
        (Dim::Fixed(_), _) => a.clone(),
        (_, Dim::Fixed(_)) => b.clone(),
        (Dim::Unknown, _) => b.clone(),
        _ => a.clone(),
    })
}

/// Fixed dims as an rml-core shape, or `None` when any is symbolic.
pub(super) fn concrete(dims: &[Dim]) -> Option<Shape> {
    let sizes: Option<Vec<usize>> = dims.iter().map(Dim::fixed).collect();
    Shape::new(&sizes?).ok()
}

/// An rml-core shape as fixed dims.
pub(super) fn dims_of(shape: &Shape) -> Vec<Dim> {
    shape.dims().iter().map(|&d| Dim::Fixed(d)).collect()
}

/// NumPy broadcasting of several inputs' shapes.
pub(super) fn broadcast(args: &[Arg<'_>]) -> R<Vec<Dim>> {
    args.iter().try_fold(Vec::new(), |acc, a| {
        broadcast2(&acc, &a.ty.shape).map_err(|()| {
            let shapes: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            format!("{} do not broadcast", shapes.join(" and "))
        })
    })
}

/// NumPy broadcasting of two dim lists; rml-core's rule when both are fixed.
pub(super) fn broadcast2(a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>, ()> {
    if let (Some(x), Some(y)) = (concrete(a), concrete(b)) {
        return broadcast_shapes(&x, &y)
            .map(|s| dims_of(&s))
            .map_err(|_| ());
    }
    let rank = a.len().max(b.len());
    let at = |d: &[Dim], i: usize| {
        (i + d.len())
            .checked_sub(rank)
            .map_or(Dim::Fixed(1), |j| d[j].clone())
    };
    (0..rank)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y => Ok(x),
            (Dim::Fixed(1), y) => Ok(y),
            (x, Dim::Fixed(1)) => Ok(x),
            (Dim::Fixed(_), Dim::Fixed(_)) => Err(()),
            (x @ Dim::Fixed(_), _) | (_, x @ Dim::Fixed(_)) => Ok(x),
            _ => Ok(Dim::Unknown),
        })
        .collect()
}
