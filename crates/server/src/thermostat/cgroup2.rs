//! Enforcement by cgroup v2, the unified hierarchy, where its `cpu` and `memory` controllers
//! reach the group the server runs in and that group is the server's to change: a root
//! server, or one in a subtree delegated to its user (a systemd service with `Delegate=yes`,
//! `systemd-run --scope -p Delegate=yes`, a user's `user@.service` tree).
//!
//! The layout, beneath the group the server started in (`G`, from `/proc/self/cgroup`'s
//! `0::` line), named after its job directory as v1's groups are (`roost-<hash>`):
//!
//! ```text
//! G/cgroup.subtree_control       +cpu +memory
//! G/roost-<hash>-server/         the server itself, when G is not the hierarchy's root
//! G/roost-<hash>/                the guests: cpu.max, cpu.weight, memory.max, memory.swap.max;
//!                                +memory in its cgroup.subtree_control
//! G/roost-<hash>/job-ID/         a job: every process it starts; its memory.events' oom_kill
//! ```
//!
//! v2 lets no group but the root both hold processes and give controllers to the groups
//! inside it. A server that is alone in its group (with its supervisor, under `roost serve
//! --supervise`) therefore moves into a leaf of its own first, as systemd asks of delegated
//! services, and then gives `G`'s children the controllers; a group that also holds others'
//! processes (a login shell's session) is refused with a clear error rather than having them
//! moved. The root group needs no leaf.
//!
//! The guests' limits are on one group for all jobs: `cpu.max` "QUOTA PERIOD" from the
//! percent of all cores (`max` when unlimited); `cpu.weight` in proportion to the limit, as
//! v1's `cpu.shares`, never above the default 100 of the owner's groups; `memory.max`, and
//! `memory.swap.max` 0 while it is limited, so that swap cannot stretch the limit (as v1's
//! `memsw` equal to it). Jobs enter their group before they exec, through the same
//! `cgroup.procs` path v1 uses ([`super::cgroupfs::JobGroups`]); the kernel's OOM kills are
//! counted per job from its group's `memory.events`. A `memory.max` set below what the
//! guests hold makes the kernel reclaim, then kill (v1 refuses such a limit).

use super::cgroupfs::{self, JobGroups, Placement, PERIOD_US};
use super::schedule::Limits;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The controllers the thermostat needs.
pub const NEEDED: [&str; 2] = ["cpu", "memory"];

/// The guests' weight when the CPUs are contended (`cpu.weight`, default 100): in proportion
/// to their limit, as v1's `cpu.shares`, never above the owner's own processes.
fn weight(cpu_percent: u32) -> u32 {
    cpu_percent.clamp(1, 100)
}

/// Where the server stands in the unified hierarchy.
#[derive(Clone, Debug)]
pub struct Unified {
    /// Where the hierarchy is mounted.
    pub mount: PathBuf,
    /// The group the server started in, beneath which its groups are made (the parent of
    /// the leaf it moved itself into, once it did).
    pub group: PathBuf,
    /// Those of [`NEEDED`] bound to a v1 hierarchy (and so absent from v2).
    pub on_v1: Vec<&'static str>,
}

impl Unified {
    /// From `placement`, for a server whose groups are called `name`.
    pub fn find(placement: &Placement, name: &str) -> io::Result<Unified> {
        let Some((mount, own)) = placement.v2_group() else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no cgroup v2 hierarchy is mounted",
            ));
        };
        let own = own.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "this process is in no cgroup v2 group (/proc/self/cgroup has no 0:: line)",
            )
        })?;
        let group = match own.parent() {
            Some(parent) if own.file_name() == Some(leaf_name(name).as_ref()) => parent.into(),
            _ => own,
        };
        Ok(Unified {
            mount: mount.point.clone(),
            group,
            on_v1: NEEDED
                .into_iter()
                .filter(|c| placement.v1_mount(c).is_some())
                .collect(),
        })
    }

    /// The error for the controllers `missing` from the group.
    fn lacks(&self, missing: &[&str]) -> io::Error {
        let parts: Vec<String> = missing
            .iter()
            .map(|c| {
                let why = if self.on_v1.contains(c) {
                    "it is bound to a v1 hierarchy"
                } else if self.group != self.mount {
                    "the parent group does not give it to this one in its cgroup.subtree_control"
                } else {
                    "the kernel has none"
                };
                format!("no {c} controller ({why})")
            })
            .collect();
        io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "cgroup v2 at {} has {}",
                self.group.display(),
                parts.join(" and ")
            ),
        )
    }
}

