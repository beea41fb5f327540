//! `ssdlab trace synth`: writes a synthetic desktop trace (ssdlab-trace's generator) as a fio iolog v3.

use std::io::Write;

use anyhow::{Context, Result, bail};
use ssdlab_trace::synth::{self, Profile};

use super::Outcome;
use crate::cli::{SynthProfileArg, TraceCommand};
use crate::plan::{duration_flag, size_flag};

pub fn run(command: &TraceCommand) -> Result<Outcome> {
    let TraceCommand::Synth(args) = command;
    let profile = match args.profile {
        SynthProfileArg::Light => Profile::Light,
        SynthProfileArg::Heavy => Profile::Heavy,
    };
    let duration_ns = duration_flag("duration", &args.duration)?;
    // The trace is built in memory (about 300 operations a second for heavy): a day is plenty for a bench.
    if !(1_000_000_000..=86_400_000_000_000).contains(&duration_ns) {
        bail!("--duration {}: between 1s and 24h", args.duration);
    }
    let span_bytes = args.span.as_deref().map(|s| size_flag("span", s)).transpose()?;
    if span_bytes.is_some_and(|s| s < 4 << 20) {
        bail!("--span {}: at least 4m", args.span.as_deref().unwrap_or_default());
    }
    let ops = synth::generate(profile, args.seed, duration_ns, span_bytes);
    let text = synth::to_fio_iolog(&ops, "/dev/ssdlab-synth");
    let mix = profile.mix();
    // `--out -` is stdout, as for fio and most tools, never a file named "-".
    match args.out.as_ref().filter(|p| p.as_os_str() != "-") {
        Some(path) => {
            // Never overwrite: a trace file is somebody's recording.
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .with_context(|| {
                    format!(
                        "--out {}: cannot create it (it must not exist yet)",
                        path.display()
                    )
                })?;
            file.write_all(text.as_bytes())
                .with_context(|| format!("--out {}: writing the trace", path.display()))?;
            eprintln!(
                "trace     {} profile: {} operations over {}, {}% reads, footprint {}, seed {} -> {}",
                profile.name(),
                ops.len(),
                args.duration,
                mix.read_percent,
                ssdlab_core::units::BinaryBytes(span_bytes.unwrap_or(mix.span_bytes)),
                args.seed,
                path.display()
            );
        }
        None => {
            let mut out = std::io::stdout().lock();
            match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(Outcome::PipeClosed),
                result => result.context("writing the trace to stdout")?,
            }
        }
    }
    Ok(Outcome::Passed)
}
