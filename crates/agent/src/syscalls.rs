//! What the agent does with each syscall it traps, by name: which arguments are paths (and
//! their dirfds), whether a final symlink is followed, which calls are refused outright (by the
//! seccomp filter, with no stop at all) and which need special handlers. The numbers come from
//! the `arch` module.

/// How a path argument treats a final symlink.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Follow {
    Always,
    Never,
    /// The call creates this name (mkdir, symlink, link's new name, ...): never followed,
    /// and a final `.` or `..` is the kernel's to refuse, not a directory to act on.
    Entry,
    /// The call removes, moves or replaces this name (unlink, rmdir, rename's operands): as
    /// [`Follow::Entry`], and a mount point or a directory holding one is busy (EBUSY).
    Removes,
    /// Not followed when `flags_arg & flag` (AT_SYMLINK_NOFOLLOW, IN_DONT_FOLLOW, ...).
    UnlessFlag(usize, u64),
    /// Followed only when `flags_arg & flag` (AT_SYMLINK_FOLLOW of linkat, name_to_handle_at).
    IfFlag(usize, u64),
    /// The open's flags (in any spelling: `call::Open`): O_NOFOLLOW or O_CREAT|O_EXCL name
    /// the link itself.
    Open,
}

/// One path argument of a syscall.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PathArg {
    /// The dirfd argument a relative path is resolved against (None: the cwd).
    pub dirfd: Option<usize>,
    /// The argument holding the path pointer.
    pub path: usize,
    pub follow: Follow,
    /// `(flags argument, AT_EMPTY_PATH)`: an empty path then names the dirfd itself.
    pub empty_flag: Option<(usize, u64)>,
    /// A NULL pointer is legal and names the dirfd (utimensat, futimesat, fanotify_mark).
    pub null_ok: bool,
}

/// The handling class of a trapped or refused syscall.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    /// Path arguments to resolve and, when needed, rewrite. `mutates`: the call may change
    /// which names are symlinks (the resolution cache is cleared after it). `cross`: a
    /// two-path call that must stay within one driver (EXDEV otherwise).
    Path {
        args: &'static [PathArg],
        mutates: bool,
        cross: bool,
    },
    /// execve / execveat: program, `#!` interpreters and ELF interpreter through the namespace.
    Exec {
        dirfd: Option<usize>,
        path: usize,
        argv: usize,
        flags: Option<usize>,
    },
    /// readlink(at): `/proc/<pid>/{exe,cwd,fd/N}` answer logical paths.
    Readlink {
        dirfd: Option<usize>,
        path: usize,
        buf: usize,
        size: usize,
    },
    Getcwd,
    Chdir,
    Fchdir,
    /// bind/connect/sendto: a `sockaddr` pointer and its length.
    SockAddr {
        addr: usize,
        len: usize,
        follow: bool,
    },
    /// sendmsg: a `struct msghdr` pointer.
    SendMsg,
    /// sendmmsg: a vector of `struct mmsghdr`.
    SendMmsg,
    /// chroot: its path like any other, and afterwards the thread's root is not roost's.
    Chroot,
    /// bpf: BPF_OBJ_PIN and BPF_OBJ_GET carry a path in their `bpf_attr`.
    Bpf,
    /// perf_event_open: a uprobe event carries the path of its binary in the attr.
    PerfEventOpen,
    /// getsockname/getpeername (`peer`): an AF_UNIX address the kernel answers is named
    /// logically.
    SockName {
        addr: usize,
        len: usize,
        peer: bool,
    },
    /// clone: trapped only when it asks for an untraced child (`CLONE_UNTRACED`), which
    /// would run outside the namespace; roost clears the flag and traces the child.
    Clone,
    /// open_by_handle_at: a file handle, no path; checked against DENY/ENOENT mappings.
    OpenByHandle {
        mount_fd: usize,
        handle: usize,
    },
    /// A credential change (set*id, setgroups, capset), passed through: noted so the
    /// notification thread stops assuming its tracees share roost's identity.
    Credentials,
    /// An id query or uname, answered with the virtual identity when one is given
    /// (`handlers::virtual_ids`); never trapped otherwise.
    Identity,
    /// Refused by the filter with this errno; never reaches the agent.
    Refuse(i32),
    /// Refused by the filter with `errno` when each `(argument, value)` holds (the low
    /// half of the register), else allowed; never reaches the agent.
    RefuseIf {
        args: &'static [(usize, u32)],
        errno: i32,
    },
    /// A call aimed at another process, refused (EPERM) when it is aimed at one of roost's
    /// own (`crate::guard`).
    Aimed(Aimed),
}

