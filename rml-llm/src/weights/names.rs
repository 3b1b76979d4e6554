//! Tensor names in the two conventions: Hugging Face checkpoints and GGUF files.
//!
//! The decoder asks for a [`Role`]; [`Role::name`] spells it for a family and a
//! convention. Names that differ by family on the Hugging Face side (Gemma's four
//! norms, Mixtral's `block_sparse_moe.experts.E.w1`, Phi-3's fused projections) are
//! handled here and nowhere else.

use crate::config::Family;

/// Which naming (and weight-layout) convention a source follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Convention {
    /// Hugging Face safetensors: `model.layers.N.self_attn.q_proj.weight`, Q/K rows
    /// in rotate-half order, Gemma norms stored as `w` (used as `1 + w`).
    HuggingFace,
    /// GGUF: `blk.N.attn_q.weight`, Q/K rows of `llama`-arch files permuted for
    /// adjacent-pair RoPE, Gemma norms stored with the `+1` applied, experts stacked.
    Gguf,
}

/// A tensor the decoder needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Token embedding `[vocab, hidden]`.
    Embed,
    /// Final norm `[hidden]`.
    OutputNorm,
    /// Output projection `[vocab, hidden]` (absent when tied).
    Output,
    /// Norm before attention.
    AttnNorm(usize),
    /// Query projection (weight or bias).
    Q(usize, Part),
    /// Key projection.
    K(usize, Part),
    /// Value projection.
    V(usize, Part),
    /// Fused q/k/v projection (Phi-3).
    Qkv(usize),
    /// Attention output projection.
    O(usize, Part),
    /// Per-head query norm `[head_dim]`.
    QNorm(usize),
    /// Per-head key norm `[head_dim]`.
    KNorm(usize),
    /// Norm after attention (Gemma 2/3).
    PostAttnNorm(usize),
    /// Norm before the MLP.
    FfnNorm(usize),
    /// Norm after the MLP (Gemma 2/3).
    PostFfnNorm(usize),
    /// Dense MLP gate projection.
    Gate(usize),
    /// Dense MLP up projection.
    Up(usize),
    /// Fused gate/up projection (Phi-3): gate rows first.
    GateUp(usize),
    /// Dense MLP down projection.
    Down(usize),
    /// MoE router `[n_experts, hidden]`.
    Router(usize),
    /// One expert's gate projection (layer, expert).
    ExpertGate(usize, usize),
    /// One expert's up projection.
    ExpertUp(usize, usize),
    /// One expert's down projection.
    ExpertDown(usize, usize),
}

/// Weight or bias of a projection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// `.weight`.
    Weight,
    /// `.bias`.
    Bias,
}

impl Part {
    fn suffix(self) -> &'static str {
        match self {
            Part::Weight => "weight",
            Part::Bias => "bias",
        }
    }
}

impl Role {
    /// The tensor's name for `family` in `convention`. GGUF stacks experts into one
    /// tensor per layer (`blk.N.ffn_gate_exps.weight`); for expert roles this returns
    /// that stacked name.
    pub fn name(self, family: Family, convention: Convention) -> String {
        match convention {
            Convention::HuggingFace => self.hf_name(family),
            Convention::Gguf => self.gguf_name(),
        }
    }

    fn hf_name(self, family: Family) -> String {
        let gemma = family.is_gemma();
        let l = |n: usize, rest: &str| format!("model.layers.{n}.{rest}");
        match self {
            Role::Embed => "model.embed_tokens.weight".into(),
            Role::OutputNorm => "model.norm.weight".into(),
            Role::Output => "lm_head.weight".into(),
            Role::AttnNorm(n) => l(n, "input_layernorm.weight"),
            Role::Q(n, p) => l(n, &format!("self_attn.q_proj.{}", p.suffix())),
            Role::K(n, p) => l(n, &format!("self_attn.k_proj.{}", p.suffix())),
            Role::V(n, p) => l(n, &format!("self_attn.v_proj.{}", p.suffix())),
            Role::O(n, p) => l(n, &format!("self_attn.o_proj.{}", p.suffix())),
            Role::Qkv(n) => l(n, "self_attn.qkv_proj.weight"),
            Role::QNorm(n) => l(n, "self_attn.q_norm.weight"),
            Role::KNorm(n) => l(n, "self_attn.k_norm.weight"),
            Role::PostAttnNorm(n) => l(n, "post_attention_layernorm.weight"),
            Role::FfnNorm(n) if gemma => l(n, "pre_feedforward_layernorm.weight"),
            Role::FfnNorm(n) => l(n, "post_attention_layernorm.weight"),
            Role::PostFfnNorm(n) => l(n, "post_feedforward_layernorm.weight"),
            Role::Gate(n) => l(n, "mlp.gate_proj.weight"),
            Role::Up(n) => l(n, "mlp.up_proj.weight"),
            Role::GateUp(n) => l(n, "mlp.gate_up_proj.weight"),
            Role::Down(n) => l(n, "mlp.down_proj.weight"),
            Role::Router(n) if family == Family::Mixtral => l(n, "block_sparse_moe.gate.weight"),
            Role::Router(n) => l(n, "mlp.gate.weight"),
            Role::ExpertGate(n, e) => expert_hf(family, n, e, "w1", "gate_proj"),
            Role::ExpertUp(n, e) => expert_hf(family, n, e, "w3", "up_proj"),
            Role::ExpertDown(n, e) => expert_hf(family, n, e, "w2", "down_proj"),
        }
    }

