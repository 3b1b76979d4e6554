//! The 256-element K-quant super-blocks: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, and the Q8_K
//! activation format.
//!
//! A super-block holds 16 sub-blocks of 16 (Q2_K, Q3_K, Q6_K) or 8 sub-blocks of 32
//! (Q4_K, Q5_K), each with its own small integer scale (and, for Q2_K/Q4_K/Q5_K, a
//! min), themselves scaled by one or two f16 super-scales.
//!
//! # How the reference quantizers choose their scales
//!
//! Rounding `x / scale` with `scale = max|x| / nmax` is rarely the scale with the least
//! error. ggml searches, and these functions do the same, step for step, in f32:
//!
//! * [`make_qx_quants`] (Q6_K, symmetric): start from `−nmax / max`, then try 18 nearby
//!   inverse scales `−(nmax + 0.1·is) / max`; for each, the least-squares scale for the
//!   rounded quants is `Σwxl / Σwl²` with weights `w = x²`, and the candidate that
//!   maximizes `(Σwxl)² / Σwl²` (i.e. minimizes the weighted error) wins.
//! * [`make_q3_quants`] (Q3_K): the same start, then up to 5 passes of coordinate
//!   descent that move single quants when that lowers the weighted error.
//! * [`make_qkx2_quants`] (Q2_K/Q4_K/Q5_K, asymmetric `x ≈ scale·l + min`): start from
//!   the min/max range, then for `nstep + 1` inverse scales solve the 2×2 weighted
//!   least-squares problem for `(scale, min)` and keep the one with the least weighted
//!   error (absolute error for Q2_K, squared otherwise).
//!
//! After the per-sub-block search the sub-block scales are themselves quantized (to 4, 6
//! or 8 bits) against the super-block scale, and the quants are recomputed against the
//! *stored* scales so the file decodes to what was optimized.

// Index loops mirror the packed layouts (element j ↔ byte j % 32, bit j / 32, …).
#![allow(clippy::needless_range_loop)]

use bytemuck::Zeroable as _;
use half::f16;

use super::{QuantBlock, QuantDot, f16_from, nearest_int};
use crate::dtype::DType;

/// Elements per K-quant super-block.
pub const QK_K: usize = 256;

/// ggml's threshold below which a group counts as all zeros.
const GROUP_MAX_EPS: f32 = 1e-15;

/// Q2_K: 16 sub-blocks of 16; `x = d·(sc & 15)·q − dmin·(sc >> 4)`, q 2-bit.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ2K {
    /// Per sub-block: low nibble scale, high nibble min.
    pub scales: [u8; 16],
    /// 2-bit quants: per 128-half, four 2-bit planes (shift 0, 2, 4, 6) over 32 bytes.
    pub qs: [u8; 64],
    /// Super-scale of the scales.
    pub d: f16,
    /// Super-scale of the mins.
    pub dmin: f16,
}

/// Q3_K: 16 sub-blocks of 16; `x = d·(sc − 32)·q`, q = 2 low bits − (high bit ? 0 : 4).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ3K {
    /// High bits: bit k of byte l belongs to pass k (see [`BlockQ2K::qs`] order).
    pub hmask: [u8; 32],
    /// Low 2 bits, ordered as in [`BlockQ2K`].
    pub qs: [u8; 64],
    /// 16 6-bit scales (biased by 32) packed into 12 bytes.
    pub scales: [u8; 12],
    /// Super-scale.
    pub d: f16,
}

/// Q4_K: 8 sub-blocks of 32; `x = d·sc·q − dmin·m`, 6-bit scales and mins.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ4K {
    /// Super-scale of the scales.
    pub d: f16,
    /// Super-scale of the mins.
    pub dmin: f16,
    /// 8 scales and 8 mins, 6 bits each, packed into 12 bytes ([`scale_min_k4`]).
    pub scales: [u8; 12],
    /// 4 chunks of 32 bytes: low nibbles are sub-block 2c, high nibbles 2c + 1.
    pub qs: [u8; 128],
}

