//! The C ABI from C: `tests/c/gread.c`, compiled against `include/roost_group.h` and
//! `libroost_group.so`, reads a group served by real roost servers (run in this process),
//! as member data and as line classes.

use roost_server::acl::Acl;
use roost_server::auth::AuthConfig;
use roost_server::export::Export;
use roost_server::{Limits, Server};
use roost_wire::Rights;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Starts a server exporting `dir` on an ephemeral port; returns `host:port`.
fn serve(dir: &Path) -> String {
    let mut acl = Acl::default();
    let rights = Rights::parse("rl").unwrap();
    acl.set("address:127.0.0.1", rights);
    acl.set("unix:*", rights);
    let export = Export::new(dir, acl).unwrap();
    let addr = "127.0.0.1:0".parse().unwrap();
    let server = Server::bind(addr, export, AuthConfig::default(), Limits::default()).unwrap();
    let local = server.local_addr().unwrap();
    std::thread::spawn(move || server.run());
    local.to_string()
}

/// Builds `libroost_group.so` from this source (cargo does not build a cdylib for a
/// package's tests) in a target directory of its own, so the outer build's lock is not
/// needed, and returns the directory holding it.
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/debug/deps/c_abi-HASH -> target
    let target = exe.ancestors().nth(3).unwrap().join("c-abi-test");
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "--quiet",
            "--offline",
            "-p",
            "roost-group-ffi",
            "--target-dir",
        ])
        .arg(&target)
        .env_remove("CARGO_TARGET_DIR")
        .status()
        .expect("run cargo");
    assert!(status.success(), "building libroost_group.so failed");
    let dir = target.join("debug");
    assert!(dir.join("libroost_group.so").exists());
    dir
}

#[test]
fn a_c_program_reads_a_group_through_the_c_abi() {
    let work = tempfile::tempdir().unwrap();
    let group = work.path().join("group");
    std::fs::create_dir(&group).unwrap();
    let mut keep = Vec::new();
    for i in 0..3 {
        let export = tempfile::tempdir().unwrap();
        let text = format!("member {i}{}\n", "x".repeat(i));
        std::fs::write(export.path().join("data"), text).unwrap();
        let at = serve(export.path());
        std::os::unix::fs::symlink(format!("chirp://{at}/data"), group.join(format!("n{i}")))
            .unwrap();
        keep.push(export);
    }
    // A member that does not exist: the best-effort gopen leaves it out.
    let at = serve(keep[0].path());
    std::os::unix::fs::symlink(format!("chirp://{at}/missing"), group.join("n3")).unwrap();

    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = library_dir();
    let exe = work.path().join("gread");
    let cc = Command::new("cc")
        .args(["-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(manifest.join("tests/c/gread.c"))
        .arg(format!("-I{}", manifest.join("include").display()))
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg("-lroost_group")
        .status()
        .expect("a C compiler (cc)");
    assert!(cc.success());
    let out = Command::new(&exe)
        .arg(&group)
        .env_remove("ROOST_HMAC_KEY")
        .env_remove("ROOST_GROUP_RELAY")
        // cargo points this at its own output directories: only the rpath may decide.
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        stdout,
        "gsize 3\n\
         gindex n2 2\n\
         gread total 30\n\
         gstatus failed 0\n\
         n0 9 member 0\n\
         n1 10 member 1x\n\
         n2 11 member 2xx\n\
         glseek -1 errno EDOM\n\
         glseek max 11\n\
         gbindlines 0\n\
         gpread lines 29\n\
         n1: member 1x\n\
         n2: member 2xx\n\
         bad regex -1 errno EINVAL\n\
         gfstat 0 size0 9\n\
         gclose 0\n\
         after close -1 errno EBADF\n"
    );
}
