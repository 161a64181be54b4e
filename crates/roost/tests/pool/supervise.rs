//! Supervision (issue 13, item 5) with real processes on 127.0.0.1: `roost serve --supervise`
//! restarts a server killed with SIGKILL on the same port with its export, ACLs and ledger,
//! the catalog hears from it at once, clients reconnect (roost's client library and `roost
//! run`); a crash loop backs off; SIGTERM stops both; a server that cannot start at all is
//! not restarted.

use roost_catalog::json::Value;
use roost_server::accounting::ledger;
use roost_server::accounting::record::Kind;
use roost_testkit::pool::{
    catalog_records, children, hmac_client, key_file, keys, server_of, start_catalog, wait_for,
};
use roost_testkit::run::{announced, roost, Proc};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `roost serve DIR --supervise` with quick restarts, keys for alice, bob and acct, an ACL
/// giving alice rwl, its log in `log`.
fn supervised(dir: &Path, export: &Path, log: &Path, extra: &[&str]) -> (Proc, u16) {
    let mut cmd = roost();
    cmd.arg("serve")
        .arg(export)
        .args(["--supervise", "--restart-delay", "0.2"])
        .args(["--listen", "127.0.0.1", "--port", "0", "--auth", "hmac"])
        .args(keys(dir, &["alice", "bob", "acct"]))
        .args(["--acl", "hmac:alice=rwl", "--acl", "hmac:acct=la"])
        .arg("--ledger")
        .arg(dir.join("ledger"))
        .args(extra)
        .stderr(std::fs::File::create(log).unwrap());
    announced(cmd)
}

fn alive(pid: i32) -> bool {
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Waits for `proc` to exit; its status code.
fn exit_code(proc: &mut Proc, within: Duration) -> Option<i32> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = proc.0.try_wait().unwrap() {
            return status.code();
        }
        assert!(Instant::now() < deadline, "still running after {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn reports_of(catalog: u16, port: u16) -> i64 {
    catalog_records(catalog)
        .iter()
        .find(|r| r.get("port").and_then(Value::as_i64) == Some(port.into()))
        .and_then(|r| r.get("reports").and_then(Value::as_i64))
        .unwrap_or(0)
}

#[test]
fn a_killed_server_comes_back_with_its_files_acls_and_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let export = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let (_catalog, catalog) = start_catalog(&[]);
    // Reports every 30 s: a prompt report after the restart comes from the restart itself.
    let catalog_arg = format!("127.0.0.1:{catalog}");
    let (mut supervisor, port) = supervised(
        dir.path(),
        export.path(),
        &log,
        &["--catalog", &catalog_arg, "--catalog-interval", "30"],
    );
    let data = b"kept across restarts\n".to_vec();
    let mut alice = hmac_client(port, "alice");
    alice
        .putfile("/keep", 0o644, data.len() as u64, &mut &data[..])
        .unwrap();
    wait_for("the first report", Duration::from_secs(5), || {
        reports_of(catalog, port) >= 1
    });
    let reports = reports_of(catalog, port);
    let first = server_of(supervisor.0.id());

    // roost run reads the file, the server is killed, roost run reads it again.
    let mark = dir.path().join("read-once");
    let url = format!("/chirp/127.0.0.1:{port}/keep");
    let run = roost()
        .args(["run", "--", "sh", "-c"])
        .arg(format!(
            "cat {url} > /dev/null && touch {} && sleep 2 && cat {url}",
            mark.display()
        ))
        .env(
            "ROOST_HMAC_KEY",
            format!("alice={}", key_file(dir.path(), "alice").display()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("roost run's first read", Duration::from_secs(10), || {
        mark.exists()
    });

    let killed = Instant::now();
    unsafe { libc::kill(first, libc::SIGKILL) };
    let mut second = 0;
    wait_for("a new server", Duration::from_secs(5), || {
        second = children(supervisor.0.id()).first().copied().unwrap_or(0);
        second != 0 && second != first
    });
    // The old connection is gone; a new one reaches the same port, export and ACL.
    assert!(alice.getfile("/keep", &mut Vec::new()).is_err());
    let mut back = Vec::new();
    wait_for("the port to answer again", Duration::from_secs(5), || {
        alice.reconnect().is_ok()
    });
    let restarted_in = killed.elapsed();
    alice.getfile("/keep", &mut back).unwrap();
    assert_eq!(back, data);
    let mut bob = hmac_client(port, "bob");
    assert!(
        bob.getfile("/keep", &mut Vec::new()).is_err(),
        "the ACL holds"
    );
    let reported_in = wait_for(
        "a report from the new server",
        Duration::from_secs(5),
        || reports_of(catalog, port) > reports,
    );
    eprintln!(
        "restarted and answering after {restarted_in:?}; reported again {reported_in:?} later"
    );
    let out = run.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, data, "roost run reconnected");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("event=server-died") && text.contains("cause=\"killed by SIGKILL\""),
        "{text}"
    );

    // Usage after the restart reaches the ledger when the supervisor is stopped, well
    // before the interval (60 s) is up.
    alice
        .putfile("/more", 0o644, 555, &mut &[b'm'; 555][..])
        .unwrap();
    drop(alice);
    std::thread::sleep(Duration::from_millis(200));
    unsafe { libc::kill(supervisor.0.id() as i32, libc::SIGTERM) };
    assert_eq!(exit_code(&mut supervisor, Duration::from_secs(10)), Some(0));
    assert!(!alive(second), "the server stopped with its supervisor");
    let bytes = std::fs::read(dir.path().join("ledger")).unwrap();
    let reading = ledger::read(&bytes);
    assert!(reading.torn.is_none() && reading.corrupt.is_empty());
    let starts = reading
        .records
        .iter()
        .filter(|r| matches!(r.kind, Kind::Start { .. }))
        .count();
    assert_eq!(starts, 2, "one start record per server");
    let written: u64 = reading
        .records
        .iter()
        .filter_map(|r| match &r.kind {
            Kind::Use { user, written, .. } if user == "hmac:alice" => Some(*written),
            _ => None,
        })
        .sum();
    // What the killed server had not yet written (up to an interval) is lost; the rest is
    // there, the new usage included.
    assert!(
        written == 555 || written == 555 + data.len() as u64,
        "{written}"
    );
}

