//! The in-process fast path (docs/agent.md, "The in-process fast path"): roost's shared
//! object `fastpath/roost_fastpath.c`, which the dynamic loader of every dynamically linked
//! program puts in place because the agent maps `/etc/ld.so.preload` to a list naming it,
//! answers the hot lookups in the program's own process whenever the table published here
//! says the kernel would answer as the agent does. It makes those calls from a code page at
//! an address chosen for the run, which the seccomp filter lets through ([`FastPath::rules`]);
//! everything else is trapped as before. This module writes the run's files, keeps the table
//! current as the namespace changes, and turns it off where the agent alone can answer.

pub mod offers;
mod rundir;
pub mod table;

use crate::arch::Sys;
use crate::filter::Verdict;
use roost_vfs::{MountTable, Namespace, Target};
use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Mutex;
use table::{Atomics, Contents, Entry, Table};

/// The shared object, built by `build.rs`.
static INTERPOSER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/roost_fastpath.so"));
/// Where the object keeps its configuration: the agent writes `STUB_HEX TABLE_PATH` after
/// the marker's 32 bytes, in at most `CONFIG_ROOM` bytes with the terminating NUL.
const CONFIG_MARKER: &[u8] = b"@@roost-fastpath-config@@v1\0";
const CONFIG_PAYLOAD: usize = 32;
const CONFIG_ROOM: usize = 512 - CONFIG_PAYLOAD;
/// The list the dynamic loader reads before any program starts.
const PRELOAD_LIST: &[u8] = b"/etc/ld.so.preload";

/// The calls the fast path makes from its code page: the only ones the filter lets through
/// from there (all but [`OPENS`] for a program that may hold `CAP_SYS_PTRACE` over roost).
pub const CALLS: &[Sys] = &[
    Sys::Newfstatat,
    Sys::Statx,
    Sys::Faccessat,
    Sys::Faccessat2,
    Sys::Readlinkat,
    Sys::Openat2,
    Sys::Getcwd,
];

/// The calls of [`CALLS`] that open.
const OPENS: &[Sys] = &[Sys::Openat2];

/// Why a run has no fast path, though asked for one (`--strict` and `--trace` never ask).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Off {
    /// The mount list hides names (`DENY`, `ENOENT`): a program could reach them from the
    /// code page the filter lets through, so no call is answered in-process.
    Hiding,
}

/// A run's fast path: its files, and the table the programs read.
pub struct FastPath {
    dir: rundir::RunDir,
    /// The loader's preload list (physical).
    list: Vec<u8>,
    /// Where the code page goes in every process of the run.
    stub: u64,
    count: bool,
    /// Whether the page may open files. Not for a program that may hold `CAP_SYS_PTRACE`
    /// over roost (roost run as root) outside a Landlock domain ([`crate::fence`]): from
    /// the page it could open roost's own `/proc/PID/mem`, which then only the agent's check
    /// of paths keeps from such a program (docs/security.md); it answers lookups only, which
    /// change nothing.
    opens: bool,
    /// The table's parts used without the lock.
    atomics: Atomics,
    /// Which programs are offered the object.
    offers: offers::Offers,
    state: Mutex<State>,
}

struct State {
    table: Table,
    /// Turned off for the rest of the run (a chroot).
    off: bool,
    /// Descriptors from here up are roost's.
    fd_from: u32,
    /// Working directories are named by the namespace's one record of how each was entered
    /// (calls delivered as notifications to processes attached on demand): only then does
    /// the table carry that record (`Contents::entered`). Under ptrace stops each process's
    /// own working directory name is kept instead, which the table cannot tell.
    cwds_by_record: bool,
    /// Each local root's canonical name, found once.
    canonical: HashMap<Vec<u8>, Option<Vec<u8>>>,
    /// Every mount point of procfs (`/proc` among them): read with the canonical names,
    /// not at each change of names (a read of mountinfo costs more than the change).
    procfs: Vec<Vec<u8>>,
}

