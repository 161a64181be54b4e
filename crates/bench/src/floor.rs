//! The floors every server is measured against: a raw TCP round trip and a raw socket copy,
//! between two threads of this process over loopback.

use crate::stats::{median, thread_cpu, Transfer};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Instant;

/// A connected pair of loopback sockets (client, server side).
fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
    let (server, _) = listener.accept().expect("accept");
    client.set_nodelay(true).expect("nodelay");
    server.set_nodelay(true).expect("nodelay");
    (client, server)
}

/// Serves the raw protocol until the peer leaves: a request is a line `IN OUT ...` followed
/// by IN payload bytes; the answer is a line `0` followed by OUT bytes. So a round trip can
/// carry the same bytes a Chirp request and reply would, with no work in between.
fn echo(stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    let mut line = Vec::new();
    let mut payload = Vec::new();
    let mut reply = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut words = std::str::from_utf8(&line).unwrap_or("").split_whitespace();
        let mut number = || {
            words
                .next()
                .and_then(|w| w.parse::<usize>().ok())
                .unwrap_or(0)
        };
        let (incoming, outgoing) = (number(), number());
        payload.resize(incoming, 0);
        if reader.read_exact(&mut payload).is_err() {
            return;
        }
        reply.clear();
        reply.extend_from_slice(b"0\n");
        reply.resize(2 + outgoing, b'x');
        if writer.write_all(&reply).is_err() {
            return;
        }
    }
}

/// The echo server as a process of its own, like the servers under test: listens on
/// loopback, prints its port, answers each connection on a thread.
pub fn echo_server() -> ! {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    println!("{}", listener.local_addr().expect("addr").port());
    let _ = std::io::stdout().flush();
    for stream in listener.incoming().flatten() {
        let _ = stream.set_nodelay(true);
        std::thread::spawn(move || echo(stream));
    }
    std::process::exit(0)
}

/// Median microseconds for a 32-byte line plus `send` bytes out and a 2-byte line plus
/// `receive` bytes back, to an echo server in another process (`port`) or, with `None`, on
/// another thread of this one.
pub fn round_trip_us(ops: usize, port: Option<u16>, send: usize, receive: usize) -> f64 {
    let (mut client, echo_thread) = match port {
        Some(port) => {
            let client = TcpStream::connect(("127.0.0.1", port)).expect("connect to echo server");
            client.set_nodelay(true).expect("nodelay");
            (client, None)
        }
        None => {
            let (client, server) = pair();
            (client, Some(std::thread::spawn(move || echo(server))))
        }
    };
    let mut request = format!("{send} {receive} /some/file/name/here").into_bytes();
    request.resize(31, b'x');
    request.push(b'\n');
    request.resize(32 + send, b'y');
    let mut reader = BufReader::new(client.try_clone().expect("clone"));
    let mut reply = Vec::new();
    let mut body = vec![0u8; receive];
    let mut samples = Vec::with_capacity(ops);
    for _ in 0..ops {
        let started = Instant::now();
        client.write_all(&request).expect("send");
        reply.clear();
        reader.read_until(b'\n', &mut reply).expect("reply");
        reader.read_exact(&mut body).expect("reply body");
        samples.push(started.elapsed().as_secs_f64() * 1e6);
    }
    drop(client);
    drop(reader);
    if let Some(t) = echo_thread {
        let _ = t.join();
    }
    median(&samples)
}

/// Where the receiver of [`copy`] puts the bytes.
#[derive(Clone, Copy)]
pub enum Into {
    /// A file created (or truncated) for them.
    NewFile,
    /// Over an existing file, from its start, without truncating it.
    Existing,
}

/// Pushes `bytes` through one loopback connection in 64 KiB writes; with `file`, the
/// receiver writes everything into that file (the floor for a server storing uploads).
pub fn copy(bytes: u64, file: Option<(&std::path::Path, Into)>) -> Transfer {
    let (mut client, mut server) = pair();
    let mut out = file.map(|(f, into)| {
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(matches!(into, Into::NewFile))
            .open(f)
            .expect("floor file")
    });
    let sink = std::thread::spawn(move || {
        let cpu = thread_cpu();
        let mut buf = vec![0u8; 256 * 1024];
        let mut total = 0u64;
        while let Ok(n) = server.read(&mut buf) {
            if n == 0 {
                break;
            }
            if let Some(out) = out.as_mut() {
                out.write_all(&buf[..n]).expect("floor file write");
            }
            total += n as u64;
        }
        (total, thread_cpu() - cpu)
    });
    let block = vec![0u8; 64 * 1024];
    let started = Instant::now();
    let cpu = thread_cpu();
    let mut sent = 0u64;
    while sent < bytes {
        let n = (bytes - sent).min(block.len() as u64) as usize;
        client.write_all(&block[..n]).expect("send");
        sent += n as u64;
    }
    client
        .shutdown(std::net::Shutdown::Write)
        .expect("shutdown");
    let sender_cpu = thread_cpu() - cpu;
    let (received, receiver_cpu) = sink.join().expect("sink");
    assert_eq!(received, bytes);
    Transfer {
        mb_s: bytes as f64 / started.elapsed().as_secs_f64() / 1e6,
        sender_cpu,
        receiver_cpu,
    }
}
