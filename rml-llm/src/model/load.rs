//! Building a [`Model`] from a [`Config`] and a [`WeightSource`]: every tensor
//! fetched by role, shape-checked, converted to f32, and adapted to the decoder
//! (Gemma `1 + w` norms from Hugging Face files, fused projections split, tied
//! output, GGUF `rope_freqs` divisors, rope pairing chosen by convention).

use std::path::Path;

use rml_host::Tensor;

use super::{Layer, Model};
use crate::attention::AttentionSpec;
use crate::config::{Config, Family, LayerKind, RopeScaling};
use crate::error::{Error, Result};
use crate::ffn::{Ffn, Mlp, Moe};
use crate::linear::{Linear, Matrix};
use crate::rope::{Rope, RopeLayout};
use crate::weights::transform::to_f32;
use crate::weights::{Convention, GgufSource, Part, Role, SafetensorsSource, WeightSource};

/// How [`Model::load_with`] treats the weights.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Convert quantized projection weights to f32 at load instead of running the
    /// quantized dot products on them.
    pub dequantize: bool,
}

/// Fetches tensors by role in the source's convention.
struct Fetch<'a> {
    src: &'a dyn WeightSource,
    family: Family,
    convention: Convention,
    keep_quantized: bool,
}

impl Fetch<'_> {
    fn raw(&self, role: Role) -> Result<Option<(String, Tensor)>> {
        let name = role.name(self.family, self.convention);
        Ok(self.src.tensor(&name)?.map(|t| (name, t)))
    }

    /// The tensor of `role` with shape `dims`, or `None` when absent.
    fn checked(&self, role: Role, dims: &[usize]) -> Result<Option<(String, Tensor)>> {
        let Some((name, t)) = self.raw(role)? else {
            return Ok(None);
        };
        if t.dims() != dims {
            return Err(Error::TensorShape {
                name,
                expected: dims.to_vec(),
                got: t.dims().to_vec(),
            });
        }
        Ok(Some((name, t)))
    }

    fn optional(&self, role: Role, dims: &[usize]) -> Result<Option<Vec<f32>>> {
        self.checked(role, dims)?
            .map(|(name, t)| to_f32(&name, &t))
            .transpose()
    }

    /// A projection weight (kept quantized when allowed) of shape `dims`.
    fn matrix(&self, role: Role, dims: &[usize]) -> Result<Matrix> {
        let (name, t) = self
            .checked(role, dims)?
            .ok_or_else(|| Error::MissingTensor {
                name: role.name(self.family, self.convention),
            })?;
        Matrix::from_tensor(&name, &t, self.keep_quantized)
    }

    fn required(&self, role: Role, dims: &[usize]) -> Result<Vec<f32>> {
        self.optional(role, dims)?
            .ok_or_else(|| Error::MissingTensor {
                name: role.name(self.family, self.convention),
            })
    }

    /// A norm weight as the decoder uses it (`x̂ · w`): Hugging Face Gemma files
    /// store `w − 1`.
    fn norm(&self, role: Role, n: usize) -> Result<Vec<f32>> {
        let mut w = self.required(role, &[n])?;
        if self.family.is_gemma() && self.convention == Convention::HuggingFace {
            w.iter_mut().for_each(|v| *v += 1.0);
        }
        Ok(w)
    }

    fn linear(&self, role: Role, out: usize, inp: usize) -> Result<Linear> {
        Ok(Linear::new(self.matrix(role, &[out, inp])?, None, out, inp))
    }

    fn projection(
        &self,
        layer: usize,
        make: fn(usize, Part) -> Role,
        out: usize,
        inp: usize,
        bias: bool,
    ) -> Result<Linear> {
        let w = self.matrix(make(layer, Part::Weight), &[out, inp])?;
        let b = if bias {
            Some(self.required(make(layer, Part::Bias), &[out])?)
        } else {
            self.optional(make(layer, Part::Bias), &[out])?
        };
        Ok(Linear::new(w, b, out, inp))
    }

    fn mlp(&self, gate: Role, up: Role, down: Role, ff: usize, hidden: usize) -> Result<Mlp> {
        Ok(Mlp {
            gate: self.linear(gate, ff, hidden)?,
            up: self.linear(up, ff, hidden)?,
            down: self.linear(down, hidden, ff)?,
        })
    }
}

impl Model {
    /// Opens a model: a `.gguf` file (configuration from its metadata), or a Hugging
    /// Face directory with `config.json` and `model.safetensors` (or a sharded set).
    pub fn open(path: impl AsRef<Path>) -> Result<Model> {
        let path = path.as_ref();
        if path.is_dir() {
            let config = Config::from_hf_dir(path)?;
            return Model::load(config, &SafetensorsSource::open(path)?);
        }
        let src = GgufSource::open(path)?;
        Model::load(Config::from_metadata(&src)?, &src)
    }

