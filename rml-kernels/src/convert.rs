//! f16 / bf16 ⇄ f32 conversion of slices.
//!
//! Widening is exact. Narrowing rounds to nearest, ties to even; overflow gives
//! infinity, and NaN stays NaN with the quiet bit set and the top payload bits
//! kept — bit for bit what the `half` crate produces. On x86_64 the f16 paths use
//! F16C (`vcvtph2ps`/`vcvtps2ph`), on aarch64 `fcvtl`/`fcvtn`; bf16 uses integer
//! SIMD on both.

use half::{bf16, f16};
use rml_core::{Error, Result};

use crate::simd::{MAX_LANES, Simd, dispatch};

fn same_len(a: usize, b: usize) -> Result<()> {
    if a != b {
        return Err(Error::LengthMismatch {
            expected: a,
            got: b,
        });
    }
    Ok(())
}

#[inline(always)]
fn widen<V: Simd>(src: &[u16], dst: &mut [f32], load: impl Fn(&[u16]) -> V) {
    let l = V::LANES;
    let main = src.len() - src.len() % l;
    for (s, d) in src[..main]
        .chunks_exact(l)
        .zip(dst[..main].chunks_exact_mut(l))
    {
        load(s).store(d);
    }
    if main < src.len() {
        let t = src.len() - main;
        let mut sb = [0u16; MAX_LANES];
        let mut db = [0.0f32; MAX_LANES];
        sb[..t].copy_from_slice(&src[main..]);
        load(&sb).store(&mut db);
        dst[main..].copy_from_slice(&db[..t]);
    }
}

#[inline(always)]
fn narrow<V: Simd>(src: &[f32], dst: &mut [u16], store: impl Fn(V, &mut [u16])) {
    let l = V::LANES;
    let main = src.len() - src.len() % l;
    for (s, d) in src[..main]
        .chunks_exact(l)
        .zip(dst[..main].chunks_exact_mut(l))
    {
        store(V::load(s), d);
    }
    if main < src.len() {
        let t = src.len() - main;
        let mut sb = [0.0f32; MAX_LANES];
        let mut db = [0u16; MAX_LANES];
        sb[..t].copy_from_slice(&src[main..]);
        store(V::load(&sb), &mut db);
        dst[main..].copy_from_slice(&db[..t]);
    }
}

/// Widens f16 to f32 (exact). Lengths must match.
// The closure is not redundant: it carries `#[inline(always)]` (see `dispatch!`).
#[allow(clippy::redundant_closure)]
pub fn f16_to_f32(src: &[f16], dst: &mut [f32]) -> Result<()> {
    same_len(src.len(), dst.len())?;
    let src: &[u16] = bytemuck::cast_slice(src);
    dispatch!(|V| widen::<V>(
        src,
        dst,
        #[inline(always)]
        |s| V::load_f16(s)
    ));
    Ok(())
}

/// Narrows f32 to f16, rounding to nearest even. Lengths must match.
pub fn f32_to_f16(src: &[f32], dst: &mut [f16]) -> Result<()> {
    same_len(src.len(), dst.len())?;
    let dst: &mut [u16] = bytemuck::cast_slice_mut(dst);
    dispatch!(|V| narrow::<V>(
        src,
        dst,
        #[inline(always)]
        |v, d| v.store_f16(d)
    ));
    Ok(())
}

/// Widens bf16 to f32 (exact). Lengths must match.
// The closure is not redundant: it carries `#[inline(always)]` (see `dispatch!`).
#[allow(clippy::redundant_closure)]
pub fn bf16_to_f32(src: &[bf16], dst: &mut [f32]) -> Result<()> {
    same_len(src.len(), dst.len())?;
    let src: &[u16] = bytemuck::cast_slice(src);
    dispatch!(|V| widen::<V>(
        src,
        dst,
        #[inline(always)]
        |s| V::load_bf16(s)
    ));
    Ok(())
}

/// Narrows f32 to bf16, rounding to nearest even. Lengths must match.
pub fn f32_to_bf16(src: &[f32], dst: &mut [bf16]) -> Result<()> {
    same_len(src.len(), dst.len())?;
    let dst: &mut [u16] = bytemuck::cast_slice_mut(dst);
    dispatch!(|V| narrow::<V>(
        src,
        dst,
        #[inline(always)]
        |v, d| v.store_bf16(d)
    ));
    Ok(())
}
