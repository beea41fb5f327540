//! Target specifications: the one parser for every `--target` string.
//!
//! `/dev/NAME` is a block device, `file:PATH[:SIZE][?cache=page]` a regular file (created or extended to SIZE;
//! O_DIRECT unless `cache=page` asks for the page cache, as nbdkit's file plugin uses), `null[:SIZE]`
//! a device that completes everything at once, `sim:PROFILE[?k=v&...]` a virtual SSD, and
//! `cached:INNER[?size=..&mode=..&seq-cutoff=..&dirty-limit=..&hot-map=..&cpu-limit=..]` the DRAM cache over any
//! of them. Parsing is pure; opening a target is the job of `ssdlab-targets`.

use std::path::PathBuf;

use crate::units::parse_size;

/// The default size of a `null` target: large enough that no realistic run wraps around.
pub const NULL_DEFAULT_BYTES: u64 = 1 << 40;

/// A parsed `--target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSpec {
    Block {
        path: PathBuf,
    },
    File {
        path: PathBuf,
        size: Option<u64>,
        cache: FileCache,
    },
    Null {
        size: u64,
    },
    Sim {
        spec: String,
    },
    /// The DRAM cache over `inner`; `inner_target` is the inner target as written (for messages and results).
    Cached {
        inner: Box<TargetSpec>,
        inner_target: String,
        cache: CacheSpec,
    },
}

/// Whether a file target's I/O goes through the kernel's page cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FileCache {
    /// O_DIRECT (where the file system allows it): every read and write reaches the medium. The default, since
    /// ssdlab measures drives.
    #[default]
    Bypass,
    /// Buffered, as `nbdkit file` and most programs do: reads may come from memory, writes are acknowledged once
    /// in the page cache, and only a FLUSH (fdatasync) makes them durable.
    Page,
}

/// The keys a `file:` target takes after its last `?`.
pub const FILE_KEYS: &str = "cache=page or cache=none";

impl FileCache {
    /// Parses the options of a `file:` target's last `?` part. `None` when the text is not options at all (no
    /// `key=value` pair), so that a path holding a `?` stays a path.
    fn parse_options(query: &str, input: &str) -> Option<Result<FileCache, TargetParseError>> {
        let pairs: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
        if pairs.is_empty() || pairs.iter().any(|p| !p.contains('=')) {
            return None;
        }
        let mut cache = FileCache::Bypass;
        for pair in pairs {
            let (key, value) = pair.split_once('=').expect("checked above");
            cache = match (key, value) {
                ("cache", "page") => FileCache::Page,
                ("cache", "none") => FileCache::Bypass,
                ("cache", _) => {
                    return Some(Err(TargetParseError(format!(
                        "'{input}': cache={value}: use cache=page (the page cache, as nbdkit file) or cache=none \
                         (O_DIRECT, the default)"
                    ))));
                }
                _ => {
                    return Some(Err(TargetParseError(format!(
                        "'{input}': a file target takes {FILE_KEYS} after '?', not '{key}'"
                    ))));
                }
            };
        }
        Some(Ok(cache))
    }
}

/// How the DRAM cache treats writes.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum CacheMode {
    /// Writes are acknowledged from memory and destaged later; a FLUSH waits for them.
    #[default]
    Writeback,
    /// Writes go to the device and complete when it does; their blocks are kept for reads.
    Writethrough,
    /// Only reads are cached; writes go to the device and update copies already cached.
    Readonly,
}

impl CacheMode {
    pub fn name(self) -> &'static str {
        match self {
            CacheMode::Writeback => "writeback",
            CacheMode::Writethrough => "writethrough",
            CacheMode::Readonly => "readonly",
        }
    }
}

/// Where a cache keeps its hot map (the blocks it held, for a warm start after a restart).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum HotMapSetting {
    /// No hot map: every run starts cold (the default, so benchmarks do not depend on earlier runs).
    #[default]
    Off,
    /// In the state directory, under a name derived from the device.
    StateDir,
    /// In this file.
    File(std::path::PathBuf),
}

