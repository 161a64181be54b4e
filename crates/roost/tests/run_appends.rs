//! Appends to one remote file from several writers at once, through `roost run` in each
//! mode: programs writing through an `O_APPEND` descriptor and shells redirecting with
//! `>>`, in two runs, in two processes of one run and from two hosts (network namespaces).
//! Every line must be kept, each writer's in its order, as the same writers give on a local
//! file (the test runs them there too and compares).

use roost_testkit::peer;
use roost_testkit::remote::open_server;
use roost_testkit::run::roost;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Appends `TAG I\n` for I in 0..N to PATH, one write each, through one O_APPEND descriptor
/// opened before it waits for the other such writers (PARTIES in all, each leaving its name
/// in the local directory BARRIER), so that they all hold the file open at once.
const APPENDER: &str = "import os, sys, time
path, tag, n, barrier, parties = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
open(os.path.join(barrier, tag), 'w').close()
while len(os.listdir(barrier)) < parties:
    time.sleep(0.005)
for i in range(n):
    os.write(fd, b'%s %d\\n' % (tag.encode(), i))
os.close(fd)
";

/// What a writer does: `Python(tag, lines)` through one descriptor, `Shell(tag, lines)` one
/// `>>` per line.
#[derive(Clone, Copy)]
enum Writer {
    Python(&'static str, usize),
    Shell(&'static str, usize),
}

impl Writer {
    /// The shell command that runs it on `path`, with the appender script at `script` and
    /// its barrier `(directory, parties)`.
    fn command(self, script: &Path, path: &str, (barrier, parties): (&Path, usize)) -> String {
        match self {
            Writer::Python(tag, n) => format!(
                "python3 {} {path} {tag} {n} {} {parties}",
                script.display(),
                barrier.display()
            ),
            Writer::Shell(tag, n) => format!(
                "i=0; while [ $i -lt {n} ]; do echo \"{tag} $i\" >> {path} || exit 1; i=$((i+1)); done"
            ),
        }
    }
}

/// Scratch space: the appender script and the local file the writers are compared on.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("appender.py"), APPENDER).unwrap();
        Scratch { dir }
    }

