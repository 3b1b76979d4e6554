//! Numerically stable row softmax: `y = exp(x - max(x)) / sum(exp(x - max(x)))`
//! per row of a row-major matrix, and log-softmax
//! `y = (x - max(x)) - ln sum(exp(x - max(x)))`.
//!
//! Three passes over each row (max; exponentials and their sum; scaling), the
//! last two on data a row-sized working set keeps in cache. An output too big to
//! stay cached (`streams_out`) with rows of at most `SCRATCH_COLS` values
//! keeps each row's exponentials in a stack buffer and writes the output once,
//! past the caches. A row containing NaN or `+inf` gives NaN; a row of all `-inf`
//! gives NaN (0/0), as in PyTorch. The maximum skips NaN (one `maxps` per vector
//! instead of three instructions): a NaN still reaches every output, through its
//! exponential in the sum.
//!
//! On the vector paths softmax and log-softmax take their exponentials in
//! binary units: `2^{x log2 e − K}`, `K = max log2 e` rounded to f32, one FMA
//! for the argument and a subtraction for its reduction, is `e^{x − max}` times
//! one constant per row, which cancels in softmax's ratio and which log-softmax
//! takes back out of `ln Σ`.

use core::f32::consts::LN_2;
use core::marker::PhantomData;
use core::ops::Range;

use rml_core::{Error, Result};

use crate::elementwise::{check_rows, map_inplace, map_to, streams_out};
use crate::math::{Binary, ExpUnit, Natural, exp_in};
use crate::reduce::{row_max, row_max_skip_nan, streams};
use crate::simd::{Simd, dispatch, head_len, prefetch_ahead, put, store_fence};

/// The longest row whose exponentials a streamed softmax keeps on the stack (16
/// KiB). Written into the output instead, they make its lines come in from memory
/// before the scaling pass overwrites them: 64 MiB of softmax then moves 192 MiB
/// where 128 MiB suffice.
const SCRATCH_COLS: usize = 4096;

/// How a row's exponentials `exp(x − max)` are formed.
#[derive(Clone, Copy)]
enum ExpForm {
    /// `e^{x − max}` itself: for [`softmax_parts_inplace`], whose callers rescale
    /// blocks by their maxima, and for rows whose `max log2 e` overflows.
    Natural,
    /// `2^{x log2 e − K}`, `K = max log2 e` rounded to f32: `e^{x − max}` times
    /// `2^δ`, `δ = max log2 e − K` (`|δ| <= |max| 2^-23`), the same for the whole
    /// row. One FMA forms the argument where `Natural` subtracts, and
    /// [`Binary`]'s reduction is a subtraction where [`Natural`]'s is a multiply and
    /// two FMAs. Rounding the argument costs the exponential at most `2^-24 |x −
    /// max|` relative in either form (`x − max` rounds too, save where it is
    /// exact); `log2 e` in f32, 1.3e-8 below its value, adds `1.3e-8 |x − max|`
    /// (8e-7 for outputs `e^{-60}` below the largest, still 1.4e-6 at
    /// `e^{-103}`, where f32 runs out: the tests allow 1e-5).
    Binary,
}

impl ExpForm {
    /// `Binary` on the vector paths where `max log2 e` is finite (every finite
    /// `max` up to 2.3e38; an infinite or NaN `max` gives NaN exponentials either
    /// way). The one-lane scalar path keeps `Natural`: its `mul_add` rounds
    /// `x log2 e` before the shift, an error growing with `|x|`, not `|x − max|`.
    #[inline(always)]
    fn for_max<V: Simd>(max: f32) -> Self {
        if V::LANES > 1 && ((max * Binary::E).is_finite() || !max.is_finite()) {
            ExpForm::Binary
        } else {
            ExpForm::Natural
        }
    }
}

/// What a row's exponential pass leaves: the row's maximum, the form its
/// exponentials took and their sum.
#[derive(Clone, Copy)]
struct RowSum {
    max: f32,
    form: ExpForm,
    sum: f32,
}

