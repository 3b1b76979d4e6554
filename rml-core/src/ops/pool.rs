//! Reference op module `pool` (being written).
