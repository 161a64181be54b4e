//! roost run's own processes are out of the program's reach (docs/security.md, "roost
//! run's supervisor"): a program tries every way it knows to reach the front and the agent
//! (signals, ptrace, pidfds and their descriptors, memory, `/proc/PID` files by several
//! spellings, forged pidfs handles) and then to read a file a `DENY` mapping hides, as
//! root and as an ordinary user, in each delivery mode; calls aimed at the program's own
//! processes give what they give natively; and a roost killed from outside leaves nothing
//! of the program able to reach the hidden file.

use roost_testkit::peer::{self, is_root};
use roost_testkit::run::*;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The delivery modes: notifications attaching on demand, notifications with every
/// process traced, ptrace stops only.
const MODES: [&[&str]; 3] = [&[], &["--attach", "all"], &["--no-notify"]];

/// A tree holding `secret`, readable by anyone natively (only the mapping hides it), and
/// a cache directory anyone may write.
fn tree(tag: &str) -> Tree {
    use std::os::unix::fs::PermissionsExt;
    let t = Tree::new(tag);
    t.write("secret", "the secret\n");
    std::fs::create_dir_all(t.path("cache")).unwrap();
    for (p, mode) in [("", 0o755), ("secret", 0o644), ("cache", 0o777)] {
        std::fs::set_permissions(t.path(p), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    t
}

/// `roost run --cache CACHE --mount SECRET=DENY MODE... -- ARGV...`, as nobody when
/// `as_nobody` (the tests run as root).
fn roost_run(t: &Tree, mode: &[&str], as_nobody: bool, argv: &[&str]) -> Command {
    let roost = env!("CARGO_BIN_EXE_roost");
    let mut c = if as_nobody {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", roost]);
        c
    } else {
        Command::new(roost)
    };
    let deny = format!("{}=DENY", t.path("secret").display());
    c.arg("run")
        .arg("--cache")
        .arg(t.path("cache"))
        .args(["--mount", &deny])
        .args(mode)
        .arg("--")
        .args(argv);
    c.current_dir(&t.root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// The lines `child` writes to its standard output, as they come.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            if tx.send(line.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    rx
}

/// The child of `parent` (the agent, child of the front), once it is there.
fn child_of(parent: i32) -> i32 {
    for _ in 0..500 {
        let found = std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let fields = stat_fields(pid)?;
            (fields[1].parse::<i32>().ok()? == parent).then_some(pid)
        });
        if let Some(pid) = found {
            return pid;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("no child of {parent}");
}

/// The fields of `/proc/PID/stat` after the command name.
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    Some(after.split_whitespace().map(str::to_owned).collect())
}

/// The threads of `pid` but itself.
fn threads_of(pid: i32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|&t| t != pid)
        .collect()
}

/// Who owns `/proc/PID/mem` (root when the process is not dumpable).
fn mem_owner(pid: i32) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/mem")).unwrap().uid()
}

/// What one run of `supervisor_attack` said: its lines, and roost's processes.
struct Attack {
    lines: Vec<String>,
    front: i32,
    agent: i32,
    threads: Vec<i32>,
}

/// Runs the attack under roost in `mode`; the harness names roost's processes to it (the
/// front, the agent and the agent's threads) and checks, as the program runs, who owns
/// their `/proc/PID/mem`. A run that does not end within two minutes (roost stopped or
/// held by the program) fails.
fn attack(mode: &[&str], as_nobody: bool) -> Attack {
    let t = tree("supervisor");
    let attacker = compiled("supervisor_attack");
    let secret = t.path("secret").display().to_string();
    let mut roost = roost_run(&t, mode, as_nobody, &[attacker.to_str().unwrap(), &secret])
        .spawn()
        .unwrap();
    let lines = lines_of(&mut roost);
    let front = roost.id() as i32;
    let ready = lines.recv_timeout(Duration::from_secs(60));
    assert_eq!(ready.as_deref(), Ok("ready"), "{mode:?}");
    let agent = child_of(front);
    let threads = threads_of(agent);
    if as_nobody {
        // Not dumpable: their /proc files are root's, not the user's they run as.
        assert_eq!((mem_owner(front), mem_owner(agent)), (0, 0), "{mode:?}");
    }
    let ids: Vec<String> = [
        format!("P:{front}"),
        format!("P:{agent}"),
        format!("A:{agent}"),
    ]
    .into_iter()
    .chain(threads.iter().map(|t| format!("T:{t}")))
    .collect();
    let mut stdin = roost.stdin.take().unwrap();
    writeln!(stdin, "{}", ids.join(" ")).unwrap();
    drop(stdin);
    let mut said = Vec::new();
    loop {
        match lines.recv_timeout(Duration::from_secs(120)) {
            Ok(line) => said.push(line),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let _ = roost.kill();
                let _ = roost.wait();
                panic!(
                    "{mode:?}: the attack never ended; it said:\n{}",
                    said.join("\n")
                );
            }
        }
    }
    let status = roost.wait().unwrap();
    assert!(status.success(), "{mode:?}: {status}\n{}", said.join("\n"));
    Attack {
        lines: said,
        front,
        agent,
        threads,
    }
}