impl RowSum {
    /// `ln Σ e^{x − max}`: `Binary` exponentials carry `2^δ`, so `δ ln 2` comes
    /// off (exact: `δ` is the FMA's residual of the product that rounded to `K`).
    #[inline(always)]
    fn ln_sum(self) -> f32 {
        let ln = libm::logf(self.sum);
        match self.form {
            ExpForm::Natural => ln,
            ExpForm::Binary => {
                let max = self.max;
                let delta = libm::fmaf(max, Binary::E, -(max * Binary::E));
                ln - delta * LN_2
            }
        }
    }
}

/// The exponentials of one row's vectors in unit `U` (the [`ExpForm`]: `Natural`
/// or `Binary`), with the row's shift `−max U::E` (`−max`, or `−max log2 e`
/// rounded) in every lane.
struct RowExp<V, U> {
    shift: V,
    unit: PhantomData<U>,
}

impl<V: Simd, U: ExpUnit> RowExp<V, U> {
    /// The shift for a row whose maximum is `max`.
    #[inline(always)]
    fn new(max: f32) -> Self {
        Self {
            shift: V::splat(-(max * U::E)),
            unit: PhantomData,
        }
    }

    /// `exp(x − max)` in this unit: the argument `x U::E − max U::E` in one
    /// rounding (for `Natural`, `x · 1 − max`: `x − max` to the bit).
    #[inline(always)]
    fn of(&self, x: V) -> V {
        exp_in::<V, U>(x.mul_add(V::splat(U::E), self.shift))
    }
}

/// `exp(v − max)` of two vectors, added to the accumulators of even and odd vectors
/// (fixed registers: an `acc[i & 1]` indexed by the loop counter lived on the stack,
/// its adds going through store forwarding, 7 % of softmax's L1 time).
#[inline(always)]
fn exp_pair<V: Simd, U: ExpUnit>([a, b]: [V; 2], e: &RowExp<V, U>, acc: &mut [V; 2]) -> [V; 2] {
    let (ea, eb) = (e.of(a), e.of(b));
    acc[0] = acc[0].add(ea);
    acc[1] = acc[1].add(eb);
    [ea, eb]
}

/// The exponentials of the partial vector `v` (padded with `-inf`) stored to `dst`,
/// and their sum in order: a row shorter than a vector.
#[inline(always)]
fn exp_tail<V: Simd, U: ExpUnit>(v: V, e: &RowExp<V, U>, dst: &mut [f32]) -> f32 {
    let mut buf = [0.0f32; crate::simd::MAX_LANES];
    e.of(v).store(&mut buf);
    let t = dst.len();
    dst.copy_from_slice(&buf[..t]);
    buf[..t].iter().sum::<f32>()
}

/// A row's last `t` values (`0 < t < LANES`, the row at least a vector long) as
/// the whole vector `v` of its last `LANES` inputs: their exponentials stored to
/// `dst` (that vector's place), and the sum of the last `t` in order, the sum
/// [`exp_tail`] takes, read back from `dst`. The lanes before them repeat the
/// whole vectors' values, the same bits (each lane's exponential is its own): a
/// plain store in place of a copy through a buffer (a `memcpy` call per row).
#[inline(always)]
fn exp_tail_overlapping<V: Simd, U: ExpUnit>(
    v: V,
    t: usize,
    e: &RowExp<V, U>,
    dst: &mut [f32],
) -> f32 {
    e.of(v).store(dst);
    dst[V::LANES - t..V::LANES].iter().sum::<f32>()
}

