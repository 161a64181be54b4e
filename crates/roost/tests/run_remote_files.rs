//! Remote files behave as local ones for the calls CPython's file tests make: each test runs
//! one Python program with `/m` mapped to a local directory and then to a directory on a
//! real `roost serve` (direct mode, cached mode, and ptrace stops only); every run must
//! print the same.

use roost_testkit::remote::{Remote, CACHED, DIRECT, PTRACE};
use roost_testkit::run::*;

/// What `python3 -c PROGRAM SCRATCH` prints with `/m` on a fresh local directory, which
/// must be what it prints with `/m` on a fresh directory of a server in direct and in
/// cached mode, and with ptrace stops only (SCRATCH: a local directory of its own).
fn same_as_local(program: &str) -> String {
    let remote = Remote::start();
    let local = tempfile::tempdir().unwrap();
    let run = |mode: &[&str], target: &str, tag: &str| {
        let scratch = local.path().join(format!("scratch-{tag}"));
        std::fs::create_dir(&scratch).unwrap();
        let mount = format!("/m={target}");
        let argv = ["python3", "-c", program, scratch.to_str().unwrap()];
        let o = remote.run(mode, &["--mount", &mount], &argv);
        format!("{}{}exit {:?}", stdout(&o), stderr(&o), o.status.code())
    };
    let tree = local.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    let native = run(DIRECT, tree.to_str().unwrap(), "local");
    for (mode, tag) in [(DIRECT, "direct"), (CACHED, "cached"), (PTRACE, "ptrace")] {
        std::fs::create_dir(remote.root().join(tag)).unwrap();
        let target = remote.url(&format!("/{tag}"));
        assert_eq!(run(mode, &target, tag), native, "{tag} mode against local");
    }
    native
}

/// sendfile, copy_file_range and splice between a file of the mount and a local file, a
/// pipe, or another file of the mount, with and without explicit offsets: the bytes land
/// and the offsets move as between two local files.
#[test]
fn kernel_side_copies_to_and_from_remote_files_work_as_between_local_files() {
    let out = same_as_local(
        r#"
import errno, os, sys
data = bytes(range(256)) * 1200 + b"tail"
local = sys.argv[1]
def make(path, content):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, content)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
def content(fd):
    return os.pread(fd, 1 << 20, 0)
def show(what, result, *fds):
    print(what, result, [os.lseek(fd, 0, os.SEEK_CUR) for fd in fds])
def attempt(what, call, *fds):
    try:
        show(what, call(), *fds)
    except OSError as e:
        show(what, errno.errorcode[e.errno], *fds)
pairs = (("remote-local", "/m/a", local + "/b"), ("local-remote", local + "/c", "/m/d"),
         ("remote-remote", "/m/e", "/m/f"))
for tag, src, dst in pairs:
    s = make(src, data)
    d = make(dst, b"")
    attempt(tag + " sendfile", lambda: os.sendfile(d, s, None, 100000), s, d)
    attempt(tag + " sendfile at", lambda: os.sendfile(d, s, 7, 1000), s, d)
    attempt(tag + " sendfile rest", lambda: sum(iter(lambda: os.sendfile(d, s, None, 65536), 0)), s, d)
    print(tag, "sendfile copy", content(d) == data[:100000] + data[7:1007] + data[100000:])
    os.ftruncate(d, 0); os.lseek(d, 0, 0); os.lseek(s, 0, 0)
    attempt(tag + " copy_file_range", lambda: os.copy_file_range(s, d, 5000), s, d)
    attempt(tag + " copy_file_range at", lambda: os.copy_file_range(s, d, 300, 11, 20000), s, d)
    attempt(tag + " copy_file_range end", lambda: os.copy_file_range(s, d, 300, len(data) + 5), s, d)
    print(tag, "copy_file_range copy", content(d) == data[:5000] + b"\0" * 15000 + data[11:311])
    os.ftruncate(d, 0); os.lseek(d, 0, 0); os.lseek(s, 0, 0)
    rp, wp = os.pipe()
    attempt(tag + " splice in", lambda: os.splice(s, wp, 30000), s, d)
    attempt(tag + " splice in at", lambda: os.splice(s, wp, 1000, offset_src=5), s, d)
    attempt(tag + " splice out", lambda: os.splice(rp, d, 20000), s, d)
    attempt(tag + " splice out at", lambda: os.splice(rp, d, 20000, offset_dst=3), s, d)
    print(tag, "splice copy", content(d) == data[:3] + data[20000:30000] + data[5:1005] + data[11003:20000])
    attempt(tag + " splice file to file", lambda: os.splice(s, d, 10), s, d)
    attempt(tag + " splice offset on pipe", lambda: os.splice(s, wp, 10, offset_dst=0), s, d)
    attempt(tag + " copy_file_range to pipe", lambda: os.copy_file_range(s, wp, 10), s, d)
    ro = os.open(dst, os.O_RDONLY)
    attempt(tag + " copy_file_range to read-only", lambda: os.copy_file_range(s, ro, 10), s, d)
    attempt(tag + " sendfile to read-only", lambda: os.sendfile(ro, s, None, 10), s, d)
    for fd in (s, d, ro, rp, wp):
        os.close(fd)
"#,
    );
    assert!(out.contains("remote-remote splice copy True"), "{out}");
    assert!(!out.contains("False"), "{out}");
}

