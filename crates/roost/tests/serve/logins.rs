//! Attacks on `roost serve`'s logins, each kept out by a test: borrowing the server's own
//! `unix` identity through its outgoing connections, renaming another user's file onto a
//! challenge path, guessing hmac secrets, and key files others can read.
//!
//! The attacker is a thread that has given up root for `nobody` (the raw credential system
//! calls change only the calling thread), so its sockets and files are nobody's while the
//! test, the victim, stays root.

use roost_testkit::serve::{Raw, TestServer};
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

const NOBODY: u32 = 65534;

/// Runs `attack` on a thread whose real, effective and saved ids are `nobody`'s.
fn as_nobody<T: Send + 'static>(attack: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        // SAFETY: raw system calls on this thread's own credentials; glibc's wrappers would
        // change every thread of the test process.
        unsafe {
            assert_eq!(
                libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<u32>()),
                0
            );
            assert_eq!(
                libc::syscall(libc::SYS_setresgid, NOBODY, NOBODY, NOBODY),
                0
            );
            assert_eq!(
                libc::syscall(libc::SYS_setresuid, NOBODY, NOBODY, NOBODY),
                0
            );
        }
        attack()
    })
    .join()
    .expect("attacker thread")
}

/// Offers `unix` on a fresh connection and returns it with the challenge path.
fn unix_challenge(port: u16) -> (Raw, String) {
    let mut c = Raw::connect(port);
    c.send(b"unix\n");
    assert_eq!(c.line(), b"yes");
    let challenge = String::from_utf8(c.line()).unwrap();
    (c, challenge)
}

/// Says "done" to a `unix` challenge; the subject the server then grants, if any.
fn claim(mut c: Raw) -> Option<String> {
    c.send(b"yes\n");
    c.verdict()
}

/// A fake Chirp server that answers a `unix` offer with `challenge` and records every
/// method it was offered.
fn fake_server(challenge: String) -> (u16, std::thread::JoinHandle<(Vec<String>, TcpStream)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(15)))
            .unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut writer = stream.try_clone().unwrap();
        let mut offers = Vec::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            let offer = line.trim().to_string();
            offers.push(offer.clone());
            if offer == "unix" {
                writer
                    .write_all(format!("yes\n{challenge}\n").as_bytes())
                    .unwrap();
                // The server's client says "yes" once it has made the file; keep the
                // connection (and so the file) open for the attacker's claim.
                let mut done = String::new();
                let _ = reader.read_line(&mut done);
                break;
            }
            writer.write_all(b"no\n").unwrap();
        }
        (offers, stream)
    });
    (port, handle)
}

#[test]
fn a_unix_login_cannot_be_relayed_through_the_servers_own_connections() {
    // Only the server's own user (root) has rights: the prize of the attack.
    let server = TestServer::start(&[]);
    let port = server.port;
    let (subject, offers, whoareyou) = as_nobody(move || {
        let (a, challenge) = unix_challenge(port);
        let (fake_port, fake) = fake_server(challenge);
        let mut b = Raw::connect(port);
        b.auth_ok("address");
        let whoareyou = b.rpc(&format!("whoareyou 127.0.0.1:{fake_port} 100"));
        // Whatever the server did, stop the fake server waiting.
        drop(TcpStream::connect(("127.0.0.1", fake_port)));
        let (offers, _held) = fake.join().unwrap();
        (claim(a), offers, whoareyou)
    });
    assert_ne!(
        subject.as_deref(),
        Some("unix:root"),
        "a challenge file the server made for its own login proved the attacker root"
    );
    assert_eq!(subject, None);
    assert!(
        !offers.iter().any(|o| o == "unix"),
        "the server offered unix on its own outgoing connection: {offers:?}"
    );
    assert!(whoareyou < 0, "whoareyou needs a right the attacker lacks");
}

