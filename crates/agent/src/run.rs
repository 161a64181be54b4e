//! One `roost run`: the seccomp filter built from the syscall table, the mount list and the
//! fast path; the program started under it; the record both delivery backends share
//! ([`crate::shared`]); the notification backend ([`crate::supervisor`]) and the ptrace
//! backend ([`crate::tracer`]) started on it; and the report at the end (`--summary`).
//! The backends only deliver calls: neither starts nor reaches into the other.

use crate::arch::Sys;
use crate::attach;
use crate::call_log::Tracer;
use crate::copies;
use crate::fastpath::FastPath;
use crate::filter::{self, Trap, Verdict};
use crate::guard;
use crate::handlers::{self, virtual_ids::VirtualIds};
use crate::shared::{SentBack, Shared};
use crate::spawn::{self, SpawnError, Start};
use crate::supervisor;
use crate::syscalls::{Kind, Table, Unless};
use crate::task::Fs;
use crate::tracer;
use crate::vfd::Vfds;
use roost_vfs::Namespace;
use std::ffi::CString;
use std::io::{self, Write};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// How a `roost run` session is set up.
pub struct Options {
    /// `--trace FILE`: where JSON lines go.
    pub trace: Option<Box<dyn Write>>,
    /// `--summary`: print the tables at exit.
    pub summary: bool,
    /// `--pin`: run the agent and the program on the CPU roost starts on. A ptrace stop
    /// costs several times more when tracer and tracee sit on different CPUs of a VM; the
    /// price is that a parallel program gets one CPU.
    pub pin: bool,
    /// `--no-notify`: deliver every trapped call as a ptrace stop (no seccomp notifications).
    pub no_notify: bool,
    /// `--attach all`: trace every process from its fork, as without notifications, instead
    /// of attaching to a process only for the calls that need a ptrace stop
    /// ([`crate::attach`]).
    pub attach_all: bool,
    /// Called with the program's exit code as soon as the program itself exits; [`run`]
    /// returns only when every process it left running has exited too.
    pub on_program_exit: Option<Box<dyn FnOnce(i32)>>,
    /// Called with the signal whenever the program stops (SIGSTOP, Ctrl-Z): a process that
    /// stands in for the program towards the caller's shell stops too. With it, roost itself
    /// ignores the terminal's stop signals, which it must survive to let the program stop and
    /// then go on after SIGCONT.
    pub on_program_stop: Option<Box<dyn FnMut(i32)>>,
    /// `--uid/--gid/--hostname`: the identity the id queries and uname report.
    pub ids: VirtualIds,
    /// `--idle-poll-us`: how long a low-priority thread keeps a CPU awake after each
    /// descriptor roost installs in the program ([`supervisor::keep_awake`]; zero: never).
    pub idle_poll: std::time::Duration,
    /// roost's other supervising processes (the front of `roost run`), kept out of the
    /// program's reach with the agent itself ([`guard`]).
    pub supervisors: Vec<i32>,
    /// The in-process fast path ([`crate::fastpath`]), prepared with the mount table.
    pub fast: Option<Arc<FastPath>>,
    /// Start the program in a Landlock domain of its own ([`crate::fence`], decided by
    /// [`crate::fence::applies`] before the fast path is prepared).
    pub fence: bool,
}

/// What each driver of the mount table did (remote servers, their calls and time, cache
/// use), once per driver.
fn driver_reports(ns: &Namespace) -> String {
    let mut seen: Vec<*const ()> = Vec::new();
    let mut out = String::new();
    for m in ns.table().mounts() {
        if let roost_vfs::Target::Driver { driver, .. } = &m.target {
            let id = Arc::as_ptr(driver) as *const ();
            if !seen.contains(&id) {
                seen.push(id);
                driver.flush(); // what is still to be written back counts
                out.push_str(&driver.report().unwrap_or_default());
            }
        }
    }
    out
}

