//! Elementwise fusion: a run of consecutive elementwise nodes (unary, clip, binary,
//! compare, `where`, `cast`) with one output shape becomes one [`Program`], a small
//! register machine over f32 tiles. Members need not feed each other; every member
//! output that something outside the run reads is stored, the rest live only in
//! registers. `BOOL` values are held as 0.0/1.0 in registers.

use rml_core::DType;
use rml_core::ops::binary::{self, BinaryOp};
use rml_core::ops::compare::{self, CompareOp};
use rml_core::ops::unary::{self, UnaryOp};

use super::interp::float::{binary_op, unary_op};
use super::interp::layout::compare_op;
use super::ir::{Graph, ValueId};
use super::op::Op;

/// Elements per register tile (1 KiB of f32: a program with [`MAX_REGS`] registers
/// stays inside a 32 KiB L1 cache).
pub const TILE: usize = 256;

/// Most registers one program uses; a run that needs more is split.
pub const MAX_REGS: usize = 24;

/// Most operands, and most stored outputs, of one program.
pub const MAX_OPERANDS: usize = 8;

/// Register index.
pub type Reg = u8;

/// A program's registers: [`MAX_REGS`] tiles.
pub type Registers = [f32; MAX_REGS * TILE];

/// Zeroed registers.
pub fn new_registers() -> Registers {
    [0.0; MAX_REGS * TILE]
}

/// One instruction of a fused program.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Instr {
    /// Load operand `operand`'s tile (broadcast as needed) into `dst`.
    Load {
        /// Destination register.
        dst: Reg,
        /// Operand index.
        operand: u8,
    },
    /// `dst = f(src)`.
    Unary {
        /// Destination register.
        dst: Reg,
        /// Source register.
        src: Reg,
        /// The function: rml-core's definition; transcendentals are evaluated
        /// per tile by rml-kernels' vector math within its ULP bounds.
        f: UnaryOp,
    },
    /// `dst = min(max(src, lo), hi)`, keeping NaN.
    Clip {
        /// Destination register.
        dst: Reg,
        /// Source register.
        src: Reg,
        /// Lower bound.
        lo: f32,
        /// Upper bound.
        hi: f32,
    },
    /// `dst = f(a, b)`.
    Binary {
        /// Destination register.
        dst: Reg,
        /// Left register.
        a: Reg,
        /// Right register.
        b: Reg,
        /// The function.
        f: BinaryOp,
    },
    /// `dst = f(a, b) ? 1 : 0`.
    Compare {
        /// Destination register.
        dst: Reg,
        /// Left register.
        a: Reg,
        /// Right register.
        b: Reg,
        /// The comparison.
        f: CompareOp,
    },
    /// `dst = cond != 0 ? a : b`.
    Where {
        /// Destination register.
        dst: Reg,
        /// Condition register.
        cond: Reg,
        /// Taken where the condition holds.
        a: Reg,
        /// Taken elsewhere.
        b: Reg,
    },
    /// `dst = src != 0 ? 1 : 0` (a cast to `BOOL`; NaN is true).
    ToBool {
        /// Destination register.
        dst: Reg,
        /// Source register.
        src: Reg,
    },
    /// `dst = src` (a cast that keeps the value).
    Copy {
        /// Destination register.
        dst: Reg,
        /// Source register.
        src: Reg,
    },
    /// Store register `src` to output `output`.
    Store {
        /// Source register.
        src: Reg,
        /// Output index.
        output: u8,
    },
}

/// A fused elementwise group: loads come first, stores last, so an output may
/// share its buffer with a same-shaped operand (in place).
#[derive(Clone, Debug, PartialEq)]
pub struct Program {
    /// The graph nodes it replaces, in order.
    pub members: Vec<usize>,
    /// Values read from outside, in operand order.
    pub operands: Vec<ValueId>,
    /// Values written, in output order.
    pub outputs: Vec<ValueId>,
    /// The instructions.
    pub code: Vec<Instr>,
    /// Registers used.
    pub regs: usize,
}

/// True when node `op` with these dtypes can join a program.
pub fn fusible(graph: &Graph, node: usize) -> bool {
    let n = &graph.nodes[node];
    let held = |id: ValueId| matches!(graph.values[id].ty.dtype, DType::F32 | DType::Bool);
    let elementwise = match &n.op {
        Op::Unary(_) | Op::Clip { .. } | Op::Binary(_) => {
            graph.values[n.outputs[0]].ty.dtype == DType::F32
        }
        Op::Compare(_) | Op::Where | Op::Cast { .. } => true,
        _ => false,
    };
    let known = graph.values[n.outputs[0]]
        .ty
        .shape
        .iter()
        .all(|d| !matches!(d, super::dim::Dim::Unknown));
    elementwise
        && known
        && n.inputs.iter().all(|i| i.is_some_and(held))
        && n.outputs.iter().all(|&o| held(o))
}

