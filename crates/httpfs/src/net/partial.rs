//! Large files read in place, block by block (`docs/httpfs.md`, "Partial reads"): a file
//! of at least the block threshold whose index entry has block hashes is opened as an
//! [`OpenFile`] (the agent gives the program a virtual descriptor, as for a direct-mode
//! Chirp file), and each read fetches only the blocks it covers that are not at hand,
//! with Range requests, each checked against its hash before any of it is read
//! ([`super::ranged`]). A descriptor reads only from its own nameless file, where its
//! blocks were checked as they arrived, or copied once checked from the cache's shared
//! copy of the file ([`roost_vfs::cache::BlockCopy`]), where it leaves the blocks it
//! fetched for the other descriptors and later runs. A server that answers ranges with
//! the whole file gets the file fetched whole into the cache once, and read from there.

use super::{Copy, HttpNet};
use crate::blocks::Blocks;
use roost_vfs::cache::{BlockCopy, Version};
use roost_vfs::{Errno, OpenFile, Stat, StatFs};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};

/// One large file open in place.
pub(super) struct PartialFile {
    net: Arc<HttpNet>,
    /// The driver path (`/HOST[:PORT]/PATH`), its server and its path there.
    path: Vec<u8>,
    authority: String,
    rest: Vec<u8>,
    url: String,
    stat: Stat,
    blocks: Arc<Blocks>,
    state: Mutex<State>,
}

struct State {
    /// The blocks checked into `own`.
    held: Vec<bool>,
    /// This descriptor's blocks: fetched and checked, or checked from the shared copy.
    own: std::fs::File,
    /// The cache's shared copy (`None` when the cache could not make one).
    shared: Option<BlockCopy>,
    /// The whole file, once a server answered a range with all of it (or the origin's
    /// block did not match, and the file was fetched again whole, with a fresh index).
    whole: Option<std::fs::File>,
    /// Where the last read ended, and how many reads in a row began where the one before
    /// ended: a program reading on gets the next blocks fetched with the one it needs.
    last_end: u64,
    in_a_row: usize,
}

impl PartialFile {
    pub(super) fn new(
        net: Arc<HttpNet>,
        (path, authority, rest): (&[u8], &str, &[u8]),
        (stat, version): (Stat, Version),
        blocks: Arc<Blocks>,
    ) -> Result<PartialFile, Errno> {
        let own = net.cache.scratch()?;
        own.set_len(stat.size).map_err(roost_base::errno_of)?;
        let key = net.cache_key(authority, rest);
        let shared = net.cache.blocks_of(&key, version, blocks.hashes.len()).ok();
        Ok(PartialFile {
            url: net.url(authority, rest),
            path: path.to_vec(),
            authority: authority.to_string(),
            rest: rest.to_vec(),
            stat,
            state: Mutex::new(State {
                held: vec![false; blocks.hashes.len()],
                own,
                shared,
                whole: None,
                last_end: 0,
                in_a_row: 0,
            }),
            blocks,
            net,
        })
    }

    /// Takes the blocks of `first..=last` that the shared copy holds and this descriptor
    /// does not yet, each checked against its hash, into this descriptor's own file (the
    /// bytes checked are the bytes returned, whatever the shared copy holds later).
    fn take_shared(&self, state: &mut State, first: usize, last: usize) {
        let Some(shared) = &state.shared else {
            return;
        };
        let present = shared.present(first, last);
        let mut buf = Vec::new();
        for i in first..=last {
            if state.held[i] || !present[i - first] {
                continue;
            }
            let (at, len) = self.blocks.range(i, self.stat.size);
            buf.resize(len as usize, 0);
            let read = shared.data().read_exact_at(&mut buf, at);
            if read.is_ok()
                && self.blocks.is_block(i, &buf)
                && state.own.write_all_at(&buf, at).is_ok()
            {
                state.held[i] = true;
            }
        }
    }

