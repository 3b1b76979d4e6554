//! From an op name and its JSON attributes to a typed [`Op`]: defaults filled in,
//! ranges checked, unknown attributes rejected.

use rml_core::DType;
use rml_core::ops::conv::{
    Conv1dParams, Conv2dParams, ConvTranspose1dParams, ConvTranspose2dParams,
};
use rml_core::ops::pool::{Pool1dParams, Pool2dParams};
use rml_core::ops::window::Padding2d;
use serde_json::{Map, Value};

use super::attrs::Attrs;
use super::error::{GraphError, NodeRef};
use super::op::{BinaryFn, CompareFn, Op, PadKind, PoolKind, ReduceKind, Resize, UnaryFn};

/// Parses `node.op` with attributes `map`.
pub(crate) fn parse_op(node: &NodeRef, map: &Map<String, Value>) -> Result<Op, GraphError> {
    let mut a = Attrs::new(node, map);
    let op = match node.op.as_str() {
        "matmul" => Op::MatMul {
            transpose_a: a.bool("transpose_a", false)?,
            transpose_b: a.bool("transpose_b", false)?,
        },
        "linear" => Op::Linear,
        "conv1d" => Op::Conv1d(Conv1dParams {
            stride: a.count("stride", Some(1), 1)?,
            padding: a.counts("padding", Some([0, 0]), 0)?,
            dilation: a.count("dilation", Some(1), 1)?,
            groups: a.count("groups", Some(1), 1)?,
        }),
        "conv2d" => Op::Conv2d(Conv2dParams {
            stride: a.counts("stride", Some([1, 1]), 1)?,
            padding: padding2d(&mut a)?,
            dilation: a.counts("dilation", Some([1, 1]), 1)?,
            groups: a.count("groups", Some(1), 1)?,
        }),
        "conv_transpose1d" => Op::ConvTranspose1d(ConvTranspose1dParams {
            stride: a.count("stride", Some(1), 1)?,
            padding: a.counts("padding", Some([0, 0]), 0)?,
            output_padding: a.count("output_padding", Some(0), 0)?,
            dilation: a.count("dilation", Some(1), 1)?,
            groups: a.count("groups", Some(1), 1)?,
        }),
        "conv_transpose2d" => Op::ConvTranspose2d(ConvTranspose2dParams {
            stride: a.counts("stride", Some([1, 1]), 1)?,
            padding: padding2d(&mut a)?,
            output_padding: a.counts("output_padding", Some([0, 0]), 0)?,
            dilation: a.counts("dilation", Some([1, 1]), 1)?,
            groups: a.count("groups", Some(1), 1)?,
        }),
        "max_pool1d" | "avg_pool1d" => {
            let kind = pool_kind(&mut a, node.op.starts_with("max"))?;
            let kernel = a.count("kernel", None, 1)?;
            let params = Pool1dParams {
                kernel,
                stride: a.count("stride", Some(kernel), 1)?,
                padding: a.counts("padding", Some([0, 0]), 0)?,
                dilation: a.count("dilation", Some(1), 1)?,
                ceil_mode: a.bool("ceil_mode", false)?,
            };
            Op::Pool1d { kind, params }
        }
        "max_pool2d" | "avg_pool2d" => {
            let kind = pool_kind(&mut a, node.op.starts_with("max"))?;
            let kernel = a.counts("kernel", None, 1)?;
            let params = Pool2dParams {
                kernel,
                stride: a.counts("stride", Some(kernel), 1)?,
                padding: padding2d(&mut a)?,
                dilation: a.counts("dilation", Some([1, 1]), 1)?,
                ceil_mode: a.bool("ceil_mode", false)?,
            };
            Op::Pool2d { kind, params }
        }
        "global_avg_pool2d" => Op::GlobalPool2d {
            kind: PoolKind::Avg {
                count_include_pad: false,
            },
        },
        "global_max_pool2d" => Op::GlobalPool2d {
            kind: PoolKind::Max,
        },
        "upsample_nearest2d" => {
            let scale = a.counts_opt::<2>("scale", 1)?;
            let size = a.counts_opt::<2>("size", 1)?;
            match (scale, size) {
                (Some(scale), None) => Op::UpsampleNearest2d(Resize::Scale(scale)),
                (None, Some(size)) => Op::UpsampleNearest2d(Resize::Size(size)),
                _ => {
                    let expected = "exactly one of \"scale\" and \"size\"";
                    return Err(a.bad("scale", expected, map.get("scale")));
                }
            }
        }
        "layer_norm" => Op::LayerNorm {
            axis: a.axis("axis", Some(-1))?,
            epsilon: a.positive_float("epsilon", 1e-5)?,
        },
        "rms_norm" => Op::RmsNorm {
            epsilon: a.positive_float("epsilon", 1e-6)?,
        },
        "group_norm" => Op::GroupNorm {
            num_groups: a.count("num_groups", None, 1)?,
            epsilon: a.positive_float("epsilon", 1e-5)?,
        },
        "batch_norm" => Op::BatchNorm {
            epsilon: a.positive_float("epsilon", 1e-5)?,
        },
        "softmax" | "log_softmax" => Op::Softmax {
            log: node.op == "log_softmax",
            axis: a.axis("axis", Some(-1))?,
        },
        "scaled_dot_product_attention" => Op::Attention {
            causal: a.bool("causal", false)?,
            scale: match a.float_opt("scale")? {
                Some(s) if s <= 0.0 => {
                    return Err(a.bad("scale", "a positive finite number", map.get("scale")));
                }
                s => s,
            },
        },
        "clip" => Op::Clip {
            min: a.float_opt("min")?,
            max: a.float_opt("max")?,
        },
        "where" => Op::Where,
        "cast" => {
            let name = a.string("to", "a dtype name such as \"F32\"")?;
            match DType::parse(name) {
                Ok(to) if !to.is_quantized() => Op::Cast { to },
                _ => return Err(a.bad("to", "a scalar dtype name such as \"F32\"", map.get("to"))),
            }
        }
        "reshape" => Op::Reshape {
            shape: a.shape_spec("shape", true)?,
        },
        "flatten" => Op::Flatten {
            start: a.axis("start", Some(1))?,
            end: a.axis("end", Some(-1))?,
        },
        "squeeze" | "unsqueeze" => {
            let axes = a
                .axes("axes")?
                .ok_or_else(|| a.bad("axes", "a list of integer axes", None))?;
            if node.op == "squeeze" {
                Op::Squeeze { axes }
            } else {
                Op::Unsqueeze { axes }
            }
        }
        "transpose" => Op::Transpose {
            perm: a
                .sizes("perm")?
                .ok_or_else(|| a.bad("perm", "a permutation of the axes", None))?,
        },
        "expand" => Op::Expand {
            shape: a.shape_spec("shape", false)?,
        },
        "concat" => Op::Concat {
            axis: a.axis("axis", None)?,
        },
        "split" => Op::Split {
            axis: a.axis("axis", None)?,
            sizes: a.sizes("sizes")?,
        },
        "slice" => slice(&mut a, map)?,
        "gather" => Op::Gather {
            axis: a.axis("axis", Some(0))?,
        },
        "pad" => Op::Pad {
            pads: a.pairs("pads", None, None)?,
            mode: [
                PadKind::Constant,
                PadKind::Reflect,
                PadKind::Edge,
                PadKind::Wrap,
            ][a.choice("mode", &["constant", "reflect", "edge", "wrap"], 0)?],
            value: a.float("value", 0.0)?,
        },
        "identity" => Op::Identity,
        "argmax" | "argmin" => Op::ArgReduce {
            max: node.op == "argmax",
            axis: a.axis("axis", None)?,
            keepdims: a.bool("keepdims", false)?,
        },
        "cumsum" => Op::CumSum {
            axis: a.axis("axis", None)?,
        },
        name => {
            if let Some(kind) = reduce_kind(name, &mut a)? {
                Op::Reduce {
                    kind,
                    axes: a.axes("axes")?,
                    keepdims: a.bool("keepdims", false)?,
                }
            } else if let Some(f) = elementwise(name, &mut a)? {
                f
            } else {
                return Err(GraphError::UnknownOp { node: node.clone() });
            }
        }
    };
    a.finish()?;
    Ok(op)
}

