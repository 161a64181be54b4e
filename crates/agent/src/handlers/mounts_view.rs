//! `/proc/*/mountinfo` and `/proc/*/mounts` (`/proc/mounts` and `/etc/mtab` lead there) list
//! the mappings as mounts, so `df`, `findmnt` and `mount` name a mapped directory's logical
//! mount point, as for a real bind mount. An open of one is rewritten to a file roost
//! writes: the kernel's list for the calling process, and after it a line per local mapping,
//! made from the line of the mount that holds the mapping's physical directory.

use roost_vfs::{Namespace, Target};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Where the written lists live (removed by [`cleanup`]).
fn dir() -> Option<&'static PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("roost-{}-mounts", std::process::id()));
        std::fs::create_dir_all(&d).ok()?;
        Some(d)
    })
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
    let s = std::str::from_utf8(logical).ok()?;
    if s == "/proc/mounts" {
        return Some((None, false));
    }
    let rest = s.strip_prefix("/proc/")?;
    let (who, mut rest) = rest.split_once('/')?;
    let mut pid = match who {
        "self" | "thread-self" => None,
        n => Some(n.parse::<i32>().ok()?),
    };
    if let Some(r) = rest.strip_prefix("task/") {
        let (tid, r) = r.split_once('/')?;
        pid = Some(tid.parse().ok()?);
        rest = r;
    }
    match rest {
        "mountinfo" => Some((pid, true)),
        "mounts" => Some((pid, false)),
        _ => None,
    }
}

/// The kernel's escaping of a path in these lists (space, tab, newline, backslash).
fn escape(path: &[u8]) -> String {
    let mut out = String::new();
    for &b in path {
        match b {
            b' ' | b'\t' | b'\n' | b'\\' => out.push_str(&format!("\\{b:03o}")),
            _ => out.push(b as char),
        }
    }
    out
}

fn unescape(field: &str) -> Vec<u8> {
    let b = field.as_bytes();
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
    let mappings: Vec<(&[u8], &[u8])> = ns
        .table()
        .mounts()
        .iter()
        .filter_map(|m| match &m.target {
            Target::Driver { driver, root } if driver.is_local() => {
                Some((m.logical.as_slice(), root.as_slice()))
            }
            _ => None,
        })
        .collect();
    if mappings.is_empty() {
        return None;
    }
    let whose = pid.unwrap_or(tid);
    let info = std::fs::read_to_string(format!("/proc/{whose}/mountinfo")).ok()?;
    let mounts = std::fs::read_to_string(format!("/proc/{whose}/mounts")).ok()?;
    let info_lines: Vec<&str> = info.lines().collect();
    let mount_lines: Vec<&str> = mounts.lines().collect();
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
            .filter_map(|(i, line)| {
                let point = unescape(line.split(' ').nth(4)?);
                roost_vfs::path::strip_prefix(physical, &point).map(|rest| (i, point.len(), rest))
            })
            .max_by_key(|&(_, len, _)| len);
        let Some((i, _, rest)) = holder else { continue };
        let fields: Vec<&str> = info_lines[i].split(' ').collect();
        let line = if mountinfo {
            let mut root = unescape(fields[3]);
            if root == b"/" && !rest.is_empty() {
                root.clear();
            }
            root.extend_from_slice(rest);
            let mut f: Vec<String> = fields.iter().map(|s| s.to_string()).collect();
            f[0] = (1_000_000 + n).to_string();
            f[1] = fields[0].to_string();
            f[3] = escape(&root);
            f[4] = escape(mapped_at);
            f.join(" ")
        } else {
            let Some(kernel) = mount_lines.get(i) else {
                continue;
            };
            let mut f: Vec<&str> = kernel.split(' ').collect();
            let point = escape(mapped_at);
            if f.len() < 2 {
                continue;
            }
            f[1] = &point;
            f.join(" ")
        };
        out.push_str(&line);
        out.push('\n');
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
        assert_eq!(escape(b"/a b\\c"), "/a\\040b\\134c");
        assert_eq!(unescape("/a\\040b\\134c"), b"/a b\\c");
    }
}
