//! The command line, as clap types. Only shapes and help text live here; checking values against each other and
//! against the device is the plan's job.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use ssdlab_app::fanout::FleetFlag;
use ssdlab_app::flags::{
    Given, RwMode, SpanFlag, duration_arg, given_age, given_duration, given_percentile, given_size,
    given_target, percent, rate_arg, rw_arg, size_arg,
};
use ssdlab_app::methodology::options::TrimMeasure;
use ssdlab_core::target::TargetSpec;
use ssdlab_core::units::Rate;

#[derive(Debug, Parser)]
#[command(
    name = "ssdlab",
    version,
    about = "A storage lab in one binary: measure SSDs the way careful reviewers do."
)]
pub struct Cli {
    /// Print nothing on stderr but errors (tables, progress and verdicts go; the exit status and --json stay).
    #[arg(long, short, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one workload on a target and measure it (like a single fio job).
    Run(RunArgs),
    /// The one-screen answer: CrystalDiskMark's and KDiskMark's set (SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1,
    /// RND4K Q1T1, read and write), each repeated, with the spread of its repeats. Writes the test area first.
    Quick(QuickArgs),
    /// The reviewers' methodologies as one-command tests.
    #[command(subcommand)]
    Test(TestCommand),
    /// Find data that has gone slow with age: read files in timed chunks and compare with fresh data.
    Scan(ScanArgs),
    /// Rewrite files in place, safely (verified, journalled, resumable), so data that has gone slow with age is
    /// fresh again.
    Refresh(RefreshArgs),
    /// The main job: on a virtual 840 EVO 250 GB, the consistency test (default and 25% OP), TRIM validation,
    /// transfer-size sweeps (on the drive and behind a RAPID-like cache), the field report's stale-data scan and
    /// refresh, its 25-shard fan-out (before and after the refresh), a quick SNIA PTS IOPS test, the storage-bench
    /// trace replays (with and without the cache) and the drive's health (host vs NAND writes, WAF, P/E used),
    /// drawn into one report.
    Demo(DemoArgs),
    /// Redraw result directories (their result.json) into one HTML report, side by side when several.
    Report(ReportArgs),
    /// The virtual SSD: profiles, their geometry, and write-amplification model checks.
    #[command(subcommand)]
    Sim(SimCommand),
    /// Export a target (a drive, a file, the virtual SSD, or cached: over any of them) over NBD, for real
    /// clients: nbdcopy, qemu-io, fio's nbd engine, nbdfuse with a file system on top.
    Serve(ServeArgs),
    /// Drive health: SMART and NVMe data (live through smartctl, or saved), host and NAND writes, write
    /// amplification over time, wear, remaining life with a band, and a verdict; Prometheus textfile output.
    Health(HealthArgs),
    /// Purge a whole block device with the best method it offers, and check that sampled blocks read back
    /// erased. Destroys every byte on it: needs --allow-destroy, and refuses a device in use.
    Erase(EraseArgs),
    /// Over-provisioning: the drive's spare area under both conventions, what leaving a share of its capacity
    /// unused adds (--set 25%), and, with --allow-destroy, discarding that tail and printing the partition size
    /// to use.
    Op(OpArgs),
    /// Fan-out: the same random reads on every drive at once; the latency of a query that waits for all of them
    /// (computed from their histograms, or measured), what-ifs (more shards, hedged requests, replicas), and the
    /// straggler that makes the tail, with what fixing it buys. Read-only.
    Fanout(FanoutArgs),
    /// Block I/O traces: synthetic desktop traces to replay with `ssdlab test replay` (or fio --read_iolog).
    #[command(subcommand)]
    Trace(TraceCommand),
    /// List this machine's block devices with the facts the safety gate uses: size, model, rotational,
    /// discard support, partitions, and whether it would find them in use (mounted, swap, held, signatures).
    /// Like the gate, it opens each device read-only and, for an instant, exclusively (to see whether something
    /// else holds it).
    Devices(DevicesArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) generated from these definitions,
    /// e.g. `ssdlab completions bash > /etc/bash_completion.d/ssdlab`.
    Completions(CompletionsArgs),
    /// Write man pages generated from these definitions: ssdlab.1 and one per subcommand into --out DIR, or
    /// ssdlab(1) to stdout.
    Man(ManArgs),
}

