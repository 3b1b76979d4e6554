//! `RML_NUM_THREADS` sets the global pool's thread count. The global pool is created
//! once per process, so the test re-runs itself as a child process with the variable
//! set (changing the environment of a running multi-threaded process is unsound).

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

use rml_host::ThreadPool;
use rml_host::pool::{chunk_range, split_count};

const CHILD: &str = "RML_POOL_ENV_EXPECT";

#[test]
fn global_pool_follows_rml_num_threads() {
    if let Ok(expected) = std::env::var(CHILD) {
        let pool = ThreadPool::global();
        assert_eq!(pool.threads().to_string(), expected);
        // One chunk per thread, summed on the team, against the closed form.
        let chunks = split_count(1000, 1, pool.threads());
        assert_eq!(chunks, pool.threads());
        let sum = AtomicUsize::new(0);
        pool.run_team(chunks, &|i| {
            sum.fetch_add(chunk_range(1000, chunks, i).sum(), Ordering::Relaxed);
        });
        assert_eq!(sum.into_inner(), 999 * 1000 / 2);
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    for (value, expected) in [
        ("1", "1".to_string()),
        ("3", "3".to_string()),
        ("7", "7".to_string()),
        // Invalid values fall back to the CPU count (with a warning on stderr).
        ("zero", cpus.to_string()),
        ("0", cpus.to_string()),
    ] {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "global_pool_follows_rml_num_threads",
                "--nocapture",
            ])
            .env("RML_NUM_THREADS", value)
            .env(CHILD, &expected)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "RML_NUM_THREADS={value}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}
