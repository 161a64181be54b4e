//! Every RPC of `roost serve`, spoken byte by byte over a real socket on 127.0.0.1.

use roost_testkit::peer;
use roost_testkit::serve::{code, enc, TestServer};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

const ALL: &[&str] = &["--acl", "address:127.0.0.1=rwldpax"];

fn stat_fields(line: &[u8]) -> Vec<i64> {
    String::from_utf8_lossy(line)
        .split(' ')
        .map(|w| w.parse().unwrap())
        .collect()
}

#[test]
fn open_write_read_stat_truncate_close() {
    let server = TestServer::start(ALL);
    let mut c = server.connect();
    let fd = c.rpc("open /f rwc 420");
    assert!(fd >= 0, "open gave {fd}");
    let st = stat_fields(&c.line());
    assert_eq!(st.len(), 13);
    assert_eq!(st[7], 0, "new file is empty");
    assert_eq!(c.rpc_with(&format!("pwrite {fd} 11 0"), b"hello world"), 11);
    assert_eq!(c.rpc(&format!("pread {fd} 5 6")), 5);
    assert_eq!(c.bytes(5), b"world");
    assert_eq!(c.rpc(&format!("fstat {fd}")), 0);
    assert_eq!(stat_fields(&c.line())[7], 11);
    assert_eq!(c.rpc(&format!("ftruncate {fd} 5")), 0);
    assert_eq!(c.rpc(&format!("fsync {fd}")), 0);
    assert_eq!(c.rpc(&format!("fchmod {fd} 384")), 0);
    assert_eq!(c.rpc(&format!("fstatfs {fd}")), 0);
    assert_eq!(c.line().split(|&b| b == b' ').count(), 7);
    assert_eq!(c.rpc(&format!("close {fd}")), 0);
    assert_eq!(c.rpc(&format!("close {fd}")), code(libc::EBADF));
    assert_eq!(fs::read(server.root().join("f")).unwrap(), b"hello");
    assert_eq!(
        fs::metadata(server.root().join("f"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
}

#[test]
fn open_flags_exclusive_append_and_read_only() {
    let server = TestServer::start(ALL);
    fs::write(server.root().join("x"), b"abc").unwrap();
    let mut c = server.connect();
    assert_eq!(c.rpc("open /x wcx 420"), code(libc::EEXIST));
    let fd = c.rpc("open /x wa 0");
    c.line();
    assert_eq!(c.rpc_with(&format!("pwrite {fd} 3 0"), b"def"), 3);
    assert_eq!(fs::read(server.root().join("x")).unwrap(), b"abcdef");
    let ro = c.rpc("open /x r 0");
    c.line();
    assert_eq!(
        c.rpc_with(&format!("pwrite {ro} 1 0"), b"z"),
        code(libc::EBADF)
    );
    assert_eq!(c.rpc(&format!("ftruncate {ro} 0")), code(libc::EBADF));
    assert_eq!(c.rpc("open /missing r 0"), code(libc::ENOENT));
    let t = c.rpc("open /x wt 0");
    c.line();
    assert!(t >= 0);
    assert_eq!(fs::read(server.root().join("x")).unwrap(), b"");
}

#[test]
fn offsets_beyond_four_gib_in_sparse_files() {
    let server = TestServer::start(ALL);
    let mut c = server.connect();
    let fd = c.rpc("open /sparse rwc 420");
    c.line();
    let far: u64 = 5 << 30;
    assert_eq!(c.rpc_with(&format!("pwrite {fd} 4 {far}"), b"tail"), 4);
    assert_eq!(c.rpc(&format!("fstat {fd}")), 0);
    assert_eq!(stat_fields(&c.line())[7] as u64, far + 4);
    assert_eq!(c.rpc(&format!("pread {fd} 10 {}", far + 2)), 2);
    assert_eq!(c.bytes(2), b"il");
    assert_eq!(c.rpc(&format!("pread {fd} 4 {}", 1u64 << 32)), 4);
    assert_eq!(c.bytes(4), [0, 0, 0, 0]);
    assert_eq!(
        c.rpc(&format!("pread {fd} 4 {}", far + 100)),
        0,
        "reads past the end are empty"
    );
    assert!(
        fs::metadata(server.root().join("sparse")).unwrap().blocks() < 1024,
        "file stays sparse"
    );
}

#[test]
fn empty_files_long_names_and_unicode_names() {
    let server = TestServer::start(ALL);
    fs::write(server.root().join("empty"), b"").unwrap();
    let mut c = server.connect();
    assert_eq!(c.rpc("getfile /empty"), 0);
    let fd = c.rpc("open /empty r 0");
    c.line();
    assert_eq!(c.rpc(&format!("pread {fd} 100 0")), 0);

    let long = "n".repeat(255);
    assert_eq!(c.rpc_with(&format!("putfile /{long} 420 2"), b""), 0);
    c.send(b"ok");
    assert_eq!(c.result(), 2);
    assert_eq!(fs::read(server.root().join(&long)).unwrap(), b"ok");
    let too_long = "n".repeat(256);
    assert_eq!(
        c.rpc(&format!("mkdir /{too_long} 493")),
        code(libc::ENAMETOOLONG)
    );

    let name = "données-日本語 ✓.txt";
    assert_eq!(
        c.rpc(&format!("putfile {} 420 3", enc(&format!("/{name}")))),
        0
    );
    c.send(b"uni");
    assert_eq!(c.result(), 3);
    assert_eq!(fs::read(server.root().join(name)).unwrap(), b"uni");
    assert_eq!(c.rpc("getdir /"), 0);
    let names = c.list();
    assert!(names.contains(&name.to_string()), "{names:?}");
    assert!(names.contains(&".".to_string()) && names.contains(&"..".to_string()));
}

#[test]
fn name_operations() {
    let server = TestServer::start(ALL);
    let root = server.root().to_path_buf();
    fs::write(root.join("a"), b"12345").unwrap();
    let mut c = server.connect();
    assert_eq!(c.rpc("stat /a"), 0);
    assert_eq!(stat_fields(&c.line())[7], 5);
    assert_eq!(c.rpc("symlink a /l"), 0);
    assert_eq!(c.rpc("lstat /l"), 0);
    assert_eq!(
        stat_fields(&c.line())[2] as u32 & libc::S_IFMT,
        libc::S_IFLNK
    );
    assert_eq!(c.rpc("readlink /l 100"), 1);
    assert_eq!(c.bytes(1), b"a");
    assert_eq!(c.rpc("access /a 4"), 0);
    assert_eq!(c.rpc("access /nope 0"), code(libc::ENOENT));
    assert_eq!(c.rpc("chmod /a 256"), 0);
    assert_eq!(
        fs::metadata(root.join("a")).unwrap().permissions().mode() & 0o777,
        0o400
    );
    assert_eq!(
        c.rpc("chown /a 1 1"),
        0,
        "accepted and ignored, as cctools does"
    );
    assert_eq!(c.rpc("lchown /l 1 1"), 0);
    assert_eq!(c.rpc("truncate /a 2"), 0);
    assert_eq!(fs::read(root.join("a")).unwrap(), b"12");
    assert_eq!(c.rpc("utime /a 1000 2000"), 0);
    assert_eq!(fs::metadata(root.join("a")).unwrap().mtime(), 2000);
    assert_eq!(c.rpc("link /a /b"), 0);
    assert_eq!(fs::metadata(root.join("b")).unwrap().nlink(), 2);
    assert_eq!(c.rpc("rename /b /c"), 0);
    assert!(root.join("c").exists() && !root.join("b").exists());
    assert_eq!(c.rpc("unlink /c"), 0);
    assert_eq!(c.rpc("unlink /c"), code(libc::ENOENT));
    assert_eq!(c.rpc("mkdir /d 493"), 0);
    assert_eq!(c.rpc("mkdir /d 493"), code(libc::EEXIST));
    assert_eq!(c.rpc("mkdir /d/e 493"), 0);
    fs::write(root.join("d/e/f"), b"x").unwrap();
    assert_eq!(c.rpc("rmdir /d"), code(libc::ENOTEMPTY));
    assert_eq!(c.rpc("getlongdir /d"), 0);
    let long = c.list();
    let e = long.iter().position(|l| l == "e").expect("e listed");
    assert_eq!(long[e + 1].split(' ').count(), 13);
    assert_eq!(c.rpc("rmdir /d/e/f"), code(libc::ENOTDIR));
    assert_eq!(c.rpc("rmall /d"), 0);
    assert!(!root.join("d").exists());
    assert_eq!(c.rpc("statfs /"), 0);
    assert_eq!(c.line().split(|&b| b == b' ').count(), 7);
}

#[test]
fn whole_files_streams_and_digests() {
    let server = TestServer::start(ALL);
    let root = server.root().to_path_buf();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let mut c = server.connect();
    assert_eq!(c.rpc(&format!("putfile /big 420 {}", data.len())), 0);
    c.send(&data);
    assert_eq!(c.result(), data.len() as i64);
    assert_eq!(c.rpc("getfile /big"), data.len() as i64);
    assert_eq!(c.bytes(data.len()), data);
    assert_eq!(c.rpc("md5 /big"), 16);
    let md5 = c.bytes(16);
    assert_eq!(c.rpc("hash sha256 /big"), 32);
    c.bytes(32);
    assert_eq!(c.rpc("hash crc99 /big"), code(libc::EINVAL));
    assert_eq!(c.rpc("getfile /"), code(libc::EISDIR));
    let out = std::process::Command::new("md5sum")
        .arg(root.join("big"))
        .output()
        .unwrap();
    let hex: String = md5.iter().map(|b| format!("{b:02x}")).collect();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with(&hex));

    let mut s = server.connect();
    assert_eq!(s.rpc("getstream /big"), 0);
    let streamed = s.bytes(data.len());
    assert_eq!(streamed, data);
    assert!(s.closed(), "getstream ends with the connection");

    let mut p = server.connect();
    assert_eq!(p.rpc("putstream /streamed"), 0);
    p.send(b"streamed bytes");
    p.writer.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(p.closed());
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(fs::read(root.join("streamed")).unwrap(), b"streamed bytes");
}

#[test]
fn strided_reads_and_writes() {
    let server = TestServer::start(ALL);
    fs::write(server.root().join("s"), b"0123456789abcdef").unwrap();
    let mut c = server.connect();
    let fd = c.rpc("open /s rw 0");
    c.line();
    // 2 bytes every 4, from offset 1: "12" "56" "9a" "de"
    assert_eq!(c.rpc(&format!("sread {fd} 8 2 4 1")), 8);
    assert_eq!(c.bytes(8), b"12569ade");
    assert_eq!(c.rpc_with(&format!("swrite {fd} 4 1 2 0"), b"WXYZ"), 4);
    assert_eq!(
        fs::read(server.root().join("s")).unwrap(),
        b"W1X3Y5Z789abcdef"
    );
    assert_eq!(c.rpc(&format!("sread {fd} 8 0 4 0")), code(libc::EINVAL));
}

#[test]
fn identity_acls_and_xattrs() {
    let server = TestServer::start(ALL);
    fs::write(server.root().join("x"), b"").unwrap();
    let mut c = server.connect();
    assert_eq!(c.rpc("whoami 100"), 17);
    assert_eq!(c.bytes(17), b"address:127.0.0.1");
    assert_eq!(c.rpc("whoami 7"), 7);
    assert_eq!(c.bytes(7), b"address");
    assert_eq!(c.rpc("getacl /"), 0);
    assert_eq!(c.list(), vec!["address:127.0.0.1 rwldpax"]);
    assert_eq!(c.rpc("setacl / unix:alice rl"), 0);
    assert_eq!(c.rpc("getacl /"), 0);
    assert_eq!(c.list(), vec!["address:127.0.0.1 rwldpax", "unix:alice rl"]);
    assert_eq!(c.rpc("setacl / unix:alice zz"), code(libc::EINVAL));
    assert_eq!(c.rpc("resetacl / rl"), 0);
    assert_eq!(c.rpc("getacl /"), 0);
    assert_eq!(c.list(), vec!["address:127.0.0.1 rla"]);

    let mut c = {
        let server2 = &server;
        server2.connect()
    };
    // resetacl left us r, l and a: writes are refused from here on.
    assert_eq!(c.rpc("mkdir /m 493"), code(libc::EACCES));
    assert_eq!(c.rpc("setacl / address:127.0.0.1 rwlda"), 0);
    let set = c.rpc_with("setxattr /x user.color 4 0", b"blue");
    let xattrs = peer::needs(
        set != code(libc::EOPNOTSUPP),
        "user xattrs on the file system of the temporary directory",
        "TMPDIR on a file system with user xattrs (ext4, xfs, tmpfs of Linux 6.6 or later)",
    );
    if !xattrs {
        return;
    }
    assert_eq!(set, 0);
    assert_eq!(c.rpc("getxattr /x user.color"), 4);
    assert_eq!(c.bytes(4), b"blue");
    let n = c.rpc("listxattr /x");
    assert!(String::from_utf8_lossy(&c.bytes(n as usize)).contains("user.color"));
    let fd = c.rpc("open /x rw 0");
    c.line();
    assert_eq!(c.rpc(&format!("fgetxattr {fd} user.color")), 4);
    assert_eq!(c.bytes(4), b"blue");
    assert_eq!(
        c.rpc_with(&format!("fsetxattr {fd} user.size 1 0"), b"L"),
        0
    );
    let n = c.rpc(&format!("flistxattr {fd}"));
    assert!(String::from_utf8_lossy(&c.bytes(n as usize)).contains("user.size"));
    assert_eq!(c.rpc(&format!("fremovexattr {fd} user.size")), 0);
    assert_eq!(c.rpc("removexattr /x user.color"), 0);
    let missing = c.rpc("getxattr /x user.color");
    assert_eq!(missing, code(libc::ENODATA));
    assert_ne!(
        missing,
        roost_wire::ErrorCode::Disconnected.as_i64(),
        "not a lost connection"
    );
    assert_eq!(c.rpc("lgetxattr /x user.none"), code(libc::ENODATA));
}

#[test]
fn unsupported_rpcs_answer_not_supported_and_keep_the_connection() {
    let server = TestServer::start(ALL);
    let mut c = server.connect();
    let not_supported = roost_wire::ErrorCode::NotSupported.as_i64();
    assert_eq!(c.rpc_with("job_create 5", b"{...}"), not_supported);
    assert_eq!(c.rpc("lsalloc /"), not_supported);
    assert_eq!(c.rpc("mkalloc /a 100 493"), not_supported);
    assert_eq!(c.rpc("whoami 100"), 17);
}

#[test]
fn explain_names_the_missing_right_of_the_last_refusal() {
    let server = TestServer::start(&["--acl", "address:127.0.0.1=rl"]);
    let mut c = server.connect();
    assert_eq!(c.rpc("explain"), 0, "nothing refused yet");
    assert_eq!(c.rpc("mkdir /x 493"), code(libc::EACCES));
    let n = c.rpc("explain");
    assert_eq!(c.bytes(n as usize), b"needs 'w' on /");
}

#[test]
fn whoareyou_reports_the_subject_this_server_gets_elsewhere() {
    let other = TestServer::start(&[]);
    // whoareyou is an owner's request: the caller needs `a` on `/`.
    let server = TestServer::start(&["--acl", "address:127.0.0.1=rwldpax"]);
    let mut c = server.connect();
    // The server connects as cctools' does, by address: never as its own unix user.
    let n = c.rpc(&format!("whoareyou 127.0.0.1:{} 100", other.port));
    assert!(n > 0, "whoareyou failed: {n}");
    assert_eq!(c.bytes(n as usize), b"address:127.0.0.1");
    assert!(
        c.rpc("whoareyou 127.0.0.1:1 100") < 0,
        "an unreachable server is an error"
    );
}

#[test]
fn hostname_authentication_is_confirmed_both_ways() {
    // 127.0.0.1 is "localhost" in /etc/hosts, and "localhost" resolves back to 127.0.0.1.
    let server = TestServer::start(&["--acl", "hostname:localhost=rl"]);
    let mut c = roost_testkit::serve::Raw::connect(server.port);
    assert_eq!(c.auth("hostname").as_deref(), Some("hostname:localhost"));
    assert_eq!(c.rpc("getdir /"), 0);
    c.list();
    let only_unix = TestServer::start(&["--auth", "unix"]);
    let mut refused = roost_testkit::serve::Raw::connect(only_unix.port);
    assert_eq!(
        refused.auth("hostname"),
        None,
        "a method the server does not run is refused"
    );
}

#[test]
fn the_server_keeps_quiet_connections_probed() {
    let server = TestServer::start(ALL);
    let _c = server.connect();
    let out = std::process::Command::new("ss")
        .args([
            "-tno",
            "state",
            "established",
            &format!("( sport = :{} )", server.port),
        ])
        .output()
        .expect("ss (iproute2) runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("timer:(keepalive"),
        "server socket without keepalive: {text}"
    );
}

#[test]
fn large_writes_land_intact_and_refused_ones_keep_the_stream_in_step() {
    let server = TestServer::start(ALL);
    let mut c = server.connect();
    let fd = c.rpc("open /big rwc 420");
    c.line();
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 253) as u8).collect();
    assert_eq!(
        c.rpc_with(&format!("pwrite {fd} {} 7", data.len()), &data),
        data.len() as i64
    );
    let on_disk = fs::read(server.root().join("big")).unwrap();
    assert_eq!(&on_disk[7..], &data[..]);
    // Beyond the largest file size the file system allows: refused after the payload is
    // consumed, and the next request is understood.
    let far = i64::MAX as u64 - 1000;
    let refused = c.rpc_with(&format!("pwrite {fd} 200000 {far}"), &vec![1u8; 200_000]);
    assert!(
        refused < 0,
        "a write past the maximum file size must fail, got {refused}"
    );
    assert_eq!(c.rpc("whoami 100"), 17);
    assert_eq!(c.bytes(17), b"address:127.0.0.1");
}

#[test]
fn large_preads_carry_exact_bytes_up_to_the_end_of_the_file() {
    // Reads of 64 KiB and more leave a regular file by sendfile: the count in the result
    // line and the bytes after it must still be exact, near and past the end of the file,
    // and requests pipelined behind them must stay in step.
    let server = TestServer::start(ALL);
    let content: Vec<u8> = (0..300 * 1024u32).map(|i| (i * 7 % 251) as u8).collect();
    fs::write(server.root().join("big"), &content).unwrap();
    let mut c = server.connect();
    let fd = c.rpc("open /big r 0");
    assert!(fd >= 0);
    c.line();
    let k = 1024usize;
    let cases = [
        (0, 128 * k),
        (100 * k + 3, 64 * k),
        (250 * k, 128 * k),
        (300 * k, 64 * k),
    ];
    // All at once, then the answers in order, with a small read between each pair.
    let mut pipelined = Vec::new();
    for (offset, length) in cases {
        pipelined.extend_from_slice(format!("pread {fd} {length} {offset}\n").as_bytes());
        pipelined.extend_from_slice(format!("pread {fd} 3 1\n").as_bytes());
    }
    c.send(&pipelined);
    for (offset, length) in cases {
        let expect = &content[offset.min(content.len())..(offset + length).min(content.len())];
        assert_eq!(
            c.result(),
            expect.len() as i64,
            "pread {length} at {offset}"
        );
        assert_eq!(c.bytes(expect.len()), expect, "pread {length} at {offset}");
        assert_eq!(c.result(), 3);
        assert_eq!(c.bytes(3), &content[1..4]);
    }
    assert_eq!(c.rpc(&format!("close {fd}")), 0);
}

#[test]
fn large_preads_on_write_only_descriptors_are_refused_in_step() {
    // Such reads must fail before a count is promised (sendfile would fail after it).
    let server = TestServer::start(ALL);
    fs::write(server.root().join("w"), vec![7u8; 200 * 1024]).unwrap();
    let mut c = server.connect();
    let fd = c.rpc("open /w w 0");
    assert!(fd >= 0);
    c.line();
    c.send(format!("pread {fd} 131072 0\npread {fd} 3 0\n").as_bytes());
    assert_eq!(c.result(), -12, "BAD_FD");
    assert_eq!(c.result(), -12, "BAD_FD");
    assert_eq!(c.rpc("whoami 100"), 17);
    assert_eq!(c.bytes(17), b"address:127.0.0.1");
}

#[test]
fn whole_file_replies_carry_exact_bytes_past_one_sendfile() {
    // getfile and getstream send file data by sendfile in 1 MiB calls: a file of several
    // calls and a ragged end must arrive whole, and getfile's connection stays in step.
    let server = TestServer::start(ALL);
    let content: Vec<u8> = (0..(3 << 20) + 4321u32).map(|i| (i % 253) as u8).collect();
    fs::write(server.root().join("f"), &content).unwrap();
    let mut c = server.connect();
    assert_eq!(c.rpc("getfile /f"), content.len() as i64);
    assert!(c.bytes(content.len()) == content);
    assert_eq!(c.rpc("whoami 100"), 17);
    assert_eq!(c.bytes(17), b"address:127.0.0.1");
    assert_eq!(c.rpc("getstream /f"), 0);
    assert!(c.bytes(content.len()) == content);
    assert!(c.closed(), "getstream ends the connection after the file");
}
