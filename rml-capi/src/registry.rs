//! Handles: the opaque 64-bit ids C holds for loaded graphs and models.
//!
//! A [`Registry`] maps live ids to their objects. Ids are never reused (a counter
//! shared by every registry) and carry a per-kind tag in their top 16 bits, so a
//! freed handle, a forged number (0, 1, an address) and a handle of the other kind
//! all miss the map and are reported as [`RmlStatus::InvalidHandle`], with a
//! message telling which of these it looks like. Objects are held in [`Arc`]s: a
//! call clones the `Arc` and releases the map's lock, so freeing a handle while
//! another call (another thread, or a callback) still uses it only drops the map's
//! reference; the object lives until that call returns.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::status::{Outcome, RmlStatus, fail};

/// The next id number, shared by every registry so no two handles are ever equal.
static NEXT: AtomicU64 = AtomicU64::new(1);

/// Bits of an id below the kind tag.
const TAG_SHIFT: u32 = 48;

/// Live objects of one kind, by handle.
pub(crate) struct Registry<T> {
    /// The kind's name in messages (`"graph"`, `"LLM"`).
    kind: &'static str,
    /// The tag in the top 16 bits of this kind's ids.
    tag: u16,
    entries: Mutex<BTreeMap<u64, Arc<T>>>,
}

impl<T> Registry<T> {
    /// An empty registry of `kind` objects whose ids carry `tag`.
    pub(crate) const fn new(kind: &'static str, tag: u16) -> Self {
        Registry {
            kind,
            tag,
            entries: Mutex::new(BTreeMap::new()),
        }
    }

    /// The map; the lock is never held across a call into rml, so it is never
    /// poisoned by one, and a poisoned map is still consistent.
    fn map(&self) -> MutexGuard<'_, BTreeMap<u64, Arc<T>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers `value` and returns its new handle.
    pub(crate) fn insert(&self, value: T) -> u64 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let id = (u64::from(self.tag) << TAG_SHIFT) | (n & ((1 << TAG_SHIFT) - 1));
        self.map().insert(id, Arc::new(value));
        id
    }

    /// The object behind `id`.
    pub(crate) fn get(&self, id: u64) -> Outcome<Arc<T>> {
        self.map().get(&id).cloned().ok_or_else(|| self.miss(id))
    }

    /// Forgets `id`; the object is dropped once no running call uses it.
    pub(crate) fn remove(&self, id: u64) -> Outcome {
        self.map()
            .remove(&id)
            .map(drop)
            .ok_or_else(|| self.miss(id))
    }

    /// The error for an id not in the map, saying what it looks like.
    fn miss(&self, id: u64) -> crate::status::Failure {
        let why = if id == 0 {
            "the null handle".to_string()
        } else if id >> TAG_SHIFT == u64::from(self.tag) {
            "freed (or never issued)".to_string()
        } else if (id >> TAG_SHIFT) as u16 == GRAPH_TAG || (id >> TAG_SHIFT) as u16 == LLM_TAG {
            "a handle of another kind".to_string()
        } else {
            "not a handle rml issued".to_string()
        };
        fail(
            RmlStatus::InvalidHandle,
            format!("{} handle {id:#x} is {why}", self.kind),
        )
    }
}

/// The tag of graph handles (`"RG"`).
pub(crate) const GRAPH_TAG: u16 = 0x5247;
/// The tag of LLM handles (`"RL"`).
pub(crate) const LLM_TAG: u16 = 0x524C;
