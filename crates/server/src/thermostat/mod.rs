//! The thermostat (Legion's "pain management", issue 13 item 3): the owner's limits on
//! guest jobs, CPU percent of the machine and memory for all of them together, on a weekly
//! schedule ([`schedule`]) that `roost thermostat set` overrides while the server runs
//! ([`control`]), enforced by cgroup v2 where its controllers are the server's to use
//! ([`cgroup2`]), by cgroup v1 groups where they are writable ([`cgroup1`]; what the two
//! share is in [`cgroupfs`]), or else by a stop/continue loop with a memory watchdog
//! ([`feedback`]) over the jobs' processes ([`procs`]).
//!
//! [`Thermostat`] is the jobs' [`ResourceLimits`]: a job is admitted by its process group
//! when it starts; one thread, every [`TICK`], rereads the limits (each second) and runs
//! the loop.
//!
//! A memory limit the kernel refuses (cgroup v1 will not set one below what the guests hold
//! when it cannot reclaim; a v2 group without the memory controller cannot hold one) is not
//! reported as in force by the kernel: the memory watchdog ([`feedback::memory_watchdog`])
//! holds it, killing the jobs holding the most until the guests are under it, the kernel is
//! asked again every second, and `thermostat.now` (`roost thermostat show`, the catalog's
//! `thermostat_mem_by`) says which of the two holds it.

pub mod cgroup1;
pub mod cgroup2;
pub mod cgroupfs;
pub mod control;
pub mod feedback;
pub mod procs;
pub mod schedule;

use crate::jobs::confine::ResourceLimits;
use crate::log::{self, Level};
use schedule::{Limits, Schedule};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the loop looks at the guests' processes.
pub const TICK: Duration = Duration::from_millis(100);
/// How often the limits are reread (schedule and override).
pub const REREAD: Duration = Duration::from_secs(1);

/// How the limits are enforced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    /// cgroup v2: `cpu.max` and `memory.max` on a group of the unified hierarchy.
    Cgroup2,
    /// cgroup v1 `cpu` and `memory` groups.
    Cgroup1,
    /// SIGSTOP/SIGCONT over the jobs' processes, a watchdog over their memory.
    Loop,
}

impl Mechanism {
    /// Every mechanism, in the order `auto` tries them.
    pub const ALL: [Mechanism; 3] = [Mechanism::Cgroup2, Mechanism::Cgroup1, Mechanism::Loop];

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Cgroup2 => "cgroup2",
            Mechanism::Cgroup1 => "cgroup1",
            Mechanism::Loop => "loop",
        }
    }

    /// Parses `--thermostat-mechanism`: `auto` (the best available), `cgroup2`, `cgroup1`
    /// or `loop`.
    pub fn parse(text: &str) -> Result<Option<Mechanism>, String> {
        if text == "auto" {
            return Ok(None);
        }
        Mechanism::ALL
            .into_iter()
            .find(|m| m.name() == text)
            .map(Some)
            .ok_or_else(|| {
                format!("--thermostat-mechanism {text}: expected auto, cgroup2, cgroup1 or loop")
            })
    }
}

/// Removes the cgroups, v2 and v1, that the server of the jobs in `job_dir` left and that
/// hold no process any more. Returns how many are left (0: none).
pub fn remove_leftovers(job_dir: &Path) -> usize {
    cgroup2::Cgroup2::remove_leftovers(job_dir) + cgroup1::Cgroup1::remove_leftovers(job_dir)
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
    /// Why the kernel refused the memory limit, while it does: the watchdog holds it.
    refused: Option<String>,
    /// Jobs the watchdog killed, with their status text.
    verdicts: BTreeMap<i64, String>,
    /// Jobs given files to enter their groups by before they run: started, they are in them.
    entering: BTreeSet<i64>,
    limits: Limits,
    enforcer: Enforcer,
}

/// The mechanism at work.
enum Enforcer {
    Cgroup2(cgroup2::Cgroup2),
    Cgroup1(cgroup1::Cgroup1),
    Loop(feedback::Feedback),
}

impl Enforcer {
    fn mechanism(&self) -> Mechanism {
        match self {
            Enforcer::Cgroup2(_) => Mechanism::Cgroup2,
            Enforcer::Cgroup1(_) => Mechanism::Cgroup1,
            Enforcer::Loop(_) => Mechanism::Loop,
        }
    }

