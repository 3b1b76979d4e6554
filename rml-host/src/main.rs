//! The `rml-host` command-line tool.
//!
//! `rml-host run GRAPH.json …` runs an rml-graph and `rml-host bench GRAPH.json …` times
//! it (see `docs/graph-executor.md`). `rml-host inspect FILE [--json]` prints a summary of a safetensors file (or a
//! sharded set's `*.index.json`), a GGUF file, a `.npy`/`.npz` array file, or an
//! rml-graph (`*.json`): its metadata and each tensor's dtype, shape and size, with
//! totals. Errors are one line
//! on stderr and a non-zero exit status.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod cpu_time;
mod graph_cli;

use clap::{Parser, Subcommand};
use rml_host::formats::gguf::{Gguf, ReadOptions};
use rml_host::formats::npy::{self, Npz};
use rml_host::formats::safetensors::{SafeTensors, ShardedSafeTensors};
use rml_host::formats::{FileKind, detect};
use rml_host::{Error, Result};

/// rml host tools.
#[derive(Parser, Debug)]
#[command(name = "rml-host", version, about = "rml host runtime tools")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Summarize a safetensors, GGUF, .npy, .npz or rml-graph file: metadata, tensors, totals.
    Inspect {
        /// The file to inspect (a sharded set: its `*.index.json`).
        file: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run an rml-graph: write its outputs as .npy, compare with `expected/NAME.npy`.
    Run {
        /// The graph file.
        graph: PathBuf,
        /// An input as NAME=FILE.npy (default: `inputs/NAME.npy` beside the graph).
        #[arg(long = "input")]
        inputs: Vec<String>,
        /// Where to write `NAME.npy` for each output.
        #[arg(long)]
        output_dir: Option<PathBuf>,
        /// Worker threads.
        #[arg(long, default_value_t = 1)]
        threads: usize,
        /// Print each step's time.
        #[arg(long)]
        profile: bool,
        /// Turn elementwise fusion off.
        #[arg(long)]
        no_fusion: bool,
        /// Run this many times; with `--profile`, print each step's mean time over
        /// the runs after the first (a warm-up).
        #[arg(long, default_value_t = 1)]
        runs: usize,
    },
    /// Time an rml-graph: median latency per batch size and thread count.
    Bench {
        /// The graph file.
        graph: PathBuf,
        /// Batch sizes (every symbolic input dim takes the batch).
        #[arg(long, value_delimiter = ',', default_value = "1")]
        batch: Vec<usize>,
        /// Thread counts.
        #[arg(long, value_delimiter = ',', default_value = "1")]
        threads: Vec<usize>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Turn elementwise fusion off.
        #[arg(long)]
        no_fusion: bool,
        /// Time on these inputs (NAME=FILE.npy) instead of generated ones; one batch only.
        #[arg(long = "input")]
        inputs: Vec<String>,
        /// Timed runs per cell (default: 5 to 200, about a second).
        #[arg(long)]
        runs: Option<usize>,
    },
}

/// One tensor's row in the summary.
struct Row {
    name: String,
    dtype: String,
    shape: Vec<usize>,
    bytes: usize,
    note: String,
}

/// What `inspect` prints about a file.
struct Summary {
    format: &'static str,
    file_bytes: u64,
    metadata: Vec<(String, String)>,
    tensors: Vec<Row>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(e) = rml_host::isa_env::force_from_env() {
        eprintln!("rml-host: error: {e}");
        return ExitCode::FAILURE;
    }
    let graph_result = match &cli.command {
        Command::Run {
            graph,
            inputs,
            output_dir,
            threads,
            profile,
            no_fusion,
            runs,
        } => Some(graph_cli::run(
            graph,
            inputs,
            output_dir.as_deref(),
            *threads,
            (*profile, *runs),
            !*no_fusion,
        )),
        Command::Bench {
            graph,
            batch,
            threads,
            json,
            no_fusion,
            inputs,
            runs,
        } => Some(graph_cli::bench(
            graph,
            &graph_cli::BenchOptions {
                batches: batch,
                threads,
                json: *json,
                fusion: !*no_fusion,
                inputs,
                runs: *runs,
            },
        )),
        Command::Inspect { .. } => None,
    };
    if let Some(result) = graph_result {
        return match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("rml-host: error: {}", e.replace('\n', " "));
                ExitCode::FAILURE
            }
        };
    }
    match cli.command {
        Command::Run { .. } | Command::Bench { .. } => ExitCode::SUCCESS,
        Command::Inspect { file, json } => match summarize(&file) {
            Ok(summary) => {
                if json {
                    println!("{}", to_json(&file, &summary));
                } else {
                    print_text(&file, &summary);
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("rml-host: error: {}", one_line(&e));
                ExitCode::FAILURE
            }
        },
    }
}

