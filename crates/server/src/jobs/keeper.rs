//! The keeper: every job's first process, `roost` itself started by the server under the
//! name [`NAME`] (so it holds nothing of the server's memory), which puts the job in its
//! place, starts its program and stays to watch over it:
//!
//! ```text
//! roost serve ─ keeper ─ init (pid 1 of the job's PID namespace) ─ program ─ ...
//! ```
//!
//! 1. It enters the owner's cgroups ([`Plan::entry`], the thermostat's), becomes the job's
//!    user (a root server's keeper, where the job gets a user namespace), makes itself a
//!    child subreaper, dies with the server's thread (parent-death signal) and cannot be
//!    traced or read by the job (not dumpable).
//! 2. It makes the job's namespaces ([`Namespaces`]): a user namespace mapping the job's
//!    uid and gid to themselves, a PID namespace, a mount namespace (for a `/proc` showing
//!    the job's processes only) and an IPC namespace, and a network namespace with nothing
//!    but its own loopback unless the owner allows jobs the network.
//! 3. Its child, pid 1 of that namespace, mounts the `/proc`, grants the job reading it
//!    (Landlock), raises the loopback, starts the program and reaps every process of the
//!    namespace; when the program ends it reports how and exits, and the kernel kills every
//!    process left in the namespace: a process cannot leave a PID namespace, by double fork,
//!    `setsid` or anything else, so none outlives its job.
//! 4. The program's process takes its limits (processes, memory), `PR_SET_NO_NEW_PRIVS`, the
//!    socket filter ([`super::seccomp`]) and the Landlock ruleset ([`super::view`]), and
//!    runs the program.
//!
//! Without namespaces ([`Namespaces::None`]: an unprivileged server where the kernel allows
//! no user namespace) the keeper is the program's parent, and, a subreaper, adopts whatever
//! the job leaves orphaned, until the server kills it all ([`super::tree`]).
//!
//! The keeper reports on the status pipe ([`Plan::status`]) in lines the server reads
//! ([`Report`]): how the program ended, or which step failed and why.

use super::{landlock, seccomp};
use roost_base::errno_of;
use roost_catalog::json::{self, Value};
use std::convert::Infallible;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::CommandExt;

/// The name the keeper is started under (its `argv[0]`).
pub const NAME: &str = "roost-job-keeper";

/// The namespaces a job runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Namespaces {
    /// User, PID, mount, IPC (and network) namespaces, made by the job's user: any server
    /// where the kernel allows unprivileged user namespaces.
    User,
    /// PID, mount, IPC (and network) namespaces made as root, the program then becoming the
    /// job's user: a root server where user namespaces are not allowed.
    Root,
    /// None: an unprivileged server where user namespaces are not allowed.
    None,
}

impl Namespaces {
    pub fn name(self) -> &'static str {
        match self {
            Namespaces::User => "user-namespaces",
            Namespaces::Root => "root-namespaces",
            Namespaces::None => "none",
        }
    }

    /// Every kind, best first.
    pub const ALL: [Namespaces; 3] = [Namespaces::User, Namespaces::Root, Namespaces::None];

    fn parse(name: &str) -> Option<Namespaces> {
        Namespaces::ALL.into_iter().find(|n| n.name() == name)
    }

    /// The kind `--job-namespaces` names: `user`, `root`, `none`, or `auto` (`None`: the
    /// best that works).
    pub fn parse_option(text: &str) -> Result<Option<Namespaces>, String> {
        match text {
            "auto" => Ok(None),
            "user" => Ok(Some(Namespaces::User)),
            "root" => Ok(Some(Namespaces::Root)),
            "none" => Ok(Some(Namespaces::None)),
            _ => Err(format!(
                "--job-namespaces {text}: expected auto, user, root or none"
            )),
        }
    }

    /// Whether the job has a PID namespace of its own (and the rest).
    pub fn any(self) -> bool {
        self != Namespaces::None
    }
}

