//! Identity virtualization: `--uid`, `--gid`, `--user` and `--hostname` change what the id
//! queries, uname and name lookups report, by notification and by ptrace, and nothing else.

use roost_testkit::run::*;

/// `roost run [--no-notify] OPTIONS -- sh -c SCRIPT` both ways; both must agree.
fn both(options: &[&str], script: &str) -> String {
    let mut outs = Vec::new();
    for mode in [&[][..], &["--no-notify"][..]] {
        let mut args = mode.to_vec();
        args.extend(options);
        args.extend(["--", "sh", "-c", script]);
        let o = run(&args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        outs.push(stdout(&o));
    }
    assert_eq!(outs[0], outs[1], "notification vs ptrace");
    outs.remove(0)
}

const QUERIES: &str = "python3 -c 'import os; print(os.getuid(), os.geteuid(), os.getgid(), \
    os.getegid(), os.getresuid(), os.getresgid(), os.getgroups(), os.uname().nodename)'";

#[test]
fn the_given_ids_and_host_name_are_reported() {
    let out = both(
        &[
            "--uid",
            "4242",
            "--gid",
            "77",
            "--user",
            "alice",
            "--hostname",
            "node7.example",
        ],
        &format!("{QUERIES}; id; whoami; hostname; uname -n"),
    );
    assert_eq!(
        out,
        "4242 4242 77 77 (4242, 4242, 4242) (77, 77, 77) [77] node7.example\n\
         uid=4242(alice) gid=77(alice) groups=77(alice)\nalice\nnode7.example\nnode7.example\n"
    );
}

#[test]
fn a_known_user_brings_its_own_ids() {
    let out = both(&["--user", "nobody"], "id -u; id -g; id -un; echo ~nobody");
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let line = passwd
        .lines()
        .find(|l| l.starts_with("nobody:"))
        .expect("nobody in /etc/passwd");
    let f: Vec<&str> = line.split(':').collect();
    assert_eq!(out, format!("{}\n{}\nnobody\n{}\n", f[2], f[3], f[5]));
}

#[test]
fn without_options_the_real_identity_shows_and_files_keep_real_owners() {
    // SAFETY: plain id queries.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let t = Tree::new("ids-real");
    let out = both(&[], &format!("{QUERIES} | cut -d' ' -f1,3"));
    assert_eq!(out, format!("{uid} {gid}\n"));
    // The virtual identity is shown, not acquired: what the program makes is the real user's.
    let f = t.path("made");
    let out = both(
        &["--uid", "4242"],
        &format!("rm -f {0}; touch {0}; stat -c %u {0}", f.display()),
    );
    assert_eq!(out, format!("{uid}\n"));
}

#[test]
fn bad_identity_options_are_refused_with_exit_2() {
    for bad in [
        &["--user", "a:b"][..],
        &["--user", ""],
        &["--hostname", &"h".repeat(65)],
        &["--uid", "-1"],
    ] {
        let mut args = bad.to_vec();
        args.extend(["--", "true"]);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
        assert!(!stderr(&o).is_empty());
    }
}
