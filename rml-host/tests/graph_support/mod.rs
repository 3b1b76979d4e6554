//! Shared helpers for the graph tests: fixture loading, constants as declared, and
//! JSON mutation for malformed variants.

#![allow(dead_code)]

use std::path::PathBuf;

use rml_core::DType;
use rml_host::graph::{Graph, GraphError, MemoryConstants, load_graph};
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