/// What the keeper does for one job: its first argument, as JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub namespaces: Namespaces,
    /// The owner allows jobs the network (`--job-network`): no network namespace, no
    /// socket filter.
    pub network: bool,
    /// The job's uid and gid, for a keeper started as root.
    pub user: Option<(u32, u32)>,
    /// Descriptors of the cgroup files to write `0` to, first of all.
    pub entry: Vec<i32>,
    /// The Landlock ruleset's descriptor, where the kernel has Landlock.
    pub ruleset: Option<i32>,
    /// Where to report ([`Report`]).
    pub status: i32,
    /// `RLIMIT_NPROC` of the job's processes.
    pub processes: Option<u64>,
    /// `RLIMIT_DATA` of each of the job's processes, bytes.
    pub memory: Option<u64>,
    /// Set everything up and exit 0 where the program would run (the server's check of
    /// what this kernel allows).
    pub probe: bool,
}

impl Plan {
    pub fn to_json(&self) -> String {
        let opt = |v: Option<u64>| v.map_or(Value::Null, |n| Value::Int(n as i64));
        let (uid, gid) = match self.user {
            Some((u, g)) => (Value::Int(u.into()), Value::Int(g.into())),
            None => (Value::Null, Value::Null),
        };
        Value::Object(vec![
            (
                "namespaces".into(),
                Value::String(self.namespaces.name().into()),
            ),
            ("network".into(), Value::Bool(self.network)),
            ("uid".into(), uid),
            ("gid".into(), gid),
            (
                "entry".into(),
                Value::Array(self.entry.iter().map(|&fd| Value::Int(fd.into())).collect()),
            ),
            (
                "ruleset".into(),
                self.ruleset.map_or(Value::Null, |fd| Value::Int(fd.into())),
            ),
            ("status".into(), Value::Int(self.status.into())),
            ("processes".into(), opt(self.processes)),
            ("memory".into(), opt(self.memory)),
            ("probe".into(), Value::Bool(self.probe)),
        ])
        .to_json()
    }

    pub fn parse(text: &str) -> Result<Plan, String> {
        let v = json::parse(text.as_bytes()).map_err(|e| e.to_string())?;
        let int = |key: &str| -> Result<Option<i64>, String> {
            match v.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Int(n)) => Ok(Some(*n)),
                Some(other) => Err(format!("{key}: {}", other.to_json())),
            }
        };
        let fd = |n: i64| i32::try_from(n).map_err(|_| format!("descriptor {n}"));
        let id = |n: i64| u32::try_from(n).map_err(|_| format!("id {n}"));
        let flag = |key: &str| matches!(v.get(key), Some(Value::Bool(true)));
        let namespaces = v
            .get("namespaces")
            .and_then(Value::as_str)
            .and_then(Namespaces::parse)
            .ok_or("namespaces")?;
        let user = match (int("uid")?, int("gid")?) {
            (Some(u), Some(g)) => Some((id(u)?, id(g)?)),
            _ => None,
        };
        let entry = match v.get("entry") {
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| i.as_i64().ok_or("entry".to_string()).and_then(fd))
                .collect::<Result<_, _>>()?,
            _ => Vec::new(),
        };
        let size = |n: i64| u64::try_from(n).map_err(|_| format!("limit {n}"));
        Ok(Plan {
            namespaces,
            network: flag("network"),
            user,
            entry,
            ruleset: int("ruleset")?.map(fd).transpose()?,
            status: fd(int("status")?.ok_or("status")?)?,
            processes: int("processes")?.map(size).transpose()?,
            memory: int("memory")?.map(size).transpose()?,
            probe: flag("probe"),
        })
    }

    /// The descriptors the keeper inherits.
    pub fn inherited(&self) -> Vec<i32> {
        let mut fds = self.entry.clone();
        fds.extend(self.ruleset);
        fds.push(self.status);
        fds
    }
}