/// The parameters of a `cached:` target. `size_bytes` is `None` for the default, min(25% of RAM, 1 GiB),
/// which the opener resolves (it needs to read the machine's memory size).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheSpec {
    pub size_bytes: Option<u64>,
    pub mode: CacheMode,
    /// A stream of sequential I/O longer than this bypasses the cache (reads are not admitted, writes go
    /// around it).
    pub seq_cutoff_bytes: u64,
    /// The share of the cache that may hold dirty data, in percent; writes past it wait for destaging.
    pub dirty_limit_percent: u8,
    pub hot_map: HotMapSetting,
    /// While the host CPU is busier than this percentage, the cache passes I/O through (100, the default: never,
    /// so a benchmark's result does not depend on what else the machine is doing).
    pub cpu_limit_percent: u8,
}

impl Default for CacheSpec {
    fn default() -> Self {
        CacheSpec {
            size_bytes: None,
            mode: CacheMode::Writeback,
            seq_cutoff_bytes: 4 << 20,
            dirty_limit_percent: 50,
            hot_map: HotMapSetting::Off,
            cpu_limit_percent: 100,
        }
    }
}

/// The keys a `cached:` target takes; any other key in its last `?` part belongs to the inner target.
pub const CACHE_KEYS: &str = "size, mode, seq-cutoff, dirty-limit, hot-map, cpu-limit";

/// A whole percentage from 1 to `max`, with or without its `%`.
fn parse_percent(value: &str, max: u8) -> Option<u8> {
    value
        .trim_end_matches('%')
        .parse()
        .ok()
        .filter(|p| (1..=max).contains(p))
}

