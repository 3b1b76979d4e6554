//! Shape-changing ops: reshape, expand, concat, split, slice, pad and the
//! reduced-axes helpers.

use rml_core::ops::layout::resolve_slice;

use super::check::{axis_of, same_dtype};
use super::dims::{agree, unify};
use super::{Arg, R, ty};
use crate::graph::dim::{Dim, show_dims};
use crate::graph::ir::TensorType;
use crate::graph::op::{PadKind, ShapeEntry};

/// `reshape` with `0` (copy) and `-1` (infer) entries.
pub(super) fn reshape(
    x: Arg<'_>,
    spec: &[ShapeEntry],
    symbol: &dyn Fn(&str) -> Option<Dim>,
) -> R<Vec<Dim>> {
    let mut out = Vec::with_capacity(spec.len());
    for (i, entry) in spec.iter().enumerate() {
        out.push(match entry {
            ShapeEntry::Fixed(n) => Dim::Fixed(*n),
            ShapeEntry::Symbol(s) => resolve(s, symbol)?,
            ShapeEntry::Copy => x.ty.shape.get(i).cloned().ok_or_else(|| {
                format!("attribute \"shape\": entry {i} is 0 (copy) but {x} has no axis {i}")
            })?,
            ShapeEntry::Infer => Dim::Unknown,
        });
    }
    let total = Dim::product(&x.ty.shape);
    let show = |out: &[Dim]| format!("cannot reshape {x} into {}", show_dims(out));
    if let Some(i) = spec.iter().position(|e| *e == ShapeEntry::Infer) {
        let known = Dim::product(
            out.iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .map(|(_, d)| d),
        );
        if known == Dim::Fixed(0) {
            return Err(format!(
                "attribute \"shape\": -1 is ambiguous next to a 0-size axis ({})",
                show(&out)
            ));
        }
        // When the symbols divide but the coefficients do not, no binding helps.
        let symbols_divide = total
            .symbolic_part()
            .div_exact(&known.symbolic_part())
            .is_some();
        out[i] = match total.div_exact(&known) {
            Some(d) => d,
            None if symbols_divide => return Err(show(&out)),
            None => Dim::Unknown,
        };
    } else if let (Some(a), Some(b)) = (total.fixed(), Dim::product(&out).fixed())
        && a != b
    {
        return Err(show(&out));
    }
    Ok(out)
}

/// A symbol named in an attribute, or an error.
pub(super) fn resolve(name: &str, symbol: &dyn Fn(&str) -> Option<Dim>) -> R<Dim> {
    symbol(name).ok_or_else(|| {
        format!("attribute \"shape\": symbol {name:?} is not bound by any graph input")
    })
}

/// `expand`: broadcast `x` to the target, `-1` keeping the input's size.
pub(super) fn expand(
    x: Arg<'_>,
    spec: &[ShapeEntry],
    symbol: &dyn Fn(&str) -> Option<Dim>,
) -> R<Vec<Dim>> {
    let (rank, target) = (x.ty.shape.len(), spec.len());
    if target < rank {
        return Err(format!(
            "attribute \"shape\": {target} entries cannot hold {x}"
        ));
    }
    let lead = target - rank;
    let mut out = Vec::with_capacity(target);
    for (i, entry) in spec.iter().enumerate() {
        let have = i.checked_sub(lead).map(|j| &x.ty.shape[j]);
        let want = match entry {
            ShapeEntry::Fixed(n) => Dim::Fixed(*n),
            ShapeEntry::Symbol(s) => resolve(s, symbol)?,
            ShapeEntry::Infer | ShapeEntry::Copy => match have {
                Some(d) => d.clone(),
                None => {
                    return Err(format!(
                        "attribute \"shape\": entry {i} is -1 but {x} has no matching axis"
                    ));
                }
            },
        };
        out.push(match have {
            Some(Dim::Fixed(1)) | None => want,
            Some(d) => unify(d, &want, || {
                format!("cannot expand {x} to size {want} on axis {i}")
            })?,
        });
    }
    Ok(out)
}

