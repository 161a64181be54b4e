//! `roost pool run`: a bag of tasks across the pool, Legion's parallel jobs (issue 13, item
//! 7) made of roost's parts. Hosts come from the catalog ([`hosts`]); each gets a thread
//! ([`worker`]) that stages inputs over Chirp and runs attempts through the job RPCs; one
//! [`schedule::Scheduler`] decides which task goes where, retries failed and lost ones on
//! other hosts, and makes sure each task's outputs are fetched once. Tasks come from a task
//! file or a command template ([`taskfile`]); [`report`] sums up what each host did; and
//! [`complib`] is the worked example, a Smith-Waterman library comparison. [`slurm`] hands
//! the same bag to Slurm as job arrays instead.

pub mod complib;
pub mod hosts;
pub mod progress;
pub mod report;
pub mod schedule;
pub mod slurm;
mod staging;
pub mod taskfile;
mod worker;

use hosts::Host;
use roost_client::Options;
use schedule::{Assignment, Scheduler, Status};
use staging::Staging;
use std::path::PathBuf;
use std::sync::{Condvar, Mutex, MutexGuard};
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
}

/// The scheduler shared by the hosts' threads, and a signal for changes.
pub(crate) struct Shared {
    scheduler: Mutex<Scheduler>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Scheduler> {
        self.scheduler.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn change(&self, f: impl FnOnce(&mut Scheduler)) {
        f(&mut self.lock());
        self.changed.notify_all();
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

    /// Waits until something changes, or `most` passes.
    fn wait(&self, most: Duration) {
        let guard = self.lock();
        let _ = self.changed.wait_timeout(guard, most);
    }
}

/// Runs `tasks` over `config.hosts`; returns what became of each task and what each host
/// did.
pub fn run(tasks: &[Task], config: &Config) -> report::Report {
    let started = Instant::now();
    let costs: Vec<f64> = tasks.iter().map(|t| t.cost).collect();
    let shared = Shared {
        scheduler: Mutex::new(Scheduler::new(
            &costs,
            config.hosts.len(),
            config.retries,
            config.speculate,
        )),
        changed: Condvar::new(),
    };
    let staging = Staging::new(&config.remote_dir, tasks);
    std::thread::scope(|scope| {
        for (index, host) in config.hosts.iter().enumerate() {
            let worker = worker::Worker {
                index,
                host,
                shared: &shared,
                tasks,
                staging: &staging,
                options: &config.options,
                output_dir: &config.output_dir,
                queue: config.queue,
            };
            std::thread::Builder::new()
                .name(format!("pool {}", host.name))
                .spawn_scoped(scope, move || worker.run())
                .expect("a thread per host");
        }
        if config.progress {
            let mut line = progress::Line::new(tasks.len(), started);
            while !shared.finished() {
                line.draw(&shared.lock());
                shared.wait(Duration::from_millis(250));
            }
            line.clear();
        }
    });
    let scheduler = shared.lock();
    report::Report::new(tasks, config, &scheduler, started)
}

/// The exit status a run earns: 0 when every task is done, 1 otherwise.
pub fn exit_status(report: &report::Report) -> u8 {
    u8::from(report.tasks.iter().any(|t| t.status != Status::Done))
}