    fn gguf_name(self) -> String {
        let b = |n: usize, rest: &str| format!("blk.{n}.{rest}");
        match self {
            Role::Embed => "token_embd.weight".into(),
            Role::OutputNorm => "output_norm.weight".into(),
            Role::Output => "output.weight".into(),
            Role::AttnNorm(n) => b(n, "attn_norm.weight"),
            Role::Q(n, p) => b(n, &format!("attn_q.{}", p.suffix())),
            Role::K(n, p) => b(n, &format!("attn_k.{}", p.suffix())),
            Role::V(n, p) => b(n, &format!("attn_v.{}", p.suffix())),
            Role::O(n, p) => b(n, &format!("attn_output.{}", p.suffix())),
            Role::Qkv(n) => b(n, "attn_qkv.weight"),
            Role::QNorm(n) => b(n, "attn_q_norm.weight"),
            Role::KNorm(n) => b(n, "attn_k_norm.weight"),
            Role::PostAttnNorm(n) => b(n, "post_attention_norm.weight"),
            Role::FfnNorm(n) => b(n, "ffn_norm.weight"),
            Role::PostFfnNorm(n) => b(n, "post_ffw_norm.weight"),
            Role::Gate(n) => b(n, "ffn_gate.weight"),
            Role::Up(n) | Role::GateUp(n) => b(n, "ffn_up.weight"),
            Role::Down(n) => b(n, "ffn_down.weight"),
            Role::Router(n) => b(n, "ffn_gate_inp.weight"),
            Role::ExpertGate(n, _) => b(n, "ffn_gate_exps.weight"),
            Role::ExpertUp(n, _) => b(n, "ffn_up_exps.weight"),
            Role::ExpertDown(n, _) => b(n, "ffn_down_exps.weight"),
        }
    }
}

impl Role {
    /// The per-expert GGUF name of an expert role (`blk.N.ffn_gate.E.weight`), as
    /// Mixtral files written before experts were stacked use; `None` for other roles.
    pub fn gguf_per_expert_name(self) -> Option<String> {
        let (layer, expert, kind) = match self {
            Role::ExpertGate(l, e) => (l, e, "ffn_gate"),
            Role::ExpertUp(l, e) => (l, e, "ffn_up"),
            Role::ExpertDown(l, e) => (l, e, "ffn_down"),
            _ => return None,
        };
        Some(format!("blk.{layer}.{kind}.{expert}.weight"))
    }
}

fn expert_hf(family: Family, layer: usize, expert: usize, mixtral: &str, other: &str) -> String {
    if family == Family::Mixtral {
        format!("model.layers.{layer}.block_sparse_moe.experts.{expert}.{mixtral}.weight")
    } else {
        format!("model.layers.{layer}.mlp.experts.{expert}.{other}.weight")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_names_match_the_converter_table() {
        let pairs = [
            (
                Role::Embed,
                "model.embed_tokens.weight",
                "token_embd.weight",
            ),
            (
                Role::Q(3, Part::Weight),
                "model.layers.3.self_attn.q_proj.weight",
                "blk.3.attn_q.weight",
            ),
            (
                Role::O(0, Part::Weight),
                "model.layers.0.self_attn.o_proj.weight",
                "blk.0.attn_output.weight",
            ),
            (
                Role::FfnNorm(1),
                "model.layers.1.post_attention_layernorm.weight",
                "blk.1.ffn_norm.weight",
            ),
            (
                Role::Down(2),
                "model.layers.2.mlp.down_proj.weight",
                "blk.2.ffn_down.weight",
            ),
            (Role::OutputNorm, "model.norm.weight", "output_norm.weight"),
            (Role::Output, "lm_head.weight", "output.weight"),
        ];
        for (role, hf, gguf) in pairs {
            assert_eq!(role.name(Family::Llama, Convention::HuggingFace), hf);
            assert_eq!(role.name(Family::Llama, Convention::Gguf), gguf);
        }
    }

    #[test]
    fn family_specific_hf_names() {
        let hf = Convention::HuggingFace;
        assert_eq!(
            Role::PostAttnNorm(0).name(Family::Gemma2, hf),
            "model.layers.0.post_attention_layernorm.weight"
        );
        assert_eq!(
            Role::FfnNorm(0).name(Family::Gemma2, hf),
            "model.layers.0.pre_feedforward_layernorm.weight"
        );
        assert_eq!(
            Role::ExpertDown(1, 3).name(Family::Mixtral, hf),
            "model.layers.1.block_sparse_moe.experts.3.w2.weight"
        );
        assert_eq!(
            Role::ExpertUp(1, 3).name(Family::Qwen3Moe, hf),
            "model.layers.1.mlp.experts.3.up_proj.weight"
        );
        assert_eq!(
            Role::Router(0).name(Family::Qwen3Moe, hf),
            "model.layers.0.mlp.gate.weight"
        );
    }
}
