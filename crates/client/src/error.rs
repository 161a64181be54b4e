//! The client's error: a Chirp error code from the server, a broken connection, a malformed
//! reply, or a failed handshake — each with the errno a caller should report.

use std::{fmt, io};

use roost_wire::{ErrorCode, WireError};

/// Why a client operation failed.
#[derive(Debug)]
pub enum Error {
    /// The server answered with an error code; `errno` is what it means locally (usually
    /// `code.errno()`, but `ENODATA` for a missing extended attribute).
    Remote {
        /// The code on the result line.
        code: ErrorCode,
        /// The local errno for it.
        errno: i32,
    },
    /// The connection failed or timed out; the client is unusable afterwards.
    Io(io::Error),
    /// The server sent bytes the protocol does not allow; the client is unusable afterwards.
    Protocol(WireError),
    /// A request could not be written (an empty path, a NUL byte, a line over 1024 bytes);
    /// nothing was sent and the connection is intact.
    BadRequest(WireError),
    /// The caller's reader or writer failed during a transfer (the connection is intact unless
    /// the transfer had to be abandoned half-sent).
    Local(io::Error),
    /// No authentication method succeeded; lists the methods tried.
    AuthFailed(Vec<String>),
    /// A bad URL or address.
    BadAddress(String),
    /// An hmac key that cannot be used: a bad name, an empty secret, a file that cannot be
    /// read or that others may read. The message names the key and the file.
    BadKey(String),
    /// The peer answered the first handshake line with something no Chirp server says: it
    /// is another kind of server. Holds the first bytes it sent.
    NotChirp(Vec<u8>),
    /// The peer accepted the connection but did not finish the handshake within this time.
    Silent(std::time::Duration),
}

/// The client's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// A server error code with its usual errno.
    pub fn remote(code: ErrorCode) -> Error {
        Error::Remote {
            code,
            errno: code.errno(),
        }
    }

    /// A server error code for an extended-attribute call: `INVALID_REQUEST` there means the
    /// attribute does not exist (`ENODATA`), as cctools' client also reads it.
    pub fn remote_xattr(code: ErrorCode) -> Error {
        let errno = if code == ErrorCode::InvalidRequest {
            libc::ENODATA
        } else {
            code.errno()
        };
        Error::Remote { code, errno }
    }

    /// The errno a caller should report for this error.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Remote { errno, .. } => *errno,
            Error::Io(e) => io_errno(e),
            Error::Protocol(_) => libc::EPROTO,
            Error::BadRequest(WireError::LineTooLong) => libc::ENAMETOOLONG,
            Error::BadRequest(_) => libc::EINVAL,
            Error::Local(e) => roost_base::errno_of(e),
            Error::AuthFailed(_) => libc::EACCES,
            Error::BadAddress(_) | Error::BadKey(_) => libc::EINVAL,
            Error::NotChirp(_) => libc::EPROTO,
            Error::Silent(_) => libc::ETIMEDOUT,
        }
    }

    /// The Chirp code for this error (for a server relaying it, or for messages).
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Remote { code, .. } => *code,
            Error::Io(e) if io_errno(e) == libc::ETIMEDOUT => ErrorCode::TimedOut,
            Error::Io(_) => ErrorCode::Disconnected,
            Error::Protocol(_) => ErrorCode::Disconnected,
            Error::BadRequest(e) => e.code(),
            Error::Local(e) => ErrorCode::from_errno(roost_base::errno_of(e)),
            Error::AuthFailed(_) => ErrorCode::NotAuthenticated,
            Error::BadAddress(_) | Error::BadKey(_) => ErrorCode::InvalidRequest,
            Error::NotChirp(_) => ErrorCode::Disconnected,
            Error::Silent(_) => ErrorCode::TimedOut,
        }
    }

    /// True if the connection can no longer be used after this error.
    pub fn breaks_connection(&self) -> bool {
        matches!(
            self,
            Error::Io(_)
                | Error::Protocol(_)
                | Error::AuthFailed(_)
                | Error::NotChirp(_)
                | Error::Silent(_)
        )
    }

    /// True if the server answered this error code.
    pub fn is(&self, code: ErrorCode) -> bool {
        matches!(self, Error::Remote { code: c, .. } if *c == code)
    }
}

