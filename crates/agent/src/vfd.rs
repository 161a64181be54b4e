//! Virtual descriptors: files of a direct-mode mount, used in place on their server
//! ([`OpenFile`]). The program holds one end of a socket pair at a number in a reserved
//! high range (the *placeholder*); the filter sends the descriptor calls whose fd argument
//! lies in that range to the notification thread, which serves them with requests to the
//! server (`supervisor/direct.rs`), so calls on local descriptors stay untrapped.
//!
//! The kernel keeps the placeholder's life: `fork`, close-on-exec, `close` and
//! `close_range` copy or drop it as they would a file, and every copy names the same open
//! file (one offset, as POSIX has it). roost learns that a file is closed when the last copy
//! goes: its own end of the pair hangs up (`EPOLLHUP`, watched by one thread for all files).
//! A copy the program asks for (`dup`, `fcntl(F_DUPFD)`) is made in the range too; one it
//! asks for at a low number (`dup2(fd, 1)`: a shell's `> /chirp/...`) cannot be trapped
//! there, so it is a local copy of the file instead, written back when closed (cached mode
//! for that copy; `supervisor/direct.rs`).

use roost_vfs::{Driver, Errno, OpenFile};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex};

/// One open file of a direct-mode mount.
pub struct VFile {
    pub file: Box<dyn OpenFile>,
    /// The driver and driver path (for xattrs and for a local copy to map).
    pub driver: Arc<dyn Driver>,
    /// The name the program opened it by, for messages.
    pub logical: Vec<u8>,
    /// `O_RDONLY`, `O_WRONLY` or `O_RDWR`.
    pub access: i32,
    pub state: Mutex<State>,
    /// This descriptor's open of the file's lock object, on which the program's advisory
    /// locks are taken (`supervisor::locks`), opened on the first lock; released with it.
    pub locks: Mutex<Option<std::fs::File>>,
    /// roost's end of the socket pair.
    end: OwnedFd,
    /// The inode of the program's end, which names this file in `/proc/PID/fd/N`.
    ino: u64,
    /// Tells whether a descriptor of a traced thread is the program's end (None: no
    /// epoll set could be made).
    probe: Option<Probe>,
}

/// An epoll set holding only the program's end of a pair, registered under `number` (its
/// number in roost then). `kcmp(KCMP_EPOLL_TFD)` against it says whether a traced thread's
/// descriptor is that end, in about a third of what reading `/proc/PID/fd/N` costs. An
/// epoll set holds no reference: the entry goes with the program's last copy, and the
/// program's end still hangs up roost's when it goes.
struct Probe {
    set: OwnedFd,
    number: RawFd,
}

impl Probe {
    fn new(program: &OwnedFd) -> Option<Probe> {
        // SAFETY: creates a descriptor we own.
        let set = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if set < 0 {
            return None;
        }
        // SAFETY: just created, owned by nobody else.
        let set = unsafe { OwnedFd::from_raw_fd(set) };
        let mut nothing = libc::epoll_event { events: 0, u64: 0 };
        let number = program.as_raw_fd();
        // SAFETY: adds a live descriptor of ours to our own set.
        let rc =
            unsafe { libc::epoll_ctl(set.as_raw_fd(), libc::EPOLL_CTL_ADD, number, &mut nothing) };
        (rc == 0).then_some(Probe { set, number })
    }

