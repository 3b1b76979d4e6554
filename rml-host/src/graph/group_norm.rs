//! `group_norm` on contiguous f32 `[N, C, …]` data: rml-core's two-pass f64 moments
//! per (image, group) block (rml-kernels' `moments_rows_f64`, [`BLOCKS_AT_ONCE`]
//! blocks side by side) and its normalization formula, over plain slices, so it
//! equals the reference bit for bit. The executor streams blocks over threads and
//! runs the program that reads the output on each few blocks while they are in
//! cache (a group norm followed by SiLU reads and writes memory once).

use std::ops::Range;

use rml_kernels::reduce as kr;

use super::batch_norm::normalize;

/// Blocks whose moments are computed side by side, then normalized.
pub const BLOCKS_AT_ONCE: usize = 4;

/// A group norm's shape and parameters: `channels` (C) in `groups` groups of
/// `inner` values per channel, per-channel `weight` (γ) and `bias` (β) if any, ε.
#[derive(Clone, Copy)]
pub struct GroupNorm<'a> {
    /// `[C, inner]`.
    pub dims: [usize; 2],
    /// Channel groups (divides C).
    pub groups: usize,
    /// γ and β, `C` values each.
    pub params: [Option<&'a [f32]>; 2],
    /// Added to the variance.
    pub epsilon: f32,
}

/// `[C, inner]` of a group norm of `x` dims `[N, C, …]` in `groups` groups with
/// parameters of `param_lens` values and `epsilon`, or `None` when `groups` does
/// not divide C, a parameter does not hold one value per channel, or ε is
/// negative. Empty channels (`inner` 0) fit: the output is empty too.
pub fn shape(
    dims: &[usize],
    groups: usize,
    param_lens: [Option<usize>; 2],
    epsilon: f32,
) -> Option<[usize; 2]> {
    let c = *dims.get(1)?;
    let inner: usize = dims[2..].iter().product();
    let fits = epsilon >= 0.0
        && groups > 0
        && c.is_multiple_of(groups)
        && param_lens.iter().flatten().all(|&len| len == c);
    fits.then_some([c, inner])
}

impl GroupNorm<'_> {
    /// Values in one (image, group) block.
    pub fn block_len(&self) -> usize {
        self.dims[0] / self.groups * self.dims[1]
    }

    /// Normalizes blocks `blocks` (counted over all images) of `x` (the whole
    /// `[N, C, …]` input) into `out` (exactly those blocks).
    pub fn blocks(&self, x: &[f32], blocks: Range<usize>, out: &mut [f32]) {
        let ([_, inner], groups) = (self.dims, self.groups);
        let (block, per_group) = (self.block_len(), self.dims[0] / groups);
        let mut moments = [[0.0f64; 2]; BLOCKS_AT_ONCE];
        for (q, quad) in out.chunks_mut(BLOCKS_AT_ONCE * block).enumerate() {
            let first_block = blocks.start + BLOCKS_AT_ONCE * q;
            let moments = &mut moments[..quad.len() / block];
            let src = &x[first_block * block..][..quad.len()];
            kr::moments_rows_f64(src, block, moments).expect("whole blocks");
            let quad_blocks = (first_block..).zip(quad.chunks_exact_mut(block));
            for (&[mean, var], (j, dst)) in moments.iter().zip(quad_blocks) {
                let inv_std = 1.0 / (var + f64::from(self.epsilon)).sqrt();
                let first = (j % groups) * per_group;
                let src = x[j * block..][..block].chunks_exact(inner);
                for (ci, (s, d)) in src.zip(dst.chunks_exact_mut(inner)).enumerate() {
                    let [w, b] = self.params;
                    let w = w.map_or(1.0, |w| f64::from(w[first + ci]));
                    let b = b.map_or(0.0, |b| f64::from(b[first + ci]));
                    normalize(s, d, [mean, inv_std, w, b]);
                }
            }
        }
    }
}