/// Builds programs incrementally from consecutive fusible nodes.
struct Builder<'g> {
    graph: &'g Graph,
    program: Program,
    /// Register holding each value defined or loaded so far.
    reg_of: Vec<(ValueId, Reg)>,
}

impl<'g> Builder<'g> {
    fn new(graph: &'g Graph) -> Builder<'g> {
        let program = Program {
            members: Vec::new(),
            operands: Vec::new(),
            outputs: Vec::new(),
            code: Vec::new(),
            regs: 0,
        };
        Builder {
            graph,
            program,
            reg_of: Vec::new(),
        }
    }

    /// Registers and operands node `node` would add.
    fn cost(&self, node: usize) -> (usize, usize) {
        let n = &self.graph.nodes[node];
        let mut loads = 0;
        for id in n.inputs.iter().flatten() {
            if !self.reg_of.iter().any(|(v, _)| v == id) {
                loads += 1;
            }
        }
        (loads + 1, loads)
    }

    /// True when node `node` fits beside the current members.
    fn fits(&self, node: usize) -> bool {
        let (regs, operands) = self.cost(node);
        let out = self.graph.nodes[node].outputs[0];
        let same_shape = match self.program.members.first() {
            Some(&m) => {
                let first = self.graph.nodes[m].outputs[0];
                self.graph.values[first].ty.shape == self.graph.values[out].ty.shape
            }
            None => true,
        };
        same_shape
            && self.program.regs + regs <= MAX_REGS
            && self.program.operands.len() + operands <= MAX_OPERANDS
            && self.program.members.len() < MAX_OPERANDS
    }

    fn reg(&mut self, id: ValueId) -> Reg {
        if let Some(&(_, r)) = self.reg_of.iter().find(|(v, _)| *v == id) {
            return r;
        }
        let dst = self.fresh();
        let operand = self.program.operands.len() as u8;
        self.program.operands.push(id);
        self.program.code.push(Instr::Load { dst, operand });
        self.reg_of.push((id, dst));
        dst
    }

    fn fresh(&mut self) -> Reg {
        self.program.regs += 1;
        (self.program.regs - 1) as Reg
    }

    fn push(&mut self, node: usize) {
        let n = &self.graph.nodes[node];
        let args: Vec<Reg> = n.inputs.iter().flatten().map(|&id| self.reg(id)).collect();
        let dst = self.fresh();
        let out = n.outputs[0];
        let instr = match &n.op {
            Op::Unary(f) => Instr::Unary {
                dst,
                src: args[0],
                f: unary_op(*f),
            },
            Op::Clip { min, max } => Instr::Clip {
                dst,
                src: args[0],
                lo: min.unwrap_or(f32::NEG_INFINITY),
                hi: max.unwrap_or(f32::INFINITY),
            },
            Op::Binary(f) => Instr::Binary {
                dst,
                a: args[0],
                b: args[1],
                f: binary_op(*f),
            },
            Op::Compare(f) => Instr::Compare {
                dst,
                a: args[0],
                b: args[1],
                f: compare_op(*f),
            },
            Op::Where => Instr::Where {
                dst,
                cond: args[0],
                a: args[1],
                b: args[2],
            },
            Op::Cast { to } if *to == DType::Bool => Instr::ToBool { dst, src: args[0] },
            _ => Instr::Copy { dst, src: args[0] },
        };
        self.program.code.push(instr);
        self.program.members.push(node);
        self.reg_of.push((out, dst));
    }

    /// Finishes the program: stores every member output read outside it.
    fn finish(mut self, needed_outside: &dyn Fn(ValueId, &[usize]) -> bool) -> Program {
        let mut loads: Vec<Instr> = Vec::new();
        let mut rest: Vec<Instr> = Vec::new();
        for instr in self.program.code.drain(..) {
            match instr {
                Instr::Load { .. } => loads.push(instr),
                _ => rest.push(instr),
            }
        }
        loads.extend(rest);
        self.program.code = loads;
        for &m in &self.program.members {
            let out = self.graph.nodes[m].outputs[0];
            if needed_outside(out, &self.program.members) {
                let src = self.reg_of.iter().find(|(v, _)| *v == out).map(|p| p.1);
                let output = self.program.outputs.len() as u8;
                self.program.outputs.push(out);
                self.program.code.push(Instr::Store {
                    src: src.expect("member outputs have registers"),
                    output,
                });
            }
        }
        self.program
    }
}

/// Groups the fusible nodes among `nodes` (in order) into programs. With `fuse`
/// off, every fusible node is a program of its own. Returns, for each entry of
/// `nodes`, either the program it starts (`Some`) or nothing (a later member of
/// a program, or a node that is not fusible: see [`fusible`]).
pub fn group(
    graph: &Graph,
    nodes: &[usize],
    fuse: bool,
    needed_outside: &dyn Fn(ValueId, &[usize]) -> bool,
) -> Vec<Option<Program>> {
    let mut result: Vec<Option<Program>> = vec![None; nodes.len()];
    let mut current: Option<(usize, Builder<'_>)> = None;
    for (slot, &node) in nodes.iter().enumerate() {
        let join = fusible(graph, node);
        if let Some((start, builder)) = current.take() {
            if join && fuse && builder.fits(node) {
                let mut builder = builder;
                builder.push(node);
                current = Some((start, builder));
                continue;
            }
            result[start] = Some(builder.finish(needed_outside));
        }
        if join {
            let mut builder = Builder::new(graph);
            builder.push(node);
            current = Some((slot, builder));
        }
    }
    if let Some((start, builder)) = current {
        result[start] = Some(builder.finish(needed_outside));
    }
    result
}

/// How an operand's elements map onto the output's flat index.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Broadcast {
    /// Same shape: element `e` is element `e`.
    Full,
    /// One element for all.
    Scalar,
    /// The operand is the output's trailing axes: element `e % len`.
    Suffix(usize),
    /// Anything else: per-axis strides (0 on broadcast axes) over the output dims.
    General {
        /// The output dims, padded on the left to 8.
        dims: [usize; 8],
        /// The operand's stride for each output axis.
        strides: [usize; 8],
    },
}

impl Broadcast {
    /// The mapping for an operand of `shape` read at output shape `out`.
    pub fn new(shape: &[usize], out: &[usize]) -> Broadcast {
        let numel: usize = shape.iter().product();
        if shape == out {
            return Broadcast::Full;
        }
        if numel == 1 {
            return Broadcast::Scalar;
        }
        let trimmed: &[usize] = {
            let lead = shape.iter().take_while(|&&d| d == 1).count();
            &shape[lead..]
        };
        if out.ends_with(trimmed) {
            return Broadcast::Suffix(numel);
        }
        let mut dims = [1usize; 8];
        let mut strides = [0usize; 8];
        let off = 8 - out.len();
        dims[off..].copy_from_slice(out);
        let mut stride = 1;
        for i in (0..shape.len()).rev() {
            let axis = 8 - shape.len() + i;
            strides[axis] = if shape[i] == 1 { 0 } else { stride };
            stride *= shape[i];
        }
        Broadcast::General { dims, strides }
    }

