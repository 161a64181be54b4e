//! Following the catalog during a run: the run asks the catalog again every few seconds
//! and turns what changed into changes to its hosts. A host the catalog shows down gets no
//! new tasks (what runs there goes on, and is lost and retried elsewhere if the host is
//! really gone); it takes tasks again once the catalog shows it up. A host that left the
//! run (its connection broke) is taken back once it has reported to the catalog again since
//! it left, as a restarted server (`roost serve --supervise`) does at once. A server that
//! joins the pool and runs jobs is taken on, up to `--max-hosts`. A catalog that stops
//! answering leaves the run with the hosts it has.
//!
//! [`Follower`] decides, from each answer, without I/O (so it is tested alone); the run
//! carries its [`Change`]s out.

use crate::hosts::{self, Host};
use crate::Crew;
use roost_catalog::json::Value;
use roost_catalog::servers::{Seen, Servers};
use std::net::{SocketAddr, ToSocketAddrs};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

/// How a run follows the catalog.
#[derive(Clone, Debug)]
pub struct Follow {
    /// The catalogs to ask, in order (the first that answers is used).
    pub catalogs: Vec<(String, u16)>,
    /// Time between questions.
    pub every: Duration,
    /// Time to wait for an answer.
    pub timeout: Duration,
    /// Most hosts in the run at once (`--max-hosts`).
    pub most: Option<usize>,
    /// How long pending tasks wait for a host when no host may take them, before they are
    /// given up.
    pub host_wait: Duration,
    /// The answer the run's first hosts were chosen from.
    pub first_answer: Vec<Value>,
    /// Which records may name hosts that join.
    pub trust: hosts::Trust,
}

/// A change to the run's hosts that an answer calls for.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// The catalog shows host N of the run down (as it says): no new tasks for it.
    Pause(usize, String),
    /// The catalog shows paused host N up again.
    Resume(usize),
    /// Host N left the run and has reported since: try it again.
    TakeBack(usize),
    /// A server that runs jobs and is not in the run.
    Join(Host),
}

/// One host of the run, as the follower knows it.
struct Tracked {
    /// The addresses it was reached at, to tell it among the catalog's servers.
    addrs: Vec<SocketAddr>,
    authority: String,
    paused: bool,
    /// The catalog's last answers about it, newest first, with when each came.
    seen: [Option<(Seen, Instant)>; 2],
    /// What the catalog had said of it before it left the run (`Some` while it is out).
    left_with: Option<Option<Seen>>,
}

impl Tracked {
    fn new(authority: &str) -> Tracked {
        Tracked {
            addrs: authority
                .to_socket_addrs()
                .map(Iterator::collect)
                .unwrap_or_default(),
            authority: authority.to_string(),
            paused: false,
            seen: [None, None],
            left_with: None,
        }
    }

    /// The catalog's word from before `left_at`: the newest answer that came before it
    /// (answers are read only after the leaves already known are noted, so the one before
    /// the newest always came before a leave noted now).
    fn before(&self, left_at: Instant) -> Option<Seen> {
        match &self.seen {
            [Some((seen, at)), _] if *at < left_at => Some(seen.clone()),
            [_, older] => older.as_ref().map(|(seen, _)| seen.clone()),
        }
    }
}

/// Decides, answer by answer, what the run's hosts become.
pub struct Follower {
    hosts: Vec<Tracked>,
    most: Option<usize>,
    trust: hosts::Trust,
}

impl Follower {
    /// A follower of a run over `hosts`, which `first` (an answer that came at `at`)
    /// chose, or which were named; hosts that join must be allowed by `trust`.
    pub fn new(
        hosts: &[Host],
        first: &[Value],
        at: Instant,
        most: Option<usize>,
        trust: hosts::Trust,
    ) -> Follower {
        let servers = Servers::new(first);
        let hosts = hosts
            .iter()
            .map(|h| {
                let mut t = Tracked::new(&h.authority);
                t.seen[0] = servers.find(&h.authority).map(|s| (s.clone(), at));
                t
            })
            .collect();
        Follower { hosts, most, trust }
    }

