//! Drive profiles from public specifications, and the geometry and timing they imply.
//!
//! A [`Profile`] is the drive as its datasheet and reviews describe it (raw NAND, user capacity, dies, SLC
//! cache, NAND timings, link and controller limits, retention behaviour). [`Geometry`] is what the simulator
//! builds from it at a given scale: blocks per die, SLC blocks, logical units. Scaling divides capacities by N
//! and keeps every ratio (over-provisioning, SLC share, units per block, dies), so a 1/64 drive behaves like
//! the full one with 64 times less data.

use serde::{Deserialize, Serialize};

use crate::retention::ReadRetry;

/// The mapping unit.
pub const UNIT_BYTES: u64 = 4096;

/// How a NAND cell is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CellMode {
    Slc,
    Mlc,
    Tlc,
}

/// Array timings of one cell mode, per die operation (all planes at once).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NandTiming {
    pub read_ns: u64,
    pub program_ns: u64,
    pub erase_ns: u64,
}

/// A drive as specified.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub name: &'static str,
    pub description: &'static str,
    pub raw_nand_bytes: u64,
    pub user_bytes: u64,
    pub dies: u32,
    pub channels: u32,
    pub cell: CellMode,
    /// Bytes one die programs or reads at once (page size x planes).
    pub program_bytes: u32,
    /// Mapping units per erase block in the native cell mode.
    pub units_per_block: u32,
    pub native: NandTiming,
    pub slc: NandTiming,
    /// SLC write cache (TurboWrite) size in user bytes; 0 for none.
    pub slc_cache_bytes: u64,
    /// NAND channel transfer rate, bytes per second.
    pub channel_bytes_per_s: f64,
    /// Host link rate (SATA 6 Gb/s is about 550 MB/s), bytes per second.
    pub link_bytes_per_s: f64,
    /// Controller time per command; its inverse caps IOPS (the datasheet's 4K QD32 figures).
    pub controller_read_ns: u64,
    pub controller_write_ns: u64,
    /// Firmware time per 4 KiB unit of a read command before its NAND reads start (map lookups, DMA
    /// descriptors). A latency, pipelined across commands: it lengthens a QD1 read, not throughput at depth.
    pub read_unit_latency_ns: u64,
    /// Fixed latency added to every write acknowledgement (firmware path), not a throughput limit.
    pub write_latency_ns: u64,
    /// DRAM write buffer, in mapping units.
    pub write_buffer_units: u32,
    /// The controller persists its mapping table's changes every this many write commands (a map journal page:
    /// each command's changes are contiguous)...
    pub map_journal_every_commands: u32,
    /// ... which holds it, and the write that filled the journal, this long: the occasional QD1 write that takes
    /// ten times the others (seed 001: 43.5 us average, 0.75 ms maximum).
    pub map_journal_ns: u64,
    /// The controller's path into native (TLC/MLC) programs, when it is slower than the dies together: the 840
    /// EVO 500 GB and up write about 420 MB/s once TurboWrite is full although their 32-64 dies could program
    /// more (None: the dies are the limit, as on the 120 and 250 GB).
    pub native_write_bytes_per_s: Option<f64>,
    /// Controller work per unit garbage collection moves (the ECC decode and re-encode, the map update), during
    /// which the die waits: calibrated so the steady state of random writes matches the reviews' once GC
    /// interleaves with host writes.
    pub gc_unit_overhead_ns: u64,
    pub reserve_blocks_per_die: u32,
    /// Read retries of aged data (None: data reads at full speed at any age).
    pub retention: Option<ReadRetry>,
    /// What the datasheet promises, for `sim info` and shape checks.
    pub spec_random_write_iops: u32,
    pub spec_random_read_iops: u32,
    pub spec_seq_read_bytes_per_s: f64,
    pub spec_seq_write_bytes_per_s: f64,
    /// Rated program/erase cycles of the native NAND (TLC about 1,000, MLC about 3,000, enterprise MLC with
    /// high-endurance firmware far more), which turns mean erase counts into wear for `health`.
    pub rated_pe_cycles: u32,
    /// How the firmware processes TRIM: at once (None), or queued and reclaimed in the background (the 840
    /// EVO), so writes right after a TRIM of dirty space still pay for garbage collection.
    pub deferred_trim: Option<DeferredTrim>,
    /// The share of each die's spare area (its data blocks beyond its share of the logical capacity) the firmware
    /// keeps free by collecting garbage before it must. Client firmware waits for the reserve (0): the longest
    /// peak, then the sharpest drop. Enterprise firmware starts early for consistency (seed 003's introduction:
    /// frequent cleanup gives stable performance, delay gives higher peaks and worse worst cases).
    pub gc_free_target_share: f64,
    /// How much invalid data a die lets build up before it collects, as a multiple of its spare area (0: no
    /// limit). On a full drive the garbage never exceeds the spare area, so a multiple above 1 changes nothing
    /// there; with LBAs the host never writes (extra over-provisioning) it starts collection early, when victims
    /// are still mostly valid (seed 003's mSATA 1 TB with 25% spare: dips from about 300 s that even out by
    /// 800 s), and the steady state keeps that much garbage instead of all the free space.
    pub gc_garbage_limit_spare_multiple: f64,
    /// How the firmware empties its SLC cache into the native array while the host is idle: after a delay, at a
    /// pace that empties the whole cache in a given time (None: at once, as fast as the dies program).
    #[serde(default)]
    pub slc_drain: Option<SlcDrain>,
}

