//! Philox generators against the Random123 known-answer vectors and NumPy, stream
//! positioning, and the distributions' statistics and argument checks.

use rml_core::Error;
use rml_core::random::distributions::*;
use rml_core::random::{Philox4x32, Philox4x32Stream, Philox4x64, Philox4x64Stream, Rng};
use serde_json::Value;

// Known-answer vectors for the 10-round variants, from the Random123 distribution
// (D. E. Shaw Research), file `tests/kat_vectors`, github.com/DEShawResearch/random123
// at commit 9545ff6413f258be2f04c1d319d99aaef7521150. Row format there:
// `name rounds counter[4] key[2] expected[4]`, words least significant first.

#[test]
fn philox4x32_10_matches_random123_kat_vectors() {
    let cases: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
        (
            [0, 0, 0, 0],
            [0, 0],
            [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8],
        ),
        (
            [0xffffffff; 4],
            [0xffffffff; 2],
            [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd],
        ),
        (
            [0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
            [0xa4093822, 0x299f31d0],
            [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1],
        ),
    ];
    for (counter, key, expected) in cases {
        assert_eq!(Philox4x32::new(key).block(counter), expected);
    }
}

#[test]
fn philox4x64_10_matches_random123_kat_vectors() {
    let cases: [([u64; 4], [u64; 2], [u64; 4]); 3] = [
        (
            [0; 4],
            [0; 2],
            [
                0x16554d9eca36314c,
                0xdb20fe9d672d0fdc,
                0xd7e772cee186176b,
                0x7e68b68aec7ba23b,
            ],
        ),
        (
            [u64::MAX; 4],
            [u64::MAX; 2],
            [
                0x87b092c3013fe90b,
                0x438c3c67be8d0224,
                0x9cc7d7c69cd777b6,
                0xa09caebf594f0ba0,
            ],
        ),
        (
            [
                0x243f6a8885a308d3,
                0x13198a2e03707344,
                0xa4093822299f31d0,
                0x082efa98ec4e6c89,
            ],
            [0x452821e638d01377, 0xbe5466cf34e90c6c],
            [
                0xa528f45403e61d95,
                0x38c72dbd566e9788,
                0xa5a1610e72fd18b5,
                0x57bd43b5e52b7fe6,
            ],
        ),
    ];
    for (counter, key, expected) in cases {
        assert_eq!(Philox4x64::new(key).block(counter), expected);
    }
}

fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/core_random/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap()
}

fn hex_list(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| u64::from_str_radix(x.as_str().unwrap(), 16).unwrap())
        .collect()
}

#[test]
fn philox4x64_stream_reproduces_numpy_philox() {
    let doc = fixture("philox4x64_numpy.json");
    let cases = doc["cases"].as_array().unwrap();
    assert!(cases.len() >= 8);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let key: [u64; 2] = hex_list(&case["key"]).try_into().unwrap();
        let counter: [u64; 4] = hex_list(&case["counter"]).try_into().unwrap();

        let mut s = Philox4x64Stream::numpy(key, counter);
        let raw: Vec<u64> = hex_list(&case["raw"])
            .iter()
            .map(|_| s.next_u64())
            .collect();
        assert_eq!(raw, hex_list(&case["raw"]), "{name}: random_raw");

        let mut s = Philox4x64Stream::numpy(key, counter);
        let u32s: Vec<u64> = hex_list(&case["u32"])
            .iter()
            .map(|_| u64::from(s.next_u32()))
            .collect();
        assert_eq!(u32s, hex_list(&case["u32"]), "{name}: next_uint32");

        let mut s = Philox4x64Stream::numpy(key, counter);
        for bits in hex_list(&case["f64_bits"]) {
            assert_eq!(s.next_f64().to_bits(), bits, "{name}: random() float64");
        }
        let mut s = Philox4x64Stream::numpy(key, counter);
        for bits in hex_list(&case["f32_bits"]) {
            assert_eq!(
                u64::from(s.next_f32().to_bits()),
                bits,
                "{name}: random() float32"
            );
        }

        // NumPy's advance(d) moves the counter by d blocks and empties the buffer.
        let advance = u64::from_str_radix(case["advance"].as_str().unwrap(), 16).unwrap();
        let mut s = Philox4x64Stream::numpy(key, counter);
        s.skip(u128::from(advance) * 4);
        let mut t = Philox4x64Stream::numpy(key, counter);
        t.next_u64();
        t.skip(u128::from(advance) * 4 - 1);
        for expected in hex_list(&case["advanced_raw"]) {
            assert_eq!(s.next_u64(), expected, "{name}: advance");
            assert_eq!(t.next_u64(), expected, "{name}: advance after a draw");
        }
    }
}

