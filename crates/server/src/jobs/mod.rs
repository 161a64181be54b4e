//! Jobs through the Chirp job RPCs, as cctools defines them (`roost serve --jobs`): a client
//! describes a job in JSON (`job_create`), starts it (`job_commit`), follows it
//! (`job_status`, `job_wait`), stops it (`job_kill`) and forgets it once it has ended
//! (`job_reap`). A job runs a program in a fresh sandbox directory on the server's host, as an
//! unprivileged user, with its inputs copied in from the export and its outputs stored back.
//!
//! - [`description`]: the JSON description, parsed and checked.
//! - [`record`]: a job's record and its life (CREATED, COMMITTED, STARTED, FINISHED, KILLED,
//!   ERRORED), as `job_status` reports it.
//! - [`store`]: records on disk, crash-safe, so a restarted server still knows every job.
//! - [`sandbox`]: binding inputs and outputs.
//! - [`identity`]: the user a job runs as (one of `--job-uids` each, where given).
//! - [`isolation`]: which namespaces this host lets jobs have, found out at start.
//! - [`keeper`]: a job's first process, which makes its namespaces and confines its program.
//! - [`view`], [`landlock`]: the files a job may see; [`seccomp`]: the sockets it may make.
//! - [`tree`]: a running job's processes, signalled and measured; [`watch`]: a running job
//!   watched to its end.
//! - [`confine`]: the thermostat's hook (the thermostat itself is [`crate::thermostat`]).
//! - [`runner`]: one thread per running job: start, watch, kill, finish.
//! - [`usage`]: a running job's CPU time so far, checkpointed into its record, and accounted
//!   once by a server restarted after a crash.
//!
//! Who may do what: creating or committing a job needs the `x` right on the export's root
//! (the right to run programs on this host), the `r` right on each input's directory and `w`
//! on each output's, checked again when the files are bound; only the subject that created a
//! job may see, wait for, commit, kill or reap it. A subject keeps at most
//! `--jobs-per-subject` jobs not yet reaped, holding at most `--job-bytes-per-subject`.

pub mod confine;
pub mod description;
pub mod fuzz_check;
pub mod identity;
pub mod isolation;
pub mod keeper;
pub mod landlock;
pub mod record;
mod runner;
pub mod sandbox;
pub mod seccomp;
pub mod store;
pub mod tree;
pub mod usage;
pub mod view;
mod watch;

use crate::export::{Export, OpError};
use crate::jail::JailPath;
use crate::log::{self, Level};
use confine::ResourceLimits;
use description::{Description, FileKind};
use identity::{JobUsers, UidRange};
use isolation::Isolation;
use record::{Job, Status};
use roost_catalog::json::Value;
use roost_wire::{ErrorCode, Rights};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The longest a `job_wait` waits, whatever the client asks (cctools' limit).
pub const MAX_WAIT: Duration = Duration::from_secs(30);
/// Most records one `job_wait` returns (cctools' limit).
const MAX_WAIT_RECORDS: usize = 1024;

/// A refused job request: the Chirp error code and what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobError {
    pub code: ErrorCode,
    pub message: String,
}

impl JobError {
    pub fn new(code: ErrorCode, message: String) -> JobError {
        JobError { code, message }
    }

    /// An I/O failure, with `context`.
    pub fn io(e: &io::Error, context: String) -> JobError {
        JobError::new(
            ErrorCode::from_errno(roost_base::errno_of(e)),
            format!("{context}: {e}"),
        )
    }

