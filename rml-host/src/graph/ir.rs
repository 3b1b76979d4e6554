//! The loaded graph: values with inferred types, typed nodes in topological order.

use rml_core::DType;

use super::dim::{Dim, show_dims};
use super::error::NodeRef;
use super::op::Op;

/// Index of a value in [`Graph::values`].
pub type ValueId = usize;

/// A value's element type and (possibly symbolic) shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorType {
    /// Element type.
    pub dtype: DType,
    /// Axis sizes, outermost first.
    pub shape: Vec<Dim>,
}

impl std::fmt::Display for TensorType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.dtype, show_dims(&self.shape))
    }
}

/// What defines a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueSource {
    /// Graph input number `i`.
    Input(usize),
    /// Constant number `i` (a tensor in the weights file).
    Constant(usize),
    /// Output `output` of node `node`.
    Node {
        /// The node's index.
        node: usize,
        /// Which of its outputs.
        output: usize,
    },
}

/// One named value of the graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    /// The name, unique in the graph.
    pub name: String,
    /// Dtype and shape, inferred at load.
    pub ty: TensorType,
    /// What defines it.
    pub source: ValueSource,
}

/// One operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// The optional label from the file (for messages and profiles).
    pub name: Option<String>,
    /// The op and its typed attributes.
    pub op: Op,
    /// The op name as written in the file.
    pub op_name: String,
    /// Input values; `None` for an optional input left out (`""`).
    pub inputs: Vec<Option<ValueId>>,
    /// Output values.
    pub outputs: Vec<ValueId>,
}

impl Node {
    /// How error messages name node `index`.
    pub fn describe(&self, index: usize) -> NodeRef {
        NodeRef {
            index,
            op: self.op_name.clone(),
            name: self.name.clone(),
        }
    }
}

/// A validated, shape-inferred rml-graph.
#[derive(Clone, Debug, PartialEq)]
pub struct Graph {
    /// The format version the file declared.
    pub version: u64,
    /// The weights file name, relative to the graph file.
    pub weights: Option<String>,
    /// Every value: inputs, constants, node outputs.
    pub values: Vec<Value>,
    /// The graph inputs, in declaration order.
    pub inputs: Vec<ValueId>,
    /// The constants, in declaration order.
    pub constants: Vec<ValueId>,
    /// The nodes, in topological order.
    pub nodes: Vec<Node>,
    /// The graph outputs, in declaration order.
    pub outputs: Vec<ValueId>,
}

impl Graph {
    /// The value named `name`, if any.
    pub fn value_id(&self, name: &str) -> Option<ValueId> {
        self.values.iter().position(|v| v.name == name)
    }

    /// The value `id`.
    pub fn value(&self, id: ValueId) -> &Value {
        &self.values[id]
    }
}
