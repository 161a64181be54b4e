//! One method per Chirp RPC on open descriptors, names, identities and ACLs, each returning
//! a typed result (extended attributes are in `xattr.rs`, file data in `bulk.rs`).

use roost_wire::{listing, AclEntry, DirEntry, OpenFlags, Request, Stat, StatFs};

use crate::client::Client;
use crate::error::{Error, Result};
use crate::lines::{read_line, REPLY_LINE_MAX};

impl Client {
    // ---- descriptors ----

    /// Opens a file; returns the descriptor and the file's stat.
    pub fn open(
        &mut self,
        path: impl AsRef<[u8]>,
        flags: OpenFlags,
        mode: u32,
    ) -> Result<(i64, Stat)> {
        let (fd, st) = self.stat_reply(Request::Open {
            path: path.as_ref().to_vec(),
            flags,
            mode,
        })?;
        Ok((fd as i64, st))
    }

    /// Closes a descriptor.
    pub fn close(&mut self, fd: i64) -> Result<()> {
        self.simple(Request::Close { fd }).map(drop)
    }

    /// Closes a descriptor without waiting for the answer (a close's failure leaves nothing
    /// to do): the request is sent now, and its answer read and dropped by the next call.
    pub fn close_unanswered(&mut self, fd: i64) -> Result<()> {
        self.unanswered(Request::Close { fd })
    }

    /// Stats an open file.
    pub fn fstat(&mut self, fd: i64) -> Result<Stat> {
        self.stat_reply(Request::Fstat { fd }).map(|(_, st)| st)
    }

    /// Statfs of an open file's file system.
    pub fn fstatfs(&mut self, fd: i64) -> Result<StatFs> {
        self.statfs_reply(Request::Fstatfs { fd })
    }

    /// Flushes an open file to disk.
    pub fn fsync(&mut self, fd: i64) -> Result<()> {
        self.simple(Request::Fsync { fd }).map(drop)
    }

    /// Changes an open file's mode.
    pub fn fchmod(&mut self, fd: i64, mode: u32) -> Result<()> {
        self.simple(Request::Fchmod { fd, mode }).map(drop)
    }

    /// Changes an open file's owner (servers may ignore it).
    pub fn fchown(&mut self, fd: i64, uid: i64, gid: i64) -> Result<()> {
        self.simple(Request::Fchown { fd, uid, gid }).map(drop)
    }

    /// Truncates an open file.
    pub fn ftruncate(&mut self, fd: i64, length: u64) -> Result<()> {
        self.simple(Request::Ftruncate { fd, length }).map(drop)
    }

    // ---- names ----

    /// Stats a path, following symlinks.
    pub fn stat(&mut self, path: impl AsRef<[u8]>) -> Result<Stat> {
        self.stat_reply(Request::Stat {
            path: path.as_ref().to_vec(),
        })
        .map(|(_, st)| st)
    }

    /// Stats a path without following a final symlink.
    pub fn lstat(&mut self, path: impl AsRef<[u8]>) -> Result<Stat> {
        self.stat_reply(Request::Lstat {
            path: path.as_ref().to_vec(),
        })
        .map(|(_, st)| st)
    }

    /// Statfs of the file system holding a path.
    pub fn statfs(&mut self, path: impl AsRef<[u8]>) -> Result<StatFs> {
        self.statfs_reply(Request::Statfs {
            path: path.as_ref().to_vec(),
        })
    }

    /// Checks access (`mode`: `R_OK|W_OK|X_OK` or `F_OK`).
    pub fn access(&mut self, path: impl AsRef<[u8]>, mode: u32) -> Result<()> {
        self.simple(Request::Access {
            path: path.as_ref().to_vec(),
            mode,
        })
        .map(drop)
    }

    /// Changes a path's mode.
    pub fn chmod(&mut self, path: impl AsRef<[u8]>, mode: u32) -> Result<()> {
        self.simple(Request::Chmod {
            path: path.as_ref().to_vec(),
            mode,
        })
        .map(drop)
    }

