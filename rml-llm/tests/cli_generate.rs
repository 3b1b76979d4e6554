//! The `rml-llm generate` and `info` subcommands through the real binary: generated
//! text on stdout, one error line on stderr and a non-zero exit on bad input, no
//! panic when stdout is closed early, and Ctrl-C (on a pseudo-terminal) during the
//! prompt and during generation, with and without a draft: the text so far, a
//! newline and exit status 130.

#[path = "support/cli.rs"]
mod cli;
use cli::*;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use rml_llm::tokenizer::Tokenizer;
use rml_llm::{Model, Session};

#[test]
fn greedy_generate_prints_the_library_continuation() {
    let prompt = "The for statement";
    // The default model is found from the crate directory through the path baked in
    // at build time.
    let (ok, stdout, stderr) = run(&["generate", "-p", prompt, "-n", "16", "--temp", "0"]);
    assert!(ok, "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");

    let model = Model::open(bundled()).unwrap();
    let tok = Tokenizer::from_gguf_file(bundled()).unwrap();
    let ids = tok.encode_prompt(prompt).unwrap();
    let mut session = Session::new(&model, 256).unwrap();
    let mut sampler = rml_llm::sample::Sampler::new(
        rml_llm::sample::SamplerConfig::greedy(),
        model.config().vocab_size,
    )
    .unwrap();
    let stop = rml_llm::stop::StopConfig {
        tokens: tok.eos_id().into_iter().collect(),
        max_tokens: Some(16),
        ..Default::default()
    };
    let mut expected = String::new();
    session
        .generate(&tok, &ids, &mut sampler, &stop, |t| {
            expected.push_str(t);
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
    assert!(!expected.is_empty());
    assert_eq!(stdout, format!("{expected}\n"));
}

#[test]
fn verbose_stats_go_to_stderr_and_sampling_is_seeded() {
    let model = bundled();
    let model = model.to_str().unwrap();
    let args = [
        "generate",
        model,
        "-p",
        "The with",
        "-n",
        "12",
        "--seed",
        "7",
        "--top-k",
        "20",
        "--top-p",
        "0.9",
        "--min-p",
        "0.01",
        "--repeat-penalty",
        "1.1",
        "--threads",
        "2",
        "--verbose",
    ];
    let (ok, a, stderr) = run(&args);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("tok/s"), "{stderr}");
    let (_, b, _) = run(&args);
    assert_eq!(a, b, "same seed, same text");
}

#[test]
fn stop_string_is_not_printed() {
    let (ok, free, _) = run(&[
        "generate",
        "-p",
        "The for statement",
        "-n",
        "24",
        "--temp",
        "0",
    ]);
    assert!(ok);
    let stop: String = free.trim_start().chars().skip(3).take(2).collect();
    let at = free.find(&stop).unwrap();
    let (ok, out, _) = run(&[
        "generate",
        "-p",
        "The for statement",
        "-n",
        "24",
        "--temp",
        "0",
        "--stop",
        &stop,
    ]);
    assert!(ok);
    assert_eq!(out, format!("{}\n", &free[..at]));
}

#[test]
fn info_describes_the_bundled_model() {
    let (ok, stdout, stderr) = run(&["info"]);
    assert!(ok, "{stderr}");
    for needle in [
        "family:       Llama",
        "layers:       4",
        "kv heads:     2",
        "vocab:        1024",
        "F16:",
        "tokenizer:    gpt2",
        "chat template: yes",
    ] {
        assert!(stdout.contains(needle), "{needle}: {stdout}");
    }
}

#[test]
fn missing_model_is_one_error_line() {
    for cmd in ["generate", "info"] {
        let mut args = vec![cmd, "/no/such/model.gguf"];
        if cmd == "generate" {
            args.extend(["-p", "hi"]);
        }
        let (ok, _, stderr) = run(&args);
        assert_one_error_line(ok, &stderr, "/no/such/model.gguf");
    }
}

#[test]
fn truncated_and_foreign_files_are_one_error_line() {
    let dir = temp_dir("cli-generate", "bad");
    let bytes = std::fs::read(bundled()).unwrap();
    let write = |name: &str, data: &[u8]| -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, data).unwrap();
        p
    };
    let files = [
        write("prefix.gguf", &bytes[..5000]),
        write("half.gguf", &bytes[..bytes.len() / 2]),
        write("header.gguf", &bytes[..10]),
        write("text.gguf", b"this is not a model\n"),
    ];
    for file in &files {
        let name = file.to_str().unwrap();
        let (ok, _, stderr) = run(&["generate", name, "-p", "hi"]);
        assert_one_error_line(ok, &stderr, name);
        let (ok, _, stderr) = run(&["info", name]);
        assert_one_error_line(ok, &stderr, name);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn closed_stdout_does_not_panic() {
    let mut child = bin()
        .args([
            "generate",
            "-p",
            "The for statement",
            "-n",
            "200",
            "--temp",
            "0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success(), "{stderr}");
}

fn prompt_tokens(stats_line: &str) -> usize {
    stats_line
        .strip_prefix("prompt: ")
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stats_line}"))
}

#[test]
fn chat_reuses_the_cache_across_turns_and_exits_at_eof() {
    let (ok, stdout, stderr) = chat(
        "What does the with statement do?\n/stats\nAnd the for statement?\n/stats\n".as_bytes(),
    );
    assert!(ok, "{stderr}");
    assert!(!stdout.trim().is_empty());
    let stats: Vec<&str> = stderr.lines().collect();
    assert_eq!(stats.len(), 2, "{stderr}");
    let (first, second) = (prompt_tokens(stats[0]), prompt_tokens(stats[1]));
    // Re-running the history would need the first prompt, its 8 reply tokens and
    // the new turn; only the new part (and the pending last token) is run.
    assert!(second < first + 8, "{first} then {second}");

    // After /reset the first turn runs from scratch again, with the same reply.
    let question = "What does the with statement do?\n";
    let (ok, once, _) = chat(question.as_bytes());
    assert!(ok);
    let (ok, twice, _) = chat(format!("{question}/reset\n{question}").as_bytes());
    assert!(ok);
    assert_eq!(twice, format!("{once}{once}"));
}

#[test]
fn chat_errors_are_one_line() {
    let out = bin()
        .args(["chat", "/no/such/model.gguf"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_one_error_line(out.status.success(), &stderr, "/no/such/model.gguf");
}

#[test]
fn prompt_longer_than_the_context_is_one_error_line() {
    let prompt = "for ".repeat(300);
    let (ok, stdout, stderr) = run(&["generate", "-p", &prompt, "-n", "4"]);
    assert!(stdout.is_empty(), "{stdout}");
    assert_one_error_line(ok, &stderr, "the context holds 256");
}

/// The exit status `generate` documents for Ctrl-C.
const INTERRUPTED: u32 = 130;

#[test]
fn ctrl_c_during_generation_keeps_the_text_so_far_and_exits_130() {
    let model = long_context_model();
    let path = model.path();
    // Seeded near-uniform sampling: the same text every run, and this seed meets no
    // end-of-text token in 1000 tokens (a few seconds).
    let args = [
        "generate",
        path,
        "-p",
        "The for statement",
        "-n",
        "1000",
        "--temp",
        "3",
        "--top-k",
        "0",
        "--top-p",
        "1",
        "--min-p",
        "0",
        "--seed",
        "8",
    ];
    for draft in [None, Some(path)] {
        let mut argv = args.to_vec();
        if let Some(d) = draft {
            argv.extend(["--draft", d]);
        }
        // With a draft the sampled text differs (the same distribution, other draws).
        let (ok, full, stderr) = run(&argv);
        assert!(ok, "{stderr}");
        assert!(
            full.len() > 1000,
            "draft {draft:?}: the uninterrupted text is long: {full:?}"
        );
        let out = std::path::Path::new(path).with_extension("out");
        let mut term = Terminal::spawn_to_file(&argv, &out);
        // Some generated text is written, then Ctrl-C.
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::fs::metadata(&out).map_or(0, |m| m.len()) < 16 {
            assert!(Instant::now() < deadline, "no output");
            std::thread::sleep(Duration::from_millis(5));
        }
        term.send(b"\x03");
        let status = term.child.wait().unwrap();
        term.wait_for_eof();
        assert_eq!(
            status.exit_code(),
            INTERRUPTED,
            "draft {draft:?}: {}",
            term.seen
        );
        // The text is a proper prefix of the full run's, followed by the newline.
        let shown = std::fs::read_to_string(&out).unwrap();
        let _ = std::fs::remove_file(&out);
        let text = shown
            .strip_suffix('\n')
            .unwrap_or_else(|| panic!("no final newline: {shown:?}"));
        assert!(
            !text.is_empty() && text.len() < full.len() - 1,
            "draft {draft:?}: {shown:?}"
        );
        assert!(
            full.starts_with(text),
            "draft {draft:?}: {text:?} is not a prefix of {full:?}"
        );
    }
}

#[test]
fn ctrl_c_during_the_prompt_prints_nothing_and_exits_130() {
    let model = long_context_model();
    // About 1700 tokens: several 256-token prefill chunks, with a progress bar on the
    // terminal.
    let prompt = "What does the with statement do? ".repeat(190);
    let mut term = Terminal::spawn(&["generate", model.path(), "-p", &prompt, "-n", "8"]);
    let at = term.wait_for(0, "prompt [");
    term.send(b"\x03");
    let status = term.child.wait().unwrap();
    term.wait_for_eof();
    assert_eq!(status.exit_code(), INTERRUPTED, "{}", term.seen);
    // An uninterrupted run ends with status 0: 130 says Ctrl-C, sent while the prompt
    // still ran (its bar was showing), stopped the run (at the next prefill chunk, or
    // at the latest at the first of the 8 tokens).
    assert!(!term.seen[at..].contains("rml-llm: error"), "{}", term.seen);
}
