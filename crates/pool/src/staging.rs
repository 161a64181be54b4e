//! Where a run's files live on a server, and the Chirp moves that put them there and bring
//! them back: the run's directories, each distinct input staged once (`RUN/in/N`), each
//! attempt's outputs, standard error and status under `RUN/out` and `RUN/status`, fetched
//! whole into place. Shared by the hosts' threads ([`crate::worker`]) and the Slurm driver
//! ([`crate::slurm`]).
//!
//! A run's directory holds a marker, [`MARKER`], whose modification time the run keeps fresh
//! while it lives ([`Staging::keep_alive`]): a server reaps a run directory whose marker has
//! not been touched for its `--reap-after` (the run was killed, or its host lost), so a run
//! that could not remove its directory does not leave it there for ever.

use crate::schedule::Assignment;
use crate::taskfile::{FileSpec, Task};
use roost_client::partial::PartialFile;
use roost_client::{Client, Error};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The file marking a directory as a run's, its modification time the run's lease.
pub const MARKER: &str = ".roost-pool-run";
/// How often a live run touches its marker.
const LEASE_REFRESH: Duration = Duration::from_secs(10);

/// Where a run's files live on the servers, and which local files are which inputs.
pub(crate) struct Staging {
    /// `REMOTE_DIR/RUN-ID`.
    pub run_dir: String,
    /// For each task, the number of each of its inputs among the run's distinct files.
    pub input_ids: Vec<Vec<usize>>,
}

impl Staging {
    pub fn new(remote_dir: &str, tasks: &[Task]) -> Staging {
        let run = format!(
            "{}-{}-{}",
            roost_catalog::unix_now(),
            std::process::id(),
            local_host_name()
        );
        let mut ids: HashMap<PathBuf, usize> = HashMap::new();
        let input_ids = tasks
            .iter()
            .map(|t| {
                t.inputs
                    .iter()
                    .map(|i| {
                        let key = std::fs::canonicalize(&i.local).unwrap_or(i.local.clone());
                        let next = ids.len();
                        *ids.entry(key).or_insert(next)
                    })
                    .collect()
            })
            .collect();
        Staging {
            run_dir: format!("{}/{run}", remote_dir.trim_end_matches('/')),
            input_ids,
        }
    }

    /// Where input file `id` is staged.
    pub fn input(&self, id: usize) -> String {
        format!("{}/in/{id}", self.run_dir)
    }

    /// Where an attempt's output `which` (its number, or `stderr`) is stored.
    pub fn output(&self, a: Assignment, which: &str) -> String {
        format!("{}/out/{}.{}.{which}", self.run_dir, a.task, a.attempt)
    }

    /// Where an attempt run outside the job RPCs (by Slurm) records how it ended.
    pub fn status(&self, a: Assignment) -> String {
        format!("{}/status/{}.{}", self.run_dir, a.task, a.attempt)
    }

    /// Makes the run's directories on a server (those that exist already are fine).
    pub fn make_dirs(&self, client: &mut Client) -> Result<(), String> {
        let base = self.run_dir.rsplit_once('/').map_or("", |(b, _)| b);
        let run = &self.run_dir;
        for dir in [
            base.to_string(),
            run.clone(),
            format!("{run}/in"),
            format!("{run}/out"),
            format!("{run}/status"),
        ] {
            if dir.is_empty() {
                continue;
            }
            match client.mkdir(&dir, 0o755) {
                Err(e) if !e.is(roost_client::ErrorCode::AlreadyExists) => {
                    return Err(phrase(client, &format!("mkdir {dir}"), &e))
                }
                _ => {}
            }
        }
        let marker = self.marker();
        let text = format!(
            "roost pool run {} on {}: its files; a server may remove this directory once this \
             file has not been touched for its --reap-after\n",
            std::process::id(),
            local_host_name()
        );
        client
            .putfile(&marker, 0o644, text.len() as u64, &mut text.as_bytes())
            .map_err(|e| phrase(client, &format!("putfile {marker}"), &e))?;
        Ok(())
    }

