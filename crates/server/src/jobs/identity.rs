//! Who a job runs as. A server running as root runs jobs as an unprivileged user: each
//! running job gets a uid of its own from `--job-uids FIRST-LAST` (as HTCondor's slot users),
//! or else all run as `--job-user` (default `nobody`). A server running as anybody else runs
//! jobs as its own user (in a user namespace of their own, where the kernel lets it make
//! one: [`super::isolation`]).

use std::collections::BTreeSet;
use std::ffi::{CStr, CString};
use std::io;
use std::path::Path;
use std::sync::Mutex;

/// The unix identity a job runs as.
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
    // SAFETY: `struct passwd` is plain data, valid all zeros (null pointers).
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is to a live buffer of the stated size.
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
        // SAFETY: a plain query of this process's user.
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
                // SAFETY: a plain query of this process's group.
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
            let st = stat(step).map_err(|e| format!("{}: {e}", step.display()))?;
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

fn stat(path: &Path) -> io::Result<libc::stat> {
    let c = CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `struct stat` is plain data, valid all zeros.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a path and a stat of ours.
    if unsafe { libc::stat(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// `--job-uids FIRST-LAST`: the uids jobs of a root server run as, one per running job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UidRange {
    pub first: u32,
    pub last: u32,
}

impl UidRange {
    /// Parses `FIRST-LAST` (FIRST at least 1, LAST not below it).
    pub fn parse(text: &str) -> Result<UidRange, String> {
        let bad = || format!("--job-uids {text}: expected FIRST-LAST, two uids above 0");
        let (first, last) = text.split_once('-').ok_or_else(bad)?;
        let first: u32 = first.trim().parse().map_err(|_| bad())?;
        let last: u32 = last.trim().parse().map_err(|_| bad())?;
        if first == 0 || last < first || last == u32::MAX {
            return Err(bad());
        }
        Ok(UidRange { first, last })
    }

    /// How many uids it holds.
    pub fn count(&self) -> usize {
        (self.last - self.first) as usize + 1
    }

    fn contains(&self, uid: u32) -> bool {
        (self.first..=self.last).contains(&uid)
    }
}

/// Each account of the user database (NSS included) with a uid in `range`: (name, uid).
fn accounts_in(range: UidRange) -> Vec<(String, u32)> {
    // getpwent is not reentrant: one caller at a time, and the enumeration is closed.
    static ENUMERATION: Mutex<()> = Mutex::new(());
    let _one = ENUMERATION.lock().unwrap_or_else(|e| e.into_inner());
    let mut found = Vec::new();
    // SAFETY: the enumeration is used by this thread alone (the lock above) and each entry
    // is copied before the next call.
    unsafe {
        libc::setpwent();
        loop {
            let p = libc::getpwent();
            if p.is_null() {
                break;
            }
            if range.contains((*p).pw_uid) {
                let name = CStr::from_ptr((*p).pw_name).to_string_lossy().into_owned();
                found.push((name, (*p).pw_uid));
            }
        }
        libc::endpwent();
    }
    found
}

/// The identities of jobs: one for all, or a uid of a range for each running job.
pub struct JobUsers {
    /// `--job-user` (or the server's own user): every job's, or the group and the name of
    /// the range's uids.
    base: Identity,
    /// The range's uids no running job holds; `None` without `--job-uids`.
    free: Option<Mutex<BTreeSet<u32>>>,
}

impl JobUsers {
    /// The identities for jobs: [`Identity::resolve`] of `user`, and with `uids` a uid of
    /// theirs for each job running at once, of which there are at most `concurrency`. The
    /// uids must be for jobs alone: none may belong to an account.
    pub fn resolve(
        user: Option<&str>,
        uids: Option<UidRange>,
        concurrency: usize,
    ) -> Result<JobUsers, String> {
        let base = Identity::resolve(user)?;
        let Some(range) = uids else {
            return Ok(JobUsers { base, free: None });
        };
        let text = format!("{}-{}", range.first, range.last);
        if !base.switch {
            return Err(format!(
                "--job-uids {text}: only a server running as root can give jobs uids of their \
                 own (this one runs every job as {}, in a user namespace where it can)",
                base.name
            ));
        }
        if range.count() < concurrency {
            return Err(format!(
                "--job-uids {text} holds {} uids, fewer than --job-concurrency {concurrency}: \
                 give at least one uid per job running at once",
                range.count()
            ));
        }
        if let Some((name, uid)) = accounts_in(range).first() {
            return Err(format!(
                "--job-uids {text}: uid {uid} belongs to the account {name}, whose files its \
                 jobs could read and change: choose uids no account has"
            ));
        }
        // Never more than the jobs that can run at once are needed.
        let free = (range.first..=range.last)
            .take(concurrency.max(1))
            .collect();
        Ok(JobUsers {
            base,
            free: Some(Mutex::new(free)),
        })
    }

    /// `--job-user`'s identity (or the server's own).
    pub fn base(&self) -> &Identity {
        &self.base
    }

    /// Whether each job gets a uid of its own.
    pub fn per_job(&self) -> bool {
        self.free.is_some()
    }

    /// The identity for a job about to start; `None` when every uid is held (which cannot
    /// happen while at most `concurrency` jobs run). Give it back with [`JobUsers::put_back`].
    pub fn take(&self) -> Option<Identity> {
        let Some(free) = &self.free else {
            return Some(self.base.clone());
        };
        let mut free = free.lock().unwrap_or_else(|e| e.into_inner());
        let uid = free.pop_first()?;
        Some(Identity {
            name: format!("job-{uid}"),
            uid,
            gid: self.base.gid,
            switch: true,
        })
    }

    /// Returns a job's identity once none of its processes is left.
    pub fn put_back(&self, identity: &Identity) {
        if let Some(free) = &self.free {
            if identity.uid != self.base.uid {
                free.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(identity.uid);
            }
        }
    }

    /// Checks that every job identity can reach `dir` (see [`Identity::check_reachable`]).
    pub fn check_reachable(&self, dir: &Path) -> Result<(), String> {
        match self.take() {
            Some(one) => {
                let checked = one.check_reachable(dir);
                self.put_back(&one);
                checked
            }
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_s_own_user_needs_no_switch() {
        // SAFETY: a plain query of this process's user.
        if unsafe { libc::geteuid() } == 0 {
            let id = Identity::resolve(None).unwrap();
            assert!(id.switch);
            assert_ne!(id.uid, 0);
            assert!(Identity::resolve(Some("root")).is_err());
            assert!(Identity::resolve(Some("no-such-user-here")).is_err());
        } else {
            let id = Identity::resolve(None).unwrap();
            assert!(!id.switch);
            // SAFETY: a plain query of this process's user.
            assert_eq!(id.uid, unsafe { libc::geteuid() });
            assert!(Identity::resolve(Some("root")).is_err());
        }
    }

    #[test]
    fn uid_ranges() {
        assert_eq!(
            UidRange::parse("200000-200063"),
            Ok(UidRange {
                first: 200000,
                last: 200063
            })
        );
        assert_eq!(UidRange::parse("5-5").unwrap().count(), 1);
        for bad in ["0-10", "10-5", "10", "a-b", "-3", "1-4294967295"] {
            assert!(UidRange::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn each_running_job_gets_a_uid_no_account_has() {
        // SAFETY: a plain query of this process's user.
        if unsafe { libc::geteuid() } != 0 {
            let err = JobUsers::resolve(None, Some(UidRange::parse("300000-300001").unwrap()), 1)
                .err()
                .unwrap();
            assert!(err.contains("only a server running as root"), "{err}");
            return;
        }
        let range = UidRange::parse("300000-300009").unwrap();
        let users = JobUsers::resolve(None, Some(range), 2).unwrap();
        let a = users.take().unwrap();
        let b = users.take().unwrap();
        assert_ne!(a.uid, b.uid);
        assert!(users.take().is_none());
        users.put_back(&a);
        assert_eq!(users.take().unwrap().uid, a.uid);
        let err = JobUsers::resolve(None, Some(range), 11).err().unwrap();
        assert!(err.contains("fewer than --job-concurrency 11"), "{err}");
        // nobody's uid belongs to an account.
        let nobody = Identity::resolve(None).unwrap().uid;
        let err = JobUsers::resolve(
            None,
            Some(UidRange {
                first: nobody,
                last: nobody,
            }),
            1,
        )
        .err()
        .unwrap();
        assert!(err.contains("belongs to the account"), "{err}");
    }
}
