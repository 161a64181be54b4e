//! Whose call the supervisor performs: the caller's umask and file-system credentials, and
//! running a change with them. roost and its tracees share one user unless roost is root
//! and a tracee dropped its privileges; then changes are made with the caller's fsuid,
//! fsgid and groups, set on the supervisor thread alone for the duration of the call.

use std::sync::OnceLock;

/// What of the caller's identity a file-system change depends on, from `/proc/TID/status`.
pub struct Identity {
    pub umask: u32,
    fsuid: u32,
    fsgid: u32,
    groups: Vec<u32>,
}

pub fn identity(tid: i32) -> Option<Identity> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::split_whitespace)
    };
    Some(Identity {
        umask: u32::from_str_radix(field("Umask:")?.next()?, 8).ok()?,
        fsuid: field("Uid:")?.nth(3)?.parse().ok()?,
        fsgid: field("Gid:")?.nth(3)?.parse().ok()?,
        groups: field("Groups:")?.filter_map(|g| g.parse().ok()).collect(),
    })
}

/// This process's supplementary groups (fixed for its life).
fn own_groups() -> &'static [u32] {
    static GROUPS: OnceLock<Vec<u32>> = OnceLock::new();
    GROUPS.get_or_init(|| {
        let mut groups = vec![0u32; 65536];
        // SAFETY: the buffer holds as many entries as passed.
        let n = unsafe { libc::getgroups(groups.len() as i32, groups.as_mut_ptr()) };
        groups.truncate(n.max(0) as usize);
        groups.sort_unstable();
        groups
    })
}

/// Runs `f` with this thread's file-system identity switched to `who`'s where it differs
/// from roost's own. Only root can differ from its tracees (they may drop privileges); the
/// raw syscalls change this thread alone, unlike libc's process-wide wrappers.
pub fn as_caller<T>(who: Option<&Identity>, f: impl FnOnce() -> T) -> T {
    // SAFETY: plain id queries.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let Some(who) = who.filter(|w| {
        let mut groups = w.groups.clone();
        groups.sort_unstable();
        uid == 0 && (w.fsuid != uid || w.fsgid != gid || groups != own_groups())
    }) else {
        return f();
    };
    let set = |groups: &[u32], gid: u32, uid: u32| {
        // SAFETY: raw per-thread credential changes with valid arguments.
        unsafe {
            libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr());
            libc::syscall(libc::SYS_setfsgid, gid);
            libc::syscall(libc::SYS_setfsuid, uid);
        }
    };
    set(&who.groups, who.fsgid, who.fsuid);
    let out = f();
    set(own_groups(), gid, uid);
    out
}

/// Reads what a change by thread `tid` needs: its identity when the call applies the umask
/// (`umask`; the umask is then set on this thread) or when it may not share roost's
/// credentials (`other_identity`). `Err(ESRCH)`: the caller is gone.
pub fn prepare(tid: i32, umask: bool, other_identity: bool) -> Result<Option<Identity>, i32> {
    if !umask && !other_identity {
        return Ok(None);
    }
    let who = identity(tid).ok_or(libc::ESRCH)?;
    if umask {
        // SAFETY: the supervisor thread has its own fs attributes (see `notify::start`).
        unsafe { libc::umask(who.umask as libc::mode_t) };
    }
    Ok(Some(who))
}
