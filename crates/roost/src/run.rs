//! `roost run`: runs a program under the interposition agent with a private namespace built
//! from `--mount` and `--mount-file`. Thin: parsing and error reporting only.

use crate::background;

mod colon_lists;
mod drivers;
use clap::Args;
use roost_agent::Options;
use roost_vfs::{
    parse_mount_file, parse_mount_spec, Driver, MountContext, MountTable, Namespace, Registry,
};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// When `roost run` traces a process with ptrace (`--attach`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Attach {
    Lazy,
    All,
}

/// Options of `roost run`.
#[derive(Args)]
#[command(after_help = "\
Exit status: the program's own; 128+N when it dies of signal N (as a shell reports it);
127 when the program is not found, 126 when it cannot be executed; 2 for a bad option (a
--mount, --mount-file, --trace, --auth, --key, --cache-size, --http-proxy, --http-key,
--http-block-threshold, --http-streams, --http-prefetch, --http-prefetch-max or identity
option, or a key file that cannot be read); 125 when roost cannot trace at all (e.g. ptrace
forbidden, or roost run inside roost run).
roost returns when the program exits; processes it left running stay inside the namespace
until they exit. With --trace or --summary roost waits for them, to report on them.

Remote files: /chirp/HOST[+PORT]/PATH names a file on a Chirp server (roost serve, cctools'
chirp_server) with no mount at all; mounts may point there too (--mount /data=/chirp/h+9094/d
or chirp://h:9094/d). The port may follow a '+' or a ':'; write '+' in colon-separated lists
(PATH, LD_LIBRARY_PATH, PYTHONPATH), which split /chirp/h:9094/d in two (roost warns when
one does). By default (--chirp-mode direct) a file opened is read and written on the server
as the program goes; with --chirp-mode cached it is read whole into a cache shared by your
runs (--cache), checked against the server's attributes (learnt within the last second) on
every open, and written back when closed (roost returns once it is there).
/http/HOST[+PORT]/PATH (and /https/...) names a file on a web server, read-only, as the
index files `roost index` writes there describe it (--http-ttl); mounts may point there
too (--mount /sw=/http/h+8080/sw or http://h:8080/sw). Files are fetched whole into the
same cache and checked against the index's SHA-256; those over --http-block-threshold
with block hashes in their index are fetched as parallel Range requests, checked block by
block, and a program that opens one reads it in place: each read fetches only the blocks
it covers (and, reading on, the next ones). When an open misses the cache, the other small
files of its directory are fetched in the background (--http-prefetch), so a program that
opens many (Python importing a package) finds them there. An index whose TTL is over is
asked for again conditionally (If-None-Match, If-Modified-Since): unchanged, it is kept.
Requests go through the --http-proxy proxies (else those of http_proxy / https_proxy,
except for the hosts no_proxy lists), starting at one picked at random; a proxy that
fails is left for the next, then for the origin server (said once), and a file whose
content does not match is fetched again through the next proxy, then from the origin,
before it fails with EIO. With --http-key, every index must be signed (roost index
--sign) by one of the pinned keys: a directory whose .roostindex.sig is missing or does
not verify fails with EIO and one line on stderr, and neither GROW-FS trees nor files
that no index lists are served.

Identity: --uid, --gid, --user and --hostname make the id queries (getuid, getresgid,
getgroups, ...) and uname report the given identity, and map /etc/passwd and /etc/group to
copies naming it (the real identity still governs what the program may do).

Examples:
  roost run --mount /data=/scratch/run7 -- make -C /data
  roost run --mount /data=/chirp/fs.example.org/run7 -- ./analysis.sh
  roost run --mount /usr/lib/python3=DENY -- python3 -c 'import sys'
  roost run --summary --mount-file job.mounts -- ./analysis.sh")]
pub struct RunArgs {
    /// Map a logical path to a physical one (or DENY / ENOENT); repeatable.
    #[arg(long = "mount", value_name = "LOGICAL=PHYSICAL")]
    pub mounts: Vec<String>,
    /// Read mappings from FILE: one `LOGICAL PHYSICAL` a line, `#` comments, $VAR expanded.
    #[arg(long = "mount-file", value_name = "FILE")]
    pub mount_files: Vec<PathBuf>,
    /// Write one JSON line per trapped call to FILE.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Print a table of calls by operation and by path prefix at exit.
    #[arg(long)]
    pub summary: bool,
    /// Run the agent and the program on one CPU: ptrace stops are much cheaper, but a
    /// parallel program gets a single CPU.
    #[arg(long)]
    pub pin: bool,
    /// Deliver every trapped call as a ptrace stop; by default lookups, opens, changes and
    /// attribute calls come as cheaper seccomp notifications.
    #[arg(long)]
    pub no_notify: bool,
    /// Answer every call in roost's supervisor: no in-process fast path. By default a
    /// dynamically linked program answers its own hot lookups (stat, access, readlink,
    /// open, getcwd) where the mount list leaves them to the kernel; it is off anyway with
    /// --trace and when a mapping is DENY or ENOENT, and answers lookups only (an open of
    /// an existing file goes to roost) when roost runs as root (with CAP_SYS_PTRACE)
    /// outside a Landlock domain (--no-landlock, or Linux before 6.12) (docs/agent.md,
    /// docs/security.md).
    #[arg(long)]
    pub strict: bool,
    /// When roost runs as root, do not start the program in a Landlock domain of its own.
    /// By default (Linux 6.12 and later) it starts in one: the kernel then refuses its
    /// processes ptrace, /proc/PID/mem and the like on any process outside the run,
    /// roost's included, and connecting to abstract unix sockets made outside the run;
    /// which lets its fast path open files as an ordinary user's does. Without it such a
    /// program may trace processes outside the run, as natively, and its fast path answers
    /// lookups only.
    #[arg(long)]
    pub no_landlock: bool,
    /// When roost traces a process with ptrace. `lazy` (the default): only for the calls
    /// that need a ptrace stop (an exec or chdir roost rewrites, a connect to a mapped
    /// socket), detaching after each, so a process that makes none is never stopped (no stop
    /// per fork or signal). `all`: every process from its fork, as under --no-notify; calls
    /// roost delivers as notifications then never fail with EINTR when a signal comes
    /// before roost took them (under `lazy` the kernel gives such a call EINTR if the
    /// signal's handler was installed without SA_RESTART).
    #[arg(long, value_enum, default_value_t = Attach::Lazy, value_name = "WHEN")]
    pub attach: Attach,
    /// After each descriptor roost hands the program (an open of a mapped file, or of a
    /// cached-mode remote one), a
    /// thread of the lowest priority (SCHED_IDLE) polls on an idle CPU for this many
    /// microseconds, so that the kernel's two wake-ups that hand-over takes find a CPU
    /// running rather than halted (in a VM a halted virtual CPU can take ~20 us to wake:
    /// an open of a mapped file then costs 50 us instead of 8). It gives way to any other
    /// thread at once and sleeps once opens stop; 0 turns it off
    #[arg(long, default_value_t = 200, value_name = "US",
          value_parser = clap::value_parser!(u64).range(..=10_000))]
    pub idle_poll_us: u64,
    /// Authentication methods to offer Chirp servers, in order (repeatable): hmac, unix,
    /// hostname, address. Default: hmac (with a key), then unix, hostname, address.
    #[arg(long = "auth", value_name = "METHOD")]
    pub auth: Vec<String>,
    /// A shared secret for the hmac method, as NAME=FILE (also ROOST_HMAC_KEY=NAME=FILE).
    #[arg(long = "key", value_name = "NAME=FILE")]
    pub key: Option<String>,
    /// How long one RPC may go unanswered before the connection counts as lost.
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = crate::size::duration_1s)]
    pub io_timeout: Duration,
    /// How long a server that was reached may stay unreachable (roost reconnects with
    /// back-off meanwhile) before calls on it fail with EIO.
    #[arg(long, default_value = "1h", value_name = "DURATION", value_parser = crate::size::duration)]
    pub timeout: Duration,
    /// The cache of remote files, shared by your runs [default: $XDG_CACHE_HOME/roost, or
    /// ~/.cache/roost].
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// How long a remote file's attributes are trusted: stat answers, and the validation
    /// of a cached copy when a file is opened (0: ask the server every time; at most 1d).
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = crate::size::duration)]
    pub attr_ttl: Duration,
    /// How files of Chirp paths and mounts that name no mode are used: `direct` (in place
    /// on the server: every read and write is a request, so programs on other hosts see
    /// each other's writes at once) or `cached` (fetched whole into the cache when opened,
    /// written back when closed). A mount's `:direct` or `:cached` suffix overrides it.
    #[arg(long, value_enum, default_value_t = ChirpMode::Direct, value_name = "MODE")]
    pub chirp_mode: ChirpMode,
    /// How long a web server's directory index is trusted before it is asked for again
    /// (conditionally; at most 1d); indexes are kept in the cache, so later runs within
    /// this time ask for none.
    #[arg(long, default_value = "5m", value_name = "DURATION", value_parser = crate::size::duration)]
    pub http_ttl: Duration,
    /// A caching proxy for /http and /https (http://[USER:PASSWORD@]HOST[:PORT]), used for
    /// every server; repeatable: roost starts at one picked at random and falls back to
    /// the next, then to the server itself [default: $http_proxy / $https_proxy, except for
    /// the hosts in $no_proxy].
    #[arg(long = "http-proxy", value_name = "URL")]
    pub http_proxies: Vec<String>,
    /// Pin a public key for /http and /https (a `roost-ed25519 HEX` line, as `roost index
    /// --gen-key` writes KEYFILE.pub); repeatable: an index signed by any of them is used,
    /// any other is refused.
    #[arg(long = "http-key", value_name = "PUBFILE")]
    pub http_keys: Vec<PathBuf>,
    /// Files of /http and /https of at least SIZE bytes (K, M, G suffixes) whose index
    /// lists block hashes (roost index --block-threshold) are fetched as parallel Range
    /// requests, each block checked as it arrives; opened by a program, they are read in
    /// place, block by block, as its reads reach them.
    #[arg(long, default_value = "64M", value_name = "SIZE")]
    pub http_block_threshold: String,
    /// How many blocks of one such file are fetched at once (1 to 16; one connection each).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub http_streams: usize,
    /// When an open of a /http or /https file misses the cache, fetch the other files of
    /// its directory in the background (on up to --http-streams connections), up to SIZE
    /// bytes a directory (K, M, G suffixes); 0: never.
    #[arg(long, default_value = "16M", value_name = "SIZE")]
    pub http_prefetch: String,
    /// The largest file --http-prefetch fetches.
    #[arg(long, default_value = "1M", value_name = "SIZE")]
    pub http_prefetch_max: String,
    /// Take any certificate from /https servers: still TLS, but nothing checks that the
    /// server is the one named (anyone on the path can pose as it). Without it, a
    /// certificate the system's CAs (or $SSL_CERT_FILE's) do not vouch for is refused.
    #[arg(long, visible_alias = "insecure")]
    pub http_insecure: bool,
    /// The cache's size bound, in bytes or with a K, M or G suffix; the least recently
    /// used files go first.
    #[arg(long, default_value = "4G", value_name = "SIZE")]
    pub cache_size: String,
    /// Say connections, reconnects, cache use and write-backs on stderr, and what the
    /// libraries (rustls, ureq) log down to debug.
    #[arg(short, long)]
    pub verbose: bool,
    /// Say only errors: no warnings at start (colon-separated lists, SSL_CERT_FILE,
    /// proxies, --http-insecure, the fast path), and of the libraries' (rustls, ureq)
    /// messages only their errors.
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
    /// The user id getuid, geteuid and getresuid report [default: NAME's in /etc/passwd
    /// with --user, else the real one].
    #[arg(long, value_name = "UID")]
    pub uid: Option<u32>,
    /// The group id getgid, getegid, getresgid and getgroups report [default: NAME's
    /// primary group with --user, else the real one].
    #[arg(long, value_name = "GID")]
    pub gid: Option<u32>,
    /// The user name the program finds for its uid: /etc/passwd and /etc/group are mapped
    /// to copies holding NAME with the virtual ids.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// The host name uname reports.
    #[arg(long, value_name = "NAME")]
    pub hostname: Option<String>,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}

