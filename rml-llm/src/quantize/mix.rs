//! llama.cpp's K-quant mixes (`Q3_K_M`, `Q4_K_S`, `Q4_K_M`, `Q5_K_S`, `Q5_K_M`): the
//! per-tensor types `llama-quantize` picks for them (the rules of its
//! `llama_tensor_get_type`, restated for the tensors rml's families have):
//!
//! * `output.weight`, and `token_embd.weight` when there is no `output.weight`
//!   (tied embeddings), get Q6_K (Q8_0 if its rows are not whole blocks of the mix's
//!   base type). An untied `token_embd.weight` keeps the base type.
//! * `attn_v` (also a fused `attn_qkv`; counted in layer order as llama.cpp does):
//!   Q3_K_M → Q5_K for the first two, Q4_K after; Q4_K_M and Q5_K_M → Q6_K where
//!   [`use_more_bits`] holds; Q4_K_S → Q5_K for the first four. A 70B Llama (80
//!   layers, grouped-query attention) raises Q3_K/Q4_K to Q5_K; a model of 8 experts
//!   takes Q8_0 for `attn_v` and `attn_k`.
//! * `ffn_down` (the layer read from `blk.N.`): Q3_K_M → Q5_K in the first 1/16 of
//!   the layers, Q4_K after; Q4_K_M and Q5_K_M → Q6_K where [`use_more_bits`] holds;
//!   Q4_K_S → Q5_K in the first 1/8.
//! * `attn_output`: Q3_K_M → Q4_K; with 8 experts, Q3_K_M, Q4_K_S and Q4_K_M → Q5_K.
//! * Everything else quantized takes the base type (Q3_K, Q4_K or Q5_K).
//!
//! The row-length fallback of [`super::choose_type`] then applies as for plain types.

use rml_core::DType;
use rml_host::formats::gguf::OwnedValue;

/// One of llama.cpp's K-quant file types with a per-tensor mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mix {
    /// `Q3_K_M`: Q3_K, with Q4_K/Q5_K for `attn_v`, `ffn_down`, `attn_output`.
    Q3KM,
    /// `Q4_K_S`: Q4_K, with Q5_K for the first `attn_v` and `ffn_down` layers.
    Q4KS,
    /// `Q4_K_M`: Q4_K, with Q6_K for half the `attn_v` and `ffn_down` layers.
    Q4KM,
    /// `Q5_K_S`: Q5_K (Q6_K output).
    Q5KS,
    /// `Q5_K_M`: Q5_K, with Q6_K for half the `attn_v` and `ffn_down` layers.
    Q5KM,
}

impl Mix {
    /// Every mix.
    pub const ALL: [Mix; 5] = [Mix::Q3KM, Mix::Q4KS, Mix::Q4KM, Mix::Q5KS, Mix::Q5KM];

    /// llama.cpp's name (`Q4_K_M`, …).
    pub fn name(self) -> &'static str {
        match self {
            Mix::Q3KM => "Q3_K_M",
            Mix::Q4KS => "Q4_K_S",
            Mix::Q4KM => "Q4_K_M",
            Mix::Q5KS => "Q5_K_S",
            Mix::Q5KM => "Q5_K_M",
        }
    }

    /// The mix named `name` (any case).
    pub fn parse(name: &str) -> Option<Mix> {
        Mix::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name))
    }

    /// The type of the tensors no rule singles out.
    pub fn base(self) -> DType {
        match self {
            Mix::Q3KM => DType::Q3K,
            Mix::Q4KS | Mix::Q4KM => DType::Q4K,
            Mix::Q5KS | Mix::Q5KM => DType::Q5K,
        }
    }

    /// llama.cpp's `LLAMA_FTYPE` value.
    pub fn file_type(self) -> u32 {
        match self {
            Mix::Q3KM => 12,
            Mix::Q4KS => 14,
            Mix::Q4KM => 15,
            Mix::Q5KS => 16,
            Mix::Q5KM => 17,
        }
    }
}

/// llama.cpp's choice of layers that get more bits: the first and last eighth, and
/// every third layer in between.
pub fn use_more_bits(layer: usize, layers: usize) -> bool {
    layer < layers / 8 || layer >= 7 * layers / 8 || (layer as i64 - (layers / 8) as i64) % 3 == 2
}

/// What the mix rules need to know about a model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelShape {
    /// `general.architecture`.
    pub arch: String,
    /// `{arch}.block_count`.
    pub layers: usize,
    /// `{arch}.expert_count` (0 for a dense model).
    pub experts: usize,
    /// `{arch}.attention.head_count` and `head_count_kv`, when scalars.
    pub heads: Option<(usize, usize)>,
    /// Whether the file has an `output.weight` (no: tied embeddings).
    pub has_output: bool,
    /// How many `attn_v`-like tensors the file has.
    pub attn_v_count: usize,
}

