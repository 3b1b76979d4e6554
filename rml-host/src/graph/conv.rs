//! `conv2d` on f32 as im2col + rml-kernels' GEMM: per image, channel group and band
//! of output rows the receptive fields are unrolled into a `[C_in/g · kh · kw,
//! rows · W_out]` block (sized to stay in L2 while the GEMM packs it) and multiplied
//! by the `[C_out/g, C_in/g · kh · kw]` weight rows, written straight into the NCHW
//! output (bias pre-filled, GEMM with `beta = 1`). Output-channel rows
//! split across threads. The unrolled matrix and the GEMM scratch live in
//! per-thread buffers that grow to the largest convolution seen and are reused, so
//! steady-state runs do not allocate them (nor page-fault fresh memory).

use std::cell::RefCell;
use std::ops::Range;
use std::thread::LocalKey;

use rml_core::ops::conv::Conv2dParams;
use rml_kernels::gemm::{self, MatMut, MatRef};

use super::par::{Parallel, for_row_blocks};

thread_local! {
    /// The unrolled input (im2col) of the convolution running on this thread.
    static COLUMNS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// GEMM scratch of the chunk running on this thread.
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Calls `f` with the first `len` values of this thread's buffer `key`, grown if
/// needed (contents unspecified).
pub(super) fn with_buffer<R>(
    key: &'static LocalKey<RefCell<Vec<f32>>>,
    len: usize,
    f: impl FnOnce(&mut [f32]) -> R,
) -> R {
    key.with(|cell| {
        let mut buffer = cell.borrow_mut();
        if buffer.len() < len {
            buffer.resize(len, 0.0);
        }
        f(&mut buffer[..len])
    })
}

/// Calls `f` with `len` values of this thread's GEMM scratch (grown if needed,
/// contents unspecified).
pub fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    with_buffer(&SCRATCH, len, f)
}