    /// The changes `answer` (which came at `at`) calls for. `left` says, for each host of
    /// the run, when it left the run if it is out of it; `trying` whether a worker is still
    /// busy with it (a host taken back is not taken back again while one tries it).
    pub fn consider(
        &mut self,
        answer: &[Value],
        at: Instant,
        left: &[Option<Instant>],
        trying: &[bool],
    ) -> Vec<Change> {
        let servers = Servers::new(answer);
        let mut changes = Vec::new();
        for (i, t) in self.hosts.iter_mut().enumerate() {
            let seen = servers.find(&t.authority).cloned();
            match left.get(i).copied().flatten() {
                Some(left_at) => {
                    if t.left_with.is_none() {
                        t.left_with = Some(t.before(left_at));
                    }
                    let before = t.left_with.clone().flatten();
                    let returned = seen.as_ref().is_some_and(|s| {
                        s.up && before.as_ref().map_or(true, |b| s.reported_since(b))
                    });
                    if returned && !trying.get(i).copied().unwrap_or(false) {
                        changes.push(Change::TakeBack(i));
                        // Another try needs another report.
                        t.left_with = Some(seen.clone());
                    }
                    t.paused = false;
                }
                None => {
                    t.left_with = None;
                    let listed_before = t.seen.iter().any(Option::is_some);
                    match &seen {
                        Some(s) if !s.up && !t.paused => {
                            t.paused = true;
                            changes.push(Change::Pause(i, s.describe()));
                        }
                        None if listed_before && !t.paused => {
                            t.paused = true;
                            changes.push(Change::Pause(i, "no longer in the catalog".into()));
                        }
                        Some(s) if s.up && t.paused => {
                            t.paused = false;
                            changes.push(Change::Resume(i));
                        }
                        _ => {}
                    }
                }
            }
            if let Some(s) = seen {
                t.seen = [Some((s, at)), t.seen[0].take()];
            }
        }
        let in_run = left.iter().filter(|l| l.is_none()).count()
            + self.hosts.len().saturating_sub(left.len());
        let mut room = self.most.map_or(usize::MAX, |m| m.saturating_sub(in_run));
        for host in hosts::choose(answer, None, self.trust) {
            if room == 0 {
                break;
            }
            let addr: Option<SocketAddr> = host.authority.parse().ok();
            let known = self.hosts.iter().any(|t| {
                t.authority == host.authority || addr.is_some_and(|a| t.addrs.contains(&a))
            });
            if !known {
                let mut t = Tracked::new(&host.authority);
                t.seen[0] = servers.find(&host.authority).map(|s| (s.clone(), at));
                self.hosts.push(t);
                changes.push(Change::Join(host));
                room -= 1;
            }
        }
        changes
    }
}

