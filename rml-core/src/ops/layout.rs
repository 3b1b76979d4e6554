//! Reference op module `layout` (being written).
