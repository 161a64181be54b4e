//! `chirp-bench`: `roost serve` side by side with cctools' `chirp_server` and with raw TCP on
//! loopback, in one run: per-operation latency, sequential bandwidth, idle-connection memory
//! and many-client stat load. Prints a Markdown report for `docs/benchmarks.md`.
//!
//! Usage: `chirp-bench --roost target/release/roost [--runs 5] [--ops 20000] [--mib 1024]
//! [--idle 1000] [--clients 64] [--seconds 5]`

mod floor;
mod servers;
mod stats;

use roost_client::{Client, Credentials, Method, OpenFlags, Options};
use servers::RunningServer;
use stats::median;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

struct Config {
    roost: PathBuf,
    runs: usize,
    ops: usize,
    mib: u64,
    idle: usize,
    clients: usize,
    seconds: u64,
}

fn parse_args() -> Result<Config, String> {
    let mut config = Config {
        roost: PathBuf::from("target/release/roost"),
        runs: 5,
        ops: 20_000,
        mib: 1024,
        idle: 1000,
        clients: 64,
        seconds: 5,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String| {
            v.parse::<u64>()
                .map_err(|_| format!("{flag}: '{v}' is not a number"))
        };
        match flag.as_str() {
            "--roost" => config.roost = PathBuf::from(value()?),
            "--runs" => config.runs = number(value()?)? as usize,
            "--ops" => config.ops = number(value()?)? as usize,
            "--mib" => config.mib = number(value()?)?,
            "--idle" => config.idle = number(value()?)? as usize,
            "--clients" => config.clients = number(value()?)? as usize,
            "--seconds" => config.seconds = number(value()?)?,
            "--echo-server" => floor::echo_server(),
            "--help" | "-h" => {
                println!("usage: chirp-bench [--roost PATH] [--runs N] [--ops N] [--mib N] [--idle N] [--clients N] [--seconds N]");
                std::process::exit(0);
            }
            other => return Err(format!("unknown option {other} (try --help)")),
        }
    }
    Ok(config)
}

fn main() {
    let config = match parse_args() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("chirp-bench: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&config) {
        eprintln!("chirp-bench: {e}");
        std::process::exit(1);
    }
}

fn options() -> Options {
    Options {
        credentials: Credentials::only(&[Method::Address]),
        ..Options::default()
    }
}

fn progress(what: &str) {
    eprintln!("chirp-bench: {what}");
}

