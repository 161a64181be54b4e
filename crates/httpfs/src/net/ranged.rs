//! Large files fetched in blocks (`docs/httpfs.md`, "Large files in blocks"): one Range
//! request per block of the index entry's block hashes, several at once (each stream on a
//! connection of its own, kept alive by the route's pool), each block written at its
//! offset into the cache's temporary copy and checked against its hash as it arrives. The
//! copy is shown only once every block matched (the cache renames it into place), so a
//! wrong block is never seen. A block a proxy gave wrongly is fetched again through the
//! next proxy, then from the origin (and the file's later blocks start there too); a wrong
//! block from the origin fails the fetch as a whole file's wrong content does (the caller
//! fetches the index again). A route that answers a range with the whole file (200: a
//! server without Range support) gets the file fetched whole from it, checked whole.

use super::{Copy, HttpNet};
use crate::blocks::Blocks;
use crate::client::Answer;
use crate::index::hex;
use roost_vfs::Errno;
use sha2::Digest as _;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The most streams one file is fetched with.
const MAX_STREAMS: usize = 16;

/// How a fetch in blocks ended.
pub(super) enum Fetched {
    /// Every block arrived and matched its hash.
    Done,
    /// `route` answers no ranges: the file is to be fetched whole from there; `answer` is
    /// the whole body already coming, when it came to the first block's request.
    Whole {
        answer: Option<Box<Answer>>,
        route: usize,
    },
}

/// Why the fetch of a block stopped the file's.
enum Stop {
    Errno(Errno),
    /// The origin's copy of a block did not match: what was wrong.
    Mismatch(String),
    /// This route answered a range with the whole file.
    NoRanges(usize),
}

/// What reading a block's body found wrong.
enum Received {
    /// The connection failed while it arrived.
    Cut(String),
    /// Writing the copy failed.
    Errno(Errno),
}

/// One file's fetch in blocks, shared by its streams.
struct Job<'a> {
    net: &'a HttpNet,
    authority: &'a str,
    url: &'a str,
    file: &'a std::fs::File,
    blocks: &'a Blocks,
    size: u64,
    /// The blocks to fetch, and the next of them no stream has taken.
    todo: &'a [usize],
    next: AtomicUsize,
    /// The route blocks are asked from: later once a proxy gave a wrong block.
    from: AtomicUsize,
    /// The first failure, which stops every stream.
    stop: Mutex<Option<Stop>>,
    stopped: AtomicBool,
}

impl HttpNet {
    /// Fetches the `size` bytes of `url` into `file` in the blocks `blocks` lists, several
    /// at once, from the route in use or, if later, `from`. An origin's wrong block is
    /// EBADMSG with `copy` saying what was wrong.
    pub(super) fn fetch_blocks(
        &self,
        (authority, url): (&str, &str),
        from: usize,
        file: &std::fs::File,
        (blocks, size): (&Blocks, u64),
        copy: &mut Copy,
    ) -> Result<Fetched, Errno> {
        let all: Vec<usize> = (0..blocks.hashes.len()).collect();
        self.fetch_some_blocks((authority, url), from, file, (blocks, size, &all), copy)
    }

