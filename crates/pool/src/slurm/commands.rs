//! Slurm's own commands, run as a user would run them: `sinfo` for a partition's nodes,
//! `sbatch` to submit a job array (its script on standard input), `scontrol show job` for
//! the state of each array task, `scancel`. A failure says what to do about it: a missing
//! command (install Slurm's client commands), an unreachable controller (is slurmctld
//! running? `scontrol ping`), no munge (is munged running?), or Slurm's own words.

use std::io::Write;
use std::process::{Command, Stdio};

/// A node of the partition.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub name: String,
    pub cpus: usize,
}

/// One array task as the controller reports it.
#[derive(Clone, Debug, PartialEq)]
pub struct ArrayTask {
    pub index: usize,
    /// `PENDING`, `RUNNING`, `COMPLETED`, `FAILED`, `NODE_FAIL`, ...
    pub state: String,
    /// Where its script runs or ran.
    pub node: Option<String>,
    /// Its script's exit code and the signal that ended it, as `ExitCode=3:0`.
    pub exit: Option<(i32, i32)>,
    pub reason: String,
}

impl ArrayTask {
    /// True once the task has ended, one way or another.
    pub fn ended(&self) -> bool {
        !matches!(
            self.state.as_str(),
            "PENDING"
                | "CONFIGURING"
                | "RUNNING"
                | "COMPLETING"
                | "REQUEUED"
                | "REQUEUE_FED"
                | "REQUEUE_HOLD"
                | "RESIZING"
                | "SUSPENDED"
                | "STOPPED"
                | "SIGNALING"
                | "STAGE_OUT"
        )
    }

    /// True if it ended through no fault of its own: the node, or Slurm, gave up on it.
    pub fn lost(&self) -> bool {
        matches!(self.state.as_str(), "NODE_FAIL" | "BOOT_FAIL" | "PREEMPTED")
    }

    /// How it ended, for a report: `FAILED, exit 125`.
    pub fn describe(&self) -> String {
        match self.exit {
            Some((0, 0)) | None => self.state.clone(),
            Some((code, 0)) => format!("{}, exit {code}", self.state),
            Some((_, signal)) => format!("{}, signal {signal}", self.state),
        }
    }
}

/// Runs a Slurm command; its standard output, or what went wrong in words a user can act
/// on.
fn slurm(program: &str, args: &[String], input: Option<&str>) -> Result<String, String> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "{program} not found: --slurm needs Slurm's commands (sbatch, scontrol, sinfo, \
                 scancel) on PATH (Debian: apt-get install slurm-client)"
            )
        } else {
            format!("{program}: {e}")
        }
    })?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        // A command that refuses early closes its input; its status says why.
        let _ = stdin.write_all(text.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let said = String::from_utf8_lossy(if out.stderr.trim_ascii().is_empty() {
        &out.stdout
    } else {
        &out.stderr
    });
    let said = said.lines().next().unwrap_or("").trim();
    let said = if said.is_empty() {
        format!("{}", out.status)
    } else {
        said.to_string()
    };
    Err(explain(program, &said))
}

/// What a failed Slurm command's words mean for the user.
pub fn explain(program: &str, said: &str) -> String {
    let lower = said.to_lowercase();
    if lower.contains("munge") && (lower.contains("socket") || lower.contains("encode")) {
        format!("{program}: cannot authenticate to Slurm ({said}): is munged running? try `munge -n | unmunge`")
    } else if lower.contains("unable to contact slurm controller")
        || lower.contains("connection refused")
        || lower.contains("socket timed out")
        || lower.contains("zero bytes were transmitted")
        || (program == "scontrol" && lower.contains(" is down"))
    {
        format!(
            "{program}: cannot reach the Slurm controller ({said}): is slurmctld running? try `scontrol ping`"
        )
    } else {
        format!("{program}: {said}")
    }
}

/// Checks that Slurm's commands are there (sbatch first: without it nothing can be done)
/// and that the controller answers (`scontrol ping` says so at once, where other commands
/// retry for seconds).
pub fn check() -> Result<(), String> {
    slurm("sbatch", &["--version".to_string()], None)?;
    slurm("scontrol", &["ping".to_string()], None).map(|_| ())
}

/// The nodes of `partition`, or of the default partition.
pub fn nodes(partition: Option<&str>) -> Result<Vec<Node>, String> {
    let mut args = vec![
        "-h".to_string(),
        "-N".into(),
        "-o".into(),
        "%N|%c|%P".into(),
    ];
    if let Some(p) = partition {
        args.extend(["-p".to_string(), p.to_string()]);
    }
    let text = slurm("sinfo", &args, None)?;
    let mut nodes: Vec<Node> = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.trim().split('|').collect();
        let [name, cpus, part] = fields[..] else {
            continue;
        };
        if partition.is_none() && !part.ends_with('*') {
            continue;
        }
        if nodes.iter().any(|n| n.name == name) {
            continue;
        }
        nodes.push(Node {
            name: name.to_string(),
            cpus: cpus.parse().unwrap_or(1),
        });
    }
    if nodes.is_empty() {
        return Err(match partition {
            Some(p) => format!("sinfo: partition {p} has no nodes (see `sinfo -p {p}`)"),
            None => "sinfo: no default partition with nodes; name one with --slurm-partition"
                .to_string(),
        });
    }
    Ok(nodes)
}

