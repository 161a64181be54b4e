//! Helpers of the `roost run` tests (and of others that want the same): the real `roost`
//! binary, scratch trees that remove themselves, C test programs compiled with gcc at test
//! time, processes that announce where they listen.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A port nobody listens on now (for a server that must come back on the same one, or an
/// address that must refuse).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Processes whose command line contains `marker`.
pub fn processes_with(marker: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(marker))
                .unwrap_or(false)
        })
        .collect()
}

/// cctools' `chirp_server` exporting `export` on 127.0.0.1, at a port of its choosing that it
/// writes to `port_file` (see [`read_port_file`]), with its state in `state`, its output
/// discarded: the command, for the caller to add its own options to and spawn.
pub fn cctools_chirp_server(export: &Path, state: &Path, port_file: &Path) -> Command {
    let mut command = Command::new("chirp_server");
    command
        .arg("-r")
        .arg(export)
        .args(["-p", "0", "-I", "127.0.0.1"])
        .arg("-Z")
        .arg(port_file)
        .arg("-y")
        .arg(state)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

/// The `roost` binary under test.
pub fn roost() -> Command {
    Command::new(crate::roost_bin())
}

/// A temporary directory, removed on drop.
pub struct Tree {
    pub root: PathBuf,
}

impl Tree {
    pub fn new(tag: &str) -> Tree {
        Tree::under(&std::env::temp_dir(), tag)
    }

    pub fn under(base: &Path, tag: &str) -> Tree {
        let root = base.join(format!("roost-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        Tree { root }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// Writes a file (creating parents).
    pub fn write(&self, rel: &str, data: &str) -> PathBuf {
        let p = self.path(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, data).unwrap();
        p
    }

    /// Writes an executable file.
    pub fn script(&self, rel: &str, data: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = self.write(rel, data);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    pub fn s(&self) -> String {
        self.root.display().to_string()
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Compiles a C file of crates/roost/tests/run_support/ once per test process; returns the
/// binary.
pub fn compiled(name: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("roost-test-bin-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    });
    let out = dir.join(name);
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _g = LOCK.lock().unwrap();
    if !out.exists() {
        let src = crate::tests_dir().join(format!("run_support/{name}.c"));
        let st = Command::new("gcc")
            .args(["-O1", "-Wall", "-pthread", "-o"])
            .arg(&out)
            .arg(&src)
            .status()
            .expect("gcc");
        assert!(st.success(), "gcc {}", src.display());
    }
    out
}

/// `roost run --cache CACHE MODE... OPTIONS... -- timeout 60 ARGV...`, to be run.
pub fn run_with_cache(cache: &Path, mode: &[&str], options: &[&str], argv: &[&str]) -> Command {
    with_cache(roost(), cache, mode, options, argv)
}

/// [`run_with_cache`]'s arguments given to `c`, a command that runs roost.
pub fn with_cache(
    mut c: Command,
    cache: &Path,
    mode: &[&str],
    options: &[&str],
    argv: &[&str],
) -> Command {
    c.arg("run")
        .arg("--cache")
        .arg(cache)
        .args(mode)
        .args(options)
        .arg("--")
        .args(["timeout", "60"])
        .args(argv);
    c
}

/// Runs `roost run ARGS...` and returns its output.
pub fn run(args: &[&str]) -> Output {
    roost().arg("run").args(args).output().expect("run roost")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Standard output and then standard error.
pub fn text(o: &Output) -> String {
    stdout(o) + &stderr(o)
}

/// Runs `ARGV` under roost (inside `timeout 20`) with the tree at /m in each delivery mode:
/// with the in-process fast path (the default), with notifications only (`--strict`) and
/// with ptrace only (`--strict --no-notify`); all must give the same output and exit code,
/// which are returned. As root the three modes are also run as an ordinary user on the tree
/// given to that user, and compared among themselves: so the fast path is compared with the
/// trap in every case as both users (as root its program starts in a Landlock domain,
/// docs/security.md).
pub fn run_both(t: &Tree, argv: &[&str]) -> (String, i32) {
    run_both_with(t, &[], argv)
}

/// [`run_both`] with more options before the program (further mounts, say).
pub fn run_both_with(t: &Tree, options: &[&str], argv: &[&str]) -> (String, i32) {
    let results = in_each_mode(t, options, argv, run, "");
    if is_root() {
        // A change of owner clears set-id bits: they are put back for the tests' next runs.
        let set_ids = set_id_modes(&t.root);
        give_to_nobody(&t.root);
        in_each_mode(t, options, argv, run_as_nobody, " as nobody");
        give_to(&t.root, "root:root");
        for (path, mode) in set_ids {
            std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode))
                .unwrap();
        }
    }
    results
}

/// The files under `dir` with a set-user-id or set-group-id bit, and their modes.
fn set_id_modes(dir: &Path) -> Vec<(PathBuf, u32)> {
    use std::os::unix::fs::PermissionsExt;
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        let mode = meta.permissions().mode();
        if meta.is_dir() {
            found.extend(set_id_modes(&entry.path()));
        }
        if !meta.file_type().is_symlink() && mode & 0o6000 != 0 {
            found.push((entry.path(), mode & 0o7777));
        }
    }
    found
}

/// The outputs and exit codes of `ARGV` in each delivery mode, made by `runner`, which must
/// all be equal (`who` says whose runs they were): the first.
fn in_each_mode(
    t: &Tree,
    options: &[&str],
    argv: &[&str],
    runner: fn(&[&str]) -> Output,
    who: &str,
) -> (String, i32) {
    let mount = format!("/m={}", t.s());
    let mut results = Vec::new();
    // The in-process fast path with notifications, notifications only, ptrace only.
    for mode in [&[][..], &["--strict"][..], &["--strict", "--no-notify"][..]] {
        let mut args = mode.to_vec();
        args.extend(["--mount", &mount]);
        args.extend(options);
        args.extend(["--", "timeout", "20"]);
        args.extend(argv);
        let o = runner(&args);
        results.push((stdout(&o) + &stderr(&o), o.status.code().unwrap_or(-1)));
    }
    assert_eq!(
        results[0], results[1],
        "fast path vs notifications{who} for {argv:?}"
    );
    assert_eq!(
        results[1], results[2],
        "notifications vs ptrace{who} for {argv:?}"
    );
    results.remove(0)
}

/// Whether the tests run as root.
pub fn is_root() -> bool {
    // SAFETY: a plain id query.
    unsafe { libc::geteuid() == 0 }
}

/// `program` to be run as nobody: under `setpriv` when the tests run as root, as itself
/// otherwise.
pub fn as_nobody(program: impl AsRef<std::ffi::OsStr>) -> Command {
    if is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
        c.arg(program);
        c
    } else {
        Command::new(program)
    }
}

/// `roost run ARGS` as nobody ([`as_nobody`]), with a cache of its own and no runtime
/// directory of root's.
pub fn run_as_nobody(args: &[&str]) -> Output {
    let mut c = as_nobody(crate::roost_bin());
    let cache =
        std::env::temp_dir().join(format!("roost-test-nobody-cache-{}", std::process::id()));
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::set_permissions(&cache, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    c.env("XDG_CACHE_HOME", &cache)
        .env_remove("XDG_RUNTIME_DIR")
        .arg("run")
        .args(args)
        .output()
        .expect("run roost as nobody")
}

/// [`run_both`] for `sh -c SCRIPT`.
pub fn sh_both(t: &Tree, script: &str) -> (String, i32) {
    run_both(t, &["sh", "-c", script])
}

/// `python3 -c PROGRAM` left free to write bytecode, whatever `PYTHONDONTWRITEBYTECODE`
/// the tests inherit.
pub fn python3_writing_bytecode(program: &str) -> [&str; 6] {
    [
        "env",
        "-u",
        "PYTHONDONTWRITEBYTECODE",
        "python3",
        "-c",
        program,
    ]
}

/// `chown -R nobody:nogroup PATH`, for a server that runs as nobody (cctools' `chirp_server
/// -i nobody`, `roost serve` under `setpriv`, when the tests run as root).
pub fn give_to_nobody(path: &Path) {
    give_to(path, "nobody:nogroup");
}

/// `chown -R OWNER PATH`.
pub fn give_to(path: &Path, owner: &str) {
    let st = Command::new("chown")
        .args(["-R", owner])
        .arg(path)
        .status()
        .unwrap();
    assert!(st.success());
}

/// The port a server (cctools' `chirp_server -Z`, `catalog_server`) writes to `path`, once
/// it has: at most 10 s.
pub fn read_port_file(path: &Path) -> u16 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(p) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return p;
        }
        assert!(Instant::now() < deadline, "no port in {}", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The zlib sources bundled in the libz-sys crate (a dev-dependency of roost for this
/// reason): a real C project with no build system of its own, so `run_support/zlib.mk`
/// builds it.
///
/// Cargo is asked for this platform's packages only: a cargo home that has built roost holds
/// exactly those, while an unfiltered `cargo metadata --offline` wants every platform's
/// (Windows crates included) and fails on a machine whose cache never saw them.
pub fn zlib_sources() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let workspace = crate::tests_dir().join("../../../Cargo.toml");
    let out = Command::new(cargo)
        .args(["metadata", "--offline", "--format-version", "1"])
        .args(["--filter-platform", &host_triple()])
        .arg("--manifest-path")
        .arg(&workspace)
        .output()
        .unwrap();
    assert!(out.status.success(), "cargo metadata: {}", stderr(&out));
    let json = String::from_utf8(out.stdout).unwrap();
    let manifest = json
        .split('"')
        .find(|s| s.contains("/libz-sys-") && s.ends_with("/Cargo.toml"))
        .expect("libz-sys in cargo metadata");
    Path::new(manifest).parent().unwrap().join("src/zlib")
}

/// The platform rustc builds for by default (`x86_64-unknown-linux-gnu` here).
pub fn host_triple() -> String {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc)
        .arg("-vV")
        .output()
        .expect("run rustc -vV");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("a host line in rustc -vV")
        .to_string()
}

/// Every object and archive of a zlib build in `built` equals the one in `native`.
pub fn same_zlib_build(native: &Path, built: &Path) {
    let mut outputs: Vec<String> = std::fs::read_dir(native)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".o") || n.ends_with(".a"))
        .collect();
    outputs.sort();
    assert!(
        outputs.len() > 10 && outputs.contains(&"libz.a".to_string()),
        "{outputs:?}"
    );
    for f in &outputs {
        let a = std::fs::read(native.join(f)).unwrap();
        let b = std::fs::read(built.join(f)).unwrap_or_default();
        assert!(a == b, "{f} differs from the native build");
    }
}

/// A child process killed when dropped.
pub struct Proc(pub std::process::Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a roost command and reads the port from its first line ("... listening on ADDR:PORT ...").
pub fn start_announcing(mut cmd: Command) -> (Proc, u16) {
    cmd.stderr(Stdio::null());
    announced(cmd)
}

/// [`start_announcing`] with standard error where the caller sent it (a log file).
pub fn announced(mut cmd: Command) -> (Proc, u16) {
    use std::io::BufRead;
    let mut child = cmd.stdout(Stdio::piped()).spawn().expect("start roost");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split("listening on ")
        .nth(1)
        .and_then(|rest| rest.split([' ', ',']).next())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    let port = addr.rsplit(':').next().unwrap().parse().unwrap();
    (Proc(child), port)
}