fn run(config: &Config) -> Result<(), Box<dyn std::error::Error>> {
    servers::raise_fd_limit();
    let roost = RunningServer::roost(&config.roost)?;
    let cctools = RunningServer::cctools()?;
    let servers = [&roost, &cctools];
    for s in servers {
        s.create_file("small", &[b'x'; 64 * 1024])?;
    }

    println!("## roost serve (Chirp server)\n");
    println!("Loopback, one client connection, {} runs of {} operations each; medians of the per-run medians.", config.runs, config.ops);
    println!("The floor for each operation is a raw TCP round trip carrying the same bytes (a 32-byte request line and a short reply line, plus the operation's data) to an echo server in another process; open+close is two round trips. cctools runs {} operations per run (it is ~50x slower).\n", config.ops / 10);

    progress("latency");
    let echo = servers::EchoServer::start()?;
    let in_process = median(
        &(0..config.runs)
            .map(|_| floor::round_trip_us(config.ops, None, 0, 0))
            .collect::<Vec<_>>(),
    );
    println!("| operation | raw TCP floor µs | roost µs | cctools µs | roost / floor | roost / cctools |");
    println!("|---|---|---|---|---|---|");
    for op in LatencyOp::ALL {
        let (trips, send, receive) = op.wire_bytes();
        let one_trip = median(
            &(0..config.runs)
                .map(|_| floor::round_trip_us(config.ops, Some(echo.port), send, receive))
                .collect::<Vec<_>>(),
        );
        let floor = one_trip * trips as f64;
        let mut medians = Vec::new();
        for (s, ops) in [(&roost, config.ops), (&cctools, (config.ops / 10).max(1))] {
            let mut c = Client::connect(&s.authority(), &options())?;
            let per_run: Vec<f64> = (0..config.runs)
                .map(|_| op.measure(&mut c, ops))
                .collect::<Result<_, _>>()?;
            medians.push(median(&per_run));
        }
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.2}x | {:.2}x |",
            op.name(),
            floor,
            medians[0],
            medians[1],
            medians[0] / floor,
            medians[0] / medians[1]
        );
    }
    println!("\nFor reference, the same small round trip between two threads of one process: {in_process:.1} µs.");

    progress("bandwidth");
    let bytes = config.mib << 20;
    println!(
        "\nSequential transfer of a {} MiB file in 64 KiB blocks (MB/s, median of {} runs).",
        config.mib,
        config.runs.min(3)
    );
    println!(
        "Raw socket copy: the same bytes through one loopback TCP connection between two threads."
    );
    let raw: Vec<f64> = (0..config.runs.min(3))
        .map(|_| floor::copy_mb_s(bytes, None))
        .collect();
    let raw = median(&raw);
    let floor_file = roost.dir().join("floor");
    let raw_file: Vec<f64> = (0..config.runs.min(3))
        .map(|_| floor::copy_mb_s(bytes, Some(&floor_file)))
        .collect();
    let _ = std::fs::remove_file(&floor_file);
    println!(
        "Raw socket → file: the receiver also writes the bytes into a file on the exports' file system (the floor for uploads): {:.0} MB/s.\n",
        median(&raw_file)
    );
    println!("| direction | raw socket | roost, pipelined | cctools, pipelined | cctools, one at a time | roost / raw | roost / cctools (1 at a time) |");
    println!("|---|---|---|---|---|---|---|");
    for direction in [Direction::Write, Direction::Read] {
        let mut rates = Vec::new();
        for (s, depth) in [(&roost, 16), (&cctools, 16), (&cctools, 1)] {
            let runs: Vec<f64> = (0..config.runs.min(3))
                .map(|_| direction.measure(s, bytes, depth))
                .collect::<Result<_, _>>()?;
            rates.push(median(&runs));
        }
        println!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0}% | {:.1}x |",
            direction.name(),
            raw,
            rates[0],
            rates[1],
            rates[2],
            100.0 * rates[0] / raw,
            rates[0] / rates[2]
        );
    }
    for s in servers {
        let _ = std::fs::remove_file(s.dir().join("big"));
    }

    progress("idle connections");
    let before = roost.rss_kib()?;
    let mut idle = Vec::with_capacity(config.idle);
    for _ in 0..config.idle {
        idle.push(Client::connect(&roost.authority(), &options())?);
    }
    std::thread::sleep(Duration::from_millis(500));
    let after = roost.rss_kib()?;
    println!(
        "\n{} idle authenticated connections: roost serve RSS {:.1} MB (was {:.1} MB with none).",
        config.idle,
        after as f64 / 1024.0,
        before as f64 / 1024.0
    );
    drop(idle);

    progress("stat load");
    for s in servers {
        let (ops, p50, p99) = stat_load(
            &s.authority(),
            config.clients,
            Duration::from_secs(config.seconds),
        )?;
        println!(
            "\n{} clients doing `stat` in a loop for {} s against {}: {:.0} ops/s, p50 {:.0} µs, p99 {:.0} µs.",
            config.clients,
            config.seconds,
            s.name(),
            ops,
            p50,
            p99
        );
    }
    Ok(())
}

/// The single-operation latencies measured.
#[derive(Clone, Copy)]
enum LatencyOp {
    Stat,
    OpenClose,
    Pread1,
    Pread8k,
    Pwrite8k,
}

impl LatencyOp {
    const ALL: [LatencyOp; 5] = [
        LatencyOp::Stat,
        LatencyOp::OpenClose,
        LatencyOp::Pread1,
        LatencyOp::Pread8k,
        LatencyOp::Pwrite8k,
    ];

