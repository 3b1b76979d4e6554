//! Row reductions: sum, max, mean and variance of each row of a row-major matrix.
//!
//! Sums run in `8 * LANES` independent partial sums (eight vector accumulators,
//! added pairwise at the end), so results differ from a sequential sum by
//! rounding only; the order is fixed per ISA and row length, so a given ISA is
//! deterministic.

use core::ops::Range;

use rml_core::{Error, Result};

use crate::elementwise::check_rows;
use crate::simd::{AheadShare, MAX_LANES, Simd, dispatch, for_each_asking, prefetch_ahead};

/// A reduction over the last axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Sum of the row (0 for an empty row).
    Sum,
    /// Maximum of the row, NaN if any element is NaN (`-inf` for an empty row).
    Max,
    /// Mean of the row (NaN for an empty row).
    Mean,
    /// Population variance `mean((x - mean)^2)` (on a vector path, sums of the
    /// deviations from the mean of the row's first vector, falling back to the
    /// two-pass form where that shift is poor, over a row of up to 4096 values;
    /// blockwise two-pass moments merged by Chan's update over a longer one;
    /// either way one sweep over memory; NaN for an empty row).
    Variance,
}

impl ReduceOp {
    /// Every reduction.
    pub const ALL: [ReduceOp; 4] = [
        ReduceOp::Sum,
        ReduceOp::Max,
        ReduceOp::Mean,
        ReduceOp::Variance,
    ];

    /// Lower-case name.
    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Mean => "mean",
            ReduceOp::Variance => "variance",
        }
    }
}

/// How many vector accumulators [`lane_sums`] keeps: eight adds in flight cover
/// an add's latency on both of the Zen 3's add pipes. With four, the one-lane
/// path's L1 sums, variances and norms ran 1.3-1.9x slower (session 27); the AVX2
/// ones, held by their loads and the norms' scaling pass, moved within the spread
/// of code placement (RMS norm 2-5 % faster, sum 20 %).
const ACCUMULATORS: usize = 8;

/// Lane-wise sums over the vectors of `x` (a whole number of vectors) in
/// [`ACCUMULATORS`] accumulators added pairwise at the end: `add(acc, v)` returns
/// `acc` plus the term vector `v` contributes, so a square fuses into one
/// `mul_add` (an FMA on the vector paths: a variance of two rows of 1024 in L1
/// took 194-199 ns against 228-230 with a multiply and an add, on the Zen 3 in
/// session 28). With `ahead`, each group of [`ACCUMULATORS`] vectors first asks
/// for its part of the lines ahead.
#[inline(always)]
fn lane_sums<V: Simd>(x: &[f32], ahead: Option<AheadShare>, add: impl Fn(V, V) -> V) -> V {
    let mut acc = [V::splat(0.0); ACCUMULATORS];
    for_each_vector::<V, ACCUMULATORS>(
        x,
        ahead,
        #[inline(always)]
        |k, v| acc[k] = add(acc[k], v),
    );
    add_pairwise(&mut acc)
}

/// Calls `f(k, v)` on each vector `v` of `x` (a whole number of them), `k` cycling
/// through `0..N` so that the caller's `N` chains of accumulators run side by side
/// (vectors `k`, `k + N`, … go to chain `k`). With `ahead`, each group of `N`
/// vectors first asks for its part of the lines ahead.
#[inline(always)]
fn for_each_vector<V: Simd, const N: usize>(
    x: &[f32],
    ahead: Option<AheadShare>,
    mut f: impl FnMut(usize, V),
) {
    let l = V::LANES;
    let chunk = N * l;
    let big = x.len() - x.len() % chunk;
    for_each_asking(
        x[..big].chunks_exact(chunk),
        ahead,
        chunk * core::mem::size_of::<f32>(),
        #[inline(always)]
        |c| {
            for k in 0..N {
                f(k, V::load(&c[k * l..]));
            }
        },
    );
    // Fewer than `N` vectors remain: one for each chain. `k` comes from `0..N`,
    // not `enumerate`, so the callers' `acc[k]` need no bounds check (with
    // `enumerate` the one-lane variance and norms ran 10-20 % slower, session 35).
    for (k, c) in (0..N).zip(x[big..].chunks_exact(l)) {
        f(k, V::load(c));
    }
}

