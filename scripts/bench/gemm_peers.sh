#!/usr/bin/env bash
# Times rml's f32 GEMM/GEMV side by side with the `gemm` and `matrixmultiply` crates and
# NumPy (OpenBLAS), single-threaded, on the shapes of docs/kernels.md, in one sweep.
#
# The peers live only in a scratch crate under $SCRATCH (default /tmp/rml-gemm-peers),
# which depends on this checkout's rml-kernels by path: the library never depends on
# them. Each shape runs ROUNDS rounds; within a round every implementation is timed
# once, in turn, so machine noise hits all of them alike. Printed: median GFLOP/s (GEMV:
# GB/s of weights) and the min–max over rounds.
#
#   scripts/bench/gemm_peers.sh            # full sweep
#   ROUNDS=3 scripts/bench/gemm_peers.sh   # quicker
#   PYTHON=/path/to/python (with numpy); default: a scratch venv in $SCRATCH/venv.
#   RML_BENCH_CLOCK=cpu   # divide by thread CPU time instead of wall time
# OpenBLAS runs twice: inside the Rust sweep's rounds ("openblas": the library NumPy's
# wheel bundles, opened with dlopen and called through CBLAS, so it meets the same
# machine noise as the others and pays no Python overhead), and afterwards as NumPy
# itself in its own process ("numpy", skipped with ONLY). With THREADS=2 only the
# latter runs (two spinning thread pools in one process would fight for the cores).
# The GEMV part ends with the small-M decode shapes (2, 4 and 8 rows against 4096 × 4096
# f32 weights, as weight rows and as a [K, N] B) beside OpenBLAS's sgemm.
# Single-threaded sweeps first print the measured FMA peak ("peak fma ymm12": 12
# independent ymm FMA chains, no memory traffic; "peak fma zmm12" too where the CPU has
# AVX-512F) under the same clock, so "% of peak" uses this sweep's own figure rather
# than a nominal clock, and the single-thread read bandwidth ("peak read": a 64 MiB
# sum, the size of the GEMV weights) that the GEMV figures are held against.
# RML_ISA=avx2 (or scalar, avx512) forces rml's kernel family.
#   ONLY=512x512          # only the Rust side, only shapes containing this text
#   THREADS=2             # two threads: rml split in halves on rml-host's spinning
#                         # `team::Team` (what the graph executor and the LLM use;
#                         # columns for M ≤ N, else rows; one thread under 2^17
#                         # multiply-adds), the gemm crate on
#                         # Rayon(2), matrixmultiply with MATMUL_NUM_THREADS=2,
#                         # OpenBLAS with OPENBLAS_NUM_THREADS=2. Read the wall clock
#                         # for speed; the cpu clock then divides by *process* CPU
#                         # time (all threads): flop per CPU-second, an efficiency
#                         # (spinning counts against, a second thread left idle
#                         # does not).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
scratch="${SCRATCH:-/tmp/rml-gemm-peers}"
rounds="${ROUNDS:-7}"
threads="${THREADS:-1}"
mkdir -p "$scratch/src"

cat > "$scratch/Cargo.toml" <<TOML
[package]
name = "rml-gemm-peers"
version = "0.0.0"
edition = "2024"
publish = false

[workspace]

[dependencies]
rml-kernels = { path = "$root/rml-kernels" }
rml-host = { path = "$root/rml-host" }
half = "2"
gemm = { version = "0.18", default-features = false, features = ["std", "rayon"] }
matrixmultiply = { version = "0.3", features = ["threading"] }
libc = "0.2"

[profile.release]
opt-level = 3
codegen-units = 1
lto = "thin"
TOML

cat > "$scratch/src/main.rs" <<'RS'
use std::sync::Mutex;
use std::time::Instant;

use rml_host::team::Team;
use rml_kernels::gemm as rml;

/// `len` pseudo-random values in [-0.5, 0.5), in memory given huge pages (`huge`)
/// before it is first touched.
fn data(len: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).max(1);
    let mut v = vec![0.0f32; len];
    huge(&mut v);
    for x in &mut v {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        *x = (s >> 8) as f32 / (1u32 << 24) as f32 - 0.5;
    }
    v
}

