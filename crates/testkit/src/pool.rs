//! The pool for the tests: a catalog and its records, hmac key files and clients, waiting,
//! the server a `roost serve --supervise` runs.

use roost_catalog::json::{self, Value};
use roost_client::Client;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::run::{roost, start_announcing, Proc};

pub fn start_catalog(extra: &[&str]) -> (Proc, u16) {
    let mut cmd = roost();
    cmd.args(["catalog", "--port", "0", "--listen", "127.0.0.1"])
        .args(extra);
    start_announcing(cmd)
}

/// The records `roost status --json --all` prints.
pub fn catalog_records(catalog: u16) -> Vec<Value> {
    let out = roost()
        .args(["status", "--catalog", &format!("127.0.0.1:{catalog}")])
        .args(["--json", "--all"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    match json::parse(&out.stdout) {
        Ok(Value::Array(records)) => records,
        other => panic!(
            "not a JSON array: {other:?}\n{}",
            String::from_utf8_lossy(&out.stdout)
        ),
    }
}

/// Waits until `ok`, at most `timeout`; how long it took.
pub fn wait_for(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    loop {
        if ok() {
            return start.elapsed();
        }
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Writes key files for `names` (each secret the name reversed) and returns the `--key
/// NAME=FILE` arguments: [`TestServer::with_keys`](crate::serve::TestServer::with_keys).
pub fn keys(dir: &Path, names: &[&str]) -> Vec<String> {
    crate::serve::TestServer::with_keys(dir, names)
}

pub fn key_file(dir: &Path, name: &str) -> std::path::PathBuf {
    dir.join(format!("{name}.key"))
}

/// A client of the server on `port` logged in with the hmac key `name`.
pub fn hmac_client(port: u16, name: &str) -> Client {
    crate::serve::client(port, crate::serve::hmac_credentials(name))
}

/// The processes whose parent is `parent`.
pub fn children(parent: u32) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let ppid: u32 = after.split(' ').nth(1).unwrap().parse().unwrap();
        if ppid == parent {
            found.push(pid);
        }
    }
    found
}

/// The pid of the server that the supervisor `supervisor` (`roost serve --supervise`) runs.
pub fn server_of(supervisor: u32) -> i32 {
    let mut pid = None;
    wait_for("the server process", Duration::from_secs(10), || {
        pid = children(supervisor).first().copied();
        pid.is_some()
    });
    pid.unwrap()
}

/// Writes a catalog key file `NAME.catalog-key` in `dir` (mode 0600, as key files must be)
/// and returns the `NAME=FILE` argument of `--catalog-key`.
pub fn catalog_key(dir: &Path, name: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let file = dir.join(format!("{name}.catalog-key"));
    std::fs::write(&file, format!("catalog secret of {name}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    format!("{name}={}", file.display())
}