/// Which step of a job's start failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Entering the owner's cgroups.
    Limits,
    /// Becoming the job's user.
    User,
    /// Making the namespaces.
    Namespaces,
    /// Mounting the job's own `/proc` (a note: the job sees the host's).
    Proc,
    /// Raising the loopback in the job's network namespace (a note).
    Loopback,
    /// Limits, filter and Landlock on the program's process.
    Confine,
    /// Running the program.
    Exec,
}

const STAGES: [(Stage, &str); 7] = [
    (Stage::Limits, "limits"),
    (Stage::User, "user"),
    (Stage::Namespaces, "namespaces"),
    (Stage::Proc, "proc"),
    (Stage::Loopback, "loopback"),
    (Stage::Confine, "confine"),
    (Stage::Exec, "exec"),
];

impl Stage {
    fn name(self) -> &'static str {
        STAGES
            .iter()
            .find(|(s, _)| *s == self)
            .expect("every stage")
            .1
    }

    fn parse(name: &str) -> Option<Stage> {
        STAGES.iter().find(|(_, n)| *n == name).map(|(s, _)| *s)
    }
}

/// A line of the status pipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Report {
    /// The program ended: its wait status.
    Exit(i32),
    /// A step failed, and the job with it.
    Error(Stage, i32),
    /// A step failed and the job went on without it.
    Note(Stage, i32),
}

impl Report {
    fn line(self) -> String {
        match self {
            Report::Exit(status) => format!("exit {status}\n"),
            Report::Error(stage, errno) => format!("error {} {errno}\n", stage.name()),
            Report::Note(stage, errno) => format!("note {} {errno}\n", stage.name()),
        }
    }

    /// The reports in what was read from a status pipe (lines that do not parse are not).
    pub fn parse_all(bytes: &[u8]) -> Vec<Report> {
        String::from_utf8_lossy(bytes)
            .lines()
            .filter_map(|line| {
                let words: Vec<&str> = line.split(' ').collect();
                match words[..] {
                    ["exit", s] => Some(Report::Exit(s.parse().ok()?)),
                    ["error", stage, e] => {
                        Some(Report::Error(Stage::parse(stage)?, e.parse().ok()?))
                    }
                    ["note", stage, e] => Some(Report::Note(Stage::parse(stage)?, e.parse().ok()?)),
                    _ => None,
                }
            })
            .collect()
    }
}

/// Runs the keeper if this process was started as one (see [`NAME`]), and never returns
/// then; returns at once otherwise. The `roost` binary calls it first thing.
pub fn run_if_called() {
    let mut args = std::env::args_os();
    if args.next().as_deref() != Some(OsStr::new(NAME)) {
        return;
    }
    let args: Vec<OsString> = args.collect();
    let plan = args.first().and_then(|a| a.to_str()).map(Plan::parse);
    let (Some(Ok(plan)), Some(program), Some(argv)) = (plan, args.get(1), args.get(2..)) else {
        eprintln!("{NAME}: only roost serve starts this, to run a job");
        std::process::exit(2);
    };
    let Err((stage, e)) = keep(&plan, program, argv);
    report(plan.status, Report::Error(stage, errno_of(&e)));
    std::process::exit(1);
}

type Failure = (Stage, io::Error);

