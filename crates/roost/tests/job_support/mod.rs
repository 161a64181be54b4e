//! Test support for jobs: a `roost serve --jobs` whose job directory the jobs' user can
//! reach, clients, job descriptions running a shell script, and reading `job_status` and
//! `job_wait` answers.
//! Needs `run_support` and `serve_support` beside it.
#![allow(dead_code)]

use crate::serve_support::TestServer;
use roost_catalog::json::{self, Value};
use roost_client::{Client, Credentials, HmacKey, Method, Options};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A roost server with jobs, its job directory kept in a directory the jobs' user can search.
pub struct JobServer {
    pub server: TestServer,
    pub job_root: tempfile::TempDir,
}

impl JobServer {
    pub fn start(extra: &[&str]) -> JobServer {
        JobServer::start_with(job_root(), tempfile::tempdir().unwrap(), extra)
    }

    pub fn start_with(
        job_root: tempfile::TempDir,
        export: tempfile::TempDir,
        extra: &[&str],
    ) -> JobServer {
        JobServer::launch(job_root, export, extra, &[], &[])
    }

    /// A server run by `wrapper` (see [`TestServer::launch`]) with `envs` added to its
    /// environment, and the options every job server of the tests has before `extra`.
    pub fn launch(
        job_root: tempfile::TempDir,
        export: tempfile::TempDir,
        extra: &[&str],
        wrapper: &[&str],
        envs: &[(&str, &str)],
    ) -> JobServer {
        let job_dir = job_root.path().join("jobs");
        let mut args = vec![
            "--jobs".to_string(),
            "--job-concurrency".into(),
            "2".into(),
            "--job-dir".into(),
            job_dir.display().to_string(),
            "--acl".into(),
            "address:127.0.0.1=rwldax".into(),
            "--acl".into(),
            format!("unix:{}=rwldax", whoami()),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        JobServer {
            server: TestServer::launch(export, &refs, wrapper, envs),
            job_root,
        }
    }

    pub fn client(&self) -> Client {
        client(self.server.port, Credentials::only(&[Method::Address]))
    }

    /// A client logged in with the hmac key `name` (see [`TestServer::with_keys`]).
    pub fn hmac(&self, name: &str) -> Client {
        let secret: String = name.chars().rev().collect();
        client(
            self.server.port,
            Credentials::only(&[Method::Hmac])
                .with_key(HmacKey::new(name, secret.as_bytes()).unwrap()),
        )
    }

    pub fn url(&self) -> String {
        format!("chirp://127.0.0.1:{}", self.server.port)
    }

    pub fn export(&self) -> &Path {
        self.server.root()
    }

    /// The directory holding the running jobs' sandboxes.
    pub fn sandboxes(&self) -> std::path::PathBuf {
        self.job_root.path().join("jobs/sandboxes")
    }
}

/// A fresh directory for a job directory, searchable by everyone (mode 0711).
pub fn job_root() -> tempfile::TempDir {
    let job_root = tempfile::tempdir().unwrap();
    std::fs::set_permissions(job_root.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    job_root
}

pub fn client(port: u16, credentials: Credentials) -> Client {
    let options = Options {
        credentials,
        ..Options::default()
    };
    Client::connect(&format!("127.0.0.1:{port}"), &options).expect("connect")
}

pub fn whoami() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// A description running `script` with `sh -c`, with files given as (task, server, type).
pub fn shell_job(script: &str, files: &[(&str, &str, &str)]) -> String {
    let files: Vec<String> = files
        .iter()
        .map(|(task, serv, kind)| {
            format!(r#"{{"task_path":"{task}","serv_path":"{serv}","type":"{kind}"}}"#)
        })
        .collect();
    let script = json_string(script);
    format!(
        r#"{{"executable":"/bin/sh","arguments":["sh","-c",{script}],"files":[{}],"tag":"test"}}"#,
        files.join(",")
    )
}

pub fn json_string(s: &str) -> String {
    let mut out = String::new();
    json::write_string(s, &mut out);
    out
}

/// The records of a `job_status`/`job_wait` answer.
pub fn records(text: &str) -> Vec<Value> {
    match json::parse(text.as_bytes()) {
        Ok(Value::Array(items)) => items,
        other => panic!("not a JSON array: {text} ({other:?})"),
    }
}

pub fn field<'a>(record: &'a Value, key: &str) -> &'a Value {
    record
        .get(key)
        .unwrap_or_else(|| panic!("no {key} in {}", record.to_json()))
}

pub fn text_of(record: &Value, key: &str) -> String {
    field(record, key).to_plain()
}

/// Waits (in job_wait requests) until job `id` has ended; its record.
pub fn wait_ended(c: &mut Client, id: i64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let list = records(&c.job_wait(id, 5).unwrap());
        if let Some(r) = list
            .into_iter()
            .find(|r| field(r, "id").as_i64() == Some(id))
        {
            return r;
        }
        assert!(Instant::now() < deadline, "job {id} never ended");
    }
}

/// Creates and commits `description`, waits for its end, and returns its record.
pub fn run_job(c: &mut Client, description: &str) -> Value {
    let id = c.job_create(description).unwrap();
    c.job_commit(&[id]).unwrap();
    wait_ended(c, id)
}

pub fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