/// `y = exp(x − max)` in the form `form`, returning the sum of `y`, calling
/// `after_pair(i)` after the `i`-th pair of vectors (where the streamed rows
/// write the previous row's output). With `stream`, it asks for the lines
/// [`STREAM_AHEAD_BYTES`](crate::simd::STREAM_AHEAD_BYTES) on, so that memory
/// keeps fetching the next rows while this pass computes.
#[inline(always)]
fn exp_sub_sum<V: Simd>(
    x: &[f32],
    y: &mut [f32],
    max: f32,
    form: ExpForm,
    stream: bool,
    after_pair: impl FnMut(usize),
) -> f32 {
    match form {
        ExpForm::Natural => exp_sum_to::<V, Natural>(x, y, max, stream, after_pair),
        ExpForm::Binary => exp_sum_to::<V, Binary>(x, y, max, stream, after_pair),
    }
}

/// [`exp_sub_sum`] in one form.
#[inline(always)]
fn exp_sum_to<V: Simd, U: ExpUnit>(
    x: &[f32],
    y: &mut [f32],
    max: f32,
    stream: bool,
    mut after_pair: impl FnMut(usize),
) -> f32 {
    let l = V::LANES;
    let e = RowExp::<V, U>::new(max);
    let pairs = x.len() - x.len() % (2 * l);
    let mut acc = [V::splat(0.0); 2];
    for (i, (xc, yc)) in x[..pairs]
        .chunks_exact(2 * l)
        .zip(y[..pairs].chunks_exact_mut(2 * l))
        .enumerate()
    {
        if stream {
            prefetch_ahead(xc);
        }
        let [ea, eb] = exp_pair([V::load(xc), V::load(&xc[l..])], &e, &mut acc);
        let (ya, yb) = yc.split_at_mut(l);
        ea.store(ya);
        eb.store(yb);
        after_pair(i);
    }
    let (mut xs, mut ys) = (&x[pairs..], &mut y[pairs..]);
    if xs.len() >= l {
        let v = e.of(V::load(xs));
        acc[0] = acc[0].add(v);
        v.store(ys);
        (xs, ys) = (&xs[l..], &mut ys[l..]);
    }
    let mut sum = acc[0].add(acc[1]).reduce_sum();
    let (n, t) = (x.len(), xs.len());
    if t > 0 && n >= l {
        sum += exp_tail_overlapping(V::load(&x[n - l..]), t, &e, &mut y[n - l..]);
    } else if t > 0 {
        sum += exp_tail(V::load_tail(xs, f32::NEG_INFINITY), &e, ys);
    }
    sum
}

/// A row's maximum (NaN skipped) and `exps = exp(x − max)` in the form that
/// maximum allows, with their sum.
#[inline(always)]
fn exps_of<V: Simd>(x: &[f32], exps: &mut [f32], stream: bool) -> RowSum {
    let max = row_max_skip_nan::<V>(x, stream);
    let form = ExpForm::for_max::<V>(max);
    let sum = exp_sub_sum::<V>(x, exps, max, form, stream, |_| {});
    RowSum { max, form, sum }
}

/// `y = s · y` in place.
#[inline(always)]
fn scale<V: Simd>(y: &mut [f32], s: f32) {
    let sv = V::splat(s);
    map_inplace::<V>(
        y,
        #[inline(always)]
        |v| v.mul(sv),
    );
}

/// `y = (x − max) − ln_sum`, with the whole vectors past the caches when `S` (the
/// caller fences).
#[inline(always)]
fn write_log_softmax<V: Simd, const S: bool>(x: &[f32], y: &mut [f32], max: f32, ln_sum: f32) {
    let (m, ls) = (V::splat(max), V::splat(ln_sum));
    map_to::<V, S>(
        x,
        y,
        #[inline(always)]
        |v| v.sub(m).sub(ls),
    );
}

/// Softmax of one row, the exponentials through `y`.
#[inline(always)]
fn softmax_row<V: Simd>(x: &[f32], y: &mut [f32], stream: bool) {
    let row = exps_of::<V>(x, y, stream);
    scale::<V>(y, 1.0 / row.sum);
}

/// Log-softmax of one row: the exponentials go through `y` for their sum, then
/// `y` is rewritten from `x`.
#[inline(always)]
fn log_softmax_row<V: Simd>(x: &[f32], y: &mut [f32], stream: bool) {
    let row = exps_of::<V>(x, y, stream);
    write_log_softmax::<V, false>(x, y, row.max, row.ln_sum());
}

