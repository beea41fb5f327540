//! The one signature libblkid does not see: a GPT's backup header at the device's last block when the primary
//! header and the protective MBR are gone (libblkid looks for the backup only behind a protective MBR). A disk
//! whose start was wiped still describes its partitions there, and `sgdisk` or `gdisk` can rebuild the table
//! from it.
//!
//! It reads two 512-byte blocks through the descriptor it is given and never writes.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Where a valid GPT backup header lies at the end of a device of `size_bytes`, for 512- or 4096-byte logical
/// blocks: its byte offset, if one is there.
pub fn backup_header_at(file: &File, size_bytes: u64) -> io::Result<Option<u64>> {
    for block in [512u64, 4096] {
        if size_bytes < 2 * block {
            continue;
        }
        let offset = size_bytes / block * block - block;
        let mut header = [0u8; 512];
        let n = file.read_at(&mut header, offset)?;
        if n == header.len() && is_backup_header(&header, size_bytes / block - 1, block) {
            return Ok(Some(offset));
        }
    }
    Ok(None)
}

/// A GPT header ("EFI PART", a header size that fits the block, its CRC32 right) that says it is at `last_lba`.
fn is_backup_header(bytes: &[u8; 512], last_lba: u64, block: u64) -> bool {
    if &bytes[..8] != b"EFI PART" {
        return false;
    }
    let size = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
    if !(92..=block.min(512) as usize).contains(&size) {
        return false;
    }
    let stored = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
    let mut header = bytes[..size].to_vec();
    header[16..20].fill(0);
    let my_lba = u64::from_le_bytes(bytes[24..32].try_into().expect("8 bytes"));
    crc32(&header) == stored && my_lba == last_lba
}

/// CRC-32 (IEEE 802.3, reflected), as GPT checksums its headers.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn a_backup_header_at_the_last_block_is_found_and_a_damaged_one_is_not() {
        let path = std::env::temp_dir().join(format!("ssdlab-gpt-backup-{}", std::process::id()));
        let size = 8u64 << 20;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        file.set_len(size).unwrap();
        assert_eq!(backup_header_at(&file, size).unwrap(), None);
        let mut h = [0u8; 512];
        h[..8].copy_from_slice(b"EFI PART");
        h[12..16].copy_from_slice(&92u32.to_le_bytes());
        h[24..32].copy_from_slice(&(size / 512 - 1).to_le_bytes());
        h[32..40].copy_from_slice(&1u64.to_le_bytes());
        let crc = crc32(&h[..92]);
        h[16..20].copy_from_slice(&crc.to_le_bytes());
        file.write_all_at(&h, size - 512).unwrap();
        assert_eq!(backup_header_at(&file, size).unwrap(), Some(size - 512));
        h[40] ^= 1; // a byte of the header, its checksum left as it was
        file.write_all_at(&h, size - 512).unwrap();
        assert_eq!(backup_header_at(&file, size).unwrap(), None);
        std::fs::remove_file(path).unwrap();
    }
}
