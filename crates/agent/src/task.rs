//! Per-thread state and the state threads share: the file-system context (the virtual cwd,
//! shared under CLONE_FS) and the address space (the scratch area and the logical executable,
//! shared under CLONE_VM, replaced at exec).

use crate::arch::Sys;
use roost_vfs::Namespace;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

/// Size of the scratch area mapped into each address space.
pub const SCRATCH_SIZE: u64 = 16 << 20;
/// Each thread writes into its own slot of the scratch area.
pub const SLOT_SIZE: u64 = 64 << 10;
/// The last slot holds only [`SCRATCH_MARK`].
const SLOTS: usize = (SCRATCH_SIZE / SLOT_SIZE) as usize - 1;
/// Written at the end of every scratch area roost maps, so that a process roost starts
/// tracing late (`crate::attach`) is found to have one already: inherited at fork, or
/// mapped at an earlier attachment.
pub const SCRATCH_MARK: &[u8; 16] = b"roost scratch v1";
/// Where [`SCRATCH_MARK`] lies in the area.
pub const SCRATCH_MARK_AT: u64 = SCRATCH_SIZE - SCRATCH_MARK.len() as u64;

/// The working directory, logical and physical (what the kernel holds).
#[derive(Clone, Debug)]
pub struct Fs {
    pub logical: Vec<u8>,
    pub physical: Vec<u8>,
}

impl Fs {
    /// Thread `tid`'s as the kernel holds it, named by `ns` (`/` for a thread gone
    /// meanwhile, whose call is answered to nobody).
    pub fn of_thread(ns: &Namespace, tid: i32) -> Fs {
        let physical = std::fs::read_link(format!("/proc/{tid}/cwd"))
            .map(|p| p.into_os_string().into_encoded_bytes())
            .unwrap_or_else(|_| b"/".to_vec());
        Fs {
            logical: ns.logical_cwd(&physical),
            physical,
        }
    }
}

/// A caller's working directory as the handlers see it: known already (the tracer keeps
/// each thread's), or read from `/proc` the first time a handler asks for it (the caller of
/// a notification), so that a call on absolute names costs no `/proc` read.
pub struct CallerFs<'a> {
    fs: std::cell::OnceCell<Fs>,
    /// Whose, to read it: the namespace that names it, and the thread.
    of: Option<(&'a Namespace, i32)>,
}

impl<'a> CallerFs<'a> {
    pub fn known(fs: Fs) -> CallerFs<'a> {
        CallerFs {
            fs: std::cell::OnceCell::from(fs),
            of: None,
        }
    }

    /// Thread `tid`'s, read when first asked for.
    pub fn of(ns: &'a Namespace, tid: i32) -> CallerFs<'a> {
        CallerFs {
            fs: std::cell::OnceCell::new(),
            of: Some((ns, tid)),
        }
    }

    pub fn get(&self) -> &Fs {
        self.fs.get_or_init(|| {
            let (ns, tid) = self.of.expect("a working directory known or to read");
            Fs::of_thread(ns, tid)
        })
    }
}

/// One address space.
#[derive(Debug)]
pub struct AddrSpace {
    /// Where roost's scratch area is mapped, once mapped.
    pub scratch: Option<u64>,
    slots: HashMap<i32, usize>,
    free: Vec<usize>,
    /// What roost last wrote into each slot (a repeated rewrite skips the write).
    written: HashMap<usize, Vec<u8>>,
    next: usize,
    /// Slots from here to the end are reserved (see [`AddrSpace::reserve`]).
    limit: usize,
    /// The first slot of each thread's reservation.
    reserved: HashMap<i32, usize>,
    /// Another thread (or a vfork child) has shared this address space at some point.
    pub had_threads: bool,
    /// The logical path of the executable, when roost resolved it at exec.
    pub exe: Option<Vec<u8>>,
}

impl Default for AddrSpace {
    fn default() -> AddrSpace {
        AddrSpace {
            scratch: None,
            slots: HashMap::new(),
            free: Vec::new(),
            written: HashMap::new(),
            next: 0,
            limit: SLOTS,
            reserved: HashMap::new(),
            had_threads: false,
            exe: None,
        }
    }
}

impl AddrSpace {
    pub fn new(exe: Option<Vec<u8>>) -> AddrSpace {
        AddrSpace {
            exe,
            ..AddrSpace::default()
        }
    }

