//! The guard's questions over fake sysfs and procfs trees laid out as the kernel lays them out: devices under
//! `sys/devices`, partitions inside their disk's directory, `sys/class/block/NAME` linking to each.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;

/// A fake sysfs + procfs tree in a fresh temporary directory, removed on drop.
struct Tree {
    root: PathBuf,
    /// What the loop driver says of each loop device, by name.
    loops: BTreeMap<String, LoopBacking>,
    /// Devices some other program holds open exclusively, by name.
    claimed: Vec<String>,
    /// Devices the exclusive-open probe cannot ask (no permission, no device node), by name.
    cannot_tell: Vec<String>,
    /// What the device mapper says of each dm device's table, by name.
    tables: BTreeMap<String, Vec<crate::dm::DmTarget>>,
}

impl Tree {
    fn new(name: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!("ssdlab-guard-{}-{name}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("proc/self")).unwrap();
        fs::create_dir_all(root.join("sys/class/block")).unwrap();
        fs::write(
            root.join("proc/self/mountinfo"),
            "22 1 8:2 / / rw - ext4 /dev/sda2 rw\n",
        )
        .unwrap();
        fs::write(root.join("proc/swaps"), "Filename Type Size Used Priority\n").unwrap();
        let tree = Tree {
            root,
            loops: BTreeMap::new(),
            claimed: Vec::new(),
            cannot_tell: Vec::new(),
            tables: BTreeMap::new(),
        };
        // The device under test: loop3, 7:3, 64 MiB.
        tree.disk("loop3", "7:3", 64 << 20);
        tree
    }

    fn file(&self, rel: &str, text: &str) {
        let path = self.root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn link(&self, name: &str, dir: &str) {
        let _ = fs::remove_file(self.root.join("sys/class/block").join(name));
        std::os::unix::fs::symlink(
            self.root.join("sys").join(dir),
            self.root.join("sys/class/block").join(name),
        )
        .unwrap();
    }

    fn disk(&self, name: &str, dev: &str, size: u64) {
        let dir = format!("sys/devices/{name}");
        self.file(&format!("{dir}/dev"), &format!("{dev}\n"));
        self.file(&format!("{dir}/size"), &format!("{}\n", size / 512));
        self.link(name, &format!("devices/{name}"));
    }

    fn partition(&self, disk: &str, name: &str, number: u32, dev: &str, start: u64, size: u64) {
        let dir = format!("sys/devices/{disk}/{name}");
        self.file(&format!("{dir}/dev"), &format!("{dev}\n"));
        self.file(&format!("{dir}/partition"), &format!("{number}\n"));
        self.file(&format!("{dir}/start"), &format!("{}\n", start / 512));
        self.file(&format!("{dir}/size"), &format!("{}\n", size / 512));
        self.link(name, &format!("devices/{disk}/{name}"));
    }

    /// A loop device over `backing` at `offset`.
    fn loop_over(&mut self, name: &str, dev: &str, size: u64, backing: Over<'_>, offset: u64) {
        self.disk(name, dev, size);
        let (path, st_dev, st_ino, st_rdev) = match backing {
            // A device node on devtmpfs (0:6), with an inode of its own there.
            Over::Device(path, (major, minor), ino) => {
                (path, libc::makedev(0, 6), ino, libc::makedev(major, minor))
            }
            Over::File(path, ino) => (path, libc::makedev(254, 0), ino, 0),
        };
        self.file(
            &format!("sys/devices/{name}/loop/backing_file"),
            &format!("{path}\n"),
        );
        self.loops.insert(
            name.to_string(),
            LoopBacking {
                st_dev,
                st_ino,
                st_rdev,
                offset_bytes: offset,
                sizelimit_bytes: 0,
                opened_as: None,
            },
        );
    }

    fn holder(&self, name: &str, dev: &str, slaves: &[&str], dm_name: Option<&str>) {
        self.disk(name, dev, 32 << 20);
        for slave in slaves {
            fs::create_dir_all(self.root.join(format!("sys/devices/{name}/slaves/{slave}"))).unwrap();
        }
        match dm_name {
            Some(n) => self.file(&format!("sys/devices/{name}/dm/name"), &format!("{n}\n")),
            None => self.file(&format!("sys/devices/{name}/md/level"), "raid1\n"),
        }
    }

    /// A dm device's table: linear targets `(at, len, lower, start)` in bytes.
    fn linear(&mut self, name: &str, segments: &[(u64, u64, &str, u64)]) {
        self.tables.insert(
            name.to_string(),
            segments
                .iter()
                .map(|&(at, len, lower, start)| crate::dm::DmTarget {
                    start_bytes: at,
                    len_bytes: len,
                    kind: "linear".into(),
                    params: format!("{lower} {}", start / 512),
                })
                .collect(),
        );
    }

    fn mountinfo(&self, lines: &str) {
        self.file("proc/self/mountinfo", lines);
    }

    /// Runs `ask` with a probe over this tree: its loop devices' backings and the devices claimed elsewhere.
    fn with_probe<T>(&self, ask: impl FnOnce(&Probe<'_>) -> T) -> T {
        let loop_backing = |n: &Node| self.loops.get(&n.name).copied();
        let dm_table = |n: &Node| self.tables.get(&n.name).cloned();
        let claimed = |n: &Node| {
            if self.claimed.contains(&n.name) {
                Claim::Claimed
            } else if self.cannot_tell.contains(&n.name) {
                Claim::CannotTell("no permission")
            } else {
                Claim::Free
            }
        };
        ask(&Probe {
            sys_root: &self.root.join("sys"),
            proc_root: &self.root.join("proc"),
            block_dev_of: fake_block_dev_of,
            loop_backing: &loop_backing,
            dm_table: &dm_table,
            claimed: &claimed,
        })
    }

    fn uses(&self, target: DevNum, claim: OwnClaim) -> io::Result<Vec<Finding>> {
        self.with_probe(|probe| uses_with(probe, target, claim))
    }

    fn file_uses(&self, st_dev: u64, st_ino: u64) -> Vec<Finding> {
        self.with_probe(|probe| file_uses_with(probe, st_dev, st_ino).unwrap())
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// What a fake loop device is over: a block device (its node's path, number and inode) or a regular file (its
/// path and inode, on device 254:0).
enum Over<'a> {
    Device(&'a str, DevNum, u64),
    File(&'a str, u64),
}

/// Pretends /dev/loop3p2 and /dev/zram0 are block devices; nothing else is.
fn fake_block_dev_of(path: &Path) -> Option<DevNum> {
    match path.to_str()? {
        "/dev/loop3p2" => Some((259, 1)),
        "/dev/zram0" => Some((252, 0)),
        _ => None,
    }
}

fn whats(found: &[Finding]) -> Vec<&str> {
    found.iter().map(|f| f.what.as_str()).collect()
}

fn in_use(found: &[Finding]) -> Vec<bool> {
    found.iter().map(|f| f.in_use).collect()
}

const LOOP3: DevNum = (7, 3);

#[test]
fn an_idle_device_has_no_findings() {
    let tree = Tree::new("idle");
    tree.partition("loop3", "loop3p1", 1, "259:0", 1 << 20, 8 << 20);
    assert_eq!(tree.uses(LOOP3, OwnClaim::Probe).unwrap(), vec![]);
}

#[test]
fn a_device_missing_from_sysfs_or_a_missing_mountinfo_is_an_error_and_missing_swaps_is_not() {
    let tree = Tree::new("missing");
    let err = tree.uses((7, 99), OwnClaim::Probe).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::NotFound);
    assert!(err.to_string().contains("sysfs"), "{err}");
    fs::remove_file(tree.root.join("proc/swaps")).unwrap();
    assert_eq!(tree.uses(LOOP3, OwnClaim::Probe).unwrap(), vec![]);
    fs::remove_file(tree.root.join("proc/self/mountinfo")).unwrap();
    assert!(tree.uses(LOOP3, OwnClaim::Probe).is_err());
}

#[test]
fn mounted_partitions_are_found_with_their_mount_points() {
    let tree = Tree::new("mounted");
    tree.partition("loop3", "loop3p1", 1, "259:0", 1 << 20, 8 << 20);
    tree.partition("loop3", "loop3p2", 2, "259:1", 9 << 20, 8 << 20);
    tree.mountinfo(
        "22 1 8:2 / / rw - ext4 /dev/sda2 rw\n\
         36 22 259:0 / /mnt/my\\040data rw,relatime shared:12 - ext4 /dev/loop3p1 rw\n\
         37 22 259:0 / /var/bind rw,relatime shared:12 - ext4 /dev/loop3p1 rw\n\
         38 22 0:51 / /mnt/btr rw,relatime - btrfs /dev/loop3p2 rw\n",
    );
    let found = tree.uses(LOOP3, OwnClaim::Probe).unwrap();
    assert_eq!(
        whats(&found),
        vec![
            "/dev/loop3p1 is mounted at /mnt/my data, /var/bind",
            "/dev/loop3p2 is mounted at /mnt/btr",
        ]
    );
    assert_eq!(in_use(&found), vec![true, true]);
}

#[test]
fn the_whole_device_mounted_is_it() {
    let tree = Tree::new("whole");
    tree.mountinfo("36 22 7:3 / /mnt rw - ext4 /dev/loop3 rw\n");
    assert_eq!(
        whats(&tree.uses(LOOP3, OwnClaim::Probe).unwrap()),
        vec!["it is mounted at /mnt"]
    );
}

#[test]
fn a_loop_device_stacked_on_the_target_at_any_depth_is_found_and_a_mount_on_it_is_in_use() {
    // loop7 at 1 MiB of loop3, loop9 at 0 of loop7 (mount -o loop,offset= twice), loop9 mounted.
    let mut tree = Tree::new("stacked");
    tree.loop_over(
        "loop7",
        "7:7",
        32 << 20,
        Over::Device("/dev/loop3", LOOP3, 94),
        1 << 20,
    );
    tree.loop_over(
        "loop9",
        "7:9",
        16 << 20,
        Over::Device("/dev/loop7", (7, 7), 95),
        0,
    );
    tree.mountinfo("40 22 7:9 / /mnt/x rw - ext4 /dev/loop9 rw\n");
    let found = tree.uses(LOOP3, OwnClaim::Probe).unwrap();
    assert_eq!(
        whats(&found),
        vec![
            "/dev/loop7 is a loop device over it (loop7 -> loop3)",
            "/dev/loop9 is mounted at /mnt/x (loop9 -> loop7 -> loop3)",
        ]
    );
    assert_eq!(in_use(&found), vec![false, true]);
    // Unmounted, the stack is a sign of use that --force may override; claimed by a virtual machine, it is in use.
    tree.mountinfo("22 1 8:2 / / rw - ext4 /dev/sda2 rw\n");
    assert_eq!(
        in_use(&tree.uses(LOOP3, OwnClaim::Probe).unwrap()),
        vec![false, false]
    );
    tree.claimed.push("loop9".into());
    let found = tree.uses(LOOP3, OwnClaim::Probe).unwrap();
    assert_eq!(
        found[1].what,
        "/dev/loop9 is open exclusively by another program or kernel subsystem, such as a mount in another \
         namespace or a virtual machine (loop9 -> loop7 -> loop3)"
    );
    assert!(found[1].in_use);
}

#[test]
fn a_loop_device_over_a_partition_of_the_target_is_stacked_on_it() {
    let mut tree = Tree::new("over-partition");
    tree.partition("loop3", "loop3p1", 1, "259:0", 1 << 20, 8 << 20);
    tree.loop_over(
        "loop7",
        "7:7",
        8 << 20,
        Over::Device("/dev/loop3p1", (259, 0), 96),
        0,
    );
    tree.mountinfo("40 22 7:7 / /mnt/y rw - ext4 /dev/loop7 rw\n");
    let found = tree.uses(LOOP3, OwnClaim::HeldByCaller).unwrap();
    assert_eq!(
        found[0].what,
        "/dev/loop7 is mounted at /mnt/y (loop7 -> loop3p1 -> loop3)"
    );
    assert!(found[0].in_use);
}

#[test]
fn loop_devices_over_the_same_file_are_found_by_inode_and_overlapping_range_not_by_path() {
    // loop3 and loop5 are over one inode under two names (a hard link or a bind mount); loop6 is over another
    // file with the same name; loop8 is over the same inode past loop3's end.
    let mut tree = Tree::new("siblings");
    tree.loop_over("loop3", "7:3", 64 << 20, Over::File("/images/disk.img", 1234), 0);
    tree.loop_over(
        "loop5",
        "7:5",
        16 << 20,
        Over::File("/mnt/bind/hardlink.img", 1234),
        1 << 20,
    );
    tree.loop_over("loop6", "7:6", 64 << 20, Over::File("/images/disk.img", 9999), 0);
    tree.loop_over(
        "loop8",
        "7:8",
        16 << 20,
        Over::File("/images/disk.img", 1234),
        64 << 20,
    );
    tree.mountinfo(
        "36 22 7:5 / /mnt/offset rw - ext4 /dev/loop5 rw\n\
         40 22 7:6 / /mnt/other rw - ext4 /dev/loop6 rw\n\
         41 22 7:8 / /mnt/after rw - ext4 /dev/loop8 rw\n",
    );
    let found = tree.uses(LOOP3, OwnClaim::Probe).unwrap();
    assert_eq!(
        whats(&found),
        vec!["/dev/loop5 is mounted at /mnt/offset (loop5 -> disk.img <- loop3)",]
    );
    assert!(found[0].in_use);
    // Unmounted, it is a sign of use that --force may override.
    tree.mountinfo("22 1 8:2 / / rw - ext4 /dev/sda2 rw\n");
    let found = tree.uses(LOOP3, OwnClaim::Probe).unwrap();
    assert_eq!(
        whats(&found),
        vec!["/dev/loop5 is a loop device over the same bytes (loop5 -> disk.img <- loop3)"]
    );
    assert!(!found[0].in_use);
}

#[test]
fn a_device_the_target_is_stored_on_is_in_use_when_mounted() {
    // loop7 is a loop device over the whole of loop3, which is mounted: writing loop7 writes loop3's file system.
    let mut tree = Tree::new("below");
    tree.loop_over("loop7", "7:7", 64 << 20, Over::Device("/dev/loop3", LOOP3, 94), 0);
    tree.mountinfo("36 22 7:3 / /mnt rw - ext4 /dev/loop3 rw\n");
    let found = tree.uses((7, 7), OwnClaim::HeldByCaller).unwrap();
    assert_eq!(
        whats(&found),
        vec!["/dev/loop3 is mounted at /mnt (loop7 -> loop3)"]
    );
    assert!(found[0].in_use);
}

#[test]
fn a_device_the_target_is_stored_on_claimed_elsewhere_is_in_use_unless_it_is_a_partitioned_disk() {
    // The red team's F1: loop7 over loop3, which is mounted only in another mount namespace (so not in our
    // mountinfo, but claimed).
    let mut tree = Tree::new("below-claimed");
    tree.loop_over(
        "loop7",
        "7:7",
        32 << 20,
        Over::Device("/dev/loop3", LOOP3, 94),
        3 << 20,
    );
    tree.claimed.push("loop3".into());
    let found = tree.uses((7, 7), OwnClaim::HeldByCaller).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].in_use && found[0].what.starts_with("/dev/loop3 is open exclusively"),
        "{found:?}"
    );
    // A disk with partitions under the target is claimed whenever any partition is: only overlapping
    // partitions count, and they are asked themselves.
    let mut tree = Tree::new("below-partitioned");
    tree.partition("loop3", "loop3p1", 1, "259:0", 1 << 20, 8 << 20);
    tree.partition("loop3", "loop3p2", 2, "259:1", 9 << 20, 8 << 20);
    tree.loop_over(
        "loop7",
        "7:7",
        8 << 20,
        Over::Device("/dev/loop3", LOOP3, 94),
        9 << 20,
    );
    tree.claimed.extend(["loop3".to_string(), "loop3p1".to_string()]);
    assert_eq!(tree.uses((7, 7), OwnClaim::HeldByCaller).unwrap(), vec![]);
    tree.claimed.push("loop3p2".into());
    let found = tree.uses((7, 7), OwnClaim::HeldByCaller).unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].what.starts_with("/dev/loop3p2 is open exclusively"),
        "{found:?}"
    );
}

#[test]
fn a_loop_device_whose_partition_is_mounted_is_named_once() {
    let mut tree = Tree::new("partition-of-loop");
    tree.loop_over("loop7", "7:7", 32 << 20, Over::Device("/dev/loop3", LOOP3, 94), 0);
    tree.partition("loop7", "loop7p1", 1, "259:5", 1 << 20, 8 << 20);
    tree.claimed.push("loop7".into());
    tree.mountinfo("36 22 259:5 / /mnt rw - ext4 /dev/loop7p1 rw\n");
    let found = tree.uses(LOOP3, OwnClaim::HeldByCaller).unwrap();
    // The mount is named once; loop7 itself is only the stack it sits on, not a second claim.
    assert_eq!(
        whats(&found),
        vec![
            "/dev/loop7 is a loop device over it (loop7 -> loop3)",
            "/dev/loop7p1 is mounted at /mnt (loop7p1 -> loop7 -> loop3)"
        ]
    );
}

#[test]
fn a_mounted_partition_beside_the_target_is_no_use_of_it() {
    let tree = Tree::new("partitions");
    tree.partition("loop3", "loop3p1", 1, "259:0", 1 << 20, 8 << 20);
    tree.partition("loop3", "loop3p2", 2, "259:1", 9 << 20, 8 << 20);
    tree.mountinfo("36 22 259:0 / /mnt rw - ext4 /dev/loop3p1 rw\n");
    assert_eq!(tree.uses((259, 1), OwnClaim::HeldByCaller).unwrap(), vec![]);
}

#[test]
fn holders_are_in_use_and_named_with_their_stack() {
    let tree = Tree::new("holders");
    tree.partition("loop3", "loop3p1", 1, "259:0", 1 << 20, 8 << 20);
    tree.partition("loop3", "loop3p2", 2, "259:1", 9 << 20, 8 << 20);
    tree.holder("dm-0", "253:0", &["loop3p2"], Some("vg0-data"));
    tree.holder("md127", "9:127", &["loop3p1"], None);
    let found = tree.uses(LOOP3, OwnClaim::Probe).unwrap();
    assert_eq!(
        whats(&found),
        vec![
            "/dev/dm-0, a device-mapper/LVM device (vg0-data), is active over it (dm-0 -> loop3p2 -> loop3)",
            "/dev/md127, an md RAID device (raid1), is active over it (md127 -> loop3p1 -> loop3)",
        ]
    );
    assert_eq!(in_use(&found), vec![true, true]);
}

#[test]
fn two_logical_volumes_of_one_physical_volume_do_not_use_each_other_but_a_loop_over_the_disk_does() {
    let mut tree = Tree::new("lvm");
    tree.partition("loop3", "loop3p1", 1, "259:0", 1 << 20, 32 << 20);
    tree.holder("dm-0", "253:0", &["loop3p1"], Some("vg0-a"));
    tree.holder("dm-1", "253:1", &["loop3p1"], Some("vg0-b"));
    tree.mountinfo("36 22 253:1 / /srv rw - ext4 /dev/mapper/vg0-b rw\n");
    let on_dm0 = tree.uses((253, 0), OwnClaim::HeldByCaller).unwrap();
    assert!(on_dm0.iter().all(|f| !f.what.contains("dm-1")), "{on_dm0:?}");
    // A loop device over the whole disk reaches dm-1's bytes, wherever on the volume they are.
    tree.loop_over("loop7", "7:7", 64 << 20, Over::Device("/dev/loop3", LOOP3, 94), 0);
    let on_loop7 = tree.uses((7, 7), OwnClaim::HeldByCaller).unwrap();
    assert!(
        on_loop7
            .iter()
            .any(|f| f.in_use && f.what.starts_with("/dev/dm-1 is mounted at /srv")),
        "{on_loop7:?}"
    );
}

#[test]
fn a_device_mapper_target_is_fine_by_itself_and_in_use_when_something_holds_it() {
    let tree = Tree::new("dm");
    tree.holder("dm-4", "253:4", &["loop3"], Some("vg0-root"));
    assert_eq!(tree.uses((253, 4), OwnClaim::Probe).unwrap(), vec![]);
    tree.holder("bcache0", "250:0", &["dm-4"], Some("cache"));
    let found = tree.uses((253, 4), OwnClaim::Probe).unwrap();
    assert_eq!(
        whats(&found),
        vec!["/dev/bcache0, a device-mapper/LVM device (cache), is active over it (bcache0 -> dm-4)"]
    );
}

#[test]
fn a_swap_partition_is_in_use() {
    let tree = Tree::new("swap");
    tree.partition("loop3", "loop3p1", 1, "259:0", 1 << 20, 8 << 20);
    tree.partition("loop3", "loop3p2", 2, "259:1", 9 << 20, 8 << 20);
    tree.file(
        "proc/swaps",
        "Filename\tType\tSize\tUsed\tPriority\n\
         /dev/zram0                              partition\t1024\t0\t100\n\
         /dev/loop3p2                            partition\t1024\t0\t-2\n\
         /swap\\040file                          file\t1024\t0\t-3\n",
    );
    let found = tree.uses(LOOP3, OwnClaim::Probe).unwrap();
    assert_eq!(whats(&found), vec!["/dev/loop3p2 is in use as swap"]);
}

#[test]
fn an_exclusive_claim_is_reported_only_when_nothing_else_explains_it_and_never_when_the_caller_holds_it() {
    let mut tree = Tree::new("busy");
    tree.claimed.push("loop3".into());
    let found = tree.uses(LOOP3, OwnClaim::Probe).unwrap();
    assert_eq!(found.len(), 1);
    assert!(found[0].what.starts_with("it is open exclusively"), "{found:?}");
    assert_eq!(tree.uses(LOOP3, OwnClaim::HeldByCaller).unwrap(), vec![]);
    tree.mountinfo("36 22 7:3 / /mnt rw - ext4 /dev/loop3 rw\n");
    assert_eq!(
        whats(&tree.uses(LOOP3, OwnClaim::Probe).unwrap()),
        vec!["it is mounted at /mnt"]
    );
}

#[test]
fn a_loop_device_whose_backing_cannot_be_identified_is_in_use_only_when_used() {
    let tree = Tree::new("unknown");
    tree.disk("loop4", "7:4", 16 << 20);
    tree.file("sys/devices/loop4/loop/backing_file", "/gone.img (deleted)\n");
    assert_eq!(tree.uses(LOOP3, OwnClaim::HeldByCaller).unwrap(), vec![]);
    tree.mountinfo("36 22 7:4 / /mnt rw - ext4 /dev/loop4 rw\n");
    let found = tree.uses(LOOP3, OwnClaim::HeldByCaller).unwrap();
    assert_eq!(
        whats(&found),
        vec![
            "/dev/loop4 is in use and its backing file (/gone.img (deleted)) cannot be identified, so it may be this device"
        ]
    );
}

#[test]
fn a_file_is_in_use_when_a_loop_stack_over_it_is_mounted() {
    let mut tree = Tree::new("file");
    let (st_dev, st_ino) = (libc::makedev(254, 0), 777);
    tree.loop_over("loop4", "7:4", 16 << 20, Over::File("/images/f.img", 777), 0);
    assert_eq!(tree.file_uses(st_dev, st_ino), vec![]);
    tree.loop_over("loop7", "7:7", 8 << 20, Over::Device("/dev/loop4", (7, 4), 98), 0);
    tree.mountinfo("36 22 7:7 / /mnt rw - ext4 /dev/loop7 rw\n");
    let found = tree.file_uses(st_dev, st_ino);
    assert_eq!(
        whats(&found),
        vec!["/dev/loop7 is mounted at /mnt (loop7 -> loop4 -> f.img)"]
    );
    assert_eq!(tree.file_uses(st_dev, 778), vec![]);
}

#[test]
fn a_non_block_device_is_refused_as_input() {
    let err = destructive_findings(Path::new("/proc/self/mountinfo")).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert!(destructive_findings(Path::new("/nonexistent/ssdlab-guard")).is_err());
}

#[test]
fn signatures_are_named_by_libblkid_s_type_with_their_place() {
    let s = |type_name: &str, usage, offset| {
        signature_finding(&Signature {
            type_name: type_name.into(),
            offset_bytes: offset,
            usage,
        })
    };
    assert_eq!(
        s("ext4", Usage::Filesystem, Some(1080)).what,
        "it carries a file system: ext4 (at byte 1080)"
    );
    let gpt = s("gpt", Usage::PartitionTable, Some(67108352));
    assert_eq!(gpt.what, "it carries a partition table: gpt (at byte 67108352)");
    assert!(gpt.partition_table && !gpt.in_use);
    assert!(!s("linux_raid_member", Usage::Raid, None).partition_table);
}

/// The second red team: as non-root, a loop device over the file that cannot be probed for a claim, or a mounted
/// loop device whose backing cannot be identified, was taken for free and the file written.
#[test]
fn a_file_is_in_use_when_a_loop_over_it_cannot_be_probed_or_a_used_loop_cannot_be_identified() {
    let mut tree = Tree::new("file-cannot-tell");
    let (st_dev, st_ino) = (libc::makedev(254, 0), 777);
    tree.loop_over("loop4", "7:4", 16 << 20, Over::File("/images/f.img", 777), 0);
    tree.cannot_tell.push("loop4".into());
    assert_eq!(
        whats(&tree.file_uses(st_dev, st_ino)),
        vec![
            "/dev/loop4 cannot be checked for another exclusive opener (no permission), so it may be in use (loop4 -> f.img)"
        ]
    );
    assert_eq!(
        tree.file_uses(st_dev, 778),
        vec![],
        "only loops over this file are asked"
    );
    tree.cannot_tell.clear();
    tree.disk("loop5", "7:5", 16 << 20);
    tree.file("sys/devices/loop5/loop/backing_file", "/gone.img (deleted)\n");
    assert_eq!(
        tree.file_uses(st_dev, st_ino),
        vec![],
        "an unused unknown loop is no sign"
    );
    tree.mountinfo("36 22 7:5 / /mnt rw - ext4 /dev/loop5 rw\n");
    assert_eq!(
        whats(&tree.file_uses(st_dev, st_ino)),
        vec![
            "/dev/loop5 is in use and its backing file (/gone.img (deleted)) cannot be identified, so it may be this file"
        ]
    );
}

/// The second red team: a mounted stack of 33 loop devices over a file was taken for free (the walk stops at 32
/// devices). A stack too deep to follow is now in use whatever is at its bottom.
#[test]
fn a_used_stack_deeper_than_the_walk_follows_is_in_use() {
    let mut tree = Tree::new("deep");
    let (st_dev, st_ino) = (libc::makedev(254, 0), 777);
    tree.loop_over("loop10", "7:10", 16 << 20, Over::File("/images/f.img", 777), 0);
    let top = 10 + graph::MAX_DEPTH as u32;
    for n in 11..=top {
        let below = format!("/dev/loop{}", n - 1);
        tree.loop_over(
            &format!("loop{n}"),
            &format!("7:{n}"),
            16 << 20,
            Over::Device(&below, (7, n - 1), 1000 + u64::from(n)),
            0,
        );
    }
    assert_eq!(
        tree.file_uses(st_dev, st_ino),
        vec![],
        "unused, the stack is no sign"
    );
    tree.mountinfo(&format!("36 22 7:{top} / /mnt rw - ext4 /dev/loop{top} rw\n"));
    let uses = tree.file_uses(st_dev, st_ino);
    let found = whats(&uses);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with(&format!(
            "/dev/loop{top} is in use and stacked more than 32 devices deep"
        )),
        "{found:?}"
    );
    // One device shallower, the stack is followed to the file and named.
    tree.mountinfo(&format!(
        "36 22 7:{} / /mnt rw - ext4 /dev/loop{} rw\n",
        top - 1,
        top - 1
    ));
    let uses = tree.file_uses(st_dev, st_ino);
    let found = whats(&uses);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("is mounted at /mnt (loop"), "{found:?}");
}

