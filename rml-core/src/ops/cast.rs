//! Reference op module `cast` (being written).
