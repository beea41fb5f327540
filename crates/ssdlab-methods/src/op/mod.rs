//! Over-provisioning: how much spare area a drive has, what leaving part of its capacity unused adds, and
//! applying that by discarding the unused tail.
//!
//! Two conventions meet here and both are stated wherever a figure is printed. DESIGN's over-provisioning is
//! OP = (physical - logical) / logical, with the spare factor (physical - logical) / physical beside it. The
//! reviewers' "25% OP" (and `test consistency --op 25`) means 25% of the drive's capacity left unused, which this
//! module calls the unused share: `--set 25%` leaves the last quarter of the LBAs unused, and the OP that results
//! is computed from the drive's raw NAND.
//!
//! Leaving LBAs unused adds spare area only if the drive knows they hold nothing: the tail is discarded, so the
//! FTL drops its mappings and garbage collection can use those pages. A partition table's backup at the end of
//! a GPT disk is kept, and a partition reaching into the tail refuses the whole operation: this module never
//! discards a byte a partition owns. It never decides whether writing to the device is allowed; the caller
//! opens it through the safety gate first, and lists the partitions (from sysfs) for it.

use ssdlab_core::device::{Device, DeviceError, Io, Op};
use ssdlab_core::rng::Rng;

pub use ssdlab_core::schema::op::{OpApplied, Partition, RawNandSource, SpareArea};

mod examine;
pub use examine::{Examined, OpRequest, examine};

const GIB: u64 = 1 << 30;
const GB: u64 = 1_000_000_000;
/// Where the usable area ends is rounded down to this, so the partition size printed is aligned for any
/// partitioning tool and any erase-block size.
pub const ALIGN_BYTES: u64 = 1 << 20;
/// Largest unused share `--set` takes: past it the drive is mostly spare, which is a mistake, not a test.
pub const MAX_UNUSED_PERCENT: f64 = 90.0;

/// Logical and physical capacity, and the ratios between them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spare {
    /// What the host can address (or, with an unused tail, what it will use).
    pub logical_bytes: u64,
    /// The NAND behind it.
    pub physical_bytes: u64,
}

impl Spare {
    /// OP = (physical - logical) / logical, as a ratio (0.0993 for an 840 EVO 250 GB).
    pub fn op_ratio(&self) -> f64 {
        (self.physical_bytes as f64 - self.logical_bytes as f64) / self.logical_bytes as f64
    }

    /// Spare factor = (physical - logical) / physical, as a ratio.
    pub fn spare_factor_ratio(&self) -> f64 {
        (self.physical_bytes as f64 - self.logical_bytes as f64) / self.physical_bytes as f64
    }

    /// As `result.json` keeps it, with both ratios.
    pub fn recorded(&self) -> SpareArea {
        SpareArea {
            logical_bytes: self.logical_bytes,
            physical_bytes: self.physical_bytes,
            op_ratio: self.op_ratio(),
            spare_factor_ratio: self.spare_factor_ratio(),
        }
    }
}

/// Raw NAND of drives whose figures are published, by the model sysfs reports (SATA models are cut to 16
/// characters there, so "Samsung SSD 840" covers the 840, 840 EVO and 840 Pro) and the decimal capacity.
struct KnownNand {
    model_prefix: &'static str,
    capacity_gb: u64,
    raw_gib: u64,
    source: &'static str,
}

const KNOWN_NAND: &[KnownNand] = &[
    KnownNand {
        model_prefix: "Samsung SSD 840",
        capacity_gb: 120,
        raw_gib: 128,
        source: "Samsung 840 EVO 120 GB: 128 GiB of TLC NAND (spare factor 12.7%)",
    },
    KnownNand {
        model_prefix: "Samsung SSD 840",
        capacity_gb: 250,
        raw_gib: 256,
        source: "Samsung 840 / 840 EVO 250 GB: 256 GiB of NAND (spare factor 9.05%)",
    },
    KnownNand {
        model_prefix: "Samsung SSD 840",
        capacity_gb: 500,
        raw_gib: 512,
        source: "Samsung 840 / 840 EVO 500 GB: 512 GiB of NAND (spare factor 9.05%)",
    },
    KnownNand {
        model_prefix: "Samsung SSD 840",
        capacity_gb: 750,
        raw_gib: 768,
        source: "Samsung 840 EVO 750 GB: 768 GiB of TLC NAND (spare factor 9.05%)",
    },
    KnownNand {
        model_prefix: "Samsung SSD 840",
        capacity_gb: 1000,
        raw_gib: 1024,
        source: "Samsung 840 EVO 1 TB: 1024 GiB of TLC NAND (spare factor 9.05%)",
    },
];

/// The raw NAND of a drive by its model and capacity: the known-drive table, else the lower bound (as many GiB
/// as the drive has GB: the decimal/binary difference, 7.37%, that every SSD keeps as spare).
pub fn raw_nand(model: &str, capacity_bytes: u64) -> (u64, RawNandSource) {
    let gb = (capacity_bytes as f64 / GB as f64).round() as u64;
    let known = KNOWN_NAND
        .iter()
        .find(|k| k.capacity_gb == gb && model.trim().starts_with(k.model_prefix));
    match known {
        Some(k) => (k.raw_gib * GIB, RawNandSource::Known(k.source.to_string())),
        None => (
            (u128::from(capacity_bytes) * u128::from(GIB) / u128::from(GB)) as u64,
            RawNandSource::Assumed,
        ),
    }
}

