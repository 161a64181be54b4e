//! x86-64: the register file as ptrace sees it, the syscall ABI (number in `orig_rax`,
//! arguments in rdi, rsi, rdx, r10, r8, r9, result in rax, a 2-byte `syscall` instruction) and
//! the syscall numbers the agent names.

use std::io;

/// `AUDIT_ARCH_X86_64`, checked first by the seccomp filter.
pub const AUDIT_ARCH: u32 = 0xC000_003E;
/// x32 syscalls carry this bit; the filter refuses them.
pub const FOREIGN_SYSCALL_BIT: u32 = 0x4000_0000;
/// The highest syscall number reviewed for paths (Linux 6.18: file_setattr). The filter
/// refuses anything above with ENOSYS, so a path syscall of a newer kernel never passes
/// untranslated; programs fall back as on an older kernel.
pub const REVIEWED_MAX: u32 = 469;
/// Length of the `syscall` instruction (to re-execute a syscall).
const SYSCALL_INSN_LEN: u64 = 2;

/// A stopped thread's registers.
#[derive(Clone)]
pub struct Regs(libc::user_regs_struct);

impl Regs {
    /// Reads the registers of a ptrace-stopped thread.
    pub fn get(pid: i32) -> io::Result<Regs> {
        // SAFETY: the kernel fills the plain-data struct.
        let mut r: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        let rc = unsafe { libc::ptrace(libc::PTRACE_GETREGS, pid, 0, &mut r as *mut _) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Regs(r))
    }

    /// A register file of zeros, to build syscalls in unit tests.
    pub fn zeroed() -> Regs {
        // SAFETY: plain data; all-zero is a valid value.
        Regs(unsafe { std::mem::zeroed() })
    }

    /// The registers of a call known only by its arguments (a seccomp notification's).
    pub fn from_args(args: &[u64; 6]) -> Regs {
        let mut regs = Regs::zeroed();
        for (i, a) in args.iter().enumerate() {
            regs.set_arg(i, *a);
        }
        regs
    }

