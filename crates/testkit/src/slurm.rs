//! A real Slurm cluster of one node on this host for the tests (Debian's slurm-wlm and
//! munge, `./scripts/test --install`): munged with its own key and socket, slurmctld and
//! slurmd in the foreground, all of it (configuration, state, spool, logs) in a temporary
//! directory, on ports of their own, reached through `SLURM_CONF`. Dropping it cancels its
//! jobs and stops the daemons, a panicking test included.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::run::free_port;

pub struct LocalSlurm {
    dir: tempfile::TempDir,
    daemons: Vec<(&'static str, Child)>,
    /// The cluster's slurm.conf, for `SLURM_CONF`.
    pub conf: PathBuf,
    pub cpus: usize,
}

/// A daemon's program: on PATH, else in /usr/sbin (where Debian puts them).
fn daemon(name: &str) -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain([PathBuf::from("/usr/sbin")])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("{name} not found: install slurm-wlm and munge (./scripts/test --install)")
        })
}

fn user() -> String {
    let out = Command::new("id").arg("-un").output().expect("id -un");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl LocalSlurm {
    /// Starts the cluster and waits until its node is idle.
    pub fn start() -> LocalSlurm {
        let dir = tempfile::tempdir().unwrap();
        let root = &dir.path().to_path_buf();
        // munged wants its socket's directory open to all, its key private.
        std::fs::set_permissions(root, PermissionsExt::from_mode(0o755)).unwrap();
        for d in ["munge", "state", "spool", "log"] {
            std::fs::create_dir(root.join(d)).unwrap();
        }
        let key = root.join("munge/munge.key");
        let mut bytes = vec![0u8; 1024];
        std::fs::File::open("/dev/urandom")
            .unwrap()
            .read_exact(&mut bytes)
            .unwrap();
        std::fs::write(&key, &bytes).unwrap();
        std::fs::set_permissions(&key, PermissionsExt::from_mode(0o400)).unwrap();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let p = |rel: &str| root.join(rel).display().to_string();
        let socket = p("munge/socket");
        let user = user();
        let conf = root.join("slurm.conf");
        std::fs::write(
            &conf,
            format!(
                "ClusterName=roosttest\n\
                 SlurmctldHost=localhost\n\
                 SlurmctldPort={ctld}\n\
                 SlurmdPort={slurmd}\n\
                 AuthType=auth/munge\n\
                 CredType=cred/munge\n\
                 AuthInfo=socket={socket}\n\
                 SlurmUser={user}\n\
                 SlurmdUser={user}\n\
                 StateSaveLocation={state}\n\
                 SlurmdSpoolDir={spool}\n\
                 SlurmctldPidFile={ctld_pid}\n\
                 SlurmdPidFile={slurmd_pid}\n\
                 SlurmctldLogFile={ctld_log}\n\
                 SlurmdLogFile={slurmd_log}\n\
                 ProctrackType=proctrack/linuxproc\n\
                 TaskPlugin=task/none\n\
                 SelectType=select/cons_tres\n\
                 SelectTypeParameters=CR_CPU\n\
                 JobAcctGatherType=jobacct_gather/none\n\
                 AccountingStorageType=accounting_storage/none\n\
                 MpiDefault=none\n\
                 ReturnToService=2\n\
                 SchedulerParameters=sched_interval=1\n\
                 NodeName=localhost CPUs={cpus} State=UNKNOWN\n\
                 PartitionName=roost Nodes=localhost Default=YES MaxTime=INFINITE State=UP\n",
                ctld = free_port(),
                slurmd = free_port(),
                state = p("state"),
                spool = p("spool"),
                ctld_pid = p("slurmctld.pid"),
                slurmd_pid = p("slurmd.pid"),
                ctld_log = p("log/slurmctld.log"),
                slurmd_log = p("log/slurmd.log"),
            ),
        )
        .unwrap();
        let mut slurm = LocalSlurm {
            conf,
            cpus,
            daemons: Vec::new(),
            dir,
        };
        let root = slurm.dir.path().to_path_buf();
        let log =
            |name: &str| Stdio::from(std::fs::File::create(root.join("log").join(name)).unwrap());
        let munged = Command::new(daemon("munged"))
            .arg("--foreground")
            .arg(format!("--socket={socket}"))
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--pid-file={}", p("munge/munged.pid")))
            .arg(format!("--seed-file={}", p("munge/munged.seed")))
            .arg(format!("--log-file={}", p("log/munged.log")))
            .stdout(Stdio::null())
            .stderr(log("munged.out"))
            .spawn()
            .expect("start munged");
        slurm.daemons.push(("munged", munged));
        slurm.wait_for("munged's socket", || Path::new(&socket).exists());
        for (name, args) in [
            ("slurmctld", vec!["-D"]),
            ("slurmd", vec!["-D", "-N", "localhost"]),
        ] {
            let child = Command::new(daemon(name))
                .args(&args)
                .arg("-f")
                .arg(&slurm.conf)
                .env("SLURM_CONF", &slurm.conf)
                .stdout(Stdio::null())
                .stderr(log(&format!("{name}.out")))
                .spawn()
                .unwrap_or_else(|e| panic!("start {name}: {e}"));
            slurm.daemons.push((name, child));
        }
        let conf = slurm.conf.clone();
        slurm.wait_for("the node to be idle", || {
            Command::new("sinfo")
                .env("SLURM_CONF", &conf)
                .args(["-h", "-o", "%t"])
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle")
        });
        slurm
    }

    /// A Slurm command (or any other) that talks to this cluster.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.env("SLURM_CONF", &self.conf);
        cmd
    }

    /// Stops slurmctld (the node's slurmd keeps running).
    pub fn stop_controller(&mut self) {
        if let Some(i) = self.daemons.iter().position(|(n, _)| *n == "slurmctld") {
            let (_, mut child) = self.daemons.remove(i);
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The daemons' logs, for a failure's message.
    pub fn logs(&self) -> String {
        let mut text = String::new();
        for name in [
            "slurmctld.log",
            "slurmd.log",
            "slurmctld.out",
            "slurmd.out",
            "munged.out",
        ] {
            let log =
                std::fs::read_to_string(self.dir.path().join("log").join(name)).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            text.push_str(&format!("== {name}\n"));
            for line in tail.into_iter().rev() {
                text.push_str(line);
                text.push('\n');
            }
        }
        text
    }

    fn wait_for(&mut self, what: &str, mut ok: impl FnMut() -> bool) {
        let start = Instant::now();
        while !ok() {
            let exited = self
                .daemons
                .iter_mut()
                .find_map(|(name, child)| Some((*name, child.try_wait().ok()??)));
            if let Some((name, status)) = exited {
                panic!(
                    "{name} exited ({status}) waiting for {what}:\n{}",
                    self.logs()
                );
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "timed out waiting for {what}:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for LocalSlurm {
    fn drop(&mut self) {
        // Without a controller scancel would retry for seconds, to no end.
        if self.daemons.iter().any(|(n, _)| *n == "slurmctld") {
            let _ = self
                .command("scancel")
                .arg(format!("--user={}", user()))
                .stderr(Stdio::null())
                .status();
        }
        // slurmd, then slurmctld, then munged: each stops on SIGTERM.
        for (_, child) in self.daemons.iter_mut().rev() {
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let start = Instant::now();
            while matches!(child.try_wait(), Ok(None)) && start.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