/// How a call names the process it acts on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Aim {
    /// Process or thread ids in these arguments (`int`s; 0 and below name the caller, its
    /// group or every process, never one of roost's alone).
    Ids(&'static [usize]),
    /// A pidfd, or a `/proc/PID` directory, in this argument.
    Pidfd(usize),
    /// The process a file's signals go to: fcntl's `F_SETOWN` (an id in the third
    /// argument) and `F_SETOWN_EX` (a `struct f_owner_ex` there), ioctl's `FIOSETOWN` and
    /// `SIOCSPGRP` (an `int` there).
    Owner,
}

/// When the filter sends a call of [`Kind::Aimed`] to the agent: a call naming one of
/// roost's processes by its id is refused by the filter itself; one naming any other id,
/// or naming its process by a descriptor or through memory, is trapped (to be checked
/// against roost's threads, whose ids the filter cannot know) or allowed, as this says.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TrapWhen {
    /// Never: the id must be a whole process's (tgkill's thread group), or trapping the
    /// call would cost too much (kill).
    Never,
    /// Only when the program may hold `CAP_SYS_PTRACE` over roost: for others the kernel's
    /// ptrace access check refuses every call of this kind aimed at roost, which is not
    /// dumpable.
    WithPtraceCapability,
    /// Always: a signal or a limit needs only the same user.
    Always,
    /// When argument `.0` has one of bits `.1` set (pidfd_open's `PIDFD_THREAD`).
    IfBits(usize, u32),
}

/// A call aimed at another process (see [`Kind::Aimed`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Aimed {
    pub aim: Aim,
    /// Only calls whose argument `.0` is one of `.1` (ptrace's requests that attach,
    /// fcntl's and ioctl's that set an owner); the others are allowed.
    pub only: Option<(usize, &'static [u32])>,
    pub trapped: TrapWhen,
}

const AT_SYMLINK_NOFOLLOW: u64 = 0x100;
const AT_SYMLINK_FOLLOW: u64 = 0x400;
pub const AT_EMPTY_PATH: u64 = 0x1000;
const IN_DONT_FOLLOW: u64 = 0x0200_0000;
const FAN_MARK_DONT_FOLLOW: u64 = 0x4;

const fn cwd(path: usize, follow: Follow) -> PathArg {
    PathArg {
        dirfd: None,
        path,
        follow,
        empty_flag: None,
        null_ok: false,
    }
}

const fn at(dirfd: usize, path: usize, follow: Follow) -> PathArg {
    PathArg {
        dirfd: Some(dirfd),
        path,
        follow,
        empty_flag: None,
        null_ok: false,
    }
}

const fn at_empty(dirfd: usize, path: usize, follow: Follow, flags: usize) -> PathArg {
    PathArg {
        dirfd: Some(dirfd),
        path,
        follow,
        empty_flag: Some((flags, AT_EMPTY_PATH)),
        null_ok: false,
    }
}

const fn at_null(dirfd: usize, path: usize, follow: Follow, flags: Option<usize>) -> PathArg {
    PathArg {
        dirfd: Some(dirfd),
        path,
        follow,
        empty_flag: match flags {
            Some(f) => Some((f, AT_EMPTY_PATH)),
            None => None,
        },
        null_ok: true,
    }
}

const fn path(args: &'static [PathArg]) -> Kind {
    Kind::Path {
        args,
        mutates: false,
        cross: false,
    }
}

const fn mutating(args: &'static [PathArg]) -> Kind {
    Kind::Path {
        args,
        mutates: true,
        cross: false,
    }
}

const fn crossing(args: &'static [PathArg]) -> Kind {
    Kind::Path {
        args,
        mutates: true,
        cross: true,
    }
}

use crate::arch::Sys;
use Follow::{Always, Entry, Never, Removes, UnlessFlag};

const NOFOLLOW_3: Follow = UnlessFlag(3, AT_SYMLINK_NOFOLLOW);
const NOFOLLOW_2: Follow = UnlessFlag(2, AT_SYMLINK_NOFOLLOW);
const NOFOLLOW_4: Follow = UnlessFlag(4, AT_SYMLINK_NOFOLLOW);

