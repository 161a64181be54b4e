//! The group API: `gopen` a directory of member links, then operate on every member at once.
//!
//! ```no_run
//! use roost_group::api::{gopen, GroupOptions, FileOp};
//! let mut g = gopen("hosts.d", libc::O_RDONLY, 0, &GroupOptions::default())?;
//! let out = g.read(4096)?; // status: total bytes; data: each member's bytes
//! println!("{} members read {:?} bytes", g.gsize(), out.status);
//! # Ok::<(), roost_group::api::GroupError>(())
//! ```
//!
//! A group directory holds one symlink per member whose target is `chirp://host:port/path`
//! (or `/chirp/host:port/path`); it may be local or on a Chirp server
//! (`chirp://host:port/dir`). Members are ordered by name, numbers compared as numbers
//! (`node2` before `node10`); the group is fixed at `gopen`.
//!
//! Semantics follow the paper: every operation applies to each member, its status
//! results aggregate into one value (defaults of Table 2: zero, sum, equal) and data results
//! into one value (default: concatenate, indexed by [`Group::gindex`]). If any member fails,
//! the operation fails with [`E_GROUP`] and [`Group::gstatus`] tells which; a group opened
//! with [`O_BESTEFFORT`] instead succeeds while at least one member succeeds (and `gopen`
//! keeps the members that opened).

use crate::aggregate::{DataAggr, DataPartial, StatusAggr};
use crate::blocks::{Piece, Signature};
use crate::delegation::Token;
use crate::lines::LineKey;
use crate::message::{Member, Op, OpRequest, OpenRequest, Reply, Whence};
use crate::node::{ChildAccess, NoLocalFiles, Node, Plan};
use crate::ranges::IndexSet;
use roost_client::{ChirpUrl, Client, ErrorCode, OpenFlags, Options, Stat};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::time::Duration;

/// `gopen` flag: succeed if any member opens (keeping those that did).
pub const O_BESTEFFORT: i32 = 0x4000_0000;

/// `gopen` flag: replace each member whole. Its server creates an empty file under a hidden
/// temporary name beside it, which the group's writes fill and [`Group::commit`] renames
/// over the member; until then the member is untouched, and a group closed (or a connection
/// lost) before the commit leaves it so and removes the temporary. Needs write access;
/// other open flags are ignored, and `mode` is the new file's permission bits.
pub const O_REPLACE: i32 = 0x2000_0000;

/// The errno of a group operation in which some member failed (outside the system's range).
pub const E_GROUP: i32 = 512;

/// The group file operations that aggregations bind to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileOp {
    Read,
    Pread,
    Write,
    Pwrite,
    Lseek,
    Fstat,
    Fsync,
    Ftruncate,
    Close,
}

impl FileOp {
    /// The paper's default (Table 2) status and data aggregations.
    pub fn defaults(self) -> (StatusAggr, DataAggr) {
        match self {
            FileOp::Read | FileOp::Pread => (StatusAggr::Sum, DataAggr::Concat),
            FileOp::Write | FileOp::Pwrite => (StatusAggr::Sum, DataAggr::None),
            FileOp::Lseek => (StatusAggr::Equal, DataAggr::None),
            FileOp::Fstat => (StatusAggr::Zero, DataAggr::Concat),
            FileOp::Fsync | FileOp::Ftruncate | FileOp::Close => (StatusAggr::Zero, DataAggr::None),
        }
    }
}

/// Aggregations bound to operations; unbound operations use [`FileOp::defaults`].
#[derive(Clone, Debug, Default)]
pub struct Bindings {
    bound: HashMap<FileOp, (Option<StatusAggr>, Option<DataAggr>)>,
}

impl Bindings {
    pub fn bind_status(&mut self, op: FileOp, aggr: StatusAggr) {
        self.bound.entry(op).or_default().0 = Some(aggr);
    }

    pub fn bind_data(&mut self, op: FileOp, aggr: DataAggr) {
        self.bound.entry(op).or_default().1 = Some(aggr);
    }

    pub fn get(&self, op: FileOp) -> (StatusAggr, DataAggr) {
        let (status, data) = op.defaults();
        match self.bound.get(&op) {
            Some((s, d)) => (s.unwrap_or(status), d.clone().unwrap_or(data)),
            None => (status, data),
        }
    }
}

