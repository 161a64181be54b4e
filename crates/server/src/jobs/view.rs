//! What a job may see of the host's files, as a Landlock ruleset ([`super::landlock`]):
//! everything beneath its sandbox; reading and running the system's programs and libraries
//! ([`PROGRAMS`]) and the owner's `--job-read` directories; reading `/etc` less its secrets
//! ([`SECRETS`]); a few devices; the CPU topology in `/sys`; `/proc` (added by the job's
//! init where it mounts a `/proc` of its own, else here). Nothing else: not the export, not
//! other sandboxes, not `/tmp`, not the owner's home.
//!
//! Landlock grants rights beneath a directory and cannot take any back below it, so a tree
//! holding a secret (or the export, the job directory, the server's keys: [`View::hidden`])
//! is granted entry by entry, down to the secret, which is left out. A symlink among those
//! entries is followed when it leads to a regular file (`/etc/resolv.conf` into `/run`), never
//! to a directory elsewhere. The rules are made for each job, so files that replace others
//! in `/etc` (a new inode) are seen.

use super::landlock::{fs as rights, Ruleset};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Programs and libraries: read and run.
pub const PROGRAMS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];
/// The system's configuration: read, less [`SECRETS`].
pub const CONFIG: &str = "/etc";
/// Devices a job reads and writes.
pub const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];
/// Devices a job reads.
pub const RANDOM: &[&str] = &["/dev/random", "/dev/urandom"];
/// What programs read to count CPUs (`sysconf`, `nproc`, NUMA libraries).
pub const TOPOLOGY: &[&str] = &["/sys/devices/system/cpu", "/sys/devices/system/node"];
/// Files and directories of `/etc` that hold credentials, never granted (on a sane system
/// their permissions keep jobs out already; this is a second wall). The private host keys
/// of `/etc/ssh` (`ssh_host_*_key`) are left out too; their `.pub` halves and the client's
/// configuration stay readable.
pub const SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/ssl/private",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/security/opasswd",
    "/etc/krb5.keytab",
    "/etc/roost",
    "/etc/wireguard",
    "/etc/NetworkManager/system-connections",
    "/etc/ppp/chap-secrets",
    "/etc/ppp/pap-secrets",
    "/etc/ipsec.secrets",
    "/etc/ipsec.d/private",
];
/// Where the private host keys live, named `ssh_host_*_key`.
const SSH: &str = "/etc/ssh";
/// Places a symlink in `/etc` is never followed into.
const NOT_FOLLOWED: &[&str] = &["/proc", "/sys", "/dev"];

/// What jobs may see besides their sandbox.
#[derive(Clone, Debug, Default)]
pub struct View {
    /// Directories jobs may also read and run programs from (`--job-read`).
    pub extra: Vec<PathBuf>,
    /// Paths never granted, wherever they are: the export, the job directory, the server's
    /// key files (absolute and without symlinks).
    pub hidden: Vec<PathBuf>,
}

impl View {
    /// A view with `extra` directories and `hidden` paths (made canonical where they exist).
    pub fn new(extra: Vec<PathBuf>, hidden: Vec<PathBuf>) -> View {
        let hidden = hidden
            .into_iter()
            .map(|p| fs::canonicalize(&p).unwrap_or(p))
            .collect();
        View { extra, hidden }
    }

