//! Reaping what clients abandoned (`--reap-after`): a client that dies or is killed (a `roost
//! pool run` killed with SIGKILL, a host that lost its network) leaves jobs and files on the
//! server, and a server restarted meanwhile knows nothing of who would still come for them.
//! Every so often the server forgets
//!
//! - job records nobody asked about for `--reap-after` (see [`crate::jobs::Jobs::
//!   reap_abandoned`]): jobs that have ended, and jobs never committed; and
//! - run directories: a directory directly under one of the `--pool-dir` directories of the
//!   export that holds a run's marker file, [`RUN_MARKER`], untouched for `--reap-after` (a
//!   live `roost pool run` touches its marker every few seconds), and in which no job that
//!   has not ended has a file.
//!
//! Each is logged (`event=job-abandoned`, `event=run-abandoned`). Nothing else in the export
//! is ever touched: a directory without the marker, or whose marker is not a regular file, is
//! left alone, and nothing below a run directory is followed when it is removed.

use crate::export::Export;
use crate::jail::JailPath;
use crate::jobs::Jobs;
use crate::log::{self, Level};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The file that marks a directory as a pool run's (`roost pool run` writes it; its
/// modification time is the run's lease). The same name as `roost_pool`'s `MARKER`.
pub const RUN_MARKER: &str = ".roost-pool-run";
/// `roost pool run`'s default `--remote-dir`, the default `--pool-dir`.
pub const DEFAULT_POOL_DIR: &str = "/roost-pool";
/// Abandoned after this long by default: a day.
pub const DEFAULT_AFTER: Duration = Duration::from_secs(24 * 3600);

/// What to reap, and when.
#[derive(Clone, Debug)]
pub struct Config {
    /// Things untouched this long are abandoned.
    pub after: Duration,
    /// Directories of the export holding run directories.
    pub pool_dirs: Vec<JailPath>,
}

impl Config {
    /// How often to look: a quarter of `after`, between a second and ten minutes.
    pub fn period(&self) -> Duration {
        (self.after / 4).clamp(Duration::from_secs(1), Duration::from_secs(600))
    }
}

/// Looks now, then every [`Config::period`], on a thread of its own.
pub fn spawn(
    config: Config,
    export: Arc<Export>,
    jobs: Option<Jobs>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("reaper".into())
        .spawn(move || loop {
            sweep(&config, &export, jobs.as_ref());
            std::thread::sleep(config.period());
        })
}

/// One look: abandoned jobs first (their files then count as free), then run directories.
pub fn sweep(config: &Config, export: &Export, jobs: Option<&Jobs>) {
    let in_use = match jobs {
        Some(jobs) => {
            jobs.reap_abandoned(config.after);
            jobs.paths_in_use()
        }
        None => Vec::new(),
    };
    for dir in &config.pool_dirs {
        for run in abandoned_runs(export, dir, config.after, &in_use) {
            match export.own_rmall(&run) {
                Ok(()) => log::event(
                    Level::Info,
                    "run-abandoned",
                    &[
                        ("path", &run.display()),
                        ("idle_s", &config.after.as_secs()),
                        ("action", &"removed"),
                    ],
                ),
                Err(e) => log::event(
                    Level::Error,
                    "run-abandoned",
                    &[
                        ("path", &run.display()),
                        ("error", &std::io::Error::from_raw_os_error(e.errno)),
                    ],
                ),
            }
        }
    }
}

