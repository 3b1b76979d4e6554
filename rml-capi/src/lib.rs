//! # rml-capi
//!
//! The C ABI of rml: a cdylib and staticlib with a generated `include/rml.h`, exposing
//! graph load/run and LLM load/tokenize/generate to other languages. It depends on
//! `rml-host` and `rml-llm`; it holds no logic of its own beyond the FFI boundary.
//!
//! Today it exports only the library version.

/// The rml version as a NUL-terminated C string, valid for the life of the program.
pub const VERSION: &core::ffi::CStr = c"0.1.0";
