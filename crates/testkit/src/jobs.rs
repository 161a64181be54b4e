//! Jobs for the tests: a `roost serve --jobs` whose job directory the jobs' user can reach,
//! clients, job descriptions running a shell script, and reading `job_status` and
//! `job_wait` answers.

use crate::serve::{client, hmac_credentials, TestServer};
use roost_catalog::json::{self, Value};
use roost_client::{Client, Credentials, Method};
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
    /// environment, running two jobs at once and letting this user (`unix:`) do anything
    /// too, with `extra` after those options.
    pub fn launch(
        job_root: tempfile::TempDir,
        export: tempfile::TempDir,
        extra: &[&str],
        wrapper: &[&str],
        envs: &[(&str, &str)],
    ) -> JobServer {
        let unix = format!("unix:{}=rwldax", whoami());
        let mut options = vec!["--job-concurrency", "2", "--acl", &unix];
        options.extend(extra);
        JobServer::with_options(job_root, export, &options, wrapper, envs)
    }

    /// A server with only the options every job server has, then `extra`: one job at a
    /// time, as `roost serve` runs them by default (what the pool's schedulers are tested
    /// against), and no `unix:` rights.
    pub fn one_at_a_time(extra: &[&str]) -> JobServer {
        JobServer::with_options(job_root(), tempfile::tempdir().unwrap(), extra, &[], &[])
    }

    /// The options every job server of the tests has (jobs in a directory under
    /// `job_root`, every right for 127.0.0.1), then `extra`.
    fn with_options(
        job_root: tempfile::TempDir,
        export: tempfile::TempDir,
        extra: &[&str],
        wrapper: &[&str],
        envs: &[(&str, &str)],
    ) -> JobServer {
        let job_dir = job_root.path().join("jobs").display().to_string();
        let mut args = vec![
            "--jobs",
            "--job-dir",
            &job_dir,
            "--acl",
            "address:127.0.0.1=rwldax",
        ];
        args.extend(extra);
        JobServer {
            server: TestServer::launch(export, &args, wrapper, envs),
            job_root,
        }
    }

    pub fn client(&self) -> Client {
        client(self.server.port, Credentials::only(&[Method::Address]))
    }

    /// A client logged in with the hmac key `name` (see [`TestServer::with_keys`]).
    pub fn hmac(&self, name: &str) -> Client {
        client(self.server.port, hmac_credentials(name))
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
