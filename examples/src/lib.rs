//! # rml examples
//!
//! Runnable programs, one concept each, under `examples/examples/`. Logic lives in
//! the library crates; an example only wires them together. Any rml crate may be used.