    /// Fetches blocks `todo` of `url` (of `size` bytes, in the blocks `blocks` lists) into
    /// `file` at their offsets, as [`HttpNet::fetch_blocks`] fetches them all.
    pub(super) fn fetch_some_blocks(
        &self,
        (authority, url): (&str, &str),
        from: usize,
        file: &std::fs::File,
        (blocks, size, todo): (&Blocks, u64, &[usize]),
        copy: &mut Copy,
    ) -> Result<Fetched, Errno> {
        let count = todo.len();
        if blocks.hashes.is_empty() {
            return Ok(Fetched::Whole {
                answer: None,
                route: from,
            });
        }
        if count == 0 {
            return Ok(Fetched::Done);
        }
        let job = Job {
            net: self,
            authority,
            url,
            file,
            blocks,
            size,
            todo,
            next: AtomicUsize::new(1),
            from: AtomicUsize::new(from),
            stop: Mutex::new(None),
            stopped: AtomicBool::new(false),
        };
        // The first block's answer says whether the route answers ranges at all, before
        // any other stream starts.
        let first = self
            .get_range(authority, from, url, job.span(todo[0]))
            .map_err(|e| e.errno())?;
        if first.status == 200 {
            let route = first.route;
            self.no_ranges(authority, route);
            return Ok(Fetched::Whole {
                answer: Some(Box::new(first)),
                route,
            });
        }
        let streams = self.options.streams.clamp(1, MAX_STREAMS).min(count);
        std::thread::scope(|s| {
            for _ in 1..streams {
                s.spawn(|| job.work(None));
            }
            job.work(Some(first));
        });
        match job.stop.into_inner().expect("stop lock") {
            None => {
                if self.options.verbose {
                    eprintln!(
                        "roost: fetched {url} in {count} blocks of {} bytes, {streams} at a time",
                        blocks.size
                    );
                }
                self.blocks.fetch_add(count as u64, Ordering::Relaxed);
                Ok(Fetched::Done)
            }
            Some(Stop::NoRanges(route)) => {
                self.no_ranges(authority, route);
                Ok(Fetched::Whole {
                    answer: None,
                    route,
                })
            }
            Some(Stop::Mismatch(why)) => {
                copy.route = self.client.origin();
                copy.mismatch = Some(why);
                Err(libc::EBADMSG)
            }
            Some(Stop::Errno(e)) => Err(e),
        }
    }

    /// Says once that `route` to `authority` answers no Range requests.
    fn no_ranges(&self, authority: &str, route: usize) {
        self.say_once(format!(
            "roost: {}://{authority}: a Range request was answered with the whole file{}; \
             large files are fetched whole from it",
            self.scheme,
            self.by(route)
        ));
    }
}

