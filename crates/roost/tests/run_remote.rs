//! `roost run` over the network: real programs on a tree exported by a real `roost serve`
//! (and cctools' `chirp_server`) on 127.0.0.1, reached as `/chirp/HOST:PORT/...` and
//! through mounts, with notifications and with `--no-notify`. What they see must be what
//! they see of the same tree mounted locally; what they change must land on the server.

use roost_testkit::peer;
use roost_testkit::remote::{Remote, CACHED, MODES};
use roost_testkit::run::*;
use roost_testkit::serve::TestServer;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The calls `--summary` (in `err`) says the run made to `r`'s server, and its line.
fn calls_to<'a>(r: &Remote, err: &'a str) -> (u64, &'a str) {
    let server = format!("chirp://127.0.0.1:{}: ", r.server.port);
    let line = err
        .lines()
        .find(|l| l.starts_with(&server))
        .unwrap_or_else(|| panic!("no line for the server: {err}"));
    let calls = line[server.len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    (calls, line)
}

/// Runs `script` with `/m` mapped to `local` and then to the same tree on the server, in
/// every mode: all must agree.
fn same_as_local(r: &Remote, local: &Path, remote: &str, script: &str) -> String {
    let mut seen: Vec<(String, String)> = Vec::new();
    for mode in MODES {
        for (what, target) in [
            ("local", local.display().to_string()),
            ("remote", remote.to_string()),
        ] {
            let mount = format!("/m={target}");
            let o = r.run(mode, &["--mount", &mount], &["sh", "-c", script]);
            seen.push((
                format!("{what} {mode:?}"),
                format!("{}\nexit {:?}", text(&o), o.status.code()),
            ));
        }
    }
    for (what, out) in &seen[1..] {
        assert_eq!(&seen[0].1, out, "{} vs {what}", seen[0].0);
    }
    seen.remove(0).1
}

/// A tree with files, directories, a symlink, a script and a file over a megabyte.
fn populate(r: &Remote, base: &str) {
    r.write(&format!("{base}/top.txt"), b"top level\nneedle one\n");
    r.write(&format!("{base}/sub/deep/f"), b"deep file\n");
    r.write(&format!("{base}/sub/g.txt"), b"needle two\n");
    let big: Vec<u8> = (0..1_500_000u32).map(|i| (i * 7 % 251) as u8).collect();
    r.write(&format!("{base}/big"), &big);
    let s = r.write(
        &format!("{base}/run.sh"),
        b"#!/bin/sh\necho \"script $0 $*\"\n",
    );
    std::fs::set_permissions(&s, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("top.txt", r.root().join(format!("{base}/link"))).unwrap();
}

#[test]
fn coreutils_and_bash_see_the_remote_tree_as_the_local_one() {
    let r = Remote::start();
    populate(&r, "t");
    let local = r.root().join("t");
    let out = same_as_local(
        &r,
        &local,
        &r.url("/t"),
        "cd /m && ls -lR && find . -printf '%p %y %s %m %l\\n' | sort && grep -rn needle . | sort \
         && cat sub/deep/f link && wc -c big && md5sum big && stat -c '%s %a %F %h' link sub big \
         && readlink link && test -d sub && test -L link && test -x run.sh && ./run.sh a b \
         && cd sub && pwd && ls ../sub/deep && cat ../top.txt | wc -l",
    );
    assert!(out.contains("needle two"), "{out}");
    assert!(out.contains("script ./run.sh a b"), "{out}");
    assert!(out.contains("1500000 big"), "{out}");
    assert!(out.ends_with("exit Some(0)"), "{out}");
}

#[test]
fn the_server_is_reached_with_no_mount_at_all() {
    let r = Remote::start();
    r.write("hello", b"hi there\n");
    for mode in MODES {
        let o = r.run(
            mode,
            &[],
            &[
                "sh",
                "-c",
                &format!("cat {0}/hello && ls /chirp", r.url("")),
            ],
        );
        assert_eq!(
            stdout(&o),
            format!("hi there\n127.0.0.1:{}\n", r.server.port),
            "{mode:?}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn changes_made_under_roost_land_on_the_server() {
    let r = Remote::start();
    for (i, mode) in MODES.iter().enumerate() {
        let dir = format!("c{i}");
        std::fs::create_dir(r.root().join(&dir)).unwrap();
        let mount = format!("/m={}", r.url(&format!("/{dir}")));
        let script = "cd /m && mkdir -p a/b && echo one > a/b/f && echo two >> a/b/f \
             && mv a/b/f a/g && ln -s g a/l && ln a/g a/h && chmod 640 a/g \
             && touch -d @1000000000 a/g && printf 12345 > t && truncate -s 2 t \
             && mkdir gone && rmdir gone && echo x > doomed && rm doomed \
             && cat a/l && stat -c '%a %Y' a/g && cat t";
        let o = r.run(mode, &["--mount", &mount], &["sh", "-c", script]);
        assert_eq!(
            stdout(&o),
            "one\ntwo\n640 1000000000\n12",
            "{mode:?}: {}",
            stderr(&o)
        );
        let on_server = r.root().join(&dir);
        let g = on_server.join("a/g");
        assert_eq!(std::fs::read(&g).unwrap(), b"one\ntwo\n");
        let meta = std::fs::metadata(&g).unwrap();
        assert_eq!((meta.mode() & 0o777, meta.mtime()), (0o640, 1_000_000_000));
        assert_eq!(
            std::fs::read_link(on_server.join("a/l")).unwrap(),
            Path::new("g")
        );
        assert_eq!(
            std::fs::metadata(on_server.join("a/h")).unwrap().ino(),
            meta.ino()
        );
        assert_eq!(std::fs::read(on_server.join("t")).unwrap(), b"12");
        for gone in ["a/b/f", "gone", "doomed"] {
            assert!(!on_server.join(gone).exists(), "{gone} is still there");
        }
    }
}

#[test]
fn a_written_file_is_on_the_server_when_roost_returns() {
    let r = Remote::start();
    let url = r.url("/out.txt");
    // The program's last act is the write; the caller looks right after roost returns.
    let o = r.run(&[], &[], &["sh", "-c", &format!("seq 1 20000 > {url}")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let expected: String = (1..=20000).map(|i| format!("{i}\n")).collect();
    assert_eq!(
        std::fs::read_to_string(r.root().join("out.txt")).unwrap(),
        expected
    );
}

#[test]
fn python_imports_a_package_tree_from_the_server_and_writes_its_bytecode_there() {
    let r = Remote::start();
    r.write("lib/pkg/__init__.py", b"from .core import VALUE\n");
    r.write("lib/pkg/core.py", b"VALUE = sum(range(10))\n");
    r.write("lib/pkg/sub/__init__.py", b"");
    r.write(
        "lib/pkg/sub/leaf.py",
        b"import json\nNAME = json.dumps({'leaf': 1})\n",
    );
    let mount = format!("/py={}", r.url("/lib"));
    let program = "import sys; sys.path.insert(0, '/py'); import pkg, pkg.sub.leaf; \
                   print(pkg.VALUE, pkg.sub.leaf.NAME, pkg.__file__)";
    for mode in MODES {
        let o = r.run(
            mode,
            &["--mount", &mount],
            &python3_writing_bytecode(program),
        );
        assert_eq!(
            stdout(&o),
            "45 {\"leaf\": 1} /py/pkg/__init__.py\n",
            "{mode:?}: {}",
            stderr(&o)
        );
    }
    let cached = std::fs::read_dir(r.root().join("lib/pkg/__pycache__"))
        .unwrap()
        .count();
    assert!(
        cached >= 2,
        "bytecode written back to the server ({cached} files)"
    );
}

#[test]
fn programs_scripts_and_their_interpreters_run_from_the_server() {
    let r = Remote::start();
    let src = r.write("src/hello.c", b"#include <stdio.h>\n#include <unistd.h>\nint main(int c, char **v) {\n  char exe[256] = {0};\n  readlink(\"/proc/self/exe\", exe, sizeof exe - 1);\n  printf(\"%s %s %d\\n\", v[0], exe, c);\n  return 0;\n}\n");
    let bin = r.root().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let st = Command::new("gcc")
        .arg("-o")
        .arg(bin.join("hello"))
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    // A script whose interpreter is itself a script on the server.
    let inner = r.write("bin/inner.sh", b"#!/bin/sh\necho \"inner: $*\"\n");
    let outer = r.write("bin/outer", b"#!/tools/bin/inner.sh -x\nignored\n");
    for p in [&inner, &outer] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mount = format!("/tools={}", r.url(""));
    for mode in MODES {
        let o = r.run(
            mode,
            &["--mount", &mount],
            &[
                "sh",
                "-c",
                "/tools/bin/hello a && cd /tools/bin && ./hello && ./outer y",
            ],
        );
        assert_eq!(
            stdout(&o),
            "/tools/bin/hello /tools/bin/hello 2\n./hello /tools/bin/hello 1\ninner: -x ./outer y\n",
            "{mode:?}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn make_and_gcc_build_in_a_remote_tree_as_natively_and_git_commits_there() {
    let r = Remote::start();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/run_support/cproject");
    let native = tempfile_copy(&src);
    let st = Command::new("cp")
        .arg("-rT")
        .arg(&src)
        .arg(r.root().join("proj"))
        .status()
        .unwrap();
    assert!(st.success());
    let st = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(native.path())
        .status()
        .unwrap();
    assert!(st.success());
    let mount = format!("/w={}", r.url("/proj"));
    let script = "cd /w && make -s -j2 && ./shapes && git init -q . && git add -A \
                  && git -c user.name=t -c user.email=t@t commit -qm first && git log --format=%s \
                  && git status --short | wc -l";
    let o = r.run(&[], &["--mount", &mount], &["sh", "-c", script]);
    assert_eq!(
        stdout(&o),
        "circle 12.566 rect 12.0 sum 491522780\nfirst\n0\n",
        "{}",
        stderr(&o)
    );
    for f in ["shapes", "libshapes.a", "src/main.o", "src/checksum.o"] {
        let a = std::fs::read(native.path().join(f)).unwrap();
        let b = std::fs::read(r.root().join("proj").join(f)).unwrap();
        assert!(a == b, "{f} differs from the native build");
    }
    assert!(r.root().join("proj/.git/HEAD").exists());
}

/// A minimal root file system in `root`: sh, ls, cat and readlink with the libraries and
/// loader `ldd` names, empty /proc, /dev, /sys and /tmp, and an /etc/motd.
fn minimal_root(root: &Path) {
    for program in ["/bin/sh", "/bin/ls", "/bin/cat", "/bin/readlink"] {
        let ldd = Command::new("ldd").arg(program).output().unwrap();
        let libraries = stdout(&ldd);
        let files = std::iter::once(program.to_string()).chain(
            libraries
                .split_whitespace()
                .filter(|w| w.starts_with('/'))
                .map(str::to_string),
        );
        for f in files {
            let to = root.join(f.trim_start_matches('/'));
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(&f, &to).unwrap();
        }
    }
    for d in ["proc", "dev", "sys", "tmp", "etc"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(root.join("etc/motd"), b"served root\n").unwrap();
}

#[test]
fn a_root_file_system_served_by_roost_serve_runs_as_slash() {
    let r = Remote::start();
    minimal_root(&r.root().join("rootfs"));
    let root = format!("/={}", r.url("/rootfs"));
    let local = [
        "--mount",
        "/proc=/proc",
        "--mount",
        "/dev=/dev",
        "--mount",
        "/sys=/sys",
    ];
    for mode in MODES {
        let mut options = vec!["--mount", &root];
        options.extend(local);
        // Not under `timeout`: the served root has no such program.
        let o = roost()
            .arg("run")
            .arg("--cache")
            .arg(r.cache.path())
            .args(mode)
            .args(&options)
            .args(["--", "/bin/sh", "-c"])
            .arg("ls /; cat /etc/motd; readlink /proc/self/exe; echo > /tmp/x && ls /tmp")
            .output()
            .unwrap();
        assert_eq!(
            stdout(&o),
            "bin\ndev\netc\nlib\nlib64\nproc\nsys\ntmp\nserved root\n/bin/readlink\nx\n",
            "{mode:?}: {}",
            stderr(&o)
        );
        std::fs::remove_file(r.root().join("rootfs/tmp/x")).unwrap();
    }
}

/// The zlib sources with the test suite's Makefile, copied to `dir`.
fn zlib_tree(dir: &Path) {
    let st = Command::new("cp")
        .arg("-rT")
        .arg(zlib_sources())
        .arg(dir)
        .status()
        .unwrap();
    assert!(st.success());
    let makefile = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/run_support/zlib.mk");
    std::fs::copy(makefile, dir.join("Makefile")).unwrap();
}

/// zlib built natively in a temporary directory.
fn native_zlib() -> tempfile::TempDir {
    let native = tempfile::tempdir().unwrap();
    zlib_tree(native.path());
    let st = Command::new("make")
        .arg("-s")
        .arg("-j2")
        .arg("-C")
        .arg(native.path())
        .status()
        .unwrap();
    assert!(st.success());
    native
}

#[test]
fn zlib_built_in_a_remote_tree_equals_the_native_build() {
    let native = native_zlib();
    let r = Remote::start();
    for (i, mode) in MODES.iter().enumerate() {
        let dir = r.root().join(format!("z{i}"));
        zlib_tree(&dir);
        let mount = format!("/zsrc={}", r.url(&format!("/z{i}")));
        let o = r.run(
            mode,
            &["--mount", &mount],
            &["make", "-s", "-j2", "-C", "/zsrc"],
        );
        assert!(o.status.success(), "{mode:?}: {}", stderr(&o));
        same_zlib_build(native.path(), &dir);
    }
}

/// A copy of `src` in a fresh temporary directory.
fn tempfile_copy(src: &Path) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let st = Command::new("cp")
        .arg("-rT")
        .arg(src)
        .arg(d.path())
        .status()
        .unwrap();
    assert!(st.success());
    d
}

#[test]
fn the_cache_is_shared_by_runs_and_a_changed_file_is_fetched_again() {
    let r = Remote::start();
    let f = r.write("data", b"version one\n");
    // A file changed in the last two seconds (its ctime) is never kept: let it age.
    std::thread::sleep(Duration::from_millis(3100));
    let cat = ["cat".to_string(), r.url("/data")];
    let argv: Vec<&str> = cat.iter().map(String::as_str).collect();
    let first = r.run(CACHED, &["-v"], &argv);
    assert_eq!(stdout(&first), "version one\n");
    assert!(stderr(&first).contains("cache miss"), "{}", stderr(&first));
    let second = r.run(&["--no-notify"], &["-v", "--chirp-mode", "cached"], &argv);
    assert_eq!(stdout(&second), "version one\n");
    assert!(stderr(&second).contains("cache hit"), "{}", stderr(&second));
    // Changed on the server, same size: a new mtime is a new version.
    std::fs::write(&f, b"version two\n").unwrap();
    let then = std::time::SystemTime::now() - Duration::from_secs(30);
    std::fs::File::options()
        .write(true)
        .open(&f)
        .unwrap()
        .set_modified(then)
        .unwrap();
    let third = r.run(CACHED, &["-v"], &argv);
    assert_eq!(stdout(&third), "version two\n", "{}", stderr(&third));
    assert!(
        stderr(&third).contains("changed just now"),
        "{}",
        stderr(&third)
    );
    // Nothing of the runs' mirrors stays behind (each agent removes its own as it ends,
    // just after roost returns).
    let agents = r.cache.path().join("agents");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_dir(&agents).unwrap().count() > 0 {
        assert!(
            Instant::now() < deadline,
            "a mirror stays in {}",
            agents.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A file rewritten in place on the server with its mtime set back keeps its inode, size
/// and mtime: the next run checks the cached copy's content digest and fetches it again.
#[test]
fn a_cached_copy_whose_content_changed_under_the_same_version_is_fetched_again() {
    let r = Remote::start();
    let f = r.write("same", b"content one\n");
    let mtime = std::fs::metadata(&f).unwrap().modified().unwrap();
    // A file changed in the last two seconds (its ctime) is never kept: let it age.
    std::thread::sleep(Duration::from_millis(3100));
    let cat = ["cat".to_string(), r.url("/same")];
    let argv: Vec<&str> = cat.iter().map(String::as_str).collect();
    let first = r.run(CACHED, &["-v"], &argv);
    assert_eq!(stdout(&first), "content one\n", "{}", stderr(&first));
    assert!(stderr(&first).contains("cache miss"), "{}", stderr(&first));
    let ino = std::fs::metadata(&f).unwrap().ino();
    {
        use std::io::Write;
        let mut w = std::fs::File::options().write(true).open(&f).unwrap();
        w.write_all(b"content two\n").unwrap();
        w.set_modified(mtime).unwrap();
    }
    assert_eq!(std::fs::metadata(&f).unwrap().ino(), ino);
    std::thread::sleep(Duration::from_millis(3100));
    for run in 0..2 {
        let again = r.run(CACHED, &["-v"], &argv);
        assert_eq!(
            stdout(&again),
            "content two\n",
            "run {run}: {}",
            stderr(&again)
        );
        // The stale copy is said once; the fresh one is then kept and found.
        let said = stderr(&again).contains("differs from the server's content");
        assert_eq!(said, run == 0, "run {run}: {}", stderr(&again));
    }
    // A chmod changes the file's ctime, not its content: the copy is checked by digest
    // and kept, not fetched again.
    let mode = std::fs::metadata(&f).unwrap().permissions().mode();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode ^ 0o004)).unwrap();
    std::thread::sleep(Duration::from_millis(3100));
    let after_chmod = r.run(CACHED, &["-v"], &argv);
    let err = stderr(&after_chmod);
    assert_eq!(stdout(&after_chmod), "content two\n", "{err}");
    assert!(
        err.contains("cache hit") && !err.contains("cache miss"),
        "{err}"
    );
}

#[test]
fn calls_roost_cannot_make_remotely_fail_cleanly() {
    let r = Remote::start();
    r.write("d/x", b"x");
    let mount = format!("/m={}", r.url("/d"));
    // (FIFOs and sockets are made: run_remote_files.)
    let program = "import os, errno\n\
        def err(f):\n    try:\n        f(); return 'ok'\n    except OSError as e:\n        return errno.errorcode[e.errno]\n\
        print(err(lambda: os.open('/m', os.O_TMPFILE | os.O_WRONLY)))\n\
        print(err(lambda: os.mknod('/m/dev', 0o600 | 0o020000, os.makedev(1, 3))))\n\
        print(err(lambda: os.open('/m/nope', os.O_RDONLY)))\n\
        print(err(lambda: os.mkdir('/m')))\n\
        print(err(lambda: os.rename('/m/x', '/tmp/elsewhere')))\n";
    for mode in MODES {
        let o = r.run(mode, &["--mount", &mount], &["python3", "-c", program]);
        assert_eq!(
            stdout(&o),
            "ENOTSUP\nEPERM\nENOENT\nEEXIST\nEXDEV\n",
            "{mode:?}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn an_unreachable_server_fails_at_once_with_one_clear_line() {
    let unused = free_port();
    let cache = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let o = roost()
        .args(["run", "--cache"])
        .arg(cache.path())
        .args(["--", "sh", "-c"])
        .arg(format!(
            "cat /chirp/127.0.0.1:{unused}/x; ls /chirp/127.0.0.1:{unused}/"
        ))
        .output()
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(20));
    let err = stderr(&o);
    assert!(err.contains("Connection refused"), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.starts_with("roost:")).count(),
        1,
        "said once: {err}"
    );
    assert!(!o.status.success());
}

#[test]
fn refused_authentication_and_acls_give_eacces() {
    // The server takes hmac only; roost offers no key.
    let keyed = TestServer::start(&["--auth", "hmac"]);
    let cache = tempfile::tempdir().unwrap();
    let o = roost()
        .args(["run", "--cache"])
        .arg(cache.path())
        .args(["--", "cat"])
        .arg(format!("/chirp/127.0.0.1:{}/x", keyed.port))
        .output()
        .unwrap();
    assert!(stderr(&o).contains("Permission denied"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("chirp://127.0.0.1:{}", keyed.port)),
        "{}",
        stderr(&o)
    );
    // Read and list only: a write is refused, and nothing appears on the server.
    let read_only = TestServer::start(&["--auth", "address", "--acl", "address:127.0.0.1=rl"]);
    std::fs::write(read_only.root().join("f"), b"kept\n").unwrap();
    for mode in MODES {
        let o = roost()
            .args(["run", "--cache"])
            .arg(cache.path())
            .args(mode)
            .args(["--", "sh", "-c"])
            .arg(format!(
                "cat /chirp/127.0.0.1:{0}/f; echo new > /chirp/127.0.0.1:{0}/g; mkdir /chirp/127.0.0.1:{0}/d",
                read_only.port
            ))
            .output()
            .unwrap();
        assert!(stdout(&o).starts_with("kept\n"), "{}", text(&o));
        assert_eq!(
            stderr(&o).matches("Permission denied").count(),
            2,
            "{}",
            text(&o)
        );
    }
    assert!(!read_only.root().join("g").exists() && !read_only.root().join("d").exists());
}

#[test]
fn a_malformed_chirp_target_or_mode_is_refused() {
    let o = run(&["--mount", "/d=chirp://no:port:here/x", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = run(&["--chirp-mode", "sometimes", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("direct"), "{}", stderr(&o));
}

/// Every descriptor call a direct-mode file serves, against the same program on a local
/// directory: reads and writes at offsets, vectors, O_APPEND, lseek (SEEK_END, SEEK_DATA),
/// fstat, ftruncate, fcntl flags, dup/dup2 (a low copy is a local copy, written back),
/// fsync, fchmod, futimens, mmap (private works, shared writable is ENODEV), O_EXCL.
const DESCRIPTOR_CALLS: &str = r#"
import errno, mmap, os, stat
out = []
fd = os.open("/m/f", os.O_RDWR | os.O_CREAT, 0o644)
out.append(os.readlink("/proc/self/fd/%d" % fd))
out.append(os.write(fd, b"hello world\n"))
out.append(os.pwrite(fd, b"HELLO", 0))
out.append(os.lseek(fd, 0, os.SEEK_CUR))
os.lseek(fd, 0, os.SEEK_SET)
out.append(os.read(fd, 5))
out.append(os.pread(fd, 5, 6))
out.append(os.writev(fd, [b"-a", b"-b"]))
os.lseek(fd, 0, os.SEEK_SET)
a, b = bytearray(3), bytearray(4)
out.append((os.readv(fd, [a, b]), bytes(a), bytes(b)))
out.append(os.lseek(fd, 0, os.SEEK_END))
out.append(os.lseek(fd, 2, os.SEEK_DATA))
try:
    os.lseek(fd, 100, os.SEEK_DATA)
except OSError as e:
    out.append(errno.errorcode[e.errno])
st = os.fstat(fd)
out.append((st.st_size, stat.S_ISREG(st.st_mode)))
os.ftruncate(fd, 4)
out.append(os.fstat(fd).st_size)
out.append(os.get_blocking(fd))
flags = __import__("fcntl").fcntl(fd, __import__("fcntl").F_GETFL)
out.append(flags & os.O_ACCMODE == os.O_RDWR)
os.fsync(fd)
os.fchmod(fd, 0o600)
out.append(oct(os.stat("/m/f").st_mode & 0o777))
os.utime(fd, (1000000000, 1000000000))
out.append(os.stat("/m/f").st_mtime)
d = os.dup(fd)
os.lseek(fd, 1, os.SEEK_SET)
out.append(os.read(d, 2))
os.close(d)
os.dup2(fd, 7)
os.lseek(7, 0, os.SEEK_END)
os.write(7, b"+copy")
os.close(7)
try:
    mmap.mmap(fd, 4)
except OSError as e:
    out.append(errno.errorcode[e.errno])
m = mmap.mmap(fd, 4, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
out.append(m[:])
os.close(fd)
out.append(open("/m/f", "rb").read())
a = os.open("/m/log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
os.write(a, b"one\n")
os.lseek(a, 0, os.SEEK_SET)
os.write(a, b"two\n")
os.close(a)
out.append(open("/m/log").read())
try:
    os.open("/m/log", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
except OSError as e:
    out.append(errno.errorcode[e.errno])
try:
    os.read(os.open("/m/log", os.O_WRONLY), 1)
except OSError as e:
    out.append(errno.errorcode[e.errno])
# A trailing slash names a directory only.
for path, flags in (("/m/new/", os.O_WRONLY | os.O_CREAT), ("/m/new/", os.O_RDONLY), ("/m/log/", os.O_RDONLY)):
    try:
        os.close(os.open(path, flags))
    except OSError as e:
        out.append(errno.errorcode[e.errno])
print(out)
"#;

#[test]
fn descriptor_calls_on_direct_mode_files_behave_as_on_local_files() {
    let r = Remote::start();
    std::fs::create_dir(r.root().join("d")).unwrap();
    let local = tempfile::tempdir().unwrap();
    let run = |target: String, mode: &[&str]| {
        let mount = format!("/m={target}");
        let o = r.run(
            mode,
            &["--mount", &mount],
            &["python3", "-c", DESCRIPTOR_CALLS],
        );
        text(&o)
    };
    let native = run(local.path().display().to_string(), &[]);
    assert!(native.contains("b'HELL'"), "{native}");
    // (Cached mode differs by design: a change through an open copy is seen by name only
    // once the copy is closed, and Python's mmap keeps a copy open.)
    let remote = run(r.url("/d"), &[]);
    let (said, printed): (Vec<&str>, Vec<&str>) = remote
        .lines()
        .partition(|l| l.contains("shared writable mapping"));
    assert_eq!(said.len(), 1, "{remote}");
    // A local file maps shared and writable; a direct-mode file cannot.
    let expected = native.replacen("b'HELL'", "'ENODEV', b'HELL'", 1);
    assert_eq!(printed.join("\n") + "\n", expected);
}

/// Python's shutil (sendfile, then copy_file_range) and cp (copy_file_range) copy
/// direct-mode files whole, in and out (run_remote_files compares each call with a local
/// file's).
#[test]
fn copies_of_direct_mode_files_by_shutil_and_cp_come_out_whole() {
    let r = Remote::start();
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    r.write("src", &data);
    let local = tempfile::tempdir().unwrap();
    let program = r#"
import shutil, sys
shutil.copyfile("/m/src", sys.argv[1] + "/via-shutil")
shutil.copyfile(sys.argv[1] + "/via-shutil", "/m/back")
shutil.copyfile("/m/src", "/m/remote-to-remote")
"#;
    let mount = format!("/m={}", r.url(""));
    let dir = local.path().to_str().unwrap();
    let o = r.run(&[], &["--mount", &mount], &["python3", "-c", program, dir]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        std::fs::read(local.path().join("via-shutil")).unwrap(),
        data
    );
    assert_eq!(std::fs::read(r.root().join("back")).unwrap(), data);
    assert_eq!(
        std::fs::read(r.root().join("remote-to-remote")).unwrap(),
        data
    );
    let o = r.run(&[], &["--mount", &mount], &["cp", "/m/src", "/m/by-cp"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(std::fs::read(r.root().join("by-cp")).unwrap(), data);
}

const LOCKS: &str = r#"
import errno, fcntl, os, signal, sys, time
f = sys.argv[1]
out = []
a = os.open(f, os.O_RDWR)
b = os.open(f, os.O_RDWR)
fcntl.flock(a, fcntl.LOCK_EX)
try:
    fcntl.flock(b, fcntl.LOCK_EX | fcntl.LOCK_NB)
    out.append("second open locked too")
except OSError as e:
    out.append("second open " + errno.errorcode[e.errno])
fcntl.flock(a, fcntl.LOCK_UN)
fcntl.flock(b, fcntl.LOCK_EX | fcntl.LOCK_NB)
fcntl.flock(b, fcntl.LOCK_UN)
fcntl.lockf(a, fcntl.LOCK_EX, 10, 0)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    c = os.open(f, os.O_RDWR)
    res = []
    try:
        fcntl.lockf(c, fcntl.LOCK_EX | fcntl.LOCK_NB, 5, 5)
        res.append("overlap locked")
    except OSError as e:
        res.append("overlap " + errno.errorcode[e.errno])
    fcntl.lockf(c, fcntl.LOCK_EX | fcntl.LOCK_NB, 5, 20)
    res.append("disjoint locked")
    t = time.time()
    fcntl.lockf(c, fcntl.LOCK_EX, 5, 5)
    res.append("waited" if time.time() - t > 0.2 else "did not wait")
    def alarm(*_):
        raise InterruptedError
    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(1)
    try:
        fcntl.flock(os.open(f, os.O_RDONLY), fcntl.LOCK_EX)
        res.append("not interrupted")
    except InterruptedError:
        res.append("interrupted")
    os.write(w, " ".join(res).encode())
    os._exit(0)
time.sleep(0.5)
fcntl.lockf(a, fcntl.LOCK_UN, 10, 0)
fcntl.flock(b, fcntl.LOCK_EX)
os.waitpid(pid, 0)
os.close(w)
out.append(os.read(r, 200).decode())
print(out)
"#;

/// flock and fcntl record locks on direct-mode files lock against other opens of the file,
/// in the same process, another process, and another run on this host; a waiting lock
/// is released when the holder unlocks and interrupted by a signal.
#[test]
fn advisory_locks_on_direct_mode_files_hold_between_opens_processes_and_runs() {
    let r = Remote::start();
    r.write("f", b"locked\n");
    let url = r.url("/f");
    let o = r.run(&[], &[], &["python3", "-c", LOCKS, &url]);
    assert_eq!(
        stdout(&o).trim(),
        "['second open EAGAIN', 'overlap EAGAIN disjoint locked waited interrupted']",
        "{}",
        stderr(&o)
    );
    // Another run, sharing the cache directory (and so the lock objects): flock(1) holds
    // the file in one, the other cannot take it until the first lets go.
    let marker = r.cache.path().join("held");
    let holder = format!("flock -x {url} -c 'touch {}; sleep 2'", marker.display());
    let mut first = roost()
        .arg("run")
        .arg("--cache")
        .arg(r.cache.path())
        .args(["--", "sh", "-c", &holder])
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !marker.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the first run never locked"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let busy = r.run(&[], &[], &["flock", "-n", &url, "true"]);
    assert_eq!(busy.status.code(), Some(1), "{}", stderr(&busy));
    assert!(first.wait().unwrap().success());
    let free = r.run(&[], &[], &["flock", "-n", &url, "true"]);
    assert!(free.status.success(), "{}", stderr(&free));
}

/// A file's size right after the program closed it is what it wrote, in every mode (in
/// cached mode the stat waits for the write-back; it once answered from the attributes
/// learnt when the file was created).
#[test]
fn a_stat_right_after_close_sees_what_was_written() {
    let r = Remote::start();
    std::fs::create_dir(r.root().join("d")).unwrap();
    let mount = format!("/m={}", r.url("/d"));
    let program = "import os\nfor size in (10, 1 << 20, 10):\n    with open('/m/f', 'wb') as f:\n        f.write(b'x' * size)\n    assert os.path.getsize('/m/f') == size, (size, os.path.getsize('/m/f'))\n    os.unlink('/m/f')\nprint('ok')";
    for mode in MODES {
        let o = r.run(mode, &["--mount", &mount], &["python3", "-c", program]);
        assert_eq!(stdout(&o), "ok\n", "{mode:?}: {}", stderr(&o));
    }
}

/// Many direct-mode files open at once, some closed and others opened in their place:
/// each descriptor has its own number and reads its own file, and they share a few
/// connections to the server (counted in /proc/net/tcp while all 60 are open) instead of
/// holding one each.
#[test]
fn many_direct_mode_files_open_at_once_each_read_their_own() {
    let r = Remote::start();
    for i in 0..40 {
        r.write(&format!("d/f{i}"), format!("file {i}\n").as_bytes());
    }
    let mount = format!("/m={}", r.url("/d"));
    let program = r#"import os
fds = {}
for round in range(3):
    for i in range(40):
        fds.setdefault(i, []).append(os.open(f'/m/f{i}', os.O_RDONLY))
    for i in range(0, 40, 2):
        os.close(fds[i].pop())
numbers = [fd for l in fds.values() for fd in l]
assert len(numbers) == len(set(numbers)) == 60, numbers
for i, l in fds.items():
    for fd in l:
        assert os.pread(fd, 64, 0) == f'file {i}\n'.encode(), (i, fd)
port = int(os.environ['PORT'])
connections = 0
for line in open('/proc/net/tcp').read().splitlines()[1:]:
    remote, state = line.split()[2], line.split()[3]
    connections += int(remote.split(':')[1], 16) == port and state == '01'
print(len(numbers), 'ok', connections)"#;
    let port = r.server.port.to_string();
    let o = run_with_cache(
        r.cache.path(),
        &[],
        &["--mount", &mount],
        &["python3", "-c", program],
    )
    .env("PORT", &port)
    .output()
    .unwrap();
    let out = stdout(&o);
    let words: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(words[..2], ["60", "ok"], "{out}{}", stderr(&o));
    let connections: usize = words[2].parse().unwrap();
    // Up to four lines for the open files, and the idle ones path calls use.
    assert!(
        (1..=8).contains(&connections),
        "{connections} connections for 60 open files"
    );
}

/// A number of the descriptor range that held one direct-mode file and then holds another
/// (the kernel's `dup2` onto it while the first lives on in a copy; a close and a new
/// open) reads the file it holds now, in the process and in a child it forks: roost
/// remembers which file it found at a number, and must check before it trusts that.
#[test]
fn a_descriptor_number_that_changes_file_reads_the_file_it_holds_now() {
    let r = Remote::start();
    for name in ["a", "b", "c"] {
        r.write(&format!("d/{name}"), format!("file {name}\n").as_bytes());
    }
    let mount = format!("/m={}", r.url("/d"));
    let program = r#"import os
def read(fd):
    return os.pread(fd, 64, 0).decode().strip()
x = os.open('/m/a', os.O_RDONLY)
assert read(x) == 'file a'
z = os.dup(x)
y = os.open('/m/b', os.O_RDONLY)
assert read(y) == 'file b'
os.dup2(y, x)
assert (read(x), read(z), read(y)) == ('file b', 'file a', 'file b')
pid = os.fork()
if pid == 0:
    ok = (read(x), read(z)) == ('file b', 'file a')
    os._exit(0 if ok else 1)
assert os.waitpid(pid, 0)[1] == 0, 'the child read another file'
os.close(x); os.close(y); os.close(z)
# New opens take the numbers of the range from the last one down, then from its top:
# enough of them come back to the numbers x, y and z had.
fds = [os.open('/m/c', os.O_RDONLY) for _ in range(255)]
assert {x, y, z} & set(fds), (x, y, z, fds)
assert all(read(fd) == 'file c' for fd in fds)
import resource
print('ok', resource.getrlimit(resource.RLIMIT_NOFILE)[0])"#;
    // roost starts with a soft descriptor limit under its hard one (where there is room),
    // lifts its own, and the program keeps the one it was started with.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
        0
    );
    let soft = limit.rlim_max.min(1100);
    let mut command = run_with_cache(
        r.cache.path(),
        &[],
        &["--mount", &mount],
        &["python3", "-c", program],
    );
    // SAFETY: only setrlimit between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, move || {
            let lowered = libc::rlimit {
                rlim_cur: soft,
                rlim_max: limit.rlim_max,
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &lowered);
            Ok(())
        });
    }
    let o = command.output().unwrap();
    assert_eq!(stdout(&o), format!("ok {soft}\n"), "{}", stderr(&o));
}

/// Two programs on one remote file in direct mode see each other's writes while both
/// have it open (each writes its half, then reads the whole); in cached mode each sees
/// only its own until it closes, which is what sets direct mode apart.
#[test]
fn two_runs_writing_one_direct_mode_file_see_each_others_writes() {
    let r = Remote::start();
    r.write("shared", &[b'.'; 8]);
    let sync = tempfile::tempdir().unwrap();
    let program = |me: usize| {
        format!(
            r#"
import os, time
fd = os.open("/m/shared", os.O_RDWR)
os.pwrite(fd, b"{me}" * 4, {me} * 4)
open("{dir}/wrote{me}", "w").close()
deadline = time.time() + 30
while not os.path.exists("{dir}/wrote{other}") and time.time() < deadline:
    time.sleep(0.02)
print(os.pread(fd, 8, 0).decode())
"#,
            dir = sync.path().display(),
            other = 1 - me
        )
    };
    let mount = format!("/m={}", r.url(""));
    let runs: Vec<_> = (0..2)
        .map(|me| {
            roost()
                .arg("run")
                .arg("--cache")
                .arg(r.cache.path())
                .args(["--mount", &mount, "--", "python3", "-c", &program(me)])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for run in runs {
        let o = run.wait_with_output().unwrap();
        assert_eq!(stdout(&o), "00001111\n", "{}", stderr(&o));
    }
    assert_eq!(std::fs::read(r.root().join("shared")).unwrap(), b"00001111");
}

/// An open direct-mode descriptor reads what another client wrote a moment ago (no
/// attribute TTL stands between), and one whose file was replaced on the server fails
/// with ESTALE after a reconnect while the program's other descriptors carry on.
#[test]
fn a_direct_descriptor_sees_changes_at_once_and_goes_stale_when_its_file_is_replaced() {
    let export = tempfile::tempdir().unwrap();
    let port = free_port();
    std::fs::write(export.path().join("kept"), b"kept one\n").unwrap();
    std::fs::write(export.path().join("swapped"), b"old\n").unwrap();
    let sync = tempfile::tempdir().unwrap();
    let server = FixedServer::start(export.path(), port);
    let program = format!(
        r#"
import errno, os, time
kept = os.open("/m/kept", os.O_RDONLY)
swapped = os.open("/m/swapped", os.O_RDONLY)
print(os.pread(kept, 20, 0).decode(), end="", flush=True)
open("{dir}/opened", "w").close()
deadline = time.time() + 30
while not os.path.exists("{dir}/changed") and time.time() < deadline:
    time.sleep(0.02)
print(os.pread(kept, 20, 0).decode(), end="")
try:
    os.pread(swapped, 20, 0)
    print("swapped: still read")
except OSError as e:
    print("swapped:", errno.errorcode[e.errno])
print(os.pread(kept, 20, 0).decode(), end="")
"#,
        dir = sync.path().display()
    );
    let cache = tempfile::tempdir().unwrap();
    // The colon-free name keeps the guarantee (one server, whatever its spelling).
    let mount = format!("/m=/chirp/127.0.0.1+{port}/");
    let child = roost()
        .args(["run", "--io-timeout", "1", "--timeout", "30", "--cache"])
        .arg(cache.path())
        .args(["--mount", &mount, "--", "python3", "-c", &program])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !sync.path().join("opened").exists() {
        assert!(
            Instant::now() < deadline,
            "the program never opened its files"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Rewritten in place (same inode), then the server restarts and `swapped` is replaced
    // by another file under the same name.
    std::fs::write(export.path().join("kept"), b"kept two\n").unwrap();
    drop(server);
    std::fs::write(export.path().join("swapped.new"), b"new\n").unwrap();
    std::fs::rename(
        export.path().join("swapped.new"),
        export.path().join("swapped"),
    )
    .unwrap();
    let _server = FixedServer::start(export.path(), port);
    std::fs::write(sync.path().join("changed"), b"").unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        stdout(&o),
        "kept one\nkept two\nswapped: ESTALE\nkept two\n",
        "{}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("stale"), "{}", stderr(&o));
}

/// A `roost serve` on a fixed port over `dir`, stopped on drop.
struct FixedServer(std::process::Child);

impl FixedServer {
    fn start(dir: &Path, port: u16) -> FixedServer {
        let child = roost()
            .arg("serve")
            .arg(dir)
            .args([
                "--listen",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--log-level",
                "error",
            ])
            .args(["--auth", "address", "--acl", "address:127.0.0.1=rwldpa"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut child = child;
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert!(line.contains("listening"), "{line}");
        FixedServer(child)
    }
}

impl Drop for FixedServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: a plain kill of a child this test started.
    unsafe { libc::kill(pid as i32, sig) };
}

/// A program appending numbered records to a remote file while the server is killed and
/// restarted, then stopped past the io-timeout and continued: every record ends up there
/// exactly once, in order.
#[test]
fn records_appended_through_a_restart_and_a_stall_arrive_exactly_once() {
    let export = tempfile::tempdir().unwrap();
    let port = free_port();
    let cache = tempfile::tempdir().unwrap();
    let server = FixedServer::start(export.path(), port);
    // Half the records through a shell's `>>` (a copy of the file, written back when
    // closed), half through one descriptor held open across it all (direct mode: each
    // record a write at the end learnt first).
    let script = format!(
        "for i in $(seq 1 30); do echo record $i >> /chirp/127.0.0.1:{port}/log || exit 1; sleep 0.05; done; \
         python3 -c 'import os, time
fd = os.open(\"/chirp/127.0.0.1:{port}/log\", os.O_WRONLY | os.O_APPEND)
for i in range(31, 61):
    os.write(fd, b\"record %d\\n\" % i)
    time.sleep(0.05)'"
    );
    let mut program = roost()
        .args(["run", "--io-timeout", "1", "--timeout", "60", "--cache"])
        .arg(cache.path())
        .args(["--", "sh", "-c", &script])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Each half meets a restart and a stall.
    let mut server = server;
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(600));
        drop(server); // killed mid-run
        std::thread::sleep(Duration::from_millis(1500));
        server = FixedServer::start(export.path(), port);
        std::thread::sleep(Duration::from_millis(600));
        signal(server.0.id(), libc::SIGSTOP);
        std::thread::sleep(Duration::from_millis(2500));
        signal(server.0.id(), libc::SIGCONT);
    }
    let status = program.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut program.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    let expected: String = (1..=60).map(|i| format!("record {i}\n")).collect();
    assert_eq!(
        std::fs::read_to_string(export.path().join("log")).unwrap(),
        expected,
        "{err}"
    );
    assert!(err.contains("reconnecting"), "{err}");
    assert!(err.contains("reconnected"), "{err}");
}

/// Two writers appending to one file at once — one through a descriptor held open, one
/// with a shell's `>>` — in each mode, while the server is killed and restarted, then
/// stopped past the io-timeout and continued: each writer's records all arrive exactly
/// once, in its order (an append is made at the server, so a lost one is settled before
/// it is sent again).
#[test]
fn records_of_two_writers_appended_through_a_restart_and_a_stall_arrive_exactly_once() {
    let export = tempfile::tempdir().unwrap();
    let port = free_port();
    let server = FixedServer::start(export.path(), port);
    let runs: Vec<_> = ["direct", "cached"]
        .into_iter()
        .map(|mode| {
            let log = format!("/chirp/127.0.0.1:{port}/log-{mode}");
            let script = format!(
                "python3 -c 'import os, time
fd = os.open(\"{log}\", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for i in range(1, 61):
    os.write(fd, b\"A %d\\n\" % i)
    time.sleep(0.05)' & a=$!; \
                 for i in $(seq 1 60); do echo B $i >> {log} || exit 1; sleep 0.05; done; wait $a"
            );
            let cache = tempfile::tempdir().unwrap();
            let child = roost()
                .args([
                    "run",
                    "--io-timeout",
                    "1",
                    "--timeout",
                    "60",
                    "--chirp-mode",
                    mode,
                ])
                .arg("--cache")
                .arg(cache.path())
                .args(["--", "sh", "-c", &script])
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (mode, child, cache)
        })
        .collect();
    let mut server = server;
    for _ in 0..2 {
        std::thread::sleep(Duration::from_millis(600));
        drop(server);
        std::thread::sleep(Duration::from_millis(1500));
        server = FixedServer::start(export.path(), port);
        std::thread::sleep(Duration::from_millis(600));
        signal(server.0.id(), libc::SIGSTOP);
        std::thread::sleep(Duration::from_millis(2500));
        signal(server.0.id(), libc::SIGCONT);
    }
    for (mode, program, _cache) in runs {
        let out = program.wait_with_output().unwrap();
        let err = stderr(&out);
        assert!(out.status.success(), "{mode}: {err}");
        let text = std::fs::read_to_string(export.path().join(format!("log-{mode}"))).unwrap();
        for writer in ["A", "B"] {
            let numbers: Vec<usize> = text
                .lines()
                .filter_map(|l| l.strip_prefix(writer)?.trim().parse().ok())
                .collect();
            assert_eq!(
                numbers,
                (1..=60).collect::<Vec<_>>(),
                "{mode} mode, writer {writer}:\n{text}\n{err}"
            );
        }
        assert_eq!(text.lines().count(), 120, "{mode}: {text}");
        assert!(err.contains("reconnected"), "{mode}: {err}");
    }
}

/// A call waiting on a stopped server holds up only its caller: the run's other processes
/// go on (a stat and a listing of a local mapping, a file written there) while it waits,
/// and the waiting call completes once the server is continued.
#[test]
fn a_call_waiting_on_a_stopped_server_holds_up_only_its_caller() {
    let export = tempfile::tempdir().unwrap();
    std::fs::write(export.path().join("f"), "from the server\n").unwrap();
    let local = tempfile::tempdir().unwrap();
    let port = free_port();
    let server = FixedServer::start(export.path(), port);
    signal(server.0.id(), libc::SIGSTOP);
    let script = format!(
        "cat /chirp/127.0.0.1:{port}/f > /m/out & sleep 0.5; ls -l /m > /m/listing && \
         echo free > /m/marker; wait"
    );
    let mut program = roost()
        .args(["run", "--io-timeout", "30", "--mount"])
        .arg(format!("/m={}", local.path().display()))
        .args(["--", "sh", "-c", &script])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let marker = local.path().join("marker");
    let start = Instant::now();
    while !marker.exists() && start.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let waited = start.elapsed();
    signal(server.0.id(), libc::SIGCONT);
    let status = program.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut program.stderr.take().unwrap(), &mut err).unwrap();
    assert!(
        waited < Duration::from_secs(10),
        "the other process waited {waited:?} for the stopped server: {err}"
    );
    assert!(status.success(), "{err}");
    assert_eq!(
        std::fs::read_to_string(local.path().join("out")).unwrap(),
        "from the server\n",
        "{err}"
    );
    assert!(std::fs::read_to_string(local.path().join("listing"))
        .unwrap()
        .contains("out"));
}

/// Two direct-mode files on one shared connection, both read while the server is stopped:
/// the second call waits for the connection the first holds, and that wait too holds up
/// only its caller (the run's other calls, on a local mapping, go on).
#[test]
fn a_call_waiting_for_a_shared_connection_holds_up_only_its_caller() {
    let export = tempfile::tempdir().unwrap();
    for i in 0..5 {
        std::fs::write(export.path().join(format!("f{i}")), format!("file {i}\n")).unwrap();
    }
    let local = tempfile::tempdir().unwrap();
    let port = free_port();
    let server = FixedServer::start(export.path(), port);
    // Five files on four connections: the first and the fifth share one.
    let program = r#"
import os, threading, time
fds = [os.open(f'/d/f{i}', os.O_RDONLY) for i in range(5)]
open('/m/opened', 'w').close()
while not os.path.exists('/m/stopped'):
    time.sleep(0.02)
got = {}
def read(i):
    got[i] = os.pread(fds[i], 64, 0).decode()
readers = [threading.Thread(target=read, args=(i,)) for i in (0, 4)]
for t in readers:
    t.start()
    time.sleep(0.3)
os.listdir('/m')
open('/m/marker', 'w').close()
for t in readers:
    t.join()
print(got[0] + got[4], end='')
"#;
    let run = roost()
        .args(["run", "--io-timeout", "30", "--mount"])
        .arg(format!("/m={}", local.path().display()))
        .arg("--mount")
        .arg(format!("/d=/chirp/127.0.0.1:{port}:direct"))
        .args(["--", "python3", "-c", program])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let wait_for = |name: &str, most: Duration| {
        let start = Instant::now();
        while !local.path().join(name).exists() && start.elapsed() < most {
            std::thread::sleep(Duration::from_millis(20));
        }
        start.elapsed()
    };
    wait_for("opened", Duration::from_secs(30));
    signal(server.0.id(), libc::SIGSTOP);
    std::fs::write(local.path().join("stopped"), "").unwrap();
    let waited = wait_for("marker", Duration::from_secs(15));
    signal(server.0.id(), libc::SIGCONT);
    let out = run.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        waited < Duration::from_secs(10),
        "the local calls waited {waited:?} for the stopped server: {err}"
    );
    assert!(out.status.success(), "{err}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "file 0\nfile 4\n",
        "{err}"
    );
}

/// A server that authenticates a client, then closes the connection in the middle of its
/// first reply: roost retries until --timeout, then fails the call with EIO.
#[test]
fn a_server_that_closes_mid_reply_fails_the_call_with_eio_after_the_timeout() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            std::thread::spawn(move || {
                use std::io::{BufRead, Write};
                let mut r = std::io::BufReader::new(s.try_clone().unwrap());
                let mut line = String::new();
                let _ = r.read_line(&mut line); // the method
                let _ = s.write_all(b"yes\nyes\nyes\naddress\n127.0.0.1\n");
                line.clear();
                let _ = r.read_line(&mut line); // the request
                let _ = s.write_all(b"0\n1 2 ");
            });
        }
    });
    let cache = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let o = roost()
        .args(["run", "--auth", "address", "--timeout", "2", "--cache"])
        .arg(cache.path())
        .args(["--", "cat"])
        .arg(format!("/chirp/127.0.0.1:{port}/x"))
        .output()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert!(stderr(&o).contains("Input/output error"), "{}", stderr(&o));
    assert!(stderr(&o).contains("--timeout"), "{}", stderr(&o));
}

#[test]
fn cctools_chirp_server_serves_the_same_tree() {
    let here = peer::root("cctools' chirp_server must drop to nobody")
        && peer::program("chirp_server", peer::CCTOOLS);
    if !here {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let export = scratch.path().join("export");
    std::fs::create_dir(&export).unwrap();
    let tree = export.join("t");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    std::fs::write(tree.join("a.txt"), b"alpha\nneedle\n").unwrap();
    std::fs::write(tree.join("sub/b.txt"), b"beta\n").unwrap();
    std::os::unix::fs::symlink("a.txt", tree.join("link")).unwrap();
    let acl = scratch.path().join("acl");
    std::fs::write(&acl, "address:127.0.0.1 rwldpa\n").unwrap();
    let port_file = scratch.path().join("port");
    give_to_nobody(scratch.path());
    let mut server = cctools_chirp_server(&export, scratch.path(), &port_file)
        .args(["-a", "address", "-i", "nobody"])
        .args(["-u", "127.0.0.1", "-U", "3600", "-A"])
        .arg(&acl)
        .spawn()
        .expect("chirp_server (install coop-computing-tools)");
    let port = read_port_file(&port_file);
    let cache = tempfile::tempdir().unwrap();
    // zlib built on the cctools server equals the native build.
    let native = native_zlib();
    let z = export.join("z");
    zlib_tree(&z);
    give_to_nobody(&z);
    let o = roost()
        .args(["run", "--auth", "address", "--cache"])
        .arg(cache.path())
        .arg("--mount")
        .arg(format!("/zsrc=/chirp/127.0.0.1:{port}/z"))
        .args(["--", "make", "-s", "-j2", "-C", "/zsrc"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    same_zlib_build(native.path(), &z);
    let script = "cd /m && ls -l && cat link sub/b.txt && grep -rn needle . \
                  && echo new > sub/c && cat sub/c && mkdir d && mv sub/c d/c && ls d";
    let mut outputs = Vec::new();
    for target in [
        tree.display().to_string(),
        format!("/chirp/127.0.0.1:{port}/t"),
    ] {
        // The last round changed sub's time: the same for both, whatever the minute.
        let then = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600);
        std::fs::File::open(tree.join("sub"))
            .and_then(|d| d.set_modified(then))
            .unwrap();
        let o = roost()
            .args(["run", "--auth", "address", "--cache"])
            .arg(cache.path())
            .args(["--mount", &format!("/m={target}"), "--", "sh", "-c", script])
            .output()
            .unwrap();
        outputs.push(text(&o));
        // Undo the changes for the next round.
        let _ = std::fs::remove_dir_all(tree.join("d"));
    }
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        outputs[1].contains("alpha\nneedle\nbeta\n"),
        "{}",
        outputs[1]
    );
    // Owners differ (files made through chirp_server belong to nobody), the rest agrees.
    let strip = |s: &str| s.replace("nobody", "root").replace("nogroup", "root");
    assert_eq!(strip(&outputs[0]), strip(&outputs[1]));
    assert!(outputs[1].ends_with("new\nc\n"), "{}", outputs[1]);
}

#[test]
fn the_summary_reports_each_server_its_calls_and_the_cache() {
    let r = Remote::start();
    r.write("f", b"data\n");
    let script = format!("cat {0}/f {0}/f >/dev/null && echo x > {0}/g", r.url(""));
    let o = r.run(&[], &["--summary"], &["sh", "-c", &script]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let (calls, line) = calls_to(&r, &err);
    assert!(calls >= 3, "{line}");
    // f was made just now (its ctime is recent): each open fetches it again.
    assert!(
        err.contains("remote cache: 0 hits, 2 misses, 1 files written back"),
        "{err}"
    );
    // The trace's prefix table names the server too.
    assert!(
        err.contains(&format!("/chirp/127.0.0.1:{}", r.server.port)),
        "{err}"
    );
}

/// What the server told about a name this run just made, wrote back or removed is kept
/// (for the attribute TTL) rather than asked again: a compiler's output made, removed and
/// made again, its mode changed and read back, in cached mode, takes 14 requests (20
/// before: a lookup after each change, and a write-open's check of what its own walk had
/// just asked). What lands on the server is unchanged.
#[test]
fn names_just_made_written_back_or_removed_are_not_asked_again() {
    let r = Remote::start();
    std::fs::create_dir(r.root().join("d")).unwrap();
    let script = format!(
        "cd {} && echo 1 > out && rm out && echo 2 > out && chmod 755 out && cat out",
        r.url("/d")
    );
    let o = r.run(
        &["--chirp-mode", "cached"],
        &["--summary"],
        &["sh", "-c", &script],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "2\n");
    let out = r.root().join("d/out");
    assert_eq!(std::fs::read(&out).unwrap(), b"2\n");
    assert_eq!(std::fs::metadata(&out).unwrap().mode() & 0o7777, 0o755);
    let err = stderr(&o);
    let (calls, line) = calls_to(&r, &err);
    assert!(calls <= 14, "{line}");
}

/// A directory listed again within the attribute TTL (make reads each directory it
/// searches, once per make) asks the server for its names only: its entries' attributes
/// are known. A name another client adds meanwhile is listed at once, and the types of
/// the entries listed are right. Five listings of a directory of 50 files, another
/// client adding a name before the last: 12 requests in all before (a name listing and
/// a batch of lstats each time), 9 now.
#[test]
fn a_directory_listed_again_within_the_ttl_asks_only_for_its_names() {
    let r = Remote::start();
    for i in 0..50 {
        r.write(&format!("d/f{i}"), b"x");
    }
    std::fs::create_dir(r.root().join("d/sub")).unwrap();
    let marker = r.root().join("marker");
    let script = format!(
        "for i in 1 2 3 4; do ls -F {0} >/dev/null; done; until [ -e {1} ]; do sleep 0.01; done; ls -F {0}",
        r.url("/d"),
        marker.display()
    );
    let child = run_with_cache(
        r.cache.path(),
        &["--chirp-mode", "cached"],
        // A TTL no slow machine outlasts between the listings.
        &["--summary", "--attr-ttl", "30"],
        &["sh", "-c", &script],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Another client adds a name between the second listing and the third.
    std::thread::sleep(Duration::from_millis(200));
    std::fs::write(r.root().join("d/late"), b"y").unwrap();
    std::fs::write(&marker, b"").unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let listed = String::from_utf8_lossy(&o.stdout);
    assert!(listed.contains("late\n"), "{listed}");
    assert!(listed.contains("sub/\n"), "{listed}");
    assert_eq!(listed.lines().count(), 52, "{listed}");
    let err = stderr(&o);
    let (calls, line) = calls_to(&r, &err);
    assert!(calls <= 10, "{line}");
}

/// Another client's change is seen by the next open once the attribute TTL (1 s) has
/// passed: a running program reads the new version, not its cached copy.
#[test]
fn a_change_by_another_client_is_seen_after_the_attribute_ttl() {
    let r = Remote::start();
    let f = r.write("shared", b"old\n");
    std::thread::sleep(Duration::from_millis(3100)); // cacheable, not changed just now
    let script = format!("cat {0} && sleep 2 && cat {0}", r.url("/shared"));
    let program = roost()
        .arg("run")
        .arg("--cache")
        .arg(r.cache.path())
        .args(["--chirp-mode", "cached", "--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    std::fs::write(&f, b"new content\n").unwrap();
    let o = program.wait_with_output().unwrap();
    assert_eq!(stdout(&o), "old\nnew content\n");
}

#[test]
fn extended_attributes_and_statfs_go_through_the_server() {
    let r = Remote::start();
    let f = r.write("d/x", b"x");
    let mount = format!("/m={}", r.url("/d"));
    let program = "import os\n\
        os.setxattr('/m/x', 'user.color', b'blue')\n\
        print(os.getxattr('/m/x', 'user.color'), os.listxattr('/m/x'))\n\
        os.removexattr('/m/x', 'user.color')\n\
        print(os.listxattr('/m/x'), os.statvfs('/m').f_bsize > 0)\n";
    for mode in MODES {
        let o = r.run(mode, &["--mount", &mount], &["python3", "-c", program]);
        assert_eq!(
            stdout(&o),
            "b'blue' ['user.color']\n[] True\n",
            "{mode:?}: {}",
            stderr(&o)
        );
    }
    // Set through roost, seen on the server itself.
    let o = r.run(
        &[],
        &["--mount", &mount],
        &[
            "python3",
            "-c",
            "import os; os.setxattr('/m/x', 'user.k', b'v')",
        ],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let got = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import os; print(os.getxattr('{}', 'user.k'))",
            f.display()
        ))
        .output()
        .unwrap();
    assert_eq!(stdout(&got), "b'v'\n");
}

#[test]
fn a_shared_key_given_to_roost_run_authenticates_every_connection() {
    let keys = tempfile::tempdir().unwrap();
    let server_keys = TestServer::with_keys(keys.path(), &["batch"]);
    let mut args: Vec<&str> = vec!["--auth", "hmac", "--acl", "hmac:batch=rwl"];
    args.extend(server_keys.iter().map(String::as_str));
    let server = TestServer::start(&args);
    std::fs::write(server.root().join("f"), b"for batch\n").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let key = format!("batch={}", keys.path().join("batch.key").display());
    for mode in MODES {
        let o = roost()
            .args(["run", "--auth", "hmac", "--key", &key, "--cache"])
            .arg(cache.path())
            .args(mode)
            .args(["--", "sh", "-c"])
            .arg(format!(
                "cat /chirp/127.0.0.1:{0}/f && echo more > /chirp/127.0.0.1:{0}/g",
                server.port
            ))
            .output()
            .unwrap();
        assert_eq!(stdout(&o), "for batch\n", "{mode:?}: {}", stderr(&o));
    }
    assert_eq!(std::fs::read(server.root().join("g")).unwrap(), b"more\n");
}

/// With `--attr-ttl 0` every open asks the server: a change is seen by the very next open.
#[test]
fn with_no_attribute_ttl_the_next_open_sees_a_change() {
    let r = Remote::start();
    let f = r.write("shared", b"old\n");
    std::thread::sleep(Duration::from_millis(3100));
    let script = format!("cat {0} && sleep 0.6 && cat {0}", r.url("/shared"));
    let program = roost()
        .args([
            "run",
            "--chirp-mode",
            "cached",
            "--attr-ttl",
            "0",
            "--cache",
        ])
        .arg(r.cache.path())
        .args(["--", "sh", "-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(&f, b"new content\n").unwrap();
    let o = program.wait_with_output().unwrap();
    assert_eq!(stdout(&o), "old\nnew content\n");
}

#[test]
fn a_cached_file_read_again_and_rewritten_in_one_run_shows_each_version() {
    // The second read of an unchanged file reuses the copy shown for the first; a write
    // in between replaces it, and the reads after see what was written.
    let r = Remote::start();
    r.write("again", b"one\n");
    std::thread::sleep(Duration::from_millis(2500)); // cacheable, not changed just now
    let f = r.url("/again");
    let script = format!("cat {f}; cat {f}; echo two >{f}; cat {f}; echo three >>{f}; cat {f}");
    let o = r.run(CACHED, &[], &["sh", "-c", &script]);
    assert_eq!(text(&o), "one\none\ntwo\ntwo\nthree\n");
    assert_eq!(
        std::fs::read(r.root().join("again")).unwrap(),
        b"two\nthree\n"
    );
}

#[test]
fn a_venv_made_on_the_server_runs_its_python_and_its_packages() {
    let r = Remote::start();
    std::fs::create_dir(r.root().join("envs")).unwrap();
    let mount = format!("/m={}", r.url("/envs"));
    let script = "python3 -m venv --without-pip /m/v \
        && site=$(/m/v/bin/python -c 'import site; print(site.getsitepackages()[0])') \
        && echo 'ANSWER = 42' > \"$site/mypkg.py\" \
        && /m/v/bin/python -c 'import sys, mypkg; print(sys.prefix, mypkg.ANSWER, mypkg.__file__.startswith(\"/m/v/\"))'";
    for (i, mode) in MODES.iter().enumerate() {
        let o = r.run(mode, &["--mount", &mount], &["sh", "-c", script]);
        assert_eq!(stdout(&o), "/m/v 42 True\n", "{mode:?}: {}", stderr(&o));
        assert!(r.root().join("envs/v/pyvenv.cfg").exists());
        if i == 0 {
            std::fs::remove_dir_all(r.root().join("envs/v")).unwrap();
        }
    }
}

#[test]
fn concurrent_runs_share_one_cache_safely() {
    let r = Remote::start();
    let data: Vec<u8> = (0..5_000_000u32).map(|i| (i % 253) as u8).collect();
    r.write("big", &data);
    std::thread::sleep(Duration::from_millis(3100)); // old enough to be kept
    let url = r.url("/big");
    let runs: Vec<_> = (0..4)
        .map(|_| {
            roost()
                .arg("run")
                .arg("--cache")
                .arg(r.cache.path())
                .args(["--chirp-mode", "cached", "--", "md5sum", &url])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let sums: Vec<String> = runs
        .into_iter()
        .map(|c| stdout(&c.wait_with_output().unwrap()))
        .collect();
    let native = Command::new("md5sum")
        .arg(r.root().join("big"))
        .output()
        .unwrap();
    let want = stdout(&native)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    for s in &sums {
        assert_eq!(s.split_whitespace().next(), Some(want.as_str()), "{sums:?}");
    }
    // One object for the file (and beside it the change time it was made at), whatever
    // the interleaving; no temporary left behind.
    let objects: Vec<_> = walk(&r.cache.path().join("objects"));
    let copies = objects
        .iter()
        .filter(|p| p.extension().is_none_or(|e| e != "ctime"));
    assert_eq!(copies.count(), 1, "{objects:?}");
    assert_eq!(objects.len(), 2, "{objects:?}");
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_file_renamed_or_removed_while_open_for_writing_goes_where_the_program_left_it() {
    let r = Remote::start();
    std::fs::create_dir(r.root().join("w")).unwrap();
    let mount = format!("/m={}", r.url("/w"));
    let program = "import os, shutil\n\
        f = open('/m/a', 'w'); f.write('kept'); os.rename('/m/a', '/m/b'); f.close()\n\
        g = open('/m/c', 'w'); os.unlink('/m/c'); g.write('gone'); g.close()\n\
        os.mkdir('/m/d'); open('/m/d/x', 'w').close()\n\
        st, fd = os.lstat('/m/d'), os.open('/m/d', os.O_RDONLY | os.O_DIRECTORY)\n\
        print(os.path.samestat(st, os.fstat(fd))); os.close(fd)\n\
        shutil.rmtree('/m/d'); print(sorted(os.listdir('/m')))\n";
    for (i, mode) in MODES.iter().enumerate() {
        let o = r.run(mode, &["--mount", &mount], &["python3", "-c", program]);
        assert_eq!(stdout(&o), "True\n['b']\n", "{mode:?}: {}", stderr(&o));
        assert_eq!(std::fs::read(r.root().join("w/b")).unwrap(), b"kept");
        assert!(!r.root().join("w/a").exists() && !r.root().join("w/c").exists());
        assert!(!stderr(&o).contains("writing back"), "{}", stderr(&o));
        if i == 0 {
            std::fs::remove_file(r.root().join("w/b")).unwrap();
        }
    }
}

/// A cache named by a relative path works as an absolute one: a program can `cd` into a
/// remote directory and run a script there (its mirror paths were taken relative to the
/// program's cwd: `./run.sh: Permission denied`, then `cd` failed).
#[test]
fn a_relative_cache_directory_works_from_any_directory() {
    let r = Remote::start();
    r.write("d/run.sh", b"#!/bin/sh\necho ran in $(pwd)\n");
    std::fs::set_permissions(
        r.root().join("d/run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let base = tempfile::tempdir().unwrap();
    for mode in MODES {
        let o = roost()
            .current_dir(base.path())
            .args(["run", "--cache", "relcache"])
            .args(mode)
            .args(["--mount", &format!("/m={}", r.url("/"))])
            .args(["--", "sh", "-c", "cd /m/d && ./run.sh && cd /m && pwd"])
            .output()
            .unwrap();
        assert_eq!(stdout(&o), "ran in /m/d\n/m\n", "{mode:?}: {}", stderr(&o));
        assert!(base.path().join("relcache").is_dir(), "{mode:?}");
    }
}

/// Without `/proc` (a bare chroot, a container that mounts none) direct-mode files still
/// work: roost finds the program's descriptors by their probes and free numbers by kcmp
/// (it used to wait forever on the first read). Run in a user and mount namespace of its
/// own with a tmpfs over `/proc`.
#[test]
fn direct_mode_files_work_without_proc() {
    let r = Remote::start();
    r.write("f", b"hello\n");
    let f = r.url("/f");
    let script = format!(
        "cat {f} && echo more >> {f} && exec 3<{f} && cat <&3 && printf 'x%.0s' 1 2 3 > {f} \
         && cat {f}"
    );
    let roost = env!("CARGO_BIN_EXE_roost");
    let cache = r.cache.path().display();
    let outer = format!(
        "mount -t tmpfs none /proc && test ! -e /proc/self && exec timeout 20 {roost} run \
         --cache {cache} -- sh -c \"$0\""
    );
    let o = Command::new("unshare")
        .args(["--map-root-user", "--mount", "sh", "-c", &outer, &script])
        .output()
        .unwrap();
    assert_eq!(stdout(&o), "hello\nhello\nmore\nxxx", "{}", stderr(&o));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(r.root().join("f")).unwrap(), b"xxx");
}
