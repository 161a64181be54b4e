//! `roost serve` listens on IPv6 and IPv4 at once by default, and an IPv4 client of that one
//! socket is still named by its IPv4 address (ACLs, `address:` logins); clients reach a
//! server by `chirp://[::1]:PORT/`.

use roost_testkit::serve::{cli_ok, serve_as_given};
use std::process::Child;

/// A `roost serve` with no `--listen`, on a free port; its announced line and the child.
fn serve_default(dir: &std::path::Path, args: &[&str]) -> (Child, String) {
    let ledger = dir.with_extension("ledger");
    let base = [
        "--port",
        "0",
        "--log-level",
        "error",
        "--ledger",
        ledger.to_str().unwrap(),
    ];
    serve_as_given(dir, &[&base[..], args].concat(), &[])
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