fn one_line(e: &Error) -> String {
    e.to_string().replace('\n', " ")
}

fn summarize(path: &Path) -> Result<Summary> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, "open", e))?;
    if meta.is_dir() {
        return Err(Error::InvalidArgument(format!(
            "{} is a directory; pass a file (for a sharded set, its *.index.json)",
            path.display()
        )));
    }
    let mut head = [0u8; 8];
    let n = {
        use std::io::Read;
        let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, "open", e))?;
        f.read(&mut head).map_err(|e| Error::io(path, "read", e))?
    };
    let file_bytes = meta.len();
    match detect(path, &head[..n]) {
        FileKind::SafeTensors => {
            let st = SafeTensors::open(path)?;
            Ok(Summary {
                format: "safetensors",
                file_bytes,
                metadata: st
                    .metadata()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                tensors: st
                    .tensors()
                    .iter()
                    .map(|t| Row {
                        name: t.name.clone(),
                        dtype: t.dtype.to_string(),
                        shape: t.shape.clone(),
                        bytes: t.nbytes(),
                        note: String::new(),
                    })
                    .collect(),
            })
        }
        FileKind::SafeTensorsIndex => {
            let set = ShardedSafeTensors::open(path)?;
            let mut metadata: Vec<(String, String)> = set
                .metadata()
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect();
            metadata.push(("shards".to_string(), set.shards().len().to_string()));
            let mut tensors = Vec::new();
            for (file, shard) in set.shards() {
                for t in shard.tensors() {
                    tensors.push(Row {
                        name: t.name.clone(),
                        dtype: t.dtype.to_string(),
                        shape: t.shape.clone(),
                        bytes: t.nbytes(),
                        note: file.clone(),
                    });
                }
            }
            Ok(Summary {
                format: "safetensors (sharded)",
                file_bytes,
                metadata,
                tensors,
            })
        }
        FileKind::Npy => {
            let buffer = rml_host::Buffer::map_file(path)?;
            let h = npy::parse_header(buffer.as_bytes()).map_err(|e| e.in_file(path))?;
            Ok(Summary {
                format: "npy",
                file_bytes,
                metadata: vec![
                    ("version".into(), format!("{}.{}", h.version.0, h.version.1)),
                    ("fortran_order".into(), h.fortran_order.to_string()),
                    (
                        "byte_order".into(),
                        if h.big_endian { "big" } else { "little" }.into(),
                    ),
                ],
                tensors: vec![Row {
                    name: path
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    dtype: h.dtype.to_string(),
                    shape: h.shape.clone(),
                    bytes: h.data_len,
                    note: String::new(),
                }],
            })
        }
        FileKind::Npz => {
            let npz = Npz::open(path)?;
            let mut tensors = Vec::new();
            for m in npz.members() {
                let h = npz.header(&m.name).map_err(|e| e.in_file(path))?;
                tensors.push(Row {
                    name: m.name.clone(),
                    dtype: h.dtype.to_string(),
                    shape: h.shape.clone(),
                    bytes: h.data_len,
                    note: if m.compressed {
                        format!("deflated to {} bytes", m.compressed_size)
                    } else {
                        String::new()
                    },
                });
            }
            Ok(Summary {
                format: "npz",
                file_bytes,
                metadata: vec![("members".into(), npz.len().to_string())],
                tensors,
            })
        }
        FileKind::Graph => graph_summary(path, file_bytes),
        FileKind::Gguf => {
            let options = ReadOptions {
                allow_unsupported_types: true,
            };
            let g = Gguf::open_with(path, options)?;
            let mut metadata = vec![
                ("gguf.version".to_string(), g.version().to_string()),
                ("gguf.alignment".to_string(), g.alignment().to_string()),
            ];
            metadata.extend(g.metadata().map(|(k, v)| (k.to_string(), v.to_string())));
            let tensors = g
                .tensor_infos()
                .iter()
                .map(|t| Row {
                    name: t.name().to_string(),
                    dtype: t.ggml_type().name().to_string(),
                    shape: t.shape(),
                    bytes: usize::try_from(t.size_bytes()).unwrap_or(usize::MAX),
                    note: if t.dtype().is_err() {
                        "type not supported by rml".to_string()
                    } else {
                        String::new()
                    },
                })
                .collect();
            Ok(Summary {
                format: "gguf",
                file_bytes,
                metadata,
                tensors,
            })
        }
    }
}

