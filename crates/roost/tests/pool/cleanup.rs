//! What the pool starts is stopped, and what is abandoned is reaped (issue 27 §4.3), with real
//! `roost serve --jobs` servers on 127.0.0.1: a `roost pool run` stopped by SIGTERM or SIGINT
//! kills its jobs and removes its run directories; `roost job run` kills the job it gives up
//! on, and waits as long as a job runs whatever its `--timeout`; a server restarted after a
//! run was killed outright reaps the run's job records and directory after `--reap-after`.

use roost_testkit::jobs::JobServer;
use roost_testkit::pool::wait_for;
use roost_testkit::run::{announced, processes_with, roost};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

/// A task file of `n` tasks that each sleep long, `marker` in their command lines.
fn sleepers(dir: &Path, n: usize, marker: &str) {
    let mut tasks = String::new();
    for i in 0..n {
        tasks.push_str(&format!(
            "out/{i}.txt=result : : sleep {marker}; echo {i} > result\n"
        ));
    }
    std::fs::write(dir.join("tasks"), tasks).unwrap();
}

/// `roost pool run` of `dir/tasks` on `servers`, under way.
fn start_run(dir: &Path, servers: &[u16], extra: &[&str]) -> Child {
    let mut cmd = roost();
    cmd.current_dir(dir)
        .args(["pool", "run", "--auth", "address", "--quiet", "--json"]);
    for port in servers {
        cmd.args(["--server", &format!("127.0.0.1:{port}")]);
    }
    cmd.args(extra)
        .arg("tasks")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The job records a job directory holds.
fn job_records(job_dir: &Path) -> Vec<String> {
    std::fs::read_dir(job_dir.join("state"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".json"))
                .collect()
        })
        .unwrap_or_default()
}

/// What is in an export's `/roost-pool`, but its ACL file.
fn run_dirs(export: &Path) -> Vec<String> {
    std::fs::read_dir(export.join("roost-pool"))
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n != ".__acl")
                .collect()
        })
        .unwrap_or_default()
}

fn has_entries(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some())
}

/// Waits for `child` to exit, at most `most`; its output.
fn exits_within(mut child: Child, most: Duration) -> std::process::Output {
    wait_for("the command to exit", most, || {
        child.try_wait().unwrap().is_some()
    });
    child.wait_with_output().unwrap()
}

#[test]
fn a_pool_run_stopped_by_sigterm_or_sigint_kills_its_jobs_and_removes_its_files() {
    let servers = [JobServer::one_at_a_time(&[]), JobServer::one_at_a_time(&[])];
    let ports: Vec<u16> = servers.iter().map(|s| s.server.port).collect();
    for (signal, code, marker) in [
        (libc::SIGTERM, 143, "301.25"),
        (libc::SIGINT, 130, "301.75"),
    ] {
        let work = tempfile::tempdir().unwrap();
        sleepers(work.path(), 6, marker);
        let child = start_run(work.path(), &ports, &[]);
        for s in &servers {
            let sandboxes = s.job_root.path().join("jobs/sandboxes");
            wait_for("a task on each server", Duration::from_secs(20), || {
                has_entries(&sandboxes)
            });
        }
        assert!(!processes_with(marker).is_empty());
        unsafe { libc::kill(child.id() as i32, signal) };
        let out = exits_within(child, Duration::from_secs(15));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{stderr}");
        assert!(
            stderr.contains("the run's jobs were killed and its files removed"),
            "{stderr}"
        );
        for s in &servers {
            assert!(
                job_records(&s.job_root.path().join("jobs")).is_empty(),
                "jobs left on a server: {:?}",
                job_records(&s.job_root.path().join("jobs"))
            );
            assert!(
                run_dirs(s.server.root()).is_empty(),
                "{:?}",
                run_dirs(s.server.root())
            );
        }
        wait_for("every task's process gone", Duration::from_secs(5), || {
            processes_with(marker).is_empty()
        });
        assert!(
            !work.path().join("out").exists(),
            "no output of a killed task"
        );
    }
}