/// A new file, directory or node gets the mode asked for less the caller's umask, whatever
/// the server's own umask; chmod sets any permission bits.
#[test]
fn new_files_and_directories_take_the_callers_umask_not_the_servers() {
    let out = same_as_local(
        r#"
import os, stat
for mask in (0, 0o022, 0o077, 0o002):
    os.umask(mask)
    tag = "/m/%o" % mask
    os.mkdir(tag, 0o777)
    os.mkdir(tag + "/d", 0o775)
    os.close(os.open(tag + "/f", os.O_WRONLY | os.O_CREAT, 0o666))
    os.close(os.open(tag + "/x", os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o777))
    os.mknod(tag + "/n", 0o646 | stat.S_IFREG)
    with open(tag + "/p", "w") as f:
        f.write("python's own open")
    print("umask %03o:" % mask, *("%s %o" % (n, os.stat(tag + "/" + n).st_mode & 0o7777)
                                  for n in sorted(os.listdir(tag))))
os.chmod("/m/0/f", 0o777)
os.chmod("/m/0/d", 0o3777)
print(oct(os.stat("/m/0/f").st_mode), oct(os.stat("/m/0/d").st_mode))
"#,
    );
    assert!(
        out.contains("umask 000: d 775 f 666 n 646 p 666 x 777"),
        "{out}"
    );
}

/// An exclusive create over an existing directory is EEXIST (and a plain create EISDIR).
#[test]
fn an_exclusive_create_over_a_directory_fails_with_eexist() {
    let out = same_as_local(
        r#"
import errno, os
os.mkdir("/m/d")
open("/m/f", "w").close()
for path in ("/m/d", "/m/f"):
    for flags in (os.O_CREAT | os.O_EXCL | os.O_RDWR, os.O_CREAT | os.O_EXCL | os.O_RDONLY,
                  os.O_CREAT | os.O_EXCL | os.O_WRONLY, os.O_CREAT | os.O_RDWR, os.O_CREAT | os.O_RDONLY):
        try:
            os.close(os.open(path, flags, 0o600))
            print(path, flags, "opened")
        except OSError as e:
            print(path, flags, errno.errorcode[e.errno])
"#,
    );
    assert!(out.contains("/m/d 194 EEXIST"), "{out}");
}

