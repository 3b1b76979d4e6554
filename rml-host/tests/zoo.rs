//! Every committed zoo fixture (`zoo/fixtures/<model>/<framework>/`, written by
//! `zoo/make_fixtures.py` from PyTorch, JAX and TensorFlow) runs in rml and matches the
//! framework's own outputs: `graph.json` + `weights.safetensors` loaded as
//! `rml-host run` loads them, `inputs.npz` fed to the planned executor (fused on one
//! to three threads, every step split or not, and unfused; all bit for bit equal)
//! and to the reference interpreter, each output compared with `expected.npz`
//! within `|got - want| <= ATOL + RTOL * |want|`.
//!
//! One test per model (covering its three frameworks), so `cargo test --test zoo`
//! prints the model × pass/fail table; a failure names the framework, the output and
//! the worst element.

use std::path::{Path, PathBuf};

use rml_host::formats::npy::Npz;
use rml_host::graph::tensors::{load_weights, to_dense};
use rml_host::graph::{Buffer, DenseTensor, Executor, Graph, Options, load_graph, run};

/// Relative tolerance against the framework's output.
const RTOL: f32 = 1e-4;
/// Absolute tolerance against the framework's output.
const ATOL: f32 = 1e-4;

/// The frameworks every model is exported from.
const FRAMEWORKS: [&str; 3] = ["torch", "jax", "tf"];

/// The models of `zoo/models.py`.
const MODELS: [&str; 19] = [
    "mlp",
    "cnn",
    "transformer_block",
    "layernorm_gelu",
    "vit",
    "encoder",
    "tiny_gpt",
    "rnn",
    "lstm",
    "ssm",
    "autoencoder",
    "vae",
    "gan_generator",
    "diffusion_mlp",
    "unet",
    "gcn",
    "two_tower",
    "clip",
    "moe",
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../zoo/fixtures")
}

/// Reads `names` from the npz at `path`, each as the dtype the graph gives it.
fn read_npz(path: &Path, graph: &Graph, names: &[usize]) -> Result<Vec<DenseTensor>, String> {
    let npz = Npz::open(path).map_err(|e| e.to_string())?;
    names
        .iter()
        .map(|&id| {
            let value = &graph.values[id];
            let t = npz.get(&value.name).map_err(|e| e.to_string())?;
            to_dense(&t, value.ty.dtype).map_err(|e| format!("{}: {e}", value.name))
        })
        .collect()
}

/// The first output of `got` not within tolerance of `want`, described.
fn mismatch(graph: &Graph, got: &[DenseTensor], want: &[DenseTensor]) -> Option<String> {
    for ((g, w), &id) in got.iter().zip(want).zip(&graph.outputs) {
        let name = &graph.values[id].name;
        if g.shape != w.shape {
            return Some(format!("output {name}: shape {} != {}", g.shape, w.shape));
        }
        match (&g.data, &w.data) {
            (Buffer::F32(g), Buffer::F32(w)) => {
                let within = |a: f32, b: f32| {
                    (a - b).abs() <= ATOL + RTOL * b.abs() || (a.is_nan() && b.is_nan())
                };
                if let Some((i, (a, b))) = g
                    .iter()
                    .zip(w)
                    .enumerate()
                    .find(|(_, (a, b))| !within(**a, **b))
                {
                    let bad = g.iter().zip(w).filter(|(a, b)| !within(**a, **b)).count();
                    return Some(format!(
                        "output {name}[{i}]: got {a}, expected {b} ({bad} of {} elements off)",
                        w.len()
                    ));
                }
            }
            (g, w) if g != w => return Some(format!("output {name}: values differ")),
            _ => {}
        }
    }
    None
}

/// Loads and runs one fixture; `Err` says what failed.
fn check_fixture(dir: &Path) -> Result<(), String> {
    let json = dir.join("graph.json");
    let text = std::fs::read_to_string(&json).map_err(|e| format!("{}: {e}", json.display()))?;
    let weights = load_weights(&dir.join("weights.safetensors")).map_err(|e| e.to_string())?;
    let graph = load_graph(&text, &weights).map_err(|e| format!("load: {e}"))?;
    let inputs = read_npz(&dir.join("inputs.npz"), &graph, &graph.inputs)?;
    let want = read_npz(&dir.join("expected.npz"), &graph, &graph.outputs)?;

    let reference = run(&graph, &weights, &inputs).map_err(|e| format!("interpreter: {e}"))?;
    if let Some(m) = mismatch(&graph, &reference, &want) {
        return Err(format!("interpreter: {m}"));
    }
    // Fused on 1-3 threads (also with every step split, however small, so the
    // split paths run on these tiny sizes) and unfused: all within tolerance of
    // the framework and bit for bit equal to each other.
    let mut first: Option<Vec<DenseTensor>> = None;
    for (threads, fusion, split_all) in [
        (1, true, false),
        (2, true, false),
        (2, true, true),
        (3, true, true),
        (1, false, false),
    ] {
        let options = Options {
            threads,
            fusion,
            ..Options::default()
        };
        let run = format!("{threads} threads, fusion {fusion}, split all {split_all}");
        let mut exec = Executor::new(graph.clone(), &weights, options)
            .map_err(|e| format!("executor: {e}"))?;
        if split_all {
            exec.set_min_chunk_ps(0);
        }
        let got = exec
            .run(&inputs)
            .map_err(|e| format!("executor ({run}): {e}"))?;
        if let Some(m) = mismatch(&graph, got, &want) {
            return Err(format!("executor ({run}): {m}"));
        }
        match &first {
            Some(f) if f[..] != got[..] => {
                return Err(format!("executor ({run}): not bit for bit the first run's"));
            }
            Some(_) => {}
            None => first = Some(got.to_vec()),
        }
    }
    Ok(())
}

/// Checks `model` for every framework, panicking with every failure.
fn check_model(model: &str) {
    let failures: Vec<String> = FRAMEWORKS
        .iter()
        .filter_map(|fw| {
            let dir = fixtures().join(model).join(fw);
            check_fixture(&dir)
                .err()
                .map(|e| format!("{model}/{fw}: {e}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

macro_rules! zoo_tests {
    ($($model:ident),*) => {
        $(
            #[test]
            fn $model() {
                check_model(stringify!($model));
            }
        )*

        #[test]
        fn every_model_has_a_test() {
            let tested = [$(stringify!($model)),*];
            assert_eq!(tested, MODELS);
        }
    };
}

zoo_tests!(
    mlp,
    cnn,
    transformer_block,
    layernorm_gelu,
    vit,
    encoder,
    tiny_gpt,
    rnn,
    lstm,
    ssm,
    autoencoder,
    vae,
    gan_generator,
    diffusion_mlp,
    unet,
    gcn,
    two_tower,
    clip,
    moe
);

/// The fixture tree holds exactly the models × frameworks, each with its four files.
#[test]
fn fixture_tree_is_complete() {
    let mut found: Vec<String> = std::fs::read_dir(fixtures())
        .expect("zoo/fixtures exists")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    found.sort();
    let mut want: Vec<String> = MODELS.iter().map(|m| m.to_string()).collect();
    want.sort();
    assert_eq!(found, want, "zoo/fixtures/ holds one folder per model");
    for model in MODELS {
        for fw in FRAMEWORKS {
            for file in [
                "graph.json",
                "weights.safetensors",
                "inputs.npz",
                "expected.npz",
            ] {
                let path = fixtures().join(model).join(fw).join(file);
                assert!(path.is_file(), "{} is missing", path.display());
            }
        }
    }
}
