//! The terminal: the console commands speak through (human text and progress on stderr, JSON Lines and a
//! command's own output on stdout), and the alarm line `--quiet` never hides. Human text never goes to stdout, so
//! `--json` output stays machine-readable. The files a result leaves as are `ssdlab_app::export`'s.

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::Ordering;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use ssdlab_app::Console;

/// The original stderr while `--quiet` sends fd 2 to /dev/null (None when not quiet).
static ORIGINAL_STDERR: std::sync::OnceLock<std::sync::Mutex<std::fs::File>> = std::sync::OnceLock::new();

/// Keeps the original stderr for [`alarm`] and for panics, which `--quiet` must not hide.
pub fn keep_original_stderr(original: std::fs::File) {
    if ORIGINAL_STDERR.set(std::sync::Mutex::new(original)).is_ok() {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            alarm(&format!("ssdlab: {info}"));
            default(info);
        }));
    }
}

/// One line on stderr; a write error (a reader that went away) is ignored, so output never costs a result.
pub fn stderr_line(args: std::fmt::Arguments<'_>) {
    use std::io::Write as _;
    let mut stderr = io::stderr().lock();
    let _ = stderr.write_fmt(args).and_then(|()| stderr.write_all(b"\n"));
}

/// A line the user must see even with `--quiet`: an error, a failed verification, data left pending.
pub fn alarm(line: &str) {
    use std::io::Write as _;
    match ORIGINAL_STDERR.get() {
        Some(original) => {
            let mut file = original.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            let _ = writeln!(file, "{line}");
        }
        None => eprintln!("{line}"),
    }
}

/// The terminal as a command's console: human text on stderr (a progress bar when stderr is a terminal), JSON
/// Lines and a command's own output on stdout, Ctrl-C and SIGTERM as the stop request.
pub struct Terminal {
    json: bool,
    progress: Option<ProgressBar>,
}

impl Terminal {
    /// A console that writes JSON Lines when `json` (the command's `--json`).
    pub fn new(json: bool) -> Self {
        Terminal { json, progress: None }
    }
}

impl Console for Terminal {
    fn say(&mut self, line: &str) {
        stderr_line(format_args!("{line}"));
    }

    fn alarm(&mut self, line: &str) {
        alarm(line);
    }

    fn json_wanted(&self) -> bool {
        self.json
    }

    fn json_line(&mut self, line: &[u8]) -> io::Result<()> {
        let mut out = io::stdout().lock();
        out.write_all(line)
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush())
    }

    fn print(&mut self, line: &str) -> io::Result<()> {
        let mut out = io::stdout().lock();
        writeln!(out, "{line}").and_then(|()| out.flush())
    }

    /// Asking installs the SIGINT/SIGTERM handler (once): only commands that watch for a stop ask, so the others
    /// are still ended by Ctrl-C at once.
    fn interrupted(&self) -> bool {
        ssdlab_io::sys::interrupt_flag().load(Ordering::Relaxed)
    }

    fn progress_start(&mut self, name: &str) -> bool {
        self.progress_finish();
        if !io::stderr().is_terminal() {
            return false;
        }
        let bar = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{prefix:>12} [{bar:30}] {percent:>3}% ETA {eta:>4} {msg}")
                .expect("static template")
                .progress_chars("=> "),
        );
        bar.set_prefix(name.to_string());
        self.progress = Some(bar);
        true
    }

    fn progress_set(&mut self, fraction: Option<f64>, message: Option<&str>) {
        if let Some(bar) = &self.progress {
            if let Some(fraction) = fraction {
                bar.set_position((fraction * 1000.0) as u64);
            }
            if let Some(message) = message {
                bar.set_message(message.to_string());
            }
        }
    }

    fn progress_finish(&mut self) {
        if let Some(bar) = self.progress.take() {
            bar.finish_and_clear();
        }
    }
}
