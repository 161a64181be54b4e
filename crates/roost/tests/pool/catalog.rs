//! The pool catalog with real processes on 127.0.0.1: `roost catalog`, `roost serve --catalog`,
//! `roost status`, and cctools' chirp_server, chirp_status and catalog_server on either side;
//! signed reports against forged, replayed and altered ones, and what `roost pool run` makes
//! of them.

use roost_catalog::json::{self, Value};
use roost_catalog::keys::Key;
use roost_testkit::bag::{array, bag, done_by_host, report, succeeded};
use roost_testkit::jobs::JobServer;
use roost_testkit::peer;
use roost_testkit::pool::{catalog_key, catalog_records, start_catalog, wait_for};
use roost_testkit::run::{
    announced, cctools_chirp_server, give_to_nobody, read_port_file, roost, start_announcing, Proc,
};
use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

fn start_server(dir: &Path, port: u16, catalog: u16) -> (Proc, u16) {
    start_server_with(dir, port, catalog, &[])
}

/// [`start_server`] with `extra` options.
fn start_server_with(dir: &Path, port: u16, catalog: u16, extra: &[&str]) -> (Proc, u16) {
    let mut cmd = roost();
    cmd.arg("serve")
        .arg(dir)
        .args(["--listen", "127.0.0.1", "--port", &port.to_string()])
        .args(["--acl", "address:127.0.0.1=rl"])
        .args(["--catalog", &format!("127.0.0.1:{catalog}")])
        .args(["--catalog-interval", "1"])
        .args(extra)
        .stderr(Stdio::null());
    start_announcing(cmd)
}

fn status(catalog: u16, extra: &[&str]) -> Output {
    roost()
        .args(["status", "--catalog", &format!("127.0.0.1:{catalog}")])
        .args(extra)
        .output()
        .unwrap()
}

/// The records `roost status --json --all` prints.
fn records(catalog: u16) -> Vec<Value> {
    catalog_records(catalog)
}

/// The state ("up"/"down") of the server on `port`, if listed.
fn state_of(records: &[Value], port: u16) -> Option<String> {
    records
        .iter()
        .find(|r| r.get("port").and_then(Value::as_i64) == Some(port.into()))
        .map(|r| r.get("state").map(Value::to_plain).unwrap_or_default())
}

#[test]
fn servers_report_go_down_and_come_back() {
    let (_catalog, cport) = start_catalog(&[]);
    let dirs = tempfile::tempdir().unwrap();
    let (a_dir, b_dir) = (dirs.path().join("a"), dirs.path().join("b"));
    std::fs::create_dir(&a_dir).unwrap();
    std::fs::create_dir(&b_dir).unwrap();
    let (_a, a) = start_server(&a_dir, 0, cport);
    let (b_proc, b) = start_server(&b_dir, 0, cport);

    wait_for("both servers up", Duration::from_secs(5), || {
        let r = records(cport);
        state_of(&r, a).as_deref() == Some("up") && state_of(&r, b).as_deref() == Some("up")
    });
    let r = records(cport);
    let rec = r
        .iter()
        .find(|r| r.get("port").and_then(Value::as_i64) == Some(a.into()))
        .unwrap();
    assert_eq!(rec.get("type").unwrap().as_str(), Some("chirp"));
    assert_eq!(rec.get("address").unwrap().as_str(), Some("127.0.0.1"));
    for key in [
        "owner",
        "name",
        "total",
        "avail",
        "load1",
        "cpus",
        "memory_total",
        "memory_avail",
        "version",
        "lastheardfrom",
    ] {
        assert!(rec.get(key).is_some(), "no {key} in {}", rec.to_json());
    }
    assert!(rec.get("total").unwrap().as_i64().unwrap() > 0);

    let table = status(cport, &[]);
    assert!(table.status.success());
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(table.starts_with("HOST"), "{table}");
    for port in [a, b] {
        let line = table
            .lines()
            .find(|l| l.starts_with(&format!("127.0.0.1:{port} ")))
            .unwrap_or_else(|| panic!("no line for {port}:\n{table}"));
        assert!(line.contains(" up "), "{line}");
    }

    // Killed: shown down once three one-second reports are missed, not before.
    drop(b_proc);
    let took = wait_for("the killed server down", Duration::from_secs(10), || {
        state_of(&records(cport), b).as_deref() == Some("down")
    });
    eprintln!("down {took:?} after the kill");
    assert!(took >= Duration::from_millis(1500), "down after {took:?}");
    assert_eq!(state_of(&records(cport), a).as_deref(), Some("up"));
    let table = String::from_utf8(status(cport, &[]).stdout).unwrap();
    assert!(table.contains(" down "), "{table}");

    // Restarted on the same port: up again at its first report.
    let (_b, b2) = start_server(&b_dir, b, cport);
    assert_eq!(b2, b);
    wait_for("the restarted server up", Duration::from_secs(4), || {
        state_of(&records(cport), b).as_deref() == Some("up")
    });
    assert_eq!(
        records(cport)
            .iter()
            .filter(|r| r.get("port").and_then(Value::as_i64) == Some(b.into()))
            .count(),
        1,
        "one record per address and port"
    );
}

