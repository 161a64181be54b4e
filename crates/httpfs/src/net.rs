//! The http driver: `/http/HOST[:PORT]/PATH` (driver paths `/HOST[:PORT]/PATH`, as Chirp's)
//! on any web server, read-only. Directory types, attributes and listings come only from
//! the index files (`.roostindex` in each directory, or a GROW-FS `.growfsdir` over a
//! whole tree), kept in memory for a TTL; never from a server's HTML listing. Files are
//! fetched whole into the shared cache, keyed by server and path, versioned by the index's
//! size, time and hash, and checked against the index's hash while they arrive: a file
//! that does not match is never shown (retried with a fresh index, then EIO and a line on
//! stderr). A large file whose index entry has block hashes is fetched as parallel Range
//! requests, each block checked as it arrives ([`ranged`]). Without an index a path that
//! answers 200 is a regular file (size from Content-Length) and a directory cannot be
//! listed. Every change answers EROFS.
//!
//! Requests go through the proxies of [`HttpOptions::proxies`] when there are any (see
//! [`crate::client`]). A file whose content does not match, fetched through a proxy, is
//! fetched again through the next and then from the origin; only the origin's copy failing
//! as well (with its index fetched again from the origin) refuses it.
//!
//! With pinned keys ([`HttpOptions::keys`]) every index must come with a signature one of
//! them makes ([`crate::sign`]); a directory whose signature is missing or wrong is not
//! served (one a proxy gave is fetched again as a file's content is), nor are GROW-FS
//! trees or files that no index lists.
//!
//! Indexes are kept in memory for the TTL, then asked for again conditionally: an
//! unchanged one (304) is kept as parsed ([`directories`]). They are kept in the shared
//! cache too, for later runs within the same TTL ([`notes`]). When an open misses the cache,
//! the other small files of its directory are fetched in the background meanwhile
//! ([`prefetch`]).

use crate::blocks::Blocks;
use crate::client::{self, Client, Failure, ProxyList};
use crate::growfs;
use crate::index::{Digest, Entry, Kind, INDEX_NAME};
use crate::listing::Listing;
use crate::sign::PublicKey;
use roost_vfs::cache::shown::{Attrs, Shown};
use roost_vfs::cache::{Cache, Version};
use roost_vfs::{Driver, Errno, Intent, OpenFile, OpenMode, ReadAt, Stat, StatFs};
use sha2::Digest as _;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

mod directories;
mod notes;
mod partial;
mod prefetch;
mod ranged;

/// How many times a file whose content does not match its index is fetched from the
/// origin (each time after the first with its index fetched again from the origin).
const ATTEMPTS: u32 = 3;
/// A request by whatever route is in use (a proxy, or the origin once they failed).
const ANY: usize = 0;

/// How the driver reaches servers.
#[derive(Clone, Debug)]
pub struct HttpOptions {
    /// How long an index (and what a path without one answered) is trusted.
    pub ttl: Duration,
    /// Connect and read timeout of each request.
    pub timeout: Duration,
    /// Say fetches of indexes and files on stderr.
    pub verbose: bool,
    /// The proxies to go through (none: to the origin directly).
    pub proxies: ProxyList,
    /// The pinned public keys: when there are any, an index is used only with a signature
    /// one of them verifies, and nothing without an index is served.
    pub keys: Vec<PublicKey>,
    /// Files of at least this many bytes whose index entry has block hashes are fetched in
    /// blocks.
    pub block_threshold: u64,
    /// How many blocks of one file are fetched at once (connections per file).
    pub streams: usize,
    /// Take any certificate from https servers (`--http-insecure`).
    pub insecure: bool,
    /// When an open misses the cache, the other files of its directory are fetched in the
    /// background, up to this many bytes a directory (0: never; see [`prefetch`]).
    pub prefetch: u64,
    /// The largest file prefetched.
    pub prefetch_max: u64,
}

/// The default of [`HttpOptions::prefetch`]: bytes prefetched per directory.
pub const DEFAULT_PREFETCH: u64 = 16 << 20;
/// The default of [`HttpOptions::prefetch_max`].
pub const DEFAULT_PREFETCH_MAX: u64 = 1 << 20;

impl Default for HttpOptions {
    fn default() -> HttpOptions {
        HttpOptions {
            ttl: Duration::from_secs(300),
            timeout: Duration::from_secs(30),
            verbose: false,
            proxies: ProxyList::default(),
            keys: Vec::new(),
            block_threshold: crate::blocks::DEFAULT_THRESHOLD,
            streams: 4,
            insecure: false,
            prefetch: DEFAULT_PREFETCH,
            prefetch_max: DEFAULT_PREFETCH_MAX,
        }
    }
}

/// What is known of a directory: its listing, or that it has no index.
#[derive(Clone)]
enum Known {
    Indexed(Arc<Listing>),
    Unindexed,
}