    /// Loads every weight `config` implies from `src`, keeping quantized
    /// projections quantized.
    pub fn load(config: Config, src: &dyn WeightSource) -> Result<Model> {
        Model::load_with(config, src, LoadOptions::default())
    }

    /// [`Model::load`] with options.
    pub fn load_with(
        mut config: Config,
        src: &dyn WeightSource,
        options: LoadOptions,
    ) -> Result<Model> {
        let f = Fetch {
            src,
            family: config.family,
            convention: src.convention(),
            keep_quantized: !options.dequantize,
        };
        let c = &config;
        let (vocab, hidden) = (c.vocab_size, c.hidden_size);
        // The table stays in the file's type (no f32 copy); lookups dequantize
        // one row per token, and a tied output projection runs on it as stored.
        let embed = f.linear(Role::Embed, vocab, hidden)?;
        let output_norm = f.norm(Role::OutputNorm, hidden)?;
        let output = if c.tie_embeddings {
            None
        } else {
            match f.checked(Role::Output, &[vocab, hidden])? {
                Some((name, t)) => Some(Linear::new(
                    Matrix::from_tensor(&name, &t, f.keep_quantized)?,
                    None,
                    vocab,
                    hidden,
                )),
                // GGUF drops `output.weight` when the embeddings are tied.
                None if f.convention == Convention::Gguf => None,
                None => {
                    return Err(Error::MissingTensor {
                        name: Role::Output.name(c.family, f.convention),
                    });
                }
            }
        };
        let layers = (0..c.n_layers)
            .map(|l| load_layer(&f, c, l))
            .collect::<Result<Vec<_>>>()?;
        if f.convention == Convention::Gguf
            && let Some(div) = f.optional_any("rope_freqs.weight")?
        {
            config.rope.scaling = RopeScaling::Divisors(div);
        }
        if let RopeScaling::LongRope { short, long, .. } = &mut config.rope.scaling
            && short.is_empty()
        {
            // GGUF: the factors are tensors.
            for (name, factors) in [
                ("rope_factors_short.weight", short),
                ("rope_factors_long.weight", long),
            ] {
                *factors = f
                    .optional_any(name)?
                    .ok_or_else(|| Error::MissingTensor { name: name.into() })?;
            }
        }
        if let RopeScaling::LongRope { short, long, .. } = &config.rope.scaling {
            let half = config.rope.rotary_dim / 2;
            if short.len() != half || long.len() != half {
                return Err(Error::Input(format!(
                    "LongRoPE needs {half} short and long factors (rotary dim {}), got {} and {}",
                    config.rope.rotary_dim,
                    short.len(),
                    long.len()
                )));
            }
        }
        let layout = match (f.convention, config.family) {
            (Convention::Gguf, Family::Llama | Family::Mistral | Family::Mixtral) => {
                RopeLayout::Adjacent
            }
            _ => RopeLayout::RotateHalf,
        };
        let rope = Rope::new(&config.rope, config.head_dim, layout);
        let local_rope = config
            .local_rope
            .as_ref()
            .map(|r| Rope::new(r, config.head_dim, layout));
        Ok(Model {
            config,
            embed,
            output_norm,
            output,
            layers,
            rope,
            local_rope,
        })
    }
}

impl Fetch<'_> {
    /// A tensor by literal name, any shape, as f32.
    fn optional_any(&self, name: &str) -> Result<Option<Vec<f32>>> {
        self.src.tensor(name)?.map(|t| to_f32(name, &t)).transpose()
    }
}

