//! A job's sandbox: a fresh directory, owned by the job's user, where its inputs are copied
//! in before it starts and its outputs are taken from when it ends.
//!
//! Inputs are read from the export as the submitting subject (its read right is checked
//! again) and written by the server into a directory nobody else has touched yet. Outputs are
//! read through a jail rooted at the sandbox, so a symlink the job made cannot lead the server
//! outside it, only regular files are taken, and each is stored into the export as the subject
//! (write right checked again) by write-then-rename, so a failed copy never leaves half a file.

use super::description::{FileKind, JobFile};
use super::JobError;
use crate::export::{Export, OpError};
use crate::jail::{cvt, Jail, JailPath};
use roost_base::errno_of;
use roost_wire::ErrorCode;
use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Seek};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Where a job's standard output and error go, inside its sandbox (bind them as outputs to
/// keep them; cctools sends both to `/dev/null`).
pub const STDOUT: &str = ".roost.stdout";
pub const STDERR: &str = ".roost.stderr";

/// A sandbox being used.
pub struct Sandbox {
    pub path: PathBuf,
    dir: OwnedFd,
    /// The user and group that will own what the server makes in it.
    owner: Option<(u32, u32)>,
}

fn cstring(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn describe(e: &OpError) -> String {
    match e.explain() {
        Some(why) => format!("{} ({why})", io::Error::from_raw_os_error(e.errno)),
        None => io::Error::from_raw_os_error(e.errno).to_string(),
    }
}

impl Sandbox {
    /// Makes a fresh sandbox at `path` (replacing anything left there), owned by `owner`.
    pub fn create(path: &Path, owner: Option<(u32, u32)>) -> io::Result<Sandbox> {
        if path.symlink_metadata().is_ok() {
            std::fs::remove_dir_all(path)?;
        }
        std::fs::create_dir(path)?;
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
        let c = cstring(&path.to_string_lossy())?;
        // SAFETY: a NUL-terminated path.
        let fd = cvt(unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        })?;
        // SAFETY: a descriptor the kernel just returned (cvt refused -1), owned by nobody else.
        let dir = unsafe { OwnedFd::from_raw_fd(fd) };
        if let Some((uid, gid)) = owner {
            // SAFETY: a descriptor we own.
            cvt(unsafe { libc::fchown(dir.as_raw_fd(), uid, gid) })?;
        }
        Ok(Sandbox {
            path: path.to_path_buf(),
            dir,
            owner,
        })
    }

    /// Removes a sandbox, whatever the job did to its permissions.
    pub fn remove(path: &Path) -> io::Result<()> {
        match std::fs::remove_dir_all(path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(_) => {
                // A job running as the server's own user may have taken away its own write or
                // search rights on directories: give them back (never following a symlink).
                open_up(path);
                std::fs::remove_dir_all(path)
            }
            Ok(()) => Ok(()),
        }
    }

    /// Creates `rel` (a normalized relative path) for writing, with the directories above
    /// it, all owned by the job's user.
    fn create_file(&self, rel: &str, mode: u32) -> io::Result<File> {
        let (dir, last) = self.make_parents(rel)?;
        let c = cstring(last)?;
        // SAFETY: a descriptor we own and a NUL-terminated name.
        let fd = cvt(unsafe {
            libc::openat(
                dir.as_raw_fd(),
                c.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode,
            )
        })?;
        // SAFETY: a descriptor the kernel just returned (cvt refused -1), owned by nobody else.
        let file = unsafe { File::from_raw_fd(fd) };
        self.give(file.as_fd())?;
        Ok(file)
    }

    /// Makes the directories above `rel` (owned by the job's user); the innermost one, open,
    /// and the final name.
    fn make_parents<'a>(&self, rel: &'a str) -> io::Result<(OwnedFd, &'a str)> {
        let mut parts: Vec<&str> = rel.split('/').collect();
        let last = parts.pop().expect("task paths are never empty");
        let mut dir = self.dir.try_clone()?;
        for part in parts {
            let c = cstring(part)?;
            // SAFETY: a descriptor we own and a NUL-terminated name.
            match cvt(unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o700) }) {
                Err(e) if e.raw_os_error() != Some(libc::EEXIST) => return Err(e),
                _ => {}
            }
            // SAFETY: a descriptor we own and a NUL-terminated name.
            let fd = cvt(unsafe {
                libc::openat(
                    dir.as_raw_fd(),
                    c.as_ptr(),
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                )
            })?;
            // SAFETY: a descriptor the kernel just returned (cvt refused -1), owned by nobody else.
            dir = unsafe { OwnedFd::from_raw_fd(fd) };
            self.give(dir.as_fd())?;
        }
        Ok((dir, last))
    }

    /// Gives the file or directory of `fd` to the job's user, if there is one.
    fn give(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        if let Some((uid, gid)) = self.owner {
            // SAFETY: a descriptor borrowed for the call.
            cvt(unsafe { libc::fchown(fd.as_raw_fd(), uid, gid) })?;
        }
        Ok(())
    }

    /// The files for the job's standard output and error.
    pub fn output_streams(&self) -> io::Result<(File, File)> {
        Ok((
            self.create_file(STDOUT, 0o600)?,
            self.create_file(STDERR, 0o600)?,
        ))
    }

    /// Copies every input from the export into the sandbox, as `subject` may read them, and
    /// makes the directories the outputs will be written in (as cctools does). The job's
    /// copies are its own (mode 0700, so a program among them can be run).
    pub fn bind_inputs(
        &self,
        export: &Export,
        subject: &str,
        files: &[JobFile],
    ) -> Result<(), JobError> {
        for f in files.iter().filter(|f| f.kind == FileKind::Output) {
            self.make_parents(&f.task_path).map_err(|e| {
                JobError::io(
                    &e,
                    format!("output {}: cannot make its directory", f.task_path),
                )
            })?;
        }
        for f in files.iter().filter(|f| f.kind == FileKind::Input) {
            let fail = |code: ErrorCode, why: String| {
                JobError::new(code, format!("input {}: {why}", f.serv_path))
            };
            let path = JailPath::new(f.serv_path.as_bytes())
                .map_err(|e| fail(ErrorCode::InvalidRequest, e.to_string()))?;
            let (mut source, _) = export
                .open_read(subject, &path)
                .map_err(|e| fail(ErrorCode::from_errno(e.errno), describe(&e)))?;
            let mut dest = self.create_file(&f.task_path, 0o700).map_err(|e| {
                JobError::io(
                    &e,
                    format!("input {}: cannot create {}", f.serv_path, f.task_path),
                )
            })?;
            io::copy(&mut source, &mut dest)
                .map_err(|e| JobError::io(&e, format!("input {}: copying", f.serv_path)))?;
        }
        Ok(())
    }

    /// Stores every output the job made into the export, as `subject` may write them, and
    /// records each one's size. An output the job did not make is skipped (as in cctools);
    /// any other failure is returned, naming the output.
    pub fn collect_outputs(
        &self,
        export: &Export,
        subject: &str,
        job: i64,
        files: &mut [JobFile],
    ) -> Result<(), JobError> {
        let jail = Jail::open(&self.path)
            .map_err(|e| JobError::io(&e, "cannot open the sandbox".into()))?;
        for f in files.iter_mut().filter(|f| f.kind == FileKind::Output) {
            let task = JailPath::new(f.task_path.as_bytes())
                .map_err(|e| JobError::io(&e, format!("output {}: task path", f.task_path)))?;
            let fd = match jail.open_path(&task, libc::O_RDONLY | libc::O_NONBLOCK, 0) {
                Ok(fd) => fd,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
                Err(e) => {
                    return Err(JobError::io(
                        &e,
                        format!("output {}: cannot open it in the sandbox", f.task_path),
                    ))
                }
            };
            let mut source = File::from(fd);
            let meta = source
                .metadata()
                .map_err(|e| JobError::io(&e, format!("output {}", f.task_path)))?;
            if !meta.is_file() {
                return Err(JobError::new(
                    ErrorCode::InvalidRequest,
                    format!("output {} is not a regular file", f.task_path),
                ));
            }
            let serv = interpolate(&f.serv_path, job, &mut source)
                .map_err(|e| JobError::io(&e, format!("output {}", f.task_path)))?;
            let fail =
                |code: ErrorCode, why: String| JobError::new(code, format!("output {serv}: {why}"));
            let path = super::description::serv_path(&serv, "output")?;
            let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777;
            let mut upload = export
                .begin_put(subject, &path, mode)
                .map_err(|e| fail(ErrorCode::from_errno(e.errno), describe(&e)))?;
            let size = io::copy(&mut source, &mut upload.file)
                .map_err(|e| fail(ErrorCode::from_errno(errno_of(&e)), e.to_string()))?;
            upload
                .commit(export)
                .map_err(|e| fail(ErrorCode::from_errno(e.errno), describe(&e)))?;
            f.serv_path = serv;
            f.size = Some(size);
        }
        Ok(())
    }
}