    fn name(self) -> &'static str {
        match self {
            LatencyOp::Stat => "stat",
            LatencyOp::OpenClose => "open+close",
            LatencyOp::Pread1 => "pread 1 B",
            LatencyOp::Pread8k => "pread 8 KiB",
            LatencyOp::Pwrite8k => "pwrite 8 KiB",
        }
    }

    /// Round trips, request data bytes and reply data bytes of one operation.
    fn wire_bytes(self) -> (usize, usize, usize) {
        match self {
            LatencyOp::Stat => (1, 0, 70),
            LatencyOp::OpenClose => (2, 0, 35),
            LatencyOp::Pread1 => (1, 0, 1),
            LatencyOp::Pread8k => (1, 0, 8192),
            LatencyOp::Pwrite8k => (1, 8192, 0),
        }
    }

    /// The median latency of `ops` operations, in microseconds.
    fn measure(self, c: &mut Client, ops: usize) -> Result<f64, roost_client::Error> {
        let (fd, _) = c.open("/small", OpenFlags::from_letters(b"rw").expect("flags"), 0)?;
        let mut buf = vec![0u8; 8192];
        let data = vec![b'y'; 8192];
        let mut samples = Vec::with_capacity(ops);
        for i in 0..ops {
            let started = Instant::now();
            match self {
                LatencyOp::Stat => drop(c.stat("/small")?),
                LatencyOp::OpenClose => {
                    let (f, _) = c.open("/small", OpenFlags::READ, 0)?;
                    c.close(f)?;
                }
                LatencyOp::Pread1 => drop(c.pread(fd, &mut buf[..1], (i % 1000) as u64)?),
                LatencyOp::Pread8k => drop(c.pread(fd, &mut buf, 0)?),
                LatencyOp::Pwrite8k => drop(c.pwrite(fd, &data, 8192)?),
            }
            samples.push(started.elapsed().as_secs_f64() * 1e6);
        }
        c.close(fd)?;
        Ok(median(&samples))
    }
}

#[derive(Clone, Copy)]
enum Direction {
    Write,
    Read,
}

impl Direction {
    fn name(self) -> &'static str {
        match self {
            Direction::Write => "write",
            Direction::Read => "read",
        }
    }

    /// MB/s moving `bytes` to or from `/big` with `depth` requests in flight.
    fn measure(
        self,
        server: &RunningServer,
        bytes: u64,
        depth: usize,
    ) -> Result<f64, roost_client::Error> {
        let mut c = Client::connect(&server.authority(), &options())?;
        const BLOCK: usize = 64 * 1024;
        let started;
        match self {
            Direction::Write => {
                let (fd, _) = c.open(
                    "/big",
                    OpenFlags::from_letters(b"wct").expect("flags"),
                    0o644,
                )?;
                started = Instant::now();
                let mut source = Zeros { left: bytes };
                let n = c.write_pipelined(fd, 0, &mut source, BLOCK, depth)?;
                assert_eq!(n, bytes, "short write");
                c.close(fd)?;
            }
            Direction::Read => {
                let (fd, _) = c.open("/big", OpenFlags::READ, 0)?;
                started = Instant::now();
                let n = c.read_pipelined(fd, 0, bytes, BLOCK, depth, &mut io::sink())?;
                assert_eq!(n, bytes, "short read");
                c.close(fd)?;
            }
        }
        Ok(bytes as f64 / started.elapsed().as_secs_f64() / 1e6)
    }
}

/// A source of `left` zero bytes.
struct Zeros {
    left: u64,
}

impl Read for Zeros {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (buf.len() as u64).min(self.left) as usize;
        buf[..n].fill(0);
        self.left -= n as u64;
        Ok(n)
    }
}

/// Total stat operations per second over `clients` connections, with p50 and p99 latency.
fn stat_load(
    authority: &str,
    clients: usize,
    duration: Duration,
) -> Result<(f64, f64, f64), String> {
    let mut connections = Vec::new();
    for _ in 0..clients {
        connections.push(Client::connect(authority, &options()).map_err(|e| e.to_string())?);
    }
    let started = Instant::now();
    let handles: Vec<_> = connections
        .into_iter()
        .map(|mut c| {
            std::thread::spawn(move || {
                let mut samples = Vec::new();
                while started.elapsed() < duration {
                    let t = Instant::now();
                    if c.stat("/small").is_err() {
                        break;
                    }
                    samples.push(t.elapsed().as_secs_f64() * 1e6);
                }
                samples
            })
        })
        .collect();
    let mut all: Vec<f64> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap_or_default())
        .collect();
    let elapsed = started.elapsed().as_secs_f64();
    all.sort_by(|a, b| a.total_cmp(b));
    if all.is_empty() {
        return Err("no stat completed".into());
    }
    let pick = |q: f64| all[((all.len() - 1) as f64 * q) as usize];
    let _ = io::stderr().flush();
    Ok((all.len() as f64 / elapsed, pick(0.5), pick(0.99)))
}
