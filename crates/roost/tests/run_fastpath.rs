//! The in-process fast path (docs/agent.md, "The in-process fast path"): what a program
//! answers in its own process must be what the agent answers, every call the library does
//! not see must still be translated, and no code page may exist for a hostile program to
//! use while a mapping hides names.

use roost_testkit::pool::wait_for;
use roost_testkit::run::*;
use std::time::Duration;

/// A tree for /m with the cases that decide between the fast path and the trap: plain files
/// and directories, symlinks inside the mapping (relative, absolute into the mapping,
/// absolute into a second mapping /n), a symlink outside any mapping that points into one,
/// and a FIFO.
fn trees(tag: &str) -> (Tree, Tree, Tree) {
    let m = Tree::new(&format!("{tag}-m"));
    let n = Tree::new(&format!("{tag}-n"));
    let outside = Tree::new(&format!("{tag}-out"));
    m.write("f", "mapped f\n");
    m.write("sub/f", "mapped sub/f\n");
    m.write("sub/deeper/g", "g\n");
    std::fs::set_permissions(
        m.path("sub/f"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    n.write("x", "second mapping x\n");
    n.write("f", "second mapping f\n");
    outside.write("f", "outside f\n");
    let link =
        |target: &str, at: std::path::PathBuf| std::os::unix::fs::symlink(target, at).unwrap();
    link("sub/f", m.path("rel"));
    link("/m/sub", m.path("abs"));
    link("/n", m.path("cross"));
    link("/m/sub", outside.path("into"));
    link("missing", m.path("dangling"));
    link("loop", m.path("loop"));
    link("../f", m.path("sub/up"));
    link("/m/sub/deeper/..", m.path("back"));
    // Out of reach for the ordinary user the tests run roost as, when they run as root.
    m.write("locked/in", "in\n");
    std::fs::set_permissions(
        m.path("locked"),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let fifo = std::ffi::CString::new(m.s() + "/fifo").unwrap();
    // SAFETY: a plain mkfifo of a path in the test's own tree.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    (m, n, outside)
}

/// The paths `lookups` is asked about, absolute ones first.
fn probes(outside: &Tree) -> Vec<String> {
    let o = outside.s();
    let mut v: Vec<String> = [
        "/m",
        "/m/f",
        "/m/sub",
        "/m/sub/f",
        "/m/sub/deeper/g",
        "/m/rel",
        "/m/abs",
        "/m/abs/f",
        "/m/cross",
        "/m/cross/x",
        "/m/dangling",
        "/m/missing",
        "/m/sub/",
        "/m/f/",
        "/m/./f",
        "/m/sub/../f",
        "/m//sub///f",
        "/m/sub/.",
        "/m/sub/./deeper/",
        "/m/f/.",
        "/m/f/..",
        "/m/f/x",
        "/m/rel/",
        "/m/abs/../f",
        "/m/sub/deeper/../../f",
        "/m/sub/up",
        "/m/back/f",
        "/m/loop",
        "/m/loop/x",
        "/m/dangling/x",
        "/m/cross/../m/f",
        "/usr/bin/.",
        "/usr/./bin/",
        "/m/locked/in",
        "/m/locked/",
        "/n/x",
        "/",
        "/proc/self/exe",
        "/dev/null",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend([
        format!("{o}/f"),
        format!("{o}/into"),
        format!("{o}/into/f"),
        format!("{o}/nothing"),
        // Up with `..` outside the mappings, through a symlink into one, and back into one.
        format!("{o}/../{}/f", o.rsplit('/').next().unwrap()),
        format!("{o}/into/../f"),
        format!("{o}/into/.."),
        format!("{o}/f/.."),
        format!("{o}/nothing/../f"),
        "/usr/bin/../lib".to_string(),
        "/usr/../usr/bin/..".to_string(),
        "/usr/../m/f".to_string(),
        "/usr/bin/../../m/sub/../f".to_string(),
    ]);
    // Names longer than the fast path's buffers, and than PATH_MAX.
    v.push(format!("/m/sub/{}f", "./".repeat(600)));
    v.push(format!("/m/{}", "x".repeat(5000)));
    // Relative names, from the working directory the script enters.
    v.extend(
        [
            "f", "sub/f", "rel", "abs/f", "cross/x", "../m/f", "missing", ".", "..", "sub/", "./f",
        ]
        .map(String::from),
    );
    v
}

/// `roost run MODE --mount /m=.. --mount /n=.. -- sh -c 'cd DIR && fastpath lookups ...'`,
/// run by `runner`.
fn lookups_in(
    runner: Runner,
    mode: &[&str],
    trees: &(Tree, Tree, Tree),
    cwd: &str,
) -> (String, i32) {
    let (m, n, outside) = trees;
    let probes = probes(outside).join(" ");
    // The directory the trees are made in changes while other tests run: not listed.
    let shared = std::env::temp_dir().canonicalize().unwrap();
    let script = format!(
        "cd {cwd} && FASTPATH_SHARED_DIR={} {} lookups {probes}",
        shared.display(),
        probe()
    );
    let (mm, nn) = (format!("/m={}", m.s()), format!("/n={}", n.s()));
    let mut options = mode.to_vec();
    options.extend(["--mount", &mm, "--mount", &nn]);
    let o = runner(&options, "sh", &["-c", &script]);
    (stdout(&o) + &stderr(&o), o.status.code().unwrap_or(-1))
}

#[test]
fn the_fast_path_answers_every_lookup_as_the_trap_does() {
    let t = trees("fastpath-lookups");
    let physical = t.0.path("sub").display().to_string();
    let cwds = ["/m", "/m/sub", &t.2.s(), "/", &physical].map(String::from);
    for (runner, cwd) in runners().flat_map(|r| cwds.iter().map(move |c| (r, c.as_str()))) {
        let fast = lookups_in(runner, &[], &t, cwd);
        let notified = lookups_in(runner, &["--strict"], &t, cwd);
        let ptraced = lookups_in(runner, &["--strict", "--no-notify"], &t, cwd);
        assert_eq!(fast.1, 0, "{}", fast.0);
        same_lines(
            &fast,
            &notified,
            &format!("fast path vs notifications, cwd {cwd}"),
        );
        same_lines(&fast, &ptraced, &format!("fast path vs ptrace, cwd {cwd}"));
        assert!(
            fast.0.contains("open /m/f: 9 bytes: mapped f"),
            "{}",
            fast.0
        );
        assert!(
            fast.0
                .contains("open /m/cross/x: 17 bytes: second mapping x"),
            "{}",
            fast.0
        );
    }
}

/// Asserts two runs' outputs and exit codes are the same, naming the first line that is not.
fn same_lines(a: &(String, i32), b: &(String, i32), what: &str) {
    let first = a.0.lines().zip(b.0.lines()).find(|(x, y)| x != y);
    assert!(first.is_none(), "{what}: first difference {first:?}");
    assert_eq!(a, b, "{what}");
}

/// A tree with `f` ("hello") mapped at /m, and the `--mount` argument for it.
fn hello_tree(tag: &str) -> (Tree, String) {
    let t = Tree::new(tag);
    t.write("f", "hello\n");
    let mount = format!("/m={}", t.s());
    (t, mount)
}

/// `roost run OPTIONS... -- PROGRAM ARGS...` as an ordinary user: as root, under `setpriv`
/// as nobody (a program that may hold `CAP_SYS_PTRACE` over roost gets a fast path that
/// makes lookups only), with a cache it may write.
fn roost_run(options: &[&str], program: &str, args: &[&str]) -> std::process::Output {
    let args = [options, &["--", program][..], args].concat();
    run_as_nobody(&args)
}

/// [`roost_run`] as the tests' own user.
fn roost_run_as_self(options: &[&str], program: &str, args: &[&str]) -> std::process::Output {
    run(&[options, &["--", program][..], args].concat())
}

/// How a test runs roost.
type Runner = fn(&[&str], &str, &[&str]) -> std::process::Output;

/// [`roost_run_as_self`] with `--no-landlock`: as root, a fast path that makes lookups only.
fn roost_run_outside_a_domain(
    options: &[&str],
    program: &str,
    args: &[&str],
) -> std::process::Output {
    roost_run_as_self(&[&["--no-landlock"], options].concat(), program, args)
}

/// Each way the fast path differs by who runs roost: as an ordinary user, and, when the
/// tests run as root, as root in the program's Landlock domain (opens from the page, as an
/// ordinary user's) and as root with `--no-landlock` (lookups only, no opens from the page).
fn runners() -> impl Iterator<Item = Runner> {
    let as_root: &[Runner] = if is_root() {
        &[roost_run_as_self, roost_run_outside_a_domain]
    } else {
        &[]
    };
    [roost_run as Runner]
        .into_iter()
        .chain(as_root.iter().copied())
}

/// The probe program, as a string for the command line.
fn probe() -> String {
    compiled("fastpath").display().to_string()
}

#[test]
fn the_fast_path_takes_calls_and_summary_says_which() {
    let (_t, mount) = hello_tree("fastpath-summary");
    let p = probe();
    let lookups = ["lookups", "/m/f", "/m/f", "/usr/bin"];
    let o = roost_run(&["--summary", "--mount", &mount], &p, &lookups);
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("in-process (fast path): "))
        .unwrap_or_else(|| panic!("no in-process line: {err}"));
    let calls: u64 = line.split_whitespace().nth(3).unwrap().parse().unwrap();
    // stat, lstat, fstatat, statx, access x4 and faccessat of three paths at least.
    assert!(calls >= 20, "{line}");
    for call in ["stat", "lstat", "statx", "access", "getcwd"] {
        assert!(
            err.lines()
                .any(|l| l.trim_start().starts_with(&format!("{call} "))),
            "{call} not answered in-process: {err}"
        );
    }
    // With --strict nothing is.
    let o = roost_run(&["--strict", "--summary", "--mount", &mount], &p, &lookups);
    assert!(!stderr(&o).contains("in-process"), "{}", stderr(&o));
}

/// A fresh empty directory the user roost runs as may write.
fn writable_tree(tag: &str) -> Tree {
    let t = Tree::new(tag);
    if is_root() {
        give_to_nobody(&t.root);
    }
    t
}

/// What the probe's `streams` said in the run `o` (`what` names it), which must succeed.
fn streams_output(o: std::process::Output, what: &str) -> String {
    assert!(o.status.success(), "{what}: {}", text(&o));
    stdout(&o)
}

#[test]
fn directory_streams_and_fopen_behave_as_natively() {
    // The object's own opendir, readdir and the rest, and its fopen, against the C
    // library's outside roost: every mode, error, position, a listing longer than one
    // buffer, telldir/seekdir, readdir_r, threads sharing a stream, a directory removed
    // while listed.
    let p = probe();
    let native_tree = writable_tree("fastpath-streams-native");
    let native = streams_output(
        as_nobody(&p)
            .args(["streams", &native_tree.s()])
            .output()
            .unwrap(),
        "native",
    );
    assert!(native.contains("big: 1502 entries"), "{native}");
    let under_roost = |mode: &[&str], relative: bool| {
        let tag = format!("fastpath-streams-{}{relative}", mode.join(""));
        let (t, mapped) = (writable_tree(&tag), writable_tree(&format!("{tag}-m")));
        // Relative names work in `t`, an unmapped working directory; absolute ones in `t`
        // as /m.
        let mount = format!("/m={}", if relative { mapped.s() } else { t.s() });
        let options = [&["--summary", "--mount", &mount][..], mode].concat();
        let o = if relative {
            let script = format!("cd {} && {p} streams", t.s());
            roost_run(&options, "sh", &["-c", &script])
        } else {
            roost_run(&options, &p, &["streams", "/m"])
        };
        let summary = stderr(&o);
        (streams_output(o, &format!("{mode:?}")), summary)
    };
    // The numbers on the summary's first line starting with `name ` (a trapped operation's
    // comes before the in-process section): the count, then the errors.
    let numbers = |summary: &str, name: &str| -> Vec<u64> {
        summary
            .lines()
            .find_map(|l| l.trim_start().strip_prefix(&format!("{name} ")))
            .map_or(vec![0, 0], |rest| {
                rest.split_whitespace()
                    .filter_map(|n| n.parse().ok())
                    .collect()
            })
    };
    let in_process_opens =
        |summary: &str| numbers(summary.split("in-process").nth(1).unwrap_or(""), "open")[0];
    let trapped_opens_that_opened = |summary: &str| {
        let n = numbers(summary, "openat");
        n[0] - n[1]
    };
    let mut strict_opens = 0;
    for mode in [&["--strict"][..], &["--strict", "--no-notify"][..]] {
        let (trapped, summary) = under_roost(mode, false);
        assert_eq!(trapped, native, "{mode:?} vs native");
        assert_eq!(in_process_opens(&summary), 0, "{summary}");
        strict_opens = trapped_opens_that_opened(&summary);
    }
    for relative in [false, true] {
        let (fast, summary) = under_roost(&[], relative);
        assert_eq!(
            fast, native,
            "fast path (relative names: {relative}) vs native"
        );
        // Beside the probe's own 1,500 creating opens, the opens of its directory streams
        // and fopens: all but the loader's (and, with relative names, sh's), and fopen's in
        // the modes only the C library's fopen knows.
        assert!(in_process_opens(&summary) >= 1520, "{summary}");
        assert!(
            strict_opens >= trapped_opens_that_opened(&summary) + 1510,
            "{strict_opens} trapped with --strict: {summary}"
        );
    }
}

#[test]
fn a_lookup_through_a_missing_directory_or_a_file_is_answered_in_process() {
    // The proof that a directory is free of symlinks fails with ENOENT (or ENOTDIR) before
    // any symlink: the call is then made in-process, and fails where the agent's would,
    // after the kernel's own checks of its arguments. Compilers and loaders probe many
    // directories that do not exist.
    let (_t, mount) = hello_tree("fastpath-missing-dir");
    let script = format!(
        "for n in 1 2 3 4 5 6 7 8; do test -e /m/nodir/f; test -e /m/f/x; \
         test -e /usr/nodir/x; done; stat -c %n /m/nodir/f /m/f/x /usr/nodir/x; \
         {} edges /m/nodir/ /m/nodir/x /m/f/ /m/f/x /usr/nodir/x; true",
        probe()
    );
    let run = |mode: &[&str]| {
        let options = [mode, &["--summary", "--mount", &mount][..]].concat();
        let o = roost_run(&options, "sh", &["-c", &script]);
        assert!(o.status.success(), "{}", text(&o));
        (stdout(&o), stderr(&o))
    };
    let (fast_out, fast_summary) = run(&[]);
    let (strict_out, strict_summary) = run(&["--strict"]);
    let errors = |summary: &str| -> Vec<String> {
        summary
            .lines()
            .filter(|l| l.starts_with("stat:"))
            .map(String::from)
            .collect()
    };
    assert_eq!(fast_out, strict_out);
    assert!(
        fast_out.contains("readlink-0 /m/nodir/x: Invalid argument"),
        "{fast_out}"
    );
    assert_eq!(errors(&fast_summary), errors(&strict_summary));
    assert_eq!(errors(&fast_summary).len(), 3, "{fast_summary}");
    // How many calls went to the agent for names starting so (--summary groups names by
    // their first two components).
    let trapped = |summary: &str, prefix: &str| -> u64 {
        summary
            .lines()
            .find(|l| l.split_whitespace().next() == Some(prefix))
            .map_or(0, |l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
    };
    for prefix in ["/m/nodir", "/usr/nodir"] {
        assert!(
            trapped(&strict_summary, prefix) >= 9,
            "{prefix}: {strict_summary}"
        );
        // The loop's eight went in-process; `edges`'s faccessat with flags it does not know
        // goes to the agent (two names under /m/nodir), and a call made while the agent
        // rewrites the table, once a second, is trapped.
        assert!(
            trapped(&fast_summary, prefix) <= 3,
            "{prefix}: {fast_summary}"
        );
    }
}

#[test]
fn opens_and_getcwd_in_a_directory_entered_through_a_mapping_name_it_as_the_agent_does() {
    // The agent names a working directory by the name it was entered by: one entered as /m
    // is named so in-process too (its opens, their descriptors' names, getcwd), one entered
    // by its physical name is left to the agent. (Whether a call was answered in-process
    // shows only in `--summary`, which delivers every call as a ptrace stop, where the
    // fast path leaves these calls to the agent: docs/benchmarks.md measures it.)
    let (t, mount) = hello_tree("fastpath-entered");
    t.write("sub/g", "g\n");
    let physical = t.s();
    for (dir, named) in [("/m", "/m"), (physical.as_str(), physical.as_str())] {
        let script = format!("cd {dir} && {} lookups f sub/g", probe());
        let fast = roost_run(&["--mount", &mount], "sh", &["-c", &script]);
        let strict = roost_run(&["--strict", "--mount", &mount], "sh", &["-c", &script]);
        assert!(fast.status.success(), "{}", text(&fast));
        assert_eq!(stdout(&fast), stdout(&strict), "in {dir}");
        assert!(
            stdout(&fast).contains(&format!("fd name f: {named}/f")),
            "{}",
            stdout(&fast)
        );
        assert!(
            stdout(&fast).contains(&format!("getcwd: {named}\n")),
            "{}",
            stdout(&fast)
        );
    }
}

#[test]
fn a_directory_entered_both_ways_is_named_as_the_agent_names_it_in_each_delivery_mode() {
    // One process enters the directory by its physical name, another then through the
    // mapping. With notifications the agent names a working directory by its one record of
    // how it was last entered; under ptrace stops, by each process's own way in, which the
    // table cannot tell: there the fast path leaves getcwd to the agent.
    let t = writable_tree("fastpath-entered-both");
    t.write("a/f", "f\n");
    let mount = format!("/m={}", t.s());
    let script = format!(
        "cd {}/a && {{ (sleep 0.4; /bin/pwd) & }}; sleep 0.1; cd /m/a && /bin/pwd; wait",
        t.s()
    );
    let run = |mode: &[&str]| {
        let options = [mode, &["--mount", &mount][..]].concat();
        let o = roost_run(&options, "sh", &["-c", &script]);
        assert!(o.status.success(), "{mode:?}: {}", text(&o));
        stdout(&o)
    };
    let ptraced = run(&["--no-notify"]);
    assert_eq!(
        ptraced,
        run(&["--strict", "--no-notify"]),
        "under ptrace stops"
    );
    assert_eq!(ptraced, format!("/m/a\n{}/a\n", t.s()));
    assert_eq!(run(&[]), run(&["--strict"]), "with notifications");
}

#[test]
fn calls_the_library_does_not_see_are_still_translated() {
    let (t, mount) = hello_tree("fastpath-unseen");
    let p = probe();
    // A `syscall` instruction of the program's own.
    let o = roost_run(&["--mount", &mount], &p, &["raw", "/m/f"]);
    assert_eq!(stdout(&o), "raw /m/f: size 6\n", "{}", stderr(&o));
    // A static program loads no library at all.
    let source = roost_testkit::tests_dir().join("run_support/fastpath.c");
    let static_program = t.path("fastpath-static");
    let built = std::process::Command::new("gcc")
        .args(["-O1", "-static", "-pthread", "-o"])
        .arg(&static_program)
        .arg(&source)
        .status()
        .expect("gcc");
    assert!(built.success());
    let lookups = |program: &str| {
        let o = roost_run(
            &["--mount", &mount],
            program,
            &["lookups", "/m/f", "/m/missing"],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    let dynamic = lookups(&p);
    assert!(dynamic.contains("open /m/f: 6 bytes: hello"), "{dynamic}");
    assert_eq!(lookups(static_program.to_str().unwrap()), dynamic);
}

#[test]
fn no_code_page_exists_while_a_mapping_hides_names() {
    let (t, mount) = hello_tree("fastpath-deny");
    t.write("secret/key", "s3cret\n");
    let p = probe();
    let secret = format!("{}/secret/key", t.s());
    // Without a hiding mapping the page exists, and a call made from it is the kernel's,
    // untranslated (/m does not exist outside roost): the page is real, and usable by
    // anyone who finds it, which is why nothing may be hidden while it exists.
    let o = roost_run(&["--mount", &mount], &p, &["stub", "/m/f"]);
    assert_eq!(
        stdout(&o),
        "from the code page /m/f: No such file or directory\n",
        "{}",
        stderr(&o)
    );
    // With a DENY or ENOENT mapping, or --strict, there is none to call, and the hidden
    // file stays hidden by every route.
    let deny = "/m/secret=DENY".to_string();
    let enoent = format!("{}/secret=ENOENT", t.s());
    let preload = std::fs::read_to_string("/etc/ld.so.preload").unwrap_or_default();
    for extra in [
        &["--mount", &deny][..],
        &["--mount", &enoent][..],
        &["--strict"][..],
    ] {
        let options = [&["--mount", &mount][..], extra].concat();
        let o = roost_run(&options, &p, &["stub", &secret]);
        assert_eq!(stdout(&o), "no code page\n", "{extra:?}: {}", stderr(&o));
        let o = roost_run(&options, "cat", &["/etc/ld.so.preload"]);
        assert_eq!(stdout(&o), preload, "{extra:?}: the machine's own list");
    }
    let o = roost_run(
        &["--mount", &mount, "--mount", &deny],
        &p,
        &["raw", "/m/secret/key"],
    );
    assert_eq!(stdout(&o), "raw /m/secret/key: Permission denied\n");
}

#[test]
fn signal_handlers_threads_and_vfork_children_get_right_answers() {
    let (t, mount) = hello_tree("fastpath-stress");
    t.write("sub/f", "x\n");
    let o = roost_run(
        &["--mount", &mount],
        &probe(),
        &["stress", "/m/sub/f", "20000"],
    );
    assert_eq!(stdout(&o), "wrong answers: 0\n", "{}", stderr(&o));
    assert!(o.status.success());
}

/// The fast path's page when the tests run as root: in the program's Landlock domain (the
/// default) it opens as an ordinary user's does, and the kernel keeps the program off
/// roost's memory and descriptors whatever it calls the page with; with `--no-landlock`
/// it makes lookups only and an open made from it is trapped and refused by the agent.
/// Either way the program's own lookups are answered in-process, and so are opens of
/// names a lookup finds missing.
#[test]
fn a_program_that_may_hold_cap_sys_ptrace_over_roost_gets_a_page_that_cannot_reach_it() {
    if !is_root() {
        println!("SKIP TEST: needs root (roost holding CAP_SYS_PTRACE)");
        return;
    }
    let (_t, mount) = hello_tree("fastpath-root");
    // (options, how roost's descriptor 0 reads from the page, in-process opens of `cat`s)
    let fenced: (&str, u64) = if landlock_scopes() {
        ("Permission denied", 4)
    } else {
        // No domain on this kernel: the page is the one of --no-landlock.
        ("read", 2)
    };
    let cases: [(&[&str], &str, u64); 2] = [
        (&[], fenced.0, fenced.1),
        // Outside a domain the page looks names up as the kernel lets root: roost's
        // links too, but it opens none of them (nor anything else).
        (&["--no-landlock"], "read", 2),
    ];
    for (options, descriptor, opens) in cases {
        let with = |extra: &[&str]| {
            let mut args: Vec<String> = [options, &["--summary", "--mount", &mount]]
                .concat()
                .iter()
                .map(|a| a.to_string())
                .collect();
            args.extend(extra.iter().map(|a| a.to_string()));
            run(&args.iter().map(String::as_str).collect::<Vec<_>>())
        };
        let o = with(&["--", &probe(), "stub", "/m/f", "mem"]);
        assert_eq!(
            stdout(&o),
            format!(
                "from the code page /m/f: No such file or directory\n\
                 roost's memory from the code page: Permission denied\n\
                 roost's descriptor 0 from the code page: {descriptor}\n"
            ),
            "{options:?}: {}",
            stderr(&o)
        );
        let script = "cat /m/f; stat -c %s /m/f; cat /m/missing /m/f/x /m/f 2>&1; cat /m/f";
        let o = with(&["--", "sh", "-c", script]);
        assert_eq!(
            stdout(&o),
            "hello\n6\ncat: /m/missing: No such file or directory\n\
             cat: /m/f/x: Not a directory\nhello\nhello\n",
            "{options:?}: {}",
            stderr(&o)
        );
        let summary = stderr(&o);
        let (_, in_process) = summary
            .split_once("in-process (fast path): ")
            .unwrap_or_else(|| panic!("no fast path: {summary}"));
        assert!(in_process.contains("  statx "), "{summary}");
        let opened = in_process
            .lines()
            .find_map(|l| l.strip_prefix("  open "))
            .map(|n| n.trim().parse::<u64>().unwrap());
        assert_eq!(opened, Some(opens), "{options:?}: {summary}");
    }
}

/// Whether this kernel's Landlock has scopes (ABI 6), which roost's domain needs.
fn landlock_scopes() -> bool {
    roost_base::landlock::abi().is_some_and(|abi| abi >= 6)
}

/// What the Landlock domain changes for a program run by root, against `--no-landlock`
/// (as natively): the kernel refuses it a ptrace-checked access to a process outside the
/// run and a connection to an abstract unix socket made outside it; its own processes it
/// reaches as before. A link in `/proc` (an outside process's `exe`) it still reads:
/// roost reads those for the program (it names them as the program's namespace does).
#[test]
fn a_program_run_by_root_cannot_reach_processes_outside_its_run() {
    if !is_root() {
        println!("SKIP TEST: needs root (the domain is for programs holding CAP_SYS_PTRACE)");
        return;
    }
    let mut outside = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let name = format!("roost-fence-test-{}", std::process::id());
    let addr =
        <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
            &name,
        )
        .unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    let script = format!(
        r#"
import os, socket, subprocess
child = subprocess.Popen(["sleep", "5"])
for what, reach in [
    ("outside's memory", lambda: os.close(os.open("/proc/{pid}/mem", os.O_RDONLY))),
    ("outside's executable", lambda: os.readlink("/proc/{pid}/exe")),
    ("outside's socket", lambda: socket.socket(socket.AF_UNIX).connect("\0{name}")),
    ("own child's memory", lambda: os.close(os.open("/proc/%d/mem" % child.pid, os.O_RDONLY))),
]:
    try:
        reach()
        print(what, "ok")
    except OSError as e:
        print(what, os.strerror(e.errno))
child.kill()
"#,
        pid = outside.id()
    );
    let reach = |options: &[&str]| {
        let o = run(&[options, &["--", "python3", "-c", &script]].concat());
        assert!(o.status.success(), "{options:?}: {}", text(&o));
        stdout(&o)
    };
    let native = "outside's memory ok\noutside's executable ok\noutside's socket ok\n\
                  own child's memory ok\n";
    let fenced = "outside's memory Permission denied\n\
                  outside's executable ok\n\
                  outside's socket Operation not permitted\n\
                  own child's memory ok\n";
    // Without Landlock's scopes (Linux before 6.12) there is no domain, as --no-landlock.
    assert_eq!(reach(&[]), if landlock_scopes() { fenced } else { native });
    assert_eq!(reach(&["--no-landlock"]), native);
    drop(listener);
    outside.kill().unwrap();
    outside.wait().unwrap();
}

/// How many times the loaders of a `--summary`'s run opened the fast path's object (the
/// row of the run's own directory, where nothing else is opened in these runs).
fn object_loads(summary: &str) -> u64 {
    let dir = std::env::temp_dir().join("roost-fastpath-");
    let dir = dir.to_str().expect("a UTF-8 temporary directory");
    let row = summary
        .lines()
        .find(|l| l.starts_with(dir))
        .unwrap_or_else(|| panic!("no row for {dir}* in the summary: {summary}"));
    row.split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {row:?}"))
}

/// Loading the object costs each process about four trapped calls, so a program none of
/// whose first processes answered enough calls in-process stops being offered it (one
/// process in sixteen still is), while one whose processes do keeps it; and what programs
/// see of `/etc/ld.so.preload` is the same whether or not they were offered it.
#[test]
fn programs_whose_processes_answer_few_calls_stop_loading_the_object() {
    let (_t, mount) = hello_tree("fastpath-offers");
    let summary = |script: &str| {
        let o = roost_run(&["--summary", "--mount", &mount], "sh", &["-c", script]);
        assert!(o.status.success(), "{}", stderr(&o));
        (stdout(&o), stderr(&o))
    };
    // sh, seq and 40 `true`s: the `true`s are offered it three times, then at their 16th
    // and 32nd start only.
    let (_, idle) = summary("for i in $(seq 40); do /bin/true; done");
    assert_eq!(object_loads(&idle), 2 + 3 + 2, "{idle}");
    let stats = "/m/f ".repeat(10);
    let (_, busy) = summary(&format!(
        "for i in $(seq 20); do stat -c %s {stats} >/dev/null; done"
    ));
    assert_eq!(object_loads(&busy), 2 + 20, "{busy}");
    // The same with calls delivered as notifications (`--summary` takes ptrace stops), by
    // the object's mapping in each process: 20 `grep`s, offered it 3 times and at the 16th;
    // then a 21st, declined, exec'd by a thread that is not its process's leader (the exec
    // gives it the leader's id, where its loader looks from).
    let from_a_thread = "import os, threading; threading.Thread(target=lambda: \
        os.execv('/bin/grep', ['grep', '-c', 'roost_fastpath', '/proc/self/maps'])).start()";
    let script = format!(
        "for i in $(seq 20); do grep -c roost_fastpath /proc/self/maps; done; \
         python3 -c \"{from_a_thread}\"; true"
    );
    for runner in runners() {
        let o = runner(&["--mount", &mount], "sh", &["-c", &script]);
        let loaded: Vec<bool> = stdout(&o).lines().map(|l| l != "0").collect();
        let expected: Vec<bool> = (1..=21).map(|i| i <= 3 || i == 16).collect();
        assert_eq!(loaded, expected, "{}{}", stdout(&o), stderr(&o));
    }
    // Thirty `cat`s, most of them declined: each reads roost's list, offered or not.
    let (thirty, log) = summary(
        "for i in $(seq 30); do test -r /etc/ld.so.preload && cat /etc/ld.so.preload; done",
    );
    assert!(object_loads(&log) < 30, "{log}");
    let one = &thirty[..thirty.len() / 30];
    assert!(one.contains("roost_fastpath.so"), "{thirty}");
    assert_eq!(thirty, one.repeat(30));
}

#[test]
fn procfs_reached_through_a_mapping_and_mappings_behind_host_symlinks_stay_the_agents() {
    let t = Tree::new("fastpath-procfs");
    t.write("f", "behind\n");
    let behind = format!("/var/run/roost-fastpath-{}={}", std::process::id(), t.s());
    let name = format!("/var/run/roost-fastpath-{}/f", std::process::id());
    let script = format!(
        "readlink /host/proc/self/exe; stat -c %s /host/proc/self/status >/dev/null && echo status; \
         stat -c %s {name}; test -r {name} && echo readable; cat {name}; echo $?"
    );
    let mut outputs = Vec::new();
    for mode in [&[][..], &["--strict"][..]] {
        let options = [mode, &["--mount", "/host=/", "--mount", &behind][..]].concat();
        let o = roost_run(&options, "sh", &["-c", &script]);
        outputs.push(text(&o));
    }
    assert_eq!(outputs[0], outputs[1], "fast path vs notifications");
}

/// A mapping the namespace reaches otherwise than the host's names say stays the agent's:
/// one whose parent is a dangling symlink (the agent follows it and finds nothing), and one
/// inside another mapping whose directory on the way is a symlink. The fast path answers as
/// `--strict` does.
#[test]
fn mappings_behind_dangling_symlinks_or_another_mappings_symlinks_stay_the_agents() {
    let t = Tree::new("fastpath-behind");
    t.write("p/f", "mapped\n");
    t.write("r/elsewhere/keep", "");
    std::fs::create_dir_all(t.path("x")).unwrap();
    std::os::unix::fs::symlink(t.path("t"), t.path("x/y")).unwrap();
    std::os::unix::fs::symlink(t.path("r/elsewhere"), t.path("r/z")).unwrap();
    let (root, p, r) = (t.s(), t.path("p"), t.path("r"));
    let dangling = format!("{root}/x/y/m={}", p.display());
    let outer = format!("{root}/a={}", r.display());
    let inner = format!("{root}/a/z/m={}", p.display());
    let script = format!(
        "stat -c %s {root}/x/y/m/f; cat {root}/x/y/m/f; test -r {root}/a/z/m/f && echo readable; \
         cat {root}/a/z/m/f; ls {root}/a/z; true"
    );
    let mut outputs = Vec::new();
    for mode in [&[][..], &["--strict"][..]] {
        let mounts = ["--mount", &dangling, "--mount", &outer, "--mount", &inner];
        let o = roost_run_as_self(&[mode, &mounts[..]].concat(), "sh", &["-c", &script]);
        outputs.push(text(&o));
    }
    assert!(outputs[1].contains("keep"), "{}", outputs[1]);
    assert!(!outputs[1].contains("mapped"), "{}", outputs[1]);
    assert_eq!(outputs[0], outputs[1], "fast path vs notifications");
}

/// A program run through a mapped dynamic loader (the kernel's executable is the loader) is
/// counted by the executable the kernel shows, as the object counts what it answered: one
/// whose processes answer many calls in-process keeps being offered the object.
#[test]
fn a_program_run_through_a_mapped_loader_keeps_its_object() {
    let (_t, mount) = hello_tree("fastpath-loader");
    let busy = "import os; [os.stat('/m/f') for _ in range(20)]; \
                print(int('roost_fastpath' in open('/proc/self/maps').read()))";
    let script = format!("for i in $(seq 8); do python3 -c \"{busy}\"; done");
    let o = roost_run_as_self(
        &["--mount", &mount, "--mount", "/lib64=/lib64"],
        "sh",
        &["-c", &script],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(stdout(&o), "1\n".repeat(8), "{}", stderr(&o));
}

/// What a shell session of everyday programs shows of a mapped tree it builds.
const EVERYDAY: &str = r#"
set -e
cd /m
mkdir -p src/a/b && printf 'x\n' > src/a/f && ln -s a/f src/link && ln -s /m/src/a src/abs
cp -r src copy && mv copy moved && cp -a src kept
find . | sort
find . -type f -printf '%p %s %m\n' | sort
ls -la src/a | awk '{print $1, $5, $NF}'
tar cf - src | tar tf - | sort
du -a src | awk '{print $2}' | sort
python3 -c 'import os, shutil; print(sorted(os.listdir("/m/src")), os.path.samefile("/m/src/link", "/m/src/a/f"), shutil.which("sh"), os.getcwd(), os.path.realpath("src/abs/f"))'
cd src/a && pwd && cd .. && pwd -P
rm -rf moved kept && ls
printf '#define H 3\n' > /m/src/a/h.h && printf '#include "../h.h"\nint main(void) { return H; }\n' > /m/src/a/b/m.c
cd /m/src/a/b && gcc -o m m.c -I../.. && { ./m || echo "m exits $?"; } && rm m && cd /m
readlink -f src/abs/../link && realpath src/a/b/../../abs /usr/bin/../lib/../bin && realpath -m src/nothing/../a
"#;

#[test]
fn everyday_programs_see_the_same_tree_with_and_without_the_fast_path() {
    let mut outputs = Vec::new();
    for mode in [&[][..], &["--strict"][..], &["--strict", "--no-notify"][..]] {
        let t = Tree::new(&format!("fastpath-everyday-{}", outputs.len()));
        if is_root() {
            give_to_nobody(&t.root);
        }
        let mount = format!("/m={}", t.s());
        let options = [mode, &["--mount", &mount][..]].concat();
        let o = roost_run(&options, "sh", &["-c", EVERYDAY]);
        assert!(o.status.success(), "{mode:?}: {}", text(&o));
        outputs.push(text(&o));
    }
    assert!(outputs[0].contains("m exits 3"), "{}", outputs[0]);
    assert_eq!(outputs[0], outputs[1], "fast path vs notifications");
    assert_eq!(outputs[1], outputs[2], "notifications vs ptrace");
}

/// The run directories (`roost-fastpath-PID-*`) of the roost whose process id is `pid`.
fn run_dirs_of(pid: u32) -> Vec<std::path::PathBuf> {
    let prefix = format!("roost-fastpath-{pid}-");
    let bases = std::env::var_os("XDG_RUNTIME_DIR")
        .map(std::path::PathBuf::from)
        .into_iter()
        .chain([std::env::temp_dir()]);
    bases
        .filter_map(|base| std::fs::read_dir(base).ok())
        .flat_map(|entries| entries.flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

#[test]
fn the_files_of_a_killed_run_are_removed_by_a_later_one() {
    // A roost killed with SIGKILL cannot remove its object, table and preload list; the
    // next run finds the directory's lock free (the kernel dropped it with the killed
    // run's descriptors) and removes it, once it is a minute old.
    let mut killed = roost().args(["run", "--", "sleep", "30"]).spawn().unwrap();
    wait_for("the run's directory", Duration::from_secs(2), || {
        !run_dirs_of(killed.id()).is_empty()
    });
    let dirs = run_dirs_of(killed.id());
    assert_eq!(dirs.len(), 1, "the run's directory: {dirs:?}");
    // A live run's directory, however old, stays.
    let an_hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let age = |dir: &std::path::Path| {
        std::fs::File::open(dir)
            .unwrap()
            .set_modified(an_hour_ago)
            .unwrap()
    };
    age(&dirs[0]);
    let o = run(&["--", "sleep", "0.5"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(dirs[0].exists(), "a live run's directory was removed");
    killed.kill().unwrap();
    killed.wait().unwrap();
    assert!(
        dirs[0].exists(),
        "SIGKILL gave the run a chance to clean up"
    );
    // The killed run's agent and program die with it, a moment later (their parent-death
    // signal): until then they hold the lock.
    for _ in 0..5 {
        let o = run(&["--", "sleep", "0.5"]);
        assert!(o.status.success(), "{}", text(&o));
        if !dirs[0].exists() {
            return;
        }
    }
    panic!("the killed run's directory stayed: {}", dirs[0].display());
}

#[test]
fn opens_of_missing_names_fail_as_the_agents_would_and_keep_its_record() {
    // An open, even one that fails, tells the agent by which name a mapped directory was
    // reached (the name its descriptors then show); and the kernel takes a descriptor
    // before it looks a name up, so with none free an open of a missing name is EMFILE
    // (roost's own walk of a mapped name answers ENOENT or ENOTDIR first: docs/agent.md).
    let (t, mount) = hello_tree("fastpath-missing-opens");
    let phys = t.s();
    let views = format!(
        "exec 3</m/f; cat {phys}/nope 2>/dev/null; readlink /proc/self/fd/3; \
         exec 4<{phys}/f; cat /m/nope 2>/dev/null; readlink /proc/self/fd/4"
    );
    let full = "import os, resource\n\
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n\
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))\n\
        held = []\n\
        try:\n    while True: held.append(os.open('/dev/null', os.O_RDONLY))\n\
        except OSError as e: print('filled:', e.strerror)\n\
        for name in ['/usr/nonexistent/x', '/usr/bin/nonexistent', '/usr/bin/true/x']:\n\
        \x20   try: os.open(name, os.O_RDONLY)\n\
        \x20   except OSError as e: print(name, e.strerror)\n\
        os.close(held.pop())\n\
        for name in ['/m/nope', '/m/f/x']:\n\
        \x20   try: os.open(name, os.O_RDONLY)\n\
        \x20   except OSError as e: print(name, e.strerror)\n";
    for runner in runners() {
        let outputs: Vec<String> = [&[][..], &["--strict"][..]]
            .iter()
            .map(|mode| {
                let options = [*mode, &["--mount", &mount][..]].concat();
                let a = runner(&options, "sh", &["-c", &views]);
                let b = runner(&options, "python3", &["-c", full]);
                stdout(&a) + &stdout(&b) + &stderr(&b)
            })
            .collect();
        assert_eq!(outputs[0], outputs[1], "fast path vs notifications");
        assert!(
            outputs[0].contains(
                "/usr/nonexistent/x Too many open files\n\
                 /usr/bin/nonexistent Too many open files\n\
                 /usr/bin/true/x Too many open files\n\
                 /m/nope No such file or directory\n/m/f/x Not a directory\n"
            ),
            "{}",
            outputs[0]
        );
    }
}

#[test]
fn processes_left_running_keep_the_runs_files_after_roost_returns() {
    // roost returns when the program exits; a process it left running is still traced by
    // the agent, and its later execs still find the fast path's list and object (the
    // agent removes them at its own end, not the front as it returns).
    let t = Tree::new("fastpath-left-running");
    let out = t.path("out");
    let script = format!(
        "(sleep 1; cat /etc/ld.so.preload >{o} 2>&1; /bin/true 2>>{o}; echo done >>{o}) &",
        o = out.display()
    );
    let o = run(&["--", "sh", "-c", &script]);
    assert!(o.status.success(), "{}", text(&o));
    let mut seen = String::new();
    for _ in 0..100 {
        seen = std::fs::read_to_string(&out).unwrap_or_default();
        if seen.ends_with("done\n") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let lines: Vec<&str> = seen.lines().collect();
    assert!(
        lines.len() >= 2
            && lines[0].ends_with("/roost_fastpath.so")
            && lines.last() == Some(&"done"),
        "{seen}"
    );
    assert!(!seen.contains("cannot be preloaded"), "{seen}");
    // Once the last of them ends, so does the agent, which removes the files.
    let dir = std::path::Path::new(lines[0])
        .parent()
        .unwrap()
        .to_path_buf();
    wait_for(
        &format!("the run's files {} to go", dir.display()),
        Duration::from_secs(5),
        || !dir.exists(),
    );
}

#[test]
fn a_run_leaves_no_files_behind() {
    // With `--summary` roost is one process; without, the program's exit is reported by a
    // front while the agent ends the run.
    for summary in [&["--summary"][..], &[]] {
        let mut child = roost()
            .arg("run")
            .args(summary)
            .args(["--", "sh", "-c", "cat /etc/ld.so.preload >/dev/null"])
            .spawn()
            .unwrap();
        let front = child.id();
        assert!(child.wait().unwrap().success());
        wait_for(
            &format!("{summary:?}: {:?} to go", run_dirs_of(front)),
            Duration::from_secs(2),
            || run_dirs_of(front).is_empty(),
        );
    }
}