/// The SLC cache's emptying while idle: firmware waits `delay_ns` of quiet, then moves data at
/// `slc_cache_bytes / empty_s` a second at most (the dies' own pace, when slower, still limits it).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SlcDrain {
    pub delay_ns: u64,
    pub empty_s: f64,
}

/// TurboWrite's emptying: AnandTech's 840 EVO review (July 2013, the TurboWrite page) saw the buffer written
/// out "in a matter of 15 - 30 seconds" of idle time. Two seconds of quiet and a pace that empties a full
/// buffer in 20 s more puts a full 250 GB buffer (3 GB, 150 MB/s) in the middle of that range; the same time at
/// every capacity (the buffer scales with the dies that drain it), where the dies allow.
const EVO_SLC_DRAIN: SlcDrain = SlcDrain {
    delay_ns: 2_000_000_000,
    empty_s: 20.0,
};

/// Background TRIM processing: how fast queued TRIMs are reclaimed while the host is idle, and while it is busy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DeferredTrim {
    pub idle_bytes_per_s: f64,
    pub busy_bytes_per_s: f64,
}

const GIB: u64 = 1 << 30;
const GC_OVERHEAD_EVO: u64 = 280_000;
const GB: u64 = 1_000_000_000;

/// Planar 19 nm TLC of 2013 (tR 65 us on average over its page types, tPROG ~1 ms per 2-plane page, tBERS
/// ~3.5 ms) and its SLC mode. The mean tR is fitted to two published figures: the 120 GB's eight dies reach
/// its rated 94K 4 KiB random reads at QD32 within 10% (86K), and a 4 KiB read at QD1 takes 88 us on the
/// drive, about 100 us with a host's submission and completion (Tom's Hardware, 2013: "10,000 IOPS at a queue
/// depth of one" on every capacity).
const TLC_2013: NandTiming = NandTiming {
    read_ns: 65_000,
    program_ns: 940_000,
    erase_ns: 3_500_000,
};
const TLC_2013_SLC: NandTiming = NandTiming {
    read_ns: 25_000,
    program_ns: 250_000,
    erase_ns: 3_500_000,
};
/// 25 nm enterprise MLC (tR ~50 us, tPROG ~1.3 ms per 2-plane page).
const MLC_2012: NandTiming = NandTiming {
    read_ns: 50_000,
    program_ns: 1_300_000,
    erase_ns: 3_000_000,
};
/// 3D TLC of the 2020s.
const TLC_3D: NandTiming = NandTiming {
    read_ns: 60_000,
    program_ns: 700_000,
    erase_ns: 3_500_000,
};
const TLC_3D_SLC: NandTiming = NandTiming {
    read_ns: 20_000,
    program_ns: 150_000,
    erase_ns: 3_500_000,
};

