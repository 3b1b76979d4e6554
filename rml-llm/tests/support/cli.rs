//! Helpers for the tests that run the `rml-llm` binary: running it, the bundled
//! model's path (and a long-context copy), scratch folders, the one-error-line check
//! and a pseudo-terminal to run it on.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

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

/// A model file written for one test, removed when dropped (also when the test fails).
pub struct TempModel(PathBuf);

impl TempModel {
    /// The file's path as the CLI takes it.
    pub fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempModel {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The bundled model with a 2048-position context (its weights work at any position),
/// so that a prompt spans several prefill chunks.
pub fn long_context_model() -> TempModel {
    use rml_host::formats::gguf::{GgufFile, GgufWriter};
    let src =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/default/rml-tiny-llama.gguf");
    let file = GgufFile::open(&src).unwrap();
    let mut w = GgufWriter::new();
    for (key, value) in file.metadata() {
        if key != "llama.context_length" {
            w.add_kv(key, value.to_owned_value()).unwrap();
        }
    }
    w.add_kv("llama.context_length", 2048u32).unwrap();
    for t in file.tensors() {
        w.add_tensor(t.info.name(), t.info.ggml_type(), t.info.dims(), t.data)
            .unwrap();
    }
    // Each call writes its own file: tests of one process run in parallel.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out = std::env::temp_dir().join(format!(
        "rml-llm-long-ctx-{}-{call}.gguf",
        std::process::id()
    ));
    w.write_file(&out).unwrap();
    TempModel(out)
}

/// The output of a process on a pseudo-terminal, collected by a reader thread.
pub struct Terminal {
    rx: mpsc::Receiver<Vec<u8>>,
    pub seen: String,
    writer: Box<dyn Write + Send>,
    pub child: Box<dyn portable_pty::Child + Send + Sync>,
}

impl Terminal {
    /// Runs the binary with `args` on a new pseudo-terminal (in the crate directory).
    pub fn spawn(args: &[&str]) -> Terminal {
        Self::spawn_program(env!("CARGO_BIN_EXE_rml-llm"), args)
    }

    /// [`Terminal::spawn`] with stdout written to the file `stdout` and stderr sent
    /// to `/dev/null` (through `sh`, which then `exec`s the binary, so Ctrl-C still
    /// reaches it).
    pub fn spawn_to_file(args: &[&str], stdout: &std::path::Path) -> Terminal {
        let mut all = vec![
            "-c",
            "out=$1; shift; exec \"$0\" \"$@\" >\"$out\" 2>/dev/null",
            env!("CARGO_BIN_EXE_rml-llm"),
            stdout.to_str().unwrap(),
        ];
        all.extend_from_slice(args);
        Self::spawn_program("sh", &all)
    }

    fn spawn_program(program: &str, args: &[&str]) -> Terminal {
        use portable_pty::{CommandBuilder, PtySize, native_pty_system};
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 40,
                cols: 200,
                pixel_width: 0,
                pixel_height: 0,
            })
            .unwrap();
        let mut cmd = CommandBuilder::new(program);
        cmd.args(args);
        cmd.cwd(env!("CARGO_MANIFEST_DIR"));
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().unwrap();
        let writer = pair.master.take_writer().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
            drop(pair.master);
        });
        Terminal {
            rx,
            seen: String::new(),
            writer,
            child,
        }
    }

    /// Waits (at most 60 s, so a broken build fails instead of hanging) until the
    /// output after `from` contains `text`; returns the position after it.
    pub fn wait_for(&mut self, from: usize, text: &str) -> usize {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(i) = self.seen[from..].find(text) {
                return from + i + text.len();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(bytes) => self.seen.push_str(&String::from_utf8_lossy(&bytes)),
                Err(_) => panic!("waited for {text:?}; the terminal shows {:?}", self.seen),
            }
        }
    }

    /// Waits (at most 60 s) until the output is longer than `len` bytes.
    pub fn wait_for_output(&mut self, len: usize) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.seen.len() <= len {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(bytes) => self.seen.push_str(&String::from_utf8_lossy(&bytes)),
                Err(_) => panic!("no reply; the terminal shows {:?}", self.seen),
            }
        }
    }

    /// Collects the output until the terminal closes (at most 60 s).
    pub fn wait_for_eof(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(bytes) => self.seen.push_str(&String::from_utf8_lossy(&bytes)),
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("the terminal stays open; it shows {:?}", self.seen)
                }
            }
        }
    }

    /// Types `bytes` (`\x03` is Ctrl-C: the terminal sends SIGINT).
    pub fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
        self.writer.flush().unwrap();
    }
}
