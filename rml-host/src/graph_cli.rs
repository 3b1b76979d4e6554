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
    (profile, runs): (bool, usize),
    fusion: bool,
) -> Result<(), String> {
    if runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    let (graph, weights) = load_graph_file(path)?;
    let inputs = inputs(&graph, path, given)?;
    let options = Options {
        threads,
        fusion,
        profile,
    };
    let mut exec = Executor::new(graph, &weights, options).map_err(|e| e.to_string())?;
    exec.run(&inputs).map_err(|e| e.to_string())?;
    // With more runs, the profile leaves out the first (planning, cold caches).
    if runs > 1 {
        exec.clear_profile();
        for _ in 1..runs {
            exec.run(&inputs).map_err(|e| e.to_string())?;
        }
    }
    let timed = runs.saturating_sub(1).max(1) as f64;
    let outputs = exec.outputs().to_vec();
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
            println!("{i:>4}  {:>10.1}  {label}", t.as_secs_f64() * 1e6 / timed);
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

/// What `rml-host bench` times and how it reports.
pub struct BenchOptions<'a> {
    /// Batch sizes (every symbolic input dim takes the batch).
    pub batches: &'a [usize],
    /// Thread counts.
    pub threads: &'a [usize],
    /// JSON rows instead of a table.
    pub json: bool,
    /// Elementwise fusion on.
    pub fusion: bool,
    /// `NAME=FILE.npy` inputs to time on instead of generated ones.
    pub inputs: &'a [String],
    /// A fixed number of timed runs per cell.
    pub runs: Option<usize>,
}

/// One timed (batch, threads) cell: wall-clock median, p10, p90 (µs), runs, and the
/// mean process CPU time per run (µs, all threads) where the OS reports it.
struct Cell {
    batch: usize,
    threads: usize,
    median: f64,
    p10: f64,
    p90: f64,
    runs: usize,
    cpu: Option<f64>,
}

/// Warms `exec` up with one run, then times runs as `runs` asks.
fn time_cell(
    exec: &mut Executor,
    inputs: &[DenseTensor],
    runs: Option<usize>,
) -> Result<(Vec<f64>, Option<f64>), String> {
    exec.run(inputs).map_err(|e| e.to_string())?;
    let mut times = Vec::new();
    let begin = Instant::now();
    let cpu_begin = crate::cpu_time::process_cpu_ns();
    let more = |n: usize| match runs {
        Some(r) => n < r.max(1),
        None => n < 5 || (n < 200 && begin.elapsed().as_secs_f64() < 1.0),
    };
    while more(times.len()) {
        let start = Instant::now();
        exec.run(inputs).map_err(|e| e.to_string())?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    let cpu = match (cpu_begin, crate::cpu_time::process_cpu_ns()) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1e3 / times.len() as f64),
        _ => None,
    };
    Ok((times, cpu))
}

/// `rml-host bench`: median latency per (batch, threads) cell.
pub fn bench(path: &Path, o: &BenchOptions<'_>) -> Result<(), String> {
    let (graph, weights) = load_graph_file(path)?;
    if !o.inputs.is_empty() && o.batches.len() != 1 {
        return Err("--input takes one --batch (a label for the given inputs)".into());
    }
    let given = if o.inputs.is_empty() {
        None
    } else {
        Some(inputs(&graph, path, o.inputs)?)
    };
    let mut cells = Vec::new();
    for &batch in o.batches {
        let inputs = match &given {
            Some(g) => g.clone(),
            None => bench_inputs(&graph, batch),
        };
        for &t in o.threads {
            let options = Options {
                threads: t,
                fusion: o.fusion,
                profile: false,
            };
            let mut exec =
                Executor::new(graph.clone(), &weights, options).map_err(|e| e.to_string())?;
            let (mut times, cpu) = time_cell(&mut exec, &inputs, o.runs)?;
            times.sort_by(f64::total_cmp);
            let n = times.len();
            cells.push(Cell {
                batch,
                threads: t,
                median: times[n / 2],
                p10: times[n / 10],
                p90: times[n * 9 / 10],
                runs: n,
                cpu,
            });
        }
    }
    if o.json {
        let rows: Vec<serde_json::Value> = cells
            .iter()
            .map(|c| {
                serde_json::json!({"batch": c.batch, "threads": c.threads, "median_us": c.median,
                    "p10_us": c.p10, "p90_us": c.p90, "runs": c.runs, "cpu_us": c.cpu})
            })
            .collect();
        println!("{}", serde_json::Value::Array(rows));
    } else {
        println!(
            "{:>6} {:>8} {:>12} {:>12} {:>12} {:>12} {:>6}",
            "batch", "threads", "median us", "p10 us", "p90 us", "cpu us/run", "runs"
        );
        for c in cells {
            let cpu = c.cpu.map_or("-".to_string(), |v| format!("{v:.1}"));
            println!(
                "{:>6} {:>8} {:>12.1} {:>12.1} {:>12.1} {cpu:>12} {:>6}",
                c.batch, c.threads, c.median, c.p10, c.p90, c.runs
            );
        }
    }
    Ok(())
}
