//! execve / execveat (and fexecve): the program, its nested `#!` interpreters (with their
//! optional argument) and its ELF `PT_INTERP` loader are all resolved through the namespace.
//! When an interpreter or loader lives elsewhere physically, the agent performs what the
//! kernel would: it execs the interpreter (or the loader, with `--argv0`) directly with the
//! argument vector the kernel would have built, so the kernel never resolves a logical path.

use super::{
    fd_path, logical_of_physical, procfs, relative_start, Action, Arg, Ctx, Decision, Scratch,
    AT_FDCWD,
};
use crate::memory;
use crate::syscalls::AT_EMPTY_PATH;
use roost_vfs::path::join;
use roost_vfs::{Driver, LocalDriver, ReadAt};

/// Linux follows at most this many nested interpreters.
const MAX_INTERPRETERS: usize = 4;
/// The longest argv the agent rewrites: more than the kernel admits under its usual 2 MiB
/// argument limit (each argument costs its pointer and at least a NUL byte of it).
const MAX_ARGS: usize = 1 << 18;
const AT_SYMLINK_NOFOLLOW: u64 = 0x100;

/// A `#!` line: the interpreter and its optional single argument.
pub fn parse_shebang(head: &[u8]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let line = head.strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let trim = |s: &[u8]| -> Vec<u8> {
        let start = s
            .iter()
            .position(|b| !b" \t\r".contains(b))
            .unwrap_or(s.len());
        let end = s
            .iter()
            .rposition(|b| !b" \t\r".contains(b))
            .map_or(start, |e| e + 1);
        s[start..end.max(start)].to_vec()
    };
    let line = trim(line);
    if line.is_empty() {
        return None;
    }
    match line.iter().position(|b| b" \t".contains(b)) {
        Some(sp) => {
            let arg = trim(&line[sp..]);
            Some((line[..sp].to_vec(), (!arg.is_empty()).then_some(arg)))
        }
        None => Some((line, None)),
    }
}

/// The `PT_INTERP` path of a 64-bit little-endian ELF file, if it has one; `head` is the
/// file's first bytes.
pub fn elf_interpreter(file: &dyn ReadAt, head: &[u8]) -> Option<Vec<u8>> {
    if head.len() < 64 || &head[..4] != b"\x7fELF" || head[4] != 2 || head[5] != 1 {
        return None;
    }
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8"));
    let phoff = u64_at(head, 0x20);
    let phentsize = u16_at(head, 0x36);
    let phnum = u16_at(head, 0x38);
    if phentsize < 56 || phnum == 0 || phnum > 256 {
        return None;
    }
    let table = file.read_at(phoff, phentsize * phnum).ok()?;
    for ph in table.chunks_exact(phentsize) {
        if u32::from_le_bytes(ph[..4].try_into().expect("4")) == 3 {
            let (off, len) = (u64_at(ph, 8), u64_at(ph, 32) as usize);
            let mut s = file.read_at(off, len.min(4096)).ok()?;
            while s.last() == Some(&0) {
                s.pop();
            }
            return Some(s);
        }
    }
    None
}

/// What exec needs of a file's first bytes.
#[derive(Clone, Debug, PartialEq)]
enum Head {
    /// A `#!` script: its interpreter and the optional argument.
    Script(Vec<u8>, Option<Vec<u8>>),
    /// Anything else: an ELF file's `PT_INTERP` loader, when it has one.
    Binary(Option<Vec<u8>>),
}

/// A version of a file: (device, inode, size, mtime, ctime), in seconds and nanoseconds.
type FileVersion = (u64, u64, u64, i64, i64, i64, i64);

/// The most file heads kept; the cache is emptied rather than grown past it.
const HEADS_KEPT: usize = 4096;

