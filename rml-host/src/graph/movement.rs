//! Data-movement nodes on the arena without the interpreter's copies: `slice`,
//! `concat`, `split`, `gather`, `transpose` and `expand` on any held dtype, as
//! strided copies of raw elements (1, 4 or 8 bytes, so the result is bit-identical to
//! the interpreter's, NaN payloads included). Nothing allocates. A node whose
//! attributes or shapes do not fit (a bad axis, an index out of range, too many
//! outputs) is left to the interpreter, which reports what is wrong.

use rml_core::ops::layout::resolve_slice;
use rml_core::shape::normalize_axis;
use rml_core::{DType, MAX_RANK, Shape};
use rml_kernels::copy::copy;

use super::arena::{MAX_IO, split};
use super::buffer::Buffer;
use super::ir::{Graph, Node, ValueId};
use super::op::Op;
use super::passes::ConstTable;
use super::plan::{Plan, Region};

/// Axes of a strided copy (after dropping size-1 axes and merging contiguous ones).
#[derive(Clone, Copy, Debug)]
struct Layout {
    rank: usize,
    dims: [usize; MAX_RANK],
    /// Source element step per axis (negative for reversed slices, 0 to broadcast).
    src: [isize; MAX_RANK],
    /// Destination element step per axis.
    dst: [isize; MAX_RANK],
}

impl Layout {
    /// The copy of `dims` with the given steps, simplified.
    fn new(dims: &[usize], src: &[isize], dst: &[isize]) -> Layout {
        let mut l = Layout {
            rank: 0,
            dims: [0; MAX_RANK],
            src: [0; MAX_RANK],
            dst: [0; MAX_RANK],
        };
        for i in 0..dims.len() {
            if dims[i] == 1 {
                continue;
            }
            let r = l.rank;
            // Merge into the previous axis when it steps over exactly this one.
            if r > 0
                && l.src[r - 1] == src[i] * dims[i] as isize
                && l.dst[r - 1] == dst[i] * dims[i] as isize
            {
                l.dims[r - 1] *= dims[i];
                l.src[r - 1] = src[i];
                l.dst[r - 1] = dst[i];
                continue;
            }
            l.dims[r] = dims[i];
            l.src[r] = src[i];
            l.dst[r] = dst[i];
            l.rank += 1;
        }
        l
    }

    /// Copies every element: `dst[dst_at + Σ i·dst] = src[src_at + Σ i·src]`. The
    /// callers' shapes keep every index in bounds (slice indexing panics otherwise).
    fn copy<T: Copy>(&self, dst: &mut [T], dst_at: usize, src: &[T], src_at: usize) {
        if self.dims[..self.rank].contains(&0) {
            return;
        }
        if self.rank == 0 {
            dst[dst_at] = src[src_at];
            return;
        }
        let last = self.rank - 1;
        let (n, ss, ds) = (self.dims[last], self.src[last], self.dst[last]);
        let mut index = [0usize; MAX_RANK];
        let (mut s, mut d) = (src_at as isize, dst_at as isize);
        loop {
            let (s0, d0) = (s as usize, d as usize);
            if ss == 1 && ds == 1 {
                copy(&src[s0..s0 + n], &mut dst[d0..d0 + n]).expect("equal ranges");
            } else if ds == 1 && ss == 0 {
                dst[d0..d0 + n].fill(src[s0]);
            } else {
                for i in 0..n as isize {
                    dst[(d + i * ds) as usize] = src[(s + i * ss) as usize];
                }
            }
            // Odometer over the outer axes.
            let mut axis = last;
            loop {
                if axis == 0 {
                    return;
                }
                axis -= 1;
                index[axis] += 1;
                s += self.src[axis];
                d += self.dst[axis];
                if index[axis] < self.dims[axis] {
                    break;
                }
                s -= self.src[axis] * self.dims[axis] as isize;
                d -= self.dst[axis] * self.dims[axis] as isize;
                index[axis] = 0;
            }
        }
    }
}

