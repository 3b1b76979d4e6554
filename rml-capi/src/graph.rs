//! The graph entry points: load an rml-graph with its weights, describe its inputs
//! and outputs, run it on caller buffers, copy its outputs out.
//!
//! Ownership: inputs are read during `rml_graph_run` and copied; outputs live in the
//! graph handle until the next run or `rml_graph_free`, and `rml_graph_get_output`
//! copies them into caller memory. The library hands out no pointer into its data;
//! the only pointers it returns are value names ([`RmlTensorInfo::name`]), valid
//! until the handle is freed.

use std::ffi::{CString, c_void};
use std::path::Path;
use std::sync::{Mutex, MutexGuard, TryLockError};

use rml_core::DType;
use rml_host::graph::tensors::load_graph_file;
use rml_host::graph::{DenseTensor, Dim, Executor, Graph, GraphError, Options};

use crate::args;
use crate::registry::{GRAPH_TAG, Registry};
use crate::status::{Outcome, RmlStatus, fail, guard};
use crate::tensor::{self, RmlTensor, RmlTensorInfo};

/// A loaded graph: an opaque handle, never 0 for a live graph.
pub type RmlGraph = u64;

/// A graph input or output as declared in the file.
struct Declared {
    name: CString,
    dtype: DType,
    shape: Vec<Dim>,
}

/// The executor and whether its outputs are those of a successful last run.
struct Runner {
    exec: Executor,
    ran: bool,
}

/// What a graph handle holds.
struct LoadedGraph {
    inputs: Vec<Declared>,
    outputs: Vec<Declared>,
    runner: Mutex<Runner>,
}

/// Every live graph.
static GRAPHS: Registry<LoadedGraph> = Registry::new("graph", GRAPH_TAG);

impl LoadedGraph {
    /// The runner, or [`RmlStatus::Busy`] while another call runs the graph.
    fn runner(&self) -> Outcome<MutexGuard<'_, Runner>> {
        self.runner.try_lock().map_err(|e| match e {
            TryLockError::WouldBlock => fail(
                RmlStatus::Busy,
                "the graph is in use by another call; a graph runs one call at a time",
            ),
            TryLockError::Poisoned(_) => fail(
                RmlStatus::Panic,
                "an earlier call on this graph panicked; free the handle",
            ),
        })
    }
}

/// The declared inputs or outputs `ids` of `graph`.
fn declared(graph: &Graph, ids: &[usize]) -> Outcome<Vec<Declared>> {
    ids.iter()
        .map(|&id| {
            let value = graph.value(id);
            let name = CString::new(value.name.as_str()).map_err(|_| {
                fail(
                    RmlStatus::Load,
                    format!("value name {:?} holds a NUL byte", value.name),
                )
            })?;
            Ok(Declared {
                name,
                dtype: value.ty.dtype,
                shape: value.ty.shape.clone(),
            })
        })
        .collect()
}

/// The graph behind a handle.
fn graph_of(handle: RmlGraph) -> Outcome<std::sync::Arc<LoadedGraph>> {
    GRAPHS.get(handle)
}

/// Loads the rml-graph JSON file at `path` and the safetensors weights it names
/// (relative to its folder), compiles it for `threads` worker threads (0 or 1: the
/// calling thread only; at most 16, larger values are clamped) and stores a new
/// handle in `*out`. On failure `*out` is set to 0.
///
/// # Safety
/// `path` is null or a NUL-terminated string; `out` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rml_graph_load(
    path: *const std::ffi::c_char,
    threads: u32,
    out: *mut RmlGraph,
) -> RmlStatus {
    guard(|| {
        // SAFETY: the caller's promise on `out`.
        unsafe { args::write(out, 0, "out")? };
        // SAFETY: the caller's promise on `path`.
        let path = unsafe { args::string(path, "path")? };
        let (graph, weights) =
            load_graph_file(Path::new(path)).map_err(|e| fail(RmlStatus::Load, e))?;
        let inputs = declared(&graph, &graph.inputs)?;
        let outputs = declared(&graph, &graph.outputs)?;
        let options = Options {
            threads: threads.max(1) as usize,
            ..Options::default()
        };
        let exec = Executor::new(graph, &weights, options)
            .map_err(|e| fail(RmlStatus::Load, format!("{path}: {e}")))?;
        let id = GRAPHS.insert(LoadedGraph {
            inputs,
            outputs,
            runner: Mutex::new(Runner { exec, ran: false }),
        });
        // SAFETY: as above.
        unsafe { args::write(out, id, "out") }
    })
}

