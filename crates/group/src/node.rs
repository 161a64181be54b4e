//! A node of the group tree: the members it opened itself and the children it relays to.
//!
//! The same code runs in the client (a node with no local members whose children are the
//! servers, or one root relay) and in every `roost serve` that receives `group_open` (a
//! node whose local members are its own files). For each operation a node sends the request
//! to all its children at once, applies it to its local members meanwhile, waits for the
//! children at most the wave timeout, and merges everything into one [`Reply`]. A child that
//! fails to answer in time, or whose connection breaks, is dropped for the rest of the
//! group's life: its members fail with `TIMED_OUT` or `DISCONNECTED` and are listed as
//! silent in every later reply.
//!
//! A group opened to replace its members ([`OpenRequest::replace`], pcp) writes each local
//! member under a temporary name ([`LocalOpener::replace`]) that only [`Op::Commit`] renames
//! over it; whatever ends the group first (close, a failed write, the connection dropping)
//! removes the temporary and leaves the member as it was.

use crate::aggregate::{status_classes, DataAggr, DataPartial, StatusAggr};
use crate::delegation::Token;
use crate::message::{Member, Op, OpRequest, OpenRequest, Reply, Whence};
use crate::ranges::IndexSet;
use roost_client::{Client, Options};
use roost_wire::{ErrorCode, OpenFlags, Request, Stat};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Largest reply a node accepts from a child (the reply is read whole before it is decoded).
const MAX_REPLY: u64 = 1 << 30;

/// First step of a member read's buffer (it doubles as it fills).
const READ_CHUNK: usize = 64 * 1024;

/// Stack of a thread that talks to children (buffers are on the heap).
const CHILD_STACK: usize = 256 * 1024;

/// Most children a node talks to at once. A flat client with a thousand servers would
/// otherwise run a thousand threads and push a thousand TCP flows through its one link at
/// once; over a 200 Mbit/s link shaped with tc, a 1 MiB pcp to 1,024 servers that way lost
/// 7-13% of them to connections the kernel aborted (TCPAbortOnTimeout). Relays have at most
/// `fanout` children, so this bounds only wide flat groups.
const MAX_IN_FLIGHT: usize = 256;

/// A child's failure: its (negative) Chirp code, and whether it stopped answering.
type LinkFailure = (i64, bool);

/// Runs `work` on every job, on at most [`MAX_IN_FLIGHT`] threads that take the jobs in
/// order, while the calling thread runs `meanwhile`; returns what `meanwhile` returned and
/// each job's result, in the jobs' order. A job whose thread panicked fails with `UNKNOWN`;
/// if no thread can start, the calling thread runs the jobs itself afterwards.
fn fan_out<J: Send, T: Send, M>(
    jobs: Vec<J>,
    work: impl Fn(J) -> Result<T, LinkFailure> + Sync,
    meanwhile: impl FnOnce() -> M,
) -> (M, Vec<Result<T, LinkFailure>>) {
    let count = jobs.len();
    let queue = Mutex::new(jobs.into_iter().enumerate());
    let slots: Vec<Mutex<Option<Result<T, LinkFailure>>>> =
        (0..count).map(|_| Mutex::new(None)).collect();
    let run = || loop {
        let next = queue.lock().unwrap_or_else(PoisonError::into_inner).next();
        let Some((i, job)) = next else { break };
        let result = work(job);
        *slots[i].lock().unwrap_or_else(PoisonError::into_inner) = Some(result);
    };
    let done = std::thread::scope(|s| {
        let workers: Vec<_> = (0..count.min(MAX_IN_FLIGHT))
            .map_while(|_| {
                std::thread::Builder::new()
                    .stack_size(CHILD_STACK)
                    .spawn_scoped(s, run)
                    .ok()
            })
            .collect();
        let done = meanwhile();
        for worker in workers {
            let _ = worker.join();
        }
        done
    });
    run();
    let results = slots
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .unwrap_or_else(PoisonError::into_inner)
                .unwrap_or(Err((ErrorCode::Unknown.as_i64(), false)))
        })
        .collect();
    (done, results)
}

/// Opens files on this server for the group's user.
pub trait LocalOpener {
    /// Opens `path` (a path in this server's export) as the group's subject, under its ACLs.
    fn open(&self, path: &str, flags: OpenFlags, mode: u32) -> Result<File, ErrorCode>;

    /// Starts replacing `path` whole, as the group's subject and if its ACLs let it replace
    /// (or create) `path`: an empty file with permission bits `mode` under a temporary name
    /// beside it. Openers without files of their own do not support it.
    fn replace(&self, path: &str, mode: u32) -> Result<Box<dyn Replacement>, ErrorCode> {
        let _ = (path, mode);
        Err(ErrorCode::NotSupported)
    }
}

/// A file written under a temporary name to replace a member (see [`LocalOpener::replace`]).
pub trait Replacement: Send {
    /// The file, readable and writable: the temporary, and after [`Replacement::commit`]
    /// the member itself.
    fn file(&self) -> &File;

