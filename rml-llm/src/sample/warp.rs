//! The warpers: temperature and the four truncations (top-k, top-p, min-p, typical).
//!
//! Each follows the Hugging Face warper of the same name; the one place where a rule
//! has to be chosen is ties, which rml breaks towards the smaller token id (see
//! [`super::candidates::by_logit_desc`]).

use super::candidates::{Candidates, by_logit_desc};

/// Divides the surviving logits by `t > 0` (`TemperatureLogitsWarper`).
pub fn temperature(c: &mut Candidates, logits: &mut [f32], t: f32) {
    for &id in c.ids() {
        logits[id as usize] /= t;
    }
}

/// Keeps every token whose logit is at least the `k`-th largest (`TopKLogitsWarper`:
/// tokens tied with the `k`-th are kept too). `k = 0` or `k >= len` keeps all. Leaves
/// the survivors sorted.
pub fn top_k(c: &mut Candidates, logits: &mut [f32], k: usize) {
    if k == 0 || k >= c.len() {
        return;
    }
    let (ids, _) = c.parts_mut();
    ids.select_nth_unstable_by(k - 1, |&a, &b| by_logit_desc(logits, a, b));
    let kth = logits[ids[k - 1] as usize];
    let mut kept = k;
    for i in k..ids.len() {
        if logits[ids[i] as usize] >= kth {
            ids.swap(kept, i);
            kept += 1;
        }
    }
    ids[..kept].sort_unstable_by(|&a, &b| by_logit_desc(logits, a, b));
    c.set_descending(true);
    c.truncate(kept, logits);
}

/// Nucleus sampling (`TopPLogitsWarper`): in descending order, keeps a token while the
/// probability mass of it and everything below it exceeds `1 - p`, i.e. the smallest
/// head whose mass is at least `p`; at least one token stays. `p >= 1` keeps all.
pub fn top_p(c: &mut Candidates, logits: &mut [f32], p: f32) {
    if p >= 1.0 || c.len() <= 1 {
        return;
    }
    c.sort_descending(logits);
    let drop_mass = 1.0 - f64::from(p);
    let (_, w, sum) = c.exp_weights(logits);
    let mut tail = 0.0;
    let mut keep = 1;
    for j in (0..w.len()).rev() {
        tail += w[j];
        if tail / sum > drop_mass {
            keep = j + 1;
            break;
        }
    }
    c.truncate(keep, logits);
}

/// Min-p (`MinPLogitsWarper`): keeps the tokens whose probability is at least `min_p`
/// times the largest probability, i.e. `exp(logit - max) >= min_p`. `0` keeps all.
pub fn min_p(c: &mut Candidates, logits: &mut [f32], min_p: f32) {
    if min_p <= 0.0 || c.is_empty() {
        return;
    }
    let max = f64::from(c.max_logit(logits));
    let min_p = f64::from(min_p);
    c.retain(logits, |_, l| (f64::from(l) - max).exp() >= min_p);
}

/// Locally typical sampling (`TypicalLogitsWarper`, Meister et al. 2022): with
/// `H = -Σ p log p`, tokens are ordered by `|-log p - H|`; the first position where the
/// running probability reaches `mass` sets a threshold, and every token at most that
/// far from `H` is kept. `mass >= 1` keeps all.
pub fn typical(c: &mut Candidates, logits: &mut [f32], mass: f32) {
    if mass >= 1.0 || c.len() <= 1 {
        return;
    }
    let max = f64::from(c.max_logit(logits));
    let mut sum = 0.0;
    for &id in c.ids() {
        sum += (f64::from(logits[id as usize]) - max).exp();
    }
    let log_sum = sum.ln();
    let logp = |l: f32| f64::from(l) - max - log_sum;
    let entropy: f64 = c
        .ids()
        .iter()
        .map(|&id| {
            let lp = logp(logits[id as usize]);
            -lp * lp.exp()
        })
        .sum();
    let (ids, shifted) = c.parts_mut();
    for &id in ids.iter() {
        shifted[id as usize] = (-logp(logits[id as usize]) - entropy).abs();
    }
    ids.sort_unstable_by(|&a, &b| {
        shifted[a as usize]
            .total_cmp(&shifted[b as usize])
            .then(a.cmp(&b))
    });
    let mass = f64::from(mass);
    let mut cum = 0.0;
    let mut last = ids.len() - 1;
    for (j, &id) in ids.iter().enumerate() {
        cum += logp(logits[id as usize]).exp();
        if cum >= mass {
            last = j;
            break;
        }
    }
    let threshold = shifted[ids[last] as usize];
    let keep = ids.partition_point(|&id| shifted[id as usize] <= threshold);
    c.set_descending(false);
    c.truncate(keep.max(1), logits);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(logits: &mut [f32], f: impl FnOnce(&mut Candidates, &mut [f32])) -> Vec<u32> {
        let mut c = Candidates::new(logits.len());
        c.reset(logits);
        f(&mut c, logits);
        let mut ids = c.ids().to_vec();
        ids.sort_unstable();
        ids
    }

    #[test]
    fn top_k_keeps_ties_with_the_kth() {
        let mut l = [1.0, 3.0, 2.0, 2.0, 0.0];
        assert_eq!(run(&mut l, |c, l| top_k(c, l, 2)), vec![1, 2, 3]);
        assert_eq!(l[0], f32::NEG_INFINITY);
        assert_eq!(l[4], f32::NEG_INFINITY);
    }

    #[test]
    fn top_p_keeps_the_smallest_head_reaching_p() {
        // probabilities 0.5, 0.25, 0.125, 0.125
        let ln = |x: f32| x.ln();
        let mut l = [ln(0.125), ln(0.5), ln(0.125), ln(0.25)];
        assert_eq!(run(&mut l.clone(), |c, l| top_p(c, l, 0.5)), vec![1]);
        assert_eq!(run(&mut l.clone(), |c, l| top_p(c, l, 0.7)), vec![1, 3]);
        // ties at the cut: the smaller id stays
        assert_eq!(run(&mut l, |c, l| top_p(c, l, 0.8)), vec![0, 1, 3]);
    }

    #[test]
    fn min_p_is_relative_to_the_top() {
        let mut l = [0.0, -1.0, -3.0];
        assert_eq!(run(&mut l, |c, l| min_p(c, l, 0.1)), vec![0, 1]);
    }

    #[test]
    fn typical_can_drop_the_most_likely_token() {
        // one dominant token and many small ones: the dominant one is far from H
        let mut l = [5.0f32; 1]
            .iter()
            .copied()
            .chain([0.0f32; 200])
            .collect::<Vec<_>>();
        let kept = run(&mut l, |c, l| typical(c, l, 0.5));
        assert!(!kept.contains(&0));
        assert!(!kept.is_empty());
    }
}
