//! Logical path resolution: walks an absolute logical path component by component in the
//! logical namespace (`..` climbs logical directories; a symlink's absolute target is logical),
//! asking the mapped driver whether each component is a symlink. Answers are cached by logical
//! path, so a warm lookup costs hash probes and no system calls; the agent clears the cache
//! whenever a traced call may change the name space (unlink, rename, symlink, ...).

use crate::mount::{Mapped, MountTable};
use crate::path::components;
use crate::{Driver, Errno};
use std::collections::HashMap;

/// The most symlinks one walk follows before failing with ELOOP (as Linux).
const MAX_LINKS: usize = 40;
/// `/proc` is opaque: its magic links (`self`, `PID/fd/N`, `PID/cwd`) mean something else
/// for every process, so the walk never looks inside it and leaves the rest to the kernel.
const OPAQUE: &[u8] = b"/proc";
/// The cache is cleared rather than grown past this many entries.
const CACHE_LIMIT: usize = 1 << 16;

/// What a logical name is, for the walk.
#[derive(Clone, Debug, PartialEq)]
enum Node {
    /// A symlink with this target.
    Link(Vec<u8>),
    /// Anything else, including nothing at all (the kernel reports that later).
    Plain,
}

/// A walked path.
#[derive(Clone, Debug, PartialEq)]
pub struct Resolved {
    /// The absolute logical path with every symlink followed (except a final one not
    /// followed) and every `.`/`..` applied.
    pub logical: Vec<u8>,
    /// True when the walk followed at least one symlink.
    pub followed_symlink: bool,
    /// True when some name on the way (or the result) lies under a mount: otherwise the
    /// kernel, resolving the same path physically, finds the same object.
    pub via_mount: bool,
}

/// A walked path on a local driver: where the kernel finds it.
#[derive(Clone, Debug, PartialEq)]
pub struct Located {
    pub logical: Vec<u8>,
    /// The kernel path of the object.
    pub physical: Vec<u8>,
    pub followed_symlink: bool,
    pub via_mount: bool,
}

/// The mount table plus the resolution cache.
pub struct Namespace {
    table: MountTable,
    cache: HashMap<Vec<u8>, Node>,
    /// Lookups answered from the cache, and by asking a driver.
    pub hits: u64,
    pub misses: u64,
}

impl Namespace {
    pub fn new(table: MountTable) -> Namespace {
        Namespace {
            table,
            cache: HashMap::new(),
            hits: 0,
            misses: 0,
        }
    }

    pub fn table(&self) -> &MountTable {
        &self.table
    }

