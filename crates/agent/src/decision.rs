//! What a handler decided about a trapped call, for the backend that delivers it: let it
//! pass, fail it, emulate it (a return value and bytes for the caller's memory), make it on
//! a driver, perform it locally on physical paths ([`Local`]), or — for the calls only a
//! ptrace stop can change (an exec's argv, a socket address, clone's flags) — rewrite
//! arguments to point at data placed in the thread's scratch slot.

use crate::arch::Sys;
use crate::call::{Call, OpenSpelling};
use crate::task::AfterExit;
use roost_vfs::{Errno, Remote};

/// A value for a rewritten argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    Value(u64),
    /// The address of this offset in the thread's scratch slot.
    Scratch(usize),
}

/// Bytes to place in the scratch slot, with the positions of words that hold scratch
/// addresses (filled in once the slot address is known).
#[derive(Default, Debug)]
pub struct Scratch {
    pub bytes: Vec<u8>,
    relocations: Vec<(usize, usize)>,
}

impl Scratch {
    /// Appends a NUL-terminated string; returns its offset.
    pub fn push_cstr(&mut self, s: &[u8]) -> usize {
        let at = self.bytes.len();
        self.bytes.extend_from_slice(s);
        self.bytes.push(0);
        at
    }

    /// Appends raw bytes, 8-aligned; returns their offset.
    pub fn push_bytes(&mut self, b: &[u8]) -> usize {
        while self.bytes.len() % 8 != 0 {
            self.bytes.push(0);
        }
        let at = self.bytes.len();
        self.bytes.extend_from_slice(b);
        at
    }

    /// Appends an array of words (NULL-terminated when `nul`); returns its offset.
    pub fn push_words(&mut self, words: &[Arg], nul: bool) -> usize {
        let at = self.push_bytes(&[]);
        for w in words.iter().chain(nul.then_some(&Arg::Value(0))) {
            match *w {
                Arg::Value(v) => self.bytes.extend_from_slice(&v.to_ne_bytes()),
                Arg::Scratch(off) => {
                    self.relocations.push((self.bytes.len(), off));
                    self.bytes.extend_from_slice(&0u64.to_ne_bytes());
                }
            }
        }
        at
    }

    /// Patches a word at `at` to hold the scratch address of `off`.
    pub fn relocate(&mut self, at: usize, off: usize) {
        self.relocations.push((at, off));
    }

    /// How many bytes [`Scratch::finish`] will produce.
    pub fn size(&self) -> usize {
        self.bytes.len()
    }

    /// The final bytes for a slot at `base`.
    pub fn finish(mut self, base: u64) -> Vec<u8> {
        for (at, off) in std::mem::take(&mut self.relocations) {
            self.bytes[at..at + 8].copy_from_slice(&(base + off as u64).to_ne_bytes());
        }
        self.bytes
    }
}

/// What the tracer does with a trapped call.
#[derive(Debug)]
pub enum Action {
    Pass,
    /// Perform the call as the caller on physical paths: the notification backend makes it
    /// itself, the ptrace backend rewrites the call to them ([`Local::rewrite`]).
    Local(Local),
    /// Write `scratch` into the thread's slot and set these arguments (ptrace only).
    Rewrite {
        scratch: Scratch,
        args: Vec<(usize, Arg)>,
    },
    /// Skip the call; it fails with this errno.
    Fail(i32),
    /// Skip the call; write these bytes into the thread's memory and return `ret`.
    Emulate {
        ret: i64,
        writes: Vec<(u64, Vec<u8>)>,
    },
    /// Make the call through a remote driver, with no lock held ([`crate::remote::make`]
    /// turns this into one of the others).
    Remote(Box<RemoteCall>),
}

/// A call to perform locally: the physical path of each path argument that needs one.
#[derive(Debug, Default, PartialEq)]
pub struct Local {
    pub paths: Vec<LocalPath>,
    /// The open's flags instead of the program's (a remote object's local copy is opened
    /// without `O_EXCL`: the driver made it), for a rewrite.
    pub open_flags: Option<(OpenSpelling, u64)>,
    /// openat2's `open_how` as the kernel must see it (`RESOLVE_BENEATH`/`IN_ROOT`
    /// checked by roost, then dropped): its argument and words.
    pub how: Option<(usize, [u64; 3])>,
}

