//! The demo's independent steps, run side by side on a bounded pool of threads, their output shown in step order.
//!
//! Each step is a whole command with its own seeds, so running it beside another changes none of its results;
//! only its start time differs. A step's lines are held while it runs and printed whole once it and every step
//! before it have ended, so the console reads as it would one step after another. The pool is bounded by memory
//! as much as by cores: the largest steps (the consistency runs, a full-size virtual drive each) hold about half a
//! gigabyte, so two at once stay within the demo's 2.5 GB. It never decides what a step does, and never prints a
//! step's line out of order.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, mpsc};

use anyhow::Result;

use super::Step;
use crate::ports::{Clock, Console, Outcome, Ports, Stop, Targets, Tools};

/// How many steps run at once, and the memory they may hold together.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pool {
    pub(super) steps_at_once: usize,
    pub(super) memory_bytes: u64,
}

impl Pool {
    /// The demo's: two steps (or one on a machine of one core), within 2.45 GB of expected peaks together, so
    /// the process stays under 2.5 GB (the estimates are above what each step was measured to hold).
    pub(super) const DEMO: Pool = Pool {
        steps_at_once: 2,
        memory_bytes: 2_450_000_000,
    };
}

/// Which steps have started, and the memory the running steps are expected to hold.
struct Admission {
    taken: Vec<bool>,
    running_bytes: u64,
    abandoned: bool,
}

/// What the pool's workers share: the steps in order, what each left, which starts next, and the ports' parts.
struct Work<'w, 'p> {
    queue: Vec<Mutex<Option<Step<'w>>>>,
    /// Each step's expected memory, read once rather than through its queue slot's lock.
    needs: Vec<u64>,
    done: Vec<Mutex<Option<StepEnd<'p>>>>,
    admission: Mutex<Admission>,
    freed: Condvar,
    budget_bytes: u64,
    json: bool,
    stop: &'p AtomicBool,
    targets: &'p dyn Targets,
    tools: &'p dyn Tools,
    clock: &'p dyn Clock,
}

