//! The reference interpreter against NumPy: each case in `fixtures/graph/run/`
//! (written by `scripts/fixtures/graph.py`) is a graph with weights, inputs and
//! expected outputs computed in float64.

mod graph_support;

use graph_support::{RunCase, fixture_dir, run_case};
use rml_core::{DType, Shape};
use rml_host::graph::{Buffer, DenseTensor, GraphError, MemoryConstants, run};

/// Case `name` of `fixtures/graph/run/`.
fn case(name: &str) -> RunCase {
    run_case(&fixture_dir().join("run").join(format!("{name}.json")))
}

/// Loads case `name`, runs it, and returns (outputs, expected, tolerance).
fn run_numpy_case(name: &str) -> (Vec<DenseTensor>, Vec<DenseTensor>, f32) {
    let c = case(name);
    let outputs = run(&c.graph, &c.constants, &c.inputs).unwrap_or_else(|e| panic!("{name}: {e}"));
    (outputs, c.expected, c.tolerance)
}

/// Runs case `name` and compares every output: floats within `tolerance` relative to
/// `1 + |expected|`, integers and booleans exactly.
fn check(name: &str) {
    let (outputs, expected, tol) = run_numpy_case(name);
    assert_eq!(outputs.len(), expected.len());
    for (i, (got, want)) in outputs.iter().zip(&expected).enumerate() {
        assert_eq!(got.shape, want.shape, "{name}: output {i} shape");
        match (&got.data, &want.data) {
            (Buffer::F32(g), Buffer::F32(w)) => {
                for (j, (a, b)) in g.iter().zip(w).enumerate() {
                    assert!(
                        (a - b).abs() <= tol * (1.0 + b.abs()),
                        "{name}: output {i} element {j}: got {a}, expected {b}"
                    );
                }
            }
            (g, w) => assert_eq!(g, w, "{name}: output {i}"),
        }
    }
}

#[test]
fn mlp_matches_numpy() {
    check("mlp");
}

#[test]
fn cnn_matches_numpy() {
    check("cnn");
}

#[test]
fn transformer_block_matches_numpy() {
    check("transformer");
}

#[test]
fn unet_matches_numpy() {
    check("unet");
}

#[test]
fn lstm_cell_matches_numpy() {
    check("lstm");
}

#[test]
fn embedding_masks_and_integer_ops_match_numpy() {
    check("embed_mask");
}

#[test]
fn run_rejects_wrong_input_data() {
    let RunCase {
        graph,
        constants,
        mut inputs,
        ..
    } = case("mlp");
    let wrong_dtype = DenseTensor {
        shape: Shape::new(&[1, 8]).unwrap(),
        data: Buffer::I64(vec![0; 8]),
    };
    let e = run(&graph, &constants, &[wrong_dtype]).unwrap_err();
    assert_eq!(e.to_string(), "input \"x\": expected F32 data, got I64");
    let short = DenseTensor {
        shape: Shape::new(&[2, 8]).unwrap(),
        data: Buffer::F32(vec![0.0; 8]),
    };
    let e = run(&graph, &constants, &[short]).unwrap_err();
    assert!(e.to_string().contains("needs 16 elements, got 8"), "{e}");
    let mut described = MemoryConstants::new();
    described.describe_tensor("w1", DType::F32, &[16, 8]);
    let e = run(&graph, &described, &[inputs.swap_remove(0)]).unwrap_err();
    assert!(
        matches!(e, GraphError::Run { .. }) && e.to_string().contains("no data"),
        "{e}"
    );
}

#[test]
fn window_ops_and_float_masks_match_numpy() {
    check("windows");
}

#[test]
fn elementwise_reduction_and_layout_ops_match_numpy() {
    check("elementwise");
}