/// `padding` as `[[top, bottom], [left, right]]` (default zero).
fn padding2d(a: &mut Attrs<'_>) -> Result<Padding2d, GraphError> {
    let pads = a.pairs("padding", Some(2), Some(vec![[0, 0], [0, 0]]))?;
    Ok(Padding2d {
        top: pads[0][0],
        bottom: pads[0][1],
        left: pads[1][0],
        right: pads[1][1],
    })
}

/// Max pooling, or average pooling with its `count_include_pad` (default true).
fn pool_kind(a: &mut Attrs<'_>, max: bool) -> Result<PoolKind, GraphError> {
    Ok(if max {
        PoolKind::Max
    } else {
        PoolKind::Avg {
            count_include_pad: a.bool("count_include_pad", true)?,
        }
    })
}

/// `slice`: `starts` and `ends` required, `axes` default `0..len`, `steps` default 1.
fn slice(a: &mut Attrs<'_>, map: &Map<String, Value>) -> Result<Op, GraphError> {
    let starts = a
        .ints("starts")?
        .ok_or_else(|| a.bad("starts", "a list of integers", None))?;
    let ends = a
        .ints("ends")?
        .ok_or_else(|| a.bad("ends", "a list of integers", None))?;
    let n = starts.len();
    let expected = format!("{n} integers (one per entry of \"starts\")");
    if ends.len() != n {
        return Err(a.bad("ends", &expected, map.get("ends")));
    }
    let axes = a.axes("axes")?.unwrap_or_else(|| (0..n as isize).collect());
    if axes.len() != n {
        return Err(a.bad("axes", &expected, map.get("axes")));
    }
    let steps = a.ints("steps")?.unwrap_or_else(|| vec![1; n]);
    if steps.len() != n || steps.contains(&0) {
        return Err(a.bad("steps", &format!("{n} non-zero integers"), map.get("steps")));
    }
    Ok(Op::Slice {
        starts,
        ends,
        axes,
        steps,
    })
}

