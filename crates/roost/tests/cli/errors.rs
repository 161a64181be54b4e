//! What the user sees when something is wrong (issue 31, defects 2, 3, 5, 7 and 8): malformed
//! ACL subjects refused by the client, the server's options and its setacl RPC; a server that
//! cannot read its export refusing to start; `mv` across servers checking rights before it
//! copies and naming both copies when the delete still fails; group members' errors naming
//! host:port, the cause and the fix; and messages that say what to do (key files, low ports,
//! silent servers, peers that do not speak Chirp, a missing group directory). The real
//! `roost` binary against real `roost serve` servers on 127.0.0.1.

use roost_testkit::peer::is_root;
use roost_testkit::serve::{code, roost_cli, roost_through, TestServer};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The command prefix that runs a program as an unprivileged user, and that user's name:
/// `setpriv` to nobody as root; nothing (this user) otherwise.
fn unprivileged() -> (Vec<&'static str>, String) {
    if is_root() {
        (
            vec![
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
            ],
            "nobody".into(),
        )
    } else {
        let name = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout)
            .unwrap()
            .trim()
            .to_string();
        (Vec::new(), name)
    }
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `roost` (authenticating by address unless `args` says otherwise) without the
/// environment's key.
fn roost(args: &[&str]) -> Output {
    let mut all = args.to_vec();
    if !args.contains(&"--auth") && !args.contains(&"--key") {
        all.extend(["--auth", "address"]);
    }
    Command::new(env!("CARGO_BIN_EXE_roost"))
        .args(&all)
        .env_remove("ROOST_HMAC_KEY")
        .output()
        .expect("run roost")
}