#[test]
fn down_after_overrides_the_interval() {
    let (_catalog, cport) = start_catalog(&["--down-after", "1"]);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    // The key-value line form, with a long declared interval.
    sock.send_to(
        b"type chirp\nname lines\nport 4242\nowner alice\ninterval 3600\n",
        ("127.0.0.1", cport),
    )
    .unwrap();
    wait_for("the line-form record", Duration::from_secs(3), || {
        state_of(&records(cport), 4242).as_deref() == Some("up")
    });
    let r = records(cport);
    let rec = r
        .iter()
        .find(|r| r.get("name").and_then(Value::as_str) == Some("lines"));
    assert_eq!(
        rec.and_then(|r| r.get("owner")).and_then(Value::as_str),
        Some("alice")
    );
    wait_for("down after 1 s", Duration::from_secs(4), || {
        state_of(&records(cport), 4242).as_deref() == Some("down")
    });
    // cctools' TCP update form, on port+1.
    let mut s = TcpStream::connect(("127.0.0.1", cport + 1)).unwrap();
    s.write_all(br#"{"type":"chirp","name":"tcp","port":4242}"#)
        .unwrap();
    drop(s);
    wait_for("up again by TCP", Duration::from_secs(3), || {
        state_of(&records(cport), 4242).as_deref() == Some("up")
    });
}

#[test]
fn malformed_updates_and_queries_never_crash_the_catalog() {
    let (mut catalog, cport) = start_catalog(&[]);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let good = br#"{"type":"chirp","name":"good","port":5151,"owner":"o","avail":1,"total":2}"#;
    let mut bad: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"{".to_vec(),
        b"{\"type\":\"chirp\",\"port\":".to_vec(),
        b"[1,2,3]".to_vec(),
        b"\x1a".to_vec(),
        b"\x1a\x78\x9cgarbage".to_vec(),
        b"\xff\xfe\x00\x01".to_vec(),
        "[".repeat(60_000).into_bytes(),
        vec![b'{'; 60_000],
        b"port 99999999999999999999\nname \xff\n".to_vec(),
        b"{\"port\":-5,\"name\":\"\\ud800\"}".to_vec(),
    ];
    for cut in 1..good.len() {
        bad.push(good[..cut].to_vec());
    }
    let mut seed = 12345u64;
    for _ in 0..300 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let len = (seed >> 33) as usize % 200;
        bad.push((0..len).map(|i| (seed >> (i % 56)) as u8).collect());
    }
    for datagram in &bad {
        let _ = sock.send_to(datagram, ("127.0.0.1", cport));
    }
    // Junk on the TCP update port and the query port.
    for junk in [
        &b"\x00\x01\x02garbage"[..],
        b"GET / HTTP/1.0\r\n\r\n",
        b"{\"port\":",
    ] {
        let mut s = TcpStream::connect(("127.0.0.1", cport + 1)).unwrap();
        let _ = s.write_all(junk);
    }
    for junk in [
        &b"\xff\xff\r\n\r\n"[..],
        b"GET\r\n\r\n",
        b"POST /query.json HTTP/1.1\r\n\r\n",
        b"",
    ] {
        let mut s = TcpStream::connect(("127.0.0.1", cport)).unwrap();
        let _ = s.write_all(junk);
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
    }
    let mut s = TcpStream::connect(("127.0.0.1", cport)).unwrap();
    s.write_all(b"GET /nothing HTTP/1.0\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 404"), "{answer}");

    // cctools' compressed form: 0x1A, then zlib.
    let compressed =
        roost_catalog::update::compress_update(br#"{"type":"chirp","name":"packed","port":5152}"#);
    // Sent again while waiting, as servers report periodically: on a loaded machine the
    // junk burst can fill the catalog's receive buffer, and UDP drops what does not fit.
    wait_for("the good updates", Duration::from_secs(5), || {
        sock.send_to(good, ("127.0.0.1", cport)).unwrap();
        sock.send_to(&compressed, ("127.0.0.1", cport)).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let r = records(cport);
        state_of(&r, 5151).as_deref() == Some("up") && state_of(&r, 5152).as_deref() == Some("up")
    });
    assert!(catalog.0.try_wait().unwrap().is_none(), "the catalog died");
    let r = records(cport);
    assert!(
        r.iter()
            .all(|r| r.get("port").and_then(Value::as_i64) != Some(-5)),
        "{r:?}"
    );
    // The text form.
    let mut s = TcpStream::connect(("127.0.0.1", cport)).unwrap();
    s.write_all(b"GET /query.text HTTP/1.0\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(
        answer.contains("\nname good\n") && answer.contains("\nport 5151\n"),
        "{answer}"
    );
}

