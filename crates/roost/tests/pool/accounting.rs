//! Accounting (issue 13, item 4) with real servers on 127.0.0.1: the ledgers of `roost serve`
//! against what two users did (bytes exactly, a job's CPU time against what the job itself
//! measured), a ledger through `kill -9`, a torn record and a corrupt one, and `roost
//! accounting` over three servers against hand-computed balances.

use roost_catalog::json::{self, Value};
use roost_client::{Client, OpenFlags};
use roost_server::accounting::ledger;
use roost_server::accounting::record::Kind;
use roost_testkit::pool::{catalog_records, hmac_client, key_file, keys, start_catalog, wait_for};
use roost_testkit::run::{announced, roost, Proc};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A server of the test, its ledger and log in the test's directory.
struct Host {
    proc: Proc,
    port: u16,
    ledger: PathBuf,
    log: PathBuf,
}

/// Starts `roost serve` on `export` with keys for alice, bob and acct (the accountant, who
/// may read the ledger), metering every second unless `extra` says otherwise.
fn serve(dir: &Path, name: &str, export: &Path, extra: &[&str]) -> Host {
    let ledger = dir.join(format!("{name}.ledger"));
    let log = dir.join(format!("{name}.log"));
    let mut cmd = roost();
    cmd.arg("serve")
        .arg(export)
        .args(["--listen", "127.0.0.1", "--port", "0", "--auth", "hmac"])
        .args(keys(dir, &["alice", "bob", "acct"]))
        .args(["--acl", "hmac:alice=rwldx", "--acl", "hmac:bob=rwldx"])
        .args(["--acl", "hmac:acct=la"])
        .args(
            (!extra.contains(&"--accounting-interval"))
                .then_some(["--accounting-interval", "1"])
                .into_iter()
                .flatten(),
        )
        .arg("--ledger")
        .arg(&ledger)
        .args(extra)
        .stderr(std::fs::File::create(&log).unwrap());
    let (proc, port) = announced(cmd);
    Host {
        proc,
        port,
        ledger,
        log,
    }
}

/// `roost accounting` as the accountant, with `args`.
fn accounting(dir: &Path, args: &[&str]) -> Output {
    roost()
        .args(["accounting", "--auth", "hmac", "--key"])
        .arg(format!("acct={}", key_file(dir, "acct").display()))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn parsed(out: &Output) -> Value {
    json::parse(&out.stdout).unwrap_or_else(|e| panic!("{e:?}: {}", text(&out.stdout)))
}

/// The member `name` of the element of array `key` whose `id_key` is `id`.
fn entry<'a>(v: &'a Value, key: &str, id_key: &str, id: &str) -> &'a Value {
    match v.get(key) {
        Some(Value::Array(items)) => items
            .iter()
            .find(|i| i.get(id_key).and_then(Value::as_str) == Some(id))
            .unwrap_or_else(|| panic!("no {id} in {key}: {}", v.to_json())),
        _ => panic!("no {key}: {}", v.to_json()),
    }
}

fn int(v: &Value, key: &str) -> i64 {
    v.get(key)
        .and_then(Value::as_i64)
        .unwrap_or_else(|| panic!("no {key} in {}", v.to_json()))
}

fn float(v: &Value, key: &str) -> f64 {
    v.get(key)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no {key} in {}", v.to_json()))
}

/// `user`'s `use` records in the ledger file (read locally): requests and bytes written.
fn uses_in(ledger_path: &Path, user: &str) -> Vec<(u64, u64)> {
    let bytes = std::fs::read(ledger_path).unwrap_or_default();
    ledger::read(&bytes)
        .records
        .iter()
        .filter_map(|r| match &r.kind {
            Kind::Use {
                user: u,
                rpcs,
                written,
                ..
            } if u == user => Some((*rpcs, *written)),
            _ => None,
        })
        .collect()
}

/// Requests and bytes written by `user`, by the ledger file.
fn totals_in(ledger_path: &Path, user: &str) -> (u64, u64) {
    uses_in(ledger_path, user)
        .iter()
        .fold((0, 0), |(r, w), (rpcs, written)| (r + rpcs, w + written))
}

