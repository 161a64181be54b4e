//! Whose call the supervisor performs: the caller's umask and file-system credentials, and
//! running a call with them. roost and its tracees share one user unless roost is root and
//! a tracee dropped its privileges (ids, groups or capabilities); then the supervisor thread
//! takes on the caller's fsuid, fsgid, groups and effective capabilities for the duration of
//! the call. Everything comes from `/proc/TID/status`.

use crate::arch::Sys;
use crate::procinfo::Status;
use std::sync::OnceLock;

/// What of the caller's identity a file-system call depends on.
#[derive(Clone, Debug, PartialEq)]
pub struct Identity {
    pub umask: u32,
    fsuid: u32,
    fsgid: u32,
    groups: Vec<u32>,
    /// Effective capabilities.
    caps: u64,
    real_uid: u32,
    real_gid: u32,
    permitted_caps: u64,
    /// The uid and the gid, when the real, effective, saved and file-system ids are each
    /// one value.
    single_ids: Option<(u32, u32)>,
}

impl Identity {
    /// Thread `tid`'s identity, as `/proc` shows it now.
    pub fn read(tid: i32) -> Option<Identity> {
        Status::read(tid).and_then(|s| Identity::of(&s))
    }

    pub fn of(status: &Status) -> Option<Identity> {
        let mut groups: Vec<u32> = status
            .field("Groups:")?
            .filter_map(|g| g.parse().ok())
            .collect();
        groups.sort_unstable();
        Some(Identity {
            umask: status.umask()?,
            fsuid: status.number("Uid:", 3)?,
            fsgid: status.number("Gid:", 3)?,
            groups,
            caps: status.hex("CapEff:")?,
            real_uid: status.number("Uid:", 0)?,
            real_gid: status.number("Gid:", 0)?,
            permitted_caps: status.hex("CapPrm:")?,
            single_ids: status.single("Uid:").zip(status.single("Gid:")),
        })
    }

    /// Whether the two have the same ids, groups and capabilities (umasks aside).
    fn same_credentials(&self, other: &Identity) -> bool {
        Identity {
            umask: other.umask,
            ..self.clone()
        } == *other
    }

    /// The identity `access(2)` checks with (no `AT_EACCESS`): the real uid and gid, and
    /// the full permitted capabilities for a real root, none otherwise — as the kernel's
    /// `faccessat` overrides the caller's credentials.
    pub fn for_access(&self) -> Identity {
        Identity {
            fsuid: self.real_uid,
            fsgid: self.real_gid,
            caps: if self.real_uid == 0 {
                self.permitted_caps
            } else {
                0
            },
            ..self.clone()
        }
    }
}

/// The supervisor's own identity (fixed for its life): what `as_caller` returns to.
fn own() -> &'static Option<Identity> {
    static OWN: OnceLock<Option<Identity>> = OnceLock::new();
    // SAFETY: a plain id query.
    OWN.get_or_init(|| Identity::read(unsafe { libc::gettid() }))
}

/// Whether credential call `name` (`args` its arguments) by thread `tid` leaves its
/// identity roost's own: the thread has roost's identity now (ids, groups, capabilities;
/// it may have lost some without a trapped call, by `PR_CAPBSET_DROP` and an exec),
/// roost's real, effective, saved and file-system ids are each one value, and the call
/// sets ids only to that value (or to -1, "leave it"). make, run by root, sets its
/// effective uid to its real one as it starts; that must not make every later call read
/// its caller's identity. setgroups (whose list the caller could change between roost's
/// look and the kernel's), capset and anything unreadable count as changes.
pub fn leaves_own_identity(sys: Sys, args: &[u64; 6], tid: i32) -> bool {
    let Some((own, (uid, gid))) = own().as_ref().and_then(|o| Some((o, o.single_ids?))) else {
        return false;
    };
    // The kernel takes the low 32 bits of an id argument; -1 leaves an id as it is.
    let all = |count: usize, id: u32| {
        args[..count]
            .iter()
            .all(|&a| a as u32 == u32::MAX || a as u32 == id)
    };
    let only_own_ids = match sys {
        Sys::Setuid | Sys::Setfsuid => all(1, uid),
        Sys::Setgid | Sys::Setfsgid => all(1, gid),
        Sys::Setreuid => all(2, uid),
        Sys::Setregid => all(2, gid),
        Sys::Setresuid => all(3, uid),
        Sys::Setresgid => all(3, gid),
        _ => false,
    };
    // The caller's single ids are compared too: they are roost's uid and gid.
    only_own_ids && Identity::read(tid).is_some_and(|who| who.same_credentials(own))
}

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// Sets this thread's effective capabilities (within its permitted set).
fn set_effective_caps(caps: u64) {
    let mut header = [CAPABILITY_VERSION_3, 0u32];
    // (effective, permitted, inheritable) for the low and the high 32 capabilities.
    let mut data = [[0u32; 3]; 2];
    // SAFETY: raw capget/capset on this thread with buffers of the version-3 size.
    unsafe {
        if libc::syscall(libc::SYS_capget, header.as_mut_ptr(), data.as_mut_ptr()) != 0 {
            return;
        }
        data[0][0] = caps as u32 & data[0][1];
        data[1][0] = (caps >> 32) as u32 & data[1][1];
        libc::syscall(libc::SYS_capset, header.as_mut_ptr(), data.as_ptr());
    }
}

