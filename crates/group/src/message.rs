//! The relay protocol's messages, carried as the payloads and replies of the `group_open`
//! and `group_op` RPCs (see `docs/group.md`).
//!
//! - [`OpenRequest`]: the members (index, server, path) of a subtree, who the recipient is,
//!   the fan-out, the wave timeout, open flags, the delegation token and whether the
//!   members are written whole under temporary names ([`OpenRequest::replace`]).
//! - [`OpRequest`]: one file operation with its status and data aggregations.
//! - [`Reply`]: the merged partials of a subtree, the members that failed (by error code),
//!   the members whose relay did not answer, and the subtree's depth.

use crate::aggregate::{DataAggr, DataPartial, StatusAggr, StatusPartial};
use crate::blocks::Piece;
use crate::codec::{DecodeError, Decoder, Encoder};
use crate::delegation::Token;
use crate::ranges::IndexSet;
use roost_wire::OpenFlags;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// One member file: its index in the group, its server (`host:port`) and its path there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub index: u32,
    pub server: String,
    pub path: String,
}

/// `group_open`'s payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenRequest {
    /// The recipient's own `host:port` as the members name it: members on it are opened
    /// locally, the others are relayed.
    pub local: String,
    /// Most children a relay connects to.
    pub fanout: u32,
    /// How long a relay waits for its children in one wave, in milliseconds.
    pub timeout_ms: u64,
    pub flags: OpenFlags,
    pub mode: u32,
    pub token: Option<Token>,
    pub members: Vec<Member>,
    /// Each member is written whole: a new empty file under a hidden temporary name beside
    /// it takes its place for the group's writes, and only [`Op::Commit`] renames it over
    /// the member (pcp). Encoded only when set, as a trailing `1`, so servers that predate
    /// it refuse such an open as malformed instead of truncating members in place, and
    /// still accept every other open.
    pub replace: bool,
}

/// The trailing option bit of an [`OpenRequest`] that sets [`OpenRequest::replace`].
const OPEN_REPLACE: u64 = 1;

impl OpenRequest {
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::new();
        e.text(&self.local)
            .uint(self.fanout.into())
            .uint(self.timeout_ms)
            .text(&self.flags.to_letters())
            .uint(self.mode.into());
        match &self.token {
            Some(t) => {
                e.uint(1);
                t.encode(&mut e);
            }
            None => {
                e.uint(0);
            }
        }
        e.uint(self.members.len() as u64);
        for m in &self.members {
            e.uint(m.index.into()).text(&m.server).text(&m.path);
        }
        if self.replace {
            e.uint(OPEN_REPLACE);
        }
        e.finish()
    }

    pub fn decode(bytes: &[u8]) -> Result<OpenRequest, DecodeError> {
        let mut d = Decoder::new(bytes);
        let local = d.text()?;
        let fanout = d.u32()?;
        if fanout == 0 {
            return Err(DecodeError("fan-out 0"));
        }
        let timeout_ms = d.uint()?;
        let flags = OpenFlags::from_letters(d.text()?.as_bytes())
            .map_err(|_| DecodeError("bad open flags"))?;
        let mode = d.u32()?;
        let token = match d.uint()? {
            0 => None,
            1 => Some(Token::decode(&mut d)?),
            _ => return Err(DecodeError("bad token flag")),
        };
        let n = d.count()?;
        if n > crate::MAX_MEMBERS {
            return Err(DecodeError("too many members"));
        }
        let mut members = Vec::with_capacity(n);
        for _ in 0..n {
            members.push(Member {
                index: d.u32()?,
                server: d.text()?,
                path: d.text()?,
            });
        }
        // Options follow only when some are set (0 would be a second spelling of none).
        let replace = if d.at_end() {
            false
        } else {
            match d.uint()? {
                OPEN_REPLACE => true,
                _ => return Err(DecodeError("unknown open options")),
            }
        };
        d.end()?;
        if replace && !flags.write {
            return Err(DecodeError("replacing members needs write access"));
        }
        Ok(OpenRequest {
            local,
            fanout,
            timeout_ms,
            flags,
            mode,
            token,
            members,
            replace,
        })
    }
}

/// `lseek`'s origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Whence {
    Set,
    Current,
    End,
}

