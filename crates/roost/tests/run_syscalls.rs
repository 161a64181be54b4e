//! Every translated path syscall, called once on a mounted path (run_support/allpaths.c),
//! gives the same results under `roost run` as natively on the physical directory. The
//! logical paths do not exist physically, so an untranslated call would differ.

use roost_testkit::run::*;
use std::process::Command;

fn fixture(tag: &str) -> Tree {
    let t = Tree::new(tag);
    t.write("f", "hi\n");
    std::fs::create_dir(t.path("d")).unwrap();
    std::os::unix::fs::symlink("f", t.path("l")).unwrap();
    t
}

#[test]
fn every_path_syscall_matches_native_results() {
    let bin = compiled("allpaths");
    let native_dir = fixture("allpaths-native");
    let native = Command::new(&bin).arg(native_dir.s()).output().unwrap();
    let native = String::from_utf8_lossy(&native.stdout).into_owned();
    assert!(
        native.lines().filter(|l| l.ends_with(" ok")).count() >= 40,
        "{native}"
    );
    // Lookups come as seccomp notifications by default, as ptrace stops with --no-notify.
    for (tag, extra) in [("notify", None), ("ptrace", Some("--no-notify"))] {
        let dir = fixture(&format!("allpaths-{tag}"));
        let mount = format!("/m={}", dir.s());
        let mut args: Vec<&str> = extra.into_iter().collect();
        args.extend(["--mount", &mount, "--", bin.to_str().unwrap(), "/m"]);
        let traced = run(&args);
        assert_eq!(stdout(&traced), native, "{tag}: {}", stderr(&traced));
        // Side effects landed in the physical directory.
        assert_eq!(
            std::fs::read_link(dir.path("s2")).unwrap().to_str(),
            Some("f")
        );
        assert_eq!(std::fs::metadata(dir.path("c4")).unwrap().len(), 3);
    }
}
