//! The tensors of a Hugging Face checkpoint in GGUF form: every [`Role`] the config
//! implies, renamed with [`Role::name`] (the decoder's own HF ⇄ GGUF map), with the
//! layout changes llama.cpp's converter makes:
//!
//! * Q and K rows (weights and biases) permuted for adjacent-pair RoPE in `llama`-arch
//!   files (Llama, Mistral, Mixtral) — [`permute_qk`];
//! * Gemma norms stored as `1 + w`;
//! * per-expert projections stacked into `ffn_{gate,up,down}_exps` (`[experts, rows,
//!   cols]`);
//! * Phi-3's fused `qkv_proj` / `gate_up_proj` kept fused (`attn_qkv`, `ffn_up`).
//!
//! Values are produced one tensor at a time as f32 ([`HfTensor::values`]), so a
//! conversion holds one source tensor in memory beside its output.

use crate::config::{Config, Family};
use crate::error::{Error, Result};
use crate::weights::transform::{permute_qk, to_f32};
use crate::weights::{Convention, Part, Role, SafetensorsSource, WeightSource};

/// How a GGUF tensor's values are made.
#[derive(Clone, Debug)]
enum Make {
    /// One source tensor, maybe transformed.
    Role(Role, Change),
    /// Experts stacked in order.
    Stack(Vec<Role>),
    /// Given values (rope factors).
    Values(Vec<f32>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    None,
    /// Rows permuted for adjacent-pair RoPE, with this many heads.
    Permute(usize),
    /// Gemma: `w` becomes `1 + w`.
    PlusOne,
}

/// One tensor of the GGUF output.
#[derive(Clone, Debug)]
pub struct HfTensor {
    /// Its GGUF name.
    pub name: String,
    /// Its shape, outermost first (row-major; GGUF dims are the reverse).
    pub shape: Vec<usize>,
    make: Make,
}

/// Every tensor of the GGUF file for `c` from the checkpoint `src`, in llama.cpp's
/// order (embedding, layers, output norm, output), plus the `extra` f32 tensors.
pub fn hf_tensors(
    c: &Config,
    src: &SafetensorsSource,
    extra: Vec<(String, Vec<f32>)>,
) -> Result<Vec<HfTensor>> {
    let family = c.family;
    let permuted = matches!(family, Family::Llama | Family::Mistral | Family::Mixtral);
    let gemma = family.is_gemma();
    let mut out = Vec::new();
    let add = |out: &mut Vec<HfTensor>, role: Role, change: Change, required: bool| -> Result<()> {
        let hf = role.name(family, Convention::HuggingFace);
        match src.tensor(&hf)? {
            Some(t) => {
                out.push(HfTensor {
                    name: role.name(family, Convention::Gguf),
                    shape: t.dims().to_vec(),
                    make: Make::Role(role, change),
                });
                Ok(())
            }
            None if required => Err(Error::MissingTensor { name: hf }),
            None => Ok(()),
        }
    };
    let norm = if gemma { Change::PlusOne } else { Change::None };
    add(&mut out, Role::Embed, Change::None, true)?;
    for l in 0..c.n_layers {
        add(&mut out, Role::AttnNorm(l), norm, true)?;
        if family == Family::Phi3 {
            add(&mut out, Role::Qkv(l), Change::None, true)?;
        } else {
            for part in [Part::Weight, Part::Bias] {
                let weight = part == Part::Weight;
                let (q, k) = if permuted {
                    (Change::Permute(c.n_heads), Change::Permute(c.n_kv_heads))
                } else {
                    (Change::None, Change::None)
                };
                add(&mut out, Role::Q(l, part), q, weight)?;
                add(&mut out, Role::K(l, part), k, weight)?;
                add(&mut out, Role::V(l, part), Change::None, weight)?;
            }
        }
        add(&mut out, Role::O(l, Part::Weight), Change::None, true)?;
        add(&mut out, Role::O(l, Part::Bias), Change::None, false)?;
        if c.qk_norm {
            add(&mut out, Role::QNorm(l), norm, true)?;
            add(&mut out, Role::KNorm(l), norm, true)?;
        }
        if c.sandwich_norms {
            add(&mut out, Role::PostAttnNorm(l), norm, true)?;
        }
        add(&mut out, Role::FfnNorm(l), norm, true)?;
        if c.sandwich_norms {
            add(&mut out, Role::PostFfnNorm(l), norm, true)?;
        }
        match &c.moe {
            Some(moe) if c.moe_layers[l] => {
                add(&mut out, Role::Router(l), Change::None, true)?;
                let n = moe.n_experts;
                for make in [Role::ExpertGate, Role::ExpertUp, Role::ExpertDown] {
                    out.push(stacked(src, family, (0..n).map(|e| make(l, e)).collect())?);
                }
            }
            _ if family == Family::Phi3 => {
                add(&mut out, Role::GateUp(l), Change::None, true)?;
                add(&mut out, Role::Down(l), Change::None, true)?;
            }
            _ => {
                add(&mut out, Role::Gate(l), Change::None, true)?;
                add(&mut out, Role::Up(l), Change::None, true)?;
                add(&mut out, Role::Down(l), Change::None, true)?;
            }
        }
    }
    add(&mut out, Role::OutputNorm, norm, true)?;
    if !c.tie_embeddings {
        add(&mut out, Role::Output, Change::None, true)?;
    }
    for (name, values) in extra {
        out.push(HfTensor {
            name,
            shape: vec![values.len()],
            make: Make::Values(values),
        });
    }
    Ok(out)
}

/// The stacked tensor of one expert projection over all experts.
fn stacked(src: &SafetensorsSource, family: Family, roles: Vec<Role>) -> Result<HfTensor> {
    let first = roles[0].name(family, Convention::HuggingFace);
    let t = src
        .tensor(&first)?
        .ok_or(Error::MissingTensor { name: first })?;
    let mut shape = vec![roles.len()];
    shape.extend_from_slice(t.dims());
    Ok(HfTensor {
        name: roles[0].name(family, Convention::Gguf),
        shape,
        make: Make::Stack(roles),
    })
}

impl HfTensor {
    /// The GGUF dims (ggml order: the row length first).
    pub fn dims(&self) -> Vec<u64> {
        self.shape.iter().rev().map(|&d| d as u64).collect()
    }

