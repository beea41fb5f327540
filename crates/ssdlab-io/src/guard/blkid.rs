//! Signatures on a device as libblkid sees them, the way `wipefs --no-act` lists them: every file system, RAID
//! or volume-manager member, encrypted volume and partition table libblkid knows, wherever on the device it
//! keeps its magic (md 1.0 and GPT backup headers at the end, LUKS2's secondary header, ...).
//!
//! This module owns the foreign calls into libblkid and nothing else. It only reads through the descriptor it is
//! given; it never opens, writes or closes a device.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// One signature libblkid found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// libblkid's name for it (`ext4`, `crypto_LUKS`, `linux_raid_member`, `gpt`, `PMBR`), as wipefs and blkid
    /// print it.
    pub type_name: String,
    /// Where its magic is, in bytes from the device's start; None when libblkid gives no place.
    pub offset_bytes: Option<u64>,
    pub usage: Usage,
}

/// What a signature is for (libblkid's USAGE, partition tables apart).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    Filesystem,
    /// RAID and volume-manager members (md, LVM, ...).
    Raid,
    Crypto,
    PartitionTable,
    Other,
}

type Probe = *mut c_void;

// From <blkid/blkid.h> (util-linux 2.31 and later; Debian 12 has 2.38). Declared by hand instead of through
// bindgen, which would need libclang and libblkid-dev on every machine that builds ssdlab.
const BLKID_SUBLKS_LABEL: c_int = 1 << 1;
const BLKID_SUBLKS_TYPE: c_int = 1 << 5;
const BLKID_SUBLKS_USAGE: c_int = 1 << 7;
const BLKID_SUBLKS_VERSION: c_int = 1 << 8;
const BLKID_SUBLKS_MAGIC: c_int = 1 << 9;
const BLKID_SUBLKS_BADCSUM: c_int = 1 << 10;
const BLKID_PARTS_FORCE_GPT: c_int = 1 << 1;
const BLKID_PARTS_MAGIC: c_int = 1 << 3;

unsafe extern "C" {
    fn blkid_new_probe() -> Probe;
    fn blkid_free_probe(pr: Probe);
    fn blkid_probe_set_device(pr: Probe, fd: c_int, off: i64, size: i64) -> c_int;
    fn blkid_probe_enable_superblocks(pr: Probe, enable: c_int) -> c_int;
    fn blkid_probe_set_superblocks_flags(pr: Probe, flags: c_int) -> c_int;
    fn blkid_probe_enable_partitions(pr: Probe, enable: c_int) -> c_int;
    fn blkid_probe_set_partitions_flags(pr: Probe, flags: c_int) -> c_int;
    fn blkid_do_probe(pr: Probe) -> c_int;
    fn blkid_probe_lookup_value(
        pr: Probe,
        name: *const c_char,
        data: *mut *const c_char,
        len: *mut usize,
    ) -> c_int;
    fn blkid_probe_hide_range(pr: Probe, off: u64, len: u64) -> c_int;
    fn blkid_probe_step_back(pr: Probe) -> c_int;
}

/// At most this many signatures are listed; a device that yields more is not one libblkid understands.
const MAX_SIGNATURES: usize = 64;

/// A probe that frees itself.
struct OwnedProbe(Probe);

impl Drop for OwnedProbe {
    fn drop(&mut self) {
        // SAFETY: the pointer came from blkid_new_probe, is not null and is freed only here.
        unsafe { blkid_free_probe(self.0) }
    }
}

impl OwnedProbe {
    /// A value of the current result, without its NUL; None when the result has no such value.
    fn value(&self, name: &CStr) -> Option<Vec<u8>> {
        let mut data: *const c_char = std::ptr::null();
        let mut len: usize = 0;
        // SAFETY: the probe is live, the name NUL-terminated, and both out-pointers point to live locals.
        let rc = unsafe { blkid_probe_lookup_value(self.0, name.as_ptr(), &mut data, &mut len) };
        if rc != 0 || data.is_null() {
            return None;
        }
        // SAFETY: libblkid returns `len` bytes at `data` (the NUL included), valid until the probe changes,
        // which cannot happen while `self` is borrowed; they are copied out at once.
        let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) };
        Some(bytes.strip_suffix(&[0]).unwrap_or(bytes).to_vec())
    }

    fn text(&self, name: &CStr) -> Option<String> {
        self.value(name).map(|v| String::from_utf8_lossy(&v).into_owned())
    }
}