/// Gives `dir` and every directory beneath it mode 0700.
fn open_up(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                open_up(&entry.path());
            }
        }
    }
}

/// Replaces cctools' output-name escapes in `serv_path`: `%j` the job id, `%h` the SHA-1 of
/// the output (upper-case hex), `%s` the same for outputs up to 16 MiB and random above, `%g`
/// random. Other `%` stay. Leaves `file` at its start.
pub fn interpolate(serv_path: &str, job: i64, file: &mut File) -> io::Result<String> {
    const HASH_LIMIT: u64 = 16 * 1024 * 1024;
    let mut out = String::with_capacity(serv_path.len());
    let mut chars = serv_path.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.peek() {
            Some('j') => out.push_str(&job.to_string()),
            Some('h') => out.push_str(&sha1_hex(file)?),
            Some('s') if file.metadata()?.len() <= HASH_LIMIT => out.push_str(&sha1_hex(file)?),
            Some('s') | Some('g') => {
                out.push_str(&crate::random::hex::<20>()?.to_ascii_uppercase())
            }
            _ => {
                out.push('%');
                continue;
            }
        }
        chars.next();
    }
    Ok(out)
}

fn sha1_hex(file: &mut File) -> io::Result<String> {
    use sha1::Digest;
    let mut hasher = sha1::Sha1::new();
    file.rewind()?;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    file.rewind()?;
    Ok(roost_wire::hex::encode(&hasher.finalize()).to_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_names_take_the_job_id_and_the_content_hash() {
        let dir = crate::jail::tempdir::TempDir::new();
        let p = dir.path().join("f");
        std::fs::write(&p, b"abc").unwrap();
        let mut f = File::open(&p).unwrap();
        assert_eq!(interpolate("/o.%j", 12, &mut f).unwrap(), "/o.12");
        assert_eq!(
            interpolate("/%h", 1, &mut f).unwrap(),
            "/A9993E364706816ABA3E25717850C26C9CD0D89D"
        );
        assert_eq!(interpolate("/%s", 1, &mut f).unwrap().len(), 41);
        assert_eq!(interpolate("/a%%x%", 1, &mut f).unwrap(), "/a%%x%");
        assert_ne!(
            interpolate("/%g", 1, &mut f).unwrap(),
            interpolate("/%g", 1, &mut f).unwrap()
        );
    }
}