    /// `out[i] = data[index(first + i)]`. A `General` operand walks the output's
    /// multi-index from `first` (divisions once per call, not per element) and copies
    /// or fills whole runs of the last axis.
    fn load(&self, data: Data<'_>, first: usize, out: &mut [f32]) {
        let Broadcast::General { dims, strides } = *self else {
            for (i, x) in out.iter_mut().enumerate() {
                *x = data.get(self.index(first + i));
            }
            return;
        };
        let mut index = [0usize; 8];
        let (mut e, mut at) = (first, 0);
        for axis in (0..8).rev() {
            index[axis] = e % dims[axis];
            e /= dims[axis];
            at += index[axis] * strides[axis];
        }
        let (len, step) = (dims[7], strides[7]);
        let mut done = 0;
        while done < out.len() {
            let run = (len - index[7]).min(out.len() - done);
            let dst = &mut out[done..done + run];
            match data {
                Data::F32(v) if step == 1 => dst.copy_from_slice(&v[at..at + run]),
                Data::F32(v) if step == 0 => dst.fill(v[at]),
                _ => {
                    for (i, x) in dst.iter_mut().enumerate() {
                        *x = data.get(at + i * step);
                    }
                }
            }
            done += run;
            at += run * step;
            index[7] += run;
            // Carry into the outer axes.
            let mut axis = 7;
            while index[axis] == dims[axis] && axis > 0 {
                at -= dims[axis] * strides[axis];
                index[axis] = 0;
                axis -= 1;
                index[axis] += 1;
                at += strides[axis];
            }
        }
    }

