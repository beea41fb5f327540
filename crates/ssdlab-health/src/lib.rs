//! ssdlab-health: what a drive says about its own health, in one model, and what follows from it.
//!
//! [`smartctl`] reads smartctl's JSON and text and [`nvme_cli`] nvme-cli's JSON (live or saved; [`decode`]
//! turns a saved file's bytes into text whatever system wrote it) into a
//! [`HealthSnapshot`](ssdlab_core::schema::health::HealthSnapshot); [`ata`] holds the table of ATA attributes
//! this model names (host writes, the vendors' NAND-write counters, wear, errors), [`virtual_drive`] turns the
//! simulator's counters into the same snapshot; [`history`] keeps snapshots per drive serial as JSON Lines and
//! computes write rates and write amplification over a window; [`life`] extrapolates wear with a confidence
//! band; [`rating`] knows the endurance ratings of a few drives; [`verdict`] says OK, WARN or FAIL and why;
//! [`prom`] writes the Prometheus text format; [`purge`] reads what a drive's firmware offers to purge itself
//! (nvme-cli's id-ctrl, hdparm -I) and plans and sequences those purges.
//!
//! The crate never does I/O: no files, no processes, no clock. The app (ssdlab-app's health command) runs
//! smartctl through its tools port, reads and appends the history files, and passes the time in.
#![forbid(unsafe_code)]

pub mod assess;
pub mod ata;
pub mod decode;
pub mod drivedb;
pub mod history;
mod json;
pub mod life;
pub mod nvme_cli;
pub mod nvme_nand;
pub mod plausible;
pub mod prom;
pub mod purge;
pub mod rated;
pub mod rating;
pub mod scsi;
pub mod smartctl;
pub mod verdict;
pub mod virtual_drive;

pub use assess::{assess, assess_warned};
use ssdlab_core::schema::health::HealthSnapshot;

/// Why health data could not be read. The text names the source and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// Neither smartctl's text nor JSON of a shape this crate knows.
    #[error("{source_name}: {reason}")]
    Format { source_name: String, reason: String },
    /// smartctl itself failed to run (exit status bits 0-1): there is no data, only its messages.
    #[error(
        "{source_name}: smartctl could not read the device (exit status {exit_status}: {meaning}){messages}"
    )]
    SmartctlFailed {
        source_name: String,
        exit_status: u8,
        meaning: String,
        messages: String,
    },
}

/// Reads health data of any known kind (smartctl's JSON or text, nvme-cli's smart-log JSON), telling JSON apart
/// by its keys.
/// `now_s` stamps a snapshot whose source carries no time of its own.
pub fn parse_any(source_name: &str, text: &str, now_s: u64) -> Result<HealthSnapshot, ParseError> {
    parse_any_named(source_name, text, now_s, &drivedb::AttributeNames::new(None))
}

/// [`parse_any`], naming ATA attributes by `names` (the installed drive database, then the fallback table).
/// Text that is not JSON is read as smartctl's text output (`smartctl -x`, `-a` or `-A`).
pub fn parse_any_named(
    source_name: &str,
    text: &str,
    now_s: u64,
    names: &drivedb::AttributeNames,
) -> Result<HealthSnapshot, ParseError> {
    let looks_like_json = matches!(text.trim_start().chars().next(), Some('{' | '['));
    let mut snapshot = if looks_like_json {
        parse_json(source_name, text, now_s, names)?
    } else {
        smartctl::parse_text(source_name, text, now_s, names)?
    };
    plausible::check(&mut snapshot);
    Ok(snapshot)
}

/// A saved output's bytes (any encoding [`decode`] reads) into a snapshot, saying how it was decoded.
pub fn parse_saved(
    source_name: &str,
    bytes: &[u8],
    now_s: u64,
    names: &drivedb::AttributeNames,
) -> Result<HealthSnapshot, ParseError> {
    let decoded = decode::decode(bytes);
    let mut snapshot = parse_any_named(source_name, &decoded.text, now_s, names)?;
    if let Some(encoding) = decoded.encoding_note {
        snapshot.notes.push(format!("{source_name}: {encoding}"));
    }
    Ok(snapshot)
}

fn parse_json(
    source_name: &str,
    text: &str,
    now_s: u64,
    names: &drivedb::AttributeNames,
) -> Result<HealthSnapshot, ParseError> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| ParseError::Format {
        source_name: source_name.into(),
        reason: format!(
            "not JSON ({e}); give smartctl's output (--json -x, or its text from -x or -a) or nvme smart-log -o \
             json output"
        ),
    })?;
    if smartctl::looks_like(&value) {
        smartctl::parse_value(source_name, &value, now_s, names)
    } else if nvme_cli::looks_like(&value) {
        nvme_cli::parse_value(source_name, &value, now_s)
    } else {
        Err(ParseError::Format {
            source_name: source_name.into(),
            reason: "JSON, but neither smartctl's (no \"smartctl\" or \"json_format_version\" key) nor nvme-cli's \
                     smart-log (no \"data_units_written\" and \"critical_warning\"); give smartctl --json -x or \
                     nvme smart-log -o json output"
                .into(),
        })
    }
}
