//! Moving file data: single reads and writes, pipelined bulk reads and writes, and whole-file
//! and stream transfers between a server and any `io::Read`/`io::Write`.
//!
//! Chirp answers requests in order, so a client may send several `pread` or `pwrite` requests
//! before reading the first reply. The pipelined calls keep `depth` requests in flight, which
//! hides the round trip: one-at-a-time RPC is what held cctools' Chirp to half the link's
//! bandwidth in the Parrot paper. Short replies (end of file, a server's 16 MiB cap, a full
//! disk) are handled by discarding or repeating the requests after them, so the data written
//! to the sink is always the file's bytes in order.

use std::collections::VecDeque;
use std::io::{self, BufRead, Read, Write};

use roost_wire::{Request, Stat, WireError, MAX_BLOCK};

use crate::client::Client;
use crate::error::{Error, Result};

fn too_much() -> Error {
    Error::Protocol(WireError::BadReply("more data than asked for"))
}

/// Clamps a block size to what a server will move in one request.
fn block_len(block: usize) -> u64 {
    (block as u64).clamp(1, MAX_BLOCK)
}

/// Reads from `source` until `buf` is full or the source ends; returns the bytes read.
fn fill(source: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match source.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

impl Client {
    /// Reads up to `buf.len()` bytes at `offset`; returns the count (0 at end of file).
    pub fn pread(&mut self, fd: i64, buf: &mut [u8], offset: u64) -> Result<usize> {
        let want = (buf.len() as u64).min(MAX_BLOCK);
        self.guard(|c| {
            let n = c.call(
                &Request::Pread {
                    fd,
                    length: want,
                    offset,
                },
                &[],
            )?;
            if n > want {
                return Err(too_much());
            }
            c.reader.read_exact(&mut buf[..n as usize])?;
            Ok(n as usize)
        })
    }

    /// Writes `data` at `offset`; returns the count the server wrote.
    pub fn pwrite(&mut self, fd: i64, data: &[u8], offset: u64) -> Result<usize> {
        self.guard(|c| {
            let n = c.call(
                &Request::Pwrite {
                    fd,
                    length: data.len() as u64,
                    offset,
                },
                data,
            )?;
            if n > data.len() as u64 {
                return Err(too_much());
            }
            Ok(n as usize)
        })
    }

    /// Appends `data` through `fd` (opened with `a`, so the server writes it at the end)
    /// and stats the file in the same round trip: the count written and the file's
    /// attributes just after (its size is where the writer's offset goes).
    pub fn append(&mut self, fd: i64, data: &[u8]) -> Result<(usize, Stat)> {
        self.guard(|c| {
            let length = data.len() as u64;
            c.send(
                &Request::Pwrite {
                    fd,
                    length,
                    offset: 0,
                },
                data,
            )?;
            c.send(&Request::Fstat { fd }, &[])?;
            c.flush()?;
            // Both answers are read before either is looked at, unless the connection broke.
            let written = c.finish();
            if let Err(e) = &written {
                if e.breaks_connection() {
                    return Err(written.unwrap_err());
                }
            }
            let stat = c.finish().and_then(|_| c.stat_line());
            let n = written?;
            if n > length {
                return Err(too_much());
            }
            Ok((n as usize, stat?))
        })
    }

    /// Strided read: `stride_length` bytes every `stride_skip` bytes from `offset`, up to
    /// `length` bytes in all.
    pub fn sread(
        &mut self,
        fd: i64,
        length: u64,
        stride_length: u64,
        stride_skip: u64,
        offset: u64,
    ) -> Result<Vec<u8>> {
        let length = length.min(MAX_BLOCK);
        self.guard(|c| {
            let n = c.call(
                &Request::Sread {
                    fd,
                    length,
                    stride_length,
                    stride_skip,
                    offset,
                },
                &[],
            )?;
            if n > length {
                return Err(too_much());
            }
            c.read_bytes(n)
        })
    }

    /// Strided write of `data`: `stride_length` bytes every `stride_skip` bytes from `offset`.
    pub fn swrite(
        &mut self,
        fd: i64,
        data: &[u8],
        stride_length: u64,
        stride_skip: u64,
        offset: u64,
    ) -> Result<usize> {
        let length = data.len() as u64;
        self.guard(|c| {
            let n = c.call(
                &Request::Swrite {
                    fd,
                    length,
                    stride_length,
                    stride_skip,
                    offset,
                },
                data,
            )?;
            if n > length {
                return Err(too_much());
            }
            Ok(n as usize)
        })
    }

    /// Reads `len` bytes (or up to end of file) from `offset` into `sink`, keeping up to
    /// `depth` `pread` requests of `block` bytes in flight. Returns the bytes delivered.
    ///
    /// A server error ends the transfer after the requests in flight are drained (the
    /// connection stays usable); a failing sink ends it the same way with [`Error::Local`].
    pub fn read_pipelined(
        &mut self,
        fd: i64,
        offset: u64,
        len: u64,
        block: usize,
        depth: usize,
        sink: &mut dyn Write,
    ) -> Result<u64> {
        let block = block_len(block);
        let depth = depth.max(1);
        let end = offset.saturating_add(len);
        self.guard(|c| {
            let mut in_flight: VecDeque<(u64, u64)> = VecDeque::with_capacity(depth);
            let mut next = offset;
            let mut stale = 0usize; // replies still to discard after a short read
            let mut stop: Option<Error> = None; // first failure; no new requests once set
            let mut at_eof = false;
            let mut delivered = 0u64;
            loop {
                // The pipeline is topped up once half of it has been answered, so requests
                // leave in batches (one send for several) rather than one at a time.
                let refill = in_flight.len() <= depth / 2;
                while refill && stop.is_none() && !at_eof && in_flight.len() < depth && next < end {
                    let n = block.min(end - next);
                    c.send(
                        &Request::Pread {
                            fd,
                            length: n,
                            offset: next,
                        },
                        &[],
                    )?;
                    in_flight.push_back((next, n));
                    next += n;
                }
                c.flush()?;
                let Some((at, want)) = in_flight.pop_front() else {
                    break;
                };
                let got = match c.finish() {
                    Ok(n) if n > want => return Err(too_much()),
                    Ok(n) => n,
                    Err(e @ Error::Remote { .. }) => {
                        if stale > 0 {
                            stale -= 1;
                        } else {
                            stop.get_or_insert(e);
                        }
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                if stale > 0 || stop.is_some() || at_eof {
                    c.copy_reply(got, &mut io::sink())?;
                    stale = stale.saturating_sub(1);
                    continue;
                }
                match c.copy_reply(got, sink) {
                    Ok(()) => {}
                    Err(e @ Error::Local(_)) => {
                        stop = Some(e);
                        continue;
                    }
                    Err(e) => return Err(e),
                }
                delivered += got;
                if got == 0 {
                    at_eof = true;
                } else if got < want {
                    // A short read inside the file: later replies start at the wrong place.
                    stale = in_flight.len();
                    next = at + got;
                }
            }
            match stop {
                Some(e) => Err(e),
                None => Ok(delivered),
            }
        })
    }

    /// Writes everything `source` yields to the file at `offset`, keeping up to `depth`
    /// `pwrite` requests of `block` bytes in flight. Returns the bytes written.
    ///
    /// A short write is completed with further writes once the pipeline drains; a write the
    /// server cannot make progress on fails with `NO_SPACE`. A server error ends the transfer
    /// after the requests in flight are drained; a failing source ends it with [`Error::Local`].
    pub fn write_pipelined(
        &mut self,
        fd: i64,
        offset: u64,
        source: &mut dyn Read,
        block: usize,
        depth: usize,
    ) -> Result<u64> {
        let block = block_len(block) as usize;
        let depth = depth.max(1);
        self.guard(|c| {
            let mut in_flight: VecDeque<(u64, Vec<u8>)> = VecDeque::with_capacity(depth);
            let mut spare: Vec<Vec<u8>> = Vec::new();
            let mut leftovers: Vec<(u64, Vec<u8>)> = Vec::new();
            let mut next = offset;
            let mut source_done = false;
            let mut stop: Option<Error> = None;
            let mut written = 0u64;
            loop {
                // Topped up once half of the pipeline has been answered, as reads are: the
                // requests leave in batches and the replies are taken in batches, so neither
                // side is woken once per block.
                let refill = in_flight.len() <= depth / 2;
                while refill && stop.is_none() && !source_done && in_flight.len() < depth {
                    let mut buf = spare.pop().unwrap_or_else(|| vec![0u8; block]);
                    buf.resize(block, 0);
                    let got = match fill(source, &mut buf) {
                        Ok(n) => n,
                        Err(e) => {
                            stop = Some(Error::Local(e));
                            break;
                        }
                    };
                    buf.truncate(got);
                    source_done = got < block;
                    if got == 0 {
                        break;
                    }
                    c.send(
                        &Request::Pwrite {
                            fd,
                            length: got as u64,
                            offset: next,
                        },
                        &buf,
                    )?;
                    in_flight.push_back((next, buf));
                    next += got as u64;
                }
                c.flush()?;
                let Some((at, buf)) = in_flight.pop_front() else {
                    break;
                };
                match c.finish() {
                    Ok(n) if n > buf.len() as u64 => return Err(too_much()),
                    Ok(n) => {
                        written += n;
                        if (n as usize) < buf.len() {
                            leftovers.push((at + n, buf[n as usize..].to_vec()));
                        }
                        spare.push(buf);
                    }
                    Err(e @ Error::Remote { .. }) => {
                        stop.get_or_insert(e);
                    }
                    Err(e) => return Err(e),
                }
            }
            if let Some(e) = stop {
                return Err(e);
            }
            for (mut at, rest) in leftovers {
                let mut rest = &rest[..];
                while !rest.is_empty() {
                    let n = c.call(
                        &Request::Pwrite {
                            fd,
                            length: rest.len() as u64,
                            offset: at,
                        },
                        rest,
                    )?;
                    if n == 0 || n > rest.len() as u64 {
                        return Err(if n == 0 {
                            Error::remote(roost_wire::ErrorCode::NoSpace)
                        } else {
                            too_much()
                        });
                    }
                    written += n;
                    at += n;
                    rest = &rest[n as usize..];
                }
            }
            Ok(written)
        })
    }

    /// Copies exactly `n` reply bytes to `sink`, straight from the connection's read buffer
    /// (the bytes are copied once, by the kernel). If the sink fails the rest is still read
    /// off the connection, so it stays usable, and the sink's error is returned.
    fn copy_reply(&mut self, mut n: u64, sink: &mut dyn Write) -> Result<()> {
        let mut failed: Option<io::Error> = None;
        while n > 0 {
            let buf = self.reader.fill_buf()?;
            if buf.is_empty() {
                return Err(Error::Io(io::Error::from(io::ErrorKind::UnexpectedEof)));
            }
            let take = buf.len().min(usize::try_from(n).unwrap_or(usize::MAX));
            if failed.is_none() {
                if let Err(e) = sink.write_all(&buf[..take]) {
                    failed = Some(e);
                }
            }
            self.reader.consume(take);
            n -= take as u64;
        }
        failed.map_or(Ok(()), |e| Err(Error::Local(e)))
    }

    /// Fetches a whole file into `sink`; returns its length.
    pub fn getfile(&mut self, path: impl AsRef<[u8]>, sink: &mut dyn Write) -> Result<u64> {
        let req = Request::Getfile {
            path: path.as_ref().to_vec(),
        };
        self.guard(|c| {
            let n = c.call(&req, &[])?;
            c.copy_reply(n, sink)?;
            Ok(n)
        })
    }

    /// Stores `length` bytes from `source` as a whole file with `mode`; returns the bytes the
    /// server stored. If `source` ends early or fails, the connection cannot be resynchronised
    /// and is closed (the server discards the partial file).
    pub fn putfile(
        &mut self,
        path: impl AsRef<[u8]>,
        mode: u32,
        length: u64,
        source: &mut dyn Read,
    ) -> Result<u64> {
        let req = Request::Putfile {
            path: path.as_ref().to_vec(),
            mode,
            length,
        };
        self.guard(|c| {
            c.call(&req, &[])?;
            let mut buf = vec![0u8; 256 * 1024];
            let mut left = length;
            while left > 0 {
                let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                let got = match fill(source, &mut buf[..want]) {
                    Ok(0) => Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "source ended before the promised length",
                    )),
                    Ok(n) => Ok(n),
                    Err(e) => Err(e),
                };
                let got = match got {
                    Ok(n) => n,
                    Err(e) => {
                        c.mark_broken();
                        return Err(Error::Local(e));
                    }
                };
                c.send_raw(&buf[..got])?;
                left -= got as u64;
            }
            c.finish()
        })
    }

    /// `getstream`: the server sends the file and closes the connection, so this consumes
    /// the client. Returns the bytes received.
    pub fn getstream(mut self, path: impl AsRef<[u8]>, sink: &mut dyn Write) -> Result<u64> {
        let req = Request::Getstream {
            path: path.as_ref().to_vec(),
        };
        self.guard(|c| {
            c.call(&req, &[])?;
            let mut total = 0u64;
            loop {
                let buf = c.reader.fill_buf()?;
                if buf.is_empty() {
                    return Ok(total);
                }
                sink.write_all(buf).map_err(Error::Local)?;
                let n = buf.len();
                c.reader.consume(n);
                total += n as u64;
            }
        })
    }

    /// `putstream`: sends everything `source` yields, then closes the connection, so this
    /// consumes the client. Returns the bytes sent (the server acknowledges nothing after
    /// its go-ahead).
    pub fn putstream(mut self, path: impl AsRef<[u8]>, source: &mut dyn Read) -> Result<u64> {
        let req = Request::Putstream {
            path: path.as_ref().to_vec(),
        };
        self.guard(|c| {
            c.call(&req, &[])?;
            let mut buf = vec![0u8; 256 * 1024];
            let mut total = 0u64;
            loop {
                let got = fill(source, &mut buf).map_err(Error::Local)?;
                if got == 0 {
                    break;
                }
                c.send_raw(&buf[..got])?;
                total += got as u64;
            }
            c.shutdown_write()?;
            Ok(total)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::{Behaviour, Mock};
    use roost_wire::ErrorCode;

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn pipelined_read_keeps_depth_requests_in_flight() {
        let content = data(8 * 1000);
        let mock = Mock::start(
            content.clone(),
            Behaviour {
                batch: 4,
                ..Behaviour::default()
            },
        );
        let mut c = mock.client();
        let mut out = Vec::new();
        assert_eq!(
            c.read_pipelined(0, 0, u64::MAX, 1000, 4, &mut out).unwrap(),
            8000
        );
        assert!(out == content);
        assert_eq!(
            *mock.max_batch.lock().unwrap(),
            4,
            "the server saw 4 requests before answering"
        );
    }

    #[test]
    fn pipelined_read_survives_short_replies_inside_the_file() {
        let content = data(10_000);
        let mock = Mock::start(
            content.clone(),
            Behaviour {
                read_cap: 300,
                ..Behaviour::default()
            },
        );
        let mut c = mock.client();
        let mut out = Vec::new();
        assert_eq!(
            c.read_pipelined(0, 0, u64::MAX, 1024, 6, &mut out).unwrap(),
            10_000
        );
        assert!(out == content);
    }

    #[test]
    fn pipelined_read_stops_at_the_requested_length_or_end_of_file() {
        let content = data(5000);
        let mock = Mock::start(content.clone(), Behaviour::default());
        let mut c = mock.client();
        let mut out = Vec::new();
        assert_eq!(
            c.read_pipelined(0, 100, 1234, 100, 3, &mut out).unwrap(),
            1234
        );
        assert!(out[..] == content[100..1334]);
        out.clear();
        assert_eq!(
            c.read_pipelined(0, 4900, 10_000, 64, 8, &mut out).unwrap(),
            100
        );
        assert!(out[..] == content[4900..]);
    }

    #[test]
    fn pipelined_read_error_is_returned_and_the_connection_survives() {
        let mock = Mock::start(
            data(8000),
            Behaviour {
                fail_at: Some((3000, ErrorCode::BadFd)),
                ..Behaviour::default()
            },
        );
        let mut c = mock.client();
        let mut out = Vec::new();
        let err = c
            .read_pipelined(0, 0, u64::MAX, 1000, 4, &mut out)
            .unwrap_err();
        assert!(err.is(ErrorCode::BadFd));
        assert_eq!(
            out.len(),
            3000,
            "everything before the failure was delivered"
        );
        assert!(!c.is_broken());
        assert_eq!(c.fstat(0).unwrap().size, 8000);
    }

    #[test]
    fn failing_sink_ends_a_read_but_keeps_the_connection() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::from_raw_os_error(libc::ENOSPC))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mock = Mock::start(data(8000), Behaviour::default());
        let mut c = mock.client();
        let err = c
            .read_pipelined(0, 0, u64::MAX, 1000, 4, &mut Full)
            .unwrap_err();
        assert!(matches!(err, Error::Local(_)) && err.errno() == libc::ENOSPC);
        assert!(!c.is_broken());
        let err = c.getfile("/f", &mut Full).unwrap_err();
        assert!(matches!(err, Error::Local(_)));
        assert_eq!(c.fstat(0).unwrap().size, 8000);
    }

    #[test]
    fn pipelined_write_keeps_depth_requests_in_flight() {
        let content = data(8 * 1000);
        let mock = Mock::start(
            Vec::new(),
            Behaviour {
                batch: 4,
                ..Behaviour::default()
            },
        );
        let mut c = mock.client();
        assert_eq!(
            c.write_pipelined(0, 0, &mut &content[..], 1000, 4).unwrap(),
            8000
        );
        assert!(*mock.file.lock().unwrap() == content);
        assert_eq!(*mock.max_batch.lock().unwrap(), 4);
    }

    #[test]
    fn pipelined_write_completes_short_writes() {
        let content = data(10_000);
        let mock = Mock::start(
            Vec::new(),
            Behaviour {
                write_cap: 700,
                ..Behaviour::default()
            },
        );
        let mut c = mock.client();
        assert_eq!(
            c.write_pipelined(0, 0, &mut &content[..], 1024, 5).unwrap(),
            10_000
        );
        assert!(*mock.file.lock().unwrap() == content);
    }

    #[test]
    fn pipelined_write_error_is_returned_and_the_connection_survives() {
        let content = data(8000);
        let mock = Mock::start(
            Vec::new(),
            Behaviour {
                fail_at: Some((2000, ErrorCode::NoSpace)),
                ..Behaviour::default()
            },
        );
        let mut c = mock.client();
        let err = c
            .write_pipelined(0, 0, &mut &content[..], 1000, 4)
            .unwrap_err();
        assert_eq!(err.errno(), libc::ENOSPC);
        assert!(!c.is_broken());
        c.fstat(0).unwrap();
    }

    #[test]
    fn whole_file_transfers_stream_through_read_and_write() {
        let content = data(300_000);
        let mock = Mock::start(Vec::new(), Behaviour::default());
        let mut c = mock.client();
        assert_eq!(
            c.putfile("/f", 0o644, content.len() as u64, &mut &content[..])
                .unwrap(),
            300_000
        );
        let mut back = Vec::new();
        assert_eq!(c.getfile("/f", &mut back).unwrap(), 300_000);
        assert!(back == content);
    }

    #[test]
    fn putfile_with_a_short_source_breaks_the_connection() {
        let mock = Mock::start(Vec::new(), Behaviour::default());
        let mut c = mock.client();
        let err = c
            .putfile("/f", 0o644, 100, &mut &b"only ten.."[..])
            .unwrap_err();
        assert!(matches!(err, Error::Local(ref e) if e.kind() == io::ErrorKind::UnexpectedEof));
        assert!(c.is_broken());
        assert_eq!(c.fstat(0).unwrap_err().errno(), libc::ENOTCONN);
    }

    #[test]
    fn single_reads_and_writes() {
        let mock = Mock::start(data(100), Behaviour::default());
        let mut c = mock.client();
        let mut buf = [0u8; 10];
        assert_eq!(c.pread(0, &mut buf, 95).unwrap(), 5);
        assert_eq!(buf[..5], data(100)[95..]);
        assert_eq!(c.pwrite(0, b"xyz", 200).unwrap(), 3);
        assert_eq!(c.fstat(0).unwrap().size, 203);
    }
}
