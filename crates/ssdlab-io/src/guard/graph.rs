//! Which block devices share bytes with which: the partition, loop and holder graph of this machine, read from
//! sysfs and the loop driver, judged by identities (device numbers, inodes), never by path names.
//!
//! Every block device is a node. A node other than a disk of its own stores its bytes on something lower: a
//! partition on a range of its disk, a loop device on a range of its backing block device or regular file (by
//! device and inode, so hard links, bind mounts and renames name the same file), a dm device whose table is all
//! linear and crypt targets on exact ranges of its slaves, and an md, bcache or other dm device somewhere on each
//! of its slaves. A DOS extended partition, which the kernel shows as its first sector or two, spans its logical
//! partitions. From that, [`Graph::relation`] says how any device relates to a target: stacked on it (at any
//! depth), under it, or beside it over the same bytes.
//!
//! It only reads sysfs; the loop driver and the device mapper are asked through the caller's [`LoopOracle`] and
//! [`DmOracle`]. It never writes and never decides what is allowed.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::sys::LoopBacking;

/// A block device number (major, minor).
pub type DevNum = (u32, u32);

/// How deep stacks are followed; deeper ones are cut there (and then still related through what was seen).
pub(crate) const MAX_DEPTH: usize = 32;

/// Where bytes are kept: a block device, or a regular file behind a loop device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Store {
    Device(DevNum),
    File { st_dev: u64, st_ino: u64 },
}

/// What a node stores its bytes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lower {
    /// Exactly `len` bytes at `start` of `store` (a partition, a loop device).
    Range { store: Store, start: u64, len: u64 },
    /// A dm device's linear and crypt targets: each maps `len` bytes of the node from `at` to `start` on a lower
    /// device, exactly.
    Segments(Vec<Segment>),
    /// Somewhere on each of these devices; exactly where is not known here (md, dm, bcache).
    Slaves(Vec<DevNum>),
    /// A loop device whose backing file cannot be identified (deleted, or only visible in another mount
    /// namespace); the text is what sysfs says of it.
    Unknown(String),
}

/// One target of a dm table on an exact range of a lower device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Where on the dm device it begins.
    pub at: u64,
    pub len: u64,
    pub device: DevNum,
    /// Where on the lower device it begins.
    pub start: u64,
}

/// What kind of block device a node is, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Disk,
    Partition,
    /// A loop device, with its backing file as sysfs names it.
    Loop(String),
    /// A device-mapper device, with its dm name.
    DeviceMapper(Option<String>),
    /// An md RAID device, with its level.
    Md(Option<String>),
    /// Any other stacked device (bcache, ...), by kernel name.
    Stacked,
}

#[derive(Debug, Clone)]
pub struct Node {
    pub dev: DevNum,
    /// The kernel's name (`loop3p1`, `dm-0`; a `!` in sysfs is a `/`, as in `cciss/c0d0`).
    pub name: String,
    pub size_bytes: u64,
    pub kind: Kind,
    pub lower: Option<Lower>,
    /// A DOS extended partition (its range below spans its logical partitions).
    pub extended: bool,
    /// For a loop device over a file the graph names by another identity (an overlay's file by its layer
    /// file): the file as the loop driver opened it.
    pub opened_as: Option<(u64, u64)>,
}

impl Node {
    /// The device's path under /dev.
    pub fn dev_path(&self) -> String {
        format!("/dev/{}", self.name)
    }

    /// A kernel holder: md, dm or another stacked device, which the kernel keeps open as long as it exists.
    pub fn is_holder(&self) -> bool {
        matches!(self.lower, Some(Lower::Slaves(_) | Lower::Segments(_)))
    }

    /// A DOS extended partition: a container whose whole extent holds the logical partitions.
    pub fn is_container(&self) -> bool {
        self.kind == Kind::Partition && self.extended
    }
}

/// Asks the loop driver what a loop device is backed by (LOOP_GET_STATUS64 in real use; a table in tests).
pub type LoopOracle<'a> = &'a dyn Fn(&Node) -> Option<LoopBacking>;