    /// The ruleset of a job in `sandbox` under Landlock ABI `abi`: all rights beneath the
    /// sandbox, the rest as the module says. `with_proc` adds the host's `/proc` (for a job
    /// without a `/proc` of its own); `deny_tcp` refuses TCP (ABI 4).
    pub fn ruleset(
        &self,
        abi: i64,
        sandbox: &Path,
        with_proc: bool,
        deny_tcp: bool,
    ) -> io::Result<Ruleset> {
        let ruleset = Ruleset::new(abi, deny_tcp)?;
        ruleset.allow(sandbox, ruleset.handled())?;
        let run = rights::READ | rights::EXECUTE;
        for root in PROGRAMS
            .iter()
            .map(Path::new)
            .chain(self.extra.iter().map(|p| p.as_path()))
        {
            self.allow_tree(&ruleset, root, run, true);
        }
        self.allow_tree(&ruleset, Path::new(CONFIG), rights::READ, true);
        let device = rights::READ_FILE | rights::IOCTL_DEV;
        for d in DEVICES {
            allow_if_there(&ruleset, d, device | rights::WRITE_FILE | rights::TRUNCATE)?;
        }
        for d in RANDOM {
            allow_if_there(&ruleset, d, device)?;
        }
        for d in TOPOLOGY {
            allow_if_there(&ruleset, d, rights::READ)?;
        }
        if with_proc {
            ruleset.allow(Path::new("/proc"), rights::READ)?;
        }
        Ok(ruleset)
    }

    /// Whether `path` is never to be granted.
    fn is_secret(&self, path: &Path) -> bool {
        SECRETS.iter().any(|s| path == Path::new(s))
            || self.hidden.iter().any(|h| path == h)
            || (path.parent() == Some(Path::new(SSH))
                && path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("ssh_host_") && n.ends_with("_key")))
    }

    /// Whether something never to be granted lies beneath directory `dir`.
    fn holds_secret(&self, dir: &Path) -> bool {
        let beneath = |p: &Path| p != dir && p.starts_with(dir);
        SECRETS.iter().any(|s| beneath(Path::new(s)))
            || self.hidden.iter().any(|h| beneath(h))
            || beneath(Path::new(SSH))
            || dir == Path::new(SSH)
    }

    /// Grants `access` beneath `path`, less its secrets. `top`: one of the trees named above
    /// (a symlink there, `/bin` to `usr/bin`, is followed whatever it leads to). What cannot
    /// be granted (gone meanwhile, unreadable) is left out.
    fn allow_tree(&self, ruleset: &Ruleset, path: &Path, access: u64, top: bool) {
        if self.is_secret(path) {
            return;
        }
        let Ok(meta) = fs::symlink_metadata(path) else {
            return;
        };
        if meta.file_type().is_symlink() {
            let Ok(target) = fs::canonicalize(path) else {
                return;
            };
            if top {
                return self.allow_tree(ruleset, &target, access, true);
            }
            let elsewhere = NOT_FOLLOWED.iter().any(|n| target.starts_with(n));
            if target.is_file() && !elsewhere && !self.is_secret(&target) {
                let _ = ruleset.allow(&target, access);
            }
            return;
        }
        if meta.is_dir() && self.holds_secret(path) {
            if let Ok(entries) = fs::read_dir(path) {
                for entry in entries.flatten() {
                    self.allow_tree(ruleset, &entry.path(), access, false);
                }
            }
            return;
        }
        let _ = ruleset.allow(path, access);
    }
}

fn allow_if_there(ruleset: &Ruleset, path: &str, access: u64) -> io::Result<()> {
    match ruleset.allow(Path::new(path), access) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_what_holds_them() {
        let view = View::new(Vec::new(), vec![PathBuf::from("/srv/export")]);
        for p in [
            "/etc/shadow",
            "/etc/ssl/private",
            "/etc/ssh/ssh_host_ed25519_key",
            "/srv/export",
        ] {
            assert!(view.is_secret(Path::new(p)), "{p}");
        }
        for p in [
            "/etc/passwd",
            "/etc/ssh/ssh_host_ed25519_key.pub",
            "/etc/ssh/ssh_config",
        ] {
            assert!(!view.is_secret(Path::new(p)), "{p}");
        }
        for d in ["/etc", "/etc/ssl", "/etc/ssh", "/srv", "/"] {
            assert!(view.holds_secret(Path::new(d)), "{d}");
        }
        for d in ["/usr", "/etc/ssl/certs", "/srv/export", "/srv/exports"] {
            assert!(!view.holds_secret(Path::new(d)), "{d}");
        }
    }
}
