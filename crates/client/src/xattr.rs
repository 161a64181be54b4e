//! The extended-attribute RPCs. A missing attribute comes back from roost's server as
//! `INVALID_REQUEST` (cctools' client reads it the same way), which these calls report as
//! `ENODATA`.

use roost_wire::Request;

use crate::client::Client;
use crate::error::{Error, Result};

impl Client {
    // ---- extended attributes ----

    /// An xattr call whose server errors use the xattr reading of `INVALID_REQUEST`.
    fn xattr<T>(&mut self, f: impl FnOnce(&mut Client) -> Result<T>) -> Result<T> {
        f(self).map_err(|e| match e {
            Error::Remote { code, .. } => Error::remote_xattr(code),
            other => other,
        })
    }

    /// Gets an extended attribute (`ENODATA` if missing).
    pub fn getxattr(&mut self, path: impl AsRef<[u8]>, name: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        let req = Request::Getxattr {
            path: path.as_ref().to_vec(),
            name: name.as_ref().to_vec(),
        };
        self.xattr(|c| c.data(req, roost_wire::MAX_BLOCK))
    }

    /// Gets an extended attribute of an open file.
    pub fn fgetxattr(&mut self, fd: i64, name: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        let req = Request::Fgetxattr {
            fd,
            name: name.as_ref().to_vec(),
        };
        self.xattr(|c| c.data(req, roost_wire::MAX_BLOCK))
    }

    /// Gets an extended attribute without following a final symlink.
    pub fn lgetxattr(&mut self, path: impl AsRef<[u8]>, name: impl AsRef<[u8]>) -> Result<Vec<u8>> {
        let req = Request::Lgetxattr {
            path: path.as_ref().to_vec(),
            name: name.as_ref().to_vec(),
        };
        self.xattr(|c| c.data(req, roost_wire::MAX_BLOCK))
    }

    fn names(bytes: Vec<u8>) -> Vec<Vec<u8>> {
        bytes
            .split(|&b| b == 0)
            .filter(|n| !n.is_empty())
            .map(<[u8]>::to_vec)
            .collect()
    }

    /// Lists extended attribute names.
    pub fn listxattr(&mut self, path: impl AsRef<[u8]>) -> Result<Vec<Vec<u8>>> {
        let req = Request::Listxattr {
            path: path.as_ref().to_vec(),
        };
        self.xattr(|c| c.data(req, roost_wire::MAX_BLOCK))
            .map(Client::names)
    }

    /// Lists extended attribute names of an open file.
    pub fn flistxattr(&mut self, fd: i64) -> Result<Vec<Vec<u8>>> {
        self.xattr(|c| c.data(Request::Flistxattr { fd }, roost_wire::MAX_BLOCK))
            .map(Client::names)
    }

    /// Lists extended attribute names without following a final symlink.
    pub fn llistxattr(&mut self, path: impl AsRef<[u8]>) -> Result<Vec<Vec<u8>>> {
        let req = Request::Llistxattr {
            path: path.as_ref().to_vec(),
        };
        self.xattr(|c| c.data(req, roost_wire::MAX_BLOCK))
            .map(Client::names)
    }

    fn set_xattr(&mut self, req: Request, value: &[u8]) -> Result<()> {
        self.xattr(|c| c.guard(|c| c.call(&req, value).map(drop)))
    }

    /// Sets an extended attribute (`flags`: `XATTR_CREATE`, `XATTR_REPLACE` or 0).
    pub fn setxattr(
        &mut self,
        path: impl AsRef<[u8]>,
        name: impl AsRef<[u8]>,
        value: &[u8],
        flags: i32,
    ) -> Result<()> {
        let (path, name, length) = (
            path.as_ref().to_vec(),
            name.as_ref().to_vec(),
            value.len() as u64,
        );
        self.set_xattr(
            Request::Setxattr {
                path,
                name,
                length,
                flags,
            },
            value,
        )
    }

    /// Sets an extended attribute of an open file.
    pub fn fsetxattr(
        &mut self,
        fd: i64,
        name: impl AsRef<[u8]>,
        value: &[u8],
        flags: i32,
    ) -> Result<()> {
        let req = Request::Fsetxattr {
            fd,
            name: name.as_ref().to_vec(),
            length: value.len() as u64,
            flags,
        };
        self.set_xattr(req, value)
    }

    /// Sets an extended attribute without following a final symlink.
    pub fn lsetxattr(
        &mut self,
        path: impl AsRef<[u8]>,
        name: impl AsRef<[u8]>,
        value: &[u8],
        flags: i32,
    ) -> Result<()> {
        let (path, name, length) = (
            path.as_ref().to_vec(),
            name.as_ref().to_vec(),
            value.len() as u64,
        );
        self.set_xattr(
            Request::Lsetxattr {
                path,
                name,
                length,
                flags,
            },
            value,
        )
    }

    /// Removes an extended attribute.
    pub fn removexattr(&mut self, path: impl AsRef<[u8]>, name: impl AsRef<[u8]>) -> Result<()> {
        let req = Request::Removexattr {
            path: path.as_ref().to_vec(),
            name: name.as_ref().to_vec(),
        };
        self.xattr(|c| c.simple(req)).map(drop)
    }

    /// Removes an extended attribute of an open file.
    pub fn fremovexattr(&mut self, fd: i64, name: impl AsRef<[u8]>) -> Result<()> {
        self.xattr(|c| {
            c.simple(Request::Fremovexattr {
                fd,
                name: name.as_ref().to_vec(),
            })
        })
        .map(drop)
    }

    /// Removes an extended attribute without following a final symlink.
    pub fn lremovexattr(&mut self, path: impl AsRef<[u8]>, name: impl AsRef<[u8]>) -> Result<()> {
        let req = Request::Lremovexattr {
            path: path.as_ref().to_vec(),
            name: name.as_ref().to_vec(),
        };
        self.xattr(|c| c.simple(req)).map(drop)
    }
}