/// What a lookup found: the attributes, and for a regular file the version of its
/// content (for the cache) and the hashes that vouch for it (none without an index).
#[derive(Clone)]
struct Found {
    stat: Stat,
    version: Option<Version>,
    digest: Option<Digest>,
    blocks: Option<Arc<Blocks>>,
}

impl Found {
    /// Attributes only (a directory, a symlink).
    fn plain(stat: Stat) -> Found {
        Found {
            stat,
            version: None,
            digest: None,
            blocks: None,
        }
    }
}

/// What vouches for a file's content: the hash of the whole and, for a file to fetch in
/// blocks, its block hashes and its size.
#[derive(Clone, Copy)]
struct Vouch<'a> {
    digest: Option<Digest>,
    blocks: Option<(&'a Blocks, u64)>,
}

/// Where a copy of a file came from, and what of it did not match its index.
struct Copy {
    route: usize,
    mismatch: Option<String>,
    /// A prefetch's: given up once the run is over.
    background: bool,
}

/// What a path without an index in its directory answered, with when.
type Probed = (Result<Found, Errno>, Instant);

/// Answers by (server, path on it).
type ByPath<T> = Mutex<HashMap<(String, Vec<u8>), T>>;

/// Every web server of one scheme, as one driver.
pub struct HttpNet {
    /// This driver, for the files it opens in place.
    me: Weak<HttpNet>,
    scheme: &'static str,
    cache: Arc<Cache>,
    client: Client,
    options: HttpOptions,
    /// The servers this run has used, as the entries of `/http`.
    servers: Mutex<BTreeSet<String>>,
    /// Directories by (server, path).
    dirs: ByPath<directories::Dir>,
    probes: ByPath<Probed>,
    grown: Mutex<HashMap<String, Vec<directories::Grown>>>,
    /// The lines said once on stderr (unlistable and refused directories).
    said: Mutex<HashSet<String>>,
    /// Servers whose failure to answer was said and not yet followed by an answer.
    down: Mutex<HashSet<String>>,
    /// The proxies (routes) whose copy of a file or of an index's signature was refused,
    /// said on stderr.
    distrusted: Mutex<HashSet<usize>>,
    /// The files shown for reading, to show again at the cost of a stat.
    shown: Shown,
    uid: u32,
    gid: u32,
    /// Requests, bytes of files fetched, blocks fetched by Range requests, refused
    /// contents (and blocks), indexes found unchanged (304) and indexes taken from the
    /// cache (kept by an earlier run), for `--summary`.
    requests: AtomicU64,
    fetched: AtomicU64,
    blocks: AtomicU64,
    refused: AtomicU64,
    unchanged: AtomicU64,
    recalled: AtomicU64,
    /// Files of a directory fetched before the program opens them.
    prefetch: Arc<prefetch::Prefetch>,
}

/// The property of the kept indexes' parser ([`crate::fuzz_check::check_note_parser`]).
pub(crate) fn check_note(data: &[u8]) -> usize {
    match notes::Note::decode(data) {
        Some(note) => {
            assert_eq!(notes::Note::decode(&note.encode()).as_ref(), Some(&note));
            1
        }
        None => 0,
    }
}

/// Whether `authority` is `HOST[:PORT]` (a name, an IPv4 address or a bracketed IPv6 one).
pub fn valid_authority(authority: &str) -> bool {
    let (host, port) = match authority.strip_prefix('[') {
        Some(inner) => match inner.split_once(']') {
            Some((h, "")) => (h, None),
            Some((h, p)) => match p.strip_prefix(':') {
                Some(p) => (h, Some(p)),
                None => return false,
            },
            None => return false,
        },
        None => match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    let host_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b))
        && (authority.starts_with('[') || !host.contains(':'));
    host_ok && port.map_or(true, |p| p.parse::<u16>().is_ok_and(|p| p != 0))
}

/// `authority` as URLs spell it (`HOST[:PORT]`): `HOST+PORT`, the spelling that survives
/// colon-separated lists, becomes `HOST:PORT`; `None` for anything else.
fn colon_form(authority: &str) -> Option<String> {
    if valid_authority(authority) {
        return Some(authority.to_string());
    }
    let (host, port) = authority.rsplit_once('+')?;
    let spelt = format!("{host}:{port}");
    valid_authority(&spelt).then_some(spelt)
}

/// The version of an index entry's content, for the cache (its size, time and the first
/// 64 bits of its hash); `None` without a hash.
fn version_of(e: &Entry) -> Option<Version> {
    e.digest.map(|d| Version {
        ino: u64::from_le_bytes(d.bytes()[..8].try_into().expect("8 bytes")),
        size: e.size,
        mtime: e.mtime,
    })
}

/// A stable inode number for a path (`find` and `cp` tell files apart by it).
fn inode_of(key: &str) -> u64 {
    let h = sha2::Sha256::digest(key.as_bytes());
    u64::from_le_bytes(h[..8].try_into().expect("8 bytes")) >> 1
}

