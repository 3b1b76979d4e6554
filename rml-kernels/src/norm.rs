//! Row normalizations: layer norm and RMS norm over the last axis of a row-major
//! matrix, with optional per-column scale (`gamma`) and shift (`beta`).
//!
//! Layer norm takes its statistics without subtracting large sums of squares
//! (`reduce`'s `row_mean_var`: on a vector path over a row of up to 4096 values,
//! sums of the deviations from an estimate of the mean, or the two-pass form where
//! the estimate is poor; otherwise blockwise two-pass moments merged by Chan's
//! update), so it stays accurate for rows with a large common offset while
//! reading each row from memory once.
//!
//! Where the output stays in the cache, both take a row's statistics before they
//! scale the row above it (`normalize_rows`), so the reduce, divide and square
//! root chain between a row's two passes does not hold the core up; with both
//! `gamma` and `beta` present they scale two rows at a time instead
//! (`normalize_pairs`), each parameter vector loaded once for both.

use core::ops::Range;

use rml_core::{Error, Result};

use crate::elementwise::{check_rows, streams_out};
use crate::reduce::{row_mean_var, row_sum_map, short_row, streams};
use crate::simd::{
    AheadShare, Simd, dispatch, for_each_asking, head_len, put, sqrt_f32, store_fence,
};

/// `out[i] = f32(((f64(x[i]) − mean) · inv_std) · w + b)` with `params` = `[mean,
/// inv_std, w, b]`, each operation rounded in f64 and the result once to f32: the
/// formula rml-core's group and batch norms apply per element, bit for bit on every
/// ISA (with [`crate::reduce::moments_rows_f64`] a host reproduces rml-core's
/// group norm exactly). `out` must hold as many values as `x`
/// ([`Error::LengthMismatch`]).
pub fn normalize_f64(x: &[f32], params: [f64; 4], out: &mut [f32]) -> Result<()> {
    if x.len() != out.len() {
        return Err(Error::LengthMismatch {
            expected: x.len(),
            got: out.len(),
        });
    }
    dispatch!(|V| V::affine_f64(x, out, params));
    Ok(())
}

fn check_param(p: Option<&[f32]>, cols: usize) -> Result<()> {
    match p {
        Some(p) if p.len() != cols => Err(Error::LengthMismatch {
            expected: cols,
            got: p.len(),
        }),
        _ => Ok(()),
    }
}

/// Whether a row of an output beyond the cache (`stream`, see [`streams_out`])
/// goes past the caches: on the vector paths, when it starts on a vector boundary
/// (no head to peel). The one-lane path keeps a single instance of its loops.
#[inline(always)]
fn streams_row<V: Simd>(y: &[f32], stream: bool) -> bool {
    V::LANES > 1 && stream && head_len::<V, _>(y) == 0
}

/// `y = (x - shift) * scale * gamma + beta` over one row (absent gamma = 1,
/// absent beta = 0), past the caches with `S` (the caller fences). With `ahead`,
/// each vector first asks for its part of the lines ahead of the row, so the next
/// rows come in while this one goes out. Picks a loop per combination of present
/// parameters, so no loop tests an `Option` per vector.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn affine_row<V: Simd, const S: bool>(
    x: &[f32],
    y: &mut [f32],
    shift: f32,
    scale: f32,
    gamma: Option<&[f32]>,
    beta: Option<&[f32]>,
    ahead: Option<AheadShare>,
) {
    let (sh, sc, a) = (shift, scale, ahead);
    match (gamma, beta) {
        (Some(g), Some(b)) => affine_cols::<V, true, true, S>(x, y, sh, sc, g, b, a),
        (Some(g), None) => affine_cols::<V, true, false, S>(x, y, sh, sc, g, &[], a),
        (None, Some(b)) => affine_cols::<V, false, true, S>(x, y, sh, sc, &[], b, a),
        (None, None) => affine_cols::<V, false, false, S>(x, y, sh, sc, &[], &[], a),
    }
}