/// One convolution's operands, `conv2d` or `conv_transpose2d`: `x`
/// `[N, C_in, H, W]`, `w` (`[C_out, C_in/g, kh, kw]` or `[C_in, C_out/g, kh, kw]`),
/// optional `bias` `[C_out]`, and the output dims `[N, C_out, H_out, W_out]`, all
/// row-major.
pub struct ConvIo<'a> {
    /// Input data and dims.
    pub x: (&'a [f32], [usize; 4]),
    /// Weight data and dims.
    pub w: (&'a [f32], [usize; 4]),
    /// Bias, one per output channel.
    pub bias: Option<&'a [f32]>,
    /// Output dims (the data is passed to [`ConvKind::run`]).
    pub out: [usize; 4],
}

/// A convolution's parameters, which say how to run it on a [`ConvIo`].
pub trait ConvKind {
    /// `true` when the operands' dims agree with each other and with these
    /// parameters and the lengths match, so [`ConvKind::run`] may index without
    /// further checks.
    fn fits(&self, io: &ConvIo<'_>, out_len: usize) -> bool;
    /// The units of work split across threads (output channels of a group), the GEMM
    /// rows each unit is (for [`super::par::gemm_chunks`]) and the whole
    /// convolution's multiply-adds.
    fn split(&self, io: &ConvIo<'_>) -> (usize, usize, usize);
    /// Writes the convolution (checked by [`ConvKind::fits`]) into `out`, its units
    /// split into `chunks` pieces run by `parallel`.
    fn run(&self, io: &ConvIo<'_>, out: &mut [f32], chunks: usize, parallel: Parallel<'_>);
}

impl ConvKind for Conv2dParams {
    /// Groups divide the channels, the output size is the window count.
    fn fits(&self, io: &ConvIo<'_>, out_len: usize) -> bool {
        let p = self;
        let ([n, c, h, w], [co, cig, kh, kw], [on, oc, oh, ow]) = (io.x.1, io.w.1, io.out);
        let g = p.groups;
        let windows = |size: usize, pad: usize, k: usize, d: usize, s: usize| {
            let span = d.checked_mul(k.checked_sub(1)?)?.checked_add(1)?;
            Some((size + pad).checked_sub(span)? / s.max(1) + 1)
        };
        g > 0
            && p.stride.iter().all(|&s| s > 0)
            && p.dilation.iter().all(|&d| d > 0)
            && c == cig * g
            && co % g == 0
            && (on, oc) == (n, co)
            && windows(
                h,
                p.padding.top + p.padding.bottom,
                kh,
                p.dilation[0],
                p.stride[0],
            ) == Some(oh)
            && windows(
                w,
                p.padding.left + p.padding.right,
                kw,
                p.dilation[1],
                p.stride[1],
            ) == Some(ow)
            && io.x.0.len() == n * c * h * w
            && io.w.0.len() == co * cig * kh * kw
            && io.bias.is_none_or(|b| b.len() == co)
            && out_len == n * co * oh * ow
    }

    fn split(&self, io: &ConvIo<'_>) -> (usize, usize, usize) {
        let co = io.out[1];
        let work = io.out.iter().product::<usize>();
        (
            co / self.groups.max(1),
            1,
            work.saturating_mul(io.w.0.len() / co.max(1)),
        )
    }

    /// Each group's output rows are split into `chunks` pieces.
    fn run(&self, io: &ConvIo<'_>, out: &mut [f32], chunks: usize, parallel: Parallel<'_>) {
        let p = self;
        let ([n, c, h, w], [co, cig, kh, kw], [_, _, oh, ow]) = (io.x.1, io.w.1, io.out);
        let (cog, k, pixels) = (co / p.groups, cig * kh * kw, oh * ow);
        let band = band_rows(k, [oh, ow]);
        with_buffer(&COLUMNS, k * band * ow, |col| {
            for (b, image_out) in out.chunks_mut(co * pixels).enumerate().take(n) {
                for (gi, group_out) in image_out.chunks_mut(cog * pixels).enumerate() {
                    let x = &io.x.0[(b * c + gi * cig) * h * w..][..cig * h * w];
                    for (row, values) in group_out.chunks_mut(pixels).enumerate() {
                        values.fill(io.bias.map_or(0.0, |bias| bias[gi * cog + row]));
                    }
                    let weights = &io.w.0[gi * cog * k..][..cog * k];
                    for first in (0..oh).step_by(band) {
                        let rows = first..oh.min(first + band);
                        let col = &mut col[..k * rows.len() * ow];
                        unroll(p, x, [cig, h, w], [kh, kw], (rows.clone(), ow), col);
                        let cols = rows.start * ow..rows.end * ow;
                        let dims = [cog, k, pixels];
                        multiply(weights, col, group_out, dims, cols, (chunks, parallel));
                    }
                }
            }
        });
    }
}

/// Output rows unrolled at once: a band whose unrolled `k × rows·W_out` block stays
/// within about half of a core's L2, so the GEMM packs it from cache (at least one
/// row).
fn band_rows(k: usize, [oh, ow]: [usize; 2]) -> usize {
    const BAND_FLOATS: usize = 96 * 1024;
    (BAND_FLOATS / k.saturating_mul(ow).max(1)).clamp(1, oh.max(1))
}

/// `out[rows, cols] += weights[rows] · col` (`out` is `rows × pixels`, `col` is
/// `k × cols.len()`) for `rows` split into `chunks` run by `parallel`.
fn multiply(
    weights: &[f32],
    col: &[f32],
    out: &mut [f32],
    [rows, k, pixels]: [usize; 3],
    cols: Range<usize>,
    (chunks, parallel): (usize, Parallel<'_>),
) {
    let n = cols.len();
    // At least two rows per chunk: a one-row GEMM takes the GEMV path, whose sum
    // over K is not blocked like the packed GEMM's, so its bits would depend on the
    // thread count.
    let chunks = chunks.min(rows / 2).max(1);
    for_row_blocks(out, [rows, pixels], chunks, parallel, &|range, piece| {
        let m = range.len();
        let a = &weights[range.start * k..range.end * k];
        let done = with_scratch(gemm::gemm_scratch_len(m, n, k), |scratch| {
            let a = MatRef::row_major(a, m, k)?;
            let b = MatRef::row_major(col, k, n)?;
            let c = MatMut::new(&mut piece[cols.start..], m, n, pixels, 1)?;
            gemm::gemm(1.0, a, b, 1.0, c, scratch)
        });
        debug_assert!(done.is_ok(), "dims are checked by ConvKind::fits");
    });
}

/// im2col of output rows `rows`: `col[(ci·kh + i)·kw + j][(oy − rows.start)·ow + ox]`
/// is the input at row
/// `oy·s0 − top + i·d0`, column `ox·s1 − left + j·d1` of channel `ci` (0 in the padding).
fn unroll(
    p: &Conv2dParams,
    x: &[f32],
    [c, h, w]: [usize; 3],
    [kh, kw]: [usize; 2],
    (rows, ow): (Range<usize>, usize),
    col: &mut [f32],
) {
    let (s, d) = (p.stride, p.dilation);
    let mut unrolled = col.chunks_mut(rows.len() * ow);
    for ci in 0..c {
        let plane = &x[ci * h * w..][..h * w];
        for i in 0..kh {
            for j in 0..kw {
                let row = unrolled.next().expect("col holds c·kh·kw rows");
                for oy in rows.clone() {
                    let dst = &mut row[(oy - rows.start) * ow..][..ow];
                    let y = (oy * s[0] + i * d[0]).checked_sub(p.padding.top);
                    let Some(src) = y.filter(|&y| y < h).map(|y| &plane[y * w..][..w]) else {
                        dst.fill(0.0);
                        continue;
                    };
                    // Output columns whose input column `ox·s1 + j·d1 − left` is in 0..w.
                    let shift = j * d[1];
                    let (lo, hi) = columns_inside(p.padding.left, shift, s[1], [w, ow]);
                    dst[..lo].fill(0.0);
                    dst[hi..].fill(0.0);
                    if lo < hi {
                        let first = lo * s[1] + shift - p.padding.left;
                        let inside = &mut dst[lo..hi];
                        if s[1] == 1 {
                            inside.copy_from_slice(&src[first..first + inside.len()]);
                        } else {
                            for (v, &x) in inside.iter_mut().zip(src[first..].iter().step_by(s[1]))
                            {
                                *v = x;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The output columns `lo..hi` (within `0..ow`) whose tap at `ox·stride + shift − left`
/// lies on an input row of `w` columns.
pub(super) fn columns_inside(
    left: usize,
    shift: usize,
    stride: usize,
    [w, ow]: [usize; 2],
) -> (usize, usize) {
    let lo = left.saturating_sub(shift).div_ceil(stride).min(ow);
    let hi = (w + left)
        .saturating_sub(shift)
        .div_ceil(stride)
        .clamp(lo, ow);
    (lo, hi)
}
