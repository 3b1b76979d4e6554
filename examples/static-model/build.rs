//! Compiles a zoo rml-graph MLP into Rust `static` arrays (`$OUT_DIR/model.rs`).
//!
//! The fixture folder (`graph.json`, its safetensors weights, `inputs.npz`) is
//! `zoo/fixtures/mlp/torch` under the repository root, or the folder named by
//! `RML_EMBED_FIXTURE`. The graph is loaded and validated by rml-host's graph loader;
//! it must be a chain of `linear` nodes, each optionally followed by `relu`. Anything
//! else fails the build with a message naming the node. The output is a pure function
//! of the fixture's bytes (floats are written in Rust's shortest round-trip form).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use rml_host::formats::npy::Npz;
use rml_host::graph::ir::ValueSource;
use rml_host::graph::op::{Op, UnaryFn};
use rml_host::graph::tensors::load_weights;
use rml_host::graph::{Buffer, Graph, MemoryConstants, load_graph};

/// Environment variable naming another fixture folder (testing before the zoo lands).
const FIXTURE_ENV: &str = "RML_EMBED_FIXTURE";
/// The fixture folder, relative to the repository root.
const DEFAULT_FIXTURE: &str = "zoo/fixtures/mlp/torch";

/// One `linear` (+ optional `relu`) of the chain.
struct Layer {
    name: String,
    inputs: usize,
    outputs: usize,
    weight: Vec<f32>,
    bias: Option<Vec<f32>>,
    relu: bool,
}

fn main() {
    println!("cargo:rerun-if-env-changed={FIXTURE_ENV}");
    let (dir, shown) = match std::env::var(FIXTURE_ENV) {
        Ok(dir) => (PathBuf::from(&dir), dir),
        Err(_) => {
            let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            (root.join(DEFAULT_FIXTURE), DEFAULT_FIXTURE.to_string())
        }
    };
    let code = generate(&dir, &shown).unwrap_or_else(|e| {
        eprintln!(
            "rml-static-model: cannot compile the model in {}: {e}\n\
             (set {FIXTURE_ENV} to another fixture folder)",
            dir.display()
        );
        std::process::exit(1);
    });
    let out = Path::new(&std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("model.rs");
    std::fs::write(&out, code).expect("OUT_DIR is writable");
}

/// Reads the fixture in `dir` and returns the Rust source of the model.
fn generate(dir: &Path, shown: &str) -> Result<String, String> {
    let graph_path = dir.join("graph.json");
    for file in ["graph.json", "inputs.npz"] {
        println!("cargo:rerun-if-changed={}", dir.join(file).display());
    }
    let text = std::fs::read_to_string(&graph_path)
        .map_err(|e| format!("{}: {e}", graph_path.display()))?;
    let weights_name = weights_name(&text)?;
    let weights_path = dir.join(&weights_name);
    println!("cargo:rerun-if-changed={}", weights_path.display());
    let weights = load_weights(&weights_path).map_err(|e| e.to_string())?;
    let graph = load_graph(&text, &weights).map_err(|e| format!("graph.json: {e}"))?;
    let layers = chain(&graph, &weights)?;
    let x = Npz::open(dir.join("inputs.npz"))
        .and_then(|npz| npz.get("x"))
        .map_err(|e| e.to_string())?;
    let first = &layers[0];
    if x.rank() != 2 || x.dims()[1] != first.inputs {
        return Err(format!(
            "inputs.npz: x has shape {:?}, the model takes [rows, {}]",
            x.dims(),
            first.inputs
        ));
    }
    let x_data: Vec<f32> = x
        .to_vec()
        .map_err(|e| format!("inputs.npz: x: {e} (f32 expected)"))?;
    emit(shown, &layers, x.dims()[0], &x_data)
}

/// The `weights` file a graph document names (the graph loader checks the rest).
fn weights_name(text: &str) -> Result<String, String> {
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("graph.json: {e}"))?;
    match doc.get("weights").and_then(|w| w.as_str()) {
        Some(name) => Ok(name.to_string()),
        None => Err("graph.json names no weights file".into()),
    }
}

