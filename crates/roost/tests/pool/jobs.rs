//! Jobs through the Chirp job RPCs (issue 13, item 2), against real servers on 127.0.0.1:
//! `roost serve --jobs` driven by roost's client, by `roost job` and by cctools' `chirp`, and
//! `roost job` driving cctools' own `chirp_server --jobs`.

use roost_catalog::json::Value;
use roost_client::ErrorCode;
use roost_group::fuzz_check::Rng;
use roost_testkit::jobs::{
    eventually, field, records, shell_job, text_of, wait_ended, whoami, JobServer,
};
use roost_testkit::peer::{self, is_root};
use roost_testkit::run::{
    cctools_chirp_server, give_to_nobody, processes_with, read_port_file, roost,
};
use roost_testkit::serve::TestServer;
use std::path::PathBuf;
use std::process::{Child, Command, Output};
use std::time::{Duration, Instant};

#[test]
fn a_job_reads_an_input_and_writes_outputs_that_roost_cat_shows() {
    let s = JobServer::start(&[]);
    std::fs::create_dir(s.export().join("data")).unwrap();
    std::fs::write(s.export().join("data/in.txt"), "hello jobs\n").unwrap();
    let mut c = s.client();
    let description = shell_job(
        "tr a-z A-Z < in > out/upper; echo \"$CHIRP_SUBJECT $USER\"; id -u >&2; exit 3",
        &[
            ("in", "/data/in.txt", "INPUT"),
            ("out/upper", "/data/upper.%j", "OUTPUT"),
            (".roost.stdout", "/data/stdout", "OUTPUT"),
            (".roost.stderr", "/data/stderr", "OUTPUT"),
            ("never-made", "/data/never", "OUTPUT"),
        ],
    );
    let id = c.job_create(&description).unwrap();
    assert!(id > 0);
    let created = &records(&c.job_status(&[id]).unwrap())[0];
    assert_eq!(text_of(created, "status"), "CREATED");
    assert_eq!(text_of(created, "subject"), "address:127.0.0.1");
    c.job_commit(&[id]).unwrap();
    let r = wait_ended(&mut c, id);
    assert_eq!(text_of(&r, "status"), "FINISHED", "{}", r.to_json());
    assert_eq!(text_of(&r, "exit_status"), "EXITED");
    assert_eq!(field(&r, "exit_code").as_i64(), Some(3));
    for key in ["time_create", "time_commit", "time_start", "time_finish"] {
        assert!(field(&r, key).as_i64().is_some(), "{key}: {}", r.to_json());
    }
    // The output name took the job id, and its size is recorded.
    let files = match field(&r, "files") {
        Value::Array(f) => f.clone(),
        other => panic!("{other:?}"),
    };
    let upper = files
        .iter()
        .find(|f| text_of(f, "task_path") == "out/upper")
        .unwrap();
    assert_eq!(text_of(upper, "serv_path"), format!("/data/upper.{id}"));
    assert_eq!(field(upper, "size").as_i64(), Some(11));
    let cat = roost()
        .args(["cat", "--auth", "address"])
        .arg(format!("{}/data/upper.{id}", s.url()))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&cat.stdout), "HELLO JOBS\n");
    let stdout = std::fs::read_to_string(s.export().join("data/stdout")).unwrap();
    let expected_user = if is_root() { "nobody".into() } else { whoami() };
    assert_eq!(stdout, format!("address:127.0.0.1 {expected_user}\n"));
    let uid: u32 = std::fs::read_to_string(s.export().join("data/stderr"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_ne!(uid, 0, "a job ran as root");
    assert!(!s.export().join("data/never").exists());
    // Reaped, the job is forgotten; its outputs stay.
    c.job_reap(&[id]).unwrap();
    assert!(c.job_status(&[id]).unwrap_err().is(ErrorCode::NoSuchJob));
    assert!(s.export().join(format!("data/upper.{id}")).exists());
    // Its sandbox is gone.
    let sandboxes = s.job_root.path().join("jobs/sandboxes");
    assert_eq!(std::fs::read_dir(sandboxes).unwrap().count(), 0);
}

#[test]
fn job_wait_times_out_kill_stops_every_process_and_reap_forgets() {
    let s = JobServer::start(&[]);
    let mut c = s.client();
    // Apart from job_confinement's markers (1000.PID...), which run in this process too.
    let marker = format!("1001.{}", std::process::id());
    let id = c
        .job_create(&shell_job(
            &format!("sleep {marker}1 & sleep {marker}2"),
            &[],
        ))
        .unwrap();
    c.job_commit(&[id]).unwrap();
    eventually("the job's two sleeps run", || {
        processes_with(&marker).len() >= 2
    });
    // Nothing ends within the timeout: an empty list after about a second.
    let started = Instant::now();
    assert_eq!(c.job_wait(id, 1).unwrap(), "[]");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(5),
        "{took:?}"
    );
    // A running job cannot be reaped (nothing happens) ...
    c.job_reap(&[id]).unwrap();
    assert_eq!(
        text_of(&records(&c.job_status(&[id]).unwrap())[0], "status"),
        "STARTED"
    );
    // ... but it can be killed, and then its whole process group is gone.
    c.job_kill(&[id]).unwrap();
    let r = wait_ended(&mut c, id);
    assert_eq!(text_of(&r, "status"), "KILLED");
    assert!(field(&r, "time_kill").as_i64().is_some());
    eventually("the job's processes are gone", || {
        processes_with(&marker).is_empty()
    });
    // Killing it again is refused (it has ended), as cctools does.
    assert!(c.job_kill(&[id]).unwrap_err().is(ErrorCode::NotAuthorized));
    c.job_reap(&[id]).unwrap();
    assert!(c.job_wait(id, 0).unwrap_err().is(ErrorCode::NoSuchJob));
    assert!(c.job_commit(&[id]).unwrap_err().is(ErrorCode::NoSuchJob));
}

