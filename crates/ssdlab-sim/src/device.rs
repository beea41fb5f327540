//! The virtual SSD as a [`Device`]: the FTL plus a timing model, in virtual time.
//!
//! Timing is computed by reservation when an operation is submitted: the controller, the host link, each NAND
//! channel and each die is a resource with a "free at" time, and an operation's completion time follows from
//! the resources it needs. Writes are acknowledged once their data sits in the DRAM write buffer; the buffer
//! drains into NAND programs (SLC while the TurboWrite cache has room, else native mode), and when it is full a
//! write waits for a program to finish. Garbage collection runs in the foreground on the die that needs a free
//! block, so it delays that die's programs and, through the buffer, the host. Reads cost a page read per die
//! page touched (longer for old data: read retries), a channel transfer and the link transfer.
//!
//! Completions wait in a queue ordered by time; reaping advances the clock to the next completion. Time passes
//! with nothing in flight only through [`Device::wait_until`], and that idle time drains the SLC cache and runs
//! the firmware refresh, as a drive does when the host is quiet.
//!
//! The device stores no data: reads return zeroes. It never reads the wall clock.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use ssdlab_core::device::{
    ClockKind, Completion, Device, DeviceError, DeviceInfo, DeviceResult, Extent, Io, Op, TargetKind,
};
use ssdlab_core::schema::DeviceCounters;
use ssdlab_core::units::MONTH_S;

use crate::ftl::{Ftl, FtlConfig, GcWork};
use crate::profile::{CellMode, Geometry, Profile, UNIT_BYTES};
use crate::retention::{Variation, standard_normal};
use crate::spec::SimSpec;
use ssdlab_core::rng::splitmix64;

/// A pending completion: when, and for which slot.
type Due = Reverse<(u64, u32)>;

pub struct SimDevice {
    info: DeviceInfo,
    profile: Profile,
    geometry: Geometry,
    /// This drive's seeded variation of read retries (None when the profile has none).
    variation: Option<Variation>,
    ftl: Ftl,
    now_ns: u64,
    controller_free_ns: u64,
    link_free_ns: u64,
    /// When the controller's native write path is free (profiles that have one: [`Profile::native_write_bytes_per_s`]).
    native_path_free_ns: u64,
    channel_free_ns: Vec<u64>,
    die_free_ns: Vec<u64>,
    /// Garbage collection each die owes: relocation the FTL has done that the die's time has not yet paid.
    /// A host program pays a slice of it first, so relocation interleaves with host writes instead of stopping
    /// the die for a whole block's worth; idle time pays the rest.
    gc_debt_ns: Vec<u64>,
    /// When each die last took on GC debt: idle time before that cannot pay it.
    gc_debt_since_ns: Vec<u64>,
    /// Native programs each die has made: which TLC/MLC page type (lower, middle, upper) the next one is.
    native_programs: Vec<u32>,
    /// This unit's dies: each programs and erases a little faster or slower than the datasheet (seeded), as
    /// units of one model differ.
    die_speed: Vec<f64>,
    /// Per die, the page a read request has already loaded (scratch, reset per request).
    page_in_register: Vec<u32>,
    /// Per die, the earliest a paced SLC drain may start its next block while idle (see `Profile::slc_drain`).
    drain_next_ns: Vec<u64>,
    /// Units waiting on each die to fill a program, per pool (0 native, 1 SLC), and when the last arrived.
    pending_units: Vec<[u32; 2]>,
    pending_ready_ns: Vec<[u64; 2]>,
    /// Programs in flight: (completion time, units) — the write buffer's contents on their way to NAND.
    programs: BinaryHeap<Reverse<(u64, u32)>>,
    buffered_units: u32,
    buffer_capacity_units: u32,
    /// Write commands since the controller last persisted its map journal.
    commands_since_map_journal: u32,
    next_die: u32,
    /// Units already placed on `next_die`'s current page stripe.
    units_on_die: u32,
    /// The most valid data a die may hold before steering passes it over: its share of the logical capacity plus
    /// a quarter of its spare area. Garbage collection moves data only within a die, so a die given more than
    /// its share would fill with valid data that nothing could free.
    steer_limit_units: u64,
    refresh_after_ns: Option<u64>,
    last_refresh_scan_ns: u64,
    host_bytes_read: u64,
    refreshed_units: u64,
    /// Deferred TRIM processing: up to when it has run, and the fraction of a unit it has earned.
    trim_reclaimed_to_ns: u64,
    trim_credit_units: f64,
    /// Slot buffers and the slot table.
    buffers: Vec<Vec<u8>>,
    /// The data written, when the drive keeps it ([`SimDevice::keep_data`]); otherwise reads return zeroes.
    store: Option<crate::store::DataStore>,
    slots: Vec<Option<Completion>>,
    due: BinaryHeap<Due>,
    in_flight: usize,
}

const NATIVE: usize = 0;
const SLC: usize = 1;

/// The oldest data a virtual drive can hold: page program times are 16-bit steps of about 73 minutes (nine
/// years), and ages up to eight years leave room for the runs that follow.
pub const MAX_AGE_NS: u64 = 8 * 365 * 86_400 * 1_000_000_000;
const YEAR_S: f64 = 365.0 * 86_400.0;

/// How long the host must be quiet before background work (SLC drain, refresh) starts.
pub const IDLE_DELAY_NS: u64 = 50_000_000;

/// A host program pays at least this share of the garbage collection its die owes (1/64), so a block's
/// relocation (up to about 2 s of die time on TLC) spreads over dozens of programs: write latency tails of tens of
/// milliseconds, as drives pace foreground GC, not seconds. The die's total time is unchanged.
const GC_SLICES: u64 = 64;
/// ... and at least this much while it owes that much, so small debts clear promptly.
const GC_MIN_SLICE_NS: u64 = 100_000;

/// The spread of die speeds between units of one model (1 sigma, log-normal): a few percent, as program and
/// erase times vary with process and position on the wafer.
const DIE_SPEED_SIGMA: f64 = 0.05;
const DIE_SPEED_STREAM: u64 = 0xd1e5_9eed;

/// The largest share of a die's data blocks that leave the factory bad (uniform from none to this, per die).
const MAX_BAD_BLOCK_SHARE: f64 = 0.01;
const BAD_BLOCK_STREAM: u64 = 0xbad_b10c;

/// Read and program time of each page type relative to the array's mean (TLC: lower, middle, upper pages; MLC:
/// lower, upper). The bits of a cell's upper pages need more sensing levels and more program pulses; the mean
/// of each list is 1, so throughput over many pages is the datasheet's.
const TLC_READ_FACTORS: [f64; 3] = [0.55, 1.0, 1.45];
const TLC_PROGRAM_FACTORS: [f64; 3] = [0.5, 0.9, 1.6];
const MLC_READ_FACTORS: [f64; 2] = [0.75, 1.25];
const MLC_PROGRAM_FACTORS: [f64; 2] = [0.5, 1.5];

