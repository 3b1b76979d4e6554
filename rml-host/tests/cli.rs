//! `rml-host inspect`: summaries of every supported format, `--json`, and one-line
//! errors with a non-zero exit status (never a panic) for every malformed file.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests")
}

fn inspect(args: &[&str], file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rml-host"))
        .arg("inspect")
        .args(args)
        .arg(file)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn text_summaries_list_metadata_tensors_and_totals() {
    let fixtures = root().join("fixtures/host_formats");
    let o = inspect(&[], &fixtures.join("dtypes.safetensors"));
    assert!(o.status.success());
    let text = stdout(&o);
    assert!(text.contains("source = safetensors-python"), "{text}");
    assert!(text.contains("t_float32") && text.contains("F32") && text.contains("[5]"));
    assert!(text.contains("total: 9 tensors"), "{text}");
    for (file, needle) in [
        ("f4.npy", "[3, 4]"),
        ("fortran_f4.npy", "fortran_order = true"),
        ("arrays_compressed.npz", "deflated to"),
        (
            "sharded/model.safetensors.index.json",
            "model-00002-of-00002.safetensors",
        ),
        ("big_endian_f8.npy", "byte_order = big"),
    ] {
        let path = fixtures.join(file);
        let o = inspect(&[], &path);
        assert!(
            o.status.success(),
            "{file}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(stdout(&o).contains(needle), "{file}: {}", stdout(&o));
    }
}

#[test]
fn gguf_files_are_summarized() {
    let o = inspect(&[], &root().join("fixtures/gguf/all_types.gguf"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = stdout(&o);
    assert!(text.contains("gguf.version = 3"), "{text}");
    assert!(text.contains("general.architecture"), "{text}");
    assert!(text.contains("total: "), "{text}");
    let o = inspect(&["--json"], &root().join("fixtures/gguf/all_types.gguf"));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["format"], "gguf");
    assert!(v["total_tensors"].as_u64().unwrap() > 0);
}

#[test]
fn json_output_parses_and_has_totals() {
    let o = inspect(
        &["--json"],
        &root().join("fixtures/host_formats/arrays.npz"),
    );
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["format"], "npz");
    assert_eq!(v["total_tensors"], 3);
    assert_eq!(v["tensors"][0]["name"], "a");
    assert_eq!(v["tensors"][0]["shape"], serde_json::json!([2, 3]));
    assert_eq!(v["total_bytes"], 24 + 32 + 5);
}

#[test]
fn errors_are_one_line_with_a_failing_status() {
    let mut files: Vec<PathBuf> = Vec::new();
    for sub in ["malformed/safetensors", "malformed/npy", "malformed/gguf"] {
        for e in std::fs::read_dir(root().join(sub)).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x != "tsv") {
                files.push(path);
            }
        }
    }
    files.push(root().join("no/such/file.safetensors"));
    files.push(root().join("fixtures"));
    for file in files {
        let o = inspect(&[], &file);
        let err = String::from_utf8_lossy(&o.stderr);
        // inspect lists GGUF tensors of types rml cannot compute with (loaders refuse
        // them), marking them.
        let name = file.file_name().unwrap().to_string_lossy();
        if name == "valid.gguf" {
            // The GGUF corpus keeps the valid file its cases were cut from.
            assert!(o.status.success(), "{name}: {err}");
            continue;
        }
        if name.starts_with("unsupported_") && name.ends_with(".gguf") {
            assert!(o.status.success(), "{name}: {err}");
            assert!(stdout(&o).contains("type not supported by rml"), "{name}");
            continue;
        }
        assert_eq!(o.status.code(), Some(1), "{}: {err}", file.display());
        assert_eq!(err.lines().count(), 1, "{}: {err}", file.display());
        assert!(err.starts_with("rml-host: error: "), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn rml_graphs_list_their_signature_ops_and_constants() {
    let graph = root().join("../../models/graph-default/transformer_block.json");
    let o = inspect(&[], &graph);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = stdout(&o);
    assert!(text.contains("format = rml-graph v1"), "{text}");
    assert!(text.contains("inputs = x: F32 [B, S, 16]"), "{text}");
    assert!(
        text.contains("linear×4") && text.contains("scaled_dot_product_attention×1"),
        "{text}"
    );
    assert!(text.contains("qkv") && text.contains("[48, 16]"), "{text}");
    assert!(text.contains("total: 6 tensors"), "{text}");
    // A JSON file that is not a valid graph is one line naming the problem.
    let dir = std::env::temp_dir().join(format!("rml-inspect-graph-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"format": "rml-graph", "version": 99}"#).unwrap();
    let o = inspect(&[], &bad);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("version"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
