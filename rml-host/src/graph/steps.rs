//! The shape-independent step list: after folding and dead-node removal, each
//! remaining node becomes part of a fused [`Program`], a [`StepKind::Linear`] with its
//! weight pre-packed, a zero-copy [`StepKind::Alias`] (reshape and friends), or a
//! [`StepKind::Node`] run by the reference interpreter's op code.

use std::collections::HashMap;
use std::sync::Arc;

use rml_core::DType;
use rml_kernels::gemm::{self, MatRef};

use super::buffer::Buffer;
use super::fuse::{Program, group};
use super::ir::{Graph, ValueId};
use super::op::Op;
use super::passes::ConstTable;

/// What one step does.
#[derive(Clone, Debug, PartialEq)]
pub enum StepKind {
    /// A fused elementwise program.
    Fused(Program),
    /// `out = x · W + bias` with `W` pre-packed at load by rml-kernels' `pack_b`
    /// (`NR`-column panels), run with the packed GEMM and the bias in its epilogue.
    Linear {
        /// The `[..., K]` input.
        x: ValueId,
        /// The packed `K × M` weight (`packed_b_len(k, m)` values), shared by every
        /// step that multiplies by the same constant the same way (an unrolled
        /// recurrence's steps read one copy, which stays in cache).
        packed: Arc<[f32]>,
        /// The unpacked constant weight, read instead of `packed` by a run with one
        /// row (a GEMV streams its rows at memory speed; the packed GEMM's panels
        /// are built for many rows).
        weight: ValueId,
        /// Whether `weight` is stored `[M, K]` (a `linear` weight; else `[K, M]`).
        stored_mk: bool,
        /// Inner size.
        k: usize,
        /// Output features.
        m: usize,
        /// The `[M]` bias, if any.
        bias: Option<ValueId>,
        /// The `[..., M]` output.
        out: ValueId,
        /// An elementwise program run on each block of output rows right after
        /// they are computed (epilogue fusion: bias-add, activation, residual).
        epilogue: Option<Program>,
    },
    /// An f32 `layer_norm` or `rms_norm` over the last axis alone (per-column or
    /// no affine parameters) on rml-kernels' row kernel, with the fused program that
    /// reads its output as an epilogue run on each small block of normalized rows
    /// while they are in L1 (only formed with fusion on, when such a program
    /// follows).
    RowNorm {
        /// Which normalization.
        norm: RowNormKind,
        /// The `[..., C]` input.
        x: ValueId,
        /// The per-column scale and shift (an RMS norm has no shift), if any.
        params: [Option<ValueId>; 2],
        /// Added to the variance (mean square).
        epsilon: f32,
        /// The `[..., C]` output.
        out: ValueId,
        /// Whether the epilogue is the output's only reader and a row fits a
        /// block: the normalized rows are then written to a per-thread L1 block
        /// alone, and `out` is not among the step's writes (it gets no arena
        /// region).
        staged: bool,
        /// The program run on each block of output rows.
        epilogue: Program,
    },
    /// The f32 `conv2d` node `node` with a constant weight (im2col + packed GEMM,
    /// `graph/conv.rs`) or `conv_transpose2d` (GEMM + col2im,
    /// `graph/conv_transpose.rs`), with the fused program that reads its output as an
    /// epilogue run on each image's output while it is in cache (epilogue fusion:
    /// activation, residual add; only formed with fusion on).
    Conv {
        /// The node.
        node: usize,
        /// The `[N, C_in, H, W]` input.
        x: ValueId,
        /// The `[C_out]` bias, if any.
        bias: Option<ValueId>,
        /// The `[N, C_out, H_out, W_out]` output.
        out: ValueId,
        /// A `conv2d`'s weight rows packed once for the GEMM, group after group
        /// (`conv::pack_weights`; `None` for a transposed convolution).
        packed: Option<Arc<[f32]>>,
        /// The program run on each image's output.
        epilogue: Option<Program>,
    },
    /// An f32 `group_norm` (`graph/group_norm.rs`) streamed in (image, group)
    /// blocks, with the fused program that reads its output as an epilogue run on
    /// each few blocks while they are in cache (only formed with fusion on).
    GroupNorm {
        /// The node.
        node: usize,
        /// The `[N, C, …]` input.
        x: ValueId,
        /// The per-channel scale and shift, if any.
        params: [Option<ValueId>; 2],
        /// Channel groups.
        groups: usize,
        /// Added to the variance.
        epsilon: f32,
        /// The output, shaped like `x`.
        out: ValueId,
        /// The program run on each few blocks of output.
        epilogue: Option<Program>,
    },
    /// The output is the input's buffer under another shape.
    Alias {
        /// Source value.
        from: ValueId,
        /// The value sharing its buffer.
        to: ValueId,
    },
    /// Node `index` run by the reference interpreter's op code (copies in and out).
    Node(usize),
    /// The f32 `scaled_dot_product_attention` node `node` reading its q, k and v
    /// through the `transpose`s that produced them and writing through the
    /// `transpose(-3, -2)` that reads its output (no copies). The mask is the
    /// node's own.
    Attention {
        /// The node.
        node: usize,
        /// q, k, v: the value read and its axis permutation (empty: none).
        operands: [(ValueId, Vec<usize>); 3],
        /// The value written: the node's output, or (`heads_last`) the transpose of
        /// it that swaps its query axis with the axis before.
        out: ValueId,
        /// Whether `out` is that transpose.
        heads_last: bool,
    },
}