#[test]
fn uniform_below_reproduces_numpy_integers() {
    let doc = fixture("philox4x64_numpy.json");
    let ints = &doc["integers"];
    let key: [u64; 2] = hex_list(&ints["key"]).try_into().unwrap();
    let counter: [u64; 4] = hex_list(&ints["counter"]).try_into().unwrap();
    let cases = ints["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    for case in cases {
        let n = u64::from_str_radix(case["n"].as_str().unwrap(), 16).unwrap();
        let expected = hex_list(&case["values"]);
        let mut s = Philox4x64Stream::numpy(key, counter);
        let got: Vec<u64> = expected
            .iter()
            .map(|_| uniform_below(&mut s, n).unwrap())
            .collect();
        assert_eq!(got, expected, "integers(0, {n})");
        let mut s = Philox4x64Stream::numpy(key, counter);
        let mut filled = vec![0u64; expected.len()];
        fill_uniform_below(&mut s, &mut filled, n).unwrap();
        assert_eq!(filled, expected, "integers(0, {n}), filled");
    }
}

#[test]
fn philox4x32_stream_walks_blocks_in_counter_order_with_carry() {
    let key = [0xdead_beef, 0x1234_5678];
    let philox = Philox4x32::new(key);
    let start = [u32::MAX - 1, u32::MAX, 7, 0];
    let mut s = Philox4x32Stream::new(key, start);
    let mut expected = Vec::new();
    for c in [
        [u32::MAX - 1, u32::MAX, 7, 0],
        [u32::MAX, u32::MAX, 7, 0],
        [0, 0, 8, 0],
    ] {
        expected.extend(philox.block(c));
    }
    let got: Vec<u32> = (0..12).map(|_| s.next_u32()).collect();
    assert_eq!(got, expected);

    // The counter wraps around modulo 2^128.
    let mut w = Philox4x32Stream::new(key, [u32::MAX; 4]);
    w.skip(4);
    assert_eq!(w.next_u32(), philox.block([0; 4])[0]);
}

#[test]
fn next_u64_joins_two_words_low_first() {
    let key = [3, 4];
    let b = Philox4x32::new(key).block([0; 4]);
    let mut s = Philox4x32Stream::new(key, [0; 4]);
    assert_eq!(s.next_u64(), u64::from(b[0]) | (u64::from(b[1]) << 32));
    assert_eq!(s.next_u32(), b[2]);
    // Unaligned: a u64 can straddle two blocks.
    let b1 = Philox4x32::new(key).block([1, 0, 0, 0]);
    assert_eq!(s.next_u64(), u64::from(b[3]) | (u64::from(b1[0]) << 32));
}

#[test]
fn skip_and_seek_equal_drawing() {
    for n in [0u128, 1, 2, 3, 4, 5, 7, 8, 13, 64, 1001] {
        for pre in 0..5 {
            let mut a = Philox4x32Stream::from_seed(0x0123_4567_89ab_cdef);
            let mut b = a.clone();
            for _ in 0..pre {
                a.next_u32();
                b.next_u32();
            }
            for _ in 0..n {
                a.next_u32();
            }
            b.skip(n);
            assert_eq!(a.position(), b.position(), "n={n} pre={pre}");
            assert_eq!(a.next_u32(), b.next_u32(), "n={n} pre={pre}");

            let mut a = Philox4x64Stream::from_seed(99);
            let mut b = a.clone();
            for _ in 0..pre {
                a.next_u64();
                b.next_u64();
            }
            for _ in 0..n {
                a.next_u64();
            }
            b.skip(n);
            assert_eq!(a.position(), b.position(), "n={n} pre={pre}");
            assert_eq!(a.next_u64(), b.next_u64(), "n={n} pre={pre}");
        }
    }
    let mut s = Philox4x64Stream::from_seed(5);
    s.next_u32();
    s.seek([9, 0, 0, 0]);
    assert_eq!(s.position(), ([9, 0, 0, 0], 0));
    assert_eq!(s.next_u64(), Philox4x64::new([5, 0]).block([9, 0, 0, 0])[0]);
    // A huge skip wraps the 256-bit counter.
    let mut s = Philox4x64Stream::new([1, 1], [u64::MAX; 4]);
    s.skip(4 * 3 + 2);
    assert_eq!(s.position(), ([2, 0, 0, 0], 2));
}