    fn create(mechanism: Mechanism, job_dir: &Path) -> io::Result<Enforcer> {
        match mechanism {
            Mechanism::Cgroup2 => cgroup2::Cgroup2::create(job_dir).map(Enforcer::Cgroup2),
            Mechanism::Cgroup1 => cgroup1::Cgroup1::create(job_dir).map(Enforcer::Cgroup1),
            Mechanism::Loop => Ok(Enforcer::Loop(feedback::Feedback::new())),
        }
    }

    /// The mechanism asked for, or the best available: the first of [`Mechanism::ALL`]
    /// whose groups can be made and written (the loop always can).
    fn choose(asked: Option<Mechanism>, job_dir: &Path) -> Result<Enforcer, String> {
        if let Some(m) = asked {
            return Enforcer::create(m, job_dir).map_err(|e| {
                let others: Vec<&str> = Mechanism::ALL
                    .iter()
                    .filter(|o| **o != m)
                    .map(|o| o.name())
                    .collect();
                format!(
                    "--thermostat-mechanism {}: {e}; use --thermostat-mechanism {}",
                    m.name(),
                    others.join(" or ")
                )
            });
        }
        let mut tried = Mechanism::ALL.into_iter().peekable();
        while let Some(m) = tried.next() {
            match Enforcer::create(m, job_dir) {
                Ok(enforcer) => return Ok(enforcer),
                Err(e) => log::event(
                    Level::Info,
                    "thermostat-no-cgroup",
                    &[
                        ("mechanism", &m.name()),
                        ("why", &e),
                        ("next", &tried.peek().map_or("none", |n| n.name())),
                    ],
                ),
            }
        }
        Err("no thermostat mechanism works here".into())
    }

    /// The jobs' groups, under a cgroup mechanism.
    fn jobs(&self) -> Option<&cgroupfs::JobGroups> {
        match self {
            Enforcer::Cgroup2(groups) => Some(groups.jobs()),
            Enforcer::Cgroup1(groups) => Some(groups.jobs()),
            Enforcer::Loop(_) => None,
        }
    }

    /// Sets `limits` in the kernel. A CPU limit that cannot be set is logged; a memory limit
    /// the kernel refuses is returned, why (the watchdog then holds it).
    fn apply(&self, limits: Limits) -> Option<String> {
        let cpu = match self {
            Enforcer::Cgroup2(groups) => groups.apply_cpu(limits),
            Enforcer::Cgroup1(groups) => groups.apply_cpu(limits),
            Enforcer::Loop(_) => Ok(()),
        };
        if let Err(e) = cpu {
            log::event(
                Level::Error,
                "thermostat-apply",
                &[("limits", &limits), ("error", &e)],
            );
        }
        self.apply_memory(limits).err()
    }

    /// Sets the memory limit of `limits` in the kernel, or says why it refused.
    fn apply_memory(&self, limits: Limits) -> Result<(), String> {
        let done = match self {
            Enforcer::Cgroup2(groups) => groups.apply_memory(limits),
            Enforcer::Cgroup1(groups) => groups.apply_memory(limits),
            Enforcer::Loop(_) => Ok(()),
        };
        done.map_err(|e| e.to_string())
    }

    /// Who holds the memory limit, for the report: `None` without one.
    fn memory_holder(&self, limits: Limits, refused: Option<&str>) -> Option<String> {
        limits.mem_bytes?;
        Some(match (self, refused) {
            (Enforcer::Loop(_), _) => "watchdog".to_string(),
            (_, None) => "kernel".to_string(),
            (_, Some(why)) => {
                format!("watchdog (the kernel refused it: {why}; asked again every second)")
            }
        })
    }

    /// One turn: the loop's, or a look for jobs the kernel found over the memory limit
    /// (whose other processes are then killed too). Returns the jobs killed, with why.
    fn step(&mut self, groups: &BTreeMap<i64, i32>, limits: Limits) -> Vec<(i64, String)> {
        if let Enforcer::Loop(feedback) = self {
            return feedback.step(groups, limits);
        }
        match self.jobs() {
            None => Vec::new(),
            Some(jobs) => {
                let mut killed = Vec::new();
                for (job, pgid) in groups {
                    if jobs.oom_kills(*job) == 0 {
                        continue;
                    }
                    // SAFETY: a plain system call, no memory shared with it.
                    unsafe { libc::kill(-pgid, libc::SIGKILL) };
                    for pid in jobs.pids(*job) {
                        // SAFETY: a plain system call, no memory shared with it.
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                    }
                    killed.push((*job, oom_verdict(limits)));
                }
                killed
            }
        }
    }
}

/// The thermostat of one server's jobs.
pub struct Thermostat {
    state: Arc<Mutex<State>>,
}

