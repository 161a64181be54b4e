//! Which task runs where, and what becomes of it: the bookkeeping of a run, apart from any
//! I/O so that it can be tested alone.
//!
//! A host asks for work ([`Scheduler::next`]) when it has a free place; it gets the first
//! pending task that has not failed on it. Once nothing is pending, an idle host that has
//! shown itself fast may take a copy of a task still running on a host that will finish it
//! later (by the rates seen so far): whichever copy ends first is kept, the other killed.
//! A task's outputs are fetched by exactly one attempt, the one that [`Scheduler::claim`]s
//! it; others are discarded, so no output is counted twice. A failed attempt (the command
//! failed, or its outputs could not be fetched) is retried on another host, up to the retry
//! limit; a lost one (its host died) is retried without counting against it.
//!
//! A run that follows the catalog ([`crate::follow`]) also pauses a host the catalog shows
//! down (it gets no new attempts), resumes it, takes back a host that left, and adds hosts
//! that join; it holds pending tasks while no host can take them, until the follower gives
//! them up ([`Scheduler::give_up_pending`]).
//!
//! A check task ([`Scheduler::check`], for `--verify`) runs only once the task it checks is
//! done, and never on the host whose outputs were kept; it is given up when that task failed
//! or no other host is left in the run.

use std::collections::{BTreeSet, VecDeque};
use std::time::Instant;

/// What became of a task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Pending,
    Running,
    Done,
    /// Given up, with the last reason.
    Failed(String),
}

/// A task as the scheduler sees it.
#[derive(Clone, Debug)]
struct TaskState {
    cost: f64,
    status: Status,
    /// Attempts under way: (host, attempt number, started).
    running: Vec<(usize, u32, Instant)>,
    /// The attempt fetching the outputs.
    gathering: Option<(usize, u32)>,
    attempts: u32,
    failures: u32,
    losses: u32,
    failed_on: BTreeSet<usize>,
    done_by: Option<usize>,
}

/// What a host did, for the report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostStats {
    /// Tasks whose outputs came from this host.
    pub done: usize,
    /// Their cost.
    pub done_cost: f64,
    /// Attempts started here.
    pub attempts: usize,
    /// Attempts that failed here.
    pub failures: usize,
    /// Attempts lost with the host, or killed because another copy finished first.
    pub lost: usize,
    pub killed: usize,
    /// Why the host left the run, while it is out of it.
    pub down: Option<String>,
    /// When it left the run, while it is out of it.
    pub left_at: Option<Instant>,
    /// Given no new attempts while the catalog shows it down.
    pub paused: bool,
    /// What happened to the host during the run (left, paused, resumed, back, joined), and
    /// when.
    pub changes: Vec<(Instant, String)>,
    /// When its first attempt started and its last counted one ended.
    pub first_start: Option<Instant>,
    pub last_done: Option<Instant>,
}

impl HostStats {
    /// Cost finished per second since this host started, once it has finished something.
    pub fn rate(&self, now: Instant) -> Option<f64> {
        let since = self.first_start?;
        let end = if self.done > 0 { self.last_done? } else { now };
        let seconds = end.duration_since(since).as_secs_f64();
        (self.done > 0 && seconds > 0.0).then(|| self.done_cost / seconds)
    }
}

/// An attempt to hand to a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub task: usize,
    /// Numbered from 1 across the task's attempts.
    pub attempt: u32,
    /// A copy of a task already running elsewhere.
    pub speculative: bool,
}

/// The state of a run.
pub struct Scheduler {
    tasks: Vec<TaskState>,
    pending: VecDeque<usize>,
    hosts: Vec<HostStats>,
    /// Failed attempts allowed per task beyond the first.
    retries: u32,
    speculate: bool,
    /// Keep pending tasks while no host can take them (hosts may come back).
    hold: bool,
    /// For each check task, the task it checks.
    checks: Vec<Option<usize>>,
}

impl Scheduler {
    /// A run of tasks with these costs over `hosts` hosts.
    pub fn new(costs: &[f64], hosts: usize, retries: u32, speculate: bool) -> Scheduler {
        let tasks = costs
            .iter()
            .map(|&cost| TaskState {
                cost,
                status: Status::Pending,
                running: Vec::new(),
                gathering: None,
                attempts: 0,
                failures: 0,
                losses: 0,
                failed_on: BTreeSet::new(),
                done_by: None,
            })
            .collect();
        let mut s = Scheduler {
            tasks,
            pending: (0..costs.len()).collect(),
            hosts: vec![HostStats::default(); hosts],
            retries,
            speculate,
            hold: false,
            checks: vec![None; costs.len()],
        };
        s.give_up_without_hosts();
        s
    }