fn written_in(ledger_path: &Path, user: &str) -> u64 {
    totals_in(ledger_path, user).1
}

/// Runs `script` with `sh -c` as a job of `client`, its `t.out` stored at `output`;
/// waits for it to end.
fn run_job(client: &mut Client, script: &str, output: &str) {
    let mut quoted = String::new();
    json::write_string(script, &mut quoted);
    let description = format!(
        r#"{{"executable":"/bin/sh","arguments":["sh","-c",{quoted}],"files":[{{"task_path":"t.out","serv_path":"{output}","type":"OUTPUT"}}]}}"#
    );
    let id = client.job_create(&description).unwrap();
    client.job_commit(&[id]).unwrap();
    wait_for("the job to end", Duration::from_secs(30), || {
        let answer = client.job_wait(id, 5).unwrap();
        answer.contains("FINISHED")
    });
}

/// Seconds in the output of sh's `times` (shell and children, user and system).
fn times_total(text: &str) -> f64 {
    text.split_whitespace()
        .map(|t| {
            let (m, s) = t.trim_end_matches('s').split_once('m').unwrap();
            m.parse::<f64>().unwrap() * 60.0 + s.parse::<f64>().unwrap()
        })
        .sum()
}

fn job_dir(dir: &Path) -> String {
    // The jobs' user (nobody, under a root server) must reach its sandbox.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o711)).unwrap();
    dir.join("jobs").display().to_string()
}

#[test]
fn io_and_jobs_of_two_users_are_ledgered_as_they_happened() {
    let dir = tempfile::tempdir().unwrap();
    let export = tempfile::tempdir().unwrap();
    let jobs = job_dir(dir.path());
    let host = serve(
        dir.path(),
        "a",
        export.path(),
        &["--jobs", "--job-dir", &jobs, "--storage-interval", "1"],
    );
    let mut alice = hmac_client(host.port, "alice");
    let data = vec![b'a'; 100_000];
    assert_eq!(
        alice
            .putfile("/a.dat", 0o644, 100_000, &mut &data[..])
            .unwrap(),
        100_000
    );
    let mut back = Vec::new();
    assert_eq!(alice.getfile("/a.dat", &mut back).unwrap(), 100_000);
    let mut bob = hmac_client(host.port, "bob");
    let (fd, _) = bob
        .open("/b.dat", OpenFlags::from_letters(b"rwc").unwrap(), 0o644)
        .unwrap();
    assert_eq!(bob.pwrite(fd, &[b'b'; 12_345], 0).unwrap(), 12_345);
    let mut buf = [0u8; 1000];
    assert_eq!(bob.pread(fd, &mut buf, 100).unwrap(), 1000);
    bob.close(fd).unwrap();
    // Bob can neither charge his file to alice nor see whom it is charged to.
    let creator = "user.roost.creator";
    assert!(bob.setxattr("/b.dat", creator, b"hmac:alice", 0).is_err());
    assert!(bob.getxattr("/b.dat", creator).is_err());
    assert!(!bob
        .listxattr("/b.dat")
        .unwrap()
        .contains(&creator.as_bytes().to_vec()));
    // A known busy loop, which measures its own CPU time with sh's `times`.
    let busy = "i=0; while [ $i -lt 1000000 ]; do i=$((i+1)); done; times > t.out";
    run_job(&mut alice, busy, "/times.alice");
    run_job(&mut bob, "echo > t.out", "/times.bob");
    drop((alice, bob));
    let measured =
        times_total(&std::fs::read_to_string(export.path().join("times.alice")).unwrap());
    assert!(measured > 0.3, "the busy loop ran only {measured} s");
    // Alice made at least 5 requests (putfile, getfile, job_create, job_commit, job_wait),
    // Bob at least 10 (open, pwrite, pread, close, three on attributes and the job's).
    wait_for("the usage to be written", Duration::from_secs(10), || {
        let a = totals_in(&host.ledger, "hmac:alice");
        let b = totals_in(&host.ledger, "hmac:bob");
        a.0 >= 5 && b.0 >= 10 && (a.1, b.1) == (100_000, 12_345)
    });
    // Storage is sampled every second: wait for a sample that saw both users' files.
    wait_for("a storage sample", Duration::from_secs(10), || {
        let bytes = std::fs::read(&host.ledger).unwrap();
        let users: Vec<String> = ledger::read(&bytes)
            .records
            .into_iter()
            .filter_map(|r| match r.kind {
                Kind::Storage { user, .. } => Some(user),
                _ => None,
            })
            .collect();
        users.iter().any(|u| u == "hmac:alice") && users.iter().any(|u| u == "hmac:bob")
    });
    let out = accounting(dir.path(), &["--json", &format!("127.0.0.1:{}", host.port)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = parsed(&out);
    let a = entry(&v, "users", "user", "hmac:alice");
    let b = entry(&v, "users", "user", "hmac:bob");
    assert_eq!(
        (int(a, "written_bytes"), int(a, "read_bytes")),
        (100_000, 100_000)
    );
    assert_eq!(
        (int(b, "written_bytes"), int(b, "read_bytes")),
        (12_345, 1000)
    );
    assert_eq!((int(a, "jobs"), int(b, "jobs")), (1, 1));
    assert!(
        int(a, "rpcs") >= 5 && int(b, "rpcs") >= 10,
        "{}",
        v.to_json()
    );
    let cpu = float(a, "cpu_seconds");
    eprintln!("the busy job measured {measured:.3} s of CPU; the ledger says {cpu:.6} s");
    assert!(
        (cpu - measured).abs() <= 0.1 + 0.05 * measured,
        "the ledger says {cpu} s of CPU, the job measured {measured} s"
    );
    assert!(float(b, "cpu_seconds") < 0.1, "{}", b.to_json());
    assert!(int(a, "storage_byte_seconds") > 0 && int(b, "storage_byte_seconds") > 0);
    // The owner (the server's user) offered all of both cores, and guests used some.
    let owners = match v.get("owners") {
        Some(Value::Array(o)) => o.clone(),
        _ => panic!(),
    };
    assert_eq!(owners.len(), 1, "{}", v.to_json());
    assert!(float(&owners[0], "offered_core_hours") > 0.0);
    let used = float(&owners[0], "contributed_cpu_hours") * 3600.0;
    assert!((used - cpu - float(b, "cpu_seconds")).abs() < 1e-6);
    // A user without the a right on / cannot read the ledger.
    let refused = roost()
        .args(["accounting", "--auth", "hmac", "--key"])
        .arg(format!("alice={}", key_file(dir.path(), "alice").display()))
        .arg(format!("127.0.0.1:{}", host.port))
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).contains("'a'"),
        "{}",
        text(&refused.stderr)
    );
}