/// A group file operation. Data to write is borrowed where it can be (a relay's from the
/// request it received, a client's from the caller's buffer), so a 1 MiB write is not copied
/// again at every node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op<'a> {
    /// Read up to `length` bytes at each member's offset, advancing it.
    Read {
        length: u64,
    },
    Pread {
        length: u64,
        offset: u64,
    },
    /// Write `data` at each member's offset, advancing it.
    Write {
        data: Cow<'a, [u8]>,
    },
    Pwrite {
        data: Cow<'a, [u8]>,
        offset: u64,
    },
    Lseek {
        offset: i64,
        whence: Whence,
    },
    Fstat,
    Fsync,
    Ftruncate {
        length: u64,
    },
    Close,
    /// Collect the members' statuses of the last operation (`gstatus`).
    Status,
    /// Rebuild each member from its old blocks and new bytes (`psync`, see
    /// [`crate::blocks`]); the result is the new length.
    Patch {
        block_size: u32,
        pieces: Vec<Piece>,
    },
    /// Read the process table under each member directory (`ptop`, see [`crate::procs`]);
    /// the result is the number of processes.
    ProcTable,
    /// Rename each member's temporary over the member (groups opened with
    /// [`OpenRequest::replace`]): a member that fails keeps its old file, and its temporary
    /// is removed.
    Commit,
}

impl Op<'_> {
    pub fn name(&self) -> &'static str {
        match self {
            Op::Read { .. } => "read",
            Op::Pread { .. } => "pread",
            Op::Write { .. } => "write",
            Op::Pwrite { .. } => "pwrite",
            Op::Lseek { .. } => "lseek",
            Op::Fstat => "fstat",
            Op::Fsync => "fsync",
            Op::Ftruncate { .. } => "ftruncate",
            Op::Close => "close",
            Op::Status => "status",
            Op::Patch { .. } => "patch",
            Op::ProcTable => "proctable",
            Op::Commit => "commit",
        }
    }

    /// Whether the operation changes a member's bytes: a member being replaced that fails
    /// one is given up (see [`Op::Commit`]).
    pub fn changes_data(&self) -> bool {
        matches!(
            self,
            Op::Write { .. }
                | Op::Pwrite { .. }
                | Op::Ftruncate { .. }
                | Op::Fsync
                | Op::Patch { .. }
        )
    }

    fn encode(&self, e: &mut Encoder) {
        e.text(self.name());
        match self {
            Op::Read { length } => {
                e.uint(*length);
            }
            Op::Pread { length, offset } => {
                e.uint(*length).uint(*offset);
            }
            Op::Write { data } => {
                e.blob(data);
            }
            Op::Pwrite { data, offset } => {
                e.blob(data).uint(*offset);
            }
            Op::Lseek { offset, whence } => {
                let w = match whence {
                    Whence::Set => 0,
                    Whence::Current => 1,
                    Whence::End => 2,
                };
                e.int(*offset).uint(w);
            }
            Op::Ftruncate { length } => {
                e.uint(*length);
            }
            Op::Fstat | Op::Fsync | Op::Close | Op::Status | Op::ProcTable | Op::Commit => {}
            Op::Patch { block_size, pieces } => {
                e.uint((*block_size).into());
                crate::blocks::encode_pieces(e, pieces);
            }
        }
    }

    fn decode<'a>(d: &mut Decoder<'a>) -> Result<Op<'a>, DecodeError> {
        Ok(match d.text()?.as_str() {
            "read" => Op::Read { length: d.uint()? },
            "pread" => Op::Pread {
                length: d.uint()?,
                offset: d.uint()?,
            },
            "write" => Op::Write {
                data: Cow::Borrowed(d.blob()?),
            },
            "pwrite" => Op::Pwrite {
                data: Cow::Borrowed(d.blob()?),
                offset: d.uint()?,
            },
            "lseek" => Op::Lseek {
                offset: d.int()?,
                whence: match d.uint()? {
                    0 => Whence::Set,
                    1 => Whence::Current,
                    2 => Whence::End,
                    _ => return Err(DecodeError("bad whence")),
                },
            },
            "fstat" => Op::Fstat,
            "fsync" => Op::Fsync,
            "ftruncate" => Op::Ftruncate { length: d.uint()? },
            "close" => Op::Close,
            "status" => Op::Status,
            "proctable" => Op::ProcTable,
            "commit" => Op::Commit,
            "patch" => Op::Patch {
                block_size: match d.u32()? {
                    0 => return Err(DecodeError("block size 0")),
                    n => n,
                },
                pieces: crate::blocks::decode_pieces(d)?,
            },
            _ => return Err(DecodeError("unknown operation")),
        })
    }
}

