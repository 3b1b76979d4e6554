//! Reading an rml-graph document: JSON → checked names → typed ops → inferred types.
//!
//! The order of checks is the order of the file: format and version, inputs,
//! constants (against a [`ConstantSource`]), nodes one by one (op, attributes,
//! arity, input names, inference, output names), then graph outputs against their
//! declarations. The first problem found is returned.

use std::collections::{BTreeSet, HashMap};

use rml_core::{DType, MAX_RANK};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::constants::ConstantSource;
use super::dim::{Dim, show_dims};
use super::error::{GraphError, NodeRef, Site};
use super::infer::{Arg, infer};
use super::ir::{Graph, Node, TensorType, ValueId, ValueSource};
use super::parse_op::parse_op;
use super::{FORMAT_NAME, SUPPORTED_VERSIONS};

/// The document as written, before any checks beyond JSON types.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGraph {
    #[allow(dead_code)]
    format: String,
    #[allow(dead_code)]
    version: u64,
    #[serde(default)]
    weights: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    metadata: Map<String, Value>,
    inputs: Vec<RawTensor>,
    #[serde(default)]
    constants: Vec<RawTensor>,
    nodes: Vec<RawNode>,
    outputs: Vec<RawTensor>,
}

/// A declared input, constant or output.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTensor {
    name: String,
    dtype: String,
    shape: Vec<Value>,
}

/// A node as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    op: String,
    #[serde(default)]
    name: Option<String>,
    inputs: Vec<String>,
    outputs: Vec<String>,
    #[serde(default)]
    attrs: Map<String, Value>,
}

/// Loads and validates an rml-graph from JSON text, checking every constant
/// against `constants`, and infers every value's dtype and shape.
pub fn load_graph(text: &str, constants: &dyn ConstantSource) -> Result<Graph, GraphError> {
    let parse = |e: serde_json::Error| GraphError::Parse {
        message: e.to_string(),
    };
    let doc: Value = serde_json::from_str(text).map_err(parse)?;
    check_header(&doc)?;
    let raw: RawGraph = serde_json::from_str(text).map_err(parse)?;
    let version = doc["version"].as_u64().unwrap_or_default();
    Builder::new(version, raw.weights.clone()).build(raw, constants)
}

/// Checks `format` and `version` before the rest of the document is read, so a
/// file of another version fails on its version, not on a key it renamed.
fn check_header(doc: &Value) -> Result<(), GraphError> {
    let format = doc.get("format").and_then(Value::as_str);
    if format != Some(FORMAT_NAME) {
        return Err(GraphError::UnknownFormat {
            found: doc
                .get("format")
                .map_or("nothing".to_string(), Value::to_string),
        });
    }
    match doc.get("version").and_then(Value::as_u64) {
        Some(v) if SUPPORTED_VERSIONS.contains(&v) => Ok(()),
        Some(v) => Err(GraphError::UnsupportedVersion {
            found: v,
            supported: SUPPORTED_VERSIONS,
        }),
        None => Err(GraphError::Parse {
            message: "\"version\" must be a non-negative integer".to_string(),
        }),
    }
}

/// The graph under construction and the name table.
struct Builder {
    graph: Graph,
    names: HashMap<String, (ValueId, Site)>,
    symbols: BTreeSet<String>,
}

impl Builder {
    /// An empty graph.
    fn new(version: u64, weights: Option<String>) -> Builder {
        Builder {
            graph: Graph {
                version,
                weights,
                values: Vec::new(),
                inputs: Vec::new(),
                constants: Vec::new(),
                nodes: Vec::new(),
                outputs: Vec::new(),
            },
            names: HashMap::new(),
            symbols: BTreeSet::new(),
        }
    }

    /// Runs every check in file order.
    fn build(mut self, raw: RawGraph, source: &dyn ConstantSource) -> Result<Graph, GraphError> {
        for (i, input) in raw.inputs.iter().enumerate() {
            let site = Site::Input(input.name.clone());
            let ty = declared_type(input, &site, DimRule::InputDims)?;
            self.symbols.extend(
                ty.shape
                    .iter()
                    .flat_map(|d| d.symbols().map(str::to_string)),
            );
            let id = self.define(&input.name, ty, ValueSource::Input(i), site)?;
            self.graph.inputs.push(id);
        }
        if !raw.constants.is_empty() && raw.weights.is_none() {
            return Err(GraphError::MissingWeights);
        }
        for (i, constant) in raw.constants.iter().enumerate() {
            let site = Site::Constant(constant.name.clone());
            let ty = declared_type(constant, &site, DimRule::Fixed)?;
            check_constant(&constant.name, &ty, source)?;
            let id = self.define(&constant.name, ty, ValueSource::Constant(i), site)?;
            self.graph.constants.push(id);
        }
        let later: HashMap<&str, usize> = raw
            .nodes
            .iter()
            .enumerate()
            .rev()
            .flat_map(|(i, n)| n.outputs.iter().map(move |o| (o.as_str(), i)))
            .collect();
        for (index, node) in raw.nodes.iter().enumerate() {
            self.add_node(index, node, &raw.nodes, &later)?;
        }
        for output in &raw.outputs {
            self.add_output(output)?;
        }
        Ok(self.graph)
    }