/// The sum of `acc`'s vectors (a power of two of them), added pairwise: each
/// half onto the other until one is left.
#[inline(always)]
fn add_pairwise<V: Simd>(acc: &mut [V]) -> V {
    let mut n = acc.len();
    while n > 1 {
        n /= 2;
        for k in 0..n {
            acc[k] = acc[k].add(acc[k + n]);
        }
    }
    acc[0]
}

/// Sum over a row of the terms `add(acc, v)` adds to `acc` ([`lane_sums`], asking
/// for its part of the lines ahead as it goes when given `ahead`).
#[inline(always)]
pub(crate) fn row_sum_map<V: Simd>(
    x: &[f32],
    ahead: Option<AheadShare>,
    add: impl Fn(V, V) -> V,
) -> f32 {
    let l = V::LANES;
    let main = x.len() - x.len() % l;
    let mut acc = lane_sums::<V>(&x[..main], ahead, &add);
    if main < x.len() {
        // The padding lanes must contribute 0: mask their terms out.
        let t = &x[main..];
        let term = add(V::splat(0.0), V::load_tail(t, 0.0));
        acc = acc.add(V::select(tail_mask::<V>(t.len()), term, V::splat(0.0)));
    }
    acc.reduce_sum()
}

/// Each lane's index, for [`tail_mask`].
const LANE_INDEX: [f32; MAX_LANES] = [
    0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0,
];

/// The mask of the first `len < V::LANES` lanes: lane indices below `len`. (Built
/// in a stack buffer instead, it compiled on AVX2 to a masked store that the
/// next load waited on: a variance of rows of 100 values took longer than the
/// one-lane path's, 851 against 780 ns per 2 KiB, and now 350; rows of 333
/// values 388 -> 300 ns; session 28.)
#[inline(always)]
fn tail_mask<V: Simd>(len: usize) -> V::Mask {
    V::load(&LANE_INDEX).lt(V::splat(len as f32))
}

/// Maximum of a row (NaN-propagating; `-inf` when empty, NaN when any value is).
///
/// The maxima fold with the plain `maxps` ([`Simd::max_skip_nan`], one float
/// operation a vector), and a NaN is caught beside them on the integer side
/// ([`Simd::abs_max_bits`]): half the float operations of a NaN-propagating
/// maximum's compare and blend. With `stream`, it asks for its lines
/// [`STREAM_AHEAD_BYTES`](crate::simd::STREAM_AHEAD_BYTES) ahead.
#[inline(always)]
pub(crate) fn row_max<V: Simd>(x: &[f32], stream: bool) -> f32 {
    let init = (V::splat(f32::NEG_INFINITY), V::splat(0.0));
    let acc = row_fold::<V, _>(
        x,
        stream,
        init,
        #[inline(always)]
        |v, (max, bits)| (v.max_skip_nan(max), v.abs_max_bits(bits)),
    );
    // Integer maxima of the patterns, which as floats are NaN exactly where a
    // value was.
    let [a, b, c, d] = acc.map(|(_, bits)| bits);
    if a.abs_max_bits(b).abs_max_bits(c.abs_max_bits(d)).any_nan() {
        return f32::NAN;
    }
    max_of_four(acc.map(|(max, _)| max))
}

/// Maximum of a row's non-NaN values (`-inf` when there are none): for softmax,
/// where a NaN reaches the result through the sum of exponentials anyway.
/// `stream` as for [`row_max`].
#[inline(always)]
pub(crate) fn row_max_skip_nan<V: Simd>(x: &[f32], stream: bool) -> f32 {
    max_of_four(row_fold::<V, _>(
        x,
        stream,
        V::splat(f32::NEG_INFINITY),
        #[inline(always)]
        |v, max| v.max_skip_nan(max),
    ))
}

/// The largest lane of four accumulators free of NaN, pairwise.
#[inline(always)]
fn max_of_four<V: Simd>([a, b, c, d]: [V; 4]) -> f32 {
    let ab = a.max_skip_nan(b);
    ab.max_skip_nan(c.max_skip_nan(d)).reduce_max()
}

