//! The exported tree as clients see it: every name operation, checked against the ACLs and
//! carried out inside the jail.
//!
//! Which directory's ACL decides follows cctools: rights on a name come from the directory
//! that really holds it (after following symlinks, so a link cannot lend the rights of the
//! directory it sits in to a file elsewhere), rights on a directory from the directory itself,
//! and the delete right always from the directory holding the name.

use crate::acl::{Acl, AclStore};
use crate::jail::{cvt, Jail, JailPath, ACL_FILE_NAME};
use roost_wire::Rights;
use std::ffi::{CStr, CString};
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Why an operation failed: an errno, and for ACL refusals the right that was missing.
#[derive(Debug)]
pub struct OpError {
    pub errno: i32,
    /// For a refusal by ACL: the right needed and the directory whose ACL refused it.
    pub needs: Option<(u8, JailPath)>,
}

impl OpError {
    pub fn errno(errno: i32) -> OpError {
        OpError { errno, needs: None }
    }

    /// A human explanation, e.g. `needs 'w' on /data`.
    pub fn explain(&self) -> Option<String> {
        self.needs
            .as_ref()
            .map(|(r, dir)| format!("needs '{}' on {}", Rights::new(*r).to_text(), dir.display()))
    }
}

impl From<io::Error> for OpError {
    fn from(e: io::Error) -> OpError {
        OpError::errno(roost_base::errno_of(e))
    }
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", io::Error::from_raw_os_error(self.errno))?;
        if let Some(why) = self.explain() {
            write!(f, " ({why})")?;
        }
        Ok(())
    }
}

pub type OpResult<T> = Result<T, OpError>;

/// A name resolved to where it really lives: the directory holding it (after following
/// symlinks in the path), an `O_PATH` descriptor of that directory, and the final name.
struct Name {
    dir_fd: OwnedFd,
    dir: JailPath,
    name: CString,
}

/// An existing object opened `O_PATH`, with its real location in the export.
pub struct Object {
    pub fd: OwnedFd,
    pub stat: libc::stat,
    /// The real path, after following symlinks.
    pub real: JailPath,
}

impl Object {
    pub fn is_dir(&self) -> bool {
        is_dir(&self.stat)
    }

    /// The directory whose ACL governs this object: itself for a directory, else its parent.
    fn governing_dir(&self) -> JailPath {
        if self.is_dir() {
            self.real.clone()
        } else {
            self.real.parent()
        }
    }

    /// Whole-file operations work on regular files only: EISDIR for a directory, EINVAL for
    /// a FIFO, socket or device.
    fn require_regular(&self) -> OpResult<()> {
        match self.stat.st_mode & libc::S_IFMT {
            libc::S_IFREG => Ok(()),
            libc::S_IFDIR => Err(OpError::errno(libc::EISDIR)),
            _ => Err(OpError::errno(libc::EINVAL)),
        }
    }