/// The 840 EVO's read retries, calibrated on seed 000's field report (25 x 1 TB drives read with `cat`): the
/// median steps at each age are fitted so that `scan --reader cat` on `sim:840evo-1t` (the median drive over
/// seeds) needs the report's bulk-read hours per 900 GB: 1.11 at 0.9 months, 3.51 at 2, 6.06 at 3, 8.70 at 4
/// and 10.49 at 7. The drives at 5.1 and 6.0 months read faster than that trend (5.85 and 5.23 h): the drive
/// factor's spread, not the curve. The page spread widens from 4 to 7 months so that, as in the report, the
/// median random read stays flat while the quartiles move apart and bulk reads still slow by 20%; past 7
/// months the curve flattens. Random 4 KiB reads keep a p95 of two and a half to three times their median
/// once retries dominate. See docs/sim.md for the fit.
fn evo_retention() -> ReadRetry {
    ReadRetry {
        median_steps: vec![
            (0.5, 0.0),
            (0.9, 0.65),
            (2.0, 6.86),
            (3.0, 12.89),
            (4.0, 18.54),
            (7.0, 17.10),
            (24.0, 17.5),
        ],
        page_sigma: vec![(2.0, 0.42), (4.0, 0.47), (7.0, 0.62), (24.0, 0.7)],
        block_sigma: 0.3,
        drive_sigma: 0.12,
        // A retry step is another array read, the unit's transfer and a decode attempt with shifted references:
        // 65 + 10 + 20 us, the 95 us per step the read-retry curve below was fitted with.
        decode_ns: 20_000,
        // 100 shifted references (9.5 ms), then soft decoding and parity across dies (15 ms more): a 24.5 ms read.
        table_steps: 100,
        recovery_ns: 15_000_000,
    }
}

/// The 840 EVO's TRIM: reclaimed while idle at a rate that restores a 120 GB drive over a couple of hours (a
/// reader's report on seed 002), and only slowly under writes, so seed 002's 60-second sequential write after a
/// TRIM of tortured space runs at 126 MB/s, not the clean 180.
const EVO_DEFERRED_TRIM: DeferredTrim = DeferredTrim {
    idle_bytes_per_s: 16e6,
    busy_bytes_per_s: 190e6,
};

fn evo(
    name: &'static str,
    raw_gib: u64,
    user_gb: u64,
    slc_gb: u64,
    write_iops: u32,
    seq_write_mb: f64,
) -> Profile {
    let dies = (raw_gib / 16) as u32; // 128 Gbit dies
    Profile {
        name,
        description: "Samsung 840 EVO class: 19 nm planar TLC, TurboWrite SLC cache, SATA 6 Gb/s",
        raw_nand_bytes: raw_gib * GIB,
        user_bytes: user_gb * GB,
        dies,
        channels: 8,
        cell: CellMode::Tlc,
        program_bytes: 16 << 10,
        units_per_block: 768, // 3 MiB blocks
        native: TLC_2013,
        slc: TLC_2013_SLC,
        slc_cache_bytes: slc_gb * GB,
        channel_bytes_per_s: 400e6,
        link_bytes_per_s: 550e6,
        controller_read_ns: 1_000_000_000 / 97_000,
        controller_write_ns: 1_000_000_000 / write_iops as u64,
        // Fitted with the read retries: a fresh 128 KiB read at QD1 takes about 524 us, the field report's
        // 1.0 h per 900 GB after its refresh (250 MB/s through cat and the file system).
        read_unit_latency_ns: 5_000,
        write_latency_ns: 21_000,
        write_buffer_units: 1024,
        map_journal_every_commands: 2048,
        map_journal_ns: 600_000,
        native_write_bytes_per_s: (raw_gib >= 512).then_some(420e6),
        gc_unit_overhead_ns: GC_OVERHEAD_EVO,
        reserve_blocks_per_die: 4,
        retention: Some(evo_retention()),
        spec_random_write_iops: write_iops,
        spec_random_read_iops: 97_000,
        spec_seq_read_bytes_per_s: 540e6,
        spec_seq_write_bytes_per_s: seq_write_mb * 1e6,
        rated_pe_cycles: 1000,
        deferred_trim: Some(EVO_DEFERRED_TRIM),
        gc_free_target_share: 0.0,
        gc_garbage_limit_spare_multiple: 0.0,
        slc_drain: Some(EVO_SLC_DRAIN),
    }
}