/// The FTL's configuration for a geometry: its blocks, units and pages per die, and the spec's GC policy.
fn ftl_config(geometry: &Geometry, spec: &SimSpec) -> FtlConfig {
    FtlConfig {
        logical_units: geometry.logical_units,
        dies: geometry.dies,
        blocks_per_die: geometry.data_blocks_per_die + geometry.reserve_blocks_per_die + 1,
        reserve_blocks_per_die: geometry.reserve_blocks_per_die,
        units_per_block: geometry.units_per_block,
        policy: spec.policy,
        fingerprints: false,
        slc_blocks_per_die: geometry.slc_blocks_per_die,
        slc_units_per_block: geometry.slc_units_per_block,
        units_per_page: geometry.units_per_page,
        gc_start_free_blocks_per_die: geometry.gc_start_free_blocks_per_die,
        gc_max_garbage_units_per_die: geometry.gc_max_garbage_units_per_die,
    }
}

/// What the virtual drive says it is: the profile at its scale with its over-provisioning, its capacity and
/// limits, in virtual time, storing no data.
fn device_info(target: &str, profile: &Profile, spec: &SimSpec, geometry: &Geometry) -> DeviceInfo {
    let capacity_bytes = geometry.logical_units as u64 * UNIT_BYTES;
    DeviceInfo {
        target: target.to_string(),
        kind: TargetKind::Sim,
        model: format!(
            "virtual {} ({}), scale 1/{}, OP {:.1}% (spare factor {:.1}%)",
            profile.name,
            profile.description,
            spec.scale,
            100.0 * geometry.op(),
            100.0 * geometry.spare_factor()
        ),
        capacity_bytes,
        logical_block_bytes: 512,
        physical_block_bytes: UNIT_BYTES as u32,
        memory_align_bytes: 512,
        max_transfer_bytes: 32 << 20,
        discard_supported: true,
        discard_max_bytes: capacity_bytes,
        rotational: false,
        clock: ClockKind::Virtual,
        backend: "simulator (virtual time)".into(),
        direct_io: true,
        notes: vec!["the virtual drive stores no data: reads return zeroes".into()],
        drive: Default::default(),
    }
}

/// The most valid data a die may hold before steering passes it over, in units: its share of the logical
/// capacity plus a quarter of its spare area.
fn steer_limit_units(geometry: &Geometry) -> u64 {
    let dies = geometry.dies as usize;
    let share = u64::from(geometry.logical_units) / dies as u64;
    let capacity = u64::from(geometry.data_blocks_per_die) * u64::from(geometry.units_per_block);
    share + capacity.saturating_sub(share) / 4
}

impl SimDevice {
    /// Builds the device a `sim:` target describes; `target` is the string the user wrote.
    pub fn new(target: &str, spec: &SimSpec) -> Result<Self, DeviceError> {
        let profile = spec.profile.clone();
        let geometry = profile.geometry(spec.scale, spec.op);
        let config = ftl_config(&geometry, spec);
        config
            .validate()
            .map_err(|e| DeviceError::Invalid(format!("{target}: {e}")))?;
        let info = device_info(target, &profile, spec, &geometry);
        let mut device = Self::fresh(info, profile, geometry, Ftl::new(config), spec);
        device.retire_factory_bad_blocks(spec.seed);
        if spec.fill > 0.0 {
            device.prefill(spec.fill);
        }
        if spec.age_ns > 0 {
            let until = device.now_ns + spec.age_ns;
            device.wait_until(until);
        }
        Ok(device)
    }

    /// The device as it leaves the factory, before its bad blocks are retired: every resource free at time 0,
    /// nothing buffered, queued or in flight, and its dies' seeded speeds.
    fn fresh(info: DeviceInfo, profile: Profile, geometry: Geometry, ftl: Ftl, spec: &SimSpec) -> Self {
        let units_per_program = (profile.program_bytes as u64 / UNIT_BYTES) as u32;
        let dies = geometry.dies as usize;
        SimDevice {
            info,
            buffer_capacity_units: profile
                .write_buffer_units
                .max(4 * geometry.dies * units_per_program),
            variation: profile
                .retention
                .as_ref()
                .map(|retry| Variation::new(retry, spec.seed)),
            profile,
            geometry,
            ftl,
            now_ns: 0,
            controller_free_ns: 0,
            link_free_ns: 0,
            native_path_free_ns: 0,
            channel_free_ns: vec![0; spec.profile.channels as usize],
            die_free_ns: vec![0; dies],
            gc_debt_ns: vec![0; dies],
            gc_debt_since_ns: vec![0; dies],
            native_programs: vec![0; dies],
            die_speed: (0..dies as u64)
                .map(|die| (DIE_SPEED_SIGMA * standard_normal(spec.seed, DIE_SPEED_STREAM, die)).exp())
                .collect(),
            page_in_register: vec![u32::MAX; dies],
            drain_next_ns: vec![0; dies],
            pending_units: vec![[0; 2]; dies],
            pending_ready_ns: vec![[0; 2]; dies],
            programs: BinaryHeap::new(),
            buffered_units: 0,
            commands_since_map_journal: 0,
            next_die: 0,
            units_on_die: 0,
            steer_limit_units: steer_limit_units(&geometry),
            refresh_after_ns: spec.refresh_after_ns,
            last_refresh_scan_ns: 0,
            host_bytes_read: 0,
            refreshed_units: 0,
            trim_reclaimed_to_ns: 0,
            trim_credit_units: 0.0,
            buffers: Vec::new(),
            store: None,
            slots: Vec::new(),
            due: BinaryHeap::new(),
            in_flight: 0,
        }
    }

