//! What a run did: each task's fate and each host's share of the work, as a table for people
//! and as JSON for programs (`roost pool run --json`).

use crate::hosts::Host;
use crate::schedule::{HostStats, Scheduler, Status};
use crate::taskfile::Task;
use roost_catalog::json::Value;
use std::fmt::Write as _;
use std::time::Instant;

/// One task's fate.
#[derive(Clone, Debug)]
pub struct TaskReport {
    pub name: String,
    pub status: Status,
    /// The host whose outputs were kept.
    pub host: Option<String>,
    pub attempts: u32,
}

/// One host's share.
#[derive(Clone, Debug)]
pub struct HostReport {
    pub name: String,
    pub headroom: f64,
    pub slots: usize,
    pub stats: HostStats,
    /// Seconds from the run's start to this host's first attempt and to its last task done.
    pub first_start: Option<f64>,
    pub last_done: Option<f64>,
    /// What happened to it during the run (left, paused, resumed, back, joined): seconds
    /// from the run's start, and what.
    pub changes: Vec<(f64, String)>,
}

impl HostReport {
    /// Its changes for the table: `paused (down in the catalog) at 2.1 s, resumed at 4.0 s`.
    pub fn note(&self) -> String {
        let changes: Vec<String> = self
            .changes
            .iter()
            .map(|(at, what)| format!("{what} at {at:.1} s"))
            .collect();
        changes.join(", ")
    }
}

/// A finished run.
#[derive(Clone, Debug)]
pub struct Report {
    pub tasks: Vec<TaskReport>,
    pub hosts: Vec<HostReport>,
    pub seconds: f64,
    /// What the cost of a task counts (`tasks`, or complib's `cells`).
    pub unit: String,
    /// The Slurm jobs that ran the tasks (`--slurm`), in the order they were submitted.
    pub slurm_jobs: Vec<String>,
    /// The signal that stopped the run before its end, if one did.
    pub stopped: Option<i32>,
    /// What running a sample of the tasks twice found (`--verify`).
    pub verification: Option<crate::verify::Verification>,
}