/// Asks for transparent huge pages on `v`'s (untouched) memory, as NumPy does for its arrays of
/// 4 MiB and more (`madvise(MADV_HUGEPAGE)`): with THP in `madvise` mode, left out,
/// rml would stream its operands through 4 KiB pages while OpenBLAS gets 2 MiB ones.
fn huge<T>(v: &mut [T]) {
    let bytes = std::mem::size_of_val(v);
    if bytes < 4 << 20 {
        return;
    }
    let start = v.as_mut_ptr() as usize;
    let first = start.next_multiple_of(4096);
    let end = (start + bytes) & !4095;
    // SAFETY: the page-aligned range lies inside `v`'s allocation; MADV_HUGEPAGE
    // changes no contents.
    unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE) };
}

fn threads() -> usize {
    std::env::var("THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(1)
}

/// CPU time of this thread (one thread) or of the whole process (two threads), in
/// seconds.
fn cpu_now() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    let t = threads();
    let clock = if t > 1 { libc::CLOCK_PROCESS_CPUTIME_ID } else { libc::CLOCK_THREAD_CPUTIME_ID };
    // SAFETY: `ts` is a valid out-pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// rml's f32 GEMM of row-major operands on the team's threads: two halves of C's
/// columns when M ≤ N (the second half goes to `c2`), else of its rows; products under
/// 2^17 multiply-adds stay on one thread (a hand-over costs more than they take). Each
/// thread packs (or reads in place) its half of one operand and all of the other, so
/// the split repeats the smaller one: a column split repeats A (read in place, not
/// even copied, up to 256 KiB when K ≤ KC), a row split B.
#[allow(clippy::too_many_arguments)]
fn rml_gemm(team: &Team, m: usize, k: usize, n: usize, a: &[f32], b: &[f32],
            c: &mut [f32], c2: &mut [f32], s: &mut [Vec<f32>; 2]) {
    let one = |a: &[f32], m: usize, bv: rml::MatRef<'_, f32>, c: rml::MatMut<'_>, s: &mut [f32]| {
        let av = rml::MatRef::row_major(a, m, k).unwrap();
        rml::gemm(1.0, av, bv, 0.0, c, s).unwrap();
    };
    let bfull = rml::MatRef::row_major(b, k, n).unwrap();
    if team.threads() == 1 || m * k * n < 1 << 17 {
        return one(a, m, bfull, rml::MatMut::row_major(c, m, n).unwrap(), &mut s[0]);
    }
    let [s0, s1] = s;
    if m > n {
        let m0 = m / 2;
        let (c0, c1) = c.split_at_mut(m0 * n);
        let (a0, a1) = a.split_at(m0 * k);
        let halves = [Mutex::new((a0, m0, c0, s0)), Mutex::new((a1, m - m0, c1, s1))];
        team.run(2, &|i| {
            let (a, rows, c, s) = &mut *halves[i].lock().unwrap();
            one(a, *rows, bfull, rml::MatMut::row_major(c, *rows, n).unwrap(), s);
        });
    } else {
        let n0 = (n / 2).next_multiple_of(16);
        let halves = [Mutex::new((c, s0)), Mutex::new((c2, s1))];
        team.run(2, &|i| {
            let (c, s) = &mut *halves[i].lock().unwrap();
            if i == 0 {
                one(a, m, bfull.sub(0..k, 0..n0).unwrap(),
                    rml::MatMut::new(c, m, n0, n, 1).unwrap(), s);
            } else {
                one(a, m, bfull.sub(0..k, n0..n).unwrap(),
                    rml::MatMut::row_major(&mut c[..m * (n - n0)], m, n - n0).unwrap(), s);
            }
        });
    }
}

/// Seconds per call: repeats `f` until at least 20 ms have passed. With
/// `RML_BENCH_CLOCK=cpu` it counts this thread's CPU time instead of wall time, which
/// removes the time slices other processes take on a shared machine (cache and memory
/// bandwidth sharing remain).
fn time(mut f: impl FnMut()) -> f64 {
    let cpu = std::env::var("RML_BENCH_CLOCK").is_ok_and(|v| v == "cpu");
    let now = || if cpu { cpu_now() } else { 0.0 };
    f();
    let mut n = 0u32;
    let t = Instant::now();
    let c0 = now();
    while n == 0 || t.elapsed().as_secs_f64() < 0.02 {
        f();
        n += 1;
    }
    let dt = if cpu { now() - c0 } else { t.elapsed().as_secs_f64() };
    dt / n as f64
}

/// The single-core f32 FMA peak: 12 independent ymm accumulators (two FMA pipes ×
/// 4-cycle latency need 8 in flight), `vfmadd231ps` only, no memory traffic; returns
/// GFLOP/s (16 flop per FMA: 8 lanes × multiply + add).
#[cfg(target_arch = "x86_64")]
fn fma_peak() -> f64 {
    use std::arch::x86_64::*;
    #[target_feature(enable = "avx2,fma")]
    fn fmas(iters: u64) -> f32 {
        let mut acc = [_mm256_set1_ps(1.0); 12];
        let m = std::hint::black_box(_mm256_set1_ps(0.999_999));
        let a = std::hint::black_box(_mm256_set1_ps(1e-7));
        for _ in 0..std::hint::black_box(iters) {
            for x in &mut acc {
                *x = _mm256_fmadd_ps(*x, m, a);
            }
        }
        let mut out = [0.0f32; 8];
        // SAFETY: `out` holds 8 floats.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), acc.iter().fold(_mm256_setzero_ps(), |s, &x| _mm256_add_ps(s, x))) };
        out[0]
    }
    const ITERS: u64 = 100_000;
    // SAFETY: only called when the CPU reports AVX2 and FMA.
    let secs = time(|| { std::hint::black_box(unsafe { fmas(ITERS) }); });
    (ITERS * 12 * 16) as f64 / 1e9 / secs
}

/// The same with 12 zmm accumulators (32 flop per FMA), for CPUs with AVX-512F: the
/// ceiling of rml's `avx512` GEMM tile.
#[cfg(target_arch = "x86_64")]
fn fma_peak_zmm() -> f64 {
    use std::arch::x86_64::*;
    #[target_feature(enable = "avx512f")]
    fn fmas(iters: u64) -> f32 {
        let mut acc = [_mm512_set1_ps(1.0); 12];
        let m = std::hint::black_box(_mm512_set1_ps(0.999_999));
        let a = std::hint::black_box(_mm512_set1_ps(1e-7));
        for _ in 0..std::hint::black_box(iters) {
            for x in &mut acc {
                *x = _mm512_fmadd_ps(*x, m, a);
            }
        }
        _mm512_reduce_add_ps(acc.iter().fold(_mm512_setzero_ps(), |s, &x| _mm512_add_ps(s, x)))
    }
    const ITERS: u64 = 100_000;
    // SAFETY: only called when the CPU reports AVX-512F.
    let secs = time(|| { std::hint::black_box(unsafe { fmas(ITERS) }); });
    (ITERS * 12 * 32) as f64 / 1e9 / secs
}

/// Single-thread read bandwidth in GB/s: sums a 64 MiB array (as large as the GEMV
/// weights, twice the L3) with eight independent ymm accumulators, so only the
/// loads' memory traffic limits it, read as `S` sequential streams in lockstep (the
/// array's `S` equal parts, a cache line from each in turn). One stream is the plain
/// read; GEMV reads eight weight rows at once, and on the Zen 3 four or eight streams
/// move a third more than one (the hardware prefetchers keep more lines in flight).
#[cfg(target_arch = "x86_64")]
fn read_bandwidth<const S: usize>() -> f64 {
    use std::arch::x86_64::*;
    #[target_feature(enable = "avx2")]
    fn sum<const S: usize>(v: &[f32]) -> f32 {
        let mut acc = [_mm256_setzero_ps(); 8];
        let part = v.len() / S;
        let parts: [&[f32]; S] = std::array::from_fn(|s| &v[s * part..(s + 1) * part]);
        for j in (0..part - part % 64).step_by(64) {
            for p in &parts {
                for (i, x) in acc.iter_mut().enumerate() {
                    // SAFETY: `j + 64 ≤ part`, `i * 8 + 8 ≤ 64`.
                    *x = _mm256_add_ps(*x, unsafe { _mm256_loadu_ps(p.as_ptr().add(j + i * 8)) });
                }
            }
        }
        let mut out = [0.0f32; 8];
        // SAFETY: `out` holds 8 floats.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), acc.iter().fold(_mm256_setzero_ps(), |s, &x| _mm256_add_ps(s, x))) };
        out.iter().sum()
    }
    let v = data(16 << 20, 5);
    // SAFETY: only called when the CPU reports AVX2.
    let secs = time(|| { std::hint::black_box(unsafe { sum::<S>(&v) }); });
    (v.len() * 4) as f64 / 1e9 / secs
}

/// NumPy's bundled OpenBLAS, opened in this process (path in `RML_BENCH_OPENBLAS`,
/// found by the script) so it is timed inside the same rounds as the Rust crates.
/// scipy-openblas is ILP64: 64-bit integers, symbols prefixed `scipy_` and suffixed `64_`.
struct OpenBlas {
    sgemm: unsafe extern "C" fn(i32, i32, i32, i64, i64, i64, f32, *const f32, i64,
                                *const f32, i64, f32, *mut f32, i64),
    sgemv: unsafe extern "C" fn(i32, i32, i64, i64, f32, *const f32, i64, *const f32, i64,
                                f32, *mut f32, i64),
}

/// CBLAS enum values.
const CBLAS_ROW_MAJOR: i32 = 101;
const CBLAS_NO_TRANS: i32 = 111;
const CBLAS_TRANS: i32 = 112;

impl OpenBlas {
    fn open() -> Option<OpenBlas> {
        let path = std::ffi::CString::new(std::env::var("RML_BENCH_OPENBLAS").ok()?).ok()?;
        // SAFETY: dlopen/dlsym with NUL-terminated names; the symbols' C signatures are
        // CBLAS's with 64-bit integers (scipy-openblas64).
        unsafe {
            let lib = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
            if lib.is_null() {
                return None;
            }
            let sym = |name: &str| {
                let name = std::ffi::CString::new(name).unwrap();
                let p = libc::dlsym(lib, name.as_ptr());
                (!p.is_null()).then_some(p)
            };
            let sgemm = sym("scipy_cblas_sgemm64_")?;
            let sgemv = sym("scipy_cblas_sgemv64_")?;
            if let Some(set) = sym("scipy_openblas_set_num_threads64_") {
                let set: unsafe extern "C" fn(i32) = std::mem::transmute(set);
                set(threads() as i32);
            }
            Some(OpenBlas { sgemm: std::mem::transmute(sgemm), sgemv: std::mem::transmute(sgemv) })
        }
    }

    /// `C = A·B`, row-major dense operands; one row of A goes through `sgemv` (`Bᵀ·a`),
    /// as NumPy sends it, since OpenBLAS's `sgemm` does not special-case it.
    fn gemm(&self, m: usize, k: usize, n: usize, a: &[f32], b: &[f32], c: &mut [f32]) {
        assert!(a.len() >= m * k && b.len() >= k * n && c.len() >= m * n);
        let (m, k, n) = (m as i64, k as i64, n as i64);
        // SAFETY: the buffers hold the dense row-major shapes checked above.
        unsafe {
            if m == 1 {
                return (self.sgemv)(CBLAS_ROW_MAJOR, CBLAS_TRANS, k, n, 1.0, b.as_ptr(), n,
                    a.as_ptr(), 1, 0.0, c.as_mut_ptr(), 1);
            }
            (self.sgemm)(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, m, n, k, 1.0,
                a.as_ptr(), k, b.as_ptr(), n, 0.0, c.as_mut_ptr(), n)
        }
    }

    /// `y = W·x` with `W: [n, k]` row-major (NumPy's `x @ W.T`).
    fn gemv(&self, n: usize, k: usize, w: &[f32], x: &[f32], y: &mut [f32]) {
        assert!(w.len() >= n * k && x.len() >= k && y.len() >= n);
        // SAFETY: the buffers hold the shapes checked above.
        unsafe {
            (self.sgemv)(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, n as i64, k as i64, 1.0, w.as_ptr(),
                k as i64, x.as_ptr(), 1, 0.0, y.as_mut_ptr(), 1)
        }
    }
}

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    let rounds: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(7);
    let only = std::env::args().nth(2).unwrap_or_default();
    if let Ok(name) = std::env::var("RML_ISA") {
        let isa = rml_kernels::isa::Isa::parse(&name).expect("RML_ISA names a kernel family");
        rml_kernels::isa::force(isa).expect("RML_ISA: this CPU cannot run that family");
    }
    // Two threads: no OpenBLAS in this process. Its workers spin after each call, as
    // rml's team does, and on two cores each pool would steal the other's (OpenBLAS
    // ran at 2–3× its own speed and rml at a third of its one-thread speed).
    let blas = if threads() == 1 { OpenBlas::open() } else { None };
    if blas.is_none() && threads() == 1 {
        println!("# no in-process OpenBLAS (RML_BENCH_OPENBLAS unset or not scipy-openblas64)");
    }
    let shapes = [
        (64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024),
        (2048, 2048, 2048), (1, 4096, 4096), (8, 512, 2048), (64, 512, 2048), (64, 256, 256),
        (512, 2048, 2048),
    ];
    #[cfg(target_arch = "x86_64")]
    if threads() == 1 && "peak".contains(&only) && is_x86_feature_detected!("fma") {
        let (med, lo, hi) = stats((0..rounds).map(|_| fma_peak()).collect());
        println!("peak fma ymm12 {med:.1} {lo:.1} {hi:.1}");
        if is_x86_feature_detected!("avx512f") {
            let (med, lo, hi) = stats((0..rounds).map(|_| fma_peak_zmm()).collect());
            println!("peak fma zmm12 {med:.1} {lo:.1} {hi:.1}");
        }
        let (med, lo, hi) = stats((0..rounds).map(|_| read_bandwidth::<1>()).collect());
        println!("peak read 64MiB {med:.1} {lo:.1} {hi:.1}");
        let (med, lo, hi) = stats((0..rounds).map(|_| read_bandwidth::<4>()).collect());
        println!("peak read4 64MiB {med:.1} {lo:.1} {hi:.1}");
    }
    for (m, k, n) in shapes {
        if !format!("{m}x{k}x{n}").contains(&only) {
            continue;
        }
        let a = data(m * k, 1);
        let b = data(k * n, 2);
        let mut c = vec![0.0f32; m * n];
        let mut c2 = vec![0.0f32; m * n];
        let mut scratch = [
            vec![0.0f32; rml::gemm_scratch_len(m, n, k)],
            vec![0.0f32; rml::gemm_scratch_len(m, n, k)],
        ];
        let t = threads();
        let team = Team::new(t, rml_host::team::SPIN).unwrap();
        let par = if t > 1 { gemm::Parallelism::Rayon(t) } else { gemm::Parallelism::None };
        let flop = 2.0 * (m * k * n) as f64;
        let names = ["rml", "gemm", "matrixmultiply", "openblas"];
        let mut res: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
        for _ in 0..rounds {
            res[0].push(flop / 1e9 / time(|| {
                rml_gemm(&team, m, k, n, &a, &b, &mut c, &mut c2, &mut scratch)
            }));
            res[1].push(flop / 1e9 / time(|| unsafe {
                // SAFETY: dense row-major buffers of the stated shapes.
                gemm::gemm(m, n, k, c.as_mut_ptr(), 1, n as isize, false, a.as_ptr(), 1,
                    k as isize, b.as_ptr(), 1, n as isize, 0.0f32, 1.0f32, false, false, false,
                    par);
            }));
            res[2].push(flop / 1e9 / time(|| unsafe {
                // SAFETY: dense row-major buffers of the stated shapes.
                matrixmultiply::sgemm(m, k, n, 1.0, a.as_ptr(), k as isize, 1, b.as_ptr(),
                    n as isize, 1, 0.0, c.as_mut_ptr(), n as isize, 1);
            }));
            if let Some(blas) = &blas {
                res[3].push(flop / 1e9 / time(|| blas.gemm(m, k, n, &a, &b, &mut c)));
            }
        }
        for (name, r) in names.iter().zip(res).filter(|(_, r)| !r.is_empty()) {
            let (med, lo, hi) = stats(r);
            println!("gemm {m}x{k}x{n} {name} {med:.1} {lo:.1} {hi:.1}");
        }
    }
    if !"gemv".contains(&only) || threads() > 1 {
        return;
    }
    // Decode GEMV, weights [N, K] (f32 and f16), GB/s of weight bytes.
    let (k, n) = (4096, 4096);
    let x = data(k, 3);
    let w = data(n * k, 4);
    let mut w16 = vec![half::f16::ZERO; n * k];
    huge(&mut w16);
    w16.iter_mut().zip(&w).for_each(|(h, &v)| *h = half::f16::from_f32(v));
    let mut y = vec![0.0f32; n];
    let mut r32 = Vec::new();
    let mut r16 = Vec::new();
    let mut rkn = Vec::new();
    let mut rblas = Vec::new();
    for _ in 0..rounds {
        r32.push((n * k * 4) as f64 / 1e9 / time(|| {
            let xv = rml::MatRef::row_major(&x, 1, k).unwrap();
            let wv = rml::MatRef::row_major(&w, n, k).unwrap();
            let yv = rml::MatMut::row_major(&mut y, 1, n).unwrap();
            rml::gemv_nk(1.0, xv, wv, 0.0, yv, &rml::Epilogue::default()).unwrap();
        }));
        r16.push((n * k * 2) as f64 / 1e9 / time(|| {
            let xv = rml::MatRef::row_major(&x, 1, k).unwrap();
            let wv = rml::MatRef::row_major(&w16, n, k).unwrap();
            let yv = rml::MatMut::row_major(&mut y, 1, n).unwrap();
            rml::gemv_nk(1.0, xv, wv, 0.0, yv, &rml::Epilogue::default()).unwrap();
        }));
        rkn.push((n * k * 4) as f64 / 1e9 / time(|| {
            let xv = rml::MatRef::row_major(&x, 1, k).unwrap();
            let bv = rml::MatRef::row_major(&w, k, n).unwrap();
            let yv = rml::MatMut::row_major(&mut y, 1, n).unwrap();
            rml::gemv_kn(1.0, xv, bv, 0.0, yv, &rml::Epilogue::default()).unwrap();
        }));
        if let Some(blas) = &blas {
            rblas.push((n * k * 4) as f64 / 1e9 / time(|| blas.gemv(n, k, &w, &x, &mut y)));
        }
    }
    let runs = [("rml_f32_nk", r32), ("rml_f16_nk", r16), ("rml_f32_kn", rkn),
                ("openblas_f32_nk", rblas)];
    for (name, r) in runs.into_iter().filter(|(_, r)| !r.is_empty()) {
        let (med, lo, hi) = stats(r);
        println!("gemv 1x4096x4096 {name} {med:.1} {lo:.1} {hi:.1}");
    }
    // Small-M decode (batched or speculative tokens), GFLOP/s: weights as rows
    // `[N, K]` (`x·Wᵀ`; OpenBLAS `sgemm` with B transposed) and as `[K, N]` (`x·B`).
    let Some(blas) = &blas else { return };
    for m in [2, 4, 8] {
        let xm = data(m * k, 6);
        let mut ym = vec![0.0f32; m * n];
        let flop = 2.0 * (m * k * n) as f64;
        let mut res: [Vec<f64>; 4] = Default::default();
        let mut scratch = vec![0.0f32; rml::gemm_scratch_len(m, n, k)];
        for _ in 0..rounds {
            res[0].push(flop / 1e9 / time(|| {
                let xv = rml::MatRef::row_major(&xm, m, k).unwrap();
                let wv = rml::MatRef::row_major(&w, n, k).unwrap();
                let yv = rml::MatMut::row_major(&mut ym, m, n).unwrap();
                rml::gemv_nk(1.0, xv, wv, 0.0, yv, &rml::Epilogue::default()).unwrap();
            }));
            res[1].push(flop / 1e9 / time(|| unsafe {
                // SAFETY: dense row-major buffers of the stated shapes.
                (blas.sgemm)(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_TRANS, m as i64, n as i64,
                    k as i64, 1.0, xm.as_ptr(), k as i64, w.as_ptr(), k as i64, 0.0,
                    ym.as_mut_ptr(), n as i64)
            }));
            res[2].push(flop / 1e9 / time(|| {
                let xv = rml::MatRef::row_major(&xm, m, k).unwrap();
                let bv = rml::MatRef::row_major(&w, k, n).unwrap();
                let yv = rml::MatMut::row_major(&mut ym, m, n).unwrap();
                rml::gemm(1.0, xv, bv, 0.0, yv, &mut scratch).unwrap();
            }));
            res[3].push(flop / 1e9 / time(|| blas.gemm(m, k, n, &xm, &w, &mut ym)));
        }
        let names = ["rml_nk", "openblas_nk", "rml_kn", "openblas_kn"];
        for (name, r) in names.iter().zip(res) {
            let (med, lo, hi) = stats(r);
            println!("gemm {m}x{k}x{n} {name} {med:.1} {lo:.1} {hi:.1}");
        }
    }
}
RS