    /// Opens this very object with `flags` (through its `/proc` magic link, so no path is
    /// resolved again).
    pub fn reopen(&self, flags: i32) -> io::Result<File> {
        // Never blocking: a FIFO or device in the export must not hold the thread.
        let flags = flags | libc::O_CLOEXEC | libc::O_NONBLOCK;
        // SAFETY: a NUL-terminated path (the temporary lives to the end of the statement).
        let fd = cvt(unsafe { libc::open(self.proc_path().as_ptr(), flags) })?;
        // SAFETY: a descriptor the kernel just returned (cvt refused -1), owned by nobody else.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// A path through `/proc` that reaches this object, for calls with no `f*` form that
    /// accepts an `O_PATH` descriptor (chmod, utimes, xattrs).
    fn proc_path(&self) -> CString {
        CString::new(format!("/proc/self/fd/{}", self.fd.as_raw_fd())).expect("no NUL")
    }
}

/// The export: its jail, where it lives on the host, and its ACLs.
pub struct Export {
    jail: Jail,
    host_root: PathBuf,
    acls: AclStore,
    /// Held shared by every check-then-act operation and exclusively by every operation that
    /// moves or removes names (rename, link, symlink, unlink, rmdir, rmall, mkdir, ACL
    /// changes, upload commits). A client can then never swap a directory for a symlink
    /// between another client's ACL check and its use of what was checked.
    names: RwLock<()>,
}

impl Export {
    /// Exports `dir`. `root_acl` governs the root when it has no ACL file of its own.
    pub fn new(dir: &Path, root_acl: Acl) -> io::Result<Export> {
        let host_root = std::fs::canonicalize(dir)?;
        if !host_root.is_dir() {
            return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        let jail = Jail::open(&host_root)?;
        // The jail's handle needs no rights on the directory itself; serving it needs read
        // and search, which a server started by the wrong user would otherwise only find
        // out client by client.
        let c_root = CString::new(host_root.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: a NUL-terminated path; faccessat only reads it.
        let rc = unsafe {
            libc::faccessat(
                libc::AT_FDCWD,
                c_root.as_ptr(),
                libc::R_OK | libc::X_OK,
                libc::AT_EACCESS,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Export {
            jail,
            host_root,
            acls: AclStore::new(root_acl),
            names: RwLock::new(()),
        })
    }

    fn reading(&self) -> RwLockReadGuard<'_, ()> {
        self.names.read().unwrap_or_else(|e| e.into_inner())
    }

    fn changing(&self) -> RwLockWriteGuard<'_, ()> {
        self.acls.invalidate();
        self.names.write().unwrap_or_else(|e| e.into_inner())
    }

    pub fn jail(&self) -> &Jail {
        &self.jail
    }

    pub fn acls(&self) -> &AclStore {
        &self.acls
    }

    /// Whether `dir` has an ACL file of its own.
    pub fn has_own_acl(&self, dir: &JailPath) -> bool {
        let Ok(fd) = self
            .jail
            .open_path(dir, libc::O_PATH | libc::O_DIRECTORY, 0)
        else {
            return false;
        };
        let name = CString::new(ACL_FILE_NAME).expect("no NUL");
        let mut st = zeroed_stat();
        // SAFETY: a descriptor we own, a NUL-terminated name and a writable `struct stat`.
        unsafe {
            libc::fstatat(
                fd.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            ) == 0
        }
    }

    // ---- resolution -------------------------------------------------------------------------

    /// Where a descriptor really is inside the export.
    fn real_path(&self, fd: RawFd) -> OpResult<JailPath> {
        let link = std::fs::read_link(format!("/proc/self/fd/{fd}"))?;
        let rel = link
            .strip_prefix(&self.host_root)
            .map_err(|_| OpError::errno(libc::EACCES))?;
        Ok(JailPath::new(rel.as_os_str().as_bytes())?)
    }

    /// Opens an existing object `O_PATH`, following symlinks (inside the jail) or not. The
    /// root is never a symlink (and has no parent to look it up in): it is always opened.
    pub fn object(&self, path: &JailPath, follow: bool) -> OpResult<Object> {
        if follow || path.is_root() {
            if let Some(fd) = self.jail.open_path_literal(path, libc::O_PATH)? {
                let stat = fstat(fd.as_fd())?;
                return Ok(Object {
                    fd,
                    stat,
                    real: path.clone(),
                });
            }
            let fd = self.jail.open_path(path, libc::O_PATH, 0)?;
            let stat = fstat(fd.as_fd())?;
            let real = self.real_path(fd.as_raw_fd())?;
            return Ok(Object { fd, stat, real });
        }
        let name = self.name(path)?;
        // SAFETY: a descriptor we own and a NUL-terminated name.
        let fd = cvt(unsafe {
            libc::openat(
                name.dir_fd.as_raw_fd(),
                name.name.as_ptr(),
                libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        })?;
        // SAFETY: a descriptor the kernel just returned, owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let stat = fstat(fd.as_fd())?;
        let real = name.dir.join(name.name.to_bytes());
        Ok(Object { fd, stat, real })
    }

    /// Resolves the directory holding `path` (following symlinks up to it, never the final name).
    fn name(&self, path: &JailPath) -> OpResult<Name> {
        let (dir_fd, name) = self.jail.parent(path)?;
        let dir = self.real_path(dir_fd.as_raw_fd())?;
        Ok(Name { dir_fd, dir, name })
    }

    // ---- ACL checks -------------------------------------------------------------------------

    /// Fails with EACCES unless `subject` holds every right in `needs` on directory `dir`.
    pub fn require(&self, subject: &str, dir: &JailPath, needs: u8) -> OpResult<()> {
        if self.acls.rights(&self.jail, dir, subject)?.allows(needs) {
            Ok(())
        } else {
            Err(OpError {
                errno: libc::EACCES,
                needs: Some((needs, dir.clone())),
            })
        }
    }

    fn has(&self, subject: &str, dir: &JailPath, needs: u8) -> OpResult<bool> {
        Ok(self.acls.rights(&self.jail, dir, subject)?.allows(needs))
    }

    /// Opens an existing object and checks `needs` on its governing directory. A missing
    /// object is reported as missing only to those holding `needs` where it would be, so
    /// names cannot be probed without rights.
    fn checked(&self, subject: &str, path: &JailPath, follow: bool, needs: u8) -> OpResult<Object> {
        match self.object(path, follow) {
            Ok(obj) => {
                self.require(subject, &obj.governing_dir(), needs)?;
                Ok(obj)
            }
            Err(e) if e.errno == libc::ENOENT => {
                let name = self.name(path)?;
                self.require(subject, &name.dir, needs)?;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// `error` about `path`, told only to a subject who may list the directory holding the
    /// name; anyone else learns nothing about what exists there (EACCES).
    fn disclose(&self, subject: &str, path: &JailPath, error: OpError) -> OpError {
        match self.name(path) {
            Ok(name) if !self.has(subject, &name.dir, Rights::LIST).unwrap_or(false) => OpError {
                errno: libc::EACCES,
                needs: Some((Rights::LIST, name.dir)),
            },
            _ => error,
        }
    }

    /// Opens directory `path` for an operation needing `needs` on it. Missing paths and
    /// non-directories are reported as such only to subjects who may list their parent.
    fn directory(&self, subject: &str, path: &JailPath, needs: u8) -> OpResult<Object> {
        let obj = self
            .object(path, true)
            .map_err(|e| self.disclose(subject, path, e))?;
        if !obj.is_dir() {
            return Err(self.disclose(subject, path, OpError::errno(libc::ENOTDIR)));
        }
        self.require(subject, &obj.real, needs)?;
        Ok(obj)
    }

    // ---- operations -------------------------------------------------------------------------

    /// Opens a file for a client. `flags` are `O_*` open flags.
    pub fn open(&self, subject: &str, path: &JailPath, flags: i32, mode: u32) -> OpResult<File> {
        let _names = self.reading();
        let accmode = flags & libc::O_ACCMODE;
        let mut needs = 0u8;
        if accmode == libc::O_RDONLY || accmode == libc::O_RDWR {
            needs |= Rights::READ;
        }
        if accmode != libc::O_RDONLY || flags & (libc::O_TRUNC | libc::O_CREAT) != 0 {
            needs |= Rights::WRITE;
        }
        // A FIFO or device the owner left in the export must not hang this client's thread:
        // open without blocking (regular files ignore the flag).
        let flags = flags | libc::O_NONBLOCK;
        let deferred = libc::O_CREAT | libc::O_EXCL | libc::O_TRUNC;
        // Fast path: with no symlink on the way, the file is opened directly (creation and
        // truncation held back until the check passes) and checked through that descriptor.
        // (O_TRUNC takes the slow path: truncating needs a descriptor open for writing, and a
        // read-only open with O_TRUNC truncates on Linux.)
        let literal = if flags & libc::O_TRUNC == 0 {
            self.jail.open_path_literal(path, flags & !deferred)
        } else {
            Ok(None)
        };
        if let Ok(Some(fd)) = literal {
            let file = File::from(fd);
            let stat = fstat(file.as_fd())?;
            self.check_open_existing(subject, path, is_dir(&stat), flags, needs)?;
            if flags & libc::O_TRUNC != 0 && !is_dir(&stat) {
                file.set_len(0)?;
            }
            return Ok(file);
        }
        // Check and use refer to the same inode: an existing object is checked through an
        // O_PATH descriptor and then reopened through it, a new one is created relative to
        // the directory descriptor that was checked. Swapping a symlink in between gains nothing.
        match self.object(path, true) {
            Ok(obj) => {
                self.check_open_existing(subject, &obj.real, obj.is_dir(), flags, needs)?;
                Ok(obj.reopen(flags & !(libc::O_CREAT | libc::O_EXCL))?)
            }
            Err(e) if e.errno == libc::ENOENT && flags & libc::O_CREAT != 0 => {
                let name = self.name(path)?;
                let mut flags = flags | libc::O_NOFOLLOW | libc::O_CLOEXEC;
                if !self.has(subject, &name.dir, needs)? {
                    // The put right creates new files, and nothing more.
                    self.require(subject, &name.dir, Rights::PUT)?;
                    flags |= libc::O_EXCL;
                }
                // SAFETY: a descriptor we own and a NUL-terminated name.
                let fd = cvt(unsafe {
                    libc::openat(
                        name.dir_fd.as_raw_fd(),
                        name.name.as_ptr(),
                        flags,
                        mode & PERMISSION_BITS,
                    )
                })?;
                // SAFETY: a descriptor the kernel just returned, owned by nobody else.
                let file = unsafe { File::from_raw_fd(fd) };
                exact_mode(file.as_fd(), mode)?;
                crate::accounting::storage::mark(&file, subject);
                Ok(file)
            }
            Err(e) if e.errno == libc::ENOENT => {
                let name = self.name(path)?;
                self.require(subject, &name.dir, needs)?;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// The checks for opening an object that exists at `real`: a directory only for reading
    /// and with the list right, a file with the rights its flags need (`put` alone never
    /// reaches an existing file), and `O_EXCL` refused.
    fn check_open_existing(
        &self,
        subject: &str,
        real: &JailPath,
        dir: bool,
        flags: i32,
        needs: u8,
    ) -> OpResult<()> {
        if dir {
            if flags & libc::O_ACCMODE != libc::O_RDONLY {
                return Err(OpError::errno(libc::EISDIR));
            }
            return self.require(subject, real, Rights::LIST);
        }
        let governing = real.parent();
        if !self.has(subject, &governing, needs)? {
            if flags & libc::O_CREAT != 0 && self.has(subject, &governing, Rights::PUT)? {
                return Err(OpError::errno(libc::EEXIST));
            }
            return Err(OpError {
                errno: libc::EACCES,
                needs: Some((needs, governing)),
            });
        }
        if flags & (libc::O_CREAT | libc::O_EXCL) == libc::O_CREAT | libc::O_EXCL {
            return Err(OpError::errno(libc::EEXIST));
        }
        Ok(())
    }

    pub fn stat(&self, subject: &str, path: &JailPath) -> OpResult<libc::stat> {
        let _names = self.reading();
        Ok(self.checked(subject, path, true, Rights::LIST)?.stat)
    }

    pub fn lstat(&self, subject: &str, path: &JailPath) -> OpResult<libc::stat> {
        let _names = self.reading();
        Ok(self.checked(subject, path, false, Rights::LIST)?.stat)
    }

    pub fn statfs(&self, subject: &str, path: &JailPath) -> OpResult<libc::statfs> {
        let _names = self.reading();
        let obj = self.checked(subject, path, true, Rights::LIST)?;
        // SAFETY: `struct statfs` is plain data, valid all zeros.
        let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
        // SAFETY: a descriptor we own and a writable `struct statfs`.
        cvt(unsafe { libc::fstatfs(obj.fd.as_raw_fd(), &mut buf) })?;
        Ok(buf)
    }

    /// `access(2)` with `mode` of R_OK/W_OK/X_OK/F_OK, checked against ACL and file mode.
    pub fn access(&self, subject: &str, path: &JailPath, mode: i32) -> OpResult<()> {
        let _names = self.reading();
        let obj = self
            .object(path, true)
            .map_err(|e| self.disclose(subject, path, e))?;
        let mut needs = 0u8;
        if mode & libc::R_OK != 0 {
            needs |= Rights::READ;
        }
        if mode & libc::W_OK != 0 {
            needs |= Rights::WRITE;
        }
        if mode & libc::X_OK != 0 {
            needs |= if obj.is_dir() {
                Rights::LIST
            } else {
                Rights::EXECUTE
            };
        }
        if needs == 0 {
            needs = Rights::LIST;
        }
        self.require(subject, &obj.governing_dir(), needs)?;
        // SAFETY: a NUL-terminated path (the temporary lives to the end of the statement).
        cvt(unsafe {
            libc::faccessat(
                libc::AT_FDCWD,
                obj.proc_path().as_ptr(),
                mode,
                libc::AT_EACCESS,
            )
        })?;
        Ok(())
    }

    pub fn chmod(&self, subject: &str, path: &JailPath, mode: u32) -> OpResult<()> {
        let _names = self.reading();
        let obj = self.checked(subject, path, true, Rights::WRITE)?;
        // A directory's setgid bit only has new entries take its group: no privilege.
        let allowed = if obj.is_dir() {
            PERMISSION_BITS | libc::S_ISGID
        } else {
            PERMISSION_BITS
        };
        // SAFETY: a NUL-terminated path (the temporary lives to the end of the statement).
        cvt(unsafe { libc::chmod(obj.proc_path().as_ptr(), mode & allowed) })?;
        Ok(())
    }

    /// Ownership is checked like cctools does and then left alone: every file of an export
    /// belongs to the server's own user, and a client must never give files away as root.
    pub fn chown(&self, subject: &str, path: &JailPath, follow: bool) -> OpResult<()> {
        let _names = self.reading();
        self.checked(subject, path, follow, Rights::WRITE)?;
        Ok(())
    }

    pub fn truncate(&self, subject: &str, path: &JailPath, length: i64) -> OpResult<()> {
        let _names = self.reading();
        if length < 0 {
            return Err(OpError::errno(libc::EINVAL));
        }
        let obj = self.checked(subject, path, true, Rights::WRITE)?;
        obj.require_regular()?;
        let file = obj.reopen(libc::O_WRONLY)?;
        // SAFETY: a descriptor we own.
        cvt(unsafe { libc::ftruncate(file.as_raw_fd(), length) })?;
        Ok(())
    }

    pub fn utime(&self, subject: &str, path: &JailPath, atime: i64, mtime: i64) -> OpResult<()> {
        let _names = self.reading();
        let obj = self.checked(subject, path, true, Rights::WRITE)?;
        let times = [
            libc::timespec {
                tv_sec: atime,
                tv_nsec: 0,
            },
            libc::timespec {
                tv_sec: mtime,
                tv_nsec: 0,
            },
        ];
        // SAFETY: a NUL-terminated path and an array of two timespecs, as utimensat reads.
        cvt(unsafe {
            libc::utimensat(libc::AT_FDCWD, obj.proc_path().as_ptr(), times.as_ptr(), 0)
        })?;
        Ok(())
    }

    /// [`Export::utime`] of the object at `path` itself, a symlink not followed.
    pub fn lutime(&self, subject: &str, path: &JailPath, atime: i64, mtime: i64) -> OpResult<()> {
        let _names = self.reading();
        // Checked and set through the one descriptor of the directory holding the name; a
        // directory is governed by its own ACL, anything else by that directory's.
        let name = self.name(path)?;
        let st = fstat_at(&name.dir_fd, &name.name)
            .map_err(|e| self.disclose(subject, path, e.into()))?;
        let governing = if is_dir(&st) {
            name.dir.join(name.name.to_bytes())
        } else {
            name.dir.clone()
        };
        self.require(subject, &governing, Rights::WRITE)?;
        let times = [atime, mtime].map(|tv_sec| libc::timespec { tv_sec, tv_nsec: 0 });
        // SAFETY: a descriptor we own, a NUL-terminated name and an array of two timespecs.
        cvt(unsafe {
            libc::utimensat(
                name.dir_fd.as_raw_fd(),
                name.name.as_ptr(),
                times.as_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        })?;
        Ok(())
    }

    pub fn unlink(&self, subject: &str, path: &JailPath) -> OpResult<()> {
        let _names = self.changing();
        let name = self.name(path)?;
        self.require(subject, &name.dir, Rights::DELETE)?;
        // SAFETY: a descriptor we own and a NUL-terminated name.
        cvt(unsafe { libc::unlinkat(name.dir_fd.as_raw_fd(), name.name.as_ptr(), 0) })?;
        Ok(())
    }

    /// Removes an empty directory, with the ACL file it may hold.
    pub fn rmdir(&self, subject: &str, path: &JailPath) -> OpResult<()> {
        let _names = self.changing();
        let name = self.name(path)?;
        self.require(subject, &name.dir, Rights::DELETE)?;
        remove_empty_dir(name.dir_fd.as_fd(), &name.name)?;
        self.acls.invalidate();
        Ok(())
    }

    /// Removes a whole tree. Nothing below is followed: children are named relative to their
    /// directory's descriptor and opened with `O_NOFOLLOW`.
    pub fn rmall(&self, subject: &str, path: &JailPath) -> OpResult<()> {
        let _names = self.changing();
        let name = self.name(path)?;
        self.require(subject, &name.dir, Rights::DELETE)?;
        remove_tree(name.dir_fd.as_fd(), &name.name)?;
        self.acls.invalidate();
        Ok(())
    }

    /// The names in directory `path`, for the server's own housekeeping ([`crate::reaper`]):
    /// no ACL is asked, and ACL files are left out.
    pub fn own_list(&self, path: &JailPath) -> OpResult<Vec<Vec<u8>>> {
        let _names = self.reading();
        let dir = self
            .jail
            .open_path(path, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
        Ok(read_dir_names(&dir)?
            .into_iter()
            .filter(|n| !n.starts_with(crate::jail::ACL_FILE_NAME))
            .collect())
    }

    /// Removes a whole tree for the server's own housekeeping ([`crate::reaper`]): as
    /// [`Export::rmall`] does (nothing below is followed), with no ACL asked.
    pub fn own_rmall(&self, path: &JailPath) -> OpResult<()> {
        let _names = self.changing();
        let name = self.name(path)?;
        remove_tree(name.dir_fd.as_fd(), &name.name)?;
        self.acls.invalidate();
        Ok(())
    }

    pub fn rename(&self, subject: &str, from: &JailPath, to: &JailPath) -> OpResult<()> {
        let _names = self.changing();
        let old = self.name(from)?;
        let new = self.name(to)?;
        self.require(subject, &old.dir, Rights::READ | Rights::DELETE)?;
        self.require(subject, &new.dir, Rights::WRITE)?;
        let rename = || {
            // SAFETY: descriptors we own and NUL-terminated names.
            cvt(unsafe {
                libc::renameat(
                    old.dir_fd.as_raw_fd(),
                    old.name.as_ptr(),
                    new.dir_fd.as_raw_fd(),
                    new.name.as_ptr(),
                )
            })
        };
        match rename() {
            // A directory the client sees as empty still holds its ACL file; replacing it
            // is replacing an empty directory (the namespace lock keeps this atomic to clients).
            Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => {
                remove_empty_dir(new.dir_fd.as_fd(), &new.name).map_err(|_| e)?;
                rename()?;
            }
            outcome => {
                outcome?;
            }
        }
        self.acls.invalidate();
        Ok(())
    }

    pub fn link(&self, subject: &str, from: &JailPath, to: &JailPath) -> OpResult<()> {
        let _names = self.changing();
        let old = self.name(from)?;
        let new = self.name(to)?;
        self.require(subject, &old.dir, Rights::READ | Rights::WRITE)?;
        self.require(subject, &new.dir, Rights::WRITE)?;
        // SAFETY: descriptors we own and NUL-terminated names.
        cvt(unsafe {
            libc::linkat(
                old.dir_fd.as_raw_fd(),
                old.name.as_ptr(),
                new.dir_fd.as_raw_fd(),
                new.name.as_ptr(),
                0,
            )
        })?;
        Ok(())
    }

    /// Creates a symlink. Its target is stored as given: it may say anything, since every
    /// later access through it is resolved inside the jail and checked again.
    pub fn symlink(&self, subject: &str, target: &[u8], path: &JailPath) -> OpResult<()> {
        let _names = self.changing();
        let target = CString::new(target).map_err(|_| OpError::errno(libc::EINVAL))?;
        let name = self.name(path)?;
        self.require(subject, &name.dir, Rights::WRITE)?;
        // SAFETY: a NUL-terminated target, a descriptor we own and a NUL-terminated name.
        cvt(unsafe {
            libc::symlinkat(target.as_ptr(), name.dir_fd.as_raw_fd(), name.name.as_ptr())
        })?;
        Ok(())
    }

    pub fn readlink(&self, subject: &str, path: &JailPath) -> OpResult<Vec<u8>> {
        let _names = self.reading();
        let name = self.name(path)?;
        self.require(subject, &name.dir, Rights::READ)?;
        let mut buf = vec![0u8; libc::PATH_MAX as usize];
        // SAFETY: a descriptor we own, a NUL-terminated name, and `buf` writable for its length.
        let n = unsafe {
            libc::readlinkat(
                name.dir_fd.as_raw_fd(),
                name.name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error().into());
        }
        buf.truncate(n as usize);
        Ok(buf)
    }

    /// Creates a directory holding a copy of its parent's ACL.
    pub fn mkdir(&self, subject: &str, path: &JailPath, mode: u32) -> OpResult<()> {
        let _names = self.changing();
        let name = self.name(path)?;
        self.require(subject, &name.dir, Rights::WRITE)?;
        // SAFETY: a descriptor we own and a NUL-terminated name.
        cvt(unsafe {
            libc::mkdirat(
                name.dir_fd.as_raw_fd(),
                name.name.as_ptr(),
                mode & PERMISSION_BITS,
            )
        })?;
        if mode & PERMISSION_BITS & server_umask() != 0 {
            // SAFETY: a descriptor we own and a NUL-terminated name.
            let made = cvt(unsafe {
                libc::openat(
                    name.dir_fd.as_raw_fd(),
                    name.name.as_ptr(),
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                )
            })
            // SAFETY: a descriptor the kernel just returned, owned by nobody else.
            .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) });
            if let Err(e) = made
                .map_err(OpError::from)
                .and_then(|dir| exact_mode(dir.as_fd(), mode))
            {
                let _ = remove_empty_dir(name.dir_fd.as_fd(), &name.name);
                return Err(e);
            }
        }
        let inherited = self.acls.effective(&self.jail, &name.dir)?;
        let created = name.dir.join(name.name.to_bytes());
        if let Err(e) = self.acls.store(&self.jail, &created, &inherited) {
            // A directory without its ACL would be governed differently than promised.
            let _ = remove_empty_dir(name.dir_fd.as_fd(), &name.name);
            return Err(e.into());
        }
        Ok(())
    }

    /// Opens a directory for listing, after checking the list right. The entries are read
    /// as they are sent ([`Listing::for_each`]), so a listing costs the same small memory
    /// however large the directory, and stops as soon as the client is gone. The export lock
    /// is held only for the check and the open: the listing reads through a descriptor of
    /// the directory that was checked, which no later rename can redirect.
    pub fn open_listing(&self, subject: &str, path: &JailPath) -> OpResult<Listing> {
        let _names = self.reading();
        let obj = self.directory(subject, path, Rights::LIST)?;
        let dirfd = OwnedFd::from(obj.reopen(libc::O_RDONLY | libc::O_DIRECTORY)?);
        // The root's `..` is the root itself, so nothing about the host directory above the
        // export leaks out.
        let parent = if obj.real.is_root() {
            obj.stat
        } else {
            fstat_at(&dirfd, c"..")?
        };
        Ok(Listing {
            entries: DirStream::open(&dirfd)?,
            dirfd,
            dot: obj.stat,
            dotdot: parent,
        })
    }

    /// Checks that `subject` may read `path` (a job's input). A file that does not exist yet
    /// passes once the right is held where it would be: a job may be created before its inputs.
    pub fn may_read(&self, subject: &str, path: &JailPath) -> OpResult<()> {
        let _names = self.reading();
        match self.checked(subject, path, true, Rights::READ) {
            Err(e) if e.errno != libc::ENOENT => Err(e),
            _ => Ok(()),
        }
    }

    /// Checks that `subject` may write `path` (a job's output): the write right on the
    /// directory that holds it. A directory that does not exist yet passes.
    pub fn may_write(&self, subject: &str, path: &JailPath) -> OpResult<()> {
        let _names = self.reading();
        match self.name(path) {
            Ok(name) => self.require(subject, &name.dir, Rights::WRITE),
            Err(e) if e.errno == libc::ENOENT => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Opens a file for reading as a whole (getfile, md5, hash).
    pub fn open_read(&self, subject: &str, path: &JailPath) -> OpResult<(File, libc::stat)> {
        let _names = self.reading();
        let obj = self.checked(subject, path, true, Rights::READ)?;
        obj.require_regular()?;
        Ok((obj.reopen(libc::O_RDONLY)?, obj.stat))
    }

    /// [`Export::begin_put`] for a group member replaced whole (pcp, psync): a member that
    /// is a symbolic link has its target replaced, as writing through an open would have
    /// done, and only regular files are replaced (EINVAL for a FIFO or device, EISDIR for
    /// a directory).
    pub fn begin_replace(&self, subject: &str, path: &JailPath, mode: u32) -> OpResult<Upload> {
        let target = match self.object(path, true) {
            Ok(obj) => {
                obj.require_regular()?;
                obj.real
            }
            Err(_) => path.clone(),
        };
        self.begin_put(subject, &target, mode)
    }

    /// Starts replacing (or creating) a whole file: data goes to a hidden temporary file that
    /// [`Upload::commit`] renames into place, so a transfer cut short never destroys the old
    /// contents. The temporary is open for reading too (a group member replaced by a
    /// patch is read again through it).
    pub fn begin_put(&self, subject: &str, path: &JailPath, mode: u32) -> OpResult<Upload> {
        let _names = self.reading();
        let name = self.name(path)?;
        let existing = fstat_at(&name.dir_fd, &name.name).ok();
        if existing.as_ref().is_some_and(is_dir) {
            return Err(OpError::errno(libc::EISDIR));
        }
        let may_replace = self.has(subject, &name.dir, Rights::WRITE)?;
        if !may_replace {
            if existing.is_some() && self.has(subject, &name.dir, Rights::PUT)? {
                return Err(OpError::errno(libc::EEXIST));
            }
            let needs = if existing.is_some() {
                Rights::WRITE
            } else {
                Rights::PUT
            };
            self.require(subject, &name.dir, needs)?;
        }
        let tmp = crate::stale_uploads::upload_name(std::process::id(), next_unique());
        // SAFETY: a descriptor we own and a NUL-terminated name.
        let fd = cvt(unsafe {
            libc::openat(
                name.dir_fd.as_raw_fd(),
                tmp.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode & PERMISSION_BITS,
            )
        })?;
        // SAFETY: a descriptor the kernel just returned, owned by nobody else.
        let file = unsafe { File::from_raw_fd(fd) };
        exact_mode(file.as_fd(), mode)?;
        crate::accounting::storage::mark(&file, subject);
        Ok(Upload {
            file,
            dir_fd: name.dir_fd,
            tmp,
            name: name.name,
            may_replace,
            committed: false,
        })
    }

    // ---- ACLs -------------------------------------------------------------------------------

    /// The ACL governing directory `path`. Like cctools, anyone may read an ACL: knowing who
    /// may do what is how users sort out their own permission problems.
    pub fn getacl(&self, path: &JailPath) -> OpResult<Acl> {
        let _names = self.reading();
        let obj = self.object(path, true)?;
        if !obj.is_dir() {
            return Err(OpError::errno(libc::ENOTDIR));
        }
        Ok((*self.acls.effective(&self.jail, &obj.real)?).clone())
    }

    /// Gives `who` the rights `rights` on directory `path` (an empty set removes the entry).
    /// A `who` that can never match anyone (see [`roost_wire::acl::check_subject`]) is
    /// refused with `EINVAL`, unless the entry is being removed.
    pub fn setacl(
        &self,
        subject: &str,
        path: &JailPath,
        who: &str,
        rights: Rights,
    ) -> OpResult<()> {
        if !rights.is_empty() && roost_wire::acl::check_subject(who).is_err() {
            return Err(OpError::errno(libc::EINVAL));
        }
        let _names = self.changing();
        let obj = self.admin_dir(subject, path)?;
        let mut acl = (*self.acls.effective(&self.jail, &obj.real)?).clone();
        acl.set(who, rights);
        self.acls.store(&self.jail, &obj.real, &acl)?;
        Ok(())
    }

    /// Replaces the ACL of `path` with one entry: the caller, with `rights` plus admin (so a
    /// caller cannot lock themselves out).
    pub fn resetacl(&self, subject: &str, path: &JailPath, rights: Rights) -> OpResult<()> {
        let _names = self.changing();
        let obj = self.admin_dir(subject, path)?;
        let mut acl = Acl::default();
        acl.set(
            subject,
            Rights {
                bits: rights.bits | Rights::ADMIN,
                ..rights
            },
        );
        self.acls.store(&self.jail, &obj.real, &acl)?;
        Ok(())
    }

    fn admin_dir(&self, subject: &str, path: &JailPath) -> OpResult<Object> {
        self.directory(subject, path, Rights::ADMIN)
    }

    // ---- extended attributes ----------------------------------------------------------------

    pub fn getxattr(
        &self,
        subject: &str,
        path: &JailPath,
        follow: bool,
        attr: &CStr,
    ) -> OpResult<Vec<u8>> {
        let _names = self.reading();
        let obj = self.checked(subject, path, follow, Rights::READ)?;
        if crate::accounting::storage::reserved(attr.to_bytes()) {
            return Err(OpError::errno(libc::ENODATA));
        }
        xattr_get(&obj.proc_path(), attr)
    }

    pub fn listxattr(&self, subject: &str, path: &JailPath, follow: bool) -> OpResult<Vec<u8>> {
        let _names = self.reading();
        let obj = self.checked(subject, path, follow, Rights::READ)?;
        xattr_list(&obj.proc_path()).map(crate::accounting::storage::visible)
    }

    pub fn setxattr(
        &self,
        subject: &str,
        path: &JailPath,
        follow: bool,
        attr: &CStr,
        value: &[u8],
        flags: i32,
    ) -> OpResult<()> {
        let _names = self.reading();
        user_attribute(attr)?;
        let obj = self.checked(subject, path, follow, Rights::WRITE)?;
        let p = obj.proc_path();
        // SAFETY: a NUL-terminated path and name, and `value` readable for its length.
        cvt(unsafe {
            libc::setxattr(
                p.as_ptr(),
                attr.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                flags,
            )
        })?;
        Ok(())
    }

    pub fn removexattr(
        &self,
        subject: &str,
        path: &JailPath,
        follow: bool,
        attr: &CStr,
    ) -> OpResult<()> {
        let _names = self.reading();
        user_attribute(attr)?;
        let obj = self.checked(subject, path, follow, Rights::WRITE)?;
        let p = obj.proc_path();
        // SAFETY: a NUL-terminated path and name.
        cvt(unsafe { libc::removexattr(p.as_ptr(), attr.as_ptr()) })?;
        Ok(())
    }
}

/// A whole-file upload in progress; dropped without [`Upload::commit`], it leaves no trace.
pub struct Upload {
    pub file: File,
    dir_fd: OwnedFd,
    tmp: CString,
    name: CString,
    /// Whether the subject may replace an existing file (write right), not only create one.
    may_replace: bool,
    committed: bool,
}

impl Upload {
    /// Moves the finished file into place. A subject with only the put right never replaces
    /// a file that appeared meanwhile (EEXIST). After a failure, dropping the upload
    /// removes the temporary.
    pub fn commit(&mut self, export: &Export) -> OpResult<()> {
        if self.committed {
            return Err(OpError::errno(libc::ENOENT));
        }
        let _names = export.changing();
        let dir = self.dir_fd.as_raw_fd();
        let flags = if self.may_replace {
            0
        } else {
            libc::RENAME_NOREPLACE
        };
        // SAFETY: a descriptor we own and NUL-terminated names.
        cvt(unsafe { libc::renameat2(dir, self.tmp.as_ptr(), dir, self.name.as_ptr(), flags) })?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        if !self.committed {
            // SAFETY: a descriptor we own and a NUL-terminated name; a failure leaves nothing to undo.
            unsafe { libc::unlinkat(self.dir_fd.as_raw_fd(), self.tmp.as_ptr(), 0) };
        }
    }
}

// ---- helpers ------------------------------------------------------------------------------------

fn next_unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// Mode bits a client may set: permissions and the sticky bit, never setuid or setgid (a
/// server running as root must not hand out setuid-root programs).
pub const PERMISSION_BITS: u32 = 0o1777;

/// The server process's umask, read once (from `/proc/self/status`: `umask(2)` can only
/// be read by changing it, which would race the other threads' creations).
fn server_umask() -> u32 {
    static UMASK: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *UMASK.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|status| {
                let line = status.lines().find_map(|l| l.strip_prefix("Umask:"))?;
                u32::from_str_radix(line.trim(), 8).ok()
            })
            .unwrap_or(0o777)
    })
}

/// Gives what a client just made (`fd`) exactly the permission bits it asked for: a client
/// sends the mode its program's umask left (roost run applies the caller's), so the
/// server's own umask must not take more away.
fn exact_mode(fd: BorrowedFd<'_>, mode: u32) -> OpResult<()> {
    if mode & PERMISSION_BITS & server_umask() != 0 {
        // SAFETY: a descriptor borrowed for the call.
        cvt(unsafe { libc::fchmod(fd.as_raw_fd(), mode & PERMISSION_BITS) })?;
    }
    Ok(())
}

fn is_dir(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

pub(crate) fn zeroed_stat() -> libc::stat {
    // SAFETY: `struct stat` is plain data, valid all zeros.
    unsafe { std::mem::zeroed() }
}

pub(crate) fn fstat_at(dir: &OwnedFd, name: &CStr) -> io::Result<libc::stat> {
    let mut st = zeroed_stat();
    // SAFETY: a descriptor borrowed for the call, a NUL-terminated name and a writable `struct stat`.
    cvt(unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            name.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    Ok(st)
}

pub(crate) fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    let mut st = zeroed_stat();
    // SAFETY: a descriptor borrowed for the call; `st` is a writable `struct stat`.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })?;
    Ok(st)
}

/// The entry names of an open directory, without `.` and `..`.
fn read_dir_names(dirfd: &OwnedFd) -> io::Result<Vec<Vec<u8>>> {
    let mut names = Vec::new();
    let mut entries = DirStream::open(dirfd)?;
    while let Some(name) = entries.next_name() {
        names.push(name.to_vec());
    }
    Ok(names)
}

/// A directory's entries read one at a time (`readdir`), `.` and `..` left out.
struct DirStream {
    dir: std::ptr::NonNull<libc::DIR>,
}

// SAFETY: the stream is owned by one listing and used by one thread at a time.
unsafe impl Send for DirStream {}

impl DirStream {
    /// A stream over a copy of `dirfd`, from its first entry.
    fn open(dirfd: &OwnedFd) -> io::Result<DirStream> {
        // SAFETY: dup of a descriptor we own; fdopendir takes the copy over on success.
        let fd = cvt(unsafe { libc::dup(dirfd.as_raw_fd()) })?;
        // SAFETY: a descriptor we just made by dup; on success the stream owns it.
        let Some(dir) = std::ptr::NonNull::new(unsafe { libc::fdopendir(fd) }) else {
            let err = io::Error::last_os_error();
            // SAFETY: fdopendir failed, so the copy is still ours to close.
            unsafe { libc::close(fd) };
            return Err(err);
        };
        // SAFETY: a valid stream; the copy shares its offset with `dirfd`, so start over.
        unsafe { libc::rewinddir(dir.as_ptr()) };
        Ok(DirStream { dir })
    }

    /// The next name, or `None` at the end.
    fn next_name(&mut self) -> Option<&[u8]> {
        loop {
            // SAFETY: a valid stream; the entry stays valid until the next readdir, which
            // the borrow of `self` prevents.
            let entry = unsafe { libc::readdir64(self.dir.as_ptr()) };
            if entry.is_null() {
                return None;
            }
            // SAFETY: a non-null entry from readdir, whose `d_name` is NUL-terminated.
            let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) }.to_bytes();
            if name != b"." && name != b".." {
                return Some(name);
            }
        }
    }
}

impl Drop for DirStream {
    fn drop(&mut self) {
        // SAFETY: the stream was opened by fdopendir and is closed once.
        unsafe { libc::closedir(self.dir.as_ptr()) };
    }
}

/// A directory being listed (see [`Export::open_listing`]).
pub struct Listing {
    dirfd: OwnedFd,
    entries: DirStream,
    dot: libc::stat,
    dotdot: libc::stat,
}

impl Listing {
    /// Calls `each` with every name (`.` and `..` first, as cctools lists them; never the
    /// hidden ACL file) and, when `with_stat` is set, its `lstat`. Stops at the first error
    /// `each` returns (the client has gone) and returns it.
    pub fn for_each(
        mut self,
        with_stat: bool,
        mut each: impl FnMut(&[u8], Option<&libc::stat>) -> io::Result<()>,
    ) -> io::Result<()> {
        each(b".", with_stat.then_some(&self.dot))?;
        each(b"..", with_stat.then_some(&self.dotdot))?;
        let dirfd = self.dirfd;
        while let Some(name) = self.entries.next_name() {
            if name.starts_with(ACL_FILE_NAME) {
                continue;
            }
            if !with_stat {
                each(name, None)?;
                continue;
            }
            let cname = CString::new(name).expect("directory entries hold no NUL");
            match fstat_at(&dirfd, &cname) {
                Ok(st) => each(name, Some(&st))?,
                Err(_) => continue, // vanished while listing
            }
        }
        Ok(())
    }
}

/// Removes directory `name` in `dir` if it holds nothing but its ACL file; the ACL file is
/// put back if the directory turns out not to be removable.
fn remove_empty_dir(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    // SAFETY: a descriptor borrowed for the call and a NUL-terminated name.
    let fd = cvt(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: a descriptor the kernel just returned, owned by nobody else.
    let sub = unsafe { OwnedFd::from_raw_fd(fd) };
    let names = read_dir_names(&sub)?;
    if names.iter().any(|n| !n.starts_with(ACL_FILE_NAME)) {
        return Err(io::Error::from_raw_os_error(libc::ENOTEMPTY));
    }
    for n in &names {
        let c = CString::new(n.clone()).expect("no NUL");
        // SAFETY: a descriptor we own and a NUL-terminated name.
        unsafe { libc::unlinkat(sub.as_raw_fd(), c.as_ptr(), 0) };
    }
    // SAFETY: a descriptor borrowed for the call and a NUL-terminated name.
    cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), libc::AT_REMOVEDIR) })?;
    Ok(())
}

/// Removes `name` in `dir` and everything below it without following symlinks.
fn remove_tree(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    // An explicit stack rather than recursion: a client can build trees thousands of levels
    // deep, and a connection thread's stack is small.
    struct Level {
        fd: OwnedFd,
        name: CString,
        left: Vec<CString>,
    }
    /// Unlinks `name` in `dir` (a directory with `AT_REMOVEDIR`).
    fn unlink(dir: BorrowedFd<'_>, name: &CStr, flags: i32) -> io::Result<()> {
        // SAFETY: a descriptor borrowed for the call and a NUL-terminated name.
        cvt(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), flags) }).map(drop)
    }
    let Some(top) = open_subdir(dir, name)? else {
        return unlink(dir, name, 0);
    };
    let left = child_names(&top)?;
    let mut stack = vec![Level {
        fd: top,
        name: name.to_owned(),
        left,
    }];
    while let Some(level) = stack.last_mut() {
        match level.left.pop() {
            Some(child) => match open_subdir(level.fd.as_fd(), &child)? {
                Some(fd) => {
                    let left = child_names(&fd)?;
                    stack.push(Level {
                        fd,
                        name: child,
                        left,
                    });
                }
                None => unlink(level.fd.as_fd(), &child, 0)?,
            },
            None => {
                let done = stack.pop().expect("a level");
                let parent = stack.last().map_or(dir, |l| l.fd.as_fd());
                unlink(parent, &done.name, libc::AT_REMOVEDIR)?;
            }
        }
    }
    Ok(())
}

