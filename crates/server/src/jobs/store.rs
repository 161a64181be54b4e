//! The job directory on disk: one record file per job, the next job id, the sandboxes, and a
//! lock so that two servers never run the same jobs.
//!
//! ```text
//! DIR/lock              held (flock) while a server uses DIR
//! DIR/state/ID.json     each job's record, replaced whole: written to a temporary name,
//!                       flushed, renamed over the old one, and the directory flushed
//! DIR/state/next-id     the next id, so ids are never reused, even after every job is reaped
//! DIR/sandboxes/NAME/   a started job's sandbox, owned by the job's user, mode 0700; NAME
//!                       is 32 random hex digits, so a job cannot guess another's
//! ```

use super::record::Job;
use crate::log::{self, Level};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The job directory, locked for this server.
pub struct Store {
    state: PathBuf,
    sandboxes: PathBuf,
    _lock: File,
}

/// Makes `dir` with `mode` unless it exists, and gives it `mode` either way.
fn make_dir(dir: &Path, mode: u32) -> io::Result<()> {
    match fs::DirBuilder::new().mode(mode).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(mode))
}

/// Writes `bytes` to `path` so that a crash leaves either the old file or the new one whole.
fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp",
        path.file_name().unwrap_or_default().to_string_lossy()
    ));
    let mut file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    fs::rename(&tmp, path)?;
    File::open(dir)?.sync_all()
}

impl Store {
    /// Opens (making it if needed) the job directory `dir`, locks it, and reads every stored
    /// job and the next id. Unreadable records are logged and left alone.
    pub fn open(dir: &Path) -> io::Result<(Store, Vec<Job>, i64)> {
        fs::create_dir_all(dir)?;
        // Searchable by the jobs' user, who must reach its sandbox; nothing else is theirs.
        fs::set_permissions(dir, fs::Permissions::from_mode(0o711))?;
        let lock = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(dir.join("lock"))?;
        crate::lock::hold(&lock, "this job directory")?;
        let state = dir.join("state");
        let sandboxes = dir.join("sandboxes");
        make_dir(&state, 0o700)?;
        make_dir(&sandboxes, 0o711)?;
        let store = Store {
            state,
            sandboxes,
            _lock: lock,
        };
        let (jobs, next) = store.load()?;
        Ok((store, jobs, next))
    }

    fn load(&self) -> io::Result<(Vec<Job>, i64)> {
        let mut jobs = Vec::new();
        let mut next = fs::read_to_string(self.state.join("next-id"))
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .unwrap_or(1)
            .max(1);
        for entry in fs::read_dir(&self.state)? {
            let path = entry?.path();
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let Some(stem) = name.strip_suffix(".json") else {
                continue;
            };
            if stem.parse::<i64>().is_err() {
                continue;
            }
            let parsed = fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|bytes| roost_catalog::json::parse(&bytes).map_err(|e| e.to_string()))
                .and_then(|value| Job::from_value(&value));
            match parsed {
                Ok(job) => {
                    next = next.max(job.id + 1);
                    jobs.push(job);
                }
                Err(why) => log::event(
                    Level::Error,
                    "job-record-unreadable",
                    &[("file", &path.display()), ("error", &why)],
                ),
            }
        }
        jobs.sort_by_key(|j| j.id);
        Ok((jobs, next))
    }

    /// Stores `job`'s record.
    pub fn save(&self, job: &Job) -> io::Result<()> {
        let text = job.to_value(true).to_json();
        replace_file(
            &self.state.join(format!("{}.json", job.id)),
            text.as_bytes(),
        )
    }

    /// Forgets job `id`'s record.
    pub fn forget(&self, id: i64) -> io::Result<()> {
        match fs::remove_file(self.state.join(format!("{id}.json"))) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Records that ids below `next` are taken.
    pub fn save_next_id(&self, next: i64) -> io::Result<()> {
        replace_file(&self.state.join("next-id"), format!("{next}\n").as_bytes())
    }

    /// A place for a new sandbox: a random name nobody could guess (the directory holding
    /// the sandboxes lets everyone in, and lists itself to nobody but its owner).
    pub fn new_sandbox_path(&self) -> io::Result<PathBuf> {
        Ok(self.sandboxes.join(crate::random::hex::<16>()?))
    }

    /// The directory holding every sandbox.
    pub fn sandboxes(&self) -> &Path {
        &self.sandboxes
    }

    /// Removes every sandbox (at start, when no job runs, what is there is left over).
    pub fn clear_sandboxes(&self) {
        if let Ok(entries) = fs::read_dir(&self.sandboxes) {
            for entry in entries.flatten() {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::description::Description;

    #[test]
    fn records_survive_a_reopen_and_ids_are_never_reused() {
        let tmp = crate::jail::tempdir::TempDir::new();
        let dir = tmp.path().join("jobs");
        {
            let (store, jobs, next) = Store::open(&dir).unwrap();
            assert!(jobs.is_empty());
            assert_eq!(next, 1);
            let d = Description::parse(br#"{"executable":"e","arguments":[],"files":[]}"#).unwrap();
            store.save(&Job::new(1, "unix:a", d.clone())).unwrap();
            store.save(&Job::new(2, "unix:a", d)).unwrap();
            store.save_next_id(3).unwrap();
            store.forget(2).unwrap();
            // A second server cannot take the directory while this one holds it.
            let err = Store::open(&dir).err().expect("locked");
            assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
        }
        fs::write(dir.join("state/9.json"), b"{garbage").unwrap();
        {
            let (store, _, _) = Store::open(&dir).unwrap();
            let a = store.new_sandbox_path().unwrap();
            let b = store.new_sandbox_path().unwrap();
            assert_ne!(a, b);
            assert_eq!(a.parent(), Some(store.sandboxes()));
            assert_eq!(a.file_name().unwrap().len(), 32);
        }
        let (_store, jobs, next) = Store::open(&dir).unwrap();
        assert_eq!(jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [1]);
        assert_eq!(next, 3);
    }
}
