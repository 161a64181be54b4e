//! The notification thread makes changes and lookups on a program's behalf; these tests
//! hold it to the kernel's own behaviour at the edges where doing a call for someone else
//! differs from doing it yourself: signals arriving meanwhile, paths that go through
//! `/proc/self`, a program in a chroot, and a program that dropped root. Each runs with
//! notifications and with `--no-notify` (plain ptrace), which must agree.

use roost_testkit::peer;
use roost_testkit::run::*;

/// Runs `python3 -c SCRIPT ARGS...` under roost both ways; returns (output, exit code).
fn python_both(t: &Tree, script: &str, args: &[&str]) -> (String, i32) {
    let mut argv = vec!["python3", "-c", script];
    argv.extend(args);
    run_both(t, &argv)
}

#[test]
fn changes_interrupted_by_signals_are_made_once() {
    // A 0.5 ms SA_RESTART timer interrupts mkdir, symlink, rename, link, unlink and rmdir
    // while roost makes them: a change made by roost and again by the restarted call shows
    // up as EEXIST or ENOENT. Both on the mount and outside it (where roost makes the
    // changes that may relink names itself).
    let t = Tree::new("notify-restart");
    let outside = t.path("outside");
    std::fs::create_dir(&outside).unwrap();
    let rc = compiled("restarted_changes");
    let mount = format!("/m={}", t.s());
    for mode in [&[][..], &["--no-notify"][..]] {
        for dir in ["/m", outside.to_str().unwrap()] {
            let mut args = mode.to_vec();
            args.extend([
                "--mount",
                &mount,
                "--",
                rc.to_str().unwrap(),
                dir,
                "300",
                "500",
            ]);
            let o = run(&args);
            let out = stdout(&o);
            let signals: u64 = out
                .strip_prefix("0 failures, ")
                .and_then(|rest| rest.strip_suffix(" signals\n"))
                .unwrap_or_else(|| panic!("{mode:?} under {dir}: {out}{}", stderr(&o)))
                .parse()
                .unwrap();
            assert!(o.status.success(), "{mode:?} under {dir}: {out}");
            assert!(signals > 20, "the timer hardly fired ({signals} signals)");
        }
    }
}

/// Opens a FIFO on the mount for reading or writing while a 0.3 s timer's handler either
/// raises (the open must fail then) or returns (the open must keep waiting, and succeed when
/// a child opens the other end at 0.6 s).
const FIFO_SIGNAL: &str = r#"
import os, signal, sys, time
mode, handler = sys.argv[1], sys.argv[2]
flags, other = (os.O_RDONLY, os.O_WRONLY) if mode == "r" else (os.O_WRONLY, os.O_RDONLY)
if os.fork() == 0:
    time.sleep(0.6)
    os.close(os.open("/m/fifo", other))
    os._exit(0)
calls = []
def on_alarm(sig, frame):
    calls.append(time.monotonic())
    if handler == "raise":
        raise TimeoutError
signal.signal(signal.SIGALRM, on_alarm)
signal.setitimer(signal.ITIMER_REAL, 0.3)
t0 = time.monotonic()
try:
    os.close(os.open("/m/fifo", flags))
    waited = time.monotonic() - t0
    print("opened; handler ran", len(calls), "time(s) while waiting:", calls[0] - t0 < waited, waited > 0.5)
except TimeoutError:
    print("interrupted at the signal:", 0.25 < time.monotonic() - t0 < 0.5)
    os.close(os.open("/m/fifo", flags))
os.wait()
"#;

#[test]
fn a_fifo_open_waits_through_signals_and_fails_when_a_handler_raises() {
    let t = Tree::new("notify-fifo");
    let fifo = std::ffi::CString::new(t.path("fifo").to_str().unwrap()).unwrap();
    // SAFETY: a plain mkfifo with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    for mode in ["r", "w"] {
        let (out, code) = python_both(&t, FIFO_SIGNAL, &[mode, "raise"]);
        assert_eq!(
            (out.as_str(), code),
            ("interrupted at the signal: True\n", 0),
            "{mode}"
        );
        let (out, code) = python_both(&t, FIFO_SIGNAL, &[mode, "return"]);
        assert_eq!(
            (out.as_str(), code),
            (
                "opened; handler ran 1 time(s) while waiting: True True\n",
                0
            ),
            "{mode}"
        );
    }
}

