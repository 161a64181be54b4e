//! The stat line (13 numbers) and statfs line (7 numbers) that follow a successful `stat`,
//! `lstat`, `fstat`, `open`, `getlongdir` entry, `statfs` or `fstatfs` reply.
//!
//! Numbers are signed decimal separated by single spaces, the line ends with a newline.
//! Stat order: dev ino mode nlink uid gid rdev size blksize blocks atime mtime ctime.
//! Statfs order: type bsize blocks bfree bavail files ffree.

use crate::error::WireError;

/// Parses exactly `N` space-separated signed decimal numbers (trailing newline allowed).
fn parse_numbers<const N: usize>(line: &[u8], what: &'static str) -> Result<[i64; N], WireError> {
    let line = crate::strip_newline(line);
    let mut out = [0i64; N];
    let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
    for slot in out.iter_mut() {
        let w = words.next().ok_or(WireError::BadReply(what))?;
        *slot = crate::parse_i64(w).ok_or(WireError::BadReply(what))?;
    }
    if words.next().is_some() {
        return Err(WireError::BadReply(what));
    }
    Ok(out)
}

/// Writes the numbers space-separated with a trailing newline.
fn format_numbers(nums: &[i64]) -> Vec<u8> {
    let mut s = String::with_capacity(nums.len() * 11);
    for (i, n) in nums.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(&n.to_string());
    }
    s.push('\n');
    s.into_bytes()
}

/// The properties of a file as Chirp carries them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Stat {
    /// Device number.
    pub dev: i64,
    /// Inode number.
    pub ino: i64,
    /// Type and permission bits (`st_mode`).
    pub mode: i64,
    /// Hard link count.
    pub nlink: i64,
    /// Owner uid.
    pub uid: i64,
    /// Owner gid.
    pub gid: i64,
    /// Device number if this is a device.
    pub rdev: i64,
    /// Size in bytes.
    pub size: i64,
    /// Preferred I/O block size.
    pub blksize: i64,
    /// 512-byte blocks allocated.
    pub blocks: i64,
    /// Access time, seconds since the epoch.
    pub atime: i64,
    /// Modification time, seconds since the epoch.
    pub mtime: i64,
    /// Status change time, seconds since the epoch.
    pub ctime: i64,
}

impl Stat {
    /// The fields in wire order.
    pub fn to_array(&self) -> [i64; 13] {
        [
            self.dev,
            self.ino,
            self.mode,
            self.nlink,
            self.uid,
            self.gid,
            self.rdev,
            self.size,
            self.blksize,
            self.blocks,
            self.atime,
            self.mtime,
            self.ctime,
        ]
    }

    /// The fields from wire order.
    pub fn from_array(a: [i64; 13]) -> Stat {
        let [dev, ino, mode, nlink, uid, gid, rdev, size, blksize, blocks, atime, mtime, ctime] = a;
        Stat {
            dev,
            ino,
            mode,
            nlink,
            uid,
            gid,
            rdev,
            size,
            blksize,
            blocks,
            atime,
            mtime,
            ctime,
        }
    }

    /// The stat line, newline included.
    pub fn to_line(&self) -> Vec<u8> {
        format_numbers(&self.to_array())
    }

    /// Parses a stat line (with or without its newline).
    pub fn parse(line: &[u8]) -> Result<Stat, WireError> {
        parse_numbers::<13>(line, "stat line").map(Stat::from_array)
    }

    /// The file type bits (`S_IFMT` part of `mode`).
    pub fn file_type(&self) -> u32 {
        (self.mode as u32) & libc::S_IFMT
    }

    /// True for a directory.
    pub fn is_dir(&self) -> bool {
        self.file_type() == libc::S_IFDIR
    }

    /// True for a regular file.
    pub fn is_file(&self) -> bool {
        self.file_type() == libc::S_IFREG
    }

    /// True for a symbolic link.
    pub fn is_symlink(&self) -> bool {
        self.file_type() == libc::S_IFLNK
    }

    /// The permission bits (`mode & 0o7777`).
    pub fn permissions(&self) -> u32 {
        (self.mode as u32) & 0o7777
    }
}

