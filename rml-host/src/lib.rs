//! # rml-host
//!
//! The `std` host runtime of rml. It will hold the owned `Tensor` (heap, mmap or
//! shared storage), the thread pool with deterministic partitioning, the file formats
//! (safetensors, GGUF, .npy, checkpoints) read by mmap with strict validation, and the
//! graph stack (IR, loader, passes, planner, executor) behind the `rml-host` CLI.
//!
//! It depends on `rml-core` and `rml-kernels` only; `rml-llm` and `rml-capi` build on it.

pub mod formats;