/// Asks the device mapper for a dm device's table (DM_TABLE_STATUS in real use; a table in tests).
pub type DmOracle<'a> = &'a dyn Fn(&Node) -> Option<Vec<crate::dm::DmTarget>>;

/// How a device relates to the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Relation {
    /// The target itself.
    Itself,
    /// Stacked on the target (its bytes are on it); `chain` runs from this device down to the target.
    Above { chain: Vec<DevNum> },
    /// The target is stacked on it; `chain` runs from the target down to this device.
    Below { chain: Vec<DevNum> },
    /// Beside the target over the same bytes of `store`; `up` runs from the device down to the store, `down`
    /// from the target down to it.
    Beside {
        store: Store,
        device_chain: Vec<DevNum>,
        target_chain: Vec<DevNum>,
    },
}

/// A range a device covers on a store, and how it got there.
#[derive(Debug, Clone)]
struct Extent {
    store: Store,
    start: u64,
    end: u64,
    /// Devices from the node down to (not including) the store.
    path: Vec<DevNum>,
    /// Some edge on the way was a holder's, whose place on its slave is not known: the range is the whole slave.
    imprecise: bool,
    /// The chain was cut here at [`MAX_DEPTH`]: the store has a lower of its own that was not followed.
    cut: bool,
}

/// Every block device of the machine.
pub struct Graph {
    nodes: BTreeMap<DevNum, Node>,
    /// Backing files by store, as sysfs names them (for messages).
    file_names: BTreeMap<Store, String>,
}

/// The devices sysfs lists, by their canonical sysfs directory and by name.
#[derive(Default)]
struct Devs {
    by_dir: BTreeMap<PathBuf, DevNum>,
    by_name: BTreeMap<String, DevNum>,
}

/// What a partition stands on: its range of the disk whose sysfs directory holds it, or unknown.
fn partition_lower(devs: &Devs, (name, dir): (&str, &Path), start: &str, size_bytes: u64) -> Lower {
    let canonical = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let disk = canonical.parent().and_then(|p| devs.by_dir.get(p)).copied();
    match (disk, start.parse::<u64>()) {
        (Some(disk), Ok(start)) => Lower::Range {
            store: Store::Device(disk),
            start: start.saturating_mul(512),
            len: size_bytes,
        },
        _ => Lower::Unknown(format!("the disk of partition {name}")),
    }
}

/// What a stacked device (dm, md, another holder) stands on. A dm table of linear and crypt targets on its own
/// slaves says exactly which bytes it maps; anything else (striped, thin, snapshot, raid, cache, md) is somewhere
/// on each slave.
fn stacked_lower(devs: &Devs, node: &Node, slaves: &[String], dm_oracle: DmOracle<'_>) -> Lower {
    let slave_devs: Vec<DevNum> = slaves
        .iter()
        .filter_map(|s| devs.by_name.get(&s.replace('!', "/")).copied())
        .collect();
    let segments = matches!(node.kind, Kind::DeviceMapper(_))
        .then(|| dm_oracle(node))
        .flatten()
        .and_then(|table| {
            table
                .iter()
                .map(|t| {
                    let (device, start) = t.lower_range()?;
                    slave_devs.contains(&device).then_some(Segment {
                        at: t.start_bytes,
                        len: t.len_bytes,
                        device,
                        start,
                    })
                })
                .collect::<Option<Vec<Segment>>>()
        })
        .filter(|s| !s.is_empty());
    match segments {
        Some(segments) => Lower::Segments(segments),
        None => Lower::Slaves(slave_devs),
    }
}

