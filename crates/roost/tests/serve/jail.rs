//! The export is a jail: `..`, absolute and relative symlinks, chains, `/proc` magic links and
//! symlinks swapped while a client works never lead outside it.

use roost_testkit::serve::{code, TestServer};
use std::fs;
use std::os::unix::fs::symlink;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const ALL: &[&str] = &["--acl", "address:127.0.0.1=rwldpax"];

/// A server whose export sits next to a secret file it must never serve.
fn jailed() -> (TestServer, tempfile::TempDir) {
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret"), b"outside the export").unwrap();
    let server = TestServer::start(ALL);
    fs::write(server.root().join("inside"), b"fine").unwrap();
    (server, outside)
}

#[test]
fn dot_dot_stays_at_the_root() {
    let (server, _outside) = jailed();
    let mut c = server.connect();
    assert_eq!(
        c.rpc("getfile /../../../../etc/hostname"),
        code(libc::ENOENT)
    );
    assert_eq!(c.rpc("getfile /../inside"), 4);
    c.bytes(4);
    assert_eq!(c.rpc("getdir /.."), 0);
    let names = c.list();
    assert!(
        names.contains(&"inside".to_string()),
        "/.. is the root: {names:?}"
    );
}

#[test]
fn absolute_and_relative_symlinks_out_are_refused() {
    let (server, outside) = jailed();
    let secret = outside.path().join("secret");
    symlink(&secret, server.root().join("abs")).unwrap();
    let depth = server.root().components().count();
    let rel = format!(
        "{}{}",
        "../".repeat(depth),
        secret.display().to_string().trim_start_matches('/')
    );
    symlink(&rel, server.root().join("rel")).unwrap();
    symlink("/etc", server.root().join("etc")).unwrap();
    let mut c = server.connect();
    for path in ["/abs", "/rel", "/etc/hostname"] {
        let r = c.rpc(&format!("getfile {path}"));
        assert!(r < 0, "getfile {path} must fail, got {r}");
        assert_eq!(c.rpc(&format!("open {path} r 0")), r, "open {path}");
        assert_eq!(c.rpc(&format!("stat {path}")), r, "stat {path}");
    }
    // Writing through them must fail too, and create nothing outside.
    assert!(c.rpc("open /abs wt 0") < 0);
    assert!(c.rpc("truncate /abs 0") < 0);
    assert!(c.rpc("chmod /abs 511") < 0);
    assert!(c.rpc("mkdir /etc/roost-escape 493") < 0);
    assert_eq!(fs::read(&secret).unwrap(), b"outside the export");
    assert!(!std::path::Path::new("/etc/roost-escape").exists());
    // lstat and readlink see the link itself, which is fine.
    assert_eq!(c.rpc("lstat /abs"), 0);
    c.line();
}

#[test]
fn symlink_chains_inside_work_and_chains_out_do_not() {
    let (server, outside) = jailed();
    fs::create_dir(server.root().join("d")).unwrap();
    symlink("../inside", server.root().join("d/one")).unwrap();
    symlink("one", server.root().join("d/two")).unwrap();
    symlink("d/two", server.root().join("three")).unwrap();
    symlink(outside.path(), server.root().join("d/out")).unwrap();
    symlink("d/out", server.root().join("hop")).unwrap();
    let mut c = server.connect();
    assert_eq!(c.rpc("getfile /three"), 4);
    assert_eq!(c.bytes(4), b"fine");
    assert!(c.rpc("getfile /hop/secret") < 0);
    symlink("loop", server.root().join("loop")).unwrap();
    assert_eq!(c.rpc("getfile /loop"), code(libc::ELOOP));
}

#[test]
fn proc_magic_links_are_refused() {
    let (server, _outside) = jailed();
    symlink("/proc/self/root/etc/hostname", server.root().join("magic")).unwrap();
    symlink("/proc/self/cwd", server.root().join("cwd")).unwrap();
    let mut c = server.connect();
    assert!(c.rpc("getfile /magic") < 0);
    assert!(c.rpc("getdir /cwd") < 0);
    // The server's own /proc is not reachable by name either.
    assert_eq!(
        c.rpc("getfile /proc/self/root/etc/hostname"),
        code(libc::ENOENT)
    );
}

#[test]
fn symlinks_swapped_during_access_never_leak() {
    let (server, outside) = jailed();
    let link = server.root().join("swap");
    symlink("inside", &link).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = stop.clone();
        let link = link.clone();
        let secret = outside.path().join("secret");
        std::thread::spawn(move || {
            let tmp = link.with_extension("tmp");
            let mut flip = false;
            while !stop.load(Ordering::Relaxed) {
                let _ = fs::remove_file(&tmp);
                if flip {
                    symlink("inside", &tmp).unwrap();
                } else {
                    symlink(&secret, &tmp).unwrap();
                }
                fs::rename(&tmp, &link).unwrap();
                flip = !flip;
            }
        })
    };
    let mut c = server.connect();
    let mut served = 0;
    for _ in 0..2000 {
        let n = c.rpc("getfile /swap");
        if n >= 0 {
            assert_eq!(
                c.bytes(n as usize),
                b"fine",
                "only the inside file may ever be served"
            );
            served += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(
        served > 0,
        "the race never hit the inside file; the test proved nothing"
    );
}