/// Q5_K: as [`BlockQ4K`] with a 5th bit per quant.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ5K {
    /// Super-scale of the scales.
    pub d: f16,
    /// Super-scale of the mins.
    pub dmin: f16,
    /// Packed 6-bit scales and mins, as in [`BlockQ4K`].
    pub scales: [u8; 12],
    /// High bits: element 64c + l uses bit 2c of `qh[l]`, element 64c + 32 + l bit 2c + 1.
    pub qh: [u8; 32],
    /// Low nibbles, as in [`BlockQ4K`].
    pub qs: [u8; 128],
}

/// Q6_K: 16 sub-blocks of 16; `x = d·sc·(q − 32)`, signed 8-bit scales.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ6K {
    /// Low 4 bits of the quants.
    pub ql: [u8; 128],
    /// High 2 bits of the quants.
    pub qh: [u8; 64],
    /// Sub-block scales.
    pub scales: [i8; 16],
    /// Super-scale.
    pub d: f16,
}

/// Q8_K (activations for the K-quants): `x = d·q`, with per-16 sums of the quants.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ8K {
    /// Scale (f32, unlike every other block type).
    pub d: f32,
    /// Quants.
    pub qs: [i8; 256],
    /// `bsums[k] = Σ qs[16k .. 16k + 16]`, used to apply the K-quant mins cheaply.
    pub bsums: [i16; 16],
}

const _: () = assert!(core::mem::size_of::<BlockQ2K>() == 84);
const _: () = assert!(core::mem::size_of::<BlockQ3K>() == 110);
const _: () = assert!(core::mem::size_of::<BlockQ4K>() == 144);
const _: () = assert!(core::mem::size_of::<BlockQ5K>() == 176);
const _: () = assert!(core::mem::size_of::<BlockQ6K>() == 210);
const _: () = assert!(core::mem::size_of::<BlockQ8K>() == 292);

