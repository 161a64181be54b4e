//! Group file operations in the server: `group_open` and `group_op` (see `docs/group.md`).
//!
//! Every `roost serve` can be a node of a group tree. `group_open` names members; those on
//! this server are opened here, under the ACLs of the group's subject, and the others are
//! relayed to child servers by [`roost_group::node`]. The group's subject is the one a
//! valid delegation token names (`hmac:KEY`, checked against this server's `--key`s), or
//! else the connection's own subject, in which case nothing is relayed: children would see
//! this server's identity instead of the user's. Groups belong to the connection; when it
//! ends, their files close and their child connections drop, which closes the subtree.
//! Members a group replaces whole are written as uploads are (`Export::begin_replace`):
//! under a hidden temporary that `commit` renames into place, and that the group's end
//! removes otherwise (and a restarted server sweeps, if this one was killed).

use crate::auth::Method;
use crate::export::{Export, Upload};
use crate::jail::JailPath;
use crate::listener::Shared;
use crate::log::{self, Level};
use roost_client::{Credentials, Options};
use roost_group::message::{Op, OpRequest, OpenRequest};
use roost_group::node::{encode_open_reply, ChildAccess, LocalOpener, Node, Replacement};
use roost_wire::{ErrorCode, OpenFlags};
use std::collections::BTreeMap;
use std::fs::File;
use std::sync::Arc;

/// Most groups one connection may hold open.
const MAX_GROUPS: usize = 64;

/// Most members of one group this server opens itself.
const MAX_LOCAL_MEMBERS: usize = 4096;

/// The groups open on one connection.
#[derive(Default)]
pub struct Groups {
    open: BTreeMap<i64, OpenGroup>,
}

/// A group open on this connection, and whose rights its members are used with.
struct OpenGroup {
    node: Node,
    subject: String,
}

/// Opens members in the export as the group's subject.
struct ExportOpener<'a> {
    export: &'a Arc<Export>,
    subject: &'a str,
}

impl LocalOpener for ExportOpener<'_> {
    fn open(&self, path: &str, flags: OpenFlags, mode: u32) -> Result<File, ErrorCode> {
        let path = JailPath::new(path.as_bytes()).map_err(|e| ErrorCode::from_io(&e))?;
        self.export
            .open(self.subject, &path, flags.to_libc(), mode)
            .map_err(|e| ErrorCode::from_errno(e.errno))
    }

    fn replace(&self, path: &str, mode: u32) -> Result<Box<dyn Replacement>, ErrorCode> {
        let path = JailPath::new(path.as_bytes()).map_err(|e| ErrorCode::from_io(&e))?;
        let upload = self
            .export
            .begin_replace(self.subject, &path, mode)
            .map_err(|e| ErrorCode::from_errno(e.errno))?;
        Ok(Box::new(MemberUpload {
            upload,
            export: Arc::clone(self.export),
        }))
    }
}

/// A member being replaced: an upload, committed like `putfile`'s.
struct MemberUpload {
    upload: Upload,
    export: Arc<Export>,
}

impl Replacement for MemberUpload {
    fn file(&self) -> &File {
        &self.upload.file
    }

    fn commit(&mut self) -> Result<(), ErrorCode> {
        self.upload
            .commit(&self.export)
            .map_err(|e| ErrorCode::from_errno(e.errno))
    }
}

/// How a relay authenticates to its children, and waits for them without polling: as any
/// server does on its own behalf ([`Credentials::server_to_server`]); the delegation token
/// inside `group_open` decides whom the files open for.
fn relay_options() -> Options {
    Options {
        credentials: Credentials::server_to_server(),
        // A server's CPU is its owner's: a relay sleeps while it waits for its children.
        spin: std::time::Duration::ZERO,
        ..Options::default()
    }
}

impl Groups {
    /// Answers `group_open`: the group's number and the subtree's reply, or an error for
    /// the whole request (malformed message, refused token, too many groups).
    pub fn open(
        &mut self,
        shared: &Shared,
        connection_subject: &str,
        payload: &[u8],
    ) -> Result<Vec<u8>, ErrorCode> {
        let req = OpenRequest::decode(payload).map_err(|_| ErrorCode::InvalidRequest)?;
        if self.open.len() >= MAX_GROUPS {
            return Err(ErrorCode::TooManyOpen);
        }
        let local_members = req.members.iter().filter(|m| m.server == req.local).count();
        if local_members > MAX_LOCAL_MEMBERS {
            return Err(ErrorCode::TooManyOpen);
        }
        let subject = match &req.token {
            None => connection_subject.to_string(),
            Some(token) => {
                let verified = if shared.auth.methods.contains(&Method::Hmac) {
                    token.verify(&shared.auth.keys).map_err(|r| r.to_string())
                } else {
                    Err("this server does not accept hmac".to_string())
                };
                match verified {
                    Ok(subject) => subject,
                    Err(why) => {
                        log::event(
                            Level::Info,
                            "denied",
                            &[("subject", &connection_subject), ("why", &why)],
                        );
                        return Err(ErrorCode::NotAuthenticated);
                    }
                }
            }
        };
        let opener = ExportOpener {
            export: &shared.export,
            subject: &subject,
        };
        let access = ChildAccess {
            options: relay_options(),
            token: req.token.clone(),
            as_user: false,
        };
        let (node, reply) = Node::open(&req, &opener, &access);
        let gid = (0..)
            .find(|n| !self.open.contains_key(n))
            .expect("a free number");
        log::event(
            Level::Info,
            "group-open",
            &[
                ("subject", &subject),
                ("group", &gid),
                ("members", &req.members.len()),
                ("local", &node.local_count()),
                ("failed", &reply.failed().len()),
                ("replace", &req.replace),
            ],
        );
        self.open.insert(gid, OpenGroup { node, subject });
        Ok(encode_open_reply(gid, &reply))
    }

    /// Answers `group_op` on group `gid`; `close` forgets the group.
    pub fn op(&mut self, shared: &Shared, gid: i64, payload: &[u8]) -> Result<Vec<u8>, ErrorCode> {
        let req = OpRequest::decode(payload).map_err(|_| ErrorCode::InvalidRequest)?;
        let group = self.open.get_mut(&gid).ok_or(ErrorCode::BadFd)?;
        let opener = ExportOpener {
            export: &shared.export,
            subject: &group.subject,
        };
        let reply = group.node.apply_encoded(&req, payload, &opener);
        if req.op == Op::Close {
            self.open.remove(&gid);
        }
        Ok(reply.encode())
    }
}
