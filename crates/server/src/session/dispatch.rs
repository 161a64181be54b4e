//! Dispatch: each request to the code that answers it.

use super::*;

impl Session<'_> {
    // ---- dispatch -------------------------------------------------------------------------

    pub(super) fn handle(&mut self, request: &Request) -> Step {
        // Path arguments are collapsed and checked before anything else happens; a path the
        // jail refuses must still have its payload consumed.
        match request {
            Request::Open { path, flags, mode } => self.open(path, *flags, *mode),
            Request::Close { fd } => {
                let result = self
                    .files
                    .remove(fd)
                    .map(drop)
                    .ok_or(OpError::errno(libc::EBADF));
                self.send_unit(result)
            }
            Request::Pread { fd, length, offset } => self.pread(*fd, *length, *offset),
            Request::Pwrite { fd, length, offset } => self.pwrite(*fd, *length, *offset),
            Request::Sread {
                fd,
                length,
                stride_length,
                stride_skip,
                offset,
            } => self.sread(*fd, *length, *stride_length, *stride_skip, *offset),
            Request::Swrite {
                fd,
                length,
                stride_length,
                stride_skip,
                offset,
            } => self.swrite(*fd, *length, *stride_length, *stride_skip, *offset),
            Request::Fstat { fd } => {
                let result = self
                    .file(*fd)
                    .and_then(|f| Ok(crate::export::fstat(f.file.as_fd())?));
                self.send_stat(result)
            }
            Request::Fstatfs { fd } => {
                let result = self.file(*fd).and_then(|f| {
                    // SAFETY: `struct statfs` is plain data, valid all zeros.
                    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
                    // SAFETY: a descriptor of an open file of the session and a writable `struct statfs`.
                    crate::jail::cvt(unsafe { libc::fstatfs(f.file.as_raw_fd(), &mut buf) })?;
                    Ok(buf)
                });
                self.send_statfs(result)
            }
            Request::Fsync { fd } => {
                let result = self.file(*fd).and_then(|f| Ok(f.file.sync_all()?));
                self.send_unit(result)
            }
            Request::Fchmod { fd, mode } => {
                let result = self.writable_file(*fd).and_then(|f| {
                    // SAFETY: a descriptor of an open file of the session.
                    crate::jail::cvt(unsafe {
                        libc::fchmod(f.file.as_raw_fd(), mode & crate::export::PERMISSION_BITS)
                    })?;
                    Ok(())
                });
                self.send_unit(result)
            }
            // Ownership stays with the server's user (see Export::chown).
            Request::Fchown { fd, .. } => {
                let result = self.writable_file(*fd).map(drop);
                self.send_unit(result)
            }
            Request::Ftruncate { fd, length } => {
                let result = self
                    .writable_file(*fd)
                    .and_then(|f| Ok(f.file.set_len(*length)?));
                self.send_unit(result)
            }
            Request::Stat { path } => {
                let result = self.with_path(path, |e, s, p| e.stat(s, p));
                self.send_stat(result)
            }
            Request::Lstat { path } => {
                let result = self.with_path(path, |e, s, p| e.lstat(s, p));
                self.send_stat(result)
            }
            Request::Statfs { path } => {
                let result = self.with_path(path, |e, s, p| e.statfs(s, p));
                self.send_statfs(result)
            }
            Request::Access { path, mode } => {
                let result = self.with_path(path, |e, s, p| e.access(s, p, *mode as i32));
                self.send_unit(result)
            }
            Request::Chmod { path, mode } => {
                let result = self.with_path(path, |e, s, p| e.chmod(s, p, *mode));
                self.send_unit(result)
            }
            Request::Chown { path, .. } => {
                let result = self.with_path(path, |e, s, p| e.chown(s, p, true));
                self.send_unit(result)
            }
            Request::Lchown { path, .. } => {
                let result = self.with_path(path, |e, s, p| e.chown(s, p, false));
                self.send_unit(result)
            }
            Request::Truncate { path, length } => {
                let length = i64::try_from(*length).unwrap_or(i64::MAX);
                let result = self.with_path(path, |e, s, p| e.truncate(s, p, length));
                self.send_unit(result)
            }
            Request::Utime {
                path,
                actime,
                modtime,
            } => {
                let result = self.with_path(path, |e, s, p| e.utime(s, p, *actime, *modtime));
                self.send_unit(result)
            }
            Request::Lutime {
                path,
                actime,
                modtime,
            } => {
                let result = self.with_path(path, |e, s, p| e.lutime(s, p, *actime, *modtime));
                self.send_unit(result)
            }
            Request::Unlink { path } => {
                let result = self.with_path(path, |e, s, p| e.unlink(s, p));
                self.send_unit(result)
            }
            Request::Rmdir { path } => {
                let result = self.with_path(path, |e, s, p| e.rmdir(s, p));
                self.send_unit(result)
            }
            Request::Rmall { path } => {
                let result = self.with_path(path, |e, s, p| e.rmall(s, p));
                self.send_unit(result)
            }
            Request::Mkdir { path, mode } => {
                let result = self.with_path(path, |e, s, p| e.mkdir(s, p, *mode));
                self.send_unit(result)
            }
            Request::Rename { path, new_path } => {
                let result = self.with_two_paths(path, new_path, |e, s, a, b| e.rename(s, a, b));
                self.send_unit(result)
            }
            Request::Link { path, new_path } => {
                let result = self.with_two_paths(path, new_path, |e, s, a, b| e.link(s, a, b));
                self.send_unit(result)
            }
            Request::Symlink { target, path } => {
                let result = self.with_path(path, |e, s, p| e.symlink(s, target, p));
                self.send_unit(result)
            }
            Request::Readlink { path, length } => {
                let result = self
                    .with_path(path, |e, s, p| e.readlink(s, p))
                    .map(|mut target| {
                        target.truncate(usize::try_from(*length).unwrap_or(usize::MAX));
                        target
                    });
                self.send_data(result)
            }
            Request::Getdir { path } => self.getdir(path, false),
            Request::Getlongdir { path } => self.getdir(path, true),
            Request::Getfile { path } => self.getfile(path),
            Request::Putfile { path, mode, length } => self.putfile(path, *mode, *length),
            Request::Getstream { path } => self.getstream(path),
            Request::Putstream { path } => self.putstream(path),
            Request::Md5 { path } => {
                let result = self.digest(path, "md5");
                self.send_data(result)
            }
            Request::Hash { algorithm, path } => {
                let result = self.digest(path, algorithm);
                self.send_data(result)
            }
            Request::Whoami { length } => {
                let mut me = self.subject.clone().into_bytes();
                me.truncate(usize::try_from(*length).unwrap_or(usize::MAX));
                self.send_data(Ok(me))
            }
            Request::Explain {} => {
                let why = self.last_refusal.clone().unwrap_or_default().into_bytes();
                self.send_data(Ok(why))
            }
            Request::GroupOpen { length } | Request::GroupOp { length, .. } => {
                if self.payload_too_big(*length)? {
                    return Ok(());
                }
                self.read_payload(*length)?;
                // The payload stays in the connection's buffer (taken out for the call and
                // put back): a fresh copy per operation page-faults a megabyte of a pcp.
                let buffer = std::mem::take(&mut self.buffer);
                let payload = &buffer[..*length as usize];
                let answer = match request {
                    Request::GroupOp { gid, .. } => self.groups.op(self.shared, *gid, payload),
                    _ => self.groups.open(self.shared, &self.subject, payload),
                };
                self.buffer = buffer;
                match answer {
                    Ok(data) => self.send_data(Ok(data)),
                    Err(code) => self.send_error(code),
                }
            }
            Request::Ledger { offset, length } => {
                let result = self.ledger(*offset, *length);
                self.send_data(result)
            }
            Request::Whoareyou { host, length } => {
                // The server acts as a client on the caller's behalf: an owner's request.
                if let Err(e) = self
                    .export
                    .require(&self.subject, &JailPath::root(), Rights::ADMIN)
                {
                    return self.send_failure(&e);
                }
                let result = whoareyou(host).map(|mut me| {
                    me.truncate(usize::try_from(*length).unwrap_or(usize::MAX));
                    me
                });
                match result {
                    Ok(me) => self.send_data(Ok(me)),
                    Err(code) => self.send_error(code),
                }
            }
            Request::Getacl { path } => self.getacl(path),
            Request::Setacl {
                path,
                subject,
                rights,
            } => {
                let result = parse_rights(rights)
                    .and_then(|r| self.with_path(path, |e, s, p| e.setacl(s, p, subject, r)));
                self.send_unit(result)
            }
            Request::Resetacl { path, rights } => {
                let result = parse_rights(rights)
                    .and_then(|r| self.with_path(path, |e, s, p| e.resetacl(s, p, r)));
                self.send_unit(result)
            }
            Request::Getxattr { path, name } | Request::Lgetxattr { path, name } => {
                let follow = matches!(request, Request::Getxattr { .. });
                let result = xattr_name(name)
                    .and_then(|n| self.with_path(path, |e, s, p| e.getxattr(s, p, follow, &n)));
                self.send_data(result)
            }
            Request::Listxattr { path } | Request::Llistxattr { path } => {
                let follow = matches!(request, Request::Listxattr { .. });
                let result = self.with_path(path, |e, s, p| e.listxattr(s, p, follow));
                self.send_data(result)
            }
            Request::Setxattr {
                path,
                name,
                length,
                flags,
            }
            | Request::Lsetxattr {
                path,
                name,
                length,
                flags,
            } => {
                let follow = matches!(request, Request::Setxattr { .. });
                if self
                    .payload_over(*length, XATTR_VALUE_MAX.min(self.shared.limits.max_message))?
                {
                    return Ok(());
                }
                self.read_payload(*length)?;
                let value = std::mem::take(&mut self.buffer);
                let value_bytes = &value[..*length as usize];
                let result = xattr_name(name).and_then(|n| {
                    self.with_path(path, |e, s, p| {
                        e.setxattr(s, p, follow, &n, value_bytes, *flags)
                    })
                });
                self.buffer = value;
                self.send_unit(result)
            }
            Request::Removexattr { path, name } | Request::Lremovexattr { path, name } => {
                let follow = matches!(request, Request::Removexattr { .. });
                let result = xattr_name(name)
                    .and_then(|n| self.with_path(path, |e, s, p| e.removexattr(s, p, follow, &n)));
                self.send_unit(result)
            }
            Request::Fgetxattr { fd, name } => {
                let result = xattr_name(name).and_then(|n| fd_xattr_get(self.file(*fd)?, &n));
                self.send_data(result)
            }
            Request::Flistxattr { fd } => {
                let result = self.file(*fd).and_then(fd_xattr_list);
                self.send_data(result)
            }
            Request::Fsetxattr {
                fd,
                name,
                length,
                flags,
            } => {
                if self
                    .payload_over(*length, XATTR_VALUE_MAX.min(self.shared.limits.max_message))?
                {
                    return Ok(());
                }
                self.read_payload(*length)?;
                let value = std::mem::take(&mut self.buffer);
                let result = xattr_name(name).and_then(|n| {
                    crate::export::user_attribute(&n)?;
                    let f = self.writable_file(*fd)?;
                    let v = &value[..*length as usize];
                    // SAFETY: a descriptor of an open file of the session, a NUL-terminated name and `v` readable for its length.
                    crate::jail::cvt(unsafe {
                        libc::fsetxattr(
                            f.file.as_raw_fd(),
                            n.as_ptr(),
                            v.as_ptr().cast(),
                            v.len(),
                            *flags,
                        )
                    })?;
                    Ok(())
                });
                self.buffer = value;
                self.send_unit(result)
            }
            Request::Fremovexattr { fd, name } => {
                let result = xattr_name(name).and_then(|n| {
                    crate::export::user_attribute(&n)?;
                    let f = self.writable_file(*fd)?;
                    // SAFETY: a descriptor of an open file of the session and a NUL-terminated name.
                    crate::jail::cvt(unsafe {
                        libc::fremovexattr(f.file.as_raw_fd(), n.as_ptr())
                    })?;
                    Ok(())
                });
                self.send_unit(result)
            }
            Request::JobCreate { .. }
            | Request::JobCommit { .. }
            | Request::JobKill { .. }
            | Request::JobStatus { .. }
            | Request::JobWait { .. }
            | Request::JobReap { .. } => self.job_request(request),
            Request::Unsupported { payload, .. } => {
                self.discard_payload(*payload)?;
                self.send_error(ErrorCode::NotSupported)
            }
        }
    }
}

