//! The test methods' flags, typed by the command line's parser (durations in ns, sizes in bytes), checked into
//! their options: each refusal names the flag and the fix. A replay's trace is read here too (line by line), so a
//! plan holds its operations, not its text.

use std::path::Path;

use anyhow::{Result, anyhow, bail};
use ssdlab_core::schema::replay::{ReplayFit, ReplayOptions, TraceFormat};
use ssdlab_methods::consistency::ConsistencyOptions;
use ssdlab_methods::latency::{LatencyOptions, LatencyRw};
use ssdlab_methods::pts::{PtsFlavour, PtsOptions, PtsTest};
use ssdlab_methods::replay::TraceInput;
use ssdlab_methods::sweep::{SweepAxis, SweepOptions};
use ssdlab_methods::trim::TrimOptions;

use ssdlab_core::units::{BinaryBytes, Nanos};

/// `test consistency`'s flags.
pub struct ConsistencyFlags {
    pub runtime_ns: u64,
    pub op: u32,
    pub fill_passes: u32,
}

/// How `test trim` measures each state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrimMeasure {
    /// A whole pass over the span (HD Tach's way): `--measure full`.
    Full,
    /// Sequential writes for this long.
    For(u64),
}

impl std::str::FromStr for TrimMeasure {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<Self, String> {
        match text {
            "full" => Ok(TrimMeasure::Full),
            _ => crate::flags::duration_arg(text)
                .map(TrimMeasure::For)
                .map_err(|e| format!("{e}; or write 'full' for a whole pass")),
        }
    }
}

/// `test trim`'s flags.
pub struct TrimFlags {
    pub torture_ns: u64,
    pub measure: TrimMeasure,
    pub idle_ns: Option<u64>,
}

/// `test sweep`'s flags.
pub struct SweepFlags {
    pub test_bytes: u64,
    pub qd: u32,
    pub from_bytes: u64,
    pub to_bytes: u64,
    pub size_runtime_ns: u64,
    pub axis: SweepAxis,
    pub block_bytes: Option<u64>,
    pub max_qd: Option<u32>,
    /// `--jobs`: copies of each point's workload side by side.
    pub jobs: u32,
}

/// `test latency`'s flags.
pub struct LatencyFlags {
    pub rw: LatencyRw,
    pub span_bytes: u64,
    pub runtime_ns: u64,
}

/// `test replay`'s flags.
pub struct ReplayFlags<'a> {
    pub trace: &'a Path,
    pub format: Option<TraceFormat>,
    pub time_scale: f64,
    pub as_fast_as_possible: bool,
    pub qd: u32,
    pub fit: ReplayFit,
    pub disk: Option<u32>,
}

impl<'a> ReplayFlags<'a> {
    /// `test replay --trace TRACE` as the binary defaults it: the format detected, at the trace's own times, QD32,
    /// offsets folded onto the device, every disk.
    pub fn at_trace_times(trace: &'a Path) -> Self {
        ReplayFlags {
            trace,
            format: None,
            time_scale: 1.0,
            as_fast_as_possible: false,
            qd: 32,
            fit: ReplayFit::Fold,
            disk: None,
        }
    }
}

/// `test pts`'s flags.
pub struct PtsFlags {
    pub test: PtsTest,
    pub round_ns: u64,
    pub span: f64,
    pub qd: Option<u32>,
    pub max_rounds: u32,
    pub flavour: PtsFlavour,
}

/// `quick`'s flags.
pub struct QuickFlags {
    pub repeats: u32,
    pub runtime_ns: u64,
    pub span_bytes: u64,
    /// `--keep`: keep the test file this run created.
    pub keep: bool,
    /// `--profile`: the default set, or CrystalDiskMark's NVMe set.
    pub profile: ssdlab_methods::quick::QuickProfile,
}

fn ns(ns: u64) -> Nanos {
    Nanos(ns as f64)
}

/// `quick`'s flags, checked.
pub fn quick(args: QuickFlags) -> Result<ssdlab_methods::quick::QuickOptions> {
    if !(1..=100).contains(&args.repeats) {
        bail!(
            "--repeats {}: run each case 1 to 100 times (CrystalDiskMark runs 5)",
            args.repeats
        );
    }
    if args.runtime_ns < 100_000_000 {
        bail!(
            "--runtime {}: run each repeat for at least 100ms (CrystalDiskMark runs 5s)",
            ns(args.runtime_ns)
        );
    }
    if args.span_bytes < 1 << 20 {
        bail!(
            "--size {}: the test area holds at least one 1 MiB block, e.g. --size 1g",
            BinaryBytes(args.span_bytes)
        );
    }
    Ok(ssdlab_methods::quick::QuickOptions {
        repeats: args.repeats,
        runtime_ns: args.runtime_ns,
        span_bytes: args.span_bytes,
        keep: args.keep,
        profile: args.profile,
    })
}

