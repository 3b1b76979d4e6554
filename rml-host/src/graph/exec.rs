//! [`Executor`]: compiles a graph once (folding, dead-node removal, fusion, weight
//! packing), plans buffers per set of input shapes (cached: the batch is bound per
//! run), and runs the steps over one reused arena. After the first run with given
//! shapes, a run on one thread allocates nothing on the heap as long as every step
//! is fused, linear (packed GEMM, scratch sized at compile time), an alias, or an
//! f32 node that is one rml-kernels row kernel (last-axis layer/RMS norm, softmax),
//! a `conv2d` as im2col + GEMM, a `matmul` of two activations or an attention on the
//! GEMM (per-thread buffers, grown once), a `conv_transpose2d` as GEMM + col2im, a
//! `max_pool2d`, `batch_norm`, `group_norm`, `upsample_nearest2d`, reduction or
//! global pool on slices, data movement (slice, concat, split, gather, transpose,
//! expand as strided copies), or one rml-core call writing into the arena (other
//! pooling and convolutions, other norms, reductions, matmul); the remaining integer
//! ops copy through the reference interpreter and allocate.

use std::borrow::Cow;
use std::cell::RefCell;
use std::ops::Range;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rml_core::{DType, Shape, TensorView, TensorViewMut};

use super::arena::{BufferPool, MAX_IO, split};
use super::attention::{Attention, Mask, Operand};
use super::batch_norm::{ChannelParams, batch_norm};
use super::batched_matmul::{Split, matmul};
use super::buffer::{Buffer, DenseTensor};
use super::constants::ConstantValues;
use super::conv::{ConvIo, ConvKind};
use super::error::{GraphError, Site};
use super::fold_bn::fold_batch_norms;
use super::fuse::{Broadcast, CacheAligned, Data, DataMut, MAX_OPERANDS, Program, Source};
use super::group_norm::{self, GroupNorm};
use super::hoist::hoist_shared_linears;
use super::interp::float::fill;
use super::interp::{In, run_node};
use super::ir::{Graph, ValueId};
use super::max_pool::max_pool2d;
use super::movement;
use super::op::{Op, PoolKind};
use super::par::{Cost, MAX_CHUNKS, MIN_CHUNK_PS, chunk_count, for_row_blocks, gemm_chunks};
use super::passes::{ConstTable, eliminate_dead, fold_constants};
use super::plan::{Plan, Region, plan};
use super::reduce::{Fold, reduce, split as reduce_split};
use super::steps::{NORM_BLOCK, RowNormKind, Step, StepKind, build_steps};
use super::upsample::upsample_nearest2d;
use crate::pool::{ThreadPool, chunk_range};
use rml_kernels::{gemm, norm, softmax};

/// Most inputs of a node run by [`fill`].
const MAX_FILL_INPUTS: usize = 5;

/// How an [`Executor`] is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Worker threads (1 = everything on the calling thread; at most 16).
    pub threads: usize,
    /// Fuse elementwise runs (off: one program per elementwise node).
    pub fusion: bool,
    /// Time every step.
    pub profile: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            threads: 1,
            fusion: true,
            profile: false,
        }
    }
}

/// A compiled graph ready to run repeatedly.
pub struct Executor {
    graph: Graph,
    consts: ConstTable,
    steps: Vec<Step>,
    pool: ThreadPool,
    threads: usize,
    plan: Option<Plan>,
    arena: BufferPool,
    outputs: Vec<DenseTensor>,
    times: Option<Vec<Duration>>,
    /// GEMM scratch: one [`Executor::scratch_per_chunk`] slice per thread, sized at
    /// compile time (the packed-A block is capped by `MC × KC`, whatever the batch).
    scratch: Vec<f32>,
    scratch_per_chunk: usize,
    /// Least estimated work per chunk for a step to be split (`graph::par`).
    min_chunk_ps: usize,
}