#[test]
fn a_job_over_the_time_limit_is_errored() {
    let s = JobServer::start(&["--job-time-limit", "1"]);
    let mut c = s.client();
    let id = c.job_create(&shell_job("sleep 30", &[])).unwrap();
    c.job_commit(&[id]).unwrap();
    let r = wait_ended(&mut c, id);
    assert_eq!(text_of(&r, "status"), "ERRORED");
    assert!(
        text_of(&r, "error").contains("time limit of 1 s"),
        "{}",
        r.to_json()
    );
    assert_eq!(text_of(&r, "exit_signal"), "SIGTERM");
}

#[test]
fn jobs_need_x_on_the_root_r_on_inputs_and_w_on_outputs() {
    let keys_dir = tempfile::tempdir().unwrap();
    let mut extra = TestServer::with_keys(keys_dir.path(), &["runner", "noexec"]);
    extra.extend([
        "--acl".to_string(),
        "hmac:runner=rlx".into(),
        "--acl".into(),
        "hmac:noexec=rwl".into(),
    ]);
    let refs: Vec<&str> = extra.iter().map(String::as_str).collect();
    let s = JobServer::start(&refs);
    let hmac = |name: &str| s.hmac(name);
    let mut owner = s.client();
    owner.mkdir("/private", 0o755).unwrap();
    owner.setacl("/private", "hmac:runner", "-").unwrap();
    std::fs::write(s.export().join("private/secret"), "s").unwrap();
    std::fs::write(s.export().join("in"), "i").unwrap();

    // Without x on / no job may be created.
    let mut noexec = hmac("noexec");
    let err = noexec.job_create(&shell_job("true", &[])).unwrap_err();
    assert!(err.is(ErrorCode::NotAuthorized), "{err:?}");
    assert_eq!(
        noexec.explain().unwrap().as_deref(),
        Some("running jobs: needs 'x' on /")
    );

    let mut runner = hmac("runner");
    // No w where the output would go.
    let err = runner
        .job_create(&shell_job("true", &[("o", "/out", "OUTPUT")]))
        .unwrap_err();
    assert!(err.is(ErrorCode::NotAuthorized), "{err:?}");
    assert!(runner
        .explain()
        .unwrap()
        .unwrap()
        .contains("needs 'w' on /"));
    // No r on an input's directory.
    let err = runner
        .job_create(&shell_job("true", &[("s", "/private/secret", "INPUT")]))
        .unwrap_err();
    assert!(err.is(ErrorCode::NotAuthorized), "{err:?}");
    // With the rights it needs, it runs.
    let id = runner
        .job_create(&shell_job("cat i", &[("i", "/in", "INPUT")]))
        .unwrap();
    // Another subject's job is not theirs to see, commit, kill or reap.
    assert!(owner
        .job_status(&[id])
        .unwrap_err()
        .is(ErrorCode::NotAuthorized));
    assert!(owner
        .job_commit(&[id])
        .unwrap_err()
        .is(ErrorCode::NotAuthorized));
    assert!(owner
        .job_kill(&[id])
        .unwrap_err()
        .is(ErrorCode::NotAuthorized));
    assert!(owner
        .job_reap(&[id])
        .unwrap_err()
        .is(ErrorCode::NotAuthorized));
    runner.job_commit(&[id]).unwrap();
    assert_eq!(text_of(&wait_ended(&mut runner, id), "status"), "FINISHED");
    // Rights are checked again when the files are bound: an input made unreadable after the
    // job was created fails the job, naming the input.
    let id = runner
        .job_create(&shell_job("cat i", &[("i", "/private2/in", "INPUT")]))
        .unwrap();
    owner.mkdir("/private2", 0o755).unwrap();
    owner.setacl("/private2", "hmac:runner", "-").unwrap();
    std::fs::write(s.export().join("private2/in"), "i").unwrap();
    runner.job_commit(&[id]).unwrap();
    let r = wait_ended(&mut runner, id);
    assert_eq!(text_of(&r, "status"), "ERRORED");
    assert!(
        text_of(&r, "error").contains("input /private2/in"),
        "{}",
        r.to_json()
    );
}

