//! fio's habits on ssdlab's command line, taken as fio means them and said: fio's durations written as a bare
//! number are seconds (`--runtime=10`, `--ramp_time=5`); `--time_based` and `--group_reporting` change nothing here (ssdlab's runs are
//! time-based and report one group); `--offset N` is `--span N:`; `--randrepeat` is about the seed; fio's
//! `--ioengine=libaio` runs on io_uring. Each translation leaves a note for the user, printed before the command
//! runs. This module rewrites the arguments before clap parses them and never runs anything.
//!
//! What a command does not have is left alone for clap to refuse, so `--offset` given to a command without
//! `--span` is refused as an unknown flag, never silently dropped.

use std::ffi::OsString;

use clap::Command;

/// The arguments after translation, and what was translated, in words.
pub struct Translated {
    pub args: Vec<OsString>,
    pub notes: Vec<String>,
}

/// The durations fio takes as a bare number of seconds, under ssdlab's names for them.
const FIO_DURATIONS: [&str; 3] = ["--runtime", "--ramp-time", "--ramp_time"];

/// fio's flags that change nothing in ssdlab, with why.
const NO_OPS: [(&str, &str); 2] = [
    (
        "--time_based",
        "a run with --runtime runs for that time whatever its span (fio's time_based); --bytes or --passes end \
         it by an amount instead",
    ),
    ("--group_reporting", "ssdlab reports one group already"),
];

/// Translates fio's habits in `args` (the program name first) for the subcommand they name in `cli`; `now_ns`
/// seeds `--randrepeat 0`. An error names the flag and the fix.
pub fn translate(args: Vec<OsString>, cli: &Command, now_ns: u64) -> Result<Translated, String> {
    let mut iter = args.into_iter().peekable();
    let mut t = Translator {
        out: iter.next().into_iter().collect(),
        notes: vec![],
        command: cli,
        now_ns,
        seed_given: false,
        span_given: false,
        pending_seed: None,
        pending_span: None,
    };
    while let Some(arg) = iter.next() {
        match arg.to_str() {
            Some("--") => {
                t.out.push(arg);
                t.out.extend(iter.by_ref());
            }
            Some(text) if text.starts_with("--") => {
                let text = text.to_string();
                t.flag(arg, &text, &mut iter)?;
            }
            Some(text) => {
                // A subcommand's name descends into it; any other word is a value or a positional argument.
                if let Some(sub) = t.command.find_subcommand(text) {
                    t.command = sub;
                }
                t.out.push(arg);
            }
            None => t.out.push(arg),
        }
    }
    t.finish()
}

type Args = std::iter::Peekable<std::vec::IntoIter<OsString>>;

/// The translation so far, and what it must add at the end.
struct Translator<'c> {
    out: Vec<OsString>,
    notes: Vec<String>,
    /// The subcommand the arguments so far name.
    command: &'c Command,
    now_ns: u64,
    seed_given: bool,
    span_given: bool,
    pending_seed: Option<String>,
    /// `--offset`'s value and its note, added as `--span OFFSET:` at the end.
    pending_span: Option<(String, String)>,
}

impl Translator<'_> {
    /// One `--flag` (and its value, when it takes one).
    fn flag(&mut self, arg: OsString, text: &str, iter: &mut Args) -> Result<(), String> {
        let (name, inline) = match text.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (text.to_string(), None),
        };
        let known = find_long(self.command, &name[2..]);
        if known.is_none() && self.habit(&name, inline.clone(), iter)? {
            return Ok(());
        }
        self.seed_given |= name == "--seed";
        self.span_given |= name == "--span";
        match known {
            Some(known) if known.get_action().takes_values() => self.valued(arg, &name, inline, known, iter),
            _ => self.out.push(arg),
        }
        Ok(())
    }

    /// fio's flags ssdlab does not have under their names; true when `name` was one and is handled.
    fn habit(&mut self, name: &str, inline: Option<String>, iter: &mut Args) -> Result<bool, String> {
        if let Some((_, why)) = NO_OPS.iter().find(|(flag, _)| *flag == name) {
            self.notes.push(format!("{name} ignored: {why}"));
            return Ok(true);
        }
        if name == "--offset" && find_long(self.command, "span").is_some() {
            let value = take_value(inline, iter).ok_or("--offset needs a value, e.g. --offset 1g")?;
            let note = format!("--offset {value} is --span {value}: (from {value} to the end)");
            self.pending_span = Some((value, note));
            return Ok(true);
        }
        if name == "--randrepeat" && find_long(self.command, "seed").is_some() {
            match inline.as_deref().unwrap_or("1") {
                "1" | "true" => self.notes.push(
                    "--randrepeat: ssdlab always repeats the pattern a seed gives (--seed, 1 by default)"
                        .into(),
                ),
                "0" | "false" => {
                    let seed = self.now_ns % 1_000_000_007;
                    self.pending_seed = Some(seed.to_string());
                    self.notes.push(format!(
                        "--randrepeat 0: a new pattern this run, --seed {seed} (give --seed {seed} to repeat it)"
                    ));
                }
                other => return Err(format!("--randrepeat {other}: write 0 or 1, as fio does")),
            }
            return Ok(true);
        }
        Ok(false)
    }

    /// A flag of ssdlab's that takes a value: a duration written as a bare number becomes seconds; fio's libaio is
    /// said to run on io_uring; anything else goes on as it was written.
    fn valued(
        &mut self,
        arg: OsString,
        name: &str,
        inline: Option<String>,
        known: &clap::Arg,
        iter: &mut Args,
    ) {
        let had_inline = inline.is_some();
        let value = inline.or_else(|| {
            iter.next_if(|next| !next.to_str().is_some_and(|n| n.starts_with("--")))
                .and_then(|v| v.into_string().ok())
        });
        let Some(value) = value else {
            self.out.push(arg);
            return;
        };
        // fio's own durations only: a bare number elsewhere (refresh's --older-than 90, an age) means something
        // else to its writer, and is refused with the unit to write.
        let is_fio_duration = FIO_DURATIONS.contains(&name)
            && known
                .get_value_names()
                .is_some_and(|names| names.iter().any(|n| n == "DURATION"));
        if is_fio_duration
            && value
                .trim()
                .parse::<f64>()
                .is_ok_and(|n| n.is_finite() && n >= 0.0)
        {
            let seconds = value.trim();
            self.notes.push(format!(
                "{name} {value}: a bare number is seconds, as fio reads it ({seconds}s)"
            ));
            self.out.push(OsString::from(format!("{name}={seconds}s")));
            return;
        }
        if (name == "--ioengine" || name == "--engine") && value == "libaio" {
            self.notes.push(
                "--ioengine libaio: ssdlab has no libaio engine; io_uring does the same asynchronous O_DIRECT I/O"
                    .into(),
            );
        }
        self.out.push(arg);
        if !had_inline {
            self.out.push(OsString::from(value));
        }
    }

    fn finish(mut self) -> Result<Translated, String> {
        if let Some((offset, note)) = self.pending_span {
            if self.span_given {
                return Err(format!(
                    "--offset {offset} and --span both name the region: give one (--span {offset}:LEN)"
                ));
            }
            self.notes.push(note);
            self.out.push(OsString::from(format!("--span={offset}:")));
        }
        if let (Some(seed), false) = (self.pending_seed, self.seed_given) {
            self.out.push(OsString::from(format!("--seed={seed}")));
        }
        Ok(Translated {
            args: self.out,
            notes: self.notes,
        })
    }
}

