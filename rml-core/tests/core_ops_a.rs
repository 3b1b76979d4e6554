//! rml-core's reference ops (part A) against NumPy: the fixtures in
//! `tests/fixtures/core_ops_a/` are written by `scripts/fixtures/core_ops_a.py`.
//!
//! Unless a module says otherwise, references are float64 NumPy results rounded once
//! to f32, and rml computes in f64 and rounds once too; the tolerances (named
//! constants in each module) follow from that.

mod core_ops_a {
    pub mod fixture;

    mod cast;
    mod elementwise;
    mod matmul;
    mod norm;
    mod reduce;
    mod softmax;
}