    /// Whether descriptor `fd` of thread `tid` is the file this set holds.
    fn holds(&self, tid: i32, fd: RawFd) -> bool {
        /// `struct kcmp_epoll_slot`: the set, the number, which entry of that number.
        #[repr(C)]
        struct Slot {
            set: u32,
            number: u32,
            index: u32,
        }
        const KCMP_EPOLL_TFD: libc::c_long = 7;
        let slot = Slot {
            set: self.set.as_raw_fd() as u32,
            number: self.number as u32,
            index: 0,
        };
        // SAFETY: kcmp only reads the slot; 0 means the same open file.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_kcmp,
                tid,
                libc::getpid(),
                KCMP_EPOLL_TFD,
                fd as libc::c_long,
                &slot as *const Slot,
            )
        };
        if rc < 0 && !self.kcmp_works() {
            // No kcmp here (an old kernel, one built without it, a seccomp profile that
            // refuses it): every lookup reads /proc from now on. A refusal for one
            // process (one that made itself undumpable) leaves the others their probes.
            PROBES_WORK.store(false, std::sync::atomic::Ordering::Relaxed);
        }
        rc == 0
    }

    /// Whether kcmp answers at all: comparing roost's own set with itself.
    fn kcmp_works(&self) -> bool {
        const KCMP_FILE: libc::c_long = 0;
        let set = self.set.as_raw_fd() as libc::c_long;
        // SAFETY: compares two descriptors of this process; reads nothing else.
        let me = unsafe { libc::getpid() };
        unsafe { libc::syscall(libc::SYS_kcmp, me, me, KCMP_FILE, set, set) == 0 }
    }
}

/// Whether `/proc` is there to read (a bare chroot may have none): without it, virtual
/// descriptors are found by their probes alone and free numbers by `kcmp`.
fn proc_mounted() -> bool {
    static MOUNTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *MOUNTED.get_or_init(|| std::path::Path::new("/proc/self/fd").exists())
}

/// Whether thread `tid` has descriptor `n` open: its `/proc/TID/fd/N`, or without `/proc`
/// `kcmp`, which fails with EBADF for a number that is not open (compared with a
/// descriptor of roost's that is, standard error).
pub fn is_open(tid: i32, n: u32) -> bool {
    if proc_mounted() {
        return std::fs::symlink_metadata(format!("/proc/{tid}/fd/{n}")).is_ok();
    }
    const KCMP_FILE: libc::c_long = 0;
    // SAFETY: compares descriptors; reads and changes nothing.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            tid,
            libc::getpid(),
            KCMP_FILE,
            n as libc::c_long,
            2 as libc::c_long,
        )
    };
    rc >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EBADF)
}

/// Cleared once `kcmp` turns out not to be available.
static PROBES_WORK: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

fn probes_work() -> bool {
    PROBES_WORK.load(std::sync::atomic::Ordering::Relaxed)
}

/// What changes while a file is open.
#[derive(Default)]
pub struct State {
    pub offset: u64,
    pub append: bool,
    pub nonblock: bool,
    /// A shared writable mapping was refused (said once).
    pub said_mmap: bool,
}

impl VFile {
    pub fn readable(&self) -> bool {
        self.access != libc::O_WRONLY
    }
    pub fn writable(&self) -> bool {
        self.access != libc::O_RDONLY
    }

    /// A name for messages: the logical path.
    pub fn name(&self) -> String {
        String::from_utf8_lossy(&self.logical).into_owned()
    }

    /// Writes `data` at the offset, or under `O_APPEND` at the end where the server then
    /// finds it (in one step: writers elsewhere never overwrite each other), and moves the
    /// offset past it.
    pub fn write_here(&self, state: &mut State, data: &[u8]) -> Result<usize, Errno> {
        if state.append {
            let (n, end) = self.file.append(data)?;
            state.offset = end;
            return Ok(n);
        }
        let n = self.file.pwrite(data, state.offset)?;
        state.offset += n as u64;
        Ok(n)
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("vfile lock")
    }
}

/// How many files [`Vfds::get`] remembers at one number (a number is reused as files are
/// closed and opened; the oldest is forgotten first).
const SEEN_PER_NUMBER: usize = 4;

/// Every virtual descriptor of the run, by the inode of its placeholder.
pub struct Vfds {
    /// The reserved range `[base, top)`.
    pub base: u32,
    slots: Slots,
    files: Mutex<HashMap<u64, Arc<VFile>>>,
    /// The files (by inode) found at each number of the range: checked first, by probe.
    seen: Mutex<HashMap<RawFd, Vec<u64>>>,
    epoll: OwnedFd,
}