    /// Takes this unit's factory bad blocks out of service: on each die a seeded share of its data blocks, up to
    /// [`MAX_BAD_BLOCK_SHARE`] (NAND datasheets allow about 2%), and never more than half the die's spare area.
    /// Units of one model then differ in spare area, and so in write amplification and steady state.
    fn retire_factory_bad_blocks(&mut self, seed: u64) {
        let g = &self.geometry;
        let spare_blocks_per_die =
            (g.data_units() - g.logical_units as u64) / g.units_per_block as u64 / g.dies as u64;
        let most =
            ((g.data_blocks_per_die as f64 * MAX_BAD_BLOCK_SHARE) as u64).min(spare_blocks_per_die / 2);
        for die in 0..g.dies {
            let uniform =
                splitmix64(seed ^ splitmix64(BAD_BLOCK_STREAM ^ u64::from(die))) as f64 / u64::MAX as f64;
            let count = (uniform * (most + 1) as f64) as u32;
            self.ftl.retire_free_blocks(die, count.min(most as u32));
        }
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    /// SMART-like counters, cumulative.
    pub fn device_counters(&self) -> DeviceCounters {
        let c = self.ftl.counters();
        let (min, mean, max) = self.ftl.erase_counts();
        DeviceCounters {
            host_bytes_written: c.host_units_written * UNIT_BYTES,
            nand_bytes_written: c.nand_units_written * UNIT_BYTES,
            write_amplification: c.write_amplification(),
            erase_count_min: min,
            erase_count_mean: mean,
            erase_count_max: max,
            slc_hit_bytes: c.slc_units_written * UNIT_BYTES,
            gc_relocated_bytes: c.relocated_units * UNIT_BYTES,
            refreshed_bytes: self.refreshed_units * UNIT_BYTES,
        }
    }

    /// Host bytes read so far.
    pub fn host_bytes_read(&self) -> u64 {
        self.host_bytes_read
    }

    /// Writes the first `fraction` of the logical units sequentially, instantly (a factory-filled drive),
    /// straight into the native pool, as of the current time.
    pub fn prefill(&mut self, fraction: f64) {
        let units = (self.geometry.logical_units as f64 * fraction) as u32;
        self.ftl.set_time(self.now_ns);
        for logical in 0..units {
            let die = self.next_die_in_turn();
            self.ftl.write_to(logical, 0, die);
        }
    }

    /// Lays out a data set of files of given sizes and ages, as if each had been written `age` before the end
    /// and left alone since: files are placed one after another from LBA 0 and written oldest first, instantly,
    /// each at its own virtual time; then the clock moves to the end (the drive idle, background work allowed).
    /// Returns each file's byte range, in the order given.
    pub fn lay_out_dataset(&mut self, files: &[(u64, u64)]) -> Result<Vec<(u64, u64)>, DeviceError> {
        let total: u64 = files.iter().map(|f| f.0.next_multiple_of(UNIT_BYTES)).sum();
        if total > self.info.capacity_bytes {
            return Err(DeviceError::Invalid(format!(
                "the data set needs {total} bytes but the virtual drive holds {}",
                self.info.capacity_bytes
            )));
        }
        let mut ranges = Vec::with_capacity(files.len());
        let mut offset = 0;
        for &(bytes, _) in files {
            ranges.push((offset, bytes));
            offset += bytes.next_multiple_of(UNIT_BYTES);
        }
        let start = self.now_ns;
        let oldest = files.iter().map(|f| f.1).max().unwrap_or(0);
        if oldest > MAX_AGE_NS {
            return Err(DeviceError::Invalid(format!(
                "data {:.1} years old: the virtual drive keeps page program times for {} years",
                oldest as f64 / 1e9 / YEAR_S,
                MAX_AGE_NS as f64 / 1e9 / YEAR_S
            )));
        }
        let mut order: Vec<usize> = (0..files.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(files[i].1));
        for i in order {
            let written_at = start + (oldest - files[i].1);
            self.now_ns = self.now_ns.max(written_at);
            self.ftl.set_time(self.now_ns);
            let (first, len) = ranges[i];
            for logical in self.unit_range(first, len) {
                let die = self.next_die_in_turn();
                self.ftl.write_to(logical, 0, die);
            }
        }
        self.wait_until(start + oldest + 1_000_000_000);
        Ok(ranges)
    }

    /// Lets the drive sit powered and idle for `ns` (the API behind `?age=`): background work runs, then the
    /// clock moves on.
    pub fn age(&mut self, ns: u64) {
        let until = self.now_ns + ns;
        self.wait_until(until);
    }

    /// The die the next unit goes to in the stripe's fixed turn, without steering: for writes laid down
    /// instantly (a factory fill, a data set's layout), where no die is busy and none owes GC, so steering would
    /// choose the same dies at the cost of three scans of every die per page.
    fn next_die_in_turn(&mut self) -> u32 {
        let die = self.next_die;
        self.units_on_die += 1;
        if self.units_on_die == self.units_per_program() {
            self.units_on_die = 0;
            self.next_die = (self.next_die + 1) % self.geometry.dies;
        }
        die
    }

    /// The die the next written unit goes to, at `at_ns`. Units are striped over the dies a page at a time: a die
    /// takes a whole page of consecutive units (4 KiB units, 16 KiB pages on the 840 EVO), so a sequential read
    /// finds consecutive data in one page read per die. The stripe turns in a fixed order, except that a new page
    /// skips a die that would start it more than one program later than the earliest die (counting the slice of
    /// garbage collection each owes), as controllers steer their write stream around a die that is collecting. A
    /// strict rotation made every write wait for that die once the buffer filled behind it (p99.9 over 100 ms at
    /// the 250 GB's steady state); steering by the earliest die alone scattered a file's consecutive pages onto
    /// one die whenever reads kept the others busy, and slowed its sequential reads.
    fn next_die(&mut self, at_ns: u64) -> u32 {
        if self.units_on_die == 0 {
            let dies = self.geometry.dies;
            for die in 0..dies {
                self.work_off_debt(die, at_ns);
            }
            let start = self.next_die;
            let starts_ns = |device: &Self, die: u32| {
                let d = die as usize;
                device.die_free_ns[d].max(at_ns) + device.gc_debt_ns[d] / GC_SLICES
            };
            let eligible = |device: &Self, die: u32| device.ftl.valid_units(die) < device.steer_limit_units;
            let earliest = (0..dies)
                .filter(|&die| eligible(self, die))
                .map(|die| starts_ns(self, die))
                .min()
                .unwrap_or(at_ns);
            let slack = self.profile.native.program_ns;
            self.next_die = (0..dies)
                .map(|i| (start + i) % dies)
                .find(|&die| eligible(self, die) && starts_ns(self, die) <= earliest + slack)
                .unwrap_or(start);
        }
        self.next_die_in_turn()
    }

    fn channel_of(&self, die: u32) -> usize {
        die as usize % self.channel_free_ns.len()
    }

    fn transfer_ns(bytes: u64, bytes_per_s: f64) -> u64 {
        (bytes as f64 / bytes_per_s * 1e9) as u64
    }

    /// Mapping units one program (or page read) covers: a page on every plane, in either mode.
    fn units_per_program(&self) -> u32 {
        self.geometry.units_per_page
    }

    /// The read factor of native page `page` (a physical page index; blocks hold whole page-type cycles).
    fn read_factor(&self, page: u32) -> f64 {
        match self.profile.cell {
            CellMode::Tlc => TLC_READ_FACTORS[page as usize % 3],
            CellMode::Mlc => MLC_READ_FACTORS[page as usize % 2],
            CellMode::Slc => 1.0,
        }
    }

    /// The time of die `die`'s next native program: its page type's share of the array's time, at this die's
    /// speed.
    fn native_program_ns(&mut self, die: u32) -> u64 {
        let n = self.native_programs[die as usize];
        self.native_programs[die as usize] = n.wrapping_add(1);
        let factor = match self.profile.cell {
            CellMode::Tlc => TLC_PROGRAM_FACTORS[n as usize % 3],
            CellMode::Mlc => MLC_PROGRAM_FACTORS[n as usize % 2],
            CellMode::Slc => 1.0,
        };
        (self.profile.native.program_ns as f64 * factor * self.die_speed[die as usize]) as u64
    }

    /// Lets die `die` work off its garbage-collection debt in the time it sat idle before `at_ns`: firmware
    /// collects on a die whenever it has nothing else to do, so a die the write stream steers around still
    /// catches up.
    fn work_off_debt(&mut self, die: u32, at_ns: u64) {
        let d = die as usize;
        if self.gc_debt_ns[d] == 0 {
            return;
        }
        // Only idle time after the debt arose can pay it (the die's free time may predate it).
        let from = self.die_free_ns[d].max(self.gc_debt_since_ns[d]);
        let pay = self.gc_debt_ns[d].min(at_ns.saturating_sub(from));
        if pay > 0 {
            self.gc_debt_ns[d] -= pay;
            self.die_free_ns[d] = from + pay;
        }
    }

    /// Takes from die `die`'s garbage-collection debt the slice a host program pays before it starts.
    fn gc_slice(&mut self, die: u32) -> u64 {
        let debt = &mut self.gc_debt_ns[die as usize];
        let pay = (*debt / GC_SLICES).max(GC_MIN_SLICE_NS).min(*debt);
        *debt -= pay;
        pay
    }

    /// Charges garbage collection (or an SLC drain) to a die: page reads of the moved units in `from_slc` mode,
    /// native programs and erases. Moved data goes through the controller, not copyback inside the die: TLC
    /// drives check and correct it with ECC on the way (copyback would carry its bit errors into the new page),
    /// so each moved unit crosses the channel twice while the die waits for it. Work in the `foreground` (a host
    /// write needed the free block) becomes the die's debt, paid a slice per host program; background work
    /// (idle drains and refresh) takes the die at once.
    fn charge_moves(&mut self, die: u32, work: GcWork, from_slc: bool, at_ns: u64, foreground: bool) {
        if work.relocated_units == 0 && work.erased_blocks == 0 {
            return;
        }
        let per_program = self.units_per_program() as u64;
        let reads = work.read_pages as u64;
        let read_ns = if from_slc {
            self.profile.slc.read_ns
        } else {
            self.profile.native.read_ns
        };
        let programs = (work.relocated_units as u64).div_ceil(per_program);
        let transfer_ns = Self::transfer_ns(
            2 * work.relocated_units as u64 * UNIT_BYTES,
            self.profile.channel_bytes_per_s,
        );
        let speed = self.die_speed[die as usize];
        // The controller's per-unit work is calibrated on foreground GC (the steady state); idle drains and
        // refresh keep their earlier cost.
        let overhead_ns = if foreground {
            work.relocated_units as u64 * self.profile.gc_unit_overhead_ns
        } else {
            0
        };
        let busy = reads * read_ns
            + transfer_ns
            + overhead_ns
            + (programs as f64 * self.profile.native.program_ns as f64 * speed) as u64
            + (work.erased_blocks as f64 * self.profile.native.erase_ns as f64 * speed) as u64;
        let channel = self.channel_of(die);
        if foreground {
            self.gc_debt_ns[die as usize] += busy;
            let since = &mut self.gc_debt_since_ns[die as usize];
            *since = (*since).max(at_ns);
            self.channel_free_ns[channel] = self.channel_free_ns[channel].max(at_ns) + transfer_ns;
            return;
        }
        let start = self.die_free_ns[die as usize].max(at_ns);
        self.die_free_ns[die as usize] = start + busy;
        self.channel_free_ns[channel] = self.channel_free_ns[channel].max(start) + transfer_ns;
    }

    /// Schedules the pending units of a die's pool as one program.
    fn program(&mut self, die: u32, pool: usize) {
        let units = self.pending_units[die as usize][pool];
        if units == 0 {
            return;
        }
        let ready = self.pending_ready_ns[die as usize][pool];
        let channel = self.channel_of(die);
        let bytes = units as u64 * UNIT_BYTES;
        // A native program's data first passes the controller's native write path, where it has one.
        let ready = match (pool, self.profile.native_write_bytes_per_s) {
            (NATIVE, Some(rate)) => {
                self.native_path_free_ns =
                    self.native_path_free_ns.max(ready) + Self::transfer_ns(bytes, rate);
                self.native_path_free_ns
            }
            _ => ready,
        };
        let transfer_start = self.channel_free_ns[channel].max(ready);
        self.channel_free_ns[channel] =
            transfer_start + Self::transfer_ns(bytes, self.profile.channel_bytes_per_s);
        let program_ns = if pool == SLC {
            (self.profile.slc.program_ns as f64 * self.die_speed[die as usize]) as u64
        } else {
            self.native_program_ns(die)
        };
        // The die first pays its slice of the garbage collection it owes, from when it is free and the program's
        // data has arrived (never in time already past, when the debt did not exist yet).
        let gc_ns = self.gc_slice(die);
        let gc_done = self.die_free_ns[die as usize].max(ready) + gc_ns;
        let start = gc_done.max(self.channel_free_ns[channel]);
        let done = start + program_ns;
        self.die_free_ns[die as usize] = done;
        self.programs.push(Reverse((done, units)));
        self.pending_units[die as usize][pool] = 0;
    }

    /// Frees buffer space whose programs have finished by `t_ns`.
    fn retire_programs(&mut self, t_ns: u64) {
        while let Some(&Reverse((done, units))) = self.programs.peek() {
            if done > t_ns {
                break;
            }
            self.programs.pop();
            self.buffered_units -= units;
        }
    }

    /// Logical unit range touched by a byte range (a partial unit counts as a whole one).
    fn unit_range(&self, offset: u64, len: u64) -> std::ops::Range<u32> {
        let first = (offset / UNIT_BYTES) as u32;
        let end = (offset + len).div_ceil(UNIT_BYTES) as u32;
        first..end.min(self.geometry.logical_units)
    }

    /// Runs deferred TRIM processing up to `until_ns` at `bytes_per_s` (the busy or the idle rate).
    fn reclaim_trims(&mut self, until_ns: u64, bytes_per_s: f64) {
        if until_ns <= self.trim_reclaimed_to_ns {
            return;
        }
        let seconds = (until_ns - self.trim_reclaimed_to_ns) as f64 / 1e9;
        self.trim_reclaimed_to_ns = until_ns;
        if self.ftl.trims_pending() == 0 {
            self.trim_credit_units = 0.0;
            return;
        }
        self.trim_credit_units += seconds * bytes_per_s / UNIT_BYTES as f64;
        let units = self.trim_credit_units.floor();
        self.trim_credit_units -= units;
        self.ftl.reclaim_trimmed(units as u64);
    }

    fn write(&mut self, t_ns: u64, offset: u64, len: u64) -> u64 {
        if let Some(trim) = self.profile.deferred_trim {
            self.reclaim_trims(t_ns, trim.busy_bytes_per_s);
        }
        let start = self.controller_free_ns.max(t_ns);
        self.controller_free_ns = start + self.profile.controller_write_ns;
        // The host link, or the controller's write path where that is slower: the datasheet's sequential write
        // speed (520 MB/s on an 840 EVO 250 GB inside TurboWrite, under the 550 MB/s of SATA).
        let write_path_bytes_per_s = self
            .profile
            .link_bytes_per_s
            .min(self.profile.spec_seq_write_bytes_per_s);
        // The controller takes the command before the data crosses the link: at QD1 the acknowledgement waits
        // for both (seed 001: 43.5 us for a 4K write, 15 us of it the controller's).
        let link_start = self.link_free_ns.max(self.controller_free_ns);
        self.link_free_ns = link_start + Self::transfer_ns(len, write_path_bytes_per_s);
        let data_in = self.link_free_ns;
        let mut ack = data_in + self.profile.write_latency_ns;
        self.ftl.set_time(data_in);
        self.retire_programs(data_in);
        let partial = !offset.is_multiple_of(UNIT_BYTES) || !len.is_multiple_of(UNIT_BYTES);
        for logical in self.unit_range(offset, len) {
            if partial && self.ftl.lookup(logical).is_some() {
                // A partial unit is read, merged and rewritten.
                let (die, _, _) = self.ftl.locate(self.ftl.lookup(logical).expect("checked"));
                let read_start = self.die_free_ns[die as usize].max(data_in);
                self.die_free_ns[die as usize] = read_start + self.profile.native.read_ns;
            }
            let die = self.next_die(data_in);
            let (placement, pool) = if self.ftl.slc_has_room(die) {
                (self.ftl.write_slc(logical, 0, die), SLC)
            } else {
                (self.ftl.write_to(logical, 0, die), NATIVE)
            };
            self.charge_moves(die, placement.gc, false, data_in, true);
            let d = die as usize;
            self.pending_units[d][pool] += 1;
            self.pending_ready_ns[d][pool] = data_in;
            self.buffered_units += 1;
            if self.pending_units[d][pool] == self.units_per_program() {
                self.program(die, pool);
            }
            // A full buffer holds the acknowledgement until programs make room.
            while self.buffered_units > self.buffer_capacity_units {
                if self.programs.is_empty() {
                    for die in 0..self.geometry.dies {
                        self.program(die, NATIVE);
                        self.program(die, SLC);
                    }
                }
                let Reverse((done, units)) = self.programs.pop().expect("programs were just scheduled");
                self.buffered_units -= units;
                ack = ack.max(done);
            }
        }
        // The write that fills the map journal waits while the controller persists it. A command's map changes
        // are contiguous, so the journal fills per command, not per unit: random 4 KiB writes fill it every
        // 8 MiB, sequential 128 KiB ones every 256 MiB.
        self.commands_since_map_journal += 1;
        let every = self.profile.map_journal_every_commands.max(1);
        while self.commands_since_map_journal >= every {
            self.commands_since_map_journal -= every;
            self.controller_free_ns = self.controller_free_ns.max(data_in) + self.profile.map_journal_ns;
            ack = ack.max(self.controller_free_ns);
        }
        ack
    }

    /// A read command, pipelined inside itself as a drive's is: the firmware translates one unit after another
    /// (`read_unit_latency_ns` each), each unit's page is read as soon as its die is free, crosses its channel,
    /// and is sent over the link as soon as it is in the controller, in order. So a large read at QD1 is bound by
    /// the slowest of the three paces (the link's, on a fresh 840 EVO) plus one unit's latency, not by their sum.
    fn read(&mut self, t_ns: u64, offset: u64, len: u64) -> u64 {
        let start = self.controller_free_ns.max(t_ns);
        self.controller_free_ns = start + self.profile.controller_read_ns;
        let units = self.unit_range(offset, len);
        let first_unit = units.start;
        let units_per_page = self.units_per_program();
        // The page each die last read for this request: a request that covers consecutive units reads each
        // page once.
        self.page_in_register.fill(u32::MAX);
        let mut link_free = self.link_free_ns.max(start);
        for logical in units {
            let dispatched = start + (logical - first_unit + 1) as u64 * self.profile.read_unit_latency_ns;
            // The part of the request this unit covers (the first and last may be partial).
            let unit_start = (logical as u64 * UNIT_BYTES).max(offset);
            let unit_end = ((logical as u64 + 1) * UNIT_BYTES).min(offset + len);
            let link_ns =
                Self::transfer_ns(unit_end.saturating_sub(unit_start), self.profile.link_bytes_per_s);
            let Some(physical) = self.ftl.lookup(logical) else {
                // Unmapped: the controller answers zeroes without touching NAND.
                link_free = link_free.max(dispatched) + link_ns;
                continue;
            };
            let (die, block, _) = self.ftl.locate(physical);
            let page = physical / units_per_page;
            let channel = self.channel_of(die);
            let d = die as usize;
            if self.page_in_register[d] != page {
                self.page_in_register[d] = page;
                let programmed_ns = self
                    .ftl
                    .page_programmed_at(physical)
                    .expect("the device keeps page times");
                let busy_ns = self.page_read_ns(block, page, dispatched.saturating_sub(programmed_ns));
                let read_start = self.die_free_ns[d].max(dispatched);
                self.die_free_ns[d] = read_start + busy_ns;
            }
            let transfer_start = self.channel_free_ns[channel].max(self.die_free_ns[d]);
            self.channel_free_ns[channel] =
                transfer_start + Self::transfer_ns(UNIT_BYTES, self.profile.channel_bytes_per_s);
            link_free = link_free.max(self.channel_free_ns[channel]) + link_ns;
        }
        self.link_free_ns = link_free;
        self.host_bytes_read += len;
        self.link_free_ns
    }

    /// How long a die is busy reading one page of `block` whose data is `age_ns` old: one array read, plus
    /// per read-retry step another array read, a transfer of the unit to the controller and a decode attempt,
    /// plus the last resort's time when the retry table ran out.
    /// SLC-mode blocks hold young data with wide margins and never retry.
    fn page_read_ns(&self, block: u32, page: u32, age_ns: u64) -> u64 {
        if self.ftl.is_slc(block) {
            return self.profile.slc.read_ns;
        }
        let base_ns = self.page_base_read_ns(page);
        let (Some(retry), Some(variation), Some(step_ns)) = (
            &self.profile.retention,
            &self.variation,
            self.profile.retry_step_ns(),
        ) else {
            return base_ns;
        };
        let months = age_ns as f64 / 1e9 / MONTH_S;
        let retries = retry.retries(months, variation.block_factor(block), variation.page_z(page));
        let recovery_ns = if retries.recovery { retry.recovery_ns } else { 0 };
        base_ns + retries.steps as u64 * step_ns + recovery_ns
    }

    /// A native page's array read without retries: its page type's share of the array's read time.
    fn page_base_read_ns(&self, page: u32) -> u64 {
        (self.profile.native.read_ns as f64 * self.read_factor(page)) as u64
    }

    fn discard(&mut self, t_ns: u64, offset: u64, len: u64) -> u64 {
        let start = self.controller_free_ns.max(t_ns);
        // Unmapping is a table update: about a microsecond plus a little per unit.
        let units = self.unit_range(offset, len);
        let count = units.len() as u64;
        // Only whole units are unmapped; partial units at the edges keep their data.
        let first_whole = offset.div_ceil(UNIT_BYTES) as u32;
        let end_whole = ((offset + len) / UNIT_BYTES) as u32;
        let deferred = self.profile.deferred_trim.is_some();
        for logical in first_whole..end_whole.min(self.geometry.logical_units) {
            if deferred {
                self.ftl.trim_deferred(logical);
            } else {
                self.ftl.trim(logical);
            }
        }
        self.controller_free_ns = start + 1_000 + count * 2;
        self.controller_free_ns
    }

    fn flush(&mut self, t_ns: u64) -> u64 {
        for die in 0..self.geometry.dies {
            self.program(die, NATIVE);
            self.program(die, SLC);
        }
        let last_program = self
            .programs
            .iter()
            .map(|Reverse((done, _))| *done)
            .max()
            .unwrap_or(0);
        t_ns.max(last_program)
    }

    /// Background work while the host is idle from `from_ns` to `until_ns`: drain the SLC cache, refill the
    /// free pool of firmware that keeps one, then refresh old data if the firmware policy is on. Like a drive's firmware, it waits for the host to have
    /// been quiet for [`IDLE_DELAY_NS`] first, and only starts work on a die that is free before `until_ns`.
    fn idle_work(&mut self, idle_since_ns: u64, until_ns: u64) {
        for die in 0..self.geometry.dies {
            self.program(die, NATIVE);
            self.program(die, SLC);
        }
        let from_ns = idle_since_ns + IDLE_DELAY_NS;
        if let Some(trim) = self.profile.deferred_trim {
            self.reclaim_trims(from_ns.min(until_ns), trim.busy_bytes_per_s);
            self.reclaim_trims(until_ns, trim.idle_bytes_per_s);
        }
        if from_ns >= until_ns {
            return;
        }
        // Idle time first pays the garbage collection the dies owe, as firmware collects in the background.
        for die in 0..self.geometry.dies as usize {
            let at = self.die_free_ns[die].max(from_ns);
            let pay = self.gc_debt_ns[die].min(until_ns.saturating_sub(at));
            self.gc_debt_ns[die] -= pay;
            self.die_free_ns[die] = self.die_free_ns[die].max(at.min(until_ns)) + pay;
        }
        for die in 0..self.geometry.dies {
            match self.profile.slc_drain {
                Some(drain) => {
                    self.drain_paced(die, idle_since_ns + IDLE_DELAY_NS.max(drain.delay_ns), until_ns)
                }
                None => self.while_idle(die, from_ns, until_ns, true, Ftl::drain_slc),
            }
            // Firmware that keeps a free pool refills it while the host is idle.
            self.while_idle(die, from_ns, until_ns, false, Ftl::collect_in_background);
        }
        if let Some(refresh_after) = self.refresh_after_ns
            && until_ns - self.last_refresh_scan_ns.min(until_ns) >= 1_000_000_000
        {
            // A scan of the block table at most once per second of idle time.
            self.last_refresh_scan_ns = until_ns;
            self.refresh_old_blocks(from_ns, until_ns, refresh_after);
        }
    }

    /// Empties `die`'s SLC cache while idle from `from_ns` to `until_ns` at the profile's pace: each block moved
    /// holds the next one back until the time its units take at that pace, so a full cache empties in
    /// `empty_s` (or slower, when the die's own programs are). The die is busy only for the moves themselves,
    /// so a host that returns mid-drain is not kept waiting by the pace.
    fn drain_paced(&mut self, die: u32, from_ns: u64, until_ns: u64) {
        let drain = self.profile.slc_drain.expect("a paced drain has a profile pace");
        let cache_units = self.geometry.slc_blocks_per_die as f64 * self.geometry.slc_units_per_block as f64;
        let ns_per_unit = drain.empty_s * 1e9 / cache_units.max(1.0);
        let d = die as usize;
        loop {
            let at = self.die_free_ns[d].max(from_ns).max(self.drain_next_ns[d]);
            if at >= until_ns {
                break;
            }
            self.ftl.set_time(at);
            let Some(work) = self.ftl.drain_slc(die) else {
                break;
            };
            let moved = work.relocated_units;
            self.charge_moves(die, work, true, at, false);
            self.drain_next_ns[d] = at + (moved as f64 * ns_per_unit) as u64;
        }
    }

    /// Repeats one FTL step of background work on `die` (charged at once, as background work) while the die is
    /// free before `until_ns` and the step finds work; `from_slc` says which array mode the moved pages are read in.
    fn while_idle(
        &mut self,
        die: u32,
        from_ns: u64,
        until_ns: u64,
        from_slc: bool,
        step: fn(&mut Ftl, u32) -> Option<GcWork>,
    ) {
        while self.die_free_ns[die as usize].max(from_ns) < until_ns {
            let at = self.die_free_ns[die as usize].max(from_ns);
            self.ftl.set_time(at);
            let Some(work) = step(&mut self.ftl, die) else {
                break;
            };
            self.charge_moves(die, work, from_slc, at, false);
        }
    }

    /// The firmware refresh: rewrites native blocks whose data is older than `older_than_ns`, while idle.
    fn refresh_old_blocks(&mut self, from_ns: u64, until_ns: u64, older_than_ns: u64) {
        let units_per_block = self.geometry.units_per_block;
        for die in 0..self.geometry.dies {
            let blocks = self.ftl.config().blocks_per_die;
            for i in 0..blocks {
                let at = self.die_free_ns[die as usize].max(from_ns);
                if at >= until_ns {
                    break;
                }
                let block = die * blocks + i;
                let first = block * units_per_block;
                let (_, _, programmed) = self.ftl.locate(first);
                if at.saturating_sub(programmed) < older_than_ns {
                    continue;
                }
                // Rewrite every logical unit still mapped into this block.
                let logicals: Vec<u32> = (first..first + units_per_block)
                    .filter_map(|p| self.ftl.reverse(p))
                    .collect();
                if logicals.is_empty() {
                    continue;
                }
                // Reading old data back costs its read retries, page by page, before the moves.
                let per_page = self.units_per_program();
                let pages: Vec<u32> = (first..first + units_per_block)
                    .step_by(per_page as usize)
                    .filter(|&page_first| {
                        (page_first..page_first + per_page).any(|p| self.ftl.reverse(p).is_some())
                    })
                    .collect();
                let retry_ns: u64 = pages
                    .iter()
                    .map(|&page_first| {
                        let programmed = self
                            .ftl
                            .page_programmed_at(page_first)
                            .expect("the device keeps page times");
                        self.page_read_ns(block, page_first / per_page, at.saturating_sub(programmed))
                            .saturating_sub(self.page_base_read_ns(page_first / per_page))
                    })
                    .sum();
                self.die_free_ns[die as usize] = self.die_free_ns[die as usize].max(at) + retry_ns;
                self.ftl.set_time(at);
                let mut work = GcWork {
                    read_pages: pages.len() as u32,
                    ..GcWork::default()
                };
                for logical in &logicals {
                    let placement = self.ftl.write_to(*logical, 0, die);
                    work.relocated_units += 1 + placement.gc.relocated_units;
                    work.read_pages += placement.gc.read_pages;
                    work.erased_blocks += placement.gc.erased_blocks;
                }
                self.refreshed_units += logicals.len() as u64;
                self.charge_moves(die, work, false, at, false);
            }
        }
    }
}

impl SimDevice {
    /// Keeps the data written from now on, in a sparse in-memory store (what an NBD export of the virtual drive
    /// needs, so a client can put a file system on it); without it the drive models timing and wear only and
    /// reads return zeroes.
    pub fn keep_data(&mut self) {
        if self.store.is_none() {
            self.store = Some(crate::store::DataStore::default());
            self.info
                .notes
                .push("the virtual drive keeps the data written (sparse, in memory): reads return it".into());
        }
    }