/// Runs `roost serve DIR ARGS` through `wrapper`, expecting it to refuse to start: its exit
/// code and standard error. A server that starts instead is stopped and the test fails.
fn serve_refuses(wrapper: &[&str], dir: &Path, args: &[&str]) -> (i32, String) {
    let mut command = roost_through(wrapper);
    let ledger = tempfile::tempdir().unwrap();
    chmod(ledger.path(), 0o777);
    let mut child = command
        .arg("serve")
        .arg(dir)
        .args(["--listen", "127.0.0.1"])
        .arg("--ledger")
        .arg(ledger.path().join("ledger"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start roost serve");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    if !first.is_empty() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("roost serve {} {args:?} started: {first}", dir.display());
    }
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let status = child.wait().unwrap();
    (status.code().unwrap_or(-1), err)
}

const METHODS: [&str; 4] = ["address", "hostname", "unix", "hmac"];

fn names_subject_and_methods(message: &str, subject: &str) {
    assert!(message.contains(subject), "{message}");
    for m in METHODS {
        assert!(message.contains(m), "{m} missing from: {message}");
    }
}

#[test]
fn malformed_acl_subjects_are_refused_by_setacl_serve_and_the_rpc() {
    let server = TestServer::start(&["--acl", "address:127.0.0.1=rwlda"]);
    let url = format!("chirp://127.0.0.1:{}/", server.port);
    for bad in ["bob", "foo:bar", "unix:", ":alice"] {
        let out = roost(&["setacl", &url, bad, "rl"]);
        assert_eq!(out.status.code(), Some(1), "setacl {bad}: {}", stderr(&out));
        names_subject_and_methods(&stderr(&out), bad);
    }
    // Every subject cctools' chirp knows (and '*', anyone) is accepted, for interop.
    for good in [
        "unix:alice",
        "hostname:*.example.org",
        "address:10.0.0.*",
        "hmac:build",
        "kerberos:alice@EXAMPLE.ORG",
        "globus:/O=Grid/CN=Alice",
        "ticket:0123abcd",
        "group:staff",
        "*",
    ] {
        let out = roost(&["setacl", &url, good, "rl"]);
        assert!(out.status.success(), "setacl {good}: {}", stderr(&out));
    }

    // Any client's setacl: refused with an error, never stored.
    let mut raw = server.connect();
    assert_eq!(raw.rpc("setacl / bob rl"), code(libc::EINVAL));
    assert_eq!(raw.rpc("setacl / foo:bar rl"), code(libc::EINVAL));
    assert_eq!(raw.rpc("getacl /"), 0);
    let acl = raw.list();
    assert!(
        !acl.iter()
            .any(|e| e.starts_with("bob ") || e.starts_with("foo:")),
        "{acl:?}"
    );
    assert!(acl
        .iter()
        .any(|e| e.starts_with("kerberos:alice@EXAMPLE.ORG ")));

    // A malformed entry written by hand can still be removed.
    assert_eq!(raw.rpc("mkdir /d 493"), 0);
    let acl_file = server.root().join("d/.__acl");
    let mut text = std::fs::read_to_string(&acl_file).unwrap_or_default();
    text.push_str("bob rl\n");
    std::fs::write(&acl_file, text).unwrap();
    let out = roost(&["setacl", &format!("{url}d"), "bob", "-"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!std::fs::read_to_string(&acl_file)
        .unwrap()
        .lines()
        .any(|l| l.starts_with("bob ")));

    // The server's own options.
    let dir = tempfile::tempdir().unwrap();
    for bad in ["bob", "foo:bar"] {
        let (status, message) = serve_refuses(&[], dir.path(), &["--acl", &format!("{bad}=rl")]);
        assert_eq!(status, 2, "{message}");
        names_subject_and_methods(&message, bad);
    }
}

#[test]
fn a_server_that_cannot_read_its_export_refuses_to_start() {
    let (wrapper, user) = unprivileged();
    let parent = tempfile::tempdir().unwrap();
    chmod(parent.path(), 0o755);
    let export = parent.path().join("private");
    std::fs::create_dir(&export).unwrap();
    // Root's 0700 directory for nobody; for anyone else, one whose owner took every right.
    chmod(&export, if is_root() { 0o700 } else { 0 });
    let (status, message) = serve_refuses(&wrapper, &export, &["--port", "0"]);
    chmod(&export, 0o700);
    assert_eq!(status, 2, "{message}");
    assert!(
        message.contains(&export.display().to_string()) && message.contains(&user),
        "names neither the directory nor the user: {message}"
    );
    assert!(message.contains("permission denied"), "{message}");
}

#[test]
fn serve_on_a_low_port_says_it_needs_privilege() {
    let (wrapper, _) = unprivileged();
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755);
    let (status, message) = serve_refuses(&wrapper, dir.path(), &["--port", "999"]);
    assert_eq!(status, 2, "{message}");
    assert!(
        message.contains("999")
            && message.contains("1024")
            && message.contains("CAP_NET_BIND_SERVICE"),
        "{message}"
    );
}

/// Two servers granting `address:127.0.0.1` the rights given.
fn two_servers(from: &str, to: &str) -> (TestServer, TestServer) {
    let a = TestServer::start(&["--acl", &format!("address:127.0.0.1={from}")]);
    let b = TestServer::start(&["--acl", &format!("address:127.0.0.1={to}")]);
    (a, b)
}

#[test]
fn mv_across_servers_checks_rights_on_both_ends_before_copying() {
    // No 'd' on the source's directory: nothing is copied.
    let (a, b) = two_servers("rwl", "rwl");
    std::fs::write(a.root().join("f"), b"data").unwrap();
    let from = format!("chirp://127.0.0.1:{}/f", a.port);
    let to = format!("chirp://127.0.0.1:{}/f", b.port);
    let out = roost(&["mv", &from, &to]);
    assert_eq!(out.status.code(), Some(1));
    let message = stderr(&out);
    assert!(
        message.contains(&from) && message.contains("'d'"),
        "{message}"
    );
    assert!(
        !b.root().join("f").exists(),
        "copied although it cannot move"
    );
    assert!(a.root().join("f").exists());

    // No 'w' (nor 'p') on the destination's directory: nothing is copied either.
    let (a, b) = two_servers("rwld", "rl");
    std::fs::write(a.root().join("f"), b"data").unwrap();
    let from = format!("chirp://127.0.0.1:{}/f", a.port);
    let to = format!("chirp://127.0.0.1:{}/f", b.port);
    let out = roost(&["mv", &from, &to]);
    assert_eq!(out.status.code(), Some(1));
    let message = stderr(&out);
    assert!(
        message.contains(&to) && message.contains("'w'"),
        "{message}"
    );
    assert!(a.root().join("f").exists());
}

#[test]
fn mv_across_servers_names_both_copies_when_the_delete_fails() {
    // The ACL grants 'd', but the server's own user may not remove the file (a directory it
    // does not own, read-only to it): the copy is made, the delete fails.
    let (wrapper, _) = unprivileged();
    let export = tempfile::tempdir().unwrap();
    let ro = export.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::fs::write(ro.join("f"), b"data").unwrap();
    chmod(&ro.join("f"), 0o644);
    chmod(export.path(), 0o755);
    if is_root() {
        std::os::unix::fs::chown(export.path(), Some(65534), Some(65534)).unwrap();
        chmod(&ro, 0o755);
    } else {
        chmod(&ro, 0o555);
    }
    let a = TestServer::launch(export, &["--acl", "address:127.0.0.1=rwlda"], &wrapper, &[]);
    let b = TestServer::start(&["--acl", "address:127.0.0.1=rwlda"]);
    let from = format!("chirp://127.0.0.1:{}/ro/f", a.port);
    let to = format!("chirp://127.0.0.1:{}/f", b.port);
    let out = roost(&["mv", &from, &to]);
    chmod(&ro, 0o755);
    assert_eq!(out.status.code(), Some(1));
    let message = stderr(&out);
    assert_eq!(std::fs::read(b.root().join("f")).unwrap(), b"data");
    assert!(ro.join("f").exists());
    assert!(
        message.contains(&from) && message.contains(&to) && message.contains("copied"),
        "does not say where both copies are: {message}"
    );
}

/// A port nobody listens on.
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn group_member_errors_name_the_server_the_cause_and_the_fix() {
    let open = TestServer::start(&["--acl", "address:127.0.0.1=rl"]);
    std::fs::write(open.root().join("log"), b"hello\n").unwrap();
    let keys = tempfile::tempdir().unwrap();
    let mut args = TestServer::with_keys(keys.path(), &["alice"]);
    args.extend(["--acl".into(), "hmac:alice=rl".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let locked = TestServer::start(&args);
    std::fs::write(locked.root().join("log"), b"hello\n").unwrap();
    let down = closed_port();

    let group = tempfile::tempdir().unwrap();
    for (name, port) in [
        ("node1", open.port),
        ("node2", locked.port),
        ("node3", down),
    ] {
        std::os::unix::fs::symlink(
            format!("chirp://127.0.0.1:{port}/log"),
            group.path().join(name),
        )
        .unwrap();
    }
    let out = roost(&["pgrep", "hello", group.path().to_str().unwrap()]);
    let message = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{message}");
    let line = |name: &str| {
        message
            .lines()
            .find(|l| l.contains(name))
            .unwrap_or_else(|| panic!("no line for {name}: {message}"))
            .to_string()
    };
    let node2 = line("node2");
    assert!(
        node2.contains(&format!("127.0.0.1:{}", locked.port))
            && node2.contains("permission denied")
            && node2.contains("--key"),
        "{node2}"
    );
    let node3 = line("node3");
    assert!(
        node3.contains(&format!("127.0.0.1:{down}")) && node3.contains("connection refused"),
        "{node3}"
    );

    // Every member failing: each is named the same way, not "2 member(s) failed".
    std::fs::remove_file(group.path().join("node1")).unwrap();
    let out = roost(&["pgrep", "hello", group.path().to_str().unwrap()]);
    let message = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{message}");
    assert!(
        message.contains(&format!("127.0.0.1:{}", locked.port))
            && message.contains("--key")
            && message.contains(&format!("127.0.0.1:{down}"))
            && message.contains("connection refused"),
        "{message}"
    );
}

#[test]
fn key_options_name_the_file_and_the_form() {
    let server = TestServer::start(&["--acl", "address:127.0.0.1=rl"]);
    let url = format!("chirp://127.0.0.1:{}/", server.port);
    let out = roost(&["ls", "--key", "nokey", &url]);
    assert_eq!(out.status.code(), Some(2));
    let message = stderr(&out);
    assert!(
        message.contains("NAME=FILE") && !message.contains("bad address"),
        "{message}"
    );
    let out = roost(&["ls", "--key", "a=/nonexistent", &url]);
    assert_eq!(out.status.code(), Some(2));
    let message = stderr(&out);
    assert!(
        message.contains("/nonexistent")
            && message.contains("no such file")
            && !message.contains("os error"),
        "{message}"
    );
}

/// Runs `roost args` expecting it to fail within `limit`; its exit code, stderr and time.
fn fails_within(args: &[&str], limit: Duration) -> (Option<i32>, String, Duration) {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_roost"))
        .args(args)
        .env_remove("ROOST_HMAC_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.code(), err, started.elapsed());
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("roost {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_silent_server_times_out_soon_saying_what_and_how_to_wait_longer() {
    // Accepts connections and never says a word.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let url = format!("chirp://127.0.0.1:{port}/");
    let (code, message, took) = fails_within(
        &["ls", "--auth", "address", "--timeout", "2", &url],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(1), "{message}");
    assert!(took >= Duration::from_secs(2), "{took:?}");
    assert!(
        message.contains(&format!("127.0.0.1:{port}"))
            && message.contains("2 s")
            && message.contains("--timeout"),
        "does not say what timed out or how to wait longer: {message}"
    );
    // The wait for a server's greeting is the connect timeout, shorter than the reply one.
    let (code, message, took) = fails_within(
        &[
            "ls",
            "--auth",
            "address",
            "--connect-timeout",
            "1",
            "--timeout",
            "60",
            &url,
        ],
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(1), "{message}");
    assert!(took < Duration::from_secs(10), "{took:?}: {message}");
    assert!(message.contains("--connect-timeout"), "{message}");
    drop(silent);
}

#[test]
fn a_peer_that_does_not_speak_chirp_is_named_with_what_it_sent() {
    let web = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = web.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in web.incoming() {
            let Ok(mut conn) = conn else { return };
            let mut buf = [0u8; 64];
            let _ = conn.read(&mut buf);
            let _ = conn.write_all(b"HTTP/1.1 400 Bad Request\r\nServer: x\x01\r\n\r\n");
        }
    });
    let url = format!("chirp://127.0.0.1:{port}/");
    let (code, message, _) =
        fails_within(&["ls", "--auth", "address", &url], Duration::from_secs(20));
    assert_eq!(code, Some(1), "{message}");
    assert!(
        message.contains("does not speak Chirp") && message.contains("HTTP/1.1 400 Bad Request"),
        "{message}"
    );
    assert!(
        !message.contains('\x01') && !message.contains('\r'),
        "not sanitized: {message:?}"
    );
}

#[test]
fn pgrep_names_a_missing_directory_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing-here");
    let missing = missing.to_str().unwrap();
    let out = roost_cli(&["pgrep", "x", missing]);
    assert_eq!(out.status.code(), Some(2));
    let message = stderr(&out);
    assert_eq!(message.matches(missing).count(), 1, "{message}");
    assert!(!message.contains("os error"), "{message}");
}
