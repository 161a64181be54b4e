//! Who a job runs as and what it may touch: the unix user (a dedicated unprivileged one when
//! the server is root, else the server's own), a Landlock ruleset that lets the job write only
//! beneath its sandbox (and to `/dev/null`) and signal only its own processes, the hook where
//! the owner's thermostat will take hold of a job's processes, and the clean-up of processes
//! a previous server left running.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// The unix identity jobs run as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    /// Whether the server must switch to it (it runs as root), or already is it.
    pub switch: bool,
}

/// The user jobs of a root server run as when `--job-user` names none.
pub const DEFAULT_JOB_USER: &str = "nobody";

/// Looks up `name` in the user database: its uid and primary gid.
fn lookup_user(name: &str) -> Option<(u32, u32)> {
    let cname = CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    let r = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        )
    };
    (r == 0 && !result.is_null()).then_some((pwd.pw_uid, pwd.pw_gid))
}

impl Identity {
    /// The identity for jobs: `user` (default [`DEFAULT_JOB_USER`]) when the server runs as
    /// root, which must not be root itself; the server's own user otherwise, when `user` is
    /// unset or names it.
    pub fn resolve(user: Option<&str>) -> Result<Identity, String> {
        let euid = unsafe { libc::geteuid() };
        let own = crate::auth::user_name(euid).unwrap_or_else(|| euid.to_string());
        if euid != 0 {
            if let Some(u) = user.filter(|u| *u != own) {
                return Err(format!(
                    "--job-user {u}: only a server running as root can run jobs as another user \
                     (this one runs as {own})"
                ));
            }
            return Ok(Identity {
                name: own,
                uid: euid,
                gid: unsafe { libc::getegid() },
                switch: false,
            });
        }
        let name = user.unwrap_or(DEFAULT_JOB_USER);
        let (uid, gid) =
            lookup_user(name).ok_or_else(|| format!("--job-user {name}: no such user"))?;
        if uid == 0 {
            return Err(format!(
                "--job-user {name}: jobs never run as root; name an unprivileged user"
            ));
        }
        Ok(Identity {
            name: name.to_string(),
            uid,
            gid,
            switch: true,
        })
    }

    /// Checks that this user can search every directory down to `dir` (so a job can enter
    /// its sandbox), by the permission bits; a refusal names the directory in the way.
    pub fn check_reachable(&self, dir: &Path) -> Result<(), String> {
        if !self.switch {
            return Ok(());
        }
        let dir = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for step in dir.ancestors() {
            let st = nix_stat(step).map_err(|e| format!("{}: {e}", step.display()))?;
            let bit = if st.st_uid == self.uid {
                0o100
            } else if st.st_gid == self.gid {
                0o010
            } else {
                0o001
            };
            if st.st_mode & bit == 0 {
                return Err(format!(
                    "{} (mode {:o}) is not searchable by {}, who runs the jobs: choose a job \
                     directory every parent of which {} may search",
                    step.display(),
                    st.st_mode & 0o7777,
                    self.name,
                    self.name
                ));
            }
        }
        Ok(())
    }
}

