//! The mount table: logical prefixes mapped to a driver and a root inside it, or to `DENY`
//! (EACCES) or `ENOENT` (absent). Longest prefix wins; a mount may name a directory or a single
//! file; `/` may be remapped. Unmatched paths map to themselves on the local driver.

use crate::anchor::Anchor;
use crate::driver::{Driver, LocalDriver};
use crate::path::{normalize, strip_prefix};
use crate::Errno;
use std::sync::Arc;

/// Where a logical prefix goes.
#[derive(Clone)]
pub enum Target {
    /// Paths below the prefix live at `root` + rest inside `driver`. `direct`: a remote
    /// driver's files are used in place on the server rather than through local copies
    /// (see `docs/mount-list.md`, "Consistency").
    Driver {
        driver: Arc<dyn Driver>,
        root: Vec<u8>,
        direct: bool,
        /// A local target held open: the mapping keeps it when it is renamed, and `root`
        /// is only where it was when the list was loaded ([`Target::root_now`]).
        anchor: Option<Arc<Anchor>>,
    },
    /// Every path below the prefix fails with EACCES.
    Deny,
    /// Every path below the prefix is absent (ENOENT).
    Enoent,
}

impl Target {
    /// A directory or file of the local file system.
    pub fn local(root: impl Into<Vec<u8>>) -> Target {
        let root = normalize(&root.into());
        Target::Driver {
            driver: Arc::new(LocalDriver),
            anchor: Anchor::open(&root).map(Arc::new),
            root,
            direct: false,
        }
    }

    /// A directory or file of a remote driver, used through local copies (`cached`) or in
    /// place (`direct`).
    pub fn remote(driver: Arc<dyn Driver>, root: impl Into<Vec<u8>>, direct: bool) -> Target {
        Target::Driver {
            driver,
            root: normalize(&root.into()),
            direct,
            anchor: None,
        }
    }

    /// A driver target's root now: where a local target's directory is (followed through
    /// renames), else the root as given.
    pub fn root_now(&self) -> Option<std::borrow::Cow<'_, [u8]>> {
        match self {
            Target::Driver {
                anchor: Some(a), ..
            } => Some(std::borrow::Cow::Owned(a.path())),
            Target::Driver { root, .. } => Some(std::borrow::Cow::Borrowed(root)),
            _ => None,
        }
    }
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Driver {
                driver,
                root,
                direct,
                ..
            } => {
                let mode = if *direct { ":direct" } else { "" };
                write!(
                    f,
                    "{}:{}{mode}",
                    driver.name(),
                    String::from_utf8_lossy(root)
                )
            }
            Target::Deny => f.write_str("DENY"),
            Target::Enoent => f.write_str("ENOENT"),
        }
    }
}

/// One mapping of the table.
#[derive(Clone, Debug)]
pub struct Mount {
    /// The logical prefix (absolute, normalised).
    pub logical: Vec<u8>,
    pub target: Target,
}

/// The result of mapping one logical path.
pub enum Mapped<'a> {
    /// The object lives at `path` inside `driver`; `mount` is the table index (None: unmapped).
    At {
        driver: &'a dyn Driver,
        path: Vec<u8>,
        mount: Option<usize>,
    },
    Deny,
    Enoent,
}

impl Mapped<'_> {
    /// The path the kernel can use directly, when the driver is local.
    pub fn local_path(&self) -> Option<&[u8]> {
        match self {
            Mapped::At { driver, path, .. } if driver.is_local() => Some(path),
            _ => None,
        }
    }

    /// The mount index (None: unmapped).
    pub fn mount(&self) -> Option<usize> {
        match self {
            Mapped::At { mount, .. } => *mount,
            _ => None,
        }
    }

    /// Whether a rename or link between `self` and `other` stays within one file system
    /// as far as roost can tell: local paths are the kernel's to judge (it answers EXDEV
    /// itself), a remote path shares a file system only with paths of the same driver
    /// instance (two Chirp servers are two file systems, though both drivers are "chirp").
    pub fn may_share_file_system(&self, other: &Mapped<'_>) -> bool {
        match (self, other) {
            (Mapped::At { driver: a, .. }, Mapped::At { driver: b, .. }) => {
                match (a.is_local(), b.is_local()) {
                    (true, true) => true,
                    (false, false) => {
                        let (Mapped::At { path: pa, .. }, Mapped::At { path: pb, .. }) =
                            (self, other)
                        else {
                            unreachable!("matched above")
                        };
                        std::ptr::addr_eq(*a as *const dyn Driver, *b as *const dyn Driver)
                            && a.volume(pa) == b.volume(pb)
                    }
                    _ => false,
                }
            }
            _ => true, // DENY/ENOENT fail the call before this matters
        }
    }
}

