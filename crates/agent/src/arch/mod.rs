//! Architecture specifics live in one module per architecture; the rest of the agent uses
//! only what is re-exported here (registers, syscall numbers, the seccomp audit arch).

#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(target_arch = "x86_64")]
pub use x86_64::*;

#[cfg(not(target_arch = "x86_64"))]
compile_error!("roost-agent supports x86-64 only so far (aarch64 would add arch/aarch64.rs)");