impl<'p> Work<'_, 'p> {
    /// One worker: takes each step it is admitted to, runs it with a console that holds its lines, and leaves
    /// them and its outcome for the printing thread, which `tx` wakes.
    fn worker(&self, tx: &mpsc::Sender<()>) {
        while let Some(i) = self.admit() {
            let step = self.queue[i]
                .lock()
                .expect("a queue slot")
                .take()
                .expect("each step once");
            let mut held = Held::new(self.json, self.stop);
            held.say(&format!("\n== demo: {}", step.name));
            let mut step_ports = Ports {
                console: &mut held,
                targets: self.targets,
                tools: self.tools,
                started_unix_s: self.clock.unix_now_s() as u64,
                clock: self.clock,
                stop: Stop::Flag(self.stop),
            };
            // A step that panics is a step that failed: its memory is given back and its slot filled like any
            // other's, so neither the other worker nor the printing thread waits for it forever.
            let name = step.name.clone();
            let outcome =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (step.run)(&mut step_ports)))
                    .unwrap_or_else(|panic| {
                        let why = panic
                            .downcast_ref::<&str>()
                            .map(|s| (*s).to_string())
                            .or_else(|| panic.downcast_ref::<String>().cloned())
                            .unwrap_or_default();
                        Err(anyhow::anyhow!("demo step {name} panicked: {why}"))
                    });
            {
                let mut admitted = self.admission.lock().expect("the admission");
                admitted.running_bytes -= step.memory_bytes;
                if !matches!(outcome, Ok(Outcome::Passed | Outcome::Failed | Outcome::Unknown)) {
                    admitted.abandoned = true;
                }
                self.freed.notify_all();
            }
            *self.done[i].lock().expect("a done slot") = Some((held, outcome));
            let _ = tx.send(());
        }
    }

    /// Waits until a step's expected memory fits beside the running steps' (or none is running) and takes the
    /// first in order that fits, so a large step does not hold back the small ones behind it; None when every
    /// step has been taken or the demo was abandoned.
    fn admit(&self) -> Option<usize> {
        let mut admitted = self.admission.lock().expect("the admission");
        loop {
            if admitted.abandoned || admitted.taken.iter().all(|&t| t) {
                return None;
            }
            let running = admitted.running_bytes;
            let fits = (0..self.needs.len()).find(|&i| {
                !admitted.taken[i] && (running == 0 || running + self.needs[i] <= self.budget_bytes)
            });
            if let Some(i) = fits {
                admitted.taken[i] = true;
                admitted.running_bytes += self.needs[i];
                return Some(i);
            }
            admitted = self.freed.wait(admitted).expect("the admission");
        }
    }

    /// No step starts after this.
    fn abandon(&self) {
        self.admission.lock().expect("the admission").abandoned = true;
        self.freed.notify_all();
    }

    /// Shows each step whole, in order, as soon as it and the ones before it have ended; the outcome at which
    /// the demo stops, if any.
    fn show_in_order(
        &self,
        console: &mut dyn Console,
        rx: &mpsc::Receiver<()>,
    ) -> Option<Result<Option<Outcome>>> {
        for i in 0..self.done.len() {
            let (held, outcome) = loop {
                if let Some(ended) = self.done[i].lock().expect("a done slot").take() {
                    break ended;
                }
                if rx.recv().is_err() {
                    // Every worker has ended and this step never ran: a later step ended the demo (steps start
                    // out of order when an earlier one waits for memory). What ran is shown, and why it ended.
                    return Some(self.show_the_rest(console, i));
                }
            };
            if let Err(e) = held.replay(console) {
                self.abandon();
                return Some(Err(e.into()));
            }
            match outcome {
                Ok(stopped @ (Outcome::Interrupted | Outcome::PipeClosed)) => return Some(Ok(Some(stopped))),
                Ok(Outcome::Passed | Outcome::Failed | Outcome::Unknown) => {}
                Err(e) => return Some(Err(e)),
            }
        }
        None
    }

    /// Once the workers have ended with steps from `from` on not run: shows the steps that did run, in order, and
    /// returns the first that ended the demo (an error, an interrupt, the reader gone), or says which never ran.
    fn show_the_rest(&self, console: &mut dyn Console, from: usize) -> Result<Option<Outcome>> {
        let mut ending: Option<Result<Option<Outcome>>> = None;
        let mut never_ran = Vec::new();
        for i in from..self.done.len() {
            let Some((held, outcome)) = self.done[i].lock().expect("a done slot").take() else {
                never_ran.push(i);
                continue;
            };
            held.replay(console)?;
            match outcome {
                Ok(Outcome::Passed | Outcome::Failed | Outcome::Unknown) => {}
                Ok(stopped) => {
                    ending.get_or_insert(Ok(Some(stopped)));
                }
                Err(e) => {
                    ending.get_or_insert(Err(e));
                }
            }
        }
        ending.unwrap_or_else(|| {
            Err(anyhow::anyhow!(
                "{} demo step(s) never ran though no step ended the demo",
                never_ran.len()
            ))
        })
    }
}

/// Runs `steps` on the pool, each under its heading; the outcome at which the demo stops (interrupted, or its
/// output's reader gone), or None to go on. A step's error ends the demo with that error once the steps running
/// beside it have ended; no step starts after it.
pub(super) fn run(ports: &mut Ports, steps: Vec<Step>, pool: Pool) -> Result<Option<Outcome>> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(pool.steps_at_once)
        .min(steps.len())
        .max(1);
    let count = steps.len();
    let work = Work {
        needs: steps.iter().map(|s| s.memory_bytes).collect(),
        queue: steps.into_iter().map(|s| Mutex::new(Some(s))).collect(),
        done: (0..count).map(|_| Mutex::new(None)).collect(),
        admission: Mutex::new(Admission {
            taken: vec![false; count],
            running_bytes: 0,
            abandoned: false,
        }),
        freed: Condvar::new(),
        budget_bytes: pool.memory_bytes,
        json: ports.console.json_wanted(),
        stop: ports.stop.flag(),
        targets: ports.targets,
        tools: ports.tools,
        clock: ports.clock,
    };
    let (tx, rx) = mpsc::channel::<()>();
    let console = &mut *ports.console;
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let (work, tx) = (&work, tx.clone());
            scope.spawn(move || work.worker(&tx));
        }
        drop(tx);
        let ending = work.show_in_order(console, &rx);
        if ending.is_some() {
            work.abandon();
        }
        ending
    })
    .unwrap_or(Ok(None))
}

