//! `roost pool run --slurm` (issue 13, item 9) against a real Slurm: a one-node cluster on
//! this host (slurmctld, slurmd and munged started by the test, see `slurm_support`), and
//! `roost serve` servers on 127.0.0.1 holding the run's files. The same bag of tasks run by
//! Slurm, each task under `roost run` with its files mounted from the server, must bring
//! back what roost's own scheduler brings back; failed tasks are submitted again and
//! reported as the built-in scheduler reports them; Slurm that cannot be used is said so.

use roost_catalog::json::Value;
use roost_testkit::bag::*;
use roost_testkit::jobs::JobServer;
use roost_testkit::run::roost;
use roost_testkit::slurm::LocalSlurm;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

/// `roost pool run` in `dir` with its files on `server`, talking to `slurm`'s cluster.
fn pool_run(slurm: &LocalSlurm, dir: &Path, port: u16) -> Command {
    let mut cmd = roost();
    cmd.current_dir(dir)
        .env("SLURM_CONF", &slurm.conf)
        .args(["pool", "run", "--auth", "address", "--quiet"])
        .args(["--server", &format!("127.0.0.1:{port}")]);
    cmd
}

fn text(v: &Value, key: &str) -> String {
    match v.get(key) {
        None | Some(Value::Null) => String::new(),
        Some(v) => v.to_plain(),
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// What is left of the runs' directories on a server.
fn leftovers(root: &Path) -> Vec<String> {
    std::fs::read_dir(root.join("roost-pool"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n != ".__acl")
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_bag_run_by_slurm_brings_back_what_roosts_own_scheduler_does() {
    let slurm = LocalSlurm::start();
    let js = JobServer::one_at_a_time(&[]);
    let port = js.server.port;
    let n = 8;

    let own = tempfile::tempdir().unwrap();
    bag(own.path(), n, "0.1");
    let start = Instant::now();
    let out = pool_run(&slurm, own.path(), port)
        .args(["--slots", "2", "tasks", "--json"])
        .output()
        .unwrap();
    let own_took = start.elapsed();
    succeeded(&out);
    check_outputs(own.path(), n);

    let through = tempfile::tempdir().unwrap();
    bag(through.path(), n, "0.1");
    let start = Instant::now();
    let out = pool_run(&slurm, through.path(), port)
        .args(["--slurm", "--slurm-poll", "0.2", "tasks", "--json"])
        .output()
        .unwrap();
    let took = start.elapsed();
    assert!(out.status.success(), "{}\n{}", stderr(&out), slurm.logs());
    check_outputs(through.path(), n);
    for i in 0..n {
        let name = format!("out/{i}.txt");
        assert_eq!(
            std::fs::read(through.path().join(&name)).unwrap(),
            std::fs::read(own.path().join(&name)).unwrap(),
            "{name}"
        );
    }
    let r = report(&out);
    assert_eq!(int(&r, "tasks_done"), n as i64);
    assert_eq!(done_by_host(&r), [("localhost".to_string(), n as i64)]);
    let jobs = array(&r, "slurm_jobs");
    assert_eq!(jobs.len(), 1, "one array: {}", r.to_json());
    for t in array(&r, "tasks") {
        assert_eq!(int(t, "attempts"), 1, "{}", t.to_json());
        assert_eq!(text(t, "host"), "localhost");
    }
    // Slurm ran them: the controller knows the array's tasks as completed.
    let job = jobs[0].to_plain();
    let shown = slurm
        .command("scontrol")
        .args(["-o", "show", "job", &job])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert_eq!(shown.matches("JobState=COMPLETED").count(), n, "{shown}");
    assert!(
        leftovers(js.server.root()).is_empty(),
        "{:?}",
        leftovers(js.server.root())
    );
    eprintln!(
        "{n} tasks: roost's own scheduler (2 slots) {:.2} s, through Slurm (2 CPUs) {:.2} s",
        own_took.as_secs_f64(),
        took.as_secs_f64()
    );

    // The table for people names the node, the total and the Slurm job.
    let again = tempfile::tempdir().unwrap();
    bag(again.path(), 2, "0");
    let out = pool_run(&slurm, again.path(), port)
        .args(["--slurm", "--slurm-poll", "0.2", "tasks"])
        .output()
        .unwrap();
    succeeded(&out);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.starts_with("HOST"), "{table}");
    assert!(
        table.contains("localhost")
            && table.contains("2/2 tasks done")
            && table.contains("Slurm jobs: "),
        "{table}"
    );
}

#[test]
fn failed_tasks_are_submitted_again_and_reported_and_a_dead_controller_is_named() {
    let mut slurm = LocalSlurm::start();
    let js = JobServer::one_at_a_time(&[]);
    let port = js.server.port;
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    std::fs::write(w.join("in.txt"), "some text\n").unwrap();
    let mark = w.join("tried-once");
    std::fs::write(
        w.join("tasks"),
        format!(
            "ok.txt : in.txt : tr a-z A-Z < in.txt > ok.txt\n\
             flaky.txt : in.txt : if [ -e {m} ]; then cat in.txt > flaky.txt; else touch {m}; echo once >&2; exit 1; fi\n\
             broken.txt : in.txt : echo broken >&2; exit 3\n\
             lazy.txt : in.txt : true\n",
            m = mark.display()
        ),
    )
    .unwrap();
    let out = pool_run(&slurm, w, port)
        .args([
            "--slurm",
            "--slurm-poll",
            "0.2",
            "--retries",
            "2",
            "tasks",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(w.join("ok.txt")).unwrap(),
        "SOME TEXT\n"
    );
    assert_eq!(
        std::fs::read_to_string(w.join("flaky.txt")).unwrap(),
        "some text\n"
    );
    assert!(!w.join("broken.txt").exists() && !w.join("lazy.txt").exists());
    let r = report(&out);
    let tasks: Vec<(String, String, i64, String)> = array(&r, "tasks")
        .iter()
        .map(|t| {
            (
                text(t, "task"),
                text(t, "status"),
                int(t, "attempts"),
                text(t, "error"),
            )
        })
        .collect();
    assert_eq!(
        tasks,
        [
            ("line 1".to_string(), "done".to_string(), 1, String::new()),
            ("line 2".into(), "done".into(), 2, String::new()),
            (
                "line 3".into(),
                "failed".into(),
                3,
                "exit 3; its standard error ends: broken (failed 3 times)".into()
            ),
            (
                "line 4".into(),
                "failed".into(),
                3,
                "it did not make its output lazy.txt (failed 3 times)".into()
            ),
        ],
        "{}",
        r.to_json()
    );
    // All four at first, then each failure again as soon as it is seen (several that end
    // together as one array): 7 failed attempts, 5 of them retried.
    let jobs = array(&r, "slurm_jobs").len();
    assert!((3..=6).contains(&jobs), "{}", r.to_json());
    let host = &array(&r, "hosts")[0];
    assert_eq!((int(host, "done"), int(host, "failed")), (2, 7));
    assert_eq!(int(host, "attempts"), 9);
    assert!(
        stderr(&out)
            .contains("line 3: failed: exit 3; its standard error ends: broken (failed 3 times)"),
        "{}",
        stderr(&out)
    );
    assert!(leftovers(js.server.root()).is_empty());

    // Without a controller, the run stops at once and says what to try.
    slurm.stop_controller();
    let start = Instant::now();
    let out = pool_run(&slurm, w, port)
        .args(["--slurm", "tasks"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(start.elapsed().as_secs_f64() < 5.0, "{:?}", start.elapsed());
    assert!(
        stderr(&out).contains("is slurmctld running? try `scontrol ping`"),
        "{}",
        stderr(&out)
    );
    eprintln!(
        "no controller: {:.1} s: {}",
        start.elapsed().as_secs_f64(),
        stderr(&out)
    );
}

#[test]
fn without_slurms_commands_the_run_says_so_and_options_are_checked() {
    let js = JobServer::one_at_a_time(&[]);
    let work = tempfile::tempdir().unwrap();
    bag(work.path(), 1, "0");
    let server = format!("127.0.0.1:{}", js.server.port);
    let run = |args: &[&str]| {
        roost()
            .current_dir(work.path())
            .env("PATH", "/nonexistent")
            .args(["pool", "run", "--quiet", "--server", &server])
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["--slurm", "tasks"]);
    assert_eq!(out.status.code(), Some(1));
    let said = stderr(&out);
    assert!(
        said.starts_with("roost pool: sbatch not found: --slurm needs Slurm's commands"),
        "{said}"
    );
    for (args, want) in [
        (
            &["--slurm", "--slots", "2", "tasks"][..],
            "cannot be used with",
        ),
        (&["--slurm-partition", "p", "tasks"][..], "--slurm"),
        (
            &["--slurm", "--slurm-poll", "0", "tasks"][..],
            "--slurm-poll 0: expected",
        ),
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
    let help = roost().args(["pool", "run", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for option in [
        "--slurm ",
        "--slurm-partition",
        "--slurm-arg",
        "--slurm-run-arg",
        "--slurm-roost",
        "--slurm-max-running",
        "--slurm-poll",
        "Slurm could not be used",
    ] {
        assert!(help.contains(option), "{option} in {help}");
    }
}