/// A range of descriptor numbers roost places descriptors in, counting up as the kernel
/// does (the virtual descriptors', and the one of local copies of remote objects,
/// `crate::copies`).
pub struct Slots {
    /// The range `[base, top)`.
    pub base: u32,
    top: u32,
    /// Held while a number of the range is chosen and filled ([`Slots::place`]).
    placing: Mutex<()>,
    /// The number last placed: the search starts above it, where the next free one most
    /// likely is, so a program holding many files open does not pay a look at each of
    /// them for every open.
    hint: std::sync::atomic::AtomicU32,
}

impl Slots {
    pub fn new(base: u32, top: u32) -> Slots {
        Slots {
            base,
            top,
            placing: Mutex::new(()),
            hint: std::sync::atomic::AtomicU32::new(base),
        }
    }

    /// A free number of the range in thread `tid`'s table, below the thread's descriptor
    /// limit (a program may have lowered it): the first free one looking up from the
    /// number last placed, then up from the bottom to it — so files opened one after the
    /// other get consecutive numbers, as from the kernel (`os.closerange` tests rely on a
    /// `dup` landing just above its file).
    pub fn free_slot(&self, tid: i32) -> Option<u32> {
        // SAFETY: the kernel fills the plain-data struct.
        let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
        // SAFETY: a query of another process's limit into a valid struct.
        let top = if unsafe {
            libc::prlimit(tid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut limit)
        } == 0
        {
            limit.rlim_cur.min(u64::from(self.top)) as u32
        } else {
            self.top
        };
        use std::sync::atomic::Ordering;
        let from = self.hint.load(Ordering::Relaxed).clamp(self.base, top);
        let free = (from..top)
            .chain(self.base..from)
            .find(|&n| !is_open(tid, n))?;
        Some(free)
    }

    /// Runs `fill` with a free number of the range in thread `tid`'s table (`None`: the
    /// range is full), one placement at a time: two calls answered at once by two
    /// notification threads never pick the same number.
    pub fn place<R>(&self, tid: i32, fill: impl FnOnce(Option<u32>) -> R) -> R {
        let _one_at_a_time = self.placing.lock().expect("placing lock");
        let slot = self.free_slot(tid);
        if let Some(slot) = slot {
            self.hint.store(slot, std::sync::atomic::Ordering::Relaxed);
        }
        fill(slot)
    }
}