impl FastPath {
    /// Writes the run's fast-path files and adds the mappings they need to `mounts`: the
    /// loader's preload list, and, when a mapping would hide it, the directory holding them.
    /// `count`: the programs count what they answer (`--summary`). `fenced`: the program
    /// starts in a Landlock domain of its own ([`crate::fence`]); a program that may hold
    /// `CAP_SYS_PTRACE` over roost gets a page that may open only then.
    pub fn prepare(
        mounts: &mut MountTable,
        count: bool,
        fenced: bool,
    ) -> io::Result<Result<FastPath, Off>> {
        if mounts.hides_any() {
            return Ok(Err(Off::Hiding));
        }
        let opens = fenced || !crate::guard::may_hold_ptrace_capability();
        let dir = rundir::RunDir::make(random_u64()? as u32)?;
        let path = dir.path.clone();
        let stub = random_page()?;
        match Self::write_files(dir, stub, mounts, count, opens) {
            Ok(fast) => Ok(Ok(fast)),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&path);
                Err(e)
            }
        }
    }

    fn write_files(
        run_dir: rundir::RunDir,
        stub: u64,
        mounts: &mut MountTable,
        count: bool,
        opens: bool,
    ) -> io::Result<FastPath> {
        let dir = run_dir.path.clone();
        let table_path = dir.join("table");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&table_path)?;
        let table = Table::create(&file)?;
        let object = dir.join("roost_fastpath.so");
        write_file(&object, &configured(stub, &table_path)?, 0o755)?;
        let mut list = object.as_os_str().as_bytes().to_vec();
        list.push(b'\n');
        // The machine's own preloads still load, after roost's.
        if let Ok(own) = std::fs::read(OsStr::from_bytes(PRELOAD_LIST)) {
            list.extend_from_slice(&own);
        }
        let list_path = dir.join("ld.so.preload");
        write_file(&list_path, &list, 0o644)?;
        let list_path = list_path.into_os_string().into_encoded_bytes();
        // The directory must be reachable by its own name: mapped to itself when a mapping
        // would hide it (`/` or `/tmp` remapped), else left to the kernel (a mapping costs
        // each program's loader a trapped open the agent makes).
        let dir_bytes = dir.as_os_str().as_bytes();
        if mounts.covers(dir_bytes) {
            mounts.add(dir_bytes, Target::local(dir_bytes));
        }
        mounts.add(PRELOAD_LIST, Target::local(list_path.clone()));
        Ok(FastPath {
            list: list_path,
            dir: run_dir,
            stub,
            count,
            opens,
            atomics: table.atomics(),
            offers: offers::Offers::default(),
            state: Mutex::new(State {
                table,
                off: false,
                fd_from: u32::MAX,
                cwds_by_record: false,
                canonical: HashMap::new(),
                procfs: crate::guard::proc_mounts(),
            }),
        })
    }

    /// Thread `tid` execs a program: dynamically linked (its executable's device and
    /// inode), whose loader will look at the preload list ([`offers`]), or not (`None`).
    pub fn loader_comes(&self, tid: i32, program: Option<(u64, u64)>) {
        self.offers.loader_comes(tid, program);
    }

    /// Thread `former`, not its process's leader, exec'd and took the leader's id
    /// `leader` ([`offers`]).
    pub fn exec_took_id(&self, former: i32, leader: i32) {
        self.offers.exec_took_id(former, leader);
    }

    /// Whether thread `tid`'s call `call` on `path` is the open of the preload list by a
    /// loader whose program is not offered the object this time ([`offers`]): the host's
    /// own file is to be opened, as if roost had no list.
    /// `call` tells what the call is; it is asked only for calls on that name.
    pub fn declines_list(
        &self,
        tid: i32,
        path: &[u8],
        call: impl FnOnce() -> offers::ListCall,
    ) -> bool {
        path == PRELOAD_LIST && self.offers.declined_open(tid, call(), &self.atomics)
    }

    /// Whether `physical` is the run's preload list, which the loader of every program
    /// started reads once.
    pub fn is_loader_list(&self, physical: &[u8]) -> bool {
        physical == self.list.as_slice()
    }

    /// The filter's rules: each call of [`CALLS`] made from the code page is allowed, before
    /// any other rule for its number is looked at.
    pub fn rules(&self) -> Vec<(u32, Verdict)> {
        // The kernel reports the address after the `syscall` instruction, the page's first.
        let ip = self.stub + 2;
        CALLS
            .iter()
            .filter(|sys| self.opens || !OPENS.contains(sys))
            .map(|sys| (sys.nr() as u32, Verdict::AllowFrom { ip }))
            .collect()
    }

    /// Descriptors from `from` up are roost's (virtual descriptors, local copies).
    pub fn set_descriptor_floor(&self, from: u32) {
        let mut state = self.state.lock().expect("fast path lock");
        state.fd_from = state.fd_from.min(from);
    }

    /// Notes the file of identity (`dev`, `ino`) as a remote object's local copy, whose
    /// descriptors the agent answers for ([`crate::copies`]): before any program opens it.
    pub fn note_copy(&self, dev: u64, ino: u64) {
        self.atomics.note_copy(dev, ino);
    }

    /// Whether working directories are named by the namespace's record of how each was
    /// entered (see `State::cwds_by_record`); the table is written again with it.
    pub fn name_cwds_by_record(&self, ns: &Namespace, yes: bool) {
        self.state.lock().expect("fast path lock").cwds_by_record = yes;
        self.publish(ns);
    }

    /// Writes the table for `ns` as it is now.
    pub fn publish(&self, ns: &Namespace) {
        let mut state = self.state.lock().expect("fast path lock");
        let state = &mut *state;
        let (entries, names) = describe(ns, &mut state.canonical, &state.procfs);
        let entered = if state.cwds_by_record {
            ns.entered_names()
                .iter()
                .map(|(physical, logical)| table::entered_hash(physical, logical))
                .collect()
        } else {
            Vec::new()
        };
        let contents = Contents {
            enabled: !state.off,
            count: self.count,
            opens: self.opens,
            remote_met: ns.remote_met(),
            fd_from: state.fd_from,
            entries,
            names,
            entered,
        };
        state.table.write(&contents);
    }

    /// Names changed at and under logical name `under` (a file made, removed or renamed).
    /// The programs' proofs of symlink-free directories go with the names generation; the
    /// mappings are described again only when `under`, or where the kernel finds it, is a
    /// name the table holds (a mapping's, a mapped directory, a procfs mount point, a
    /// mirror) or lies above one. Describing them costs a stat and a canonical name per
    /// mapping: a file made or removed in a mapped directory costs only the generation.
    pub fn names_changed(&self, ns: &Namespace, under: &[u8]) {
        use roost_vfs::path::strip_prefix;
        let physical = ns.kernel_path(under);
        let holds = |name: &[u8]| {
            strip_prefix(name, under).is_some()
                || physical
                    .as_deref()
                    .is_some_and(|p| strip_prefix(name, p).is_some())
        };
        let mut state = self.state.lock().expect("fast path lock");
        let same = state
            .table
            .written()
            .is_some_and(|c| !c.entries.iter().flat_map(Entry::paths).any(holds));
        if same {
            state.table.names_changed();
            return;
        }
        drop(state);
        self.publish(ns);
    }

    /// Republishes the table once a second while `republish` says the run goes on (it
    /// calls [`FastPath::refresh`] with the namespace), so that no proof of a symlink-free
    /// directory a program holds outlives the namespace's own answers about names
    /// ([`roost_vfs::resolve::TTL`]), and a mapped directory an untraced process renamed is
    /// followed as soon. Without a thread for it the fast path must be turned off
    /// ([`FastPath::turn_off`]): the error says so.
    pub fn keep_fresh(republish: impl Fn() -> bool + Send + 'static) -> io::Result<()> {
        std::thread::Builder::new()
            .name("roost-fastpath-clock".into())
            .spawn(move || {
                // Runs killed before they could remove their files leave them: gone now,
                // on a thread of its own (a slow temporary directory must not hold the
                // table's refresh back).
                let _ = std::thread::Builder::new()
                    .name("roost-sweep".into())
                    .spawn(rundir::sweep);
                loop {
                    std::thread::sleep(roost_vfs::resolve::TTL);
                    if !republish() {
                        return;
                    }
                }
            })
            .map(drop)
    }

    /// [`FastPath::publish`], with every local root's canonical name (an untraced process
    /// may have renamed an ancestor of one) and procfs's mount points found afresh: once a
    /// second.
    pub fn refresh(&self, ns: &Namespace) {
        let procfs = crate::guard::proc_mounts();
        let mut state = self.state.lock().expect("fast path lock");
        state.canonical.clear();
        state.procfs = procfs;
        state.table.forget_written();
        drop(state);
        self.publish(ns);
    }

    /// Turns the fast path off for the rest of the run (a process changed its root: its
    /// names no longer mean what the table says; no clock for the table).
    pub fn turn_off(&self, ns: &Namespace) {
        self.state.lock().expect("fast path lock").off = true;
        self.publish(ns);
    }

    /// Leaves the run's files to another process of the run (the agent, when the front
    /// returns before it), which removes them at its end.
    pub fn leave(self: std::sync::Arc<Self>) {
        std::mem::forget(self);
    }

    /// Removes the run's files, at the end of the run (the process that removes them may
    /// end without dropping this value: threads of its own may still hold it).
    pub fn remove_files(&self) {
        // The list first: a loader that still comes finds none, and loads nothing, rather
        // than a list naming an object already gone (which it would say on stderr).
        let _ = std::fs::remove_file(OsStr::from_bytes(&self.list));
        let _ = std::fs::remove_dir_all(&self.dir.path);
    }

    /// What the programs answered in-process, for `--summary`: one line per call.
    pub fn report(&self) -> String {
        let answered = self.state.lock().expect("fast path lock").table.answered();
        let total: u64 = answered.iter().sum();
        let mut out = format!("in-process (fast path): {total} calls\n");
        for (name, n) in table::CALLS.iter().zip(answered) {
            if n > 0 {
                out.push_str(&format!("  {name:<10} {n:>10}\n"));
            }
        }
        out
    }
}