/// Every syscall the agent traps or refuses, by name.
pub const SPECS: &[(Sys, Kind)] = &[
    (Sys::Open, path(&[cwd(0, Follow::Open)])),
    (Sys::Creat, path(&[cwd(0, Always)])),
    (Sys::Openat, path(&[at(0, 1, Follow::Open)])),
    (Sys::Openat2, path(&[at(0, 1, Follow::Open)])),
    (Sys::Stat, path(&[cwd(0, Always)])),
    (Sys::Lstat, path(&[cwd(0, Never)])),
    (Sys::Newfstatat, path(&[at_empty(0, 1, NOFOLLOW_3, 3)])),
    (Sys::Statx, path(&[at_empty(0, 1, NOFOLLOW_2, 2)])),
    (Sys::Access, path(&[cwd(0, Always)])),
    (Sys::Faccessat, path(&[at(0, 1, Always)])),
    (Sys::Faccessat2, path(&[at_empty(0, 1, NOFOLLOW_3, 3)])),
    (
        Sys::Readlink,
        Kind::Readlink {
            dirfd: None,
            path: 0,
            buf: 1,
            size: 2,
        },
    ),
    (
        Sys::Readlinkat,
        Kind::Readlink {
            dirfd: Some(0),
            path: 1,
            buf: 2,
            size: 3,
        },
    ),
    (Sys::Mkdir, path(&[cwd(0, Entry)])),
    (Sys::Mkdirat, path(&[at(0, 1, Entry)])),
    (Sys::Mknod, path(&[cwd(0, Entry)])),
    (Sys::Mknodat, path(&[at(0, 1, Entry)])),
    (Sys::Rmdir, mutating(&[cwd(0, Removes)])),
    (Sys::Unlink, mutating(&[cwd(0, Removes)])),
    (Sys::Unlinkat, mutating(&[at(0, 1, Removes)])),
    (Sys::Rename, crossing(&[cwd(0, Removes), cwd(1, Removes)])),
    (
        Sys::Renameat,
        crossing(&[at(0, 1, Removes), at(2, 3, Removes)]),
    ),
    (
        Sys::Renameat2,
        crossing(&[at(0, 1, Removes), at(2, 3, Removes)]),
    ),
    (Sys::Link, crossing(&[cwd(0, Never), cwd(1, Entry)])),
    (
        Sys::Linkat,
        crossing(&[
            at_empty(0, 1, Follow::IfFlag(4, AT_SYMLINK_FOLLOW), 4),
            at(2, 3, Entry),
        ]),
    ),
    (Sys::Symlink, mutating(&[cwd(1, Entry)])),
    (Sys::Symlinkat, mutating(&[at(1, 2, Entry)])),
    (Sys::Chmod, path(&[cwd(0, Always)])),
    (Sys::Fchmodat, path(&[at(0, 1, Always)])),
    (Sys::Fchmodat2, path(&[at_empty(0, 1, NOFOLLOW_3, 3)])),
    (Sys::Chown, path(&[cwd(0, Always)])),
    (Sys::Lchown, path(&[cwd(0, Never)])),
    (Sys::Fchownat, path(&[at_empty(0, 1, NOFOLLOW_4, 4)])),
    (Sys::Truncate, path(&[cwd(0, Always)])),
    (Sys::Utime, path(&[cwd(0, Always)])),
    (Sys::Utimes, path(&[cwd(0, Always)])),
    (Sys::Futimesat, path(&[at_null(0, 1, Always, None)])),
    (Sys::Utimensat, path(&[at_null(0, 1, NOFOLLOW_3, Some(3))])),
    (Sys::Chdir, Kind::Chdir),
    (Sys::Fchdir, Kind::Fchdir),
    (Sys::Getcwd, Kind::Getcwd),
    (Sys::Chroot, Kind::Chroot),
    (
        Sys::Execve,
        Kind::Exec {
            dirfd: None,
            path: 0,
            argv: 1,
            flags: None,
        },
    ),
    (
        Sys::Execveat,
        Kind::Exec {
            dirfd: Some(0),
            path: 1,
            argv: 2,
            flags: Some(4),
        },
    ),
    (Sys::Setxattr, path(&[cwd(0, Always)])),
    (Sys::Lsetxattr, path(&[cwd(0, Never)])),
    (Sys::Getxattr, path(&[cwd(0, Always)])),
    (Sys::Lgetxattr, path(&[cwd(0, Never)])),
    (Sys::Listxattr, path(&[cwd(0, Always)])),
    (Sys::Llistxattr, path(&[cwd(0, Never)])),
    (Sys::Removexattr, path(&[cwd(0, Always)])),
    (Sys::Lremovexattr, path(&[cwd(0, Never)])),
    (Sys::Setxattrat, path(&[at_empty(0, 1, NOFOLLOW_2, 2)])),
    (Sys::Getxattrat, path(&[at_empty(0, 1, NOFOLLOW_2, 2)])),
    (Sys::Listxattrat, path(&[at_empty(0, 1, NOFOLLOW_2, 2)])),
    (Sys::Removexattrat, path(&[at_empty(0, 1, NOFOLLOW_2, 2)])),
    (Sys::FileGetattr, path(&[at_empty(0, 1, NOFOLLOW_4, 4)])),
    (Sys::FileSetattr, path(&[at_empty(0, 1, NOFOLLOW_4, 4)])),
    (Sys::Statfs, path(&[cwd(0, Always)])),
    (Sys::Uselib, path(&[cwd(0, Always)])),
    (
        Sys::InotifyAddWatch,
        path(&[cwd(1, UnlessFlag(2, IN_DONT_FOLLOW))]),
    ),
    (
        Sys::FanotifyMark,
        path(&[at_null(3, 4, UnlessFlag(1, FAN_MARK_DONT_FOLLOW), None)]),
    ),
    (
        Sys::NameToHandleAt,
        path(&[at_empty(0, 1, Follow::IfFlag(4, AT_SYMLINK_FOLLOW), 4)]),
    ),
    (
        Sys::Bind,
        Kind::SockAddr {
            addr: 1,
            len: 2,
            follow: false,
        },
    ),
    (
        Sys::Connect,
        Kind::SockAddr {
            addr: 1,
            len: 2,
            follow: true,
        },
    ),
    (
        Sys::Sendto,
        Kind::SockAddr {
            addr: 4,
            len: 5,
            follow: true,
        },
    ),
    (
        Sys::Getsockname,
        Kind::SockName {
            addr: 1,
            len: 2,
            peer: false,
        },
    ),
    (
        Sys::Getpeername,
        Kind::SockName {
            addr: 1,
            len: 2,
            peer: true,
        },
    ),
    (Sys::Sendmsg, Kind::SendMsg),
    (Sys::Sendmmsg, Kind::SendMmsg),
    (Sys::Clone, Kind::Clone),
    (
        Sys::OpenByHandleAt,
        Kind::OpenByHandle {
            mount_fd: 0,
            handle: 1,
        },
    ),
    (Sys::Bpf, Kind::Bpf),
    (Sys::PerfEventOpen, Kind::PerfEventOpen),
    (Sys::Getuid, Kind::Identity),
    (Sys::Geteuid, Kind::Identity),
    (Sys::Getgid, Kind::Identity),
    (Sys::Getegid, Kind::Identity),
    (Sys::Getresuid, Kind::Identity),
    (Sys::Getresgid, Kind::Identity),
    (Sys::Getgroups, Kind::Identity),
    (Sys::Uname, Kind::Identity),
    (Sys::Setuid, Kind::Credentials),
    (Sys::Setgid, Kind::Credentials),
    (Sys::Setreuid, Kind::Credentials),
    (Sys::Setregid, Kind::Credentials),
    (Sys::Setgroups, Kind::Credentials),
    (Sys::Setresuid, Kind::Credentials),
    (Sys::Setresgid, Kind::Credentials),
    (Sys::Setfsuid, Kind::Credentials),
    (Sys::Setfsgid, Kind::Credentials),
    (Sys::Capset, Kind::Credentials),
    // Only the options that lower capabilities (see `tracer::id_rule`).
    (Sys::Prctl, Kind::Credentials),
    (Sys::Mount, Kind::Refuse(libc::EPERM)),
    (Sys::Umount2, Kind::Refuse(libc::EPERM)),
    (Sys::PivotRoot, Kind::Refuse(libc::EPERM)),
    (Sys::Swapon, Kind::Refuse(libc::EPERM)),
    (Sys::Swapoff, Kind::Refuse(libc::EPERM)),
    (Sys::Acct, Kind::Refuse(libc::EPERM)),
    (Sys::Quotactl, Kind::Refuse(libc::EPERM)),
    (Sys::OpenTree, Kind::Refuse(libc::EPERM)),
    (Sys::OpenTreeAttr, Kind::Refuse(libc::EPERM)),
    (Sys::MoveMount, Kind::Refuse(libc::EPERM)),
    (Sys::Fsopen, Kind::Refuse(libc::EPERM)),
    (Sys::Fsconfig, Kind::Refuse(libc::EPERM)),
    (Sys::Fsmount, Kind::Refuse(libc::EPERM)),
    (Sys::Fspick, Kind::Refuse(libc::EPERM)),
    (Sys::MountSetattr, Kind::Refuse(libc::EPERM)),
    (Sys::IoUringSetup, Kind::Refuse(libc::ENOSYS)),
    // The calls aimed at other processes (`crate::guard` keeps roost's own out of reach).
    // kill and rt_sigqueueinfo take a thread's id too (and signal its whole process), but
    // trapping every one naming another process would cost it a notification and, in a
    // process roost does not trace, an EINTR when a signal comes first: roost's ids are
    // compared only (docs/security.md).
    (Sys::Kill, aimed(Aim::Ids(&[0]), None, TrapWhen::Never)),
    (Sys::Tkill, aimed(Aim::Ids(&[0]), None, TrapWhen::Always)),
    (Sys::Tgkill, aimed(Aim::Ids(&[0]), None, TrapWhen::Never)),
    (
        Sys::RtSigqueueinfo,
        aimed(Aim::Ids(&[0]), None, TrapWhen::Never),
    ),
    (
        Sys::RtTgsigqueueinfo,
        aimed(Aim::Ids(&[0]), None, TrapWhen::Never),
    ),
    (
        Sys::Prlimit64,
        aimed(Aim::Ids(&[0]), None, TrapWhen::Always),
    ),
    (
        Sys::PidfdOpen,
        aimed(Aim::Ids(&[0]), None, TrapWhen::IfBits(1, PIDFD_THREAD)),
    ),
    (
        Sys::Ptrace,
        aimed(Aim::Ids(&[1]), Some((0, ATTACHING)), BY_PTRACE_CHECK),
    ),
    (
        Sys::ProcessVmReadv,
        aimed(Aim::Ids(&[0]), None, BY_PTRACE_CHECK),
    ),
    (
        Sys::ProcessVmWritev,
        aimed(Aim::Ids(&[0]), None, BY_PTRACE_CHECK),
    ),
    (Sys::Kcmp, aimed(Aim::Ids(&[0, 1]), None, BY_PTRACE_CHECK)),
    (
        Sys::GetRobustList,
        aimed(Aim::Ids(&[0]), None, BY_PTRACE_CHECK),
    ),
    (
        Sys::PidfdSendSignal,
        aimed(Aim::Pidfd(0), None, TrapWhen::Always),
    ),
    (Sys::PidfdGetfd, aimed(Aim::Pidfd(0), None, BY_PTRACE_CHECK)),
    (
        Sys::ProcessMadvise,
        aimed(Aim::Pidfd(0), None, BY_PTRACE_CHECK),
    ),
    (
        Sys::Fcntl,
        aimed(Aim::Owner, Some((1, FCNTL_OWNERS)), TrapWhen::Always),
    ),
    (
        Sys::Ioctl,
        aimed(Aim::Owner, Some((1, IOCTL_OWNERS)), TrapWhen::Always),
    ),
    // A socket's peer as a pidfd: roost is the peer of a direct-mode file's placeholder
    // socket. Refused as by kernels before 6.5, which lack it (programs fall back to
    // SO_PEERCRED).
    (
        Sys::Getsockopt,
        Kind::RefuseIf {
            args: &[(1, libc::SOL_SOCKET as u32), (2, SO_PEERPIDFD)],
            errno: libc::ENOPROTOOPT,
        },
    ),
];

