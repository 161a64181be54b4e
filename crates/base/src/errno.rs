//! The errno of a failed call, as drivers and servers answer it: the kernel's own, or EIO
//! for a failure that carries none (a short read, invalid data).

use std::borrow::Borrow;
use std::io;

/// The errno an I/O error carries, EIO when it carries none. Takes the error or a
/// reference to it, so `.map_err(errno_of)` reads as it says.
pub fn errno_of(e: impl Borrow<io::Error>) -> i32 {
    e.borrow().raw_os_error().unwrap_or(libc::EIO)
}

/// The errno of the last failed libc call on this thread (EIO when there is none).
pub fn last_errno() -> i32 {
    errno_of(io::Error::last_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_errno_or_eio() {
        let missing = std::fs::metadata("/surely/not/here").unwrap_err();
        assert_eq!(errno_of(&missing), libc::ENOENT);
        assert_eq!(errno_of(missing), libc::ENOENT);
        assert_eq!(
            errno_of(io::Error::from(io::ErrorKind::UnexpectedEof)),
            libc::EIO
        );
        // SAFETY: close of a descriptor number that is never open.
        assert_eq!(unsafe { libc::close(-1) }, -1);
        assert_eq!(last_errno(), libc::EBADF);
    }
}
