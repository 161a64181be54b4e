//! The interposition agent behind `roost run`: a seccomp filter that traps only the calls
//! roost must see, one ptrace stop loop, seccomp-notification supervisor threads, tracee
//! memory access, per-thread cwd and address space state, and syscall handlers grouped by
//! class. Paths go through `roost_vfs`.
//!
//! Layout: `arch` (registers, the syscall table `Sys`), `syscalls` (what each trapped call
//! is), `call` (a trapped call decoded once), `filter` (the BPF program), `guard` (roost's
//! own processes kept out of the program's reach), `fence` (the Landlock domain a root
//! program starts in), `spawn` (start and seize), `run` (one
//! run: the filter, the program started, both backends started on the record they share,
//! `shared`), `tracer` (the ptrace backend: the stop loop), `supervisor` (the notification
//! backend: the threads answering calls delivered as seccomp notifications, rules then the
//! main path), `handlers` (decide: resolve paths, the
//! classes' rules), `decision` (what they decide), `remote` (the driver-side executor),
//! `caller` (acting as the caller), `procinfo` (reading /proc), `programs` (each process's
//! program), `task`, `memory`, `call_log` (--trace/--summary). docs/agent.md draws a trapped
//! call's path through them.

pub mod arch;
pub mod attach;
pub mod call;
pub mod call_log;
pub mod caller;
pub mod copies;
pub mod decision;
pub mod fastpath;
pub mod fence;
pub mod filter;
pub mod guard;
pub mod handlers;
pub mod memory;
pub mod procinfo;
pub mod programs;
pub mod remote;
pub mod run;
pub mod shared;
pub mod spawn;
pub mod supervisor;
pub mod sys;
pub mod syscalls;
pub mod task;
pub mod tracer;
pub mod vfd;

pub use run::{run, Options};
pub use spawn::SpawnError;