const fn aimed(aim: Aim, only: Option<(usize, &'static [u32])>, trapped: TrapWhen) -> Kind {
    Kind::Aimed(Aimed { aim, only, trapped })
}

const BY_PTRACE_CHECK: TrapWhen = TrapWhen::WithPtraceCapability;
/// `PTRACE_ATTACH` and `PTRACE_SEIZE`: every other request needs a tracee already.
const ATTACHING: &[u32] = &[16, 0x4206];
/// `pidfd_open`'s flag for a pidfd of one thread, whose id may be any thread's.
const PIDFD_THREAD: u32 = libc::O_EXCL as u32;
/// fcntl's `F_SETOWN` and `F_SETOWN_EX`.
pub const FCNTL_OWNERS: &[u32] = &[8, 15];
/// ioctl's `FIOSETOWN` and `SIOCSPGRP` (sockets).
pub const IOCTL_OWNERS: &[u32] = &[0x8901, 0x8902];
/// `SO_PEERPIDFD` (Linux 6.5; newer than the libc crate).
const SO_PEERPIDFD: u32 = 77;

/// The path argument of chroot.
pub const CHROOT_PATH: &[PathArg] = &[cwd(0, Always)];

/// The spec of a syscall by name.
pub fn spec(sys: Sys) -> Option<Kind> {
    SPECS.iter().find(|(s, _)| *s == sys).map(|&(_, k)| k)
}

/// What the notification thread does with a call delivered to it (a call on a mapped path;
/// one that passes is answered `CONTINUE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Performed {
    /// A lookup made on the physical path, its answer written into the caller's buffer
    /// (stat family, access, readlink).
    Lookup,
    /// An open made by roost, the descriptor handed over (`open::emulate`).
    Open,
    /// A name-space or attribute change made by roost (`change::perform`).
    Change,
    /// A call made with the caller's buffers copied in and out (xattrs, statfs, utime).
    Attr,
    /// A socket's name asked of roost's copy of the descriptor, written logically when it
    /// names a mapped path (getsockname, getpeername; `supervisor::sockname`).
    Name,
    /// An exec let through when nothing in it is mapped (`supervisor::exec`); one that must be
    /// rewritten is sent back to take a ptrace stop.
    Exec,
}

