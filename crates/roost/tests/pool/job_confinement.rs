//! What a guest job sees and reaches (issue 27 §3), against real `roost serve --jobs` servers
//! on 127.0.0.1, each test an attack a job once got away with: reading files its submitter
//! is refused, another job's sandbox or the owner's home; reaching the network (and so every
//! address ACL granted to the host); leaving processes behind; and one subject filling the
//! server with jobs. See docs/security.md, "Guest jobs".

use roost_client::ErrorCode;
use roost_testkit::jobs::{
    eventually, field, job_root, run_job, shell_job, text_of, wait_ended, JobServer,
};
use roost_testkit::peer;
use roost_testkit::run::{give_to_nobody, processes_with};
use roost_testkit::serve::TestServer;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The standard output a job left in the export at `/stdout.N`, for job N.
fn stdout_of(s: &JobServer, record: &roost_catalog::json::Value) -> String {
    let id = field(record, "id").as_i64().unwrap();
    std::fs::read_to_string(s.export().join(format!("stdout.{id}"))).unwrap_or_default()
}

/// A shell job whose standard output is kept at `/stdout.%j`.
fn job_keeping_stdout(script: &str, files: &[(&str, &str, &str)]) -> String {
    let mut files = files.to_vec();
    files.push((".roost.stdout", "/stdout.%j", "OUTPUT"));
    shell_job(script, &files)
}

/// A script that tries to read each path (a file with `cat`, a directory with `ls`) and
/// prints `read PATH` or `refused PATH` for each.
fn probe_script(paths: &[&str]) -> String {
    paths
        .iter()
        .map(|p| {
            format!(
                "if [ -d '{p}' ]; then ls '{p}'; else cat '{p}'; fi >/dev/null 2>&1 \
                 && echo 'read {p}' || echo 'refused {p}'\n"
            )
        })
        .collect()
}

/// The fake home of the server's owner: `HOME/.ssh/id_ed25519`.
fn fake_home(readable_by_all: bool) -> (tempfile::TempDir, PathBuf) {
    let home = tempfile::tempdir().unwrap();
    let ssh = home.path().join(".ssh");
    std::fs::create_dir(&ssh).unwrap();
    let key = ssh.join("id_ed25519");
    std::fs::write(&key, "-----BEGIN OPENSSH PRIVATE KEY-----\nnot really\n").unwrap();
    let (dir_mode, file_mode) = if readable_by_all {
        (0o755, 0o644)
    } else {
        (0o700, 0o600)
    };
    chmod(home.path(), dir_mode);
    chmod(&ssh, dir_mode);
    chmod(&key, file_mode);
    (home, key)
}

/// Runs the reading attack on `s`, whose subject `hmac:runner` may run jobs and read and
/// write `/`, but not `/private`; `home_key` is the owner's private key, `server_key` the
/// server's hmac key file for `runner`. A first job keeps a secret in its sandbox while a
/// second one tries to read it, and the rest.
fn check_reads(s: &JobServer, home_key: &Path, server_key: &Path, owner_of_files: Option<&str>) {
    let export = s.export();
    chmod(export, 0o755);
    let mut owner = s.client();
    owner.mkdir("/private", 0o755).unwrap();
    owner.setacl("/private", "hmac:runner", "-").unwrap();
    for (name, text) in [
        ("private/secret", "private\n"),
        ("public", "public\n"),
        ("in", "input\n"),
    ] {
        let path = export.join(name);
        std::fs::write(&path, text).unwrap();
        chmod(&path, 0o644);
        if owner_of_files.is_some() {
            give_to_nobody(&path);
        }
    }
    let mut runner = s.hmac("runner");
    // Through Chirp the runner is refused /private, as it should be.
    assert!(runner
        .getfile("/private/secret", &mut Vec::new())
        .unwrap_err()
        .is(ErrorCode::NotAuthorized));

    let marker = format!("1000.{}3", std::process::id());
    let first = runner
        .job_create(&shell_job(
            &format!("echo first-job-secret > a-secret; exec sleep {marker}"),
            &[],
        ))
        .unwrap();
    runner.job_commit(&[first]).unwrap();
    let mut first_sandbox = None;
    eventually("the first job's secret", || {
        first_sandbox = std::fs::read_dir(s.sandboxes())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.join("a-secret").exists());
        first_sandbox.is_some()
    });
    let their_secret = first_sandbox.unwrap().join("a-secret");

    let exported = |name: &str| export.join(name).display().to_string();
    let refused = [
        exported("private/secret"),
        exported("public"),
        exported("in"),
        exported(""),
        their_secret.display().to_string(),
        home_key.display().to_string(),
        server_key.display().to_string(),
        "/etc/shadow".to_string(),
        "/tmp".to_string(),
    ];
    let readable = [
        "in",
        "/usr/bin/env",
        "/etc/passwd",
        "/proc/self/status",
        "/usr/bin",
    ];
    let mut paths: Vec<&str> = readable.to_vec();
    paths.extend(refused.iter().map(String::as_str));
    let r = run_job(
        &mut runner,
        &job_keeping_stdout(&probe_script(&paths), &[("in", "/in", "INPUT")]),
    );
    assert_eq!(text_of(&r, "status"), "FINISHED", "{}", r.to_json());
    let out = stdout_of(s, &r);
    for p in readable {
        assert!(
            out.contains(&format!("read {p}\n")),
            "{p} unreadable:\n{out}"
        );
    }
    for p in &refused {
        assert!(
            out.contains(&format!("refused {p}\n")),
            "the job read {p}:\n{out}"
        );
    }
    runner.job_kill(&[first]).unwrap();
    eventually("the first job's sleep ends", || {
        processes_with(&marker).is_empty()
    });
}

