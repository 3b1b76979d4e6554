//! The key/value cache: keys and values of every layer, in f32 or f16, sized up
//! front for a fixed number of positions, so decoding never allocates.
//!
//! Memory: `2 · n_layers · capacity · n_kv_heads · head_dim · (4 or 2)` bytes.

use half::f16;

use crate::error::{Error, Result};

/// The element type of a [`KvCache`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KvDtype {
    /// 4 bytes per value, exact.
    #[default]
    F32,
    /// 2 bytes per value, keys and values rounded to f16 when stored.
    F16,
}

/// A value type the cache can hold.
pub trait KvElement: Copy + Default + Send + Sync + 'static {
    /// From f32 (rounded to nearest).
    fn from_f32(v: f32) -> Self;
    /// To f32 (exact).
    fn to_f32(self) -> f32;
}

impl KvElement for f32 {
    fn from_f32(v: f32) -> f32 {
        v
    }
    fn to_f32(self) -> f32 {
        self
    }
}

impl KvElement for f16 {
    fn from_f32(v: f32) -> f16 {
        f16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
}

/// Keys and values of one layer, positions `0..end`.
#[derive(Clone, Copy, Debug)]
pub enum KvSlices<'a> {
    /// f32 storage.
    F32(&'a [f32], &'a [f32]),
    /// f16 storage.
    F16(&'a [f16], &'a [f16]),
}

#[derive(Clone, Debug)]
enum Storage {
    F32 { keys: Vec<f32>, values: Vec<f32> },
    F16 { keys: Vec<f16>, values: Vec<f16> },
}

/// Keys and values of `len` positions for every layer, room for `capacity`.
#[derive(Clone, Debug)]
pub struct KvCache {
    n_layers: usize,
    kv_dim: usize,
    capacity: usize,
    len: usize,
    storage: Storage,
}

fn store<T: KvElement>(dst: &mut [T], src: &[f32]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = T::from_f32(*s);
    }
}

impl KvCache {
    /// An empty f32 cache for `n_layers` layers of `kv_dim` (= key heads × head
    /// width) values per position, holding up to `capacity` positions.
    pub fn new(n_layers: usize, kv_dim: usize, capacity: usize) -> KvCache {
        KvCache::with_dtype(n_layers, kv_dim, capacity, KvDtype::F32)
    }

    /// [`KvCache::new`] with the element type chosen.
    pub fn with_dtype(n_layers: usize, kv_dim: usize, capacity: usize, dtype: KvDtype) -> KvCache {
        let n = n_layers * capacity * kv_dim;
        let storage = match dtype {
            KvDtype::F32 => Storage::F32 {
                keys: vec![0.0; n],
                values: vec![0.0; n],
            },
            KvDtype::F16 => Storage::F16 {
                keys: vec![f16::ZERO; n],
                values: vec![f16::ZERO; n],
            },
        };
        KvCache {
            n_layers,
            kv_dim,
            capacity,
            len: 0,
            storage,
        }
    }

    /// The element type.
    pub fn dtype(&self) -> KvDtype {
        match self.storage {
            Storage::F32 { .. } => KvDtype::F32,
            Storage::F16 { .. } => KvDtype::F16,
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
        match &self.storage {
            Storage::F32 { keys, values } => (keys.len() + values.len()) * 4,
            Storage::F16 { keys, values } => (keys.len() + values.len()) * 2,
        }
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
        match &mut self.storage {
            Storage::F32 { keys, values } => {
                store(&mut keys[r.clone()], key);
                store(&mut values[r], value);
            }
            Storage::F16 { keys, values } => {
                store(&mut keys[r.clone()], key);
                store(&mut values[r], value);
            }
        }
    }

    /// Keys and values of `layer` for positions `0..end` (`end × kv_dim` each).
    pub fn layer(&self, layer: usize, end: usize) -> KvSlices<'_> {
        let start = layer * self.capacity * self.kv_dim;
        let r = start..start + end * self.kv_dim;
        match &self.storage {
            Storage::F32 { keys, values } => KvSlices::F32(&keys[r.clone()], &values[r]),
            Storage::F16 { keys, values } => KvSlices::F16(&keys[r.clone()], &values[r]),
        }
    }

    /// Marks `n` more positions as stored (after every layer wrote them).
    pub fn advance(&mut self, n: usize) {
        self.len = (self.len + n).min(self.capacity);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_cache_rounds_and_halves_the_memory() {
        let mut a = KvCache::new(2, 4, 3);
        let mut b = KvCache::with_dtype(2, 4, 3, KvDtype::F16);
        assert_eq!(a.bytes(), 2 * b.bytes());
        let k = [1.0, 0.1, -2.5, 1e-3];
        for c in [&mut a, &mut b] {
            c.store(1, 2, &k, &k);
            c.advance(3);
        }
        let KvSlices::F16(keys, _) = b.layer(1, 3) else {
            panic!("f16 cache hands out f32 slices")
        };
        for (got, want) in keys[8..].iter().zip(k) {
            assert!((got.to_f32() - want).abs() <= want.abs() * 1e-3);
        }
        assert!(matches!(a.layer(1, 3), KvSlices::F32(..)));
    }
}
