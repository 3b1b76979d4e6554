//! Nothing is sized by an untrusted number before it is checked: tiny files that
//! claim huge strings, arrays or tensor tables fail fast and allocate almost nothing.
//! A counting global allocator measures the peak bytes live on the parsing thread.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

use rml_host::formats::gguf::{Gguf, GgufError};

struct Counting;

thread_local! {
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn add(n: usize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get() + n;
        live.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

fn sub(n: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(n)));
}

// SAFETY: every method forwards to `System` unchanged; the counters are plain
// thread-local cells with const initialisers, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        add(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        sub(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        add(new_size);
        sub(layout.size());
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Peak bytes allocated on this thread while `f` runs, above what was live before.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    (out, PEAK.with(Cell::get) - base)
}

fn u64le(x: u64) -> [u8; 8] {
    x.to_le_bytes()
}

/// A 64-byte file: header with the given counts, then `body`, zero-padded.
fn file64(tensors: u64, kvs: u64, body: &[u8]) -> Vec<u8> {
    let mut v = b"GGUF".to_vec();
    v.extend(3u32.to_le_bytes());
    v.extend(u64le(tensors));
    v.extend(u64le(kvs));
    v.extend_from_slice(body);
    v.resize(64, 0);
    v
}

fn kv_prefix(key: &str, ty: u32) -> Vec<u8> {
    let mut v = u64le(key.len() as u64).to_vec();
    v.extend_from_slice(key.as_bytes());
    v.extend(ty.to_le_bytes());
    v
}

const LIMIT_BYTES: usize = 1 << 20;
const LIMIT_TIME: Duration = Duration::from_millis(10);

fn check(name: &str, bytes: &[u8], expect: fn(&GgufError) -> bool) {
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let t0 = Instant::now();
        let (r, peak) = peak_during(|| Gguf::parse(bytes).map(|_| ()));
        best = best.min(t0.elapsed());
        let err = r.expect_err(name);
        assert!(expect(&err), "{name}: {err:?}");
        assert!(peak < LIMIT_BYTES, "{name}: parsing allocated {peak} bytes");
    }
    assert!(best < LIMIT_TIME, "{name}: parsing took {best:?}");
}

#[test]
fn counting_allocator_counts() {
    let (v, peak) = peak_during(|| vec![0u8; 2 << 20]);
    assert!(peak >= 2 << 20);
    drop(v);
}

#[test]
fn huge_claims_in_tiny_files_fail_fast_and_small() {
    // A 2^40-byte string value.
    let mut body = kv_prefix("general.name", 8);
    body.extend(u64le(1 << 40));
    check(
        "huge string",
        &file64(0, 1, &body),
        |e| matches!(e, GgufError::StringTooLong { len, .. } if *len == 1 << 40),
    );
    // A 2^40-byte key.
    check("huge key", &file64(0, 1, &u64le(1 << 40)), |e| {
        matches!(e, GgufError::StringTooLong { .. })
    });
    // 2^60 array elements, of fixed size, of strings and of arrays.
    for elem in [4u32, 8, 9] {
        let mut body = kv_prefix("t.a", 9);
        body.extend(elem.to_le_bytes());
        body.extend(u64le(1 << 60));
        check(
            "huge array",
            &file64(0, 1, &body),
            |e| matches!(e, GgufError::CountTooLarge { count, .. } if *count == 1 << 60),
        );
    }
    // 2^60 tensors and 2^60 keys.
    check(
        "huge tensor count",
        &file64(1 << 60, 0, &[]),
        |e| matches!(e, GgufError::CountTooLarge { what, .. } if what == "tensor_count"),
    );
    check(
        "huge kv count",
        &file64(0, 1 << 60, &[]),
        |e| matches!(e, GgufError::CountTooLarge { what, .. } if what == "metadata_kv_count"),
    );
}

#[test]
fn whole_corpus_parses_in_bounded_memory() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/malformed/gguf");
    for entry in std::fs::read_dir(dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let (_, peak) = peak_during(|| Gguf::parse(&bytes[..]).map(|_| ()));
        assert!(peak < LIMIT_BYTES, "{peak}");
    }
}