    /// A copy for a forked child: same mappings, no slots in use.
    pub fn forked(&self) -> AddrSpace {
        AddrSpace {
            scratch: self.scratch,
            exe: self.exe.clone(),
            limit: self.limit,
            ..AddrSpace::default()
        }
    }

    /// The address of `tid`'s slot (the area must be mapped).
    pub fn slot(&mut self, tid: i32) -> Option<u64> {
        let base = self.scratch?;
        let index = match self.slots.get(&tid) {
            Some(&i) => i,
            None => {
                let i = match self.free.pop() {
                    Some(i) => i,
                    None if self.next < self.limit => {
                        self.next += 1;
                        self.next - 1
                    }
                    // Threads roost saw only in passing do not report their exit: their
                    // slots are taken back once they are gone.
                    None if self.reclaim() => self.free.pop().expect("reclaimed a slot"),
                    // More concurrent threads than slots: share one (rare; documented).
                    None => tid as usize % self.limit.max(1),
                };
                self.slots.insert(tid, i);
                i
            }
        };
        Some(base + index as u64 * SLOT_SIZE)
    }

    /// The address of `len` bytes of the area for thread `tid` alone, taken from its far end
    /// (an exec rebuilding a long argv needs more than a slot). They stay the thread's until
    /// it reserves again, execs or exits ([`AddrSpace::release`]); `None` when the area is too
    /// full (one slot always stays for threads' own use).
    pub fn reserve(&mut self, tid: i32, len: u64) -> Option<u64> {
        let base = self.scratch?;
        self.unreserve(tid);
        let slots = len.div_ceil(SLOT_SIZE) as usize;
        if self.next.max(1) + slots > self.limit {
            return None;
        }
        self.limit -= slots;
        self.reserved.insert(tid, self.limit);
        Some(base + self.limit as u64 * SLOT_SIZE)
    }

    /// Gives back `tid`'s reservation; the reserved region shrinks as far as its lowest
    /// reservations have all been given back.
    fn unreserve(&mut self, tid: i32) {
        let Some(first) = self.reserved.remove(&tid) else {
            return;
        };
        if let Some(base) = self.scratch {
            self.written
                .remove(&((base + first as u64 * SLOT_SIZE) as usize));
        }
        // Everything below the lowest reservation still held is free again.
        self.limit = self.reserved.values().copied().min().unwrap_or(SLOTS);
    }

    /// True when `bytes` must be written at `slot` (it does not hold them already); records
    /// them as written.
    pub fn needs_write(&mut self, slot: u64, bytes: &[u8]) -> bool {
        let key = slot as usize;
        if self.written.get(&key).map(Vec::as_slice) == Some(bytes) {
            return false;
        }
        self.written.insert(key, bytes.to_vec());
        true
    }

    /// Forgets a recorded write (after a failed write).
    pub fn forget(&mut self, slot: u64) {
        self.written.remove(&(slot as usize));
    }

    /// Frees the slots of threads that no longer exist; whether one was freed.
    fn reclaim(&mut self) -> bool {
        let gone: Vec<i32> = self
            .slots
            .keys()
            .copied()
            .filter(|&tid| !crate::procinfo::alive(tid))
            .collect();
        for tid in gone {
            self.release(tid);
        }
        !self.free.is_empty()
    }

    /// Frees `tid`'s slot and reservation when the thread is gone (or has exec'd).
    pub fn release(&mut self, tid: i32) {
        self.unreserve(tid);
        if let Some(i) = self.slots.remove(&tid) {
            if !self.slots.values().any(|&j| j == i) {
                self.free.push(i);
            }
        }
    }
}

/// What to do at the syscall-exit stop that a handler asked for.
#[derive(Clone, Debug)]
pub enum AfterExit {
    /// chdir succeeded: the new cwd is this logical path (None: derive it from the kernel).
    Chdir(Option<Vec<u8>>),
    /// The call may have changed these names (logical): forget their cached resolutions.
    Invalidate(Vec<Vec<u8>>),
    /// chroot: when it succeeds, the thread and those sharing its root leave the namespace.
    Chroot,
    /// sendmmsg ran on roost's copy of the message vector: copy each sent message's
    /// `msg_len` back into the program's vector at this address.
    MsgLens(u64),
    /// getsockname/getpeername (`peer`) of socket `fd`: the kernel wrote a physical
    /// `sockaddr_un` at `addr` (room for `room` bytes, its length at `len_at`); the program
    /// must see the logical one.
    SockName {
        fd: i32,
        peer: bool,
        addr: u64,
        len_at: u64,
        room: u32,
    },
    /// Nothing but the trace record.
    Record,
}

