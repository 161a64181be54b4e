//! Opens of mapped paths. By default the notification thread performs them and hands the
//! descriptor over (SECCOMP_IOCTL_NOTIF_ADDFD); with `--no-notify` the kernel opens the
//! rewritten path in the program. Each test runs both ways and expects the kernel's own
//! behaviour: flags, umask, close-on-exec, FIFOs, leases, errors, limits and dropped
//! privileges.

use roost_testkit::peer;
use roost_testkit::run::*;

fn mode_of(t: &Tree, rel: &str) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(t.path(rel)).unwrap().permissions().mode() & 0o7777
}

#[test]
fn created_files_get_the_callers_umask() {
    let t = Tree::new("open-umask");
    let script = "rm -f /m/private /m/shared; umask 077; : > /m/private; umask 022; \
                  : > /m/shared; stat -c %a /m/private /m/shared";
    let (out, code) = sh_both(&t, script);
    assert_eq!((out.as_str(), code), ("600\n644\n", 0));
    assert_eq!(mode_of(&t, "private"), 0o600);
    // An unnamed file made with O_TMPFILE and given a name: the umask applies too.
    let script = r#"rm -f /m/linked; python3 -c '
import ctypes, os
os.umask(0o077)
fd = os.open("/m", os.O_TMPFILE | os.O_WRONLY, 0o666)
AT_FDCWD, AT_SYMLINK_FOLLOW = -100, 0x400
libc = ctypes.CDLL(None, use_errno=True)
path = f"/proc/self/fd/{fd}".encode()
assert libc.linkat(AT_FDCWD, path, AT_FDCWD, b"/m/linked", AT_SYMLINK_FOLLOW) == 0, ctypes.get_errno()
print(oct(os.stat("/m/linked").st_mode & 0o777))
'"#;
    let (out, code) = sh_both(&t, script);
    assert_eq!((out.as_str(), code), ("0o600\n", 0));
}

#[test]
fn flags_behave_as_the_kernels() {
    let t = Tree::new("open-flags");
    t.write("f", "hello\n");
    let script = r#"
        printf 'hello\n' > /m/f
        echo appended >> /m/f
        cat /m/f
        python3 - <<'EOF'
import errno, os
def code(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
print("excl", code(lambda: os.open("/m/f", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)))
print("missing", code(lambda: os.open("/m/nope", os.O_RDONLY)))
print("dir for writing", code(lambda: os.open("/m", os.O_WRONLY)))
print("not a dir", code(lambda: os.open("/m/f", os.O_RDONLY | os.O_DIRECTORY)))
fd = os.open("/m/f", os.O_RDWR | os.O_TRUNC)
print("truncated", os.fstat(fd).st_size, "inheritable", os.get_inheritable(fd))
fd = os.open("/m", os.O_RDONLY | os.O_DIRECTORY)
print("dir entries", sorted(os.listdir(fd)))
EOF
    "#;
    let (out, code) = sh_both(&t, script);
    assert_eq!(
        out,
        "hello\nappended\nexcl EEXIST\nmissing ENOENT\ndir for writing EISDIR\n\
         not a dir ENOTDIR\ntruncated 0 inheritable False\ndir entries ['f']\n"
    );
    assert_eq!(code, 0);
}

#[test]
fn descriptors_without_close_on_exec_survive_exec() {
    let t = Tree::new("open-inherit");
    t.write("f", "inherited\n");
    // The shell opens fd 3 without O_CLOEXEC; the child reads it after its own exec.
    let (out, code) = sh_both(&t, "exec 3< /m/f; sh -c 'cat <&3'");
    assert_eq!((out.as_str(), code), ("inherited\n", 0));
}

#[test]
fn fifo_opens_block_without_stalling_other_calls() {
    let t = Tree::new("open-fifo");
    t.write("f", "plain\n");
    let fifo = std::ffi::CString::new(t.path("fifo").to_str().unwrap()).unwrap();
    // SAFETY: a plain mkfifo with a valid C string.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    // The reader blocks in open until the writer arrives; meanwhile other calls on the
    // mount (cat, the shell's own lookups) must still be answered.
    let script = "cat /m/fifo & sleep 0.3; cat /m/f; echo through > /m/fifo; wait";
    let (out, code) = sh_both(&t, script);
    assert_eq!((out.as_str(), code), ("plain\nthrough\n", 0));
}

#[test]
fn the_descriptor_limit_is_the_programs() {
    let t = Tree::new("open-limit");
    t.write("f", "x\n");
    let script = r#"python3 -c '
import errno, os, resource
resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))
n = 0
try:
    while True:
        os.open("/m/f", os.O_RDONLY)
        n += 1
except OSError as e:
    print(errno.errorcode[e.errno], n < 32)