/// Every built-in profile, family by family.
pub fn profiles() -> Vec<Profile> {
    let mut all = evo_profiles();
    all.extend(enterprise_mlc_profiles());
    all.extend(modern_tlc_profiles());
    all
}

/// The Samsung 840 EVO family: the 2.5" drives by capacity, and the mSATA 1 TB on its later firmware.
fn evo_profiles() -> Vec<Profile> {
    vec![
        evo("840evo-120g", 128, 120, 3, 35_000, 410.0),
        evo("840evo-250g", 256, 250, 3, 66_000, 520.0),
        evo("840evo-500g", 512, 500, 6, 90_000, 520.0),
        evo("840evo-750g", 768, 750, 9, 90_000, 520.0),
        evo("840evo-1t", 1024, 1000, 12, 90_000, 520.0),
        // Seed 003 tested the mSATA 1 TB on a later firmware than the 2.5" drives ("it changed some TurboWrite
        // algorithms"), and it behaved differently with 25% extra spare area: dips from about 300 s that even
        // out by 800 s. A firmware that lets invalid data build up to 1.7 times its spare area, then collects,
        // does exactly that (here 312 s, down to about 900 IOPS, then rising), and changes nothing on a full
        // drive, whose garbage never exceeds its spare area.
        Profile {
            description: "Samsung 840 EVO mSATA class (its later firmware): as 840evo-1t, but garbage collection \
                          starts once invalid data reaches 1.7x the spare area",
            gc_garbage_limit_spare_multiple: 1.7,
            ..evo("840evo-msata-1t", 1024, 1000, 12, 90_000, 520.0)
        },
    ]
}

/// The enterprise MLC family: a 400 GB SATA drive with a large spare area and high-endurance NAND.
fn enterprise_mlc_profiles() -> Vec<Profile> {
    vec![Profile {
        name: "enterprise-mlc-400g",
        description: "Intel S3700 / Micron P400m class: 25 nm MLC with a large spare area (~36%), SATA",
        raw_nand_bytes: 512 * GIB,
        user_bytes: 400 * GB,
        dies: 32,
        channels: 8,
        cell: CellMode::Mlc,
        program_bytes: 16 << 10,
        units_per_block: 1024,
        native: MLC_2012,
        slc: MLC_2012,
        slc_cache_bytes: 0,
        channel_bytes_per_s: 400e6,
        link_bytes_per_s: 550e6,
        controller_read_ns: 1_000_000_000 / 75_000,
        controller_write_ns: 1_000_000_000 / 36_000,
        read_unit_latency_ns: 2_000,
        write_latency_ns: 30_000,
        write_buffer_units: 2048,
        map_journal_every_commands: 4096,
        map_journal_ns: 400_000,
        native_write_bytes_per_s: None,
        gc_unit_overhead_ns: 20_000,
        reserve_blocks_per_die: 4,
        retention: None,
        spec_random_write_iops: 36_000,
        spec_random_read_iops: 75_000,
        spec_seq_read_bytes_per_s: 500e6,
        spec_seq_write_bytes_per_s: 460e6,
        // High-endurance MLC (S3700-like: 10 drive writes a day for 5 years).
        rated_pe_cycles: 30_000,
        deferred_trim: None,
        // Collects from half its spare area on: seed 004's P400m holds its plateau until about 600 s, then
        // drops (620 s here) to a steady state near its datasheet's 26K IOPS (25.3K here, last 400 s).
        gc_free_target_share: 0.5,
        gc_garbage_limit_spare_multiple: 0.0,
        slc_drain: None,
    }]
}