/// Marks a call that must take a ptrace stop: the high half of an argument register the
/// kernel reads as an `int` or not at all ("rost", [`mark_arg`]). roost sets it when it
/// sends a call back from its notification to a stop (`supervisor::send_back`); it stays while
/// the call runs (the kernel runs the filter again after the stop) and the exit stop puts
/// the register back as the program had it. A program that sets it itself takes the stop,
/// or, in a process roost does not trace, fails with ENOSYS.
pub const BY_PTRACE: u32 = 0x726f_7374;

/// The argument of trapped call `name` whose high half carries [`BY_PTRACE`]: the sixth,
/// unused or an `int` for every trapped call but setxattrat and getxattrat, which read it
/// as a size (their first, a dirfd, is an `int`).
pub fn mark_arg(sys: Sys) -> usize {
    match sys {
        Sys::Setxattrat | Sys::Getxattrat => 0,
        _ => 5,
    }
}

/// When a notified call takes a ptrace stop instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unless {
    /// The `int` argument `arg` has one of `bits` set.
    AnyBit { arg: usize, bits: u32 },
    /// The high half of argument `arg` is `value`.
    Is { arg: usize, value: u32 },
}

/// How a trapped call reaches the agent when notifications are in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Notified {
    pub performed: Performed,
    /// When a ptrace stop comes instead: an O_PATH open (the kernel will not hand such a
    /// descriptor to another process), a linkat with AT_EMPTY_PATH (it names the caller's
    /// descriptor), an exec marked [`BY_PTRACE`].
    pub unless: Option<Unless>,
}

