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

pub use ssdlab_app::Outcome;
use ssdlab_app::Ports;

use crate::output::Terminal;

/// Runs a command's library call with the terminal as its console (JSON Lines on stdout when `json`) and the
/// system's tools and clock.
pub fn with_terminal(
    json: bool,
    run: impl FnOnce(&mut Ports) -> anyhow::Result<Outcome>,
) -> anyhow::Result<Outcome> {
    let mut terminal = Terminal::new(json);
    run(&mut Ports::system(&mut terminal))
}
