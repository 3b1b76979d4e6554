//! [`BufferPool`]: the activation arena, reused across runs, and the safe split of it
//! into one step's disjoint output (mutable) and input (shared) regions.

use super::plan::Region;

/// Most regions one step borrows, outputs and inputs each.
pub const MAX_IO: usize = 8;

/// The activation arena: grown to the largest plan seen, never shrunk, so runs
/// after the first allocate nothing.
#[derive(Clone, Debug, Default)]
pub struct BufferPool {
    words: Vec<u64>,
}

impl BufferPool {
    /// An empty pool.
    pub fn new() -> BufferPool {
        BufferPool::default()
    }

    /// Grows the arena to at least `words` words.
    pub fn reserve(&mut self, words: usize) {
        if self.words.len() < words {
            self.words.resize(words, 0);
        }
    }

    /// Capacity in bytes.
    pub fn bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// The whole arena.
    pub fn words_mut(&mut self) -> &mut [u64] {
        &mut self.words
    }
}

/// One step's borrowed regions.
pub struct Io<'a> {
    /// Output `j`'s words.
    pub outs: [&'a mut [u64]; MAX_IO],
    /// Input `i`'s words, `None` when it is not in the arena or is read in place.
    pub ins: [Option<&'a [u64]>; MAX_IO],
    /// For an input that is the very region of output `j`: `Some(j)`.
    pub in_place: [Option<usize>; MAX_IO],
}

/// Entry of the sorted region list: an output or an input.
#[derive(Clone, Copy)]
enum Who {
    Out(usize),
    In(usize),
}

/// Splits `arena` into the regions of `outs` and `ins`. Regions must not overlap
/// unless equal; an input equal to an output is marked in place, equal inputs
/// share one slice. Panics if the planner broke that rule (a bug).
pub fn split<'a>(arena: &'a mut [u64], outs: &[Region], ins: &[Option<Region>]) -> Io<'a> {
    let mut io = Io {
        outs: std::array::from_fn(|_| -> &'a mut [u64] { &mut [] }),
        ins: [None; MAX_IO],
        in_place: [None; MAX_IO],
    };
    let mut order: [(Region, Who); 2 * MAX_IO] = [(
        Region {
            offset: 0,
            words: 0,
        },
        Who::Out(0),
    ); 2 * MAX_IO];
    let mut n = 0;
    for (j, &r) in outs.iter().enumerate() {
        order[n] = (r, Who::Out(j));
        n += 1;
    }
    for (i, r) in ins.iter().enumerate() {
        if let Some(r) = *r {
            order[n] = (r, Who::In(i));
            n += 1;
        }
    }
    let order = &mut order[..n];
    // Outputs first among equal offsets, so an equal input sees it as in place.
    order.sort_unstable_by_key(|(r, who)| (r.offset, matches!(who, Who::In(_))));
    let mut rest: &'a mut [u64] = arena;
    let mut pos = 0;
    let mut prev: Option<(Region, Who)> = None;
    let mut prev_in: Option<&'a [u64]> = None;
    for &(r, who) in order.iter() {
        if let Some((p, pwho)) = prev
            && p == r
        {
            match (pwho, who) {
                (Who::Out(j), Who::In(i)) => io.in_place[i] = Some(j),
                (Who::In(_), Who::In(i)) => io.ins[i] = prev_in,
                _ => panic!("planner bug: two outputs of one step share a region"),
            }
            continue;
        }
        assert!(r.offset >= pos, "planner bug: overlapping regions");
        let tail = std::mem::take(&mut rest);
        let (_, tail) = tail.split_at_mut(r.offset - pos);
        let (piece, tail) = tail.split_at_mut(r.words);
        rest = tail;
        pos = r.end();
        prev = Some((r, who));
        match who {
            Who::Out(j) => {
                io.outs[j] = piece;
                prev_in = None;
            }
            Who::In(i) => {
                let shared: &'a [u64] = piece;
                io.ins[i] = Some(shared);
                prev_in = Some(shared);
            }
        }
    }
    io
}
