//! Accounting (issue 13 item 4, Legion's "resource accounting"): every server keeps a ledger
//! of what each user consumed on it and what its owner offered.
//!
//! - [`record`]: one ledger record and its checksummed line format.
//! - [`ledger`]: the append-only file, crash recovery and reading.
//! - [`storage`]: files marked with their creator, added up for storage-hours.
//! - [`prices`] and [`balance`]: the price file and the balances `roost accounting` prints.
//!
//! [`Accounting`] is the server's meter. Sessions count each user's requests and bytes read
//! and written and hand them over at least once a second and when they end ([`Meter`]); jobs
//! report their CPU time when they end. A thread writes, every interval, a `use` record per
//! user with activity and, with `--jobs`, an `offer` record of what the thermostat offered
//! (periods are also cut when the limits or the local hour change, so each one has one price);
//! another samples storage every storage interval. A job's record is written when it ends.

pub mod balance;
pub mod ledger;
pub mod prices;
pub mod record;
pub mod storage;

use crate::log::{self, Level};
use crate::thermostat::schedule::Limits;
use ledger::Ledger;
use record::{Kind, Record};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How a server keeps its ledger.
#[derive(Clone, Debug)]
pub struct Config {
    pub ledger: PathBuf,
    /// `host:port`, as the start record names the server.
    pub host: String,
    /// Who is credited for what this host offers.
    pub owner: String,
    /// The host's class, for prices.
    pub class: String,
    /// How often usage and offers are written.
    pub interval: Duration,
    /// How often storage is sampled.
    pub storage_interval: Duration,
    /// The exported directory, walked for storage.
    pub export: PathBuf,
}

/// A user's file service not yet written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub rpcs: u64,
    pub read: u64,
    pub written: u64,
}

impl Usage {
    fn add(&mut self, other: Usage) {
        self.rpcs += other.rpcs;
        self.read += other.read;
        self.written += other.written;
    }

    fn is_empty(&self) -> bool {
        *self == Usage::default()
    }
}

/// What the owner offers guest jobs now (the thermostat's limits), asked by the meter.
pub type OfferSource = Box<dyn Fn() -> Limits + Send + Sync>;

/// The open offer period.
struct Period {
    start: i64,
    hour: u8,
    limits: Limits,
}

/// One server's meter and ledger.
pub struct Accounting {
    config: Config,
    cores: u64,
    ledger: Mutex<Ledger>,
    usage: Mutex<BTreeMap<String, Usage>>,
    offer: Mutex<Option<(OfferSource, Period)>>,
}

impl std::fmt::Debug for Accounting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accounting")
            .field("ledger", &self.config.ledger)
            .finish()
    }
}

/// Unix seconds now.
pub fn unix_now() -> i64 {
    roost_catalog::unix_now()
}

/// The local hour (0 to 23) at Unix time `t`.
pub fn local_hour(t: i64) -> u8 {
    crate::thermostat::schedule::local_weekday_hour(t).1 as u8
}

impl Accounting {
    /// Opens the ledger (cutting off a torn last record, logged) and writes a `start` record.
    pub fn open(config: Config) -> Result<Arc<Accounting>, String> {
        let (mut ledger, opened) = Ledger::open(&config.ledger).map_err(|e| {
            format!(
                "ledger {}: {e} (choose another with --ledger FILE)",
                config.ledger.display()
            )
        })?;
        if let Some((bytes, line)) = opened.torn {
            log::event(
                Level::Info,
                "ledger-torn",
                &[
                    ("path", &config.ledger.display()),
                    ("line", &line),
                    ("bytes", &bytes),
                    ("action", &"cut off"),
                ],
            );
        }
        // SAFETY: a plain query.
        let cores = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u64;
        let now = unix_now();
        ledger
            .append(&[Record {
                time: now,
                hour: local_hour(now),
                kind: Kind::Start {
                    host: config.host.clone(),
                    owner: config.owner.clone(),
                    class: config.class.clone(),
                    cores,
                },
            }])
            .map_err(|e| format!("ledger {}: {e}", config.ledger.display()))?;
        log::event(
            Level::Info,
            "ledger",
            &[
                ("path", &config.ledger.display()),
                ("owner", &config.owner),
                ("class", &config.class),
            ],
        );
        Ok(Arc::new(Accounting {
            config,
            cores,
            ledger: Mutex::new(ledger),
            usage: Mutex::new(BTreeMap::new()),
            offer: Mutex::new(None),
        }))
    }

    /// Starts the threads that write usage and offers, and sample storage.
    pub fn start(self: &Arc<Self>) -> std::io::Result<()> {
        let meter = self.clone();
        std::thread::Builder::new()
            .name("accounting".into())
            .spawn(move || meter.run_usage())?;
        let meter = self.clone();
        std::thread::Builder::new()
            .name("storage".into())
            .spawn(move || meter.run_storage())?;
        Ok(())
    }

    /// From now on the owner offers what `source` says (the jobs' thermostat).
    pub fn offer(&self, source: OfferSource) {
        let now = unix_now();
        let limits = source();
        *lock(&self.offer) = Some((
            source,
            Period {
                start: now,
                hour: local_hour(now),
                limits,
            },
        ));
    }

    /// Adds a session's usage (written at the next interval).
    pub fn add(&self, user: &str, usage: Usage) {
        if usage.is_empty() {
            return;
        }
        let mut table = lock(&self.usage);
        match table.get_mut(user) {
            Some(u) => u.add(usage),
            None => {
                table.insert(user.to_string(), usage);
            }
        }
    }

    /// Records at once that job `id` of `user` ended having used `cpu_us` of CPU.
    pub fn job(&self, user: &str, id: i64, cpu_us: u64) {
        self.append(vec![Kind::Job {
            user: user.to_string(),
            id,
            cpu_us,
        }]);
    }

