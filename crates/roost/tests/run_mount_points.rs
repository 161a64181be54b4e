//! Mount points behave as a real mount's would: they cannot be removed, renamed or replaced
//! (EBUSY), and a directory that holds one is not empty (ENOTEMPTY) nor can it be renamed
//! (EBUSY, where a real mount would move with it), so a program never moves or deletes the
//! physical data behind a mapping. Each case runs with notifications and with `--no-notify`;
//! run_bind_mount.rs compares the answers with a real bind mount's.

use roost_testkit::run::*;

#[test]
fn mount_points_and_their_parents_are_busy() {
    let t = Tree::new("mount-busy");
    t.write("dir/inside", "kept\n");
    t.write("file", "kept\n");
    t.write("parent/other", "x\n");
    let host = t.path("host");
    std::fs::create_dir(&host).unwrap();
    let h = host.display().to_string();
    let options = [
        format!("/busy={}", t.path("dir").display()),
        format!("{h}/motd={}", t.path("file").display()),
        format!("{h}/parent/inner={}", t.path("dir").display()),
    ];
    let mut args = Vec::new();
    for o in &options {
        args.extend(["--mount", o.as_str()]);
    }
    let script = format!(
        r#"
import errno, os
def attempt(what, call, *a):
    try:
        call(*a); print(what, "done")
    except OSError as e:
        print(what, errno.errorcode[e.errno])
os.makedirs("{h}/parent", exist_ok=True); open("{h}/parent/other", "w").close()
attempt("rename mount point", os.rename, "/busy", "{h}/moved")
attempt("rmdir mount point", os.rmdir, "/busy")
attempt("unlink file mount point", os.unlink, "{h}/motd")
attempt("rename onto mount point", os.rename, "{h}/parent/other", "{h}/motd")
attempt("rename parent of one", os.rename, "{h}/parent", "{h}/p2")
attempt("rmdir parent of one", os.rmdir, "{h}/parent")
open("/busy/inside2", "w").close(); attempt("unlink inside mount", os.unlink, "/busy/inside2")
os.makedirs("/busy/sub", exist_ok=True); attempt("rename inside mount", os.rename, "/busy/sub", "/busy/sub2")
"#
    );
    let (out, code) = run_both_with(&t, &args, &["python3", "-c", &script]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out,
        "rename mount point EBUSY\nrmdir mount point EBUSY\nunlink file mount point EBUSY\n\
         rename onto mount point EBUSY\nrename parent of one EBUSY\nrmdir parent of one ENOTEMPTY\n\
         unlink inside mount done\nrename inside mount done\n"
    );
    assert_eq!(std::fs::read_to_string(t.path("file")).unwrap(), "kept\n");
    assert!(t.path("dir").is_dir() && t.path("dir/sub2").is_dir());
}

#[test]
fn mount_lists_show_mappings_at_their_logical_mount_points() {
    let t = Tree::new("mount-lists");
    t.write("f", "x\n");
    // df names the mount a mapped file lies on, as for a bind mount; /proc/self/mountinfo
    // and /proc/mounts (and /etc/mtab) list the mapping, escaped as the kernel escapes.
    let script = "df --output=target /m/f | tail -1; \
                  grep -c ' /m ' /proc/self/mountinfo /proc/mounts /etc/mtab; \
                  grep -c ' /with\\\\040space ' /proc/self/mountinfo";
    let space = format!("/with space={}", t.s());
    let (out, code) = run_both_with(&t, &["--mount", &space], &["sh", "-c", script]);
    assert_eq!(
        (out.as_str(), code),
        (
            "/m\n/proc/self/mountinfo:1\n/proc/mounts:1\n/etc/mtab:1\n1\n",
            0
        )
    );
}
