//! `/proc/*/mountinfo` and `/proc/*/mounts` (`/proc/mounts` and `/etc/mtab` lead there) list
//! the mappings as mounts, so `df`, `findmnt` and `mount` name a mapped directory's logical
//! mount point, as for a real bind mount. An open of one is rewritten to a file roost
//! writes: the kernel's list for the calling process, and after it a line per local mapping,
//! made from the line of the mount that holds the mapping's physical directory.

use roost_vfs::{Namespace, Target};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Where the written lists live (removed by [`cleanup`]): a private directory (no other
/// user can plant a name in it).
fn dir() -> Option<&'static PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| crate::sys::private_dir("roost-mounts-").ok())
        .as_ref()
}

/// Removes the written lists (at the agent's exit).
pub fn cleanup() {
    if let Some(d) = dir() {
        let _ = std::fs::remove_dir_all(d);
    }
}

/// Which list a `/proc` path names, and whose: `(pid or None for the caller, mountinfo?)`.
fn parse(logical: &[u8]) -> Option<(Option<i32>, bool)> {
    if logical == b"/proc/mounts" {
        return Some((None, false));
    }
    let (pid, entry) = super::procfs::proc_entry(logical)?;
    match entry {
        "mountinfo" => Some((pid, true)),
        "mounts" => Some((pid, false)),
        _ => None,
    }
}

/// The kernel's escaping of a path in these lists (space, tab, newline, backslash); other
/// bytes stay as they are.
fn escape(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len());
    for &b in path {
        match b {
            b' ' | b'\t' | b'\n' | b'\\' => out.extend_from_slice(format!("\\{b:03o}").as_bytes()),
            _ => out.push(b),
        }
    }
    out
}

fn unescape(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .and_then(|o| std::str::from_utf8(o).ok());
        match (b[i], octal.and_then(|o| u8::from_str_radix(o, 8).ok())) {
            (b'\\', Some(v)) => {
                out.push(v);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// The physical file to open instead of `logical` for thread `tid`, when `logical` names a
/// mount list and the table has local mappings to add to it.
pub fn view(ns: &Namespace, tid: i32, logical: &[u8]) -> Option<Vec<u8>> {
    let (pid, mountinfo) = parse(logical)?;
    let roots: Vec<(&[u8], Vec<u8>)> = ns
        .table()
        .mounts()
        .iter()
        .filter_map(|m| match &m.target {
            Target::Driver { driver, .. } if driver.is_local() => {
                Some((m.logical.as_slice(), m.target.root_now()?.into_owned()))
            }
            _ => None,
        })
        .collect();
    let mappings: Vec<(&[u8], &[u8])> = roots.iter().map(|(l, r)| (*l, r.as_slice())).collect();
    if mappings.is_empty() {
        return None;
    }
    let whose = pid.unwrap_or(tid);
    let info = std::fs::read(format!("/proc/{whose}/mountinfo")).ok()?;
    let mounts = std::fs::read(format!("/proc/{whose}/mounts")).ok()?;
    let lines = |text: &[u8]| -> Vec<Vec<Vec<u8>>> {
        text.split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| l.split(|&b| b == b' ').map(<[u8]>::to_vec).collect())
            .collect()
    };
    let (info_lines, mount_lines) = (lines(&info), lines(&mounts));
    let mut out = if mountinfo {
        info.clone()
    } else {
        mounts.clone()
    };
    for (n, (mapped_at, physical)) in mappings.iter().enumerate() {
        // The mount holding the physical directory: the longest mount point over it.
        let holder = info_lines
            .iter()
            .enumerate()
            .filter_map(|(i, fields)| {
                let point = unescape(fields.get(4)?);
                roost_vfs::path::strip_prefix(physical, &point).map(|rest| (i, point.len(), rest))
            })
            .max_by_key(|&(_, len, _)| len);
        let Some((i, _, rest)) = holder else { continue };
        let mut fields = if mountinfo {
            info_lines[i].clone()
        } else {
            match mount_lines.get(i) {
                Some(f) if f.len() >= 2 => f.clone(),
                _ => continue,
            }
        };
        if mountinfo {
            let mut root = unescape(&fields[3]);
            if root == b"/" && !rest.is_empty() {
                root.clear();
            }
            root.extend_from_slice(rest);
            fields[1] = fields[0].clone();
            fields[0] = (1_000_000 + n).to_string().into_bytes();
            fields[3] = escape(&root);
            fields[4] = escape(mapped_at);
        } else {
            fields[1] = escape(mapped_at);
        }
        out.extend_from_slice(&fields.join(&b' '));
        out.push(b'\n');
    }
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = dir()?;
    let name = if mountinfo { "mountinfo" } else { "mounts" };
    let tmp = dir.join(format!("{name}.{}", NEXT.fetch_add(1, Ordering::Relaxed)));
    std::fs::write(&tmp, out).ok()?;
    // A name of its own per caller's list: replacing one another's would mix processes.
    let file = dir.join(format!("{name}-{whose}"));
    std::fs::rename(&tmp, &file).ok()?;
    Some(file.into_os_string().into_encoded_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_mount_lists() {
        assert_eq!(parse(b"/proc/self/mountinfo"), Some((None, true)));
        assert_eq!(parse(b"/proc/mounts"), Some((None, false)));
        assert_eq!(parse(b"/proc/42/task/43/mounts"), Some((Some(43), false)));
        assert_eq!(parse(b"/proc/self/maps"), None);
    }

    #[test]
    fn paths_escape_as_the_kernel_does() {
        assert_eq!(
            escape("/a b\\c/é".as_bytes()),
            "/a\\040b\\134c/é".as_bytes()
        );
        assert_eq!(unescape(b"/a\\040b\\134c"), b"/a b\\c");
    }
}
