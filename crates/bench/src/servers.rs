//! Starting the servers under test on loopback, each over its own fresh export directory:
//! `roost serve` and cctools' `chirp_server` (never reporting to a public catalog).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RunningServer {
    name: &'static str,
    child: Child,
    port: u16,
    dir: PathBuf,
    /// Everything the server owns on disk, removed at the end.
    scratch: PathBuf,
}

/// Exports live in memory (/dev/shm) where there is such a file system, so the figures
/// measure the servers and not the disk under them.
fn scratch(name: &str) -> std::io::Result<PathBuf> {
    let base = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("chirp-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("export"))?;
    Ok(dir)
}

impl RunningServer {
    pub fn roost(binary: &Path) -> Result<RunningServer, String> {
        let scratch = scratch("roost").map_err(|e| e.to_string())?;
        let dir = scratch.join("export");
        let mut child = Command::new(binary)
            .arg("serve")
            .arg(&dir)
            .args([
                "--listen",
                "127.0.0.1",
                "--port",
                "0",
                "--log-level",
                "error",
            ])
            .args([
                "--acl",
                "address:127.0.0.1=rwldpa",
                "--max-connections",
                "100000",
                // The idle-connection figure opens a thousand from one address.
                "--max-per-address",
                "100000",
            ])
            // The ledger beside the export, gone with the scratch directory.
            .arg("--ledger")
            .arg(scratch.join("ledger"))
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| {
                format!(
                    "cannot start {}: {e} (build it with cargo build --release)",
                    binary.display()
                )
            })?;
        let mut first = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut first)
            .map_err(|e| e.to_string())?;
        let port = roost_server::announced_addr(&first)
            .ok_or_else(|| format!("roost serve said {first:?}"))?
            .port();
        Ok(RunningServer {
            name: "roost serve",
            child,
            port,
            dir,
            scratch,
        })
    }

    /// cctools' chirp_server; as root it must drop to an unprivileged user, so the export
    /// belongs to `nobody`.
    pub fn cctools() -> Result<RunningServer, String> {
        let scratch = scratch("cctools").map_err(|e| e.to_string())?;
        let dir = scratch.join("export");
        let acl = scratch.join("acl");
        let port_file = scratch.join("port");
        std::fs::write(&acl, "address:127.0.0.1 rwldpa\n").map_err(|e| e.to_string())?;
        let root = unsafe { libc::geteuid() } == 0;
        let mut cmd = Command::new("chirp_server");
        cmd.arg("-r")
            .arg(&dir)
            .args(["-p", "0", "-I", "127.0.0.1", "-a", "address", "-t", "3600"]);
        // Status updates go to loopback, never to the public catalog.
        cmd.args(["-u", "127.0.0.1", "-U", "3600"]);
        cmd.arg("-A")
            .arg(&acl)
            .arg("-Z")
            .arg(&port_file)
            .arg("-y")
            .arg(&scratch);
        if root {
            for p in [&scratch, &dir, &acl] {
                chown_nobody(p)?;
            }
            cmd.args(["-i", "nobody"]);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                format!("cannot start chirp_server: {e} (install coop-computing-tools)")
            })?;
        let deadline = Instant::now() + Duration::from_secs(10);
        let port = loop {
            if let Some(port) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                break port;
            }
            if Instant::now() > deadline {
                return Err("chirp_server did not report its port".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Ok(RunningServer {
            name: "cctools chirp_server",
            child,
            port,
            dir,
            scratch,
        })
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    pub fn authority(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Creates a file in the export, owned by whoever the server runs as.
    pub fn create_file(&self, name: &str, data: &[u8]) -> Result<(), String> {
        let path = self.dir.join(name);
        std::fs::write(&path, data).map_err(|e| e.to_string())?;
        if self.name == "cctools chirp_server" && unsafe { libc::geteuid() } == 0 {
            chown_nobody(&path)?;
        }
        Ok(())
    }

    /// CPU seconds (user and system) the server process has used so far.
    pub fn cpu_seconds(&self) -> Result<f64, String> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .map_err(|e| e.to_string())?;
        // Fields 14 and 15 (utime, stime) count after the command name, which may hold spaces.
        let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
        let (Some(user), Some(system)) = (ticks(11), ticks(12)) else {
            return Err("unreadable /proc/PID/stat".into());
        };
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        Ok((user + system) as f64 / per_second)
    }

    /// The server process's resident set size, in KiB.
    pub fn rss_kib(&self) -> Result<u64, String> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .map_err(|e| e.to_string())?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| "no VmRSS".to_string())
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

fn chown_nobody(path: &Path) -> Result<(), String> {
    let c =
        std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
    if unsafe { libc::chown(c.as_ptr(), 65534, 65534) } != 0 {
        return Err(format!(
            "chown {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Lifts the soft descriptor limit to the hard one (a thousand idle clients need it).
pub fn raise_fd_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// The raw-TCP echo server (this same program with `--echo-server`).
pub struct EchoServer {
    child: Child,
    pub port: u16,
}

impl EchoServer {
    pub fn start() -> Result<EchoServer, String> {
        let me = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut child = Command::new(me)
            .arg("--echo-server")
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        let mut first = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut first)
            .map_err(|e| e.to_string())?;
        let port = first
            .trim()
            .parse()
            .map_err(|_| format!("echo server said {first:?}"))?;
        Ok(EchoServer { child, port })
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
