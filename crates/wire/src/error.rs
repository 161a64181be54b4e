//! Chirp error codes, the one table mapping them to and from errno, and protocol parse errors.
//!
//! A negative result line carries an [`ErrorCode`]. [`TABLE`] is the only place that pairs codes
//! with errno values: going from errno to code takes the first row with that errno, going from
//! code to errno takes the first row with that code. Where cctools is lossy roost is kinder:
//! `ENODATA` (a missing extended attribute) becomes `INVALID_REQUEST`, which cctools' own client
//! already reads back as "no such attribute" for the xattr calls, instead of leaking out as
//! `UNKNOWN` (a lost connection); `ENOSYS`/`ENOTSUP` become `NOT_SUPPORTED`; timeouts, offline
//! and unknown errors get distinct errno values instead of all being `ECONNRESET`.

use std::fmt;

/// A Chirp error code: the negative number on a result line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i64)]
pub enum ErrorCode {
    /// The client has not authenticated.
    NotAuthenticated = -1,
    /// The client is authenticated but the ACL (or the system) forbids the operation.
    NotAuthorized = -2,
    /// No such file or directory.
    DoesntExist = -3,
    /// The file or directory already exists.
    AlreadyExists = -4,
    /// The file or value is too large.
    TooBig = -5,
    /// No space left, or a quota is exhausted.
    NoSpace = -6,
    /// The server is out of memory.
    NoMemory = -7,
    /// The request is malformed or an argument is invalid.
    InvalidRequest = -8,
    /// Too many open files.
    TooManyOpen = -9,
    /// The object is busy.
    Busy = -10,
    /// Try again later.
    TryAgain = -11,
    /// No such open file descriptor.
    BadFd = -12,
    /// The object is a directory.
    IsDir = -13,
    /// The object is not a directory.
    NotDir = -14,
    /// The directory is not empty.
    NotEmpty = -15,
    /// A link or rename across devices.
    CrossDeviceLink = -16,
    /// The service is offline.
    Offline = -17,
    /// The operation timed out.
    TimedOut = -18,
    /// The connection was lost.
    Disconnected = -19,
    /// A group or host is unreachable.
    GrpUnreachable = -20,
    /// No such job.
    NoSuchJob = -21,
    /// The operation does not apply to a pipe.
    IsAPipe = -22,
    /// The server does not support this operation.
    NotSupported = -23,
    /// A file name is too long.
    NameTooLong = -24,
    /// Any other error.
    Unknown = -127,
}

/// Every code, in numeric order from -1 down to -127.
pub const ALL_CODES: [ErrorCode; 25] = [
    ErrorCode::NotAuthenticated,
    ErrorCode::NotAuthorized,
    ErrorCode::DoesntExist,
    ErrorCode::AlreadyExists,
    ErrorCode::TooBig,
    ErrorCode::NoSpace,
    ErrorCode::NoMemory,
    ErrorCode::InvalidRequest,
    ErrorCode::TooManyOpen,
    ErrorCode::Busy,
    ErrorCode::TryAgain,
    ErrorCode::BadFd,
    ErrorCode::IsDir,
    ErrorCode::NotDir,
    ErrorCode::NotEmpty,
    ErrorCode::CrossDeviceLink,
    ErrorCode::Offline,
    ErrorCode::TimedOut,
    ErrorCode::Disconnected,
    ErrorCode::GrpUnreachable,
    ErrorCode::NoSuchJob,
    ErrorCode::IsAPipe,
    ErrorCode::NotSupported,
    ErrorCode::NameTooLong,
    ErrorCode::Unknown,
];

