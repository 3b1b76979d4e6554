//! `upsample_nearest2d` on contiguous f32 NCHW data: each output row copies the
//! input row rml-core's `nearest_source_index` picks, columns likewise, over plain
//! slices (a copy, so it equals the reference exactly).

use rml_core::ops::upsample::nearest_source_index;

/// Resizes `x` (`[N, C, H, W]`) into `out` (`[N, C, OH, OW]`); `false` (nothing
/// written) when the lengths do not match the dims or an image is empty, leaving the
/// node to rml-core.
pub fn upsample_nearest2d(
    x: &[f32],
    [n, c, h, w]: [usize; 4],
    out: &mut [f32],
    [oh, ow]: [usize; 2],
) -> bool {
    let fits = h * w > 0 && oh * ow > 0 && x.len() == n * c * h * w && out.len() == n * c * oh * ow;
    if !fits {
        return false;
    }
    for (plane, dst) in x.chunks_exact(h * w).zip(out.chunks_exact_mut(oh * ow)) {
        for (oy, row) in dst.chunks_exact_mut(ow).enumerate() {
            let src = &plane[nearest_source_index(oy, h, oh) * w..][..w];
            for (ox, v) in row.iter_mut().enumerate() {
                *v = src[nearest_source_index(ox, w, ow)];
            }
        }
    }
    true
}
