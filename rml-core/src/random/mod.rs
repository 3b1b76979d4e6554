//! Counter-based random numbers (Philox) and the distributions built on them.
