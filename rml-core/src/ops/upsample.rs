//! Reference op module `upsample` (being written).
