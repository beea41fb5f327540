//! Readings no drive could have produced: a counter in the wrong unit, a drive written faster than its interface
//! allows, NAND writes below host writes. Such a reading is kept in a note with the reading it contradicts, and
//! removed from the snapshot's normalized fields, so it never drives a verdict, a rate or a life estimate.

use ssdlab_core::schema::health::{HealthSnapshot, Protocol};

/// The fastest a drive's interface can take data, bytes per second: SATA 6 Gb/s carries 600 MB/s; PCIe 5.0 x4
/// about 16 GB/s (an NVMe drive is given that, whatever its generation).
fn interface_limit_bytes_per_s(protocol: Protocol) -> f64 {
    match protocol {
        Protocol::Ata => 600e6,
        _ => 16e9,
    }
}

/// NAND writes below this share of host writes cannot be: every host write reaches NAND at least once, but
/// controllers that compress (SandForce: Intel 520/530 show 0.5-0.8 of host writes) write less, so the margin is
/// wide; the 0.9 would have thrown their real counters out.
const NAND_BELOW_HOST: f64 = 0.4;
/// NAND writes above this multiple of host writes point at a host counter in too small a unit (write
/// amplification of 50 is beyond any drive's sustained worst case).
const NAND_ABOVE_HOST: f64 = 50.0;

/// A SATA drive that has been on this long and has written less than [`HOST_BELOW_CAPACITY`] of its capacity is read
/// in the wrong unit: what its OS, file system and every update wrote over a thousand hours is more than that. The
/// usual cause is a drive missing from smartctl's database whose attribute 241 counts GiB or 32 MiB, not LBAs.
const HOURS_IN_USE: u64 = 1000;
const HOST_BELOW_CAPACITY: f64 = 1e-3;

fn tb(bytes: u128) -> String {
    format!("{:.2} TB", bytes as f64 / 1e12)
}

/// Checks the snapshot's readings against each other and against physics; moves the implausible ones into notes.
/// Host writes and reads are judged together: a read counter is its write counter's pair (241/242, data units
/// read/written, gigabytes processed read/write), so when the write counter is shown to be in the wrong unit the
/// read counter goes with it, and each is also judged alone.
pub fn check(snapshot: &mut HealthSnapshot) {
    let writes_before = snapshot.host_written_bytes;
    host_writes(snapshot);
    if writes_before.is_some()
        && snapshot.host_written_bytes.is_none()
        && let Some(read) = snapshot.host_read_bytes.take()
    {
        snapshot.notes.push(format!(
            "host reads of {} are counted like the host writes found implausible above (the counters are a pair); \
             not used",
            bytes_text(read)
        ));
    }
    host_reads(snapshot);
    wear(snapshot);
}

/// Host writes faster than the interface, beside NAND writes that contradict them, or too few for a drive in use.
fn host_writes(snapshot: &mut HealthSnapshot) {
    if let (Some(host), Some(hours)) = (snapshot.host_written_bytes, snapshot.power_on_hours) {
        let limit = hours as f64 * 3600.0 * interface_limit_bytes_per_s(snapshot.identity.protocol);
        if host as f64 > limit && hours > 0 {
            snapshot.notes.push(format!(
                "implausible: host writes of {} in {hours} power-on hours exceed what the interface can carry \
                 ({}); not used",
                tb(host),
                tb(limit as u128)
            ));
            snapshot.host_written_bytes = None;
        }
    }
    if let (Some(host), Some(nand)) = (snapshot.host_written_bytes, snapshot.nand_written_bytes) {
        if (nand as f64) < host as f64 * NAND_BELOW_HOST {
            snapshot.notes.push(format!(
                "implausible: NAND writes of {} ({}) are below host writes of {}; NAND writes not used",
                tb(nand),
                snapshot.nand_written_source,
                tb(host)
            ));
            snapshot.nand_written_bytes = None;
        } else if nand as f64 > host as f64 * NAND_ABOVE_HOST && snapshot.identity.protocol == Protocol::Nvme
        {
            // NVMe's host counter is the standard's, in fixed units: it is the NAND figure (a vendor log read by
            // nvme-cli) that cannot be trusted.
            snapshot.notes.push(format!(
                "implausible: NAND writes of {} ({}) beside host writes of {}; NAND writes not used",
                tb(nand),
                snapshot.nand_written_source,
                tb(host)
            ));
            snapshot.nand_written_bytes = None;
        } else if nand as f64 > host as f64 * NAND_ABOVE_HOST {
            snapshot.notes.push(format!(
                "implausible: host writes of {} beside NAND writes of {} ({}); the host counter is likely in \
                 another unit; host writes not used",
                tb(host),
                tb(nand),
                snapshot.nand_written_source
            ));
            snapshot.host_written_bytes = None;
        }
    }
    // After the NAND comparison, whose note is the more telling where a NAND counter exists.
    if let (Some(host), Some(hours), Some(capacity), Protocol::Ata) = (
        snapshot.host_written_bytes,
        snapshot.power_on_hours,
        snapshot.identity.capacity_bytes,
        snapshot.identity.protocol,
    ) && hours >= HOURS_IN_USE
        && (host as f64) < capacity as f64 * HOST_BELOW_CAPACITY
    {
        snapshot.notes.push(format!(
            "implausible: host writes of {:.2} MB after {hours} power-on hours are under a thousandth of the \
             drive's {:.2} TB; the counter is likely in a larger unit than it was read in (a drive missing from \
             smartctl's database may count attribute 241 in GiB or 32 MiB); host writes not used",
            host as f64 / 1e6,
            capacity as f64 / 1e12
        ));
        snapshot.host_written_bytes = None;
    }
}

