//! `roost run` as a command: exit codes, shell-like errors, mount lists (files, variables,
//! DENY, ENOENT, single-file mounts, `/` remapped), nested `#!` interpreters, exec of what is
//! not a regular file, tracing and
//! the summary, and the explanation when ptrace is unavailable.

use roost_testkit::run::*;
use std::os::unix::fs::PermissionsExt;

/// The program's filter is installed with `SECCOMP_FILTER_FLAG_SPEC_ALLOW`, in both
/// delivery modes: where the kernel's speculative store bypass mitigation is `seccomp`, a
/// filter would otherwise turn it on for the program and slow its computing. (This
/// machine's kernel has the mitigation off, so the effect itself cannot be seen here: the
/// test reads the flag off the `seccomp` call, with strace, before roost's own ptrace
/// fails under strace's.)
#[test]
fn the_filter_leaves_the_program_its_speculation_settings() {
    for mode in [&[][..], &["--no-notify"]] {
        let log = tempfile::NamedTempFile::new().unwrap();
        let o = std::process::Command::new("strace")
            .args(["-f", "-e", "trace=seccomp", "-o"])
            .arg(log.path())
            .arg(env!("CARGO_BIN_EXE_roost"))
            .arg("run")
            .args(mode)
            .args(["--mount", "/m=/tmp", "--", "true"])
            .output()
            .expect("strace (apt-get install strace)");
        let log = std::fs::read_to_string(log.path()).unwrap();
        let installs: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("seccomp(SECCOMP_SET_MODE_FILTER") && l.contains("filter="))
            .collect();
        assert!(!installs.is_empty(), "{mode:?}: {log}\n{}", stderr(&o));
        for l in installs {
            assert!(
                l.contains("SECCOMP_FILTER_FLAG_SPEC_ALLOW"),
                "{mode:?}: {l}"
            );
        }
    }
}

#[test]
fn exit_codes_follow_the_shell() {
    assert_eq!(run(&["--", "sh", "-c", "exit 7"]).status.code(), Some(7));
    assert_eq!(
        run(&["--", "sh", "-c", "kill -KILL $$"]).status.code(),
        Some(137)
    );
    assert_eq!(run(&["--", "true"]).status.code(), Some(0));
}

#[test]
fn missing_program_is_127_with_the_shell_message() {
    let o = run(&["--", "no-such-program-roost"]);
    assert_eq!(o.status.code(), Some(127));
    assert_eq!(
        stderr(&o),
        "roost: no-such-program-roost: command not found\n"
    );
    let o = run(&["--", "/nonexistent/prog"]);
    assert_eq!(o.status.code(), Some(127));
    assert!(stderr(&o).contains("/nonexistent/prog: No such file or directory"));
}

/// A program on a server that does not answer is reported with the connection's error, as
/// a shell under roost reports it, not as a permission problem.
#[test]
fn a_program_on_an_unreachable_server_reports_the_connection_error() {
    let prog = format!("/chirp/127.0.0.1:{}/prog", free_port());
    let o = run(&["--", &prog]);
    assert_eq!(o.status.code(), Some(126), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("roost: {prog}: Connection refused\n")),
        "{}",
        stderr(&o)
    );
    let by_shell = run(&["--", "sh", "-c", &prog]);
    assert_eq!(by_shell.status.code(), Some(126));
    assert!(stderr(&by_shell).contains("Connection refused"));
}

