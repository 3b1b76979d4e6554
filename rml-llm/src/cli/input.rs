//! Where the chat REPL reads its lines: a line editor with history on a terminal
//! (`rustyline`), plain stdin lines otherwise (scripts, pipes, tests).

use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;

use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;

/// The longest line the REPL takes (longer ones are refused with a message).
pub const MAX_LINE_BYTES: usize = 256 * 1024;

/// What one read gave.
pub enum Read {
    /// A line, without its line ending.
    Line(String),
    /// Ctrl-C at the prompt (terminal only).
    Interrupted,
    /// End of input.
    Eof,
    /// A line that could not be taken, with the reason (not UTF-8, too long).
    Refused(String),
}

/// A source of REPL lines.
pub enum Input {
    /// A terminal: line editing, in-memory history, optionally saved to a file.
    Editor {
        /// The editor.
        editor: Box<DefaultEditor>,
        /// The history file, if any.
        history: Option<PathBuf>,
    },
    /// Stdin read line by line (no prompt).
    Lines(std::io::StdinLock<'static>),
}

impl Input {
    /// A line editor when stdin and stdout are terminals, else stdin lines. The
    /// history file is read now (a missing one is fine) and written by [`Input::save`].
    pub fn open(history: Option<PathBuf>) -> Result<Input, String> {
        if !(std::io::stdin().is_terminal() && std::io::stdout().is_terminal()) {
            return Ok(Input::Lines(std::io::stdin().lock()));
        }
        let mut editor =
            DefaultEditor::new().map_err(|e| format!("starting the line editor: {e}"))?;
        if let Some(path) = &history
            && path.exists()
        {
            editor
                .load_history(path)
                .map_err(|e| format!("{}: reading the history: {e}", path.display()))?;
        }
        Ok(Input::Editor {
            editor: Box::new(editor),
            history,
        })
    }

    /// Whether this is an interactive terminal.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Input::Editor { .. })
    }

    /// The next line.
    pub fn read(&mut self) -> Result<Read, String> {
        match self {
            Input::Editor { editor, .. } => match editor.readline("> ") {
                Ok(line) => {
                    if !line.trim().is_empty() {
                        let _ = editor.add_history_entry(line.as_str());
                    }
                    Ok(checked_length(line))
                }
                Err(ReadlineError::Interrupted) => Ok(Read::Interrupted),
                Err(ReadlineError::Eof) => Ok(Read::Eof),
                Err(e) => Err(format!("reading the terminal: {e}")),
            },
            Input::Lines(stdin) => {
                let mut bytes = Vec::new();
                let n = stdin
                    .read_until(b'\n', &mut bytes)
                    .map_err(|e| format!("reading stdin: {e}"))?;
                if n == 0 {
                    return Ok(Read::Eof);
                }
                while matches!(bytes.last(), Some(b'\n' | b'\r')) {
                    bytes.pop();
                }
                Ok(match String::from_utf8(bytes) {
                    Ok(line) => checked_length(line),
                    Err(e) => Read::Refused(format!(
                        "the line is not valid UTF-8 (at byte {}); ignored",
                        e.utf8_error().valid_up_to()
                    )),
                })
            }
        }
    }

    /// Writes the history file, if one was named.
    pub fn save(&mut self) -> Result<(), String> {
        if let Input::Editor {
            editor,
            history: Some(path),
        } = self
        {
            editor
                .save_history(path)
                .map_err(|e| format!("{}: writing the history: {e}", path.display()))?;
        }
        Ok(())
    }
}

fn checked_length(line: String) -> Read {
    if line.len() > MAX_LINE_BYTES {
        Read::Refused(format!(
            "the line has {} bytes, more than the {MAX_LINE_BYTES} a turn may have; ignored",
            line.len()
        ))
    } else {
        Read::Line(line)
    }
}
