//! The feed-forward half of a layer: a gated MLP (`down(act(gate·x) ⊙ up·x)`), or
//! routed experts (softmax router, top-k, optional renormalization, only the chosen
//! experts computed).

use rml_core::ops::softmax::softmax;
use rml_core::{Shape, TensorView, TensorViewMut};

use crate::config::Activation;
use crate::error::{Error, Result};
use crate::linear::Linear;
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
    /// `out[m × hidden] = down(act(gate·x) ⊙ up·x)`; `g`, `u` are scratch.
    fn forward(
        &self,
        act: Activation,
        x: &[f32],
        m: usize,
        out: &mut [f32],
        g: &mut Vec<f32>,
        u: &mut Vec<f32>,
    ) -> Result<()> {
        let ff = self.gate.out_dim();
        g.resize(m * ff, 0.0);
        u.resize(m * ff, 0.0);
        self.gate.forward(x, m, g)?;
        self.up.forward(x, m, u)?;
        gated(act, g, u);
        self.down.forward(g, m, out)
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
    /// The chosen experts of one token and their weights, in expert order.
    pub fn route(&self, logits: &[f32]) -> Result<Vec<(usize, f32)>> {
        let ctx = || Error::core("router softmax");
        let shape = Shape::new(&[logits.len()]).map_err(ctx())?;
        let mut probs = vec![0.0; logits.len()];
        let lv = TensorView::new(logits, shape).map_err(ctx())?;
        softmax(
            &lv,
            0,
            &mut TensorViewMut::new(&mut probs, shape).map_err(ctx())?,
        )
        .map_err(ctx())?;
        let mut order: Vec<usize> = (0..probs.len()).collect();
        // Highest probability first; ties go to the lower expert index.
        order.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
        order.truncate(self.top_k);
        let sum: f32 = order.iter().map(|&e| probs[e]).sum();
        let mut chosen: Vec<(usize, f32)> = order
            .into_iter()
            .map(|e| {
                (
                    e,
                    if self.normalize {
                        probs[e] / sum
                    } else {
                        probs[e]
                    },
                )
            })
            .collect();
        chosen.sort_by_key(|&(e, _)| e);
        Ok(chosen)
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
            Ffn::Dense(mlp) => mlp.forward(act, x, m, out, &mut s.gate, &mut s.up),
            Ffn::Moe(moe) => {
                let hidden = moe.router.in_dim();
                let n_experts = moe.router.out_dim();
                s.logits.resize(m * n_experts, 0.0);
                moe.router.forward(x, m, &mut s.logits)?;
                s.expert_out.resize(hidden, 0.0);
                for t in 0..m {
                    let row = &x[t * hidden..(t + 1) * hidden];
                    let o = &mut out[t * hidden..(t + 1) * hidden];
                    o.fill(0.0);
                    let chosen = moe.route(&s.logits[t * n_experts..(t + 1) * n_experts])?;
                    for (e, w) in chosen {
                        moe.experts[e].forward(
                            act,
                            row,
                            1,
                            &mut s.expert_out,
                            &mut s.gate,
                            &mut s.up,
                        )?;
                        for (oi, ei) in o.iter_mut().zip(&s.expert_out) {
                            *oi += w * ei;
                        }
                    }
                }
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
        let chosen = moe(2, true).route(&logits).unwrap();
        assert_eq!(chosen.iter().map(|c| c.0).collect::<Vec<_>>(), [1, 3]);
        assert!((chosen[0].1 - 0.5).abs() < 1e-6 && (chosen[1].1 - 0.5).abs() < 1e-6);
        let raw = moe(1, false).route(&logits).unwrap();
        assert_eq!(raw.len(), 1);
        assert_eq!(raw[0].0, 1);
        assert!(raw[0].1 < 0.5);
    }
}