#[test]
fn a_crash_loop_backs_off_and_ends_when_the_server_can_start() {
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("export");
    std::fs::create_dir(&export).unwrap();
    let log = dir.path().join("log");
    let (mut supervisor, port) = supervised(
        dir.path(),
        &export,
        &log,
        &["--restart-max-delay", "0.8", "--healthy-after", "30"],
    );
    // Without its export the server cannot start again: it exits at once, again and again.
    let away = dir.path().join("away");
    std::fs::rename(&export, &away).unwrap();
    unsafe { libc::kill(server_of(supervisor.0.id()), libc::SIGKILL) };
    let deaths = |text: &str| -> Vec<(f64, String)> {
        text.lines()
            .filter(|l| l.contains("event=server-died"))
            .map(|l| {
                let field = |k: &str| {
                    l.split(&format!(" {k}="))
                        .nth(1)
                        .map(|v| match v.strip_prefix('"') {
                            Some(quoted) => quoted.split('"').next().unwrap(),
                            None => v.split(' ').next().unwrap(),
                        })
                        .unwrap()
                        .to_string()
                };
                (field("delay_s").parse().unwrap(), field("cause"))
            })
            .collect()
    };
    wait_for("five deaths", Duration::from_secs(10), || {
        deaths(&std::fs::read_to_string(&log).unwrap()).len() >= 5
    });
    let seen = deaths(&std::fs::read_to_string(&log).unwrap());
    let delays: Vec<f64> = seen.iter().map(|d| d.0).take(5).collect();
    assert_eq!(delays, [0.2, 0.4, 0.8, 0.8, 0.8], "{seen:?}");
    assert_eq!(seen[0].1, "killed by SIGKILL");
    assert!(seen[1..].iter().all(|d| d.1 == "exit status 2"), "{seen:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("cannot export"), "{text}");
    // Once the export is back, the next restart comes up, on the same port.
    std::fs::rename(&away, &export).unwrap();
    wait_for("the server back up", Duration::from_secs(5), || {
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("event=restarted")
    });
    let mut alice = hmac_client(port, "alice");
    assert!(alice.getdir("/").is_ok());
    unsafe { libc::kill(supervisor.0.id() as i32, libc::SIGTERM) };
    assert_eq!(exit_code(&mut supervisor, Duration::from_secs(10)), Some(0));
}

#[test]
fn a_server_that_cannot_start_is_not_restarted() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_roost"))
        .arg("serve")
        .arg(dir.path().join("missing"))
        .args(["--supervise", "--port", "0", "--listen", "127.0.0.1"])
        .arg("--ledger")
        .arg(dir.path().join("ledger"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot export"), "{stderr}");
    assert!(stderr.contains("event=supervise-gave-up"), "{stderr}");
    assert!(started.elapsed() < Duration::from_secs(5));
}
