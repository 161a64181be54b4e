//! `roost serve --metrics ADDR`: the server's counters in Prometheus' text format on
//! `GET /metrics` of a small HTTP listener — requests and failures by RPC, file bytes read
//! and written, connections, jobs by state and the thermostat's limits in force.
//!
//! The listener answers anyone who reaches it and shows no file names or subjects, only
//! counts; bind it to loopback or a management network (see docs/serve.md).

use crate::thermostat::schedule::Limits;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// What the sessions count as they go.
#[derive(Default)]
pub struct Metrics {
    /// Requests and failed requests by RPC name (names come from the protocol's own
    /// list, so the set is bounded).
    rpcs: Mutex<BTreeMap<String, [u64; 2]>>,
    read: AtomicU64,
    written: AtomicU64,
    accepted: AtomicU64,
    refused: AtomicU64,
}

/// What is read when a scrape comes: the state right now.
pub struct Gauges {
    pub connections: usize,
    /// Jobs by state name (`--jobs`), empty without.
    pub jobs: Vec<(&'static str, usize)>,
    /// The thermostat's limits in force (`--jobs`).
    pub limits: Option<Limits>,
}

impl Metrics {
    /// One request answered, `failed` when its answer was an error.
    pub fn rpc(&self, name: &str, failed: bool) {
        let mut rpcs = self.rpcs.lock().expect("metrics lock");
        let count = match rpcs.get_mut(name) {
            Some(c) => c,
            None => rpcs.entry(name.to_string()).or_default(),
        };
        count[0] += 1;
        count[1] += u64::from(failed);
    }

    /// File bytes sent to clients.
    pub fn read(&self, bytes: u64) {
        self.read.fetch_add(bytes, Ordering::Relaxed);
    }

    /// File bytes received from clients.
    pub fn written(&self, bytes: u64) {
        self.written.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn accepted(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection refused by a limit (`--max-connections`, `--max-per-address`).
    pub fn refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// The text exposition format (version 0.0.4).
    pub fn render(&self, gauges: &Gauges) -> String {
        let mut out = String::new();
        let mut family = |name: &str, kind: &str, help: &str| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        family(
            "roost_requests_total",
            "counter",
            "Requests answered, by RPC.",
        );
        family(
            "roost_request_errors_total",
            "counter",
            "Requests answered with an error, by RPC.",
        );
        let rpcs = self.rpcs.lock().expect("metrics lock").clone();
        let mut lines = String::new();
        for (name, [requests, errors]) in &rpcs {
            let _ = writeln!(lines, "roost_requests_total{{rpc=\"{name}\"}} {requests}");
            let _ = writeln!(
                lines,
                "roost_request_errors_total{{rpc=\"{name}\"}} {errors}"
            );
        }
        out.push_str(&lines);
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        for (name, kind, help, value) in [
            (
                "roost_read_bytes_total",
                "counter",
                "File bytes sent to clients.",
                load(&self.read),
            ),
            (
                "roost_written_bytes_total",
                "counter",
                "File bytes received from clients.",
                load(&self.written),
            ),
            (
                "roost_connections_accepted_total",
                "counter",
                "Connections accepted.",
                load(&self.accepted),
            ),
            (
                "roost_connections_refused_total",
                "counter",
                "Connections refused by a limit.",
                load(&self.refused),
            ),
            (
                "roost_connections",
                "gauge",
                "Connections open now.",
                gauges.connections as u64,
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
        if !gauges.jobs.is_empty() {
            let _ = writeln!(
                out,
                "# HELP roost_jobs Jobs by state.\n# TYPE roost_jobs gauge"
            );
            for (state, n) in &gauges.jobs {
                let _ = writeln!(out, "roost_jobs{{state=\"{state}\"}} {n}");
            }
        }
        if let Some(limits) = gauges.limits {
            let _ = writeln!(
                out,
                "# HELP roost_thermostat_cpu_percent CPU share guest jobs may take now.\n\
                 # TYPE roost_thermostat_cpu_percent gauge\n\
                 roost_thermostat_cpu_percent {}",
                limits.cpu_percent
            );
            if let Some(bytes) = limits.mem_bytes {
                let _ = writeln!(
                    out,
                    "# HELP roost_thermostat_memory_bytes Memory guest jobs may hold now.\n\
                     # TYPE roost_thermostat_memory_bytes gauge\n\
                     roost_thermostat_memory_bytes {bytes}"
                );
            }
        }
        out
    }
}

/// Answers scrapes on `listener` until the process ends, one at a time (a scraper is one
/// client; a stalled one is dropped after 5 s).
pub fn serve(listener: TcpListener, page: impl Fn() -> String) {
    for stream in listener.incoming().flatten() {
        let _ = answer(stream, &page);
    }
}

fn answer(stream: TcpStream, page: &impl Fn() -> String) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?.take(16 * 1024));
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    // The rest of the head, unread otherwise (its headers say nothing roost needs).
    let mut header = String::new();
    while reader.read_line(&mut header)? > 2 {
        header.clear();
    }
    let mut words = request_line.split_whitespace();
    let (status, body) = match (words.next(), words.next()) {
        (Some("GET"), Some("/metrics")) => ("200 OK", page()),
        (Some("GET"), Some(_)) => (
            "404 Not Found",
            "roost serve: metrics are at /metrics\n".into(),
        ),
        _ => (
            "405 Method Not Allowed",
            "roost serve: only GET /metrics\n".into(),
        ),
    };
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_render_as_prometheus_text() {
        let m = Metrics::default();
        m.rpc("open", false);
        m.rpc("open", true);
        m.rpc("stat", false);
        m.read(10);
        m.written(7);
        m.accepted();
        let text = m.render(&Gauges {
            connections: 3,
            jobs: vec![("started", 2)],
            limits: Some(Limits {
                cpu_percent: 50,
                mem_bytes: Some(1 << 30),
            }),
        });
        for line in [
            "roost_requests_total{rpc=\"open\"} 2",
            "roost_request_errors_total{rpc=\"open\"} 1",
            "roost_requests_total{rpc=\"stat\"} 1",
            "roost_read_bytes_total 10",
            "roost_written_bytes_total 7",
            "roost_connections_accepted_total 1",
            "roost_connections 3",
            "roost_jobs{state=\"started\"} 2",
            "roost_thermostat_cpu_percent 50",
            "roost_thermostat_memory_bytes 1073741824",
            "# TYPE roost_requests_total counter",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
    }
}
