//! Vector kernels against plain f64 (libm) references: every ISA path the machine
//! runs, sizes 0, 1, primes and non-multiples of the vector width, unaligned
//! sub-slices, and dense sweeps of the f32 range for the math functions.

use half::{bf16, f16};
use rml_kernels::convert;
use rml_kernels::elementwise::{BinaryOp, Operand, UnaryOp, binary, unary, unary_inplace};
use rml_kernels::isa::Isa;
use rml_kernels::math;
use rml_kernels::norm::{layer_norm_rows, normalize_f64, rms_norm_rows};
use rml_kernels::reduce::{ReduceOp, moments_rows_f64, reduce_rows, sum_rows_f64};
use rml_kernels::softmax::{
    log_softmax_rows, softmax_parts_inplace, softmax_rows, softmax_rows_inplace,
};
use rml_kernels::testing::{MIRI, Rng, SIZES, for_each_isa, test_len, ulp_error, unary_reference};

/// Softmax: |y - ref| <= SOFTMAX_ATOL + SOFTMAX_RTOL |ref|.
const SOFTMAX_RTOL: f64 = 1e-5;
const SOFTMAX_ATOL: f64 = 1e-9;
/// Norms: |y - ref| <= NORM_ATOL + NORM_RTOL |ref| (inputs O(1)..O(100)).
const NORM_RTOL: f64 = 1e-5;
const NORM_ATOL: f64 = 1e-5;
/// Sums: |y - ref| <= n * f32::EPSILON * sum |x| (the worst case of any order).
const SUM_EPS_PER_TERM: f64 = f32::EPSILON as f64;
/// Variance relative tolerance (two-pass, inputs with an offset).
const VAR_RTOL: f64 = 1e-4;
/// Variance relative tolerance on rows that open with outliers: the two-pass forms
/// measure within 1.1e-7 there, shifted sums without their fallback 8e-7 to 5e-5
/// (100 to 4096 values, AVX2).
const OUTLIER_VAR_RTOL: f64 = 5e-7;

// --- f64 references ----------------------------------------------------------------

/// (max ULP over normal results, the x below which `tail_ulp` applies instead,
/// tail_ulp); subnormal results are held to `MATH_SUBNORMAL_ABS`.
fn bounds(op: UnaryOp) -> (f64, f32, f64) {
    let none = f32::NEG_INFINITY;
    match op {
        UnaryOp::Exp => (math::EXP_MAX_ULP, none, 0.0),
        UnaryOp::Log => (math::LOG_MAX_ULP, none, 0.0),
        UnaryOp::Tanh => (math::TANH_MAX_ULP, none, 0.0),
        UnaryOp::Sigmoid => (math::SIGMOID_MAX_ULP, none, 0.0),
        UnaryOp::Erf => (math::ERF_MAX_ULP, none, 0.0),
        UnaryOp::Gelu => (math::GELU_MAX_ULP, none, 0.0),
        UnaryOp::GeluTanh => (
            math::GELU_TANH_MAX_ULP,
            math::GELU_TANH_TAIL_X,
            math::GELU_TANH_TAIL_MAX_ULP,
        ),
        UnaryOp::Silu => (math::SILU_MAX_ULP, none, 0.0),
        UnaryOp::Softplus => (math::SOFTPLUS_MAX_ULP, none, 0.0),
        // Correctly rounded.
        _ => (0.5, none, 0.0),
    }
}

fn is_math(op: UnaryOp) -> bool {
    !matches!(
        op,
        UnaryOp::Neg
            | UnaryOp::Abs
            | UnaryOp::Relu
            | UnaryOp::Sqrt
            | UnaryOp::Square
            | UnaryOp::Recip
    )
}

/// Checks `y = op(x)` elementwise against the f64 reference; returns max ULP seen
/// over normal results.
fn check_unary(isa: Isa, op: UnaryOp, x: &[f32], y: &[f32]) -> f64 {
    let (max_ulp, tail, tail_ulp) = bounds(op);
    let mut worst = 0.0f64;
    for (&xi, &yi) in x.iter().zip(y) {
        let want = unary_reference(op, xi as f64);
        let bound = if xi < tail { tail_ulp } else { max_ulp };
        let e = ulp_error(yi, want);
        let ok = if want.is_nan() || want.is_infinite() || want.abs() >= f32::MIN_POSITIVE as f64 {
            if e.is_finite() && xi >= tail {
                worst = worst.max(e);
            }
            e <= bound
        } else {
            e <= bound || (yi as f64 - want).abs() <= math::MATH_SUBNORMAL_ABS
        };
        assert!(
            ok,
            "{} {}: x = {xi:e} ({:#010x}): got {yi:e}, want {want:e} ({} ulp)",
            isa.name(),
            op.name(),
            xi.to_bits(),
            ulp_error(yi, want)
        );
    }
    worst
}

fn specials() -> Vec<f32> {
    let mut v = vec![
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::from_bits(0x8000_0001),
        f32::from_bits(0x007f_ffff),
        f32::MAX,
        f32::MIN,
        1.0,
        -1.0,
        0.55,
        -0.55,
        0.875,
        -0.875,
        1.2374,
        4.0,
        -4.0,
        9.0,
        88.72283,
        88.72284,
        -87.33655,
        -103.27893,
        -103.97208,
        -104.5,
        20.0,
        -20.0,
        -10.0,
        -14.0,
        -5.0,
        1e-20,
        -1e-20,
        1e30,
        -1e30,
        core::f32::consts::SQRT_2,
        core::f32::consts::FRAC_1_SQRT_2,
    ];
    let mut more = Vec::new();
    for &s in &v {
        if s.is_finite() && s != 0.0 {
            more.push(f32::from_bits(s.to_bits() + 1));
            more.push(f32::from_bits(s.to_bits() - 1));
        }
    }
    v.extend(more);
    v
}

#[test]
fn math_dense_sweep_within_documented_bounds() {
    // Every `stride`-th f32 bit pattern (both signs, all exponents), plus specials.
    let stride: u64 = test_len(2039, (1 << 32) / 97) as u64;
    let mut xs: Vec<f32> = (0..(1u64 << 32) / stride)
        .map(|i| f32::from_bits((i * stride) as u32))
        .collect();
    xs.extend(specials());
    let mut y = vec![0.0f32; xs.len()];
    for_each_isa(|isa| {
        for op in UnaryOp::ALL {
            unary(op, &xs, &mut y).unwrap();
            let worst = check_unary(isa, op, &xs, &y);
            println!("{:>6} {:>10}: max {worst:.3} ulp", isa.name(), op.name());
        }
    });
}

#[test]
fn math_dense_sweep_of_the_active_ranges() {
    // Dense uniform grids over the ranges where the functions change.
    let n = test_len(200_000, 64);
    for_each_isa(|isa| {
        for op in UnaryOp::ALL.into_iter().filter(|&op| is_math(op)) {
            let (lo, hi) = match op {
                UnaryOp::Exp => (-104.0, 89.0),
                UnaryOp::Log => (0.0, 4.0),
                UnaryOp::Erf | UnaryOp::Tanh => (-6.0, 6.0),
                UnaryOp::Gelu | UnaryOp::GeluTanh => (-16.0, 16.0),
                _ => (-110.0, 30.0),
            };
            let xs: Vec<f32> = (0..n)
                .map(|i| lo + (hi - lo) * (i as f32 / n as f32))
                .collect();
            let mut y = vec![0.0f32; n];
            unary(op, &xs, &mut y).unwrap();
            check_unary(isa, op, &xs, &y);
        }
    });
}

