//! A command's target as its plan holds it: the `--target` text as given and the [`TargetSpec`] the one parser
//! made of it when the plan was made (no command parses a target's prefix again), the permission flags and the
//! engine, and how the command uses it. Opening goes through the command's target port
//! (ssdlab-targets, which applies the safety gate); nothing here writes to a device.

use anyhow::Result;
use ssdlab_core::schema::options::TargetOptions;
use ssdlab_core::target::TargetSpec;
use ssdlab_io::Engine;
use ssdlab_targets::{Access, ForceScope, OpenOptions, Opened};

use crate::ports::Targets;

/// The target flags every command that opens a target shares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetPlan {
    /// `/dev/NAME`, `file:PATH[:SIZE]`, `null[:SIZE]`, `sim:PROFILE[?OPTIONS]` or `cached:T[?OPTIONS]`, as given
    /// (messages and result.json name it so).
    pub target: String,
    /// What it names, parsed once.
    pub spec: TargetSpec,
    /// Writes to a block device are allowed (they destroy its data).
    pub allow_destroy: bool,
    /// With `allow_destroy`: write even over signatures of past use.
    pub force: bool,
    pub engine: Engine,
}

impl TargetPlan {
    /// The target flags, the target parsed: an error names `--target` and the forms it takes.
    pub fn new(target: &str, allow_destroy: bool, force: bool, engine: Engine) -> Result<Self> {
        Self::given_as(target, "--target", allow_destroy, force, engine)
    }

    /// [`TargetPlan::new`] for a target given by another flag (`--device`), which the error then names.
    pub fn given_as(
        target: &str,
        flag: &str,
        allow_destroy: bool,
        force: bool,
        engine: Engine,
    ) -> Result<Self> {
        let spec = TargetSpec::parse(target).map_err(|e| anyhow::anyhow!("{flag} {e}"))?;
        Ok(TargetPlan {
            target: target.to_string(),
            spec,
            allow_destroy,
            force,
            engine,
        })
    }

    /// A target the command line already parsed, with its permission flags.
    pub fn from_given(
        given: &crate::flags::Given<TargetSpec>,
        allow_destroy: bool,
        force: bool,
        engine: Engine,
    ) -> Self {
        TargetPlan {
            target: given.text.clone(),
            spec: given.value.clone(),
            allow_destroy,
            force,
            engine,
        }
    }

    /// A target the command line already parsed, read-only, with the automatic engine.
    pub fn read_only(given: &crate::flags::Given<TargetSpec>) -> Self {
        Self::from_given(given, false, false, Engine::Auto)
    }

    /// A target that needs no permission flags (a virtual drive, null, a file), with the automatic engine.
    pub fn plain(target: &str) -> Result<Self> {
        Self::new(target, false, false, Engine::Auto)
    }

    /// Whether it is the virtual SSD (plain or under a cache), which stores no data unless asked to.
    pub fn is_virtual(&self) -> bool {
        self.spec.is_virtual()
    }

    /// The flags as result.json records them.
    pub fn recorded(&self) -> TargetOptions {
        TargetOptions {
            target: self.target.clone(),
            engine: engine_name(self.engine).into(),
            allow_destroy: self.allow_destroy,
            force: self.force,
        }
    }

    /// Opens the target through the command's target port (the one opener, with the safety gate), as
    /// `--target`.
    pub fn open(&self, targets: &dyn Targets, usage: Use) -> Result<Opened> {
        self.open_as(targets, usage, "--target")
    }

    /// [`TargetPlan::open`] for a target given by another flag (`--device`), which the messages then name.
    pub fn open_as(&self, targets: &dyn Targets, usage: Use, flag: &'static str) -> Result<Opened> {
        let destructive = matches!(usage, Use::Writes | Use::WritesTail);
        let access = if destructive {
            Access::Destructive {
                allow_destroy: self.allow_destroy,
                force: self.force,
            }
        } else {
            Access::ReadOnly
        };
        let options = OpenOptions {
            access,
            engine: self.engine,
            allow_atime: true,
            lay_out_files: destructive,
            flag,
            force_scope: match usage {
                Use::WritesTail => ForceScope::PartitionTables,
                _ => ForceScope::Signatures,
            },
        };
        Ok(targets.open(&self.target, &self.spec, &options)?)
    }
}

/// Fails a command refused before any I/O: closes the device, then takes back the creation or extension of a
/// `file:` target, so bad input leaves nothing behind. Returns the error to fail with.
pub(crate) fn taken_back<D>(device: D, undo: &ssdlab_targets::Undo, error: anyhow::Error) -> anyhow::Error {
    drop(device);
    undo.restore();
    error
}

/// The engine's name as `--engine` spells it and result.json records it.
pub fn engine_name(engine: Engine) -> &'static str {
    match engine {
        Engine::Auto => "auto",
        Engine::IoUring => "iouring",
        Engine::Psync => "psync",
    }
}

/// How a command uses its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// Writes: the safety gate applies (its exclusive claim held until the device closes, `--force` or not); a
    /// `file:` target is laid out (created or extended to its size).
    Writes,
    /// Writes the end of a whole device (op): `--force` lets only a partition table through.
    WritesTail,
    /// Only reads what is there: never creates or extends a file, never writes (read benchmarks, scans, op's
    /// preview).
    Reads,
}