impl HttpNet {
    /// The driver of `scheme` (`http` or `https`); an error names a proxy URL that is no
    /// `http://[USER:PASSWORD@]HOST[:PORT]`.
    pub fn new(
        scheme: &'static str,
        cache: Arc<Cache>,
        options: HttpOptions,
    ) -> Result<Arc<HttpNet>, String> {
        let client = Client::new(options.timeout, options.proxies.clone(), options.insecure)?;
        let prefetch =
            prefetch::Prefetch::new(options.prefetch, options.prefetch_max, options.streams);
        Ok(Arc::new_cyclic(|me| HttpNet {
            me: me.clone(),
            scheme,
            cache,
            client,
            options,
            servers: Mutex::new(BTreeSet::new()),
            dirs: Mutex::new(HashMap::new()),
            probes: Mutex::new(HashMap::new()),
            grown: Mutex::new(HashMap::new()),
            said: Mutex::new(HashSet::new()),
            down: Mutex::new(HashSet::new()),
            distrusted: Mutex::new(HashSet::new()),
            shown: Shown::default(),
            // SAFETY: a plain query.
            uid: unsafe { libc::geteuid() },
            // SAFETY: a plain query.
            gid: unsafe { libc::getegid() },
            requests: AtomicU64::new(0),
            fetched: AtomicU64::new(0),
            blocks: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            unchanged: AtomicU64::new(0),
            recalled: AtomicU64::new(0),
            prefetch: Arc::new(prefetch),
        }))
    }

    /// The server a driver path names and the (normalized) path on it; ENOENT for a
    /// first component that is no `HOST[:PORT]`.
    fn server(&self, path: &[u8]) -> Result<(String, Vec<u8>), Errno> {
        let (authority, rest) = roost_vfs::path::split_first(path);
        let authority = std::str::from_utf8(authority).map_err(|_| libc::ENOENT)?;
        let authority = colon_form(authority).ok_or(libc::ENOENT)?;
        self.servers
            .lock()
            .expect("servers lock")
            .insert(authority.clone());
        Ok((authority, roost_vfs::path::normalize(rest)))
    }

    /// The cache's key of `path` on `authority` (scheme, server and path).
    fn cache_key(&self, authority: &str, path: &[u8]) -> String {
        Cache::key(&format!("{}://{authority}", self.scheme), path)
    }

    fn url(&self, authority: &str, path: &[u8]) -> String {
        client::url(self.scheme, authority, path)
    }

    /// A request to `authority`, by the route in use or, if later, `from`; a server that
    /// does not answer is said once (until it answers again).
    fn request(
        &self,
        authority: &str,
        from: usize,
        method: &str,
        url: &str,
    ) -> Result<client::Answer, Failure> {
        self.noted(authority, url, || self.client.request(from, method, url))
    }

    /// A GET of bytes `range` (first and last) of `url`, as [`HttpNet::request`] (see
    /// [`Client::get_range`] for the answers).
    fn get_range(
        &self,
        authority: &str,
        from: usize,
        url: &str,
        range: (u64, u64),
    ) -> Result<client::Answer, Failure> {
        self.noted(authority, url, || self.client.get_range(from, url, range))
    }