impl Executor {
    /// Compiles `graph` with the constants' data from `weights`.
    pub fn new(
        graph: Graph,
        weights: &dyn ConstantValues,
        options: Options,
    ) -> Result<Executor, GraphError> {
        let mut graph = hoist_shared_linears(graph);
        let (mut consts, remaining) = fold_constants(&graph, weights)?;
        let live = eliminate_dead(&graph, &remaining);
        fold_batch_norms(&mut graph, &mut consts, &live);
        let steps = build_steps(&graph, &consts, &live, options.fusion);
        let threads = options.threads.clamp(1, MAX_CHUNKS);
        let pool = if threads == 1 {
            ThreadPool::serial()
        } else {
            ThreadPool::new(threads).map_err(|e| GraphError::Run {
                site: Site::Document,
                message: format!("thread pool: {e}"),
            })?
        };
        let times = options.profile.then(|| vec![Duration::ZERO; steps.len()]);
        let scratch_per_chunk = steps
            .iter()
            .filter_map(|s| match s.kind {
                StepKind::Linear { k, .. } => Some(gemm::gemm_packed_scratch_len(gemm::MC, k)),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        Ok(Executor {
            graph,
            consts,
            steps,
            pool,
            threads,
            plan: None,
            arena: BufferPool::new(),
            outputs: Vec::new(),
            times,
            scratch: vec![0.0; scratch_per_chunk * threads],
            scratch_per_chunk,
            min_chunk_ps: MIN_CHUNK_PS,
        })
    }

    /// Sets the least estimated work (picoseconds) per chunk for a step to be split
    /// across threads (default `MIN_CHUNK_PS`). `0` splits every step that has
    /// more than one item into one chunk per thread: tests use it to check that
    /// results do not depend on the thread count on graphs too small to split.
    pub fn set_min_chunk_ps(&mut self, ps: usize) {
        self.min_chunk_ps = ps;
    }

    /// The graph it runs.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The steps, in run order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Peak activation bytes of the current plan (after a run).
    pub fn peak_bytes(&self) -> Option<usize> {
        self.plan.as_ref().map(Plan::peak_bytes)
    }

    /// Per step: its label and the time spent in it over all runs so far (empty
    /// unless built with `profile`).
    pub fn profile(&self) -> Vec<(&str, Duration)> {
        match &self.times {
            Some(times) => self
                .steps
                .iter()
                .zip(times)
                .map(|(s, &t)| (s.label.as_str(), t))
                .collect(),
            None => Vec::new(),
        }
    }

    /// Sets every step's profiled time back to zero (no effect without `profile`).
    pub fn clear_profile(&mut self) {
        if let Some(times) = self.times.as_mut() {
            times.fill(Duration::ZERO);
        }
    }

    /// The outputs of the last run (in output order); stale or empty when the last
    /// run failed or there was none.
    pub fn outputs(&self) -> &[DenseTensor] {
        &self.outputs
    }

    /// Runs the graph on `inputs` (in input order) and returns the outputs (in
    /// output order), valid until the next run.
    pub fn run(&mut self, inputs: &[DenseTensor]) -> Result<&[DenseTensor], GraphError> {
        self.prepare(inputs)?;
        let plan = self.plan.as_ref().expect("prepared");
        let arena = self.arena.words_mut();
        for (&id, input) in self.graph.inputs.iter().zip(inputs) {
            let site = || Site::Input(self.graph.values[id].name.clone());
            let dtype = self.graph.values[id].ty.dtype;
            if input.data.dtype() != dtype {
                return Err(GraphError::Run {
                    site: site(),
                    message: format!("expected {dtype} data, got {}", input.data.dtype()),
                });
            }
            if input.data.len() != input.shape.numel() {
                return Err(GraphError::Run {
                    site: site(),
                    message: format!(
                        "shape {} needs {} elements, got {}",
                        input.shape,
                        input.shape.numel(),
                        input.data.len()
                    ),
                });
            }
            if let Some(r) = plan.regions[id] {
                write_buffer(&mut arena[r.offset..r.end()], &input.data);
            }
        }
        for (index, step) in self.steps.iter().enumerate() {
            let start = self.times.as_ref().map(|_| Instant::now());
            let ctx = Ctx {
                graph: &self.graph,
                consts: &self.consts,
                plan,
                pool: &self.pool,
                threads: self.threads,
                scratch_per_chunk: self.scratch_per_chunk,
                min_chunk_ps: self.min_chunk_ps,
            };
            ctx.run_step(index, step, arena, &mut self.scratch)?;
            if let (Some(times), Some(start)) = (self.times.as_mut(), start) {
                times[index] += start.elapsed();
            }
        }
        for (slot, &id) in self.graph.outputs.iter().enumerate() {
            let out = &mut self.outputs[slot];
            match (plan.regions[id], self.consts.get(id)) {
                (_, Some((_, data))) => out.data.clone_from(data),
                (Some(r), None) => read_into(&arena[r.offset..r.end()], &mut out.data),
                (None, None) => unreachable!("every output is planned"),
            }
        }
        Ok(&self.outputs)
    }

    /// Binds and plans for these input shapes unless the cached plan fits them.
    fn prepare(&mut self, inputs: &[DenseTensor]) -> Result<(), GraphError> {
        let same = self.plan.as_ref().is_some_and(|p| {
            p.input_dims.len() == inputs.len()
                && p.input_dims
                    .iter()
                    .zip(inputs)
                    .all(|(d, t)| d.as_slice() == t.shape.dims())
        });
        if same {
            return Ok(());
        }
        let dims: Vec<&[usize]> = inputs.iter().map(|t| t.shape.dims()).collect();
        let bound = self.graph.bind(&dims)?;
        let input_dims = dims.iter().map(|d| d.to_vec()).collect();
        let plan = plan(
            &self.graph,
            &self.consts,
            &self.steps,
            input_dims,
            bound.shapes,
        );
        self.arena.reserve(plan.arena_words);
        self.outputs = self
            .graph
            .outputs
            .iter()
            .map(|&id| {
                let dtype = self.graph.values[id].ty.dtype;
                let shape = plan.shapes[id];
                let data = Buffer::zeros(dtype, shape.numel()).ok_or_else(|| GraphError::Run {
                    site: Site::Output(self.graph.values[id].name.clone()),
                    message: format!("the executor does not hold {dtype} values"),
                })?;
                Ok(DenseTensor { shape, data })
            })
            .collect::<Result<_, GraphError>>()?;
        self.plan = Some(plan);
        Ok(())
    }
}

/// What a step needs besides the arena.
struct Ctx<'a> {
    graph: &'a Graph,
    consts: &'a ConstTable,
    plan: &'a Plan,
    pool: &'a ThreadPool,
    threads: usize,
    scratch_per_chunk: usize,
    min_chunk_ps: usize,
}

impl Ctx<'_> {
    fn run_step(
        &self,
        index: usize,
        step: &Step,
        arena: &mut [u64],
        scratch: &mut [f32],
    ) -> Result<(), GraphError> {
        match &step.kind {
            StepKind::Alias { .. } => Ok(()),
            StepKind::Fused(p) => {
                self.stream(Some(p), None, &self.plan.broadcasts[index], arena, scratch);
                Ok(())
            }
            StepKind::Linear {
                x,
                packed,
                weight,
                stored_mk,
                k,
                m,
                bias,
                out,
                epilogue,
            } => {
                // One row: a GEMV on the unpacked weight (the choice depends on the
                // shapes alone, so the bits do not depend on the thread count).
                let one_row = self.plan.shapes[*out].numel() == *m;
                let plain = match self.consts.get(*weight) {
                    Some((_, Buffer::F32(w))) if one_row => Some((&w[..], *stored_mk)),
                    _ => None,
                };
                let g = Producer {
                    rows: Rows::Gemm(Gemm {
                        packed: &packed[..],
                        plain,
                        k: *k,
                        m: *m,
                        pool: self.pool,
                    }),
                    x: *x,
                    params: [*bias, None],
                    out: *out,
                };
                self.produce(index, epilogue.as_ref(), &g, (arena, scratch))
            }
            StepKind::RowNorm {
                norm,
                x,
                params,
                epsilon,
                out,
                staged,
                epilogue,
            } => {
                let cols = self.plan.shapes[*out].dims().last().copied().unwrap_or(0);
                let g = Producer {
                    rows: Rows::Norm {
                        norm: *norm,
                        epsilon: *epsilon,
                        cols,
                        staged: *staged,
                    },
                    x: *x,
                    params: *params,
                    out: *out,
                };
                self.produce(index, Some(epilogue), &g, (arena, scratch))
            }
            StepKind::Conv {
                node,
                x,
                bias,
                out,
                packed,
                epilogue,
            } => {
                let g = Producer {
                    rows: Rows::Conv(self.conv_rows(*node, (*x, *out), packed.as_deref())?),
                    x: *x,
                    params: [*bias, None],
                    out: *out,
                };
                self.produce(index, epilogue.as_ref(), &g, (arena, scratch))
            }
            StepKind::GroupNorm {
                node,
                x,
                params,
                groups,
                epsilon,
                out,
                epilogue,
            } => {
                let g = Producer {
                    rows: self.group_norm_rows(*node, *x, *params, (*groups, *epsilon))?,
                    x: *x,
                    params: *params,
                    out: *out,
                };
                self.produce(index, epilogue.as_ref(), &g, (arena, scratch))
            }
            StepKind::Node(node) => self.node(*node, arena),
            StepKind::Attention {
                node,
                operands,
                out,
                heads_last,
            } => {
                let [q, k, v] = operands;
                let operands = [(q.0, &q.1[..]), (k.0, &k.1[..]), (v.0, &v.1[..])];
                self.attention(*node, operands, (*out, *heads_last), arena)
                    .ok_or_else(|| GraphError::Run {
                        site: Site::Node(Box::new(self.graph.nodes[*node].describe(*node))),
                        message: "these operand shapes need the interpreter (an empty axis), \
                                  which cannot read them through their transposes"
                            .into(),
                    })
            }
        }
    }

    /// Runs step `index`'s producer `g` with its epilogue program `p`, if any
    /// ([`Ctx::stream`]).
    fn produce(
        &self,
        index: usize,
        p: Option<&Program>,
        g: &Producer<'_>,
        (arena, scratch): (&mut [u64], &mut [f32]),
    ) -> Result<(), GraphError> {
        self.stream(p, Some(g), &self.plan.broadcasts[index], arena, scratch);
        Ok(())
    }

