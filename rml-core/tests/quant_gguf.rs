//! Byte-exactness of rml-core's GGML quantizers and dequantizers against the `gguf`
//! Python package (fixtures written by `scripts/fixtures/quant_gguf.py`).

use rml_core::quant::{
    BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1, BlockQ5K, BlockQ6K,
    BlockQ8_0, QuantBlock,
};

macro_rules! fixture {
    ($name:literal) => {
        include_bytes!(concat!("fixtures/quant_gguf/", $name))
    };
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn blocks<B: QuantBlock>(bytes: &[u8]) -> Vec<B> {
    let size = core::mem::size_of::<B>();
    assert_eq!(bytes.len() % size, 0);
    let mut v = vec![B::zeroed(); bytes.len() / size];
    bytemuck::cast_slice_mut::<B, u8>(&mut v).copy_from_slice(bytes);
    v
}

/// Compares f32 values bit for bit (so -0.0 and 0.0 differ), reporting the first miss.
fn assert_bits_eq(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.to_bits(), w.to_bits(), "{what}: element {i}: {g} vs {w}");
    }
}

fn check_legacy<B: QuantBlock>(name: &str, input: &[u8], want_blocks: &[u8], want_deq: &[u8]) {
    let x = f32s(input);
    let mut q = vec![B::zeroed(); x.len() / B::BLOCK];
    B::quantize(&x, &mut q).unwrap();
    let got: &[u8] = bytemuck::cast_slice(&q);
    for (i, (g, w)) in got.iter().zip(want_blocks).enumerate() {
        let size = core::mem::size_of::<B>();
        assert_eq!(g, w, "{name}: byte {} of block {}", i % size, i / size);
    }
    assert_eq!(got.len(), want_blocks.len());
    check_dequant::<B>(name, want_blocks, want_deq);
}

fn check_dequant<B: QuantBlock>(name: &str, block_bytes: &[u8], want_deq: &[u8]) {
    let q: Vec<B> = blocks(block_bytes);
    let mut out = vec![0f32; q.len() * B::BLOCK];
    B::dequantize(&q, &mut out).unwrap();
    assert_bits_eq(name, &out, &f32s(want_deq));
}

#[test]
fn legacy_quantizers_match_gguf_byte_for_byte() {
    check_legacy::<BlockQ4_0>(
        "q4_0",
        fixture!("q4_0.input.f32"),
        fixture!("q4_0.blocks"),
        fixture!("q4_0.dequant.f32"),
    );
    check_legacy::<BlockQ4_1>(
        "q4_1",
        fixture!("q4_1.input.f32"),
        fixture!("q4_1.blocks"),
        fixture!("q4_1.dequant.f32"),
    );
    check_legacy::<BlockQ5_0>(
        "q5_0",
        fixture!("q5_0.input.f32"),
        fixture!("q5_0.blocks"),
        fixture!("q5_0.dequant.f32"),
    );
    check_legacy::<BlockQ5_1>(
        "q5_1",
        fixture!("q5_1.input.f32"),
        fixture!("q5_1.blocks"),
        fixture!("q5_1.dequant.f32"),
    );
    check_legacy::<BlockQ8_0>(
        "q8_0",
        fixture!("q8_0.input.f32"),
        fixture!("q8_0.blocks"),
        fixture!("q8_0.dequant.f32"),
    );
}

#[test]
fn k_quant_dequantizers_match_gguf_bit_for_bit() {
    check_dequant::<BlockQ2K>(
        "q2_k",
        fixture!("q2_k.blocks"),
        fixture!("q2_k.dequant.f32"),
    );
    check_dequant::<BlockQ3K>(
        "q3_k",
        fixture!("q3_k.blocks"),
        fixture!("q3_k.dequant.f32"),
    );
    check_dequant::<BlockQ4K>(
        "q4_k",
        fixture!("q4_k.blocks"),
        fixture!("q4_k.dequant.f32"),
    );
    check_dequant::<BlockQ5K>(
        "q5_k",
        fixture!("q5_k.blocks"),
        fixture!("q5_k.dequant.f32"),
    );
    check_dequant::<BlockQ6K>(
        "q6_k",
        fixture!("q6_k.blocks"),
        fixture!("q6_k.dequant.f32"),
    );
}