    /// The operand index of output element `e`.
    fn index(&self, mut e: usize) -> usize {
        match *self {
            Broadcast::Full => e,
            Broadcast::Scalar => 0,
            Broadcast::Suffix(len) => e % len,
            Broadcast::General { dims, strides } => {
                let mut at = 0;
                for axis in (0..8).rev() {
                    at += (e % dims[axis]) * strides[axis];
                    e /= dims[axis];
                }
                at
            }
        }
    }
}

/// An operand's elements while a program runs.
#[derive(Clone, Copy, Debug)]
pub enum Data<'a> {
    /// f32 elements.
    F32(&'a [f32]),
    /// `BOOL` elements (0 or 1).
    Bool(&'a [u8]),
}

impl Data<'_> {
    fn get(&self, i: usize) -> f32 {
        match self {
            Data::F32(v) => v[i],
            Data::Bool(v) => f32::from(v[i]),
        }
    }
}

/// An output's elements while a program runs (one chunk of them).
#[derive(Debug)]
pub enum DataMut<'a> {
    /// f32 elements.
    F32(&'a mut [f32]),
    /// `BOOL` elements.
    Bool(&'a mut [u8]),
}

impl DataMut<'_> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            DataMut::F32(v) => v.len(),
            DataMut::Bool(v) => v.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Elements `range` of these.
    pub fn window(&mut self, range: std::ops::Range<usize>) -> DataMut<'_> {
        match self {
            DataMut::F32(v) => DataMut::F32(&mut v[range]),
            DataMut::Bool(v) => DataMut::Bool(&mut v[range]),
        }
    }
}

/// Where a program operand is read from while it runs.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// Its own buffer, indexed by the output's flat index.
    Data(Data<'a>, Broadcast),
    /// The buffer of output `j` (in place): same shape, read before written.
    Output(usize),
}

impl Program {
    /// Estimated single-thread picoseconds per output element (for the thread
    /// policy, `graph::par`): about 2 ns per transcendental over a tile (the
    /// vector `erf`-form GELU is the slowest), 0.1 ns per other instruction.
    pub fn cost_ps(&self) -> usize {
        self.code
            .iter()
            .map(|i| match i {
                Instr::Unary { f, .. } if vector_kernel(*f).is_some() => 2000,
                _ => 100,
            })
            .sum()
    }

    /// Runs the program over output elements `base..base + outs[0].len()`, every
    /// output slice covering exactly that range.
    pub fn run(&self, sources: &[Source<'_>], outs: &mut [DataMut<'_>], base: usize) {
        self.run_in(&mut new_registers(), sources, outs, base);
    }

