//! Graph-level passes before planning: constant folding (a node whose inputs are all
//! constants runs once, on the reference interpreter, and its outputs become
//! constants) and dead-node elimination (nodes no graph output depends on).

use rml_core::Shape;

use super::buffer::Buffer;
use super::constants::ConstantValues;
use super::error::{GraphError, Site};
use super::interp::{In, run_node};
use super::ir::{Graph, ValueId};

/// Constant data by value: the weights' constants and the folded values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConstTable {
    /// Per [`ValueId`]: its shape and elements when the value is constant.
    pub values: Vec<Option<(Shape, Buffer)>>,
}

impl ConstTable {
    /// The constant value `id`, if it is one.
    pub fn get(&self, id: ValueId) -> Option<&(Shape, Buffer)> {
        self.values.get(id).and_then(Option::as_ref)
    }
}

/// The fixed shape of value `id`, when its declared dims are all integers.
fn fixed_shape(graph: &Graph, id: ValueId) -> Option<Shape> {
    let dims: Option<Vec<usize>> = graph.values[id]
        .ty
        .shape
        .iter()
        .map(|d| d.fixed())
        .collect();
    Shape::new(&dims?).ok()
}

/// Reads the constants from `weights` and folds every node whose inputs are all
/// constant. Returns the table and the indices of the nodes left to run.
pub fn fold_constants(
    graph: &Graph,
    weights: &dyn ConstantValues,
) -> Result<(ConstTable, Vec<usize>), GraphError> {
    let mut table = ConstTable {
        values: vec![None; graph.values.len()],
    };
    for &id in &graph.constants {
        let name = &graph.values[id].name;
        let data = weights.values(name).ok_or_else(|| GraphError::Run {
            site: Site::Constant(name.clone()),
            message: "the weights hold no data for it".to_string(),
        })?;
        let shape = fixed_shape(graph, id).ok_or_else(|| GraphError::Run {
            site: Site::Constant(name.clone()),
            message: "constant shapes must be fixed".to_string(),
        })?;
        table.values[id] = Some((shape, data.clone()));
    }
    let mut remaining = Vec::new();
    for (index, node) in graph.nodes.iter().enumerate() {
        let all_const = node
            .inputs
            .iter()
            .flatten()
            .all(|&i| table.values[i].is_some());
        let shapes: Option<Vec<Shape>> = node
            .outputs
            .iter()
            .map(|&o| fixed_shape(graph, o))
            .collect();
        let (true, Some(shapes)) = (all_const, shapes) else {
            remaining.push(index);
            continue;
        };
        let args: Vec<Option<In<'_>>> = node
            .inputs
            .iter()
            .map(|i| {
                i.map(|i| {
                    let (shape, data) = table.values[i].as_ref().expect("checked constant");
                    In {
                        name: &graph.values[i].name,
                        shape,
                        data,
                    }
                })
            })
            .collect();
        let outs = run_node(graph, node, &args, &shapes).map_err(|message| GraphError::Run {
            site: Site::Node(Box::new(node.describe(index))),
            message,
        })?;
        for ((&o, data), shape) in node.outputs.iter().zip(outs).zip(shapes) {
            table.values[o] = Some((shape, data));
        }
    }
    Ok((table, remaining))
}

/// Keeps the nodes of `nodes` (in order) that some graph output depends on.
pub fn eliminate_dead(graph: &Graph, nodes: &[usize]) -> Vec<usize> {
    let mut needed = vec![false; graph.values.len()];
    for &o in &graph.outputs {
        needed[o] = true;
    }
    let mut kept = Vec::new();
    for &index in nodes.iter().rev() {
        let node = &graph.nodes[index];
        if node.outputs.iter().any(|&o| needed[o]) {
            for &i in node.inputs.iter().flatten() {
                needed[i] = true;
            }
            kept.push(index);
        }
    }
    kept.reverse();
    kept
}