/// Submits `script` as an array of `count` tasks, at most `max_running` of them at once,
/// with sbatch's options `args`; the job's id.
pub fn submit(
    count: usize,
    max_running: Option<usize>,
    args: &[String],
    script: &str,
) -> Result<String, String> {
    let limit = max_running.map_or(String::new(), |m| format!("%{m}"));
    let mut all = vec![
        "--parsable".to_string(),
        format!("--array=0-{}{limit}", count.saturating_sub(1)),
    ];
    all.extend_from_slice(args);
    let out = slurm("sbatch", &all, Some(script))?;
    let id = out.trim().split(';').next().unwrap_or("").to_string();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("sbatch: expected a job id, got {:?}", out.trim()));
    }
    Ok(id)
}

/// The tasks of array job `job` that the controller still knows (those ended more than
/// MinJobAge ago are forgotten).
pub fn array_tasks(job: &str) -> Result<Vec<ArrayTask>, String> {
    match slurm(
        "scontrol",
        &["-o".into(), "show".into(), "job".into(), job.into()],
        None,
    ) {
        Ok(text) => Ok(parse_jobs(&text)),
        Err(e) if e.contains("Invalid job id") => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Cancels jobs, saying so if Slurm refuses.
pub fn cancel(jobs: &[String]) {
    if jobs.is_empty() {
        return;
    }
    if let Err(e) = slurm("scancel", jobs, None) {
        eprintln!("roost pool: {e}");
    }
}

/// The array tasks in `scontrol -o show job` lines (a range of pending tasks is one line).
pub fn parse_jobs(text: &str) -> Vec<ArrayTask> {
    let mut tasks = Vec::new();
    for line in text.lines() {
        let field = |key: &str| {
            line.split(' ')
                .find_map(|word| word.strip_prefix(key)?.strip_prefix('='))
                .filter(|v| !v.is_empty() && *v != "(null)")
        };
        let Some(indices) = field("ArrayTaskId").map(indices) else {
            continue;
        };
        let state = field("JobState").unwrap_or("UNKNOWN").to_string();
        let node = field("BatchHost")
            .or_else(|| field("NodeList"))
            .map(str::to_string);
        let exit = field("ExitCode").and_then(|e| {
            let (code, signal) = e.split_once(':')?;
            Some((code.parse().ok()?, signal.parse().ok()?))
        });
        let reason = field("Reason").unwrap_or("").to_string();
        for index in indices {
            tasks.push(ArrayTask {
                index,
                state: state.clone(),
                node: node.clone(),
                exit,
                reason: reason.clone(),
            });
        }
    }
    tasks
}

/// The indices of an `ArrayTaskId`: `3`, `2-5`, `1,4-6`, with a `%N` limit after them.
fn indices(spec: &str) -> Vec<usize> {
    let spec = spec.split('%').next().unwrap_or("");
    let mut out = Vec::new();
    for part in spec.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        // A step (`0-9:2`) is Slurm's too.
        let (b, step) = b.split_once(':').unwrap_or((b, "1"));
        if let (Ok(a), Ok(b), Ok(step)) = (a.parse::<usize>(), b.parse(), step.parse::<usize>()) {
            out.extend((a..=b).step_by(step.max(1)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_tasks_are_read_from_scontrol() {
        let text = "JobId=2 ArrayJobId=1 ArrayTaskId=0 JobName=roost pool UserId=root(0) JobState=COMPLETED Reason=None ExitCode=0:0 NodeList=n1 BatchHost=n1 Command=(null)\n\
                    JobId=3 ArrayJobId=1 ArrayTaskId=1 JobName=x JobState=FAILED Reason=NonZeroExitCode ExitCode=125:0 NodeList=n2 BatchHost=n2\n\
                    JobId=1 ArrayJobId=1 ArrayTaskId=2-3,5%2 JobName=x JobState=PENDING Reason=Resources ExitCode=0:0 NodeList= \n";
        let tasks = parse_jobs(text);
        let summary: Vec<(usize, &str, Option<&str>)> = tasks
            .iter()
            .map(|t| (t.index, t.state.as_str(), t.node.as_deref()))
            .collect();
        assert_eq!(
            summary,
            [
                (0, "COMPLETED", Some("n1")),
                (1, "FAILED", Some("n2")),
                (2, "PENDING", None),
                (3, "PENDING", None),
                (5, "PENDING", None)
            ]
        );
        assert_eq!(tasks[1].describe(), "FAILED, exit 125");
        assert!(tasks[1].ended() && !tasks[2].ended() && !tasks[1].lost());
        assert_eq!(indices("0-9:3"), [0, 3, 6, 9]);
    }

    #[test]
    fn failures_say_what_to_try() {
        let e = explain(
            "sinfo",
            "slurm_load_partitions: Unable to contact slurm controller (connect failure)",
        );
        assert!(
            e.ends_with("is slurmctld running? try `scontrol ping`"),
            "{e}"
        );
        let e = explain("scontrol", "Slurmctld(primary) at node0 is DOWN");
        assert!(
            e.contains("(Slurmctld(primary) at node0 is DOWN): is slurmctld running?"),
            "{e}"
        );
        let e = explain(
            "sbatch",
            "sbatch: error: Batch job submission failed: Invalid partition name specified",
        );
        assert_eq!(
            e,
            "sbatch: sbatch: error: Batch job submission failed: Invalid partition name specified"
        );
        let e = slurm("roost-no-such-slurm-command", &[], None).unwrap_err();
        assert!(e.contains("not found"), "{e}");
    }
}
