//! Changing the limits while the server runs: `roost thermostat set 30% [--mem 1G]` writes
//! the override to `JOBDIR/thermostat.set` (a line such as `cpu 30% mem 1G`, by
//! write-then-rename), which the server rereads every second; `roost thermostat clear`
//! removes it, giving the schedule back. The server writes what holds now, and why, to
//! `JOBDIR/thermostat.now`, which `roost thermostat show` prints.
//!
//! A file rather than a socket: the job directory is already the server's own (mode 0700 as
//! root, locked against a second server), so whoever may write there is the owner; it needs
//! no listener, survives a restart of the server (the override stays until cleared) and is
//! read with one `stat` a second. The server ignores an override file that is not owned by
//! its own user (or root), or that others may write.

use super::schedule::{Limits, Schedule, Setting};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The override file, in the job directory.
pub const SET_FILE: &str = "thermostat.set";
/// What holds now, written by the server.
pub const NOW_FILE: &str = "thermostat.now";

/// The thermostat's files in one job directory.
pub struct Control {
    set: PathBuf,
    now: PathBuf,
}

impl Control {
    pub fn new(job_dir: &Path) -> Control {
        Control {
            set: job_dir.join(SET_FILE),
            now: job_dir.join(NOW_FILE),
        }
    }

    /// The limits that hold now, and where they come from (`schedule`, `override`, or the
    /// schedule with why the override was ignored).
    pub fn current(&self, schedule: &Schedule) -> (Limits, String) {
        let scheduled = schedule.now();
        match read_override(&self.set) {
            Ok(None) => (scheduled, "schedule".into()),
            Ok(Some(setting)) => (setting.over(scheduled), "override".into()),
            Err(e) => (
                scheduled,
                format!("schedule (override {} ignored: {e})", self.set.display()),
            ),
        }
    }

    /// Writes what holds now to the report file (errors are only logged: the limits hold
    /// anyway).
    /// `memory`: who holds the memory limit (`kernel`, `watchdog`, with why), if there is
    /// one.
    pub fn report(&self, mechanism: &str, limits: Limits, source: &str, memory: Option<&str>) {
        let mut text = format!("mechanism {mechanism}\nlimits {limits}\nsource {source}\n");
        if let Some(holder) = memory {
            text.push_str(&format!("memory held by the {holder}\n"));
        }
        if let Err(e) = write_replace(&self.now, &text) {
            crate::log::event(
                crate::log::Level::Error,
                "thermostat-report",
                &[("path", &self.now.display()), ("error", &e)],
            );
        }
    }
}

fn read_override(path: &Path) -> Result<Option<Setting>, String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    // SAFETY: a plain query of this process's user.
    let euid = unsafe { libc::geteuid() };
    if !meta.is_file() || (meta.uid() != euid && meta.uid() != 0) || meta.mode() & 0o022 != 0 {
        return Err("not a regular file of the server's user, writable by it alone".into());
    }
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let words: Vec<&str> = text.split_whitespace().collect();
    Setting::parse(&words).map(Some)
}

/// What the server wrote to `JOBDIR/thermostat.now`: the mechanism and the limits that hold
/// (`None` if there is no such file, or it cannot be read).
pub fn read_now(job_dir: &Path) -> Option<(String, Limits)> {
    let text = std::fs::read_to_string(job_dir.join(NOW_FILE)).ok()?;
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
    };
    let words: Vec<&str> = value("limits")?.split_whitespace().collect();
    let limits = Setting::parse(&words).ok()?.over(Limits::UNLIMITED);
    Some((value("mechanism")?.to_string(), limits))
}

/// Who holds the memory limit, as the server last reported it: `kernel` or `watchdog`.
pub fn read_memory_holder(job_dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(job_dir.join(NOW_FILE)).ok()?;
    let holder = text
        .lines()
        .find_map(|l| l.strip_prefix("memory held by the "))?;
    Some(holder.split_whitespace().next()?.to_string())
}

/// Writes `text` to `path` by write-then-rename, mode 0600.
pub fn write_replace(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    drop(f);
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn an_override_holds_until_removed_and_only_if_the_owner_alone_may_write_it() {
        let dir = std::env::temp_dir().join(format!("roost-control-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let control = Control::new(&dir);
        let schedule = Schedule::parse("default cpu 80% mem 2G").unwrap();
        assert_eq!(control.current(&schedule).1, "schedule");
        write_replace(&dir.join(SET_FILE), "cpu 30%\n").unwrap();
        let (limits, source) = control.current(&schedule);
        assert_eq!((limits.cpu_percent, limits.mem_bytes), (30, Some(2 << 30)));
        assert_eq!(source, "override");
        let set = dir.join(SET_FILE);
        std::fs::set_permissions(&set, std::fs::Permissions::from_mode(0o666)).unwrap();
        let (limits, source) = control.current(&schedule);
        assert_eq!(limits.cpu_percent, 80);
        assert!(source.contains("ignored"), "{source}");
        write_replace(&set, "cpu 300%\n").unwrap();
        assert!(control.current(&schedule).1.contains("cpu \"300%\""));
        std::fs::remove_file(&set).unwrap();
        control.report("loop", limits, "schedule", Some("watchdog"));
        let now = std::fs::read_to_string(dir.join(NOW_FILE)).unwrap();
        assert_eq!(
            now,
            "mechanism loop\nlimits cpu 80% mem 2G\nsource schedule\nmemory held by the watchdog\n"
        );
        let (mechanism, read) = read_now(&dir).unwrap();
        assert_eq!((mechanism.as_str(), read), ("loop", limits));
        assert_eq!(read_memory_holder(&dir).as_deref(), Some("watchdog"));
        let refused = "watchdog (the kernel refused it: memory.limit_in_bytes: Device or resource busy; asked again every second)";
        control.report("cgroup1", limits, "override", Some(refused));
        assert_eq!(read_memory_holder(&dir).as_deref(), Some("watchdog"));
        control.report("cgroup1", limits, "override", None);
        assert_eq!(read_memory_holder(&dir), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