/// The normalization of a [`StepKind::RowNorm`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowNormKind {
    /// `layer_norm`: `(x - mean) / sqrt(var + eps) * gamma + beta`.
    Layer,
    /// `rms_norm`: `x / sqrt(mean(x^2) + eps) * gamma`.
    Rms,
}

/// Most elements of a row-norm block (8 KiB): each thread normalizes whole rows
/// in blocks of at most this many elements (one row when a row is longer) and
/// runs the epilogue program on a block while it is in L1.
pub const NORM_BLOCK: usize = 2048;

/// One step of the executor.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// For profiles: the op names and node labels it covers.
    pub label: String,
    /// What it does.
    pub kind: StepKind,
    /// The values it reads (non-constant and constant alike).
    pub reads: Vec<ValueId>,
    /// The values it writes.
    pub writes: Vec<ValueId>,
}

/// A node's label: `op "name"` or `op`.
fn label(graph: &Graph, node: usize) -> String {
    let n = &graph.nodes[node];
    match &n.name {
        Some(name) => format!("{} {name:?}", n.op_name),
        None => n.op_name.clone(),
    }
}

/// Builds the steps for `nodes` (after folding and dead-node removal).
pub fn build_steps(graph: &Graph, consts: &ConstTable, nodes: &[usize], fuse: bool) -> Vec<Step> {
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); graph.values.len()];
    for &n in nodes {
        for &i in graph.nodes[n].inputs.iter().flatten() {
            readers[i].push(n);
        }
    }
    let outputs = &graph.outputs;
    let needed_outside = |v: ValueId, members: &[usize]| {
        outputs.contains(&v) || readers[v].iter().any(|r| !members.contains(r))
    };
    let programs = group(graph, nodes, fuse, &needed_outside);
    let mut steps = Vec::new();
    let mut packs = Packs::new();
    for (slot, program) in programs.into_iter().enumerate() {
        let node = nodes[slot];
        if let Some(program) = program {
            let labels: Vec<String> = program.members.iter().map(|&m| label(graph, m)).collect();
            steps.push(Step {
                label: labels.join(" + "),
                reads: program.operands.clone(),
                writes: program.outputs.clone(),
                kind: StepKind::Fused(program),
            });
            continue;
        }
        if super::fuse::fusible(graph, node) {
            continue; // a later member of a program
        }
        let n = &graph.nodes[node];
        let kind = linear_step(graph, consts, node, &mut packs)
            .or_else(|| conv_step(graph, consts, node))
            .or_else(|| group_norm_step(graph, consts, node))
            .unwrap_or_else(|| match n.op {
                Op::Reshape { .. }
                | Op::Flatten { .. }
                | Op::Squeeze { .. }
                | Op::Unsqueeze { .. }
                | Op::Identity
                    if consts.get(n.inputs[0].expect("data input")).is_none() =>
                {
                    StepKind::Alias {
                        from: n.inputs[0].expect("data input"),
                        to: n.outputs[0],
                    }
                }
                _ => StepKind::Node(node),
            });
        let reads = match &kind {
            StepKind::Linear { x, bias, .. } | StepKind::Conv { x, bias, .. } => {
                std::iter::once(*x).chain(*bias).collect()
            }
            StepKind::GroupNorm { x, params, .. } => std::iter::once(*x)
                .chain(params.iter().flatten().copied())
                .collect(),
            _ => n.inputs.iter().flatten().copied().collect(),
        };
        steps.push(Step {
            label: label(graph, node),
            kind,
            reads,
            writes: n.outputs.clone(),
        });
    }
    let steps = fold_attention_transposes(graph, consts, steps);
    if fuse {
        attach_epilogues(graph, consts, steps)
    } else {
        steps
    }
}

