//! The table the agent shares with the in-process fast path: a file of `FILE_SIZE` bytes,
//! laid out as `fastpath/table.h` says (the test below holds the two together), that the
//! agent keeps mapped writable and every program maps read-only. Rewrites go under a
//! sequence lock: the count is odd while one is under way, and a reader that sees it odd,
//! or changed by the time it is done, leaves its call to the trap.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{fence, AtomicU64, Ordering};

pub const MAGIC: u64 = 0x3150_4654_534f_4f52; // "ROOSTFP1"
pub const VERSION: u32 = 2;
pub const MAX_ENTRIES: usize = 64;
pub const MAX_NAMES: usize = 32;
/// The longest path an entry holds (the C side's `RF_PATH_MAX`, less its terminating NUL).
pub const PATH_MAX: usize = 251;
pub const NAME_MAX: usize = 60;
pub const MAX_ENTERED: usize = 512;

pub const ENABLED: u32 = 1;
pub const COUNT: u32 = 2;
pub const NO_OPENS: u32 = 4;
pub const REMOTE_MET: u32 = 8;

/// An entry's kind (`RF_LOCAL`, `RF_TRAP`, `RF_PHYS`).
const KIND_LOCAL: u32 = 1;
const KIND_TRAP: u32 = 2;
const KIND_PHYSICAL: u32 = 3;
/// An entry's flag (`RF_VIEWED`).
const VIEWED: u32 = 1;

/// Offsets in `struct rf_table` and its parts.
const FLAGS: usize = 12;
const SEQ: usize = 16;
const NAMES_GEN: usize = 24;
const FD_FROM: usize = 32;
const N_ENTRIES: usize = 36;
const N_NAMES: usize = 40;
const ENTRIES: usize = 48;
const ENTRY_SIZE: usize = 520;
const ENTRY_PHYSICAL: usize = 268;
const NAMES: usize = ENTRIES + MAX_ENTRIES * ENTRY_SIZE;
const NAME_SIZE: usize = 64;
const N_ENTERED: usize = NAMES + MAX_NAMES * NAME_SIZE;
const ENTERED: usize = N_ENTERED + 8;
/// `struct rf_copies`: how many copies were noted, then the Bloom filter's bits.
const COPIES: usize = 40960;
const COPIES_NOTED: usize = COPIES;
const COPY_BITS_AT: usize = COPIES + 4096;
const COPY_BITS: u64 = 1 << 19;
const COPY_PROBES: u32 = 3;
pub const COUNTERS: usize = COPY_BITS_AT + COPY_BITS as usize / 8;
pub const FILE_SIZE: usize = COUNTERS + 4096;
/// In the counters page, the programs' counts of processes that answered [`PAYS_AT`] calls
/// in-process (`RF_PAID_AT`, `RF_PAID_SLOTS`, in 64-bit words).
const PAID_AT: usize = 64;
const PAID_SLOTS: usize = 448;
pub const PAYS_AT: u64 = 8;
/// The calls the counters hold, in `enum rf_call`'s order.
pub const CALLS: [&str; 8] = [
    "stat", "lstat", "fstat", "statx", "access", "readlink", "open", "getcwd",
];

/// What one entry says of a prefix.
#[derive(Clone, Debug, PartialEq)]
pub enum Entry {
    /// Paths at or below `logical` are the same paths below `physical` (a directory); with
    /// `viewed`, descriptors opened there need no note.
    Local {
        logical: Vec<u8>,
        physical: Vec<u8>,
        viewed: bool,
    },
    /// Paths at or below `logical` are the agent's.
    Trap { logical: Vec<u8> },
    /// A directory a mapping names: a working directory under it is the agent's to name;
    /// with `viewed`, opens by names under it are the agent's to note.
    Physical { physical: Vec<u8>, viewed: bool },
}

/// What the table holds at one time.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Contents {
    pub enabled: bool,
    pub count: bool,
    /// Whether the page may open (see `FastPath::opens`).
    pub opens: bool,
    /// A remote object was met: a directory descriptor may be a mirror's.
    pub remote_met: bool,
    pub fd_from: u32,
    pub entries: Vec<Entry>,
    pub names: Vec<Vec<u8>>,
    /// [`entered_hash`] of each working directory entered by a name under a mapping, with
    /// that name: more than [`MAX_ENTERED`] are written as none (the agent names them all).
    pub entered: Vec<u64>,
}

