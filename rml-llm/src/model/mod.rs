//! The decoder: one forward pass for every family, steered by the [`Config`]'s hooks
//! (embedding scale, q/k bias and norm, rope layout and bases, sliding layers,
//! soft-caps, sandwich norms, dense or routed MLP, tied output).
//!
//! Per layer: `h = x + post_attn(Attn(n1(x)))`, `x = h + post_ffn(Ffn(n2(h)))`, then
//! `logits = cap(W_out · norm(x))`. Computation is f32 on the `rml-kernels` GEMV and
//! the `rml-core` reference norm/softmax/activation ops; quantized weights run on the
//! `rml-kernels` quantized GEMM (see [`crate::linear`]).

mod load;

use std::sync::Arc;

use rml_host::ThreadPool;
use rml_kernels::gemm::{SMALL_M, Weight};

pub use load::LoadOptions;

use crate::attention::{AttentionSpec, DecodeScratch, KvRing};
use crate::config::{Config, LayerKind};
use crate::error::{Error, Result};
use crate::ffn::{Ffn, FfnScratch};
use crate::kv_cache::{KvCache, KvDtype, KvElement, KvSlices};
use crate::linear::{Linear, LinearScratch};
use crate::ops::{rms_norm_in_place, rms_norm_rows, softcap};
use crate::parallel::{Split, for_each_task};
use crate::prefill_attention::{self, PrefillScratch};
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
    /// The token embedding `[vocab, hidden]` in the file's type (quantized blocks
    /// stay quantized); also the output projection when `output` is `None`.
    embed: Linear,
    output_norm: Vec<f32>,
    /// `None` when the output projection is the embedding matrix.
    output: Option<Linear>,
    layers: Vec<Layer>,
    rope: Rope,
    local_rope: Option<Rope>,
}

/// Which tokens' logits a forward call computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logits {
    /// Every token's (`tokens.len() × vocab`).
    All,
    /// Only the last token's (`vocab`): what generation needs after a prefill.
    Last,
}

/// Every activation buffer of a forward call, sized up front by
/// [`Model::workspace`] so that [`Model::forward_with`] does not allocate.
#[derive(Clone, Debug)]
pub struct Workspace {
    max_tokens: usize,
    x: Vec<f32>,
    h: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    attn: Vec<f32>,
    proj: Vec<f32>,
    norm: Vec<f32>,
    decode: DecodeScratch,
    prefill: PrefillScratch,
    lin: LinearScratch,
    logits: Vec<f32>,
    ffn: FfnScratch,
}

impl Workspace {
    /// Splits projections (decode: output features; prefill: token rows) and decode
    /// attention's blocks of positions across `pool`'s threads, or back to the
    /// calling thread only with `None`. Logits do not depend on the thread count.
    /// After the first call (which starts the pool's team), calls allocate nothing on
    /// the calling thread.
    pub fn set_pool(&mut self, pool: Option<Arc<ThreadPool>>) {
        self.lin.set_pool(pool.clone());
        self.ffn.set_pool(pool);
    }

    /// The most tokens one call may take.
    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }
}

impl Model {
    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The token embedding table, `[vocab, hidden]`, kept in the file's type.
    pub fn embedding(&self) -> &Linear {
        &self.embed
    }

    /// The output projection: its own matrix, or the embedding table when the
    /// embeddings are tied.
    pub fn output(&self) -> &Linear {
        self.output.as_ref().unwrap_or(&self.embed)
    }

    /// Layer `index`, if the model has it.
    pub fn layer(&self, index: usize) -> Option<&Layer> {
        self.layers.get(index)
    }

    /// An empty f32 KV cache for up to `capacity` positions.
    pub fn new_cache(&self, capacity: usize) -> KvCache {
        self.new_cache_with(capacity, KvDtype::F32)
    }

    /// An empty KV cache of `dtype` for up to `capacity` positions.
    pub fn new_cache_with(&self, capacity: usize, dtype: KvDtype) -> KvCache {
        KvCache::with_dtype(self.config.n_layers, self.config.kv_dim(), capacity, dtype)
    }

    /// An empty KV cache whose sliding-window layers keep only a ring of
    /// `window + max_block − 1` positions; each call may then add at most
    /// `max_block` tokens.
    pub fn new_windowed_cache(&self, capacity: usize, max_block: usize, dtype: KvDtype) -> KvCache {
        let windows: Vec<Option<usize>> = self.layers.iter().map(|l| l.attention.window).collect();
        KvCache::windowed(self.config.kv_dim(), capacity, &windows, max_block, dtype)
    }

    /// Bytes of parameters held (f32 values and quantized blocks).
    pub fn parameter_bytes(&self) -> usize {
        let norms = |l: &Layer| {
            [&l.q_norm, &l.k_norm, &l.post_attn_norm, &l.post_ffn_norm]
                .iter()
                .map(|v| v.as_ref().map_or(0, Vec::len))
                .sum::<usize>()
                + l.attn_norm.len()
                + l.ffn_norm.len()
        };
        let layers: usize = self
            .layers
            .iter()
            .map(|l| norms(l) * 4 + l.linears().iter().map(|lin| lin.bytes()).sum::<usize>())
            .sum();
        self.embed.bytes()
            + self.output_norm.len() * 4
            + self.output.as_ref().map_or(0, Linear::bytes)
            + layers
    }

