//! Paths through `/proc` magic links (`/proc/self/root`, `/proc/self/cwd`, `/proc/PID/...`,
//! `/proc/self/fd/N` and `/dev/fd/N` used as directories) resolve in the logical namespace:
//! a DENY mapping holds whichever way the file is reached, and mapped files are found through
//! them. Each case runs with notifications and with `--no-notify` (plain ptrace), which must
//! agree. Also: a path argument in unmapped memory is EFAULT, as the kernel says.

use roost_testkit::run::*;

/// Trees with a mapped file (`/mm/f` is `<tree>/m/f`) and a denied directory
/// (`<other>/x/sec`, holding `s`; a tree apart, since the first is also mapped at `/m`), and
/// the options that set them up.
fn deny_tree(tag: &str) -> (Tree, Tree, Vec<String>) {
    let t = Tree::new(tag);
    let other = Tree::new(&format!("{tag}-x"));
    t.write("m/f", "mapped\n");
    other.write("x/sec/s", "secret\n");
    other.write("x/open", "open\n");
    let options = vec![
        "--mount".to_string(),
        format!("/mm={}", t.path("m").display()),
        "--mount".to_string(),
        format!("{}=DENY", other.path("x/sec").display()),
    ];
    (t, other, options)
}

/// `sh -c SCRIPT` under roost both ways with the tree's mounts; (output, exit code).
fn sh(t: &Tree, options: &[String], script: &str) -> (String, i32) {
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    run_both_with(t, &options, &["sh", "-c", script])
}

#[test]
fn a_denied_file_stays_denied_through_proc_self_root_cwd_and_dev_fd() {
    let (t, other, opts) = deny_tree("proc-deny");
    let x = other.path("x").display().to_string();
    for (how, path) in [
        ("root", format!("/proc/self/root{x}/sec/s")),
        (
            "thread-self root",
            format!("/proc/thread-self/root{x}/sec/s"),
        ),
        ("dev/fd climb", format!("/dev/fd/../../..{x}/sec/s")),
        (
            "proc/self/fd climb",
            format!("/proc/self/fd/../../..{x}/sec/s"),
        ),
    ] {
        let (out, code) = sh(&t, &opts, &format!("cat {path}"));
        assert_eq!(code, 1, "{how}: {out}");
        assert!(out.contains("Permission denied"), "{how}: {out}");
    }
    let (out, code) = sh(&t, &opts, &format!("cd {x} && cat /proc/self/cwd/sec/s"));
    assert_eq!(code, 1, "cwd: {out}");
    assert!(out.contains("Permission denied"), "cwd: {out}");
    // Through the cwd, the root and a climb, what is not denied is read as natively.
    let (out, code) = sh(
        &t,
        &opts,
        &format!(
            "cd {x} && cat /proc/self/cwd/open /proc/self/root{x}/open /dev/fd/../../..{x}/open"
        ),
    );
    assert_eq!((out.as_str(), code), ("open\nopen\nopen\n", 0));
}

#[test]
fn mapped_files_are_found_through_proc_self_root_and_directory_descriptors() {
    let (t, other, opts) = deny_tree("proc-mapped");
    let (out, code) = sh(
        &t,
        &opts,
        "cat /proc/self/root/mm/f; cd /mm && cat /proc/self/cwd/f",
    );
    assert_eq!((out.as_str(), code), ("mapped\nmapped\n", 0));
    // Back into /proc through the root: still the program's own descriptors, not roost's.
    let (out, code) = sh(&t, &opts, "echo piped | cat /proc/self/root/dev/stdin");
    assert_eq!((out.as_str(), code), ("piped\n", 0));
    // A directory descriptor as a prefix: its logical name, then the rest.
    let x = other.path("x").display().to_string();
    let script = format!(
        r#"
import os
def read(p):
    try:
        with open(p) as f: return f.read().strip()
    except OSError as e: return e.strerror
m = os.open("/mm", os.O_RDONLY | os.O_DIRECTORY)
x = os.open("{x}", os.O_RDONLY | os.O_DIRECTORY)
print(read(f"/dev/fd/{{m}}/f"), read(f"/proc/self/fd/{{m}}/f"), read(f"/proc/{{os.getpid()}}/fd/{{m}}/f"))
print(read(f"/dev/fd/{{x}}/sec/s"), read(f"/proc/self/fd/{{x}}/open"))
print(os.readlink("/proc/self/root"), sorted(os.listdir("/proc/self/root/mm")))
"#
    );
    let options: Vec<&str> = opts.iter().map(String::as_str).collect();
    let (out, code) = run_both_with(&t, &options, &["python3", "-c", &script]);
    assert_eq!(
        (out.as_str(), code),
        ("mapped mapped mapped\nPermission denied open\n/ ['f']\n", 0)
    );
}

