//! The cache's hot map on disk: where it lives, whose it is, reading it at open and writing it at close.
//!
//! A hot map lists block numbers only, so the worst a wrong one can do is cost warm-up reads; still, a map is
//! used only for the device that wrote it (same file by device and inode, or same block device number, model and
//! size), and it is replaced atomically (written beside, synced, renamed) so a crash leaves the old map or the
//! new one. It never opens the device.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use ssdlab_cache::{CachedDevice, HotMap};
use ssdlab_core::device::{Device, DeviceInfo};
use ssdlab_core::target::{HotMapSetting, TargetSpec};

use crate::{AnyDevice, OpenError};

/// The state directory: `$SSDLAB_STATE_DIR`, else /var/lib/ssdlab as root, else ~/.local/state/ssdlab.
pub fn default_state_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("SSDLAB_STATE_DIR") {
        return dir.into();
    }
    let root = std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false);
    if root {
        return "/var/lib/ssdlab".into();
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| ".".into());
    home.join(".local/state/ssdlab")
}

/// What the device under the cache is, in a form that changes when it is a different device.
fn identity(flag: &str, target: &str, inner: &TargetSpec, info: &DeviceInfo) -> Result<String, OpenError> {
    let described = |path: &Path| {
        std::fs::metadata(path).map_err(|e| {
            OpenError::Refused(format!(
                "{flag} {target}: cannot identify {} for its hot map: {e}",
                path.display()
            ))
        })
    };
    match inner {
        TargetSpec::File { path, .. } => {
            let m = described(path)?;
            Ok(format!(
                "file dev={} ino={} size={}",
                m.dev(),
                m.ino(),
                info.capacity_bytes
            ))
        }
        TargetSpec::Block { path } => {
            let m = described(path)?;
            Ok(format!(
                "block rdev={} model={} size={}",
                m.rdev(),
                info.model,
                info.capacity_bytes
            ))
        }
        _ => Err(OpenError::Spec(format!(
            "{flag} {target}: hot-map needs a device that keeps its data between runs; a sim: or null drive \
             starts empty every time, so there is nothing to warm (drop hot-map=)"
        ))),
    }
}

/// Applies `setting` to a freshly opened cache: loads the map if there is one for this device and queues the
/// warm start, and arranges for the map to be written when the cache closes.
pub(crate) fn attach(
    flag: &str,
    target: &str,
    inner: &TargetSpec,
    setting: &HotMapSetting,
    cache: &mut CachedDevice<AnyDevice>,
) -> Result<(), OpenError> {
    if *setting == HotMapSetting::Off {
        return Ok(());
    }
    let info = cache.inner().info().clone();
    let identity = identity(flag, target, inner, &info)?;
    let path = match setting {
        HotMapSetting::File(path) => path.clone(),
        _ => default_state_dir()
            .join("cache")
            .join(HotMap::file_name(&identity)),
    };
    match std::fs::read(&path) {
        Ok(bytes) => match HotMap::decode(&bytes) {
            Ok(map) if map.identity == identity && map.capacity_bytes == info.capacity_bytes => {
                cache.add_note(format!(
                    "warm start: {} blocks from the hot map {}",
                    map.blocks.len(),
                    path.display()
                ));
                cache.warm_at_start(map.blocks);
            }
            Ok(map) => cache.add_note(format!(
                "the hot map {} is for another device ({}), not this one ({identity}): starting cold",
                path.display(),
                map.identity
            )),
            Err(e) => cache.add_note(format!(
                "the hot map {} was not used: {e}; starting cold",
                path.display()
            )),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => cache.add_note(format!(
            "no hot map at {} yet: starting cold; it is written when the cache closes",
            path.display()
        )),
        Err(e) => {
            return Err(OpenError::Refused(format!(
                "{flag} {target}: cannot read the hot map {}: {e}",
                path.display()
            )));
        }
    }
    let capacity_bytes = info.capacity_bytes;
    cache.on_close(Box::new(move |blocks| {
        let map = HotMap {
            identity,
            capacity_bytes,
            blocks,
        };
        // The cache is closing and nobody is left to return an error to: say it where the user sees it.
        if let Err(e) = replace_atomically(&path, &map.encode()) {
            eprintln!(
                "ssdlab: could not save the cache's hot map to {}: {e}",
                path.display()
            );
        }
    }));
    Ok(())
}

/// Writes `bytes` to `path` so that a crash leaves either the old file or the new one.
fn replace_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    // Named per process, so two caches closing on one map cannot write into each other's file.
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = dir.join(tmp_name);
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    std::fs::File::open(dir)?.sync_all()
}
