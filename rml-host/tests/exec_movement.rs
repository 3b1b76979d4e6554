//! The executor's native data movement (`slice`, `concat`, `split`, `gather`,
//! `transpose`, `expand`), general-broadcast loads in fused programs, and the
//! hoisting of shared-weight linears out of unrolled recurrences, against the
//! reference interpreter (rml-core's reference ops): data movement bit for bit for
//! every held dtype, NaN payloads included; fusion on/off and 1–3 threads agree.

mod exec_support;

use rml_core::Shape;
use rml_host::graph::steps::StepKind;
use rml_host::graph::{
    Buffer, DenseTensor, Executor, Graph, MemoryConstants, Options, load_graph, run,
};
use serde_json::{Value, json};

/// A distinctive NaN (quiet, with a payload) that must come through unchanged.
const NAN_BITS: u32 = 0x7fc1_2345;

/// `n` elements of `dtype` from `seed`; F32 data holds one payload NaN.
fn data(dtype: &str, n: usize, seed: u64) -> Buffer {
    let v = exec_support::values(n, seed);
    match dtype {
        "F32" => Buffer::F32(
            v.iter()
                .enumerate()
                .map(|(i, &x)| {
                    if i == n / 2 {
                        f32::from_bits(NAN_BITS)
                    } else {
                        x
                    }
                })
                .collect(),
        ),
        "I64" => Buffer::I64(v.iter().map(|&x| (x * 1e6) as i64).collect()),
        _ => Buffer::Bool(v.iter().map(|&x| u8::from(x > 0.0)).collect()),
    }
}

/// Raw bits of every element, so NaNs compare by payload.
fn bits(b: &Buffer) -> Vec<u64> {
    match b {
        Buffer::F32(v) => v.iter().map(|x| u64::from(x.to_bits())).collect(),
        Buffer::I64(v) => v.iter().map(|&x| x as u64).collect(),
        Buffer::Bool(v) => v.iter().map(|&x| u64::from(x)).collect(),
    }
}

/// One case: a node over inputs `x` (and `y`) of the case's dtype, optional I64
/// `idx` (an input, or a constant when `idx_const`), and its output shapes.
struct Case {
    node: Value,
    x: Vec<usize>,
    y: Option<Vec<usize>>,
    idx: Option<(Vec<usize>, Vec<i64>)>,
    idx_const: bool,
    outs: Vec<Vec<usize>>,
}

fn case(node: Value, x: &[usize], outs: &[&[usize]]) -> Case {
    Case {
        node,
        x: x.to_vec(),
        y: None,
        idx: None,
        idx_const: false,
        outs: outs.iter().map(|o| o.to_vec()).collect(),
    }
}