const BY_NOTIFICATION_UNLESS_MARKED: Notified = Notified {
    performed: Performed::Exec,
    unless: Some(Unless::Is {
        arg: 5,
        value: BY_PTRACE,
    }),
};

const fn notified(performed: Performed) -> Notified {
    Notified {
        performed,
        unless: None,
    }
}

/// The calls delivered as seccomp notifications, and what the supervisor does with them.
/// Every other trapped call takes a ptrace stop: openat2 keeps its flags in memory the
/// filter cannot read; the *xattrat calls have struct arguments; inotify/fanotify marks and
/// name_to_handle_at act on the caller's descriptors; chdir, getcwd, chroot and the socket
/// calls that send an address need ptrace, and so does an exec roost must rewrite.
pub const NOTIFIED: &[(Sys, Notified)] = &[
    (Sys::Execve, BY_NOTIFICATION_UNLESS_MARKED),
    (Sys::Getsockname, notified(Performed::Name)),
    (Sys::Getpeername, notified(Performed::Name)),
    (Sys::Execveat, BY_NOTIFICATION_UNLESS_MARKED),
    (Sys::Stat, notified(Performed::Lookup)),
    (Sys::Lstat, notified(Performed::Lookup)),
    (Sys::Newfstatat, notified(Performed::Lookup)),
    (Sys::Statx, notified(Performed::Lookup)),
    (Sys::Access, notified(Performed::Lookup)),
    (Sys::Faccessat, notified(Performed::Lookup)),
    (Sys::Faccessat2, notified(Performed::Lookup)),
    (Sys::Readlink, notified(Performed::Lookup)),
    (Sys::Readlinkat, notified(Performed::Lookup)),
    (Sys::Creat, notified(Performed::Open)),
    (
        Sys::Open,
        Notified {
            performed: Performed::Open,
            unless: Some(Unless::AnyBit {
                arg: 1,
                bits: libc::O_PATH as u32,
            }),
        },
    ),
    (
        Sys::Openat,
        Notified {
            performed: Performed::Open,
            unless: Some(Unless::AnyBit {
                arg: 2,
                bits: libc::O_PATH as u32,
            }),
        },
    ),
    (Sys::Mkdir, notified(Performed::Change)),
    (Sys::Mkdirat, notified(Performed::Change)),
    (Sys::Mknod, notified(Performed::Change)),
    (Sys::Mknodat, notified(Performed::Change)),
    (Sys::Rmdir, notified(Performed::Change)),
    (Sys::Unlink, notified(Performed::Change)),
    (Sys::Unlinkat, notified(Performed::Change)),
    (Sys::Rename, notified(Performed::Change)),
    (Sys::Renameat, notified(Performed::Change)),
    (Sys::Renameat2, notified(Performed::Change)),
    (Sys::Link, notified(Performed::Change)),
    (
        Sys::Linkat,
        Notified {
            performed: Performed::Change,
            unless: Some(Unless::AnyBit {
                arg: 4,
                bits: AT_EMPTY_PATH as u32,
            }),
        },
    ),
    (Sys::Symlink, notified(Performed::Change)),
    (Sys::Symlinkat, notified(Performed::Change)),
    (Sys::Chmod, notified(Performed::Change)),
    (Sys::Fchmodat, notified(Performed::Change)),
    (Sys::Fchmodat2, notified(Performed::Change)),
    (Sys::Chown, notified(Performed::Change)),
    (Sys::Lchown, notified(Performed::Change)),
    (Sys::Fchownat, notified(Performed::Change)),
    (Sys::Truncate, notified(Performed::Change)),
    (Sys::Getxattr, notified(Performed::Attr)),
    (Sys::Lgetxattr, notified(Performed::Attr)),
    (Sys::Listxattr, notified(Performed::Attr)),
    (Sys::Llistxattr, notified(Performed::Attr)),
    (Sys::Setxattr, notified(Performed::Attr)),
    (Sys::Lsetxattr, notified(Performed::Attr)),
    (Sys::Removexattr, notified(Performed::Attr)),
    (Sys::Lremovexattr, notified(Performed::Attr)),
    (Sys::Statfs, notified(Performed::Attr)),
    (Sys::Utime, notified(Performed::Attr)),
    (Sys::Utimes, notified(Performed::Attr)),
    (Sys::Futimesat, notified(Performed::Attr)),
    (Sys::Utimensat, notified(Performed::Attr)),
];