/// A row folded by `step(value, accumulator)` into four independent
/// accumulators that start at `init`; the tail pads with `-inf`. With `stream`,
/// each group of four vectors first asks for the lines
/// [`STREAM_AHEAD_BYTES`](crate::simd::STREAM_AHEAD_BYTES) on.
#[inline(always)]
fn row_fold<V: Simd, A: Copy>(
    x: &[f32],
    stream: bool,
    init: A,
    step: impl Fn(V, A) -> A,
) -> [A; 4] {
    let l = V::LANES;
    let mut acc = [init; 4];
    let big = x.len() - x.len() % (4 * l);
    for c in x[..big].chunks_exact(4 * l) {
        if stream {
            prefetch_ahead(c);
        }
        for (k, a) in acc.iter_mut().enumerate() {
            *a = step(V::load(&c[k * l..]), *a);
        }
    }
    let rest = &x[big..];
    let main = rest.len() - rest.len() % l;
    for c in rest[..main].chunks_exact(l) {
        acc[0] = step(V::load(c), acc[0]);
    }
    if main < rest.len() {
        acc[1] = step(V::load_tail(&rest[main..], f32::NEG_INFINITY), acc[1]);
    }
    acc
}

/// Values per block of [`row_mean_var`]: 1 KiB, a handful of lines the second
/// pass finds in L1 right after the first brought them in. Longer blocks spend
/// less on each block's reductions and merge (session 28, Zen 3, two rows of 1024
/// in L1: 194-199 ns in blocks of 256, 175-177 in 512, 148-152 in 1024) but leave
/// memory idle longer: a 64 MiB variance ran at 56-76 % of `sum`'s bandwidth in
/// blocks of 1024 against 79-91 % in blocks of 256, and at 68-85 % in blocks of
/// 512 against 80-105 % (five alternated runs each). One size serves both, so a
/// row's bits do not depend on whether its call streams; in L1 the vector paths
/// overlap blocks instead ([`INTERLEAVED_BLOCKS`]).
const MOMENT_BLOCK: usize = 256;

/// Longest row (16 KiB, half of L1) whose mean and variance the vector paths take
/// from shifted sums ([`short_row_mean_var`]), with no per-block merges: a row
/// whose shift turns out poor is read again by the plain two-pass form, from L1
/// at this length. Zen 3, session 34, medians of 31 × 2000 calls, the two-pass
/// form (the short rows' form then) against the blockwise one: variance of rows
/// of 512 / 1024 / 2048 / 4096 values 136 / 83-87 / 72-77 / 68-76 -> 96-111 /
/// 69-70 / 60-61 / 56 ns per 1024 values, layer norm 197-198 -> 180-181 ns per
/// 1024 at rows of 1024; longer rows (6000, 8192) level either way.
const SHORT_ROW_MAX: usize = 4096;

/// Blocks of [`row_mean_var`] whose passes a vector path interleaves, each summing
/// in [`GROUP_ACCUMULATORS`]: four blocks' chains (the sum, its reduction, the
/// mean, then the squared deviations) overlap where one block's left the core
/// waiting (rows of up to [`SHORT_ROW_MAX`] values take the plain two-pass form
/// since session 34). Zen 3, variance of two rows of 1024 in L1: 203-206 -> 155-159
/// ns (3.4-3.5x the one-lane path, from 2.6x), a row of 4096 317-322 -> 231-237;
/// layer norm 368-370 -> 331-351 (session 29). A call that streams takes a group's
/// blocks one after another with the same arithmetic, so the same bits:
/// interleaved, a 64 MiB variance fell from 83-88 % to 48-56 % of `sum`'s
/// bandwidth, and asking for the lines further ahead won back only up to 75 %.
const INTERLEAVED_BLOCKS: usize = 4;

/// Accumulators per block of a group of [`INTERLEAVED_BLOCKS`], so a group keeps
/// [`ACCUMULATORS`] in all.
const GROUP_ACCUMULATORS: usize = ACCUMULATORS / INTERLEAVED_BLOCKS;

/// A call whose rows span more than this many bytes reads them from beyond L2
/// (1 MiB per core on the Zen 5, 512 KiB on the Zen 3): its row kernels stream,
/// asking for their data [`STREAM_AHEAD_BYTES`](crate::simd::STREAM_AHEAD_BYTES) ahead.
const STREAM_MIN_BYTES: usize = 1 << 20;