/// How to reach the members.
#[derive(Clone, Debug)]
pub struct GroupOptions {
    /// Connection options (credentials) for the client's own connections.
    pub connect: Options,
    /// A root relay (`host:port`): the client sends every member there and the tree does
    /// the rest. `None`: the client connects to every server itself (flat).
    pub relay: Option<String>,
    /// Most children of each relay.
    pub fanout: u32,
    /// How long the client waits for one wave (relays below wait less).
    pub timeout: Duration,
    /// Lifetime of the delegation token minted for relays (needs an hmac key).
    pub token_lifetime: Duration,
    /// Default aggregations of new groups (`gbindaggr` with no group).
    pub bindings: Bindings,
}

impl Default for GroupOptions {
    fn default() -> GroupOptions {
        GroupOptions {
            connect: Options::default(),
            relay: None,
            fanout: 32,
            timeout: Duration::from_secs(30),
            token_lifetime: Duration::from_secs(3600),
            bindings: Bindings::default(),
        }
    }
}

/// Why a group call failed.
#[derive(Debug)]
pub enum GroupError {
    /// Some members failed (`E_GROUP`): each failed member's name and error.
    Group {
        failed: Vec<(String, ErrorCode)>,
        /// The result over the members that succeeded.
        outcome: Option<Box<Outcome>>,
    },
    /// The group directory could not be read or holds something that is not a member.
    Directory(String),
    /// The call itself is wrong (unknown member name, closed group).
    Usage(String),
}

impl GroupError {
    pub fn errno(&self) -> i32 {
        match self {
            GroupError::Group { .. } => E_GROUP,
            GroupError::Directory(_) => libc::ENOENT,
            GroupError::Usage(_) => libc::EINVAL,
        }
    }
}

impl fmt::Display for GroupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupError::Group { failed, .. } => {
                write!(f, "{} member(s) failed", failed.len())?;
                for (name, code) in failed.iter().take(8) {
                    write!(f, "; {name}: {}", code.message())?;
                }
                if failed.len() > 8 {
                    write!(f, "; ...")?;
                }
                Ok(())
            }
            GroupError::Directory(why) | GroupError::Usage(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for GroupError {}

/// A line class of a lines aggregation, with its members as group indices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineClass {
    /// Line number (0 unless numbers were asked for).
    pub number: u64,
    pub text: Vec<u8>,
    pub members: Vec<usize>,
}

/// A group data result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupData {
    None,
    /// Each member's data by group index (`None` for members that failed).
    PerMember(Vec<Option<Vec<u8>>>),
    /// Line classes ordered by line number, then text.
    Lines(Vec<LineClass>),
    /// Distinct contents (block signatures) with the members holding each.
    Signatures(Vec<(Signature, Vec<usize>)>),
    /// Statistics of each field of a field aggregation, over every member.
    Fields(Vec<crate::fields::FieldStats>),
    /// Processes grouped by command (and user), with the group indices running each.
    Procs(Vec<ProcRow>),
}

/// One row of a process table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcRow {
    pub command: String,
    /// The user id, when grouping by user.
    pub uid: Option<u32>,
    pub processes: u64,
    /// CPU time of the processes alive now, in clock ticks since they started.
    pub cpu_ticks: u64,
    pub rss_kib: u64,
    pub max_rss_kib: u64,
    pub members: Vec<usize>,
}

/// The result of a group operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The group status (`None`: no value, e.g. `equal` over differing offsets).
    pub status: Option<i64>,
    /// The exact mean, for the `average` aggregation.
    pub mean: Option<f64>,
    pub data: GroupData,
    /// Group indices of members that failed, and those whose relay did not answer.
    pub failed: Vec<usize>,
    pub silent: Vec<usize>,
    /// Levels of servers that answered (1: the servers answered the client directly).
    pub depth: u32,
}

/// A group's member: its name (the directory entry) and where it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberSpec {
    pub name: String,
    pub url: ChirpUrl,
}

/// An open group.
pub struct Group {
    node: Node,
    /// Names of the opened members, by group index.
    names: Vec<String>,
    /// Original (wire) index of each opened member, ascending, by group index.
    wire: Vec<u32>,
    bindings: Bindings,
    best_effort: bool,
    closed: bool,
    /// Members that did not open (best effort), with their errors.
    open_failures: Vec<(String, ErrorCode)>,
}