fn cases() -> Vec<Case> {
    let node = |op: &str, inputs: &[&str], outputs: &[&str], attrs: Value| json!({"op": op, "inputs": inputs, "outputs": outputs, "attrs": attrs});
    // One input `x` of shape `x`, one output `o0` of shape `out`.
    let unary = |op: &str, attrs: Value, x: &[usize], out: &[usize]| {
        case(node(op, &["x"], &["o0"], attrs), x, &[out])
    };
    let mut cases = vec![
        // Two axes, negative axis and start, a step of 2.
        unary(
            "slice",
            json!({"axes": [-2, 0], "starts": [-4, 1], "ends": [5, 3], "steps": [2, 1]}),
            &[3, 5, 4],
            &[2, 2, 4],
        ),
        // Reversed, and a backward step of 2.
        unary(
            "slice",
            json!({"axes": [2, 1], "starts": [-1, 4], "ends": [-5, 0], "steps": [-1, -2]}),
            &[3, 5, 4],
            &[3, 2, 4],
        ),
        // An empty result.
        unary(
            "slice",
            json!({"axes": [0], "starts": [2], "ends": [2]}),
            &[3, 5, 4],
            &[0, 5, 4],
        ),
        unary(
            "transpose",
            json!({"perm": [2, 0, 1]}),
            &[3, 5, 4],
            &[4, 3, 5],
        ),
        unary(
            "transpose",
            json!({"perm": [1, 0, 3, 2]}),
            &[2, 3, 1, 7],
            &[3, 2, 7, 1],
        ),
        unary(
            "expand",
            json!({"shape": [2, 3, 5, 4]}),
            &[3, 1, 4],
            &[2, 3, 5, 4],
        ),
        unary(
            "expand",
            json!({"shape": [3, -1, 5]}),
            &[3, 1, 1],
            &[3, 1, 5],
        ),
        case(
            node(
                "split",
                &["x"],
                &["o0", "o1", "o2"],
                json!({"axis": 1, "sizes": [1, 3, 1]}),
            ),
            &[3, 5, 4],
            &[&[3, 1, 4], &[3, 3, 4], &[3, 1, 4]],
        ),
        case(
            node("split", &["x"], &["o0", "o1"], json!({"axis": -1})),
            &[3, 5, 4],
            &[&[3, 5, 2], &[3, 5, 2]],
        ),
    ];
    cases.push(Case {
        y: Some(vec![3, 5, 1]),
        ..case(
            node("concat", &["x", "y", "x"], &["o0"], json!({"axis": -1})),
            &[3, 5, 4],
            &[&[3, 5, 9]],
        )
    });
    cases.push(Case {
        y: Some(vec![1, 5, 4]),
        ..case(
            node("concat", &["y", "x"], &["o0"], json!({"axis": 0})),
            &[3, 5, 4],
            &[&[4, 5, 4]],
        )
    });
    // An embedding lookup with negative ids, and a gather on the last axis with a
    // constant index.
    cases.push(Case {
        idx: Some((vec![2, 3], vec![0, 4, -1, 2, -5, 3])),
        ..case(
            node("gather", &["x", "idx"], &["o0"], json!({"axis": 0})),
            &[5, 4],
            &[&[2, 3, 4]],
        )
    });
    cases.push(Case {
        idx: Some((vec![2], vec![3, -4])),
        idx_const: true,
        ..case(
            node("gather", &["x", "idx"], &["o0"], json!({"axis": -1})),
            &[3, 5, 4],
            &[&[3, 5, 2]],
        )
    });
    cases
}

/// Calls `f` with an executor of `graph` for each of fusion on/off and 1–3 threads,
/// and a label saying which.
fn each_executor(graph: &Graph, constants: &MemoryConstants, mut f: impl FnMut(Executor, String)) {
    for fusion in [true, false] {
        for threads in [1, 2, 3] {
            let options = Options {
                threads,
                fusion,
                profile: false,
            };
            let e = Executor::new(graph.clone(), constants, options).unwrap();
            f(e, format!("{threads} threads, fusion {fusion}"));
        }
    }
}

fn decl(name: &str, dtype: &str, shape: &[usize]) -> Value {
    json!({"name": name, "dtype": dtype, "shape": shape})
}

#[test]
fn data_movement_equals_the_interpreter_bit_for_bit() {
    for (ci, c) in cases().into_iter().enumerate() {
        for dtype in ["F32", "I64", "BOOL"] {
            let mut inputs_decl = vec![decl("x", dtype, &c.x)];
            let mut inputs = vec![DenseTensor {
                shape: Shape::new(&c.x).unwrap(),
                data: data(dtype, c.x.iter().product(), ci as u64),
            }];
            if let Some(y) = &c.y {
                inputs_decl.push(decl("y", dtype, y));
                inputs.push(DenseTensor {
                    shape: Shape::new(y).unwrap(),
                    data: data(dtype, y.iter().product(), 50 + ci as u64),
                });
            }
            let mut constants = MemoryConstants::new();
            let mut consts_decl = Vec::new();
            if let Some((dims, ids)) = &c.idx {
                if c.idx_const {
                    consts_decl.push(decl("idx", "I64", dims));
                    constants.insert("idx", dims, Buffer::I64(ids.clone()));
                } else {
                    inputs_decl.push(decl("idx", "I64", dims));
                    inputs.push(DenseTensor {
                        shape: Shape::new(dims).unwrap(),
                        data: Buffer::I64(ids.clone()),
                    });
                }
            }
            let outs: Vec<Value> = c
                .outs
                .iter()
                .enumerate()
                .map(|(j, s)| decl(&format!("o{j}"), dtype, s))
                .collect();
            let doc = json!({
                "format": "rml-graph", "version": 1, "weights": "w.safetensors",
                "inputs": inputs_decl, "constants": consts_decl,
                "nodes": [c.node], "outputs": outs,
            });
            let graph = load_graph(&doc.to_string(), &constants).unwrap();
            let want = run(&graph, &constants, &inputs).unwrap();
            each_executor(&graph, &constants, |mut e, how| {
                let got = e.run(&inputs).unwrap();
                for (g, w) in got.iter().zip(&want) {
                    assert_eq!(g.shape, w.shape, "case {ci} {dtype}, {how}");
                    assert_eq!(
                        bits(&g.data),
                        bits(&w.data),
                        "case {ci} {dtype} {c:?}, {how}",
                        c = c.node
                    );
                }
            });
        }
    }
}

