//! The sockets a job may not make, as a seccomp filter its program is started under (when
//! the owner has not allowed jobs the network, `--job-network`).
//!
//! A network namespace takes the host's network away, and Landlock's scopes its abstract
//! unix sockets, but neither stops a `connect` to a unix socket by its path: the owner's
//! ssh-agent, D-Bus session bus (which starts programs on request), or `docker.sock` are
//! reached that way by whoever may open them, and a job of an unprivileged server is its
//! owner. So `socket(AF_UNIX, ...)` is refused (EACCES); `socketpair` stays, whose two ends
//! are connected to each other only. Without any namespace ([`super::isolation`]) every
//! `socket` is refused: UDP and the rest would otherwise reach the host's network. `io_uring`
//! could make sockets behind the filter's back, so it is refused (ENOSYS) too; so is every
//! call of another architecture's ABI (32-bit or x32 programs), whose numbers differ.

use std::io;

/// Which `socket` calls the filter refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sockets {
    /// Unix sockets only (the job has a network namespace of its own).
    Unix,
    /// Every one.
    All,
}

const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
/// Where the x32 ABI's numbers start on x86-64.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

// Offsets in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH: u32 = 4;
/// The low half of the first argument (little-endian).
const ARG0: u32 = 16;

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const RET_K: u16 = 0x06;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The filter's program.
pub fn program(sockets: Sockets) -> Vec<libc::sock_filter> {
    let refuse = |errno: i32| stmt(RET_K, SECCOMP_RET_ERRNO | errno as u32);
    let mut p = vec![
        stmt(LD_W_ABS, ARCH),
        jump(JEQ_K, AUDIT_ARCH, 1, 0),
        refuse(libc::ENOSYS),
        stmt(LD_W_ABS, NR),
        jump(JGE_K, X32_SYSCALL_BIT, 0, 1),
        refuse(libc::ENOSYS),
        jump(JEQ_K, libc::SYS_io_uring_setup as u32, 0, 1),
        refuse(libc::ENOSYS),
    ];
    // A socket call skips to the allow at the end unless its block refuses it.
    let socket = libc::SYS_socket as u32;
    match sockets {
        Sockets::All => p.extend([jump(JEQ_K, socket, 0, 1), refuse(libc::EACCES)]),
        Sockets::Unix => p.extend([
            jump(JEQ_K, socket, 0, 3),
            stmt(LD_W_ABS, ARG0),
            jump(JEQ_K, libc::AF_UNIX as u32, 0, 1),
            refuse(libc::EACCES),
        ]),
    }
    p.push(stmt(RET_K, SECCOMP_RET_ALLOW));
    p
}

/// Installs `filter` (made by [`program`]) on the calling thread and what it starts. Only
/// a system call: safe after a fork. The caller must have set `PR_SET_NO_NEW_PRIVS`.
pub fn install(filter: &[libc::sock_filter]) -> io::Result<()> {
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        // The kernel only reads it.
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: prog and the filter it points to outlive the call.
    let r = unsafe {
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &prog as *const libc::sock_fprog,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `check` in a forked child under the filter; whether it returned true.
    fn in_child(sockets: Sockets, check: fn() -> bool) -> bool {
        let filter = program(sockets);
        // SAFETY: the child makes only system calls (the checks below) and exits.
        unsafe {
            let pid = libc::fork();
            assert!(pid >= 0);
            if pid == 0 {
                let ok = libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
                    && install(&filter).is_ok()
                    && check();
                libc::_exit(if ok { 0 } else { 1 });
            }
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
        }
    }

    fn refused(domain: i32, errno: i32) -> bool {
        // SAFETY: a socket call; a made socket is closed.
        unsafe {
            let fd = libc::socket(domain, libc::SOCK_STREAM, 0);
            if fd >= 0 {
                libc::close(fd);
                return false;
            }
            *libc::__errno_location() == errno
        }
    }

    #[test]
    fn unix_sockets_are_refused_and_pairs_are_not() {
        assert!(in_child(Sockets::Unix, || {
            let mut pair = [0; 2];
            refused(libc::AF_UNIX, libc::EACCES)
                && !refused(libc::AF_INET, libc::EACCES)
                // SAFETY: socketpair into an array of two.
                && unsafe {
                    libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, pair.as_mut_ptr())
                } == 0
                // SAFETY: a plain system call.
                && unsafe { libc::syscall(libc::SYS_io_uring_setup, 1, 0) } < 0
        }));
    }

    #[test]
    fn without_a_namespace_every_socket_is_refused() {
        assert!(in_child(Sockets::All, || {
            refused(libc::AF_UNIX, libc::EACCES) && refused(libc::AF_INET, libc::EACCES)
        }));
    }
}