#[derive(Debug, Args)]
pub struct DevicesArgs {
    /// One JSON object per device on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// A directory for ssdlab.1 and ssdlab-SUBCOMMAND.1 (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct FanoutArgs {
    /// A drive of the fan-out (repeat it: --target /dev/sdb --target /dev/sdc); /dev/NAME, file:PATH or sim:...
    /// (give a sim: drive data to read: sim:840evo-1t?scale=1/1024&fill=100%&age=4mo).
    #[arg(long = "target", value_name = "T", required_unless_present_any = ["fleet", "from"], value_parser = given_target)]
    pub targets: Vec<Given<TargetSpec>>,
    /// field-report (the Net Archive field report's search server, 2014: 25 virtual 840 EVO 1 TB shards, data 0.9
    /// to 7 months old), or a file listing one
    /// target a line (TARGET [NAME]; # comments).
    #[arg(long, value_name = "field-report|FILE", conflicts_with = "targets")]
    pub fleet: Option<FleetFlag>,
    /// With --fleet field-report: age every drive's data by this much more (e.g. 6w).
    #[arg(long, value_name = "DURATION", value_parser = given_age)]
    pub age_by: Option<Given<u64>>,
    /// With --fleet field-report: every drive's data rewritten two days before (the fix).
    #[arg(long, conflicts_with = "age_by")]
    pub refresh_all: bool,
    /// Also compute a query over this many shards like these (repeatable) [default: 100].
    #[arg(long, value_name = "N")]
    pub shards: Vec<u32>,
    /// Hedge after this percentile of the fleet's read latency (p90, p95, p99).
    #[arg(long, default_value = "p95", value_parser = given_percentile)]
    pub hedge: Given<f64>,
    /// computed: every drive reads on its own, the query is computed from their histograms; measured: also
    /// synchronized queries (one read to every drive at the same instant, waiting for all), to check it.
    #[arg(long, value_enum, default_value = "computed")]
    pub mode: FanoutModeArg,
    /// How long every drive reads (its own clock: virtual time on sim:).
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = given_duration)]
    pub runtime: Given<u64>,
    /// Read size.
    #[arg(long, default_value = "4k", value_parser = given_size)]
    pub bs: Given<u64>,
    /// Seed for offsets and data; the same seed repeats the same run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write result.json, drives.csv and report.html here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replace the result an earlier run left in --out DIR, whole (ssdlab's own files only; files of yours
    /// there are kept). Without it, a directory that holds a result is refused.
    #[arg(long, requires = "out")]
    pub replace: bool,
    /// Write per-drive and query latencies in Prometheus text format to FILE (atomically).
    #[arg(long, value_name = "FILE")]
    pub prom: Option<PathBuf>,
    /// Stream JSON Lines (begin, analysis, verdict) to stdout.
    #[arg(long)]
    pub json: bool,
    #[arg(long, value_enum, default_value = "auto")]
    pub engine: EngineArg,
    /// Instead of measuring: the query over the drives of saved fan-out results (repeatable; each host ran
    /// `ssdlab fanout --target ... --out DIR`), their histograms merged exactly. The results must share one
    /// --bs and one --runtime.
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with_all = ["targets", "fleet", "age_by", "refresh_all", "mode", "runtime", "bs", "engine", "seed"]
    )]
    pub from: Vec<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FanoutModeArg {
    Computed,
    Measured,
}

#[derive(Debug, Args)]
pub struct EraseArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// How to purge: the best the device offers whose result verifies (auto: sanitize, secure-erase, secdiscard,
    /// discard, zero), or one method.
    #[arg(long, value_enum, default_value_t = EraseMethodArg::Auto)]
    pub method: EraseMethodArg,
    /// Blocks read before and after (the first, the last and random ones) to check they are erased.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(2..=100_000))]
    pub samples: u32,
    /// Seed of the sampled blocks.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The erase record as JSON Lines on stdout (begin, analysis, verdict).
    #[arg(long)]
    pub json: bool,
    /// Write the erase record into DIR: result.json (the device's identity and capacity, every method tried and
    /// what it did, the read-back check) and report.html. Checked before anything is erased.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replace the result an earlier run left in --out DIR, whole (ssdlab's own files only; files of yours
    /// there are kept). Without it, a directory that holds a result is refused.
    #[arg(long, requires = "out")]
    pub replace: bool,
}

#[derive(Debug, Args)]
pub struct OpArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Share of the capacity to leave unused at the end of the drive, as reviewers' "25% OP" and `test consistency
    /// --op` mean it (25 or 25%). Without --allow-destroy it only shows what that means.
    #[arg(long, value_name = "PCT", value_parser = ssdlab_app::op::share_arg)]
    pub set: Option<Given<f64>>,
    /// The drive's raw NAND (e.g. 256g), when the built-in table does not know the drive.
    #[arg(long, value_name = "SIZE", value_parser = given_size)]
    pub raw_nand: Option<Given<u64>>,
    /// Tail blocks read back after the discard (the first, the last and random ones).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(2..=1_000_000))]
    pub samples: u32,
    /// Seed of the sampled blocks.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The record as JSON Lines on stdout (begin, analysis, verdict).
    #[arg(long)]
    pub json: bool,
    /// Write the record into DIR: result.json (the spare area in both conventions, the partitions, the plan and
    /// what was discarded) and report.html. Checked before anything is discarded.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replace the result an earlier run left in --out DIR, whole (ssdlab's own files only; files of yours
    /// there are kept). Without it, a directory that holds a result is refused.
    #[arg(long, requires = "out")]
    pub replace: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EraseMethodArg {
    Auto,
    /// The drive's firmware sanitize (nvme-cli or hdparm): crypto erase, else block erase.
    Sanitize,
    /// The drive's firmware secure erase: NVMe format with secure erase, or ATA SECURITY ERASE UNIT.
    SecureErase,
    /// BLKSECDISCARD: a discard the device promises makes the data unrecoverable.
    Secdiscard,
    /// BLKDISCARD: the drive unmaps every block (verified only if it then returns zeroes).
    Discard,
    /// BLKZEROOUT: every LBA written with zeroes (old data may survive in spare blocks until GC).
    Zero,
}