for flags in (os.O_CREAT | os.O_EXCL, os.O_TRUNC, os.O_CREAT | os.O_TRUNC):
    try:
        os.open("/m/new" if flags & os.O_EXCL else "/m/f", flags | os.O_WRONLY, 0o644)
    except OSError as e:
        print(errno.errorcode[e.errno], os.path.exists("/m/new"), os.stat("/m/f").st_size)
'"#;
    let (out, code) = sh_both(&t, script);
    // At the limit, an open that would create or truncate a file fails first, as natively.
    let full = "EMFILE False 2\n";
    assert_eq!((out, code), (format!("EMFILE True\n{full}{full}{full}"), 0));
}

#[test]
fn a_program_that_drops_root_opens_with_its_own_identity() {
    if !peer::root("only root can hand its tracees another identity") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let t = Tree::new("open-identity");
    let secret = t.write("secret", "root only\n");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    t.write("public", "anyone\n");
    std::fs::set_permissions(&t.root, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = r#"python3 -c '
import errno, os
def code(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
print("root reads", code(lambda: os.close(os.open("/m/secret", os.O_RDONLY))))
os.setgroups([]); os.setgid(65534); os.setuid(65534)
print("nobody reads secret", code(lambda: os.open("/m/secret", os.O_RDONLY)))
print("nobody reads public", code(lambda: os.close(os.open("/m/public", os.O_RDONLY))))
print("nobody creates", code(lambda: os.open("/m/new", os.O_WRONLY | os.O_CREAT, 0o644)))
'"#;
    let (out, code) = sh_both(&t, script);
    assert_eq!(
        out,
        "root reads ok\nnobody reads secret EACCES\nnobody reads public ok\nnobody creates EACCES\n"
    );
    assert_eq!(code, 0);
    assert!(!t.path("new").exists());
}

/// A root process can lose capabilities by dropping them from its bounding set and
/// exec'ing: roost must then open with the caller's reduced capabilities, not with its own,
/// with no other credential call made, and after one that only names root again
/// (`setresuid(-1, 0, -1)`, as make makes).
#[test]
fn a_program_that_lost_capabilities_by_exec_opens_without_them() {
    if !peer::root("only root can hand its tracees another identity") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let t = Tree::new("open-capabilities");
    let secret = t.write("secret", "nobody's\n");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o000)).unwrap();
    let script = r#"python3 -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 24, 1, 2
for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
    assert libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0
child = """
import errno, os
def code(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
print("reads a mode 000 file", code(lambda: os.open("/m/secret", os.O_RDONLY)))
os.setresuid(-1, 0, -1)
print("and after setresuid", code(lambda: os.open("/m/secret", os.O_RDONLY)))
"""
os.execv(sys.executable, [sys.executable, "-c", child])
'"#;
    let (out, code) = sh_both(&t, script);
    assert_eq!(
        (out.as_str(), code),
        (
            "reads a mode 000 file EACCES\nand after setresuid EACCES\n",
            0
        )
    );
}

/// Holds a write lease on FILE until the kernel asks for it back, then gives it up after
/// 0.3 s (as a lease holder flushes its cache first).
const LEASE_HOLDER: &str = r#"
import fcntl, os, signal, sys, time
F_SETLEASE = 1024
fd = os.open(sys.argv[1], os.O_RDONLY)
def give_back(sig, frame):
    time.sleep(0.3)
    fcntl.fcntl(fd, F_SETLEASE, fcntl.F_UNLCK)
signal.signal(signal.SIGIO, give_back)
fcntl.fcntl(fd, F_SETLEASE, fcntl.F_WRLCK)
print("leased", flush=True)
time.sleep(10)
"#;

#[test]
fn an_open_waits_for_another_process_to_give_up_its_lease() {
    use std::io::BufRead;
    // Leases belong to the file's owner (or CAP_LEASE): true of the test's own files.
    let t = Tree::new("open-lease");
    t.write("f", "data\n");
    let script = r#"python3 -c '
import os, time
t0 = time.monotonic()
fd = os.open("/m/f", os.O_RDONLY)
print("opened after the lease was given up:", time.monotonic() - t0 > 0.2, os.read(fd, 5))
'"#;
    for mode in [&[][..], &["--no-notify"][..]] {
        let mut holder = std::process::Command::new("python3")
            .args(["-c", LEASE_HOLDER, t.path("f").to_str().unwrap()])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(holder.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "leased\n");
        let mount = format!("/m={}", t.s());
        let mut args = mode.to_vec();
        args.extend(["--mount", &mount, "--", "timeout", "20", "sh", "-c", script]);
        let o = run(&args);
        holder.kill().unwrap();
        holder.wait().unwrap();
        assert_eq!(
            stdout(&o),
            "opened after the lease was given up: True b'data\\n'\n",
            "{mode:?}: {}",
            stderr(&o)
        );
    }
}
