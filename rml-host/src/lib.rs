//! # rml-host
//!
//! The `std` host runtime of rml. It holds:
//!
//! - [`Tensor`]: an owned tensor (dtype, shape, strides) over shared storage — an
//!   aligned heap buffer or a zero-copy window of a memory-mapped file ([`Buffer`]) —
//!   with cheap views and checked conversion to `rml-core` views;
//! - [`ThreadPool`]: a thread count, a spinning [`team`] of workers for many short
//!   phases (LLM decode, the graph executor's split steps), the deterministic static
//!   split every parallel caller uses, and a cost threshold below which work stays
//!   on the calling thread;
//! - [`formats`]: safetensors (single and sharded), GGUF, `.npy`/`.npz` and checkpoints, read
//!   by mmap and validated completely before use, each with a writer;
//! - [`isa_env`]: `RML_ISA`, which forces one kernel family for the process;
//! - [`Error`]: the crate's typed error, naming the file, field and tensor at fault;
//! - the `rml-host` CLI (`rml-host inspect FILE`).
//!
//! - [`graph`]: the rml-graph IR, its loader with validation and symbolic shape
//!   inference, and the reference interpreter (see `docs/graph-ir.md`).
//!
//! It depends on `rml-core` and `rml-kernels` only; `rml-llm` and `rml-capi` build on it.
//!
//! `unsafe` is denied crate-wide and allowed in exactly two modules (the memory map,
//! and the [`team`]'s hand-off of a borrowed closure to its workers); every other
//! module, and every parser, is `#![forbid(unsafe_code)]`.
#![deny(unsafe_code)]

pub mod buffer;
pub mod error;
pub mod formats;
pub mod graph;
pub mod isa_env;
mod mmap;
pub mod pool;
pub mod team;
pub mod tensor;

pub use buffer::Buffer;
pub use error::{Error, Result};
pub use pool::ThreadPool;
pub use tensor::{StorageKind, Tensor};
