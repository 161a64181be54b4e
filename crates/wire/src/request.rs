//! Request lines: one [`Request`] variant per RPC, parsed by servers and written by clients.
//!
//! A request is one line of at most [`crate::LINE_MAX`] bytes: the RPC name, then its arguments
//! separated by spaces. Strings (paths, xattr names, subjects, rights, hash names, hosts) are
//! percent-encoded ([`crate::url`]) and may not decode to NUL or newline; numbers are signed
//! decimal; open flags are letters ([`OpenFlags`]). The RPC table below is the single source of
//! both the parser and the writer, so the two cannot drift apart.

use crate::error::WireError;
use crate::flags::OpenFlags;
use crate::url;

/// One argument type of a request line: how it is read from a word and written back.
trait Arg: Sized {
    fn parse(word: &[u8], what: &'static str) -> Result<Self, WireError>;
    fn write(&self, what: &'static str, out: &mut Vec<u8>) -> Result<(), WireError>;
}

/// Checks a raw string argument before it is encoded onto a line.
fn check_raw(raw: &[u8], what: &'static str) -> Result<(), WireError> {
    if raw.is_empty() {
        return Err(WireError::EmptyArgument(what));
    }
    match raw.iter().find(|&&b| b == 0 || b == b'\n') {
        Some(&b) => Err(WireError::ForbiddenByte(b)),
        None => Ok(()),
    }
}

impl Arg for Vec<u8> {
    fn parse(word: &[u8], _what: &'static str) -> Result<Self, WireError> {
        url::decode_field(word)
    }
    fn write(&self, what: &'static str, out: &mut Vec<u8>) -> Result<(), WireError> {
        check_raw(self, what)?;
        url::encode_into(self, out);
        Ok(())
    }
}

impl Arg for String {
    fn parse(word: &[u8], what: &'static str) -> Result<Self, WireError> {
        String::from_utf8(url::decode_field(word)?).map_err(|_| WireError::BadArgument(what))
    }
    fn write(&self, what: &'static str, out: &mut Vec<u8>) -> Result<(), WireError> {
        self.as_bytes().to_vec().write(what, out)
    }
}

impl Arg for OpenFlags {
    fn parse(word: &[u8], _what: &'static str) -> Result<Self, WireError> {
        OpenFlags::from_letters(word)
    }
    fn write(&self, _what: &'static str, out: &mut Vec<u8>) -> Result<(), WireError> {
        out.extend_from_slice(self.to_letters().as_bytes());
        Ok(())
    }
}

macro_rules! integer_arg {
    ($($t:ty),*) => {$(
        impl Arg for $t {
            fn parse(word: &[u8], what: &'static str) -> Result<Self, WireError> {
                crate::parse_i64(word)
                    .and_then(|n| <$t>::try_from(n).ok())
                    .ok_or(WireError::BadArgument(what))
            }
            fn write(&self, _what: &'static str, out: &mut Vec<u8>) -> Result<(), WireError> {
                out.extend_from_slice(self.to_string().as_bytes());
                Ok(())
            }
        }
    )*};
}
integer_arg!(i64, u64, i32, u32);

/// The words of a request line after the RPC name (separated by spaces or tabs).
struct Words<'a> {
    rest: &'a [u8],
}

fn is_separator(b: &u8) -> bool {
    *b == b' ' || *b == b'\t'
}

impl<'a> Words<'a> {
    fn new(line: &'a [u8]) -> Words<'a> {
        Words { rest: line }
    }

    fn next_word(&mut self) -> Option<&'a [u8]> {
        let start = self.rest.iter().position(|b| !is_separator(b))?;
        let rest = &self.rest[start..];
        let end = rest.iter().position(is_separator).unwrap_or(rest.len());
        self.rest = &rest[end..];
        Some(&rest[..end])
    }

