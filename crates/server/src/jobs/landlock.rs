//! The Landlock system calls a job's confinement is made of: which ABI the kernel offers, a
//! ruleset handling every file right that ABI knows (and TCP, and the scopes, where asked
//! and known), rules granting rights beneath a file or directory, and restricting the
//! calling process. What a job is granted is decided in [`super::view`].

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;

/// File rights, as `linux/landlock.h` numbers them.
pub mod fs {
    pub const EXECUTE: u64 = 1 << 0;
    pub const WRITE_FILE: u64 = 1 << 1;
    pub const READ_FILE: u64 = 1 << 2;
    pub const READ_DIR: u64 = 1 << 3;
    /// REMOVE_DIR, REMOVE_FILE and the seven MAKE_* rights (ABI 1).
    pub const CHANGE_TREE: u64 = 0b1_1111_1111 << 4;
    /// Linking or renaming across directories (ABI 2).
    pub const REFER: u64 = 1 << 13;
    /// ABI 3.
    pub const TRUNCATE: u64 = 1 << 14;
    /// ioctl on character and block devices (ABI 5).
    pub const IOCTL_DEV: u64 = 1 << 15;
    /// Reading a file or a directory.
    pub const READ: u64 = READ_FILE | READ_DIR;
    /// The rights that mean something on a file that is not a directory.
    pub const ON_FILES: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
}

/// TCP rights (ABI 4).
pub mod net {
    pub const BIND_TCP: u64 = 1 << 0;
    pub const CONNECT_TCP: u64 = 1 << 1;
}

pub use roost_base::landlock::{abi, restrict_self, scope};
use roost_base::landlock::{create_ruleset, RulesetAttr};

const RULE_PATH_BENEATH: libc::c_int = 1;

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// Every file right ABI `abi` knows.
pub fn fs_rights(abi: i64) -> u64 {
    let mut rights = fs::EXECUTE | fs::WRITE_FILE | fs::READ_FILE | fs::READ_DIR | fs::CHANGE_TREE;
    if abi >= 2 {
        rights |= fs::REFER;
    }
    if abi >= 3 {
        rights |= fs::TRUNCATE;
    }
    if abi >= 5 {
        rights |= fs::IOCTL_DEV;
    }
    rights
}

/// A ruleset being built. Its descriptor is close-on-exec.
pub struct Ruleset {
    fd: OwnedFd,
    /// The file rights it handles: whatever no rule grants is refused.
    handled: u64,
}

impl Ruleset {
    /// A ruleset handling every file right of ABI `abi`, TCP binding and connecting when
    /// `deny_tcp` (ABI 4 and later; no rule grants them, so all TCP is refused), and, from
    /// ABI 6, the abstract unix socket and signal scopes.
    pub fn new(abi: i64, deny_tcp: bool) -> io::Result<Ruleset> {
        let handled = fs_rights(abi);
        let attr = RulesetAttr {
            handled_access_fs: handled,
            handled_access_net: if deny_tcp && abi >= 4 {
                net::BIND_TCP | net::CONNECT_TCP
            } else {
                0
            },
            scoped: if abi >= 6 {
                scope::ABSTRACT_UNIX_SOCKET | scope::SIGNAL
            } else {
                0
            },
        };
        let fd = create_ruleset(&attr, abi)?;
        Ok(Ruleset { fd, handled })
    }

    /// Grants `access` (less what the ruleset does not handle) beneath `path`, following
    /// symlinks; on a file that is not a directory only the rights that apply to files.
    pub fn allow(&self, path: &Path, access: u64) -> io::Result<()> {
        let c = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: a path open; the descriptor is owned below.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: just opened, owned by nobody else.
        let target = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: `struct stat` is plain data, valid all zeros.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat of a descriptor of ours into a stat of ours.
        if unsafe { libc::fstat(target.as_raw_fd(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let access = if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
            access
        } else {
            access & fs::ON_FILES
        };
        add_rule(
            self.fd.as_raw_fd(),
            target.as_raw_fd(),
            access & self.handled,
        )
    }

    /// The file rights the ruleset handles.
    pub fn handled(&self) -> u64 {
        self.handled
    }

    pub fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Grants `access` beneath the file or directory open as `target` in the ruleset open as
/// `ruleset` (the rights must suit the target's kind).
pub fn add_rule(ruleset: RawFd, target: RawFd, access: u64) -> io::Result<()> {
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: target,
    };
    // SAFETY: attr outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset,
            RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_abi_handles_the_rights_it_knows() {
        assert_eq!(fs_rights(1), (1 << 13) - 1);
        assert_eq!(fs_rights(3), (1 << 15) - 1);
        assert_eq!(fs_rights(4), (1 << 15) - 1);
        assert_eq!(fs_rights(7), (1 << 16) - 1);
    }

    #[test]
    fn a_rule_on_a_file_keeps_only_the_rights_of_files() {
        let Some(abi) = abi() else {
            eprintln!("skipped: no Landlock here");
            return;
        };
        let ruleset = Ruleset::new(abi, true).unwrap();
        // READ_DIR on a file would be EINVAL if it were passed on.
        ruleset
            .allow(Path::new("/dev/null"), fs::READ | fs::WRITE_FILE)
            .unwrap();
        ruleset
            .allow(Path::new("/usr"), fs::READ | fs::EXECUTE)
            .unwrap();
        assert!(ruleset.allow(Path::new("/no/such/path"), fs::READ).is_err());
    }
}
