//! getsockname / getpeername delivered as notifications: roost asks the socket's name on a
//! copy of the caller's descriptor (`pidfd_getfd`) and, when it is an AF_UNIX path under a
//! mapping, writes its logical form into the caller's buffer as the kernel would (truncated
//! to the room given, the whole length said). Any other answer — another family, a name
//! nothing maps, an error such as ENOTSOCK or ENOTCONN — is the kernel's own: the call is
//! let through. (A ptrace stop and its exit stop each, before; bash asks `getpeername` of
//! its stdin at every start.)

use super::{Notification, Reply, CONTINUE};
use crate::arch::Regs;
use crate::handlers::socket;
use roost_vfs::Namespace;

/// Answers getsockname (`peer` false) or getpeername of `tid`.
pub fn answer(
    ns: &Namespace,
    tid: i32,
    regs: &Regs,
    (addr_arg, len_arg, peer): (usize, usize, bool),
    n: Notification,
) -> Reply {
    let (addr, len_at) = (regs.arg(addr_arg), regs.arg(len_arg));
    let Some(room) = socket::read_u32(tid, len_at) else {
        return CONTINUE; // the kernel's EFAULT
    };
    // Any error (EBADF, ENOTSOCK, ENOTCONN) is the kernel's to give.
    let Some(logical) = socket::whole_address(tid, regs.arg(0) as i32, peer)
        .and_then(|sa| socket::logical_address(ns, &sa))
    else {
        return CONTINUE;
    };
    if n.ensure_waiting().is_err() {
        return Reply::Answered;
    }
    Reply::from(socket::write_address(tid, (addr, len_at, room), logical).map(|()| 0))
}
