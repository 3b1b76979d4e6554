//! NEON quantized kernels (aarch64, where NEON is baseline).
//!
//! SIMD dots for all ten weight types (Q4_0, Q5_0, Q8_0 × Q8_0; Q4_1, Q5_1 × Q8_1;
//! K-quants × Q8_K) and the Q8_0 activation quantizer. Products use `vmull_s8` /
//! `vmlal_s8` and pairwise widening adds, which every aarch64 core has (no `dotprod`).
//! Entry points are safe and check lengths; the block kernels read through raw
//! pointers with unaligned loads.

use core::arch::aarch64::*;

use rml_core::DType;
use rml_core::quant::kquants::{scale_min_k4, scale_q3k};

use super::block_bytes;

type RowKernel = unsafe fn(*const u8, *const u8, usize) -> f32;

/// `out[i]` = row `i` of `w` · `a`; false when the type has no NEON kernel or the
/// lengths are inconsistent (the caller then runs the scalar path).
pub(super) fn rows_dot(weight: DType, w: &[u8], a: &[u8], out: &mut [f32]) -> bool {
    let (kernel, act): (RowKernel, DType) = match weight {
        DType::Q4_0 => (dot_q4_0, DType::Q8_0),
        DType::Q4_1 => (dot_q4_1, DType::Q8_1),
        DType::Q5_0 => (dot_q5_0, DType::Q8_0),
        DType::Q5_1 => (dot_q5_1, DType::Q8_1),
        DType::Q8_0 => (dot_q8_0, DType::Q8_0),
        DType::Q2K => (dot_q2_k, DType::Q8K),
        DType::Q3K => (dot_q3_k, DType::Q8K),
        DType::Q4K => (dot_q4_k, DType::Q8K),
        DType::Q5K => (dot_q5_k, DType::Q8K),
        DType::Q6K => (dot_q6_k, DType::Q8K),
        _ => return false,
    };
    if out.is_empty() {
        return true;
    }
    let (bw, ba) = (block_bytes(weight), block_bytes(act));
    let nb = a.len() / ba;
    let rb = nb * bw;
    if a.len() != nb * ba || w.len() != out.len() * rb {
        return false;
    }
    for (i, o) in out.iter_mut().enumerate() {
        // SAFETY: row i is the `nb` blocks of `bw` bytes at `w[i*rb..]`, and `a` holds
        // `nb` blocks of `ba` bytes; NEON is baseline on aarch64.
        *o = unsafe { kernel(w.as_ptr().add(i * rb), a.as_ptr(), nb) };
    }
    true
}

/// Reads the little-endian f16 at `p` as f32.
#[inline]
unsafe fn f16_at(p: *const u8) -> f32 {
    // SAFETY: the caller guarantees 2 readable bytes at `p`.
    let bits = unsafe { p.cast::<u16>().read_unaligned() };
    half::f16::from_bits(u16::from_le(bits)).to_f32()
}

/// Reads the little-endian f32 at `p`.
#[inline]
unsafe fn f32_at(p: *const u8) -> f32 {
    // SAFETY: the caller guarantees 4 readable bytes at `p`.
    unsafe { p.cast::<f32>().read_unaligned() }
}

/// Σ x·y over 16 i8 lanes, widened to i16 (no overflow for |x| ≤ 64 or |x·y| ≤ 2¹⁴).
#[inline]
#[target_feature(enable = "neon")]
fn mul16(x: int8x16_t, y: int8x16_t) -> int16x8_t {
    vmlal_s8(
        vmull_s8(vget_low_s8(x), vget_low_s8(y)),
        vget_high_s8(x),
        vget_high_s8(y),
    )
}

