//! The key/value cache: keys and values of every layer, in f32 or f16, sized up
//! front for a fixed number of positions, so decoding never allocates.
//!
//! Each layer holds `slots` positions and position `p` lives in slot `p % slots`. A
//! full-attention layer has `slots = capacity`; a sliding-window layer of window `W`
//! may have a ring of `W + max_block − 1` slots ([`KvCache::windowed`]): enough for
//! the last `W` positions of the oldest query of a block of up to `max_block` new
//! tokens.
//!
//! Memory: `2 · Σ_layers slots · n_kv_heads · head_dim · (4 or 2)` bytes.

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

impl std::str::FromStr for KvDtype {
    type Err = Error;

    /// `f32` or `f16`, as `rml-llm bench --cache-type` and the examples spell them.
    fn from_str(name: &str) -> Result<KvDtype> {
        match name {
            "f32" => Ok(KvDtype::F32),
            "f16" => Ok(KvDtype::F16),
            other => Err(Error::Input(format!(
                "KV cache type must be f32 or f16, not {other:?}"
            ))),
        }
    }
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

/// Keys and values of one layer: `slots` rows of `kv_dim`, position `p` in row
/// `p % slots`.
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
    kv_dim: usize,
    capacity: usize,
    max_block: usize,
    /// Per layer: (first row, rows).
    layers: Vec<(usize, usize)>,
    len: usize,
    storage: Storage,
}

/// `n` zeros, on huge pages where the system grants them.
///
/// The zeroed allocation is fresh, untouched memory (`calloc` maps it), so advising
/// it before the first store lets the kernel back it with 2 MiB pages even when
/// transparent huge pages are in `madvise` mode: decode attention then streams the
/// cache without a TLB miss and a prefetcher restart every 4 KiB.
fn zeroed<T: KvElement + bytemuck::Zeroable>(n: usize) -> Vec<T> {
    let v: Vec<T> = bytemuck::zeroed_vec(n);
    advise_huge_pages(&v);
    v
}

/// Asks the kernel to back the 2 MiB-aligned part of `v` with huge pages (Linux);
/// nothing happens where that is unsupported or refused.
fn advise_huge_pages<T>(v: &[T]) {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        const HUGE: usize = 2 << 20;
        let start = v.as_ptr() as usize;
        let end = start + std::mem::size_of_val(v);
        let (lo, hi) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
        if lo < hi {
            // SAFETY: `lo..hi` lies inside `v`'s allocation, and MADV_HUGEPAGE only
            // changes how the kernel backs those pages, never their contents.
            let _ = unsafe {
                rustix::mm::madvise(lo as *mut _, hi - lo, rustix::mm::Advice::LinuxHugepage)
            };
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = v;
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
        KvCache::windowed(kv_dim, capacity, &vec![None; n_layers], capacity, dtype)
    }

    /// A cache whose sliding-window layers (`windows[l] = Some(W)`) keep a ring of
    /// `min(capacity, W + max_block − 1)` positions; calls may then add at most
    /// `max_block` positions at a time.
    pub fn windowed(
        kv_dim: usize,
        capacity: usize,
        windows: &[Option<usize>],
        max_block: usize,
        dtype: KvDtype,
    ) -> KvCache {
        let max_block = max_block.clamp(1, capacity.max(1));
        let mut rows = 0;
        let layers = windows
            .iter()
            .map(|w| {
                let slots = match w {
                    Some(w) => capacity.min(w + max_block - 1),
                    None => capacity,
                };
                rows += slots;
                (rows - slots, slots)
            })
            .collect();
        let n = rows * kv_dim;
        let storage = match dtype {
            KvDtype::F32 => Storage::F32 {
                keys: zeroed(n),
                values: zeroed(n),
            },
            KvDtype::F16 => Storage::F16 {
                keys: zeroed(n),
                values: zeroed(n),
            },
        };
        KvCache {
            kv_dim,
            capacity,
            max_block,
            layers,
            len: 0,
            storage,
        }
    }

    /// The most positions one call may add.
    pub fn max_block(&self) -> usize {
        self.max_block
    }

    /// Rows (positions) held for `layer` (a layer index past the last is a caller
    /// bug and panics, as do the other per-layer methods).
    pub fn slots(&self, layer: usize) -> usize {
        self.layers[layer].1
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

    /// Checks that `n` more positions fit, in one call.
    pub fn reserve(&self, n: usize) -> Result<()> {
        if n > self.max_block {
            return Err(Error::Input(format!(
                "{n} positions in one call exceed the KV cache's block of {}",
                self.max_block
            )));
        }
        if self.len + n > self.capacity {
            return Err(Error::Input(format!(
                "{} positions do not fit: the KV cache holds {} of {}",
                n, self.len, self.capacity
            )));
        }
        Ok(())
    }

    fn range(&self, layer: usize, pos: usize) -> std::ops::Range<usize> {
        let (first, slots) = self.layers[layer];
        let start = (first + pos % slots) * self.kv_dim;
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

    /// Keys and values of `layer`: [`KvCache::slots`] rows, position `p` in row
    /// `p % slots`.
    pub fn layer(&self, layer: usize) -> KvSlices<'_> {
        let (first, slots) = self.layers[layer];
        let r = first * self.kv_dim..(first + slots) * self.kv_dim;
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
        let KvSlices::F16(keys, _) = b.layer(1) else {
            panic!("f16 cache hands out f32 slices")
        };
        for (got, want) in keys[8..].iter().zip(k) {
            assert!((got.to_f32() - want).abs() <= want.abs() * 1e-3);
        }
        assert!(matches!(a.layer(1), KvSlices::F32(..)));
    }

    #[test]
    fn windowed_layers_keep_a_ring_and_blocks_are_bounded() {
        let mut c = KvCache::windowed(2, 100, &[None, Some(4)], 3, KvDtype::F32);
        assert_eq!((c.slots(0), c.slots(1)), (100, 6));
        assert_eq!(c.bytes(), (100 + 6) * 2 * 2 * 4);
        assert!(c.reserve(4).is_err());
        for pos in 0..8 {
            c.store(1, pos, &[pos as f32; 2], &[0.0; 2]);
        }
        let KvSlices::F32(keys, _) = c.layer(1) else {
            panic!("f32 cache hands out f16 slices")
        };
        // Positions 6 and 7 overwrote slots 0 and 1.
        assert_eq!(&keys[..4], &[6.0, 6.0, 7.0, 7.0]);
        assert_eq!(&keys[4..6], &[2.0, 2.0]);
    }
}