/// Lets each f32 attention read its q, k, v through the `transpose` steps that
/// produced them, and write its output through a following `transpose` that swaps
/// the query axis with the axis before, when nothing else reads the transposed
/// values (a [`StepKind::Attention`]); those transposes are dropped.
fn fold_attention_transposes(graph: &Graph, consts: &ConstTable, steps: Vec<Step>) -> Vec<Step> {
    let mut readers = vec![0usize; graph.values.len()];
    for step in &steps {
        for &v in &step.reads {
            readers[v] += 1;
        }
    }
    for &v in &graph.outputs {
        readers[v] += 1;
    }
    let f32 = |v: ValueId| graph.values[v].ty.dtype == DType::F32;
    // The transpose step writing `v`, with its source and permutation.
    let producer = |steps: &[Step], v: ValueId| {
        steps.iter().position(|s| match s.kind {
            StepKind::Node(n) => {
                matches!(graph.nodes[n].op, Op::Transpose { .. }) && s.writes == [v]
            }
            _ => false,
        })
    };
    let mut steps = steps;
    let mut keep = vec![true; steps.len()];
    for i in 0..steps.len() {
        let StepKind::Node(node) = steps[i].kind else {
            continue;
        };
        let n = &graph.nodes[node];
        if !matches!(n.op, Op::Attention { .. }) || !n.outputs.iter().copied().all(f32) {
            continue;
        }
        let mut operands: [(ValueId, Vec<usize>); 3] = Default::default();
        let mut dropped = Vec::new();
        for (j, slot) in operands.iter_mut().enumerate() {
            let Some(v) = n.inputs.get(j).copied().flatten() else {
                continue;
            };
            *slot = (v, Vec::new());
            // (A transpose already folded into an earlier attention's output is
            // gone: its input is never written.)
            let fold = |&p: &usize| keep[p] && readers[v] == 1 && f32(v);
            let Some(p) = producer(&steps, v).filter(fold) else {
                continue;
            };
            let StepKind::Node(t) = steps[p].kind else {
                continue;
            };
            if let (Op::Transpose { perm }, Some(Some(src))) =
                (&graph.nodes[t].op, graph.nodes[t].inputs.first())
                && consts.get(*src).is_none()
            {
                *slot = (*src, perm.clone());
                dropped.push(p);
            }
        }
        let y = n.outputs[0];
        let rank = graph.values[y].ty.shape.len();
        let heads_last = rank >= 3
            && readers[y] == 1
            && steps
                .iter()
                .position(|s| {
                    let StepKind::Node(t) = s.kind else {
                        return false;
                    };
                    let swap = |perm: &[usize]| {
                        perm.iter().enumerate().all(|(a, &p)| match a {
                            _ if a + 3 == rank => p == rank - 2,
                            _ if a + 2 == rank => p == rank - 3,
                            _ => p == a,
                        })
                    };
                    matches!(&graph.nodes[t].op, Op::Transpose { perm } if swap(perm))
                        && s.reads == [y]
                })
                .inspect(|&c| dropped.push(c))
                .is_some();
        if dropped.is_empty() {
            continue;
        }
        let mut reads: Vec<ValueId> = operands.iter().map(|(v, _)| *v).collect();
        reads.extend(n.inputs.get(3).copied().flatten());
        steps[i].reads = reads;
        let out = if heads_last {
            let consumer = *dropped.last().expect("the output transpose");
            steps[i].writes = steps[consumer].writes.clone();
            steps[i].writes[0]
        } else {
            y
        };
        steps[i].kind = StepKind::Attention {
            node,
            operands,
            out,
            heads_last,
        };
        for p in dropped {
            keep[p] = false;
        }
    }
    steps
        .into_iter()
        .zip(keep)
        .filter_map(|(s, k)| k.then_some(s))
        .collect()
}

