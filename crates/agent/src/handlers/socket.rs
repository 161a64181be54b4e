//! AF_UNIX socket paths: bind, connect and sendto name a `sockaddr_un`; sendmsg and sendmmsg
//! carry one in each `msghdr`. Pathname addresses are resolved like any path; abstract and
//! non-Unix addresses pass untouched. getsockname and getpeername answer such an address,
//! which the program sees by its logical name.

use super::{resolve_path, Action, Arg, Ctx, Decision, Resolution, Scratch};
use crate::arch::Sys;
use crate::memory;
use crate::task::AfterExit;
use roost_vfs::Namespace;

const SUN_PATH_MAX: usize = 108;
const MSGHDR_LEN: usize = 56;
const MMSGHDR_LEN: usize = 64;

/// The path of an AF_UNIX pathname address (`None` for another family or an abstract name).
pub(crate) fn unix_path(sa: &[u8]) -> Option<&[u8]> {
    if sa.len() < 3 || u16::from_ne_bytes([sa[0], sa[1]]) != libc::AF_UNIX as u16 || sa[2] == 0 {
        return None;
    }
    let raw = &sa[2..];
    Some(&raw[..raw.iter().position(|&b| b == 0).unwrap_or(raw.len())])
}

/// The new `sockaddr_un` bytes for the address at `addr` (`len` bytes), if it must change.
fn translate(ctx: &mut Ctx<'_>, addr: u64, len: u64, follow: bool) -> Result<Option<Vec<u8>>, i32> {
    if addr == 0 || len <= 2 || len > 110 {
        return Ok(None);
    }
    let sa = memory::read(ctx.pid, addr, len as usize).map_err(|_| libc::EFAULT)?;
    let Some(path) = unix_path(&sa) else {
        return Ok(None);
    };
    let physical = match resolve_path(ctx, None, path, follow) {
        Resolution::Pass { .. } => return Ok(None),
        Resolution::Fail(e) => return Err(e),
        // A socket on a remote mount is a local one the run's processes meet at.
        Resolution::Remote { remote, .. } => remote
            .driver
            .unix_socket(&remote.path, ctx.sys == Sys::Bind)?,
        Resolution::Rewrite { physical, .. } => physical,
    };
    if physical.len() >= SUN_PATH_MAX {
        return Err(libc::ENAMETOOLONG);
    }
    let mut out = sa[..2].to_vec();
    out.extend_from_slice(&physical);
    out.push(0);
    Ok(Some(out))
}

/// bind / connect / sendto.
pub fn sockaddr(ctx: &mut Ctx<'_>, addr_arg: usize, len_arg: usize, follow: bool) -> Decision {
    let (addr, len) = (ctx.regs.arg(addr_arg), ctx.regs.arg(len_arg));
    match translate(ctx, addr, len, follow) {
        Err(e) => Decision::fail(e),
        Ok(None) => Decision::pass(),
        Ok(Some(sa)) => {
            let mut scratch = Scratch::default();
            let new_len = sa.len() as u64;
            let off = scratch.push_bytes(&sa);
            let mut d = Decision::new(Action::Rewrite {
                scratch,
                args: vec![
                    (addr_arg, Arg::Scratch(off)),
                    (len_arg, Arg::Value(new_len)),
                ],
            });
            d.physical = Some(sa[2..sa.len() - 1].to_vec());
            d
        }
    }
}

/// Rewrites the name of the `msghdr` at `hdr` (bytes `msg`) into `scratch`; returns the
/// offset of the patched copy, or None when the name needs no change.
fn patch_msghdr(
    ctx: &mut Ctx<'_>,
    msg: &[u8],
    scratch: &mut Scratch,
) -> Result<Option<usize>, i32> {
    let name = u64::from_ne_bytes(msg[..8].try_into().expect("8"));
    let namelen = u32::from_ne_bytes(msg[8..12].try_into().expect("4"));
    let Some(sa) = translate(ctx, name, u64::from(namelen), true)? else {
        return Ok(None);
    };
    let sa_off = scratch.push_bytes(&sa);
    let mut copy = msg.to_vec();
    copy[8..12].copy_from_slice(&(sa.len() as u32).to_ne_bytes());
    let at = scratch.push_bytes(&copy);
    scratch.relocate(at, sa_off);
    Ok(Some(at))
}

/// sendmsg.
pub fn sendmsg(ctx: &mut Ctx<'_>) -> Decision {
    let hdr = ctx.regs.arg(1);
    let msg = match memory::read(ctx.pid, hdr, MSGHDR_LEN) {
        Ok(m) if m.len() == MSGHDR_LEN => m,
        _ => return Decision::pass(),
    };
    let mut scratch = Scratch::default();
    match patch_msghdr(ctx, &msg, &mut scratch) {
        Err(e) => Decision::fail(e),
        Ok(None) => Decision::pass(),
        Ok(Some(off)) => Decision::new(Action::Rewrite {
            scratch,
            args: vec![(1, Arg::Scratch(off))],
        }),
    }
}

