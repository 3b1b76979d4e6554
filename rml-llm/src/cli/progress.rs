//! Progress on stderr while a model loads, a file is quantized or a long prompt runs:
//! drawn only when stderr is a terminal (nothing at all when piped).

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar or spinner that is hidden unless stderr is a terminal.
#[derive(Clone)]
pub struct Progress(ProgressBar);

impl Progress {
    fn target() -> ProgressDrawTarget {
        if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        }
    }

    /// A bar of `total` steps labelled `message` (the total may be set later).
    pub fn bar(message: &str, total: u64) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(total), Self::target());
        if let Ok(style) = ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({elapsed})")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(message.to_string());
        Progress(bar)
    }

    /// A spinner labelled `message` that shows the elapsed time.
    pub fn spinner(message: &str) -> Progress {
        let bar = ProgressBar::with_draw_target(None, Self::target());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            bar.set_style(style);
        }
        bar.set_message(message.to_string());
        bar.enable_steady_tick(Duration::from_millis(100));
        Progress(bar)
    }

    /// Sets the position and the total.
    pub fn set(&self, done: usize, total: usize) {
        self.0.set_length(total as u64);
        self.0.set_position(done as u64);
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        self.0.finish_and_clear();
    }
}