/// The calls on descriptors a direct-mode file needs served, with the argument holding
/// the descriptor: trapped (as notifications) only when that argument lies in the range
/// reserved for virtual descriptors, so calls on the program's own descriptors never stop
/// (see `vfd`). `close` and `close_range` are not among them: the kernel drops the
/// placeholder, and roost sees its socket hang up.
pub const ON_DESCRIPTORS: &[(Sys, &[usize])] = &[
    (Sys::Read, &[0]),
    (Sys::Write, &[0]),
    (Sys::Pread64, &[0]),
    (Sys::Pwrite64, &[0]),
    (Sys::Readv, &[0]),
    (Sys::Writev, &[0]),
    (Sys::Preadv, &[0]),
    (Sys::Pwritev, &[0]),
    (Sys::Preadv2, &[0]),
    (Sys::Pwritev2, &[0]),
    (Sys::Lseek, &[0]),
    (Sys::Fstat, &[0]),
    (Sys::Ftruncate, &[0]),
    (Sys::Fsync, &[0]),
    (Sys::Fdatasync, &[0]),
    (Sys::Fchmod, &[0]),
    (Sys::Fchown, &[0]),
    (Sys::Fcntl, &[0]),
    (Sys::Flock, &[0]),
    (Sys::Dup, &[0]),
    (Sys::Dup2, &[0]),
    (Sys::Dup3, &[0]),
    (Sys::Fstatfs, &[0]),
    (Sys::Mmap, &[4]),
    (Sys::Fgetxattr, &[0]),
    (Sys::Fsetxattr, &[0]),
    (Sys::Flistxattr, &[0]),
    (Sys::Fremovexattr, &[0]),
    (Sys::Fadvise64, &[0]),
    (Sys::Readahead, &[0]),
    (Sys::Fallocate, &[0]),
    (Sys::SyncFileRange, &[0]),
    (Sys::Sendfile, &[1, 0]),
    (Sys::Splice, &[0, 2]),
    (Sys::Tee, &[0, 1]),
    (Sys::CopyFileRange, &[0, 2]),
    (Sys::Vmsplice, &[0]),
];

/// One trapped call: its name, what it is, and how notifications deliver it (`None`: a
/// ptrace stop always).
#[derive(Clone, Copy, Debug)]
pub struct Trapped {
    pub sys: Sys,
    pub kind: Kind,
    pub notified: Option<Notified>,
}