    /// The memory the kept data takes, in bytes (0 when it keeps none).
    pub fn kept_data_bytes(&self) -> u64 {
        self.store.as_ref().map_or(0, |s| s.bytes())
    }
}

impl Device for SimDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn prepare(&mut self, slots: u32, buffer_bytes: usize) -> DeviceResult<()> {
        assert_eq!(self.in_flight, 0, "prepare with operations in flight");
        self.buffers = vec![vec![0; buffer_bytes]; slots as usize];
        self.slots = vec![None; slots as usize];
        Ok(())
    }

    fn buffer(&self, slot: u32) -> &[u8] {
        &self.buffers[slot as usize]
    }

    fn buffer_mut(&mut self, slot: u32) -> &mut [u8] {
        &mut self.buffers[slot as usize]
    }

    fn submit(&mut self, ios: &[Io]) -> DeviceResult<usize> {
        for io in ios {
            let slot = io.slot as usize;
            if slot >= self.slots.len() || self.slots[slot].is_some() {
                return Err(DeviceError::Invalid(format!("slot {} is not free", io.slot)));
            }
            io.check_bounds(self.info.addressable_bytes(), self.buffers[slot].len())?;
            let t = self.now_ns;
            let (completed_ns, result) = match io.op {
                Op::Write => {
                    if let Some(store) = &mut self.store {
                        store.write(io.offset, &self.buffers[slot][..io.len as usize]);
                    }
                    (self.write(t, io.offset, io.len), io.len as i64)
                }
                Op::Read => {
                    match &self.store {
                        Some(store) => store.read(io.offset, &mut self.buffers[slot][..io.len as usize]),
                        None => self.buffers[slot][..io.len as usize].fill(0),
                    }
                    (self.read(t, io.offset, io.len), io.len as i64)
                }
                Op::Discard => {
                    if let Some(store) = &mut self.store {
                        store.discard(io.offset, io.len);
                    }
                    (self.discard(t, io.offset, io.len), io.len as i64)
                }
                Op::Flush => (self.flush(t), 0),
            };
            self.slots[slot] = Some(Completion {
                slot: io.slot,
                tag: io.tag,
                op: io.op,
                result,
                submitted_ns: t,
                completed_ns,
            });
            self.due.push(Reverse((completed_ns, io.slot)));
            self.in_flight += 1;
        }
        Ok(ios.len())
    }