impl ModelShape {
    /// Reads the shape from GGUF `metadata` and the file's tensor `names`.
    pub fn new<'a>(
        metadata: &[(String, OwnedValue)],
        names: impl IntoIterator<Item = &'a str>,
    ) -> ModelShape {
        let get = |key: &str| metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        let arch = match get("general.architecture") {
            Some(OwnedValue::String(a)) => a.clone(),
            _ => String::new(),
        };
        let int = |suffix: &str| get(&format!("{arch}.{suffix}")).and_then(integer);
        let mut shape = ModelShape {
            layers: int("block_count").unwrap_or(0),
            experts: int("expert_count").unwrap_or(0),
            heads: int("attention.head_count").zip(int("attention.head_count_kv")),
            arch,
            ..ModelShape::default()
        };
        for name in names {
            shape.has_output |= name == "output.weight";
            shape.attn_v_count += usize::from(is_attn_v(name));
        }
        shape
    }
}

/// A scalar integer metadata value.
fn integer(v: &OwnedValue) -> Option<usize> {
    match *v {
        OwnedValue::U8(x) => Some(x.into()),
        OwnedValue::U16(x) => Some(x.into()),
        OwnedValue::U32(x) => usize::try_from(x).ok(),
        OwnedValue::U64(x) => usize::try_from(x).ok(),
        OwnedValue::I8(x) => usize::try_from(x).ok(),
        OwnedValue::I16(x) => usize::try_from(x).ok(),
        OwnedValue::I32(x) => usize::try_from(x).ok(),
        OwnedValue::I64(x) => usize::try_from(x).ok(),
        _ => None,
    }
}

/// The kind of tensor the rules look at, from its name (as llama.cpp matches it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Output,
    TokenEmbd,
    AttnV,
    AttnK,
    AttnOutput,
    FfnDown,
    Other,
}

fn role(name: &str) -> Role {
    match name {
        "output.weight" => Role::Output,
        "token_embd.weight" => Role::TokenEmbd,
        _ if is_attn_v(name) => Role::AttnV,
        _ if name.contains("attn_k.weight") => Role::AttnK,
        _ if name.contains("attn_q.weight") => Role::Other,
        _ if name.contains("attn_output.weight") => Role::AttnOutput,
        _ if name.contains("ffn_up") || name.contains("ffn_gate") => Role::Other,
        _ if name.contains("ffn_down") => Role::FfnDown,
        _ => Role::Other,
    }
}

/// Whether llama.cpp counts `name` among the `attn_v`-like tensors.
pub fn is_attn_v(name: &str) -> bool {
    ["attn_qkv.weight", "attn_kv_b.weight", "attn_v.weight"]
        .iter()
        .any(|p| name.contains(p))
}

/// The layer of a `blk.N.` tensor name.
pub fn layer_of(name: &str) -> Option<usize> {
    let rest = name.strip_prefix("blk.")?;
    rest[..rest.find('.')?].parse().ok()
}

/// The sort key llama.cpp iterates tensors in: by layer (none first), then by name.
pub fn llama_order(name: &str) -> (i64, &str) {
    (layer_of(name).map_or(-1, |l| l as i64), name)
}

impl Mix {
    /// The type `mix` wants for the quantizable tensor `name` whose rows hold `row`
    /// values, `attn_v_index` being its position among the `attn_v`-like tensors in
    /// [`llama_order`] (only read for those). Before the row-length fallback.
    pub fn wanted(self, shape: &ModelShape, name: &str, row: u64, attn_v_index: usize) -> DType {
        let base = self.base();
        let eight_experts = shape.experts == 8;
        match role(name) {
            Role::Output => output_type(base, row),
            Role::TokenEmbd if !shape.has_output => output_type(base, row),
            Role::AttnV => {
                let (i, n) = (attn_v_index, shape.attn_v_count);
                let mut ty = match self {
                    Mix::Q3KM if i < 2 => DType::Q5K,
                    Mix::Q3KM => DType::Q4K,
                    Mix::Q4KM | Mix::Q5KM if use_more_bits(i, n) => DType::Q6K,
                    Mix::Q4KS if i < 4 => DType::Q5K,
                    _ => base,
                };
                if is_70b(shape) && matches!(ty, DType::Q3K | DType::Q4K) {
                    ty = DType::Q5K;
                }
                if eight_experts { DType::Q8_0 } else { ty }
            }
            Role::AttnK if eight_experts => DType::Q8_0,
            Role::FfnDown => {
                let (i, n) = (layer_of(name).unwrap_or(0), shape.layers);
                match self {
                    Mix::Q3KM if i < n / 16 => DType::Q5K,
                    Mix::Q3KM => DType::Q4K,
                    Mix::Q4KM | Mix::Q5KM if use_more_bits(i, n) => DType::Q6K,
                    Mix::Q4KS if i < n / 8 => DType::Q5K,
                    _ => base,
                }
            }
            Role::AttnOutput => match self {
                Mix::Q3KM | Mix::Q4KS | Mix::Q4KM if eight_experts => DType::Q5K,
                Mix::Q3KM => DType::Q4K,
                _ => base,
            },
            _ => base,
        }
    }
}

/// The output projection's type: Q6_K, or Q8_0 when rows are not whole `base` blocks.
fn output_type(base: DType, row: u64) -> DType {
    if row.is_multiple_of(base.block_size() as u64) {
        DType::Q6K
    } else {
        DType::Q8_0
    }
}

/// llama.cpp's 70B Llama: 80 layers with fewer KV heads than query heads.
fn is_70b(shape: &ModelShape) -> bool {
    shape.arch == "llama" && shape.layers == 80 && shape.heads.is_some_and(|(q, kv)| q != kv)
}