/// `group_op`'s payload.
#[derive(Clone, Debug, PartialEq)]
pub struct OpRequest<'a> {
    pub op: Op<'a>,
    pub status: StatusAggr,
    pub data: DataAggr,
    /// Only these members take part (`None`: all); the others are left alone and are
    /// neither counted nor failed.
    pub only: Option<IndexSet>,
}

impl<'a> OpRequest<'a> {
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::new();
        self.op.encode(&mut e);
        e.text(self.status.name());
        self.data.encode(&mut e);
        match &self.only {
            None => {
                e.uint(0);
            }
            Some(set) => {
                e.uint(1).set(set);
            }
        }
        e.finish()
    }

    pub fn decode(bytes: &'a [u8]) -> Result<OpRequest<'a>, DecodeError> {
        let mut d = Decoder::new(bytes);
        let op = Op::decode(&mut d)?;
        let status = StatusAggr::parse(&d.text()?).ok_or(DecodeError("unknown aggregation"))?;
        let data = DataAggr::decode(&mut d)?;
        let only = match d.uint()? {
            0 => None,
            1 => Some(d.set()?),
            _ => return Err(DecodeError("bad member filter")),
        };
        d.end()?;
        Ok(OpRequest {
            op,
            status,
            data,
            only,
        })
    }
}

/// A subtree's answer to an open or an operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    pub status: StatusPartial,
    pub data: DataPartial,
    /// Members that failed, by (negative) Chirp error code.
    pub failures: BTreeMap<i64, IndexSet>,
    /// Members whose relay or server did not answer (also listed in `failures`, as
    /// `TIMED_OUT` or `DISCONNECTED`).
    pub silent: IndexSet,
    /// Levels of servers in the subtree that answered (1 for a leaf).
    pub depth: u32,
}

impl Reply {
    /// An empty reply for an operation's aggregations.
    pub fn empty(status: StatusAggr, data: &DataAggr) -> Reply {
        Reply {
            status: status.empty(),
            data: data.empty(),
            failures: BTreeMap::new(),
            silent: IndexSet::new(),
            depth: 0,
        }
    }

    /// Records that `members` failed with `code`.
    pub fn fail(&mut self, code: i64, members: &IndexSet) {
        self.failures
            .entry(code)
            .and_modify(|s| s.extend(members))
            .or_insert_with(|| members.clone());
    }

    /// Every member that failed.
    pub fn failed(&self) -> IndexSet {
        self.failures
            .values()
            .fold(IndexSet::new(), |all, s| all.union(s))
    }

    /// Merges a child's reply into this one; a reply of other aggregations is refused
    /// before anything changes.
    pub fn merge(&mut self, other: Reply) -> Result<(), crate::aggregate::Mismatch> {
        let same_data = std::mem::discriminant(&self.data) == std::mem::discriminant(&other.data);
        if self.status.aggregation() != other.status.aggregation() || !same_data {
            return Err(crate::aggregate::Mismatch);
        }
        self.status = self.status.merge(other.status)?;
        let data = std::mem::replace(&mut self.data, DataPartial::None);
        self.data = data.merge(other.data)?;
        for (code, members) in other.failures {
            self.fail(code, &members);
        }
        self.silent.extend(&other.silent);
        self.depth = self.depth.max(other.depth);
        Ok(())
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut e = Encoder::new();
        self.status.encode(&mut e);
        self.data.encode(&mut e);
        e.uint(self.failures.len() as u64);
        for (code, members) in &self.failures {
            e.int(*code).set(members);
        }
        e.set(&self.silent).uint(self.depth.into());
        e.finish()
    }