#[test]
fn fifo_opens_meet_early_writers_and_signals_only_one_thread_can_take() {
    let t = Tree::new("notify-fifo-races");
    let fifo = std::ffi::CString::new(t.path("fifo").to_str().unwrap()).unwrap();
    // SAFETY: a plain mkfifo with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    let races = compiled("fifo_races");
    let races = races.to_str().unwrap();
    // The writer's data must reach a reader whose open waited, even when the writer came
    // and went before roost's opener thread began to wait (a hang before).
    let (out, code) = run_both(&t, &[races, "early-writer", "/m/fifo", "30"]);
    assert_eq!((out.as_str(), code), ("30 of 30 readers got the data\n", 0));
    // A signal sent to the process interrupts the open of the thread the kernel gives it to.
    let (out, code) = run_both(&t, &[races, "thread-signal", "/m/fifo"]);
    assert_eq!(
        (out.as_str(), code),
        ("worker open: Interrupted system call\n", 0)
    );
    let (out, code) = run_both(&t, &[races, "main-waits", "/m/fifo"]);
    assert_eq!(
        (out.as_str(), code),
        ("main open: Interrupted system call\n", 0)
    );
    // A stop of the process (SIGSTOP, Ctrl-Z) stops the thread waiting in the open too; the
    // open goes on after SIGCONT. The kernel restarts it with the arguments it was given:
    // under ptrace those are roost's rewritten ones, which must be put back, or the physical
    // name would be resolved as a logical one (here shadowed by a mount of its own).
    let shadow = format!("{}=/nonexistent", t.s());
    let options = ["--mount", shadow.as_str()];
    let (out, code) = run_both_with(&t, &options, &[races, "group-stop", "/m/fifo"]);
    assert_eq!(
        (out.as_str(), code),
        ("worker read: data\nevery thread stopped: yes\n", 0)
    );
}

#[test]
fn changes_through_proc_self_name_the_programs_descriptors() {
    // /dev/fd/N, /proc/self/fd/N and a dirfd on /proc all name the program's descriptors,
    // never roost's, when roost makes the change for the program.
    let t = Tree::new("notify-proc");
    let script = r#"
import os
os.mkdir("/m/dir")
for name in "abcd":
    open(f"/m/dir/{name}", "w").close()
os.mkdir("/m/dir/e")
d = os.open("/m/dir", os.O_RDONLY | os.O_DIRECTORY)
proc = os.open("/proc", os.O_RDONLY | os.O_DIRECTORY)
os.unlink(f"/dev/fd/{d}/a")
os.unlink(f"/proc/self/fd/{d}/b")
os.unlink(f"self/fd/{d}/c", dir_fd=proc)
os.rename(f"/dev/fd/{d}/d", f"/proc/thread-self/fd/{d}/renamed")
os.rmdir(f"/proc/{os.getpid()}/fd/{d}/e")
print(sorted(os.listdir("/m/dir")))
os.unlink("/m/dir/renamed")
os.rmdir("/m/dir")
"#;
    let (out, code) = python_both(&t, script, &[]);
    assert_eq!((out.as_str(), code), ("['renamed']\n", 0));
    assert!(!t.path("dir").exists());
}

