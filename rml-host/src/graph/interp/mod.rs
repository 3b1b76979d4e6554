//! The reference interpreter: runs a loaded graph node by node on rml-core's
//! readable reference ops, each output in a fresh `Vec`. It is the correctness
//! baseline that the planned, fused and threaded executor is tested against, not a
//! fast path.
//!
//! Values are `F32`, `I64` (indices, `argmax`) or `BOOL` (masks); float ops compute in
//! f32, and data-movement ops (`reshape`, `concat`, `gather`, `where`, …) work on all
//! three. A graph using another dtype fails by name when it runs.

pub(crate) mod float;
pub(crate) mod layout;

use rml_core::{Shape, TensorView, TensorViewMut};

use super::buffer::{Buffer, BufferElement, DenseTensor};
use super::constants::ConstantValues;
use super::error::{GraphError, Site};
use super::ir::{Graph, Node};
use super::op::Op;

/// One present input of a node while it runs.
#[derive(Clone, Copy)]
pub(crate) struct In<'a> {
    /// The value's name (for messages).
    pub name: &'a str,
    /// Its concrete shape.
    pub shape: &'a Shape,
    /// Its elements.
    pub data: &'a Buffer,
}

/// Run failures are messages; the caller adds the node.
pub(crate) type R<T> = Result<T, String>;

impl<'a> In<'a> {
    /// A view of the elements as `T`, or an error naming the dtype found.
    pub(crate) fn view<T: BufferElement>(&self) -> R<TensorView<'a, T>> {
        let data = T::slice(self.data).ok_or_else(|| {
            format!(
                "input {:?}: the reference interpreter cannot run this op on {}",
                self.name,
                self.data.dtype()
            )
        })?;
        TensorView::new(data, *self.shape).map_err(|e| format!("input {:?}: {e}", self.name))
    }
}

/// An rml-core error as a message.
pub(crate) fn core(e: rml_core::Error) -> String {
    e.to_string()
}

/// A zeroed output of `shape` filled by `fill` through a mutable view.
pub(crate) fn output<T: BufferElement>(
    shape: &Shape,
    fill: impl FnOnce(&mut TensorViewMut<'_, T>) -> rml_core::Result<()>,
) -> R<Buffer> {
    let mut data = vec![T::default(); shape.numel()];
    let mut view = TensorViewMut::new(&mut data, *shape).map_err(core)?;
    fill(&mut view).map_err(core)?;
    Ok(T::wrap(data))
}

/// Runs `graph` on `inputs` (in input order), reading constants from `constants`,
/// and returns the graph outputs in output order.
pub fn run(
    graph: &Graph,
    constants: &dyn ConstantValues,
    inputs: &[DenseTensor],
) -> Result<Vec<DenseTensor>, GraphError> {
    let dims: Vec<&[usize]> = inputs.iter().map(|t| t.shape.dims()).collect();
    let bound = graph.bind(&dims)?;
    let mut values: Vec<Option<Buffer>> = vec![None; graph.values.len()];
    for (&id, input) in graph.inputs.iter().zip(inputs) {
        let site = Site::Input(graph.values[id].name.clone());
        check_buffer(graph, id, &input.data, &bound.shapes[id], site)?;
        values[id] = Some(input.data.clone());
    }
    for &id in &graph.constants {
        let name = &graph.values[id].name;
        let site = Site::Constant(name.clone());
        let data = constants.values(name).ok_or_else(|| GraphError::Run {
            site: site.clone(),
            message: "the weights hold no data for it".to_string(),
        })?;
        check_buffer(graph, id, data, &bound.shapes[id], site)?;
        values[id] = Some(data.clone());
    }
    for (index, node) in graph.nodes.iter().enumerate() {
        let fail = |message: String| GraphError::Run {
            site: Site::Node(Box::new(node.describe(index))),
            message,
        };
        let args: Vec<Option<In<'_>>> = node
            .inputs
            .iter()
            .map(|id| {
                id.map(|id| In {
                    name: &graph.values[id].name,
                    shape: &bound.shapes[id],
                    data: values[id].as_ref().expect("defined before use"),
                })
            })
            .collect();
        let out_shapes: Vec<Shape> = node.outputs.iter().map(|&id| bound.shapes[id]).collect();
        let outs = run_node(graph, node, &args, &out_shapes).map_err(fail)?;
        for (&id, data) in node.outputs.iter().zip(outs) {
            values[id] = Some(data);
        }
    }
    Ok(graph
        .outputs
        .iter()
        .map(|&id| DenseTensor {
            shape: bound.shapes[id],
            data: values[id].clone().expect("every value is computed"),
        })
        .collect())
}

/// Checks that `data` has value `id`'s dtype and `shape`'s element count.
fn check_buffer(
    graph: &Graph,
    id: usize,
    data: &Buffer,
    shape: &Shape,
    site: Site,
) -> Result<(), GraphError> {
    let dtype = graph.values[id].ty.dtype;
    let message = if data.dtype() != dtype {
        format!("expected {dtype} data, got {}", data.dtype())
    } else if data.len() != shape.numel() {
        format!(
            "shape {shape} needs {} elements, got {}",
            shape.numel(),
            data.len()
        )
    } else {
        return Ok(());
    };
    Err(GraphError::Run { site, message })
}

/// Runs one node: data movement on any held dtype, arithmetic in f32.
pub(crate) fn run_node(
    graph: &Graph,
    node: &Node,
    args: &[Option<In<'_>>],
    outs: &[Shape],
) -> R<Vec<Buffer>> {
    let out_dtype = graph.values[node.outputs[0]].ty.dtype;
    match &node.op {
        Op::Cast { .. } => Ok(vec![layout::cast(req(args, 0)?, out_dtype, &outs[0])?]),
        op if layout::handles(op) => layout::run(op, args, outs),
        op => float::run(op, args, &outs[0]).map(|b| vec![b]),
    }
}

/// Required input `i`.
pub(crate) fn req<'a>(args: &[Option<In<'a>>], i: usize) -> R<In<'a>> {
    args.get(i)
        .copied()
        .flatten()
        .ok_or_else(|| format!("input {i} is required"))
}
