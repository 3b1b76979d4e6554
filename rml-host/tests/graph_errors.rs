//! Malformed graphs are rejected with the specific error that names the problem.

mod graph_support;

use graph_support::{declared_constants, error_of, fixture, load};
use rml_core::DType;
use rml_host::graph::{GraphError, OP_NAMES, Site, load_graph};
use serde_json::{Value, json};

/// The node at `index` of a document.
fn node(doc: &mut Value, index: usize) -> &mut Value {
    &mut doc["nodes"][index]
}

#[test]
fn unknown_version_lists_the_supported_ones() {
    let e = error_of("mlp.json", |d| d["version"] = json!(2));
    assert_eq!(
        e,
        GraphError::UnsupportedVersion {
            found: 2,
            supported: &[1]
        }
    );
    assert_eq!(
        e.to_string(),
        "graph: version 2 is not supported (supported versions: 1)"
    );
}

#[test]
fn wrong_format_name_is_rejected() {
    let e = error_of("mlp.json", |d| d["format"] = json!("onnx"));
    assert!(matches!(e, GraphError::UnknownFormat { .. }), "{e}");
    assert!(e.to_string().contains("expected \"rml-graph\""), "{e}");
}

#[test]
fn syntax_and_structure_errors_say_where() {
    let e = load_graph("{\"format\": ", &declared_constants(&json!({}))).unwrap_err();
    assert!(
        matches!(e, GraphError::Parse { .. }) && e.to_string().contains("line 1"),
        "{e}"
    );
    let e = error_of("mlp.json", |d| {
        d["nodes"][0].as_object_mut().unwrap().remove("outputs");
    });
    assert!(e.to_string().contains("missing field `outputs`"), "{e}");
    let e = error_of("mlp.json", |d| d["extra"] = json!(1));
    assert!(e.to_string().contains("unknown field `extra`"), "{e}");
}