/// Moves a fused program into the linear or row-kernel `layer_norm` / `rms_norm`
/// step before it when it reads that step's output at the same shape: the program
/// then runs on each block of rows while they are in cache. A norm whose output
/// the program alone reads (and whose row fits a [`NORM_BLOCK`]) is staged: its
/// output is no longer one of the step's writes, so the planner gives it no
/// buffer.
fn attach_epilogues(graph: &Graph, consts: &ConstTable, steps: Vec<Step>) -> Vec<Step> {
    // Steps reading each value (graph outputs count as one more).
    let mut readers = vec![0usize; graph.values.len()];
    for step in &steps {
        for (i, &v) in step.reads.iter().enumerate() {
            if !step.reads[..i].contains(&v) {
                readers[v] += 1;
            }
        }
    }
    for &v in &graph.outputs {
        readers[v] += 1;
    }
    let mut merged: Vec<Step> = Vec::with_capacity(steps.len());
    for step in steps {
        if let StepKind::Fused(p) = &step.kind
            && attach_block_epilogue(graph, (p, &step.label), &readers, &mut merged)
        {
            continue;
        }
        if let (StepKind::Fused(p), Some(previous)) = (&step.kind, merged.last_mut())
            && let StepKind::Node(node) = previous.kind
            && let Some((norm, x, params, epsilon)) = row_norm(graph, consts, node)
        {
            let out = graph.nodes[node].outputs[0];
            let shape = |v: ValueId| &graph.values[v].ty.shape;
            let fits = p.operands.contains(&out)
                && p.outputs.iter().all(|&o| shape(o) == shape(out))
                && p.operands.len() + previous.reads.len() <= super::arena::MAX_IO
                && p.outputs.len() < super::arena::MAX_IO;
            if fits {
                // `row_norm` checked that the last dim is fixed.
                let cols = shape(out).last().and_then(|d| d.fixed()).unwrap_or(0);
                let staged = readers[out] == 1 && cols <= NORM_BLOCK;
                previous.label.push_str(" => ");
                previous.label.push_str(&step.label);
                previous
                    .reads
                    .extend(p.operands.iter().filter(|&&v| v != out));
                if staged {
                    previous.writes.clear();
                }
                previous.writes.extend(&p.outputs);
                previous.kind = StepKind::RowNorm {
                    norm,
                    x,
                    params,
                    epsilon,
                    out,
                    staged,
                    epilogue: p.clone(),
                };
                continue;
            }
        }
        let previous = merged.last_mut();
        if let (
            StepKind::Fused(p),
            Some(Step {
                kind:
                    StepKind::Linear {
                        out,
                        epilogue: epilogue @ None,
                        ..
                    },
                label,
                reads,
                writes,
            }),
        ) = (&step.kind, previous)
        {
            let shape = |v: ValueId| &graph.values[v].ty.shape;
            let fits = p.operands.contains(out)
                && p.outputs.iter().all(|&o| shape(o) == shape(*out))
                && p.operands.len() + reads.len() <= super::arena::MAX_IO
                && p.outputs.len() < super::arena::MAX_IO;
            if fits {
                label.push_str(" => ");
                label.push_str(&step.label);
                reads.extend(p.operands.iter().filter(|&v| v != out));
                writes.extend(&p.outputs);
                *epilogue = Some(p.clone());
                continue;
            }
        }
        merged.push(step);
    }
    merged
}