/// Why over-provisioning could not be planned or applied. Each text names the flag or the partition at fault.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    #[error("{0}")]
    Invalid(String),
    #[error(
        "partition {name} ends at byte {end_bytes}, inside the tail to leave unused (from byte {usable_bytes}); \
         nothing was discarded. Shrink or delete the partition first, or choose a smaller --set"
    )]
    PartitionInTail {
        name: String,
        end_bytes: u64,
        usable_bytes: u64,
    },
    #[error(
        "the device does not support discard, so leaving its tail unused would add spare area only if those \
         LBAs were never written; nothing was discarded. Purge the drive first (ssdlab erase), then leave the \
         tail unpartitioned"
    )]
    NoDiscard,
    #[error(transparent)]
    Device(#[from] DeviceError),
}

/// What `--set` asks: the last `unused_percent` of the capacity left unused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpPlan {
    pub capacity_bytes: u64,
    pub unused_percent: f64,
    /// Where the usable area ends: the capacity less the unused share, rounded down to [`ALIGN_BYTES`].
    pub usable_bytes: u64,
}

impl OpPlan {
    /// Plans leaving `unused_percent` (more than 0, at most [`MAX_UNUSED_PERCENT`]) of `capacity_bytes` unused.
    pub fn new(capacity_bytes: u64, unused_percent: f64) -> Result<Self, OpError> {
        if !(unused_percent > 0.0 && unused_percent <= MAX_UNUSED_PERCENT) {
            return Err(OpError::Invalid(format!(
                "--set {unused_percent}%: give the share of the capacity to leave unused, more than 0% and at \
                 most {MAX_UNUSED_PERCENT}% (e.g. --set 25%)"
            )));
        }
        let keep = capacity_bytes as f64 * (1.0 - unused_percent / 100.0);
        let usable_bytes = (keep as u64) / ALIGN_BYTES * ALIGN_BYTES;
        if usable_bytes == 0 {
            return Err(OpError::Invalid(format!(
                "--set {unused_percent}%: the device ({capacity_bytes} bytes) would keep less than one \
                 {ALIGN_BYTES}-byte aligned unit"
            )));
        }
        Ok(OpPlan {
            capacity_bytes,
            unused_percent,
            usable_bytes,
        })
    }

    /// The spare area with the tail unused, over `physical_bytes` of NAND.
    pub fn spare(&self, physical_bytes: u64) -> Spare {
        Spare {
            logical_bytes: self.usable_bytes,
            physical_bytes,
        }
    }
}

/// The partition table as it is on the disk (not as the kernel last read it): the partitions, and where a GPT's
/// usable area ends (its backup entries and header follow, up to the device's end).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiskLayout {
    pub partitions: Vec<Partition>,
    /// One past the GPT's last usable byte; None without a GPT.
    pub gpt_usable_end_bytes: Option<u64>,
}

/// Largest GPT entry array read (the usual one is 128 entries of 128 bytes).
const MAX_GPT_ENTRIES_BYTES: u64 = 1 << 20;

/// CRC-32 (IEEE, reflected), as GPT checksums its header and entry array.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

/// A GPT header's fields this module uses.
struct GptHeader {
    my_lba: u64,
    first_usable_lba: u64,
    alternate_lba: u64,
    last_usable_lba: u64,
    entries_lba: u64,
    entry_count: u64,
    entry_bytes: u64,
    entries_crc: u32,
}

/// Reads a GPT header from `block`, if it is one; a header whose checksum does not match is an error.
fn gpt_header(block: &[u8]) -> Result<Option<GptHeader>, OpError> {
    if block.len() < 92 || &block[..8] != b"EFI PART" {
        return Ok(None);
    }
    let u64_at = |at: usize| u64::from_le_bytes(block[at..at + 8].try_into().unwrap());
    let u32_at = |at: usize| u32::from_le_bytes(block[at..at + 4].try_into().unwrap());
    let size = u32_at(12) as usize;
    if !(92..=block.len()).contains(&size) {
        return Err(damaged(format!("its header claims {size} bytes")));
    }
    let mut header = block[..size].to_vec();
    header[16..20].fill(0);
    if crc32(&header) != u32_at(16) {
        return Err(damaged("its header's checksum does not match".into()));
    }
    Ok(Some(GptHeader {
        my_lba: u64_at(24),
        first_usable_lba: u64_at(40),
        alternate_lba: u64_at(32),
        last_usable_lba: u64_at(48),
        entries_lba: u64_at(72),
        entry_count: u64::from(u32_at(80)),
        entry_bytes: u64::from(u32_at(84)),
        entries_crc: u32_at(88),
    }))
}

fn damaged(what: String) -> OpError {
    OpError::Invalid(format!(
        "the GPT on the device looks damaged ({what}); nothing was discarded. Check and repair the partition \
         table first (sfdisk --verify, sgdisk -v)"
    ))
}