#[test]
fn another_traced_process_s_proc_links_resolve_in_the_namespace() {
    let (t, other, opts) = deny_tree("proc-other");
    let x = other.path("x").display().to_string();
    // A child sits in the denied directory's parent; its cwd and root are reached by pid,
    // from /proc/PID as the cwd (the messages then name no pid, which differs by run).
    let script = format!(
        "cd {x} && sleep 5 & \
         while [ \"$(readlink /proc/$!/cwd)\" != {x} ]; do sleep 0.02; done; cd /proc/$!; \
         cat cwd/sec/s; echo rc=$?; cat root{x}/sec/s; echo rc=$?; cat cwd/open; \
         cat /proc/$!/cwd/sec/s 2>/dev/null; echo rc=$?; kill $!"
    );
    let (out, code) = sh(&t, &opts, &script);
    assert_eq!(
        (out.as_str(), code),
        (
            format!(
                "rc=1\nrc=1\nopen\nrc=1\ncat: cwd/sec/s: Permission denied\n\
                 cat: root{x}/sec/s: Permission denied\n"
            )
            .as_str(),
            0
        )
    );
}

#[test]
fn openat2_through_proc_self_root_is_held_to_deny() {
    let (t, other, opts) = deny_tree("proc-openat2");
    let x = other.path("x").display().to_string();
    let script = format!(
        r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
how = (ctypes.c_uint64 * 3)(os.O_RDONLY, 0, 0)
def openat2(p):
    fd = libc.syscall(437, -100, p.encode(), ctypes.byref(how), 24)
    if fd < 0: return os.strerror(ctypes.get_errno())
    data = os.read(fd, 100).decode().strip(); os.close(fd); return data
print(openat2("/proc/self/root{x}/sec/s"), openat2("/proc/self/root/mm/f"))
"#
    );
    let options: Vec<&str> = opts.iter().map(String::as_str).collect();
    let (out, code) = run_both_with(&t, &options, &["python3", "-c", &script]);
    assert_eq!((out.as_str(), code), ("Permission denied mapped\n", 0));
}

/// Each call given a path at an unmapped address (0xdeadc0de), by name, with its errno.
const BAD_POINTERS: &str = r#"
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
bad = ctypes.c_void_p(0xdeadc0de)
good = sys.argv[1].encode()  # exists natively and under roost: the kernel looks it up first
calls = {
    "open": lambda: libc.open(bad, 0),
    "openat": lambda: libc.openat(-100, bad, 0),
    "stat": lambda: libc.stat(bad, ctypes.create_string_buffer(256)),
    "access": lambda: libc.access(bad, 0),
    "chmod": lambda: libc.chmod(bad, 0o644),
    "chown": lambda: libc.chown(bad, 0, 0),
    "mkdir": lambda: libc.mkdir(bad, 0o755),
    "mknod": lambda: libc.mknod(bad, 0o10644, 0),
    "mkfifo": lambda: libc.mkfifo(bad, 0o644),
    "rmdir": lambda: libc.rmdir(bad),
    "unlink": lambda: libc.unlink(bad),
    "truncate": lambda: libc.truncate(bad, ctypes.c_long(0)),
    "link": lambda: libc.link(good, bad),
    "symlink": lambda: libc.symlink(good, bad),
    "rename": lambda: libc.rename(bad, good),
    "readlink": lambda: libc.readlink(bad, ctypes.create_string_buffer(64), 64),
    "chdir": lambda: libc.chdir(bad),
    "statx": lambda: libc.syscall(332, -100, bad, 0, 0xfff, ctypes.create_string_buffer(256)),
    "execve": lambda: libc.execve(bad, None, None),
}
for name, call in calls.items():
    ctypes.set_errno(0)
    rc = call()
    print(name, rc, errno.errorcode.get(ctypes.get_errno(), "-"))
"#;

#[test]
fn a_path_in_unmapped_memory_is_efault_as_natively() {
    let t = Tree::new("efault");
    std::fs::write(t.path("x"), "x").unwrap();
    let good = t.path("x").display().to_string();
    let native = std::process::Command::new("python3")
        .args(["-c", BAD_POINTERS, &good])
        .output()
        .unwrap();
    let native = stdout(&native);
    assert!(native.contains("open -1 EFAULT\n"), "{native}");
    let (out, code) = run_both(&t, &["python3", "-c", BAD_POINTERS, &good]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out, native);
}

#[test]
fn a_magic_link_named_relative_to_a_cwd_under_proc_reads_logically() {
    // `cd /proc/self && readlink exe` names the same link as `/proc/self/exe`: a program
    // run from a mapping sees its logical name both ways.
    let t = Tree::new("proc-relative");
    std::fs::create_dir_all(t.path("bin")).unwrap();
    std::fs::copy("/usr/bin/readlink", t.path("bin/readlink")).unwrap();
    let options = [format!("/m={}", t.path("bin").display())];
    let options = ["--mount", options[0].as_str()];
    for script in [
        "exec /m/readlink /proc/self/exe",
        "cd /proc/self && exec /m/readlink exe",
        "cd /proc && exec /m/readlink self/exe",
    ] {
        let (out, code) = run_both_with(&t, &options, &["sh", "-c", script]);
        assert_eq!((out.as_str(), code), ("/m/readlink\n", 0), "{script}");
    }
}
