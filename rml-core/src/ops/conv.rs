//! Reference op module `conv` (being written).