#[test]
fn roost_job_run_waits_past_its_timeout_and_kills_the_job_it_is_stopped_on() {
    let s = JobServer::one_at_a_time(&[]);
    let work = tempfile::tempdir().unwrap();
    let description = |script: &str| {
        let file = work.path().join("job.json");
        std::fs::write(
            &file,
            format!(r#"{{"executable":"/bin/sh","arguments":["sh","-c","{script}"],"files":[]}}"#),
        )
        .unwrap();
        file
    };
    let job_run = |file: &Path, extra: &[&str]| {
        let mut cmd = roost();
        cmd.args(["job", "run", "--auth", "address"])
            .args(extra)
            .arg(format!("chirp://127.0.0.1:{}", s.server.port))
            .arg(file);
        cmd
    };
    // A job longer than the reply timeout: waited for (it used to time out and be left).
    let file = description("sleep 3.5; exit 7");
    let out = job_run(&file, &["--timeout", "2"]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(job_records(&s.job_root.path().join("jobs")).is_empty());
    // Given up on (--wait): killed and reaped.
    let file = description("sleep 302.5");
    let out = job_run(&file, &["--wait", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("killed"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(job_records(&s.job_root.path().join("jobs")).is_empty());
    // Stopped by SIGTERM while it waits: the job is killed and reaped, the exit status 143.
    let file = description("sleep 303.5");
    let child = job_run(&file, &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the job running", Duration::from_secs(10), || {
        !processes_with("303.5").is_empty()
    });
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = exits_within(child, Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(143),
        "{stderr}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(stderr.contains("stopped by SIGTERM: job"), "{stderr}");
    assert!(job_records(&s.job_root.path().join("jobs")).is_empty());
    for marker in ["302.5", "303.5"] {
        wait_for("the jobs' processes gone", Duration::from_secs(5), || {
            processes_with(marker).is_empty()
        });
    }
}

/// A `roost serve --jobs` on 127.0.0.1 over `export` and `root/jobs`, its log in
/// `root/serve.log`.
fn start_server(export: &Path, root: &Path, extra: &[&str]) -> (roost_testkit::run::Proc, u16) {
    let mut cmd = roost();
    cmd.arg("serve")
        .arg(export)
        .args(["--listen", "127.0.0.1", "--port", "0", "--jobs"])
        .arg("--job-dir")
        .arg(root.join("jobs"))
        .arg("--ledger")
        .arg(root.join("ledger"))
        .args(["--acl", "address:127.0.0.1=rwldax"])
        .args(extra)
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(root.join("serve.log"))
                .unwrap(),
        );
    announced(cmd)
}

#[test]
fn a_restarted_server_reaps_the_jobs_and_run_directory_of_a_run_killed_outright() {
    let root = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        root.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o711),
    )
    .unwrap();
    let export = root.path().join("export");
    std::fs::create_dir(&export).unwrap();
    let reap = ["--reap-after", "3"];
    let (server, port) = start_server(&export, root.path(), &reap);
    let work = tempfile::tempdir().unwrap();
    sleepers(work.path(), 3, "304.25");
    let mut run = start_run(work.path(), &[port], &["--queue", "0"]);
    let sandboxes = root.path().join("jobs/sandboxes");
    wait_for("a task running", Duration::from_secs(20), || {
        has_entries(&sandboxes)
    });
    // The run is killed outright: it cleans up nothing. Then the server dies too.
    run.kill().unwrap();
    run.wait().unwrap();
    drop(server);
    assert_eq!(run_dirs(&export).len(), 1);
    assert_eq!(job_records(&root.path().join("jobs")).len(), 1);
    // Restarted, it reports the job ERRORED and keeps it for whoever asks; nobody does.
    let (_server, _port) = start_server(&export, root.path(), &reap);
    wait_for(
        "the abandoned job and run directory reaped",
        Duration::from_secs(20),
        || job_records(&root.path().join("jobs")).is_empty() && run_dirs(&export).is_empty(),
    );
    let log = std::fs::read_to_string(root.path().join("serve.log")).unwrap();
    assert!(
        log.contains("event=job-abandoned") && log.contains("status=ERRORED"),
        "{log}"
    );
    assert!(
        log.contains("event=run-abandoned path=/roost-pool/"),
        "{log}"
    );
    // The export's other files are the owner's: untouched.
    assert!(export.join("roost-pool").is_dir());
}
