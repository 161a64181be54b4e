//! `roost pool run --slurm` (issue 13, item 9): the same bag of tasks handed to an existing
//! engine, Slurm, as job arrays, instead of run through the servers' job RPCs.
//!
//! The run's inputs are staged once on one pool server, as for the built-in runs
//! ([`crate::staging`]); each array task runs its command under `roost run` on whichever
//! node Slurm picks, in a sandbox whose files are mounted from that server, so the task
//! reads its inputs from and writes its outputs to the server through the agent
//! ([`script`]). roost follows the arrays with `scontrol show job` ([`commands`]), reads
//! each task's own status record (exit code, start, end, node) from the server when Slurm
//! says it ended, fetches the outputs of those that succeeded, and submits the failed ones
//! again as a new array, up to the retries. The same [`Scheduler`] keeps the books, with
//! Slurm's nodes as its hosts, so the progress line and the report are those of a built-in
//! run.

pub mod commands;
pub mod script;

use crate::hosts::Host;
use crate::report::Report;
use crate::schedule::{Assignment, Scheduler, Status};
use crate::staging::{phrase, Move, Staging};
use crate::taskfile::Task;
use crate::{progress, Config};
use roost_client::{Client, ErrorCode};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How to hand a run to Slurm.
#[derive(Clone, Debug)]
pub struct Slurm {
    /// The partition to submit to (Slurm's default one if none).
    pub partition: Option<String>,
    /// More `sbatch` options, after roost's own (so they win).
    pub sbatch_args: Vec<String>,
    /// Options for `roost run` on the nodes (authentication, `--chirp-mode`, ...).
    pub run_args: Vec<String>,
    /// The roost program as the nodes find it.
    pub roost: PathBuf,
    /// At most this many array tasks of a submission run at once (`--array=...%N`).
    pub max_running: Option<usize>,
    /// How often the controller is asked.
    pub poll: Duration,
}

/// The most tasks in one array: Slurm's default MaxArraySize is 1001 (indices 0 to 1000).
const MAX_ARRAY: usize = 1000;

/// A task submitted to Slurm.
struct Flight {
    job: String,
    index: usize,
    attempt: u32,
    /// Once Slurm has started it: its attempt in the books and its node.
    started: Option<(Assignment, usize)>,
}

/// A run in Slurm's hands.
struct Driver<'a> {
    tasks: &'a [Task],
    config: &'a Config,
    slurm: &'a Slurm,
    server: &'a Host,
    staging: Staging,
    client: Client,
    scheduler: Scheduler,
    /// Slurm's nodes, as the report's hosts.
    nodes: Vec<Host>,
    inflight: BTreeMap<usize, Flight>,
    jobs: Vec<String>,
    started: Instant,
    started_unix: f64,
}