/// Q4_0 · Q8_0 over `nb` blocks.
#[target_feature(enable = "neon")]
unsafe fn dot_q4_0(w: *const u8, a: *const u8, nb: usize) -> f32 {
    let mut acc = vdupq_n_f32(0.0);
    let (m4, eight) = (vdupq_n_u8(0x0f), vdupq_n_s8(8));
    // SAFETY: `nb` blocks of 18 bytes at `w` and of 34 at `a`.
    unsafe {
        for i in 0..nb {
            let (wb, ab) = (w.add(18 * i), a.add(34 * i));
            let q = vld1q_u8(wb.add(2));
            let lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), eight);
            let hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8::<4>(q)), eight);
            let y0 = vld1q_s8(ab.add(2).cast());
            let y1 = vld1q_s8(ab.add(18).cast());
            let p = vaddq_s16(mul16(lo, y0), mul16(hi, y1));
            let s = vcvtq_f32_s32(vpaddlq_s16(p));
            acc = vmlaq_n_f32(acc, s, f16_at(wb) * f16_at(ab));
        }
    }
    vaddvq_f32(acc)
}

/// Σ x·y over the 32 lanes of `lo`, `hi` against the 32 i8 at `y`, as i32 lanes
/// (|x| ≤ 31: the i16 partial sums stay below 2¹⁵).
#[inline]
#[target_feature(enable = "neon")]
unsafe fn dot32(lo: int8x16_t, hi: int8x16_t, y: *const u8) -> int32x4_t {
    // SAFETY: the caller guarantees 32 readable bytes at `y`.
    let (y0, y1) = unsafe { (vld1q_s8(y.cast()), vld1q_s8(y.add(16).cast())) };
    vpaddlq_s16(vaddq_s16(mul16(lo, y0), mul16(hi, y1)))
}

/// The 32 bits at `p` (little-endian) as 32 bytes, 0x10 where the bit is set: the 5th
/// quant bit of Q5_0/Q5_1 for the low-nibble (first) and high-nibble (second) halves.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn fifth_bits(p: *const u8) -> (uint8x16_t, uint8x16_t) {
    const BIT: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];
    // SAFETY: the caller guarantees 4 readable bytes at `p`; BIT holds 16.
    let (b, sel) = unsafe {
        (
            [*p, *p.add(1), *p.add(2), *p.add(3)],
            vld1q_u8(BIT.as_ptr()),
        )
    };
    let x10 = vdupq_n_u8(0x10);
    let spread = |b0: u8, b1: u8| {
        let v = vcombine_u8(vdup_n_u8(b0), vdup_n_u8(b1));
        vandq_u8(vtstq_u8(v, sel), x10)
    };
    (spread(b[0], b[1]), spread(b[2], b[3]))
}

/// Q4_1 · Q8_1 over `nb` blocks.
#[target_feature(enable = "neon")]
unsafe fn dot_q4_1(w: *const u8, a: *const u8, nb: usize) -> f32 {
    let (mut acc, mut summ) = (vdupq_n_f32(0.0), 0.0f32);
    let m4 = vdupq_n_u8(0x0f);
    // SAFETY: `nb` blocks of 20 bytes at `w` and of 36 at `a`.
    unsafe {
        for i in 0..nb {
            let (wb, ab) = (w.add(20 * i), a.add(36 * i));
            let q = vld1q_u8(wb.add(4));
            let lo = vreinterpretq_s8_u8(vandq_u8(q, m4));
            let hi = vreinterpretq_s8_u8(vshrq_n_u8::<4>(q));
            let s = vcvtq_f32_s32(dot32(lo, hi, ab.add(4)));
            acc = vmlaq_n_f32(acc, s, f16_at(wb) * f16_at(ab));
            summ += f16_at(wb.add(2)) * f16_at(ab.add(2));
        }
    }
    vaddvq_f32(acc) + summ
}

/// Q5_0 · Q8_0 over `nb` blocks.
#[target_feature(enable = "neon")]
unsafe fn dot_q5_0(w: *const u8, a: *const u8, nb: usize) -> f32 {
    let mut acc = vdupq_n_f32(0.0);
    let (m4, x10) = (vdupq_n_u8(0x0f), vdupq_n_u8(0x10));
    // SAFETY: `nb` blocks of 22 bytes at `w` and of 34 at `a`.
    unsafe {
        for i in 0..nb {
            let (wb, ab) = (w.add(22 * i), a.add(34 * i));
            let (h0, h1) = fifth_bits(wb.add(2));
            let q = vld1q_u8(wb.add(6));
            // (nibble | 5th bit) − 16, in i8.
            let lo = vreinterpretq_s8_u8(vsubq_u8(vorrq_u8(vandq_u8(q, m4), h0), x10));
            let hi = vreinterpretq_s8_u8(vsubq_u8(vorrq_u8(vshrq_n_u8::<4>(q), h1), x10));
            let s = vcvtq_f32_s32(dot32(lo, hi, ab.add(2)));
            acc = vmlaq_n_f32(acc, s, f16_at(wb) * f16_at(ab));
        }
    }
    vaddvq_f32(acc)
}

