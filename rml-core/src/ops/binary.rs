//! Reference op module `binary` (being written).
