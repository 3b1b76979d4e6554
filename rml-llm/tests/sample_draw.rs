//! The final draw: empirical frequencies against the filtered distribution (chi-square),
//! seeds, greedy, and the chain's order being configurable.

use rml_llm::sample::{Sampler, SamplerConfig, Stage};

/// Logits for a 12-token vocabulary with a tie and a spread of probabilities.
fn logits() -> Vec<f32> {
    vec![
        2.0, 1.5, 1.5, 0.7, 0.0, -0.3, -1.0, 3.0, 0.2, -2.5, 1.0, -0.8,
    ]
}

/// Draws `n` tokens (always from the same logits) and counts them.
fn counts(config: SamplerConfig, n: usize) -> (Vec<u64>, Vec<f32>) {
    let base = logits();
    let mut sampler = Sampler::new(config, base.len()).unwrap();
    let mut probs = vec![0.0; base.len()];
    let mut work = base.clone();
    sampler.apply(&mut work).unwrap();
    sampler.probabilities(&work, &mut probs).unwrap();
    let mut counts = vec![0u64; base.len()];
    for _ in 0..n {
        work.copy_from_slice(&base);
        counts[sampler.sample(&mut work).unwrap() as usize] += 1;
    }
    (counts, probs)
}

/// Pearson's statistic over the tokens with non-zero probability; panics if a token
/// with zero probability was drawn. Returns the statistic and its degrees of freedom.
fn chi_square(counts: &[u64], probs: &[f32], n: usize) -> (f64, usize) {
    let mut stat = 0.0;
    let mut cells = 0;
    for (&c, &p) in counts.iter().zip(probs) {
        if p == 0.0 {
            assert_eq!(c, 0, "a filtered-out token was drawn");
            continue;
        }
        let expected = f64::from(p) * n as f64;
        assert!(
            expected >= 5.0,
            "too few samples for the chi-square approximation"
        );
        stat += (c as f64 - expected).powi(2) / expected;
        cells += 1;
    }
    (stat, cells - 1)
}

/// A bound the statistic exceeds with probability far below 1e-6 under the null: the
/// chi-square mean `k` plus 7 standard deviations `sqrt(2k)`, plus a margin for the
/// skew at small `k` (the Wilson–Hilferty tail at 1e-7 stays below this for k >= 1).
fn bound(dof: usize) -> f64 {
    let k = dof as f64;
    k + 7.0 * (2.0 * k).sqrt() + 12.0
}

fn check(config: SamplerConfig, expect_kept: usize) {
    let n = 40_000;
    let (counts, probs) = counts(config, n);
    assert_eq!(probs.iter().filter(|&&p| p > 0.0).count(), expect_kept);
    let (stat, dof) = chi_square(&counts, &probs, n);
    assert!(
        stat < bound(dof),
        "chi-square {stat} with {dof} degrees of freedom exceeds {}",
        bound(dof)
    );
}

#[test]
fn unfiltered_draws_follow_the_softmax() {
    check(SamplerConfig::unfiltered(), 12);
}

#[test]
fn filtered_draws_follow_the_filtered_distribution() {
    check(
        SamplerConfig {
            top_k: 5,
            ..SamplerConfig::unfiltered()
        },
        5,
    );
    check(
        SamplerConfig {
            temperature: 0.7,
            top_p: 0.9,
            ..SamplerConfig::unfiltered()
        },
        4,
    );
    check(
        SamplerConfig {
            min_p: 0.2,
            ..SamplerConfig::unfiltered()
        },
        4,
    );
    check(
        SamplerConfig {
            temperature: 1.5,
            typical_p: 0.6,
            seed: 9,
            ..SamplerConfig::unfiltered()
        },
        6,
    );
}

fn sequence(seed: u64, n: usize) -> Vec<u32> {
    let base = logits();
    let config = SamplerConfig {
        seed,
        repetition_penalty: 1.3,
        ..SamplerConfig::default()
    };
    let mut sampler = Sampler::new(config, base.len()).unwrap();
    let mut work = base.clone();
    (0..n)
        .map(|_| {
            work.copy_from_slice(&base);
            sampler.sample(&mut work).unwrap()
        })
        .collect()
}