/// The one table between Chirp codes and errno. The first row naming a code gives that code's
/// errno; the first row naming an errno gives that errno's code. Errno values absent from the
/// table map to [`ErrorCode::Unknown`].
pub const TABLE: &[(ErrorCode, i32)] = &[
    (ErrorCode::NotAuthorized, libc::EACCES),
    (ErrorCode::NotAuthorized, libc::EPERM),
    (ErrorCode::NotAuthorized, libc::EROFS),
    (ErrorCode::NotAuthenticated, libc::EACCES),
    (ErrorCode::DoesntExist, libc::ENOENT),
    (ErrorCode::AlreadyExists, libc::EEXIST),
    (ErrorCode::TooBig, libc::EFBIG),
    (ErrorCode::TooBig, libc::E2BIG),
    (ErrorCode::TooBig, libc::ERANGE),
    (ErrorCode::NoSpace, libc::ENOSPC),
    (ErrorCode::NoSpace, libc::EDQUOT),
    (ErrorCode::NoMemory, libc::ENOMEM),
    (ErrorCode::InvalidRequest, libc::EINVAL),
    (ErrorCode::InvalidRequest, libc::ENODATA),
    (ErrorCode::TooManyOpen, libc::EMFILE),
    (ErrorCode::TooManyOpen, libc::ENFILE),
    (ErrorCode::Busy, libc::EBUSY),
    (ErrorCode::Busy, libc::ETXTBSY),
    (ErrorCode::TryAgain, libc::EAGAIN),
    (ErrorCode::TryAgain, libc::EINTR),
    (ErrorCode::BadFd, libc::EBADF),
    (ErrorCode::IsDir, libc::EISDIR),
    (ErrorCode::NotDir, libc::ENOTDIR),
    (ErrorCode::NotEmpty, libc::ENOTEMPTY),
    (ErrorCode::CrossDeviceLink, libc::EXDEV),
    (ErrorCode::Offline, libc::EHOSTDOWN),
    (ErrorCode::Offline, libc::ENETDOWN),
    (ErrorCode::TimedOut, libc::ETIMEDOUT),
    (ErrorCode::Disconnected, libc::ECONNRESET),
    (ErrorCode::Disconnected, libc::EPIPE),
    (ErrorCode::Disconnected, libc::ECONNABORTED),
    (ErrorCode::GrpUnreachable, libc::EHOSTUNREACH),
    (ErrorCode::GrpUnreachable, libc::ENETUNREACH),
    (ErrorCode::NoSuchJob, libc::ESRCH),
    (ErrorCode::IsAPipe, libc::ESPIPE),
    (ErrorCode::NotSupported, libc::ENOTSUP),
    (ErrorCode::NotSupported, libc::ENOSYS),
    (ErrorCode::NameTooLong, libc::ENAMETOOLONG),
    (ErrorCode::Unknown, libc::EIO),
];

impl ErrorCode {
    /// The code for a result number, if it is one of the defined codes.
    pub fn from_i64(n: i64) -> Option<ErrorCode> {
        ALL_CODES.iter().copied().find(|c| c.as_i64() == n)
    }

    /// The code for a negative result number; undefined negative numbers become `Unknown`.
    pub fn from_result(n: i64) -> ErrorCode {
        ErrorCode::from_i64(n).unwrap_or(ErrorCode::Unknown)
    }

    /// The number sent on the result line.
    pub fn as_i64(self) -> i64 {
        self as i64
    }

    /// The code for an errno value (first row of [`TABLE`] with that errno).
    pub fn from_errno(errno: i32) -> ErrorCode {
        TABLE
            .iter()
            .find(|(_, e)| *e == errno)
            .map_or(ErrorCode::Unknown, |(c, _)| *c)
    }

    /// The code for an I/O error, by its errno; errors without one are `Unknown`.
    pub fn from_io(err: &std::io::Error) -> ErrorCode {
        err.raw_os_error()
            .map_or(ErrorCode::Unknown, ErrorCode::from_errno)
    }

    /// The errno this code stands for (first row of [`TABLE`] with that code).
    pub fn errno(self) -> i32 {
        TABLE
            .iter()
            .find(|(c, _)| *c == self)
            .map_or(libc::EIO, |(_, e)| *e)
    }