    /// The ids of the jobs the ledger holds a `job` record of (read whole: called once, by a
    /// server restarted after a crash, see [`crate::jobs::usage`]).
    pub fn recorded_jobs(&self) -> std::io::Result<std::collections::HashSet<i64>> {
        let _ledger = lock(&self.ledger);
        let bytes = std::fs::read(&self.config.ledger)?;
        Ok(ledger::read(&bytes)
            .records
            .into_iter()
            .filter_map(|r| match r.kind {
                Kind::Job { id, .. } => Some(id),
                _ => None,
            })
            .collect())
    }

    /// Writes the usage gathered so far and closes the offer period (called every interval
    /// and when the server stops).
    pub fn flush(&self) {
        let now = unix_now();
        let mut kinds: Vec<Kind> = std::mem::take(&mut *lock(&self.usage))
            .into_iter()
            .map(|(user, u)| Kind::Use {
                user,
                rpcs: u.rpcs,
                read: u.read,
                written: u.written,
            })
            .collect();
        let mut offered = None;
        if let Some((source, period)) = &mut *lock(&self.offer) {
            offered = self.close_period(period, now, source());
        }
        let hour = local_hour(now);
        let mut records: Vec<Record> = kinds
            .drain(..)
            .map(|kind| Record {
                time: now,
                hour,
                kind,
            })
            .collect();
        records.extend(offered);
        self.write(&records);
    }

    /// The offer record of `period` up to `now` (none if empty), and a new period from now.
    fn close_period(&self, period: &mut Period, now: i64, limits: Limits) -> Option<Record> {
        let secs = now - period.start;
        let record = (secs > 0).then(|| Record {
            time: now,
            hour: period.hour,
            kind: Kind::Offer {
                secs: secs as u64,
                cores: self.cores,
                cpu_pct: u64::from(period.limits.cpu_percent),
                mem: period.limits.mem_bytes,
            },
        });
        *period = Period {
            start: now,
            hour: local_hour(now),
            limits,
        };
        record
    }

    fn append(&self, kinds: Vec<Kind>) {
        let now = unix_now();
        let hour = local_hour(now);
        let records: Vec<Record> = kinds
            .into_iter()
            .map(|kind| Record {
                time: now,
                hour,
                kind,
            })
            .collect();
        self.write(&records);
    }

    fn write(&self, records: &[Record]) {
        if let Err(e) = lock(&self.ledger).append(records) {
            log::event(
                Level::Error,
                "ledger-write",
                &[
                    ("path", &self.config.ledger.display()),
                    ("records", &records.len()),
                    ("error", &e),
                ],
            );
        }
    }

    /// Up to `length` bytes of the ledger from `offset`, whole lines only.
    pub fn read_at(&self, offset: u64, length: usize) -> std::io::Result<Vec<u8>> {
        lock(&self.ledger).read_at(offset, length)
    }

    /// Every interval: usage and offers; every second: an offer period is cut early when
    /// the limits or the local hour change.
    fn run_usage(&self) {
        let mut last = Instant::now();
        loop {
            std::thread::sleep(Duration::from_secs(1));
            if last.elapsed() >= self.config.interval {
                last = Instant::now();
                self.flush();
                continue;
            }
            let now = unix_now();
            let mut offer = lock(&self.offer);
            if let Some((source, period)) = &mut *offer {
                let limits = source();
                if limits != period.limits || local_hour(now) != period.hour {
                    let record = self.close_period(period, now, limits);
                    drop(offer);
                    self.write(&record.into_iter().collect::<Vec<_>>());
                }
            }
        }
    }

    fn run_storage(&self) {
        let mut since = unix_now();
        loop {
            std::thread::sleep(self.config.storage_interval);
            let totals = storage::usage(&self.config.export);
            let now = unix_now();
            let secs = (now - since).max(0) as u64;
            since = now;
            let kinds = totals
                .into_iter()
                .filter(|(_, bytes)| *bytes > 0)
                .map(|(user, bytes)| Kind::Storage { user, bytes, secs })
                .collect();
            self.append(kinds);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A session's share of the meter: counts locally, hands over at least once a second and
/// when dropped.
pub struct Meter {
    accounting: Option<Arc<Accounting>>,
    /// The server's `--metrics` counters, told of bytes at once.
    metrics: Option<Arc<crate::metrics::Metrics>>,
    user: String,
    pending: Usage,
    handed: Instant,
}

impl Meter {
    pub fn new(
        accounting: Option<Arc<Accounting>>,
        metrics: Option<Arc<crate::metrics::Metrics>>,
        user: &str,
    ) -> Meter {
        Meter {
            accounting,
            metrics,
            user: user.to_string(),
            pending: Usage::default(),
            handed: Instant::now(),
        }
    }

    /// One request answered.
    pub fn request(&mut self) {
        self.pending.rpcs += 1;
        if self.handed.elapsed() >= Duration::from_secs(1) {
            self.hand_over();
        }
    }

    pub fn read(&mut self, bytes: u64) {
        self.pending.read += bytes;
        if let Some(m) = &self.metrics {
            m.read(bytes);
        }
    }

    /// The session is about to wait for the client: hands over what it counted.
    pub fn idle(&mut self) {
        if !self.pending.is_empty() {
            self.hand_over();
        }
    }

    pub fn written(&mut self, bytes: u64) {
        self.pending.written += bytes;
        if let Some(m) = &self.metrics {
            m.written(bytes);
        }
    }

    fn hand_over(&mut self) {
        if let Some(a) = &self.accounting {
            a.add(&self.user, std::mem::take(&mut self.pending));
        }
        self.handed = Instant::now();
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        self.hand_over();
    }
}