/// A symlink's own times are set without following it (`utimensat` with
/// `AT_SYMLINK_NOFOLLOW`, `lutimes`), as `cp -a` and `shutil.copystat` do; its target keeps
/// its own.
#[test]
fn the_times_of_a_symlink_itself_are_set_without_following_it() {
    let out = same_as_local(
        r#"
import os, shutil
os.mkdir("/m/src")
open("/m/src/target", "w").close()
os.utime("/m/src/target", (1000000000, 1000000000))
os.symlink("target", "/m/src/link")
os.symlink("nowhere", "/m/src/dangling")
os.utime("/m/src/link", (1200000000, 1300000000), follow_symlinks=False)
os.utime("/m/src/dangling", (1400000000, 1500000000), follow_symlinks=False)
for n in ("target", "link", "dangling"):
    st = os.lstat("/m/src/" + n)
    print(n, int(st.st_atime), int(st.st_mtime))
shutil.copytree("/m/src", "/m/copy", symlinks=True)
for n in ("target", "link", "dangling"):
    print("copy", n, int(os.lstat("/m/copy/" + n).st_mtime))
"#,
    );
    assert!(out.contains("link 1200000000 1300000000"), "{out}");
}

/// A FIFO made on the mount is a FIFO to every process of the run: stat and listings say
/// so, and opens for reading and writing meet in it (through a fork and an exec), as in a
/// local directory.
#[test]
fn a_fifo_made_on_the_mount_joins_the_processes_of_the_run() {
    let out = same_as_local(
        r#"
import errno, os, stat, subprocess, sys
os.mkfifo("/m/p", 0o640)
st = os.stat("/m/p")
print(stat.S_ISFIFO(st.st_mode), oct(st.st_mode & 0o777), os.listdir("/m"))
try:
    os.open("/m/p", os.O_WRONLY | os.O_NONBLOCK)
except OSError as e:
    print("writer alone", errno.errorcode[e.errno])
pid = os.fork()
if pid == 0:
    fd = os.open("/m/p", os.O_WRONLY)
    os.write(fd, b"through the fifo\n")
    os._exit(0)
fd = os.open("/m/p", os.O_RDONLY)
print(os.read(fd, 100))
os.waitpid(pid, 0)
writer = subprocess.Popen([sys.executable, "-c", "open('/m/p', 'w').write('from another program')"])
with open("/m/p") as f:
    print(f.read())
writer.wait()
fd = os.open("/m/p", os.O_RDWR)
os.write(fd, b"rdwr")
print(os.read(fd, 4), stat.S_ISFIFO(os.fstat(fd).st_mode))
os.close(fd)
os.rename("/m/p", "/m/q")
print(os.listdir("/m"))
os.unlink("/m/q")
print(os.listdir("/m"))
"#,
    );
    assert!(out.contains("from another program"), "{out}");
}

/// Files opened one after the other and their copies (`dup`) get consecutive numbers, as
/// from the kernel, so `closerange` over them closes exactly them.
#[test]
fn descriptors_opened_in_a_row_get_consecutive_numbers() {
    let out = same_as_local(
        r#"
import errno, os
first = os.open("/m/f", os.O_RDWR | os.O_CREAT, 0o644)
second = os.dup(first)
third = os.open("/m/f", os.O_RDONLY)
print(second - first, third - second)
os.closerange(first, first + 2)
for fd in (first, second, third):
    try:
        os.fstat(fd)
        print(fd - first, "open")
    except OSError as e:
        print(fd - first, errno.errorcode[e.errno])
"#,
    );
    assert!(out.starts_with("1 1\n"), "{out}");
}