    /// The name used in cctools' headers, without the `CHIRP_ERROR_` prefix.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::NotAuthenticated => "NOT_AUTHENTICATED",
            ErrorCode::NotAuthorized => "NOT_AUTHORIZED",
            ErrorCode::DoesntExist => "DOESNT_EXIST",
            ErrorCode::AlreadyExists => "ALREADY_EXISTS",
            ErrorCode::TooBig => "TOO_BIG",
            ErrorCode::NoSpace => "NO_SPACE",
            ErrorCode::NoMemory => "NO_MEMORY",
            ErrorCode::InvalidRequest => "INVALID_REQUEST",
            ErrorCode::TooManyOpen => "TOO_MANY_OPEN",
            ErrorCode::Busy => "BUSY",
            ErrorCode::TryAgain => "TRY_AGAIN",
            ErrorCode::BadFd => "BAD_FD",
            ErrorCode::IsDir => "IS_DIR",
            ErrorCode::NotDir => "NOT_DIR",
            ErrorCode::NotEmpty => "NOT_EMPTY",
            ErrorCode::CrossDeviceLink => "CROSS_DEVICE_LINK",
            ErrorCode::Offline => "OFFLINE",
            ErrorCode::TimedOut => "TIMED_OUT",
            ErrorCode::Disconnected => "DISCONNECTED",
            ErrorCode::GrpUnreachable => "GRP_UNREACHABLE",
            ErrorCode::NoSuchJob => "NO_SUCH_JOB",
            ErrorCode::IsAPipe => "IS_A_PIPE",
            ErrorCode::NotSupported => "NOT_SUPPORTED",
            ErrorCode::NameTooLong => "NAME_TOO_LONG",
            ErrorCode::Unknown => "UNKNOWN",
        }
    }

    /// A short human message.
    pub fn message(self) -> &'static str {
        match self {
            ErrorCode::NotAuthenticated => "not authenticated",
            ErrorCode::NotAuthorized => "permission denied",
            ErrorCode::DoesntExist => "no such file or directory",
            ErrorCode::AlreadyExists => "file exists",
            ErrorCode::TooBig => "too big",
            ErrorCode::NoSpace => "no space left",
            ErrorCode::NoMemory => "out of memory",
            ErrorCode::InvalidRequest => "invalid request",
            ErrorCode::TooManyOpen => "too many open files",
            ErrorCode::Busy => "busy",
            ErrorCode::TryAgain => "try again",
            ErrorCode::BadFd => "bad file descriptor",
            ErrorCode::IsDir => "is a directory",
            ErrorCode::NotDir => "not a directory",
            ErrorCode::NotEmpty => "directory not empty",
            ErrorCode::CrossDeviceLink => "cross-device link",
            ErrorCode::Offline => "service offline",
            ErrorCode::TimedOut => "timed out",
            ErrorCode::Disconnected => "disconnected",
            ErrorCode::GrpUnreachable => "unreachable",
            ErrorCode::NoSuchJob => "no such job",
            ErrorCode::IsAPipe => "is a pipe",
            ErrorCode::NotSupported => "operation not supported",
            ErrorCode::NameTooLong => "file name too long",
            ErrorCode::Unknown => "unknown error",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for ErrorCode {}

/// Why a line could not be parsed or built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    /// The line (newline included) is longer than [`crate::LINE_MAX`] bytes.
    LineTooLong,
    /// The line is empty (cctools ignores such lines; so should a server).
    Empty,
    /// The first word names no RPC cctools or roost knows.
    UnknownRpc(String),
    /// An argument is missing.
    MissingArgument(&'static str),
    /// There are more arguments than the RPC takes.
    ExtraArgument,
    /// An argument is not a valid number, flag set or string.
    BadArgument(&'static str),
    /// A `%` escape is not followed by two hex digits.
    BadEscape,
    /// A decoded string holds a byte no path or name may hold (NUL or newline).
    ForbiddenByte(u8),
    /// A string argument is empty, which the line format cannot express.
    EmptyArgument(&'static str),
    /// A reply line is not what the protocol says it must be.
    BadReply(&'static str),
}

impl WireError {
    /// The code a server answers with when a request fails to parse.
    pub fn code(&self) -> ErrorCode {
        match self {
            WireError::LineTooLong => ErrorCode::NameTooLong,
            _ => ErrorCode::InvalidRequest,
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::LineTooLong => write!(f, "line longer than {} bytes", crate::LINE_MAX),
            WireError::Empty => f.write_str("empty line"),
            WireError::UnknownRpc(name) => write!(f, "unknown request {name:?}"),
            WireError::MissingArgument(what) => write!(f, "missing argument {what}"),
            WireError::ExtraArgument => f.write_str("too many arguments"),
            WireError::BadArgument(what) => write!(f, "bad argument {what}"),
            WireError::BadEscape => f.write_str("bad %-escape"),
            WireError::ForbiddenByte(0) => f.write_str("NUL byte in a name"),
            WireError::ForbiddenByte(b) => write!(f, "forbidden byte {b:#04x} in a name"),
            WireError::EmptyArgument(what) => write!(f, "empty argument {what}"),
            WireError::BadReply(what) => write!(f, "malformed reply: {what}"),
        }
    }
}

impl std::error::Error for WireError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_row_and_round_trips_through_its_errno() {
        for code in ALL_CODES {
            assert!(
                TABLE.iter().any(|(c, _)| *c == code),
                "{code:?} missing from TABLE"
            );
            let back = ErrorCode::from_errno(code.errno());
            // NotAuthenticated shares EACCES with NotAuthorized, which comes first.
            if code != ErrorCode::NotAuthenticated {
                assert_eq!(back, code, "{code:?}");
            }
        }
    }

    #[test]
    fn every_errno_row_maps_to_its_code_or_an_earlier_one() {
        for (code, errno) in TABLE {
            let first = TABLE.iter().find(|(_, e)| e == errno).unwrap().0;
            assert_eq!(ErrorCode::from_errno(*errno), first);
            assert!(first == *code || first == ErrorCode::NotAuthorized);
        }
    }

    #[test]
    fn codes_match_cctools_numbers() {
        assert_eq!(ErrorCode::NotAuthenticated.as_i64(), -1);
        assert_eq!(ErrorCode::InvalidRequest.as_i64(), -8);
        assert_eq!(ErrorCode::NotSupported.as_i64(), -23);
        assert_eq!(ErrorCode::NameTooLong.as_i64(), -24);
        assert_eq!(ErrorCode::Unknown.as_i64(), -127);
        for (i, code) in ALL_CODES.iter().take(24).enumerate() {
            assert_eq!(code.as_i64(), -(i as i64) - 1);
        }
    }

    #[test]
    fn missing_xattr_is_invalid_request_not_a_lost_connection() {
        assert_eq!(
            ErrorCode::from_errno(libc::ENODATA),
            ErrorCode::InvalidRequest
        );
    }

    #[test]
    fn unmapped_errno_and_numbers_are_unknown() {
        assert_eq!(
            ErrorCode::from_errno(libc::ELOOP + 10_000),
            ErrorCode::Unknown
        );
        assert_eq!(ErrorCode::from_result(-99), ErrorCode::Unknown);
        assert_eq!(ErrorCode::from_i64(-99), None);
        assert_eq!(ErrorCode::Unknown.errno(), libc::EIO);
    }

    #[test]
    fn display_is_a_human_message() {
        assert_eq!(
            ErrorCode::DoesntExist.to_string(),
            "no such file or directory"
        );
        assert_eq!(
            WireError::UnknownRpc("frob".into()).to_string(),
            "unknown request \"frob\""
        );
    }
}
