//! Quantized GEMV (decode) and small-M GEMM (prompt) throughput.
//!
//! GEMV: 4096×4096 and 5632×2048 weight matrices of every weight type, 1 and 2
//! threads (2 threads split the row range in two halves, as a host does, each half on
//! its own thread). Throughput is in bytes of weights read per second; several copies
//! of the matrix (≥ 96 MB in all) are cycled so the weights stream from DRAM, not the
//! 32 MiB L3. The `read_bw` group measures plain read bandwidth (a sum of the u64
//! words of 96 MB of buffers, 1 and 2 threads) in the same run, for the "% of
//! bandwidth" column (criterion prints GiB/s: multiply by 1.074 for GB/s). The
//! `quant_gemv_cached` group runs a 512×4096 GEMV whose weights stay in cache: the
//! kernels' compute speed, single thread.
//!
//! GEMM: M = 8, 64, 512 activation rows against a 2048×2048 weight matrix, activations
//! quantized inside the timed call, beside rml's f32 GEMM (`gemm_packed`, weights
//! packed once outside the timed call, as a host holding f32 weights would) on the
//! same shape; throughput in elements = 2·M·N·K operations.
//!
//! On a shared, overloaded machine wall-clock time mostly measures the other processes.
//! With `RML_BENCH_CPU_TIME=1` each timed thread measures its own on-CPU time
//! (`/proc/thread-self/schedstat`, Linux only), which excludes time spent descheduled
//! (it still includes memory stalls caused by others); a 2-thread sample is the larger
//! of the two threads' times, i.e. what the split takes if both run at once.
//!
//! Weights are random valid blocks (random bytes with small finite f16 scales): the
//! kernels' speed does not depend on the values. `RML_ISA=avx2` (or another ISA)
//! times that kernel family in place of the machine's best.

// criterion_group! generates undocumented items.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rml_kernels::gemm::{
    Epilogue, MatMut, MatRef, PackedB, gemm_packed, gemm_packed_scratch_len, pack_b, packed_b_len,
};
use rml_kernels::isa;
use rml_kernels::quant as kq;
use rml_kernels::rml_core::DType;

mod common;
use common::{cpu_clock, thread_cpu_ns, time_iters};
#[path = "common/quant_blocks.rs"]
mod quant_blocks;
use quant_blocks::{Rng, activations, copies_beyond, random_blocks};

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

/// Times `iters` runs of `f(run, 0)` and `f(run, 1)` on two threads (the second a
/// scoped thread spawned once per sample, each thread running its `iters` parts back
/// to back). Wall clock includes the spawn; the CPU clock takes the larger of the two
/// threads' on-CPU times over the sample (schedstat is only updated at scheduler
/// ticks, so it is read around whole samples, never around single runs).
fn time_iters_2t(iters: u64, f: impl Fn(u64, usize) + Sync) -> Duration {
    let cpu = cpu_clock();
    let t0 = std::time::Instant::now();
    let timed = |part: usize| {
        let c0 = thread_cpu_ns().unwrap_or(0);
        for run in 0..iters {
            f(run, part);
        }
        thread_cpu_ns().unwrap_or(0).saturating_sub(c0)
    };
    let (a, b) = std::thread::scope(|s| {
        let h = s.spawn(|| timed(1));
        let a = timed(0);
        (a, h.join().unwrap())
    });
    // A sample shorter than a scheduler tick can read as zero CPU time: wall clock then.
    if cpu && a.max(b) > 0 {
        Duration::from_nanos(a.max(b))
    } else {
        t0.elapsed()
    }
}

/// Sum of the u64 words of `b` (four independent lanes, so it runs at read bandwidth).
fn read_sum(b: &[u8]) -> u64 {
    let mut acc = [0u64; 4];
    for c in b.chunks_exact(32) {
        for (a, w) in acc.iter_mut().zip(c.chunks_exact(8)) {
            *a = a.wrapping_add(u64::from_le_bytes(w.try_into().unwrap()));
        }
    }
    acc.iter().fold(0, |s, &a| s.wrapping_add(a))
}

