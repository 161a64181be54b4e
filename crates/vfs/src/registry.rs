//! The remote drivers of a run, by scheme. `SCHEME://HOST[:PORT]/PATH` and
//! `/SCHEME/HOST[:PORT]/PATH` in a mount list name a file of the driver registered as
//! SCHEME (the driver itself says what follows the scheme may be:
//! [`Driver::mount_target`]), and `/SCHEME` shows every server of it (`roost run` mounts
//! it unless a mapping names it). `roost run` fills a registry from its list of driver
//! factories; the mount-list parser and the end of the run go through it, so neither
//! names a protocol.

use crate::mount::Target;
use crate::Driver;
use std::sync::Arc;

/// A remote driver under its scheme.
pub struct Scheme {
    /// `chirp`, `http`: what mount targets name it by.
    pub name: &'static str,
    pub driver: Arc<dyn Driver>,
    /// How a target that names no mode uses its files: in place (direct) or through
    /// local copies (see `docs/mount-list.md`, "Consistency").
    pub direct: bool,
}

/// The remote drivers of a run, by scheme.
#[derive(Default)]
pub struct Registry {
    schemes: Vec<Scheme>,
}

impl Registry {
    /// No driver: every mount target is local (or DENY, ENOENT).
    pub const fn new() -> Registry {
        Registry {
            schemes: Vec::new(),
        }
    }

    /// Registers `driver` as `name`; a later one of the same name replaces it.
    pub fn add(&mut self, name: &'static str, driver: Arc<dyn Driver>, direct: bool) {
        self.schemes.retain(|s| s.name != name);
        self.schemes.push(Scheme {
            name,
            driver,
            direct,
        });
    }

    /// The schemes, in the order they were registered.
    pub fn iter(&self) -> impl Iterator<Item = &Scheme> {
        self.schemes.iter()
    }

    /// The target a mount list's `SCHEME://REST` or `/SCHEME/REST` names; `None` when
    /// `physical` names no registered scheme (a local path).
    pub fn target(&self, physical: &str) -> Option<Result<Target, String>> {
        self.schemes.iter().find_map(|scheme| {
            let name = scheme.name;
            let rest = physical
                .strip_prefix(name)
                .and_then(|r| r.strip_prefix("://"))
                .or_else(|| {
                    physical
                        .strip_prefix('/')?
                        .strip_prefix(name)?
                        .strip_prefix('/')
                })?;
            Some(match scheme.driver.mount_target(rest, scheme.direct) {
                Some((path, direct)) => {
                    Ok(Target::remote(Arc::clone(&scheme.driver), path, direct))
                }
                None => Err(format!("{physical}: expected {name}://HOST[:PORT]/PATH")),
            })
        })
    }

    /// Has every driver make the changes it accepted visible to other clients.
    pub fn flush(&self) {
        for scheme in &self.schemes {
            scheme.driver.flush();
        }
    }

    /// Closes every driver (the run is over).
    pub fn close(&self) {
        for scheme in &self.schemes {
            scheme.driver.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Errno;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A driver whose targets are `NAME/PATH` with a non-empty NAME, and that counts
    /// its closes.
    #[derive(Default)]
    struct Shelf(AtomicUsize);
    impl Driver for Shelf {
        fn name(&self) -> &'static str {
            "shelf"
        }
        fn mount_target(&self, rest: &str, direct: bool) -> Option<(Vec<u8>, bool)> {
            let name = rest.split('/').next()?;
            (!name.is_empty()).then(|| (format!("/{rest}").into_bytes(), direct))
        }
        fn close(&self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
        fn stat(&self, _: &[u8]) -> Result<crate::Stat, Errno> {
            Err(libc::ENOENT)
        }
    }

    #[test]
    fn a_scheme_names_its_drivers_targets_in_both_spellings() {
        let shelf = Arc::new(Shelf::default());
        let mut drivers = Registry::new();
        drivers.add("shelf", shelf.clone(), false);
        let shown = |p: &str| drivers.target(p).map(|t| t.map(|t| format!("{t:?}")));
        assert_eq!(shown("shelf://a/b"), Some(Ok("shelf:/a/b".into())));
        assert_eq!(shown("/shelf/a/b/"), Some(Ok("shelf:/a/b".into())));
        assert_eq!(
            shown("shelf:///b"),
            Some(Err("shelf:///b: expected shelf://HOST[:PORT]/PATH".into()))
        );
        // Not this scheme: a local path, or another scheme's name that merely starts alike.
        for local in ["/shelves/a", "/shelf", "shelfx://a", "/tmp/shelf/a", "rel"] {
            assert!(shown(local).is_none(), "{local}");
        }
        drivers.close();
        assert_eq!(shelf.0.load(Ordering::Relaxed), 1);
        assert!(Registry::new().target("/shelf/a/b").is_none());
    }
}
