//! The feed-forward half of a layer: a gated MLP (`down(act(gate·x) ⊙ up·x)`), or
//! routed experts (softmax router, top-k, optional renormalization, only the chosen
//! experts computed).

use rml_core::ops::softmax::softmax;
use rml_core::{Shape, TensorView, TensorViewMut};

use crate::config::Activation;
use crate::error::{Error, Result};
use crate::linear::{Linear, LinearScratch};
use crate::ops::gated;

/// A gated MLP.
#[derive(Clone, Debug)]
pub struct Mlp {
    /// Gate projection `[ff, hidden]`.
    pub gate: Linear,
    /// Up projection `[ff, hidden]`.
    pub up: Linear,
    /// Down projection `[hidden, ff]`.
    pub down: Linear,
}

impl Mlp {
    /// `out[m × hidden] = down(act(gate·x) ⊙ up·x)`.
    fn forward(
        &self,
        act: Activation,
        x: &[f32],
        m: usize,
        out: &mut [f32],
        s: &mut FfnScratch,
    ) -> Result<()> {
        let ff = self.gate.out_dim();
        s.gate.resize(m * ff, 0.0);
        s.up.resize(m * ff, 0.0);
        Linear::forward_shared(
            [&self.gate, &self.up],
            x,
            m,
            [&mut s.gate, &mut s.up],
            &mut s.lin,
        )?;
        gated(act, &mut s.gate, &s.up);
        self.down.forward(&s.gate, m, out, &mut s.lin)
    }
}

/// Routed experts.
#[derive(Clone, Debug)]
pub struct Moe {
    /// Router `[n_experts, hidden]`.
    pub router: Linear,
    /// The experts.
    pub experts: Vec<Mlp>,
    /// Experts chosen per token.
    pub top_k: usize,
    /// Renormalize the chosen probabilities to sum to 1.
    pub normalize: bool,
}

impl Moe {
    /// Writes the chosen experts of one token and their weights, in expert order,
    /// into `chosen`; `probs` is scratch (both grow only past their capacity).
    pub fn route(
        &self,
        logits: &[f32],
        probs: &mut Vec<f32>,
        chosen: &mut Vec<(usize, f32)>,
    ) -> Result<()> {
        let ctx = || Error::core("router softmax");
        let n = logits.len();
        let shape = Shape::new(&[n]).map_err(ctx())?;
        probs.resize(n, 0.0);
        let lv = TensorView::new(logits, shape).map_err(ctx())?;
        softmax(
            &lv,
            0,
            &mut TensorViewMut::new(probs, shape).map_err(ctx())?,
        )
        .map_err(ctx())?;
        // Top-k by repeated selection: highest probability first, ties to the lower index.
        chosen.clear();
        for _ in 0..self.top_k.min(n) {
            let best = (0..n).filter(|e| !chosen.iter().any(|c| c.0 == *e)).fold(
                None,
                |best: Option<usize>, e| match best {
                    Some(b) if probs[b] >= probs[e] => Some(b),
                    _ => Some(e),
                },
            );
            if let Some(e) = best {
                chosen.push((e, probs[e]));
            }
        }
        if self.normalize {
            let sum: f32 = chosen.iter().map(|c| c.1).sum();
            chosen.iter_mut().for_each(|c| c.1 /= sum);
        }
        chosen.sort_unstable_by_key(|c| c.0);
        Ok(())
    }
}

/// The feed-forward block of one layer.
#[derive(Clone, Debug)]
pub enum Ffn {
    /// One gated MLP.
    Dense(Mlp),
    /// Routed experts.
    Moe(Moe),
}

/// Reusable buffers of [`Ffn::forward`].
#[derive(Clone, Debug, Default)]
pub struct FfnScratch {
    gate: Vec<f32>,
    up: Vec<f32>,
    logits: Vec<f32>,
    expert_out: Vec<f32>,
    probs: Vec<f32>,
    chosen: Vec<(usize, f32)>,
    lin: LinearScratch,
}

impl FfnScratch {
    /// Splits single-row projections across `pool` from now on.
    pub fn set_pool(&mut self, pool: Option<std::sync::Arc<rml_host::ThreadPool>>) {
        self.lin.set_pool(pool);
    }

    /// Buffers for up to `m` rows of width `hidden`, MLPs up to `ff` wide, up to
    /// `n_experts` experts, and the projections' scratch `lin`.
    pub fn with_capacity(
        m: usize,
        hidden: usize,
        ff: usize,
        n_experts: usize,
        lin: LinearScratch,
    ) -> FfnScratch {
        FfnScratch {
            gate: Vec::with_capacity(m * ff),
            up: Vec::with_capacity(m * ff),
            logits: Vec::with_capacity(m * n_experts),
            expert_out: Vec::with_capacity(hidden),
            probs: Vec::with_capacity(n_experts),
            chosen: Vec::with_capacity(n_experts),
            lin,
        }
    }
}

impl Ffn {
    /// `out[m × hidden]` for the rows of `x[m × hidden]`.
    pub fn forward(
        &self,
        act: Activation,
        x: &[f32],
        m: usize,
        out: &mut [f32],
        s: &mut FfnScratch,
    ) -> Result<()> {
        match self {
            Ffn::Dense(mlp) => mlp.forward(act, x, m, out, s),
            Ffn::Moe(moe) => {
                let hidden = moe.router.in_dim();
                let n_experts = moe.router.out_dim();
                s.logits.resize(m * n_experts, 0.0);
                moe.router.forward(x, m, &mut s.logits, &mut s.lin)?;
                let mut expert_out = std::mem::take(&mut s.expert_out);
                let mut chosen = std::mem::take(&mut s.chosen);
                expert_out.resize(hidden, 0.0);
                for t in 0..m {
                    let row = &x[t * hidden..(t + 1) * hidden];
                    let o = &mut out[t * hidden..(t + 1) * hidden];
                    o.fill(0.0);
                    moe.route(
                        &s.logits[t * n_experts..(t + 1) * n_experts],
                        &mut s.probs,
                        &mut chosen,
                    )?;
                    for &(e, w) in &chosen {
                        moe.experts[e].forward(act, row, 1, &mut expert_out, s)?;
                        for (oi, ei) in o.iter_mut().zip(&expert_out) {
                            *oi += w * ei;
                        }
                    }
                }
                s.expert_out = expert_out;
                s.chosen = chosen;
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moe(top_k: usize, normalize: bool) -> Moe {
        let zero = |o, i| Linear::from_f32(vec![0.0; o * i], None, o, i);
        Moe {
            router: zero(4, 2),
            experts: (0..4)
                .map(|_| Mlp {
                    gate: zero(2, 2),
                    up: zero(2, 2),
                    down: zero(2, 2),
                })
                .collect(),
            top_k,
            normalize,
        }
    }

    #[test]
    fn routing_picks_the_top_k_and_renormalizes() {
        let logits = [0.0, 2.0, 1.0, 2.0];
        let (mut probs, mut chosen) = (Vec::new(), Vec::new());
        moe(2, true)
            .route(&logits, &mut probs, &mut chosen)
            .unwrap();
        assert_eq!(chosen.iter().map(|c| c.0).collect::<Vec<_>>(), [1, 3]);
        assert!((chosen[0].1 - 0.5).abs() < 1e-6 && (chosen[1].1 - 0.5).abs() < 1e-6);
        moe(1, false)
            .route(&logits, &mut probs, &mut chosen)
            .unwrap();
        assert_eq!(chosen.len(), 1);
        assert_eq!(chosen[0].0, 1, "ties go to the lower expert index");
        assert!(chosen[0].1 < 0.5);
    }
}
