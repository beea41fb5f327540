//! ssdlab: a storage lab in one binary.
//!
//! The table of contents: parse the command line (`cli`, `values`), turn each command's flags into its plan and
//! run it through `ssdlab_app` with the terminal as its console (`commands`, `output`). Exit codes: 0 ran and
//! passed, 1 ran and a criterion failed, 2 bad input or refusal, 130 interrupted; a closed stdout pipe exits 0.

#![forbid(unsafe_code)]

/// Writes a line to stderr, as std's `eprintln!` does, but a closed stderr (its reader went away: `2>&1 | head`)
/// never panics: the line is dropped and the command goes on to write its results and exit as it would have.
/// Defined before the modules so it stands in for std's in every one of them.
macro_rules! eprintln {
    () => {
        $crate::output::stderr_line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::output::stderr_line(format_args!($($arg)*))
    };
}

mod cli;
mod commands;
mod fio_habits;
mod output;
mod values;

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use crate::cli::{Cli, Command};
use crate::commands::Outcome;

fn main() -> ExitCode {
    let (cli, notes) = match parse_command_line() {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    // With --quiet, stderr goes to /dev/null; errors, alarms and panics still reach the original.
    if cli.quiet {
        match ssdlab_io::sys::silence_stderr() {
            Ok(original) => output::keep_original_stderr(original),
            Err(e) => {
                eprintln!("ssdlab: error: --quiet: cannot silence stderr: {e}");
                return ExitCode::from(2);
            }
        }
    }
    for note in &notes {
        eprintln!("note      {note}");
    }
    let result = match &cli.command {
        Command::Run(args) => commands::run::run(args),
        Command::Quick(args) => commands::test::quick(args),
        Command::Test(command) => commands::test::run(command),
        Command::Scan(args) => commands::scan::run(args),
        Command::Refresh(args) => commands::refresh::run(args),
        Command::Demo(args) => commands::demo::run(args),
        Command::Report(args) => commands::report::run(args),
        Command::Sim(command) => commands::sim::run(command),
        Command::Serve(args) => commands::serve::run(args),
        Command::Health(args) => commands::health::run(args),
        Command::Erase(args) => commands::erase::run(args),
        Command::Op(args) => commands::op::run(args),
        Command::Fanout(args) => commands::fanout::run(args),
        Command::Trace(command) => commands::trace::run(command),
        Command::Devices(args) => commands::devices::run(args),
        Command::Completions(args) => commands::docs::completions(args),
        Command::Man(args) => commands::docs::man(args),
    };
    // What closing a device had to say when no caller was left (a cache's hot map not saved).
    for note in ssdlab_targets::close_notes() {
        output::alarm(&format!("ssdlab: {note}"));
    }
    match result {
        Ok(Outcome::Passed) | Ok(Outcome::PipeClosed) => ExitCode::SUCCESS,
        Ok(Outcome::Failed) => ExitCode::from(1),
        Ok(Outcome::Unknown) => ExitCode::from(3),
        Ok(Outcome::Interrupted) => ExitCode::from(130),
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            output::alarm(&format!("ssdlab: error: {error:#}"));
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The command line, parsed after fio's habits are translated, and the notes the translation left; or the exit
/// code of a refusal already said.
fn parse_command_line() -> Result<(Cli, Vec<String>), ExitCode> {
    // fio's habits (a bare number of seconds, --time_based, --offset, ...) taken as fio means them, and said.
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let translated = match fio_habits::translate(std::env::args_os().collect(), &Cli::command(), now_ns) {
        Ok(translated) => translated,
        Err(e) => {
            eprintln!("ssdlab: error: {e}");
            return Err(ExitCode::from(2));
        }
    };
    match Cli::try_parse_from(translated.args) {
        Ok(cli) => Ok((cli, translated.notes)),
        Err(e) => {
            // An argument clap does not know may be fio's spelling of one ssdlab has: say which.
            // Only the argument clap did not know is looked up: a flag of ssdlab's own that fio also has
            // (`quick --size`, `serve --name`) never takes the blame for a typo elsewhere.
            if e.kind() == clap::error::ErrorKind::UnknownArgument
                && let Some(clap::error::ContextValue::String(unknown)) =
                    e.get(clap::error::ContextKind::InvalidArg)
            {
                let args = vec![String::new(), unknown.clone()];
                if let Some(hint) = cli::fio_hint(&args) {
                    eprintln!("ssdlab: error: {hint}");
                    return Err(ExitCode::from(2));
                }
            }
            // A flag's value its parser refused (a duration without its unit, a size that is not one): one line
            // naming the flag, the value and why, as every other refusal of ssdlab's is.
            if e.kind() == clap::error::ErrorKind::ValueValidation
                && let (
                    Some(clap::error::ContextValue::String(arg)),
                    Some(clap::error::ContextValue::String(value)),
                ) = (
                    e.get(clap::error::ContextKind::InvalidArg),
                    e.get(clap::error::ContextKind::InvalidValue),
                )
                && let Some(why) = std::error::Error::source(&e)
            {
                let flag = arg.split(' ').next().unwrap_or(arg);
                eprintln!("ssdlab: error: {flag} {value}: {why}");
                return Err(ExitCode::from(2));
            }
            e.exit()
        }
    }
}
