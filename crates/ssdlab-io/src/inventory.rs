//! The block devices of this machine as ssdlab sees them (`ssdlab devices`): size, model, rotational flag,
//! discard support, partitions, and whether the safety gate would find them in use, from the same facts the
//! gate uses ([`crate::guard`]).
//!
//! It only reads sysfs and, through the guard, the first mebibyte of each device read-only; it never writes.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::guard::{SYS_ROOT, destructive_findings};
use crate::layout::read_u64;

/// One block device: a whole one, or a partition of one (listed after its disk, with its own state).
#[derive(Debug, Clone, PartialEq)]
pub struct BlockDeviceFacts {
    pub path: PathBuf,
    /// For a partition, its disk's name.
    pub parent: Option<String>,
    /// A DOS extended partition: a container whose extent holds the logical partitions (the kernel shows only
    /// its first sector or two).
    pub container: bool,
    /// The model as the device reports it (empty for virtual devices without one).
    pub model: String,
    pub size_bytes: u64,
    pub logical_block_bytes: u32,
    pub rotational: bool,
    /// The largest discard the device takes; 0 when it takes none.
    pub discard_max_bytes: u64,
    /// Its partitions' names (`sda1`, `nvme0n1p2`).
    pub partitions: Vec<String>,
    /// What the safety gate finds (mounted, swap, held, signatures), in words; `in_use` when anything there
    /// cannot be overridden.
    pub findings: Vec<String>,
    pub in_use: bool,
    /// Why it could not be inspected (no permission to read it, for one).
    pub inspect_error: Option<String>,
}

/// Every whole block device with a size, by name, each followed by its partitions. Devices of size 0 (unbound
/// loop devices, empty drives) are left out.
pub fn block_devices() -> io::Result<Vec<BlockDeviceFacts>> {
    let containers = crate::guard::extended_partitions().unwrap_or_default();
    let block = Path::new(SYS_ROOT).join("block");
    let mut names: Vec<String> = fs::read_dir(&block)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut devices = Vec::new();
    for name in names {
        let dir = block.join(&name);
        let size_bytes = read_u64(&dir.join("size")).unwrap_or(0) * 512;
        if size_bytes == 0 {
            continue;
        }
        let path = Path::new("/dev").join(&name);
        let mut partitions: Vec<String> = fs::read_dir(&dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .filter(|e| e.path().join("partition").exists())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        partitions.sort();
        let (findings, in_use, inspect_error) = judged(&path);
        let rows: Vec<BlockDeviceFacts> = partitions
            .iter()
            .map(|part| {
                let part_dir = dir.join(part);
                let part_path = Path::new("/dev").join(part);
                let (findings, in_use, inspect_error) = judged(&part_path);
                let dev = fs::read_to_string(part_dir.join("dev"))
                    .ok()
                    .and_then(|t| crate::guard::graph::parse_dev(&t));
                BlockDeviceFacts {
                    path: part_path,
                    parent: Some(name.clone()),
                    container: dev.is_some_and(|d| containers.contains(&d)),
                    model: String::new(),
                    size_bytes: read_u64(&part_dir.join("size")).unwrap_or(0) * 512,
                    logical_block_bytes: read_u64(&dir.join("queue/logical_block_size")).unwrap_or(512)
                        as u32,
                    rotational: read_u64(&dir.join("queue/rotational")).unwrap_or(0) == 1,
                    discard_max_bytes: read_u64(&dir.join("queue/discard_max_bytes")).unwrap_or(0),
                    partitions: Vec::new(),
                    findings,
                    in_use,
                    inspect_error,
                }
            })
            .collect();
        devices.push(BlockDeviceFacts {
            parent: None,
            container: false,
            model: fs::read_to_string(dir.join("device/model"))
                .map(|m| m.trim().to_string())
                .unwrap_or_default(),
            size_bytes,
            logical_block_bytes: read_u64(&dir.join("queue/logical_block_size")).unwrap_or(512) as u32,
            rotational: read_u64(&dir.join("queue/rotational")).unwrap_or(0) == 1,
            discard_max_bytes: read_u64(&dir.join("queue/discard_max_bytes")).unwrap_or(0),
            partitions,
            findings,
            in_use,
            inspect_error,
            path,
        });
        devices.extend(rows);
    }
    Ok(devices)
}

/// What the safety gate finds on the device at `path`, in words; whether any of it is in use; or why it could
/// not be inspected.
fn judged(path: &Path) -> (Vec<String>, bool, Option<String>) {
    match destructive_findings(path) {
        Ok(found) => (
            found.iter().map(|f| f.to_string()).collect(),
            found.iter().any(|f| f.in_use),
            None,
        ),
        Err(e) => (Vec::new(), false, Some(e.to_string())),
    }
}
