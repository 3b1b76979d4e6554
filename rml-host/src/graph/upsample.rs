//! `upsample_nearest2d` on contiguous f32 NCHW data: each output row copies the
//! input row rml-core's `nearest_source_index` picks, columns likewise, over plain
//! slices (a copy, so it equals the reference exactly). The column indices are
//! worked out once per call, and an output row whose source row is the previous
//! one's is a copy of that output row.

use std::cell::RefCell;

use rml_core::ops::upsample::nearest_source_index;

thread_local! {
    /// The source column of each output column, reused across calls.
    static SOURCE_COLUMNS: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

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
    SOURCE_COLUMNS.with_borrow_mut(|columns| {
        columns.clear();
        columns.extend((0..ow).map(|ox| nearest_source_index(ox, w, ow)));
        for (plane, dst) in x.chunks_exact(h * w).zip(out.chunks_exact_mut(oh * ow)) {
            let mut previous = None;
            for oy in 0..oh {
                let sy = nearest_source_index(oy, h, oh);
                if previous == Some(sy) {
                    dst.copy_within((oy - 1) * ow..oy * ow, oy * ow);
                    continue;
                }
                let src = &plane[sy * w..][..w];
                for (v, &sx) in dst[oy * ow..][..ow].iter_mut().zip(columns.iter()) {
                    *v = src[sx];
                }
                previous = Some(sy);
            }
        }
    });
    true
}