/// The leaf the server moves itself into when its group must give controllers to others.
fn leaf_name(name: &str) -> String {
    format!("{name}-server")
}

/// The words of a file such as `cgroup.controllers`.
fn words(path: &Path) -> io::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    Ok(text.split_whitespace().map(String::from).collect())
}

/// The server's processes: itself, after its supervisor (`roost serve --supervise`: its
/// parent, running this same program, which marked this one supervised), which moves with
/// it into its leaf. Another parent running roost (`roost run -- roost serve`) stays.
fn own_processes() -> Vec<i32> {
    use std::os::unix::fs::MetadataExt;
    let program = |pid: &str| std::fs::metadata(format!("/proc/{pid}/exe")).ok();
    // SAFETY: a plain query.
    let parent = unsafe { libc::getppid() };
    let mut ours = Vec::new();
    let supervised = std::env::var_os(crate::SUPERVISED_ENV).is_some();
    if let (true, Some(me), Some(up)) = (supervised, program("self"), program(&parent.to_string()))
    {
        if (me.dev(), me.ino()) == (up.dev(), up.ino()) {
            ours.push(parent);
        }
    }
    ours.push(std::process::id() as i32);
    ours
}

/// Makes group `g` able to give controllers to the groups inside it: v2 lets no group but
/// the root (which has no `cgroup.type`) both hold processes and do that. The server's own
/// processes (`ours`) move into a leaf of their own, `NAME-server`, as systemd asks of
/// delegated services; any other process in `g` is not the server's to move, and is refused
/// with what to do instead. Nothing is changed when it is refused.
fn move_out_of_the_way(g: &Path, name: &str, ours: &[i32]) -> io::Result<()> {
    if !g.join("cgroup.type").exists() {
        return Ok(());
    }
    let procs = cgroupfs::read_pids(&g.join("cgroup.procs"));
    let (moving, others): (Vec<i32>, Vec<i32>) = procs.iter().partition(|p| ours.contains(p));
    if !others.is_empty() {
        let shown: Vec<String> = others.iter().take(5).map(|p| p.to_string()).collect();
        let more = if others.len() > 5 { " ..." } else { "" };
        return Err(io::Error::other(format!(
            "cgroup v2 group {} holds processes other than this server ({}{more}), and a \
             group that holds processes cannot give controllers to groups inside it: run the \
             server in a group of its own (a systemd service with Delegate=yes, or \
             systemd-run --scope -p Delegate=yes)",
            g.display(),
            shown.join(" ")
        )));
    }
    if moving.is_empty() {
        return Ok(());
    }
    let leaf = g.join(leaf_name(name));
    cgroupfs::make_dir(&leaf)?;
    // In the order given: the supervisor first, so that no server it restarts meanwhile is
    // born in g.
    for pid in ours.iter().filter(|p| moving.contains(p)) {
        if let Err(e) = cgroupfs::write(&leaf.join("cgroup.procs"), &pid.to_string()) {
            let _ = std::fs::remove_dir(&leaf);
            return Err(e);
        }
    }
    Ok(())
}