#[test]
fn malformed_job_requests_get_error_codes_and_never_crash_the_server() {
    let s = JobServer::start(&[]);
    let mut raw = s.server.connect();
    let invalid = ErrorCode::InvalidRequest.as_i64();
    let no_job = ErrorCode::NoSuchJob.as_i64();
    let cases: &[(&str, &[u8], i64)] = &[
        ("job_create", b"{bad", invalid),
        ("job_create", b"[]", invalid),
        ("job_create", br#"{"executable":"x"}"#, invalid),
        (
            "job_create",
            br#"{"executable":"/bin/true","arguments":[],"files":[{"task_path":"../x"}]}"#,
            invalid,
        ),
        ("job_create", b"{\"executable\":\"\xff\"}", invalid),
        ("job_commit", b"[1.5]", invalid),
        ("job_commit", b"1", invalid),
        ("job_kill", b"{}[]", invalid),
        ("job_status", b"[\"", invalid),
        ("job_reap", b"[7]", no_job),
        ("job_status", b"[7]", no_job),
    ];
    for (rpc, payload, code) in cases {
        let line = format!("{rpc} {}", payload.len());
        assert_eq!(raw.rpc_with(&line, payload), *code, "{rpc} {payload:?}");
    }
    // A path escaping the export stays inside it (collapsed by the jail); the ACL file is off limits.
    let escape = shell_job("true", &[("a", "/../../../etc/passwd", "INPUT")]);
    assert!(raw.rpc_with(&format!("job_create {}", escape.len()), escape.as_bytes()) > 0);
    let acl = shell_job("true", &[("a", "/.__acl", "INPUT")]);
    assert_eq!(
        raw.rpc_with(&format!("job_create {}", acl.len()), acl.as_bytes()),
        ErrorCode::NotAuthorized.as_i64()
    );
    // A huge description is read and refused; the connection stays in step.
    let huge = vec![b' '; 2 * 1024 * 1024];
    assert_eq!(
        raw.rpc_with(&format!("job_create {}", huge.len()), &huge),
        ErrorCode::TooBig.as_i64()
    );
    // Bad job_wait arguments.
    assert_eq!(raw.rpc("job_wait x 1"), invalid);
    assert_eq!(raw.rpc("job_wait 1"), invalid);
    // Garbage of every kind, and the server still answers.
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for round in 0..300 {
        let len = (round * 7) % 200;
        let junk: Vec<u8> = (0..len)
            .map(|_| b"{}[]\":,0123 abcexnfilsyOUTPUTINrg_/\\"[(rng.next_u64() % 36) as usize])
            .collect();
        let rpc = [
            "job_create",
            "job_commit",
            "job_kill",
            "job_status",
            "job_reap",
        ][round % 5];
        let answer = raw.rpc_with(&format!("{rpc} {len}"), &junk);
        assert!(answer != 0 || rpc != "job_create", "{junk:?}");
    }
    assert_eq!(raw.rpc("whoami 100"), 17);
    assert!(s.server.log_text().contains("event=job-refused"));
}

#[test]
fn a_job_cannot_write_outside_its_sandbox() {
    let s = JobServer::start(&[]);
    let landlock = std::fs::read_to_string(&s.server.log)
        .unwrap_or_default()
        .contains("landlock=abi");
    let confined = peer::needs(
        landlock || is_root(),
        "Landlock, nor root (the job would run as this user, unconfined)",
        "a kernel with Landlock, or run the tests as root, as CI does",
    );
    if !confined {
        return;
    }
    let mut c = s.client();
    let outside = s
        .job_root
        .path()
        .join(format!("escape-{}", std::process::id()));
    let tmp_escape = PathBuf::from(format!("/tmp/roost-job-escape-{}", std::process::id()));
    let export_file = s.export().join("direct");
    let script = format!(
        "for f in {} {} {} ../escape ../../escape; do echo x > $f 2>/dev/null && echo wrote $f; done; \
         mkdir -p d && echo in > d/inside && echo ok",
        tmp_escape.display(),
        export_file.display(),
        outside.display()
    );
    let id = c
        .job_create(&shell_job(
            &script,
            &[
                (".roost.stdout", "/stdout", "OUTPUT"),
                ("d/inside", "/inside", "OUTPUT"),
            ],
        ))
        .unwrap();
    c.job_commit(&[id]).unwrap();
    let r = wait_ended(&mut c, id);
    assert_eq!(text_of(&r, "status"), "FINISHED", "{}", r.to_json());
    assert_eq!(
        std::fs::read_to_string(s.export().join("stdout")).unwrap(),
        "ok\n"
    );
    assert_eq!(
        std::fs::read_to_string(s.export().join("inside")).unwrap(),
        "in\n"
    );
    for f in [&tmp_escape, &export_file, &outside] {
        assert!(!f.exists(), "the job wrote {}", f.display());
    }
}

#[test]
fn ended_jobs_survive_a_restart_and_a_job_running_then_is_errored() {
    let s = JobServer::start(&[]);
    let job_dir = s.job_root.path().join("jobs");
    let marker = format!("2000.{}", std::process::id());
    let mut c = s.client();
    let done = c.job_create(&shell_job("exit 7", &[])).unwrap();
    c.job_commit(&[done]).unwrap();
    wait_ended(&mut c, done);
    let running = c
        .job_create(&shell_job(&format!("sleep {marker}"), &[]))
        .unwrap();
    c.job_commit(&[running]).unwrap();
    eventually("the job runs", || !processes_with(&marker).is_empty());
    // A second server cannot use the same job directory.
    let second = roost()
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
        .arg(&job_dir)
        .arg("--ledger")
        .arg(s.job_root.path().join("second.ledger"))
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&second.stderr)
        .contains("another server is using this job directory"));
    // SIGKILL: the server dies without any chance to clean up.
    let JobServer { server, job_root } = s;
    drop(server);
    let s = JobServer::start_with(job_root, tempfile::tempdir().unwrap(), &[]);
    let mut c = s.client();
    let list = records(&c.job_status(&[done, running]).unwrap());
    assert_eq!(text_of(&list[0], "status"), "FINISHED");
    assert_eq!(field(&list[0], "exit_code").as_i64(), Some(7));
    assert_eq!(text_of(&list[1], "status"), "ERRORED");
    assert!(text_of(&list[1], "error").contains("server stopped"));
    eventually("the orphaned job's process is gone", || {
        processes_with(&marker).is_empty()
    });
    // Ids are never reused.
    let next = c.job_create(&shell_job("true", &[])).unwrap();
    assert!(next > running);
}

