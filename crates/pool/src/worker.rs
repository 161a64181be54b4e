//! One host's side of a run, in a thread of its own over one Chirp connection: make the
//! run's directory on the server, stage each input the host needs (each distinct local file
//! once per host), submit attempts through the job RPCs (create, commit; a few more queued
//! than the host runs at once, so the next starts the moment one ends), wait for them, fetch
//! the outputs of the attempt that claims its task, reap, and tidy up.
//!
//! A connection that breaks, or a server that refuses jobs, takes the host out of the run:
//! its attempts are reported lost, and the scheduler gives their tasks to other hosts. (A
//! connection found broken while nothing is under way, e.g. the server restarted between
//! tasks, is made anew once first.) A host taken back into the run ([`crate::follow`])
//! gets a new thread, which first kills the jobs it had under way when it left. A run told
//! to stop ([`crate::StopFlag`]) kills and reaps every job the host has under way before the
//! run's directory is removed; while it runs, the host keeps the directory's lease fresh
//! ([`Staging::keep_alive`]) so the server does not take it for abandoned.

use crate::hosts::Host;
use crate::schedule::Assignment;
use crate::staging::{phrase, Move, Staging};
use crate::taskfile::{FileSpec, Task};
use crate::Shared;
use roost_catalog::json::{self, Value};
use roost_client::{Client, Error, Options};
use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

/// An attempt submitted to the server.
struct Inflight {
    job: i64,
    a: Assignment,
}

/// Why a host left the run.
struct HostLost(String);

pub(crate) struct Worker<'a> {
    pub index: usize,
    pub host: Host,
    /// The host had left the run: it is back only if it can be reached and prepared.
    pub rejoin: bool,
    pub shared: &'a Shared,
    pub tasks: &'a [Task],
    pub staging: &'a Staging,
    pub options: &'a Options,
    pub output_dir: &'a Path,
    /// Attempts queued on the server beyond its slots.
    pub queue: usize,
}