/// Whether a call over `values` f32 streams them ([`STREAM_MIN_BYTES`]).
pub(crate) fn streams(values: usize) -> bool {
    values.saturating_mul(core::mem::size_of::<f32>()) > STREAM_MIN_BYTES
}

/// Whether [`row_mean_var`] takes a row of `len` values by shifted sums
/// ([`short_row_mean_var`]): on a vector path, up to [`SHORT_ROW_MAX`] values.
#[inline(always)]
pub(crate) fn short_row<V: Simd>(len: usize) -> bool {
    V::LANES > 1 && len > 0 && len <= SHORT_ROW_MAX
}

/// Mean and population variance of a row of at most [`SHORT_ROW_MAX`] values on a
/// vector path, in one pass: with `K` the mean of the row's first vector (an
/// estimate of the row's mean), the sums `S1 = Σ(x − K)` and `S2 = Σ(x − K)²`
/// give the mean `K + S1/n` and `M2 = S2 − S1²/n`. That subtraction cancels as
/// much as `K` misses the mean: it loses no more than a bit while `S1²/n ≤ S2/2`
/// (`K` within one standard deviation of the mean, where the mean of eight
/// values, AVX2's first vector, lies but for one row in 200 of normal data; of
/// NEON's four, one in 20), and a row past that, or whose squares overflow,
/// takes the two-pass form ([`two_pass_mean_var`]) instead. Against the two-pass
/// form's two sweeps, Zen 2, session 35: a 64 MiB variance in rows of 1024 73-78
/// -> 83-88 % of `sum`'s bandwidth (`bench_paired`, eight alternated runs), layer
/// norm 75-83 -> 86-91 % of `copy`; in L1, two rows of 1024, variance 151-153 ->
/// 137-141 ns, layer norm level. With `ahead_passes`
/// (0 for none), the pass is the first of that many over the row that share the
/// requests for the lines ahead ([`AheadShare`]): a variance's one, or a layer
/// norm's two with its scaling pass. [`row_mean_var`]'s per-lane moments end in a
/// merge across the lanes whose chain of reductions and divisions holds short rows
/// up (session 28, Zen 3, variance of 2 KiB of rows: 64 values 618 -> 434 ns, 256
/// values 304 -> 226), and its blocks each end in one more. The one-lane path has
/// no lanes to merge, and the two-pass form ran 15-21 % slower there (rows of 128
/// and 256 values).
#[inline(always)]
fn short_row_mean_var<V: Simd>(x: &[f32], ahead_passes: usize) -> (f32, f32) {
    let l = V::LANES;
    let n = x.len();
    let shift = if n >= l {
        V::load(x).reduce_sum() * (1.0 / l as f32)
    } else {
        x.iter().sum::<f32>() / n as f32
    };
    let shift_v = V::splat(shift);
    let ahead = (ahead_passes > 0).then(|| AheadShare::new(x, 0, ahead_passes));
    let main = n - n % l;
    let mut sums = [V::splat(0.0); SHIFTED_ACCUMULATORS];
    let mut squares = sums;
    for_each_vector::<V, SHIFTED_ACCUMULATORS>(
        &x[..main],
        ahead,
        #[inline(always)]
        |k, v| add_deviation(&mut sums[k], &mut squares[k], v.sub(shift_v)),
    );
    if main < n {
        // Padded with the shift, the missing lanes' deviations are 0.
        let d = V::load_tail(&x[main..], shift).sub(shift_v);
        add_deviation(&mut sums[0], &mut squares[0], d);
    }
    let sum = add_pairwise(&mut sums).reduce_sum();
    let square = add_pairwise(&mut squares).reduce_sum();
    let mean_shift = sum / n as f32;
    let correction = mean_shift * sum;
    if correction <= 0.5 * square && square.is_finite() {
        (shift + mean_shift, (square - correction) / n as f32)
    } else {
        two_pass_mean_var::<V>(x)
    }
}