/// Makes `p` (labelled `label`) the epilogue of the last step of `merged` when
/// that is a [`StepKind::Conv`] or [`StepKind::GroupNorm`] without one and `p`
/// reads its output at the same shape, or of the step before when the last is a
/// same-shape alias of a convolution's output (a folded batch norm's `identity`;
/// `p` then reads the output itself). When `p` alone reads the output (`readers`:
/// steps reading each value, graph outputs counted) and has one output of the same
/// dtype, the step writes that output and `p` rewrites it in place, so the step
/// touches one buffer, not two. `false` (nothing changed) otherwise.
fn attach_block_epilogue(
    graph: &Graph,
    (p, label): (&Program, &str),
    readers: &[usize],
    merged: &mut [Step],
) -> bool {
    let shape = |v: ValueId| &graph.values[v].ty.shape;
    let mut p = p.clone();
    let mut at = merged.len();
    // Whether `p` alone reads the convolution's output (through the alias, if any).
    let mut private = true;
    if let Some(Step {
        kind: StepKind::Alias { from, to },
        ..
    }) = merged.last()
        && shape(*from) == shape(*to)
        && !p.operands.contains(from)
        && matches!(merged.get(at.wrapping_sub(2)), Some(Step { kind: StepKind::Conv { out, .. }, .. }) if out == from)
    {
        for v in p.operands.iter_mut().filter(|v| **v == *to) {
            *v = *from;
        }
        private = readers[*to] == 1;
        at -= 1;
    }
    let Some(previous) = at.checked_sub(1).and_then(|i| merged.get_mut(i)) else {
        return false;
    };
    let (StepKind::Conv {
        out,
        epilogue: epilogue @ None,
        ..
    }
    | StepKind::GroupNorm {
        out,
        epilogue: epilogue @ None,
        ..
    }) = &mut previous.kind
    else {
        return false;
    };
    let fits = p.operands.contains(out)
        && p.outputs.iter().all(|&o| shape(o) == shape(*out))
        && p.operands.len() + previous.reads.len() <= super::arena::MAX_IO
        && p.outputs.len() < super::arena::MAX_IO;
    if !fits {
        return false;
    }
    let in_place = private
        && readers[*out] == 1
        && p.outputs.len() == 1
        && graph.values[p.outputs[0]].ty.dtype == graph.values[*out].ty.dtype;
    if in_place {
        let (from, to) = (*out, p.outputs[0]);
        for v in p.operands.iter_mut().filter(|v| **v == from) {
            *v = to;
        }
        *out = to;
        previous.writes.clear();
    }
    let out = *out;
    previous.label.push_str(" => ");
    previous.label.push_str(label);
    previous
        .reads
        .extend(p.operands.iter().filter(|&&v| v != out));
    previous.writes.extend(&p.outputs);
    *epilogue = Some(p);
    true
}

/// A `conv2d` or `conv_transpose2d` on F32 with a constant rank-4 F32 weight (and
/// an F32 bias, if any) reading a non-constant input: a [`StepKind::Conv`].
fn conv_step(graph: &Graph, consts: &ConstTable, node: usize) -> Option<StepKind> {
    let n = &graph.nodes[node];
    let (Op::Conv2d(_) | Op::ConvTranspose2d(_)) = n.op else {
        return None;
    };
    let f32 = |v: ValueId| graph.values[v].ty.dtype == DType::F32;
    let x = n.inputs.first().copied().flatten()?;
    let w = n.inputs.get(1).copied().flatten()?;
    let bias = n.inputs.get(2).copied().flatten();
    let (shape, Buffer::F32(weights)) = consts.get(w)? else {
        return None;
    };
    let fits = shape.rank() == 4
        && f32(x)
        && consts.get(x).is_none()
        && bias.is_none_or(f32)
        && n.outputs.len() == 1
        && f32(n.outputs[0]);
    let packed = match &n.op {
        Op::Conv2d(p) => {
            let dims = shape.dims().try_into().ok()?;
            super::conv::pack_weights(weights, dims, p.groups).map(Arc::from)
        }
        _ => None,
    };
    fits.then_some(StepKind::Conv {
        node,
        x,
        bias,
        out: n.outputs[0],
        packed,
        epilogue: None,
    })
}

/// An f32 `group_norm` with a non-negative ε reading a non-constant input and f32
/// parameters (if any): a [`StepKind::GroupNorm`].
fn group_norm_step(graph: &Graph, consts: &ConstTable, node: usize) -> Option<StepKind> {
    let n = &graph.nodes[node];
    let Op::GroupNorm {
        num_groups,
        epsilon,
    } = n.op
    else {
        return None;
    };
    let f32 = |v: ValueId| graph.values[v].ty.dtype == DType::F32;
    let x = n.inputs.first().copied().flatten()?;
    let params = [1, 2].map(|i| n.inputs.get(i).copied().flatten());
    let fits = epsilon >= 0.0
        && f32(x)
        && consts.get(x).is_none()
        && params.iter().flatten().all(|&v| f32(v))
        && n.outputs.len() == 1
        && f32(n.outputs[0]);
    fits.then_some(StepKind::GroupNorm {
        node,
        x,
        params,
        groups: num_groups,
        epsilon,
        out: n.outputs[0],
        epilogue: None,
    })
}

