//! The portable path: rml-core's reference code applied block by block to byte slices
//! of any alignment (blocks are copied out with `pod_read_unaligned`).

use rml_core::quant::{
    BlockQ2K, BlockQ3K, BlockQ4_0, BlockQ4_1, BlockQ4K, BlockQ5_0, BlockQ5_1, BlockQ5K, BlockQ6K,
    BlockQ8_0, BlockQ8_1, BlockQ8K, QuantBlock, QuantDot,
};
use rml_core::{DType, Error, Result};

fn blocks<B: QuantBlock>(bytes: &[u8]) -> impl Iterator<Item = B> + '_ {
    bytes
        .chunks_exact(core::mem::size_of::<B>())
        .map(bytemuck::pod_read_unaligned)
}

fn row_dot<W: QuantDot>(w: &[u8], a: &[u8]) -> f32 {
    blocks::<W>(w)
        .zip(blocks::<W::Act>(a))
        .map(|(w, a)| w.dot_block(&a))
        .sum()
}

fn rows<W: QuantDot>(w: &[u8], a: &[u8], out: &mut [f32]) {
    let rb = w.len() / out.len().max(1);
    for (o, row) in out.iter_mut().zip(w.chunks_exact(rb.max(1))) {
        *o = row_dot::<W>(row, a);
    }
}

/// `out[i]` = row `i` of `w` · `a` (lengths already checked by the caller).
pub(super) fn rows_dot(weight: DType, w: &[u8], a: &[u8], out: &mut [f32]) -> Result<()> {
    match weight {
        DType::Q4_0 => rows::<BlockQ4_0>(w, a, out),
        DType::Q4_1 => rows::<BlockQ4_1>(w, a, out),
        DType::Q5_0 => rows::<BlockQ5_0>(w, a, out),
        DType::Q5_1 => rows::<BlockQ5_1>(w, a, out),
        DType::Q8_0 => rows::<BlockQ8_0>(w, a, out),
        DType::Q2K => rows::<BlockQ2K>(w, a, out),
        DType::Q3K => rows::<BlockQ3K>(w, a, out),
        DType::Q4K => rows::<BlockQ4K>(w, a, out),
        DType::Q5K => rows::<BlockQ5K>(w, a, out),
        DType::Q6K => rows::<BlockQ6K>(w, a, out),
        other => return Err(Error::UnsupportedDType(other)),
    }
    Ok(())
}

fn quantize<B: QuantBlock>(x: &[f32], dst: &mut [u8]) {
    let size = core::mem::size_of::<B>();
    for (xs, d) in x.chunks_exact(B::BLOCK).zip(dst.chunks_exact_mut(size)) {
        d.copy_from_slice(bytemuck::bytes_of(&B::quantize_block(xs)));
    }
}

/// Reference activation quantizer over bytes (lengths already checked).
pub(super) fn quantize_act(act: DType, x: &[f32], dst: &mut [u8]) -> Result<()> {
    match act {
        DType::Q8_0 => quantize::<BlockQ8_0>(x, dst),
        DType::Q8_1 => quantize::<BlockQ8_1>(x, dst),
        DType::Q8K => quantize::<BlockQ8K>(x, dst),
        other => return Err(Error::UnsupportedDType(other)),
    }
    Ok(())
}

fn dequant<B: QuantBlock>(src: &[u8], dst: &mut [f32]) {
    for (b, out) in blocks::<B>(src).zip(dst.chunks_exact_mut(B::BLOCK)) {
        b.dequantize_block(out);
    }
}

/// Reference dequantizer over bytes (lengths already checked).
pub(super) fn dequantize(dtype: DType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    match dtype {
        DType::Q4_0 => dequant::<BlockQ4_0>(src, dst),
        DType::Q4_1 => dequant::<BlockQ4_1>(src, dst),
        DType::Q5_0 => dequant::<BlockQ5_0>(src, dst),
        DType::Q5_1 => dequant::<BlockQ5_1>(src, dst),
        DType::Q8_0 => dequant::<BlockQ8_0>(src, dst),
        DType::Q8_1 => dequant::<BlockQ8_1>(src, dst),
        DType::Q2K => dequant::<BlockQ2K>(src, dst),
        DType::Q3K => dequant::<BlockQ3K>(src, dst),
        DType::Q4K => dequant::<BlockQ4K>(src, dst),
        DType::Q5K => dequant::<BlockQ5K>(src, dst),
        DType::Q6K => dequant::<BlockQ6K>(src, dst),
        DType::Q8K => dequant::<BlockQ8K>(src, dst),
        other => return Err(Error::UnsupportedDType(other)),
    }
    Ok(())
}