/// The 6-bit scale and min of sub-block `j` (0..8) of a Q4_K/Q5_K block
/// (ggml's `get_scale_min_k4`).
pub fn scale_min_k4(j: usize, s: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

/// The 6-bit scale of sub-block `j` (0..16) of a Q3_K block, with its bias of 32 removed.
pub fn scale_q3k(j: usize, s: &[u8; 12]) -> i8 {
    let low = if j < 8 { s[j] & 15 } else { s[j - 8] >> 4 };
    let high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    (low | (high << 4)) as i8 - 32
}

/// Symmetric scale search with weights `x²` (ggml `make_qx_quants`, `rmse_type` 1):
/// writes quants `0..2·nmax` (offset by `nmax`) to `l` and returns the scale.
pub fn make_qx_quants(nmax: i32, x: &[f32], l: &mut [i8]) -> f32 {
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l.fill(0);
        return 0.0;
    }
    let quant = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    let mut iscale = -(nmax as f32) / max;
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for (li, &v) in l.iter_mut().zip(x) {
        let q = quant(iscale, v);
        *li = (q + nmax) as i8;
        let w = v * v;
        sumlx += w * v * q as f32;
        suml2 += w * q as f32 * q as f32;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1 * is as f32) / max;
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for &v in x {
            let q = quant(iscale, v) as f32;
            let w = v * v;
            sumlx += w * v * q;
            suml2 += w * q * q;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for (li, &v) in l.iter_mut().zip(x) {
                *li = (quant(iscale, v) + nmax) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// Symmetric scale search with coordinate descent (ggml `make_q3_quants`, `do_rmse`):
/// writes quants `0..2·nmax` to `l` and returns the scale.
pub fn make_q3_quants(nmax: i32, x: &[f32], l: &mut [i8]) -> f32 {
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l.fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for (li, &v) in l.iter_mut().zip(x) {
        let q = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
        *li = q as i8;
        let w = v * v;
        sumlx += w * v * q as f32;
        suml2 += w * q as f32 * q as f32;
    }
    for _ in 0..5 {
        let mut changed = 0;
        for (li, &v) in l.iter_mut().zip(x) {
            let w = v * v;
            let old = f32::from(*li);
            let mut slx = sumlx - w * v * old;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * old * old;
                let new = nearest_int(v * sl2 / slx).clamp(-nmax, nmax - 1);
                if new != i32::from(*li) {
                    slx += w * v * new as f32;
                    sl2 += w * new as f32 * new as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        *li = new as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        changed += 1;
                    }
                }
            }
        }
        if changed == 0 {
            break;
        }
    }
    for li in l.iter_mut() {
        *li += nmax as i8;
    }
    if suml2 > 0.0 { sumlx / suml2 } else { 0.0 }
}

/// Parameters of the asymmetric search [`make_qkx2_quants`].
#[derive(Clone, Copy, Debug)]
pub struct Qkx2Search {
    /// Largest quant (3, 15 or 31).
    pub nmax: i32,
    /// Offset of the first trial inverse scale, in quant steps.
    pub rmin: f32,
    /// Step between trial inverse scales.
    pub rdelta: f32,
    /// Number of trial steps after the first.
    pub nstep: i32,
    /// Minimize the weighted absolute error (Q2_K) rather than the squared error.
    pub use_mad: bool,
}

/// Asymmetric scale-and-min search (ggml `make_qkx2_quants`): fits `x ≈ scale·l − m`
/// with `l` in `0..=nmax`, writes `l`, and returns `(scale, m)` with `m ≥ 0`.
pub fn make_qkx2_quants(p: Qkx2Search, x: &[f32], weights: &[f32], l: &mut [u8]) -> (f32, f32) {
    let nmax = p.nmax;
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for (&v, &w) in x.iter().zip(weights).skip(1) {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
        sum_w += w;
        sum_x += w * v;
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l.fill(0);
        return (0.0, -min);
    }
    let err = |d: f32| if p.use_mad { d.abs() } else { d * d };
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for ((li, &v), &w) in l.iter_mut().zip(x).zip(weights) {
        *li = nearest_int(iscale * (v - min)).clamp(0, nmax) as u8;
        best_error += w * err(scale * f32::from(*li) + min - v);
    }
    if p.nstep < 1 {
        return (scale, -min);
    }
    let mut laux = [0u8; 32];
    let laux = &mut laux[..x.len()];
    for is in 0..=p.nstep {
        iscale = (p.rmin + p.rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for ((la, &v), &w) in laux.iter_mut().zip(x).zip(weights) {
            let q = nearest_int(iscale * (v - min)).clamp(0, nmax);
            *la = q as u8;
            let q = q as f32;
            sum_l += w * q;
            sum_l2 += w * q * q;
            sum_xl += w * q * v;
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for ((&la, &v), &w) in laux.iter().zip(x).zip(weights) {
                cur_error += w * err(this_scale * f32::from(la) + this_min - v);
            }
            if cur_error < best_error {
                l.copy_from_slice(laux);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// Packs 256 2-bit values: per 128-half, byte l holds elements l, l+32, l+64, l+96.
fn pack_2bit(l: &[u8; QK_K]) -> [u8; 64] {
    let mut qs = [0u8; 64];
    for j in (0..QK_K).step_by(128) {
        for i in 0..32 {
            qs[j / 4 + i] =
                l[j + i] | (l[j + i + 32] << 2) | (l[j + i + 64] << 4) | (l[j + i + 96] << 6);
        }
    }
    qs
}

/// Weight quants, sub-block scales and mins of one K-quant block, decoded: the common
/// form that the reference dequantizers and dot products work from.
struct Decoded {
    /// Quant of each element (signed for Q3_K/Q6_K, unsigned otherwise).
    q: [i8; QK_K],
    /// Elements per sub-block (16 or 32).
    sub: usize,
    /// Integer scale per sub-block.
    scales: [i32; 16],
    /// Integer min per sub-block (0 for the symmetric types).
    mins: [i32; 16],
    /// Super-scale of the scales.
    d: f32,
    /// Super-scale of the mins.
    dmin: f32,
}

impl Decoded {
    fn dequantize(&self, out: &mut [f32]) {
        for (s, chunk) in out.chunks_exact_mut(self.sub).enumerate() {
            let dl = self.d * self.scales[s] as f32;
            let ml = self.dmin * self.mins[s] as f32;
            for (o, &q) in chunk.iter_mut().zip(&self.q[s * self.sub..]) {
                *o = dl * f32::from(q) - ml;
            }
        }
    }

    /// `Σ_i x_i · a_i` with `a = a.d · a.qs`.
    fn dot(&self, a: &BlockQ8K) -> f32 {
        let (mut isum, mut msum) = (0i32, 0i32);
        for s in 0..QK_K / self.sub {
            let range = s * self.sub..(s + 1) * self.sub;
            let qa: i32 = self.q[range.clone()]
                .iter()
                .zip(&a.qs[range.clone()])
                .map(|(&q, &a)| i32::from(q) * i32::from(a))
                .sum();
            isum += self.scales[s] * qa;
            let asum: i32 = a.qs[range].iter().map(|&a| i32::from(a)).sum();
            msum += self.mins[s] * asum;
        }
        a.d * self.d * isum as f32 - a.d * self.dmin * msum as f32
    }
}

impl BlockQ2K {
    fn decode(&self) -> Decoded {
        let mut q = [0i8; QK_K];
        for half in 0..2 {
            for plane in 0..4 {
                for l in 0..32 {
                    let byte = self.qs[32 * half + l];
                    q[128 * half + 32 * plane + l] = ((byte >> (2 * plane)) & 3) as i8;
                }
            }
        }
        let mut scales = [0i32; 16];
        let mut mins = [0i32; 16];
        for (j, &sc) in self.scales.iter().enumerate() {
            scales[j] = i32::from(sc & 15);
            mins[j] = i32::from(sc >> 4);
        }
        Decoded {
            q,
            sub: 16,
            scales,
            mins,
            d: self.d.to_f32(),
            dmin: self.dmin.to_f32(),
        }
    }
}

impl QuantBlock for BlockQ2K {
    const DTYPE: DType = DType::Q2K;
    const BLOCK: usize = QK_K;

    fn quantize_block(x: &[f32]) -> Self {
        let mut l = [0u8; QK_K];
        let mut scales = [0f32; 16];
        let mut mins = [0f32; 16];
        let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
        let search = Qkx2Search {
            nmax: 3,
            rmin: -0.5,
            rdelta: 0.1,
            nstep: 15,
            use_mad: true,
        };
        for j in 0..16 {
            let xs = &x[16 * j..16 * j + 16];
            let mut weights = [0f32; 16];
            for (w, &v) in weights.iter_mut().zip(xs) {
                *w = v.abs();
            }
            let (scale, min) = make_qkx2_quants(search, xs, &weights, &mut l[16 * j..16 * j + 16]);
            scales[j] = scale;
            mins[j] = min;
            if scale > max_scale {
                max_scale = scale;
            }
            if min > max_min {
                max_min = min;
            }
        }
        let mut b = BlockQ2K::zeroed();
        if max_scale > 0.0 {
            let iscale = 15.0 / max_scale;
            for j in 0..16 {
                b.scales[j] = nearest_int(iscale * scales[j]) as u8;
            }
            b.d = f16_from(max_scale / 15.0);
        }
        if max_min > 0.0 {
            let iscale = 15.0 / max_min;
            for j in 0..16 {
                let m = nearest_int(iscale * mins[j]);
                b.scales[j] = (i32::from(b.scales[j]) | (m << 4)) as u8;
            }
            b.dmin = f16_from(max_min / 15.0);
        }
        for j in 0..16 {
            let d = b.d.to_f32() * f32::from(b.scales[j] & 15);
            if d == 0.0 {
                continue;
            }
            let dm = b.dmin.to_f32() * f32::from(b.scales[j] >> 4);
            for i in 0..16 {
                l[16 * j + i] = nearest_int((x[16 * j + i] + dm) / d).clamp(0, 3) as u8;
            }
        }
        b.qs = pack_2bit(&l);
        b
    }

    fn dequantize_block(&self, out: &mut [f32]) {
        self.decode().dequantize(out);
    }
}

impl QuantDot for BlockQ2K {
    type Act = BlockQ8K;

    fn dot_block(&self, a: &BlockQ8K) -> f32 {
        self.decode().dot(a)
    }
}

impl BlockQ3K {
    fn decode(&self) -> Decoded {
        let mut q = [0i8; QK_K];
        for half in 0..2 {
            for plane in 0..4 {
                let bit = 4 * half + plane;
                for l in 0..32 {
                    let low = ((self.qs[32 * half + l] >> (2 * plane)) & 3) as i8;
                    let high = (self.hmask[l] >> bit) & 1;
                    q[128 * half + 32 * plane + l] = low - if high == 1 { 0 } else { 4 };
                }
            }
        }
        let mut scales = [0i32; 16];
        for (j, s) in scales.iter_mut().enumerate() {
            *s = i32::from(scale_q3k(j, &self.scales));
        }
        Decoded {
            q,
            sub: 16,
            scales,
            mins: [0; 16],
            d: self.d.to_f32(),
            dmin: 0.0,
        }
    }
}

impl QuantBlock for BlockQ3K {
    const DTYPE: DType = DType::Q3K;
    const BLOCK: usize = QK_K;

    fn quantize_block(x: &[f32]) -> Self {
        let mut l = [0i8; QK_K];
        let mut scales = [0f32; 16];
        let (mut max_scale, mut amax) = (0.0f32, 0.0f32);
        for j in 0..16 {
            scales[j] = make_q3_quants(4, &x[16 * j..16 * j + 16], &mut l[16 * j..16 * j + 16]);
            if scales[j].abs() > amax {
                amax = scales[j].abs();
                max_scale = scales[j];
            }
        }
        let mut b = BlockQ3K::zeroed();
        if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for (j, &scale) in scales.iter().enumerate() {
                let q = (nearest_int(iscale * scale) as i8).clamp(-32, 31) + 32;
                if j < 8 {
                    b.scales[j] = (q & 15) as u8;
                } else {
                    b.scales[j - 8] |= ((q & 15) as u8) << 4;
                }
                b.scales[j % 4 + 8] |= ((q >> 4) as u8) << (2 * (j / 4));
            }
            b.d = f16_from(1.0 / iscale);
        }
        for j in 0..16 {
            let d = b.d.to_f32() * f32::from(scale_q3k(j, &b.scales));
            if d == 0.0 {
                continue;
            }
            for i in 0..16 {
                l[16 * j + i] = (nearest_int(x[16 * j + i] / d).clamp(-4, 3) + 4) as i8;
            }
        }
        let mut lu = [0u8; QK_K];
        for (j, (&q, u)) in l.iter().zip(lu.iter_mut()).enumerate() {
            let (byte, bit) = (j % 32, j / 32);
            let mut q = q as u8;
            if q > 3 {
                b.hmask[byte] |= 1 << bit;
                q -= 4;
            }
            *u = q;
        }
        b.qs = pack_2bit(&lu);
        b
    }

    fn dequantize_block(&self, out: &mut [f32]) {
        self.decode().dequantize(out);
    }
}

impl QuantDot for BlockQ3K {
    type Act = BlockQ8K;

    fn dot_block(&self, a: &BlockQ8K) -> f32 {
        self.decode().dot(a)
    }
}

/// Shared Q4_K/Q5_K quantizer: returns the block's d, dmin, packed scales and the
/// quants `0..=nmax` of all 256 elements.
fn quantize_k4(x: &[f32], search: Qkx2Search) -> (f16, f16, [u8; 12], [u8; QK_K]) {
    let mut l = [0u8; QK_K];
    let mut scales = [0f32; 8];
    let mut mins = [0f32; 8];
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0.0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = libm::sqrtf(sum_x2 / 32.0);
        let mut weights = [0f32; 32];
        for (w, &v) in weights.iter_mut().zip(xs) {
            *w = av_x + v.abs();
        }
        let (scale, min) = make_qkx2_quants(search, xs, &weights, &mut l[32 * j..32 * j + 32]);
        scales[j] = scale;
        mins[j] = min;
        if scale > max_scale {
            max_scale = scale;
        }
        if min > max_min {
            max_min = min;
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut packed = [0u8; 12];
    for j in 0..8 {
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (ls & 0x0f) | ((lm & 0x0f) << 4);
            packed[j - 4] |= (ls >> 4) << 6;
            packed[j] |= (lm >> 4) << 6;
        }
    }
    let d = f16_from(max_scale / 63.0);
    let dmin = f16_from(max_min / 63.0);
    for j in 0..8 {
        let (sc, m) = scale_min_k4(j, &packed);
        let dl = d.to_f32() * f32::from(sc);
        if dl == 0.0 {
            continue;
        }
        let dm = dmin.to_f32() * f32::from(m);
        for i in 0..32 {
            l[32 * j + i] = nearest_int((x[32 * j + i] + dm) / dl).clamp(0, search.nmax) as u8;
        }
    }
    (d, dmin, packed, l)
}

/// Decodes the 8 scales and mins of a Q4_K/Q5_K block.
fn scales_mins_k4(packed: &[u8; 12]) -> ([i32; 16], [i32; 16]) {
    let (mut scales, mut mins) = ([0i32; 16], [0i32; 16]);
    for j in 0..8 {
        let (sc, m) = scale_min_k4(j, packed);
        scales[j] = i32::from(sc);
        mins[j] = i32::from(m);
    }
    (scales, mins)
}

impl BlockQ4K {
    fn decode(&self) -> Decoded {
        let mut q = [0i8; QK_K];
        for c in 0..4 {
            for l in 0..32 {
                let byte = self.qs[32 * c + l];
                q[64 * c + l] = (byte & 15) as i8;
                q[64 * c + 32 + l] = (byte >> 4) as i8;
            }
        }
        let (scales, mins) = scales_mins_k4(&self.scales);
        Decoded {
            q,
            sub: 32,
            scales,
            mins,
            d: self.d.to_f32(),
            dmin: self.dmin.to_f32(),
        }
    }
}

impl QuantBlock for BlockQ4K {
    const DTYPE: DType = DType::Q4K;
    const BLOCK: usize = QK_K;

    fn quantize_block(x: &[f32]) -> Self {
        let search = Qkx2Search {
            nmax: 15,
            rmin: -1.0,
            rdelta: 0.1,
            nstep: 20,
            use_mad: false,
        };
        let (d, dmin, scales, l) = quantize_k4(x, search);
        let mut qs = [0u8; 128];
        for c in 0..4 {
            for i in 0..32 {
                qs[32 * c + i] = l[64 * c + i] | (l[64 * c + 32 + i] << 4);
            }
        }
        BlockQ4K {
            d,
            dmin,
            scales,
            qs,
        }
    }

    fn dequantize_block(&self, out: &mut [f32]) {
        self.decode().dequantize(out);
    }
}

impl QuantDot for BlockQ4K {
    type Act = BlockQ8K;

    fn dot_block(&self, a: &BlockQ8K) -> f32 {
        self.decode().dot(a)
    }
}

impl BlockQ5K {
    fn decode(&self) -> Decoded {
        let mut q = [0i8; QK_K];
        for c in 0..4 {
            for l in 0..32 {
                let byte = self.qs[32 * c + l];
                let h0 = (self.qh[l] >> (2 * c)) & 1;
                let h1 = (self.qh[l] >> (2 * c + 1)) & 1;
                q[64 * c + l] = ((byte & 15) | (h0 << 4)) as i8;
                q[64 * c + 32 + l] = ((byte >> 4) | (h1 << 4)) as i8;
            }
        }
        let (scales, mins) = scales_mins_k4(&self.scales);
        Decoded {
            q,
            sub: 32,
            scales,
            mins,
            d: self.d.to_f32(),
            dmin: self.dmin.to_f32(),
        }
    }
}

impl QuantBlock for BlockQ5K {
    const DTYPE: DType = DType::Q5K;
    const BLOCK: usize = QK_K;

    fn quantize_block(x: &[f32]) -> Self {
        let search = Qkx2Search {
            nmax: 31,
            rmin: -0.5,
            rdelta: 0.1,
            nstep: 15,
            use_mad: false,
        };
        let (d, dmin, scales, l) = quantize_k4(x, search);
        let mut qs = [0u8; 128];
        let mut qh = [0u8; 32];
        for c in 0..4 {
            for i in 0..32 {
                let (lo, hi) = (l[64 * c + i], l[64 * c + 32 + i]);
                qh[i] |= ((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1));
                qs[32 * c + i] = (lo & 15) | ((hi & 15) << 4);
            }
        }
        BlockQ5K {
            d,
            dmin,
            scales,
            qh,
            qs,
        }
    }

    fn dequantize_block(&self, out: &mut [f32]) {
        self.decode().dequantize(out);
    }
}

impl QuantDot for BlockQ5K {
    type Act = BlockQ8K;

    fn dot_block(&self, a: &BlockQ8K) -> f32 {
        self.decode().dot(a)
    }
}

impl BlockQ6K {
    fn decode(&self) -> Decoded {
        let mut q = [0i8; QK_K];
        for half in 0..2 {
            let (ql, qh) = (&self.ql[64 * half..], &self.qh[32 * half..]);
            let y = &mut q[128 * half..];
            for l in 0..32 {
                let h = qh[l];
                y[l] = ((ql[l] & 15) | ((h & 3) << 4)) as i8 - 32;
                y[l + 32] = ((ql[l + 32] & 15) | (((h >> 2) & 3) << 4)) as i8 - 32;
                y[l + 64] = ((ql[l] >> 4) | (((h >> 4) & 3) << 4)) as i8 - 32;
                y[l + 96] = ((ql[l + 32] >> 4) | (((h >> 6) & 3) << 4)) as i8 - 32;
            }
        }
        let mut scales = [0i32; 16];
        for (s, &v) in scales.iter_mut().zip(&self.scales) {
            *s = i32::from(v);
        }
        Decoded {
            q,
            sub: 16,
            scales,
            mins: [0; 16],
            d: self.d.to_f32(),
            dmin: 0.0,
        }
    }
}

impl QuantBlock for BlockQ6K {
    const DTYPE: DType = DType::Q6K;
    const BLOCK: usize = QK_K;

    fn quantize_block(x: &[f32]) -> Self {
        let mut l = [0i8; QK_K];
        let mut scales = [0f32; 16];
        let (mut max_scale, mut max_abs_scale) = (0.0f32, 0.0f32);
        for j in 0..16 {
            let scale = make_qx_quants(32, &x[16 * j..16 * j + 16], &mut l[16 * j..16 * j + 16]);
            scales[j] = scale;
            if scale.abs() > max_abs_scale {
                max_abs_scale = scale.abs();
                max_scale = scale;
            }
        }
        let mut b = BlockQ6K::zeroed();
        if max_abs_scale < GROUP_MAX_EPS {
            return b;
        }
        let iscale = -128.0 / max_scale;
        b.d = f16_from(1.0 / iscale);
        for (s, &scale) in b.scales.iter_mut().zip(&scales) {
            *s = nearest_int(iscale * scale).min(127) as i8;
        }
        for j in 0..16 {
            let d = b.d.to_f32() * f32::from(b.scales[j]);
            if d == 0.0 {
                continue;
            }
            for i in 0..16 {
                l[16 * j + i] = (nearest_int(x[16 * j + i] / d).clamp(-32, 31) + 32) as i8;
            }
        }
        for half in 0..2 {
            let (j, ql, qh) = (128 * half, 64 * half, 32 * half);
            for i in 0..32 {
                let q = [l[j + i], l[j + i + 32], l[j + i + 64], l[j + i + 96]].map(|v| v as u8);
                b.ql[ql + i] = (q[0] & 15) | ((q[2] & 15) << 4);
                b.ql[ql + i + 32] = (q[1] & 15) | ((q[3] & 15) << 4);
                b.qh[qh + i] =
                    (q[0] >> 4) | ((q[1] >> 4) << 2) | ((q[2] >> 4) << 4) | ((q[3] >> 4) << 6);
            }
        }
        b
    }

    fn dequantize_block(&self, out: &mut [f32]) {
        self.decode().dequantize(out);
    }
}

impl QuantDot for BlockQ6K {
    type Act = BlockQ8K;

    fn dot_block(&self, a: &BlockQ8K) -> f32 {
        self.decode().dot(a)
    }
}

impl QuantBlock for BlockQ8K {
    const DTYPE: DType = DType::Q8K;
    const BLOCK: usize = QK_K;

    fn quantize_block(x: &[f32]) -> Self {
        let (mut max, mut amax) = (0.0f32, 0.0f32);
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        let mut b = BlockQ8K::zeroed();
        if amax == 0.0 {
            return b;
        }
        let iscale = -127.0 / max;
        for (q, &v) in b.qs.iter_mut().zip(x) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (s, chunk) in b.bsums.iter_mut().zip(b.qs.chunks_exact(16)) {
            *s = chunk.iter().map(|&q| i16::from(q)).sum();
        }
        b.d = 1.0 / iscale;
        b
    }

    fn dequantize_block(&self, out: &mut [f32]) {
        for (o, &q) in out.iter_mut().zip(&self.qs) {
            *o = f32::from(q) * self.d;
        }
    }
}
