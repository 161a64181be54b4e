//! Malformed input never takes `roost serve` down: truncated and huge lines, bad numbers,
//! unknown RPCs, binary garbage, and clients that vanish mid-transfer each get a clear error
//! (or a closed connection), and the next client is served as usual.

use roost_testkit::serve::{code, Raw, TestServer};
use std::io::Write;

const ALL: &[&str] = &["--acl", "address:127.0.0.1=rwldpax"];

fn still_serves(server: &mut TestServer) {
    assert!(server.alive(), "server died");
    let mut c = server.connect();
    assert_eq!(c.rpc("whoami 100"), 17);
    c.bytes(17);
}

#[test]
fn bad_lines_get_error_codes_and_the_connection_goes_on() {
    let mut server = TestServer::start(ALL);
    let mut c = server.connect();
    let invalid = roost_wire::ErrorCode::InvalidRequest.as_i64();
    assert_eq!(c.rpc("frobnicate /x"), invalid, "unknown RPC");
    assert_eq!(c.rpc("pread 0 ten 0"), invalid, "bad number");
    assert_eq!(
        c.rpc("pread 0 99999999999999999999999 0"),
        invalid,
        "number overflow"
    );
    assert_eq!(c.rpc("pread 0 -5 0"), invalid, "negative length");
    assert_eq!(c.rpc("open /x"), invalid, "missing arguments");
    assert_eq!(c.rpc("stat /a /b"), invalid, "extra argument");
    assert_eq!(c.rpc("open /x qz 0"), invalid, "bad flags");
    assert_eq!(c.rpc("stat /a%00b"), invalid, "NUL in a path");
    assert_eq!(c.rpc("stat /a%0Ab"), invalid, "newline in a path");
    assert_eq!(c.rpc("stat /a%zz"), invalid, "bad escape");
    assert_eq!(c.rpc("pread 77 10 0"), code(libc::EBADF));
    assert_eq!(c.rpc("whoami 100"), 17, "the connection still works");
    c.bytes(17);
    still_serves(&mut server);
}

#[test]
fn huge_lines_are_refused_without_buffering_them() {
    let mut server = TestServer::start(ALL);
    let mut c = server.connect();
    let mut huge = b"stat /".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 5 * 1024 * 1024));
    huge.push(b'\n');
    c.send(&huge);
    assert_eq!(c.result(), roost_wire::ErrorCode::TooBig.as_i64());
    assert_eq!(c.rpc("whoami 100"), 17);
    c.bytes(17);
    still_serves(&mut server);
}

#[test]
fn binary_garbage_and_truncated_lines() {
    let mut server = TestServer::start(ALL);
    for seed in 0..20u64 {
        let mut c = server.connect();
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let garbage: Vec<u8> = (0..4096)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 33) as u8
            })
            .collect();
        let _ = c.writer.write_all(&garbage);
        drop(c);
    }
    // A request cut off before its newline, then a hang-up.
    let mut c = server.connect();
    c.send(b"pread 0 10");
    drop(c);
    // Garbage before authentication.
    let mut raw = Raw::connect(server.port);
    raw.send(&[0xff; 3000]);
    drop(raw);
    still_serves(&mut server);
}

#[test]
fn clients_vanishing_mid_transfer_lose_nothing() {
    let mut server = TestServer::start(ALL);
    std::fs::write(server.root().join("keep"), b"original").unwrap();
    // putfile: announce 1 MB, send 10 bytes, vanish. The old contents stay.
    let mut c = server.connect();
    assert_eq!(c.rpc("putfile /keep 420 1000000"), 0);
    c.send(b"0123456789");
    drop(c);
    // pwrite: announce 100 bytes, send 3, vanish.
    let mut c = server.connect();
    let fd = c.rpc("open /other rwc 420");
    c.line();
    c.send(format!("pwrite {fd} 100 0\nabc").as_bytes());
    drop(c);
    // A large pwrite (spliced from the socket into the file), cut short.
    let mut c = server.connect();
    let fd = c.rpc("open /spliced rwc 420");
    c.line();
    let mut partial = format!("pwrite {fd} 10000000 0\n").into_bytes();
    partial.extend(vec![5u8; 300_000]);
    c.send(&partial);
    drop(c);
    // getfile of a large file, hanging up while it streams.
    std::fs::write(server.root().join("large"), vec![7u8; 8 << 20]).unwrap();
    let mut c = server.connect();
    c.send(b"getfile /large\n");
    drop(c);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        std::fs::read(server.root().join("keep")).unwrap(),
        b"original"
    );
    let leftovers: Vec<_> = std::fs::read_dir(server.root())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".__"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "temporary files left behind: {leftovers:?}"
    );
    still_serves(&mut server);
}

#[test]
fn oversized_payloads_are_consumed_and_refused() {
    let mut server = TestServer::start(&[
        "--acl",
        "address:127.0.0.1=rwldpax",
        "--max-message",
        "1000",
    ]);
    let mut c = server.connect();
    std::fs::write(server.root().join("f"), b"").unwrap();
    let payload = vec![b'x'; 5000];
    assert_eq!(
        c.rpc_with("setxattr /f user.big 5000 0", &payload),
        roost_wire::ErrorCode::TooBig.as_i64()
    );
    assert_eq!(c.rpc("whoami 100"), 17, "the stream stayed in step");
    c.bytes(17);
    still_serves(&mut server);
}

#[test]
fn connection_limit_and_idle_timeout() {
    let mut server = TestServer::start(&[
        "--acl",
        "address:127.0.0.1=rwldpax",
        "--max-connections",
        "2",
        "--idle-timeout",
        "1",
    ]);
    let a = server.connect();
    let b = server.connect();
    let mut third = Raw::connect(server.port);
    third.send(b"address\n");
    assert!(third.closed(), "a third connection is turned away");
    drop((a, b));
    std::thread::sleep(std::time::Duration::from_millis(200));
    let mut idle = server.connect();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    assert!(idle.closed(), "idle clients are disconnected");
    still_serves(&mut server);
    assert!(server.log_text().contains("too many connections"));
    assert!(server.log_text().contains("idle timeout"));
}

#[test]
fn a_fifo_in_the_export_never_hangs_the_server() {
    let mut server = TestServer::start(ALL);
    roost_testkit::serve::mkfifo(&server.root().join("pipe"));
    let mut c = server.connect();
    let fd = c.rpc("open /pipe r 0");
    assert!(fd >= 0, "a reader may open a FIFO without a writer: {fd}");
    c.line();
    assert_eq!(c.rpc(&format!("pread {fd} 10 0")), code(libc::ESPIPE));
    assert_eq!(c.rpc(&format!("close {fd}")), 0);
    assert_eq!(
        c.rpc("open /pipe w 0"),
        code(libc::ENXIO),
        "no reader: refused at once"
    );
    still_serves(&mut server);
}

#[test]
fn a_client_silent_before_authenticating_is_dropped() {
    let mut server = TestServer::start(ALL);
    let mut silent = Raw::connect(server.port);
    let started = std::time::Instant::now();
    assert!(silent.closed(), "the server hangs up");
    let waited = started.elapsed();
    assert!(
        waited < std::time::Duration::from_secs(15),
        "dropped after {waited:?}"
    );
    still_serves(&mut server);
}
