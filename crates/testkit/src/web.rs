//! Shared helpers of the `roost run` tests over HTTP (`run_http.rs`,
//! `run_http_prefetch.rs`): web servers on 127.0.0.1 (`python3 -m http.server`, nginx as a
//! server, over TLS, or as a caching proxy) with their access logs, and a served tree with
//! a private cache to run `roost index` and `roost run` on.

use crate::peer::is_root;
use crate::run::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A web server serving `root` on 127.0.0.1, stopped when dropped.
pub struct Web {
    child: Child,
    pub port: u16,
    /// nginx's configuration and logs, python's log.
    state: tempfile::TempDir,
}

pub fn wait_for(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "no server on port {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Web {
    /// `python3 -m http.server` serving `root`, its log (stderr: `127.0.0.1 - - [DATE]
    /// "REQUEST" STATUS -`, one line a request) kept for [`Web::log`].
    pub fn python(root: &Path) -> Web {
        let port = free_port();
        let state = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(state.path().join("access.log")).unwrap();
        let child = Command::new("python3")
            .args(["-m", "http.server", "--bind", "127.0.0.1", "-d"])
            .arg(root)
            .arg(port.to_string())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        wait_for(port);
        Web { child, port, state }
    }

    pub fn nginx(root: &Path) -> Web {
        Web::nginx_with(|_| format!("root {};\n    autoindex on;", root.display()))
    }

    /// nginx as a caching forward proxy (`proxy_pass` to the server a request names, with
    /// `proxy_cache`), its access log saying each request, its connection and whether the
    /// cache had it. `wrong` are copies it serves instead of the server's: a tampered
    /// proxy.
    pub fn caching_proxy(wrong: &[(&str, &[u8])]) -> Web {
        Web::nginx_with(|state| {
            let mut conf = String::from(
                "location / {\n      proxy_pass http://$http_host;\n      \
                 proxy_cache roost;\n      proxy_cache_valid 200 10m;\n      \
                 proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n    }",
            );
            for (path, data) in wrong {
                let copy = state.join("wrong").join(path.trim_start_matches('/'));
                std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
                std::fs::write(&copy, data).unwrap();
                conf += &format!(
                    "\n    location = {path} {{ root {}; }}",
                    state.join("wrong").display()
                );
            }
            conf
        })
    }

    /// nginx on a free port with `server` (given nginx's state directory) as its server
    /// block.
    pub fn nginx_with(server: impl FnOnce(&Path) -> String) -> Web {
        Web::nginx_listening("", server)
    }

    /// nginx serving `root` over TLS with the certificate chain `cert` and its key `key`
    /// (PEM files).
    pub fn nginx_tls(root: &Path, cert: &Path, key: &Path) -> Web {
        Web::nginx_listening(" ssl", |_| {
            format!(
                "root {};\n    ssl_certificate {};\n    ssl_certificate_key {};",
                root.display(),
                cert.display(),
                key.display()
            )
        })
    }

    /// nginx on a free port (`listen 127.0.0.1:PORT` + `listen`) with `server`. Besides
    /// [`Web::log`], it writes [`Web::timed_log`]; a `server` may use `limit_req
    /// zone=slow` (200 requests a second from one address, the others delayed).
    pub fn nginx_listening(listen: &str, server: impl FnOnce(&Path) -> String) -> Web {
        let port = free_port();
        let state = tempfile::tempdir().unwrap();
        let user = if is_root() { "user root root;" } else { "" };
        let conf = format!(
            "{user}\nworker_processes 1;\nerror_log {s}/error.log;\npid {s}/nginx.pid;\n\
             events {{ worker_connections 64; }}\n\
             http {{\n  log_format proxied '$connection $connection_requests \"$request\" \
             $status $upstream_cache_status \"$http_range\"';\n  access_log {s}/access.log proxied;\n\
             log_format timed '$connection $msec $request_time \"$request\" $status';\n  \
             access_log {s}/timed.log timed;\n\
             limit_req_zone $binary_remote_addr zone=slow:1m rate=200r/s;\n\
             client_body_temp_path {s}/body;\n\
             proxy_temp_path {s}/proxy;\n  fastcgi_temp_path {s}/fastcgi;\n\
             uwsgi_temp_path {s}/uwsgi;\n  scgi_temp_path {s}/scgi;\n\
             proxy_cache_path {s}/cache levels=1:2 keys_zone=roost:1m;\n\
             server {{\n    listen 127.0.0.1:{port}{listen};\n    {server}\n  }}\n}}\n",
            s = state.path().display(),
            server = server(state.path()),
        );
        std::fs::write(state.path().join("nginx.conf"), conf).unwrap();
        let child = Command::new("nginx")
            .arg("-p")
            .arg(state.path())
            .arg("-c")
            .arg(state.path().join("nginx.conf"))
            .args(["-g", "daemon off;"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx (apt-get install nginx-light)");
        wait_for(port);
        Web { child, port, state }
    }

    /// `/http/127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("/http/127.0.0.1:{}{path}", self.port)
    }

    /// `http://127.0.0.1:PORT`, as a proxy is named.
    pub fn proxy(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The access log so far, one request a line: nginx's `CONNECTION REQUESTS "REQUEST"
    /// STATUS CACHE "RANGE"`, python's as [`Web::python`] says.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.state.path().join("access.log")).unwrap_or_default()
    }

    /// nginx's other access log so far: `CONNECTION END DURATION "REQUEST" STATUS`, one
    /// request a line, when it ended (seconds since the epoch, to the millisecond) and how
    /// long it took from its first byte (seconds).
    pub fn timed_log(&self) -> String {
        std::fs::read_to_string(self.state.path().join("timed.log")).unwrap_or_default()
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        // SAFETY: a signal to our own child (nginx's master stops its workers on TERM).
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

/// A tree to serve and a private cache.
pub struct Site {
    pub served: tempfile::TempDir,
    pub cache: tempfile::TempDir,
    /// Variables set for `roost run` (`SSL_CERT_FILE`).
    pub env: Vec<(String, String)>,
}

impl Default for Site {
    fn default() -> Site {
        Site {
            served: tempfile::tempdir().unwrap(),
            cache: tempfile::tempdir().unwrap(),
            env: Vec::new(),
        }
    }
}

impl Site {
    pub fn new() -> Site {
        Site::default()
    }

    pub fn root(&self) -> &Path {
        self.served.path()
    }

    pub fn write(&self, rel: &str, data: &[u8]) -> PathBuf {
        let p = self.root().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, data).unwrap();
        p
    }

    pub fn executable(&self, rel: &str, data: &[u8]) -> PathBuf {
        let p = self.write(rel, data);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// `roost index` on `rel`.
    pub fn index(&self, rel: &str) -> Output {
        self.index_with(rel, &[])
    }

    /// `roost index --sign KEY` on `rel`.
    pub fn index_signed(&self, rel: &str, key: &Path) -> Output {
        self.index_with(rel, &["--sign", key.to_str().unwrap()])
    }

    /// `roost index OPTIONS` on `rel`, which must succeed.
    pub fn index_with(&self, rel: &str, options: &[&str]) -> Output {
        let o = self.try_index(rel, options);
        assert!(o.status.success(), "{}", stderr(&o));
        o
    }

    /// `roost index OPTIONS` on `rel`, however it ends.
    pub fn try_index(&self, rel: &str, options: &[&str]) -> Output {
        roost()
            .arg("index")
            .arg(self.root().join(rel))
            .args(options)
            .output()
            .unwrap()
    }

    /// cctools' `make_growfs` on `rel`, which must succeed.
    pub fn make_growfs(&self, rel: &str) {
        let o = Command::new("make_growfs")
            .arg(self.root().join(rel))
            .output()
            .expect("make_growfs (apt-get install coop-computing-tools)");
        assert!(o.status.success(), "{}", stderr(&o));
    }

    /// `roost run --cache DIR [mode] OPTIONS -- timeout 60 ARGV`.
    pub fn run(&self, mode: &[&str], options: &[&str], argv: &[&str]) -> Output {
        self.command(mode, options, argv).output().unwrap()
    }

    /// The command `run` runs, with no proxy from the environment.
    pub fn command(&self, mode: &[&str], options: &[&str], argv: &[&str]) -> Command {
        let mut c = run_with_cache(self.cache.path(), mode, options, argv);
        for v in PROXY_VARIABLES
            .iter()
            .chain(&["SSL_CERT_FILE", "SSL_CERT_DIR"])
        {
            c.env_remove(v);
        }
        c.envs(self.env.iter().cloned());
        c
    }

    /// `run` in each of [`MODES`], each time from the cache as `cache` says: every run's
    /// stdout must be `want` and its stderr must hold each of `said`. Returns each mode with
    /// its run's stderr, for what else a test checks of it.
    pub fn each_mode(
        &mut self,
        cache: Cache,
        options: &[&str],
        argv: &[&str],
        want: &str,
        said: &[&str],
    ) -> Vec<(&'static [&'static str], String)> {
        MODES
            .into_iter()
            .map(|mode| {
                if cache == Cache::Emptied {
                    self.cache = tempfile::tempdir().unwrap();
                }
                let o = self.run(mode, options, argv);
                let err = stderr(&o);
                assert_eq!(stdout(&o), want, "{mode:?}: {err}");
                for part in said {
                    assert!(err.contains(part), "{mode:?}: {part}\n{err}");
                }
                (mode, err)
            })
            .collect()
    }
}

/// What each run of [`Site::each_mode`] starts from: the cache as the run before left it,
/// or an empty one.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Cache {
    Kept,
    Emptied,
}

pub const MODES: [&[&str]; 2] = [&[], &["--no-notify"]];

/// The variables that name proxies (the tests name theirs explicitly).
pub const PROXY_VARIABLES: [&str; 6] = [
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "no_proxy",
    "NO_PROXY",
];

/// Replaces the content of `path` with `data` and gives it back its modification time: a
/// change only the hash can tell (with `data` of the same size).
pub fn rewrite_keeping_time(path: &Path, data: &[u8]) {
    let when = std::fs::metadata(path).unwrap().modified().unwrap();
    std::fs::write(path, data).unwrap();
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(when)
        .unwrap();
}
