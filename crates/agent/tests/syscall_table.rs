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
        let nr = arch::number(name).unwrap_or_else(|| panic!("{name}: no number in arch"));
        if let Some(&k) = kernel.get(*name) {
            assert_eq!(nr, k, "{name}: arch number differs from the kernel header");
        }
        let kind = spec(name).unwrap_or_else(|| panic!("{name}: neither handled nor refused"));
        assert_eq!(table.get(nr).map(|(n, _)| n), Some(*name));
        if let Kind::Refuse(e) = kind {
            assert!(
                e == libc::EPERM || e == libc::ENOSYS,
                "{name} refused with {e}"
            );
        }
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
    // programs fall back to plain I/O, or a rare credential change the agent notes): no hot
    // non-path call costs a stop.
    for (nr, kind) in Table::new().entries() {
        let name = arch::NUMBERS
            .iter()
            .find(|(_, n)| *n == i64::from(nr))
            .unwrap()
            .0;
        assert!(
            PATH_SYSCALLS.contains(&name) || name == "io_uring_setup" || kind == Kind::Credentials,
            "{name} is trapped but takes no path"
        );
    }
}