    /// Renames the temporary over the member (atomically: the member is the old file or
    /// the new one, never a mix). Dropped without a successful commit, a replacement
    /// removes its temporary.
    fn commit(&mut self) -> Result<(), ErrorCode>;
}

/// An opener for nodes that have no local files (the client process).
pub struct NoLocalFiles;

impl LocalOpener for NoLocalFiles {
    fn open(&self, _: &str, _: OpenFlags, _: u32) -> Result<File, ErrorCode> {
        Err(ErrorCode::NotSupported)
    }
}

/// How a node reaches its children, and as whom.
#[derive(Clone, Debug)]
pub struct ChildAccess {
    /// Connection options (authentication methods and timeouts) for children.
    pub options: Options,
    /// The user's delegation token, passed down so that children open files as the user.
    pub token: Option<Token>,
    /// True in the client process, whose own connections authenticate as the user: it may
    /// relay without a token. A server without a token relays nothing, since its children
    /// would see its own identity instead of the user's.
    pub as_user: bool,
}

/// How members divide between a node and its children.
#[derive(Debug, PartialEq, Eq)]
pub struct Plan {
    pub local: Vec<Member>,
    /// Each child's server (`host:port`) and the members of its subtree.
    pub children: Vec<(String, Vec<Member>)>,
}

/// Splits members by server: those on `local` stay here; if at most `fanout` other servers
/// remain each becomes a child, else they are cut into `fanout` runs of consecutive servers
/// (in order of their first member), each run's first server relaying for the rest.
pub fn plan(members: &[Member], local: &str, fanout: u32) -> Plan {
    let mut servers: Vec<(String, Vec<Member>)> = Vec::new();
    let mut mine = Vec::new();
    for m in members {
        if m.server == local {
            mine.push(m.clone());
        } else if let Some(entry) = servers.iter_mut().find(|(s, _)| *s == m.server) {
            entry.1.push(m.clone());
        } else {
            servers.push((m.server.clone(), vec![m.clone()]));
        }
    }
    let fanout = fanout.max(1) as usize;
    let children = if servers.len() <= fanout {
        servers
    } else {
        let (per, extra) = (servers.len() / fanout, servers.len() % fanout);
        let mut rest = servers.into_iter();
        (0..fanout)
            .map(|i| {
                let run: Vec<_> = rest.by_ref().take(per + usize::from(i < extra)).collect();
                let head = run[0].0.clone();
                (head, run.into_iter().flat_map(|(_, m)| m).collect())
            })
            .collect()
    };
    Plan {
        local: mine,
        children,
    }
}

struct LocalMember {
    index: u32,
    /// The member's path in this server's export, as the open named it.
    path: String,
    handle: Handle,
    offset: u64,
    /// Newlines before `offset` as far as this node has read or written sequentially (line
    /// numbers of line aggregations count from here; a seek restarts the count at 0).
    lines_before: u64,
    /// The result of the last operation: a count or offset, or a negative Chirp code.
    last: i64,
}

/// What a local member's operations work on.
enum Handle {
    /// The member's file.
    Open(File),
    /// A replacement not yet committed (a group opened to replace its members).
    Pending(Box<dyn Replacement>),
    /// A replacement renamed over the member: the member's file now.
    Committed(Box<dyn Replacement>),
    /// A replacement given up after this failure (its temporary is removed): every later
    /// operation fails with it, so a member that missed a write is never committed.
    Spoiled(ErrorCode),
}

impl Handle {
    fn file(&self) -> Result<&File, ErrorCode> {
        match self {
            Handle::Open(file) => Ok(file),
            Handle::Pending(r) | Handle::Committed(r) => Ok(r.file()),
            Handle::Spoiled(code) => Err(*code),
        }
    }

    /// Gives up a pending replacement after `code`, removing its temporary.
    fn spoil(&mut self, code: ErrorCode) {
        if matches!(self, Handle::Pending(_)) {
            *self = Handle::Spoiled(code);
        }
    }

    /// Renames a pending replacement over the member; one that fails is given up.
    fn commit(&mut self) -> Result<(), ErrorCode> {
        match std::mem::replace(self, Handle::Spoiled(ErrorCode::Unknown)) {
            Handle::Pending(mut r) => match r.commit() {
                Ok(()) => {
                    *self = Handle::Committed(r);
                    Ok(())
                }
                Err(code) => {
                    *self = Handle::Spoiled(code);
                    Err(code)
                }
            },
            Handle::Spoiled(code) => {
                *self = Handle::Spoiled(code);
                Err(code)
            }
            // Nothing to commit: not opened to replace, or committed already.
            other => {
                *self = other;
                Err(ErrorCode::InvalidRequest)
            }
        }
    }
}

enum Link {
    Up {
        client: Box<Client>,
        gid: i64,
    },
    /// The child stopped answering; its members fail with this code from now on.
    Down(i64),
}

struct Child {
    members: IndexSet,
    link: Link,
}

/// An open group at one node.
pub struct Node {
    local: Vec<LocalMember>,
    children: Vec<Child>,
}

/// `group_open`'s reply: the group's number at the recipient and the subtree's answer.
pub fn encode_open_reply(gid: i64, reply: &Reply) -> Vec<u8> {
    let mut out = format!("{gid} ").into_bytes();
    out.extend_from_slice(&reply.encode());
    out
}