/// The head of the regular file at `physical` (`None` for anything else, or one roost cannot
/// read: the kernel then decides), read once per version of the file, and the file's device
/// and inode. A program exec'd again and again (every `sed` and `cc1` of a build) then
/// costs a stat, not an open and three reads. Each thread deciding execs (the tracer, the
/// notification threads) keeps its own cache, with no lock to take.
fn head_of(physical: &[u8]) -> Option<(Head, (u64, u64))> {
    use std::os::unix::{ffi::OsStrExt, fs::MetadataExt};
    thread_local! {
        static HEADS: std::cell::RefCell<std::collections::HashMap<FileVersion, Head>> =
            Default::default();
    }
    let meta = std::fs::metadata(std::ffi::OsStr::from_bytes(physical)).ok()?;
    if !meta.is_file() {
        return None;
    }
    let version = (
        meta.dev(),
        meta.ino(),
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
    );
    let id = (meta.dev(), meta.ino());
    if let Some(head) = HEADS.with(|h| h.borrow().get(&version).cloned()) {
        return Some((head, id));
    }
    let file = LocalDriver.open_read(physical).ok()?;
    let first = file.read_at(0, 1024).ok()?;
    let head = match parse_shebang(&first) {
        Some((interp, opt)) => Head::Script(interp, opt),
        None => Head::Binary(elf_interpreter(&*file, &first)),
    };
    HEADS.with(|h| {
        let mut heads = h.borrow_mut();
        if heads.len() >= HEADS_KEPT {
            heads.clear();
        }
        heads.insert(version, head.clone());
    });
    Some((head, id))
}

/// What exec demands of a file it runs, for a file roost has another program run: execute
/// permission for the program's file-system identity (roost takes it on where it differs,
/// as for its opens) and a file system that allows exec. (Only regular files get this far.)
fn check_executable(pid: i32, physical: &[u8]) -> Result<(), i32> {
    let path = std::ffi::CString::new(physical).map_err(|_| libc::ENOENT)?;
    let who = crate::caller::Identity::read(pid);
    // SAFETY: a valid C string.
    let allowed = crate::caller::as_caller(who.as_ref(), || unsafe {
        libc::faccessat(libc::AT_FDCWD, path.as_ptr(), libc::X_OK, libc::AT_EACCESS) == 0
    });
    if !allowed {
        return Err(libc::EACCES);
    }
    // SAFETY: a valid C string; the kernel fills the plain-data struct.
    let mut fs: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(path.as_ptr(), &mut fs) } == 0 && fs.f_flag & libc::ST_NOEXEC != 0 {
        return Err(libc::EACCES);
    }
    Ok(())
}

/// Resolves a program path to (logical, physical, whether a mount was involved).
fn locate(
    ctx: &mut Ctx<'_>,
    logical_in: &[u8],
    follow: bool,
) -> Result<(Vec<u8>, Vec<u8>, bool), i32> {
    let caller = procfs::CallerProc {
        pid: ctx.pid,
        fs: ctx.fs,
    };
    let l = ctx.ns.locate_as(b"/", logical_in, follow, &caller)?;
    if crate::guard::names_own_process(&l.physical) {
        return Err(libc::EACCES); // roost's own `/proc/PID/exe`
    }
    // A remote program runs from its local copy (fetched here, under the namespace lock:
    // execs are few next to the lookups and opens made without it).
    let physical = match &l.remote {
        Some(r) => r.driver.localize(&r.path, roost_vfs::Intent::Read)?,
        None => l.physical,
    };
    Ok((l.logical, physical, l.via_mount))
}