/// A syscall-number-indexed view of [`SPECS`] and [`NOTIFIED`], built once at start: the
/// one place both delivery paths learn what a trapped call is.
pub struct Table {
    by_nr: Vec<Option<Trapped>>,
    /// [`ON_DESCRIPTORS`] by number: the name and the descriptor argument.
    on_descriptors: Vec<Option<(Sys, &'static [usize])>>,
}

impl Table {
    /// Whether call `nr`, when notifications deliver it, must never end in EINTR: every
    /// notified call but the opens (a FIFO's open is interrupted natively), the id queries,
    /// the id changes and the calls aimed at processes (a kill never fails so natively).
    pub fn restarts_when_notified(&self, nr: i64) -> bool {
        self.entry(nr).is_some_and(|e| match e.notified {
            Some(n) => n.performed != Performed::Open,
            None => matches!(e.kind, Kind::Identity | Kind::Credentials | Kind::Aimed(_)),
        })
    }

    pub fn new() -> Table {
        let mut by_nr = vec![None; 1024];
        for &(sys, kind) in SPECS {
            let notified = NOTIFIED.iter().find(|(n, _)| *n == sys).map(|&(_, d)| d);
            by_nr[sys.nr() as usize] = Some(Trapped {
                sys,
                kind,
                notified,
            });
        }
        let mut on_descriptors = vec![None; 1024];
        for &(sys, fd) in ON_DESCRIPTORS {
            on_descriptors[sys.nr() as usize] = Some((sys, fd));
        }
        Table {
            by_nr,
            on_descriptors,
        }
    }

    /// A call on a descriptor that direct mode serves: its name and descriptor argument.
    pub fn on_descriptor(&self, nr: i64) -> Option<(Sys, &'static [usize])> {
        usize::try_from(nr)
            .ok()
            .and_then(|i| self.on_descriptors.get(i).copied().flatten())
    }

    /// Every call of [`ON_DESCRIPTORS`] with its number and descriptor argument.
    pub fn descriptor_calls(&self) -> impl Iterator<Item = (u32, &'static [usize])> + '_ {
        self.on_descriptors
            .iter()
            .enumerate()
            .filter_map(|(nr, e)| e.map(|(_, fd)| (nr as u32, fd)))
    }

    /// The name and kind of a trapped call.
    pub fn get(&self, nr: i64) -> Option<(Sys, Kind)> {
        self.entry(nr).map(|e| (e.sys, e.kind))
    }

    pub fn entry(&self, nr: i64) -> Option<Trapped> {
        usize::try_from(nr)
            .ok()
            .and_then(|i| self.by_nr.get(i).copied().flatten())
    }

    /// Every entry with its number, for the seccomp filter.
    pub fn entries(&self) -> impl Iterator<Item = (u32, Trapped)> + '_ {
        self.by_nr
            .iter()
            .enumerate()
            .filter_map(|(nr, e)| e.map(|e| (nr as u32, e)))
    }
}

impl Default for Table {
    fn default() -> Self {
        Table::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spec_has_a_number() {
        let t = Table::new();
        assert_eq!(t.entries().count(), SPECS.len());
        assert!(matches!(t.get(257), Some((Sys::Openat, Kind::Path { .. }))));
        assert_eq!(t.get(39), None, "getpid is not trapped");
    }

    #[test]
    fn descriptor_calls_take_no_path_and_are_not_trapped_otherwise() {
        let t = Table::new();
        for &(name, _) in ON_DESCRIPTORS {
            let nr = name.nr();
            // fcntl is trapped too when it sets a file's owner (`crate::guard`).
            let entry = t.entry(nr).map(|e| e.kind);
            assert!(
                entry.is_none() || matches!(entry, Some(Kind::Aimed(_))),
                "{name:?} is also a trapped call"
            );
            assert_eq!(t.on_descriptor(nr).map(|d| d.0), Some(name));
        }
        assert_eq!(t.on_descriptor(9), Some((Sys::Mmap, &[4][..])));
    }

    #[test]
    fn every_notified_call_is_in_the_table() {
        let t = Table::new();
        for (name, d) in NOTIFIED {
            let nr = name.nr();
            assert_eq!(t.entry(nr).and_then(|e| e.notified), Some(*d), "{name:?}");
        }
        let mkdir = Sys::Mkdir.nr();
        assert_eq!(
            t.entry(mkdir).unwrap().notified.unwrap().performed,
            Performed::Change
        );
        let exec = Sys::Execve.nr();
        assert_eq!(
            t.entry(exec).unwrap().notified.unwrap().performed,
            Performed::Exec
        );
        let chdir = Sys::Chdir.nr();
        assert_eq!(t.entry(chdir).unwrap().notified, None);
    }
}
