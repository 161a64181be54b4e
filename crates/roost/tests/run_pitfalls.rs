//! The agent's pitfalls (DESIGN.md), one test each: a C program (run_support/pitfalls.c)
//! runs under `roost run` with a temporary directory mounted at `/m`, and its observations
//! must be those of a correct namespace.

use roost_testkit::peer;
use roost_testkit::run::*;

/// A tree mounted at /m: f, sub/g, real/f, an echo binary and the pitfalls binary.
fn m_tree(tag: &str) -> Tree {
    let t = Tree::new(tag);
    t.write("f", "hello\n");
    t.write("sub/g", "sub g\n");
    t.write("real/f", "real f\n");
    std::fs::copy("/bin/echo", t.path("echo")).unwrap();
    std::fs::copy(compiled("pitfalls"), t.path("pitfalls")).unwrap();
    std::os::unix::fs::symlink("/m/real", t.path("dirlink")).unwrap();
    t
}

/// Runs `/m/pitfalls MODE` with the tree at /m; returns (stdout, exit code).
fn pitfall(t: &Tree, args: &[&str]) -> (String, i32) {
    let mount = format!("/m={}", t.s());
    let mut all = vec!["--mount", &mount, "--", "/m/pitfalls"];
    all.extend_from_slice(args);
    let o = run(&all);
    (stdout(&o) + &stderr(&o), o.status.code().unwrap_or(-1))
}

#[test]
fn openat2_resolves_through_the_mount_and_keeps_resolve_beneath() {
    let t = m_tree("openat2");
    let (out, code) = pitfall(&t, &["openat2"]);
    assert_eq!(
        out,
        "hello\nsub g\nhello\nescape: Invalid cross-device link\n"
    );
    assert_eq!(code, 0);
}

#[test]
fn fexecve_runs_the_mounted_binary() {
    let t = m_tree("fexecve");
    assert_eq!(pitfall(&t, &["fexecve"]), ("from fexecve\n".into(), 0));
}

#[test]
fn execveat_with_a_dirfd_in_the_mount() {
    let t = m_tree("execveat");
    assert_eq!(pitfall(&t, &["execveat"]), ("from execveat\n".into(), 0));
}

#[test]
fn execveat_of_a_script_relative_to_a_dirfd_in_the_mount() {
    let t = m_tree("execveat-script");
    t.script("script", "#!/bin/sh\nread line < \"$0\"; echo \"$line\"\n");
    assert_eq!(pitfall(&t, &["execveat_script"]), ("#!/bin/sh\n".into(), 0));
}

#[test]
fn scripts_without_execute_permission_are_refused() {
    // roost runs the interpreter itself, so it must check what the kernel would have.
    let t = m_tree("noexec-script");
    t.write("script", "#!/bin/sh\necho ran\n");
    let mount = format!("/m={}", t.s());
    for mode in ["--no-notify", "--pin"] {
        let o = run(&[mode, "--mount", &mount, "--", "sh", "-c", "/m/script"]);
        assert_eq!(o.status.code(), Some(126), "{mode}: {}", stderr(&o));
        assert!(stderr(&o).contains("Permission denied"), "{}", stderr(&o));
    }
}

#[test]
fn statx_sees_mounted_files() {
    let t = m_tree("statx");
    assert_eq!(
        pitfall(&t, &["statx"]),
        ("size 6\nmissing: No such file or directory\n".into(), 0)
    );
}

#[test]
fn faccessat2_checks_mounted_files() {
    let t = m_tree("faccessat2");
    assert_eq!(
        pitfall(&t, &["faccessat2"]),
        ("f: ok\nnope: No such file or directory\n".into(), 0)
    );
}