/// An rml-graph's summary: its declared inputs and outputs, op counts, and its
/// constants as the tensors (shapes as declared, possibly symbolic dims resolved).
fn graph_summary(path: &Path, file_bytes: u64) -> Result<Summary> {
    let (graph, _) =
        rml_host::graph::tensors::load_graph_file(path).map_err(Error::InvalidArgument)?;
    let declared = |ids: &[usize]| {
        ids.iter()
            .map(|&id| format!("{}: {}", graph.value(id).name, graph.value(id).ty))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut ops: Vec<(String, usize)> = Vec::new();
    for node in &graph.nodes {
        match ops.iter_mut().find(|(name, _)| *name == node.op_name) {
            Some((_, count)) => *count += 1,
            None => ops.push((node.op_name.clone(), 1)),
        }
    }
    let op_counts: Vec<String> = ops.iter().map(|(op, n)| format!("{op}×{n}")).collect();
    let mut metadata = vec![
        (
            "format".to_string(),
            format!("rml-graph v{}", graph.version),
        ),
        (
            "weights".to_string(),
            graph.weights.clone().unwrap_or_else(|| "(none)".into()),
        ),
        ("inputs".to_string(), declared(&graph.inputs)),
        ("outputs".to_string(), declared(&graph.outputs)),
        ("nodes".to_string(), graph.nodes.len().to_string()),
    ];
    metadata.push(("ops".to_string(), op_counts.join(", ")));
    let tensors = graph
        .constants
        .iter()
        .map(|&id| {
            let value = graph.value(id);
            let shape: Vec<usize> = value
                .ty
                .shape
                .iter()
                .map(|d| d.fixed().unwrap_or(0))
                .collect();
            let numel: usize = shape.iter().product();
            Row {
                name: value.name.clone(),
                dtype: value.ty.dtype.to_string(),
                bytes: value.ty.dtype.storage_bytes(numel).unwrap_or(0),
                shape,
                note: String::new(),
            }
        })
        .collect();
    Ok(Summary {
        format: "rml-graph",
        file_bytes,
        metadata,
        tensors,
    })
}

fn totals(s: &Summary) -> (usize, u128, u128) {
    let elements = s
        .tensors
        .iter()
        .map(|t| t.shape.iter().map(|&d| d as u128).product::<u128>())
        .sum();
    let bytes = s.tensors.iter().map(|t| t.bytes as u128).sum();
    (s.tensors.len(), elements, bytes)
}

fn human(bytes: u128) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

fn print_text(path: &Path, s: &Summary) {
    println!("{}: {} ({} bytes)", path.display(), s.format, s.file_bytes);
    if !s.metadata.is_empty() {
        println!("metadata:");
        for (k, v) in &s.metadata {
            println!("  {k} = {v}");
        }
    }
    let name_w = s
        .tensors
        .iter()
        .map(|t| t.name.len())
        .max()
        .unwrap_or(4)
        .clamp(4, 60);
    println!("tensors:");
    println!(
        "  {:<name_w$}  {:<6}  {:<20}  {:>12}",
        "NAME", "DTYPE", "SHAPE", "BYTES"
    );
    for t in &s.tensors {
        let shape = format!("{:?}", t.shape);
        println!(
            "  {:<name_w$}  {:<6}  {:<20}  {:>12}{}",
            t.name,
            t.dtype,
            shape,
            t.bytes,
            if t.note.is_empty() {
                String::new()
            } else {
                format!("  ({})", t.note)
            }
        );
    }
    let (n, elements, bytes) = totals(s);
    println!(
        "total: {n} tensors, {elements} elements, {bytes} bytes ({})",
        human(bytes)
    );
}

fn to_json(path: &Path, s: &Summary) -> String {
    let (n, elements, bytes) = totals(s);
    let metadata: serde_json::Map<String, serde_json::Value> = s
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    let tensors: Vec<serde_json::Value> = s
        .tensors
        .iter()
        .map(|t| {
            let mut row = serde_json::json!({
                "name": t.name,
                "dtype": t.dtype,
                "shape": t.shape,
                "bytes": t.bytes,
            });
            if !t.note.is_empty() {
                row["note"] = serde_json::Value::String(t.note.clone());
            }
            row
        })
        .collect();
    let value = serde_json::json!({
        "file": path.display().to_string(),
        "format": s.format,
        "file_bytes": s.file_bytes,
        "metadata": metadata,
        "tensors": tensors,
        "total_tensors": n,
        "total_elements": u64::try_from(elements).unwrap_or(u64::MAX),
        "total_bytes": u64::try_from(bytes).unwrap_or(u64::MAX),
    });
    serde_json::to_string_pretty(&value).unwrap_or_else(|_| "{}".to_string())
}