#[test]
fn an_out_of_range_gather_index_is_an_error_naming_the_node() {
    let doc = json!({
        "format": "rml-graph", "version": 1, "weights": "w.safetensors",
        "inputs": [decl("x", "F32", &[5, 4]), decl("idx", "I64", &[2])],
        "constants": [],
        "nodes": [{"op": "gather", "name": "emb", "inputs": ["x", "idx"], "outputs": ["y"], "attrs": {"axis": 0}}],
        "outputs": [decl("y", "F32", &[2, 4])],
    });
    let constants = MemoryConstants::new();
    let graph = load_graph(&doc.to_string(), &constants).unwrap();
    let inputs = [
        exec_support::tensor(&[5, 4], 1),
        DenseTensor {
            shape: Shape::new(&[2]).unwrap(),
            data: Buffer::I64(vec![1, 5]),
        },
    ];
    let mut e = Executor::new(graph, &constants, Options::default()).unwrap();
    let message = e.run(&inputs).unwrap_err().to_string();
    assert!(
        message.contains("gather") && message.contains("emb"),
        "{message}"
    );
}

#[test]
fn general_broadcasts_in_fused_programs_equal_the_interpreter_bit_for_bit() {
    // Operands broadcast on middle axes (neither the whole output nor a suffix of
    // it), over more elements than one tile, with ragged sizes.
    let doc = json!({
        "format": "rml-graph", "version": 1, "weights": "w.safetensors",
        "inputs": [decl("x", "F32", &[2, 37, 1, 5]), decl("z", "F32", &[2, 1, 7, 1])],
        "constants": [decl("c", "F32", &[7, 1])],
        "nodes": [
            {"op": "mul", "inputs": ["x", "c"], "outputs": ["m"]},
            {"op": "sub", "inputs": ["m", "z"], "outputs": ["y"]},
            {"op": "greater", "inputs": ["z", "x"], "outputs": ["g"]},
        ],
        "outputs": [decl("y", "F32", &[2, 37, 7, 5]), decl("g", "BOOL", &[2, 37, 7, 5])],
    });
    let (graph, constants) = exec_support::build(&doc);
    let inputs = [
        exec_support::tensor(&[2, 37, 1, 5], 3),
        exec_support::tensor(&[2, 1, 7, 1], 4),
    ];
    let want = run(&graph, &constants, &inputs).unwrap();
    each_executor(&graph, &constants, |mut e, how| {
        let got = e.run(&inputs).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(bits(&g.data), bits(&w.data), "{how}");
        }
    });
}

#[test]
fn hoisted_recurrence_input_linears_match_the_interpreter() {
    let (k, h, steps) = (6, 10, 5);
    let doc = exec_support::unrolled_rnn(k, h, steps);
    let (graph, constants) = exec_support::build(&doc);
    for batch in [1, 3] {
        let inputs = [exec_support::tensor(&[batch, steps * k], 7)];
        let want = run(&graph, &constants, &inputs).unwrap();
        let mut base: Option<Vec<DenseTensor>> = None;
        each_executor(&graph, &constants, |mut e, how| {
            // One input projection over all steps, one recurrent linear per step.
            let linears = e
                .steps()
                .iter()
                .filter(|s| matches!(s.kind, StepKind::Linear { .. }))
                .count();
            assert_eq!(linears, steps, "hoisted: 1 + {} recurrent", steps - 1);
            let got = e.run(&inputs).unwrap().to_vec();
            for (g, w) in got.iter().zip(&want) {
                let (Buffer::F32(g), Buffer::F32(w)) = (&g.data, &w.data) else {
                    panic!("F32 outputs");
                };
                for (a, b) in g.iter().zip(w) {
                    // tanh of K- and H-term dot products of values in [-1, 1):
                    // the GEMM's rounding and the vector tanh stay far below this.
                    assert!((a - b).abs() <= 1e-5, "{a} vs {b}");
                }
            }
            match &base {
                Some(b) => assert_eq!(&got, b, "{how}"),
                None => base = Some(got),
            }
        });
    }
}
