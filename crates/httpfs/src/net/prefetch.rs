//! Fetching the files of a directory before the program opens them (`docs/httpfs.md`,
//! "Prefetching"). A program that opens many files of a tree one after the other (Python
//! importing a package) would otherwise wait for one whole fetch per file, in turn. When an
//! open misses the cache, the other regular files its directory's index lists that the
//! cache lacks (each of at most [`HttpOptions::prefetch_max`] bytes, together at most
//! [`HttpOptions::prefetch`] bytes and [`MAX_FILES`] files) are queued, and up to
//! [`HttpOptions::streams`] background threads fetch them, each on a kept-alive connection
//! from the route's pool, into the shared cache exactly as an open would (checked against
//! the index's hash while they arrive, through a temporary name). A copy that does not
//! match is dropped without a word: the program's own open of that file fetches it again,
//! with the usual retries, line and EIO. An open of a file being prefetched waits for that
//! fetch; an open of a file still queued takes it off the queue and fetches it itself.
//!
//! The most recent directory's files go first (a program is most likely to open next what
//! lies beside what it just opened), in the index's order within a directory. The threads
//! hold no lock the driver's other calls take while they fetch, end after [`IDLE`] without
//! work, and stop (their fetch in progress abandoned, its temporary copy removed) when the
//! run ends ([`Prefetch::stop`]).
//!
//! [`HttpOptions::prefetch_max`]: super::HttpOptions::prefetch_max
//! [`HttpOptions::prefetch`]: super::HttpOptions::prefetch
//! [`HttpOptions::streams`]: super::HttpOptions::streams

use super::{Copy, HttpNet, Vouch, ANY};
use crate::index::{Digest, Kind};
use crate::listing::Listing;
use roost_vfs::cache::Version;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

/// The most files of one directory queued at once (each costs a request, however small).
pub const MAX_FILES: usize = 256;
/// How long a prefetch thread waits for work before it ends.
const IDLE: Duration = Duration::from_secs(2);

/// The prefetcher of one driver.
pub(super) struct Prefetch {
    /// Bytes queued per directory at most (0: no prefetching), and the largest file.
    budget: u64,
    largest: u64,
    /// Threads at most.
    streams: usize,
    state: Mutex<State>,
    /// Prefetch threads wait here for work.
    wake: Condvar,
    /// Opens wait here for a file being prefetched, and [`Prefetch::stop`] for the
    /// threads to end.
    finished: Condvar,
    /// Set once the run is over: fetches in progress stop.
    stopping: AtomicBool,
    /// Files prefetched, and copies dropped (failed, or not matching their index).
    pub(super) prefetched: AtomicU64,
    pub(super) dropped: AtomicU64,
}

#[derive(Default)]
struct State {
    /// Files to fetch, the next first.
    queue: VecDeque<Job>,
    /// The files queued or being fetched, by cache key.
    pending: HashMap<String, Pending>,
    /// The listing each directory was last scanned in, by (server, path): a directory is
    /// scanned once per listing (again when its index changed).
    scanned: HashMap<(String, Vec<u8>), Arc<Listing>>,
    /// Jobs queued so far (each queued job's number).
    numbered: u64,
    /// Prefetch threads running.
    threads: usize,
}

/// Where a file stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pending {
    /// In the queue as the job of this number (an older job of the same file, left
    /// behind when an open took the file, is not this one).
    Queued(u64),
    Fetching,
}

/// One file to fetch.
struct Job {
    number: u64,
    authority: String,
    path: Vec<u8>,
    key: String,
    version: Version,
    digest: Digest,
}

/// How a prefetch ended.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Outcome {
    Fetched,
    /// The cache had it meanwhile (another run, or an open, fetched it).
    Held,
    /// Not fetched, or not matching its index: dropped.
    Dropped,
}

/// A running prefetch thread, counted out when it ends however it ends (a panic in a
/// fetch included), so that [`Prefetch::stop`] does not wait for it.
struct Running<'a>(&'a Prefetch);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.locked().threads -= 1;
        self.0.finished.notify_all();
    }
}