    /// Buffers for calls of up to `max_tokens` tokens with up to `max_positions`
    /// positions in the cache.
    pub fn workspace(&self, max_tokens: usize, max_positions: usize) -> Result<Workspace> {
        let c = &self.config;
        let t = max_tokens;
        let wide = c.hidden_size.max(c.q_dim());
        let ff = c
            .moe
            .as_ref()
            .map_or(0, |m| m.expert_intermediate)
            .max(c.intermediate_size);
        let n_experts = c.moe.as_ref().map_or(0, |m| m.n_experts);
        let mut lin = self.output().scratch_need(t)?;
        for l in &self.layers {
            for linear in l.linears() {
                lin = lin.max(linear.scratch_need(t)?);
            }
        }
        Ok(Workspace {
            max_tokens,
            x: Vec::with_capacity(t * c.hidden_size),
            h: Vec::with_capacity(t * c.hidden_size),
            q: Vec::with_capacity(t * c.q_dim()),
            k: Vec::with_capacity(t * c.kv_dim()),
            v: Vec::with_capacity(t * c.kv_dim()),
            attn: Vec::with_capacity(t * c.q_dim()),
            proj: Vec::with_capacity(t * c.hidden_size),
            norm: Vec::with_capacity(t * wide),
            decode: DecodeScratch::with_capacity(c.n_heads, c.head_dim, max_positions),
            prefill: PrefillScratch::with_capacity(t, max_positions, c.head_dim),
            lin: lin.same_room(),
            logits: Vec::with_capacity(t * c.vocab_size),
            ffn: FfnScratch::with_capacity(t, c.hidden_size, ff, n_experts, lin),
        })
    }

    /// Runs `tokens` (at positions `cache.len()..`) through the model, appends their
    /// keys and values to `cache`, and returns the logits of every token
    /// (`tokens.len() × vocab`, row-major). One call with many tokens is prefill;
    /// one token per call is decode. Allocates its buffers; see
    /// [`Model::forward_with`] for the allocation-free form. No tokens give no
    /// logits.
    pub fn forward(&self, tokens: &[u32], cache: &mut KvCache) -> Result<Vec<f32>> {
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        let mut ws = self.workspace(tokens.len(), cache.capacity())?;
        Ok(self
            .forward_with(tokens, cache, &mut ws, Logits::All)?
            .to_vec())
    }

