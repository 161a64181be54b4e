//! Commands that move data (issue 31, defects 4 and 6): an interrupted or failed `roost get`
//! (and `get -r`) never leaves a truncated file under the final name, nor destroys the file it
//! was replacing; transfers show progress with an ETA on a terminal, nothing on a pipe, and
//! `roost pcp` ends with a summary. The real `roost` binary against real `roost serve`
//! servers on 127.0.0.1.

use roost_testkit::serve::TestServer;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Size of the file an interrupted transfer is stopped in the middle of (sparse on the
/// server, so it costs nothing to make).
const BIG: u64 = 1 << 30;

fn roost() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_roost"));
    c.env_remove("ROOST_HMAC_KEY");
    c
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every regular file under `dir` (recursively, hidden ones included) with its size.
fn files(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let meta = e.metadata().unwrap();
        if meta.is_dir() {
            out.extend(files(&e.path()));
        } else {
            out.push((e.path(), meta.len()));
        }
    }
    out
}

/// Waits until some file under `dir` holds more than a megabyte: the big file's transfer is
/// under way.
fn wait_for_data(dir: &Path, child: &mut Child) {
    let started = Instant::now();
    while !files(dir).iter().any(|(_, len)| *len > 1 << 20) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the transfer ended before it was seen"
        );
        assert!(started.elapsed() < Duration::from_secs(30), "no data came");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn signal(pid: u32, sig: i32) {
    assert_eq!(unsafe { libc::kill(pid as i32, sig) }, 0);
}

/// Waits for `child` to end (at most 10 s); true if it ended by `sig` or by exit 128+sig.
fn ended_by(child: &mut Child, sig: i32) -> bool {
    use std::os::unix::process::ExitStatusExt;
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.signal() == Some(sig) || status.code() == Some(128 + sig);
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "roost did not stop on signal {sig}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts `roost get ARGS`, lets data arrive, freezes the server (so the transfer is surely
/// mid-way), then sends `sig` to the client.
fn interrupt_get(server: &TestServer, args: &[&str], dest: &Path, sig: i32) {
    let mut child = roost()
        .arg("get")
        .args(["--auth", "address"])
        .args(args)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_data(dest, &mut child);
    signal(server.pid(), libc::SIGSTOP);
    signal(child.id(), sig);
    let stopped = ended_by(&mut child, sig);
    signal(server.pid(), libc::SIGCONT);
    assert!(stopped, "roost get did not end by the signal");
}

fn sparse(path: &Path, len: u64) {
    std::fs::File::create(path).unwrap().set_len(len).unwrap();
}

#[test]
fn an_interrupted_get_leaves_no_partial_file() {
    let server = TestServer::start(&["--acl", "address:127.0.0.1=rl"]);
    sparse(&server.root().join("big"), BIG);
    let url = format!("chirp://127.0.0.1:{}/big", server.port);
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let dest = tempfile::tempdir().unwrap();
        let target = dest.path().join("big");
        interrupt_get(&server, &[&url, target.to_str().unwrap()], dest.path(), sig);
        assert_eq!(files(dest.path()), vec![], "left behind after signal {sig}");
    }
}

#[test]
fn an_interrupted_get_r_leaves_only_whole_files() {
    let server = TestServer::start(&["--acl", "address:127.0.0.1=rl"]);
    let tree = server.root().join("tree");
    std::fs::create_dir(&tree).unwrap();
    std::fs::write(tree.join("a-small"), b"small and whole\n").unwrap();
    sparse(&tree.join("b-big"), BIG);
    let url = format!("chirp://127.0.0.1:{}/tree", server.port);
    let dest = tempfile::tempdir().unwrap();
    let target = dest.path().join("tree");
    interrupt_get(
        &server,
        &["-r", &url, target.to_str().unwrap()],
        dest.path(),
        libc::SIGTERM,
    );
    let left = files(dest.path());
    for (path, len) in &left {
        let name = path.file_name().unwrap();
        let original = std::fs::metadata(tree.join(name))
            .unwrap_or_else(|_| panic!("{} is not a file of the tree", path.display()));
        assert_eq!(*len, original.len(), "{} is partial", path.display());
    }
}