/// An I/O error in plain words for messages: "no such file or directory", without the
/// "(os error 2)" and the capital.
pub fn io_words(e: &io::Error) -> String {
    let text = e.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    let mut chars = text.chars();
    match chars.next() {
        Some(c) => c.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The errno of a socket error: a socket timeout (which the OS reports as `EAGAIN`) is
/// `ETIMEDOUT`; otherwise the OS error, or one chosen by kind.
fn io_errno(e: &io::Error) -> i32 {
    if matches!(
        e.kind(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
    ) {
        return libc::ETIMEDOUT;
    }
    if let Some(n) = e.raw_os_error() {
        return n;
    }
    match e.kind() {
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => libc::ECONNRESET,
        io::ErrorKind::NotConnected => libc::ENOTCONN,
        io::ErrorKind::InvalidInput => libc::EINVAL,
        _ => libc::EIO,
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Remote { code, errno }
                if *errno == libc::ENODATA && *code == ErrorCode::InvalidRequest =>
            {
                f.write_str("no such attribute")
            }
            Error::Remote { code, .. } => write!(f, "{code}"),
            Error::Io(e) if io_errno(e) == libc::ETIMEDOUT => f.write_str("timed out"),
            Error::Io(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                f.write_str("connection closed by server")
            }
            Error::Io(e) => write!(f, "{e}"),
            Error::Protocol(e) => write!(f, "protocol error: {e}"),
            Error::BadRequest(e) => write!(f, "cannot send request: {e}"),
            Error::Local(e) => write!(f, "{e}"),
            Error::AuthFailed(tried) => {
                write!(f, "authentication failed (tried {})", tried.join(", "))
            }
            Error::BadAddress(a) => write!(f, "bad address: {a}"),
            Error::BadKey(why) => f.write_str(why),
            Error::NotChirp(first) => write!(
                f,
                "the peer does not speak Chirp: it began \"{}\" (is this the port of a roost \
                 or chirp server?)",
                first.escape_ascii()
            ),
            Error::Silent(after) => write!(
                f,
                "connected, but the server did not answer the handshake within {} s",
                after.as_secs_f64()
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            Error::Protocol(e) | Error::BadRequest(e) => Some(e),
            Error::Local(e) => Some(e),
            Error::Remote { code, .. } => Some(code),
            _ => None,
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Io(e)
    }
}

impl From<WireError> for Error {
    fn from(e: WireError) -> Error {
        Error::Protocol(e)
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        match e {
            Error::Io(e) | Error::Local(e) => e,
            other => io::Error::from_raw_os_error(other.errno()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_errors_carry_code_and_errno() {
        let e = Error::remote(ErrorCode::DoesntExist);
        assert_eq!(
            (e.code(), e.errno()),
            (ErrorCode::DoesntExist, libc::ENOENT)
        );
        assert_eq!(e.to_string(), "no such file or directory");
        assert!(!e.breaks_connection());
        assert!(e.is(ErrorCode::DoesntExist));
    }

    #[test]
    fn invalid_request_on_an_xattr_call_means_no_attribute() {
        let e = Error::remote_xattr(ErrorCode::InvalidRequest);
        assert_eq!(e.errno(), libc::ENODATA);
        assert_eq!(e.to_string(), "no such attribute");
        assert_eq!(
            Error::remote_xattr(ErrorCode::NotAuthorized).errno(),
            libc::EACCES
        );
    }

    #[test]
    fn io_errors_break_the_connection_and_map_timeouts() {
        let e = Error::from(io::Error::from(io::ErrorKind::WouldBlock));
        assert_eq!(
            (e.errno(), e.code()),
            (libc::ETIMEDOUT, ErrorCode::TimedOut)
        );
        assert!(e.breaks_connection());
        let e = Error::from(io::Error::from(io::ErrorKind::UnexpectedEof));
        assert_eq!(e.errno(), libc::ECONNRESET);
        assert_eq!(e.to_string(), "connection closed by server");
    }

    #[test]
    fn unsendable_requests_and_local_failures_keep_the_connection() {
        let e = Error::BadRequest(WireError::LineTooLong);
        assert_eq!(e.errno(), libc::ENAMETOOLONG);
        assert!(!e.breaks_connection());
        let e = Error::Local(io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!((e.errno(), e.code()), (libc::ENOSPC, ErrorCode::NoSpace));
        assert!(!e.breaks_connection());
    }

    #[test]
    fn converts_to_io_error_with_errno() {
        let io: io::Error = Error::remote(ErrorCode::NotAuthorized).into();
        assert_eq!(io.raw_os_error(), Some(libc::EACCES));
    }
}
