//! Broadcasting against an independent model of NumPy's rule, algebraic properties,
//! and NumPy's own verdicts (`np.broadcast_shapes`) from a committed fixture.

use proptest::prelude::*;
use rml_core::shape::broadcast_strides;
use rml_core::view::Layout;
use rml_core::{Error, Shape, TensorView, broadcast_shapes};

/// NumPy's rule as its documentation states it: pad the shorter shape with leading
/// ones; then on every axis the sizes must be equal or one of them 1, and the result
/// takes the size that is not 1 (or the common size).
fn model(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let pad = |s: &[usize]| -> Vec<usize> {
        let mut p = vec![1; rank - s.len()];
        p.extend_from_slice(s);
        p
    };
    let (a, b) = (pad(a), pad(b));
    a.iter()
        .zip(&b)
        .map(|(&x, &y)| match (x, y) {
            _ if x == y => Some(x),
            (1, _) => Some(y),
            (_, 1) => Some(x),
            _ => None,
        })
        .collect()
}

fn shape(d: &[usize]) -> Shape {
    Shape::new(d).unwrap()
}

/// Sizes with 1 and 0 common enough to exercise their special cases.
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![3 => Just(1usize), 1 => Just(0usize), 4 => 2usize..5]
}

fn dims(max_rank: usize) -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(size(), 0..=max_rank)
}

/// A pair of shapes, half of them derived from each other so that most broadcast.
fn pair() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    let related = dims(6).prop_flat_map(|a| {
        let n = a.len();
        (
            Just(a),
            0..=n,
            prop::collection::vec(any::<bool>(), n),
            dims(2),
        )
            .prop_map(|(a, drop, ones, lead)| {
                let mut b = lead;
                for (i, &d) in a.iter().enumerate().skip(drop) {
                    b.push(if ones[i] { 1 } else { d });
                }
                (a, b)
            })
    });
    prop_oneof![related, (dims(6), dims(6))]
}

/// Size of the axis `k` places from the right, or 1 past the front.
fn from_right(d: &[usize], k: usize) -> usize {
    if k < d.len() { d[d.len() - 1 - k] } else { 1 }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn agrees_with_the_model((a, b) in pair()) {
        let got = broadcast_shapes(&shape(&a), &shape(&b));
        match model(&a, &b) {
            Some(expected) => prop_assert_eq!(got.map(|s| s.dims().to_vec()), Ok(expected)),
            None => {
                // The reported axis is the first incompatible one from the right.
                let Err(Error::NotBroadcastable { axis, lhs, rhs }) = got else {
                    return Err(TestCaseError::fail(format!("{a:?} {b:?}: {got:?}")));
                };
                prop_assert_eq!((lhs, rhs), (from_right(&a, axis), from_right(&b, axis)));
                prop_assert!(lhs != rhs && lhs != 1 && rhs != 1);
                for k in 0..axis {
                    let (x, y) = (from_right(&a, k), from_right(&b, k));
                    prop_assert!(x == y || x == 1 || y == 1);
                }
            }
        }
    }

    #[test]
    fn is_commutative((a, b) in pair()) {
        let ab = broadcast_shapes(&shape(&a), &shape(&b));
        let ba = broadcast_shapes(&shape(&b), &shape(&a));
        match (ab, ba) {
            (Ok(x), Ok(y)) => prop_assert_eq!(x, y),
            (
                Err(Error::NotBroadcastable { axis, lhs, rhs }),
                Err(Error::NotBroadcastable { axis: axis2, lhs: lhs2, rhs: rhs2 }),
            ) => prop_assert_eq!((axis, lhs, rhs), (axis2, rhs2, lhs2)),
            (x, y) => prop_assert!(false, "{:?} vs {:?}", x, y),
        }
    }

    #[test]
    fn ones_and_scalars_are_identities(a in dims(6), k in 0usize..=8) {
        let sa = shape(&a);
        prop_assert_eq!(broadcast_shapes(&sa, &Shape::scalar()), Ok(sa));
        prop_assert_eq!(broadcast_shapes(&sa, &sa), Ok(sa));
        let ones = shape(&vec![1; k]);
        let mut padded = vec![1; k.saturating_sub(a.len())];
        padded.extend_from_slice(&a);
        prop_assert_eq!(broadcast_shapes(&sa, &ones), Ok(shape(&padded)));
    }

    #[test]
    fn is_associative((a, b) in pair(), c in dims(6)) {
        let (sa, sb, sc) = (shape(&a), shape(&b), shape(&c));
        let left = broadcast_shapes(&sa, &sb).and_then(|ab| broadcast_shapes(&ab, &sc));
        let right = broadcast_shapes(&sb, &sc).and_then(|bc| broadcast_shapes(&sa, &bc));
        prop_assert_eq!(left.is_ok(), right.is_ok());
        if let (Ok(l), Ok(r)) = (left, right) {
            prop_assert_eq!(l, r);
        }
    }

    #[test]
    fn both_operands_broadcast_to_the_result((a, b) in pair()) {
        if let Ok(out) = broadcast_shapes(&shape(&a), &shape(&b)) {
            prop_assert_eq!(out.rank(), a.len().max(b.len()));
            for d in [&a, &b] {
                let s = shape(d);
                let strides = broadcast_strides(&s, &s.contiguous_strides(), &out).unwrap();
                // Broadcast axes (size 1 in the operand, or missing) read with stride 0.
                let lead = out.rank() - s.rank();
                for (axis, &step) in strides.steps().iter().enumerate() {
                    if axis < lead || (s.dim(axis - lead) == 1 && out.dim(axis) != 1) {
                        prop_assert_eq!(step, 0);
                    }
                }
            }
        }
    }

    #[test]
    fn broadcast_views_read_the_source_element(
        (src, target) in dims(4).prop_flat_map(|src| {
            let n = src.len();
            (Just(src), prop::collection::vec(2usize..4, n), dims(2))
        }).prop_map(|(src, grow, lead)| {
            // Target: extra leading axes, and size-1 source axes grown.
            let mut target = lead;
            target.extend(src.iter().zip(&grow).map(|(&d, &g)| if d == 1 { g } else { d }));
            (src, target)
        })
    ) {
        let numel: usize = src.iter().product();
        let data: Vec<u32> = (0..numel as u32).collect();
        let v = TensorView::new(&data, shape(&src)).unwrap();
        let b = v.broadcast_to(&shape(&target)).unwrap();
        let lead = target.len() - src.len();
        let mut index = vec![0usize; target.len()];
        for value in b.iter() {
            // Drop the leading axes and read index 0 on the source's size-1 axes.
            let src_index: Vec<usize> = index[lead..]
                .iter()
                .zip(&src)
                .map(|(&i, &d)| if d == 1 { 0 } else { i })
                .collect();
            prop_assert_eq!(value, v.get(&src_index).unwrap());
            prop_assert_eq!(value, b.get(&index).unwrap());
            advance(&mut index, &target);
        }
    }
}

