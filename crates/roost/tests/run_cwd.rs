//! The working directory behaves as under a real mount: a cwd reached by its physical path
//! keeps that name (so `..` climbs where it would natively), one entered through a mapping
//! keeps the mapped name, a renamed cwd follows its directory and a deleted one still
//! answers relative calls. Each case runs with notifications and with `--no-notify`.

use roost_testkit::run::*;
use std::process::Command;

/// Runs `roost run [--no-notify] OPTIONS -- ARGV` from `cwd` both ways; both must agree.
fn both_from(cwd: &std::path::Path, options: &[&str], argv: &[&str]) -> (String, i32) {
    let mut results = Vec::new();
    for mode in [&[][..], &["--no-notify"][..]] {
        let o = Command::new(env!("CARGO_BIN_EXE_roost"))
            .arg("run")
            .args(mode)
            .args(options)
            .arg("--")
            .args(argv)
            .current_dir(cwd)
            .output()
            .unwrap();
        results.push((stdout(&o) + &stderr(&o), o.status.code().unwrap_or(-1)));
    }
    assert_eq!(
        results[0], results[1],
        "notification vs ptrace for {argv:?}"
    );
    results.remove(0)
}

#[test]
fn a_cwd_reached_physically_stays_physical_and_one_entered_by_a_mapping_stays_mapped() {
    let t = Tree::new("cwd-physical");
    t.write("a/own", "own\n");
    t.write("sib/f", "hi\n");
    let a = t.path("a");
    let mount = format!("/m={}", a.display());
    let (out, code) = both_from(
        &a,
        &["--mount", &mount],
        &[
            "sh",
            "-c",
            "/bin/pwd; cat ../sib/f; cd /m && /bin/pwd && cat own && ls .. | grep -qx tmp && echo root",
        ],
    );
    let expected = format!("{}\nhi\n/m\nown\nroot\n", a.display());
    assert_eq!((out, code), (expected, 0));
}

#[test]
fn a_renamed_cwd_follows_its_directory() {
    let t = Tree::new("cwd-renamed");
    std::fs::create_dir_all(t.path("plain/d")).unwrap();
    std::fs::create_dir_all(t.path("mapped/d")).unwrap();
    let mount = format!("/m={}", t.path("mapped").display());
    // Outside every mapping: `..` after a rename is the new parent, as natively.
    let plain = t.path("plain").display().to_string();
    let script = format!(
        "import os; os.rename('{plain}/d', '{plain}/e'); print(os.getcwd()); os.chdir('..'); print(os.getcwd()); \
         os.rename('{plain}/e', '{plain}/d')"
    );
    let (out, code) = both_from(
        &t.path("plain/d"),
        &["--mount", &mount],
        &["python3", "-c", &script],
    );
    assert_eq!((out, code), (format!("{plain}/e\n{plain}\n"), 0));
    // Inside a mapping: the cwd keeps its mapped name, renamed.
    let script = "import os\n\
                  os.chdir('/m/d'); os.rename('/m/d', '/m/e')\n\
                  open('f', 'w').write('x'); print(os.getcwd(), os.listdir('/m/e'))\n\
                  os.chdir('..'); print(os.getcwd())\n\
                  os.rename('/m/e', '/m/d')";
    let (out, code) = both_from(&t.root, &["--mount", &mount], &["python3", "-c", script]);
    assert_eq!((out.as_str(), code), ("/m/e ['f']\n/m\n", 0));
}

#[test]
fn a_deleted_cwd_still_answers_relative_calls() {
    let t = Tree::new("cwd-deleted");
    let gone = t.path("gone").display().to_string();
    let mount = format!("/m={}", t.s());
    let script =
        format!("mkdir -p {gone}; cd {gone}; rmdir {gone}; ls; echo rc=$?; ls -d .; echo rc=$?");
    let (out, code) = both_from(&t.root, &["--mount", &mount], &["sh", "-c", &script]);
    assert_eq!((out.as_str(), code), ("rc=0\n.\nrc=0\n", 0));
}

#[test]
fn a_mapping_to_a_symlinked_directory_keeps_its_logical_cwd() {
    // As a bind mount, the mapping's target is resolved once: `cd /m` is `/m`, not the
    // directory the symlink leads to.
    let t = Tree::new("cwd-symlinked");
    std::fs::create_dir(t.path("real")).unwrap();
    std::os::unix::fs::symlink(t.path("real"), t.path("link")).unwrap();
    let mount = format!("/m={}", t.path("link").display());
    let (out, code) = both_from(
        &t.root,
        &["--mount", &mount],
        &["sh", "-c", "cd /m && /bin/pwd"],
    );
    assert_eq!((out.as_str(), code), ("/m\n", 0));
}

#[test]
fn relative_names_in_a_mapped_cwd_keep_the_namespaces_view() {
    // A relative name that the kernel would resolve to the same physical file is left to
    // the kernel; every other one must still be resolved in the namespace: through a
    // symlink to another mapping, into a nested mount point, into a denied directory, up
    // through `..` out of the mapping.
    let t = Tree::new("cwd-relative");
    t.write("a/own", "own\n");
    t.write("b/g", "other mapping\n");
    t.write("c/f", "nested mount\n");
    t.write("a/sec/s", "secret\n");
    t.write("a/sub/f", "hidden under the mount\n");
    std::os::unix::fs::symlink("/n/g", t.path("a/abs")).unwrap();
    let (a, b, c) = (t.path("a"), t.path("b"), t.path("c"));
    let mounts = [
        format!("/m={}", a.display()),
        format!("/n={}", b.display()),
        format!("/m/sub={}", c.display()),
        "/m/sec=DENY".to_string(),
    ];
    let mut options = Vec::new();
    for m in &mounts {
        options.extend(["--mount", m.as_str()]);
    }
    let script = "cd /m && cat own ./own abs sub/f; cat sec/s 2>/dev/null || echo denied; \
                  stat -c %s own; ls .. | grep -qx tmp && echo parent; echo made >new; \
                  cat new; readlink abs";
    let (out, code) = both_from(&t.root, &options, &["sh", "-c", script]);
    assert_eq!(
        (out.as_str(), code),
        (
            "own\nown\nother mapping\nnested mount\ndenied\n4\nparent\nmade\n/n/g\n",
            0
        )
    );
    assert_eq!(std::fs::read_to_string(a.join("new")).unwrap(), "made\n");
}
