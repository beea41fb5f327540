//! The cache's hot map on disk: where it lives, whose it is, reading it at open and writing it at close.
//!
//! A hot map lists block numbers only, so the worst a wrong one can do is cost warm-up reads; still, a map is
//! used only for the device that wrote it (same file by device and inode, or same block device number, model and
//! size). It is written by ssdlab's output rule (ssdlab-outputs): replaced atomically, and only while the
//! directory's manifest proves it ssdlab's own hot map (a map an older ssdlab wrote is taken on by its format); a
//! path that holds anything else (another file, a symlink, a device) is refused when the cache opens, and one
//! whose file changed while the cache ran is left alone at close. It never opens the device.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use ssdlab_cache::{CachedDevice, HotMap, HotMapError};
use ssdlab_core::device::{Device, DeviceInfo};
use ssdlab_core::target::{HotMapSetting, TargetSpec};
use ssdlab_io::files::FileIdentity;
use ssdlab_outputs::{Kind, Output, OutputDir};

/// A hot map an older ssdlab wrote before it kept a manifest: one that decodes, or is damaged but a hot map.
fn an_older_hot_map(bytes: &[u8]) -> bool {
    !matches!(HotMap::decode(bytes), Err(HotMapError::NotAHotMap))
}

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

/// A hot map is at most a few MiB (8 bytes a block of a cache of at most half the memory, 4 KiB a block).
const MAX_MAP_BYTES: u64 = 256 << 20;

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
    let identity_text = identity(flag, target, inner, &info)?;
    let path = match setting {
        HotMapSetting::File(path) => path.clone(),
        _ => default_state_dir()
            .join("cache")
            .join(HotMap::file_name(&identity_text)),
    };

    let refuse = |why: String| {
        OpenError::Refused(format!(
            "{flag} {target}: hot-map={}: {why}; ssdlab never replaces a file that is not its own hot map: name \
             another path",
            path.display()
        ))
    };
    // Written at close: no symbolic link on the way, as for every write.
    if let Some(link) = ssdlab_io::files::first_symlink_in(&path) {
        return Err(refuse(format!(
            "{} is a symbolic link, which ssdlab never follows into a write",
            link.display()
        )));
    }
    let wanted = HotMap {
        identity: identity_text,
        capacity_bytes: info.capacity_bytes,
        blocks: vec![],
    };
    let expected = load(&path, &wanted, cache).map_err(refuse)?;
    cache.on_close(Box::new(move |blocks| {
        save_at_close(&path, HotMap { blocks, ..wanted }, expected.as_ref());
    }));
    Ok(())
}

/// Loads the hot map at `path` into the cache's warm start if it is `wanted`'s (same device identity and
/// capacity), saying what it found; returns the identity of the file found there (None: nothing), which is the
/// only file the close may replace. A file that is not a hot map is refused with why.
fn load(
    path: &Path,
    wanted: &HotMap,
    cache: &mut CachedDevice<AnyDevice>,
) -> Result<Option<FileIdentity>, String> {
    match ssdlab_io::files::read_regular(path, MAX_MAP_BYTES) {
        Ok(Some((bytes, identity))) => {
            match HotMap::decode(&bytes) {
                Ok(map) if map.identity == wanted.identity && map.capacity_bytes == wanted.capacity_bytes => {
                    cache.add_note(format!(
                        "warm start: {} blocks from the hot map {}",
                        map.blocks.len(),
                        path.display()
                    ));
                    cache.warm_at_start(map.blocks);
                }
                Ok(map) => cache.add_note(format!(
                    "the hot map {} is for another device ({}), not this one ({}): starting cold",
                    path.display(),
                    map.identity,
                    wanted.identity
                )),
                Err(HotMapError::Damaged) => cache.add_note(format!(
                    "the hot map {} is damaged ({}); starting cold, and it is rewritten when the cache closes",
                    path.display(),
                    HotMapError::Damaged
                )),
                Err(e @ HotMapError::NotAHotMap) => return Err(e.to_string()),
            }
            Ok(Some(identity))
        }
        Ok(None) => {
            cache.add_note(format!(
                "no hot map at {} yet: starting cold; it is written when the cache closes",
                path.display()
            ));
            Ok(None)
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Writes the map as the cache closes, replacing only the file found at open (or creating it where there was
/// none). The cache is closing and nobody is left to return an error to: a note waits for the binary, which
/// prints what closing left to say before it exits (`close_notes`).
fn save_at_close(path: &Path, map: HotMap, expected: Option<&FileIdentity>) {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    // The file found at open (or none) is the one replaced: anything put there since is left alone.
    let now = ssdlab_io::files::read_regular(path, MAX_MAP_BYTES)
        .ok()
        .flatten()
        .map(|(_, identity)| identity);
    if now.as_ref() != expected {
        note_at_close(format!(
            "the cache's hot map was not saved: {} changed while the cache ran, and was left alone",
            path.display()
        ));
        return;
    }
    let bytes = map.encode();
    let saved = OutputDir::create(dir).and_then(|outputs| {
        outputs.adopt(name, Kind::HotMap, an_older_hot_map)?;
        outputs.write(
            &[Output {
                name,
                kind: Kind::HotMap,
                bytes: &bytes,
            }],
            &[],
        )
    });
    if let Err(e) = saved {
        note_at_close(format!(
            "could not save the cache's hot map to {}: {e}",
            path.display()
        ));
    }
}

/// What closing a device had to say when no caller was left to tell (a hot map that could not be saved).
static CLOSE_NOTES: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn note_at_close(note: String) {
    CLOSE_NOTES.lock().unwrap_or_else(|p| p.into_inner()).push(note);
}

/// Takes what closing devices had to say since the last call, for the binary to print: the library prints
/// nothing itself.
pub fn close_notes() -> Vec<String> {
    std::mem::take(&mut *CLOSE_NOTES.lock().unwrap_or_else(|p| p.into_inner()))
}