#[test]
fn numpy_32_bit_draws_split_words_low_half_first() {
    let mut a = Philox4x64Stream::from_seed(17);
    let mut b = a.clone();
    let w0 = a.next_u64();
    let w1 = a.next_u64();
    let halves: Vec<u32> = (0..4).map(|_| b.next_u32()).collect();
    assert_eq!(
        halves,
        [w0 as u32, (w0 >> 32) as u32, w1 as u32, (w1 >> 32) as u32]
    );
    // seek and skip drop a pending half.
    let mut c = Philox4x64Stream::from_seed(17);
    c.next_u32();
    c.skip(0);
    assert_eq!(c.next_u64(), w1);
}

#[test]
fn split_streams_are_reproducible_and_distinct() {
    let root = Philox4x32Stream::from_seed(42);
    let first: Vec<u32> = {
        let mut s = root.split(3);
        (0..8).map(|_| s.next_u32()).collect()
    };
    let again: Vec<u32> = {
        let mut s = Philox4x32Stream::from_seed(42).split(3);
        (0..8).map(|_| s.next_u32()).collect()
    };
    assert_eq!(first, again);
    let mut s3 = root.split(3);
    assert_eq!(s3.position(), ([0, 0, 0, 3], 0));
    let mut s4 = root.split(4);
    assert_ne!(s3.next_u64(), s4.next_u64());
    let mut k1 = Philox4x32Stream::for_stream(42, 1);
    let mut k2 = Philox4x32Stream::for_stream(42, 2);
    assert_eq!(k1.generator().key(), [42, 1]);
    assert_ne!(k1.next_u64(), k2.next_u64());
    let mut k = Philox4x64Stream::for_stream(42, 1);
    assert_eq!(k.generator().key(), [42, 1]);
    let mut t = k.split(7);
    assert_eq!(t.position(), ([0, 0, 0, 7], 0));
    assert_ne!(k.next_u64(), t.next_u64());
}

// ---- distributions ------------------------------------------------------------------

/// Sample mean and (unbiased) variance.
fn moments(xs: impl Iterator<Item = f64>) -> (f64, f64, usize) {
    let v: Vec<f64> = xs.collect();
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    (mean, var, v.len())
}

/// Asserts that a sample mean and variance agree with the true ones within 5 standard
/// errors: `sd / sqrt(n)` for the mean and `sqrt((mu4 - (n - 3) / (n - 1) sd^4) / n)`
/// for the (unbiased) sample variance, where `mu4` is the true fourth central moment.
fn assert_moments(what: &str, (mean, var, n): (f64, f64, usize), mu: f64, sd2: f64, mu4: f64) {
    let n = n as f64;
    let se_mean = (sd2 / n).sqrt();
    let se_var = ((mu4 - (n - 3.0) / (n - 1.0) * sd2 * sd2) / n).sqrt();
    assert!(
        (mean - mu).abs() < 5.0 * se_mean,
        "{what}: mean {mean} vs {mu} (se {se_mean})"
    );
    assert!(
        (var - sd2).abs() < 5.0 * se_var,
        "{what}: variance {var} vs {sd2} (se {se_var})"
    );
}

const N: usize = 200_000;

