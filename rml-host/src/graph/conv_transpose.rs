//! `conv_transpose2d` on f32 as rml-kernels' GEMM + col2im: per channel group, the
//! `[C_out/g · kh · kw, C_in/g]` transposed weight times the input of several images
//! side by side (`[C_in/g, images · H · W]`) gives every tap's contribution
//! (`cols`), which col2im adds into each image's NCHW output at `oy = iy·s0 + ky·d0 −
//! top`, `ox = ix·s1 + kx·d1 − left` (bias pre-filled). Multiplying the images
//! together packs the weight once for all of them, not once per image (a DCGAN
//! layer's 4×4 input gives a GEMM only 16 columns wide per image). Threads take
//! whole images when there are at least as many images as chunks; otherwise the
//! GEMM's rows, then the images (or one image's output channels), split across
//! threads. The gathered input, the `cols` rows and the GEMM scratch are per-thread
//! buffers reused across runs.

use std::cell::RefCell;
use std::ops::Range;

use rml_core::Shape;
use rml_core::ops::conv::{ConvTranspose2dParams, conv_transpose2d_output_shape};
use rml_kernels::gemm::{self, MatMut, MatRef};

use super::conv::{ConvIo, ConvKind, with_buffer, with_scratch};
use super::par::{Parallel, for_row_blocks, gemm_chunks};

