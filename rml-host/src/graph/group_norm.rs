//! `group_norm` on contiguous f32 `[N, C, …]` data: rml-core's two-pass f64 moments
//! per (image, group) (rml-kernels' `moments_rows_f64`, four blocks side by side)
//! and its normalization formula, over plain slices, so it equals the reference bit
//! for bit. (Image, group) blocks split across threads.

use rml_kernels::reduce as kr;

use super::batch_norm::normalize;
use super::par::{Parallel, for_row_blocks};

/// Normalizes `x` (`dims` = `[N, C, …]`) in `groups` channel groups into `out`, with
/// optional per-channel `weight` (γ) and `bias` (β); `false` (nothing written) when a
/// length does not fit, `groups` does not divide `C`, or ε is negative, leaving the
/// node to rml-core.
pub fn group_norm(
    x: &[f32],
    dims: &[usize],
    [weight, bias]: [Option<&[f32]>; 2],
    (groups, epsilon): (usize, f32),
    out: &mut [f32],
    (chunks, parallel): (usize, Parallel<'_>),
) -> bool {
    let (Some(&n), Some(&c)) = (dims.first(), dims.get(1)) else {
        return false;
    };
    let inner: usize = dims[2..].iter().product();
    let per_channel = |v: Option<&[f32]>| v.is_none_or(|v| v.len() == c);
    let fits = epsilon >= 0.0
        && groups > 0
        && c % groups == 0
        && inner > 0
        && x.len() == n * c * inner
        && out.len() == x.len()
        && per_channel(weight)
        && per_channel(bias);
    if !fits {
        return false;
    }
    let per_group = c / groups;
    let block = per_group * inner;
    for_row_blocks(out, [n * groups, block], chunks, parallel, &|range, dst| {
        // Four of this chunk's blocks at a time: their moments, then their
        // normalization.
        let mut moments = [[0.0f64; 2]; 4];
        for (q, quad) in dst.chunks_mut(4 * block).enumerate() {
            let first_block = range.start + 4 * q;
            let moments = &mut moments[..quad.len() / block];
            let src = &x[first_block * block..][..quad.len()];
            kr::moments_rows_f64(src, block, moments).expect("block lengths are checked above");
            let blocks = (first_block..).zip(quad.chunks_exact_mut(block));
            for (&[mean, var], (j, dst)) in moments.iter().zip(blocks) {
                let inv_std = 1.0 / (var + f64::from(epsilon)).sqrt();
                let first = (j % groups) * per_group;
                let src = x[j * block..][..block].chunks_exact(inner);
                for (ci, (s, d)) in src.zip(dst.chunks_exact_mut(inner)).enumerate() {
                    let w = weight.map_or(1.0, |w| f64::from(w[first + ci]));
                    let b = bias.map_or(0.0, |b| f64::from(b[first + ci]));
                    normalize(s, d, [mean, inv_std, w, b]);
                }
            }
        }
    });
    true
}
