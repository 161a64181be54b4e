//! `roost pool run` and `roost pool complib` (issue 13, item 7) with real processes on
//! 127.0.0.1: a catalog, several `roost serve --jobs --catalog` servers, and the roost
//! command finding them in the catalog, staging inputs, running tasks and fetching outputs;
//! a server killed in the middle of a run; a run that follows the catalog, taking back a
//! server restarted by `--supervise` and taking on one that joins; complib's scores against
//! the scalar reference.

use roost_catalog::json::Value;
use roost_testkit::bag::*;
use roost_testkit::jobs::JobServer;
use roost_testkit::peer;
use roost_testkit::run::{roost, start_announcing, Proc};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A catalog and servers reporting to it every second, their reports signed with a catalog
/// key the catalog holds.
struct Pool {
    servers: Vec<JobServer>,
    catalog_port: u16,
    catalog: Proc,
    /// `NAME=FILE` of the catalog key, and the directory holding it.
    key: String,
    _keys: tempfile::TempDir,
}

impl Pool {
    fn start(count: usize) -> Pool {
        Pool::start_with(&vec![&[][..]; count])
    }

    /// A server for each of `extra`, with those options more.
    fn start_with(extra: &[&[&str]]) -> Pool {
        let count = extra.len();
        let keys = tempfile::tempdir().unwrap();
        let key = roost_testkit::pool::catalog_key(keys.path(), "pool");
        let mut cmd = roost();
        cmd.args([
            "catalog",
            "--port",
            "0",
            "--listen",
            "127.0.0.1",
            "--down-after",
            "2",
            "--catalog-key",
            &key,
        ]);
        let (catalog, catalog_port) = start_announcing(cmd);
        let mut pool = Pool {
            servers: Vec::new(),
            catalog_port,
            catalog,
            key,
            _keys: keys,
        };
        for more in extra {
            pool.add(more);
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        while pool.listed() < count {
            assert!(
                Instant::now() < deadline,
                "the servers never showed in the catalog"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        pool
    }

    /// Starts one more server reporting every second, with `extra` options.
    fn add(&mut self, extra: &[&str]) {
        let reports_to = format!("127.0.0.1:{}", self.catalog_port);
        let mut args = vec![
            "--catalog",
            &reports_to,
            "--catalog-interval",
            "1",
            "--catalog-key",
            &self.key,
        ];
        args.extend_from_slice(extra);
        self.servers.push(JobServer::one_at_a_time(&args));
    }

    /// `roost pool run tasks --json --no-speculate EXTRA...` in `dir`, under way.
    fn start_run(&self, dir: &Path, extra: &[&str]) -> std::process::Child {
        self.command(dir, "run")
            .args(["tasks", "--json", "--no-speculate"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Waits until server `i` runs (or has run) a task.
    fn wait_busy(&self, i: usize) {
        let sandboxes = self.servers[i].job_root.path().join("jobs/sandboxes");
        roost_testkit::pool::wait_for(
            &format!("a task on server {i}"),
            Duration::from_secs(20),
            || std::fs::read_dir(&sandboxes).is_ok_and(|mut d| d.next().is_some()),
        );
    }

    /// Up servers with jobs in the catalog.
    fn listed(&self) -> usize {
        roost_catalog::query("127.0.0.1", self.catalog_port, Duration::from_secs(5))
            .unwrap_or_default()
            .iter()
            .filter(|r| {
                r.get("jobs").and_then(Value::as_i64) == Some(1)
                    && r.get("state").and_then(Value::as_str) == Some("up")
                    && r.get("verified") == Some(&Value::Bool(true))
            })
            .count()
    }

    /// `roost pool SUBCOMMAND` against this pool's catalog, run in `dir`.
    fn command(&self, dir: &Path, subcommand: &str) -> Command {
        let mut cmd = roost();
        cmd.current_dir(dir)
            .args(["pool", subcommand, "--auth", "address", "--quiet"])
            .args(["--catalog", &format!("127.0.0.1:{}", self.catalog_port)]);
        cmd
    }

    /// How the report ends a server's name (the catalog names it HOSTNAME:PORT).
    fn suffix(&self, i: usize) -> String {
        format!(":{}", self.servers[i].server.port)
    }
}

#[test]
fn a_bag_of_tasks_runs_across_the_catalogs_servers_and_brings_back_each_output() {
    let pool = Pool::start(3);
    let work = tempfile::tempdir().unwrap();
    bag(work.path(), 12, "0.2");
    let out = pool
        .command(work.path(), "run")
        .args(["tasks", "--json"])
        .output()
        .unwrap();
    succeeded(&out);
    check_outputs(work.path(), 12);
    let r = report(&out);
    assert_eq!(int(&r, "tasks_done"), 12);
    let hosts = done_by_host(&r);
    assert_eq!(hosts.len(), 3);
    assert_eq!(hosts.iter().map(|h| h.1).sum::<i64>(), 12);
    assert!(
        hosts.iter().all(|h| h.1 >= 2),
        "the work was spread: {hosts:?}"
    );
    for t in array(&r, "tasks") {
        assert_eq!(int(t, "attempts"), 1, "{}", t.to_json());
    }
    // The runs' staging directories are gone from the servers.
    for s in &pool.servers {
        let left: Vec<_> = std::fs::read_dir(s.server.root().join("roost-pool"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != ".__acl")
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }
    // The table for people names every host and the total.
    let out = pool
        .command(work.path(), "run")
        .arg("tasks")
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.starts_with("HOST"), "{table}");
    assert!(
        table.contains(&pool.suffix(0)) && table.contains("12/12 tasks done"),
        "{table}"
    );
}

#[test]
fn templates_failures_and_mistakes() {
    let pool = Pool::start(2);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    for name in ["a", "b", "c"] {
        std::fs::write(w.join(format!("{name}.txt")), format!("{name}\n{name}\n")).unwrap();
    }
    let out = pool
        .command(w, "run")
        .args([
            "--command",
            "wc -l < {} > {.}.n",
            "--output",
            "{.}.n",
            "--output-dir",
            "counts",
        ])
        .args(["a.txt", "b.txt", "c.txt"])
        .output()
        .unwrap();
    succeeded(&out);
    for name in ["a", "b", "c"] {
        assert_eq!(
            std::fs::read_to_string(w.join(format!("counts/{name}.n"))).unwrap(),
            "2\n"
        );
    }
    // A task that fails everywhere: tried on both hosts (retries 1), then given up with its
    // reason; the other task is done; exit status 1.
    std::fs::write(
        w.join("mixed"),
        "ok.out : a.txt : cat a.txt > ok.out\nbad.out : : echo broken >&2; exit 3\n",
    )
    .unwrap();
    let out = pool
        .command(w, "run")
        .args(["mixed", "--retries", "1", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("line 2: failed: exit 3; its standard error ends: broken (failed 2 times)"),
        "{stderr}"
    );
    let r = report(&out);
    let tasks = array(&r, "tasks");
    assert_eq!(tasks[0].get("status").unwrap().to_plain(), "done");
    assert_eq!(int(&tasks[1], "attempts"), 2);
    assert_eq!(std::fs::read_to_string(w.join("ok.out")).unwrap(), "a\na\n");
    assert!(!w.join("bad.out").exists());
    // A bad task file: exit status 2 and the line.
    std::fs::write(w.join("broken"), "a : b : c\n\nout : in\n").unwrap();
    let out = pool.command(w, "run").arg("broken").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "roost pool: broken: line 3: expected OUTPUTS : INPUTS : COMMAND (two colons outside quotes)"
    );
    // An input that does not exist is named before anything runs.
    std::fs::write(w.join("missing"), "o : nowhere.txt : true\n").unwrap();
    let out = pool.command(w, "run").arg("missing").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("line 1: input nowhere.txt"));
    // No catalog: exit status 1.
    let out = roost()
        .current_dir(w)
        .args([
            "pool",
            "run",
            "--catalog",
            "127.0.0.1:1",
            "--quiet",
            "mixed",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_server_killed_mid_run_loses_nothing_and_no_output_comes_twice() {
    let mut pool = Pool::start(3);
    let work = tempfile::tempdir().unwrap();
    bag(work.path(), 12, "0.6");
    let victim = 1;
    let child = pool.start_run(work.path(), &[]);
    // Wait until the victim runs a task, then kill it.
    pool.wait_busy(victim);
    let pid = pool.servers[victim].server.pid();
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let out = child.wait_with_output().unwrap();
    succeeded(&out);
    assert!(!pool.servers[victim].server.alive());
    check_outputs(work.path(), 12);
    let r = report(&out);
    let hosts = array(&r, "hosts");
    let dead = hosts
        .iter()
        .find(|h| {
            h.get("host")
                .unwrap()
                .to_plain()
                .ends_with(&pool.suffix(victim))
        })
        .unwrap();
    assert!(int(dead, "lost") >= 1, "{}", dead.to_json());
    assert!(
        !matches!(dead.get("down"), Some(Value::Null) | None),
        "{}",
        dead.to_json()
    );
    assert_eq!(
        done_by_host(&r).iter().map(|h| h.1).sum::<i64>(),
        12,
        "each task counted once"
    );
    let retried = array(&r, "tasks")
        .iter()
        .filter(|t| int(t, "attempts") > 1)
        .count();
    assert!(retried >= 1, "the lost task ran again elsewhere");
}

/// `--verify`: a sample of the tasks runs again on another host and the outputs are
/// compared. One of three servers computes wrong (its tasks append a line when they run
/// there, as a host that lies or is broken would): every disagreement names it and one
/// honest host, never two honest ones, and the exit status is 1; on honest hosts alone the
/// checks agree and the run succeeds.
#[test]
fn verify_runs_a_sample_twice_and_names_the_hosts_that_disagree() {
    let pool = Pool::start(3);
    let liar = pool.servers[2].server.port;
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let mut tasks = String::new();
    for i in 0..6 {
        tasks.push_str(&format!(
            "out/{i}.txt=result : : echo {i} > result; case \"$CHIRP_HOST\" in *{liar}) echo wrong >> result;; esac\n"
        ));
    }
    std::fs::write(w.join("tasks"), &tasks).unwrap();
    let out = pool
        .command(w, "run")
        .args(["tasks", "--json", "--verify", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let r = report(&out);
    assert_eq!(int(&r, "tasks_done"), 6, "{stderr}");
    let v = r.get("verify").unwrap();
    assert_eq!(int(v, "sampled"), 6);
    let disagreements = array(v, "disagreements");
    assert!(!disagreements.is_empty(), "{}", v.to_json());
    assert_eq!(
        int(v, "agreed") as usize + disagreements.len() + array(v, "unchecked").len(),
        6
    );
    for d in disagreements {
        let hosts: Vec<String> = array(d, "hosts").iter().map(Value::to_plain).collect();
        let liars = hosts
            .iter()
            .filter(|h| h.ends_with(&format!(":{liar}")))
            .count();
        assert_eq!(liars, 1, "{}", d.to_json());
        let task = d.get("task").unwrap().to_plain();
        assert!(
            stderr.contains(&format!(
                "{task}: {} and {} disagree on",
                hosts[0], hosts[1]
            )),
            "{stderr}"
        );
    }
    let left: Vec<_> = std::fs::read_dir(w)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".roost-verify"))
        .collect();
    assert!(left.is_empty(), "the checks' outputs are removed: {left:?}");
    // The honest hosts alone: half the tasks checked, all agree.
    let honest = tempfile::tempdir().unwrap();
    std::fs::write(honest.path().join("tasks"), &tasks).unwrap();
    let mut cmd = roost();
    cmd.current_dir(honest.path())
        .args([
            "pool", "run", "--auth", "address", "--quiet", "tasks", "--json",
        ])
        .args(["--verify", "0.5"]);
    for s in &pool.servers[..2] {
        cmd.args(["--server", &format!("127.0.0.1:{}", s.server.port)]);
    }
    let out = cmd.output().unwrap();
    succeeded(&out);
    let v = report(&out).get("verify").unwrap().clone();
    assert_eq!(
        (int(&v, "sampled"), int(&v, "agreed")),
        (3, 3),
        "{}",
        v.to_json()
    );
    for i in 0..6 {
        let text = std::fs::read_to_string(honest.path().join(format!("out/{i}.txt"))).unwrap();
        assert_eq!(text, format!("{i}\n"));
    }
    // A fraction out of range is a bad option.
    let out = pool
        .command(w, "run")
        .args(["tasks", "--verify", "1.5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--verify 1.5"));
}

/// Task files whose tasks each write where they ran (their sandbox) and when they ended.
fn where_and_when(dir: &Path, n: usize) {
    let mut tasks = String::new();
    for i in 0..n {
        tasks.push_str(&format!(
            "out/{i}.txt=result : : sleep 0.4; pwd -P > result; date +%s.%N >> result\n"
        ));
    }
    std::fs::write(dir.join("tasks"), tasks).unwrap();
}

/// For each output: the server whose job directory ran it, and when it ended (Unix s).
fn ran_where_and_when(dir: &Path, n: usize, pool: &Pool) -> Vec<(usize, f64)> {
    (0..n)
        .map(|i| {
            let text = std::fs::read_to_string(dir.join(format!("out/{i}.txt"))).unwrap();
            let (sandbox, ended) = text.trim().split_once('\n').unwrap();
            let server = pool
                .servers
                .iter()
                .position(|s| {
                    let root = s.job_root.path().canonicalize().unwrap();
                    Path::new(sandbox).starts_with(root)
                })
                .unwrap_or_else(|| panic!("task {i} ran in {sandbox}"));
            (server, ended.parse().unwrap())
        })
        .collect()
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The report's entry for server `i`.
fn host_entry<'a>(r: &'a Value, pool: &Pool, i: usize) -> &'a Value {
    array(r, "hosts")
        .iter()
        .find(|h| h.get("host").unwrap().to_plain().ends_with(&pool.suffix(i)))
        .unwrap_or_else(|| panic!("no host {i} in {}", r.to_json()))
}

fn changes(host: &Value) -> Vec<String> {
    array(host, "changes")
        .iter()
        .map(|c| c.get("change").unwrap().to_plain())
        .collect()
}

#[test]
fn a_run_follows_the_catalog_taking_back_a_restarted_server_and_taking_on_a_new_one() {
    let supervised: &[&str] = &["--supervise", "--restart-delay", "0.2"];
    let mut pool = Pool::start_with(&[&[], supervised]);
    let work = tempfile::tempdir().unwrap();
    let n = 24;
    where_and_when(work.path(), n);
    let child = pool.start_run(work.path(), &["--follow-interval", "0.3"]);
    // The victim's server (not its supervisor) is killed while it runs a task.
    let victim = 1;
    pool.wait_busy(victim);
    let catalog_port = pool.catalog_port;
    let reports = |port: u16| {
        roost_catalog::query("127.0.0.1", catalog_port, Duration::from_secs(5))
            .unwrap()
            .iter()
            .find(|r| r.get("port").and_then(Value::as_i64) == Some(i64::from(port)))
            .and_then(|r| r.get("reports").and_then(Value::as_i64))
            .unwrap()
    };
    let victim_port = pool.servers[victim].server.port;
    let server = roost_testkit::pool::server_of(pool.servers[victim].server.pid());
    unsafe { libc::kill(server, libc::SIGKILL) };
    let killed_at = unix_now();
    let reported = reports(victim_port);
    // A server that starts now joins the run.
    pool.add(&[]);
    let joiner = 2;
    pool.wait_busy(joiner);
    // The restarted server reports at once; a few of the run's looks at the catalog later
    // it has been taken back.
    roost_testkit::pool::wait_for(
        "the restarted server's report",
        Duration::from_secs(10),
        || reports(victim_port) > reported,
    );
    std::thread::sleep(Duration::from_millis(1500));
    // Then the catalog goes: the run goes on with the hosts it has.
    let _ = pool.catalog.0.kill();
    let _ = pool.catalog.0.wait();
    let out = child.wait_with_output().unwrap();
    succeeded(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    let r = report(&out);
    assert_eq!(int(&r, "tasks_done"), n as i64);
    let ran = ran_where_and_when(work.path(), n, &pool);
    let after = |i: usize| {
        ran.iter()
            .filter(|(s, t)| *s == i && *t > killed_at)
            .count()
    };
    assert!(
        after(victim) >= 1,
        "the restarted server ran tasks again: {ran:?}"
    );
    assert!(after(joiner) >= 1, "the new server ran tasks: {ran:?}");
    let victim_changes = changes(host_entry(&r, &pool, victim));
    assert!(
        victim_changes.len() == 2
            && victim_changes[0].starts_with("down (")
            && victim_changes[1] == "back",
        "{victim_changes:?}"
    );
    assert_eq!(changes(host_entry(&r, &pool, joiner)), ["joined"]);
    assert!(int(host_entry(&r, &pool, victim), "lost") >= 1);
    // Each change logged once, the catalog's silence once.
    let suffix = |i: usize| pool.suffix(i);
    let lines = |what: &str| stderr.lines().filter(|l| l.contains(what)).count();
    assert_eq!(
        lines(&format!("{}: left the run: ", suffix(victim))),
        1,
        "{stderr}"
    );
    assert_eq!(
        lines(&format!(
            "{}: reported to the catalog again since it left: taken back",
            suffix(victim)
        )),
        1,
        "{stderr}"
    );
    assert_eq!(
        lines(&format!("{}: joined the pool: taken on", suffix(joiner))),
        1,
        "{stderr}"
    );
    assert_eq!(lines("the catalog does not answer"), 1, "{stderr}");
}

#[test]
fn complib_on_the_pool_scores_as_the_scalar_reference() {
    let pool = Pool::start(3);
    let work = tempfile::tempdir().unwrap();
    let out = pool
        .command(work.path(), "complib")
        .args([
            "--scale",
            "0.005",
            "--calibrate",
            "0.2",
            "--verify",
            "all",
            "--json",
        ])
        .args([
            "--work",
            "cl",
            "--program",
            env!("CARGO_BIN_EXE_roost-align"),
        ])
        .output()
        .unwrap();
    succeeded(&out);
    let r = report(&out);
    let (queries, targets) = roost_align::generate::complib_scaled(0.005);
    assert_eq!(int(&r, "verified") as usize, queries.len() * targets.len());
    assert_eq!(int(&r, "mismatches"), 0);
    let cells = roost_align::fasta::residues(&queries) * roost_align::fasta::residues(&targets);
    assert_eq!(int(&r, "cells") as u64, cells);
    assert!(r.get("efficiency").and_then(Value::as_f64).unwrap() > 0.0);
    // The gathered table, checked here too against the reference.
    let text = std::fs::read_to_string(work.path().join("cl/complib.scores")).unwrap();
    let table = roost_align::search::parse_table(&text).unwrap();
    assert_eq!(table.rows.len(), targets.len());
    let scoring = roost_align::Scoring::default();
    for (t, (name, scores)) in table.rows.iter().enumerate() {
        assert_eq!(name, &targets[t].name);
        let target = roost_align::matrix::encode(&targets[t].residues);
        for (q, &score) in scores.iter().enumerate() {
            let query = roost_align::matrix::encode(&queries[q].residues);
            assert_eq!(
                score,
                roost_align::scalar::score(&query, &target, &scoring),
                "{name} {q}"
            );
        }
    }
    let standalone = array(&r, "standalone_cups");
    assert_eq!(standalone.len(), 3);
    assert!(standalone
        .iter()
        .all(|s| s.as_f64().is_some_and(|v| v > 0.0)));
}

#[test]
fn eight_hosts_in_network_namespaces_and_one_cut_off_mid_run() {
    if !peer::namespaces() {
        return;
    }
    let mut hosts = roost_testkit::netns::Hosts::create(8, 77);
    let outside = hosts.outside();
    // Reports signed in each namespace for its own address, checked by the catalog outside.
    let keys = tempfile::tempdir().unwrap();
    let key = roost_testkit::pool::catalog_key(keys.path(), "pool");
    let mut cmd = roost();
    cmd.args(["catalog", "--port", "0", "--listen", &outside]);
    cmd.args(["--catalog-key", &key]);
    let (_catalog, catalog_port) = start_announcing(cmd);
    let catalog = format!("{outside}:{catalog_port}");
    let exports: Vec<_> = (0..8).map(|_| tempfile::tempdir().unwrap()).collect();
    let job_roots: Vec<_> = (0..8)
        .map(|_| {
            let d = tempfile::tempdir().unwrap();
            std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
            d
        })
        .collect();
    for k in 0..8 {
        let args: Vec<String> = [
            "serve",
            &exports[k].path().display().to_string(),
            "--listen",
            &hosts.addr(k),
            "--port",
            "9094",
            "--jobs",
            "--job-dir",
            &job_roots[k].path().join("jobs").display().to_string(),
            "--acl",
            &format!("address:{outside}=rwldax"),
            "--catalog",
            &catalog,
            "--catalog-interval",
            "1",
            "--catalog-key",
            &key,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        hosts.start_roost(k, &args);
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let records = roost_catalog::query(&outside, catalog_port, Duration::from_secs(5))
            .unwrap_or_default();
        let up: Vec<String> = records
            .iter()
            .filter(|r| r.get("jobs").is_some() && r.get("verified") == Some(&Value::Bool(true)))
            .filter_map(|r| r.get("address").map(Value::to_plain))
            .collect();
        if up.len() == 8 {
            assert!(up.contains(&hosts.addr(7)), "{up:?}");
            break;
        }
        assert!(Instant::now() < deadline, "only {up:?} in the catalog");
        std::thread::sleep(Duration::from_millis(100));
    }
    let work = tempfile::tempdir().unwrap();
    bag(work.path(), 24, "0.4");
    let child = roost()
        .current_dir(work.path())
        .args([
            "pool",
            "run",
            "--auth",
            "address",
            "--quiet",
            "--timeout",
            "3",
        ])
        .args(["--catalog", &catalog, "tasks", "--json", "--no-speculate"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Cut host 5 off while it runs a task: its packets vanish, so only the client's timeout
    // tells it the host is gone.
    let victim = 5;
    let sandboxes = job_roots[victim].path().join("jobs/sandboxes");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_dir(&sandboxes).map_or(true, |mut d| d.next().is_none()) {
        assert!(
            Instant::now() < deadline,
            "no task ever ran on host {victim}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    roost_testkit::netns::ip(&["link", "set", &hosts.link(victim), "down"]);
    let out = child.wait_with_output().unwrap();
    succeeded(&out);
    check_outputs(work.path(), 24);
    let r = report(&out);
    let done = done_by_host(&r);
    assert_eq!(done.len(), 8);
    assert_eq!(done.iter().map(|h| h.1).sum::<i64>(), 24);
    let cut = array(&r, "hosts")
        .iter()
        .find(|h| {
            h.get("host")
                .unwrap()
                .to_plain()
                .starts_with(&hosts.addr(victim))
        })
        .unwrap_or_else(|| panic!("no {} in {}", hosts.addr(victim), r.to_json()));
    assert!(int(cut, "lost") >= 1, "{}", cut.to_json());
    assert!(
        matches!(cut.get("down"), Some(Value::String(_))),
        "{}",
        cut.to_json()
    );
}
