//! What the driver knows of directories: each directory's `.roostindex` (with its
//! signature when keys are pinned) or the GROW-FS tree that holds it, fetched when first
//! needed and kept in memory for the TTL; forgotten when a file's content shows the index
//! may be out of date. Once the TTL is over, an index or tree is asked for again
//! conditionally (`If-None-Match`, `If-Modified-Since`, from the answer it came in): a 304
//! keeps what was parsed, and its signature's verdict, for another TTL. An index is also
//! kept in the shared cache for later runs ([`super::notes`]), taken from there when it
//! is not in memory.

use super::notes::Note;
use super::{HttpNet, Known};
use crate::client::{Body, Failure, Validators};
use crate::growfs;
use crate::index::INDEX_NAME;
use crate::listing::Listing;
use crate::sign;
use roost_vfs::cache::Cache;
use roost_vfs::Errno;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// The largest index or GROW-FS listing fetched.
const INDEX_LIMIT: u64 = 256 << 20;

/// What is known of a directory, since when, how to ask whether its index changed, and
/// (with pinned keys) when its signature expires.
#[derive(Clone)]
pub(super) struct Dir {
    pub known: Known,
    pub at: Instant,
    pub validators: Option<Validators>,
    /// With pinned keys: when its signature expires, and its revision.
    pub expires: Option<i64>,
    pub revision: Option<u64>,
}

impl Dir {
    /// Known now, without validators or a signature (a GROW-FS tree's directory, a
    /// directory without an index).
    pub(super) fn plain(known: Known) -> Dir {
        Dir {
            known,
            at: Instant::now(),
            validators: None,
            expires: None,
            revision: None,
        }
    }

    /// Whether its signature has expired (then nothing of it is used, not even to ask
    /// conditionally: the signature must be fetched again).
    fn expired(&self) -> bool {
        self.expires.is_some_and(|e| e <= sign::now())
    }
}

/// A GROW-FS tree loaded from `ROOT/.growfsdir`, with when, and how to ask whether it
/// changed.
#[derive(Clone)]
pub(super) struct Grown {
    root: Vec<u8>,
    tree: Arc<growfs::Tree>,
    at: Instant,
    validators: Option<Validators>,
}

/// A signature that verified an index: its text, its expiry and its revision.
struct Verified {
    text: Vec<u8>,
    expires: i64,
    revision: u64,
}

/// What a GET of an index (or a GROW-FS listing, or a signature) found.
enum Got {
    /// The server has none there.
    Absent,
    /// Unchanged since the answer the validators sent came with (304).
    Unchanged,
    /// Its content, the route that gave it, and how to ask for it again.
    Text {
        text: Vec<u8>,
        route: usize,
        validators: Option<Validators>,
    },
}