/// Orders names with their digit runs compared as numbers.
fn natural_key(name: &str) -> Vec<(u8, u64, String)> {
    let mut key = Vec::new();
    let mut rest = name;
    while !rest.is_empty() {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits > 0 && digits <= 18 {
            let (d, r) = rest.split_at(digits);
            key.push((0, d.parse().unwrap_or(0), d.to_string()));
            rest = r;
        } else {
            let end = rest
                .find(|c: char| c.is_ascii_digit())
                .filter(|&i| i > 0)
                .unwrap_or(rest.len());
            let (t, r) = rest.split_at(end);
            key.push((1, 0, t.to_string()));
            rest = r;
        }
    }
    key
}

/// Reads a group directory: local, or `chirp://host:port/dir` on a server.
pub fn read_group_dir(dir: &str, options: &Options) -> Result<Vec<MemberSpec>, GroupError> {
    let bad = |why: String| GroupError::Directory(format!("{dir}: {why}"));
    let mut links: Vec<(String, String)> = Vec::new();
    if dir.starts_with("chirp://") || dir.starts_with("/chirp/") {
        let url = ChirpUrl::parse(dir).map_err(|e| bad(e.to_string()))?;
        let mut client =
            Client::connect(&url.authority(), options).map_err(|e| bad(e.to_string()))?;
        for name in client.getdir(&url.path).map_err(|e| bad(e.to_string()))? {
            let name = String::from_utf8_lossy(&name).into_owned();
            if name == "." || name == ".." {
                continue;
            }
            let path = format!("{}/{name}", url.path.trim_end_matches('/'));
            let target = client
                .readlink(&path)
                .map_err(|e| bad(format!("{name}: {e}")))?;
            links.push((name, String::from_utf8_lossy(&target).into_owned()));
        }
    } else {
        for entry in std::fs::read_dir(dir).map_err(|e| bad(roost_client::io_words(&e)))? {
            let entry = entry.map_err(|e| bad(roost_client::io_words(&e)))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let target = std::fs::read_link(entry.path()).map_err(|e| {
                bad(format!(
                    "{name}: not a link to a member ({})",
                    roost_client::io_words(&e)
                ))
            })?;
            links.push((name, target.to_string_lossy().into_owned()));
        }
    }
    let mut members = links
        .into_iter()
        .map(|(name, target)| {
            let url = ChirpUrl::parse(&target).map_err(|e| bad(format!("{name}: {e}")))?;
            Ok(MemberSpec { name, url })
        })
        .collect::<Result<Vec<_>, GroupError>>()?;
    members.sort_by_cached_key(|m| natural_key(&m.name));
    Ok(members)
}

/// Opens the group named by directory `dir` (see the module documentation).
pub fn gopen(
    dir: &str,
    flags: i32,
    mode: u32,
    options: &GroupOptions,
) -> Result<Group, GroupError> {
    let members = read_group_dir(dir, &options.connect)?;
    gopen_members(members, flags, mode, options)
}

/// Opens a group of the given members (in this order).
pub fn gopen_members(
    members: Vec<MemberSpec>,
    flags: i32,
    mode: u32,
    options: &GroupOptions,
) -> Result<Group, GroupError> {
    if members.is_empty() {
        return Err(GroupError::Usage(
            "a group needs at least one member".into(),
        ));
    }
    if members.len() > crate::MAX_MEMBERS {
        return Err(GroupError::Usage("too many members".into()));
    }
    let best_effort = flags & O_BESTEFFORT != 0;
    let replace = flags & O_REPLACE != 0;
    let open_flags = OpenFlags::from_libc(flags & !(O_BESTEFFORT | O_REPLACE));
    if replace && !open_flags.write {
        return Err(GroupError::Usage(
            "replacing members (O_REPLACE) needs O_WRONLY or O_RDWR".into(),
        ));
    }
    let wire_members: Vec<Member> = members
        .iter()
        .enumerate()
        .map(|(i, m)| Member {
            index: i as u32,
            server: m.url.authority(),
            path: m.url.path.clone(),
        })
        .collect();
    let token = match (&options.relay, &options.connect.credentials.hmac_key) {
        (Some(_), Some(key)) => Token::mint(&key.name, &key.secret, options.token_lifetime).ok(),
        _ => None,
    };
    let req = OpenRequest {
        local: String::new(),
        fanout: options.fanout.max(1),
        timeout_ms: options.timeout.as_millis() as u64,
        flags: open_flags,
        mode,
        token,
        members: wire_members.clone(),
        replace,
    };
    let plan = match &options.relay {
        Some(root) => Plan {
            local: Vec::new(),
            children: vec![(root.clone(), wire_members)],
        },
        None => crate::node::plan(&wire_members, "", u32::MAX),
    };
    let access = ChildAccess {
        options: options.connect.clone(),
        token: req.token.clone(),
        as_user: true,
    };
    let (node, reply) = Node::open_planned(&req, &plan, &NoLocalFiles, &access);
    let names: Vec<String> = members.iter().map(|m| m.name.clone()).collect();
    let failed = reply.failed();
    let failures = named_failures(&reply, |i| names[i as usize].clone());
    let opened: Vec<u32> = (0..names.len() as u32)
        .filter(|i| !failed.contains(*i))
        .collect();
    let mut group = Group {
        node,
        names: opened.iter().map(|&i| names[i as usize].clone()).collect(),
        wire: opened,
        bindings: options.bindings.clone(),
        best_effort,
        closed: false,
        open_failures: Vec::new(),
    };
    if group.wire.is_empty() || (!failures.is_empty() && !best_effort) {
        let _ = group.close();
        return Err(GroupError::Group {
            failed: failures,
            outcome: None,
        });
    }
    group.open_failures = failures;
    Ok(group)
}

