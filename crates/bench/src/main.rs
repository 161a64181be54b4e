//! `chirp-bench`: `roost serve` side by side with cctools' `chirp_server` and with raw TCP on
//! loopback, in one run: per-operation latency, sequential bandwidth, idle-connection memory
//! and many-client stat load. Prints a Markdown report for `docs/benchmarks.md`.
//!
//! Usage: `chirp-bench --roost target/release/roost [--runs 5] [--ops 20000] [--mib 1024]
//! [--idle 1000] [--clients 64] [--seconds 5] [--bandwidth-only] [--latency-only]`;
//! `--bandwidth-only` measures the sequential transfers of roost and the raw floors alone (no
//! cctools), for quick checks; `--latency-only` the per-operation latencies of roost and the
//! raw floor alone (no cctools, no transfers, no idle connections or stat load), in seconds.

mod floor;
mod servers;
mod stats;

use roost_client::{Client, Credentials, Method, OpenFlags, Options};
use servers::RunningServer;
use stats::{median, median_transfer, thread_cpu, Transfer};
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
    bandwidth_only: bool,
    latency_only: bool,
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
        bandwidth_only: false,
        latency_only: false,
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
            "--bandwidth-only" => config.bandwidth_only = true,
            "--latency-only" => config.latency_only = true,
            "--echo-server" => floor::echo_server(),
            "--help" | "-h" => {
                println!("usage: chirp-bench [--roost PATH] [--runs N] [--ops N] [--mib N] [--idle N] [--clients N] [--seconds N] [--bandwidth-only] [--latency-only]");
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
    if config.bandwidth_only {
        println!("## roost serve (Chirp server), bandwidth only\n");
        return bandwidth(config, &roost, None);
    }
    let small = [b'x'; 64 * 1024];
    roost.create_file("small", &small)?;
    if config.latency_only {
        println!("## roost serve (Chirp server), latency only\n");
        return latency(config, &roost, None);
    }
    let cctools = RunningServer::cctools()?;
    cctools.create_file("small", &small)?;
    let servers = [&roost, &cctools];

    println!("## roost serve (Chirp server)\n");
    latency(config, &roost, Some(&cctools))?;

    bandwidth(config, &roost, Some(&cctools))?;

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

/// The latency table: each operation's median against roost and, when given, cctools (which
/// runs a tenth of the operations), beside the raw TCP floor carrying the same bytes.
fn latency(
    config: &Config,
    roost: &RunningServer,
    cctools: Option<&RunningServer>,
) -> Result<(), Box<dyn std::error::Error>> {
    println!("Loopback, one client connection, {} runs of {} operations each; medians of the per-run medians.", config.runs, config.ops);
    print!("The floor for each operation is a raw TCP round trip carrying the same bytes (a 32-byte request line and a short reply line, plus the operation's data) to an echo server in another process; open+close is two round trips.");
    let cctools_ops = (config.ops / 10).max(1);
    match cctools {
        Some(_) => {
            println!(" cctools runs {cctools_ops} operations per run (it is ~50x slower).\n")
        }
        None => println!("\n"),
    }

    progress("latency");
    let echo = servers::EchoServer::start()?;
    let in_process = median(
        &(0..config.runs)
            .map(|_| floor::round_trip_us(config.ops, None, 0, 0))
            .collect::<Vec<_>>(),
    );
    if cctools.is_some() {
        println!("| operation | raw TCP floor µs | roost µs | cctools µs | roost / floor | roost / cctools |");
        println!("|---|---|---|---|---|---|");
    } else {
        println!("| operation | raw TCP floor µs | roost µs | roost / floor |");
        println!("|---|---|---|---|");
    }
    let servers: Vec<(&RunningServer, usize)> = std::iter::once((roost, config.ops))
        .chain(cctools.map(|c| (c, cctools_ops)))
        .collect();
    for op in LatencyOp::ALL {
        let (trips, send, receive) = op.wire_bytes();
        let one_trip = median(
            &(0..config.runs)
                .map(|_| floor::round_trip_us(config.ops, Some(echo.port), send, receive))
                .collect::<Vec<_>>(),
        );
        let floor = one_trip * trips as f64;
        let mut medians = Vec::new();
        for &(s, ops) in &servers {
            let mut c = Client::connect(&s.authority(), &options())?;
            let per_run: Vec<f64> = (0..config.runs)
                .map(|_| op.measure(&mut c, ops))
                .collect::<Result<_, _>>()?;
            medians.push(median(&per_run));
        }
        let ours = medians[0];
        match medians.get(1) {
            Some(theirs) => println!(
                "| {} | {floor:.1} | {ours:.1} | {theirs:.1} | {:.2}x | {:.2}x |",
                op.name(),
                ours / floor,
                ours / theirs
            ),
            None => println!(
                "| {} | {floor:.1} | {ours:.1} | {:.2}x |",
                op.name(),
                ours / floor
            ),
        }
    }
    println!("\nFor reference, the same small round trip between two threads of one process: {in_process:.1} µs.");
    Ok(())
}

/// The sequential transfers: the raw floors, then roost and, when given, cctools, both
/// pipelined (`pread`/`pwrite` of 64 KiB, cctools also one request at a time) and as whole
/// files (`putfile`/`getfile`, what `roost put` and `roost get` use).
fn bandwidth(
    config: &Config,
    roost: &RunningServer,
    cctools: Option<&RunningServer>,
) -> Result<(), Box<dyn std::error::Error>> {
    progress("bandwidth");
    let runs = config.runs.min(3);
    let bytes = config.mib << 20;
    println!(
        "\nSequential transfer of a {} MiB file in 64 KiB blocks (MB/s, median of {runs} runs; each run measures every column in turn, and roost / raw is the median of the runs' own ratios, so a machine whose speed drifts skews it less).",
        config.mib,
    );
    println!(
        "Raw socket copy: the same bytes through one loopback TCP connection between two threads."
    );
    let mut servers = vec![roost];
    servers.extend(cctools);
    let mut cases = Vec::new();
    for direction in Direction::ALL {
        for &server in &servers {
            cases.push((direction, server, 16));
            if !std::ptr::eq(server, roost) && direction.pipelined() {
                cases.push((direction, server, 1));
            }
        }
    }
    let floor_file = roost.dir().join("floor");
    let (mut raw, mut raw_file, mut raw_over) = (Vec::new(), Vec::new(), Vec::new());
    let mut measured: Vec<Vec<Transfer>> = vec![Vec::new(); cases.len()];
    for _ in 0..runs {
        raw.push(floor::copy(bytes, None));
        raw_file.push(floor::copy(
            bytes,
            Some((&floor_file, floor::Into::NewFile)),
        ));
        raw_over.push(floor::copy(
            bytes,
            Some((&floor_file, floor::Into::Existing)),
        ));
        let _ = std::fs::remove_file(&floor_file);
        for (i, &(direction, server, depth)) in cases.iter().enumerate() {
            measured[i].push(direction.measure(server, bytes, depth)?);
        }
    }
    // The median rate of a case, and its median ratio to the raw copy of the same run.
    let result = |direction: Direction, server: &RunningServer, depth: usize| {
        let i = cases
            .iter()
            .position(|&(d, s, n)| d == direction && std::ptr::eq(s, server) && n == depth)?;
        let ratios: Vec<f64> = (0..runs)
            .map(|r| measured[i][r].mb_s / raw[r].mb_s)
            .collect();
        Some((median_transfer(&measured[i]), median(&ratios)))
    };
    let (raw, raw_file, raw_over) = (
        median_transfer(&raw),
        median_transfer(&raw_file),
        median_transfer(&raw_over),
    );
    println!(
        "Raw socket → file: the receiver also writes the bytes into a file on the exports' file system (the floor for uploads): {:.0} MB/s into a new file, {:.0} MB/s over the same file again (`rewrite`: no page allocation).\n",
        raw_file.mb_s, raw_over.mb_s
    );
    println!("| direction | raw socket | roost, pipelined | cctools, pipelined | cctools, one at a time | roost / raw | roost / cctools (1 at a time) |");
    println!("|---|---|---|---|---|---|---|");
    let shown = |t: Option<Transfer>| t.map_or("—".to_string(), |t| format!("{:.0}", t.mb_s));
    let theirs = |direction, depth| {
        cctools
            .and_then(|c| result(direction, c, depth))
            .map(|(t, _)| t)
    };
    let mut roost_cpu = Vec::new();
    for direction in Direction::ALL {
        let (ours, ratio) = result(direction, roost, 16).expect("measured");
        roost_cpu.push((direction, ours));
        if !direction.pipelined() {
            continue;
        }
        println!(
            "| {} | {:.0} | {:.0} | {} | {} | {:.0}% | {} |",
            direction.name(),
            raw.mb_s,
            ours.mb_s,
            shown(theirs(direction, 16)),
            shown(theirs(direction, 1)),
            100.0 * ratio,
            theirs(direction, 1)
                .map_or("—".to_string(), |t| format!("{:.1}x", ours.mb_s / t.mb_s)),
        );
    }
    println!(
        "\nWhole files, one `putfile` or `getfile` each (what `roost put` and `roost get` do):"
    );
    for direction in Direction::ALL.into_iter().filter(|d| !d.pipelined()) {
        let (ours, ratio) = result(direction, roost, 16).expect("measured");
        println!(
            "roost {} {:.0} MB/s ({:.0}% of the raw socket copy), cctools {} MB/s.",
            direction.name(),
            ours.mb_s,
            100.0 * ratio,
            shown(theirs(direction, 16)),
        );
    }
    let per_gib = |cpu: f64| cpu * 1000.0 * (1u64 << 30) as f64 / bytes as f64;
    println!("\nCPU time per GiB moved (ms, medians; the two sides run on different CPUs at once, so the busier side bounds the rate): raw socket copy: sender {:.0}, receiver {:.0}; raw socket → file: sender {:.0}, receiver {:.0}.", per_gib(raw.sender_cpu), per_gib(raw.receiver_cpu), per_gib(raw_file.sender_cpu), per_gib(raw_file.receiver_cpu));
    for (direction, t) in roost_cpu {
        let (client, server) = if direction.uploads() {
            (t.sender_cpu, t.receiver_cpu)
        } else {
            (t.receiver_cpu, t.sender_cpu)
        };
        println!(
            "roost {}: client {:.0}, server {:.0}.",
            direction.name(),
            per_gib(client),
            per_gib(server)
        );
    }
    for server in servers {
        let _ = std::fs::remove_file(server.dir().join("big"));
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

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    Write,
    Read,
    /// Pipelined writes over the file the write left, without truncating it: the file
    /// system's pages already exist, so the figure shows roost rather than page allocation
    /// (which on a VM can mean the host backing fresh guest memory).
    Rewrite,
    Put,
    Get,
}

impl Direction {
    const ALL: [Direction; 5] = [
        Direction::Write,
        Direction::Read,
        Direction::Rewrite,
        Direction::Put,
        Direction::Get,
    ];

    fn name(self) -> &'static str {
        match self {
            Direction::Write => "write",
            Direction::Read => "read",
            Direction::Rewrite => "rewrite",
            Direction::Put => "put",
            Direction::Get => "get",
        }
    }

    /// Whether this moves the file in `pread`/`pwrite` blocks (not as one whole file).
    fn pipelined(self) -> bool {
        matches!(
            self,
            Direction::Write | Direction::Read | Direction::Rewrite
        )
    }

    /// Whether the client sends the bytes.
    fn uploads(self) -> bool {
        matches!(self, Direction::Write | Direction::Rewrite | Direction::Put)
    }

    /// Moves `bytes` to or from `/big`, pipelined ones with `depth` requests in flight.
    fn measure(
        self,
        server: &RunningServer,
        bytes: u64,
        depth: usize,
    ) -> Result<Transfer, roost_client::Error> {
        let mut c = Client::connect(&server.authority(), &options())?;
        const BLOCK: usize = 64 * 1024;
        let server_cpu = || server.cpu_seconds().unwrap_or(f64::NAN);
        let mut source = Zeros { left: bytes };
        let fd = match self {
            Direction::Write => {
                let flags = OpenFlags::from_letters(b"wct").expect("flags");
                Some(c.open("/big", flags, 0o644)?.0)
            }
            Direction::Rewrite => {
                let flags = OpenFlags::from_letters(b"w").expect("flags");
                Some(c.open("/big", flags, 0)?.0)
            }
            Direction::Read => Some(c.open("/big", OpenFlags::READ, 0)?.0),
            Direction::Put | Direction::Get => None,
        };
        let (started, client_before, server_before) = (Instant::now(), thread_cpu(), server_cpu());
        let moved = match (self, fd) {
            (Direction::Write | Direction::Rewrite, Some(fd)) => {
                c.write_pipelined(fd, 0, &mut source, BLOCK, depth)?
            }
            (Direction::Read, Some(fd)) => {
                c.read_pipelined(fd, 0, bytes, BLOCK, depth, &mut io::sink())?
            }
            (Direction::Put, _) => c.putfile("/big", 0o644, bytes, &mut source)?,
            _ => c.getfile("/big", &mut io::sink())?,
        };
        let mb_s = bytes as f64 / started.elapsed().as_secs_f64() / 1e6;
        let (client, server) = (thread_cpu() - client_before, server_cpu() - server_before);
        assert_eq!(moved, bytes, "short {}", self.name());
        if let Some(fd) = fd {
            c.close(fd)?;
        }
        let (sender_cpu, receiver_cpu) = if self.uploads() {
            (client, server)
        } else {
            (server, client)
        };
        Ok(Transfer {
            mb_s,
            sender_cpu,
            receiver_cpu,
        })
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
