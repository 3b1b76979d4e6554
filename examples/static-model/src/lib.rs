//! # rml-static-model
//!
//! A zoo model compiled into `static` arrays at build time and run by rml-kernels on
//! memory the caller owns: no heap, no `std`, no file system. The build script reads
//! the rml-graph fixture (`zoo/fixtures/mlp/torch`, or `RML_EMBED_FIXTURE`) and writes
//! its weights and input as Rust arrays; [`run`] pushes rows through the layers with
//! `rml_kernels::gemm::gemv_nk` (bias and ReLU fused into its epilogue), keeping the
//! hidden activations in a [`ScratchArena`] over the caller's byte buffer.
//!
//! The firmware (`examples/firmware`) and WASM (`examples/wasm`) examples share this
//! crate; `docs/embedding.md` describes both.
#![no_std]

use rml_core::{Error, Result, ScratchArena};
use rml_kernels::gemm::{Activation, Epilogue, MatMut, MatRef, gemv_nk};

/// One fully connected layer, `y = activation(x · weightᵀ + bias)`.
#[derive(Clone, Copy, Debug)]
pub struct Dense {
    /// The node name in the graph (`fc1`, …).
    pub name: &'static str,
    /// `[outputs, inputs]`, row-major (the PyTorch `Linear` layout).
    pub weight: &'static [f32],
    /// `[outputs]`, if the layer has one.
    pub bias: Option<&'static [f32]>,
    /// Features in.
    pub inputs: usize,
    /// Features out.
    pub outputs: usize,
    /// Applied after the bias.
    pub activation: Activation,
}

/// The generated model: [`LAYERS`], the width constants and the fixture [`INPUT`].
mod model {
    use super::{Activation, Dense};
    include!(concat!(env!("OUT_DIR"), "/model.rs"));
}

pub use model::{HIDDEN_WIDTH, INPUT, INPUT_ROWS, INPUT_WIDTH, LAYERS, OUTPUT_WIDTH, SOURCE};

/// Hidden-activation buffers [`run`] takes from its scratch: two alternate between
/// layers, fewer when the model has fewer than three layers.
const HIDDEN_BUFFERS: usize = if LAYERS.len() > 2 {
    2
} else {
    LAYERS.len() - 1
};

/// Scratch bytes [`run`] needs for `rows` input rows (`None` when that overflows):
/// `buffers × (rows × HIDDEN_WIDTH × 4 + 3)`, where 3 bytes per buffer cover its
/// alignment to `f32`.
pub const fn scratch_bytes(rows: usize) -> Option<usize> {
    let Some(floats) = rows.checked_mul(HIDDEN_WIDTH) else {
        return None;
    };
    let Some(bytes) = floats.checked_mul(core::mem::size_of::<f32>()) else {
        return None;
    };
    let Some(padded) = bytes.checked_add(3) else {
        return None;
    };
    padded.checked_mul(HIDDEN_BUFFERS)
}

/// Runs the model on `x` (`rows × INPUT_WIDTH`, row-major) into `y`
/// (`rows × OUTPUT_WIDTH`), with `scratch` of at least [`scratch_bytes`]`(rows)` bytes.
pub fn run(x: &[f32], y: &mut [f32], scratch: &mut [u8]) -> Result<()> {
    if x.is_empty() || !x.len().is_multiple_of(INPUT_WIDTH) {
        return Err(Error::InvalidArgument(
            "input length must be a positive multiple of INPUT_WIDTH",
        ));
    }
    let rows = x.len() / INPUT_WIDTH;
    let expected = rows.checked_mul(OUTPUT_WIDTH).ok_or(Error::Overflow)?;
    if y.len() != expected {
        return Err(Error::LengthMismatch {
            expected,
            got: y.len(),
        });
    }
    let hidden_len = rows.checked_mul(HIDDEN_WIDTH).ok_or(Error::Overflow)?;
    let mut arena = ScratchArena::new(scratch);
    let mut buffers: [&mut [f32]; 2] = [&mut [], &mut []];
    for buffer in buffers.iter_mut().take(HIDDEN_BUFFERS) {
        *buffer = arena.alloc(hidden_len)?;
    }
    let (last, hidden) = LAYERS
        .split_last()
        .ok_or(Error::InvalidArgument("no layers"))?;
    for (i, layer) in hidden.iter().enumerate() {
        let [even, odd] = &mut buffers;
        let (src, dst): (&[f32], &mut [f32]) = match i {
            0 => (x, even),
            _ if i % 2 == 1 => (even, odd),
            _ => (odd, even),
        };
        dense(layer, rows, src, dst)?;
    }
    let src: &[f32] = match hidden.len() {
        0 => x,
        n => buffers[(n - 1) % 2],
    };
    dense(last, rows, src, y)
}

