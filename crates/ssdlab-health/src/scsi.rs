//! What a SCSI (SAS) drive's log pages say, in the snapshot's terms. SAS drives have no attribute table: host
//! writes and reads are the error counter log's "gigabytes processed" (10^9 bytes), wear is the Solid State
//! Media page's percentage used endurance indicator, retired blocks are the grown defect list, and uncorrected
//! errors are the error counter log's totals over read, write and verify.

use ssdlab_core::schema::health::{HealthSnapshot, NamedValue};

use crate::smartctl::printed::ScsiLogs;

/// Fills the snapshot's normalized fields from the log pages, each with where it came from.
pub fn apply(logs: &ScsiLogs, snapshot: &mut HealthSnapshot) {
    snapshot.host_written_bytes = logs.written_bytes;
    snapshot.host_read_bytes = logs.read_bytes;
    if logs.written_bytes.is_some() {
        snapshot.notes.push(
            "host writes and reads from the SCSI error counter log's gigabytes processed (x 10^9 bytes)"
                .into(),
        );
    }
    if let Some(used) = logs.percentage_used {
        snapshot.wear_used_percent = Some(used);
        snapshot.wear_source = "SCSI Solid State Media log, percentage used endurance indicator".into();
    }
    snapshot.reallocated = logs.grown_defects;
    snapshot.media_errors = logs.uncorrected_errors;
    if let Some(cycles) = logs.start_stop_cycles {
        snapshot.other_fields.push(NamedValue {
            name: "accumulated_start_stop_cycles".into(),
            value: cycles.to_string(),
        });
    }
}