fn nix_stat(path: &Path) -> io::Result<libc::stat> {
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::stat(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

// ---- Landlock ---------------------------------------------------------------------------------

const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: libc::c_int = 1;
const ACCESS_WRITE_FILE: u64 = 1 << 1;
/// REMOVE_DIR, REMOVE_FILE and the seven MAKE_* rights.
const ACCESS_CHANGE_TREE: u64 = 0b1_1111_1111 << 4;
const ACCESS_REFER: u64 = 1 << 13;
const ACCESS_TRUNCATE: u64 = 1 << 14;
const SCOPE_SIGNAL: u64 = 1 << 1;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The Landlock ABI version the kernel offers, `None` without Landlock.
pub fn landlock_abi() -> Option<i64> {
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    (v > 0).then_some(v)
}

fn open_path(path: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn add_rule(ruleset: &OwnedFd, path: &Path, access: u64) -> io::Result<()> {
    let target = open_path(path)?;
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: target.as_raw_fd(),
    };
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A Landlock ruleset for a job in `sandbox`: every kind of write (creating, removing,
/// renaming, writing, truncating) only beneath the sandbox and to `/dev/null`; reading and
/// running programs as the user's permissions allow; signals only to the job's own
/// processes (Landlock ABI 6). `None` when the kernel has no Landlock. The descriptor is
/// close-on-exec; the job's process applies it with [`restrict_self`].
pub fn landlock_ruleset(sandbox: &Path, abi: Option<i64>) -> io::Result<Option<OwnedFd>> {
    let Some(abi) = abi else { return Ok(None) };
    let mut fs = ACCESS_WRITE_FILE | ACCESS_CHANGE_TREE;
    if abi >= 2 {
        fs |= ACCESS_REFER;
    }
    if abi >= 3 {
        fs |= ACCESS_TRUNCATE;
    }
    let attr = RulesetAttr {
        handled_access_fs: fs,
        handled_access_net: 0,
        scoped: if abi >= 6 { SCOPE_SIGNAL } else { 0 },
    };
    let size = if abi >= 6 {
        std::mem::size_of::<RulesetAttr>()
    } else {
        // Older kernels know only the first member(s); handled_access_net is 0 anyway.
        std::mem::size_of::<u64>()
    };
    let fd = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const RulesetAttr,
            size,
            0u32,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let ruleset = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    add_rule(&ruleset, sandbox, fs)?;
    add_rule(
        &ruleset,
        Path::new("/dev/null"),
        ACCESS_WRITE_FILE | (fs & ACCESS_TRUNCATE),
    )?;
    Ok(Some(ruleset))
}

/// Applies a ruleset to the calling process (and everything it starts). Only system calls:
/// safe between fork and exec. The caller must have set `PR_SET_NO_NEW_PRIVS`.
pub fn restrict_self(ruleset: libc::c_int) -> io::Result<()> {
    let r = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

// ---- the thermostat's hook ----------------------------------------------------------------------

/// Where the owner's limits on guest work (the thermostat, issue 13 item 3) take hold of a
/// job: [`ResourceLimits::admit`] is called with the job's process group right after its
/// first process starts, before it can have started others that escape, and
/// [`ResourceLimits::release`] once every process of it is gone. The thermostat will put the
/// group under its stop/continue loop there ([`crate::thermostat`]).
pub trait ResourceLimits: Send + Sync {
    /// Files the job's first process writes `0` to before it runs the program (a
    /// cgroup's `cgroup.procs`: it enters its groups itself, before its first instruction,
    /// where [`ResourceLimits::admit`] would find it some time after it started).
    fn entry_files(&self, _job: i64) -> io::Result<Vec<std::fs::File>> {
        Ok(Vec::new())
    }
    fn admit(&self, job: i64, pgid: i32) -> io::Result<()>;
    fn release(&self, job: i64);
    /// Why the limits killed job `job`, if they did (asked before [`ResourceLimits::release`]):
    /// the job is then reported ERRORED with this as its error.
    fn verdict(&self, _job: i64) -> Option<String> {
        None
    }
    /// What guest jobs may take now (what the owner offers, for the ledger).
    fn current(&self) -> crate::thermostat::schedule::Limits {
        crate::thermostat::schedule::Limits::UNLIMITED
    }
}

/// No limits: a server without `--thermostat`. Jobs are bounded only by
/// `--job-concurrency` and `--job-time-limit`.
pub struct Unlimited;

impl ResourceLimits for Unlimited {
    fn admit(&self, _job: i64, _pgid: i32) -> io::Result<()> {
        Ok(())
    }
    fn release(&self, _job: i64) {}
}

// ---- processes ----------------------------------------------------------------------------------

/// A process's group and start time (clock ticks after boot), from `/proc/PID/stat`.
pub fn group_and_start(pid: i32) -> Option<(i32, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold anything, even ") "; the fields follow its last ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(3) ppid(4) pgrp(5) ... starttime(22), counted from 1.
    let pgrp = fields.get(2)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((pgrp, start))
}

/// Kills (SIGKILL) every process left in process group `pgid` that runs as `uid` and started
/// no earlier than `start_ticks`: what a job started by a server that has since stopped left
/// behind. Returns how many were killed.
pub fn kill_leftovers(pgid: i32, uid: u32, start_ticks: u64) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut killed = 0;
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Some((group, start)) = group_and_start(pid) else {
            continue;
        };
        let owner = std::os::unix::fs::MetadataExt::uid(&match entry.metadata() {
            Ok(m) => m,
            Err(_) => continue,
        });
        if group == pgid && owner == uid && start >= start_ticks {
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed += 1;
        }
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_s_own_user_needs_no_switch() {
        if unsafe { libc::geteuid() } == 0 {
            let id = Identity::resolve(None).unwrap();
            assert!(id.switch);
            assert_ne!(id.uid, 0);
            assert!(Identity::resolve(Some("root")).is_err());
            assert!(Identity::resolve(Some("no-such-user-here")).is_err());
        } else {
            let id = Identity::resolve(None).unwrap();
            assert!(!id.switch);
            assert_eq!(id.uid, unsafe { libc::geteuid() });
            assert!(Identity::resolve(Some("root")).is_err());
        }
    }

    #[test]
    fn this_process_has_a_group_and_a_start_time() {
        let pid = std::process::id() as i32;
        let (pgrp, start) = group_and_start(pid).unwrap();
        assert_eq!(pgrp, unsafe { libc::getpgrp() });
        assert!(start > 0);
    }
}