/// The mount table, kept sorted longest prefix first.
#[derive(Clone, Default, Debug)]
pub struct MountTable {
    mounts: Vec<Mount>,
}

static LOCAL: LocalDriver = LocalDriver;

impl MountTable {
    pub fn new() -> MountTable {
        MountTable::default()
    }

    /// Adds a mapping; a later mapping of the same prefix replaces the earlier one.
    pub fn add(&mut self, logical: &[u8], target: Target) {
        let logical = normalize(logical);
        self.mounts.retain(|m| m.logical != logical);
        self.mounts.push(Mount { logical, target });
        self.mounts
            .sort_by_key(|m| std::cmp::Reverse(m.logical.len()));
    }

    pub fn is_empty(&self) -> bool {
        self.mounts.is_empty()
    }

    pub fn mounts(&self) -> &[Mount] {
        &self.mounts
    }

    /// True when some mount covers `path` (the agent's fast path skips everything else).
    pub fn covers(&self, path: &[u8]) -> bool {
        self.mounts
            .iter()
            .any(|m| strip_prefix(path, &m.logical).is_some())
    }

    /// True when `logical` is a mount point or a directory above one: removing, renaming or
    /// replacing it would move the physical data under the mount (a kernel answers EBUSY).
    pub fn holds_mount(&self, logical: &[u8]) -> bool {
        self.mounts
            .iter()
            .any(|m| strip_prefix(&m.logical, logical).is_some())
    }

    /// Whether `name` (one component) is the last name of a mount point, or of a local
    /// target's directory: a name the agent must look at wherever it appears.
    pub fn names_a_mount(&self, name: &[u8]) -> bool {
        let last = |p: &[u8]| p.rsplit(|&b| b == b'/').next() == Some(name);
        self.mounts.iter().any(|m| {
            last(&m.logical)
                || match &m.target {
                    Target::Driver { driver, .. } if driver.is_local() => {
                        m.target.root_now().is_some_and(|root| last(&root))
                    }
                    _ => false,
                }
        })
    }

    /// True when `logical` is a mount point itself.
    pub fn is_mount_point(&self, logical: &[u8]) -> bool {
        self.mounts.iter().any(|m| m.logical == logical)
    }

    /// The index of the mount that holds `logical` (None: no mapping, the host's own).
    pub fn mount_of(&self, logical: &[u8]) -> Option<usize> {
        self.mounts
            .iter()
            .position(|m| strip_prefix(logical, &m.logical).is_some())
    }

    /// Says that a traced call changed the local name `physical` (renamed, removed): a
    /// local target at or below it is looked for again ([`Anchor`]).
    pub fn changed(&self, physical: &[u8]) {
        for m in &self.mounts {
            if let Target::Driver {
                anchor: Some(a), ..
            } = &m.target
            {
                if strip_prefix(&a.path(), physical).is_some() {
                    a.may_have_moved();
                }
            }
        }
    }

    /// The local mappings whose target's directory holds `physical`, innermost first: each
    /// one's root and the rest of `physical` below it.
    pub fn local_roots_of(&self, physical: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut found: Vec<(Vec<u8>, Vec<u8>)> = self
            .mounts
            .iter()
            .filter_map(|m| match &m.target {
                Target::Driver { driver, .. } if driver.is_local() => {
                    let root = m.target.root_now()?;
                    let rest = strip_prefix(physical, &root)?.to_vec();
                    Some((root.into_owned(), rest))
                }
                _ => None,
            })
            .collect();
        found.sort_by_key(|(root, _)| std::cmp::Reverse(root.len()));
        found
    }

    /// The physical root of local mount `index` now.
    pub fn local_root(&self, index: usize) -> Option<Vec<u8>> {
        match &self.mounts.get(index)?.target {
            t @ Target::Driver { driver, .. } if driver.is_local() => {
                Some(t.root_now()?.into_owned())
            }
            _ => None,
        }
    }