fn read_bw(c: &mut Criterion) {
    let mut g = c.benchmark_group("read_bw");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let size = 16usize << 20;
    let bufs: Vec<Vec<u8>> = (0..6).map(|i| vec![i as u8 + 1; size]).collect();
    g.throughput(Throughput::Bytes(size as u64));
    let mut i = 0;
    g.bench_function("sum_u64/1t", |b| {
        b.iter_custom(|iters| {
            time_iters(iters, || {
                i = (i + 1) % bufs.len();
                black_box(read_sum(&bufs[i]));
            })
        })
    });
    g.bench_function("sum_u64/2t", |b| {
        b.iter_custom(|iters| {
            time_iters_2t(iters, |run, part| {
                let buf = &bufs[run as usize % bufs.len()];
                black_box(read_sum(&buf[part * size / 2..(part + 1) * size / 2]));
            })
        })
    });
    g.finish();
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
            let mats = copies_beyond(&one, 96 << 20);
            let copies = mats.len();
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
            let half = n / 2;
            let outs = [0..half, half..n].map(|r| std::sync::Mutex::new(vec![0f32; r.len()]));
            g.bench_function(BenchmarkId::new(&name, "2t"), |b| {
                b.iter_custom(|iters| {
                    time_iters_2t(iters, |run, part| {
                        let w = &mats[run as usize % copies];
                        let rows = if part == 0 { 0..half } else { half..n };
                        let mut o = outs[part].lock().unwrap();
                        kq::gemv(t, w, k, &a, rows, &mut o).unwrap();
                        black_box(&o);
                    })
                })
            });
        }
    }
    g.finish();
}

/// GEMV on a 512×4096 matrix that stays in L2/L3 (one copy, reused): the kernels'
/// compute speed, to tell a compute-bound type from a bandwidth-bound one.
fn gemv_cached(c: &mut Criterion) {
    let mut rng = Rng(0x5151_5151);
    let mut g = c.benchmark_group("quant_gemv_cached");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(1));
    let (n, k) = (512usize, 4096usize);
    for t in TYPES {
        let w = random_blocks(t, n * k, &mut rng);
        let a = activations(t, k, &mut rng);
        g.throughput(Throughput::Bytes(w.len() as u64));
        let mut out = vec![0f32; n];
        g.bench_function(format!("{}_{n}x{k}", t.name()), |b| {
            b.iter_custom(|iters| {
                time_iters(iters, || {
                    kq::gemv(t, &w, k, &a, 0..n, &mut out).unwrap();
                    black_box(&out);
                })
            })
        });
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
    let xs: Vec<Vec<f32>> = [8usize, 64, 512]
        .iter()
        .map(|&m| {
            (0..m * k)
                .map(|i| ((i * 7919) % 2001) as f32 / 1000.0 - 1.0)
                .collect()
        })
        .collect();
    // The f32 peer: the same n × k weights as f32, packed once as B = Wᵀ (k × n).
    let wf: Vec<f32> = (0..n * k).map(|i| ((i * 31) % 1999) as f32 / 1e4).collect();
    let mut packed = vec![0f32; packed_b_len(k, n).unwrap()];
    pack_b(MatRef::new(&wf, k, n, 1, k).unwrap(), &mut packed).unwrap();
    for x in &xs {
        let m = x.len() / k;
        let mut out = vec![0f32; m * n];
        let mut scratch = vec![0f32; gemm_packed_scratch_len(m, k)];
        g.throughput(Throughput::Elements((2 * m * n * k) as u64));
        g.bench_function(BenchmarkId::new(format!("F32_{n}x{k}"), m), |b| {
            b.iter_custom(|iters| {
                time_iters(iters, || {
                    let av = MatRef::row_major(x, m, k).unwrap();
                    let pb = PackedB::new(&packed, k, n).unwrap();
                    let cv = MatMut::row_major(&mut out, m, n).unwrap();
                    gemm_packed(1.0, av, pb, 0.0, cv, &Epilogue::default(), &mut scratch).unwrap();
                    black_box(&out);
                })
            })
        });
    }
    for t in TYPES {
        let w = random_blocks(t, n * k, &mut rng);
        for x in &xs {
            let m = x.len() / k;
            let mut out = vec![0f32; m * n];
            let mut scratch = vec![0u8; kq::gemm_scratch_len(t, m, k).unwrap()];
            g.throughput(Throughput::Elements((2 * m * n * k) as u64));
            g.bench_function(BenchmarkId::new(format!("{}_{n}x{k}", t.name()), m), |b| {
                b.iter_custom(|iters| {
                    time_iters(iters, || {
                        kq::gemm(t, &w, k, x, m, 0..n, &mut out, n, &mut scratch).unwrap();
                        black_box(&out);
                    })
                })
            });
        }
    }
    g.finish();
}

/// Criterion's defaults, after forcing the kernel family `RML_ISA` names (when set).
fn config() -> Criterion {
    if let Ok(name) = std::env::var("RML_ISA") {
        let isa = isa::Isa::parse(&name).expect("RML_ISA names an ISA");
        isa::force(isa).expect("RML_ISA names an ISA this machine runs");
    }
    Criterion::default()
}

criterion_group! {
    name = benches;
    config = config();
    targets = read_bw, gemv, gemv_cached, gemm
}
criterion_main!(benches);
