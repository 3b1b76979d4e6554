//! `rml-host run` and `rml-host bench` on a graph folder written here: the NumPy MLP
//! case as `model.json` + `model.safetensors`, `inputs/x.npy` and `expected/y.npy`.

use std::path::{Path, PathBuf};
use std::process::Command;

mod graph_support;

use graph_support::{dense, fixture};
use rml_host::formats::{npy, safetensors};
use rml_host::graph::tensors::to_tensor;
use serde_json::Value;

/// Writes the graph folder under the target directory and returns the graph path.
fn folder(name: &str) -> PathBuf {
    let doc = fixture("run/mlp.json");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(dir.join("inputs")).unwrap();
    std::fs::create_dir_all(dir.join("expected")).unwrap();
    let mut graph = doc["graph"].clone();
    graph["weights"] = Value::from("model.safetensors");
    std::fs::write(dir.join("model.json"), graph.to_string()).unwrap();
    let weights: Vec<(String, rml_host::Tensor)> = doc["constants"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(n, t)| (n.clone(), to_tensor(&dense(t)).unwrap()))
        .collect();
    let refs: Vec<(&str, &rml_host::Tensor)> =
        weights.iter().map(|(n, t)| (n.as_str(), t)).collect();
    safetensors::save(dir.join("model.safetensors"), &refs, None).unwrap();
    let input_name = graph["inputs"][0]["name"].as_str().unwrap();
    let output_name = graph["outputs"][0]["name"].as_str().unwrap();
    npy::save(
        dir.join(format!("inputs/{input_name}.npy")),
        &to_tensor(&dense(&doc["inputs"][0])).unwrap(),
    )
    .unwrap();
    npy::save(
        dir.join(format!("expected/{output_name}.npy")),
        &to_tensor(&dense(&doc["outputs"][0])).unwrap(),
    )
    .unwrap();
    dir.join("model.json")
}

fn rml_host(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rml-host"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn run_compares_with_expected_and_writes_outputs() {
    let graph = folder("cli_run");
    let outdir = graph.parent().unwrap().join("out");
    let (ok, stdout, stderr) = rml_host(&[
        "run",
        graph.to_str().unwrap(),
        "--output-dir",
        outdir.to_str().unwrap(),
        "--profile",
        "--threads",
        "2",
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("max error vs expected/"), "{stdout}");
    let err: f64 = stdout
        .split("max error vs expected/")
        .nth(1)
        .and_then(|s| s.split(": ").nth(1))
        .and_then(|s| s.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(err < 1e-4, "{stdout}");
    assert!(stdout.contains("time (us)"), "{stdout}");
    let written = std::fs::read_dir(&outdir).unwrap().count();
    assert_eq!(written, 1);
    let (ok, stdout, _) = rml_host(&["run", graph.to_str().unwrap(), "--no-fusion"]);
    assert!(ok && stdout.contains("max error"), "{stdout}");
    // A steady-state profile: the mean over runs after a warm-up.
    let path = graph.to_str().unwrap();
    let (ok, stdout, _) = rml_host(&["run", path, "--profile", "--runs", "3"]);
    assert!(ok && stdout.contains("time (us)"), "{stdout}");
    let (ok, _, stderr) = rml_host(&["run", path, "--runs", "0"]);
    assert!(
        !ok && stderr.contains("--runs must be at least 1"),
        "{stderr}"
    );
}

#[test]
fn rml_isa_forces_a_kernel_family_and_names_a_bad_one() {
    let graph = folder("cli_isa");
    let path = graph.to_str().unwrap();
    let run_with = |isa: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_rml-host"))
            .args(["run", path])
            .env("RML_ISA", isa)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        (
            out.status.success(),
            stdout,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, stdout, stderr) = run_with("scalar");
    assert!(ok && stdout.contains("max error"), "{stderr}");
    let (ok, _, stderr) = run_with("sse9");
    assert!(
        !ok && stderr.starts_with("rml-host: error: RML_ISA=sse9: ")
            && stderr.contains("scalar, avx2, avx512, neon"),
        "{stderr}"
    );
}

#[test]
fn run_reports_bad_inputs_on_one_line() {
    let graph = folder("cli_bad");
    let (ok, _, stderr) = rml_host(&["run", graph.to_str().unwrap(), "--input", "nope"]);
    assert!(!ok);
    assert!(
        stderr.starts_with("rml-host: error: --input \"nope\""),
        "{stderr}"
    );
}

#[test]
fn bench_prints_a_cell_per_batch_and_thread_count() {
    let graph = folder("cli_bench");
    let (ok, stdout, stderr) = rml_host(&[
        "bench",
        graph.to_str().unwrap(),
        "--batch",
        "1,3",
        "--threads",
        "1,2",
        "--json",
    ]);
    assert!(ok, "{stderr}");
    let cells: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(cells.as_array().unwrap().len(), 4);
    assert!(cells[0]["median_us"].as_f64().unwrap() > 0.0);
}

#[test]
fn bench_times_given_inputs_a_fixed_number_of_runs() {
    let graph = folder("cli_bench_inputs");
    let dir = graph.parent().unwrap();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&graph).unwrap()).unwrap();
    let name = doc["inputs"][0]["name"].as_str().unwrap();
    let pair = format!(
        "{name}={}",
        dir.join(format!("inputs/{name}.npy")).display()
    );
    let (ok, stdout, stderr) = rml_host(&[
        "bench",
        graph.to_str().unwrap(),
        "--input",
        &pair,
        "--runs",
        "7",
        "--threads",
        "1,2",
        "--json",
    ]);
    assert!(ok, "{stderr}");
    let cells: Value = serde_json::from_str(stdout.trim()).unwrap();
    for cell in cells.as_array().unwrap() {
        assert_eq!(cell["runs"].as_u64(), Some(7));
        // A number (it can read 0 for a graph this small: the kernel's per-thread
        // run time advances at scheduler events).
        assert!(cell["cpu_us"].as_f64().unwrap() >= 0.0, "{cell}");
    }
    let (ok, _, stderr) = rml_host(&[
        "bench",
        graph.to_str().unwrap(),
        "--input",
        &pair,
        "--batch",
        "1,2",
    ]);
    assert!(!ok);
    assert!(stderr.contains("--input takes one --batch"), "{stderr}");
}
