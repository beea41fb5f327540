//! The mount table and the swap list: which devices are mounted where, and which are swapped on, as this
//! process's mount namespace shows them (/proc/self/mountinfo, /proc/swaps).
//!
//! It parses text and stats mount sources; it never changes anything.

use std::path::Path;

use super::graph::{DevNum, parse_dev};

/// How many mount points of one device are named before the rest are only counted.
const MAX_MOUNT_POINTS_NAMED: usize = 3;

/// The (major, minor, mount point) of every line of `mountinfo` whose device (field 3) is one of `devs`.
/// Mount points come back unescaped (`\040` becomes a space, and so on).
pub fn mounts_of(mountinfo: &str, devs: &[DevNum]) -> Vec<(u32, u32, String)> {
    parse_mountinfo(mountinfo)
        .into_iter()
        .filter(|m| devs.contains(&m.dev))
        .map(|m| (m.dev.0, m.dev.1, m.mount_point))
        .collect()
}

/// One line of /proc/self/mountinfo, the parts the guard uses.
pub(crate) struct MountEntry {
    pub(crate) mount_id: u64,
    pub(crate) dev: DevNum,
    pub(crate) mount_point: String,
    pub(crate) fs_type: String,
    pub(crate) source: String,
    /// The superblock options as mountinfo shows them (still escaped).
    super_options: String,
}

/// Parses mountinfo, skipping lines it does not understand.
///
/// Fields: mount ID, parent ID, MAJ:MIN, root, mount point, options, optional fields..., "-", filesystem
/// type, mount source, superblock options. Spaces inside fields are escaped as octal, so splitting on ' ' is
/// exact.
pub(crate) fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let mount_id = fields.first()?.parse().ok()?;
            let dev = parse_dev(fields.get(2)?)?;
            let mount_point = unescape_octal(fields.get(4)?);
            let separator = 6 + fields.get(6..)?.iter().position(|f| *f == "-")?;
            let fs_type = fields
                .get(separator + 1)
                .map(|s| s.to_string())
                .unwrap_or_default();
            let source = fields
                .get(separator + 2)
                .map(|s| unescape_octal(s))
                .unwrap_or_default();
            let super_options = fields
                .get(separator + 3)
                .map(|s| s.to_string())
                .unwrap_or_default();
            Some(MountEntry {
                mount_id,
                dev,
                mount_point,
                fs_type,
                source,
                super_options,
            })
        })
        .collect()
}

/// The file system type of the mount with this id (statx's `stx_mnt_id`), from mountinfo's text.
pub(crate) fn mount_type_of(mountinfo: &str, mount_id: u64) -> Option<String> {
    parse_mountinfo(mountinfo)
        .into_iter()
        .find(|e| e.mount_id == mount_id)
        .map(|e| e.fs_type)
}

/// Where the mount with this id (statx's `stx_mnt_id`) is mounted, from mountinfo's text.
pub(crate) fn mount_point_of(mountinfo: &str, mount_id: u64) -> Option<String> {
    parse_mountinfo(mountinfo)
        .into_iter()
        .find(|e| e.mount_id == mount_id)
        .map(|e| e.mount_point)
}

/// Where the overlay mount with this id is mounted, and its layer directories: the upper one first, then the
/// lower ones from the top. None when that mount is not an overlay.
///
/// The kernel shows `lowerdir` as one colon-separated list (a colon in a name is written `\:`, its backslash
/// then escaped as `\134`; `::` marks data-only layers) or, for layers added one at a time, as repeated
/// `lowerdir+` and `datadir+` options; every option value has `,`, `=`, spaces and backslashes octal-escaped.
pub(crate) fn overlay_of(mountinfo: &str, mount_id: u64) -> Option<(String, Vec<String>)> {
    let entry = parse_mountinfo(mountinfo)
        .into_iter()
        .find(|e| e.mount_id == mount_id && e.fs_type == "overlay")?;
    let (mut layers, mut lowers) = (Vec::new(), Vec::new());
    for option in entry.super_options.split(',') {
        let Some((key, value)) = option.split_once('=') else {
            continue;
        };
        match key {
            "upperdir" => layers.push(unescape_octal(value)),
            "lowerdir+" | "datadir+" => lowers.push(unescape_octal(value)),
            "lowerdir" => {
                let mut start = 0;
                let mut pieces = Vec::new();
                for (at, _) in value.match_indices(':') {
                    if !value[..at].ends_with("\\134") {
                        pieces.push(&value[start..at]);
                        start = at + 1;
                    }
                }
                pieces.push(&value[start..]);
                lowers.extend(
                    pieces
                        .into_iter()
                        .filter(|dir| !dir.is_empty())
                        .map(|dir| unescape_octal(dir).replace("\\:", ":")),
                );
            }
            _ => {}
        }
    }
    layers.extend(lowers);
    Some((entry.mount_point, layers))
}

/// Whether a mount is of the device `dev`.
///
/// Usually field 3 is the device number. A btrfs mount shows an anonymous device number (major 0) instead,
/// so for those the mount source is stat'ed when it is a path under /dev.
pub(crate) fn mount_is_on(
    entry: &MountEntry,
    dev: DevNum,
    block_dev_of: fn(&Path) -> Option<DevNum>,
) -> bool {
    if entry.dev == dev {
        return true;
    }
    entry.dev.0 == 0
        && entry.source.starts_with("/dev/")
        && block_dev_of(Path::new(&entry.source)) == Some(dev)
}