/// [`affine_row`] with `gamma` present when `G` (else 1) and `beta` when `B`
/// (else 0): the same `mul_add` either way, so the same bits; past the caches
/// with `S`; asking for its part of the lines ahead with `ahead`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn affine_cols<V: Simd, const G: bool, const B: bool, const S: bool>(
    x: &[f32],
    y: &mut [f32],
    shift: f32,
    scale: f32,
    gamma: &[f32],
    beta: &[f32],
    ahead: Option<AheadShare>,
) {
    let l = V::LANES;
    let n = x.len();
    let main = n - n % l;
    let (sh, sc) = (V::splat(shift), V::splat(scale));
    let (one, zero) = (V::splat(1.0), V::splat(0.0));
    // An absent parameter iterates over `x` instead (never read), so one zip of
    // exact chunks covers every case with no bounds check inside the loop.
    let (gs, bs) = (if G { gamma } else { x }, if B { beta } else { x });
    let rows = x[..main].chunks_exact(l).zip(y[..main].chunks_exact_mut(l));
    let params = gs[..main].chunks_exact(l).zip(bs[..main].chunks_exact(l));
    let vector_bytes = l * core::mem::size_of::<f32>();
    for_each_asking(
        rows.zip(params),
        ahead,
        vector_bytes,
        #[inline(always)]
        |((xc, yc), (gc, bc))| {
            let g = if G { V::load(gc) } else { one };
            let b = if B { V::load(bc) } else { zero };
            put::<V, S>(affine(V::load(xc), sh, sc, g, b), yc);
        },
    );
    if main < n {
        let g = if G {
            V::load_tail(&gamma[main..], 1.0)
        } else {
            one
        };
        let b = if B {
            V::load_tail(&beta[main..], 0.0)
        } else {
            zero
        };
        affine(V::load_tail(&x[main..], 0.0), sh, sc, g, b).store_tail(&mut y[main..]);
    }
}

/// `(x - shift) * scale * gamma + beta` for one vector: the formula every scaling
/// loop applies, so all give the same bits.
#[inline(always)]
fn affine<V: Simd>(x: V, shift: V, scale: V, gamma: V, beta: V) -> V {
    x.sub(shift).mul(scale).mul_add(gamma, beta)
}

/// [`affine_row`] over two adjacent rows (`x` and `y` hold both) with `gamma` and
/// `beta` present, row k with `factors[k]` = `(shift, scale)`, into the cache. Each
/// vector of `gamma` and `beta` serves both rows: four loads for two vectors out
/// where one row at a time takes six (one row at a time, that loop took about 45 %
/// of layer norm's time over two rows of 1024 in L1 on Zen 4's AVX-512 path).
/// Both rows' vectors are loaded before either is stored, so no load follows a
/// store to the same page offset: for rows of 1024 the second row's vector lies 4
/// KiB past the first row's output when `x` and `y` share their page offsets (as
/// the bench's buffers do), and perf showed a stall on its load before this order.
#[inline(always)]
fn affine_pair<V: Simd>(
    x: &[f32],
    y: &mut [f32],
    factors: [(f32, f32); 2],
    gamma: &[f32],
    beta: &[f32],
) {
    let l = V::LANES;
    let cols = gamma.len();
    let main = cols - cols % l;
    let (x0, x1) = x.split_at(cols);
    let (y0, y1) = y.split_at_mut(cols);
    let [(sh0, sc0), (sh1, sc1)] = factors.map(|(sh, sc)| (V::splat(sh), V::splat(sc)));
    let xs = x0[..main].chunks_exact(l).zip(x1[..main].chunks_exact(l));
    let ys = y0[..main]
        .chunks_exact_mut(l)
        .zip(y1[..main].chunks_exact_mut(l));
    let params = gamma[..main]
        .chunks_exact(l)
        .zip(beta[..main].chunks_exact(l));
    for (((xa, xb), (ya, yb)), (gc, bc)) in xs.zip(ys).zip(params) {
        let (g, b) = (V::load(gc), V::load(bc));
        let (va, vb) = (V::load(xa), V::load(xb));
        affine(va, sh0, sc0, g, b).store(ya);
        affine(vb, sh1, sc1, g, b).store(yb);
    }
    if main < cols {
        // The partial vector at each row's end, by the one-row loop's tail.
        let (g, b) = (Some(&gamma[main..]), Some(&beta[main..]));
        for ((xr, yr), (shift, scale)) in [(x0, y0), (x1, y1)].into_iter().zip(factors) {
            affine_row::<V, false>(&xr[main..], &mut yr[main..], shift, scale, g, b, None);
        }
    }
}

