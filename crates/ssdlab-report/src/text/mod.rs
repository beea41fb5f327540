//! Results as the text a terminal shows: each kind's tables and summaries as lines, rendered from the typed
//! result alone (as the HTML is), so a result kind's renderers live together and the binary only prints them.
//! It does no I/O.

/// Pushes one formatted line (or an empty one) onto `out`.
macro_rules! say {
    ($out:ident) => {
        $out.push(String::new())
    };
    ($out:ident, $($arg:tt)*) => {
        $out.push(format!($($arg)*))
    };
}

mod erase;
mod fanout;
mod health;
pub(crate) mod methods;
pub mod op;
mod run;
mod scan;
pub(crate) mod serve;
mod wrap;

pub use crate::views::method_lines;
pub use erase::erase_lines;
pub use fanout::fanout_lines;
pub use health::drive_lines;
pub use methods::{excursion, pts_lines, replay_lines};
pub use op::partition_lines;
pub use run::{cache_lines, drive_facts_line, summary_lines, target_lines, verdict_lines};
pub use scan::{RewriteHint, field_report_lines, scan_lines};
pub use serve::served_lines;
pub use wrap::{fit_to_terminal, wrap};