    fn reap(
        &mut self,
        min: usize,
        deadline_ns: Option<u64>,
        out: &mut Vec<Completion>,
    ) -> DeviceResult<usize> {
        let mut got = 0;
        loop {
            while let Some(&Reverse((at, slot))) = self.due.peek() {
                if at > self.now_ns {
                    break;
                }
                self.due.pop();
                out.push(
                    self.slots[slot as usize]
                        .take()
                        .expect("a due slot holds its completion"),
                );
                self.in_flight -= 1;
                got += 1;
            }
            let Some(&Reverse((next, _))) = self.due.peek() else {
                return Ok(got);
            };
            if got >= min {
                return Ok(got);
            }
            if let Some(deadline) = deadline_ns
                && deadline < next
            {
                self.now_ns = self.now_ns.max(deadline);
                return Ok(got);
            }
            // The host waits for the device: time jumps to the next completion.
            self.now_ns = next;
        }
    }

    fn now_ns(&self) -> u64 {
        self.now_ns
    }

    fn wait_until(&mut self, t_ns: u64) {
        if t_ns <= self.now_ns {
            return;
        }
        if self.in_flight == 0 {
            self.idle_work(self.now_ns, t_ns);
        }
        self.now_ns = t_ns;
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn counters(&self) -> Option<DeviceCounters> {
        Some(self.device_counters())
    }

    /// Unmapped units are holes; mapped ones are allocated. Both read as zeroes, since no data is stored.
    fn extents(&mut self, offset: u64, len: u64, out: &mut Vec<Extent>) -> DeviceResult<()> {
        let end = offset + len;
        // A bounded walk per query (a quarter million table lookups); the caller asks again from where it ends.
        let stop = end.min(offset + (UNITS_PER_EXTENT_QUERY * UNIT_BYTES));
        let mut at = offset;
        while at < stop {
            let logical = (at / UNIT_BYTES) as u32;
            let unit_end = ((u64::from(logical) + 1) * UNIT_BYTES).min(stop);
            let mapped = logical < self.geometry.logical_units && self.ftl.lookup(logical).is_some();
            let holds_data = self.store.as_ref().is_some_and(|s| s.holds(u64::from(logical)));
            Extent::push_merged(
                out,
                Extent {
                    len_bytes: unit_end - at,
                    allocated: mapped || holds_data,
                    reads_zero: !holds_data,
                },
            );
            at = unit_end;
        }
        Ok(())
    }
}

/// How many mapping units one allocation query looks at.
const UNITS_PER_EXTENT_QUERY: u64 = 1 << 18;

#[cfg(test)]
mod tests {
    use super::*;

