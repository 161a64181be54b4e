//! Completeness of the syscall table: every x86-64 syscall that takes a path (or an AF_UNIX
//! socket address) is handled or refused, with the kernel's own numbers. The kernel's table
//! is read from `asm/unistd_64.h`; numbers above the last one reviewed fail the test so new
//! syscalls get classified (until then the filter refuses them with ENOSYS).

use roost_agent::arch;
use roost_agent::syscalls::{spec, Kind, Table};
use std::collections::HashMap;

/// Every path-taking syscall of Linux up to [`REVIEWED_MAX`] (from the man pages: a
/// `pathname`/`filename` argument, a sockaddr that may be AF_UNIX, or a mount-API path).
const PATH_SYSCALLS: &[&str] = &[
    "open",
    "stat",
    "lstat",
    "access",
    "connect",
    "sendto",
    "sendmsg",
    "bind",
    "execve",
    "truncate",
    "getcwd",
    "chdir",
    "fchdir",
    "rename",
    "mkdir",
    "rmdir",
    "creat",
    "link",
    "unlink",
    "symlink",
    "readlink",
    "chmod",
    "chown",
    "lchown",
    "utime",
    "mknod",
    "uselib",
    "statfs",
    "pivot_root",
    "chroot",
    "acct",
    "mount",
    "umount2",
    "swapon",
    "swapoff",
    "quotactl",
    "setxattr",
    "lsetxattr",
    "getxattr",
    "lgetxattr",
    "listxattr",
    "llistxattr",
    "removexattr",
    "lremovexattr",
    "utimes",
    "inotify_add_watch",
    "openat",
    "mkdirat",
    "mknodat",
    "fchownat",
    "futimesat",
    "newfstatat",
    "unlinkat",
    "renameat",
    "linkat",
    "symlinkat",
    "readlinkat",
    "fchmodat",
    "faccessat",
    "utimensat",
    "fanotify_mark",
    "name_to_handle_at",
    "perf_event_open",
    "bpf",
    "sendmmsg",
    "renameat2",
    "execveat",
    "statx",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "openat2",
    "faccessat2",
    "mount_setattr",
    "fchmodat2",
    "setxattrat",
    "getxattrat",
    "listxattrat",
    "removexattrat",
    "open_tree_attr",
    "file_getattr",
    "file_setattr",
];

/// Every other syscall up to [`REVIEWED_MAX`], reviewed as naming no path the namespace
/// must translate: descriptors, memory, signals, ids, and names outside the file tree
/// (`mq_open`, `memfd_create`, `sysfs`). Paths a call only returns (`getsockname`,
/// `accept`, `recvfrom` of an AF_UNIX peer) are not translated.
const NOT_PATH: &str = "
read write close fstat poll lseek mmap mprotect munmap brk rt_sigaction rt_sigprocmask
rt_sigreturn ioctl pread64 pwrite64 readv writev pipe select sched_yield mremap msync
mincore madvise shmget shmat shmctl dup dup2 pause nanosleep getitimer alarm setitimer
getpid sendfile socket accept recvfrom recvmsg shutdown listen getsockname getpeername
socketpair setsockopt getsockopt clone fork vfork exit wait4 kill uname semget semop semctl
shmdt msgget msgsnd msgrcv msgctl fcntl flock fsync fdatasync ftruncate getdents fchmod
fchown umask gettimeofday getrlimit getrusage sysinfo times ptrace getuid syslog getgid
setuid setgid geteuid getegid setpgid getppid getpgrp setsid setreuid setregid getgroups
setgroups setresuid getresuid setresgid getresgid getpgid setfsuid setfsgid getsid capget
capset rt_sigpending rt_sigtimedwait rt_sigqueueinfo rt_sigsuspend sigaltstack personality
ustat fstatfs sysfs getpriority setpriority sched_setparam sched_getparam sched_setscheduler
sched_getscheduler sched_get_priority_max sched_get_priority_min sched_rr_get_interval mlock
munlock mlockall munlockall vhangup modify_ldt _sysctl prctl arch_prctl adjtimex setrlimit
sync settimeofday reboot sethostname setdomainname iopl ioperm create_module init_module
delete_module get_kernel_syms query_module nfsservctl getpmsg putpmsg afs_syscall tuxcall
security gettid readahead fsetxattr fgetxattr flistxattr fremovexattr tkill time futex
sched_setaffinity sched_getaffinity set_thread_area io_setup io_destroy io_getevents
io_submit io_cancel get_thread_area lookup_dcookie epoll_create epoll_ctl_old epoll_wait_old
remap_file_pages getdents64 set_tid_address restart_syscall semtimedop fadvise64
timer_create timer_settime timer_gettime timer_getoverrun timer_delete clock_settime
clock_gettime clock_getres clock_nanosleep exit_group epoll_wait epoll_ctl tgkill vserver
mbind set_mempolicy get_mempolicy mq_open mq_unlink mq_timedsend mq_timedreceive mq_notify
mq_getsetattr kexec_load waitid add_key request_key keyctl ioprio_set ioprio_get
inotify_init inotify_rm_watch migrate_pages pselect6 ppoll unshare set_robust_list
get_robust_list splice tee sync_file_range vmsplice move_pages epoll_pwait signalfd
timerfd_create eventfd fallocate timerfd_settime timerfd_gettime accept4 signalfd4 eventfd2
epoll_create1 dup3 pipe2 inotify_init1 preadv pwritev rt_tgsigqueueinfo recvmmsg
fanotify_init prlimit64 open_by_handle_at clock_adjtime syncfs setns getcpu process_vm_readv
process_vm_writev kcmp finit_module sched_setattr sched_getattr seccomp getrandom
memfd_create kexec_file_load userfaultfd membarrier mlock2 copy_file_range preadv2 pwritev2
pkey_mprotect pkey_alloc pkey_free io_pgetevents rseq pidfd_send_signal io_uring_setup
io_uring_enter io_uring_register pidfd_open clone3 close_range pidfd_getfd process_madvise
epoll_pwait2 quotactl_fd landlock_create_ruleset landlock_add_rule landlock_restrict_self
memfd_secret process_mrelease futex_waitv set_mempolicy_home_node uretprobe cachestat
map_shadow_stack futex_wake futex_wait futex_requeue statmount listmount lsm_get_self_attr
lsm_set_self_attr lsm_list_modules mseal
";