fn at<T>(stage: Stage, r: io::Result<T>) -> Result<T, Failure> {
    r.map_err(|e| (stage, e))
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Writes a report; a server that stopped reading is gone, and the job with it.
fn report(status: i32, r: Report) {
    let line = r.line();
    // SAFETY: writes a buffer of ours.
    unsafe { libc::write(status, line.as_ptr().cast(), line.len()) };
}

/// The keeper's part (1 and 2), then its child's.
fn keep(plan: &Plan, program: &OsStr, argv: &[OsString]) -> Result<Infallible, Failure> {
    // Into the owner's limits before anything else runs.
    for &fd in &plan.entry {
        // SAFETY: writes a constant; closes a descriptor the server gave us.
        let written = unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) };
        if written != 1 {
            return Err((Stage::Limits, io::Error::last_os_error()));
        }
        // SAFETY: the server gave us this descriptor to write once; nothing else uses it.
        unsafe { libc::close(fd) };
    }
    // SAFETY: plain queries and settings of this process.
    let parent = unsafe { libc::getppid() };
    if plan.namespaces == Namespaces::User {
        if let Some((uid, gid)) = plan.user {
            at(Stage::User, become_user(uid, gid))?;
            // Changing the user made this process undumpable, and its /proc/self files
            // root's: the user namespace's maps could not be written.
            // SAFETY: a setting of this process.
            unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1, 0, 0, 0) };
        }
    }
    // Changing the user cleared it: the job must not outlive the server's thread.
    stay_with_parent(parent);
    // SAFETY: a setting of this process.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if plan.namespaces.any() {
        let mut flags = libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWIPC;
        if plan.namespaces == Namespaces::User {
            flags |= libc::CLONE_NEWUSER;
        }
        if !plan.network {
            flags |= libc::CLONE_NEWNET;
        }
        // Inside a user namespace without maps yet, ids read as the overflow id.
        // SAFETY: plain queries and a plain system call.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        // SAFETY: a plain system call on this process, no pointers.
        at(Stage::Namespaces, cvt(unsafe { libc::unshare(flags) }))?;
        if plan.namespaces == Namespaces::User {
            at(Stage::Namespaces, map_own_ids(uid, gid))?;
        }
    }
    // From now on no process of the job's user can trace or read the keeper.
    // SAFETY: a setting of this process.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    let (alive_read, alive_write) = at(Stage::Namespaces, pipe())?;
    // SAFETY: this process has one thread; the child goes on with ordinary code.
    let child = at(Stage::Namespaces, cvt(unsafe { libc::fork() }))?;
    if child == 0 {
        // SAFETY: closes our copy of the write end: the pipe hangs up when the keeper dies.
        unsafe { libc::close(alive_write) };
        return if plan.namespaces.any() {
            init(plan, alive_read, program, argv)
        } else {
            start_program(plan, alive_read, program, argv)
        };
    }
    // SAFETY: closes descriptors only the child needs.
    unsafe {
        libc::close(alive_read);
        if let Some(fd) = plan.ruleset {
            libc::close(fd);
        }
    }
    let report_to = (!plan.namespaces.any()).then_some(plan.status);
    reap_all(child, report_to, false)
}

/// Leaves root for `uid` and `gid`, with no supplementary groups.
fn become_user(uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: plain system calls.
    unsafe {
        cvt(libc::setgroups(0, std::ptr::null()))?;
        cvt(libc::setresgid(gid, gid, gid))?;
        cvt(libc::setresuid(uid, uid, uid))?;
    }
    Ok(())
}

/// Dies with the parent (`parent`, the process seen before): at once if it already has.
fn stay_with_parent(parent: libc::pid_t) {
    // SAFETY: plain system calls.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::getppid() != parent {
            libc::_exit(1);
        }
    }
}

/// Dies with the keeper, whose death hangs up `alive`: at once if it already has.
fn stay_with_keeper(alive: i32) {
    let mut poll = libc::pollfd {
        fd: alive,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: plain system calls on our own pollfd.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        if libc::poll(&mut poll, 1, 0) != 0 && poll.revents & libc::POLLHUP != 0 {
            libc::_exit(1);
        }
    }
}

/// In a user namespace just made by `uid` and `gid`: they mean themselves in it, and no
/// group list can be set (unprivileged namespaces require it).
fn map_own_ids(uid: u32, gid: u32) -> io::Result<()> {
    match std::fs::write("/proc/self/setgroups", "deny") {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1\n"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1\n"))
}