    /// The `conv2d` or `conv_transpose2d` node `node` (a [`StepKind::Conv`])
    /// reading `x` and writing `out` at this plan's shapes, with the step's
    /// pre-packed weight rows if any; an error naming the node when its shapes do
    /// not fit the convolution (shape inference rules that out).
    fn conv_rows<'s>(
        &'s self,
        node: usize,
        (x, out): (ValueId, ValueId),
        packed: Option<&'s [f32]>,
    ) -> Result<ConvRows<'s>, GraphError> {
        let n = &self.graph.nodes[node];
        let w = n.inputs.get(1).copied().flatten();
        let weight = w.and_then(|w| match self.consts.get(w) {
            Some((shape, Buffer::F32(data))) => Some((&data[..], shape.dims().try_into().ok()?)),
            _ => None,
        });
        let dims = |v: ValueId| self.plan.shapes[v].dims().try_into().ok();
        let bias_len = n
            .inputs
            .get(2)
            .copied()
            .flatten()
            .map(|b| self.plan.shapes[b].numel());
        let p: Option<&dyn ConvKind> = match &n.op {
            Op::Conv2d(p) => Some(p),
            Op::ConvTranspose2d(p) => Some(p),
            _ => None,
        };
        match (p, weight, dims(x), dims(out)) {
            (Some(p), Some(w), Some(x_dims), Some(out_dims))
                if p.dims_fit([x_dims, w.1, out_dims], bias_len) =>
            {
                Ok(ConvRows {
                    p,
                    w,
                    packed,
                    x_dims,
                    out: out_dims,
                    pool: self.pool,
                })
            }
            _ => Err(GraphError::Run {
                site: Site::Node(Box::new(n.describe(node))),
                message: "operand shapes do not fit the convolution".into(),
            }),
        }
    }

    /// The `group_norm` node `node` (a [`StepKind::GroupNorm`]) of `x` with
    /// parameters `params` at this plan's shapes; an error naming the node when
    /// they do not fit (shape inference rules that out).
    fn group_norm_rows(
        &self,
        node: usize,
        x: ValueId,
        params: [Option<ValueId>; 2],
        (groups, epsilon): (usize, f32),
    ) -> Result<Rows<'_>, GraphError> {
        let lens = params.map(|v| v.map(|v| self.plan.shapes[v].numel()));
        let dims = self.plan.shapes[x].dims();
        match group_norm::shape(dims, groups, lens, epsilon) {
            Some(dims) => Ok(Rows::GroupNorm {
                dims,
                groups,
                epsilon,
            }),
            None => Err(GraphError::Run {
                site: Site::Node(Box::new(self.graph.nodes[node].describe(node))),
                message: "operand shapes do not fit the group norm".into(),
            }),
        }
    }

    /// The region of arena-held value `id`.
    fn region(&self, id: ValueId) -> Option<Region> {
        self.plan.regions[id]
    }

    /// Chunks to split `n` items of a step costing `cost` into ([`chunk_count`]).
    fn chunks(&self, n: usize, cost: Cost) -> usize {
        chunk_count(self.threads, n, cost, self.min_chunk_ps)
    }

    /// Runs a fused program, or a packed GEMM, row norm or convolution with an optional
    /// epilogue program, split by rows (elements for a lone program) over threads.
    fn stream(
        &self,
        p: Option<&Program>,
        g: Option<&Producer<'_>>,
        bcast: &[Broadcast],
        arena: &mut [u64],
        scratch: &mut [f32],
    ) {
        let no_values: &[ValueId] = &[];
        let (p_outs, p_ops) = p.map_or((no_values, no_values), |p| (&p.outputs, &p.operands));
        let (nprog, nops) = (p_outs.len(), p_ops.len());
        // Regions: program outputs, then the producer's output (unless the program
        // rewrites it in place: it is then one of the program's outputs, `produced`);
        // program operands, then x and the producer's parameters.
        let mut out_ids = [0; MAX_IO];
        let mut in_ids = [0; MAX_IO];
        out_ids[..nprog].copy_from_slice(p_outs);
        in_ids[..nops].copy_from_slice(p_ops);
        let (mut nout, mut nin) = (nprog, nops);
        let mut produced = nprog;
        if let Some(g) = g {
            match p_outs.iter().position(|&o| o == g.out) {
                Some(j) => produced = j,
                // A staged norm's rows go to its L1 block, the slot after the
                // program's outputs in each epilogue call.
                None if g.rows.staged() => {}
                None => {
                    out_ids[nout] = g.out;
                    nout += 1;
                }
            }
            in_ids[nin] = g.x;
            nin += 1;
            for v in g.params.iter().flatten() {
                in_ids[nin] = *v;
                nin += 1;
            }
        }
        let producer_out = g.map(|g| g.out);
        let mut out_regions = [Region {
            offset: 0,
            words: 0,
        }; MAX_IO];
        for (r, &o) in out_regions.iter_mut().zip(&out_ids[..nout]) {
            *r = self.region(o).expect("step outputs are planned");
        }
        let mut in_regions = [None; MAX_IO];
        for (r, &v) in in_regions.iter_mut().zip(&in_ids[..nin]) {
            *r = if Some(v) == producer_out {
                None
            } else {
                self.region(v)
            };
        }
        let io = split(arena, &out_regions[..nout], &in_regions[..nin]);
        let mut sources: [Source<'_>; MAX_OPERANDS] = [Source::Output(0); MAX_OPERANDS];
        for (i, &v) in p_ops.iter().enumerate() {
            sources[i] = match (io.in_place[i], io.ins[i]) {
                _ if Some(v) == producer_out => Source::Output(produced),
                (Some(j), _) => Source::Output(j),
                (None, Some(words)) => Source::Data(self.data(v, words), bcast[i]),
                (None, None) => {
                    let (_, data) = self.consts.get(v).expect("operands are held");
                    Source::Data(buffer_data(data), bcast[i])
                }
            };
        }
        let sources = &sources[..nops];
        let xs = g.map(|g| f32_input(self.consts, self.plan, g.x, io.ins[nops]));
        let mut params: [Option<&[f32]>; 2] = [None; 2];
        let mut at = nops + 1;
        for (slot, v) in params.iter_mut().zip(g.map_or(&[None; 2], |g| &g.params)) {
            if let Some(v) = *v {
                *slot = Some(f32_input(self.consts, self.plan, v, io.ins[at]));
                at += 1;
            }
        }
        let n = self.plan.shapes[out_ids[0]].numel();
        let mut outs: [DataMut<'_>; MAX_IO] = std::array::from_fn(|_| DataMut::F32(&mut []));
        for ((slot, w), &o) in outs.iter_mut().zip(io.outs).zip(&out_ids[..nout]) {
            *slot = data_mut(self.graph.values[o].ty.dtype, w, n);
        }
        let unit = g.map_or(1, |g| g.rows.cols().max(1));
        let units = n / unit;
        let program = n.saturating_mul(p.map_or(0, Program::cost_ps));
        let work = match g.map(|g| &g.rows) {
            Some(Rows::Gemm(gemm)) => Cost::Fma(n.saturating_mul(gemm.k)).ps() + program,
            Some(Rows::Norm { .. }) => Cost::RowElements(n).ps() + program,
            Some(Rows::GroupNorm { .. }) => Cost::F64Elements(n).ps() + program,
            Some(Rows::Conv(conv)) => Cost::Fma(conv.work()).ps() + program,
            None => program,
        };
        let work = Cost::Ps(work);
        let chunks = self.chunks(units, work);
        // A convolution on one chunk may split its output-channel rows instead,
        // and a one-row GEMV its columns.
        let inner = match g.map(|g| &g.rows) {
            Some(Rows::Conv(conv)) if chunks == 1 => {
                conv.image_chunks(self.chunks(conv.channel_rows(), work))
            }
            Some(Rows::Gemm(gemm)) if chunks == 1 && gemm.plain.is_some() => {
                let blocks = gemm.m.div_ceil(GEMV_COLUMNS);
                let weight = Cost::WeightBytes(gemm.m.saturating_mul(gemm.k).saturating_mul(4));
                chunk_count(
                    self.threads,
                    blocks,
                    weight,
                    self.min_chunk_ps / GEMV_BAR_DIVISOR,
                )
            }
            _ => 1,
        };
        let body = |outs: &mut [DataMut<'_>], first: usize, scratch: &mut [f32]| match (g, xs) {
            (Some(g), Some(x)) => {
                let epilogue = |w: &mut [DataMut<'_>], at: usize| {
                    if let Some(p) = p {
                        p.run(sources, w, at);
                    }
                };
                g.rows.run(
                    x,
                    params,
                    (outs, produced),
                    (first, inner),
                    scratch,
                    epilogue,
                );
            }
            _ => {
                if let Some(p) = p {
                    p.run(sources, outs, first * unit);
                }
            }
        };
        let per = self.scratch_per_chunk;
        if chunks == 1 {
            body(&mut outs[..nout], 0, &mut scratch[..per]);
            return;
        }
        type Slot<'o, 's> = Mutex<Option<([DataMut<'o>; MAX_IO], &'s mut [f32])>>;
        let slots: [Slot<'_, '_>; MAX_CHUNKS] = std::array::from_fn(|_| Mutex::new(None));
        let mut rest = outs;
        let mut scratch_pieces = scratch.chunks_mut(per.max(1));
        for (c, slot) in slots.iter().enumerate().take(chunks) {
            let len = chunk_range(units, chunks, c).len() * unit;
            let mut piece: [DataMut<'_>; MAX_IO] = std::array::from_fn(|_| DataMut::F32(&mut []));
            for (r, pc) in rest.iter_mut().zip(piece.iter_mut()).take(nout) {
                let whole = std::mem::replace(r, DataMut::F32(&mut []));
                let (head, tail) = split_data(whole, len);
                *pc = head;
                *r = tail;
            }
            let own = if per == 0 {
                &mut []
            } else {
                scratch_pieces.next().expect("one scratch slice per thread")
            };
            *slot.lock().expect("fresh mutex") = Some((piece, own));
        }
        self.parallel(chunks, |c| {
            let piece = slots[c].lock().ok().and_then(|mut s| s.take());
            if let Some((mut piece, own)) = piece {
                body(&mut piece[..nout], chunk_range(units, chunks, c).start, own);
            }
        });
    }

    /// Calls `f(c)` for each chunk on the pool's spinning team: the calling thread
    /// works too and takes over chunks a descheduled worker has not claimed, and
    /// back-to-back split steps are handed over without waking a thread.
    fn parallel(&self, chunks: usize, f: impl Fn(usize) + Sync) {
        self.pool.run_team(chunks, &f);
    }

    /// Runs node `index` with the reference interpreter's op code, copying its
    /// inputs out of the arena and its outputs back.
    fn node(&self, index: usize, arena: &mut [u64]) -> Result<(), GraphError> {
        let node = &self.graph.nodes[index];
        // Data movement (slice, concat, split, gather, transpose, expand): strided
        // copies on the arena, bit-identical to the interpreter.
        if movement::run(self.graph, self.consts, self.plan, node, arena).is_some() {
            return Ok(());
        }
        if let Some(done) = self.native(index, arena) {
            return done;
        }
        // Constants are borrowed; arena inputs are copied out.
        let owned: Vec<Option<Cow<'_, (Shape, Buffer)>>> = node
            .inputs
            .iter()
            .map(|i| {
                i.map(|i| match (self.consts.get(i), self.region(i)) {
                    (Some(c), _) => Cow::Borrowed(c),
                    (None, Some(r)) => {
                        let dtype = self.graph.values[i].ty.dtype;
                        let shape = self.plan.shapes[i];
                        let mut data = Buffer::zeros(dtype, shape.numel()).expect("held dtype");
                        read_into(&arena[r.offset..r.end()], &mut data);
                        Cow::Owned((shape, data))
                    }
                    (None, None) => unreachable!("inputs are held"),
                })
            })
            .collect();
        let args: Vec<Option<In<'_>>> = node
            .inputs
            .iter()
            .zip(&owned)
            .map(|(i, o)| {
                i.zip(o.as_deref()).map(|(i, (shape, data))| In {
                    name: &self.graph.values[i].name,
                    shape,
                    data,
                })
            })
            .collect();
        let shapes: Vec<Shape> = node.outputs.iter().map(|&o| self.plan.shapes[o]).collect();
        let outs =
            run_node(self.graph, node, &args, &shapes).map_err(|message| GraphError::Run {
                site: Site::Node(Box::new(node.describe(index))),
                message,
            })?;
        for (&o, data) in node.outputs.iter().zip(&outs) {
            if let Some(r) = self.region(o) {
                write_buffer(&mut arena[r.offset..r.end()], data);
            }
        }
        Ok(())
    }

    /// Runs node `index` in place on the arena when it is an f32 op that is one
    /// rml-core call ([`fill`]); `None` when it is not.
    fn native(&self, index: usize, arena: &mut [u64]) -> Option<Result<(), GraphError>> {
        let node = &self.graph.nodes[index];
        if let (Op::Attention { .. }, [Some(q), Some(k), Some(v), ..]) =
            (&node.op, &node.inputs[..])
            && self
                .attention(
                    index,
                    [(*q, &[]), (*k, &[]), (*v, &[])],
                    (node.outputs[0], false),
                    arena,
                )
                .is_some()
        {
            return Some(Ok(()));
        }
        let f32 = |v: &ValueId| self.graph.values[*v].ty.dtype == DType::F32;
        let fits = node.outputs.len() == 1
            && node.inputs.len() <= MAX_FILL_INPUTS
            && node.outputs.iter().all(f32)
            && node.inputs.iter().flatten().all(f32);
        if !fits {
            return None;
        }
        let out = node.outputs[0];
        let mut ins = [None; MAX_IO];
        for (slot, v) in ins.iter_mut().zip(&node.inputs) {
            *slot = v.and_then(|v| self.region(v));
        }
        let io = split(arena, &[self.region(out)?], &ins[..node.inputs.len()]);
        let mut views: [Option<TensorView<'_, f32>>; MAX_FILL_INPUTS] = [None; MAX_FILL_INPUTS];
        for (i, v) in node.inputs.iter().enumerate() {
            if let Some(v) = *v {
                let data = f32_input(self.consts, self.plan, v, io.ins[i]);
                views[i] = Some(TensorView::new(data, self.plan.shapes[v]).ok()?);
            }
        }
        let [o, ..] = io.outs;
        let shape = self.plan.shapes[out];
        let words = &mut bytemuck::cast_slice_mut::<u64, f32>(o)[..shape.numel()];
        let conv: Option<&dyn ConvKind> = match &node.op {
            Op::Conv2d(p) => Some(p),
            Op::ConvTranspose2d(p) => Some(p),
            _ => None,
        };
        if let Some(p) = conv
            && self.conv(p, &views, words, shape)
        {
            return Some(Ok(()));
        }
        if let Some(Some(x)) = views.first()
            && let Some(done) = self.reduction(&node.op, x, words)
        {
            return Some(Ok(done));
        }
        if let (Op::UpsampleNearest2d(_), Some(Some(x)), &[_, _, oh, ow]) =
            (&node.op, views.first(), shape.dims())
            && let (Ok(xs), Ok(dims)) = (x.as_slice(), x.shape().dims().try_into())
            && upsample_nearest2d(xs, dims, words, [oh, ow])
        {
            return Some(Ok(()));
        }
        if let Op::MatMul {
            transpose_a,
            transpose_b,
        } = node.op
            && let (Some(Some(a)), Some(Some(b))) = (views.first(), views.get(1))
            && let (Ok(a_data), Ok(b_data)) = (a.as_slice(), b.as_slice())
            && matmul(
                (a_data, a.shape().dims()),
                (b_data, b.shape().dims()),
                [transpose_a, transpose_b],
                words,
                Split {
                    chunks: &|n, cost| self.chunks(n, cost),
                    parallel: &|n, f| self.parallel(n, f),
                },
            )
        {
            return Some(Ok(()));
        }
        if let Op::BatchNorm { epsilon } = node.op
            && let Some(Some(x)) = views.first()
            && let Ok(xs) = x.as_slice()
            && let (Some(mean), Some(var), Some(weight), Some(bias)) = (
                vector(&views, 1),
                vector(&views, 2),
                vector(&views, 3),
                vector(&views, 4),
            )
            && let (Some(mean), Some(var)) = (mean, var)
        {
            let params = ChannelParams {
                mean,
                var,
                weight,
                bias,
            };
            if batch_norm(xs, x.shape().dims(), &params, epsilon, words) {
                return Some(Ok(()));
            }
        }
        if let (
            Op::Pool2d {
                kind: PoolKind::Max,
                params,
            },
            Some(Some(x)),
            &[_, _, oh, ow],
        ) = (&node.op, views.first(), shape.dims())
            && let (Ok(xs), Ok(dims)) = (x.as_slice(), x.shape().dims().try_into())
            && max_pool2d(params, xs, dims, words, [oh, ow])
        {
            return Some(Ok(()));
        }
        let result = match self.row_kernels(&node.op, &views, words) {
            Some(done) => done,
            None => {
                let mut view = TensorViewMut::new(words, shape).ok()?;
                fill(&node.op, &views, &mut view)?
            }
        };
        Some(result.map_err(|e| GraphError::Run {
            site: Site::Node(Box::new(node.describe(index))),
            message: e.to_string(),
        }))
    }

    /// Runs an f32 `conv2d` (im2col + GEMM, `graph/conv.rs`) or `conv_transpose2d`
    /// (GEMM + col2im, `graph/conv_transpose.rs`) into `out`; `false` (nothing
    /// written) when the operands are not plain 4-D tensors that fit `p`, leaving the
    /// node to rml-core, which reports what is wrong.
    fn conv(
        &self,
        p: &dyn ConvKind,
        views: &[Option<TensorView<'_, f32>>],
        out: &mut [f32],
        shape: Shape,
    ) -> bool {
        let (Some((x, w, bias)), Ok(out_dims)) = (conv_operands(views), shape.dims().try_into())
        else {
            return false;
        };
        let io = ConvIo {
            x,
            w,
            packed_w: None,
            bias,
            out: out_dims,
        };
        if !p.fits(&io, out.len()) {
            return false;
        }
        let (units, rows_per_unit, work) = p.split(&io);
        let chunks = gemm_chunks(self.chunks(units, Cost::Fma(work)), units, rows_per_unit);
        p.run(&io, out, chunks, &|n, f| self.parallel(n, f));
        true
    }

    /// [`row_kernel`] over all rows of the node's input, split by rows across
    /// threads when the work is worth it; `None` when the op does not fit a row
    /// kernel.
    fn row_kernels(
        &self,
        op: &Op,
        views: &[Option<TensorView<'_, f32>>],
        y: &mut [f32],
    ) -> Option<rml_core::Result<()>> {
        let x = views.first()?.as_ref()?;
        let cols = x.shape().dims().last().copied()?;
        let rows = x.shape().numel().checked_div(cols)?;
        let chunks = self.chunks(rows, Cost::RowElements(y.len()));
        if chunks == 1 {
            return row_kernel(op, views, 0..rows, y);
        }
        row_kernel(op, views, 0..0, &mut [])?.ok()?;
        let failed = Mutex::new(None);
        let parallel = |n: usize, f: &(dyn Fn(usize) + Sync)| self.parallel(n, f);
        for_row_blocks(y, [rows, cols], chunks, &parallel, &|range, piece| {
            if let Some(Err(e)) = row_kernel(op, views, range, piece)
                && let Ok(mut f) = failed.lock()
            {
                *f = Some(e);
            }
        });
        let failed = failed.into_inner().ok().flatten();
        Some(failed.map_or(Ok(()), Err))
    }

    /// Runs the f32 `scaled_dot_product_attention` node `index` on the GEMM and the
    /// row softmax ([`Attention`]) reading q, k, v from `operands` (value and axis
    /// permutation, empty for none) and writing `out` (the node's output, or with
    /// `heads_last` its transpose swapping the query axis and the axis before),
    /// query blocks split across threads; `None` (nothing written) when the
    /// operands do not fit it.
    fn attention(
        &self,
        index: usize,
        operands: [(ValueId, &[usize]); 3],
        (out, heads_last): (ValueId, bool),
        arena: &mut [u64],
    ) -> Option<()> {
        let node = &self.graph.nodes[index];
        let Op::Attention { causal, scale } = node.op else {
            return None;
        };
        let dtype = |v: ValueId| self.graph.values[v].ty.dtype;
        let mask_value = node.inputs.get(3).copied().flatten();
        if dtype(out) != DType::F32 {
            return None;
        }
        let mut ins = [None; 4];
        let values = operands.iter().map(|o| o.0).chain(mask_value);
        for (slot, v) in ins.iter_mut().zip(values) {
            *slot = self.region(v);
        }
        let io = split(arena, &[self.region(out)?], &ins);
        let operand = |i: usize| {
            let (v, perm) = operands[i];
            if dtype(v) != DType::F32 {
                return None;
            }
            let data = f32_input(self.consts, self.plan, v, io.ins[i]);
            let dims = self.plan.shapes[v].dims();
            Some(Operand { data, dims, perm })
        };
        let mask = match mask_value {
            None => None,
            Some(v) => {
                let n = self.plan.shapes[v].numel();
                let data = match (dtype(v), io.ins[3], self.consts.get(v)) {
                    (DType::Bool, Some(w), _) => {
                        Mask::Keep(&bytemuck::cast_slice::<u64, u8>(w)[..n])
                    }
                    (DType::Bool, None, Some((_, Buffer::Bool(d)))) => Mask::Keep(d),
                    (DType::F32, w, _) => Mask::Add(f32_input(self.consts, self.plan, v, w)),
                    _ => return None,
                };
                Some((data, self.plan.shapes[v].dims()))
            }
        };
        let attention = Attention {
            q: operand(0)?,
            k: operand(1)?,
            v: operand(2)?,
            mask,
            causal,
            scale,
        };
        let shape = &self.plan.shapes[out];
        let mut dims = [0; rml_core::MAX_RANK];
        let dims = &mut dims[..shape.rank()];
        dims.copy_from_slice(shape.dims());
        if heads_last {
            dims.swap(shape.rank().checked_sub(3)?, shape.rank() - 2);
        }
        let layout = attention.layout(dims, heads_last)?;
        let [o, ..] = io.outs;
        let words = &mut bytemuck::cast_slice_mut::<u64, f32>(o)[..shape.numel()];
        let chunks = self.chunks(layout.units(), Cost::Fma(layout.work()));
        attention.run(&layout, words, chunks, &|n, f| self.parallel(n, f));
        Some(())
    }

    /// Runs a `reduce_*` over one contiguous run of axes or a global pooling on
    /// slices ([`reduce`]) into `out`; `None` (nothing written) for other ops and
    /// cases, leaving the node to rml-core.
    fn reduction(&self, op: &Op, x: &TensorView<'_, f32>, out: &mut [f32]) -> Option<()> {
        let (fold, parts) = match op {
            Op::Reduce { kind, axes, .. } => (
                Fold::Reduce(*kind),
                reduce_split(x.shape().dims(), axes.as_deref())?,
            ),
            Op::GlobalPool2d { kind } if x.shape().rank() == 4 => {
                let fold = match kind {
                    PoolKind::Max => Fold::GlobalMax,
                    PoolKind::Avg { .. } => Fold::GlobalAvg,
                };
                (fold, reduce_split(x.shape().dims(), Some(&[2, 3]))?)
            }
            _ => return None,
        };
        let xs = x.as_slice().ok()?;
        let chunks = self.chunks(out.len(), Cost::Elements(xs.len()));
        let parallel = |n: usize, f: &(dyn Fn(usize) + Sync)| self.parallel(n, f);
        reduce(fold, xs, parts, out, chunks, &parallel).then_some(())
    }

    /// An arena-held input's elements.
    fn data<'w>(&self, v: ValueId, words: &'w [u64]) -> Data<'w> {
        let n = self.plan.shapes[v].numel();
        match self.graph.values[v].ty.dtype {
            DType::Bool => Data::Bool(&bytemuck::cast_slice::<u64, u8>(words)[..n]),
            _ => Data::F32(&bytemuck::cast_slice::<u64, f32>(words)[..n]),
        }
    }
}

/// A convolution's `x` and `w` as contiguous 4-D operands and its optional bias as
/// a slice; `None` when one is not.
type ConvOperands<'v> = (
    (&'v [f32], [usize; 4]),
    (&'v [f32], [usize; 4]),
    Option<&'v [f32]>,
);

/// Inputs 0–2 of a convolution node as [`ConvOperands`].
fn conv_operands<'v>(views: &[Option<TensorView<'v, f32>>]) -> Option<ConvOperands<'v>> {
    let operand = |i: usize| {
        let v = views.get(i)?.as_ref()?;
        Some((v.as_slice().ok()?, v.shape().dims().try_into().ok()?))
    };
    let bias = match views.get(2) {
        Some(Some(b)) => Some(b.as_slice().ok()?),
        _ => None,
    };
    Some((operand(0)?, operand(1)?, bias))
}

/// Operand `i` of a node as a 1-D slice: `Some(None)` when absent, `None` when it is
/// not a contiguous rank-1 tensor.
fn vector<'v>(views: &[Option<TensorView<'v, f32>>], i: usize) -> Option<Option<&'v [f32]>> {
    match views.get(i) {
        Some(Some(v)) if v.shape().rank() == 1 => v.as_slice().ok().map(Some),
        Some(Some(_)) => None,
        _ => Some(None),
    }
}

