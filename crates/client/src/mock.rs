//! A scripted in-process Chirp server for unit tests: one connection, `address`
//! authentication, and the few RPCs the bulk transfer code uses, over an in-memory file whose
//! misbehaviour (short replies, injected errors, batching) each test chooses.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use roost_wire::{reply, ErrorCode, Request, Stat};

use crate::{Client, Credentials, Method, Options};

/// How the mock server behaves.
#[derive(Clone, Default)]
pub struct Behaviour {
    /// Most bytes one pread returns (0: no limit).
    pub read_cap: u64,
    /// Most bytes one pwrite stores (0: no limit).
    pub write_cap: u64,
    /// A pread or pwrite at this offset fails with this code.
    pub fail_at: Option<(u64, ErrorCode)>,
    /// Read this many requests before answering any of them (0 or 1: answer each at once).
    pub batch: usize,
}

/// The mock server's state, shared with the test.
pub struct Mock {
    /// The file behind every descriptor.
    pub file: Arc<Mutex<Vec<u8>>>,
    /// The largest number of requests read before the first of them was answered.
    pub max_batch: Arc<Mutex<usize>>,
    handle: Option<JoinHandle<()>>,
    port: u16,
}

impl Mock {
    /// Starts a server holding `content` and behaving as told.
    pub fn start(content: Vec<u8>, behaviour: Behaviour) -> Mock {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let file = Arc::new(Mutex::new(content));
        let max_batch = Arc::new(Mutex::new(0));
        let (f, m) = (file.clone(), max_batch.clone());
        let handle = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            serve(stream, &f, &m, &behaviour);
        });
        Mock {
            file,
            max_batch,
            handle: Some(handle),
            port,
        }
    }

    /// A client connected to it by `address`.
    pub fn client(&self) -> Client {
        let opts = Options {
            credentials: Credentials::only(&[Method::Address]),
            ..Options::default()
        };
        Client::connect(&format!("127.0.0.1:{}", self.port), &opts).unwrap()
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            if !std::thread::panicking() {
                h.join().unwrap();
            }
        }
    }
}

fn serve(stream: TcpStream, file: &Mutex<Vec<u8>>, max_batch: &Mutex<usize>, b: &Behaviour) {
    stream
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut r = BufReader::new(stream.try_clone().unwrap());
    let mut w = stream;
    let mut line = Vec::new();
    r.read_until(b'\n', &mut line).unwrap();
    assert_eq!(line, b"address\n");
    w.write_all(b"yes\nyes\nyes\naddress\n127.0.0.1\n").unwrap();
    loop {
        // Read a batch of requests (with their payloads), then answer them in order.
        let mut batch: Vec<(Request, Vec<u8>)> = Vec::new();
        while batch.len() < b.batch.max(1) {
            line.clear();
            match r.read_until(b'\n', &mut line) {
                Ok(0) => break,
                Ok(_) => {}
                Err(_) if !batch.is_empty() => break, // the client stopped sending: answer
                Err(e) => panic!("mock server read: {e}"),
            }
            let req = Request::parse(&line).unwrap();
            let mut payload = vec![0u8; req.inline_payload_len() as usize];
            r.read_exact(&mut payload).unwrap();
            batch.push((req, payload));
        }
        if batch.is_empty() {
            return;
        }
        let mut most = max_batch.lock().unwrap();
        *most = (*most).max(batch.len());
        drop(most);
        for (req, payload) in batch {
            answer(&req, &payload, &mut r, &mut w, file, b);
        }
    }
}

fn answer(
    req: &Request,
    payload: &[u8],
    r: &mut impl Read,
    w: &mut impl Write,
    file: &Mutex<Vec<u8>>,
    b: &Behaviour,
) {
    let cap = |n: u64, c: u64| if c == 0 { n } else { n.min(c) };
    let failing = |offset: u64| {
        b.fail_at
            .filter(|(at, _)| *at == offset)
            .map(|(_, code)| code)
    };
    let mut f = file.lock().unwrap();
    match *req {
        Request::Pread { length, offset, .. } => {
            if let Some(code) = failing(offset) {
                return w.write_all(&reply::error_line(code)).unwrap();
            }
            let start = (offset as usize).min(f.len());
            let end = (start + cap(length, b.read_cap) as usize).min(f.len());
            w.write_all(&reply::format_result((end - start) as i64))
                .unwrap();
            w.write_all(&f[start..end]).unwrap();
        }
        Request::Pwrite { offset, .. } => {
            if let Some(code) = failing(offset) {
                return w.write_all(&reply::error_line(code)).unwrap();
            }
            let n = cap(payload.len() as u64, b.write_cap) as usize;
            let end = offset as usize + n;
            if f.len() < end {
                f.resize(end, 0);
            }
            f[offset as usize..end].copy_from_slice(&payload[..n]);
            w.write_all(&reply::format_result(n as i64)).unwrap();
        }
        Request::Putfile { length, .. } => {
            w.write_all(&reply::format_result(0)).unwrap();
            let mut data = vec![0u8; length as usize];
            // If the client gives up half-way there is nothing to answer.
            if r.read_exact(&mut data).is_ok() {
                *f = data;
                w.write_all(&reply::format_result(length as i64)).unwrap();
            }
        }
        Request::Getfile { .. } => {
            w.write_all(&reply::format_result(f.len() as i64)).unwrap();
            w.write_all(&f).unwrap();
        }
        Request::Fstat { .. } => {
            w.write_all(&reply::format_result(0)).unwrap();
            w.write_all(
                &Stat {
                    size: f.len() as i64,
                    ..Stat::default()
                }
                .to_line(),
            )
            .unwrap();
        }
        _ => w
            .write_all(&reply::error_line(ErrorCode::NotSupported))
            .unwrap(),
    }
}
