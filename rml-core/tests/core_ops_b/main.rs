//! rml-core's conv, pooling, upsampling and layout reference ops against NumPy.
//!
//! The fixtures in `tests/fixtures/core_ops_b/` are written by
//! `scripts/fixtures/core_ops_b.py`, which computes every expected output in float64
//! from the float32 inputs with NumPy (never with rml) and rounds once to float32.

mod conv;
mod fixture;
mod layout;
mod pool;
mod props;
mod upsample;