/// A file that cannot be run is named with the reason, as a shell names it.
#[test]
fn a_program_that_cannot_run_is_named_with_the_reason() {
    let t = Tree::new("cannot-run");
    let text = t.write("text", "not a program\n");
    let garbage = t.write("garbage", "\x7fELF and nothing more\n");
    std::fs::set_permissions(&garbage, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = run(&["--", garbage.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(126));
    assert_eq!(
        stderr(&o),
        format!("roost: {}: Exec format error\n", garbage.display())
    );
    // Even root may not run a file without an execute bit.
    let o = run(&["--", text.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(126));
    assert_eq!(
        stderr(&o),
        format!("roost: {}: Permission denied\n", text.display())
    );
}

#[test]
fn programs_found_on_path_inside_a_mount() {
    let t = Tree::new("pathsearch");
    t.script("mytool", "#!/bin/sh\necho tool ran \"$@\"\n");
    let o = roost()
        .args([
            "run",
            "--mount",
            &format!("/opt/tools={}", t.s()),
            "--",
            "mytool",
            "x",
        ])
        .env("PATH", "/opt/tools:/usr/bin:/bin")
        .output()
        .unwrap();
    assert_eq!(stdout(&o), "tool ran x\n");
}

#[test]
fn bad_mount_file_line_names_file_and_line() {
    let t = Tree::new("badmount");
    let f = t.write("mounts", "# ok\n/a /tmp\n/b\n");
    let o = run(&["--mount-file", f.to_str().unwrap(), "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains(&format!("{}:3: \"/b\" has no physical path", f.display())),
        "{err}"
    );
    let f = t.write("mounts2", "/a $ROOST_SURELY_UNSET\n");
    let o = run(&["--mount-file", f.to_str().unwrap(), "--", "true"]);
    assert!(stderr(&o).contains(":1: variable $ROOST_SURELY_UNSET is not set"));
}

/// Each remote driver checks its own targets (the registry hands it what follows the
/// scheme): a malformed one stops the run before it starts, naming the form expected.
#[test]
fn malformed_remote_targets_name_the_form_their_scheme_expects() {
    for (target, scheme) in [
        ("chirp://h:0/x", "chirp"),
        ("/chirp/a:b:c/x:cached", "chirp"),
        ("http://u@h/x", "http"),
        ("/https/h:x/y", "https"),
    ] {
        let spec = format!("/d={target}");
        let o = run(&["--mount", &spec, "--", "true"]);
        assert_eq!(o.status.code(), Some(2), "{target}");
        assert_eq!(
            stderr(&o),
            format!("roost run: --mount {spec}: {target}: expected {scheme}://HOST[:PORT]/PATH\n")
        );
    }
    let t = Tree::new("badremote");
    let f = t.write("mounts", "/ok /chirp/h/x\n/w https://h:0/\n");
    let o = run(&["--mount-file", f.to_str().unwrap(), "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "{}:2: https://h:0/: expected https://",
            f.display()
        )),
        "{err}"
    );
}

#[test]
fn idle_polling_is_bounded_and_can_be_turned_off() {
    let o = run(&["--idle-poll-us", "20000", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("20000 is not in 0..=10000"),
        "{}",
        stderr(&o)
    );
    let t = Tree::new("idlepoll");
    t.write("f", "mapped\n");
    let mount = format!("/m={}", t.s());
    for us in ["0", "10000"] {
        let o = run(&["--idle-poll-us", us, "--mount", &mount, "--", "cat", "/m/f"]);
        assert_eq!(
            (stdout(&o).as_str(), o.status.code()),
            ("mapped\n", Some(0))
        );
    }
}

#[test]
fn mount_file_variables_deny_enoent_and_file_mounts() {
    let t = Tree::new("mountfile");
    t.write("data/in.txt", "input\n");
    t.write("secret/key", "k\n");
    let list = "# per-job namespace\n/in ${ROOT}/data\n/out.txt $ROOT/out.$N.txt\n\
                /secret DENY\n/etc/passwd ENOENT\n";
    let f = t.write("mounts", list);
    let o = roost()
        .args(["run", "--mount-file", f.to_str().unwrap(), "--", "sh", "-c"])
        .arg(
            "cat /in/in.txt; echo result > /out.txt; cat /secret/key 2>&1 | sed 's/.*: //'; \
             cat /etc/passwd 2>&1 | sed 's/.*: //'",
        )
        .env("ROOT", t.s())
        .env("N", "4")
        .output()
        .unwrap();
    assert_eq!(
        stdout(&o),
        "input\nPermission denied\nNo such file or directory\n"
    );
    assert_eq!(
        std::fs::read_to_string(t.path("out.4.txt")).unwrap(),
        "result\n"
    );
}

#[test]
fn longest_prefix_wins_and_later_mounts_override() {
    let a = Tree::new("prefix-a");
    let b = Tree::new("prefix-b");
    a.write("x", "from a\n");
    a.write("inner/x", "from a inner\n");
    b.write("x", "from b\n");
    let o = run(&[
        "--mount",
        &format!("/d={}", a.s()),
        "--mount",
        &format!("/d/inner={}", b.s()),
        "--",
        "sh",
        "-c",
        "cat /d/x /d/inner/x",
    ]);
    assert_eq!(stdout(&o), "from a\nfrom b\n");
}

#[test]
fn root_can_be_remapped() {
    let root = Tree::new("newroot");
    root.write("hello", "from the new root\n");
    let mut args = vec![format!("/={}", root.s())];
    for d in ["/usr", "/bin", "/lib", "/lib64", "/etc"] {
        if std::path::Path::new(d).exists() {
            args.push(format!("{d}={d}"));
        }
    }
    let mut cmd = roost();
    cmd.arg("run");
    for a in &args {
        cmd.args(["--mount", a]);
    }
    let o = cmd
        .args(["--", "/bin/sh", "-c", "cat /hello; ls / | grep -c hello"])
        .current_dir("/")
        .output()
        .unwrap();
    assert_eq!(stdout(&o), "from the new root\n1\n", "{}", stderr(&o));
}

#[test]
fn elf_interpreter_is_resolved_through_the_namespace() {
    // A private copy of the dynamic loader mounted over /lib64: exec must use it (the
    // kernel alone would load the host's) and /proc/self/exe must still name the program.
    let t = Tree::new("ptinterp");
    std::fs::copy(
        "/lib64/ld-linux-x86-64.so.2",
        t.path("ld-linux-x86-64.so.2"),
    )
    .unwrap();
    let mount = format!("/lib64={}", t.s());
    let o = run(&[
        "--mount",
        &mount,
        "--",
        "/usr/bin/readlink",
        "/proc/self/exe",
    ]);
    assert_eq!(stdout(&o), "/usr/bin/readlink\n", "{}", stderr(&o));
    // Re-executing itself through /proc/self/exe runs the program again, not roost; a long
    // argument list (rebuilt for the loader) gets through whole.
    for mode in ["--no-notify", "--pin"] {
        let again = "exec /proc/self/exe -c 'echo again'";
        let o = run(&[mode, "--mount", &mount, "--", "/bin/sh", "-c", again]);
        assert_eq!(stdout(&o), "again\n", "{mode}: {}", stderr(&o));
        let long = "/bin/echo $(seq 100000) | /usr/bin/md5sum";
        let o = run(&[mode, "--mount", &mount, "--", "/bin/sh", "-c", long]);
        let native = std::process::Command::new("sh")
            .args(["-c", long])
            .output()
            .unwrap();
        assert_eq!(stdout(&o), stdout(&native), "{mode}: {}", stderr(&o));
    }
    let o = run(&["--mount", &mount, "--", "/usr/bin/cat", "/proc/self/maps"]);
    let loader = format!("{}/ld-linux-x86-64.so.2", t.s());
    assert!(
        stdout(&o).contains(&loader),
        "the mounted loader is mapped: {}",
        stdout(&o)
    );
}

#[test]
fn nested_shebangs_with_arguments_through_mounts() {
    let tools = Tree::new("shebang-tools");
    let src = Tree::new("shebang-src");
    tools.script("outer", "#!/tools/inner -x\n");
    tools.script("inner", "#!/bin/sh\necho \"argv: $0 $*\"\n");
    src.script("script", "#!/tools/outer\n");
    let o = run(&[
        "--mount",
        &format!("/tools={}", tools.s()),
        "--mount",
        &format!("/src={}", src.s()),
        "--",
        "/src/script",
        "a",
        "b",
    ]);
    // What Linux builds natively for the same chain: inner gets "-x /tools/outer /src/script a b".
    assert_eq!(
        stdout(&o),
        format!("argv: {} -x /tools/outer /src/script a b\n", "/tools/inner")
    );
}

#[test]
fn exec_of_a_fifo_or_directory_fails_at_once() {
    // roost reads an executable's head to find `#!` and the ELF loader: a FIFO must not make
    // that read wait for a writer (which would stall every traced program), nor open the
    // FIFO at all (which would wake a writer waiting for a reader).
    let t = Tree::new("execfifo");
    let fifo = std::ffi::CString::new(t.path("fifo").to_str().unwrap()).unwrap();
    // SAFETY: a plain mkfifo with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o755) }, 0);
    let (opened, writer_opened) = std::sync::mpsc::channel();
    let fifo_path = t.path("fifo");
    let writer = std::thread::spawn(move || {
        let f = std::fs::OpenOptions::new().write(true).open(fifo_path);
        opened.send(()).unwrap();
        f.map(drop)
    });
    std::thread::sleep(std::time::Duration::from_millis(100));
    let script = r#"
import errno, os
for path in ["/m/fifo", "/m", "/dev/null"]:
    try:
        os.execv(path, [path])
    except OSError as e:
        print(path, errno.errorcode[e.errno])
"#;
    let mount = format!("/m={}", t.s());
    // A stalled roost is killed after 20 s (the program's own timeout would not end it).
    let o = std::process::Command::new("timeout")
        .args(["20", env!("CARGO_BIN_EXE_roost"), "run", "--mount", &mount])
        .args(["--", "python3", "-c", script])
        .output()
        .unwrap();
    assert_eq!(
        stdout(&o),
        "/m/fifo EACCES\n/m EACCES\n/dev/null EACCES\n",
        "{}",
        stderr(&o)
    );
    assert!(o.status.success());
    assert!(
        writer_opened.try_recv().is_err(),
        "the FIFO's writer was woken"
    );
    // A real reader releases the writer.
    drop(std::fs::File::open(t.path("fifo")).unwrap());
    writer.join().unwrap().unwrap();
}

#[test]
fn trace_writes_json_lines_with_both_paths() {
    let t = Tree::new("trace");
    t.write("data/f", "x\n");
    let trace = t.path("trace.json");
    let o = run(&[
        "--trace",
        trace.to_str().unwrap(),
        "--mount",
        &format!("/data={}/data", t.s()),
        "--",
        "cat",
        "/data/f",
        "/data/missing",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let text = std::fs::read_to_string(&trace).unwrap();
    let ok = format!(
        "\"syscall\":\"openat\",\"logical\":\"/data/f\",\"physical\":\"{}/data/f\",\"result\":3",
        t.s()
    );
    assert!(text.contains(&ok), "{text}");
    assert!(
        text.contains("\"logical\":\"/data/missing\"") && text.contains("\"result\":-2"),
        "{text}"
    );
    for line in text.lines() {
        assert!(
            line.starts_with("{\"pid\":") && line.contains("\"duration_us\":"),
            "{line}"
        );
    }
}

#[test]
fn summary_tables_by_operation_and_prefix() {
    let t = Tree::new("summary");
    t.write("f", "x\n");
    let o = run(&[
        "--summary",
        "--mount",
        &format!("/data={}", t.s()),
        "--",
        "cat",
        "/data/f",
    ]);
    let err = stderr(&o);
    assert!(
        err.contains("operation") && err.contains("path prefix"),
        "{err}"
    );
    let openat = err
        .lines()
        .find(|l| l.starts_with("openat "))
        .expect("openat row");
    let count: u64 = openat.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(count >= 2, "{openat}");
    assert!(err.lines().any(|l| l.starts_with("/data/f ")), "{err}");
    assert!(err.contains("agent: peak RSS "), "{err}");
}

#[test]
fn ptrace_unavailable_is_explained() {
    // Inside roost run a nested roost cannot have the program's calls: the kernel refuses
    // it a second seccomp supervisor (the outer one would answer its program's calls
    // first), whether the outer roost traces every process or attaches on demand.
    let roost_bin = env!("CARGO_BIN_EXE_roost");
    let mount = "--mount=/nothing=/nonexistent";
    for attach in ["all", "lazy"] {
        let o = run(&[
            "--attach", attach, mount, "--", roost_bin, "run", mount, "--", "true",
        ]);
        assert_eq!(o.status.code(), Some(125), "{attach}");
        let err = stderr(&o);
        assert!(
            err.contains("cannot run under another seccomp supervisor"),
            "{attach}: {err}"
        );
    }
    // And where a seccomp filter refuses ptrace itself, as container runtimes do.
    let o = std::process::Command::new(compiled("noptrace"))
        .args([roost_bin, "run", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(125), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("ptrace is not available here"),
        "{}",
        stderr(&o)
    );
}

/// A root file system holding only `sh`, `cat` and the libraries they load (as `ldd` names
/// them), plus a data file and a script.
fn minimal_rootfs() -> Tree {
    let root = Tree::new("rootfs");
    for program in ["/bin/sh", "/bin/cat"] {
        let real = std::fs::canonicalize(program).unwrap();
        let ldd = std::process::Command::new("ldd")
            .arg(&real)
            .output()
            .unwrap();
        let libs = String::from_utf8_lossy(&ldd.stdout)
            .split_whitespace()
            .filter(|w| w.starts_with('/'))
            .map(str::to_string)
            .collect::<Vec<_>>();
        for file in libs.iter().map(String::as_str).chain([program]) {
            let to = root.path(file.trim_start_matches('/'));
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(file, &to).unwrap();
        }
    }
    root.write("data", "from the new root\n");
    root.write("script", "#!/bin/sh\necho script ran with $0 $1\n");
    std::fs::set_permissions(
        root.path("script"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    root
}

#[test]
fn a_remapped_root_alone_runs_dynamically_linked_programs() {
    // No identity mounts for /usr or /lib: the program, its loader and its libraries all
    // come from the new root, as in a chroot.
    let root = minimal_rootfs();
    let mount = format!("/={}", root.s());
    for mode in [&[][..], &["--no-notify"][..]] {
        let mut args = mode.to_vec();
        args.extend(["--mount", &mount, "--", "/bin/sh", "-c"]);
        args.push("cat /data; /script arg; cat /bin/missing 2>/dev/null || echo no such file");
        let o = run(&args);
        assert_eq!(
            (stdout(&o).as_str(), o.status.code()),
            (
                "from the new root\nscript ran with /script arg\nno such file\n",
                Some(0)
            ),
            "{mode:?}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn a_scratch_area_that_cannot_be_mapped_fails_the_call() {
    // An address-space limit too small for roost's scratch area: the program's call fails
    // with ENOMEM (it was retried forever before).
    let t = Tree::new("scratch-enomem");
    t.write("f", "data\n");
    let mount = format!("/m={}", t.s());
    let script = "ulimit -v 12000; cat /m/f; echo cat: $?";
    let o = run(&[
        "--no-notify",
        "--mount",
        &mount,
        "--",
        "timeout",
        "20",
        "sh",
        "-c",
        script,
    ]);
    assert_eq!(stdout(&o), "cat: 1\n", "{}", stderr(&o));
    assert!(
        stderr(&o).contains("Cannot allocate memory"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_syscall_newer_than_roost_fails_with_enosys_and_one_log_line() {
    // It might take a path roost cannot translate: refused, said once for the session.
    let t = Tree::new("newer-syscall");
    let mount = format!("/m={}", t.s());
    let script = "import ctypes; libc = ctypes.CDLL(None, use_errno=True)\n\
                  for _ in range(3): print(libc.syscall(900), ctypes.get_errno())";
    let o = run(&["--mount", &mount, "--", "python3", "-c", script]);
    assert_eq!(stdout(&o), "-1 38\n".repeat(3), "{}", stderr(&o));
    assert_eq!(
        stderr(&o).matches("syscall 900").count(),
        1,
        "{}",
        stderr(&o)
    );
}

#[test]
fn roost_returns_when_the_program_does_and_keeps_tracing_what_it_left_running() {
    // As from a shell: `cmd &` in the program does not hold roost up, and the process left
    // behind still sees the mount list.
    let t = Tree::new("background");
    t.write("f", "mounted\n");
    let out = t.path("out");
    let mount = format!("/m={}", t.s());
    let script = format!("(sleep 1; cat /m/f > {}) >/dev/null 2>&1 &", out.display());
    let started = std::time::Instant::now();
    let o = run(&["--mount", &mount, "--", "sh", "-c", &script]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(started.elapsed() < std::time::Duration::from_millis(900));
    assert!(!out.exists(), "the background job had not run yet");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::read_to_string(&out).map_or(true, |s| s.is_empty()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the background job never wrote"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "mounted\n");
    // Whether a process with this command line is still running, a moment after roost ended.
    let running = |command: &str| {
        std::thread::sleep(std::time::Duration::from_millis(300));
        let found = std::process::Command::new("pgrep")
            .args(["-f", command])
            .output()
            .unwrap();
        !found.stdout.is_empty()
    };
    // SIGTERM to roost still ends the program (timeout sends it to roost's pid).
    let o = std::process::Command::new("timeout")
        .args([
            "1",
            env!("CARGO_BIN_EXE_roost"),
            "run",
            "--",
            "sleep",
            "30.4711",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(124));
    assert!(!running("sleep 30.4711"), "the program outlived roost");
    // So does SIGKILL, which roost cannot pass on.
    let mut roost = std::process::Command::new(env!("CARGO_BIN_EXE_roost"))
        .args(["run", "--", "sleep", "30.4712"])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    roost.kill().unwrap();
    roost.wait().unwrap();
    assert!(
        !running("sleep 30.4712"),
        "the program outlived a killed roost"
    );
}

#[test]
fn a_call_of_another_abi_fails_with_enosys_and_one_log_line() {
    // An i386 call from a 64-bit program could name a path roost never sees translated.
    let t = Tree::new("foreign-abi");
    let mount = format!("/m={}", t.s());
    let prog = compiled("foreign_abi");
    let o = run(&["--mount", &mount, "--", prog.to_str().unwrap()]);
    assert_eq!(stdout(&o), "ENOSYS\nENOSYS\n", "{}", stderr(&o));
    assert_eq!(
        stderr(&o)
            .matches("i386 syscall 20 cannot be translated")
            .count(),
        1,
        "{}",
        stderr(&o)
    );
}
