//! Reference op module `softmax` (being written).
