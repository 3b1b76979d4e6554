//! Criterion benchmarks of the vector kernels.
//!
//! Each kernel runs on an L1-resident problem (2048 f32 in, 2048 out: 16 KiB) with
//! the forced scalar path and the best path, and on a DRAM-sized problem (16 Mi f32
//! = 64 MiB in, beyond the 32 MiB L3 of the Zen machines, on huge pages) with the
//! best path. Every buffer starts on a 64-byte boundary, as rml-host's arena places
//! them (`common::buffer`). Inputs are uniform (mostly in [−8, 8)); `gelu_normal`
//! runs GELU on standard-normal ones as well, and the `*_short` groups run each
//! unary kernel and `add` on 24 values one float past the boundary (a head, whole
//! vectors and a tail); `softmax_ragged` runs softmax in place on rows of 61 in L1
//! only. Throughput counts the bytes each kernel must read plus the
//! bytes it writes.
//!
//! `cargo bench -p rml-kernels --bench vector -- --output-format bencher` prints
//! one line per benchmark; `RML_BENCH_QUICK=1` shortens the measurement;
//! `RML_BENCH_CPU_TIME=1` times by this thread's CPU time (see `common`);
//! `RML_ISA=avx2` (or another ISA) times that path in place of the best.

#![allow(missing_docs)] // criterion_group! generates an undocumented `pub fn benches`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use half::{bf16, f16};
use rml_kernels::convert;
use rml_kernels::elementwise::{BinaryOp, Operand, UnaryOp, binary, unary};
use rml_kernels::isa::{self, Isa};
use rml_kernels::norm::{layer_norm_rows, rms_norm_rows};
use rml_kernels::reduce::{ReduceOp, reduce_rows};
use rml_kernels::softmax::{softmax_rows, softmax_rows_inplace};
use rml_kernels::testing::Rng;

mod common;

const L1: usize = 2048;
const BIG: usize = 16 << 20;
/// Row length of the row kernels (softmax, norms, reductions).
const COLS: usize = 1024;
/// Row length of the short-row cases (`softmax_short`, `max_short`): attention
/// scores over a short context, where a row's horizontal reductions and
/// divisions weigh as much as its loops.
const SHORT_COLS: usize = 64;

/// Row length of `softmax_ragged`: attention scores over a context whose length
/// is no multiple of a vector, so every row ends in a partial vector.
const RAGGED_COLS: usize = 61;

/// Values in the short unary cases (`exp_short`, …), which start one float past a
/// vector boundary, so a call runs a head, whole vectors and a tail: the paths a
/// vector alone takes (rml-host's small tensors, and every call's edges).
const SHORT_LEN: usize = 24;

/// The ISA `RML_ISA` names, else the best this machine supports.
fn best() -> Isa {
    match std::env::var("RML_ISA") {
        Ok(name) => Isa::parse(&name).expect("RML_ISA names an ISA"),
        Err(_) => isa::detect(),
    }
}

/// The paths to time: (label, ISA, problem size).
fn cases() -> Vec<(&'static str, Isa, usize)> {
    vec![
        ("l1_scalar", Isa::Scalar, L1),
        ("l1_best", best(), L1),
        ("dram_best", best(), BIG),
    ]
}

/// The unary kernels timed: every [`UnaryOp`] but the cheap arithmetic ones (neg,
/// abs, sqrt, square, reciprocal), for which relu stands.
fn timed_unary_ops() -> impl Iterator<Item = UnaryOp> {
    UnaryOp::ALL.into_iter().filter(|op| {
        !matches!(
            op,
            UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sqrt | UnaryOp::Square | UnaryOp::Recip
        )
    })
}

fn data(n: usize, lo: f32, hi: f32) -> common::Buffer<f32> {
    let mut v = common::buffer(n);
    Rng::new(n as u64).fill(&mut v, lo, hi);
    v
}

/// Times `f` for each of [`cases`] in group `name`, with `bytes(n)` of traffic per
/// call.
fn run(c: &mut Criterion, name: &str, bytes: impl Fn(usize) -> u64, f: impl FnMut(usize)) {
    run_cases(c, name, &cases(), bytes, f);
}