/// One path argument performed locally.
#[derive(Debug, PartialEq)]
pub struct LocalPath {
    /// The register holding the path, and the one holding its dirfd.
    pub arg: usize,
    pub dirfd: Option<usize>,
    /// The absolute physical path.
    pub physical: Vec<u8>,
}

impl Local {
    /// One path argument, at `arg` (dirfd `dirfd`), to perform at `physical`.
    pub fn at(arg: usize, dirfd: Option<usize>, physical: Vec<u8>) -> Local {
        Local {
            paths: vec![LocalPath {
                arg,
                dirfd,
                physical,
            }],
            ..Local::default()
        }
    }

    /// The physical path of argument `arg`, if it has one.
    pub fn physical_of(&self, arg: usize) -> Option<&[u8]> {
        self.paths
            .iter()
            .find(|p| p.arg == arg)
            .map(|p| p.physical.as_slice())
    }

    /// The rewrite the ptrace backend makes of it: each path into the scratch slot, its
    /// dirfd `AT_FDCWD`, the flags and `open_how` as given.
    pub fn rewrite(self) -> (Scratch, Vec<(usize, Arg)>) {
        let mut scratch = Scratch::default();
        let mut args = Vec::new();
        for p in &self.paths {
            let at = scratch.push_cstr(&p.physical);
            args.push((p.arg, Arg::Scratch(at)));
            if let Some(d) = p.dirfd {
                args.push((d, Arg::Value(libc::AT_FDCWD as u64)));
            }
        }
        if let Some((OpenSpelling::Register(i), flags)) = self.open_flags {
            args.push((i, Arg::Value(flags)));
        }
        if let Some((i, words)) = self.how {
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
            let at = scratch.push_bytes(&bytes);
            args.push((i, Arg::Scratch(at)));
        }
        (scratch, args)
    }
}

/// A handler's answer.
#[derive(Debug)]
pub struct Decision {
    pub action: Action,
    pub after: Option<AfterExit>,
    /// For traces: the first path, logical and physical.
    pub logical: Option<Vec<u8>>,
    pub physical: Option<Vec<u8>>,
    /// Each resolved path argument's logical name, by argument index.
    pub logicals: Vec<(usize, Vec<u8>)>,
    /// For execve: the logical executable.
    pub exe: Option<Vec<u8>>,
}

impl Decision {
    pub fn new(action: Action) -> Decision {
        Decision {
            action,
            after: None,
            logical: None,
            physical: None,
            logicals: Vec::new(),
            exe: None,
        }
    }

    pub fn pass() -> Decision {
        Decision::new(Action::Pass)
    }

    pub fn fail(errno: i32) -> Decision {
        Decision::new(Action::Fail(errno))
    }
}

/// One path argument of a remote call.
#[derive(Debug)]
pub struct RemoteArg {
    /// The register holding the path, and the one holding its dirfd.
    pub path: usize,
    pub dirfd: Option<usize>,
    /// Whether the call follows a final symlink of this path.
    pub follow: bool,
    /// The program's path ended in `/`, which the walk drops: it names a directory only.
    pub trailing_slash: bool,
    /// The object, when it is remote (a local path mixed in fails before this is made).
    pub remote: Option<Remote>,
}

/// A call with at least one remote path, decided and waiting to be made.
#[derive(Debug)]
pub struct RemoteCall {
    pub sys: Sys,
    /// The call, decoded.
    pub call: Call,
    pub args: Vec<RemoteArg>,
}

impl RemoteCall {
    /// The remote object of the first path argument.
    pub fn first(&self) -> Result<&Remote, Errno> {
        self.args
            .first()
            .and_then(|a| a.remote.as_ref())
            .ok_or(libc::EXDEV)
    }

    pub fn second(&self) -> Result<&Remote, Errno> {
        self.args
            .get(1)
            .and_then(|a| a.remote.as_ref())
            .ok_or(libc::EXDEV)
    }
}