/// The reduction named `name`, if it is one (reading `variance`'s `correction`).
fn reduce_kind(name: &str, a: &mut Attrs<'_>) -> Result<Option<ReduceKind>, GraphError> {
    Ok(Some(match name {
        "reduce_sum" => ReduceKind::Sum,
        "reduce_mean" => ReduceKind::Mean,
        "reduce_max" => ReduceKind::Max,
        "reduce_min" => ReduceKind::Min,
        "reduce_prod" => ReduceKind::Prod,
        "variance" => ReduceKind::Variance {
            correction: a.count("correction", Some(0), 0)?,
        },
        _ => return Ok(None),
    }))
}

/// The unary, binary or comparison op named `name`, if it is one.
fn elementwise(name: &str, a: &mut Attrs<'_>) -> Result<Option<Op>, GraphError> {
    let unary = |f| Some(Op::Unary(f));
    Ok(match name {
        "neg" => unary(UnaryFn::Neg),
        "abs" => unary(UnaryFn::Abs),
        "exp" => unary(UnaryFn::Exp),
        "log" => unary(UnaryFn::Log),
        "sqrt" => unary(UnaryFn::Sqrt),
        "rsqrt" => unary(UnaryFn::Rsqrt),
        "tanh" => unary(UnaryFn::Tanh),
        "sigmoid" => unary(UnaryFn::Sigmoid),
        "relu" => unary(UnaryFn::Relu),
        "leaky_relu" => unary(UnaryFn::LeakyRelu(a.float("alpha", 0.01)?)),
        "elu" => unary(UnaryFn::Elu(a.float("alpha", 1.0)?)),
        "softplus" => unary(UnaryFn::Softplus),
        "erf" => unary(UnaryFn::Erf),
        "gelu" => unary(UnaryFn::Gelu),
        "gelu_tanh" => unary(UnaryFn::GeluTanh),
        "silu" => unary(UnaryFn::Silu),
        "sin" => unary(UnaryFn::Sin),
        "cos" => unary(UnaryFn::Cos),
        "add" => Some(Op::Binary(BinaryFn::Add)),
        "sub" => Some(Op::Binary(BinaryFn::Sub)),
        "mul" => Some(Op::Binary(BinaryFn::Mul)),
        "div" => Some(Op::Binary(BinaryFn::Div)),
        "pow" => Some(Op::Binary(BinaryFn::Pow)),
        "maximum" => Some(Op::Binary(BinaryFn::Maximum)),
        "minimum" => Some(Op::Binary(BinaryFn::Minimum)),
        "equal" => Some(Op::Compare(CompareFn::Equal)),
        "not_equal" => Some(Op::Compare(CompareFn::NotEqual)),
        "less" => Some(Op::Compare(CompareFn::Less)),
        "less_equal" => Some(Op::Compare(CompareFn::LessEqual)),
        "greater" => Some(Op::Compare(CompareFn::Greater)),
        "greater_equal" => Some(Op::Compare(CompareFn::GreaterEqual)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_op_name_parses_and_no_other() {
        for name in super::super::op::OP_NAMES {
            let node = NodeRef {
                index: 0,
                op: name.to_string(),
                name: None,
            };
            let result = parse_op(&node, &Map::new());
            assert!(
                !matches!(result, Err(GraphError::UnknownOp { .. })),
                "{name} is listed but not parsed"
            );
        }
        let node = NodeRef {
            index: 0,
            op: "softmax2".to_string(),
            name: None,
        };
        assert!(matches!(
            parse_op(&node, &Map::new()),
            Err(GraphError::UnknownOp { .. })
        ));
    }
}