/// A file a thread is fetching, released when it is done however it ends, so that no
/// open waits for it forever.
struct Taken<'a>(&'a Prefetch, &'a str);

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        self.0.locked().pending.remove(self.1);
        self.0.finished.notify_all();
    }
}

/// A file a directory's scan found worth fetching.
pub(super) struct Candidate {
    pub(super) path: Vec<u8>,
    pub(super) key: String,
    pub(super) version: Version,
    pub(super) digest: Digest,
}

impl State {
    /// Queues `files` of `authority` ahead of those queued before, in their order, but
    /// those queued or being fetched already.
    fn add(&mut self, authority: &str, files: Vec<Candidate>) {
        for f in files.into_iter().rev() {
            if self.pending.contains_key(&f.key) {
                continue;
            }
            self.numbered += 1;
            let number = self.numbered;
            self.pending.insert(f.key.clone(), Pending::Queued(number));
            self.queue.push_front(Job {
                number,
                authority: authority.to_string(),
                path: f.path,
                key: f.key,
                version: f.version,
                digest: f.digest,
            });
        }
    }

    /// The next queued file to fetch, marked as being fetched (passing over the jobs of
    /// files an open took meanwhile).
    fn take(&mut self) -> Option<Job> {
        while let Some(job) = self.queue.pop_front() {
            if self.pending.get(&job.key) == Some(&Pending::Queued(job.number)) {
                self.pending.insert(job.key.clone(), Pending::Fetching);
                return Some(job);
            }
        }
        None
    }
}

