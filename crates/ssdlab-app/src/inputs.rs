//! Files the user names as input (results, saved smartctl/nvme-cli output, fleet lists, traces): only regular
//! files, never waiting on a FIFO, and never more than a size that such a file can have, each refusal naming the
//! flag and what the path is.

use std::path::Path;

use anyhow::{Context, Result, anyhow};

/// The largest result.json ssdlab reads back (a 2000 s consistency test with its histograms is tens of MB).
pub const MAX_RESULT_BYTES: u64 = 1 << 30;
/// The largest saved smartctl or nvme-cli output, or fleet list: real ones are a few KiB to a few MiB.
pub const MAX_SMALL_INPUT_BYTES: u64 = 64 << 20;

/// Reads `path` (named by `what`, such as "--from X") as UTF-8 text of at most `max_bytes`; `hint` (may be empty)
/// ends the message of a refusal with what to give instead.
pub fn read_text(what: &str, path: &Path, max_bytes: u64, hint: &str) -> Result<String> {
    let hint = if hint.is_empty() {
        String::new()
    } else {
        format!("; {hint}")
    };
    let bytes = ssdlab_io::files::read_input(path, max_bytes)
        .map_err(|e| anyhow!("{what}: cannot read it: {e}{hint}"))?;
    String::from_utf8(bytes).map_err(|e| {
        anyhow!(
            "{what}: it is not text (invalid UTF-8 at byte {}){hint}",
            e.utf8_error().valid_up_to()
        )
    })
}

/// Opens `path` for reading line by line (a trace), refusing anything but a regular file.
pub fn open(what: &str, path: &Path) -> Result<std::fs::File> {
    ssdlab_io::files::open_input(path).with_context(|| format!("{what}: cannot read it"))
}