/// Times `f` for each of `cases` (label, ISA, problem size) in group `name`.
fn run_cases(
    c: &mut Criterion,
    name: &str,
    cases: &[(&str, Isa, usize)],
    bytes: impl Fn(usize) -> u64,
    mut f: impl FnMut(usize),
) {
    let quick = std::env::var_os("RML_BENCH_QUICK").is_some();
    let mut g = c.benchmark_group(name);
    g.warm_up_time(std::time::Duration::from_millis(if quick {
        200
    } else {
        500
    }));
    g.measurement_time(std::time::Duration::from_millis(if quick {
        600
    } else {
        1500
    }));
    g.sample_size(10);
    for &(label, isa, n) in cases {
        isa::force(isa).expect("supported ISA");
        g.throughput(Throughput::Bytes(bytes(n)));
        g.bench_function(BenchmarkId::new(label, isa.name()), |b| {
            b.iter_custom(|iters| common::time_iters(iters, || f(n)))
        });
    }
    isa::force(isa::detect()).expect("detected ISA");
    g.finish();
}

fn bench_unary(c: &mut Criterion) {
    let x = data(BIG, -8.0, 8.0);
    // log's domain: on [-8, 8) half its inputs would be NaN results.
    let positive = data(BIG, 1e-3, 8.0);
    let mut y = common::buffer(BIG);
    for op in timed_unary_ops() {
        run(
            c,
            op.name(),
            |n| 8 * n as u64,
            |n| {
                let x = if op == UnaryOp::Log { &positive } else { &x };
                unary(op, &x[..n], &mut y[..n]).expect("lengths")
            },
        );
    }
}