impl Job<'_> {
    /// The first and last byte of block `i`.
    fn span(&self, i: usize) -> (u64, u64) {
        let (start, len) = self.blocks.range(i, self.size);
        (start, start + len - 1)
    }

    /// Fetches blocks until none is left or a stream failed; `first` is the answer to the
    /// first block's request.
    fn work(&self, first: Option<Answer>) {
        let mut pending = first.map(|a| (0, a));
        loop {
            let (at, answer) = match pending.take() {
                Some((at, a)) => (at, Some(a)),
                None => (self.next.fetch_add(1, Ordering::Relaxed), None),
            };
            let Some(&i) = self.todo.get(at) else {
                return;
            };
            if self.stopped.load(Ordering::Relaxed) {
                return;
            }
            if let Err(stop) = self.fetch(i, answer) {
                self.stopped.store(true, Ordering::Relaxed);
                self.stop.lock().expect("stop lock").get_or_insert(stop);
                return;
            }
        }
    }

    /// Fetches block `i` (`pending`: the answer to its request, if made) until a copy of
    /// it matches: one a proxy gave wrongly is asked for again by the next route.
    fn fetch(&self, i: usize, mut pending: Option<Answer>) -> Result<(), Stop> {
        let net = self.net;
        let span = self.span(i);
        loop {
            if self.stopped.load(Ordering::Relaxed) {
                return Ok(());
            }
            let answer = match pending.take() {
                Some(answer) => answer,
                None => {
                    let from = self.from.load(Ordering::Relaxed);
                    net.get_range(self.authority, from, self.url, span)
                        .map_err(|e| Stop::Errno(e.errno()))?
                }
            };
            let route = answer.route;
            let wrong = match answer.status {
                200 => return Err(Stop::NoRanges(route)),
                206 => match self.receive(answer, i, span) {
                    Ok(None) => return Ok(()),
                    Ok(Some(wrong)) => wrong,
                    Err(Received::Errno(e)) => return Err(Stop::Errno(e)),
                    Err(Received::Cut(e)) => match net.client.cut(route, &e) {
                        Some(next) => {
                            self.from.fetch_max(next, Ordering::Relaxed);
                            continue;
                        }
                        None => {
                            eprintln!("roost: {}: {e}", self.url);
                            return Err(Stop::Errno(libc::EIO));
                        }
                    },
                },
                416 => format!(
                    "416 Range Not Satisfiable: shorter than the {} bytes the index says",
                    self.size
                ),
                status => {
                    eprintln!(
                        "roost: {}: HTTP status {status} to a Range request{}",
                        self.url,
                        net.by(route)
                    );
                    return Err(Stop::Errno(libc::EIO));
                }
            };
            let why = format!("block {i}, bytes {}-{}: {wrong}", span.0, span.1);
            if route >= net.client.origin() {
                return Err(Stop::Mismatch(why));
            }
            net.refused.fetch_add(1, Ordering::Relaxed);
            net.distrust(route, || {
                format!(
                    "roost: {}: content does not match its index ({why}{}); fetching it again",
                    self.url,
                    net.by(route)
                )
            });
            self.from.fetch_max(route + 1, Ordering::Relaxed);
        }
    }

    /// Reads a 206 answer for block `i` (bytes `span`) into the copy at its offset while
    /// hashing it; `Some` says what was wrong with it (its range, its length, its hash).
    fn receive(
        &self,
        answer: Answer,
        i: usize,
        (first, last): (u64, u64),
    ) -> Result<Option<String>, Received> {
        let range = answer
            .header("Content-Range")
            .unwrap_or("")
            .trim()
            .to_string();
        if !content_range_is(&range, (first, last), self.size) {
            return Ok(Some(format!(
                "the answer's Content-Range is {range:?}, not \"bytes {first}-{last}/{}\"",
                self.size
            )));
        }
        let mut reader = answer.response.into_reader();
        let mut sha256 = sha2::Sha256::new();
        let mut at = first;
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Received::Cut(e.to_string())),
            };
            if at + n as u64 > last + 1 {
                return Ok(Some("longer than the block".into()));
            }
            sha256.update(&buf[..n]);
            self.file
                .write_all_at(&buf[..n], at)
                .map_err(|e| Received::Errno(roost_base::errno_of(e)))?;
            at += n as u64;
            self.net.fetched.fetch_add(n as u64, Ordering::Relaxed);
        }
        if at != last + 1 {
            return Ok(Some(format!(
                "{} of its {} bytes",
                at - first,
                last + 1 - first
            )));
        }
        let (got, want) = (sha256.finalize(), &self.blocks.hashes[i]);
        if got.as_slice() != want {
            return Ok(Some(format!(
                "sha {}, the index says {}",
                hex(&got),
                hex(want)
            )));
        }
        Ok(None)
    }
}

/// Whether a `Content-Range` header value is `bytes FIRST-LAST/SIZE` (or `/*`: a size the
/// server does not say).
fn content_range_is(header: &str, (first, last): (u64, u64), size: u64) -> bool {
    let Some((span, total)) = header
        .strip_prefix("bytes ")
        .and_then(|r| r.split_once('/'))
    else {
        return false;
    };
    span == format!("{first}-{last}") && (total == "*" || total == size.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_ranges_must_be_the_block_asked_for() {
        assert!(content_range_is("bytes 0-99/300", (0, 99), 300));
        assert!(content_range_is("bytes 100-199/*", (100, 199), 300));
        for bad in [
            "",
            "bytes 0-99/301",
            "bytes 0-98/300",
            "bytes 1-99/300",
            "bytes */300",
            "0-99/300",
            "bytes 0-99",
        ] {
            assert!(!content_range_is(bad, (0, 99), 300), "{bad}");
        }
    }
}
