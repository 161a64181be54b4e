//! Why a group member failed, in words a user can act on: the member's name and location
//! (host:port and path), the cause, and the fix. A member whose server could not be reached
//! or would not let us in is probed with a connection of our own (once per server), since
//! the group reply carries only an error code ("disconnected").

use crate::remote::{connect_advice, Failure};
use roost_client::{Client, ErrorCode, Options};
use roost_group::api::{GroupError, MemberSpec};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

/// The longest a probe waits for a server.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The members of a group, by name, and how to reach their servers.
pub struct Members {
    by_name: BTreeMap<String, MemberSpec>,
    options: Options,
    /// What a probe of each server found: `Err(why)` if it could not be used, else the
    /// subject it knows us as.
    probes: RefCell<BTreeMap<String, Result<String, String>>>,
}

impl Members {
    pub fn new(members: &[MemberSpec], options: &Options) -> Members {
        Members {
            by_name: members
                .iter()
                .map(|m| (m.name.clone(), m.clone()))
                .collect(),
            // A probe only tells why: it waits for a silent server no more than this.
            options: Options {
                connect_timeout: options.connect_timeout.min(PROBE_TIMEOUT),
                io_timeout: options.io_timeout.map(|t| t.min(PROBE_TIMEOUT)),
                ..options.clone()
            },
            probes: RefCell::new(BTreeMap::new()),
        }
    }

    /// Every member's name, in name order.
    pub fn names(&self) -> Vec<String> {
        self.by_name.keys().cloned().collect()
    }

    /// `NAME (chirp://HOST:PORT/PATH)` for member `name`.
    pub fn locate(&self, name: &str) -> String {
        match self.by_name.get(name) {
            Some(spec) => format!("{name} ({})", spec.url),
            None => name.to_string(),
        }
    }

    /// `NAME (chirp://HOST:PORT/PATH): CAUSE; FIX` for member `name`, which failed with `code`.
    pub fn describe(&self, name: &str, code: ErrorCode) -> String {
        let whole = self.locate(name);
        let Some(spec) = self.by_name.get(name) else {
            return format!("{whole}: {}", code.message());
        };
        let server = spec.url.authority();
        let why = match code {
            ErrorCode::TimedOut => "no answer in time (is the server stuck or overloaded? \
                                    --timeout waits longer)"
                .to_string(),
            ErrorCode::Disconnected | ErrorCode::NotAuthenticated => match self.probe(&server) {
                Err(why) => why,
                Ok(_) => format!(
                    "{} (the server answers a new connection now: try again)",
                    code.message()
                ),
            },
            ErrorCode::NotAuthorized => {
                let who = match self.probe(&server) {
                    Ok(subject) => format!("as {subject}, "),
                    Err(_) => String::new(),
                };
                match &self.options.credentials.hmac_key {
                    None => format!(
                        "permission denied ({who}the server's ACL grants you nothing there); \
                         if it knows an hmac key of yours, pass --key NAME=FILE (or set \
                         ROOST_HMAC_KEY), else ask its owner for an ACL entry"
                    ),
                    Some(key) => format!(
                        "permission denied ({who}the server's ACL does not grant that there); \
                         ask its owner to grant hmac:{} the rights",
                        key.name
                    ),
                }
            }
            ErrorCode::DoesntExist => "no such file or directory on that server".into(),
            // A member is replaced with the w right, or created with p alone.
            ErrorCode::AlreadyExists => "a file is there already, and you may only create files \
                                         there, not replace them (ask the server's owner for \
                                         the w right)"
                .into(),
            // A replacing open (pcp, psync) is malformed to a server that predates it.
            ErrorCode::InvalidRequest => "the server refused the request as malformed (a roost \
                                          serve older than this roost cannot replace files \
                                          whole, as pcp and psync do now: upgrade it)"
                .into(),
            other => other.message().to_string(),
        };
        format!("{whole}: {why}")
    }

    /// Probes at once, in parallel, the servers that describing these failures will ask
    /// about, so that many silent servers cost one probe's wait, not one each.
    pub fn prepare<'a>(&self, failures: impl IntoIterator<Item = (&'a str, ErrorCode)>) {
        let mut servers: Vec<String> = failures
            .into_iter()
            .filter(|(_, code)| {
                matches!(
                    code,
                    ErrorCode::Disconnected
                        | ErrorCode::NotAuthenticated
                        | ErrorCode::NotAuthorized
                )
            })
            .filter_map(|(name, _)| self.by_name.get(name).map(|m| m.url.authority()))
            .filter(|server| !self.probes.borrow().contains_key(server))
            .collect();
        servers.sort();
        servers.dedup();
        let options = &self.options;
        let found: Vec<(String, Result<String, String>)> = std::thread::scope(|scope| {
            let probes: Vec<_> = servers
                .into_iter()
                .map(|server| scope.spawn(move || (server.clone(), connect(&server, options))))
                .collect();
            probes.into_iter().filter_map(|p| p.join().ok()).collect()
        });
        self.probes.borrow_mut().extend(found);
    }

    /// Probes `server` once (see [`connect`]).
    fn probe(&self, server: &str) -> Result<String, String> {
        if let Some(known) = self.probes.borrow().get(server) {
            return known.clone();
        }
        let found = connect(server, &self.options);
        self.probes
            .borrow_mut()
            .insert(server.to_string(), found.clone());
        found
    }

    /// The failure of a group that could not be opened at all: every member's error on
    /// standard error, and a summary.
    pub fn open_failure(&self, target: &str, e: GroupError) -> Failure {
        match e {
            GroupError::Group { failed, .. } => {
                self.prepare(failed.iter().map(|(n, c)| (n.as_str(), *c)));
                for (name, code) in &failed {
                    eprintln!("roost: {}", self.describe(name, *code));
                }
                Failure(format!(
                    "{target}: none of the {} member(s) could be opened",
                    failed.len()
                ))
            }
            other => Failure(format!("{target}: {other}")),
        }
    }
}

/// A probe of `server`: `Err` with advice if it cannot be used, else our subject there.
fn connect(server: &str, options: &Options) -> Result<String, String> {
    match Client::connect(server, options) {
        Ok(client) => Ok(client.subject().to_string()),
        Err(e) => Err(format!("cannot connect: {}", connect_advice(&e))),
    }
}
