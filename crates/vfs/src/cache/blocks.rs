//! Copies filled block by block: a large remote file that programs read only in part
//! keeps the blocks they read in the cache, for every descriptor and agent of the user.
//! `DIR/objects/KEY/VERSION.blocks` is a sparse file of the object's size holding the
//! blocks fetched so far; `VERSION.have` says which, one byte a block (1: stored). Only
//! blocks checked on arrival are stored, and a mark is written only while both names
//! still stand for the files the writer holds (an eviction or a newer copy may have
//! replaced them). The marks are hints all the same: a reader checks each block it takes
//! from here against its hash, and the copy becomes the object itself (`VERSION`, later
//! used whole) only after every block, read back through the promoter's own descriptor,
//! checked, and by a link made from that descriptor, never from a name another may have
//! replaced.

use super::{drop_entries, Cache, Version};
use crate::Errno;
use roost_base::errno_of;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A version of an object being filled block by block, shared on disk.
pub struct BlockCopy {
    /// The cache, which counts what the copy takes and evicts when it is over its bound.
    cache: Arc<Cache>,
    data: File,
    have: File,
    count: usize,
    /// The object's own name and the two names of this copy.
    object: PathBuf,
    data_path: PathBuf,
    have_path: PathBuf,
}

impl Cache {
    /// The block copy of the object of `key` at `version`, in `count` blocks, made on
    /// first use (and the other versions of `key` dropped then).
    pub fn blocks_of(
        self: &Arc<Self>,
        key: &str,
        version: Version,
        count: usize,
    ) -> Result<BlockCopy, Errno> {
        let dir = self.objects.join(key);
        std::fs::create_dir_all(&dir).map_err(errno_of)?;
        let name = version.name();
        let (data_path, have_path) = (
            dir.join(format!("{name}.blocks")),
            dir.join(format!("{name}.have")),
        );
        let open = |path: &Path| {
            File::options()
                .read(true)
                .write(true)
                .open(path)
                .map_err(errno_of)
        };
        let made = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&data_path);
        let (data, made) = match made {
            Ok(data) => (data, true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => (open(&data_path)?, false),
            Err(e) => return Err(errno_of(e)),
        };
        // Whoever makes it sizes it; sizing again to the same length is harmless.
        data.set_len(version.size).map_err(errno_of)?;
        let have = match open(&have_path) {
            // Marks left beside a copy made anew here (the one they were written for was
            // evicted) stand for nothing: new marks, put in place whole.
            Ok(have) if !made => have,
            _ => {
                let (tmp, have) = super::temporary(&dir)?;
                have.set_len(count as u64).map_err(errno_of)?;
                std::fs::rename(&tmp, &have_path).map_err(errno_of)?;
                drop_entries(&dir, |e| {
                    e.file_name().is_some_and(|n| {
                        let n = n.to_string_lossy();
                        n == name || n.starts_with(&format!("{name}."))
                    })
                });
                have
            }
        };
        if have.metadata().map_err(errno_of)?.len() < count as u64 {
            have.set_len(count as u64).map_err(errno_of)?;
        }
        Ok(BlockCopy {
            cache: Arc::clone(self),
            data,
            have,
            count,
            object: dir.join(&name),
            data_path,
            have_path,
        })
    }
}

