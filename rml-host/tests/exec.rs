//! The executor against the reference interpreter: every NumPy case in
//! `fixtures/graph/run/`, every hand-written graph in `fixtures/graph/`, and graphs
//! built in memory large enough to take the threaded paths. Fusion on and off agree
//! bit for bit (a fused program and its one-member programs evaluate each op with the
//! same tile functions); thread counts 1, 2 and 3 agree bit for bit (every step
//! computes each output element the same way whatever the partition); the
//! interpreter agrees to rounding (packed GEMM, vector math and row kernels; their
//! own bounds are checked in `exec_kernels.rs`).

mod exec_support;
mod graph_support;

use rml_core::{DType, Shape};
use rml_host::graph::{
    Buffer, DenseTensor, Executor, Graph, MemoryConstants, Options, load_graph, run,
};
use serde_json::Value;

/// Runs `graph` on the executor with `options`.
fn exec(
    graph: &Graph,
    constants: &MemoryConstants,
    inputs: &[DenseTensor],
    options: Options,
) -> Vec<DenseTensor> {
    let mut e = Executor::new(graph.clone(), constants, options).unwrap();
    // Split every step, however small, so the chunk boundaries are exercised.
    e.set_min_chunk_ps(0);
    let first = e.run(inputs).unwrap().to_vec();
    let second = e.run(inputs).unwrap().to_vec();
    assert_eq!(first, second, "a second run gives the same bits");
    first
}

/// Asserts `got` matches `want` within `tol` relative to `1 + |want|`.
fn close(got: &[DenseTensor], want: &[DenseTensor], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g.shape, w.shape, "{what}: output {i} shape");
        match (&g.data, &w.data) {
            (Buffer::F32(g), Buffer::F32(w)) => {
                for (j, (a, b)) in g.iter().zip(w).enumerate() {
                    let ok = (a - b).abs() <= tol * (1.0 + b.abs()) || (a.is_nan() && b.is_nan());
                    assert!(ok, "{what}: output {i} element {j}: got {a}, expected {b}");
                }
            }
            (g, w) => assert_eq!(g, w, "{what}: output {i}"),
        }
    }
}

/// Every executor configuration agrees with the interpreter (to `tol`), fusion on
/// and off agree bitwise, and thread counts agree bitwise.
fn check_all(
    graph: &Graph,
    constants: &MemoryConstants,
    inputs: &[DenseTensor],
    tol: f32,
    what: &str,
) {
    let reference = run(graph, constants, inputs).unwrap();
    let base = exec(graph, constants, inputs, Options::default());
    close(&base, &reference, tol, what);
    for fusion in [true, false] {
        for threads in [1, 2, 3] {
            let options = Options {
                threads,
                fusion,
                profile: false,
            };
            let got = exec(graph, constants, inputs, options);
            assert_eq!(got, base, "{what}: fusion {fusion}, {threads} threads");
        }
    }
}

#[test]
fn every_numpy_case_matches_the_interpreter() {
    let dir = format!("{}/tests/fixtures/graph/run", env!("CARGO_MANIFEST_DIR"));
    let mut cases = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let c = graph_support::run_case(&path);
        let what = path.display().to_string();
        check_all(&c.graph, &c.constants, &c.inputs, 1e-5, &what);
        close(
            &exec(&c.graph, &c.constants, &c.inputs, Options::default()),
            &c.expected,
            c.tolerance,
            &what,
        );
        cases += 1;
    }
    assert!(cases >= 8, "found {cases} cases");
}

#[test]
fn every_hand_written_graph_matches_the_interpreter() {
    let dir = format!("{}/tests/fixtures/graph", env!("CARGO_MANIFEST_DIR"));
    let mut ran = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let mut constants = MemoryConstants::new();
        for (i, c) in doc["constants"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let dims = graph_support::dims(&c["shape"]);
            let n = dims.iter().product();
            let data = match DType::parse(c["dtype"].as_str().unwrap()).unwrap() {
                DType::I64 => Buffer::I64((0..n as i64).map(|k| k % 3).collect()),
                DType::Bool => Buffer::Bool((0..n).map(|k| (k % 2) as u8).collect()),
                // Variances and similar stay positive.
                _ => Buffer::F32(
                    exec_support::values(n, i as u64)
                        .iter()
                        .map(|v| v.abs() + 0.1)
                        .collect(),
                ),
            };
            constants.insert(c["name"].as_str().unwrap(), &dims, data);
        }
        let graph = load_graph(&doc.to_string(), &constants).unwrap();
        let inputs: Vec<DenseTensor> = graph
            .inputs
            .iter()
            .enumerate()
            .map(|(i, &id)| {
                let dims: Vec<usize> = graph.values[id]
                    .ty
                    .shape
                    .iter()
                    .map(|d| d.fixed().unwrap_or(2))
                    .collect();
                let n: usize = dims.iter().product();
                let data = match graph.values[id].ty.dtype {
                    DType::I64 => Buffer::I64((0..n as i64).map(|k| k % 2).collect()),
                    DType::Bool => Buffer::Bool((0..n).map(|k| (k % 2) as u8).collect()),
                    _ => Buffer::F32(exec_support::values(n, 50 + i as u64)),
                };
                DenseTensor {
                    shape: Shape::new(&dims).unwrap(),
                    data,
                }
            })
            .collect();
        let what = path.display().to_string();
        match run(&graph, &constants, &inputs) {
            Ok(_) => {
                check_all(&graph, &constants, &inputs, 1e-5, &what);
                ran += 1;
            }
            Err(e) => {
                let mut ex = Executor::new(graph.clone(), &constants, Options::default()).unwrap();
                assert!(
                    ex.run(&inputs).is_err(),
                    "{what}: the interpreter fails ({e}), so must the executor"
                );
            }
        }
    }
    assert!(ran >= 4, "ran {ran} graphs");
}

