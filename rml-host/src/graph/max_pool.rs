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
    // Input index of tap `k` of window `o` along one axis, if on the input.
    let tap = |o: usize, k: usize, axis: usize, pad: usize, size: usize| {
        (o * p.stride[axis] + k * p.dilation[axis])
            .checked_sub(pad)
            .filter(|&i| i < size)
    };
    // Output columns whose every tap lies on the input (no column check needed).
    let (s1, d1, left) = (p.stride[1], p.dilation[1], p.padding.left);
    let span = d1 * (p.kernel[1] - 1);
    let lo = left.div_ceil(s1).min(ow);
    let hi = (w + left)
        .checked_sub(span + 1)
        .map_or(lo, |last| (last / s1 + 1).clamp(lo, ow));
    for (plane, dst) in x.chunks_exact(h * w).zip(out.chunks_exact_mut(oh * ow)) {
        for (oy, row) in dst.chunks_exact_mut(ow).enumerate() {
            for (ox, v) in row.iter_mut().enumerate() {
                // The reference's rule (NaN once any tap is NaN, else the first
                // largest) without a data-dependent branch: a running max that
                // never holds NaN, and a NaN flag.
                let (mut max, mut nan) = (f32::NEG_INFINITY, false);
                let inside = (lo..hi).contains(&ox);
                for ky in 0..p.kernel[0] {
                    let Some(iy) = tap(oy, ky, 0, p.padding.top, h) else {
                        continue;
                    };
                    let src = &plane[iy * w..][..w];
                    for kx in 0..p.kernel[1] {
                        let ix = if inside {
                            Some(ox * s1 + kx * d1 - left)
                        } else {
                            tap(ox, kx, 1, left, w)
                        };
                        if let Some(ix) = ix {
                            let value = src[ix];
                            nan |= value.is_nan();
                            max = if value > max { value } else { max };
                        }
                    }
                }
                *v = if nan { f32::NAN } else { max };
            }
        }
    }
    true
}