fn bytes(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

/// The consistency mode of Chirp files (`--chirp-mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ChirpMode {
    Direct,
    Cached,
}

/// Builds the mount table: files first, then `--mount` arguments (later ones win), and
/// `/SCHEME` of every remote driver (`/chirp`, `/http`, `/https`), showing all its servers,
/// unless a mapping names it.
fn mount_table(
    args: &RunArgs,
    cwd: &std::path::Path,
    drivers: &Registry,
) -> Result<MountTable, String> {
    let ctx = MountContext { cwd, drivers };
    let mut table = MountTable::new();
    for scheme in drivers.iter() {
        // Used as a mount of the driver with no mode is.
        let root = roost_vfs::Target::remote(Arc::clone(&scheme.driver), &b"/"[..], scheme.direct);
        table.add(format!("/{}", scheme.name).as_bytes(), root);
    }
    for file in &args.mount_files {
        let name = file.display().to_string();
        let text = std::fs::read_to_string(file).map_err(|e| format!("{name}: {e}"))?;
        let env = |v: &str| std::env::var(v).ok();
        for (logical, target) in
            parse_mount_file(&name, &text, &env, &ctx).map_err(|e| e.to_string())?
        {
            table.add(&logical, target);
        }
    }
    for spec in &args.mounts {
        let (logical, target) = parse_mount_spec(spec, &ctx).map_err(|e| e.to_string())?;
        table.add(&logical, target);
    }
    Ok(table)
}