    /// The hosts that may be given attempts: in the run and not paused.
    fn available(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.hosts.len()).filter(|&h| self.hosts[h].down.is_none() && !self.hosts[h].paused)
    }

    /// Makes task `check` the check of task `task`: it runs once `task` is done, on another
    /// host than the one that did it.
    pub fn check(&mut self, check: usize, task: usize) {
        self.checks[check] = Some(task);
    }

    /// Whether `host` may not run task `t` now: a check whose task is not done yet, or was
    /// done on `host`.
    fn blocked(&self, t: usize, host: usize) -> bool {
        self.checks[t].is_some_and(|of| {
            self.tasks[of].status != Status::Done || self.tasks[of].done_by == Some(host)
        })
    }

    /// Gives up the pending checks that can never run: their task failed, or no host but
    /// the one that did it is left in the run.
    fn settle_checks(&mut self) {
        let mut give_up = Vec::new();
        for &t in &self.pending {
            let Some(of) = self.checks[t] else {
                continue;
            };
            let why = match (&self.tasks[of].status, self.tasks[of].done_by) {
                (Status::Failed(_), _) => "its task failed",
                (Status::Done, Some(did)) => {
                    let other =
                        (0..self.hosts.len()).any(|h| h != did && self.hosts[h].down.is_none());
                    if other {
                        continue;
                    }
                    "no other host left to run it on"
                }
                _ => continue,
            };
            give_up.push((t, why));
        }
        for (t, why) in give_up {
            self.pending.retain(|&p| p != t);
            self.tasks[t].status = Status::Failed(why.to_string());
        }
    }

    /// The next attempt for `host`, if there is one for it now.
    pub fn next(&mut self, host: usize, now: Instant) -> Option<Assignment> {
        if self.hosts[host].down.is_some() || self.hosts[host].paused {
            return None;
        }
        self.settle_checks();
        // Not a task that failed here, while a host it has not failed on is left.
        let position = self.pending.iter().position(|&t| {
            let failed_on = &self.tasks[t].failed_on;
            !self.blocked(t, host)
                && (!failed_on.contains(&host)
                    || self
                        .available()
                        .all(|h| h == host || failed_on.contains(&h) || self.blocked(t, h)))
        });
        let (task, speculative) = match position {
            Some(p) => (self.pending.remove(p)?, false),
            None => (self.copy_for(host, now)?, true),
        };
        Some(self.begin(task, host, now, speculative))
    }

    /// The pending `task` starts on `host`, where something else chose to run it (Slurm);
    /// `None` if it is not pending.
    pub fn start(&mut self, task: usize, host: usize, now: Instant) -> Option<Assignment> {
        let p = self.pending.iter().position(|&t| t == task)?;
        self.pending.remove(p);
        Some(self.begin(task, host, now, false))
    }

    fn begin(&mut self, task: usize, host: usize, now: Instant, speculative: bool) -> Assignment {
        let t = &mut self.tasks[task];
        t.attempts += 1;
        t.status = Status::Running;
        t.running.push((host, t.attempts, now));
        let stats = &mut self.hosts[host];
        stats.attempts += 1;
        stats.first_start = Some(stats.first_start.map_or(now, |f| f.min(now)));
        Assignment {
            task,
            attempt: t.attempts,
            speculative,
        }
    }

    /// The task a check task checks, if it is one.
    pub fn checks(&self, task: usize) -> Option<usize> {
        self.checks[task]
    }

    /// A host more, found during the run (a Slurm node); its number.
    pub fn add_host(&mut self) -> usize {
        self.hosts.push(HostStats::default());
        self.hosts.len() - 1
    }

    /// A task running elsewhere that `host` would finish sooner than its host will, by the
    /// rates seen so far (with a margin of half again).
    fn copy_for(&self, host: usize, now: Instant) -> Option<usize> {
        if !self.speculate || !self.pending.is_empty() {
            return None;
        }
        let mine = self.hosts[host].rate(now)?;
        let mut best: Option<(f64, usize)> = None;
        for (i, t) in self.tasks.iter().enumerate() {
            let [(other, _, started)] = t.running[..] else {
                continue;
            };
            if t.status != Status::Running
                || t.gathering.is_some()
                || other == host
                || t.failed_on.contains(&host)
                || self.blocked(i, host)
            {
                continue;
            }
            let Some(theirs) = self.hosts[other].rate(now) else {
                continue;
            };
            let left = t.cost / theirs - now.duration_since(started).as_secs_f64();
            let here = t.cost / mine;
            if left > 1.5 * here && best.map_or(true, |(gain, _)| left - here > gain) {
                best = Some((left - here, i));
            }
        }
        best.map(|(_, i)| i)
    }

    /// True while the task's outputs are still wanted (it has not been done or given up).
    pub fn wanted(&self, task: usize) -> bool {
        matches!(self.tasks[task].status, Status::Pending | Status::Running)
    }

    /// An attempt ended well: true if it is the one to fetch the outputs.
    pub fn claim(&mut self, task: usize, host: usize, attempt: u32) -> bool {
        let t = &mut self.tasks[task];
        if t.status != Status::Running || t.gathering.is_some() {
            return false;
        }
        t.gathering = Some((host, attempt));
        true
    }

    fn end_attempt(&mut self, task: usize, host: usize, attempt: u32) -> bool {
        let t = &mut self.tasks[task];
        let before = t.running.len();
        t.running.retain(|&(h, a, _)| (h, a) != (host, attempt));
        if t.gathering == Some((host, attempt)) {
            t.gathering = None;
        }
        t.running.len() != before
    }

    /// The claimed attempt fetched the outputs: the task is done.
    pub fn done(&mut self, task: usize, host: usize, attempt: u32, now: Instant) {
        self.end_attempt(task, host, attempt);
        let t = &mut self.tasks[task];
        t.status = Status::Done;
        t.done_by = Some(host);
        let cost = t.cost;
        let stats = &mut self.hosts[host];
        stats.done += 1;
        stats.done_cost += cost;
        stats.last_done = Some(stats.last_done.map_or(now, |l| l.max(now)));
        self.settle_checks();
    }

    /// Puts the task back in front of the queue unless another attempt still runs.
    fn requeue(&mut self, task: usize) {
        let t = &mut self.tasks[task];
        if t.running.is_empty() && t.status == Status::Running {
            t.status = Status::Pending;
            self.pending.push_front(task);
            self.give_up_without_hosts();
        }
    }

    /// An attempt failed (the command, or fetching its outputs), for `why`.
    pub fn failed(&mut self, task: usize, host: usize, attempt: u32, why: &str) {
        if !self.end_attempt(task, host, attempt) {
            return;
        }
        self.hosts[host].failures += 1;
        let retries = self.retries;
        let t = &mut self.tasks[task];
        if t.status != Status::Running {
            return;
        }
        t.failures += 1;
        t.failed_on.insert(host);
        if t.failures > retries {
            if t.running.is_empty() {
                t.status = Status::Failed(format!(
                    "{why} (failed {} time{})",
                    t.failures,
                    if t.failures == 1 { "" } else { "s" }
                ));
                self.settle_checks();
            }
            return;
        }
        self.requeue(task);
    }

    /// An attempt was lost with its host, or killed because it was no longer wanted.
    pub fn lost(&mut self, task: usize, host: usize, attempt: u32) {
        if !self.end_attempt(task, host, attempt) {
            return;
        }
        let wanted = self.wanted(task);
        let stats = &mut self.hosts[host];
        if wanted {
            stats.lost += 1;
        } else {
            stats.killed += 1;
        }
        let limit = self.hosts.len() as u32 + self.retries;
        let t = &mut self.tasks[task];
        if t.status == Status::Running {
            t.losses += 1;
            if t.losses > limit && t.running.is_empty() {
                t.status = Status::Failed(format!("lost with its host {} times", t.losses));
                return;
            }
        }
        self.requeue(task);
    }

    /// `host` cannot be used any more, for `why`; its attempts must be reported lost.
    pub fn host_down(&mut self, host: usize, why: &str) {
        let stats = &mut self.hosts[host];
        if stats.down.is_none() {
            let now = Instant::now();
            stats.down = Some(why.to_string());
            stats.left_at = Some(now);
            stats.changes.push((now, format!("down ({why})")));
        }
        self.give_up_without_hosts();
        self.settle_checks();
    }

    /// Holds pending tasks while no host can take them (`true`), or gives them up then.
    pub fn hold(&mut self, hold: bool) {
        self.hold = hold;
        self.give_up_without_hosts();
    }

    /// `host` gets no new attempts until [`Scheduler::resume`]; those under way go on.
    pub fn pause(&mut self, host: usize, why: &str) {
        let stats = &mut self.hosts[host];
        stats.paused = true;
        stats
            .changes
            .push((Instant::now(), format!("paused ({why})")));
    }

    pub fn resume(&mut self, host: usize) {
        let stats = &mut self.hosts[host];
        stats.paused = false;
        stats.changes.push((Instant::now(), "resumed".into()));
    }

    /// `host`, which had left the run, is back in it.
    pub fn back(&mut self, host: usize) {
        let stats = &mut self.hosts[host];
        stats.down = None;
        stats.left_at = None;
        stats.paused = false;
        stats.changes.push((Instant::now(), "back".into()));
    }

    /// A host joined the run during it; its number.
    pub fn join(&mut self) -> usize {
        let host = self.add_host();
        self.hosts[host]
            .changes
            .push((Instant::now(), "joined".into()));
        host
    }

    /// True while tasks wait and no host may take them.
    pub fn starved(&self) -> bool {
        !self.pending.is_empty() && self.available().next().is_none()
    }

    /// Gives up every pending task, for `why`.
    pub fn give_up_pending(&mut self, why: &str) {
        for task in self.pending.drain(..) {
            self.tasks[task].status = Status::Failed(why.to_string());
        }
    }

    fn give_up_without_hosts(&mut self) {
        if !self.hold && self.available().next().is_none() {
            self.give_up_pending("no host left to run it");
        }
    }

    /// True once every task is done or given up.
    pub fn finished(&self) -> bool {
        self.tasks
            .iter()
            .all(|t| matches!(t.status, Status::Done | Status::Failed(_)))
    }

    pub fn status(&self, task: usize) -> &Status {
        &self.tasks[task].status
    }

    /// The host whose outputs were kept.
    pub fn done_by(&self, task: usize) -> Option<usize> {
        self.tasks[task].done_by
    }

    /// Attempts made for a task.
    pub fn attempts(&self, task: usize) -> u32 {
        self.tasks[task].attempts
    }

    pub fn host(&self, host: usize) -> &HostStats {
        &self.hosts[host]
    }

    /// How many hosts the run has had.
    pub fn host_count(&self) -> usize {
        self.hosts.len()
    }

    /// Counts for the progress line: (done, running, failed, pending, hosts taking tasks).
    pub fn counts(&self) -> (usize, usize, usize, usize, usize) {
        let mut c = (0, 0, 0, 0, self.available().count());
        for t in &self.tasks {
            match t.status {
                Status::Done => c.0 += 1,
                Status::Running => c.1 += 1,
                Status::Failed(_) => c.2 += 1,
                Status::Pending => c.3 += 1,
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn tasks_go_out_in_order_and_are_done_once() {
        let now = Instant::now();
        let mut s = Scheduler::new(&[1.0, 1.0], 2, 1, false);
        let a = s.next(0, now).unwrap();
        let b = s.next(1, now).unwrap();
        assert_eq!((a.task, b.task), (0, 1));
        assert_eq!(s.next(0, now), None);
        assert!(s.claim(0, 0, a.attempt));
        assert!(!s.claim(0, 0, a.attempt), "claimed twice");
        s.done(0, 0, a.attempt, now);
        assert!(!s.wanted(0) && s.wanted(1));
        assert!(!s.finished());
        s.done(1, 1, b.attempt, now);
        assert!(s.finished());
        assert_eq!(s.done_by(1), Some(1));
        assert_eq!(s.host(0).done, 1);
    }

    #[test]
    fn a_failed_task_goes_to_another_host_until_the_retries_run_out() {
        let now = Instant::now();
        let mut s = Scheduler::new(&[1.0], 2, 1, false);
        let a = s.next(0, now).unwrap();
        s.failed(0, 0, a.attempt, "exit 1");
        assert_eq!(s.next(0, now), None, "not again on the host it failed on");
        let b = s.next(1, now).unwrap();
        assert_eq!(b.attempt, 2);
        s.failed(0, 1, b.attempt, "exit 1");
        assert_eq!(
            s.status(0),
            &Status::Failed("exit 1 (failed 2 times)".into())
        );
        assert!(s.finished());
    }

    #[test]
    fn with_more_retries_than_hosts_a_task_comes_back_to_a_host_it_failed_on() {
        let now = Instant::now();
        let mut s = Scheduler::new(&[1.0], 2, 2, false);
        let a = s.next(0, now).unwrap();
        s.failed(0, 0, a.attempt, "exit 1");
        let b = s.next(1, now).unwrap();
        s.failed(0, 1, b.attempt, "exit 1");
        let c = s.next(0, now).unwrap();
        assert_eq!(c.attempt, 3);
        s.failed(0, 0, c.attempt, "exit 1");
        assert_eq!(
            s.status(0),
            &Status::Failed("exit 1 (failed 3 times)".into())
        );
    }

    #[test]
    fn a_lost_task_is_retried_elsewhere_without_counting_as_a_failure() {
        let now = Instant::now();
        let mut s = Scheduler::new(&[1.0, 1.0, 1.0], 2, 0, false);
        let a = s.next(0, now).unwrap();
        let b = s.next(0, now).unwrap();
        s.host_down(0, "connection reset");
        s.lost(a.task, 0, a.attempt);
        s.lost(b.task, 0, b.attempt);
        assert_eq!(s.next(0, now), None, "a down host gets nothing");
        let mut seen = Vec::new();
        while let Some(x) = s.next(1, now) {
            assert!(s.claim(x.task, 1, x.attempt));
            s.done(x.task, 1, x.attempt, now);
            seen.push(x.task);
        }
        seen.sort();
        assert_eq!(seen, [0, 1, 2]);
        assert!(s.finished());
        assert_eq!(s.host(0).lost, 2);
        s.host_down(1, "gone");
        assert!(s.finished());
    }

    #[test]
    fn with_every_host_down_pending_tasks_are_given_up() {
        let now = Instant::now();
        let mut s = Scheduler::new(&[1.0, 1.0], 1, 3, false);
        let a = s.next(0, now).unwrap();
        s.host_down(0, "refused");
        s.lost(a.task, 0, a.attempt);
        assert!(s.finished());
        assert_eq!(s.counts().2, 2);
        assert!(Scheduler::new(&[1.0], 0, 0, false).finished());
    }

    #[test]
    fn a_paused_host_gets_nothing_new_and_held_tasks_wait_for_a_host() {
        let now = Instant::now();
        let mut s = Scheduler::new(&[1.0, 1.0, 1.0], 2, 0, false);
        s.hold(true);
        let a = s.next(0, now).unwrap();
        s.pause(0, "down in the catalog");
        assert_eq!(s.next(0, now), None, "paused");
        assert!(s.claim(a.task, 0, a.attempt), "what runs there goes on");
        s.done(a.task, 0, a.attempt, now);
        s.host_down(1, "connection reset");
        assert!(s.starved());
        assert!(!s.finished(), "held, not given up");
        s.resume(0);
        assert!(!s.starved());
        let b = s.next(0, now).unwrap();
        s.lost(b.task, 0, b.attempt);
        s.back(1);
        assert_eq!(s.host(1).down, None);
        let c = s.next(1, now).expect("a host taken back gets tasks");
        let joined = s.join();
        assert_eq!((joined, s.host_count()), (2, 3));
        let d = s.next(joined, now).expect("a host that joined gets tasks");
        let changes: Vec<&str> = s.host(0).changes.iter().map(|c| c.1.as_str()).collect();
        assert_eq!(changes, ["paused (down in the catalog)", "resumed"]);
        assert_eq!(s.host(2).changes[0].1, "joined");
        s.host_down(0, "gone");
        s.host_down(1, "gone");
        s.host_down(2, "gone");
        s.lost(c.task, 1, c.attempt);
        s.lost(d.task, 2, d.attempt);
        assert!(!s.finished(), "held");
        s.give_up_pending("no host for 60 s");
        assert_eq!(s.counts().2, 2);
        s.hold(false);
    }

    #[test]
    fn an_idle_fast_host_copies_a_slow_hosts_task_and_one_copy_counts() {
        let t0 = Instant::now();
        let mut s = Scheduler::new(&[10.0, 10.0, 10.0, 100.0], 2, 0, true);
        // Host 0 is fast (10 per second), host 1 slow (1 per second).
        let a = s.next(0, t0).unwrap();
        let b = s.next(1, t0).unwrap();
        let t1 = t0 + Duration::from_secs(1);
        assert!(s.claim(a.task, 0, a.attempt));
        s.done(a.task, 0, a.attempt, t1);
        let c = s.next(0, t1).unwrap();
        let t2 = t1 + Duration::from_secs(10);
        assert!(s.claim(b.task, 1, b.attempt));
        s.done(b.task, 1, b.attempt, t2);
        assert!(s.claim(c.task, 0, c.attempt));
        s.done(c.task, 0, c.attempt, t1 + Duration::from_secs(1));
        let big = s.next(1, t2).unwrap();
        assert_eq!(big.task, 3);
        // Host 0 is idle: 100 takes it 10 s, host 1 about 100 s: it copies.
        let copy = s.next(0, t2).unwrap();
        assert_eq!((copy.task, copy.speculative), (3, true));
        assert_eq!(s.next(0, t2), None, "one copy at a time");
        assert!(s.claim(3, 0, copy.attempt));
        assert!(
            !s.claim(3, 1, big.attempt),
            "the other copy fetches nothing"
        );
        s.done(3, 0, copy.attempt, t2 + Duration::from_secs(10));
        assert!(!s.wanted(3));
        s.lost(3, 1, big.attempt);
        assert_eq!(s.host(1).killed, 1);
        assert_eq!(s.host(1).lost, 0);
        assert!(s.finished());
        assert_eq!(s.host(0).done, 3);
    }
    #[test]
    fn a_check_runs_after_its_task_on_another_host_or_is_given_up() {
        let now = Instant::now();
        // Tasks 0 and 1; task 2 checks 0, task 3 checks 1.
        let mut s = Scheduler::new(&[1.0; 4], 2, 1, true);
        s.check(2, 0);
        s.check(3, 1);
        let a = s.next(0, now).unwrap();
        let b = s.next(1, now).unwrap();
        assert_eq!((a.task, b.task), (0, 1));
        assert_eq!(s.next(0, now), None, "no check before its task is done");
        assert!(s.claim(0, 0, a.attempt));
        s.done(0, 0, a.attempt, now);
        assert_eq!(s.next(0, now), None, "not on the host that did it");
        let c = s.next(1, now).unwrap();
        assert_eq!(c.task, 2);
        // Task 1 fails everywhere: its check is given up.
        s.failed(1, 1, b.attempt, "exit 1");
        let b2 = s.next(0, now).unwrap();
        s.failed(1, 0, b2.attempt, "exit 1");
        assert_eq!(s.status(3), &Status::Failed("its task failed".into()));
        assert!(s.claim(2, 1, c.attempt));
        s.done(2, 1, c.attempt, now);
        assert!(s.finished());
        // With the other host gone, a check has nowhere to run.
        let mut s = Scheduler::new(&[1.0; 2], 2, 1, false);
        s.check(1, 0);
        let a = s.next(0, now).unwrap();
        s.host_down(1, "gone");
        assert!(s.claim(0, 0, a.attempt));
        s.done(0, 0, a.attempt, now);
        assert_eq!(
            s.status(1),
            &Status::Failed("no other host left to run it on".into())
        );
        assert!(s.finished());
    }

    #[test]
    fn a_task_placed_elsewhere_starts_on_the_host_named() {
        let t0 = Instant::now();
        let mut s = Scheduler::new(&[1.0, 1.0], 1, 1, false);
        let node = s.add_host();
        let a = s.start(1, node, t0).unwrap();
        assert_eq!((a.task, a.attempt), (1, 1));
        assert_eq!(s.start(1, node, t0), None, "not pending any more");
        s.failed(1, node, a.attempt, "exit 1");
        assert_eq!(s.status(1), &Status::Pending, "retried");
        let b = s.start(1, node, t0).unwrap();
        assert_eq!(b.attempt, 2);
        assert!(s.claim(1, node, b.attempt));
        // Attempts may be reported out of order: the host's span covers them all.
        s.done(1, node, b.attempt, t0 + Duration::from_secs(2));
        let c = s.start(0, node, t0 - Duration::from_secs(1)).unwrap();
        s.failed(0, node, c.attempt, "exit 1");
        assert_eq!(s.host(node).first_start, Some(t0 - Duration::from_secs(1)));
        assert_eq!(s.host(node).attempts, 3);
        assert_eq!(s.host(0).attempts, 0);
    }
}