impl CacheSpec {
    /// Applies one `key=value`; `Ok(false)` if the key is not the cache's.
    fn apply(&mut self, key: &str, value: &str) -> Result<bool, String> {
        let bad = |what: &str| format!("{key}={value}: {what}");
        match key {
            "size" => {
                let size = parse_size(value).map_err(|e| bad(&e.to_string()))?;
                if size < 1 << 20 {
                    return Err(bad("the cache needs at least 1m"));
                }
                self.size_bytes = Some(size);
            }
            "mode" => {
                self.mode = match value {
                    "writeback" => CacheMode::Writeback,
                    "writethrough" => CacheMode::Writethrough,
                    "readonly" => CacheMode::Readonly,
                    _ => return Err(bad("use writeback, writethrough or readonly")),
                }
            }
            "seq-cutoff" => {
                self.seq_cutoff_bytes = parse_size(value).map_err(|e| bad(&e.to_string()))?;
            }
            "cpu-limit" => {
                self.cpu_limit_percent = if value == "off" {
                    100
                } else {
                    parse_percent(value, 100).ok_or_else(|| {
                        bad("write a CPU busy percentage from 1 to 100, such as 95%, or off")
                    })?
                };
            }
            "hot-map" => {
                self.hot_map = match value {
                    "off" => HotMapSetting::Off,
                    "on" => HotMapSetting::StateDir,
                    path if path.starts_with('/') => HotMapSetting::File(path.into()),
                    _ => {
                        return Err(bad(
                            "use on (in the state directory), off, or an absolute file path",
                        ));
                    }
                }
            }
            "dirty-limit" => {
                self.dirty_limit_percent = parse_percent(value, 90)
                    .ok_or_else(|| bad("write a percentage of the cache from 1 to 90, such as 50%"))?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Splits `cached:` text into the inner target and the cache's parameters.
    fn parse(rest: &str, input: &str) -> Result<(String, CacheSpec), TargetParseError> {
        let mut cache = CacheSpec::default();
        let Some((inner, query)) = rest.rsplit_once('?') else {
            return Ok((rest.to_string(), cache));
        };
        let mut left = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let taken = match pair.split_once('=') {
                Some((key, value)) => cache
                    .apply(key, value)
                    .map_err(|e| TargetParseError(format!("'{input}': {e}")))?,
                None => false,
            };
            if !taken {
                left.push(pair);
            }
        }
        let inner = if left.is_empty() {
            inner.to_string()
        } else {
            format!("{inner}?{}", left.join("&"))
        };
        Ok((inner, cache))
    }
}

impl std::fmt::Display for TargetSpec {
    /// The target as `--target` takes it; it parses back to the same target. A cache's options that differ from
    /// its defaults follow the inner target's own in the last `?` part.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetSpec::Block { path } => write!(f, "{}", path.display()),
            TargetSpec::File { path, size, cache } => {
                write!(f, "file:{}", path.display())?;
                if let Some(size) = size {
                    write!(f, ":{}", size_text(*size))?;
                }
                match cache {
                    // A path holding a '?' keeps its options part, so the parser cannot take its tail for one.
                    FileCache::Bypass if path.to_string_lossy().contains('?') => write!(f, "?cache=none"),
                    FileCache::Bypass => Ok(()),
                    FileCache::Page => write!(f, "?cache=page"),
                }
            }
            TargetSpec::Null { size } => write!(f, "null:{}", size_text(*size)),
            TargetSpec::Sim { spec } => write!(f, "sim:{spec}"),
            TargetSpec::Cached {
                inner_target, cache, ..
            } => {
                let defaults = CacheSpec::default();
                let mut keys = Vec::new();
                if let Some(size) = cache.size_bytes {
                    keys.push(format!("size={}", size_text(size)));
                }
                if cache.mode != defaults.mode {
                    keys.push(format!("mode={}", cache.mode.name()));
                }
                if cache.seq_cutoff_bytes != defaults.seq_cutoff_bytes {
                    keys.push(format!("seq-cutoff={}", size_text(cache.seq_cutoff_bytes)));
                }
                if cache.dirty_limit_percent != defaults.dirty_limit_percent {
                    keys.push(format!("dirty-limit={}%", cache.dirty_limit_percent));
                }
                match &cache.hot_map {
                    HotMapSetting::Off => {}
                    HotMapSetting::StateDir => keys.push("hot-map=on".into()),
                    HotMapSetting::File(path) => keys.push(format!("hot-map={}", path.display())),
                }
                if cache.cpu_limit_percent != defaults.cpu_limit_percent {
                    keys.push(format!("cpu-limit={}%", cache.cpu_limit_percent));
                }
                write!(f, "cached:{inner_target}")?;
                if !keys.is_empty() {
                    let joiner = if inner_target.contains('?') { '&' } else { '?' };
                    write!(f, "{joiner}{}", keys.join("&"))?;
                }
                Ok(())
            }
        }
    }
}