/// The modern 3D TLC family: a generic 2020s NVMe drive with a dynamic SLC cache.
fn modern_tlc_profiles() -> Vec<Profile> {
    vec![Profile {
        name: "modern-tlc-1t",
        description: "Generic 2020s NVMe drive: 3D TLC, dynamic SLC cache, PCIe 4.0 x4",
        raw_nand_bytes: 1024 * GIB,
        user_bytes: 1000 * GB,
        dies: 16,
        channels: 8,
        cell: CellMode::Tlc,
        program_bytes: 64 << 10,
        units_per_block: 6144, // 24 MiB blocks
        native: TLC_3D,
        slc: TLC_3D_SLC,
        slc_cache_bytes: 30 * GB,
        channel_bytes_per_s: 1600e6,
        link_bytes_per_s: 7000e6,
        controller_read_ns: 1_000_000_000 / 1_000_000,
        controller_write_ns: 1_000_000_000 / 800_000,
        read_unit_latency_ns: 500,
        write_latency_ns: 8_000,
        write_buffer_units: 8192,
        map_journal_every_commands: 16384,
        map_journal_ns: 100_000,
        native_write_bytes_per_s: None,
        gc_unit_overhead_ns: 5_000,
        reserve_blocks_per_die: 4,
        retention: None,
        spec_random_write_iops: 800_000,
        spec_random_read_iops: 1_000_000,
        spec_seq_read_bytes_per_s: 7000e6,
        spec_seq_write_bytes_per_s: 5000e6,
        rated_pe_cycles: 3000,
        deferred_trim: None,
        gc_free_target_share: 0.0,
        gc_garbage_limit_spare_multiple: 0.0,
        slc_drain: None,
    }]
}

/// Looks a profile up by name.
pub fn profile(name: &str) -> Option<Profile> {
    profiles().into_iter().find(|p| p.name == name)
}

/// The simulator's geometry for a profile at a scale.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Geometry {
    pub logical_units: u32,
    /// Blocks that can hold data, per die (over-provisioning counts these).
    pub data_blocks_per_die: u32,
    pub reserve_blocks_per_die: u32,
    pub slc_blocks_per_die: u32,
    pub units_per_block: u32,
    pub slc_units_per_block: u32,
    /// Mapping units one page (a program on every plane) holds.
    pub units_per_page: u32,
    pub dies: u32,
    /// Free blocks per die from which garbage collection starts (the profile's free target; 0 for the reserve).
    pub gc_start_free_blocks_per_die: u32,
    /// Invalid units a die lets build up before it collects (0: no limit).
    pub gc_max_garbage_units_per_die: u32,
}

impl Geometry {
    pub fn data_units(&self) -> u64 {
        self.data_blocks_per_die as u64 * self.dies as u64 * self.units_per_block as u64
    }

    /// Over-provisioning, (physical - logical) / logical, physical counting data-holding blocks only.
    pub fn op(&self) -> f64 {
        (self.data_units() as f64 - self.logical_units as f64) / self.logical_units as f64
    }

    /// Spare factor, (physical - logical) / physical.
    pub fn spare_factor(&self) -> f64 {
        (self.data_units() as f64 - self.logical_units as f64) / self.data_units() as f64
    }

    /// Bytes the simulator's maps take: 4 bytes per logical unit (map) and per physical unit (reverse map),
    /// and about 64 bytes per block for its pages' program times (one run when it filled within an hour).
    pub fn map_bytes(&self) -> u64 {
        let blocks = self.dies as u64 * (self.data_blocks_per_die + self.reserve_blocks_per_die + 1) as u64
            + self.dies as u64 * self.slc_blocks_per_die as u64;
        let physical = blocks * self.units_per_block as u64;
        let page_times = if self.units_per_page > 0 { 64 * blocks } else { 0 };
        4 * self.logical_units as u64 + 4 * physical + page_times
    }
}

impl Profile {
    fn cell_bits(&self) -> u64 {
        match self.cell {
            CellMode::Slc => 1,
            CellMode::Mlc => 2,
            CellMode::Tlc => 3,
        }
    }