/// Where any of `devs` is mounted, each mount point once.
pub(crate) fn mount_points<'a>(
    entries: &'a [MountEntry],
    devs: &[DevNum],
    block_dev_of: fn(&Path) -> Option<DevNum>,
) -> Vec<&'a str> {
    let mut points: Vec<&str> = Vec::new();
    for entry in entries {
        if devs.iter().any(|&dev| mount_is_on(entry, dev, block_dev_of))
            && !points.contains(&entry.mount_point.as_str())
        {
            points.push(&entry.mount_point);
        }
    }
    points
}

/// "/a", "/a, /b" or "/a, /b, /c and 2 more places".
pub(crate) fn list_mount_points(points: &[&str]) -> String {
    let named = points[..points.len().min(MAX_MOUNT_POINTS_NAMED)].join(", ");
    match points.len().saturating_sub(MAX_MOUNT_POINTS_NAMED) {
        0 => named,
        1 => format!("{named} and 1 more place"),
        more => format!("{named} and {more} more places"),
    }
}

/// The paths listed in /proc/swaps (after its header line), unescaped.
pub(crate) fn swap_paths(text: &str) -> Vec<String> {
    text.lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().next())
        .map(unescape_octal)
        .collect()
}

/// Undoes the kernel's `\ooo` octal escaping of mount points and swap paths (`\040` is a space).
pub(crate) fn unescape_octal(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        // A match on the escape, then the byte: octal digits that overflow a byte are left as they are.
        let escaped = match bytes.get(i + 1..i + 4) {
            Some(digits) if bytes[i] == b'\\' && digits.iter().all(|d| (b'0'..=b'7').contains(d)) => {
                u8::try_from(digits.iter().fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'))).ok()
            }
            _ => None,
        };
        if let Some(byte) = escaped {
            out.push(byte);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_overlay_names_its_upper_layer_first_then_its_lowers_unescaped() {
        let mountinfo = "\
46 27 0:39 / /tmp/ovt/merged rw,relatime - overlay ov rw,lowerdir=/l/one:/l/t\\040wo:/l/c\\134:olon::/data,upperdir=/u/p,workdir=/u/w,uuid=on
47 27 0:40 / /m2 rw - overlay ov rw,lowerdir+=/a,lowerdir+=/b\\054c,datadir+=/d
48 27 8:2 / /plain rw - ext4 /dev/sda2 rw
";
        assert_eq!(
            overlay_of(mountinfo, 46),
            Some((
                "/tmp/ovt/merged".to_string(),
                vec!["/u/p", "/l/one", "/l/t wo", "/l/c:olon", "/data"]
                    .into_iter()
                    .map(String::from)
                    .collect()
            ))
        );
        assert_eq!(
            overlay_of(mountinfo, 47).map(|(_, layers)| layers),
            Some(vec!["/a".to_string(), "/b,c".to_string(), "/d".to_string()])
        );
        assert_eq!(overlay_of(mountinfo, 48), None, "not an overlay");
        assert_eq!(overlay_of(mountinfo, 49), None, "no such mount");
    }

    const MOUNTINFO: &str = "\
22 1 8:2 / / rw,relatime shared:1 - ext4 /dev/sda2 rw
36 22 7:3 / /mnt/my\\040data rw,relatime shared:12 master:3 - ext4 /dev/loop3 rw
37 22 259:1 /sub /srv/tab\\011and\\134back rw - xfs /dev/loop3p1 rw
38 22 0:44 / /mnt/pool rw,relatime - btrfs /dev/loop3p2 rw,space_cache=v2
garbage line
39 22 0:45 / /proc rw - proc proc rw
";

    #[test]
    fn mountinfo_is_parsed_and_unescaped() {
        assert_eq!(
            mounts_of(MOUNTINFO, &[(7, 3)]),
            vec![(7, 3, "/mnt/my data".to_string())]
        );
        assert_eq!(
            mounts_of(MOUNTINFO, &[(259, 1), (8, 2)]),
            vec![
                (8, 2, "/".to_string()),
                (259, 1, "/srv/tab\tand\\back".to_string())
            ]
        );
        assert!(mounts_of(MOUNTINFO, &[(7, 4)]).is_empty());
        assert_eq!(mount_point_of(MOUNTINFO, 36).as_deref(), Some("/mnt/my data"));
        assert_eq!(mount_point_of(MOUNTINFO, 99), None);
        let entries = parse_mountinfo(MOUNTINFO);
        assert_eq!(entries.len(), 5);
        assert_eq!(entries[1].source, "/dev/loop3");
        assert_eq!(entries[3].source, "/dev/loop3p2");
    }

    #[test]
    fn unescape_leaves_odd_backslashes_alone() {
        assert_eq!(unescape_octal("a\\040b"), "a b");
        assert_eq!(unescape_octal("a\\0"), "a\\0");
        assert_eq!(unescape_octal("a\\999"), "a\\999");
        assert_eq!(unescape_octal("a\\777"), "a\\777");
        assert_eq!(unescape_octal("\\"), "\\");
    }

    #[test]
    fn swap_paths_skip_the_header() {
        let swaps = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n\
                     /dev/sda3                               partition\t8388604\t\t0\t\t-2\n\
                     /swap\\040file                            file\t\t1024\t\t0\t\t-3\n";
        assert_eq!(
            swap_paths(swaps),
            vec!["/dev/sda3".to_string(), "/swap file".to_string()]
        );
    }

    #[test]
    fn mount_points_beyond_three_are_counted() {
        assert_eq!(list_mount_points(&["/a"]), "/a");
        assert_eq!(
            list_mount_points(&["/a", "/b", "/c", "/d"]),
            "/a, /b, /c and 1 more place"
        );
        assert_eq!(
            list_mount_points(&["/a", "/b", "/c", "/d", "/e"]),
            "/a, /b, /c and 2 more places"
        );
    }
}
