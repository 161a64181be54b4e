//! A mapping behaves like the bind mount it stands for: each case runs the same script twice
//! on the same fresh tree, natively with `phys` bind-mounted at `mp/m` (in a mount namespace
//! of its own: `unshare -m`, or `unshare -rm` for a user who is not root) and under `roost run
//! --mount TREE/mp/m=TREE/phys` (with notifications and with `--no-notify`), and the outputs
//! must be the same.

use roost_testkit::peer::is_root;
use roost_testkit::run::*;
use std::path::Path;
use std::process::Command;

/// A tree with the mount point `mp/m` (empty, as a bind mount's must be) and the directory
/// `phys` it shows; `setup` fills `phys`. Runs `script` (sh) natively with the bind mount,
/// then under roost in both modes, each on the tree made afresh; returns the native output
/// (stdout, stderr and exit code) after asserting that roost's are the same.
fn same_as_bind_mount(tag: &str, setup: impl Fn(&Path), script: &str) -> String {
    let t = Tree::new(&format!("bind-{tag}"));
    let (m, phys) = (t.path("mp/m"), t.path("phys"));
    let fresh = || {
        for entry in std::fs::read_dir(&t.root).unwrap() {
            let p = entry.unwrap().path();
            std::fs::remove_dir_all(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        }
        std::fs::create_dir_all(&m).unwrap();
        std::fs::create_dir_all(&phys).unwrap();
        setup(&t.root);
    };
    let result = |o: std::process::Output| {
        format!(
            "{}{}exit {}\n",
            stdout(&o),
            stderr(&o),
            o.status.code().unwrap_or(-1)
        )
    };
    fresh();
    let unshare = if is_root() { "-m" } else { "-rm" };
    let native = Command::new("unshare")
        .args([unshare, "--propagation", "private", "sh", "-c"])
        .arg(r#"mount --bind "$1" "$2" && exec sh -c "$3""#)
        .arg("sh")
        .args([&phys, &m])
        .arg(script)
        .output()
        .expect("unshare");
    let native = result(native);
    assert!(
        !native.contains("mount: "),
        "the native run needs a bind mount: {native}"
    );
    let mapping = format!("{}/mp/m={}/phys", t.s(), t.s());
    for mode in [&[][..], &["--no-notify"][..]] {
        fresh();
        let traced = roost()
            .arg("run")
            .args(mode)
            .args(["--mount", &mapping, "--", "sh", "-c", script])
            .output()
            .unwrap();
        let traced = result(traced);
        assert!(
            traced == native,
            "roost run {mode:?} --mount {mapping} -- sh -c {script:?}\n{}",
            first_difference(&native, &traced)
        );
    }
    native
}

/// Where `traced` first departs from `native`, line by line.
fn first_difference(native: &str, traced: &str) -> String {
    let (n, t): (Vec<&str>, Vec<&str>) = (native.lines().collect(), traced.lines().collect());
    let at = (0..n.len().max(t.len()))
        .find(|&i| n.get(i) != t.get(i))
        .unwrap_or(0);
    let around = |lines: &[&str]| {
        lines[at.saturating_sub(2).min(lines.len())..(at + 3).min(lines.len())].join("\n")
    };
    format!(
        "line {}:\nnatively:\n{}\nunder roost:\n{}",
        at + 1,
        around(&n),
        around(&t)
    )
}

/// `script` with `T` standing for the tree's root.
fn in_tree(tag: &str, script: &str) -> (String, String) {
    let root = std::env::temp_dir().join(format!("roost-test-bind-{tag}-{}", std::process::id()));
    (
        tag.to_string(),
        script.replace("T/", &format!("{}/", root.display())),
    )
}

/// Directories deeper than fts keeps descriptors for (it climbs back up with `..`), with
/// files along the way.
fn deep_tree(root: &Path) {
    let mut dir = root.join("phys");
    for name in ["a", "b", "c", "d", "e", "f", "g", "h", "i"] {
        dir = dir.join(name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("x"), name).unwrap();
    }
    std::fs::create_dir(root.join("phys/z")).unwrap();
    std::fs::write(root.join("phys/z/q"), "q").unwrap();
}

#[test]
fn dotdot_from_the_physical_directory_resolves_physically() {
    let (tag, script) = in_tree(
        "dotdot",
        r#"
cd T/
find . | sort; find . -xdev | wc -l
du -a . | sort -k2
python3 -c '
import os
known = ["T/..", "T/", "T/mp", "T/phys", "T/phys/a"]
def which(fd):
    st = os.fstat(fd)
    return [k for k in known if os.path.samestat(st, os.stat(k))] or ["elsewhere"]
for d in ["phys", "mp/m", "phys/a/b", "mp/m/a/b"]:
    fd = os.open(d, os.O_RDONLY)
    up = [which(os.open(p, os.O_RDONLY, dir_fd=fd)) for p in ["..", "../..", "../../.."]]
    print(d, os.readlink("/proc/self/fd/%d" % fd), up)
'
cd phys/a/b/c && ls ../../../.. && cd - >/dev/null
rm -rf phys/a; echo rm $?; find . | sort
"#,
    );
    let native = same_as_bind_mount(&tag, deep_tree, &script);
    assert!(native.contains("./mp/m/a/b/c/d/e/f/g/h/i/x\n"), "{native}");
}

#[test]
fn a_mapping_keeps_its_directory_when_the_directory_is_renamed() {
    let (tag, script) = in_tree(
        "renamed",
        r#"
cd T/
cat mp/m/f; mv phys phys2; mkdir phys; echo new > phys/f
cat mp/m/f; ls mp/m; echo more > phys2/g; cat mp/m/g
cd mp/m && mv ../../phys2 ../../phys3 && cat f && /bin/pwd
"#,
    );
    same_as_bind_mount(
        &tag,
        |root| std::fs::write(root.join("phys/f"), "original\n").unwrap(),
        &script,
    );
}

#[test]
fn a_relative_chdir_inside_a_mapping_keeps_the_logical_cwd() {
    let (tag, script) = in_tree(
        "relative-chdir",
        r#"
python3 -c '
import os
os.chdir("T/mp/m/w"); os.mkdir("t2"); os.chdir("t2"); print(os.getcwd())
print(os.readlink("/proc/self/cwd")); os.chdir(".."); print(os.getcwd())
os.chdir("../w/t2"); print(os.getcwd())
'
cd T/mp/m/w && mkdir -p t3 && cd t3 && /bin/pwd && cd ../.. && /bin/pwd
"#,
    );
    same_as_bind_mount(
        &tag,
        |root| std::fs::create_dir(root.join("phys/w")).unwrap(),
        &script,
    );
}

#[test]
fn a_deleted_cwd_keeps_its_name_and_its_parent() {
    let (tag, script) = in_tree(
        "deleted-cwd",
        r#"
python3 -c '
import os
os.chdir("T/mp/m/sub"); os.rmdir("../sub")
try: print(os.getcwd())
except OSError as e: print("getcwd", e.strerror)
print(os.readlink("/proc/self/cwd"))
fd = os.open(".", os.O_RDONLY); print(os.readlink("/proc/self/fd/%d" % fd))
print(sorted(os.listdir(os.open("..", os.O_RDONLY, dir_fd=fd))))
os.chdir(".."); print(os.getcwd())
'
"#,
    );
    same_as_bind_mount(
        &tag,
        |root| std::fs::create_dir(root.join("phys/sub")).unwrap(),
        &script,
    );
}

#[test]
fn removing_and_renaming_across_the_mount_point_fail_as_for_a_bind_mount() {
    // Every pair of names among the mount point, a name inside it, its parent, names
    // beside it and the physical directory and a name inside that: what rename and link
    // answer, and unlink and rmdir of each. The tree is put back between calls.
    let (tag, script) = in_tree(
        "busy",
        r#"
python3 -c '
import os, shutil
B = "T/"
names = dict(M="mp/m", Min="mp/m/sub", Mnew="mp/m/new", anc="mp", out="mp/z",
             outnew="mp/new", phys="phys", physin="phys/sub", physnew="phys/new",
             other="o", othernew="onew", file="mp/f")
def reset():
    for gone in ["mp/m/new", "mp/new", "phys/new", "onew", "mp/m/f2"]:
        if os.path.isdir(B + gone): os.rmdir(B + gone)
        elif os.path.lexists(B + gone): os.unlink(B + gone)
    for d in ["phys/sub", "mp/z", "o"]:
        os.makedirs(B + d, exist_ok=True)
    open(B + "mp/f", "a").close()
def attempt(what, call, *args):
    reset()
    paths = [B + names[a] for a in args]
    try: call(*paths)
    except OSError as e: print(what, *args, e.strerror); return
    print(what, *args, "ok")
    if call == os.rename: os.rename(paths[1], paths[0])
for a in ["M", "Min", "anc", "phys", "physin", "file", "other"]:
    attempt("unlink", os.unlink, a); attempt("rmdir", os.rmdir, a)
olds = ["M", "Min", "out", "phys", "physin", "other", "file"]
news = ["Mnew", "M", "Min", "anc", "outnew", "out", "physnew", "physin", "othernew"]
for a in olds:
    for b in news:
        if a != b: attempt("rename", os.rename, a, b)
for a in ["file", "physin"]:
    for b in ["Mnew", "outnew", "physnew"]: attempt("link", os.link, a, b)
'
"#,
    );
    let native = same_as_bind_mount(&tag, |_| {}, &script);
    assert!(native.contains("unlink M Is a directory\n"), "{native}");
    assert!(
        native.contains("rename M Min Invalid cross-device link\n"),
        "{native}"
    );
}