/// Follows the catalog until the run is finished: asks it every `follow.every`, carries
/// out the changes each answer calls for (starting hosts' threads with `crew`), logs each
/// change once, and gives up the pending tasks when no host could take them for
/// `follow.host_wait`. Returns the run's hosts, those that joined last.
pub(crate) fn watch<'scope, 'env>(
    follow: &Follow,
    crew: &'scope Crew<'env>,
    scope: &'scope Scope<'scope, 'env>,
    mut hosts: Vec<Host>,
    mut workers: Vec<ScopedJoinHandle<'scope, ()>>,
) -> Vec<Host> {
    let shared = crew.shared;
    let mut follower = Follower::new(
        &hosts,
        &follow.first_answer,
        Instant::now(),
        follow.most,
        follow.trust,
    );
    let mut next_question = Instant::now() + follow.every;
    let mut silent = false;
    let mut starved_since: Option<Instant> = None;
    while !shared.finished() && !shared.stopping() {
        let now = Instant::now();
        if shared.lock().starved() {
            let since = *starved_since.get_or_insert(now);
            if now.duration_since(since) >= follow.host_wait {
                let why = format!(
                    "no host could run it for {:.0} s",
                    follow.host_wait.as_secs_f64()
                );
                shared.tell(format!("roost pool: {why}: the waiting tasks are given up"));
                shared.change(|s| s.give_up_pending(&why));
                starved_since = None;
            }
        } else {
            starved_since = None;
        }
        if now < next_question {
            shared.wait((next_question - now).min(Duration::from_millis(250)));
            continue;
        }
        next_question = now + follow.every;
        // The leaves known before the question (see Tracked::before).
        let left: Vec<Option<Instant>> = {
            let s = shared.lock();
            (0..s.host_count()).map(|h| s.host(h).left_at).collect()
        };
        let trying: Vec<bool> = workers.iter().map(|w| !w.is_finished()).collect();
        let answer = match roost_catalog::query_first(&follow.catalogs, follow.timeout) {
            Ok(answer) => answer,
            Err(why) => {
                if !silent {
                    silent = true;
                    shared.tell(format!(
                        "roost pool: the catalog does not answer ({}): going on with the hosts it listed last",
                        why.join("; ")
                    ));
                }
                continue;
            }
        };
        if silent {
            silent = false;
            shared.tell("roost pool: the catalog answers again".into());
        }
        for change in follower.consider(&answer, Instant::now(), &left, &trying) {
            match change {
                Change::Pause(i, why) => {
                    shared.change(|s| s.pause(i, &why));
                    shared.tell(format!(
                        "roost pool: {}: {why}: no new tasks",
                        hosts[i].name
                    ));
                }
                Change::Resume(i) => {
                    shared.change(|s| s.resume(i));
                    shared.tell(format!(
                        "roost pool: {}: up in the catalog again: takes tasks again",
                        hosts[i].name
                    ));
                }
                Change::TakeBack(i) => {
                    workers[i] = crew.start(scope, i, hosts[i].clone(), true);
                }
                Change::Join(host) => {
                    let i = shared.change(|s| s.join());
                    shared.tell(format!(
                        "roost pool: {}: joined the pool: taken on ({:.2} cores of headroom, {} at once)",
                        host.name, host.headroom, host.slots
                    ));
                    hosts.push(host.clone());
                    workers.push(crew.start(scope, i, host, false));
                }
            }
        }
    }
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(servers: &[(u16, &str, i64)]) -> Vec<Value> {
        let records: Vec<String> = servers
            .iter()
            .map(|(port, state, reports)| {
                format!(
                    r#"{{"type":"chirp","address":"127.0.0.1","name":"h{port}","port":{port},"jobs":1,"cpus":1,"state":"{state}","reports":{reports},"age":0}}"#
                )
            })
            .collect();
        match roost_catalog::json::parse(format!("[{}]", records.join(",")).as_bytes()).unwrap() {
            Value::Array(r) => r,
            _ => unreachable!(),
        }
    }

    #[test]
    fn down_hosts_pause_and_resume_and_new_ones_join_up_to_the_limit() {
        let t0 = Instant::now();
        let first = answer(&[(1, "up", 1), (2, "up", 1)]);
        let hosts = hosts::choose(&first, None, hosts::Trust::AlsoUnsigned);
        let mut f = Follower::new(&hosts, &first, t0, Some(3), hosts::Trust::AlsoUnsigned);
        let none = [None, None];
        assert_eq!(f.consider(&first, t0, &none, &[true; 2]), []);
        let a = answer(&[(1, "down", 1), (2, "up", 2)]);
        let changes = f.consider(&a, t0, &none, &[true; 2]);
        assert_eq!(
            changes,
            [Change::Pause(
                0,
                "down in the catalog (no report for 0 s)".into()
            )]
        );
        assert_eq!(f.consider(&a, t0, &none, &[true; 2]), [], "said once");
        let b = answer(&[(1, "up", 2), (2, "up", 3), (3, "up", 1), (4, "up", 1)]);
        let changes = f.consider(&b, t0, &none, &[true; 2]);
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert_eq!(changes[0], Change::Resume(0));
        assert!(
            matches!(&changes[1], Change::Join(h) if h.authority == "127.0.0.1:3"),
            "one joins: three hosts at most"
        );
        // A host that vanished from the catalog is paused too.
        let c = answer(&[(2, "up", 3), (3, "up", 1), (4, "up", 1)]);
        let changes = f.consider(&c, t0, &[None; 3], &[true; 3]);
        assert_eq!(
            changes,
            [Change::Pause(0, "no longer in the catalog".into())]
        );
    }

    #[test]
    fn a_server_whose_reports_are_not_verified_does_not_join_a_signed_run() {
        let t0 = Instant::now();
        let first = answer(&[(1, "up", 1)]);
        let hosts = hosts::choose(&first, None, hosts::Trust::AlsoUnsigned);
        let mut f = Follower::new(&hosts, &first, t0, None, hosts::Trust::SignedOnly);
        let mut next = answer(&[(1, "up", 2), (2, "up", 1), (3, "up", 1)]);
        next[1].set("verified", Value::Bool(true));
        next[2].set("verified", Value::Bool(false));
        let changes = f.consider(&next, t0, &[None], &[true]);
        assert!(
            matches!(&changes[..], [Change::Join(h)] if h.authority == "127.0.0.1:2"),
            "{changes:?}"
        );
    }

    #[test]
    fn a_host_that_left_is_taken_back_once_it_reports_again() {
        let t0 = Instant::now();
        let first = answer(&[(1, "up", 5), (2, "up", 5)]);
        let hosts = hosts::choose(&first, None, hosts::Trust::AlsoUnsigned);
        let mut f = Follower::new(&hosts, &first, t0, None, hosts::Trust::AlsoUnsigned);
        let t1 = t0 + Duration::from_secs(1);
        let left = [Some(t1), None];
        // Asked after it left, the catalog still shows its last report from before: no.
        let t2 = t0 + Duration::from_secs(2);
        assert_eq!(f.consider(&first, t2, &left, &[false; 2]), []);
        // It reported again (restarted): taken back, once.
        let again = answer(&[(1, "up", 6), (2, "up", 6)]);
        let t3 = t0 + Duration::from_secs(3);
        assert_eq!(
            f.consider(&again, t3, &left, &[false; 2]),
            [Change::TakeBack(0)]
        );
        assert_eq!(
            f.consider(&again, t3, &left, &[false; 2]),
            [],
            "tried with that report"
        );
        // A later report while a worker still tries it: not twice at once.
        let later = answer(&[(1, "up", 7), (2, "up", 7)]);
        assert_eq!(f.consider(&later, t3, &left, &[true, false]), []);
        let latest = answer(&[(1, "up", 8), (2, "up", 8)]);
        assert_eq!(
            f.consider(&latest, t3, &left, &[false; 2]),
            [Change::TakeBack(0)]
        );
        // Shown down, it is not taken back.
        let down = answer(&[(1, "down", 9), (2, "up", 9)]);
        assert_eq!(f.consider(&down, t3, &left, &[false; 2]), []);
    }

    #[test]
    fn a_leave_during_an_answer_compares_with_the_answer_before() {
        let t0 = Instant::now();
        let first = answer(&[(1, "up", 5)]);
        let hosts = hosts::choose(&first, None, hosts::Trust::AlsoUnsigned);
        let mut f = Follower::new(&hosts, &first, t0, None, hosts::Trust::AlsoUnsigned);
        // An answer with a report the host made after t1 came at t2 ...
        let t2 = t0 + Duration::from_secs(2);
        let restarted = answer(&[(1, "up", 6)]);
        assert_eq!(f.consider(&restarted, t2, &[None], &[true]), []);
        // ... and the leave at t1 (during that question) is noted only now: the report
        // made after it counts.
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(
            f.consider(&restarted, t2, &[Some(t1)], &[false]),
            [Change::TakeBack(0)]
        );
    }
}
