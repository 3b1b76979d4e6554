//! `matmul` and `scaled_dot_product_attention`: matrix axes and broadcast batch axes.

use rml_core::DType;

use super::check::{same_dtype, same_float};
use super::dims::{agree, broadcast2};
use super::{Arg, R, ty};
use crate::graph::dim::{Dim, show_dims};
use crate::graph::ir::TensorType;

/// `op(a) @ op(b)`: batch axes broadcast, then `[m, n]`.
pub(super) fn matmul(a: Arg<'_>, b: Arg<'_>, ta: bool, tb: bool) -> R<Vec<Dim>> {
    let split = |x: Arg<'_>, t: bool| -> R<(Vec<Dim>, Dim, Dim)> {
        let r = x.ty.shape.len();
        if r < 2 {
            return Err(format!("{x}: matmul operands need rank >= 2"));
        }
        let (p, q) = (x.ty.shape[r - 2].clone(), x.ty.shape[r - 1].clone());
        let (rows, cols) = if t { (q, p) } else { (p, q) };
        Ok((x.ty.shape[..r - 2].to_vec(), rows, cols))
    };
    let (ba, m, k) = split(a, ta)?;
    let (bb, k_b, n) = split(b, tb)?;
    agree(&k, &k_b, || {
        format!("{a} and {b}: inner sizes {k} and {k_b} differ")
    })?;
    let mut out =
        broadcast2(&ba, &bb).map_err(|()| format!("{a} and {b}: batch axes do not broadcast"))?;
    out.extend([m, n]);
    Ok(out)
}

/// `scaled_dot_product_attention(q, k, v, mask?)`.
pub(super) fn attention(
    q: Arg<'_>,
    k: Arg<'_>,
    v: Arg<'_>,
    mask: Option<Arg<'_>>,
) -> R<Vec<TensorType>> {
    same_float(&[q, k, v])?;
    let parts = |a: Arg<'_>| -> R<(Vec<Dim>, Dim, Dim)> {
        let r = a.ty.shape.len();
        if r < 2 {
            return Err(format!("{a}: expected rank >= 2 ([…, S, D])"));
        }
        Ok((
            a.ty.shape[..r - 2].to_vec(),
            a.ty.shape[r - 2].clone(),
            a.ty.shape[r - 1].clone(),
        ))
    };
    let ((bq, sq, dq), (bk, sk, dk), (bv, sv, dv)) = (parts(q)?, parts(k)?, parts(v)?);
    agree(&dq, &dk, || format!("{q} and {k}: head sizes differ"))?;
    agree(&sk, &sv, || format!("{k} and {v}: key lengths differ"))?;
    let fail = |()| format!("{q}, {k} and {v}: batch axes do not broadcast");
    let batch = broadcast2(&broadcast2(&bq, &bk).map_err(fail)?, &bv).map_err(fail)?;
    if let Some(m) = mask {
        if m.ty.dtype != DType::Bool {
            same_dtype(&[q, m])?;
        }
        let mut scores = batch.clone();
        scores.extend([sq.clone(), sk.clone()]);
        let fits = broadcast2(&m.ty.shape, &scores).is_ok_and(|d| {
            d.len() == scores.len()
                && d.iter()
                    .zip(&scores)
                    .all(|(a, b)| agree(a, b, String::new).is_ok())
        });
        if !fits {
            return Err(format!(
                "{m}: the mask must broadcast to the scores {}",
                show_dims(&scores)
            ));
        }
    }
    let mut out = batch;
    out.extend([sq, dv]);
    Ok(vec![ty(q.ty.dtype, out)])
}