/// The run directories under `dir` whose marker was last touched `after` ago or more, and
/// under which no path of `in_use` lies.
fn abandoned_runs(
    export: &Export,
    dir: &JailPath,
    after: Duration,
    in_use: &[JailPath],
) -> Vec<JailPath> {
    let Ok(names) = export.own_list(dir) else {
        return Vec::new();
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let after = i64::try_from(after.as_secs()).unwrap_or(i64::MAX);
    names
        .into_iter()
        .map(|name| dir.join(&name))
        .filter(|run| {
            export
                .object(run, false)
                .is_ok_and(|o| o.stat.st_mode & libc::S_IFMT == libc::S_IFDIR)
        })
        .filter(|run| {
            export
                .object(&run.join(RUN_MARKER.as_bytes()), false)
                .is_ok_and(|marker| {
                    marker.stat.st_mode & libc::S_IFMT == libc::S_IFREG
                        && now.saturating_sub(marker.stat.st_mtime) >= after
                })
        })
        .filter(|run| !in_use.iter().any(|p| p.starts_with(run)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::Acl;

    fn touch(path: &std::path::Path, age: i64) {
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
            - age;
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        let times = [
            libc::timespec {
                tv_sec: t as libc::time_t,
                tv_nsec: 0,
            },
            libc::timespec {
                tv_sec: t as libc::time_t,
                tv_nsec: 0,
            },
        ];
        assert_eq!(
            // SAFETY: a NUL-terminated path and an array of two timespecs, as utimensat reads.
            unsafe {
                libc::utimensat(
                    libc::AT_FDCWD,
                    c.as_ptr(),
                    times.as_ptr(),
                    libc::AT_SYMLINK_NOFOLLOW,
                )
            },
            0
        );
    }

    #[test]
    fn only_marked_runs_idle_long_enough_and_without_live_jobs_are_removed() {
        let tmp = crate::jail::tempdir::TempDir::new();
        let root = tmp.path().join("export");
        let pool = root.join("roost-pool");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&pool).unwrap();
        std::fs::create_dir_all(outside.join("victim")).unwrap();
        std::fs::write(outside.join("victim").join(RUN_MARKER), "x").unwrap();
        touch(&outside.join("victim").join(RUN_MARKER), 100);
        let run = |name: &str, age: Option<i64>| {
            let dir = pool.join(name);
            std::fs::create_dir_all(dir.join("out")).unwrap();
            std::fs::write(dir.join("out/0.0.0"), "output").unwrap();
            if let Some(age) = age {
                std::fs::write(dir.join(RUN_MARKER), "run").unwrap();
                touch(&dir.join(RUN_MARKER), age);
            }
        };
        run("old", Some(100));
        run("fresh", Some(1));
        run("unmarked", None);
        run("busy", Some(100));
        std::fs::create_dir_all(pool.join("fake")).unwrap();
        std::fs::create_dir(pool.join("fake").join(RUN_MARKER)).unwrap();
        touch(&pool.join("fake").join(RUN_MARKER), 100);
        // A link to a marked directory outside the export is not a run directory here.
        std::os::unix::fs::symlink(outside.join("victim"), pool.join("link")).unwrap();
        std::fs::write(pool.join("plain-file"), "x").unwrap();
        let export = Export::new(&root, Acl::default()).unwrap();
        let busy = JailPath::new(b"/roost-pool/busy/in/0").unwrap();
        let config = Config {
            after: Duration::from_secs(50),
            pool_dirs: vec![JailPath::new(DEFAULT_POOL_DIR.as_bytes()).unwrap()],
        };
        let found = abandoned_runs(&export, &config.pool_dirs[0], config.after, &[busy]);
        assert_eq!(found, [JailPath::new(b"/roost-pool/old").unwrap()]);
        sweep(&config, &export, None);
        let mut left: Vec<String> = std::fs::read_dir(&pool)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            ["fake", "fresh", "link", "plain-file", "unmarked"],
            "without live jobs, busy goes too"
        );
        assert!(outside.join("victim").join(RUN_MARKER).exists());
        assert_eq!(config.period(), Duration::from_millis(12_500));
        // A pool directory that is missing is no error.
        let missing = Config {
            pool_dirs: vec![JailPath::new(b"/nowhere").unwrap()],
            ..config
        };
        sweep(&missing, &export, None);
    }
}