#[test]
fn threaded_paths_agree_bitwise() {
    for (doc, width) in [
        (exec_support::norm_gelu_chain(512, 3), 512),
        (exec_support::mlp(256, 3), 256),
    ] {
        let (graph, constants) = exec_support::build(&doc);
        let inputs = [exec_support::tensor(&[64, width], 7)];
        check_all(&graph, &constants, &inputs, 1e-4, "large graph");
    }
}

#[test]
fn one_row_gemvs_split_by_columns_agree_bitwise() {
    // One row through a linear (weight [M, K], bias, 200 columns: three 64-column
    // blocks and a short one) and a matmul by a [K, M] constant (130 columns).
    use exec_support::decl;
    let doc = serde_json::json!({
        "format": "rml-graph", "version": 1, "weights": "w.safetensors",
        "inputs": [decl("x", serde_json::json!([1, 300]))],
        "constants": [
            decl("w1", serde_json::json!([200, 300])),
            decl("b1", serde_json::json!([200])),
            decl("w2", serde_json::json!([200, 130])),
        ],
        "nodes": [
            {"op": "linear", "inputs": ["x", "w1", "b1"], "outputs": ["h"]},
            {"op": "tanh", "inputs": ["h"], "outputs": ["t"]},
            {"op": "matmul", "inputs": ["t", "w2"], "outputs": ["y"]},
        ],
        "outputs": [decl("y", serde_json::json!([1, 130]))]
    });
    let (graph, constants) = exec_support::build(&doc);
    let inputs = [exec_support::tensor(&[1, 300], 9)];
    check_all(&graph, &constants, &inputs, 1e-5, "one-row GEMVs");
}

#[test]
fn fusion_merges_elementwise_runs_and_packs_linears() {
    let (graph, constants) = exec_support::build(&exec_support::mlp(8, 2));
    let fused = Executor::new(graph.clone(), &constants, Options::default()).unwrap();
    let labels: Vec<&str> = fused.steps().iter().map(|s| s.label.as_str()).collect();
    assert_eq!(
        labels,
        ["linear => relu", "linear => relu + tanh + greater + where"]
    );
    let unfused = Executor::new(
        graph,
        &constants,
        Options {
            fusion: false,
            ..Options::default()
        },
    )
    .unwrap();
    assert_eq!(unfused.steps().len(), 7);
}

#[test]
fn constants_fold_and_dead_nodes_go() {
    let doc = serde_json::json!({
        "format": "rml-graph", "version": 1, "weights": "w.safetensors",
        "inputs": [{"name": "x", "dtype": "F32", "shape": ["N", 4]}],
        "constants": [{"name": "c", "dtype": "F32", "shape": [4]}],
        "nodes": [
            {"op": "exp", "inputs": ["c"], "outputs": ["ec"]},
            {"op": "neg", "inputs": ["x"], "outputs": ["dead"]},
            {"op": "mul", "inputs": ["x", "ec"], "outputs": ["y"]}
        ],
        "outputs": [{"name": "y", "dtype": "F32", "shape": ["N", 4]}]
    });
    let (graph, constants) = exec_support::build(&doc);
    let mut e = Executor::new(graph.clone(), &constants, Options::default()).unwrap();
    assert_eq!(e.steps().len(), 1);
    assert_eq!(e.steps()[0].label, "mul");
    let x = [exec_support::tensor(&[3, 4], 1)];
    assert_eq!(e.run(&x).unwrap(), run(&graph, &constants, &x).unwrap());
}

#[test]
fn the_batch_is_bound_per_run_and_wrong_shapes_fail_clearly() {
    let (graph, constants) = exec_support::build(&exec_support::mlp(8, 2));
    let mut e = Executor::new(graph.clone(), &constants, Options::default()).unwrap();
    for batch in [1, 5, 2] {
        let x = [exec_support::tensor(&[batch, 8], batch as u64)];
        let want = run(&graph, &constants, &x).unwrap();
        close(e.run(&x).unwrap(), &want, 1e-5, "batch");
        assert!(e.peak_bytes().unwrap() > 0);
    }
    let wrong = [exec_support::tensor(&[2, 9], 1)];
    let err = e.run(&wrong).unwrap_err().to_string();
    assert_eq!(err, "input \"x\": expected [N, 8], got [2, 9]");
    let short = [DenseTensor {
        shape: Shape::new(&[2, 8]).unwrap(),
        data: Buffer::F32(vec![0.0; 3]),
    }];
    let err = e.run(&short).unwrap_err().to_string();
    assert!(err.contains("needs 16 elements, got 3"), "{err}");
}

#[test]
fn the_planner_reuses_memory() {
    let (graph, constants) = exec_support::build(&exec_support::norm_gelu_chain(64, 6));
    let mut e = Executor::new(graph, &constants, Options::default()).unwrap();
    e.run(&[exec_support::tensor(&[16, 64], 3)]).unwrap();
    let one = 16 * 64 * 4;
    // Six layers write 12 activations; liveness keeps at most a few at once.
    assert!(
        e.peak_bytes().unwrap() <= 4 * one,
        "peak {}",
        e.peak_bytes().unwrap()
    );
}
