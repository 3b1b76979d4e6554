//! Reference op module `reduce` (being written).
