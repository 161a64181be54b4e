//! Attaching on demand (`--attach lazy`, the default): a process that makes no call needing
//! a ptrace stop is never traced, one that does is traced for that call only, its scratch
//! area is found again (also by its children, which inherit it), and what the program
//! leaves running stays below roost, which kills it when asked to end. `--attach all`
//! traces every process.

use roost_testkit::run::*;

/// The tracer of this shell, read with builtins only (no child process).
const TRACER_OF_SHELL: &str =
    "while read -r k v; do [ \"$k\" = TracerPid: ] && echo \"$k $v\"; done < /proc/$$/status";

fn tracer_pid(out: &str) -> Vec<i32> {
    out.lines()
        .filter_map(|l| l.strip_prefix("TracerPid: "))
        .map(|v| v.trim().parse().unwrap())
        .collect()
}

#[test]
fn a_process_is_traced_only_for_the_calls_that_need_a_stop() {
    let t = Tree::new("attach-lazy");
    t.write("sub/f", "in sub\n");
    let mount = format!("/m={}", t.s());
    // Before and after a chdir into the mapping (rewritten at a ptrace stop): untraced
    // both times, and the chdir took effect.
    let script = format!("{TRACER_OF_SHELL}; cd /m/sub && {TRACER_OF_SHELL}; cat f; pwd");
    let o = run(&["--mount", &mount, "--", "bash", "-c", &script]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(tracer_pid(&stdout(&o)), [0, 0], "{}", stdout(&o));
    assert!(stdout(&o).ends_with("in sub\n/m/sub\n"), "{}", stdout(&o));
    // Traced throughout with --attach all.
    let o = run(&[
        "--attach", "all", "--mount", &mount, "--", "bash", "-c", &script,
    ]);
    let tracers = tracer_pid(&stdout(&o));
    assert!(
        tracers.len() == 2 && tracers.iter().all(|&p| p > 0),
        "{}",
        stdout(&o)
    );
}

#[test]
fn the_scratch_area_is_mapped_once_and_found_again_by_children() {
    let t = Tree::new("attach-scratch");
    std::fs::create_dir_all(t.path("a/b")).unwrap();
    let mount = format!("/m={}", t.s());
    // This shell's (or subshell's) address space size, in kB, read with builtins.
    let vm = "vm() { while read -r k v u; do [ \"$k\" = VmSize: ] && echo $v; done \
              < /proc/$BASHPID/status; }";
    // The first rewritten chdir maps the 16 MiB area; two more in the shell, and two in a
    // child of it (forked, not exec'd: a subshell, which inherits the area), map nothing.
    let script = format!(
        "{vm}; z=$(vm); cd /m; a=$(vm); cd /m/a && cd /m/a/b; b=$(vm); \
         (cd /m/a && cd /m; c=$(vm); echo $((a - z)) $((b - a)) $((c - b)); pwd); pwd"
    );
    let o = run(&["--mount", &mount, "--", "bash", "-c", &script]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let grown: Vec<i64> = out
        .lines()
        .next()
        .unwrap()
        .split(' ')
        .map(|n| n.parse().unwrap())
        .collect();
    assert!(grown[0] >= 16384, "the first chdir mapped the area: {out}");
    assert!(grown[1] < 16384 && grown[2] < 16384, "mapped again: {out}");
    assert!(out.ends_with("\n/m\n/m/a/b\n"), "{out}");
}

#[test]
fn what_the_program_leaves_running_is_killed_when_roost_is_told_to_end() {
    let t = Tree::new("attach-end");
    let mount = format!("/m={}", t.s());
    // A grandchild roost never traced, in a process group of its own.
    let o = std::process::Command::new("timeout")
        .args([
            "1",
            env!("CARGO_BIN_EXE_roost"),
            "run",
            "--mount",
            &mount,
            "--",
            "sh",
            "-c",
            "setsid sleep 30.4715 & wait",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(124), "{}", stderr(&o));
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        processes_with("sleep 30.4715").is_empty(),
        "a process below roost outlived it"
    );
}