/// Handles execve (`dirfd`/`flags` None) and execveat.
pub fn handle(
    ctx: &mut Ctx<'_>,
    dirfd_arg: Option<usize>,
    path_arg: usize,
    argv_arg: usize,
    flags_arg: Option<usize>,
) -> Decision {
    let flags = flags_arg.map_or(0, |i| ctx.regs.arg(i));
    let path = match ctx.read_path(ctx.regs.arg(path_arg)) {
        Ok(p) => p,
        Err(e) => return Decision::fail(e),
    };
    let dirfd = dirfd_arg.map_or(AT_FDCWD, |i| ctx.int_arg(i));
    // The name the program gave, and its absolute logical form.
    let logical_in = if path.is_empty() {
        if flags & AT_EMPTY_PATH == 0 {
            return Decision::fail(libc::ENOENT);
        }
        match fd_path(ctx.pid, dirfd) {
            Some(p) => logical_of_physical(ctx.ns, &p),
            None => return Decision::pass(), // memfd or deleted file: the kernel's business
        }
    } else if path[0] == b'/' {
        path.clone()
    } else {
        match relative_start(ctx, dirfd) {
            Some((start, _)) => join(&start, &path),
            None => return Decision::pass(),
        }
    };
    // /proc/self/exe and the like name the program's own files, not roost's.
    let logical_in = procfs::magic_link_target(ctx, &logical_in).unwrap_or(logical_in);
    // The name a script's interpreter is given. The kernel gives `/dev/fd/N[/NAME]` for a
    // name relative to a dirfd (or none); the interpreter could not open that through a
    // mount, so it gets the absolute logical name instead.
    let relative_to_dirfd = dirfd != AT_FDCWD && path.first() != Some(&b'/');
    let as_passed = if path.is_empty() || relative_to_dirfd {
        logical_in.clone()
    } else {
        path.clone()
    };
    let (mut logical, mut physical, mut touched) =
        match locate(ctx, &logical_in, flags & AT_SYMLINK_NOFOLLOW == 0) {
            Ok(x) => x,
            Err(e) => return Decision::fail(e),
        };
    // Arguments the kernel would put before argv[1..], and the new argv[0].
    let mut front: Vec<Vec<u8>> = Vec::new();
    let mut argv0: Option<Vec<u8>> = None;
    let mut name = as_passed;
    let mut loader: Option<(Vec<u8>, Vec<u8>)> = None;
    // The executable of a dynamically linked program (device, inode), as the kernel will
    // show it (`/proc/PID/exe`, by which the fast path's object counts what it answered).
    let mut dynamic = None;
    for depth in 0..=MAX_INTERPRETERS {
        // Failures are the kernel's to report (EACCES, ENOENT, ...) when it runs the exec.
        let Some((head, id)) = head_of(&physical) else {
            break;
        };
        if let Head::Script(interp, opt) = head {
            if depth == MAX_INTERPRETERS {
                return Decision::fail(libc::ELOOP);
            }
            // The kernel will exec the interpreter, not the script: check what it would.
            if let Err(e) = check_executable(ctx.pid, &physical) {
                return Decision::fail(e);
            }
            let mut prefix: Vec<Vec<u8>> = opt.into_iter().collect();
            prefix.push(name);
            prefix.append(&mut front);
            front = prefix;
            argv0 = Some(interp.clone());
            let interp_logical = join(&ctx.fs.get().logical, &interp);
            match locate(ctx, &interp_logical, true) {
                Ok((l, p, via)) => {
                    (logical, physical) = (l, p);
                    touched |= via;
                }
                Err(e) => return Decision::fail(e),
            }
            name = interp;
            continue;
        }
        if let Head::Binary(Some(interp)) = head {
            dynamic = Some(id);
            match locate(ctx, &join(b"/", &interp), true) {
                // The kernel will exec the loader, not the program: check what it would.
                Ok((l, p, true)) => match check_executable(ctx.pid, &physical) {
                    Ok(()) => {
                        // Run as the loader's argument: the loader is the executable.
                        dynamic = roost_vfs::resolve::file_id(&p);
                        loader = Some((l, p));
                    }
                    Err(e) => return Decision::fail(e),
                },
                Ok(_) => {}
                Err(e) => return Decision::fail(e),
            }
        }
        break;
    }
    if let Some(fast) = ctx.fast {
        // Its dynamic loader's first look at the preload list is to come (or none is).
        fast.loader_comes(ctx.pid, dynamic);
    }
    let mut d = Decision::pass();
    d.logical = Some(logical.clone());
    d.physical = Some(physical.clone());
    d.exe = Some(logical);
    if !touched && loader.is_none() {
        // No mount involved anywhere: the kernel resolves exactly what roost would.
        return d;
    }
    let kernel_view = if path.first() == Some(&b'/') {
        Some(&path)
    } else {
        None
    };
    if argv0.is_none() && loader.is_none() {
        if kernel_view == Some(&physical) {
            return d;
        }
        let mut scratch = Scratch::default();
        let off = scratch.push_cstr(&physical);
        d.action = exec_rewrite(
            scratch, off, None, dirfd_arg, path_arg, argv_arg, flags_arg, flags,
        );
        return d;
    }
    // Rebuild argv: [argv0, front..., argv[1..]] or, through the loader,
    // [loader, --argv0, argv0, program, front..., argv[1..]].
    let old_argv = match memory::read_ptr_array(ctx.pid, ctx.regs.arg(argv_arg), MAX_ARGS) {
        Ok(v) => v,
        Err(e) => return Decision::fail(memory::errno(e)),
    };
    let mut scratch = Scratch::default();
    let mut words: Vec<Arg> = Vec::new();
    let argv0 = match argv0 {
        Some(a) => Arg::Scratch(scratch.push_cstr(&a)),
        None => Arg::Value(old_argv.first().copied().unwrap_or(0)),
    };
    let exec_path = match &loader {
        Some((loader_logical, loader_physical)) => {
            words.push(Arg::Scratch(scratch.push_cstr(loader_logical)));
            words.push(Arg::Scratch(scratch.push_cstr(b"--argv0")));
            words.push(argv0);
            // The loader opens the program itself, through roost: it gets the logical name.
            let program = d.logical.as_deref().unwrap_or(&physical);
            words.push(Arg::Scratch(scratch.push_cstr(program)));
            loader_physical.clone()
        }
        None => {
            words.push(argv0);
            physical
        }
    };
    for s in &front {
        words.push(Arg::Scratch(scratch.push_cstr(s)));
    }
    words.extend(old_argv.iter().skip(1).map(|&p| Arg::Value(p)));
    let path_off = scratch.push_cstr(&exec_path);
    let argv_off = scratch.push_words(&words, true);
    d.action = exec_rewrite(
        scratch,
        path_off,
        Some(argv_off),
        dirfd_arg,
        path_arg,
        argv_arg,
        flags_arg,
        flags,
    );
    d
}

