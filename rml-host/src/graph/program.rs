//! Running a fused elementwise [`Program`] tile by tile: per tile of [`TILE`]
//! elements, its loads resolve each operand to a slice (the operand's own elements
//! where they are contiguous f32, else a register filled with them), every other
//! instruction is one vectorizable loop over the tile, and the stores copy the
//! results out last, so an output may share its buffer with an operand. An
//! instruction whose result is stored once, to an f32 output no operand is read
//! from in place, writes the output's tile itself instead (later instructions read
//! it there), so its store's copy is saved.

use std::cell::RefCell;

use rml_core::ops::binary::{self, BinaryOp};
use rml_core::ops::compare;
use rml_core::ops::unary::{self, UnaryOp};

use rml_kernels::chain::binary_chain;
use rml_kernels::copy::copy;
use rml_kernels::elementwise::{self, Operand};

use super::fuse::{
    Broadcast, CacheAligned, Data, DataMut, Instr, MAX_OPERANDS, MAX_REGS, Program, Reg, Registers,
    Source, TILE,
};

impl Program {
    /// Estimated single-thread picoseconds per output element (for the thread
    /// policy, `graph::par`): about 2 ns per transcendental over a tile (the
    /// vector `erf`-form GELU is the slowest), 0.1 ns per other instruction.
    pub fn cost_ps(&self) -> usize {
        self.code
            .iter()
            .map(|i| match i {
                Instr::Unary { f, .. } if vector_kernel(*f).is_some() => 2000,
                Instr::Chain { .. } => 200,
                _ => 100,
            })
            .sum()
    }

    /// Runs the program over output elements `base..base + outs[0].len()`, every
    /// output slice covering exactly that range, on the calling thread's register
    /// file (held for the thread's life, so a run neither allocates nor zeroes it).
    pub fn run(&self, sources: &[Source<'_>], outs: &mut [DataMut<'_>], base: usize) {
        REGISTERS.with_borrow_mut(|regs| self.run_in(&mut regs.0, sources, outs, base));
    }