#[test]
fn the_ledger_survives_kill_9_a_torn_record_and_a_corrupt_one() {
    let dir = tempfile::tempdir().unwrap();
    let export = tempfile::tempdir().unwrap();
    let mut host = serve(dir.path(), "k", export.path(), &[]);
    // Alice writes 10 KiB files as fast as she can; the server is killed under her.
    let stop = Arc::new(AtomicBool::new(false));
    let port = host.port;
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut alice = hmac_client(port, "alice");
            let block = vec![b'x'; 10_240];
            let mut acked = 0u64;
            for n in 0.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                match alice.putfile(format!("/f{}", n % 50), 0o644, 10_240, &mut &block[..]) {
                    Ok(stored) => acked += stored,
                    Err(_) => break,
                }
            }
            acked
        })
    };
    wait_for("two flushes under load", Duration::from_secs(10), || {
        uses_in(&host.ledger, "hmac:alice").len() >= 2
    });
    std::thread::sleep(Duration::from_millis(500));
    host.proc.0.kill().unwrap();
    host.proc.0.wait().unwrap();
    stop.store(true, Ordering::Relaxed);
    let acked = writer.join().unwrap();
    let bytes = std::fs::read(&host.ledger).unwrap();
    let reading = ledger::read(&bytes);
    assert!(
        reading.corrupt.is_empty() && reading.torn.is_none(),
        "{reading:?}"
    );
    let before = written_in(&host.ledger, "hmac:alice");
    assert!(
        before <= acked && before % 10_240 == 0,
        "{before} of {acked}"
    );

    // Corrupt the first use record (one byte) and leave a torn record at the end, as a
    // crash in the middle of a write would.
    let text_before = String::from_utf8(bytes).unwrap();
    let lines: Vec<&str> = text_before.lines().collect();
    let victim = lines.iter().position(|l| l.contains(" use ")).unwrap();
    let lost = match &ledger::read(format!("{}\n", lines[victim]).as_bytes()).records[0].kind {
        Kind::Use { written, .. } => *written,
        other => panic!("{other:?}"),
    };
    let mut damaged: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    damaged[victim] = damaged[victim].replacen("written=", "written=9", 1);
    let mut torn = damaged.join("\n") + "\n";
    torn.push_str("t=1795560000 h=3 use user=hmac:alice rpcs=1 read=0 wri");
    std::fs::write(&host.ledger, &torn).unwrap();

    // A torn last record alone is skipped and said, and is no failure.
    let copy = dir.path().join("copy.ledger");
    let tail_start = torn.rfind('\n').unwrap() + 1;
    let clean_head: String = lines[..victim].iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&copy, clean_head + &torn[tail_start..]).unwrap();
    let out = accounting(dir.path(), &["--json", "--ledger", copy.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&format!(
            "ledger line {}: torn last record skipped",
            victim + 1
        )),
        "{}",
        text(&out.stderr)
    );

    // The restarted server cuts the torn record off and appends after the good ones.
    let host = serve(dir.path(), "k", export.path(), &[]);
    let log = std::fs::read_to_string(&host.log).unwrap();
    assert!(log.contains("event=ledger-torn"), "{log}");
    let mut bob = hmac_client(host.port, "bob");
    bob.putfile("/bob", 0o644, 777, &mut &[b'b'; 777][..])
        .unwrap();
    drop(bob);
    wait_for("bob's usage", Duration::from_secs(10), || {
        written_in(&host.ledger, "hmac:bob") == 777
    });
    let out = accounting(dir.path(), &["--json", &format!("127.0.0.1:{}", host.port)]);
    assert_eq!(out.status.code(), Some(1), "a corrupt record is a failure");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("ledger line {}: checksum mismatch", victim + 1)),
        "{stderr}"
    );
    let v = parsed(&out);
    let server = match v.get("servers") {
        Some(Value::Array(s)) => s[0].clone(),
        _ => panic!(),
    };
    assert_eq!(server.get("torn_line"), Some(&Value::Null));
    let corrupt = entry(
        &server,
        "corrupt",
        "error",
        "checksum mismatch (the record was changed or cut)",
    );
    assert_eq!(int(corrupt, "line"), victim as i64 + 1);
    let alice = entry(&v, "users", "user", "hmac:alice");
    assert!(lost > 0 && before > lost, "{lost} of {before}");
    assert_eq!(int(alice, "written_bytes") as u64, before - lost);
    assert_eq!(
        int(entry(&v, "users", "user", "hmac:bob"), "written_bytes"),
        777
    );
}

