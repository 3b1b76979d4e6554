//! rml-core's reference quantizers against blocks written by llama.cpp's own
//! `llama_model_quantize` (pure quantization, no importance matrix), produced on demand
//! by `scripts/fixtures/quant_llamacpp.py`. Every byte must match, including the
//! K-quants' iterative scale searches.

use rml_core::DType;
use rml_core::quant::quantize_bytes;

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!("fixtures/quant_llamacpp/", $name))
    };
}

fn input() -> Vec<f32> {
    fixture!("input.f32")
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn check(dtype: DType, want: &[u8]) {
    let x = input();
    let n = dtype.storage_bytes(x.len()).unwrap();
    assert_eq!(n, want.len(), "{dtype}: fixture size");
    let mut words = vec![0u32; n.div_ceil(4)];
    let got = &mut bytemuck::cast_slice_mut::<u32, u8>(&mut words)[..n];
    quantize_bytes(dtype, &x, got).unwrap();
    let bs = dtype.type_size();
    let mismatched: Vec<usize> = (0..n / bs)
        .filter(|&b| got[b * bs..(b + 1) * bs] != want[b * bs..(b + 1) * bs])
        .collect();
    assert!(
        mismatched.is_empty(),
        "{dtype}: blocks {mismatched:?} of {} differ from llama.cpp",
        n / bs
    );
}

#[test]
fn k_quant_quantizers_match_llama_cpp_byte_for_byte() {
    check(DType::Q2K, fixture!("q2_k.blocks"));
    check(DType::Q3K, fixture!("q3_k.blocks"));
    check(DType::Q4K, fixture!("q4_k.blocks"));
    check(DType::Q5K, fixture!("q5_k.blocks"));
    check(DType::Q6K, fixture!("q6_k.blocks"));
}

#[test]
fn legacy_quantizers_match_llama_cpp_byte_for_byte() {
    check(DType::Q4_0, fixture!("q4_0.blocks"));
    check(DType::Q4_1, fixture!("q4_1.blocks"));
    check(DType::Q5_0, fixture!("q5_0.blocks"));
    check(DType::Q5_1, fixture!("q5_1.blocks"));
    check(DType::Q8_0, fixture!("q8_0.blocks"));
}
