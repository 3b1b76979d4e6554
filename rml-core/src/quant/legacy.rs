//! The 32-element ("legacy") GGML block types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1.
//!
//! Nibble order in all 4- and 5-bit types: byte `qs[j]`'s low nibble is element `j`,
//! its high nibble element `j + 16`. The 5th bit of element `i` of Q5_0/Q5_1 is bit
//! `i` of `qh` read as a little-endian u32.
//!
//! Quantizers follow ggml's `quantize_row_q*_ref`: scales are computed in f32 and used
//! in f32 for the quants; only the stored scale is rounded to f16.

// Index loops mirror the packed layouts (element j ↔ byte j % 32, bit j / 32, …).
#![allow(clippy::needless_range_loop)]

use half::f16;

use super::{QuantBlock, QuantDot, f16_from, round_away};
use crate::dtype::DType;

/// Elements per legacy block.
pub const QK: usize = 32;

/// Q4_0: `x = (q − 8)·d`, q a 4-bit nibble.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ4_0 {
    /// Scale.
    pub d: f16,
    /// 32 nibbles: low nibble of byte j is element j, high nibble element j + 16.
    pub qs: [u8; 16],
}

/// Q4_1: `x = q·d + m`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ4_1 {
    /// Scale.
    pub d: f16,
    /// Minimum (added).
    pub m: f16,
    /// 32 nibbles, as in [`BlockQ4_0`].
    pub qs: [u8; 16],
}

/// Q5_0: `x = (q − 16)·d`, q = nibble | (high bit << 4).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ5_0 {
    /// Scale.
    pub d: f16,
    /// High bits: bit i of this little-endian u32 is element i's 5th bit.
    pub qh: [u8; 4],
    /// Low nibbles, as in [`BlockQ4_0`].
    pub qs: [u8; 16],
}

/// Q5_1: `x = q·d + m`, q = nibble | (high bit << 4).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ5_1 {
    /// Scale.
    pub d: f16,
    /// Minimum (added).
    pub m: f16,
    /// High bits, as in [`BlockQ5_0`].
    pub qh: [u8; 4],
    /// Low nibbles, as in [`BlockQ4_0`].
    pub qs: [u8; 16],
}

/// Q8_0: `x = q·d`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ8_0 {
    /// Scale: max |x| / 127.
    pub d: f16,
    /// Quants.
    pub qs: [i8; 32],
}

/// Q8_1 (activations for Q4_1/Q5_1): `x = q·d`, plus `s = d·Σq`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct BlockQ8_1 {
    /// Scale: max |x| / 127.
    pub d: f16,
    /// `d · Σ qs` (rounded to f16), so a dot product adds the min term in one multiply.
    pub s: f16,
    /// Quants.
    pub qs: [i8; 32],
}

const _: () = assert!(core::mem::size_of::<BlockQ4_0>() == 18);
const _: () = assert!(core::mem::size_of::<BlockQ4_1>() == 20);
const _: () = assert!(core::mem::size_of::<BlockQ5_0>() == 22);
const _: () = assert!(core::mem::size_of::<BlockQ5_1>() == 24);
const _: () = assert!(core::mem::size_of::<BlockQ8_0>() == 34);
const _: () = assert!(core::mem::size_of::<BlockQ8_1>() == 36);

/// The value with the largest magnitude (the first one on ties) and that magnitude.
fn signed_absmax(x: &[f32]) -> (f32, f32) {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    (max, amax)
}