#[derive(Debug, Args)]
pub struct HealthArgs {
    /// Drives to read: block devices through smartctl (/dev/sda, /dev/nvme0; DEVICE:TYPE passes smartctl's -d
    /// TYPE, e.g. /dev/sdb:sat behind a USB bridge or /dev/sda:megaraid,0), or sim: targets (the virtual SSD's
    /// own counters, e.g. 'sim:840evo-250g?fill=100%').
    #[arg(value_name = "DEVICE", required_unless_present_any = ["from", "scan"])]
    pub devices: Vec<String>,
    /// Also read every drive `smartctl --scan-open` finds, each with the -d TYPE it needs.
    #[arg(long)]
    pub scan: bool,
    /// Saved health data: smartctl's output (--json -x, or the text of -x, -a or -A as saved or pasted; UTF-8,
    /// UTF-16 with a byte-order mark or Latin-1), nvme-cli 'smart-log -o json' output, or an ssdlab result
    /// directory (or its result.json) from a run on a sim: target, whose counters it reports. Repeatable.
    #[arg(long, value_name = "FILE")]
    pub from: Vec<PathBuf>,
    /// Where each drive's history (one JSON line per snapshot, by model and serial) is kept [default: the
    /// state directory's health/].
    #[arg(long, value_name = "DIR")]
    pub history: Option<PathBuf>,
    /// Neither read nor record history.
    #[arg(long, conflicts_with = "history")]
    pub no_history: bool,
    /// The history window for write rates, write amplification and the wear trend: a duration (30d, 12w) or
    /// 'all'.
    #[arg(long, default_value = "90d", value_parser = ssdlab_app::health::window_arg)]
    pub window: Given<Option<u64>>,
    /// The drive's rated endurance in terabytes written (overrides the known-drive table).
    #[arg(long, value_name = "TB")]
    pub rated_tbw: Option<f64>,
    /// The rated drive writes per day over the warranty (needs --warranty-years).
    #[arg(long, value_name = "N", requires = "warranty_years")]
    pub rated_dwpd: Option<f64>,
    /// The warranty in years, for DWPD.
    #[arg(long, value_name = "YEARS")]
    pub warranty_years: Option<f64>,
    /// The NAND's rated program/erase cycles (turns mean erase counts into wear).
    #[arg(long, value_name = "N")]
    pub rated_pe: Option<u32>,
    /// Warn from this much of the rated wear, in percent: by the drive's own wear indicator, host writes against
    /// the TBW rating, or erase cycles against the rated P/E cycles (a warning, not a failure).
    #[arg(long, value_name = "PCT", default_value = "80", value_parser = ssdlab_app::health::wear_warn_arg)]
    pub wear_warn: f64,
    /// Write the metrics in Prometheus text format to FILE (atomically), for node_exporter's textfile collector.
    #[arg(long, value_name = "FILE")]
    pub prom: Option<PathBuf>,
    /// Stream JSON Lines (begin, analysis, verdict) to stdout.
    #[arg(long)]
    pub json: bool,
    /// Write result.json and report.html here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replace the result an earlier run left in --out DIR, whole (ssdlab's own files only; files of yours
    /// there are kept). Without it, a directory that holds a result is refused.
    #[arg(long, requires = "out")]
    pub replace: bool,
    /// The smartctl to run.
    #[arg(long, value_name = "PATH", default_value = "smartctl")]
    pub smartctl: PathBuf,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Listen on a Unix socket created at PATH (removed again on exit).
    #[arg(
        long,
        value_name = "PATH",
        required_unless_present = "listen",
        conflicts_with = "listen"
    )]
    pub socket: Option<PathBuf>,
    /// Listen on TCP HOST:PORT; loopback only unless --allow-remote.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Allow a TCP address other than loopback. NBD has no authentication here and no TLS: anyone who can
    /// reach the port can read and write the export.
    #[arg(long)]
    pub allow_remote: bool,
    /// Export read-only: clients cannot write, and a block device needs no --allow-destroy.
    #[arg(long)]
    pub read_only: bool,
    /// The export's name (clients may ask for it, or for the default export with no name).
    #[arg(long, default_value = "ssdlab")]
    pub name: String,
    /// Operations in flight at the device at once, across all clients; each holds a 4 MiB buffer, registered with
    /// io_uring (128 MiB at 32).
    #[arg(long, default_value_t = 32, alias = "iodepth", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub qd: u32,
    /// Client connections open at once; past it a client's options are refused with the reason (and past 64
    /// more, new connections are closed at once).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub max_connections: u32,
    /// After a turn that answered a single request, look for the next one for up to this many microseconds
    /// before sleeping (a client at queue depth 1 sends it within a few): saves the wake-up's latency, costs CPU
    /// while it looks. 0 never looks; on a single CPU the server never looks (it would hold off a client on the
    /// same CPU), and the record says 0.
    #[arg(long, value_name = "US", default_value_t = 15, value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub poll_us: u32,
    /// The session's record as JSON Lines on stdout when the server stops (begin, analysis, verdict).
    #[arg(long)]
    pub json: bool,
    /// Write the session's record into DIR when the server stops: result.json (the export, what the clients
    /// asked for, the cache's counters) and report.html. Checked before the server listens.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replace the result an earlier run left in --out DIR, whole (ssdlab's own files only; files of yours
    /// there are kept). Without it, a directory that holds a result is refused.
    #[arg(long, requires = "out")]
    pub replace: bool,
}