/// The used entries of a GPT entry array, each checked to lie inside the usable area.
fn gpt_partitions(entries: &[u8], header: &GptHeader, block: u64) -> Result<Vec<Partition>, OpError> {
    let mut partitions = vec![];
    for (i, e) in entries.chunks_exact(header.entry_bytes as usize).enumerate() {
        if e[..16].iter().all(|&b| b == 0) {
            continue;
        }
        let first = u64::from_le_bytes(e[32..40].try_into().unwrap());
        let last = u64::from_le_bytes(e[40..48].try_into().unwrap());
        if first > last || last > header.last_usable_lba {
            return Err(damaged(format!(
                "entry {} runs from LBA {first} to {last}, outside the usable area",
                i + 1
            )));
        }
        // last <= last_usable_lba < device blocks, so these cannot overflow.
        partitions.push(Partition {
            name: format!("GPT entry {}", i + 1),
            start_bytes: first * block,
            len_bytes: (last - first + 1) * block,
        });
    }
    Ok(partitions)
}

/// The used entries of an MBR (an extended partition counts whole, its logical partitions inside it), if
/// `lba0` is one: the 55 AA signature and four entries whose boot flags are 0x00 or 0x80. A GPT's protective
/// entry (type 0xEE) is left out; `protective` says whether there was one.
fn mbr_partitions(lba0: &[u8], block: u64) -> (Vec<Partition>, bool) {
    if lba0.len() < 512 || lba0[510..512] != [0x55, 0xAA] {
        return (vec![], false);
    }
    let entries: Vec<&[u8]> = lba0[446..510].chunks_exact(16).collect();
    if !entries.iter().all(|e| e[0] == 0x00 || e[0] == 0x80) {
        return (vec![], false);
    }
    let protective = entries.iter().any(|e| e[4] == 0xEE);
    let partitions = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e[4] != 0 && e[4] != 0xEE)
        .map(|(i, e)| Partition {
            name: format!("MBR entry {}", i + 1),
            start_bytes: u64::from(u32::from_le_bytes(e[8..12].try_into().unwrap())) * block,
            len_bytes: u64::from(u32::from_le_bytes(e[12..16].try_into().unwrap())) * block,
        })
        .collect();
    (partitions, protective)
}

/// Reads the partition table from the device: an MBR at LBA 0 and a GPT at LBA 1 (both, if both are there, so a
/// stale table of either kind still keeps the tail clear of what it describes). A GPT must be whole: its
/// checksums match, its entries lie in its usable area, and its backup header is the device's last block (a
/// disk that grew keeps its backup in the middle, which a discard of the tail would not keep). A protective MBR
/// without a GPT this device's block size can read is refused.
pub fn disk_layout<D: Device>(device: &mut D) -> Result<DiskLayout, OpError> {
    let info = device.info().clone();
    let block = u64::from(info.logical_block_bytes.max(512));
    let blocks = info.capacity_bytes / block;
    if blocks < 2 {
        return Ok(DiskLayout::default());
    }
    device.prepare(1, (MAX_GPT_ENTRIES_BYTES + block).max(8192) as usize)?;
    let head = read_at(device, 0, (2 * block).max(8192).min(blocks * block))?;
    let (mut partitions, protective) = mbr_partitions(&head[..block as usize], block);
    let header = gpt_header(&head[block as usize..2 * block as usize])?;
    let Some(header) = header else {
        check_no_gpt(&head, block, protective)?;
        check_end(device, block, blocks)?;
        return Ok(DiskLayout {
            partitions,
            gpt_usable_end_bytes: None,
        });
    };
    let entries_len = check_gpt_placement(&header, block, blocks)?;
    partitions.extend(gpt_entry_partitions(device, &header, block, entries_len)?);
    check_backup_header(device, &header, block, blocks)?;
    Ok(DiskLayout {
        partitions,
        gpt_usable_end_bytes: Some((header.last_usable_lba + 1) * block),
    })
}

/// Refuses a device without a GPT header at LBA 1 whose partitions are still unknown: a GPT written for the
/// other sector size in `head` (the first blocks), or a protective MBR with no GPT behind it.
fn check_no_gpt(head: &[u8], block: u64, protective: bool) -> Result<(), OpError> {
    // A GPT written for the other sector size (a 4Kn image on a 512-byte device, or the reverse).
    let elsewhere = [512usize, 4096]
        .into_iter()
        .filter(|&at| at as u64 != block)
        .any(|at| head.len() >= at + 8 && &head[at..at + 8] == b"EFI PART");
    if elsewhere {
        return Err(OpError::Invalid(format!(
            "the device's GPT was written for another sector size than its {block}-byte logical blocks, so its \
             partitions cannot be placed; nothing was discarded"
        )));
    }
    if protective {
        return Err(OpError::Invalid(
            "the device has a protective MBR but no GPT header at LBA 1, so its partitions are unknown; \
             nothing was discarded. Repair the table (sgdisk -v) first"
                .into(),
        ));
    }
    Ok(())
}

/// The length in bytes of the GPT's entry array, once the header is checked to lay the table out as GPT
/// promises, with its backup header at the device's last block of `blocks`.
fn check_gpt_placement(header: &GptHeader, block: u64, blocks: u64) -> Result<u64, OpError> {
    if header.alternate_lba != blocks - 1 {
        return Err(damaged(format!(
            "its backup header is at LBA {}, not at the device's last block {}: the device grew or the table is \
             stale; `sgdisk -e` moves the backup to the end",
            header.alternate_lba,
            blocks - 1
        )));
    }
    let entries_len = header.entry_count.saturating_mul(header.entry_bytes);
    let entries_blocks = entries_len.div_ceil(block);
    // The layout GPT promises: header at LBA 1, its entries before the first usable LBA, the usable area, then
    // the backup entries and the backup header at the end. Anything else would let the discard reach a copy.
    if !(128..=4096).contains(&header.entry_bytes)
        || entries_len > MAX_GPT_ENTRIES_BYTES
        || header.my_lba != 1
        || header.entries_lba < 2
        || header.entries_lba.saturating_add(entries_blocks) > header.first_usable_lba
        || header.first_usable_lba > header.last_usable_lba
        || header.last_usable_lba.saturating_add(entries_blocks) >= header.alternate_lba
    {
        return Err(damaged(format!(
            "{} entries of {} bytes at LBA {}, last usable LBA {}",
            header.entry_count, header.entry_bytes, header.entries_lba, header.last_usable_lba
        )));
    }
    Ok(entries_len)
}