pub fn decode_open_reply(bytes: &[u8]) -> Result<(i64, Reply), crate::codec::DecodeError> {
    let space = bytes
        .iter()
        .position(|&b| b == b' ')
        .ok_or(crate::codec::DecodeError("truncated"))?;
    let gid = roost_wire::parse_i64(&bytes[..space])
        .filter(|g| *g >= 0)
        .ok_or(crate::codec::DecodeError("bad group number"))?;
    Ok((gid, Reply::decode(&bytes[space + 1..])?))
}

/// The code for a child that could not be reached or answered badly.
fn link_failure(e: &roost_client::Error) -> LinkFailure {
    let code = e.code();
    let silent =
        e.breaks_connection() || matches!(code, ErrorCode::TimedOut | ErrorCode::Disconnected);
    (code.as_i64(), silent)
}

fn set_of(members: &[Member]) -> IndexSet {
    IndexSet::from_indices(members.iter().map(|m| m.index))
}

impl Node {
    /// Opens a group: local members through `opener`, the others through children reached
    /// with `access`. Returns the node (holding what opened) and the subtree's reply.
    pub fn open(
        req: &OpenRequest,
        opener: &dyn LocalOpener,
        access: &ChildAccess,
    ) -> (Node, Reply) {
        let plan = plan(&req.members, &req.local, req.fanout);
        Node::open_planned(req, &plan, opener, access)
    }

    /// Opens a group divided as `plan` says (a client sends every member to one root relay
    /// this way).
    pub fn open_planned(
        req: &OpenRequest,
        plan: &Plan,
        opener: &dyn LocalOpener,
        access: &ChildAccess,
    ) -> (Node, Reply) {
        let timeout = Duration::from_millis(req.timeout_ms.max(1));
        let child_timeout_ms = (req.timeout_ms * 3 / 4).max(100);
        let mut reply = Reply::empty(StatusAggr::Zero, &DataAggr::None);
        let may_relay = access.as_user || access.token.is_some();
        let mut options = access.options.clone();
        options.io_timeout = Some(timeout);
        options.connect_timeout = options.connect_timeout.min(timeout);
        let mut node = Node {
            local: Vec::new(),
            children: Vec::new(),
        };
        let jobs: Vec<_> = plan
            .children
            .iter()
            .filter(|_| may_relay)
            .map(|(server, members)| {
                let child_req = OpenRequest {
                    local: server.clone(),
                    fanout: req.fanout,
                    timeout_ms: child_timeout_ms,
                    flags: req.flags,
                    mode: req.mode,
                    token: access.token.clone(),
                    members: members.clone(),
                    replace: req.replace,
                };
                (server, child_req)
            })
            .collect();
        let open =
            |(server, child_req): (&String, OpenRequest)| open_child(server, &child_req, &options);
        let ((), outcomes) = fan_out(jobs, open, || {
            for m in &plan.local {
                let handle = if req.replace {
                    opener.replace(&m.path, req.mode).map(Handle::Pending)
                } else {
                    opener.open(&m.path, req.flags, req.mode).map(Handle::Open)
                };
                match handle {
                    Ok(handle) => node.local.push(LocalMember {
                        index: m.index,
                        path: m.path.clone(),
                        handle,
                        offset: 0,
                        lines_before: 0,
                        last: 0,
                    }),
                    Err(code) => reply.fail(code.as_i64(), &IndexSet::single(m.index)),
                }
            }
        });
        if !may_relay {
            for (_, members) in &plan.children {
                reply.fail(ErrorCode::NotAuthorized.as_i64(), &set_of(members));
            }
        }
        for ((_, members), outcome) in plan.children.iter().zip(outcomes) {
            let set = set_of(members);
            match outcome {
                Ok((client, gid, child_reply)) => {
                    if reply.merge(child_reply).is_err() {
                        reply.fail(ErrorCode::Unknown.as_i64(), &set);
                        continue;
                    }
                    node.children.push(Child {
                        members: set,
                        link: Link::Up { client, gid },
                    });
                }
                Err((code, silent)) => {
                    reply.fail(code, &set);
                    if silent {
                        reply.silent.extend(&set);
                    }
                }
            }
        }
        reply.depth += 1;
        (node, reply)
    }

    /// Applies one operation to every member of the subtree and merges the results (in a
    /// node without local members: the client's).
    pub fn apply(&mut self, req: &OpRequest) -> Reply {
        self.apply_encoded(req, &req.encode(), &NoLocalFiles)
    }