#[test]
fn uniform_conversion_is_exact() {
    // Fixed words from the generator, converted by hand with the documented formula.
    let mut a = Philox4x32Stream::from_seed(1);
    let mut b = a.clone();
    for _ in 0..16 {
        let w = b.next_u32();
        assert_eq!(a.next_f32(), (w >> 8) as f32 / 16_777_216.0);
    }
    let mut a = Philox4x64Stream::from_seed(1);
    let mut b = a.clone();
    for _ in 0..16 {
        let w = b.next_u64();
        assert_eq!(a.next_f64(), (w >> 11) as f64 / 9_007_199_254_740_992.0);
    }
    let mut a = Philox4x64Stream::from_seed(2);
    let mut b = a.clone();
    for _ in 0..8 {
        let u = b.next_f64();
        assert_eq!(uniform_f64(&mut a, -3.0, 5.0), Ok(-3.0 + 8.0 * u));
    }
}

#[test]
fn uniform_samples_have_the_right_moments_and_range() {
    let mut rng = Philox4x32Stream::from_seed(7);
    let mut buf = vec![0f32; N];
    fill_uniform_f32(&mut rng, &mut buf, -2.0, 6.0).unwrap();
    assert!(buf.iter().all(|&x| (-2.0..6.0).contains(&x)));
    let w = 8.0f64;
    assert_moments(
        "uniform f32",
        moments(buf.iter().map(|&x| f64::from(x))),
        2.0,
        w * w / 12.0,
        w.powi(4) / 80.0,
    );
    let mut buf = vec![0f64; N];
    fill_uniform_f64(&mut rng, &mut buf, 0.0, 1.0).unwrap();
    assert!(buf.iter().all(|&x| (0.0..1.0).contains(&x)));
    assert_moments(
        "uniform f64",
        moments(buf.iter().copied()),
        0.5,
        1.0 / 12.0,
        1.0 / 80.0,
    );
}

#[test]
fn normal_samples_have_the_right_moments() {
    let mut rng = Philox4x64Stream::from_seed(11);
    let mut buf = vec![0f64; N + 1];
    fill_normal_f64(&mut rng, &mut buf, 3.0, 2.0).unwrap();
    assert_moments(
        "normal f64",
        moments(buf.iter().copied()),
        3.0,
        4.0,
        3.0 * 16.0,
    );
    let mut buf = vec![0f32; N];
    fill_normal_f32(&mut rng, &mut buf, -1.0, 0.5).unwrap();
    assert_moments(
        "normal f32",
        moments(buf.iter().map(|&x| f64::from(x))),
        -1.0,
        0.25,
        3.0 * 0.0625,
    );
    // The single-value form is the cosine half of a pair.
    let mut a = Philox4x32Stream::from_seed(5);
    let mut b = a.clone();
    assert_eq!(standard_normal(&mut a), standard_normal_pair(&mut b).0);
    // Fill order: out[0], out[1] are one pair.
    let mut a = Philox4x32Stream::from_seed(5);
    let mut b = a.clone();
    let mut two = [0f64; 3];
    fill_normal_f64(&mut a, &mut two, 0.0, 1.0).unwrap();
    let (z0, z1) = standard_normal_pair(&mut b);
    assert_eq!([two[0], two[1]], [z0, z1]);
    assert_eq!(two[2], standard_normal_pair(&mut b).0);
}

/// Standard normal density and distribution function.
fn phi(x: f64) -> f64 {
    if x.is_infinite() {
        return 0.0;
    }
    (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()
}

fn cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
}

/// `x * phi(x)`, which is 0 at the infinities.
fn x_phi(x: f64) -> f64 {
    if x.is_infinite() { 0.0 } else { x * phi(x) }
}