    fn run(device: &mut SimDevice, op: Op, offset: u64, len: u64) {
        let io = Io {
            op,
            offset,
            len,
            slot: 0,
            tag: 0,
        };
        assert_eq!(device.submit(&[io]).unwrap(), 1);
        let mut out = Vec::new();
        device.reap(1, None, &mut out).unwrap();
        assert_eq!(out[0].result, len as i64);
    }

    #[test]
    fn a_drive_that_keeps_data_reads_back_what_was_written_and_one_that_does_not_reads_zeroes() {
        let spec = SimSpec::parse("840evo-120g?scale=1/64").unwrap();
        for keep in [false, true] {
            let mut device = SimDevice::new("sim:840evo-120g?scale=1/64", &spec).unwrap();
            if keep {
                device.keep_data();
            }
            device.prepare(1, 8192).unwrap();
            device.buffer_mut(0)[..8192].fill(0xa5);
            run(&mut device, Op::Write, 1 << 20, 8192);
            run(&mut device, Op::Discard, (1 << 20) + 4096, 4096);
            device.buffer_mut(0).fill(0x11);
            run(&mut device, Op::Read, 1 << 20, 8192);
            let buf = device.buffer(0);
            let first = if keep { 0xa5 } else { 0 };
            assert!(buf[..4096].iter().all(|&b| b == first), "keep={keep}");
            assert!(buf[4096..8192].iter().all(|&b| b == 0), "keep={keep}: trimmed");
            assert_eq!(device.kept_data_bytes(), if keep { 4096 } else { 0 });
            let mut extents = Vec::new();
            device.extents(1 << 20, 4096, &mut extents).unwrap();
            assert_eq!(
                extents[0].reads_zero, !keep,
                "block status never calls kept data zeroes"
            );
        }
    }