    /// Maps a walked logical path to its driver and physical path.
    pub fn map(&self, logical: &[u8]) -> Mapped<'_> {
        self.table.map(logical)
    }

    /// Forgets every cached answer.
    pub fn invalidate(&mut self) {
        self.cache.clear();
    }

    /// Forgets the cached answers for `logical` and every name below it (after a call that
    /// changed that name: unlink, rename, symlink, ...).
    pub fn invalidate_under(&mut self, logical: &[u8]) {
        if self.cache.len() > CACHE_LIMIT / 4 {
            // Scanning a large cache costs more than rebuilding the few names in use.
            self.cache.clear();
            return;
        }
        self.cache
            .retain(|k, _| crate::path::strip_prefix(k, logical).is_none());
    }

    fn lookup(&mut self, logical: &[u8]) -> Result<Node, Errno> {
        if let Some(node) = self.cache.get(logical) {
            self.hits += 1;
            return Ok(node.clone());
        }
        if !self.table.covers(logical) {
            // Unmapped: ask the local file system directly.
            self.misses += 1;
            let node = match crate::LocalDriver.readlink(logical) {
                Ok(target) => Node::Link(target),
                Err(_) => Node::Plain,
            };
            self.remember(logical, &node);
            return Ok(node);
        }
        self.misses += 1;
        let node = match self.table.map(logical) {
            Mapped::Deny => return Err(libc::EACCES),
            Mapped::Enoent => return Err(libc::ENOENT),
            Mapped::At { driver, path, .. } => match driver.readlink(&path) {
                Ok(target) => Node::Link(target),
                Err(_) => Node::Plain,
            },
        };
        self.remember(logical, &node);
        Ok(node)
    }

    fn remember(&mut self, logical: &[u8], node: &Node) {
        if self.cache.len() >= CACHE_LIMIT {
            self.cache.clear();
        }
        self.cache.insert(logical.to_vec(), node.clone());
    }

    /// Walks `path` (absolute, logical). `follow_last` says whether a final symlink is
    /// followed (stat, open) or named itself (lstat, unlink, O_NOFOLLOW).
    pub fn walk(&mut self, path: &[u8], follow_last: bool) -> Result<Resolved, Errno> {
        let mut pending: Vec<Vec<u8>> = components(path).rev().map(<[u8]>::to_vec).collect();
        let trailing_slash = path.len() > 1 && path.ends_with(b"/");
        let mut resolved: Vec<u8> = Vec::with_capacity(path.len());
        let mut links = 0;
        let mut followed = false;
        let mut via_mount = false;
        while let Some(comp) = pending.pop() {
            match comp.as_slice() {
                b"." => continue,
                b".." => {
                    let cut = resolved.iter().rposition(|&b| b == b'/').unwrap_or(0);
                    resolved.truncate(cut);
                    continue;
                }
                _ => {}
            }
            let base = resolved.len();
            resolved.push(b'/');
            resolved.extend_from_slice(&comp);
            if crate::path::strip_prefix(&resolved, OPAQUE).is_some() {
                for rest in pending.iter().rev() {
                    resolved.push(b'/');
                    resolved.extend_from_slice(rest);
                }
                break;
            }
            via_mount = via_mount || self.table.covers(&resolved);
            // A name followed only by `.` components is followed, as before a slash.
            if pending.is_empty() && !follow_last && !trailing_slash {
                // Still refuse names below a DENY/ENOENT mount.
                self.check_reachable(&resolved)?;
                break;
            }
            if let Node::Link(target) = self.lookup(&resolved)? {
                links += 1;
                if links > MAX_LINKS {
                    return Err(libc::ELOOP);
                }
                followed = true;
                if target.first() == Some(&b'/') {
                    resolved.clear();
                } else {
                    resolved.truncate(base);
                }
                pending.extend(components(&target).rev().map(<[u8]>::to_vec));
            }
        }
        if resolved.is_empty() {
            resolved.push(b'/');
        }
        via_mount = via_mount || self.table.covers(&resolved);
        Ok(Resolved {
            logical: resolved,
            followed_symlink: followed,
            via_mount,
        })
    }

    /// Walks `path` and maps the result to a kernel path: EACCES under `DENY`, ENOENT under
    /// `ENOENT`, ENOSYS on a driver the kernel cannot reach (remote files are not localized yet).
    pub fn locate(&mut self, path: &[u8], follow_last: bool) -> Result<Located, Errno> {
        let walked = self.walk(path, follow_last)?;
        let physical = match self.table.map(&walked.logical) {
            Mapped::Deny => return Err(libc::EACCES),
            Mapped::Enoent => return Err(libc::ENOENT),
            m => m.local_path().ok_or(libc::ENOSYS)?.to_vec(),
        };
        Ok(Located {
            logical: walked.logical,
            physical,
            followed_symlink: walked.followed_symlink,
            via_mount: walked.via_mount,
        })
    }

    fn check_reachable(&self, logical: &[u8]) -> Result<(), Errno> {
        match self.table.map(logical) {
            Mapped::Deny => Err(libc::EACCES),
            Mapped::Enoent => Err(libc::ENOENT),
            Mapped::At { .. } => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mount::Target;
    use std::path::PathBuf;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("roost-vfs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn bytes(p: &std::path::Path) -> Vec<u8> {
        p.as_os_str().as_encoded_bytes().to_vec()
    }

    #[test]
    fn absolute_symlink_targets_are_logical() {
        let phys = tmpdir("abs");
        std::fs::create_dir(phys.join("real")).unwrap();
        std::fs::write(phys.join("real/f"), b"x").unwrap();
        // /data/link -> /data/real: meaningful only in the logical namespace.
        std::os::unix::fs::symlink("/data/real", phys.join("link")).unwrap();
        let mut t = MountTable::new();
        t.add(b"/data", Target::local(bytes(&phys)));
        let mut ns = Namespace::new(t);
        let r = ns.walk(b"/data/link/f", true).unwrap();
        assert_eq!(r.logical, b"/data/real/f");
        assert!(r.followed_symlink);
        assert!(r.via_mount);
        assert!(!ns.walk(b"/usr/bin", true).unwrap().via_mount);
        let phys_f = ns.map(&r.logical).local_path().unwrap().to_vec();
        assert_eq!(phys_f, bytes(&phys.join("real/f")));
        // Not following the last component names the link itself, unless a `.` follows
        // it (as a slash would).
        assert_eq!(
            ns.walk(b"/data/link", false).unwrap().logical,
            b"/data/link"
        );
        assert_eq!(
            ns.walk(b"/data/link/.", false).unwrap().logical,
            b"/data/real"
        );
        assert_eq!(
            ns.walk(b"/data/link/./", false).unwrap().logical,
            b"/data/real"
        );
        std::fs::remove_dir_all(phys).unwrap();
    }

    #[test]
    fn dotdot_climbs_logically_across_mounts() {
        let phys = tmpdir("dotdot");
        let mut t = MountTable::new();
        t.add(b"/data", Target::local(bytes(&phys)));
        let mut ns = Namespace::new(t);
        assert_eq!(
            ns.walk(b"/data/../etc/./hosts", true).unwrap().logical,
            b"/etc/hosts"
        );
        assert_eq!(ns.walk(b"/..", true).unwrap().logical, b"/");
        std::fs::remove_dir_all(phys).unwrap();
    }

    #[test]
    fn relative_symlinks_and_loops() {
        let phys = tmpdir("loop");
        std::os::unix::fs::symlink("sub/../other", phys.join("rel")).unwrap();
        std::fs::create_dir(phys.join("sub")).unwrap();
        std::os::unix::fs::symlink("a", phys.join("b")).unwrap();
        std::os::unix::fs::symlink("b", phys.join("a")).unwrap();
        let mut t = MountTable::new();
        t.add(b"/m", Target::local(bytes(&phys)));
        let mut ns = Namespace::new(t);
        assert_eq!(ns.walk(b"/m/rel", true).unwrap().logical, b"/m/other");
        assert_eq!(ns.walk(b"/m/a", true), Err(libc::ELOOP));
        std::fs::remove_dir_all(phys).unwrap();
    }

    #[test]
    fn cache_answers_repeat_lookups_until_invalidated() {
        let phys = tmpdir("cache");
        let mut t = MountTable::new();
        t.add(b"/c", Target::local(bytes(&phys)));
        let mut ns = Namespace::new(t);
        ns.walk(b"/c/x", true).unwrap();
        let misses = ns.misses;
        ns.walk(b"/c/x", true).unwrap();
        assert_eq!(ns.misses, misses, "a warm walk asks no driver");
        std::os::unix::fs::symlink("/elsewhere", phys.join("x")).unwrap();
        assert_eq!(
            ns.walk(b"/c/x", true).unwrap().logical,
            b"/c/x",
            "stale until invalidated"
        );
        ns.invalidate();
        assert_eq!(ns.walk(b"/c/x", true).unwrap().logical, b"/elsewhere");
        std::fs::remove_dir_all(phys).unwrap();
    }

    #[test]
    fn locate_maps_to_kernel_paths_or_errors() {
        struct Remote;
        impl Driver for Remote {
            fn name(&self) -> &'static str {
                "remote"
            }
        }
        let mut t = MountTable::new();
        t.add(b"/d", Target::local("/phys"));
        t.add(b"/no", Target::Deny);
        let remote = Target::Driver {
            driver: std::sync::Arc::new(Remote),
            root: b"/".to_vec(),
        };
        t.add(b"/net", remote);
        let mut ns = Namespace::new(t);
        assert_eq!(ns.locate(b"/d/x", true).unwrap().physical, b"/phys/x");
        assert_eq!(ns.locate(b"/no/x", true), Err(libc::EACCES));
        assert_eq!(ns.locate(b"/net/x", true), Err(libc::ENOSYS));
    }

    #[test]
    fn proc_is_opaque_and_links_into_mounts_are_followed() {
        let phys = tmpdir("opaque");
        let outside = tmpdir("opaque-out");
        std::os::unix::fs::symlink("/m/real", outside.join("link")).unwrap();
        let mut t = MountTable::new();
        t.add(b"/m", Target::local(bytes(&phys)));
        let mut ns = Namespace::new(t);
        // /dev/fd -> /proc/self/fd: /proc is not looked into (self would be roost itself).
        let r = ns.walk(b"/dev/fd/3", true).unwrap();
        assert_eq!(r.logical, b"/proc/self/fd/3");
        assert!(!r.via_mount);
        // A link outside every mount that points into one lands in the mount.
        let mut link = bytes(&outside);
        link.extend_from_slice(b"/link/f");
        let r = ns.walk(&link, true).unwrap();
        assert_eq!(r.logical, b"/m/real/f");
        assert!(r.via_mount);
        std::fs::remove_dir_all(phys).unwrap();
        std::fs::remove_dir_all(outside).unwrap();
    }

    #[test]
    fn invalidate_under_forgets_a_subtree_only() {
        let phys = tmpdir("inval");
        std::fs::create_dir(phys.join("a")).unwrap();
        let mut t = MountTable::new();
        t.add(b"/c", Target::local(bytes(&phys)));
        let mut ns = Namespace::new(t);
        ns.walk(b"/c/a/x", true).unwrap();
        ns.walk(b"/c/b", true).unwrap();
        std::os::unix::fs::symlink("/elsewhere", phys.join("b")).unwrap();
        ns.invalidate_under(b"/c/a");
        assert_eq!(
            ns.walk(b"/c/b", true).unwrap().logical,
            b"/c/b",
            "untouched entry kept"
        );
        ns.invalidate_under(b"/c/b");
        assert_eq!(ns.walk(b"/c/b", true).unwrap().logical, b"/elsewhere");
        std::fs::remove_dir_all(phys).unwrap();
    }

    #[test]
    fn deny_and_enoent_stop_the_walk() {
        let mut t = MountTable::new();
        t.add(b"/secret", Target::Deny);
        t.add(b"/gone", Target::Enoent);
        let mut ns = Namespace::new(t);
        assert_eq!(ns.walk(b"/secret/a/b", true), Err(libc::EACCES));
        assert_eq!(ns.walk(b"/gone", false), Err(libc::ENOENT));
    }
}
