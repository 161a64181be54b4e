//! A trapped call decoded once: its family, with every argument that is not a path typed
//! and named, whatever spelling the program used (`open`, `creat`, `openat` and `openat2`
//! are one [`Call::Open`]; the stat family one [`Call::Stat`]; ...). The path arguments
//! stay with the syscall table (`syscalls::Kind`), which the resolver reads; everything an
//! executor needs to make the call — locally on a physical path, or on a driver — is here,
//! so no executor looks at a syscall's name or registers again.

use crate::arch::{Regs, Sys};
use crate::memory;
use roost_vfs::Errno;

/// The flags and mode of an open, as `open_how` has them for every spelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Open {
    pub flags: i32,
    pub mode: u32,
    /// openat2's `RESOLVE_*` bits (0 for the others).
    pub resolve: u64,
    /// Where the flags live: in a register, or in openat2's `struct open_how`.
    pub spelt: OpenSpelling,
}

/// Where an open keeps its flags, for a rewrite that must change them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenSpelling {
    /// In this argument register (open: 1, openat: 2).
    Register(usize),
    /// creat: implied by the call (`O_CREAT|O_WRONLY|O_TRUNC`).
    Implied,
    /// openat2: in the `struct open_how` this argument points to.
    How(usize),
}

impl Open {
    /// The open writes or truncates (a copy must be made writable).
    pub fn writes(&self) -> bool {
        self.access() != libc::O_RDONLY || self.flags & libc::O_TRUNC != 0
    }

    pub fn access(&self) -> i32 {
        self.flags & libc::O_ACCMODE
    }

    pub fn creates(&self) -> bool {
        self.flags & libc::O_CREAT != 0
    }

    /// `O_CREAT|O_EXCL`: the name must not exist.
    pub fn exclusive(&self) -> bool {
        self.creates() && self.flags & libc::O_EXCL != 0
    }

    pub fn tmpfile(&self) -> bool {
        self.flags & libc::O_TMPFILE == libc::O_TMPFILE
    }

    /// The open of a local copy a driver made for it: the driver made the file
    /// (exclusively, where asked), so the kernel's open must not insist on making it again.
    pub fn of_copy(&self) -> Open {
        Open {
            flags: self.flags & !libc::O_EXCL,
            ..*self
        }
    }

    /// The flags as `open_how` and the registers carry them.
    pub fn how_flags(&self) -> u64 {
        u64::from(self.flags as u32)
    }

    /// The open may block (a FIFO, a terminal): no `O_NONBLOCK` or `O_PATH`.
    pub fn may_block(&self) -> bool {
        self.flags & (libc::O_NONBLOCK | libc::O_PATH) == 0
    }
}

/// Where a stat writes its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatOut {
    /// A `struct stat` at this address.
    Stat(u64),
    /// A `struct statx` at this address, with the fields asked for.
    Statx { mask: u32, buf: u64 },
}

/// The times utime and its relatives set, as the program spelt them (`NULL`: now).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Times {
    Now,
    /// `struct utimbuf` (utime).
    Utimbuf(u64),
    /// `struct timeval[2]` (utimes, futimesat).
    Timevals(u64),
    /// `struct timespec[2]` with `UTIME_NOW`/`UTIME_OMIT` (utimensat).
    Timespecs(u64),
}

impl Times {
    /// The times as utimensat takes them, read from thread `tid`'s memory (`None`: now,
    /// as `NULL` is). A `timeval`'s microseconds out of range become a nanosecond count
    /// the kernel refuses (EINVAL), as utimes refuses them.
    pub fn read(self, tid: i32) -> Result<Option<[libc::timespec; 2]>, Errno> {
        let words = |addr: u64, n: usize| -> Result<Vec<i64>, Errno> {
            Ok(memory::read_words(tid, addr, n)?
                .into_iter()
                .map(|w| w as i64)
                .collect())
        };
        let at = |tv_sec: i64, tv_nsec: i64| libc::timespec { tv_sec, tv_nsec };
        let from_usec = |usec: i64| {
            if (0..1_000_000).contains(&usec) {
                usec * 1000
            } else {
                -1
            }
        };
        Ok(match self {
            Times::Now => None,
            Times::Utimbuf(addr) => {
                let w = words(addr, 2)?;
                Some([at(w[0], 0), at(w[1], 0)])
            }
            Times::Timevals(addr) => {
                let w = words(addr, 4)?;
                Some([at(w[0], from_usec(w[1])), at(w[2], from_usec(w[3]))])
            }
            Times::Timespecs(addr) => {
                let w = words(addr, 4)?;
                Some([at(w[0], w[1]), at(w[2], w[3])])
            }
        })
    }
}