impl Graph {
    /// Reads every block device under `sys_root/class/block`, asking `loop_oracle` for loop devices' backings.
    pub fn read(sys_root: &Path, loop_oracle: LoopOracle<'_>, dm_oracle: DmOracle<'_>) -> io::Result<Graph> {
        let class = sys_root.join("class/block");
        let entries = fs::read_dir(&class)
            .map_err(|e| super::context(e, format_args!("cannot list {}", class.display())))?;
        let mut dirs: Vec<(String, PathBuf)> = Vec::new();
        for entry in entries {
            let entry =
                entry.map_err(|e| super::context(e, format_args!("cannot list {}", class.display())))?;
            dirs.push((
                entry.file_name().to_string_lossy().replace('!', "/"),
                entry.path(),
            ));
        }
        let mut devs = Devs::default();
        for (name, dir) in &dirs {
            // A device that went away while we looked is no user.
            if let Some(dev) = read_trimmed(&dir.join("dev")).and_then(|t| parse_dev(&t)) {
                devs.by_dir
                    .insert(fs::canonicalize(dir).unwrap_or_else(|_| dir.clone()), dev);
                devs.by_name.insert(name.clone(), dev);
            }
        }
        let mut graph = Graph {
            nodes: BTreeMap::new(),
            file_names: BTreeMap::new(),
        };
        for (name, dir) in &dirs {
            let Some(&dev) = devs.by_name.get(name) else {
                continue;
            };
            let size_bytes = read_trimmed(&dir.join("size"))
                .and_then(|t| t.parse::<u64>().ok())
                .unwrap_or(0)
                .saturating_mul(512);
            let mut node = Node {
                dev,
                name: name.clone(),
                size_bytes,
                kind: Kind::Disk,
                lower: None,
                extended: false,
                opened_as: None,
            };
            if let Some(start) = read_trimmed(&dir.join("partition")).and(read_trimmed(&dir.join("start"))) {
                node.kind = Kind::Partition;
                node.lower = Some(partition_lower(&devs, (name, dir), &start, size_bytes));
            } else if let Some(backing) = read_trimmed(&dir.join("loop/backing_file")) {
                node.kind = Kind::Loop(backing.clone());
                node.lower = Some(graph.loop_lower(&mut node, backing, loop_oracle));
            } else {
                let slaves = list_names(&dir.join("slaves"));
                if !slaves.is_empty() {
                    node.kind = if dir.join("dm").is_dir() {
                        Kind::DeviceMapper(read_trimmed(&dir.join("dm/name")))
                    } else if dir.join("md").is_dir() {
                        Kind::Md(read_trimmed(&dir.join("md/level")))
                    } else {
                        Kind::Stacked
                    };
                    node.lower = Some(stacked_lower(&devs, &node, &slaves, dm_oracle));
                }
            }
            graph.nodes.insert(dev, node);
        }
        graph.span_extended_partitions(&dirs);
        Ok(graph)
    }

    /// What a loop device stands on, as `loop_oracle` says: a range of a device, of a file (whose name is kept
    /// for messages, and the file as the loop driver opened it), or unknown.
    fn loop_lower(&mut self, node: &mut Node, backing: String, loop_oracle: LoopOracle<'_>) -> Lower {
        let len = node.size_bytes;
        match loop_oracle(node) {
            Some(b) if b.st_rdev != 0 => Lower::Range {
                store: Store::Device((libc::major(b.st_rdev), libc::minor(b.st_rdev))),
                start: b.offset_bytes,
                len,
            },
            Some(b) => {
                node.opened_as = b.opened_as;
                let store = Store::File {
                    st_dev: b.st_dev,
                    st_ino: b.st_ino,
                };
                self.file_names.entry(store).or_insert(backing);
                Lower::Range {
                    store,
                    start: b.offset_bytes,
                    len,
                }
            }
            None => Lower::Unknown(backing),
        }
    }
    /// A DOS extended partition is shown by the kernel as its first sector or two (the table of its first logical
    /// partition), so by its range it overlaps nothing; yet writing it rewrites the chain of logical partitions.
    /// A partition numbered 1 to 4 of at most 4 KiB (1 KiB, or a sector of a 4Kn disk), with logical partitions
    /// (5 and up) of the same disk after it, is taken as one, and its range made to span them all: every logical partition is then beside it.
    fn span_extended_partitions(&mut self, dirs: &[(String, PathBuf)]) {
        let number_of = |name: &str| {
            dirs.iter()
                .find(|(n, _)| n == name)
                .and_then(|(_, dir)| read_trimmed(&dir.join("partition")))
                .and_then(|t| t.parse::<u32>().ok())
        };
        let partitions: Vec<(DevNum, u32, DevNum, u64, u64)> = self
            .nodes
            .values()
            .filter_map(|n| match (&n.kind, &n.lower) {
                (
                    Kind::Partition,
                    Some(Lower::Range {
                        store: Store::Device(disk),
                        start,
                        len,
                    }),
                ) => Some((n.dev, number_of(&n.name)?, *disk, *start, *len)),
                _ => None,
            })
            .collect();
        for &(dev, number, disk, start, len) in &partitions {
            // Two 512-byte sectors, or one logical block on a disk of 4 KiB sectors (msdos.c shows the larger).
            if !(1..=4).contains(&number) || len > 4096 {
                continue;
            }
            let end = partitions
                .iter()
                .filter(|(_, n, d, s, _)| *n >= 5 && *d == disk && *s >= start)
                .map(|(_, _, _, s, l)| s + l)
                .max();
            if let Some(end) = end
                && let Some(node) = self.nodes.get_mut(&dev)
            {
                node.extended = true;
                // Its bytes, as far as the guard is concerned, are its whole extent.
                node.size_bytes = end - start;
                node.lower = Some(Lower::Range {
                    store: Store::Device(disk),
                    start,
                    len: end - start,
                });
            }
        }
    }

