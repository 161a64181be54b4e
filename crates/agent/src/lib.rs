//! The interposition agent behind `roost run`: a seccomp filter that traps only path and fd
//! bookkeeping calls, one ptrace stop loop, and syscall handlers grouped by class.