#[test]
fn accounting_over_three_servers_prices_by_class_and_hour() {
    let dir = tempfile::tempdir().unwrap();
    let exports: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let fast = serve(
        dir.path(),
        "fast",
        exports[0].path(),
        &["--host-class", "fast", "--owner", "olga"],
    );
    let slow = serve(
        dir.path(),
        "slow",
        exports[1].path(),
        &["--host-class", "slow", "--owner", "oscar"],
    );
    let plain = serve(dir.path(), "plain", exports[2].path(), &["--owner", "bob"]);
    const MIB: usize = 1 << 20;
    std::fs::write(exports[2].path().join("big"), vec![b'z'; MIB]).unwrap();
    hmac_client(fast.port, "alice")
        .putfile("/one", 0o644, MIB as u64, &mut &vec![b'a'; MIB][..])
        .unwrap();
    hmac_client(slow.port, "bob")
        .putfile("/two", 0o644, 2 * MIB as u64, &mut &vec![b'b'; 2 * MIB][..])
        .unwrap();
    let mut sink = Vec::new();
    hmac_client(plain.port, "bob")
        .getfile("/big", &mut sink)
        .unwrap();
    wait_for("the usage to be written", Duration::from_secs(10), || {
        written_in(&fast.ledger, "hmac:alice") == MIB as u64
            && written_in(&slow.ledger, "hmac:bob") == 2 * MIB as u64
            && std::fs::read_to_string(&plain.ledger)
                .unwrap()
                .contains(&format!("read={MIB}"))
    });
    // Prices at another hour than now must not apply.
    let hour: u32 = text(
        &std::process::Command::new("date")
            .arg("+%H")
            .output()
            .unwrap()
            .stdout,
    )
    .trim()
    .parse()
    .unwrap();
    let other = (hour + 2) % 24;
    let prices = dir.path().join("prices");
    std::fs::write(
        &prices,
        format!(
            "# CLASS HOURS RESOURCE PRICE\n\
             *     *     write   1.0\n\
             fast  *     write   3.0\n\
             *     *     read    2.0\n\
             *     {other:02}-{:02} read 100   # not now\n\
             *     *     served  0.5\n\
             slow  *     served  0.25\n",
            other + 1
        ),
    )
    .unwrap();
    let servers: Vec<String> = [&fast, &slow, &plain]
        .iter()
        .map(|h| format!("127.0.0.1:{}", h.port))
        .collect();
    let mut args = vec!["--json", "--prices", prices.to_str().unwrap()];
    args.extend(servers.iter().map(String::as_str));
    let out = accounting(dir.path(), &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = parsed(&out);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
    let k = 1.0 / 1024.0; // a MiB in GiB
    let cost = |user| float(entry(&v, "users", "user", user), "cost");
    assert!(close(cost("hmac:alice"), 3.0 * k), "{}", v.to_json());
    assert!(
        close(cost("hmac:bob"), 2.0 * k + 2.0 * k),
        "{}",
        v.to_json()
    );
    let credit = |owner| float(entry(&v, "owners", "owner", owner), "credit");
    assert!(close(credit("olga"), 0.5 * k));
    assert!(close(credit("oscar"), 2.0 * 0.25 * k));
    assert!(close(credit("bob"), 0.5 * k));
    let balance = |account| float(entry(&v, "accounts", "account", account), "balance");
    assert!(close(balance("alice"), -3.0 * k));
    assert!(
        close(balance("bob"), 0.5 * k - 4.0 * k),
        "user bob and owner bob are one account"
    );
    assert!(close(balance("olga"), 0.5 * k));
    assert!(close(float(&v, "surplus"), 7.0 * k - 1.5 * k));
    // The table says the same.
    let mut args = vec!["--prices", prices.to_str().unwrap()];
    args.extend(servers.iter().map(String::as_str));
    let table = text(&accounting(dir.path(), &args).stdout);
    eprintln!("{table}");
    let line = table.lines().find(|l| l.starts_with("alice ")).unwrap();
    assert!(
        line.contains("-0.0029") && line.ends_with("deficit"),
        "{table}"
    );
    assert!(table.contains("system surplus +0.0054"), "{table}");
    // A bad price file names its line and changes nothing.
    std::fs::write(&prices, "* * write 1\n* * cpux 2\n").unwrap();
    let out = accounting(
        dir.path(),
        &["--prices", prices.to_str().unwrap(), &servers[0]],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("line 2: resource \"cpux\""),
        "{}",
        text(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn accounting_from_the_catalog_skips_the_hosts_it_shows_down() {
    let dir = tempfile::tempdir().unwrap();
    let exports: Vec<tempfile::TempDir> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let (_catalog, catalog) = start_catalog(&["--down-after", "1"]);
    let report = format!("127.0.0.1:{catalog}");
    let reporting = ["--catalog", &report, "--catalog-interval", "1"];
    let live = serve(dir.path(), "live", exports[0].path(), &reporting);
    let mut dead = serve(dir.path(), "dead", exports[1].path(), &reporting);
    hmac_client(live.port, "alice")
        .putfile("/x", 0o644, 3, &mut &b"abc"[..])
        .unwrap();
    wait_for("alice's usage", Duration::from_secs(10), || {
        written_in(&live.ledger, "hmac:alice") == 3
    });
    let state = |port: u16| {
        catalog_records(catalog)
            .iter()
            .find(|r| r.get("port").and_then(Value::as_i64) == Some(port.into()))
            .and_then(|r| r.get("state").map(Value::to_plain))
    };
    wait_for("both listed", Duration::from_secs(5), || {
        state(live.port).is_some() && state(dead.port).is_some()
    });
    dead.proc.0.kill().unwrap();
    dead.proc.0.wait().unwrap();
    wait_for("the dead one shown down", Duration::from_secs(10), || {
        state(dead.port).as_deref() == Some("down")
    });
    let out = accounting(dir.path(), &["--json", "--catalog", &report]);
    assert_eq!(out.status.code(), Some(1), "a host down is a host not read");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "127.0.0.1:{}: down in the catalog, skipped",
            dead.port
        )),
        "{stderr}"
    );
    let v = parsed(&out);
    assert_eq!(
        int(entry(&v, "users", "user", "hmac:alice"), "written_bytes"),
        3
    );
    match v.get("servers") {
        Some(Value::Array(servers)) => assert_eq!(servers.len(), 1, "{}", v.to_json()),
        other => panic!("{other:?}"),
    }
}

/// The `offer` records of a ledger file: (time, secs, cores, cpu_pct).
fn offers_in(ledger_path: &Path) -> Vec<(i64, u64, u64, u64)> {
    let bytes = std::fs::read(ledger_path).unwrap_or_default();
    ledger::read(&bytes)
        .records
        .iter()
        .filter_map(|r| match r.kind {
            Kind::Offer {
                secs,
                cores,
                cpu_pct,
                ..
            } => Some((r.time, secs, cores, cpu_pct)),
            _ => None,
        })
        .collect()
}

#[test]
fn the_thermostat_s_limits_are_the_owner_s_offer() {
    let dir = tempfile::tempdir().unwrap();
    let export = tempfile::tempdir().unwrap();
    let jobs = job_dir(dir.path());
    let schedule = dir.path().join("schedule");
    std::fs::write(&schedule, "default cpu 50%\n").unwrap();
    let host = serve(
        dir.path(),
        "t",
        export.path(),
        &[
            "--jobs",
            "--job-dir",
            &jobs,
            "--thermostat",
            schedule.to_str().unwrap(),
            "--thermostat-mechanism",
            "loop",
            "--accounting-interval",
            "3",
        ],
    );
    wait_for("an offer at 50%", Duration::from_secs(10), || {
        offers_in(&host.ledger).iter().any(|o| o.3 == 50)
    });
    let set = roost()
        .args(["thermostat", "set", "30%", "--job-dir", &jobs])
        .output()
        .unwrap();
    assert!(set.status.success(), "{}", text(&set.stderr));
    // The change closes the 50% period at once (within the thermostat's and the meter's
    // rereads, 2 s), not at the end of the 3 s interval.
    let before = offers_in(&host.ledger).len();
    let took = wait_for("the 50% period closed", Duration::from_secs(3), || {
        offers_in(&host.ledger).len() > before
    });
    wait_for("an offer at 30%", Duration::from_secs(10), || {
        offers_in(&host.ledger).iter().any(|o| o.3 == 30)
    });
    let offers = offers_in(&host.ledger);
    eprintln!("the 50% period was closed {took:?} after `roost thermostat set`: {offers:?}");
    let pcts: Vec<u64> = offers.iter().map(|o| o.3).collect();
    let first_30 = pcts.iter().position(|&p| p == 30).unwrap();
    assert!(pcts[..first_30].iter().all(|&p| p == 50) && pcts[first_30..].iter().all(|&p| p == 30));
    // The periods follow each other without a gap from the server's start.
    let bytes = std::fs::read(&host.ledger).unwrap();
    let start = ledger::read(&bytes).records[0].time;
    let covered: u64 = offers.iter().map(|o| o.1).sum();
    let last = offers.last().unwrap().0;
    assert!(
        ((last - start) as u64).abs_diff(covered) <= 1,
        "{start} {last} {covered}"
    );
    // roost accounting turns them into offered core-hours, all idle (no job ran).
    let out = accounting(dir.path(), &["--json", &format!("127.0.0.1:{}", host.port)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = parsed(&out);
    let owners = match v.get("owners") {
        Some(Value::Array(o)) => o.clone(),
        other => panic!("{other:?}"),
    };
    let reported = float(&owners[0], "offered_core_hours") * 3600.0;
    let expected: f64 = offers
        .iter()
        .map(|o| o.1 as f64 * o.2 as f64 * o.3 as f64 / 100.0)
        .sum();
    assert!((reported - expected).abs() < 1e-6, "{reported} {expected}");
    assert!((float(&owners[0], "idle_core_hours") * 3600.0 - expected).abs() < 1e-6);
}

/// The `job` records of job `id` in a ledger file: the CPU each says.
fn job_records_of(ledger_path: &Path, id: i64) -> Vec<u64> {
    let bytes = std::fs::read(ledger_path).unwrap_or_default();
    ledger::read(&bytes)
        .records
        .iter()
        .filter_map(|r| match &r.kind {
            Kind::Job { id: i, cpu_us, .. } if *i == id => Some(*cpu_us),
            _ => None,
        })
        .collect()
}

/// Issue 27 §4.4: the CPU of a job running when the server crashes is ledgered by the
/// restarted server, from the checkpoint in the job's record (written every
/// `--accounting-interval`, here 1 s), and exactly once: not again at a second restart, nor
/// when the server had died between ledgering the job and marking it ended.
#[test]
fn a_job_running_at_a_crash_is_ledgered_once_by_the_restarted_server() {
    let dir = tempfile::tempdir().unwrap();
    let export = tempfile::tempdir().unwrap();
    let jobs = job_dir(dir.path());
    let args = ["--jobs", "--job-dir", &jobs];
    let host = serve(dir.path(), "a", export.path(), &args);
    let mut alice = hmac_client(host.port, "alice");
    let id = alice
        .job_create(
            r#"{"executable":"/bin/sh","arguments":["sh","-c","while :; do :; done"],"files":[]}"#,
        )
        .unwrap();
    alice.job_commit(&[id]).unwrap();
    let record = Path::new(&jobs).join(format!("state/{id}.json"));
    wait_for(
        "two checkpoints of the job's CPU",
        Duration::from_secs(20),
        || {
            let text = std::fs::read_to_string(&record).unwrap_or_default();
            json::parse(text.as_bytes())
                .ok()
                .and_then(|v| v.get("process")?.get("cpu_us")?.as_i64())
                .is_some_and(|us| us >= 500_000)
        },
    );
    let started = std::time::Instant::now();
    drop(alice);
    drop(host); // SIGKILL: the job dies with it, unrecorded
    assert!(job_records_of(&dir.path().join("a.ledger"), id).is_empty());
    let host = serve(dir.path(), "a", export.path(), &args);
    let cpu = job_records_of(&host.ledger, id);
    assert_eq!(cpu.len(), 1, "{cpu:?}");
    assert!(cpu[0] >= 500_000, "{cpu:?}");
    assert!(
        cpu[0] as f64 <= (started.elapsed().as_secs_f64() + 25.0) * 1e6,
        "{cpu:?}"
    );
    let mut alice = hmac_client(host.port, "alice");
    let status = alice.job_status(&[id]).unwrap();
    assert!(status.contains("ERRORED"), "{status}");
    drop(alice);
    // A second restart does not count it again.
    drop(host);
    let host = serve(dir.path(), "a", export.path(), &args);
    assert_eq!(job_records_of(&host.ledger, id).len(), 1);
    // Nor does a restart after a server that died having ledgered it but before marking it
    // ended (its record still says STARTED).
    drop(host);
    let text = std::fs::read_to_string(&record).unwrap();
    std::fs::write(&record, text.replace("\"ERRORED\"", "\"STARTED\"")).unwrap();
    let host = serve(dir.path(), "a", export.path(), &args);
    assert_eq!(job_records_of(&host.ledger, id).len(), 1);
    let log = std::fs::read_to_string(&host.log).unwrap();
    assert!(log.contains("action=\"already in the ledger\""), "{log}");
}
