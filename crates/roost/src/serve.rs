//! `roost serve`: exports a directory over the Chirp protocol.

use clap::Args;
use roost_server::accounting::{Accounting, Config as AccountingConfig};
use roost_server::acl::Acl;
use roost_server::auth::{self, AuthConfig, Method};
use roost_server::catalog_report;
use roost_server::export::Export;
use roost_server::jobs::identity::UidRange;
use roost_server::jobs::keeper::Namespaces;
use roost_server::jobs::view::View as JobView;
use roost_server::jobs::JobConfig;
use roost_server::log::{self, Level};
use roost_server::thermostat::schedule::Schedule;
use roost_server::thermostat::{Config as ThermostatConfig, Mechanism};
use roost_server::{Limits, Server};
use roost_wire::Rights;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Options of `roost serve`.
#[derive(Args)]
#[command(after_help = "\
The first line on standard output names the address and port, e.g.
  roost serve: listening on [::]:9094, exporting /srv/data

Subjects look like address:127.0.0.1, hostname:*.example.org, unix:alice, hmac:buildbot;
'*' matches anything. Rights are letters: r read, w write, l list, d delete,
p put (create new files only), a admin (change the ACL), x execute.

With --jobs, clients with the x right on / run programs on this host through the Chirp job
RPCs (roost job, or cctools' chirp job_create ...), each in a sandbox as an unprivileged user.

Every server keeps a ledger (--ledger) of each subject's requests, bytes read and written,
job CPU time and storage, and of what the owner offered guest jobs; subjects with the a
right on / read it with `roost accounting`. With --supervise, a supervisor restarts the
server whenever it dies (logging the cause), waiting --restart-delay, doubled after each
quick death up to --restart-max-delay.

Exit status: 0 after SIGTERM, SIGINT or SIGHUP (the ledger written first); 2 when the server
cannot start (with --supervise: the server's status when its first start fails).

Examples:
  roost serve /srv/data --acl 'address:127.0.0.1=rwldpa'
  roost serve /srv/data --jobs --job-concurrency 4 --acl 'unix:alice=rwlx'
  roost serve --port 0 --key build=/etc/roost/build.key --acl hmac:build=rwl /srv/data
  roost serve /srv/data --catalog catalog.example.org --catalog-interval 30
  roost serve /srv/data --jobs --catalog cat.example.org --catalog-key pool=/etc/roost/pool.key
  roost serve /srv/data --supervise --owner alice --host-class fast --jobs")]
pub struct ServeArgs {
    /// The directory to export; clients see it as `/` and can never leave it.
    pub dir: PathBuf,
    /// The address to listen on [default: `::`, every address of both IPv6 and IPv4 (IPv4
    /// clients keep their IPv4 addresses for ACLs and logins); `0.0.0.0` on a host without
    /// IPv6].
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<IpAddr>,
    /// The TCP port; 0 picks a free one.
    #[arg(long, default_value_t = roost_wire::DEFAULT_PORT)]
    pub port: u16,
    /// Grant SUBJECT these RIGHTS in the root ACL, used when DIR has no ACL of its own
    /// (repeatable). Without any, only the server's own unix user has access.
    #[arg(long = "acl", value_name = "SUBJECT=RIGHTS")]
    pub acls: Vec<String>,
    /// Authentication methods to accept, in any order (repeatable):
    /// hmac, unix, hostname, address. Default: all of them.
    #[arg(long = "auth", value_name = "METHOD")]
    pub auth: Vec<String>,
    /// A shared secret for the hmac method: key NAME, secret read from FILE (repeatable).
    #[arg(long = "key", value_name = "NAME=FILE")]
    pub keys: Vec<String>,
    /// Directory for the unix method's challenge files.
    #[arg(long, default_value = "/tmp", value_name = "DIR")]
    pub challenge_dir: PathBuf,
    /// Most clients connected at once.
    #[arg(long, default_value_t = Limits::default().max_connections)]
    pub max_connections: usize,
    /// Most clients connected at once from one address (one /64 for IPv6), so no single
    /// host can take every slot.
    #[arg(long, default_value_t = Limits::default().max_per_address, value_name = "N")]
    pub max_per_address: usize,
    /// Serve Prometheus metrics at http://ADDR/metrics: requests and errors by RPC, file
    /// bytes read and written, connections, jobs by state, the thermostat's limits in force.
    /// Anyone who reaches ADDR may read them (counts only, no names): bind it to loopback or
    /// a management network, e.g. 127.0.0.1:9095.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<SocketAddr>,
    /// Disconnect clients idle this long.
    #[arg(long, default_value = "1h", value_name = "DURATION", value_parser = crate::size::duration)]
    pub idle_timeout: Duration,
    /// Disconnect clients that stall mid-message this long.
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = crate::size::duration_1s)]
    pub stall_timeout: Duration,
    /// Largest payload one request may carry (16M, 64M).
    #[arg(long, default_value = "16M", value_name = "SIZE", value_parser = crate::size::bytes)]
    pub max_message: u64,
    /// How long a connection polls for the client's next request after answering one,
    /// before its thread sleeps (a bare number is microseconds; at most 10ms): a client in a
    /// tight loop of requests then never waits for a sleeping thread to be woken (adaptive:
    /// a client slower than this is soon no longer polled for). 0 never polls.
    #[arg(long, default_value = "50", value_name = "DURATION", value_parser = crate::size::duration_us)]
    pub poll_us: Duration,
    /// How much to log on standard error: error, info (a line per connection) or debug
    /// (a line per request).
    #[arg(long, default_value = "info", value_name = "LEVEL")]
    pub log_level: String,
    /// Log at debug level: a line per request (as --log-level debug).
    #[arg(short, long, conflicts_with_all = ["quiet", "log_level"])]
    pub verbose: bool,
    /// Log errors only (as --log-level error).
    #[arg(short, long, conflicts_with = "log_level")]
    pub quiet: bool,
    /// How log lines look: `text` (key=value pairs) or `json` (one object a line).
    #[arg(long, value_enum, default_value = "text", value_name = "FORMAT")]
    pub log_format: LogFormat,
    /// Report this server to the pool catalog at HOST[:PORT] (default port 9097), by UDP
    /// datagram in cctools' format (repeatable: every catalog gets every report).
    #[arg(long = "catalog", short = 'c', value_name = "HOST[:PORT]")]
    pub catalogs: Vec<String>,
    /// Sign every report to the catalogs with the catalog key NAME, its secret read from
    /// FILE (private to its owner: chmod 600), so that a catalog holding the same key shows
    /// this server verified and `roost pool run` uses it (see docs/pool.md).
    #[arg(long = "catalog-key", value_name = "NAME=FILE", requires = "catalogs")]
    pub catalog_key: Option<String>,
    /// Time between reports to the catalogs.
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = crate::size::duration_1s)]
    pub catalog_interval: Duration,
    /// Serve the Chirp job RPCs (as cctools' chirp_server --jobs): clients holding the x
    /// right on / run programs in sandboxes on this host (see docs/pool.md).
    #[arg(long)]
    pub jobs: bool,
    /// Most jobs running at once.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub job_concurrency: u64,
    /// Kill a job that runs longer than this, and report it ERRORED.
    #[arg(long, default_value = "1h", value_name = "DURATION", value_parser = crate::size::duration_1s)]
    pub job_time_limit: Duration,
    /// Where job records and sandboxes live, outside the export. Default:
    /// $XDG_STATE_HOME/roost/jobs/NAME when XDG_STATE_HOME is set, else
    /// /var/lib/roost/jobs/NAME as root and ~/.local/state/roost/jobs/NAME otherwise, NAME
    /// being made from the exported directory's path.
    #[arg(long, value_name = "DIR")]
    pub job_dir: Option<PathBuf>,
    /// The unprivileged user jobs run as when the server runs as root (default: nobody).
    /// A server not run as root runs jobs as its own user.
    #[arg(long, value_name = "USER")]
    pub job_user: Option<String>,
    /// As root: run each job at once as a uid of its own from FIRST to LAST (no account may
    /// have one; their group is --job-user's), so that jobs cannot touch one another's files
    /// or processes even by their user.
    #[arg(long, value_name = "FIRST-LAST")]
    pub job_uids: Option<String>,
    /// Let jobs reach the network as this host (and every address ACL granted to it):
    /// without it, a job has a network of its own with a loopback only, or none.
    #[arg(long)]
    pub job_network: bool,
    /// The namespaces jobs run in: user (a user namespace with PID, mount, IPC and network
    /// namespaces, made by the job's user), root (the same without the user namespace, made
    /// as root), none (processes followed through /proc, no process cap), or auto: the
    /// first of these that works here.
    #[arg(long, default_value = "auto", value_name = "KIND")]
    pub job_namespaces: String,
    /// Let jobs also read and run programs from DIR (repeatable; jobs read only their
    /// sandbox, /usr, /bin, /sbin, /lib*, /etc less its secrets, and these).
    #[arg(long = "job-read", value_name = "DIR")]
    pub job_read: Vec<PathBuf>,
    /// Most processes and threads of one job, or `none`.
    #[arg(long, default_value = "512", value_name = "N")]
    pub job_process_limit: String,
    /// Most memory of one job (each process, and all together), at least 1M, or `none`.
    #[arg(long, default_value = "2G", value_name = "SIZE", value_parser = crate::size::bytes_or_none)]
    pub job_memory_limit: u64,
    /// Most jobs not yet reaped that one subject keeps; more are refused.
    #[arg(long, default_value_t = roost_server::jobs::DEFAULT_JOBS_PER_SUBJECT as u64, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub jobs_per_subject: u64,
    /// Most bytes of job descriptions that one subject's jobs not yet reaped hold.
    #[arg(long, default_value = "16M", value_name = "SIZE", value_parser = crate::size::bytes)]
    pub job_bytes_per_subject: u64,
    /// Limit guest jobs' CPU and memory on a weekly schedule read from FILE (see
    /// docs/pool.md "Thermostat"); `roost thermostat set` changes the limits while running.
    #[arg(long, value_name = "FILE")]
    pub thermostat: Option<PathBuf>,
    /// How the thermostat holds jobs to its limits: cgroup2 (cpu.max and memory.max in the
    /// unified hierarchy: as root, or in a group delegated to the server's user), cgroup1
    /// (the v1 cpu and memory hierarchies, as root), loop (SIGSTOP/SIGCONT and a memory
    /// watchdog over the jobs' processes), or auto: the first of these that works here.
    #[arg(long, default_value = "auto", value_name = "MECHANISM")]
    pub thermostat_mechanism: String,
    /// The accounting ledger: what each user consumed here and what the owner offered
    /// (see docs/pool.md "Accounting"). Default: $XDG_STATE_HOME/roost/ledger/NAME when
    /// XDG_STATE_HOME is set, else /var/lib/roost/ledger/NAME as root and
    /// ~/.local/state/roost/ledger/NAME otherwise, NAME made from DIR's path.
    #[arg(long, value_name = "FILE")]
    pub ledger: Option<PathBuf>,
    /// Who is credited for what this host offers, in the ledger and the catalog (default:
    /// the server's unix user).
    #[arg(long, value_name = "NAME")]
    pub owner: Option<String>,
    /// This host's class, by which `roost accounting` prices what is done here.
    #[arg(long, default_value = "default", value_name = "CLASS")]
    pub host_class: String,
    /// Time between the ledger's records of requests, bytes and offered CPU (1s to 1h).
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = crate::size::duration_1s)]
    pub accounting_interval: Duration,
    /// Time between samples of the storage each user's files hold (each sample walks
    /// the export).
    #[arg(long, default_value = "10m", value_name = "DURATION", value_parser = crate::size::duration_1s)]
    pub storage_interval: Duration,
    /// Forget what clients abandoned after this long untouched (0: never): job
    /// records that have ended (or were never committed) that their subject has not asked
    /// about, and run directories under --pool-dir whose run stopped keeping them (see
    /// docs/pool.md).
    #[arg(long, default_value = "1d", value_name = "DURATION", value_parser = crate::size::duration)]
    pub reap_after: Duration,
    /// A directory of the export where `roost pool run` stages its runs (its --remote-dir),
    /// whose abandoned run directories are removed (repeatable).
    #[arg(long = "pool-dir", default_value = roost_server::reaper::DEFAULT_POOL_DIR, value_name = "DIR")]
    pub pool_dirs: Vec<String>,
    /// Run the server as a child process and restart it whenever it dies, after a delay
    /// that doubles with each quick crash (see --restart-delay); SIGTERM, SIGINT or SIGHUP
    /// stops both. The same port, export, ACLs, job directory and ledger are used again.
    #[arg(long)]
    pub supervise: bool,
    /// With --supervise: the wait before the first restart after a crash.
    #[arg(
        long,
        default_value = "1s",
        value_name = "DURATION",
        value_parser = crate::size::duration,
        requires = "supervise"
    )]
    pub restart_delay: Duration,
    /// With --supervise: the longest wait between restarts.
    #[arg(
        long,
        default_value = "60s",
        value_name = "DURATION",
        value_parser = crate::size::duration,
        requires = "supervise"
    )]
    pub restart_max_delay: Duration,
    /// With --supervise: a server that ran this long before dying was healthy; the next
    /// restart waits only --restart-delay again.
    #[arg(
        long,
        default_value = "60s",
        value_name = "DURATION",
        value_parser = crate::size::duration,
        requires = "supervise"
    )]
    pub healthy_after: Duration,
}

