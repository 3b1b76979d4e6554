//! The graph executor with and without elementwise fusion: a layer-norm + GELU
//! chain, a bias + ReLU + residual chain and an MLP at batch 64, and a 20-node graph of tiny tensors for the
//! executor's per-run overhead.

// `criterion_group!` defines an undocumented `pub fn`.
#![allow(missing_docs)]

#[path = "../tests/exec_support/mod.rs"]
mod exec_support;

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use rml_host::graph::{Executor, Options};
use serde_json::Value;

/// Benchmarks `doc` at `batch` rows of `width`, fused and unfused, on 1 thread.
fn graph(c: &mut Criterion, name: &str, doc: &Value, batch: usize, width: usize) {
    let (graph, constants) = exec_support::build(doc);
    let inputs = [exec_support::tensor(&[batch, width], 1)];
    let mut group = c.benchmark_group(name);
    for fusion in [true, false] {
        let options = Options {
            threads: 1,
            fusion,
            profile: false,
        };
        let mut exec = Executor::new(graph.clone(), &constants, options).unwrap();
        exec.run(&inputs).unwrap();
        let label = if fusion { "fused" } else { "unfused" };
        group.bench_function(label, |b| b.iter(|| exec.run(&inputs).unwrap().len()));
    }
    group.finish();
}

/// Every executor benchmark.
fn benches(c: &mut Criterion) {
    graph(
        c,
        "norm_gelu_chain_b64",
        &exec_support::norm_gelu_chain(768, 4),
        64,
        768,
    );
    graph(
        c,
        "bias_relu_chain_b64",
        &exec_support::bias_relu_chain(4096, 4),
        64,
        4096,
    );
    graph(c, "mlp_b64", &exec_support::mlp(256, 3), 64, 256);
    graph(c, "tiny20_b1", &exec_support::tiny20(), 1, 4);
}

criterion_group! {
    name = executor;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = benches
}
criterion_main!(executor);