    /// [`Model::forward`] into a [`Workspace`] made by [`Model::workspace`] for at
    /// least `tokens.len()` tokens and the cache's capacity: no allocation. The
    /// logits (of every token, or of the last only) live in the workspace until the
    /// next call.
    pub fn forward_with<'w>(
        &self,
        tokens: &[u32],
        cache: &mut KvCache,
        s: &'w mut Workspace,
        which: Logits,
    ) -> Result<&'w [f32]> {
        let c = &self.config;
        let (t, hidden) = (tokens.len(), c.hidden_size);
        if t == 0 {
            return Err(Error::Input("no tokens to run".into()));
        }
        if t > s.max_tokens {
            return Err(Error::Input(format!(
                "{t} tokens exceed the workspace's {}",
                s.max_tokens
            )));
        }
        cache.reserve(t)?;
        let start = cache.len();
        if let Some(&tok) = tokens.iter().find(|&&tok| tok as usize >= c.vocab_size) {
            return Err(Error::Input(format!(
                "token id {tok} is outside the vocabulary of {}",
                c.vocab_size
            )));
        }
        s.x.resize(t * hidden, 0.0);
        for (&tok, row) in tokens.iter().zip(s.x.chunks_exact_mut(hidden)) {
            self.embed.weight().row_f32(tok as usize, hidden, row)?;
        }
        if let Some(scale) = c.embed_scale {
            s.x.iter_mut().for_each(|v| *v *= scale);
        }
        for (index, layer) in self.layers.iter().enumerate() {
            self.attention_block(index, layer, t, start, cache, s)?;
            self.ffn_block(layer, t, s)?;
        }
        cache.advance(t);
        let rows = match which {
            Logits::All => t,
            Logits::Last => 1,
        };
        let last = &s.x[(t - rows) * hidden..];
        s.h.resize(rows * hidden, 0.0);
        rms_norm_rows(last, &self.output_norm, c.rms_eps, hidden, &mut s.h)?;
        s.logits.resize(rows * c.vocab_size, 0.0);
        self.output()
            .forward(&s.h, rows, &mut s.logits, &mut s.lin)?;
        if let Some(cap) = c.final_softcap {
            softcap(&mut s.logits, cap);
        }
        Ok(&s.logits)
    }

    /// `x += post_attn(o · Attn(rope(q), rope(k), v))` for layer `index`.
    fn attention_block(
        &self,
        index: usize,
        layer: &Layer,
        t: usize,
        start: usize,
        cache: &mut KvCache,
        s: &mut Workspace,
    ) -> Result<()> {
        let c = &self.config;
        let (hidden, hd) = (c.hidden_size, c.head_dim);
        let (q_dim, kv_dim) = (c.q_dim(), c.kv_dim());
        s.h.resize(t * hidden, 0.0);
        rms_norm_rows(&s.x, &layer.attn_norm, c.rms_eps, hidden, &mut s.h)?;
        s.q.resize(t * q_dim, 0.0);
        s.k.resize(t * kv_dim, 0.0);
        s.v.resize(t * kv_dim, 0.0);
        Linear::forward_shared(
            [&layer.q, &layer.k, &layer.v],
            &s.h,
            t,
            [&mut s.q, &mut s.k, &mut s.v],
            &mut s.lin,
        )?;
        if let (Some(qn), Some(kn)) = (&layer.q_norm, &layer.k_norm) {
            rms_norm_in_place(&mut s.q, qn, c.rms_eps, hd, &mut s.norm)?;
            rms_norm_in_place(&mut s.k, kn, c.rms_eps, hd, &mut s.norm)?;
        }
        let rope = match (&self.local_rope, layer.local_rope) {
            (Some(local), true) => local,
            _ => &self.rope,
        };
        for i in 0..t {
            let context = cache.capacity();
            rope.apply(&mut s.q[i * q_dim..(i + 1) * q_dim], start + i, context);
            rope.apply(&mut s.k[i * kv_dim..(i + 1) * kv_dim], start + i, context);
            cache.store(
                index,
                start + i,
                &s.k[i * kv_dim..(i + 1) * kv_dim],
                &s.v[i * kv_dim..(i + 1) * kv_dim],
            );
        }
        s.attn.resize(t * q_dim, 0.0);
        let spec = &layer.attention;
        let slots = cache.slots(index);
        let pool = s.lin.pool();
        let (q, attn, dec, pre) = (&s.q, &mut s.attn, &mut s.decode, &mut s.prefill);
        match cache.layer(index) {
            KvSlices::F32(keys, values) => {
                let kv = KvRing {
                    keys,
                    values,
                    slots,
                };
                attend(spec, q, kv, start, attn, dec, pre, pool)?
            }
            KvSlices::F16(keys, values) => {
                let kv = KvRing {
                    keys,
                    values,
                    slots,
                };
                attend(spec, q, kv, start, attn, dec, pre, pool)?
            }
        }
        s.proj.resize(t * hidden, 0.0);
        layer.o.forward(&s.attn, t, &mut s.proj, &mut s.lin)?;
        if let Some(w) = &layer.post_attn_norm {
            rms_norm_in_place(&mut s.proj, w, c.rms_eps, hidden, &mut s.norm)?;
        }
        s.x.iter_mut().zip(&s.proj).for_each(|(x, p)| *x += p);
        Ok(())
    }

    /// `x += post_ffn(Ffn(n2(x)))`.
    fn ffn_block(&self, layer: &Layer, t: usize, s: &mut Workspace) -> Result<()> {
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
    /// The layer's attention projections and dense-MLP / router projections.
    fn linears(&self) -> Vec<&Linear> {
        let mut out = vec![&self.q, &self.k, &self.v, &self.o];
        match &self.ffn {
            Ffn::Dense(m) => out.extend([&m.gate, &m.up, &m.down]),
            Ffn::Moe(moe) => {
                out.push(&moe.router);
                for m in &moe.experts {
                    out.extend([&m.gate, &m.up, &m.down]);
                }
            }
        }
        out
    }

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

/// Attention of the call's queries: prompts (more than [`SMALL_M`] rows) blocked on the
/// GEMM; a one-token call with a pool splits the query's blocks of positions across
/// its threads (each block computed as on one thread, then combined in block order
/// on this one, so the result does not depend on the thread count); everything
/// else on [`AttentionSpec::run`].
#[allow(clippy::too_many_arguments)]
fn attend<T: KvElement + Weight + Sync>(
    spec: &AttentionSpec,
    q: &[f32],
    kv: KvRing<'_, T>,
    start: usize,
    out: &mut [f32],
    decode: &mut DecodeScratch,
    prefill: &mut PrefillScratch,
    pool: Option<&ThreadPool>,
) -> Result<()> {
    let q_dim = spec.n_heads * spec.head_dim;
    if q.len() > SMALL_M * q_dim {
        return prefill_attention::run(spec, q, kv, start, out, prefill);
    }
    match pool {
        Some(pool) if q.len() == q_dim && pool.threads() > 1 => {
            let (scores, partials) = decode.parts(spec, start);
            let cost = 2 * q_dim * (start + 1);
            for_each_task(
                pool,
                [scores, &mut *partials],
                [spec.block_scores_len(start), spec.partial_len()],
                Split::decode(1),
                cost,
                |pieces| match pieces {
                    [Some((blocks, scores)), Some((_, partials))] => {
                        spec.attend_blocks(q, kv, start, blocks, scores, partials)
                    }
                    _ => Ok(()),
                },
            )?;
            spec.combine(partials, out)
        }
        _ => spec.run(q, kv, start, out, decode),
    }
}
