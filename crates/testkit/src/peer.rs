//! Skip guards. A test that needs a peer this host may lack (another project's program,
//! root, a kernel feature) asks here first. Where the peer is missing, the test does not
//! pass as if it had checked something:
//! - with `CI` set it fails, naming the peer: CI has every one (`.ci/run` sets `CI=true`
//!   and runs `scripts/test --install`, as root, which installs them);
//! - elsewhere it prints `SKIP TEST: no PEER; HOW TO GET IT` straight to the terminal (the
//!   output a passing test prints through `eprintln!` is captured and never shown) and the
//!   guard returns false, for the test (or the part of it that needs the peer) to return.

use std::io::Write;
use std::process::{Command, Stdio};

/// How to get cctools' programs (`chirp`, `chirp_server`, `catalog_server`, `make_growfs`).
pub const CCTOOLS: &str = "coop-computing-tools";

/// Whether `CI` is set (to anything but empty, `0` or `false`).
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "0" | "false"))
}

/// The guard itself: true when `here`; otherwise the test fails under CI, or a SKIP line
/// names `peer` and `how` to get it and the answer is false.
pub fn needs(here: bool, peer: &str, how: &str) -> bool {
    if here {
        return true;
    }
    let current = std::thread::current();
    let test = current.name().filter(|n| *n != "main").unwrap_or("a test");
    assert!(!ci(), "{test}: no {peer}, and CI runs every test ({how})");
    let _ = writeln!(std::io::stderr(), "SKIP {test}: no {peer}; {how}");
    false
}

/// Whether the tests run as root (CI does): only root can hand its tracees another identity,
/// chroot them, make namespaces or run servers as nobody.
pub fn is_root() -> bool {
    // SAFETY: a plain id query.
    unsafe { libc::geteuid() == 0 }
}

/// [`needs`] root, for `what` (what only root can do).
pub fn root(what: &str) -> bool {
    needs(
        is_root(),
        &format!("root ({what})"),
        "run the tests as root, as CI does",
    )
}

/// Whether `program` is on the PATH.
pub fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// [`needs`] `program` on the PATH, which the Debian package `package` installs.
pub fn program(program: &str, package: &str) -> bool {
    needs(
        have(program),
        &format!("`{program}`"),
        &format!("apt-get install {package}, or ./scripts/test --install"),
    )
}

/// [`needs`] what network namespaces take: root and iproute2's `ip`.
pub fn namespaces() -> bool {
    root("network namespaces") && program("ip", "iproute2")
}