    /// Registers a new value, rejecting a name already taken.
    fn define(
        &mut self,
        name: &str,
        ty: TensorType,
        source: ValueSource,
        site: Site,
    ) -> Result<ValueId, GraphError> {
        if name.is_empty() {
            return Err(GraphError::BadName {
                site,
                name: name.to_string(),
            });
        }
        if let Some((_, first)) = self.names.get(name) {
            return Err(GraphError::DuplicateName {
                name: name.to_string(),
                first: first.clone(),
                second: site,
            });
        }
        if ty.shape.len() > MAX_RANK {
            return Err(GraphError::BadShape {
                site,
                message: format!(
                    "rank {} exceeds the maximum rank {MAX_RANK}",
                    ty.shape.len()
                ),
            });
        }
        let id = self.graph.values.len();
        self.graph.values.push(super::ir::Value {
            name: name.to_string(),
            ty,
            source,
        });
        self.names.insert(name.to_string(), (id, site));
        Ok(id)
    }

    /// The value `name` used at `site`, distinguishing "defined later" from
    /// "never defined".
    fn lookup(
        &self,
        name: &str,
        site: &Site,
        nodes: &[RawNode],
        later: &HashMap<&str, usize>,
    ) -> Result<ValueId, GraphError> {
        if let Some((id, _)) = self.names.get(name) {
            return Ok(*id);
        }
        Err(match later.get(name) {
            Some(&j) => GraphError::UsedBeforeDefinition {
                site: site.clone(),
                name: name.to_string(),
                defined_at: Site::Node(Box::new(node_ref(j, &nodes[j]))),
            },
            None => GraphError::UndefinedName {
                site: site.clone(),
                name: name.to_string(),
            },
        })
    }

    /// Parses, checks and infers node `index`, then defines its outputs.
    fn add_node(
        &mut self,
        index: usize,
        raw: &RawNode,
        nodes: &[RawNode],
        later: &HashMap<&str, usize>,
    ) -> Result<(), GraphError> {
        let node = node_ref(index, raw);
        let site = Site::Node(Box::new(node.clone()));
        let op = parse_op(&node, &raw.attrs)?;
        let arity = op.arity();
        let arity_error = |what, expected: String, found| GraphError::Arity {
            node: node.clone(),
            what,
            expected,
            found,
        };
        let n_in = raw.inputs.len();
        if n_in < arity.required || n_in > arity.max {
            let expected = match (arity.required, arity.max) {
                (lo, usize::MAX) => format!("at least {lo}"),
                (lo, hi) if lo == hi => lo.to_string(),
                (lo, hi) => format!("{lo} to {hi}"),
            };
            return Err(arity_error("inputs", expected, n_in));
        }
        match arity.outputs {
            Some(n) if raw.outputs.len() != n => {
                return Err(arity_error("outputs", n.to_string(), raw.outputs.len()));
            }
            None if raw.outputs.is_empty() => {
                return Err(arity_error("outputs", "at least 1".to_string(), 0));
            }
            _ => {}
        }
        let mut inputs = Vec::with_capacity(n_in);
        for (i, name) in raw.inputs.iter().enumerate() {
            inputs.push(match name.as_str() {
                "" if i >= arity.required => None,
                "" => {
                    return Err(GraphError::Infer {
                        node: node.clone(),
                        message: format!("input {i} is required and cannot be left out (\"\")"),
                    });
                }
                name => Some(self.lookup(name, &site, nodes, later)?),
            });
        }
        let args: Vec<Option<Arg<'_>>> = inputs
            .iter()
            .map(|id| {
                id.map(|id| {
                    let value = &self.graph.values[id];
                    Arg {
                        name: &value.name,
                        ty: &value.ty,
                    }
                })
            })
            .collect();
        let symbols = &self.symbols;
        let symbol = |s: &str| symbols.contains(s).then(|| Dim::symbol(s));
        let types =
            infer(&op, &args, raw.outputs.len(), &symbol).map_err(|message| GraphError::Infer {
                node: node.clone(),
                message,
            })?;
        let mut outputs = Vec::with_capacity(types.len());
        for (output, (name, ty)) in raw.outputs.iter().zip(types).enumerate() {
            let source = ValueSource::Node {
                node: index,
                output,
            };
            outputs.push(self.define(name, ty, source, site.clone())?);
        }
        self.graph.nodes.push(Node {
            name: raw.name.clone(),
            op,
            op_name: raw.op.clone(),
            inputs,
            outputs,
        });
        Ok(())
    }