pub fn main(args: ServeArgs) -> ExitCode {
    if args.supervise && std::env::var_os(crate::supervise::SUPERVISED).is_none() {
        return crate::supervise::main(&args);
    }
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("roost serve: {message}");
            ExitCode::from(2)
        }
    }
}

/// `--log-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// key=value pairs
    Text,
    /// one JSON object a line
    Json,
}

/// The log level asked for: -v is debug, -q error, else --log-level.
pub(crate) fn log_level(args: &ServeArgs) -> &str {
    match (args.verbose, args.quiet) {
        (true, _) => "debug",
        (_, true) => "error",
        _ => &args.log_level,
    }
}

fn run(args: ServeArgs) -> Result<(), String> {
    let level = Level::parse(log_level(&args)).ok_or_else(|| {
        format!(
            "--log-level {}: expected error, info or debug",
            args.log_level
        )
    })?;
    log::set_level(level);
    log::set_format(match args.log_format {
        LogFormat::Text => log::Format::Text,
        LogFormat::Json => log::Format::Json,
    });
    log::forward_library_logs();
    // Each client holds a socket and its open files: bounded by `--max-connections`
    // rather than by a default of 1024.
    roost_base::raise_descriptor_limit();
    let root_acl = root_acl(&args.acls)?;
    let auth = auth_config(&args)?;
    if args.poll_us > Duration::from_millis(10) {
        return Err(format!(
            "--poll-us {}: expected at most 10ms (10000 microseconds)",
            args.poll_us.as_micros()
        ));
    }
    if args.accounting_interval > Duration::from_secs(3600) {
        return Err(format!(
            "--accounting-interval {}: expected at most 1h",
            args.accounting_interval.as_secs_f64()
        ));
    }
    let limits = Limits {
        max_connections: args.max_connections,
        max_per_address: args.max_per_address,
        idle_timeout: args.idle_timeout,
        stall_timeout: args.stall_timeout,
        max_message: args.max_message,
        request_poll: args.poll_us,
        ..Limits::default()
    };
    let catalogs = args
        .catalogs
        .iter()
        .map(|spec| {
            roost_catalog::parse_host_port(spec, roost_catalog::DEFAULT_PORT)
                .map_err(|e| format!("--catalog {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let catalog_key = args
        .catalog_key
        .as_deref()
        .map(|spec| {
            roost_catalog::keys::Key::from_spec(spec)
                .map_err(|e| format!("--catalog-key {spec}: {e}"))
        })
        .transpose()?;
    let export = Export::new(&args.dir, root_acl).map_err(|e| export_failure(&args.dir, &e))?;
    if !args.acls.is_empty() && export.has_own_acl(&roost_server::jail::JailPath::root()) {
        eprintln!(
            "roost serve: note: {} has its own ACL; --acl is used only for a directory without one",
            args.dir.display()
        );
    }
    // A restarted server listens where the first one did (see supervise).
    let port = match std::env::var(crate::supervise::SUPERVISED_PORT) {
        Ok(p) => p
            .parse()
            .map_err(|_| format!("bad {}", crate::supervise::SUPERVISED_PORT))?,
        Err(_) => args.port,
    };
    let dual_stack = SocketAddr::new(IpAddr::from([0u16; 8]), port);
    let (addr, listener) = match args.listen {
        Some(ip) => {
            let addr = SocketAddr::new(ip, port);
            (addr, Server::bind_listener(addr))
        }
        None => match Server::bind_listener(dual_stack) {
            // No IPv6 on this host: IPv4 alone.
            Err(e) if e.raw_os_error() == Some(libc::EAFNOSUPPORT) => {
                let v4 = SocketAddr::new(IpAddr::from([0u8; 4]), port);
                (v4, Server::bind_listener(v4))
            }
            other => (dual_stack, other),
        },
    };
    let mut server = listener
        .map(|l| Server::new(l, export, auth, limits))
        .map_err(|e| {
            let hint = match e.kind() {
                std::io::ErrorKind::AddrInUse => {
                    " (another program listens there: choose another --port, or 0 for any)".into()
                }
                std::io::ErrorKind::PermissionDenied if port < 1024 => format!(
                    " (ports below 1024 need root or the CAP_NET_BIND_SERVICE capability: \
                     choose one above, e.g. --port {}, or 0 for any)",
                    roost_wire::DEFAULT_PORT
                ),
                _ => String::new(),
            };
            format!(
                "cannot listen on {addr}: {}{hint}",
                roost_client::io_words(&e)
            )
        })?;
    let bound = server.local_addr().map_err(|e| e.to_string())?;
    let dir = std::fs::canonicalize(&args.dir).unwrap_or(args.dir.clone());
    let thermostat = thermostat_config(&args)?;
    let owner = match &args.owner {
        Some(name) => one_word("--owner", name)?,
        // A user without a name (an empty chroot) is known by its number.
        None => {
            let euid = unsafe { libc::geteuid() };
            auth::user_name(euid).unwrap_or_else(|| euid.to_string())
        }
    };
    let accounting = Accounting::open(AccountingConfig {
        ledger: args
            .ledger
            .clone()
            .unwrap_or_else(|| default_state_path("ledger", &dir)),
        host: format!("{}:{}", catalog_report::host_name(), bound.port()),
        owner: owner.clone(),
        class: one_word("--host-class", &args.host_class)?,
        interval: args.accounting_interval,
        storage_interval: args.storage_interval,
        export: dir.clone(),
    })?;
    server.enable_accounting(accounting.clone())?;
    let job_dir = args.jobs.then(|| {
        args.job_dir
            .clone()
            .unwrap_or_else(|| default_job_dir(&dir))
    });
    if let Some(job_dir) = &job_dir {
        let config = JobConfig {
            dir: job_dir.clone(),
            concurrency: args.job_concurrency as usize,
            time_limit: args.job_time_limit,
            user: args.job_user.clone(),
            uids: args.job_uids.as_deref().map(UidRange::parse).transpose()?,
            chirp_host: format!("{}:{}", catalog_report::host_name(), bound.port()),
            thermostat,
            network: args.job_network,
            namespaces: Namespaces::parse_option(&args.job_namespaces)?,
            process_limit: limit("--job-process-limit", &args.job_process_limit, |t| {
                t.parse::<u64>().ok().filter(|n| *n > 0)
            })?,
            memory_limit: match args.job_memory_limit {
                u64::MAX => None,
                n if n < 1 << 20 => {
                    return Err("--job-memory-limit: expected at least 1M, or none".into())
                }
                n => Some(n),
            },
            jobs_per_subject: args.jobs_per_subject as usize,
            bytes_per_subject: args.job_bytes_per_subject,
            view: job_view(&args, &dir, job_dir)?,
            // Each job's keeper is this program (see main); through /proc, it is the one
            // running even after an upgrade replaced the file.
            keeper: PathBuf::from("/proc/self/exe"),
            // A crash loses at most this much of a running job's CPU from the ledger.
            cpu_checkpoint: args.accounting_interval.min(Duration::from_secs(10)),
        };
        server.enable_jobs(config)?;
    } else if args.job_user.is_some()
        || args.job_dir.is_some()
        || args.thermostat.is_some()
        || args.job_uids.is_some()
        || args.job_network
        || !args.job_read.is_empty()
        || args.job_namespaces != "auto"
    {
        return Err(
            "--job-user, --job-uids, --job-dir, --job-network, --job-namespaces, --job-read and \
             --thermostat need --jobs"
                .into(),
        );
    }
    if let Some(addr) = args.metrics {
        let at = server
            .enable_metrics(addr)
            .map_err(|e| format!("--metrics {addr}: cannot listen: {e}"))?;
        log::event(
            Level::Info,
            "metrics",
            &[("url", &format!("http://{at}/metrics"))],
        );
    }
    accounting
        .start()
        .map_err(|e| format!("cannot start the accounting: {e}"))?;
    if !args.reap_after.is_zero() {
        let pool_dirs = args
            .pool_dirs
            .iter()
            .map(|d| {
                roost_server::jail::JailPath::new(d.as_bytes())
                    .ok()
                    .filter(|p| !p.is_root())
                    .ok_or_else(|| {
                        format!("--pool-dir {d}: expected a directory of the export, not its root")
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        server
            .start_reaper(roost_server::reaper::Config {
                after: args.reap_after,
                pool_dirs,
            })
            .map_err(|e| format!("cannot start the reaper: {e}"))?;
    }
    stop_on_signals(accounting, job_dir)?;
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{}", roost_server::announcement(bound, &dir));
    let _ = stdout.flush();
    drop(stdout);
    log::event(
        Level::Info,
        "start",
        &[("addr", &bound), ("export", &dir.display())],
    );
    if !catalogs.is_empty() {
        catalog_report::spawn(catalog_report::ReportConfig {
            catalogs,
            interval: args.catalog_interval,
            listen: bound,
            export: dir.clone(),
            jobs: args.jobs.then(|| catalog_report::JobsReport {
                concurrency: args.job_concurrency as usize,
                job_dir: args
                    .job_dir
                    .clone()
                    .unwrap_or_else(|| default_job_dir(&dir)),
            }),
            owner,
            key: catalog_key,
        })
        .map_err(|e| format!("cannot start reporting to the catalog: {e}"))?;
    }
    server.run().map_err(|e| e.to_string())
}

/// A SIGTERM, SIGINT or SIGHUP stops the server cleanly: what the meter counted is written
/// to the ledger, the thermostat's cgroups that hold no job any more are removed (a
/// machine's owner should not find one left by every server that ever ran there), and the
/// server exits with status 0.
fn stop_on_signals(
    accounting: std::sync::Arc<Accounting>,
    job_dir: Option<PathBuf>,
) -> Result<(), String> {
    let signals = crate::signals::StopSignals::catch()
        .map_err(|e| format!("cannot catch stop signals: {e}"))?;
    std::thread::Builder::new()
        .name("stop".into())
        .spawn(move || {
            let signal = signals.wait();
            accounting.flush();
            if let Some(job_dir) = &job_dir {
                roost_server::thermostat::remove_leftovers(job_dir);
            }
            log::event(
                Level::Info,
                "stop",
                &[("signal", &roost_server::jobs::record::signal_name(signal))],
            );
            std::process::exit(0);
        })
        .map_err(|e| format!("cannot start the stop thread: {e}"))?;
    Ok(())
}

/// Why `dir` cannot be exported, in words: for a directory the server may not read, who the
/// server runs as and who owns the directory.
fn export_failure(dir: &std::path::Path, e: &std::io::Error) -> String {
    let shown = dir.display();
    if e.kind() != std::io::ErrorKind::PermissionDenied {
        return format!("cannot export {shown}: {}", roost_client::io_words(e));
    }
    let euid = unsafe { libc::geteuid() };
    let me = auth::user_name(euid).unwrap_or_else(|| euid.to_string());
    let owner = match std::fs::metadata(dir) {
        Ok(meta) => {
            use std::os::unix::fs::MetadataExt;
            let name = auth::user_name(meta.uid()).unwrap_or_else(|| meta.uid().to_string());
            format!(" (owned by {name}, mode {:04o})", meta.mode() & 0o7777)
        }
        Err(_) => String::new(),
    };
    format!(
        "cannot export {shown}: permission denied: the server runs as {me} (uid {euid}), \
         which may not read and enter {shown}{owner} or a directory above it; run it as a \
         user who may, or give {me} read and search rights (chmod, setfacl)"
    )
}

/// `value` of option `option` if it is one word.
fn one_word(option: &str, value: &str) -> Result<String, String> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!("{option} {value:?}: expected one word"));
    }
    Ok(value.to_string())
}

/// The thermostat's configuration from `--thermostat` and `--thermostat-mechanism`.
fn thermostat_config(args: &ServeArgs) -> Result<Option<ThermostatConfig>, String> {
    let mechanism = Mechanism::parse(&args.thermostat_mechanism)?;
    let Some(path) = &args.thermostat else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--thermostat {}: {e}", path.display()))?;
    let schedule =
        Schedule::parse(&text).map_err(|e| format!("--thermostat {}: {e}", path.display()))?;
    Ok(Some(ThermostatConfig {
        schedule,
        mechanism,
    }))
}

/// The value of a limit `option`: `none`, or what `parse` makes of `text`.
fn limit(
    option: &str,
    text: &str,
    parse: impl Fn(&str) -> Option<u64>,
) -> Result<Option<u64>, String> {
    if text == "none" {
        return Ok(None);
    }
    parse(text)
        .map(Some)
        .ok_or_else(|| format!("{option} {text}: expected a number above 0, or none"))
}

/// What jobs may see besides their sandbox: the `--job-read` directories (each outside the
/// export and the job directory, whose files jobs must not read behind the ACLs), and never
/// the export, the job directory, the server's key files or its thermostat's schedule.
fn job_view(
    args: &ServeArgs,
    export: &std::path::Path,
    job_dir: &std::path::Path,
) -> Result<JobView, String> {
    let job_dir = std::fs::canonicalize(job_dir).unwrap_or(job_dir.to_path_buf());
    let mut extra = Vec::new();
    for dir in &args.job_read {
        let real =
            std::fs::canonicalize(dir).map_err(|e| format!("--job-read {}: {e}", dir.display()))?;
        if !real.is_dir() {
            return Err(format!("--job-read {}: not a directory", dir.display()));
        }
        for (inside, what) in [
            (export, "the export"),
            (job_dir.as_path(), "the job directory"),
        ] {
            if real.starts_with(inside) {
                return Err(format!(
                    "--job-read {}: inside {what} {}, whose files jobs would read without \
                     its ACLs: name a directory outside it",
                    dir.display(),
                    inside.display()
                ));
            }
        }
        extra.push(real);
    }
    let mut hidden = vec![export.to_path_buf(), job_dir];
    hidden.extend(
        args.keys
            .iter()
            .filter_map(|spec| spec.split_once('=').map(|(_, file)| PathBuf::from(file))),
    );
    hidden.extend(args.thermostat.clone());
    hidden.extend(args.ledger.clone());
    Ok(JobView::new(extra, hidden))
}

/// The default job directory for the export `dir` (see [`default_state_path`]).
pub fn default_job_dir(dir: &std::path::Path) -> PathBuf {
    default_state_path("jobs", dir)
}

/// Where the server of export `dir` keeps state of `kind` (`jobs`, `ledger`) by default:
/// under /var/lib/roost/KIND as root, else under the user's state directory, named after the
/// export's path (its `/` made `-`, and a short hash so that `/a-b` and `/a/b` differ).
pub fn default_state_path(kind: &str, dir: &std::path::Path) -> PathBuf {
    let text = dir.to_string_lossy();
    let readable: String = text
        .trim_start_matches('/')
        .chars()
        .map(|c| {
            if c == '/' || c.is_whitespace() {
                '-'
            } else {
                c
            }
        })
        .collect();
    // FNV-1a: stable across versions and machines, which is all a name needs.
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let name = format!("{readable}.{:08x}", hash as u32);
    // An XDG_STATE_HOME set explicitly wins even as root (the test suite gives every run
    // one of its own, so that tests run as root leave nothing in /var/lib/roost).
    let state_home = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty());
    // SAFETY: a plain query.
    let base = match (state_home, unsafe { libc::geteuid() } == 0) {
        (Some(state), _) => PathBuf::from(state).join("roost"),
        (None, true) => PathBuf::from("/var/lib/roost"),
        (None, false) => PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into()))
            .join(".local/state/roost"),
    };
    base.join(kind).join(name)
}

/// The root ACL from `--acl` options, or the server's own unix user with every right.
fn root_acl(specs: &[String]) -> Result<Acl, String> {
    let mut acl = Acl::default();
    for spec in specs {
        let (subject, rights) = spec
            .rsplit_once('=')
            .ok_or_else(|| format!("--acl {spec}: expected SUBJECT=RIGHTS, e.g. unix:alice=rwl"))?;
        roost_wire::acl::check_subject(subject).map_err(|why| format!("--acl {spec}: {why}"))?;
        let rights = Rights::parse(rights).map_err(|_| {
            format!("--acl {spec}: '{rights}' is not a set of rights (letters rwldpax)")
        })?;
        acl.set(subject, rights);
    }
    if specs.is_empty() {
        let me = auth::user_name(unsafe { libc::geteuid() })
            .ok_or("the server's own user has no name")?;
        acl.set(
            &format!("unix:{me}"),
            Rights::parse("rwldpax").expect("valid rights"),
        );
    }
    Ok(acl)
}

fn auth_config(args: &ServeArgs) -> Result<AuthConfig, String> {
    let mut config = AuthConfig {
        challenge_dir: args.challenge_dir.clone(),
        ..AuthConfig::default()
    };
    if !args.auth.is_empty() {
        config.methods = args
            .auth
            .iter()
            .map(|m| {
                Method::parse(m.as_bytes())
                    .ok_or_else(|| format!("--auth {m}: expected hmac, unix, hostname or address"))
            })
            .collect::<Result<_, _>>()?;
    }
    for spec in &args.keys {
        let (name, file) = spec
            .split_once('=')
            .ok_or_else(|| format!("--key {spec}: expected NAME=FILE"))?;
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(format!("--key {spec}: the key name must be one word"));
        }
        let secret = roost_client::read_secret_file(std::path::Path::new(file))
            .map_err(|why| format!("--key {spec}: {why}"))?;
        config.keys.insert(name.to_string(), secret);
    }
    Ok(config)
}