    /// Counts the request `send` makes to `authority` and says once that the server does
    /// not answer (until it answers again).
    fn noted(
        &self,
        authority: &str,
        url: &str,
        send: impl FnOnce() -> Result<client::Answer, Failure>,
    ) -> Result<client::Answer, Failure> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        roost_vfs::about_to_block();
        let answer = send();
        let mut down = self.down.lock().expect("down lock");
        match &answer {
            Err(Failure::Transport(e) | Failure::Certificate(e)) => {
                if down.insert(authority.to_string()) {
                    eprintln!("roost: {url}: {e}");
                }
            }
            // roost's requests are well formed: a 400 is a server refusing to speak with
            // it at all, as one that speaks only https answers plain http.
            Err(Failure::Status(400)) => {
                down.remove(authority);
                drop(down);
                let hint = match self.scheme {
                    "http" => format!(
                        "; a server that speaks only https answers so: try /https/{authority}"
                    ),
                    _ => String::new(),
                };
                self.say_once(format!(
                    "roost: {}://{authority}: the server answers HTTP status 400 (bad \
                     request){hint}",
                    self.scheme
                ));
            }
            _ => {
                down.remove(authority);
            }
        }
        answer
    }

    /// Says `line` on stderr unless it was said already.
    fn say_once(&self, line: String) {
        if self.said.lock().expect("said lock").insert(line.clone()) {
            eprintln!("{line}");
        }
    }

    /// How an answer came, as said after its URL: ` through proxy URL`, or nothing.
    fn by(&self, route: usize) -> String {
        self.client
            .proxy(route)
            .map(|p| format!(" through proxy {p}"))
            .unwrap_or_default()
    }

    /// Notes that the proxy of `route` gave a copy its index (or its signature) does not
    /// vouch for, saying `line` the first time for that proxy (every time with
    /// `--verbose`).
    fn distrust(&self, route: usize, line: impl FnOnce() -> String) {
        let first = self
            .distrusted
            .lock()
            .expect("distrusted lock")
            .insert(route);
        if first || self.options.verbose {
            eprintln!("{}", line());
        }
    }

    fn stat_of(&self, authority: &str, path: &[u8], e: &Entry) -> Stat {
        let blocks = match e.kind {
            Kind::Link => 0,
            _ => e.size.div_ceil(4096) as i64 * 8,
        };
        Stat {
            dev: 0x4854_5450,
            ino: inode_of(&self.url(authority, path)),
            mode: e.kind.ifmt() | e.mode,
            nlink: e.nlink.max(1),
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            size: e.size,
            blksize: 4096,
            blocks,
            atime: (e.mtime, 0),
            mtime: (e.mtime, 0),
            ctime: (e.mtime, 0),
        }
    }

    fn dir_stat(&self, authority: &str, path: &[u8]) -> Stat {
        self.stat_of(
            authority,
            path,
            &Entry {
                name: Vec::new(),
                kind: Kind::Dir,
                mode: 0o555,
                size: 4096,
                mtime: 0,
                nlink: 2,
                digest: None,
                target: None,
                blocks: None,
            },
        )
    }

    /// The index entry of `path` (not the server's root), `None` when its directory has
    /// no index.
    fn entry(&self, authority: &str, path: &[u8], from: usize) -> Result<Option<Entry>, Errno> {
        let parent = roost_vfs::path::parent(path);
        let name = path.rsplit(|&b| b == b'/').next().unwrap_or(b"");
        match self.directory(authority, parent, from)? {
            Known::Indexed(l) => l.get(name).cloned().map(Some).ok_or(libc::ENOENT),
            Known::Unindexed => Ok(None),
        }
    }

    /// The attributes of `path` without following a final symlink, and for a regular file
    /// the version of its content and the hash that vouches for it.
    fn lookup(&self, authority: &str, path: &[u8], from: usize) -> Result<Found, Errno> {
        if path == b"/" {
            return self.probe(authority, path, from);
        }
        match self.entry(authority, path, from)? {
            Some(e) => Ok(Found {
                stat: self.stat_of(authority, path, &e),
                version: version_of(&e),
                digest: e.digest,
                blocks: e.blocks,
            }),
            None => self.probe(authority, path, from),
        }
    }

    /// A path whose directory has no index: a directory if it has an index of its own or
    /// the server redirects it (to the name with a slash), a regular file if it answers
    /// 200 to HEAD (or GET). Remembered for the TTL, unless the server failed to answer.
    fn probe(&self, authority: &str, path: &[u8], from: usize) -> Result<Found, Errno> {
        let key = (authority.to_string(), path.to_vec());
        if let Some((answer, at)) = self.probes.lock().expect("probes lock").get(&key) {
            if at.elapsed() < self.options.ttl {
                return answer.clone();
            }
        }
        let dir = |stat| Ok(Found::plain(stat));
        let answer = match self.directory(authority, path, from) {
            Ok(Known::Indexed(l)) => match l.get(b".") {
                Some(itself) => dir(self.stat_of(authority, path, itself)),
                None => dir(self.dir_stat(authority, path)),
            },
            // A server's root is a directory, whatever its HEAD says.
            Ok(Known::Unindexed) if path == b"/" => dir(self.dir_stat(authority, path)),
            Err(e) if e != libc::ENOENT => Err(e),
            _ => self.head(authority, path, from),
        };
        if matches!(answer, Ok(_) | Err(libc::ENOENT) | Err(libc::EACCES)) {
            let mut probes = self.probes.lock().expect("probes lock");
            if probes.len() > 1 << 16 {
                probes.clear();
            }
            probes.insert(key, (answer.clone(), Instant::now()));
        }
        answer
    }

    /// HEAD of an unindexed path (GET where a server refuses HEAD): its attributes as a
    /// file (size from Content-Length, time from Last-Modified) or as an unlistable
    /// directory.
    fn head(&self, authority: &str, path: &[u8], from: usize) -> Result<Found, Errno> {
        let url = self.url(authority, path);
        let answer = match self.request(authority, from, "HEAD", &url) {
            Err(Failure::Status(405 | 501)) => self.request(authority, from, "GET", &url),
            other => other,
        }
        .map_err(|e| e.errno())?;
        if (300..400).contains(&answer.status) {
            return Ok(Found::plain(self.dir_stat(authority, path)));
        }
        if !self.options.keys.is_empty() {
            self.say_once(format!(
                "roost: {url}: no signed index lists it; refused (keys are pinned with \
                 --http-key)"
            ));
            return Err(libc::EIO);
        }
        let Some(size) = answer.content_length() else {
            eprintln!("roost: {url}: no Content-Length, and no index to say the size");
            return Err(libc::EIO);
        };
        let last_modified = answer.header("Last-Modified");
        let mtime = last_modified.and_then(client::http_date).unwrap_or(0);
        // Nothing vouches for the content: its version is what the server says of it.
        let tag = format!("{:?} {last_modified:?}", answer.header("ETag"));
        let entry = Entry {
            name: Vec::new(),
            kind: Kind::File,
            mode: 0o444,
            size,
            mtime,
            nlink: 1,
            digest: None,
            target: None,
            blocks: None,
        };
        Ok(Found {
            stat: self.stat_of(authority, path, &entry),
            version: Some(Version {
                ino: inode_of(&tag),
                size,
                mtime,
            }),
            digest: None,
            blocks: None,
        })
    }

    /// The entries of directory `path`, or the one-line error of an unindexed one.
    fn list(&self, authority: &str, path: &[u8]) -> Result<Vec<(Vec<u8>, u32)>, Errno> {
        match self.directory(authority, path, ANY)? {
            Known::Indexed(l) => Ok(l
                .entries()
                .iter()
                .filter(|e| e.name != b".")
                .map(|e| (e.name.clone(), e.kind.ifmt()))
                .collect()),
            Known::Unindexed => {
                self.say_once(format!(
                    "roost: {}: cannot list a directory without an index \
                     (no {INDEX_NAME} or {}; run `roost index` on the served tree)",
                    self.url(authority, path),
                    growfs::GROWFS_NAME
                ));
                Err(libc::EOPNOTSUPP)
            }
        }
    }

    /// Fetches `url` into `file` (by the route in use or, if later, `from`), checking it as
    /// it arrives against `vouch`: with block hashes, as parallel Range requests checked
    /// block by block ([`ranged`]); else (or when the server answers no ranges) whole,
    /// against the whole file's hash. An answer cut short through a proxy is asked for
    /// again by the next route. `copy` says the route that answered and what did not
    /// match.
    fn download(
        &self,
        authority: &str,
        mut from: usize,
        url: &str,
        file: &mut std::fs::File,
        vouch: Vouch,
        copy: &mut Copy,
    ) -> Result<(), Errno> {
        let digest = vouch.digest;
        let mut pending = None;
        if let Some(blocks) = vouch.blocks {
            match self.fetch_blocks((authority, url), from, file, blocks, copy)? {
                ranged::Fetched::Done => return Ok(()),
                ranged::Fetched::Whole { answer, route } => (pending, from) = (answer, route),
            }
        }
        'route: loop {
            let answer = match pending.take() {
                Some(answer) => *answer,
                None => self
                    .request(authority, from, "GET", url)
                    .map_err(|e| e.errno())?,
            };
            copy.route = answer.route;
            if answer.status != 200 {
                return Err(libc::EIO);
            }
            file.set_len(0).map_err(roost_base::errno_of)?;
            std::io::Seek::rewind(file).map_err(roost_base::errno_of)?;
            let mut sha256 = sha2::Sha256::new();
            let mut sha1 = sha1::Sha1::new();
            let mut reader = answer.response.into_reader();
            let mut buf = vec![0u8; 256 * 1024];
            loop {
                if copy.background && self.prefetch.stopping() {
                    return Err(libc::ECANCELED);
                }
                let n = match std::io::Read::read(&mut reader, &mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => match self.client.cut(copy.route, &e.to_string()) {
                        Some(next) => {
                            from = next;
                            continue 'route;
                        }
                        None => {
                            eprintln!("roost: {url}: {e}");
                            return Err(libc::EIO);
                        }
                    },
                };
                match digest {
                    Some(Digest::Sha256(_)) => sha256.update(&buf[..n]),
                    Some(Digest::Sha1(_)) => sha1.update(&buf[..n]),
                    None => {}
                }
                file.write_all(&buf[..n]).map_err(roost_base::errno_of)?;
                self.fetched.fetch_add(n as u64, Ordering::Relaxed);
            }
            let got = match digest {
                Some(Digest::Sha256(_)) => Some(crate::index::hex(&sha256.finalize())),
                Some(Digest::Sha1(_)) => Some(crate::index::hex(&sha1.finalize())),
                None => None,
            };
            return match (digest, got) {
                (Some(want), Some(got)) if want.hex() != got => {
                    copy.mismatch = Some(format!("sha {got}, the index says {}", want.hex()));
                    Err(libc::EBADMSG)
                }
                _ => Ok(()),
            };
        }
    }

    /// The local copy of the regular file `path` (driver path `full`): from the cache, or
    /// fetched and checked. A content the index does not vouch for is never shown: one a
    /// proxy gave is fetched again through the next proxy, then from the origin; one the
    /// origin gave is fetched again with the index fetched again from the origin, up to
    /// [`ATTEMPTS`] times from there, then refused.
    fn localize_file(&self, full: &[u8], authority: &str, path: &[u8]) -> Result<Vec<u8>, Errno> {
        let key = self.cache_key(authority, path);
        let url = self.url(authority, path);
        let origin = self.client.origin();
        // Where the next copy and the index come from (the origin once its copy failed).
        let (mut from, mut index_from) = (ANY, ANY);
        let (mut attempts, mut from_origin) = (0, 0);
        let why = loop {
            let found = self.lookup(authority, path, index_from)?;
            let st = found.stat;
            if st.mode & libc::S_IFMT != libc::S_IFREG {
                // The index changed meanwhile, and this is no file any more.
                return Err(libc::ESTALE);
            }
            let version = found.version.unwrap_or(Version {
                ino: 0,
                size: st.size,
                mtime: st.mtime.0,
            });
            let digest = found.digest;
            let vouch = Vouch {
                digest,
                blocks: found
                    .blocks
                    .as_deref()
                    .filter(|_| st.size >= self.options.block_threshold)
                    .map(|b| (b, st.size)),
            };
            // The version (size, time and hash) is what the cache keys a copy by.
            let attrs = Attrs {
                version,
                change: 0,
                mode: st.mode,
            };
            if attempts == 0 {
                if let Some(at) = self.shown.again(full, attrs, Cache::touch) {
                    self.cache.hit(&url);
                    return Ok(at);
                }
            }
            if attempts == 0 && digest.is_some() && !self.cache.holds(&key, version) {
                // A miss: its prefetch in progress is waited for (else it is fetched here),
                // and the other files of its directory are prefetched meanwhile.
                self.prefetch_around(authority, path, &key);
            }
            let mut copy = Copy {
                route: origin,
                mismatch: None,
                background: false,
            };
            let object = self.cache.object((&key, &url), version, |f| {
                self.download(authority, from, &url, f, vouch, &mut copy)
            });
            let wrong = match object {
                Ok(object) => {
                    let at = self.cache.show_file(full, &object, st.mode, st.mtime.0)?;
                    self.shown.note(full, attrs, &at, &object);
                    return Ok(at);
                }
                Err(libc::EBADMSG) => copy.mismatch.unwrap_or_default(),
                Err(libc::ESTALE) => {
                    let said = if digest.is_some() {
                        "the index says"
                    } else {
                        "announced"
                    };
                    format!("not the {} bytes {said}", version.size)
                }
                Err(e) => return Err(e),
            };
            let why = format!("{wrong}{}", self.by(copy.route));
            attempts += 1;
            self.refused.fetch_add(1, Ordering::Relaxed);
            if copy.route < origin {
                // A proxy's copy: the next proxy's, or the origin's, with the same index.
                // Said once a proxy (a proxy's stale copies are many after an update).
                self.distrust(copy.route, || {
                    format!(
                        "roost: {url}: content does not match its index ({why}); fetching it again"
                    )
                });
                from = copy.route + 1;
                continue;
            }
            from_origin += 1;
            if from_origin >= ATTEMPTS {
                break why;
            }
            // The origin's copy: the index may be out of date (a proxy's, or the tree
            // changed meanwhile): fetched again, from the origin.
            (from, index_from) = (origin, origin);
            self.forget(authority, roost_vfs::path::parent(path));
            self.probes
                .lock()
                .expect("probes lock")
                .remove(&(authority.to_string(), path.to_vec()));
            std::thread::sleep(Duration::from_millis(100 << from_origin));
        };
        eprintln!(
            "roost: {url}: content does not match its index ({why}); refused after {attempts} attempts"
        );
        Err(libc::EIO)
    }

    fn root_stat() -> Stat {
        Stat {
            mode: libc::S_IFDIR | 0o555,
            nlink: 2,
            blksize: 4096,
            ..Stat::default()
        }
    }

    fn servers_listed(&self) -> Vec<(Vec<u8>, u32)> {
        self.servers
            .lock()
            .expect("servers lock")
            .iter()
            .map(|s| (s.as_bytes().to_vec(), libc::S_IFDIR))
            .collect()
    }

    fn is_root(path: &[u8]) -> bool {
        roost_vfs::path::split_first(path).0.is_empty()
    }
}

