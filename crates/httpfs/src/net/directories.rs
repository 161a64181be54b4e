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
use roost_vfs::Errno;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

/// The largest index or GROW-FS listing fetched.
const INDEX_LIMIT: u64 = 256 << 20;

/// What is known of a directory, since when, and how to ask whether its index changed.
pub(super) struct Dir {
    known: Known,
    at: Instant,
    validators: Option<Validators>,
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

    /// What is known of directory `dir` on `authority`: asked again once the TTL is over
    /// (by the route in use or, if later, `from`), conditionally when its index came with
    /// validators.
    pub(super) fn directory(
        &self,
        authority: &str,
        dir: &[u8],
        from: usize,
    ) -> Result<Known, Errno> {
        let key = (authority.to_string(), dir.to_vec());
        let before = {
            let dirs = self.dirs.lock().expect("dirs lock");
            match dirs.get(&key) {
                Some(d) if d.at.elapsed() < self.options.ttl => return Ok(d.known.clone()),
                Some(Dir {
                    known,
                    validators: Some(v),
                    ..
                }) => Some((v.clone(), known.clone())),
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
                Some(r) if r.age < self.options.ttl => {
                    let at = Instant::now()
                        .checked_sub(r.age)
                        .unwrap_or_else(Instant::now);
                    self.hold(key, r.known.clone(), at, r.validators);
                    return Ok(r.known);
                }
                Some(r) => r.validators.map(|v| (v, r.known)),
                None => None,
            },
        };
        let (known, validators) = self.load_directory(authority, dir, from, before)?;
        self.hold(key, known.clone(), Instant::now(), validators);
        Ok(known)
    }

    /// Holds in memory what is known of a directory, known current `at`.
    fn hold(
        &self,
        key: (String, Vec<u8>),
        known: Known,
        at: Instant,
        validators: Option<Validators>,
    ) {
        let mut dirs = self.dirs.lock().expect("dirs lock");
        if dirs.len() > 1 << 16 {
            dirs.clear();
        }
        dirs.insert(
            key,
            Dir {
                known,
                at,
                validators,
            },
        );
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
        if d.at.elapsed() >= self.options.ttl {
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
    /// `before`'s validators, keeping `before`'s listing when it is unchanged), else a
    /// `.growfsdir` rooted there. Returns it with the validators of its index.
    fn load_directory(
        &self,
        authority: &str,
        dir: &[u8],
        from: usize,
        before: Option<(Validators, Known)>,
    ) -> Result<(Known, Option<Validators>), Errno> {
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
                    Some(entries) => Ok((
                        Known::Indexed(Arc::new(Listing::new(entries.clone()))),
                        None,
                    )),
                    None => Err(libc::ENOENT),
                };
            }
        }
        let url = self.url(authority, &crate::join(dir, INDEX_NAME.as_bytes()));
        match self.fetch_index(authority, dir, from, before.as_ref().map(|b| &b.0))? {
            (Got::Unchanged, _) => {
                let (validators, known) = before.expect("asked with validators");
                self.note_confirmed(authority, dir);
                return Ok((known, Some(validators)));
            }
            (
                Got::Text {
                    text, validators, ..
                },
                sig,
            ) => {
                return match crate::index::parse(&text) {
                    Ok(entries) => {
                        let known = Known::Indexed(Arc::new(Listing::new(entries)));
                        let note = Note {
                            text,
                            sig,
                            validators,
                        };
                        self.note(authority, dir, &note);
                        Ok((known, note.validators))
                    }
                    Err(e) => {
                        eprintln!("roost: {url}: malformed index: {e}");
                        Err(libc::EIO)
                    }
                };
            }
            (Got::Absent, _) => {}
        }
        Ok(match self.load_tree(authority, dir, from, None)? {
            Some(tree) => {
                let entries = tree.dirs.get(&b"/"[..]).cloned().unwrap_or_default();
                (Known::Indexed(Arc::new(Listing::new(entries))), None)
            }
            None => (Known::Unindexed, None),
        })
    }

    /// `dir`'s `.roostindex`, asked for unless it is still what `unless` describes; with
    /// pinned keys, only with a signature that one of them verifies for `dir` (fetched by
    /// the same route, and returned with the index; an unchanged index keeps the verdict
    /// its signature had). A wrong or missing signature a proxy gave is asked for again
    /// through the next proxy, then from the origin; the origin's refuses the directory
    /// (EIO, said once).
    fn fetch_index(
        &self,
        authority: &str,
        dir: &[u8],
        mut from: usize,
        unless: Option<&Validators>,
    ) -> Result<(Got, Option<Vec<u8>>), Errno> {
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
            let why = match sign::check(sig.as_deref(), text, dir, keys) {
                Ok(()) => return Ok((got, sig)),
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
