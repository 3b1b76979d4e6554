//! Elementwise unary and binary kernels over f32 slices, with last-axis
//! broadcasting for binary ops (a row vector against every row of a matrix, a
//! scalar against everything).
//!
//! Binary ops take a row-major matrix of `cols` columns and a range of its rows, so
//! a host can split the rows across threads: matrix operands are whole matrices,
//! and `out` holds exactly the rows of the range.

use core::ops::Range;

use rml_core::{Error, Result};

use crate::math::tanh_v;
use crate::math::{
    erf_v, exp_pair_v, exp_v, gelu_pair_v, gelu_tanh_pair_v, gelu_tanh_v, gelu_v, log_pair_v,
    log_v, sigmoid_pair_v, sigmoid_v, silu_pair_v, silu_v, softplus_v,
};
use crate::simd::{Edges, Simd, dispatch, dispatch_streamed, prefetch_ahead, put};

/// A unary f32 function applied elementwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    /// `e^x`.
    Exp,
    /// `ln x`.
    Log,
    /// `tanh x`.
    Tanh,
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// `erf x`.
    Erf,
    /// GELU, erf form.
    Gelu,
    /// GELU, tanh approximation.
    GeluTanh,
    /// `x sigmoid(x)`.
    Silu,
    /// `ln(1 + e^x)`.
    Softplus,
    /// `-x`.
    Neg,
    /// `|x|`.
    Abs,
    /// `max(x, 0)` (NaN stays NaN).
    Relu,
    /// `sqrt x` (correctly rounded).
    Sqrt,
    /// `x * x`.
    Square,
    /// `1 / x`.
    Recip,
}

impl UnaryOp {
    /// Every unary op.
    pub const ALL: [UnaryOp; 15] = [
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Erf,
        UnaryOp::Gelu,
        UnaryOp::GeluTanh,
        UnaryOp::Silu,
        UnaryOp::Softplus,
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Relu,
        UnaryOp::Sqrt,
        UnaryOp::Square,
        UnaryOp::Recip,
    ];

    /// Lower-case name (`"gelu_tanh"`, …).
    pub const fn name(self) -> &'static str {
        match self {
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Erf => "erf",
            UnaryOp::Gelu => "gelu",
            UnaryOp::GeluTanh => "gelu_tanh",
            UnaryOp::Silu => "silu",
            UnaryOp::Softplus => "softplus",
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Relu => "relu",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Square => "square",
            UnaryOp::Recip => "recip",
        }
    }
}

/// A binary f32 operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
    /// `max(a, b)`, NaN if either is NaN (like `numpy.maximum`).
    Max,
    /// `min(a, b)`, NaN if either is NaN (like `numpy.minimum`).
    Min,
}

impl BinaryOp {
    /// Every binary op.
    pub const ALL: [BinaryOp; 6] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Max,
        BinaryOp::Min,
    ];

    /// Lower-case name.
    pub const fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Max => "max",
            BinaryOp::Min => "min",
        }
    }

    /// The op on one pair of values, with the kernels' semantics.
    pub fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Max if a.is_nan() || b.is_nan() => f32::NAN,
            BinaryOp::Min if a.is_nan() || b.is_nan() => f32::NAN,
            BinaryOp::Max => a.max(b),
            BinaryOp::Min => a.min(b),
        }
    }
}