/// Whether `path` names the file `file` is open on.
fn same_file(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

impl BlockCopy {
    /// Which of blocks `first..=last` are here (one read of the marks).
    pub fn present(&self, first: usize, last: usize) -> Vec<bool> {
        let mut marks = vec![0u8; last + 1 - first];
        let read = self.have.read_at(&mut marks, first as u64).unwrap_or(0);
        marks.truncate(read);
        (first..=last)
            .map(|i| marks.get(i - first) == Some(&1))
            .collect()
    }

    /// Stores blocks `which` (of `block_size` bytes; the last one shorter) from `from`,
    /// where they were fetched and checked at their own offsets, then marks them (if the
    /// copy's names are still this copy's). When that completes the copy, it becomes the
    /// object, if every block read back passes `check` (block number, bytes).
    pub fn store(
        &self,
        from: &File,
        which: &[usize],
        block_size: u64,
        check: &dyn Fn(usize, &[u8]) -> bool,
    ) -> Result<(), Errno> {
        let size = self.data.metadata().map_err(errno_of)?.len();
        let mut buf = Vec::new();
        let mut stored = 0;
        for &i in which {
            let (at, len) = span(i, block_size, size);
            buf.resize(len, 0);
            from.read_exact_at(&mut buf, at).map_err(errno_of)?;
            self.data.write_all_at(&buf, at).map_err(errno_of)?;
            stored += len as u64;
        }
        // Counted as a fill is (a block stored twice, by two agents, is counted twice until
        // the next count of what the objects take).
        self.cache.added(stored, &self.data_path);
        if !(same_file(&self.data, &self.data_path) && same_file(&self.have, &self.have_path)) {
            return Ok(()); // replaced meanwhile: this descriptor keeps what it stored
        }
        for &i in which {
            self.have.write_all_at(&[1], i as u64).map_err(errno_of)?;
        }
        if self.present(0, self.count - 1).iter().all(|&p| p) {
            self.promote(block_size, size, check);
        }
        Ok(())
    }

    /// The copy, to read the blocks [`BlockCopy::present`] says are there.
    pub fn data(&self) -> &File {
        &self.data
    }

    /// Makes the whole copy the object, if every block read back through this descriptor
    /// passes `check` (a block that does not loses its mark, to be fetched again): a link
    /// made from the descriptor (a copy whose name was removed meanwhile has none to give,
    /// and is not promoted), put in place under the object's name. The block names go.
    /// Not synced, as whole objects are not (see `Cache::fill`).
    fn promote(&self, block_size: u64, size: u64, check: &dyn Fn(usize, &[u8]) -> bool) {
        let mut buf = Vec::new();
        for i in 0..self.count {
            let (at, len) = span(i, block_size, size);
            buf.resize(len, 0);
            if self.data.read_exact_at(&mut buf, at).is_err() || !check(i, &buf) {
                let _ = self.have.write_all_at(&[0], i as u64);
                return;
            }
        }
        let Some(dir) = self.object.parent() else {
            return;
        };
        let Ok((tmp, _)) = super::temporary(dir) else {
            return;
        };
        let _ = std::fs::remove_file(&tmp);
        let from = std::ffi::CString::new(format!("/proc/self/fd/{}", self.data.as_raw_fd()));
        let to = std::ffi::CString::new(tmp.as_os_str().as_encoded_bytes());
        let (Ok(from), Ok(to)) = (from, to) else {
            return;
        };
        // SAFETY: two valid C strings.
        let linked = unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                from.as_ptr(),
                libc::AT_FDCWD,
                to.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        } == 0;
        if linked && std::fs::rename(&tmp, &self.object).is_ok() {
            let _ = std::fs::remove_file(&self.have_path);
            let _ = std::fs::remove_file(&self.data_path);
        } else {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// The offset and length of block `i` of a file of `size` bytes in blocks of `block_size`.
fn span(i: usize, block_size: u64, size: u64) -> (u64, usize) {
    let at = i as u64 * block_size;
    (at, block_size.min(size.saturating_sub(at)) as usize)
}

#[cfg(test)]
mod tests {
    use super::super::DEFAULT_LIMIT;
    use super::*;

    #[test]
    fn blocks_are_shared_marked_and_the_full_copy_becomes_the_object() {
        let dir = std::env::temp_dir().join(format!("roost-blocks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = Cache::new(&dir, DEFAULT_LIMIT, false);
        let key = Cache::key("http://h:1", b"/big");
        let version = Version {
            ino: 9,
            size: 10,
            mtime: 1,
        };
        // An older version's copy is dropped when the new one's block copy is made.
        let old = Version {
            mtime: 0,
            ..version
        };
        cache
            .object((&key, "big"), old, |f| {
                std::io::Write::write_all(f, b"0123456789").map_err(errno_of)
            })
            .unwrap();
        let a = cache.blocks_of(&key, version, 3).unwrap();
        assert!(!cache.holds(&key, old));
        assert_eq!(a.present(0, 2), [false, false, false]);
        // Blocks of 4 bytes (the last one 2), fetched into a file of the agent's own.
        let own = cache.scratch().unwrap();
        own.write_all_at(b"abcdefghij", 0).unwrap();
        a.store(&own, &[0, 2], 4, &|_, _| true).unwrap();
        // Another descriptor (or agent) sees them.
        let b = cache.blocks_of(&key, version, 3).unwrap();
        assert_eq!(b.present(0, 2), [true, false, true]);
        assert_eq!(b.present(2, 2), [true]);
        let mut buf = [0u8; 2];
        b.data().read_exact_at(&mut buf, 8).unwrap();
        assert_eq!(&buf, b"ij");
        assert!(!cache.holds(&key, version));
        // The last block makes it the object, whole; the block names go.
        b.store(&own, &[1], 4, &|_, _| true).unwrap();
        assert!(cache.holds(&key, version));
        let object = dir.join("objects").join(&key).join(version.name());
        assert_eq!(std::fs::read(&object).unwrap(), b"abcdefghij");
        let names: Vec<_> = std::fs::read_dir(object.parent().unwrap())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, [std::ffi::OsString::from(version.name())]);
        // Marks left without their copy (evicted) are forgotten.
        let v2 = Version {
            mtime: 2,
            ..version
        };
        let c = cache.blocks_of(&key, v2, 3).unwrap();
        c.store(&own, &[0], 4, &|_, _| true).unwrap();
        let data = object.with_file_name(format!("{}.blocks", v2.name()));
        std::fs::remove_file(&data).unwrap();
        let d = cache.blocks_of(&key, v2, 3).unwrap();
        assert_eq!(d.present(0, 2), [false, false, false]);
        cache.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_full_copy_with_a_bad_block_is_not_made_the_object_and_a_replaced_one_is_not_marked() {
        let dir = std::env::temp_dir().join(format!("roost-blocks-bad-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = Cache::new(&dir, DEFAULT_LIMIT, false);
        let key = Cache::key("http://h:1", b"/big");
        let version = Version {
            ino: 3,
            size: 10,
            mtime: 1,
        };
        let own = cache.scratch().unwrap();
        own.write_all_at(b"abcdefghij", 0).unwrap();
        let good = |i: usize, b: &[u8]| b == &b"abcdefghij"[i * 4..(i * 4 + 4).min(10)];
        let a = cache.blocks_of(&key, version, 3).unwrap();
        a.store(&own, &[0, 1], 4, &good).unwrap();
        // Block 0 changed in the cache, unread since: completing the copy checks it.
        a.data().write_all_at(b"X", 1).unwrap();
        a.store(&own, &[2], 4, &good).unwrap();
        assert!(!cache.holds(&key, version), "not the object");
        assert_eq!(a.present(0, 2), [false, true, true], "its mark is gone");
        a.store(&own, &[0], 4, &good).unwrap();
        assert!(cache.holds(&key, version));
        // A copy whose names were replaced (evicted, made anew by another) marks nothing
        // in the new one, and never becomes the object.
        let v2 = Version {
            mtime: 2,
            ..version
        };
        let old = cache.blocks_of(&key, v2, 3).unwrap();
        let data = dir
            .join("objects")
            .join(&key)
            .join(format!("{}.blocks", v2.name()));
        std::fs::remove_file(&data).unwrap();
        let new = cache.blocks_of(&key, v2, 3).unwrap();
        old.store(&own, &[0, 1, 2], 4, &good).unwrap();
        assert_eq!(new.present(0, 2), [false, false, false]);
        assert!(!cache.holds(&key, v2));
        cache.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn stored_blocks_count_toward_the_bound_and_evict_older_objects() {
        let dir = std::env::temp_dir().join(format!("roost-blocks-bound-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = Cache::new(&dir, 12, false);
        let other = Cache::key("http://h:1", b"/small");
        let v = |ino, size| Version {
            ino,
            size,
            mtime: 1,
        };
        cache
            .object((&other, "small"), v(1, 8), |f| {
                std::io::Write::write_all(f, b"12345678").map_err(errno_of)
            })
            .unwrap();
        assert!(cache.holds(&other, v(1, 8)));
        let key = Cache::key("http://h:1", b"/big");
        let copy = cache.blocks_of(&key, v(2, 10), 3).unwrap();
        let own = cache.scratch().unwrap();
        own.write_all_at(b"abcdefghij", 0).unwrap();
        copy.store(&own, &[0, 1], 4, &|_, _| true).unwrap();
        // 8 + 8 bytes is over 12: the older object went, the copy stayed.
        assert!(!cache.holds(&other, v(1, 8)));
        assert_eq!(copy.present(0, 2), [true, true, false]);
        cache.close();
        std::fs::remove_dir_all(dir).unwrap();
    }
}