impl Entry {
    /// The names an entry holds: its logical name, its physical directory, or both.
    pub fn paths(&self) -> impl Iterator<Item = &[u8]> {
        let (logical, physical): (Option<&[u8]>, Option<&[u8]>) = match self {
            Entry::Local {
                logical, physical, ..
            } => (Some(logical), Some(physical)),
            Entry::Trap { logical } => (Some(logical), None),
            Entry::Physical { physical, .. } => (None, Some(physical)),
        };
        logical.into_iter().chain(physical)
    }
}

/// `rf_entered_hash` of `table.h`: FNV-1a over the physical directory, a NUL and the
/// logical name it was entered by.
pub fn entered_hash(physical: &[u8], logical: &[u8]) -> u64 {
    let fnv = |h: u64, bytes: &[u8]| {
        bytes
            .iter()
            .fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
    };
    fnv(fnv(fnv(0xcbf2_9ce4_8422_2325, physical), &[0]), logical)
}

/// `rf_copy_hash` of `table.h`: splitmix64's finalizer over a file's device and inode.
pub fn copy_hash(dev: u64, ino: u64) -> u64 {
    let mut h = ino.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ dev;
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

impl Contents {
    /// Whether everything fits the table's fixed room.
    pub fn fits(&self) -> bool {
        let path_fits = |p: &[u8]| p.len() <= PATH_MAX;
        self.entries.len() <= MAX_ENTRIES
            && self.names.len() <= MAX_NAMES
            && self.names.iter().all(|n| n.len() <= NAME_MAX)
            && self.entries.iter().all(|e| match e {
                Entry::Local {
                    logical, physical, ..
                } => path_fits(logical) && path_fits(physical),
                Entry::Trap { logical } => path_fits(logical),
                Entry::Physical { physical, .. } => path_fits(physical),
            })
    }
}

/// The agent's writable mapping of the table file.
pub struct Table {
    base: *mut u8,
    names_gen: u64,
    /// What was last written: the same again only bumps the names generation.
    written: Option<Contents>,
}

// SAFETY: the mapping is process-wide memory; writes are serialized by the owner's lock
// (`FastPath` keeps the table in a Mutex), and readers elsewhere only read.
unsafe impl Send for Table {}

impl Table {
    /// Maps `file` (sized here) and writes an empty, disabled table into it.
    pub fn create(file: &File) -> io::Result<Table> {
        file.set_len(FILE_SIZE as u64)?;
        // SAFETY: a fresh shared mapping of a file of FILE_SIZE bytes.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                FILE_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut table = Table {
            base: base.cast(),
            names_gen: 0,
            written: None,
        };
        table.put(0, &MAGIC.to_ne_bytes());
        table.put(8, &VERSION.to_ne_bytes());
        Ok(table)
    }

    fn put(&mut self, offset: usize, bytes: &[u8]) {
        assert!(offset + bytes.len() <= FILE_SIZE);
        // SAFETY: in bounds of the mapping (checked above).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(offset), bytes.len()) }
    }

    fn word(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: an aligned u64 inside the mapping, which lives as long as `self`.
        unsafe { &*(self.base.add(offset) as *const AtomicU64) }
    }

    /// Writes `contents` (which must fit) under the sequence lock; the proofs programs keep
    /// of symlink-free directories are dropped with it (names may have changed: a table
    /// the same as the last one written is not written again, but its generation moves).
    pub fn write(&mut self, contents: &Contents) {
        let changed = self.written.as_ref() != Some(contents);
        self.move_names_generation(|table| {
            if changed {
                table.write_contents(contents);
            }
        });
        if changed {
            self.written = Some(contents.clone());
        }
    }

    /// Names changed, and nothing else the table says: only the names generation moves
    /// (what [`Table::write`] does with the same contents again, without making them).
    pub fn names_changed(&mut self) {
        self.move_names_generation(|_| {});
    }

    /// Moves the names generation under the sequence lock, `also` writing the rest in the
    /// same turn.
    fn move_names_generation(&mut self, also: impl FnOnce(&mut Table)) {
        let seq = self.word(SEQ).load(Ordering::Relaxed);
        self.word(SEQ).store(seq + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        self.names_gen += 1;
        self.put(NAMES_GEN, &self.names_gen.to_ne_bytes());
        also(self);
        fence(Ordering::Release);
        self.word(SEQ).store(seq + 2, Ordering::Release);
    }

    /// What was last written, unless [`Table::forget_written`] forgot it since.
    pub fn written(&self) -> Option<&Contents> {
        self.written.as_ref()
    }

    /// The next [`Table::write`] writes everything, whatever was written before: a program
    /// may write the table's file (docs/security.md), and the once-a-second rewrite undoes
    /// what it wrote.
    pub fn forget_written(&mut self) {
        self.written = None;
    }

    /// The body of [`Table::write`]: every part but the names generation.
    fn write_contents(&mut self, contents: &Contents) {
        let fits = contents.fits();
        let flags = (if contents.enabled && fits { ENABLED } else { 0 })
            | (if contents.count { COUNT } else { 0 })
            | (if contents.opens { 0 } else { NO_OPENS })
            | (if contents.remote_met { REMOTE_MET } else { 0 });
        self.put(FLAGS, &flags.to_ne_bytes());
        self.put(FD_FROM, &contents.fd_from.to_ne_bytes());
        if fits {
            for (i, e) in contents.entries.iter().enumerate() {
                let (kind, viewed, logical, physical): (u32, bool, &[u8], &[u8]) = match e {
                    Entry::Local {
                        logical,
                        physical,
                        viewed,
                    } => (KIND_LOCAL, *viewed, logical, physical),
                    Entry::Trap { logical } => (KIND_TRAP, false, logical, b""),
                    Entry::Physical { physical, viewed } => (KIND_PHYSICAL, *viewed, b"", physical),
                };
                let flags = if viewed { VIEWED } else { 0 };
                let at = ENTRIES + i * ENTRY_SIZE;
                self.put(at, &kind.to_ne_bytes());
                self.put(at + 4, &flags.to_ne_bytes());
                self.put(at + 8, &(logical.len() as u16).to_ne_bytes());
                self.put(at + 10, &(physical.len() as u16).to_ne_bytes());
                self.put(at + 16, logical);
                self.put(at + 16 + logical.len(), &[0]);
                self.put(at + ENTRY_PHYSICAL, physical);
                self.put(at + ENTRY_PHYSICAL + physical.len(), &[0]);
            }
            for (i, name) in contents.names.iter().enumerate() {
                let at = NAMES + i * NAME_SIZE;
                self.put(at, &(name.len() as u32).to_ne_bytes());
                self.put(at + 4, name);
            }
            self.put(N_ENTRIES, &(contents.entries.len() as u32).to_ne_bytes());
            self.put(N_NAMES, &(contents.names.len() as u32).to_ne_bytes());
            let mut entered = contents.entered.clone();
            entered.sort_unstable();
            entered.dedup();
            if entered.len() > MAX_ENTERED {
                entered.clear();
            }
            for (i, hash) in entered.iter().enumerate() {
                self.put(ENTERED + 8 * i, &hash.to_ne_bytes());
            }
            self.put(N_ENTERED, &(entered.len() as u32).to_ne_bytes());
        }
    }

    /// The table's parts used with atomic operations alone, without the owner's lock.
    pub fn atomics(&self) -> Atomics {
        Atomics { base: self.base }
    }

    /// The calls the programs answered in-process so far, by [`CALLS`].
    pub fn answered(&self) -> Vec<u64> {
        (0..CALLS.len())
            .map(|i| self.word(COUNTERS + 8 * i).load(Ordering::Relaxed))
            .collect()
    }
}

/// The table's parts used with atomic operations alone, so by any thread without the lock
/// that serializes rewrites: the Bloom filter of remote objects' local copies (`struct
/// rf_copies`) and the programs' counts of processes the object paid for. Valid while the
/// [`Table`] it came from is mapped.
pub struct Atomics {
    base: *mut u8,
}

// SAFETY: only atomic operations on the shared mapping, which outlives every user (both
// belong to one `FastPath`).
unsafe impl Send for Atomics {}
unsafe impl Sync for Atomics {}

impl Atomics {
    fn word(&self, offset: usize) -> &AtomicU64 {
        assert!(offset + 8 <= FILE_SIZE);
        // SAFETY: an aligned u64 inside the mapping, which outlives `self`.
        unsafe { &*(self.base.add(offset) as *const AtomicU64) }
    }

    /// Notes the file of identity (`dev`, `ino`) as a remote object's local copy: from now
    /// on no program answers a call on a descriptor of it in-process. Bits are only ever
    /// added, before the count readers look at first, so no lock is taken against them.
    pub fn note_copy(&self, dev: u64, ino: u64) {
        let h = copy_hash(dev, ino);
        for k in 0..COPY_PROBES {
            let bit = (h >> (21 * k)) & (COPY_BITS - 1);
            self.word(COPY_BITS_AT + 8 * (bit / 64) as usize)
                .fetch_or(1 << (bit % 64), Ordering::Release);
        }
        self.word(COPIES_NOTED).fetch_add(1, Ordering::Release);
    }

    /// How many processes of the program whose executable is (`dev`, `ino`) answered
    /// [`PAYS_AT`] calls in-process (or of another whose two slots both collide with its).
    pub fn paid(&self, dev: u64, ino: u64) -> u64 {
        let h = copy_hash(dev, ino);
        let count = |slot: u64| {
            let at = PAID_AT + (slot % PAID_SLOTS as u64) as usize;
            self.word(COUNTERS + 8 * at).load(Ordering::Relaxed)
        };
        count(h & 0xffff_ffff).min(count(h >> 32))
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `create`, used by nothing after this.
        unsafe { libc::munmap(self.base.cast(), FILE_SIZE) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The C side's offsets, as the C compiler lays `table.h` out.
    fn c_layout() -> Vec<(String, usize)> {
        let dir =
            std::env::temp_dir().join(format!("roost-fastpath-layout-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let header = concat!(env!("CARGO_MANIFEST_DIR"), "/fastpath/table.h");
        let program = format!(
            r#"#include "{header}"
#include <stddef.h>
#include <stdio.h>
#define SHOW(name, value) printf("%s %zu\n", name, (size_t)(value))
int main(void) {{
    SHOW("flags", offsetof(struct rf_table, flags));
    SHOW("seq", offsetof(struct rf_table, seq));
    SHOW("names_gen", offsetof(struct rf_table, names_gen));
    SHOW("fd_from", offsetof(struct rf_table, fd_from));
    SHOW("n_entries", offsetof(struct rf_table, n_entries));
    SHOW("n_names", offsetof(struct rf_table, n_names));
    SHOW("entries", offsetof(struct rf_table, entries));
    SHOW("entry_size", sizeof(struct rf_entry));
    SHOW("entry_physical", offsetof(struct rf_entry, physical));
    SHOW("entry_logical", offsetof(struct rf_entry, logical));
    SHOW("names", offsetof(struct rf_table, names));
    SHOW("name_size", sizeof(struct rf_name));
    SHOW("n_entered", offsetof(struct rf_table, n_entered));
    SHOW("entered", offsetof(struct rf_table, entered));
    SHOW("entered_hash", rf_entered_hash("/tmp/t/a", 8, "/m/a", 4) % 1000000007);
    SHOW("enabled", RF_ENABLED);
    SHOW("count", RF_COUNT);
    SHOW("no_opens", RF_NO_OPENS);
    SHOW("remote_met", RF_REMOTE_MET);
    SHOW("paid_at", RF_PAID_AT);
    SHOW("paid_slots", RF_PAID_SLOTS);
    SHOW("pays_at", RF_PAYS_AT);
    SHOW("copies", RF_COPIES_OFFSET);
    SHOW("copies_noted", offsetof(struct rf_copies, noted));
    SHOW("copy_bits_at", offsetof(struct rf_copies, bits));
    SHOW("copy_bits", RF_COPY_BITS);
    SHOW("copy_probes", RF_COPY_PROBES);
    SHOW("copy_hash", rf_copy_hash(0x803, 5332994) % 1000000007);
    SHOW("table_size", sizeof(struct rf_table));
    SHOW("counters", RF_COUNTERS_OFFSET);
    SHOW("file_size", RF_FILE_SIZE);
    SHOW("calls", RF_CALLS);
    return 0;
}}
"#
        );
        let source = dir.join("layout.c");
        std::fs::write(&source, program).unwrap();
        let exe = dir.join("layout");
        let built = std::process::Command::new("cc")
            .arg("-o")
            .arg(&exe)
            .arg(&source)
            .status()
            .expect("a C compiler");
        assert!(built.success());
        let out = std::process::Command::new(&exe).output().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let (name, value) = l.split_once(' ').unwrap();
                (name.to_string(), value.parse().unwrap())
            })
            .collect()
    }

    #[test]
    fn the_layout_is_the_c_sides() {
        let c = c_layout();
        let at = |name: &str| c.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(at("flags"), FLAGS);
        assert_eq!(at("seq"), SEQ);
        assert_eq!(at("names_gen"), NAMES_GEN);
        assert_eq!(at("fd_from"), FD_FROM);
        assert_eq!(at("n_entries"), N_ENTRIES);
        assert_eq!(at("n_names"), N_NAMES);
        assert_eq!(at("entries"), ENTRIES);
        assert_eq!(at("entry_size"), ENTRY_SIZE);
        assert_eq!(at("entry_logical"), 16);
        assert_eq!(at("entry_physical"), ENTRY_PHYSICAL);
        assert_eq!(at("names"), NAMES);
        assert_eq!(at("name_size"), NAME_SIZE);
        assert_eq!(at("n_entered"), N_ENTERED);
        assert_eq!(at("entered"), ENTERED);
        assert_eq!(
            at("entered_hash") as u64,
            entered_hash(b"/tmp/t/a", b"/m/a") % 1_000_000_007
        );
        assert_eq!(at("paid_at"), PAID_AT);
        assert_eq!(at("paid_slots"), PAID_SLOTS);
        assert_eq!(at("pays_at") as u64, PAYS_AT);
        assert!(CALLS.len() <= PAID_AT && (PAID_AT + PAID_SLOTS) * 8 <= 4096);
        assert_eq!(at("enabled") as u32, ENABLED);
        assert_eq!(at("count") as u32, COUNT);
        assert_eq!(at("no_opens") as u32, NO_OPENS);
        assert_eq!(at("remote_met") as u32, REMOTE_MET);
        assert!(at("table_size") <= COPIES);
        assert_eq!(at("copies"), COPIES);
        assert_eq!(at("copies") + at("copies_noted"), COPIES_NOTED);
        assert_eq!(at("copies") + at("copy_bits_at"), COPY_BITS_AT);
        assert_eq!(at("copy_bits") as u64, COPY_BITS);
        assert_eq!(at("copy_probes") as u32, COPY_PROBES);
        assert_eq!(
            at("copy_hash") as u64,
            copy_hash(0x803, 5_332_994) % 1_000_000_007
        );
        assert_eq!(at("counters"), COUNTERS);
        assert_eq!(at("file_size"), FILE_SIZE);
        assert_eq!(at("calls"), CALLS.len());
    }

    /// A table in a file of its own (`tag` names it), and the file's path.
    fn scratch_table(tag: &str) -> (std::path::PathBuf, Table) {
        let path = std::env::temp_dir().join(format!("roost-table-{tag}-{}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        (path, Table::create(&file).unwrap())
    }

    #[test]
    fn a_table_that_does_not_fit_is_written_disabled() {
        let (path, mut table) = scratch_table("fit");
        let long = Contents {
            enabled: true,
            entries: vec![Entry::Trap {
                logical: vec![b'a'; PATH_MAX + 1],
            }],
            ..Contents::default()
        };
        table.write(&long);
        let bytes = std::fs::read(&path).unwrap();
        let flags = u32::from_ne_bytes(bytes[FLAGS..FLAGS + 4].try_into().unwrap());
        assert_eq!(flags & ENABLED, 0);
        let seq = u64::from_ne_bytes(bytes[SEQ..SEQ + 8].try_into().unwrap());
        assert_eq!(seq % 2, 0, "the lock is released");
        table.write(&Contents {
            enabled: true,
            ..Contents::default()
        });
        let bytes = std::fs::read(&path).unwrap();
        let flags = u32::from_ne_bytes(bytes[FLAGS..FLAGS + 4].try_into().unwrap());
        assert_eq!(flags & ENABLED, ENABLED);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn the_same_contents_again_move_the_names_generation_alone() {
        let (path, mut table) = scratch_table("again");
        let word =
            |bytes: &[u8], at: usize| u64::from_ne_bytes(bytes[at..at + 8].try_into().unwrap());
        let one = Contents {
            enabled: true,
            entries: vec![Entry::Trap {
                logical: b"/m".to_vec(),
            }],
            ..Contents::default()
        };
        table.write(&one);
        let first = std::fs::read(&path).unwrap();
        table.write(&one);
        let again = std::fs::read(&path).unwrap();
        assert_eq!(word(&again, NAMES_GEN), word(&first, NAMES_GEN) + 1);
        assert_eq!(word(&again, SEQ), word(&first, SEQ) + 2);
        assert_eq!(again[NAMES_GEN + 8..], first[NAMES_GEN + 8..]);
        // So does a change of names alone.
        table.names_changed();
        let moved = std::fs::read(&path).unwrap();
        assert_eq!(word(&moved, NAMES_GEN), word(&again, NAMES_GEN) + 1);
        assert_eq!(word(&moved, SEQ), word(&again, SEQ) + 2);
        assert_eq!(moved[NAMES_GEN + 8..], first[NAMES_GEN + 8..]);
        // Different contents are written whole.
        table.write(&Contents::default());
        let other = std::fs::read(&path).unwrap();
        let n_entries =
            |b: &[u8]| u32::from_ne_bytes(b[N_ENTRIES..N_ENTRIES + 4].try_into().unwrap());
        assert_eq!((n_entries(&again), n_entries(&other)), (1, 0));
        assert_eq!(
            u32::from_ne_bytes(other[FLAGS..FLAGS + 4].try_into().unwrap()) & ENABLED,
            0
        );
        std::fs::remove_file(&path).unwrap();
    }
}