/// `y = (x - shift) * scale * gamma + beta` row by row, with each row's `(shift,
/// scale)` from `factors`; rows of an output beyond the cache (`stream_out`) go past
/// it. With `scaling_share` nonzero the scaling is the last of that many passes
/// over each row that share the requests for the input's lines ahead
/// ([`AheadShare`]): the next rows come in while this one goes out, and `factors`
/// (the other passes) reads them from the cache.
///
/// Where the output stays in the cache, row r + 1's factors are taken before row r
/// is scaled: they do not wait on row r's reduction, division and square root, so
/// the core works through that chain while it reads the next row, and the scaling
/// finds its factors ready (Zen 3, session 26, two rows of 1024 in L1, fastest of
/// 500 samples in alternated runs: RMS norm 255-308 -> 224-236 ns, layer norm
/// 415-475 -> 402-418 ns). A streamed output takes each row's factors just before
/// it: there memory, not the chain, sets the pace, and with the factors taken ahead
/// the requests ahead (in the affine pass) reach a row only just before `factors`
/// reads it (RMS norm from memory: 0.75-0.86 of `copy` fell to 0.65-0.71).
///
/// An output in the cache with both `gamma` and `beta` goes by
/// [`normalize_pairs`] instead.
#[inline(always)]
fn normalize_rows<V: Simd>(
    x: &[f32],
    y: &mut [f32],
    cols: usize,
    [gamma, beta]: [Option<&[f32]>; 2],
    stream_out: bool,
    scaling_share: usize,
    factors: impl Fn(&[f32]) -> (f32, f32),
) {
    if !stream_out
        && scaling_share == 0
        && let (Some(g), Some(b)) = (gamma, beta)
    {
        normalize_pairs::<V>(x, y, cols, [g, b], factors);
        return;
    }
    let mut taken_ahead = None;
    let rows = x.chunks_exact(cols).zip(y.chunks_exact_mut(cols));
    for (r, (xr, yr)) in rows.enumerate() {
        let (shift, scale) = taken_ahead.take().unwrap_or_else(|| factors(xr));
        if !stream_out && let Some(xn) = x.get((r + 1) * cols..(r + 2) * cols) {
            taken_ahead = Some(factors(xn));
        }
        let share =
            (scaling_share > 0).then(|| AheadShare::new(xr, scaling_share - 1, scaling_share));
        if streams_row::<V>(yr, stream_out) {
            affine_row::<V, true>(xr, yr, shift, scale, gamma, beta, share);
        } else {
            affine_row::<V, false>(xr, yr, shift, scale, gamma, beta, share);
        }
    }
}

/// [`normalize_rows`] for an output in the cache with `gamma` and `beta` both
/// present: two rows at a time ([`affine_pair`]), both rows' factors taken first,
/// then a last row alone. Sharing the parameters' loads outweighs losing the
/// overlap of taking factors ahead: layer norm (Zen 4, session 45, best of 15
/// samples, three alternated runs) for rows of 64, 256, 1024 and 4096 in L1 and
/// L2 1.05-1.21x faster on AVX-512 (16 rows of 4096: 380 -> 313 ns per 2048
/// values), 1.05-1.32x on AVX2 (two rows of 1024: level to 1.1x, by where the
/// output lies in its page) and 1.06-1.17x on the one-lane path; 256 rows of 4096
/// (in L3) 1.2x, 768 x 2048 and 1024 x 1024 level. Taking the next pair's factors
/// ahead as well made 16 rows of 1024 slower than one row at a time (329 against
/// 290 ns: two pairs of rows, the output pair, `gamma` and `beta` fill the 32 KiB
/// L1). RMS norm, whose scaling loads two vectors per store (no `beta`), gained
/// less: pairs were 1.1-1.2x faster for rows of 64 and 4096 but 6-12 % slower for
/// rows of 1024, so it keeps the row-by-row form.
#[inline(always)]
fn normalize_pairs<V: Simd>(
    x: &[f32],
    y: &mut [f32],
    cols: usize,
    [gamma, beta]: [&[f32]; 2],
    factors: impl Fn(&[f32]) -> (f32, f32),
) {
    let pairs = x.chunks_exact(2 * cols).zip(y.chunks_exact_mut(2 * cols));
    for (xp, yp) in pairs {
        let (x0, x1) = xp.split_at(cols);
        affine_pair::<V>(xp, yp, [factors(x0), factors(x1)], gamma, beta);
    }
    let last = x.len() - x.len() % (2 * cols);
    if last < x.len() {
        let (shift, scale) = factors(&x[last..]);
        let (g, b) = (Some(gamma), Some(beta));
        affine_row::<V, false>(&x[last..], &mut y[last..], shift, scale, g, b, None);
    }
}

