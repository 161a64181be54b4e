//! Name-space and attribute changes (mkdir, rename, link, symlink, unlink, rmdir, chmod,
//! chown, truncate) made by the notification thread: relative to the cwd and to dirfds,
//! through `/proc/self/fd`, with bad dirfds, on unmapped and on mapped directories, with and
//! without notifications — always as the kernel makes them natively. A symlink swapped by
//! rename must be followed to its new target at once (the resolution cache is cleared after
//! the change, not before); one swapped where roost cannot see it, once its cached answer
//! expires.

use roost_testkit::run::*;
use std::process::Command;

/// Works in its cwd and prints what it saw.
const SCRIPT: &str = r#"
import errno, os
def code(f):
    try:
        r = f()
        return "ok" if r is None else r
    except OSError as e:
        return errno.errorcode[e.errno]
os.umask(0o022)
os.mkdir("d")
with open("d/f", "w") as f:
    f.write("hello")
fd = os.open("d", os.O_RDONLY | os.O_DIRECTORY)
filefd = os.open("d/f", os.O_RDONLY)
print("mkdirat", code(lambda: os.mkdir("sub", dir_fd=fd)))
print("renameat", code(lambda: os.rename("sub", "sub2", src_dir_fd=fd, dst_dir_fd=fd)))
print("linkat", code(lambda: os.link("f", "hard", src_dir_fd=fd, dst_dir_fd=fd)))
print("symlinkat", code(lambda: os.symlink("f", "soft", dir_fd=fd)))
print("readlink", os.readlink("d/soft"))
print("via /proc/self/fd", code(lambda: os.mkdir("/proc/self/fd/%d/viaproc" % fd)))
print("symlink via /proc/self/fd", code(lambda: os.symlink("f", "/proc/self/fd/%d/procln" % fd)))
print("bad dirfd", code(lambda: os.mkdir("x", dir_fd=999)), code(lambda: os.unlink("x", dir_fd=999)))
print("file as dirfd", code(lambda: os.mkdir("x", dir_fd=filefd)), code(lambda: os.unlink("x", dir_fd=filefd)))
print("unlink missing", code(lambda: os.unlink("d/nope")))
print("rmdir not empty", code(lambda: os.rmdir("d")))
print("rmdirat", code(lambda: os.rmdir("sub2", dir_fd=fd)))
print("unlinkat", code(lambda: os.unlink("hard", dir_fd=fd)))
os.umask(0o077)
print("private mkdir", code(lambda: os.mkdir("private")), oct(os.stat("private").st_mode & 0o777))
os.umask(0o022)
print("chmod", code(lambda: os.chmod("d/f", 0o640)), oct(os.stat("d/f").st_mode & 0o777))
print("truncate", code(lambda: os.truncate("d/f", 2)), os.stat("d/f").st_size)
print("chown", code(lambda: os.chown("d/f", os.getuid(), os.getgid())))
print("lchown", code(lambda: os.lchown("d/soft", os.getuid(), os.getgid())))
# An atomic symlink swap, read through the link right before and right after.
os.mkdir("a"); os.mkdir("b")
open("a/in-a", "w").close(); open("b/in-b", "w").close()
os.symlink("a", "cur")
print("before swap", os.listdir("cur/"))
os.symlink("b", "cur.new")
os.rename("cur.new", "cur")
print("after swap", os.listdir("cur/"))
os.unlink("cur")
print("after unlink", code(lambda: os.listdir("cur/")))
os.symlink("a", "cur")
print("recreated", os.listdir("cur/"))
# A final "." or ".." is refused by its spelling once what precedes it resolves.
os.mkdir("e")
for p in ["e/.", "e/..", ".", "..", "nope/."]:
    print("rmdir", p, code(lambda: os.rmdir(p)))
for p in ["new/.", "e/.", "e/.."]:
    print("mkdir", p, code(lambda: os.mkdir(p)))
for p in ["d/f/.", "d/f/..", "e/.", "e/.."]:
    print("unlink", p, code(lambda: os.unlink(p)))
for p in ["d/f/.", "d/f/", "e/.", "nope/.", "d/f/../f", "nope/../d", "e/../d/f"]:
    print("stat", p, code(lambda: os.stat(p) and None), code(lambda: os.lstat(p) and None))
print("rename", code(lambda: os.rename("e/.", "e2")), code(lambda: os.rename("d/f", "e/..")))
print("symlink", code(lambda: os.symlink("x", "e/.")), "link", code(lambda: os.link("d/f", "e/..")))
# Nor is a name followed by a slash: a symlink there is not followed (ENOTDIR, EEXIST).
os.symlink("e", "le")
os.symlink("nowhere", "dang")
print("slash", code(lambda: os.rmdir("le/")), code(lambda: os.rename("d", "le/")),
      code(lambda: os.rename("le/", "x")), code(lambda: os.unlink("le/")),
      code(lambda: os.mkdir("dang/")), code(lambda: os.rename("d", "dang/")),
      code(lambda: os.mkdir("new2/")), code(lambda: os.rmdir("new2/")))
print("tree", sorted(os.listdir(".")), sorted(os.listdir("d")))
"#;

fn output(cmd: &mut Command) -> String {
    let o = cmd.output().expect("run");
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{text}");
    text
}