/// Puts back, as far as the kernel lets it, what [`Cgroup2::create_in`] changed before one
/// of its steps failed: the guests' group, the controllers it gave (`newly`), the server in
/// `g` again and its leaf removed.
fn undo(g: &Path, name: &str, ours: &[i32], newly: &[&str]) {
    let _ = std::fs::remove_dir(g.join(name));
    if !newly.is_empty() {
        let disable: Vec<String> = newly.iter().map(|c| format!("-{c}")).collect();
        let _ = cgroupfs::write(&g.join("cgroup.subtree_control"), &disable.join(" "));
    }
    let leaf = g.join(leaf_name(name));
    if leaf.exists() {
        for pid in ours {
            let _ = cgroupfs::write(&g.join("cgroup.procs"), &pid.to_string());
        }
        let _ = std::fs::remove_dir(&leaf);
    }
}

/// The guests' group.
pub struct Cgroup2 {
    guests: PathBuf,
    cores: u64,
    /// Whether the memory controller is the thermostat's (always, but in the by-hand check
    /// of a hybrid machine whose memory controller stays bound to v1).
    memory: bool,
    jobs: JobGroups,
}

impl Cgroup2 {
    /// Makes (or takes over) the guests' group for the jobs in `job_dir`; fails, saying
    /// why, when the unified hierarchy lacks a controller here or is not the server's to
    /// change. Nothing is changed before every check passed, and what was is put back
    /// should a later step fail.
    pub fn create(job_dir: &Path) -> io::Result<Cgroup2> {
        let name = cgroupfs::group_name(job_dir);
        let unified = Unified::find(&Placement::of_self(), &name)?;
        let ours = own_processes();
        Cgroup2::create_in(&unified, &name, &ours, cgroupfs::cores(), &NEEDED)
    }

    /// [`Cgroup2::create`] beneath `unified.group`, for the server whose processes are
    /// `ours` (see [`own_processes`]), with the controllers `need`.
    pub fn create_in(
        unified: &Unified,
        name: &str,
        ours: &[i32],
        cores: u64,
        need: &[&str],
    ) -> io::Result<Cgroup2> {
        let g = &unified.group;
        let available = words(&g.join("cgroup.controllers"))?;
        let missing: Vec<&str> = need
            .iter()
            .copied()
            .filter(|c| !available.iter().any(|a| a == c))
            .collect();
        if !missing.is_empty() {
            return Err(unified.lacks(&missing));
        }
        let control = g.join("cgroup.subtree_control");
        let mut subtree = std::fs::OpenOptions::new()
            .write(true)
            .open(&control)
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "cgroup v2 at {} is not this server's to change ({}: {e}); a server \
                         not run as root needs a group delegated to its user (systemd: \
                         Delegate=yes)",
                        g.display(),
                        control.display()
                    ),
                )
            })?;
        // What the group gives its children already stays given, whatever happens here.
        let given = words(&control)?;
        let newly: Vec<&str> = need
            .iter()
            .copied()
            .filter(|c| !given.iter().any(|g| g == c))
            .collect();
        move_out_of_the_way(g, name, ours)?;
        let made = Cgroup2::make(g, name, cores, need, &mut subtree);
        if made.is_err() {
            undo(g, name, ours, &newly);
        }
        made
    }

    /// The steps of [`Cgroup2::create_in`] once the server is out of the way: the
    /// controllers given to `g`'s children, the guests' group and its limits.
    fn make(
        g: &Path,
        name: &str,
        cores: u64,
        need: &[&str],
        subtree: &mut std::fs::File,
    ) -> io::Result<Cgroup2> {
        let enable: Vec<String> = need.iter().map(|c| format!("+{c}")).collect();
        subtree
            .write_all(enable.join(" ").as_bytes())
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("{}: {e}", g.join("cgroup.subtree_control").display()),
                )
            })?;
        let guests = g.join(name);
        cgroupfs::make_dir(&guests)?;
        let memory = need.contains(&"memory");
        if memory {
            // For each job's memory.events.
            cgroupfs::write(&guests.join("cgroup.subtree_control"), "+memory")?;
        }
        let groups = Cgroup2 {
            jobs: JobGroups::new(vec![guests.clone()], "memory.events"),
            guests,
            cores,
            memory,
        };
        // A previous server's job groups, empty now: gone.
        groups.jobs.remove_leftovers();
        groups.apply(Limits::UNLIMITED)?;
        Ok(groups)
    }

    /// The jobs' groups.
    pub fn jobs(&self) -> &JobGroups {
        &self.jobs
    }

    /// Sets the guests' limits.
    pub fn apply(&self, limits: Limits) -> io::Result<()> {
        self.apply_cpu(limits)?;
        if !self.memory {
            return Ok(());
        }
        self.apply_memory(limits)
    }

    /// Sets the guests' CPU limit.
    pub fn apply_cpu(&self, limits: Limits) -> io::Result<()> {
        let write = cgroupfs::write;
        let quota = cgroupfs::quota_us(limits.cpu_percent, self.cores)
            .map_or("max".to_string(), |q| q.to_string());
        write(
            &self.guests.join("cpu.max"),
            &format!("{quota} {PERIOD_US}"),
        )?;
        write(
            &self.guests.join("cpu.weight"),
            &weight(limits.cpu_percent).to_string(),
        )
    }

    /// Sets the guests' memory limit; fails when there is one to set and the group has no
    /// memory controller.
    pub fn apply_memory(&self, limits: Limits) -> io::Result<()> {
        let write = cgroupfs::write;
        if !self.memory {
            return match limits.mem_bytes {
                None => Ok(()),
                Some(_) => Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "the guests' group has no memory controller",
                )),
            };
        }
        let mem = limits
            .mem_bytes
            .map_or("max".to_string(), |b| b.to_string());
        write(&self.guests.join("memory.max"), &mem)?;
        // Present where swap is accounted.
        let swap = self.guests.join("memory.swap.max");
        if swap.exists() {
            write(
                &swap,
                if limits.mem_bytes.is_some() {
                    "0"
                } else {
                    "max"
                },
            )?;
        }
        Ok(())
    }

    /// Removes the guests' group of the jobs in `job_dir` when it holds no process any
    /// more, and the server's leaf when the server has left it (what a stopped server
    /// leaves). Returns how many of them are left (0: none).
    pub fn remove_leftovers(job_dir: &Path) -> usize {
        let name = cgroupfs::group_name(job_dir);
        match Unified::find(&Placement::of_self(), &name) {
            Ok(unified) => remove_in(&unified, &name),
            Err(_) => 0,
        }
    }
}

