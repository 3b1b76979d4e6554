//! # rml-core
//!
//! The `no_std`, allocation-free foundation of rml. It holds the element types
//! ([`DType`]), shapes and strides with a fixed maximum rank ([`Shape`]), NumPy
//! broadcasting, tensor views over caller-owned slices ([`TensorView`],
//! [`TensorViewMut`]), the crate's small `Copy` [`Error`], a scratch arena over a
//! caller byte buffer ([`ScratchArena`]), and — as they land — the *readable
//! reference ops*, GGML block layouts and the Philox random generators.
//!
//! Everything here is written to be read: it is the truth that the fast kernels in
//! `rml-kernels` are tested against. The crate never allocates (no `alloc`), never
//! uses `unsafe`, and depends only on `libm`, `half`, `bytemuck` and `heapless`
//! (plus `defmt` behind the `defmt` feature), so it links into firmware and WASM.
//! Every function that can be handed a wrong shape, a short buffer or misaligned
//! bytes returns an [`Error`] instead of panicking.
#![no_std]
#![forbid(unsafe_code)]

pub mod arena;
pub mod dtype;
pub mod error;
pub mod ops;
pub mod quant;
pub mod random;
pub mod shape;
pub mod view;

pub use arena::ScratchArena;
pub use dtype::{DType, GgmlType};
pub use error::{Error, Result};
pub use shape::{MAX_RANK, Shape, Strides, broadcast_shapes};
pub use view::{TensorView, TensorViewMut};
