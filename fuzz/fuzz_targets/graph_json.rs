//! Fuzzes the rml-graph loader and executor: any document must load or fail with an
//! error, and a graph that loads must run on inputs of its declared shapes (symbols
//! bound to 2) through the executor, with and without fusion, without panicking.
//!
//! Constants come from the document itself: each declared constant gets a small
//! deterministic tensor of its declared dtype and shape (so the loader's checks against
//! the weights pass and the fuzzer reaches shape inference, planning and the kernels).

#![no_main]

use libfuzzer_sys::fuzz_target;
use rml_core::{DType, Shape};
use rml_host::graph::{Buffer, DenseTensor, Dim, Executor, MemoryConstants, Options, load_graph};

/// Larger tensors are skipped: they test nothing new and slow the fuzzer down.
const MAX_ELEMENTS: usize = 1 << 12;

/// Small values of every sign, so that logs, roots and divisions meet edge cases.
fn data(dtype: DType, len: usize) -> Option<Buffer> {
    Some(match dtype {
        DType::F32 => Buffer::F32((0..len).map(|i| (i % 7) as f32 * 0.5 - 1.5).collect()),
        DType::I64 => Buffer::I64((0..len).map(|i| (i % 3) as i64).collect()),
        DType::Bool => Buffer::Bool((0..len).map(|i| (i % 2) as u8).collect()),
        _ => return None,
    })
}

/// The document's declared constants, each filled with [`data`].
fn constants(text: &str) -> Option<MemoryConstants> {
    let doc: serde_json::Value = serde_json::from_str(text).ok()?;
    let mut consts = MemoryConstants::new();
    for c in doc.get("constants")?.as_array()? {
        let name = c.get("name")?.as_str()?;
        let dtype = DType::parse(c.get("dtype")?.as_str()?).ok()?;
        let shape: Vec<usize> = c
            .get("shape")?
            .as_array()?
            .iter()
            .map(|d| d.as_u64().map(|d| d as usize))
            .collect::<Option<_>>()?;
        let len = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d))?;
        if len > MAX_ELEMENTS {
            return None;
        }
        consts.insert(name, &shape, data(dtype, len)?);
    }
    Some(consts)
}

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let Some(consts) = constants(text) else {
        return;
    };
    let Ok(graph) = load_graph(text, &consts) else {
        return;
    };
    let mut inputs = Vec::new();
    for &id in &graph.inputs {
        let ty = &graph.values[id].ty;
        let dims: Vec<usize> = ty
            .shape
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => *n,
                _ => 2,
            })
            .collect();
        let len = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        let (Some(len), Ok(shape)) = (len, Shape::new(&dims)) else {
            return;
        };
        let Some(data) = (len <= MAX_ELEMENTS).then(|| data(ty.dtype, len)).flatten() else {
            return;
        };
        inputs.push(DenseTensor { shape, data });
    }
    for fusion in [true, false] {
        let options = Options {
            threads: 1,
            fusion,
            profile: false,
        };
        if let Ok(mut exec) = Executor::new(graph.clone(), &consts, options) {
            let _ = exec.run(&inputs);
        }
    }
});
