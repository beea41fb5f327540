//! The terminal: the console commands speak through (human text and progress on stderr, JSON Lines and a
//! command's own output on stdout), and the alarm line `--quiet` never hides. Human text never goes to stdout, so
//! `--json` output stays machine-readable. The files a result leaves as are `ssdlab_app::export`'s.

use std::io::{self, IsTerminal, Write};
use std::sync::atomic::Ordering;

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};
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

/// The terminal as a command's console: human text on stderr (a progress line when stderr is a terminal), JSON
/// Lines and a command's own output on stdout, Ctrl-C and SIGTERM as the stop request. On a terminal, lines are
/// wrapped at its width; into a pipe or a file every line stays whole, so a sentence can be searched for.
pub struct Terminal {
    json: bool,
    progress: Option<Progress>,
}

/// The progress line of one phase: how far it is, since when, and the last second's figures.
struct Progress {
    bar: ProgressBar,
    started: Instant,
    sample: String,
    /// The bar's width in columns, chosen from the terminal's when the line started.
    bar_columns: usize,
    /// When the phase should end, judged at the last change of the fraction: the time left counts down between
    /// updates instead of rising while the fraction waits for its next second.
    ends_at: Option<Instant>,
}

impl Terminal {
    /// A console that writes JSON Lines when `json` (the command's `--json`).
    pub fn new(json: bool) -> Self {
        Terminal { json, progress: None }
    }
}

/// The time left at the average rate so far: steady for a phase that ends by time, and rising only when the
/// work really slows (a fill past the drive's cache). None until there is enough to judge by.
fn time_left(elapsed: Duration, fraction: f64) -> Option<Duration> {
    ((0.01..1.0).contains(&fraction) && elapsed >= Duration::from_millis(500))
        .then(|| elapsed.mul_f64((1.0 - fraction) / fraction))
}

/// `first`, then each of `fields` (separated by two spaces) that still fits in `room` characters.
fn fit_fields(first: &str, fields: &str, room: usize) -> String {
    let mut text = first.to_string();
    for field in fields.split("  ").filter(|f| !f.is_empty()) {
        if text.chars().count() + 2 + field.chars().count() > room {
            break;
        }
        text.push_str("  ");
        text.push_str(field);
    }
    text
}

fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// Standard error as indicatif draws on it: the terminal's width read at every draw (a resized window is
/// followed), and the rest of a line cleared with an erase sequence instead of the spaces indicatif pads it
/// with, so a captured session (`script`, a CI log) holds no line padded to the terminal's width.
#[derive(Debug)]
struct StderrTerm;

impl StderrTerm {
    fn write(s: &str) -> io::Result<()> {
        io::stderr().lock().write_all(s.as_bytes())
    }
}

impl TermLike for StderrTerm {
    fn width(&self) -> u16 {
        ssdlab_io::sys::stderr_columns().map_or(80, |c| c.min(u16::MAX as usize) as u16)
    }
    fn move_cursor_up(&self, n: usize) -> io::Result<()> {
        if n > 0 {
            Self::write(&format!("\x1b[{n}A"))
        } else {
            Ok(())
        }
    }
    fn move_cursor_down(&self, n: usize) -> io::Result<()> {
        if n > 0 {
            Self::write(&format!("\x1b[{n}B"))
        } else {
            Ok(())
        }
    }
    fn move_cursor_right(&self, n: usize) -> io::Result<()> {
        if n > 0 {
            Self::write(&format!("\x1b[{n}C"))
        } else {
            Ok(())
        }
    }
    fn move_cursor_left(&self, n: usize) -> io::Result<()> {
        if n > 0 {
            Self::write(&format!("\x1b[{n}D"))
        } else {
            Ok(())
        }
    }
    fn write_line(&self, s: &str) -> io::Result<()> {
        Self::write(&format!("{s}\n"))
    }
    fn write_str(&self, s: &str) -> io::Result<()> {
        // indicatif pads each drawn line with spaces to the terminal's width to clear what was there.
        if !s.is_empty() && s.bytes().all(|b| b == b' ') {
            Self::write("\x1b[K")
        } else {
            Self::write(s)
        }
    }
    fn clear_line(&self) -> io::Result<()> {
        Self::write("\r\x1b[2K")
    }
    fn flush(&self) -> io::Result<()> {
        io::stderr().lock().flush()
    }
}