#[test]
fn use_before_definition_names_the_later_definition() {
    // Swapping the first two nodes makes relu read `h` before `fc1` defines it.
    let e = error_of("mlp.json", |d| {
        d["nodes"].as_array_mut().unwrap().swap(0, 1)
    });
    let GraphError::UsedBeforeDefinition {
        site,
        name,
        defined_at,
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!(name, "h");
    assert!(matches!(site, Site::Node(n) if n.index == 0 && n.op == "relu"));
    assert!(matches!(defined_at, Site::Node(n) if n.index == 1));
    assert_eq!(
        e.to_string(),
        "node 0 (relu): value \"h\" is used before it is defined (by node 1 (linear \"fc1\")); \
         nodes must be in topological order and acyclic"
    );
}

#[test]
fn a_cycle_is_a_use_before_definition() {
    // relu reads its own output.
    let e = error_of("mlp.json", |d| node(d, 1)["inputs"] = json!(["a"]));
    assert!(
        matches!(&e, GraphError::UsedBeforeDefinition { name, .. } if name == "a"),
        "{e}"
    );
}

#[test]
fn dangling_names_are_rejected() {
    let e = error_of("mlp.json", |d| {
        node(d, 2)["inputs"][1] = json!("fc3.weight")
    });
    assert_eq!(
        e.to_string(),
        "node 2 (linear \"fc2\"): value \"fc3.weight\" is not defined anywhere"
    );
    let e = error_of("mlp.json", |d| d["outputs"][0]["name"] = json!("z"));
    assert_eq!(
        e.to_string(),
        "output \"z\": value \"z\" is not defined anywhere"
    );
}

#[test]
fn duplicate_names_name_both_definitions() {
    let e = error_of("mlp.json", |d| node(d, 1)["outputs"] = json!(["h"]));
    assert_eq!(
        e.to_string(),
        "node 1 (relu): value \"h\" is already defined by node 0 (linear \"fc1\")"
    );
    let e = error_of("mlp.json", |d| d["constants"][0]["name"] = json!("x"));
    assert!(
        matches!(
            &e,
            GraphError::DuplicateName {
                first: Site::Input(_),
                second: Site::Constant(_),
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn bad_attributes_say_what_was_expected() {
    let e = error_of("cnn.json", |d| {
        node(d, 0)["attrs"]["stride"] = json!([0, 1])
    });
    assert_eq!(
        e.to_string(),
        "node 0 (conv2d \"conv1\"): attribute \"stride\": expected 2 positive integers, found [0, 1]"
    );
    let e = error_of("cnn.json", |d| {
        node(d, 0)["attrs"]["padding"] = json!([1, 1])
    });
    assert!(
        e.to_string().contains("expected 2 [before, after] pairs"),
        "{e}"
    );
    let e = error_of("cnn.json", |d| node(d, 1)["attrs"]["epsilon"] = json!(-1));
    assert!(
        matches!(
            &e,
            GraphError::BadAttribute {
                attr: "epsilon",
                ..
            }
        ),
        "{e}"
    );
    let e = error_of("cnn.json", |d| {
        node(d, 3)["attrs"]
            .as_object_mut()
            .unwrap()
            .remove("kernel");
    });
    assert_eq!(
        e.to_string(),
        "node 3 (max_pool2d \"pool1\"): attribute \"kernel\": expected 2 positive integers, found missing"
    );
    let e = error_of("cnn.json", |d| {
        node(d, 0)["attrs"]["strides"] = json!([1, 1])
    });
    assert!(
        matches!(&e, GraphError::UnknownAttribute { attr, allowed, .. }
            if attr == "strides" && allowed.contains(&"stride")),
        "{e}"
    );
    let e = error_of("misc.json", |d| node(d, 3)["attrs"]["to"] = json!("Q4_K"));
    assert!(
        matches!(&e, GraphError::BadAttribute { attr: "to", .. }),
        "{e}"
    );
}

#[test]
fn shape_dependent_attribute_checks_name_the_attribute() {
    let e = error_of("mlp.json", |d| node(d, 3)["attrs"]["axis"] = json!(2));
    assert_eq!(
        e.to_string(),
        "node 3 (log_softmax): attribute \"axis\": axis 2 is out of range for rank 2"
    );
    let e = error_of("transformer_block.json", |d| {
        node(d, 7)["attrs"]["perm"] = json!([0, 1, 1, 3])
    });
    assert!(e.to_string().contains("is not a permutation"), "{e}");
    let e = error_of("unet.json", |d| {
        node(d, 1)["attrs"]["num_groups"] = json!(3)
    });
    assert!(
        e.to_string()
            .contains("\"num_groups\": 3 does not divide the 8 channels"),
        "{e}"
    );
}

#[test]
fn unknown_op_lists_every_supported_op() {
    let e = error_of("mlp.json", |d| node(d, 1)["op"] = json!("relu6"));
    let text = e.to_string();
    assert!(
        text.starts_with("node 1 (relu6): unknown op \"relu6\"; supported ops: matmul, linear")
    );
    for op in OP_NAMES {
        assert!(text.contains(op), "{op} missing from {text}");
    }
}

#[test]
fn wrong_shapes_are_rejected_at_load() {
    // fc2 expects 16 input features; feed it the 8-feature input.
    let e = error_of("mlp.json", |d| node(d, 2)["inputs"][0] = json!("x"));
    assert_eq!(
        e.to_string(),
        "node 2 (linear \"fc2\"): input \"x\" (F32 [N, 8]) and weight input \"fc2.weight\" \
         (F32 [4, 16]): inner sizes differ"
    );
    let e = error_of("cnn.json", |d| {
        d["constants"][0]["shape"] = json!([8, 4, 3, 3])
    });
    assert!(
        matches!(&e, GraphError::Infer { node, .. } if node.index == 0),
        "{e}"
    );
    let e = error_of("lstm_cell.json", |d| {
        node(d, 3)["attrs"]["sizes"] = json!([16, 16, 16, 8])
    });
    assert!(e.to_string().contains("add up to 56"), "{e}");
    let e = error_of("transformer_block.json", |d| {
        node(d, 4)["attrs"]["shape"] = json!([0, 0, 5, -1])
    });
    assert!(e.to_string().contains("cannot reshape"), "{e}");
    let e = error_of("mlp.json", |d| d["outputs"][0]["shape"] = json!(["N", 5]));
    assert_eq!(
        e.to_string(),
        "output \"y\": declared as F32 [N, 5], inferred F32 [N, 4]"
    );
}

#[test]
fn dtype_rules_are_enforced() {
    let e = error_of("misc.json", |d| node(d, 2)["inputs"][0] = json!("x"));
    assert!(e.to_string().contains("the condition must be BOOL"), "{e}");
    let e = error_of("misc.json", |d| node(d, 2)["inputs"][2] = json!("mask"));
    assert!(e.to_string().contains("insert a cast"), "{e}");
}

#[test]
fn missing_or_misshaped_constants_are_rejected() {
    let doc = fixture("mlp.json");
    let mut constants = declared_constants(&doc);
    constants.describe_tensor("fc1.weight", DType::F32, &[16, 9]);
    let e = load_graph(&doc.to_string(), &constants).unwrap_err();
    assert_eq!(
        e.to_string(),
        "constant \"fc1.weight\": declared as F32 [16, 8], the weights hold F32 [16, 9]"
    );
    let e = load_graph(&doc.to_string(), &declared_constants(&json!({}))).unwrap_err();
    assert_eq!(
        e,
        GraphError::MissingConstant {
            name: "fc1.weight".into()
        }
    );
    let e = error_of("mlp.json", |d| {
        d.as_object_mut().unwrap().remove("weights");
    });
    assert_eq!(e, GraphError::MissingWeights);
    let e = error_of("mlp.json", |d| d["constants"][0]["shape"] = json!(["N", 8]));
    assert!(
        matches!(
            &e,
            GraphError::BadShape {
                site: Site::Constant(_),
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn arity_errors_give_the_accepted_counts() {
    let e = error_of("mlp.json", |d| node(d, 1)["inputs"] = json!(["h", "h"]));
    assert_eq!(e.to_string(), "node 1 (relu): expected 1 input, found 2");
    let e = error_of("mlp.json", |d| node(d, 0)["inputs"] = json!(["x"]));
    assert_eq!(
        e.to_string(),
        "node 0 (linear \"fc1\"): expected 2 to 3 inputs, found 1"
    );
    let e = error_of("mlp.json", |d| node(d, 0)["inputs"][1] = json!(""));
    assert!(e.to_string().contains("input 1 is required"), "{e}");
}

#[test]
fn bad_declarations_are_rejected() {
    let e = error_of("mlp.json", |d| d["inputs"][0]["shape"] = json!(["2*N", 8]));
    assert!(
        e.to_string()
            .contains("must be an integer or a plain symbol"),
        "{e}"
    );
    let e = error_of("mlp.json", |d| d["inputs"][0]["dtype"] = json!("F8"));
    assert!(matches!(&e, GraphError::BadDType { .. }), "{e}");
    let e = error_of("mlp.json", |d| d["outputs"][0]["shape"] = json!(["M", 4]));
    assert!(e.to_string().contains("symbol \"M\" is not bound"), "{e}");
    let e = error_of("mlp.json", |d| {
        d["inputs"][0]["shape"] = json!([1, 1, 1, 1, 1, 1, 1, 1, 1])
    });
    assert!(e.to_string().contains("exceeds the maximum rank 8"), "{e}");
}

#[test]
fn binding_checks_inputs_and_symbols() {
    let cnn = load(&fixture("cnn.json")).unwrap();
    let e = cnn.bind(&[&[2, 3, 31, 32]]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "input \"image\": expected [N, 3, 32, 32], got [2, 3, 31, 32]"
    );
    assert_eq!(
        cnn.bind(&[]).unwrap_err(),
        GraphError::BindArity {
            expected: 1,
            found: 0
        }
    );
    let lstm = load(&fixture("lstm_cell.json")).unwrap();
    let e = lstm.bind(&[&[2, 8], &[3, 16], &[2, 16]]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "input \"h\": expected [N, 16], got [3, 16] (N is already bound to 2)"
    );
}

#[test]
fn binding_finds_what_symbolic_inference_deferred() {
    // An odd height: the strided conv and its transpose no longer round-trip, so the
    // concat of the input with the upsampled path fails at bind time, naming it.
    let unet = load(&fixture("unet.json")).unwrap();
    let e = unet.bind(&[&[1, 4, 15, 16]]).unwrap_err();
    assert!(
        matches!(&e, GraphError::BindNode { node, .. } if node.op == "concat"),
        "{e}"
    );
    assert!(e.to_string().contains("differ on axis 2"), "{e}");
}

#[test]
fn declared_output_dims_refine_unknown_ones_and_are_checked_at_bind() {
    // The padded height is 2*H + 2, unknown at load; declaring it as H is accepted
    // (it might hold) and caught once H is known.
    let mut doc = fixture("unet.json");
    doc["outputs"][1]["shape"] = json!(["N", 4, "H", "2*W"]);
    let g = load(&doc).unwrap();
    let e = g.bind(&[&[1, 4, 16, 12]]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "node 6 (pad): output \"x2p\": expected [N, 4, H, 2*W] = [1, 4, 16, 24], got [1, 4, 34, 24]"
    );
}
