//! A job's record: its description, who submitted it, where it is in its life (CREATED,
//! COMMITTED, STARTED, then FINISHED, KILLED or ERRORED), how it ended, and when each step
//! happened. [`Job::to_value`] gives the record as cctools' `job_status` reports it, member
//! for member; the stored form adds the running process, and [`Job::from_value`] reads either.

use super::description::Description;
use roost_catalog::json::Value;

/// Where a job is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Created,
    Committed,
    Started,
    Finished,
    Killed,
    Errored,
}

impl Status {
    pub const ALL: [Status; 6] = [
        Status::Created,
        Status::Committed,
        Status::Started,
        Status::Finished,
        Status::Killed,
        Status::Errored,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Status::Created => "CREATED",
            Status::Committed => "COMMITTED",
            Status::Started => "STARTED",
            Status::Finished => "FINISHED",
            Status::Killed => "KILLED",
            Status::Errored => "ERRORED",
        }
    }

    fn parse(name: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Whether the job has ended (and can be waited for and reaped).
    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Finished | Status::Killed | Status::Errored)
    }
}

/// How a job's program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Exited(i32),
    /// A signal (this number) ended it.
    Signaled(i32),
}

/// The running program of a started job, stored so a restarted server can find what is left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Process {
    /// The process group (the job's first process leads it).
    pub pgid: i32,
    /// The unix user it runs as.
    pub uid: u32,
    /// When the leader started, in clock ticks after boot (`/proc/PID/stat`), so a later
    /// process that happens to get the same number is never taken for it.
    pub start_ticks: u64,
    /// The CPU time (microseconds) the job had used at the last checkpoint: what a server
    /// restarted after a crash records for it ([`super::usage`]).
    pub cpu_us: u64,
}

/// When each step happened, in seconds since the epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Times {
    pub create: i64,
    pub commit: Option<i64>,
    pub start: Option<i64>,
    pub finish: Option<i64>,
    pub kill: Option<i64>,
    pub error: Option<i64>,
}

/// One job.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub id: i64,
    pub subject: String,
    pub description: Description,
    pub status: Status,
    pub error: Option<String>,
    pub exit: Option<Exit>,
    pub priority: i64,
    pub times: Times,
    pub process: Option<Process>,
}

/// Seconds since the epoch now.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn opt_int(v: Option<i64>) -> Value {
    v.map_or(Value::Null, Value::Int)
}

fn opt_str(v: Option<&str>) -> Value {
    v.map_or(Value::Null, |s| Value::String(s.to_string()))
}

impl Job {
    /// A job just created.
    pub fn new(id: i64, subject: &str, description: Description) -> Job {
        Job {
            id,
            subject: subject.to_string(),
            description,
            status: Status::Created,
            error: None,
            exit: None,
            priority: 1,
            times: Times {
                create: now(),
                ..Times::default()
            },
            process: None,
        }
    }

    /// Ends the job in `status`, with `error` for ERRORED.
    pub fn end(&mut self, status: Status, error: Option<String>) {
        let t = Some(now());
        match status {
            Status::Finished => self.times.finish = t,
            Status::Killed => self.times.kill = t,
            _ => self.times.error = t,
        }
        self.status = status;
        self.error = error;
        self.process = None;
    }

    /// The record as `job_status` reports it; `stored` adds what only the server needs.
    pub fn to_value(&self, stored: bool) -> Value {
        let (code, how, signal) = match self.exit {
            None => (Value::Null, None, Value::Null),
            Some(Exit::Exited(c)) => (Value::Int(c.into()), Some("EXITED"), Value::Null),
            Some(Exit::Signaled(s)) => {
                (Value::Null, Some("SIGNALED"), Value::String(signal_name(s)))
            }
        };
        let t = &self.times;
        let mut members = vec![
            ("id".to_string(), Value::Int(self.id)),
            ("error".into(), opt_str(self.error.as_deref())),
            (
                "executable".into(),
                Value::String(self.description.executable.clone()),
            ),
            ("exit_code".into(), code),
            ("exit_status".into(), opt_str(how)),
            ("exit_signal".into(), signal),
            ("priority".into(), Value::Int(self.priority)),
            ("status".into(), Value::String(self.status.name().into())),
            ("subject".into(), Value::String(self.subject.clone())),
            ("tag".into(), Value::String(self.description.tag.clone())),
            ("time_commit".into(), opt_int(t.commit)),
            ("time_create".into(), Value::Int(t.create)),
            ("time_error".into(), opt_int(t.error)),
            ("time_finish".into(), opt_int(t.finish)),
            ("time_kill".into(), opt_int(t.kill)),
            ("time_start".into(), opt_int(t.start)),
            // Reaped jobs are forgotten at once, so no record shows a reap time.
            ("time_reap".into(), Value::Null),
        ];
        members.extend(self.description.members());
        if stored {
            if let Some(p) = self.process {
                members.push((
                    "process".into(),
                    Value::Object(vec![
                        ("pgid".into(), Value::Int(p.pgid.into())),
                        ("uid".into(), Value::Int(p.uid.into())),
                        ("start_ticks".into(), Value::Int(p.start_ticks as i64)),
                        (
                            "cpu_us".into(),
                            Value::Int(i64::try_from(p.cpu_us).unwrap_or(i64::MAX)),
                        ),
                    ]),
                ));
            }
        }
        Value::Object(members)
    }

