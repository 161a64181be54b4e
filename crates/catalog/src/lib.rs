//! The pool catalog: roost (and cctools) servers report themselves to it every few seconds;
//! clients ask it which servers make up the pool.
//!
//! - [`update`]: the update formats servers send (cctools-compatible).
//! - [`signed`]: reports signed with a catalog key, checked against forgery, replay and
//!   re-attribution; [`keys`]: the keys, read from private files.
//! - [`Catalog`]: the table of servers, keyed by reporting address and port, with up/down state.
//! - [`CatalogServer`]: UDP updates on the port, TCP updates on port+1 (cctools' default since
//!   7.10), and HTTP queries (`/query.json`, `/query.text`) on the port over TCP.
//! - [`query`], [`query_first`]: the client side, as `roost status` uses it; [`servers`]:
//!   what an answer says of the servers a client means to use.
//! - [`json`]: the small JSON value all of them share.

pub mod json;
pub mod keys;
pub mod servers;
pub mod signed;
pub mod update;

use json::Value;
use keys::Keys;
use std::collections::{BTreeMap, HashMap};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// cctools' catalog port.
pub const DEFAULT_PORT: u16 = 9097;
/// How long a server may stay silent, when it did not say how often it reports and has not
/// reported twice yet: three of cctools' default five-minute intervals.
pub const DEFAULT_DOWN_AFTER: Duration = Duration::from_secs(900);
/// Reports a server may miss before it is shown down.
pub const MISSED_REPORTS: f64 = 3.0;
/// Most servers remembered; past this, the longest-silent down server is forgotten.
pub const MAX_RECORDS: usize = 10_000;
/// Most HTTP queries answered at once.
const MAX_QUERIES: usize = 64;
/// Time a client has to send its query, and a TCP update to arrive.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Parses `HOST[:PORT]` or `[V6]:PORT`; the port defaults to `default_port`.
pub fn parse_host_port(spec: &str, default_port: u16) -> Result<(String, u16), String> {
    let bad = || format!("{spec}: expected HOST or HOST:PORT");
    let (host, port) = if let Some(rest) = spec.strip_prefix('[') {
        let (host, after) = rest.split_once(']').ok_or_else(bad)?;
        match after.strip_prefix(':') {
            Some(p) => (host, Some(p)),
            None if after.is_empty() => (host, None),
            None => return Err(bad()),
        }
    } else if spec.matches(':').count() > 1 {
        (spec, None) // a bare IPv6 address
    } else {
        match spec.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (spec, None),
        }
    };
    if host.is_empty() || host.contains(char::is_whitespace) {
        return Err(bad());
    }
    let port = match port {
        Some(p) => p.parse::<u16>().ok().filter(|&p| p != 0).ok_or_else(bad)?,
        None => default_port,
    };
    Ok((host.to_string(), port))
}

/// Seconds since the epoch.
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// How far a signed report's time may be from the catalog's clock, either way, by default:
/// five minutes, five of `roost serve`'s default reporting intervals.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(300);

/// Catalog settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Show a server down after this much silence, whatever its interval.
    pub down_after: Option<Duration>,
    /// Log every update (otherwise only arrivals, departures and refusals).
    pub verbose: bool,
    /// The keys whose signed reports are accepted, and shown verified.
    pub keys: Keys,
    /// How far a signed report's time may be from the catalog's clock.
    pub window: Duration,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            down_after: None,
            verbose: false,
            keys: Keys::default(),
            window: DEFAULT_WINDOW,
        }
    }
}

