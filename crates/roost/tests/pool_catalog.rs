//! The pool catalog with real processes on 127.0.0.1: `roost catalog`, `roost serve --catalog`,
//! `roost status`, and cctools' chirp_server, chirp_status and catalog_server on either side.

mod pool_support;
mod run_support;

use pool_support::{catalog_records, start_catalog, wait_for};
use roost_catalog::json::{self, Value};
use run_support::{
    cctools_chirp_server, give_to_nobody, have, is_root, read_port_file, roost, start_announcing,
    Proc,
};
use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn start_server(dir: &Path, port: u16, catalog: u16) -> (Proc, u16) {
    let mut cmd = roost();
    cmd.arg("serve")
        .arg(dir)
        .args(["--listen", "127.0.0.1", "--port", &port.to_string()])
        .args(["--acl", "address:127.0.0.1=rl"])
        .args(["--catalog", &format!("127.0.0.1:{catalog}")])
        .args(["--catalog-interval", "1"])
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
    if !is_root() || !have("chirp_server") || !have("chirp_status") {
        eprintln!("skipped: needs root (chirp_server drops to nobody) and coop-computing-tools");
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

/// `roost serve` reports to cctools' catalog_server, and `roost status` reads it.
#[test]
fn roost_serve_reports_to_cctools_catalog_server() {
    if !have("catalog_server") {
        eprintln!("skipped: no catalog_server (coop-computing-tools)");
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
    let (_server, port) = start_server(&export, 0, cport);
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