/// cctools' own chirp_server reports to `roost catalog` (by UDP and by TCP), and cctools'
/// chirp_status lists the pool from it.
#[test]
fn cctools_chirp_server_and_chirp_status_work_with_roost_catalog() {
    let here = peer::root("chirp_server drops to nobody")
        && peer::program("chirp_server", peer::CCTOOLS)
        && peer::program("chirp_status", peer::CCTOOLS);
    if !here {
        return;
    }
    let (_catalog, cport) = start_catalog(&[]);
    let scratch = tempfile::tempdir().unwrap();
    let export = scratch.path().join("export");
    std::fs::create_dir(&export).unwrap();
    give_to_nobody(scratch.path());
    let mut servers = Vec::new();
    let mut ports = Vec::new();
    for protocol in ["udp", "tcp"] {
        let port_file = scratch.path().join(format!("port.{protocol}"));
        let child = cctools_chirp_server(&export, scratch.path(), &port_file)
            .env("CATALOG_UPDATE_PROTOCOL", protocol)
            .args(["-a", "address", "-i", "nobody"])
            .args(["-u", &format!("127.0.0.1:{cport}"), "-U", "1"])
            .spawn()
            .unwrap();
        servers.push(Proc(child));
        ports.push(read_port_file(&port_file));
    }
    wait_for("both chirp_servers listed", Duration::from_secs(10), || {
        let r = records(cport);
        ports
            .iter()
            .all(|&p| state_of(&r, p).as_deref() == Some("up"))
    });
    let r = records(cport);
    for &p in &ports {
        let rec = r
            .iter()
            .find(|r| r.get("port").and_then(Value::as_i64) == Some(p.into()))
            .unwrap();
        for key in [
            "owner",
            "total",
            "avail",
            "cpus",
            "load1",
            "version",
            "memory_total",
        ] {
            assert!(rec.get(key).is_some(), "no {key} in {}", rec.to_json());
        }
    }
    let table = String::from_utf8(status(cport, &[]).stdout).unwrap();
    for &p in &ports {
        assert!(table.contains(&format!("127.0.0.1:{p} ")), "{table}");
    }
    // cctools' chirp_status reads roost's catalog.
    let out = Command::new("chirp_status")
        .args(["-c", &format!("127.0.0.1:{cport}"), "-t", "10"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for &p in &ports {
        assert!(text.contains(&format!(" {p} ")), "chirp_status:\n{text}");
    }
}

/// `roost serve` reports to cctools' catalog_server, and `roost status` reads it; its reports
/// signed (`--catalog-key`) are ordinary reports to cctools, with members more.
#[test]
fn roost_serve_reports_to_cctools_catalog_server() {
    if !peer::program("catalog_server", peer::CCTOOLS) {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let port_file = scratch.path().join("port");
    let history = scratch.path().join("history");
    let child = Command::new("catalog_server")
        .args(["-I", "127.0.0.1", "-u", "127.0.0.1:9", "-U", "1h"])
        .arg("-Z")
        .arg(&port_file)
        .arg("-H")
        .arg(&history)
        .current_dir(scratch.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _cctools = Proc(child);
    let cport = read_port_file(&port_file);
    let export = scratch.path().join("export");
    std::fs::create_dir(&export).unwrap();
    let key = catalog_key(scratch.path(), "pool");
    let (_server, port) = start_server_with(&export, 0, cport, &["--catalog-key", &key]);
    wait_for(
        "roost serve listed by catalog_server",
        Duration::from_secs(10),
        || {
            let out = status(cport, &["--json"]);
            out.status.success()
                && matches!(json::parse(&out.stdout), Ok(Value::Array(r))
                if r.iter().any(|r| r.get("port").and_then(Value::as_i64) == Some(port.into())
                    && r.get("software").and_then(Value::as_str) == Some("roost")))
        },
    );
    let table = String::from_utf8(status(cport, &[]).stdout).unwrap();
    assert!(table.contains(&format!("127.0.0.1:{port} ")), "{table}");
}

/// The record of the server on `port`.
fn record_of(records: &[Value], port: u16) -> Option<Value> {
    records
        .iter()
        .find(|r| r.get("port").and_then(Value::as_i64) == Some(port.into()))
        .cloned()
}

/// How many refusals of `kind` the catalog logged.
fn refusals(log: &Path, kind: &str) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("event=ignored") && l.contains(&format!(" kind={kind} ")))
        .count()
}

/// Issue 27 §4: membership is authenticated. A forger sends the catalog unsigned reports for
/// a job server of its own, claiming 64 CPUs (on main, `roost pool run` gave it 18 of 50
/// tasks with their inputs). With the catalog key on the catalog and the real server, the
/// forger's server gets no task (only `--unsigned` would use it); a forged report cannot
/// replace the signed server's record from its own address; and a signed report replayed,
/// altered, made long ago, sent on from another address or signed with a key the catalog does
/// not hold is dropped, counted and logged.
#[test]
fn forged_replayed_and_altered_reports_get_no_tasks_and_change_no_record() {
    let scratch = tempfile::tempdir().unwrap();
    let key = catalog_key(scratch.path(), "pool");
    let log = scratch.path().join("catalog.log");
    let mut cmd = roost();
    cmd.args(["catalog", "--port", "0", "--listen", "127.0.0.1"])
        .args(["--catalog-key", &key, "--report-window", "30"])
        .stderr(std::fs::File::create(&log).unwrap());
    let (_catalog, cport) = announced(cmd);
    let catalog = format!("127.0.0.1:{cport}");
    let run = |dir: &Path, extra: &[&str]| {
        roost()
            .current_dir(dir)
            .args([
                "pool",
                "run",
                "--auth",
                "address",
                "--quiet",
                "--no-speculate",
            ])
            .args(["--catalog", &catalog, "tasks", "--json"])
            .args(extra)
            .output()
            .unwrap()
    };

    // The forger's own job server, which does not report; the forger reports it, unsigned,
    // claiming 64 CPUs, and claiming to be verified too.
    let fake = JobServer::one_at_a_time(&[]);
    let forger = UdpSocket::bind("127.0.0.1:0").unwrap();
    let forged = |port: u16| {
        format!(
            r#"{{"type":"chirp","name":"bighost","port":{port},"owner":"mallory","cpus":64,"jobs":64,"interval":1,"verified":true,"signed_by":"pool"}}"#
        )
    };
    let forge = |port: u16| {
        forger
            .send_to(forged(port).as_bytes(), ("127.0.0.1", cport))
            .unwrap()
    };
    forge(fake.server.port);
    wait_for("the forged record", Duration::from_secs(5), || {
        record_of(&records(cport), fake.server.port).is_some()
    });
    let shown = record_of(&records(cport), fake.server.port).unwrap();
    assert_eq!(
        shown.get("verified"),
        Some(&Value::Bool(false)),
        "{shown:?}"
    );
    assert_eq!(shown.get("signed_by"), None, "{shown:?}");
    // Alone, it is no host for a run, and the run says how to use it anyway.
    let work = tempfile::tempdir().unwrap();
    bag(work.path(), 12, "0.1");
    let out = run(work.path(), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("none whose reports are signed") && stderr.contains("--unsigned"),
        "{stderr}"
    );

    // The real server signs its reports; it also reports to the test, which so catches one.
    let catcher = UdpSocket::bind("127.0.0.1:0").unwrap();
    catcher
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let caught_at = format!("127.0.0.1:{}", catcher.local_addr().unwrap().port());
    let real = JobServer::one_at_a_time(&[
        "--catalog",
        &catalog,
        "--catalog",
        &caught_at,
        "--catalog-interval",
        "1",
        "--catalog-key",
        &key,
    ]);
    let port = real.server.port;
    wait_for("the signed server verified", Duration::from_secs(5), || {
        record_of(&records(cport), port)
            .is_some_and(|r| r.get("verified") == Some(&Value::Bool(true)))
    });
    let mut buf = vec![0u8; 65536];
    let (n, _) = catcher.recv_from(&mut buf).unwrap();
    let caught = buf[..n].to_vec();
    let caught_text = String::from_utf8(caught.clone()).unwrap();
    let cpus = record_of(&records(cport), port)
        .unwrap()
        .get("cpus")
        .and_then(Value::as_i64)
        .unwrap();
    assert!(cpus < 64);

    // A forged report for the real server, from its own address: refused, not a downgrade.
    forge(port);
    // The caught report sent again (a replay), from the same address.
    catcher.send_to(&caught, ("127.0.0.1", cport)).unwrap();
    // Sent on from another address: it would be recorded as a server there.
    let elsewhere = UdpSocket::bind("127.0.0.2:0").unwrap();
    elsewhere.send_to(&caught, ("127.0.0.1", cport)).unwrap();
    // Altered to claim 64 CPUs.
    let altered = caught_text.replace(&format!("\"cpus\":{cpus},"), "\"cpus\":64,");
    assert_ne!(altered, caught_text);
    catcher
        .send_to(altered.as_bytes(), ("127.0.0.1", cport))
        .unwrap();
    // Signed with the right key, but a minute ago (the window is 30 s): an old report.
    let secret = std::fs::read(key.split_once('=').unwrap().1).unwrap();
    let pool_key = Key::new("pool", secret.strip_suffix(b"\n").unwrap()).unwrap();
    let mut unsigned = roost_catalog::update::parse_update(&caught).unwrap();
    unsigned.remove("signature");
    let from = "127.0.0.1".parse().unwrap();
    let old = roost_catalog::signed::seal(
        &unsigned,
        &pool_key,
        from,
        roost_catalog::signed::now_ms() - 60_000,
    );
    catcher
        .send_to(old.as_bytes(), ("127.0.0.1", cport))
        .unwrap();
    // Signed with a key the catalog does not hold.
    let stranger = Key::new("stranger", b"anything").unwrap();
    let foreign =
        roost_catalog::signed::seal(&unsigned, &stranger, from, roost_catalog::signed::now_ms());
    catcher
        .send_to(foreign.as_bytes(), ("127.0.0.1", cport))
        .unwrap();
    for kind in [
        "unsigned-for-signed",
        "replayed",
        "wrong-address",
        "bad-signature",
        "out-of-window",
        "unknown-key",
    ] {
        let logged = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(50));
            refusals(&log, kind) == 1
        });
        assert!(
            logged,
            "no single {kind} refusal logged:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
    let r = records(cport);
    let shown = record_of(&r, port).unwrap();
    assert_eq!(
        shown.get("cpus").and_then(Value::as_i64),
        Some(cpus),
        "{shown:?}"
    );
    assert_eq!(shown.get("verified"), Some(&Value::Bool(true)));
    assert_eq!(shown.get("signed_by").and_then(Value::as_str), Some("pool"));
    assert_ne!(shown.get("owner").and_then(Value::as_str), Some("mallory"));
    assert!(
        r.iter()
            .all(|r| r.get("address").and_then(Value::as_str) != Some("127.0.0.2")),
        "{r:?}"
    );
    // `roost status` shows who signed.
    let table = String::from_utf8(status(cport, &[]).stdout).unwrap();
    let line = |p: u16| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("127.0.0.1:{p} ")))
            .unwrap_or_else(|| panic!("no {p} in\n{table}"))
            .to_string()
    };
    assert!(
        table.lines().next().unwrap().contains(" SIGNED "),
        "{table}"
    );
    assert!(line(port).contains(" pool "), "{table}");
    assert!(line(fake.server.port).contains(" no "), "{table}");

    // The run, while the forger keeps its server up in the catalog: every task on the real
    // server, none on the forger's; with --unsigned it would have taken most of them.
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                forge(fake.server.port);
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        let out = run(work.path(), &[]);
        succeeded(&out);
        let hosts = done_by_host(&report(&out));
        assert_eq!(hosts.len(), 1, "{hosts:?}");
        assert!(hosts[0].0.ends_with(&format!(":{port}")), "{hosts:?}");
        assert_eq!(hosts[0].1, 12);
        let fake_jobs = fake.job_root.path().join("jobs/state");
        let records = std::fs::read_dir(&fake_jobs)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name() != "next-id")
            .count();
        assert_eq!(records, 0, "a job reached the forger's server");
        let again = tempfile::tempdir().unwrap();
        bag(again.path(), 12, "0.1");
        let out = run(again.path(), &["--unsigned"]);
        stop.store(true, Ordering::Relaxed);
        succeeded(&out);
        let r = report(&out);
        let fake_done = array(&r, "hosts")
            .iter()
            .find(|h| {
                h.get("host")
                    .unwrap()
                    .to_plain()
                    .ends_with(&format!(":{}", fake.server.port))
            })
            .and_then(|h| h.get("done").and_then(Value::as_i64))
            .unwrap_or(0);
        assert!(
            fake_done >= 1,
            "--unsigned uses the unsigned host: {}",
            r.to_json()
        );
    });
}
