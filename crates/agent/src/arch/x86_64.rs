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

/// Declares [`Sys`] from `Variant = "name" number` rows.
macro_rules! syscalls {
    ($($variant:ident = $name:literal $nr:literal,)*) => {
        /// Every syscall the agent names, with its x86-64 number and its name (for traces
        /// and messages): the one place a syscall is spelt as a string.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Sys {
            $($variant,)*
        }

        impl Sys {
            /// Every syscall of the table.
            pub const ALL: &'static [Sys] = &[$(Sys::$variant,)*];

            /// Its number.
            pub const fn nr(self) -> i64 {
                match self {
                    $(Sys::$variant => $nr,)*
                }
            }

            /// Its name, as `strace` spells it.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Sys::$variant => $name,)*
                }
            }

            /// The syscall of number `nr`, if the table names it.
            pub const fn from_nr(nr: i64) -> Option<Sys> {
                match nr {
                    $($nr => Some(Sys::$variant),)*
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for Sys {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

// Sources: `asm/unistd_64.h` of Linux 6.18.
syscalls! {
    Read = "read" 0,
    Write = "write" 1,
    Open = "open" 2,
    Stat = "stat" 4,
    Fstat = "fstat" 5,
    Lstat = "lstat" 6,
    Lseek = "lseek" 8,
    Mmap = "mmap" 9,
    Ioctl = "ioctl" 16,
    Pread64 = "pread64" 17,
    Pwrite64 = "pwrite64" 18,
    Readv = "readv" 19,
    Writev = "writev" 20,
    Access = "access" 21,
    Dup = "dup" 32,
    Dup2 = "dup2" 33,
    Sendfile = "sendfile" 40,
    Connect = "connect" 42,
    Sendto = "sendto" 44,
    Sendmsg = "sendmsg" 46,
    Bind = "bind" 49,
    Getsockname = "getsockname" 51,
    Getpeername = "getpeername" 52,
    Getsockopt = "getsockopt" 55,
    Clone = "clone" 56,
    Fork = "fork" 57,
    Vfork = "vfork" 58,
    Execve = "execve" 59,
    Kill = "kill" 62,
    Uname = "uname" 63,
    Fcntl = "fcntl" 72,
    Flock = "flock" 73,
    Fsync = "fsync" 74,
    Fdatasync = "fdatasync" 75,
    Truncate = "truncate" 76,
    Ftruncate = "ftruncate" 77,
    Getdents = "getdents" 78,
    Getcwd = "getcwd" 79,
    Chdir = "chdir" 80,
    Fchdir = "fchdir" 81,
    Rename = "rename" 82,
    Mkdir = "mkdir" 83,
    Rmdir = "rmdir" 84,
    Creat = "creat" 85,
    Link = "link" 86,
    Unlink = "unlink" 87,
    Symlink = "symlink" 88,
    Readlink = "readlink" 89,
    Chmod = "chmod" 90,
    Fchmod = "fchmod" 91,
    Chown = "chown" 92,
    Fchown = "fchown" 93,
    Lchown = "lchown" 94,
    Ptrace = "ptrace" 101,
    Getuid = "getuid" 102,
    Getgid = "getgid" 104,
    Setuid = "setuid" 105,
    Setgid = "setgid" 106,
    Geteuid = "geteuid" 107,
    Getegid = "getegid" 108,
    Setreuid = "setreuid" 113,
    Setregid = "setregid" 114,
    Getgroups = "getgroups" 115,
    Setgroups = "setgroups" 116,
    Setresuid = "setresuid" 117,
    Getresuid = "getresuid" 118,
    Setresgid = "setresgid" 119,
    Getresgid = "getresgid" 120,
    Setfsuid = "setfsuid" 122,
    Setfsgid = "setfsgid" 123,
    Capset = "capset" 126,
    RtSigqueueinfo = "rt_sigqueueinfo" 129,
    Utime = "utime" 132,
    Mknod = "mknod" 133,
    Uselib = "uselib" 134,
    Statfs = "statfs" 137,
    Fstatfs = "fstatfs" 138,
    PivotRoot = "pivot_root" 155,
    Prctl = "prctl" 157,
    Chroot = "chroot" 161,
    Acct = "acct" 163,
    Mount = "mount" 165,
    Umount2 = "umount2" 166,
    Swapon = "swapon" 167,
    Swapoff = "swapoff" 168,
    Quotactl = "quotactl" 179,
    Readahead = "readahead" 187,
    Setxattr = "setxattr" 188,
    Lsetxattr = "lsetxattr" 189,
    Fsetxattr = "fsetxattr" 190,
    Getxattr = "getxattr" 191,
    Lgetxattr = "lgetxattr" 192,
    Fgetxattr = "fgetxattr" 193,
    Listxattr = "listxattr" 194,
    Llistxattr = "llistxattr" 195,
    Flistxattr = "flistxattr" 196,
    Removexattr = "removexattr" 197,
    Lremovexattr = "lremovexattr" 198,
    Fremovexattr = "fremovexattr" 199,
    Tkill = "tkill" 200,
    Getdents64 = "getdents64" 217,
    Fadvise64 = "fadvise64" 221,
    Tgkill = "tgkill" 234,
    Utimes = "utimes" 235,
    InotifyAddWatch = "inotify_add_watch" 254,
    Openat = "openat" 257,
    Mkdirat = "mkdirat" 258,
    Mknodat = "mknodat" 259,
    Fchownat = "fchownat" 260,
    Futimesat = "futimesat" 261,
    Newfstatat = "newfstatat" 262,
    Unlinkat = "unlinkat" 263,
    Renameat = "renameat" 264,
    Linkat = "linkat" 265,
    Symlinkat = "symlinkat" 266,
    Readlinkat = "readlinkat" 267,
    Fchmodat = "fchmodat" 268,
    Faccessat = "faccessat" 269,
    GetRobustList = "get_robust_list" 274,
    Splice = "splice" 275,
    Tee = "tee" 276,
    SyncFileRange = "sync_file_range" 277,
    Vmsplice = "vmsplice" 278,
    Utimensat = "utimensat" 280,
    Fallocate = "fallocate" 285,
    Dup3 = "dup3" 292,
    Preadv = "preadv" 295,
    Pwritev = "pwritev" 296,
    RtTgsigqueueinfo = "rt_tgsigqueueinfo" 297,
    PerfEventOpen = "perf_event_open" 298,
    FanotifyMark = "fanotify_mark" 301,
    Prlimit64 = "prlimit64" 302,
    NameToHandleAt = "name_to_handle_at" 303,
    OpenByHandleAt = "open_by_handle_at" 304,
    Sendmmsg = "sendmmsg" 307,
    ProcessVmReadv = "process_vm_readv" 310,
    ProcessVmWritev = "process_vm_writev" 311,
    Kcmp = "kcmp" 312,
    Renameat2 = "renameat2" 316,
    Bpf = "bpf" 321,
    Execveat = "execveat" 322,
    CopyFileRange = "copy_file_range" 326,
    Preadv2 = "preadv2" 327,
    Pwritev2 = "pwritev2" 328,
    Statx = "statx" 332,
    PidfdSendSignal = "pidfd_send_signal" 424,
    IoUringSetup = "io_uring_setup" 425,
    OpenTree = "open_tree" 428,
    MoveMount = "move_mount" 429,
    Fsopen = "fsopen" 430,
    Fsconfig = "fsconfig" 431,
    Fsmount = "fsmount" 432,
    Fspick = "fspick" 433,
    PidfdOpen = "pidfd_open" 434,
    Clone3 = "clone3" 435,
    Openat2 = "openat2" 437,
    PidfdGetfd = "pidfd_getfd" 438,
    Faccessat2 = "faccessat2" 439,
    ProcessMadvise = "process_madvise" 440,
    MountSetattr = "mount_setattr" 442,
    Fchmodat2 = "fchmodat2" 452,
    Setxattrat = "setxattrat" 463,
    Getxattrat = "getxattrat" 464,
    Listxattrat = "listxattrat" 465,
    Removexattrat = "removexattrat" 466,
    OpenTreeAttr = "open_tree_attr" 467,
    FileGetattr = "file_getattr" 468,
    FileSetattr = "file_setattr" 469,
}

/// The syscall named `name`, if the table knows it (for tests and lists read as text).
pub fn by_name(name: &str) -> Option<Sys> {
    Sys::ALL.iter().copied().find(|s| s.name() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for sys in Sys::ALL {
            assert!(seen.insert(sys.nr()), "{sys:?} reuses {}", sys.nr());
            assert_eq!(Sys::from_nr(sys.nr()), Some(*sys));
            assert_eq!(by_name(sys.name()), Some(*sys));
        }
        assert_eq!(Sys::Openat2.nr(), 437);
    }
}