/// The ways a root server can run jobs: the best namespaces this host allows (user
/// namespaces here), namespaces made as root, none, and a uid of their own for each job.
const ROOT_KINDS: [&[&str]; 4] = [
    &[],
    &["--job-namespaces", "root"],
    &["--job-namespaces", "none"],
    &["--job-uids", "200000-200009"],
];

/// A server run as root: jobs run as nobody, which unix permissions alone let read every
/// file others may read (the files here are all mode 0644, as most are).
#[test]
fn a_job_reads_only_its_sandbox_its_inputs_and_system_files() {
    if !peer::root("the attack needs a server run as root; see the unprivileged test") {
        return;
    }
    for kind in ROOT_KINDS {
        let keys = tempfile::tempdir().unwrap();
        chmod(keys.path(), 0o755);
        let mut extra = TestServer::with_keys(keys.path(), &["runner"]);
        // `--key` takes only a file private to its owner (root here), which unix permissions
        // alone keep from a job; the unprivileged test below is where only the confinement
        // stands between a job and the key of the user it runs as.
        let server_key = keys.path().join("runner.key");
        extra.extend(["--acl".to_string(), "hmac:runner=rwlx".into()]);
        extra.extend(kind.iter().map(|s| s.to_string()));
        let (home, home_key) = fake_home(true);
        let home_text = home.path().display().to_string();
        let refs: Vec<&str> = extra.iter().map(String::as_str).collect();
        let s = JobServer::launch(
            job_root(),
            tempfile::tempdir().unwrap(),
            &refs,
            &[],
            &[("HOME", &home_text)],
        );
        eprintln!("{kind:?}");
        check_reads(&s, &home_key, &server_key, None);
    }
}

/// A server run by an ordinary user (nobody here, as `setpriv` makes it): its jobs run as
/// that user, whose own files (its home, the server's key) unix permissions let them read;
/// with user namespaces (this host allows them) and without.
#[test]
fn an_unprivileged_server_s_jobs_read_only_what_they_should() {
    if !(peer::root("to run the server as nobody") && peer::program("setpriv", "util-linux")) {
        return;
    }
    for kind in [&[][..], &["--job-namespaces", "none"]] {
        let keys = tempfile::tempdir().unwrap();
        let mut extra = TestServer::with_keys(keys.path(), &["runner"]);
        let server_key = keys.path().join("runner.key");
        chmod(&server_key, 0o600);
        give_to_nobody(keys.path());
        extra.extend(["--acl".to_string(), "hmac:runner=rwlx".into()]);
        extra.extend(kind.iter().map(|s| s.to_string()));
        let (home, home_key) = fake_home(false);
        give_to_nobody(home.path());
        let home_text = home.path().display().to_string();
        let root = job_root();
        give_to_nobody(root.path());
        let export = tempfile::tempdir().unwrap();
        give_to_nobody(export.path());
        let refs: Vec<&str> = extra.iter().map(String::as_str).collect();
        let s = JobServer::launch(
            root,
            export,
            &refs,
            &[
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
            ],
            &[("HOME", &home_text)],
        );
        eprintln!("{kind:?}");
        check_reads(&s, &home_key, &server_key, Some("nobody"));
    }
}

