//! The manifest of an output directory: each file ssdlab wrote there, by name, with its kind, its inode and the
//! checksum of its bytes (of its first line, for a file that grows by appending). A file is ssdlab's own only
//! while its inode and checksum still match what was recorded: a file a user edited, replaced or planted under
//! that name is theirs.
//!
//! The manifest is one small JSON file (`.ssdlab-outputs.json`), replaced atomically. While a file is being
//! replaced it lists both versions, so a crash between the rename and the next manifest leaves the name with a
//! version the manifest accepts.

use serde::{Deserialize, Serialize};

use crate::Kind;

/// The manifest's name in each directory ssdlab writes into.
pub const MANIFEST_NAME: &str = ".ssdlab-outputs.json";

/// The format's version, the first field of the file: a file without it is not a manifest ssdlab wrote.
const FORMAT: u32 = 1;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    /// Always [`FORMAT`]: the marker that this is ssdlab's manifest.
    pub ssdlab_outputs: u32,
    pub files: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// The file's name inside the directory (`result.json`, `charts/01-iops.svg`).
    pub name: String,
    pub kind: Kind,
    /// The versions the name may hold and still be ssdlab's: one, or two while it is being replaced.
    pub versions: Vec<Version>,
}

/// One version of a file as ssdlab wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Version {
    pub inode: u64,
    /// Its length in bytes; None for a file that grows by appending.
    pub bytes: Option<u64>,
    /// The checksum of its bytes, or of its first line for a file that grows by appending (hex: JSON readers
    /// other than ssdlab's lose precision past 2^53).
    #[serde(with = "hex")]
    pub checksum: u64,
}

impl Manifest {
    pub fn new() -> Self {
        Manifest {
            ssdlab_outputs: FORMAT,
            files: Vec::new(),
        }
    }

    /// Parses a manifest; None when the bytes are not one ssdlab wrote (no marker, another format).
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        let manifest: Manifest = serde_json::from_slice(bytes).ok()?;
        (manifest.ssdlab_outputs == FORMAT).then_some(manifest)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("a manifest serializes");
        bytes.push(b'\n');
        bytes
    }

    pub fn entry(&self, name: &str) -> Option<&Entry> {
        self.files.iter().find(|e| e.name == name)
    }

    /// Adds `version` as one `name` may hold (keeping the ones before, for the moment of the rename).
    pub fn accept(&mut self, name: &str, kind: Kind, version: Version) {
        match self.files.iter_mut().find(|e| e.name == name) {
            Some(entry) => {
                entry.kind = kind;
                if !entry.versions.contains(&version) {
                    entry.versions.push(version);
                }
            }
            None => self.files.push(Entry {
                name: name.to_string(),
                kind,
                versions: vec![version],
            }),
        }
    }

    /// Makes `version` the only one `name` may hold.
    pub fn settle(&mut self, name: &str, kind: Kind, version: Version) {
        self.files.retain(|e| e.name != name);
        self.files.push(Entry {
            name: name.to_string(),
            kind,
            versions: vec![version],
        });
    }

    pub fn forget(&mut self, name: &str) {
        self.files.retain(|e| e.name != name);
    }
}

mod hex {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{value:016x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let text = String::deserialize(d)?;
        u64::from_str_radix(&text, 16).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_round_trips_and_anything_else_is_not_one() {
        let mut m = Manifest::new();
        let v1 = Version {
            inode: 7,
            bytes: Some(3),
            checksum: u64::MAX - 1,
        };
        let v2 = Version { inode: 8, ..v1 };
        m.accept("result.json", Kind::Result, v1);
        m.accept("result.json", Kind::Result, v2);
        assert_eq!(m.entry("result.json").unwrap().versions, vec![v1, v2]);
        let back = Manifest::parse(&m.to_bytes()).unwrap();
        assert_eq!(back, m);
        m.settle("result.json", Kind::Result, v2);
        assert_eq!(m.entry("result.json").unwrap().versions, vec![v2]);
        assert!(Manifest::parse(b"{\"files\": []}").is_none(), "no marker");
        assert!(
            Manifest::parse(b"{\"ssdlab_outputs\": 9, \"files\": []}").is_none(),
            "another format"
        );
        assert!(Manifest::parse(b"my notes").is_none());
    }
}