    /// Changes a path's owner (servers may ignore it).
    pub fn chown(&mut self, path: impl AsRef<[u8]>, uid: i64, gid: i64) -> Result<()> {
        self.simple(Request::Chown {
            path: path.as_ref().to_vec(),
            uid,
            gid,
        })
        .map(drop)
    }

    /// Changes a symlink's owner (servers may ignore it).
    pub fn lchown(&mut self, path: impl AsRef<[u8]>, uid: i64, gid: i64) -> Result<()> {
        self.simple(Request::Lchown {
            path: path.as_ref().to_vec(),
            uid,
            gid,
        })
        .map(drop)
    }

    /// Truncates a path.
    pub fn truncate(&mut self, path: impl AsRef<[u8]>, length: u64) -> Result<()> {
        self.simple(Request::Truncate {
            path: path.as_ref().to_vec(),
            length,
        })
        .map(drop)
    }

    /// Sets the times of `path` itself, a final symlink not followed (roost's `lutime`
    /// extension: other servers answer EINVAL).
    pub fn lutime(&mut self, path: impl AsRef<[u8]>, actime: i64, modtime: i64) -> Result<()> {
        self.simple(Request::Lutime {
            path: path.as_ref().to_vec(),
            actime,
            modtime,
        })
        .map(drop)
    }

    /// Sets access and modification times (seconds since the epoch).
    pub fn utime(&mut self, path: impl AsRef<[u8]>, actime: i64, modtime: i64) -> Result<()> {
        self.simple(Request::Utime {
            path: path.as_ref().to_vec(),
            actime,
            modtime,
        })
        .map(drop)
    }

    /// Removes a file.
    pub fn unlink(&mut self, path: impl AsRef<[u8]>) -> Result<()> {
        self.simple(Request::Unlink {
            path: path.as_ref().to_vec(),
        })
        .map(drop)
    }

    /// Renames a path.
    pub fn rename(&mut self, from: impl AsRef<[u8]>, to: impl AsRef<[u8]>) -> Result<()> {
        self.simple(Request::Rename {
            path: from.as_ref().to_vec(),
            new_path: to.as_ref().to_vec(),
        })
        .map(drop)
    }

    /// Hard-links `from` as `to`.
    pub fn link(&mut self, from: impl AsRef<[u8]>, to: impl AsRef<[u8]>) -> Result<()> {
        self.simple(Request::Link {
            path: from.as_ref().to_vec(),
            new_path: to.as_ref().to_vec(),
        })
        .map(drop)
    }

    /// Creates a symlink at `path` pointing to `target`.
    pub fn symlink(&mut self, target: impl AsRef<[u8]>, path: impl AsRef<[u8]>) -> Result<()> {
        self.simple(Request::Symlink {
            target: target.as_ref().to_vec(),
            path: path.as_ref().to_vec(),
        })
        .map(drop)
    }

    /// Reads a symlink's target.
    pub fn readlink(&mut self, path: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        let max = 4096;
        self.data(
            Request::Readlink {
                path: path.as_ref().to_vec(),
                length: max,
            },
            max,
        )
    }

    /// Makes a directory.
    pub fn mkdir(&mut self, path: impl AsRef<[u8]>, mode: u32) -> Result<()> {
        self.simple(Request::Mkdir {
            path: path.as_ref().to_vec(),
            mode,
        })
        .map(drop)
    }

    /// Removes an empty directory.
    pub fn rmdir(&mut self, path: impl AsRef<[u8]>) -> Result<()> {
        self.simple(Request::Rmdir {
            path: path.as_ref().to_vec(),
        })
        .map(drop)
    }

    /// Removes a file or a whole tree.
    pub fn rmall(&mut self, path: impl AsRef<[u8]>) -> Result<()> {
        self.simple(Request::Rmall {
            path: path.as_ref().to_vec(),
        })
        .map(drop)
    }

