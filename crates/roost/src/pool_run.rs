//! `roost pool run` and `roost pool complib`: the command line over `roost_pool` (hosts from
//! the catalog or named, the bag of tasks from a task file or a template, `--slurm` to hand
//! it to Slurm, the report).

use crate::pool::{catalog_addresses, query_first};
use crate::remote::{options, ConnectArgs, Failure};
use crate::signals::StopSignals;
use clap::{Args, Subcommand};
use roost_pool::follow::Follow;
use roost_pool::hosts::{self, Host, Trust};
use roost_pool::slurm::Slurm;
use roost_pool::{complib, taskfile, Config, StopFlag};
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Options of `roost pool`.
#[derive(Args)]
pub struct PoolArgs {
    #[command(subcommand)]
    command: PoolCommand,
}

impl PoolArgs {
    /// `-q`.
    pub fn quiet(&self) -> bool {
        match &self.command {
            PoolCommand::Run(args) => args.pool.quiet,
            PoolCommand::Complib(args) => args.pool.quiet,
        }
    }
}

#[derive(Subcommand)]
enum PoolCommand {
    /// Run a bag of tasks across the pool: from a task file, or a command template over
    /// input files.
    Run(RunArgs),
    /// complib: Smith-Waterman of a 20-sequence query library against a 10,716-sequence
    /// target library, split into tasks across the pool; reports CUPS and efficiency.
    Complib(ComplibArgs),
}

/// Where tasks run and how they get there (shared by `run` and `complib`).
#[derive(Args)]
struct PoolOptions {
    #[command(flatten)]
    connect: ConnectArgs,
    /// The catalog to find hosts in, HOST[:PORT] (repeatable: the first that answers is
    /// used; default $ROOST_CATALOG, else $CATALOG_HOST, else localhost:9097).
    #[arg(long = "catalog", short = 'c', value_name = "HOST[:PORT]")]
    catalogs: Vec<String>,
    /// Run on this server, HOST:PORT (repeatable); without --catalog no catalog is asked.
    #[arg(long = "server", value_name = "HOST:PORT")]
    servers: Vec<String>,
    /// Tasks at once on each --server.
    #[arg(long, default_value_t = 1, value_name = "N")]
    slots: usize,
    /// Also use servers whose catalog reports are not signed with a key the catalog holds
    /// (its `verified` is false, or a cctools catalog, which does not check): anybody can
    /// send such a report and would be sent tasks and their inputs.
    #[arg(long)]
    unsigned: bool,
    /// Use at most N hosts (those with the most headroom). Formerly --hosts, which in every
    /// other command names a FILE of hosts.
    #[arg(long, value_name = "N")]
    max_hosts: Option<usize>,
    /// The directory on each server for the run's files (it needs rwlx there, and x on /).
    #[arg(long, default_value = "/roost-pool", value_name = "DIR")]
    remote_dir: String,
    /// Failed attempts allowed per task beyond the first (each on another host).
    #[arg(long, default_value_t = 2, value_name = "N")]
    retries: u32,
    /// Tasks queued on each server beyond what it runs at once.
    #[arg(long, default_value_t = 1, value_name = "N")]
    queue: usize,
    /// Do not copy slow hosts' last tasks to idle fast hosts.
    #[arg(long)]
    no_speculate: bool,
    /// Seconds between looks at the catalog during the run: hosts it shows down get no new
    /// tasks, hosts that come back or join are taken on.
    #[arg(long, default_value = "5s", value_name = "DURATION", value_parser = crate::size::duration)]
    follow_interval: Duration,
    /// Read the catalog once, at the start (hosts are fixed for the run).
    #[arg(long)]
    no_follow: bool,
    /// Following the catalog: seconds waiting tasks wait for a host when none can take them
    /// (all down or left), before they are given up.
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = crate::size::duration)]
    host_wait: Duration,
    /// No progress line (it is drawn only on a terminal anyway).
    #[arg(long, short)]
    quiet: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Options of `roost pool run`.