#[derive(Debug, Args)]
pub struct ScanArgs {
    /// Files or directories (walked on their own file system, never through symlinks).
    #[arg(value_name = "PATH", required_unless_present_any = ["target", "device"])]
    pub paths: Vec<PathBuf>,
    /// Scan a virtual data set on the simulator instead: a sim: target (e.g. 'sim:840evo-1t?scale=1/256').
    #[arg(long, conflicts_with = "paths", value_parser = given_target)]
    pub target: Option<Given<TargetSpec>>,
    /// Region scan, read-only: MB/s across the whole LBA range of /dev/NAME, file:PATH or sim:... (HD Tach-like).
    #[arg(long, value_name = "T", conflicts_with_all = ["paths", "target"], value_parser = given_target)]
    pub device: Option<Given<TargetSpec>>,
    /// With --device: how many equal regions [default: 128].
    #[arg(long)]
    pub regions: Option<u32>,
    /// With --device: read at most this much at the start of each region (default: all of it).
    #[arg(long, value_name = "SIZE", value_parser = given_size)]
    pub region_bytes: Option<Given<u64>>,
    /// With --target: the files and their ages, AGE:COUNTxSIZE,... (e.g. 0.5mo:8x64m,7mo:8x64m), or
    /// field-report for the ages of the Net Archive field report's drives (840 EVO 1 TB, 2014).
    #[arg(long, default_value = "field-report", requires = "target")]
    pub dataset: String,
    /// With --target: rewrite the flagged files on the virtual drive, then scan again (before/after).
    #[arg(long, requires = "target")]
    pub refresh_flagged: bool,
    /// Skip files smaller than this.
    #[arg(long, default_value = "64k", value_name = "SIZE", value_parser = given_size)]
    pub min_size: Given<u64>,
    /// How each file is read through: cat (sequential 128 KiB reads one at a time, what `cat FILE > /dev/null`
    /// asks of a drive, as the field report read) or chunks (--chunk reads, --qd at a time; faster, and a deep
    /// queue hides part of a slow drive's read retries) [default: cat with --target, chunks otherwise].
    #[arg(long, value_enum)]
    pub reader: Option<ReaderArg>,
    /// With --reader chunks: the read unit; each chunk is timed [default: 1m].
    #[arg(long, value_name = "SIZE", value_parser = given_size)]
    pub chunk: Option<Given<u64>>,
    /// With --reader chunks: reads in flight [default: 4].
    #[arg(long, alias = "iodepth")]
    pub qd: Option<u32>,
    /// Random 4 KiB reads per file at queue depth 1 after reading it through (the small random reads of a
    /// search, the field report's second experiment), summarized per age [default: 256 with --target, 0
    /// otherwise].
    #[arg(long)]
    pub random_reads: Option<u32>,
    /// Flag files reading slower than this fraction of the baseline (0.5 or 50% = half as fast).
    #[arg(long, default_value = "0.5", value_parser = fraction)]
    pub slower_than: f64,
    /// Write result.json and report.html here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replace the result an earlier run left in --out DIR, whole (ssdlab's own files only; files of yours
    /// there are kept). Without it, a directory that holds a result is refused.
    #[arg(long, requires = "out")]
    pub replace: bool,
    /// Write the findings in Prometheus text format to FILE (atomically), for node_exporter's textfile
    /// collector.
    #[arg(long, value_name = "FILE")]
    pub prom: Option<PathBuf>,
    /// Stream JSON Lines (begin, analysis, verdict) to stdout.
    #[arg(long)]
    pub json: bool,
    /// Read files and directories that are not ours even though that moves their access time (by default they
    /// are skipped: O_NOATIME needs ownership).
    #[arg(long)]
    pub allow_atime: bool,
    /// Where `ssdlab refresh` keeps its records: a file it refreshed counts as written then (default as for
    /// refresh).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RefreshArgs {
    /// Files or directories (walked on their own file system, never through symlinks).
    #[arg(value_name = "PATH", required_unless_present_any = ["from", "forget"])]
    pub paths: Vec<PathBuf>,
    /// Drop what an interrupted refresh left pending for this file (or every file beneath this directory)
    /// without settling it, printing each file's original modification time to put back by hand: for entries
    /// whose file system will never be mounted again. Nothing is refreshed.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["paths", "from", "dry_run"])]
    pub forget: Vec<PathBuf>,
    /// Refresh the files a scan found slow: a scan result directory (its result.json).
    #[arg(long, value_name = "SCAN_DIR")]
    pub from: Option<PathBuf>,
    /// With --from: every file reading slower than this fraction of the scan's baseline (0.5 or 50% = half as
    /// fast), flagged or not [default: only the files the scan flagged].
    #[arg(long, requires = "from", value_parser = fraction)]
    pub slower_than: Option<f64>,
    /// Only files whose data is older than this (age = the earlier of mtime and birth time), e.g. 90d, 3mo.
    #[arg(long, value_name = "DURATION", value_parser = given_age)]
    pub older_than: Option<Given<u64>>,
    /// Bytes per second at most, e.g. 200m.
    #[arg(long, value_parser = ssdlab_app::refresh::byte_rate_arg)]
    pub rate: Option<Given<f64>>,
    /// Rewrite unit; each is read, written back, synced and re-read before the next.
    #[arg(long, default_value = "4m", value_name = "SIZE", value_parser = given_size)]
    pub chunk: Given<u64>,
    /// Only print what would be rewritten (files, bytes, wear cost, time) and why others are skipped.
    #[arg(long)]
    pub dry_run: bool,
    /// Where the journal lives (default: $SSDLAB_STATE_DIR, else /var/lib/ssdlab as root, else
    /// ~/.local/state/ssdlab).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Write result.json (every file and how it ended, before/after speeds) and report.html here.
    #[arg(long, value_name = "DIR", conflicts_with = "forget")]
    pub out: Option<PathBuf>,
    /// Replace the result an earlier run left in --out DIR, whole (ssdlab's own files only; files of yours
    /// there are kept). Without it, a directory that holds a result is refused.
    #[arg(long, requires = "out")]
    pub replace: bool,
    /// Stream JSON Lines (begin, analysis, verdict) to stdout.
    #[arg(long, conflicts_with = "forget")]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where the results and report.html go [default: ssdlab-demo, whose earlier demo output is replaced].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replace an earlier demo's results in --out DIR (ssdlab's own files only; files of yours there are kept).
    #[arg(long)]
    pub replace: bool,
    /// The virtual drive (any sim: target).
    #[arg(long, default_value = "sim:840evo-250g", value_parser = given_target)]
    pub target: Given<TargetSpec>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Result directories (or result.json files).
    #[arg(required = true, value_name = "RESULT_DIR")]
    pub results: Vec<PathBuf>,
    /// Where to write the page.
    #[arg(long, default_value = "report.html")]
    pub out: PathBuf,
    /// A name for each result, in order (repeat it once per RESULT_DIR); by default the target, plus the options
    /// in which results of one target differ.
    #[arg(long, value_name = "NAME")]
    pub label: Vec<String>,
    /// Set every result against this one (a RESULT_DIR above, or another added first): each kind's headline
    /// figures with their change in percent, better or worse.
    #[arg(long, value_name = "DIR")]
    pub baseline: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum TestCommand {
    /// Performance consistency: purge, sequential fill, then 4 KiB random writes at QD32 with IOPS every second,
    /// through the write cliff to steady state (SNIA PTS rules).
    Consistency(ConsistencyArgs),
    /// TRIM validation: sequential write speed clean, after a random-write torture, and after discarding.
    Trim(TrimArgs),
    /// Transfer-size sweep (ATTO-like): sequential write and read MB/s for every power of two.
    Sweep(SweepArgs),
    /// QD1 latency (IOmeter-like): 4 KiB random writes at queue depth 1 with percentile columns.
    Latency(LatencyArgs),
    /// SNIA PTS: purge, precondition with 2x the capacity, then rounds of the IOPS (8 block sizes x 7 mixes),
    /// throughput or latency matrix until the tracking variable reaches steady state (at most 25 rounds).
    Pts(PtsArgs),
    /// Replay a recorded trace (fio iolog v2/v3, blkparse text, MSR Cambridge CSV) at its own times or as fast as
    /// possible: the storage bench's average data rate and service time, latency, and replay fidelity.
    Replay(ReplayArgs),
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub common: TestCommon,
    /// The trace file.
    #[arg(long, value_name = "FILE")]
    pub trace: PathBuf,
    /// The trace's format; detected from its first line when not given.
    #[arg(long, value_enum)]
    pub format: Option<TraceFormatArg>,
    /// Multiply the trace's times by this: 0.5 replays twice as fast, 2 half as fast.
    #[arg(long, default_value_t = 1.0)]
    pub time_scale: f64,
    /// Ignore the trace's times and issue each operation as soon as a slot is free (closed loop).
    #[arg(long)]
    pub as_fast_as_possible: bool,
    /// The most operations in flight at once.
    #[arg(long, default_value_t = 32, alias = "iodepth")]
    pub qd: u32,
    /// Operations beyond the device's end: fold (offset modulo the capacity, keeps locality) or scale (offset x
    /// capacity / the trace's extent, keeps the spread).
    #[arg(long, value_enum, default_value = "fold")]
    pub fit: ReplayFitArg,
    /// MSR traces holding several disks: the disk to replay.
    #[arg(long, value_name = "N")]
    pub disk: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TraceFormatArg {
    FioIolog,
    Blkparse,
    Msr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReplayFitArg {
    Fold,
    Scale,
}

#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Write a synthetic trace with the mix of a desktop storage bench (light: office and browsing; heavy:
    /// workstation) as a fio iolog v3, documented in docs/trace.md.
    Synth(SynthArgs),
}

#[derive(Debug, Args)]
pub struct SynthArgs {
    #[arg(long, value_enum)]
    pub profile: SynthProfileArg,
    /// Write the trace here instead of stdout (`-`: stdout; a file that exists is refused).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// How long the trace runs.
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = given_duration)]
    pub duration: Given<u64>,
    /// The footprint it addresses (light: 16g, heavy: 32g).
    #[arg(long, value_name = "SIZE", value_parser = given_size)]
    pub span: Option<Given<u64>>,
    /// Seed for offsets and data; the same seed repeats the same run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SynthProfileArg {
    Light,
    Heavy,
}