    /// [`Node::apply`] for a request that arrived encoded as `payload` (a relay's): the
    /// children get those bytes as they are, without a second copy of the request's data.
    /// `opener` is the one the group was opened with: a patch replaces members through it.
    pub fn apply_encoded(
        &mut self,
        req: &OpRequest,
        payload: &[u8],
        opener: &dyn LocalOpener,
    ) -> Reply {
        let collecting = req.op == Op::Status;
        let mut reply = Reply::empty(req.status, &req.data);
        if collecting {
            reply.data = DataPartial::Statuses(Default::default());
        }
        let local = &mut self.local;
        let mut jobs = Vec::new();
        let waves: Vec<_> = self
            .children
            .iter_mut()
            .map(|child| {
                let members = participants(&child.members, req.only.as_ref());
                if members.is_empty() {
                    return (members, Wave::Skip);
                }
                let wave = match &mut child.link {
                    Link::Up { client, gid } => {
                        jobs.push((&mut **client, *gid));
                        Wave::Asked(jobs.len() - 1)
                    }
                    Link::Down(code) => Wave::Down(*code),
                };
                (members, wave)
            })
            .collect();
        let call = |(client, gid): (&mut Client, i64)| call_child(client, gid, payload);
        let (local_reply, answers) = fan_out(jobs, call, || apply_local(local, req, opener));
        let mut answers: Vec<_> = answers.into_iter().map(Some).collect();
        let waves: Vec<_> = waves
            .into_iter()
            .map(|(members, wave)| {
                let outcome = match wave {
                    Wave::Skip => None,
                    Wave::Down(code) => Some(Err((code, true))),
                    Wave::Asked(job) => answers[job].take(),
                };
                (members, outcome)
            })
            .collect();
        merge_or_fail(&mut reply, local_reply, &IndexSet::new());
        for (child, (members, outcome)) in self.children.iter_mut().zip(waves) {
            match outcome {
                None => {}
                Some(Ok(child_reply)) => merge_or_fail(&mut reply, child_reply, &members),
                Some(Err((code, silent))) => {
                    if collecting {
                        if let DataPartial::Statuses(map) = &mut reply.data {
                            map.entry(code)
                                .and_modify(|s| s.extend(&members))
                                .or_insert_with(|| members.clone());
                        }
                    } else {
                        reply.fail(code, &members);
                    }
                    if silent {
                        reply.silent.extend(&members);
                        child.link = Link::Down(code);
                    }
                }
            }
        }
        if req.op == Op::Close {
            self.local.clear();
            self.children.clear();
        }
        reply.depth += 1;
        reply
    }

    /// Members this node opened itself.
    pub fn local_count(&self) -> usize {
        self.local.len()
    }
}

/// What one child does in a wave.
enum Wave {
    /// None of its members take part.
    Skip,
    /// It stopped answering earlier, with this code.
    Down(i64),
    /// It is sent the request: its job's number.
    Asked(usize),
}

/// The members of `members` that take part in an operation limited to `only`.
fn participants(members: &IndexSet, only: Option<&IndexSet>) -> IndexSet {
    match only {
        None => members.clone(),
        Some(only) => IndexSet::from_indices(members.iter().filter(|&i| only.contains(i))),
    }
}

/// Merges `part` into `reply`; a part that cannot merge (a peer used another aggregation)
/// fails `members` instead.
fn merge_or_fail(reply: &mut Reply, part: Reply, members: &IndexSet) {
    if reply.merge(part).is_err() {
        reply.fail(ErrorCode::Unknown.as_i64(), members);
    }
}

type ChildOpen = Result<(Box<Client>, i64, Reply), LinkFailure>;

fn open_child(server: &str, req: &OpenRequest, options: &Options) -> ChildOpen {
    let mut client = Client::connect(server, options).map_err(|e| link_failure(&e))?;
    let payload = req.encode();
    let request = Request::GroupOpen {
        length: payload.len() as u64,
    };
    let bytes = client
        .data_call(&request, &payload, MAX_REPLY)
        .map_err(|e| link_failure(&e))?;
    let (gid, reply) =
        decode_open_reply(&bytes).map_err(|_| (ErrorCode::Disconnected.as_i64(), true))?;
    Ok((Box::new(client), gid, reply))
}

fn call_child(client: &mut Client, gid: i64, payload: &[u8]) -> Result<Reply, LinkFailure> {
    let request = Request::GroupOp {
        gid,
        length: payload.len() as u64,
    };
    let bytes = client
        .data_call(&request, payload, MAX_REPLY)
        .map_err(|e| link_failure(&e))?;
    Reply::decode(&bytes).map_err(|_| (ErrorCode::Disconnected.as_i64(), true))
}

/// Applies the operation to the local members and merges their results.
fn apply_local(local: &mut [LocalMember], req: &OpRequest, opener: &dyn LocalOpener) -> Reply {
    let mut reply = Reply::empty(req.status, &req.data);
    let taking_part = |m: &LocalMember| req.only.as_ref().map_or(true, |o| o.contains(m.index));
    if req.op == Op::Status {
        let members = local.iter().filter(|m| taking_part(m));
        reply.data = status_classes(members.map(|m| (m.index, m.last)));
        return reply;
    }
    let cut = match &req.data {
        DataAggr::Lines(spec) if spec.complete_lines => Cut::CompleteLines,
        DataAggr::Lines(_) => Cut::FullBlocks,
        _ => Cut::Anywhere,
    };
    for m in local.iter_mut().filter(|m| taking_part(m)) {
        let lines_before = match req.op {
            Op::Read { .. } => m.lines_before,
            _ => 0,
        };
        match apply_one(m, &req.op, cut, opener) {
            Ok((value, produced)) => {
                m.last = value;
                let data = match (produced, &req.data) {
                    (Produced::Processes(list), DataAggr::Procs { by_user }) => {
                        DataPartial::Procs(crate::procs::table(m.index, &list, *by_user))
                    }
                    (Produced::Bytes(bytes), aggr) => aggr.leaf_at(m.index, &bytes, lines_before),
                    (_, aggr) => aggr.leaf(m.index, &[]),
                };
                let part = Reply {
                    status: req.status.leaf(value),
                    data,
                    ..Reply::empty(req.status, &req.data)
                };
                merge_or_fail(&mut reply, part, &IndexSet::single(m.index));
            }
            Err(code) => {
                m.last = code.as_i64();
                if req.op.changes_data() {
                    m.handle.spoil(code);
                }
                reply.fail(code.as_i64(), &IndexSet::single(m.index));
            }
        }
    }
    reply
}