impl Worker<'_> {
    pub fn run(&self) {
        let connected = Client::connect(&self.host.authority, self.options)
            .map_err(|e| HostLost(format!("connect: {e}")))
            .and_then(|mut client| self.prepare(&mut client).map(|()| client));
        let mut client = match connected {
            Ok(client) => client,
            // Not back after all: it stays out, and waits for another report.
            Err(_) if self.rejoin => return,
            Err(HostLost(why)) => return self.leave(&why, &[]),
        };
        if self.rejoin {
            self.kill_orphans(&mut client);
            self.shared.back(self.index);
            self.shared.tell(format!(
                "roost pool: {}: reported to the catalog again since it left: taken back",
                self.host.name
            ));
        }
        let mut state = State {
            staged: HashSet::new(),
            inflight: Vec::new(),
            lease: Instant::now(),
        };
        if let Err(HostLost(why)) = self.serve(&mut client, &mut state) {
            self.leave(&why, &state.inflight);
        }
        if !client.is_broken() {
            let _ = client.rmall(&self.staging.run_dir);
        }
    }

    /// The host leaves the run, for `why`: what it had under way is lost (and its jobs
    /// remembered, to kill should it come back).
    fn leave(&self, why: &str, inflight: &[Inflight]) {
        let lost: Vec<Assignment> = inflight.iter().map(|i| i.a).collect();
        let jobs = inflight.iter().map(|i| i.job).filter(|&j| j > 0);
        self.shared
            .orphans()
            .entry(self.index)
            .or_default()
            .extend(jobs);
        self.shared.host_down(self.index, why, &lost);
        self.shared.tell(format!(
            "roost pool: {}: left the run: {why}",
            self.host.name
        ));
    }

    /// Kills and reaps the jobs this host had under way when it left the run (a restarted
    /// server runs the committed ones again; their tasks have been retried since).
    fn kill_orphans(&self, client: &mut Client) {
        let jobs = self
            .shared
            .orphans()
            .remove(&self.index)
            .unwrap_or_default();
        if !jobs.is_empty() {
            let _ = client.job_kill(&jobs);
            let _ = client.job_reap(&jobs);
        }
    }

    /// Makes the connection anew after it was found broken with nothing under way; false if
    /// the host cannot be reached or prepared.
    fn reconnect(&self, client: &mut Client, state: &mut State) -> bool {
        if !client.is_broken() || !state.inflight.is_empty() || client.reconnect().is_err() {
            return false;
        }
        // A server restarted on an empty export has lost what was staged.
        state.staged.clear();
        self.prepare(client).is_ok()
    }

    fn prepare(&self, client: &mut Client) -> Result<(), HostLost> {
        self.staging.make_dirs(client).map_err(HostLost)
    }

    fn serve(&self, client: &mut Client, state: &mut State) -> Result<(), HostLost> {
        loop {
            if self.shared.stopping() {
                self.abandon(client, state);
                return Ok(());
            }
            self.staging.keep_alive(client, &mut state.lease);
            self.drop_unwanted(client, state)?;
            while state.inflight.len() < self.host.slots + self.queue {
                let Some(a) = self.shared.next(self.index) else {
                    break;
                };
                let submitted = match self.submit(client, state, a) {
                    Err(Submit::Host(_)) if self.reconnect(client, state) => {
                        self.submit(client, state, a)
                    }
                    other => other,
                };
                match submitted {
                    Ok(job) => state.inflight.push(Inflight { job, a }),
                    Err(Submit::Task(why)) => self.shared.failed(a, self.index, &why),
                    Err(Submit::Host(why)) => {
                        state.inflight.push(Inflight { job: 0, a });
                        return Err(HostLost(why));
                    }
                }
            }
            if state.inflight.is_empty() {
                if self.shared.finished() || self.shared.stopping() {
                    return Ok(());
                }
                self.shared.wait(Duration::from_millis(200));
                continue;
            }
            let asked = Instant::now();
            let text = client
                .job_wait(0, 1)
                .map_err(|e| HostLost(phrase(client, "job_wait", &e)))?;
            let ended = match json::parse(text.as_bytes()) {
                Ok(Value::Array(records)) => records,
                _ => return Err(HostLost(format!("job_wait: not a JSON array: {text:.80}"))),
            };
            let mut ours = 0;
            for record in ended {
                let Some(id) = record.get("id").and_then(Value::as_i64) else {
                    continue;
                };
                let Some(at) = state.inflight.iter().position(|i| i.job == id) else {
                    continue;
                };
                ours += 1;
                let Inflight { job, a } = state.inflight.remove(at);
                self.ended(client, job, a, &record)?;
            }
            if ours == 0 && asked.elapsed() < Duration::from_millis(100) {
                // Only other runs' jobs ended: do not spin on them.
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }

    /// The run is stopping: kills and reaps every job under way here (their tasks are not
    /// done, and their outputs never stored), whether or not the server answers.
    fn abandon(&self, client: &mut Client, state: &mut State) {
        let jobs: Vec<i64> = state
            .inflight
            .drain(..)
            .map(|i| i.job)
            .filter(|&j| j > 0)
            .collect();
        if !jobs.is_empty() {
            let _ = client.job_kill(&jobs);
            let _ = client.job_reap(&jobs);
        }
    }

    /// Kills attempts whose task another host finished (or that were given up).
    fn drop_unwanted(&self, client: &mut Client, state: &mut State) -> Result<(), HostLost> {
        let (unwanted, keep): (Vec<Inflight>, Vec<Inflight>) = std::mem::take(&mut state.inflight)
            .into_iter()
            .partition(|i| !self.shared.wanted(i.a.task));
        state.inflight = keep;
        for i in unwanted {
            let killed = client.job_kill(&[i.job]);
            let reaped = client.job_reap(&[i.job]);
            self.shared.lost(i.a, self.index);
            for result in [killed, reaped] {
                if let Err(e) = result.filter_broken() {
                    return Err(HostLost(phrase(client, "job_kill", &e)));
                }
            }
        }
        Ok(())
    }

    fn submit(&self, client: &mut Client, state: &mut State, a: Assignment) -> Result<i64, Submit> {
        let task = &self.tasks[a.task];
        for (spec, &id) in task.inputs.iter().zip(&self.staging.input_ids[a.task]) {
            if state.staged.contains(&id) {
                continue;
            }
            self.staging
                .put_input(client, spec, id)
                .map_err(|e| match e {
                    Move::Local(why) => Submit::Task(why),
                    Move::Remote(e) => Submit::Host(phrase(
                        client,
                        &format!("staging {}", spec.local.display()),
                        &e,
                    )),
                })?;
            state.staged.insert(id);
        }
        let description = self.description(a);
        let host =
            |client: &mut Client, what: &str, e: Error| Submit::Host(phrase(client, what, &e));
        let job = client
            .job_create(&description)
            .map_err(|e| host(client, "job_create", e))?;
        client
            .job_commit(&[job])
            .map_err(|e| host(client, "job_commit", e))?;
        Ok(job)
    }

    /// The job description of an attempt.
    fn description(&self, a: Assignment) -> String {
        let task = &self.tasks[a.task];
        let s = |text: &str| {
            let mut out = String::new();
            json::write_string(text, &mut out);
            out
        };
        let file = |task_path: &str, serv: &str, kind: &str| {
            format!(
                r#"{{"task_path":{},"serv_path":{},"type":"{kind}"}}"#,
                s(task_path),
                s(serv)
            )
        };
        let mut files: Vec<String> = task
            .inputs
            .iter()
            .zip(&self.staging.input_ids[a.task])
            .map(|(spec, &id)| file(&spec.task_path, &self.staging.input(id), "INPUT"))
            .collect();
        for (k, out) in task.outputs.iter().enumerate() {
            files.push(file(
                &out.task_path,
                &self.staging.output(a, &k.to_string()),
                "OUTPUT",
            ));
        }
        files.push(file(
            ".roost.stderr",
            &self.staging.output(a, "stderr"),
            "OUTPUT",
        ));
        let (executable, argv) = job_argv(&task.command, &task.inputs);
        let argv: Vec<String> = argv.iter().map(|w| s(w)).collect();
        format!(
            r#"{{"executable":{},"arguments":[{}],"tag":{},"files":[{}]}}"#,
            s(&executable),
            argv.join(","),
            s(&format!(
                "roost pool run: {} (attempt {})",
                task.name, a.attempt
            )),
            files.join(",")
        )
    }

    /// An attempt ended: keep its outputs, or report why it failed; reap it either way.
    fn ended(
        &self,
        client: &mut Client,
        job: i64,
        a: Assignment,
        record: &Value,
    ) -> Result<(), HostLost> {
        let text = |k: &str| record.get(k).and_then(Value::as_str).unwrap_or("");
        let verdict = match (text("status"), text("exit_status")) {
            ("FINISHED", "EXITED") => match record.get("exit_code").and_then(Value::as_i64) {
                Some(0) => self.missing_output(a, record).map_or(Ok(()), Err),
                Some(code) => Err(format!("exit {code}")),
                None => Err("no exit code".to_string()),
            },
            ("FINISHED", _) => Err(format!("killed by {}", text("exit_signal"))),
            ("ERRORED", _) => Err(format!("errored: {}", text("error"))),
            (other, _) => Err(format!("ended {other}")),
        };
        let outcome = match verdict {
            Ok(()) if self.shared.claim(a, self.index) => {
                match self
                    .staging
                    .fetch_outputs(client, &self.tasks[a.task], a, self.output_dir)
                {
                    Ok(()) => {
                        self.shared.done(a, self.index);
                        Ok(())
                    }
                    Err(Move::Remote(e)) => {
                        // Lost with its host, not failed: it runs again elsewhere.
                        self.shared.lost(a, self.index);
                        Err(HostLost(phrase(client, "fetching outputs", &e)))
                    }
                    Err(Move::Local(why)) => {
                        self.shared.failed(a, self.index, &why);
                        Ok(())
                    }
                }
            }
            Ok(()) => {
                self.shared.lost(a, self.index);
                Ok(())
            }
            Err(why) => {
                let why = match self.staging.stderr_tail(client, a) {
                    Some(tail) => format!("{why}; its standard error ends: {tail}"),
                    None => why,
                };
                self.shared.failed(a, self.index, &why);
                Ok(())
            }
        };
        outcome?;
        for k in (0..self.tasks[a.task].outputs.len())
            .map(|k| k.to_string())
            .chain(["stderr".into()])
        {
            let _ = client.unlink(self.staging.output(a, &k)).filter_broken();
        }
        client
            .job_reap(&[job])
            .filter_broken()
            .map_err(|e| HostLost(phrase(client, "job_reap", &e)))
    }

    /// The first output a finished job did not store, as a failure.
    fn missing_output(&self, a: Assignment, record: &Value) -> Option<String> {
        let files = match record.get("files") {
            Some(Value::Array(f)) => f.as_slice(),
            _ => &[],
        };
        self.tasks[a.task].outputs.iter().find_map(|out| {
            let stored = files.iter().any(|f| {
                f.get("task_path").and_then(Value::as_str) == Some(out.task_path.as_str())
                    && f.get("size").and_then(Value::as_i64).is_some()
            });
            (!stored).then(|| format!("it did not make its output {}", out.task_path))
        })
    }
}

struct State {
    /// Inputs already on this host.
    staged: HashSet<usize>,
    inflight: Vec<Inflight>,
    /// When the run directory's lease was last made fresh.
    lease: Instant,
}

/// Why an attempt could not be submitted: the task's fault, or the host's.
enum Submit {
    Task(String),
    Host(String),
}

/// Errors that leave the connection usable are ignored; those that break it are not.
trait FilterBroken {
    fn filter_broken(self) -> Result<(), Error>;
}

impl<T> FilterBroken for Result<T, Error> {
    fn filter_broken(self) -> Result<(), Error> {
        match self {
            Err(e) if e.breaks_connection() => Err(e),
            _ => Ok(()),
        }
    }
}

/// How a task's command runs: its words as the argument vector when it needs no shell —
/// plain words, the first naming by `./` a staged input that the kernel runs by itself (an
/// executable ELF file or `#!` script), as `./prog in out` — which spares each task a
/// shell's start; else `/bin/sh -c COMMAND` (which also runs a script without `#!`, and
/// answers 126 or 127 for a program it cannot run).
fn job_argv(command: &str, inputs: &[FileSpec]) -> (String, Vec<String>) {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@ \t".contains(c);
    let words: Vec<&str> = command.split_ascii_whitespace().collect();
    let runnable = words.first().is_some_and(|first| {
        let staged = first
            .strip_prefix("./")
            .and_then(|name| inputs.iter().find(|i| i.task_path == name));
        command.chars().all(plain)
            && !first.contains('=')
            && staged.is_some_and(|i| runs_by_itself(&i.local))
    });
    if runnable {
        (
            words[0].to_string(),
            words.iter().map(|w| w.to_string()).collect(),
        )
    } else {
        (
            "/bin/sh".into(),
            vec!["sh".into(), "-c".into(), command.into()],
        )
    }
}

/// Whether the kernel runs `path` by itself: executable, and an ELF file or a `#!` script.
fn runs_by_itself(path: &Path) -> bool {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let Ok(mut file) = std::fs::File::open(path) else {
        return false;
    };
    let executable = file
        .metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    let mut head = [0u8; 4];
    executable
        && file.read_exact(&mut head).is_ok()
        && (head == *b"\x7fELF" || head.starts_with(b"#!"))
}

#[cfg(test)]
mod tests {
    use super::job_argv;
    use crate::taskfile::FileSpec;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn staged_programs_run_without_a_shell_and_anything_else_with_one() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, text: &[u8], mode: u32| {
            let local = dir.path().join(name);
            std::fs::write(&local, text).unwrap();
            std::fs::set_permissions(&local, std::fs::Permissions::from_mode(mode)).unwrap();
            FileSpec {
                local,
                task_path: name.to_string(),
            }
        };
        let inputs = [
            file("align", b"\x7fELF\x02\x01", 0o755),
            file("script", b"#!/bin/sh\necho hi\n", 0o755),
            file("bare", b"echo no interpreter line\n", 0o755),
            file("notexec", b"\x7fELF\x02\x01", 0o644),
        ];
        let argv = |c: &str| job_argv(c, &inputs);
        assert_eq!(
            argv("./align search q.fa  t.fa\t-o s.tsv"),
            (
                "./align".to_string(),
                ["./align", "search", "q.fa", "t.fa", "-o", "s.tsv"]
                    .map(String::from)
                    .to_vec()
            )
        );
        assert_eq!(argv("./script a=b x:y").0, "./script");
        let shell = |c: &str| assert_eq!(argv(c).0, "/bin/sh", "{c}");
        // A script without `#!` (sh runs it), a program that cannot run (sh says 126),
        // a program not staged (sh says 127 or finds it by PATH).
        shell("./bare in");
        shell("./notexec in");
        shell("./missing in");
        shell("align in");
        shell("/usr/bin/sort in");
        // Anything a shell reads differently.
        shell("./align in > out");
        shell("./align 'a b'");
        shell("./align $HOME");
        shell("./align *.fa");
        shell("./align; ./script");
        shell("./align | ./script");
        shell("A=./b ./align");
        shell("./align ~");
        shell("./align # comment");
        shell("");
    }
}
