//! `conv2d` on f32 as im2col + rml-kernels' GEMM: per image and channel group the
//! receptive fields are unrolled into a `[C_in/g · kh · kw, H_out · W_out]` matrix
//! and multiplied by the `[C_out/g, C_in/g · kh · kw]` weight rows, written straight
//! into the NCHW output (bias pre-filled, GEMM with `beta = 1`). Output-channel rows
//! split across threads. The unrolled matrix and the GEMM scratch live in
//! per-thread buffers that grow to the largest convolution seen and are reused, so
//! steady-state runs do not allocate them (nor page-fault fresh memory).

use std::cell::RefCell;
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

/// One convolution's operands: `x` `[N, C_in, H, W]`, `w` `[C_out, C_in/g, kh, kw]`,
/// optional `bias` `[C_out]`, and `out` `[N, C_out, H_out, W_out]`, all row-major.
pub struct Conv2d<'a> {
    /// Input data and dims.
    pub x: (&'a [f32], [usize; 4]),
    /// Weight data and dims.
    pub w: (&'a [f32], [usize; 4]),
    /// Bias, one per output channel.
    pub bias: Option<&'a [f32]>,
    /// Output dims (the data is passed to [`Conv2d::run`]).
    pub out: [usize; 4],
}

impl Conv2d<'_> {
    /// `true` when the dims agree with each other and with `p` (groups divide the
    /// channels, the output size is the window count, lengths match), so
    /// [`Conv2d::run`] may index without further checks.
    pub fn fits(&self, p: &Conv2dParams, out_len: usize) -> bool {
        let ([n, c, h, w], [co, cig, kh, kw], [on, oc, oh, ow]) = (self.x.1, self.w.1, self.out);
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
            && self.x.0.len() == n * c * h * w
            && self.w.0.len() == co * cig * kh * kw
            && self.bias.is_none_or(|b| b.len() == co)
            && out_len == n * co * oh * ow
    }

    /// Writes the convolution into `out` (checked by [`Conv2d::fits`]), splitting each
    /// group's output rows into `chunks` pieces run by `parallel`.
    pub fn run(&self, p: &Conv2dParams, out: &mut [f32], chunks: usize, parallel: Parallel<'_>) {
        let ([n, c, h, w], [co, cig, kh, kw], [_, _, oh, ow]) = (self.x.1, self.w.1, self.out);
        let (cog, k, pixels) = (co / p.groups, cig * kh * kw, oh * ow);
        with_buffer(&COLUMNS, k * pixels, |col| {
            for (b, image_out) in out.chunks_mut(co * pixels).enumerate().take(n) {
                for (gi, group_out) in image_out.chunks_mut(cog * pixels).enumerate() {
                    let x = &self.x.0[(b * c + gi * cig) * h * w..][..cig * h * w];
                    unroll(p, x, [cig, h, w], [kh, kw], [oh, ow], col);
                    for (row, values) in group_out.chunks_mut(pixels).enumerate() {
                        values.fill(self.bias.map_or(0.0, |bias| bias[gi * cog + row]));
                    }
                    let weights = &self.w.0[gi * cog * k..][..cog * k];
                    multiply(weights, col, group_out, [cog, k, pixels], chunks, parallel);
                }
            }
        });
    }
}

/// `out[rows] += weights[rows] · col` for `rows` split into `chunks`.
fn multiply(
    weights: &[f32],
    col: &[f32],
    out: &mut [f32],
    [rows, k, pixels]: [usize; 3],
    chunks: usize,
    parallel: Parallel<'_>,
) {
    for_row_blocks(out, [rows, pixels], chunks, parallel, &|range, piece| {
        let m = range.len();
        let a = &weights[range.start * k..range.end * k];
        let done = with_scratch(gemm::gemm_scratch_len(m, pixels, k), |scratch| {
            let a = MatRef::row_major(a, m, k)?;
            let b = MatRef::row_major(col, k, pixels)?;
            let c = MatMut::row_major(piece, m, pixels)?;
            gemm::gemm(1.0, a, b, 1.0, c, scratch)
        });
        debug_assert!(done.is_ok(), "dims are checked by Conv2d::fits");
    });
}

/// im2col: `col[(ci·kh + i)·kw + j][oy·ow + ox]` is the input at row
/// `oy·s0 − top + i·d0`, column `ox·s1 − left + j·d1` of channel `ci` (0 in the padding).
fn unroll(
    p: &Conv2dParams,
    x: &[f32],
    [c, h, w]: [usize; 3],
    [kh, kw]: [usize; 2],
    [oh, ow]: [usize; 2],
    col: &mut [f32],
) {
    let (s, d) = (p.stride, p.dilation);
    let mut rows = col.chunks_mut(oh * ow);
    for ci in 0..c {
        let plane = &x[ci * h * w..][..h * w];
        for i in 0..kh {
            for j in 0..kw {
                let row = rows.next().expect("col holds c·kh·kw rows");
                for oy in 0..oh {
                    let dst = &mut row[oy * ow..][..ow];
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