/// A trapped call in flight (between its seccomp stop and its exit stop).
#[derive(Debug)]
pub struct InFlight {
    pub after: AfterExit,
    pub sys: Sys,
    pub logical: Option<Vec<u8>>,
    pub physical: Option<Vec<u8>>,
    pub started: Instant,
    /// The arguments the program passed, when roost rewrote them and the kernel may restart
    /// the call (see `handlers::may_restart`): a restart must resolve them again.
    pub original_args: Option<[u64; 6]>,
}

/// A call roost sent back to take a ptrace stop: what it changed in the thread, to be put
/// back as the program had it.
#[derive(Clone, Copy, Debug)]
pub struct Marked {
    /// The argument whose high half carries [`crate::syscalls::BY_PTRACE`], and its value
    /// (put back at the call's exit stop).
    pub at: usize,
    pub arg: u64,
    /// The thread's signal mask, while every signal is held until the call's seccomp stop
    /// (a handler run before the restart would start with the mark in its registers).
    pub mask: Option<u64>,
}

/// One traced thread.
pub struct Task {
    pub fs: Rc<RefCell<Fs>>,
    pub mm: Rc<RefCell<AddrSpace>>,
    /// The exit stop this thread waits for, if any.
    pub in_flight: Option<InFlight>,
    /// The process's exec count (`crate::programs`) its address space is known for.
    pub execs_seen: u64,
    /// Created from a fork event; its first (PTRACE_EVENT_STOP) stop is still to come.
    pub awaiting_first_stop: bool,
    /// The thread's last rewritten call: its number and the arguments roost set.
    pub last_rewrite: Option<(i64, Vec<(usize, u64)>)>,
    /// The call roost sent back to take a ptrace stop, until its exit stop.
    pub marked: Option<Marked>,
}

impl Task {
    pub fn new(fs: Rc<RefCell<Fs>>, mm: Rc<RefCell<AddrSpace>>) -> Task {
        Task {
            fs,
            mm,
            in_flight: None,
            execs_seen: 0,
            awaiting_first_stop: false,
            last_rewrite: None,
            marked: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_per_thread_and_reused() {
        let mut mm = AddrSpace::new(None);
        assert_eq!(mm.slot(10), None, "no slot before the area is mapped");
        mm.scratch = Some(0x1000_0000);
        let a = mm.slot(10).unwrap();
        let b = mm.slot(11).unwrap();
        assert_ne!(a, b);
        assert_eq!(mm.slot(10), Some(a));
        mm.release(10);
        assert_eq!(mm.slot(12), Some(a));
        assert!(mm.needs_write(a, b"/x"));
        assert!(!mm.needs_write(a, b"/x"));
        assert!(mm.needs_write(a, b"/y"));
    }

    #[test]
    fn reservations_come_from_the_far_end_and_never_meet_the_slots() {
        let base = 0x1000_0000;
        let mut mm = AddrSpace::new(None);
        mm.scratch = Some(base);
        let first = mm.slot(1).unwrap();
        let big = mm.reserve(7, 3 * SLOT_SIZE + 1).unwrap();
        assert_eq!(
            big,
            base + (SLOTS as u64 - 4) * SLOT_SIZE,
            "below the mark's slot"
        );
        assert!(mm.reserve(8, SCRATCH_SIZE).is_none(), "more than is left");
        for tid in 2..(SLOTS as i32 - 4) {
            let s = mm.slot(tid).unwrap();
            assert!(s < big && s != first);
        }
        // The area is full: slots of threads that no longer exist are taken back (or, with
        // none gone, shared), always below the reservation.
        assert!(mm.slot(9999).unwrap() < big);
        // Given back when the thread execs or exits; a second one from the same thread
        // replaces its first.
        mm.release(7);
        assert_eq!(
            mm.reserve(8, SLOT_SIZE).unwrap(),
            base + (SLOTS as u64 - 1) * SLOT_SIZE
        );
        assert_eq!(
            mm.reserve(8, SLOT_SIZE).unwrap(),
            base + (SLOTS as u64 - 1) * SLOT_SIZE
        );
    }
}
