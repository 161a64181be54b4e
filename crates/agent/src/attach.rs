//! Attaching on demand, roost's default when notifications are available: forks are not
//! followed with ptrace, so a process that makes no call only a ptrace stop can handle is
//! never stopped at all — no fork events, no first stops, no stop for each signal it gets
//! (a shell's SIGCHLD per child). Every trapped call of such a process comes as a
//! notification; one that must be rewritten is sent back (`supervisor::send_back`), and only
//! then does the tracer seize the thread (`PTRACE_SEIZE` of a descendant needs no
//! privilege), handle that one call at its ptrace stop and detach again.
//!
//! What roost keeps of a process between attachments is its scratch area: found again by
//! [`SCRATCH_MARK`] (so an area inherited at fork is used, not mapped anew) and remembered
//! per process ([`Spaces`]) with the process's start time, so a reused pid never inherits
//! another process's record. A process that changes its root stays attached, with fork
//! events, and so do its descendants (the mount list does not apply to them).
//!
//! The kernel's exit-kill applies only to traced processes: when the agent is asked to end
//! (SIGTERM, SIGHUP), it kills every process below it itself ([`end_on_signals`]), and it
//! is the subreaper of the program's processes, so an orphan stays in its tree (unless the
//! program has a subreaper of its own).

use crate::memory;
use crate::procinfo;
use crate::task::{AddrSpace, SCRATCH_MARK, SCRATCH_MARK_AT, SCRATCH_SIZE};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::rc::Rc;
use std::sync::atomic::{AtomicI32, Ordering};

/// The ptrace options of a thread attached for one call: its seccomp stops, and syscall
/// stops told apart from signal stops.
pub const OPTIONS: libc::c_int =
    libc::PTRACE_O_EXITKILL | libc::PTRACE_O_TRACESECCOMP | libc::PTRACE_O_TRACESYSGOOD;

fn ptrace(req: libc::c_uint, tid: i32, data: usize) -> io::Result<()> {
    // SAFETY: requests with integer data only.
    if unsafe { libc::ptrace(req, tid, 0, data) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Starts tracing thread `tid` (not stopped: a `PTRACE_INTERRUPT` stops it).
pub fn seize(tid: i32) -> io::Result<()> {
    seize_with(tid, OPTIONS)
}

/// [`seize`] with ptrace options `options`.
pub fn seize_with(tid: i32, options: libc::c_int) -> io::Result<()> {
    ptrace(libc::PTRACE_SEIZE, tid, options as usize)
}

/// Lets thread `tid`, in a ptrace stop, run on untraced (delivering signal `sig`, 0: none).
pub fn detach(tid: i32, sig: i32) -> io::Result<()> {
    ptrace(libc::PTRACE_DETACH, tid, sig as usize)
}

/// Makes this process the reaper of the orphans of the processes below it, which stay its
/// descendants (so roost may still seize them, and waits for them before it exits).
pub fn become_subreaper() -> io::Result<()> {
    // SAFETY: a plain prctl on this process.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the scratch area at `at` in `pid`'s address space still holds roost's mark.
fn marked(pid: i32, at: u64) -> bool {
    memory::read(pid, at + SCRATCH_MARK_AT, SCRATCH_MARK.len())
        .is_ok_and(|b| b.as_slice() == SCRATCH_MARK)
}

/// A scratch area already mapped in `pid`'s address space: the area's size of an anonymous
/// read-write mapping that ends with roost's mark. The kernel may have merged the area with
/// a neighbouring mapping of the same kind: it is looked for at either end of one.
pub fn find_scratch(pid: i32) -> Option<u64> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    maps.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let (start, end) = fields.next()?.split_once('-')?;
        let (start, end) = (
            u64::from_str_radix(start, 16).ok()?,
            u64::from_str_radix(end, 16).ok()?,
        );
        let anonymous_rw = fields.next() == Some("rw-p") && fields.nth(3).is_none();
        if !anonymous_rw || end - start < SCRATCH_SIZE {
            return None;
        }
        [start, end - SCRATCH_SIZE]
            .into_iter()
            .find(|&base| marked(pid, base))
    })
}

/// When process `pid` started (clock ticks after boot, field 22 of its stat), which tells
/// it from a later process given the same pid.
fn start_time(pid: i32) -> Option<u64> {
    procinfo::stat_fields(&format!("/proc/{pid}/stat"))?
        .get(19)?
        .parse()
        .ok()
}

/// What roost knows of one process's address space between attachments.
struct Space {
    started: u64,
    /// The process's exec count (`crate::programs`) the record was made for.
    execs: u64,
    mm: Rc<RefCell<AddrSpace>>,
}

/// The address spaces of the processes roost attached to, by thread-group id.
#[derive(Default)]
pub struct Spaces(HashMap<i32, Space>);

/// Records kept before those of processes that are gone are dropped.
const KEEP: usize = 1024;