/// The highest syscall number whose path-taking status was reviewed; the filter refuses the
/// ones above.
const REVIEWED_MAX: i64 = arch::REVIEWED_MAX as i64;

fn kernel_table() -> HashMap<String, i64> {
    let text = std::fs::read_to_string("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
        .or_else(|_| std::fs::read_to_string("/usr/include/asm/unistd_64.h"))
        .expect("asm/unistd_64.h (linux-libc-dev)");
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("#define __NR_")?;
            let (name, nr) = rest.split_once(' ')?;
            Some((name.to_string(), nr.trim().parse().ok()?))
        })
        .collect()
}

#[test]
fn every_path_syscall_is_handled_or_refused() {
    let kernel = kernel_table();
    assert!(kernel.len() > 300, "parsed {} syscalls", kernel.len());
    let table = Table::new();
    for name in PATH_SYSCALLS {
        let sys = arch::by_name(name).unwrap_or_else(|| panic!("{name}: no number in arch"));
        let nr = sys.nr();
        if let Some(&k) = kernel.get(*name) {
            assert_eq!(nr, k, "{name}: arch number differs from the kernel header");
        }
        let kind = spec(sys).unwrap_or_else(|| panic!("{name}: neither handled nor refused"));
        assert_eq!(table.get(nr).map(|(n, _)| n), Some(sys));
        if let Kind::Refuse(e) = kind {
            assert!(
                e == libc::EPERM || e == libc::ENOSYS,
                "{name} refused with {e}"
            );
        }
    }
}

#[test]
fn every_syscall_of_the_kernel_table_is_classified_once() {
    let not_path: Vec<&str> = NOT_PATH.split_whitespace().collect();
    for name in &not_path {
        assert!(!PATH_SYSCALLS.contains(name), "{name} is listed as both");
    }
    let mut unclassified: Vec<(i64, String)> = kernel_table()
        .into_iter()
        .filter(|(name, nr)| {
            *nr <= REVIEWED_MAX
                && !PATH_SYSCALLS.contains(&name.as_str())
                && !not_path.contains(&name.as_str())
        })
        .map(|(name, nr)| (nr, name))
        .collect();
    unclassified.sort();
    assert!(
        unclassified.is_empty(),
        "takes a path or not? {unclassified:?}"
    );
    // The agent's own numbers beyond the installed header are classified too.
    for name in arch::Sys::ALL.iter().map(|s| s.name()) {
        assert!(
            PATH_SYSCALLS.contains(&name) || not_path.contains(&name) || name == "io_uring_setup",
            "{name}: unclassified"
        );
    }
}

#[test]
fn no_unreviewed_syscalls_in_the_kernel_table() {
    let kernel = kernel_table();
    let mut new: Vec<_> = kernel.iter().filter(|(_, &nr)| nr > REVIEWED_MAX).collect();
    new.sort_by_key(|(_, &nr)| nr);
    assert!(
        new.is_empty(),
        "classify these syscalls (path or not): {new:?}"
    );
}

#[test]
fn the_table_traps_nothing_that_takes_no_path() {
    // Everything in the table is a reviewed path syscall (or io_uring_setup, refused so
    // programs fall back to plain I/O, a rare credential change the agent notes, the
    // privileged open_by_handle_at, held to DENY, a clone asking for an untraced child,
    // checked by the filter, getsockname/getpeername, which answer a path, or an id query
    // trapped only when roost run is given an identity to show, or a call aimed at another
    // process, which the filter refuses when it names roost by id and traps only when it
    // may name a thread of roost's, or refuses outright, as getsockopt's SO_PEERPIDFD): no
    // hot non-path call costs a stop.
    for (nr, entry) in Table::new().entries() {
        let (name, kind) = (entry.sys.name(), entry.kind);
        assert_eq!(entry.sys.nr(), i64::from(nr));
        assert!(
            PATH_SYSCALLS.contains(&name)
                || name == "io_uring_setup"
                || kind == Kind::Credentials
                || kind == Kind::Identity
                || matches!(
                    kind,
                    Kind::OpenByHandle { .. }
                        | Kind::Clone
                        | Kind::SockName { .. }
                        | Kind::Aimed(_)
                        | Kind::RefuseIf { .. }
                ),
            "{name} is trapped but takes no path"
        );
    }
}