impl Prefetch {
    /// Prefetching of up to `budget` bytes a directory (none with 0), files of at most
    /// `largest` bytes, on up to `streams` threads.
    pub(super) fn new(budget: u64, largest: u64, streams: usize) -> Prefetch {
        Prefetch {
            budget,
            largest,
            streams: streams.max(1),
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            finished: Condvar::new(),
            stopping: AtomicBool::new(false),
            prefetched: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Whether the run is over (a prefetch in progress gives up).
    pub(super) fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// Before an open fetches the file of cache key `key` itself: waits for its prefetch
    /// if one is in progress, or takes it off the queue.
    pub(super) fn take_over(&self, key: &str) {
        let mut st = self.locked();
        match st.pending.get(key) {
            None => return,
            Some(Pending::Queued(_)) => {
                st.pending.remove(key);
                return;
            }
            Some(Pending::Fetching) => {}
        }
        drop(st);
        roost_vfs::about_to_block();
        let mut st = self.locked();
        while st.pending.get(key) == Some(&Pending::Fetching) {
            st = self.finished.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Whether `listing` of `dir` on `authority` is yet to be scanned (and notes that it
    /// is being scanned now).
    fn first_scan(&self, authority: &str, dir: &[u8], listing: &Arc<Listing>) -> bool {
        let mut st = self.locked();
        let key = (authority.to_string(), dir.to_vec());
        if st
            .scanned
            .get(&key)
            .is_some_and(|l| Arc::ptr_eq(l, listing))
        {
            return false;
        }
        if st.scanned.len() > 1 << 16 {
            st.scanned.clear();
        }
        st.scanned.insert(key, Arc::clone(listing));
        true
    }

    /// Queues `files` of `authority` ahead of those queued before (but files queued or
    /// being fetched already), and starts threads for them, for the driver `net`.
    fn queue(self: &Arc<Self>, authority: &str, files: Vec<Candidate>, net: &Weak<HttpNet>) {
        if self.stopping() || files.is_empty() {
            return;
        }
        let mut st = self.locked();
        st.add(authority, files);
        let wanted = self.streams.min(st.queue.len());
        while st.threads < wanted {
            let (me, net) = (Arc::clone(self), net.clone());
            let spawned = std::thread::Builder::new()
                .name("roost-prefetch".into())
                .spawn(move || me.work(&net));
            if spawned.is_err() {
                // The threads there are (if any) go on; the program's opens fetch the rest.
                break;
            }
            st.threads += 1;
        }
        drop(st);
        self.wake.notify_all();
    }

    /// A prefetch thread: fetches queued files until there are none for [`IDLE`], the
    /// driver is gone, or the run is over.
    fn work(&self, net: &Weak<HttpNet>) {
        let _running = Running(self);
        while let Some(job) = self.next_job() {
            let _taken = Taken(self, &job.key);
            let counter = match net.upgrade().map(|net| net.prefetch_one(&job)) {
                Some(Outcome::Fetched) => &self.prefetched,
                Some(Outcome::Held) => continue,
                Some(Outcome::Dropped) | None => &self.dropped,
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The state, even if a thread panicked while holding it (what it holds stays
    /// consistent: every change is one statement).
    fn locked(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next file to fetch (marked as being fetched); `None` once idle for [`IDLE`] or
    /// stopping.
    fn next_job(&self) -> Option<Job> {
        let mut st = self.locked();
        let mut idle_since = Instant::now();
        loop {
            if self.stopping() {
                return None;
            }
            if let Some(job) = st.take() {
                return Some(job);
            }
            let waited = idle_since.elapsed();
            if waited >= IDLE {
                return None;
            }
            let (guard, timeout) = self
                .wake
                .wait_timeout(st, IDLE - waited)
                .unwrap_or_else(|e| e.into_inner());
            st = guard;
            if !timeout.timed_out() {
                idle_since = Instant::now();
            }
        }
    }

    /// Ends prefetching (the run is over): nothing more is fetched, fetches in progress
    /// give up at their next read, and the threads are waited for, up to `within`.
    pub(super) fn stop(&self, within: Duration) {
        self.stopping.store(true, Ordering::Relaxed);
        let deadline = Instant::now() + within;
        let mut st = self.locked();
        st.queue.clear();
        st.pending.retain(|_, p| *p == Pending::Fetching);
        self.wake.notify_all();
        while st.threads > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            st = self
                .finished
                .wait_timeout(st, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl HttpNet {
    /// Before the program's open of `path` on `authority` (cache key `key`) fetches it:
    /// waits for its prefetch if one is in progress (else takes it off the queue), and
    /// queues the other files of its directory for prefetching.
    pub(super) fn prefetch_around(&self, authority: &str, path: &[u8], key: &str) {
        if self.prefetch.budget == 0 {
            return;
        }
        self.prefetch.take_over(key);
        // The listing the open's lookup just used (no request of its own, even with a TTL
        // of 0).
        let dir = roost_vfs::path::parent(path);
        let Some(listing) = self.listing_in_memory(authority, dir) else {
            return;
        };
        if !self.prefetch.first_scan(authority, dir, &listing) {
            return;
        }
        let files = self.worth_prefetching(authority, (dir, path), &listing);
        if self.options.verbose && !files.is_empty() {
            eprintln!(
                "roost: prefetching {} files of {}",
                files.len(),
                self.url(authority, dir)
            );
        }
        self.prefetch.queue(authority, files, &self.me);
    }

    /// The files of `listing` (directory `dir`) to prefetch when `opened` is opened: the
    /// regular files it lists with a hash, but `opened`, that the cache does not hold,
    /// are small enough and would not be fetched in blocks, in the index's order, up to
    /// the budget and [`MAX_FILES`].
    fn worth_prefetching(
        &self,
        authority: &str,
        (dir, opened): (&[u8], &[u8]),
        listing: &Listing,
    ) -> Vec<Candidate> {
        let p = &self.prefetch;
        let mut left = p.budget;
        let mut out = Vec::new();
        for e in listing.entries() {
            if out.len() >= MAX_FILES {
                break;
            }
            let (Kind::File, Some(digest), Some(version)) =
                (e.kind, e.digest, super::version_of(e))
            else {
                continue;
            };
            let in_blocks = e.blocks.is_some() && e.size >= self.options.block_threshold;
            if e.size > p.largest || e.size > left || in_blocks {
                continue;
            }
            let path = crate::join(dir, &e.name);
            if path == opened {
                continue;
            }
            let key = self.cache_key(authority, &path);
            if self.cache.holds(&key, version) {
                continue;
            }
            left -= e.size;
            out.push(Candidate {
                path,
                key,
                version,
                digest,
            });
        }
        out
    }

    /// Fetches one queued file into the cache, checked as an open's fetch is (dropped when
    /// it does not match: the program's open fetches it again, and says why).
    fn prefetch_one(&self, job: &Job) -> Outcome {
        if self.cache.holds(&job.key, job.version) {
            return Outcome::Held;
        }
        let url = self.url(&job.authority, &job.path);
        let mut copy = Copy {
            route: self.client.origin(),
            mismatch: None,
            background: true,
        };
        let vouch = Vouch {
            digest: Some(job.digest),
            blocks: None,
        };
        let fetched = self.cache.object((&job.key, &url), job.version, |f| {
            self.download(&job.authority, ANY, &url, f, vouch, &mut copy)
        });
        match fetched {
            Ok(_) => {
                if self.options.verbose {
                    eprintln!("roost: prefetched {url}{}", self.by(copy.route));
                }
                Outcome::Fetched
            }
            Err(e) => {
                if self.options.verbose {
                    let why = copy
                        .mismatch
                        .unwrap_or_else(|| std::io::Error::from_raw_os_error(e).to_string());
                    eprintln!(
                        "roost: prefetch of {url} dropped ({why}{}); an open fetches it again",
                        self.by(copy.route)
                    );
                }
                Outcome::Dropped
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(n: u8) -> Candidate {
        Candidate {
            path: vec![b'/', n],
            key: format!("k{n}"),
            version: Version {
                ino: 0,
                size: 1,
                mtime: 0,
            },
            digest: Digest::Sha256([n; 32]),
        }
    }

    fn taken(st: &mut State) -> Vec<String> {
        std::iter::from_fn(|| st.take()).map(|j| j.key).collect()
    }

    #[test]
    fn the_newest_directory_goes_first_and_a_file_is_queued_once() {
        let mut st = State::default();
        st.add("h", vec![candidate(1), candidate(2)]);
        st.add("h", vec![candidate(3), candidate(1), candidate(4)]);
        assert_eq!(taken(&mut st), ["k3", "k4", "k1", "k2"]);
        assert!(st.pending.values().all(|p| *p == Pending::Fetching));
        // Being fetched: not queued again.
        st.add("h", vec![candidate(2)]);
        assert!(st.queue.is_empty());
    }

    #[test]
    fn an_open_takes_a_queued_file_off_the_queue() {
        let p = Prefetch::new(1 << 20, 1 << 20, 1);
        p.state
            .lock()
            .unwrap()
            .add("h", vec![candidate(1), candidate(2)]);
        p.take_over("k1");
        let mut st = p.state.lock().unwrap();
        assert_eq!(taken(&mut st), ["k2"]);
        // Queued again later (a new listing), it is fetched once.
        st.pending.clear();
        st.add("h", vec![candidate(1)]);
        assert_eq!(taken(&mut st), ["k1"]);
    }

    #[test]
    fn an_open_waits_for_a_file_being_prefetched() {
        let p = Arc::new(Prefetch::new(1 << 20, 1 << 20, 1));
        p.state
            .lock()
            .unwrap()
            .pending
            .insert("k".into(), Pending::Fetching);
        let p2 = Arc::clone(&p);
        let t0 = Instant::now();
        let done = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            p2.state.lock().unwrap().pending.remove("k");
            p2.finished.notify_all();
        });
        p.take_over("k");
        assert!(t0.elapsed() >= Duration::from_millis(200));
        done.join().unwrap();
    }

    #[test]
    fn threads_end_when_stopped_and_nothing_more_is_queued() {
        let p = Arc::new(Prefetch::new(1 << 20, 1 << 20, 2));
        // No driver: the threads find it gone and drop what they take.
        let gone = Weak::new();
        p.queue("h", vec![candidate(1), candidate(2), candidate(3)], &gone);
        p.stop(Duration::from_secs(10));
        let st = p.state.lock().unwrap();
        assert_eq!(st.threads, 0);
        assert!(st.queue.is_empty() && st.pending.is_empty());
        drop(st);
        p.queue("h", vec![candidate(4)], &gone);
        assert!(p.state.lock().unwrap().queue.is_empty());
    }
}
