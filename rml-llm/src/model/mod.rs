//! The decoder: one forward pass for every family, steered by the [`Config`]'s hooks
//! (embedding scale, q/k bias and norm, rope layout and bases, sliding layers,
//! soft-caps, sandwich norms, dense or routed MLP, tied output).
//!
//! Per layer: `h = x + post_attn(Attn(n1(x)))`, `x = h + post_ffn(Ffn(n2(h)))`, then
//! `logits = cap(W_out · norm(x))`. Computation is f32 on the `rml-kernels` GEMV and
//! the `rml-core` reference norm/softmax/activation ops; quantized weights run on the
//! `rml-kernels` quantized GEMM (see [`crate::linear`]).

mod load;

pub use load::LoadOptions;

use crate::attention::AttentionSpec;
use crate::config::{Config, LayerKind};
use crate::error::{Error, Result};
use crate::ffn::{Ffn, FfnScratch};
use crate::kv_cache::KvCache;
use crate::linear::Linear;
use crate::ops::{project, rms_norm_in_place, rms_norm_rows, softcap};
use crate::rope::Rope;

/// The weights of one decoder layer.
#[derive(Clone, Debug)]
pub struct Layer {
    attn_norm: Vec<f32>,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    q_norm: Option<Vec<f32>>,
    k_norm: Option<Vec<f32>>,
    post_attn_norm: Option<Vec<f32>>,
    ffn_norm: Vec<f32>,
    post_ffn_norm: Option<Vec<f32>>,
    ffn: Ffn,
    attention: AttentionSpec,
    local_rope: bool,
}

/// A loaded decoder-only model.
#[derive(Clone, Debug)]
pub struct Model {
    config: Config,
    embed: Vec<f32>,
    output_norm: Vec<f32>,
    /// `None` when the output projection is the embedding matrix.
    output: Option<Linear>,
    layers: Vec<Layer>,
    rope: Rope,
    local_rope: Option<Rope>,
}

/// Activations of one forward call.
#[derive(Default)]
struct Scratch {
    x: Vec<f32>,
    h: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    attn: Vec<f32>,
    proj: Vec<f32>,
    norm: Vec<f32>,
    scores: Vec<f32>,
    ffn: FfnScratch,
}

impl Model {
    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Layer `index` (panics past the last layer).
    pub fn layer(&self, index: usize) -> &Layer {
        &self.layers[index]
    }

    /// An empty KV cache for up to `capacity` positions.
    pub fn new_cache(&self, capacity: usize) -> KvCache {
        KvCache::new(self.config.n_layers, self.config.kv_dim(), capacity)
    }

    /// Bytes of parameters held (f32).
    pub fn parameter_bytes(&self) -> usize {
        let vec_bytes = |v: &Option<Vec<f32>>| v.as_ref().map_or(0, |v| v.len() * 4);
        let layers: usize = self
            .layers
            .iter()
            .map(|l| {
                let ffn = match &l.ffn {
                    Ffn::Dense(m) => m.gate.bytes() + m.up.bytes() + m.down.bytes(),
                    Ffn::Moe(moe) => {
                        moe.router.bytes()
                            + moe
                                .experts
                                .iter()
                                .map(|m| m.gate.bytes() + m.up.bytes() + m.down.bytes())
                                .sum::<usize>()
                    }
                };
                (l.attn_norm.len() + l.ffn_norm.len()) * 4
                    + l.q.bytes()
                    + l.k.bytes()
                    + l.v.bytes()
                    + l.o.bytes()
                    + vec_bytes(&l.q_norm)
                    + vec_bytes(&l.k_norm)
                    + vec_bytes(&l.post_attn_norm)
                    + vec_bytes(&l.post_ffn_norm)
                    + ffn
            })
            .sum();
        (self.embed.len() + self.output_norm.len()) * 4
            + self.output.as_ref().map_or(0, Linear::bytes)
            + layers
    }