    /// Reads a record written by [`Job::to_value`].
    pub fn from_value(value: &Value) -> Result<Job, String> {
        let int = |name: &str| -> Result<Option<i64>, String> {
            match value.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Int(n)) => Ok(Some(*n)),
                Some(other) => Err(format!("{name} is {}", other.to_json())),
            }
        };
        let string = |name: &str| -> Option<String> {
            value.get(name).and_then(Value::as_str).map(str::to_string)
        };
        let id = int("id")?.ok_or("no id")?;
        let status = string("status")
            .and_then(|s| Status::parse(&s))
            .ok_or("no status")?;
        let exit = match string("exit_status").as_deref() {
            None => None,
            Some("EXITED") => Some(Exit::Exited(int("exit_code")?.ok_or("no exit_code")? as i32)),
            Some("SIGNALED") => Some(Exit::Signaled(
                string("exit_signal")
                    .and_then(|s| signal_number(&s))
                    .ok_or("no exit_signal")?,
            )),
            Some(other) => return Err(format!("exit_status {other}")),
        };
        let process = match value.get("process") {
            Some(p @ Value::Object(_)) => {
                let field = |n: &str| p.get(n).and_then(Value::as_i64).ok_or(n.to_string());
                Some(Process {
                    pgid: field("pgid")? as i32,
                    uid: field("uid")? as u32,
                    start_ticks: field("start_ticks")? as u64,
                    // Absent from records written before checkpoints.
                    cpu_us: field("cpu_us").unwrap_or(0).max(0) as u64,
                })
            }
            _ => None,
        };
        Ok(Job {
            id,
            subject: string("subject").ok_or("no subject")?,
            description: Description::from_value(value).map_err(|e| e.message)?,
            status,
            error: string("error"),
            exit,
            priority: int("priority")?.unwrap_or(1),
            times: Times {
                create: int("time_create")?.unwrap_or(0),
                commit: int("time_commit")?,
                start: int("time_start")?,
                finish: int("time_finish")?,
                kill: int("time_kill")?,
                error: int("time_error")?,
            },
            process,
        })
    }
}

/// The names of the standard signals, by number (cctools reports `SIGSEGV`, not 11).
const SIGNALS: [&str; 31] = [
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGILL",
    "SIGTRAP",
    "SIGABRT",
    "SIGBUS",
    "SIGFPE",
    "SIGKILL",
    "SIGUSR1",
    "SIGSEGV",
    "SIGUSR2",
    "SIGPIPE",
    "SIGALRM",
    "SIGTERM",
    "SIGSTKFLT",
    "SIGCHLD",
    "SIGCONT",
    "SIGSTOP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGVTALRM",
    "SIGPROF",
    "SIGWINCH",
    "SIGIO",
    "SIGPWR",
    "SIGSYS",
];

/// `SIGSEGV` for 11; real-time and unknown signals as `SIG34`.
pub fn signal_name(signal: i32) -> String {
    usize::try_from(signal - 1)
        .ok()
        .and_then(|i| SIGNALS.get(i))
        .map_or_else(|| format!("SIG{signal}"), |s| s.to_string())
}

fn signal_number(name: &str) -> Option<i32> {
    if let Some(i) = SIGNALS.iter().position(|s| *s == name) {
        return Some(i as i32 + 1);
    }
    name.strip_prefix("SIG")?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> Job {
        let d = Description::parse(
            br#"{"executable":"/bin/sh","arguments":["sh"],"tag":"t","files":[
                {"task_path":"o","serv_path":"/o","type":"OUTPUT"}]}"#,
        )
        .unwrap();
        Job::new(7, "unix:alice", d)
    }

    #[test]
    fn status_records_have_cctools_members_in_cctools_order() {
        let mut j = job();
        j.exit = Some(Exit::Signaled(11));
        let text = j.to_value(false).to_json();
        let keys = [
            "id",
            "error",
            "executable",
            "exit_code",
            "exit_status",
            "exit_signal",
            "priority",
            "status",
            "subject",
            "tag",
            "time_commit",
            "time_create",
            "time_error",
            "time_finish",
            "time_kill",
            "time_start",
            "time_reap",
            "arguments",
            "environment",
            "files",
        ];
        let mut at = 0;
        for k in keys {
            let found = text[at..]
                .find(&format!("\"{k}\":"))
                .unwrap_or_else(|| panic!("{k} in {text}"));
            at += found;
        }
        assert!(text.contains(r#""exit_signal":"SIGSEGV""#), "{text}");
        assert!(text.contains(r#""status":"CREATED""#), "{text}");
        assert!(text.contains(
            r#"{"binding":"LINK","serv_path":"/o","size":null,"tag":null,"task_path":"o","type":"OUTPUT"}"#
        ), "{text}");
    }

    #[test]
    fn stored_records_read_back_whole() {
        let mut j = job();
        j.status = Status::Started;
        j.times.start = Some(5);
        j.process = Some(Process {
            pgid: 42,
            uid: 65534,
            start_ticks: 1234,
            cpu_us: 5_000_000,
        });
        let again = Job::from_value(&j.to_value(true)).unwrap();
        assert_eq!(again, j);
        j.end(Status::Finished, None);
        j.exit = Some(Exit::Exited(3));
        let again = Job::from_value(&j.to_value(true)).unwrap();
        assert_eq!(again, j);
        assert!(again.status.is_terminal());
    }

    #[test]
    fn signals_have_names() {
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(40), "SIG40");
        assert_eq!(signal_number("SIGKILL"), Some(9));
        assert_eq!(signal_number("SIG40"), Some(40));
    }
}
