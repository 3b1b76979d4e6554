//! f16 / bf16 ⇄ f32 conversion of slices.
//!
//! Widening is exact. Narrowing rounds to nearest, ties to even; overflow gives
//! infinity, and NaN stays NaN with the quiet bit set and the top payload bits
//! kept — bit for bit what the `half` crate produces. On x86_64 the f16 paths use
//! F16C (`vcvtph2ps`/`vcvtps2ph`), on aarch64 `fcvtl`/`fcvtn`; bf16 uses integer
//! SIMD on both.

use half::{bf16, f16};
use rml_core::{Error, Result};

use crate::elementwise::streams_out;
use crate::simd::{
    MAX_LANES, Simd, dispatch_streamed, for_each_step_in_streams, head_len, prefetch_ahead, put,
};

fn same_len(a: usize, b: usize) -> Result<()> {
    if a != b {
        return Err(Error::LengthMismatch {
            expected: a,
            got: b,
        });
    }
    Ok(())
}

/// The most vectors [`widen`] and [`narrow`] take per step.
const MAX_GROUP: usize = 4;

/// Widens fewer than `G · V::LANES` values through padded buffers (a head or a
/// tail).
#[inline(always)]
fn widen_short<V: Simd, const G: usize>(
    src: &[u16],
    dst: &mut [f32],
    load: &impl Fn(&[u16]) -> [V; G],
) {
    let t = src.len();
    if t > 0 {
        let mut sb = [0u16; MAX_GROUP * MAX_LANES];
        let mut db = [0.0f32; MAX_GROUP * MAX_LANES];
        sb[..t].copy_from_slice(src);
        for (v, d) in load(&sb).into_iter().zip(db.chunks_exact_mut(V::LANES)) {
            v.store(d);
        }
        dst.copy_from_slice(&db[..t]);
    }
}

/// `dst = load(src)`, `G` vectors a step; with `S`, the whole vectors go past the
/// caches (from a vector-aligned start) and `src` is asked for ahead.
#[inline(always)]
fn widen<V: Simd, const S: bool, const G: usize>(
    src: &[u16],
    dst: &mut [f32],
    load: impl Fn(&[u16]) -> [V; G],
) {
    const { assert!(G <= MAX_GROUP) };
    let head = if S { head_len::<V, _>(dst) } else { 0 };
    let (sh, src) = src.split_at(head);
    let (dh, dst) = dst.split_at_mut(head);
    widen_short(sh, dh, &load);
    let step = G * V::LANES;
    let main = src.len() - src.len() % step;
    let (sm, dm) = (&src[..main], &mut dst[..main]);
    if S {
        for_each_step_in_streams(
            main / step,
            step * core::mem::size_of::<u16>(),
            #[inline(always)]
            |i| {
                let s = &sm[i * step..][..step];
                prefetch_ahead(s);
                widen_step::<V, S, G>(&load, s, &mut dm[i * step..][..step]);
            },
        );
    } else {
        for (s, d) in sm.chunks_exact(step).zip(dm.chunks_exact_mut(step)) {
            widen_step::<V, S, G>(&load, s, d);
        }
    }
    widen_short(&src[main..], &mut dst[main..], &load);
}

/// One step of [`widen`]: the `G` vectors `load(s)` into `d`, past the caches
/// with `S`.
#[inline(always)]
fn widen_step<V: Simd, const S: bool, const G: usize>(
    load: &impl Fn(&[u16]) -> [V; G],
    s: &[u16],
    d: &mut [f32],
) {
    for (k, v) in load(s).into_iter().enumerate() {
        put::<V, S>(v, &mut d[k * V::LANES..]);
    }
}

/// `G` vectors loaded from the start of `s` (a plain loop: a closure handed to
/// `core::array::from_fn` could stay out of line, without the path's features).
#[inline(always)]
fn group<V: Simd, const G: usize>(s: &[f32]) -> [V; G] {
    let mut vs = [V::splat(0.0); G];
    for (k, v) in vs.iter_mut().enumerate() {
        *v = V::load(&s[k * V::LANES..]);
    }
    vs
}

/// Narrows fewer than `G · V::LANES` values through padded buffers (a head or a
/// tail).
#[inline(always)]
fn narrow_short<V: Simd, const G: usize>(
    src: &[f32],
    dst: &mut [u16],
    store: &impl Fn([V; G], &mut [u16]),
) {
    let t = src.len();
    if t > 0 {
        let mut sb = [0.0f32; MAX_GROUP * MAX_LANES];
        let mut db = [0u16; MAX_GROUP * MAX_LANES];
        sb[..t].copy_from_slice(src);
        store(group(&sb), &mut db);
        dst.copy_from_slice(&db[..t]);
    }
}

/// `store(src)`, `G` vectors a step, with plain stores.
#[inline(always)]
fn narrow_plain<V: Simd, const G: usize>(
    src: &[f32],
    dst: &mut [u16],
    store: &impl Fn([V; G], &mut [u16]),
) {
    let step = G * V::LANES;
    let main = src.len() - src.len() % step;
    for (s, d) in src[..main]
        .chunks_exact(step)
        .zip(dst[..main].chunks_exact_mut(step))
    {
        store(group(s), d);
    }
    narrow_short(&src[main..], &mut dst[main..], store);
}

