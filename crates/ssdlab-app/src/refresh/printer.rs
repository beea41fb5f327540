//! What a refresh says as it goes: what was settled, the wear cost and the estimate, each file, and the
//! before/after speeds at the end. Lines go to the console; a file left pending or failed is an alarm.

use std::collections::HashMap;
use std::path::PathBuf;

use ssdlab_core::schema::refresh::{RefreshOutcome, RefreshedFile};
use ssdlab_core::units::BinaryBytes;
use ssdlab_methods::refresh::file::escape_path;
use ssdlab_methods::refresh::select::{Found, Selection};
use ssdlab_methods::refresh::session::SessionEvents;
use ssdlab_methods::refresh::{FileOutcome, PathBytes, RefreshError, SettleOutcome};

use crate::ports::Console;

/// The run's lines on stderr as it goes: what was settled, the wear cost and estimate, and each file.
pub(super) struct Printer<'a> {
    console: &'a mut dyn Console,
    bytes_per_s: Option<f64>,
    before_mb_s: &'a HashMap<PathBuf, f64>,
    /// Before/after speeds of the files rewritten, said after the run.
    pub(super) measured: Vec<String>,
}

impl<'a> Printer<'a> {
    pub(super) fn new(
        console: &'a mut dyn Console,
        bytes_per_s: Option<f64>,
        before_mb_s: &'a HashMap<PathBuf, f64>,
    ) -> Self {
        Printer {
            console,
            bytes_per_s,
            before_mb_s,
            measured: Vec::new(),
        }
    }
}

impl SessionEvents for Printer<'_> {
    fn settled(&mut self, outcome: &Result<SettleOutcome, (PathBytes, RefreshError)>) {
        match outcome {
            Ok(SettleOutcome::Restored { path, .. }) => self.console.say(&format!(
                "settled   {}: an interrupted refresh's times put back",
                path.escaped()
            )),
            Ok(SettleOutcome::ChangedByOthers { path }) => self.console.say(&format!(
                "settled   {}: changed by someone else since the interrupted refresh; its times are left as they are",
                path.escaped()
            )),
            Ok(SettleOutcome::Gone { path }) => self.console.say(&format!(
                "settled   {}: gone or replaced since the interrupted refresh; nothing to put back",
                path.escaped()
            )),
            Ok(SettleOutcome::LeftAsWritten { path }) => self.console.say(&format!(
                "settled   {}: the interrupted write's time cannot be told from another write in the same second (the file system keeps whole seconds); it is left, so the file looks modified",
                path.escaped()
            )),
            Ok(SettleOutcome::Busy { path }) => self.console.alarm(&format!(
                "pending   {}: open in another process; the next run puts its times back",
                path.escaped()
            )),
            Err((path, e)) => self.console.alarm(&format!(
                "pending   {}: cannot settle the interrupted refresh ({e}); the next run tries again (--forget drops it)",
                path.escaped()
            )),
        }
    }

    fn selected(&mut self, selection: &Selection, skipped: &[(PathBuf, String)]) {
        let total: u64 = selection.files.iter().map(|c| c.size_bytes).sum();
        self.console.say(&format!(
            "refresh   {} files, {} to rewrite: the wear cost is {} of host writes (times the drive's write amplification)",
            selection.files.len(),
            BinaryBytes(total),
            BinaryBytes(total)
        ));
        if selection.younger > 0 {
            self.console.say(&format!(
                "younger   {} files written or refreshed more recently than --older-than",
                selection.younger
            ));
        }
        let estimate = estimate(&selection.files, self.bytes_per_s, self.before_mb_s, total);
        self.console.say(&estimate);
        for (path, reason) in skipped {
            self.console
                .say(&format!("skip      {}: {reason}", escape_path(path)));
        }
    }

    fn file(&mut self, file: &Found, record: &RefreshedFile, outcome: Option<&FileOutcome>) {
        let shown = escape_path(&file.path);
        let reason = record.reason.as_deref().unwrap_or("");
        match (record.outcome, outcome) {
            (
                RefreshOutcome::Refreshed,
                Some(FileOutcome::Refreshed {
                    bytes,
                    resumed_from_chunk,
                    ..
                }),
            ) => {
                let speed =
                    |b: Option<f64>| b.map_or("not measured".to_string(), |b| format!("{:.1} MB/s", b / 1e6));
                self.measured.push(format!(
                    "measured  {shown}: before {}, after {}",
                    speed(record.before_bytes_per_s),
                    speed(record.after_bytes_per_s)
                ));
                let resumed = if *resumed_from_chunk > 0 {
                    format!(", resumed at chunk {resumed_from_chunk}")
                } else {
                    String::new()
                };
                self.console.say(&format!(
                    "done      {shown} ({}, write lease{resumed})",
                    BinaryBytes(*bytes)
                ));
            }
            (RefreshOutcome::GaveWay, _) => self.console.say(&format!("gave way  {shown}: {reason}")),
            (RefreshOutcome::Failed, _) => self.console.alarm(&format!("FAILED    {shown}: {reason}")),
            (RefreshOutcome::Interrupted, Some(_)) => {
                self.console.say(&format!("stopped   {shown}: {reason}"))
            }
            (RefreshOutcome::Interrupted, None) => {}
            _ => self.console.say(&format!("skip      {shown}: {reason}")),
        }
    }
}

/// Each byte is read, written and read again: three passes at the drive's speed, or the --rate cap.
fn estimate(
    files: &[Found],
    bytes_per_s: Option<f64>,
    before_mb_s: &HashMap<PathBuf, f64>,
    total: u64,
) -> String {
    match bytes_per_s {
        Some(rate) => format!(
            "estimate  {:.0} s at the --rate of {}",
            total as f64 / rate,
            ssdlab_core::units::Throughput(rate)
        ),
        None if !before_mb_s.is_empty() => {
            let seconds: f64 = files
                .iter()
                .filter_map(|c| {
                    before_mb_s
                        .get(&c.path)
                        .map(|mb_s| 3.0 * c.size_bytes as f64 / (mb_s * 1e6).max(1.0))
                })
                .sum();
            format!("estimate  {seconds:.0} s: three passes at the speeds the scan measured")
        }
        None => format!(
            "estimate  {:.0} s if the drive moves 500 MB/s (three passes: read, write, verify); --rate caps it",
            3.0 * total as f64 / 500e6
        ),
    }
}
