//! `roost pool run`: a bag of tasks across the pool, Legion's parallel jobs (issue 13, item
//! 7) made of roost's parts. Hosts come from the catalog ([`hosts`]); each gets a thread
//! ([`worker`]) that stages inputs over Chirp and runs attempts through the job RPCs; one
//! [`schedule::Scheduler`] decides which task goes where, retries failed and lost ones on
//! other hosts, and makes sure each task's outputs are fetched once. Tasks come from a task
//! file or a command template ([`taskfile`]); [`report`] sums up what each host did; and
//! [`complib`] is the worked example, a Smith-Waterman library comparison. [`slurm`] hands
//! the same bag to Slurm as job arrays instead. With [`follow`], a run asks the catalog
//! again every few seconds and routes around the hosts it shows down, taking back those
//! that return and taking on those that join. A run stopped by a [`StopFlag`] (the command's
//! SIGINT, SIGTERM or SIGHUP) kills and reaps the jobs it submitted and removes its directory
//! from every server before it returns. With [`verify`], a sample of the tasks is run
//! again on other hosts and the outputs compared.

pub mod complib;
pub mod follow;
pub mod hosts;
pub mod progress;
pub mod report;
pub mod schedule;
pub mod slurm;
mod staging;
pub mod taskfile;
pub mod verify;
mod worker;

use hosts::Host;
use roost_client::Options;
use schedule::{Assignment, Scheduler, Status};
use staging::Staging;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};
use taskfile::Task;

/// How to run a bag of tasks.
#[derive(Clone, Debug)]
pub struct Config {
    pub hosts: Vec<Host>,
    pub options: Options,
    /// The directory on each server under which a run stages its files (the run's own
    /// directory in it is removed at the end).
    pub remote_dir: String,
    /// Where outputs with relative local paths are written.
    pub output_dir: PathBuf,
    /// Failed attempts allowed per task beyond the first.
    pub retries: u32,
    /// Attempts queued on each server beyond what it runs at once.
    pub queue: usize,
    /// Copy tasks running on slow hosts to idle fast ones at the end.
    pub speculate: bool,
    /// Draw a progress line on standard error.
    pub progress: bool,
    /// Follow the catalog during the run (`None`: the hosts are fixed at the start).
    pub follow: Option<follow::Follow>,
    /// Raised to stop the run: what it started is killed and its files removed.
    pub stop: StopFlag,
    /// Run this fraction of the tasks (a random sample) again on another host and compare
    /// the outputs (`--verify`).
    pub verify: Option<f64>,
}

/// A request to stop a run, raised from elsewhere (a signal handler's thread) with the
/// signal's number.
#[derive(Clone, Debug, Default)]
pub struct StopFlag(Arc<AtomicI32>);

impl StopFlag {
    /// Asks the run to stop, for `signal`.
    pub fn raise(&self, signal: i32) {
        let _ = self
            .0
            .compare_exchange(0, signal.max(1), Ordering::AcqRel, Ordering::Acquire);
    }

    /// The signal the run was asked to stop for, if it was.
    pub fn raised(&self) -> Option<i32> {
        match self.0.load(Ordering::Acquire) {
            0 => None,
            signal => Some(signal),
        }
    }
}

/// The scheduler shared by the hosts' threads, and a signal for changes.
pub(crate) struct Shared {
    scheduler: Mutex<Scheduler>,
    changed: Condvar,
    /// Lines about the hosts (left, paused, back, joined) for the run's main thread to print.
    news: Mutex<Vec<String>>,
    /// The jobs each host had under way when it left the run, to kill if it comes back.
    orphans: Mutex<HashMap<usize, Vec<i64>>>,
    /// Raised when the run is to stop.
    stop: StopFlag,
}

impl Shared {
    fn new(scheduler: Scheduler, stop: StopFlag) -> Shared {
        Shared {
            scheduler: Mutex::new(scheduler),
            changed: Condvar::new(),
            news: Mutex::new(Vec::new()),
            orphans: Mutex::new(HashMap::new()),
            stop,
        }
    }

    /// True once the run is to stop: hosts kill what they run and leave.
    fn stopping(&self) -> bool {
        self.stop.raised().is_some()
    }

    fn lock(&self) -> MutexGuard<'_, Scheduler> {
        self.scheduler.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn change<R>(&self, f: impl FnOnce(&mut Scheduler) -> R) -> R {
        let r = f(&mut self.lock());
        self.changed.notify_all();
        r
    }

