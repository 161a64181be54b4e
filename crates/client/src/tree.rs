//! Copying files and directory trees between the local file system and a server, reporting
//! progress: the substance of `roost get` and `roost put` (with `-r`).
//!
//! Whole files move with one `getfile`/`putfile` each, which stream at full speed without a
//! round trip per block. Directories are created as needed (an existing one is fine), symbolic
//! links are copied as links, and other special files are refused. A download is written
//! under a temporary name and renamed when complete, so none is ever left truncated.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use roost_wire::ErrorCode;

use crate::client::Client;
use crate::error::Error;
use crate::partial::PartialFile;

/// Where a copy failed: the path (local or remote) and why.
#[derive(Debug)]
pub struct CopyError {
    /// The path that failed, as text.
    pub path: String,
    /// True if `path` is on the server.
    pub remote: bool,
    /// The cause.
    pub error: Error,
}

impl fmt::Display for CopyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.error)
    }
}

impl std::error::Error for CopyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

fn remote_err(path: &[u8]) -> impl FnOnce(Error) -> CopyError + '_ {
    move |error| CopyError {
        path: String::from_utf8_lossy(path).into_owned(),
        remote: true,
        error,
    }
}

fn local_err(path: &Path) -> impl FnOnce(io::Error) -> CopyError + '_ {
    move |e| CopyError {
        path: path.display().to_string(),
        remote: false,
        error: Error::Local(e),
    }
}

/// `dir/name` for server paths.
pub fn join(dir: &[u8], name: &[u8]) -> Vec<u8> {
    let mut p = dir.to_vec();
    if !p.ends_with(b"/") {
        p.push(b'/');
    }
    p.extend_from_slice(name);
    p
}

/// A reader or writer that reports every chunk it moves.
struct Counted<'a, T> {
    inner: T,
    progress: &'a mut dyn FnMut(u64),
}

impl<T: Read> Read for Counted<'_, T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        (self.progress)(n as u64);
        Ok(n)
    }
}

impl<T: Write> Write for Counted<'_, T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        (self.progress)(n as u64);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Uploads one regular file, keeping its permission bits; returns its size.
pub fn put_file(
    c: &mut Client,
    local: &Path,
    remote: &[u8],
    progress: &mut dyn FnMut(u64),
) -> Result<u64, CopyError> {
    let file = File::open(local).map_err(local_err(local))?;
    let meta = file.metadata().map_err(local_err(local))?;
    let mode = meta.permissions().mode() & 0o7777;
    let mut source = Counted {
        inner: file.take(meta.len()),
        progress,
    };
    c.putfile(remote, mode, meta.len(), &mut source)
        .map_err(|e| match e {
            Error::Local(e) => local_err(local)(e),
            other => remote_err(remote)(other),
        })
}

/// Uploads a file, symlink or whole directory tree; returns the bytes of file data sent.
pub fn put_tree(
    c: &mut Client,
    local: &Path,
    remote: &[u8],
    progress: &mut dyn FnMut(u64),
) -> Result<u64, CopyError> {
    let meta = fs::symlink_metadata(local).map_err(local_err(local))?;
    let kind = meta.file_type();
    if kind.is_symlink() {
        let target = fs::read_link(local).map_err(local_err(local))?;
        c.symlink(target.as_os_str().as_bytes(), remote)
            .map_err(remote_err(remote))?;
        Ok(0)
    } else if kind.is_dir() {
        match c.mkdir(remote, meta.permissions().mode() & 0o7777) {
            Ok(()) => {}
            Err(e) if e.is(ErrorCode::AlreadyExists) => {}
            Err(e) => return Err(remote_err(remote)(e)),
        }
        let mut names: Vec<_> = fs::read_dir(local)
            .map_err(local_err(local))?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<io::Result<_>>()
            .map_err(local_err(local))?;
        names.sort();
        let mut total = 0;
        for name in names {
            total += put_tree(
                c,
                &local.join(&name),
                &join(remote, name.as_bytes()),
                progress,
            )?;
        }
        Ok(total)
    } else if kind.is_file() {
        put_file(c, local, remote, progress)
    } else {
        let e = io::Error::new(
            io::ErrorKind::Unsupported,
            "not a regular file, directory or symlink",
        );
        Err(local_err(local)(e))
    }
}

/// Downloads one file to `local` (mode 0666 less the umask); returns its size. The data goes
/// to a temporary name beside `local`, renamed to it when complete (see [`crate::partial`]):
/// a failed or interrupted download leaves no partial file, and whatever `local` held before.
pub fn get_file(
    c: &mut Client,
    remote: &[u8],
    local: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, CopyError> {
    let mut partial = PartialFile::create(local).map_err(local_err(local))?;
    let mut sink = Counted {
        inner: io::BufWriter::with_capacity(256 * 1024, partial.file()),
        progress,
    };
    let n = c
        .getfile(remote, &mut sink)
        .and_then(|n| sink.flush().map(|()| n).map_err(Error::Local))
        .map_err(|e| match e {
            Error::Local(e) => local_err(local)(e),
            other => remote_err(remote)(other),
        })?;
    drop(sink);
    partial.commit().map_err(local_err(local))?;
    Ok(n)
}

/// Downloads a file, symlink or whole directory tree; returns the bytes of file data received.
pub fn get_tree(
    c: &mut Client,
    remote: &[u8],
    local: &Path,
    progress: &mut dyn FnMut(u64),
) -> Result<u64, CopyError> {
    let st = c.lstat(remote).map_err(remote_err(remote))?;
    if st.is_symlink() {
        let target = c.readlink(remote).map_err(remote_err(remote))?;
        std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(&target), local)
            .map_err(local_err(local))?;
        return Ok(0);
    }
    if !st.is_dir() {
        return get_file(c, remote, local, progress);
    }
    match fs::create_dir(local) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && local.is_dir() => {}
        Err(e) => return Err(local_err(local)(e)),
    }
    let mut entries = c.getdir(remote).map_err(remote_err(remote))?;
    entries.retain(|n| n != b"." && n != b"..");
    entries.sort();
    let mut total = 0;
    for name in entries {
        total += get_tree(
            c,
            &join(remote, &name),
            &local.join(std::ffi::OsStr::from_bytes(&name)),
            progress,
        )?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_server_paths() {
        assert_eq!(join(b"/", b"a"), b"/a");
        assert_eq!(join(b"/d", b"a b"), b"/d/a b");
        assert_eq!(join(b"/d/", b"x"), b"/d/x");
    }

    #[test]
    fn counted_io_reports_every_chunk() {
        let mut seen = 0u64;
        {
            let mut add = |n: u64| seen += n;
            let mut r = Counted {
                inner: &b"hello world"[..],
                progress: &mut add,
            };
            let mut out = Vec::new();
            r.read_to_end(&mut out).unwrap();
        }
        assert_eq!(seen, 11);
    }

    #[test]
    fn copy_errors_name_the_path() {
        let e = remote_err(b"/x/y")(Error::remote(ErrorCode::NotAuthorized));
        assert_eq!(e.to_string(), "/x/y: permission denied");
        assert!(e.remote);
        let e = local_err(Path::new("/tmp/z"))(io::Error::from_raw_os_error(libc::ENOSPC));
        assert!(!e.remote && e.error.errno() == libc::ENOSPC);
    }
}
