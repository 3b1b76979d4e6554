//! The `run` and `bench` subcommands of the `rml-host` binary.
//!
//! Files beside a graph `DIR/model.json`: the weights it names (`DIR/model.safetensors`),
//! default inputs `DIR/inputs/NAME.npy` (one per graph input) and expected outputs
//! `DIR/expected/NAME.npy` (one per graph output, any subset), `NAME` being the value
//! name.

use std::path::{Path, PathBuf};
use std::time::Instant;

use rml_core::{DType, Shape};
use rml_host::formats::npy;
use rml_host::graph::tensors::{load_graph_file, to_dense, to_tensor};
use rml_host::graph::{Buffer, DenseTensor, Executor, Graph, Options};

/// Reads `NAME=FILE.npy` pairs, or `inputs/NAME.npy` beside the graph.
fn inputs(graph: &Graph, path: &Path, given: &[String]) -> Result<Vec<DenseTensor>, String> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for pair in given {
        let (name, file) = pair
            .split_once('=')
            .ok_or_else(|| format!("--input {pair:?}: expected NAME=FILE.npy"))?;
        files.push((name.to_string(), PathBuf::from(file)));
    }
    graph
        .inputs
        .iter()
        .map(|&id| {
            let value = &graph.values[id];
            let file = match files.iter().find(|(n, _)| *n == value.name) {
                Some((_, f)) => f.clone(),
                None if given.is_empty() => dir.join("inputs").join(format!("{}.npy", value.name)),
                None => return Err(format!("no --input for graph input {:?}", value.name)),
            };
            let t = npy::open(&file).map_err(|e| e.to_string())?;
            to_dense(&t, value.ty.dtype).map_err(|e| format!("{}: {e}", file.display()))
        })
        .collect()
}

/// Largest `|a - b|` over two float outputs (0 for equal non-float ones, infinity
/// for a mismatch of shape or dtype).
fn max_error(got: &DenseTensor, want: &DenseTensor) -> f64 {
    match (&got.data, &want.data) {
        _ if got.shape != want.shape => f64::INFINITY,
        (Buffer::F32(a), Buffer::F32(b)) => a
            .iter()
            .zip(b)
            .map(|(x, y)| f64::from((x - y).abs()))
            .fold(0.0, f64::max),
        (a, b) if a == b => 0.0,
        _ => f64::INFINITY,
    }
}

/// `rml-host run`.
pub fn run(
    path: &Path,
    given: &[String],
    output_dir: Option<&Path>,
    threads: usize,
    profile: bool,
    fusion: bool,
) -> Result<(), String> {
    let (graph, weights) = load_graph_file(path)?;
    let inputs = inputs(&graph, path, given)?;
    let options = Options {
        threads,
        fusion,
        profile,
    };
    let mut exec = Executor::new(graph, &weights, options).map_err(|e| e.to_string())?;
    let outputs = exec.run(&inputs).map_err(|e| e.to_string())?.to_vec();
    let graph = exec.graph();
    let dir = path.parent().unwrap_or(Path::new("."));
    for (&id, out) in graph.outputs.iter().zip(&outputs) {
        let name = &graph.values[id].name;
        print!("{name}: {} {}", out.data.dtype(), out.shape);
        if let Some(outdir) = output_dir {
            std::fs::create_dir_all(outdir).map_err(|e| format!("{}: {e}", outdir.display()))?;
            let t = to_tensor(out).map_err(|e| e.to_string())?;
            npy::save(outdir.join(format!("{name}.npy")), &t).map_err(|e| e.to_string())?;
        }
        let expected = dir.join("expected").join(format!("{name}.npy"));
        if expected.exists() {
            let t = npy::open(&expected).map_err(|e| e.to_string())?;
            let want = to_dense(&t, out.data.dtype())
                .map_err(|e| format!("{}: {e}", expected.display()))?;
            print!(
                "  max error vs expected/{name}.npy: {:.3e}",
                max_error(out, &want)
            );
        }
        println!();
    }
    if let Some(peak) = exec.peak_bytes() {
        println!("peak activation bytes: {peak}");
    }
    if profile {
        println!("{:>4}  {:>10}  step", "#", "time (us)");
        for (i, (label, t)) in exec.profile().iter().enumerate() {
            println!("{i:>4}  {:>10.1}  {label}", t.as_secs_f64() * 1e6);
        }
    }
    Ok(())
}

/// Inputs with every symbolic dim set to `batch`, filled deterministically.
fn bench_inputs(graph: &Graph, batch: usize) -> Vec<DenseTensor> {
    graph
        .inputs
        .iter()
        .map(|&id| {
            let ty = &graph.values[id].ty;
            let dims: Vec<usize> = ty
                .shape
                .iter()
                .map(|d| d.fixed().unwrap_or(batch))
                .collect();
            let shape = Shape::new(&dims).expect("ranks are checked at load");
            let n = shape.numel();
            let data = match ty.dtype {
                DType::I64 => Buffer::I64(vec![0; n]),
                DType::Bool => Buffer::Bool(vec![1; n]),
                _ => Buffer::F32((0..n).map(|i| ((i % 17) as f32 - 8.0) / 8.0).collect()),
            };
            DenseTensor { shape, data }
        })
        .collect()
}

/// `rml-host bench`: median latency per (batch, threads) cell.
pub fn bench(
    path: &Path,
    batches: &[usize],
    threads: &[usize],
    json: bool,
    fusion: bool,
) -> Result<(), String> {
    let (graph, weights) = load_graph_file(path)?;
    let mut cells = Vec::new();
    for &batch in batches {
        let inputs = bench_inputs(&graph, batch);
        for &t in threads {
            let options = Options {
                threads: t,
                fusion,
                profile: false,
            };
            let mut exec =
                Executor::new(graph.clone(), &weights, options).map_err(|e| e.to_string())?;
            exec.run(&inputs).map_err(|e| e.to_string())?;
            let mut times = Vec::new();
            let begin = Instant::now();
            while times.len() < 5 || (times.len() < 200 && begin.elapsed().as_secs_f64() < 1.0) {
                let start = Instant::now();
                exec.run(&inputs).map_err(|e| e.to_string())?;
                times.push(start.elapsed().as_secs_f64() * 1e6);
            }
            times.sort_by(f64::total_cmp);
            let median = times[times.len() / 2];
            let (lo, hi) = (times[times.len() / 10], times[times.len() * 9 / 10]);
            cells.push((batch, t, median, lo, hi, times.len()));
        }
    }
    if json {
        let rows: Vec<serde_json::Value> = cells
            .iter()
            .map(|&(b, t, m, lo, hi, n)| {
                serde_json::json!({"batch": b, "threads": t, "median_us": m, "p10_us": lo, "p90_us": hi, "runs": n})
            })
            .collect();
        println!("{}", serde_json::Value::Array(rows));
    } else {
        println!(
            "{:>6} {:>8} {:>12} {:>12} {:>12} {:>6}",
            "batch", "threads", "median us", "p10 us", "p90 us", "runs"
        );
        for (b, t, m, lo, hi, n) in cells {
            println!("{b:>6} {t:>8} {m:>12.1} {lo:>12.1} {hi:>12.1} {n:>6}");
        }
    }
    Ok(())
}
