//! What the driver knows of directories: each directory's `.roostindex` (with its
//! signature when keys are pinned) or the GROW-FS tree that holds it, fetched when first
//! needed and kept in memory for the TTL; forgotten when a file's content shows the index
//! may be out of date.

use super::{Grown, HttpNet, Known};
use crate::client::{Body, Failure};
use crate::growfs;
use crate::index::INDEX_NAME;
use crate::listing::Listing;
use crate::sign;
use roost_vfs::Errno;
use std::sync::Arc;
use std::time::Instant;

/// The largest index or GROW-FS listing fetched.
const INDEX_LIMIT: u64 = 256 << 20;

impl HttpNet {
    /// A small file's content (an index) and the route that gave it, `None` when the
    /// server has none there; one cut short through a proxy is asked for again by the
    /// next route.
    fn get_small(
        &self,
        authority: &str,
        mut from: usize,
        url: &str,
    ) -> Result<Option<(Vec<u8>, usize)>, Errno> {
        loop {
            let answer = match self.request(authority, from, "GET", url) {
                Ok(a) if a.status == 200 => a,
                Ok(_) => return Ok(None),
                Err(Failure::Status(s)) if (400..500).contains(&s) => return Ok(None),
                Err(e) => return Err(e.errno()),
            };
            let route = answer.route;
            match answer.body(INDEX_LIMIT) {
                Ok(body) => {
                    if self.options.verbose {
                        eprintln!("roost: fetched {url}{}", self.by(route));
                    }
                    return Ok(Some((body, route)));
                }
                Err(Body::Cut(e)) if self.client.proxy(route).is_some() => {
                    from = self.client.cut(route, &e).unwrap_or(route);
                }
                Err(e) => {
                    eprintln!("roost: {url}: {e}");
                    return Err(libc::EIO);
                }
            }
        }
    }

    /// What is known of directory `dir` on `authority`: asked again once the TTL is over
    /// (by the route in use or, if later, `from`).
    pub(super) fn directory(
        &self,
        authority: &str,
        dir: &[u8],
        from: usize,
    ) -> Result<Known, Errno> {
        let key = (authority.to_string(), dir.to_vec());
        if let Some((known, at)) = self.dirs.lock().expect("dirs lock").get(&key) {
            if at.elapsed() < self.options.ttl {
                return Ok(known.clone());
            }
        }
        let known = self.load_directory(authority, dir, from)?;
        let mut dirs = self.dirs.lock().expect("dirs lock");
        if dirs.len() > 1 << 16 {
            dirs.clear();
        }
        dirs.insert(key, (known.clone(), Instant::now()));
        Ok(known)
    }

    /// Fetches what is known of `dir`: from the GROW-FS tree that holds it (fetched again
    /// once the TTL is over), else its `.roostindex`, else a `.growfsdir` rooted there.
    fn load_directory(&self, authority: &str, dir: &[u8], from: usize) -> Result<Known, Errno> {
        if let Some((root, tree, fresh)) = self.tree_holding(authority, dir) {
            let tree = if fresh {
                Some(tree)
            } else {
                self.load_tree(authority, &root, from)?
            };
            if let Some(tree) = tree {
                let below = roost_vfs::path::strip_prefix(dir, &root).unwrap_or(b"");
                let rel = if below.is_empty() { &b"/"[..] } else { below };
                return match tree.dirs.get(rel) {
                    Some(entries) => Ok(Known::Indexed(Arc::new(Listing::new(entries.clone())))),
                    None => Err(libc::ENOENT),
                };
            }
        }
        if let Some((text, url)) = self.fetch_index(authority, dir, from)? {
            return match crate::index::parse(&text) {
                Ok(entries) => Ok(Known::Indexed(Arc::new(Listing::new(entries)))),
                Err(e) => {
                    eprintln!("roost: {url}: malformed index: {e}");
                    Err(libc::EIO)
                }
            };
        }
        Ok(match self.load_tree(authority, dir, from)? {
            Some(tree) => {
                let entries = tree.dirs.get(&b"/"[..]).cloned().unwrap_or_default();
                Known::Indexed(Arc::new(Listing::new(entries)))
            }
            None => Known::Unindexed,
        })
    }

