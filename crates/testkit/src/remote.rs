//! A remote tree for `roost run` over Chirp: a real `roost serve` on 127.0.0.1 exporting a
//! fresh directory, reached as `/chirp/127.0.0.1:PORT/...`, with a private cache.

use crate::run::{as_nobody, run_with_cache, with_cache};
use crate::serve::TestServer;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// Files used in place (direct mode, the default), with notifications.
pub const DIRECT: &[&str] = &[];
/// Files used through the cache, with notifications.
pub const CACHED: &[&str] = &["--chirp-mode", "cached"];
/// ptrace stops only, where direct-mode files are used through the cache too.
pub const PTRACE: &[&str] = &["--no-notify"];
/// Every way a test reaches the server.
pub const MODES: [&[&str]; 3] = [DIRECT, CACHED, PTRACE];

/// A `roost serve` exporting a fresh directory to 127.0.0.1 with every right.
pub fn open_server() -> TestServer {
    TestServer::start(&["--auth", "address", "--acl", "address:127.0.0.1=rwldpax"])
}

/// An [`open_server`] and a private cache.
pub struct Remote {
    pub server: TestServer,
    pub cache: tempfile::TempDir,
    /// The cache of runs as nobody ([`Remote::run_as_nobody`]): open to everyone.
    nobody_cache: tempfile::TempDir,
}

impl Remote {
    pub fn start() -> Remote {
        let nobody_cache = tempfile::tempdir().unwrap();
        std::fs::set_permissions(nobody_cache.path(), PermissionsExt::from_mode(0o777)).unwrap();
        Remote {
            server: open_server(),
            cache: tempfile::tempdir().unwrap(),
            nobody_cache,
        }
    }

    /// The exported directory.
    pub fn root(&self) -> &Path {
        self.server.root()
    }

    /// `/chirp/127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("/chirp/127.0.0.1:{}{path}", self.server.port)
    }

    /// Writes a file into the export (parents made), dated a minute ago so the cache may
    /// keep it (files changed in the last seconds are fetched on every open).
    pub fn write(&self, rel: &str, data: &[u8]) -> PathBuf {
        let p = self.root().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, data).unwrap();
        age(&p);
        p
    }

    /// `roost run --cache DIR [mode] OPTIONS -- timeout 60 ARGV`, to be run.
    pub fn command(&self, mode: &[&str], options: &[&str], argv: &[&str]) -> Command {
        run_with_cache(self.cache.path(), mode, options, argv)
    }

    /// [`Remote::command`], run.
    pub fn run(&self, mode: &[&str], options: &[&str], argv: &[&str]) -> Output {
        self.command(mode, options, argv).output().unwrap()
    }

    /// [`Remote::run`] as nobody ([`as_nobody`]), an ordinary user, with a cache of its
    /// own.
    pub fn run_as_nobody(&self, mode: &[&str], options: &[&str], argv: &[&str]) -> Output {
        let mut roost = as_nobody(crate::roost_bin());
        roost.env_remove("XDG_RUNTIME_DIR");
        with_cache(roost, self.nobody_cache.path(), mode, options, argv)
            .output()
            .unwrap()
    }
}

/// Dates a file a minute back.
pub fn age(p: &Path) {
    let then = std::time::SystemTime::now() - Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(p)
        .and_then(|f| f.set_modified(then))
        .unwrap();
}