/// Adds the deviation `d` to `sum` and its square to `square`.
#[inline(always)]
fn add_deviation<V: Simd>(sum: &mut V, square: &mut V, d: V) {
    *sum = sum.add(d);
    *square = d.mul_add(d, *square);
}

/// Accumulators of each of [`short_row_mean_var`]'s two sums: eight pairs left no
/// register free and ran 20-30 % slower, four sums beside eight squares level or
/// slower, two beside four 5-15 % slower (Zen 2, session 35, rows of 1024 and 4096
/// in L1; a bare loop of the same operations ran at 1.25 cycles a vector with
/// four pairs and no faster with six).
const SHIFTED_ACCUMULATORS: usize = 4;

/// Mean and population variance of a row by the plain two-pass form: the row's
/// mean, then its squared deviations from it. No cancellation whatever the row's
/// offset, for the rows [`short_row_mean_var`]'s shift misses.
#[inline(always)]
fn two_pass_mean_var<V: Simd>(x: &[f32]) -> (f32, f32) {
    let n = x.len() as f32;
    let mean = row_sum_map::<V>(
        x,
        None,
        #[inline(always)]
        |a, v| a.add(v),
    ) / n;
    let mean_v = V::splat(mean);
    let m2 = row_sum_map::<V>(
        x,
        None,
        #[inline(always)]
        |a, v| {
            let d = v.sub(mean_v);
            d.mul_add(d, a)
        },
    );
    (mean, m2 / n)
}

/// Each lane's means and sums of squared deviations over each of the `G` equal
/// blocks (whole vectors) of `group`: per block the two-pass form (its mean, then
/// the squared deviations from it), each sum in `PER` accumulators
/// ([`block_sums`]).
#[inline(always)]
fn block_moments<V: Simd, const G: usize, const PER: usize>(group: &[f32]) -> ([V; G], [V; G]) {
    let inv = V::splat(1.0 / (group.len() / G / V::LANES) as f32);
    let mut means = block_sums::<V, G, PER>(
        group,
        #[inline(always)]
        |_, a, v| a.add(v),
    );
    for m in &mut means {
        *m = m.mul(inv);
    }
    let m2s = block_sums::<V, G, PER>(
        group,
        #[inline(always)]
        |j, a, v| {
            let d = v.sub(means[j]);
            d.mul_add(d, a)
        },
    );
    (means, m2s)
}

/// Lane-wise sums over each of the `G` equal blocks of `group`, `add(j, acc, v)`
/// adding block `j`'s term for `v` to `acc`, in `PER` accumulators per block.
/// With `PER` = [`ACCUMULATORS`] (one block of any whole number of vectors) it is
/// [`lane_sums`]; with fewer, the blocks must hold whole multiples of `PER`
/// vectors, and their vectors interleave so that `G` blocks' chains of adds
/// overlap. Either way accumulator `k` of a block takes the block's vectors `k`,
/// `k + PER`, … and the accumulators add pairwise at the end: a block's sums do
/// not depend on how many blocks go with it.
#[inline(always)]
fn block_sums<V: Simd, const G: usize, const PER: usize>(
    group: &[f32],
    add: impl Fn(usize, V, V) -> V,
) -> [V; G] {
    let mut out = [V::splat(0.0); G];
    if G == 1 && PER == ACCUMULATORS {
        // `lane_sums`'s exact chunks need no bounds checks: through the loop below
        // the one-lane path ran 13-19 % slower (session 29).
        out[0] = lane_sums::<V>(
            group,
            None,
            #[inline(always)]
            |a, v| add(0, a, v),
        );
        return out;
    }
    let l = V::LANES;
    let len = group.len() / G;
    let step = PER * l;
    debug_assert!(len.is_multiple_of(step) && group.len() == G * len);
    let mut acc = [V::splat(0.0); ACCUMULATORS];
    for i in (0..len).step_by(step) {
        for j in 0..G {
            let c = &group[j * len + i..][..step];
            for k in 0..PER {
                acc[j * PER + k] = add(j, acc[j * PER + k], V::load(&c[k * l..]));
            }
        }
    }
    for (o, a) in out.iter_mut().zip(acc.chunks_exact_mut(PER)) {
        *o = add_pairwise(a);
    }
    out
}