/// Q5_1 · Q8_1 over `nb` blocks.
#[target_feature(enable = "neon")]
unsafe fn dot_q5_1(w: *const u8, a: *const u8, nb: usize) -> f32 {
    let (mut acc, mut summ) = (vdupq_n_f32(0.0), 0.0f32);
    let m4 = vdupq_n_u8(0x0f);
    // SAFETY: `nb` blocks of 24 bytes at `w` and of 36 at `a`.
    unsafe {
        for i in 0..nb {
            let (wb, ab) = (w.add(24 * i), a.add(36 * i));
            let (h0, h1) = fifth_bits(wb.add(4));
            let q = vld1q_u8(wb.add(8));
            let lo = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, m4), h0));
            let hi = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8::<4>(q), h1));
            let s = vcvtq_f32_s32(dot32(lo, hi, ab.add(4)));
            acc = vmlaq_n_f32(acc, s, f16_at(wb) * f16_at(ab));
            summ += f16_at(wb.add(2)) * f16_at(ab.add(2));
        }
    }
    vaddvq_f32(acc) + summ
}

/// Q8_0 · Q8_0 over `nb` blocks.
#[target_feature(enable = "neon")]
unsafe fn dot_q8_0(w: *const u8, a: *const u8, nb: usize) -> f32 {
    let mut acc = vdupq_n_f32(0.0);
    // SAFETY: `nb` blocks of 34 bytes at `w` and `a`.
    unsafe {
        for i in 0..nb {
            let (wb, ab) = (w.add(34 * i), a.add(34 * i));
            let mut s = vdupq_n_s32(0);
            for h in 0..2 {
                let x = vld1q_s8(wb.add(2 + 16 * h).cast());
                let y = vld1q_s8(ab.add(2 + 16 * h).cast());
                s = vpadalq_s16(s, vmull_s8(vget_low_s8(x), vget_low_s8(y)));
                s = vpadalq_s16(s, vmull_s8(vget_high_s8(x), vget_high_s8(y)));
            }
            acc = vmlaq_n_f32(acc, vcvtq_f32_s32(s), f16_at(wb) * f16_at(ab));
        }
    }
    vaddvq_f32(acc)
}

/// Σ of 16-bit bsums pairs times the mins of a Q4_K block.
unsafe fn k_mins(bsums: *const u8, mins: &[i32; 8]) -> i32 {
    let mut s = 0;
    for (j, m) in mins.iter().enumerate() {
        // SAFETY: the caller guarantees the 32 bytes of bsums at `bsums`.
        let (b0, b1) = unsafe {
            (
                bsums.add(4 * j).cast::<i16>().read_unaligned(),
                bsums.add(4 * j + 2).cast::<i16>().read_unaligned(),
            )
        };
        s += m * (i32::from(b0) + i32::from(b1));
    }
    s
}