/// One layer on `rows` rows: reads `rows × inputs` of `src`, writes `rows × outputs`
/// of `dst`.
fn dense(layer: &Dense, rows: usize, src: &[f32], dst: &mut [f32]) -> Result<()> {
    let x = MatRef::row_major(
        src.get(..rows * layer.inputs)
            .ok_or(Error::BufferTooSmall {
                needed: rows * layer.inputs,
                got: src.len(),
            })?,
        rows,
        layer.inputs,
    )?;
    let w = MatRef::row_major(layer.weight, layer.outputs, layer.inputs)?;
    let out_len = rows * layer.outputs;
    let got = dst.len();
    let y = MatMut::row_major(
        dst.get_mut(..out_len).ok_or(Error::BufferTooSmall {
            needed: out_len,
            got,
        })?,
        rows,
        layer.outputs,
    )?;
    let epilogue = Epilogue {
        bias: layer.bias,
        activation: layer.activation,
        ..Epilogue::default()
    };
    gemv_nk(1.0, x, w, 0.0, y, &epilogue)
}

#[cfg(test)]
mod tests {
    use super::*;

    extern crate std;
    use std::vec;

    /// The fixture input through [`run`], with exactly [`scratch_bytes`] of scratch.
    fn run_rows(x: &[f32], scratch_offset: usize) -> Result<std::vec::Vec<f32>> {
        let rows = x.len() / INPUT_WIDTH;
        let mut y = vec![0.0; rows * OUTPUT_WIDTH];
        let mut scratch = vec![0u8; scratch_bytes(rows).unwrap() + scratch_offset];
        run(x, &mut y, &mut scratch[scratch_offset..])?;
        Ok(y)
    }

    #[test]
    fn rows_are_independent_and_any_scratch_alignment_fits() {
        let together = run_rows(&INPUT, 0).unwrap();
        for offset in 0..4 {
            for (row, expected) in INPUT.chunks(INPUT_WIDTH).zip(together.chunks(OUTPUT_WIDTH)) {
                assert_eq!(run_rows(row, offset).unwrap(), expected);
            }
        }
    }

    #[test]
    fn bad_lengths_and_small_scratch_are_errors() {
        let mut y = [0.0; INPUT_ROWS * OUTPUT_WIDTH];
        let mut scratch = vec![0u8; scratch_bytes(INPUT_ROWS).unwrap()];
        assert!(matches!(
            run(&INPUT[1..], &mut y, &mut scratch),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(scratch_bytes(usize::MAX), None);
        assert!(matches!(
            run(&[], &mut y, &mut scratch),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            run(&INPUT, &mut y[1..], &mut scratch),
            Err(Error::LengthMismatch { .. })
        ));
        if HIDDEN_BUFFERS > 0 {
            // One byte short of the buffers even when no alignment padding is needed.
            let short = scratch.len() - 3 * HIDDEN_BUFFERS - 1;
            assert!(matches!(
                run(&INPUT, &mut y, &mut scratch[..short]),
                Err(Error::ScratchExhausted { .. })
            ));
        }
    }
}
