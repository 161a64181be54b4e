//! Copies filled block by block: a large remote file that programs read only in part
//! keeps the blocks they read in the cache, for every descriptor and agent of the user.
//! `DIR/objects/KEY/VERSION.blocks` is a sparse file of the object's size holding the
//! blocks fetched so far; `VERSION.have` says which, one byte a block (1: stored). The
//! marks are hints: a reader checks each block it takes from here against its hash
//! before using it (a crash, an eviction racing a store, anything else that left other
//! bytes is then a block fetched again), and only blocks checked on arrival are stored.
//! Once every block is marked the copy becomes the object itself (`VERSION`), which later
//! opens use whole.

use super::{errno_of, Cache, Version};
use crate::Errno;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A version of an object being filled block by block, shared on disk.
pub struct BlockCopy {
    /// The cache, which counts what the copy takes and evicts when it is over its bound.
    cache: Arc<Cache>,
    data: File,
    have: File,
    count: usize,
    /// The object's own name and the two names of this copy, for the promotion.
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
        let open = |path: &PathBuf| {
            File::options()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .map_err(errno_of)
        };
        let fresh = !data_path.exists();
        let (data, have) = (open(&data_path)?, open(&have_path)?);
        if fresh {
            // Marks left beside a copy that was evicted stand for nothing.
            have.set_len(0).map_err(errno_of)?;
            drop_other_versions(&dir, &name);
        }
        // Whoever makes it sizes it; sizing again to the same length is harmless.
        data.set_len(version.size).map_err(errno_of)?;
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

/// Removes what `dir` holds of versions other than `name` (a file's older copies).
fn drop_other_versions(dir: &std::path::Path, name: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let other = e.file_name();
        let other = other.to_string_lossy();
        let mine = other == name || other.starts_with(&format!("{name}."));
        if !mine && !other.starts_with(".tmp") && other != super::NOTE {
            let _ = std::fs::remove_file(e.path());
        }
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
    /// where they were fetched and checked at their own offsets, then marks them. When
    /// that completes the copy, it becomes the object.
    pub fn store(&self, from: &File, which: &[usize], block_size: u64) -> Result<(), Errno> {
        let size = self.data.metadata().map_err(errno_of)?.len();
        let mut buf = Vec::new();
        let mut stored = 0;
        for &i in which {
            let at = i as u64 * block_size;
            let len = block_size.min(size.saturating_sub(at)) as usize;
            buf.resize(len, 0);
            from.read_exact_at(&mut buf, at).map_err(errno_of)?;
            self.data.write_all_at(&buf, at).map_err(errno_of)?;
            stored += len as u64;
        }
        // Counted as a fill is (a block stored twice, by two agents, is counted twice until
        // the next count of what the objects take).
        let cache = &self.cache;
        if cache.used.fetch_add(stored, Ordering::Relaxed) + stored > cache.limit {
            cache.evict(&self.data_path);
        }
        for &i in which {
            self.have.write_all_at(&[1], i as u64).map_err(errno_of)?;
        }
        if self.present(0, self.count - 1).iter().all(|&p| p) {
            self.promote();
        }
        Ok(())
    }

    /// The copy, to read the blocks [`BlockCopy::present`] says are there.
    pub fn data(&self) -> &File {
        &self.data
    }

    /// Makes the whole copy the object (a link: descriptors open on it keep reading),
    /// and removes its block names. Not synced, as whole objects are not (see
    /// `Cache::fill`).
    fn promote(&self) {
        let _ = std::fs::hard_link(&self.data_path, &self.object);
        let _ = std::fs::remove_file(&self.have_path);
        let _ = std::fs::remove_file(&self.data_path);
    }
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
        a.store(&own, &[0, 2], 4).unwrap();
        // Another descriptor (or agent) sees them.
        let b = cache.blocks_of(&key, version, 3).unwrap();
        assert_eq!(b.present(0, 2), [true, false, true]);
        assert_eq!(b.present(2, 2), [true]);
        let mut buf = [0u8; 2];
        b.data().read_exact_at(&mut buf, 8).unwrap();
        assert_eq!(&buf, b"ij");
        assert!(!cache.holds(&key, version));
        // The last block makes it the object, whole; the block names go.
        b.store(&own, &[1], 4).unwrap();
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
        c.store(&own, &[0], 4).unwrap();
        let data = object.with_file_name(format!("{}.blocks", v2.name()));
        std::fs::remove_file(&data).unwrap();
        let d = cache.blocks_of(&key, v2, 3).unwrap();
        assert_eq!(d.present(0, 2), [false, false, false]);
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
        copy.store(&own, &[0, 1], 4).unwrap();
        // 8 + 8 bytes is over 12: the older object went, the copy stayed.
        assert!(!cache.holds(&other, v(1, 8)));
        assert_eq!(copy.present(0, 2), [true, true, false]);
        cache.close();
        std::fs::remove_dir_all(dir).unwrap();
    }
}