/// The normalization, input, affine parameters and epsilon of node `node` when it
/// is an f32 `layer_norm` over its last axis alone or an f32 `rms_norm` whose last
/// dim is fixed and whose parameters (if any) are f32 with that many elements:
/// what the row kernels take.
fn row_norm(
    graph: &Graph,
    consts: &ConstTable,
    node: usize,
) -> Option<(RowNormKind, ValueId, [Option<ValueId>; 2], f32)> {
    let n = &graph.nodes[node];
    let (norm, axis, epsilon) = match n.op {
        Op::LayerNorm { axis, epsilon } => (RowNormKind::Layer, axis, epsilon),
        Op::RmsNorm { epsilon } => (RowNormKind::Rms, -1, epsilon),
        _ => return None,
    };
    let x = n.inputs.first().copied().flatten()?;
    let ty = &graph.values[x].ty;
    let rank = ty.shape.len();
    let last = rank.checked_sub(1)?;
    let normalized = if axis < 0 {
        rank.checked_sub(axis.unsigned_abs())?
    } else {
        axis.unsigned_abs()
    };
    let cols = ty.shape.last()?.fixed()?;
    let per_column = |v: &ValueId| {
        let t = &graph.values[*v].ty;
        let numel = t.shape.iter().map(|d| d.fixed()).product::<Option<usize>>();
        t.dtype == DType::F32 && numel == Some(cols)
    };
    let mut params = [1, 2].map(|i| n.inputs.get(i).copied().flatten());
    if norm == RowNormKind::Rms {
        params[1] = None;
    }
    let f32 = |v: ValueId| graph.values[v].ty.dtype == DType::F32;
    let fits = normalized == last
        && f32(x)
        && n.outputs.len() == 1
        && f32(n.outputs[0])
        && consts.get(x).is_none()
        && params.iter().flatten().all(per_column);
    fits.then_some((norm, x, params, epsilon))
}

/// Packed weights by constant and layout (`true`: stored `[M, K]`).
type Packs = HashMap<(ValueId, bool), Arc<[f32]>>;

/// A `linear` with a constant 2-D weight, or a `matmul` (no `transpose_a`) with a
/// constant 2-D right operand, on F32: a [`StepKind::Linear`] with the weight packed.
fn linear_step(
    graph: &Graph,
    consts: &ConstTable,
    node: usize,
    packs: &mut Packs,
) -> Option<StepKind> {
    let n = &graph.nodes[node];
    let x = n.inputs[0]?;
    let w = n.inputs.get(1).copied().flatten()?;
    let (shape, Buffer::F32(data)) = consts.get(w)? else {
        return None;
    };
    if graph.values[x].ty.dtype != DType::F32 || shape.rank() != 2 {
        return None;
    }
    let (rows, cols) = (shape.dim(0), shape.dim(1));
    // `stored_mk`: the weight is stored [M, K] (linear, or matmul with transpose_b).
    let (stored_mk, bias) = match n.op {
        Op::Linear => (true, n.inputs.get(2).copied().flatten()),
        Op::MatMul {
            transpose_a: false,
            transpose_b,
        } => (transpose_b, None),
        _ => return None,
    };
    let (k, m) = if stored_mk {
        (cols, rows)
    } else {
        (rows, cols)
    };
    let packed = match packs.get(&(w, stored_mk)) {
        Some(p) => Arc::clone(p),
        None => {
            // B is `k × m`: the transpose of an [M, K] store, or the [K, M] store itself.
            let b = if stored_mk {
                MatRef::row_major(data, m, k).map(MatRef::t)
            } else {
                MatRef::row_major(data, k, m)
            }
            .ok()?;
            let mut packed = vec![0.0f32; gemm::packed_b_len(k, m).ok()?];
            gemm::pack_b(b, &mut packed).ok()?;
            let packed: Arc<[f32]> = packed.into();
            packs.insert((w, stored_mk), Arc::clone(&packed));
            packed
        }
    };
    Some(StepKind::Linear {
        x,
        packed,
        weight: w,
        stored_mk,
        k,
        m,
        bias,
        out: n.outputs[0],
        epilogue: None,
    })
}