/// One streamed row's output, `y = exps · (1 / sum)` (softmax) or `y = (x − max)
/// − ln sum` (log-softmax, when `LOG`): the operations of [`softmax_row`] and
/// [`log_softmax_row`], so the same bits, with the whole vectors past the caches
/// (the caller fences). It holds the stack buffer of the row's exponentials until
/// [`OutRow::finish`] hands it back.
struct OutRow<'a, V, const LOG: bool> {
    x: &'a [f32],
    exps: &'a mut [f32],
    y: &'a mut [f32],
    a: V,
    b: V,
    /// Elements before `y`'s first vector boundary, written by [`OutRow::finish`].
    head: usize,
    /// Pairs of vectors past `head` written by [`OutRow::pair`].
    done: usize,
}

impl<'a, V: Simd, const LOG: bool> OutRow<'a, V, LOG> {
    #[inline(always)]
    fn new(x: &'a [f32], exps: &'a mut [f32], y: &'a mut [f32], row: RowSum) -> Self {
        let (a, b) = if LOG {
            (V::splat(row.max), V::splat(row.ln_sum()))
        } else {
            (V::splat(1.0 / row.sum), V::splat(0.0))
        };
        let head = head_len::<V, _>(y);
        Self {
            x,
            exps,
            y,
            a,
            b,
            head,
            done: 0,
        }
    }

    #[inline(always)]
    fn op(a: V, b: V, v: V) -> V {
        if LOG { v.sub(a).sub(b) } else { v.mul(a) }
    }

    /// The values the output is computed from.
    #[inline(always)]
    fn src<'s>(x: &'s [f32], exps: &'s [f32]) -> &'s [f32] {
        if LOG { x } else { &exps[..x.len()] }
    }

    /// Writes the next pair of whole vectors past the head, if the row has one.
    #[inline(always)]
    fn pair(&mut self) {
        let l = V::LANES;
        let at = self.head + 2 * l * self.done;
        if at + 2 * l <= self.y.len() {
            let src = &Self::src(self.x, self.exps)[at..at + 2 * l];
            let (y0, y1) = self.y[at..at + 2 * l].split_at_mut(l);
            put::<V, true>(Self::op(self.a, self.b, V::load(src)), y0);
            put::<V, true>(Self::op(self.a, self.b, V::load(&src[l..])), y1);
            self.done += 1;
        }
    }

    /// Writes the head and whatever [`OutRow::pair`] has not; returns the buffer.
    #[inline(always)]
    fn finish(self) -> &'a mut [f32] {
        let (a, b, head) = (self.a, self.b, self.head);
        let at = head + 2 * V::LANES * self.done;
        let op = |v| Self::op(a, b, v);
        let src = Self::src(self.x, self.exps);
        map_to::<V, true>(&src[..head], &mut self.y[..head], op);
        map_to::<V, true>(&src[at..], &mut self.y[at..], op);
        self.exps
    }
}