    /// The logical name of `rest` (as [`MountTable::local_roots_of`] gives it) through
    /// mount `index`.
    pub fn name_through(&self, index: usize, rest: &[u8]) -> Vec<u8> {
        under(&self.mounts[index].logical, rest)
    }

    /// Maps an absolute, walked logical path through the longest matching mount.
    pub fn map(&self, logical: &[u8]) -> Mapped<'_> {
        for (i, m) in self.mounts.iter().enumerate() {
            if let Some(rest) = strip_prefix(logical, &m.logical) {
                return match &m.target {
                    Target::Deny => Mapped::Deny,
                    Target::Enoent => Mapped::Enoent,
                    Target::Driver { driver, .. } => Mapped::At {
                        driver: driver.as_ref(),
                        path: under(&m.target.root_now().expect("a driver's root"), rest),
                        mount: Some(i),
                    },
                };
            }
        }
        Mapped::At {
            driver: &LOCAL,
            path: logical.to_vec(),
            mount: None,
        }
    }

    /// The driver of mount `index` (as [`Mapped::mount`] names it), shared, for an
    /// operation made after the table is no longer at hand.
    pub fn driver(&self, index: usize) -> Option<Arc<dyn Driver>> {
        match &self.mounts.get(index)?.target {
            Target::Driver { driver, .. } => Some(Arc::clone(driver)),
            _ => None,
        }
    }

    /// Whether mount `index` uses its remote files in place (direct mode).
    pub fn is_direct(&self, index: usize) -> bool {
        matches!(
            self.mounts.get(index).map(|m| &m.target),
            Some(Target::Driver { direct: true, .. })
        )
    }

    /// Whether any mount uses remote files in place (direct mode).
    pub fn any_direct(&self) -> bool {
        (0..self.mounts.len()).any(|i| self.is_direct(i))
    }

    /// Whether any mount is a driver's (remote files, in either mode).
    pub fn any_remote(&self) -> bool {
        self.mounts
            .iter()
            .any(|m| matches!(m.target, Target::Driver { .. }))
    }

    /// Whether `physical` lies in a remote mount's local mirror (a copy roost made, never a
    /// name of its own).
    pub fn in_mirror(&self, physical: &[u8]) -> bool {
        self.mounts.iter().any(|m| match &m.target {
            Target::Driver { driver, .. } => driver
                .mirror()
                .is_some_and(|mirror| strip_prefix(physical, mirror).is_some()),
            _ => false,
        })
    }

    /// Whether some mapping hides paths (`DENY` or `ENOENT`).
    pub fn hides_any(&self) -> bool {
        self.mounts
            .iter()
            .any(|m| matches!(m.target, Target::Deny | Target::Enoent))
    }

    /// The errno a `DENY` (EACCES) or `ENOENT` (ENOENT) mapping hides the local object at
    /// `physical` with, under any of its logical names; `None` when none hides it.
    pub fn hidden(&self, physical: &[u8]) -> Option<Errno> {
        self.logical_names(physical)
            .iter()
            .find_map(|logical| match self.map(logical) {
                Mapped::Deny => Some(libc::EACCES),
                Mapped::Enoent => Some(libc::ENOENT),
                Mapped::At { .. } => None,
            })
    }

    /// Every logical name of a local physical path: the path itself, and its name through
    /// each local mount whose root holds it.
    pub fn logical_names(&self, physical: &[u8]) -> Vec<Vec<u8>> {
        std::iter::once(physical.to_vec())
            .chain(self.names_through_mounts(physical).map(|(_, name)| name))
            .collect()
    }

    /// Maps a local physical path back to a logical one (for dirfds, `/proc/*/cwd|exe|fd`):
    /// the local mount (or remote mount's local mirror) with the longest matching root wins (the first of equals); an
    /// unmatched path is itself unless `/` is remapped, in which case it lies outside the
    /// namespace and is returned unchanged.
    pub fn reverse(&self, physical: &[u8]) -> Vec<u8> {
        self.names_through_mounts(physical)
            .fold(
                None,
                |best: Option<(usize, Vec<u8>)>, (len, name)| match best {
                    Some((best_len, _)) if best_len >= len => best,
                    _ => Some((len, name)),
                },
            )
            .map_or_else(|| physical.to_vec(), |(_, name)| name)
    }

    /// The name of `physical` through each local mount whose root holds it, with the length
    /// of that root, in table order.
    fn names_through_mounts<'a>(
        &'a self,
        physical: &'a [u8],
    ) -> impl Iterator<Item = (usize, Vec<u8>)> + 'a {
        self.mounts.iter().filter_map(move |m| match &m.target {
            Target::Driver { driver, .. } if driver.is_local() => {
                let root = m.target.root_now()?;
                strip_prefix(physical, &root).map(|rest| (root.len(), under(&m.logical, rest)))
            }
            Target::Driver { driver, root, .. } => {
                // A remote driver's local copies live at mirror + driver path.
                let mirrored = [driver.mirror()?, root.as_slice()].concat();
                let mirrored = crate::path::normalize(&mirrored);
                strip_prefix(physical, &mirrored)
                    .map(|rest| (mirrored.len(), under(&m.logical, rest)))
            }
            _ => None,
        })
    }
}