fn check_io(x: &[f32], cols: usize, rows: &Range<usize>, y: &[f32]) -> Result<(usize, usize)> {
    let (first, count) = check_rows(x.len(), cols, rows)?;
    if y.len() != count {
        return Err(Error::LengthMismatch {
            expected: count,
            got: y.len(),
        });
    }
    Ok((first, count))
}

/// Layer normalization of rows `rows` of `x` (`cols` columns) into `y` (exactly
/// those rows): `y = (x - mean) / sqrt(var + eps) * gamma + beta`, with the
/// population variance; `gamma` and `beta`, when given, have `cols` values.
pub fn layer_norm_rows(
    x: &[f32],
    cols: usize,
    rows: Range<usize>,
    gamma: Option<&[f32]>,
    beta: Option<&[f32]>,
    eps: f32,
    y: &mut [f32],
) -> Result<()> {
    let (first, count) = check_io(x, cols, &rows, y)?;
    check_param(gamma, cols)?;
    check_param(beta, cols)?;
    if cols == 0 {
        return Ok(());
    }
    let x = &x[first..first + count];
    let stream_out = streams_out(count);
    dispatch!(|V| {
        // Rows past L2 are asked for ahead by their passes ([`AheadShare`]): whose
        // output stays in the cache, by the moment pass alone; whose output
        // streams, by it and the scaling pass, a half each; a row too long for
        // the one-pass shifted moments (whose moment pass, blockwise, asks for all
        // or nothing) by the scaling pass alone, the moments taking their in-cache
        // form. The same bits in every case. 64 MiB, rows of 1024: with the
        // two-pass moments and the passes in thirds 71-84 % of a streaming `copy`
        // (Zen 3, session 34, from 65-71 % with the scaling pass asking for all);
        // with the shifted moments in halves 86-91 % against 75-83 % (Zen 2,
        // session 35, eight alternated runs), the moment pass asking for all and
        // the scaling pass for nothing 56-61 %.
        let (moment_passes, scaling_share) = match (stream_out, short_row::<V>(cols)) {
            (true, true) => (2, 2),
            (true, false) => (0, 1),
            (false, _) if streams(count) => (1, 0),
            (false, _) => (0, 0),
        };
        normalize_rows::<V>(
            x,
            y,
            cols,
            [gamma, beta],
            stream_out,
            scaling_share,
            #[inline(always)]
            |xr| {
                let (mean, var) = row_mean_var::<V>(xr, moment_passes);
                (mean, 1.0 / sqrt_f32(var + eps))
            },
        );
    });
    if stream_out {
        store_fence();
    }
    Ok(())
}

/// RMS normalization of rows `rows` of `x` (`cols` columns) into `y` (exactly those
/// rows): `y = x / sqrt(mean(x^2) + eps) * gamma`; `gamma`, when given, has `cols`
/// values.
pub fn rms_norm_rows(
    x: &[f32],
    cols: usize,
    rows: Range<usize>,
    gamma: Option<&[f32]>,
    eps: f32,
    y: &mut [f32],
) -> Result<()> {
    let (first, count) = check_io(x, cols, &rows, y)?;
    check_param(gamma, cols)?;
    if cols == 0 {
        return Ok(());
    }
    let x = &x[first..first + count];
    let stream_out = streams_out(count);
    dispatch!(|V| {
        // A streamed output's two passes share the requests for the rows ahead
        // ([`AheadShare`]). 64 MiB, rows of 1024, Zen 3: the scaling pass asking
        // for all of them took it from 18-22 to 25-35 GB/s beside a `copy` of
        // 28-34 (session 22); sharing, 77-81 -> 85-90 % of `copy` (session 34,
        // four alternated runs).
        normalize_rows::<V>(
            x,
            y,
            cols,
            [gamma, None],
            stream_out,
            if stream_out { 2 } else { 0 },
            #[inline(always)]
            |xr| {
                let ms = row_sum_map::<V>(
                    xr,
                    stream_out.then(|| AheadShare::new(xr, 0, 2)),
                    #[inline(always)]
                    |a, v| v.mul_add(v, a),
                ) / cols as f32;
                (0.0, 1.0 / sqrt_f32(ms + eps))
            },
        );
    });
    if stream_out {
        store_fence();
    }
    Ok(())
}
