//! Elementwise fusion: a run of consecutive elementwise nodes (unary, clip, binary,
//! compare, `where`, `cast`) with one output shape becomes one [`Program`], a small
//! register machine over f32 tiles. Members need not feed each other; every member
//! output that something outside the run reads is stored, the rest live only in
//! registers. `BOOL` values are held as 0.0/1.0 in registers.

use rml_core::DType;
use rml_core::ops::binary::BinaryOp;
use rml_core::ops::compare::CompareOp;
use rml_core::ops::unary::UnaryOp;

use super::interp::float::{binary_op, unary_op};
use super::interp::layout::compare_op;
use super::ir::{Graph, ValueId};
use super::op::Op;
use super::program::{vector_binary, vector_kernel};

/// Least elements per register tile (1 KiB of f32: a program with [`MAX_REGS`]
/// registers stays inside a 32 KiB L1 cache); a program with fewer registers
/// takes longer tiles from the same register file (`Program::tile`).
pub const TILE: usize = 256;

/// Most registers one program uses; a run that needs more is split.
pub const MAX_REGS: usize = 24;

/// Most operands, and most stored outputs, of one program.
pub const MAX_OPERANDS: usize = 8;

/// Register index.
pub type Reg = u8;

/// A program's register file: [`MAX_REGS`] tiles of [`TILE`] f32 (24 KiB), cut
/// into as many registers as the program uses.
pub type Registers = [f32; MAX_REGS * TILE];

/// `T` on a 64-byte boundary: a thread-local array of f32 is otherwise aligned to
/// 4 bytes only, and where the loader puts it decides how many vector loads
/// straddle cache lines (seen as fused steps 25 % slower in some processes).
#[repr(align(64))]
pub struct CacheAligned<T>(pub T);

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
    /// `dst = second(first(a, b), c)` for two of `add`, `sub`, `mul`, `div`, each
    /// rounded on its own: a [`Instr::Binary`] whose result only the next one
    /// reads, merged with it so the intermediate never goes through memory.
    Chain {
        /// Destination register.
        dst: Reg,
        /// The first op's left register.
        a: Reg,
        /// The first op's right register.
        b: Reg,
        /// The second op's right register.
        c: Reg,
        /// The first and second op.
        ops: [BinaryOp; 2],
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

impl Instr {
    /// The register written (none for a store).
    pub fn dst(&self) -> Option<Reg> {
        match *self {
            Instr::Load { dst, .. }
            | Instr::Unary { dst, .. }
            | Instr::Clip { dst, .. }
            | Instr::Binary { dst, .. }
            | Instr::Chain { dst, .. }
            | Instr::Compare { dst, .. }
            | Instr::Where { dst, .. }
            | Instr::ToBool { dst, .. }
            | Instr::Copy { dst, .. } => Some(dst),
            Instr::Store { .. } => None,
        }
    }

    /// The registers read.
    pub fn sources(&self) -> [Option<Reg>; 3] {
        match *self {
            Instr::Load { .. } => [None; 3],
            Instr::Unary { src, .. }
            | Instr::Clip { src, .. }
            | Instr::ToBool { src, .. }
            | Instr::Copy { src, .. }
            | Instr::Store { src, .. } => [Some(src), None, None],
            Instr::Binary { a, b, .. } | Instr::Compare { a, b, .. } => [Some(a), Some(b), None],
            Instr::Where { cond, a, b, .. } => [Some(cond), Some(a), Some(b)],
            Instr::Chain { a, b, c, .. } => [Some(a), Some(b), Some(c)],
        }
    }

    /// Reads register `to` wherever this reads `from`.
    fn rename(&mut self, from: Reg, to: Reg) {
        let swap = |r: &mut Reg| {
            if *r == from {
                *r = to;
            }
        };
        match self {
            Instr::Load { .. } => {}
            Instr::Unary { src, .. }
            | Instr::Clip { src, .. }
            | Instr::ToBool { src, .. }
            | Instr::Copy { src, .. }
            | Instr::Store { src, .. } => swap(src),
            Instr::Binary { a, b, .. } | Instr::Compare { a, b, .. } => {
                swap(a);
                swap(b);
            }
            Instr::Where { cond, a, b, .. } => {
                swap(cond);
                swap(a);
                swap(b);
            }
            Instr::Chain { a, b, c, .. } => {
                swap(a);
                swap(b);
                swap(c);
            }
        }
    }
}

/// A fused elementwise group: loads come first, stores last, so an output may
/// share its buffer with a same-shaped operand (in place). Every instruction reads
/// only registers below the one it writes, except a transcendental [`Instr::Unary`]
/// that overwrites its own source (its source is computed, not loaded, and read by
/// nothing after it): the tile evaluator relies on this.
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
        in_place_transcendentals(&mut self.program.code);
        chain_binaries(&mut self.program.code);
        self.program
    }
}