/// Flags every test shares.
#[derive(Debug, Args)]
pub struct TestCommon {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Write result.json, CSV series and report.html into this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replace the result an earlier run left in --out DIR, whole (ssdlab's own files only; files of yours
    /// there are kept). Without it, a directory that holds a result is refused.
    #[arg(long, requires = "out")]
    pub replace: bool,
    /// Stream JSON Lines (begin, phases, samples, summaries, analysis, verdict) to stdout.
    #[arg(long)]
    pub json: bool,
    /// Seed for offsets and data; the same seed repeats the same run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Debug, Args)]
pub struct QuickArgs {
    #[command(flatten)]
    pub common: TestCommon,
    /// Times each case runs (CrystalDiskMark: 5).
    #[arg(long, default_value_t = 5)]
    pub repeats: u32,
    /// How long each repeat runs (CrystalDiskMark: 5s).
    #[arg(long, default_value = "5s", value_name = "DURATION", value_parser = duration_arg)]
    pub runtime: u64,
    /// The test area from the start of the target, written once before the reads (CrystalDiskMark: 1 GiB).
    #[arg(long, default_value = "1g", value_name = "SIZE", value_parser = size_arg)]
    pub size: u64,
    /// Keep the test file a file:PATH:SIZE target created in this run (it is removed at the end by default, as
    /// CrystalDiskMark and KDiskMark remove theirs; a file that was there before is never removed).
    #[arg(long)]
    pub keep: bool,
    /// The set of cases: default (SEQ1M Q8T1, SEQ1M Q1T1, RND4K Q32T1, RND4K Q1T1) or nvme (CrystalDiskMark's NVMe
    /// SSD setting: SEQ1M Q8T1, SEQ128K Q32T1, RND4K Q32T16, RND4K Q1T1; the 16 threads are threads on a real
    /// target, submitters of one loop on sim: and cached:).
    #[arg(long, value_enum, default_value = "default")]
    pub profile: QuickProfileArg,
}

/// `quick --profile`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum QuickProfileArg {
    Default,
    Nvme,
}

impl From<QuickProfileArg> for ssdlab_methods::quick::QuickProfile {
    fn from(profile: QuickProfileArg) -> Self {
        match profile {
            QuickProfileArg::Default => ssdlab_methods::quick::QuickProfile::Default,
            QuickProfileArg::Nvme => ssdlab_methods::quick::QuickProfile::Nvme,
        }
    }
}

#[derive(Debug, Args)]
pub struct ConsistencyArgs {
    #[command(flatten)]
    pub common: TestCommon,
    /// How long the 4 KiB random writes run.
    #[arg(long, default_value = "2000s", value_name = "DURATION", value_parser = duration_arg)]
    pub runtime: u64,
    /// Extra over-provisioning in percent (25 or 25%), simulated by testing only the first (100 - OP)% of the
    /// LBAs.
    #[arg(long, default_value = "0", value_parser = whole_percent)]
    pub op: u32,
    /// Sequential fill passes before the random writes.
    #[arg(long, default_value_t = 1)]
    pub fill_passes: u32,
}

#[derive(Debug, Args)]
pub struct TrimArgs {
    #[command(flatten)]
    pub common: TestCommon,
    /// How long the 4 KiB random-write torture runs.
    #[arg(long, default_value = "40m", value_name = "DURATION", value_parser = duration_arg)]
    pub torture: u64,
    /// How each state is measured: sequential writes for this long (Iometer's 60 s in the seeds), or 'full' for a
    /// whole pass over the drive (HD Tach's way).
    #[arg(long, default_value = "60s", value_name = "DURATION|full")]
    pub measure: TrimMeasure,
    /// Let the drive sit idle this long after the TRIM before measuring (drives that reclaim trimmed space in
    /// the background recover during it).
    #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
    pub idle: Option<u64>,
}

#[derive(Debug, Args)]
pub struct SweepArgs {
    #[command(flatten)]
    pub common: TestCommon,
    /// The region written and read at each size (clamped to the device).
    #[arg(long, default_value = "2g", value_name = "SIZE", value_parser = size_arg)]
    pub test_size: u64,
    #[arg(long, default_value_t = 4, alias = "iodepth")]
    pub qd: u32,
    /// Smallest transfer size.
    #[arg(long, default_value = "512", value_name = "SIZE", value_parser = size_arg)]
    pub from: u64,
    /// Largest transfer size (at most 64m).
    #[arg(long, default_value = "64m", value_name = "SIZE", value_parser = size_arg)]
    pub to: u64,
    /// Each size and direction stops after one pass over the region or this long, whichever is first.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = duration_arg)]
    pub size_runtime: u64,
    /// size: sequential MB/s by transfer size (ATTO); qd: random IOPS by queue depth, 1 to --max-qd, at --bs;
    /// mix: random IOPS at --bs and --qd with reads from 0% to 100% of operations, in steps of 10.
    #[arg(long, value_enum, default_value = "size")]
    pub axis: SweepAxisArg,
    /// With --axis qd or mix: the block size [default: 4k].
    #[arg(long, value_name = "SIZE", value_parser = size_arg)]
    pub bs: Option<u64>,
    /// With --axis qd: the deepest queue (powers of two from 1).
    #[arg(long)]
    pub max_qd: Option<u32>,
    /// Copies of each point's workload side by side, 1 to 64 (fio's numjobs, the disk-mark tools' T), each at the
    /// point's queue depth (random points: offsets of its own; sequential ones: each from the region's start, as
    /// fio's jobs); a thread each on a real target, submitters of one loop on sim: and cached:.
    #[arg(long, default_value_t = 1, alias = "numjobs", value_name = "N")]
    pub jobs: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SweepAxisArg {
    Size,
    Qd,
    Mix,
}

#[derive(Debug, Args)]
pub struct LatencyArgs {
    #[command(flatten)]
    pub common: TestCommon,
    /// The QD1 operations: randwrite (IOmeter's 4K QD1 write), randread, read, write, or randrw (70% reads).
    /// Reads need no --allow-destroy.
    #[arg(long, value_enum, default_value = "randwrite", alias = "readwrite")]
    pub rw: LatencyRwArg,
    /// The region the random writes land in (clamped to the device).
    #[arg(long, default_value = "8g", value_name = "SIZE", value_parser = size_arg)]
    pub span: u64,
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = duration_arg)]
    pub runtime: u64,
}