impl Console for Terminal {
    fn say(&mut self, line: &str) {
        let lines = match ssdlab_io::sys::stderr_columns() {
            Some(width) if io::stderr().is_terminal() => ssdlab_report::text::fit_to_terminal(line, width),
            _ => vec![line.to_string()],
        };
        let write = || {
            for line in &lines {
                stderr_line(format_args!("{line}"));
            }
        };
        // Above the progress line, never glued to it.
        match &self.progress {
            Some(p) => p.bar.suspend(write),
            None => write(),
        }
    }

    fn alarm(&mut self, line: &str) {
        // Above the progress line, as `say` is: the line is cleared by erasing, so a direct write would glue
        // the alarm onto it.
        match &self.progress {
            Some(p) => p.bar.suspend(|| alarm(line)),
            None => alarm(line),
        }
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
        // The line fits the terminal: the bar gives up width first (the figures after it are what is read).
        let width = ssdlab_io::sys::stderr_columns().unwrap_or(80);
        let bar_columns = width.saturating_sub(12 + 2 + 2 + 4 + 14 + 36).clamp(10, 30);
        let target = ProgressDrawTarget::term_like_with_hz(Box::new(StderrTerm), 10);
        let bar = ProgressBar::with_draw_target(Some(1000), target);
        bar.set_style(
            ProgressStyle::with_template(&format!(
                "{{prefix:>12}} [{{bar:{bar_columns}}}] {{percent:>3}}% {{msg}}"
            ))
            .expect("a template of known parts")
            .progress_chars("=> "),
        );
        bar.set_prefix(name.to_string());
        self.progress = Some(Progress {
            bar,
            started: Instant::now(),
            sample: String::new(),
            bar_columns,
            ends_at: None,
        });
        true
    }

    fn progress_set(&mut self, fraction: Option<f64>, message: Option<&str>) {
        let Some(p) = &mut self.progress else {
            return;
        };
        if let Some(fraction) = fraction {
            let position = (fraction.clamp(0.0, 1.0) * 1000.0) as u64;
            if position != p.bar.position() {
                p.bar.set_position(position);
                p.ends_at = time_left(p.started.elapsed(), fraction).map(|left| Instant::now() + left);
            }
        }
        if let Some(message) = message {
            p.sample = message.to_string();
        }
        let left = match p.ends_at {
            _ if p.bar.position() >= 1000 => "finishing".to_string(),
            Some(end) => format!(
                "ETA {}",
                short_duration(end.saturating_duration_since(Instant::now()))
            ),
            None => "ETA –".to_string(),
        };
        let width = ssdlab_io::sys::stderr_columns().unwrap_or(80);
        // What is left of the line after the bar: the time left first, then as many of the last second's
        // figures as fit whole (a figure is never cut from its unit), rather than a wrapped second line.
        let room = width.saturating_sub(12 + 2 + p.bar_columns + 2 + 5);
        p.bar.set_message(fit_fields(&left, &p.sample, room));
    }

    fn progress_finish(&mut self) {
        if let Some(p) = self.progress.take() {
            p.bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Duration, fit_fields, short_duration, time_left};

    #[test]
    fn the_progress_line_drops_whole_figures_never_part_of_one() {
        let sample = "98.4K IOPS  403 MB/s  p99 1.85 ms";
        assert_eq!(
            fit_fields("ETA 3s", sample, 80),
            "ETA 3s  98.4K IOPS  403 MB/s  p99 1.85 ms"
        );
        assert_eq!(fit_fields("ETA 3s", sample, 30), "ETA 3s  98.4K IOPS  403 MB/s");
        assert_eq!(fit_fields("ETA 3s", sample, 20), "ETA 3s  98.4K IOPS");
        assert_eq!(fit_fields("ETA 3s", sample, 8), "ETA 3s");
    }

    #[test]
    fn time_left_is_the_average_rate_so_far_and_silent_until_it_can_judge() {
        assert_eq!(
            time_left(Duration::from_secs(15), 0.25),
            Some(Duration::from_secs(45))
        );
        assert_eq!(time_left(Duration::from_millis(100), 0.5), None, "too soon");
        assert_eq!(time_left(Duration::from_secs(10), 0.0), None, "nothing done yet");
        assert_eq!(time_left(Duration::from_secs(10), 1.0), None, "done");
        assert_eq!(short_duration(Duration::from_secs(83)), "1m23s");
        assert_eq!(short_duration(Duration::from_secs(7384)), "2h03m");
    }
}
