//! The set of tokens still in the running while the chain works on one logits vector.

use core::cmp::Ordering;

/// The surviving token ids of one sampling step, in a buffer sized to the vocabulary
/// once, plus an `f64` scratch of the same size.
///
/// A token leaves the set by [`Candidates::truncate`] or [`Candidates::retain`], which
/// also set its logit to `-inf`, so the logits slice always shows what the chain did
/// (as Hugging Face's processors do with `filter_value`).
#[derive(Clone, Debug)]
pub struct Candidates {
    ids: Vec<u32>,
    len: usize,
    descending: bool,
    scratch: Vec<f64>,
}

/// Orders tokens by logit, largest first, and equal logits by id, smallest first.
pub fn by_logit_desc(logits: &[f32], a: u32, b: u32) -> Ordering {
    logits[b as usize]
        .total_cmp(&logits[a as usize])
        .then(a.cmp(&b))
}

impl Candidates {
    /// Buffers for a vocabulary of `vocab` tokens.
    pub fn new(vocab: usize) -> Self {
        Self {
            ids: vec![0; vocab],
            len: 0,
            descending: false,
            scratch: vec![0.0; vocab],
        }
    }

    /// Starts a step: every token whose logit is above `-inf` (NaN excluded), in id order.
    pub fn reset(&mut self, logits: &[f32]) {
        self.len = 0;
        for (i, &l) in logits.iter().enumerate() {
            if l > f32::NEG_INFINITY {
                self.ids[self.len] = i as u32;
                self.len += 1;
            }
        }
        self.descending = false;
    }

    /// The surviving ids, in the current order.
    pub fn ids(&self) -> &[u32] {
        &self.ids[..self.len]
    }

    /// How many tokens survive.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no token survives.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Records that a stage changed logits, so any sorted order is stale.
    pub fn logits_changed(&mut self) {
        self.descending = false;
    }

    /// Sorts the survivors by [`by_logit_desc`] unless they already are.
    pub fn sort_descending(&mut self, logits: &[f32]) {
        if !self.descending {
            self.ids[..self.len].sort_unstable_by(|&a, &b| by_logit_desc(logits, a, b));
            self.descending = true;
        }
    }

    /// The ids and the scratch together, for stages that sort or partition by their own
    /// key; the caller must report the resulting order with [`Candidates::set_descending`].
    pub fn parts_mut(&mut self) -> (&mut [u32], &mut [f64]) {
        (&mut self.ids[..self.len], &mut self.scratch)
    }

    /// Declares whether the survivors are now in [`by_logit_desc`] order.
    pub fn set_descending(&mut self, descending: bool) {
        self.descending = descending;
    }

    /// Keeps the first `keep` survivors in the current order and sets the others'
    /// logits to `-inf`.
    pub fn truncate(&mut self, keep: usize, logits: &mut [f32]) {
        for &t in &self.ids[keep.min(self.len)..self.len] {
            logits[t as usize] = f32::NEG_INFINITY;
        }
        self.len = keep.min(self.len);
    }

    /// Keeps the survivors for which `keep(id)` holds, in order; the others' logits
    /// become `-inf`.
    pub fn retain(&mut self, logits: &mut [f32], mut keep: impl FnMut(u32, f32) -> bool) {
        let mut n = 0;
        for i in 0..self.len {
            let t = self.ids[i];
            if keep(t, logits[t as usize]) {
                self.ids[n] = t;
                n += 1;
            } else {
                logits[t as usize] = f32::NEG_INFINITY;
            }
        }
        self.len = n;
    }

    /// The largest surviving logit (`-inf` when none survives).
    pub fn max_logit(&self, logits: &[f32]) -> f32 {
        if self.descending && self.len > 0 {
            return logits[self.ids[0] as usize];
        }
        self.ids()
            .iter()
            .map(|&t| logits[t as usize])
            .fold(f32::NEG_INFINITY, f32::max)
    }

    /// The survivor with the largest logit, the smallest id among equals.
    pub fn argmax(&self, logits: &[f32]) -> Option<u32> {
        self.ids()
            .iter()
            .copied()
            .min_by(|&a, &b| by_logit_desc(logits, a, b))
    }

    /// Writes `exp(logit - max)` of each survivor, in order, to the first `len` scratch
    /// slots and returns the survivors, their weights and the weights' sum: the
    /// unnormalised softmax in `f64`.
    pub fn exp_weights(&mut self, logits: &[f32]) -> (&[u32], &[f64], f64) {
        let max = f64::from(self.max_logit(logits));
        let mut sum = 0.0;
        for (w, &t) in self.scratch.iter_mut().zip(&self.ids[..self.len]) {
            *w = (f64::from(logits[t as usize]) - max).exp();
            sum += *w;
        }
        (&self.ids[..self.len], &self.scratch[..self.len], sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_skips_dead_tokens_and_sort_breaks_ties_by_id() {
        let mut logits = [1.0, f32::NEG_INFINITY, 2.0, f32::NAN, 1.0];
        let mut c = Candidates::new(5);
        c.reset(&logits);
        assert_eq!(c.ids(), &[0, 2, 4]);
        c.sort_descending(&logits);
        assert_eq!(c.ids(), &[2, 0, 4]);
        assert_eq!(c.argmax(&logits), Some(2));
        c.truncate(2, &mut logits);
        assert_eq!(logits[4], f32::NEG_INFINITY);
        let (_, w, sum) = c.exp_weights(&logits);
        assert_eq!(w, &[1.0, (-1.0f64).exp()]);
        assert_eq!(sum, 1.0 + (-1.0f64).exp());
    }
}