    /// What one read-retry step costs a die: another array read, the unit's transfer to the controller and a
    /// decode attempt (None when the profile models no retries).
    pub fn retry_step_ns(&self) -> Option<u64> {
        let retry = self.retention.as_ref()?;
        let transfer_ns = (UNIT_BYTES as f64 / self.channel_bytes_per_s * 1e9) as u64;
        Some(self.native.read_ns + transfer_ns + retry.decode_ns)
    }

    /// The geometry at `1/scale` of the capacity, with the user capacity overridden by `op` (over-provisioning
    /// as a fraction) if given.
    pub fn geometry(&self, scale: u32, op: Option<f64>) -> Geometry {
        let scale = scale.max(1) as u64;
        let np = self.units_per_block as u64;
        let block_bytes = np * UNIT_BYTES;
        let raw_blocks_per_die = self.raw_nand_bytes / self.dies as u64 / block_bytes;
        // The SLC cache is carved out of the raw NAND: each SLC block costs a native block.
        let slc_units_per_block = (np / self.cell_bits()).max(1);
        let slc_blocks_full = self
            .slc_cache_bytes
            .div_ceil(slc_units_per_block * UNIT_BYTES * self.dies as u64);
        let data_blocks_full = raw_blocks_per_die - slc_blocks_full - self.reserve_blocks_per_die as u64 - 1;
        let data_blocks_per_die = data_blocks_full.div_ceil(scale).max(4) as u32;
        let slc_blocks_per_die = if self.slc_cache_bytes == 0 {
            0
        } else {
            slc_blocks_full.div_ceil(scale).max(1) as u32
        };
        let data_units = data_blocks_per_die as u64 * self.dies as u64 * np;
        let logical_units = match op {
            Some(op) => (data_units as f64 / (1.0 + op)).floor() as u64,
            None => (self.user_bytes / UNIT_BYTES).div_ceil(scale).min(data_units - 1),
        };
        // A die's spare area: its data-holding units beyond its share of the logical capacity.
        let spare_units_per_die =
            (data_blocks_per_die as u64 * np).saturating_sub(logical_units / self.dies as u64);
        Geometry {
            logical_units: logical_units as u32,
            data_blocks_per_die,
            reserve_blocks_per_die: self.reserve_blocks_per_die,
            slc_blocks_per_die,
            units_per_block: self.units_per_block,
            slc_units_per_block: slc_units_per_block as u32,
            units_per_page: (self.program_bytes as u64 / UNIT_BYTES).max(1) as u32,
            dies: self.dies,
            gc_start_free_blocks_per_die: (self.gc_free_target_share * spare_units_per_die as f64 / np as f64)
                as u32,
            gc_max_garbage_units_per_die: (self.gc_garbage_limit_spare_multiple * spare_units_per_die as f64)
                as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evo_profiles_follow_the_spec_sheet() {
        let evo = profile("840evo-250g").unwrap();
        let spare = 1.0 - evo.user_bytes as f64 / evo.raw_nand_bytes as f64;
        assert!((spare - 0.0905).abs() < 0.001, "spare factor {spare}");
        let small = profile("840evo-120g").unwrap();
        let spare = 1.0 - small.user_bytes as f64 / small.raw_nand_bytes as f64;
        assert!((spare - 0.127).abs() < 0.001, "spare factor {spare}");
        assert_eq!(profiles().len(), 8);
    }

    #[test]
    fn scaling_keeps_the_ratios() {
        let evo = profile("840evo-250g").unwrap();
        let full = evo.geometry(1, None);
        let small = evo.geometry(64, None);
        assert!(
            (full.op() - small.op()).abs() < 0.01,
            "OP {} vs {}",
            full.op(),
            small.op()
        );
        assert!(
            full.op() > 0.03 && full.op() < 0.09,
            "TurboWrite is carved from the spare area: OP {}",
            full.op()
        );
        let op25 = evo.geometry(64, Some(0.25));
        assert!((op25.op() - 0.25).abs() < 0.001);
        assert!(full.map_bytes() < 600 << 20);
    }
}
