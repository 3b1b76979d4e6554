//! Buffer planning for one set of input shapes: every value the steps write (and
//! every graph input, copied in) gets a [`Region`] of one arena, by liveness, greedy
//! first-fit over 64-byte-aligned offsets. A fused step may write an output in place
//! of a same-shaped operand whose last reader it is. Aliases (reshape and friends)
//! share their source's region.

use rml_core::{DType, Shape};

use super::fuse::Broadcast;
use super::ir::{Graph, ValueId};
use super::passes::ConstTable;
use super::steps::{Step, StepKind};

/// Arena words (u64) per alignment unit: 64 bytes.
const ALIGN_WORDS: usize = 8;

/// A run of arena words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// First word.
    pub offset: usize,
    /// Word count (at least one).
    pub words: usize,
}

impl Region {
    /// One past the last word.
    pub fn end(&self) -> usize {
        self.offset + self.words
    }
}

/// The bytes one element of `dtype` takes in the arena (`BOOL` is one byte).
pub fn elem_bytes(dtype: DType) -> usize {
    match dtype {
        DType::I64 | DType::F64 => 8,
        DType::Bool | DType::U8 | DType::I8 => 1,
        DType::F16 | DType::BF16 | DType::I16 => 2,
        _ => 4,
    }
}

/// The plan for one set of input shapes.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The input dims it was made for.
    pub input_dims: Vec<Vec<usize>>,
    /// Every value's shape.
    pub shapes: Vec<Shape>,
    /// Every arena-held value's region (`None` for constants and unused values).
    pub regions: Vec<Option<Region>>,
    /// Per step, per operand of a fused program: how it broadcasts.
    pub broadcasts: Vec<Vec<Broadcast>>,
    /// Arena size in words.
    pub arena_words: usize,
}

impl Plan {
    /// Peak activation memory: the arena size in bytes.
    pub fn peak_bytes(&self) -> usize {
        self.arena_words * 8
    }
}

/// Plans `steps` for the bound `shapes`.
pub fn plan(
    graph: &Graph,
    consts: &ConstTable,
    steps: &[Step],
    input_dims: Vec<Vec<usize>>,
    shapes: Vec<Shape>,
) -> Plan {
    let n_values = graph.values.len();
    let end = steps.len() + 1;
    // Alias roots and liveness (step numbers: inputs 0, step i at i + 1).
    let mut root: Vec<ValueId> = (0..n_values).collect();
    let mut last_use = vec![0usize; n_values];
    for (i, step) in steps.iter().enumerate() {
        if let StepKind::Alias { from, to } = step.kind {
            root[to] = root[from];
        }
        for &r in &step.reads {
            let r = root[r];
            last_use[r] = last_use[r].max(i + 1);
        }
    }
    for &o in &graph.outputs {
        last_use[root[o]] = end;
    }
    let words = |id: ValueId| {
        let bytes = shapes[id].numel() * elem_bytes(graph.values[id].ty.dtype);
        bytes.div_ceil(8 * ALIGN_WORDS).max(1) * ALIGN_WORDS
    };
    let mut regions: Vec<Option<Region>> = vec![None; n_values];
    let mut live: Vec<(Region, usize)> = Vec::new();
    let mut arena_words = 0;
    let mut place = |size: usize, until: usize, live: &mut Vec<(Region, usize)>| {
        live.sort_by_key(|(r, _)| r.offset);
        let mut at = 0;
        for (r, _) in live.iter() {
            if r.offset >= at + size {
                break;
            }
            at = at.max(r.end());
        }
        let region = Region {
            offset: at,
            words: size,
        };
        arena_words = arena_words.max(region.end());
        live.push((region, until));
        region
    };
    for &id in &graph.inputs {
        if consts.get(id).is_none() {
            regions[id] = Some(place(words(id), last_use[id], &mut live));
        }
    }
    let mut broadcasts = Vec::with_capacity(steps.len());
    for (i, step) in steps.iter().enumerate() {
        let now = i + 1;
        live.retain(|&(_, until)| until >= now);
        let mut bcast = Vec::new();
        let program = match &step.kind {
            StepKind::Fused(p) => Some(p),
            StepKind::Linear { epilogue, .. }
            | StepKind::Conv { epilogue, .. }
            | StepKind::GroupNorm { epilogue, .. } => epilogue.as_ref(),
            StepKind::RowNorm { epilogue, .. } => Some(epilogue),
            _ => None,
        };
        if let Some(p) = program {
            let out_dims = shapes[p.outputs[0]].dims();
            bcast = p
                .operands
                .iter()
                .map(|&o| Broadcast::new(shapes[o].dims(), out_dims))
                .collect();
        }
        match &step.kind {
            StepKind::Alias { from, to } => regions[*to] = regions[root[*from]],
            StepKind::Fused(p) => {
                let mut taken: Vec<ValueId> = Vec::new();
                for &out in &p.outputs {
                    let reuse = p.operands.iter().enumerate().find_map(|(j, &v)| {
                        let r = root[v];
                        let sole = p.operands.iter().filter(|&&w| root[w] == r).count() == 1;
                        let fits = bcast[j] == Broadcast::Full
                            && last_use[r] == now
                            && regions[r].is_some_and(|reg| reg.words == words(out))
                            && elem_bytes(graph.values[v].ty.dtype)
                                == elem_bytes(graph.values[out].ty.dtype)
                            && !taken.contains(&r);
                        (sole && fits).then_some(r)
                    });
                    let region = match reuse {
                        Some(r) => {
                            taken.push(r);
                            let region = regions[r].expect("checked");
                            live.push((region, last_use[out]));
                            region
                        }
                        None => place(words(out), last_use[out], &mut live),
                    };
                    regions[out] = Some(region);
                }
            }
            _ => {
                for &out in &step.writes {
                    regions[out] = Some(place(words(out), last_use[root[out]], &mut live));
                }
            }
        }
        broadcasts.push(bcast);
    }
    Plan {
        input_dims,
        shapes,
        regions,
        broadcasts,
        arena_words,
    }
}
