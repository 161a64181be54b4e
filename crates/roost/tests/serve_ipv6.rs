//! `roost serve` listens on IPv6 and IPv4 at once by default, and an IPv4 client of that one
//! socket is still named by its IPv4 address (ACLs, `address:` logins); clients reach a
//! server by `chirp://[::1]:PORT/`.

mod serve_support;

use serve_support::cli_ok;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A `roost serve` with no `--listen`, on a free port; its announced line and the child.
fn serve_default(dir: &std::path::Path, args: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_roost"))
        .arg("serve")
        .arg(dir)
        .args(["--port", "0", "--log-level", "error", "--ledger"])
        .arg(dir.with_extension("ledger"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, line)
}

#[test]
fn the_default_listens_on_both_families_and_ipv4_clients_keep_their_addresses() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), b"both\n").unwrap();
    let (mut child, line) = serve_default(
        dir.path(),
        &[
            "--auth",
            "address",
            "--acl",
            "address:127.0.0.1=rl",
            "--acl",
            "address:::1=rl",
        ],
    );
    let addr = roost_server::announced_addr(&line).unwrap_or_else(|| panic!("{line}"));
    assert_eq!(addr.ip().to_string(), "::", "{line}");
    let port = addr.port();
    for (url, subject) in [
        (format!("chirp://127.0.0.1:{port}"), "address:127.0.0.1"),
        (format!("chirp://[::1]:{port}"), "address:::1"),
    ] {
        assert_eq!(cli_ok(&["cat", &format!("{url}/f")]), "both\n", "{url}");
        assert_eq!(cli_ok(&["whoami", &url]).trim(), subject, "{url}");
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_server_on_ipv6_loopback_is_reached_by_its_bracketed_address() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f"), b"six\n").unwrap();
    let (mut child, line) = serve_default(
        dir.path(),
        &[
            "--listen",
            "::1",
            "--auth",
            "address",
            "--acl",
            "address:::1=rl",
        ],
    );
    let port = roost_server::announced_addr(&line).unwrap().port();
    assert_eq!(
        cli_ok(&["cat", &format!("chirp://[::1]:{port}/f")]),
        "six\n"
    );
    assert_eq!(cli_ok(&["ls", &format!("chirp://[::1]:{port}/")]), "f\n");
    let _ = child.kill();
    let _ = child.wait();
}