/// One operand of a binary op over a `rows x cols` row-major matrix.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    /// A whole matrix (`len >= rows.end * cols`); row `r` is `m[r*cols..(r+1)*cols]`.
    Matrix(&'a [f32]),
    /// One row of `cols` values broadcast to every row (last-axis broadcasting).
    Row(&'a [f32]),
    /// One value broadcast to every element.
    Scalar(f32),
}

#[inline(always)]
fn unary_v<V: Simd>(op: UnaryOp, x: V) -> V {
    match op {
        UnaryOp::Exp => exp_v(x),
        UnaryOp::Log => log_v(x),
        UnaryOp::Tanh => tanh_v(x),
        UnaryOp::Sigmoid => sigmoid_v(x),
        UnaryOp::Erf => erf_v(x),
        UnaryOp::Gelu => gelu_v(x),
        UnaryOp::GeluTanh => gelu_tanh_v(x),
        UnaryOp::Silu => silu_v(x),
        UnaryOp::Softplus => softplus_v(x),
        UnaryOp::Neg => x.mul(V::splat(-1.0)),
        UnaryOp::Abs => x.abs(),
        // `0 > x ? 0 : x`: NaN and -0.0 stay, in one `maxps` on x86.
        UnaryOp::Relu => V::splat(0.0).max_skip_nan(x),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Square => x.mul(x),
        UnaryOp::Recip => V::splat(1.0).div(x),
    }
}

/// `op` on two vectors. The kernels with a per-vector common-case branch take both
/// vectors down one branch where they can, so that the two dependency chains
/// interleave (`math`'s `pair_common`, [`gelu_pair_v`]); the others run one
/// vector after the other.
#[inline(always)]
fn unary_pair_v<V: Simd>(op: UnaryOp, pair: [V; 2]) -> [V; 2] {
    match op {
        UnaryOp::Exp => exp_pair_v(pair),
        UnaryOp::Log => log_pair_v(pair),
        UnaryOp::Sigmoid => sigmoid_pair_v(pair),
        UnaryOp::Gelu => gelu_pair_v(pair),
        UnaryOp::GeluTanh => gelu_tanh_pair_v(pair),
        UnaryOp::Silu => silu_pair_v(pair),
        _ => {
            let [a, b] = pair;
            [unary_v(op, a), unary_v(op, b)]
        }
    }
}

/// `y = op(x)` over fewer than `V::LANES` elements, through a padded vector
/// ([`Simd::load_tail`], [`Simd::store_tail`]): a call shorter than a vector.
#[inline(always)]
fn map_short<V: Simd>(x: &[f32], y: &mut [f32], op: &impl Fn([V; 2]) -> [V; 2]) {
    if !x.is_empty() {
        alone(op, V::load_tail(x, 0.0)).store_tail(y);
    }
}

/// A two-vector op applied to one vector: `op([v, v])`'s first half. The twin is
/// the same value through the same instructions, which LLVM folds into one
/// evaluation (the one-lane path, which runs every element through here, times
/// the same as before the pairing).
#[inline(always)]
fn alone<V: Simd>(op: &impl Fn([V; 2]) -> [V; 2], v: V) -> V {
    let [y, _] = op([v, v]);
    y
}

/// An elementwise output larger than this is written past the caches
/// ([`Simd::store_stream`]): it exceeds the L3 of the machines measured here (32
/// MiB on the Zen 3 and the Zen 5), so it could not stay cached for its reader,
/// and non-temporal stores save reading every line before overwriting it, as
/// memcpy does past a similar size. 64 MiB ReLU and exp took 0.63–0.73× the time
/// of the same run's memcpy this way, 0.8–1.2× with plain stores (session 17).
const STREAM_STORE_MIN_BYTES: usize = 32 << 20;

/// Whether an elementwise call writing `len` f32 streams its output past the caches.
pub(crate) fn streams_out(len: usize) -> bool {
    len.saturating_mul(core::mem::size_of::<f32>()) > STREAM_STORE_MIN_BYTES
}

/// `y = f(x)` vector by vector, the loop's stores aligned to whole vectors and
/// the partial ones at either end written as overlapping whole ones ([`Edges`]);
/// with `S`, the whole vectors go past the caches and `x` is asked for ahead
/// ([`prefetch_ahead`]).
#[inline(always)]
pub(crate) fn map_to<V: Simd, const S: bool>(x: &[f32], y: &mut [f32], f: impl Fn(V) -> V) {
    map_pairs_to::<V, S>(
        x,
        y,
        #[inline(always)]
        |[a, b]| [f(a), f(b)],
    );
}

/// [`map_to`] with an op that takes two vectors at a time: one whose form hangs on
/// a test of each vector can take both down one branch, where the two dependency
/// chains interleave ([`unary_pair_v`]). A vector alone (an odd last whole vector,
/// the [`Edges`]) goes through [`alone`]. `x` holds as many values as `y`.
#[inline(always)]
fn map_pairs_to<V: Simd, const S: bool>(x: &[f32], y: &mut [f32], op: impl Fn([V; 2]) -> [V; 2]) {
    let x = &x[..y.len()];
    let Some(edges) = Edges::of::<V>(y) else {
        map_short(x, y, &op);
        return;
    };
    map_whole::<V, S>(&x[edges.head..], &mut y[edges.head..], &op);
    edges
        .values(
            #[inline(always)]
            |at| alone(&op, V::load(&x[at..])),
        )
        .store(y);
}

/// `y = op(x)` over the whole vectors of `y` (which starts on a vector boundary;
/// `x` as long), two a step on the SIMD types; values past the last whole vector
/// are the caller's. With `S` the stores go past the caches and `x` is asked for
/// ahead ([`prefetch_ahead`]).
#[inline(always)]
fn map_whole<V: Simd, const S: bool>(x: &[f32], y: &mut [f32], op: &impl Fn([V; 2]) -> [V; 2]) {
    let l = V::LANES;
    let main = y.len() - y.len() % l;
    let (xm, ym) = (&x[..main], &mut y[..main]);
    // SIMD types run two vectors per iteration: two independent dependency chains
    // side by side keep more of a long transcendental's latency covered (erf,
    // softplus, exp: ~10% faster). The one-lane scalar type keeps the plain loop,
    // which LLVM auto-vectorizes (a paired one-lane loop it does not).
    let pairs = if l > 1 { main - main % (2 * l) } else { 0 };
    let (xp, xr) = xm.split_at(pairs);
    let (yp, yr) = ym.split_at_mut(pairs);
    for (xc, yc) in xp.chunks_exact(2 * l).zip(yp.chunks_exact_mut(2 * l)) {
        if S {
            prefetch_ahead(xc);
        }
        let (y0, y1) = yc.split_at_mut(l);
        let [v0, v1] = op([V::load(&xc[..l]), V::load(&xc[l..])]);
        put::<V, S>(v0, y0);
        put::<V, S>(v1, y1);
    }
    for (xc, yc) in xr.chunks_exact(l).zip(yr.chunks_exact_mut(l)) {
        put::<V, S>(alone(op, V::load(xc)), yc);
    }
}

/// `x = f(x)` in place, stores aligned as [`map_to`]'s.
#[inline(always)]
pub(crate) fn map_inplace<V: Simd>(x: &mut [f32], f: impl Fn(V) -> V) {
    map_pairs_inplace::<V>(
        x,
        #[inline(always)]
        |[a, b]| [f(a), f(b)],
    );
}

/// [`map_pairs_to`] in place: two vectors a step on the SIMD types. The
/// [`Edges`] take their values from the input before the whole vectors overwrite
/// it, and store them after.
#[inline(always)]
fn map_pairs_inplace<V: Simd>(x: &mut [f32], op: impl Fn([V; 2]) -> [V; 2]) {
    let Some(edges) = Edges::of::<V>(x) else {
        map_short_inplace(x, &op);
        return;
    };
    let saved = edges.values(
        #[inline(always)]
        |at| alone(&op, V::load(&x[at..])),
    );
    map_whole_inplace(&mut x[edges.head..], &op);
    saved.store(x);
}

/// [`map_whole`] in place.
#[inline(always)]
fn map_whole_inplace<V: Simd>(x: &mut [f32], op: &impl Fn([V; 2]) -> [V; 2]) {
    let l = V::LANES;
    let main = x.len() - x.len() % l;
    let xm = &mut x[..main];
    let pairs = if l > 1 { main - main % (2 * l) } else { 0 };
    let (xp, xr) = xm.split_at_mut(pairs);
    for c in xp.chunks_exact_mut(2 * l) {
        let (c0, c1) = c.split_at_mut(l);
        let [v0, v1] = op([V::load(c0), V::load(c1)]);
        v0.store(c0);
        v1.store(c1);
    }
    for c in xr.chunks_exact_mut(l) {
        alone(op, V::load(c)).store(c);
    }
}

/// [`map_short`] in place.
#[inline(always)]
fn map_short_inplace<V: Simd>(x: &mut [f32], op: &impl Fn([V; 2]) -> [V; 2]) {
    if !x.is_empty() {
        let v = alone(op, V::load_tail(x, 0.0));
        v.store_tail(x);
    }
}

/// Calls `$kernel::<$gen...>($arg..., f)` with `f` the op on two vectors
/// ([`unary_pair_v`]) as an always-inlined closure (one instance per op, so the
/// op's match folds away).
macro_rules! each_unary {
    ($op:expr, $kernel:ident::<$($gen:tt),*>($($arg:expr),*)) => {
        match $op {
            UnaryOp::Exp => $kernel::<$($gen),*>($($arg,)* #[inline(always)] |p| unary_pair_v::<V>(UnaryOp::Exp, p)),
            UnaryOp::Log => $kernel::<$($gen),*>($($arg,)* #[inline(always)] |p| unary_pair_v::<V>(UnaryOp::Log, p)),
            UnaryOp::Tanh => $kernel::<$($gen),*>($($arg,)* #[inline(always)] |p| unary_pair_v::<V>(UnaryOp::Tanh, p)),
            UnaryOp::Sigmoid => $kernel::<$($gen),*>($($arg,)* #[inline(always)] |p| unary_pair_v::<V>(UnaryOp::Sigmoid, p)),
            UnaryOp::Erf => $kernel::<$($gen),*>($($arg,)* #[inline(always)] |p| unary_pair_v::<V>(UnaryOp::Erf, p)),
            UnaryOp::Gelu => $kernel::<$($gen),*>($($arg,)* #[inline(always)] |p| unary_pair_v::<V>(UnaryOp::Gelu, p)),
            UnaryOp::GeluTanh => $kernel::<$($gen),*>($($arg,)* #[inline(always)] |p| unary_pair_v::<V>(UnaryOp::GeluTanh, p)),
            UnaryOp::Silu => $kernel::<$($gen),*>($($arg,)* #[inline(always)] |p| unary_pair_v::<V>(UnaryOp::Silu, p)),
            UnaryOp::Softplus => $kernel::<$($gen),*>($($arg,)* #[inline(always)] |p| unary_pair_v::<V>(UnaryOp::Softplus, p)),
            UnaryOp::Neg => $kernel::<$($gen),*>($($arg,)* #[inline(always)] |p| unary_pair_v::<V>(UnaryOp::Neg, p)),
            UnaryOp::Abs => $kernel::<$($gen),*>($($arg,)* #[inline(always)] |p| unary_pair_v::<V>(UnaryOp::Abs, p)),
            UnaryOp::Relu => $kernel::<$($gen),*>($($arg,)* #[inline(always)] |p| unary_pair_v::<V>(UnaryOp::Relu, p)),
            UnaryOp::Sqrt => $kernel::<$($gen),*>($($arg,)* #[inline(always)] |p| unary_pair_v::<V>(UnaryOp::Sqrt, p)),
            UnaryOp::Square => $kernel::<$($gen),*>($($arg,)* #[inline(always)] |p| unary_pair_v::<V>(UnaryOp::Square, p)),
            UnaryOp::Recip => $kernel::<$($gen),*>($($arg,)* #[inline(always)] |p| unary_pair_v::<V>(UnaryOp::Recip, p)),
        }
    };
}

/// `y[i] = op(x[i])`. Errors with [`Error::LengthMismatch`] unless
/// `x.len() == y.len()`.
pub fn unary(op: UnaryOp, x: &[f32], y: &mut [f32]) -> Result<()> {
    if x.len() != y.len() {
        return Err(Error::LengthMismatch {
            expected: x.len(),
            got: y.len(),
        });
    }
    dispatch_streamed!(streams_out(y.len()), |V, S| each_unary!(
        op,
        map_pairs_to::<V, S>(x, y)
    ));
    Ok(())
}

/// `x[i] = op(x[i])` in place.
pub fn unary_inplace(op: UnaryOp, x: &mut [f32]) {
    dispatch!(|V| each_unary!(op, map_pairs_inplace::<V>(x)));
}

/// Checks a row range against a matrix of `len` elements and returns
/// `(first, count)` element offsets of the rows.
pub(crate) fn check_rows(len: usize, cols: usize, rows: &Range<usize>) -> Result<(usize, usize)> {
    if rows.start > rows.end {
        return Err(Error::InvalidArgument("row range start exceeds its end"));
    }
    let end = rows.end.checked_mul(cols).ok_or(Error::Overflow)?;
    if end > len {
        return Err(Error::BufferTooSmall {
            needed: end,
            got: len,
        });
    }
    let start = rows.start * cols;
    Ok((start, end - start))
}

/// Where a row of an operand comes from.
#[derive(Clone, Copy)]
enum Src<'a> {
    Slice(&'a [f32]),
    Splat(f32),
}

/// `out = f(a, b)` over fewer than `V::LANES` elements, through padded vectors
/// (see [`map_short`]).
#[inline(always)]
fn zip_short<V: Simd>(a: &[f32], b: &[f32], out: &mut [f32], f: &impl Fn(V, V) -> V) {
    if !out.is_empty() {
        let n = out.len();
        f(V::load_tail(&a[..n], 1.0), V::load_tail(&b[..n], 1.0)).store_tail(out);
    }
}

/// `out = f(a, b)` over the whole vectors of `out` (which starts on a vector
/// boundary; `a` and `b` as long), past the caches with `S`; values past the last
/// whole vector are the caller's.
#[inline(always)]
fn zip_whole<V: Simd, const S: bool>(
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
    f: &impl Fn(V, V) -> V,
) {
    let l = V::LANES;
    let main = out.len() - out.len() % l;
    for ((ac, bc), oc) in a[..main]
        .chunks_exact(l)
        .zip(b[..main].chunks_exact(l))
        .zip(out[..main].chunks_exact_mut(l))
    {
        if S {
            prefetch_ahead(ac);
            prefetch_ahead(bc);
        }
        put::<V, S>(f(V::load(ac), V::load(bc)), oc);
    }
}

/// `out = f(a, b)` for one row or flat run, `a` and `b` slices as long as `out`
/// or splats.
#[inline(always)]
fn bin_rows<V: Simd, const S: bool>(
    a: Src<'_>,
    b: Src<'_>,
    out: &mut [f32],
    f: impl Fn(V, V) -> V,
) {
    let n = out.len();
    match (a, b) {
        (Src::Slice(a), Src::Slice(b)) => {
            let (a, b) = (&a[..n], &b[..n]);
            let Some(edges) = Edges::of::<V>(out) else {
                zip_short(a, b, out, &f);
                return;
            };
            let head = edges.head;
            zip_whole::<V, S>(&a[head..], &b[head..], &mut out[head..], &f);
            edges
                .values(
                    #[inline(always)]
                    |at| f(V::load(&a[at..]), V::load(&b[at..])),
                )
                .store(out);
        }
        (Src::Slice(a), Src::Splat(s)) => {
            let s = V::splat(s);
            map_to::<V, S>(
                &a[..n],
                out,
                #[inline(always)]
                |x| f(x, s),
            );
        }
        (Src::Splat(s), Src::Slice(b)) => {
            let s = V::splat(s);
            map_to::<V, S>(
                &b[..n],
                out,
                #[inline(always)]
                |x| f(s, x),
            );
        }
        (Src::Splat(a), Src::Splat(b)) => {
            let v = f(V::splat(a), V::splat(b));
            let mut one = [0.0f32; crate::simd::MAX_LANES];
            v.store(&mut one);
            out.fill(one[0]);
        }
    }
}

#[inline(always)]
fn bin_v<V: Simd, const S: bool>(op: BinaryOp, a: Src<'_>, b: Src<'_>, out: &mut [f32]) {
    match op {
        BinaryOp::Add => bin_rows::<V, S>(
            a,
            b,
            out,
            #[inline(always)]
            |x, y| x.add(y),
        ),
        BinaryOp::Sub => bin_rows::<V, S>(
            a,
            b,
            out,
            #[inline(always)]
            |x, y| x.sub(y),
        ),
        BinaryOp::Mul => bin_rows::<V, S>(
            a,
            b,
            out,
            #[inline(always)]
            |x, y| x.mul(y),
        ),
        BinaryOp::Div => bin_rows::<V, S>(
            a,
            b,
            out,
            #[inline(always)]
            |x, y| x.div(y),
        ),
        BinaryOp::Max => bin_rows::<V, S>(
            a,
            b,
            out,
            #[inline(always)]
            |x, y| x.max(y),
        ),
        BinaryOp::Min => bin_rows::<V, S>(
            a,
            b,
            out,
            #[inline(always)]
            |x, y| x.min(y),
        ),
    }
}

/// The source of one row (starting at element `at` of the block) of an operand.
fn row_src<'a>(s: Option<Src<'a>>, whole: Operand<'a>, at: usize, cols: usize) -> Src<'a> {
    match (s, whole) {
        (Some(Src::Slice(m)), _) => Src::Slice(&m[at..at + cols]),
        (Some(Src::Splat(v)), _) => Src::Splat(v),
        (None, Operand::Row(r)) => Src::Slice(r),
        (None, _) => Src::Splat(0.0),
    }
}

/// Checks one operand and returns its source for the element block
/// `[first, first + count)` (or `None` for a per-row operand).
fn operand_src<'a>(o: Operand<'a>, cols: usize, rows: &Range<usize>) -> Result<Option<Src<'a>>> {
    match o {
        Operand::Matrix(m) => {
            let (first, count) = check_rows(m.len(), cols, rows)?;
            Ok(Some(Src::Slice(&m[first..first + count])))
        }
        Operand::Row(r) => {
            if r.len() != cols {
                return Err(Error::LengthMismatch {
                    expected: cols,
                    got: r.len(),
                });
            }
            Ok(None)
        }
        Operand::Scalar(s) => Ok(Some(Src::Splat(s))),
    }
}

/// [`binary`]'s work once its operands are checked: one flat run when neither
/// operand is per-row (`src` both `Some`), else row by row; with `S`, the whole
/// vectors go past the caches. The flat run is one row as long as `out`, so each
/// op's loops are compiled once per ISA and `S`: with a second call for it, LLVM
/// left the chunk iterators' `zip` out of line in the AVX2 copies (24 values: 27
/// -> 24 ns).
#[inline(always)]
fn binary_v<V: Simd, const S: bool>(
    op: BinaryOp,
    [a, b]: [Option<Src<'_>>; 2],
    [lhs, rhs]: [Operand<'_>; 2],
    cols: usize,
    out: &mut [f32],
) {
    let run = if a.is_some() && b.is_some() {
        out.len()
    } else {
        cols
    };
    for (i, o) in out.chunks_exact_mut(run.max(1)).enumerate() {
        let at = i * run;
        let (ra, rb) = (row_src(a, lhs, at, run), row_src(b, rhs, at, run));
        bin_v::<V, S>(op, ra, rb, o);
    }
}

/// `out = lhs op rhs` over rows `rows` of a `cols`-column row-major matrix, with
/// [`Operand::Row`] and [`Operand::Scalar`] broadcast along the last axis.
///
/// `out` holds exactly the rows of `rows` (`rows.len() * cols` values). Errors:
/// [`Error::BufferTooSmall`] for a matrix operand shorter than `rows.end * cols`,
/// [`Error::LengthMismatch`] for a row operand whose length is not `cols` or an
/// `out` of the wrong length.
pub fn binary(
    op: BinaryOp,
    lhs: Operand<'_>,
    rhs: Operand<'_>,
    cols: usize,
    rows: Range<usize>,
    out: &mut [f32],
) -> Result<()> {
    let expected = rows.len().checked_mul(cols).ok_or(Error::Overflow)?;
    if out.len() != expected {
        return Err(Error::LengthMismatch {
            expected,
            got: out.len(),
        });
    }
    let a = operand_src(lhs, cols, &rows)?;
    let b = operand_src(rhs, cols, &rows)?;
    dispatch_streamed!(streams_out(out.len()), |V, S| binary_v::<V, S>(
        op,
        [a, b],
        [lhs, rhs],
        cols,
        out
    ));
    Ok(())
}
