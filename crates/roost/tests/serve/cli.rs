//! The client commands (`roost ls`, `cat`, `get`, `put`, ...) against a real `roost serve`.

use roost_testkit::serve::{cli_fails, cli_ok, TestServer};
use std::fs;

#[test]
fn put_get_ls_cat_stat_mv_rm_mkdir_round_trip() {
    let server = TestServer::start(&["--acl", "address:127.0.0.1=rwldpa"]);
    let url = format!("chirp://127.0.0.1:{}", server.port);
    let local = tempfile::tempdir().unwrap();
    let tree = local.path().join("tree");
    fs::create_dir_all(tree.join("sub")).unwrap();
    fs::write(tree.join("a.txt"), b"alpha\n").unwrap();
    fs::write(tree.join("sub/b.bin"), vec![9u8; 200_000]).unwrap();
    std::os::unix::fs::symlink("a.txt", tree.join("link")).unwrap();

    cli_ok(&["put", "-r", tree.to_str().unwrap(), &format!("{url}/tree")]);
    assert_eq!(
        fs::read(server.root().join("tree/sub/b.bin")).unwrap(),
        vec![9u8; 200_000]
    );
    assert_eq!(
        fs::read_link(server.root().join("tree/link"))
            .unwrap()
            .to_str(),
        Some("a.txt")
    );

    let single = local.path().join("single.txt");
    fs::write(&single, b"one file").unwrap();
    cli_ok(&["put", single.to_str().unwrap(), &format!("{url}/tree")]);
    assert_eq!(
        fs::read(server.root().join("tree/single.txt")).unwrap(),
        b"one file",
        "put into a directory keeps the name"
    );

    assert_eq!(
        cli_ok(&["ls", &format!("{url}/tree")]),
        "a.txt\nlink\nsingle.txt\nsub\n"
    );
    let long = cli_ok(&[
        "ls",
        "-l",
        &format!("/chirp/127.0.0.1:{}/tree/sub", server.port),
    ]);
    assert!(
        long.starts_with("-rw") && long.contains("200000") && long.trim_end().ends_with("b.bin"),
        "{long}"
    );
    assert_eq!(
        cli_ok(&[
            "cat",
            &format!("{url}/tree/a.txt"),
            &format!("{url}/tree/single.txt")
        ]),
        "alpha\none file"
    );
    let stat = cli_ok(&["stat", &format!("{url}/tree/sub/b.bin")]);
    assert!(
        stat.contains("size: 200000") && stat.contains("type: file"),
        "{stat}"
    );

    let back = local.path().join("back");
    cli_ok(&["get", "-r", &format!("{url}/tree"), back.to_str().unwrap()]);
    assert_eq!(
        fs::read(back.join("sub/b.bin")).unwrap(),
        vec![9u8; 200_000]
    );
    let one = local.path().join("one.txt");
    cli_ok(&["get", &format!("{url}/tree/a.txt"), one.to_str().unwrap()]);
    assert_eq!(fs::read(&one).unwrap(), b"alpha\n");

    cli_ok(&["mkdir", "-p", &format!("{url}/deep/er/est")]);
    assert!(server.root().join("deep/er/est").is_dir());
    cli_ok(&["mkdir", "-p", &format!("{url}/deep/er")]);
    cli_ok(&["mv", &format!("{url}/deep"), "/moved"]);
    cli_ok(&["mv", &format!("{url}/moved"), &format!("{url}/moved2")]);
    assert!(server.root().join("moved2/er/est").is_dir());
    cli_ok(&["rm", &format!("{url}/tree/a.txt")]);
    cli_ok(&["rm", "-r", &format!("{url}/moved2")]);
    assert!(!server.root().join("moved2").exists() && !server.root().join("tree/a.txt").exists());
}

#[test]
fn acls_and_whoami() {
    let server = TestServer::start(&["--acl", "address:127.0.0.1=rwldpa"]);
    let url = format!("chirp://127.0.0.1:{}", server.port);
    assert_eq!(cli_ok(&["whoami", &url]), "address:127.0.0.1\n");
    cli_ok(&["setacl", &format!("{url}/"), "unix:bob", "rl"]);
    assert_eq!(
        cli_ok(&["getacl", &format!("{url}/")]),
        "address:127.0.0.1 rwldpa\nunix:bob rl\n"
    );
    cli_ok(&["setacl", &format!("{url}/"), "unix:bob", "-"]);
    assert_eq!(
        cli_ok(&["getacl", &format!("{url}/")]),
        "address:127.0.0.1 rwldpa\n"
    );
}

#[test]
fn errors_name_host_path_and_cause_and_exit_non_zero() {
    let server = TestServer::start(&["--acl", "address:127.0.0.1=rl"]);
    let url = format!("chirp://127.0.0.1:{}", server.port);
    let (code, err) = cli_fails(&["mkdir", &format!("{url}/x")]);
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        format!("roost: {url}/x: permission denied (needs 'w' on /)")
    );
    let (code, err) = cli_fails(&["cat", &format!("{url}/missing")]);
    assert_eq!(code, 1);
    assert_eq!(
        err.trim(),
        format!("roost: {url}/missing: no such file or directory")
    );
    let (_, err) = cli_fails(&["ls", "not-a-url"]);
    assert!(
        err.contains("not-a-url") && err.contains("chirp://host"),
        "{err}"
    );
    let (_, err) = cli_fails(&["ls", "chirp://127.0.0.1:1/"]);
    assert!(
        err.contains("127.0.0.1:1") && err.contains("connection refused"),
        "{err}"
    );
    let (code, err) = cli_fails(&["setacl", &format!("{url}/"), "unix:bob", "zz"]);
    assert_eq!(code, 1);
    assert!(err.contains("'zz' is not a set of rights"), "{err}");
    let (code, err) = cli_fails(&["ls", &url, "--auth", "kerberos"]);
    assert_eq!(code, 2, "a bad option is a usage error");
    assert!(err.contains("--auth kerberos"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let (_, err) = cli_fails(&["put", dir.path().to_str().unwrap(), &format!("{url}/d")]);
    assert!(err.contains("is a directory (use put -r)"), "{err}");
}

#[test]
fn an_explicit_key_wins_over_a_broken_environment_and_key_errors_name_the_file() {
    let keys = tempfile::tempdir().unwrap();
    let key_args = TestServer::with_keys(keys.path(), &["alice"]);
    let mut args: Vec<&str> = key_args.iter().map(String::as_str).collect();
    args.extend(["--auth", "hmac", "--acl", "hmac:alice=rl"]);
    let server = TestServer::start(&args);
    let url = format!("chirp://127.0.0.1:{}/", server.port);
    let good = format!("alice={}", keys.path().join("alice.key").display());
    let ls = |key: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_roost"));
        cmd.env("ROOST_HMAC_KEY", "alice=/nonexistent/alice.key")
            .arg("ls");
        if let Some(key) = key {
            cmd.args(["--key", key]);
        }
        cmd.arg(&url).output().unwrap()
    };
    let out = ls(Some(&good));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = ls(None);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/alice.key"), "{err}");
}
