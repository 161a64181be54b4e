//! cctools' own `chirp` client (Debian package coop-computing-tools) against `roost serve`.

use roost_testkit::serve::TestServer;
use std::fs;
use std::process::{Command, Output};

/// Runs cctools' `chirp` tool against the server; fails the test with advice if the tool is
/// missing rather than skipping silently.
fn chirp(server: &TestServer, auth: &str, args: &[&str]) -> Output {
    let out = Command::new("chirp")
        .args(["-a", auth, "-t", "20"])
        .arg(format!("127.0.0.1:{}", server.port))
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run cctools' chirp ({e}); install coop-computing-tools")
        });
    out
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "chirp failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn cctools_chirp_client_puts_gets_lists_stats_and_manages_acls() {
    let server = TestServer::start(&["--acl", "address:127.0.0.1=rwldpa"]);
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    let data: Vec<u8> = (0..2_000_000u32).map(|i| (i * 7 % 256) as u8).collect();
    fs::write(&src, &data).unwrap();

    ok(&chirp(&server, "address", &["mkdir", "/in"]));
    ok(&chirp(
        &server,
        "address",
        &["put", src.to_str().unwrap(), "/in/copy.bin"],
    ));
    assert_eq!(fs::read(server.root().join("in/copy.bin")).unwrap(), data);

    let back = local.path().join("back.bin");
    ok(&chirp(
        &server,
        "address",
        &["get", "/in/copy.bin", back.to_str().unwrap()],
    ));
    assert_eq!(fs::read(&back).unwrap(), data);

    let listing = ok(&chirp(&server, "address", &["ls", "-la", "/in"]));
    assert!(
        listing.contains("copy.bin") && listing.contains("2000000"),
        "{listing}"
    );
    assert!(!listing.contains(".__acl"), "{listing}");

    let stat = ok(&chirp(&server, "address", &["stat", "/in/copy.bin"]));
    assert!(stat.contains("size:    2000000"), "{stat}");

    let whoami = ok(&chirp(&server, "address", &["whoami"]));
    assert_eq!(whoami.trim(), "address:127.0.0.1");

    ok(&chirp(
        &server,
        "address",
        &["setacl", "/in", "unix:nobody", "rl"],
    ));
    let acl = ok(&chirp(&server, "address", &["getacl", "/in"]));
    assert!(
        acl.contains("address:127.0.0.1 rwldpa") && acl.contains("unix:nobody rl"),
        "{acl}"
    );

    let md5 = ok(&chirp(&server, "address", &["md5", "/in/copy.bin"]));
    let expected = Command::new("md5sum").arg(&src).output().unwrap();
    let expected = String::from_utf8_lossy(&expected.stdout)
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    assert!(
        md5.to_lowercase().starts_with(&expected),
        "{md5} vs {expected}"
    );

    ok(&chirp(
        &server,
        "address",
        &["mv", "/in/copy.bin", "/in/moved.bin"],
    ));
    ok(&chirp(&server, "address", &["rm", "/in/moved.bin"]));
    assert!(!server.root().join("in/moved.bin").exists());
}

#[test]
fn cctools_chirp_client_authenticates_by_unix_challenge() {
    let me = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
    let server = TestServer::start(&["--acl", &format!("unix:{}=rwl", me.trim())]);
    let whoami = ok(&chirp(&server, "unix", &["whoami"]));
    assert_eq!(whoami.trim(), format!("unix:{}", me.trim()));
}

#[test]
fn cctools_chirp_client_sees_refusals_as_errors() {
    let server = TestServer::start(&["--acl", "address:127.0.0.1=rl"]);
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("f");
    fs::write(&src, b"x").unwrap();
    let out = chirp(&server, "address", &["put", src.to_str().unwrap(), "/f"]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.to_lowercase().contains("permission denied"), "{text}");
    assert!(!server.root().join("f").exists());
}