/// Why an update was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// Not an update.
    Update(update::UpdateError),
    /// Signed, but the signature does not hold.
    Signature(signed::Problem),
    /// A signed report no newer than the last one taken for that server.
    Replayed { at_ms: i64, last_ms: i64 },
    /// An unsigned report for a server whose reports are signed.
    Unsigned { key: String },
    /// Signed with another key than the up server's reports are.
    OtherKey { key: String, was: String },
    /// The table is full and no server in it is down.
    Full,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Update(e) => e.fmt(f),
            Refused::Signature(p) => p.fmt(f),
            Refused::Replayed { at_ms, last_ms } => write!(
                f,
                "signed at {at_ms} ms, not after the last report taken ({last_ms} ms): a replay"
            ),
            Refused::Unsigned { key } => write!(
                f,
                "unsigned report for a server whose reports are signed with key {key}"
            ),
            Refused::OtherKey { key, was } => write!(
                f,
                "signed with key {key}, but the server's reports are signed with key {was}"
            ),
            Refused::Full => write!(f, "the catalog holds {MAX_RECORDS} servers, none down"),
        }
    }
}

impl Refused {
    /// A short name for counting refusals of this kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Refused::Update(_) => "malformed",
            Refused::Signature(p) => p.kind(),
            Refused::Replayed { .. } => "replayed",
            Refused::Unsigned { .. } => "unsigned-for-signed",
            Refused::OtherKey { .. } => "other-key",
            Refused::Full => "full",
        }
    }
}

struct Entry {
    record: Value,
    last: Instant,
    last_unix: i64,
    /// The time between its last two reports.
    gap: Option<Duration>,
    reports: u64,
    /// Whether the sweeper last saw it down.
    down: bool,
    /// The key its reports are signed with, once one was.
    signer: Option<String>,
    /// When its last signed report was signed (Unix milliseconds).
    signed_at_ms: i64,
}

/// The table of servers.
pub struct Catalog {
    config: Config,
    entries: Mutex<HashMap<(IpAddr, u16), Entry>>,
    /// Updates refused, by kind.
    refusals: Mutex<BTreeMap<&'static str, u64>>,
}

/// What an update did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A server never seen before.
    New,
    /// A server shown down reported again.
    Returned,
    Refreshed,
}