fn pipe() -> io::Result<(i32, i32)> {
    let mut fds = [0; 2];
    // SAFETY: into an array of two.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    Ok((fds[0], fds[1]))
}

/// Pid 1 of the job's namespaces (3).
fn init(
    plan: &Plan,
    alive: i32,
    program: &OsStr,
    argv: &[OsString],
) -> Result<Infallible, Failure> {
    stay_with_keeper(alive);
    if let Err(e) = mount_proc() {
        report(plan.status, Report::Note(Stage::Proc, errno_of(&e)));
    }
    if let Some(ruleset) = plan.ruleset {
        at(Stage::Confine, grant_proc(ruleset))?;
    }
    if !plan.network {
        if let Err(e) = loopback_up() {
            report(plan.status, Report::Note(Stage::Loopback, errno_of(&e)));
        }
    }
    // SAFETY: this process has one thread; the child goes on with ordinary code.
    let child = at(Stage::Namespaces, cvt(unsafe { libc::fork() }))?;
    if child == 0 {
        return start_program(plan, alive, program, argv);
    }
    // SAFETY: closes descriptors only the program needed.
    unsafe {
        libc::close(alive);
        if let Some(fd) = plan.ruleset {
            libc::close(fd);
        }
    }
    reap_all(child, Some(plan.status), true)
}

/// A `/proc` of the PID namespace over the host's, in the job's mount namespace (whose
/// mounts first stop propagating anywhere).
fn mount_proc() -> io::Result<()> {
    let proc_ = c"proc";
    // SAFETY: constant strings.
    unsafe {
        cvt(libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ))?;
        cvt(libc::mount(
            proc_.as_ptr(),
            c"/proc".as_ptr(),
            proc_.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        ))?;
    }
    Ok(())
}

/// Lets the job read `/proc` (whichever is mounted there now).
fn grant_proc(ruleset: i32) -> io::Result<()> {
    // SAFETY: a path open; closed below.
    let fd = cvt(unsafe { libc::open(c"/proc".as_ptr(), libc::O_PATH | libc::O_CLOEXEC) })?;
    let granted = landlock::add_rule(ruleset, fd, landlock::fs::READ);
    // SAFETY: ours.
    unsafe { libc::close(fd) };
    granted
}

/// Raises `lo` in the job's network namespace, so that its processes can talk to one
/// another over 127.0.0.1 (and to nothing else).
fn loopback_up() -> io::Result<()> {
    // SAFETY: a socket for the ioctls, closed below; the request is ours.
    unsafe {
        let s = cvt(libc::socket(
            libc::AF_INET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            0,
        ))?;
        let mut req: libc::ifreq = std::mem::zeroed();
        for (d, c) in req.ifr_name.iter_mut().zip(b"lo") {
            *d = *c as libc::c_char;
        }
        let mut r = libc::ioctl(s, libc::SIOCGIFFLAGS, &mut req);
        if r == 0 {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            r = libc::ioctl(s, libc::SIOCSIFFLAGS, &req);
        }
        let e = io::Error::last_os_error();
        libc::close(s);
        if r != 0 {
            return Err(e);
        }
    }
    Ok(())
}

/// Reaps every child until none is left; the end of `child` is reported to `report_to`,
/// and with `exit_with_child` ends this process (pid 1: the kernel then kills the rest of
/// the namespace).
fn reap_all(child: libc::pid_t, report_to: Option<i32>, exit_with_child: bool) -> ! {
    loop {
        let mut status = 0;
        // SAFETY: waits into a status of ours.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::__WALL) };
        if pid == child {
            if let Some(fd) = report_to {
                report(fd, Report::Exit(status));
            }
            if exit_with_child {
                // SAFETY: ends this process.
                unsafe { libc::_exit(0) };
            }
        }
        if pid < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // SAFETY: nothing is left to wait for.
            unsafe { libc::_exit(0) };
        }
    }
}

