//! The graph stack's front end: the rml-graph IR, its loader with validation, and
//! shape inference with symbolic dims bound at run time.
//!
//! `docs/graph-ir.md` specifies the format and every op. The modules, in dependency
//! order:
//!
//! - [`error`] — [`GraphError`] and the [`Site`] each error names;
//! - [`dim`] — [`Dim`], a fixed size, a product of symbols, or unknown until bound;
//! - [`op`] — [`Op`], the op set with typed attributes;
//! - `attrs`, `parse_op` — JSON attributes → [`Op`], with defaults and range checks;
//! - [`ir`] — [`Graph`], [`Node`], [`Value`];
//! - [`constants`] — [`ConstantSource`], what the loader asks of a weights file;
//! - `infer` — per-op dtype and shape rules (shared by load and bind);
//! - [`load`] — [`load_graph`] reads and checks a document;
//! - [`bind`] — [`Graph::bind`] gives [`BoundShapes`];
//! - [`buffer`] — [`Buffer`] and [`DenseTensor`], the interpreter's plain data;
//! - [`interp`] — [`run`], the reference interpreter on rml-core's ops;
//! - [`passes`] — constant folding and dead-node elimination;
//! - [`fuse`] — elementwise fusion into register-machine [`fuse::Program`]s;
//! - `program` — runs a program tile by tile;
//! - [`steps`] — the step list: fused programs, packed linears, aliases, nodes;
//! - [`plan`] — buffer planning by liveness over one arena;
//! - [`arena`] — [`BufferPool`] and the split of it into a step's regions;
//! - [`exec`] — [`Executor`], which runs the plan (`docs/graph-executor.md`);
//! - [`tensors`] — `.npy` tensors and safetensors weights for the graph stack.
#![forbid(unsafe_code)]

pub mod error;

pub mod dim;
pub mod op;

mod attrs;
mod parse_op;

pub mod ir;

pub mod buffer;
pub mod constants;

mod infer;

pub mod load;

pub mod bind;

pub mod interp;

pub mod arena;
mod attention;
mod batch_norm;
mod batched_matmul;
mod conv;
mod conv_transpose;
pub mod exec;
pub mod fold_bn;
pub mod fuse;
mod group_norm;
mod hoist;
mod max_pool;
mod movement;
mod par;
pub mod passes;
pub mod plan;
mod program;
mod reduce;
pub mod steps;
pub mod tensors;
mod upsample;

pub use arena::BufferPool;
pub use bind::BoundShapes;
pub use buffer::{Buffer, DenseTensor};
pub use constants::{ConstantSource, ConstantValues, MemoryConstants, MemoryTensor};
pub use dim::{Bindings, Dim};
pub use error::{GraphError, NodeRef, Site};
pub use exec::{Executor, Options};
pub use interp::run;
pub use ir::{Graph, Node, TensorType, Value, ValueId, ValueSource};
pub use load::load_graph;
pub use op::{OP_NAMES, Op};

/// The `format` every rml-graph document declares.
pub const FORMAT_NAME: &str = "rml-graph";

/// The format versions this loader reads.
pub const SUPPORTED_VERSIONS: &[u64] = &[1];