/// Softmax (log-softmax when `LOG`) of rows of at most [`SCRATCH_COLS`] values
/// into an output written past the caches (the caller fences). Each row's
/// exponentials go to one of two stack buffers, and the output is written once,
/// from them or from `x`, software-pipelined: row `r`'s output goes out a pair
/// of vectors at a time inside row `r + 1`'s exponential pass. Written in a burst
/// of its own after each row, the non-temporal stores filled the write-combining
/// buffers and stalled the core while memory idled through the exponentials.
#[inline(always)]
fn streamed_rows<V: Simd, const LOG: bool>(x: &[f32], y: &mut [f32], cols: usize) {
    let mut bufs = [0.0f32; 2 * SCRATCH_COLS];
    let (mut free, mut second) = bufs.split_at_mut(SCRATCH_COLS);
    let mut pending: Option<OutRow<'_, V, LOG>> = None;
    for (xr, yr) in x.chunks_exact(cols).zip(y.chunks_exact_mut(cols)) {
        let exps = core::mem::take(&mut free);
        // No requests ahead from the max pass: the exponential pass's (8 KiB
        // on) already cover the next rows, and a burst of its own slowed the
        // whole (64 MiB, 1024 columns, medians of four paired sets: 54-61 ->
        // 58-68 % of `copy`, session 42).
        let max = row_max_skip_nan::<V>(xr, false);
        let form = ExpForm::for_max::<V>(max);
        let sum = match pending.as_mut() {
            Some(out) => exp_sub_sum::<V>(
                xr,
                &mut exps[..cols],
                max,
                form,
                true,
                #[inline(always)]
                |_| out.pair(),
            ),
            None => exp_sub_sum::<V>(xr, &mut exps[..cols], max, form, true, |_| {}),
        };
        free = match pending.take() {
            Some(out) => out.finish(),
            None => core::mem::take(&mut second),
        };
        pending = Some(OutRow::new(xr, exps, yr, RowSum { max, form, sum }));
    }
    if let Some(out) = pending {
        out.finish();
    }
}

/// Softmax of rows `rows` of the row-major matrix `x` (`cols` columns) into `y`,
/// which holds exactly those rows (`rows.len() * cols` values).
///
/// Errors: [`Error::BufferTooSmall`] if `x` has fewer than `rows.end * cols`
/// values, [`Error::LengthMismatch`] for a wrongly sized `y`.
pub fn softmax_rows(x: &[f32], cols: usize, rows: Range<usize>, y: &mut [f32]) -> Result<()> {
    rows_of(x, cols, rows, y, false)
}

/// Log-softmax `(x − max) − ln Σ exp(x − max)` of rows `rows` of `x` into `y`,
/// as [`softmax_rows`] (same errors). A row holding NaN or `+inf`, or only
/// `-inf`, gives NaN.
pub fn log_softmax_rows(x: &[f32], cols: usize, rows: Range<usize>, y: &mut [f32]) -> Result<()> {
    rows_of(x, cols, rows, y, true)
}

/// [`softmax_rows`], or [`log_softmax_rows`] when `log`.
fn rows_of(x: &[f32], cols: usize, rows: Range<usize>, y: &mut [f32], log: bool) -> Result<()> {
    let (first, count) = check_rows(x.len(), cols, &rows)?;
    if y.len() != count {
        return Err(Error::LengthMismatch {
            expected: count,
            got: y.len(),
        });
    }
    if cols == 0 {
        return Ok(());
    }
    let x = &x[first..first + count];
    let row_pairs = x.chunks_exact(cols).zip(y.chunks_exact_mut(cols));
    if streams_out(count) && cols <= SCRATCH_COLS {
        // A dispatch of its own, so only this path's frame holds the buffer.
        if log {
            dispatch!(|V| streamed_rows::<V, true>(x, y, cols));
        } else {
            dispatch!(|V| streamed_rows::<V, false>(x, y, cols));
        }
        store_fence();
        return Ok(());
    }
    let stream = streams(count);
    dispatch!(|V| {
        for (xr, yr) in row_pairs {
            if log {
                log_softmax_row::<V>(xr, yr, stream);
            } else {
                softmax_row::<V>(xr, yr, stream);
            }
        }
    });
    Ok(())
}

/// Softmax of every row of `x` (`cols` columns) in place; `x.len()` must be a
/// multiple of `cols` ([`Error::LengthMismatch`] otherwise).
pub fn softmax_rows_inplace(x: &mut [f32], cols: usize) -> Result<()> {
    if cols == 0 {
        return Ok(());
    }
    if !x.len().is_multiple_of(cols) {
        return Err(Error::LengthMismatch {
            expected: x.len() - x.len() % cols,
            got: x.len(),
        });
    }
    let stream = streams(x.len());
    dispatch!(|V| {
        for r in x.chunks_exact_mut(cols) {
            let max = row_max_skip_nan::<V>(r, stream);
            let sum = exp_sub_sum_inplace::<V>(r, max, ExpForm::for_max::<V>(max));
            scale::<V>(r, 1.0 / sum);
        }
    });
    Ok(())
}