/// The partitions of the GPT's entry array (`entries_len` bytes), read from the device and checked against the
/// header's checksum.
fn gpt_entry_partitions<D: Device>(
    device: &mut D,
    header: &GptHeader,
    block: u64,
    entries_len: u64,
) -> Result<Vec<Partition>, OpError> {
    let entries = read_at(
        device,
        header.entries_lba * block,
        entries_len.div_ceil(block) * block,
    )?;
    let entries = &entries[..entries_len as usize];
    if crc32(entries) != header.entries_crc {
        return Err(damaged("its entry array's checksum does not match".into()));
    }
    gpt_partitions(entries, header, block)
}

/// Refuses a GPT whose backup header, at the device's last block, is missing or disagrees with the primary.
fn check_backup_header<D: Device>(
    device: &mut D,
    header: &GptHeader,
    block: u64,
    blocks: u64,
) -> Result<(), OpError> {
    // The backup header must be there and agree: a discard of the tail keeps the last blocks, so a missing backup
    // would stay missing, and a stale one would describe other partitions than the ones kept clear of.
    let last = read_at(device, (blocks - 1) * block, block)?;
    match gpt_header(&last)? {
        None => Err(damaged(format!(
            "its backup header is missing: LBA {} holds no GPT header",
            blocks - 1
        ))),
        Some(backup)
            if backup.my_lba != blocks - 1
                || backup.alternate_lba != 1
                || backup.entries_crc != header.entries_crc
                || backup.last_usable_lba != header.last_usable_lba =>
        {
            Err(damaged(
                "its backup header does not match the primary (its own LBA, the primary's LBA, the entries' \
                 checksum or the usable area differ)"
                    .into(),
            ))
        }
        Some(_) => Ok(()),
    }
}

/// md RAID superblock magic (0.90 and 1.x).
const MD_MAGIC: u32 = 0xa92b_4efc;

/// Refuses a device whose end holds metadata a discard of the tail would destroy and the first mebibyte does not
/// show: an md RAID superblock of format 0.90 (64 KiB from the end, aligned to 64 KiB) or 1.0 (8 KiB from the
/// end, aligned to 4 KiB), or a GPT's backup header without its primary.
fn check_end<D: Device>(device: &mut D, block: u64, blocks: u64) -> Result<(), OpError> {
    let capacity = blocks * block;
    let window = (128u64 << 10).min(capacity) / block * block;
    let start = capacity - window;
    let tail = read_at(device, start, window)?;
    let magic_at = |offset: u64| {
        offset >= start
            && offset + 4 <= capacity
            && u32::from_le_bytes(tail[(offset - start) as usize..][..4].try_into().unwrap()) == MD_MAGIC
    };
    let md_090 = (capacity & !0xffff).checked_sub(0x10000).is_some_and(magic_at);
    let md_10 = capacity
        .checked_sub(8192)
        .map(|o| o & !0xfff)
        .is_some_and(magic_at);
    if md_090 || md_10 {
        return Err(OpError::Invalid(
            "the end of the device holds a Linux md RAID superblock (format 0.90 or 1.0), which a discard of the \
             tail would destroy; nothing was discarded"
                .into(),
        ));
    }
    if &tail[(window - block) as usize..][..8] == b"EFI PART" {
        return Err(OpError::Invalid(
            "the last block holds a GPT backup header but LBA 1 has no primary: the table is damaged; nothing \
             was discarded. Repair it (sgdisk -v) first"
                .into(),
        ));
    }
    Ok(())
}

/// The range a plan discards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tail {
    pub offset_bytes: u64,
    pub len_bytes: u64,
    /// Bytes at the very end left alone because they hold the GPT's backup (0 without a GPT).
    pub gpt_backup_bytes: u64,
}

/// What `plan` would discard on a device of `capacity_bytes` in `block`-byte blocks with this `layout`, or why
/// it must not: a partition (the kernel's or the disk's) reaching into the tail, or a tail that ends before it
/// starts. The preview and [`apply`] both decide with it.
pub fn plan_tail(
    plan: &OpPlan,
    layout: &DiskLayout,
    kernel_partitions: &[Partition],
    block: u64,
) -> Result<Tail, OpError> {
    let all: Vec<&Partition> = kernel_partitions.iter().chain(&layout.partitions).collect();
    if let Some(p) = all
        .into_iter()
        .find(|p| p.start_bytes.saturating_add(p.len_bytes) > plan.usable_bytes)
    {
        return Err(OpError::PartitionInTail {
            name: p.name.clone(),
            end_bytes: p.start_bytes.saturating_add(p.len_bytes),
            usable_bytes: plan.usable_bytes,
        });
    }
    let whole = plan.capacity_bytes / block * block;
    let end_bytes = layout.gpt_usable_end_bytes.map_or(whole, |end| end.min(whole));
    if end_bytes <= plan.usable_bytes {
        return Err(OpError::Invalid(format!(
            "--set {}%: the tail from byte {} ends before it starts (at byte {end_bytes}, where the partition \
             table's backup begins); nothing was discarded",
            plan.unused_percent, plan.usable_bytes
        )));
    }
    Ok(Tail {
        offset_bytes: plan.usable_bytes,
        len_bytes: end_bytes - plan.usable_bytes,
        gpt_backup_bytes: plan.capacity_bytes - end_bytes,
    })
}