impl Catalog {
    pub fn new(config: Config) -> Catalog {
        Catalog {
            config,
            entries: Mutex::new(HashMap::new()),
            refusals: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(IpAddr, u16), Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records one update from `peer`; the key is the peer's address and the port the record
    /// names (the peer's own port when it names none). A signed update must check out
    /// ([`signed::check`]) and be newer than the last one taken for its server; once a
    /// server's reports are signed, an unsigned one for it is refused, and so is one signed
    /// with another key while the server is up. A refusal is counted ([`Catalog::refusals`]).
    pub fn update(&self, peer: SocketAddr, raw: &[u8]) -> Result<((IpAddr, u16), Change), Refused> {
        let result = self.take(peer, raw);
        if let Err(refused) = &result {
            *lock(&self.refusals).entry(refused.kind()).or_default() += 1;
        }
        result
    }

    /// How many updates were refused so far, by kind ([`Refused::kind`]).
    pub fn refusals(&self) -> BTreeMap<&'static str, u64> {
        lock(&self.refusals).clone()
    }

    fn take(&self, peer: SocketAddr, raw: &[u8]) -> Result<((IpAddr, u16), Change), Refused> {
        let text = update::decode(raw).map_err(Refused::Update)?;
        let (mut record, signer) = match signed::split(&text) {
            Some(sealed) => {
                let (record, signer) = signed::check(
                    &sealed,
                    &self.config.keys,
                    peer.ip(),
                    signed::now_ms(),
                    self.config.window,
                )
                .map_err(Refused::Signature)?;
                (update::tidy(record), Some(signer))
            }
            None => (update::parse_text(&text).map_err(Refused::Update)?, None),
        };
        // What the catalog says of signatures is its own: a report cannot claim it.
        for member in [signed::VERIFIED, signed::SIGNATURE, signed::SIGNED_FROM] {
            record.remove(member);
        }
        if signer.is_none() {
            record.remove(signed::SIGNED_BY);
            record.remove(signed::SIGNED_AT_MS);
        }
        let port = record
            .get("port")
            .and_then(Value::as_i64)
            .and_then(|p| u16::try_from(p).ok())
            .unwrap_or(peer.port());
        let address = peer.ip().to_canonical();
        record.set("address", Value::String(address.to_string()));
        if record.get("name").and_then(Value::as_str).is_none() {
            record.set("name", Value::String(address.to_string()));
        }
        let key = (address, port);
        let now = Instant::now();
        let mut entries = self.lock();
        if !entries.contains_key(&key) && entries.len() >= MAX_RECORDS {
            let oldest = entries
                .iter()
                .filter(|(_, e)| self.is_down(e, now))
                .min_by_key(|(_, e)| e.last)
                .map(|(k, _)| *k);
            match oldest {
                Some(k) => {
                    entries.remove(&k);
                }
                None => return Err(Refused::Full),
            }
        }
        let change = match entries.get_mut(&key) {
            Some(e) => {
                let was_down = e.down || self.is_down(e, now);
                match (&e.signer, &signer) {
                    (Some(was), None) => return Err(Refused::Unsigned { key: was.clone() }),
                    (Some(was), Some(s)) if s.key != *was && !was_down => {
                        return Err(Refused::OtherKey {
                            key: s.key.clone(),
                            was: was.clone(),
                        })
                    }
                    (Some(_), Some(s)) if s.at_ms <= e.signed_at_ms => {
                        return Err(Refused::Replayed {
                            at_ms: s.at_ms,
                            last_ms: e.signed_at_ms,
                        })
                    }
                    _ => {}
                }
                if let Some(s) = &signer {
                    e.signer = Some(s.key.clone());
                    e.signed_at_ms = s.at_ms;
                }
                e.gap = Some(now.duration_since(e.last));
                e.last = now;
                e.last_unix = unix_now();
                e.record = record;
                e.reports += 1;
                e.down = false;
                if was_down {
                    Change::Returned
                } else {
                    Change::Refreshed
                }
            }
            None => {
                entries.insert(
                    key,
                    Entry {
                        record,
                        last: now,
                        last_unix: unix_now(),
                        gap: None,
                        reports: 1,
                        down: false,
                        signed_at_ms: signer.as_ref().map_or(0, |s| s.at_ms),
                        signer: signer.map(|s| s.key),
                    },
                );
                Change::New
            }
        };
        Ok((key, change))
    }

    /// How long `e` may stay silent: `--down-after` if given, else three of the intervals it
    /// declares (`interval`), else three of the gaps seen between its reports.
    fn down_after(&self, e: &Entry) -> Duration {
        if let Some(d) = self.config.down_after {
            return d;
        }
        let declared = e
            .record
            .get("interval")
            .and_then(Value::as_f64)
            .filter(|&s| s > 0.0 && s < 1e9)
            .map(Duration::from_secs_f64);
        match declared.or(e.gap) {
            Some(interval) => interval.mul_f64(MISSED_REPORTS).max(Duration::from_secs(1)),
            None => DEFAULT_DOWN_AFTER,
        }
    }

    /// The key the reports of the server at `key` are signed with.
    pub fn signer(&self, key: &(IpAddr, u16)) -> Option<String> {
        self.lock().get(key).and_then(|e| e.signer.clone())
    }

    fn is_down(&self, e: &Entry, now: Instant) -> bool {
        now.duration_since(e.last) > self.down_after(e)
    }

    /// Marks servers that fell silent; returns those that went down since the last sweep.
    pub fn sweep(&self) -> Vec<(IpAddr, u16, String)> {
        let now = Instant::now();
        let mut gone = Vec::new();
        for (key, e) in self.lock().iter_mut() {
            let down = self.is_down(e, now);
            if down && !e.down {
                let name = e
                    .record
                    .get("name")
                    .map(Value::to_plain)
                    .unwrap_or_default();
                gone.push((key.0, key.1, name));
            }
            e.down = down;
        }
        gone
    }

    /// Every record, as cctools' catalog lists them (sorted by type, name and port), with the
    /// catalog's own members: `address`, `lastheardfrom`, and roost's `state` (up or down),
    /// `age` (seconds since the last report), `down_after` (seconds), `reports` (how many),
    /// `verified` (whether its reports are signed with a key the catalog holds) and, when
    /// they are, `signed_by` (the key) and `signed_at_ms`.
    pub fn records(&self) -> Vec<Value> {
        let now = Instant::now();
        let mut out: Vec<Value> = self
            .lock()
            .values()
            .map(|e| {
                let mut r = e.record.clone();
                r.set("lastheardfrom", Value::Int(e.last_unix));
                let state = if self.is_down(e, now) { "down" } else { "up" };
                r.set("state", Value::String(state.into()));
                r.set(
                    "age",
                    Value::Int(now.duration_since(e.last).as_secs() as i64),
                );
                r.set(
                    "down_after",
                    Value::Int(self.down_after(e).as_secs() as i64),
                );
                r.set("reports", Value::Int(e.reports as i64));
                r.set(signed::VERIFIED, Value::Bool(e.signer.is_some()));
                if let Some(key) = &e.signer {
                    r.set(signed::SIGNED_BY, Value::String(key.clone()));
                }
                r
            })
            .collect();
        let field = |r: &Value, k: &str| r.get(k).map(Value::to_plain).unwrap_or_default();
        out.sort_by(|a, b| {
            (
                field(a, "type"),
                field(a, "name").to_lowercase(),
                field(a, "address"),
            )
                .cmp(&(
                    field(b, "type"),
                    field(b, "name").to_lowercase(),
                    field(b, "address"),
                ))
                .then(
                    a.get("port")
                        .and_then(Value::as_i64)
                        .cmp(&b.get("port").and_then(Value::as_i64)),
                )
        });
        out
    }
}

/// The JSON array of records, one per line, as cctools' `/query.json` prints it.
pub fn records_json(records: &[Value]) -> String {
    let mut out = String::from("[\n");
    for (i, r) in records.iter().enumerate() {
        if i > 0 {
            out.push_str(",\n");
        }
        out.push_str(&r.to_json());
    }
    out.push_str("\n]\n");
    out
}

/// The `key value` form of `/query.text`: one line per member, a blank line after each record.
pub fn records_text(records: &[Value]) -> String {
    let mut out = String::new();
    for r in records {
        if let Value::Object(members) = r {
            for (k, v) in members {
                let v = v.to_plain().replace(['\n', '\r'], " ");
                out.push_str(&format!("{k} {v}\n"));
            }
        }
        out.push('\n');
    }
    out
}

/// Writes one `key=value` log line on standard error, as `roost serve` does.
pub fn log(event: &str, fields: &[(&str, &dyn std::fmt::Display)]) {
    let mut line = format!("{} event={event}", log_time());
    for (k, v) in fields {
        let v = v.to_string();
        if v.is_empty() || v.contains([' ', '"', '=']) || v.chars().any(char::is_control) {
            line.push_str(&format!(" {k}={v:?}"));
        } else {
            line.push_str(&format!(" {k}={v}"));
        }
    }
    line.push('\n');
    let _ = io::stderr().lock().write_all(line.as_bytes());
}

fn log_time() -> String {
    let t = roost_base::date::Utc::of(unix_now());
    format!("{}T{:02}:{:02}:{:02}Z", t.ymd(), t.hour, t.minute, t.second)
}

/// The catalog server: its sockets and table.
pub struct CatalogServer {
    catalog: Arc<Catalog>,
    udp: UdpSocket,
    http: TcpListener,
    tcp_updates: TcpListener,
}

impl CatalogServer {
    /// Binds UDP `port`, TCP `port` (queries) and TCP `port + 1` (updates) on `listen`. With
    /// port 0, picks a port where all three are free.
    pub fn bind(listen: IpAddr, port: u16, config: Config) -> io::Result<CatalogServer> {
        let bind_at = |port: u16| -> io::Result<(UdpSocket, TcpListener, TcpListener)> {
            let http = TcpListener::bind((listen, port))?;
            let port = http.local_addr()?.port();
            let next = port
                .checked_add(1)
                .ok_or_else(|| io::Error::new(io::ErrorKind::AddrInUse, "no port after 65535"))?;
            let udp = UdpSocket::bind((listen, port))?;
            let tcp_updates = TcpListener::bind((listen, next))?;
            Ok((udp, http, tcp_updates))
        };
        let (udp, http, tcp_updates) = if port == 0 {
            let mut attempt = 0;
            loop {
                match bind_at(0) {
                    Ok(sockets) => break sockets,
                    Err(e) if attempt < 50 && e.kind() == io::ErrorKind::AddrInUse => attempt += 1,
                    Err(e) => return Err(e),
                }
            }
        } else {
            bind_at(port)?
        };
        Ok(CatalogServer {
            catalog: Arc::new(Catalog::new(config)),
            udp,
            http,
            tcp_updates,
        })
    }