/// A size as a target writes it: the largest binary unit that divides it exactly (`1g`, `256m`, `4k`), else bytes.
fn size_text(bytes: u64) -> String {
    for (shift, unit) in [(40, "t"), (30, "g"), (20, "m"), (10, "k")] {
        if bytes != 0 && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

impl TargetSpec {
    /// `inner` behind a DRAM cache with `cache`'s parameters.
    pub fn cached(inner: TargetSpec, cache: CacheSpec) -> Result<TargetSpec, TargetParseError> {
        if matches!(inner, TargetSpec::Cached { .. }) {
            return Err(TargetParseError(
                "a cache over a cache measures nothing more; give one cached: prefix".into(),
            ));
        }
        Ok(TargetSpec::Cached {
            inner_target: inner.to_string(),
            inner: Box::new(inner),
            cache,
        })
    }
}

/// Why a target string was not understood; the text says what forms are accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TargetParseError(pub String);

impl std::str::FromStr for TargetSpec {
    type Err = TargetParseError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        TargetSpec::parse(input)
    }
}

const FORMS: &str = "use /dev/NAME, file:PATH[:SIZE], null[:SIZE], sim:PROFILE or cached:TARGET";

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
            let (rest, cache) = match rest.rsplit_once('?') {
                Some((before, query)) => match FileCache::parse_options(query, input) {
                    Some(cache) => (before, cache?),
                    None => (rest, FileCache::Bypass),
                },
                None => (rest, FileCache::Bypass),
            };
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
                cache,
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
        if let Some(rest) = s.strip_prefix("cached:") {
            let (inner_target, cache) = CacheSpec::parse(rest, input)?;
            let inner = TargetSpec::parse(&inner_target)
                .map_err(|e| TargetParseError(format!("'{input}': the cached target: {e}")))?;
            if matches!(inner, TargetSpec::Cached { .. }) {
                return Err(TargetParseError(format!(
                    "'{input}': a cache over a cache measures nothing more; give one cached: prefix"
                )));
            }
            return Ok(TargetSpec::Cached {
                inner: Box::new(inner),
                inner_target,
                cache,
            });
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
        match self {
            TargetSpec::Block { .. } => true,
            TargetSpec::Cached { inner, .. } => inner.is_block_device(),
            _ => false,
        }
    }

    /// Whether the target runs in virtual time (a virtual SSD, cached or not).
    pub fn is_virtual(&self) -> bool {
        match self {
            TargetSpec::Sim { .. } => true,
            TargetSpec::Cached { inner, .. } => inner.is_virtual(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_target_shown_parses_back_to_itself() {
        for text in [
            "/dev/sdz",
            "file:/tmp/a:b:1m",
            "file:/tmp/x",
            "file:/tmp/y:1000",
            "file:/tmp/y:1m?cache=page",
            "file:/tmp/what?cache=none?cache=none",
            "file:/tmp/a?x=1:1m?cache=none",
            "cached:file:/tmp/x:1m?cache=page&size=2m",
            "null:4k",
            "sim:840evo-250g?scale=1/64",
            "cached:null:3g",
            "cached:sim:840evo-250g?scale=1/64&size=1g",
            "cached:file:/tmp/x:1m?size=2m&mode=writethrough&seq-cutoff=0&dirty-limit=20%&hot-map=/tmp/h&cpu-limit=95%",
            "cached:/dev/sdz?hot-map=on",
        ] {
            let spec = TargetSpec::parse(text).unwrap();
            assert_eq!(spec.to_string(), text);
            assert_eq!(TargetSpec::parse(&spec.to_string()).unwrap(), spec, "{text}");
        }
        let cached = TargetSpec::cached(
            TargetSpec::parse("sim:840evo-250g?scale=1/64").unwrap(),
            CacheSpec {
                size_bytes: Some(1 << 30),
                ..CacheSpec::default()
            },
        )
        .unwrap();
        assert_eq!(cached.to_string(), "cached:sim:840evo-250g?scale=1/64&size=1g");
        assert!(TargetSpec::cached(cached, CacheSpec::default()).is_err());
    }

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
                size: Some(1 << 30),
                cache: FileCache::Bypass,
            }
        );
        assert_eq!(
            TargetSpec::parse("file:/tmp/a:b.img").unwrap(),
            TargetSpec::File {
                path: "/tmp/a:b.img".into(),
                size: None,
                cache: FileCache::Bypass,
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
    fn a_cached_target_takes_its_own_keys_and_leaves_the_inner_ones() {
        let TargetSpec::Cached {
            inner,
            inner_target,
            cache,
        } = TargetSpec::parse("cached:sim:840evo-250g?scale=1/16&size=64m&mode=writethrough").unwrap()
        else {
            panic!("not cached")
        };
        assert_eq!(inner_target, "sim:840evo-250g?scale=1/16");
        assert_eq!(
            *inner,
            TargetSpec::Sim {
                spec: "840evo-250g?scale=1/16".into()
            }
        );
        assert_eq!(cache.size_bytes, Some(64 << 20));
        assert_eq!(cache.mode, CacheMode::Writethrough);
        let TargetSpec::Cached { cache, .. } =
            TargetSpec::parse("cached:/dev/loop3?cpu-limit=off&hot-map=/var/tmp/h.map").unwrap()
        else {
            panic!("not cached")
        };
        assert_eq!(cache.cpu_limit_percent, 100);
        assert_eq!(cache.hot_map, HotMapSetting::File("/var/tmp/h.map".into()));
        let TargetSpec::Cached {
            inner_target, cache, ..
        } = TargetSpec::parse("cached:/dev/loop3").unwrap()
        else {
            panic!("not cached")
        };
        assert_eq!(inner_target, "/dev/loop3");
        assert_eq!(cache, CacheSpec::default());
        assert!(TargetSpec::parse("cached:/dev/loop3").unwrap().is_block_device());
        assert!(TargetSpec::parse("cached:sim:840evo-250g").unwrap().is_virtual());
    }

    #[test]
    fn bad_cached_targets_name_the_key_and_the_fix() {
        let e = TargetSpec::parse("cached:null?mode=fast").unwrap_err();
        assert!(e.0.contains("mode=fast") && e.0.contains("writeback"), "{e}");
        let e = TargetSpec::parse("cached:null?size=4k").unwrap_err();
        assert!(e.0.contains("at least 1m"), "{e}");
        let e = TargetSpec::parse("cached:null?dirty-limit=95").unwrap_err();
        assert!(e.0.contains("1 to 90"), "{e}");
        let e = TargetSpec::parse("cached:null?cpu-limit=0").unwrap_err();
        assert!(e.0.contains("cpu-limit=0") && e.0.contains("1 to 100"), "{e}");
        let e = TargetSpec::parse("cached:null?hot-map=here").unwrap_err();
        assert!(e.0.contains("absolute"), "{e}");
        let e = TargetSpec::parse("cached:cached:null").unwrap_err();
        assert!(e.0.contains("one cached: prefix"), "{e}");
        let e = TargetSpec::parse("cached:sda").unwrap_err();
        assert!(e.0.contains("the cached target"), "{e}");
    }

    #[test]
    fn a_file_target_takes_the_page_cache_after_its_last_question_mark() {
        let page = |t: &str| match TargetSpec::parse(t).unwrap() {
            TargetSpec::File { path, size, cache } => (path, size, cache),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            page("file:/tmp/a.img:1g?cache=page"),
            ("/tmp/a.img".into(), Some(1 << 30), FileCache::Page)
        );
        assert_eq!(
            page("file:/tmp/a.img?cache=none"),
            ("/tmp/a.img".into(), None, FileCache::Bypass)
        );
        // Text after '?' that is not key=value options stays part of the path.
        assert_eq!(
            page("file:/tmp/what?.img"),
            ("/tmp/what?.img".into(), None, FileCache::Bypass)
        );
        let e = TargetSpec::parse("file:/tmp/a.img?cache=direct").unwrap_err();
        assert!(e.0.contains("cache=page") && e.0.contains("cache=none"), "{e}");
        let e = TargetSpec::parse("file:/tmp/a.img?size=1g").unwrap_err();
        assert!(e.0.contains("'size'") && e.0.contains("cache=page"), "{e}");
        // Under a cache, the inner file keeps its own key.
        match TargetSpec::parse("cached:file:/tmp/a.img?cache=page&size=2m").unwrap() {
            TargetSpec::Cached { inner, cache, .. } => {
                assert_eq!(cache.size_bytes, Some(2 << 20));
                assert!(matches!(
                    *inner,
                    TargetSpec::File {
                        cache: FileCache::Page,
                        ..
                    }
                ));
            }
            other => panic!("{other:?}"),
        }
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