#[test]
fn unary_matches_elementwise_on_ragged_unaligned_slices() {
    let mut rng = Rng::new(1);
    for_each_isa(|isa| {
        for op in UnaryOp::ALL {
            for &n in SIZES {
                for offset in 0..3 {
                    let mut buf = vec![0.0f32; n + offset];
                    rng.fill(&mut buf, -12.0, 12.0);
                    let x = &buf[offset..];
                    // Outputs at several alignments: the kernels write the elements
                    // before the first vector-aligned one as a head vector.
                    let o = 1 + 5 * offset;
                    let mut out = vec![f32::NAN; n + o];
                    unary(op, x, &mut out[o..]).unwrap();
                    check_unary(isa, op, x, &out[o..]);
                    // Each element is computed the same wherever it lies in the slice.
                    for (i, &xi) in x.iter().enumerate() {
                        let mut one = [0.0f32];
                        unary(op, &[xi], &mut one).unwrap();
                        assert!(
                            same(one[0], out[o + i]),
                            "{} {} n={n}",
                            isa.name(),
                            op.name()
                        );
                    }
                    // In place gives the same bits.
                    let mut inplace = vec![0.0; n + 3 * offset];
                    inplace[3 * offset..].copy_from_slice(x);
                    unary_inplace(op, &mut inplace[3 * offset..]);
                    let ok = inplace[3 * offset..]
                        .iter()
                        .zip(&out[o..])
                        .all(|(a, b)| same(*a, *b));
                    assert!(ok, "{} {} in place differs", isa.name(), op.name());
                }
            }
        }
    });
    let mut y = [0.0f32; 2];
    assert!(unary(UnaryOp::Exp, &[1.0], &mut y).is_err());
    assert!(math::exp(&[1.0, 2.0, 3.0], &mut y).is_err());
}

#[test]
fn math_common_case_paths_give_the_full_paths_values() {
    // A vector whose lanes all lie in a function's common-case range (log: positive
    // normal finite; softplus: |x| < 87; GELU: |x| < 12) takes a shorter path; one
    // lane outside sends the whole vector down the full path. Every lane must come
    // out the same either way, so each one is compared with the value the same
    // input gets alone (a lone value is padded with zeros, which log sends down its
    // full path, and an out-of-range value always takes it). The kernels take
    // vectors two at a time, both down the common case only where both may: 32
    // lanes are two AVX-512 vectors, four AVX2 ones, and the odd value goes in
    // either vector of a pair.
    let width = test_len(32, 16);
    let positive: Vec<f32> = (0..width).map(|i| 0.013 + 0.77 * i as f32).collect();
    let step = 22.6 / width as f32;
    let mixed: Vec<f32> = (0..width).map(|i| -11.3 + step * i as f32).collect();
    let odd = specials();
    let n = test_len(odd.len(), 6);
    // Under Miri the odd value goes in the last lane only (the second of two
    // AVX2 vectors, behind a common-case first one).
    let positions: &[usize] = if MIRI {
        &[width - 1]
    } else {
        &[0, 5, width / 2 - 1, width / 2 + 3, width - 1]
    };
    for_each_isa(|isa| {
        for op in UnaryOp::ALL.into_iter().filter(|&op| is_math(op)) {
            for base in [&positive, &mixed] {
                for &s in &odd[..n] {
                    for &p in positions {
                        let mut x = base.clone();
                        x[p] = s;
                        let mut y = vec![0.0f32; width];
                        unary(op, &x, &mut y).unwrap();
                        for (&xi, &yi) in x.iter().zip(&y) {
                            let mut one = [0.0f32];
                            unary(op, &[xi], &mut one).unwrap();
                            assert!(
                                same(one[0], yi),
                                "{} {}: x = {xi:e} next to {s:e}: {yi:e} vs {:e} alone",
                                isa.name(),
                                op.name(),
                                one[0]
                            );
                        }
                    }
                }
            }
        }
    });
}

/// GELU takes two vectors at a time down one branch where both are in its table
/// range (`|x| < 3.75`) or both past it (and below 12), and one after the other
/// where they differ or a lane reaches 12. Blocks of eight values of each kind, in
/// every order and at starts that pair them differently, must give every element
/// the bits it gets alone, in place too, within the reference bound.
#[test]
fn gelu_vector_pairs_give_each_element_its_own_bits() {
    let mut rng = Rng::new(11);
    let mut block = |kind: usize| {
        let mut b = [0.0f32; 8];
        match kind {
            0 => rng.fill(&mut b, -3.7, 3.7),
            1 => {
                rng.fill(&mut b, -11.9, 11.9);
                b[3] = -4.5;
            }
            _ => {
                rng.fill(&mut b, -3.7, 3.7);
                b[5] = 12.5;
            }
        }
        b
    };
    let mut x = Vec::new();
    for first in 0..3 {
        for second in 0..3 {
            x.extend(block(first));
            x.extend(block(second));
        }
    }
    let starts: &[usize] = if MIRI { &[0, 3] } else { &[0, 1, 4, 8, 11, 15] };
    for_each_isa(|isa| {
        for &start in starts {
            let x = &x[start..];
            let mut y = vec![0.0f32; x.len()];
            unary(UnaryOp::Gelu, x, &mut y).unwrap();
            check_unary(isa, UnaryOp::Gelu, x, &y);
            let mut inplace = x.to_vec();
            unary_inplace(UnaryOp::Gelu, &mut inplace);
            for ((&xi, &yi), &zi) in x.iter().zip(&y).zip(&inplace) {
                let mut one = [0.0f32];
                unary(UnaryOp::Gelu, &[xi], &mut one).unwrap();
                assert!(
                    same(one[0], yi) && same(yi, zi),
                    "{}: x = {xi:e} from {start}: {yi:e}, in place {zi:e}, alone {:e}",
                    isa.name(),
                    one[0]
                );
            }
        }
    });
}

/// A math slice function, its in-place form, and the op they stand for.
type MathFns = (
    UnaryOp,
    fn(&[f32], &mut [f32]) -> rml_core::Result<()>,
    fn(&mut [f32]),
);

#[test]
fn math_slice_functions_match_unary() {
    let x: Vec<f32> = (0..37).map(|i| i as f32 * 0.37 - 6.0).collect();
    let fns: [MathFns; 9] = [
        (UnaryOp::Exp, math::exp, math::exp_inplace),
        (UnaryOp::Log, math::log, math::log_inplace),
        (UnaryOp::Tanh, math::tanh, math::tanh_inplace),
        (UnaryOp::Sigmoid, math::sigmoid, math::sigmoid_inplace),
        (UnaryOp::Erf, math::erf, math::erf_inplace),
        (UnaryOp::Gelu, math::gelu, math::gelu_inplace),
        (UnaryOp::GeluTanh, math::gelu_tanh, math::gelu_tanh_inplace),
        (UnaryOp::Silu, math::silu, math::silu_inplace),
        (UnaryOp::Softplus, math::softplus, math::softplus_inplace),
    ];
    for_each_isa(|_| {
        for (op, f, fi) in fns {
            let mut a = vec![0.0; x.len()];
            let mut b = vec![0.0; x.len()];
            f(&x, &mut a).unwrap();
            unary(op, &x, &mut b).unwrap();
            let mut c = x.clone();
            fi(&mut c);
            for i in 0..x.len() {
                assert!(same(a[i], b[i]) && same(a[i], c[i]));
            }
        }
    });
}