impl Drop for FastPath {
    fn drop(&mut self) {
        self.remove_files();
    }
}

/// The table's entries and names for `ns`: what each mapping lets the fast path do.
fn describe(
    ns: &Namespace,
    canonical: &mut HashMap<Vec<u8>, Option<Vec<u8>>>,
    procfs: &[Vec<u8>],
) -> (Vec<Entry>, Vec<Vec<u8>>) {
    let mounts = ns.table().mounts();
    // Every procfs mount point is the agent's: roost's own `/proc/PID` is refused there.
    let mut by_name: Vec<Entry> = procfs
        .iter()
        .map(|m| Entry::Trap { logical: m.clone() })
        .collect();
    let in_procfs = |p: &[u8]| {
        procfs.iter().any(|m| {
            roost_vfs::path::strip_prefix(p, m).is_some()
                || roost_vfs::path::strip_prefix(m, p).is_some()
        })
    };
    let mut physical = Vec::new();
    let mut names: Vec<Vec<u8>> = Vec::new();
    let mut name = |path: &[u8]| {
        let last = path.rsplit(|&b| b == b'/').next().unwrap_or_default();
        if !last.is_empty() && !names.iter().any(|n| n == last) {
            names.push(last.to_vec());
        }
    };
    for (i, m) in mounts.iter().enumerate() {
        name(&m.logical);
        let trap = Entry::Trap {
            logical: m.logical.clone(),
        };
        let Target::Driver { driver, .. } = &m.target else {
            by_name.push(trap);
            continue;
        };
        if !driver.is_local() {
            by_name.push(trap);
            if let Some(mirror) = driver.mirror() {
                physical.push(Entry::Physical {
                    physical: canonical_dir(canonical, mirror).unwrap_or_else(|| mirror.to_vec()),
                    viewed: true,
                });
            }
            continue;
        }
        let Some(root) = m.target.root_now() else {
            by_name.push(trap);
            continue;
        };
        // A mapping whose name the namespace reaches through a symlink of the host's (the
        // agent follows it, and may never reach the mapping), or through another mapping
        // (whose directories, not the host's, hold the way there), or that holds procfs or
        // lies in it, is the agent's.
        let inside_another = mounts.iter().any(|o| {
            o.logical != m.logical
                && roost_vfs::path::strip_prefix(&m.logical, &o.logical).is_some()
        });
        if inside_another || !reached_plainly(&m.logical) || in_procfs(&root) {
            by_name.push(trap);
            continue;
        }
        name(&root);
        let view = ns.view_of(&root);
        let nested = mounts.iter().any(|o| {
            o.logical != m.logical
                && roost_vfs::path::strip_prefix(&o.logical, &m.logical).is_some()
        });
        match canonical_dir(canonical, &root) {
            Some(real) => {
                if nested {
                    by_name.push(trap);
                } else {
                    by_name.push(Entry::Local {
                        logical: m.logical.clone(),
                        physical: real.clone(),
                        viewed: view == Some(i),
                    });
                }
                physical.push(Entry::Physical {
                    physical: real,
                    viewed: nested || view.is_some(),
                });
            }
            // A file, or a directory gone: the agent's.
            None => by_name.push(trap),
        }
    }
    // The first entry holding a path is its mapping: longest names first.
    by_name.sort_by_key(|e| match e {
        Entry::Local { logical, .. } | Entry::Trap { logical } => std::cmp::Reverse(logical.len()),
        Entry::Physical { .. } => std::cmp::Reverse(0),
    });
    by_name.extend(physical);
    (by_name, names)
}