#[derive(Args)]
#[command(after_help = "\
A task file has one task a line, OUTPUTS : INPUTS : COMMAND (# starts a comment):
  counts/a.count : data/a.txt : wc -l < a.txt > counts/a.count
  b.sorted=out   : data/b.txt=in ./sortit : ./sortit < in > out
Files are blank-separated words, LOCAL or LOCAL=TASK (TASK: the name in the task's
sandbox, by default LOCAL when relative without .., else its last component); quote names
with blanks, ':' or '=' in \"...\". Inputs are read relative to the current directory and
outputs written relative to --output-dir. The command runs with /bin/sh -c in the sandbox
(PATH=/bin:/usr/bin:/usr/local/bin; run a staged program as ./prog).

With --command, each FILE is a task's input under its own name; {} in the command and in
--output is that name, {.} the name without its extension, {#} the task's number:
  roost pool run --command './count {} > {.}.n' --input bin/count --output '{.}.n' data/*

Hosts are the catalog's up servers that run jobs (roost serve --jobs --catalog) and whose
reports the catalog verified (signed: roost serve --catalog-key, roost catalog --catalog-key;
--unsigned: unsigned ones too), most thermostat headroom first; each runs as many tasks at once as it reports (--job-concurrency)
and its headroom allows. The run asks the catalog again every --follow-interval seconds
(--no-follow: only at the start): a host it shows down gets no new tasks (what runs there
goes on), a host that left the run and reported again since (a restarted server) is taken
back, a new server is taken on (up to --max-hosts); each change is logged once as
`roost pool: HOST: ...`. A catalog that stops answering leaves the run with its hosts. When
no host can take the waiting tasks, they wait --host-wait seconds for one, then fail. Each input is staged once per host under --remote-dir; a failed
task is retried on another host (--retries), a task lost with its host is retried without
counting; each task's outputs are fetched from exactly one attempt. At the end a table shows
each host's tasks and throughput.

With --slurm the same tasks go to Slurm as a job array instead (sbatch; the partition's
nodes are the report's hosts). Inputs are staged once on one server (the first --server, else
the catalog's up server with the most headroom; it need not run jobs), and each array task
runs its command under `roost run` on its node, in a sandbox whose files are mounted from
that server: the command reads its inputs from it and writes its outputs to it through the
agent. roost follows the array with scontrol, reads each task's own record of its exit code
and times from the server, fetches the outputs, and submits failed tasks again as a new
array (--retries). The nodes must reach the server at the address roost uses, and run the
roost program named by --slurm-roost (default: this one's path):
  roost pool run --slurm --server fs7:9094 --slurm-partition batch \
      --slurm-arg=--time=10 --slurm-run-arg=--chirp-mode=cached tasks.txt

With --verify F, a random sample of F of the tasks (at least one) is run a second time, once
it is done, on another host, and the outputs compared byte for byte (BOINC's quorum of two):
the report ends with what agreed, each disagreement naming the task, the output and both
hosts (one of them is wrong), and what could not be checked; a disagreement makes the exit
status 1.

SIGINT, SIGTERM or SIGHUP stop the run: the jobs it submitted are killed and reaped and its
directory is removed from every server (with --slurm: its Slurm jobs are cancelled); a
second signal quits at once.

Exit status: 0 when every task is done; 1 when a task failed for good, or no host could run
it, or --verify found two hosts that disagree, or (--slurm) Slurm could not be used: no
sbatch, no controller, a refused submission;
2 for bad options or a bad task file (the message names the line); 128+N when signal N
stopped it (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP).

Examples:
  roost pool run -c catalog.example.org tasks.txt
  roost pool run --server fs7:9094 --server fs8:9094 --slots 4 --json tasks.txt
  roost pool run --max-hosts 8 --command 'wc -l < {} > {.}.n' --output '{.}.n' data/*")]
struct RunArgs {
    #[command(flatten)]
    pool: PoolOptions,
    #[command(flatten)]
    slurm: SlurmArgs,
    /// A command template run once per FILE (instead of a task file).
    #[arg(long, value_name = "TEMPLATE")]
    command: Option<String>,
    /// With --command: an output to bring back, a template (repeatable).
    #[arg(long = "output", value_name = "TEMPLATE", requires = "command")]
    outputs: Vec<String>,
    /// With --command: a file every task gets, e.g. the program (repeatable).
    #[arg(long = "input", value_name = "FILE", requires = "command")]
    inputs: Vec<PathBuf>,
    /// Where outputs with relative names are written.
    #[arg(long, default_value = ".", value_name = "DIR")]
    output_dir: PathBuf,
    /// Run this fraction of the tasks (a random sample, at least one) a second time on
    /// another host and compare the outputs byte for byte; hosts that disagree are named and
    /// the exit status is 1.
    #[arg(long, value_name = "FRACTION", conflicts_with = "slurm")]
    verify: Option<f64>,
    /// The task file (- for standard input), or with --command the input files.
    #[arg(value_name = "TASKFILE | FILE")]
    files: Vec<PathBuf>,
}

/// `roost pool run --slurm`: hand the tasks to Slurm.
#[derive(Args)]
struct SlurmArgs {
    /// Submit the tasks to Slurm as a job array, each run under `roost run` on a node with
    /// its files mounted from the run's server, instead of through the servers' job RPCs.
    #[arg(long, conflicts_with_all = ["slots", "max_hosts", "queue", "no_speculate"])]
    slurm: bool,
    /// The Slurm partition to submit to (default: Slurm's default partition).
    #[arg(long, value_name = "NAME", requires = "slurm")]
    slurm_partition: Option<String>,
    /// One more sbatch option, e.g. --slurm-arg=--time=10 (repeatable; after roost's own:
    /// --job-name=roost-pool --no-requeue --output=/dev/null, so they win).
    #[arg(
        long = "slurm-arg",
        value_name = "ARG",
        requires = "slurm",
        allow_hyphen_values = true
    )]
    slurm_args: Vec<String>,
    /// One more option for `roost run` on the nodes, e.g. --slurm-run-arg=--chirp-mode=cached
    /// (repeatable; --auth and --key are passed on already).
    #[arg(
        long = "slurm-run-arg",
        value_name = "ARG",
        requires = "slurm",
        allow_hyphen_values = true
    )]
    slurm_run_args: Vec<String>,
    /// The roost program on the nodes (default: this roost's own path).
    #[arg(long, value_name = "PATH", requires = "slurm")]
    slurm_roost: Option<PathBuf>,
    /// At most N tasks of an array run at once (sbatch --array=...%N).
    #[arg(long, value_name = "N", requires = "slurm")]
    slurm_max_running: Option<usize>,
    /// Seconds between looks at the Slurm controller (scontrol show job).
    #[arg(
        long,
        default_value = "1s",
        value_name = "DURATION",
        value_parser = crate::size::duration,
        requires = "slurm"
    )]
    slurm_poll: Duration,
}

/// Options of `roost pool complib`.
#[derive(Args)]
#[command(
    args_override_self = true,
    after_help = "\
complib, the Legion paper's benchmark: the query library (20 sequences, 4,478 residues)
against the target library (10,716 sequences, 3,647,403 residues), both generated
reproducibly (roost-align generate), scored by Smith-Waterman with BLOSUM62 and gaps open 10,
extend 1 (a gap of k costs 10 + (k-1)). The target library is split into tasks that shrink
towards the end; each runs roost-align (staged from --program) on a pool host.

First each host runs one calibration task alone (--calibrate of the targets) under its
thermostat share: its standalone rate. Efficiency is the run's rate (cells / wall-clock
seconds, all staging and scheduling included) over the sum of the standalone rates.
The scores are gathered into WORK/complib.scores and --verify of them are recomputed here
with the scalar reference.

Exit status: 0 when every task is done and every checked score matches; 1 otherwise; 2 for
bad options; 128+N when signal N (SIGINT, SIGTERM, SIGHUP) stopped it: its jobs are killed
and its files removed from the servers first.

Examples:
  roost pool complib -c catalog.example.org --program target/release/roost-align
  roost pool complib --server fs7:9094 --server fs8:9094 --json"
)]
struct ComplibArgs {
    #[command(flatten)]
    pool: PoolOptions,
    /// The working directory: libraries, chunks, outputs, complib.scores.
    #[arg(long, default_value = "complib", value_name = "DIR")]
    work: PathBuf,
    /// The roost-align program to stage (default: the one beside this roost).
    #[arg(long, value_name = "PATH")]
    program: Option<PathBuf>,
    /// Scale the target library (sequences and residues) by F, 0 < F <= 1.
    #[arg(long, default_value_t = 1.0, value_name = "F")]
    scale: f64,
    /// The fraction of the targets each host's calibration task compares (0: none, and no
    /// efficiency).
    #[arg(long, default_value_t = 0.04, value_name = "F")]
    calibrate: f64,
    /// How many scores to recompute with the scalar reference, or `all`.
    #[arg(long, default_value = "2000", value_name = "N|all")]
    verify: String,
}

pub fn main(args: PoolArgs) -> ExitCode {
    let result = match args.command {
        PoolCommand::Run(a) => run(a),
        PoolCommand::Complib(a) => run_complib(a),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err((code, message)) => {
            eprintln!("roost pool: {message}");
            ExitCode::from(code)
        }
    }
}

type Outcome = Result<u8, (u8, String)>;

/// The hosts and the run's configuration from the shared options.
/// `jobs`: the hosts must run jobs (else any up server will do, to hold files).
fn config(pool: &PoolOptions, output_dir: PathBuf, jobs: bool) -> Result<Config, (u8, String)> {
    let options = options(&pool.connect).map_err(|Failure(m)| (2, m))?;
    if pool.slots == 0 || pool.max_hosts == Some(0) {
        return Err((2, "--slots and --max-hosts must be at least 1".into()));
    }
    let seconds = |name: &str, d: Duration| {
        if (Duration::from_millis(100)..=Duration::from_secs(86_400)).contains(&d) {
            Ok(d)
        } else {
            Err((
                2,
                format!("--{name} {}: expected 100ms to 1d", d.as_secs_f64()),
            ))
        }
    };
    let every = seconds("follow-interval", pool.follow_interval)?;
    let host_wait = seconds("host-wait", pool.host_wait)?;
    let mut chosen: Vec<Host> = Vec::new();
    let mut follow = None;
    let trust = if pool.unsigned {
        Trust::AlsoUnsigned
    } else {
        Trust::SignedOnly
    };
    let mut unsigned_left_out = 0;
    for s in &pool.servers {
        let s = s
            .strip_prefix("chirp://")
            .unwrap_or(s)
            .trim_end_matches('/');
        roost_client::split_host_port(s)
            .ok_or_else(|| (2, format!("--server {s}: expected HOST:PORT")))?;
        chosen.push(Host::given(s, pool.slots));
    }
    if pool.servers.is_empty() || !pool.catalogs.is_empty() {
        let catalogs = catalog_addresses(&pool.catalogs).map_err(|e| (2, e))?;
        let timeout = pool
            .connect
            .timeout
            .clamp(Duration::from_secs(1), Duration::from_secs(30));
        let records = query_first("roost pool", &catalogs, timeout)
            .ok_or((1, "no catalog answered".to_string()))?;
        let found = if jobs {
            hosts::choose(&records, None, trust)
        } else {
            hosts::choose_servers(&records, trust)
        };
        unsigned_left_out = if found.is_empty() && trust == Trust::SignedOnly {
            hosts::unverified(&records, jobs)
        } else {
            0
        };
        chosen.extend(found);
        if jobs && !pool.no_follow {
            follow = Some(Follow {
                catalogs,
                every,
                // A catalog answers in milliseconds; a silent one must not hold the run.
                timeout: timeout.min(Duration::from_secs(5)),
                most: pool.max_hosts,
                host_wait,
                first_answer: records,
                trust,
            });
        }
    }
    chosen.dedup_by(|a, b| a.authority == b.authority);
    if let Some(most) = pool.max_hosts {
        chosen.truncate(most);
    }
    if chosen.is_empty() && unsigned_left_out > 0 {
        return Err((
            1,
            format!(
                "no host to run on: the catalog lists {unsigned_left_out} up server{} {}, but none \
                 whose reports are signed with a key the catalog holds (roost serve --catalog-key \
                 and roost catalog --catalog-key; or --unsigned to use unsigned ones)",
                if unsigned_left_out == 1 { "" } else { "s" },
                if jobs { "with jobs" } else { "for the run's files" },
            ),
        ));
    }
    if chosen.is_empty() {
        return Err((
            1,
            if jobs {
                "no host to run on: the catalog lists no up server with jobs (roost serve --jobs --catalog)"
            } else {
                "no server for the run's files: the catalog lists no up server (roost serve --catalog)"
            }
            .into(),
        ));
    }
    Ok(Config {
        hosts: chosen,
        options,
        remote_dir: pool.remote_dir.clone(),
        output_dir,
        retries: pool.retries,
        queue: pool.queue,
        speculate: !pool.no_speculate,
        progress: !pool.quiet && !pool.json && unsafe { libc::isatty(libc::STDERR_FILENO) } == 1,
        follow,
        stop: StopFlag::default(),
        verify: None,
    })
}

fn run(args: RunArgs) -> Outcome {
    let tasks = match &args.command {
        Some(command) => {
            if args.files.is_empty() {
                return Err((2, "--command needs input FILEs".into()));
            }
            taskfile::from_template(command, &args.outputs, &args.inputs, &args.files)
                .map_err(|e| (2, e))?
        }
        None => {
            let [file] = &args.files[..] else {
                return Err((
                    2,
                    "name one TASKFILE (or use --command with input FILEs)".into(),
                ));
            };
            let mut text = Vec::new();
            let read = if file.as_os_str() == "-" {
                std::io::stdin().read_to_end(&mut text)
            } else {
                std::fs::File::open(file).and_then(|mut f| f.read_to_end(&mut text))
            };
            read.map_err(|e| (2, format!("{}: {e}", file.display())))?;
            taskfile::parse(&text).map_err(|e| (2, format!("{}: {e}", file.display())))?
        }
    };
    taskfile::check_files(&tasks).map_err(|e| (2, e))?;
    if let Some(f) = args.verify {
        if !(f > 0.0 && f <= 1.0) {
            return Err((2, format!("--verify {f}: expected a fraction, 0 < F <= 1")));
        }
    }
    let mut config = config(&args.pool, args.output_dir, !args.slurm.slurm)?;
    config.verify = args.verify;
    let report = if args.slurm.slurm {
        let slurm = slurm_setup(&args.slurm, &args.pool.connect)?;
        let signals = StopSignals::catch().map_err(|e| (1, format!("signals: {e}")))?;
        roost_pool::slurm::run(&tasks, &config, &slurm, &mut |wait| {
            signals.poll(wait).is_some()
        })
        .map_err(|e| (1, e))?
    } else {
        stop_on_signals(&config.stop)?;
        roost_pool::run(&tasks, &config)
    };
    if args.pool.json {
        println!("{}", report.to_json().to_json());
    } else {
        print!("{}", report.table());
    }
    eprint!("{}", report.failures());
    if let Some(signal) = report.stopped {
        return Err((128u8.saturating_add(signal as u8), stopped_message(signal)));
    }
    Ok(roost_pool::exit_status(&report))
}

/// The first SIGINT, SIGTERM or SIGHUP raises `stop`: the run kills the jobs it submitted,
/// removes its directory from every server, and exits with 128 + the signal's number. A
/// second one exits at once (removing the outputs being fetched, which are not whole),
/// leaving on the servers whatever the first had not yet cleaned up.
fn stop_on_signals(stop: &StopFlag) -> Result<(), (u8, String)> {
    let signals = StopSignals::catch().map_err(|e| (1, format!("signals: {e}")))?;
    let stop = stop.clone();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let first = signals.wait();
            stop.raise(first);
            eprintln!(
                "roost pool: {}: stopping: killing the run's jobs and removing its files \
                 from the servers (again to quit at once)",
                roost_server::jobs::record::signal_name(first)
            );
            let second = signals.wait();
            // Outputs being fetched stay only under their temporary names: remove them.
            roost_client::partial::remove_registered();
            std::process::exit(128 + second);
        })
        .map_err(|e| (1, format!("signals: {e}")))?;
    Ok(())
}

fn stopped_message(signal: i32) -> String {
    format!(
        "stopped by {}: the run's jobs were killed and its files removed from the servers",
        roost_server::jobs::record::signal_name(signal)
    )
}

/// How to hand a run to Slurm, from the options.
fn slurm_setup(args: &SlurmArgs, connect: &ConnectArgs) -> Result<Slurm, (u8, String)> {
    if !(Duration::from_millis(50)..=Duration::from_secs(3600)).contains(&args.slurm_poll) {
        return Err((
            2,
            format!(
                "--slurm-poll {}: expected 50ms to 1h",
                args.slurm_poll.as_secs_f64()
            ),
        ));
    }
    if args.slurm_max_running == Some(0) {
        return Err((2, "--slurm-max-running must be at least 1".into()));
    }
    let roost = match &args.slurm_roost {
        Some(p) => p.clone(),
        None => std::env::current_exe().map_err(|e| (1, format!("cannot find roost: {e}")))?,
    };
    // The nodes authenticate as this command does.
    let mut run_args = Vec::new();
    for method in &connect.auth {
        run_args.extend(["--auth".to_string(), method.clone()]);
    }
    if let Some(key) = &connect.key {
        run_args.extend(["--key".to_string(), key.clone()]);
    }
    run_args.extend(args.slurm_run_args.iter().cloned());
    Ok(Slurm {
        partition: args.slurm_partition.clone(),
        sbatch_args: args.slurm_args.clone(),
        run_args,
        roost,
        max_running: args.slurm_max_running,
        poll: args.slurm_poll,
    })
}

fn run_complib(args: ComplibArgs) -> Outcome {
    if !(args.scale > 0.0 && args.scale <= 1.0) {
        return Err((2, format!("--scale {}: expected 0 < F <= 1", args.scale)));
    }
    if !(0.0..=1.0).contains(&args.calibrate) {
        return Err((
            2,
            format!("--calibrate {}: expected 0 <= F <= 1", args.calibrate),
        ));
    }
    let verify = match args.verify.as_str() {
        "all" => None,
        n => Some(
            n.parse()
                .map_err(|_| (2, format!("--verify {n}: expected a count or all")))?,
        ),
    };
    let program = match args.program {
        Some(p) => p,
        None => std::env::current_exe()
            .map_err(|e| (1, format!("cannot find roost-align: {e}")))?
            .with_file_name("roost-align"),
    };
    if !program.is_file() {
        return Err((
            2,
            format!(
                "{}: no roost-align program there (--program PATH)",
                program.display()
            ),
        ));
    }
    let mut config = config(&args.pool, PathBuf::from("."), true)?;
    // Efficiency needs each host's standalone rate: the hosts are those calibrated.
    config.follow = None;
    let setup = complib::Setup {
        work_dir: args.work,
        program,
        scale: args.scale,
        calibrate: args.calibrate,
        verify,
    };
    stop_on_signals(&config.stop)?;
    let outcome = complib::run(&setup, &config).map_err(|e| match config.stop.raised() {
        Some(signal) => (128u8.saturating_add(signal as u8), stopped_message(signal)),
        None => (1, e),
    })?;
    if args.pool.json {
        println!("{}", outcome.to_json().to_json());
    } else {
        print!("{}", outcome.text());
    }
    Ok(u8::from(outcome.problem.is_some()))
}
