//! The `rml-llm tokenize` subcommand: ids and pieces on stdout, one error line on stderr.

use std::process::Command;

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_rml-llm"))
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
fn prints_ids_and_pieces() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/tokenizers/bpe_llama3.tokenizer.json"
    );
    let (ok, stdout, _) = run(&["tokenize", "--tokenizer", file, "Hi<|eot_id|>"]);
    assert!(ok);
    assert!(stdout.starts_with("ids ("), "{stdout}");
    assert!(stdout.contains("\"<|eot_id|>\" (special)"), "{stdout}");
    assert!(
        stdout.contains("decoded: \"<|begin_of_text|>Hi<|eot_id|>\""),
        "{stdout}"
    );
    let (ok, plain, _) = run(&[
        "tokenize",
        "--tokenizer",
        file,
        "--no-special",
        "--no-parse-special",
        "Hi<|eot_id|>",
    ]);
    assert!(ok);
    assert!(!plain.contains("(special)"), "{plain}");
}

#[test]
fn errors_are_one_line() {
    let (ok, stdout, stderr) = run(&["tokenize", "--tokenizer", "/nonexistent.json", "x"]);
    assert!(!ok);
    assert!(stdout.is_empty());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("rml-llm: error: /nonexistent.json"),
        "{stderr}"
    );
}