/// Steps a row-major multi-index.
fn advance(index: &mut [usize], dims: &[usize]) {
    for axis in (0..dims.len()).rev() {
        index[axis] += 1;
        if index[axis] < dims[axis] {
            return;
        }
        index[axis] = 0;
    }
}

#[test]
fn broadcast_strides_reject_shrinking_and_conflicts() {
    let l = Layout::contiguous(shape(&[2, 3]));
    assert_eq!(
        l.broadcast_to(&shape(&[3])),
        Err(Error::ShapeMismatch { op: "broadcast_to" })
    );
    // A size-0 axis does not stretch to 1 (NumPy agrees).
    assert!(
        Layout::contiguous(shape(&[0]))
            .broadcast_to(&shape(&[1]))
            .is_err()
    );
    assert!(
        Layout::contiguous(shape(&[1]))
            .broadcast_to(&shape(&[0]))
            .is_ok()
    );
}

#[test]
fn agrees_with_numpy_broadcast_shapes() {
    let path = format!(
        "{}/tests/fixtures/core_broadcast/broadcast_shapes.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let as_dims = |v: &serde_json::Value| -> Vec<usize> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap() as usize)
            .collect()
    };
    let cases = doc["cases"].as_array().unwrap();
    let (mut ok, mut failed) = (0, 0);
    for case in cases {
        let (a, b) = (as_dims(&case["a"]), as_dims(&case["b"]));
        let got = broadcast_shapes(&shape(&a), &shape(&b));
        if case["out"].is_null() {
            assert!(
                matches!(got, Err(Error::NotBroadcastable { .. })),
                "{a:?} {b:?}: NumPy fails, rml gave {got:?}"
            );
            failed += 1;
        } else {
            let expected = as_dims(&case["out"]);
            assert_eq!(got.map(|s| s.dims().to_vec()), Ok(expected), "{a:?} {b:?}");
            ok += 1;
        }
    }
    assert!(ok >= 20 && failed >= 10, "{ok} broadcast, {failed} failed");
}