/// An AF_UNIX socket bound on the mount is a socket to every process of the run: stat and
/// listings say so, and connects (through a fork and an exec) reach it, as in a local
/// directory; a file there is no socket, a name bound twice is in use.
#[test]
fn a_socket_bound_on_the_mount_is_reached_by_the_processes_of_the_run() {
    let out = same_as_local(
        r#"
import errno, os, socket, stat, subprocess, sys
def attempt(what, call):
    try:
        call()
        print(what, "done")
    except OSError as e:
        print(what, errno.errorcode[e.errno])
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind("/m/s")
server.listen(2)
st = os.stat("/m/s")
print(stat.S_ISSOCK(st.st_mode), [(e.name, e.is_file(), e.is_dir()) for e in os.scandir("/m")])
attempt("bind again", lambda: socket.socket(socket.AF_UNIX).bind("/m/s"))
pid = os.fork()
if pid == 0:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect("/m/s")
    c.sendall(b"from a child")
    os._exit(0)
conn, _ = server.accept()
print(conn.recv(100))
os.waitpid(pid, 0)
client = subprocess.Popen([sys.executable, "-c",
    "import socket; c = socket.socket(socket.AF_UNIX); c.connect('/m/s'); c.sendall(b'from another program')"])
conn, _ = server.accept()
print(conn.recv(100))
client.wait()
open("/m/file", "w").close()
attempt("connect to a file", lambda: socket.socket(socket.AF_UNIX).connect("/m/file"))
attempt("open a socket", lambda: open("/m/s"))
os.unlink("/m/s")
attempt("connect after unlink", lambda: socket.socket(socket.AF_UNIX).connect("/m/s"))
print(os.listdir("/m"))
"#,
    );
    assert!(out.contains("from another program"), "{out}");
}

/// A name that was a file (written, so cached mode kept a copy) and is then a directory
/// holds files and directories as any, and its stat and an open descriptor's agree, as
/// rmtree checks (in cached mode the copy stood in the way of the directory's local copy:
/// ENOTDIR, and rmtree took the directory for a symlink).
#[test]
fn a_file_replaced_by_a_directory_holds_entries() {
    let out = same_as_local(
        r#"
import os
os.chdir("/m")
with open("n", "wb") as f:
    f.write(b"a file first")
print(open("n").read())
os.unlink("n")
os.mkdir("n")
st = os.lstat("n")
fd = os.open("n", os.O_RDONLY)
print("the same directory", os.path.samestat(st, os.fstat(fd)))
os.close(fd)
os.makedirs("n/TEST1/SUB1")
with open("n/TEST1/tmp1", "x") as f:
    f.write("then a directory")
print(sorted(os.listdir("n/TEST1")), open("n/TEST1/tmp1").read())
os.rename("n/TEST1/tmp1", "m")
os.rmdir("n/TEST1/SUB1")
os.rmdir("n/TEST1")
os.rmdir("n")
os.mkdir("m2")
os.rename("m2", "n")
print(os.listdir("n"), open("m").read())
"#,
    );
    assert!(out.contains("['SUB1', 'tmp1'] then a directory"), "{out}");
}

/// What a program writes to a file shows to every other open of it in the run at once
/// (another descriptor, another process, a second writer), as on one host's file system;
/// in cached mode, where the file goes back to the server when closed, the other opens
/// share the copy being written.
#[test]
fn a_file_being_written_shows_its_content_to_other_opens_in_the_run() {
    let out = same_as_local(
        r#"
import os, subprocess, sys
w = os.open("/m/f", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(w, b"first part")
with open("/m/f", "rb") as f:
    print(f.read())
os.write(w, b", second part")
print(subprocess.run([sys.executable, "-c", "print(open('/m/f').read())"],
                     capture_output=True, text=True).stdout.strip())
w2 = os.open("/m/f", os.O_WRONLY)
os.pwrite(w2, b"FIRST", 0)
os.close(w2)
print(os.pread(w, 100, 0))
os.close(w)
with open("/m/f", "rb") as f:
    print(f.read(), os.stat("/m/f").st_size)
try:
    os.open("/m/f", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
except FileExistsError:
    print("exclusive: exists")
"#,
    );
    assert!(
        out.contains("b'first part'\nfirst part, second part\n"),
        "{out}"
    );
}