    fn arg<T: Arg>(&mut self, what: &'static str) -> Result<T, WireError> {
        let word = self.next_word().ok_or(WireError::MissingArgument(what))?;
        T::parse(word, what)
    }
}

/// What the client sends after the request line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload {
    /// Nothing.
    None,
    /// Exactly this many bytes, right after the request line, before any reply (`pwrite`,
    /// `swrite`, the `setxattr` family, the job RPCs' JSON; also unsupported RPCs that carry
    /// data, such as `ticket_register`, which a server must read and discard before answering).
    Inline(u64),
    /// `putfile`: this many bytes, sent only after the server answers `0` to the request line.
    /// A negative answer means the client sends nothing.
    AfterAck(u64),
    /// `putstream`: after the server answers `0`, bytes until the client shuts down its side.
    UntilClose,
}

/// What the server sends after a non-negative result line (nothing follows a negative one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyBody {
    /// Nothing.
    None,
    /// As many raw bytes as the result says (`pread`, `sread`, `readlink`, `whoami`,
    /// `whoareyou`, `getfile`, `md5`, `hash`, `getxattr` and `listxattr` families,
    /// `job_status`, `job_wait`).
    Data,
    /// A stat line ([`crate::Stat`]): `open`, `stat`, `lstat`, `fstat`.
    StatLine,
    /// A statfs line ([`crate::StatFs`]): `statfs`, `fstatfs`.
    StatFsLine,
    /// `getdir`: one name per line, then an empty line.
    Names,
    /// `getlongdir`: a name line and a stat line per entry, then an empty line.
    LongNames,
    /// `getacl`: one `subject rights` line per entry, then an empty line.
    Acl,
    /// `putfile`: the result `0` is an acknowledgement; the client then sends the payload and
    /// the server answers a second result line (bytes written, or an error code).
    PutAck,
    /// `getstream`: after `0`, the file's bytes until the server closes the connection.
    Stream,
    /// `putstream`: after `0`, the server reads until the client closes; no further reply.
    StreamIn,
}

/// RPC names cctools knows that roost does not serve yet, with the index of the argument
/// giving the length of an inline payload, if the RPC has one. Servers answer them with
/// [`crate::ErrorCode::NotSupported`] after discarding that payload.
pub const UNSUPPORTED: &[(&str, Option<usize>)] = &[
    ("mkalloc", None),
    ("lsalloc", None),
    ("thirdput", None),
    ("localpath", None),
    ("audit", None),
    ("setrep", None),
    ("search", None),
    ("debug", None),
    ("ticket_register", Some(2)),
    ("ticket_delete", None),
    ("ticket_modify", None),
    ("ticket_get", None),
    ("ticket_list", None),
    ("cookie", None),
];

