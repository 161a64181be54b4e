//! The stop loop: one thread owns ptrace and `waitpid(-1, __WALL)`. Seccomp stops go to the
//! handlers; an exit stop is requested only when a result must be seen (chdir, calls that
//! change names, tracing). Fork/clone events create task state (sharing cwd and address space
//! as the clone flags say), exec events give the thread a fresh address space, signal stops
//! re-inject their signal and group-stops are held with PTRACE_LISTEN so job control works.

use crate::arch::Sys;
use crate::arch::{self, Regs};
use crate::attach;
use crate::call::Call;
use crate::call_log::{Record, Tracer};
use crate::copies;
use crate::decision::{Action, Arg, Decision, Scratch};
use crate::guard;
use crate::handlers::virtual_ids;
use crate::handlers::{self, procfs, socket, Ctx};
use crate::memory;
use crate::procinfo;
use crate::remote;
use crate::shared::{self, Shared};
use crate::spawn;
use crate::syscalls::{Kind, Table};
use crate::task::{
    self, AddrSpace, AfterExit, CallerFs, Fs, InFlight, Task, SCRATCH_MARK, SCRATCH_MARK_AT,
    SCRATCH_SIZE, SLOT_SIZE,
};
use roost_vfs::Namespace;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

/// Whether process `pid` has a mapping that starts at `addr`.
fn maps_at(pid: i32, addr: u64) -> bool {
    let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return false;
    };
    let start = format!("{addr:x}-");
    maps.lines().any(|l| l.starts_with(&start))
}

/// The agent's state for one session.
struct Agent {
    /// The namespace and exe names, shared with the notification thread.
    shared: Arc<Shared>,
    table: Table,
    tasks: HashMap<i32, Task>,
    /// New threads whose first stop came before their parent's fork event, with its signal.
    parked: HashMap<i32, i32>,
    main: i32,
    exit_code: Option<i32>,
    /// Told the program's exit code when the program exits (other tracees may go on).
    on_program_exit: Option<Box<dyn FnOnce(i32)>>,
    /// Told when the program stops.
    on_program_stop: Option<Box<dyn FnMut(i32)>>,
    tracer: Tracer,
    /// Trapped calls come as notifications too; execs are let through by them, with no
    /// exec event but for execs that stop.
    notifications: bool,
    /// Threads interrupted to take a sent-back call as a ptrace stop, with the call's number.
    interrupted: HashMap<i32, i64>,
    /// Forks are not followed: threads are attached for the calls that need it and detached
    /// after ([`crate::attach`]).
    lazy: bool,
    /// With `lazy`, the address spaces of the processes attached to so far.
    spaces: attach::Spaces,
    /// Processes roost could not attach to (said once each).
    untraceable: HashSet<i32>,
}

