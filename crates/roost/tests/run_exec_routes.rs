//! Execs by every route roost gives them (supervisor/exec.rs): let through by a notification
//! when nothing in them is mapped, sent back to a ptrace stop when they must be rewritten,
//! from a thread that is not the main one, interrupted by signals, of a memfd, failing along
//! `PATH` before one succeeds. What must hold whatever the route: the program that runs, its
//! `/proc/self/exe`, and the rewritten calls made after an exec roost saw no stop for. Each
//! case runs with notifications and with `--no-notify`, which must agree.

use roost_testkit::run::*;

/// A tree with the helper at `bin/exec_paths` (so `/m/bin/exec_paths` is a mapped program).
fn tree(tag: &str) -> Tree {
    let t = Tree::new(tag);
    std::fs::create_dir_all(t.path("bin")).unwrap();
    std::fs::copy(compiled("exec_paths"), t.path("bin/exec_paths")).unwrap();
    t
}

#[test]
fn a_mapped_program_runs_under_its_logical_name_by_every_route() {
    let t = tree("exec-routes");
    let native = compiled("exec_paths");
    let native = native.to_str().unwrap();
    let itself = format!("self {native}\n");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["/m/bin/exec_paths", "self"],
            "self /m/bin/exec_paths\n",
        ),
        // An unmapped program exec'ing a mapped one.
        (
            vec![native, "try", "/m/bin/exec_paths", "--", "self"],
            "self /m/bin/exec_paths\n",
        ),
        // A mapped one exec'ing an unmapped one: the kernel's name is right again.
        (
            vec!["/m/bin/exec_paths", "try", native, "--", "self"],
            &itself,
        ),
        // Failures first (a missing mapped file, a missing host file), then success.
        (
            vec![
                "/m/bin/exec_paths",
                "try",
                "/m/bin/missing",
                "/nonexistent/prog",
                "/m/bin/exec_paths",
                "--",
                "self",
            ],
            "exec /m/bin/missing: No such file or directory\n\
             exec /nonexistent/prog: No such file or directory\n\
             self /m/bin/exec_paths\n",
        ),
        // Nothing runs: the program is still itself.
        (
            vec!["/m/bin/exec_paths", "try", "/nonexistent/prog", "--"],
            "exec /nonexistent/prog: No such file or directory\nself /m/bin/exec_paths\n",
        ),
        (
            vec![native, "thread", "/m/bin/exec_paths", "self"],
            "self /m/bin/exec_paths\n",
        ),
        (vec!["/m/bin/exec_paths", "thread", native, "self"], &itself),
        (
            vec![native, "memfd", native, "x", "self"],
            "self /memfd:prog (deleted)\n",
        ),
    ];
    for (argv, want) in cases {
        let (out, code) = run_both(&t, &argv);
        assert_eq!((out.as_str(), code), (want, 0), "{argv:?}");
    }
}

#[test]
fn execs_and_lookups_interrupted_by_signals_run_once_and_whole() {
    // A 200 us timer whose handler has no SA_RESTART interrupts calls while roost decides
    // them (or before it took them): execs of a mapped program (sent back to a stop) and of
    // an unmapped one (let through), and lookups, must never run twice. Only notifications
    // have that window (a ptrace stop is not interrupted), and a timer that fast makes
    // ptrace stops crawl: the stress runs with notifications alone.
    let t = tree("exec-signals");
    let native = compiled("exec_paths");
    let script = format!(
        "for i in $(seq 40); do /m/bin/exec_paths timer /m/bin/exec_paths self; \
         {n} timer {n} self; done | sort | uniq -c; /m/bin/exec_paths stat /m/bin 5000",
        n = native.display()
    );
    let mount = format!("/m={}", t.s());
    let storm = |attach: &str| {
        let o = run(&[
            "--attach", attach, "--mount", &mount, "--", "timeout", "60", "sh", "-c", &script,
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    // Traced throughout, roost makes such a call restart after the handler: none fails.
    let want = format!(
        "     40 self /m/bin/exec_paths\n     40 self {}\nEINTR 0\n",
        native.display()
    );
    assert_eq!(storm("all"), want);
    // Attached on demand, a process is not stopped at its signals: a call interrupted
    // before roost took it fails with EINTR, as the kernel does it for any seccomp
    // supervisor (documented), and still none runs twice or fails otherwise.
    let out = storm("lazy");
    let mut runs = 0;
    for line in out.lines() {
        let (count, what) = line.trim().split_once(' ').unwrap_or(("", line));
        if let Some(n) = line.strip_prefix("EINTR ") {
            let n: u32 = n.parse().unwrap();
            assert!(n < 250, "{n} of 5,000 lookups failed with EINTR:\n{out}");
        } else if what.starts_with("timer exec ") && what.ends_with(": Interrupted system call") {
            runs += count.parse::<u32>().unwrap();
        } else {
            assert!(
                what == "self /m/bin/exec_paths" || what == format!("self {}", native.display()),
                "{out}"
            );
            runs += count.parse::<u32>().unwrap();
        }
    }
    assert_eq!(runs, 80, "each exec ran once or failed once:\n{out}");
}

#[test]
fn rewritten_calls_after_an_exec_roost_did_not_stop_for_find_their_scratch_area() {
    // The outer shell enters /m (a rewritten chdir: it has a scratch area), so every child
    // it forks starts with one; each child execs an unmapped shell (let through, no stop),
    // whose own rewritten chdir and exec of a mapped program need a new area in the new
    // address space.
    let t = tree("exec-scratch");
    std::fs::create_dir_all(t.path("sub")).unwrap();
    t.write("sub/f", "in sub\n");
    let script = "cd /m && for i in 1 2 3; do \
                  sh -c 'cd /m/sub && cat f && /m/bin/exec_paths self && pwd'; done";
    let (out, code) = sh_both(&t, script);
    assert_eq!(
        (out.as_str(), code),
        (
            "in sub\nself /m/bin/exec_paths\n/m/sub\n"
                .repeat(3)
                .as_str(),
            0
        )
    );
}

#[test]
fn programs_on_path_are_found_past_failed_tries_in_mapped_directories() {
    // execvp and posix_spawnp (Python's subprocess) try each PATH entry: misses in mapped
    // and unmapped directories, then the mapped program.
    let t = tree("exec-path");
    std::fs::create_dir_all(t.path("empty")).unwrap();
    let program = "import subprocess; \
                   print(subprocess.run(['exec_paths', 'self'], capture_output=True, text=True).stdout, end='')";
    let (out, code) = run_both(
        &t,
        &[
            "env",
            "PATH=/m/empty:/nonexistent:/m/bin:/usr/bin:/bin",
            "python3",
            "-c",
            program,
        ],
    );
    assert_eq!((out.as_str(), code), ("self /m/bin/exec_paths\n", 0));
    let (out, code) = run_both(
        &t,
        &[
            "env",
            "PATH=/m/empty:/nonexistent:/m/bin:/usr/bin:/bin",
            "sh",
            "-c",
            "exec_paths self",
        ],
    );
    assert_eq!((out.as_str(), code), ("self /m/bin/exec_paths\n", 0));
}