/// The consistency test's flags, checked.
pub fn consistency(args: ConsistencyFlags) -> Result<ConsistencyOptions> {
    let options = ConsistencyOptions {
        runtime_ns: args.runtime_ns,
        op_percent: args.op,
        fill_passes: args.fill_passes,
        ..ConsistencyOptions::default()
    };
    if options.runtime_ns < 1_000_000_000 {
        bail!(
            "--runtime {}: run the random writes for at least 1s",
            ns(args.runtime_ns)
        );
    }
    if args.op >= 100 {
        bail!(
            "--op {}: the extra over-provisioning must be below 100 (percent of the LBAs left untested)",
            args.op
        );
    }
    if args.fill_passes == 0 {
        bail!("--fill-passes 0: fill at least once");
    }
    Ok(options)
}

/// The TRIM test's flags, checked.
pub fn trim(args: TrimFlags) -> Result<TrimOptions> {
    let measure_ns = match args.measure {
        TrimMeasure::Full => None,
        TrimMeasure::For(measure_ns) => {
            if measure_ns < 1_000_000_000 {
                bail!(
                    "--measure {}: measure for at least a second, e.g. --measure 60s, or 'full'",
                    ns(measure_ns)
                );
            }
            Some(measure_ns)
        }
    };
    let options = TrimOptions {
        torture_ns: args.torture_ns,
        measure_ns,
        idle_ns: args.idle_ns.unwrap_or(0),
        ..TrimOptions::default()
    };
    if options.torture_ns == 0 {
        bail!("--torture 0: torture for at least a moment, e.g. --torture 30s");
    }
    Ok(options)
}

/// A sweep's flags, checked (the axis decides which apply).
pub fn sweep(args: SweepFlags) -> Result<SweepOptions> {
    let axis = args.axis;
    if axis == SweepAxis::Size && (args.block_bytes.is_some() || args.max_qd.is_some()) {
        bail!("--bs and --max-qd shape a queue-depth or mix sweep: add --axis qd or mix, or leave them out");
    }
    if axis == SweepAxis::Mix && args.max_qd.is_some() {
        bail!("--max-qd shapes a queue-depth sweep; a mix sweep runs at --qd");
    }
    let max_queue_depth = args.max_qd.unwrap_or(256);
    if !(1..=1024).contains(&max_queue_depth) {
        bail!("--max-qd {max_queue_depth}: between 1 and 1024");
    }
    let options = SweepOptions {
        test_bytes: args.test_bytes,
        queue_depth: args.qd,
        from_bytes: args.from_bytes,
        to_bytes: args.to_bytes,
        size_runtime_ns: args.size_runtime_ns,
        axis,
        block_bytes: args.block_bytes.unwrap_or(4096),
        max_queue_depth,
        jobs: args.jobs,
    };
    if !(1..=ssdlab_core::workload::MAX_JOBS).contains(&args.jobs) {
        bail!(
            "--jobs {}: must be between 1 and {}",
            args.jobs,
            ssdlab_core::workload::MAX_JOBS
        );
    }
    if !(1..=1024).contains(&args.qd) {
        bail!("--qd {}: queue depth must be between 1 and 1024", args.qd);
    }
    if options.from_bytes < 512 || options.to_bytes > 64 << 20 || options.from_bytes > options.to_bytes {
        bail!(
            "--from {} --to {}: sizes run from 512 B to 64 MiB, smaller first",
            BinaryBytes(args.from_bytes),
            BinaryBytes(args.to_bytes)
        );
    }
    if options.test_bytes == 0 || options.size_runtime_ns == 0 {
        bail!("--test-size and --size-runtime must be above zero");
    }
    check_sweep_jobs(&options)?;
    Ok(options)
}