/// Frees a graph. Its handle becomes invalid at once (a call still running on it
/// finishes first); names it handed out become invalid.
#[unsafe(no_mangle)]
pub extern "C" fn rml_graph_free(graph: RmlGraph) -> RmlStatus {
    guard(|| GRAPHS.remove(graph))
}

/// Stores the number of graph inputs in `*count`.
///
/// # Safety
/// `count` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rml_graph_input_count(graph: RmlGraph, count: *mut usize) -> RmlStatus {
    guard(|| {
        let g = graph_of(graph)?;
        // SAFETY: the caller's promise on `count`.
        unsafe { args::write(count, g.inputs.len(), "count") }
    })
}

/// Stores the number of graph outputs in `*count`.
///
/// # Safety
/// `count` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rml_graph_output_count(graph: RmlGraph, count: *mut usize) -> RmlStatus {
    guard(|| {
        let g = graph_of(graph)?;
        // SAFETY: the caller's promise on `count`.
        unsafe { args::write(count, g.outputs.len(), "count") }
    })
}

/// Describes one declared input or output in `*info`.
///
/// # Safety
/// `info` is null or writable.
unsafe fn describe(
    graph: RmlGraph,
    index: usize,
    info: *mut RmlTensorInfo,
    outputs: bool,
) -> RmlStatus {
    guard(|| {
        let g = graph_of(graph)?;
        let (list, kind) = if outputs {
            (&g.outputs, "output")
        } else {
            (&g.inputs, "input")
        };
        let d = list.get(index).ok_or_else(|| {
            fail(
                RmlStatus::InvalidArgument,
                format!(
                    "{kind} index {index} is out of range (the graph has {})",
                    list.len()
                ),
            )
        })?;
        let value = RmlTensorInfo::declared(&d.name, d.dtype, &d.shape)?;
        // SAFETY: the caller's promise on `info`.
        unsafe { args::write(info, value, "info") }
    })
}

/// Describes graph input `index` as declared (symbolic dims as -1).
///
/// # Safety
/// `info` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rml_graph_describe_input(
    graph: RmlGraph,
    index: usize,
    info: *mut RmlTensorInfo,
) -> RmlStatus {
    // SAFETY: passed on.
    unsafe { describe(graph, index, info, false) }
}

/// Describes graph output `index` as declared (symbolic dims as -1).
///
/// # Safety
/// `info` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rml_graph_describe_output(
    graph: RmlGraph,
    index: usize,
    info: *mut RmlTensorInfo,
) -> RmlStatus {
    // SAFETY: passed on.
    unsafe { describe(graph, index, info, true) }
}

/// Reads the caller's tensors into the graph's input order.
///
/// # Safety
/// Every tensor's pointers keep the promises documented on [`RmlTensor`].
unsafe fn gather(g: &LoadedGraph, given: &[RmlTensor]) -> Outcome<Vec<DenseTensor>> {
    let mut slots: Vec<Option<DenseTensor>> = vec![None; g.inputs.len()];
    let names = || {
        let list: Vec<_> = g.inputs.iter().map(|d| d.name.to_string_lossy()).collect();
        list.join(", ")
    };
    for (i, t) in given.iter().enumerate() {
        // SAFETY: the caller's promise.
        let (name, dense) = unsafe { tensor::read(t, &format!("inputs[{i}]"))? };
        let slot = g
            .inputs
            .iter()
            .position(|d| d.name.to_bytes() == name.as_bytes())
            .ok_or_else(|| {
                fail(
                    RmlStatus::InvalidArgument,
                    format!(
                        "inputs[{i}]: the graph has no input {name:?} (it has: {})",
                        names()
                    ),
                )
            })?;
        let want = g.inputs[slot].dtype;
        if dense.data.dtype() != want {
            return Err(fail(
                RmlStatus::Dtype,
                format!(
                    "input {name:?}: the graph declares {want}, got {}",
                    dense.data.dtype()
                ),
            ));
        }
        if slots[slot].replace(dense).is_some() {
            return Err(fail(
                RmlStatus::InvalidArgument,
                format!("input {name:?} is given twice"),
            ));
        }
    }
    slots
        .into_iter()
        .zip(&g.inputs)
        .map(|(t, d)| {
            t.ok_or_else(|| {
                fail(
                    RmlStatus::InvalidArgument,
                    format!("input {:?} is missing (the graph has: {})", d.name, names()),
                )
            })
        })
        .collect()
}

