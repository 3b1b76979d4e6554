//! [`Executor`]: compiles a graph once (folding, dead-node removal, fusion, weight
//! packing), plans buffers per set of input shapes (cached: the batch is bound per
//! run), and runs the steps over one reused arena. After the first run with given
//! shapes, a run on one thread allocates nothing on the heap as long as every step
//! is fused, linear or an alias ([`StepKind::Node`] steps copy through the reference
//! interpreter and allocate).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rml_core::{DType, Shape};

use super::arena::{BufferPool, MAX_IO, split};
use super::buffer::{Buffer, DenseTensor};
use super::constants::ConstantValues;
use super::error::{GraphError, Site};
use super::fuse::{Data, DataMut, MAX_OPERANDS, Program, Source};
use super::interp::{In, run_node};
use super::ir::{Graph, ValueId};
use super::passes::{ConstTable, eliminate_dead, fold_constants};
use super::plan::{Plan, Region, plan};
use super::steps::{Step, StepKind, build_steps};
use crate::pool::{ThreadPool, chunk_range};

/// Most chunks a step is split into across threads.
const MAX_CHUNKS: usize = 16;

/// Work (elements × instructions) below which a step stays on the calling thread.
const MIN_PARALLEL_WORK: usize = 1 << 15;

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
}

impl Executor {
    /// Compiles `graph` with the constants' data from `weights`.
    pub fn new(
        graph: Graph,
        weights: &dyn ConstantValues,
        options: Options,
    ) -> Result<Executor, GraphError> {
        let (consts, remaining) = fold_constants(&graph, weights)?;
        let live = eliminate_dead(&graph, &remaining);
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
        })
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
            };
            ctx.run_step(index, step, arena)?;
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
}

