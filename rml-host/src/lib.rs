//! # rml-host
//!
//! The `std` host runtime of rml. It holds:
//!
//! - [`Tensor`]: an owned tensor (dtype, shape, strides) over shared storage — an
//!   aligned heap buffer or a zero-copy window of a memory-mapped file ([`Buffer`]) —
//!   with cheap views and checked conversion to `rml-core` views;
//! - [`ThreadPool`]: a rayon pool with a deterministic static partition and a cost
//!   threshold below which work stays on the calling thread;
//! - [`formats`]: safetensors (single and sharded), `.npy`/`.npz` and checkpoints, read
//!   by mmap and validated completely before use, each with a writer;
//! - [`Error`]: the crate's typed error, naming the file, field and tensor at fault;
//! - the `rml-host` CLI (`rml-host inspect FILE`).
//!
//! The graph stack (IR, loader, passes, planner, executor) will land here too. It
//! depends on `rml-core` and `rml-kernels` only; `rml-llm` and `rml-capi` build on it.
//!
//! `unsafe` is denied crate-wide and allowed in exactly one module (the memory map);
//! every other module, and every parser, is `#![forbid(unsafe_code)]`.
#![deny(unsafe_code)]

pub mod buffer;
pub mod error;
pub mod formats;
pub mod graph;
mod mmap;
pub mod pool;
pub mod tensor;

pub use buffer::Buffer;
pub use error::{Error, Result};
pub use pool::ThreadPool;
pub use tensor::{StorageKind, Tensor};