/// Sets this thread's file-system ids and groups.
fn set_ids(groups: &[u32], fsgid: u32, fsuid: u32) {
    // SAFETY: raw per-thread credential changes with valid arguments.
    unsafe {
        libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr());
        libc::syscall(libc::SYS_setfsgid, fsgid);
        libc::syscall(libc::SYS_setfsuid, fsuid);
    }
}

/// Runs `f` with this thread's file-system identity switched to `who`'s where it differs
/// from roost's own. Only root can differ from its tracees (they may drop privileges); the
/// raw syscalls change this thread alone, unlike libc's process-wide wrappers.
pub fn as_caller<T>(who: Option<&Identity>, f: impl FnOnce() -> T) -> T {
    let Some(own) = own() else {
        return f();
    };
    let differs = |w: &&Identity| {
        own.fsuid == 0
            && (w.fsuid != own.fsuid
                || w.fsgid != own.fsgid
                || w.groups != own.groups
                || w.caps != own.caps)
    };
    let Some(who) = who.filter(differs) else {
        return f();
    };
    // setgroups needs CAP_SETGID: ids first, capabilities last; the reverse to restore.
    // Each change sets the process's dumpable flag to `fs.suid_dumpable`: roost clears it
    // again (`crate::guard`), in case that sysctl is 1.
    set_ids(&who.groups, who.fsgid, who.fsuid);
    set_effective_caps(who.caps);
    let _ = crate::guard::undumpable();
    let out = f();
    set_effective_caps(own.caps);
    set_ids(&own.groups, own.fsgid, own.fsuid);
    let _ = crate::guard::undumpable();
    out
}