/// Applies `plan`: reads the partition table on the disk and decides with [`plan_tail`] (so a partition the
/// kernel lists, `kernel_partitions`, or the disk holds refuses it), refuses a device that cannot discard,
/// discards the tail, flushes, and reads `samples` tail blocks back (the first, the last and random ones from
/// `seed`) to say whether they read as zeroes.
pub fn apply<D: Device>(
    device: &mut D,
    plan: &OpPlan,
    kernel_partitions: &[Partition],
    samples: u32,
    seed: u64,
) -> Result<OpApplied, OpError> {
    let info = device.info().clone();
    assert_eq!(
        info.capacity_bytes, plan.capacity_bytes,
        "the plan was made for this device"
    );
    let block = u64::from(info.logical_block_bytes.max(512));
    let layout = disk_layout(device)?;
    let tail = plan_tail(plan, &layout, kernel_partitions, block)?;
    if !info.discard_supported {
        return Err(OpError::NoDiscard);
    }
    assert!(
        tail.offset_bytes >= plan.usable_bytes
            && tail.offset_bytes + tail.len_bytes + tail.gpt_backup_bytes == info.capacity_bytes,
        "the discard stays inside the tail"
    );
    discard(
        device,
        tail.offset_bytes,
        tail.len_bytes,
        block,
        info.discard_max_bytes,
    )?;
    // The tail is discarded: what fails from here on is part of the record, not an error that would lose it.
    let check = |device: &mut D| -> Result<bool, OpError> {
        submit_one(device, Op::Flush, 0, 0)?;
        let blocks = tail.len_bytes / block;
        let mut rng = Rng::new(seed);
        let mut tail_reads_zero = true;
        for i in 0..samples {
            let index = match i {
                0 => 0,
                1 => blocks - 1,
                _ => rng.below(blocks),
            };
            let data = read_at(device, tail.offset_bytes + index * block, block)?;
            tail_reads_zero &= data.iter().all(|&b| b == 0);
        }
        Ok(tail_reads_zero)
    };
    let (tail_reads_zero, read_back_error) = match check(device) {
        Ok(zero) => (zero, None),
        Err(e) => (false, Some(e.to_string())),
    };
    Ok(OpApplied {
        offset_bytes: tail.offset_bytes,
        len_bytes: tail.len_bytes,
        gpt_backup_bytes: tail.gpt_backup_bytes,
        samples,
        tail_reads_zero,
        read_back_error,
    })
}

/// Discards `len` bytes at `offset` in pieces the device accepts (whole logical blocks, at most its discard
/// limit, at most 1 GiB so no single command runs for minutes).
fn discard<D: Device>(
    device: &mut D,
    offset: u64,
    len: u64,
    block: u64,
    discard_max_bytes: u64,
) -> Result<(), OpError> {
    assert!(offset.is_multiple_of(block) && len.is_multiple_of(block));
    let piece = discard_max_bytes.clamp(block, GIB) / block * block;
    let mut at = offset;
    while at < offset + len {
        let n = piece.min(offset + len - at);
        submit_one(device, Op::Discard, at, n)?;
        at += n;
    }
    Ok(())
}

/// Runs one operation on slot 0 and waits for it; a short or failed result is an error.
fn submit_one<D: Device>(device: &mut D, op: Op, offset: u64, len: u64) -> Result<(), OpError> {
    let done = device.complete(Io {
        op,
        offset,
        len,
        slot: 0,
        tag: 0,
    })?;
    if done.result != len as i64 {
        return Err(OpError::Invalid(format!(
            "{op:?} of {len} bytes at byte {offset} returned {}; the tail may be partly discarded",
            done.result
        )));
    }
    Ok(())
}