#[test]
fn a_failed_get_keeps_the_file_it_would_have_replaced() {
    let server = TestServer::start(&["--acl", "address:127.0.0.1=rl"]);
    sparse(&server.root().join("big"), BIG);
    let url = format!("chirp://127.0.0.1:{}/big", server.port);
    let dest = tempfile::tempdir().unwrap();
    let target = dest.path().join("big");
    std::fs::write(&target, b"the previous version\n").unwrap();
    let child = roost()
        .args(["get", "--auth", "address", &url, target.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Data arrives in a file other than the old one (or, before, in the old one itself).
    let started = Instant::now();
    while !files(dest.path())
        .iter()
        .any(|(p, len)| *len > 0 && (p != &target || *len != 21))
    {
        assert!(started.elapsed() < Duration::from_secs(30), "no data came");
        std::thread::sleep(Duration::from_millis(1));
    }
    signal(server.pid(), libc::SIGKILL);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(
        std::fs::read(&target).unwrap(),
        b"the previous version\n",
        "the old file was lost"
    );
    assert_eq!(files(dest.path()).len(), 1, "{:?}", files(dest.path()));
}

/// Runs `command` (one shell line) with a terminal for its standard error (and output), and
/// returns all it wrote there.
fn on_a_terminal(command: &str) -> String {
    let out = Command::new("script")
        .args(["-qec", command, "/dev/null"])
        .env_remove("ROOST_HMAC_KEY")
        .stdin(Stdio::null())
        .output()
        .expect("run script");
    assert!(
        out.status.success(),
        "{command}: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A group directory of `n` members, `/copy` on servers that let address:127.0.0.1 write.
fn group(n: usize) -> (Vec<TestServer>, tempfile::TempDir) {
    let servers: Vec<TestServer> = (0..n)
        .map(|_| TestServer::start(&["--acl", "address:127.0.0.1=rwl"]))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    for (i, s) in servers.iter().enumerate() {
        std::os::unix::fs::symlink(
            format!("chirp://127.0.0.1:{}/copy", s.port),
            dir.path().join(format!("node{}", i + 1)),
        )
        .unwrap();
    }
    (servers, dir)
}

#[test]
fn transfers_show_progress_with_an_eta_on_a_terminal_only() {
    let server = TestServer::start(&["--acl", "address:127.0.0.1=rl"]);
    sparse(&server.root().join("f"), 64 << 20);
    let url = format!("chirp://127.0.0.1:{}/f", server.port);
    let dest = tempfile::tempdir().unwrap();
    let target = dest.path().join("f");
    let roost = env!("CARGO_BIN_EXE_roost");
    let shown = on_a_terminal(&format!(
        "{roost} get --auth address {url} {}",
        target.display()
    ));
    assert!(shown.contains("ETA"), "no ETA on a terminal: {shown:?}");

    let local = dest.path().join("src");
    std::fs::write(&local, vec![7u8; 8 << 20]).unwrap();
    let (_servers, members) = group(2);
    let shown = on_a_terminal(&format!(
        "{roost} pcp --auth address {} {}",
        local.display(),
        members.path().display()
    ));
    assert!(
        shown.contains("pcp") && shown.contains("ETA"),
        "no progress for pcp on a terminal: {shown:?}"
    );

    // Not a terminal: no bar, no escape sequences.
    let out = roost_get(&url, &target);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
}

fn roost_get(url: &str, target: &Path) -> Output {
    roost()
        .args(["get", "--auth", "address", url, target.to_str().unwrap()])
        .output()
        .unwrap()
}

#[test]
fn pcp_ends_with_a_summary() {
    let (servers, members) = group(3);
    let src = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(src.path(), vec![1u8; 300_000]).unwrap();
    let out = roost()
        .args(["pcp", "--auth", "address"])
        .arg(src.path())
        .arg(members.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let message = stderr(&out);
    assert!(
        message.contains("roost pcp: 3 members") && message.contains("300000 bytes"),
        "{message}"
    );
    assert!(
        !message.contains('\x1b'),
        "escape sequences on a pipe: {message:?}"
    );
    for s in &servers {
        assert_eq!(std::fs::read(s.root().join("copy")).unwrap().len(), 300_000);
    }
}