/// Q4_K · Q8_K over `nb` super-blocks.
#[target_feature(enable = "neon")]
unsafe fn dot_q4_k(w: *const u8, a: *const u8, nb: usize) -> f32 {
    let mut sum = 0.0f32;
    let m4 = vdupq_n_u8(0x0f);
    // SAFETY: `nb` blocks of 144 bytes at `w` and of 292 at `a`.
    unsafe {
        for i in 0..nb {
            let (wb, ab) = (w.add(144 * i), a.add(292 * i));
            let mut packed = [0u8; 12];
            core::ptr::copy_nonoverlapping(wb.add(4), packed.as_mut_ptr(), 12);
            let (mut sc, mut mn) = ([0i32; 8], [0i32; 8]);
            for j in 0..8 {
                let (s, m) = scale_min_k4(j, &packed);
                sc[j] = i32::from(s);
                mn[j] = i32::from(m);
            }
            let msum = k_mins(ab.add(260), &mn);
            let mut isum = 0i32;
            for c in 0..4 {
                let q0 = vld1q_u8(wb.add(16 + 32 * c));
                let q1 = vld1q_u8(wb.add(32 + 32 * c));
                let y = ab.add(4 + 64 * c);
                let lo0 = vreinterpretq_s8_u8(vandq_u8(q0, m4));
                let lo1 = vreinterpretq_s8_u8(vandq_u8(q1, m4));
                let hi0 = vreinterpretq_s8_u8(vshrq_n_u8::<4>(q0));
                let hi1 = vreinterpretq_s8_u8(vshrq_n_u8::<4>(q1));
                let plo = vaddq_s16(
                    mul16(lo0, vld1q_s8(y.cast())),
                    mul16(lo1, vld1q_s8(y.add(16).cast())),
                );
                let phi = vaddq_s16(
                    mul16(hi0, vld1q_s8(y.add(32).cast())),
                    mul16(hi1, vld1q_s8(y.add(48).cast())),
                );
                isum += sc[2 * c] * vaddlvq_s16(plo) + sc[2 * c + 1] * vaddlvq_s16(phi);
            }
            let yd = f32_at(ab);
            sum += yd * f16_at(wb) * isum as f32 - yd * f16_at(wb.add(2)) * msum as f32;
        }
    }
    sum
}

/// Q6_K · Q8_K over `nb` super-blocks.
#[target_feature(enable = "neon")]
unsafe fn dot_q6_k(w: *const u8, a: *const u8, nb: usize) -> f32 {
    let mut sum = 0.0f32;
    let (m4, m3, m32) = (vdupq_n_u8(0x0f), vdupq_n_u8(3), vdupq_n_s8(32));
    // SAFETY: `nb` blocks of 210 bytes at `w` and of 292 at `a`.
    unsafe {
        for i in 0..nb {
            let (wb, ab) = (w.add(210 * i), a.add(292 * i));
            let mut isum = 0i32;
            for n in 0..2 {
                for l in [0usize, 16] {
                    let ql0 = vld1q_u8(wb.add(64 * n + l));
                    let ql1 = vld1q_u8(wb.add(64 * n + 32 + l));
                    let qh = vld1q_u8(wb.add(128 + 32 * n + l));
                    let q = [
                        vorrq_u8(vandq_u8(ql0, m4), vshlq_n_u8::<4>(vandq_u8(qh, m3))),
                        vorrq_u8(
                            vandq_u8(ql1, m4),
                            vshlq_n_u8::<4>(vandq_u8(vshrq_n_u8::<2>(qh), m3)),
                        ),
                        vorrq_u8(
                            vshrq_n_u8::<4>(ql0),
                            vshlq_n_u8::<4>(vandq_u8(vshrq_n_u8::<4>(qh), m3)),
                        ),
                        vorrq_u8(vshrq_n_u8::<4>(ql1), vshlq_n_u8::<4>(vshrq_n_u8::<6>(qh))),
                    ];
                    for (k, qk) in q.into_iter().enumerate() {
                        let qs = vsubq_s8(vreinterpretq_s8_u8(qk), m32);
                        let y = vld1q_s8(ab.add(4 + 128 * n + 32 * k + l).cast());
                        let sc = i32::from(*wb.add(192 + 8 * n + 2 * k + l / 16) as i8);
                        isum += sc * vaddlvq_s16(mul16(qs, y));
                    }
                }
            }
            sum += f32_at(ab) * f16_at(wb.add(208)) * isum as f32;
        }
    }
    sum
}

/// A K-quant super-block unpacked to 256 quants in 16 vectors of 16 (element order),
/// with one scale and one min per 16 elements (|q| ≤ 63).
struct KBlock {
    q: [int8x16_t; 16],
    sc: [i32; 16],
    mn: [i32; 16],
}