    /// Elements per tile for a run on `sources`: the register file cut into
    /// [`Program::regs`] registers (at most [`MAX_TILE`] elements, a multiple of
    /// 64), or one period of the longest row-broadcast operand when that is
    /// between [`TILE`] and this (so a tile starting on a row reads that operand
    /// in place, not by copying). The vector functions pad a tail rather than run
    /// it scalar, so the length changes no result.
    fn tile(&self, sources: &[Source<'_>]) -> usize {
        let whole = (MAX_REGS * TILE / self.regs.max(1)).min(MAX_TILE) / 64 * 64;
        let period = sources
            .iter()
            .filter_map(|s| match *s {
                Source::Data(Data::F32(_), Broadcast::Suffix(len)) => Some(len),
                _ => None,
            })
            .filter(|len| (TILE..=whole).contains(len))
            .max();
        period.unwrap_or(whole)
    }

    /// [`Program::run`] on registers `regs`.
    fn run_in(
        &self,
        regs: &mut Registers,
        sources: &[Source<'_>],
        outs: &mut [DataMut<'_>],
        base: usize,
    ) {
        let tile = self.tile(sources);
        let len = outs.first().map_or(0, DataMut::len);
        let stores = self
            .code
            .iter()
            .position(|i| matches!(i, Instr::Store { .. }))
            .unwrap_or(self.code.len());
        let (body, stores) = self.code.split_at(stores);
        // Instructions that write their output's tiles themselves (see `direct`).
        let direct = self.direct(body, sources, outs);
        let mut targets: [&mut [f32]; MAX_OUTS] = std::array::from_fn(|_| &mut [][..]);
        for (o, t) in targets.iter_mut().enumerate() {
            if direct[o].is_some()
                && let DataMut::F32(v) = std::mem::replace(&mut outs[o], DataMut::F32(&mut []))
            {
                *t = v;
            }
        }
        let mut start = 0;
        while start < len {
            let n = tile.min(len - start);
            // The outputs' elements of the tile, for operands read in place.
            let mut reads: [Option<Data<'_>>; MAX_OUTS] = [None; MAX_OUTS];
            for (o, r) in outs.iter().zip(&mut reads) {
                *r = match o {
                    DataMut::F32(v) => v.get(start..start + n).map(Data::F32),
                    DataMut::Bool(v) => v.get(start..start + n).map(Data::Bool),
                };
            }
            let mut pieces: [&mut [f32]; MAX_OUTS] = std::array::from_fn(|_| &mut [][..]);
            for ((piece, t), d) in pieces.iter_mut().zip(&mut targets).zip(&direct) {
                if d.is_some() {
                    *piece = &mut t[start..start + n];
                }
            }
            // A register's elements where they are read in place: a loaded
            // operand's, or an output tile written directly.
            let mut views: [Option<&[f32]>; MAX_REGS] = [None; MAX_REGS];
            for (i, instr) in body.iter().enumerate() {
                if let Instr::Load { dst, operand } = *instr {
                    let d = &mut regs[usize::from(dst) * tile..][..n];
                    let source = sources[usize::from(operand)];
                    views[usize::from(dst)] = load(d, source, &reads, base + start);
                } else if let Some(o) = direct.iter().position(|&d| d == Some(i)) {
                    let piece = std::mem::take(&mut pieces[o]);
                    let done = &*regs;
                    let arg = |r: Reg| {
                        views[usize::from(r)].unwrap_or(&done[usize::from(r) * tile..][..n])
                    };
                    // No register is the destination: a transcendental in place
                    // copies its source into the output first.
                    evaluate(instr, Reg::MAX, piece, arg);
                    if let Some(dst) = instr.dst() {
                        views[usize::from(dst)] = Some(piece);
                    }
                } else {
                    compute(instr, (regs, tile), &views, n);
                }
            }
            for instr in stores {
                if let Instr::Store { src, output } = *instr
                    && direct[usize::from(output)].is_none()
                {
                    let s = &regs[usize::from(src) * tile..][..n];
                    store(s, &mut outs[usize::from(output)], start);
                }
            }
            start += n;
        }
        for (o, t) in targets.into_iter().enumerate() {
            if direct[o].is_some() {
                outs[o] = DataMut::F32(t);
            }
        }
    }

    /// For each output, the body instruction that writes its tiles itself, if
    /// any: the last writer of the register stored to it, when that is computed
    /// (not a load), the register is stored nowhere else, and the output is f32
    /// and not read in place by an operand. Later instructions read the register
    /// from the output tile, so the store's copy is saved.
    fn direct(
        &self,
        body: &[Instr],
        sources: &[Source<'_>],
        outs: &[DataMut<'_>],
    ) -> [Option<usize>; MAX_OUTS] {
        let mut direct = [None; MAX_OUTS];
        for instr in &self.code[body.len()..] {
            let Instr::Store { src, output } = *instr else {
                continue;
            };
            let o = usize::from(output);
            let stored_once = self
                .code
                .iter()
                .filter(|i| matches!(i, Instr::Store { src: s, .. } if *s == src))
                .count()
                == 1;
            let read_in_place = sources
                .iter()
                .any(|s| matches!(*s, Source::Output(j) if j == o));
            let writer = body.iter().rposition(|i| i.dst() == Some(src));
            let computed = writer.is_some_and(|w| !matches!(body[w], Instr::Load { .. }));
            if stored_once
                && computed
                && !read_in_place
                && matches!(outs.get(o), Some(DataMut::F32(_)))
                && o < MAX_OUTS
            {
                direct[o] = writer;
            }
        }
        direct
    }
}

/// Most outputs a program run is given: its own and a producer's (the layer norm
/// or GEMM before an epilogue program).
const MAX_OUTS: usize = MAX_OPERANDS + 1;

/// Most elements per tile (8 KiB of f32), for programs of few registers.
const MAX_TILE: usize = 2048;

thread_local! {
    /// Each thread's program registers (24 KiB, in thread-local storage, not on
    /// the heap).
    static REGISTERS: RefCell<CacheAligned<Registers>> =
        const { RefCell::new(CacheAligned([0.0; MAX_REGS * TILE])) };
}

/// Executes computing instruction `instr` on a tile of `n` elements, register `r`
/// being `regs[r * tile..][..n]`; `views` are the loaded registers read in place.
fn compute(
    instr: &Instr,
    (regs, tile): (&mut Registers, usize),
    views: &[Option<&[f32]>; MAX_REGS],
    n: usize,
) {
    let Some(dst) = instr.dst() else {
        return;
    };
    // Sources are below the destination (see `Program`), or are it.
    let (done, rest) = regs.split_at_mut(usize::from(dst) * tile);
    let arg = |r: Reg| views[usize::from(r)].unwrap_or_else(|| &done[usize::from(r) * tile..][..n]);
    evaluate(instr, dst, &mut rest[..n], arg);
}

/// Computes instruction `instr` (writing register `dst`) into `d`, its sources
/// given by `arg`.
fn evaluate<'a>(instr: &Instr, dst: Reg, d: &mut [f32], arg: impl Fn(Reg) -> &'a [f32]) {
    match *instr {
        Instr::Unary { src, f, .. } => {
            // Transcendentals run rml-kernels' vector functions over the tile
            // (within their documented ULP bounds of rml-core's definitions);
            // the rest keep rml-core's scalar function, with a constant op per
            // arm so the compiler specializes the loop.
            if let Some(kernel) = vector_kernel(f) {
                if src != dst {
                    copy(arg(src), d).expect("a tile's operands have its length");
                }
                kernel(d);
                return;
            }
            let a = arg(src);
            match f {
                UnaryOp::Relu => map1(d, a, |x| unary::apply(UnaryOp::Relu, x)),
                UnaryOp::Neg => map1(d, a, |x| unary::apply(UnaryOp::Neg, x)),
                UnaryOp::Abs => map1(d, a, |x| unary::apply(UnaryOp::Abs, x)),
                _ => map1(d, a, |x| unary::apply(f, x)),
            }
        }
        Instr::Clip { src, lo, hi, .. } => map1(d, arg(src), |v| {
            if v < lo {
                lo
            } else if v > hi {
                hi
            } else {
                v
            }
        }),
        Instr::ToBool { src, .. } => map1(d, arg(src), |x| f32::from(u8::from(x != 0.0))),
        Instr::Copy { src, .. } => copy(arg(src), d).expect("a tile's operands have its length"),
        Instr::Chain { a, b, c, ops, .. } => {
            // Built from arithmetic ops alone (`fuse::chain_binaries`).
            let ops = ops.map(|f| vector_binary(f).expect("chains are arithmetic"));
            binary_chain(ops, [arg(a), arg(b), arg(c)], d)
                .expect("a tile's operands have its length");
        }
        Instr::Binary { a, b, f, .. } => {
            let (a, b) = (arg(a), arg(b));
            // The four arithmetic ops are IEEE-exact, so rml-kernels' vector loop
            // gives rml-core's bits; the rest keep rml-core's scalar function.
            match vector_binary(f) {
                Some(op) => {
                    let (a, b) = (Operand::Matrix(a), Operand::Matrix(b));
                    elementwise::binary(op, a, b, d.len(), 0..1, d)
                        .expect("a tile's operands have its length");
                }
                None => map2(d, a, b, |x, y| binary::apply(f, x, y)),
            }
        }
        Instr::Compare { a, b, f, .. } => map2(d, arg(a), arg(b), |x, y| {
            f32::from(u8::from(compare::apply(f, x, y)))
        }),
        Instr::Where { cond, a, b, .. } => {
            let (c, a, b) = (arg(cond), arg(a), arg(b));
            for (((d, &c), &x), &y) in d.iter_mut().zip(c).zip(a).zip(b) {
                *d = if c != 0.0 { x } else { y };
            }
        }
        Instr::Load { .. } | Instr::Store { .. } => {}
    }
}

/// Operand `source`'s elements of the tile: a slice of its buffer where they are
/// contiguous f32, else `None` after filling `d` with them.
fn load<'a>(
    d: &mut [f32],
    source: Source<'a>,
    outs: &[Option<Data<'a>>; MAX_OUTS],
    element: usize,
) -> Option<&'a [f32]> {
    let n = d.len();
    match source {
        Source::Data(Data::F32(v), Broadcast::Full) => return Some(&v[element..element + n]),
        Source::Data(Data::F32(v), Broadcast::Suffix(len)) => {
            let at = element % len;
            if at + n <= len {
                return Some(&v[at..at + n]);
            }
            // Copy whole runs of the repeated suffix.
            let (mut at, mut done) = (at, 0);
            while done < n {
                let run = (len - at).min(n - done);
                d[done..done + run].copy_from_slice(&v[at..at + run]);
                done += run;
                at = 0;
            }
        }
        Source::Data(Data::F32(v), Broadcast::Scalar) => d.fill(v[0]),
        Source::Data(Data::F32(v), Broadcast::Repeat(repeat)) => {
            fill_repeated(d, v, element, repeat);
        }
        Source::Data(data, bc) => bc.load(data, element, d),
        Source::Output(j) => match outs[j].expect("outputs read in place are not written") {
            Data::F32(v) => return Some(v),
            Data::Bool(v) => {
                for (x, &b) in d.iter_mut().zip(v) {
                    *x = f32::from(b);
                }
            }
        },
    }
    None
}

/// `d[i] = v[(first + i) / repeat]`: each element of `v` filled `repeat` times
/// (a value broadcast along the output's trailing axes), whole runs of 8 or 16 as
/// fixed-size stores.
fn fill_repeated(d: &mut [f32], v: &[f32], first: usize, repeat: usize) {
    let (mut q, skip) = (first / repeat, first % repeat);
    let mut rest = d;
    if skip > 0 {
        let (head, tail) = rest.split_at_mut((repeat - skip).min(rest.len()));
        head.fill(v[q]);
        (rest, q) = (tail, q + 1);
    }
    match repeat {
        8 => fill_runs::<8>(rest, &v[q..]),
        16 => fill_runs::<16>(rest, &v[q..]),
        _ => {
            for (run, &x) in rest.chunks_mut(repeat).zip(&v[q..]) {
                run.fill(x);
            }
        }
    }
}

/// [`fill_repeated`] from a run boundary for a run length `R` known at compile time.
fn fill_runs<const R: usize>(d: &mut [f32], v: &[f32]) {
    let whole = d.len() / R;
    let mut runs = d.chunks_exact_mut(R);
    for (run, &x) in (&mut runs).zip(v) {
        run.copy_from_slice(&[x; R]);
    }
    let tail = runs.into_remainder();
    if let (false, Some(&x)) = (tail.is_empty(), v.get(whole)) {
        tail.fill(x);
    }
}

/// Copies a tile's results `s` into `out` at chunk-relative index `start`.
fn store(s: &[f32], out: &mut DataMut<'_>, start: usize) {
    let n = s.len();
    match out {
        DataMut::F32(v) => copy(s, &mut v[start..start + n]).expect("a tile fits its output"),
        DataMut::Bool(v) => {
            for (o, &x) in v[start..start + n].iter_mut().zip(s) {
                *o = u8::from(x != 0.0);
            }
        }
    }
}

/// The rml-kernels in-place vector function for a transcendental `f`, if any. Each
/// lane is computed independently (a tail is padded, not run scalar), so an element
/// gets the same bits wherever a tile or thread chunk boundary falls.
pub(super) fn vector_kernel(f: UnaryOp) -> Option<fn(&mut [f32])> {
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

/// The rml-kernels vector op for an IEEE-exact arithmetic `f` (`add`, `sub`,
/// `mul`, `div`), whose bits are rml-core's; `None` for the rest.
pub(super) fn vector_binary(f: BinaryOp) -> Option<elementwise::BinaryOp> {
    Some(match f {
        BinaryOp::Add => elementwise::BinaryOp::Add,
        BinaryOp::Sub => elementwise::BinaryOp::Sub,
        BinaryOp::Mul => elementwise::BinaryOp::Mul,
        BinaryOp::Div => elementwise::BinaryOp::Div,
        _ => return None,
    })
}

/// `d = f(a, b)` elementwise.
fn map2(d: &mut [f32], a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32) {
    for ((d, &x), &y) in d.iter_mut().zip(a).zip(b) {
        *d = f(x, y);
    }
}

/// `d = f(a)` elementwise.
fn map1(d: &mut [f32], a: &[f32], f: impl Fn(f32) -> f32) {
    for (d, &x) in d.iter_mut().zip(a) {
        *d = f(x);
    }
}
