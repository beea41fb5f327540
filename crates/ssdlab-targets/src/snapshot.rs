//! What a `file:` target looked like before it was opened, so a command that refuses to run before any I/O can
//! leave nothing behind: a file ssdlab created is removed, one it extended is truncated back.

use ssdlab_core::target::TargetSpec;

/// The length of a `file:` target before opening (None: it did not exist), or nothing for other targets.
pub struct FileSnapshot {
    path: Option<std::path::PathBuf>,
    len: Option<u64>,
}

impl FileSnapshot {
    /// For targets that are not files.
    pub fn none() -> Self {
        FileSnapshot {
            path: None,
            len: None,
        }
    }

    pub fn take(spec: &TargetSpec) -> Self {
        match spec {
            TargetSpec::File { path, .. } => FileSnapshot {
                path: Some(path.clone()),
                len: std::fs::symlink_metadata(path)
                    .ok()
                    .filter(|m| m.is_file())
                    .map(|m| m.len()),
            },
            _ => FileSnapshot::none(),
        }
    }

    /// Removes the file if ssdlab created it, or truncates it back if ssdlab extended it. Only for use before
    /// any I/O was issued.
    pub fn restore(&self) {
        let Some(path) = &self.path else { return };
        match self.len {
            None => {
                let _ = std::fs::remove_file(path);
            }
            Some(len) => {
                if let Ok(file) = std::fs::OpenOptions::new().write(true).open(path)
                    && file.metadata().is_ok_and(|m| m.len() > len)
                {
                    let _ = file.set_len(len);
                }
            }
        }
    }
}
