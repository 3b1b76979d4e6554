//! # rml-capi
//!
//! The C ABI of rml: a cdylib and staticlib with a generated header,
//! `include/rml.h`, giving other languages the graph runtime of `rml-host` (load an
//! rml-graph, run it on named raw buffers, read its outputs) and the LLM runtime of
//! `rml-llm` (load a model, tokenize, generate with a text callback). It holds no
//! logic beyond the boundary: checking what the caller passed, and translating
//! errors into status codes. `docs/embedding.md` is the user's guide.
//!
//! Rules every entry point follows:
//!
//! - it returns an [`RmlStatus`]; on failure the thread's last-error message
//!   ([`rml_last_error`]) says what was wrong;
//! - null pointers, misaligned pointers, non-UTF-8 strings, unknown dtypes, wrong
//!   shapes, freed and foreign handles are reported, never dereferenced blindly;
//! - a panic inside rml is caught at the boundary and reported as
//!   [`RmlStatus::Panic`];
//! - handles are opaque 64-bit ids checked against a registry, so a
//!   freed, forged or wrong-kind handle is an error, not a dangling pointer;
//! - the library never keeps a pointer the caller passed beyond the call.
//!
//! Modules: [`status`] (codes, last error, the panic guard), `args` (checked pointer
//! arguments), `registry` (handles), [`tensor`] (dtypes and tensor descriptions),
//! [`graph`] and [`llm`] (the entry points).

pub mod graph;
pub mod llm;
pub mod status;
pub mod tensor;

mod args;
mod registry;

use core::ffi::{CStr, c_char};

pub use graph::*;
pub use llm::*;
pub use status::{RmlStatus, rml_last_error, rml_status_name};
pub use tensor::{RML_MAX_RANK, RmlDtype, RmlTensor, RmlTensorInfo};

/// The rml version as a NUL-terminated C string, valid for the life of the program.
pub const VERSION: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => panic!("the package version holds a NUL byte"),
    };

/// The library version (`"MAJOR.MINOR.PATCH"`), a static NUL-terminated string the
/// caller must not free.
#[unsafe(no_mangle)]
pub extern "C" fn rml_version() -> *const c_char {
    VERSION.as_ptr()
}