    #[test]
    fn extents_show_written_units_as_allocated_and_trimmed_ones_as_holes() {
        let spec = SimSpec::parse("840evo-120g?scale=1/64").unwrap();
        let mut device = SimDevice::new("sim:840evo-120g?scale=1/64", &spec).unwrap();
        device.prepare(1, 1 << 20).unwrap();
        run(&mut device, Op::Write, 1 << 20, 1 << 20);
        run(&mut device, Op::Discard, (1 << 20) + 8192, 4096);
        let mut extents = Vec::new();
        device.extents(0, 4 << 20, &mut extents).unwrap();
        let hole = Extent::hole;
        let written = |len_bytes| Extent {
            len_bytes,
            allocated: true,
            reads_zero: true,
        };
        assert_eq!(
            extents,
            vec![
                hole(1 << 20),
                written(8192),
                hole(4096),
                written((1 << 20) - 12288),
                hole(2 << 20),
            ]
        );
    }

    /// Writes `[offset, offset + len)` sequentially in 128 KiB commands, eight in flight, then flushes; returns
    /// the virtual seconds it took.
    fn sequential_write_s(device: &mut SimDevice, offset: u64, len: u64) -> f64 {
        const CHUNK: u64 = 128 << 10;
        let start = device.now_ns();
        let mut next = offset;
        let mut free: Vec<u32> = (0..8).collect();
        let mut out = Vec::new();
        while next < offset + len || free.len() < 8 {
            while next < offset + len
                && let Some(slot) = free.pop()
            {
                let io = Io {
                    op: Op::Write,
                    offset: next,
                    len: CHUNK,
                    slot,
                    tag: 0,
                };
                device.submit(&[io]).unwrap();
                next += CHUNK;
            }
            out.clear();
            device.reap(1, None, &mut out).unwrap();
            free.extend(out.iter().map(|c| c.slot));
        }
        run(device, Op::Flush, 0, 0);
        (device.now_ns() - start) as f64 / 1e9
    }