    /// The devices that hold `dev` as one of their slaves (md, dm, bcache over it).
    pub fn holders_of(&self, dev: DevNum) -> impl Iterator<Item = &Node> {
        self.nodes.values().filter(move |n| match &n.lower {
            Some(Lower::Slaves(slaves)) => slaves.contains(&dev),
            Some(Lower::Segments(segments)) => segments.iter().any(|s| s.device == dev),
            _ => false,
        })
    }

    pub fn node(&self, dev: DevNum) -> Option<&Node> {
        self.nodes.get(&dev)
    }

    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }

    /// A store's name for messages: a device's kernel name, or a file's name as sysfs gave it.
    pub fn store_name(&self, store: Store) -> String {
        match store {
            Store::Device(dev) => self.name(dev),
            Store::File { st_ino, .. } => self
                .file_names
                .get(&store)
                .map(|p| p.rsplit('/').next().unwrap_or(p).to_string())
                .unwrap_or_else(|| format!("inode {st_ino}")),
        }
    }

    /// A device's kernel name, or its number when it is not in the graph.
    pub fn name(&self, dev: DevNum) -> String {
        self.nodes
            .get(&dev)
            .map(|n| n.name.clone())
            .unwrap_or_else(|| format!("{}:{}", dev.0, dev.1))
    }

    /// Every range `dev` covers, on itself and on everything below it.
    fn extents(&self, dev: DevNum) -> Vec<Extent> {
        let size = self.nodes.get(&dev).map_or(u64::MAX, |n| n.size_bytes);
        let mut out = Vec::new();
        self.extents_into(dev, 0, size, Vec::new(), false, &mut out);
        out
    }

    fn extents_into(
        &self,
        dev: DevNum,
        start: u64,
        end: u64,
        path: Vec<DevNum>,
        imprecise: bool,
        out: &mut Vec<Extent>,
    ) {
        let has_lower = self.nodes.get(&dev).is_some_and(|n| n.lower.is_some());
        out.push(Extent {
            store: Store::Device(dev),
            start,
            end,
            path: path.clone(),
            imprecise,
            cut: has_lower && path.len() >= MAX_DEPTH && !path.contains(&dev),
        });
        if path.len() >= MAX_DEPTH || path.contains(&dev) {
            return;
        }
        let mut below = path;
        below.push(dev);
        match self.nodes.get(&dev).and_then(|n| n.lower.as_ref()) {
            Some(Lower::Range {
                store: Store::Device(lower),
                start: at,
                len,
            }) => {
                let (s, e) = (at.saturating_add(start), at.saturating_add(end.min(*len)));
                self.extents_into(*lower, s, e, below, imprecise, out);
            }
            Some(Lower::Range {
                store: store @ Store::File { .. },
                start: at,
                len,
            }) => out.push(Extent {
                store: *store,
                start: at.saturating_add(start),
                end: at.saturating_add(end.min(*len)),
                path: below,
                imprecise,
                cut: false,
            }),
            Some(Lower::Slaves(slaves)) => {
                for slave in slaves {
                    let size = self.nodes.get(slave).map_or(u64::MAX, |n| n.size_bytes);
                    self.extents_into(*slave, 0, size, below.clone(), true, out);
                }
            }
            Some(Lower::Segments(segments)) => {
                for segment in segments {
                    // The part of [start, end) this segment maps, and where that lies on its device.
                    let from = start.max(segment.at);
                    let to = end.min(segment.at.saturating_add(segment.len));
                    if from < to {
                        let lower_start = segment.start.saturating_add(from - segment.at);
                        let lower_end = segment.start.saturating_add(to - segment.at);
                        self.extents_into(
                            segment.device,
                            lower_start,
                            lower_end,
                            below.clone(),
                            imprecise,
                            out,
                        );
                    }
                }
            }
            Some(Lower::Unknown(_)) | None => {}
        }
    }

    /// How `dev` relates to `target`: None when they share no bytes.
    ///
    /// Two holders beside each other over one slave (two LVM logical volumes of one physical volume) are not
    /// related: neither knows where the other is, and the volume manager keeps them apart. A holder beside a
    /// device whose place is known is assumed to overlap it.
    pub fn relation(&self, target: DevNum, dev: DevNum) -> Option<Relation> {
        if target == dev {
            return Some(Relation::Itself);
        }
        let of_target = self.extents(target);
        let of_dev = self.extents(dev);
        if let Some(e) = of_dev.iter().find(|e| e.store == Store::Device(target)) {
            let mut chain = e.path.clone();
            chain.push(target);
            return Some(Relation::Above { chain });
        }
        if let Some(e) = of_target.iter().find(|e| e.store == Store::Device(dev)) {
            let mut chain = e.path.clone();
            chain.push(dev);
            return Some(Relation::Below { chain });
        }
        for t in &of_target {
            for d in &of_dev {
                let overlaps = t.store == d.store && t.start < d.end && d.start < t.end;
                if overlaps && !(t.imprecise && d.imprecise) {
                    return Some(Relation::Beside {
                        store: t.store,
                        device_chain: d.path.clone(),
                        target_chain: t.path.clone(),
                    });
                }
            }
        }
        None
    }

    /// Whether what `dev` is stored on is followed only part of the way down: a stack deeper than [`MAX_DEPTH`]
    /// devices, whose bottom may be anything.
    pub fn cut_off(&self, dev: DevNum) -> bool {
        self.extents(dev).iter().any(|e| e.cut)
    }

    /// Every loop device stacked, up to [`MAX_DEPTH`] deep, on the regular file (`st_dev`, `st_ino`), with the chain from it
    /// down to the file.
    pub fn above_file(&self, st_dev: u64, st_ino: u64) -> Vec<(DevNum, Vec<DevNum>)> {
        let store = Store::File { st_dev, st_ino };
        self.nodes
            .keys()
            .filter_map(|&dev| {
                let e = self.extents(dev).into_iter().find(|e| e.store == store)?;
                Some((dev, e.path))
            })
            .collect()
    }

    /// The regular files `dev` is stored on, at any depth (a loop device's image), as (device, inode), each
    /// with the chain from `dev` down to it.
    pub fn files_below(&self, dev: DevNum) -> Vec<((u64, u64), Vec<DevNum>)> {
        self.extents(dev)
            .into_iter()
            .filter_map(|e| match e.store {
                Store::File { st_dev, st_ino } => Some(((st_dev, st_ino), e.path)),
                Store::Device(_) => None,
            })
            .collect()
    }

    /// "loop7 -> loop3": a chain of devices by kernel name, each stored on the next.
    pub fn chain_text(&self, chain: &[DevNum]) -> String {
        chain
            .iter()
            .map(|d| self.name(*d))
            .collect::<Vec<_>>()
            .join(" -> ")
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    let text = fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// The entries of a directory, sorted; none when it does not exist.
fn list_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// "MAJ:MIN" (with surrounding whitespace, as sysfs `dev` files have) to numbers.
pub fn parse_dev(text: &str) -> Option<DevNum> {
    let (major, minor) = text.trim().split_once(':')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}