#[test]
fn truncated_normal_samples_have_the_right_moments_and_range() {
    let inf = f64::INFINITY;
    let intervals = [
        (-2.0, 2.0),
        (-inf, inf),
        (0.0, inf),
        (-0.5, 0.3),
        (-1.0, 1.5),
        (1.5, 2.0),
        (3.0, inf),
        (-inf, -4.0),
        (5.0, 5.5),
        (0.2, 8.0),
        (-7.0, -6.99),
    ];
    let mut rng = Philox4x64Stream::from_seed(2026);
    for (a, b) in intervals {
        let n = 50_000;
        let mut xs = Vec::with_capacity(n);
        for _ in 0..n {
            let x = truncated_normal(&mut rng, a, b).unwrap();
            assert!(a <= x && x <= b, "{x} outside [{a}, {b}]");
            xs.push(x);
        }
        // Closed-form moments of the truncated standard normal. The mass is computed
        // from the nearer tail so it keeps precision far from 0.
        let z = if a >= 0.0 {
            cdf(-a) - cdf(-b)
        } else {
            cdf(b) - cdf(a)
        };
        let mean = (phi(a) - phi(b)) / z;
        let var = 1.0 + (x_phi(a) - x_phi(b)) / z - mean * mean;
        let (m, v, _) = moments(xs.iter().copied());
        let se_mean = (var / n as f64).sqrt();
        assert!(
            (m - mean).abs() < 5.0 * se_mean,
            "[{a}, {b}]: mean {m} vs {mean}"
        );
        // The variance's standard error needs the fourth central moment; the tails
        // make it anything from a uniform's to an exponential's, so take the sample's.
        let mu4 = xs.iter().map(|x| (x - m).powi(4)).sum::<f64>() / n as f64;
        let se_var = ((mu4 - var * var).max(0.0) / n as f64).sqrt();
        assert!(
            (v - var).abs() < 5.0 * se_var,
            "[{a}, {b}]: variance {v} vs {var}"
        );
    }
    let mut out = [0f32; 1000];
    fill_truncated_normal_f32(&mut rng, &mut out, 10.0, 0.5, -2.0, 2.0).unwrap();
    assert!(out.iter().all(|&x| (9.0..=11.0).contains(&x)));
    let mut out = [0f64; 1000];
    fill_truncated_normal_f64(&mut rng, &mut out, 0.0, 2.0, 1.0, 1.25).unwrap();
    assert!(out.iter().all(|&x| (2.0..=2.5).contains(&x)));
}

#[test]
fn bernoulli_and_categorical_frequencies() {
    let mut rng = Philox4x32Stream::from_seed(3);
    for p in [0.0, 0.01, 0.3, 0.5, 0.97, 1.0] {
        let mut out = vec![false; N];
        fill_bernoulli(&mut rng, &mut out, p).unwrap();
        let hits = out.iter().filter(|&&b| b).count() as f64;
        let se = (p * (1.0 - p) / N as f64).sqrt();
        assert!(
            (hits / N as f64 - p).abs() <= 5.0 * se,
            "p={p}: {hits} hits"
        );
    }
    assert_eq!(bernoulli(&mut rng, 1.0), Ok(true));
    assert_eq!(bernoulli(&mut rng, 0.0), Ok(false));

    let weights = [2.0f32, 0.0, 5.0, 1.0, 0.0, 2.0];
    let total: f32 = weights.iter().sum();
    let mut out = vec![0usize; N];
    fill_categorical(&mut rng, &weights, &mut out).unwrap();
    let mut counts = [0usize; 6];
    for &i in &out {
        counts[i] += 1;
    }
    for (i, &w) in weights.iter().enumerate() {
        let p = f64::from(w / total);
        let f = counts[i] as f64 / N as f64;
        let se = (p * (1.0 - p) / N as f64).sqrt();
        assert!((f - p).abs() <= 5.0 * se, "category {i}: {f} vs {p}");
    }
    assert_eq!(counts[1] + counts[4], 0);
    assert_eq!(categorical(&mut rng, &[0u8, 0, 9]), Ok(2));
    assert!(categorical(&mut rng, &[1.0f64, 3.0]).unwrap() < 2);
}

