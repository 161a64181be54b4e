//! The roost client against `roost serve` on 127.0.0.1 with an ephemeral port: the shared
//! battery (`common/mod.rs`) plus what only roost offers — `hmac` authentication, `ENODATA` for
//! missing attributes, `NOT_SUPPORTED` for cctools-only RPCs.
//!
//! The server is the `roost` binary next to this test's executable (`target/<profile>/roost`,
//! which `cargo test --workspace` builds), or the one `ROOST_BIN` names. If neither exists the
//! tests say so and pass, except under CI (`CI` set), where that is a failure.

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Flavor, TestServer};
use roost_client::{Client, Credentials, Error, ErrorCode, HmacKey, Method, Options};
use roost_wire::Request;

/// A running `roost serve` over a temporary directory, killed and cleaned up on drop.
struct Roost {
    child: Child,
    dir: PathBuf,
    port: u16,
}

fn roost_binary() -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os("ROOST_BIN") {
        return Some(PathBuf::from(bin));
    }
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.parent()?.join("roost");
    if bin.is_file() {
        return Some(bin);
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "roost binary not found next to {} (build it, or set ROOST_BIN)",
            exe.display()
        );
    }
    eprintln!("SKIPPED: roost binary not built (cargo build -p roost, or set ROOST_BIN)");
    None
}

impl Roost {
    /// Starts `roost serve` with extra arguments; `None` if the binary is not built.
    fn start_with(args: &[String]) -> Option<Roost> {
        let bin = roost_binary()?;
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "roost-serve-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("root")).unwrap();
        let mut child = Command::new(bin)
            .arg("serve")
            .arg(dir.join("root"))
            .args([
                "--listen",
                "127.0.0.1",
                "--port",
                "0",
                "--log-level",
                "error",
            ])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        // "roost serve: listening on 127.0.0.1:PORT, exporting DIR"
        let port = first
            .split("listening on ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .and_then(|addr| addr.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {first:?}"));
        Some(Roost { child, dir, port })
    }

    /// A server granting everything to local unix users and to 127.0.0.1.
    fn start() -> Option<Roost> {
        Roost::start_with(&[
            "--acl".into(),
            "unix:*=rwldpax".into(),
            "--acl".into(),
            "address:127.0.0.1=rwldpax".into(),
        ])
    }
}

impl TestServer for Roost {
    fn connect(&self, opts: &Options) -> roost_client::Result<Client> {
        Client::connect(&format!("127.0.0.1:{}", self.port), opts)
    }

    fn client(&self) -> Client {
        self.connect(&Options::default()).unwrap()
    }

    fn local(&self, path: &str) -> PathBuf {
        self.dir.join("root").join(path.trim_start_matches('/'))
    }

    fn flavor(&self) -> Flavor {
        Flavor::Roost
    }
}

impl Drop for Roost {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

battery_tests!(Roost::start());

#[test]
fn hmac_authenticates_with_a_shared_key_file() {
    let key_file = std::env::temp_dir().join(format!("roost-client-key-{}", std::process::id()));
    std::fs::write(&key_file, "correct horse\n").unwrap();
    std::fs::set_permissions(
        &key_file,
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let args = [
        "--key".to_string(),
        format!("ci={}", key_file.display()),
        "--acl".into(),
        "hmac:ci=rwl".into(),
    ];
    let Some(server) = Roost::start_with(&args) else {
        return;
    };
    let key = HmacKey::from_file("ci", &key_file).unwrap();
    let opts = Options {
        credentials: Credentials::only(&[Method::Hmac]).with_key(key),
        ..Options::default()
    };
    let mut c = server.connect(&opts).unwrap();
    assert_eq!(c.subject().to_string(), "hmac:ci");
    assert_eq!(c.whoami().unwrap(), "hmac:ci");

    let wrong = HmacKey::new("ci", b"battery staple").unwrap();
    let opts = Options {
        credentials: Credentials::only(&[Method::Hmac]).with_key(wrong),
        ..Options::default()
    };
    let err = server.connect(&opts).unwrap_err();
    assert!(matches!(err, Error::AuthFailed(_)), "{err:?}");
    std::fs::remove_file(&key_file).unwrap();
}

#[test]
fn falls_back_to_address_when_stronger_methods_are_refused() {
    let args = [
        "--auth".to_string(),
        "address".into(),
        "--acl".into(),
        "address:127.0.0.1=rl".into(),
    ];
    let Some(server) = Roost::start_with(&args) else {
        return;
    };
    let c = server.client();
    assert_eq!(c.subject().to_string(), "address:127.0.0.1");
}

#[test]
fn cctools_only_rpcs_are_not_supported() {
    let Some(server) = Roost::start() else { return };
    let mut c = server.client();
    for name in ["localpath", "lsalloc", "audit"] {
        let req = Request::Unsupported {
            name: name.into(),
            args: vec![b"1".to_vec()],
            payload: 0,
        };
        let err = c.raw_call(&req, &[]).unwrap_err();
        assert!(err.is(ErrorCode::NotSupported), "{name}: {err:?}");
        assert_eq!(err.errno(), libc::ENOTSUP);
    }
    // job_create carries data, which a server without --jobs must swallow before answering.
    assert!(c.job_create("{}").unwrap_err().is(ErrorCode::NotSupported));
    assert!(c.stat("/").unwrap().is_dir());
}

#[test]
fn acl_rpcs() {
    let Some(server) = Roost::start() else { return };
    let mut c = server.client();
    c.mkdir("/shared", 0o755).unwrap();
    c.setacl("/shared", "hostname:*.example.org", "rl").unwrap();
    let acl = c.getacl("/shared").unwrap();
    assert!(
        acl.iter()
            .any(|e| e.subject == "hostname:*.example.org" && e.rights == "rl"),
        "{acl:?}"
    );
    c.setacl("/shared", "hostname:*.example.org", "n").unwrap();
    let acl = c.getacl("/shared").unwrap();
    assert!(
        !acl.iter().any(|e| e.subject == "hostname:*.example.org"),
        "{acl:?}"
    );
}