    /// Writes them back.
    pub fn set(&self, pid: i32) -> io::Result<()> {
        // SAFETY: the struct is valid for reading by the kernel.
        let rc = unsafe { libc::ptrace(libc::PTRACE_SETREGS, pid, 0, &self.0 as *const _) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// The syscall number (at a seccomp or syscall stop).
    pub fn nr(&self) -> i64 {
        self.0.orig_rax as i64
    }

    pub fn set_nr(&mut self, nr: i64) {
        self.0.orig_rax = nr as u64;
    }

    pub fn arg(&self, i: usize) -> u64 {
        let r = &self.0;
        [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9][i]
    }

    pub fn set_arg(&mut self, i: usize, v: u64) {
        let r = &mut self.0;
        let slot = match i {
            0 => &mut r.rdi,
            1 => &mut r.rsi,
            2 => &mut r.rdx,
            3 => &mut r.r10,
            4 => &mut r.r8,
            _ => &mut r.r9,
        };
        *slot = v;
    }

    /// The syscall result (at a syscall-exit stop).
    pub fn ret(&self) -> i64 {
        self.0.rax as i64
    }

    pub fn set_ret(&mut self, v: i64) {
        self.0.rax = v as u64;
    }

    /// Makes the thread skip the syscall and see `ret` as its result (at a seccomp stop).
    pub fn skip_with(&mut self, ret: i64) {
        self.0.orig_rax = u64::MAX;
        self.0.rax = ret as u64;
    }

    /// Rewinds to re-execute the syscall `nr` (at a syscall-exit stop).
    pub fn restart(&mut self, nr: i64) {
        self.0.rip -= SYSCALL_INSN_LEN;
        self.0.rax = nr as u64;
        self.0.orig_rax = nr as u64;
    }
}

/// Syscall numbers the agent's tables name. Sources: `asm/unistd_64.h` of Linux 6.18.
pub const NUMBERS: &[(&str, i64)] = &[
    ("read", 0),
    ("write", 1),
    ("open", 2),
    ("stat", 4),
    ("fstat", 5),
    ("lstat", 6),
    ("lseek", 8),
    ("mmap", 9),
    ("ioctl", 16),
    ("pread64", 17),
    ("pwrite64", 18),
    ("readv", 19),
    ("writev", 20),
    ("access", 21),
    ("dup", 32),
    ("dup2", 33),
    ("sendfile", 40),
    ("connect", 42),
    ("sendto", 44),
    ("sendmsg", 46),
    ("bind", 49),
    ("getsockname", 51),
    ("getpeername", 52),
    ("getsockopt", 55),
    ("clone", 56),
    ("fork", 57),
    ("vfork", 58),
    ("execve", 59),
    ("kill", 62),
    ("uname", 63),
    ("fcntl", 72),
    ("flock", 73),
    ("fsync", 74),
    ("fdatasync", 75),
    ("truncate", 76),
    ("ftruncate", 77),
    ("getdents", 78),
    ("getcwd", 79),
    ("chdir", 80),
    ("fchdir", 81),
    ("rename", 82),
    ("mkdir", 83),
    ("rmdir", 84),
    ("creat", 85),
    ("link", 86),
    ("unlink", 87),
    ("symlink", 88),
    ("readlink", 89),
    ("chmod", 90),
    ("fchmod", 91),
    ("chown", 92),
    ("fchown", 93),
    ("lchown", 94),
    ("ptrace", 101),
    ("getuid", 102),
    ("getgid", 104),
    ("setuid", 105),
    ("setgid", 106),
    ("geteuid", 107),
    ("getegid", 108),
    ("setreuid", 113),
    ("setregid", 114),
    ("getgroups", 115),
    ("setgroups", 116),
    ("setresuid", 117),
    ("getresuid", 118),
    ("setresgid", 119),
    ("getresgid", 120),
    ("setfsuid", 122),
    ("setfsgid", 123),
    ("capset", 126),
    ("rt_sigqueueinfo", 129),
    ("utime", 132),
    ("mknod", 133),
    ("uselib", 134),
    ("statfs", 137),
    ("fstatfs", 138),
    ("pivot_root", 155),
    ("prctl", 157),
    ("chroot", 161),
    ("acct", 163),
    ("mount", 165),
    ("umount2", 166),
    ("swapon", 167),
    ("swapoff", 168),
    ("quotactl", 179),
    ("readahead", 187),
    ("setxattr", 188),
    ("lsetxattr", 189),
    ("fsetxattr", 190),
    ("getxattr", 191),
    ("lgetxattr", 192),
    ("fgetxattr", 193),
    ("listxattr", 194),
    ("llistxattr", 195),
    ("flistxattr", 196),
    ("removexattr", 197),
    ("lremovexattr", 198),
    ("fremovexattr", 199),
    ("tkill", 200),
    ("getdents64", 217),
    ("fadvise64", 221),
    ("tgkill", 234),
    ("utimes", 235),
    ("inotify_add_watch", 254),
    ("openat", 257),
    ("mkdirat", 258),
    ("mknodat", 259),
    ("fchownat", 260),
    ("futimesat", 261),
    ("newfstatat", 262),
    ("unlinkat", 263),
    ("renameat", 264),
    ("linkat", 265),
    ("symlinkat", 266),
    ("readlinkat", 267),
    ("fchmodat", 268),
    ("faccessat", 269),
    ("get_robust_list", 274),
    ("splice", 275),
    ("tee", 276),
    ("sync_file_range", 277),
    ("vmsplice", 278),
    ("utimensat", 280),
    ("fallocate", 285),
    ("dup3", 292),
    ("preadv", 295),
    ("pwritev", 296),
    ("rt_tgsigqueueinfo", 297),
    ("perf_event_open", 298),
    ("fanotify_mark", 301),
    ("prlimit64", 302),
    ("name_to_handle_at", 303),
    ("open_by_handle_at", 304),
    ("sendmmsg", 307),
    ("process_vm_readv", 310),
    ("process_vm_writev", 311),
    ("kcmp", 312),
    ("renameat2", 316),
    ("bpf", 321),
    ("execveat", 322),
    ("copy_file_range", 326),
    ("preadv2", 327),
    ("pwritev2", 328),
    ("statx", 332),
    ("pidfd_send_signal", 424),
    ("io_uring_setup", 425),
    ("open_tree", 428),
    ("move_mount", 429),
    ("fsopen", 430),
    ("fsconfig", 431),
    ("fsmount", 432),
    ("fspick", 433),
    ("pidfd_open", 434),
    ("clone3", 435),
    ("openat2", 437),
    ("pidfd_getfd", 438),
    ("faccessat2", 439),
    ("process_madvise", 440),
    ("mount_setattr", 442),
    ("fchmodat2", 452),
    ("setxattrat", 463),
    ("getxattrat", 464),
    ("listxattrat", 465),
    ("removexattrat", 466),
    ("open_tree_attr", 467),
    ("file_getattr", 468),
    ("file_setattr", 469),
];

/// The name of a syscall number, if the table knows it.
pub fn name(nr: i64) -> Option<&'static str> {
    NUMBERS
        .iter()
        .find(|&&(_, n)| n == nr)
        .map(|&(name, _)| name)
}

/// The number of a named syscall, if the table knows it.
pub fn number(name: &str) -> Option<i64> {
    NUMBERS.iter().find(|(n, _)| *n == name).map(|&(_, nr)| nr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for (name, nr) in NUMBERS {
            assert!(seen.insert(nr), "{name} reuses {nr}");
        }
        assert_eq!(number("openat2"), Some(437));
    }
}