/// `yd · (d·Σ_j sc_j·Σ q·y − dmin·Σ_j mn_j·bsum_j)` for the Q8_K block at `ab`.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn k_dot(b: &KBlock, ab: *const u8, d: f32, dmin: f32) -> f32 {
    let (mut isum, mut msum) = (0i32, 0i32);
    // SAFETY: the caller guarantees the 292-byte Q8_K block at `ab`.
    unsafe {
        for j in 0..16 {
            let y = vld1q_s8(ab.add(4 + 16 * j).cast());
            isum += b.sc[j] * vaddlvq_s16(mul16(b.q[j], y));
            let bsum = ab.add(260 + 2 * j).cast::<i16>().read_unaligned();
            msum += b.mn[j] * i32::from(i16::from_le(bsum));
        }
        let yd = f32_at(ab);
        yd * d * isum as f32 - yd * dmin * msum as f32
    }
}

/// The four 2-bit planes of the 32 bytes at `p` (plane k = bits 2k..2k+2), as 8
/// vectors: plane 0 bytes 0..16, plane 0 bytes 16..32, plane 1 …
#[inline]
#[target_feature(enable = "neon")]
unsafe fn planes2(p: *const u8) -> [uint8x16_t; 8] {
    let m3 = vdupq_n_u8(3);
    // SAFETY: the caller guarantees 32 readable bytes at `p`.
    let (a, b) = unsafe { (vld1q_u8(p), vld1q_u8(p.add(16))) };
    [
        vandq_u8(a, m3),
        vandq_u8(b, m3),
        vandq_u8(vshrq_n_u8::<2>(a), m3),
        vandq_u8(vshrq_n_u8::<2>(b), m3),
        vandq_u8(vshrq_n_u8::<4>(a), m3),
        vandq_u8(vshrq_n_u8::<4>(b), m3),
        vshrq_n_u8::<6>(a),
        vshrq_n_u8::<6>(b),
    ]
}

/// Q2_K · Q8_K over `nb` super-blocks.
#[target_feature(enable = "neon")]
unsafe fn dot_q2_k(w: *const u8, a: *const u8, nb: usize) -> f32 {
    let mut sum = 0.0f32;
    // SAFETY: `nb` blocks of 84 bytes at `w` and of 292 at `a`.
    unsafe {
        for i in 0..nb {
            let (wb, ab) = (w.add(84 * i), a.add(292 * i));
            let mut b = KBlock {
                q: [vdupq_n_s8(0); 16],
                sc: core::array::from_fn(|j| i32::from(*wb.add(j) & 15)),
                mn: core::array::from_fn(|j| i32::from(*wb.add(j) >> 4)),
            };
            for half in 0..2 {
                for (k, p) in planes2(wb.add(16 + 32 * half)).into_iter().enumerate() {
                    b.q[8 * half + k] = vreinterpretq_s8_u8(p);
                }
            }
            sum += k_dot(&b, ab, f16_at(wb.add(80)), f16_at(wb.add(82)));
        }
    }
    sum
}

/// Q3_K · Q8_K over `nb` super-blocks.
#[target_feature(enable = "neon")]
unsafe fn dot_q3_k(w: *const u8, a: *const u8, nb: usize) -> f32 {
    let mut sum = 0.0f32;
    let four = vdupq_n_u8(4);
    // SAFETY: `nb` blocks of 110 bytes at `w` and of 292 at `a`.
    unsafe {
        for i in 0..nb {
            let (wb, ab) = (w.add(110 * i), a.add(292 * i));
            let mut packed = [0u8; 12];
            core::ptr::copy_nonoverlapping(wb.add(96), packed.as_mut_ptr(), 12);
            let mut b = KBlock {
                q: [vdupq_n_s8(0); 16],
                sc: core::array::from_fn(|j| i32::from(scale_q3k(j, &packed))),
                mn: [0; 16],
            };
            let hm = [vld1q_u8(wb), vld1q_u8(wb.add(16))];
            for half in 0..2 {
                for (k, p) in planes2(wb.add(32 + 32 * half)).into_iter().enumerate() {
                    // Minus 4 where high bit (4·half + plane) of hmask is clear.
                    let bit = vdupq_n_u8(1 << (4 * half + k / 2));
                    let sub = vbicq_u8(four, vtstq_u8(hm[k % 2], bit));
                    b.q[8 * half + k] = vreinterpretq_s8_u8(vsubq_u8(p, sub));
                }
            }
            sum += k_dot(&b, ab, f16_at(wb.add(108)), 0.0);
        }
    }
    sum
}