impl Report {
    pub(crate) fn new(tasks: &[Task], hosts: &[Host], s: &Scheduler, started: Instant) -> Report {
        let since = |t: Instant| t.saturating_duration_since(started).as_secs_f64();
        let hosts: Vec<HostReport> = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| HostReport {
                name: h.name.clone(),
                headroom: h.headroom,
                slots: h.slots,
                stats: s.host(i).clone(),
                first_start: s.host(i).first_start.map(since),
                last_done: s.host(i).last_done.map(since),
                changes: s
                    .host(i)
                    .changes
                    .iter()
                    .map(|(at, what)| (since(*at), what.clone()))
                    .collect(),
            })
            .collect();
        Report {
            tasks: tasks
                .iter()
                .enumerate()
                .map(|(i, t)| TaskReport {
                    name: t.name.clone(),
                    status: s.status(i).clone(),
                    host: s.done_by(i).map(|h| hosts[h].name.clone()),
                    attempts: s.attempts(i),
                })
                .collect(),
            hosts,
            seconds: started.elapsed().as_secs_f64(),
            unit: "tasks".into(),
            slurm_jobs: Vec::new(),
            stopped: None,
            verification: None,
        }
    }

    /// Tasks done.
    pub fn done(&self) -> usize {
        self.tasks
            .iter()
            .filter(|t| t.status == Status::Done)
            .count()
    }

    /// The cost done, over all hosts.
    pub fn done_cost(&self) -> f64 {
        self.hosts.iter().map(|h| h.stats.done_cost).sum()
    }

    /// The failed tasks, one line each, and the hosts that disagreed on a task (`--verify`).
    pub fn failures(&self) -> String {
        let mut out = String::new();
        for t in &self.tasks {
            if let Status::Failed(why) = &t.status {
                let _ = writeln!(out, "{}: failed: {why}", t.name);
            }
        }
        for d in self.verification.iter().flat_map(|v| &v.disagreements) {
            let _ = writeln!(
                out,
                "{}: {} and {} disagree on {}: one of them is wrong",
                d.task, d.hosts.0, d.hosts.1, d.output
            );
        }
        out
    }

    /// The per-host table, with throughput over the run's time.
    pub fn table(&self) -> String {
        let secs = self.seconds.max(1e-9);
        let mut rows = vec![[
            "HOST".to_string(),
            "HEADROOM".into(),
            "DONE".into(),
            "ATTEMPTS".into(),
            "FAILED".into(),
            "LOST".into(),
            "TASKS/S".into(),
            format!("{}/S", self.unit.to_uppercase()),
            "NOTE".into(),
        ]];
        // With a cost of 1 a task, tasks per second says it all.
        let costs = self.unit != "tasks";
        for h in &self.hosts {
            let s = &h.stats;
            rows.push([
                h.name.clone(),
                format!("{:.2}", h.headroom),
                s.done.to_string(),
                s.attempts.to_string(),
                s.failures.to_string(),
                (s.lost + s.killed).to_string(),
                format!("{:.2}", s.done as f64 / secs),
                human(s.done_cost / secs),
                h.note(),
            ]);
        }
        let widths: Vec<usize> = (0..9)
            .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        let mut out = String::new();
        for row in &rows {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                if c == 7 && !costs {
                    continue;
                }
                let _ = write!(line, "{cell:<w$}  ", w = widths[c]);
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        let _ = write!(
            out,
            "{}/{} tasks done in {:.2} s: {:.2} tasks/s",
            self.done(),
            self.tasks.len(),
            self.seconds,
            self.done() as f64 / secs,
        );
        if costs {
            let _ = write!(out, ", {} {}/s", human(self.done_cost() / secs), self.unit);
        }
        out.push('\n');
        if !self.slurm_jobs.is_empty() {
            let _ = writeln!(out, "Slurm jobs: {}", self.slurm_jobs.join(", "));
        }
        if let Some(v) = &self.verification {
            out.push_str(&v.text());
        }
        out
    }

    /// Everything as one JSON object.
    pub fn to_json(&self) -> Value {
        let f = Value::Float;
        let s = |t: &str| Value::String(t.to_string());
        let int = |n: usize| Value::Int(n as i64);
        let hosts = self
            .hosts
            .iter()
            .map(|h| {
                let st = &h.stats;
                Value::Object(vec![
                    ("host".into(), s(&h.name)),
                    ("headroom".into(), f(h.headroom)),
                    ("slots".into(), int(h.slots)),
                    ("done".into(), int(st.done)),
                    ("done_cost".into(), f(st.done_cost)),
                    ("attempts".into(), int(st.attempts)),
                    ("failed".into(), int(st.failures)),
                    ("lost".into(), int(st.lost)),
                    ("killed".into(), int(st.killed)),
                    (
                        "tasks_per_second".into(),
                        f(st.done as f64 / self.seconds.max(1e-9)),
                    ),
                    (
                        "cost_per_second".into(),
                        f(st.done_cost / self.seconds.max(1e-9)),
                    ),
                    ("down".into(), st.down.as_deref().map_or(Value::Null, s)),
                    ("first_start".into(), h.first_start.map_or(Value::Null, f)),
                    ("last_done".into(), h.last_done.map_or(Value::Null, f)),
                    (
                        "changes".into(),
                        Value::Array(
                            h.changes
                                .iter()
                                .map(|(at, what)| {
                                    Value::Object(vec![
                                        ("at".into(), f(*at)),
                                        ("change".into(), s(what)),
                                    ])
                                })
                                .collect(),
                        ),
                    ),
                ])
            })
            .collect();
        let tasks = self
            .tasks
            .iter()
            .map(|t| {
                let (status, error) = match &t.status {
                    Status::Done => ("done", Value::Null),
                    Status::Failed(why) => ("failed", s(why)),
                    Status::Pending => ("pending", Value::Null),
                    Status::Running => ("running", Value::Null),
                };
                Value::Object(vec![
                    ("task".into(), s(&t.name)),
                    ("status".into(), s(status)),
                    ("host".into(), t.host.as_deref().map_or(Value::Null, s)),
                    ("attempts".into(), Value::Int(i64::from(t.attempts))),
                    ("error".into(), error),
                ])
            })
            .collect();
        let mut members = vec![
            ("seconds".into(), f(self.seconds)),
            ("tasks_total".into(), int(self.tasks.len())),
            ("tasks_done".into(), int(self.done())),
            ("unit".into(), s(&self.unit)),
            ("cost_done".into(), f(self.done_cost())),
            ("hosts".into(), Value::Array(hosts)),
            ("tasks".into(), Value::Array(tasks)),
        ];
        if !self.slurm_jobs.is_empty() {
            let jobs = self.slurm_jobs.iter().map(|j| s(j)).collect();
            members.push(("slurm_jobs".into(), Value::Array(jobs)));
        }
        if let Some(v) = &self.verification {
            members.push(("verify".into(), v.to_json()));
        }
        Value::Object(members)
    }
}

/// A rate with an SI prefix: 950, 12.3k, 4.56G.
pub fn human(v: f64) -> String {
    let (scaled, unit) = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]
        .into_iter()
        .find(|(f, _)| v >= *f)
        .map_or((v, ""), |(f, u)| (v / f, u));
    if unit.is_empty() {
        format!("{scaled:.2}")
    } else {
        format!("{scaled:.3}{unit}")
    }
}