impl Ctx<'_> {
    fn run_step(&self, index: usize, step: &Step, arena: &mut [u64]) -> Result<(), GraphError> {
        match &step.kind {
            StepKind::Alias { .. } => Ok(()),
            StepKind::Fused(p) => {
                self.fused(p, &self.plan.broadcasts[index], arena);
                Ok(())
            }
            StepKind::Linear {
                x,
                packed,
                k,
                m,
                bias,
                out,
            } => {
                let gemm = Gemm {
                    packed,
                    k: *k,
                    m: *m,
                };
                self.linear(&gemm, *x, *bias, *out, arena);
                Ok(())
            }
            StepKind::Node(node) => self.node(*node, arena),
        }
    }

    /// The region of arena-held value `id`.
    fn region(&self, id: ValueId) -> Option<Region> {
        self.plan.regions[id]
    }

    /// Splits `n` items into chunks when the work is worth more threads.
    fn chunks(&self, n: usize, work: usize) -> usize {
        if self.threads > 1 && work >= MIN_PARALLEL_WORK {
            self.threads.min(n).max(1)
        } else {
            1
        }
    }

    /// Runs a fused program, split by element ranges over threads.
    fn fused(&self, p: &Program, bcast: &[super::fuse::Broadcast], arena: &mut [u64]) {
        let mut out_regions = [Region {
            offset: 0,
            words: 0,
        }; MAX_IO];
        for (j, &o) in p.outputs.iter().enumerate() {
            out_regions[j] = self.region(o).expect("fused outputs are planned");
        }
        let mut in_regions = [None; MAX_IO];
        for (i, &v) in p.operands.iter().enumerate() {
            in_regions[i] = self.region(v);
        }
        let io = split(
            arena,
            &out_regions[..p.outputs.len()],
            &in_regions[..p.operands.len()],
        );
        let mut sources: [Source<'_>; MAX_OPERANDS] = [Source::Output(0); MAX_OPERANDS];
        for (i, &v) in p.operands.iter().enumerate() {
            sources[i] = match (io.in_place[i], io.ins[i]) {
                (Some(j), _) => Source::Output(j),
                (None, Some(words)) => Source::Data(self.data(v, words), bcast[i]),
                (None, None) => {
                    let (_, data) = self.consts.get(v).expect("operands are held");
                    Source::Data(buffer_data(data), bcast[i])
                }
            };
        }
        let sources = &sources[..p.operands.len()];
        let n = self.plan.shapes[p.outputs[0]].numel();
        let mut outs: [DataMut<'_>; MAX_OPERANDS] = std::array::from_fn(|_| DataMut::F32(&mut []));
        for ((slot, w), &o) in outs.iter_mut().zip(io.outs).zip(&p.outputs) {
            *slot = data_mut(self.graph.values[o].ty.dtype, w, n);
        }
        let nout = p.outputs.len();
        let chunks = self.chunks(n, n * p.code.len());
        if chunks == 1 {
            p.run(sources, &mut outs[..nout], 0);
            return;
        }
        let slots: [Mutex<Option<[DataMut<'_>; MAX_OPERANDS]>>; MAX_CHUNKS] =
            std::array::from_fn(|_| Mutex::new(None));
        let mut rest = outs;
        for (c, slot) in slots.iter().enumerate().take(chunks) {
            let len = chunk_range(n, chunks, c).len();
            let mut piece: [DataMut<'_>; MAX_OPERANDS] =
                std::array::from_fn(|_| DataMut::F32(&mut []));
            for (r, pc) in rest.iter_mut().zip(piece.iter_mut()).take(nout) {
                let whole = std::mem::replace(r, DataMut::F32(&mut []));
                let (head, tail) = split_data(whole, len);
                *pc = head;
                *r = tail;
            }
            *slot.lock().expect("fresh mutex") = Some(piece);
        }
        self.parallel(chunks, |c| {
            let piece = slots[c].lock().ok().and_then(|mut s| s.take());
            if let Some(mut piece) = piece {
                let base = chunk_range(n, chunks, c).start;
                p.run(sources, &mut piece[..nout], base);
            }
        });
    }

    /// Calls `f(c)` for each chunk on the pool.
    fn parallel(&self, chunks: usize, f: impl Fn(usize) + Sync) {
        self.pool
            .parallel_for_cost(chunks, 1, self.pool.min_parallel_cost(), |c, _| f(c));
    }

    /// Runs a packed GEMM row by row, split by rows over threads.
    fn linear(
        &self,
        g: &Gemm<'_>,
        x: ValueId,
        bias: Option<ValueId>,
        out: ValueId,
        arena: &mut [u64],
    ) {
        let out_region = self.region(out).expect("linear outputs are planned");
        let io = split(
            arena,
            &[out_region],
            &[self.region(x), bias.and_then(|b| self.region(b))],
        );
        let xs = f32_input(self.consts, self.plan, x, io.ins[0]);
        let bs = bias.map(|b| f32_input(self.consts, self.plan, b, io.ins[1]));
        let n = self.plan.shapes[out].numel();
        let [o0, ..] = io.outs;
        let o = &mut bytemuck::cast_slice_mut::<u64, f32>(o0)[..n];
        let rows = n / g.m.max(1);
        let chunks = self.chunks(rows, n * g.k);
        if chunks == 1 {
            g.rows(xs, bs, o, 0);
            return;
        }
        let slots: [Mutex<Option<&mut [f32]>>; MAX_CHUNKS] =
            std::array::from_fn(|_| Mutex::new(None));
        let mut rest = o;
        for (c, slot) in slots.iter().enumerate().take(chunks) {
            let len = chunk_range(rows, chunks, c).len() * g.m;
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(len);
            rest = tail;
            *slot.lock().expect("fresh mutex") = Some(head);
        }
        self.parallel(chunks, |c| {
            let piece = slots[c].lock().ok().and_then(|mut s| s.take());
            if let Some(piece) = piece {
                g.rows(xs, bs, piece, chunk_range(rows, chunks, c).start);
            }
        });
    }

    /// Runs node `index` with the reference interpreter's op code, copying its
    /// inputs out of the arena and its outputs back.
    fn node(&self, index: usize, arena: &mut [u64]) -> Result<(), GraphError> {
        let node = &self.graph.nodes[index];
        let owned: Vec<Option<(Shape, Buffer)>> = node
            .inputs
            .iter()
            .map(|i| {
                i.map(|i| match (self.consts.get(i), self.region(i)) {
                    (Some(c), _) => c.clone(),
                    (None, Some(r)) => {
                        let dtype = self.graph.values[i].ty.dtype;
                        let shape = self.plan.shapes[i];
                        let mut data = Buffer::zeros(dtype, shape.numel()).expect("held dtype");
                        read_into(&arena[r.offset..r.end()], &mut data);
                        (shape, data)
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
                i.zip(o.as_ref()).map(|(i, (shape, data))| In {
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

    /// An arena-held input's elements.
    fn data<'w>(&self, v: ValueId, words: &'w [u64]) -> Data<'w> {
        let n = self.plan.shapes[v].numel();
        match self.graph.values[v].ty.dtype {
            DType::Bool => Data::Bool(&bytemuck::cast_slice::<u64, u8>(words)[..n]),
            _ => Data::F32(&bytemuck::cast_slice::<u64, f32>(words)[..n]),
        }
    }
}

/// A pre-packed GEMM `[rows, k] · [k, m]`.
struct Gemm<'a> {
    packed: &'a [f32],
    k: usize,
    m: usize,
}

impl Gemm<'_> {
    /// Output rows `first..first + out.len() / m`: the product, then the bias.
    fn rows(&self, x: &[f32], bias: Option<&[f32]>, out: &mut [f32], first: usize) {
        let (k, m) = (self.k, self.m);
        if m == 0 {
            return;
        }
        for (r, o) in out.chunks_exact_mut(m).enumerate() {
            let row = &x[(first + r) * k..(first + r + 1) * k];
            o.fill(0.0);
            for (&a, w) in row.iter().zip(self.packed.chunks_exact(m)) {
                for (acc, &b) in o.iter_mut().zip(w) {
                    *acc += a * b;
                }
            }
            if let Some(bias) = bias {
                for (acc, &b) in o.iter_mut().zip(bias) {
                    *acc += b;
                }
            }
        }
    }
}

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
