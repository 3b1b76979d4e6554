//! Process CPU time for `rml-host bench`: `CLOCK_PROCESS_CPUTIME_ID` (all threads,
//! nanosecond resolution, brought up to date at the read — unlike
//! `/proc/self/task/*/schedstat`, which lags for a thread that is still running).

/// Nanoseconds all threads of this process have spent on a CPU, or `None` where the
/// platform has no process CPU clock here.
#[cfg(unix)]
pub fn process_cpu_ns() -> Option<u64> {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    let secs = u64::try_from(t.tv_sec).ok()?;
    let nanos = u64::try_from(t.tv_nsec).ok()?;
    secs.checked_mul(1_000_000_000)?.checked_add(nanos)
}

/// Nanoseconds all threads of this process have spent on a CPU, or `None` where the
/// platform has no process CPU clock here.
#[cfg(not(unix))]
pub fn process_cpu_ns() -> Option<u64> {
    None
}