/// Chan's pairwise update of each lane's running moments (`mean`, `m2` over
/// `seen` values) with a block's (`mb`, `m2b` over `nb` values).
#[inline(always)]
fn merge_moments<V: Simd>(mean: &mut V, m2: &mut V, seen: &mut usize, nb: usize, mb: V, m2b: V) {
    let total = (*seen + nb) as f32;
    let delta = mb.sub(*mean);
    *mean = delta.mul_add(V::splat(nb as f32 / total), *mean);
    let weight = V::splat(*seen as f32 * nb as f32 / total);
    *m2 = delta.mul(delta).mul_add(weight, m2.add(m2b));
    *seen += nb;
}

/// Mean and population variance of a row, reading it from memory once.
///
/// Each lane keeps its own moments. A block of [`MOMENT_BLOCK`] values takes the
/// two-pass form while it is in L1 (each lane's mean over the block, then its
/// squared deviations from that mean), and merges into the lane's running moments
/// by Chan, Golub and LeVeque's pairwise update: with `δ = mean_b − mean`, the
/// block adds `M2_b` and `δ² n n_b / (n + n_b)` to `M2`. The last partial vector's
/// values merge the same way, then the lanes. Like the two-pass form over a whole
/// row, nothing subtracts large sums of squares, so a large common offset costs no
/// precision; unlike it, no second sweep over a row too long for L1 leaves memory
/// idle (a whole-row second pass held a 64 MiB variance to ~55 % of memcpy's
/// bandwidth, session 15). With `ahead_passes` nonzero, each block first asks for
/// the lines [`STREAM_AHEAD_BYTES`](crate::simd::STREAM_AHEAD_BYTES) on (all of
/// them: share them with no other pass); on a [`short_row`], the one pass asks for
/// the first of that many parts ([`short_row_mean_var`]). On the vector paths
/// the blocks go in groups of [`INTERLEAVED_BLOCKS`] where the row has them (blocks
/// past the last whole group go one at a time), and rows of at most
/// [`SHORT_ROW_MAX`] values take [`short_row_mean_var`].
#[inline(always)]
pub(crate) fn row_mean_var<V: Simd>(x: &[f32], ahead_passes: usize) -> (f32, f32) {
    let l = V::LANES;
    let main = x.len() - x.len() % l;
    if short_row::<V>(x.len()) {
        return short_row_mean_var::<V>(x, ahead_passes);
    }
    let stream = ahead_passes > 0;
    let (mut mean, mut m2) = (V::splat(0.0), V::splat(0.0));
    // Values each lane has seen.
    let mut seen = 0usize;
    let group_len = INTERLEAVED_BLOCKS * MOMENT_BLOCK;
    let grouped = if V::LANES > 1 {
        main - main % group_len
    } else {
        0
    };
    for group in x[..grouped].chunks_exact(group_len) {
        if stream {
            // From memory: the blocks in order (see `INTERLEAVED_BLOCKS`).
            for block in group.chunks_exact(MOMENT_BLOCK) {
                prefetch_ahead(block);
                let ([mb], [m2b]) = block_moments::<V, 1, GROUP_ACCUMULATORS>(block);
                merge_moments(&mut mean, &mut m2, &mut seen, MOMENT_BLOCK / l, mb, m2b);
            }
        } else {
            let (means, m2s) = block_moments::<V, INTERLEAVED_BLOCKS, GROUP_ACCUMULATORS>(group);
            for (mb, m2b) in means.into_iter().zip(m2s) {
                merge_moments(&mut mean, &mut m2, &mut seen, MOMENT_BLOCK / l, mb, m2b);
            }
        }
    }
    for block in x[grouped..main].chunks(MOMENT_BLOCK) {
        if stream {
            prefetch_ahead(block);
        }
        let ([mb], [m2b]) = block_moments::<V, 1, ACCUMULATORS>(block);
        merge_moments(&mut mean, &mut m2, &mut seen, block.len() / l, mb, m2b);
    }
    // The values past the last whole vector: one more in each of the first lanes
    // (Chan's update with `n_b = 1`, `M2_b = 0`).
    let tail = &x[main..];
    let mut counts = V::splat(seen as f32);
    if !tail.is_empty() {
        let keep = tail_mask::<V>(tail.len());
        let delta = V::load_tail(tail, 0.0).sub(mean);
        let step = V::select(keep, V::splat(1.0 / (seen + 1) as f32), V::splat(0.0));
        mean = delta.mul_add(step, mean);
        m2 = delta
            .mul(delta)
            .mul_add(step.mul(V::splat(seen as f32)), m2);
        counts = counts.add(V::select(keep, V::splat(1.0), V::splat(0.0)));
    }
    // The lanes merged: the count-weighted mean of their means, and their M2s plus
    // each lane's spread around that mean. An empty row gives 0/0 = NaN.
    let n = x.len() as f32;
    let row_mean = counts.mul(mean).reduce_sum() / n;
    let spread = mean.sub(V::splat(row_mean));
    let row_m2 = spread.mul(spread).mul_add(counts, m2).reduce_sum();
    (row_mean, row_m2 / n)
}

