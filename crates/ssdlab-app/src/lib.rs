//! ssdlab's commands as a library. Each command is a typed plan, checked before anything runs (flags become one
//! high-level value, as ripgrep's `HiArgs`), and a `run(plan, ports)` that opens the target through the safety
//! gate, sequences the session, decides the verdict and hands its result to the exporters. The binary is clap,
//! plan building, one call and the exit code.
//!
//! What this crate must never do: read the command line, or write to a terminal (text goes through the
//! [`ports::Console`], tools through [`ports::Tools`]). Its errors are the messages the user reads (anyhow, each
//! naming the flag at fault); the libraries below it keep typed errors.

#![forbid(unsafe_code)]

pub mod demo;
pub mod devices;
pub mod erase;
pub mod export;
pub mod fanout;
mod fanout_from;
pub mod flags;
pub mod health;
pub mod inputs;
pub mod methodology;
pub mod op;
pub mod ports;
pub mod recording;
pub mod refresh;
pub mod report;
pub mod reporter;
pub mod run;
pub mod scan;
pub mod serve;
pub mod sim;
pub mod target;
pub mod testing;
pub mod trace;

pub use ports::{Console, Outcome, Ports};
pub use reporter::Reporter;
pub use target::{TargetPlan, Use};