#[test]
fn same_seed_same_tokens_different_seed_different_tokens() {
    let a = sequence(7, 200);
    assert_eq!(a, sequence(7, 200));
    assert_ne!(a, sequence(8, 200));
}

#[test]
fn reset_restarts_the_stream() {
    let base = logits();
    let mut sampler = Sampler::new(SamplerConfig::default(), base.len()).unwrap();
    let run = |s: &mut Sampler| -> Vec<u32> {
        (0..50)
            .map(|_| {
                let mut w = base.clone();
                s.sample(&mut w).unwrap()
            })
            .collect()
    };
    let first = run(&mut sampler);
    sampler.reset();
    assert_eq!(first, run(&mut sampler));
}

#[test]
fn greedy_takes_the_largest_after_penalties_and_bias() {
    let base = logits();
    let mut sampler = Sampler::new(SamplerConfig::greedy(), base.len()).unwrap();
    assert_eq!(sampler.sample(&mut base.clone()).unwrap(), 7);
    let config = SamplerConfig {
        logit_bias: vec![(7, f32::NEG_INFINITY)],
        ..SamplerConfig::greedy()
    };
    let mut sampler = Sampler::new(config, base.len()).unwrap();
    assert_eq!(sampler.sample(&mut base.clone()).unwrap(), 0);
    // ties go to the smaller id: ban 7 and 0, leaving 1 and 2 tied at 1.5
    let config = SamplerConfig {
        logit_bias: vec![(7, f32::NEG_INFINITY), (0, f32::NEG_INFINITY)],
        ..SamplerConfig::greedy()
    };
    let mut sampler = Sampler::new(config, base.len()).unwrap();
    assert_eq!(sampler.sample(&mut base.clone()).unwrap(), 1);
    // a repetition penalty on the sampled token moves greedy off it
    let config = SamplerConfig {
        repetition_penalty: 4.0,
        ..SamplerConfig::greedy()
    };
    let mut sampler = Sampler::new(config, base.len()).unwrap();
    assert_eq!(sampler.sample(&mut base.clone()).unwrap(), 7);
    assert_eq!(sampler.sample(&mut base.clone()).unwrap(), 0);
}

#[test]
fn the_order_is_configurable() {
    // top-k 2 then min-p 0.5 keeps {7, 0}; min-p 0.5 first keeps only 7 (e^-1 < 0.5),
    // and temperature before min-p changes what min-p sees
    let base = logits();
    let kept = |order: Vec<Stage>, temperature: f32| {
        let config = SamplerConfig {
            top_k: 2,
            min_p: 0.5,
            temperature,
            order,
            ..SamplerConfig::unfiltered()
        };
        let mut s = Sampler::new(config, base.len()).unwrap();
        let mut w = base.clone();
        s.apply(&mut w).unwrap();
        let mut ids = s.candidates().to_vec();
        ids.sort_unstable();
        ids
    };
    assert_eq!(kept(vec![Stage::TopK, Stage::MinP], 1.0), vec![7]);
    assert_eq!(
        kept(vec![Stage::TopK, Stage::Temperature, Stage::MinP], 3.0),
        vec![0, 7]
    );
    assert_eq!(
        kept(vec![Stage::MinP, Stage::Temperature, Stage::TopK], 3.0),
        vec![7]
    );
    assert_eq!(kept(vec![], 3.0).len(), 12);
}

#[test]
fn bad_settings_and_inputs_are_errors() {
    let bad = [
        SamplerConfig {
            temperature: -1.0,
            ..SamplerConfig::default()
        },
        SamplerConfig {
            top_p: 0.0,
            ..SamplerConfig::default()
        },
        SamplerConfig {
            repetition_penalty: 0.0,
            ..SamplerConfig::default()
        },
        SamplerConfig {
            logit_bias: vec![(12, 1.0)],
            ..SamplerConfig::default()
        },
        SamplerConfig {
            logit_bias: vec![(1, f32::INFINITY)],
            ..SamplerConfig::default()
        },
    ];
    for config in bad {
        assert!(Sampler::new(config, 12).is_err());
    }
    let mut s = Sampler::new(SamplerConfig::default(), 12).unwrap();
    assert!(s.sample(&mut [0.0; 5]).is_err());
    assert!(s.sample(&mut [f32::NEG_INFINITY; 12]).is_err());
    assert!(s.accept(12).is_err());
}
