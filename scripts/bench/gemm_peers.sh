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
#   ONLY=512x512          # only the Rust side, only shapes containing this text
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
scratch="${SCRATCH:-/tmp/rml-gemm-peers}"
rounds="${ROUNDS:-7}"
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
half = "2"
gemm = { version = "0.18", default-features = false, features = ["std"] }
matrixmultiply = "0.3"
libc = "0.2"

[profile.release]
opt-level = 3
codegen-units = 1
lto = "thin"
TOML

cat > "$scratch/src/main.rs" <<'RS'
use std::time::Instant;

use rml_kernels::gemm as rml;

fn data(len: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761).max(1);
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        })
        .collect()
}

/// CPU time of this thread, in seconds.
fn cpu_now() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
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

fn stats(mut v: Vec<f64>) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    let rounds: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(7);
    let only = std::env::args().nth(2).unwrap_or_default();
    let shapes = [
        (64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024),
        (2048, 2048, 2048), (1, 4096, 4096), (8, 512, 2048), (64, 512, 2048), (64, 256, 256),
        (512, 2048, 2048),
    ];
    for (m, k, n) in shapes {
        if !format!("{m}x{k}x{n}").contains(&only) {
            continue;
        }
        let a = data(m * k, 1);
        let b = data(k * n, 2);
        let mut c = vec![0.0f32; m * n];
        let mut scratch = vec![0.0f32; rml::gemm_scratch_len(m, n, k)];
        let flop = 2.0 * (m * k * n) as f64;
        let names = ["rml", "gemm", "matrixmultiply"];
        let mut res: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
        for _ in 0..rounds {
            res[0].push(flop / 1e9 / time(|| {
                let av = rml::MatRef::row_major(&a, m, k).unwrap();
                let bv = rml::MatRef::row_major(&b, k, n).unwrap();
                let cv = rml::MatMut::row_major(&mut c, m, n).unwrap();
                rml::gemm(1.0, av, bv, 0.0, cv, &mut scratch).unwrap();
            }));
            res[1].push(flop / 1e9 / time(|| unsafe {
                // SAFETY: dense row-major buffers of the stated shapes.
                gemm::gemm(m, n, k, c.as_mut_ptr(), 1, n as isize, false, a.as_ptr(), 1,
                    k as isize, b.as_ptr(), 1, n as isize, 0.0f32, 1.0f32, false, false, false,
                    gemm::Parallelism::None);
            }));
            res[2].push(flop / 1e9 / time(|| unsafe {
                // SAFETY: dense row-major buffers of the stated shapes.
                matrixmultiply::sgemm(m, k, n, 1.0, a.as_ptr(), k as isize, 1, b.as_ptr(),
                    n as isize, 1, 0.0, c.as_mut_ptr(), n as isize, 1);
            }));
        }
        for (name, r) in names.iter().zip(res) {
            let (med, lo, hi) = stats(r);
            println!("gemm {m}x{k}x{n} {name} {med:.1} {lo:.1} {hi:.1}");
        }
    }
    if !"gemv".contains(&only) {
        return;
    }
    // Decode GEMV, weights [N, K] (f32 and f16), GB/s of weight bytes.
    let (k, n) = (4096, 4096);
    let x = data(k, 3);
    let w = data(n * k, 4);
    let w16: Vec<half::f16> = w.iter().map(|&v| half::f16::from_f32(v)).collect();
    let mut y = vec![0.0f32; n];
    let mut r32 = Vec::new();
    let mut r16 = Vec::new();
    let mut rkn = Vec::new();
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
    }
    for (name, r) in [("rml_f32_nk", r32), ("rml_f16_nk", r16), ("rml_f32_kn", rkn)] {
        let (med, lo, hi) = stats(r);
        println!("gemv 1x4096x4096 {name} {med:.1} {lo:.1} {hi:.1}");
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

clock = time.thread_time if os.environ.get("RML_BENCH_CLOCK") == "cpu" else time.perf_counter

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
echo "# $(date -u +%FT%TZ) rounds=$rounds clock=${RML_BENCH_CLOCK:-wall}, single thread; columns: kind shape impl median min max"
echo "# (GFLOP/s for gemm, GB/s of weight bytes for gemv)"
"$scratch/target/release/rml-gemm-peers" "$rounds" "${ONLY:-}"
[ -n "${ONLY:-}" ] && exit 0
OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$python" "$scratch/numpy_peer.py" "$rounds"