#[test]
fn fchmodat2_changes_the_physical_file() {
    use std::os::unix::fs::PermissionsExt;
    let t = m_tree("fchmodat2");
    assert_eq!(pitfall(&t, &["fchmodat2"]), ("fchmodat2: ok\n".into(), 0));
    let mode = std::fs::metadata(t.path("f")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn at_empty_path_names_the_fd() {
    let t = m_tree("emptypath");
    assert_eq!(pitfall(&t, &["empty_path"]), ("size 6\n".into(), 0));
}

#[test]
fn proc_self_exe_shows_the_logical_path() {
    let t = m_tree("procexe");
    assert_eq!(pitfall(&t, &["proc_self"]), ("exe /m/pitfalls\n".into(), 0));
}

#[test]
fn exec_from_a_non_main_thread() {
    let t = m_tree("threadexec");
    assert_eq!(pitfall(&t, &["thread_exec"]), ("from thread\n".into(), 0));
}

#[test]
fn vfork_child_execs_through_the_namespace() {
    let t = m_tree("vfork");
    assert_eq!(
        pitfall(&t, &["vfork"]),
        ("from vfork\nchild exit 0\n".into(), 0)
    );
}

#[test]
fn clone3_thread_opens_a_mounted_file() {
    let t = m_tree("clone3");
    assert_eq!(pitfall(&t, &["clone3"]), ("thread read: hello\n".into(), 0));
}

#[test]
fn signals_are_delivered_and_exit_codes_kept() {
    let t = m_tree("signals");
    assert_eq!(
        pitfall(&t, &["signal", "handler"]),
        ("handled 1\n".into(), 3)
    );
    assert_eq!(pitfall(&t, &["signal", "segv"]).1, 128 + 11);
    assert_eq!(pitfall(&t, &["signal", "term"]).1, 128 + 15);
}

#[test]
fn rename_and_link_across_file_systems_give_exdev() {
    let a = Tree::new("exdev-a");
    let b = Tree::under(std::path::Path::new("/dev/shm"), "exdev-b");
    a.write("f", "x");
    let o = run(&[
        "--mount",
        &format!("/a={}", a.s()),
        "--mount",
        &format!("/b={}", b.s()),
        "--",
        compiled("pitfalls").to_str().unwrap(),
        "exdev",
    ]);
    assert_eq!(
        stdout(&o),
        "rename: Invalid cross-device link\nlink: Invalid cross-device link\nsame mount: ok\n"
    );
    assert!(a.path("f2").exists());
}

#[test]
fn absolute_symlinks_inside_a_mount_are_logical() {
    let t = m_tree("symlink");
    assert_eq!(
        pitfall(&t, &["symlink"]),
        (
            "real f\ntarget /m/real/f\nlstat link: symlink\nreal f\n".into(),
            0
        )
    );
    // The physical link holds the logical target, meaningless outside the namespace.
    assert_eq!(
        std::fs::read_link(t.path("link")).unwrap(),
        std::path::Path::new("/m/real/f")
    );
}

#[test]
fn symlinks_outside_the_mounts_pointing_into_one_are_logical() {
    let t = m_tree("outlink");
    let outside = Tree::new("outlink-host");
    std::os::unix::fs::symlink("/m/real", outside.path("link")).unwrap();
    let o = run(&[
        "--mount",
        &format!("/m={}", t.s()),
        "--",
        "sh",
        "-c",
        &format!("cat {0}/link/f; cat /dev/fd/0 < {0}/link/f", outside.s()),
    ]);
    assert_eq!(stdout(&o), "real f\nreal f\n", "{}", stderr(&o));
}

#[test]
fn af_unix_paths_go_through_the_mount() {
    let t = m_tree("unix");
    assert_eq!(
        pitfall(&t, &["unix"]),
        ("stream ok\nsendto ok\nsendmsg ok\n".into(), 0)
    );
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata(t.path("sock"))
        .unwrap()
        .file_type()
        .is_socket());
}

#[test]
fn cwd_inside_a_mount() {
    let t = m_tree("cwd");
    assert_eq!(
        pitfall(&t, &["cwd"]),
        (
            "getcwd /m/sub\nproc cwd /m/sub\nsub g\nhello\nafter .. /m\nafter fchdir /m/sub\n"
                .into(),
            0
        )
    );
}

#[test]
fn relative_dirfds_resolve_logically() {
    let t = m_tree("dirfd");
    assert_eq!(
        pitfall(&t, &["dirfd"]),
        ("sub g\nhello\nsub g\nfstatat: ok\n".into(), 0)
    );
}

#[test]
fn mount_and_io_uring_are_refused() {
    let t = m_tree("refused");
    assert_eq!(
        pitfall(&t, &["refused"]),
        (
            "mount: Operation not permitted\numount2: Operation not permitted\n\
             io_uring_setup: Function not implemented\nacct: Operation not permitted\n"
                .into(),
            0
        )
    );
}

#[test]
fn concurrent_threads_and_forks_rewrite_paths_without_mixing() {
    let t = Tree::new("stress");
    for i in 0..8 {
        t.write(&format!("f{i}"), &format!("file {i}\n"));
    }
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/run_support/stress.py");
    let o = run(&[
        "--mount",
        &format!("/m={}", t.s()),
        "--",
        "python3",
        script.to_str().unwrap(),
    ]);
    assert_eq!(
        stdout(&o),
        "errors 0 children [0, 0, 0, 0]\n",
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_fork_racing_the_first_rewritten_call_leaves_the_child_working() {
    // The fork copies the address space before another thread's call has roost map its
    // scratch area; the child must get an area of its own (it failed every time before).
    let t = m_tree("fork-race");
    let mount = format!("/m={}", t.s());
    let script = "for i in $(seq 50); do /m/pitfalls fork_race; done | sort | uniq -c";
    for mode in [&["--no-notify"][..], &[]] {
        let mut args = mode.to_vec();
        args.extend(["--mount", &mount, "--", "sh", "-c", script]);
        assert_eq!(stdout(&run(&args)).trim(), "50 child opened", "{mode:?}");
    }
}

#[test]
fn a_restarted_send_reaches_the_socket_the_program_named() {
    // The kernel restarts the send after the handler with the arguments it holds; under
    // ptrace those are roost's, naming the physical socket, which a mount here shadows.
    let t = m_tree("restarted-send");
    let mount = format!("/m={}", t.s());
    let shadow = format!("{}=/nonexistent", t.s());
    for mode in ["--no-notify", "--pin"] {
        let args = [mode, "--mount", &mount, "--mount", &shadow, "--"];
        let o = run(&[&args[..], &["/m/pitfalls", "restarted_send"]].concat());
        assert_eq!(
            stdout(&o),
            "handler ran: yes, send: ok\n",
            "{mode}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn paths_inside_bpf_and_perf_event_structures_go_through_the_mount() {
    // bpf(BPF_OBJ_PIN/GET) names its file in a bpf_attr, a uprobe its binary in the
    // perf_event_attr. Both need root; the BPF file system is mounted in a private mount
    // namespace of the test's own.
    if !peer::root("BPF maps and uprobes") {
        return;
    }
    let t = m_tree("embedded");
    let bpffs = Tree::new("bpffs");
    let roost = env!("CARGO_BIN_EXE_roost");
    let script = format!(
        "mount -t bpf bpf {b} || exit 3; exec {roost} run --mount /m={m} --mount /b={b} -- \
         /m/pitfalls embedded /b/pinned /m/pitfalls",
        b = bpffs.s(),
        m = t.s()
    );
    let o = std::process::Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .output()
        .unwrap();
    let bpffs = peer::needs(
        o.status.code() != Some(3),
        &format!("BPF file system ({})", stderr(&o).trim()),
        "a kernel with CONFIG_BPF_SYSCALL",
    );
    if !bpffs {
        return;
    }
    assert_eq!(
        stdout(&o),
        "pin: ok\nget: ok\nuprobe: ok\n",
        "{}",
        stderr(&o)
    );
}
