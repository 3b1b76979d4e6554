//! copy/permute, concat, split, slice, gather and pad against the NumPy fixtures.
//! These ops move values without arithmetic, so results must match exactly.

use rml_core::ops::layout::{
    PadMode, concat, copy, gather, gather_output_shape, pad, pad_output_shape, slice, split,
};
use rml_core::{TensorView, TensorViewMut};
use serde_json::Value;

use crate::fixture::{Reversed, Tensor, cases, f32_tensor, i64_tensor, name, usizes};

/// The dense view of `t`, or (when `strided`) the view of its axis-reversed copy.
fn pick<'a, T: Copy>(
    t: &'a Tensor<T>,
    reversed: &'a Reversed<T>,
    strided: bool,
) -> TensorView<'a, T> {
    if strided { reversed.view() } else { t.view() }
}

fn check_permute(name: &str, case: &Value, strided: bool) {
    let x = f32_tensor(&case["input"]);
    let expected = f32_tensor(&case["expected"]);
    let reversed = x.reversed();
    let input = pick(&x, &reversed, strided);
    let permuted = input.permute(&usizes(&case["perm"])).unwrap();
    let mut out = vec![f32::NAN; expected.data.len()];
    copy(
        &permuted,
        &mut TensorViewMut::new(&mut out, expected.shape).unwrap(),
    )
    .unwrap();
    assert_eq!(out, expected.data, "{name}");
}

fn check_concat(name: &str, case: &Value, strided: bool) {
    let parts: Vec<Tensor<f32>> = case["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(f32_tensor)
        .collect();
    let reversed: Vec<Reversed<f32>> = parts.iter().map(Tensor::reversed).collect();
    let views: Vec<TensorView<'_, f32>> = parts
        .iter()
        .zip(&reversed)
        .map(|(p, r)| pick(p, r, strided))
        .collect();
    let expected = f32_tensor(&case["expected"]);
    let axis = case["axis"].as_i64().unwrap() as isize;
    let mut out = vec![f32::NAN; expected.data.len()];
    concat(
        &views,
        axis,
        &mut TensorViewMut::new(&mut out, expected.shape).unwrap(),
    )
    .unwrap();
    assert_eq!(out, expected.data, "{name}");
}

fn check_split(name: &str, case: &Value, strided: bool) {
    let x = f32_tensor(&case["input"]);
    let expected: Vec<Tensor<f32>> = case["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(f32_tensor)
        .collect();
    let mut buffers: Vec<Vec<f32>> = expected
        .iter()
        .map(|e| vec![f32::NAN; e.data.len()])
        .collect();
    let mut views: Vec<TensorViewMut<'_, f32>> = buffers
        .iter_mut()
        .zip(&expected)
        .map(|(b, e)| TensorViewMut::new(b, e.shape).unwrap())
        .collect();
    let axis = case["axis"].as_i64().unwrap() as isize;
    let reversed = x.reversed();
    split(&pick(&x, &reversed, strided), axis, &mut views).unwrap();
    drop(views);
    for (k, (got, e)) in buffers.iter().zip(&expected).enumerate() {
        assert_eq!(got, &e.data, "{name}: output {k}");
    }
}

fn check_slice(name: &str, case: &Value, strided: bool) {
    let x = f32_tensor(&case["input"]);
    let expected = f32_tensor(&case["expected"]);
    let int = |key: &str| case[key].as_i64().unwrap();
    let reversed = x.reversed();
    let mut out = vec![f32::NAN; expected.data.len()];
    slice(
        &pick(&x, &reversed, strided),
        int("axis") as isize,
        int("start"),
        int("end"),
        int("step"),
        &mut TensorViewMut::new(&mut out, expected.shape).unwrap(),
    )
    .unwrap();
    assert_eq!(out, expected.data, "{name}");
}

fn check_gather(name: &str, case: &Value, strided: bool) {
    let x = f32_tensor(&case["input"]);
    let expected = f32_tensor(&case["expected"]);
    let indices = i64_tensor(&case["indices"]);
    let axis = case["axis"].as_i64().unwrap() as isize;
    let shape = gather_output_shape(&x.shape, &indices.shape, axis).unwrap();
    assert_eq!(shape, expected.shape, "{name}: output shape");
    let mut out = vec![f32::NAN; expected.data.len()];
    let mut ov = TensorViewMut::new(&mut out, shape).unwrap();
    let (reversed, reversed_indices) = (x.reversed(), indices.reversed());
    let input = pick(&x, &reversed, strided);
    match case["index_type"].as_str().unwrap() {
        "i64" => {
            let iv = pick(&indices, &reversed_indices, strided);
            gather(&input, &iv, axis, &mut ov).unwrap();
        }
        "i32" => {
            let narrow = Tensor {
                shape: indices.shape,
                data: indices.data.iter().map(|&i| i as i32).collect(),
            };
            let reversed_narrow = narrow.reversed();
            let iv = pick(&narrow, &reversed_narrow, strided);
            gather(&input, &iv, axis, &mut ov).unwrap();
        }
        other => panic!("{name}: unknown index type {other}"),
    }
    assert_eq!(out, expected.data, "{name}");
}

fn check_pad(name: &str, case: &Value, strided: bool) {
    let x = f32_tensor(&case["input"]);
    let expected = f32_tensor(&case["expected"]);
    let pads: Vec<[usize; 2]> = case["pads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| usizes(p).try_into().unwrap())
        .collect();
    let mode = match case["mode"].as_str().unwrap() {
        "constant" => PadMode::Constant(case["value"].as_f64().unwrap() as f32),
        "reflect" => PadMode::Reflect,
        "edge" => PadMode::Edge,
        "wrap" => PadMode::Wrap,
        other => panic!("{name}: unknown pad mode {other}"),
    };
    assert_eq!(
        pad_output_shape(&x.shape, &pads).unwrap(),
        expected.shape,
        "{name}: output shape"
    );
    let reversed = x.reversed();
    let mut out = vec![f32::NAN; expected.data.len()];
    pad(
        &pick(&x, &reversed, strided),
        &pads,
        mode,
        &mut TensorViewMut::new(&mut out, expected.shape).unwrap(),
    )
    .unwrap();
    assert_eq!(out, expected.data, "{name}");
}

#[test]
fn layout_ops_match_numpy() {
    let mut seen = std::collections::BTreeSet::new();
    for case in cases("layout.json") {
        let name = name(&case);
        let op = case["op"].as_str().unwrap();
        // Each case runs on dense inputs and on axis-reversed (strided) ones.
        for strided in [false, true] {
            let name = &format!("{name} ({})", if strided { "strided" } else { "dense" });
            match op {
                "permute" => check_permute(name, &case, strided),
                "concat" => check_concat(name, &case, strided),
                "split" => check_split(name, &case, strided),
                "slice" => check_slice(name, &case, strided),
                "gather" => check_gather(name, &case, strided),
                "pad" => check_pad(name, &case, strided),
                other => panic!("{name}: unknown op {other}"),
            }
        }
        seen.insert(op.to_string());
    }
    assert_eq!(
        seen.len(),
        6,
        "every layout op has fixture cases: saw {seen:?}"
    );
}
