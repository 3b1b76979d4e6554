//! # rml-kernels
//!
//! The fast kernels of rml: packed SIMD GEMM and GEMV, vectorized math, softmax,
//! norms, reductions, quantized dot products and dequantization. Per-architecture code
//! (AVX2+FMA and AVX-512 on x86_64, NEON on aarch64, and a scalar path everywhere)
//! lives in per-ISA files (`simd/`, `gemm/`, `quant/`) behind safe functions that
//! check lengths first; the ISA is chosen once (`isa`).
//!
//! Like `rml-core`, on which alone it depends, this crate is `no_std` and never
//! allocates: every buffer and scratch area comes from the caller, and every kernel
//! takes row ranges so a host can split work across threads. Each kernel is tested
//! against its readable reference in `rml-core`.
#![cfg_attr(not(feature = "std"), no_std)]

pub use rml_core;

pub mod attention;
pub mod gemm;
pub mod isa;
pub mod quant;

pub mod chain;
pub mod convert;
pub mod copy;
pub mod elementwise;
pub mod math;
pub mod norm;
pub mod reduce;
pub(crate) mod simd;
pub mod softmax;
pub mod testing;