/// Restricts this process (and so every tracee it forks) to the CPU it is running on.
fn pin_to_current_cpu() -> io::Result<()> {
    // SAFETY: sched_getcpu has no arguments; the cpu set is plain data.
    unsafe {
        let cpu = libc::sched_getcpu();
        if cpu < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The agent's own peak resident set size, in KiB.
fn peak_rss_kib() -> i64 {
    // SAFETY: the kernel fills the plain-data struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    ru.ru_maxrss
}

/// The seccomp rules: everything in the table when paths must be seen (a mount list, or
/// tracing), otherwise only the refusals, which the filter answers without a stop. With
/// `notify`, the pure lookups go to the notification thread instead of a ptrace stop; with
/// `lazy` every trapped call does, and takes a ptrace stop only when roost sent it back.
fn rules(table: &Table, full: bool, notify: bool, ids: bool, lazy: bool) -> Vec<(u32, Verdict)> {
    let sent_back = |sys: Sys| Verdict::NotifyUnlessIs {
        arg: crate::syscalls::mark_arg(sys),
        value: crate::syscalls::BY_PTRACE,
    };
    table
        .entries()
        .filter_map(|(nr, entry)| match entry.kind {
            Kind::Refuse(e) => Some((nr, Verdict::Errno(e))),
            // Their rules are `guard::rules`.
            Kind::Aimed(_) | Kind::RefuseIf { .. } => None,
            Kind::Clone if lazy => None,
            Kind::Credentials | Kind::Identity => {
                Some(nr).zip(id_rule((entry.sys, entry.kind), notify, ids))
            }
            _ if lazy && full => Some((nr, sent_back(entry.sys))),
            Kind::Clone if full => Some((
                nr,
                Verdict::TraceIf {
                    arg: 0,
                    bits: libc::CLONE_UNTRACED as u32,
                },
            )),
            Kind::Clone => None,
            _ if notify && entry.notified.is_some() => {
                let verdict = match entry.notified.and_then(|n| n.unless) {
                    Some(Unless::AnyBit { arg, bits }) => Verdict::NotifyUnless { arg, bits },
                    Some(Unless::Is { arg, value }) => Verdict::NotifyUnlessIs { arg, value },
                    None => Verdict::Notify,
                };
                Some((nr, verdict))
            }
            _ if full => Some((nr, Verdict::Trace)),
            _ => None,
        })
        .collect()
}

/// prctl's options that lower a process's capabilities: `PR_CAPBSET_DROP` (taken away at
/// its next exec) and `PR_SET_SECUREBITS` (root keeping none across an exec, say).
const CAPABILITY_PRCTLS: &[u32] = &[24, 28];

/// The rule for a credential change or an id query (`sys`, `kind`).
fn id_rule((sys, kind): (Sys, Kind), notify: bool, ids: bool) -> Option<Verdict> {
    match kind {
        // Only the notification thread cares, and only when roost is root (others
        // cannot hand their tracees a different identity).
        // SAFETY: a plain id query.
        Kind::Credentials if notify && unsafe { libc::geteuid() } == 0 => Some(match sys {
            Sys::Prctl => Verdict::NotifyIfOneOf {
                arg: 0,
                values: CAPABILITY_PRCTLS,
            },
            _ => Verdict::Notify,
        }),
        Kind::Identity if ids && notify => Some(Verdict::Notify),
        Kind::Identity if ids => Some(Verdict::Trace),
        _ => None,
    }
}

/// The rules for the calls that tell a descriptor's identity ([`copies::CALLS`]): notified
/// on the copies' range, or with ptrace only (no range: the kernel places those
/// descriptors) a stop for every descriptor, when paths are seen at all.
fn identity_rules(range: Option<(u32, u32)>, full: bool) -> Vec<(u32, Verdict)> {
    let duplicating = copies::DUPLICATING.iter().filter(|_| range.is_some());
    copies::CALLS
        .iter()
        .chain(duplicating)
        .filter_map(|&sys| {
            let nr = sys.nr() as u32;
            match range {
                Some((from, _)) => Some((nr, Verdict::NotifyIfFdFrom { args: &[0], from })),
                None if full => Some((nr, Verdict::Trace)),
                None => None,
            }
        })
        .collect()
}

/// The soft limit on descriptors the program starts with.
fn descriptor_limit() -> u64 {
    // SAFETY: the kernel fills the plain-data struct.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: a query of our own limit into a valid struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return 1024;
    }
    limit.rlim_cur
}

/// Runs `argv` (exec'ing `program`, a logical path) under the agent with namespace `ns`;
/// returns the exit code as a shell reports it (128+N for death by signal N).
pub fn run(
    ns: Namespace,
    program: &[u8],
    argv: &[Vec<u8>],
    options: Options,
) -> Result<i32, SpawnError> {
    // Before the program exists: its calls aimed at roost are refused from the start.
    if let Err(e) = guard::undumpable() {
        eprintln!("roost: cannot make roost's own process undumpable: {e}");
    }
    guard::protect(&options.supervisors);
    let table = Table::new();
    let call_log = Tracer::new(options.trace, options.summary);
    let full = !ns.table().is_empty() || call_log.wants_results();
    // Traces need each call's result and duration, which only ptrace stops give.
    let notify = full && !call_log.wants_results() && !options.no_notify;
    let lazy = notify && !options.attach_all;
    let foreign = if notify {
        Verdict::Notify
    } else {
        Verdict::Errno(libc::ENOSYS)
    };
    let ids = options.ids.any();
    // Files of direct-mode mounts, and files of cached-mode ones opened to append, are
    // virtual descriptors served by notifications; without notifications they are used
    // through local copies, as in cached mode.
    let vfd_range = (notify && ns.table().any_remote()).then(|| Vfds::range(descriptor_limit()));
    let mut first = Vec::new();
    if let Some((from, _)) = vfd_range {
        first.extend(
            table
                .descriptor_calls()
                .map(|(nr, args)| (nr, Verdict::NotifyIfFdFrom { args, from })),
        );
    }
    // Local copies of remote objects: their identity calls are answered by roost.
    let copies_range = notify.then(|| copies::range(descriptor_limit()));
    first.extend(identity_rules(copies_range, full));
    // The fast path's calls from its code page pass before any rule traps them.
    let fast = options.fast.filter(|_| full);
    if let Some(fast) = &fast {
        for (from, _) in vfd_range.iter().chain(copies_range.iter()) {
            fast.set_descriptor_floor(*from);
        }
        fast.publish(&ns);
        let publisher = Arc::clone(fast);
        ns.watch(Box::new(move |ns, names_under| match names_under {
            Some(under) => publisher.names_changed(ns, under),
            None => publisher.publish(ns),
        }));
        let noter = Arc::clone(fast);
        copies::watch(move |dev, ino| noter.note_copy(dev, ino));
        first.splice(0..0, fast.rules());
    }
    let own = guard::own_ids();
    let trap = if notify { Trap::Notify } else { Trap::Trace };
    first.extend(guard::rules(&table, trap));
    first.extend(rules(&table, full, notify, ids, lazy));
    let bpf = filter::build(&first, foreign, &own);
    let cstr = |b: &[u8]| CString::new(b.to_vec()).unwrap_or_default();
    let argv: Vec<CString> = argv.iter().map(|a| cstr(a)).collect();
    let physical_cwd = std::env::current_dir()
        .map(|p| p.into_os_string().into_encoded_bytes())
        .unwrap_or_else(|_| b"/".to_vec());
    let fs = Fs {
        logical: ns.logical_cwd(&physical_cwd),
        physical: physical_cwd,
    };
    if options.pin {
        if let Err(e) = pin_to_current_cpu() {
            eprintln!("roost: --pin: {e}");
        }
    }
    if lazy {
        if let Err(e) = attach::become_subreaper() {
            eprintln!("roost: cannot become the subreaper of the program's processes: {e}");
        }
    }
    let start = Start {
        listener: notify,
        untraced: lazy,
        fence: options.fence,
    };
    let spawned = match spawn::spawn(&cstr(program), &argv, &bpf, start) {
        // No notifications here (kernel < 5.6, or the filter flag refused): ptrace only.
        Err(SpawnError::Listener(_)) | Err(SpawnError::Filter(..)) if notify => {
            let mut rules_then: Vec<_> = fast.iter().flat_map(|f| f.rules()).collect();
            rules_then.extend(identity_rules(None, full));
            rules_then.extend(guard::rules(&table, Trap::Trace));
            rules_then.extend(rules(&table, full, false, ids, false));
            let bpf = filter::build(&rules_then, Verdict::Errno(libc::ENOSYS), &own);
            let start = Start {
                listener: false,
                untraced: false,
                ..start
            };
            spawn::spawn(&cstr(program), &argv, &bpf, start)?
        }
        r => r?,
    };
    let pid = spawned.pid;
    let notifications = spawned.listener.is_some();
    let lazy = lazy && notifications;
    if let Some(fast) = &fast {
        fast.name_cwds_by_record(&ns, lazy);
    }
    if lazy {
        if let Err(e) = attach::end_on_signals() {
            eprintln!("roost: SIGTERM will not reach the program's untraced processes: {e}");
        }
    }
    if notifications {
        tracer::catch_wake_signal();
    }
    let vfds = match (vfd_range, &spawned.listener) {
        (Some((from, to)), Some(_)) => {
            // Each open direct-mode file holds two descriptors in roost. The program,
            // started already, keeps the limit it was given.
            crate::sys::raise_descriptor_limit();
            match Vfds::start(from, to) {
                Ok(v) => Some(v),
                Err(e) => {
                    eprintln!("roost: direct-mode files cannot be served ({e}); they are cached");
                    None
                }
            }
        }
        _ => None,
    };
    let shared = Arc::new(Shared {
        vfds,
        ns,
        execs: Default::default(),
        // SAFETY: gettid has no arguments.
        sent_back: notifications
            .then(|| SentBack::new(unsafe { libc::syscall(libc::SYS_gettid) } as i32)),
        credentials_changed: AtomicBool::new(false),
        stops: Arc::default(),
        rerooted: Default::default(),
        ids: options.ids,
        copies: copies_range
            .filter(|_| notifications)
            .map(|(from, to)| crate::vfd::Slots::new(from, to)),
        fast,
    });
    if let Some(fast) = &shared.fast {
        let run = Arc::downgrade(&shared);
        let ticking = FastPath::keep_fresh(move || {
            let Some(shared) = run.upgrade() else {
                return false;
            };
            if let Some(fast) = &shared.fast {
                fast.refresh(&shared.ns);
            }
            true
        });
        if let Err(e) = ticking {
            eprintln!("roost: no in-process fast path this run (no thread for its clock: {e})");
            fast.turn_off(&shared.ns);
        }
    }
    if let Some(vfds) = &shared.vfds {
        let vfds = Arc::clone(vfds);
        shared
            .ns
            .set_descriptor_names(Box::new(move |ino| vfds.name_of(ino)));
    }
    if let Some(listener) = spawned.listener {
        supervisor::keep_awake::start(options.idle_poll);
        supervisor::start(listener, Arc::clone(&shared));
    }
    let (exit_code, mut call_log) = tracer::trace(tracer::Program {
        shared: Arc::clone(&shared),
        table,
        pid,
        fs,
        call_log,
        notifications,
        lazy,
        on_program_exit: options.on_program_exit,
        on_program_stop: options.on_program_stop,
    });
    if let Some(vfds) = &shared.vfds {
        vfds.finish();
    }
    if let Some(fast) = &shared.fast {
        fast.remove_files();
    }
    handlers::mounts_view::cleanup();
    let (hits, misses) = shared.ns.hits_and_misses();
    match call_log.finish() {
        Ok(Some(summary)) => eprintln!(
            "{summary}{}{}agent: peak RSS {} KiB, path cache {hits} hits / {misses} misses",
            shared.fast.as_ref().map(|f| f.report()).unwrap_or_default(),
            driver_reports(&shared.ns),
            peak_rss_kib(),
        ),
        Ok(None) => {}
        Err(e) => eprintln!("roost: writing the trace: {e}"),
    }
    Ok(exit_code)
}
