//! A persistent team of worker threads for many short parallel phases (an LLM decode
//! step hands out ~200 projections per token).
//!
//! [`Team::run`] calls `f(i)` for `i` in `0..tasks`, the caller and the workers each
//! claiming the next index until none is left, and returns when all are done. Which
//! thread runs an index varies, so `f(i)` must depend on `i` only (then the result
//! does not depend on timing). Between runs the workers spin for a short while
//! ([`SPIN`], or [`SPIN_ENV`]), then park, so back-to-back phases are handed over
//! without a system call, while an idle team costs no CPU. A run allocates nothing.
//!
//! This module holds the crate's second `unsafe` code: a worker calls the caller's
//! closure through a lifetime-erased pointer. It is sound because a worker calls it
//! only for an index it claimed while the run was current, and [`Team::run`] does not
//! return (nor unwind) before every claimed index is done.
#![allow(unsafe_code)]

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, TryLockError};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

/// How long a waiting thread spins before it parks, unless [`SPIN_ENV`] says. A
/// park costs its wake-up (about 33 µs on this project's machine) and a cold
/// restart after it (the first ~100 µs of work ran up to 1.6× slower), so spinning
/// up to 200 µs spends at most about twice what parking would (the ski-rental
/// bound), while a 50 µs spin left 2-thread runs spaced ~1 ms apart slower than
/// 1-thread ones (docs/graph-executor.md, session 9).
pub const SPIN: Duration = Duration::from_micros(200);

/// The environment variable that sets the spin time in microseconds (0: park at
/// once, the better choice when the machine has more runnable threads than cores).
pub const SPIN_ENV: &str = "RML_SPIN_US";

/// The spin time: [`SPIN_ENV`] when it holds a number, else [`SPIN`].
pub fn spin_from_env() -> Duration {
    std::env::var(SPIN_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(SPIN, Duration::from_micros)
}

/// The closure of one run, its lifetime erased (see the module docs).
#[derive(Clone, Copy)]
struct Task(*const (dyn Fn(usize) + Sync));

// SAFETY: the pointee is `Sync`, and `Team::run` keeps it alive until every worker
// that copied this pointer is done with it.
unsafe impl Send for Task {}

/// One run as the workers see it.
#[derive(Clone)]
struct Job {
    /// The run's number (wrapping); the high half of [`Shared::claims`].
    epoch: u32,
    tasks: usize,
    task: Task,
    caller: Thread,
}

struct Shared {
    spin: Duration,
    /// The current run's epoch (high 32 bits) and next unclaimed task (low 32).
    claims: AtomicU64,
    job: Mutex<Option<Job>>,
    /// Tasks of the current run finished.
    done: AtomicUsize,
    panicked: AtomicBool,
    stop: AtomicBool,
}

/// A fixed set of `threads − 1` workers plus the calling thread (see the module docs).
pub struct Team {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Held for a whole run: a second caller (another thread, or a task of this
    /// run) finds it taken and runs its tasks itself.
    running: Mutex<()>,
}

impl std::fmt::Debug for Team {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Team")
            .field("threads", &self.threads())
            .finish()
    }
}

impl Team {
    /// A team of `threads` threads (the caller counts as one) whose waiting
    /// threads spin for `spin` before they park; `None` when a worker thread cannot
    /// be started.
    pub fn new(threads: usize, spin: Duration) -> Option<Team> {
        let shared = Arc::new(Shared {
            spin,
            claims: AtomicU64::new(0),
            job: Mutex::new(None),
            done: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            stop: AtomicBool::new(false),
        });
        let mut team = Team {
            shared,
            workers: Vec::new(),
            running: Mutex::new(()),
        };
        for index in 1..threads.max(1) {
            let shared = Arc::clone(&team.shared);
            let handle = std::thread::Builder::new()
                .name(format!("rml-team-{index}"))
                .spawn(move || worker(&shared))
                .ok()?;
            team.workers.push(handle);
        }
        Some(team)
    }

    /// Number of threads, the caller included.
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// Calls `f(i)` for `i` in `0..tasks` (any number: with more tasks than threads
    /// each thread claims several) and returns when all calls have returned. Each thread, the
    /// caller included, claims the next unclaimed index until none is left, so a
    /// worker that is not running (a busy machine) leaves its share to the others.
    /// When the team is already running (a call from another thread or from inside
    /// `f`), the calls run one after another on the calling thread. A panic in any
    /// call is resumed here once all calls are done.
    pub fn run(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        let guard = match self.running.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                (0..tasks).for_each(f);
                return;
            }
        };
        if tasks <= 1 {
            (0..tasks).for_each(f);
            return;
        }
        let s = &*self.shared;
        s.panicked.store(false, Ordering::Relaxed);
        s.done.store(0, Ordering::Relaxed);
        // SAFETY: only the lifetime is erased; the wait below outlives every use.
        let task = Task(unsafe {
            std::mem::transmute::<&(dyn Fn(usize) + Sync), &'static (dyn Fn(usize) + Sync)>(f)
        });
        let epoch = ((s.claims.load(Ordering::Relaxed) >> 32) as u32).wrapping_add(1);
        let job = Job {
            epoch,
            tasks,
            task,
            caller: std::thread::current(),
        };
        *lock(&s.job) = Some(job.clone());
        s.claims.store(u64::from(epoch) << 32, Ordering::Release);
        for w in &self.workers[..tasks.min(self.threads()) - 1] {
            w.thread().unpark();
        }
        let mine = work(s, &job, f);
        wait_until(s.spin, || s.done.load(Ordering::Acquire) == tasks, || false);
        drop(guard);
        if let Some(payload) = mine {
            resume_unwind(payload);
        }
        if s.panicked.load(Ordering::Relaxed) {
            panic!("a team worker panicked");
        }
    }
}