#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// List the built-in drive profiles.
    Profiles(SimProfilesArgs),
    /// Show a profile's geometry, timings, over-provisioning and memory at a scale.
    Info(SimInfoArgs),
    /// Measure greedy-GC write amplification under uniform random 4 KiB overwrites after a full fill, next to
    /// the closed-form model (Desnoyers).
    Wa(SimWaArgs),
}

#[derive(Debug, Args)]
pub struct SimProfilesArgs {
    /// One JSON object per profile on stdout (every parameter, at full scale) instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SimInfoArgs {
    /// A profile name, optionally with parameters: 840evo-250g?scale=1/64&op=25.
    pub profile: String,
    /// Print the description as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SimWaArgs {
    /// Over-provisioning in percent (25 or 25%): (physical - logical) / logical.
    #[arg(long, value_parser = percent)]
    pub op: f64,
    /// 4 KiB mapping units per erase block (the unit garbage collection reclaims).
    #[arg(long, default_value_t = 64)]
    pub pages_per_block: u32,
    /// Logical capacity in 4 KiB units.
    #[arg(long, default_value_t = 1 << 18)]
    pub logical_units: u32,
    /// Victim selection.
    #[arg(long, value_enum, default_value_t = GcPolicyArg::Greedy)]
    pub gc: GcPolicyArg,
    /// Host writes before measuring, in multiples of the logical capacity.
    #[arg(long, default_value_t = 10)]
    pub warmup: u32,
    /// Host writes measured, in multiples of the logical capacity.
    #[arg(long, default_value_t = 10)]
    pub measure: u32,
    /// Seed for offsets and data; the same seed repeats the same run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print the result as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GcPolicyArg {
    Greedy,
    CostBenefit,
}

