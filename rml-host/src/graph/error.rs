//! [`GraphError`]: everything loading, validating or binding an rml-graph can reject,
//! each naming where in the file the problem is ([`Site`]).

use std::fmt;

/// Where in a graph an error was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Site {
    /// The document as a whole (format, version, top-level keys).
    Document,
    /// A graph input, by name.
    Input(String),
    /// A constant, by name.
    Constant(String),
    /// A graph output, by name.
    Output(String),
    /// A node, by index in the node list (boxed to keep errors small).
    Node(Box<NodeRef>),
}

/// A node as error messages name it: `node 7 (conv2d "conv1")`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRef {
    /// Index in the graph's node list (0-based).
    pub index: usize,
    /// The op name as written in the file.
    pub op: String,
    /// The node's optional `name`.
    pub name: Option<String>,
}

impl fmt::Display for NodeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(name) => write!(f, "node {} ({} {:?})", self.index, self.op, name),
            None => write!(f, "node {} ({})", self.index, self.op),
        }
    }
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Site::Document => f.write_str("graph"),
            Site::Input(name) => write!(f, "input {name:?}"),
            Site::Constant(name) => write!(f, "constant {name:?}"),
            Site::Output(name) => write!(f, "output {name:?}"),
            Site::Node(node) => node.fmt(f),
        }
    }
}

/// Everything the graph loader, shape inference and binding can reject.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GraphError {
    /// The text is not JSON, or a JSON value has the wrong type or a missing key.
    Parse {
        /// serde_json's description, with line and column.
        message: String,
    },
    /// The `format` key is not `"rml-graph"`.
    UnknownFormat {
        /// The format name found.
        found: String,
    },
    /// The `version` is not one this loader reads.
    UnsupportedVersion {
        /// The version found.
        found: u64,
        /// The versions this loader reads.
        supported: &'static [u64],
    },
    /// A node names an op that is not in the op set.
    UnknownOp {
        /// The node.
        node: NodeRef,
    },
    /// A node carries an attribute its op does not define.
    UnknownAttribute {
        /// The node.
        node: NodeRef,
        /// The attribute name.
        attr: String,
        /// The attributes the op defines.
        allowed: Vec<&'static str>,
    },
    /// An attribute is missing, has the wrong type, or is out of range.
    BadAttribute {
        /// The node.
        node: NodeRef,
        /// The attribute name.
        attr: &'static str,
        /// What was expected, e.g. `2 positive integers`.
        expected: String,
        /// What was found, as JSON (`missing` when absent).
        found: String,
    },
    /// A node has the wrong number of inputs or outputs.
    Arity {
        /// The node.
        node: NodeRef,
        /// `"inputs"` or `"outputs"`.
        what: &'static str,
        /// The accepted counts, e.g. `2 or 3`.
        expected: String,
        /// The count found.
        found: usize,
    },
    /// A value name is empty or otherwise not usable.
    BadName {
        /// Where the name appears.
        site: Site,
        /// The name.
        name: String,
    },
    /// A name is defined twice (by inputs, constants or node outputs).
    DuplicateName {
        /// The name.
        name: String,
        /// The first definition.
        first: Site,
        /// The second definition.
        second: Site,
    },
    /// A name is used before the node that defines it (the nodes are not in
    /// topological order, or they form a cycle).
    UsedBeforeDefinition {
        /// Where the name is used.
        site: Site,
        /// The name.
        name: String,
        /// The later definition.
        defined_at: Site,
    },
    /// A name is used but nothing defines it.
    UndefinedName {
        /// Where the name is used.
        site: Site,
        /// The name.
        name: String,
    },
    /// A dim or shape declaration is malformed (a bad symbol, a negative size, too
    /// many axes, a symbol where only fixed sizes are allowed).
    BadShape {
        /// Where the shape is declared.
        site: Site,
        /// What is wrong.
        message: String,
    },
    /// A dtype name is unknown or not allowed where it appears.
    BadDType {
        /// Where the dtype is declared.
        site: Site,
        /// The name found.
        found: String,
    },
    /// A node's inputs have dtypes or shapes its op does not accept, or a
    /// shape-dependent attribute check failed.
    Infer {
        /// The node.
        node: NodeRef,
        /// What is wrong, naming the input or attribute.
        message: String,
    },
    /// The graph has constants but no `weights` file name.
    MissingWeights,
    /// A constant is not in the weight source.
    MissingConstant {
        /// The constant's name.
        name: String,
    },
    /// A constant's dtype or shape in the weight source differs from its declaration.
    ConstantMismatch {
        /// The constant's name.
        name: String,
        /// The declaration, e.g. `F32 [16, 3, 3, 3]`.
        declared: String,
        /// What the weight source holds.
        found: String,
    },
    /// A declared output type disagrees with the inferred one.
    OutputMismatch {
        /// The output's name.
        name: String,
        /// The declaration.
        declared: String,
        /// What shape inference found.
        inferred: String,
    },
    /// Binding was given the wrong number of input shapes.
    BindArity {
        /// The graph's input count.
        expected: usize,
        /// The number of shapes given.
        found: usize,
    },
    /// A bound input shape does not match its declaration (or binds a symbol to
    /// two different sizes).
    BindInput {
        /// The input's name.
        name: String,
        /// The declared shape, e.g. `[N, 3, 32, 32]`.
        expected: String,
        /// The shape given.
        got: String,
        /// A note when the mismatch is a symbol bound twice.
        note: Option<String>,
    },
    /// Running the graph failed: a value of the wrong dtype or length, a dtype the
    /// interpreter does not hold, missing constant data, or an op error.
    Run {
        /// Where.
        site: Site,
        /// What is wrong.
        message: String,
    },
    /// With concrete input shapes, a node's shapes are invalid.
    BindNode {
        /// The node.
        node: NodeRef,
        /// What is wrong.
        message: String,
    },
}