    fn script(&self) -> PathBuf {
        self.dir.path().join("appender.py")
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs `groups` natively on a local file, each group one shell with its writers in
    /// the background, all groups at once: the file they leave.
    fn native(&self, groups: &[&[Writer]]) -> String {
        let log = self.path("native.log");
        let _ = std::fs::remove_file(&log);
        let children: Vec<Child> = groups
            .iter()
            .map(|g| {
                Command::new("sh")
                    .args([
                        "-c",
                        &self.group_script(groups, g, &log.display().to_string(), "native"),
                    ])
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut c in children {
            assert!(c.wait().unwrap().success());
        }
        std::fs::read_to_string(&log).unwrap()
    }

    /// One shell line running `writers`, a group of `all`, at once on `path` and waiting
    /// for them all; it fails if any does. The descriptor writers of `all` wait for each
    /// other in the barrier directory `barrier`.
    fn group_script(
        &self,
        all: &[&[Writer]],
        writers: &[Writer],
        path: &str,
        barrier: &str,
    ) -> String {
        let dir = self.path(barrier);
        let _ = std::fs::create_dir(&dir);
        let parties = all
            .iter()
            .flat_map(|g| g.iter())
            .filter(|w| matches!(w, Writer::Python(..)))
            .count();
        let mut s = String::from("pids=; ");
        for w in writers {
            let command = w.command(&self.script(), path, (&dir, parties));
            s += &format!("( {command} ) & pids=\"$pids $!\"; ");
        }
        s += "fail=0; for p in $pids; do wait $p || fail=1; done; exit $fail";
        s
    }
}

/// Each writer's numbers in the order the file holds them.
fn by_writer(text: &str) -> BTreeMap<String, Vec<usize>> {
    let mut seen: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for line in text.lines() {
        let (tag, n) = line
            .split_once(' ')
            .unwrap_or_else(|| panic!("a mangled line {line:?}"));
        let n = n
            .parse()
            .unwrap_or_else(|_| panic!("a mangled line {line:?}"));
        seen.entry(tag.to_string()).or_default().push(n);
    }
    seen
}

/// The remote file holds what the local one does: the same lines of each writer, each
/// once and in order (interleaving differs from run to run, on a local file too).
fn same_lines(remote: &str, native: &str, context: &str) {
    let (r, n) = (by_writer(remote), by_writer(native));
    for (tag, numbers) in &n {
        assert_eq!(
            numbers,
            &(0..numbers.len()).collect::<Vec<_>>(),
            "natively, writer {tag}"
        );
    }
    let count = |m: &BTreeMap<String, Vec<usize>>| m.values().map(Vec::len).sum::<usize>();
    assert_eq!(
        count(&r),
        count(&n),
        "lines kept, remote against local\n{context}"
    );
    assert_eq!(r, n, "{context}");
}

/// `roost run --chirp-mode MODE -- sh -c SCRIPT`, started.
fn start_run(mode: &str, cache: &Path, script: &str) -> Child {
    roost()
        .args(["run", "--chirp-mode", mode, "--cache"])
        .arg(cache)
        .args(["--", "sh", "-c", script])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits for each run; all must succeed. What they said on stderr.
fn wait_all(runs: Vec<Child>) -> String {
    let mut said = String::new();
    let mut failed = false;
    for run in runs {
        let out = run.wait_with_output().unwrap();
        failed |= !out.status.success();
        said += &String::from_utf8_lossy(&out.stderr);
    }
    assert!(!failed, "a run failed:\n{said}");
    said
}

/// Runs `groups` at once, each group in a `roost run` of its own in `mode` on one remote
/// file, then the same natively on a local file, and compares.
fn appends_in_runs(mode: &str, groups: &[&[Writer]]) {
    let scratch = Scratch::new();
    let server = open_server();
    let remote = format!("/chirp/127.0.0.1:{}/log", server.port);
    let runs = groups
        .iter()
        .enumerate()
        .map(|(k, g)| {
            let cache = scratch.path(&format!("cache{k}"));
            start_run(
                mode,
                &cache,
                &scratch.group_script(groups, g, &remote, "remote"),
            )
        })
        .collect();
    let said = wait_all(runs);
    let text = std::fs::read_to_string(server.root().join("log")).unwrap();
    same_lines(
        &text,
        &scratch.native(groups),
        &format!("{mode} mode\n{said}"),
    );
}

const PYTHON_LINES: usize = 2000;
const SHELL_LINES: usize = 150;

#[test]
fn o_append_writers_in_two_runs_keep_every_line_in_direct_mode() {
    let (a, b) = (
        Writer::Python("A", PYTHON_LINES),
        Writer::Python("B", PYTHON_LINES),
    );
    appends_in_runs("direct", &[&[a], &[b]]);
}

#[test]
fn o_append_writers_in_two_runs_keep_every_line_in_cached_mode() {
    let (a, b) = (
        Writer::Python("A", PYTHON_LINES),
        Writer::Python("B", PYTHON_LINES),
    );
    appends_in_runs("cached", &[&[a], &[b]]);
}

#[test]
fn shell_redirections_in_two_runs_keep_every_line_in_each_mode() {
    let (a, b) = (
        Writer::Shell("A", SHELL_LINES),
        Writer::Shell("B", SHELL_LINES),
    );
    for mode in ["direct", "cached"] {
        appends_in_runs(mode, &[&[a], &[b]]);
    }
}

/// Two processes of one run, one through a descriptor and one through `>>`.
#[test]
fn two_processes_of_one_run_keep_every_line_in_each_mode() {
    let (a, b) = (
        Writer::Python("A", PYTHON_LINES),
        Writer::Shell("B", SHELL_LINES),
    );
    for mode in ["direct", "cached"] {
        appends_in_runs(mode, &[&[a, b]]);
    }
}

/// Two hosts, each a network namespace of its own running `roost run` (one in each mode),
/// append to a file of a server outside both, which sees them come from two addresses.
#[test]
fn writers_on_two_hosts_keep_every_line() {
    if !peer::namespaces() {
        return;
    }
    let hosts = roost_testkit::netns::Hosts::create(2, 7);
    let scratch = Scratch::new();
    let port = roost_testkit::run::free_port();
    let export = scratch.path("export");
    std::fs::create_dir(&export).unwrap();
    let mut serve = roost()
        .arg("serve")
        .arg(&export)
        .args(["--listen", &hosts.outside(), "--port", &port.to_string()])
        .args(["--log-level", "error", "--auth", "address"])
        .args(["--acl", &format!("address:{}=rwldpa", hosts.addr(0))])
        .args(["--acl", &format!("address:{}=rwldpa", hosts.addr(1))])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(serve.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    assert!(first.contains("listening"), "{first}");
    let remote = format!("/chirp/{}:{port}/log", hosts.outside());
    let groups: [&[Writer]; 2] = [
        &[
            Writer::Python("A", PYTHON_LINES),
            Writer::Shell("B", SHELL_LINES),
        ],
        &[
            Writer::Python("C", PYTHON_LINES),
            Writer::Shell("D", SHELL_LINES),
        ],
    ];
    let runs = groups
        .iter()
        .zip(["direct", "cached"])
        .enumerate()
        .map(|(k, (g, mode))| {
            Command::new("ip")
                .args(["netns", "exec", &hosts.ns(k), env!("CARGO_BIN_EXE_roost")])
                .args(["run", "--chirp-mode", mode, "--cache"])
                .arg(scratch.path(&format!("cache{k}")))
                .args([
                    "--",
                    "sh",
                    "-c",
                    &scratch.group_script(&groups, g, &remote, "remote"),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let said = wait_all(runs);
    let _ = serve.kill();
    let _ = serve.wait();
    let text = std::fs::read_to_string(export.join("log")).unwrap();
    same_lines(&text, &scratch.native(&groups), &said);
}