impl HttpNet {
    /// A small file's content (an index), asked for unless it is still what `unless`
    /// describes; one cut short through a proxy is asked for again by the next route.
    fn get_small(
        &self,
        authority: &str,
        mut from: usize,
        url: &str,
        unless: Option<&Validators>,
    ) -> Result<Got, Errno> {
        loop {
            let asked = match unless {
                Some(v) => self.noted(authority, url, || self.client.get_unless(from, url, v)),
                None => self.request(authority, from, "GET", url),
            };
            let answer = match asked {
                Ok(a) if a.status == 304 && unless.is_some() => {
                    let route = a.route;
                    // An empty body, read so that the connection goes back to the pool.
                    let _ = a.body(0);
                    self.unchanged.fetch_add(1, Ordering::Relaxed);
                    if self.options.verbose {
                        eprintln!("roost: {url} unchanged (304){}", self.by(route));
                    }
                    return Ok(Got::Unchanged);
                }
                Ok(a) if a.status == 200 => a,
                Ok(_) => return Ok(Got::Absent),
                Err(Failure::Status(s)) if (400..500).contains(&s) => return Ok(Got::Absent),
                Err(e) => return Err(e.errno()),
            };
            let route = answer.route;
            let validators = answer.validators();
            match answer.body(INDEX_LIMIT) {
                Ok(text) => {
                    if self.options.verbose {
                        eprintln!("roost: fetched {url}{}", self.by(route));
                    }
                    return Ok(Got::Text {
                        text,
                        route,
                        validators,
                    });
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

    /// What is known of directory `dir` on `authority`: from memory, else from the index
    /// an earlier run kept ([`super::notes`]), while the TTL lasts and its signature (with
    /// pinned keys) has not expired; asked again after that (by the route in use or, if
    /// later, `from`), conditionally when its index came with validators.
    pub(super) fn directory(
        &self,
        authority: &str,
        dir: &[u8],
        from: usize,
    ) -> Result<Known, Errno> {
        let key = (authority.to_string(), dir.to_vec());
        let fresh = |d: &Dir| d.at.elapsed() < self.options.ttl;
        let before = {
            let dirs = self.dirs.lock().expect("dirs lock");
            match dirs.get(&key).filter(|d| !d.expired()) {
                Some(d) if fresh(d) => return Ok(d.known.clone()),
                Some(d) if d.validators.is_some() => Some(d.clone()),
                _ => {
                    if let Some(e) = self.unlisted(&dirs, authority, dir) {
                        return Err(e);
                    }
                    None
                }
            }
        };
        let before = match before {
            Some(before) => Some(before),
            None => match self.recall(authority, dir) {
                Some((d, age)) if age < self.options.ttl => {
                    self.hold(key, d.clone());
                    return Ok(d.known);
                }
                Some((d, _)) => d.validators.is_some().then_some(d),
                None => None,
            },
        };
        let loaded = self.load_directory(authority, dir, from, before)?;
        let known = loaded.known.clone();
        self.hold(key, loaded);
        Ok(known)
    }

    /// Holds in memory what is known of a directory.
    fn hold(&self, key: (String, Vec<u8>), d: Dir) {
        let mut dirs = self.dirs.lock().expect("dirs lock");
        if dirs.len() > 1 << 16 {
            dirs.clear();
        }
        dirs.insert(key, d);
    }

    /// The listing of `dir` as last fetched, whatever its age (no request).
    pub(super) fn listing_in_memory(&self, authority: &str, dir: &[u8]) -> Option<Arc<Listing>> {
        let dirs = self.dirs.lock().expect("dirs lock");
        match &dirs.get(&(authority.to_string(), dir.to_vec()))?.known {
            Known::Indexed(listing) => Some(Arc::clone(listing)),
            Known::Unindexed => None,
        }
    }

    /// ENOENT when the index of `dir`'s parent (in `dirs`, within its TTL) does not list
    /// it, ENOTDIR when it lists it as a regular file: no request is made for what lies
    /// below a directory the index says is not there (Python looks for `__pycache__/M.pyc`
    /// beside every module). `None` when the parent is not known so, or lists `dir` as a
    /// directory or a symlink.
    fn unlisted(
        &self,
        dirs: &std::collections::HashMap<(String, Vec<u8>), Dir>,
        authority: &str,
        dir: &[u8],
    ) -> Option<Errno> {
        if dir == b"/" {
            return None;
        }
        let parent = roost_vfs::path::parent(dir);
        let name = dir.rsplit(|&b| b == b'/').next().unwrap_or(b"");
        let d = dirs.get(&(authority.to_string(), parent.to_vec()))?;
        let Known::Indexed(listing) = &d.known else {
            return None;
        };
        if d.at.elapsed() >= self.options.ttl || d.expired() {
            return None;
        }
        match listing.get(name).map(|e| e.kind) {
            None => Some(libc::ENOENT),
            Some(crate::index::Kind::File) => Some(libc::ENOTDIR),
            Some(_) => None,
        }
    }

    /// Fetches what is known of `dir`: from the GROW-FS tree that holds it (fetched again,
    /// conditionally, once the TTL is over), else its `.roostindex` (conditionally on
    /// `before`'s validators, keeping `before` when it is unchanged), else a `.growfsdir`
    /// rooted there. A fetched index is kept for later runs.
    fn load_directory(
        &self,
        authority: &str,
        dir: &[u8],
        from: usize,
        before: Option<Dir>,
    ) -> Result<Dir, Errno> {
        if let Some((held, fresh)) = self.tree_holding(authority, dir) {
            let tree = if fresh {
                Some(Arc::clone(&held.tree))
            } else {
                self.load_tree(authority, &held.root, from, Some(&held))?
            };
            if let Some(tree) = tree {
                let below = roost_vfs::path::strip_prefix(dir, &held.root).unwrap_or(b"");
                let rel = if below.is_empty() { &b"/"[..] } else { below };
                return match tree.dirs.get(rel) {
                    Some(entries) => Ok(Dir::plain(Known::Indexed(Arc::new(Listing::new(
                        entries.clone(),
                    ))))),
                    None => Err(libc::ENOENT),
                };
            }
        }
        let url = self.url(authority, &crate::join(dir, INDEX_NAME.as_bytes()));
        // An index kept at a revision older than one since seen (by another run) is asked
        // for whole: a 304 would keep it.
        let outdone = before
            .as_ref()
            .and_then(|b| b.revision)
            .is_some_and(|r| r < self.cache.highest(&self.revision_key(authority, dir)));
        let before = before.filter(|_| !outdone);
        let unless = before.as_ref().and_then(|b| b.validators.as_ref());
        match self.fetch_index(authority, dir, from, unless)? {
            (Got::Unchanged, _) => {
                let before = before.expect("asked with validators");
                if let Some(v) = &before.validators {
                    self.note_confirmed(authority, dir, v);
                }
                return Ok(Dir {
                    at: Instant::now(),
                    ..before
                });
            }
            (
                Got::Text {
                    text, validators, ..
                },
                sig,
            ) => {
                return match crate::index::parse(&text) {
                    Ok(entries) => {
                        let (sig, expires, revision) = match sig {
                            Some(v) => (Some(v.text), Some(v.expires), Some(v.revision)),
                            None => (None, None, None),
                        };
                        let note = Note {
                            text,
                            sig,
                            validators,
                        };
                        self.note(authority, dir, &note);
                        Ok(Dir {
                            known: Known::Indexed(Arc::new(Listing::new(entries))),
                            at: Instant::now(),
                            validators: note.validators,
                            expires,
                            revision,
                        })
                    }
                    Err(e) => {
                        eprintln!("roost: {url}: malformed index: {e}");
                        Err(libc::EIO)
                    }
                };
            }
            (Got::Absent, _) => {}
        }
        Ok(Dir::plain(
            match self.load_tree(authority, dir, from, None)? {
                Some(tree) => {
                    let entries = tree.dirs.get(&b"/"[..]).cloned().unwrap_or_default();
                    Known::Indexed(Arc::new(Listing::new(entries)))
                }
                None => {
                    self.note_unindexed(authority, dir);
                    Known::Unindexed
                }
            },
        ))
    }

    /// `dir`'s `.roostindex`, asked for unless it is still what `unless` describes; with
    /// pinned keys, only with a signature that one of them verifies for `dir`, unexpired,
    /// at a revision no lower than the highest seen for `dir` (fetched by the same route,
    /// and returned with the index, with its expiry; an unchanged index keeps the verdict
    /// its signature had). A wrong, missing or older signature a proxy gave is asked for
    /// again through the next proxy, then from the origin; the origin's refuses the
    /// directory (EIO, said once).
    fn fetch_index(
        &self,
        authority: &str,
        dir: &[u8],
        mut from: usize,
        unless: Option<&Validators>,
    ) -> Result<(Got, Option<Verified>), Errno> {
        let url = self.url(authority, &crate::join(dir, INDEX_NAME.as_bytes()));
        loop {
            let got = self.get_small(authority, from, &url, unless)?;
            let Got::Text { text, route, .. } = &got else {
                return Ok((got, None));
            };
            let keys = &self.options.keys;
            if keys.is_empty() {
                return Ok((got, None));
            }
            let sig_url = self.url(authority, &crate::join(dir, sign::SIG_NAME.as_bytes()));
            let (sig, sig_route) = match self.get_small(authority, *route, &sig_url, None)? {
                Got::Text { text, route, .. } => (Some(text), route),
                _ => (None, *route),
            };
            let why = match sign::check(sig.as_deref(), text, dir, keys, sign::now()) {
                Ok(signed) => match self.rollback(authority, dir, &signed) {
                    None => {
                        let verified = sig.map(|text| Verified {
                            text,
                            expires: signed.expires,
                            revision: signed.revision,
                        });
                        return Ok((got, verified));
                    }
                    Some(why) => why,
                },
                Err(why) => why,
            };
            // The later of the two routes (the route in use only grows).
            let route = sig_route.max(*route);
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

    /// The cache key of the highest revision seen for `dir` on `authority`.
    fn revision_key(&self, authority: &str, dir: &[u8]) -> String {
        Cache::key(&format!("revision+{}://{authority}", self.scheme), dir)
    }

    /// `None` when the revision of `signed` (verified for `dir` on `authority`) is no lower
    /// than the highest one seen for `dir`, by this run or an earlier one (it becomes the
    /// highest); else why it is refused: an older signed index served again in place of a
    /// newer one.
    pub(super) fn rollback(
        &self,
        authority: &str,
        dir: &[u8],
        signed: &sign::Signature,
    ) -> Option<String> {
        let key = self.revision_key(authority, dir);
        let seen = self.cache.highest(&key);
        if signed.revision < seen {
            return Some(format!(
                "revision {} of the signed index is older than revision {seen} seen before \
                 (an older tree served again; if its publisher put it back on purpose, they \
                 sign it again with roost index --sign --resign)",
                signed.revision
            ));
        }
        self.cache.raise(&key, signed.revision);
        None
    }

    /// The GROW-FS tree loaded on `authority` that holds `dir`, and whether it is within
    /// its TTL.
    fn tree_holding(&self, authority: &str, dir: &[u8]) -> Option<(Grown, bool)> {
        let grown = self.grown.lock().expect("grown lock");
        grown.get(authority)?.iter().find_map(|g| {
            roost_vfs::path::strip_prefix(dir, &g.root)?;
            Some((g.clone(), g.at.elapsed() < self.options.ttl))
        })
    }

    /// Fetches the GROW-FS tree rooted at `root` (`None` when there is none) and keeps it;
    /// `held` (the tree loaded before) is kept for another TTL if its listing is unchanged.
    fn load_tree(
        &self,
        authority: &str,
        root: &[u8],
        from: usize,
        held: Option<&Grown>,
    ) -> Result<Option<Arc<growfs::Tree>>, Errno> {
        let url = self.url(
            authority,
            &crate::join(root, growfs::GROWFS_NAME.as_bytes()),
        );
        let unless = held.and_then(|h| h.validators.as_ref());
        let got = self.get_small(authority, from, &url, unless)?;
        if !matches!(got, Got::Absent) && !self.options.keys.is_empty() {
            self.say_once(format!(
                "roost: {url}: a GROW-FS tree cannot be signed; refused (keys are pinned \
                 with --http-key: index the tree with `roost index --sign`)"
            ));
            return Err(libc::EIO);
        }
        let mut grown = self.grown.lock().expect("grown lock");
        let trees = grown.entry(authority.to_string()).or_default();
        trees.retain(|g| g.root != root);
        let (text, validators) = match got {
            Got::Absent => return Ok(None),
            Got::Unchanged => {
                let held = held.expect("asked with validators");
                trees.push(Grown {
                    at: Instant::now(),
                    ..held.clone()
                });
                return Ok(Some(Arc::clone(&held.tree)));
            }
            Got::Text {
                text, validators, ..
            } => (text, validators),
        };
        let tree = Arc::new(growfs::parse(&text).map_err(|e| {
            eprintln!("roost: {url}: malformed GROW-FS listing: {e}");
            libc::EIO
        })?);
        trees.push(Grown {
            root: root.to_vec(),
            tree: Arc::clone(&tree),
            at: Instant::now(),
            validators,
        });
        Ok(Some(tree))
    }

    /// Forgets what is known of `dir` and what lies in it (its index will be fetched
    /// again, whole).
    pub(super) fn forget(&self, authority: &str, dir: &[u8]) {
        self.dirs
            .lock()
            .expect("dirs lock")
            .remove(&(authority.to_string(), dir.to_vec()));
        self.note_dropped(authority, dir);
        if let Some(trees) = self.grown.lock().expect("grown lock").get_mut(authority) {
            trees.retain(|g| roost_vfs::path::strip_prefix(dir, &g.root).is_none());
        }
    }
}
