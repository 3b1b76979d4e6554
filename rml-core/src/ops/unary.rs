//! Reference op module `unary` (being written).
