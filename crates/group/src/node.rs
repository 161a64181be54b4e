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
    file: File,
    offset: u64,
    /// Newlines before `offset` as far as this node has read or written sequentially (line
    /// numbers of line aggregations count from here; a seek restarts the count at 0).
    lines_before: u64,
    /// The result of the last operation: a count or offset, or a negative Chirp code.
    last: i64,
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
                };
                (server, child_req)
            })
            .collect();
        let open =
            |(server, child_req): (&String, OpenRequest)| open_child(server, &child_req, &options);
        let ((), outcomes) = fan_out(jobs, open, || {
            for m in &plan.local {
                match opener.open(&m.path, req.flags, req.mode) {
                    Ok(file) => node.local.push(LocalMember {
                        index: m.index,
                        file,
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

    /// Applies one operation to every member of the subtree and merges the results.
    pub fn apply(&mut self, req: &OpRequest) -> Reply {
        self.apply_encoded(req, &req.encode())
    }

    /// [`Node::apply`] for a request that arrived encoded as `payload` (a relay's): the
    /// children get those bytes as they are, without a second copy of the request's data.
    pub fn apply_encoded(&mut self, req: &OpRequest, payload: &[u8]) -> Reply {
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
        let (local_reply, answers) = fan_out(jobs, call, || apply_local(local, req));
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
fn apply_local(local: &mut [LocalMember], req: &OpRequest) -> Reply {
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
        match apply_one(m, &req.op, cut) {
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

fn apply_one(m: &mut LocalMember, op: &Op, cut: Cut) -> Applied {
    match op {
        Op::Read { length } => {
            let data = read_at(&m.file, *length, m.offset, cut).map_err(io_code)?;
            m.offset += data.len() as u64;
            m.lines_before += newlines(&data);
            Ok((data.len() as i64, Produced::Bytes(data)))
        }
        Op::Pread { length, offset } => {
            let data = read_at(&m.file, *length, *offset, cut).map_err(io_code)?;
            Ok((data.len() as i64, Produced::Bytes(data)))
        }
        Op::Write { data } => {
            m.file.write_all_at(data, m.offset).map_err(io_code)?;
            m.offset += data.len() as u64;
            m.lines_before += newlines(data);
            Ok((data.len() as i64, Produced::Nothing))
        }
        Op::Pwrite { data, offset } => {
            m.file.write_all_at(data, *offset).map_err(io_code)?;
            Ok((data.len() as i64, Produced::Nothing))
        }
        Op::Lseek { offset, whence } => {
            let base = match whence {
                Whence::Set => 0,
                Whence::Current => m.offset as i64,
                Whence::End => m.file.metadata().map_err(io_code)?.len() as i64,
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
            if unsafe { libc::fstat(m.file.as_raw_fd(), &mut st) } != 0 {
                return Err(io_code(io::Error::last_os_error()));
            }
            Ok((0, Produced::Bytes(Stat::from(&st).to_line())))
        }
        Op::Fsync => m
            .file
            .sync_all()
            .map(|_| (0, Produced::Nothing))
            .map_err(io_code),
        Op::Ftruncate { length } => m
            .file
            .set_len(*length)
            .map(|_| (0, Produced::Nothing))
            .map_err(io_code),
        Op::Close => Ok((0, Produced::Nothing)),
        Op::Status => Ok((m.last, Produced::Nothing)),
        Op::ProcTable => {
            let list = crate::procs::scan(&m.file).map_err(io_code)?;
            Ok((list.len() as i64, Produced::Processes(list)))
        }
        Op::Patch { block_size, pieces } => {
            let size = m.file.metadata().map_err(io_code)?.len();
            if size > roost_wire::MAX_BLOCK {
                return Err(ErrorCode::TooBig);
            }
            let old = read_at(&m.file, size, 0, Cut::Anywhere).map_err(io_code)?;
            let new =
                crate::blocks::apply(&old, *block_size, pieces).ok_or(ErrorCode::InvalidRequest)?;
            m.file.write_all_at(&new, 0).map_err(io_code)?;
            m.file.set_len(new.len() as u64).map_err(io_code)?;
            Ok((new.len() as i64, Produced::Nothing))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn open_replies_carry_the_group_number() {
        let reply = Reply::empty(StatusAggr::Zero, &DataAggr::None);
        let bytes = encode_open_reply(7, &reply);
        assert_eq!(decode_open_reply(&bytes).unwrap(), (7, reply));
        assert!(decode_open_reply(b"-1 x").is_err());
    }
}