/// Each failed member's name and error, in member order.
fn named_failures(reply: &Reply, name: impl Fn(u32) -> String) -> Vec<(String, ErrorCode)> {
    let mut all: Vec<(u32, ErrorCode)> = reply
        .failures
        .iter()
        .flat_map(|(code, set)| set.iter().map(move |i| (i, ErrorCode::from_result(*code))))
        .collect();
    all.sort_by_key(|(i, _)| *i);
    all.into_iter().map(|(i, c)| (name(i), c)).collect()
}

impl Group {
    /// The number of members.
    pub fn gsize(&self) -> usize {
        self.names.len()
    }

    /// The members' names (directory entries), by group index.
    pub fn gfiles(&self) -> &[String] {
        &self.names
    }

    /// The members of the directory that a best-effort `gopen` could not open, with why.
    pub fn open_failures(&self) -> &[(String, ErrorCode)] {
        &self.open_failures
    }

    /// The group index of the member named `name`.
    pub fn gindex(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// Binds aggregations to an operation of this group (`None` keeps the current one).
    pub fn gbindaggr(&mut self, op: FileOp, status: Option<StatusAggr>, data: Option<DataAggr>) {
        if let Some(s) = status {
            self.bindings.bind_status(op, s);
        }
        if let Some(d) = data {
            self.bindings.bind_data(op, d);
        }
    }

    /// Each member's status for the last operation: its result, or the errno it failed with.
    pub fn gstatus(&mut self) -> Result<Vec<Result<i64, i32>>, GroupError> {
        let reply = self.send(Op::Status, StatusAggr::Zero, DataAggr::None, None)?;
        let mut statuses = vec![Err(libc::EIO); self.gsize()];
        if let DataPartial::Statuses(map) = reply.data {
            for (status, set) in map {
                for i in self.group_indices(&set) {
                    statuses[i] = if status >= 0 {
                        Ok(status)
                    } else {
                        Err(ErrorCode::from_result(status).errno())
                    };
                }
            }
        }
        Ok(statuses)
    }

    pub fn read(&mut self, length: u64) -> Result<Outcome, GroupError> {
        self.run(FileOp::Read, Op::Read { length })
    }

    pub fn pread(&mut self, length: u64, offset: u64) -> Result<Outcome, GroupError> {
        self.run(FileOp::Pread, Op::Pread { length, offset })
    }

    pub fn write(&mut self, data: &[u8]) -> Result<Outcome, GroupError> {
        self.run(FileOp::Write, Op::Write { data: data.into() })
    }

    pub fn pwrite(&mut self, data: &[u8], offset: u64) -> Result<Outcome, GroupError> {
        let op = Op::Pwrite {
            data: data.into(),
            offset,
        };
        self.run(FileOp::Pwrite, op)
    }

    pub fn lseek(&mut self, offset: i64, whence: Whence) -> Result<Outcome, GroupError> {
        self.run(FileOp::Lseek, Op::Lseek { offset, whence })
    }

    /// Stats every member; with the default aggregation, [`Group::stats`] parses the data.
    pub fn fstat(&mut self) -> Result<Outcome, GroupError> {
        self.run(FileOp::Fstat, Op::Fstat)
    }

    pub fn fsync(&mut self) -> Result<Outcome, GroupError> {
        self.run(FileOp::Fsync, Op::Fsync)
    }

    pub fn ftruncate(&mut self, length: u64) -> Result<Outcome, GroupError> {
        self.run(FileOp::Ftruncate, Op::Ftruncate { length })
    }

    /// Renames every member's replacement over it (groups opened with [`O_REPLACE`]); each
    /// member is then the old file or the complete new one. A member that fails (or failed
    /// a write before) keeps its old file and loses its temporary.
    pub fn commit(&mut self) -> Result<Outcome, GroupError> {
        self.run_with(Op::Commit, StatusAggr::Zero, DataAggr::None, None)
    }

    /// Closes every member and drops the tree's connections (a replacement not committed
    /// is discarded).
    pub fn close(&mut self) -> Result<Outcome, GroupError> {
        let outcome = self.run(FileOp::Close, Op::Close);
        self.closed = true;
        outcome
    }

    /// Parses the stat lines of an `fstat` outcome (concatenate data), by group index.
    pub fn stats(outcome: &Outcome) -> Vec<Option<Stat>> {
        match &outcome.data {
            GroupData::PerMember(v) => v
                .iter()
                .map(|d| d.as_ref().and_then(|l| Stat::parse(l).ok()))
                .collect(),
            _ => Vec::new(),
        }
    }

    fn group_indices(&self, set: &IndexSet) -> Vec<usize> {
        set.iter()
            .filter_map(|w| self.wire.binary_search(&w).ok())
            .collect()
    }

    /// The members' distinct contents (up to 16 MiB each) as rsync block signatures, each
    /// with the group indices that hold it: identical copies are grouped in the tree.
    pub fn signatures(&mut self, block_size: u32) -> Result<Outcome, GroupError> {
        let op = Op::Pread {
            length: roost_wire::MAX_BLOCK,
            offset: 0,
        };
        let data = DataAggr::Blocks {
            block_size: block_size.max(1),
        };
        self.run_with(op, StatusAggr::Max, data, None)
    }

    /// The processes under every member directory (a `/proc` served by `roost serve /proc`),
    /// grouped by command, and by user with `by_user`; the status is the number of processes.
    pub fn proc_table(&mut self, by_user: bool) -> Result<Outcome, GroupError> {
        let data = DataAggr::Procs { by_user };
        self.run_with(Op::ProcTable, StatusAggr::Sum, data, None)
    }

    /// Rebuilds the given members (group indices) from their old blocks and `pieces` (see
    /// [`crate::blocks`]); the status is their common new length.
    pub fn patch(
        &mut self,
        members: &[usize],
        block_size: u32,
        pieces: Vec<Piece>,
    ) -> Result<Outcome, GroupError> {
        let only =
            IndexSet::from_indices(members.iter().filter_map(|&i| self.wire.get(i).copied()));
        let op = Op::Patch { block_size, pieces };
        self.run_with(op, StatusAggr::Equal, DataAggr::None, Some(only))
    }

    fn send(
        &mut self,
        op: Op,
        status: StatusAggr,
        data: DataAggr,
        only: Option<IndexSet>,
    ) -> Result<Reply, GroupError> {
        if self.closed {
            return Err(GroupError::Usage("the group is closed".into()));
        }
        Ok(self.node.apply(&OpRequest {
            op,
            status,
            data,
            only,
        }))
    }

    fn run(&mut self, which: FileOp, op: Op) -> Result<Outcome, GroupError> {
        let (status, data) = self.bindings.get(which);
        self.run_with(op, status, data, None)
    }

    fn run_with(
        &mut self,
        op: Op,
        status: StatusAggr,
        data: DataAggr,
        only: Option<IndexSet>,
    ) -> Result<Outcome, GroupError> {
        let taking_part = only.as_ref().map_or(self.gsize(), IndexSet::len);
        let reply = self.send(op, status, data, only)?;
        let failed_set = reply.failed();
        let failed = self.group_indices(&failed_set);
        let outcome = Outcome {
            status: reply.status.finish(),
            mean: reply.status.mean(),
            data: self.group_data(reply.data),
            failed: failed.clone(),
            silent: self.group_indices(&reply.silent),
            // The client's own node is not a level of servers.
            depth: reply.depth.saturating_sub(1),
        };
        let all_failed = failed.len() == taking_part;
        if failed.is_empty() || (self.best_effort && !all_failed) {
            return Ok(outcome);
        }
        let names = |w: u32| {
            self.wire
                .binary_search(&w)
                .map(|i| self.names[i].clone())
                .unwrap_or_else(|_| format!("#{w}"))
        };
        let failures = named_failures(
            &Reply {
                failures: reply.failures,
                ..Reply::empty(StatusAggr::Zero, &DataAggr::None)
            },
            names,
        );
        Err(GroupError::Group {
            failed: failures,
            outcome: Some(Box::new(outcome)),
        })
    }

    fn group_data(&self, data: DataPartial) -> GroupData {
        match data {
            DataPartial::None | DataPartial::Statuses(_) => GroupData::None,
            DataPartial::Concat(map) => {
                let mut per = vec![None; self.gsize()];
                for (w, bytes) in map {
                    if let Ok(i) = self.wire.binary_search(&w) {
                        per[i] = Some(bytes);
                    }
                }
                GroupData::PerMember(per)
            }
            DataPartial::Lines(classes) => GroupData::Lines(
                classes
                    .into_iter()
                    .map(|((number, text), set): (LineKey, IndexSet)| LineClass {
                        number,
                        text,
                        members: self.group_indices(&set),
                    })
                    .collect(),
            ),
            DataPartial::Fields(stats) => GroupData::Fields(stats),
            DataPartial::Procs(table) => GroupData::Procs(
                table
                    .into_iter()
                    .map(|((command, uid), s)| ProcRow {
                        command,
                        uid,
                        processes: s.processes,
                        cpu_ticks: s.cpu_ticks,
                        rss_kib: s.rss_kib,
                        max_rss_kib: s.max_rss_kib,
                        members: self.group_indices(&s.members),
                    })
                    .collect(),
            ),
            DataPartial::Signatures(classes) => GroupData::Signatures(
                classes
                    .into_iter()
                    .filter_map(|(bytes, set)| {
                        Some((Signature::decode(&bytes).ok()?, self.group_indices(&set)))
                    })
                    .collect(),
            ),
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if !self.closed {
            let _ = self.close();
        }
    }
}

/// Merges the line classes of successive reads (a file read in several blocks).
pub fn merge_line_classes(into: &mut BTreeMap<LineKey, Vec<usize>>, classes: Vec<LineClass>) {
    for c in classes {
        let members = into.entry((c.number, c.text)).or_default();
        members.extend(c.members);
        members.sort_unstable();
        members.dedup();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_with_numbers_as_numbers() {
        let mut names = vec!["node10", "node2", "node1", "alpha", "node02x"];
        names.sort_by_cached_key(|n| natural_key(n));
        assert_eq!(names, vec!["alpha", "node1", "node02x", "node2", "node10"]);
    }

    #[test]
    fn bindings_fall_back_to_the_papers_defaults() {
        let mut b = Bindings::default();
        assert_eq!(b.get(FileOp::Lseek), (StatusAggr::Equal, DataAggr::None));
        assert_eq!(b.get(FileOp::Read), (StatusAggr::Sum, DataAggr::Concat));
        assert_eq!(b.get(FileOp::Close).0, StatusAggr::Zero);
        b.bind_status(FileOp::Read, StatusAggr::Max);
        assert_eq!(b.get(FileOp::Read), (StatusAggr::Max, DataAggr::Concat));
    }

    #[test]
    fn a_directory_of_non_links_is_refused() {
        let dir = std::env::temp_dir().join(format!("roost-group-api-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("plain"), b"x").unwrap();
        let err = read_group_dir(dir.to_str().unwrap(), &Options::default()).unwrap_err();
        assert!(err.to_string().contains("plain"), "{err}");
        std::fs::remove_file(dir.join("plain")).unwrap();
        std::os::unix::fs::symlink("chirp://h:1/x", dir.join("n2")).unwrap();
        std::os::unix::fs::symlink("/chirp/h:2/y", dir.join("n10")).unwrap();
        let members = read_group_dir(dir.to_str().unwrap(), &Options::default()).unwrap();
        let names: Vec<_> = members
            .iter()
            .map(|m| (m.name.as_str(), m.url.port))
            .collect();
        assert_eq!(names, vec![("n2", 1), ("n10", 2)]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