/// Row-major element strides of `shape`.
fn strides(shape: &Shape) -> [isize; MAX_RANK] {
    let mut s = [0isize; MAX_RANK];
    let mut step = 1isize;
    for i in (0..shape.rank()).rev() {
        s[i] = step;
        step *= shape.dim(i) as isize;
    }
    s
}

/// One strided copy of a node: which input into which output, where.
#[derive(Clone, Copy)]
struct Move {
    input: usize,
    output: usize,
    layout: Layout,
    src_at: usize,
    dst_at: usize,
}

/// Runs node `node` natively when it is one of this module's ops and fits; `None`
/// leaves it to the interpreter.
pub fn run(
    graph: &Graph,
    consts: &ConstTable,
    plan: &Plan,
    node: &Node,
    arena: &mut [u64],
) -> Option<()> {
    let width = width(graph.values[node.outputs[0]].ty.dtype)?;
    if let Op::Gather { axis } = node.op {
        return gather(graph, consts, plan, node, axis, width, arena);
    }
    // Check every copy first (nothing is written when one does not fit), then copy.
    moves(plan, node, &mut |_| {})?;
    let outs = node.outputs.len();
    if outs == 1 {
        // One output, any number of inputs: carve the output out of the arena.
        let out = plan.regions[node.outputs[0]]?;
        let io = Carved::new(arena, out);
        let mut held = true;
        moves(plan, node, &mut |m| match node.inputs[m.input]
            .and_then(|v| input_bytes(consts, plan, v, &io))
        {
            Some(src) => copy_bytes(width, &m.layout, &mut *io.out, m.dst_at, src, m.src_at),
            None => held = false,
        })?;
        return held.then_some(());
    }
    // Several outputs (split) of one input.
    let mut regions = [Region {
        offset: 0,
        words: 0,
    }; MAX_IO];
    for (r, &o) in regions.iter_mut().zip(&node.outputs) {
        *r = plan.regions[o]?;
    }
    let x = node.inputs[0]?;
    let io = split(arena, &regions[..outs], &[plan.regions[x]]);
    let src = match io.ins[0] {
        Some(words) => bytemuck::cast_slice::<u64, u8>(words),
        None => const_bytes(consts, x)?,
    };
    let mut slots = io.outs;
    moves(plan, node, &mut |m| {
        let out = bytemuck::cast_slice_mut::<u64, u8>(&mut *slots[m.output]);
        copy_bytes(width, &m.layout, out, m.dst_at, src, m.src_at);
    })?;
    Some(())
}

