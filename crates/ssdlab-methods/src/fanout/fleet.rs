//! Fleets: the drives a fan-out reads. The virtual fleet is seed 000's search machine: 25 virtual 840 EVO 1 TB
//! drives, one shard each, built over half a year, so their data ages spread from 0.9 to 7 months; it can be aged
//! further (`--age-by 6w`) or shown after the fix (`--refresh-all`). A fleet file lists any targets, one a line.
//!
//! This module only describes fleets as target strings; opening them is the caller's job.

use ssdlab_core::units::MONTH_S;

/// One drive of a fleet.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetDrive {
    pub name: String,
    pub target: String,
    pub data_age_months: Option<f64>,
}

/// The shards of seed 000's search machine.
pub const FIELD_REPORT_SHARDS: u32 = 25;
/// The youngest and the oldest shard's data age in months when seed 000 measured.
pub const FIELD_REPORT_AGES: (f64, f64) = (0.9, 7.0);
/// Data rewritten by a refresh is this old when the fleet is read again (seed 000 measured two days after).
pub const REFRESHED_AGE_DAYS: f64 = 2.0;

/// The virtual fleet's drives are scaled down: a fan-out reads 4 KiB at random, which no capacity changes.
const FLEET_SCALE: u32 = 1024;

/// Seed 000's fleet: drive `i` holds data `0.9 + i x (7.0 - 0.9) / 24` months old, plus `age_by_s`, or two days
/// old after a refresh; drive `i` is `seed + i`, so the drives differ as real ones do.
pub fn field_report_fleet(age_by_s: f64, refresh_all: bool, seed: u64) -> Vec<FleetDrive> {
    let (young, old) = FIELD_REPORT_AGES;
    (0..FIELD_REPORT_SHARDS)
        .map(|i| {
            let months = if refresh_all {
                REFRESHED_AGE_DAYS * 86_400.0 / MONTH_S
            } else {
                young + i as f64 * (old - young) / (FIELD_REPORT_SHARDS - 1) as f64 + age_by_s / MONTH_S
            };
            let hours = (months * MONTH_S / 3600.0).round() as u64;
            FleetDrive {
                name: format!("drive-{:02}", i + 1),
                target: format!(
                    "sim:840evo-1t?scale=1/{FLEET_SCALE}&seed={}&fill=100%&age={hours}h",
                    seed + i as u64
                ),
                data_age_months: Some(months),
            }
        })
        .collect()
}

/// Parses a fleet file: one target a line (`/dev/sdb`, `file:PATH`, `sim:...`), optionally followed by a name;
/// `#` starts a comment. Errors name the line.
pub fn parse_fleet_file(text: &str) -> Result<Vec<FleetDrive>, String> {
    let mut drives = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let target = words.next().expect("a non-empty line has a word").to_string();
        let name = words.next().map(str::to_string);
        // Names and targets are shown in every table: a drive's name is short, a longer one is not a fleet file.
        const MAX_WORD_CHARS: usize = 256;
        if let Some(long) = [Some(&target), name.as_ref()]
            .into_iter()
            .flatten()
            .find(|w| w.chars().count() > MAX_WORD_CHARS)
        {
            return Err(format!(
                "line {}: '{}...' is longer than {MAX_WORD_CHARS} characters; write TARGET [NAME] on each line",
                n + 1,
                long.chars().take(40).collect::<String>()
            ));
        }
        if let Some(extra) = words.next() {
            return Err(format!(
                "line {}: '{}' after the target and its name; write TARGET [NAME] on each line",
                n + 1,
                extra.chars().take(40).collect::<String>()
            ));
        }
        drives.push(FleetDrive {
            name: name.unwrap_or_else(|| target.clone()),
            target,
            data_age_months: None,
        });
    }
    if drives.is_empty() {
        return Err("no targets: write one target a line (TARGET [NAME])".into());
    }
    Ok(drives)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_field_report_fleet_spans_half_a_year_and_ages_as_one() {
        let fleet = field_report_fleet(0.0, false, 1);
        assert_eq!(fleet.len(), 25);
        let ages: Vec<f64> = fleet.iter().map(|d| d.data_age_months.unwrap()).collect();
        assert!((ages[0] - 0.9).abs() < 1e-9 && (ages[24] - 7.0).abs() < 1e-9);
        assert!(fleet[0].target.contains("seed=1&") && fleet[24].target.contains("seed=25&"));
        let older = field_report_fleet(6.0 * 7.0 * 86_400.0, false, 1);
        let six_weeks = 42.0 * 86_400.0 / MONTH_S;
        assert!((older[3].data_age_months.unwrap() - ages[3] - six_weeks).abs() < 1e-9);
        let fixed = field_report_fleet(0.0, true, 1);
        assert!(fixed.iter().all(|d| d.target.ends_with("age=48h")));
    }

    #[test]
    fn fleet_files_name_their_bad_lines() {
        let fleet =
            parse_fleet_file("# shards\n/dev/sdb shard-1\nsim:840evo-1t?fill=100%  # virtual\n").unwrap();
        assert_eq!(fleet.len(), 2);
        assert_eq!(
            (fleet[0].name.as_str(), fleet[0].target.as_str()),
            ("shard-1", "/dev/sdb")
        );
        assert_eq!(fleet[1].name, "sim:840evo-1t?fill=100%");
        assert!(parse_fleet_file("a b c").unwrap_err().contains("line 1"));
        assert!(
            parse_fleet_file("# nothing\n")
                .unwrap_err()
                .contains("no targets")
        );
    }
}
