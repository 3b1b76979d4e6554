//! Batched matmul against `numpy.matmul` in float64.

use rml_core::ops::matmul::{MatmulOptions, matmul, matmul_shape};

use super::fixture::{Output, Tensor, expected_f32, load};

/// rml sums `k` f32 products in order; the classic bound on the rounding error of
/// that sum (each product and each addition rounds by at most ε/2) is
/// `k·ε·Σ|a||b|`. The reference is the exact product rounded once (another ε/2
/// relative, ≤ ε/2·Σ|a||b|), so `(k + 1)·ε·Σ|a||b|` bounds the difference.
fn tolerance(k: usize, abs_bound: f32) -> f32 {
    (k as f32 + 1.0) * f32::EPSILON * abs_bound
}

#[test]
fn matmul_matches_numpy_within_the_f32_summation_bound() {
    for (n, case) in load("matmul.json").iter().enumerate() {
        let options = MatmulOptions {
            transpose_a: case["transpose_a"].as_bool().unwrap(),
            transpose_b: case["transpose_b"].as_bool().unwrap(),
        };
        let (a, b) = (Tensor::f32(&case["a"]), Tensor::f32(&case["b"]));
        let (shape, want) = expected_f32(&case["expected"]);
        let (_, bound) = expected_f32(&case["abs_bound"]);
        assert_eq!(
            matmul_shape(&a.shape(), &b.shape(), options)
                .unwrap()
                .dims(),
            &shape[..],
            "case {n}: shape"
        );
        let mut out = Output::new(case, &shape, -12345.0f32);
        matmul(&a.view(), &b.view(), &mut out.view_mut(), options).unwrap();
        let a_dims = a.shape();
        let a_dims = a_dims.dims();
        let k = if options.transpose_a {
            a_dims[a_dims.len() - 2]
        } else {
            a_dims[a_dims.len() - 1]
        };
        for (i, ((g, w), m)) in out.values().iter().zip(&want).zip(&bound).enumerate() {
            assert!(
                (g - w).abs() <= tolerance(k, *m),
                "matmul case {n} element {i}: got {g}, want {w} (k = {k}, bound {m})"
            );
        }
    }
}