impl Vfds {
    /// The registry for descriptors in `[base, top)`, with its watching thread.
    pub fn start(base: u32, top: u32) -> std::io::Result<Arc<Vfds>> {
        // SAFETY: creates a descriptor we own.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epoll < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let vfds = Arc::new(Vfds {
            base,
            slots: Slots::new(base, top),
            files: Mutex::new(HashMap::new()),
            seen: Mutex::new(HashMap::new()),
            // SAFETY: just created, owned by nobody else.
            epoll: unsafe { OwnedFd::from_raw_fd(epoll) },
        });
        let watcher = Arc::clone(&vfds);
        std::thread::Builder::new()
            .name("roost-vfds".into())
            .spawn(move || watcher.watch_loop())?;
        Ok(vfds)
    }

    /// The reserved range for a process whose descriptor limit is `limit`: its last
    /// quarter, at most the numbers up to 1023 (a table that large costs every process
    /// 8 KiB; a higher number would make each one as large).
    pub fn range(limit: u64) -> (u32, u32) {
        let top = limit.min(1024) as u32;
        (top - top / 4, top)
    }

    /// Registers `file`; returns it and the program's end of its pair.
    pub fn add(
        &self,
        file: Box<dyn OpenFile>,
        driver: Arc<dyn Driver>,
        logical: &[u8],
        flags: i32,
    ) -> Result<(Arc<VFile>, OwnedFd), Errno> {
        let mut pair = [0; 2];
        // SAFETY: fills two descriptors we then own.
        if unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
                pair.as_mut_ptr(),
            )
        } != 0
        {
            return Err(crate::sys::last_errno());
        }
        // SAFETY: just created, owned by nobody else.
        let (end, program) =
            unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
        let ino = inode_of(program.as_raw_fd())?;
        // One byte waiting on the program's end, never read (its reads are trapped), so
        // poll and select find the descriptor ready to read, as a regular file always is.
        // SAFETY: a send of one byte of our own on our own socket.
        unsafe {
            libc::send(
                end.as_raw_fd(),
                [0u8].as_ptr().cast(),
                1,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        let vfile = Arc::new(VFile {
            file,
            driver,
            logical: logical.to_vec(),
            access: flags & libc::O_ACCMODE,
            state: Mutex::new(State {
                append: flags & libc::O_APPEND != 0,
                nonblock: flags & libc::O_NONBLOCK != 0,
                ..State::default()
            }),
            locks: Mutex::new(None),
            end,
            ino,
            probe: Probe::new(&program),
        });
        self.watch(&vfile)?;
        self.files
            .lock()
            .expect("vfds lock")
            .insert(ino, Arc::clone(&vfile));
        Ok((vfile, program))
    }

    fn watch(&self, vfile: &VFile) -> Result<(), Errno> {
        // Nothing is ever written into the pair: only the hang-up is of interest.
        let mut event = libc::epoll_event {
            events: libc::EPOLLHUP as u32,
            u64: vfile.ino,
        };
        let fd = vfile.end.as_raw_fd();
        // SAFETY: a plain epoll call with a valid event struct.
        let rc =
            unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) };
        if rc != 0 {
            return Err(crate::sys::last_errno());
        }
        Ok(())
    }

    /// The logical name of the file whose placeholder has inode `ino`.
    pub fn name_of(&self, ino: u64) -> Option<Vec<u8>> {
        let files = self.files.lock().expect("vfds lock");
        files.get(&ino).map(|f| f.logical.clone())
    }

    /// The file behind descriptor `fd` of thread `tid`, if it is a virtual one: one found
    /// at that number before, if its probe confirms it, else the one `/proc/PID/fd/N`
    /// names (a number may hold another file now: a `dup2` onto it, a close and an open).
    pub fn get(&self, tid: i32, fd: RawFd) -> Option<Arc<VFile>> {
        if fd < self.base as RawFd {
            return None;
        }
        if let Some(vfile) = self.seen_at(tid, fd) {
            return Some(vfile);
        }
        if !proc_mounted() {
            return self.probed(tid, fd);
        }
        let link = std::fs::read_link(format!("/proc/{tid}/fd/{fd}")).ok()?;
        let ino = link
            .to_str()?
            .strip_prefix("socket:[")?
            .strip_suffix(']')?
            .parse()
            .ok()?;
        let vfile = self.files.lock().expect("vfds lock").get(&ino).cloned()?;
        if vfile.probe.is_some() && probes_work() {
            let mut seen = self.seen.lock().expect("vfds lock");
            let inos = seen.entry(fd).or_default();
            if !inos.contains(&ino) {
                if inos.len() >= SEEN_PER_NUMBER {
                    inos.remove(0);
                }
                inos.push(ino);
            }
        }
        Some(vfile)
    }

    /// The file at descriptor `fd` of thread `tid`, asked of every open file's probe:
    /// without `/proc` nothing else names it (a descriptor no probe claims is let through).
    fn probed(&self, tid: i32, fd: RawFd) -> Option<Arc<VFile>> {
        let files: Vec<Arc<VFile>> = self
            .files
            .lock()
            .expect("vfds lock")
            .values()
            .cloned()
            .collect();
        files
            .into_iter()
            .find(|f| f.probe.as_ref().is_some_and(|p| p.holds(tid, fd)))
    }

    /// The file at descriptor `fd` of thread `tid`, if it is one found at that number
    /// before (in any process) and its probe confirms it. Files closed since are forgotten.
    fn seen_at(&self, tid: i32, fd: RawFd) -> Option<Arc<VFile>> {
        if !probes_work() {
            return None;
        }
        // The candidates are taken out first: no lock is held across the probes.
        let candidates: Vec<Arc<VFile>> = {
            let mut seen = self.seen.lock().expect("vfds lock");
            let inos = seen.get_mut(&fd)?;
            let files = self.files.lock().expect("vfds lock");
            inos.retain(|ino| files.contains_key(ino));
            inos.iter()
                .filter_map(|ino| files.get(ino).cloned())
                .collect()
        };
        candidates
            .into_iter()
            .find(|f| f.probe.as_ref().is_some_and(|p| p.holds(tid, fd)))
    }

    /// A free number of the range in thread `tid`'s table ([`Slots::free_slot`]).
    pub fn free_slot(&self, tid: i32) -> Option<u32> {
        self.slots.free_slot(tid)
    }

    /// Runs `fill` with a free number of the range ([`Slots::place`]).
    pub fn place<R>(&self, tid: i32, fill: impl FnOnce(Option<u32>) -> R) -> R {
        self.slots.place(tid, fill)
    }

    /// Closes every file (the run is over).
    pub fn finish(&self) {
        self.files.lock().expect("vfds lock").clear();
    }

    /// The watching thread: closes a file when the program's last copy is gone.
    fn watch_loop(self: Arc<Self>) {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
        loop {
            // SAFETY: waits into our own event buffer.
            let n = unsafe {
                libc::epoll_wait(
                    self.epoll.as_raw_fd(),
                    events.as_mut_ptr(),
                    events.len() as i32,
                    -1,
                )
            };
            if n < 0 {
                if crate::sys::last_errno() == libc::EINTR {
                    continue;
                }
                return;
            }
            for e in &events[..n as usize] {
                let (ino, what) = (e.u64, e.events);
                let Some(vfile) = self.files.lock().expect("vfds lock").get(&ino).cloned() else {
                    continue;
                };
                if what & libc::EPOLLHUP as u32 != 0 {
                    self.close(&vfile);
                }
            }
        }
    }

    fn close(&self, vfile: &VFile) {
        // SAFETY: removes our own descriptor from our own epoll set.
        unsafe {
            libc::epoll_ctl(
                self.epoll.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                vfile.end.as_raw_fd(),
                std::ptr::null_mut(),
            )
        };
        self.files.lock().expect("vfds lock").remove(&vfile.ino);
    }
}