    /// A line for the log (`roost pool: ...`), printed once by the main thread.
    fn tell(&self, line: String) {
        self.news
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line);
        self.changed.notify_all();
    }

    fn take_news(&self) -> Vec<String> {
        std::mem::take(&mut *self.news.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn orphans(&self) -> MutexGuard<'_, HashMap<usize, Vec<i64>>> {
        self.orphans.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn next(&self, host: usize) -> Option<Assignment> {
        self.lock().next(host, Instant::now())
    }

    fn wanted(&self, task: usize) -> bool {
        self.lock().wanted(task)
    }

    fn finished(&self) -> bool {
        self.lock().finished()
    }

    fn claim(&self, a: Assignment, host: usize) -> bool {
        self.lock().claim(a.task, host, a.attempt)
    }

    fn done(&self, a: Assignment, host: usize) {
        self.change(|s| s.done(a.task, host, a.attempt, Instant::now()));
    }

    fn failed(&self, a: Assignment, host: usize, why: &str) {
        self.change(|s| s.failed(a.task, host, a.attempt, why));
    }

    fn lost(&self, a: Assignment, host: usize) {
        self.change(|s| s.lost(a.task, host, a.attempt));
    }

    fn host_down(&self, host: usize, why: &str, lost: &[Assignment]) {
        self.change(|s| {
            s.host_down(host, why);
            for a in lost {
                s.lost(a.task, host, a.attempt);
            }
        });
    }

    /// A host that had left is back in the run.
    fn back(&self, host: usize) {
        self.change(|s| s.back(host));
    }

    /// Waits until something changes, or `most` passes.
    fn wait(&self, most: Duration) {
        let guard = self.lock();
        let _ = self.changed.wait_timeout(guard, most);
    }
}

/// What every host's thread of a run shares; it starts them.
pub(crate) struct Crew<'a> {
    shared: &'a Shared,
    tasks: &'a [Task],
    staging: &'a Staging,
    options: &'a Options,
    output_dir: &'a Path,
    queue: usize,
}

impl<'env> Crew<'env> {
    /// Starts the thread of host `index`; `rejoin`: the host had left the run and is
    /// being tried again.
    fn start<'scope>(
        &'scope self,
        scope: &'scope Scope<'scope, 'env>,
        index: usize,
        host: Host,
        rejoin: bool,
    ) -> ScopedJoinHandle<'scope, ()> {
        let name = format!("pool {}", host.name);
        let worker = worker::Worker {
            index,
            host,
            rejoin,
            shared: self.shared,
            tasks: self.tasks,
            staging: self.staging,
            options: self.options,
            output_dir: self.output_dir,
            queue: self.queue,
        };
        std::thread::Builder::new()
            .name(name)
            .spawn_scoped(scope, move || worker.run())
            .expect("a thread per host")
    }
}

/// Runs `tasks` over `config.hosts` (and, following the catalog, the hosts that join);
/// returns what became of each task and what each host did.
pub fn run(tasks: &[Task], config: &Config) -> report::Report {
    let started = Instant::now();
    let (all, plan) = match config.verify {
        Some(fraction) => {
            let seed = verify::random_seed();
            let (all, plan) = verify::plan(tasks, fraction, &config.output_dir, seed);
            (std::borrow::Cow::Owned(all), Some(plan))
        }
        None => (std::borrow::Cow::Borrowed(tasks), None),
    };
    let costs: Vec<f64> = all.iter().map(|t| t.cost).collect();
    let mut scheduler =
        Scheduler::new(&costs, config.hosts.len(), config.retries, config.speculate);
    scheduler.hold(config.follow.is_some());
    for &(task, check) in plan.iter().flat_map(|p| &p.pairs) {
        scheduler.check(check, task);
    }
    let shared = Shared::new(scheduler, config.stop.clone());
    let staging = Staging::new(&config.remote_dir, &all);
    let crew = Crew {
        shared: &shared,
        tasks: &all,
        staging: &staging,
        options: &config.options,
        output_dir: &config.output_dir,
        queue: config.queue,
    };
    let mut line = config
        .progress
        .then(|| progress::Line::new(all.len(), started));
    let hosts = std::thread::scope(|scope| {
        let workers: Vec<_> = config
            .hosts
            .iter()
            .enumerate()
            .map(|(index, host)| crew.start(scope, index, host.clone(), false))
            .collect();
        let crew = &crew;
        let watcher = config.follow.as_ref().map(|f| {
            let hosts = config.hosts.clone();
            scope.spawn(move || follow::watch(f, crew, scope, hosts, workers))
        });
        loop {
            print_news(&shared, line.as_mut());
            if shared.finished() || shared.stopping() {
                shared.changed.notify_all();
                break;
            }
            if let Some(line) = &mut line {
                line.draw(&shared.lock());
            }
            shared.wait(Duration::from_millis(250));
        }
        if let Some(line) = &mut line {
            line.clear();
        }
        match watcher {
            Some(w) => w.join().unwrap_or_else(|_| config.hosts.clone()),
            None => config.hosts.clone(),
        }
    });
    print_news(&shared, None);
    let scheduler = shared.lock();
    let mut report = report::Report::new(tasks, &hosts, &scheduler, started);
    report.stopped = config.stop.raised();
    if let Some(plan) = &plan {
        let checked = verify::compare(plan, &all, &scheduler, &report, &config.output_dir);
        report.verification = Some(checked);
    }
    report
}

/// Prints the lines about hosts that came in since the last time, above the progress line.
fn print_news(shared: &Shared, line: Option<&mut progress::Line>) {
    let news = shared.take_news();
    if news.is_empty() {
        return;
    }
    if let Some(line) = line {
        line.clear();
    }
    for n in news {
        eprintln!("{n}");
    }
}

/// The exit status a run earns: 0 when every task is done (and, with `--verify`, no two hosts
/// disagreed), 1 otherwise.
pub fn exit_status(report: &report::Report) -> u8 {
    let disagreed = report
        .verification
        .as_ref()
        .is_some_and(|v| !v.disagreements.is_empty());
    u8::from(disagreed || report.tasks.iter().any(|t| t.status != Status::Done))
}
