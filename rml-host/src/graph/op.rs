//! The rml-graph op set as typed Rust values: [`Op`] and the small enums its
//! variants carry. After loading, every attribute lives in a field of the right
//! type; nothing looks an attribute up by name again.
//!
//! Window parameters reuse rml-core's own structs ([`Conv2dParams`],
//! [`Pool2dParams`], …) so an interpreter hands them to the reference ops as they
//! are. `docs/graph-ir.md` specifies every op.

use rml_core::DType;
use rml_core::ops::conv::{
    Conv1dParams, Conv2dParams, ConvTranspose1dParams, ConvTranspose2dParams,
};
use rml_core::ops::pool::{Pool1dParams, Pool2dParams};

/// Every op name the loader accepts, in the order `docs/graph-ir.md` lists them.
pub const OP_NAMES: &[&str] = &[
    "matmul",
    "linear",
    "conv1d",
    "conv2d",
    "conv_transpose1d",
    "conv_transpose2d",
    "max_pool1d",
    "max_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "global_avg_pool2d",
    "global_max_pool2d",
    "upsample_nearest2d",
    "layer_norm",
    "rms_norm",
    "group_norm",
    "batch_norm",
    "softmax",
    "log_softmax",
    "scaled_dot_product_attention",
    "neg",
    "abs",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "tanh",
    "sigmoid",
    "relu",
    "leaky_relu",
    "elu",
    "softplus",
    "erf",
    "gelu",
    "gelu_tanh",
    "silu",
    "sin",
    "cos",
    "clip",
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "maximum",
    "minimum",
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "where",
    "cast",
    "reshape",
    "flatten",
    "squeeze",
    "unsqueeze",
    "transpose",
    "expand",
    "concat",
    "split",
    "slice",
    "gather",
    "pad",
    "identity",
    "reduce_sum",
    "reduce_mean",
    "reduce_max",
    "reduce_min",
    "reduce_prod",
    "variance",
    "argmax",
    "argmin",
    "cumsum",
];