    /// Runs `tokens` (at positions `cache.len()..`) through the model, appends their
    /// keys and values to `cache`, and returns the logits of every token
    /// (`tokens.len() × vocab`, row-major). One call with many tokens is prefill;
    /// one token per call is decode.
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache) -> Result<Vec<f32>> {
        let c = &self.config;
        let (t, hidden) = (tokens.len(), c.hidden_size);
        cache.reserve(t)?;
        let start = cache.len();
        let mut s = Scratch::default();
        s.x.reserve(t * hidden);
        for &tok in tokens {
            let tok = tok as usize;
            if tok >= c.vocab_size {
                return Err(Error::Input(format!(
                    "token id {tok} is outside the vocabulary of {}",
                    c.vocab_size
                )));
            }
            s.x.extend_from_slice(&self.embed[tok * hidden..(tok + 1) * hidden]);
        }
        if let Some(scale) = c.embed_scale {
            s.x.iter_mut().for_each(|v| *v *= scale);
        }
        for (index, layer) in self.layers.iter().enumerate() {
            self.attention_block(index, layer, t, start, cache, &mut s)?;
            self.ffn_block(layer, t, &mut s)?;
        }
        cache.advance(t);
        s.h.resize(t * hidden, 0.0);
        rms_norm_rows(&s.x, &self.output_norm, c.rms_eps, hidden, &mut s.h)?;
        let mut logits = vec![0.0; t * c.vocab_size];
        match &self.output {
            Some(out) => out.forward(&s.h, t, &mut logits)?,
            None => project(&s.h, t, &self.embed, None, c.vocab_size, &mut logits)?,
        }
        if let Some(cap) = c.final_softcap {
            softcap(&mut logits, cap);
        }
        Ok(logits)
    }

    /// `x += post_attn(o · Attn(rope(q), rope(k), v))` for layer `index`.
    fn attention_block(
        &self,
        index: usize,
        layer: &Layer,
        t: usize,
        start: usize,
        cache: &mut KvCache,
        s: &mut Scratch,
    ) -> Result<()> {
        let c = &self.config;
        let (hidden, hd) = (c.hidden_size, c.head_dim);
        let (q_dim, kv_dim) = (c.q_dim(), c.kv_dim());
        s.h.resize(t * hidden, 0.0);
        rms_norm_rows(&s.x, &layer.attn_norm, c.rms_eps, hidden, &mut s.h)?;
        s.q.resize(t * q_dim, 0.0);
        s.k.resize(t * kv_dim, 0.0);
        s.v.resize(t * kv_dim, 0.0);
        layer.q.forward(&s.h, t, &mut s.q)?;
        layer.k.forward(&s.h, t, &mut s.k)?;
        layer.v.forward(&s.h, t, &mut s.v)?;
        if let (Some(qn), Some(kn)) = (&layer.q_norm, &layer.k_norm) {
            rms_norm_in_place(&mut s.q, qn, c.rms_eps, hd, &mut s.norm)?;
            rms_norm_in_place(&mut s.k, kn, c.rms_eps, hd, &mut s.norm)?;
        }
        let rope = match (&self.local_rope, layer.local_rope) {
            (Some(local), true) => local,
            _ => &self.rope,
        };
        for i in 0..t {
            rope.apply(&mut s.q[i * q_dim..(i + 1) * q_dim], start + i);
            rope.apply(&mut s.k[i * kv_dim..(i + 1) * kv_dim], start + i);
            cache.store(
                index,
                start + i,
                &s.k[i * kv_dim..(i + 1) * kv_dim],
                &s.v[i * kv_dim..(i + 1) * kv_dim],
            );
        }
        let (keys, values) = cache.layer(index, start + t);
        s.attn.resize(t * q_dim, 0.0);
        s.scores.resize(2 * (start + t), 0.0);
        layer
            .attention
            .run(&s.q, keys, values, start, &mut s.attn, &mut s.scores)?;
        s.proj.resize(t * hidden, 0.0);
        layer.o.forward(&s.attn, t, &mut s.proj)?;
        if let Some(w) = &layer.post_attn_norm {
            rms_norm_in_place(&mut s.proj, w, c.rms_eps, hidden, &mut s.norm)?;
        }
        s.x.iter_mut().zip(&s.proj).for_each(|(x, p)| *x += p);
        Ok(())
    }

    /// `x += post_ffn(Ffn(n2(x)))`.
    fn ffn_block(&self, layer: &Layer, t: usize, s: &mut Scratch) -> Result<()> {
        let c = &self.config;
        let hidden = c.hidden_size;
        rms_norm_rows(&s.x, &layer.ffn_norm, c.rms_eps, hidden, &mut s.h)?;
        layer
            .ffn
            .forward(c.activation, &s.h, t, &mut s.proj, &mut s.ffn)?;
        if let Some(w) = &layer.post_ffn_norm {
            rms_norm_in_place(&mut s.proj, w, c.rms_eps, hidden, &mut s.norm)?;
        }
        s.x.iter_mut().zip(&s.proj).for_each(|(x, p)| *x += p);
        Ok(())
    }
}

impl Layer {
    /// The query projection.
    pub fn q(&self) -> &Linear {
        &self.q
    }

    /// Whether this layer attends through a sliding window.
    pub fn kind(&self) -> LayerKind {
        if self.attention.window.is_some() {
            LayerKind::Sliding
        } else {
            LayerKind::Full
        }
    }
}