    /// Checks a graph output against its declaration, refining unknown dims with
    /// declared ones (binding checks them).
    fn add_output(&mut self, output: &RawTensor) -> Result<(), GraphError> {
        let site = Site::Output(output.name.clone());
        let Some(&(id, _)) = self.names.get(&output.name) else {
            return Err(GraphError::UndefinedName {
                site,
                name: output.name.clone(),
            });
        };
        let declared = declared_type(output, &site, DimRule::Any)?;
        if let Some(s) = declared
            .shape
            .iter()
            .flat_map(|d| d.symbols())
            .find(|s| !self.symbols.contains(*s))
        {
            return Err(GraphError::BadShape {
                site,
                message: format!("symbol {s:?} is not bound by any graph input"),
            });
        }
        let inferred = &mut self.graph.values[id].ty;
        let mismatch = || GraphError::OutputMismatch {
            name: output.name.clone(),
            declared: format!("{} {}", declared.dtype, show_dims(&declared.shape)),
            inferred: inferred.to_string(),
        };
        if declared.dtype != inferred.dtype || declared.shape.len() != inferred.shape.len() {
            return Err(mismatch());
        }
        let mut refined = inferred.shape.clone();
        for (r, d) in refined.iter_mut().zip(&declared.shape) {
            match (&*r, d) {
                (_, Dim::Unknown) => {}
                (Dim::Unknown, d) => *r = d.clone(),
                (i, d) if i == d => {}
                _ => return Err(mismatch()),
            }
        }
        inferred.shape = refined;
        self.graph.outputs.push(id);
        Ok(())
    }
}

/// How a declaration's dims may be written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum DimRule {
    /// Integers or plain symbols (graph inputs: binding reads symbols off them).
    InputDims,
    /// Integers only (constants).
    Fixed,
    /// Integers, symbol products and `?` (graph outputs).
    Any,
}

/// The dtype and shape of a declaration.
fn declared_type(raw: &RawTensor, site: &Site, rule: DimRule) -> Result<TensorType, GraphError> {
    let dtype = match DType::parse(&raw.dtype) {
        Ok(d) if !d.is_quantized() => d,
        _ => {
            return Err(GraphError::BadDType {
                site: site.clone(),
                found: raw.dtype.clone(),
            });
        }
    };
    let bad = |message: String| GraphError::BadShape {
        site: site.clone(),
        message,
    };
    let mut shape = Vec::with_capacity(raw.shape.len());
    for value in &raw.shape {
        let dim = Dim::parse(value, rule == DimRule::Any).map_err(bad)?;
        match (rule, &dim) {
            (DimRule::Fixed, Dim::Sym(_)) => {
                return Err(bad(format!("dim {dim} must be a fixed size here")));
            }
            (DimRule::InputDims, Dim::Sym(_)) if dim.as_symbol().is_none() => {
                return Err(bad(format!(
                    "dim {dim} must be an integer or a plain symbol"
                )));
            }
            _ => {}
        }
        shape.push(dim);
    }
    Ok(TensorType { dtype, shape })
}

/// Checks one constant's declaration against the weight source.
fn check_constant(
    name: &str,
    ty: &TensorType,
    source: &dyn ConstantSource,
) -> Result<(), GraphError> {
    let (dtype, shape) = source
        .describe(name)
        .ok_or_else(|| GraphError::MissingConstant {
            name: name.to_string(),
        })?;
    let declared: Vec<usize> = ty.shape.iter().filter_map(Dim::fixed).collect();
    if dtype != ty.dtype || shape != declared {
        return Err(GraphError::ConstantMismatch {
            name: name.to_string(),
            declared: ty.to_string(),
            found: format!("{dtype} [{}]", super::error::join(&shape)),
        });
    }
    Ok(())
}

/// How messages name node `index`.
fn node_ref(index: usize, raw: &RawNode) -> NodeRef {
    NodeRef {
        index,
        op: raw.op.clone(),
        name: raw.name.clone(),
    }
}
