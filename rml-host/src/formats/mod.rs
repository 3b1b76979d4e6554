//! Model file formats read by mmap with strict validation.

pub mod gguf;
