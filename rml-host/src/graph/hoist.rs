//! Hoisting of shared-weight linears out of unrolled sequence loops.
//!
//! An exported recurrence applies the same input projection to every time step:
//! `linear(squeeze(slice(S, axis a, t:t+1)), W, b)` for each `t`, one small GEMM per
//! step that streams `W` again. When two or more such linears share the constant
//! weight (and bias), the slice source `S` and the axis (not the last one), they
//! become one `linear(S, W, b)` computed once — a GEMM over all the steps' rows —
//! and each step's result is `squeeze(slice(Y, a, t:t+1))` of it, a cheap copy. (XLA's
//! dot merger does the same.) A row of a GEMM does not depend on the other rows, so
//! the values are the same GEMM arithmetic on the same rows.

use std::collections::HashMap;

use super::dim::Dim;
use super::ir::{Graph, Node, TensorType, Value, ValueId, ValueSource};
use super::op::Op;

/// One linear that reads a single-index slice: where it sits and what it reads.
struct Member {
    node: usize,
    index: i64,
}

/// What hoisted linears share: weight, bias, slice source and sliced axis.
type Key = (ValueId, Option<ValueId>, ValueId, usize);

/// Rewrites `graph` as described in the module docs; a graph without such groups
/// comes back unchanged.
pub fn hoist_shared_linears(mut graph: Graph) -> Graph {
    let mut groups: HashMap<Key, Vec<Member>> = HashMap::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        if let Some((key, index)) = member(&graph, node) {
            groups
                .entry(key)
                .or_default()
                .push(Member { node: i, index });
        }
    }
    // Per replaced node: the hoisted linear's output and the step index.
    let mut replaced: HashMap<usize, (ValueId, usize, i64)> = HashMap::new();
    // Per group's first node: the hoisted linear to insert before it.
    let mut hoisted: HashMap<usize, Node> = HashMap::new();
    let mut keys: Vec<&Key> = groups.keys().filter(|k| groups[*k].len() >= 2).collect();
    keys.sort_unstable();
    for key in keys {
        let &(w, bias, source, axis) = key;
        let members = &groups[key];
        let m = graph.values[w].ty.shape[0].clone();
        let mut shape = graph.values[source].ty.shape.clone();
        *shape
            .last_mut()
            .expect("sliced sources have an axis after the sliced one") = m;
        let y = add_value(&mut graph, "hoisted", shape);
        let first = members[0].node;
        hoisted.insert(
            first,
            Node {
                name: graph.nodes[first].name.clone(),
                op: Op::Linear,
                op_name: "linear".into(),
                inputs: vec![Some(source), Some(w), bias],
                outputs: vec![y],
            },
        );
        for mb in members {
            replaced.insert(mb.node, (y, axis, mb.index));
        }
    }
    if replaced.is_empty() {
        return graph;
    }
    let old = std::mem::take(&mut graph.nodes);
    for (i, node) in old.into_iter().enumerate() {
        if let Some(h) = hoisted.remove(&i) {
            graph.nodes.push(h);
        }
        let Some(&(y, axis, index)) = replaced.get(&i) else {
            graph.nodes.push(node);
            continue;
        };
        let mut shape = graph.values[y].ty.shape.clone();
        shape[axis] = Dim::Fixed(1);
        let part = add_value(&mut graph, "hoisted.step", shape);
        graph.nodes.push(Node {
            name: node.name.clone(),
            op: Op::Slice {
                starts: vec![index],
                ends: vec![index + 1],
                axes: vec![axis as isize],
                steps: vec![1],
            },
            op_name: "slice".into(),
            inputs: vec![Some(y)],
            outputs: vec![part],
        });
        graph.nodes.push(Node {
            name: node.name,
            op: Op::Squeeze {
                axes: vec![axis as isize],
            },
            op_name: "squeeze".into(),
            inputs: vec![Some(part)],
            outputs: node.outputs,
        });
    }
    for (n, node) in graph.nodes.iter().enumerate() {
        for (output, &v) in node.outputs.iter().enumerate() {
            graph.values[v].source = ValueSource::Node { node: n, output };
        }
    }
    graph
}

/// `node` as a hoistable linear: its group key and its slice index.
fn member(graph: &Graph, node: &Node) -> Option<(Key, i64)> {
    let Op::Linear = node.op else { return None };
    let (x, w) = (
        node.inputs.first().copied().flatten()?,
        node.inputs.get(1).copied().flatten()?,
    );
    let bias = node.inputs.get(2).copied().flatten();
    let constant = |v: ValueId| matches!(graph.values[v].source, ValueSource::Constant(_));
    if !constant(w) || bias.is_some_and(|b| !constant(b)) || graph.values[w].ty.shape.len() != 2 {
        return None;
    }
    // x = squeeze(part, [a]); part = slice(S, [a], t:t+1).
    let squeeze = producer(graph, x)?;
    let Op::Squeeze { axes } = &squeeze.op else {
        return None;
    };
    let part = squeeze.inputs.first().copied().flatten()?;
    let slice = producer(graph, part)?;
    let Op::Slice {
        starts,
        ends,
        axes: sliced,
        steps,
    } = &slice.op
    else {
        return None;
    };
    let source = slice.inputs.first().copied().flatten()?;
    let rank = graph.values[source].ty.shape.len();
    let axis = |a: isize| usize::try_from(if a < 0 { a + rank as isize } else { a }).ok();
    let a = axis(*sliced.first()?)?;
    let (start, end) = (*starts.first()?, *ends.first()?);
    let one_step = steps.first().is_none_or(|&s| s == 1);
    let fits = sliced.len() == 1
        && axes.len() == 1
        && axis(axes[0]) == Some(a)
        && a + 1 < rank
        && one_step
        && start >= 0
        && end == start + 1
        && graph.values[source].ty.shape[a]
            .fixed()
            .is_some_and(|d| (start as usize) < d);
    fits.then_some(((w, bias, source, a), start))
}

/// The node that defines `v`, if a node does.
fn producer(graph: &Graph, v: ValueId) -> Option<&Node> {
    match graph.values[v].source {
        ValueSource::Node { node, .. } => graph.nodes.get(node),
        _ => None,
    }
}

/// Appends an F32 value of `shape` with a fresh name built on `stem`; its source
/// is set when the nodes are renumbered.
fn add_value(graph: &mut Graph, stem: &str, shape: Vec<Dim>) -> ValueId {
    let id = graph.values.len();
    let mut name = format!("{stem}.{id}");
    while graph.value_id(&name).is_some() {
        name.push('_');
    }
    graph.values.push(Value {
        name,
        ty: TensorType {
            dtype: rml_core::DType::F32,
            shape,
        },
        source: ValueSource::Input(usize::MAX),
    });
    id
}