/// `rest` (empty, or starting with `/`) under the directory `prefix`.
fn under(prefix: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut out = if prefix == b"/" && !rest.is_empty() {
        Vec::new()
    } else {
        prefix.to_vec()
    };
    out.extend_from_slice(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(m: Mapped<'_>) -> Vec<u8> {
        m.local_path().expect("local").to_vec()
    }

    #[test]
    fn two_remote_drivers_of_one_kind_are_two_file_systems() {
        struct Remote;
        impl Driver for Remote {
            fn name(&self) -> &'static str {
                "remote"
            }
        }
        let (a, b) = (Arc::new(Remote), Arc::new(Remote));
        let mut t = MountTable::new();
        t.add(b"/a", Target::remote(a.clone(), &b"/"[..], false));
        t.add(b"/a2", Target::remote(a, &b"/sub"[..], false));
        t.add(b"/b", Target::remote(b, &b"/"[..], false));
        t.add(b"/l", Target::local("/tmp"));
        let same = |x: &[u8], y: &[u8]| t.map(x).may_share_file_system(&t.map(y));
        assert!(same(b"/a/x", b"/a2/y"), "one server through two mounts");
        assert!(!same(b"/a/x", b"/b/y"), "two servers");
        assert!(!same(b"/a/x", b"/l/y"), "remote and local");
        assert!(same(b"/l/x", b"/usr/y"), "local paths: the kernel decides");
    }

    #[test]
    fn longest_prefix_wins() {
        let mut t = MountTable::new();
        t.add(b"/data", Target::local("/tmp/d"));
        t.add(b"/data/special", Target::local("/srv/s"));
        assert_eq!(local(t.map(b"/data/x")), b"/tmp/d/x");
        assert_eq!(local(t.map(b"/data/special/y")), b"/srv/s/y");
        assert_eq!(local(t.map(b"/data")), b"/tmp/d");
        assert_eq!(local(t.map(b"/database")), b"/database");
    }

    #[test]
    fn root_can_be_remapped_and_files_mounted() {
        let mut t = MountTable::new();
        t.add(b"/", Target::local("/chroot"));
        t.add(b"/etc/motd", Target::local("/tmp/motd"));
        assert_eq!(local(t.map(b"/bin/sh")), b"/chroot/bin/sh");
        assert_eq!(local(t.map(b"/")), b"/chroot");
        assert_eq!(local(t.map(b"/etc/motd")), b"/tmp/motd");
        assert_eq!(t.reverse(b"/chroot/usr"), b"/usr");
        assert_eq!(t.reverse(b"/tmp/motd"), b"/etc/motd");
    }

    #[test]
    fn deny_and_enoent_targets() {
        let mut t = MountTable::new();
        t.add(b"/secret", Target::Deny);
        t.add(b"/gone", Target::Enoent);
        assert!(matches!(t.map(b"/secret/k"), Mapped::Deny));
        assert!(matches!(t.map(b"/gone"), Mapped::Enoent));
        assert!(t.covers(b"/gone/x") && !t.covers(b"/gonex"));
    }

    #[test]
    fn reverse_maps_into_mounts() {
        let mut t = MountTable::new();
        t.add(b"/data", Target::local("/tmp/d"));
        assert_eq!(t.reverse(b"/tmp/d/sub"), b"/data/sub");
        assert_eq!(t.reverse(b"/usr/bin"), b"/usr/bin");
    }
}