impl Driver for HttpNet {
    fn name(&self) -> &'static str {
        self.scheme
    }
    fn read_only(&self) -> bool {
        true
    }
    /// `HOST[:PORT]/PATH` (or `HOST+PORT`). Files are fetched whole into the cache but
    /// for the large ones with block hashes, which [`Driver::open_file`] reads in place:
    /// a target is always direct.
    fn mount_target(&self, rest: &str, _direct: bool) -> Option<(Vec<u8>, bool)> {
        colon_form(rest.split('/').next().unwrap_or(""))?;
        Some((format!("/{rest}").into_bytes(), true))
    }
    /// Stops prefetching (waiting up to a second for fetches in progress to give up) and
    /// removes this agent's local copies.
    fn close(&self) {
        self.prefetch.stop(Duration::from_secs(1));
        self.cache.close();
    }
    fn mirror(&self) -> Option<&[u8]> {
        Some(self.cache.mirror())
    }
    fn volume<'p>(&self, path: &'p [u8]) -> &'p [u8] {
        roost_vfs::path::split_first(path).0
    }
    fn report(&self) -> Option<String> {
        let servers = self.servers.lock().expect("servers lock");
        if servers.is_empty() {
            return None;
        }
        let names: Vec<&str> = servers.iter().map(String::as_str).collect();
        let c = &self.cache;
        Some(format!(
            "{} ({}): {} requests, {} bytes of files fetched ({} blocks by Range requests), \
             {} contents refused, {} indexes unchanged (304), {} indexes from the cache, {} files prefetched ({} dropped); \
             cache: {} hits, {} misses\n",
            self.scheme,
            names.join(", "),
            self.requests.load(Ordering::Relaxed),
            self.fetched.load(Ordering::Relaxed),
            self.blocks.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
            self.unchanged.load(Ordering::Relaxed),
            self.recalled.load(Ordering::Relaxed),
            self.prefetch.prefetched.load(Ordering::Relaxed),
            self.prefetch.dropped.load(Ordering::Relaxed),
            c.hits.load(Ordering::Relaxed),
            c.misses.load(Ordering::Relaxed),
        ))
    }
    fn lstat(&self, path: &[u8]) -> Result<Stat, Errno> {
        if Self::is_root(path) {
            return Ok(Self::root_stat());
        }
        let (authority, rest) = self.server(path)?;
        self.lookup(&authority, &rest, ANY).map(|f| f.stat)
    }
    fn stat(&self, path: &[u8]) -> Result<Stat, Errno> {
        if Self::is_root(path) {
            return Ok(Self::root_stat());
        }
        let (authority, mut rest) = self.server(path)?;
        // Relative targets are followed inside the server; an absolute one names a path of
        // the program's namespace, which the namespace follows itself.
        for _ in 0..40 {
            let st = self.lookup(&authority, &rest, ANY)?.stat;
            if !st.is_symlink() {
                return Ok(st);
            }
            let target = match self.entry(&authority, &rest, ANY)? {
                Some(Entry {
                    target: Some(t), ..
                }) if !t.starts_with(b"/") => t,
                _ => return Err(libc::ENOENT),
            };
            rest = roost_vfs::path::normalize(&roost_vfs::path::join(
                roost_vfs::path::parent(&rest),
                &target,
            ));
        }
        Err(libc::ELOOP)
    }
    fn readlink(&self, path: &[u8]) -> Result<Vec<u8>, Errno> {
        if Self::is_root(path) {
            return Err(libc::EINVAL);
        }
        let (authority, rest) = self.server(path)?;
        if rest == b"/" {
            return Err(libc::EINVAL);
        }
        match self.entry(&authority, &rest, ANY)? {
            Some(Entry {
                target: Some(t), ..
            }) => Ok(t),
            Some(_) => Err(libc::EINVAL),
            None => self.lookup(&authority, &rest, ANY).and(Err(libc::EINVAL)),
        }
    }
    fn access(&self, path: &[u8], mode: i32) -> Result<(), Errno> {
        let st = self.stat(path)?;
        if mode & libc::W_OK != 0 {
            return Err(libc::EROFS);
        }
        if mode & libc::X_OK != 0 && st.mode & 0o111 == 0 {
            return Err(libc::EACCES);
        }
        Ok(())
    }
    fn open_read(&self, path: &[u8]) -> Result<Box<dyn ReadAt>, Errno> {
        let local = self.localize(path, Intent::Read)?;
        roost_vfs::LocalDriver.open_read(&local)
    }
    fn getxattr(&self, path: &[u8], _: &[u8], _: bool) -> Result<Vec<u8>, Errno> {
        self.lstat(path)?;
        Err(libc::ENODATA)
    }
    fn listxattr(&self, path: &[u8], _: bool) -> Result<Vec<u8>, Errno> {
        self.lstat(path)?;
        Ok(Vec::new())
    }
    fn statfs(&self, path: &[u8]) -> Result<StatFs, Errno> {
        self.lstat(path)?;
        Ok(StatFs {
            bsize: 4096,
            ..StatFs::default()
        })
    }
    fn readdir(&self, path: &[u8]) -> Result<Vec<(Vec<u8>, u32)>, Errno> {
        if Self::is_root(path) {
            return Ok(self.servers_listed());
        }
        let (authority, rest) = self.server(path)?;
        self.list(&authority, &rest)
    }
    fn lock_object(&self, path: &[u8]) -> Result<std::fs::File, Errno> {
        let (authority, rest) = self.server(path)?;
        let key = self.cache_key(&authority, &rest);
        self.cache.lock_object(&key)
    }

    /// A file of at least the block threshold whose index has block hashes, and that the
    /// cache does not hold whole, read in place block by block ([`partial`]); ENOSYS for
    /// any other, which is used through a local copy.
    fn open_file(&self, path: &[u8], how: OpenMode) -> Result<Box<dyn OpenFile>, Errno> {
        if how.write || how.truncate {
            return Err(libc::EROFS);
        }
        if Self::is_root(path) {
            return Err(libc::ENOSYS);
        }
        let (authority, rest) = self.server(path)?;
        let found = self.lookup(&authority, &rest, ANY)?;
        let st = found.stat;
        let (Some(blocks), Some(version)) = (found.blocks, found.version) else {
            return Err(libc::ENOSYS);
        };
        let key = self.cache_key(&authority, &rest);
        if st.mode & libc::S_IFMT != libc::S_IFREG
            || st.size < self.options.block_threshold
            || self.cache.holds(&key, version)
        {
            return Err(libc::ENOSYS);
        }
        let me = self.me.upgrade().ok_or(libc::EIO)?;
        let file = partial::PartialFile::new(me, (path, &authority, &rest), (st, version), blocks)?;
        Ok(Box::new(file))
    }

    fn localize(&self, path: &[u8], intent: Intent) -> Result<Vec<u8>, Errno> {
        if intent != Intent::Read {
            return Err(libc::EROFS);
        }
        if Self::is_root(path) {
            return self.cache.show_dir(path, &self.servers_listed());
        }
        let (authority, rest) = self.server(path)?;
        let st = self.lookup(&authority, &rest, ANY)?.stat;
        match st.mode & libc::S_IFMT {
            libc::S_IFDIR => {
                let entries = self.list(&authority, &rest)?;
                self.cache.show_dir(path, &entries)
            }
            libc::S_IFLNK => Err(libc::ELOOP),
            _ => self.localize_file(path, &authority, &rest),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_may_follow_a_plus_sign() {
        assert_eq!(colon_form("h+8080").as_deref(), Some("h:8080"));
        assert_eq!(colon_form("[::1]+80").as_deref(), Some("[::1]:80"));
        assert_eq!(colon_form("h:80").as_deref(), Some("h:80"));
        for bad in ["h+", "h+0", "+80", "a+b+80", "h+80+", "h@x+80"] {
            assert_eq!(colon_form(bad), None, "{bad}");
        }
    }

    #[test]
    fn authorities() {
        for ok in ["h", "h:80", "127.0.0.1:8080", "[::1]:8", "[::1]", "a-b.c_d"] {
            assert!(valid_authority(ok), "{ok}");
        }
        for bad in ["", ":80", "h:", "h:0", "h:x", "a:b:c", "[::1", "h/x", "h@x"] {
            assert!(!valid_authority(bad), "{bad}");
        }
    }

    #[test]
    fn mount_targets_name_a_web_server_and_a_path() {
        let dir = tempfile::tempdir().unwrap();
        let web = |scheme: &'static str| -> Arc<dyn Driver> {
            let cache = Cache::new(dir.path(), roost_vfs::cache::DEFAULT_LIMIT, false);
            HttpNet::new(scheme, cache, HttpOptions::default()).unwrap()
        };
        let mut drivers = roost_vfs::Registry::new();
        drivers.add("http", web("http"), false);
        drivers.add("https", web("https"), false);
        let root = |physical: &str| {
            let target = drivers.target(physical).expect("a web target");
            target.map(|t| format!("{t:?}"))
        };
        assert_eq!(
            root("/http/127.0.0.1:8080/sw/").unwrap(),
            "http:/127.0.0.1:8080/sw:direct"
        );
        assert_eq!(root("http://h/sw").unwrap(), "http:/h/sw:direct");
        assert_eq!(
            root("https://h:8443/a/b").unwrap(),
            "https:/h:8443/a/b:direct"
        );
        assert_eq!(root("/https/h+8443").unwrap(), "https:/h+8443:direct");
        for (bad, scheme) in [
            ("http://h:0/x", "http"),
            ("http://:80/x", "http"),
            ("http://u@h/x", "http"),
            ("/http/h:x/y", "http"),
            ("https://u:p@h/x", "https"),
        ] {
            assert_eq!(
                root(bad).unwrap_err(),
                format!("{bad}: expected {scheme}://HOST[:PORT]/PATH")
            );
        }
    }

    #[test]
    fn driver_paths_name_a_server_and_a_path_on_it() {
        assert_eq!(
            roost_vfs::path::split_first(b"/h:9/a/b"),
            (&b"h:9"[..], &b"/a/b"[..])
        );
        assert_eq!(roost_vfs::path::split_first(b"/h"), (&b"h"[..], &b"/"[..]));
        assert!(HttpNet::is_root(b"/"));
    }
}