/// Counts the newlines of `data` (pcp writes 1 MiB blocks to every member, so this runs over
/// every byte written): one-byte counts of at most 255 bytes each, which compilers turn into
/// wide vector compares (7x faster here than counting into a `usize`).
fn newlines(data: &[u8]) -> u64 {
    data.chunks(255)
        .map(|stretch| {
            let count = stretch
                .iter()
                .fold(0u8, |n, &b| n.wrapping_add(u8::from(b == b'\n')));
            u64::from(count)
        })
        .sum()
}

/// What an operation on one member produced besides its result.
enum Produced {
    Nothing,
    Bytes(Vec<u8>),
    Processes(Vec<crate::procs::Process>),
}

type Applied = Result<(i64, Produced), ErrorCode>;

fn io_code(e: io::Error) -> ErrorCode {
    ErrorCode::from_io(&e)
}

/// Where a read for a line aggregation may end.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// Anywhere (not a line aggregation).
    Anywhere,
    /// After the last newline of a full block, so no line is split between two reads (a
    /// block without any newline is kept whole); at end of file, anywhere.
    FullBlocks,
    /// After the last newline, always: an unfinished last line waits for the next read
    /// (following logs that are still being written).
    CompleteLines,
}

/// Reads up to `length` bytes at `offset`, ending where `cut` allows.
fn read_at(file: &File, length: u64, offset: u64, cut: Cut) -> io::Result<Vec<u8>> {
    let length = length.min(roost_wire::MAX_BLOCK) as usize;
    // The buffer grows with what is read, so a large request on a small file (pgrep asks
    // for 16 MiB) costs what the file holds; files that report size 0 (/proc) still read.
    let mut buf = Vec::with_capacity(length.min(READ_CHUNK));
    while buf.len() < length {
        let done = buf.len();
        let want = (length - done).min(READ_CHUNK.max(done));
        buf.resize(done + want, 0);
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => {
                buf.truncate(done);
                break;
            }
            Ok(n) => buf.truncate(done + n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => buf.truncate(done),
            Err(e) => return Err(e),
        }
    }
    let done = buf.len();
    let last_newline = buf.iter().rposition(|&b| b == b'\n');
    match (cut, last_newline) {
        (Cut::FullBlocks, Some(last)) if done == length => buf.truncate(last + 1),
        (Cut::CompleteLines, Some(last)) => buf.truncate(last + 1),
        // A line longer than the whole block cannot wait: it is taken as it is.
        (Cut::CompleteLines, None) if done < length => buf.clear(),
        _ => {}
    }
    Ok(buf)
}