impl fmt::Display for GraphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GraphError::Parse { message } => {
                write!(f, "graph is not valid rml-graph JSON: {message}")
            }
            GraphError::UnknownFormat { found } => write!(
                f,
                "graph: \"format\" is {found:?}, expected \"{}\"",
                super::FORMAT_NAME
            ),
            GraphError::UnsupportedVersion { found, supported } => write!(
                f,
                "graph: version {found} is not supported (supported versions: {})",
                join(supported.iter())
            ),
            GraphError::UnknownOp { node } => write!(
                f,
                "{node}: unknown op {:?}; supported ops: {}",
                node.op,
                super::op::OP_NAMES.join(", ")
            ),
            GraphError::UnknownAttribute {
                node,
                attr,
                allowed,
            } => {
                write!(f, "{node}: unknown attribute {attr:?}")?;
                if allowed.is_empty() {
                    write!(f, " (the op takes no attributes)")
                } else {
                    write!(f, " (allowed: {})", allowed.join(", "))
                }
            }
            GraphError::BadAttribute {
                node,
                attr,
                expected,
                found,
            } => write!(
                f,
                "{node}: attribute {attr:?}: expected {expected}, found {found}"
            ),
            GraphError::Arity {
                node,
                what,
                expected,
                found,
            } => {
                let what = if expected == "1" {
                    what.trim_end_matches('s')
                } else {
                    what
                };
                write!(f, "{node}: expected {expected} {what}, found {found}")
            }
            GraphError::BadName { site, name } => {
                write!(f, "{site}: {name:?} is not a valid value name")
            }
            GraphError::DuplicateName {
                name,
                first,
                second,
            } => write!(f, "{second}: value {name:?} is already defined by {first}"),
            GraphError::UsedBeforeDefinition {
                site,
                name,
                defined_at,
            } => write!(
                f,
                "{site}: value {name:?} is used before it is defined (by {defined_at}); \
                 nodes must be in topological order and acyclic"
            ),
            GraphError::UndefinedName { site, name } => {
                write!(f, "{site}: value {name:?} is not defined anywhere")
            }
            GraphError::BadShape { site, message } => write!(f, "{site}: {message}"),
            GraphError::BadDType { site, found } => {
                write!(f, "{site}: unknown or unsupported dtype {found:?}")
            }
            GraphError::Infer { node, message } => write!(f, "{node}: {message}"),
            GraphError::MissingWeights => {
                f.write_str("graph: constants are declared but \"weights\" names no file")
            }
            GraphError::MissingConstant { name } => {
                write!(f, "constant {name:?}: not found in the weights")
            }
            GraphError::ConstantMismatch {
                name,
                declared,
                found,
            } => write!(
                f,
                "constant {name:?}: declared as {declared}, the weights hold {found}"
            ),
            GraphError::OutputMismatch {
                name,
                declared,
                inferred,
            } => write!(
                f,
                "output {name:?}: declared as {declared}, inferred {inferred}"
            ),
            GraphError::BindArity { expected, found } => write!(
                f,
                "bind: the graph has {expected} inputs, {found} shapes were given"
            ),
            GraphError::BindInput {
                name,
                expected,
                got,
                note,
            } => {
                write!(f, "input {name:?}: expected {expected}, got {got}")?;
                if let Some(note) = note {
                    write!(f, " ({note})")?;
                }
                Ok(())
            }
            GraphError::BindNode { node, message } => write!(f, "{node}: {message}"),
            GraphError::Run { site, message } => write!(f, "{site}: {message}"),
        }
    }
}

impl std::error::Error for GraphError {}

/// `items` joined by `", "`.
pub(crate) fn join<T: fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|item| item.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