/// sendmmsg: every message's name is checked; the vector is copied only when one changes.
pub fn sendmmsg(ctx: &mut Ctx<'_>) -> Decision {
    let (vec, vlen) = (ctx.regs.arg(1), ctx.regs.arg(2).min(1024) as usize);
    let bytes = match memory::read(ctx.pid, vec, vlen * MMSGHDR_LEN) {
        Ok(b) if b.len() == vlen * MMSGHDR_LEN => b,
        _ => return Decision::pass(),
    };
    let mut scratch = Scratch::default();
    let mut copy = bytes.clone();
    let mut changed = false;
    let mut patches = Vec::new();
    for i in 0..vlen {
        let msg = &bytes[i * MMSGHDR_LEN..i * MMSGHDR_LEN + MSGHDR_LEN];
        let name = u64::from_ne_bytes(msg[..8].try_into().expect("8"));
        let namelen = u32::from_ne_bytes(msg[8..12].try_into().expect("4"));
        match translate(ctx, name, u64::from(namelen), true) {
            Err(e) => return Decision::fail(e),
            Ok(None) => {}
            Ok(Some(sa)) => {
                changed = true;
                let sa_off = scratch.push_bytes(&sa);
                copy[i * MMSGHDR_LEN + 8..i * MMSGHDR_LEN + 12]
                    .copy_from_slice(&(sa.len() as u32).to_ne_bytes());
                patches.push((i * MMSGHDR_LEN, sa_off));
            }
        }
    }
    if !changed {
        return Decision::pass();
    }
    let at = scratch.push_bytes(&copy);
    for (pos, sa_off) in patches {
        scratch.relocate(at + pos, sa_off);
    }
    let mut d = Decision::new(Action::Rewrite {
        scratch,
        args: vec![(1, Arg::Scratch(at))],
    });
    d.after = Some(AfterExit::MsgLens(vec));
    d
}

/// After a rewritten sendmmsg: the kernel wrote each sent message's `msg_len` into roost's
/// copy of the vector (at `copy`, still the call's second argument); `sent` of them go back
/// to the program's vector at `program`.
pub fn copy_msg_lens(pid: i32, copy: u64, program: u64, sent: usize) {
    for i in 0..sent.min(1024) as u64 {
        let at = i * MMSGHDR_LEN as u64 + MSGHDR_LEN as u64;
        if let Ok(len) = memory::read(pid, copy + at, 4) {
            let _ = memory::write(pid, program + at, &len);
        }
    }
}

/// getsockname / getpeername (`peer`): the kernel answers; the address is named logically
/// at the exit stop ([`logical_sockname`]).
pub fn sockname(ctx: &mut Ctx<'_>, addr_arg: usize, len_arg: usize, peer: bool) -> Decision {
    let (addr, len_at) = (ctx.regs.arg(addr_arg), ctx.regs.arg(len_arg));
    let Some(room) = read_u32(ctx.pid, len_at) else {
        return Decision::pass(); // the kernel's EFAULT
    };
    let mut d = Decision::pass();
    d.after = Some(AfterExit::SockName {
        fd: ctx.int_arg(0) as i32,
        peer,
        addr,
        len_at,
        room,
    });
    d
}

pub(crate) fn read_u32(pid: i32, at: u64) -> Option<u32> {
    let b = memory::read(pid, at, 4).ok()?;
    Some(u32::from_ne_bytes(b.as_slice().try_into().ok()?))
}

/// The whole address (or, with `peer`, the peer's) of socket `fd` of thread `pid`, asked by
/// roost on a copy of the descriptor (`None` for any error: not a socket, not connected, a
/// descriptor gone).
pub fn whole_address(pid: i32, fd: i32, peer: bool) -> Option<Vec<u8>> {
    let sock = crate::sys::take_thread_fd(pid, fd).ok()?;
    crate::sys::socket_name(&sock, peer).ok()
}

/// After a successful getsockname/getpeername: an AF_UNIX pathname address the kernel wrote
/// is rewritten to its logical name, with the truncation the kernel applies (`room` bytes at
/// most; the length says the whole address's size).
pub fn logical_sockname(
    ns: &Namespace,
    pid: i32,
    after: (i32, bool),
    addr: u64,
    len_at: u64,
    room: u32,
) {
    let Some(len) = read_u32(pid, len_at) else {
        return;
    };
    let sa = if len > room {
        whole_address(pid, after.0, after.1)
    } else {
        memory::read(pid, addr, len as usize).ok()
    };
    if let Some(logical) = sa.and_then(|sa| logical_address(ns, &sa)) {
        let _ = write_address(pid, (addr, len_at, room), logical);
    }
}

/// The logical form of socket address `sa` when it is an AF_UNIX pathname address whose
/// name differs logically (`None`: the program may see it as it is).
pub fn logical_address(ns: &Namespace, sa: &[u8]) -> Option<Vec<u8>> {
    let physical = unix_path(sa)?;
    if physical.first() != Some(&b'/') {
        return None; // bound by a relative name: the kernel keeps it as given
    }
    let logical = ns.table().reverse(physical);
    if logical == physical {
        return None;
    }
    let mut out = sa[..2].to_vec();
    out.extend_from_slice(&logical);
    out.push(0);
    Some(out)
}

/// Writes address `sa` into the program's buffer at `addr` as the kernel would: at most
/// `room` bytes of it, the whole length at `len_at`.
pub fn write_address(
    pid: i32,
    (addr, len_at, room): (u64, u64, u32),
    mut sa: Vec<u8>,
) -> Result<(), i32> {
    let whole = sa.len() as u32;
    sa.truncate(room as usize);
    memory::write(pid, addr, &sa).map_err(|_| libc::EFAULT)?;
    memory::write(pid, len_at, &whole.to_ne_bytes()).map_err(|_| libc::EFAULT)
}
