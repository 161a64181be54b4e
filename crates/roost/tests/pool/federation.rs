//! The federated name space (issue 13, Legion's lmkdir/lmv/lrm): cross-server links made
//! with `roost ln -s`, followed by the client commands and by `roost run`, across two real
//! `roost serve` processes on 127.0.0.1.

use roost_testkit::serve::{cli_fails, cli_ok, TestServer};
use std::fs;
use std::process::Command;

fn server() -> (TestServer, String) {
    let s = TestServer::start(&["--acl", "address:127.0.0.1=rwldpa"]);
    let url = format!("chirp://127.0.0.1:{}", s.port);
    (s, url)
}

#[test]
fn a_tree_spanning_two_servers_is_one_name_space() {
    let (a, a_url) = server();
    let (b, b_url) = server();
    fs::create_dir(b.root().join("data")).unwrap();
    fs::write(b.root().join("data/f"), "on b\n").unwrap();

    // The link is stored as roost run follows it.
    cli_ok(&[
        "ln",
        "-s",
        &format!("{b_url}/data"),
        &format!("{a_url}/linked"),
    ]);
    let stored = fs::read_link(a.root().join("linked")).unwrap();
    assert_eq!(
        stored.to_str().unwrap(),
        format!("/chirp/127.0.0.1:{}/data", b.port)
    );
    let listing = cli_ok(&["ls", "-l", &format!("{a_url}/")]);
    assert!(
        listing.contains(&format!("linked -> /chirp/127.0.0.1:{}/data", b.port)),
        "{listing}"
    );

    // Reads, writes and names through the link land on the other server.
    assert_eq!(cli_ok(&["ls", &format!("{a_url}/linked")]), "f\n");
    assert_eq!(cli_ok(&["cat", &format!("{a_url}/linked/f")]), "on b\n");
    let local = tempfile::tempdir().unwrap();
    let put = local.path().join("put.txt");
    fs::write(&put, "put through a\n").unwrap();
    cli_ok(&["put", put.to_str().unwrap(), &format!("{a_url}/linked/new")]);
    cli_ok(&["mkdir", &format!("{a_url}/linked/sub")]);
    cli_ok(&[
        "mv",
        &format!("{a_url}/linked/new"),
        &format!("{a_url}/linked/sub/renamed"),
    ]);
    assert_eq!(
        fs::read_to_string(b.root().join("data/sub/renamed")).unwrap(),
        "put through a\n"
    );
    assert!(cli_ok(&["stat", &format!("{a_url}/linked/sub/renamed")]).contains("size: 14"));

    // mv from one server to the other: copied there, then removed here.
    fs::create_dir_all(a.root().join("tree/deep")).unwrap();
    fs::write(a.root().join("tree/deep/x"), vec![7u8; 300_000]).unwrap();
    fs::write(a.root().join("single"), "one file\n").unwrap();
    cli_ok(&[
        "mv",
        &format!("{a_url}/single"),
        &format!("{a_url}/linked/single"),
    ]);
    cli_ok(&[
        "mv",
        &format!("{a_url}/tree"),
        &format!("{a_url}/linked/tree"),
    ]);
    assert!(!a.root().join("single").exists() && !a.root().join("tree").exists());
    assert_eq!(
        fs::read_to_string(b.root().join("data/single")).unwrap(),
        "one file\n"
    );
    assert_eq!(
        fs::read(b.root().join("data/tree/deep/x")).unwrap(),
        vec![7u8; 300_000]
    );

    // roost run sees the same tree under a mount of the first server alone.
    let out = Command::new(env!("CARGO_BIN_EXE_roost"))
        .args([
            "run",
            "--auth",
            "address",
            "--mount",
            &format!("/ns={a_url}"),
            "--",
        ])
        .args([
            "sh",
            "-c",
            "cat /ns/linked/f /ns/linked/single && ls /ns/linked/tree/deep",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "on b\none file\nx\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // rm of the link removes the link, not what it leads to.
    cli_ok(&["rm", &format!("{a_url}/linked")]);
    assert!(fs::symlink_metadata(a.root().join("linked")).is_err());
    assert!(b.root().join("data/f").exists());
}

#[test]
fn loops_and_hard_links_across_servers_are_refused_with_a_clear_message() {
    let (a, a_url) = server();
    let (b, b_url) = server();
    fs::write(b.root().join("f"), "b\n").unwrap();
    // Two links leading to each other.
    cli_ok(&[
        "ln",
        "-s",
        &format!("{b_url}/back"),
        &format!("{a_url}/there"),
    ]);
    cli_ok(&[
        "ln",
        "-s",
        &format!("{a_url}/there"),
        &format!("{b_url}/back"),
    ]);
    let (code, err) = cli_fails(&["cat", &format!("{a_url}/there/x")]);
    assert_eq!(code, 1);
    assert!(err.contains("more than 40 cross-server links"), "{err}");
    let (code, err) = cli_fails(&["ln", &format!("{b_url}/f"), &format!("{a_url}/hard")]);
    assert_eq!(code, 1);
    assert!(
        err.contains("a hard link cannot reach another server"),
        "{err}"
    );
    assert!(fs::symlink_metadata(a.root().join("hard")).is_err());
    // A hard link within one server is a hard link.
    cli_ok(&["ln", &format!("{b_url}/f"), &format!("{b_url}/g")]);
    assert_eq!(fs::read_to_string(b.root().join("g")).unwrap(), "b\n");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(fs::metadata(b.root().join("g")).unwrap().nlink(), 2);
}