fn inode_of(fd: RawFd) -> Result<u64, Errno> {
    // SAFETY: the kernel fills the plain-data struct for a live descriptor.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(crate::sys::last_errno());
    }
    Ok(st.st_ino)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: fills two descriptors we then own.
        assert_eq!(
            unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr()) },
            0
        );
        // SAFETY: just created, owned by nobody else.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    /// A probe says yes for the file it holds, at any number and in any copy, and no for
    /// another file at the same number and once the file is gone.
    #[test]
    fn a_probe_knows_its_file_at_any_number_and_nothing_else() {
        let me = unsafe { libc::gettid() };
        let (_end, program) = pair();
        let probe = Probe::new(&program).expect("an epoll set");
        // The program's copy lives at another number; roost's own is closed.
        let copy = unsafe { libc::fcntl(program.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 600) };
        assert!(copy >= 600);
        drop(program);
        assert!(
            probe.holds(me, copy),
            "kcmp(KCMP_EPOLL_TFD) is not available"
        );
        let (_other_end, other) = pair();
        assert!(!probe.holds(me, other.as_raw_fd()));
        // Another file put at the number (dup2): no longer this file.
        let keep = unsafe { libc::fcntl(copy, libc::F_DUPFD_CLOEXEC, 0) };
        assert_eq!(unsafe { libc::dup2(other.as_raw_fd(), copy) }, copy);
        assert!(!probe.holds(me, copy));
        assert!(probe.holds(me, keep));
        // The last copy closed: the file is gone from the set.
        unsafe { libc::close(keep) };
        unsafe { libc::close(copy) };
        assert!(!probe.holds(me, keep));
        assert!(probes_work());
    }
}