impl Thermostat {
    /// Starts the thermostat for the jobs in `job_dir` (where `roost thermostat set` leaves
    /// its override).
    pub fn start(config: Config, job_dir: PathBuf) -> Result<Thermostat, String> {
        let enforcer = Enforcer::choose(config.mechanism, &job_dir)?;
        let mechanism = enforcer.mechanism();
        let control = control::Control::new(&job_dir);
        let (limits, source) = control.current(&config.schedule);
        let refused = enforcer.apply(limits);
        if let Some(why) = &refused {
            log_refused(limits, why);
        }
        let holder = enforcer.memory_holder(limits, refused.as_deref());
        let state = Arc::new(Mutex::new(State {
            groups: BTreeMap::new(),
            refused,
            verdicts: BTreeMap::new(),
            entering: BTreeSet::new(),
            limits,
            enforcer,
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
        control.report(mechanism.name(), limits, &source, holder.as_deref());
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
            let mut changed = false;
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
                let refused = s.enforcer.apply(limits);
                if let Some(why) = &refused {
                    log_refused(limits, why);
                }
                s.refused = refused;
                source = now_source;
                changed = true;
            } else if s.refused.is_some() && s.enforcer.apply_memory(limits).is_ok() {
                log::event(
                    Level::Info,
                    "thermostat-memory-applied",
                    &[("limits", &limits), ("by", &"kernel")],
                );
                s.refused = None;
                changed = true;
            }
            if changed {
                let holder = s.enforcer.memory_holder(limits, s.refused.as_deref());
                control.report(mechanism.name(), limits, &source, holder.as_deref());
            }
        }
        let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
        let State {
            groups,
            verdicts,
            limits,
            enforcer,
            refused,
            ..
        } = &mut *s;
        let mut killed = enforcer.step(groups, *limits);
        if refused.is_some() {
            killed.extend(feedback::memory_watchdog(groups, *limits));
        }
        for (job, why) in killed {
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

fn log_refused(limits: Limits, why: &str) {
    log::event(
        Level::Error,
        "thermostat-memory-refused",
        &[
            ("limits", &limits),
            ("error", &why),
            ("held_by", &"watchdog"),
        ],
    );
}

/// The status of a job the kernel killed over the memory limit.
fn oom_verdict(limits: Limits) -> String {
    let limit = limits.mem_bytes.map_or("none".into(), schedule::size_text);
    format!("killed: over memory limit {limit}")
}

impl ResourceLimits for Thermostat {
    fn entry_files(&self, job: i64) -> io::Result<Vec<std::fs::File>> {
        let mut s = self.lock();
        let files = match s.enforcer.jobs() {
            Some(jobs) => jobs.entry_files(job)?,
            None => Vec::new(),
        };
        if !files.is_empty() {
            s.entering.insert(job);
        }
        Ok(files)
    }

    fn admit(&self, job: i64, pgid: i32) -> io::Result<()> {
        let mut s = self.lock();
        // A job that entered its groups before it ran needs no look through /proc for its
        // processes: whatever it started since is in them too.
        let entered = s.entering.remove(&job);
        if let (Some(jobs), false) = (s.enforcer.jobs(), entered) {
            jobs.admit(job, pgid)?;
        }
        s.groups.insert(job, pgid);
        Ok(())
    }

    fn release(&self, job: i64) {
        // Nothing is signalled here: the runner has killed the group and reaped its leader,
        // so the group's number may already be a stranger's.
        let mut s = self.lock();
        s.groups.remove(&job);
        s.verdicts.remove(&job);
        s.entering.remove(&job);
        if let Some(jobs) = s.enforcer.jobs() {
            if let Err(e) = jobs.release(job) {
                log::event(
                    Level::Error,
                    "thermostat-release",
                    &[("id", &job), ("error", &e)],
                );
            }
        }
    }

    fn current(&self) -> Limits {
        self.lock().limits
    }

    fn verdict(&self, job: i64) -> Option<String> {
        let mut s = self.lock();
        if let Some(why) = s.verdicts.get(&job) {
            return Some(why.clone());
        }
        // The kernel may have killed the job's last process since the thermostat last looked.
        match s.enforcer.jobs() {
            Some(jobs) if jobs.oom_kills(job) > 0 => {
                let why = oom_verdict(s.limits);
                log::event(
                    Level::Info,
                    "thermostat-kill",
                    &[("id", &job), ("why", &why)],
                );
                s.verdicts.insert(job, why.clone());
                Some(why)
            }
            _ => None,
        }
    }
}