cat > "$scratch/numpy_peer.py" <<'PY'
import os, sys, time
import numpy as np

rounds = int(sys.argv[1])
shapes = [(64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024),
          (2048, 2048, 2048), (1, 4096, 4096), (8, 512, 2048), (64, 512, 2048), (64, 256, 256),
          (512, 2048, 2048)]

threads = int(os.environ.get("THREADS", "1"))
if os.environ.get("RML_BENCH_CLOCK") != "cpu":
    clock = time.perf_counter
elif threads == 1:
    clock = time.thread_time
else:  # process CPU time (all threads), as the Rust side
    clock = time.process_time

def timeit(f):
    f()
    n, t, c = 0, time.perf_counter(), clock()
    while n == 0 or time.perf_counter() - t < 0.02:
        f(); n += 1
    return (clock() - c) / n

rng = np.random.default_rng(0)
for m, k, n in shapes:
    a = rng.random((m, k), dtype=np.float32) - 0.5
    b = rng.random((k, n), dtype=np.float32) - 0.5
    c = np.empty((m, n), dtype=np.float32)
    r = sorted(2 * m * k * n / 1e9 / timeit(lambda: np.matmul(a, b, out=c)) for _ in range(rounds))
    print(f"gemm {m}x{k}x{n} numpy {r[len(r)//2]:.1f} {r[0]:.1f} {r[-1]:.1f}")
