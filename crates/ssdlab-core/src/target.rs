//! Target specifications: the one parser for every `--target` string.
//!
//! `/dev/NAME` is a block device, `file:PATH[:SIZE]` a regular file (created or extended to SIZE), `null[:SIZE]`
//! a device that completes everything at once, and `sim:PROFILE[?k=v&...]` a virtual SSD. Parsing is pure;
//! opening a target is the job of `ssdlab-io` (real targets) and `ssdlab-sim` (virtual ones).

use std::path::PathBuf;

use crate::units::parse_size;

/// The default size of a `null` target: large enough that no realistic run wraps around.
pub const NULL_DEFAULT_BYTES: u64 = 1 << 40;

/// A parsed `--target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSpec {
    Block { path: PathBuf },
    File { path: PathBuf, size: Option<u64> },
    Null { size: u64 },
    Sim { spec: String },
}

/// Why a target string was not understood; the text says what forms are accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TargetParseError(pub String);

const FORMS: &str = "use /dev/NAME, file:PATH[:SIZE], null[:SIZE] or sim:PROFILE";

impl TargetSpec {
    /// Parses a target string.
    pub fn parse(input: &str) -> Result<Self, TargetParseError> {
        let s = input.trim();
        if s.starts_with("/dev/") {
            return Ok(TargetSpec::Block {
                path: PathBuf::from(s),
            });
        }
        if let Some(rest) = s.strip_prefix("file:") {
            // A trailing ":SIZE" is a size only when it parses as one, so paths may contain colons.
            let (path, size) = match rest.rsplit_once(':') {
                Some((path, size)) if !path.is_empty() && parse_size(size).is_ok() => {
                    (path, Some(parse_size(size).expect("checked above")))
                }
                _ => (rest, None),
            };
            if path.is_empty() {
                return Err(TargetParseError(format!(
                    "'{input}' names no file: write file:PATH[:SIZE]"
                )));
            }
            if size == Some(0) {
                return Err(TargetParseError(format!(
                    "'{input}': the size must be above zero"
                )));
            }
            return Ok(TargetSpec::File {
                path: PathBuf::from(path),
                size,
            });
        }
        if s == "null" {
            return Ok(TargetSpec::Null {
                size: NULL_DEFAULT_BYTES,
            });
        }
        if let Some(size) = s.strip_prefix("null:") {
            let size = parse_size(size).map_err(|e| TargetParseError(format!("'{input}': the size {e}")))?;
            if size == 0 {
                return Err(TargetParseError(format!(
                    "'{input}': the size must be above zero"
                )));
            }
            return Ok(TargetSpec::Null { size });
        }
        if let Some(spec) = s.strip_prefix("sim:") {
            return Ok(TargetSpec::Sim {
                spec: spec.to_string(),
            });
        }
        Err(TargetParseError(format!("unknown target '{input}': {FORMS}")))
    }

    /// Whether writing to this target can destroy data that is not a test file (a block device).
    pub fn is_block_device(&self) -> bool {
        matches!(self, TargetSpec::Block { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_parses() {
        assert_eq!(
            TargetSpec::parse("/dev/loop0").unwrap(),
            TargetSpec::Block {
                path: "/dev/loop0".into()
            }
        );
        assert_eq!(
            TargetSpec::parse("file:/tmp/a.img:1g").unwrap(),
            TargetSpec::File {
                path: "/tmp/a.img".into(),
                size: Some(1 << 30)
            }
        );
        assert_eq!(
            TargetSpec::parse("file:/tmp/a:b.img").unwrap(),
            TargetSpec::File {
                path: "/tmp/a:b.img".into(),
                size: None
            }
        );
        assert_eq!(
            TargetSpec::parse("null").unwrap(),
            TargetSpec::Null {
                size: NULL_DEFAULT_BYTES
            }
        );
        assert_eq!(
            TargetSpec::parse("null:8g").unwrap(),
            TargetSpec::Null { size: 8 << 30 }
        );
        assert_eq!(
            TargetSpec::parse("sim:840evo-250g?op=25").unwrap(),
            TargetSpec::Sim {
                spec: "840evo-250g?op=25".into()
            }
        );
    }

    #[test]
    fn bad_targets_say_what_is_accepted() {
        let e = TargetSpec::parse("sda").unwrap_err();
        assert!(e.0.contains("/dev/NAME") && e.0.contains("file:PATH"), "{e}");
        assert!(TargetSpec::parse("file:").is_err());
        assert!(TargetSpec::parse("file:/x:0").is_err());
        assert!(TargetSpec::parse("null:zero").is_err());
    }
}
