//! GEMM / GEMV throughput on the shapes rml cares about (criterion).
//!
//! Throughput is reported as "elements" = floating-point operations (2·M·K·N), so
//! criterion's `Gelem/s` reads as GFLOP/s; GEMV groups report weight bytes per second.
//! `RML_ISA=scalar|avx2|neon` forces a kernel family. Peers are timed by
//! `scripts/bench/gemm_peers.sh` in the same sweep.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_main};
use rml_kernels::gemm::{
    Epilogue, MatMut, MatRef, PackedB, gemm, gemm_packed, gemm_packed_scratch_len,
    gemm_scratch_len, gemv_kn, gemv_nk, pack_b, packed_b_len,
};
use rml_kernels::isa;

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

fn setup(c: &mut Criterion) -> &mut Criterion {
    if let Ok(name) = std::env::var("RML_ISA") {
        isa::force(isa::Isa::parse(&name).expect("RML_ISA")).expect("ISA not supported");
    }
    c
}

fn bench_gemm_shape(c: &mut Criterion, group: &str, (m, k, n): (usize, usize, usize)) {
    let a = data(m * k, 1);
    let b = data(k * n, 2);
    let mut out = vec![0.0f32; m * n];
    let mut scratch = vec![0.0f32; gemm_scratch_len(m, n, k)];
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements((2 * m * k * n) as u64));
    let flops = 2.0 * (m * k * n) as f64;
    let time = if flops > 4e9 { 6 } else { 2 };
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(time));
    g.bench_function(BenchmarkId::from_parameter(format!("{m}x{k}x{n}")), |bch| {
        bch.iter(|| {
            let av = MatRef::row_major(&a, m, k).unwrap();
            let bv = MatRef::row_major(&b, k, n).unwrap();
            let cv = MatMut::row_major(&mut out, m, n).unwrap();
            gemm(1.0, av, bv, 0.0, cv, &mut scratch).unwrap();
            black_box(&out);
        })
    });
    g.finish();
}

fn bench_packed_shape(c: &mut Criterion, (m, k, n): (usize, usize, usize)) {
    let a = data(m * k, 3);
    let b = data(k * n, 4);
    let mut packed = vec![0.0f32; packed_b_len(k, n).unwrap()];
    pack_b(MatRef::row_major(&b, k, n).unwrap(), &mut packed).unwrap();
    let mut out = vec![0.0f32; m * n];
    let mut scratch = vec![0.0f32; gemm_packed_scratch_len(m, k)];
    let mut g = c.benchmark_group("gemm_prepacked");
    g.throughput(Throughput::Elements((2 * m * k * n) as u64));
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    g.bench_function(BenchmarkId::from_parameter(format!("{m}x{k}x{n}")), |bch| {
        bch.iter(|| {
            let av = MatRef::row_major(&a, m, k).unwrap();
            let pb = PackedB::new(&packed, k, n).unwrap();
            let cv = MatMut::row_major(&mut out, m, n).unwrap();
            gemm_packed(1.0, av, pb, 0.0, cv, &Epilogue::default(), &mut scratch).unwrap();
            black_box(&out);
        })
    });
    g.finish();
}

fn square(c: &mut Criterion) {
    let c = setup(c);
    for s in [64, 128, 256, 512, 1024, 2048] {
        bench_gemm_shape(c, "gemm_square", (s, s, s));
    }
}

fn shapes(c: &mut Criterion) {
    let c = setup(c);
    for shape in [
        (1, 4096, 4096),
        (8, 512, 2048),
        (64, 512, 2048),
        (64, 256, 256),
        (512, 2048, 2048),
    ] {
        bench_gemm_shape(c, "gemm_shapes", shape);
    }
    for shape in [(8, 512, 2048), (64, 512, 2048), (64, 256, 256)] {
        bench_packed_shape(c, shape);
    }
}

fn gemv(c: &mut Criterion) {
    let c = setup(c);
    let (k, n) = (4096, 4096);
    let x = data(k, 5);
    let w32 = data(n * k, 6);
    let w16: Vec<half::f16> = w32.iter().map(|&v| half::f16::from_f32(v)).collect();
    let mut y = vec![0.0f32; n];
    let mut g = c.benchmark_group("gemv_decode");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Bytes((n * k * 4) as u64));
    g.bench_function("f32_nk_1x4096x4096", |bch| {
        bch.iter(|| {
            let xv = MatRef::row_major(&x, 1, k).unwrap();
            let wv = MatRef::row_major(&w32, n, k).unwrap();
            let yv = MatMut::row_major(&mut y, 1, n).unwrap();
            gemv_nk(1.0, xv, wv, 0.0, yv, &Epilogue::default()).unwrap();
            black_box(&y);
        })
    });
    g.bench_function("f32_kn_1x4096x4096", |bch| {
        bch.iter(|| {
            let xv = MatRef::row_major(&x, 1, k).unwrap();
            let bv = MatRef::row_major(&w32, k, n).unwrap();
            let yv = MatMut::row_major(&mut y, 1, n).unwrap();
            gemv_kn(1.0, xv, bv, 0.0, yv, &Epilogue::default()).unwrap();
            black_box(&y);
        })
    });
    g.throughput(Throughput::Bytes((n * k * 2) as u64));
    g.bench_function("f16_nk_1x4096x4096", |bch| {
        bch.iter(|| {
            let xv = MatRef::row_major(&x, 1, k).unwrap();
            let wv = MatRef::row_major(&w16, n, k).unwrap();
            let yv = MatMut::row_major(&mut y, 1, n).unwrap();
            gemv_nk(1.0, xv, wv, 0.0, yv, &Epilogue::default()).unwrap();
            black_box(&y);
        })
    });
    g.finish();
}

// The macro generates an undocumented `pub fn benches`.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::square, super::shapes, super::gemv);
}
criterion_main!(group::benches);
