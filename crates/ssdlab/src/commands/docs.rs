//! `ssdlab completions SHELL` and `ssdlab man`: shell completions and man pages generated from the clap
//! definitions, so they never drift from the flags the binary accepts.

use std::io::Write;

use anyhow::{Context, Result};
use clap::CommandFactory;

use super::Outcome;
use crate::cli::{Cli, CompletionsArgs, ManArgs};

pub fn completions(args: &CompletionsArgs) -> Result<Outcome> {
    let mut command = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, "ssdlab", &mut script);
    write_stdout(&script)
}

pub fn man(args: &ManArgs) -> Result<Outcome> {
    let command = Cli::command();
    let Some(dir) = &args.out else {
        let mut page = Vec::new();
        clap_mangen::Man::new(command)
            .render(&mut page)
            .context("rendering ssdlab(1)")?;
        return write_stdout(&page);
    };
    let outputs = ssdlab_outputs::OutputDir::create(dir)
        .map_err(|e| anyhow::anyhow!("--out {}: {e}", dir.display()))?;
    // ssdlab.1, then ssdlab-run.1, ssdlab-test.1, ssdlab-test-consistency.1, ...
    let mut pages = Vec::new();
    let mut pending = vec![(String::from("ssdlab"), command)];
    while let Some((name, command)) = pending.pop() {
        for sub in command.get_subcommands() {
            let sub_name = format!("{name}-{}", sub.get_name());
            pending.push((sub_name.clone(), sub.clone().name(sub_name)));
        }
        let mut page = Vec::new();
        clap_mangen::Man::new(command.clone())
            .render(&mut page)
            .with_context(|| format!("rendering {name}(1)"))?;
        pages.push((format!("{name}.1"), page));
    }
    // One batch: every name is checked (created new, or ssdlab's own page) before any page is written.
    let batch: Vec<ssdlab_outputs::Output<'_>> = pages
        .iter()
        .map(|(name, page)| ssdlab_outputs::Output {
            name,
            kind: ssdlab_outputs::Kind::Manual,
            bytes: page,
        })
        .collect();
    outputs
        .write(&batch, &[])
        .map_err(|e| anyhow::anyhow!("--out {}: {e}", dir.display()))?;
    let written = pages.len();
    eprintln!(
        "man       {written} pages in {} (man -l {}/ssdlab.1)",
        dir.display(),
        dir.display()
    );
    Ok(Outcome::Passed)
}

/// Writes generated text to stdout; a reader that went away is not an error.
fn write_stdout(bytes: &[u8]) -> Result<Outcome> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(Outcome::Passed),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(Outcome::PipeClosed),
        Err(e) => Err(e).context("writing to stdout"),
    }
}
