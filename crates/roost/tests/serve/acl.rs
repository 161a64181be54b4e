//! ACLs of `roost serve`: each right granted and denied, wildcards, inheritance, and the ACL
//! store kept out of reach of ordinary file RPCs.

use roost_testkit::serve::{code, Raw, TestServer};
use std::fs;

/// A server where `admin` holds every right on `/` and `alice` holds `alice_rights`.
fn server_with(alice_rights: &str) -> (TestServer, tempfile::TempDir) {
    let keys = tempfile::tempdir().unwrap();
    let mut args = TestServer::with_keys(keys.path(), &["admin", "alice", "bob"]);
    args.extend(["--acl".into(), "hmac:admin=rwldpax".into()]);
    if !alice_rights.is_empty() {
        args.extend(["--acl".into(), format!("hmac:alice={alice_rights}")]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = TestServer::start(&args);
    fs::write(server.root().join("file"), b"data").unwrap();
    fs::create_dir(server.root().join("dir")).unwrap();
    (server, keys)
}

fn putfile(c: &mut Raw, path: &str, data: &[u8]) -> i64 {
    let ack = c.rpc(&format!("putfile {path} 420 {}", data.len()));
    if ack < 0 {
        return ack;
    }
    c.send(data);
    c.result()
}

const DENIED: i32 = libc::EACCES;

#[test]
fn read_right() {
    let (server, _k) = server_with("r");
    let mut c = server.connect_as("alice");
    assert_eq!(c.rpc("getfile /file"), 4);
    c.bytes(4);
    assert_eq!(putfile(&mut c, "/file", b"x"), code(DENIED));
    assert_eq!(c.rpc("getdir /"), code(DENIED));
    assert_eq!(c.rpc("open /file w 0"), code(DENIED));
}

#[test]
fn list_right() {
    let (server, _k) = server_with("l");
    let mut c = server.connect_as("alice");
    assert_eq!(c.rpc("getdir /"), 0);
    let names = c.list();
    assert!(names.contains(&"file".to_string()));
    assert!(
        !names.iter().any(|n| n.starts_with(".__acl")),
        "ACL files are hidden: {names:?}"
    );
    assert_eq!(c.rpc("stat /file"), 0);
    c.line();
    assert_eq!(c.rpc("getfile /file"), code(DENIED));
}

#[test]
fn write_right() {
    let (server, _k) = server_with("w");
    let mut c = server.connect_as("alice");
    assert_eq!(putfile(&mut c, "/file", b"new"), 3);
    assert_eq!(fs::read(server.root().join("file")).unwrap(), b"new");
    assert_eq!(c.rpc("mkdir /made 493"), 0);
    assert_eq!(c.rpc("unlink /file"), code(DENIED));
    assert_eq!(c.rpc("getfile /file"), code(DENIED));
}

#[test]
fn delete_right() {
    let (server, _k) = server_with("d");
    let mut c = server.connect_as("alice");
    assert_eq!(c.rpc("getfile /file"), code(DENIED));
    assert_eq!(c.rpc("unlink /file"), 0);
    assert_eq!(c.rpc("rmdir /dir"), 0);
    assert!(!server.root().join("file").exists());
}

#[test]
fn put_right_creates_new_files_only() {
    let (server, _k) = server_with("p");
    let mut c = server.connect_as("alice");
    assert_eq!(putfile(&mut c, "/fresh", b"hi"), 2);
    assert_eq!(putfile(&mut c, "/file", b"overwrite"), code(libc::EEXIST));
    assert_eq!(
        fs::read(server.root().join("file")).unwrap(),
        b"data",
        "no data lost"
    );
    assert_eq!(c.rpc("open /other wc 420"), 0, "creating by open works too");
    c.line();
    assert_eq!(c.rpc("open /file wc 420"), code(libc::EEXIST));
    assert_eq!(c.rpc("getfile /fresh"), code(DENIED));
    assert_eq!(c.rpc("unlink /fresh"), code(DENIED));
}

#[test]
fn admin_right() {
    let (server, _k) = server_with("a");
    let mut c = server.connect_as("alice");
    assert_eq!(c.rpc("getdir /"), code(DENIED));
    assert_eq!(c.rpc("setacl / hmac:alice rla"), 0);
    assert_eq!(c.rpc("getdir /"), 0, "alice gave herself list");
    c.list();
    let mut b = server.connect_as("bob");
    assert_eq!(b.rpc("setacl / hmac:bob rwlda"), code(DENIED));
}

#[test]
fn execute_right() {
    let (server, _k) = server_with("x");
    let tool = server.root().join("tool");
    fs::write(&tool, b"#!/bin/sh\n").unwrap();
    fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut c = server.connect_as("alice");
    assert_eq!(c.rpc("access /tool 1"), 0);
    assert_eq!(c.rpc("access /tool 4"), code(DENIED));
    let mut b = server.connect_as("bob");
    assert_eq!(b.rpc("access /tool 1"), code(DENIED));
}

#[test]
fn no_acl_at_all_means_nobody_but_the_owner() {
    let keys = tempfile::tempdir().unwrap();
    let args = TestServer::with_keys(keys.path(), &["alice"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let server = TestServer::start(&args);
    let mut c = server.connect_as("alice");
    assert_eq!(c.rpc("getdir /"), code(DENIED));
    let mut a = server.connect();
    assert_eq!(a.rpc("getdir /"), code(DENIED));
}

#[test]
fn wildcard_subjects() {
    let (server, _k) = server_with("");
    let mut admin = server.connect_as("admin");
    assert_eq!(admin.rpc("setacl / hmac:al* rl"), 0);
    let mut c = server.connect_as("alice");
    assert_eq!(c.rpc("getdir /"), 0);
    c.list();
    let mut b = server.connect_as("bob");
    assert_eq!(b.rpc("getdir /"), code(DENIED));
    assert_eq!(admin.rpc("setacl / * l"), 0);
    assert_eq!(b.rpc("getdir /"), 0);
}

#[test]
fn new_directories_inherit_a_copy_of_the_parent_acl() {
    let (server, _k) = server_with("rwl");
    let mut admin = server.connect_as("admin");
    assert_eq!(admin.rpc("mkdir /sub 493"), 0);
    assert_eq!(admin.rpc("getacl /sub"), 0);
    assert_eq!(admin.list(), vec!["hmac:admin rwldpax", "hmac:alice rwlp"]);
    // A later change to the parent does not reach the copy.
    assert_eq!(admin.rpc("setacl / hmac:alice -"), 0);
    let mut c = server.connect_as("alice");
    assert_eq!(c.rpc("getdir /"), code(DENIED));
    assert_eq!(c.rpc("getdir /sub"), 0);
    c.list();
    // A directory made behind the server's back has no ACL file: its parent's governs it.
    fs::create_dir(server.root().join("sub/outside")).unwrap();
    assert_eq!(c.rpc("getdir /sub/outside"), 0);
    c.list();
}

#[test]
fn denials_name_the_missing_right_in_the_log() {
    let (server, _k) = server_with("r");
    let mut c = server.connect_as("alice");
    assert_eq!(c.rpc("mkdir /nope 493"), code(DENIED));
    drop(c);
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(
        server.log_text().contains("needs 'w' on /"),
        "{}",
        server.log_text()
    );
}

#[test]
fn the_acl_store_is_out_of_reach_of_file_rpcs() {
    let (server, _k) = server_with("");
    let mut admin = server.connect_as("admin");
    assert_eq!(admin.rpc("mkdir /sub 493"), 0);
    assert!(server.root().join("sub/.__acl").exists());
    for path in [
        "/.__acl",
        "/sub/.__acl",
        "/sub/../sub/.__acl",
        "/.__acl.tmp",
        "/sub/.__acl/x",
    ] {
        assert_eq!(
            admin.rpc(&format!("getfile {path}")),
            code(DENIED),
            "getfile {path}"
        );
        assert_eq!(
            admin.rpc(&format!("open {path} r 0")),
            code(DENIED),
            "open {path}"
        );
        assert_eq!(
            admin.rpc(&format!("unlink {path}")),
            code(DENIED),
            "unlink {path}"
        );
        assert_eq!(
            admin.rpc(&format!("stat {path}")),
            code(DENIED),
            "stat {path}"
        );
    }
    assert_eq!(
        putfile(&mut admin, "/sub/.__acl", b"hmac:bob rwlda\n"),
        code(DENIED)
    );
    assert_eq!(admin.rpc("rename /file /sub/.__acl"), code(DENIED));
    assert_eq!(admin.rpc("rename /sub/.__acl /stolen"), code(DENIED));
    assert_eq!(admin.rpc("link /sub/.__acl /stolen"), code(DENIED));
    // A symlink pointing at an ACL file leads nowhere.
    assert_eq!(admin.rpc("symlink .__acl /sub/peek"), 0);
    assert_eq!(admin.rpc("getfile /sub/peek"), code(DENIED));
    assert_eq!(admin.rpc("open /sub/peek w 0"), code(DENIED));
    assert_eq!(admin.rpc("truncate /sub/peek 0"), code(DENIED));
    assert_eq!(admin.rpc("getlongdir /sub"), 0);
    let listing = admin.list();
    assert!(
        !listing.iter().any(|l| l.starts_with(".__acl")),
        "{listing:?}"
    );
    let acl = fs::read_to_string(server.root().join("sub/.__acl")).unwrap();
    assert!(!acl.contains("bob"), "ACL untouched: {acl}");
}

#[test]
fn a_symlink_cannot_lend_the_rights_of_its_own_directory() {
    let (server, _k) = server_with("");
    fs::create_dir(server.root().join("private")).unwrap();
    fs::write(server.root().join("private/secret"), b"s3cret").unwrap();
    let mut admin = server.connect_as("admin");
    assert_eq!(admin.rpc("mkdir /public 493"), 0);
    assert_eq!(admin.rpc("setacl /public hmac:alice rwl"), 0);
    assert_eq!(admin.rpc("resetacl /private rl"), 0);
    let mut c = server.connect_as("alice");
    assert_eq!(c.rpc("symlink ../private/secret /public/door"), 0);
    assert_eq!(c.rpc("getfile /public/door"), code(DENIED));
    assert_eq!(c.rpc("open /public/door r 0"), code(DENIED));
    assert_eq!(c.rpc("stat /public/door"), code(DENIED));
}