if threads > 1:
    sys.exit(0)
x = rng.random((1, 4096), dtype=np.float32)
for dt, name in [(np.float32, "numpy_f32_nk"), (np.float16, "numpy_f16_nk")]:
    w = (rng.random((4096, 4096), dtype=np.float32) - 0.5).astype(dt)
    if dt == np.float32:
        f = lambda: x @ w.T
    else:
        xx = x.astype(np.float16)
        f = lambda: xx @ w.T
    r = sorted(w.nbytes / 1e9 / timeit(f) for _ in range(rounds))
    print(f"gemv 1x4096x4096 {name} {r[len(r)//2]:.1f} {r[0]:.1f} {r[-1]:.1f}")
PY

python="${PYTHON:-}"
if [ -z "$python" ]; then
  if [ ! -x "$scratch/venv/bin/python" ]; then
    python3 -m venv "$scratch/venv" && "$scratch/venv/bin/pip" install -q numpy
  fi
  python="$scratch/venv/bin/python"
fi

(cd "$scratch" && cargo build --release -q)
openblas="$("$python" -c 'import glob, os, numpy
d = os.path.join(os.path.dirname(numpy.__file__), os.pardir, "numpy.libs")
print(next(iter(sorted(glob.glob(os.path.join(d, "libscipy_openblas64_*.so")))), ""))')"
echo "# $(date -u +%FT%TZ) rounds=$rounds clock=${RML_BENCH_CLOCK:-wall}, threads=$threads; columns: kind shape impl median min max"
echo "# (GFLOP/s for gemm, GB/s of weight bytes for gemv)"
THREADS="$threads" MATMUL_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads" \
  RML_BENCH_OPENBLAS="$openblas" "$scratch/target/release/rml-gemm-peers" "$rounds" "${ONLY:-}"
[ -n "${ONLY:-}" ] && exit 0
THREADS="$threads" OPENBLAS_NUM_THREADS="$threads" OMP_NUM_THREADS="$threads" \
  "$python" "$scratch/numpy_peer.py" "$rounds"
