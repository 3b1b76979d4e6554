//! Reference op module `compare` (being written).
