//! NEON quantized kernels (aarch64, where NEON is baseline).
//!
//! SIMD dots for Q4_0, Q8_0 (× Q8_0), Q4_K and Q6_K (× Q8_K), and the Q8_0 activation
//! quantizer; the other types run the scalar path. Entry points are safe and check
//! lengths; the block kernels read through raw pointers with unaligned loads.

use core::arch::aarch64::*;

use rml_core::DType;
use rml_core::quant::kquants::scale_min_k4;

use super::block_bytes;

type RowKernel = unsafe fn(*const u8, *const u8, usize) -> f32;

/// `out[i]` = row `i` of `w` · `a`; false when the type has no NEON kernel or the
/// lengths are inconsistent (the caller then runs the scalar path).
pub(super) fn rows_dot(weight: DType, w: &[u8], a: &[u8], out: &mut [f32]) -> bool {
    let (kernel, act): (RowKernel, DType) = match weight {
        DType::Q4_0 => (dot_q4_0, DType::Q8_0),
        DType::Q8_0 => (dot_q8_0, DType::Q8_0),
        DType::Q4K => (dot_q4_k, DType::Q8K),
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
