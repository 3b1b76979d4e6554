//! Helpers for the tests that run the `rml-llm` binary: running it, the bundled
//! model's path, scratch folders and the one-error-line check.

#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The binary under test.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rml-llm"))
}

/// Runs the binary with `args`: (success, stdout, stderr).
pub fn run(args: &[&str]) -> (bool, String, String) {
    let out = bin().args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The bundled default model.
pub fn bundled() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/default/rml-tiny-llama.gguf")
}

/// A fresh temporary directory for one test (`prefix` names the test file).
pub fn temp_dir(prefix: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rml-{prefix}-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A failure reported as one `rml-llm: error:` line mentioning `mentions`.
pub fn assert_one_error_line(ok: bool, stderr: &str, mentions: &str) {
    assert!(!ok);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("rml-llm: error: "), "{stderr}");
    assert!(stderr.contains(mentions), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Runs `rml-llm chat` over piped `input` bytes.
pub fn chat(input: &[u8]) -> (bool, String, String) {
    let mut child = bin()
        .args(["chat", "-n", "8", "--temp", "0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
