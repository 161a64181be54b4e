//! The roost client against cctools' `chirp_server` (Debian package `coop-computing-tools`)
//! on 127.0.0.1 with an ephemeral port. Each test starts its own server on a fresh directory.
//! Skipped, with a message, only when `chirp_server` is not installed; CI installs it.
//! The shared battery is in `common/mod.rs`; ACLs, whose defaults differ, are tested here.

mod common;

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Flavor, TestServer};
use roost_client::{Client, Options};

/// A cctools chirp_server on a temporary directory, killed and cleaned up on drop.
struct Cctools {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl Cctools {
    /// Starts a server, or returns `None` (after saying why) if cctools is not installed.
    fn start() -> Option<Cctools> {
        let installed = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join("chirp_server").is_file()))
            .unwrap_or(false);
        if !installed {
            eprintln!("SKIPPED: chirp_server not installed (apt-get install coop-computing-tools)");
            return None;
        }
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "roost-cctools-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let (root, state) = (dir.join("root"), dir.join("state"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&state).unwrap();
        let acl = dir.join("acl");
        std::fs::write(&acl, "unix:* rwldax\nhostname:* rwldax\naddress:* rwldax\n").unwrap();
        let port_file = state.join("port");
        let mut cmd = Command::new("chirp_server");
        cmd.arg("-r").arg(&root);
        cmd.args(["-p", "0", "-I", "127.0.0.1", "-E"]);
        cmd.arg("-Z").arg(&port_file);
        cmd.arg("-y").arg(&state);
        cmd.arg("-A").arg(&acl);
        // Catalog updates go to this host only (nothing listens there), and rarely.
        cmd.args(["-u", "127.0.0.1", "-U", "86400"]);
        cmd.arg("-o").arg(state.join("debug.log"));
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            // As root, cctools insists on dropping to another user, who must own the tree.
            cmd.args(["-i", "nobody"]);
            chown_tree(&dir, "nobody");
        }
        // cctools picks the port itself and gives up if another server takes it first, so a
        // start that does not report a port is retried.
        for _attempt in 0..5 {
            let _ = std::fs::remove_file(&port_file);
            let mut child = cmd
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                let port = std::fs::read_to_string(&port_file)
                    .ok()
                    .and_then(|s| s.trim().parse().ok());
                if let Some(port) = port {
                    return Some(Cctools { child, dir, port });
                }
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let log = std::fs::read_to_string(state.join("debug.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            eprintln!("chirp_server did not start, retrying; log tail: {tail:?}");
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("chirp_server did not report its port after 5 attempts");
    }
}

impl TestServer for Cctools {
    fn client(&self) -> Client {
        self.connect(&Options::default()).unwrap()
    }

    fn connect(&self, opts: &Options) -> roost_client::Result<Client> {
        // cctools writes its port file before it listens: allow it a moment.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match Client::connect(&format!("127.0.0.1:{}", self.port), opts) {
                Err(roost_client::Error::Io(e))
                    if e.kind() == std::io::ErrorKind::ConnectionRefused
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(50));
                }
                other => return other,
            }
        }
    }

    fn local(&self, path: &str) -> PathBuf {
        self.dir.join("root").join(path.trim_start_matches('/'))
    }

    fn flavor(&self) -> Flavor {
        Flavor::Cctools
    }
}

impl Drop for Cctools {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn chown_tree(path: &Path, user: &str) {
    let name = CString::new(user).unwrap();
    // SAFETY: getpwnam returns a pointer to static storage or null; read before any other call.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    assert!(!pw.is_null(), "no user {user}");
    let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        std::os::unix::fs::chown(&p, Some(uid), Some(gid)).unwrap();
        if p.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
}

battery_tests!(Cctools::start());

#[test]
fn acl_rpcs() {
    let Some(server) = Cctools::start() else {
        return;
    };
    let mut c = server.client();
    let acl = c.getacl("/").unwrap();
    // `w` implies `p`, so cctools lists the default ACL's `rwldax` as `rwldpax`.
    assert!(
        acl.iter()
            .any(|e| e.subject == "address:*" && e.rights == "rwldpax"),
        "{acl:?}"
    );
    c.mkdir("/shared", 0o755).unwrap();
    c.setacl("/shared", "hostname:*.example.org", "rl").unwrap();
    let acl = c.getacl("/shared").unwrap();
    assert!(acl
        .iter()
        .any(|e| e.subject == "hostname:*.example.org" && e.rights == "rl"));
    c.resetacl("/shared", "rwl").unwrap();
    let acl = c.getacl("/shared").unwrap();
    assert_eq!(acl.len(), 1);
    assert_eq!(acl[0].subject, c.subject().to_string());
}
