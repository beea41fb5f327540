//! Ports for tests: a console that records what a command said, tools that answer from a table, and a clock that
//! stands still. Commands run through these without a terminal, without the tools installed and without root.

use std::collections::BTreeMap;
use std::io;
use std::sync::Mutex;

use crate::ports::{Clock, Console, ToolOutput, Tools};

/// Records every line, JSON record and printed line; never interrupted unless told.
#[derive(Debug, Default)]
pub struct RecordingConsole {
    pub said: Vec<String>,
    pub alarms: Vec<String>,
    pub json: Option<Vec<String>>,
    pub printed: Vec<String>,
    pub interrupt: bool,
}

impl RecordingConsole {
    /// A console that takes JSON Lines (as `--json`).
    pub fn with_json() -> Self {
        RecordingConsole {
            json: Some(vec![]),
            ..Default::default()
        }
    }

    /// Everything said and alarmed, one line each, in one text (for `contains` checks).
    pub fn text(&self) -> String {
        let mut all = self.said.clone();
        all.extend(self.alarms.iter().cloned());
        all.join("\n")
    }
}

impl Console for RecordingConsole {
    fn say(&mut self, line: &str) {
        self.said.push(line.to_string());
    }

    fn alarm(&mut self, line: &str) {
        self.alarms.push(line.to_string());
    }

    fn json_wanted(&self) -> bool {
        self.json.is_some()
    }

    fn json_line(&mut self, line: &[u8]) -> io::Result<()> {
        if let Some(json) = &mut self.json {
            json.push(String::from_utf8_lossy(line).into_owned());
        }
        Ok(())
    }

    fn print(&mut self, line: &str) -> io::Result<()> {
        self.printed.push(line.to_string());
        Ok(())
    }

    fn interrupted(&self) -> bool {
        self.interrupt
    }

    fn progress_start(&mut self, _name: &str) -> bool {
        false
    }

    fn progress_set(&mut self, _fraction: Option<f64>, _message: Option<&str>) {}

    fn progress_finish(&mut self) {}
}

/// Tools that answer from a table keyed by the whole command line joined with spaces; anything else is "not
/// installed". Every command line asked is kept, in order.
#[derive(Debug, Default)]
pub struct CannedTools {
    pub answers: BTreeMap<String, ToolOutput>,
    pub asked: Mutex<Vec<String>>,
}

impl CannedTools {
    /// Answers `command_line` with `stdout` and exit code `exit_code`.
    pub fn answer(mut self, command_line: &str, exit_code: i32, stdout: &str) -> Self {
        self.answers.insert(
            command_line.to_string(),
            ToolOutput {
                exit_code: Some(exit_code),
                stdout: stdout.to_string(),
                stderr: String::new(),
            },
        );
        self
    }
}

impl Tools for CannedTools {
    fn run(&self, argv: &[String]) -> io::Result<ToolOutput> {
        let line = argv.join(" ");
        self.asked.lock().unwrap().push(line.clone());
        self.answers
            .get(&line)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{line}: no such tool here")))
    }
}

/// A clock that stands at one moment; sleeping only counts.
#[derive(Debug)]
pub struct FixedClock {
    pub unix_s: f64,
    pub slept_s: Mutex<u64>,
}

impl FixedClock {
    pub fn at(unix_s: f64) -> Self {
        FixedClock {
            unix_s,
            slept_s: Mutex::new(0),
        }
    }
}

impl Clock for FixedClock {
    fn unix_now_s(&self) -> f64 {
        self.unix_s
    }

    fn sleep_s(&self, seconds: u64) {
        *self.slept_s.lock().unwrap() += seconds;
    }
}