/// A TCP listener, a UDP socket and a unix socket on this host, and what reached each.
struct Listeners {
    tcp: std::net::TcpListener,
    udp: std::net::UdpSocket,
    unix: std::os::unix::net::UnixListener,
    unix_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Listeners {
    fn open() -> Listeners {
        let dir = tempfile::tempdir().unwrap();
        chmod(dir.path(), 0o755);
        let unix_path = dir.path().join("sock");
        let unix = std::os::unix::net::UnixListener::bind(&unix_path).unwrap();
        chmod(&unix_path, 0o777);
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for nonblocking in [tcp.set_nonblocking(true), unix.set_nonblocking(true)] {
            nonblocking.unwrap();
        }
        udp.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        Listeners {
            tcp,
            udp,
            unix,
            unix_path,
            _dir: dir,
        }
    }

    /// A perl script that tries each, printing `tcp connected` or `tcp refused`, and so on.
    fn script(&self) -> String {
        let tcp = self.tcp.local_addr().unwrap();
        let udp = self.udp.local_addr().unwrap();
        let program = format!(
            r#"use IO::Socket::INET; use IO::Socket::UNIX; use Socket;
my $t = IO::Socket::INET->new(PeerAddr => "{tcp}", Timeout => 5);
print $t ? "tcp connected\n" : "tcp refused: $!\n";
my $u = IO::Socket::INET->new(PeerAddr => "{udp}", Proto => "udp");
print $u && $u->send("hello") ? "udp sent\n" : "udp refused: $!\n";
my $x = IO::Socket::UNIX->new(Peer => "{unix}", Type => SOCK_STREAM);
print $x ? "unix connected\n" : "unix refused: $!\n";
"#,
            unix = self.unix_path.display()
        );
        format!("perl -e '{program}'")
    }

    /// Which of the three a job reached: (tcp, udp, unix).
    fn reached(&self) -> (bool, bool, bool) {
        let tcp = self.tcp.accept().is_ok();
        let unix = self.unix.accept().is_ok();
        let mut buf = [0u8; 16];
        let udp = self.udp.recv(&mut buf).is_ok();
        (tcp, udp, unix)
    }
}

/// The kinds of namespaces this test process may ask its servers for.
fn kinds() -> Vec<&'static [&'static str]> {
    if peer::root("the namespaces only a root server gives jobs") {
        ROOT_KINDS.to_vec()
    } else {
        vec![&[], &["--job-namespaces", "none"]]
    }
}

/// A job once connected to another Chirp server as `address:127.0.0.1` and wrote there: a
/// guest had the host's network identity. Jobs have no network unless the owner allows it.
#[test]
fn a_job_reaches_no_socket_on_the_host_unless_the_owner_allows_the_network() {
    let listeners = Listeners::open();
    for kind in kinds() {
        let s = JobServer::start(kind);
        let mut c = s.client();
        let r = run_job(&mut c, &job_keeping_stdout(&listeners.script(), &[]));
        assert_eq!(
            text_of(&r, "status"),
            "FINISHED",
            "{kind:?} {}",
            r.to_json()
        );
        let out = stdout_of(&s, &r);
        assert!(out.contains("tcp refused"), "{kind:?} {out}");
        assert!(out.contains("unix refused"), "{kind:?} {out}");
        assert_eq!(listeners.reached(), (false, false, false), "{kind:?} {out}");
    }

    let s = JobServer::start(&["--job-network"]);
    let mut c = s.client();
    let r = run_job(&mut c, &job_keeping_stdout(&listeners.script(), &[]));
    let out = stdout_of(&s, &r);
    assert!(out.contains("tcp connected"), "{out}");
    assert_eq!(listeners.reached(), (true, true, true), "{out}");
}