/// The argument of `command` whose long name or alias is `long`.
fn find_long<'c>(command: &'c Command, long: &str) -> Option<&'c clap::Arg> {
    command.get_arguments().find(|a| {
        a.get_long() == Some(long) || a.get_all_aliases().is_some_and(|aliases| aliases.contains(&long))
    })
}

/// A flag's value: after its `=`, or the next argument.
fn take_value(inline: Option<String>, iter: &mut Args) -> Option<String> {
    inline.or_else(|| iter.next().and_then(|v| v.into_string().ok()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn run(args: &[&str]) -> Result<(Vec<String>, Vec<String>), String> {
        let args = std::iter::once("ssdlab")
            .chain(args.iter().copied())
            .map(OsString::from)
            .collect();
        let t = translate(args, &crate::cli::Cli::command(), 42)?;
        Ok((
            t.args.into_iter().map(|a| a.into_string().unwrap()).collect(),
            t.notes,
        ))
    }

    #[test]
    fn fios_spellings_are_taken_as_fio_means_them_and_said() {
        let (args, notes) = run(&[
            "run",
            "--target",
            "null:1g",
            "--runtime=10",
            "--time_based",
            "--group_reporting",
            "--offset",
            "4k",
            "--randrepeat=0",
            "--ioengine",
            "libaio",
        ])
        .unwrap();
        assert_eq!(
            args,
            [
                "ssdlab",
                "run",
                "--target",
                "null:1g",
                "--runtime=10s",
                "--ioengine",
                "libaio",
                "--span=4k:",
                "--seed=42"
            ]
        );
        assert_eq!(notes.len(), 6, "{notes:?}");
        assert!(
            notes[0].contains("--runtime 10: a bare number is seconds"),
            "{notes:?}"
        );
        // A value that is a duration with its unit, or not a duration, is left as it is.
        let (args, notes) = run(&["run", "--target", "null", "--runtime", "2m", "--qd", "8"]).unwrap();
        assert_eq!(
            args,
            [
                "ssdlab",
                "run",
                "--target",
                "null",
                "--runtime",
                "2m",
                "--qd",
                "8"
            ]
        );
        assert!(notes.is_empty());
        // --offset beside --span is refused; a command without --span keeps --offset for clap to refuse.
        assert!(
            run(&["run", "--target", "null", "--offset", "1g", "--span", "50%"])
                .unwrap_err()
                .contains("--offset 1g and --span")
        );
        let (args, _) = run(&["quick", "--target", "null", "--offset", "1g"]).unwrap();
        assert!(args.contains(&"--offset".to_string()), "{args:?}");
        // A seed given wins over --randrepeat 0.
        let (args, _) = run(&["run", "--target", "null", "--seed", "7", "--randrepeat", "0"]).unwrap();
        assert!(
            args.contains(&"7".to_string()) && !args.iter().any(|a| a == "--seed=42"),
            "{args:?}"
        );
        // A bare number for a duration fio does not have is left for its own parser to refuse.
        let (args, notes) = run(&["refresh", "/srv", "--older-than", "90"]).unwrap();
        assert!(args.contains(&"90".to_string()) && notes.is_empty(), "{args:?}");
        // Everything after -- is left alone.
        let (args, _) = run(&["run", "--", "--runtime", "10"]).unwrap();
        assert_eq!(args, ["ssdlab", "run", "--", "--runtime", "10"]);
    }
}
