//! Quantized GEMV (decode) and small-M GEMM (prompt) throughput.
//!
//! GEMV: 4096×4096 and 5632×2048 weight matrices of every weight type, 1 and 2
//! threads (2 threads split the row range with `std::thread::scope`). Throughput is
//! in bytes of weights read per second; several copies of the matrix (≥ 96 MB in all)
//! are cycled so the weights stream from DRAM, not the 32 MiB L3. Compare with the
//! ~21 GB/s single-core read bandwidth in /work/shared/targets.md (criterion prints
//! GiB/s: multiply by 1.074 for GB/s).
//!
//! GEMM: M = 8, 64, 512 activation rows against a 2048×2048 weight matrix, activations
//! quantized inside the timed call; throughput in elements = 2·M·N·K operations.
//!
//! On a shared, overloaded machine wall-clock time mostly measures the other processes.
//! With `RML_BENCH_CPU_TIME=1` the single-thread benches are timed by the calling
//! thread's on-CPU time (`/proc/thread-self/schedstat`, Linux only) instead, which
//! excludes time spent descheduled (it still includes memory stalls caused by others).
//!
//! Weights are random valid blocks (random bytes with small finite f16 scales): the
//! kernels' speed does not depend on the values. `RML_ISA` is not read here; the best
//! ISA of the machine runs.

// criterion_group! generates undocumented items.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rml_kernels::quant as kq;
use rml_kernels::rml_core::DType;

const TYPES: [DType; 10] = [
    DType::Q4_0,
    DType::Q8_0,
    DType::Q4K,
    DType::Q6K,
    DType::Q4_1,
    DType::Q5_0,
    DType::Q5_1,
    DType::Q2K,
    DType::Q3K,
    DType::Q5K,
];

/// Byte offsets of the f16 scale fields in each block type.
fn f16_fields(t: DType) -> &'static [usize] {
    match t {
        DType::Q4_0 | DType::Q5_0 | DType::Q8_0 => &[0],
        DType::Q4_1 | DType::Q5_1 => &[0, 2],
        DType::Q2K => &[80, 82],
        DType::Q3K => &[108],
        DType::Q4K | DType::Q5K => &[0, 2],
        DType::Q6K => &[208],
        _ => &[],
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn random_blocks(t: DType, elements: usize, rng: &mut Rng) -> Vec<u8> {
    let mut b: Vec<u8> = (0..t.storage_bytes(elements).unwrap())
        .map(|_| rng.next() as u8)
        .collect();
    let bs = t.type_size();
    for block in b.chunks_exact_mut(bs) {
        for &off in f16_fields(t) {
            let v = half::f16::from_f32(0.001 + (rng.next() % 1000) as f32 * 1e-5);
            block[off..off + 2].copy_from_slice(&v.to_le_bytes());
        }
    }
    b
}

fn activations(t: DType, k: usize, rng: &mut Rng) -> Vec<u8> {
    let act = kq::vec_dot_type(t).unwrap();
    let x: Vec<f32> = (0..k)
        .map(|_| (rng.next() % 2001) as f32 / 1000.0 - 1.0)
        .collect();
    let mut a = vec![0u8; act.storage_bytes(k).unwrap()];
    kq::quantize_act(act, &x, &mut a).unwrap();
    a
}

/// Nanoseconds this thread has run on a CPU (Linux `schedstat`), if available.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Times `iters` calls of `f` by wall clock, or by on-CPU time when asked to.
fn time_iters(iters: u64, mut f: impl FnMut()) -> Duration {
    let cpu = std::env::var_os("RML_BENCH_CPU_TIME").is_some() && thread_cpu_ns().is_some();
    let (t0, c0) = (std::time::Instant::now(), thread_cpu_ns().unwrap_or(0));
    for _ in 0..iters {
        f();
    }
    if cpu {
        Duration::from_nanos(thread_cpu_ns().unwrap_or(0).saturating_sub(c0))
    } else {
        t0.elapsed()
    }
}

fn gemv(c: &mut Criterion) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut g = c.benchmark_group("quant_gemv");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for (n, k) in [(4096usize, 4096usize), (5632, 2048)] {
        for t in TYPES {
            let one = random_blocks(t, n * k, &mut rng);
            let copies = (96 << 20) / one.len() + 1;
            let mats: Vec<Vec<u8>> = (0..copies)
                .map(|i| {
                    let mut m = one.clone();
                    m[0] ^= i as u8;
                    m
                })
                .collect();
            let a = activations(t, k, &mut rng);
            g.throughput(Throughput::Bytes(one.len() as u64));
            let name = format!("{}_{n}x{k}", t.name());
            let mut out = vec![0f32; n];
            let mut i = 0;
            g.bench_function(BenchmarkId::new(&name, "1t"), |b| {
                b.iter_custom(|iters| {
                    time_iters(iters, || {
                        i = (i + 1) % copies;
                        kq::gemv(t, &mats[i], k, &a, 0..n, &mut out).unwrap();
                        black_box(&out);
                    })
                })
            });
            g.bench_function(BenchmarkId::new(&name, "2t"), |b| {
                b.iter(|| {
                    i = (i + 1) % copies;
                    let (o0, o1) = out.split_at_mut(n / 2);
                    let w = &mats[i];
                    std::thread::scope(|s| {
                        s.spawn(|| kq::gemv(t, w, k, &a, 0..n / 2, o0).unwrap());
                        kq::gemv(t, w, k, &a, n / 2..n, o1).unwrap();
                    });
                    black_box(&out);
                })
            });
        }
    }
    g.finish();
}

fn gemm(c: &mut Criterion) {
    let mut rng = Rng(0x1234_5678);
    let mut g = c.benchmark_group("quant_gemm");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let (n, k) = (2048usize, 2048usize);
    for t in TYPES {
        let w = random_blocks(t, n * k, &mut rng);
        for m in [8usize, 64, 512] {
            let x: Vec<f32> = (0..m * k)
                .map(|i| ((i * 7919) % 2001) as f32 / 1000.0 - 1.0)
                .collect();
            let mut out = vec![0f32; m * n];
            let mut scratch = vec![0u8; kq::gemm_scratch_len(t, m, k).unwrap()];
            g.throughput(Throughput::Elements((2 * m * n * k) as u64));
            g.bench_function(BenchmarkId::new(format!("{}_{n}x{k}", t.name()), m), |b| {
                b.iter_custom(|iters| {
                    time_iters(iters, || {
                        kq::gemm(t, &w, k, &x, m, 0..n, &mut out, n, &mut scratch).unwrap();
                        black_box(&out);
                    })
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, gemv, gemm);
criterion_main!(benches);