/// Every probe failed with EPERM or EACCES (SO_PEERPIDFD with ENOPROTOOPT), each of
/// roost's processes and threads was probed, and the hidden file stayed hidden.
fn assert_repelled(a: &Attack, mode: &[&str]) {
    let all = a.lines.join("\n");
    let mut probed = std::collections::HashSet::new();
    for line in &a.lines {
        let f: Vec<&str> = line.split(' ').collect();
        assert!(f.len() >= 3, "{mode:?}: {line}");
        let (probe, target, result) = (f[0], f[1], f[2]);
        let thread = a.threads.contains(&target.parse().unwrap_or(0));
        let expected: &[&str] = match probe {
            "socket-peerpidfd" => &["ENOPROTOOPT"],
            "denied" => &["EACCES"],
            // Documented: kill and sigqueue naming a thread's id are not trapped (signal 0
            // here; a real one would end roost, which frees nothing: the last test).
            "kill" | "rt_sigqueueinfo" if thread => &["ok", "EPERM"],
            _ => &["EPERM", "EACCES"],
        };
        assert!(
            expected.contains(&result),
            "{mode:?}: {probe} of {target} gave {result}\n{all}"
        );
        probed.insert((probe.to_string(), target.parse::<i32>().unwrap_or(0)));
    }
    for target in [a.front, a.agent].iter().chain(&a.threads) {
        for probe in [
            "kill",
            "tkill",
            "fcntl-setown",
            "ptrace-seize",
            "process_vm_readv",
            "proc-mem",
            "proc-fd",
        ] {
            assert!(
                probed.contains(&(probe.to_string(), *target)),
                "{mode:?}: no {probe} of {target}\n{all}"
            );
        }
    }
    for probe in ["pidfd_open", "pidfs-handle", "kill-SIGSTOP"] {
        assert!(probed.contains(&(probe.to_string(), a.agent)), "{all}");
    }
    // Notifications are answered by threads of their own.
    let notified = !mode.contains(&"--no-notify");
    assert!(
        !notified || !a.threads.is_empty(),
        "{mode:?}: the agent has threads"
    );
    assert!(all.ends_with("denied 0 EACCES"), "{mode:?}\n{all}");
}

#[test]
fn a_program_run_by_root_cannot_reach_roost() {
    if !peer::root("a program run by root; the ordinary user's test is the other half") {
        return;
    }
    for mode in MODES {
        assert_repelled(&attack(mode, false), mode);
    }
}

#[test]
fn a_program_run_by_an_ordinary_user_cannot_reach_roost() {
    // As root, roost runs as nobody; otherwise as the user the tests run as.
    let as_nobody = is_root();
    for mode in MODES {
        assert_repelled(&attack(mode, as_nobody), mode);
    }
}

#[test]
fn calls_aimed_at_the_programs_own_processes_answer_as_natively() {
    let t = tree("aimed-own");
    let program = compiled("aimed_at_own");
    let native = Command::new(&program).output().unwrap();
    assert!(native.status.success(), "{}", stderr(&native));
    let native = stdout(&native);
    assert!(native.lines().count() > 30, "{native}");
    for mode in MODES {
        for as_nobody in [false, true] {
            if as_nobody && !peer::root("a program run as nobody") {
                continue;
            }
            let run = roost_run(&t, mode, as_nobody, &[program.to_str().unwrap()])
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert!(run.status.success(), "{mode:?}: {}", stderr(&run));
            let native = if as_nobody {
                let o = Command::new("setpriv")
                    .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                    .arg(&program)
                    .output()
                    .unwrap();
                stdout(&o)
            } else {
                native.clone()
            };
            assert_eq!(stdout(&run), native, "{mode:?}, nobody: {as_nobody}");
        }
    }
}

/// A program process left running when roost is killed (SIGKILL, from outside: the
/// program may not) is not free: traced ones die with roost, the others find every call
/// roost would have checked failing (ENOSYS), the hidden file included.
#[test]
fn a_killed_roost_leaves_no_process_free_to_read_what_it_hid() {
    let t = tree("supervisor-killed");
    let secret = t.path("secret").display().to_string();
    // A child in a session of its own (so nothing but roost's death reaches it) waits for
    // the harness's word, then tries the hidden file, writing on the standard output it
    // already holds.
    let script = format!(
        r#"
import os, sys
if os.fork() == 0:
    os.setsid()
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        with open({secret:?}) as f:
            print("read", f.read().strip(), flush=True)
    except OSError as e:
        print("refused", e.errno, flush=True)
    os._exit(0)
os.wait()
"#
    );
    for mode in MODES {
        let mut roost = roost_run(&t, mode, false, &["python3", "-c", &script])
            .spawn()
            .unwrap();
        let lines = lines_of(&mut roost);
        assert_eq!(
            lines.recv_timeout(Duration::from_secs(60)).as_deref(),
            Ok("ready"),
            "{mode:?}"
        );
        let agent = child_of(roost.id() as i32);
        let mut stdin = roost.stdin.take().unwrap();
        // SAFETY: a signal to the agent this test started.
        unsafe { libc::kill(agent, libc::SIGKILL) };
        let _ = roost.wait();
        let _ = writeln!(stdin, "go");
        drop(stdin);
        let said: Vec<String> = lines.iter().collect();
        assert!(
            !said.iter().any(|l| l.starts_with("read")),
            "{mode:?}: {said:?}"
        );
        // Untraced (attaching on demand), it lives on without its calls; traced, it died.
        let expected: &[&str] = if mode.is_empty() {
            &["refused 38"]
        } else {
            &[]
        };
        assert_eq!(said, expected, "{mode:?}");
    }
    assert!(Path::new(&secret).exists());
}