    /// [`Program::run`] on caller-held registers (a caller that runs the program on
    /// many small blocks zeroes its 24 KiB of registers once, not per block).
    pub fn run_in(
        &self,
        regs: &mut Registers,
        sources: &[Source<'_>],
        outs: &mut [DataMut<'_>],
        base: usize,
    ) {
        let len = outs.first().map_or(0, DataMut::len);
        let mut start = 0;
        while start < len {
            let n = TILE.min(len - start);
            for instr in &self.code {
                self.step(instr, regs, sources, outs, base, start, n);
            }
            start += n;
        }
    }

    /// Executes one instruction on a tile of `n` elements at `start` (chunk-relative).
    #[allow(clippy::too_many_arguments)]
    fn step(
        &self,
        instr: &Instr,
        regs: &mut Registers,
        sources: &[Source<'_>],
        outs: &mut [DataMut<'_>],
        base: usize,
        start: usize,
        n: usize,
    ) {
        let at = |r: Reg| usize::from(r) * TILE;
        match *instr {
            Instr::Load { dst, operand } => {
                let d = &mut regs[at(dst)..at(dst) + n];
                match sources[usize::from(operand)] {
                    Source::Data(Data::F32(v), Broadcast::Full) => {
                        d.copy_from_slice(&v[base + start..base + start + n]);
                    }
                    Source::Data(Data::F32(v), Broadcast::Suffix(len)) => {
                        // Copy whole runs of the repeated suffix.
                        let mut at = (base + start) % len;
                        let mut done = 0;
                        while done < n {
                            let run = (len - at).min(n - done);
                            d[done..done + run].copy_from_slice(&v[at..at + run]);
                            done += run;
                            at = 0;
                        }
                    }
                    Source::Data(Data::F32(v), Broadcast::Scalar) => d.fill(v[0]),
                    Source::Data(data, bc) => bc.load(data, base + start, d),
                    Source::Output(j) => match &outs[j] {
                        DataMut::F32(v) => d.copy_from_slice(&v[start..start + n]),
                        DataMut::Bool(v) => {
                            for (x, &b) in d.iter_mut().zip(&v[start..start + n]) {
                                *x = f32::from(b);
                            }
                        }
                    },
                }
            }
            Instr::Unary { dst, src, f } => {
                // Transcendentals run rml-kernels' vector functions over the tile
                // (within their documented ULP bounds of rml-core's definitions);
                // the rest keep rml-core's scalar function, with a constant op per
                // arm so the compiler specializes the loop.
                let (d, s) = (at(dst), at(src));
                if let Some(kernel) = vector_kernel(f) {
                    regs.copy_within(s..s + n, d);
                    kernel(&mut regs[d..d + n]);
                    return;
                }
                match f {
                    UnaryOp::Relu => map1(regs, d, s, n, |x| unary::apply(UnaryOp::Relu, x)),
                    UnaryOp::Neg => map1(regs, d, s, n, |x| unary::apply(UnaryOp::Neg, x)),
                    UnaryOp::Abs => map1(regs, d, s, n, |x| unary::apply(UnaryOp::Abs, x)),
                    _ => map1(regs, d, s, n, |x| unary::apply(f, x)),
                }
            }
            Instr::Clip { dst, src, lo, hi } => map1(regs, at(dst), at(src), n, |v| {
                if v < lo {
                    lo
                } else if v > hi {
                    hi
                } else {
                    v
                }
            }),
            Instr::ToBool { dst, src } => {
                map1(regs, at(dst), at(src), n, |x| f32::from(u8::from(x != 0.0)));
            }
            Instr::Copy { dst, src } => map1(regs, at(dst), at(src), n, |x| x),
            Instr::Binary { dst, a, b, f } => {
                let (d, a, b) = (at(dst), at(a), at(b));
                match f {
                    BinaryOp::Add => {
                        map2(regs, d, a, b, n, |x, y| binary::apply(BinaryOp::Add, x, y))
                    }
                    BinaryOp::Sub => {
                        map2(regs, d, a, b, n, |x, y| binary::apply(BinaryOp::Sub, x, y))
                    }
                    BinaryOp::Mul => {
                        map2(regs, d, a, b, n, |x, y| binary::apply(BinaryOp::Mul, x, y))
                    }
                    BinaryOp::Div => {
                        map2(regs, d, a, b, n, |x, y| binary::apply(BinaryOp::Div, x, y))
                    }
                    _ => map2(regs, d, a, b, n, |x, y| binary::apply(f, x, y)),
                }
            }
            Instr::Compare { dst, a, b, f } => {
                for i in 0..n {
                    let hit = compare::apply(f, regs[at(a) + i], regs[at(b) + i]);
                    regs[at(dst) + i] = f32::from(u8::from(hit));
                }
            }
            Instr::Where { dst, cond, a, b } => {
                for i in 0..n {
                    let pick = if regs[at(cond) + i] != 0.0 { a } else { b };
                    regs[at(dst) + i] = regs[at(pick) + i];
                }
            }
            Instr::Store { src, output } => {
                let s = &regs[at(src)..at(src) + n];
                match &mut outs[usize::from(output)] {
                    DataMut::F32(v) => v[start..start + n].copy_from_slice(s),
                    DataMut::Bool(v) => {
                        for (o, &x) in v[start..start + n].iter_mut().zip(s) {
                            *o = u8::from(x != 0.0);
                        }
                    }
                }
            }
        }
    }
}

/// The rml-kernels in-place vector function for a transcendental `f`, if any. Each
/// lane is computed independently (a tail is padded, not run scalar), so an element
/// gets the same bits wherever a tile or thread chunk boundary falls.
fn vector_kernel(f: UnaryOp) -> Option<fn(&mut [f32])> {
    use rml_kernels::math;
    Some(match f {
        UnaryOp::Exp => math::exp_inplace,
        UnaryOp::Tanh => math::tanh_inplace,
        UnaryOp::Sigmoid => math::sigmoid_inplace,
        UnaryOp::Erf => math::erf_inplace,
        UnaryOp::Gelu => math::gelu_inplace,
        UnaryOp::GeluTanh => math::gelu_tanh_inplace,
        UnaryOp::Silu => math::silu_inplace,
        UnaryOp::Softplus => math::softplus_inplace,
        _ => return None,
    })
}

/// `regs[dst..dst+n] = f(regs[a..a+n], regs[b..b+n])`.
fn map2(regs: &mut [f32], dst: usize, a: usize, b: usize, n: usize, f: impl Fn(f32, f32) -> f32) {
    for i in 0..n {
        regs[dst + i] = f(regs[a + i], regs[b + i]);
    }
}

/// `regs[dst..dst+n] = f(regs[src..src+n])`.
fn map1(regs: &mut [f32], dst: usize, src: usize, n: usize, f: impl Fn(f32) -> f32) {
    for i in 0..n {
        regs[dst + i] = f(regs[src + i]);
    }
}