#[test]
fn changes_match_the_kernels_own_everywhere() {
    let native_dir = Tree::new("changes-native");
    let native = output(
        Command::new("python3")
            .args(["-c", SCRIPT])
            .current_dir(&native_dir.root),
    );
    assert!(native.contains("after swap ['in-b']"), "{native}");
    assert!(native.contains("bad dirfd EBADF EBADF"), "{native}");
    assert!(native.contains("symlink via /proc/self/fd ok"), "{native}");
    let elsewhere = Tree::new("changes-elsewhere");
    for mode in ["notify", "ptrace"] {
        let extra: &[&str] = if mode == "ptrace" {
            &["--no-notify"]
        } else {
            &[]
        };
        // Unmapped: the cwd lies outside every mount, so the calls pass (and the mutating
        // ones are made by roost through /proc/TID/cwd and /proc/TID/fd).
        let plain = Tree::new(&format!("changes-plain-{mode}"));
        let mount = format!("/m={}", elsewhere.s());
        let mut cmd = roost();
        cmd.arg("run")
            .args(extra)
            .args(["--mount", &mount, "--", "python3", "-c", SCRIPT])
            .current_dir(&plain.root);
        assert_eq!(output(&mut cmd), native, "{mode}, unmapped");
        // Mapped: the same work inside a mount, every path rewritten.
        let mapped = Tree::new(&format!("changes-mapped-{mode}"));
        let mount = format!("/m={}", mapped.s());
        let script = format!("import os\nos.chdir('/m')\n{SCRIPT}");
        let mut cmd = roost();
        cmd.arg("run")
            .args(extra)
            .args(["--mount", &mount, "--", "python3", "-c", &script]);
        assert_eq!(output(&mut cmd), native, "{mode}, mapped");
        assert!(mapped.path("d/soft").symlink_metadata().is_ok());
    }
}

/// Attribute calls whose buffers roost copies in and out, on absolute paths under the
/// directory named by the first argument (so that on a mount every path is rewritten).
const ATTRS: &str = r#"
import ctypes, errno, os, sys
os.chdir("/")
D = sys.argv[1]
def at(name):
    return D + "/" + name
libc = ctypes.CDLL(None, use_errno=True)
def code(f):
    try:
        r = f()
        return "ok" if r is None else r
    except OSError as e:
        return errno.errorcode[e.errno]
with open(at("f"), "w") as f:
    f.write("x")
os.symlink("f", at("l"))
print("set", code(lambda: os.setxattr(at("f"), "user.colour", b"blue\0green")))
print("get", code(lambda: os.getxattr(at("f"), "user.colour")))
print("get through link", code(lambda: os.getxattr(at("l"), "user.colour")))
print("get link itself", code(lambda: os.getxattr(at("l"), "user.colour", follow_symlinks=False)))
print("list", code(lambda: sorted(os.listxattr(at("f")))))
print("size only", libc.syscall(191, at("f").encode(), b"user.colour", None, 0))
small = ctypes.create_string_buffer(2)
print("too small", libc.syscall(191, at("f").encode(), b"user.colour", small, 2), errno.errorcode[ctypes.get_errno()])
print("long name", code(lambda: os.getxattr(at("f"), "user." + "n" * 300)))
print("remove", code(lambda: os.removexattr(at("f"), "user.colour")), code(lambda: os.listxattr(at("f"))))
print("missing", code(lambda: os.getxattr(at("f"), "user.colour")))
os.utime(at("f"), ns=(1_000_000_123, 2_000_000_456))
st = os.stat(at("f"))
print("utimensat", st.st_atime_ns, st.st_mtime_ns)
tv = (ctypes.c_long * 4)(3, 5, 4, 7)
print("utimes", libc.syscall(235, at("f").encode(), tv), os.stat(at("f")).st_atime_ns, os.stat(at("f")).st_mtime_ns)
ub = (ctypes.c_long * 2)(8, 9)
print("utime", libc.syscall(132, at("f").encode(), ub), os.stat(at("f")).st_atime_ns, os.stat(at("f")).st_mtime_ns)
print("utime missing", libc.syscall(132, at("nope").encode(), ub), errno.errorcode[ctypes.get_errno()])
sv = os.statvfs(at("f"))
print("statfs", sv.f_bsize > 0, sv.f_blocks > 0, sv.f_namemax)
"#;

#[test]
fn attributes_on_mapped_paths_match_native() {
    let native_dir = Tree::new("attrs-native");
    let native = output(Command::new("python3").args(["-c", ATTRS, &native_dir.s()]));
    assert!(native.contains("get b'blue\\x00green'"), "{native}");
    assert!(
        native.contains("utimes 0 3000005000 4000007000"),
        "{native}"
    );
    for extra in [&[][..], &["--no-notify"][..]] {
        let mapped = Tree::new("attrs-mapped");
        let mount = format!("/m={}", mapped.s());
        let mut cmd = roost();
        cmd.arg("run")
            .args(extra)
            .args(["--mount", &mount, "--", "python3", "-c", ATTRS, "/m"]);
        assert_eq!(output(&mut cmd), native, "{extra:?}");
    }
}

#[test]
fn a_symlink_swapped_behind_roosts_back_is_seen_within_a_second() {
    // The swap is made through the physical name, which roost cannot relate to the cached
    // logical one: the cached answer must expire.
    let t = Tree::new("changes-ttl");
    t.write("a/in-a", "");
    t.write("b/in-b", "");
    std::os::unix::fs::symlink("a", t.path("cur")).unwrap();
    let script = format!(
        "ls /m/cur/; ln -s b {p}/cur.new && mv -T {p}/cur.new {p}/cur; sleep 1.2; ls /m/cur/",
        p = t.s()
    );
    for extra in [&[][..], &["--no-notify"][..]] {
        std::fs::remove_file(t.path("cur")).unwrap();
        std::os::unix::fs::symlink("a", t.path("cur")).unwrap();
        let mut cmd = roost();
        cmd.arg("run").args(extra).args([
            "--mount",
            &format!("/m={}", t.s()),
            "--",
            "sh",
            "-c",
            &script,
        ]);
        assert_eq!(output(&mut cmd), "in-a\nin-b\n", "{extra:?}");
    }
}