/// [`Cgroup2::remove_leftovers`] beneath `unified.group`.
fn remove_in(unified: &Unified, name: &str) -> usize {
    let guests = unified.group.join(name);
    let leaf = unified.group.join(leaf_name(name));
    let _ = std::fs::remove_dir(&leaf);
    usize::from(cgroupfs::remove_group(&guests)) + usize::from(leaf.exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: &str = "cpuset cpu io memory hugetlb pids rdma misc\n";
    const SERVER: i32 = 4242;

    /// A fake group: the files the kernel would give it (`root`: the hierarchy's root,
    /// which has no cgroup.type).
    fn fake_group(dir: &Path, controllers: &str, procs: &str, root: bool) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("cgroup.controllers"), controllers).unwrap();
        std::fs::write(dir.join("cgroup.subtree_control"), "").unwrap();
        std::fs::write(dir.join("cgroup.procs"), procs).unwrap();
        if !root {
            std::fs::write(dir.join("cgroup.type"), "domain\n").unwrap();
        }
    }

    /// A fake unified hierarchy mounted at `top` (and v1 hierarchies with `v1`'s
    /// controllers), this process in group `own`.
    fn unified(top: &Path, own: &str, v1: &[&str]) -> Unified {
        let mut mountinfo = format!(
            "41 31 0:38 / {} rw,relatime - cgroup2 cgroup2 rw\n",
            top.display()
        );
        for c in v1 {
            mountinfo += &format!("32 31 0:29 / /sys/fs/cgroup/{c} rw - cgroup cgroup rw,{c}\n");
        }
        let placement = Placement::parse(&mountinfo, &format!("1:cpu:/\n0::{own}\n"));
        Unified::find(&placement, "roost-x").unwrap()
    }

    /// A fake hierarchy in a temporary directory, its root giving every controller.
    fn hierarchy() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        fake_group(tmp.path(), ALL, "1\n", true);
        tmp
    }

    /// The server's own group `own` beneath `top`, made with `controllers` and the
    /// processes `procs`, and where the server stands.
    fn own_group(top: &Path, own: &str, controllers: &str, procs: &str) -> (PathBuf, Unified) {
        let dir = top.join(own.trim_start_matches('/'));
        fake_group(&dir, controllers, procs, false);
        (dir, unified(top, own, &[]))
    }

    /// Why the server's groups cannot be made.
    fn refusal(u: &Unified) -> io::Error {
        Cgroup2::create_in(u, "roost-x", &[SERVER], 2, &NEEDED)
            .err()
            .unwrap()
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    fn limits(cpu_percent: u32, mem_bytes: Option<u64>) -> Limits {
        Limits {
            cpu_percent,
            mem_bytes,
        }
    }

    #[test]
    fn limits_are_written_as_cpu_max_cpu_weight_and_memory_max() {
        let tmp = hierarchy();
        let top = tmp.path();
        // The root may hold processes (the server too) and give controllers all the same.
        std::fs::write(top.join("cgroup.procs"), "1\n4242\n").unwrap();
        std::fs::create_dir(top.join("roost-x")).unwrap();
        std::fs::write(top.join("roost-x/memory.swap.max"), "max\n").unwrap();
        let u = unified(top, "/", &[]);
        let cg = Cgroup2::create_in(&u, "roost-x", &[SERVER], 2, &NEEDED).unwrap();
        assert_eq!(read(&top.join("cgroup.subtree_control")), "+cpu +memory");
        assert!(!top.join("roost-x-server").exists());
        let guests = top.join("roost-x");
        assert_eq!(read(&guests.join("cgroup.subtree_control")), "+memory");
        assert_eq!(read(&guests.join("cpu.max")), "max 100000");
        assert_eq!(read(&guests.join("cpu.weight")), "100");
        assert_eq!(read(&guests.join("memory.max")), "max");
        cg.apply(limits(30, Some(1 << 30))).unwrap();
        assert_eq!(read(&guests.join("cpu.max")), "60000 100000");
        assert_eq!(read(&guests.join("cpu.weight")), "30");
        assert_eq!(read(&guests.join("memory.max")), "1073741824");
        assert_eq!(read(&guests.join("memory.swap.max")), "0");
        cg.apply(limits(100, None)).unwrap();
        assert_eq!(read(&guests.join("cpu.max")), "max 100000");
        assert_eq!(read(&guests.join("memory.swap.max")), "max");
        let four = Cgroup2::create_in(&u, "roost-x", &[SERVER], 4, &NEEDED).unwrap();
        four.apply(limits(5, None)).unwrap();
        assert_eq!(read(&guests.join("cpu.max")), "20000 100000");
        assert_eq!(read(&guests.join("cpu.weight")), "5");
    }

    #[test]
    fn a_server_alone_in_its_delegated_group_moves_into_a_leaf_of_its_own() {
        let tmp = hierarchy();
        let top = tmp.path();
        let (svc, u) = own_group(top, "/system.slice/roost.service", "cpu memory\n", "4242\n");
        assert_eq!(u.group, svc);
        Cgroup2::create_in(&u, "roost-x", &[SERVER], 2, &NEEDED).unwrap();
        assert_eq!(read(&svc.join("roost-x-server/cgroup.procs")), "4242");
        assert_eq!(read(&svc.join("cgroup.subtree_control")), "+cpu +memory");
        assert_eq!(read(&svc.join("roost-x/cpu.max")), "max 100000");
        // Once in its leaf, the server still finds its groups beneath the group it started in.
        let moved = unified(top, "/system.slice/roost.service/roost-x-server", &[]);
        assert_eq!(moved.group, svc);
        // Under `--supervise` the supervisor moves too, first (a fake cgroup.procs keeps
        // only the last pid written).
        let (supervised, u) = own_group(
            top,
            "/system.slice/roost2.service",
            "cpu memory\n",
            "4241\n4242\n",
        );
        Cgroup2::create_in(&u, "roost-x", &[4241, SERVER], 2, &NEEDED).unwrap();
        assert_eq!(
            read(&supervised.join("roost-x-server/cgroup.procs")),
            "4242"
        );
        // The test binary's parent is not this program.
        assert_eq!(own_processes(), vec![std::process::id() as i32]);
    }

    #[test]
    fn a_step_failing_after_the_server_moved_puts_it_back() {
        let tmp = hierarchy();
        let top = tmp.path();
        let (svc, u) = own_group(top, "/system.slice/roost.service", "cpu memory\n", "4242\n");
        // The group already gives memory (its unit's setting): that stays.
        std::fs::write(svc.join("cgroup.subtree_control"), "memory\n").unwrap();
        // The guests' group cannot be made: a file has its name.
        std::fs::write(svc.join("roost-x"), "").unwrap();
        assert!(Cgroup2::create_in(&u, "roost-x", &[SERVER], 2, &NEEDED).is_err());
        // Given back: cpu only (a fake file keeps the last write); the server in its group.
        assert_eq!(read(&svc.join("cgroup.subtree_control")), "-cpu");
        assert_eq!(read(&svc.join("cgroup.procs")), "4242");
    }

    #[test]
    fn a_group_holding_others_processes_is_refused_and_left_as_it_was() {
        let tmp = hierarchy();
        let (session, u) = own_group(
            tmp.path(),
            "/user.slice/session-3.scope",
            "cpu memory pids\n",
            "99\n4242\n",
        );
        let e = refusal(&u).to_string();
        assert!(
            e.contains("session-3.scope holds processes other than this server (99)")
                && e.contains("Delegate=yes"),
            "{e}"
        );
        assert_eq!(read(&session.join("cgroup.subtree_control")), "");
        assert!(!session.join("roost-x-server").exists() && !session.join("roost-x").exists());
    }

    #[test]
    fn missing_controllers_are_named_with_why() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path();
        // This machine: a hybrid one whose cpu and memory are bound to v1 hierarchies.
        fake_group(top, "hugetlb\n", "1\n", true);
        let u = unified(top, "/", &["cpu", "memory"]);
        let e = refusal(&u);
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert_eq!(
            e.to_string(),
            format!(
                "cgroup v2 at {} has no cpu controller (it is bound to a v1 hierarchy) and no \
                 memory controller (it is bound to a v1 hierarchy)",
                top.display()
            )
        );
        assert_eq!(read(&top.join("cgroup.subtree_control")), "");
        assert!(!top.join("roost-x").exists());
        // A user's tree given memory and not cpu (systemd before 252 delegated no cpu).
        let scope = "/user.slice/user-1000.slice/user@1000.service/app.slice/r.scope";
        let (_, u) = own_group(top, scope, "memory pids\n", "4242\n");
        let e = refusal(&u).to_string();
        assert!(
            e.ends_with(
                "r.scope has no cpu controller (the parent group does not give it to \
                         this one in its cgroup.subtree_control)"
            ),
            "{e}"
        );
        // No hierarchy, no group.
        let none = Unified::find(&Placement::parse("", ""), "roost-x").unwrap_err();
        assert_eq!(none.to_string(), "no cgroup v2 hierarchy is mounted");
    }

    #[test]
    fn jobs_get_a_group_each_their_oom_kills_counted_and_leftovers_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path();
        fake_group(top, ALL, "", true);
        // What a killed server left: an empty job group, and one still holding a process.
        let guests = top.join("roost-x");
        std::fs::create_dir_all(guests.join("job-5")).unwrap();
        fake_group(&guests.join("job-6"), "memory\n", "77\n", false);
        let u = unified(top, "/", &[]);
        let cg = Cgroup2::create_in(&u, "roost-x", &[SERVER], 2, &NEEDED).unwrap();
        assert!(!guests.join("job-5").exists() && guests.join("job-6").exists());
        let job = guests.join("job-9");
        fake_group(&job, "memory\n", "", false);
        let entry = cg.jobs().entry_files(9).unwrap();
        assert_eq!(entry.len(), 1, "one cgroup.procs in v2");
        assert_eq!(cg.jobs().oom_kills(9), 0);
        std::fs::write(
            job.join("memory.events"),
            "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n",
        )
        .unwrap();
        assert_eq!(cg.jobs().oom_kills(9), 1);
        // The kernel empties a group whose processes are gone; here the test does.
        drop(entry);
        for f in std::fs::read_dir(&job).unwrap() {
            std::fs::remove_file(f.unwrap().path()).unwrap();
        }
        cg.jobs().release(9).unwrap();
        assert!(!job.exists());
        // job-6 still holds its process: the guests' group stays.
        std::fs::create_dir(top.join("roost-x-server")).unwrap();
        assert_eq!(remove_in(&u, "roost-x"), 1);
        assert!(!top.join("roost-x-server").exists());
        for f in std::fs::read_dir(guests.join("job-6")).unwrap() {
            std::fs::remove_file(f.unwrap().path()).unwrap();
        }
        for f in [
            "cgroup.subtree_control",
            "cpu.max",
            "cpu.weight",
            "memory.max",
        ] {
            std::fs::remove_file(guests.join(f)).unwrap();
        }
        assert_eq!(remove_in(&u, "roost-x"), 0);
        assert!(!guests.exists());
    }

    /// The check's group on a real kernel, removed with what is in it however the test ends.
    struct Check {
        dir: PathBuf,
        holder: std::process::Child,
    }

    impl Drop for Check {
        fn drop(&mut self) {
            let _ = self.holder.kill();
            let _ = self.holder.wait();
            let guests = self.dir.join("roost-check");
            for pid in cgroupfs::read_pids(&guests.join("job-1/cgroup.procs")) {
                // SAFETY: a plain system call, no memory shared with it.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
            let _ = std::fs::remove_dir(guests.join("job-1"));
            let _ = std::fs::remove_dir(&guests);
            let _ = std::fs::remove_dir(self.dir.join("roost-check-server"));
            let _ = std::fs::remove_dir(&self.dir);
        }
    }

    /// By hand, as root, on a kernel whose unified hierarchy has the cpu controller (and
    /// the memory one, where it is not bound to v1), given to the root's children: `echo
    /// +cpu > .../cgroup.subtree_control` (docs/pool.md, "Thermostat"). A group like a
    /// delegated service's with one process in it, which moves into its leaf; the guests'
    /// limits written and read back as the kernel shows them; a job's first process in its
    /// group before it runs the program, held to `cpu.max`; over `memory.max`, killed and
    /// counted; its group removed.
    #[test]
    #[ignore = "changes the machine's cgroup v2 hierarchy: run by hand as root"]
    fn on_this_kernel_a_job_enters_its_group_before_exec_and_is_held_to_its_limits() {
        use std::io::{BufRead, BufReader};
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        use std::time::{Duration, Instant};

        let placement = Placement::of_self();
        let top = placement
            .v2_group()
            .expect("no cgroup v2 hierarchy")
            .0
            .point
            .clone();
        let given = words(&top.join("cgroup.subtree_control")).unwrap();
        let need: Vec<&str> = NEEDED
            .into_iter()
            .filter(|c| given.iter().any(|g| g == c))
            .collect();
        assert!(
            need.contains(&"cpu"),
            "{}/cgroup.subtree_control gives no cpu controller: free it from v1 and give it \
             first (docs/pool.md)",
            top.display()
        );
        eprintln!("controllers checked: {need:?}");
        let holder = std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .unwrap();
        let check = Check {
            dir: top.join("roost-check"),
            holder,
        };
        cgroupfs::make_dir(&check.dir).unwrap();
        let holder = check.holder.id() as i32;
        cgroupfs::write(&check.dir.join("cgroup.procs"), &holder.to_string()).unwrap();
        let u = Unified {
            mount: top.clone(),
            group: check.dir.clone(),
            on_v1: Vec::new(),
        };
        let cores = cgroupfs::cores();
        let cg = Cgroup2::create_in(&u, "roost-check", &[holder], cores, &need).unwrap();
        let leaf = check.dir.join("roost-check-server");
        assert_eq!(
            cgroupfs::read_pids(&leaf.join("cgroup.procs")),
            vec![holder]
        );
        let guests = check.dir.join("roost-check");
        let read_trim = |p: &Path| read(p).trim().to_string();
        assert_eq!(read_trim(&guests.join("cpu.max")), "max 100000");
        cg.apply(limits(30, Some(64 << 20))).unwrap();
        let quota = 30 * cores * 1000;
        assert_eq!(
            read_trim(&guests.join("cpu.max")),
            format!("{quota} 100000")
        );
        assert_eq!(read_trim(&guests.join("cpu.weight")), "30");
        if cg.memory {
            assert_eq!(read_trim(&guests.join("memory.max")), "67108864");
        }

        // As the runner starts a job: the entry file opened by the server, 0 written to it
        // between fork and exec.
        let entry = cg.jobs().entry_files(1).unwrap();
        let fd = entry[0].as_raw_fd();
        let mut command = std::process::Command::new("/bin/sh");
        command
            .args([
                "-c",
                // Its v2 line (a hybrid machine lists its v1 groups first), with builtins only.
                "while read -r l; do case $l in 0::*) echo \"$l\";; esac; done \
                 < /proc/self/cgroup; while :; do :; done",
            ])
            .stdout(std::process::Stdio::piped());
        // SAFETY: between fork and exec the closure only calls write(2), which is async-signal-safe, on a descriptor `entry` keeps open, with a constant buffer.
        unsafe {
            command.pre_exec(move || {
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut burner = command.spawn().unwrap();
        let mut first = String::new();
        BufReader::new(burner.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        eprintln!("the job's first line: {}", first.trim());
        assert!(
            first.trim().ends_with("/roost-check/roost-check/job-1"),
            "{first}"
        );
        let usage = || {
            read(&guests.join("cpu.stat"))
                .lines()
                .find_map(|l| l.strip_prefix("usage_usec ")?.parse::<u64>().ok())
                .unwrap()
        };
        std::thread::sleep(Duration::from_millis(500));
        let (u0, t0) = (usage(), Instant::now());
        std::thread::sleep(Duration::from_secs(3));
        let cores_used = (usage() - u0) as f64 / t0.elapsed().as_micros() as f64;
        let expected = (0.3 * cores as f64).min(1.0);
        eprintln!(
            "one burner at 30% of {cores} cores: {cores_used:.3} cores (expected {expected:.2})"
        );
        // Never above the limit; below it only by what other work on the machine took.
        assert!(
            cores_used < expected + 0.05 && cores_used > expected - 0.15,
            "{cores_used}"
        );
        cg.apply(Limits::UNLIMITED).unwrap();
        assert_eq!(read_trim(&guests.join("cpu.max")), "max 100000");
        let _ = burner.kill();
        let _ = burner.wait();

        if cg.memory {
            cg.apply(limits(100, Some(64 << 20))).unwrap();
            let mut hog = std::process::Command::new("/bin/sh");
            hog.args([
                "-c",
                "x=$(head -c 300000000 /dev/zero | tr '\\0' x); echo survived",
            ]);
            // SAFETY: as above: write(2) of a constant to a descriptor `entry` keeps open.
            unsafe {
                hog.pre_exec(move || {
                    if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                        return Err(io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let out = hog.output().unwrap();
            eprintln!(
                "the hog: {:?}, {} oom kills",
                out.status,
                cg.jobs().oom_kills(1)
            );
            assert!(cg.jobs().oom_kills(1) >= 1);
        }
        drop(entry);
        cg.jobs().release(1).unwrap();
        assert!(!guests.join("job-1").exists());
    }
}
