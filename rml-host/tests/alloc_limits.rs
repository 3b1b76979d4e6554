//! No allocation is sized by an untrusted number before it has been checked against
//! the file's size: small files that claim huge lengths, counts or shapes fail fast
//! and allocate little. A counting global allocator measures every allocation made
//! while each file is opened and read (this file holds a single test so that no other
//! test allocates concurrently).

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rml_host::formats::npy::{self, Npz};
use rml_host::formats::safetensors::SafeTensors;

struct Counting;

static TOTAL: AtomicUsize = AtomicUsize::new(0);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the counters
// are plain atomics and allocate nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        TOTAL.fetch_add(layout.size(), Ordering::Relaxed);
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        TOTAL.fetch_add(new_size, Ordering::Relaxed);
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Pads a file image with spaces to 64 bytes (never truncates).
fn pad64(mut v: Vec<u8>) -> Vec<u8> {
    if v.len() < 64 {
        v.resize(64, b' ');
    }
    v
}

fn safetensors_claiming(n: u64, header: &str) -> Vec<u8> {
    let mut v = n.to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    pad64(v)
}

fn safetensors_exact(header: &str) -> Vec<u8> {
    safetensors_claiming(header.len() as u64, header)
}

fn npy_v2_exact(header: &str) -> Vec<u8> {
    npy_v2(header.len() as u32, header)
}

fn npy_v2(header_len: u32, header: &str) -> Vec<u8> {
    let mut v = b"\x93NUMPY\x02\x00".to_vec();
    v.extend_from_slice(&header_len.to_le_bytes());
    v.extend_from_slice(header.as_bytes());
    v
}

fn zip_claiming(count: u16, cd_size: u32) -> Vec<u8> {
    let mut v = b"PK\x03\x04".to_vec();
    v.resize(42, 0);
    v.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    for x in [0u16, 0, count, count] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.extend_from_slice(&cd_size.to_le_bytes());
    v.extend_from_slice(&0u32.to_le_bytes());
    v.extend_from_slice(&0u16.to_le_bytes());
    v
}

fn read(path: &Path) -> bool {
    let name = path.to_string_lossy();
    if name.ends_with(".safetensors") {
        SafeTensors::open(path)
            .and_then(|st| st.load_all().map(drop))
            .is_err()
    } else if name.ends_with(".npz") {
        Npz::open(path)
            .and_then(|z| z.names().iter().try_for_each(|n| z.get(n).map(drop)))
            .is_err()
    } else {
        npy::open(path).is_err()
    }
}

#[test]
fn small_files_claiming_huge_sizes_fail_fast_and_allocate_little() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "hdr_99999999.safetensors",
            safetensors_claiming(99_999_999, "{}"),
        ),
        (
            "hdr_u64max.safetensors",
            safetensors_claiming(u64::MAX, "{}"),
        ),
        (
            "shape_2e80.safetensors",
            safetensors_exact(
                r#"{"w":{"dtype":"F32","shape":[1099511627776,1099511627776],"data_offsets":[0,0]}}"#,
            ),
        ),
        (
            "offsets_huge.safetensors",
            safetensors_exact(
                r#"{"w":{"dtype":"U8","shape":[4],"data_offsets":[0,18446744073709551615]}}"#,
            ),
        ),
        ("hdr_4gib.npy", pad64(npy_v2(u32::MAX, "{"))),
        (
            "shape_huge.npy",
            npy_v2_exact(
                "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
            ),
        ),
        ("count_65535.npz", zip_claiming(0xfffe, 0)),
        ("cd_4gib.npz", zip_claiming(1, u32::MAX - 1)),
    ];
    let dir = std::env::temp_dir().join(format!("rml-alloc-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in &cases {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let mut fastest = Duration::MAX;
        for _ in 0..3 {
            let (total0, start) = (TOTAL.load(Ordering::Relaxed), Instant::now());
            LARGEST.store(0, Ordering::Relaxed);
            assert!(read(&path), "{name}: accepted");
            let elapsed = start.elapsed();
            let total = TOTAL.load(Ordering::Relaxed) - total0;
            let largest = LARGEST.load(Ordering::Relaxed);
            assert!(total < 1 << 20, "{name}: allocated {total} bytes in all");
            assert!(
                largest < 1 << 20,
                "{name}: one allocation of {largest} bytes"
            );
            fastest = fastest.min(elapsed);
        }
        eprintln!("{name}: {} bytes, rejected in {fastest:?}", bytes.len());
        // The best of three runs, so that a busy machine's scheduling hiccup does not
        // fail the test; the work itself takes microseconds.
        assert!(
            fastest < Duration::from_millis(10),
            "{name}: took {fastest:?}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
