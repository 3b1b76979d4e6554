//! Process CPU time for `rml-host bench`, read from Linux's per-thread scheduler
//! statistics (`/proc/self/task/*/schedstat`, nanoseconds on the CPU), so worker
//! threads count and the resolution is not the 10 ms of `/proc/self/stat`.

/// Nanoseconds every live thread of this process has spent on a CPU, or `None`
/// where `/proc` has no scheduler statistics (not Linux, or a kernel without them).
pub fn process_cpu_ns() -> Option<u64> {
    let mut total = 0u64;
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let path = entry.ok()?.path().join("schedstat");
        let text = std::fs::read_to_string(path).ok()?;
        total += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}