/// Merges each arithmetic [`Instr::Binary`] whose result is read by the next
/// instruction alone, itself an arithmetic binary reading it once, into one
/// [`Instr::Chain`] (the result as the second op's left operand: an `add` or
/// `mul` that takes it on the right has its operands swapped, which changes no
/// bits).
fn chain_binaries(code: &mut Vec<Instr>) {
    let mut k = 0;
    while k + 1 < code.len() {
        if let (
            Instr::Binary { dst: t, a, b, f },
            Instr::Binary {
                dst,
                a: l,
                b: r,
                f: g,
            },
        ) = (code[k], code[k + 1])
        {
            let commutes = matches!(g, BinaryOp::Add | BinaryOp::Mul);
            let c = match (l == t, r == t) {
                (true, false) => Some(r),
                (false, true) if commutes => Some(l),
                _ => None,
            };
            let arithmetic = vector_binary(f).is_some() && vector_binary(g).is_some();
            let read_later = code[k + 2..].iter().any(|i| i.sources().contains(&Some(t)));
            if let Some(c) = c.filter(|_| arithmetic && !read_later) {
                code[k] = Instr::Chain {
                    dst,
                    a,
                    b,
                    c,
                    ops: [f, g],
                };
                code.remove(k + 1);
            }
        }
        k += 1;
    }
}

/// Rewrites each transcendental whose source is a computed register read by
/// nothing after it to overwrite that register, so the tile is not copied first.
fn in_place_transcendentals(code: &mut [Instr]) {
    for k in 0..code.len() {
        let Instr::Unary { dst, src, f } = code[k] else {
            continue;
        };
        let loaded = code
            .iter()
            .any(|i| matches!(*i, Instr::Load { dst, .. } if dst == src));
        let read_later = code[k + 1..]
            .iter()
            .any(|i| i.sources().contains(&Some(src)));
        if vector_kernel(f).is_some() && !loaded && !read_later {
            code[k] = Instr::Unary { dst: src, src, f };
            for i in &mut code[k + 1..] {
                i.rename(dst, src);
            }
        }
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

/// How many output elements share each operand element when `shape` has the
/// output's rank, equals `out` on its leading axes and is 1 on the rest (`[b, d, 1]`
/// at `[b, d, n]`: `n`); `None` for any other broadcast.
fn repeat_of(shape: &[usize], out: &[usize]) -> Option<usize> {
    let kept = shape.iter().rposition(|&d| d != 1)? + 1;
    let same_rank_and_lead = shape.len() == out.len() && out[..kept] == shape[..kept];
    let repeat: usize = out[kept..].iter().product();
    (same_rank_and_lead && repeat > 1).then_some(repeat)
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
    /// The operand is the output's leading axes, the trailing ones broadcast
    /// (`[b, d, 1]` read at `[b, d, n]`): element `e / repeat`.
    Repeat(usize),
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
        if let Some(repeat) = repeat_of(shape, out) {
            return Broadcast::Repeat(repeat);
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
    pub(super) fn load(&self, data: Data<'_>, first: usize, out: &mut [f32]) {
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
            Broadcast::Repeat(repeat) => e / repeat,
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
    /// Element `i` as f32.
    pub(super) fn get(&self, i: usize) -> f32 {
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
