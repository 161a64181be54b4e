//! Accepting connections: one thread per client (small stacks, so a thousand idle clients
//! stay cheap), a cap on concurrent connections, and a log line when each one ends.

use crate::auth::AuthConfig;
use crate::export::Export;
use crate::log::{self, Level};
use crate::session;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Limits that protect the server from clients, careless or hostile.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Clients connected at once; more are turned away.
    pub max_connections: usize,
    /// A client silent for this long is disconnected.
    pub idle_timeout: Duration,
    /// A client that stops in the middle of a message for this long is disconnected.
    pub stall_timeout: Duration,
    /// A request line must arrive whole within this long of its first byte.
    pub line_timeout: Duration,
    /// Clients connected at once from one address (one /64 for IPv6).
    pub max_per_address: usize,
    /// Longest request line, in bytes (Chirp's own limit is 1024).
    pub max_line: usize,
    /// Largest payload a single request may carry or ask for, in bytes.
    pub max_message: u64,
    /// How long an authenticated connection polls for the next request before its
    /// thread sleeps (adaptive: a client that is slower than this soon stops being
    /// polled for); zero never polls.
    pub request_poll: Duration,
}

/// The default of [`Limits::request_poll`].
pub const DEFAULT_REQUEST_POLL: Duration = Duration::from_micros(50);

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 4096,
            idle_timeout: Duration::from_secs(3600),
            stall_timeout: Duration::from_secs(60),
            line_timeout: Duration::from_secs(10),
            max_per_address: 256,
            max_line: 1024,
            max_message: roost_wire::MAX_BLOCK,
            request_poll: DEFAULT_REQUEST_POLL,
        }
    }
}

/// Everything a connection needs, shared by all of them.
pub struct Shared {
    pub export: Arc<Export>,
    /// The job RPCs' state, with `--jobs`.
    pub jobs: Option<crate::jobs::Jobs>,
    /// The meter and ledger.
    pub accounting: Option<Arc<crate::accounting::Accounting>>,
    pub auth: AuthConfig,
    pub limits: Limits,
    connections: AtomicUsize,
    /// The counters `--metrics` shows; `None` without it.
    pub metrics: Option<Arc<crate::metrics::Metrics>>,
    /// Connections open from each address (IPv6 by /64).
    per_address: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>,
}

/// A bound server, ready to run.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
    /// Where `--metrics` scrapes come, served from [`Server::run`].
    metrics_listener: Option<TcpListener>,
}

/// The first line `roost serve` prints on standard output, naming where it listens, so a
/// script that started it with port 0 can find it ([`announced_addr`] reads it back).
pub fn announcement(addr: SocketAddr, export: &std::path::Path) -> String {
    format!(
        "roost serve: listening on {addr}, exporting {}",
        export.display()
    )
}

/// The address in an [`announcement`] line.
pub fn announced_addr(line: &str) -> Option<SocketAddr> {
    line.strip_prefix("roost serve: listening on ")?
        .split(',')
        .next()?
        .parse()
        .ok()
}