/// Whether a logical path names an executable regular file in the namespace.
fn executable(ns: &Namespace, logical: &[u8]) -> Result<(), i32> {
    let located = ns.locate(logical, true)?;
    let (driver, path): (&dyn Driver, &[u8]) = match &located.remote {
        Some(r) => (r.driver.as_ref(), &r.path),
        None => (&roost_vfs::LocalDriver, &located.physical),
    };
    let st = driver.stat(path)?;
    if st.is_dir() {
        return Err(libc::EACCES);
    }
    driver.access(path, libc::X_OK)
}

/// Finds the program as a shell would: a name with a slash is a path, others search $PATH,
/// all in the logical namespace. Errors carry the shell's message and exit code.
fn find_program(ns: &Namespace, name: &str, cwd: &[u8]) -> Result<Vec<u8>, (String, u8)> {
    let absolute = |p: &[u8]| roost_vfs::path::join(cwd, p);
    if name.contains('/') {
        let logical = absolute(name.as_bytes());
        return match executable(ns, &logical) {
            Ok(()) => Ok(logical),
            Err(libc::ENOENT) | Err(libc::ENOTDIR) => {
                Err((format!("{name}: No such file or directory"), 127))
            }
            Err(errno) => Err((format!("{name}: {}", strerror(errno)), 126)),
        };
    }
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    // As bash: the first candidate that exists but cannot be run says why.
    let mut refused = None;
    for dir in path.split(':') {
        let dir = if dir.is_empty() { "." } else { dir };
        let candidate = absolute(&roost_vfs::path::join(dir.as_bytes(), name.as_bytes()));
        match executable(ns, &candidate) {
            Ok(()) => return Ok(candidate),
            Err(libc::ENOENT) | Err(libc::ENOTDIR) => {}
            Err(errno) => {
                refused.get_or_insert(errno);
            }
        }
    }
    match refused {
        Some(errno) => Err((format!("{name}: {}", strerror(errno)), 126)),
        None => Err((format!("{name}: command not found"), 127)),
    }
}

