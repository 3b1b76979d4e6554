//! Folding an inference `batch_norm` into the convolution that feeds it.
//!
//! `batch_norm(conv(x, W, b))` with constant running statistics is, per output
//! channel `o`, `conv(x, W, b)·s_o + (β_o − mean_o·s_o)` with `s_o = γ_o / √(var_o + ε)`:
//! a convolution with weights `W_o·s_o` and bias `(b_o − mean_o)·s_o + β_o`. When a
//! `conv2d` or `conv_transpose2d` has constant weights (and bias, if any) and its
//! output is read by one `batch_norm` alone, with constant statistics, the pass
//! writes those folded constants (computed in f64, rounded once) for the
//! convolution and turns the batch norm into an `identity` of its result.
//! torch.compile and XLA do the same. The result differs from the unfolded graph by
//! the rounding of the folded weights (one f32 rounding per weight and bias).

use super::buffer::Buffer;
use super::dim::Dim;
use super::ir::{Graph, TensorType, Value, ValueId, ValueSource};
use super::op::Op;
use super::passes::ConstTable;

/// Per output channel `o`: `(s_o, shift_o)` so that `bn(y) = y·s_o + shift_o`
/// (`shift_o = β_o − mean_o·s_o`), in f64.
type Affine = Vec<(f64, f64)>;

/// Rewrites each foldable convolution of `nodes` (see the module docs): the
/// convolution reads the folded constants (new values of `graph`) and the batch-norm
/// node becomes an `identity` of its output (a free alias in the executor).
pub fn fold_batch_norms(graph: &mut Graph, consts: &mut ConstTable, nodes: &[usize]) {
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); graph.values.len()];
    for &n in nodes {
        for &i in graph.nodes[n].inputs.iter().flatten() {
            readers[i].push(n);
        }
    }
    for &conv in nodes {
        let Some((bn, affine)) = foldable(graph, consts, &readers, conv) else {
            continue;
        };
        let Some((weight, bias)) = folded(graph, consts, conv, &affine) else {
            continue;
        };
        let w_dims = graph.values[graph.nodes[conv].inputs[1].expect("conv weight")]
            .ty
            .shape
            .clone();
        let w = add_constant(graph, consts, "bn_folded_weight", w_dims, weight);
        let b = add_constant(
            graph,
            consts,
            "bn_folded_bias",
            vec![Dim::Fixed(affine.len())],
            bias,
        );
        let node = &mut graph.nodes[conv];
        node.inputs.resize(3, None);
        node.inputs[1] = Some(w);
        node.inputs[2] = Some(b);
        let bn_node = &mut graph.nodes[bn];
        bn_node.op = Op::Identity;
        bn_node.op_name = "identity".into();
        bn_node.inputs.truncate(1);
    }
}

/// The batch-norm node reading `conv`'s output and its per-channel affine form, when
/// the pair can be folded.
fn foldable(
    graph: &Graph,
    consts: &ConstTable,
    readers: &[Vec<usize>],
    conv: usize,
) -> Option<(usize, Affine)> {
    let node = &graph.nodes[conv];
    let f32_const = |v: Option<&Option<ValueId>>| match v.copied().flatten() {
        Some(v) => match consts.get(v) {
            Some((shape, Buffer::F32(data))) => Some(Some((shape.dims(), &data[..]))),
            _ => None,
        },
        None => Some(None),
    };
    let (weight_dims, _) = f32_const(node.inputs.get(1))??;
    let channels = match &node.op {
        Op::Conv2d(_) => *weight_dims.first()?,
        Op::ConvTranspose2d(p) if p.groups > 0 && weight_dims.first()? % p.groups == 0 => {
            weight_dims.get(1)?.checked_mul(p.groups)?
        }
        _ => return None,
    };
    f32_const(node.inputs.get(2))?;
    let y = *node.outputs.first()?;
    let [bn] = readers[y][..] else {
        return None;
    };
    let Op::BatchNorm { epsilon } = graph.nodes[bn].op else {
        return None;
    };
    let bn_node = &graph.nodes[bn];
    let f32_values = |v: &ValueId| graph.values[*v].ty.dtype == rml_core::DType::F32;
    let usable = !graph.outputs.contains(&y)
        && epsilon >= 0.0
        && bn_node.inputs.first() == Some(&Some(y))
        && f32_values(&y)
        && bn_node.outputs.iter().all(f32_values);
    if !usable {
        return None;
    }
    let vector = |i: usize| -> Option<Option<&[f32]>> {
        let v = f32_const(bn_node.inputs.get(i))?;
        match v {
            Some((dims, data)) if dims == [channels] => Some(Some(data)),
            Some(_) => None,
            None => Some(None),
        }
    };
    let (mean, var) = (vector(1)??, vector(2)??);
    let (gamma, beta) = (vector(3)?, vector(4)?);
    let affine = (0..channels)
        .map(|o| {
            let s = gamma.map_or(1.0, |g| f64::from(g[o]))
                / (f64::from(var[o]) + f64::from(epsilon)).sqrt();
            let shift = beta.map_or(0.0, |b| f64::from(b[o])) - f64::from(mean[o]) * s;
            (s, shift)
        })
        .collect();
    Some((bn, affine))
}

/// The folded weight and bias of `conv` under `affine`.
fn folded(
    graph: &Graph,
    consts: &ConstTable,
    conv: usize,
    affine: &Affine,
) -> Option<(Vec<f32>, Vec<f32>)> {
    let node = &graph.nodes[conv];
    let (w_shape, Buffer::F32(w)) = consts.get(node.inputs[1]?)? else {
        return None;
    };
    let bias = match node.inputs.get(2).copied().flatten() {
        Some(b) => match consts.get(b)? {
            (_, Buffer::F32(b)) => Some(b),
            _ => return None,
        },
        None => None,
    };
    let &[d0, d1, kh, kw] = w_shape.dims() else {
        return None;
    };
    let taps = kh * kw;
    // The output channel of weight element `i`.
    let channel = |i: usize| match &node.op {
        Op::ConvTranspose2d(p) => {
            let (ci, local) = (i / (d1 * taps), i / taps % d1);
            let cig = d0 / p.groups.max(1);
            (ci / cig.max(1)) * d1 + local
        }
        _ => i / (d1 * taps),
    };
    let weight = w
        .iter()
        .enumerate()
        .map(|(i, &v)| (f64::from(v) * affine[channel(i)].0) as f32)
        .collect();
    let bias = affine
        .iter()
        .enumerate()
        .map(|(o, &(s, shift))| (bias.map_or(0.0, |b| f64::from(b[o])) * s + shift) as f32)
        .collect();
    Some((weight, bias))
}

/// Appends an f32 constant value named after `stem` holding `data`.
fn add_constant(
    graph: &mut Graph,
    consts: &mut ConstTable,
    stem: &str,
    dims: Vec<Dim>,
    data: Vec<f32>,
) -> ValueId {
    let id = graph.values.len();
    let mut name = format!("{stem}.{id}");
    while graph.value_id(&name).is_some() {
        name.push('_');
    }
    let shape: Vec<usize> = dims.iter().filter_map(Dim::fixed).collect();
    let shape = rml_core::Shape::new(&shape).expect("a constant's fixed shape");
    graph.values.push(Value {
        name,
        ty: TensorType {
            dtype: rml_core::DType::F32,
            shape: dims,
        },
        source: ValueSource::Constant(usize::MAX),
    });
    consts.values.push(Some((shape, Buffer::F32(data))));
    id
}