/// Every signature on the device open as `file`, over the whole device, bad checksums included (a damaged
/// superblock still means someone's data). Reads through the page cache, so `file` must not be O_DIRECT.
pub fn signatures(file: &File) -> io::Result<Vec<Signature>> {
    // SAFETY: blkid_new_probe takes nothing and returns a new probe or null.
    let raw = unsafe { blkid_new_probe() };
    if raw.is_null() {
        return Err(io::Error::other("libblkid could not allocate a probe"));
    }
    let probe = OwnedProbe(raw);
    // SAFETY: the probe is live; the descriptor stays open for the whole probe (`file` is borrowed for this
    // call) and libblkid does not close a descriptor it was given.
    if unsafe { blkid_probe_set_device(probe.0, file.as_raw_fd(), 0, 0) } != 0 {
        return Err(io::Error::other(
            "libblkid cannot probe the device (blkid_probe_set_device failed)",
        ));
    }
    let sublks = BLKID_SUBLKS_LABEL
        | BLKID_SUBLKS_TYPE
        | BLKID_SUBLKS_USAGE
        | BLKID_SUBLKS_VERSION
        | BLKID_SUBLKS_MAGIC
        | BLKID_SUBLKS_BADCSUM;
    // SAFETY: the probe is live; these calls only set flags on it.
    let set = unsafe {
        blkid_probe_enable_superblocks(probe.0, 1)
            | blkid_probe_set_superblocks_flags(probe.0, sublks)
            | blkid_probe_enable_partitions(probe.0, 1)
            // A GPT is looked for even without its protective MBR, as wipefs looks (a disk whose first sector
            // was overwritten still holds its partitions, and one grown since has no backup header at its end).
            | blkid_probe_set_partitions_flags(probe.0, BLKID_PARTS_MAGIC | BLKID_PARTS_FORCE_GPT)
    };
    if set != 0 {
        return Err(io::Error::other("libblkid refused the probe's settings"));
    }
    let mut found = Vec::new();
    // As wipefs does: take one result, hide its magic and step back, so a second signature of the same kind (a
    // GPT's backup header, a second swap signature) is found too.
    loop {
        // SAFETY: the probe is live.
        match unsafe { blkid_do_probe(probe.0) } {
            0 => {}
            1 => break,
            _ => return Err(io::Error::other("libblkid could not read the device")),
        }
        let (signature, magic) = if let Some(pt) = probe.text(c"PTTYPE") {
            let offset = probe.text(c"PTMAGIC_OFFSET").and_then(|o| o.parse().ok());
            let magic = probe.value(c"PTMAGIC").map_or(0, |m| m.len() as u64);
            (
                Signature {
                    type_name: pt,
                    offset_bytes: offset,
                    usage: Usage::PartitionTable,
                },
                magic,
            )
        } else if let Some(kind) = probe.text(c"TYPE") {
            let offset = probe.text(c"SBMAGIC_OFFSET").and_then(|o| o.parse().ok());
            let magic = probe.value(c"SBMAGIC").map_or(0, |m| m.len() as u64);
            let usage = match probe.text(c"USAGE").as_deref() {
                Some("filesystem") => Usage::Filesystem,
                Some("raid") => Usage::Raid,
                Some("crypto") => Usage::Crypto,
                _ => Usage::Other,
            };
            (
                Signature {
                    type_name: kind,
                    offset_bytes: offset,
                    usage,
                },
                magic,
            )
        } else {
            continue;
        };
        let hide = signature.offset_bytes.filter(|_| magic > 0);
        if !found.contains(&signature) {
            found.push(signature);
        }
        if found.len() >= MAX_SIGNATURES {
            break;
        }
        // Without a place to hide, stepping back would find the same signature forever: go on to the next
        // prober instead.
        if let Some(offset) = hide {
            // SAFETY: the probe is live; hiding a range and stepping back only change its state.
            let rc =
                unsafe { blkid_probe_hide_range(probe.0, offset, magic) | blkid_probe_step_back(probe.0) };
            if rc != 0 {
                return Err(io::Error::other("libblkid could not step back over a signature"));
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(name: &str, bytes: &[(u64, &[u8])], len: u64) -> (std::path::PathBuf, File) {
        let path = std::env::temp_dir().join(format!("ssdlab-blkid-{}-{name}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        file.set_len(len).unwrap();
        for (offset, b) in bytes {
            std::os::unix::fs::FileExt::write_all_at(&file, b, *offset).unwrap();
        }
        (path, file)
    }

    #[test]
    fn an_empty_image_has_no_signature() {
        let (path, file) = image("empty", &[], 8 << 20);
        assert_eq!(signatures(&file).unwrap(), vec![]);
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_swap_signature_is_named_with_its_place() {
        // mkswap writes SWAPSPACE2 in the last 10 bytes of the first page, after a header at 1 KiB: version 1
        // and the last page's number.
        let mut header = [0u8; 8];
        header[..4].copy_from_slice(&1u32.to_le_bytes());
        header[4..].copy_from_slice(&2047u32.to_le_bytes());
        let (path, file) = image("swap", &[(1024, &header), (4096 - 10, b"SWAPSPACE2")], 8 << 20);
        let found = signatures(&file).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].type_name, "swap");
        assert_eq!(found[0].offset_bytes, Some(4086));
        assert_eq!(found[0].usage, Usage::Other);
        std::fs::remove_file(path).unwrap();
    }
}