/// Walks the graph as a chain of dense layers from its one input to its one output.
fn chain(graph: &Graph, weights: &MemoryConstants) -> Result<Vec<Layer>, String> {
    if graph.inputs.len() != 1 || graph.outputs.len() != 1 {
        return Err("the graph must have exactly one input and one output".into());
    }
    let mut current = graph.inputs[0];
    let mut layers: Vec<Layer> = Vec::new();
    for (index, node) in graph.nodes.iter().enumerate() {
        let at = node.describe(index);
        if node.inputs.first().copied().flatten() != Some(current) {
            return Err(format!(
                "{at}: does not consume the previous layer's output (only a chain of layers is supported)"
            ));
        }
        match &node.op {
            Op::Linear => {
                let weight = constant(graph, weights, node.inputs[1], &at)?;
                let bias = match node.inputs.get(2).copied().flatten() {
                    Some(id) => Some(constant(graph, weights, Some(id), &at)?.1),
                    None => None,
                };
                let (dims, weight) = weight;
                layers.push(Layer {
                    name: node.name.clone().unwrap_or_else(|| format!("node{index}")),
                    inputs: dims[1],
                    outputs: dims[0],
                    weight,
                    bias,
                    relu: false,
                });
            }
            Op::Unary(UnaryFn::Relu) => match layers.last_mut() {
                Some(layer) if !layer.relu => layer.relu = true,
                _ => return Err(format!("{at}: relu must directly follow a linear node")),
            },
            _ => {
                return Err(format!(
                    "{at}: op {:?} is not supported here (supported: linear, relu)",
                    node.op_name
                ));
            }
        }
        current = node.outputs[0];
    }
    if layers.is_empty() || graph.outputs[0] != current {
        return Err("the graph output must be the last node of a non-empty chain".into());
    }
    Ok(layers)
}

/// The dims and f32 data of a constant input of a node.
fn constant(
    graph: &Graph,
    weights: &MemoryConstants,
    id: Option<usize>,
    at: &impl std::fmt::Display,
) -> Result<(Vec<usize>, Vec<f32>), String> {
    let value = id.map(|id| graph.value(id));
    let value = match value {
        Some(v) if matches!(v.source, ValueSource::Constant(_)) => v,
        _ => return Err(format!("{at}: weight and bias must be constants")),
    };
    match weights.get(&value.name) {
        Some(t) => match &t.data {
            Some(Buffer::F32(data)) => Ok((t.shape.clone(), data.clone())),
            _ => Err(format!("{at}: constant {:?} is not f32", value.name)),
        },
        None => Err(format!("{at}: constant {:?} is missing", value.name)),
    }
}

/// The generated Rust source.
fn emit(source: &str, layers: &[Layer], rows: usize, x: &[f32]) -> Result<String, String> {
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(
        w,
        "// Generated by rml-static-model's build.rs from {source}; do not edit.\n"
    );
    let _ = writeln!(w, "/// The fixture folder the model was compiled from.");
    let _ = writeln!(w, "pub const SOURCE: &str = {source:?};");
    for (i, layer) in layers.iter().enumerate() {
        array(
            w,
            &format!("W{i}"),
            &format!("{}.weight", layer.name),
            &layer.weight,
            false,
        )?;
        if let Some(bias) = &layer.bias {
            array(
                w,
                &format!("B{i}"),
                &format!("{}.bias", layer.name),
                bias,
                false,
            )?;
        }
    }
    let _ = writeln!(w, "/// The layers, input to output.");
    let _ = writeln!(w, "pub static LAYERS: [Dense; {}] = [", layers.len());
    for (i, l) in layers.iter().enumerate() {
        let bias = if l.bias.is_some() {
            format!("Some(&B{i})")
        } else {
            "None".into()
        };
        let act = if l.relu { "Relu" } else { "None" };
        let _ = writeln!(
            w,
            "    Dense {{ name: {:?}, weight: &W{i}, bias: {bias}, inputs: {}, outputs: {}, activation: Activation::{act} }},",
            l.name, l.inputs, l.outputs
        );
    }
    let _ = writeln!(w, "];");
    let hidden = layers[..layers.len() - 1]
        .iter()
        .map(|l| l.outputs)
        .max()
        .unwrap_or(0);
    let consts = [
        ("INPUT_WIDTH", layers[0].inputs, "Features per input row."),
        (
            "OUTPUT_WIDTH",
            layers[layers.len() - 1].outputs,
            "Values per output row.",
        ),
        (
            "HIDDEN_WIDTH",
            hidden,
            "The widest hidden activation (0 for one layer).",
        ),
        ("INPUT_ROWS", rows, "Rows of the fixture input [`INPUT`]."),
    ];
    for (name, value, doc) in consts {
        let _ = writeln!(w, "/// {doc}\npub const {name}: usize = {value};");
    }
    array(
        w,
        "INPUT",
        "The fixture input `x` (`inputs.npz`), row-major.",
        x,
        true,
    )?;
    Ok(s)
}

/// Writes `static NAME: [f32; N] = [...];` with round-trip float literals.
fn array(w: &mut String, name: &str, doc: &str, data: &[f32], public: bool) -> Result<(), String> {
    if let Some(v) = data.iter().find(|v| !v.is_finite()) {
        return Err(format!("{doc}: holds {v}, which firmware cannot embed"));
    }
    let vis = if public { "pub " } else { "" };
    let _ = writeln!(
        w,
        "/// {doc}\n{vis}static {name}: [f32; {}] = [",
        data.len()
    );
    for chunk in data.chunks(8) {
        let line: Vec<String> = chunk.iter().map(|v| format!("{v:?}")).collect();
        let _ = writeln!(w, "    {},", line.join(", "));
    }
    let _ = writeln!(w, "];");
    Ok(())
}