/// One node's operation with its typed attributes.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `op(a) @ op(b)` over the last two axes, batch axes broadcast.
    MatMul {
        /// Swap `a`'s last two axes first.
        transpose_a: bool,
        /// Swap `b`'s last two axes first.
        transpose_b: bool,
    },
    /// `x · Wᵀ + b` with `W` of shape `[out, in]`.
    Linear,
    /// 1-D convolution over `[N, C, L]`.
    Conv1d(Conv1dParams),
    /// 2-D convolution over `[N, C, H, W]`.
    Conv2d(Conv2dParams),
    /// 1-D transposed convolution.
    ConvTranspose1d(ConvTranspose1dParams),
    /// 2-D transposed convolution.
    ConvTranspose2d(ConvTranspose2dParams),
    /// Max or average pooling over `[N, C, L]`.
    Pool1d {
        /// Max or average.
        kind: PoolKind,
        /// The window.
        params: Pool1dParams,
    },
    /// Max or average pooling over `[N, C, H, W]`.
    Pool2d {
        /// Max or average.
        kind: PoolKind,
        /// The window.
        params: Pool2dParams,
    },
    /// `[N, C, H, W]` → `[N, C, 1, 1]` by mean or max.
    GlobalPool2d {
        /// Max or average (`count_include_pad` is meaningless here and false).
        kind: PoolKind,
    },
    /// Nearest-neighbour resize of `[N, C, H, W]`.
    UpsampleNearest2d(Resize),
    /// Layer normalization over the axes from `axis` to the last.
    LayerNorm {
        /// First normalized axis (negative counts from the end).
        axis: isize,
        /// Added to the variance.
        epsilon: f32,
    },
    /// RMS normalization over the last axis.
    RmsNorm {
        /// Added to the mean square.
        epsilon: f32,
    },
    /// Group normalization of `[N, C, …]` in `num_groups` channel groups.
    GroupNorm {
        /// Channel groups; divides `C`.
        num_groups: usize,
        /// Added to the variance.
        epsilon: f32,
    },
    /// Inference batch normalization of `[N, C, …]` with running statistics.
    BatchNorm {
        /// Added to the running variance.
        epsilon: f32,
    },
    /// Softmax or log-softmax along one axis.
    Softmax {
        /// Softmax or log-softmax.
        log: bool,
        /// The axis (negative counts from the end).
        axis: isize,
    },
    /// `softmax(q·kᵀ·scale + mask)·v` as one op.
    Attention {
        /// Mask key `j` for query `i` when `j > i` (top-left aligned).
        causal: bool,
        /// Score scale; `None` is `1/sqrt(D)`.
        scale: Option<f32>,
    },
    /// An elementwise function of one input.
    Unary(UnaryFn),
    /// `min(max(x, min), max)`; either bound may be absent.
    Clip {
        /// Lower bound.
        min: Option<f32>,
        /// Upper bound.
        max: Option<f32>,
    },
    /// An elementwise function of two inputs, broadcast.
    Binary(BinaryFn),
    /// An elementwise comparison, broadcast, giving `BOOL`.
    Compare(CompareFn),
    /// `cond ? a : b`, broadcast over all three.
    Where,
    /// Element type conversion.
    Cast {
        /// The target dtype.
        to: DType,
    },
    /// A new shape for the same elements (row-major).
    Reshape {
        /// The target shape, with `0` (copy) and `-1` (infer) entries.
        shape: Vec<ShapeEntry>,
    },
    /// Collapse axes `start..=end` into one.
    Flatten {
        /// First collapsed axis.
        start: isize,
        /// Last collapsed axis.
        end: isize,
    },
    /// Remove size-1 axes.
    Squeeze {
        /// The axes to remove (each of size 1).
        axes: Vec<isize>,
    },
    /// Insert size-1 axes.
    Unsqueeze {
        /// Their positions in the output.
        axes: Vec<isize>,
    },
    /// Permute axes.
    Transpose {
        /// Output axis `i` is input axis `perm[i]`.
        perm: Vec<usize>,
    },
    /// Broadcast to a larger shape.
    Expand {
        /// The target shape; `-1` keeps the input's size.
        shape: Vec<ShapeEntry>,
    },
    /// Join inputs along an axis.
    Concat {
        /// The axis.
        axis: isize,
    },
    /// Cut the input into consecutive parts along an axis, one per output.
    Split {
        /// The axis.
        axis: isize,
        /// Part sizes; `None` splits into equal parts.
        sizes: Option<Vec<usize>>,
    },
    /// NumPy `start:end:step` slices on some axes.
    Slice {
        /// Start per sliced axis.
        starts: Vec<i64>,
        /// End per sliced axis.
        ends: Vec<i64>,
        /// The sliced axes.
        axes: Vec<isize>,
        /// Step per sliced axis (non-zero).
        steps: Vec<i64>,
    },
    /// `take` along an axis with integer indices.
    Gather {
        /// The axis.
        axis: isize,
    },
    /// Pad every axis.
    Pad {
        /// `[before, after]` per axis.
        pads: Vec<[usize; 2]>,
        /// How new elements are filled.
        mode: PadKind,
        /// The fill value for constant mode.
        value: f32,
    },
    /// The input itself.
    Identity,
    /// A reduction over some axes.
    Reduce {
        /// What is computed.
        kind: ReduceKind,
        /// The axes; `None` reduces all.
        axes: Option<Vec<isize>>,
        /// Keep reduced axes as size 1.
        keepdims: bool,
    },
    /// Index of the largest or smallest element along an axis (`I64`).
    ArgReduce {
        /// Largest (`true`) or smallest.
        max: bool,
        /// The axis.
        axis: isize,
        /// Keep the axis as size 1.
        keepdims: bool,
    },
    /// Inclusive running sum along an axis.
    CumSum {
        /// The axis.
        axis: isize,
    },
}

/// Max or average pooling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolKind {
    /// The largest element under the window.
    Max,
    /// The mean under the window.
    Avg {
        /// Divide by all taps on input or padding, not just those on input.
        count_include_pad: bool,
    },
}

/// How `upsample_nearest2d` picks its output size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resize {
    /// Integer factors `[h, w]`.
    Scale([usize; 2]),
    /// The output `[H_out, W_out]`.
    Size([usize; 2]),
}