    /// The run directory's marker.
    fn marker(&self) -> String {
        format!("{}/{MARKER}", self.run_dir)
    }

    /// Touches the marker when it was last touched [`LEASE_REFRESH`] ago or more (`lease`:
    /// when), so the server sees the run alive. A failure is left for the next call to meet.
    pub fn keep_alive(&self, client: &mut Client, lease: &mut Instant) {
        if lease.elapsed() < LEASE_REFRESH {
            return;
        }
        let now = roost_catalog::unix_now();
        let _ = client.utime(self.marker(), now, now);
        *lease = Instant::now();
    }

    /// Stages one input, `spec`, as input file `id`.
    pub fn put_input(&self, client: &mut Client, spec: &FileSpec, id: usize) -> Result<(), Move> {
        let local = |e: std::io::Error| Move::Local(format!("input {}: {e}", spec.local.display()));
        let mut file = std::fs::File::open(&spec.local).map_err(local)?;
        let len = file.metadata().map_err(local)?.len();
        client
            .putfile(self.input(id), 0o644, len, &mut file)
            .map(|_| ())
            .map_err(|e| match e {
                Error::Local(e) => local(e),
                e => Move::Remote(e),
            })
    }

    /// Fetches an attempt's outputs to temporary names beside their places under
    /// `output_dir`, then renames them all into place, so that a task's outputs appear
    /// whole, once.
    pub fn fetch_outputs(
        &self,
        client: &mut Client,
        task: &Task,
        a: Assignment,
        output_dir: &Path,
    ) -> Result<(), Move> {
        // Each output is fetched to a temporary beside its place (removed on failure, and by
        // a stop signal: see roost_client::partial); all are renamed once all are whole.
        let mut fetched = Vec::new();
        for (k, out) in task.outputs.iter().enumerate() {
            let path = output_dir.join(&out.local);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| Move::Local(format!("output {}: {e}", dir.display())))?;
            }
            let mut file = PartialFile::create(&path)
                .map_err(|e| Move::Local(format!("output {}: {e}", path.display())))?;
            let mut sink = std::io::BufWriter::new(file.file());
            client
                .getfile(self.output(a, &k.to_string()), &mut sink)
                .map_err(|e| match e {
                    Error::Local(e) => Move::Local(format!("output {}: {e}", path.display())),
                    e => Move::Remote(e),
                })?;
            sink.flush()
                .map_err(|e| Move::Local(format!("output {}: {e}", path.display())))?;
            drop(sink);
            fetched.push(file);
        }
        for file in fetched {
            let path = file.target().to_path_buf();
            file.commit()
                .map_err(|e| Move::Local(format!("output {}: {e}", path.display())))?;
        }
        Ok(())
    }

    /// The last few hundred bytes of an attempt's standard error, on one line.
    pub fn stderr_tail(&self, client: &mut Client, a: Assignment) -> Option<String> {
        let mut bytes = Vec::new();
        client.getfile(self.output(a, "stderr"), &mut bytes).ok()?;
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim();
        let start = text.len().saturating_sub(300);
        let start = (start..=text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        (!text.is_empty()).then(|| text[start..].replace('\n', " | "))
    }
}

/// Why a file could not be moved: here (the local disk), or the server.
pub(crate) enum Move {
    Local(String),
    Remote(Error),
}

/// The server's words for a failed call, with its reason when it gives one.
pub(crate) fn phrase(client: &mut Client, what: &str, e: &Error) -> String {
    let mut text = format!("{what}: {e}");
    if !e.breaks_connection() {
        if let Ok(Some(why)) = client.explain() {
            text.push_str(&format!(" ({why})"));
        }
    }
    text
}

fn local_host_name() -> String {
    let mut buf = [0u8; 256];
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name: String = String::from_utf8_lossy(&buf[..end])
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() {
        "localhost".into()
    } else {
        name
    }
}
