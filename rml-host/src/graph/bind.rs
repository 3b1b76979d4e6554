//! Binding: concrete input shapes in, the concrete shape of every value out.
//!
//! Symbols are read off the inputs (the first input that uses `N` fixes it; every
//! later use must agree), then every node's inference runs again on fixed dims —
//! the same rules as at load, now exact — and each result is checked against the
//! value's load-time type evaluated under the bindings.

use rml_core::Shape;

use super::dim::{Bindings, Dim, show_dims};
use super::error::GraphError;
use super::infer::{Arg, infer};
use super::ir::{Graph, TensorType};

/// The concrete shapes of a graph for one set of input shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundShapes {
    /// The value of every symbol.
    pub symbols: Bindings,
    /// The shape of every value, indexed by [`super::ValueId`].
    pub shapes: Vec<Shape>,
}

impl Graph {
    /// Binds the graph to concrete input shapes (in input order), giving every
    /// value's shape, or an error naming the input or node that does not fit.
    pub fn bind(&self, input_shapes: &[&[usize]]) -> Result<BoundShapes, GraphError> {
        if input_shapes.len() != self.inputs.len() {
            return Err(GraphError::BindArity {
                expected: self.inputs.len(),
                found: input_shapes.len(),
            });
        }
        let mut symbols = Bindings::new();
        for (&id, &got) in self.inputs.iter().zip(input_shapes) {
            bind_input(
                &self.values[id].name,
                &self.values[id].ty.shape,
                got,
                &mut symbols,
            )?;
        }
        let mut types: Vec<Option<TensorType>> = self
            .values
            .iter()
            .map(|v| {
                let fixed = v.ty.shape.iter().all(|d| d.fixed().is_some());
                fixed.then(|| v.ty.clone())
            })
            .collect();
        for (&id, &got) in self.inputs.iter().zip(input_shapes) {
            types[id] = Some(TensorType {
                dtype: self.values[id].ty.dtype,
                shape: got.iter().map(|&d| Dim::Fixed(d)).collect(),
            });
        }
        for (index, node) in self.nodes.iter().enumerate() {
            let fail = |message: String| GraphError::BindNode {
                node: node.describe(index),
                message,
            };
            let args: Vec<Option<Arg<'_>>> = node
                .inputs
                .iter()
                .map(|id| {
                    id.map(|id| Arg {
                        name: &self.values[id].name,
                        ty: types[id].as_ref().expect("inputs precede their uses"),
                    })
                })
                .collect();
            let symbol = |s: &str| symbols.get(s).map(|&n| Dim::Fixed(n));
            let outs = infer(&node.op, &args, node.outputs.len(), &symbol).map_err(fail)?;
            for (&id, ty) in node.outputs.iter().zip(outs) {
                let value = &self.values[id];
                check_against(&value.ty.shape, &ty.shape, &symbols).map_err(|()| {
                    fail(format!(
                        "output {:?}: expected {} = {}, got {}",
                        value.name,
                        show_dims(&value.ty.shape),
                        show_evaluated(&value.ty.shape, &symbols),
                        show_dims(&ty.shape)
                    ))
                })?;
                types[id] = Some(ty);
            }
        }
        let shapes = types
            .into_iter()
            .map(|ty| {
                let ty = ty.expect("every value is defined");
                let dims: Vec<usize> = ty
                    .shape
                    .iter()
                    .map(|d| d.fixed().expect("bound dims are fixed"))
                    .collect();
                Shape::new(&dims).expect("ranks are checked at load")
            })
            .collect();
        Ok(BoundShapes { symbols, shapes })
    }
}

/// Matches one input's declared dims against a concrete shape, binding symbols.
fn bind_input(
    name: &str,
    declared: &[Dim],
    got: &[usize],
    symbols: &mut Bindings,
) -> Result<(), GraphError> {
    let fail = |note: Option<String>| GraphError::BindInput {
        name: name.to_string(),
        expected: show_dims(declared),
        got: format!("[{}]", super::error::join(got)),
        note,
    };
    if declared.len() != got.len() {
        return Err(fail(None));
    }
    for (d, &n) in declared.iter().zip(got) {
        match (d, d.as_symbol()) {
            (Dim::Fixed(k), _) if *k != n => return Err(fail(None)),
            (_, Some(s)) => match symbols.get(s) {
                Some(&bound) if bound != n => {
                    return Err(fail(Some(format!("{s} is already bound to {bound}"))));
                }
                _ => {
                    symbols.insert(s.to_string(), n);
                }
            },
            _ => {}
        }
    }
    Ok(())
}

/// Checks concrete dims against symbolic ones under `symbols` (unknown dims match).
fn check_against(symbolic: &[Dim], concrete: &[Dim], symbols: &Bindings) -> Result<(), ()> {
    if symbolic.len() != concrete.len() {
        return Err(());
    }
    for (s, c) in symbolic.iter().zip(concrete) {
        match (s.eval(symbols), c.fixed()) {
            (Some(a), Some(b)) if a != b => return Err(()),
            (_, None) => return Err(()),
            _ => {}
        }
    }
    Ok(())
}

/// Symbolic dims evaluated under `symbols`, `?` where unknown.
fn show_evaluated(dims: &[Dim], symbols: &Bindings) -> String {
    let shown: Vec<String> = dims
        .iter()
        .map(|d| d.eval(symbols).map_or("?".to_string(), |n| n.to_string()))
        .collect();
    format!("[{}]", shown.join(", "))
}
