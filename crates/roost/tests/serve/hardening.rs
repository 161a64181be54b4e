//! Attacks on `roost serve` found in review, each kept out by a test: racing renames against
//! ACL changes, trees too deep for a thread's stack, memory-filling payloads, borrowed
//! identities, setuid bits and privileged attributes, FIFOs, and protocol corner cases.

use roost_testkit::serve::{code, Raw, TestServer};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const ALL: &[&str] = &["--acl", "address:127.0.0.1=rwldpa"];

#[test]
fn racing_renames_cannot_redirect_an_acl_change_or_a_read() {
    let server = TestServer::start(&["--acl", "address:127.0.0.1=rwlda"]);
    let root = server.root().to_path_buf();
    fs::create_dir(root.join("victim")).unwrap();
    fs::write(root.join("victim/.__acl"), "unix:alice rwlda\n").unwrap();
    fs::write(root.join("victim/secret"), "TOPSECRET").unwrap();
    fs::create_dir(root.join("mine")).unwrap();
    fs::write(root.join("mine/secret"), "mine").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let mut c = server.connect();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // Pipelined, so the swaps follow each other as fast as the server allows.
                c.send(
                    b"rename /mine /hide\nsymlink victim /mine\nunlink /mine\nrename /hide /mine\n",
                );
                for _ in 0..4 {
                    c.result();
                }
            }
        })
    };
    let mut c = server.connect();
    for _ in 0..3000 {
        c.rpc("setacl /mine address:127.0.0.1 rwlda");
        let n = c.rpc("getfile /mine/secret");
        if n >= 0 {
            assert_eq!(
                c.bytes(n as usize),
                b"mine",
                "read through a swapped-in symlink"
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert_eq!(
        fs::read_to_string(root.join("victim/.__acl")).unwrap(),
        "unix:alice rwlda\n"
    );
}

#[test]
fn removing_a_very_deep_tree_does_not_overflow_a_stack() {
    let mut server = TestServer::start(ALL);
    // 5,000 levels, made relative to each parent's descriptor (the path is far too long for
    // any single system call).
    let top = std::ffi::CString::new(
        server
            .root()
            .join("deep")
            .into_os_string()
            .into_encoded_bytes(),
    )
    .unwrap();
    unsafe {
        assert_eq!(libc::mkdir(top.as_ptr(), 0o755), 0);
        let mut fd = libc::open(top.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
        for _ in 0..5000 {
            assert_eq!(libc::mkdirat(fd, c"d".as_ptr(), 0o755), 0);
            let next = libc::openat(fd, c"d".as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY);
            libc::close(fd);
            fd = next;
        }
        libc::close(fd);
    }
    let mut c = server.connect();
    assert_eq!(c.rpc("rmall /deep"), 0);
    assert!(!server.root().join("deep").exists());
    assert!(server.alive());
}

#[test]
fn payloads_cannot_fill_the_servers_memory() {
    let server = TestServer::start(&["--acl", "unix:nobody=rl"]);
    let mut c = server.connect();
    let too_big = roost_wire::ErrorCode::TooBig.as_i64();
    // An attribute value past Linux's own 64 KiB limit is read, dropped and refused.
    assert_eq!(
        c.rpc_with("setxattr /x user.a 70000 0", &vec![0u8; 70_000]),
        too_big
    );
    // Larger payloads than the default message limit (16 MiB) are refused the same way.
    let n = 17 << 20;
    assert_eq!(
        c.rpc_with(&format!("swrite 0 {n} 1 1 0"), &vec![0u8; n]),
        too_big
    );
    assert_eq!(c.rpc("whoami 100"), 17, "the stream stayed in step");
}

#[test]
fn unix_authentication_refuses_a_hard_link_to_another_users_file() {
    let server = TestServer::start(&[]);
    let other = tempfile::NamedTempFile::new_in("/tmp").unwrap();
    let mut c = Raw::connect(server.port);
    c.send(b"unix\n");
    assert_eq!(c.line(), b"yes");
    let challenge = String::from_utf8(c.line()).unwrap();
    fs::hard_link(other.path(), &challenge).unwrap();
    c.send(b"yes\n");
    assert_eq!(
        c.line(),
        b"no",
        "a hard link proves nothing about who made it"
    );
    let _ = fs::remove_file(&challenge);
}

#[test]
fn clients_cannot_set_setuid_bits_or_privileged_attributes() {
    let server = TestServer::start(ALL);
    fs::write(server.root().join("f"), b"#!/bin/sh\n").unwrap();
    let mut c = server.connect();
    assert_eq!(c.rpc(&format!("chmod /f {}", 0o6755)), 0);
    let mode = fs::metadata(server.root().join("f"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o755, "setuid and setgid are dropped");
    // A directory's setgid bit (new entries take its group) is kept; setuid is not.
    fs::create_dir(server.root().join("d")).unwrap();
    assert_eq!(c.rpc(&format!("chmod /d {}", 0o6775)), 0);
    let mode = fs::metadata(server.root().join("d"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o2775, "a directory keeps setgid only");
    let fd = c.rpc("open /g wc 3565");
    c.line();
    assert!(fd >= 0);
    assert_eq!(
        fs::metadata(server.root().join("g"))
            .unwrap()
            .permissions()
            .mode()
            & 0o7000,
        0
    );
    assert_eq!(c.rpc(&format!("fchmod {fd} {}", 0o4755)), 0);
    assert_eq!(
        fs::metadata(server.root().join("g"))
            .unwrap()
            .permissions()
            .mode()
            & 0o7000,
        0
    );
    assert_eq!(
        c.rpc_with("setxattr /f trusted.evil 1 0", b"x"),
        code(libc::EPERM)
    );
    assert_eq!(
        c.rpc_with("setxattr /f security.capability 1 0", b"x"),
        code(libc::EPERM)
    );
    assert_eq!(
        c.rpc_with(&format!("fsetxattr {fd} trusted.evil 1 0"), b"x"),
        code(libc::EPERM)
    );
    assert_eq!(c.rpc("removexattr /f trusted.evil"), code(libc::EPERM));
}

#[test]
fn whole_file_requests_on_a_fifo_answer_at_once() {
    let server = TestServer::start(ALL);
    roost_testkit::serve::mkfifo(&server.root().join("pipe"));
    let mut c = server.connect();
    for request in [
        "getfile /pipe",
        "md5 /pipe",
        "truncate /pipe 0",
        "getstream /pipe",
    ] {
        assert_eq!(c.rpc(request), code(libc::EINVAL), "{request}");
    }
}

#[test]
fn protocol_corner_cases() {
    let server = TestServer::start(ALL);
    let mut c = server.connect();
    // A large pwrite to a file opened for appending writes everything.
    let fd = c.rpc("open /log wac 420");
    c.line();
    assert_eq!(
        c.rpc_with(&format!("pwrite {fd} 100000 0"), &vec![7u8; 100_000]),
        100_000
    );
    assert_eq!(
        fs::metadata(server.root().join("log")).unwrap().len(),
        100_000
    );
    // putfile onto a directory is refused before any data is sent.
    assert_eq!(c.rpc("mkdir /dir 493"), 0);
    assert_eq!(c.rpc("putfile /dir 420 5"), code(libc::EISDIR));
    assert_eq!(c.rpc("whoami 100"), 17);
    c.bytes(17);
    // open with truncation behaves the same with or without a symlink on the way.
    fs::write(server.root().join("t"), b"data").unwrap();
    std::os::unix::fs::symlink("t", server.root().join("t-link")).unwrap();
    let a = c.rpc("open /t wt 0");
    c.line();
    assert!(a >= 0);
    assert_eq!(fs::metadata(server.root().join("t")).unwrap().len(), 0);
    fs::write(server.root().join("t"), b"data").unwrap();
    let b = c.rpc("open /t-link wt 0");
    c.line();
    assert!(b >= 0);
    assert_eq!(fs::metadata(server.root().join("t")).unwrap().len(), 0);
}

#[test]
fn names_cannot_be_probed_without_the_list_right() {
    let server = TestServer::start(&["--acl", "address:127.0.0.1=rwl"]);
    fs::create_dir(server.root().join("victim")).unwrap();
    fs::write(server.root().join("victim/.__acl"), "unix:alice rwlda\n").unwrap();
    fs::write(server.root().join("victim/secret"), "s").unwrap();
    let mut c = server.connect();
    for request in [
        "getdir /victim/nosuch",
        "getdir /victim/secret",
        "access /victim/nosuch 0",
        "access /victim/secret 0",
    ] {
        assert_eq!(c.rpc(request), code(libc::EACCES), "{request}");
    }
    // With the list right, the truth is told.
    assert_eq!(c.rpc("getdir /nosuch"), code(libc::ENOENT));
}

#[test]
fn rename_replaces_an_empty_directory_despite_its_acl_file() {
    let server = TestServer::start(ALL);
    let mut c = server.connect();
    assert_eq!(c.rpc("mkdir /a 493"), 0);
    assert_eq!(c.rpc("mkdir /b 493"), 0);
    fs::write(server.root().join("a/f"), b"x").unwrap();
    assert_eq!(c.rpc("rename /a /b"), 0);
    assert_eq!(fs::read(server.root().join("b/f")).unwrap(), b"x");
    // A directory with real entries is still protected.
    assert_eq!(c.rpc("mkdir /c 493"), 0);
    assert_eq!(c.rpc("rename /c /b"), code(libc::ENOTEMPTY));
    assert!(server.root().join("b/f").exists());
}

#[test]
fn a_refused_request_never_runs_its_payload_as_requests() {
    let server = TestServer::start(ALL);
    fs::write(server.root().join("f"), "keep me").unwrap();
    let mut c = server.connect();
    let fd = c.rpc("open /g wc 420");
    c.line();
    assert!(fd >= 0);
    // A bad offset: the 12 bytes that follow are data, never a request.
    let smuggled = b"unlink /f\n\n\n";
    let invalid = roost_wire::ErrorCode::InvalidRequest.as_i64();
    assert_eq!(c.rpc_with(&format!("pwrite {fd} 12 -1"), smuggled), invalid);
    assert_eq!(c.rpc_with("setxattr %00 user.a 12 0", smuggled), invalid);
    assert_eq!(c.rpc_with("swrite x 12 1 1 0", smuggled), invalid);
    assert_eq!(c.rpc("whoami 100"), 17, "the stream stayed in step");
    c.bytes(17);
    assert!(
        server.root().join("f").exists(),
        "the payload ran as a request"
    );
    // A length that cannot be read: answered at once, and the connection ends.
    c.send(b"pwrite 0 -8 0\nunlink /f\n");
    assert_eq!(c.result(), invalid);
    assert!(c.closed());
    assert!(server.root().join("f").exists());
    // A length cut off with an over-long line: the same.
    let mut c = server.connect();
    let long = format!("setxattr /{} user.a 10 0\nunlink /f\n", "a".repeat(2000));
    c.send(long.as_bytes());
    assert_eq!(c.result(), roost_wire::ErrorCode::TooBig.as_i64());
    assert!(c.closed());
    assert!(server.root().join("f").exists());
}

#[test]
fn dribbling_clients_cannot_hold_the_servers_slots() {
    let server = TestServer::start(&[
        "--acl",
        "address:127.0.0.1=rl",
        "--max-connections",
        "8",
        "--max-per-address",
        "8",
    ]);
    // Eight clients that send a byte a second and never finish a line: not logged in, and
    // logged in but mid-request.
    let stop = Arc::new(AtomicBool::new(false));
    let mut dribblers = Vec::new();
    for k in 0..8 {
        let port = server.port;
        let stop = stop.clone();
        dribblers.push(std::thread::spawn(move || {
            let mut c = Raw::connect(port);
            if k % 2 == 1 {
                c.auth_ok("address");
            }
            let started = std::time::Instant::now();
            while !stop.load(Ordering::Relaxed) {
                use std::io::Write;
                if c.writer.write_all(b"a").is_err() {
                    return Some(started.elapsed());
                }
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            None
        }));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    // Within the handshake deadline (15 s) or the line deadline (10 s), slots free up.
    let started = std::time::Instant::now();
    let mut got_in = false;
    while started.elapsed() < std::time::Duration::from_secs(25) {
        if logs_in_and_answers(server.port) {
            got_in = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    stop.store(true, Ordering::Relaxed);
    assert!(got_in, "dribblers kept a client out for 25 s");
    for d in dribblers {
        if let Some(cut) = d.join().unwrap() {
            assert!(cut < std::time::Duration::from_secs(20), "{cut:?}");
        }
    }
    let log = server.log_text();
    assert!(
        log.contains("request line too slow") || log.contains("took too long"),
        "{log}"
    );
}

#[test]
fn one_address_cannot_take_every_slot() {
    let server = TestServer::start(&[
        "--acl",
        "address:127.0.0.*=rl",
        "--max-connections",
        "10",
        "--max-per-address",
        "3",
    ]);
    let held: Vec<_> = (0..3).map(|_| server.connect()).collect();
    let mut fourth = Raw::connect(server.port);
    fourth.send(b"address\n");
    assert!(
        fourth.closed(),
        "a fourth connection from one address is turned away"
    );
    let mut other = Raw::connect_from(server.port, "127.0.0.2");
    assert_eq!(other.auth_ok("address"), "address:127.0.0.2");
    drop(held);
    assert!(server
        .log_text()
        .contains("too many connections from this address"));
}

/// Whether a client can log in by address and get an answer (false if turned away).
fn logs_in_and_answers(port: u16) -> bool {
    use std::io::{BufRead, Write};
    let mut c = Raw::connect(port);
    if c.writer.write_all(b"address\nwhoami 100\n").is_err() {
        return false;
    }
    let mut lines = Vec::new();
    for _ in 0..6 {
        let mut line = String::new();
        if c.reader.read_line(&mut line).unwrap_or(0) == 0 {
            return false;
        }
        lines.push(line);
    }
    lines[5].trim() == "17"
}

/// The server's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn listings_of_a_huge_directory_cost_little_memory() {
    let server = TestServer::start(ALL);
    let big = server.root().join("big");
    fs::create_dir(&big).unwrap();
    for i in 0..60_000 {
        fs::File::create(big.join(format!("entry-with-a-longish-name-{i:06}"))).unwrap();
    }
    let before = rss_kib(server.pid());
    // Clients that ask for the long listing and never read it: each built whole in memory
    // (~15 MB here) before the fix.
    let mut readers = Vec::new();
    for _ in 0..24 {
        let mut c = server.connect();
        c.send(b"getlongdir /big\n");
        readers.push(c);
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    let during = rss_kib(server.pid());
    drop(readers);
    assert!(
        during < before + 40 * 1024,
        "24 unread listings grew the server from {before} KiB to {during} KiB"
    );
    // A client that does read gets every entry.
    let mut c = server.connect();
    assert_eq!(c.rpc("getdir /big"), 0);
    assert_eq!(c.list().len(), 60_000 + 2);
}

#[test]
fn a_restarted_server_removes_uploads_its_predecessor_left_half_done() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let mut server = TestServer::start_in(dir, ALL);
    let mut c = server.connect();
    assert_eq!(c.rpc("putfile /big 420 100000000"), 0);
    c.send(&vec![b'x'; 4 << 20]);
    let hidden = || {
        fs::read_dir(&root)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with(".__acl.put."))
            .count()
    };
    let started = std::time::Instant::now();
    while hidden() == 0 && started.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(hidden(), 1, "the upload is under way");
    // The server dies mid-upload, as kill -9 or a crash would end it.
    unsafe { libc::kill(server.pid() as i32, libc::SIGKILL) };
    while server.alive() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(c);
    assert_eq!(hidden(), 1, "a killed server cannot clean up");
    // Its successor sweeps the leftovers, once they predate it.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let keep = tempfile::tempdir().unwrap();
    let successor = std::process::Command::new(env!("CARGO_BIN_EXE_roost"))
        .arg("serve")
        .arg(&root)
        .args(["--listen", "127.0.0.1", "--port", "0", "--ledger"])
        .arg(keep.path().join("ledger"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut successor = KillOnDrop(successor);
    let started = std::time::Instant::now();
    while hidden() > 0 && started.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(hidden(), 0, "the new server left the half-done upload");
    assert!(!root.join("big").exists());
    let _ = successor.0.kill();
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