    fn from_op(e: &OpError, context: String) -> JobError {
        let why = e
            .explain()
            .unwrap_or_else(|| io::Error::from_raw_os_error(e.errno).to_string());
        JobError::new(ErrorCode::from_errno(e.errno), format!("{context}: {why}"))
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// How `roost serve --jobs` runs jobs.
#[derive(Clone, Debug)]
pub struct JobConfig {
    /// The job directory: records and sandboxes (see [`store`]).
    pub dir: PathBuf,
    /// Most jobs running at once.
    pub concurrency: usize,
    /// A job running longer is killed and reported ERRORED.
    pub time_limit: Duration,
    /// The user jobs run as when the server is root (default `nobody`).
    pub user: Option<String>,
    /// The uids jobs of a root server run as, one for each running job (`--job-uids`).
    pub uids: Option<UidRange>,
    /// `host:port` of this server, given to jobs as `CHIRP_HOST`.
    pub chirp_host: String,
    /// The owner's limits on jobs (`--thermostat`); `None`: none.
    pub thermostat: Option<crate::thermostat::Config>,
    /// Jobs may reach the network, as this host (`--job-network`).
    pub network: bool,
    /// The namespaces jobs must have (`--job-namespaces`); `None`: the best this host allows.
    pub namespaces: Option<keeper::Namespaces>,
    /// Most processes (and threads) of one job (`--job-process-limit`).
    pub process_limit: Option<u64>,
    /// Most memory of one job, bytes (`--job-memory-limit`).
    pub memory_limit: Option<u64>,
    /// Most jobs not yet reaped one subject keeps (`--jobs-per-subject`).
    pub jobs_per_subject: usize,
    /// Most bytes of descriptions one subject's jobs not yet reaped hold
    /// (`--job-bytes-per-subject`).
    pub bytes_per_subject: u64,
    /// What jobs may see besides their sandbox.
    pub view: view::View,
    /// The program run as each job's keeper: `roost` itself ([`keeper::run_if_called`]).
    pub keeper: PathBuf,
    /// How often a running job's CPU time so far is written into its record, for a server
    /// restarted after a crash to account it ([`usage`]).
    pub cpu_checkpoint: Duration,
}

/// Default `--jobs-per-subject`.
pub const DEFAULT_JOBS_PER_SUBJECT: usize = 64;

/// The jobs of one server (a handle: clones share them).
#[derive(Clone)]
pub struct Jobs {
    inner: Arc<Inner>,
}

struct Inner {
    export: Arc<Export>,
    config: JobConfig,
    users: JobUsers,
    /// What this host lets jobs have.
    isolation: Isolation,
    store: store::Store,
    table: Mutex<Table>,
    /// Signalled whenever a job ends (for `job_wait`).
    ended: Condvar,
    limits: Box<dyn ResourceLimits>,
    /// Where each job's CPU time is recorded when it ends.
    accounting: Option<Arc<crate::accounting::Accounting>>,
}

struct Table {
    jobs: BTreeMap<i64, Job>,
    next_id: i64,
    /// Runner threads alive (a killed job's runner may outlive its record briefly).
    running: usize,
    /// When each job's subject last asked about it (or the server started): a job that has
    /// ended, or was never committed, and is not asked about for `--reap-after` is reaped.
    touched: HashMap<i64, Instant>,
}

impl Jobs {
    /// Opens the job directory and takes up where a previous server left off: jobs it was
    /// running are reported ERRORED (their leftover processes killed), committed ones will
    /// run. Fails when the directory cannot be used or the job user is unusable.
    pub fn open(
        export: Arc<Export>,
        config: JobConfig,
        accounting: Option<Arc<crate::accounting::Accounting>>,
    ) -> Result<Jobs, String> {
        let users = JobUsers::resolve(config.user.as_deref(), config.uids, config.concurrency)?;
        let dir = &config.dir;
        let (store, jobs, next_id) =
            store::Store::open(dir).map_err(|e| format!("job directory {}: {e}", dir.display()))?;
        users.check_reachable(store.sandboxes())?;
        let isolation = Isolation::probe(
            &config.keeper,
            users.base(),
            config.network,
            config.namespaces,
        )?;
        log_isolation(&config, &users, &isolation);
        let mut table = Table {
            jobs: BTreeMap::new(),
            next_id,
            running: 0,
            touched: HashMap::new(),
        };
        let crashed: Vec<&Job> = jobs
            .iter()
            .filter(|j| j.status == Status::Started)
            .collect();
        if let (Some(accounting), false) = (&accounting, crashed.is_empty()) {
            usage::account_crashed(accounting, &crashed);
        }
        for mut job in jobs {
            if job.status == Status::Started {
                if let Some(p) = job.process {
                    confine::kill_leftovers(p.pgid, p.uid, p.start_ticks);
                }
                job.end(
                    Status::Errored,
                    Some("the server stopped while the job ran".into()),
                );
                if let Err(e) = store.save(&job) {
                    log::event(Level::Error, "job-save", &[("id", &job.id), ("error", &e)]);
                }
            }
            table.touched.insert(job.id, Instant::now());
            table.jobs.insert(job.id, job);
        }
        store.clear_sandboxes();
        let limits: Box<dyn ResourceLimits> = match &config.thermostat {
            Some(t) => Box::new(crate::thermostat::Thermostat::start(
                t.clone(),
                dir.clone(),
            )?),
            None => Box::new(confine::Unlimited),
        };
        let inner = Arc::new(Inner {
            export,
            config,
            users,
            isolation,
            store,
            table: Mutex::new(table),
            ended: Condvar::new(),
            limits,
            accounting,
        });
        {
            let mut table = inner.lock();
            dispatch(&inner, &mut table);
        }
        Ok(Jobs { inner })
    }

    /// What the owner offers guest jobs from now on: the thermostat's limits, for the ledger.
    /// The uid jobs run as without `--job-uids` (the uids of that range belong to no
    /// account, so no login can name them).
    pub fn guest_uid(&self) -> u32 {
        self.inner.users.base().uid
    }

    /// How many jobs are in each state (every state named, zeros included).
    pub fn counts(&self) -> Vec<(&'static str, usize)> {
        let table = self.inner.lock();
        Status::ALL
            .iter()
            .map(|&s| {
                (
                    s.name(),
                    table.jobs.values().filter(|j| j.status == s).count(),
                )
            })
            .collect()
    }

    /// The limits guest jobs are held to now (the thermostat's, or none).
    pub fn limits_now(&self) -> crate::thermostat::schedule::Limits {
        self.inner.limits.current()
    }

    pub fn offer_source(&self) -> crate::accounting::OfferSource {
        let inner = self.inner.clone();
        Box::new(move || inner.limits.current())
    }

    /// `job_create`: checks the description and the subject's rights; the new job's id.
    pub fn create(&self, subject: &str, payload: &[u8]) -> Result<i64, JobError> {
        let description = Description::parse(payload)?;
        let export = &self.inner.export;
        may_run(export, subject)?;
        for f in &description.files {
            let path = description::serv_path(&f.serv_path, "serv_path")?;
            let checked = match f.kind {
                FileKind::Input => export.may_read(subject, &path),
                FileKind::Output => export.may_write(subject, &path),
            };
            checked
                .map_err(|e| JobError::from_op(&e, format!("{} {}", f.kind.name(), f.serv_path)))?;
        }
        let mut table = self.inner.lock();
        self.inner.check_room(&table, subject, &description)?;
        let id = table.next_id;
        let job = Job::new(id, subject, description);
        self.inner
            .store
            .save(&job)
            .and_then(|()| self.inner.store.save_next_id(id + 1))
            .map_err(|e| JobError::io(&e, "cannot record the job".into()))?;
        table.next_id = id + 1;
        table.jobs.insert(id, job);
        table.touch(&[id]);
        log::event(
            Level::Info,
            "job-created",
            &[("id", &id), ("subject", &subject)],
        );
        Ok(id)
    }

    /// `job_commit`: starts the listed jobs (those still CREATED; others are left as they are).
    pub fn commit(&self, subject: &str, payload: &[u8]) -> Result<(), JobError> {
        let ids = description::parse_ids(payload)?;
        may_run(&self.inner.export, subject)?;
        let mut table = self.inner.lock();
        table.check_owner(subject, &ids)?;
        table.touch(&ids);
        for id in &ids {
            let job = table.jobs.get_mut(id).expect("checked");
            if job.status == Status::Created {
                job.status = Status::Committed;
                job.times.commit = Some(record::now());
                self.inner.save(job);
            }
        }
        dispatch(&self.inner, &mut table);
        Ok(())
    }

    /// `job_kill`: kills the listed jobs; one that has already ended is refused (as cctools).
    pub fn kill(&self, subject: &str, payload: &[u8]) -> Result<(), JobError> {
        let ids = description::parse_ids(payload)?;
        let mut table = self.inner.lock();
        table.check_owner(subject, &ids)?;
        table.touch(&ids);
        if let Some(job) = ids
            .iter()
            .map(|id| &table.jobs[id])
            .find(|j| j.status.is_terminal())
        {
            return Err(JobError::new(
                ErrorCode::NotAuthorized,
                format!("job {} has already ended ({})", job.id, job.status.name()),
            ));
        }
        for id in &ids {
            let job = table.jobs.get_mut(id).expect("checked");
            job.end(Status::Killed, None);
            self.inner.save(job);
            log::event(Level::Info, "job-killed", &[("id", id)]);
        }
        self.inner.ended.notify_all();
        Ok(())
    }

    /// `job_reap`: forgets the listed jobs that have ended (others are left as they are).
    pub fn reap(&self, subject: &str, payload: &[u8]) -> Result<(), JobError> {
        let ids = description::parse_ids(payload)?;
        let mut table = self.inner.lock();
        table.check_owner(subject, &ids)?;
        for id in &ids {
            if table.jobs[id].status.is_terminal() {
                if let Err(e) = self.inner.store.forget(*id) {
                    return Err(JobError::io(&e, format!("cannot forget job {id}")));
                }
                table.jobs.remove(id);
                table.touched.remove(id);
            }
        }
        Ok(())
    }

    /// `job_status`: the listed jobs' records, a JSON array.
    pub fn status(&self, subject: &str, payload: &[u8]) -> Result<Vec<u8>, JobError> {
        let ids = description::parse_ids(payload)?;
        let mut table = self.inner.lock();
        table.check_owner(subject, &ids)?;
        table.touch(&ids);
        Ok(records(ids.iter().map(|id| &table.jobs[id])))
    }

    /// `job_wait`: waits up to `timeout` seconds (negative: [`MAX_WAIT`]; never longer) until
    /// a matching job of the subject's has ended: job `id`, any (`id` 0), or any numbered at
    /// least `-id` (negative `id`). The ended, unreaped matching jobs' records (`[]` if none
    /// ended in time).
    pub fn wait(&self, subject: &str, id: i64, timeout: i64) -> Result<Vec<u8>, JobError> {
        let limit = match u64::try_from(timeout) {
            Ok(t) => Duration::from_secs(t).min(MAX_WAIT),
            Err(_) => MAX_WAIT,
        };
        let deadline = Instant::now() + limit;
        let matches =
            |j: &Job| j.subject == subject && (id == 0 || j.id == id || (id < 0 && j.id >= -id));
        let mut table = self.inner.lock();
        if id > 0 {
            table.check_owner(subject, &[id])?;
        }
        // The subject waits for these: it has not abandoned them.
        let waited: Vec<i64> = table
            .jobs
            .values()
            .filter(|j| matches(j))
            .map(|j| j.id)
            .collect();
        table.touch(&waited);
        loop {
            if !table.jobs.values().any(matches) {
                return Err(JobError::new(
                    ErrorCode::NoSuchJob,
                    "no job of yours to wait for".into(),
                ));
            }
            let ended: Vec<&Job> = table
                .jobs
                .values()
                .filter(|j| matches(j) && j.status.is_terminal())
                .take(MAX_WAIT_RECORDS)
                .collect();
            let now = Instant::now();
            if !ended.is_empty() || now >= deadline {
                return Ok(records(ended.into_iter()));
            }
            table = self
                .inner
                .ended
                .wait_timeout(table, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Jobs {
    /// Forgets the jobs nobody asked about for `idle` (since the server started, if not
    /// since): those that have ended, and those never committed. Running and committed jobs
    /// are left to run (the time limit ends a job that runs too long). Each is logged; their
    /// ids.
    pub fn reap_abandoned(&self, idle: Duration) -> Vec<i64> {
        let mut table = self.inner.lock();
        let stale: Vec<i64> = table
            .jobs
            .values()
            .filter(|j| j.status.is_terminal() || j.status == Status::Created)
            .filter(|j| {
                table
                    .touched
                    .get(&j.id)
                    .map_or(true, |t| t.elapsed() >= idle)
            })
            .map(|j| j.id)
            .collect();
        let mut reaped = Vec::new();
        for id in stale {
            if let Err(e) = self.inner.store.forget(id) {
                log::event(Level::Error, "job-forget", &[("id", &id), ("error", &e)]);
                continue;
            }
            let job = table.jobs.remove(&id).expect("listed");
            table.touched.remove(&id);
            log::event(
                Level::Info,
                "job-abandoned",
                &[
                    ("id", &id),
                    ("subject", &job.subject),
                    ("status", &job.status.name()),
                    ("idle_s", &idle.as_secs()),
                    ("action", &"reaped"),
                ],
            );
            reaped.push(id);
        }
        reaped
    }

    /// The server paths of the files of every job that has not ended (created, committed or
    /// running): what must not be reaped from under them.
    pub fn paths_in_use(&self) -> Vec<JailPath> {
        let table = self.inner.lock();
        table
            .jobs
            .values()
            .filter(|j| !j.status.is_terminal())
            .flat_map(|j| j.description.files.iter())
            .filter_map(|f| description::serv_path(&f.serv_path, "serv_path").ok())
            .collect()
    }
}

/// The `x` right on the export's root: the right to run programs on this host.
fn may_run(export: &Export, subject: &str) -> Result<(), JobError> {
    export
        .require(subject, &JailPath::root(), Rights::EXECUTE)
        .map_err(|e| JobError::from_op(&e, "running jobs".into()))
}

fn records<'a>(jobs: impl Iterator<Item = &'a Job>) -> Vec<u8> {
    Value::Array(jobs.map(|j| j.to_value(false)).collect())
        .to_json()
        .into_bytes()
}

impl Table {
    /// Notes that the jobs `ids` were asked about now.
    fn touch(&mut self, ids: &[i64]) {
        let now = Instant::now();
        for id in ids {
            self.touched.insert(*id, now);
        }
    }

    /// Checks that every id names a job of `subject`'s: NO_SUCH_JOB for an unknown one,
    /// NOT_AUTHORIZED for another subject's. Nothing is changed unless all pass.
    fn check_owner(&self, subject: &str, ids: &[i64]) -> Result<(), JobError> {
        for id in ids {
            match self.jobs.get(id) {
                None => return Err(JobError::new(ErrorCode::NoSuchJob, format!("no job {id}"))),
                Some(j) if j.subject != subject => {
                    return Err(JobError::new(
                        ErrorCode::NotAuthorized,
                        format!("job {id} belongs to {}", j.subject),
                    ))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Refuses (NO_SPACE) a new job `description` of `subject` that would pass the most jobs
    /// or bytes one subject keeps.
    fn check_room(
        &self,
        table: &Table,
        subject: &str,
        description: &Description,
    ) -> Result<(), JobError> {
        let (count, bytes) = table
            .jobs
            .values()
            .filter(|j| j.subject == subject)
            .fold((0, 0), |(n, b), j| (n + 1, b + j.description.size()));
        let limit = self.config.jobs_per_subject;
        if count >= limit {
            return Err(JobError::new(
                ErrorCode::NoSpace,
                format!(
                    "{subject} has {count} jobs not yet reaped, the most this server keeps for \
                     one subject: reap ended ones (job_reap) before creating more"
                ),
            ));
        }
        let size = description.size();
        let limit = self.config.bytes_per_subject;
        if bytes + size > limit {
            return Err(JobError::new(
                ErrorCode::NoSpace,
                format!(
                    "{subject}'s jobs not yet reaped hold {bytes} bytes of descriptions, and \
                     this one {size} more: the most this server keeps for one subject is \
                     {limit} bytes; reap ended jobs (job_reap) before creating more"
                ),
            ));
        }
        Ok(())
    }

    /// Stores a job's record; a failure is logged (the job goes on, in memory).
    fn save(&self, job: &Job) {
        if let Err(e) = self.store.save(job) {
            log::event(Level::Error, "job-save", &[("id", &job.id), ("error", &e)]);
        }
    }
}

/// Logs how jobs are confined here, and what they lack.
fn log_isolation(config: &JobConfig, users: &JobUsers, isolation: &Isolation) {
    let user = match config.uids {
        Some(r) if users.per_job() => format!("uids {}-{}", r.first, r.last),
        _ => users.base().name.clone(),
    };
    let limit = |v: Option<u64>| v.map_or("none".to_string(), |n| n.to_string());
    log::event(
        Level::Info,
        "jobs",
        &[
            ("dir", &config.dir.display()),
            ("user", &user),
            ("concurrency", &config.concurrency),
            ("isolation", &isolation.namespaces.name()),
            ("network", &isolation.network_name()),
            (
                "landlock",
                &isolation
                    .landlock
                    .map_or("unavailable".to_string(), |v| format!("abi{v}")),
            ),
            ("proc", &if isolation.own_proc { "own" } else { "host" }),
            (
                "processes",
                &limit(isolation.process_limit(config.process_limit)),
            ),
            ("memory", &limit(config.memory_limit)),
        ],
    );
    for why in &isolation.fallbacks {
        log::event(Level::Info, "jobs-isolation", &[("why", why)]);
    }
    if isolation.landlock.is_none() {
        log::event(
            Level::Error,
            "jobs-unconfined",
            &[(
                "why",
                &"the kernel has no Landlock: jobs can read and write wherever their user may",
            )],
        );
    }
    if !isolation.namespaces.any() {
        log::event(
            Level::Error,
            "jobs-without-namespaces",
            &[(
                "why",
                &"no user namespace for this user: a job's processes are found through /proc, \
                  it sees every process of the host, and no process cap holds (RLIMIT_NPROC \
                  would count all of this user's processes)",
            )],
        );
    }
}

/// Starts committed jobs, oldest first (by priority, then commit time, as cctools), while
/// fewer than `--job-concurrency` run.
fn dispatch(inner: &Arc<Inner>, table: &mut Table) {
    while table.running < inner.config.concurrency {
        let Some(id) = table
            .jobs
            .values()
            .filter(|j| j.status == Status::Committed)
            .min_by_key(|j| (j.priority, j.times.commit, j.id))
            .map(|j| j.id)
        else {
            return;
        };
        let job = table.jobs.get_mut(&id).expect("just found");
        job.status = Status::Started;
        job.times.start = Some(record::now());
        inner.save(job);
        let runner = inner.clone();
        let started = std::thread::Builder::new()
            .name(format!("job-{id}"))
            .spawn(move || runner::run(&runner, id));
        match started {
            Ok(_) => table.running += 1,
            Err(e) => {
                job.end(Status::Errored, Some(format!("cannot start a thread: {e}")));
                inner.save(job);
                inner.ended.notify_all();
            }
        }
    }
}