/// Equal bits, or both NaN (NaN sign and payload are not specified by IEEE 754
/// arithmetic, and Miri randomizes them).
fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

#[test]
fn binary_broadcasting_matches_scalar_semantics() {
    let mut rng = Rng::new(2);
    let row_counts = [0usize, 1, 3];
    for_each_isa(|isa| {
        for op in BinaryOp::ALL {
            for &cols in SIZES {
                for &nrows in &row_counts {
                    let mut a = vec![0.0f32; nrows * cols + 1];
                    let mut b = vec![0.0f32; nrows * cols + 2];
                    rng.fill(&mut a, -4.0, 4.0);
                    rng.fill(&mut b, -4.0, 4.0);
                    if a.len() > 3 {
                        a[2] = f32::NAN;
                        b[3] = f32::NAN;
                        b[1] = 0.0;
                    }
                    let mut row = vec![0.0f32; cols];
                    rng.fill(&mut row, 0.5, 2.0);
                    // Unaligned matrix operands.
                    let (a, b) = (&a[1..], &b[2..]);
                    let s = rng.uniform(-3.0, 3.0);
                    let kinds = [Operand::Matrix(a), Operand::Row(&row), Operand::Scalar(s)];
                    let kinds_b = [Operand::Matrix(b), Operand::Row(&row), Operand::Scalar(s)];
                    for lhs in kinds {
                        for rhs in kinds_b {
                            let at = |o: &Operand<'_>, r: usize, c: usize| match *o {
                                Operand::Matrix(m) => m[r * cols + c],
                                Operand::Row(v) => v[c],
                                Operand::Scalar(v) => v,
                            };
                            let start = nrows.min(1);
                            let rows = start..nrows;
                            // An output at some offset: a padded head before its
                            // first vector-aligned element.
                            let o = (3 * cols + nrows) % 16;
                            let mut out_buf = vec![0.0f32; rows.len() * cols + o];
                            let out = &mut out_buf[o..];
                            binary(op, lhs, rhs, cols, rows.clone(), out).unwrap();
                            for r in rows.clone() {
                                for c in 0..cols {
                                    let want = op.apply(at(&lhs, r, c), at(&rhs, r, c));
                                    let got = out[(r - start) * cols + c];
                                    assert!(
                                        same(got, want),
                                        "{} {} cols={cols} r={r} c={c}: {got} vs {want}",
                                        isa.name(),
                                        op.name()
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    });
    let m = [1.0f32; 6];
    let mut out = [0.0f32; 6];
    assert!(
        binary(
            BinaryOp::Add,
            Operand::Matrix(&m),
            Operand::Row(&m[..2]),
            3,
            0..2,
            &mut out
        )
        .is_err()
    );
    assert!(
        binary(
            BinaryOp::Add,
            Operand::Matrix(&m),
            Operand::Scalar(1.0),
            3,
            0..3,
            &mut out
        )
        .is_err()
    );
    assert!(
        binary(
            BinaryOp::Add,
            Operand::Matrix(&m),
            Operand::Scalar(1.0),
            3,
            0..1,
            &mut out
        )
        .is_err()
    );
}

fn softmax64(x: &[f32]) -> Vec<f64> {
    let m = x.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
    let e: Vec<f64> = x.iter().map(|&v| libm::exp(v as f64 - m)).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|v| v / s).collect()
}

/// Log-softmax error bound per element of a row, in units of `f32::EPSILON`
/// times `1 + |want|`: the f32 sum of `cols` exponentials (relative error up to
/// about `cols · ε`, so `cols · ε` absolute in its log), `logf`, the two
/// subtractions and the vector `exp`'s ulps.
const LOG_SOFTMAX_EPS: f64 = 8.0;

#[test]
fn log_softmax_matches_rml_core() {
    use rml_core::ops::softmax::log_softmax;
    use rml_core::{Shape, TensorView, TensorViewMut};
    let mut rng = Rng::new(4);
    for_each_isa(|isa| {
        for &cols in SIZES.iter().filter(|&&c| c > 0) {
            // Rows around 1000 too: the vector paths' exponentials carry a
            // constant of the row's (up to 1000 · 2^-23 in the exponent), which
            // must come back out of `ln Σ`.
            for (scale, offset) in [(1.0f32, 0.0f32), (30.0, 0.0), (2.0, 1000.0)] {
                let rows = 3;
                let mut x = vec![0.0f32; rows * cols];
                rng.fill(&mut x, -scale, scale);
                x.iter_mut().for_each(|v| *v += offset);
                if cols > 2 {
                    x[cols + 1] = f32::NEG_INFINITY;
                }
                let shape = Shape::new(&[rows, cols]).unwrap();
                let xv = TensorView::new(&x[..], shape).unwrap();
                let mut want = vec![0.0f32; rows * cols];
                log_softmax(&xv, -1, &mut TensorViewMut::new(&mut want, shape).unwrap()).unwrap();
                let mut got = vec![0.0f32; 2 * cols];
                log_softmax_rows(&x, cols, 1..3, &mut got).unwrap();
                for (g, w) in got.iter().zip(&want[cols..]) {
                    let (g, w) = (f64::from(*g), f64::from(*w));
                    let tol =
                        (cols as f64 + LOG_SOFTMAX_EPS) * f64::from(f32::EPSILON) * (1.0 + w.abs());
                    assert!(
                        g == w || (g - w).abs() <= tol,
                        "{} cols={cols}: {g} vs {w}",
                        isa.name()
                    );
                }
            }
        }
        let mut y = [0.0f32; 3];
        log_softmax_rows(&[1.0, f32::NAN, 0.0], 3, 0..1, &mut y).unwrap();
        assert!(y.iter().all(|v| v.is_nan()));
        log_softmax_rows(&[f32::NEG_INFINITY; 3], 3, 0..1, &mut y).unwrap();
        assert!(y.iter().all(|v| v.is_nan()));
    });
    assert!(log_softmax_rows(&[0.0; 4], 2, 0..3, &mut [0.0; 6]).is_err());
}

#[test]
fn softmax_matches_reference() {
    let mut rng = Rng::new(3);
    for_each_isa(|isa| {
        for &cols in SIZES {
            for scale in [1.0f32, 30.0] {
                let nrows = 3;
                let mut x = vec![0.0f32; nrows * cols + 1];
                rng.fill(&mut x, -scale, scale);
                if cols > 2 {
                    x[1 + cols + 1] = f32::NEG_INFINITY;
                }
                let x = &x[1..];
                let mut y = vec![0.0f32; 2 * cols];
                softmax_rows(x, cols, 1..3, &mut y).unwrap();
                for r in 1..3 {
                    let want = softmax64(&x[r * cols..(r + 1) * cols]);
                    for c in 0..cols {
                        let got = y[(r - 1) * cols + c] as f64;
                        assert!(
                            (got - want[c]).abs() <= SOFTMAX_ATOL + SOFTMAX_RTOL * want[c],
                            "{} cols={cols}: {got} vs {}",
                            isa.name(),
                            want[c]
                        );
                    }
                }
                let mut z = x[cols..].to_vec();
                softmax_rows_inplace(&mut z, cols).unwrap();
                assert!(z.iter().zip(&y).all(|(a, b)| same(*a, *b)));
                // The unscaled parts: each row's exact max, and exponentials whose
                // share of their sum is the softmax.
                let mut e = x[cols..].to_vec();
                let (mut maxes, mut sums) = ([0.0f32; 2], [0.0f32; 2]);
                let rows = 2 * usize::from(cols > 0);
                softmax_parts_inplace(&mut e, cols, &mut maxes[..rows], &mut sums[..rows]).unwrap();
                for r in 0..rows {
                    let row = &x[(r + 1) * cols..(r + 2) * cols];
                    assert_eq!(
                        maxes[r],
                        row.iter().copied().fold(f32::NEG_INFINITY, f32::max)
                    );
                    let want = softmax64(row);
                    for c in 0..cols {
                        let got = f64::from(e[r * cols + c]) / f64::from(sums[r]);
                        assert!(
                            (got - want[c]).abs() <= SOFTMAX_ATOL + SOFTMAX_RTOL * want[c],
                            "{} parts cols={cols}: {got} vs {}",
                            isa.name(),
                            want[c]
                        );
                    }
                }
            }
        }
        let mut y = [0.0f32; 3];
        softmax_rows(&[1.0, f32::NAN, 0.0], 3, 0..1, &mut y).unwrap();
        assert!(y.iter().all(|v| v.is_nan()));
        softmax_rows(&[1000.0, 1000.0, -1000.0], 3, 0..1, &mut y).unwrap();
        assert_eq!(y, [0.5, 0.5, 0.0]);
        // A maximum whose `max · log2 e` overflows f32 (the vector paths then
        // take `e^{x − max}` as it stands).
        let huge = [3e38, -1.0, 3e38];
        softmax_rows(&huge, 3, 0..1, &mut y).unwrap();
        assert_eq!(y, [0.5, 0.0, 0.5], "{}", isa.name());
        log_softmax_rows(&huge, 3, 0..1, &mut y).unwrap();
        let ln2 = std::f32::consts::LN_2;
        assert_eq!(y, [-ln2, -3e38, -ln2], "{}", isa.name());
        // A NaN or +inf anywhere in a longer row (whole vectors and the tail; the
        // row maximum skips NaN, the sum of exponentials carries it) gives NaN
        // everywhere, from all three entry points.
        for bad in [f32::NAN, f32::INFINITY] {
            for at in [0, 5, 17, 40, 66] {
                let mut x: Vec<f32> = (0..67).map(|i| (i as f32 * 0.37).sin()).collect();
                x[at] = bad;
                let mut y = vec![0.0f32; 67];
                softmax_rows(&x, 67, 0..1, &mut y).unwrap();
                assert!(y.iter().all(|v| v.is_nan()), "{} {bad} at {at}", isa.name());
                log_softmax_rows(&x, 67, 0..1, &mut y).unwrap();
                assert!(
                    y.iter().all(|v| v.is_nan()),
                    "{} log {bad} at {at}",
                    isa.name()
                );
                softmax_rows_inplace(&mut x, 67).unwrap();
                assert!(
                    x.iter().all(|v| v.is_nan()),
                    "{} inplace {bad} at {at}",
                    isa.name()
                );
            }
        }
    });
    let mut y = [0.0f32; 4];
    assert!(softmax_rows(&[0.0; 4], 2, 0..3, &mut y).is_err());
    assert!(softmax_rows_inplace(&mut [0.0; 5], 2).is_err());
    assert!(softmax_parts_inplace(&mut [0.0; 5], 2, &mut [0.0; 2], &mut [0.0; 2]).is_err());
    assert!(softmax_parts_inplace(&mut [0.0; 4], 2, &mut [0.0; 2], &mut [0.0; 1]).is_err());
}

#[test]
fn norms_match_reference() {
    let mut rng = Rng::new(4);
    for_each_isa(|isa| {
        for &cols in SIZES {
            // Rows 1..4 normalized: a pair of rows (layer norm with gamma and beta
            // takes them two at a time) and a last row alone.
            let nrows = 4;
            let mut x = vec![0.0f32; nrows * cols + 3];
            rng.fill(&mut x, -2.0, 2.0);
            for (i, v) in x.iter_mut().enumerate() {
                *v += if i % 2 == 0 { 50.0 } else { 0.0 };
            }
            let x = &mut x[3..];
            // Rows of different scales: a row normalized with another row's
            // statistics (the kernels take the next row's ahead) is off by 2x.
            for (r, row) in x.chunks_mut(cols.max(1)).enumerate() {
                row.iter_mut().for_each(|v| *v *= (r + 1) as f32);
            }
            let x = &*x;
            let mut g = vec![0.0f32; cols];
            let mut b = vec![0.0f32; cols];
            rng.fill(&mut g, 0.5, 1.5);
            rng.fill(&mut b, -1.0, 1.0);
            let eps = 1e-5f32;
            for (gamma, beta) in [
                (None, None),
                (Some(&g[..]), Some(&b[..])),
                (Some(&g[..]), None),
            ] {
                let mut y = vec![0.0f32; (nrows - 1) * cols];
                layer_norm_rows(x, cols, 1..nrows, gamma, beta, eps, &mut y).unwrap();
                let mut z = vec![0.0f32; (nrows - 1) * cols];
                rms_norm_rows(x, cols, 1..nrows, gamma, eps, &mut z).unwrap();
                for r in 1..nrows {
                    let row: Vec<f64> = x[r * cols..(r + 1) * cols]
                        .iter()
                        .map(|&v| v as f64)
                        .collect();
                    let n = cols as f64;
                    let mean = row.iter().sum::<f64>() / n;
                    let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
                    let ms = row.iter().map(|v| v * v).sum::<f64>() / n;
                    for c in 0..cols {
                        let gc = gamma.map_or(1.0, |g| g[c] as f64);
                        let bc = beta.map_or(0.0, |b| b[c] as f64);
                        let want = (row[c] - mean) / (var + eps as f64).sqrt() * gc + bc;
                        let got = y[(r - 1) * cols + c] as f64;
                        assert!(
                            (got - want).abs() <= NORM_ATOL + NORM_RTOL * want.abs(),
                            "{} layer_norm cols={cols}: {got} vs {want}",
                            isa.name()
                        );
                        let want = row[c] / (ms + eps as f64).sqrt() * gc;
                        let got = z[(r - 1) * cols + c] as f64;
                        assert!(
                            (got - want).abs() <= NORM_ATOL + NORM_RTOL * want.abs(),
                            "{} rms_norm cols={cols}: {got} vs {want}",
                            isa.name()
                        );
                    }
                }
            }
        }
    });
    // No rows: nothing to do, whatever lies around the empty range.
    assert!(layer_norm_rows(&[1.0; 4], 2, 1..1, None, None, 1e-5, &mut []).is_ok());
    assert!(rms_norm_rows(&[1.0; 4], 2, 2..2, None, 1e-5, &mut []).is_ok());
    let mut y = [0.0f32; 4];
    assert!(layer_norm_rows(&[0.0; 4], 2, 0..2, Some(&[1.0]), None, 1e-5, &mut y).is_err());
    assert!(rms_norm_rows(&[0.0; 4], 2, 0..2, None, 1e-5, &mut y[..3]).is_err());
}

#[test]
fn reductions_match_reference() {
    let mut rng = Rng::new(5);
    for_each_isa(|isa| {
        for &cols in SIZES {
            let nrows = 4;
            let mut x = vec![0.0f32; nrows * cols + 1];
            rng.fill(&mut x, -3.0, 5.0);
            let x = &x[1..];
            for op in ReduceOp::ALL {
                let mut out = vec![0.0f32; 3];
                reduce_rows(op, x, cols, 1..4, &mut out).unwrap();
                for r in 1..4 {
                    let row: Vec<f64> = x[r * cols..(r + 1) * cols]
                        .iter()
                        .map(|&v| v as f64)
                        .collect();
                    let n = cols as f64;
                    let sum: f64 = row.iter().sum();
                    let abs: f64 = row.iter().map(|v| v.abs()).sum();
                    let got = out[r - 1] as f64;
                    let (want, tol) = match op {
                        ReduceOp::Sum => (sum, n * SUM_EPS_PER_TERM * abs),
                        ReduceOp::Max => {
                            (row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v)), 0.0)
                        }
                        ReduceOp::Mean => (sum / n, (n * SUM_EPS_PER_TERM * abs + 1e-30) / n),
                        ReduceOp::Variance => {
                            let mean = sum / n;
                            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
                            (var, VAR_RTOL * var + 1e-12)
                        }
                    };
                    if cols == 0 {
                        let ok = match op {
                            ReduceOp::Sum => got == 0.0,
                            ReduceOp::Max => got == f64::NEG_INFINITY,
                            _ => got.is_nan(),
                        };
                        assert!(ok, "{} {} of an empty row: {got}", isa.name(), op.name());
                    } else {
                        assert!(
                            (got - want).abs() <= tol,
                            "{} {} cols={cols}: {got} vs {want}",
                            isa.name(),
                            op.name()
                        );
                    }
                }
            }
            if cols > 2 {
                // A NaN of either sign anywhere (first, middle of the unrolled
                // body, last) gives NaN; infinities are ordinary values.
                for at in [0, cols / 2, cols - 1] {
                    for special in [f32::NAN, -f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
                        let mut y = x[..cols].to_vec();
                        y[at] = special;
                        let mut out = [0.0f32];
                        reduce_rows(ReduceOp::Max, &y, cols, 0..1, &mut out).unwrap();
                        let want = y.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                        let ok = if special.is_nan() {
                            out[0].is_nan()
                        } else {
                            out[0] == want
                        };
                        assert!(
                            ok,
                            "{} max with {special} at {at} of {cols}: {}",
                            isa.name(),
                            out[0]
                        );
                    }
                }
            }
        }
    });
    let mut out = [0.0f32; 2];
    assert!(reduce_rows(ReduceOp::Sum, &[0.0; 4], 2, 0..3, &mut out).is_err());
    assert!(reduce_rows(ReduceOp::Sum, &[0.0; 4], 2, 0..1, &mut out).is_err());
}

#[test]
fn variance_keeps_precision_under_a_large_offset() {
    // Values 1000 + U(-1, 1): a one-pass `E[x²] − E[x]²` in f32 would lose every
    // digit of the ~0.33 variance to the ~10⁶ squares; the two-pass form and the
    // blockwise two-pass moments keep VAR_RTOL. Lengths cover the two-pass form,
    // several blocks, a group of four (under Miri too), a partial block and a
    // partial vector.
    let mut rng = Rng::new(6);
    for_each_isa(|isa| {
        for cols in [1usize, 15, 256, 257, test_len(1000, 33), 4099] {
            let mut x = vec![0.0f32; 2 * cols];
            rng.fill(&mut x, -1.0, 1.0);
            x.iter_mut().for_each(|v| *v += 1000.0);
            let mut out = [0.0f32; 2];
            reduce_rows(ReduceOp::Variance, &x, cols, 0..2, &mut out).unwrap();
            for (row, &got) in x.chunks_exact(cols).zip(&out) {
                let var = f64_variance(row);
                let ok = (f64::from(got) - var).abs() <= VAR_RTOL * var + 1e-12;
                assert!(ok, "{} cols={cols}: {got} vs {var}", isa.name());
            }
        }
    });
}

#[test]
fn variance_keeps_precision_when_a_row_opens_with_outliers() {
    // The first 16 values of each row (a whole vector on every path) sit 1000 above
    // the rest, so the vector paths' shift (the opening vector's mean) lies far
    // from the row's mean: their shifted sums would cancel, and these rows must
    // fall back to the two-pass form.
    let mut rng = Rng::new(8);
    for_each_isa(|isa| {
        for cols in [17usize, 100, test_len(1024, 40), test_len(4096, 40)] {
            let mut x = vec![0.0f32; 2 * cols];
            rng.fill(&mut x, -1.0, 1.0);
            for row in x.chunks_exact_mut(cols) {
                row[..16].iter_mut().for_each(|v| *v += 1000.0);
            }
            let mut out = [0.0f32; 2];
            reduce_rows(ReduceOp::Variance, &x, cols, 0..2, &mut out).unwrap();
            for (row, &got) in x.chunks_exact(cols).zip(&out) {
                let var = f64_variance(row);
                let ok = (f64::from(got) - var).abs() <= OUTLIER_VAR_RTOL * var;
                assert!(ok, "{} cols={cols}: {got} vs {var}", isa.name());
            }
        }
        // Eight values 4e18 then eight −4e18: the variance, 1.6e37, fits in f32,
        // but the squares about a shift of 4e18 (the opening vector's mean on AVX2
        // and NEON) overflow.
        let a = 4e18f32;
        let mut x = [a; 16];
        x[8..].fill(-a);
        let mut out = [0.0f32];
        reduce_rows(ReduceOp::Variance, &x, 16, 0..1, &mut out).unwrap();
        assert_eq!(out[0], a * a, "{} ±4e18", isa.name());
    });
}

/// Population variance of `row` in f64, two passes.
fn f64_variance(row: &[f32]) -> f64 {
    let n = row.len() as f64;
    let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
    row.iter()
        .map(|&v| (f64::from(v) - mean).powi(2))
        .sum::<f64>()
        / n
}

#[test]
fn streaming_row_kernels_give_the_in_cache_bits() {
    // A call over more than 1 MiB streams (prefetching ahead, and taking a
    // variance's groups of four blocks one block at a time); each row must come
    // out as a call over that row alone computes it. Rows of 2612 values take the
    // two-pass form in one piece; rows of 5684 go by blocks: five groups of
    // blocks, two more blocks, a partial block and vector.
    for (rows, cols) in [
        (test_len(105, 2), test_len(2612, 40)),
        (test_len(50, 2), test_len(5684, 40)),
    ] {
        streamed_rows_match_single_rows(rows, cols);
    }
}

/// The streaming test's checks over `rows` rows of `cols` values.
fn streamed_rows_match_single_rows(rows: usize, cols: usize) {
    let mut rng = Rng::new(7);
    let mut x = vec![0.0f32; rows * cols];
    rng.fill(&mut x, -3.0, 5.0);
    // A NaN in one row, for the streamed maximum's NaN tracking.
    x[cols + 17] = f32::NAN;
    let mut params = vec![0.0f32; 2 * cols];
    rng.fill(&mut params, -1.0, 2.0);
    for_each_isa(|isa| {
        let mut max = vec![0.0f32; rows];
        reduce_rows(ReduceOp::Max, &x, cols, 0..rows, &mut max).unwrap();
        for (r, (&m, row)) in max.iter().zip(x.chunks_exact(cols)).enumerate() {
            let want = row.iter().fold(f32::NEG_INFINITY, |a, &v| {
                if a.is_nan() || v.is_nan() {
                    f32::NAN
                } else {
                    a.max(v)
                }
            });
            assert!(same(m, want), "{} max row {r}: {m} vs {want}", isa.name());
        }
        let mut soft = vec![0.0f32; rows * cols];
        softmax_rows(&x, cols, 0..rows, &mut soft).unwrap();
        for (r, sr) in soft.chunks_exact(cols).enumerate() {
            let mut one = vec![0.0f32; cols];
            softmax_rows(&x, cols, r..r + 1, &mut one).unwrap();
            assert_eq!(sr[0].is_nan(), r == 1, "{} softmax row {r}", isa.name());
            let all_same = sr.iter().zip(&one).all(|(&a, &b)| same(a, b));
            assert!(all_same, "{} softmax row {r}", isa.name());
        }
        let mut var = vec![0.0f32; rows];
        reduce_rows(ReduceOp::Variance, &x, cols, 0..rows, &mut var).unwrap();
        let mut y = vec![0.0f32; rows * cols];
        layer_norm_rows(&x, cols, 0..rows, None, None, 1e-5, &mut y).unwrap();
        for (r, (&v, yr)) in var.iter().zip(y.chunks_exact(cols)).enumerate() {
            let mut one = [0.0f32];
            reduce_rows(ReduceOp::Variance, &x, cols, r..r + 1, &mut one).unwrap();
            assert!(same(v, one[0]), "{} variance row {r}", isa.name());
            let mut yo = vec![0.0f32; cols];
            layer_norm_rows(&x, cols, r..r + 1, None, None, 1e-5, &mut yo).unwrap();
            let all_same = yr.iter().zip(&yo).all(|(&a, &b)| same(a, b));
            assert!(all_same, "{} layer_norm row {r}", isa.name());
        }
        // With gamma and beta the rows go two at a time, an odd last row alone.
        let (g, b) = (&params[..cols], &params[cols..]);
        layer_norm_rows(&x, cols, 0..rows, Some(g), Some(b), 1e-5, &mut y).unwrap();
        for (r, yr) in y.chunks_exact(cols).enumerate() {
            let mut yo = vec![0.0f32; cols];
            layer_norm_rows(&x, cols, r..r + 1, Some(g), Some(b), 1e-5, &mut yo).unwrap();
            let all_same = yr.iter().zip(&yo).all(|(&a, &b)| same(a, b));
            assert!(
                all_same,
                "{} layer_norm with gamma and beta, row {r}",
                isa.name()
            );
        }
    });
}

#[test]
fn f64_row_sums_equal_rml_core_bit_for_bit() {
    use rml_core::ops::reduce::{ReduceOp as CoreOp, reduce};
    use rml_core::{Shape, TensorView, TensorViewMut};
    let mut rng = Rng::new(6);
    for_each_isa(|isa| {
        // Rows around the 4-row blocks, columns around the 4-column transposes.
        for rows in [1, 3, 4, 5, 9] {
            for &cols in SIZES.iter().filter(|&&c| c > 0) {
                let x = cancelling_rows(&mut rng, rows, cols);
                let input = TensorView::new(&x[..], Shape::new(&[rows, cols]).unwrap()).unwrap();
                for (mean, op) in [(false, CoreOp::Sum), (true, CoreOp::Mean)] {
                    let mut want = vec![0.0f32; rows];
                    let shape = Shape::new(&[rows]).unwrap();
                    let mut wv = TensorViewMut::new(&mut want, shape).unwrap();
                    reduce(op, &input, &[-1], false, &mut wv).unwrap();
                    let mut got = vec![f32::NAN; rows];
                    sum_rows_f64(&x, cols, mean, &mut got).unwrap();
                    let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                    assert_eq!(
                        bits(&got),
                        bits(&want),
                        "{} {rows}x{cols} mean={mean}",
                        isa.name()
                    );
                }
            }
        }
    });
    let mut out = [0.0f32; 2];
    assert!(sum_rows_f64(&[0.0; 4], 0, false, &mut out).is_err());
    assert!(sum_rows_f64(&[0.0; 5], 2, false, &mut out).is_err());
}

/// Rows of small values among ±2^60 (which cancel: a small value added next to a
/// 2^60 is lost, so another summation order gives other bits).
fn cancelling_rows(rng: &mut Rng, rows: usize, cols: usize) -> Vec<f32> {
    (0..rows * cols)
        .map(|_| match rng.uniform(0.0, 1.0) {
            u if u < 0.2 => 2f32.powi(60),
            u if u < 0.4 => -(2f32.powi(60)),
            _ => rng.uniform(-1.0, 1.0),
        })
        .collect()
}

#[test]
fn f64_row_moments_normalize_as_rml_core_group_norm_bit_for_bit() {
    use rml_core::ops::norm::{Affine, group_norm, moments as core_moments};
    use rml_core::{Shape, TensorView, TensorViewMut};
    let mut rng = Rng::new(7);
    let (eps, gamma, beta) = (1e-5f32, [1.5f32], [-0.25f32]);
    for_each_isa(|isa| {
        for rows in [1, 3, 4, 5, 9] {
            for &cols in SIZES.iter().filter(|&&c| c > 0) {
                // Half the rows cancelling around ±2^60, half plain.
                let mut x = cancelling_rows(&mut rng, rows, cols);
                for v in x.iter_mut().skip(rows / 2 * cols) {
                    *v = rng.uniform(-3.0, 3.0);
                }
                // rml-core: each row one image of one channel, one group.
                let shape = Shape::new(&[rows, 1, cols]).unwrap();
                let input = TensorView::new(&x[..], shape).unwrap();
                let one = Shape::new(&[1]).unwrap();
                let affine = Affine {
                    weight: Some(TensorView::new(&gamma[..], one).unwrap()),
                    bias: Some(TensorView::new(&beta[..], one).unwrap()),
                };
                let mut want = vec![0.0f32; rows * cols];
                let mut wv = TensorViewMut::new(&mut want, shape).unwrap();
                group_norm(&input, 1, affine, eps, &mut wv).unwrap();
                // The kernel's moments: rml-core's bits, and through rml-core's
                // normalization formula its group_norm output.
                let mut moments = vec![[f64::NAN; 2]; rows];
                moments_rows_f64(&x, cols, &mut moments).unwrap();
                for (row, &[mean, var]) in x.chunks_exact(cols).zip(&moments) {
                    let (m, v) = core_moments(row, 0..cols);
                    let what = format!("{} {rows}x{cols}", isa.name());
                    assert_eq!(
                        (mean.to_bits(), var.to_bits()),
                        (m.to_bits(), v.to_bits()),
                        "{what}"
                    );
                }
                let mut got = vec![f32::NAN; rows * cols];
                let rows_out = got.chunks_exact_mut(cols);
                for ((row, &[mean, var]), y) in x.chunks_exact(cols).zip(&moments).zip(rows_out) {
                    let inv_std = 1.0 / (var + f64::from(eps)).sqrt();
                    let params = [mean, inv_std, f64::from(gamma[0]), f64::from(beta[0])];
                    normalize_f64(row, params, y).unwrap();
                }
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{} {rows}x{cols}", isa.name());
            }
        }
    });
    let mut out = [[0.0f64; 2]; 2];
    assert!(moments_rows_f64(&[0.0; 4], 0, &mut out).is_err());
    assert!(moments_rows_f64(&[0.0; 5], 2, &mut out).is_err());
    assert!(normalize_f64(&[0.0; 4], [0.0, 1.0, 1.0, 0.0], &mut [0.0; 3]).is_err());
}

#[test]
fn conversions_match_half_bit_for_bit() {
    // Every f16 and bf16 bit pattern widens exactly as `half` does.
    let step = test_len(1, 4099);
    let all: Vec<u16> = (0..=u16::MAX).step_by(step).collect();
    let h: Vec<f16> = all.iter().map(|&b| f16::from_bits(b)).collect();
    let bh: Vec<bf16> = all.iter().map(|&b| bf16::from_bits(b)).collect();
    // f32 inputs: a strided sweep of bit patterns, ties, specials.
    let stride = test_len(4093, (1 << 32) / 61) as u64;
    let mut xs: Vec<f32> = (0..(1u64 << 32) / stride)
        .map(|i| f32::from_bits((i * stride) as u32))
        .collect();
    xs.extend(specials());
    for b in [0x3c00u32, 0x0001, 0x03ff, 0x7bff, 0x0400] {
        // f16 ties and near-ties in the f32 domain.
        let f = f16::from_bits(b as u16).to_f32().to_bits();
        xs.extend([f + 0x1000, f + 0x0fff, f + 0x1001, f + 0x3000, f - 0x1000].map(f32::from_bits));
    }
    for b in [0x3f80_0000u32, 0x3f81_0000, 0x0001_0000] {
        xs.extend([b + 0x8000, b + 0x7fff, b + 0x8001, b + 0x18000].map(f32::from_bits));
    }
    xs.extend([
        f32::from_bits(0x7f80_0001),
        f32::from_bits(0xffc0_1234),
        f32::from_bits(0x7fbf_ffff),
    ]);
    for_each_isa(|isa| {
        for &n in SIZES.iter().chain([all.len()].iter()) {
            let off = n.min(1);
            let n = n.min(all.len() - off);
            let mut f = vec![0.0f32; n];
            convert::f16_to_f32(&h[off..off + n], &mut f).unwrap();
            for (i, v) in f.iter().enumerate() {
                assert_eq!(
                    v.to_bits(),
                    h[off + i].to_f32().to_bits(),
                    "{} f16 {:#06x}",
                    isa.name(),
                    h[off + i].to_bits()
                );
            }
            convert::bf16_to_f32(&bh[off..off + n], &mut f).unwrap();
            for (i, v) in f.iter().enumerate() {
                assert_eq!(
                    v.to_bits(),
                    bh[off + i].to_f32().to_bits(),
                    "{} bf16 {:#06x}",
                    isa.name(),
                    bh[off + i].to_bits()
                );
            }
        }
        for &n in SIZES.iter().chain([xs.len() - 1].iter()) {
            let off = n.min(1);
            let src = &xs[off..off + n];
            let mut h = vec![f16::ZERO; n];
            let mut b = vec![bf16::ZERO; n];
            convert::f32_to_f16(src, &mut h).unwrap();
            convert::f32_to_bf16(src, &mut b).unwrap();
            for i in 0..n {
                assert_eq!(
                    h[i].to_bits(),
                    f16::from_f32(src[i]).to_bits(),
                    "{} f32->f16 {:#010x}",
                    isa.name(),
                    src[i].to_bits()
                );
                assert_eq!(
                    b[i].to_bits(),
                    bf16::from_f32(src[i]).to_bits(),
                    "{} f32->bf16 {:#010x}",
                    isa.name(),
                    src[i].to_bits()
                );
            }
        }
    });
    let mut f = [0.0f32; 2];
    assert!(convert::f16_to_f32(&[f16::ONE], &mut f).is_err());
}

/// A bf16 NaN at any place in a run of ordinary values, signalling or quiet,
/// comes out as `half` widens it (quiet, payload and sign kept), and its
/// neighbours exactly: the vector paths test a whole group of vectors for NaN at
/// once and quiet only the groups that hold one.
#[test]
fn bf16_nan_anywhere_widens_as_half_does() {
    for_each_isa(|isa| {
        for nan in [0x7f81u16, 0xffc5, 0x7fc0] {
            for at in 0..70 {
                let mut src = vec![bf16::from_f32(1.5); 70];
                src[at] = bf16::from_bits(nan);
                let mut out = vec![0.0f32; 70];
                convert::bf16_to_f32(&src, &mut out).unwrap();
                for (i, (v, s)) in out.iter().zip(&src).enumerate() {
                    assert_eq!(
                        v.to_bits(),
                        s.to_f32().to_bits(),
                        "{}: NaN {nan:#06x} at {at}, element {i}",
                        isa.name()
                    );
                }
            }
        }
    });
}

/// An f32 NaN at any place in a run of ordinary values, signalling or quiet,
/// narrows to bf16 and f16 as `half` narrows it, and its neighbours exactly: the
/// vector paths test four vectors for bf16 NaN at once and take the NaN handling
/// only for the groups that hold one.
#[test]
fn f32_nan_anywhere_narrows_as_half_does() {
    for_each_isa(|isa| {
        for nan in [0x7f80_0001u32, 0xffc0_8001, 0x7fff_ffff] {
            // Under Miri every fifth place: still every vector of each group.
            for at in (0..70).step_by(test_len(1, 5)) {
                let mut src = vec![1.5f32; 70];
                src[at] = f32::from_bits(nan);
                let mut b = vec![bf16::ZERO; 70];
                let mut h = vec![f16::ZERO; 70];
                convert::f32_to_bf16(&src, &mut b).unwrap();
                convert::f32_to_f16(&src, &mut h).unwrap();
                for (i, s) in src.iter().enumerate() {
                    let isa = isa.name();
                    let (b, h) = (b[i].to_bits(), h[i].to_bits());
                    assert_eq!(
                        b,
                        bf16::from_f32(*s).to_bits(),
                        "{isa} bf16: {nan:#x} at {at}, {i}"
                    );
                    assert_eq!(
                        h,
                        f16::from_f32(*s).to_bits(),
                        "{isa} f16: {nan:#x} at {at}, {i}"
                    );
                }
            }
        }
    });
}

/// Conversions whose f32 side passes 32 MiB stream their output (x86): bit for bit
/// what `half` gives, through a head longer than one vector (the u16 output starts
/// 5 values past a 64-byte boundary), the streamed body and a tail. The narrowed
/// pairs include ones whose 32 bits read as a signalling NaN (bf16 `[1, inf]`),
/// which the streamed form moves through float registers.
#[test]
#[cfg(target_arch = "x86_64")]
#[cfg_attr(miri, ignore)] // 100 MiB of buffers.
fn conversions_past_the_cache_size_stream_the_same_bits() {
    let n = (32 << 20) / 4 + 37;
    let mut rng = Rng::new(23);
    let mut pattern = vec![0.0f32; 1021];
    rng.fill(&mut pattern, -70000.0, 70000.0);
    pattern.extend(specials());
    pattern.extend([1.0, f32::INFINITY, 1.0, f32::NEG_INFINITY]);
    pattern.extend([f32::from_bits(0x7f80_0001), f32::from_bits(0xffc0_1234)]);
    let xs: Vec<f32> = pattern.iter().copied().cycle().take(n).collect();
    let bits: Vec<u16> = (0..n).map(|i| (i * 7919 % 65536) as u16).collect();
    let h: Vec<f16> = bits.iter().map(|&b| f16::from_bits(b)).collect();
    let bh: Vec<bf16> = bits.iter().map(|&b| bf16::from_bits(b)).collect();
    let (mut wide, mut narrow) = (vec![0.0f32; n + 16], vec![0u16; n + 32]);
    let wide_off = 3 + (16 - wide.as_ptr().addr() / 4 % 16) % 16;
    let narrow_off = 5 + (32 - narrow.as_ptr().addr() / 2 % 32) % 32;
    let first_bad = |got: &[u16], want: &dyn Fn(usize) -> u16| (0..n).find(|&i| got[i] != want(i));
    for_each_isa(|isa| {
        let out = &mut wide[wide_off..wide_off + n];
        convert::f16_to_f32(&h, out).unwrap();
        let bad = (0..n).find(|&i| out[i].to_bits() != h[i].to_f32().to_bits());
        assert!(bad.is_none(), "{} f16->f32: element {bad:?}", isa.name());
        convert::bf16_to_f32(&bh, out).unwrap();
        let bad = (0..n).find(|&i| out[i].to_bits() != bh[i].to_f32().to_bits());
        assert!(bad.is_none(), "{} bf16->f32: element {bad:?}", isa.name());
        let out = &mut narrow[narrow_off..narrow_off + n];
        convert::f32_to_f16(&xs, bytemuck::cast_slice_mut(out)).unwrap();
        let bad = first_bad(out, &|i| f16::from_f32(xs[i]).to_bits());
        assert!(bad.is_none(), "{} f32->f16: element {bad:?}", isa.name());
        convert::f32_to_bf16(&xs, bytemuck::cast_slice_mut(out)).unwrap();
        let bad = first_bad(out, &|i| bf16::from_f32(xs[i]).to_bits());
        assert!(bad.is_none(), "{} f32->bf16: element {bad:?}", isa.name());
    });
}

/// Outputs beyond 32 MiB are written with non-temporal stores (x86): the same bits
/// as the plain stores of calls below that size, through an unaligned head, the
/// streamed body and a tail, for a unary op, a flat binary op, a broadcast row,
/// softmax and log-softmax (each row through its stack buffer, rows of 1024 and of
/// 1000), and row by row for layer and RMS norm (rows of 1024, 1040 and 1000).
#[test]
#[cfg(target_arch = "x86_64")]
#[cfg_attr(miri, ignore)] // 100 MiB of buffers; the streamed path is one store.
fn outputs_past_the_cache_size_stream_with_the_same_bits() {
    const COLS: usize = 1024;
    let rows = (32 << 20) / 4 / COLS + 1;
    let n = rows * COLS;
    let mut rng = Rng::new(17);
    let mut a = vec![0.0f32; n];
    let mut b = vec![0.0f32; n];
    rng.fill(&mut a, -12.0, 12.0);
    rng.fill(&mut b, -2.0, 2.0);
    // An output starting 3 floats past a 64-byte boundary.
    let (mut big, mut small) = (vec![0.0f32; n + 16], vec![0.0f32; n]);
    let off = 3 + (16 - big.as_ptr().addr() / 4 % 16) % 16;
    const CHUNK_ROWS: usize = 4096;
    let chunk = CHUNK_ROWS * COLS;
    let check = |big: &[f32], small: &[f32], what: &str| {
        let bad = big.iter().zip(small).position(|(&x, &y)| !same(x, y));
        assert!(bad.is_none(), "{what}: element {bad:?} differs");
    };
    // A row kernel over `small` in calls of 16 MiB, below the streaming size.
    let in_chunks = |small: &mut [f32], f: &dyn Fn(std::ops::Range<usize>, &mut [f32])| {
        for (r, y) in small.chunks_mut(chunk).enumerate() {
            f(r * CHUNK_ROWS..r * CHUNK_ROWS + y.len() / COLS, y);
        }
    };
    for_each_isa(|isa| {
        let out = &mut big[off..off + n];
        unary(UnaryOp::Exp, &a, out).unwrap();
        for (x, y) in a.chunks(chunk).zip(small.chunks_mut(chunk)) {
            unary(UnaryOp::Exp, x, y).unwrap();
        }
        check(out, &small, &format!("{} exp", isa.name()));
        for (rhs, name) in [
            (Operand::Matrix(&b), "add"),
            (Operand::Row(&b[..COLS]), "add row"),
        ] {
            let out = &mut big[off..off + n];
            binary(BinaryOp::Add, Operand::Matrix(&a), rhs, COLS, 0..rows, out).unwrap();
            in_chunks(&mut small, &|rs, y| {
                binary(BinaryOp::Add, Operand::Matrix(&a), rhs, COLS, rs, y).unwrap()
            });
            check(out, &small, &format!("{} {name}", isa.name()));
        }
        for (log, name) in [(false, "softmax"), (true, "log_softmax")] {
            let soft = if log { log_softmax_rows } else { softmax_rows };
            let out = &mut big[off..off + n];
            soft(&a, COLS, 0..rows, out).unwrap();
            in_chunks(&mut small, &|rs, y| soft(&a, COLS, rs, y).unwrap());
            check(out, &small, &format!("{} {name}", isa.name()));
            // Rows of 1000: every row's output starts at another offset in its line.
            let m = n - n % 1000;
            let out = &mut big[off..off + m];
            soft(&a, 1000, 0..m / 1000, out).unwrap();
            for (r, y) in small[..m].chunks_mut(1000).enumerate() {
                soft(&a, 1000, r..r + 1, y).unwrap();
            }
            check(
                out,
                &small[..m],
                &format!("{} {name}, rows of 1000", isa.name()),
            );
        }
        // Rows of 1024 and 1040 (whole vectors, a partial moment block) all start
        // on 64-byte boundaries, the ones streamed; of rows of 1000, one in four.
        for cols in [COLS, 1040, 1000] {
            let (g, beta) = (&b[..cols], &b[cols..2 * cols]);
            let m = n - n % cols;
            for (rms, name) in [(false, "layer_norm"), (true, "rms_norm")] {
                let norm = |rs: std::ops::Range<usize>, y: &mut [f32]| {
                    if rms {
                        rms_norm_rows(&a, cols, rs, Some(g), 1e-5, y).unwrap()
                    } else {
                        layer_norm_rows(&a, cols, rs, Some(g), Some(beta), 1e-5, y).unwrap()
                    }
                };
                let at = off - 3;
                norm(0..m / cols, &mut big[at..at + m]);
                for (r, y) in small[..m].chunks_mut(cols).enumerate() {
                    norm(r..r + 1, y);
                }
                let what = format!("{} {name}, rows of {cols}", isa.name());
                check(&big[at..at + m], &small[..m], &what);
            }
        }
    });
}
