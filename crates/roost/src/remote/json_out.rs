//! The `--json` forms of the client commands' answers (`ls`, `stat`, `getacl`, `whoami`,
//! `df`), built with the catalog's JSON writer like `status`, `job` and `accounting`. The
//! field names are a documented interface (docs/cli.md): add fields, never rename them.

use super::mode_string;
use roost_catalog::json::Value;
use roost_client::{Stat, StatFs};

fn int(v: i64) -> Value {
    Value::Int(v)
}

fn string(s: impl Into<String>) -> Value {
    Value::String(s.into())
}

/// `file`, `directory`, `symlink` or `other`.
fn kind(st: &Stat) -> &'static str {
    match st.mode as u32 & libc::S_IFMT {
        libc::S_IFREG => "file",
        libc::S_IFDIR => "directory",
        libc::S_IFLNK => "symlink",
        _ => "other",
    }
}

/// A file's properties under `key` = `name` (`name` in listings, `path` for `stat`), with
/// the link's text when it is a symbolic link whose target was read.
pub(super) fn stat(key: &str, name: &str, st: &Stat, target: Option<String>) -> Value {
    let mut v = Value::Object(vec![
        (key.into(), string(name)),
        ("type".into(), string(kind(st))),
        ("size".into(), int(st.size)),
        ("mode".into(), int(st.mode & 0o7777)),
        ("mode_string".into(), string(mode_string(st))),
        ("nlink".into(), int(st.nlink)),
        ("uid".into(), int(st.uid)),
        ("gid".into(), int(st.gid)),
        ("inode".into(), int(st.ino)),
        ("atime".into(), int(st.atime)),
        ("mtime".into(), int(st.mtime)),
        ("ctime".into(), int(st.ctime)),
    ]);
    if let Some(target) = target {
        v.set("target", string(target));
    }
    v
}

/// One ACL entry.
pub(super) fn acl_entry(subject: &str, rights: &str) -> Value {
    Value::Object(vec![
        ("subject".into(), string(subject)),
        ("rights".into(), string(rights)),
    ])
}

/// The subject a server knows the client as, whole and split at its first ':'.
pub(super) fn whoami(subject: &str) -> Value {
    let (method, name) = subject.split_once(':').unwrap_or(("", subject));
    Value::Object(vec![
        ("subject".into(), string(subject)),
        ("method".into(), string(method)),
        ("name".into(), string(name)),
    ])
}

/// Space on the file system holding `path` on `server`: byte counts are the server's block
/// counts times its block size.
pub(super) fn statfs(server: &str, path: &str, fs: &StatFs) -> Value {
    let bytes = |blocks: i64| blocks.saturating_mul(fs.bsize);
    Value::Object(vec![
        ("server".into(), string(server)),
        ("path".into(), string(path)),
        ("type".into(), int(fs.fs_type)),
        ("block_size".into(), int(fs.bsize)),
        ("total_bytes".into(), int(bytes(fs.blocks))),
        ("used_bytes".into(), int(bytes(fs.blocks - fs.bfree))),
        ("free_bytes".into(), int(bytes(fs.bfree))),
        ("available_bytes".into(), int(bytes(fs.bavail))),
        ("files".into(), int(fs.files)),
        ("files_free".into(), int(fs.ffree)),
    ])
}