    #[test]
    fn turbowrite_reclaims_overwritten_slc_blocks() {
        // At 1/16 scale the 840 EVO 250 GB's 3 GB TurboWrite cache holds about 190 MB.
        let spec = SimSpec::parse("840evo-250g?scale=1/16").unwrap();
        let mut device = SimDevice::new("sim:840evo-250g?scale=1/16", &spec).unwrap();
        device.prepare(8, 128 << 10).unwrap();
        let region = 128u64 << 20;
        let mb_s = |s: f64| region as f64 / s / 1e6;
        // Overwriting a region smaller than the cache stays at the cache's speed pass after pass: the previous
        // pass's SLC blocks hold nothing valid and are erased for reuse.
        let passes: Vec<f64> = (0..4)
            .map(|_| mb_s(sequential_write_s(&mut device, 0, region)))
            .collect();
        for speed in &passes {
            assert!((480.0..=525.0).contains(speed), "passes {passes:?} MB/s");
        }
        assert!(
            device.device_counters().erase_count_max > 0,
            "SLC blocks were erased for reuse"
        );
        // New data fills the rest of the cache, then goes to TLC directly, at about 270 MB/s.
        let mut fresh = vec![];
        for i in 1..=4 {
            fresh.push(mb_s(sequential_write_s(&mut device, i * region, region)));
        }
        assert!(fresh[0] > fresh[1] + 50.0, "{fresh:?}");
        for speed in &fresh[1..] {
            assert!((240.0..=300.0).contains(speed), "{fresh:?}");
        }
        device.ftl.check_invariants();
    }
}
