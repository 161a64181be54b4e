//! A child cloned with `CLONE_UNTRACED` would run without a tracer: its calls handled by
//! ptrace would fail with ENOSYS and the rest would leave the namespace. roost clears the
//! flag (the filter traps only a `clone` that asks for it) and traces the child as any
//! other. Both delivery paths.

use roost_testkit::run::*;

const UNTRACED_CHILD: &str = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
CLONE_UNTRACED, SIGCHLD = 0x00800000, 17
pid = libc.syscall(56, CLONE_UNTRACED | SIGCHLD, 0, 0, 0, 0)
if pid == 0:
    try:
        print("child", open("/m/f").read().strip(), os.getcwd(), flush=True)
    except OSError as e:
        print("child", e.strerror, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
print("parent", open("/m/f").read().strip())
"#;

#[test]
fn an_untraced_clone_is_traced_all_the_same() {
    let t = Tree::new("clone-untraced");
    t.write("f", "mapped\n");
    let (out, code) = run_both_with(
        &t,
        &[],
        &[
            "sh",
            "-c",
            "cd /m && exec python3 -c \"$0\"",
            UNTRACED_CHILD,
        ],
    );
    assert_eq!(
        (out.as_str(), code),
        ("child mapped /m\nparent mapped\n", 0)
    );
}
