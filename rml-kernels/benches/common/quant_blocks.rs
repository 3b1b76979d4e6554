//! Random quantized weight blocks and quantized activations for the quantized-kernel benchmarks (the `quant`
//! bench and the `gemv_pair` example): random bytes with small finite f16 scales, as
//! the kernels' speed does not depend on the values.

use rml_kernels::quant as kq;
use rml_kernels::rml_core::DType;

/// Xorshift generator for the random weights.
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Byte offsets of the f16 scale fields in each block type.
fn f16_fields(t: DType) -> &'static [usize] {
    match t {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 => &[0],
        DType::Q4_1 | DType::Q5_1 => &[0, 2],
        DType::Q2K => &[80, 82],
        DType::Q3K => &[108],
        DType::Q4K | DType::Q5K => &[0, 2],
        DType::Q6K => &[208],
        _ => &[],
    }
}

/// `elements` random weights of type `t` as blocks whose f16 scales are small and finite.
pub fn random_blocks(t: DType, elements: usize, rng: &mut Rng) -> Vec<u8> {
    let mut b: Vec<u8> = (0..t.storage_bytes(elements).unwrap())
        .map(|_| rng.next() as u8)
        .collect();
    for block in b.chunks_exact_mut(t.type_size()) {
        for &off in f16_fields(t) {
            let v = half::f16::from_f32(0.001 + (rng.next() % 1000) as f32 * 1e-5);
            block[off..off + 2].copy_from_slice(&v.to_le_bytes());
        }
    }
    b
}

/// `k` random activations in `[-1, 1]`, quantized to the activation format `t` dots with.
pub fn activations(t: DType, k: usize, rng: &mut Rng) -> Vec<u8> {
    let act = kq::vec_dot_type(t).unwrap();
    let x: Vec<f32> = (0..k)
        .map(|_| (rng.next() % 2001) as f32 / 1000.0 - 1.0)
        .collect();
    let mut a = vec![0u8; act.storage_bytes(k).unwrap()];
    kq::quantize_act(act, &x, &mut a).unwrap();
    a
}

/// Copies of `one` (each with a different first byte) until they hold more than `total`
/// bytes, to cycle through so the weights stream from DRAM rather than the L3.
pub fn copies_beyond(one: &[u8], total: usize) -> Vec<Vec<u8>> {
    (0..total / one.len() + 1)
        .map(|i| {
            let mut m = one.to_vec();
            m[0] ^= i as u8;
            m
        })
        .collect()
}