/// The program's process (4): its user (of a root keeper without a user namespace), limits,
/// filter and ruleset, then the program.
fn start_program(
    plan: &Plan,
    alive: i32,
    program: &OsStr,
    argv: &[OsString],
) -> Result<Infallible, Failure> {
    // A keeper that made a user namespace became the job's user first; any other root
    // keeper stays root, out of the job's reach, and only the program changes.
    if plan.namespaces != Namespaces::User {
        if let Some((uid, gid)) = plan.user {
            at(Stage::User, become_user(uid, gid))?;
        }
    }
    stay_with_keeper(alive);
    let limits = [
        (libc::RLIMIT_NPROC, plan.processes),
        (libc::RLIMIT_DATA, plan.memory),
    ];
    for (resource, value) in limits {
        if let Some(v) = value {
            let limit = libc::rlimit {
                rlim_cur: v,
                rlim_max: v,
            };
            // SAFETY: a limit of ours.
            let set = unsafe { libc::setrlimit(resource, &limit) };
            at(Stage::Confine, cvt(set))?;
        }
    }
    // SAFETY: plain settings of this process.
    unsafe {
        libc::umask(0o022);
        at(
            Stage::Confine,
            cvt(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)),
        )?;
    }
    if !plan.network {
        let sockets = if plan.namespaces.any() {
            seccomp::Sockets::Unix
        } else {
            seccomp::Sockets::All
        };
        at(Stage::Confine, seccomp::install(&seccomp::program(sockets)))?;
    }
    if let Some(ruleset) = plan.ruleset {
        at(Stage::Confine, landlock::restrict_self(ruleset))?;
        // SAFETY: ours, no longer needed.
        unsafe { libc::close(ruleset) };
    }
    // SAFETY: the program must not inherit the status pipe.
    unsafe { libc::fcntl(plan.status, libc::F_SETFD, libc::FD_CLOEXEC) };
    if plan.probe {
        // SAFETY: ends the probe's program here.
        unsafe { libc::_exit(0) };
    }
    let mut args = argv.iter();
    let mut command = std::process::Command::new(program);
    if let Some(arg0) = args.next() {
        command.arg0(arg0);
    }
    let e = command.args(args).exec();
    report(plan.status, Report::Error(Stage::Exec, errno_of(&e)));
    // SAFETY: the program could not be run: the exit status of a shell that cannot.
    unsafe { libc::_exit(127) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_survives_its_json() {
        let plan = Plan {
            namespaces: Namespaces::User,
            network: false,
            user: Some((65534, 65534)),
            entry: vec![5, 6],
            ruleset: Some(7),
            status: 8,
            processes: Some(256),
            memory: Some(2 << 30),
            probe: false,
        };
        assert_eq!(Plan::parse(&plan.to_json()), Ok(plan.clone()));
        let bare = Plan {
            namespaces: Namespaces::None,
            network: true,
            user: None,
            entry: Vec::new(),
            ruleset: None,
            processes: None,
            memory: None,
            probe: true,
            ..plan
        };
        assert_eq!(Plan::parse(&bare.to_json()), Ok(bare.clone()));
        assert!(Plan::parse("{}").is_err());
        assert_eq!(bare.inherited(), [8]);
    }

    #[test]
    fn reports_are_lines() {
        let text: String = [
            Report::Note(Stage::Proc, libc::EPERM),
            Report::Error(Stage::Exec, libc::ENOENT),
            Report::Exit(127 << 8),
        ]
        .iter()
        .map(|r| r.line())
        .collect();
        assert_eq!(
            Report::parse_all(format!("{text}garbage\nerror nowhere 2\n").as_bytes()),
            [
                Report::Note(Stage::Proc, libc::EPERM),
                Report::Error(Stage::Exec, libc::ENOENT),
                Report::Exit(127 << 8)
            ]
        );
    }
}
