//! Loading the JSON fixtures and comparing results with derived tolerances.

use rml_core::{Shape, TensorView};
use serde_json::Value;

/// Unit roundoff of f32, `u = 2^-24`: one correctly rounded f32 operation whose exact
/// result has magnitude `m` errs by at most `u * m`.
pub const F32_UNIT_ROUNDOFF: f64 = f32::EPSILON as f64 / 2.0;

/// The cases of one fixture file (there is always at least one).
pub fn cases(file: &str) -> Vec<Value> {
    let path = format!(
        "{}/tests/fixtures/core_ops_b/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let root: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    let cases = root["cases"].as_array().expect("a cases array").clone();
    assert!(!cases.is_empty(), "{path} holds no cases");
    cases
}

/// A tensor read from a fixture: shape and row-major data.
pub struct Tensor<T> {
    pub shape: Shape,
    pub data: Vec<T>,
}

impl<T: Copy> Tensor<T> {
    /// A dense view of the data.
    pub fn view(&self) -> TensorView<'_, T> {
        TensorView::new(&self.data, self.shape).unwrap()
    }
}

/// A tensor stored with its axes in reverse order (NumPy's `x.T`), so that viewing
/// it in the original axis order needs non-contiguous strides on every axis.
pub struct Reversed<T> {
    data: Vec<T>,
    reversed_shape: Shape,
}

impl<T: Copy> Tensor<T> {
    /// The same values stored axis-reversed (rearranged here with plain index
    /// arithmetic, not with rml).
    pub fn reversed(&self) -> Reversed<T> {
        let dims = self.shape.dims();
        let reversed_dims: Vec<usize> = dims.iter().rev().copied().collect();
        let mut data = self.data.clone();
        for (flat, &value) in self.data.iter().enumerate() {
            // Row-major index of `flat` in the original shape...
            let mut rest = flat;
            let mut index = vec![0; dims.len()];
            for axis in (0..dims.len()).rev() {
                index[axis] = rest % dims[axis];
                rest /= dims[axis];
            }
            // ...and the row-major position of the reversed index in reversed storage.
            let at = index
                .iter()
                .rev()
                .zip(&reversed_dims)
                .fold(0, |acc, (&i, &d)| acc * d + i);
            data[at] = value;
        }
        Reversed {
            data,
            reversed_shape: Shape::new(&reversed_dims).unwrap(),
        }
    }
}

impl<T: Copy> Reversed<T> {
    /// A view in the original axis order (every stride differs from row-major).
    pub fn view(&self) -> TensorView<'_, T> {
        let rank = self.reversed_shape.rank();
        let order: Vec<usize> = (0..rank).rev().collect();
        TensorView::new(&self.data, self.reversed_shape)
            .unwrap()
            .permute(&order)
            .unwrap()
    }
}

impl Tensor<f32> {
    /// Largest magnitude of any element (0 for an empty tensor).
    pub fn max_abs(&self) -> f64 {
        self.data
            .iter()
            .fold(0.0f64, |m, &x| m.max(f64::from(x.abs())))
    }
}

/// The case's name, for failure messages.
pub fn name(case: &Value) -> &str {
    case["name"].as_str().expect("a case name")
}

/// A list of non-negative integers.
pub fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .expect("an integer array")
        .iter()
        .map(|d| d.as_u64().expect("a non-negative integer") as usize)
        .collect()
}

/// A `[a, b]` pair of non-negative integers.
pub fn pair(v: &Value) -> [usize; 2] {
    usizes(v).try_into().expect("a pair")
}

/// A non-negative integer.
pub fn usize_of(v: &Value) -> usize {
    v.as_u64().expect("a non-negative integer") as usize
}

fn shape_of(v: &Value) -> Shape {
    Shape::new(&usizes(&v["shape"])).unwrap()
}

/// A float32 tensor (JSON numbers are the exact f32 values written as f64).
pub fn f32_tensor(v: &Value) -> Tensor<f32> {
    let data = v["data"]
        .as_array()
        .expect("a data array")
        .iter()
        .map(|x| x.as_f64().expect("a number") as f32)
        .collect();
    Tensor {
        shape: shape_of(v),
        data,
    }
}

/// An integer tensor.
pub fn i64_tensor(v: &Value) -> Tensor<i64> {
    let data = v["data"]
        .as_array()
        .expect("a data array")
        .iter()
        .map(|x| x.as_i64().expect("an integer"))
        .collect();
    Tensor {
        shape: shape_of(v),
        data,
    }
}

/// Error bound for an f32 result that accumulates `terms` rounded operations over
/// values whose magnitudes add up to at most `abs_sum`, compared with an exact
/// (float64) reference rounded once to f32:
///
/// * accumulation: Higham's bound `|fl(Σ t_i) − Σ t_i| ≤ γ_m Σ |t_i|` with
///   `γ_m = m u / (1 − m u)`, where `m` counts every rounding on the longest path
///   (for a dot product, one per product plus one per addition: pass both);
/// * the reference itself is off by at most `u |expected|` after its final rounding.
pub fn accumulation_tolerance(terms: usize, abs_sum: f64, expected: f32) -> f64 {
    let m = terms as f64 * F32_UNIT_ROUNDOFF;
    m / (1.0 - m) * abs_sum + F32_UNIT_ROUNDOFF * f64::from(expected.abs())
}

/// Asserts `got[i]` is within `tolerance(expected[i])` of `expected[i]` everywhere.
pub fn assert_close(case: &str, got: &[f32], expected: &[f32], tolerance: impl Fn(f32) -> f64) {
    assert_eq!(got.len(), expected.len(), "{case}: length");
    for (i, (&g, &e)) in got.iter().zip(expected).enumerate() {
        let err = (f64::from(g) - f64::from(e)).abs();
        let tol = tolerance(e);
        assert!(
            err <= tol,
            "{case}: element {i}: got {g}, expected {e} (error {err:e} > tolerance {tol:e})"
        );
    }
}
