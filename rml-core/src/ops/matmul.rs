//! Reference op module `matmul` (being written).
