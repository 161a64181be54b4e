//! Appends on `roost serve`: a descriptor opened with `a` writes every request's payload
//! at the end of the file in one piece, however many clients append at once on their own
//! connections, as `O_APPEND` writes do on a local file; and an append the client gave up
//! on (it reset the connection before the server read it) is never made, so that a client
//! retrying it on a new connection cannot have it made twice.

use roost_testkit::serve::{Raw, TestServer};
use std::collections::HashMap;
use std::time::Duration;

const ALL: &[&str] = &["--acl", "address:127.0.0.1=rwldpax"];

/// Opens `/log` for appending on a new connection; returns it and the descriptor.
fn open_append(server: &TestServer) -> (Raw, i64) {
    let mut c = server.connect();
    let fd = c.rpc("open /log wca 420");
    assert!(fd >= 0, "open gave {fd}");
    c.line(); // its stat
    (c, fd)
}

/// Two connections append records at once, each `count` records of `size` bytes (a tag,
/// a number, filler, a newline); returns the file as the server left it.
fn append_at_once(size: usize, count: usize) -> Vec<u8> {
    let server = TestServer::start(ALL);
    let writers: Vec<_> = ["A", "B"]
        .into_iter()
        .map(|tag| {
            let (mut c, fd) = open_append(&server);
            std::thread::spawn(move || {
                for i in 0..count {
                    let head = format!("{tag} {i} ");
                    let mut record = head.into_bytes();
                    record.resize(size - 1, tag.as_bytes()[0].to_ascii_lowercase());
                    record.push(b'\n');
                    let n = c.rpc_with(&format!("pwrite {fd} {size} 0"), &record);
                    assert_eq!(n, size as i64);
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    std::fs::read(server.root().join("log")).unwrap()
}

/// Each record of the file whole and each writer's in order: the records, as the test
/// wrote them, by writer.
fn records_by_writer(file: &[u8], size: usize) -> HashMap<u8, Vec<usize>> {
    let mut seen: HashMap<u8, Vec<usize>> = HashMap::new();
    for record in file.split_inclusive(|&b| b == b'\n') {
        assert_eq!(
            record.len(),
            size,
            "a record cut or mixed with another: {:?}",
            String::from_utf8_lossy(&record[..record.len().min(40)])
        );
        let text = String::from_utf8_lossy(&record[..20.min(size)]).into_owned();
        let mut words = text.split(' ');
        let tag = words.next().unwrap().as_bytes()[0];
        let number: usize = words.next().unwrap().parse().unwrap();
        let filler = tag.to_ascii_lowercase();
        assert!(
            record[..size - 1]
                .iter()
                .rev()
                .take(size / 2)
                .all(|&b| b == filler),
            "record {} {number} holds another's bytes",
            tag as char
        );
        seen.entry(tag).or_default().push(number);
    }
    seen
}

#[test]
fn small_appends_from_two_connections_all_land_whole() {
    let (size, count) = (64, 2000);
    let file = append_at_once(size, count);
    let seen = records_by_writer(&file, size);
    for tag in [b'A', b'B'] {
        assert_eq!(seen[&tag], (0..count).collect::<Vec<_>>());
    }
}

/// A record larger than the server's chunk of payload (256 KiB) lands in one piece too:
/// the server used to write it chunk by chunk as it arrived, and the other connection's
/// chunks fell in between.
#[test]
fn large_appends_from_two_connections_are_never_interleaved() {
    let (size, count) = (1 << 20, 24);
    let file = append_at_once(size, count);
    let seen = records_by_writer(&file, size);
    for tag in [b'A', b'B'] {
        assert_eq!(seen[&tag], (0..count).collect::<Vec<_>>());
    }
}

/// The server is stopped while a client sends an append and then resets the connection
/// (as roost's client does when it gives a connection up): continued, the server finds the
/// request in its socket but must not make it.
#[test]
fn an_append_on_a_connection_the_client_reset_is_not_made() {
    let server = TestServer::start(ALL);
    std::fs::write(server.root().join("log"), b"first\n").unwrap();
    let (mut c, fd) = open_append(&server);
    assert_eq!(c.rpc_with(&format!("pwrite {fd} 7 0"), b"second\n"), 7);
    let pid = server.pid() as i32;
    // SAFETY: plain signals to the server this test started.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    wait_stopped(pid);
    c.send(format!("pwrite {fd} 6 0\nthird\n").as_bytes());
    std::thread::sleep(Duration::from_millis(100));
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket and a plain-data option of the size given.
    unsafe {
        use std::os::fd::AsRawFd;
        libc::setsockopt(
            c.writer.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(c);
    std::thread::sleep(Duration::from_millis(100));
    unsafe { libc::kill(pid, libc::SIGCONT) };
    // The same request on a live connection is made: by then the reset one was read.
    let (mut d, fd) = open_append(&server);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(d.rpc_with(&format!("pwrite {fd} 7 0"), b"fourth\n"), 7);
    assert_eq!(
        std::fs::read_to_string(server.root().join("log")).unwrap(),
        "first\nsecond\nfourth\n"
    );
}

/// Waits until every thread of process `pid` has stopped (a thread busy on another CPU
/// takes the stop a moment after kill returns, and could read the next request first).
fn wait_stopped(pid: i32) {
    let stopped = || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .map(|t| std::fs::read_to_string(t.unwrap().path().join("stat")).unwrap_or_default())
            .all(|stat| {
                stat.rsplit(") ")
                    .next()
                    .is_some_and(|rest| rest.starts_with('T'))
            })
    };
    let start = std::time::Instant::now();
    while !stopped() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the server never stopped"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