fn ptrace(req: libc::c_uint, pid: i32, data: usize) -> io::Result<()> {
    // SAFETY: requests with integer data only.
    if unsafe { libc::ptrace(req, pid, 0, data) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The signal mask of tracee `pid` (stopped).
fn sigmask(pid: i32) -> io::Result<u64> {
    let mut mask: u64 = 0;
    // SAFETY: the kernel writes one 8-byte mask into `mask`.
    let r = unsafe { libc::ptrace(libc::PTRACE_GETSIGMASK, pid, 8usize, &mut mask as *mut u64) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(mask)
}

/// Sets the signal mask of tracee `pid` (stopped); SIGKILL and SIGSTOP stay unblocked.
fn set_sigmask(pid: i32, mask: u64) -> io::Result<()> {
    // SAFETY: the kernel reads one 8-byte mask from `mask`.
    let r = unsafe { libc::ptrace(libc::PTRACE_SETSIGMASK, pid, 8usize, &mask as *const u64) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn event_msg(pid: i32) -> u64 {
    let mut msg: libc::c_ulong = 0;
    // SAFETY: the kernel writes one c_ulong.
    unsafe {
        libc::ptrace(
            libc::PTRACE_GETEVENTMSG,
            pid,
            0,
            &mut msg as *mut libc::c_ulong,
        )
    };
    msg
}

/// Waits for the next stop or exit of tracee `pid` (-1: any), with `flags` besides
/// `__WALL`; `None` when a signal interrupted the wait ([`shared::WAKE_SIGNAL`]: a call
/// the supervisor sends back, or a request to end).
fn wait_or_woken(pid: i32, flags: libc::c_int) -> io::Result<Option<(i32, i32)>> {
    let mut status = 0;
    // SAFETY: plain waitpid.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::__WALL | flags) };
    if r >= 0 {
        return Ok(Some((r, status)));
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EINTR) {
        return Ok(None);
    }
    Err(e)
}

/// Lets [`shared::WAKE_SIGNAL`] interrupt the tracer's waits (and do nothing else): before
/// the supervisor may send a call back.
pub(crate) fn catch_wake_signal() {
    extern "C" fn nothing(_: libc::c_int) {}
    // SAFETY: a handler that does nothing, installed without SA_RESTART so waitpid returns.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = nothing as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(shared::WAKE_SIGNAL, &sa, std::ptr::null_mut());
    }
}

/// Argument register `arg` with roost's mark in its high half (see
/// [`crate::syscalls::mark_arg`]).
fn marked(arg: u64) -> u64 {
    (arg & 0xffff_ffff) | (u64::from(crate::syscalls::BY_PTRACE) << 32)
}

/// `ret`, once `writes` are in thread `pid`'s memory; EFAULT when one cannot be written.
fn write_or_fault(pid: i32, ret: i64, writes: &[(u64, Vec<u8>)]) -> i64 {
    match memory::write_all(pid, writes) {
        Ok(()) => ret,
        Err(_) => -(libc::EFAULT as i64),
    }
}

/// Waits for the next stop or exit of tracee `pid`, whatever signals come meanwhile.
fn wait(pid: i32) -> io::Result<(i32, i32)> {
    loop {
        if let Some(x) = wait_or_woken(pid, 0)? {
            return Ok(x);
        }
    }
}

/// The kernel's "restart this call" results (ERESTARTSYS, ERESTARTNOINTR, ERESTARTNOHAND,
/// ERESTART_RESTARTBLOCK), seen only by a tracer at the exit stop.
const RESTARTS: [i64; 4] = [512, 513, 514, 516];
const STOP_SIGNALS: [i32; 4] = [libc::SIGSTOP, libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU];

/// What the stop loop is given to run one program ([`trace`]).
pub(crate) struct Program {
    pub shared: Arc<Shared>,
    pub table: Table,
    /// The program's first process, started under the filter.
    pub pid: i32,
    /// Its working directory, logical and physical.
    pub fs: Fs,
    pub call_log: Tracer,
    /// Trapped calls come as notifications too.
    pub notifications: bool,
    /// Processes are attached to only for the calls that need a stop ([`crate::attach`]).
    pub lazy: bool,
    pub on_program_exit: Option<Box<dyn FnOnce(i32)>>,
    pub on_program_stop: Option<Box<dyn FnMut(i32)>>,
}

/// Takes the program's ptrace stops until every process it started is gone: its exit code
/// as a shell reports it (1 when it is not known), and the call log.
pub(crate) fn trace(p: Program) -> (i32, Tracer) {
    // The tracer must not die (or stop) of the terminal's signals meant for the program.
    // SAFETY: setting dispositions of this process only (the child keeps its defaults).
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
        if p.on_program_stop.is_some() {
            for sig in STOP_SIGNALS.into_iter().filter(|&s| s != libc::SIGSTOP) {
                libc::signal(sig, libc::SIG_IGN);
            }
        }
    }
    let mut agent = Agent {
        shared: p.shared,
        table: p.table,
        tasks: HashMap::new(),
        parked: HashMap::new(),
        main: p.pid,
        exit_code: None,
        on_program_exit: p.on_program_exit,
        on_program_stop: p.on_program_stop,
        tracer: p.call_log,
        notifications: p.notifications,
        interrupted: HashMap::new(),
        lazy: p.lazy,
        spaces: attach::Spaces::default(),
        untraceable: HashSet::new(),
    };
    if !p.lazy {
        agent.tasks.insert(
            p.pid,
            Task::new(
                Rc::new(RefCell::new(p.fs)),
                Rc::new(RefCell::new(AddrSpace::new(None))),
            ),
        );
    }
    agent.run_loop();
    (agent.exit_code.unwrap_or(1), agent.tracer)
}

impl Agent {
    fn ns(&self) -> &Namespace {
        &self.shared.ns
    }

    fn run_loop(&mut self) {
        // Untraced children's stops (the program's, for job control) come with WUNTRACED.
        let flags = if self.lazy { libc::WUNTRACED } else { 0 };
        loop {
            self.take_sent_back();
            let (pid, status) = match wait_or_woken(-1, flags) {
                Ok(Some(x)) => x,
                Ok(None) => continue, // woken to take calls sent back
                Err(_) => return,     // ECHILD: every tracee is gone
            };
            self.dispatch(pid, status);
        }
    }

    /// Interrupts each thread whose call the supervisor sent back (attaching to it first
    /// when it is not traced) and answers its notification with ERESTARTNOINTR: at the
    /// interrupt's stop the call is marked to take a ptrace stop when it restarts
    /// ([`Agent::mark_sent_back`]).
    fn take_sent_back(&mut self) {
        let Some(sent_back) = &self.shared.sent_back else {
            return;
        };
        for s in sent_back.take() {
            if self.lazy && !self.tasks.contains_key(&s.tid) {
                match attach::seize(s.tid) {
                    Ok(()) => {
                        let task = self.attached_task(s.tid);
                        self.tasks.insert(s.tid, task);
                    }
                    Err(e) if e.raw_os_error() != Some(libc::ESRCH) => {
                        // Traced by another (strace, gdb), or not ours to trace.
                        let tgid = procinfo::tgid(s.tid).unwrap_or(s.tid);
                        if self.untraceable.insert(tgid) {
                            eprintln!(
                                "roost: cannot trace pid {tgid} ({e}); its calls that need a \
                                 ptrace stop fail with ENOSYS"
                            );
                        }
                    }
                    Err(_) => {}
                }
            }
            let interrupted = ptrace(libc::PTRACE_INTERRUPT, s.tid, 0).is_ok();
            let error = if interrupted {
                -shared::ERESTARTNOINTR
            } else {
                -libc::ENOSYS
            };
            let mut resp = libc::seccomp_notif_resp {
                id: s.id,
                val: 0,
                error,
                flags: 0,
            };
            // SAFETY: a plain-data reply on the live listener.
            let sent =
                unsafe { libc::ioctl(s.listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp) } == 0;
            if interrupted {
                self.interrupted.insert(s.tid, s.nr);
            } else if sent && !self.lazy {
                // Alive but not traced (a clone3 child with CLONE_UNTRACED, a process roost
                // may not trace): nothing can rewrite its call. (A caller gone meanwhile is
                // not worth a word.)
                handlers::report_untranslatable("a sent-back call", None);
            }
        }
    }

    /// At the stop of a thread interrupted for sent-back call `nr`: if that call is about
    /// to restart, marks it ([`Agent::mark`]) and makes it restart, signal or not.
    fn mark_sent_back(&mut self, pid: i32, nr: i64) -> io::Result<()> {
        let mut regs = Regs::get(pid)?;
        let restarts = [shared::ERESTARTNOINTR, shared::ERESTARTSYS]
            .iter()
            .any(|&e| regs.ret() == -(e as i64));
        if restarts && regs.nr() == nr && self.mark(pid, &mut regs)? {
            regs.set_ret(-(shared::ERESTARTNOINTR as i64));
            regs.set(pid)?;
        }
        Ok(())
    }

    /// Marks the call in `regs` (to be set) so that the filter sends it to a ptrace stop,
    /// and holds the thread's signals until that stop ([`task::Marked`]); false when `pid`
    /// is not a thread roost traces, or not a call it traps.
    fn mark(&mut self, pid: i32, regs: &mut Regs) -> io::Result<bool> {
        let Some((sys, _)) = self.table.get(regs.nr()) else {
            return Ok(false);
        };
        if !self.tasks.contains_key(&pid) {
            return Ok(false);
        }
        let at = crate::syscalls::mark_arg(sys);
        let mask = sigmask(pid)?;
        set_sigmask(pid, !0)?;
        let arg = regs.arg(at);
        let task = self.tasks.get_mut(&pid).expect("checked above");
        task.marked = Some(task::Marked {
            at,
            arg,
            mask: Some(mask),
        });
        regs.set_arg(at, marked(arg));
        Ok(true)
    }

    /// Puts back what marking a call changed (its argument as the program had it, the
    /// kernel keeping registers across a call, and the signal mask if still held): at its
    /// exit stop, so a restart is delivered afresh, or when it fails before it ran.
    fn unmark(&mut self, pid: i32, regs: &mut Regs) -> io::Result<()> {
        let marked = self.tasks.get_mut(&pid).and_then(|t| t.marked.take());
        if let Some(m) = marked {
            if let Some(mask) = m.mask {
                set_sigmask(pid, mask)?;
            }
            regs.set_arg(m.at, m.arg);
            regs.set(pid)?;
        }
        Ok(())
    }

    /// State for thread `tid`, just attached to: its cwd from the kernel, its process's
    /// address space as recorded (or found) in [`attach::Spaces`].
    fn attached_task(&mut self, tid: i32) -> Task {
        let tgid = procinfo::tgid(tid).unwrap_or(tid);
        let execs = &self.shared.execs;
        let count = execs.count(tgid);
        let mm = self.spaces.of((tgid, tid), count, || execs.exe(tgid, tid));
        let mut task = self.task_from_proc(tid);
        task.mm = mm;
        // As `refresh_after_exec` counts: by the thread's own id.
        task.execs_seen = execs.count(tid);
        task
    }

    /// Lets thread `pid`, in a ptrace stop, go on: attached on demand, it is detached
    /// unless a stop of this call is still to come (or its root is not roost's: then it and
    /// its descendants stay traced).
    fn resume(&mut self, pid: i32) -> io::Result<()> {
        self.resume_with(pid, 0)
    }

    /// [`Agent::resume`], delivering signal `sig` (0: none).
    fn resume_with(&mut self, pid: i32, sig: i32) -> io::Result<()> {
        let keep = !self.lazy
            || self.shared.rerooted.contains(pid)
            || self.interrupted.contains_key(&pid)
            || self
                .tasks
                .get(&pid)
                .map_or(true, |t| t.in_flight.is_some() || t.marked.is_some());
        if keep {
            return ptrace(libc::PTRACE_CONT, pid, sig as usize);
        }
        self.tasks.remove(&pid);
        attach::detach(pid, sig)
    }

    /// Gives `pid` a fresh address space if its process exec'd since roost last looked (an
    /// exec a notification let through has no stop of its own; see `crate::programs`).
    fn refresh_after_exec(&mut self, pid: i32) {
        let count = self.shared.execs.count(pid);
        let Some(task) = self.tasks.get_mut(&pid) else {
            return;
        };
        if task.execs_seen != count {
            task.execs_seen = count;
            task.last_rewrite = None;
            task.mm.borrow_mut().release(pid);
            let exe = self.shared.execs.exe(pid, pid);
            task.mm = Rc::new(RefCell::new(AddrSpace::new(exe)));
        }
    }

    fn on_gone(&mut self, pid: i32, status: i32) {
        if let Some(t) = self.tasks.remove(&pid) {
            t.mm.borrow_mut().release(pid);
        }
        self.spaces.gone(pid);
        self.shared.execs.gone(pid);
        self.interrupted.remove(&pid);
        self.shared.stops.gone(pid);
        self.shared.rerooted.remove(pid);
        self.parked.remove(&pid);
        if pid == self.main {
            let code = if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            };
            self.exit_code = Some(code);
            if let Some(tell) = self.on_program_exit.take() {
                tell(code);
            }
        }
    }

    fn dispatch(&mut self, pid: i32, status: i32) {
        if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
            self.on_gone(pid, status);
            return;
        }
        if !libc::WIFSTOPPED(status) {
            return;
        }
        let sig = libc::WSTOPSIG(status);
        let event = status >> 16;
        if self.lazy && event == 0 && !self.tasks.contains_key(&pid) {
            // A child roost does not trace stopped (job control): only the program's stop
            // is passed on.
            if pid == self.main && STOP_SIGNALS.contains(&sig) {
                if let Some(tell) = self.on_program_stop.as_mut() {
                    tell(sig);
                }
            }
            return;
        }
        let outcome = match (sig, event) {
            (s, 0) if s == libc::SIGTRAP | 0x80 => self.on_syscall_exit(pid),
            (libc::SIGTRAP, libc::PTRACE_EVENT_SECCOMP) => self.on_seccomp(pid),
            (libc::SIGTRAP, libc::PTRACE_EVENT_FORK)
            | (libc::SIGTRAP, libc::PTRACE_EVENT_VFORK)
            | (libc::SIGTRAP, libc::PTRACE_EVENT_CLONE) => self.on_new_thread(pid),
            (libc::SIGTRAP, libc::PTRACE_EVENT_EXEC) => self.on_exec(pid),
            (s, libc::PTRACE_EVENT_STOP) => self.on_event_stop(pid, s),
            (libc::SIGTRAP, e) if e != 0 => ptrace(libc::PTRACE_CONT, pid, 0),
            (s, _) => self.on_signal(pid, s),
        };
        match outcome {
            // ESRCH: the thread was killed meanwhile; its exit status follows.
            Err(e) if e.raw_os_error() != Some(libc::ESRCH) => {
                eprintln!("roost: pid {pid}: {e}; resuming it untouched");
                let _ = self.resume(pid);
            }
            _ => {}
        }
    }

    /// State for a thread roost has no record of, from what the kernel knows.
    fn task_from_proc(&self, pid: i32) -> Task {
        let fs = Fs::of_thread(self.ns(), pid);
        Task::new(
            Rc::new(RefCell::new(fs)),
            Rc::new(RefCell::new(AddrSpace::new(None))),
        )
    }

    fn on_event_stop(&mut self, pid: i32, sig: i32) -> io::Result<()> {
        if let Some(nr) = self.interrupted.remove(&pid) {
            // Marked whether roost's answer or the interrupt reached the call first: either
            // way it is about to restart.
            self.mark_sent_back(pid, nr)?;
            if !STOP_SIGNALS.contains(&sig) {
                // Marked, it stays attached for the call's stops; else it is let go.
                return self.resume(pid);
            }
        }
        match self.tasks.get_mut(&pid) {
            None => {
                // A new thread stopped before its parent's fork event: hold it until then.
                self.parked.insert(pid, sig);
                Ok(())
            }
            Some(t) if t.awaiting_first_stop => {
                t.awaiting_first_stop = false;
                self.release_first_stop(pid, sig)
            }
            Some(_) if STOP_SIGNALS.contains(&sig) => self.hold_in_group_stop(pid, sig),
            Some(_) => {
                // Woken from a group stop (SIGCONT): the process runs again.
                if let Some(tgid) = procinfo::tgid(pid) {
                    self.shared.stops.resumed(tgid);
                }
                self.resume(pid)
            }
        }
    }

    /// A signal is about to be delivered to `pid`: it gets it. A call waiting for roost's
    /// answer to its notification that the signal interrupted before roost took it comes
    /// back with ERESTARTSYS, which a handler without SA_RESTART would turn into EINTR —
    /// from a stat, an exec, a mkdir, which natively never fail so; such a call is made to
    /// restart after the handler whatever its flags (ERESTARTNOINTR). Opens are left alone:
    /// natively a FIFO's open is interrupted, and so is one roost waits on for its FIFO.
    fn on_signal(&mut self, pid: i32, sig: i32) -> io::Result<()> {
        if self.notifications {
            if let Ok(mut regs) = Regs::get(pid) {
                if regs.ret() == -(shared::ERESTARTSYS as i64)
                    && self.table.restarts_when_notified(regs.nr())
                {
                    regs.set_ret(-(shared::ERESTARTNOINTR as i64));
                    regs.set(pid)?;
                }
            }
        }
        ptrace(libc::PTRACE_CONT, pid, sig as usize)
    }

    /// Holds a thread that reported its process's group stop (for `sig`) until SIGCONT.
    fn hold_in_group_stop(&mut self, pid: i32, sig: i32) -> io::Result<()> {
        if let Some(tgid) = procinfo::tgid(pid) {
            self.shared.stops.stopped(tgid, pid);
        }
        if pid == self.main {
            if let Some(tell) = self.on_program_stop.as_mut() {
                tell(sig);
            }
        }
        ptrace(libc::PTRACE_LISTEN, pid, 0)
    }

    /// A new thread's first stop: a stop signal there means it was born into a group stop.
    fn release_first_stop(&mut self, pid: i32, sig: i32) -> io::Result<()> {
        if STOP_SIGNALS.contains(&sig) {
            self.hold_in_group_stop(pid, sig)
        } else {
            ptrace(libc::PTRACE_CONT, pid, 0)
        }
    }

    fn on_new_thread(&mut self, pid: i32) -> io::Result<()> {
        let child = event_msg(pid) as i32;
        self.refresh_after_exec(pid);
        let flags = match Regs::get(pid) {
            Ok(regs) => match regs.nr() {
                n if n == Sys::Clone.nr() => regs.arg(0),
                n if n == Sys::Clone3.nr() => memory::read(pid, regs.arg(0), 8)
                    .ok()
                    .and_then(|b| b.try_into().ok())
                    .map_or(0, u64::from_ne_bytes),
                n if n == Sys::Vfork.nr() => (libc::CLONE_VM | libc::CLONE_VFORK) as u64,
                _ => 0,
            },
            Err(_) => 0,
        };
        let mut task = match self.tasks.get(&pid) {
            Some(parent) => {
                let fs = if flags & libc::CLONE_FS as u64 != 0 {
                    Rc::clone(&parent.fs)
                } else {
                    Rc::new(RefCell::new(parent.fs.borrow().clone()))
                };
                let mm = if flags & libc::CLONE_VM as u64 != 0 {
                    parent.mm.borrow_mut().had_threads = true;
                    Rc::clone(&parent.mm)
                } else {
                    let mut forked = parent.mm.borrow().forked();
                    // If another thread ever shared the parent's memory, the fork may have
                    // copied it before that thread had roost map the scratch area (the
                    // thread may be gone by now).
                    if parent.mm.borrow().had_threads {
                        if let Some(at) = forked.scratch {
                            if !maps_at(child, at) {
                                forked.scratch = None;
                            }
                        }
                    }
                    Rc::new(RefCell::new(forked))
                };
                Task::new(fs, mm)
            }
            None => self.task_from_proc(child),
        };
        if self.shared.rerooted.contains(pid) {
            self.shared.rerooted.add(child); // a new thread or process keeps its parent's root
        }
        if flags & libc::CLONE_THREAD as u64 == 0 {
            self.shared.execs.forked(pid, child);
        }
        let first_stop = self.parked.remove(&child);
        if first_stop.is_none() {
            task.awaiting_first_stop = true;
        }
        self.tasks.insert(child, task);
        if let Some(sig) = first_stop {
            // Its first stop already came: release it (ESRCH if it died meanwhile).
            let _ = self.release_first_stop(child, sig);
        }
        ptrace(libc::PTRACE_CONT, pid, 0)
    }

    fn on_exec(&mut self, pid: i32) -> io::Result<()> {
        let former = event_msg(pid) as i32;
        if former != pid {
            if let Some(t) = self.tasks.remove(&former) {
                self.tasks.insert(pid, t);
            }
        }
        if former != pid {
            // The thread that exec'd took the leader's id; its own is gone without an exit.
            if self.shared.rerooted.contains(former) {
                self.shared.rerooted.add(pid);
            } else {
                self.shared.rerooted.remove(pid);
            }
            self.shared.rerooted.remove(former);
            if let Some(fast) = &self.shared.fast {
                fast.exec_took_id(former, pid);
            }
        }
        if self.notifications {
            // Exec events were asked for this exec only.
            let _ = ptrace(libc::PTRACE_SETOPTIONS, pid, self.options_of(pid) as usize);
        }
        if let Some(task) = self.tasks.get_mut(&pid) {
            task.last_rewrite = None;
            task.mm.borrow_mut().release(former);
            let execs = &self.shared.execs;
            execs.succeeded(former, pid);
            task.execs_seen = execs.count(pid);
            let exe = execs.exe(pid, pid);
            task.mm = Rc::new(RefCell::new(AddrSpace::new(exe)));
            if let Some(f) = task.in_flight.take() {
                // A successful exec has no exit stop once resumed with PTRACE_CONT.
                let _ = self.tracer.record(&Record {
                    pid,
                    syscall: f.sys,
                    logical: f.logical.as_deref(),
                    physical: f.physical.as_deref(),
                    result: 0,
                    duration: f.started.elapsed(),
                });
            }
        }
        self.resume(pid)
    }

    /// The ptrace options of traced thread `pid`: with lazy attachment, fork events only
    /// for a thread whose root is not roost's (its children must be traced from birth).
    fn options_of(&self, pid: i32) -> libc::c_int {
        if self.lazy && !self.shared.rerooted.contains(pid) {
            attach::OPTIONS
        } else {
            spawn::OPTIONS
        }
    }

    fn on_syscall_exit(&mut self, pid: i32) -> io::Result<()> {
        let Some(task) = self.tasks.get_mut(&pid) else {
            return ptrace(libc::PTRACE_CONT, pid, 0);
        };
        let Some(f) = task.in_flight.take() else {
            return self.resume(pid);
        };
        let mut regs = Regs::get(pid);
        if let Ok(regs) = regs.as_mut() {
            self.unmark(pid, regs)?;
        }
        let Some(task) = self.tasks.get_mut(&pid) else {
            return self.resume(pid);
        };
        // With lazy attachment, a successful chroot keeps its process traced.
        let mut rerooted = None;
        let result = regs
            .as_ref()
            .map(|r| r.ret())
            .unwrap_or(-(libc::ESRCH as i64));
        if let (Some(args), Ok(regs)) = (f.original_args, &regs) {
            if RESTARTS.contains(&-result) {
                let mut regs = regs.clone();
                // The restarted call traps again and is resolved afresh.
                for (i, a) in args.into_iter().enumerate() {
                    regs.set_arg(i, a);
                }
                regs.set(pid)?;
            }
        }
        match f.after {
            AfterExit::Chroot if result == 0 => {
                let fs = Rc::clone(&task.fs);
                let mm = Rc::clone(&task.mm);
                for (tid, t) in &self.tasks {
                    if Rc::ptr_eq(&t.fs, &fs) {
                        self.shared.rerooted.add(*tid);
                    }
                }
                // Names in the new root are no longer what the fast path's table says.
                if let Some(fast) = &self.shared.fast {
                    fast.turn_off(&self.shared.ns);
                }
                if self.lazy {
                    rerooted = Some((fs, mm));
                }
            }
            AfterExit::SockName {
                fd,
                peer,
                addr,
                len_at,
                room,
            } if result == 0 => {
                let ns = &self.shared.ns;
                socket::logical_sockname(ns, pid, (fd, peer), addr, len_at, room);
            }
            AfterExit::MsgLens(program) if result > 0 => {
                if let Ok(regs) = &regs {
                    socket::copy_msg_lens(pid, regs.arg(1), program, result as usize);
                }
            }
            AfterExit::Chdir(logical) if result == 0 => {
                let ns = &self.shared.ns;
                if let Some(fs) = procfs::cwd_after_chdir(ns, pid, logical) {
                    *task.fs.borrow_mut() = fs;
                }
            }
            AfterExit::Invalidate(names) => {
                for name in &names {
                    self.shared.ns.invalidate_under(name);
                }
            }
            _ => {}
        }
        if let Some((fs, mm)) = rerooted {
            self.trace_rerooted(pid, fs, mm)?;
        }
        let _ = self.tracer.record(&Record {
            pid,
            syscall: f.sys,
            logical: f.logical.as_deref(),
            physical: f.physical.as_deref(),
            result,
            duration: f.started.elapsed(),
        });
        self.resume(pid)
    }

    /// After a chroot by `pid` (attaching on demand): it and the other threads of its
    /// process, which share its root (and `fs`, `mm`), stay traced with fork events, so
    /// that everything they start is traced from birth and known to be outside roost's
    /// root, and their exits are seen.
    fn trace_rerooted(
        &mut self,
        pid: i32,
        fs: Rc<RefCell<Fs>>,
        mm: Rc<RefCell<AddrSpace>>,
    ) -> io::Result<()> {
        ptrace(libc::PTRACE_SETOPTIONS, pid, spawn::OPTIONS as usize)?;
        let tgid = procinfo::tgid(pid).unwrap_or(pid);
        for tid in crate::procinfo::threads_of(tgid) {
            if self.tasks.contains_key(&tid) || attach::seize_with(tid, spawn::OPTIONS).is_err() {
                continue;
            }
            self.shared.rerooted.add(tid);
            self.tasks
                .insert(tid, Task::new(Rc::clone(&fs), Rc::clone(&mm)));
        }
        Ok(())
    }

    fn decide(&mut self, pid: i32, regs: &Regs, (sys, call, kind): (Sys, Call, Kind)) -> Decision {
        // Inside its own root the kernel resolves; only hidden names stay hidden. (A clone
        // and an open by handle name no path: their handlers apply in any root.)
        if let Kind::Identity = kind {
            return virtual_ids::answer(sys, regs, &self.shared.ids);
        }
        if let Kind::Aimed(aimed) = kind {
            return match guard::check(pid, sys, regs, aimed) {
                Ok(()) => Decision::pass(),
                Err(e) => Decision::fail(e),
            };
        }
        let by_path = !matches!(kind, Kind::Clone | Kind::OpenByHandle { .. });
        if by_path && self.shared.rerooted.contains(pid) {
            let ns = &self.shared.ns;
            return match handlers::chrooted::refusal(ns.table(), pid, (regs, &call), &kind) {
                Some(e) => Decision::fail(e),
                None => Decision::pass(),
            };
        }
        if !self.tasks.contains_key(&pid) {
            let task = self.task_from_proc(pid);
            self.tasks.insert(pid, task);
        }
        let task = &self.tasks[&pid];
        let ns = &self.shared.ns;
        // A mapped cwd's name goes stale when the directory is renamed (the kernel keeps
        // it); an unmapped one needs no check, its relative paths pass as they are.
        let stale = {
            let fs = task.fs.borrow();
            (fs.logical != fs.physical)
                .then(|| procfs::current_cwd(ns, pid, &fs))
                .flatten()
        };
        if let Some(fresh) = stale {
            *task.fs.borrow_mut() = fresh;
        }
        let fs = CallerFs::known(task.fs.borrow().clone());
        let exe = task.mm.borrow().exe.clone();
        let mut ctx = Ctx::new(pid, (sys, call, regs), ns, &fs, exe.as_deref());
        ctx.fast = self.shared.fast.as_deref();
        handlers::decide(&mut ctx, kind)
    }

    fn on_seccomp(&mut self, pid: i32) -> io::Result<()> {
        let started = Instant::now();
        let mut regs = Regs::get(pid)?;
        let Some((sys, kind)) = self.table.get(regs.nr()) else {
            self.on_untrapped(pid, regs)?;
            return self.resume(pid);
        };
        // A call sent back keeps its mark while it runs: the kernel checks the filter again
        // after this stop, and would otherwise notify it again. Handlers see the program's
        // argument.
        let mark = self.tasks.get(&pid).and_then(|t| t.marked);
        if let Some(m) = mark {
            if let Some(mask) = m.mask {
                // The call has come: signals may interrupt it again.
                set_sigmask(pid, mask)?;
                if let Some(t) = self.tasks.get_mut(&pid) {
                    t.marked = Some(task::Marked { mask: None, ..m });
                }
            }
            regs.set_arg(m.at, m.arg);
        }
        self.refresh_after_exec(pid);
        if self.restarted_rewrite(pid, &regs) {
            return self.resume(pid);
        }
        let exec = matches!(kind, Kind::Exec { .. });
        if self.notifications && exec {
            // An exec taking a stop (rewritten, or a thread's): its event tells the outcome.
            let options = self.options_of(pid) | spawn::EXEC_EVENTS;
            ptrace(libc::PTRACE_SETOPTIONS, pid, options as usize)?;
        }
        let call = Call::decode(sys, &regs, pid);
        let mut d = self.decide(pid, &regs, (sys, call, kind));
        if matches!(d.action, Action::Remote(_)) {
            let mm = Rc::clone(&self.tasks[&pid].mm);
            if mm.borrow().scratch.is_none() {
                // An open or chdir is rewritten to a local copy: the scratch area comes
                // first, so the call (re-executed) is made once.
                return self.inject_scratch(pid, regs, &mm);
            }
            // Made with no lock held.
            if let Action::Remote(call) = std::mem::replace(&mut d.action, Action::Pass) {
                remote::make_decided(&mut d, &call, pid, self.ns());
            }
        }
        let action = std::mem::replace(&mut d.action, Action::Pass);
        let rewrite = match action {
            Action::Local(local) => Ok(local.rewrite()),
            Action::Rewrite { scratch, args } => Ok((scratch, args)),
            action => Err(action),
        };
        let (immediate, original_args) = match rewrite {
            Ok((scratch, args)) => {
                let mm = Rc::clone(&self.tasks[&pid].mm);
                if mm.borrow().scratch.is_none() {
                    // Map the scratch area first; the call re-executes and traps again.
                    return self.inject_scratch(pid, regs, &mm);
                }
                let restarts = handlers::may_restart(sys, &call, d.physical.as_deref());
                self.rewrite(pid, (&mut regs, mark), (scratch, args), restarts)?
            }
            Err(action) => (self.answer_at_stop(pid, &mut regs, sys, action, &d)?, None),
        };
        let task = self.tasks.get_mut(&pid).expect("task exists after decide");
        if immediate.is_some() {
            task.marked = None; // skipped, with the program's registers
        }
        if matches!(kind, Kind::Exec { .. }) {
            self.shared.execs.expect_event(pid, d.exe.take());
        }
        if let Some(result) = immediate {
            if self.tracer.wants_results() {
                let _ = self.tracer.record(&Record {
                    pid,
                    syscall: sys,
                    logical: d.logical.as_deref(),
                    physical: d.physical.as_deref(),
                    result,
                    duration: started.elapsed(),
                });
            }
            return self.resume(pid);
        }
        // Attached for this exec, roost stays until its event or its failure's exit stop.
        let watched = (exec && self.lazy) || task.marked.is_some();
        if d.after.is_none() && original_args.is_none() && !self.tracer.wants_results() && !watched
        {
            return self.resume(pid);
        }
        task.in_flight = Some(InFlight {
            after: d.after.unwrap_or(AfterExit::Record),
            sys,
            logical: d.logical,
            physical: d.physical,
            started,
            original_args,
        });
        ptrace(libc::PTRACE_SYSCALL, pid, 0)
    }

    /// A stop for a call the table does not hold (the rules of descriptor calls trap it):
    /// fstat and friends of a local copy answer with the remote identity; a syscall newer
    /// than roost knows fails with ENOSYS (it might take a path); the rest runs as it is.
    fn on_untrapped(&mut self, pid: i32, mut regs: Regs) -> io::Result<()> {
        let nr = regs.nr();
        if let Some(made) =
            copies::call_of(nr).and_then(|sys| copies::on_descriptor(pid, sys, &regs))
        {
            let ret = match made {
                Ok((ret, writes)) => write_or_fault(pid, ret, &writes),
                Err(e) => -(e as i64),
            };
            regs.skip_with(ret);
            regs.set(pid)?;
        } else if nr > i64::from(arch::REVIEWED_MAX) {
            handlers::report_untranslatable(&format!("syscall {nr}"), None);
            regs.skip_with(-(libc::ENOSYS as i64));
            regs.set(pid)?;
        }
        Ok(())
    }

    /// Delivers a decision other than a rewrite at the seccomp stop: a pass changes
    /// nothing; a failure or an emulation skips the call with its result (returned, for the
    /// trace).
    fn answer_at_stop(
        &mut self,
        pid: i32,
        regs: &mut Regs,
        sys: Sys,
        action: Action,
        d: &Decision,
    ) -> io::Result<Option<i64>> {
        let ret = match action {
            Action::Pass | Action::Local(_) | Action::Rewrite { .. } => return Ok(None),
            Action::Remote(_) => unreachable!("remote calls are made before delivery"),
            Action::Fail(e) => {
                if e == libc::ENOSYS {
                    handlers::report_untranslatable(sys.name(), d.logical.as_deref());
                }
                -(e as i64)
            }
            Action::Emulate { ret, writes } => write_or_fault(pid, ret, &writes),
        };
        regs.skip_with(ret);
        regs.set(pid)?;
        Ok(Some(ret))
    }

    /// Delivers a rewrite: the scratch bytes go into the thread's slot (a longer rewrite,
    /// an exec's rebuilt argv, gets room from the end of the area) and the arguments point
    /// there. Returns the immediate result when the call had to fail instead, and the
    /// program's own arguments when the kernel may restart the call (`restarts`).
    fn rewrite(
        &mut self,
        pid: i32,
        (regs, mark): (&mut Regs, Option<task::Marked>),
        (scratch, args): (Scratch, Vec<(usize, Arg)>),
        restarts: bool,
    ) -> io::Result<(Option<i64>, Option<[u64; 6]>)> {
        let mm = Rc::clone(&self.tasks[&pid].mm);
        let len = scratch.size() as u64;
        let place = if len <= SLOT_SIZE {
            mm.borrow_mut().slot(pid)
        } else {
            mm.borrow_mut().reserve(pid, len)
        };
        let outcome = match place {
            None => Err(libc::E2BIG),
            Some(at) => {
                let bytes = scratch.finish(at);
                let fresh = mm.borrow_mut().needs_write(at, &bytes);
                if fresh && memory::write(pid, at, &bytes).is_err() {
                    mm.borrow_mut().forget(at);
                    Err(libc::EFAULT)
                } else {
                    Ok(at)
                }
            }
        };
        let mut immediate = None;
        let mut original_args = None;
        match outcome {
            Err(e) => {
                regs.skip_with(-(e as i64));
                immediate = Some(-(e as i64));
            }
            Ok(slot) => {
                if restarts {
                    original_args = Some(std::array::from_fn(|i| regs.arg(i)));
                }
                // Only a pointer into the scratch area tells a restart from a new call.
                let points_here = args.iter().any(|(_, a)| matches!(a, Arg::Scratch(_)));
                let set: Vec<(usize, u64)> = args
                    .into_iter()
                    .map(|(i, a)| match a {
                        Arg::Value(v) => (i, v),
                        Arg::Scratch(off) => (i, slot + off as u64),
                    })
                    .collect();
                for &(i, v) in &set {
                    regs.set_arg(i, v);
                }
                let task = self.tasks.get_mut(&pid).expect("task exists after decide");
                task.last_rewrite = points_here.then(|| (regs.nr(), set));
            }
        }
        if let Some(m) = mark {
            // Its rewritten value, if the rewrite gave it one (sendto's length).
            regs.set_arg(m.at, marked(regs.arg(m.at)));
        }
        regs.set(pid)?;
        Ok((immediate, original_args))
    }

    /// Whether this is the thread's last rewritten call again, its arguments still the ones
    /// roost set: the kernel is restarting it after a signal, and its paths are physical
    /// already. (The calls known to restart get their own arguments back at their exit
    /// stop, see `handlers::may_restart`; this catches the rest, e.g. an open on a network
    /// file system.)
    fn restarted_rewrite(&self, pid: i32, regs: &Regs) -> bool {
        let Some((nr, args)) = self.tasks.get(&pid).and_then(|t| t.last_rewrite.as_ref()) else {
            return false;
        };
        *nr == regs.nr() && args.iter().all(|&(i, v)| regs.arg(i) == v)
    }

    /// Turns the trapped call into an anonymous mmap of the scratch area, waits for its exit
    /// stop, records the address and rewinds the thread so the original call runs again.
    fn inject_scratch(
        &mut self,
        pid: i32,
        saved: Regs,
        mm: &Rc<RefCell<AddrSpace>>,
    ) -> io::Result<()> {
        let mut r = saved.clone();
        r.set_nr(Sys::Mmap.nr());
        let args = [
            0,
            SCRATCH_SIZE,
            (libc::PROT_READ | libc::PROT_WRITE) as u64,
            (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE) as u64,
            u64::MAX,
            0,
        ];
        for (i, v) in args.into_iter().enumerate() {
            r.set_arg(i, v);
        }
        r.set(pid)?;
        ptrace(libc::PTRACE_SYSCALL, pid, 0)?;
        let mut deferred = 0;
        loop {
            let (_, status) = wait(pid)?;
            if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                self.on_gone(pid, status);
                return Ok(());
            }
            let sig = libc::WSTOPSIG(status);
            if sig == libc::SIGTRAP | 0x80 {
                break;
            }
            if status >> 16 == 0 {
                deferred = sig;
            } else if status >> 16 == libc::PTRACE_EVENT_STOP && STOP_SIGNALS.contains(&sig) {
                // The thread goes on to finish the mapping; it has taken the stop.
                if let Some(tgid) = procinfo::tgid(pid) {
                    self.shared.stops.stopped(tgid, pid);
                }
            }
            ptrace(libc::PTRACE_SYSCALL, pid, 0)?;
        }
        let addr = Regs::get(pid)?.ret();
        let mut back = saved.clone();
        if addr < 0 {
            // Retrying would only fail again (an address-space limit, say): the program's
            // call fails instead, as one that needed the memory itself would.
            eprintln!(
                "roost: cannot map the scratch area in pid {pid} (errno {}); its syscall {} fails with ENOMEM",
                -addr,
                saved.nr(),
            );
            back.set_ret(-(libc::ENOMEM as i64));
            self.unmark(pid, &mut back)?;
        } else {
            let addr = addr as u64;
            // Found again by its mark when roost attaches to the process, or a child, later.
            let _ = memory::write(pid, addr + SCRATCH_MARK_AT, SCRATCH_MARK);
            mm.borrow_mut().scratch = Some(addr);
            back.restart(saved.nr());
            if self.tasks.get(&pid).is_some_and(|t| t.marked.is_some()) {
                // Restarted as the ptrace stop it was sent back to take.
                let _ = self.mark(pid, &mut back)?;
            }
        }
        back.set(pid)?;
        self.resume_with(pid, deferred)
    }
}