/// `concat` along `axis`.
pub(super) fn concat(args: &[Option<Arg<'_>>], axis: isize) -> R<Vec<TensorType>> {
    let inputs: Vec<Arg<'_>> = args.iter().flatten().copied().collect();
    same_dtype(&inputs)?;
    let first = inputs[0];
    let rank = first.ty.shape.len();
    let a = axis_of(axis, rank, "axis")?;
    let mut out = first.ty.shape.clone();
    for other in &inputs[1..] {
        if other.ty.shape.len() != rank {
            return Err(format!("{other} must have the rank of {first}"));
        }
        for (i, d) in other.ty.shape.iter().enumerate() {
            out[i] = if i == a {
                out[i].add(d)
            } else {
                unify(&out[i], d, || {
                    format!("{other} and {first} differ on axis {i}")
                })?
            };
        }
    }
    Ok(vec![ty(first.ty.dtype, out)])
}

/// `split` into `n` outputs along `axis`.
pub(super) fn split(
    x: Arg<'_>,
    axis: isize,
    sizes: Option<&[usize]>,
    n: usize,
) -> R<Vec<TensorType>> {
    let a = axis_of(axis, x.ty.shape.len(), "axis")?;
    let d = &x.ty.shape[a];
    let parts: Vec<Dim> = match sizes {
        Some(sizes) => {
            if sizes.len() != n {
                return Err(format!(
                    "attribute \"sizes\": {} sizes for {n} outputs",
                    sizes.len()
                ));
            }
            let sum: usize = sizes.iter().sum();
            agree(d, &Dim::Fixed(sum), || {
                format!(
                    "attribute \"sizes\": {sizes:?} add up to {sum}, not the {d} of {x} on axis {a}"
                )
            })?;
            sizes.iter().map(|&s| Dim::Fixed(s)).collect()
        }
        None => {
            let part = match (d.div_exact(&Dim::Fixed(n)), d.fixed()) {
                (Some(p), _) => p,
                (None, Some(_)) => {
                    return Err(format!(
                        "{x}: axis {a} of size {d} does not split into {n} equal parts"
                    ));
                }
                (None, None) => Dim::Unknown,
            };
            vec![part; n]
        }
    };
    Ok(parts
        .into_iter()
        .map(|p| {
            let mut shape = x.ty.shape.clone();
            shape[a] = p;
            ty(x.ty.dtype, shape)
        })
        .collect())
}

/// The length of `start:end:step` over an axis of size `d`.
pub(super) fn slice_dim(d: &Dim, start: i64, end: i64, step: i64) -> R<Dim> {
    match d.fixed() {
        Some(len) => resolve_slice(len, start, end, step)
            .map(|s| Dim::Fixed(s.len))
            .map_err(|e| format!("attribute \"starts\"/\"ends\"/\"steps\": {e}")),
        None if start == 0 && step == 1 && end >= i64::from(i32::MAX) => Ok(d.clone()),
        None => Ok(Dim::Unknown),
    }
}

/// `pad` by `[before, after]` per axis, with the mode's size limits.
pub(super) fn pad(x: Arg<'_>, pads: &[[usize; 2]], mode: PadKind) -> R<Vec<Dim>> {
    let rank = x.ty.shape.len();
    if pads.len() != rank {
        return Err(format!(
            "attribute \"pads\": {} pairs for the {rank} axes of {x}",
            pads.len()
        ));
    }
    let mut out = Vec::with_capacity(rank);
    for (axis, (d, &[before, after])) in x.ty.shape.iter().zip(pads).enumerate() {
        if let Some(len) = d.fixed() {
            let most = before.max(after);
            let fits = match mode {
                PadKind::Constant => true,
                PadKind::Reflect => most < len || most == 0,
                PadKind::Wrap => most <= len,
                PadKind::Edge => len > 0 || most == 0,
            };
            if !fits {
                return Err(format!(
                    "attribute \"pads\": {mode:?} padding of {most} does not fit axis {axis} of size {len}"
                ));
            }
        }
        out.push(d.add(&Dim::Fixed(before + after)));
    }
    Ok(out)
}

/// `dims` without (or with size 1 on) the reduced `axes`.
pub(super) fn reduce_dims(dims: &[Dim], axes: &[usize], keepdims: bool) -> Vec<Dim> {
    if keepdims {
        (0..dims.len())
            .map(|a| {
                if axes.contains(&a) {
                    Dim::Fixed(1)
                } else {
                    dims[a].clone()
                }
            })
            .collect()
    } else {
        keep_axes(dims, |a| !axes.contains(&a))
    }
}

/// The dims on the axes `keep` accepts.
pub(super) fn keep_axes(dims: &[Dim], keep: impl Fn(usize) -> bool) -> Vec<Dim> {
    dims.iter()
        .enumerate()
        .filter(|(a, _)| keep(*a))
        .map(|(_, d)| d.clone())
        .collect()
}
