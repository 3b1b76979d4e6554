//! `conv_transpose2d` on f32 as rml-kernels' GEMM + col2im: per image and channel
//! group, the `[C_out/g · kh · kw, C_in/g]` transposed weight times the
//! `[C_in/g, H · W]` input gives every tap's contribution (`cols`), which col2im adds
//! into the NCHW output at `oy = iy·s0 + ky·d0 − top`, `ox = ix·s1 + kx·d1 − left`
//! (bias pre-filled). Threads take whole images when there are at least as many
//! images as chunks; otherwise output channels split across threads, each chunk
//! computing and scattering its own channels' rows, so chunks write disjoint
//! outputs. The
//! `cols` rows and the GEMM scratch are per-thread buffers reused across runs.

use std::cell::RefCell;

use rml_core::Shape;
use rml_core::ops::conv::{ConvTranspose2dParams, conv_transpose2d_output_shape};
use rml_kernels::gemm::{self, MatMut, MatRef};

use super::conv::{ConvIo, ConvKind, with_buffer, with_scratch};
use super::par::{Parallel, for_row_blocks, gemm_chunks};

thread_local! {
    /// The tap rows (`cols`) of the chunk running on this thread.
    static COLS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

impl ConvKind for ConvTranspose2dParams {
    /// The output dims are rml-core's for these operands and parameters (so every
    /// parameter is valid).
    fn dims_fit(&self, [x, w, out]: [[usize; 4]; 3], bias_len: Option<usize>) -> bool {
        let shape = |d: [usize; 4]| Shape::new(&d).ok();
        let (Some(xs), Some(ws), Some(os)) = (shape(x), shape(w), shape(out)) else {
            return false;
        };
        conv_transpose2d_output_shape(&xs, &ws, self).ok() == Some(os)
            && bias_len.is_none_or(|b| b == w[1] * self.groups)
    }

    /// Units are the output channels of all images;
    /// [`ConvKind::image_chunks`] keeps the GEMM row split off the small-M path
    /// (`usize::MAX` rows per unit). The work is counted as `C_in/g` multiply-adds
    /// per output element (exact when the stride equals the kernel size).
    fn split(&self, io: &ConvIo<'_>) -> (usize, usize, usize) {
        let work = io.out.iter().product::<usize>();
        let [_, cog, _, _] = io.w.1;
        (
            io.out[0].saturating_mul(cog),
            usize::MAX,
            work.saturating_mul(io.x.1[1] / self.groups.max(1)),
        )
    }

    /// Each group's output channels split into chunks of more than `SMALL_M` GEMM
    /// rows ([`gemm_chunks`]: every row on the GEMM's blocked path, so the same
    /// bits), at most `chunks`.
    fn image_chunks(&self, io: &ConvIo<'_>, chunks: usize) -> usize {
        let [_, cog, kh, kw] = io.w.1;
        gemm_chunks(chunks, cog, kh * kw)
    }

    fn image(&self, io: &ConvIo<'_>, b: usize, out: &mut [f32], split: (usize, Parallel<'_>)) {
        image(self, io, b, out, split);
    }
}

/// Image `b` of the transposed convolution `p` into `image_out`, each group's
/// output channels split into `chunks` pieces run by `parallel`.
fn image(
    p: &ConvTranspose2dParams,
    io: &ConvIo<'_>,
    b: usize,
    image_out: &mut [f32],
    (chunks, parallel): (usize, Parallel<'_>),
) {
    let ([_, c, h, w], [_, cog, kh, kw], [_, _, oh, ow]) = (io.x.1, io.w.1, io.out);
    let cig = c / p.groups;
    let (plane, taps) = (oh * ow, kh * kw);
    for (gi, group_out) in image_out.chunks_mut(cog * plane).enumerate() {
        let group = Group {
            p,
            x: &io.x.0[(b * c + gi * cig) * h * w..][..cig * h * w],
            w: &io.w.0[gi * cig * cog * taps..][..cig * cog * taps],
            bias: io.bias.map(|bias| &bias[gi * cog..][..cog]),
            dims: [cig, cog, h, w, kh, kw, oh, ow],
        };
        let dims = [cog, plane];
        for_row_blocks(group_out, dims, chunks, parallel, &|range, piece| {
            group.channels(range, piece);
        });
    }
}

/// One image's channel group: input `[C_in/g, H, W]`, weight `[C_in/g, C_out/g, kh, kw]`,
/// bias `[C_out/g]`; `dims` = `[cig, cog, h, w, kh, kw, oh, ow]`.
struct Group<'a> {
    p: &'a ConvTranspose2dParams,
    x: &'a [f32],
    w: &'a [f32],
    bias: Option<&'a [f32]>,
    dims: [usize; 8],
}

impl Group<'_> {
    /// Output channels `range` of the group into `out` (`range.len()` planes).
    fn channels(&self, range: std::ops::Range<usize>, out: &mut [f32]) {
        let [cig, cog, h, w, kh, kw, oh, ow] = self.dims;
        let (taps, pixels) = (kh * kw, h * w);
        let rows = range.len() * taps;
        with_buffer(&COLS, rows * pixels, |cols| {
            let done = with_scratch(gemm::gemm_scratch_len(rows, pixels, cig), |scratch| {
                // Row (co·taps + tap) of the transposed weight is column
                // co·taps + tap of the row-major [cig, cog·taps] weight.
                let a = MatRef::new(&self.w[range.start * taps..], rows, cig, 1, cog * taps)?;
                let b = MatRef::row_major(self.x, cig, pixels)?;
                let c = MatMut::row_major(cols, rows, pixels)?;
                gemm::gemm(1.0, a, b, 0.0, c, scratch)
            });
            debug_assert!(done.is_ok(), "dims are checked by ConvKind::fits");
            for (local, plane) in out.chunks_exact_mut(oh * ow).enumerate() {
                plane.fill(self.bias.map_or(0.0, |b| b[range.start + local]));
                let channel_cols = &cols[local * taps * pixels..][..taps * pixels];
                for (tap, tap_cols) in channel_cols.chunks_exact(pixels).enumerate() {
                    self.scatter(tap / kw, tap % kw, tap_cols, plane);
                }
            }
        });
    }

    /// col2im of one tap `(ky, kx)`: adds `cols[iy·W + ix]` at output
    /// `(iy·s0 + ky·d0 − top, ix·s1 + kx·d1 − left)` where that is inside `plane`.
    fn scatter(&self, ky: usize, kx: usize, cols: &[f32], plane: &mut [f32]) {
        let [_, _, h, w, _, _, oh, ow] = self.dims;
        let (s, d, pad) = (self.p.stride, self.p.dilation, &self.p.padding);
        let (shift_y, shift_x) = (ky * d[0], kx * d[1]);
        // Input columns whose output column is in 0..ow.
        let first_x = pad.left.saturating_sub(shift_x).div_ceil(s[1]);
        let end_x = (ow + pad.left)
            .saturating_sub(shift_x)
            .div_ceil(s[1])
            .min(w);
        if first_x >= end_x {
            return;
        }
        for iy in 0..h {
            let Some(oy) = (iy * s[0] + shift_y)
                .checked_sub(pad.top)
                .filter(|&oy| oy < oh)
            else {
                continue;
            };
            let src = &cols[iy * w..][first_x..end_x];
            let row = &mut plane[oy * ow..][..ow];
            let start = first_x * s[1] + shift_x - pad.left;
            for (dst, &v) in row[start..].iter_mut().step_by(s[1]).zip(src) {
                *dst += v;
            }
        }
    }
}