/// Processes with `marker` in their command line are gone within `limit`.
fn gone_within(marker: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !processes_with(marker).is_empty() {
        assert!(
            Instant::now() < deadline,
            "processes of the job outlived it: {:?}",
            processes_with(marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A process that forks twice and starts a session of its own once outlived its job, and
/// `job_kill`; now the whole tree of a job ends with it, and with the server where the job
/// has namespaces.
#[test]
fn processes_a_job_leaves_behind_end_with_it_and_with_a_kill() {
    for (n, kind) in kinds().into_iter().enumerate() {
        let s = JobServer::start(kind);
        let mut c = s.client();
        let marker = format!("1000.{}1{n}", std::process::id());
        let r = run_job(
            &mut c,
            &shell_job(&format!("(setsid sleep {marker} &); echo started"), &[]),
        );
        assert_eq!(text_of(&r, "status"), "FINISHED", "{}", r.to_json());
        gone_within(&marker, Duration::from_secs(1));

        let escaped = format!("1000.{}2{n}", std::process::id());
        let waiting = format!("1000.{}4{n}", std::process::id());
        let id = c
            .job_create(&shell_job(
                &format!("(setsid sleep {escaped} &); sleep {waiting}"),
                &[],
            ))
            .unwrap();
        c.job_commit(&[id]).unwrap();
        eventually("the job's two sleeps run", || {
            !processes_with(&escaped).is_empty() && !processes_with(&waiting).is_empty()
        });
        c.job_kill(&[id]).unwrap();
        assert_eq!(text_of(&wait_ended(&mut c, id), "status"), "KILLED");
        gone_within(&escaped, Duration::from_secs(5));
        gone_within(&waiting, Duration::from_secs(1));

        // The server dies (SIGKILL): with namespaces, its jobs' processes die with it.
        if kind.contains(&"none") {
            continue;
        }
        let escaped = format!("1000.{}6{n}", std::process::id());
        let id = c
            .job_create(&shell_job(
                &format!("(setsid sleep {escaped} &); sleep {waiting}"),
                &[],
            ))
            .unwrap();
        c.job_commit(&[id]).unwrap();
        eventually("the job's two sleeps run", || {
            !processes_with(&escaped).is_empty() && !processes_with(&waiting).is_empty()
        });
        drop(c);
        drop(s);
        gone_within(&escaped, Duration::from_secs(5));
        gone_within(&waiting, Duration::from_secs(1));
    }
}

/// A job cannot start more processes than `--job-process-limit` (where the limit counts its
/// processes alone: in a user namespace of its own, or as a uid of its own), nor take more
/// memory than `--job-memory-limit`, in one process or in several.
#[test]
fn a_job_is_held_to_its_process_and_memory_caps() {
    let mut kinds: Vec<&[&str]> = vec![&[]];
    if peer::root("jobs in namespaces and uids of their own") {
        kinds.push(&["--job-namespaces", "root", "--job-uids", "200000-200009"]);
    }
    for kind in kinds {
        let mut extra = vec!["--job-process-limit", "16", "--job-memory-limit", "64M"];
        extra.extend(kind);
        let s = JobServer::start(&extra);
        let mut c = s.client();
        let forks = "perl -e 'my $n = 0; for (1..40) { my $p = fork; last unless defined $p; \
                     if ($p == 0) { sleep 30; exit } $n++ } print \"forked $n\\n\"'";
        let r = run_job(&mut c, &job_keeping_stdout(forks, &[]));
        assert_eq!(text_of(&r, "status"), "FINISHED", "{}", r.to_json());
        let out = stdout_of(&s, &r);
        let forked: u32 = out
            .trim()
            .strip_prefix("forked ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{out}"));
        assert!((10..16).contains(&forked), "{kind:?}: {forked} processes");

        let one_big = "perl -e '$x = \"a\" x (128 << 20); print \"allocated\\n\"'";
        let r = run_job(&mut c, &job_keeping_stdout(one_big, &[]));
        let out = stdout_of(&s, &r);
        assert!(!out.contains("allocated"), "{}", r.to_json());

        // Four processes of 20 MiB (and a copy while it is made) each: every one under the
        // limit, not all together.
        let many = "perl -e 'fork; fork; $x = \"a\" x (20 << 20); sleep 20; print \"done\\n\"'";
        let started = Instant::now();
        let r = run_job(&mut c, &job_keeping_stdout(many, &[]));
        assert_eq!(text_of(&r, "status"), "ERRORED", "{}", r.to_json());
        assert!(
            text_of(&r, "error").contains("memory limit"),
            "{}",
            r.to_json()
        );
        assert!(started.elapsed() < Duration::from_secs(15));
    }
}

/// Each job running at once under `--job-uids` has a uid of its own, from the range.
#[test]
fn jobs_running_at_once_have_uids_of_their_own() {
    if !peer::root("only a root server gives jobs uids") {
        return;
    }
    let s = JobServer::start(&["--job-uids", "200000-200009"]);
    let mut c = s.client();
    let marker = format!("3.{}5", std::process::id());
    let first = c
        .job_create(&job_keeping_stdout(&format!("id -u; sleep {marker}"), &[]))
        .unwrap();
    c.job_commit(&[first]).unwrap();
    eventually("the first job runs", || !processes_with(&marker).is_empty());
    let second = run_job(&mut c, &job_keeping_stdout("id -u", &[]));
    assert!(
        !processes_with(&marker).is_empty(),
        "the first job ended too soon"
    );
    let first = wait_ended(&mut c, first);
    let uid = |r: &roost_catalog::json::Value| -> u32 {
        stdout_of(&s, r)
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{}", r.to_json()))
    };
    let (a, b) = (uid(&first), uid(&second));
    assert_ne!(a, b);
    for u in [a, b] {
        assert!((200000..=200009).contains(&u), "{u}");
    }
}

/// A bad `--job-uids` stops the server, saying what is wrong.
#[test]
fn uids_that_an_account_has_are_refused() {
    if !peer::root("only a root server gives jobs uids") {
        return;
    }
    let root = job_root();
    let out = roost_testkit::run::roost()
        .args([
            "serve",
            "/tmp",
            "--port",
            "0",
            "--listen",
            "127.0.0.1",
            "--jobs",
        ])
        .arg("--job-dir")
        .arg(root.path().join("jobs"))
        .arg("--ledger")
        .arg(root.path().join("ledger"))
        .args(["--job-uids", "65534-65534"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("uid 65534 belongs to the account nobody"),
        "{err}"
    );
}

/// 3000 jobs created and never committed once took 2.7 GB of the server's memory and 2.3 GB
/// of disk: a subject may keep 64 jobs not yet reaped (`--jobs-per-subject`), and so many
/// bytes of descriptions (`--job-bytes-per-subject`); more are refused, saying why.
#[test]
fn one_subject_keeps_at_most_so_many_jobs_and_bytes() {
    let keys = tempfile::tempdir().unwrap();
    let mut extra = TestServer::with_keys(keys.path(), &["runner", "other"]);
    extra.extend([
        "--acl".to_string(),
        "hmac:runner=rwlx".into(),
        "--acl".into(),
        "hmac:other=rwlx".into(),
    ]);
    let refs: Vec<&str> = extra.iter().map(String::as_str).collect();
    let s = JobServer::start(&refs);
    let mut runner = s.hmac("runner");
    let mut ids = Vec::new();
    for _ in 0..64 {
        ids.push(runner.job_create(&shell_job("true", &[])).unwrap());
    }
    let err = runner.job_create(&shell_job("true", &[])).unwrap_err();
    assert!(err.is(ErrorCode::NoSpace), "{err:?}");
    let why = runner.explain().unwrap().unwrap();
    assert!(why.contains("64 jobs") && why.contains("job_reap"), "{why}");
    // Another subject is not held by the runner's jobs.
    s.hmac("other").job_create(&shell_job("true", &[])).unwrap();
    // A reaped job makes room again.
    runner.job_commit(&ids[..1]).unwrap();
    wait_ended(&mut runner, ids[0]);
    runner.job_reap(&ids[..1]).unwrap();
    runner.job_create(&shell_job("true", &[])).unwrap();
    drop(runner);
    drop(s);

    let s = JobServer::start(&["--job-bytes-per-subject", "16K"]);
    let mut c = s.client();
    let big = |n: usize| {
        format!(
            r#"{{"executable":"/bin/true","arguments":["true"],"files":[],"environment":{{"X":"{}"}}}}"#,
            "x".repeat(n)
        )
    };
    let first = c.job_create(&big(10_000)).unwrap();
    let err = c.job_create(&big(10_000)).unwrap_err();
    assert!(err.is(ErrorCode::NoSpace), "{err:?}");
    let why = c.explain().unwrap().unwrap();
    assert!(why.contains("bytes"), "{why}");
    c.job_create(&big(1_000)).unwrap();
    assert!(c.job_status(&[first]).is_ok());
}

/// The server says at start how jobs are confined.
#[test]
fn the_server_logs_how_jobs_are_confined() {
    let s = JobServer::start(&[]);
    let mut log = String::new();
    eventually("the jobs line", || {
        log.clear();
        std::fs::File::open(&s.server.log)
            .unwrap()
            .read_to_string(&mut log)
            .unwrap();
        log.contains("event=jobs ")
    });
    let line = log.lines().find(|l| l.contains("event=jobs ")).unwrap();
    for key in ["isolation=", "network=", "landlock=", "processes=512 "] {
        assert!(line.contains(key), "{line}");
    }
    assert!(!line.contains("network=host"), "{line}");
}