fn apply_one(m: &mut LocalMember, op: &Op, cut: Cut, opener: &dyn LocalOpener) -> Applied {
    match op {
        Op::Close => return Ok((0, Produced::Nothing)),
        Op::Status => return Ok((m.last, Produced::Nothing)),
        Op::Commit => return m.handle.commit().map(|()| (0, Produced::Nothing)),
        _ => {}
    }
    let file = m.handle.file()?;
    match op {
        Op::Read { length } => {
            let data = read_at(file, *length, m.offset, cut).map_err(io_code)?;
            m.offset += data.len() as u64;
            m.lines_before += newlines(&data);
            Ok((data.len() as i64, Produced::Bytes(data)))
        }
        Op::Pread { length, offset } => {
            let data = read_at(file, *length, *offset, cut).map_err(io_code)?;
            Ok((data.len() as i64, Produced::Bytes(data)))
        }
        Op::Write { data } => {
            file.write_all_at(data, m.offset).map_err(io_code)?;
            m.offset += data.len() as u64;
            m.lines_before += newlines(data);
            Ok((data.len() as i64, Produced::Nothing))
        }
        Op::Pwrite { data, offset } => {
            file.write_all_at(data, *offset).map_err(io_code)?;
            Ok((data.len() as i64, Produced::Nothing))
        }
        Op::Lseek { offset, whence } => {
            let base = match whence {
                Whence::Set => 0,
                Whence::Current => m.offset as i64,
                Whence::End => file.metadata().map_err(io_code)?.len() as i64,
            };
            let at = base
                .checked_add(*offset)
                .filter(|at| *at >= 0)
                .ok_or(ErrorCode::InvalidRequest)?;
            m.offset = at as u64;
            m.lines_before = 0;
            Ok((at, Produced::Nothing))
        }
        Op::Fstat => {
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            if unsafe { libc::fstat(file.as_raw_fd(), &mut st) } != 0 {
                return Err(io_code(io::Error::last_os_error()));
            }
            Ok((0, Produced::Bytes(Stat::from(&st).to_line())))
        }
        Op::Fsync => file
            .sync_all()
            .map(|_| (0, Produced::Nothing))
            .map_err(io_code),
        Op::Ftruncate { length } => file
            .set_len(*length)
            .map(|_| (0, Produced::Nothing))
            .map_err(io_code),
        Op::ProcTable => {
            let list = crate::procs::scan(file).map_err(io_code)?;
            Ok((list.len() as i64, Produced::Processes(list)))
        }
        Op::Patch { block_size, pieces } => {
            let meta = file.metadata().map_err(io_code)?;
            if meta.len() > roost_wire::MAX_BLOCK {
                return Err(ErrorCode::TooBig);
            }
            let old = read_at(file, meta.len(), 0, Cut::Anywhere).map_err(io_code)?;
            let new =
                crate::blocks::apply(&old, *block_size, pieces).ok_or(ErrorCode::InvalidRequest)?;
            if let Handle::Pending(_) = m.handle {
                // A temporary nobody sees yet: rewritten where it is.
                file.write_all_at(&new, 0).map_err(io_code)?;
                file.set_len(new.len() as u64).map_err(io_code)?;
            } else {
                // The member itself: the new content goes to a temporary renamed over it,
                // so a full disk or a killed server leaves the old content, never a mix.
                let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions());
                let mut replacement = opener.replace(&m.path, mode & 0o7777)?;
                replacement.file().write_all_at(&new, 0).map_err(io_code)?;
                replacement.commit()?;
                m.handle = Handle::Committed(replacement);
            }
            Ok((new.len() as i64, Produced::Nothing))
        }
        // Answered above, without the file.
        Op::Close | Op::Status | Op::Commit => Err(ErrorCode::InvalidRequest),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn members(servers: &[&str]) -> Vec<Member> {
        servers
            .iter()
            .enumerate()
            .map(|(i, s)| Member {
                index: i as u32,
                server: s.to_string(),
                path: format!("/f{i}"),
            })
            .collect()
    }

    #[test]
    fn few_servers_are_each_a_child() {
        let p = plan(&members(&["a", "b", "a", "me", "c"]), "me", 32);
        assert_eq!(p.local.len(), 1);
        let names: Vec<_> = p
            .children
            .iter()
            .map(|(s, m)| (s.as_str(), m.len()))
            .collect();
        assert_eq!(names, vec![("a", 2), ("b", 1), ("c", 1)]);
    }

    #[test]
    fn many_servers_split_into_fanout_runs_led_by_their_first_server() {
        let servers: Vec<String> = (0..10).map(|i| format!("s{i}")).collect();
        let refs: Vec<&str> = servers.iter().map(String::as_str).collect();
        let p = plan(&members(&refs), "root", 3);
        let shape: Vec<_> = p
            .children
            .iter()
            .map(|(s, m)| (s.as_str(), m.len()))
            .collect();
        assert_eq!(shape, vec![("s0", 4), ("s4", 3), ("s7", 3)]);
        // The leader of a run keeps its own members and relays the rest.
        let sub = plan(&p.children[0].1, "s0", 3);
        assert_eq!(sub.local.len(), 1);
        assert_eq!(sub.children.len(), 3);
    }

    #[test]
    fn line_reads_stop_after_the_last_whole_line() {
        let path = std::env::temp_dir().join(format!("roost-node-read-{}", std::process::id()));
        std::fs::write(&path, b"ab\ncd\nef").unwrap();
        let file = File::open(&path).unwrap();
        let read = |length, offset, cut| read_at(&file, length, offset, cut).unwrap();
        assert_eq!(read(7, 0, Cut::FullBlocks), b"ab\ncd\n");
        assert_eq!(read(7, 0, Cut::Anywhere), b"ab\ncd\ne");
        assert_eq!(read(1 << 30, 0, Cut::FullBlocks), b"ab\ncd\nef");
        assert_eq!(read(2, 0, Cut::FullBlocks), b"ab");
        assert_eq!(read(5, 9, Cut::FullBlocks), b"");
        // Following: the unfinished "ef" waits, even at end of file...
        assert_eq!(read(1 << 30, 0, Cut::CompleteLines), b"ab\ncd\n");
        assert_eq!(read(10, 6, Cut::CompleteLines), b"");
        // ...unless it fills the whole block.
        assert_eq!(read(2, 6, Cut::CompleteLines), b"ef");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn fan_out_keeps_order_bounds_threads_and_fails_panicked_jobs() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let jobs: Vec<usize> = (0..MAX_IN_FLIGHT * 2 + 3).collect();
        let work = |j: usize| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(2));
            running.fetch_sub(1, Ordering::SeqCst);
            if j == 7 {
                panic!("job 7");
            }
            Ok(j * 10)
        };
        let (local, results) = fan_out(jobs.clone(), work, || "local");
        assert_eq!(local, "local");
        assert!(most.load(Ordering::SeqCst) <= MAX_IN_FLIGHT);
        for (j, r) in jobs.iter().zip(results) {
            if *j == 7 {
                assert_eq!(r, Err((ErrorCode::Unknown.as_i64(), false)));
            } else {
                assert_eq!(r, Ok(j * 10));
            }
        }
        let (_, none) = fan_out(Vec::<u8>::new(), |_| Ok(()), || ());
        assert!(none.is_empty());
    }

    #[test]
    fn newlines_are_counted_in_any_stretch() {
        let mut data = Vec::new();
        for i in 0..20_000u32 {
            data.push(if i % 7 == 0 || i % 4093 == 1 {
                b'\n'
            } else {
                b'x'
            });
        }
        for len in [0, 1, 254, 255, 256, 510, 511, 9000, data.len()] {
            let slow = data[..len].iter().filter(|&&b| b == b'\n').count() as u64;
            assert_eq!(newlines(&data[..len]), slow, "{len}");
        }
        assert_eq!(newlines(&[b'\n'; 10_000]), 10_000);
    }

    /// Members in a local directory; replacements are `.NAME.new` beside them, and a
    /// commit fails for names containing "stuck".
    struct DirOpener(std::path::PathBuf);

    struct DirReplacement {
        file: File,
        tmp: std::path::PathBuf,
        target: std::path::PathBuf,
        committed: bool,
    }

    impl LocalOpener for DirOpener {
        fn open(&self, path: &str, flags: OpenFlags, _: u32) -> Result<File, ErrorCode> {
            std::fs::OpenOptions::new()
                .read(flags.read)
                .write(flags.write)
                .create(flags.create)
                .open(self.0.join(path.trim_start_matches('/')))
                .map_err(|e| ErrorCode::from_io(&e))
        }

        fn replace(&self, path: &str, _: u32) -> Result<Box<dyn Replacement>, ErrorCode> {
            let target = self.0.join(path.trim_start_matches('/'));
            let name = target.file_name().unwrap().to_string_lossy();
            let tmp = target.with_file_name(format!(".{name}.new"));
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&tmp)
                .map_err(|e| ErrorCode::from_io(&e))?;
            Ok(Box::new(DirReplacement {
                file,
                tmp,
                target,
                committed: false,
            }))
        }
    }

    impl Replacement for DirReplacement {
        fn file(&self) -> &File {
            &self.file
        }

        fn commit(&mut self) -> Result<(), ErrorCode> {
            if self.target.to_string_lossy().contains("stuck") {
                return Err(ErrorCode::NotAuthorized);
            }
            std::fs::rename(&self.tmp, &self.target).map_err(|e| ErrorCode::from_io(&e))?;
            self.committed = true;
            Ok(())
        }
    }

    impl Drop for DirReplacement {
        fn drop(&mut self) {
            if !self.committed {
                let _ = std::fs::remove_file(&self.tmp);
            }
        }
    }

    fn local_group(dir: &std::path::Path, names: &[&str], flags: &[u8], replace: bool) -> Node {
        let req = OpenRequest {
            local: "me".into(),
            fanout: 4,
            timeout_ms: 1000,
            flags: OpenFlags::from_letters(flags).unwrap(),
            mode: 0o644,
            token: None,
            members: names
                .iter()
                .enumerate()
                .map(|(i, n)| Member {
                    index: i as u32,
                    server: "me".into(),
                    path: format!("/{n}"),
                })
                .collect(),
            replace,
        };
        let access = ChildAccess {
            options: Options::default(),
            token: None,
            as_user: false,
        };
        let (node, reply) = Node::open(&req, &DirOpener(dir.to_path_buf()), &access);
        assert!(reply.failures.is_empty(), "{:?}", reply.failures);
        node
    }

    fn run(node: &mut Node, dir: &std::path::Path, op: Op) -> Reply {
        let req = OpRequest {
            op,
            status: StatusAggr::Zero,
            data: DataAggr::None,
            only: None,
        };
        node.apply_encoded(&req, &req.encode(), &DirOpener(dir.to_path_buf()))
    }

    fn listing(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
        let mut all: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                let name = e.file_name().to_string_lossy().into_owned();
                (name, std::fs::read(e.path()).unwrap())
            })
            .collect();
        all.sort();
        all
    }

    fn files(entries: &[(&str, &[u8])]) -> Vec<(String, Vec<u8>)> {
        entries
            .iter()
            .map(|(n, c)| (n.to_string(), c.to_vec()))
            .collect()
    }

    #[test]
    fn replaced_members_change_only_when_committed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"old a").unwrap();
        let mut node = local_group(dir.path(), &["a", "b"], b"wct", true);
        let data = Op::Write {
            data: b"new".to_vec().into(),
        };
        assert!(run(&mut node, dir.path(), data).failures.is_empty());
        // Written, not committed: the members are as they were.
        assert_eq!(std::fs::read(dir.path().join("a")).unwrap(), b"old a");
        assert!(!dir.path().join("b").exists());
        assert!(run(&mut node, dir.path(), Op::Commit).failures.is_empty());
        run(&mut node, dir.path(), Op::Close);
        assert_eq!(listing(dir.path()), files(&[("a", b"new"), ("b", b"new")]));
    }

    #[test]
    fn replacements_not_committed_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"old a").unwrap();
        // Closed before the commit.
        let mut node = local_group(dir.path(), &["a", "b"], b"w", true);
        let half = Op::Write {
            data: b"ha".to_vec().into(),
        };
        run(&mut node, dir.path(), half.clone());
        run(&mut node, dir.path(), Op::Close);
        assert_eq!(listing(dir.path()), files(&[("a", b"old a")]));
        // Dropped (the connection ended) before the commit.
        let mut node = local_group(dir.path(), &["a"], b"w", true);
        run(&mut node, dir.path(), half);
        drop(node);
        assert_eq!(listing(dir.path()), files(&[("a", b"old a")]));
    }

    #[test]
    fn a_member_whose_commit_fails_keeps_its_old_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("stuck"), b"old").unwrap();
        let mut node = local_group(dir.path(), &["stuck", "fine"], b"w", true);
        let data = Op::Write {
            data: b"new".to_vec().into(),
        };
        run(&mut node, dir.path(), data);
        let reply = run(&mut node, dir.path(), Op::Commit);
        assert_eq!(
            reply.failures,
            BTreeMap::from([(ErrorCode::NotAuthorized.as_i64(), IndexSet::single(0))])
        );
        // Its temporary went with the failure, before the group closed.
        assert_eq!(
            listing(dir.path()),
            files(&[("fine", b"new"), ("stuck", b"old")])
        );
        // Committed once: a second commit has nothing to rename.
        let again = run(&mut node, dir.path(), Op::Commit);
        assert_eq!(again.failed().len(), 2);
    }

    #[test]
    fn a_member_that_missed_a_write_is_never_committed() {
        let dir = tempfile::tempdir().unwrap();
        let mut node = local_group(dir.path(), &["a", "b"], b"w", true);
        // A write the member refuses (at an offset no file can reach) spoils it.
        let far = Op::Pwrite {
            data: b"x".to_vec().into(),
            offset: i64::MAX as u64,
        };
        let only_a = OpRequest {
            op: far,
            status: StatusAggr::Zero,
            data: DataAggr::None,
            only: Some(IndexSet::single(0)),
        };
        let reply = node.apply_encoded(
            &only_a,
            &only_a.encode(),
            &DirOpener(dir.path().to_path_buf()),
        );
        assert_eq!(reply.failed(), IndexSet::single(0));
        assert_eq!(listing(dir.path()), files(&[(".b.new", b"")]));
        let reply = run(&mut node, dir.path(), Op::Commit);
        assert_eq!(reply.failed(), IndexSet::single(0));
        assert_eq!(listing(dir.path()), files(&[("b", b"")]));
    }

    #[test]
    fn a_patch_replaces_the_member_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m");
        std::fs::write(&path, b"old content").unwrap();
        let old = File::open(&path).unwrap();
        let mut node = local_group(dir.path(), &["m"], b"rw", false);
        let patch = Op::Patch {
            block_size: 64,
            pieces: vec![crate::blocks::Piece::Literal(b"new".to_vec())],
        };
        assert!(run(&mut node, dir.path(), patch).failures.is_empty());
        assert_eq!(listing(dir.path()), files(&[("m", b"new")]));
        // A new file took the name: whoever held the old one still reads it whole.
        let mut kept = Vec::new();
        std::io::Read::read_to_end(&mut &old, &mut kept).unwrap();
        assert_eq!(kept, b"old content");
        // The member is the new file from now on.
        let read = OpRequest {
            op: Op::Pread {
                length: 100,
                offset: 0,
            },
            status: StatusAggr::Sum,
            data: DataAggr::None,
            only: None,
        };
        let reply = node.apply_encoded(&read, &read.encode(), &DirOpener(dir.path().into()));
        assert_eq!(reply.status.finish(), Some(3));
        // A member whose replacement cannot be made keeps its content.
        let stuck = dir.path().join("stuck");
        std::fs::write(&stuck, b"kept").unwrap();
        std::fs::write(dir.path().join(".stuck.new"), b"in the way").unwrap();
        let mut node = local_group(dir.path(), &["stuck"], b"rw", false);
        let patch = Op::Patch {
            block_size: 64,
            pieces: vec![crate::blocks::Piece::Literal(b"new".to_vec())],
        };
        assert_eq!(run(&mut node, dir.path(), patch).failed().len(), 1);
        assert_eq!(std::fs::read(&stuck).unwrap(), b"kept");
    }

    #[test]
    fn open_replies_carry_the_group_number() {
        let reply = Reply::empty(StatusAggr::Zero, &DataAggr::None);
        let bytes = encode_open_reply(7, &reply);
        assert_eq!(decode_open_reply(&bytes).unwrap(), (7, reply));
        assert!(decode_open_reply(b"-1 x").is_err());
    }
}
