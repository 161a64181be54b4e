//! Routes to a file that a `DENY` mapping hides and that need no race: from inside a
//! chroot (absolute, relative, through a symlink, `..` clamped at the root, a new name) and
//! by a file handle (`open_by_handle_at`, which names an inode, not a path). Each runs with
//! notifications and with `--no-notify`. Both need root (chroot, CAP_DAC_READ_SEARCH).
//! The `/proc` routes are in `run_proc_links.rs`.

use roost_testkit::peer;
use roost_testkit::run::*;

/// `<tree>/x/sec/s` (denied), `<tree>/x/open` and a symlink `<tree>/l -> /x/sec`; the
/// DENY option.
fn tree(tag: &str) -> (Tree, String) {
    let t = Tree::new(tag);
    t.write("x/sec/s", "secret\n");
    t.write("x/open", "open\n");
    std::os::unix::fs::symlink("/x/sec", t.path("l")).unwrap();
    let deny = format!("{}=DENY", t.path("x/sec").display());
    (t, deny)
}

const CHROOTED: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)  # loaded before the chroot hides the host's files
def attempt(what, f):
    try:
        r = f(); print(what, "ok" if r is None else r)
    except OSError as e:
        print(what, e.strerror)
os.chroot(sys.argv[1])
attempt("absolute", lambda: open("/x/sec/s").read().strip())
attempt("allowed", lambda: open("/x/open").read().strip())
attempt("symlink", lambda: open("/l/s").read().strip())
os.chdir("/x")
attempt("relative", lambda: open("sec/s").read().strip())
attempt("dotdot", lambda: open("../../../x/sec/s").read().strip())
attempt("new name", lambda: os.mkdir("/x/sec/new"))
attempt("new dir/", lambda: os.mkdir("/x/sec/new/"))
attempt("new file", lambda: open("/x/new", "w").close())
# A symlink to the hidden file may be made, but not followed to it: not by a hard link made
# through it, nor by a stat that follows it.
os.symlink("/x/sec/s", "/x/lnk")
def linkat_follow():
    if libc.linkat(-100, b"/x/lnk", -100, b"/x/copy", 0x400) != 0:  # AT_SYMLINK_FOLLOW
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
attempt("link through symlink", linkat_follow)
attempt("stat through symlink", lambda: os.stat("/x/lnk") and None)
attempt("lstat of symlink", lambda: os.lstat("/x/lnk") and None)
for made in ["/x/lnk", "/x/new", "/x/copy"]:
    if os.path.lexists(made): os.unlink(made)
"#;

#[test]
fn inside_a_chroot_denied_files_stay_denied() {
    if !peer::root("a program cannot chroot otherwise") {
        return;
    }
    let (t, deny) = tree("deny-chroot");
    let root = t.s();
    let (out, code) = run_both_with(&t, &["--mount", &deny], &["python3", "-c", CHROOTED, &root]);
    assert_eq!(
        (out.as_str(), code),
        (
            "absolute Permission denied\nallowed open\nsymlink Permission denied\n\
             relative Permission denied\ndotdot Permission denied\n\
             new name Permission denied\nnew dir/ Permission denied\nnew file ok\n\
             link through symlink Permission denied\nstat through symlink Permission denied\n\
             lstat of symlink ok\n",
            0
        )
    );
    assert!(!t.path("x/sec/new").exists() && !t.path("x/copy").exists());
}

/// `make A B`: prints the handles of files A and B; `open DIR HA HB`: opens both handles on
/// DIR's file system and prints what each read gives.
const HANDLES: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
class FileHandle(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint), ("type", ctypes.c_int), ("h", ctypes.c_ubyte * 128)]
def handle(path):
    fh = FileHandle(); fh.bytes = 128; mount_id = ctypes.c_int()
    if libc.name_to_handle_at(-100, path.encode(), ctypes.byref(fh), ctypes.byref(mount_id), 0):
        raise OSError(ctypes.get_errno(), "name_to_handle_at " + path)
    return bytes(fh)[:8 + fh.bytes].hex()
def read_by_handle(mount_dir, hexed):
    raw = bytes.fromhex(hexed)
    fd = libc.open_by_handle_at(os.open(mount_dir, os.O_RDONLY),
                                ctypes.create_string_buffer(raw, len(raw)), os.O_RDONLY)
    if fd < 0:
        return os.strerror(ctypes.get_errno())
    return os.read(fd, 100).decode().strip()
if sys.argv[1] == "make":
    print(handle(sys.argv[2]), handle(sys.argv[3]))
else:
    print(read_by_handle(sys.argv[2], sys.argv[3]), read_by_handle(sys.argv[2], sys.argv[4]))
"#;

#[test]
fn a_file_handle_does_not_open_a_denied_file() {
    if !peer::root("open_by_handle_at needs CAP_DAC_READ_SEARCH") {
        return;
    }
    let (t, deny) = tree("deny-handle");
    let (denied, allowed) = (t.path("x/sec/s"), t.path("x/open"));
    let made = std::process::Command::new("python3")
        .args(["-c", HANDLES, "make"])
        .args([&denied, &allowed])
        .output()
        .unwrap();
    let handles = stdout(&made);
    let handles: Vec<&str> = handles.split_whitespace().collect();
    assert_eq!(handles.len(), 2, "{}", stderr(&made));
    let x = t.path("x").display().to_string();
    let argv = ["python3", "-c", HANDLES, "open", &x, handles[0], handles[1]];
    let native = std::process::Command::new(argv[0])
        .args(&argv[1..])
        .output()
        .unwrap();
    assert_eq!(stdout(&native), "secret open\n", "{}", stderr(&native));
    let (out, code) = run_both_with(&t, &["--mount", &deny], &argv);
    assert_eq!((out.as_str(), code), ("Permission denied open\n", 0));
    // Hidden under its mapped name too: the file is denied as /m/x/sec/s.
    let (out, code) = run_both_with(&t, &["--mount", "/m/x/sec=DENY"], &argv);
    assert_eq!((out.as_str(), code), ("Permission denied open\n", 0));
}
