//! One module per subcommand. Each returns how the run ended; errors (bad input, refusals, device failures)
//! propagate as `anyhow` errors and become exit code 2 in `main`.

pub mod demo;
pub mod devices;
pub mod docs;
pub mod erase;
pub mod fanout;
pub mod health;
pub mod op;
pub mod refresh;
pub mod report;
pub mod run;
pub mod scan;
pub mod serve;
pub mod sim;
pub mod test;
pub mod trace;

/// How a command that ran ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Ran, and every criterion passed: exit 0.
    Passed,
    /// Ran, and a criterion failed (I/O error, verify mismatch, ...): exit 1.
    Failed,
    /// Stopped by Ctrl-C or SIGTERM after writing what was measured: exit 130.
    Interrupted,
    /// stdout's reader went away (e.g. `| head`): exit 0, as a broken pipe is not an error.
    PipeClosed,
}

impl Outcome {
    /// How a command that published a verdict ended: a closed pipe first (exit 0), then the verdict.
    pub fn of_verdict(pipe_closed: bool, passed: bool) -> Self {
        if pipe_closed {
            Outcome::PipeClosed
        } else if passed {
            Outcome::Passed
        } else {
            Outcome::Failed
        }
    }
}