/// What an xattr call does, with its buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XattrOp {
    Get {
        name: u64,
        buf: u64,
        size: u64,
    },
    List {
        buf: u64,
        size: u64,
    },
    Set {
        name: u64,
        value: u64,
        size: u64,
        flags: i32,
    },
    Remove {
        name: u64,
    },
}

/// A trapped call's family and its non-path arguments. `flags` fields hold the `AT_*`
/// flags the call takes (0 for a spelling without them, `AT_SYMLINK_NOFOLLOW` for the `l*`
/// spellings), so an executor makes the `*at` form with them as they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// open, creat, openat, openat2.
    Open(Open),
    /// stat, lstat, newfstatat, statx.
    Stat { flags: i32, out: StatOut },
    /// access, faccessat, faccessat2.
    Access { mode: i32, flags: i32 },
    /// readlink, readlinkat.
    Readlink { buf: u64, size: u64 },
    /// statfs.
    Statfs { buf: u64 },
    /// The path-named xattr calls (`follow`: not an `l*` spelling).
    Xattr { op: XattrOp, follow: bool },
    /// utime, utimes, futimesat, utimensat.
    Utime { times: Times, flags: i32 },
    /// mkdir, mkdirat.
    Mkdir { mode: u32 },
    /// mknod, mknodat.
    Mknod { mode: u32, dev: u64 },
    /// rmdir, and unlink(at) (`AT_REMOVEDIR` in `flags` for a directory).
    Unlink { flags: i32 },
    /// rename, renameat, renameat2.
    Rename { flags: u32 },
    /// link, linkat.
    Link { flags: i32 },
    /// symlink, symlinkat: the target text (not a path to resolve) at this address.
    Symlink { target: u64 },
    /// chmod, fchmodat, fchmodat2.
    Chmod { mode: u32, flags: i32 },
    /// chown, lchown, fchownat.
    Chown { uid: u32, gid: u32, flags: i32 },
    /// truncate.
    Truncate { length: i64 },
    /// chdir.
    Chdir,
    /// Arguments kept in memory could not be read (openat2's `open_how`): the call fails
    /// with this errno.
    Unreadable(Errno),
    /// Any other trapped call: its handler reads what it needs.
    Other,
}

const NOFOLLOW: i32 = libc::AT_SYMLINK_NOFOLLOW;

impl Call {
    /// Decodes call `sys` of thread `tid` from its registers (and, for openat2, its
    /// `struct open_how`: [`Call::Unreadable`] when that cannot be read).
    pub fn decode(sys: Sys, regs: &Regs, tid: i32) -> Call {
        Call::try_decode(sys, regs, tid).unwrap_or_else(Call::Unreadable)
    }