macro_rules! rpcs {
    ($(
        $(#[$doc:meta])*
        $variant:ident = $name:literal { $($field:ident : $ty:ty),* } => $payload:expr, $body:expr;
    )*) => {
        /// One Chirp request. Paths and names are raw (decoded) bytes.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub enum Request {
            $( $(#[$doc])* $variant { $( #[allow(missing_docs)] $field: $ty ),* }, )*
            /// An RPC cctools defines that roost does not serve (see [`UNSUPPORTED`]): the
            /// server answers `NOT_SUPPORTED`. `args` are the raw, still encoded words and
            /// `payload` the inline bytes that follow the line.
            Unsupported { name: String, args: Vec<Vec<u8>>, payload: u64 },
        }

        impl Request {
            /// The RPC name, the first word of the line.
            pub fn name(&self) -> &str {
                match self {
                    $( Request::$variant { .. } => $name, )*
                    Request::Unsupported { name, .. } => name,
                }
            }

            /// Every RPC name roost serves.
            pub const NAMES: &'static [&'static str] = &[$($name),*];

            fn parse_known(name: &[u8], words: &mut Words<'_>) -> Option<Result<Request, WireError>> {
                $(
                    if name == $name.as_bytes() {
                        #[allow(unused_mut)]
                        let mut build = || -> Result<Request, WireError> {
                            Ok(Request::$variant { $( $field: words.arg::<$ty>(stringify!($field))?, )* })
                        };
                        return Some(build());
                    }
                )*
                None
            }

            /// The position among the arguments of the length of the inline payload RPC
            /// `name` carries (always its `length` field), if it carries one.
            fn inline_length_position(name: &[u8]) -> Option<usize> {
                $(
                    if name == $name.as_bytes() {
                        #[allow(unused_mut)]
                        let probe = Request::$variant { $( $field: <$ty>::default(), )* };
                        if !matches!(probe.payload(), Payload::Inline(_)) {
                            return None;
                        }
                        let fields: &[&str] = &[$(stringify!($field)),*];
                        return fields.iter().position(|f| *f == "length");
                    }
                )*
                None
            }

            fn write_args(&self, out: &mut Vec<u8>) -> Result<(), WireError> {
                match self {
                    $( Request::$variant { $($field),* } => {
                        $( out.push(b' '); Arg::write($field, stringify!($field), out)?; )*
                    } )*
                    Request::Unsupported { args, .. } => {
                        // Raw words: they must still be words (no spaces or control bytes).
                        let is_word = |a: &Vec<u8>| !a.is_empty() && a.iter().all(|&b| b > b' ' && b != 0x7f);
                        if !args.iter().all(is_word) {
                            return Err(WireError::BadArgument("args"));
                        }
                        for a in args {
                            out.push(b' ');
                            out.extend_from_slice(a);
                        }
                    }
                }
                Ok(())
            }

            /// What the client sends after the request line.
            #[allow(unused_variables)]
            pub fn payload(&self) -> Payload {
                match self {
                    $( Request::$variant { $($field),* } => $payload, )*
                    Request::Unsupported { payload: 0, .. } => Payload::None,
                    Request::Unsupported { payload, .. } => Payload::Inline(*payload),
                }
            }

            /// What follows a non-negative result line.
            pub fn reply_body(&self) -> ReplyBody {
                match self {
                    $( Request::$variant { .. } => $body, )*
                    Request::Unsupported { .. } => ReplyBody::None,
                }
            }
        }
    };
}

use Payload as P;
use ReplyBody as B;

rpcs! {
    /// Open a file; the reply carries its stat line. The result is the new descriptor.
    Open = "open" { path: Vec<u8>, flags: OpenFlags, mode: u32 } => P::None, B::StatLine;
    /// Close a descriptor.
    Close = "close" { fd: i64 } => P::None, B::None;
    /// Read up to `length` bytes at `offset`; the result is the count, the bytes follow.
    Pread = "pread" { fd: i64, length: u64, offset: u64 } => P::None, B::Data;
    /// Write the `length` bytes that follow the line at `offset`; the result is the count.
    Pwrite = "pwrite" { fd: i64, length: u64, offset: u64 } => P::Inline(*length), B::None;
    /// Strided read: `stride_length` bytes every `stride_skip` bytes from `offset`.
    Sread = "sread" { fd: i64, length: u64, stride_length: u64, stride_skip: u64, offset: u64 } => P::None, B::Data;
    /// Strided write of the `length` bytes that follow the line.
    Swrite = "swrite" { fd: i64, length: u64, stride_length: u64, stride_skip: u64, offset: u64 } => P::Inline(*length), B::None;
    /// Stat an open descriptor.
    Fstat = "fstat" { fd: i64 } => P::None, B::StatLine;
    /// Statfs the file system of an open descriptor.
    Fstatfs = "fstatfs" { fd: i64 } => P::None, B::StatFsLine;
    /// Flush a descriptor to disk.
    Fsync = "fsync" { fd: i64 } => P::None, B::None;
    /// Change the mode of an open file.
    Fchmod = "fchmod" { fd: i64, mode: u32 } => P::None, B::None;
    /// Change the owner of an open file (cctools accepts and ignores it).
    Fchown = "fchown" { fd: i64, uid: i64, gid: i64 } => P::None, B::None;
    /// Truncate an open file.
    Ftruncate = "ftruncate" { fd: i64, length: u64 } => P::None, B::None;
    /// Stat a path, following symlinks.
    Stat = "stat" { path: Vec<u8> } => P::None, B::StatLine;
    /// Stat a path, not following a final symlink.
    Lstat = "lstat" { path: Vec<u8> } => P::None, B::StatLine;
    /// Statfs the file system holding a path.
    Statfs = "statfs" { path: Vec<u8> } => P::None, B::StatFsLine;
    /// Check access; `mode` is `R_OK|W_OK|X_OK` bits or `F_OK`.
    Access = "access" { path: Vec<u8>, mode: u32 } => P::None, B::None;
    /// Change the mode of a path.
    Chmod = "chmod" { path: Vec<u8>, mode: u32 } => P::None, B::None;
    /// Change the owner of a path (cctools accepts and ignores it).
    Chown = "chown" { path: Vec<u8>, uid: i64, gid: i64 } => P::None, B::None;
    /// Change the owner of a symlink (cctools accepts and ignores it).
    Lchown = "lchown" { path: Vec<u8>, uid: i64, gid: i64 } => P::None, B::None;
    /// Truncate a path.
    Truncate = "truncate" { path: Vec<u8>, length: u64 } => P::None, B::None;
    /// Set access and modification times (seconds).
    Utime = "utime" { path: Vec<u8>, actime: i64, modtime: i64 } => P::None, B::None;
    /// roost extension: [`Request::Utime`] not following a final symlink (a symlink's own
    /// times, as `lutimes`). Servers without it answer `-8`.
    Lutime = "lutime" { path: Vec<u8>, actime: i64, modtime: i64 } => P::None, B::None;
    /// Remove a file.
    Unlink = "unlink" { path: Vec<u8> } => P::None, B::None;
    /// Rename `path` to `new_path`.
    Rename = "rename" { path: Vec<u8>, new_path: Vec<u8> } => P::None, B::None;
    /// Hard-link `path` as `new_path`.
    Link = "link" { path: Vec<u8>, new_path: Vec<u8> } => P::None, B::None;
    /// Create a symlink at `path` pointing at `target` (any bytes).
    Symlink = "symlink" { target: Vec<u8>, path: Vec<u8> } => P::None, B::None;
    /// Read a symlink, at most `length` bytes.
    Readlink = "readlink" { path: Vec<u8>, length: u64 } => P::None, B::Data;
    /// Make a directory.
    Mkdir = "mkdir" { path: Vec<u8>, mode: u32 } => P::None, B::None;
    /// Remove an empty directory.
    Rmdir = "rmdir" { path: Vec<u8> } => P::None, B::None;
    /// Remove a file or a whole tree.
    Rmall = "rmall" { path: Vec<u8> } => P::None, B::None;
    /// List a directory's names.
    Getdir = "getdir" { path: Vec<u8> } => P::None, B::Names;
    /// List a directory's names with stat lines.
    Getlongdir = "getlongdir" { path: Vec<u8> } => P::None, B::LongNames;
    /// Fetch a whole file: the result is its length, the bytes follow.
    Getfile = "getfile" { path: Vec<u8> } => P::None, B::Data;
    /// Store a whole file of `length` bytes with `mode` (see [`ReplyBody::PutAck`]).
    Putfile = "putfile" { path: Vec<u8>, mode: u32, length: u64 } => P::AfterAck(*length), B::PutAck;
    /// Stream a file out until the server closes the connection.
    Getstream = "getstream" { path: Vec<u8> } => P::None, B::Stream;
    /// Stream a file in until the client closes the connection.
    Putstream = "putstream" { path: Vec<u8> } => P::UntilClose, B::StreamIn;
    /// MD5 of a file: the result is 16, the raw digest follows.
    Md5 = "md5" { path: Vec<u8> } => P::None, B::Data;
    /// Digest of a file with a named algorithm (`md5`, `sha1`; roost adds `sha256`); raw digest follows.
    Hash = "hash" { algorithm: String, path: Vec<u8> } => P::None, B::Data;
    /// The client's subject, at most `length` bytes, no newline.
    Whoami = "whoami" { length: u64 } => P::None, B::Data;
    /// The subject this server has on another server `host`.
    Whoareyou = "whoareyou" { host: String, length: u64 } => P::None, B::Data;
    /// A directory's ACL.
    Getacl = "getacl" { path: Vec<u8> } => P::None, B::Acl;
    /// Set `subject`'s rights in a directory's ACL (rights `n` or `-` remove the entry).
    Setacl = "setacl" { path: Vec<u8>, subject: String, rights: String } => P::None, B::None;
    /// Replace a directory's ACL with the caller holding `rights` plus admin.
    Resetacl = "resetacl" { path: Vec<u8>, rights: String } => P::None, B::None;
    /// Get an extended attribute.
    Getxattr = "getxattr" { path: Vec<u8>, name: Vec<u8> } => P::None, B::Data;
    /// Get an extended attribute of an open file.
    Fgetxattr = "fgetxattr" { fd: i64, name: Vec<u8> } => P::None, B::Data;
    /// Get an extended attribute, not following a final symlink.
    Lgetxattr = "lgetxattr" { path: Vec<u8>, name: Vec<u8> } => P::None, B::Data;
    /// List extended attribute names (each NUL-terminated).
    Listxattr = "listxattr" { path: Vec<u8> } => P::None, B::Data;
    /// List extended attribute names of an open file.
    Flistxattr = "flistxattr" { fd: i64 } => P::None, B::Data;
    /// List extended attribute names, not following a final symlink.
    Llistxattr = "llistxattr" { path: Vec<u8> } => P::None, B::Data;
    /// Set an extended attribute to the `length` bytes that follow the line.
    Setxattr = "setxattr" { path: Vec<u8>, name: Vec<u8>, length: u64, flags: i32 } => P::Inline(*length), B::None;
    /// Set an extended attribute of an open file.
    Fsetxattr = "fsetxattr" { fd: i64, name: Vec<u8>, length: u64, flags: i32 } => P::Inline(*length), B::None;
    /// Set an extended attribute, not following a final symlink.
    Lsetxattr = "lsetxattr" { path: Vec<u8>, name: Vec<u8>, length: u64, flags: i32 } => P::Inline(*length), B::None;
    /// Remove an extended attribute.
    Removexattr = "removexattr" { path: Vec<u8>, name: Vec<u8> } => P::None, B::None;
    /// Remove an extended attribute of an open file.
    Fremovexattr = "fremovexattr" { fd: i64, name: Vec<u8> } => P::None, B::None;
    /// Remove an extended attribute, not following a final symlink.
    Lremovexattr = "lremovexattr" { path: Vec<u8>, name: Vec<u8> } => P::None, B::None;
    /// Create a job from the JSON description of `length` bytes that follows the line (see
    /// `docs/pool.md`); the result is the new job's id.
    JobCreate = "job_create" { length: u64 } => P::Inline(*length), B::None;
    /// Start the jobs whose ids the JSON array of `length` bytes that follows lists.
    JobCommit = "job_commit" { length: u64 } => P::Inline(*length), B::None;
    /// Kill the jobs whose ids the JSON array that follows lists.
    JobKill = "job_kill" { length: u64 } => P::Inline(*length), B::None;
    /// The records of the jobs whose ids the JSON array that follows lists, as a JSON array.
    JobStatus = "job_status" { length: u64 } => P::Inline(*length), B::Data;
    /// Wait up to `timeout` seconds (negative: the server's longest wait) for job `id` (0: any
    /// of the caller's jobs; negative: any with an id of at least `-id`) to end; the data is a
    /// JSON array of the ended, unreaped jobs' records.
    JobWait = "job_wait" { id: i64, timeout: i64 } => P::None, B::Data;
    /// Forget the ended jobs whose ids the JSON array that follows lists.
    JobReap = "job_reap" { length: u64 } => P::Inline(*length), B::None;
    /// roost extension: why the connection's last refused request was refused (e.g. `needs
    /// 'w' on /data`), empty if nothing was refused. Servers without it answer an error.
    Explain = "explain" {} => P::None, B::Data;
    /// roost extension: open a group of files (the `length` bytes that follow describe the
    /// members, see `docs/group.md`), relaying to other servers; the reply data is the
    /// group's number and the subtree's merged answer.
    GroupOpen = "group_open" { length: u64 } => P::Inline(*length), B::Data;
    /// roost extension: apply the operation described by the `length` bytes that follow to
    /// every member of group `gid`; the reply data is the subtree's merged answer.
    GroupOp = "group_op" { gid: i64, length: u64 } => P::Inline(*length), B::Data;
    /// roost extension: up to `length` bytes of the server's accounting ledger from byte
    /// `offset`, whole records only (empty at the end); needs the `a` right on `/` (see
    /// `docs/pool.md`, Accounting).
    Ledger = "ledger" { offset: u64, length: u64 } => P::None, B::Data;
}

impl Request {
    /// Parses one request line (the trailing newline, and a `\r` before it, are optional).
    ///
    /// Empty lines give [`WireError::Empty`], which servers should skip as cctools does.
    /// Unknown RPC names give [`WireError::UnknownRpc`]; names in [`UNSUPPORTED`] give
    /// [`Request::Unsupported`].
    pub fn parse(line: &[u8]) -> Result<Request, WireError> {
        if line.len() > crate::LINE_MAX {
            return Err(WireError::LineTooLong);
        }
        let body = crate::strip_newline(line);
        let mut words = Words::new(body);
        let name = words.next_word().ok_or(WireError::Empty)?;
        if let Some(result) = Request::parse_known(name, &mut words) {
            let req = result?;
            return match words.next_word() {
                Some(_) => Err(WireError::ExtraArgument),
                None => Ok(req),
            };
        }
        let unsupported = UNSUPPORTED.iter().find(|(n, _)| n.as_bytes() == name);
        match unsupported {
            Some(&(n, payload_index)) => {
                let args: Vec<Vec<u8>> = std::iter::from_fn(|| words.next_word())
                    .map(<[u8]>::to_vec)
                    .collect();
                let payload = payload_index
                    .and_then(|i| args.get(i))
                    .and_then(|w| crate::parse_i64(w))
                    .and_then(|n| u64::try_from(n).ok())
                    .unwrap_or(0);
                Ok(Request::Unsupported {
                    name: n.to_string(),
                    args,
                    payload,
                })
            }
            None => Err(WireError::UnknownRpc(
                String::from_utf8_lossy(name).into_owned(),
            )),
        }
    }

    /// For a line [`Request::parse`] refused: the length of the inline payload its RPC
    /// carries, so a server can read past those bytes instead of taking them for requests.
    /// `None` if the RPC carries no inline payload (or is unknown); `Some(Err)` if it does
    /// but the length is missing or not a number (then nothing tells where the next request
    /// starts, and the connection cannot go on). A line cut short by [`crate::LINE_MAX`]
    /// counts as one whose length may be lost.
    pub fn announced_payload(line: &[u8]) -> Option<Result<u64, WireError>> {
        let mut words = Words::new(crate::strip_newline(line));
        let name = words.next_word()?;
        let position = Request::inline_length_position(name).or_else(|| {
            UNSUPPORTED
                .iter()
                .find(|(n, _)| n.as_bytes() == name)
                .and_then(|(_, index)| *index)
        })?;
        if line.len() > crate::LINE_MAX {
            return Some(Err(WireError::LineTooLong));
        }
        let word = (0..position).try_for_each(|_| words.next_word().map(drop));
        Some(
            word.and_then(|()| words.next_word())
                .ok_or(WireError::MissingArgument("length"))
                .and_then(|w| u64::parse(w, "length")),
        )
    }

    /// The request line, newline included. Fails if a string argument is empty or holds NUL
    /// or newline, or if the line would exceed [`crate::LINE_MAX`].
    pub fn to_line(&self) -> Result<Vec<u8>, WireError> {
        let mut out = Vec::with_capacity(64);
        out.extend_from_slice(self.name().as_bytes());
        self.write_args(&mut out)?;
        out.push(b'\n');
        if out.len() > crate::LINE_MAX {
            return Err(WireError::LineTooLong);
        }
        Ok(out)
    }

    /// The number of bytes that follow the request line immediately (before any reply):
    /// the length of an [`Payload::Inline`] payload, else 0.
    pub fn inline_payload_len(&self) -> u64 {
        match self.payload() {
            Payload::Inline(n) => n,
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests;
