//! Reference quantization: defining formulas of the activation formats, round-trip
//! error bounds, reference dot products against f32 dots, and length errors.

use bytemuck::Zeroable;
use rml_core::quant::{
    BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1, BlockQ5K, BlockQ6K,
    BlockQ8_0, BlockQ8_1, BlockQ8K, QuantBlock, QuantDot, dequantize_bytes, dot_bytes,
    quantize_bytes, vec_dot_type,
};
use rml_core::{DType, Error};

/// xorshift64* with a Box–Muller normal: enough randomness for tests, no dependencies.
struct Rng(u64);

impl Rng {
    fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        ((self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40) as f32 + 0.5) / (1u64 << 24) as f32
    }
    fn normal(&mut self) -> f32 {
        let (u, v) = (self.next_f32(), self.next_f32());
        (-2.0 * u.ln()).sqrt() * (core::f32::consts::TAU * v).cos()
    }
    fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.normal() * scale).collect()
    }
}

fn roundtrip<B: QuantBlock>(x: &[f32]) -> Vec<f32> {
    let mut q = vec![B::zeroed(); x.len() / B::BLOCK];
    B::quantize(x, &mut q).unwrap();
    let mut y = vec![0f32; x.len()];
    B::dequantize(&q, &mut y).unwrap();
    y
}

fn rms(x: &[f32]) -> f32 {
    (x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32).sqrt()
}

fn rel_rmse<B: QuantBlock>(x: &[f32]) -> f32 {
    let y = roundtrip::<B>(x);
    let err: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a - b).collect();
    rms(&err) / rms(x)
}

#[test]
fn round_trip_error_shrinks_with_bits() {
    let x = Rng(7).vec(256 * 16, 1.0);
    // Relative RMS error bounds a bit above what each format achieves on Gaussians.
    let cases: [(&str, f32, f32); 12] = [
        ("q4_0", rel_rmse::<BlockQ4_0>(&x), 0.11),
        ("q4_1", rel_rmse::<BlockQ4_1>(&x), 0.10),
        ("q5_0", rel_rmse::<BlockQ5_0>(&x), 0.055),
        ("q5_1", rel_rmse::<BlockQ5_1>(&x), 0.05),
        ("q8_0", rel_rmse::<BlockQ8_0>(&x), 0.0065),
        ("q8_1", rel_rmse::<BlockQ8_1>(&x), 0.0065),
        ("q2_k", rel_rmse::<BlockQ2K>(&x), 0.38),
        ("q3_k", rel_rmse::<BlockQ3K>(&x), 0.19),
        ("q4_k", rel_rmse::<BlockQ4K>(&x), 0.09),
        ("q5_k", rel_rmse::<BlockQ5K>(&x), 0.046),
        ("q6_k", rel_rmse::<BlockQ6K>(&x), 0.022),
        ("q8_k", rel_rmse::<BlockQ8K>(&x), 0.009),
    ];
    for (name, err, bound) in cases {
        assert!(err < bound, "{name}: relative RMSE {err} >= {bound}");
    }
}

#[test]
fn q8_1_follows_its_defining_formula() {
    let mut rng = Rng(11);
    for scale in [0.0, 1e-3, 1.0, 300.0] {
        let x = rng.vec(32, scale);
        let b = BlockQ8_1::quantize_block(&x);
        let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        assert_eq!(b.d, half::f16::from_f32(d));
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut sum = 0i32;
        for (q, v) in b.qs.iter().zip(&x) {
            assert_eq!(*q as f32, (v * id).round(), "roundf(x/d)");
            sum += *q as i32;
        }
        assert_eq!(b.s, half::f16::from_f32(sum as f32 * d), "s = d·Σq");
        // Q8_1 quants and scale are Q8_0's.
        let b0 = BlockQ8_0::quantize_block(&x);
        assert_eq!((b0.d, b0.qs), (b.d, b.qs));
    }
}

#[test]
fn q8_k_follows_its_defining_formula() {
    let mut rng = Rng(12);
    for scale in [0.0, 1e-3, 1.0, 300.0] {
        let mut x = rng.vec(256, scale);
        if scale == 1.0 {
            x[5] = -9.0; // the signed max is negative: the quant of it is +127
        }
        let b = BlockQ8K::quantize_block(&x);
        let max = x
            .iter()
            .fold(0f32, |m, &v| if v.abs() > m.abs() { v } else { m });
        if max == 0.0 {
            assert_eq!(b, BlockQ8K::zeroed());
            continue;
        }
        let iscale = -127.0 / max;
        assert_eq!(b.d, 1.0 / iscale);
        for (q, v) in b.qs.iter().zip(&x) {
            let r = (iscale * v).round_ties_even().min(127.0);
            assert_eq!(*q as f32, r);
        }
        for (k, s) in b.bsums.iter().enumerate() {
            let want: i32 = b.qs[16 * k..16 * k + 16].iter().map(|&q| q as i32).sum();
            assert_eq!(*s as i32, want);
        }
        if scale == 1.0 {
            assert_eq!(b.qs[5], -127);
        }
    }
}

