//! Moving a large write payload from the socket into the file without copying it through the
//! server's memory: `splice(2)` from the socket into a pipe, and from the pipe into the file.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// How much one pipe holds; large enough that a 64 KiB block moves in one pair of calls.
const PIPE_CAPACITY: i32 = 1 << 20;

/// A pipe kept by a connection for splicing.
pub struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity: usize,
}

/// Why a splice stopped.
pub enum SpliceError {
    /// The socket failed or closed: the connection cannot go on.
    Socket(io::Error),
    /// The file refused data after `written` bytes; every byte taken from the socket has
    /// been consumed, the rest of the payload is still there.
    File {
        written: u64,
        taken: u64,
        error: io::Error,
    },
}

impl Pipe {
    pub fn new() -> io::Result<Pipe> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: `fds` holds the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the two descriptors pipe2 just made, owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: a descriptor we own; F_SETPIPE_SZ takes an int.
        let size = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_CAPACITY) };
        let capacity = if size > 0 { size as usize } else { 64 * 1024 };
        Ok(Pipe {
            read,
            write,
            capacity,
        })
    }

    /// Moves exactly `len` bytes from `socket` into `file` at `offset`.
    pub fn socket_to_file(
        &self,
        socket: BorrowedFd<'_>,
        file: BorrowedFd<'_>,
        offset: u64,
        len: u64,
    ) -> Result<(), SpliceError> {
        let mut taken = 0u64;
        let mut file_offset = offset as libc::loff_t;
        while taken < len {
            let want = (len - taken).min(self.capacity as u64) as usize;
            // SAFETY: descriptors borrowed for the call; null offsets: the socket and the
            // pipe are read and written at their own positions.
            let n = retry(|| unsafe {
                libc::splice(
                    socket.as_raw_fd(),
                    std::ptr::null_mut(),
                    self.write.as_raw_fd(),
                    std::ptr::null_mut(),
                    want,
                    libc::SPLICE_F_MOVE,
                )
            })
            .map_err(SpliceError::Socket)?;
            if n == 0 {
                return Err(SpliceError::Socket(io::ErrorKind::UnexpectedEof.into()));
            }
            taken += n as u64;
            let mut in_pipe = n;
            while in_pipe > 0 {
                // SAFETY: descriptors borrowed for the call, and `file_offset` a live loff_t
                // the kernel advances.
                let moved = retry(|| unsafe {
                    libc::splice(
                        self.read.as_raw_fd(),
                        std::ptr::null_mut(),
                        file.as_raw_fd(),
                        &mut file_offset,
                        in_pipe,
                        libc::SPLICE_F_MOVE,
                    )
                });
                match moved {
                    Ok(m) if m > 0 => in_pipe -= m,
                    outcome => {
                        let error = outcome
                            .err()
                            .unwrap_or_else(|| io::ErrorKind::WriteZero.into());
                        self.drain(in_pipe).map_err(SpliceError::Socket)?;
                        let written = file_offset as u64 - offset;
                        return Err(SpliceError::File {
                            written,
                            taken,
                            error,
                        });
                    }
                }
            }
        }
        Ok(())
    }

    /// Empties `n` bytes left in the pipe after the file refused them.
    fn drain(&self, mut n: usize) -> io::Result<()> {
        let mut sink = vec![0u8; n.min(64 * 1024)];
        while n > 0 {
            let want = n.min(sink.len());
            // SAFETY: a descriptor we own, and `sink` writable for `want` <= its length bytes.
            let got = retry(|| unsafe {
                libc::read(self.read.as_raw_fd(), sink.as_mut_ptr().cast(), want)
            })?;
            if got == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            n -= got;
        }
        Ok(())
    }
}

/// Runs a system call until it is not interrupted; its non-negative result, or the error.
fn retry(mut call: impl FnMut() -> isize) -> io::Result<usize> {
    loop {
        let r = call();
        if r >= 0 {
            return Ok(r as usize);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}