/// Runs `tasks` through Slurm, their files on `config.hosts[0]`; `stop(d)` waits `d` between
/// looks at the controller and says whether to give up (a signal). An error before any
/// task was submitted (no Slurm, no server) is returned as such.
pub fn run(
    tasks: &[Task],
    config: &Config,
    slurm: &Slurm,
    stop: &mut dyn FnMut(Duration) -> bool,
) -> Result<Report, String> {
    let started = Instant::now();
    let started_unix = unix_seconds();
    let server = config
        .hosts
        .first()
        .ok_or("no server to hold the run's files")?;
    commands::check()?;
    let nodes: Vec<Host> = commands::nodes(slurm.partition.as_deref())?
        .into_iter()
        .map(|n| Host::given(&n.name, n.cpus))
        .collect();
    let mut client = Client::connect(&server.authority, &config.options)
        .map_err(|e| format!("{}: connect: {e}", server.name))?;
    let staging = Staging::new(&config.remote_dir, tasks);
    staging
        .make_dirs(&mut client)
        .map_err(|e| format!("{}: {e}", server.name))?;
    let costs: Vec<f64> = tasks.iter().map(|t| t.cost).collect();
    let mut d = Driver {
        tasks,
        config,
        slurm,
        server,
        staging,
        client,
        scheduler: Scheduler::new(&costs, nodes.len(), config.retries, false),
        nodes,
        inflight: BTreeMap::new(),
        jobs: Vec::new(),
        started,
        started_unix,
    };
    if let Err(e) = d.stage() {
        d.tidy();
        return Err(e);
    }
    let mut line = config
        .progress
        .then(|| progress::Line::new(tasks.len(), started));
    let mut abort = None;
    let mut lease = Instant::now();
    loop {
        d.staging.keep_alive(&mut d.client, &mut lease);
        if let Err(e) = d.submit_waiting().and_then(|()| d.look()) {
            abort = Some(e);
            break;
        }
        if let Some(line) = &mut line {
            line.draw(&d.scheduler);
        }
        if d.scheduler.finished() {
            break;
        }
        if stop(slurm.poll) {
            abort = Some("interrupted: its Slurm jobs were cancelled".to_string());
            break;
        }
    }
    if let Some(line) = &mut line {
        line.clear();
    }
    d.tidy();
    let mut report = Report::new(tasks, &d.nodes, &d.scheduler, started);
    report.slurm_jobs = d.jobs.clone();
    if let Some(why) = abort {
        for t in &mut report.tasks {
            if !matches!(t.status, Status::Done | Status::Failed(_)) {
                t.status = Status::Failed(why.clone());
            }
        }
    }
    Ok(report)
}