/// Whether the kernel reaches the parent of logical name `logical` by that name, with no
/// symlink on the way: the nearest ancestor there is (a dangling symlink is one) is its own
/// canonical name. It depends on names at and above `logical` only, which is what
/// [`FastPath::names_changed`] looks at.
fn reached_plainly(logical: &[u8]) -> bool {
    let mut at = std::path::Path::new(OsStr::from_bytes(logical));
    while let Some(parent) = at.parent() {
        if parent.symlink_metadata().is_ok() {
            return std::fs::canonicalize(parent).is_ok_and(|real| real == parent);
        }
        at = parent;
    }
    true
}

/// The canonical name of directory `root` (no symlink in it), remembered; None for a file or
/// a name that no longer leads anywhere.
fn canonical_dir(known: &mut HashMap<Vec<u8>, Option<Vec<u8>>>, root: &[u8]) -> Option<Vec<u8>> {
    known
        .entry(root.to_vec())
        .or_insert_with(|| {
            let real = std::fs::canonicalize(OsStr::from_bytes(root)).ok()?;
            real.is_dir()
                .then(|| real.into_os_string().into_encoded_bytes())
        })
        .clone()
}

/// The object with its configuration written in: the code page's address and the table.
fn configured(stub: u64, table: &Path) -> io::Result<Vec<u8>> {
    let mut object = INTERPOSER.to_vec();
    let at = object
        .windows(CONFIG_MARKER.len())
        .position(|w| w == CONFIG_MARKER)
        .ok_or_else(|| io::Error::other("the fast path's object has no configuration marker"))?;
    let mut payload = format!("{stub:x} ").into_bytes();
    payload.extend_from_slice(table.as_os_str().as_bytes());
    payload.push(0);
    if payload.len() > CONFIG_ROOM || table.as_os_str().len() > 255 {
        return Err(io::Error::other(
            "the fast path's table has too long a name",
        ));
    }
    object[at + CONFIG_PAYLOAD..at + CONFIG_PAYLOAD + payload.len()].copy_from_slice(&payload);
    Ok(object)
}