#[derive(Debug, Args)]
pub struct PtsArgs {
    #[command(flatten)]
    pub common: TestCommon,
    /// Which PTS test: iops (random, 0.5-1024 KiB by R/W 100/0 to 0/100), throughput (sequential 1024 and
    /// 128 KiB) or latency (QD1, 0.5/4/8 KiB by R/W 100/0, 65/35, 0/100).
    #[arg(long, value_enum, default_value = "iops")]
    pub test: PtsTestArg,
    /// How long each cell of the matrix runs per round (the PTS: 1 minute; shorten for a quick look).
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = duration_arg)]
    pub round_time: u64,
    /// The ActiveRange: the share of the LBAs the rounds address (100 or 100%).
    #[arg(long, default_value = "100", value_parser = percent)]
    pub span: f64,
    /// Outstanding I/Os of the IOPS and throughput tests [default: 32]; the latency test runs at 1.
    #[arg(long, alias = "iodepth")]
    pub qd: Option<u32>,
    /// Rounds before giving up on steady state (the PTS: 25; more are run, and the result says it does not
    /// conform).
    #[arg(long, default_value_t = 25)]
    pub max_rounds: u32,
    /// Which specification: enterprise (PTS-E: the throughput test runs 1024 KiB and 128 KiB as two tests) or
    /// client (PTS-C: 1024 KiB only).
    #[arg(long, value_enum, default_value = "enterprise")]
    pub flavour: PtsFlavourArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PtsFlavourArg {
    Enterprise,
    Client,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PtsTestArg {
    Iops,
    Throughput,
    Latency,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LatencyRwArg {
    Randwrite,
    Randread,
    Read,
    Write,
    Randrw,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReaderArg {
    /// Sequential 128 KiB reads, one at a time (kernel readahead's pattern under `cat`).
    Cat,
    /// --chunk reads, --qd at a time.
    Chunks,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// io_uring when the kernel allows it, otherwise pread/pwrite.
    Auto,
    /// (fio's libaio is accepted for it: the kernel's asynchronous interface ssdlab uses is io_uring.)
    #[value(name = "io_uring", alias = "libaio")]
    IoUring,
    /// pread/pwrite, one operation at a time.
    Psync,
}

/// Flags every command that opens a target shares.
#[derive(Debug, Args)]
pub struct TargetArgs {
    /// /dev/NAME, file:PATH[:SIZE][?cache=page] (O_DIRECT, or the page cache as nbdkit file uses), null[:SIZE],
    /// sim:PROFILE[?OPTIONS] (the virtual SSD; `ssdlab sim profiles`), or
    /// cached:T[?size=1g&mode=writeback|writethrough|readonly&seq-cutoff=4m&dirty-limit=50%&hot-map=off|on|PATH&cpu-limit=off|PCT]
    /// (a DRAM cache over T).
    #[arg(long, value_name = "T", value_parser = given_target)]
    pub target: Given<TargetSpec>,
    /// Allow writes and discards to a block device (they destroy its data). Files and null need no permission.
    #[arg(long)]
    pub allow_destroy: bool,
    /// With --allow-destroy: write even to a device that carries a filesystem or partition-table signature. A
    /// device that is mounted, used as swap, held by md/dm/LVM or open exclusively is always refused.
    #[arg(long)]
    pub force: bool,
    /// How I/O is issued (fio's --ioengine names: io_uring, psync).
    #[arg(long, value_enum, default_value_t = EngineArg::Auto, alias = "ioengine")]
    pub engine: EngineArg,
}

impl TargetArgs {
    /// The flags as a command's plan holds them.
    pub fn plan(&self) -> ssdlab_app::TargetPlan {
        ssdlab_app::TargetPlan::from_given(&self.target, self.allow_destroy, self.force, self.engine.into())
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    /// read, write, randread, randwrite, randrw, trim or randtrim.
    #[arg(long, default_value = "randread", alias = "readwrite", value_name = "RW", value_parser = rw_arg)]
    pub rw: RwMode,
    /// For randrw: reads as a percentage of operations (70 or 70%).
    #[arg(long, default_value = "70", alias = "rwmixread", value_parser = whole_percent_u8)]
    pub mix: u8,
    /// Block size, 512 B to 64 MiB, a multiple of the device's logical block size.
    #[arg(
        long,
        default_value = "4k",
        allow_hyphen_values = true,
        alias = "blocksize",
        value_name = "SIZE",
        value_parser = size_arg
    )]
    pub bs: u64,
    /// Operations kept in flight, 1 to 1024 (in each job).
    #[arg(long, default_value_t = 32, alias = "iodepth")]
    pub qd: u32,
    /// Copies of the workload run side by side, 1 to 64 (fio's numjobs): each job has its own --qd, random offsets
    /// (a sequential job starts at the span's start, as fio's do), --rate and --bytes/--passes limits, over the
    /// whole span (with --verify, over its own share of it). On a real target each job is a thread with its own
    /// io_uring.
    #[arg(long, default_value_t = 1, alias = "numjobs", value_name = "N")]
    pub jobs: u32,
    /// The region to use: a percentage of the target (100%) or OFFSET:LEN (e.g. 1g:8g).
    #[arg(long, default_value = "100%")]
    pub span: SpanFlag,
    /// Stop after this long (e.g. 10s, 2m). The default when no limit is given is 10s.
    #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
    pub runtime: Option<u64>,
    /// Run this long first, before any statistic is kept (fio's ramp_time, e.g. 5s); --runtime counts from its
    /// end, --bytes and --passes count the ramp's I/O too.
    #[arg(long, value_name = "DURATION", alias = "ramp_time", value_parser = duration_arg)]
    pub ramp_time: Option<u64>,
    /// Stop after transferring this many bytes (e.g. 1g; fio's io_size).
    #[arg(long, value_name = "SIZE", alias = "io_size", value_parser = size_arg)]
    pub bytes: Option<u64>,
    /// Stop after touching every block of the span this many times.
    #[arg(long)]
    pub passes: Option<u64>,
    /// Open-loop rate limit: bytes per second (200m) or operations per second (50kiops). Latency is measured
    /// from each operation's scheduled time.
    #[arg(long, value_parser = rate_arg)]
    pub rate: Option<Rate>,
    /// Seed for offsets and data; the same seed repeats the same run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Random offsets drawn independently (blocks may repeat or be missed) instead of each block once per pass.
    #[arg(long)]
    pub norandommap: bool,
    /// Write a checkable pattern (offset + seed) and check every block read; a write run reads everything it
    /// wrote back at the end.
    #[arg(long)]
    pub verify: bool,
    /// Stream JSON Lines (begin, one sample per second, summary, verdict) to stdout.
    #[arg(long)]
    pub json: bool,
    /// Write result.json and samples.csv into this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Replace the result an earlier run left in --out DIR, whole (ssdlab's own files only; files of yours
    /// there are kept). Without it, a directory that holds a result is refused.
    #[arg(long, requires = "out")]
    pub replace: bool,
}

/// fio's option names that ssdlab spells differently or does not need, with what to write instead. (Names with
/// the same meaning, such as --iodepth, --rwmixread, --blocksize, --readwrite and --ioengine, are accepted as
/// hidden aliases instead.)
const FIO_HINTS: [(&str, &str); 6] = [
    (
        "--filename",
        "give the device or file as --target (/dev/NAME, or file:PATH[:SIZE] for a file)",
    ),
    (
        "--size",
        "use --span (100%, or OFFSET:LEN) for the region, or --bytes to stop after an amount",
    ),
    (
        "--direct",
        "ssdlab always uses O_DIRECT where the target allows it; leave it out",
    ),
    (
        "--output-format",
        "use --json for JSON Lines on stdout, or --out DIR for result.json",
    ),
    (
        "--name",
        "ssdlab names results by their target and method; leave it out",
    ),
    (
        "--rate_iops",
        "use --rate with an IOPS figure, e.g. --rate 50kiops",
    ),
];

/// The hint for a fio option among the arguments (before any `--`), if one was given: ssdlab's spelling of it.
/// The caller passes only the argument clap did not know, so a flag of ssdlab's own that fio also has
/// (`serve --name`, `quick --size`) is never taken for fio's.
pub fn fio_hint(args: &[String]) -> Option<String> {
    args.iter().skip(1).take_while(|a| *a != "--").find_map(|arg| {
        let name = arg.split('=').next().unwrap_or(arg);
        FIO_HINTS
            .iter()
            .find(|(fio, _)| *fio == name)
            .map(|(fio, instead)| format!("{fio} is fio's option: {instead}"))
    })
}

/// A whole percentage written `25` or `25%`.
fn whole_percent(text: &str) -> Result<u32, String> {
    let value = percent(text)?;
    if value.fract() != 0.0 || value > u32::MAX as f64 {
        return Err(format!("write a whole percentage, e.g. 25 or 25%, not '{text}'"));
    }
    Ok(value as u32)
}

fn whole_percent_u8(text: &str) -> Result<u8, String> {
    let value = whole_percent(text)?;
    u8::try_from(value).map_err(|_| format!("'{text}' is more than 100%"))
}

/// A fraction written `0.5` or as a percentage, `50%`.
fn fraction(text: &str) -> Result<f64, String> {
    match text.strip_suffix('%') {
        Some(_) => Ok(percent(text)? / 100.0),
        None => text
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("write a fraction or a percentage, e.g. 0.5 or 50%, not '{text}'")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_take_both_spellings() {
        assert_eq!(percent("25"), Ok(25.0));
        assert_eq!(percent("25%"), Ok(25.0));
        assert_eq!(whole_percent("25%"), Ok(25));
        assert!(whole_percent("2.5").is_err());
        assert!(whole_percent_u8("300").is_err());
        assert_eq!(fraction("0.5"), Ok(0.5));
        assert_eq!(fraction("50%"), Ok(0.5));
        assert!(fraction("half").is_err());
        assert!(percent("-5").is_err());
    }
}