/// Calls `visit` with each strided copy of a `transpose`, `expand`, `slice`,
/// `concat` or `split` node, in order; `None` (possibly after some visits) when the
/// node is another op or its attributes and shapes do not fit. Computing the copies
/// one at a time keeps a node's step free of any per-node table to fill.
fn moves(plan: &Plan, node: &Node, visit: &mut dyn FnMut(Move)) -> Option<()> {
    let in_shape = |i: usize| {
        node.inputs
            .get(i)
            .copied()
            .flatten()
            .map(|v| plan.shapes[v])
    };
    let out_shape = |j: usize| plan.shapes[node.outputs[j]];
    let single = |layout, src_at| Move {
        input: 0,
        output: 0,
        layout,
        src_at,
        dst_at: 0,
    };
    match &node.op {
        Op::Transpose { perm } => {
            let (x, y) = (in_shape(0)?, out_shape(0));
            if perm.len() != x.rank() || y.rank() != x.rank() {
                return None;
            }
            let xs = strides(&x);
            let mut src = [0isize; MAX_RANK];
            for (i, &p) in perm.iter().enumerate() {
                if x.dims().get(p) != Some(&y.dim(i)) {
                    return None;
                }
                src[i] = xs[p];
            }
            let layout = Layout::new(y.dims(), &src[..y.rank()], &strides(&y)[..y.rank()]);
            visit(single(layout, 0));
        }
        Op::Expand { .. } => {
            let (x, y) = (in_shape(0)?, out_shape(0));
            let lead = y.rank().checked_sub(x.rank())?;
            let xs = strides(&x);
            let mut src = [0isize; MAX_RANK];
            for i in 0..x.rank() {
                match (x.dim(i), y.dim(lead + i)) {
                    (a, b) if a == b => src[lead + i] = xs[i],
                    (1, _) => {}
                    _ => return None,
                }
            }
            let layout = Layout::new(y.dims(), &src[..y.rank()], &strides(&y)[..y.rank()]);
            visit(single(layout, 0));
        }
        Op::Slice {
            starts,
            ends,
            axes,
            steps,
        } => {
            let x = in_shape(0)?;
            let mut dims = [0usize; MAX_RANK];
            dims[..x.rank()].copy_from_slice(x.dims());
            let mut src = strides(&x);
            let mut at = 0isize;
            for (i, &axis) in axes.iter().enumerate() {
                let a = normalize_axis(axis, x.rank()).ok()?;
                let (start, end) = (*starts.get(i)?, *ends.get(i)?);
                let r = resolve_slice(dims[a], start, end, *steps.get(i)?).ok()?;
                at += r.first as isize * src[a];
                src[a] *= r.step as isize;
                dims[a] = r.len;
            }
            let y = out_shape(0);
            if y.dims() != &dims[..x.rank()] {
                return None;
            }
            let layout = Layout::new(y.dims(), &src[..y.rank()], &strides(&y)[..y.rank()]);
            visit(single(layout, usize::try_from(at).ok()?));
        }
        Op::Concat { axis } => {
            let y = out_shape(0);
            let a = normalize_axis(*axis, y.rank()).ok()?;
            let ys = strides(&y);
            let mut start = 0;
            for (i, v) in node.inputs.iter().enumerate() {
                let x = plan.shapes[(*v)?];
                if !same_but(&x, &y, a) {
                    return None;
                }
                visit(Move {
                    input: i,
                    output: 0,
                    layout: Layout::new(x.dims(), &strides(&x)[..x.rank()], &ys[..y.rank()]),
                    src_at: 0,
                    dst_at: start * ys[a] as usize,
                });
                start += x.dim(a);
            }
            (start == y.dim(a)).then_some(())?;
        }
        Op::Split { axis, .. } => {
            let x = in_shape(0)?;
            let a = normalize_axis(*axis, x.rank()).ok()?;
            let xs = strides(&x);
            let mut start = 0;
            for (j, &o) in node.outputs.iter().enumerate() {
                let y = plan.shapes[o];
                if j == MAX_IO || !same_but(&y, &x, a) {
                    return None;
                }
                visit(Move {
                    input: 0,
                    output: j,
                    layout: Layout::new(y.dims(), &xs[..x.rank()], &strides(&y)[..y.rank()]),
                    src_at: start * xs[a] as usize,
                    dst_at: 0,
                });
                start += y.dim(a);
            }
            (start == x.dim(a)).then_some(())?;
        }
        _ => return None,
    }
    Some(())
}

/// `gather`: for every outer index and every index in `indices`, one contiguous
/// block of the trailing axes. Indices are checked first; one out of range leaves
/// the node to the interpreter (nothing written).
fn gather(
    graph: &Graph,
    consts: &ConstTable,
    plan: &Plan,
    node: &Node,
    axis: isize,
    width: usize,
    arena: &mut [u64],
) -> Option<()> {
    let (x, ids) = (
        node.inputs.first().copied().flatten()?,
        node.inputs.get(1).copied().flatten()?,
    );
    if graph.values[ids].ty.dtype != DType::I64 {
        return None;
    }
    let xs = plan.shapes[x];
    let a = normalize_axis(axis, xs.rank()).ok()?;
    let len = xs.dim(a);
    let outer: usize = xs.dims()[..a].iter().product();
    let inner: usize = xs.dims()[a + 1..].iter().product();
    let n_ids = plan.shapes[ids].numel();
    if plan.shapes[node.outputs[0]].numel() != outer * n_ids * inner {
        return None;
    }
    let io = Carved::new(arena, plan.regions[node.outputs[0]]?);
    let id_bytes = input_bytes(consts, plan, ids, &io)?;
    let indices = &bytemuck::cast_slice::<u8, i64>(id_bytes)[..n_ids];
    let resolve = |i: i64| {
        let i = if i < 0 { i + len as i64 } else { i };
        (0..len as i64).contains(&i).then_some(i as usize)
    };
    if indices.iter().any(|&i| resolve(i).is_none()) {
        return None;
    }
    let src = input_bytes(consts, plan, x, &io)?;
    let block = inner * width;
    for o in 0..outer {
        for (k, &i) in indices.iter().enumerate() {
            let from = ((o * len + resolve(i)?) * inner) * width;
            let to = ((o * n_ids + k) * inner) * width;
            copy(&src[from..from + block], &mut io.out[to..to + block]).expect("equal ranges");
        }
    }
    Some(())
}