    /// Lists a directory's names (including `.` and `..` if the server lists them).
    pub fn getdir(&mut self, path: impl AsRef<[u8]>) -> Result<Vec<Vec<u8>>> {
        let req = Request::Getdir {
            path: path.as_ref().to_vec(),
        };
        self.guard(|c| {
            c.call(&req, &[])?;
            c.list_lines()
        })
    }

    /// Lists a directory with each entry's stat.
    pub fn getlongdir(&mut self, path: impl AsRef<[u8]>) -> Result<Vec<DirEntry>> {
        let req = Request::Getlongdir {
            path: path.as_ref().to_vec(),
        };
        self.guard(|c| {
            c.call(&req, &[])?;
            let mut entries = Vec::new();
            loop {
                let name = read_line(&mut c.reader, REPLY_LINE_MAX)?;
                if listing::is_end(&name) {
                    return Ok(entries);
                }
                let st = Stat::parse(&read_line(&mut c.reader, REPLY_LINE_MAX)?)?;
                entries.push(DirEntry {
                    name,
                    stat: Some(st),
                });
            }
        })
    }

    /// MD5 digest of a file.
    pub fn md5(&mut self, path: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        self.data(
            Request::Md5 {
                path: path.as_ref().to_vec(),
            },
            64,
        )
    }

    /// Digest of a file with a named algorithm (`md5`, `sha1`, `sha256`).
    pub fn hash(&mut self, algorithm: &str, path: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        self.data(
            Request::Hash {
                algorithm: algorithm.to_string(),
                path: path.as_ref().to_vec(),
            },
            64,
        )
    }

    // ---- identity and ACLs ----

    /// The subject the server sees for this connection.
    pub fn whoami(&mut self) -> Result<String> {
        let max = 1024;
        let bytes = self.data(Request::Whoami { length: max }, max)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Why the server refused this connection's last refused request (a roost extension);
    /// `None` when the server does not say (nothing refused yet, or not a roost server).
    pub fn explain(&mut self) -> Result<Option<String>> {
        match self.data(Request::Explain {}, 4096) {
            Ok(bytes) if !bytes.is_empty() => {
                Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
            }
            Ok(_) => Ok(None),
            Err(e) if !e.breaks_connection() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Up to `length` bytes of the server's accounting ledger from byte `offset`, whole
    /// records only, empty at the end (a roost extension; needs the `a` right on `/`).
    pub fn ledger(&mut self, offset: u64, length: u64) -> Result<Vec<u8>> {
        self.data(Request::Ledger { offset, length }, length)
    }

    /// The subject this server has when it connects to `host`.
    pub fn whoareyou(&mut self, host: &str) -> Result<String> {
        let max = 1024;
        let bytes = self.data(
            Request::Whoareyou {
                host: host.to_string(),
                length: max,
            },
            max,
        )?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    /// A directory's ACL.
    pub fn getacl(&mut self, path: impl AsRef<[u8]>) -> Result<Vec<AclEntry>> {
        let req = Request::Getacl {
            path: path.as_ref().to_vec(),
        };
        self.guard(|c| {
            c.call(&req, &[])?;
            let lines = c.list_lines()?;
            lines
                .iter()
                .map(|l| AclEntry::parse(l).map_err(Error::Protocol))
                .collect()
        })
    }

    /// Sets `subject`'s rights on a directory (`n` removes the entry).
    pub fn setacl(&mut self, path: impl AsRef<[u8]>, subject: &str, rights: &str) -> Result<()> {
        let req = Request::Setacl {
            path: path.as_ref().to_vec(),
            subject: subject.into(),
            rights: rights.into(),
        };
        self.simple(req).map(drop)
    }

    /// Resets a directory's ACL to the caller with `rights` (plus admin).
    pub fn resetacl(&mut self, path: impl AsRef<[u8]>, rights: &str) -> Result<()> {
        self.simple(Request::Resetacl {
            path: path.as_ref().to_vec(),
            rights: rights.into(),
        })
        .map(drop)
    }
}
