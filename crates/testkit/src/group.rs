//! Group file operations for the tests: a cluster of real `roost serve` processes on
//! 127.0.0.1, each exporting member files, and a group directory of links to them.

use crate::serve::TestServer;
use roost_client::ChirpUrl;
use roost_client::{Credentials, Method, Options};
use roost_group::api::{GroupOptions, MemberSpec};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The user of the tests: hmac key `alice` (secret `ecila`, as `TestServer::with_keys` makes).
pub const USER: &str = "alice";

/// Servers that all know `alice`'s key and give her `rights` on their root.
pub struct Cluster {
    pub servers: Vec<TestServer>,
    pub keys: tempfile::TempDir,
    /// The group directory: `node1`..`nodeN` linking to `/FILE` on each server.
    pub group: tempfile::TempDir,
}

impl Cluster {
    /// `n` servers; `alice` has `rights` on each (plus `address:127.0.0.1` has `rwl`, so
    /// tests can show that a relay never lends its own address identity).
    pub fn start(n: usize, rights: &str) -> Cluster {
        Cluster::start_with(n, |_| rights.to_string())
    }

    /// `n` servers; `alice`'s rights on server `i` are `rights(i)`.
    pub fn start_with(n: usize, rights: impl Fn(usize) -> String) -> Cluster {
        Cluster::start_with_args(n, rights, &[])
    }

    /// `n` servers reporting every second to the catalog on `catalog`; `alice` has `rights`.
    pub fn reporting(n: usize, rights: &str, catalog: u16) -> Cluster {
        let to = format!("127.0.0.1:{catalog}");
        let args = ["--catalog", &to, "--catalog-interval", "1"];
        Cluster::start_with_args(n, |_| rights.to_string(), &args)
    }

    /// `n` servers with `extra` options; `alice`'s rights on server `i` are `rights(i)`.
    pub fn start_with_args(n: usize, rights: impl Fn(usize) -> String, extra: &[&str]) -> Cluster {
        let keys = tempfile::tempdir().unwrap();
        let servers = (0..n)
            .map(|i| {
                let mut args = TestServer::with_keys(keys.path(), &[USER]);
                args.extend(["--acl".into(), format!("hmac:{USER}={}", rights(i))]);
                args.extend(["--acl".into(), "address:127.0.0.1=rwl".into()]);
                args.extend(extra.iter().map(|a| a.to_string()));
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                TestServer::start(&args)
            })
            .collect();
        Cluster {
            servers,
            keys,
            group: tempfile::tempdir().unwrap(),
        }
    }

    pub fn authority(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.servers[i].port)
    }

    /// Writes `content(i)` to `/file` on each server.
    pub fn write_files(&self, file: &str, content: impl Fn(usize) -> Vec<u8>) {
        for (i, s) in self.servers.iter().enumerate() {
            std::fs::write(s.root().join(file.trim_start_matches('/')), content(i)).unwrap();
        }
    }

    /// Fills the group directory with `node1`..`nodeN` linking to `path` on each server.
    pub fn link_group(&self, path: &str) -> PathBuf {
        for i in 0..self.servers.len() {
            let target = format!("chirp://{}{path}", self.authority(i));
            let link = self.group.path().join(format!("node{}", i + 1));
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(target, link).unwrap();
        }
        self.group.path().to_path_buf()
    }

    /// The members `node1`..`nodeN` for `path`, without a directory.
    pub fn members(&self, path: &str) -> Vec<MemberSpec> {
        (0..self.servers.len())
            .map(|i| MemberSpec {
                name: format!("node{}", i + 1),
                url: ChirpUrl::parse(&format!("chirp://{}{path}", self.authority(i))).unwrap(),
            })
            .collect()
    }

    pub fn dir(&self) -> &Path {
        self.group.path()
    }

    /// A `key` argument for the `roost` command: `alice=FILE`.
    pub fn key_arg(&self) -> String {
        format!(
            "{USER}={}",
            self.keys.path().join(format!("{USER}.key")).display()
        )
    }

    /// Options of a client that authenticates as `alice`, flat.
    pub fn flat(&self) -> GroupOptions {
        GroupOptions {
            connect: alice_options(),
            timeout: Duration::from_secs(10),
            ..GroupOptions::default()
        }
    }

    /// Options of a client using server `root` as the root relay with `fanout`.
    pub fn tree(&self, root: usize, fanout: u32) -> GroupOptions {
        GroupOptions {
            relay: Some(self.authority(root)),
            fanout,
            ..self.flat()
        }
    }
}

/// Client options authenticating with `alice`'s key only.
pub fn alice_options() -> Options {
    Options {
        credentials: crate::serve::hmac_credentials(USER),
        ..Options::default()
    }
}

/// Client options authenticating by address only (no key to delegate).
pub fn address_options() -> Options {
    Options {
        credentials: Credentials::only(&[Method::Address]),
        ..Options::default()
    }
}