// Field types of `libc::stat` and `libc::statfs` differ between targets, so the casts stay.
#[allow(clippy::unnecessary_cast)]
impl From<&libc::stat> for Stat {
    fn from(s: &libc::stat) -> Stat {
        Stat {
            dev: s.st_dev as i64,
            ino: s.st_ino as i64,
            mode: i64::from(s.st_mode),
            nlink: s.st_nlink as i64,
            uid: i64::from(s.st_uid),
            gid: i64::from(s.st_gid),
            rdev: s.st_rdev as i64,
            size: s.st_size,
            blksize: s.st_blksize as i64,
            blocks: s.st_blocks,
            atime: s.st_atime,
            mtime: s.st_mtime,
            ctime: s.st_ctime,
        }
    }
}

/// The properties of a file system as Chirp carries them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StatFs {
    /// File system type magic.
    pub fs_type: i64,
    /// Block size in bytes.
    pub bsize: i64,
    /// Total blocks.
    pub blocks: i64,
    /// Free blocks.
    pub bfree: i64,
    /// Blocks available to unprivileged users.
    pub bavail: i64,
    /// Total inodes.
    pub files: i64,
    /// Free inodes.
    pub ffree: i64,
}

impl StatFs {
    /// The fields in wire order.
    pub fn to_array(&self) -> [i64; 7] {
        [
            self.fs_type,
            self.bsize,
            self.blocks,
            self.bfree,
            self.bavail,
            self.files,
            self.ffree,
        ]
    }

    /// The statfs line, newline included.
    pub fn to_line(&self) -> Vec<u8> {
        format_numbers(&self.to_array())
    }

    /// Parses a statfs line (with or without its newline).
    pub fn parse(line: &[u8]) -> Result<StatFs, WireError> {
        let [fs_type, bsize, blocks, bfree, bavail, files, ffree] =
            parse_numbers::<7>(line, "statfs line")?;
        Ok(StatFs {
            fs_type,
            bsize,
            blocks,
            bfree,
            bavail,
            files,
            ffree,
        })
    }
}

#[allow(clippy::unnecessary_cast)]
impl From<&libc::statfs> for StatFs {
    fn from(s: &libc::statfs) -> StatFs {
        StatFs {
            fs_type: s.f_type as i64,
            bsize: s.f_bsize as i64,
            blocks: s.f_blocks as i64,
            bfree: s.f_bfree as i64,
            bavail: s.f_bavail as i64,
            files: s.f_files as i64,
            ffree: s.f_ffree as i64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_line_matches_cctools_bytes() {
        // Captured from cctools 9.9 chirp_server (fstat of a 5-byte file).
        let line =
            b"65024 9978191 33152 1 65534 65534 0 5 4096 8 1795328488 1795328489 1795328489\n";
        let st = Stat::parse(line).unwrap();
        assert_eq!(st.size, 5);
        assert_eq!(st.mode, 0o100600);
        assert!(st.is_file() && !st.is_dir());
        assert_eq!(st.to_line(), line.to_vec());
    }

    #[test]
    fn stat_line_with_negative_and_large_numbers_round_trips() {
        let st = Stat::from_array([
            -1,
            i64::MAX,
            0o40755,
            2,
            -1,
            0,
            0,
            5 << 32,
            4096,
            1,
            -5,
            0,
            i64::MIN,
        ]);
        assert_eq!(Stat::parse(&st.to_line()).unwrap(), st);
        assert!(st.is_dir());
    }

    #[test]
    fn short_long_or_non_numeric_stat_lines_are_refused() {
        assert!(Stat::parse(b"1 2 3").is_err());
        assert!(Stat::parse(b"1 2 3 4 5 6 7 8 9 10 11 12 13 14").is_err());
        assert!(Stat::parse(b"1 2 3 4 5 6 7 8 9 10 11 12 x").is_err());
    }

    #[test]
    fn statfs_line_matches_cctools_order() {
        let line = b"61267 4096 66053021 63038480 20860775 16777216 16369890\n";
        let fs = StatFs::parse(line).unwrap();
        assert_eq!(
            (fs.fs_type, fs.bsize, fs.blocks, fs.bfree),
            (61267, 4096, 66053021, 63038480)
        );
        assert_eq!(
            (fs.bavail, fs.files, fs.ffree),
            (20860775, 16777216, 16369890)
        );
        assert_eq!(fs.to_line(), line.to_vec());
    }

    #[test]
    fn converts_from_libc_stat() {
        let mut raw: libc::stat = unsafe { std::mem::zeroed() };
        raw.st_size = 42;
        raw.st_mode = libc::S_IFLNK | 0o777;
        let st = Stat::from(&raw);
        assert_eq!(st.size, 42);
        assert!(st.is_symlink());
        assert_eq!(st.permissions(), 0o777);
    }
}