fn write_file(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    f.write_all(bytes)?;
    // The umask may have taken bits the programs need (any user the program becomes must
    // load the object).
    f.set_permissions(std::fs::Permissions::from_mode(mode))
}

/// A page address for the code page, picked at random in a part of the address space that
/// neither the program's image, its heap, its libraries nor its stack take (x86_64 places
/// those near 0x5555_5555_0000 and below 0x7fff_ffff_f000).
fn random_page() -> io::Result<u64> {
    const FROM: u64 = 0x1000_0000_0000;
    const SPAN: u64 = 0x3000_0000_0000;
    Ok(FROM + ((random_u64()? % SPAN) & !0xfff))
}

fn random_u64() -> io::Result<u64> {
    let mut bytes = [0u8; 8];
    // SAFETY: the kernel fills the 8-byte buffer.
    let n = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if n != bytes.len() as isize {
        return Err(io::Error::last_os_error());
    }
    Ok(u64::from_ne_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_lands_after_the_marker() {
        let object = configured(0x1234_5000, Path::new("/run/x/table")).unwrap();
        let at = object
            .windows(CONFIG_MARKER.len())
            .position(|w| w == CONFIG_MARKER)
            .unwrap();
        let payload = &object[at + CONFIG_PAYLOAD..];
        assert!(payload.starts_with(b"12345000 /run/x/table\0"));
        assert_eq!(object.len(), INTERPOSER.len());
    }

    #[test]
    fn the_code_page_is_page_aligned_and_clear_of_the_usual_places() {
        for _ in 0..100 {
            let page = random_page().unwrap();
            assert_eq!(page % 4096, 0);
            assert!((0x1000_0000_0000..0x4000_0000_0000).contains(&page));
        }
    }

    #[test]
    fn hiding_mappings_turn_it_off() {
        let mut mounts = MountTable::new();
        mounts.add(b"/secret", Target::Deny);
        assert_eq!(
            FastPath::prepare(&mut mounts, false, false).unwrap().err(),
            Some(Off::Hiding)
        );
    }

    #[test]
    fn a_change_of_names_describes_the_mappings_again_only_at_or_above_a_name_they_hold() {
        let base = std::env::temp_dir().join(format!("roost-fp-names-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("x")).unwrap();
        std::fs::create_dir_all(base.join("d")).unwrap();
        let bytes = |p: std::path::PathBuf| p.into_os_string().into_encoded_bytes();
        let logical = bytes(base.join("x/m"));
        let mut mounts = MountTable::new();
        mounts.add(&logical, Target::local(bytes(base.join("d"))));
        let fast = FastPath::prepare(&mut mounts, false, true)
            .unwrap()
            .unwrap();
        let ns = Namespace::new(mounts);
        fast.publish(&ns);
        let local = |fast: &FastPath| {
            let state = fast.state.lock().unwrap();
            let entries = &state.table.written().unwrap().entries;
            entries
                .iter()
                .any(|e| matches!(e, Entry::Local { logical: l, .. } if *l == logical))
        };
        assert!(local(&fast), "reached plainly: answered in-process");
        // The mapping's parent becomes a symlink: the kernel would reach another directory
        // by that name, so the mapping must be the agent's.
        std::fs::rename(base.join("x"), base.join("y")).unwrap();
        std::os::unix::fs::symlink(base.join("y"), base.join("x")).unwrap();
        // A change elsewhere moves the names generation only (the table says what it said).
        fast.names_changed(&ns, &bytes(base.join("d/file")));
        fast.names_changed(&ns, &bytes(base.join("elsewhere")));
        assert!(local(&fast));
        // At the mapping's parent, the mappings are described again.
        fast.names_changed(&ns, &bytes(base.join("x")));
        assert!(!local(&fast), "now the agent's");
        std::fs::remove_dir_all(base).unwrap();
    }
}