#[inline(always)]
fn reduce_v<V: Simd>(op: ReduceOp, x: &[f32], stream: bool) -> f32 {
    match op {
        ReduceOp::Sum => row_sum_map::<V>(
            x,
            None,
            #[inline(always)]
            |a, v| a.add(v),
        ),
        ReduceOp::Max => row_max::<V>(x, stream),
        ReduceOp::Mean => {
            row_sum_map::<V>(
                x,
                None,
                #[inline(always)]
                |a, v| a.add(v),
            ) / x.len() as f32
        }
        // Its one pass on a short row asks for all the lines ahead.
        ReduceOp::Variance => row_mean_var::<V>(x, if stream { 1 } else { 0 }).1,
    }
}

/// `out[i] = op(row i)` over the rows of `cols` values in `x`. Called with `op`
/// a constant, so that each op gets its own copy of the loop: with the op matched
/// inside one shared loop, every row went through a jump table and that loop's
/// setup for all four ops (Zen 3, rows of 64 in L1: max 219-229 -> 188-199 ns
/// per 2048 values, rows of 1024: sum 59-62 -> 53-55).
#[inline(always)]
fn reduce_each_row<V: Simd>(op: ReduceOp, x: &[f32], cols: usize, stream: bool, out: &mut [f32]) {
    for (o, row) in out.iter_mut().zip(x.chunks_exact(cols)) {
        *o = reduce_v::<V>(op, row, stream);
    }
}

/// `out[i] = op(row rows.start + i)` for a row-major matrix `x` of `cols` columns.
///
/// `x` must hold at least `rows.end * cols` values ([`Error::BufferTooSmall`]) and
/// `out` exactly `rows.len()` ([`Error::LengthMismatch`]).
pub fn reduce_rows(
    op: ReduceOp,
    x: &[f32],
    cols: usize,
    rows: Range<usize>,
    out: &mut [f32],
) -> Result<()> {
    let (first, count) = check_rows(x.len(), cols, &rows)?;
    if out.len() != rows.len() {
        return Err(Error::LengthMismatch {
            expected: rows.len(),
            got: out.len(),
        });
    }
    let x = &x[first..first + count];
    let stream = streams(count);
    dispatch!(|V| {
        if cols == 0 {
            out.fill(reduce_v::<V>(op, &[], false));
        } else {
            // Each arm passes its op as a constant (see `reduce_each_row`).
            match op {
                ReduceOp::Sum => reduce_each_row::<V>(ReduceOp::Sum, x, cols, stream, out),
                ReduceOp::Max => reduce_each_row::<V>(ReduceOp::Max, x, cols, stream, out),
                ReduceOp::Mean => reduce_each_row::<V>(ReduceOp::Mean, x, cols, stream, out),
                ReduceOp::Variance => {
                    reduce_each_row::<V>(ReduceOp::Variance, x, cols, stream, out)
                }
            }
        }
    });
    Ok(())
}

/// `Ok` when `cols` is positive and `x` holds exactly `rows` rows of `cols` values
/// ([`Error::LengthMismatch`] otherwise).
fn check_whole_rows(x: &[f32], cols: usize, rows: usize) -> Result<()> {
    let expected = rows.saturating_mul(cols);
    if cols == 0 || x.len() != expected {
        return Err(Error::LengthMismatch {
            expected,
            got: x.len(),
        });
    }
    Ok(())
}