#[test]
fn a_chrooted_program_changes_names_inside_its_root() {
    if !peer::root("a program cannot chroot otherwise") {
        return;
    }
    let t = Tree::new("notify-chroot");
    let jail = t.path("jail");
    let script = r#"
import os, sys
os.chroot(sys.argv[1])
os.rmdir("/x")
os.mkdir("/y")
os.symlink("target", "/z")
print(sorted(os.listdir("/")))
"#;
    for _ in 0..2 {
        std::fs::create_dir_all(jail.join("x")).unwrap();
        let _ = std::fs::remove_dir(jail.join("y"));
        let _ = std::fs::remove_file(jail.join("z"));
        let o = run(&[
            "--mount",
            &format!("/m={}", t.s()),
            "--",
            "python3",
            "-c",
            script,
            jail.to_str().unwrap(),
        ]);
        assert_eq!(stdout(&o), "['y', 'z']\n", "{}", stderr(&o));
        assert!(o.status.success());
        assert!(!jail.join("x").exists() && jail.join("y").is_dir());
    }
}

#[test]
fn inside_a_chroot_the_mount_list_no_longer_applies() {
    if !peer::root("a program cannot chroot otherwise") {
        return;
    }
    // /data is mounted from elsewhere, but inside the jail "/data/f" is the jail's own file,
    // for the program, its threads and its children alike (before, roost kept translating:
    // opens found the host's file, other calls a host path the jail does not have).
    let t = Tree::new("chroot-namespace");
    t.write("jail/data/f", "jail\n");
    let host = Tree::new("chroot-host");
    host.write("f", "host\n");
    let script = r#"
import os, sys, threading
os.chroot(sys.argv[1])
print(open("/data/f").read().strip(), os.path.exists("/data/f"), sorted(os.listdir("/")))
t = threading.Thread(target=lambda: print("thread", open("/data/f").read().strip()))
t.start(); t.join()
if os.fork() == 0:
    print("child", open("/data/f").read().strip()); os._exit(0)
os.wait()
"#;
    let jail = t.path("jail");
    for mode in [&[][..], &["--no-notify"][..]] {
        let mut args = mode.to_vec();
        let mount = format!("/data={}", host.s());
        args.extend(["--mount", &mount, "--", "python3", "-c", script]);
        args.push(jail.to_str().unwrap());
        let o = run(&args);
        assert_eq!(
            stdout(&o),
            "jail True ['data']\nthread jail\nchild jail\n",
            "{mode:?}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn a_program_that_drops_root_looks_up_with_its_own_identity() {
    if !peer::root("a program cannot change identity otherwise") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let t = Tree::new("notify-identity");
    t.write("private/f", "root only\n");
    std::fs::set_permissions(t.path("private"), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(&t.root, std::fs::Permissions::from_mode(0o755)).unwrap();
    // access() checks the real ids, stat() the effective ones: with real uid nobody and
    // effective uid root, access must fail and stat succeed; once all ids are nobody's,
    // both fail.
    let script = r#"
import errno, os
def code(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
print("root", code(lambda: os.stat("/m/private/f")), os.access("/m/private/f", os.R_OK))
os.setresuid(65534, 0, 0)
print("real nobody", code(lambda: os.stat("/m/private/f")), os.access("/m/private/f", os.R_OK))
os.setgroups([]); os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)
print("nobody", code(lambda: os.stat("/m/private/f")), os.access("/m/private/f", os.R_OK))
print("nobody mkdir", code(lambda: os.mkdir("/m/private/d")))
def run(path):
    pid = os.fork()
    if pid == 0:
        try:
            os.execv(path, [path])
        except OSError as e:
            os._exit(e.errno)
    return os.waitpid(pid, 0)[1] >> 8
print("nobody runs a root-only script", errno.errorcode.get(run("/m/rootonly"), "ran"))
"#;
    // roost runs a script's interpreter itself, so it checks execute permission, as the
    // program (here nobody, for a script only root may run).
    t.write("rootonly", "#!/bin/sh\nexit 0\n");
    std::fs::set_permissions(t.path("rootonly"), std::fs::Permissions::from_mode(0o700)).unwrap();
    let (out, code) = python_both(&t, script, &[]);
    assert_eq!(
        out,
        "root ok True\nreal nobody ok False\nnobody EACCES False\nnobody mkdir EACCES\n\
         nobody runs a root-only script EACCES\n"
    );
    assert_eq!(code, 0);
    assert!(!t.path("private/d").exists());
}