fn load_layer(f: &Fetch<'_>, c: &Config, l: usize) -> Result<Layer> {
    let (hidden, hd) = (c.hidden_size, c.head_dim);
    let (q_dim, kv_dim) = (c.q_dim(), c.kv_dim());
    let (q, k, v) = if c.family == Family::Phi3 {
        let fused = f.matrix(Role::Qkv(l), &[q_dim + 2 * kv_dim, hidden])?;
        let mut parts = fused
            .split_rows(hidden, &[q_dim, kv_dim, kv_dim])?
            .into_iter();
        let mut next = |rows| {
            let part = parts.next().unwrap_or(Matrix::from_f32(Vec::new()));
            Linear::new(part, None, rows, hidden)
        };
        (next(q_dim), next(kv_dim), next(kv_dim))
    } else {
        (
            f.projection(l, Role::Q, q_dim, hidden, c.qkv_bias)?,
            f.projection(l, Role::K, kv_dim, hidden, c.qkv_bias)?,
            f.projection(l, Role::V, kv_dim, hidden, c.qkv_bias)?,
        )
    };
    let o = f.projection(l, Role::O, hidden, q_dim, c.o_bias)?;
    let (q_norm, k_norm) = if c.qk_norm {
        (
            Some(f.norm(Role::QNorm(l), hd)?),
            Some(f.norm(Role::KNorm(l), hd)?),
        )
    } else {
        (None, None)
    };
    let sandwich = |role| c.sandwich_norms.then(|| f.norm(role, hidden)).transpose();
    let ffn = if c.moe_layers[l] {
        let moe = c
            .moe
            .as_ref()
            .ok_or_else(|| Error::Input("MoE layer without MoE config".into()))?;
        let ff = moe.expert_intermediate;
        let experts = if f.convention == Convention::Gguf {
            stacked_experts(f, l, moe.n_experts, ff, hidden)?
        } else {
            (0..moe.n_experts)
                .map(|e| {
                    f.mlp(
                        Role::ExpertGate(l, e),
                        Role::ExpertUp(l, e),
                        Role::ExpertDown(l, e),
                        ff,
                        hidden,
                    )
                })
                .collect::<Result<_>>()?
        };
        Ffn::Moe(Moe {
            router: f.linear(Role::Router(l), moe.n_experts, hidden)?,
            experts,
            top_k: moe.top_k,
            normalize: moe.normalize_top_k,
        })
    } else if c.family == Family::Phi3 {
        let ff = c.intermediate_size;
        let fused = f.matrix(Role::GateUp(l), &[2 * ff, hidden])?;
        let mut parts = fused.split_rows(hidden, &[ff, ff])?.into_iter();
        let mut next = || {
            Linear::new(
                parts.next().unwrap_or(Matrix::from_f32(Vec::new())),
                None,
                ff,
                hidden,
            )
        };
        Ffn::Dense(Mlp {
            gate: next(),
            up: next(),
            down: f.linear(Role::Down(l), hidden, ff)?,
        })
    } else {
        Ffn::Dense(f.mlp(
            Role::Gate(l),
            Role::Up(l),
            Role::Down(l),
            c.intermediate_size,
            hidden,
        )?)
    };
    let kind = c.layer_kind(l);
    Ok(Layer {
        attn_norm: f.norm(Role::AttnNorm(l), hidden)?,
        q,
        k,
        v,
        o,
        q_norm,
        k_norm,
        post_attn_norm: sandwich(Role::PostAttnNorm(l))?,
        ffn_norm: f.norm(Role::FfnNorm(l), hidden)?,
        post_ffn_norm: sandwich(Role::PostFfnNorm(l))?,
        ffn,
        attention: AttentionSpec {
            n_heads: c.n_heads,
            n_kv_heads: c.n_kv_heads,
            head_dim: hd,
            scale: c.query_scale,
            softcap: c.attn_softcap,
            window: (kind == LayerKind::Sliding)
                .then_some(c.sliding_window)
                .flatten(),
        },
        local_rope: kind == LayerKind::Sliding,
    })
}

/// GGUF experts: one `[n_experts, rows, cols]` tensor per projection
/// (`ffn_gate_exps`, `ffn_up_exps`, `ffn_down_exps`), split into per-expert MLPs;
/// older Mixtral files name each expert (`blk.N.ffn_gate.E.weight`).
fn stacked_experts(
    f: &Fetch<'_>,
    l: usize,
    n: usize,
    ff: usize,
    hidden: usize,
) -> Result<Vec<Mlp>> {
    let split = |make: fn(usize, usize) -> Role, rows: usize, cols: usize| -> Result<Vec<Matrix>> {
        if f.raw(make(l, 0))?.is_some() {
            return f
                .matrix(make(l, 0), &[n, rows, cols])?
                .split_rows(cols, &vec![rows; n]);
        }
        (0..n)
            .map(|e| {
                let name = make(l, e).gguf_per_expert_name().unwrap_or_default();
                let t = f.src.tensor(&name)?.ok_or(Error::MissingTensor {
                    name: make(l, 0).name(f.family, f.convention),
                })?;
                if t.dims() != [rows, cols] {
                    return Err(Error::TensorShape {
                        name,
                        expected: vec![rows, cols],
                        got: t.dims().to_vec(),
                    });
                }
                Matrix::from_tensor(&name, &t, f.keep_quantized)
            })
            .collect()
    };
    let gates = split(Role::ExpertGate, ff, hidden)?;
    let ups = split(Role::ExpertUp, ff, hidden)?;
    let downs = split(Role::ExpertDown, hidden, ff)?;
    Ok(gates
        .into_iter()
        .zip(ups)
        .zip(downs)
        .map(|((g, u), d)| Mlp {
            gate: Linear::new(g, None, ff, hidden),
            up: Linear::new(u, None, ff, hidden),
            down: Linear::new(d, None, hidden, ff),
        })
        .collect())
}
