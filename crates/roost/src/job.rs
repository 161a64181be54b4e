//! `roost job`: the Chirp job RPCs from the command line, against `roost serve --jobs` or
//! cctools' `chirp_server --jobs`: create a job from a JSON description, commit, kill, show,
//! wait for and reap jobs, or `run` one from start to end.

use crate::remote::{connect_advice, describe, options, ConnectArgs, Failure};
use clap::{Args, Subcommand};
use roost_catalog::json::{self, Value};
use roost_client::{ChirpUrl, Client, Error, Options};
use std::io::Read;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Options of `roost job`.
#[derive(Args)]
#[command(after_help = "\
SERVER is chirp://host[:port] (or host[:port]). A description is cctools' JSON:
  {\"executable\": \"/bin/sh\", \"arguments\": [\"sh\", \"-c\", \"sort in > out\"],
   \"environment\": {\"LC_ALL\": \"C\"}, \"tag\": \"sort 1\",
   \"files\": [{\"task_path\": \"in\", \"serv_path\": \"/data/in\", \"type\": \"INPUT\"},
             {\"task_path\": \"out\", \"serv_path\": \"/data/out.%j\", \"type\": \"OUTPUT\"}]}
The arguments are the whole argument vector (the first is the program's name); the program
runs in a sandbox on the server, which copies the INPUT files in from the server's paths before
it starts and the OUTPUT files back (%j: the job id) when it ends. Its standard output and error
are the sandbox files .roost.stdout and .roost.stderr (name them as outputs to keep them).
Creating a job needs the x right on the server's / and r and w on the files' directories.

Examples:
  roost job run chirp://fs7 sort.json            # create, commit, wait, show, reap
  id=$(roost job create chirp://fs7 sort.json) && roost job commit chirp://fs7 $id
  roost job wait chirp://fs7 $id --wait 10 && roost job reap chirp://fs7 $id
  roost job status chirp://fs7 3 4 --json

Exit status: 0 on success; 1 when the server refused or could not be reached; 2 for bad
options. `roost job run` exits with the job's exit code (128+N if signal N ended it, 1 if it
was killed or ERRORED). A job `roost job run` gives up on (--wait ran out, the server stopped
answering) is killed and reaped; so is its job when SIGINT, SIGTERM or SIGHUP stop it (exit
status 128+N).")]
pub struct JobArgs {
    #[command(subcommand)]
    command: JobCommand,
}

#[derive(Subcommand)]
enum JobCommand {
    /// Create a job from a JSON description (FILE, or - for standard input); prints its id.
    Create {
        #[command(flatten)]
        connect: ConnectArgs,
        /// The server: chirp://host[:port].
        server: String,
        /// The JSON job description: a file, or - for standard input.
        file: String,
    },
    /// Start created jobs.
    Commit {
        #[command(flatten)]
        connect: ConnectArgs,
        /// The server: chirp://host[:port].
        server: String,
        /// Job ids.
        #[arg(required = true)]
        ids: Vec<i64>,
    },
    /// Kill jobs that have not ended.
    Kill {
        #[command(flatten)]
        connect: ConnectArgs,
        /// The server: chirp://host[:port].
        server: String,
        /// Job ids.
        #[arg(required = true)]
        ids: Vec<i64>,
    },
    /// Show jobs: one line each (id, status, exit, tag, error), or the server's JSON records.
    Status {
        #[command(flatten)]
        connect: ConnectArgs,
        /// The server: chirp://host[:port].
        server: String,
        /// Job ids.
        #[arg(required = true)]
        ids: Vec<i64>,
        /// Print the JSON records as the server sends them.
        #[arg(long)]
        json: bool,
    },
    /// Wait for jobs to end and show those that have (and are not reaped yet). ID 0 (the
    /// default) waits for any of your jobs; a negative ID for any numbered at least -ID.
    /// Exit status 1 if none ended in time.
    Wait {
        #[command(flatten)]
        connect: ConnectArgs,
        /// The server: chirp://host[:port].
        server: String,
        /// The job to wait for: 0 for any of yours, -N for any numbered N or more.
        #[arg(default_value_t = 0, allow_negative_numbers = true)]
        id: i64,
        /// Seconds to wait; servers wait at most 30 s per request.
        #[arg(long = "wait", default_value = "30s", value_name = "DURATION", value_parser = crate::size::duration)]
        wait: Duration,
        /// Print the JSON records as the server sends them.
        #[arg(long)]
        json: bool,
    },
    /// Forget jobs that have ended (their outputs stay).
    Reap {
        #[command(flatten)]
        connect: ConnectArgs,
        /// The server: chirp://host[:port].
        server: String,
        /// Job ids.
        #[arg(required = true)]
        ids: Vec<i64>,
    },
    /// Create a job from FILE (or - for standard input), commit it, wait for it to end,
    /// show how it ended, and reap it.
    Run {
        #[command(flatten)]
        connect: ConnectArgs,
        /// The server: chirp://host[:port].
        server: String,
        /// The JSON job description: a file, or - for standard input.
        file: String,
        /// Give up (and kill the job) after this many seconds; default: wait as long as it runs.
        #[arg(long = "wait", value_name = "DURATION", value_parser = crate::size::duration)]
        wait: Option<Duration>,
        /// Leave the ended job for `roost job status` instead of reaping it.
        #[arg(long)]
        keep: bool,
        /// Print the job's JSON record as the server sends it.
        #[arg(long)]
        json: bool,
    },
}

impl JobCommand {
    fn connect_args(&self) -> &ConnectArgs {
        match self {
            JobCommand::Create { connect, .. }
            | JobCommand::Commit { connect, .. }
            | JobCommand::Kill { connect, .. }
            | JobCommand::Status { connect, .. }
            | JobCommand::Wait { connect, .. }
            | JobCommand::Reap { connect, .. }
            | JobCommand::Run { connect, .. } => connect,
        }
    }
}

pub fn main(args: JobArgs) -> ExitCode {
    let options = match options(args.command.connect_args()) {
        Ok(o) => o,
        Err(Failure(message)) => {
            eprintln!("roost job: {message}");
            return ExitCode::from(2);
        }
    };
    match run(args.command, &options) {
        Ok(code) => code,
        Err(Failure(message)) => {
            eprintln!("roost job: {message}");
            ExitCode::from(1)
        }
    }
}

/// A connection to the server named on the command line.
struct Server {
    name: String,
    client: Client,
    /// The longest `job_wait` to ask for: less than the time a reply may take (--timeout),
    /// so that a long job is not taken for a server that does not answer.
    step: i64,
}

impl Server {
    fn open(text: &str, options: &Options) -> Result<Server, Failure> {
        let url = if text.contains("://") || text.starts_with("/chirp/") {
            text.to_string()
        } else {
            format!("chirp://{text}")
        };
        let url = ChirpUrl::parse(&url)
            .map_err(|e| Failure(format!("{e} (write chirp://host[:port])")))?;
        let name = format!("chirp://{}", url.authority());
        let client = Client::connect(&url.authority(), options)
            .map_err(|e| Failure(format!("{name}: {}", connect_advice(&e))))?;
        let step = options.io_timeout.map_or(30, |t| {
            let whole = i64::try_from(t.as_secs()).unwrap_or(i64::MAX);
            (whole - 1).clamp(0, 30)
        });
        Ok(Server { name, client, step })
    }

    /// Phrases a failed `what`, with the server's reason when it gives one.
    fn fail(&mut self, what: &str, error: Error) -> Failure {
        let mut message = format!("{}: {what}: {}", self.name, describe(&error));
        if !error.breaks_connection() {
            if let Ok(Some(why)) = self.client.explain() {
                message.push_str(&format!(" ({why})"));
            }
        }
        Failure(message)
    }
}

fn read_description(file: &str) -> Result<String, Failure> {
    let mut text = String::new();
    let read = if file == "-" {
        std::io::stdin().read_to_string(&mut text)
    } else {
        std::fs::File::open(file).and_then(|mut f| f.read_to_string(&mut text))
    };
    read.map_err(|e| Failure(format!("{file}: {e}")))?;
    Ok(text)
}

fn run(command: JobCommand, options: &Options) -> Result<ExitCode, Failure> {
    match command {
        JobCommand::Create { server, file, .. } => {
            let text = read_description(&file)?;
            let mut s = Server::open(&server, options)?;
            let id = s
                .client
                .job_create(&text)
                .map_err(|e| s.fail("job_create", e))?;
            println!("{id}");
        }
        JobCommand::Commit { server, ids, .. } => {
            let mut s = Server::open(&server, options)?;
            s.client
                .job_commit(&ids)
                .map_err(|e| s.fail("job_commit", e))?;
        }
        JobCommand::Kill { server, ids, .. } => {
            let mut s = Server::open(&server, options)?;
            s.client.job_kill(&ids).map_err(|e| s.fail("job_kill", e))?;
        }
        JobCommand::Reap { server, ids, .. } => {
            let mut s = Server::open(&server, options)?;
            s.client.job_reap(&ids).map_err(|e| s.fail("job_reap", e))?;
        }
        JobCommand::Status {
            server, ids, json, ..
        } => {
            let mut s = Server::open(&server, options)?;
            let text = s
                .client
                .job_status(&ids)
                .map_err(|e| s.fail("job_status", e))?;
            show(&text, json)?;
        }
        JobCommand::Wait {
            server,
            id,
            wait,
            json,
            ..
        } => {
            let mut s = Server::open(&server, options)?;
            let text = wait_for(&mut s, id, Some(wait))?;
            if records(&text)?.is_empty() {
                return Err(Failure(format!(
                    "{}: no job ended within {} s",
                    s.name,
                    wait.as_secs_f64()
                )));
            }
            show(&text, json)?;
        }
        JobCommand::Run {
            server,
            file,
            wait,
            keep,
            json,
            ..
        } => {
            let text = read_description(&file)?;
            let mut s = Server::open(&server, options)?;
            return run_job(&mut s, options, &text, wait, keep, json);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `job_wait` until something ends or `limit` passes (`None`: no limit), in requests of at
/// most the server's 30 s, and shorter than a reply may take (a request of 0 s, which the
/// server answers at once, is repeated every 200 ms).
fn wait_for(s: &mut Server, id: i64, limit: Option<Duration>) -> Result<String, Failure> {
    let started = Instant::now();
    loop {
        let left = limit.map(|l| l.saturating_sub(started.elapsed()));
        let step = left.map_or(s.step, |l| (l.as_secs() as i64).min(s.step));
        let asked = Instant::now();
        let text = s
            .client
            .job_wait(id, step)
            .map_err(|e| s.fail("job_wait", e))?;
        if !records(&text)?.is_empty() || left.is_some_and(|l| l <= asked.elapsed()) {
            return Ok(text);
        }
        if step == 0 {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// `roost job run`: creates, commits and waits for a job, then shows and reaps it. A job it
/// gives up on (`--wait` ran out, the server stopped answering, a stop signal) is killed and
/// reaped, on a new connection if need be: it never leaves one running behind.
fn run_job(
    s: &mut Server,
    options: &Options,
    text: &str,
    limit: Option<Duration>,
    keep: bool,
    json: bool,
) -> Result<ExitCode, Failure> {
    let id = s
        .client
        .job_create(text)
        .map_err(|e| s.fail("job_create", e))?;
    kill_on_signals(&s.name, options, id)?;
    let ended = s
        .client
        .job_commit(&[id])
        .map_err(|e| s.fail("job_commit", e))
        .and_then(|()| wait_for(s, id, limit));
    if STOPPING.load(Ordering::Acquire) {
        // The signal's thread is killing the job (which may be why the wait ended): it ends
        // the command.
        loop {
            std::thread::park();
        }
    }
    let ended = match ended {
        Ok(text) => text,
        Err(Failure(why)) => return Err(Failure(format!("{why}; {}", give_up(s, options, id)))),
    };
    let list = records(&ended)?;
    let Some(record) = list.first() else {
        let what = give_up(s, options, id);
        return Err(Failure(format!(
            "{}: job {id} did not end within {} s; {what}",
            s.name,
            limit.unwrap_or_default().as_secs(),
        )));
    };
    if json {
        println!("{}", record.to_json());
    } else {
        println!("{}", summary(record));
    }
    if !keep {
        s.client
            .job_reap(&[id])
            .map_err(|e| s.fail("job_reap", e))?;
    }
    Ok(exit_code(record))
}

/// Kills and reaps job `id`, which `roost job run` gives up on, over a new connection if the
/// one it had broke; what became of it, for the message.
fn give_up(s: &mut Server, options: &Options, id: i64) -> String {
    if s.client.is_broken() {
        match Server::open(&s.name, options) {
            Ok(fresh) => *s = fresh,
            Err(Failure(why)) => return format!("job {id} could not be killed: {why}"),
        }
    }
    match s.client.job_kill(&[id]) {
        // Refused because it has just ended: it is reaped all the same.
        Ok(()) | Err(Error::Remote { .. }) => {
            let _ = s.client.job_reap(&[id]);
            format!("job {id} killed")
        }
        Err(e) => format!("job {id} could not be killed: {}", describe(&e)),
    }
}

/// Set once a stop signal came: its thread ends the command.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// From now on, SIGINT, SIGTERM or SIGHUP kill and reap job `id` on the server `name` (over
/// a connection of their own: the command's may be waiting) and end the command with 128 +
/// the signal's number.
fn kill_on_signals(name: &str, options: &Options, id: i64) -> Result<(), Failure> {
    let signals =
        crate::signals::StopSignals::catch().map_err(|e| Failure(format!("signals: {e}")))?;
    let (name, options) = (name.to_string(), options.clone());
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let signal = signals.wait();
            STOPPING.store(true, Ordering::Release);
            let what = match Server::open(&name, &options) {
                Ok(mut s) => give_up(&mut s, &options, id),
                Err(Failure(why)) => format!("job {id} could not be killed: {why}"),
            };
            eprintln!(
                "roost job: {name}: stopped by {}: {what}",
                roost_server::jobs::record::signal_name(signal)
            );
            std::process::exit(128 + signal);
        })
        .map_err(|e| Failure(format!("signals: {e}")))?;
    Ok(())
}

/// The job's own exit code; 128+N for signal N; 1 when it was killed or ERRORED.
fn exit_code(record: &Value) -> ExitCode {
    let text = |k: &str| record.get(k).and_then(Value::as_str).unwrap_or("");
    if text("status") != "FINISHED" {
        return ExitCode::from(1);
    }
    match text("exit_status") {
        "EXITED" => {
            let code = record.get("exit_code").and_then(Value::as_i64).unwrap_or(1);
            ExitCode::from(u8::try_from(code).unwrap_or(1))
        }
        _ => {
            let number = signal_number(text("exit_signal"));
            ExitCode::from(128u8.saturating_add(number))
        }
    }
}

fn signal_number(name: &str) -> u8 {
    const NAMES: [&str; 15] = [
        "SIGHUP", "SIGINT", "SIGQUIT", "SIGILL", "SIGTRAP", "SIGABRT", "SIGBUS", "SIGFPE",
        "SIGKILL", "SIGUSR1", "SIGSEGV", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM",
    ];
    NAMES
        .iter()
        .position(|n| *n == name)
        .map(|i| i as u8 + 1)
        .or_else(|| name.strip_prefix("SIG")?.parse().ok())
        .unwrap_or(0)
}

/// The records of a `job_status` or `job_wait` answer.
fn records(text: &str) -> Result<Vec<Value>, Failure> {
    match json::parse(text.as_bytes()) {
        Ok(Value::Array(items)) => Ok(items),
        _ => Err(Failure(format!(
            "the server's job records are not a JSON array: {text:.80}"
        ))),
    }
}

fn show(text: &str, raw: bool) -> Result<(), Failure> {
    if raw {
        println!("{text}");
        return Ok(());
    }
    for record in records(text)? {
        println!("{}", summary(&record));
    }
    Ok(())
}

/// One line for a job: `7 FINISHED exit 0 tag "sort 1"`, then an error if it has one.
fn summary(record: &Value) -> String {
    let get = |k: &str| record.get(k).filter(|v| !matches!(v, Value::Null));
    let id = get("id").map_or("?".into(), Value::to_plain);
    let status = get("status").map_or("?".into(), Value::to_plain);
    let exit = match (get("exit_code"), get("exit_signal")) {
        (Some(code), _) => format!(" exit {}", code.to_plain()),
        (None, Some(signal)) => format!(" signal {}", signal.to_plain()),
        _ => String::new(),
    };
    let tag = get("tag").map_or(String::new(), |t| format!(" tag {}", t.to_json()));
    let error = get("error").map_or(String::new(), |e| format!(" error: {}", e.to_plain()));
    format!("{id} {status}{exit}{tag}{error}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_and_exit_codes_follow_the_record() {
        let r = json::parse(
            br#"{"id":7,"status":"FINISHED","exit_code":3,"exit_status":"EXITED","exit_signal":null,"tag":"t","error":null}"#,
        )
        .unwrap();
        assert_eq!(summary(&r), r#"7 FINISHED exit 3 tag "t""#);
        assert_eq!(exit_code(&r), ExitCode::from(3));
        let r = json::parse(
            br#"{"id":8,"status":"FINISHED","exit_code":null,"exit_status":"SIGNALED","exit_signal":"SIGKILL"}"#,
        )
        .unwrap();
        assert_eq!(summary(&r), "8 FINISHED signal SIGKILL");
        assert_eq!(exit_code(&r), ExitCode::from(137));
        let r = json::parse(br#"{"id":9,"status":"ERRORED","error":"input /a: no"}"#).unwrap();
        assert_eq!(summary(&r), "9 ERRORED error: input /a: no");
        assert_eq!(exit_code(&r), ExitCode::from(1));
    }
}