fn check_dot<W: QuantDot>(seed: u64, n_blocks: usize) {
    let mut rng = Rng(seed);
    let k = n_blocks * W::BLOCK;
    let (xw, xa) = (rng.vec(k, 0.5), rng.vec(k, 2.0));
    let mut w = vec![W::zeroed(); k / W::BLOCK];
    let mut a = vec![W::Act::zeroed(); k / W::Act::BLOCK];
    W::quantize(&xw, &mut w).unwrap();
    W::Act::quantize(&xa, &mut a).unwrap();
    let (mut dw, mut da) = (vec![0f32; k], vec![0f32; k]);
    W::dequantize(&w, &mut dw).unwrap();
    W::Act::dequantize(&a, &mut da).unwrap();
    let want: f64 = dw.iter().zip(&da).map(|(x, y)| *x as f64 * *y as f64).sum();
    let mag: f64 = dw
        .iter()
        .zip(&da)
        .map(|(x, y)| (*x as f64 * *y as f64).abs())
        .sum();
    let got = W::dot(&w, &a).unwrap() as f64;
    // Q4_1/Q5_1 use the f16-rounded s = d·Σq for the min term: a little more slack.
    let tol = 1e-3 * mag + 1e-4;
    assert!((got - want).abs() <= tol, "{:?}: {got} vs {want}", W::DTYPE);
    // The byte-level entry point agrees.
    let by = dot_bytes(W::DTYPE, bytemuck::cast_slice(&w), bytemuck::cast_slice(&a)).unwrap();
    assert_eq!(by as f64, got);
    assert_eq!(vec_dot_type(W::DTYPE), Ok(W::Act::DTYPE));
}

#[test]
fn reference_dots_match_f32_dots_of_dequantized_operands() {
    for (i, n) in [1usize, 3, 8].into_iter().enumerate() {
        let s = 100 + i as u64;
        check_dot::<BlockQ4_0>(s, n * 8);
        check_dot::<BlockQ4_1>(s, n * 8);
        check_dot::<BlockQ5_0>(s, n * 8);
        check_dot::<BlockQ5_1>(s, n * 8);
        check_dot::<BlockQ8_0>(s, n * 8);
        check_dot::<BlockQ2K>(s, n);
        check_dot::<BlockQ3K>(s, n);
        check_dot::<BlockQ4K>(s, n);
        check_dot::<BlockQ5K>(s, n);
        check_dot::<BlockQ6K>(s, n);
    }
}

#[test]
fn wrong_lengths_are_errors() {
    let x = vec![0.5f32; 100];
    let mut q = vec![BlockQ4_0::zeroed(); 3];
    assert_eq!(
        BlockQ4_0::quantize(&x, &mut q),
        Err(Error::LengthMismatch {
            expected: 96,
            got: 100
        })
    );
    let mut out = vec![0f32; 95];
    assert!(BlockQ4_0::dequantize(&q, &mut out).is_err());
    let w = vec![BlockQ4K::zeroed(); 2];
    let a = vec![BlockQ8K::zeroed(); 1];
    assert!(BlockQ4K::dot(&w, &a).is_err());
    let mut bytes = vec![0u8; 144 * 2 + 1];
    assert!(quantize_bytes(DType::Q4K, &vec![0.0; 512], &mut bytes).is_err());
    assert!(dequantize_bytes(DType::Q4K, &bytes[..143], &mut [0.0; 256]).is_err());
    assert!(dot_bytes(DType::Q8K, &[], &[]).is_err());
}

#[test]
fn byte_entry_points_match_typed_ones() {
    let x = Rng(5).vec(512, 1.0);
    for dtype in [DType::Q4_0, DType::Q5_1, DType::Q3K, DType::Q6K, DType::Q8K] {
        let mut words = vec![0u32; dtype.storage_bytes(512).unwrap().div_ceil(4)];
        let bytes = &mut bytemuck::cast_slice_mut::<u32, u8>(&mut words)
            [..dtype.storage_bytes(512).unwrap()];
        quantize_bytes(dtype, &x, bytes).unwrap();
        let mut y = vec![0f32; 512];
        dequantize_bytes(dtype, bytes, &mut y).unwrap();
        assert!(rms(&y) > 0.5, "{dtype}");
    }
}

#[test]
fn zero_and_constant_inputs_are_handled() {
    let zeros = vec![0f32; 256];
    for y in [
        roundtrip::<BlockQ2K>(&zeros),
        roundtrip::<BlockQ3K>(&zeros),
        roundtrip::<BlockQ4K>(&zeros),
        roundtrip::<BlockQ5K>(&zeros),
        roundtrip::<BlockQ6K>(&zeros),
        roundtrip::<BlockQ8K>(&zeros),
        roundtrip::<BlockQ4_0>(&zeros),
    ] {
        assert!(y.iter().all(|v| *v == 0.0));
    }
    let c = vec![0.25f32; 256];
    for y in [
        roundtrip::<BlockQ4K>(&c),
        roundtrip::<BlockQ6K>(&c),
        roundtrip::<BlockQ8_0>(&c),
    ] {
        assert!(y.iter().all(|v| (v - 0.25).abs() < 0.02), "{:?}", &y[..4]);
    }
}
