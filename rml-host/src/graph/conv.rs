//! `conv2d` on f32 as im2col + rml-kernels' GEMM: per image, channel group and band
//! of output rows the receptive fields are unrolled into a `[C_in/g · kh · kw,
//! rows · W_out]` block (sized to stay in L2), written row by row straight into the
//! GEMM's packed panels (no separate im2col matrix and packing pass), and
//! multiplied by the `[C_out/g, C_in/g · kh · kw]` weight rows, written straight
//! into the NCHW output (bias pre-filled, packed GEMM with `beta = 1`). Threads
//! take whole images when there are at least as many images as chunks (each
//! unrolls only its own images); otherwise they split each band's unrolling (by
//! panels) and output-channel rows, sharing its one packed block, or, with several
//! bands, give each thread whole bands (computed into a staging buffer, then copied
//! into the output). The packed blocks, a row buffer and the GEMM scratch live in
//! per-thread buffers that grow to the largest convolution seen and are reused, so
//! steady-state runs do not allocate them (nor page-fault fresh memory).

use std::cell::RefCell;
use std::ops::Range;
use std::thread::LocalKey;

use rml_core::ops::conv::Conv2dParams;
use rml_kernels::gemm::{self, MatMut, MatRef};

use super::par::{Parallel, for_row_blocks};

thread_local! {
    /// The image being convolved, zero-padded ([`Padded`]).
    static PADDED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// The band's unrolled input, laid out as GEMM panels (`gemm::pack_b`'s layout).
    static PACKED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
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
    /// A `conv2d`'s weight rows packed by [`pack_weights`], if the caller has them.
    pub packed_w: Option<&'a [f32]>,
    /// Bias, one per output channel.
    pub bias: Option<&'a [f32]>,
    /// Output dims (the data is passed to [`ConvKind::run`]).
    pub out: [usize; 4],
}