#[test]
fn a_file_another_user_made_cannot_be_renamed_onto_the_challenge() {
    let server = TestServer::start(&[]);
    // The attacker's own directory, into which the victim (root here) writes a fresh file.
    let drop_box = tempfile::tempdir_in("/tmp").unwrap();
    std::os::unix::fs::chown(drop_box.path(), Some(NOBODY), Some(NOBODY)).unwrap();
    std::fs::set_permissions(drop_box.path(), std::fs::Permissions::from_mode(0o733)).unwrap();
    let port = server.port;
    let (c, challenge) = as_nobody(move || unix_challenge(port));
    let planted = drop_box.path().join("victims-file");
    std::fs::File::create(&planted).unwrap();
    let from = planted.clone();
    let subject = as_nobody(move || {
        std::fs::rename(&from, &challenge).expect("rename into /tmp");
        claim(c)
    });
    assert_eq!(
        subject, None,
        "a file root made proved the attacker to be root"
    );
}

#[test]
fn a_local_user_still_logs_in_as_themself() {
    let server = TestServer::start(&["--acl", "unix:nobody=rl"]);
    let port = server.port;
    let subject = as_nobody(move || {
        let (c, challenge) = unix_challenge(port);
        std::fs::File::create(&challenge).unwrap();
        let subject = claim(c);
        let _ = std::fs::remove_file(&challenge);
        subject
    });
    assert_eq!(subject.as_deref(), Some("unix:nobody"));
}

#[test]
fn whoareyou_needs_the_admin_right() {
    let other = TestServer::start(&["--acl", "address:127.0.0.1=rl"]);
    let server = TestServer::start(&["--acl", "address:127.0.0.1=rwldp"]);
    let mut c = server.connect();
    let n = c.rpc(&format!("whoareyou 127.0.0.1:{} 100", other.port));
    assert_eq!(n, roost_testkit::serve::code(libc::EACCES));
    let admin = TestServer::start(&["--acl", "address:127.0.0.1=rwlda"]);
    let mut c = admin.connect();
    let n = c.rpc(&format!("whoareyou 127.0.0.1:{} 100", other.port));
    assert!(n > 0, "an admin may still ask: {n}");
    assert_eq!(c.bytes(n as usize), b"address:127.0.0.1");
}

#[test]
fn hmac_guesses_are_slowed_per_address_not_per_connection() {
    let dir = tempfile::tempdir().unwrap();
    let keys = TestServer::with_keys(dir.path(), &["alice"]);
    let args: Vec<&str> = keys.iter().map(String::as_str).collect();
    let server = TestServer::start(&args);
    let started = std::time::Instant::now();
    let mut guesses = 0;
    while started.elapsed() < Duration::from_secs(2) {
        // A fresh connection per guess, as a brute-forcer would use to dodge a
        // per-connection limit.
        let mut c = Raw::connect(server.port);
        assert_eq!(c.auth_hmac("alice", b"wrong guess"), None);
        guesses += 1;
    }
    assert!(
        guesses <= 40,
        "{guesses} wrong hmac answers in 2 s from one address"
    );
    // The right secret from another address still gets in at once.
    let mut c = Raw::connect_from(server.port, "127.0.0.2");
    assert_eq!(
        c.auth_hmac("alice", b"ecila").as_deref(),
        Some("hmac:alice")
    );
}

#[test]
fn key_files_others_can_read_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("open.key");
    std::fs::write(&key, "secret").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    // Before the fix the server started with the key: stop it rather than wait forever.
    let mut serve = std::process::Command::new(env!("CARGO_BIN_EXE_roost"))
        .args(["serve", "--port", "0", "--key"])
        .arg(format!("k={}", key.display()))
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while serve.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = serve.kill();
    let out = serve.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(2), "the server started with it");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&key.display().to_string()) && err.contains("chmod 600"),
        "{err}"
    );
    // The client refuses it too.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_roost"))
        .args(["ls", "--key"])
        .arg(format!("k={}", key.display()))
        .arg("chirp://127.0.0.1:1/")
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("chmod 600"), "{err}");
}