    /// The address queries and UDP updates go to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.http.local_addr()
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.clone()
    }

    /// Serves until the process ends.
    pub fn run(self) -> io::Result<()> {
        let CatalogServer {
            catalog,
            udp,
            http,
            tcp_updates,
        } = self;
        {
            let catalog = catalog.clone();
            std::thread::Builder::new()
                .name("udp updates".into())
                .spawn(move || udp_loop(&catalog, &udp))?;
        }
        {
            let catalog = catalog.clone();
            std::thread::Builder::new()
                .name("tcp updates".into())
                .spawn(move || tcp_update_loop(&catalog, &tcp_updates))?;
        }
        {
            let catalog = catalog.clone();
            std::thread::Builder::new()
                .name("sweeper".into())
                .spawn(move || loop {
                    std::thread::sleep(Duration::from_millis(500));
                    for (addr, port, name) in catalog.sweep() {
                        log(
                            "down",
                            &[("server", &SocketAddr::new(addr, port)), ("name", &name)],
                        );
                    }
                })?;
        }
        let active = Arc::new(AtomicUsize::new(0));
        loop {
            let (stream, peer) = match http.accept() {
                Ok(pair) => pair,
                Err(e) => {
                    log("accept", &[("error", &e)]);
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            if active.fetch_add(1, Ordering::AcqRel) >= MAX_QUERIES {
                active.fetch_sub(1, Ordering::AcqRel);
                log(
                    "refused",
                    &[("peer", &peer), ("reason", &"too many queries")],
                );
                continue;
            }
            let catalog = catalog.clone();
            let active2 = active.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("query {peer}"))
                .stack_size(128 * 1024)
                .spawn(move || {
                    if let Err(e) = answer_query(&catalog, stream) {
                        if catalog.config.verbose {
                            log("query", &[("peer", &peer), ("error", &e)]);
                        }
                    }
                    active2.fetch_sub(1, Ordering::AcqRel);
                });
            if spawned.is_err() {
                active.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Refusals are logged, at most this many a minute.
struct Throttle {
    window: Instant,
    count: u32,
}

impl Throttle {
    fn allow(&mut self) -> bool {
        if self.window.elapsed() > Duration::from_secs(60) {
            self.window = Instant::now();
            self.count = 0;
        }
        self.count += 1;
        self.count <= 10
    }
}

fn record_update(catalog: &Catalog, peer: SocketAddr, raw: &[u8], via: &str, t: &mut Throttle) {
    match catalog.update(peer, raw) {
        Ok(((addr, port), change)) => {
            let signed_by = catalog
                .signer(&(addr, port))
                .unwrap_or_else(|| "-".to_string());
            let event = match change {
                Change::New => "new",
                Change::Returned => "up",
                Change::Refreshed if catalog.config.verbose => "update",
                Change::Refreshed => return,
            };
            log(
                event,
                &[
                    ("server", &SocketAddr::new(addr, port)),
                    ("from", &peer),
                    ("via", &via),
                    ("signed_by", &signed_by),
                ],
            );
        }
        Err(e) => {
            if t.allow() {
                let count = catalog.refusals().get(e.kind()).copied().unwrap_or(0);
                log(
                    "ignored",
                    &[
                        ("from", &peer),
                        ("via", &via),
                        ("reason", &e),
                        ("kind", &e.kind()),
                        ("count", &count),
                    ],
                );
            }
        }
    }
}

fn udp_loop(catalog: &Catalog, udp: &UdpSocket) {
    let mut buf = vec![0u8; 65_536];
    let mut throttle = Throttle {
        window: Instant::now(),
        count: 0,
    };
    loop {
        match udp.recv_from(&mut buf) {
            Ok((n, peer)) => record_update(catalog, peer, &buf[..n], "udp", &mut throttle),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                log("udp", &[("error", &e)]);
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// cctools' TCP updates: a connection to port+1 carrying one update, then closed. Taken one at
/// a time with a short timeout, as cctools does.
fn tcp_update_loop(catalog: &Catalog, listener: &TcpListener) {
    let mut throttle = Throttle {
        window: Instant::now(),
        count: 0,
    };
    loop {
        let (stream, peer) = match listener.accept() {
            Ok(pair) => pair,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut data = Vec::new();
        let mut buf = [0u8; 16_384];
        let mut stream = stream;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
                break;
            }
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) if data.len() + n <= update::MAX_UPDATE => data.extend_from_slice(&buf[..n]),
                Ok(_) => {
                    data.clear();
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        if data.starts_with(b"GET ") {
            continue; // a web browser at the wrong port
        }
        if !data.is_empty() {
            record_update(catalog, peer, &data, "tcp", &mut throttle);
        }
    }
}

/// Reads from a stream until a deadline for the whole request, however slowly it trickles in.
struct DeadlineReader<'a> {
    stream: &'a TcpStream,
    deadline: Instant,
}

impl Read for DeadlineReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "query too slow"));
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

/// Answers one HTTP query.
fn answer_query(catalog: &Catalog, stream: TcpStream) -> io::Result<()> {
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let deadline = DeadlineReader {
        stream: &stream,
        deadline: Instant::now() + CLIENT_TIMEOUT,
    };
    let mut reader = BufReader::new(deadline.take(16 * 1024));
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut words = line.split_whitespace();
    let (method, target) = match (words.next(), words.next()) {
        (Some(m), Some(t)) => (m.to_string(), t.to_string()),
        _ => return Ok(()),
    };
    // The headers, which say nothing we need.
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
    }
    let path = match target.strip_prefix("http://") {
        Some(rest) => rest.find('/').map(|i| &rest[i..]).unwrap_or("/"),
        None => &target,
    };
    let path = path.split('?').next().unwrap_or("");
    let (status, kind, body) = if method != "GET" && method != "HEAD" {
        (
            "405 Method Not Allowed",
            "text/plain",
            "only GET\n".to_string(),
        )
    } else if path == "/query.json" || path.starts_with("/query/") {
        // cctools' clients first try /query/<base64 filter>; they filter again themselves, so
        // the whole table is a correct answer.
        (
            "200 OK",
            "application/json",
            records_json(&catalog.records()),
        )
    } else if path == "/query.text" {
        ("200 OK", "text/plain", records_text(&catalog.records()))
    } else if path == "/" || path == "/query.html" {
        ("200 OK", "text/html", records_html(&catalog.records()))
    } else {
        (
            "404 Not Found",
            "text/plain",
            format!("no such page: {path}\n"),
        )
    };
    let mut out = format!(
        "HTTP/1.1 {status}\r\nServer: roost-catalog\r\nContent-Type: {kind}; charset=utf-8\r\n\
         Content-Length: {}\r\nAccess-Control-Allow-Origin: *\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if method != "HEAD" {
        out.extend_from_slice(body.as_bytes());
    }
    (&stream).write_all(&out)?;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    Ok(())
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn records_html(records: &[Value]) -> String {
    let mut out = String::from(
        "<!DOCTYPE html>\n<html><head><title>roost catalog</title></head><body>\n\
         <h1>roost catalog</h1>\n<p><a href=\"/query.text\">text</a> - \
         <a href=\"/query.json\">json</a></p>\n<table border=1>\n<tr><th>type</th><th>name</th>\
         <th>port</th><th>owner</th><th>state</th><th>signed_by</th><th>load</th><th>cpus</th>\
         <th>avail</th><th>version</th></tr>\n",
    );
    for r in records {
        out.push_str("<tr>");
        for k in [
            "type",
            "name",
            "port",
            "owner",
            "state",
            signed::SIGNED_BY,
            "load1",
            "cpus",
            "avail",
            "version",
        ] {
            let v = r.get(k).map(Value::to_plain).unwrap_or_default();
            out.push_str(&format!("<td>{}</td>", html_escape(&v)));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n</body></html>\n");
    out
}

/// Asks the catalog at `host:port` for every record (`GET /query.json`), over HTTP/1.1 as
/// any server or proxy speaks it (chunked or not: nginx in front of a catalog re-chunks the
/// answer). Works against cctools' catalog servers too. The environment's `http_proxy`
/// and `no_proxy` apply, as for curl.
pub fn query(host: &str, port: u16, timeout: Duration) -> Result<Vec<Value>, String> {
    let authority = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(timeout))
        .user_agent(concat!("roost/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let mut answer = agent
        .get(&format!("http://{authority}/query.json"))
        .call()
        .map_err(|e| format!("{authority}: {e}"))?;
    if answer.status() != 200 {
        return Err(format!("{authority}: HTTP status {}", answer.status()));
    }
    let body = answer
        .body_mut()
        .with_config()
        .limit(256 * 1024 * 1024)
        .read_to_vec()
        .map_err(|e| format!("{authority}: {e}"))?;
    match json::parse(&body) {
        Ok(Value::Array(records)) => Ok(records),
        Ok(_) => Err(format!("{authority}: the answer is not a JSON array")),
        Err(e) => Err(format!("{authority}: the answer is not JSON: {e}")),
    }
}

/// The records of the first of `catalogs` that answers, else why each did not.
pub fn query_first(
    catalogs: &[(String, u16)],
    timeout: Duration,
) -> Result<Vec<Value>, Vec<String>> {
    let mut why = Vec::new();
    for (host, port) in catalogs {
        match query(host, *port, timeout) {
            Ok(records) => return Ok(records),
            Err(e) => why.push(e),
        }
    }
    Err(why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_ports() {
        assert_eq!(parse_host_port("a", 9097), Ok(("a".into(), 9097)));
        assert_eq!(parse_host_port("a:1", 9097), Ok(("a".into(), 1)));
        assert_eq!(parse_host_port("[::1]:5", 9097), Ok(("::1".into(), 5)));
        assert_eq!(parse_host_port("::1", 9097), Ok(("::1".into(), 9097)));
        assert!(parse_host_port("a:x", 9097).is_err());
        assert!(parse_host_port(":5", 9097).is_err());
        assert!(parse_host_port("a:0", 9097).is_err());
    }

    #[test]
    fn table_keys_states_and_returns() {
        let catalog = Catalog::new(Config::default());
        let peer: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let (key, change) = catalog
            .update(peer, br#"{"type":"chirp","port":9094,"interval":0.1}"#)
            .unwrap();
        assert_eq!(key, ("127.0.0.1".parse().unwrap(), 9094));
        assert_eq!(change, Change::New);
        let other: SocketAddr = "127.0.0.1:40001".parse().unwrap();
        catalog
            .update(other, b"type chirp\nport 9095\ninterval 0.1\n")
            .unwrap();
        let records = catalog.records();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0].get("state").unwrap().as_str(), Some("up"));
        assert_eq!(records[0].get("name").unwrap().as_str(), Some("127.0.0.1"));
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(catalog.sweep().len(), 2);
        assert!(catalog.sweep().is_empty(), "reported down once");
        assert!(catalog
            .records()
            .iter()
            .all(|r| r.get("state").unwrap().as_str() == Some("down")));
        let (_, change) = catalog
            .update(peer, br#"{"type":"chirp","port":9094,"interval":0.1}"#)
            .unwrap();
        assert_eq!(change, Change::Returned);
        assert!(catalog.update(peer, b"{\"port\":").is_err());
        let text = records_text(&catalog.records());
        assert!(text.contains("port 9094\n"), "{text}");
    }

    #[test]
    fn signed_servers_are_verified_and_cannot_be_downgraded_replayed_or_taken_over() {
        let pool = keys::Key::new("pool", b"secret").unwrap();
        let other = keys::Key::new("other", b"another").unwrap();
        let catalog = Catalog::new(Config {
            keys: Keys::new(vec![pool.clone(), other.clone()]).unwrap(),
            down_after: Some(Duration::from_millis(300)),
            ..Config::default()
        });
        let peer: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let report = |cpus: i64| {
            json::parse(format!(r#"{{"type":"chirp","port":9094,"cpus":{cpus}}}"#).as_bytes())
                .unwrap()
        };
        let sealed = |key: &keys::Key, cpus: i64, at_ms: i64| {
            signed::seal(&report(cpus), key, peer.ip(), at_ms).into_bytes()
        };
        let now = signed::now_ms();
        let first = sealed(&pool, 2, now);
        catalog.update(peer, &first).unwrap();
        let shown = |c: &Catalog| c.records().into_iter().next().unwrap();
        let r = shown(&catalog);
        assert_eq!(r.get("verified"), Some(&Value::Bool(true)));
        assert_eq!(r.get("signed_by").unwrap().as_str(), Some("pool"));
        assert_eq!(r.get("signature"), None);
        // The same bytes again: a replay.
        assert!(matches!(
            catalog.update(peer, &first),
            Err(Refused::Replayed { .. })
        ));
        // An unsigned report for the signed server, from its own address: refused.
        let forged = br#"{"type":"chirp","port":9094,"cpus":64,"verified":true}"#;
        assert!(matches!(
            catalog.update(peer, forged),
            Err(Refused::Unsigned { .. })
        ));
        // Another trusted key may not take it over while it is up.
        assert!(matches!(
            catalog.update(peer, &sealed(&other, 64, now + 1)),
            Err(Refused::OtherKey { .. })
        ));
        assert_eq!(shown(&catalog).get("cpus"), Some(&Value::Int(2)));
        catalog.update(peer, &sealed(&pool, 3, now + 2)).unwrap();
        assert_eq!(shown(&catalog).get("cpus"), Some(&Value::Int(3)));
        // Once it is down, a report signed with another key the catalog holds may (a key
        // changed); an unsigned one still may not.
        std::thread::sleep(Duration::from_millis(400));
        assert!(catalog.update(peer, forged).is_err());
        catalog.update(peer, &sealed(&other, 4, now + 3)).unwrap();
        assert_eq!(
            shown(&catalog).get("signed_by").unwrap().as_str(),
            Some("other")
        );
        let counts = catalog.refusals();
        assert_eq!(counts.get("replayed"), Some(&1));
        assert_eq!(counts.get("unsigned-for-signed"), Some(&2));
        assert_eq!(counts.get("other-key"), Some(&1));
        // An unsigned server is shown unverified, whatever it claims.
        let stranger: SocketAddr = "127.0.0.2:40000".parse().unwrap();
        catalog
            .update(
                stranger,
                br#"{"type":"chirp","name":"z","port":1,"verified":true,"signed_by":"pool"}"#,
            )
            .unwrap();
        let r = catalog
            .records()
            .into_iter()
            .find(|r| r.get("name").and_then(Value::as_str) == Some("z"))
            .unwrap();
        assert_eq!(r.get("verified"), Some(&Value::Bool(false)));
        assert_eq!(r.get("signed_by"), None);
        // A copy of a signed report sent from elsewhere is refused.
        assert!(matches!(
            catalog.update(stranger, &sealed(&pool, 64, now + 10)),
            Err(Refused::Signature(signed::Problem::WrongAddress { .. }))
        ));
    }
}