/// Checks before any I/O that the sweep's largest point fits `--jobs` copies side by side: every job's
/// operations in flight together, and their buffers. A point refused half-way would lose the points measured.
fn check_sweep_jobs(options: &SweepOptions) -> Result<()> {
    use ssdlab_core::workload::{BUFFER_LIMIT_BYTES, MAX_SLOTS_IN_FLIGHT};
    let jobs = u64::from(options.jobs);
    if jobs == 1 {
        return Ok(());
    }
    // The deepest queue and the largest block any point uses, and the flags that set them.
    let (depth, depth_flag, block, block_flag) = match options.axis {
        SweepAxis::Qd => (options.max_queue_depth, "--max-qd", options.block_bytes, "--bs"),
        SweepAxis::Mix => (options.queue_depth, "--qd", options.block_bytes, "--bs"),
        SweepAxis::Size => (
            options.queue_depth,
            "--qd",
            options.to_bytes.min(64 << 20),
            "--to",
        ),
    };
    let in_flight = jobs * u64::from(depth);
    if in_flight > MAX_SLOTS_IN_FLIGHT {
        bail!(
            "--jobs {jobs} x {depth_flag} {depth} keeps {in_flight} operations in flight at the deepest point, above the \
             {MAX_SLOTS_IN_FLIGHT} ssdlab allows together; lower --jobs or {depth_flag}"
        );
    }
    if in_flight * block > BUFFER_LIMIT_BYTES {
        bail!(
            "--jobs {jobs} x {depth_flag} {depth} x {block_flag} {} needs {} of buffers at the largest point, above \
             the 4 GiB limit; lower --jobs, {depth_flag} or {block_flag}",
            BinaryBytes(block),
            BinaryBytes(in_flight * block)
        );
    }
    Ok(())
}

/// The latency test's flags, checked.
pub fn latency(args: LatencyFlags) -> Result<LatencyOptions> {
    let options = LatencyOptions {
        span_bytes: args.span_bytes,
        runtime_ns: args.runtime_ns,
        rw: args.rw,
    };
    if options.span_bytes < 4096 {
        bail!("--span {}: at least 4k", BinaryBytes(args.span_bytes));
    }
    if options.runtime_ns == 0 {
        bail!("--runtime 0: run for at least a moment");
    }
    Ok(options)
}

/// A replay's flags, checked, and its trace read: the options and the trace's operations (fitted to the device
/// later, by the method; a trace of reads alone opens a real device read-only).
pub fn replay(args: ReplayFlags) -> Result<(ReplayOptions, TraceInput)> {
    if !(args.time_scale.is_finite() && args.time_scale > 0.0) {
        bail!(
            "--time-scale {}: a factor above 0 (0.5 replays twice as fast, 2 half as fast)",
            args.time_scale
        );
    }
    if !(1..=1024).contains(&args.qd) {
        bail!("--qd {}: between 1 and 1024 operations in flight", args.qd);
    }
    let shown = args.trace.display();
    // Read line by line: a trace of millions of operations is kept as its operations, never as text.
    let file = crate::inputs::open(&format!("--trace {shown}"), args.trace)?;
    let format = args.format;
    let trace = ssdlab_trace::read_from(
        std::io::BufReader::with_capacity(1 << 20, file),
        format,
        ssdlab_trace::ReadOptions { msr_disk: args.disk },
    )
    .map_err(|e| anyhow!("--trace {shown}: {e}"))?;
    if args.disk.is_some() && trace.format != TraceFormat::Msr {
        bail!(
            "--disk chooses a disk of an MSR trace; {shown} is {}",
            trace.format.name()
        );
    }
    let options = ReplayOptions {
        trace: shown.to_string(),
        format: trace.format,
        time_scale: args.time_scale,
        as_fast_as_possible: args.as_fast_as_possible,
        queue_depth: args.qd,
        fit: args.fit,
        msr_disk: args.disk,
    };
    let input = TraceInput {
        format: trace.format,
        ops: trace.ops,
        notes: trace.notes,
    };
    Ok((options, input))
}

pub fn pts(args: PtsFlags) -> Result<PtsOptions> {
    let options = PtsOptions {
        test: args.test,
        cell_ns: args.round_ns,
        active_range_percent: args.span,
        queue_depth: args.qd.unwrap_or(32),
        max_rounds: args.max_rounds,
        flavour: args.flavour,
        ..PtsOptions::default()
    };
    if options.cell_ns < 100_000_000 {
        bail!(
            "--round-time {}: run each cell for at least 100ms (the PTS runs a minute)",
            ns(args.round_ns)
        );
    }
    if !(args.span > 0.0 && args.span <= 100.0) {
        bail!(
            "--span {}: the ActiveRange is a percentage above 0 and at most 100",
            args.span
        );
    }
    if let Some(qd) = args.qd {
        if options.test == PtsTest::Latency {
            bail!("--qd {qd}: the PTS latency test runs at QD1 by definition; leave --qd out");
        }
        if !(1..=1024).contains(&qd) {
            bail!("--qd {qd}: queue depth must be between 1 and 1024");
        }
    }
    if !(5..=1000).contains(&args.max_rounds) {
        bail!(
            "--max-rounds {}: between 5 (one steady-state window) and 1000; the PTS allows 25 (more are run \
             and said not to conform)",
            args.max_rounds
        );
    }
    Ok(options)
}