/// The C library's text for `errno` ("Permission denied", "Connection refused"), as a
/// shell prints it, without Rust's "(os error N)".
fn strerror(errno: i32) -> String {
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    match text.rfind(" (os error ") {
        Some(end) => text[..end].to_string(),
        None => text,
    }
}

pub fn main(args: RunArgs) -> ExitCode {
    // Before anything else (keys read, the agent forked): the program must find roost's
    // processes out of its reach (`roost_agent::guard`); the agent inherits it.
    if let Err(e) = roost_agent::guard::undumpable() {
        eprintln!("roost run: cannot make roost undumpable: {e}");
    }
    let utf8_vars = std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)));
    if !args.quiet {
        for warning in colon_lists::warnings(utf8_vars) {
            eprintln!("{warning}");
        }
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let drivers = match drivers::registry(&args) {
        Ok(d) => Arc::new(d),
        Err(e) => {
            eprintln!("roost run: {e}");
            return ExitCode::from(2);
        }
    };
    let table = match mount_table(&args, &cwd, &drivers) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("roost run: {e}");
            return ExitCode::from(2);
        }
    };
    let (ids, identity_files) = match crate::identity::virtual_identity(
        args.uid,
        args.gid,
        args.user.as_deref(),
        args.hostname.as_deref(),
    ) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("roost run: {e}");
            return ExitCode::from(2);
        }
    };
    let mut table = table;
    if let Some(files) = &identity_files {
        files.map_into(&mut table);
    }
    let fence = roost_agent::fence::applies(args.no_landlock);
    let fast = if args.strict || args.trace.is_some() {
        None
    } else {
        match roost_agent::fastpath::FastPath::prepare(&mut table, args.summary, fence) {
            Ok(Ok(fast)) => Some(Arc::new(fast)),
            Ok(Err(_off)) => None,
            Err(e) => {
                if !args.quiet {
                    eprintln!(
                        "roost run: no in-process fast path this run ({e}); every call is \
                         trapped"
                    );
                }
                None
            }
        }
    };
    let ns = Namespace::new(table);
    let cwd_bytes = cwd.into_os_string().into_encoded_bytes();
    let logical_cwd = ns.logical_cwd(&cwd_bytes);
    let program = match find_program(&ns, &args.command[0], &logical_cwd) {
        Ok(p) => p,
        Err((msg, code)) => {
            eprintln!("roost: {msg}");
            return ExitCode::from(code);
        }
    };
    let trace: Option<Box<dyn std::io::Write>> = match &args.trace {
        None => None,
        Some(f) => match std::fs::File::create(f) {
            Ok(file) => Some(Box::new(std::io::BufWriter::new(file))),
            Err(e) => {
                eprintln!("roost run: --trace {}: {e}", f.display());
                return ExitCode::from(2);
            }
        },
    };
    let argv: Vec<Vec<u8>> = args.command.iter().map(|a| bytes(a)).collect();
    // With --trace or --summary roost reports on every process, so it waits for them all;
    // otherwise it returns when the program does, as a shell would.
    let whole_run = trace.is_some() || args.summary;
    let mut options = Options {
        trace,
        summary: args.summary,
        pin: args.pin,
        no_notify: args.no_notify,
        attach_all: args.attach == Attach::All,
        on_program_exit: None,
        on_program_stop: None,
        ids,
        idle_poll: std::time::Duration::from_micros(args.idle_poll_us),
        supervisors: Vec::new(),
        fast,
        fence,
    };
    match background::split(!whole_run) {
        Ok(background::Side::Front(code)) => {
            // The agent, still running, uses the identity files and the fast path's: they
            // are its to remove.
            if let Some(files) = identity_files {
                files.leave();
            }
            if let Some(fast) = options.fast.take() {
                fast.leave();
            }
            return exit_code(code);
        }
        Ok(background::Side::Agent(mut front)) => {
            // The caller goes on when the program exits: what it wrote is on the servers
            // by then.
            let tell = front.on_program_exit();
            let flushed = Arc::clone(&drivers);
            options.on_program_exit = tell.map(|tell| {
                Box::new(move |code| {
                    flushed.flush();
                    tell(code)
                }) as Box<dyn FnOnce(i32)>
            });
            options.on_program_stop = Some(front.on_program_stop());
            options.supervisors.push(front.pid());
        }
        Err(e) => eprintln!("roost run: {e}; running without a front process"),
    }
    let code = match roost_agent::run(ns, &program, &argv, options) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("roost run: {e}");
            125
        }
    };
    drivers.close();
    drop(identity_files);
    exit_code(code)
}

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(code.clamp(0, 255) as u8)
}