/// True when `part` has `whole`'s rank and sizes on every axis but `axis`.
fn same_but(part: &Shape, whole: &Shape, axis: usize) -> bool {
    part.rank() == whole.rank()
        && (0..part.rank()).all(|i| i == axis || part.dim(i) == whole.dim(i))
}

/// Bytes per element of a held dtype.
fn width(dtype: DType) -> Option<usize> {
    match dtype {
        DType::F32 => Some(4),
        DType::I64 => Some(8),
        DType::Bool => Some(1),
        _ => None,
    }
}

/// Runs `layout`'s copy on elements `width` bytes wide.
fn copy_bytes(
    width: usize,
    layout: &Layout,
    dst: &mut [u8],
    dst_at: usize,
    src: &[u8],
    src_at: usize,
) {
    match width {
        1 => layout.copy(dst, dst_at, src, src_at),
        4 => layout.copy(
            bytemuck::cast_slice_mut::<u8, u32>(dst),
            dst_at,
            bytemuck::cast_slice::<u8, u32>(src),
            src_at,
        ),
        _ => layout.copy(
            bytemuck::cast_slice_mut::<u8, u64>(dst),
            dst_at,
            bytemuck::cast_slice::<u8, u64>(src),
            src_at,
        ),
    }
}

/// The arena with one output region taken out: the output's bytes and read access
/// to every region that does not overlap it.
struct Carved<'a> {
    before: &'a [u64],
    out: &'a mut [u8],
    after: &'a [u64],
    region: Region,
}

impl<'a> Carved<'a> {
    fn new(arena: &'a mut [u64], region: Region) -> Carved<'a> {
        let (before, rest) = arena.split_at_mut(region.offset);
        let (out, after) = rest.split_at_mut(region.words);
        Carved {
            before,
            out: bytemuck::cast_slice_mut(out),
            after,
            region,
        }
    }

    /// The words of region `r`; `None` when it overlaps the output.
    fn get(&self, r: Region) -> Option<&'a [u64]> {
        let (before, after): (&'a [u64], &'a [u64]) = (self.before, self.after);
        if r.end() <= self.region.offset {
            Some(&before[r.offset..r.end()])
        } else if r.offset >= self.region.end() {
            let at = r.offset - self.region.end();
            Some(&after[at..at + r.words])
        } else {
            None
        }
    }
}

/// An input's bytes: its arena region, or the constant.
fn input_bytes<'a>(
    consts: &'a ConstTable,
    plan: &Plan,
    v: ValueId,
    io: &Carved<'a>,
) -> Option<&'a [u8]> {
    match plan.regions[v] {
        Some(r) => io.get(r).map(bytemuck::cast_slice),
        None => const_bytes(consts, v),
    }
}

/// A constant's elements as bytes.
fn const_bytes(consts: &ConstTable, v: ValueId) -> Option<&[u8]> {
    Some(match &consts.get(v)?.1 {
        Buffer::F32(d) => bytemuck::cast_slice(d),
        Buffer::I64(d) => bytemuck::cast_slice(d),
        Buffer::Bool(d) => d,
    })
}
