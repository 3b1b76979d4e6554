//! The key/value cache: f32 keys and values of every layer, sized up front for a
//! fixed number of positions, so decoding never allocates.
//!
//! Memory: `2 · n_layers · capacity · n_kv_heads · head_dim · 4` bytes.

use crate::error::{Error, Result};

/// Keys and values of `len` positions for every layer, room for `capacity`.
#[derive(Clone, Debug)]
pub struct KvCache {
    n_layers: usize,
    kv_dim: usize,
    capacity: usize,
    len: usize,
    keys: Vec<f32>,
    values: Vec<f32>,
}

impl KvCache {
    /// An empty cache for `n_layers` layers of `kv_dim` (= key heads × head width)
    /// values per position, holding up to `capacity` positions.
    pub fn new(n_layers: usize, kv_dim: usize, capacity: usize) -> KvCache {
        let n = n_layers * capacity * kv_dim;
        KvCache {
            n_layers,
            kv_dim,
            capacity,
            len: 0,
            keys: vec![0.0; n],
            values: vec![0.0; n],
        }
    }

    /// Positions stored (the position of the next token).
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Positions the cache can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes held by keys and values.
    pub fn bytes(&self) -> usize {
        (self.keys.len() + self.values.len()) * size_of::<f32>()
    }

    /// Forgets every position (the memory stays).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Forgets positions from `len` on (to rewind after a rejected draft).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Checks that `n` more positions fit.
    pub fn reserve(&self, n: usize) -> Result<()> {
        if self.len + n > self.capacity {
            return Err(Error::Input(format!(
                "{} positions do not fit: the KV cache holds {} of {}",
                n, self.len, self.capacity
            )));
        }
        Ok(())
    }

    fn range(&self, layer: usize, pos: usize) -> std::ops::Range<usize> {
        debug_assert!(layer < self.n_layers && pos < self.capacity);
        let start = (layer * self.capacity + pos) * self.kv_dim;
        start..start + self.kv_dim
    }

    /// Stores the key and value rows of `layer` at position `pos`.
    pub fn store(&mut self, layer: usize, pos: usize, key: &[f32], value: &[f32]) {
        let r = self.range(layer, pos);
        self.keys[r.clone()].copy_from_slice(key);
        self.values[r].copy_from_slice(value);
    }

    /// Keys and values of `layer` for positions `0..end` (`end × kv_dim` each).
    pub fn layer(&self, layer: usize, end: usize) -> (&[f32], &[f32]) {
        let start = layer * self.capacity * self.kv_dim;
        let r = start..start + end * self.kv_dim;
        (&self.keys[r.clone()], &self.values[r])
    }

    /// Marks `n` more positions as stored (after every layer wrote them).
    pub fn advance(&mut self, n: usize) {
        self.len = (self.len + n).min(self.capacity);
    }
}