/// `out[j]` = `[mean, variance]` of row `j` of `x` (`cols` values) in f64, two
/// passes as rml-core's normalizations take them: the mean is the in-order f64 sum
/// divided by `cols`, the variance the in-order f64 sum of `(v − mean)²` divided
/// by `cols`, so the bits equal rml-core's whatever the ISA (four rows side by
/// side, `Simd::sum4_rows_f64` and `sum4_sq_dev_rows_f64`).
///
/// `cols` must be positive and `x` hold exactly `out.len() * cols` values
/// ([`Error::LengthMismatch`]).
pub fn moments_rows_f64(x: &[f32], cols: usize, out: &mut [[f64; 2]]) -> Result<()> {
    check_whole_rows(x, cols, out.len())?;
    let count = cols as f64;
    dispatch!(|V| {
        for (block, rows) in out.chunks_mut(4).zip(x.chunks(4 * cols)) {
            if let Ok(block) = <&mut [[f64; 2]; 4]>::try_from(&mut *block) {
                let means = V::sum4_rows_f64(rows, cols).map(|sum| sum / count);
                let squares = V::sum4_sq_dev_rows_f64(rows, cols, means);
                for ((o, mean), square) in block.iter_mut().zip(means).zip(squares) {
                    *o = [mean, square / count];
                }
            } else {
                for (o, row) in block.iter_mut().zip(rows.chunks_exact(cols)) {
                    let (mean, var) = rml_core::ops::norm::moments(row, 0..cols);
                    *o = [mean, var];
                }
            }
        }
    });
    Ok(())
}

/// `out[j]` = the f64 sum of row `j` of `x` (`cols` values), adding its values in
/// order from `-0.0` and rounding to f32 once (divided by `cols` first when
/// `mean`): the bits of rml-core's `reduce_sum`/`reduce_mean` over a last axis,
/// four rows side by side (`Simd::sum4_rows_f64`).
///
/// `cols` must be positive and `x` hold exactly `out.len() * cols` values
/// ([`Error::LengthMismatch`]).
pub fn sum_rows_f64(x: &[f32], cols: usize, mean: bool, out: &mut [f32]) -> Result<()> {
    check_whole_rows(x, cols, out.len())?;
    let finish = |sum: f64| if mean { sum / cols as f64 } else { sum } as f32;
    dispatch!(|V| {
        for (block, rows) in out.chunks_mut(4).zip(x.chunks(4 * cols)) {
            if block.len() == 4 {
                for (o, sum) in block.iter_mut().zip(V::sum4_rows_f64(rows, cols)) {
                    *o = finish(sum);
                }
            } else {
                for (o, row) in block.iter_mut().zip(rows.chunks_exact(cols)) {
                    *o = finish(row.iter().map(|&v| f64::from(v)).sum());
                }
            }
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::for_each_isa;

    /// `Simd::reduce_max` on every path (a NaN test, then a tree of plain
    /// maxima): the largest value found in each lane, among negatives, zeros and
    /// `-inf`; a NaN of either sign in any lane gives NaN; against the lanes'
    /// `f32::max` fold.
    #[test]
    fn reduce_max_finds_every_lane_and_any_nan() {
        let neg_inf = f32::NEG_INFINITY;
        let fill = [-3.5f32, neg_inf, -0.0, -1e-30, 0.0, -7.0, -2.0, -0.5];
        for_each_isa(|isa| {
            let lanes = dispatch!(|V| V::LANES);
            for at in 0..lanes {
                for special in [2.5f32, f32::INFINITY, f32::NAN, -f32::NAN] {
                    let mut v = [0.0f32; MAX_LANES];
                    for (i, x) in v.iter_mut().enumerate() {
                        *x = fill[(i + at) % fill.len()];
                    }
                    v[at] = special;
                    let got = dispatch!(|V| V::load(&v).reduce_max());
                    let want = v[..lanes].iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    let ok = if special.is_nan() {
                        got.is_nan()
                    } else {
                        got == want
                    };
                    assert!(ok, "{}: {special} in lane {at}: {got}", isa.name());
                }
            }
        });
    }
}