impl Spaces {
    /// The address space of process `tgid` (asked at an attachment of its thread `tid`),
    /// which has made `execs` execs and runs `exe` (logically): the one recorded if it is
    /// still this process's, else a new record, with the scratch area it may already have.
    pub fn of(
        &mut self,
        (tgid, tid): (i32, i32),
        execs: u64,
        exe: impl FnOnce() -> Option<Vec<u8>>,
    ) -> Rc<RefCell<AddrSpace>> {
        let started = start_time(tgid).unwrap_or(0);
        if let Some(space) = self.0.get(&tgid) {
            let scratch = space.mm.borrow().scratch;
            let same = space.started == started && space.execs == execs;
            if same && scratch.map_or(true, |at| marked(tid, at)) {
                return Rc::clone(&space.mm);
            }
        }
        if self.0.len() >= KEEP {
            self.0.retain(|&pid, _| procinfo::alive(pid));
        }
        let mut mm = AddrSpace::new(exe());
        mm.scratch = find_scratch(tid);
        let mm = Rc::new(RefCell::new(mm));
        self.0.insert(
            tgid,
            Space {
                started,
                execs,
                mm: Rc::clone(&mm),
            },
        );
        mm
    }

    /// Process `tgid` is gone.
    pub fn gone(&mut self, tgid: i32) {
        self.0.remove(&tgid);
    }
}

/// With lazy attachment, SIGTERM and SIGHUP (which the front passes on) end the agent only
/// after it killed the program's processes, which exit-kill no longer takes with it: a
/// handler, in whichever thread the signal comes to, writes the signal to a pipe, and a
/// thread waiting on it kills everything below the agent, then dies of the signal.
pub fn end_on_signals() -> io::Result<()> {
    static PIPE_W: AtomicI32 = AtomicI32::new(-1);
    extern "C" fn note(sig: libc::c_int) {
        let byte = sig as u8;
        // SAFETY: write is async-signal-safe; one byte from a local.
        unsafe {
            libc::write(
                PIPE_W.load(Ordering::Relaxed),
                (&byte as *const u8).cast(),
                1,
            )
        };
    }
    let mut fds = [0; 2];
    // SAFETY: a plain pipe2 into a local array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    PIPE_W.store(fds[1], Ordering::Relaxed);
    let read_end = fds[0];
    std::thread::Builder::new()
        .name("roost-ender".into())
        .stack_size(128 * 1024)
        .spawn(move || {
            let mut sig = 0u8;
            // SAFETY: reads one byte into a local from our pipe.
            while unsafe { libc::read(read_end, (&mut sig as *mut u8).cast(), 1) } != 1 {
                if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    return;
                }
            }
            kill_descendants();
            let sig = libc::c_int::from(sig);
            // SAFETY: the default disposition, unblocked in this thread, then the signal.
            unsafe {
                libc::signal(sig, libc::SIG_DFL);
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                libc::sigaddset(&mut set, sig);
                libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
                libc::raise(sig);
            }
        })?;
    // SAFETY: a handler that only writes to a pipe; SA_RESTART leaves other calls alone.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = note as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        for sig in [libc::SIGTERM, libc::SIGHUP] {
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    Ok(())
}

/// Kills every process below this one (the agent), deepest first being no concern: SIGKILL
/// leaves no process a chance to start another once all are signalled, repeated until none
/// is left or a second has passed.
pub fn kill_descendants() {
    // SAFETY: a plain id query.
    let me = unsafe { libc::getpid() };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        let below = descendants(me);
        if below.is_empty() || std::time::Instant::now() > deadline {
            return;
        }
        for pid in below {
            // SAFETY: signals a process below roost's agent.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Every live process whose ancestry leads to `root`, from /proc.
fn descendants(root: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let parents: HashMap<i32, i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let fields = procinfo::stat_fields(&format!("/proc/{pid}/stat"))?;
            let ppid = fields.get(1)?.parse().ok()?;
            (fields.first()? != "Z").then_some((pid, ppid))
        })
        .collect();
    parents
        .keys()
        .copied()
        .filter(|&pid| {
            let mut at = pid;
            for _ in 0..parents.len() {
                match parents.get(&at) {
                    Some(&p) if p == root => return true,
                    Some(&p) if p > 1 => at = p,
                    _ => return false,
                }
            }
            false
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_time_reads_past_a_name_with_spaces_and_parentheses() {
        let me = std::process::id() as i32;
        let started = start_time(me).expect("own start time");
        assert!(started > 0);
        assert_eq!(start_time(me), Some(started));
    }

    #[test]
    fn a_marked_area_is_found_and_an_unmarked_one_is_not() {
        let me = std::process::id() as i32;
        // SAFETY: an anonymous mapping of our own, unmapped below.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                SCRATCH_SIZE as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        assert_ne!(at, libc::MAP_FAILED);
        let base = at as u64;
        assert_ne!(find_scratch(me), Some(base), "no mark yet");
        // SAFETY: writes inside the mapping made above.
        unsafe {
            std::ptr::copy_nonoverlapping(
                SCRATCH_MARK.as_ptr(),
                (base + SCRATCH_MARK_AT) as *mut u8,
                SCRATCH_MARK.len(),
            )
        };
        assert_eq!(find_scratch(me), Some(base));
        let mut spaces = Spaces::default();
        let mm = spaces.of((me, me), 0, || None);
        assert_eq!(mm.borrow().scratch, Some(base));
        assert!(Rc::ptr_eq(&mm, &spaces.of((me, me), 0, || None)), "kept");
        assert!(
            !Rc::ptr_eq(&mm, &spaces.of((me, me), 1, || None)),
            "after an exec"
        );
        // SAFETY: unmaps the mapping made above.
        unsafe { libc::munmap(at, SCRATCH_SIZE as usize) };
    }
}