/// Reads what a call by thread `tid` needs: its identity when the call applies the umask
/// (`umask`; the umask is then set on this thread) or when it may not share roost's
/// credentials (`other_identity`). `Err(ESRCH)`: the caller is gone.
pub fn prepare(tid: i32, umask: bool, other_identity: bool) -> Result<Option<Identity>, i32> {
    if !umask && !other_identity {
        return Ok(None);
    }
    let who = Identity::read(tid).ok_or(libc::ESRCH)?;
    if umask {
        // SAFETY: the supervisor thread has its own fs attributes (see `supervisor::start`).
        unsafe { libc::umask(who.umask as libc::mode_t) };
    }
    Ok(Some(who))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tsh\nUmask:\t0027\nTgid:\t41\nUid:\t1000\t0\t0\t0\n\
        Gid:\t100\t0\t0\t0\nGroups:\t27 4 \nCapPrm:\t000001ffffffffff\n\
        CapEff:\t000001ffffffffff\n";

    #[test]
    fn status_fields_parse() {
        let s = Status::from_text(STATUS.into());
        assert_eq!(s.tgid(), Some(41));
        let who = Identity::of(&s).unwrap();
        assert_eq!((who.umask, who.fsuid, who.fsgid), (0o027, 0, 0));
        assert_eq!(who.groups, vec![4, 27]);
        assert_eq!(who.caps, 0x1ff_ffff_ffff);
        assert!(!s.signal_pending(|| 0));
    }

    #[test]
    fn pending_signals_count_unless_blocked_or_the_main_threads() {
        // STATUS is thread 41 of process 41 (the main thread); 42 is another thread.
        let main = |extra: &str| Status::from_text(format!("{STATUS}Pid:\t41\n{extra}"));
        let other = |extra: &str| Status::from_text(format!("{STATUS}Pid:\t42\n{extra}"));
        let thread = "SigPnd:\t0000000000002000\n";
        assert!(other(&format!("{thread}SigBlk:\t0\n")).signal_pending(|| 0));
        assert!(!other(&format!("{thread}SigBlk:\t2000\n")).signal_pending(|| 0));
        // A signal sent to the process: the main thread's unless it blocks it.
        let process = "ShdPnd:\t0000000000004000\n";
        assert!(main(&format!("{process}SigBlk:\t0\n")).signal_pending(|| !0));
        assert!(!main(&format!("{process}SigBlk:\t4000\n")).signal_pending(|| 0));
        assert!(!other(&format!("{process}SigBlk:\t0\n")).signal_pending(|| 0));
        assert!(other(&format!("{process}SigBlk:\t0\n")).signal_pending(|| 0x4000));
        // SIGCHLD (bit 16) interrupts only when caught; an ignored signal never does.
        let chld = "SigPnd:\t0000000000010000\nSigBlk:\t0\n";
        assert!(!other(chld).signal_pending(|| 0));
        let caught = format!("{chld}SigCgt:\t0000000000010000\n");
        assert!(other(&caught).signal_pending(|| 0));
        let ignored = format!("{thread}SigBlk:\t0\nSigIgn:\t2000\n");
        assert!(!other(&ignored).signal_pending(|| 0));
    }

    #[test]
    fn setting_roost_s_own_ids_again_is_no_change() {
        let own = own().as_ref().expect("roost's own identity");
        let (uid, gid) = own
            .single_ids
            .expect("the tests run with one uid and one gid");
        let me = unsafe { libc::gettid() };
        let args = |a: &[u64]| {
            let mut all = [0u64; 6];
            all[..a.len()].copy_from_slice(a);
            all
        };
        let keep = u64::from(u32::MAX); // -1: leave the id as it is
        let (uid, gid) = (u64::from(uid), u64::from(gid));
        // make as root: setresuid(-1, 0, -1), setresgid(-1, 0, -1).
        assert!(leaves_own_identity(
            Sys::Setresuid,
            &args(&[keep, uid, keep]),
            me
        ));
        assert!(leaves_own_identity(
            Sys::Setresgid,
            &args(&[keep, gid, keep]),
            me
        ));
        assert!(leaves_own_identity(Sys::Setuid, &args(&[uid]), me));
        // The kernel reads an id as 32 bits: -1 sign-extended to 64 still means "leave it".
        assert!(leaves_own_identity(
            Sys::Setreuid,
            &args(&[u64::MAX, uid]),
            me
        ));
        // Any other id, setgroups or capset is a change.
        assert!(!leaves_own_identity(
            Sys::Setresuid,
            &args(&[keep, uid + 1, keep]),
            me
        ));
        assert!(!leaves_own_identity(Sys::Setgid, &args(&[gid + 1]), me));
        assert!(!leaves_own_identity(Sys::Setfsuid, &args(&[uid + 1]), me));
        assert!(!leaves_own_identity(Sys::Setgroups, &args(&[0, 0]), me));
        assert!(!leaves_own_identity(Sys::Capset, &args(&[0, 0]), me));
        // A thread that is gone (or whose identity cannot be read) is no proof.
        assert!(!leaves_own_identity(Sys::Setuid, &args(&[uid]), i32::MAX));
    }

    #[test]
    fn credentials_compare_without_the_umask() {
        let who = Identity::of(&Status::from_text(STATUS.into())).unwrap();
        let other_umask = Identity::of(&Status::from_text(STATUS.replace("0027", "0022"))).unwrap();
        assert!(who.same_credentials(&other_umask));
        let fewer_caps = Identity::of(&Status::from_text(
            STATUS.replace("CapEff:\t000001ffffffffff", "CapEff:\t000001fffffffffd"),
        ))
        .unwrap();
        assert!(!who.same_credentials(&fewer_caps));
        let other_groups =
            Identity::of(&Status::from_text(STATUS.replace("27 4", "27 5"))).unwrap();
        assert!(!who.same_credentials(&other_groups));
        // Only the saved uid differs: no longer one uid.
        let root = |uids: &str| {
            let status = STATUS
                .replace("Uid:\t1000\t0\t0\t0", uids)
                .replace("Gid:\t100\t0\t0\t0", "Gid:\t0\t0\t0\t0");
            Identity::of(&Status::from_text(status)).unwrap()
        };
        let all_root = root("Uid:\t0\t0\t0\t0");
        assert_eq!(all_root.single_ids, Some((0, 0)));
        let saved = root("Uid:\t0\t0\t5\t0");
        assert_eq!(saved.single_ids, None);
        assert!(!all_root.same_credentials(&saved));
    }

    #[test]
    fn access_checks_with_the_real_ids() {
        let who = Identity::of(&Status::from_text(STATUS.into())).unwrap();
        let a = who.for_access();
        assert_eq!((a.fsuid, a.fsgid, a.caps), (1000, 100, 0));
        let root =
            Identity::of(&Status::from_text(STATUS.replace("Uid:\t1000", "Uid:\t0"))).unwrap();
        assert_eq!(root.for_access().caps, 0x1ff_ffff_ffff);
    }
}