fn chirp(port: u16, args: &[&str]) -> Output {
    Command::new("chirp")
        .args(["-a", "address", "-t", "30"])
        .arg(format!("127.0.0.1:{port}"))
        .args(args)
        .output()
        .expect("run chirp")
}

fn ok_text(out: &Output) -> String {
    assert!(
        out.status.success(),
        "chirp failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// cctools' `chirp` tool submits, commits, waits for, inspects and reaps a job on roost.
#[test]
fn cctools_chirp_client_runs_jobs_on_roost() {
    if !peer::program("chirp", peer::CCTOOLS) {
        return;
    }
    let s = JobServer::start(&[]);
    let port = s.server.port;
    std::fs::write(s.export().join("in"), "from cctools\n").unwrap();
    let description = shell_job(
        "rev < in > out",
        &[("in", "/in", "INPUT"), ("out", "/out", "OUTPUT")],
    );
    let id: i64 = ok_text(&chirp(port, &["job_create", &description]))
        .trim()
        .parse()
        .unwrap();
    ok_text(&chirp(port, &["job_commit", &format!("[{id}]")]));
    let waited = ok_text(&chirp(port, &["job_wait", &id.to_string(), "20"]));
    let r = &records(waited.trim())[0];
    assert_eq!(text_of(r, "status"), "FINISHED", "{waited}");
    assert_eq!(field(r, "exit_code").as_i64(), Some(0));
    let status = ok_text(&chirp(port, &["job_status", &format!("[{id}]")]));
    assert_eq!(field(&records(status.trim())[0], "id").as_i64(), Some(id));
    ok_text(&chirp(port, &["job_reap", &format!("[{id}]")]));
    assert_eq!(
        std::fs::read_to_string(s.export().join("out")).unwrap(),
        "slootcc morf\n"
    );
    // Refusals reach it as failures: a bare number is not an id list (as with cctools).
    assert!(!chirp(port, &["job_commit", &id.to_string()])
        .status
        .success());
    assert!(!chirp(port, &["job_status", &format!("[{id}]")])
        .status
        .success());
}

/// A cctools `chirp_server --jobs` (it drops to nobody when run as root).
struct Cctools {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
    export: PathBuf,
}

impl Drop for Cctools {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_cctools() -> Cctools {
    let dir = tempfile::tempdir().unwrap();
    let export = dir.path().join("export");
    std::fs::create_dir(&export).unwrap();
    std::fs::write(
        export.join(".__acl"),
        format!("unix:{} rwldax\naddress:127.0.0.1 rwldax\n", whoami()),
    )
    .unwrap();
    std::fs::write(export.join("in"), "abc\n").unwrap();
    let mut command = cctools_chirp_server(&export, dir.path(), &dir.path().join("port"));
    command.args(["-u", "127.0.0.1:1", "--jobs"]);
    if is_root() {
        give_to_nobody(dir.path());
        command.args(["-i", "nobody"]);
    }
    let child = command.spawn().unwrap();
    let port = read_port_file(&dir.path().join("port"));
    Cctools {
        child,
        port,
        _dir: dir,
        export,
    }
}

fn roost_job(args: &[&str]) -> Output {
    roost().arg("job").args(args).output().unwrap()
}

/// roost's client (`roost job`) runs jobs on cctools' own `chirp_server --jobs`.
#[test]
fn roost_job_runs_jobs_on_cctools_chirp_server() {
    if !peer::program("chirp_server", peer::CCTOOLS) {
        return;
    }
    let server = start_cctools();
    let host = format!("127.0.0.1:{}", server.port);
    let file = server._dir.path().join("job.json");
    std::fs::write(
        &file,
        shell_job(
            "tr a-c x-z < in > out; exit 5",
            &[("in", "/in", "INPUT"), ("out", "/out", "OUTPUT")],
        ),
    )
    .unwrap();
    let run = roost_job(&["run", "--auth", "unix", &host, &file.display().to_string()]);
    let shown = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.code(),
        Some(5),
        "{shown}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(shown.contains("FINISHED exit 5"), "{shown}");
    assert_eq!(
        std::fs::read_to_string(server.export.join("out")).unwrap(),
        "xyz\n"
    );
    // The step-by-step commands too, and the server's refusals come back as failures.
    let id = String::from_utf8(
        roost_job(&[
            "create",
            "--auth",
            "unix",
            &host,
            &file.display().to_string(),
        ])
        .stdout,
    )
    .unwrap();
    let id = id.trim();
    assert!(roost_job(&["commit", "--auth", "unix", &host, id])
        .status
        .success());
    let waited = roost_job(&[
        "wait", "--auth", "unix", &host, id, "--wait", "20", "--json",
    ]);
    assert!(waited.status.success());
    let r = &records(String::from_utf8_lossy(&waited.stdout).trim())[0];
    assert_eq!(text_of(r, "status"), "FINISHED");
    assert!(roost_job(&["reap", "--auth", "unix", &host, id])
        .status
        .success());
    assert_eq!(
        roost_job(&["status", "--auth", "unix", &host, "999"])
            .status
            .code(),
        Some(1)
    );
}
