//! Attacks on `roost serve` found in review, each kept out by a test: racing renames against
//! ACL changes, trees too deep for a thread's stack, memory-filling payloads, borrowed
//! identities, setuid bits and privileged attributes, FIFOs, and protocol corner cases.

mod serve_support;

use serve_support::{code, Raw, TestServer};
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
    serve_support::mkfifo(&server.root().join("pipe"));
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