/// Q5_K · Q8_K over `nb` super-blocks.
#[target_feature(enable = "neon")]
unsafe fn dot_q5_k(w: *const u8, a: *const u8, nb: usize) -> f32 {
    let mut sum = 0.0f32;
    let (m4, one, two) = (vdupq_n_u8(0x0f), vdupq_n_u8(1), vdupq_n_u8(2));
    // SAFETY: `nb` blocks of 176 bytes at `w` and of 292 at `a`.
    unsafe {
        for i in 0..nb {
            let (wb, ab) = (w.add(176 * i), a.add(292 * i));
            let mut packed = [0u8; 12];
            core::ptr::copy_nonoverlapping(wb.add(4), packed.as_mut_ptr(), 12);
            let sm: [(u8, u8); 8] = core::array::from_fn(|j| scale_min_k4(j, &packed));
            let mut b = KBlock {
                q: [vdupq_n_s8(0); 16],
                sc: core::array::from_fn(|j| i32::from(sm[j / 2].0)),
                mn: core::array::from_fn(|j| i32::from(sm[j / 2].1)),
            };
            let qh = [vld1q_u8(wb.add(16)), vld1q_u8(wb.add(32))];
            for c in 0..4 {
                for (h, &qhh) in qh.iter().enumerate() {
                    let ql = vld1q_u8(wb.add(48 + 32 * c + 16 * h));
                    // Bits 2c and 2c + 1 of qh, moved to bit 4.
                    let hb = vshlq_u8(qhh, vdupq_n_s8(-2 * c as i8));
                    let h0 = vshlq_n_u8::<4>(vandq_u8(hb, one));
                    let h1 = vshlq_n_u8::<3>(vandq_u8(hb, two));
                    let lo = vorrq_u8(vandq_u8(ql, m4), h0);
                    let hi = vorrq_u8(vshrq_n_u8::<4>(ql), h1);
                    b.q[4 * c + h] = vreinterpretq_s8_u8(lo);
                    b.q[4 * c + 2 + h] = vreinterpretq_s8_u8(hi);
                }
            }
            sum += k_dot(&b, ab, f16_at(wb), f16_at(wb.add(2)));
        }
    }
    sum
}

/// Q8_0 activation quantizer, bit-exact with the reference (`vcvtaq` rounds half away
/// from zero like C `roundf`). Lengths were checked by the caller.
pub(super) fn quantize_q8_0(x: &[f32], dst: &mut [u8]) -> rml_core::Result<()> {
    if !x.len().is_multiple_of(32) || x.len() / 32 * 34 != dst.len() {
        return super::scalar::quantize_act(DType::Q8_0, x, dst);
    }
    for (xs, d) in x.chunks_exact(32).zip(dst.chunks_exact_mut(34)) {
        // SAFETY: `xs` holds 32 floats and `d` 34 bytes.
        unsafe {
            let v: [float32x4_t; 8] = core::array::from_fn(|k| vld1q_f32(xs.as_ptr().add(4 * k)));
            let m = v
                .iter()
                .fold(vdupq_n_f32(0.0), |m, &v| vmaxq_f32(m, vabsq_f32(v)));
            let s = vmaxvq_f32(m) / 127.0;
            let id = if s != 0.0 { 1.0 / s } else { 0.0 };
            let q: [int32x4_t; 8] = v.map(|v| vcvtaq_s32_f32(vmulq_n_f32(v, id)));
            for h in 0..4 {
                let w16 = vcombine_s16(vmovn_s32(q[2 * h]), vmovn_s32(q[2 * h + 1]));
                vst1_s8(d.as_mut_ptr().add(2 + 8 * h).cast(), vmovn_s16(w16));
            }
            d[..2].copy_from_slice(&half::f16::from_f32(s).to_bits().to_le_bytes());
        }
    }
    Ok(())
}
