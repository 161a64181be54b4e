//! The interposition agent behind `roost run`: a seccomp filter that traps only the calls
//! roost must see, one ptrace stop loop, tracee memory access, per-thread cwd and address
//! space state, and syscall handlers grouped by class. Paths go through `roost_vfs`.
//!
//! Layout: `arch` (registers, syscall numbers), `syscalls` (what each trapped call is),
//! `filter` (the BPF program), `guard` (roost's own processes kept out of the program's
//! reach), `spawn` (start and seize), `tracer` (the loop), `task`,
//! `memory`, `handlers::{path, exec, procfs, socket}`, `notify` (the supervisor answering
//! lookups delivered as seccomp notifications), `trace` (--trace/--summary).

pub mod arch;
pub mod attach;
pub mod call;
pub mod caller;
pub mod copies;
pub mod decision;
pub mod execs;
pub mod filter;
pub mod guard;
pub mod handlers;
pub mod memory;
pub mod notify;
pub mod procinfo;
pub mod remote;
pub mod spawn;
pub mod sys;
pub mod syscalls;
pub mod task;
pub mod trace;
pub mod tracer;
pub mod vfd;

pub use spawn::SpawnError;
pub use tracer::{run, Options};