    fn try_decode(sys: Sys, regs: &Regs, tid: i32) -> Result<Call, Errno> {
        let a = |i: usize| regs.arg(i);
        let int = |i: usize| regs.arg(i) as i32;
        let open = |flags: i32, mode: u64, spelt| {
            Call::Open(Open {
                flags,
                mode: mode as u32,
                resolve: 0,
                spelt,
            })
        };
        Ok(match sys {
            Sys::Open => open(int(1), a(2), OpenSpelling::Register(1)),
            Sys::Openat => open(int(2), a(3), OpenSpelling::Register(2)),
            Sys::Creat => open(CREAT_FLAGS, a(1), OpenSpelling::Implied),
            Sys::Openat2 => {
                let [flags, mode, resolve] = read_open_how(tid, a(2))?;
                // Bits no open flag or mode has: the kernel refuses them (EINVAL).
                if flags > u64::from(u32::MAX) || mode > u64::from(u32::MAX) {
                    return Err(libc::EINVAL);
                }
                Call::Open(Open {
                    flags: flags as i32,
                    mode: mode as u32,
                    resolve,
                    spelt: OpenSpelling::How(2),
                })
            }
            Sys::Stat => Call::Stat {
                flags: 0,
                out: StatOut::Stat(a(1)),
            },
            Sys::Lstat => Call::Stat {
                flags: NOFOLLOW,
                out: StatOut::Stat(a(1)),
            },
            Sys::Newfstatat => Call::Stat {
                flags: int(3),
                out: StatOut::Stat(a(2)),
            },
            Sys::Statx => Call::Stat {
                flags: int(2),
                out: StatOut::Statx {
                    mask: a(3) as u32,
                    buf: a(4),
                },
            },
            Sys::Access => Call::Access {
                mode: int(1),
                flags: 0,
            },
            Sys::Faccessat => Call::Access {
                mode: int(2),
                flags: 0,
            },
            Sys::Faccessat2 => Call::Access {
                mode: int(2),
                flags: int(3),
            },
            Sys::Readlink => Call::Readlink {
                buf: a(1),
                size: a(2),
            },
            Sys::Readlinkat => Call::Readlink {
                buf: a(2),
                size: a(3),
            },
            Sys::Statfs => Call::Statfs { buf: a(1) },
            Sys::Getxattr | Sys::Lgetxattr => Call::Xattr {
                op: XattrOp::Get {
                    name: a(1),
                    buf: a(2),
                    size: a(3),
                },
                follow: sys == Sys::Getxattr,
            },
            Sys::Listxattr | Sys::Llistxattr => Call::Xattr {
                op: XattrOp::List {
                    buf: a(1),
                    size: a(2),
                },
                follow: sys == Sys::Listxattr,
            },
            Sys::Setxattr | Sys::Lsetxattr => Call::Xattr {
                op: XattrOp::Set {
                    name: a(1),
                    value: a(2),
                    size: a(3),
                    flags: int(4),
                },
                follow: sys == Sys::Setxattr,
            },
            Sys::Removexattr | Sys::Lremovexattr => Call::Xattr {
                op: XattrOp::Remove { name: a(1) },
                follow: sys == Sys::Removexattr,
            },
            Sys::Utime => Call::Utime {
                times: times_at(a(1), Times::Utimbuf),
                flags: 0,
            },
            Sys::Utimes => Call::Utime {
                times: times_at(a(1), Times::Timevals),
                flags: 0,
            },
            Sys::Futimesat => Call::Utime {
                times: times_at(a(2), Times::Timevals),
                flags: 0,
            },
            Sys::Utimensat => Call::Utime {
                times: times_at(a(2), Times::Timespecs),
                flags: int(3),
            },
            Sys::Mkdir => Call::Mkdir { mode: a(1) as u32 },
            Sys::Mkdirat => Call::Mkdir { mode: a(2) as u32 },
            Sys::Mknod => Call::Mknod {
                mode: a(1) as u32,
                dev: a(2),
            },
            Sys::Mknodat => Call::Mknod {
                mode: a(2) as u32,
                dev: a(3),
            },
            Sys::Rmdir => Call::Unlink {
                flags: libc::AT_REMOVEDIR,
            },
            Sys::Unlink => Call::Unlink { flags: 0 },
            Sys::Unlinkat => Call::Unlink { flags: int(2) },
            Sys::Rename | Sys::Renameat => Call::Rename { flags: 0 },
            Sys::Renameat2 => Call::Rename { flags: a(4) as u32 },
            Sys::Link => Call::Link { flags: 0 },
            Sys::Linkat => Call::Link { flags: int(4) },
            Sys::Symlink | Sys::Symlinkat => Call::Symlink { target: a(0) },
            Sys::Chmod => Call::Chmod {
                mode: a(1) as u32,
                flags: 0,
            },
            Sys::Fchmodat => Call::Chmod {
                mode: a(2) as u32,
                flags: 0,
            },
            Sys::Fchmodat2 => Call::Chmod {
                mode: a(2) as u32,
                flags: int(3),
            },
            Sys::Chown => Call::Chown {
                uid: a(1) as u32,
                gid: a(2) as u32,
                flags: 0,
            },
            Sys::Lchown => Call::Chown {
                uid: a(1) as u32,
                gid: a(2) as u32,
                flags: NOFOLLOW,
            },
            Sys::Fchownat => Call::Chown {
                uid: a(2) as u32,
                gid: a(3) as u32,
                flags: int(4),
            },
            Sys::Truncate => Call::Truncate {
                length: a(1) as i64,
            },
            Sys::Chdir => Call::Chdir,
            _ => Call::Other,
        })
    }

    /// The open's flags and mode, for an open.
    pub fn open(&self) -> Option<&Open> {
        match self {
            Call::Open(open) => Some(open),
            _ => None,
        }
    }

    /// Whether the call applies the caller's umask to a mode it creates with.
    pub fn applies_umask(&self) -> bool {
        matches!(self, Call::Mkdir { .. } | Call::Mknod { .. })
            || matches!(self, Call::Open(o) if o.creates() || o.tmpfile())
    }
}

/// creat's implied flags.
const CREAT_FLAGS: i32 = libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC;

