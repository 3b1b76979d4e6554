//! Casts among the ten scalar dtypes against NumPy's `astype` (and, for bf16, which
//! NumPy lacks, against exact rational round-to-nearest-even in the script).
//!
//! Every pair runs through the run-time dispatched `cast_bytes`; a few pairs also run
//! through the typed `cast`/`cast_to_bool` on strided views. Casts are exact: the
//! result bits must match, except that any NaN matches any NaN (payloads differ
//! between libraries and are not part of the contract).

use half::f16;
use rml_core::DType;
use rml_core::ops::cast::{cast, cast_bytes, cast_to_bool};
use rml_core::{Shape, TensorView, TensorViewMut};
use serde_json::Value;

use super::fixture::load;

fn dtype(case: &Value, key: &str) -> DType {
    DType::from_safetensors_name(case[key].as_str().unwrap()).unwrap()
}

fn bits(case: &Value, key: &str) -> Vec<u64> {
    case[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().expect("raw bits"))
        .collect()
}

/// Packs raw element bits little-endian into an 8-byte-aligned buffer.
fn pack(values: &[u64], size: usize) -> Vec<u64> {
    let mut words = vec![0u64; (values.len() * size).div_ceil(8)];
    let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
    for (i, v) in values.iter().enumerate() {
        bytes[i * size..(i + 1) * size].copy_from_slice(&v.to_le_bytes()[..size]);
    }
    words
}

/// Reads `count` elements of `size` bytes back as raw bits.
fn unpack(words: &[u64], size: usize, count: usize) -> Vec<u64> {
    let bytes: &[u8] = bytemuck::cast_slice(words);
    (0..count)
        .map(|i| {
            let mut le = [0u8; 8];
            le[..size].copy_from_slice(&bytes[i * size..(i + 1) * size]);
            u64::from_le_bytes(le)
        })
        .collect()
}

/// True when `bits` of `dtype` is a NaN.
fn is_nan(dtype: DType, bits: u64) -> bool {
    match dtype {
        DType::F64 => f64::from_bits(bits).is_nan(),
        DType::F32 => f32::from_bits(bits as u32).is_nan(),
        DType::F16 => f16::from_bits(bits as u16).is_nan(),
        DType::BF16 => half::bf16::from_bits(bits as u16).is_nan(),
        _ => false,
    }
}

fn assert_bits(dst: DType, got: &[u64], want: &[u64], context: &str) {
    assert_eq!(got.len(), want.len(), "{context}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let same = g == w || (is_nan(dst, w) && is_nan(dst, g));
        assert!(same, "{context}: element {i}: got {g:#x}, want {w:#x}");
    }
}

#[test]
fn every_dtype_pair_matches_numpy() {
    let cases = load("cast.json");
    assert_eq!(cases.len(), 100, "all 10 x 10 pairs");
    for case in &cases {
        let (src, dst) = (dtype(case, "src"), dtype(case, "dst"));
        let (src_bits, want) = (bits(case, "src_bits"), bits(case, "dst_bits"));
        let n = src_bits.len();
        let input = pack(&src_bits, src.type_size());
        let mut output = vec![0u64; (n * dst.type_size()).div_ceil(8)];
        cast_bytes(
            &bytemuck::cast_slice(&input)[..n * src.type_size()],
            src,
            &mut bytemuck::cast_slice_mut(&mut output)[..n * dst.type_size()],
            dst,
            n,
        )
        .unwrap();
        let got = unpack(&output, dst.type_size(), n);
        assert_bits(
            dst,
            &got,
            &want,
            &format!("{} -> {}", src.name(), dst.name()),
        );
    }
}

/// The case for `src -> dst`.
fn pair(src: &str, dst: &str) -> Value {
    load("cast.json")
        .into_iter()
        .find(|c| c["src"] == src && c["dst"] == dst)
        .expect("pair present")
}

/// Every other element of `values` (what a step-2 slice view sees).
fn every_other(values: &[u64]) -> Vec<u64> {
    values.iter().step_by(2).copied().collect()
}

#[test]
fn typed_casts_on_strided_views_match_numpy() {
    // f32 -> f16 (round to nearest even) through a step-2 slice.
    let case = pair("F32", "F16");
    let src: Vec<f32> = bits(&case, "src_bits")
        .iter()
        .map(|&b| f32::from_bits(b as u32))
        .collect();
    let n = src.len();
    let view = TensorView::new(&src, Shape::new(&[n]).unwrap())
        .unwrap()
        .slice(0, 0, n, 2)
        .unwrap();
    let mut out = vec![f16::ZERO; n.div_ceil(2)];
    cast(
        &view,
        &mut TensorViewMut::new(&mut out, *view.shape()).unwrap(),
    )
    .unwrap();
    let got: Vec<u64> = out.iter().map(|h| u64::from(h.to_bits())).collect();
    assert_bits(
        DType::F16,
        &got,
        &every_other(&bits(&case, "dst_bits")),
        "typed f32 -> f16",
    );

    // f32 -> bool into a strided output (every other byte of a larger buffer).
    let case = pair("F32", "BOOL");
    let mut bytes = vec![9u8; 2 * n];
    let dense = TensorView::new(&src, Shape::new(&[n]).unwrap()).unwrap();
    let strided = TensorViewMut::new(&mut bytes, Shape::new(&[2 * n]).unwrap())
        .unwrap()
        .slice(0, 0, 2 * n, 2)
        .unwrap();
    let mut strided = strided;
    cast_to_bool(&dense, &mut strided).unwrap();
    let got: Vec<u64> = bytes.iter().step_by(2).map(|&b| u64::from(b)).collect();
    assert_bits(
        DType::Bool,
        &got,
        &bits(&case, "dst_bits"),
        "typed f32 -> bool",
    );
    assert!(
        bytes.iter().skip(1).step_by(2).all(|&b| b == 9),
        "gaps untouched"
    );

    // i64 -> i8 wraps like NumPy.
    let case = pair("I64", "I8");
    let src: Vec<i64> = bits(&case, "src_bits").iter().map(|&b| b as i64).collect();
    let mut out = vec![0i8; src.len()];
    let shape = Shape::new(&[src.len()]).unwrap();
    cast(
        &TensorView::new(&src, shape).unwrap(),
        &mut TensorViewMut::new(&mut out, shape).unwrap(),
    )
    .unwrap();
    let got: Vec<u64> = out.iter().map(|&v| u64::from(v as u8)).collect();
    assert_bits(DType::I8, &got, &bits(&case, "dst_bits"), "typed i64 -> i8");
}