thread_local! {
    /// The input of the images being multiplied, one row per input channel.
    static GATHERED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// The tap rows (`cols`) of the images being multiplied.
    static COLS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Tap values (`cols`) computed at once, in f32s: images are multiplied together
/// until their tap rows reach 8 MiB (a quarter of this machine's L3), or one image
/// when a single image's exceed it.
const COLS_FLOATS: usize = 2 << 20;

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

    /// As many images as keep their tap rows within [`COLS_FLOATS`].
    fn images_at_once(&self, io: &ConvIo<'_>) -> usize {
        let [_, cog, kh, kw] = io.w.1;
        let [_, _, h, w] = io.x.1;
        (COLS_FLOATS / (cog * kh * kw * h * w).max(1)).max(1)
    }

    fn images(
        &self,
        io: &ConvIo<'_>,
        images: Range<usize>,
        out: &mut [f32],
        (chunks, parallel): (usize, Parallel<'_>),
    ) {
        let ([_, c, h, w], [_, cog, kh, kw], [_, co, oh, ow]) = (io.x.1, io.w.1, io.out);
        let cig = c / self.groups;
        let image_len = co * oh * ow;
        let step = self.images_at_once(io);
        for first in images.clone().step_by(step) {
            let batch = first..images.end.min(first + step);
            let at = (first - images.start) * image_len;
            let batch_out = &mut out[at..][..batch.len() * image_len];
            for gi in 0..self.groups {
                let group = Group {
                    p: self,
                    x: (io.x.0, c, gi * cig),
                    w: &io.w.0[gi * cig * cog * kh * kw..][..cig * cog * kh * kw],
                    bias: io.bias.map(|bias| &bias[gi * cog..][..cog]),
                    dims: [cig, cog, h, w, kh, kw, oh, ow],
                };
                group.images(batch.clone(), (batch_out, gi), (chunks, parallel));
            }
        }
    }
}

/// One channel group of a transposed convolution: the input channels
/// `first..first + cig` of the `[N, c, H, W]` input `x` = `(data, c, first)`,
/// weight `[C_in/g, C_out/g, kh, kw]`, bias `[C_out/g]`; `dims` = `[cig, cog, h, w,
/// kh, kw, oh, ow]`.
struct Group<'a> {
    p: &'a ConvTranspose2dParams,
    x: (&'a [f32], usize, usize),
    w: &'a [f32],
    bias: Option<&'a [f32]>,
    dims: [usize; 8],
}

impl Group<'_> {
    /// The group's output channels of images `images` into `out` = `(their output
    /// blocks, group index)`: the images' input gathered side by side, one GEMM for
    /// all their taps (rows split into `chunks`), then col2im image by image (or, for
    /// fewer images than chunks, each image's channels split).
    fn images(
        &self,
        images: Range<usize>,
        (out, gi): (&mut [f32], usize),
        (chunks, parallel): (usize, Parallel<'_>),
    ) {
        let [cig, cog, h, w, kh, kw, oh, ow] = self.dims;
        let (taps, pixels, plane) = (kh * kw, h * w, oh * ow);
        let (rows, n) = (cog * taps, images.len() * pixels);
        let (x, c, first) = self.x;
        with_buffer(&GATHERED, cig * n, |gathered| {
            for (ci, row) in gathered.chunks_exact_mut(n.max(1)).enumerate() {
                for (b, dst) in images.clone().zip(row.chunks_exact_mut(pixels.max(1))) {
                    dst.copy_from_slice(&x[(b * c + first + ci) * pixels..][..pixels]);
                }
            }
            let gathered = &*gathered;
            with_buffer(&COLS, rows * n, |cols| {
                // Row (co·taps + tap) of the transposed weight is column
                // co·taps + tap of the row-major [cig, cog·taps] weight. Every chunk
                // keeps more than SMALL_M rows: one GEMM path, the same bits.
                let gemm_rows = |range: Range<usize>, piece: &mut [f32]| {
                    let done = with_scratch(gemm::gemm_scratch_len(range.len(), n, cig), |s| {
                        let a = MatRef::new(&self.w[range.start..], range.len(), cig, 1, rows)?;
                        let b = MatRef::row_major(gathered, cig, n)?;
                        let c = MatMut::row_major(piece, range.len(), n)?;
                        gemm::gemm(1.0, a, b, 0.0, c, s)
                    });
                    debug_assert!(done.is_ok(), "dims are checked by ConvKind::fits");
                };
                let split = gemm_chunks(chunks, rows, 1);
                for_row_blocks(cols, [rows, n], split, parallel, &gemm_rows);
                let cols = &*cols;
                let image_len = out.len() / images.len().max(1);
                let scatter_images = |range: Range<usize>, piece: &mut [f32]| {
                    for (local, image_out) in range.zip(piece.chunks_exact_mut(image_len)) {
                        let group_out = &mut image_out[gi * cog * plane..][..cog * plane];
                        self.channels(0..cog, (cols, local), group_out);
                    }
                };
                if images.len() >= chunks {
                    let dims = [images.len(), image_len];
                    for_row_blocks(out, dims, chunks, parallel, &scatter_images);
                } else {
                    for (local, image_out) in out.chunks_exact_mut(image_len).enumerate() {
                        let group_out = &mut image_out[gi * cog * plane..][..cog * plane];
                        for_row_blocks(
                            group_out,
                            [cog, plane],
                            chunks,
                            parallel,
                            &|range, piece| {
                                self.channels(range, (cols, local), piece);
                            },
                        );
                    }
                }
            });
        });
    }

    /// Output channels `range` of the image at position `local` of the multiplied
    /// images into `out` (`range.len()` planes): the bias, then every tap's values
    /// from `cols` (`[cog · taps, images · H · W]`) added in.
    fn channels(&self, range: Range<usize>, (cols, local): (&[f32], usize), out: &mut [f32]) {
        let [_, cog, h, w, kh, kw, oh, ow] = self.dims;
        let (taps, pixels) = (kh * kw, h * w);
        let n = cols.len() / (cog * taps).max(1);
        for (co, plane) in range.zip(out.chunks_exact_mut(oh * ow)) {
            plane.fill(self.bias.map_or(0.0, |b| b[co]));
            for tap in 0..taps {
                let tap_cols = &cols[(co * taps + tap) * n + local * pixels..][..pixels];
                self.scatter(tap / kw, tap % kw, tap_cols, plane);
            }
        }
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
