//! The files this agent has shown for reading, remembered so that opening one again costs
//! one stat instead of a walk through the cache.
//!
//! Showing a kept copy takes a look at the object (is it whole?), a touch of its access
//! time (eviction goes by last use), a read of its change-time stamp and two stats of the
//! mirror: 5-7 us per open of a cached file, a third of what the open costs. The server's
//! attributes (the version, a change time, the mode) say when the content may have
//! changed: an open that finds the same attributes as last time, and the mirror still
//! holding the very copy it showed then (same inode and change time: nothing replaced it,
//! as a write or a directory listing may), gets that copy again. The access time is
//! touched at most once a second.

use super::Version;
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The server's attributes a copy was shown for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Attrs {
    pub version: Version,
    /// What else moves with the content (a Chirp server's ctime; 0 where the version
    /// says it all, as a hash in it does).
    pub change: i64,
    pub mode: u32,
}

/// One file shown.
struct Copy {
    attrs: Attrs,
    /// Where the mirror shows it, and what was found there.
    at: Vec<u8>,
    id: FileId,
    /// The cache's object, whose access time says when it was last used.
    object: PathBuf,
    touched: Instant,
}

/// Touch an object's access time no more often than this.
const TOUCH_EVERY: Duration = Duration::from_secs(1);
/// Forget them all rather than remember more than this many.
const LIMIT: usize = 1 << 14;

/// The files shown, by the driver's path.
#[derive(Default)]
pub struct Shown {
    copies: Mutex<HashMap<Vec<u8>, Copy>>,
}

/// A file told apart from one made later at the same name: device, inode and change time
/// (an inode number freed may be given to the next file made, which gets a new ctime).
type FileId = (u64, u64, i64, i64);

/// What `at` names, not following a final symlink.
fn id_of(at: &[u8]) -> Option<FileId> {
    use std::os::unix::ffi::OsStrExt;
    let meta = std::fs::symlink_metadata(std::ffi::OsStr::from_bytes(at)).ok()?;
    Some((meta.dev(), meta.ino(), meta.ctime(), meta.ctime_nsec()))
}

impl Shown {
    /// Where `path` is shown, if it was shown for `attrs` and is still there; `touch` is
    /// given the object when its access time is due.
    pub fn again(&self, path: &[u8], attrs: Attrs, touch: impl FnOnce(&Path)) -> Option<Vec<u8>> {
        let mut copies = self.copies.lock().expect("shown lock");
        let copy = copies.get_mut(path)?;
        if copy.attrs != attrs || id_of(&copy.at) != Some(copy.id) {
            copies.remove(path);
            return None;
        }
        if copy.touched.elapsed() >= TOUCH_EVERY {
            touch(&copy.object);
            copy.touched = Instant::now();
        }
        Some(copy.at.clone())
    }

    /// Notes that `path` was just shown at `at` from `object`, for `attrs`.
    pub fn note(&self, path: &[u8], attrs: Attrs, at: &[u8], object: &Path) {
        let Some(id) = id_of(at) else {
            return;
        };
        let mut copies = self.copies.lock().expect("shown lock");
        if copies.len() >= LIMIT {
            copies.clear();
        }
        let copy = Copy {
            attrs,
            at: at.to_vec(),
            id,
            object: object.to_path_buf(),
            touched: Instant::now(),
        };
        copies.insert(path.to_vec(), copy);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(ctime: i64) -> Attrs {
        Attrs {
            version: Version {
                ino: 7,
                size: 3,
                mtime: 100,
            },
            change: ctime,
            mode: 0o100644,
        }
    }

    #[test]
    fn a_copy_is_shown_again_only_for_the_same_attributes_and_the_same_file() {
        let dir = std::env::temp_dir().join(format!("roost-shown-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (at, object) = (dir.join("shown"), dir.join("object"));
        std::fs::write(&object, "abc").unwrap();
        std::fs::hard_link(&object, &at).unwrap();
        let at_bytes = at.as_os_str().as_encoded_bytes();
        let shown = Shown::default();
        assert_eq!(shown.again(b"/f", attrs(1), |_| {}), None, "never shown");
        shown.note(b"/f", attrs(1), at_bytes, &object);
        let mut touched = 0;
        assert_eq!(
            shown.again(b"/f", attrs(1), |_| touched += 1).as_deref(),
            Some(at_bytes)
        );
        assert_eq!(touched, 0, "touched when shown, not again within a second");
        assert_eq!(
            shown.again(b"/f", attrs(2), |_| {}),
            None,
            "the server's file changed"
        );
        shown.note(b"/f", attrs(1), at_bytes, &object);
        // Replaced in the mirror (a write, a listing): the same name, another file.
        std::fs::remove_file(&at).unwrap();
        std::fs::write(&at, "xyz").unwrap();
        assert_eq!(shown.again(b"/f", attrs(1), |_| {}), None, "replaced");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
