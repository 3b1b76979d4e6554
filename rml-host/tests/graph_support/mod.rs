//! Shared helpers for the graph tests: fixture loading (the NumPy run cases
//! included), constants as declared, and JSON mutation for malformed variants.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use rml_core::{DType, Shape};
use rml_host::graph::{Buffer, DenseTensor, Graph, GraphError, MemoryConstants, load_graph};
use serde_json::Value;

/// The directory holding the graph fixtures.
pub fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/graph")
}

/// A fixture's JSON.
pub fn fixture(name: &str) -> Value {
    let text = std::fs::read_to_string(fixture_dir().join(name)).expect("fixture exists");
    serde_json::from_str(&text).expect("fixture is JSON")
}

/// A JSON shape of whole numbers as dims.
pub fn dims(shape: &Value) -> Vec<usize> {
    let dims = shape.as_array().expect("a shape is an array");
    dims.iter().map(|d| d.as_u64().unwrap() as usize).collect()
}

/// A JSON tensor `{dtype, shape, data}` (F32, I64 or BOOL) as a dense tensor.
pub fn dense(t: &Value) -> DenseTensor {
    let dims = dims(&t["shape"]);
    let items = t["data"].as_array().unwrap();
    let data = match t["dtype"].as_str().unwrap() {
        "F32" => Buffer::F32(items.iter().map(|v| v.as_f64().unwrap() as f32).collect()),
        "I64" => Buffer::I64(items.iter().map(|v| v.as_i64().unwrap()).collect()),
        "BOOL" => Buffer::Bool(items.iter().map(|v| v.as_u64().unwrap() as u8).collect()),
        other => panic!("fixture dtype {other}"),
    };
    DenseTensor {
        shape: Shape::new(&dims).unwrap(),
        data,
    }
}

/// A NumPy case of `fixtures/graph/run/` (written by `scripts/fixtures/graph.py`):
/// its graph loaded with its constants, its inputs, the expected outputs and the
/// tolerance.
pub struct RunCase {
    /// The loaded graph.
    pub graph: Graph,
    /// Its constants, with their values.
    pub constants: MemoryConstants,
    /// The inputs.
    pub inputs: Vec<DenseTensor>,
    /// NumPy's outputs (float64, rounded once).
    pub expected: Vec<DenseTensor>,
    /// Tolerance relative to `1 + |expected|`.
    pub tolerance: f32,
}

/// Reads the NumPy case at `path`.
pub fn run_case(path: &Path) -> RunCase {
    let what = path.display();
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{what}: {e}"));
    let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut constants = MemoryConstants::new();
    for (name, t) in doc["constants"].as_object().unwrap() {
        let t = dense(t);
        constants.insert(name, t.shape.dims(), t.data);
    }
    let graph =
        load_graph(&doc["graph"].to_string(), &constants).unwrap_or_else(|e| panic!("{what}: {e}"));
    let tensors = |key: &str| doc[key].as_array().unwrap().iter().map(dense).collect();
    RunCase {
        graph,
        constants,
        inputs: tensors("inputs"),
        expected: tensors("outputs"),
        tolerance: doc["tolerance"].as_f64().unwrap() as f32,
    }
}

/// Constants described exactly as `doc` declares them (symbolic dims, which a
/// constant may not have, read as 1).
pub fn declared_constants(doc: &Value) -> MemoryConstants {
    let mut constants = MemoryConstants::new();
    for c in doc["constants"].as_array().into_iter().flatten() {
        let dtype = DType::parse(c["dtype"].as_str().unwrap()).unwrap();
        let shape: Vec<usize> = c["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap_or(1) as usize)
            .collect();
        constants.describe_tensor(c["name"].as_str().unwrap(), dtype, &shape);
    }
    constants
}

/// Loads `doc` with its constants as declared.
pub fn load(doc: &Value) -> Result<Graph, GraphError> {
    load_graph(&doc.to_string(), &declared_constants(doc))
}

/// Loads fixture `name` after `change` edits its JSON.
pub fn load_changed(name: &str, change: impl FnOnce(&mut Value)) -> Result<Graph, GraphError> {
    let mut doc = fixture(name);
    change(&mut doc);
    load(&doc)
}

/// The error of loading fixture `name` after `change`, which must fail.
pub fn error_of(name: &str, change: impl FnOnce(&mut Value)) -> GraphError {
    load_changed(name, change).expect_err("the changed graph must be rejected")
}

/// The inferred type of value `name`, shown as `F32 [N, 3]`.
pub fn type_of(graph: &Graph, name: &str) -> String {
    let id = graph
        .value_id(name)
        .unwrap_or_else(|| panic!("no value {name}"));
    graph.value(id).ty.to_string()
}