/// Reads `len` bytes at `offset` through slot 0 (prepared by [`disk_layout`] for up to a GPT entry array).
fn read_at<D: Device>(device: &mut D, offset: u64, len: u64) -> Result<Vec<u8>, OpError> {
    submit_one(device, Op::Read, offset, len)?;
    Ok(device.buffer(0)[..len as usize].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ssdlab_testdev::MemDevice;

    #[test]
    fn conventions_for_an_840_evo_250() {
        let capacity = 250_059_350_016; // what an 840 EVO 250 GB reports
        let (raw, source) = raw_nand("Samsung SSD 840 ", capacity);
        assert_eq!(raw, 256 * GIB);
        assert!(matches!(source, RawNandSource::Known(_)));
        let built_in = Spare {
            logical_bytes: capacity,
            physical_bytes: raw,
        };
        assert!(
            (built_in.op_ratio() - 0.0993).abs() < 0.0005,
            "{}",
            built_in.op_ratio()
        );
        assert!((built_in.spare_factor_ratio() - 0.0903).abs() < 0.0005);
        // 25% left unused: 187.5 GB usable; OP (274.88 - 187.54) / 187.54 = 46.6%.
        let plan = OpPlan::new(capacity, 25.0).unwrap();
        assert_eq!(plan.usable_bytes % ALIGN_BYTES, 0);
        assert!(capacity * 3 / 4 - plan.usable_bytes < ALIGN_BYTES);
        let spare = plan.spare(raw);
        assert!((spare.op_ratio() - 0.4657).abs() < 0.001, "{}", spare.op_ratio());
        assert!((spare.spare_factor_ratio() - 0.3177).abs() < 0.001);
    }

    #[test]
    fn unknown_drives_get_the_decimal_binary_lower_bound() {
        let (raw, source) = raw_nand("WDC WDS500G2B0A", 500_107_862_016);
        assert_eq!(source, RawNandSource::Assumed);
        assert_eq!(raw, 536_986_727_957); // 500.107862016 GiB
        let spare = Spare {
            logical_bytes: 500_107_862_016,
            physical_bytes: raw,
        };
        assert!((spare.op_ratio() - 0.0735).abs() < 0.001);
    }

    #[test]
    fn bad_shares_are_refused_with_the_flag() {
        for bad in [0.0, -5.0, 90.5, f64::NAN] {
            let e = OpPlan::new(1 << 30, bad).unwrap_err().to_string();
            assert!(e.starts_with("--set"), "{e}");
        }
        assert!(OpPlan::new(1 << 20, 50.0).is_err(), "nothing aligned left");
    }

    #[test]
    fn the_tail_is_discarded_and_nothing_before_it() {
        let capacity = 64 << 20;
        let mut device = MemDevice::new(capacity, 1000);
        device.data_mut().fill(0xa5);
        let plan = OpPlan::new(capacity, 25.0).unwrap();
        assert_eq!(plan.usable_bytes, 48 << 20);
        let applied = apply(&mut device, &plan, &[], 16, 3).unwrap();
        assert_eq!((applied.offset_bytes, applied.len_bytes), (48 << 20, 16 << 20));
        assert_eq!(applied.gpt_backup_bytes, 0);
        assert!(applied.tail_reads_zero);
        assert!(device.data()[..48 << 20].iter().all(|&b| b == 0xa5));
        assert!(device.data()[48 << 20..].iter().all(|&b| b == 0));
    }

    /// Writes a valid GPT (protective MBR, header at LBA 1, 128 entries of 128 bytes from LBA 2, 512-byte
    /// blocks, backup header at the last LBA) with the given partitions as (first LBA, last LBA); its last
    /// usable LBA is 34 sectors before the end.
    fn write_gpt(data: &mut [u8], partitions: &[(u64, u64)]) -> u64 {
        let blocks = data.len() as u64 / 512;
        let last_usable = blocks - 34;
        data[446 + 4] = 0xEE;
        data[510] = 0x55;
        data[511] = 0xAA;
        let entries = &mut data[1024..1024 + 128 * 128];
        entries.fill(0);
        for (i, &(first, last)) in partitions.iter().enumerate() {
            let e = &mut entries[i * 128..(i + 1) * 128];
            e[..16].fill(0x42); // a type GUID
            e[32..40].copy_from_slice(&first.to_le_bytes());
            e[40..48].copy_from_slice(&last.to_le_bytes());
        }
        let entries_crc = crc32(&data[1024..1024 + 128 * 128]);
        let h = &mut data[512..1024];
        h.fill(0);
        h[..8].copy_from_slice(b"EFI PART");
        h[12..16].copy_from_slice(&92u32.to_le_bytes());
        h[24..32].copy_from_slice(&1u64.to_le_bytes());
        h[32..40].copy_from_slice(&(blocks - 1).to_le_bytes());
        h[40..48].copy_from_slice(&34u64.to_le_bytes());
        h[48..56].copy_from_slice(&last_usable.to_le_bytes());
        h[72..80].copy_from_slice(&2u64.to_le_bytes());
        h[80..84].copy_from_slice(&128u32.to_le_bytes());
        h[84..88].copy_from_slice(&128u32.to_le_bytes());
        h[88..92].copy_from_slice(&entries_crc.to_le_bytes());
        let header_crc = crc32(&h[..92]);
        h[16..20].copy_from_slice(&header_crc.to_le_bytes());
        // The backup: the entries again in the 32 blocks before the last, its header (the primary's with its own
        // and the alternate LBA swapped) in the last block.
        let mut backup = data[512..1024].to_vec();
        let backup_entries_lba = blocks - 33;
        backup[24..32].copy_from_slice(&(blocks - 1).to_le_bytes());
        backup[32..40].copy_from_slice(&1u64.to_le_bytes());
        backup[72..80].copy_from_slice(&backup_entries_lba.to_le_bytes());
        backup[16..20].fill(0);
        let backup_crc = crc32(&backup[..92]);
        backup[16..20].copy_from_slice(&backup_crc.to_le_bytes());
        let at = (backup_entries_lba * 512) as usize;
        data.copy_within(1024..1024 + 128 * 128, at);
        data[(blocks as usize - 1) * 512..].copy_from_slice(&backup);
        last_usable
    }

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn a_gpt_backup_is_kept_and_a_partition_on_the_disk_refuses() {
        let capacity = 64u64 << 20;
        let mut device = MemDevice::new(capacity, 1000);
        device.data_mut().fill(0x11);
        // 1 MiB..41 MiB: reaches past the usable half. The kernel lists nothing (no partition scan).
        write_gpt(device.data_mut(), &[(2048, 2048 + 40 * 2048 - 1)]);
        let plan = OpPlan::new(capacity, 50.0).unwrap();
        let before = device.data().to_vec();
        let e = apply(&mut device, &plan, &[], 4, 1).unwrap_err();
        assert!(
            matches!(e, OpError::PartitionInTail { ref name, .. } if name == "GPT entry 1"),
            "{e}"
        );
        assert!(device.data() == before, "a refusal discarded nothing");

        write_gpt(device.data_mut(), &[(2048, 2048 + 31 * 2048 - 1)]);
        let kernel = Partition {
            name: "p1".into(),
            start_bytes: 1 << 20,
            len_bytes: 31 << 20,
        };
        let backup_before = device.data()[capacity as usize - 33 * 512..].to_vec();
        let applied = apply(&mut device, &plan, &[kernel], 4, 1).unwrap();
        // The last usable LBA is 34 sectors from the end, so the 33 after it (entries and header) are kept.
        assert_eq!(applied.gpt_backup_bytes, 33 * 512);
        assert!(device.data()[capacity as usize - 33 * 512..] == backup_before[..]);
        assert!(
            device.data()[32 << 20..capacity as usize - 33 * 512]
                .iter()
                .all(|&b| b == 0)
        );
        assert!(device.data()[1 << 20..32 << 20].iter().all(|&b| b == 0x11));
    }

    #[test]
    fn examine_plans_the_tail_the_discard_takes_and_reports_without_a_plan_even_on_a_damaged_table() {
        let capacity = 64u64 << 20;
        let mut device = MemDevice::new(capacity, 1000);
        write_gpt(device.data_mut(), &[(2048, 2048 + 31 * 2048 - 1)]);
        let kernel = Partition {
            name: "p1".into(),
            start_bytes: 1 << 20,
            len_bytes: 31 << 20,
        };
        let request = |unused_percent| OpRequest {
            raw_nand_bytes: None,
            kernel_partitions: vec![kernel.clone()],
            unused_percent,
            virtual_block: true,
        };
        let report = examine(&mut device, &request(None)).unwrap();
        assert!(report.plan.is_none() && report.record.planned.is_none());
        assert_eq!(
            report.record.partitions.len(),
            1,
            "the kernel's and the table's entry are one range"
        );
        assert!(report.record.notes[0].contains("virtual block device"));
        let planned = examine(&mut device, &request(Some(25.0))).unwrap();
        let (plan, tail) = planned.plan.unwrap();
        assert_eq!(plan.usable_bytes, 48 << 20);
        assert_eq!(tail.offset_bytes, 48 << 20);
        assert_eq!(
            tail.gpt_backup_bytes,
            33 * 512,
            "the backup header and entries are kept"
        );
        let recorded = planned.record.planned.unwrap();
        assert_eq!(recorded.tail_offset_bytes, Some(tail.offset_bytes));
        assert_eq!(recorded.tail_len_bytes, Some(tail.len_bytes));
        // The same decision as the discard: a partition in the tail refuses both, and a damaged table refuses a
        // plan but not a report.
        let mut refused = request(Some(60.0));
        refused.kernel_partitions[0].len_bytes = 40 << 20;
        assert!(matches!(
            examine(&mut device, &refused),
            Err(OpError::PartitionInTail { .. })
        ));
        let last = device.data().len() - 512;
        device.data_mut()[last..].fill(0);
        assert!(examine(&mut device, &request(Some(25.0))).is_err());
        let report = examine(&mut device, &request(None)).unwrap();
        assert!(
            report
                .record
                .notes
                .iter()
                .any(|n| n.contains("backup header is missing"))
        );
    }

    #[test]
    fn a_kernel_partition_or_an_mbr_entry_in_the_tail_refuses() {
        let capacity = 64u64 << 20;
        let mut device = MemDevice::new(capacity, 1000);
        let plan = OpPlan::new(capacity, 25.0).unwrap();
        let kernel = Partition {
            name: "sdz2".into(),
            start_bytes: 40 << 20,
            len_bytes: 9 << 20,
        };
        let e = apply(&mut device, &plan, &[kernel], 4, 1).unwrap_err();
        assert!(
            matches!(e, OpError::PartitionInTail { ref name, .. } if name == "sdz2"),
            "{e}"
        );

        // An MBR whose second entry covers 40..60 MiB.
        device.data_mut()[510] = 0x55;
        device.data_mut()[511] = 0xAA;
        let e2 = 446 + 16;
        device.data_mut()[e2 + 4] = 0x83;
        device.data_mut()[e2 + 8..e2 + 12].copy_from_slice(&(40u32 * 2048).to_le_bytes());
        device.data_mut()[e2 + 12..e2 + 16].copy_from_slice(&(20u32 * 2048).to_le_bytes());
        device.data_mut()[1 << 20] = 7;
        let e = apply(&mut device, &plan, &[], 4, 1).unwrap_err();
        assert!(
            matches!(e, OpError::PartitionInTail { ref name, .. } if name == "MBR entry 2"),
            "{e}"
        );
        let layout = disk_layout(&mut device).unwrap();
        assert_eq!(layout.gpt_usable_end_bytes, None);
        assert_eq!(layout.partitions.len(), 1);
    }

    #[test]
    fn a_damaged_or_unplaceable_gpt_refuses() {
        let fresh = || {
            let mut device = MemDevice::new(8 << 20, 1000);
            write_gpt(device.data_mut(), &[(2048, 4095)]);
            device
        };
        let refused = |device: &mut MemDevice, what: &str| {
            let e = disk_layout(device).unwrap_err().to_string();
            assert!(e.contains(what) && e.contains("nothing was discarded"), "{e}");
        };
        assert_eq!(disk_layout(&mut fresh()).unwrap().partitions.len(), 1);

        let mut device = fresh();
        device.data_mut()[512 + 80] = 0xff; // the entry count, without fixing the checksum
        refused(&mut device, "header's checksum");
        let mut device = fresh();
        device.data_mut()[1024 + 40] ^= 1; // an entry, without fixing the array's checksum
        refused(&mut device, "entry array's checksum");
        // A disk that grew: the backup header is no longer at the end.
        let mut device = MemDevice::new(16 << 20, 1000);
        let small = fresh();
        device.data_mut()[..8 << 20].copy_from_slice(small.data());
        refused(&mut device, "backup header is at LBA");
        // The backup header missing (zeroed), or not matching the primary.
        let mut device = fresh();
        let last = device.data().len() - 512;
        device.data_mut()[last..].fill(0);
        refused(&mut device, "backup header is missing");
        let mut device = fresh();
        device.data_mut()[last + 88] ^= 1; // the entries' checksum, with the header's checksum fixed
        device.data_mut()[last + 16..last + 20].fill(0);
        let crc = crc32(&device.data()[last..last + 92]);
        device.data_mut()[last + 16..last + 20].copy_from_slice(&crc.to_le_bytes());
        refused(&mut device, "does not match the primary");
        // A partition past the usable area.
        let mut device = MemDevice::new(8 << 20, 1000);
        write_gpt(device.data_mut(), &[(2048, 16383)]);
        refused(&mut device, "outside the usable area");
        // A protective MBR and no GPT header at LBA 1.
        let mut device = fresh();
        device.data_mut()[512..520].fill(0);
        let e = disk_layout(&mut device).unwrap_err().to_string();
        assert!(e.contains("protective MBR but no GPT header"), "{e}");
        // A GPT for 4096-byte sectors on a 512-byte device.
        device.data_mut()[4096..4104].copy_from_slice(b"EFI PART");
        let e = disk_layout(&mut device).unwrap_err().to_string();
        assert!(e.contains("another sector size"), "{e}");
    }

    #[test]
    fn metadata_at_the_end_and_hostile_values_refuse() {
        let capacity = 8u64 << 20;
        let plan = OpPlan::new(capacity, 25.0).unwrap();
        // md 1.0 keeps its superblock 8 KiB from the end; 0.90 64 KiB from the end.
        for offset in [capacity - 8192, capacity - 65536] {
            let mut device = MemDevice::new(capacity, 1000);
            device.data_mut()[offset as usize..offset as usize + 4].copy_from_slice(&MD_MAGIC.to_le_bytes());
            let e = apply(&mut device, &plan, &[], 4, 1).unwrap_err().to_string();
            assert!(e.contains("md RAID superblock"), "{e}");
        }
        // A backup GPT header with no primary.
        let mut device = MemDevice::new(capacity, 1000);
        let last = capacity as usize - 512;
        device.data_mut()[last..last + 8].copy_from_slice(b"EFI PART");
        assert!(
            apply(&mut device, &plan, &[], 4, 1)
                .unwrap_err()
                .to_string()
                .contains("no primary")
        );
        // A kernel partition at the end of the u64 range cannot wrap past the check.
        let mut device = MemDevice::new(capacity, 1000);
        let hostile = Partition {
            name: "far".into(),
            start_bytes: u64::MAX - 10,
            len_bytes: u64::MAX,
        };
        assert!(matches!(
            apply(&mut device, &plan, &[hostile], 4, 1).unwrap_err(),
            OpError::PartitionInTail { .. }
        ));
        // A hybrid MBR beside a valid GPT: its own entry in the tail refuses though the GPT's entries fit.
        let mut device = MemDevice::new(capacity, 1000);
        write_gpt(device.data_mut(), &[(2048, 4095)]);
        let e2 = 446 + 16;
        device.data_mut()[e2 + 4] = 0x0c;
        device.data_mut()[e2 + 8..e2 + 12].copy_from_slice(&(12288u32).to_le_bytes());
        device.data_mut()[e2 + 12..e2 + 16].copy_from_slice(&(2048u32).to_le_bytes());
        let e = apply(&mut device, &plan, &[], 4, 1).unwrap_err();
        assert!(
            matches!(e, OpError::PartitionInTail { ref name, .. } if name == "MBR entry 2"),
            "{e}"
        );
        // A GPT whose usable area runs into its own backup.
        let mut device = MemDevice::new(capacity, 1000);
        write_gpt(device.data_mut(), &[]);
        let blocks = capacity / 512;
        device.data_mut()[512 + 48..512 + 56].copy_from_slice(&(blocks - 2).to_le_bytes());
        device.data_mut()[512 + 16..512 + 20].fill(0);
        let crc = crc32(&device.data()[512..512 + 92]);
        device.data_mut()[512 + 16..512 + 20].copy_from_slice(&crc.to_le_bytes());
        assert!(
            disk_layout(&mut device)
                .unwrap_err()
                .to_string()
                .contains("looks damaged")
        );
    }
}