/// See [`Server::bind_listener`].
fn dual_stack_or_plain(addr: SocketAddr) -> io::Result<TcpListener> {
    use std::os::fd::FromRawFd;
    if !(addr.is_ipv6() && addr.ip().is_unspecified()) {
        return TcpListener::bind(addr);
    }
    // SAFETY: creates a descriptor owned by nobody else, handed to `TcpListener` at once.
    let fd = unsafe { libc::socket(libc::AF_INET6, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned here alone.
    let listener = unsafe { TcpListener::from_raw_fd(fd) };
    let set = |level, option, value: libc::c_int| {
        // SAFETY: an int option of a socket we own, from a live local.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                level,
                option,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    set(libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 0)?;
    // As std's bind: a restarted server may take its port while old connections linger.
    set(libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    // SAFETY: `struct sockaddr_in6` is plain data, valid all zeros.
    let mut sin6: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    sin6.sin6_port = addr.port().to_be();
    // SAFETY: binds our socket to a fully initialised `sockaddr_in6` of the size given.
    let rc = unsafe {
        libc::bind(
            fd,
            (&sin6 as *const libc::sockaddr_in6).cast(),
            std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
        )
    };
    // SAFETY: a plain call on our own bound socket.
    if rc < 0 || unsafe { libc::listen(fd, 128) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(listener)
}

/// A client's address as ACLs, logins and limits name it: an IPv4 client of a dual-stack
/// socket arrives as `::ffff:a.b.c.d` and counts as `a.b.c.d`.
pub(crate) fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

/// Each connection thread's stack: requests are handled with heap buffers, so this is plenty.
const CONNECTION_STACK: usize = 256 * 1024;

impl Server {
    pub fn bind(
        addr: SocketAddr,
        export: Export,
        auth: AuthConfig,
        limits: Limits,
    ) -> io::Result<Server> {
        Ok(Server::new(
            Server::bind_listener(addr)?,
            export,
            auth,
            limits,
        ))
    }

    /// Listens on `addr`. The unspecified IPv6 address (`[::]`) takes IPv4 clients too,
    /// whatever the host's `net.ipv6.bindv6only` says: one socket, both families.
    pub fn bind_listener(addr: SocketAddr) -> io::Result<TcpListener> {
        dual_stack_or_plain(addr)
    }

    /// A server on a listener [`Server::bind_listener`] made.
    pub fn new(listener: TcpListener, export: Export, auth: AuthConfig, limits: Limits) -> Server {
        let shared = Arc::new(Shared {
            export: Arc::new(export),
            jobs: None,
            accounting: None,
            auth,
            limits,
            connections: AtomicUsize::new(0),
            metrics: None,
            per_address: Default::default(),
        });
        Server {
            listener,
            shared,
            metrics_listener: None,
        }
    }

    /// Counts requests, bytes and connections and shows them, with the jobs' states and
    /// the thermostat's limits, on `GET /metrics` at `addr` ([`crate::metrics`]). Call
    /// before [`Server::run`]; returns where it listens.
    pub fn enable_metrics(&mut self, addr: SocketAddr) -> io::Result<SocketAddr> {
        let shared = Arc::get_mut(&mut self.shared)
            .ok_or_else(|| io::Error::other("the server is already running"))?;
        let listener = TcpListener::bind(addr)?;
        let bound = listener.local_addr()?;
        shared.metrics = Some(Arc::default());
        self.metrics_listener = Some(listener);
        Ok(bound)
    }

    /// Serves the job RPCs (`--jobs`), taking up the jobs a previous server left in
    /// `config.dir`. Call before [`Server::run`].
    pub fn enable_jobs(&mut self, config: crate::jobs::JobConfig) -> Result<(), String> {
        let shared = Arc::get_mut(&mut self.shared).ok_or("the server is already running")?;
        let config_network = config.network;
        let jobs =
            crate::jobs::Jobs::open(shared.export.clone(), config, shared.accounting.clone())?;
        if let Some(accounting) = &shared.accounting {
            accounting.offer(jobs.offer_source());
        }
        if config_network {
            // A job that reaches this server must not log in as the user it runs as.
            shared.auth.unix_refused.push(jobs.guest_uid());
        }
        shared.jobs = Some(jobs);
        Ok(())
    }

    /// Meters every session into `accounting`'s ledger and serves it (`ledger`). Call
    /// before [`Server::enable_jobs`], so jobs are metered too, and before [`Server::run`].
    pub fn enable_accounting(
        &mut self,
        accounting: Arc<crate::accounting::Accounting>,
    ) -> Result<(), String> {
        let shared = Arc::get_mut(&mut self.shared).ok_or("the server is already running")?;
        shared.accounting = Some(accounting);
        Ok(())
    }

    /// Reaps the jobs and run directories clients abandoned ([`crate::reaper`]), from now
    /// on. Call after [`Server::enable_jobs`].
    pub fn start_reaper(&self, config: crate::reaper::Config) -> io::Result<()> {
        crate::reaper::spawn(config, self.shared.export.clone(), self.shared.jobs.clone()).map(drop)
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the process ends. Uploads a killed predecessor left half-done are
    /// swept away meanwhile, in the background ([`crate::stale_uploads`]).
    pub fn run(self) -> io::Result<()> {
        if let (Some(listener), Some(metrics)) = (self.metrics_listener, &self.shared.metrics) {
            let metrics = Arc::clone(metrics);
            let shared = Arc::clone(&self.shared);
            std::thread::Builder::new()
                .name("metrics".into())
                .spawn(move || {
                    crate::metrics::serve(listener, || metrics.render(&shared.gauges()))
                })?;
        }
        let export = self.shared.export.clone();
        let started = std::time::SystemTime::now();
        let _ = std::thread::Builder::new()
            .name("stale uploads".into())
            .spawn(move || {
                let removed = crate::stale_uploads::sweep(&export, started);
                if removed > 0 {
                    log::event(Level::Info, "stale-uploads", &[("removed", &removed)]);
                }
            });
        loop {
            let (stream, peer) = match self.listener.accept() {
                Ok((stream, peer)) => (stream, canonical(peer)),
                Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) => {
                    log::event(Level::Error, "accept", &[("error", &e)]);
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::event(Level::Error, "accept", &[("error", &e)]);
                    continue;
                }
            };
            let active = self.shared.connections.fetch_add(1, Ordering::AcqRel) + 1;
            if active > self.shared.limits.max_connections {
                self.shared.connections.fetch_sub(1, Ordering::AcqRel);
                log::event(
                    Level::Error,
                    "refused",
                    &[
                        ("peer", &peer),
                        ("reason", &"too many connections"),
                        ("limit", &self.shared.limits.max_connections),
                    ],
                );
                self.shared.count(crate::metrics::Metrics::refused);
                continue;
            }
            if !self.shared.enter(peer.ip()) {
                self.shared.connections.fetch_sub(1, Ordering::AcqRel);
                log::event(
                    Level::Error,
                    "refused",
                    &[
                        ("peer", &peer),
                        ("reason", &"too many connections from this address"),
                        ("limit", &self.shared.limits.max_per_address),
                    ],
                );
                self.shared.count(crate::metrics::Metrics::refused);
                continue;
            }
            self.shared.count(crate::metrics::Metrics::accepted);
            let shared = self.shared.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("conn {peer}"))
                .stack_size(CONNECTION_STACK)
                .spawn(move || {
                    connection(&shared, stream, peer);
                    shared.leave(peer.ip());
                    shared.connections.fetch_sub(1, Ordering::AcqRel);
                });
            if let Err(e) = spawned {
                self.shared.leave(peer.ip());
                self.shared.connections.fetch_sub(1, Ordering::AcqRel);
                log::event(Level::Error, "refused", &[("peer", &peer), ("error", &e)]);
            }
        }
    }
}

impl Shared {
    /// Counts with `--metrics` (`count(Metrics::accepted)`); nothing without.
    pub fn count(&self, what: impl FnOnce(&crate::metrics::Metrics)) {
        if let Some(m) = &self.metrics {
            what(m);
        }
    }

    /// The state `--metrics` shows as it is now.
    fn gauges(&self) -> crate::metrics::Gauges {
        crate::metrics::Gauges {
            connections: self.connections.load(Ordering::Relaxed),
            jobs: self.jobs.as_ref().map(|j| j.counts()).unwrap_or_default(),
            limits: self.jobs.as_ref().map(|j| j.limits_now()),
        }
    }

    /// Counts a new connection from `ip`; false if its address already has its share.
    fn enter(&self, ip: std::net::IpAddr) -> bool {
        let mut map = self.per_address.lock().unwrap_or_else(|e| e.into_inner());
        let count = map.entry(crate::throttle::block(ip)).or_insert(0);
        if *count >= self.limits.max_per_address {
            return false;
        }
        *count += 1;
        true
    }

    /// Counts a connection from `ip` as ended.
    fn leave(&self, ip: std::net::IpAddr) {
        let mut map = self.per_address.lock().unwrap_or_else(|e| e.into_inner());
        let block = crate::throttle::block(ip);
        if let Some(count) = map.get_mut(&block) {
            *count -= 1;
            if *count == 0 {
                map.remove(&block);
            }
        }
    }
}

/// Runs one client's session, containing any panic to this connection.
fn connection(shared: &Shared, stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    // Probe quiet clients, so a peer that vanished without a word (a crashed host, a NAT box
    // that forgot the flow) frees its thread instead of waiting out the idle timeout.
    let _ = roost_client::set_keepalive(&stream, roost_client::Keepalive::default());
    let started = std::time::Instant::now();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        session::serve(shared, stream, peer)
    }));
    let elapsed_ms = started.elapsed().as_millis();
    match outcome {
        Ok(summary) => log::event(
            Level::Info,
            "disconnect",
            &[
                ("peer", &peer),
                ("subject", &summary.subject.as_deref().unwrap_or("-")),
                ("requests", &summary.requests),
                ("ms", &elapsed_ms),
                ("reason", &summary.reason),
            ],
        ),
        Err(_) => log::event(
            Level::Error,
            "panic",
            &[("peer", &peer), ("ms", &elapsed_ms)],
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcements_read_back() {
        let addr: SocketAddr = "127.0.0.1:40123".parse().unwrap();
        let line = announcement(addr, std::path::Path::new("/srv/a, b"));
        assert_eq!(announced_addr(&line), Some(addr));
        assert_eq!(announced_addr("something else"), None);
    }
}