/// The unscaled parts of a softmax of every row of `x` (`cols` columns), in place:
/// `x ← exp(x − max)` with each row's `max` in `maxes` and the sum of its
/// exponentials in `sums`; dividing a row by its sum gives the softmax.
///
/// For attention over blocks of positions (split-K, "flash-decoding"): each block
/// keeps its own maximum, and the blocks are combined later by rescaling with
/// `exp(max_block − max_all)`, so no block waits for the others. The
/// exponentials here are `e^{x − max}` themselves, with no constant of the
/// row's in them (softmax and log-softmax take theirs in binary units: see the
/// module docs).
///
/// Errors: [`Error::LengthMismatch`] when `x.len()` is not a multiple of `cols` or
/// `maxes`/`sums` do not hold one value per row.
pub fn softmax_parts_inplace(
    x: &mut [f32],
    cols: usize,
    maxes: &mut [f32],
    sums: &mut [f32],
) -> Result<()> {
    let rows = x.len().checked_div(cols).unwrap_or(0);
    if rows * cols != x.len() {
        return Err(Error::LengthMismatch {
            expected: rows * cols,
            got: x.len(),
        });
    }
    for got in [maxes.len(), sums.len()] {
        if got != rows {
            return Err(Error::LengthMismatch {
                expected: rows,
                got,
            });
        }
    }
    if rows == 0 {
        return Ok(());
    }
    let stream = streams(x.len());
    dispatch!(|V| {
        for ((r, m), s) in x
            .chunks_exact_mut(cols)
            .zip(maxes.iter_mut())
            .zip(sums.iter_mut())
        {
            *m = row_max::<V>(r, stream);
            *s = exp_sub_sum_inplace::<V>(r, *m, ExpForm::Natural);
        }
    });
    Ok(())
}

/// `x = exp(x − max)` in place in the form `form`, returning the sum of the new
/// `x`.
#[inline(always)]
fn exp_sub_sum_inplace<V: Simd>(x: &mut [f32], max: f32, form: ExpForm) -> f32 {
    match form {
        ExpForm::Natural => exp_sum_inplace::<V, Natural>(x, max),
        ExpForm::Binary => exp_sum_inplace::<V, Binary>(x, max),
    }
}

/// [`exp_sub_sum_inplace`] in one form.
#[inline(always)]
fn exp_sum_inplace<V: Simd, U: ExpUnit>(x: &mut [f32], max: f32) -> f32 {
    let l = V::LANES;
    let e = RowExp::<V, U>::new(max);
    let n = x.len();
    let (pairs, whole, t) = (n - n % (2 * l), n - n % l, n % l);
    // The tail's overlapping vector is read before the loops overwrite its
    // first lanes.
    let tail_in = if t > 0 && whole > 0 {
        Some(V::load(&x[n - l..]))
    } else {
        None
    };
    let mut acc = [V::splat(0.0); 2];
    for c in x[..pairs].chunks_exact_mut(2 * l) {
        let [ea, eb] = exp_pair([V::load(c), V::load(&c[l..])], &e, &mut acc);
        let (ca, cb) = c.split_at_mut(l);
        ea.store(ca);
        eb.store(cb);
    }
    if whole > pairs {
        let v = e.of(V::load(&x[pairs..]));
        acc[0] = acc[0].add(v);
        v.store(&mut x[pairs..]);
    }
    let mut sum = acc[0].add(acc[1]).reduce_sum();
    if let Some(v) = tail_in {
        sum += exp_tail_overlapping(v, t, &e, &mut x[n - l..]);
    } else if t > 0 {
        let x = &mut x[whole..];
        sum += exp_tail(V::load_tail(x, f32::NEG_INFINITY), &e, x);
    }
    sum
}