/// #45 defect 12: a dm or md device whose slaves its own stack holds is free: the kernel's claim on the slave is
/// the target's own (every red-team run on an unused LV, md array or LUKS volume was refused with "open
/// exclusively by another program"). Two logical volumes of one volume group are apart by their tables; an alias
/// mapping the same bytes as a mounted volume (`dmsetup create alias --table "$(dmsetup table vg-a)"`) is in use.
#[test]
fn an_unused_stack_is_free_and_an_alias_of_a_mounted_volume_is_not() {
    let mut tree = Tree::new("dm-stack");
    tree.partition("loop3", "loop3p1", 1, "259:0", 1 << 20, 48 << 20);
    tree.partition("loop3", "loop3p2", 2, "259:1", 49 << 20, 8 << 20);
    tree.partition("loop3", "loop3p3", 3, "259:2", 57 << 20, 7 << 20);
    // Two LVs of one PV on loop3p1, 16 MiB each, one after the other; an md RAID1 over p2 and p3.
    tree.holder("dm-0", "253:0", &["loop3p1"], Some("vg-a"));
    tree.holder("dm-1", "253:1", &["loop3p1"], Some("vg-b"));
    tree.linear("dm-0", &[(0, 16 << 20, "259:0", 1 << 20)]);
    tree.linear("dm-1", &[(0, 16 << 20, "259:0", 17 << 20)]);
    tree.holder("md0", "9:0", &["loop3p2", "loop3p3"], None);
    // The kernel holders claim their slaves.
    tree.claimed
        .extend(["loop3p1", "loop3p2", "loop3p3", "loop3"].map(String::from));
    assert_eq!(
        tree.uses((253, 0), OwnClaim::HeldByCaller).unwrap(),
        vec![],
        "an unused LV is free"
    );
    assert_eq!(
        tree.uses((9, 0), OwnClaim::HeldByCaller).unwrap(),
        vec![],
        "an unused md array is free"
    );
    // vg-b mounted: vg-a is still free (other bytes).
    tree.mountinfo("36 22 253:1 / /srv rw - ext4 /dev/mapper/vg-b rw\n");
    assert_eq!(tree.uses((253, 0), OwnClaim::HeldByCaller).unwrap(), vec![]);
    // An alias of vg-b: the same bytes, so vg-b's mount is its use, and it is a holder beside it.
    tree.holder("dm-2", "253:2", &["loop3p1"], Some("alias"));
    tree.linear("dm-2", &[(0, 16 << 20, "259:0", 17 << 20)]);
    let found = tree.uses((253, 2), OwnClaim::HeldByCaller).unwrap();
    assert!(found.iter().all(|f| f.in_use), "{found:?}");
    assert!(
        found
            .iter()
            .any(|f| f.what.starts_with("/dev/dm-1 is mounted at /srv")),
        "{found:?}"
    );
    // Without tables (not root), two holders of one slave are not related, as before: no false alarm.
    tree.tables.clear();
    assert_eq!(tree.uses((253, 0), OwnClaim::HeldByCaller).unwrap(), vec![]);
}

