//! Reading the NumPy fixtures of `scripts/fixtures/core_ops_a.py`: tensors with view
//! steps, strided output buffers, and the float comparisons the tests share.

use std::path::PathBuf;

use rml_core::view::Layout;
use rml_core::{Shape, TensorView, TensorViewMut};
use serde_json::Value;

/// The cases of one fixture file.
pub fn load(name: &str) -> Vec<Value> {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "tests",
        "fixtures",
        "core_ops_a",
        name,
    ]
    .iter()
    .collect();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let root: Value = serde_json::from_str(&text).expect("fixture is JSON");
    let cases = root["cases"].as_array().expect("a cases array").clone();
    assert!(!cases.is_empty(), "{name} has no cases");
    cases
}

/// An f32 from a JSON number or one of the strings "nan", "inf", "-inf".
pub fn f32_of(v: &Value) -> f32 {
    match v {
        Value::Number(n) => n.as_f64().expect("a float") as f32,
        Value::String(s) if s == "nan" => f32::NAN,
        Value::String(s) if s == "inf" => f32::INFINITY,
        Value::String(s) if s == "-inf" => f32::NEG_INFINITY,
        other => panic!("not a float: {other}"),
    }
}

/// A `usize` list from a JSON array.
pub fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|d| d.as_u64().expect("a size") as usize)
        .collect()
}

/// An `isize` list (axes) from a JSON array.
pub fn isizes(v: &Value) -> Vec<isize> {
    v.as_array()
        .expect("an array")
        .iter()
        .map(|d| d.as_i64().expect("an axis") as isize)
        .collect()
}

/// Applies the fixture's view steps to a layout (the same steps NumPy applied).
fn apply_steps(mut layout: Layout, steps: Option<&Value>) -> Layout {
    for step in steps.and_then(Value::as_array).into_iter().flatten() {
        let step = step.as_array().expect("a step");
        let int = |i: usize| step[i].as_i64().expect("an integer");
        layout = match step[0].as_str().expect("a step name") {
            "transpose" => layout.transpose(int(1) as isize, int(2) as isize),
            "slice" => layout.slice(
                int(1) as isize,
                int(2) as usize,
                int(3) as usize,
                int(4) as usize,
            ),
            "broadcast" => layout.broadcast_to(&Shape::new(&usizes(&step[1])).unwrap()),
            other => panic!("unknown view step {other}"),
        }
        .expect("fixture view steps are valid");
    }
    layout
}

/// A dense base array plus the view steps that turn it into an operand.
pub struct Tensor<T> {
    /// Row-major contents of the base array.
    pub data: Vec<T>,
    layout: Layout,
}

impl<T: Copy> Tensor<T> {
    fn parse(v: &Value, element: impl Fn(&Value) -> T) -> Self {
        let shape = Shape::new(&usizes(&v["shape"])).unwrap();
        let data: Vec<T> = v["data"]
            .as_array()
            .expect("data")
            .iter()
            .map(element)
            .collect();
        assert_eq!(data.len(), shape.numel(), "fixture data length");
        let layout = apply_steps(Layout::contiguous(shape), v.get("view"));
        Tensor { data, layout }
    }

    /// The operand the op sees.
    pub fn view(&self) -> TensorView<'_, T> {
        TensorView::with_layout(&self.data, self.layout).unwrap()
    }

    /// The operand's shape.
    pub fn shape(&self) -> Shape {
        self.layout.shape
    }
}

impl Tensor<f32> {
    /// An f32 tensor.
    pub fn f32(v: &Value) -> Self {
        Self::parse(v, f32_of)
    }
}

impl<T: Copy + TryFrom<i64>> Tensor<T> {
    /// An integer tensor.
    pub fn int(v: &Value) -> Self {
        Self::parse(v, |x| {
            T::try_from(x.as_i64().expect("an integer"))
                .ok()
                .expect("in range")
        })
    }
}

/// An output buffer, dense or (when the case has `"out"`) a strided view of a
/// larger buffer; everything outside the view must stay `sentinel`.
pub struct Output<T> {
    base: Vec<T>,
    layout: Layout,
    sentinel: T,
}

impl<T: Copy + PartialEq + std::fmt::Debug> Output<T> {
    /// A buffer for a result of `shape`, laid out as `case["out"]` asks.
    pub fn new(case: &Value, shape: &[usize], sentinel: T) -> Self {
        let shape = Shape::new(shape).unwrap();
        let (layout, len) = match case.get("out") {
            Some(out) => {
                let base = Shape::new(&usizes(&out["shape"])).unwrap();
                let layout = apply_steps(Layout::contiguous(base), out.get("view"));
                (layout, base.numel())
            }
            None => (Layout::contiguous(shape), shape.numel()),
        };
        assert_eq!(layout.shape, shape, "fixture out view has the result shape");
        Output {
            base: vec![sentinel; len],
            layout,
            sentinel,
        }
    }

    /// The view the op writes into.
    pub fn view_mut(&mut self) -> TensorViewMut<'_, T> {
        TensorViewMut::with_layout(&mut self.base, self.layout).unwrap()
    }

    /// The written values in row-major order, after checking that nothing outside
    /// the view was touched.
    pub fn values(&self) -> Vec<T> {
        let inside: Vec<usize> = self.layout.offsets().collect();
        for (i, v) in self.base.iter().enumerate() {
            if !inside.contains(&i) {
                assert_eq!(
                    *v, self.sentinel,
                    "element {i} outside the output view changed"
                );
            }
        }
        inside.iter().map(|&o| self.base[o]).collect()
    }
}

/// The expected shape and f32 values of a case.
pub fn expected_f32(v: &Value) -> (Vec<usize>, Vec<f32>) {
    let values = v["data"]
        .as_array()
        .expect("data")
        .iter()
        .map(f32_of)
        .collect();
    (usizes(&v["shape"]), values)
}

/// Distance in units in the last place between two finite f32 of any sign (the
/// count of representable f32 values between them).
pub fn ulps(a: f32, b: f32) -> u64 {
    // Map the sign-magnitude bits to a monotonic integer line (-0 and +0 meet).
    let line = |x: f32| {
        let bits = x.to_bits() as i64;
        if bits & 0x8000_0000 != 0 {
            -(bits & 0x7FFF_FFFF)
        } else {
            bits
        }
    };
    (line(a) - line(b)).unsigned_abs()
}

/// Asserts `got` matches `want` elementwise: NaN where NaN is expected, equal
/// infinities, otherwise within `max_ulps` or within `abs` of each other.
pub fn assert_close(got: &[f32], want: &[f32], max_ulps: u64, abs: f32, context: &str) {
    assert_eq!(got.len(), want.len(), "{context}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() || g.is_infinite() || g.is_nan() {
            g == w
        } else {
            ulps(g, w) <= max_ulps || (g - w).abs() <= abs
        };
        assert!(ok, "{context}: element {i}: got {g:e}, want {w:e}");
    }
}