/// The argument changes of a rewritten exec: an absolute path (dirfd AT_FDCWD, no
/// AT_EMPTY_PATH) and optionally a new argv.
#[allow(clippy::too_many_arguments)]
fn exec_rewrite(
    scratch: Scratch,
    path_off: usize,
    argv_off: Option<usize>,
    dirfd_arg: Option<usize>,
    path_arg: usize,
    argv_arg: usize,
    flags_arg: Option<usize>,
    flags: u64,
) -> Action {
    let mut args = vec![(path_arg, Arg::Scratch(path_off))];
    if let Some(off) = argv_off {
        args.push((argv_arg, Arg::Scratch(off)));
    }
    if let Some(i) = dirfd_arg {
        args.push((i, Arg::Value(AT_FDCWD as u64)));
    }
    if let Some(i) = flags_arg {
        args.push((i, Arg::Value(flags & !AT_EMPTY_PATH)));
    }
    Action::Rewrite { scratch, args }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shebang_lines() {
        assert_eq!(
            parse_shebang(b"#!/bin/sh\necho"),
            Some((b"/bin/sh".to_vec(), None))
        );
        assert_eq!(
            parse_shebang(b"#! /usr/bin/env  python3 -u \n"),
            Some((b"/usr/bin/env".to_vec(), Some(b"python3 -u".to_vec())))
        );
        assert_eq!(parse_shebang(b"#!\n"), None);
        assert_eq!(parse_shebang(b"\x7fELF"), None);
    }

    #[test]
    fn file_heads_are_read_once_per_version_of_the_file() {
        let dir = std::env::temp_dir().join(format!("roost-heads-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("s");
        std::fs::write(&script, "#!/bin/sh -e\n").unwrap();
        let path = script.as_os_str().as_encoded_bytes().to_vec();
        let sh = Head::Script(b"/bin/sh".to_vec(), Some(b"-e".to_vec()));
        let head = |p: &[u8]| head_of(p).map(|(head, _)| head);
        assert_eq!(head(&path), Some(sh.clone()));
        assert_eq!(head(&path), Some(sh), "from the cache");
        let meta = std::fs::metadata(&script).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            head_of(&path).map(|(_, id)| id),
            Some((meta.dev(), meta.ino()))
        );
        // A new version (another size, another mtime) is read again.
        std::fs::write(&script, "#!/usr/bin/env python3\n").unwrap();
        let env = Head::Script(b"/usr/bin/env".to_vec(), Some(b"python3".to_vec()));
        assert_eq!(head(&path), Some(env));
        assert_eq!(head(b"/nonexistent"), None);
        assert_eq!(
            head(dir.as_os_str().as_encoded_bytes()),
            None,
            "a directory"
        );
        assert!(matches!(head(b"/bin/sh"), Some(Head::Binary(Some(_)))));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn finds_the_elf_interpreter_of_a_real_binary() {
        let sh = b"/bin/sh";
        let file = LocalDriver.open_read(sh).unwrap();
        let head = file.read_at(0, 1024).unwrap();
        let interp = elf_interpreter(&*file, &head).expect("dynamic /bin/sh");
        assert!(
            interp.starts_with(b"/lib"),
            "{}",
            String::from_utf8_lossy(&interp)
        );
    }
}
