//! Shared by the rml-capi tests: paths, status checks, and C-side buffers.
#![allow(dead_code)]

use std::ffi::{CStr, CString};
use std::path::PathBuf;

use rml_capi::*;

/// The workspace root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A path under the root as a C string.
pub fn c_path(rel: &str) -> CString {
    CString::new(root().join(rel).to_str().unwrap()).unwrap()
}

/// This thread's last error message.
pub fn last_error() -> String {
    // SAFETY: rml_last_error returns a valid NUL-terminated string.
    unsafe { CStr::from_ptr(rml_last_error()) }
        .to_str()
        .unwrap()
        .to_string()
}

/// Asserts `status` is OK, showing the last error otherwise.
pub fn ok(status: RmlStatus) {
    assert_eq!(status, RmlStatus::Ok, "{}", last_error());
}

/// Asserts `status` is `want` and the last error mentions `needle`.
pub fn fails(status: RmlStatus, want: RmlStatus, needle: &str) {
    assert_eq!(status, want, "last error: {}", last_error());
    let msg = last_error();
    assert!(msg.contains(needle), "{msg:?} does not mention {needle:?}");
}

/// The bundled transformer block, loaded.
pub fn bundled_graph(threads: u32) -> RmlGraph {
    let path = c_path("models/graph-default/transformer_block.json");
    let mut g = 0;
    // SAFETY: valid string and out pointer.
    ok(unsafe { rml_graph_load(path.as_ptr(), threads, &mut g) });
    g
}

/// The bundled tiny Llama, loaded.
pub fn bundled_llm() -> RmlLlm {
    let path = c_path("models/default/rml-tiny-llama.gguf");
    let mut l = 0;
    // SAFETY: valid string and out pointer.
    ok(unsafe { rml_llm_load(path.as_ptr(), &mut l) });
    l
}

/// An `.npy` file's f32 data and dims.
pub fn npy_f32(rel: &str) -> (Vec<f32>, Vec<i64>) {
    let t = rml_host::formats::npy::open(root().join(rel)).unwrap();
    let dims = t.dims().iter().map(|&d| d as i64).collect();
    (t.to_vec::<f32>().unwrap(), dims)
}

/// An f32 input tensor over `data`.
pub fn f32_tensor(name: &CStr, dims: &[i64], data: &[f32]) -> RmlTensor {
    RmlTensor {
        name: name.as_ptr(),
        dtype: RmlDtype::F32 as u32,
        rank: dims.len(),
        dims: dims.as_ptr(),
        data: data.as_ptr().cast(),
        byte_len: std::mem::size_of_val(data),
    }
}
