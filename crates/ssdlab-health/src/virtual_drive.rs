//! The virtual SSD's own counters as a health snapshot, so `health sim:...` reads like a real drive's, with the
//! NAND writes every real SATA drive of its era kept to itself.

use ssdlab_core::schema::DeviceCounters;
use ssdlab_core::schema::health::{DriveIdentity, HealthSnapshot, Protocol};

/// What the binary knows about a virtual drive at the moment it is read.
#[derive(Debug, Clone)]
pub struct VirtualDrive {
    /// The target as written (`sim:840evo-250g?...`); it is the drive's serial too.
    pub target: String,
    pub model: String,
    pub capacity_bytes: u64,
    pub counters: DeviceCounters,
    pub host_read_bytes: Option<u64>,
    /// Rated P/E cycles of the profile's NAND, which turns mean erase counts into wear.
    pub rated_pe_cycles: u32,
    /// Virtual seconds the drive has been powered (its clock).
    pub powered_s: f64,
    /// Where the counters came from, when not from opening the target ("result.json of ...").
    pub origin: Option<String>,
}

pub fn snapshot(drive: &VirtualDrive, taken_at_s: u64) -> HealthSnapshot {
    let c = &drive.counters;
    let mut notes = vec![format!(
        "a virtual drive: wear is mean erase count {:.2} of {} rated P/E cycles (min {}, max {})",
        c.erase_count_mean, drive.rated_pe_cycles, c.erase_count_min, c.erase_count_max
    )];
    if let Some(origin) = &drive.origin {
        notes.push(format!("counters from {origin}"));
    }
    HealthSnapshot {
        taken_at_s,
        identity: DriveIdentity {
            model: drive.model.clone(),
            serial: drive.target.clone(),
            firmware: Some(format!("ssdlab {}", env!("CARGO_PKG_VERSION"))),
            capacity_bytes: Some(drive.capacity_bytes),
            protocol: Protocol::Virtual,
            source: drive.target.clone(),
        },
        power_on_hours: Some((drive.powered_s / 3600.0) as u64),
        temperature_celsius: None,
        host_written_bytes: Some(u128::from(c.host_bytes_written)),
        host_read_bytes: drive.host_read_bytes.map(u128::from),
        nand_written_bytes: Some(u128::from(c.nand_bytes_written)),
        nand_written_source: "the simulator's NAND program counter (host, GC and refresh writes)".into(),
        wear_used_percent: (drive.rated_pe_cycles > 0)
            .then(|| c.erase_count_mean / f64::from(drive.rated_pe_cycles) * 100.0),
        wear_source: "mean erase count over rated P/E cycles".into(),
        erase_count_mean: Some(c.erase_count_mean),
        available_spare_percent: None,
        available_spare_threshold_percent: None,
        media_errors: Some(0),
        crc_errors: None,
        reallocated: Some(0),
        pending_sectors: None,
        unsafe_shutdowns: None,
        smart_passed: Some(true),
        critical_warning: None,
        smartctl_exit_status: None,
        attributes: vec![],
        other_fields: vec![
            ssdlab_core::schema::health::NamedValue {
                name: "gc_relocated_bytes".into(),
                value: c.gc_relocated_bytes.to_string(),
            },
            ssdlab_core::schema::health::NamedValue {
                name: "slc_hit_bytes".into(),
                value: c.slc_hit_bytes.to_string(),
            },
            ssdlab_core::schema::health::NamedValue {
                name: "refreshed_bytes".into(),
                value: c.refreshed_bytes.to_string(),
            },
        ],
        notes,
    }
}