    pub fn decode(bytes: &[u8]) -> Result<Reply, DecodeError> {
        let mut d = Decoder::new(bytes);
        let status = StatusPartial::decode(&mut d)?;
        let data = DataPartial::decode(&mut d)?;
        let mut failures = BTreeMap::new();
        for _ in 0..d.count()? {
            let code = d.int()?;
            if code >= 0 {
                return Err(DecodeError("failure code not negative"));
            }
            failures.insert(code, d.set()?);
        }
        let silent = d.set()?;
        let depth = d.u32()?;
        d.end()?;
        Ok(Reply {
            status,
            data,
            failures,
            silent,
            depth,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lines::{LineSpec, Pattern};

    #[test]
    fn the_example_in_docs_group_md_is_what_is_sent() {
        let req = OpRequest {
            op: Op::Read { length: 4096 },
            status: StatusAggr::Sum,
            data: DataAggr::Concat,
            only: None,
        };
        assert_eq!(req.encode(), b"4:read 4096 3:sum 6:concat 0 ");
    }

    #[test]
    fn open_requests_round_trip() {
        let req = OpenRequest {
            local: "127.0.0.1:9094".into(),
            fanout: 32,
            timeout_ms: 5000,
            flags: OpenFlags::from_letters(b"rwc").unwrap(),
            mode: 0o644,
            token: None,
            members: vec![
                Member {
                    index: 0,
                    server: "127.0.0.1:9094".into(),
                    path: "/a b".into(),
                },
                Member {
                    index: 7,
                    server: "h:1".into(),
                    path: "/x".into(),
                },
            ],
            replace: false,
        };
        assert_eq!(OpenRequest::decode(&req.encode()).unwrap(), req);
        let mut bad = req.encode();
        bad.extend_from_slice(b"2 ");
        assert!(OpenRequest::decode(&bad).is_err());
        // Replacing is a trailing option, absent from every other open (which servers
        // that predate it therefore still accept) and refused without write access.
        let plain = req.encode();
        let replacing = OpenRequest {
            replace: true,
            ..req.clone()
        };
        let bytes = replacing.encode();
        assert_eq!(bytes, [plain.as_slice(), b"1 "].concat());
        assert_eq!(OpenRequest::decode(&bytes).unwrap(), replacing);
        let mut zero = plain.clone();
        zero.extend_from_slice(b"0 ");
        assert!(OpenRequest::decode(&zero).is_err());
        let read_only = OpenRequest {
            flags: OpenFlags::from_letters(b"r").unwrap(),
            ..replacing
        };
        assert!(OpenRequest::decode(&read_only.encode()).is_err());
    }

    #[test]
    fn op_requests_and_replies_round_trip() {
        let ops = [
            Op::Read { length: 10 },
            Op::Pread {
                length: 1,
                offset: 2,
            },
            Op::Write {
                data: b"x y".to_vec().into(),
            },
            Op::Pwrite {
                data: vec![0, 10].into(),
                offset: 9,
            },
            Op::Lseek {
                offset: -3,
                whence: Whence::End,
            },
            Op::Fstat,
            Op::Fsync,
            Op::Ftruncate { length: 4 },
            Op::Close,
            Op::Status,
            Op::ProcTable,
            Op::Commit,
            Op::Patch {
                block_size: 8,
                pieces: vec![Piece::Copy(3), Piece::Literal(b"new".to_vec())],
            },
        ];
        for (i, op) in ops.into_iter().enumerate() {
            let req = OpRequest {
                op,
                only: (i % 2 == 0).then(|| IndexSet::from_indices([1, 5])),
                status: StatusAggr::Sum,
                data: DataAggr::Lines(LineSpec {
                    pattern: Pattern::Fixed("udp".into()),
                    numbers: true,
                    strip_syslog: false,
                    complete_lines: false,
                }),
            };
            assert_eq!(OpRequest::decode(&req.encode()).unwrap(), req);
        }
        let mut reply = Reply::empty(StatusAggr::Sum, &DataAggr::Concat);
        reply.fail(-18, &IndexSet::from_indices([3, 4]));
        reply.silent = IndexSet::from_indices([3, 4]);
        reply.depth = 2;
        assert_eq!(Reply::decode(&reply.encode()).unwrap(), reply);
        // A reply of another aggregation does not merge and changes nothing.
        let before = reply.clone();
        let other = Reply::empty(StatusAggr::Sum, &DataAggr::None);
        assert!(reply.merge(other).is_err());
        assert_eq!(reply, before);
    }
}