/// Opens `name` in `dir` as a directory without following it; `None` if it is anything else.
pub(crate) fn open_subdir(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Option<OwnedFd>> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a descriptor borrowed for the call and a NUL-terminated name.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags) };
    if fd >= 0 {
        // SAFETY: a descriptor the kernel just returned, owned by nobody else.
        return Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }));
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::ENOTDIR) | Some(libc::ELOOP) => Ok(None),
        _ => Err(err),
    }
}

pub(crate) fn child_names(dir: &OwnedFd) -> io::Result<Vec<CString>> {
    Ok(read_dir_names(dir)?
        .into_iter()
        .map(|n| CString::new(n).expect("no NUL"))
        .collect())
}

/// Clients may set and remove only `user.` attributes: `trusted.`, `security.` (file
/// capabilities!) and `system.` ones would act with the server's privileges; `user.roost.`
/// ones are the server's own (the accounting's creator of a file), which a client could
/// otherwise forge to charge its storage to somebody else.
pub fn user_attribute(attr: &CStr) -> OpResult<()> {
    let name = attr.to_bytes();
    if name.starts_with(b"user.") && !crate::accounting::storage::reserved(name) {
        Ok(())
    } else {
        Err(OpError::errno(libc::EPERM))
    }
}

/// Reads an attribute, growing the buffer if it changes size between the two calls.
fn xattr_get(path: &CStr, attr: &CStr) -> OpResult<Vec<u8>> {
    loop {
        // SAFETY: NUL-terminated path and name; a null buffer of size 0 asks for the size only.
        let size = unsafe { libc::getxattr(path.as_ptr(), attr.as_ptr(), std::ptr::null_mut(), 0) };
        if size < 0 {
            return Err(io::Error::last_os_error().into());
        }
        let mut buf = vec![0u8; size as usize];
        // SAFETY: NUL-terminated path and name, and `buf` writable for its length.
        let n = unsafe {
            libc::getxattr(
                path.as_ptr(),
                attr.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        if n >= 0 {
            buf.truncate(n as usize);
            return Ok(buf);
        }
        if io::Error::last_os_error().raw_os_error() != Some(libc::ERANGE) {
            return Err(io::Error::last_os_error().into());
        }
    }
}

/// Lists attribute names (NUL-separated, as the kernel gives them).
fn xattr_list(path: &CStr) -> OpResult<Vec<u8>> {
    loop {
        // SAFETY: a NUL-terminated path; a null buffer of size 0 asks for the size only.
        let size = unsafe { libc::listxattr(path.as_ptr(), std::ptr::null_mut(), 0) };
        if size < 0 {
            return Err(io::Error::last_os_error().into());
        }
        let mut buf = vec![0u8; size as usize];
        // SAFETY: a NUL-terminated path, and `buf` writable for its length.
        let n = unsafe { libc::listxattr(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            buf.truncate(n as usize);
            return Ok(buf);
        }
        if io::Error::last_os_error().raw_os_error() != Some(libc::ERANGE) {
            return Err(io::Error::last_os_error().into());
        }
    }
}
