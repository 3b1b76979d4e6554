//! `rml-llm bench`: prompt-processing (`ppN`) and generation (`tgN`) speed in
//! llama-bench's table layout, so the two can be compared side by side.
//!
//! As in llama-bench, each test runs random tokens on a cache that holds `--n-depth`
//! earlier random tokens (empty by default; filling it is not timed): `ppN` runs N
//! tokens in batches of at most `--batch`, `tgN` runs N one-token decode steps. One untimed warm-up run precedes `--repetitions` timed ones; the
//! table shows the median tokens/s ± the standard deviation, `--output json` every
//! figure (median, mean, stddev, min, max and the samples).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use clap::{Args, ValueEnum};
use rml_core::random::Philox4x64Stream;
use rml_core::random::distributions::uniform_below;
use rml_host::ThreadPool;
use rml_host::formats::gguf::GgufFile;
use rml_llm::{KvDtype, Logits, Model};

use super::{is_gguf, resolve_model};

/// How results are printed.
#[derive(Clone, Copy, ValueEnum)]
pub enum Output {
    /// llama-bench's markdown table.
    Md,
    /// One JSON array of tests.
    Json,
}

/// Measure prompt-processing and generation speed.
#[derive(Args)]
pub struct BenchCommand {
    /// A .gguf file or a Hugging Face directory (default: the bundled model).
    model: Option<PathBuf>,
    /// Prompt lengths to process (comma-separated; 0 skips).
    #[arg(short = 'p', long, value_delimiter = ',', default_value = "512")]
    n_prompt: Vec<usize>,
    /// Tokens to generate (comma-separated; 0 skips).
    #[arg(short = 'n', long, value_delimiter = ',', default_value = "128")]
    n_gen: Vec<usize>,
    /// Thread counts (comma-separated).
    #[arg(short = 't', long, value_delimiter = ',', default_value = "1")]
    threads: Vec<usize>,
    /// Timed repetitions of each test.
    #[arg(short = 'r', long, default_value_t = 5)]
    repetitions: usize,
    /// The most tokens one prompt-processing call runs.
    #[arg(short = 'b', long, default_value_t = 512)]
    batch: usize,
    /// Tokens already in the cache when each test starts (comma-separated), as
    /// llama-bench's `-d`: decode speed after a long prompt.
    #[arg(short = 'd', long, value_delimiter = ',', default_value = "0")]
    n_depth: Vec<usize>,
    /// Element type of the key/value cache: f32 or f16 (2 bytes per value, as
    /// llama.cpp's default cache).
    #[arg(long, default_value = "f32")]
    cache_type: KvDtype,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "md")]
    output: Output,
}

/// One test's figures.
struct Measured {
    threads: usize,
    test: String,
    tokens: usize,
    depth: usize,
    samples: Vec<f64>,
}

impl Measured {
    fn sorted(&self) -> Vec<f64> {
        let mut s = self.samples.clone();
        s.sort_by(f64::total_cmp);
        s
    }

    fn median(&self) -> f64 {
        let s = self.sorted();
        let n = s.len();
        if n % 2 == 1 {
            s[n / 2]
        } else {
            0.5 * (s[n / 2 - 1] + s[n / 2])
        }
    }

    fn mean(&self) -> f64 {
        self.samples.iter().sum::<f64>() / self.samples.len() as f64
    }

    fn stddev(&self) -> f64 {
        let n = self.samples.len();
        if n < 2 {
            return 0.0;
        }
        let m = self.mean();
        (self.samples.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    }
}

impl BenchCommand {
    /// Runs every test and prints the table or the JSON.
    pub fn run(self) -> Result<(), String> {
        if self.repetitions == 0 || self.batch == 0 {
            return Err("--repetitions and --batch must be at least 1".into());
        }
        if let Some(t) = self.threads.iter().find(|&&t| t == 0) {
            return Err(format!("a thread count of {t} is not allowed"));
        }
        let path = resolve_model(self.model.clone())?;
        // Random token ids: the model alone, no tokenizer needed.
        let model = Model::open(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let context = model.config().max_positions;
        let deepest = self.n_depth.iter().copied().max().unwrap_or(0);
        for &n in self.n_prompt.iter().chain(&self.n_gen).filter(|&&n| n > 0) {
            if n + deepest > context {
                return Err(format!(
                    "a test of {n} tokens after {deepest} in the cache does not fit the \
                     model's context of {context} positions"
                ));
            }
        }
        let mut results = Vec::new();
        for &threads in &self.threads {
            let pool = (threads > 1)
                .then(|| ThreadPool::new(threads).map(Arc::new))
                .transpose()
                .map_err(|e| e.to_string())?;
            for &depth in &self.n_depth {
                let tests = self.n_prompt.iter().map(|&n| (Test::Prompt, n));
                let tests = tests.chain(self.n_gen.iter().map(|&n| (Test::Generation, n)));
                for (test, n) in tests.filter(|&(_, n)| n > 0) {
                    let run = Run {
                        model: &model,
                        pool: &pool,
                        depth,
                        batch: self.batch,
                        dtype: self.cache_type,
                    };
                    let samples = self.repeat(|| run.time(test, n))?;
                    let name = format!("{}{n}", test.prefix());
                    results.push(Measured {
                        threads,
                        test: match depth {
                            0 => name,
                            d => format!("{name} @ d{d}"),
                        },
                        tokens: n,
                        depth,
                        samples,
                    });
                }
            }
        }
        let desc = describe_model(&path, &model);
        match self.output {
            Output::Md => print_table(&desc, &results),
            Output::Json => print_json(&desc, &results),
        }
        Ok(())
    }

    /// One warm-up and `repetitions` timed runs of `run` (seconds, tokens) as tok/s.
    fn repeat(
        &self,
        mut run: impl FnMut() -> Result<(f64, usize), String>,
    ) -> Result<Vec<f64>, String> {
        run()?;
        (0..self.repetitions)
            .map(|_| run().map(|(secs, n)| n as f64 / secs.max(1e-12)))
            .collect()
    }
}

/// `n` random token ids below the vocabulary size.
fn random_tokens(model: &Model, n: usize) -> Vec<u32> {
    let mut rng = Philox4x64Stream::from_seed(n as u64);
    let vocab = model.config().vocab_size as u64;
    (0..n)
        .map(|_| uniform_below(&mut rng, vocab).unwrap_or(0) as u32)
        .collect()
}

/// The two kinds of test.
#[derive(Clone, Copy)]
enum Test {
    /// `ppN`: N tokens in calls of at most `--batch`.
    Prompt,
    /// `tgN`: N one-token decode steps.
    Generation,
}

impl Test {
    fn prefix(self) -> &'static str {
        match self {
            Test::Prompt => "pp",
            Test::Generation => "tg",
        }
    }
}

/// What every timed run of one cell shares.
struct Run<'a> {
    model: &'a Model,
    pool: &'a Option<Arc<ThreadPool>>,
    depth: usize,
    batch: usize,
    dtype: KvDtype,
}

