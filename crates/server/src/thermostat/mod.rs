//! The thermostat (Legion's "pain management", issue 13 item 3): the owner's limits on
//! guest jobs, CPU percent of the machine and memory for all of them together, on a weekly
//! schedule ([`schedule`]) that `roost thermostat set` overrides while the server runs
//! ([`control`]), enforced by a stop/continue loop with a memory watchdog ([`feedback`])
//! over the jobs' processes ([`procs`]).
//!
//! [`Thermostat`] is the jobs' [`ResourceLimits`]: a job is admitted by its process group
//! when it starts; one thread, every [`TICK`], rereads the limits (each second) and runs
//! the loop.

pub mod control;
pub mod feedback;
pub mod procs;
pub mod schedule;

use crate::jobs::confine::ResourceLimits;
use crate::log::{self, Level};
use schedule::{Limits, Schedule};
use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the loop looks at the guests' processes.
pub const TICK: Duration = Duration::from_millis(100);
/// How often the limits are reread (schedule and override).
pub const REREAD: Duration = Duration::from_secs(1);

/// How the limits are enforced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    /// SIGSTOP/SIGCONT over the jobs' processes, a watchdog over their memory.
    Loop,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Loop => "loop",
        }
    }

    /// Parses `--thermostat-mechanism`: `auto` (the best available) or `loop`.
    pub fn parse(text: &str) -> Result<Option<Mechanism>, String> {
        match text {
            "auto" => Ok(None),
            "loop" => Ok(Some(Mechanism::Loop)),
            _ => Err(format!(
                "--thermostat-mechanism {text}: expected auto or loop"
            )),
        }
    }
}

/// The thermostat's configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub schedule: Schedule,
    /// `None`: the best available.
    pub mechanism: Option<Mechanism>,
}

struct State {
    /// Admitted jobs: id to process group.
    groups: BTreeMap<i64, i32>,
    /// Jobs the watchdog killed, with their status text.
    verdicts: BTreeMap<i64, String>,
    limits: Limits,
    feedback: feedback::Feedback,
}

/// The thermostat of one server's jobs.
pub struct Thermostat {
    state: Arc<Mutex<State>>,
}

impl Thermostat {
    /// Starts the thermostat for the jobs in `job_dir` (where `roost thermostat set` leaves
    /// its override).
    pub fn start(config: Config, job_dir: PathBuf) -> Result<Thermostat, String> {
        let mechanism = config.mechanism.unwrap_or(Mechanism::Loop);
        let control = control::Control::new(&job_dir);
        let (limits, source) = control.current(&config.schedule);
        let state = Arc::new(Mutex::new(State {
            groups: BTreeMap::new(),
            verdicts: BTreeMap::new(),
            limits,
            feedback: feedback::Feedback::new(),
        }));
        log::event(
            Level::Info,
            "thermostat",
            &[
                ("mechanism", &mechanism.name()),
                ("limits", &limits),
                ("source", &source),
            ],
        );
        control.report(mechanism.name(), limits, &source);
        let shared = state.clone();
        std::thread::Builder::new()
            .name("thermostat".into())
            .spawn(move || run(&shared, &config.schedule, &control, mechanism, source))
            .map_err(|e| format!("cannot start the thermostat: {e}"))?;
        Ok(Thermostat { state })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn run(
    state: &Mutex<State>,
    schedule: &Schedule,
    control: &control::Control,
    mechanism: Mechanism,
    mut source: String,
) {
    let mut reread = Instant::now();
    loop {
        std::thread::sleep(TICK);
        if reread.elapsed() >= REREAD {
            reread = Instant::now();
            let (limits, now_source) = control.current(schedule);
            let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
            if limits != s.limits || now_source != source {
                log::event(
                    Level::Info,
                    "thermostat-change",
                    &[
                        ("from", &s.limits),
                        ("to", &limits),
                        ("source", &now_source),
                    ],
                );
                s.limits = limits;
                source = now_source;
                control.report(mechanism.name(), limits, &source);
            }
        }
        let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
        let State {
            groups,
            verdicts,
            limits,
            feedback,
        } = &mut *s;
        for (job, why) in feedback.step(groups, *limits) {
            if let std::collections::btree_map::Entry::Vacant(entry) = verdicts.entry(job) {
                log::event(
                    Level::Info,
                    "thermostat-kill",
                    &[("id", &job), ("why", &why)],
                );
                entry.insert(why);
            }
        }
    }
}

impl ResourceLimits for Thermostat {
    fn admit(&self, job: i64, pgid: i32) -> io::Result<()> {
        self.lock().groups.insert(job, pgid);
        Ok(())
    }

    fn release(&self, job: i64) {
        // Nothing is signalled here: the runner has killed the group and reaped its leader,
        // so the group's number may already be a stranger's.
        let mut s = self.lock();
        s.groups.remove(&job);
        s.verdicts.remove(&job);
    }

    fn verdict(&self, job: i64) -> Option<String> {
        self.lock().verdicts.get(&job).cloned()
    }
}
