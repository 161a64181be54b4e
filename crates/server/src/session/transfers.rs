//! Listings and whole-file transfers: getdir, getacl, getfile, putfile, the streams and
//! digests.

use super::*;
use std::os::fd::RawFd;

impl Session<'_> {
    // ---- directories and ACLs -------------------------------------------------------------

    /// `getdir` and `getlongdir`: entries leave as they are read, in the reply buffer's
    /// 64 KiB sends, so a huge directory costs no more memory than a small one, and a client
    /// that stops reading (or leaves) stops the listing at its next send.
    pub(super) fn getdir(&mut self, path: &[u8], long: bool) -> Step {
        let listing = match self.with_path(path, |e, s, p| e.open_listing(s, p)) {
            Ok(listing) => listing,
            Err(e) => return self.send_failure(&e),
        };
        self.send_result(0)?;
        let writer = &mut self.writer;
        listing.for_each(long, |name, stat| {
            let lines = match stat {
                Some(st) => listing::long_entry_lines(name, &Stat::from(st)),
                None => listing::name_line(name),
            };
            match lines {
                Some(lines) => writer.write_all(&lines),
                None => Ok(()),
            }
        })?;
        self.writer.write_all(listing::END)?;
        Ok(())
    }

    pub(super) fn getacl(&mut self, path: &[u8]) -> Step {
        let result = self.with_path(path, |e, _, p| e.getacl(p));
        match result {
            Ok(acl) => {
                self.send_result(0)?;
                self.writer.write_all(acl.to_text().as_bytes())?;
                self.writer.write_all(listing::END)?;
                Ok(())
            }
            Err(e) => self.send_failure(&e),
        }
    }

    // ---- whole files ----------------------------------------------------------------------

    pub(super) fn getfile(&mut self, path: &[u8]) -> Step {
        let (file, stat) = match self.with_path(path, |e, s, p| e.open_read(s, p)) {
            Ok(pair) => pair,
            Err(e) => return self.send_failure(&e),
        };
        let size = stat.st_size as u64;
        self.send_result(size as i64)?;
        self.meter.read(size);
        self.send_file_bytes(file.as_raw_fd(), 0, size)
    }

    /// Sends `n` bytes of `file` from `offset` after the queued result line, by sendfile. A
    /// file that shrank since its size was taken cannot keep the count already promised:
    /// the connection is closed, so the client sees a short transfer, never wrong data.
    pub(super) fn send_file_bytes(&mut self, file: RawFd, offset: u64, n: u64) -> Step {
        let sent = self.writer.send_file(file, offset, n)?;
        if sent < n {
            return Err(Stop::Broken(format!(
                "file shrank during transfer ({sent} of {n} bytes)"
            )));
        }
        Ok(())
    }

    pub(super) fn putfile(&mut self, path: &[u8], mode: u32, length: u64) -> Step {
        let mut upload = match self.with_path(path, |e, s, p| e.begin_put(s, p, mode)) {
            Ok(upload) => upload,
            Err(e) => return self.send_failure(&e),
        };
        self.send_result(0)?;
        self.writer.flush()?;
        // Spliced from the socket into the file like a large pwrite; a client that leaves
        // mid-transfer stops the session and dropping the upload removes its temporary file.
        let (_, failure) = self.write_payload_at(&upload.file, length, 0)?;
        if let Some(e) = failure {
            // The disk refused (the rest of the payload is consumed): keep the old file.
            drop(upload);
            return self.send_failure(&e.into());
        }
        self.meter.written(length);
        match upload.commit(self.export) {
            Ok(()) => self.send_result(length as i64),
            Err(e) => self.send_failure(&e),
        }
    }

    pub(super) fn getstream(&mut self, path: &[u8]) -> Step {
        let (file, _) = match self.with_path(path, |e, s, p| e.open_read(s, p)) {
            Ok(pair) => pair,
            Err(e) => return self.send_failure(&e),
        };
        self.send_result(0)?;
        let sent = self.writer.send_file(file.as_raw_fd(), 0, u64::MAX)?;
        self.meter.read(sent);
        Err(Stop::Closed)
    }

    pub(super) fn putstream(&mut self, path: &[u8]) -> Step {
        let mut upload = match self.with_path(path, |e, s, p| e.begin_put(s, p, 0o644)) {
            Ok(upload) => upload,
            Err(e) => return self.send_failure(&e),
        };
        self.send_result(0)?;
        self.writer.flush()?;
        let received = io::copy(&mut self.reader, &mut upload.file)?;
        self.meter.written(received);
        match upload.commit(self.export) {
            Ok(()) => Err(Stop::Closed),
            Err(e) => Err(Stop::Broken(format!(
                "putstream could not be committed: {e}"
            ))),
        }
    }

    pub(super) fn digest(&mut self, path: &[u8], algorithm: &str) -> OpResult<Vec<u8>> {
        let mut hasher =
            crate::digest::Hasher::new(algorithm).ok_or(OpError::errno(libc::EINVAL))?;
        let (file, _) = self.with_path(path, |e, s, p| e.open_read(s, p))?;
        if self.buffer.len() < CHUNK {
            self.buffer.resize(CHUNK, 0);
        }
        let mut reader = &file;
        loop {
            let n = reader.read(&mut self.buffer[..CHUNK])?;
            if n == 0 {
                break;
            }
            hasher.update(&self.buffer[..n]);
        }
        Ok(hasher.finish())
    }
}