/// The times at `addr`, or now when it is `NULL`.
fn times_at(addr: u64, spelt: fn(u64) -> Times) -> Times {
    if addr == 0 {
        Times::Now
    } else {
        spelt(addr)
    }
}

/// openat2's `struct open_how { flags, mode, resolve }`.
fn read_open_how(tid: i32, addr: u64) -> Result<[u64; 3], Errno> {
    let w = memory::read_words(tid, addr, 3)?;
    Ok([w[0], w[1], w[2]])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regs(args: [u64; 6]) -> Regs {
        Regs::from_args(&args)
    }

    #[test]
    fn the_open_spellings_fold_into_one() {
        let flags = (libc::O_WRONLY | libc::O_CREAT) as u64;
        let open = Call::decode(Sys::Open, &regs([0, flags, 0o640, 0, 0, 0]), 0);
        let openat = Call::decode(Sys::Openat, &regs([0, 0, flags, 0o640, 0, 0]), 0);
        let (Call::Open(a), Call::Open(b)) = (open, openat) else {
            panic!("{open:?} {openat:?}")
        };
        assert_eq!((a.flags, a.mode), (b.flags, b.mode));
        assert!(a.writes() && a.creates() && !a.exclusive());
        let creat = Call::decode(Sys::Creat, &regs([0, 0o600, 0, 0, 0, 0]), 0);
        assert_eq!(creat.open().unwrap().flags, CREAT_FLAGS);
        assert!(creat.applies_umask());
    }

    #[test]
    fn openat2_reads_its_how_once() {
        let how: [u64; 3] = [libc::O_RDONLY as u64, 0, 0x04];
        let pid = std::process::id() as i32;
        let call = Call::decode(
            Sys::Openat2,
            &regs([0, 0, how.as_ptr() as u64, 24, 0, 0]),
            pid,
        );
        assert_eq!(call.open().unwrap().resolve, 0x04);
        let bad = Call::decode(Sys::Openat2, &regs([0, 0, 8, 24, 0, 0]), pid);
        assert_eq!(bad, Call::Unreadable(libc::EFAULT));
    }

    #[test]
    fn stat_spellings_keep_their_flags_and_buffers() {
        let lstat = Call::decode(Sys::Lstat, &regs([0, 0x10, 0, 0, 0, 0]), 0);
        assert_eq!(
            lstat,
            Call::Stat {
                flags: NOFOLLOW,
                out: StatOut::Stat(0x10)
            }
        );
        let statx = Call::decode(Sys::Statx, &regs([0, 0, 0x100, 0x7ff, 0x20, 0]), 0);
        assert_eq!(
            statx,
            Call::Stat {
                flags: 0x100,
                out: StatOut::Statx {
                    mask: 0x7ff,
                    buf: 0x20
                }
            }
        );
    }

    #[test]
    fn times_read_as_utimensat_takes_them() {
        let pid = std::process::id() as i32;
        let timevals: [i64; 4] = [10, 5, 20, 1_000_000];
        let t = Times::Timevals(timevals.as_ptr() as u64)
            .read(pid)
            .unwrap()
            .unwrap();
        assert_eq!((t[0].tv_sec, t[0].tv_nsec), (10, 5000));
        // Out of range for a timeval: the kernel must still refuse it.
        assert_eq!((t[1].tv_sec, t[1].tv_nsec), (20, -1));
        let utimbuf: [i64; 2] = [7, 8];
        let t = Times::Utimbuf(utimbuf.as_ptr() as u64)
            .read(pid)
            .unwrap()
            .unwrap();
        assert_eq!((t[0].tv_sec, t[0].tv_nsec, t[1].tv_sec), (7, 0, 8));
        assert_eq!(Times::Now.read(pid).unwrap().map(|_| ()), None);
        assert_eq!(Times::Timespecs(8).read(pid).err(), Some(libc::EFAULT));
    }

    #[test]
    fn rmdir_is_an_unlink_of_a_directory() {
        let rmdir = Call::decode(Sys::Rmdir, &regs([0; 6]), 0);
        let unlinkat = Call::decode(
            Sys::Unlinkat,
            &regs([0, 0, libc::AT_REMOVEDIR as u64, 0, 0, 0]),
            0,
        );
        assert_eq!(rmdir, unlinkat);
        let utimes = Call::decode(Sys::Utimes, &regs([0; 6]), 0);
        assert_eq!(
            utimes,
            Call::Utime {
                times: Times::Now,
                flags: 0
            }
        );
    }
}