/// Host reads faster than the interface can carry, or too few for a drive in use (its file system, its OS and
/// every boot read more than a thousandth of it in a thousand hours).
fn host_reads(snapshot: &mut HealthSnapshot) {
    let (Some(read), Some(hours)) = (snapshot.host_read_bytes, snapshot.power_on_hours) else {
        return;
    };
    let limit = hours as f64 * 3600.0 * interface_limit_bytes_per_s(snapshot.identity.protocol);
    if hours > 0 && read as f64 > limit {
        snapshot.notes.push(format!(
            "implausible: host reads of {} in {hours} power-on hours exceed what the interface can carry ({}); \
             not used",
            tb(read),
            tb(limit as u128)
        ));
        snapshot.host_read_bytes = None;
    } else if let (Some(capacity), Protocol::Ata) =
        (snapshot.identity.capacity_bytes, snapshot.identity.protocol)
        && hours >= HOURS_IN_USE
        && (read as f64) < capacity as f64 * HOST_BELOW_CAPACITY
    {
        snapshot.notes.push(format!(
            "implausible: host reads of {} after {hours} power-on hours are under a thousandth of the drive's {:.2} \
             TB; the counter is likely in a larger unit than it was read in; host reads not used",
            bytes_text(read),
            capacity as f64 / 1e12
        ));
        snapshot.host_read_bytes = None;
    }
}

fn bytes_text(bytes: u128) -> String {
    if bytes >= 1_000_000_000_000 {
        tb(bytes)
    } else {
        format!("{:.2} MB", bytes as f64 / 1e6)
    }
}

/// More erase cycles than any NAND is rated for (SLC is rated about 100,000): a counter of something else.
const ERASE_CYCLES_MAX: f64 = 200_000.0;

/// A wear figure outside what any drive reports.
fn wear(snapshot: &mut HealthSnapshot) {
    if let Some(erases) = snapshot.erase_count_mean
        && !(0.0..=ERASE_CYCLES_MAX).contains(&erases)
    {
        snapshot.notes.push(format!(
            "implausible: a mean erase count of {erases:.0}, more than any NAND is rated for; not used"
        ));
        snapshot.erase_count_mean = None;
    }
    if let Some(used) = snapshot.wear_used_percent
        && !(0.0..=255.0).contains(&used)
    {
        snapshot.notes.push(format!(
            "implausible: {used}% of endurance used ({}); not used",
            snapshot.wear_source
        ));
        snapshot.wear_used_percent = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ssdlab_core::schema::health::DriveIdentity;

    fn snapshot(host: u128, nand: Option<u128>, hours: u64) -> HealthSnapshot {
        let identity = DriveIdentity {
            model: "test".into(),
            serial: "s".into(),
            firmware: None,
            capacity_bytes: Some(4_000_000_000_000),
            protocol: Protocol::Ata,
            source: "t".into(),
        };
        HealthSnapshot {
            power_on_hours: Some(hours),
            host_written_bytes: Some(host),
            nand_written_bytes: nand,
            nand_written_source: "attribute 233".into(),
            ..HealthSnapshot::unread(identity, 0)
        }
    }

    #[test]
    fn a_host_counter_in_the_wrong_unit_is_noted_and_dropped() {
        // The WD SA500 read with the default names: 89 MB of host writes beside 236 TB of NAND writes.
        let mut s = snapshot(89_000_000, Some(236_000_000_000_000), 8244);
        check(&mut s);
        assert_eq!(s.host_written_bytes, None);
        assert!(
            s.notes[0].contains("host counter is likely in another unit"),
            "{:?}",
            s.notes
        );
    }

    #[test]
    fn writes_faster_than_sata_and_nand_below_host_are_noted() {
        let mut s = snapshot(10_000_000_000_000_000, None, 10);
        check(&mut s);
        assert_eq!(s.host_written_bytes, None, "10 PB in 10 hours over SATA");
        let mut s = snapshot(100_000_000_000_000, Some(30_000_000_000_000), 10_000);
        check(&mut s);
        assert_eq!(s.nand_written_bytes, None);
        assert!(s.notes[0].contains("below host writes"), "{:?}", s.notes);
        let mut fine = snapshot(100_000_000_000_000, Some(150_000_000_000_000), 10_000);
        check(&mut fine);
        assert!(fine.notes.is_empty() && fine.host_written_bytes.is_some());
        // The SK hynix SE5110 behind a Dell controller (a real output, tests/fixtures/real): 24,765 of its
        // attribute 241 read as LBAs are 12.68 MB after 12,441 hours on 1.92 TB.
        let mut tiny = snapshot(12_679_680, None, 12_441);
        tiny.identity.capacity_bytes = Some(1_920_383_410_176);
        check(&mut tiny);
        assert_eq!(tiny.host_written_bytes, None);
        assert!(tiny.notes[0].contains("under a thousandth"), "{:?}", tiny.notes);
        // A new drive may have written little: under a thousand hours nothing is said.
        let mut new = snapshot(12_679_680, None, 200);
        check(&mut new);
        assert!(new.notes.is_empty() && new.host_written_bytes.is_some());
        // A compressing controller (SandForce) writes less NAND than host data: 0.6 is real, not implausible.
        let mut compressing = snapshot(100_000_000_000_000, Some(60_000_000_000_000), 10_000);
        check(&mut compressing);
        assert!(compressing.notes.is_empty() && compressing.nand_written_bytes.is_some());
    }
}