impl Session<'_> {
    /// `ledger`: a page of the accounting ledger, for subjects with the `a` right on `/`.
    fn ledger(&self, offset: u64, length: u64) -> OpResult<Vec<u8>> {
        self.export
            .require(&self.subject, &JailPath::root(), Rights::ADMIN)?;
        let accounting = self
            .shared
            .accounting
            .as_ref()
            .ok_or(OpError::errno(libc::ENOSYS))?;
        let length = length
            .min(self.shared.limits.max_message)
            .min(LEDGER_PAGE_MAX);
        accounting
            .read_at(offset, length as usize)
            .map_err(|e| match e.kind() {
                io::ErrorKind::InvalidInput => OpError::errno(libc::EINVAL),
                _ => e.into(),
            })
    }
}

/// The largest page of the ledger one `ledger` request returns.
const LEDGER_PAGE_MAX: u64 = 16 << 20;

/// The subject this server is given by the Chirp server at `host` (`host[:port]`), found by
/// connecting to it as a client: what a third party needs to write an ACL for this server.
fn whoareyou(host: &str) -> Result<Vec<u8>, ErrorCode> {
    let options = roost_client::Options {
        connect_timeout: WHOAREYOU_TIMEOUT,
        io_timeout: Some(WHOAREYOU_TIMEOUT),
        credentials: roost_client::Credentials::server_to_server(),
        ..roost_client::Options::default()
    };
    let mut client = roost_client::Client::connect(host, &options).map_err(|e| e.code())?;
    client
        .whoami()
        .map(String::into_bytes)
        .map_err(|e| e.code())
}

/// How long `whoareyou` may spend reaching the other server.
const WHOAREYOU_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
fn parse_rights(text: &str) -> OpResult<Rights> {
    Rights::parse(text).map_err(|_| OpError::errno(libc::EINVAL))
}

fn xattr_name(name: &[u8]) -> OpResult<CString> {
    CString::new(name).map_err(|_| OpError::errno(libc::EINVAL))
}

fn fd_xattr_get(f: &OpenFile, name: &CString) -> OpResult<Vec<u8>> {
    if crate::accounting::storage::reserved(name.as_bytes()) {
        return Err(OpError::errno(libc::ENODATA));
    }
    let fd = f.file.as_raw_fd();
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: a descriptor of an open file of the session, a NUL-terminated name, and `buf` writable for its length.
    let n = unsafe { libc::fgetxattr(fd, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error().into());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

fn fd_xattr_list(f: &OpenFile) -> OpResult<Vec<u8>> {
    let fd = f.file.as_raw_fd();
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: a descriptor of an open file of the session, and `buf` writable for its length.
    let n = unsafe { libc::flistxattr(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error().into());
    }
    buf.truncate(n as usize);
    Ok(crate::accounting::storage::visible(buf))
}
