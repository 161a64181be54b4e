//! `roost run --uid/--gid/--user/--hostname`: the identity a program is shown, and the
//! copies of `/etc/passwd` and `/etc/group` that name it, mapped over the real ones so
//! name lookups (`whoami`, `id`, `getpwuid`) agree with the ids the agent reports.

use roost_agent::handlers::virtual_ids::VirtualIds;
use roost_vfs::{MountTable, Target};
use std::path::PathBuf;

/// One `/etc/passwd` entry's fields.
struct PasswdEntry {
    name: String,
    uid: u32,
    gid: u32,
    home: String,
    shell: String,
}

fn passwd_entries(text: &str) -> Vec<PasswdEntry> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            if f.len() < 7 {
                return None;
            }
            Some(PasswdEntry {
                name: f[0].to_string(),
                uid: f[2].parse().ok()?,
                gid: f[3].parse().ok()?,
                home: f[5].to_string(),
                shell: f[6].to_string(),
            })
        })
        .collect()
}

/// The generated files, in a private directory removed when dropped.
pub struct IdentityFiles {
    dir: PathBuf,
}

impl IdentityFiles {
    /// Maps `/etc/passwd` and `/etc/group` to the copies, unless the mount list maps them.
    pub fn map_into(&self, table: &mut MountTable) {
        for name in ["passwd", "group"] {
            let logical = format!("/etc/{name}");
            if !table
                .mounts()
                .iter()
                .any(|m| m.logical == logical.as_bytes())
            {
                let physical = self.dir.join(name).into_os_string().into_encoded_bytes();
                table.add(logical.as_bytes(), Target::local(physical));
            }
        }
    }

    /// Keeps the files on disk past this process (the front, whose agent still uses them).
    pub fn leave(self) {
        std::mem::forget(self);
    }
}

impl Drop for IdentityFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Checks a name for a passwd field or uname: not empty, no separator, newline or NUL.
fn check_name(what: &str, name: &str, max: usize) -> Result<(), String> {
    if name.is_empty() || name.len() > max || name.contains([':', '\n', '\0']) {
        return Err(format!(
            "{what} {name:?}: expected 1-{max} bytes with no ':', newline or NUL"
        ));
    }
    Ok(())
}

/// The virtual identity from the options, and the files naming it when ids are given.
pub fn virtual_identity(
    uid: Option<u32>,
    gid: Option<u32>,
    user: Option<&str>,
    hostname: Option<&str>,
) -> Result<(VirtualIds, Option<IdentityFiles>), String> {
    if let Some(h) = hostname {
        check_name("--hostname", h, 64)?;
    }
    if let Some(u) = user {
        check_name("--user", u, 32)?;
    }
    let ids_given = uid.is_some() || gid.is_some() || user.is_some();
    let mut ids = VirtualIds {
        hostname: hostname.map(str::to_string),
        ..VirtualIds::default()
    };
    if !ids_given {
        return Ok((ids, None));
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let group = std::fs::read_to_string("/etc/group").unwrap_or_default();
    let entries = passwd_entries(&passwd);
    // SAFETY: plain id queries.
    let (real_uid, real_gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let known = match user {
        Some(name) => entries.iter().find(|e| e.name == name),
        None => entries.iter().find(|e| Some(e.uid) == uid),
    };
    let vuid = uid.or(known.map(|e| e.uid)).unwrap_or(real_uid);
    let vgid = gid.or(known.map(|e| e.gid)).unwrap_or(real_gid);
    let name = user
        .map(str::to_string)
        .or(known.map(|e| e.name.clone()))
        .unwrap_or_else(|| format!("user{vuid}"));
    let home = known
        .map(|e| e.home.clone())
        .or_else(|| std::env::var("HOME").ok())
        .unwrap_or_else(|| "/".into());
    let shell = known
        .map(|e| e.shell.clone())
        .unwrap_or_else(|| "/bin/sh".into());
    ids.uid = Some(vuid);
    ids.gid = Some(vgid);

    // The host's entries, less any that would contradict the virtual one.
    let mut passwd_out: String = passwd
        .lines()
        .filter(|l| {
            let f: Vec<&str> = l.split(':').collect();
            f.len() < 3 || (f[0] != name && f[2] != vuid.to_string())
        })
        .map(|l| format!("{l}\n"))
        .collect();
    passwd_out.push_str(&format!("{name}:x:{vuid}:{vgid}:{name}:{home}:{shell}\n"));
    let mut group_out = group.clone();
    if !group_out.is_empty() && !group_out.ends_with('\n') {
        group_out.push('\n');
    }
    let has_gid = group
        .lines()
        .any(|l| l.split(':').nth(2) == Some(&vgid.to_string()));
    if !has_gid {
        group_out.push_str(&format!("{name}:x:{vgid}:\n"));
    }

    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "roost-ids.{}.{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let write = || -> std::io::Result<()> {
        std::fs::create_dir(&dir)?;
        std::fs::write(dir.join("passwd"), &passwd_out)?;
        std::fs::write(dir.join("group"), &group_out)?;
        Ok(())
    };
    let files = IdentityFiles { dir: dir.clone() };
    write().map_err(|e| format!("cannot write the identity files in {}: {e}", dir.display()))?;
    Ok((ids, Some(files)))
}
