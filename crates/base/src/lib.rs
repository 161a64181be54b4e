//! Small helpers several roost crates need, kept below all of them (they depend on libc
//! only): the errno of a failed call ([`errno`]), the process's descriptor limit
//! ([`raise_descriptor_limit`]), calendar dates of Unix times ([`date`]) and the Landlock
//! system calls ([`landlock`]).

// Every unsafe block says why it is sound.
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod date;
pub mod errno;
pub mod landlock;

pub use errno::{errno_of, last_errno};

/// Lifts this process's soft limit on descriptors to its hard one (processes started
/// later inherit it: raise it after starting those that must keep theirs).
pub fn raise_descriptor_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a query and a change of this process's own limit, with a valid struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_descriptor_limit_rises_to_the_hard_one() {
        super::raise_descriptor_limit();
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: a query with a valid struct.
        let asked = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
        assert_eq!(asked, 0);
        assert_eq!(limit.rlim_cur, limit.rlim_max);
    }
}