/// Claims index after index of `job` and calls `f` on each; returns the first panic.
fn work(
    s: &Shared,
    job: &Job,
    f: &(dyn Fn(usize) + Sync),
) -> Option<Box<dyn std::any::Any + Send>> {
    let mut first = None;
    while let Some(i) = claim(s, job.epoch, job.tasks) {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| f(i))) {
            s.panicked.store(true, Ordering::Relaxed);
            first.get_or_insert(payload);
        }
        if s.done.fetch_add(1, Ordering::AcqRel) + 1 == job.tasks {
            job.caller.unpark();
        }
    }
    first
}

/// The next unclaimed index of run `epoch`, if that run is current and has one left.
fn claim(s: &Shared, epoch: u32, tasks: usize) -> Option<usize> {
    let mut v = s.claims.load(Ordering::Acquire);
    loop {
        let next = (v & u64::from(u32::MAX)) as usize;
        if (v >> 32) as u32 != epoch || next >= tasks {
            return None;
        }
        match s
            .claims
            .compare_exchange_weak(v, v + 1, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => return Some(next),
            Err(now) => v = now,
        }
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        for w in self.workers.drain(..) {
            w.thread().unpark();
            let _ = w.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Spins for `spin`, then parks until `done()` (or `stop()`); the thread that makes
/// `done()` true unparks this one afterwards.
fn wait_until(spin: Duration, done: impl Fn() -> bool, stop: impl Fn() -> bool) {
    let start = Instant::now();
    let mut spins = 0u32;
    while !done() && !stop() {
        spins = spins.wrapping_add(1);
        if !spins.is_multiple_of(64) || start.elapsed() < spin {
            std::hint::spin_loop();
        } else {
            std::thread::park_timeout(Duration::from_millis(100));
        }
    }
}

fn worker(s: &Shared) {
    let mut seen = 0u32;
    loop {
        wait_until(
            s.spin,
            || (s.claims.load(Ordering::Acquire) >> 32) as u32 != seen,
            || s.stop.load(Ordering::Acquire),
        );
        if s.stop.load(Ordering::Acquire) {
            return;
        }
        let Some(job) = lock(&s.job).clone() else {
            continue;
        };
        seen = job.epoch;
        // SAFETY: `claim` hands out an index only while the run is current, and the
        // caller waits for every claimed index to be done before its closure goes.
        let f = unsafe { &*job.task.0 };
        // A worker's panic is reported through `panicked`; the payload is dropped.
        drop(work(s, &job, f));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_task_runs_once() {
        let team = Team::new(3, SPIN).unwrap();
        for _ in 0..1000 {
            let hits: [AtomicUsize; 3] = Default::default();
            team.run(3, &|i| {
                hits[i].fetch_add(1, Ordering::Relaxed);
            });
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
        }
    }

    #[test]
    fn workers_take_tasks_when_the_caller_is_busy() {
        let team = Team::new(2, SPIN).unwrap();
        let caller = std::thread::current().id();
        let off_caller = AtomicUsize::new(0);
        team.run(2, &|_| {
            if std::thread::current().id() == caller {
                // Wait (10 s at most, against a hang) for the worker to take the other.
                let start = Instant::now();
                while off_caller.load(Ordering::Relaxed) == 0
                    && start.elapsed() < Duration::from_secs(10)
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
            } else {
                off_caller.fetch_add(1, Ordering::Relaxed);
            }
        });
        assert_eq!(off_caller.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn fewer_tasks_and_nested_runs_work() {
        let team = Team::new(4, SPIN).unwrap();
        let sum = AtomicUsize::new(0);
        team.run(2, &|i| {
            sum.fetch_add(i + 1, Ordering::Relaxed);
            // A nested run finds the team busy and runs on this thread.
            team.run(2, &|j| {
                sum.fetch_add(10 * (j + 1), Ordering::Relaxed);
            });
        });
        assert_eq!(sum.load(Ordering::Relaxed), 3 + 2 * 30);
        let sum = AtomicUsize::new(0);
        let runs = AtomicUsize::new(0);
        team.run(9, &|i| {
            sum.fetch_add(i, Ordering::Relaxed);
            runs.fetch_add(1, Ordering::Relaxed);
        });
        // More tasks than threads: every index runs exactly once.
        assert_eq!(sum.load(Ordering::Relaxed), 36);
        assert_eq!(runs.load(Ordering::Relaxed), 9);
    }

    #[test]
    fn runs_after_the_workers_parked_still_complete() {
        let team = Team::new(2, SPIN).unwrap();
        for _ in 0..3 {
            std::thread::sleep(SPIN + Duration::from_millis(2));
            let n = AtomicUsize::new(0);
            team.run(2, &|_| {
                n.fetch_add(1, Ordering::Relaxed);
            });
            assert_eq!(n.load(Ordering::Relaxed), 2);
        }
    }

    #[test]
    fn a_worker_panic_reaches_the_caller_and_the_team_survives() {
        let team = Team::new(2, SPIN).unwrap();
        let result = catch_unwind(AssertUnwindSafe(|| {
            team.run(2, &|i| assert!(i != 1, "boom"));
        }));
        assert!(result.is_err());
        let n = AtomicUsize::new(0);
        team.run(2, &|_| {
            n.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(n.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn concurrent_callers_share_one_team() {
        let team = Arc::new(Team::new(2, SPIN).unwrap());
        let total = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (team, total) = (Arc::clone(&team), Arc::clone(&total));
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        team.run(2, &|_| {
                            total.fetch_add(1, Ordering::Relaxed);
                        });
                    }
                })
            })
            .collect();
        handles.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(total.load(Ordering::Relaxed), 4 * 200 * 2);
    }
}