/// #45 defect 11: a DOS extended partition is shown by the kernel as its first 1 KiB, so it overlapped nothing;
/// it holds its logical partitions, and is in use while one of them is mounted or held (an LVM PV on one).
#[test]
fn an_extended_partition_holds_its_logical_partitions() {
    let tree = Tree::new("extended");
    tree.partition("loop3", "loop3p1", 1, "259:0", 1 << 20, 8 << 20);
    tree.partition("loop3", "loop3p2", 2, "259:1", 9 << 20, 1024);
    tree.partition("loop3", "loop3p5", 5, "259:2", 10 << 20, 8 << 20);
    tree.partition("loop3", "loop3p6", 6, "259:3", 19 << 20, 8 << 20);
    assert_eq!(
        tree.uses((259, 1), OwnClaim::HeldByCaller).unwrap(),
        vec![],
        "nothing uses it yet"
    );
    tree.mountinfo("36 22 259:3 / /data rw - ext4 /dev/loop3p6 rw\n");
    let found = tree.uses((259, 1), OwnClaim::HeldByCaller).unwrap();
    assert_eq!(in_use(&found), vec![true], "{found:?}");
    assert!(
        found[0].what.starts_with("/dev/loop3p6 is mounted at /data"),
        "{found:?}"
    );
    // A logical partition is still apart from its neighbour, and the primary one from both.
    assert_eq!(tree.uses((259, 2), OwnClaim::HeldByCaller).unwrap(), vec![]);
    assert_eq!(tree.uses((259, 0), OwnClaim::HeldByCaller).unwrap(), vec![]);
    tree.mountinfo("22 1 8:2 / / rw - ext4 /dev/sda2 rw\n");
    tree.holder("dm-0", "253:0", &["loop3p5"], Some("vg-pv-on-logical"));
    let found = tree.uses((259, 1), OwnClaim::HeldByCaller).unwrap();
    assert!(
        found
            .iter()
            .any(|f| f.in_use && f.what.starts_with("/dev/loop3p5 is held by /dev/dm-0")),
        "{found:?}"
    );
}