/// Smallest and largest value.
fn min_max(x: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

fn inverse(d: f32) -> f32 {
    if d != 0.0 { 1.0 / d } else { 0.0 }
}

/// Packs 32 values 0..=31 into 16 low-nibble bytes and a 32-bit high-bit mask.
fn pack_q5(q: &[u8; 32]) -> ([u8; 16], [u8; 4]) {
    let mut qs = [0u8; 16];
    let mut qh = 0u32;
    for j in 0..16 {
        qs[j] = (q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4);
        qh |= u32::from(q[j] >> 4) << j;
        qh |= u32::from(q[j + 16] >> 4) << (j + 16);
    }
    (qs, qh.to_le_bytes())
}

/// Unpacks 16 nibble bytes (+ optional high bits) into 32 unsigned quants.
fn unpack(qs: &[u8; 16], qh: u32) -> [u8; 32] {
    let mut q = [0u8; 32];
    for j in 0..16 {
        q[j] = (qs[j] & 0x0f) | ((((qh >> j) & 1) as u8) << 4);
        q[j + 16] = (qs[j] >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
    }
    q
}

impl QuantBlock for BlockQ4_0 {
    const DTYPE: DType = DType::Q4_0;
    const BLOCK: usize = QK;

    fn quantize_block(x: &[f32]) -> Self {
        let (max, _) = signed_absmax(x);
        let d = max / -8.0;
        let id = inverse(d);
        let mut qs = [0u8; 16];
        for j in 0..16 {
            let q0 = ((x[j] * id + 8.5) as i32).clamp(0, 15) as u8;
            let q1 = ((x[j + 16] * id + 8.5) as i32).clamp(0, 15) as u8;
            qs[j] = q0 | (q1 << 4);
        }
        BlockQ4_0 { d: f16_from(d), qs }
    }

    fn dequantize_block(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (o, q) in out.iter_mut().zip(unpack(&self.qs, 0)) {
            *o = (i32::from(q) - 8) as f32 * d;
        }
    }
}

impl QuantBlock for BlockQ4_1 {
    const DTYPE: DType = DType::Q4_1;
    const BLOCK: usize = QK;

    fn quantize_block(x: &[f32]) -> Self {
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = inverse(d);
        let mut qs = [0u8; 16];
        for j in 0..16 {
            let q0 = (((x[j] - min) * id + 0.5) as i32).clamp(0, 15) as u8;
            let q1 = (((x[j + 16] - min) * id + 0.5) as i32).clamp(0, 15) as u8;
            qs[j] = q0 | (q1 << 4);
        }
        BlockQ4_1 {
            d: f16_from(d),
            m: f16_from(min),
            qs,
        }
    }

    fn dequantize_block(&self, out: &mut [f32]) {
        let (d, m) = (self.d.to_f32(), self.m.to_f32());
        for (o, q) in out.iter_mut().zip(unpack(&self.qs, 0)) {
            *o = f32::from(q) * d + m;
        }
    }
}

impl QuantBlock for BlockQ5_0 {
    const DTYPE: DType = DType::Q5_0;
    const BLOCK: usize = QK;

    fn quantize_block(x: &[f32]) -> Self {
        let (max, _) = signed_absmax(x);
        let d = max / -16.0;
        let id = inverse(d);
        let mut q = [0u8; 32];
        for (q, &v) in q.iter_mut().zip(x) {
            *q = ((v * id + 16.5) as i32).clamp(0, 31) as u8;
        }
        let (qs, qh) = pack_q5(&q);
        BlockQ5_0 {
            d: f16_from(d),
            qh,
            qs,
        }
    }

    fn dequantize_block(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (o, q) in out
            .iter_mut()
            .zip(unpack(&self.qs, u32::from_le_bytes(self.qh)))
        {
            *o = (i32::from(q) - 16) as f32 * d;
        }
    }
}

impl QuantBlock for BlockQ5_1 {
    const DTYPE: DType = DType::Q5_1;
    const BLOCK: usize = QK;

    fn quantize_block(x: &[f32]) -> Self {
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = inverse(d);
        let mut q = [0u8; 32];
        for (q, &v) in q.iter_mut().zip(x) {
            *q = (((v - min) * id + 0.5) as i32).clamp(0, 31) as u8;
        }
        let (qs, qh) = pack_q5(&q);
        BlockQ5_1 {
            d: f16_from(d),
            m: f16_from(min),
            qh,
            qs,
        }
    }

    fn dequantize_block(&self, out: &mut [f32]) {
        let (d, m) = (self.d.to_f32(), self.m.to_f32());
        for (o, q) in out
            .iter_mut()
            .zip(unpack(&self.qs, u32::from_le_bytes(self.qh)))
        {
            *o = f32::from(q) * d + m;
        }
    }
}

/// Shared Q8_0/Q8_1 quantization: `d = amax/127`, `q = roundf(x/d)`.
fn quantize_q8(x: &[f32]) -> (f32, [i8; 32]) {
    let (_, amax) = signed_absmax(x);
    let d = amax / 127.0;
    let id = inverse(d);
    let mut qs = [0i8; 32];
    for (q, &v) in qs.iter_mut().zip(x) {
        *q = round_away(v * id) as i8;
    }
    (d, qs)
}

impl QuantBlock for BlockQ8_0 {
    const DTYPE: DType = DType::Q8_0;
    const BLOCK: usize = QK;

    fn quantize_block(x: &[f32]) -> Self {
        let (d, qs) = quantize_q8(x);
        BlockQ8_0 { d: f16_from(d), qs }
    }

    fn dequantize_block(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (o, &q) in out.iter_mut().zip(&self.qs) {
            *o = f32::from(q) * d;
        }
    }
}

impl QuantBlock for BlockQ8_1 {
    const DTYPE: DType = DType::Q8_1;
    const BLOCK: usize = QK;

    fn quantize_block(x: &[f32]) -> Self {
        let (d, qs) = quantize_q8(x);
        let sum: i32 = qs.iter().map(|&q| i32::from(q)).sum();
        BlockQ8_1 {
            d: f16_from(d),
            s: f16_from(sum as f32 * d),
            qs,
        }
    }

    fn dequantize_block(&self, out: &mut [f32]) {
        let d = self.d.to_f32();
        for (o, &q) in out.iter_mut().zip(&self.qs) {
            *o = f32::from(q) * d;
        }
    }
}

/// Σ (q − offset)·a over one 32-element block.
fn isum(q: &[u8; 32], offset: i32, a: &[i8; 32]) -> i32 {
    q.iter()
        .zip(a)
        .map(|(&q, &a)| (i32::from(q) - offset) * i32::from(a))
        .sum()
}

impl QuantDot for BlockQ4_0 {
    type Act = BlockQ8_0;

    fn dot_block(&self, a: &BlockQ8_0) -> f32 {
        let sumi = isum(&unpack(&self.qs, 0), 8, &a.qs);
        sumi as f32 * self.d.to_f32() * a.d.to_f32()
    }
}

impl QuantDot for BlockQ4_1 {
    type Act = BlockQ8_1;

    fn dot_block(&self, a: &BlockQ8_1) -> f32 {
        let sumi = isum(&unpack(&self.qs, 0), 0, &a.qs);
        self.d.to_f32() * a.d.to_f32() * sumi as f32 + self.m.to_f32() * a.s.to_f32()
    }
}

impl QuantDot for BlockQ5_0 {
    type Act = BlockQ8_0;

    fn dot_block(&self, a: &BlockQ8_0) -> f32 {
        let q = unpack(&self.qs, u32::from_le_bytes(self.qh));
        isum(&q, 16, &a.qs) as f32 * self.d.to_f32() * a.d.to_f32()
    }
}

impl QuantDot for BlockQ5_1 {
    type Act = BlockQ8_1;

    fn dot_block(&self, a: &BlockQ8_1) -> f32 {
        let q = unpack(&self.qs, u32::from_le_bytes(self.qh));
        let sumi = isum(&q, 0, &a.qs);
        self.d.to_f32() * a.d.to_f32() * sumi as f32 + self.m.to_f32() * a.s.to_f32()
    }
}

impl QuantDot for BlockQ8_0 {
    type Act = BlockQ8_0;

    fn dot_block(&self, a: &BlockQ8_0) -> f32 {
        let sumi: i32 = self
            .qs
            .iter()
            .zip(&a.qs)
            .map(|(&w, &a)| i32::from(w) * i32::from(a))
            .sum();
        sumi as f32 * self.d.to_f32() * a.d.to_f32()
    }
}