#[test]
fn integers_below_n_and_shuffles_are_uniform() {
    let mut rng = Philox4x32Stream::from_seed(77);
    let before = rng.clone();
    assert_eq!(uniform_below(&mut rng, 1), Ok(0));
    assert_eq!(rng, before, "n = 1 draws nothing");
    for n in [2u64, 3, 10, 1 << 33] {
        let mut out = vec![0u64; N];
        fill_uniform_below(&mut rng, &mut out, n).unwrap();
        assert!(out.iter().all(|&x| x < n));
        let nf = n as f64;
        // Discrete uniform: mean (n - 1) / 2, variance (n^2 - 1) / 12, and fourth
        // central moment (n^2 - 1)(3n^2 - 7) / 240.
        assert_moments(
            "uniform_below",
            moments(out.iter().map(|&x| x as f64)),
            (nf - 1.0) / 2.0,
            (nf * nf - 1.0) / 12.0,
            (nf * nf - 1.0) * (3.0 * nf * nf - 7.0) / 240.0,
        );
    }
    // Every item lands in every position with probability 1/len.
    let len = 5;
    let rounds = 40_000;
    let mut counts = [[0usize; 5]; 5];
    for _ in 0..rounds {
        let mut items = [0usize, 1, 2, 3, 4];
        shuffle(&mut rng, &mut items);
        let mut sorted = items;
        sorted.sort_unstable();
        assert_eq!(sorted, [0, 1, 2, 3, 4]);
        for (pos, &item) in items.iter().enumerate() {
            counts[item][pos] += 1;
        }
    }
    let p = 1.0 / len as f64;
    let se = (p * (1.0 - p) / rounds as f64).sqrt();
    for row in counts {
        for c in row {
            assert!(
                (c as f64 / rounds as f64 - p).abs() < 5.0 * se,
                "{counts:?}"
            );
        }
    }
    let mut empty: [u8; 0] = [];
    shuffle(&mut rng, &mut empty);
}

fn bad<T>(result: Result<T, Error>) -> bool {
    matches!(result, Err(Error::InvalidArgument(_)))
}

#[test]
fn bad_arguments_are_errors_and_draw_nothing() {
    let mut rng = Philox4x32Stream::from_seed(1);
    let before = rng.clone();
    let nan = f64::NAN;
    let mut f32s = [0f32; 4];
    let mut f64s = [0f64; 4];
    assert!(bad(uniform_f32(&mut rng, 1.0, 1.0)));
    assert!(bad(uniform_f32(&mut rng, 2.0, 1.0)));
    assert!(bad(uniform_f32(&mut rng, -f32::MAX, f32::MAX)));
    assert!(bad(uniform_f32(&mut rng, 0.0, f32::INFINITY)));
    assert!(bad(uniform_f64(&mut rng, nan, 1.0)));
    assert!(bad(uniform_f64(&mut rng, -f64::MAX, f64::MAX)));
    assert!(bad(fill_uniform_f32(&mut rng, &mut f32s, 1.0, 0.0)));
    assert!(bad(fill_uniform_f64(
        &mut rng,
        &mut f64s,
        0.0,
        f64::INFINITY
    )));
    assert!(bad(fill_normal_f32(&mut rng, &mut f32s, 0.0, -1.0)));
    assert!(bad(fill_normal_f64(&mut rng, &mut f64s, nan, 1.0)));
    assert!(bad(fill_normal_f64(
        &mut rng,
        &mut f64s,
        0.0,
        f64::INFINITY
    )));
    assert!(bad(truncated_normal(&mut rng, 1.0, 1.0)));
    assert!(bad(truncated_normal(&mut rng, 2.0, -2.0)));
    assert!(bad(truncated_normal(&mut rng, nan, 2.0)));
    assert!(bad(truncated_normal(
        &mut rng,
        f64::INFINITY,
        f64::INFINITY
    )));
    assert!(bad(fill_truncated_normal_f32(
        &mut rng, &mut f32s, 0.0, 1.0, 3.0, -3.0
    )));
    assert!(bad(fill_truncated_normal_f64(
        &mut rng, &mut f64s, 0.0, -1.0, -3.0, 3.0
    )));
    assert!(bad(bernoulli(&mut rng, -0.1)));
    assert!(bad(bernoulli(&mut rng, 1.5)));
    assert!(bad(bernoulli(&mut rng, nan)));
    assert!(bad(fill_bernoulli(&mut rng, &mut [false; 3], 2.0)));
    assert!(bad(categorical::<_, f32>(&mut rng, &[])));
    assert!(bad(categorical(&mut rng, &[0.0f32, 0.0])));
    assert!(bad(categorical(&mut rng, &[1.0f32, -1.0])));
    assert!(bad(categorical(&mut rng, &[1.0f64, nan])));
    assert!(bad(categorical(&mut rng, &[f64::MAX, f64::MAX])));
    assert!(bad(fill_categorical(
        &mut rng,
        &[f32::INFINITY],
        &mut [0; 2]
    )));
    assert_eq!(rng, before, "a rejected call must not draw");
}