/// Runs the graph on `n_inputs` named tensors (every graph input exactly once, in
/// any order). The outputs stay in the handle until the next run or free; read them
/// with [`rml_graph_get_output`]. A wrong dtype is `RML_STATUS_DTYPE`; dims that do
/// not fit the declared shape, or a `byte_len` that does not match the dims, is
/// `RML_STATUS_SHAPE`.
///
/// # Safety
/// `inputs` is null or points to `n_inputs` tensors whose pointers keep the promises
/// documented on [`RmlTensor`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rml_graph_run(
    graph: RmlGraph,
    inputs: *const RmlTensor,
    n_inputs: usize,
) -> RmlStatus {
    guard(|| {
        let g = graph_of(graph)?;
        // SAFETY: the caller's promise on `inputs`.
        let given = unsafe { args::slice(inputs, n_inputs, "inputs")? };
        // SAFETY: the caller's promise on each tensor.
        let dense = unsafe { gather(&g, given)? };
        let mut runner = g.runner()?;
        runner.ran = false;
        runner.exec.run(&dense).map_err(|e| {
            let status = match e {
                GraphError::BindArity { .. }
                | GraphError::BindInput { .. }
                | GraphError::BindNode { .. } => RmlStatus::Shape,
                _ => RmlStatus::Run,
            };
            fail(status, e.to_string())
        })?;
        runner.ran = true;
        Ok(())
    })
}

/// Reads output `index` of the last successful run: describes it in `*info` (when
/// `info` is not null) and copies its data, row-major and native-endian, into `data`
/// (when `data` is not null; `capacity` is its size in bytes). A buffer smaller than
/// the output's `byte_len` is `RML_STATUS_BUFFER_TOO_SMALL`, with `*info` still
/// filled in. Passing `data = NULL` asks for the size only.
///
/// # Safety
/// `info` is null or writable; `data` is null or points to `capacity` writable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn rml_graph_get_output(
    graph: RmlGraph,
    index: usize,
    info: *mut RmlTensorInfo,
    data: *mut c_void,
    capacity: usize,
) -> RmlStatus {
    guard(|| {
        let g = graph_of(graph)?;
        let runner = g.runner()?;
        if !runner.ran {
            return Err(fail(
                RmlStatus::InvalidArgument,
                "no outputs: the graph has not run, or its last run failed",
            ));
        }
        let outputs = runner.exec.outputs();
        let out = outputs.get(index).ok_or_else(|| {
            fail(
                RmlStatus::InvalidArgument,
                format!(
                    "output index {index} is out of range (the graph has {})",
                    outputs.len()
                ),
            )
        })?;
        let name = &g.outputs[index].name;
        let description = RmlTensorInfo::computed(name, out)?;
        if !info.is_null() {
            // SAFETY: the caller's promise on `info`.
            unsafe { args::write(info, description, "info")? };
        }
        if data.is_null() {
            return Ok(());
        }
        if capacity < description.byte_len {
            return Err(fail(
                RmlStatus::BufferTooSmall,
                format!(
                    "output {name:?} needs {} bytes, the buffer holds {capacity}",
                    description.byte_len
                ),
            ));
        }
        // SAFETY: the caller's promise on `data` (`capacity >= byte_len` bytes).
        let bytes = unsafe { args::slice_mut(data.cast::<u8>(), description.byte_len, "data")? };
        tensor::write_bytes(&out.data, bytes);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_graph_in_use_is_busy_not_blocked() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../models/graph-default/transformer_block.json\0"
        );
        let mut g = 0;
        // SAFETY: a NUL-terminated path and a writable handle.
        let st = unsafe { rml_graph_load(path.as_ptr().cast(), 1, &mut g) };
        assert_eq!(st, RmlStatus::Ok);
        let entry = graph_of(g).expect("live");
        let held = entry.runner.lock().expect("not poisoned");
        // SAFETY: no inputs; the lock is what is under test.
        let st = unsafe { rml_graph_run(g, std::ptr::null(), 0) };
        assert_eq!(
            st,
            RmlStatus::InvalidArgument,
            "inputs are checked before the lock"
        );
        // SAFETY: null info and data are allowed.
        let st =
            unsafe { rml_graph_get_output(g, 0, std::ptr::null_mut(), std::ptr::null_mut(), 0) };
        assert_eq!(st, RmlStatus::Busy);
        drop(held);
        assert_eq!(rml_graph_free(g), RmlStatus::Ok);
    }
}