/// `store(src)`, `G` vectors a step. With `S`, from the first vector-aligned
/// output byte on, each two vectors' halves are gathered into one vector's bytes
/// and stored past the caches (the bits pass through a float load and store
/// unchanged), and `src` is asked for ahead.
#[inline(always)]
fn narrow<V: Simd, const S: bool, const G: usize>(
    src: &[f32],
    dst: &mut [u16],
    store: impl Fn([V; G], &mut [u16]),
) {
    const { assert!(G <= MAX_GROUP) };
    if !S {
        return narrow_plain(src, dst, &store);
    }
    let l = V::LANES;
    let head = head_len::<V, _>(dst);
    let (sh, src) = src.split_at(head);
    let (dh, dst) = dst.split_at_mut(head);
    narrow_plain(sh, dh, &store);
    // A step narrows whole groups into whole output vectors.
    let step = G.max(2) * l;
    let whole = src.len() - src.len() % step;
    let (sw, st) = src.split_at(whole);
    let (dw, dt) = dst.split_at_mut(whole);
    // Whole steps start on a vector boundary; only an empty `dw` can fail the cast.
    let dw: &mut [f32] = bytemuck::try_cast_slice_mut(dw).unwrap_or_default();
    let mut lines = [0.0f32; MAX_GROUP / 2 * MAX_LANES];
    let lines = &mut lines[..step / 2];
    for_each_step_in_streams(
        whole / step,
        step * core::mem::size_of::<f32>(),
        #[inline(always)]
        |i| {
            let s = &sw[i * step..][..step];
            let d = &mut dw[i * step / 2..][..step / 2];
            prefetch_ahead(s);
            let halves: &mut [u16] = bytemuck::cast_slice_mut(lines);
            for (sg, hg) in s.chunks_exact(G * l).zip(halves.chunks_exact_mut(G * l)) {
                store(group(sg), hg);
            }
            for (line, dv) in lines.chunks_exact(l).zip(d.chunks_exact_mut(l)) {
                V::load(line).store_stream(dv);
            }
        },
    );
    narrow_plain(st, dt, &store);
}

/// Widens one vector of f16 values, or bf16 values when `BF`.
#[inline(always)]
fn load_half<V: Simd, const BF: bool>(s: &[u16]) -> V {
    if BF { V::load_bf16(s) } else { V::load_f16(s) }
}

/// Narrows one vector to f16 values, or bf16 values when `BF`.
#[inline(always)]
fn store_half<V: Simd, const BF: bool>(v: V, d: &mut [u16]) {
    if BF { v.store_bf16(d) } else { v.store_f16(d) }
}

/// Widens a whole slice on the active path (lengths must match). A conversion streams when its f32
/// side is too large for the caches ([`streams_out`]). bf16 goes four vectors a
/// step on the vector paths ([`Simd::load_bf16_quad`]); the one-lane path keeps
/// one value a step, the loop LLVM vectorizes best (in pairs it ran 8-10 %
/// slower on the Zen 3).
// The closures are not redundant: they carry `#[inline(always)]` (a function item
// passed instead left the bf16 paths uninlined, 10–20× slower; `dispatch!`).
#[allow(clippy::redundant_closure)]
fn widen_all<const BF: bool>(src: &[u16], dst: &mut [f32]) -> Result<()> {
    same_len(src.len(), dst.len())?;
    dispatch_streamed!(streams_out(dst.len()), |V, S| if BF && V::LANES > 1 {
        widen::<V, S, 4>(
            src,
            dst,
            #[inline(always)]
            |s| V::load_bf16_quad(s),
        )
    } else {
        widen::<V, S, 1>(
            src,
            dst,
            #[inline(always)]
            |s| [load_half::<V, BF>(s)],
        )
    });
    Ok(())
}

/// Narrows a whole slice on the active path, streaming as [`widen_all`] does
/// (the output is half the f32 input's size, but the call sweeps both through
/// the caches), bf16 four vectors a step on the vector paths as [`widen_all`]
/// widens them ([`Simd::store_bf16_quad`]).
// The closures are not redundant: see `widen_all`.
#[allow(clippy::redundant_closure)]
fn narrow_all<const BF: bool>(src: &[f32], dst: &mut [u16]) -> Result<()> {
    same_len(src.len(), dst.len())?;
    dispatch_streamed!(streams_out(src.len()), |V, S| if BF && V::LANES > 1 {
        narrow::<V, S, 4>(
            src,
            dst,
            #[inline(always)]
            |p, d| V::store_bf16_quad(p, d),
        )
    } else {
        narrow::<V, S, 1>(
            src,
            dst,
            #[inline(always)]
            |[v], d| store_half::<V, BF>(v, d),
        )
    });
    Ok(())
}

/// Widens f16 to f32 (exact). Lengths must match.
pub fn f16_to_f32(src: &[f16], dst: &mut [f32]) -> Result<()> {
    widen_all::<false>(bytemuck::cast_slice(src), dst)
}

/// Narrows f32 to f16, rounding to nearest even. Lengths must match.
pub fn f32_to_f16(src: &[f32], dst: &mut [f16]) -> Result<()> {
    narrow_all::<false>(src, bytemuck::cast_slice_mut(dst))
}

/// Widens bf16 to f32 (exact). Lengths must match.
pub fn bf16_to_f32(src: &[bf16], dst: &mut [f32]) -> Result<()> {
    widen_all::<true>(bytemuck::cast_slice(src), dst)
}

/// Narrows f32 to bf16, rounding to nearest even. Lengths must match.
pub fn f32_to_bf16(src: &[f32], dst: &mut [bf16]) -> Result<()> {
    narrow_all::<true>(src, bytemuck::cast_slice_mut(dst))
}
