//! Paths carried inside a structure argument rather than as an argument of their own:
//! `bpf(BPF_OBJ_PIN / BPF_OBJ_GET)` names a file in a BPF file system, and `perf_event_open`
//! of a uprobe names the binary to probe. Every other use of both calls passes untouched.

use super::{resolve_path, Action, Arg, Ctx, Decision, Resolution, Scratch};
use crate::memory;
use std::sync::OnceLock;

const BPF_OBJ_PIN: u64 = 6;
const BPF_OBJ_GET: u64 = 7;
/// `file_flags` bit: `path_fd` is the directory a relative `pathname` starts from.
const BPF_F_PATH_FD: u32 = 1 << 14;
/// The `bpf_attr` fields of the OBJ commands: pathname, bpf_fd, file_flags, path_fd.
const BPF_OBJ_ATTR_LEN: usize = 20;
/// The most of a `bpf_attr` roost copies (the kernel refuses larger ones with E2BIG unless
/// the rest is zero; what it reads of the copy must be the program's own bytes).
const BPF_ATTR_MAX: usize = 4096;

/// `perf_event_attr.config1`, which a uprobe event uses for the path of its binary.
const UPROBE_PATH_OFFSET: usize = 56;
/// The size of the first published `perf_event_attr` (an attr giving size 0 means this).
const PERF_ATTR_SIZE_VER0: usize = 64;
/// The largest attr roost copies; the kernel's is 136 bytes in Linux 6.x.
const PERF_ATTR_SIZE_MAX: usize = 4096;

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// bpf(cmd, attr, size).
pub fn bpf(ctx: &mut Ctx<'_>) -> Decision {
    let cmd = ctx.regs.arg(0);
    if cmd != BPF_OBJ_PIN && cmd != BPF_OBJ_GET {
        return Decision::pass();
    }
    // The whole structure as the program sized it: the kernel checks that every byte after
    // the fields it uses is zero, so the copy must hold them all.
    let len = ctx.regs.arg(2) as usize;
    if !(8..=BPF_ATTR_MAX).contains(&len) {
        return Decision::pass(); // the kernel refuses it
    }
    let attr = match memory::read(ctx.pid, ctx.regs.arg(1), len) {
        Ok(a) if a.len() == len => a,
        _ => return Decision::fail(libc::EFAULT),
    };
    let dirfd = (len >= BPF_OBJ_ATTR_LEN && u32_at(&attr, 12) & BPF_F_PATH_FD != 0)
        .then(|| i64::from(u32_at(&attr, 16) as i32));
    // Pinning creates the name; getting opens what it names.
    rewrite_embedded(ctx, 1, attr, 0, dirfd, cmd == BPF_OBJ_GET)
}

/// The dynamic PMU type of uprobes on this machine, if it has them.
fn uprobe_type() -> Option<u32> {
    static TYPE: OnceLock<Option<u32>> = OnceLock::new();
    *TYPE.get_or_init(|| {
        std::fs::read_to_string("/sys/bus/event_source/devices/uprobe/type")
            .ok()?
            .trim()
            .parse()
            .ok()
    })
}

/// perf_event_open(attr, pid, cpu, group_fd, flags).
pub fn perf_event_open(ctx: &mut Ctx<'_>) -> Decision {
    let Some(uprobe) = uprobe_type() else {
        return Decision::pass();
    };
    let head = match memory::read(ctx.pid, ctx.regs.arg(0), 8) {
        Ok(h) if h.len() == 8 => h,
        _ => return Decision::fail(libc::EFAULT),
    };
    if u32_at(&head, 0) != uprobe {
        return Decision::pass();
    }
    let size = match u32_at(&head, 4) as usize {
        0 => PERF_ATTR_SIZE_VER0,
        n if !(PERF_ATTR_SIZE_VER0..=PERF_ATTR_SIZE_MAX).contains(&n) => return Decision::pass(),
        n => n,
    };
    let attr = match memory::read(ctx.pid, ctx.regs.arg(0), size) {
        Ok(a) if a.len() == size => a,
        _ => return Decision::fail(libc::EFAULT),
    };
    rewrite_embedded(ctx, 0, attr, UPROBE_PATH_OFFSET, None, true)
}

/// Resolves the path whose pointer sits at `offset` of `bytes` (the structure argument
/// `arg` points to); when it must change, the call gets a copy of the structure pointing at
/// the physical path.
fn rewrite_embedded(
    ctx: &mut Ctx<'_>,
    arg: usize,
    bytes: Vec<u8>,
    offset: usize,
    dirfd: Option<i64>,
    follow: bool,
) -> Decision {
    let pointer = u64_at(&bytes, offset);
    if pointer == 0 {
        return Decision::pass();
    }
    let path = match ctx.read_path(pointer) {
        Ok(p) => p,
        Err(e) => return Decision::fail(e),
    };
    let (logical, physical) = match resolve_path(ctx, dirfd, &path, follow) {
        Resolution::Fail(e) => return Decision::fail(e),
        Resolution::Remote { .. } => return Decision::fail(libc::EOPNOTSUPP),
        Resolution::Pass { logical } => {
            let mut d = Decision::pass();
            d.logical = Some(logical);
            return d;
        }
        Resolution::Rewrite {
            logical, physical, ..
        } => (logical, physical),
    };
    let mut scratch = Scratch::default();
    let path_at = scratch.push_cstr(&physical);
    let copy_at = scratch.push_bytes(&bytes);
    scratch.relocate(copy_at + offset, path_at);
    let mut d = Decision::new(Action::Rewrite {
        scratch,
        args: vec![(arg, Arg::Scratch(copy_at))],
    });
    d.logical = Some(logical);
    d.physical = Some(physical);
    d
}