fn unix_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Driver<'_> {
    /// Puts each distinct input on the server once.
    fn stage(&mut self) -> Result<(), String> {
        let mut staged = HashSet::new();
        for (t, task) in self.tasks.iter().enumerate() {
            for (spec, &id) in task.inputs.iter().zip(&self.staging.input_ids[t]) {
                if !staged.insert(id) {
                    continue;
                }
                self.staging
                    .put_input(&mut self.client, spec, id)
                    .map_err(|e| match e {
                        Move::Local(why) => why,
                        Move::Remote(e) => phrase(
                            &mut self.client,
                            &format!("{}: staging {}", self.server.name, spec.local.display()),
                            &e,
                        ),
                    })?;
            }
        }
        Ok(())
    }

    /// Submits every task waiting for an attempt, as arrays of at most [`MAX_ARRAY`].
    fn submit_waiting(&mut self) -> Result<(), String> {
        let waiting: Vec<usize> = (0..self.tasks.len())
            .filter(|t| {
                self.scheduler.status(*t) == &Status::Pending && !self.inflight.contains_key(t)
            })
            .collect();
        for chunk in waiting.chunks(MAX_ARRAY) {
            let planned: Vec<(usize, u32)> = chunk
                .iter()
                .map(|&t| (t, self.scheduler.attempts(t) + 1))
                .collect();
            let job = self.submit(&planned)?;
            for (index, &(t, attempt)) in planned.iter().enumerate() {
                let flight = Flight {
                    job: job.clone(),
                    index,
                    attempt,
                    started: None,
                };
                self.inflight.insert(t, flight);
            }
            self.jobs.push(job);
        }
        Ok(())
    }

    /// Submits one array, index i running `planned[i]` (a task and its attempt); its job id.
    fn submit(&self, planned: &[(usize, u32)]) -> Result<String, String> {
        let entries: Vec<script::Entry> = planned
            .iter()
            .map(|&(t, attempt)| self.entry(t, attempt))
            .collect();
        let roost = self.slurm.roost.to_string_lossy();
        let common = script::Common {
            roost: &roost,
            server: &self.server.authority,
            run_dir: &self.staging.run_dir,
            run_args: &self.slurm.run_args,
        };
        commands::submit(
            entries.len(),
            self.slurm.max_running,
            &self.sbatch_args(),
            &script::batch(&common, &entries),
        )
    }

    /// roost's sbatch options, then the user's.
    fn sbatch_args(&self) -> Vec<String> {
        let mut args = vec![
            "--job-name=roost-pool".to_string(),
            // A rerun is roost's to decide, as a new attempt.
            "--no-requeue".into(),
            "--output=/dev/null".into(),
        ];
        if let Some(p) = &self.slurm.partition {
            args.push(format!("--partition={p}"));
        }
        args.extend(self.slurm.sbatch_args.iter().cloned());
        args
    }

    /// Attempt `attempt` of task `t`, its files where the server has them.
    fn entry(&self, t: usize, attempt: u32) -> script::Entry<'_> {
        let task = &self.tasks[t];
        let a = Assignment {
            task: t,
            attempt,
            speculative: false,
        };
        let mut files: Vec<(&str, String)> = task
            .inputs
            .iter()
            .zip(&self.staging.input_ids[t])
            .map(|(spec, &id)| (spec.task_path.as_str(), self.staging.input(id)))
            .collect();
        for (k, out) in task.outputs.iter().enumerate() {
            files.push((
                out.task_path.as_str(),
                self.staging.output(a, &k.to_string()),
            ));
        }
        script::Entry {
            task: t,
            attempt,
            files,
            command: &task.command,
        }
    }

    /// Asks the controller how the submitted tasks are doing, and deals with those that
    /// started or ended.
    fn look(&mut self) -> Result<(), String> {
        let jobs: BTreeSet<String> = self.inflight.values().map(|f| f.job.clone()).collect();
        let mut known = HashMap::new();
        for job in jobs {
            for t in commands::array_tasks(&job)? {
                known.insert((job.clone(), t.index), t);
            }
        }
        let now = Instant::now();
        let tasks: Vec<usize> = self.inflight.keys().copied().collect();
        for t in tasks {
            let f = &self.inflight[&t];
            match known.get(&(f.job.clone(), f.index)) {
                Some(r) if !r.ended() => {
                    if r.state != "PENDING" && f.started.is_none() {
                        let node = self.node(r.node.as_deref());
                        let a = self.scheduler.start(t, node, now);
                        if let Some(f) = self.inflight.get_mut(&t) {
                            f.started = a.map(|a| (a, node));
                        }
                    }
                }
                r => {
                    let r = r.cloned();
                    let f = self.inflight.remove(&t).expect("in flight");
                    self.ended(t, f, r)?;
                }
            }
        }
        Ok(())
    }

    /// The report's host for a Slurm node (a node not in the partition's list is added).
    fn node(&mut self, name: Option<&str>) -> usize {
        let name = name.unwrap_or("(unknown node)");
        if let Some(i) = self.nodes.iter().position(|n| n.name == name) {
            return i;
        }
        let mut host = Host::given(name, 1);
        host.headroom = 0.0;
        self.nodes.push(host);
        self.scheduler.add_host()
    }

    /// When `unix` was, on this process's clock.
    fn instant(&self, unix: f64) -> Instant {
        self.started + Duration::from_secs_f64((unix - self.started_unix).max(0.0))
    }

    /// A submitted task ended, as `record` (Slurm's, if it still has one) says: fetch its
    /// outputs or say why it failed, by its own status record on the server.
    fn ended(
        &mut self,
        t: usize,
        f: Flight,
        record: Option<commands::ArrayTask>,
    ) -> Result<(), String> {
        if self.client.is_broken() {
            self.client
                .reconnect()
                .map_err(|e| format!("{}: the run's server is gone: {e}", self.server.name))?;
        }
        let planned = Assignment {
            task: t,
            attempt: f.attempt,
            speculative: false,
        };
        let status = self.status(planned);
        let node_name = status
            .as_ref()
            .map(|s| s.node.clone())
            .or_else(|| record.as_ref().and_then(|r| r.node.clone()));
        let (a, node) = match f.started {
            Some(started) => started,
            None => {
                let node = self.node(node_name.as_deref());
                let at = status
                    .as_ref()
                    .map_or_else(Instant::now, |s| self.instant(s.start));
                let a = self
                    .scheduler
                    .start(t, node, at)
                    .expect("a submitted task is pending until it starts");
                (a, node)
            }
        };
        match (status, record) {
            (Some(s), _) if s.exit == 0 => match self.missing_output(a) {
                Some(why) => self.scheduler.failed(t, node, a.attempt, &why),
                None if self.scheduler.claim(t, node, a.attempt) => {
                    let task = &self.tasks[t];
                    match self.staging.fetch_outputs(
                        &mut self.client,
                        task,
                        a,
                        &self.config.output_dir,
                    ) {
                        Ok(()) => self.scheduler.done(t, node, a.attempt, self.instant(s.end)),
                        Err(Move::Local(why)) => self.scheduler.failed(t, node, a.attempt, &why),
                        Err(Move::Remote(_)) => self.scheduler.lost(t, node, a.attempt),
                    }
                }
                None => self.scheduler.lost(t, node, a.attempt),
            },
            (Some(s), _) => {
                let why = self.with_stderr(a, format!("exit {}", s.exit));
                self.scheduler.failed(t, node, a.attempt, &why);
            }
            (None, Some(r)) if r.lost() => self.scheduler.lost(t, node, a.attempt),
            (None, Some(r)) => {
                let why = self.with_stderr(
                    a,
                    format!(
                        "Slurm array task {}_{} ended {} without recording how its command \
                         ended (keep what roost run said on the node with \
                         --slurm-arg=--output=FILE)",
                        f.job,
                        f.index,
                        r.describe()
                    ),
                );
                self.scheduler.failed(t, node, a.attempt, &why);
            }
            // Forgotten by the controller before roost saw it end, and no record: lost.
            (None, None) => self.scheduler.lost(t, node, a.attempt),
        }
        self.forget(a);
        Ok(())
    }

    /// The status record an attempt left on the server, if it left one.
    fn status(&mut self, a: Assignment) -> Option<script::Status> {
        let mut bytes = Vec::new();
        self.client
            .getfile(self.staging.status(a), &mut bytes)
            .ok()?;
        script::parse_status(&String::from_utf8_lossy(&bytes))
    }

    /// The first output an attempt that exited 0 did not make, as a failure.
    fn missing_output(&mut self, a: Assignment) -> Option<String> {
        let task = &self.tasks[a.task];
        task.outputs.iter().enumerate().find_map(|(k, out)| {
            match self.client.stat(self.staging.output(a, &k.to_string())) {
                Err(e) if e.is(ErrorCode::DoesntExist) => {
                    Some(format!("it did not make its output {}", out.task_path))
                }
                _ => None,
            }
        })
    }

    fn with_stderr(&mut self, a: Assignment, why: String) -> String {
        match self.staging.stderr_tail(&mut self.client, a) {
            Some(tail) => format!("{why}; its standard error ends: {tail}"),
            None => why,
        }
    }

    /// Removes an attempt's files from the server.
    fn forget(&mut self, a: Assignment) {
        let outputs = (0..self.tasks[a.task].outputs.len()).map(|k| k.to_string());
        for which in outputs.chain(["stderr".to_string()]) {
            let _ = self.client.unlink(self.staging.output(a, &which));
        }
        let _ = self.client.unlink(self.staging.status(a));
    }

    /// Cancels what still runs and removes the run's directory from the server.
    fn tidy(&mut self) {
        let active: BTreeSet<String> = self.inflight.values().map(|f| f.job.clone()).collect();
        self.inflight.clear();
        commands::cancel(&active.into_iter().collect::<Vec<_>>());
        if !self.client.is_broken() || self.client.reconnect().is_ok() {
            let _ = self.client.rmall(&self.staging.run_dir);
        }
    }
}

impl Drop for Driver<'_> {
    /// A run ended by a panic leaves nothing running in Slurm.
    fn drop(&mut self) {
        if !self.inflight.is_empty() {
            self.tidy();
        }
    }
}
