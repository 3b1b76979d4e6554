//! `max_pool2d` on contiguous f32 NCHW data: the reference op's window rule (taps
//! on padding skipped, NaN propagates) over plain slices, so each tap is one load
//! and compare instead of a checked multi-index access. Exact, so it equals rml-core.

use rml_core::ops::pool::Pool2dParams;

/// Max-pools `x` (`[N, C, H, W]`) into `out` (`[N, C, OH, OW]`); `false` (nothing
/// written) when the lengths do not match the dims or a window parameter is zero,
/// leaving the node to rml-core.
pub fn max_pool2d(
    p: &Pool2dParams,
    x: &[f32],
    [n, c, h, w]: [usize; 4],
    out: &mut [f32],
    [oh, ow]: [usize; 2],
) -> bool {
    let nonzero = p
        .kernel
        .iter()
        .chain(&p.stride)
        .chain(&p.dilation)
        .all(|&v| v > 0);
    if !nonzero || x.len() != n * c * h * w || out.len() != n * c * oh * ow {
        return false;
    }
    let (top, left) = (p.padding.top, p.padding.left);
    for (plane, dst) in x.chunks_exact(h * w).zip(out.chunks_exact_mut(oh * ow)) {
        for (oy, row) in dst.chunks_exact_mut(ow).enumerate() {
            // Taps in the reference's order per output (rows, then columns), each
            // tap swept over the output columns it lands on for; NaN once any tap
            // is NaN, else the first largest — as selects, not data branches.
            row.fill(f32::NEG_INFINITY);
            for ky in 0..p.kernel[0] {
                let iy = (oy * p.stride[0] + ky * p.dilation[0]).checked_sub(top);
                let Some(src) = iy.filter(|&iy| iy < h).map(|iy| &plane[iy * w..][..w]) else {
                    continue;
                };
                // A 2-wide, stride-2 window inside the row (the common 2×2 pool):
                // both taps of an output from one pass over column pairs, in the
                // same order.
                if (p.kernel[1], p.stride[1], p.dilation[1], left) == (2, 2, 1, 0) && 2 * ow <= w {
                    for (v, pair) in row.iter_mut().zip(src.chunks_exact(2)) {
                        *v = larger_or_nan(larger_or_nan(*v, pair[0]), pair[1]);
                    }
                    continue;
                }
                for kx in 0..p.kernel[1] {
                    let shift = kx * p.dilation[1];
                    let (lo, hi) = columns_inside(left, shift, p.stride[1], [w, ow]);
                    if lo == hi {
                        continue;
                    }
                    let taps = src[lo * p.stride[1] + shift - left..]
                        .iter()
                        .step_by(p.stride[1]);
                    for (v, &value) in row[lo..hi].iter_mut().zip(taps) {
                        *v = larger_or_nan(*v, value);
                    }
                }
            }
        }
    }
    true
}

/// The running maximum after tap `value`: NaN once either is NaN, else `value` only
/// when strictly larger (the first largest stays) — as selects, not data branches.
#[inline(always)]
fn larger_or_nan(current: f32, value: f32) -> f32 {
    let larger = if value > current { value } else { current };
    if value.is_nan() | current.is_nan() {
        f32::NAN
    } else {
        larger
    }
}

/// The output columns `lo..hi` (within `0..ow`) whose tap at `ox·stride + shift − left`
/// lies on an input row of `w` columns.
fn columns_inside(left: usize, shift: usize, stride: usize, [w, ow]: [usize; 2]) -> (usize, usize) {
    let lo = left.saturating_sub(shift).div_ceil(stride).min(ow);
    let hi = (w + left)
        .saturating_sub(shift)
        .div_ceil(stride)
        .clamp(lo, ow);
    (lo, hi)
}