    /// Makes the blocks of `[offset, end)` held (one caller at a time: a block two
    /// threads want is fetched once): from the shared copy, else fetched, and when the
    /// program reads on from where it stopped, up to a stream's worth of the blocks after
    /// them at the same time (read ahead: a web server's file is the version its index
    /// vouches for, so no later read could have seen other content).
    fn fill(&self, state: &mut State, offset: u64, end: u64) -> Result<(), Errno> {
        let size = self.blocks.size;
        state.in_a_row = if offset == state.last_end {
            state.in_a_row + 1
        } else {
            0
        };
        state.last_end = end;
        let (first, last) = ((offset / size) as usize, ((end - 1) / size) as usize);
        let all_held = |state: &State| (first..=last).all(|i| state.held[i]);
        if all_held(state) {
            return Ok(());
        }
        let streams = self.net.options.streams.max(1);
        let ahead = state.in_a_row.saturating_sub(1).min(streams);
        let last_wanted = (last + ahead).min(state.held.len() - 1);
        self.take_shared(state, first, last_wanted);
        if all_held(state) {
            return Ok(());
        }
        let todo: Vec<usize> = (first..=last_wanted).filter(|&i| !state.held[i]).collect();
        let net = &self.net;
        let mut copy = Copy {
            route: net.client.origin(),
            mismatch: None,
            background: false,
        };
        let fetched = net.fetch_some_blocks(
            (&self.authority, &self.url),
            super::ANY,
            &state.own,
            (&self.blocks, self.stat.size, &todo),
            &mut copy,
        );
        match fetched {
            Ok(super::ranged::Fetched::Done) => {
                // Read from this descriptor's own file, where they were checked; the shared
                // copy is for the others.
                if let Some(shared) = &state.shared {
                    let check = |i: usize, data: &[u8]| self.blocks.is_block(i, data);
                    let _ = shared.store(&state.own, &todo, size, &check);
                }
                for i in todo {
                    state.held[i] = true;
                }
                Ok(())
            }
            // No ranges from this server; or the origin's own block is wrong, so the index
            // may be older than the file: fetched whole as any file is, with the index
            // fetched again and the attempts and lines that come with it.
            Ok(super::ranged::Fetched::Whole { .. }) | Err(libc::EBADMSG) => {
                let shown = net.localize_file(&self.path, &self.authority, &self.rest)?;
                let path = std::path::PathBuf::from(
                    <std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(shown),
                );
                state.whole = Some(std::fs::File::open(path).map_err(roost_base::errno_of)?);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

impl OpenFile for PartialFile {
    fn pread(&self, offset: u64, len: usize) -> Result<Vec<u8>, Errno> {
        let end = offset.saturating_add(len as u64).min(self.stat.size);
        if offset >= end {
            return Ok(Vec::new());
        }
        let mut state = self.state.lock().expect("partial file lock");
        if state.whole.is_none() {
            self.fill(&mut state, offset, end)?;
        }
        let source = state.whole.as_ref().unwrap_or(&state.own);
        let mut buf = vec![0u8; (end - offset) as usize];
        source
            .read_exact_at(&mut buf, offset)
            .map_err(roost_base::errno_of)?;
        Ok(buf)
    }

    fn pwrite(&self, _data: &[u8], _offset: u64) -> Result<usize, Errno> {
        Err(libc::EBADF) // opened read-only: a web server takes no writes
    }

    fn fstat(&self) -> Result<Stat, Errno> {
        Ok(self.stat)
    }

    fn ftruncate(&self, _len: u64) -> Result<(), Errno> {
        Err(libc::EINVAL)
    }

    fn fsync(&self) -> Result<(), Errno> {
        Ok(())
    }

    fn fchmod(&self, _mode: u32) -> Result<(), Errno> {
        Err(libc::EROFS)
    }

    fn fchown(&self, _uid: u32, _gid: u32) -> Result<(), Errno> {
        Err(libc::EROFS)
    }

    fn fstatfs(&self) -> Result<StatFs, Errno> {
        roost_vfs::Driver::statfs(&*self.net, &self.path)
    }

    fn path(&self) -> &[u8] {
        &self.path
    }
}