/// A convolution's parameters, which say how to run it on a [`ConvIo`].
pub trait ConvKind: Sync {
    /// `true` when `[x, w, out]` dims agree with each other and with these
    /// parameters and a bias of `bias_len` values (if any) has one per output
    /// channel.
    fn dims_fit(&self, dims: [[usize; 4]; 3], bias_len: Option<usize>) -> bool;
    /// The units of work split across threads (output channels of a group), the GEMM
    /// rows each unit is (for [`super::par::gemm_chunks`]) and the whole
    /// convolution's multiply-adds (read from the dims and the weight alone).
    fn split(&self, io: &ConvIo<'_>) -> (usize, usize, usize);
    /// Pieces one image's work is split into when `chunks` are wanted (fewer where
    /// a split would change the bits).
    fn image_chunks(&self, io: &ConvIo<'_>, chunks: usize) -> usize;
    /// Images worth computing in one [`ConvKind::images`] call (their outputs are
    /// then finished while in cache): one unless the kind shares work across
    /// images.
    fn images_at_once(&self, _io: &ConvIo<'_>) -> usize {
        1
    }

    /// Writes images `images` of the convolution (checked by [`ConvKind::fits`])
    /// into `out` (their `[C_out, H_out, W_out]` blocks), the work split into
    /// `chunks` pieces (at most [`ConvKind::image_chunks`]) run by `parallel`; any
    /// split gives the same bits.
    fn images(
        &self,
        io: &ConvIo<'_>,
        images: Range<usize>,
        out: &mut [f32],
        split: (usize, Parallel<'_>),
    );

    /// `true` when the dims fit ([`ConvKind::dims_fit`]) and the lengths match
    /// them, so [`ConvKind::run`] may index without further checks.
    fn fits(&self, io: &ConvIo<'_>, out_len: usize) -> bool {
        let count = |d: [usize; 4]| d.iter().product::<usize>();
        self.dims_fit([io.x.1, io.w.1, io.out], io.bias.map(<[f32]>::len))
            && io.x.0.len() == count(io.x.1)
            && io.w.0.len() == count(io.w.1)
            && out_len == count(io.out)
    }

    /// Writes the convolution (checked by [`ConvKind::fits`]) into `out`: whole
    /// images split into `chunks` pieces when there are at least as many images as
    /// chunks, else each image's work ([`ConvKind::images`]).
    fn run(&self, io: &ConvIo<'_>, out: &mut [f32], chunks: usize, parallel: Parallel<'_>) {
        let [n, co, oh, ow] = io.out;
        let len = co * oh * ow;
        if chunks > 1 && n >= chunks {
            for_row_blocks(out, [n, len], chunks, parallel, &|range, piece| {
                self.images(io, range, piece, (1, &serial));
            });
        } else {
            let inner = self.image_chunks(io, chunks);
            self.images(io, 0..n, out, (inner, parallel));
        }
    }
}

impl ConvKind for Conv2dParams {
    fn dims_fit(&self, dims: [[usize; 4]; 3], bias_len: Option<usize>) -> bool {
        dims_fit(self, dims, bias_len)
    }

    /// Units are the GEMM rows of all images (the image split and the row split
    /// below both run the packed GEMM, whose bits do not depend on the row block,
    /// so no chunk needs a least row count: `usize::MAX` rows per unit).
    fn split(&self, io: &ConvIo<'_>) -> (usize, usize, usize) {
        let [n, co, _, _] = io.out;
        let work = io.out.iter().product::<usize>();
        (
            n.saturating_mul(co / self.groups.max(1)),
            usize::MAX,
            work.saturating_mul(io.w.0.len() / co.max(1)),
        )
    }

    /// Any split (see [`image`]).
    fn image_chunks(&self, _io: &ConvIo<'_>, chunks: usize) -> usize {
        chunks
    }

    /// Enough images for [`MIN_BAND_PIXELS`] columns when one image has fewer
    /// output pixels (a patch embedding's 7 × 7): they are unrolled side by side
    /// into one band, so the weights are packed and streamed once for all of them,
    /// not once per image.
    fn images_at_once(&self, io: &ConvIo<'_>) -> usize {
        let pixels = (io.out[2] * io.out[3]).max(1);
        MIN_BAND_PIXELS.div_ceil(pixels)
    }

    fn images(
        &self,
        io: &ConvIo<'_>,
        images: Range<usize>,
        out: &mut [f32],
        split: (usize, Parallel<'_>),
    ) {
        let len = io.out[1..].iter().product::<usize>().max(1);
        let step = self.images_at_once(io);
        for (first, batch_out) in images.clone().step_by(step).zip(out.chunks_mut(step * len)) {
            let batch = first..images.end.min(first + step);
            if batch.len() == 1 {
                image(self, io, first, batch_out, split);
            } else {
                side_by_side(self, io, batch, batch_out, split);
            }
        }
    }
}

/// Whether a `conv2d` with parameters `p` fits `[x, w, out]` dims and a bias of
/// `bias_len` values: groups divide the channels, the output size is the window
/// count, the bias has one value per output channel.
fn dims_fit(p: &Conv2dParams, [x, wd, out]: [[usize; 4]; 3], bias_len: Option<usize>) -> bool {
    let ([n, c, h, w], [co, cig, kh, kw], [on, oc, oh, ow]) = (x, wd, out);
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
        && bias_len.is_none_or(|b| b == co)
}

/// A `conv2d` weight `[C_out, C_in/g, kh, kw]` (`dims`) in `groups` groups packed
/// for the GEMM once (`gemm::pack_a` of each group's `[C_out/g, k]` rows, group
/// after group), so a run does not pack the weight rows again for every band;
/// `None` when the dims do not fit the data or `groups`.
pub fn pack_weights(w: &[f32], [co, cig, kh, kw]: [usize; 4], groups: usize) -> Option<Vec<f32>> {
    let (cog, k) = (co.checked_div(groups)?, cig * kh * kw);
    let group_len = gemm::packed_a_full_len(cog, k).ok()?;
    if co % groups != 0 || w.len() != co * k {
        return None;
    }
    let mut packed = vec![0.0; group_len.checked_mul(groups)?];
    for (rows, out) in w
        .chunks(cog * k.max(1))
        .zip(packed.chunks_mut(group_len.max(1)))
    {
        gemm::pack_a(MatRef::row_major(rows, cog, k).ok()?, out).ok()?;
    }
    Some(packed)
}

/// Runs chunks `0..n` one after the other on this thread.
pub(super) fn serial(n: usize, f: &(dyn Fn(usize) + Sync)) {
    (0..n).for_each(f);
}

/// Writes image `b` of the convolution `p` on `io` (checked by
/// [`ConvKind::fits`]) into `out` (its `[C_out, H_out, W_out]` block), channel
/// group by channel group, each in bands of output rows ([`band_rows`]; the bands
/// depend on the shapes alone). On one chunk, or when a group is one band, each
/// band is unrolled into GEMM panels (im2col; the panels split into `chunks` pieces
/// run by `parallel`) and its output-channel rows split into `chunks` pieces, each
/// multiplying its weight rows by the shared packed band: two hand-offs per band. With several bands and
/// chunks, each chunk takes whole bands ([`Group::by_bands`]): one hand-off computes
/// them, a second copies them into the output. The packed GEMM gives an element
/// the same bits whatever row block or output stride it is computed in, so any
/// `chunks` gives the same output.
fn image(
    p: &Conv2dParams,
    io: &ConvIo<'_>,
    b: usize,
    out: &mut [f32],
    (chunks, parallel): (usize, Parallel<'_>),
) {
    let [_, co, oh, ow] = io.out;
    let (cog, pixels) = (co / p.groups, oh * ow);
    with_padded(p, io.x, b..b + 1, |x| {
        for (gi, group_out) in out.chunks_mut(cog * pixels).enumerate() {
            let group = Group::new(p, io, x, gi, 1);
            let band = group.band;
            let bands = oh.div_ceil(band);
            if chunks > 1 && bands > 1 {
                group.by_bands(group_out, (chunks.min(bands), parallel));
            } else {
                for first in (0..oh).step_by(band) {
                    let rows = first..oh.min(first + band);
                    let at = rows.start * ow;
                    group.band(rows, (group_out, pixels, at), (chunks, parallel));
                }
            }
        }
    });
}

/// Writes images `images` (two or more, each with fewer than [`MIN_BAND_PIXELS`]
/// output pixels) into `out` (their `[C_out, H_out, W_out]` blocks): per channel
/// group one band holding every output pixel of every image side by side,
/// computed into a staging buffer (`[C_out/g, images · pixels]`) and copied into
/// each image's block. The same bits as image by image (the packed GEMM's bits do
/// not depend on the columns beside an element).
fn side_by_side(
    p: &Conv2dParams,
    io: &ConvIo<'_>,
    images: Range<usize>,
    out: &mut [f32],
    split: (usize, Parallel<'_>),
) {
    let [_, co, oh, ow] = io.out;
    let (cog, pixels, count) = (co / p.groups, oh * ow, images.len());
    let cols = count * pixels;
    with_padded(p, io.x, images, |x| {
        with_buffer(&STAGED, cog * cols, |staged| {
            for gi in 0..p.groups {
                let group = Group::new(p, io, x, gi, count);
                group.band(0..oh, (staged, cols, 0), split);
                for (b, image_out) in out.chunks_mut(co * pixels).enumerate() {
                    let group_out = &mut image_out[gi * cog * pixels..][..cog * pixels];
                    let rows = group_out.chunks_exact_mut(pixels);
                    for (dst, src) in rows.zip(staged.chunks_exact(cols)) {
                        dst.copy_from_slice(&src[b * pixels..][..pixels]);
                    }
                }
            }
        });
    });
}

thread_local! {
    /// The bands of one channel group computed by [`Group::by_bands`], band by band.
    static STAGED: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// One channel group of a `conv2d` over `images` images side by side (usually
/// one): padded input (from the group's first channel of the first image), weight
/// rows `[C_out/g, k]`, bias `[C_out/g]`; `dims` = `[cog, k, kh, kw, oh, ow]`,
/// `band` output rows per band (the last may be shorter).
struct Group<'a> {
    p: &'a Conv2dParams,
    x: Padded<'a>,
    images: usize,
    weights: &'a [f32],
    /// The weight rows packed for the GEMM, if the caller has them.
    packed: Option<&'a [f32]>,
    bias: Option<&'a [f32]>,
    dims: [usize; 6],
    band: usize,
}

impl<'a> Group<'a> {
    /// Group `gi` of the convolution `p` on `io`, reading `images` padded images `x`.
    fn new(p: &'a Conv2dParams, io: &ConvIo<'a>, x: Padded<'a>, gi: usize, images: usize) -> Self {
        let ([co, cig, kh, kw], [_, _, oh, ow]) = (io.w.1, io.out);
        let (cog, k) = (co / p.groups, cig * kh * kw);
        let packed_len = gemm::packed_a_full_len(cog, k).unwrap_or(0);
        Group {
            p,
            x: x.skip_channels(gi * cig),
            images,
            weights: &io.w.0[gi * cog * k..][..cog * k],
            packed: io
                .packed_w
                .and_then(|w| w.get(gi * packed_len..(gi + 1) * packed_len)),
            bias: io.bias.map(|bias| &bias[gi * cog..][..cog]),
            dims: [cog, k, kh, kw, oh, ow],
            band: band_rows(k, [oh, ow]),
        }
    }

    /// Output rows `rows` (one band) into `out` (`cog` rows of `stride` values, the
    /// band's values from column `at`): the bias, then the band unrolled into packed
    /// panels (split by panels) and multiplied by the weight rows (split by rows),
    /// each phase in `chunks` pieces run by `parallel`.
    fn band(
        &self,
        rows: Range<usize>,
        (out, stride, at): (&mut [f32], usize, usize),
        (chunks, parallel): (usize, Parallel<'_>),
    ) {
        let [cog, k, kh, kw, _, ow] = self.dims;
        let columns = BandColumns {
            p: self.p,
            x: self.x,
            channels: k / (kh * kw).max(1),
            kernel: [kh, kw],
            rows,
            ow,
            images: self.images,
        };
        let n = columns.len();
        for (row, values) in out.chunks_mut(stride).enumerate().take(cog) {
            values[at..at + n].fill(self.bias.map_or(0.0, |bias| bias[row]));
        }
        let packed_len = gemm::packed_b_len(k, n).unwrap_or(0);
        with_buffer(&PACKED, packed_len, |packed| {
            let unroll_panels = |panels: Range<usize>, piece: &mut [f32]| {
                columns.unroll(panels, piece);
            };
            let panels = n.div_ceil(gemm::NR);
            for_row_blocks(
                packed,
                [panels, k * gemm::NR],
                chunks,
                parallel,
                &unroll_panels,
            );
            let band = Band {
                weights: self.weights,
                packed_weights: self.packed,
                packed,
                dims: [cog, k, stride],
                cols: at..at + n,
            };
            band.multiply(out, (chunks, parallel));
        });
    }

    /// The whole group into `out` (`[cog, oh·ow]`) with whole bands per chunk: each
    /// chunk computes its bands (unroll into panels, multiply, all on its own thread and
    /// cache) into a per-band block of a staging buffer, then the channel rows are
    /// split again to copy the blocks into the output. Two hand-offs, not two per
    /// band, and no band is shared between cores.
    fn by_bands(&self, out: &mut [f32], (chunks, parallel): (usize, Parallel<'_>)) {
        let [cog, _, _, _, oh, ow] = self.dims;
        let (band, pixels) = (self.band, oh * ow);
        let bands = oh.div_ceil(band);
        let block = cog * band * ow;
        let rows = |j: usize| j * band..oh.min((j + 1) * band);
        with_buffer(&STAGED, bands * block, |staged| {
            for_row_blocks(staged, [bands, block], chunks, parallel, &|range, piece| {
                for (j, slot) in range.zip(piece.chunks_mut(block)) {
                    let n = rows(j).len() * ow;
                    self.band(rows(j), (&mut slot[..cog * n], n, 0), (1, &serial));
                }
            });
            let staged = &*staged;
            for_row_blocks(out, [cog, pixels], chunks, parallel, &|channels, piece| {
                for (ch, plane) in channels.zip(piece.chunks_mut(pixels)) {
                    for j in 0..bands {
                        let (rows, from) = (rows(j), j * block);
                        let n = rows.len() * ow;
                        let values = &staged[from + ch * n..][..n];
                        plane[rows.start * ow..][..n].copy_from_slice(values);
                    }
                }
            });
        });
    }
}

/// Fewest output pixels per band: a narrower band's GEMM packs the weight rows again
/// for few columns (unet's 3×3 convolutions with `k` = 576 and 1152 got one or two
/// 64-pixel rows per band from the L2 rule alone; at least 512 pixels made unet
/// batch 8 about 8 % faster).
const MIN_BAND_PIXELS: usize = 512;

/// Output rows unrolled at once: a band whose unrolled `k × rows·W_out` block stays
/// within about half of a core's L2, so the GEMM reads it from cache, but at least
/// [`MIN_BAND_PIXELS`] pixels (and one row), with the rows spread evenly over the
/// bands that takes (so whole bands split evenly across threads).
fn band_rows(k: usize, [oh, ow]: [usize; 2]) -> usize {
    const BAND_FLOATS: usize = 96 * 1024;
    let most = (BAND_FLOATS / k.saturating_mul(ow).max(1))
        .max(MIN_BAND_PIXELS.div_ceil(ow.max(1)))
        .clamp(1, oh.max(1));
    oh.div_ceil(oh.div_ceil(most).max(1)).max(1)
}

/// One band of one channel group: `out[.., cols] += weights · B` where B is the
/// band's packed `k × cols.len()` unrolled input.
struct Band<'a> {
    /// The group's `[rows, k]` weight rows.
    weights: &'a [f32],
    /// The same rows packed for the GEMM (`gemm::pack_a`), if the caller has them.
    packed_weights: Option<&'a [f32]>,
    /// The packed band.
    packed: &'a [f32],
    /// `[rows, k, pixels]`: GEMM rows, inner size, output row length.
    dims: [usize; 3],
    /// The band's output columns.
    cols: Range<usize>,
}

impl Band<'_> {
    /// Multiplies the band into `out` (`rows × pixels`), its rows split into
    /// `chunks` pieces run by `parallel` (on this thread when one).
    fn multiply(&self, out: &mut [f32], (chunks, parallel): (usize, Parallel<'_>)) {
        let [rows, _, pixels] = self.dims;
        let chunks = chunks.clamp(1, rows.max(1));
        if chunks == 1 {
            self.rows(0..rows, out);
            return;
        }
        for_row_blocks(out, [rows, pixels], chunks, parallel, &|range, piece| {
            self.rows(range, piece);
        });
    }

    /// Rows `range` of the product into `piece` (those rows of the output): from
    /// the pre-packed weight rows when there are some and `range` starts at a
    /// panel edge, else packing the rows on the way (the same bits either way).
    fn rows(&self, range: Range<usize>, piece: &mut [f32]) {
        let done = self.try_rows(range, piece);
        debug_assert!(done.is_ok(), "dims are checked by ConvKind::fits");
    }

    /// [`Band::rows`], with the GEMM's argument checks.
    fn try_rows(&self, range: Range<usize>, piece: &mut [f32]) -> rml_core::Result<()> {
        let ([rows, k, pixels], cols) = (self.dims, &self.cols);
        let (m, n) = (range.len(), cols.len());
        let b = gemm::PackedB::new(self.packed, k, n)?;
        let c = MatMut::new(&mut piece[cols.start..], m, n, pixels, 1)?;
        let epilogue = gemm::Epilogue::default();
        match self.packed_weights {
            Some(w) if range.start.is_multiple_of(gemm::MR) => {
                let a = gemm::PackedA::new(w, rows, k)?.sub_rows(range)?;
                gemm::gemm_prepacked(1.0, a, b, 1.0, c, &epilogue)
            }
            _ => with_scratch(gemm::gemm_packed_scratch_len(m, k), |scratch| {
                let a = MatRef::row_major(&self.weights[range.start * k..range.end * k], m, k)?;
                gemm::gemm_packed(1.0, a, b, 1.0, c, &epilogue, scratch)
            }),
        }
    }
}

/// Images' input channels with the convolution's zero padding made explicit:
/// `[C, hp, wp]` planes per image (`hp = top + H + bottom`, `wp = left + W +
/// right`), so every tap of every window lies inside a plane and an im2col row is a
/// plain copy.
#[derive(Clone, Copy)]
struct Padded<'a> {
    /// From the first channel read to the end of the last image.
    data: &'a [f32],
    /// `[hp, wp]`.
    plane: [usize; 2],
    /// Values from one image to the next.
    image: usize,
}

impl<'a> Padded<'a> {
    /// The same images from channel `c` on (a group's first).
    fn skip_channels(self, c: usize) -> Padded<'a> {
        Padded {
            data: &self.data[c * self.plane[0] * self.plane[1]..],
            ..self
        }
    }
}

/// Calls `f` with images `images` of `x` (`[N, C, H, W]`) padded as `p` says: the
/// input itself when `p` pads nothing, else a copy in this thread's buffer.
fn with_padded<R>(
    p: &Conv2dParams,
    (x, [_, c, h, w]): (&[f32], [usize; 4]),
    images: Range<usize>,
    f: impl FnOnce(Padded<'_>) -> R,
) -> R {
    let pad = p.padding;
    let input = &x[images.start * c * h * w..images.end * c * h * w];
    let [hp, wp] = [pad.top + h + pad.bottom, pad.left + w + pad.right];
    if [hp, wp] == [h, w] {
        return f(Padded {
            data: input,
            plane: [h, w],
            image: c * h * w,
        });
    }
    with_buffer(&PADDED, images.len() * c * hp * wp, |padded| {
        if h * w == 0 {
            // No input values: only padding.
            padded.fill(0.0);
        }
        for (plane, src) in padded
            .chunks_exact_mut((hp * wp).max(1))
            .zip(input.chunks_exact((h * w).max(1)))
        {
            let (above, rest) = plane.split_at_mut(pad.top * wp);
            let (inside, below) = rest.split_at_mut(h * wp);
            above.fill(0.0);
            below.fill(0.0);
            for (row, src) in inside.chunks_exact_mut(wp).zip(src.chunks_exact(w)) {
                row[..pad.left].fill(0.0);
                row[pad.left..pad.left + w].copy_from_slice(src);
                row[pad.left + w..].fill(0.0);
            }
        }
        f(Padded {
            data: padded,
            plane: [hp, wp],
            image: c * hp * wp,
        })
    })
}

/// One band of output rows of `images` images side by side, as im2col columns:
/// band column `c` is output pixel `(rows.start + r / ow, r % ow)` of image
/// `c / (rows.len()·ow)` (`r` the rest), whose tap `(i, j)` of channel `ci` reads
/// padded input `(oy·s0 + i·d0, ox·s1 + j·d1)` of that image.
struct BandColumns<'a> {
    p: &'a Conv2dParams,
    x: Padded<'a>,
    /// Input channels (of the group).
    channels: usize,
    /// `[kh, kw]`.
    kernel: [usize; 2],
    rows: Range<usize>,
    ow: usize,
    images: usize,
}

/// Up to `NR` consecutive band columns within one output row: `(first lane, lanes,
/// offset of the first column's tap (0, 0) from its channel's plane in the first
/// image)`.
type Run = (usize, usize, usize);

impl BandColumns<'_> {
    /// Band columns (pixels of every image) in all.
    fn len(&self) -> usize {
        self.images * self.rows.len() * self.ow
    }

    /// Writes GEMM panels `panels` of the band's im2col (`k × NR` values each, as
    /// `gemm::pack_b` lays them out; columns past the band zero) into `out`, one
    /// panel at a time: row `(ci·kh + i)·kw + j` of a panel is its columns' tap
    /// `(i, j)` of channel `ci`, a copy of `NR` consecutive inputs (strided when the
    /// convolution is) per output row the panel spans.
    fn unroll(&self, panels: Range<usize>, out: &mut [f32]) {
        const NR: usize = gemm::NR;
        let ([hp, wp], [kh, kw]) = (self.x.plane, self.kernel);
        let ([_, s1], [d0, d1]) = (self.p.stride, self.p.dilation);
        let k = self.channels * kh * kw;
        if k == 0 {
            return;
        }
        for (q, panel) in panels.zip(out.chunks_exact_mut(k * NR)) {
            let (runs, count, filled) = self.runs(q);
            let runs = &runs[..count];
            // A panel within one output row of a stride-1 convolution: one copy per row.
            let whole = match runs {
                [(0, NR, at)] if s1 == 1 => Some(*at),
                _ => None,
            };
            let mut rows = panel.chunks_exact_mut(NR);
            for ci in 0..self.channels {
                for i in 0..kh {
                    for j in 0..kw {
                        let tap = &self.x.data[(ci * hp + i * d0) * wp + j * d1..];
                        let row = rows.next().expect("k rows per panel");
                        if let Some(at) = whole {
                            row.copy_from_slice(&tap[at..at + NR]);
                            continue;
                        }
                        row[filled..].fill(0.0);
                        for &(lane, lanes, at) in runs {
                            let src = tap[at..].iter().step_by(s1);
                            for (v, &x) in row[lane..lane + lanes].iter_mut().zip(src) {
                                *v = x;
                            }
                        }
                    }
                }
            }
        }
    }

    /// Panel `q`'s columns split at output-row ends ([`Run`]s), how many, and the
    /// lanes they fill.
    fn runs(&self, q: usize) -> ([Run; gemm::NR], usize, usize) {
        const NR: usize = gemm::NR;
        let ([_, wp], [s0, s1]) = (self.x.plane, self.p.stride);
        let (first, end) = (q * NR, self.len().min((q + 1) * NR));
        let band = self.rows.len() * self.ow;
        let mut runs = [(0, 0, 0); NR];
        let (mut count, mut c) = (0, first);
        while c < end {
            let (image, r) = (c / band, c % band);
            let (oy, ox) = (self.rows.start + r / self.ow, r % self.ow);
            let lanes = (self.ow - ox).min(end - c);
            runs[count] = (
                c - first,
                lanes,
                image * self.x.image + oy * s0 * wp + ox * s1,
            );
            count += 1;
            c += lanes;
        }
        (runs, count, end.saturating_sub(first))
    }
}
