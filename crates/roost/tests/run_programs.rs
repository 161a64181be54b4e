//! Real programs under `roost run` with a mount list that relocates their input: bash
//! scripts, coreutils, python3 importing from a remapped directory, git, and a C project
//! built with make and gcc (a small project of its own, and zlib) whose outputs must equal a
//! native build's.

use roost_testkit::run::*;
use std::path::Path;
use std::process::Command;

fn copy_tree(from: &Path, to: &Path) {
    let st = Command::new("cp")
        .arg("-r")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(st.success());
}

#[test]
fn bash_script_and_coreutils_in_a_remapped_directory() {
    let t = Tree::new("bash");
    t.write("in/a.txt", "3\n1\n2\n");
    t.write("in/b.txt", "x\ny\n");
    t.script(
        "job.sh",
        r#"#!/bin/bash
set -e
cd /job
for f in in/*.txt; do echo "$f $(wc -l < "$f")"; done
sort -n in/a.txt > out/sorted.txt
mkdir -p out/deep/er && cp in/b.txt out/deep/er/
mv out/deep/er/b.txt out/deep/er/c.txt
ln -s /job/out/sorted.txt out/link
readlink -f out/link
cat out/link | tr '\n' ' '; echo
find out -type f | sort
stat -c '%s %n' out/sorted.txt
chmod 600 out/sorted.txt && ls -l out/sorted.txt | cut -c1-10
touch -d '2001-02-03' out/sorted.txt && date -r out/sorted.txt +%F
du -a out | wc -l
rm -r out/deep
ls out
pwd
"#,
    );
    std::fs::create_dir(t.path("out")).unwrap();
    let o = run(&["--mount", &format!("/job={}", t.s()), "--", "/job/job.sh"]);
    assert_eq!(
        stdout(&o),
        "in/a.txt 3\nin/b.txt 2\n/job/out/sorted.txt\n1 2 3 \nout/deep/er/c.txt\nout/sorted.txt\n\
         6 out/sorted.txt\n-rw-------\n2001-02-03\n6\nlink\nsorted.txt\n/job\n",
        "{}",
        stderr(&o)
    );
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(t.path("out/sorted.txt")).unwrap(),
        "1\n2\n3\n"
    );
}

#[test]
fn python_imports_modules_from_a_remapped_directory() {
    let t = Tree::new("python");
    t.write("pkg/__init__.py", "NAME = 'pkg'\n");
    t.write(
        "pkg/mod.py",
        "import os\nVALUE = 6 * 7\nWHERE = os.path.dirname(__file__)\n",
    );
    let o = roost()
        .args(["run", "--mount", &format!("/pylib={}", t.s()), "--", "python3", "-c"])
        .arg("import pkg.mod, os; print(pkg.NAME, pkg.mod.VALUE, pkg.mod.WHERE); print(sorted(os.listdir('/pylib/pkg'))[:2])")
        .env("PYTHONPATH", "/pylib")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    assert_eq!(
        stdout(&o),
        "pkg 42 /pylib/pkg\n['__init__.py', 'mod.py']\n",
        "{}",
        stderr(&o)
    );
}

#[test]
fn git_init_commit_log_in_a_remapped_directory() {
    let t = Tree::new("git");
    std::fs::create_dir(t.path("repo")).unwrap();
    let script = "set -e; cd /repo; git init -q -b main .; echo hello > README; git add README; \
                  git -c user.name=R -c user.email=r@x commit -q -m 'first commit'; \
                  echo more >> README; git -c user.name=R -c user.email=r@x commit -q -am second; \
                  git log --format=%s; git status --short | wc -l; git rev-parse --show-toplevel";
    let o = roost()
        .args([
            "run",
            "--mount",
            &format!("/repo={}/repo", t.s()),
            "--",
            "sh",
            "-c",
            script,
        ])
        .env("HOME", t.s())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert_eq!(
        stdout(&o),
        "second\nfirst commit\n0\n/repo\n",
        "{}",
        stderr(&o)
    );
    // The repository is real on the physical side.
    let log = Command::new("git")
        .args(["-C", &format!("{}/repo", t.s()), "log", "--format=%s"])
        .env("HOME", t.s())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&log.stdout),
        "second\nfirst commit\n"
    );
}

#[test]
fn make_and_gcc_build_from_a_remapped_tree_match_native() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/run_support/cproject");
    let native = Tree::new("cproj-native");
    let traced = Tree::new("cproj-traced");
    copy_tree(&src, &native.path("p"));
    copy_tree(&src, &traced.path("p"));
    // Native build.
    let st = Command::new("make")
        .args(["-s", "-C", &format!("{}/p", native.s())])
        .status()
        .unwrap();
    assert!(st.success());
    // The same build under roost: sources at /proj, headers mounted separately at /inc.
    let o = run(&[
        "--mount",
        &format!("/proj={}/p", traced.s()),
        "--mount",
        &format!("/inc={}/p/include", traced.s()),
        "--",
        "make",
        "-s",
        "-j2",
        "-C",
        "/proj",
        "INC=/inc",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for f in ["shapes", "libshapes.a", "src/main.o", "src/checksum.o"] {
        let a = std::fs::read(native.path(&format!("p/{f}"))).unwrap();
        let b = std::fs::read(traced.path(&format!("p/{f}"))).unwrap();
        assert!(a == b, "{f} differs from the native build");
    }
    let out = run(&[
        "--mount",
        &format!("/proj={}/p", traced.s()),
        "--",
        "/proj/shapes",
    ]);
    assert_eq!(stdout(&out), "circle 12.566 rect 12.0 sum 491522780\n");
}

#[test]
fn zlib_built_with_make_and_gcc_from_a_remapped_tree_equals_the_native_build() {
    let zlib = zlib_sources();
    let makefile = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/run_support/zlib.mk");
    let native = Tree::new("zlib-native");
    let traced = Tree::new("zlib-traced");
    for t in [&native, &traced] {
        copy_tree(&zlib, &t.path("z"));
        std::fs::copy(&makefile, t.path("z/Makefile")).unwrap();
    }
    let st = Command::new("make")
        .args(["-s", "-j2", "-C", &format!("{}/z", native.s())])
        .status()
        .unwrap();
    assert!(st.success());
    let mount = format!("/zsrc={}/z", traced.s());
    let o = run(&["--mount", &mount, "--", "make", "-s", "-j2", "-C", "/zsrc"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    same_zlib_build(&native.path("z"), &traced.path("z"));
}
