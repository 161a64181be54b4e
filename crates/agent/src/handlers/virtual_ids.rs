//! Identity virtualization (`roost run --uid/--gid/--user/--hostname`): the id queries
//! (getuid, geteuid, getgid, getegid, getresuid, getresgid, getgroups) and uname answer the
//! identity given instead of the real one, as SP5's Objectivity needed (it checked who it
//! ran as). The calls are trapped only when an identity is given; both delivery paths
//! answer them here. Name lookups (`/etc/passwd`, `/etc/group`) are served by files roost
//! generates and maps (see `crates/roost/src/run.rs`).

use super::{Action, Decision};
use crate::arch::Regs;
use crate::arch::Sys;

/// The identity a program is shown.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VirtualIds {
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// The node name uname reports.
    pub hostname: Option<String>,
}

impl VirtualIds {
    /// Whether anything is virtualized (otherwise nothing is trapped for it).
    pub fn any(&self) -> bool {
        self.uid.is_some() || self.gid.is_some() || self.hostname.is_some()
    }
}

/// The calls answered here.
pub const CALLS: &[Sys] = &[
    Sys::Getuid,
    Sys::Geteuid,
    Sys::Getgid,
    Sys::Getegid,
    Sys::Getresuid,
    Sys::Getresgid,
    Sys::Getgroups,
    Sys::Uname,
];

/// The answer to id query `name` of a thread whose registers are `regs`: the virtual
/// value, or the kernel's where that part is not virtualized (`Pass`).
pub fn answer(sys: Sys, regs: &Regs, ids: &VirtualIds) -> Decision {
    let value = |v: u32| {
        Decision::new(Action::Emulate {
            ret: i64::from(v),
            writes: Vec::new(),
        })
    };
    let triple = |v: u32| {
        let writes = (0..3)
            .map(|i| (regs.arg(i), v.to_ne_bytes().to_vec()))
            .collect();
        Decision::new(Action::Emulate { ret: 0, writes })
    };
    match (sys, ids.uid, ids.gid) {
        (Sys::Getuid | Sys::Geteuid, Some(uid), _) => value(uid),
        (Sys::Getgid | Sys::Getegid, _, Some(gid)) => value(gid),
        (Sys::Getresuid, Some(uid), _) => triple(uid),
        (Sys::Getresgid, _, Some(gid)) => triple(gid),
        (Sys::Getgroups, _, Some(gid)) => groups(regs, gid),
        (Sys::Uname, _, _) => match &ids.hostname {
            Some(host) => uname(regs, host),
            None => Decision::pass(),
        },
        _ => Decision::pass(),
    }
}

/// getgroups(size, list): the virtual group alone.
fn groups(regs: &Regs, gid: u32) -> Decision {
    let size = regs.arg(0) as i32;
    if size < 0 {
        return Decision::fail(libc::EINVAL);
    }
    let writes = if size == 0 {
        Vec::new()
    } else {
        vec![(regs.arg(1), gid.to_ne_bytes().to_vec())]
    };
    Decision::new(Action::Emulate { ret: 1, writes })
}

/// uname(buf): the kernel's answer with the node name replaced.
fn uname(regs: &Regs, host: &str) -> Decision {
    // SAFETY: the kernel fills the plain-data struct.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: a valid utsname buffer.
    if unsafe { libc::uname(&mut u) } != 0 {
        return Decision::fail(libc::EFAULT);
    }
    u.nodename = [0; 65];
    for (slot, b) in u.nodename.iter_mut().zip(host.bytes().take(64)) {
        *slot = b as libc::c_char;
    }
    // SAFETY: plain data, fully initialised above.
    let bytes = unsafe {
        std::slice::from_raw_parts(
            (&u as *const libc::utsname).cast::<u8>(),
            std::mem::size_of::<libc::utsname>(),
        )
    }
    .to_vec();
    Decision::new(Action::Emulate {
        ret: 0,
        writes: vec![(regs.arg(0), bytes)],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emulated(d: Decision) -> (i64, Vec<(u64, Vec<u8>)>) {
        match d.action {
            Action::Emulate { ret, writes } => (ret, writes),
            other => panic!("not emulated: {other:?}"),
        }
    }

    #[test]
    fn ids_answer_the_virtual_identity_and_pass_the_rest() {
        let ids = VirtualIds {
            uid: Some(4242),
            gid: None,
            hostname: Some("node7".into()),
        };
        let regs = Regs::from_args(&[0x1000, 0x2000, 0x3000, 0, 0, 0]);
        assert_eq!(emulated(answer(Sys::Geteuid, &regs, &ids)).0, 4242);
        let (ret, writes) = emulated(answer(Sys::Getresuid, &regs, &ids));
        assert_eq!(ret, 0);
        assert_eq!(
            writes.iter().map(|(a, _)| *a).collect::<Vec<_>>(),
            [0x1000, 0x2000, 0x3000]
        );
        assert!(matches!(
            answer(Sys::Getgid, &regs, &ids).action,
            Action::Pass
        ));
        let (_, writes) = emulated(answer(Sys::Uname, &regs, &ids));
        let node = &writes[0].1[65..65 + 6];
        assert_eq!(node, b"node7\0");
    }

    #[test]
    fn getgroups_reports_one_group() {
        let ids = VirtualIds {
            gid: Some(7),
            ..VirtualIds::default()
        };
        let ask = |size: u64| {
            answer(
                Sys::Getgroups,
                &Regs::from_args(&[size, 0x10, 0, 0, 0, 0]),
                &ids,
            )
        };
        assert_eq!(emulated(ask(0)), (1, Vec::new()));
        assert_eq!(
            emulated(ask(8)),
            (1, vec![(0x10, 7u32.to_ne_bytes().to_vec())])
        );
        assert!(matches!(ask(u64::MAX).action, Action::Fail(libc::EINVAL)));
    }
}