impl Run<'_> {
    /// Seconds for `test` over `n` random tokens after `depth` untimed ones.
    fn time(&self, test: Test, n: usize) -> Result<(f64, usize), String> {
        let model = self.model;
        let err = |e: rml_llm::Error| e.to_string();
        let capacity = self.depth + n;
        let rows = match test {
            Test::Prompt => n.min(self.batch),
            Test::Generation => 1,
        };
        let mut cache = model.new_cache_with(capacity, self.dtype);
        let mut ws = model
            .workspace(rows.max(self.depth.min(self.batch)), capacity)
            .map_err(err)?;
        ws.set_pool(self.pool.clone());
        let tokens = random_tokens(model, capacity);
        let (earlier, timed) = tokens.split_at(self.depth);
        for chunk in earlier.chunks(self.batch) {
            model
                .forward_with(chunk, &mut cache, &mut ws, Logits::Last)
                .map_err(err)?;
        }
        let start = Instant::now();
        for chunk in timed.chunks(rows) {
            model
                .forward_with(chunk, &mut cache, &mut ws, Logits::Last)
                .map_err(err)?;
        }
        Ok((start.elapsed().as_secs_f64(), n))
    }
}

/// The model column values: name, file size, parameter count.
struct ModelDesc {
    name: String,
    bytes: u64,
    params: u64,
}

fn describe_model(path: &Path, model: &Model) -> ModelDesc {
    let family = format!("{:?}", model.config().family).to_lowercase();
    let gguf = is_gguf(path).then(|| GgufFile::open(path).ok()).flatten();
    let Some(g) = gguf else {
        return ModelDesc {
            name: format!("{family} ?"),
            bytes: model.parameter_bytes() as u64,
            params: 0,
        };
    };
    let bytes = g.tensors().map(|t| t.info.size_bytes()).sum();
    let params = g.tensors().map(|t| t.info.n_elements()).sum();
    // The type holding the most bytes names the file, as llama.cpp's ftype does.
    let mut by_type: Vec<(&str, u64)> = Vec::new();
    for t in g.tensors() {
        let name = t.info.ggml_type().name();
        match by_type.iter_mut().find(|(n, _)| *n == name) {
            Some(e) => e.1 += t.info.size_bytes(),
            None => by_type.push((name, t.info.size_bytes())),
        }
    }
    let ty = by_type
        .iter()
        .max_by_key(|(_, b)| *b)
        .map_or("?", |(n, _)| n);
    ModelDesc {
        name: format!("{family} {ty}"),
        bytes,
        params,
    }
}

fn print_table(m: &ModelDesc, results: &[Measured]) {
    println!("| model | size | params | backend | threads | test | t/s |");
    println!("| --- | ---: | ---: | --- | ---: | ---: | ---: |");
    for r in results {
        println!(
            "| {} | {:.2} MiB | {:.2} M | CPU | {} | {} | {:.2} ± {:.2} |",
            m.name,
            m.bytes as f64 / (1024.0 * 1024.0),
            m.params as f64 / 1e6,
            r.threads,
            r.test,
            r.median(),
            r.stddev()
        );
    }
}

fn print_json(m: &ModelDesc, results: &[Measured]) {
    let tests: Vec<serde_json::Value> = results
        .iter()
        .map(|r| {
            let s = r.sorted();
            serde_json::json!({
                "model": m.name,
                "model_size": m.bytes,
                "model_n_params": m.params,
                "backend": "CPU",
                "n_threads": r.threads,
                "test": r.test,
                "n_tokens": r.tokens,
                "n_depth": r.depth,
                "median_ts": r.median(),
                "avg_ts": r.mean(),
                "stddev_ts": r.stddev(),
                "min_ts": s.first(),
                "max_ts": s.last(),
                "samples_ts": r.samples,
            })
        })
        .collect();
    println!("{}", serde_json::Value::from(tests));
}
