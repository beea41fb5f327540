//! `trace synth`: a synthetic desktop trace (ssdlab-trace's generator) as a fio iolog v3, into a new file or
//! onto stdout.

use std::io::Write;

use anyhow::{Context, Result, bail};
use ssdlab_trace::synth::{self, Profile};

use crate::flags::Given;
use crate::ports::{Outcome, Ports};

/// A synthetic trace, checked.
#[derive(Debug, Clone)]
pub struct Plan {
    pub profile: Profile,
    pub seed: u64,
    /// `--duration` in nanoseconds.
    duration: Given<u64>,
    /// `--span` in bytes.
    span: Option<Given<u64>>,
    /// A new file to write, or None for stdout.
    pub out: Option<std::path::PathBuf>,
}

impl Plan {
    pub fn new(
        profile: Profile,
        seed: u64,
        duration: Given<u64>,
        span: Option<Given<u64>>,
        out: Option<std::path::PathBuf>,
    ) -> Result<Plan> {
        if !(1_000_000_000..=86_400_000_000_000).contains(&duration.value) {
            bail!("--duration {}: between 1s and 24h", duration.text);
        }
        if let Some(span) = span.as_ref().filter(|s| s.value < 4 << 20) {
            bail!("--span {}: at least 4m", span.text);
        }
        Ok(Plan {
            profile,
            seed,
            duration,
            span,
            out: out.filter(|p| p.as_os_str() != "-"),
        })
    }
}

/// Generates the trace and writes it.
pub fn run(plan: &Plan, ports: &mut Ports) -> Result<Outcome> {
    let (profile, duration_ns) = (plan.profile, plan.duration.value);
    let span_bytes = plan.span.as_ref().map(|s| s.value);
    let ops = synth::generate(profile, plan.seed, duration_ns, span_bytes);
    let text = synth::to_fio_iolog(&ops, "/dev/ssdlab-synth");
    let mix = profile.mix();
    // `--out -` is stdout, as for fio and most tools, never a file named "-".
    match &plan.out {
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
            ports.console.say(&format!(
                "trace     {} profile: {} operations over {}, {}% reads, footprint {}, seed {} -> {}",
                profile.name(),
                ops.len(),
                ssdlab_core::units::Nanos(plan.duration.value as f64),
                mix.read_percent,
                ssdlab_core::units::BinaryBytes(span_bytes.unwrap_or(mix.span_bytes)),
                plan.seed,
                path.display()
            ));
        }
        None => {
            // One write: the trace is the command's whole output (its lines end in a newline the console adds).
            return ports
                .print_lines([text.trim_end_matches('\n').to_string()])
                .context("writing the trace to stdout");
        }
    }
    Ok(Outcome::Passed)
}
