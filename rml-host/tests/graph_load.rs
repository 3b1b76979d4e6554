//! Hand-written graphs load, and shape inference finds every value's type,
//! symbolic dims included; binding gives concrete shapes.

mod graph_support;

use graph_support::{fixture, load, type_of};
use rml_host::graph::{Dim, Op};

#[test]
fn mlp_infers_a_symbolic_batch() {
    let g = load(&fixture("mlp.json")).unwrap();
    assert_eq!(g.nodes.len(), 4);
    assert_eq!(type_of(&g, "h"), "F32 [N, 16]");
    assert_eq!(type_of(&g, "y"), "F32 [N, 4]");
    assert_eq!(g.weights.as_deref(), Some("mlp.safetensors"));
    assert_eq!(
        g.nodes[3].op,
        Op::Softmax {
            log: true,
            axis: -1
        }
    );
}

#[test]
fn cnn_uses_rml_core_window_shapes() {
    let g = load(&fixture("cnn.json")).unwrap();
    assert_eq!(type_of(&g, "c1"), "F32 [N, 8, 16, 16]");
    assert_eq!(type_of(&g, "p1"), "F32 [N, 8, 8, 8]");
    assert_eq!(type_of(&g, "c2"), "F32 [N, 8, 7, 7]");
    assert_eq!(type_of(&g, "p2"), "F32 [N, 8, 4, 4]");
    assert_eq!(type_of(&g, "g"), "F32 [N, 8, 1, 1]");
    assert_eq!(type_of(&g, "f"), "F32 [N, 8]");
    assert_eq!(type_of(&g, "logits"), "F32 [N, 10]");
    let Op::Conv2d(p) = &g.nodes[0].op else {
        panic!("conv2d parses to Op::Conv2d")
    };
    assert_eq!(
        (p.stride, p.padding.top, p.padding.right, p.groups),
        ([2, 2], 1, 1, 1)
    );
}

#[test]
fn transformer_block_tracks_products_of_symbols() {
    let g = load(&fixture("transformer_block.json")).unwrap();
    assert_eq!(type_of(&g, "x"), "F32 [B, S, 32]");
    assert_eq!(type_of(&g, "q1"), "F32 [B, S, 4, 8]");
    assert_eq!(type_of(&g, "k1"), "F32 [B, S, 4, 8]");
    assert_eq!(type_of(&g, "v1"), "F32 [B, S, 4, 8]");
    assert_eq!(type_of(&g, "q"), "F32 [B, 4, S, 8]");
    assert_eq!(type_of(&g, "o2"), "F32 [B, S, 32]");
    assert_eq!(type_of(&g, "flat"), "F32 [B*S, 32]");
    let bound = g.bind(&[&[2, 5]]).unwrap();
    assert_eq!(bound.symbols["B"], 2);
    assert_eq!(bound.symbols["S"], 5);
    let flat = g.value_id("flat").unwrap();
    assert_eq!(bound.shapes[flat].dims(), &[10, 32]);
    let q = g.value_id("q").unwrap();
    assert_eq!(bound.shapes[q].dims(), &[2, 4, 5, 8]);
}

#[test]
fn unet_leaves_symbolic_spatial_sizes_to_binding() {
    let g = load(&fixture("unet.json")).unwrap();
    assert_eq!(type_of(&g, "d"), "F32 [N, 8, ?, ?]");
    assert_eq!(type_of(&g, "u"), "F32 [N, 4, ?, ?]");
    assert_eq!(type_of(&g, "cat"), "F32 [N, 8, H, W]");
    assert_eq!(type_of(&g, "x2"), "F32 [N, 4, 2*H, 2*W]");
    assert_eq!(type_of(&g, "x2p"), "F32 [N, 4, ?, 2*W]");
    assert_eq!(type_of(&g, "m"), "F32 [N, 8, 1, 1]");
    let bound = g.bind(&[&[1, 4, 16, 12]]).unwrap();
    let shape = |name: &str| bound.shapes[g.value_id(name).unwrap()].dims().to_vec();
    assert_eq!(shape("d"), [1, 8, 8, 6]);
    assert_eq!(shape("u"), [1, 4, 16, 12]);
    assert_eq!(shape("x2p"), [1, 4, 34, 24]);
    assert_eq!(g.nodes[0].inputs[2], None);
}

#[test]
fn lstm_cell_and_vae_load() {
    let g = load(&fixture("lstm_cell.json")).unwrap();
    assert_eq!(type_of(&g, "gates"), "F32 [N, 64]");
    assert_eq!(type_of(&g, "g0"), "F32 [N, 16]");
    assert_eq!(type_of(&g, "h_next"), "F32 [N, 16]");
    let g = load(&fixture("vae.json")).unwrap();
    assert_eq!(type_of(&g, "logvar"), "F32 [N, 4]");
    assert_eq!(type_of(&g, "half_logvar"), "F32 [N, 4]");
    assert_eq!(type_of(&g, "recon"), "F32 [N, 12]");
}

#[test]
fn misc_ops_follow_their_shape_rules() {
    let g = load(&fixture("misc.json")).unwrap();
    assert_eq!(type_of(&g, "mask"), "BOOL [N, 6]");
    assert_eq!(type_of(&g, "w3"), "F32 [N, 1, 6]");
    assert_eq!(type_of(&g, "we"), "F32 [N, 5, 6]");
    assert_eq!(type_of(&g, "s1"), "F32 [2, 3, 5]");
    assert_eq!(type_of(&g, "am"), "I64 [2, 3]");
    assert_eq!(type_of(&g, "var"), "F32 [3]");
    assert_eq!(type_of(&g, "total"), "F32 []");
    assert_eq!(type_of(&g, "ap"), "F32 [2, 3, 4]");
    assert_eq!(g.outputs.len(), 11);
}

#[test]
fn every_fixture_binds_with_batch_three() {
    for name in [
        "mlp.json",
        "cnn.json",
        "lstm_cell.json",
        "vae.json",
        "misc.json",
    ] {
        let g = load(&fixture(name)).unwrap();
        let shapes: Vec<Vec<usize>> = g
            .inputs
            .iter()
            .map(|&id| {
                let dims = &g.value(id).ty.shape;
                dims.iter()
                    .map(|d| if let Dim::Fixed(n) = d { *n } else { 3 })
                    .collect()
            })
            .collect();
        let refs: Vec<&[usize]> = shapes.iter().map(Vec::as_slice).collect();
        let bound = g.bind(&refs).unwrap_or_else(|e| panic!("{name}: {e}"));
        for &out in &g.outputs {
            let declared = &g.value(out).ty.shape;
            let got = bound.shapes[out].dims();
            for (d, &n) in declared.iter().zip(got) {
                assert_eq!(d.eval(&bound.symbols), Some(n), "{name}: output dims");
            }
        }
    }
}

#[test]
fn every_op_is_specified_in_the_format_doc() {
    let doc_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/graph-ir.md");
    let doc = std::fs::read_to_string(doc_path).unwrap();
    for op in rml_host::graph::OP_NAMES {
        assert!(
            doc.contains(&format!("`{op}`")),
            "docs/graph-ir.md does not specify {op}"
        );
    }
}