/// Runs `layer_norm` / `rms_norm` / `softmax` with rml-kernels' row kernels on rows
/// `rows` of `x` into `y` (which holds exactly those rows) when the normalized axis
/// is the contiguous last axis alone and every affine parameter is one value per
/// column; `None` otherwise (the caller falls back to rml-core). The kernels
/// vectorize the row sums, so results differ from the interpreter's by rounding
/// (bounds in `docs/kernels.md`); a row's result does not depend on `rows`.
fn row_kernel(
    op: &Op,
    views: &[Option<TensorView<'_, f32>>],
    rows: Range<usize>,
    y: &mut [f32],
) -> Option<rml_core::Result<()>> {
    let x = views.first()?.as_ref()?;
    let cols = x.shape().dims().last().copied()?;
    let xs = x.as_slice().ok()?;
    // An optional per-column parameter: `Some(None)` when absent, `None` when its
    // shape does not fit the row kernel.
    let param = |i: usize| match views.get(i) {
        Some(Some(v)) if v.shape().numel() == cols => v.as_slice().ok().map(Some),
        Some(Some(_)) => None,
        _ => Some(None),
    };
    let last = x.shape().rank().checked_sub(1)?;
    match *op {
        Op::LayerNorm { axis, epsilon } if x.shape().axis(axis).ok()? == last => {
            let (gamma, beta) = (param(1)?, param(2)?);
            Some(norm::layer_norm_rows(
                xs, cols, rows, gamma, beta, epsilon, y,
            ))
        }
        Op::RmsNorm { epsilon } => {
            let gamma = param(1)?;
            Some(norm::rms_norm_rows(xs, cols, rows, gamma, epsilon, y))
        }
        Op::Softmax { log, axis } if x.shape().axis(axis).ok()? == last => Some(if log {
            softmax::log_softmax_rows(xs, cols, rows, y)
        } else {
            softmax::softmax_rows(xs, cols, rows, y)
        }),
        _ => None,
    }
}

/// What a streamed step computes before its epilogue program: a packed GEMM (a
/// linear), a layer or RMS norm over the last axis on rml-kernels' row kernels, or a
/// convolution (a row is one image's output).
enum Rows<'a> {
    /// The GEMM.
    Gemm(Gemm<'a>),
    /// The layer or RMS norm of rows of `cols` values, written to the thread's
    /// L1 block alone when `staged` (else to the step's output).
    Norm {
        norm: RowNormKind,
        epsilon: f32,
        cols: usize,
        staged: bool,
    },
    /// The `conv2d` or `conv_transpose2d`.
    Conv(ConvRows<'a>),
    /// The `group_norm` of `[N, C, inner]` in `groups` groups (a row is one
    /// image's group).
    GroupNorm {
        dims: [usize; 2],
        groups: usize,
        epsilon: f32,
    },
}

/// A `conv2d` or `conv_transpose2d` with a constant weight, run image by image
/// (`graph/conv.rs`, `graph/conv_transpose.rs`).
struct ConvRows<'a> {
    p: &'a dyn ConvKind,
    /// The weight and its dims.
    w: (&'a [f32], [usize; 4]),
    /// A `conv2d`'s weight rows pre-packed for the GEMM (`conv::pack_weights`).
    packed: Option<&'a [f32]>,
    x_dims: [usize; 4],
    out: [usize; 4],
    /// Runs the chunks of an image's split output-channel rows on its team.
    pool: &'a ThreadPool,
}

impl<'a> ConvRows<'a> {
    /// The convolution's operands with input data `x` and `bias`.
    fn io<'b>(&self, x: &'b [f32], bias: Option<&'b [f32]>) -> ConvIo<'b>
    where
        'a: 'b,
    {
        ConvIo {
            x: (x, self.x_dims),
            w: self.w,
            packed_w: self.packed,
            bias,
            out: self.out,
        }
    }

    /// The whole step's multiply-adds ([`ConvKind::split`] reads dims and weight
    /// alone).
    fn work(&self) -> usize {
        self.p.split(&self.io(&[], None)).2
    }

    /// One channel group's output channels (the rows an image's GEMM splits).
    fn channel_rows(&self) -> usize {
        self.p.split(&self.io(&[], None)).0 / self.out[0].max(1)
    }

    /// Pieces an image's work is split into when `chunks` are wanted.
    fn image_chunks(&self, chunks: usize) -> usize {
        self.p.image_chunks(&self.io(&[], None), chunks)
    }

    /// Images worth computing in one call ([`ConvKind::images_at_once`]).
    fn images_at_once(&self) -> usize {
        self.p.images_at_once(&self.io(&[], None))
    }

    /// Images `images` of the convolution of `x` into `out`, the work split into
    /// `chunks` pieces.
    fn images(
        &self,
        (x, bias): (&[f32], Option<&[f32]>),
        images: Range<usize>,
        out: &mut [f32],
        chunks: usize,
    ) {
        let io = self.io(x, bias);
        let parallel = |n: usize, f: &(dyn Fn(usize) + Sync)| self.pool.run_team(n, f);
        self.p.images(&io, images, out, (chunks, &parallel));
    }
}

/// Calls `f` with every output of `outs` windowed to `range`, followed by
/// `block` (a staged norm's rows of that range) if any.
fn windowed(
    outs: &mut [DataMut<'_>],
    range: Range<usize>,
    block: Option<&mut [f32]>,
    f: impl FnOnce(&mut [DataMut<'_>]),
) {
    let mut nout = outs.len();
    let mut window: [DataMut<'_>; MAX_IO] = std::array::from_fn(|_| DataMut::F32(&mut []));
    for (w, o) in window.iter_mut().zip(outs.iter_mut()) {
        *w = o.window(range.clone());
    }
    if let Some(block) = block {
        window[nout] = DataMut::F32(block);
        nout += 1;
    }
    f(&mut window[..nout]);
}

thread_local! {
    /// Each thread's block for a staged row norm's rows (8 KiB, in thread-local
    /// storage, not on the heap).
    static NORM_ROWS: RefCell<CacheAligned<[f32; NORM_BLOCK]>> =
        const { RefCell::new(CacheAligned([0.0; NORM_BLOCK])) };
}

impl Rows<'_> {
    /// Whether the rows go to a per-thread block, not to the step's output.
    fn staged(&self) -> bool {
        matches!(self, Rows::Norm { staged: true, .. })
    }

    /// Values per output row.
    fn cols(&self) -> usize {
        match self {
            Rows::Gemm(g) => g.m,
            Rows::Norm { cols, .. } => *cols,
            Rows::Conv(conv) => conv.out[1..].iter().product(),
            Rows::GroupNorm { dims, groups, .. } => dims[0] / groups * dims[1],
        }
    }

    /// Computes output rows `first..` into `outs[at]` (this chunk's rows of the
    /// step's output; `params` are the GEMM's bias or the norm's scale and shift)
    /// and calls `epilogue(outs, element)` on every block of computed rows (all
    /// outputs windowed to the block, `element` its first flat index): the whole
    /// chunk at once after a GEMM, blocks of at most [`NORM_BLOCK`] elements for a
    /// row norm (in the thread's L1 block instead of `outs[at]` when staged; the
    /// block is then the slot after the outputs in each epilogue call), each
    /// image after a convolution (whose rows are split into
    /// `inner` chunks). A row's values do not depend on the block or chunk it
    /// falls in.
    fn run(
        &self,
        x: &[f32],
        params: [Option<&[f32]>; 2],
        (outs, at): (&mut [DataMut<'_>], usize),
        (first, inner): (usize, usize),
        scratch: &mut [f32],
        mut epilogue: impl FnMut(&mut [DataMut<'_>], usize),
    ) {
        let cols = self.cols();
        if cols == 0 {
            return;
        }
        match self {
            Rows::Gemm(gemm) => {
                if let DataMut::F32(o) = &mut outs[at] {
                    gemm.rows(x, params[0], o, (first, inner), scratch);
                }
                epilogue(outs, first * cols);
            }
            Rows::Norm {
                norm: kind,
                epsilon,
                staged,
                ..
            } => {
                let rows = outs.first().map_or(0, DataMut::len) / cols;
                let block = (NORM_BLOCK / cols).max(1);
                let normalize = |range: Range<usize>, y: &mut [f32]| {
                    let [gamma, beta] = params;
                    match kind {
                        RowNormKind::Layer => {
                            norm::layer_norm_rows(x, cols, range, gamma, beta, *epsilon, y)
                        }
                        RowNormKind::Rms => norm::rms_norm_rows(x, cols, range, gamma, *epsilon, y),
                    }
                    .expect("row-norm steps are checked to fit the row kernel");
                };
                let mut r = 0;
                while r < rows {
                    let end = (r + block).min(rows);
                    let (range, window) = (first + r..first + end, r * cols..end * cols);
                    let epilogue = &mut epilogue;
                    if *staged {
                        NORM_ROWS.with_borrow_mut(|b| {
                            let y = &mut b.0[..window.len()];
                            normalize(range, y);
                            windowed(outs, window, Some(y), |w| epilogue(w, (first + r) * cols));
                        });
                    } else {
                        if let DataMut::F32(o) = &mut outs[at] {
                            normalize(range, &mut o[window.clone()]);
                        }
                        windowed(outs, window, None, |w| epilogue(w, (first + r) * cols));
                    }
                    r = end;
                }
            }
            &Rows::GroupNorm {
                dims,
                groups,
                epsilon,
            } => {
                let norm = GroupNorm {
                    dims,
                    groups,
                    params,
                    epsilon,
                };
                let count = outs[at].len() / cols;
                for r in (0..count).step_by(group_norm::BLOCKS_AT_ONCE) {
                    let end = count.min(r + group_norm::BLOCKS_AT_ONCE);
                    let window = r * cols..end * cols;
                    if let DataMut::F32(o) = &mut outs[at] {
                        norm.blocks(x, first + r..first + end, &mut o[window.clone()]);
                    }
                    windowed(outs, window, None, |w| epilogue(w, (first + r) * cols));
                }
            }
            Rows::Conv(conv) => {
                // A few images at a time (a transposed convolution multiplies them
                // in one GEMM), then the epilogue on each while it is in cache.
                let count = outs[at].len() / cols;
                let step = conv.images_at_once().max(1);
                for r in (0..count).step_by(step) {
                    let end = count.min(r + step);
                    if let DataMut::F32(o) = &mut outs[at] {
                        let images = first + r..first + end;
                        let out = &mut o[r * cols..end * cols];
                        conv.images((x, params[0]), images, out, inner);
                    }
                    for q in r..end {
                        windowed(outs, q * cols..(q + 1) * cols, None, |w| {
                            epilogue(w, (first + q) * cols);
                        });
                    }
                }
            }
        }
    }
}

/// A row-producing step's kernel and its values.
struct Producer<'a> {
    rows: Rows<'a>,
    x: ValueId,
    /// The GEMM's bias, or the norm's scale and shift.
    params: [Option<ValueId>; 2],
    out: ValueId,
}

/// A GEMM `[rows, k] · [k, m]` with `B` pre-packed by `gemm::pack_b`.
struct Gemm<'a> {
    packed: &'a [f32],
    /// For a one-row step: the unpacked weight and whether it is stored `[m, k]`
    /// (else `[k, m]`), run as a GEMV instead of the packed GEMM.
    plain: Option<(&'a [f32], bool)>,
    k: usize,
    m: usize,
    /// Runs a GEMV's column chunks on its team.
    pool: &'a ThreadPool,
}

impl Gemm<'_> {
    /// Output rows `first..first + out.len() / m`: the packed GEMM of those rows of
    /// `x` with the bias in its epilogue (the row block of `gemm_packed_range`, on a
    /// thread's own slice of the output). A row's value does not depend on the
    /// block it falls in (same K blocking and accumulation order for every row), so
    /// any row partition gives the same bits. A one-row step runs the GEMV instead,
    /// its columns split into `column_chunks` over the team.
    fn rows(
        &self,
        x: &[f32],
        bias: Option<&[f32]>,
        out: &mut [f32],
        (first, column_chunks): (usize, usize),
        scratch: &mut [f32],
    ) {
        let (k, m) = (self.k, self.m);
        if m == 0 {
            return;
        }
        let rows = out.len() / m;
        let a = &x[first * k..(first + rows) * k];
        if let Some(weight) = self.plain {
            if column_chunks <= 1 {
                self.gemv(weight, a, bias, out, 0..m);
                return;
            }
            // Column blocks of `GEMV_COLUMNS` (a multiple of every GEMV kernel's
            // vector width, so each column takes the same path as unsplit).
            let blocks = m.div_ceil(GEMV_COLUMNS);
            let parallel = |n: usize, f: &(dyn Fn(usize) + Sync)| self.pool.run_team(n, f);
            for_row_blocks(
                out,
                [blocks, GEMV_COLUMNS],
                column_chunks,
                &parallel,
                &|range, y| {
                    let columns = range.start * GEMV_COLUMNS..(range.end * GEMV_COLUMNS).min(m);
                    self.gemv(weight, a, bias, y, columns);
                },
            );
            return;
        }
        let epilogue = gemm::Epilogue {
            bias,
            ..gemm::Epilogue::default()
        };
        let done = gemm::PackedB::new(self.packed, k, m).and_then(|b| {
            let a = gemm::MatRef::row_major(a, rows, k)?;
            let c = gemm::MatMut::row_major(out, rows, m)?;
            gemm::gemm_packed(1.0, a, b, 0.0, c, &epilogue, scratch)
        });
        done.expect("linear steps are packed and planned to these sizes");
    }

    /// Output columns `columns` of the one-row product `a · W` (+ bias) into `y`
    /// (those columns alone) on the unpacked weight `(w, stored_mk)` (`plain`): a
    /// GEMV that streams the weight's rows (`[M, K]`) or row pieces (`[K, M]`) once.
    fn gemv(
        &self,
        (w, stored_mk): (&[f32], bool),
        a: &[f32],
        bias: Option<&[f32]>,
        y: &mut [f32],
        columns: Range<usize>,
    ) {
        let (k, m) = (self.k, self.m);
        let epilogue = gemm::Epilogue {
            bias: bias.map(|b| &b[columns.clone()]),
            ..gemm::Epilogue::default()
        };
        let width = columns.len();
        let done = gemm::MatRef::row_major(a, 1, k).and_then(|a| {
            let c = gemm::MatMut::row_major(y, 1, width)?;
            if stored_mk {
                let w = gemm::MatRef::row_major(&w[columns.start * k..columns.end * k], width, k)?;
                gemm::gemv_nk(1.0, a, w, 0.0, c, &epilogue)
            } else {
                let w = gemm::MatRef::new(&w[columns.start..], k, width, m, 1)?;
                gemm::gemv_kn(1.0, a, w, 0.0, c, &epilogue)
            }
        });
        done.expect("linear weights are planned to these sizes");
    }
}

/// Output columns per block of a split one-row GEMV (a multiple of the GEMV
/// kernels' vector widths).
const GEMV_COLUMNS: usize = 64;

/// A one-row GEMV splits its columns at this fraction of the thread policy's work
/// bar (6.25 µs per chunk): each core streams its part of the weight at memory
/// speed (two cores read a 1–4 MiB weight out of L3 about twice as fast as one),
/// and one-row products come in chains (recurrences, decoding) that keep the team
/// spinning, so the hand-off costs about a microsecond, not a wake-up. At a quarter
/// of the bar, rnn's 1 MiB step (22 µs) stayed on one thread and batch 1 ran 1.12×
/// slower on 2 threads than on 1; at an eighth, 0.52×.
const GEMV_BAR_DIVISOR: usize = 8;

/// An f32 input of a linear step: from the arena, or a constant.
fn f32_input<'w>(
    consts: &'w ConstTable,
    plan: &Plan,
    v: ValueId,
    words: Option<&'w [u64]>,
) -> &'w [f32] {
    match (words, consts.get(v)) {
        (Some(w), _) => &bytemuck::cast_slice::<u64, f32>(w)[..plan.shapes[v].numel()],
        (None, Some((_, Buffer::F32(d)))) => d,
        _ => &[],
    }
}

/// A constant's elements as program data.
fn buffer_data(data: &Buffer) -> Data<'_> {
    match data {
        Buffer::Bool(v) => Data::Bool(v),
        Buffer::F32(v) => Data::F32(v),
        Buffer::I64(_) => unreachable!("programs hold F32 and BOOL only"),
    }
}

/// An output region's first `n` elements of `dtype`.
fn data_mut(dtype: DType, words: &mut [u64], n: usize) -> DataMut<'_> {
    match dtype {
        DType::Bool => DataMut::Bool(&mut bytemuck::cast_slice_mut::<u64, u8>(words)[..n]),
        _ => DataMut::F32(&mut bytemuck::cast_slice_mut::<u64, f32>(words)[..n]),
    }
}

/// Splits output elements at `len`.
fn split_data(data: DataMut<'_>, len: usize) -> (DataMut<'_>, DataMut<'_>) {
    match data {
        DataMut::F32(v) => {
            let (a, b) = v.split_at_mut(len);
            (DataMut::F32(a), DataMut::F32(b))
        }
        DataMut::Bool(v) => {
            let (a, b) = v.split_at_mut(len);
            (DataMut::Bool(a), DataMut::Bool(b))
        }
    }
}

/// Copies `data` into arena words.
fn write_buffer(words: &mut [u64], data: &Buffer) {
    match data {
        Buffer::F32(v) => bytemuck::cast_slice_mut::<u64, f32>(words)[..v.len()].copy_from_slice(v),
        Buffer::I64(v) => bytemuck::cast_slice_mut::<u64, i64>(words)[..v.len()].copy_from_slice(v),
        Buffer::Bool(v) => bytemuck::cast_slice_mut::<u64, u8>(words)[..v.len()].copy_from_slice(v),
    }
}

/// Copies arena words into `data` (its length says how many elements).
fn read_into(words: &[u64], data: &mut Buffer) {
    match data {
        Buffer::F32(v) => {
            let n = v.len();
            v.copy_from_slice(&bytemuck::cast_slice::<u64, f32>(words)[..n]);
        }
        Buffer::I64(v) => {
            let n = v.len();
            v.copy_from_slice(&bytemuck::cast_slice::<u64, i64>(words)[..n]);
        }
        Buffer::Bool(v) => {
            let n = v.len();
            v.copy_from_slice(&bytemuck::cast_slice::<u64, u8>(words)[..n]);
        }
    }
}