    /// The text of `dir`'s `.roostindex` and its URL, `None` when it has none; with pinned
    /// keys, only with a signature that one of them verifies for `dir` (fetched by the
    /// same route). A wrong or missing signature a proxy gave is asked for again through
    /// the next proxy, then from the origin; the origin's refuses the directory (EIO, said
    /// once).
    fn fetch_index(
        &self,
        authority: &str,
        dir: &[u8],
        mut from: usize,
    ) -> Result<Option<(Vec<u8>, String)>, Errno> {
        let url = self.url(authority, &crate::join(dir, INDEX_NAME.as_bytes()));
        loop {
            let Some((text, route)) = self.get_small(authority, from, &url)? else {
                return Ok(None);
            };
            let keys = &self.options.keys;
            if keys.is_empty() {
                return Ok(Some((text, url)));
            }
            let sig_url = self.url(authority, &crate::join(dir, sign::SIG_NAME.as_bytes()));
            let sig = self.get_small(authority, route, &sig_url)?;
            let why = match sign::check(sig.as_ref().map(|s| s.0.as_slice()), &text, dir, keys) {
                Ok(()) => return Ok(Some((text, url))),
                Err(why) => why,
            };
            // The later of the two routes (the route in use only grows).
            let route = sig.map_or(route, |s| s.1.max(route));
            if route < self.client.origin() {
                self.distrust(route, || {
                    format!("roost: {url}: {why}{}; fetching it again", self.by(route))
                });
                from = route + 1;
                continue;
            }
            self.say_once(format!("roost: {url}: {why}; directory refused"));
            return Err(libc::EIO);
        }
    }

    /// The GROW-FS tree loaded on `authority` that holds `dir`: its root, the tree, and
    /// whether it is within its TTL.
    fn tree_holding(
        &self,
        authority: &str,
        dir: &[u8],
    ) -> Option<(Vec<u8>, Arc<growfs::Tree>, bool)> {
        let grown = self.grown.lock().expect("grown lock");
        grown.get(authority)?.iter().find_map(|g| {
            roost_vfs::path::strip_prefix(dir, &g.root)?;
            let fresh = g.at.elapsed() < self.options.ttl;
            Some((g.root.clone(), Arc::clone(&g.tree), fresh))
        })
    }

    /// Fetches the GROW-FS tree rooted at `root` (`None` when there is none) and keeps it.
    fn load_tree(
        &self,
        authority: &str,
        root: &[u8],
        from: usize,
    ) -> Result<Option<Arc<growfs::Tree>>, Errno> {
        let url = self.url(
            authority,
            &crate::join(root, growfs::GROWFS_NAME.as_bytes()),
        );
        let text = self.get_small(authority, from, &url)?.map(|(text, _)| text);
        if text.is_some() && !self.options.keys.is_empty() {
            self.say_once(format!(
                "roost: {url}: a GROW-FS tree cannot be signed; refused (keys are pinned \
                 with --http-key: index the tree with `roost index --sign`)"
            ));
            return Err(libc::EIO);
        }
        let mut grown = self.grown.lock().expect("grown lock");
        let trees = grown.entry(authority.to_string()).or_default();
        trees.retain(|g| g.root != root);
        let Some(text) = text else {
            return Ok(None);
        };
        let tree = Arc::new(growfs::parse(&text).map_err(|e| {
            eprintln!("roost: {url}: malformed GROW-FS listing: {e}");
            libc::EIO
        })?);
        trees.push(Grown {
            root: root.to_vec(),
            tree: Arc::clone(&tree),
            at: Instant::now(),
        });
        Ok(Some(tree))
    }

    /// Forgets what is known of `dir` and what lies in it (its index will be fetched
    /// again).
    pub(super) fn forget(&self, authority: &str, dir: &[u8]) {
        self.dirs
            .lock()
            .expect("dirs lock")
            .remove(&(authority.to_string(), dir.to_vec()));
        if let Some(trees) = self.grown.lock().expect("grown lock").get_mut(authority) {
            trees.retain(|g| roost_vfs::path::strip_prefix(dir, &g.root).is_none());
        }
    }
}
