//! `rml-llm` subcommands through the real binary: `generate --draft`, `bench`,
//! `quantize`, and the chat REPL's commands and input handling, piped and on a
//! pseudo-terminal (line editor, Ctrl-C during a reply, Ctrl-C twice at the prompt).

#[path = "support/cli.rs"]
mod cli;
use cli::*;

use std::path::PathBuf;
use std::time::Instant;

#[test]
fn draft_gives_the_same_greedy_text_and_reports_acceptance() {
    let dir = temp_dir("cli-tools", "draft");
    let draft = dir.join("q4.gguf");
    let model = bundled();
    let (ok, _, stderr) = run(&[
        "quantize",
        model.to_str().unwrap(),
        draft.to_str().unwrap(),
        "q4_0",
    ]);
    assert!(ok, "{stderr}");
    assert!(stderr.contains("30 of 39 tensors converted"), "{stderr}");
    let base = [
        "generate",
        "-p",
        "The try statement",
        "-n",
        "40",
        "--temp",
        "0",
    ];
    let (ok, plain, _) = run(&base);
    assert!(ok);
    let mut args = base.to_vec();
    args.extend([
        "--draft",
        draft.to_str().unwrap(),
        "--draft-tokens",
        "3",
        "-v",
    ]);
    let (ok, speculative, stderr) = run(&args);
    assert!(ok, "{stderr}");
    assert_eq!(speculative, plain);
    assert!(
        stderr.contains("drafted") && stderr.contains("accepted"),
        "{stderr}"
    );

    // A draft with another vocabulary is one error line.
    let other = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/decoder/llama/model-f32.gguf");
    let mut args = base.to_vec();
    args.extend(["--draft", other.to_str().unwrap()]);
    let (ok, stdout, stderr) = run(&args);
    assert!(stdout.is_empty());
    assert_one_error_line(ok, &stderr, "vocabulary");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn quantize_errors_are_one_line() {
    let dir = temp_dir("cli-tools", "quantize");
    let out = dir.join("out.gguf");
    let model = bundled();
    let (ok, _, stderr) = run(&[
        "quantize",
        model.to_str().unwrap(),
        out.to_str().unwrap(),
        "Q7",
    ]);
    assert_one_error_line(ok, &stderr, "unknown quantization type \"Q7\"");
    let (ok, _, stderr) = run(&["quantize", "/no/such.gguf", out.to_str().unwrap(), "Q4_0"]);
    assert_one_error_line(ok, &stderr, "/no/such.gguf");
    let text = dir.join("text.gguf");
    std::fs::write(&text, "not a gguf file").unwrap();
    let (ok, _, stderr) = run(&[
        "quantize",
        text.to_str().unwrap(),
        out.to_str().unwrap(),
        "Q4_0",
    ]);
    assert_one_error_line(ok, &stderr, "text.gguf");
    assert!(!out.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_prints_json_and_the_table() {
    let (ok, stdout, stderr) = run(&["bench", "-p", "16", "-n", "8", "-r", "3", "-o", "json"]);
    assert!(ok, "{stderr}");
    let tests: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let tests = tests.as_array().unwrap();
    assert_eq!(tests.len(), 2);
    assert_eq!(tests[0]["test"], "pp16");
    assert_eq!(tests[1]["test"], "tg8");
    for t in tests {
        assert_eq!(t["samples_ts"].as_array().unwrap().len(), 3);
        let (min, med, max) = (
            t["min_ts"].as_f64().unwrap(),
            t["median_ts"].as_f64().unwrap(),
            t["max_ts"].as_f64().unwrap(),
        );
        assert!(min > 0.0 && min <= med && med <= max, "{t}");
        assert_eq!(t["model_n_params"], 1_049_728);
    }
    let (ok, stdout, _) = run(&["bench", "-p", "8", "-n", "0", "-r", "1", "-t", "1,2"]);
    assert!(ok);
    let rows: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        rows[0],
        "| model | size | params | backend | threads | test | t/s |"
    );
    assert_eq!(rows.len(), 4, "{stdout}");
    assert!(rows[2].starts_with("| llama F16 | 2.00 MiB | 1.05 M | CPU | 1 | pp8 | "));
    assert!(rows[3].contains("| CPU | 2 | pp8 | "));
    let (ok, _, stderr) = run(&["bench", "-p", "512"]);
    assert_one_error_line(ok, &stderr, "context of 256 positions");
}

#[test]
fn bench_runs_its_tests_after_depth_tokens() {
    let args = ["bench", "-p", "8", "-n", "4", "-d", "0,200", "-r", "1"];
    let (ok, stdout, stderr) = run(&[&args[..], &["--cache-type", "f16", "-o", "json"]].concat());
    assert!(ok, "{stderr}");
    let tests: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let names: Vec<(&str, u64)> = tests
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["test"].as_str().unwrap(), t["n_depth"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        names,
        [
            ("pp8", 0),
            ("tg4", 0),
            ("pp8 @ d200", 200),
            ("tg4 @ d200", 200)
        ]
    );
    // 200 earlier tokens and a 64-token test overflow the 256-position context.
    let (ok, _, stderr) = run(&["bench", "-p", "64", "-n", "0", "-d", "200"]);
    assert_one_error_line(ok, &stderr, "after 200 in the cache");
    let (ok, _, stderr) = run(&["bench", "--cache-type", "q8"]);
    assert!(!ok && stderr.contains("q8"), "{stderr}");
}

#[test]
fn chat_commands_and_bad_lines_keep_the_repl_going() {
    let question = b"What does the with statement do?\n";
    let (ok, once, _) = chat(question);
    assert!(ok);
    assert!(!once.trim().is_empty());

    let mut input = b"/help\n/nonsense\n\xff\xfe bad bytes\n".to_vec();
    input.extend(vec![b'x'; 1 << 20]);
    input.extend(b"\n");
    input.extend(question);
    input.extend(b"/exit\nnever answered\n");
    let (ok, stdout, stderr) = chat(&input);
    assert!(ok, "{stderr}");
    assert_eq!(
        stdout, once,
        "only the question is answered, like the first time"
    );
    assert!(
        stderr.contains("/reset") && stderr.contains("/exit"),
        "{stderr}"
    );
    assert!(stderr.contains("unknown command /nonsense"), "{stderr}");
    assert!(stderr.contains("not valid UTF-8"), "{stderr}");
    assert!(stderr.contains("1048576 bytes"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    // Empty stdin exits 0 at once.
    let (ok, stdout, _) = chat(b"");
    assert!(ok && stdout.is_empty());
}

#[test]
fn chat_on_a_terminal_stops_a_reply_on_ctrl_c_and_exits_on_a_second_at_the_prompt() {
    // A long reply budget and a 2048-position context, so that the reply is still
    // running when Ctrl-C comes (on the bundled model's 256 positions a fast
    // machine could finish the whole reply before the signal lands).
    let model = long_context_model();
    let mut term = Terminal::spawn(&["chat", model.path(), "-n", "100000", "--temp", "0"]);
    let at = term.wait_for(0, "> ");
    term.send(b"What does the with statement do?\r");
    // Interrupt as soon as the line's echo and a few more bytes are shown: the
    // reply has started, or the Ctrl-C lands between Enter and the turn's start
    // (the bytes are the editor's end-of-line codes), which must cancel the reply
    // too, not end the program (CI run, session 34: it ended it, status 130).
    let at = term.wait_for(at, "statement do?");
    term.wait_for_output(at + 8);
    let sent = Instant::now();
    term.send(b"\x03");
    let at = term.wait_for(at, "stopped]");
    let latency = sent.elapsed();
    eprintln!("Ctrl-C to the end of the reply: {latency:?}");
    // The REPL is still there: another turn, then Ctrl-C twice at the prompt.
    let at = term.wait_for(at, "> ");
    term.send(b"/stats\r");
    let at = term.wait_for(at, "stopped: cancelled");
    let at = term.wait_for(at, "> ");
    term.send(b"\x03");
    let at = term.wait_for(at, "Ctrl-C again");
    term.wait_for(at, "> ");
    term.send(b"\x03");
    let status = term.child.wait().unwrap();
    assert!(status.success(), "{status:?}: {}", term.seen);
}

#[test]
fn chat_on_a_terminal_keeps_a_history_file() {
    let dir = temp_dir("cli-tools", "history");
    let history = dir.join("history.txt");
    let history_arg = history.to_str().unwrap().to_string();
    let mut term = Terminal::spawn(&["chat", "-n", "4", "--temp", "0", "--history", &history_arg]);
    let at = term.wait_for(0, "> ");
    term.send(b"first question\r");
    let at = term.wait_for(at, "tok/s]");
    term.wait_for(at, "> ");
    term.send(b"/exit\r");
    assert!(term.child.wait().unwrap().success());
    let saved = std::fs::read_to_string(&history).unwrap();
    assert!(saved.contains("first question"), "{saved}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn chat_on_a_terminal_cancels_a_long_prompt_while_it_runs() {
    let model = long_context_model();
    let mut term = Terminal::spawn(&["chat", model.path(), "-n", "8", "--temp", "0"]);
    let at = term.wait_for(0, "> ");
    // About 1500 tokens: several 256-token prefill chunks.
    let line = "What does the with statement do? ".repeat(190);
    term.send(line.trim_end().as_bytes());
    term.send(b"\r");
    // Once the prompt's progress bar shows, the line editor has handed the terminal
    // back (a Ctrl-C before that would be read as a key, not a signal).
    let at = term.wait_for(at, "prompt [");
    let sent = Instant::now();
    term.send(b"\x03");
    // Cancelled before the reply began: no token was generated.
    let at = term.wait_for(at, "[0 tokens");
    let at = term.wait_for(at, "stopped]");
    eprintln!(
        "Ctrl-C during the prompt to the prompt back: {:?}",
        sent.elapsed()
    );
    // The turn was dropped and the conversation goes on.
    let at = term.wait_for(at, "> ");
    term.send(b"The for statement\r");
    let at = term.wait_for(at, "tokens, ");
    term.wait_for(at, "> ");
    term.send(b"/exit\r");
    let status = term.child.wait().unwrap();
    assert!(status.success(), "{status:?}: {}", term.seen);
}
