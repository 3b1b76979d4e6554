//! Reference op module `norm` (being written).