/// An elementwise function of one input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryFn {
    /// `-x`.
    Neg,
    /// `|x|`.
    Abs,
    /// `eˣ`.
    Exp,
    /// Natural logarithm.
    Log,
    /// Square root.
    Sqrt,
    /// `1/√x`.
    Rsqrt,
    /// Hyperbolic tangent.
    Tanh,
    /// `1/(1+e⁻ˣ)`.
    Sigmoid,
    /// `max(x, 0)`.
    Relu,
    /// `x` if positive, else `alpha·x`.
    LeakyRelu(f32),
    /// `x` if positive, else `alpha·(eˣ−1)`.
    Elu(f32),
    /// `ln(1+eˣ)`.
    Softplus,
    /// The error function.
    Erf,
    /// `x·Φ(x)` (exact, erf-based).
    Gelu,
    /// GELU's tanh approximation.
    GeluTanh,
    /// `x·sigmoid(x)`.
    Silu,
    /// Sine.
    Sin,
    /// Cosine.
    Cos,
}

/// An elementwise function of two inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryFn {
    /// `a + b`.
    Add,
    /// `a − b`.
    Sub,
    /// `a · b`.
    Mul,
    /// `a / b`.
    Div,
    /// `aᵇ`.
    Pow,
    /// The larger (NaN propagates).
    Maximum,
    /// The smaller (NaN propagates).
    Minimum,
}

/// An elementwise comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareFn {
    /// `a == b`.
    Equal,
    /// `a != b`.
    NotEqual,
    /// `a < b`.
    Less,
    /// `a <= b`.
    LessEqual,
    /// `a > b`.
    Greater,
    /// `a >= b`.
    GreaterEqual,
}

/// A reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceKind {
    /// Sum.
    Sum,
    /// Mean.
    Mean,
    /// Largest.
    Max,
    /// Smallest.
    Min,
    /// Product.
    Prod,
    /// `Σ(x−mean)² / (n − correction)`.
    Variance {
        /// Delta degrees of freedom.
        correction: usize,
    },
}

/// How `pad` fills new elements (rml-core's `PadMode` without the value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadKind {
    /// The `value` attribute.
    Constant,
    /// Mirror without repeating the edge.
    Reflect,
    /// Repeat the edge.
    Edge,
    /// Wrap around (circular).
    Wrap,
}

/// One entry of a `reshape` or `expand` target shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShapeEntry {
    /// A fixed size.
    Fixed(usize),
    /// A symbol bound by a graph input, such as `N`.
    Symbol(String),
    /// `0` in `reshape`: the input's size on the same axis.
    Copy,
    /// `-1`: inferred (`reshape`) or kept from the input (`expand`).
    Infer,
}

/// How many inputs and outputs an op takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arity {
    /// Inputs that must be present.
    pub required: usize,
    /// Most inputs accepted (`usize::MAX` for any number); positions from
    /// `required` on are optional and may be left out with `""`.
    pub max: usize,
    /// Outputs, or `None` for one or more (`split`).
    pub outputs: Option<usize>,
}

impl Op {
    /// The op's input and output counts.
    pub fn arity(&self) -> Arity {
        let (required, max) = match self {
            Op::MatMul { .. } | Op::Binary(_) | Op::Compare(_) | Op::Gather { .. } => (2, 2),
            Op::Linear
            | Op::Conv1d(_)
            | Op::Conv2d(_)
            | Op::ConvTranspose1d(_)
            | Op::ConvTranspose2d(_) => (2, 3),
            Op::LayerNorm { .. } | Op::GroupNorm { .. } => (1, 3),
            Op::RmsNorm { .. } => (1, 2),
            Op::BatchNorm { .. } => (3, 5),
            Op::Attention { .. } => (3, 4),
            Op::Where => (3, 3),
            Op::Concat { .. } => (1, usize::MAX),
            _ => (1, 1),
        };
        let outputs = match self {
            Op::Split { .. } => None,
            _ => Some(1),
        };
        Arity {
            required,
            max,
            outputs,
        }
    }
}
