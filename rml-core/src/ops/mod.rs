//! The readable reference ops, in f32 unless the op is about dtypes.
//!
//! Each op checks its shapes and buffer lengths and returns an [`crate::Error`] for
//! a caller mistake; it never allocates, so outputs are caller-supplied views or
//! slices. These are the truth the fast kernels in `rml-kernels` are tested
//! against: clarity wins over speed here.

// Shared iteration helpers first: every op module below builds on them.
pub mod walk;

pub mod binary;
pub mod cast;
pub mod compare;
pub mod conv;
pub mod layout;
pub mod matmul;
pub mod norm;
pub mod pool;
pub mod reduce;
pub mod softmax;
pub mod unary;
pub mod upsample;
