//! Inference `batch_norm` on contiguous f32 `[N, C, …]` data: rml-core's formula
//! (`((x − mean) · 1/√(var + ε) · γ + β)` in f64, rounded once) over plain slices, so
//! it equals the reference bit for bit without a checked index per element.

/// Per-channel operands: running mean and variance, optional scale γ and shift β,
/// each `C` values.
pub struct ChannelParams<'a> {
    /// Running mean.
    pub mean: &'a [f32],
    /// Running variance.
    pub var: &'a [f32],
    /// Scale (1 when absent).
    pub weight: Option<&'a [f32]>,
    /// Shift (0 when absent).
    pub bias: Option<&'a [f32]>,
}

/// Normalizes `x` (`dims` = `[N, C, …]`) into `out`; `false` (nothing written) when a
/// length does not match the dims or ε is negative, leaving the node to rml-core.
pub fn batch_norm(
    x: &[f32],
    dims: &[usize],
    p: &ChannelParams<'_>,
    epsilon: f32,
    out: &mut [f32],
) -> bool {
    let (Some(&n), Some(&c)) = (dims.first(), dims.get(1)) else {
        return false;
    };
    let inner: usize = dims[2..].iter().product();
    let per_channel = |v: Option<&[f32]>| v.is_none_or(|v| v.len() == c);
    let fits = epsilon >= 0.0
        && x.len() == n * c * inner
        && out.len() == x.len()
        && p.mean.len() == c
        && p.var.len() == c
        && per_channel(p.weight)
        && per_channel(p.bias);
    if !fits || inner == 0 {
        return fits;
    }
    for (src, dst) in x
        .chunks_exact(c * inner)
        .zip(out.chunks_exact_mut(c * inner))
    {
        for ch in 0..c {
            let mean = f64::from(p.mean[ch]);
            let inv_std = 1.0 / (f64::from(p.var[ch]) + f64::from(epsilon)).sqrt();
            let w = p.weight.map_or(1.0, |w| f64::from(w[ch]));
            let b = p.bias.map_or(0.0, |b| f64::from(b[ch]));
            let range = ch * inner..(ch + 1) * inner;
            normalize(&src[range.clone()], &mut dst[range], [mean, inv_std, w, b]);
        }
    }
    true
}

/// `dst = (src − mean) · inv_std · w + b` in f64, rounded once to f32 (rml-core's
/// normalization formula, on rml-kernels' f64 lanes).
pub(super) fn normalize(src: &[f32], dst: &mut [f32], params: [f64; 4]) {
    let done = rml_kernels::norm::normalize_f64(src, params, dst);
    debug_assert!(done.is_ok(), "callers pass equal lengths");
}