/// A step that has ended: what it said, and how it ended.
type StepEnd<'a> = (Held<'a>, Result<Outcome>);

/// One line a step said, kept until it is its turn to be shown.
enum Line {
    Say(String),
    Alarm(String),
    Json(Vec<u8>),
    Print(String),
}

/// A console that holds a step's lines while it runs beside another.
struct Held<'a> {
    lines: Vec<Line>,
    json: bool,
    stop: &'a AtomicBool,
}

impl<'a> Held<'a> {
    fn new(json: bool, stop: &'a AtomicBool) -> Self {
        Held {
            lines: Vec::new(),
            json,
            stop,
        }
    }

    /// Shows every held line on `console`, in the order said.
    fn replay(self, console: &mut dyn Console) -> std::io::Result<()> {
        for line in self.lines {
            match line {
                Line::Say(text) => console.say(&text),
                Line::Alarm(text) => console.alarm(&text),
                Line::Json(bytes) => console.json_line(&bytes)?,
                Line::Print(text) => console.print(&text)?,
            }
        }
        Ok(())
    }
}

impl Console for Held<'_> {
    fn say(&mut self, line: &str) {
        self.lines.push(Line::Say(line.into()));
    }
    fn alarm(&mut self, line: &str) {
        self.lines.push(Line::Alarm(line.into()));
    }
    fn json_wanted(&self) -> bool {
        self.json
    }
    fn json_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        self.lines.push(Line::Json(line.to_vec()));
        Ok(())
    }
    fn print(&mut self, line: &str) -> std::io::Result<()> {
        self.lines.push(Line::Print(line.into()));
        Ok(())
    }
    fn interrupted(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
    fn progress_start(&mut self, _name: &str) -> bool {
        // Two steps cannot share one progress line; each says its phases as lines instead.
        false
    }
    fn progress_set(&mut self, _fraction: Option<f64>, _message: Option<&str>) {}
    fn progress_finish(&mut self) {}
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::time::Duration;

    use super::*;
    use crate::testing::{CannedTools, FixedClock, RecordingConsole};

    /// A step that says its name, holds `memory_bytes` on the shared gauge for `ms`, and ends with `outcome`.
    fn step<'a>(
        name: &str,
        memory_bytes: u64,
        ms: u64,
        gauge: &'a (AtomicU64, AtomicU64),
        outcome: Outcome,
    ) -> Step<'a> {
        let said = format!("{name} ran");
        Step::new(name, memory_bytes, move |ports: &mut Ports| {
            let now = gauge.0.fetch_add(memory_bytes, Ordering::SeqCst) + memory_bytes;
            gauge.1.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(ms));
            gauge.0.fetch_sub(memory_bytes, Ordering::SeqCst);
            ports.console.say(&said);
            Ok(outcome)
        })
    }

    fn pool(memory_bytes: u64) -> Pool {
        Pool {
            steps_at_once: 2,
            memory_bytes,
        }
    }

    #[test]
    fn steps_run_side_by_side_within_the_memory_and_print_in_order() {
        let gauge = (AtomicU64::new(0), AtomicU64::new(0));
        let (tools, clock, stop) = (
            CannedTools::default(),
            FixedClock::at(0.0),
            AtomicBool::new(false),
        );
        let mut console = RecordingConsole::default();
        let mut ports = Ports::new(&mut console, &tools, &clock, &stop);
        // The first step is slow and large; the small ones behind it fit beside it and end first, the second
        // large one waits for the first. Printed in order all the same.
        let steps = vec![
            step("big-a", 600, 150, &gauge, Outcome::Passed),
            step("big-b", 600, 10, &gauge, Outcome::Failed),
            step("small-c", 100, 10, &gauge, Outcome::Passed),
            step("small-d", 100, 10, &gauge, Outcome::Unknown),
        ];
        assert!(run(&mut ports, steps, pool(1000)).unwrap().is_none());
        let said: Vec<&str> = console
            .said
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .collect();
        let want = [
            "== demo: big-a",
            "big-a ran",
            "== demo: big-b",
            "big-b ran",
            "== demo: small-c",
            "small-c ran",
            "== demo: small-d",
            "small-d ran",
        ];
        assert_eq!(said, want);
        let peak = gauge.1.load(Ordering::SeqCst);
        assert!(peak <= 1000, "steps held {peak} together, above the pool's 1000");
        if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
            assert!(peak >= 700, "a small step ran beside the large one ({peak})");
        }
    }

    #[test]
    fn an_interrupted_step_stops_the_demo_and_nothing_after_it_starts() {
        let gauge = (AtomicU64::new(0), AtomicU64::new(0));
        let (tools, clock, stop) = (
            CannedTools::default(),
            FixedClock::at(0.0),
            AtomicBool::new(false),
        );
        let mut console = RecordingConsole::default();
        let mut ports = Ports::new(&mut console, &tools, &clock, &stop);
        // Each step needs the whole pool, so they run one at a time: the second is interrupted, the third never
        // starts.
        let steps = vec![
            step("first", 1000, 1, &gauge, Outcome::Passed),
            step("second", 1000, 1, &gauge, Outcome::Interrupted),
            step("third", 1000, 1, &gauge, Outcome::Passed),
        ];
        assert_eq!(
            run(&mut ports, steps, pool(1000)).unwrap(),
            Some(Outcome::Interrupted)
        );
        let text = console.said.join("\n");
        assert!(text.contains("second ran"), "{text}");
        assert!(!text.contains("third"), "{text}");
    }

    /// A step that started out of order (a large one before it waited for memory) and ended the demo: what ran is
    /// shown, and the demo ends with that step's interrupt; a step that panics fails the demo, never hangs it.
    #[test]
    fn a_later_step_that_ends_the_demo_is_reported_and_a_panic_never_hangs() {
        let gauge = (AtomicU64::new(0), AtomicU64::new(0));
        let (tools, clock, stop) = (
            CannedTools::default(),
            FixedClock::at(0.0),
            AtomicBool::new(false),
        );
        let mut console = RecordingConsole::default();
        let mut ports = Ports::new(&mut console, &tools, &clock, &stop);
        // "big" runs long; "large" cannot start beside it; "small" starts out of order and is interrupted, so
        // "large" never runs.
        let steps = vec![
            step("big", 600, 100, &gauge, Outcome::Passed),
            step("large", 600, 1, &gauge, Outcome::Passed),
            step("small", 100, 1, &gauge, Outcome::Interrupted),
        ];
        if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
            assert_eq!(
                run(&mut ports, steps, pool(1000)).unwrap(),
                Some(Outcome::Interrupted)
            );
            let text = console.said.join("\n");
            assert!(text.contains("big ran") && text.contains("small ran"), "{text}");
            assert!(!text.contains("large ran"), "{text}");
        }
        let mut console = RecordingConsole::default();
        let mut ports = Ports::new(&mut console, &tools, &clock, &stop);
        let steps = vec![
            Step::new("boom", 100, |_: &mut Ports| -> Result<Outcome> {
                panic!("a bug")
            }),
            step("after", 100, 1, &gauge, Outcome::Passed),
        ];
        let err = run(&mut ports, steps, pool(1000)).unwrap_err();
        assert!(err.to_string().contains("boom panicked: a bug"), "{err}");
    }
}