    /// The tensor's values in the GGUF layout, as f32.
    pub fn values(&self, c: &Config, src: &SafetensorsSource) -> Result<Vec<f32>> {
        let read = |role: Role| -> Result<Vec<f32>> {
            let name = role.name(c.family, Convention::HuggingFace);
            let t = src
                .tensor(&name)?
                .ok_or_else(|| Error::MissingTensor { name: name.clone() })?;
            to_f32(&name, &t)
        };
        Ok(match &self.make {
            Make::Values(v) => v.clone(),
            Make::Stack(roles) => {
                let mut all = Vec::new();
                for &role in roles {
                    let part = read(role)?;
                    if part.len() * roles.len() != self.shape.iter().product::<usize>() {
                        return Err(Error::TensorShape {
                            name: role.name(c.family, Convention::HuggingFace),
                            expected: self.shape[1..].to_vec(),
                            got: vec![part.len()],
                        });
                    }
                    all.extend(part);
                }
                all
            }
            Make::Role(role, change) => {
                let mut v = read(*role)?;
                match change {
                    Change::None => {}
                    Change::PlusOne => v.iter_mut().for_each(|x| *x += 1.0),
                    Change::Permute(heads) => {
                        let rows = self.shape[0];
                        let cols = v.len() / rows.max(1);
                        if rows != heads * c.head_dim {
                            return Err(Error::TensorShape {
                                name: role.name(c.family, Convention::HuggingFace),
                                expected: vec![heads * c.head_dim],
                                got: self.shape.clone(),
                            });
                        }
                        v = permute_qk(&v, *heads, c.head_dim, cols);
                    }
                }
                v
            }
        })
    }
}