/// The labelled cases of the `*_short` groups: [`SHORT_LEN`] values on the forced
/// scalar path and on the best.
fn short_cases() -> [(&'static str, Isa, usize); 2] {
    [
        ("short_scalar", Isa::Scalar, SHORT_LEN),
        ("short_best", best(), SHORT_LEN),
    ]
}

/// The unary kernels on [`SHORT_LEN`] values one past a vector boundary.
fn bench_unary_short(c: &mut Criterion) {
    let x = data(1 + SHORT_LEN, -8.0, 8.0);
    let positive = data(1 + SHORT_LEN, 1e-3, 8.0);
    let mut y = common::buffer(1 + SHORT_LEN);
    let cases = short_cases();
    for op in timed_unary_ops() {
        run_cases(
            c,
            &format!("{}_short", op.name()),
            &cases,
            |n| 8 * n as u64,
            |n| {
                let x = if op == UnaryOp::Log { &positive } else { &x };
                unary(op, &x[1..=n], &mut y[1..=n]).expect("lengths")
            },
        );
    }
}

/// `n` values from the standard normal distribution (Box–Muller on [`Rng`]).
fn normal_data(n: usize) -> common::Buffer<f32> {
    let mut v = common::buffer(n);
    let mut rng = Rng::new(n as u64 + 1);
    for v in v.iter_mut() {
        let (u1, u2) = (rng.uniform(f32::EPSILON, 1.0), rng.uniform(0.0, 1.0));
        *v = (-2.0 * u1.ln()).sqrt() * (core::f32::consts::TAU * u2).cos();
    }
    v
}

/// GELU on standard-normal inputs, the scale of the pre-activations it meets in a
/// network, beside `gelu`'s uniform [−8, 8) (where nearly every vector holds a
/// lane past the table's |x| < 3.75 and also runs the formula).
fn bench_gelu_normal(c: &mut Criterion) {
    let x = normal_data(BIG);
    let mut y = common::buffer(BIG);
    run(
        c,
        "gelu_normal",
        |n| 8 * n as u64,
        |n| unary(UnaryOp::Gelu, &x[..n], &mut y[..n]).expect("lengths"),
    );
}

fn bench_binary(c: &mut Criterion) {
    let a = data(BIG, -4.0, 4.0);
    let b = data(BIG, 0.5, 4.0);
    let row = data(COLS, 0.5, 2.0);
    let mut y = common::buffer(BIG);
    // The peer for memory-bound kernels, in the same sweep: a plain memcpy (what
    // this machine streams right now, read + write); `sum` below is the read-only one.
    // glibc streams a copy past the caches only beyond a size it derives from the
    // L3 (more than these 64 MiB on a 260 MiB-L3 Xeon); run with
    // `GLIBC_TUNABLES=glibc.cpu.x86_non_temporal_threshold=0x100000`, as
    // `scripts/bench_paired.py` does, for the streaming copy the kernels compete with.
    run(
        c,
        "copy",
        |n| 8 * n as u64,
        |n| y[..n].copy_from_slice(&a[..n]),
    );
    run(
        c,
        "add",
        |n| 12 * n as u64,
        |n| {
            let (l, r) = (Operand::Matrix(&a[..n]), Operand::Matrix(&b[..n]));
            binary(BinaryOp::Add, l, r, COLS, 0..n / COLS, &mut y[..n]).expect("shapes")
        },
    );
    run(
        c,
        "mul_row",
        |n| 8 * n as u64,
        |n| {
            let (l, r) = (Operand::Matrix(&a[..n]), Operand::Row(&row));
            binary(BinaryOp::Mul, l, r, COLS, 0..n / COLS, &mut y[..n]).expect("shapes")
        },
    );
    // `add` on [`SHORT_LEN`] values one past a vector boundary, like the unary
    // `*_short` groups.
    run_cases(
        c,
        "add_short",
        &short_cases(),
        |n| 12 * n as u64,
        |n| {
            let (l, r) = (Operand::Matrix(&a[1..=n]), Operand::Matrix(&b[1..=n]));
            binary(BinaryOp::Add, l, r, n, 0..1, &mut y[1..=n]).expect("shapes")
        },
    );
}

fn bench_rows(c: &mut Criterion) {
    let x = data(BIG, -4.0, 4.0);
    let g = data(COLS, 0.5, 1.5);
    let b = data(COLS, -1.0, 1.0);
    let mut y = common::buffer(BIG);
    for (name, cols) in [("softmax", COLS), ("softmax_short", SHORT_COLS)] {
        run(
            c,
            name,
            |n| 8 * n as u64,
            |n| softmax_rows(&x[..n], cols, 0..n / cols, &mut y[..n]).expect("shapes"),
        );
    }
    // In place, as the attention layers call it, over whole rows of L1's size.
    let mut scores = data(L1, -4.0, 4.0);
    let ragged = L1 - L1 % RAGGED_COLS;
    let l1_cases = [
        ("l1_scalar", Isa::Scalar, ragged),
        ("l1_best", best(), ragged),
    ];
    run_cases(
        c,
        "softmax_ragged",
        &l1_cases,
        |n| 8 * n as u64,
        |n| softmax_rows_inplace(&mut scores[..n], RAGGED_COLS).expect("shapes"),
    );
    run(
        c,
        "layer_norm",
        |n| 8 * n as u64,
        |n| {
            let (g, b) = (Some(&g[..]), Some(&b[..]));
            layer_norm_rows(&x[..n], COLS, 0..n / COLS, g, b, 1e-5, &mut y[..n]).expect("shapes")
        },
    );
    run(
        c,
        "rms_norm",
        |n| 8 * n as u64,
        |n| rms_norm_rows(&x[..n], COLS, 0..n / COLS, Some(&g), 1e-5, &mut y[..n]).expect("shapes"),
    );
    let mut out = common::buffer(BIG / SHORT_COLS);
    let reductions = [
        (ReduceOp::Sum, COLS),
        (ReduceOp::Max, COLS),
        (ReduceOp::Variance, COLS),
        (ReduceOp::Max, SHORT_COLS),
    ];
    for (op, cols) in reductions {
        let name = match cols {
            COLS => op.name().to_string(),
            _ => format!("{}_short", op.name()),
        };
        run(
            c,
            &name,
            |n| 4 * n as u64,
            |n| reduce_rows(op, &x[..n], cols, 0..n / cols, &mut out[..n / cols]).expect("shapes"),
        );
    }
}

fn bench_convert(c: &mut Criterion) {
    let x = data(BIG, -100.0, 100.0);
    let mut h = common::buffer::<f16>(BIG);
    let mut bh = common::buffer::<bf16>(BIG);
    for ((h, bh), &v) in h.iter_mut().zip(bh.iter_mut()).zip(x.iter()) {
        (*h, *bh) = (f16::from_f32(v), bf16::from_f32(v));
    }
    let mut y = common::buffer(BIG);
    let mut hy = common::buffer::<f16>(BIG);
    let mut by = common::buffer::<bf16>(BIG);
    run(
        c,
        "f16_to_f32",
        |n| 6 * n as u64,
        |n| convert::f16_to_f32(&h[..n], &mut y[..n]).expect("lengths"),
    );
    run(
        c,
        "bf16_to_f32",
        |n| 6 * n as u64,
        |n| convert::bf16_to_f32(&bh[..n], &mut y[..n]).expect("lengths"),
    );
    run(
        c,
        "f32_to_f16",
        |n| 6 * n as u64,
        |n| convert::f32_to_f16(&x[..n], &mut hy[..n]).expect("lengths"),
    );
    run(
        c,
        "f32_to_bf16",
        |n| 6 * n as u64,
        |n| convert::f32_to_bf16(&x[..n], &mut by[..n]).expect("lengths"),
    );
}

criterion_group!(
    benches,
    bench_unary,
    bench_unary_short,
    bench_gelu_normal,
    bench_binary,
    bench_rows,
    bench_convert
);
criterion_main!(benches);
