//! Open flags as the letters `open` carries (`rwatcxs`) and their `O_*` equivalents.
//!
//! `r` read, `w` write (both: read-write; neither: read-only, as in cctools), `a` append,
//! `t` truncate, `c` create, `x` exclusive, `s` synchronous. Letters go out in the order
//! `r w c t a x s`, the order cctools' client writes them; any order is accepted.

use crate::error::WireError;

/// The open mode of a Chirp `open` request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OpenFlags {
    /// `r`: open for reading.
    pub read: bool,
    /// `w`: open for writing.
    pub write: bool,
    /// `c`: create the file if missing (`O_CREAT`).
    pub create: bool,
    /// `t`: truncate to zero length (`O_TRUNC`).
    pub truncate: bool,
    /// `a`: every write appends (`O_APPEND`).
    pub append: bool,
    /// `x`: fail if the file exists (`O_EXCL`).
    pub exclusive: bool,
    /// `s`: synchronous writes (`O_SYNC`).
    pub sync: bool,
}

impl OpenFlags {
    /// Read-only.
    pub const READ: OpenFlags = OpenFlags {
        read: true,
        write: false,
        create: false,
        truncate: false,
        append: false,
        exclusive: false,
        sync: false,
    };

    /// Parses the letters; any byte outside `rwatcxs` is an error, and so is an empty set.
    /// A set with neither `r` nor `w` is read-only and comes back with `read` set.
    pub fn from_letters(letters: &[u8]) -> Result<OpenFlags, WireError> {
        if letters.is_empty() {
            return Err(WireError::BadArgument("flags"));
        }
        let mut f = OpenFlags::default();
        for &l in letters {
            let slot = match l {
                b'r' => &mut f.read,
                b'w' => &mut f.write,
                b'c' => &mut f.create,
                b't' => &mut f.truncate,
                b'a' => &mut f.append,
                b'x' => &mut f.exclusive,
                b's' => &mut f.sync,
                _ => return Err(WireError::BadArgument("flags")),
            };
            *slot = true;
        }
        // Neither `r` nor `w` means read-only, as in cctools; say so explicitly.
        f.read |= !f.write;
        Ok(f)
    }

    /// The letters, `r` first; a set with neither `r` nor `w` is written as `r`.
    pub fn to_letters(self) -> String {
        let mut s = String::with_capacity(7);
        if self.read || !self.write {
            s.push('r');
        }
        for (on, l) in [
            (self.write, 'w'),
            (self.create, 'c'),
            (self.truncate, 't'),
            (self.append, 'a'),
            (self.exclusive, 'x'),
            (self.sync, 's'),
        ] {
            if on {
                s.push(l);
            }
        }
        s
    }

    /// The `open(2)` flags.
    pub fn to_libc(self) -> i32 {
        let mut f = match (self.read, self.write) {
            (_, false) => libc::O_RDONLY,
            (false, true) => libc::O_WRONLY,
            (true, true) => libc::O_RDWR,
        };
        for (on, bit) in [
            (self.create, libc::O_CREAT),
            (self.truncate, libc::O_TRUNC),
            (self.append, libc::O_APPEND),
            (self.exclusive, libc::O_EXCL),
            (self.sync, libc::O_SYNC),
        ] {
            if on {
                f |= bit;
            }
        }
        f
    }

    /// The letters' meaning of `open(2)` flags; flags Chirp cannot carry are dropped.
    pub fn from_libc(flags: i32) -> OpenFlags {
        let acc = flags & libc::O_ACCMODE;
        OpenFlags {
            read: acc == libc::O_RDONLY || acc == libc::O_RDWR,
            write: acc == libc::O_WRONLY || acc == libc::O_RDWR,
            create: flags & libc::O_CREAT != 0,
            truncate: flags & libc::O_TRUNC != 0,
            append: flags & libc::O_APPEND != 0,
            exclusive: flags & libc::O_EXCL != 0,
            sync: flags & libc::O_SYNC == libc::O_SYNC,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn letters_round_trip_in_canonical_order() {
        for s in ["r", "w", "rw", "wct", "rwcta", "wcx", "rws", "rwctaxs"] {
            assert_eq!(
                OpenFlags::from_letters(s.as_bytes()).unwrap().to_letters(),
                s
            );
        }
    }

    #[test]
    fn any_order_is_accepted() {
        let f = OpenFlags::from_letters(b"ctw").unwrap();
        assert!(f.write && f.create && f.truncate && !f.read);
    }

    #[test]
    fn neither_read_nor_write_means_read_only() {
        let f = OpenFlags::from_letters(b"a").unwrap();
        assert!(f.read && !f.write && f.append);
        assert_eq!(f.to_letters(), "ra");
        assert_eq!(f.to_libc() & libc::O_ACCMODE, libc::O_RDONLY);
    }

    #[test]
    fn unknown_or_empty_letters_are_refused() {
        assert!(OpenFlags::from_letters(b"rq").is_err());
        assert!(OpenFlags::from_letters(b"").is_err());
    }

    #[test]
    fn libc_round_trip() {
        for s in ["r", "w", "rw", "wct", "rwa", "wcx", "rws"] {
            let f = OpenFlags::from_letters(s.as_bytes()).unwrap();
            assert_eq!(OpenFlags::from_libc(f.to_libc()), f, "{s}");
        }
        assert_eq!(
            OpenFlags::from_libc(libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC).to_letters(),
            "wct"
        );
        assert_eq!(
            OpenFlags::from_letters(b"rw").unwrap().to_libc(),
            libc::O_RDWR
        );
    }
}
