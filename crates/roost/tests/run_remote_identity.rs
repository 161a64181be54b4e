//! A remote file is one file however it is asked: its device and inode (and size, mode,
//! times) agree between name lookups, descriptor lookups and directory listings, in each
//! delivery mode, so the tools that compare them (GNU cp, install, mv, tar, rsync,
//! Python's shutil) treat a tree on a real `roost serve` on 127.0.0.1 as they treat a
//! local one. Every check compares with the same program run natively on a local copy.

use roost_testkit::peer::have;
use roost_testkit::remote::{Remote, CACHED, MODES};
use roost_testkit::run::*;
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;

/// An old, whole-second time (the Chirp protocol carries seconds), the same for both trees.
const WHEN: i64 = 1_600_000_000;

/// The source tree: files of several modes, a directory tree, an empty directory and two
/// names of one file. (No symlink: setting a symlink's own times on a Chirp server is
/// another issue's.)
fn populate(dir: &Path) {
    let file = |rel: &str, data: &[u8], mode: u32| {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, data).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    file("a.txt", b"alpha\n", 0o644);
    file("exec.sh", b"#!/bin/sh\necho hi\n", 0o755);
    file("private", b"secret\n", 0o600);
    file("sub/g", b"gamma\n", 0o644);
    file("sub/deep/f", &vec![7u8; 200_000], 0o644);
    file("hard1", b"one file, two names\n", 0o644);
    std::fs::hard_link(dir.join("hard1"), dir.join("hard2")).unwrap();
    std::fs::create_dir_all(dir.join("empty")).unwrap();
    // Times last, deepest first, so no later change moves a directory's.
    let mut all = walk(dir);
    all.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for p in all.iter().chain([&dir.to_path_buf()]) {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(WHEN as u64);
        let f = std::fs::File::open(p).unwrap();
        f.set_times(std::fs::FileTimes::new().set_accessed(t).set_modified(t))
            .unwrap();
    }
}

/// Every name below `dir` but the ACL files a Chirp server keeps beside its clients' files.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_name() == ".__acl" {
            continue;
        }
        out.push(e.path());
        if e.file_type().unwrap().is_dir() {
            out.extend(walk(&e.path()));
        }
    }
    out
}

/// What a tree holds, a line per name: kind, permission bits, size, content, which names
/// are one file, and (below the names in `timed`) the modification time.
fn manifest(dir: &Path, timed: &[&str]) -> String {
    let mut lines = Vec::new();
    let mut inodes: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let mut all = walk(dir);
    all.sort();
    for p in all {
        let rel = p.strip_prefix(dir).unwrap().display().to_string();
        let m = std::fs::symlink_metadata(&p).unwrap();
        let kind = if m.is_dir() {
            "dir"
        } else if m.is_symlink() {
            "link"
        } else {
            "file"
        };
        let content = if m.is_file() {
            let data = std::fs::read(&p).unwrap();
            let sum = data.iter().fold(0u64, |h, &b| {
                h.wrapping_mul(1_099_511_628_211) ^ u64::from(b)
            });
            inodes.entry(m.ino()).or_default().push(rel.clone());
            format!("{} {sum:x}", data.len())
        } else {
            String::new()
        };
        let time = if timed
            .iter()
            .any(|t| rel == *t || rel.starts_with(&format!("{t}/")))
        {
            format!(" mtime {}", m.mtime())
        } else {
            String::new()
        };
        lines.push(format!(
            "{rel} {kind} {:o} {content}{time}",
            m.mode() & 0o7777
        ));
    }
    let mut groups: Vec<String> = inodes
        .values()
        .filter(|n| n.len() > 1)
        .map(|names| format!("one file: {}", names.join(" = ")))
        .collect();
    groups.sort();
    lines.extend(groups);
    lines.join("\n")
}

/// The lines only in `native` and those only in `seen`.
fn differences(native: &str, seen: &str) -> String {
    let only = |a: &str, b: &str| -> Vec<String> {
        a.lines()
            .filter(|l| !b.lines().any(|m| m == *l))
            .map(str::to_string)
            .collect()
    };
    format!(
        "natively only {:#?}\nunder roost only {:#?}",
        only(native, seen),
        only(seen, native)
    )
}

/// The destinations whose times the command that made them keeps.
const TIMED: &[&str] = &["cp_a", "tar_x", "rsync_a", "copy2", "copytree", "mv_a"];

/// Copies `$S` into `$D` with each tool, and moves a copy to `$X` and back: `$S`, `$D` and
/// `$X` are on either side of a mapping. Prints each command's exit status.
const TOOLS: &str = r#"
cp "$S/a.txt" "$D/cp_plain"; echo "cp $?"
cp -r "$S" "$D/cp_r"; echo "cp -r $?"
cp -a "$S" "$D/cp_a"; echo "cp -a $?"
install -m 0644 "$S/exec.sh" "$D/installed"; echo "install $?"
tar cf "$X/t.tar" -C "$S" . ; echo "tar c $?"
mkdir "$D/tar_x" && tar xf "$X/t.tar" -C "$D/tar_x"; echo "tar x $?"
rm "$X/t.tar"
rsync -a "$S/" "$D/rsync_a/"; echo "rsync -a $?"
python3 - <<'EOF'
import os, shutil
s, d = os.environ['S'], os.environ['D']
shutil.copy2(s + '/a.txt', d + '/copy2')
shutil.copytree(s, d + '/copytree')
print('samefile', os.path.samefile(s + '/hard1', s + '/hard2'),
      os.path.samefile(s + '/a.txt', s + '/hard1'),
      os.path.samefile(s + '/sub/../a.txt', s + '/a.txt'))
EOF
echo "python $?"
cp -a "$S" "$X/mv_a" && mv "$X/mv_a" "$D/mv_a"; echo "mv in $?"
mv "$D/cp_r" "$X/mv_r" && mv "$X/mv_r" "$D/mv_r"; echo "mv out and back $?"
ls "$X"
"#;

/// Runs [`TOOLS`] natively on local trees, and under roost with the source, the
/// destination, or both on the server, in every mode: output and resulting trees must be
/// the native ones.
#[test]
fn cp_install_mv_tar_rsync_and_shutil_copy_remote_trees_as_local_ones() {
    assert!(have("rsync"), "rsync is needed (scripts/test --install)");
    let r = Remote::start();
    let root = r.root();
    populate(&root.join("src"));
    let local = tempfile::tempdir().unwrap();
    let lsrc = local.path().join("src");
    populate(&lsrc);

    let script = |s: &str, d: &str, x: &str| -> Vec<(String, String)> {
        vec![
            ("S".into(), s.into()),
            ("D".into(), d.into()),
            ("X".into(), x.into()),
        ]
    };
    let native_d = local.path().join("dn");
    let native_x = local.path().join("xn");
    std::fs::create_dir_all(&native_d).unwrap();
    std::fs::create_dir_all(&native_x).unwrap();
    let o = Command::new("sh")
        .args(["-c", TOOLS])
        .envs(script(
            &lsrc.display().to_string(),
            &native_d.display().to_string(),
            &native_x.display().to_string(),
        ))
        .output()
        .unwrap();
    let native = (stdout(&o) + &stderr(&o), manifest(&native_d, TIMED));
    assert!(
        native.0.contains("samefile True False True"),
        "{}",
        native.0
    );

    for (i, mode) in MODES.iter().enumerate() {
        // From the server, to it, and on it.
        for (j, (s_remote, d_remote)) in [(true, false), (false, true), (true, true)]
            .into_iter()
            .enumerate()
        {
            let tag = format!("{i}{j}");
            let (d_real, d_seen) = if d_remote {
                (root.join(format!("d{tag}")), r.url(&format!("/d{tag}")))
            } else {
                let p = local.path().join(format!("d{tag}"));
                (p.clone(), p.display().to_string())
            };
            let (x_real, x_seen) = if d_remote {
                let p = local.path().join(format!("x{tag}"));
                (p.clone(), p.display().to_string())
            } else {
                (root.join(format!("x{tag}")), r.url(&format!("/x{tag}")))
            };
            std::fs::create_dir_all(&d_real).unwrap();
            std::fs::create_dir_all(&x_real).unwrap();
            let s_seen = if s_remote {
                r.url("/src")
            } else {
                lsrc.display().to_string()
            };
            let env = script(&s_seen, &d_seen, &x_seen);
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (&k[..], &v[..])).collect();
            let o = r
                .command(mode, &[], &["sh", "-c", TOOLS])
                .envs(env)
                .output()
                .unwrap();
            let text = (stdout(&o) + &stderr(&o))
                .replace(&s_seen, &lsrc.display().to_string())
                .replace(&d_seen, &native_d.display().to_string())
                .replace(&x_seen, &native_x.display().to_string());
            let what = format!("{mode:?}, source remote {s_remote}, destination remote {d_remote}");
            assert_eq!(native.0, text, "{what}");
            let tree = manifest(&d_real, TIMED);
            assert!(
                native.1 == tree,
                "{what}: {}",
                differences(&native.1, &tree)
            );
        }
    }
}

/// The identity checker (`run_support/identity.c`) on every name of a tree with a
/// symlink, hard links and nested directories: natively everything agrees, and under
/// roost on the same tree on the server it must too, in every mode.
#[test]
fn names_descriptors_and_listings_agree_on_every_remote_name() {
    identities_agree(|r, mode, argv| r.run(mode, &[], argv));
}

/// The same as an ordinary user, where roost run has its whole in-process fast path (as
/// root it makes lookups only): a descriptor of a local copy, wherever the program puts it, is still answered
/// with the remote identity, though descriptors of local files are answered in-process.
#[test]
fn with_the_fast_path_descriptors_of_copies_keep_the_remote_identity() {
    identities_agree(|r, mode, argv| r.run_as_nobody(mode, &[], argv));
}

/// [`names_descriptors_and_listings_agree_on_every_remote_name`], running roost by `run`.
fn identities_agree(run: impl Fn(&Remote, &[&str], &[&str]) -> std::process::Output) {
    let r = Remote::start();
    let root = r.root();
    populate(&root.join("t"));
    std::os::unix::fs::symlink("a.txt", root.join("t/link")).unwrap();
    let local = tempfile::tempdir().unwrap();
    populate(&local.path().join("t"));
    std::os::unix::fs::symlink("a.txt", local.path().join("t/link")).unwrap();
    let names = |base: &str| -> Vec<String> {
        let mut v = vec![base.to_string()];
        for rel in [
            "a.txt",
            "exec.sh",
            "sub",
            "sub/g",
            "sub/deep",
            "sub/deep/f",
            "hard1",
            "hard2",
            "empty",
            "link",
        ] {
            v.push(format!("{base}/{rel}"));
        }
        v
    };
    let checker = compiled("identity");
    let checker = checker.to_str().unwrap();
    let lbase = local.path().join("t").display().to_string();
    let mut argv = vec![checker, &lbase];
    let lnames = names(&lbase);
    argv.extend(lnames.iter().map(String::as_str));
    let o = Command::new(argv[0]).args(&argv[1..]).output().unwrap();
    let native = stdout(&o) + &stderr(&o);
    assert!(o.status.success(), "natively: {native}");
    let rbase = r.url("/t");
    let rnames = names(&rbase);
    for mode in MODES {
        // Twice: the second run finds the cache warm (copies already made).
        for round in 0..2 {
            let mut argv = vec![checker, &rbase];
            argv.extend(rnames.iter().map(String::as_str));
            let o = run(&r, mode, &argv);
            let seen = stdout(&o) + &stderr(&o);
            assert_eq!(native, seen, "{mode:?}, round {round}");
        }
    }
}

/// Only the copies' descriptors are roost's: once a remote file was opened and read (its
/// copy made), a program's fstat of a local file is still answered in-process, as
/// `--summary` counts, and the remote one's still tells the remote identity.
#[test]
fn descriptors_of_local_files_stay_in_process_once_copies_exist() {
    let r = Remote::start();
    r.write("t/a.txt", b"remote\n");
    let file = r.url("/t/a.txt");
    let program = "import os, sys\n\
                   f = os.open(sys.argv[1], os.O_RDONLY)\n\
                   os.read(f, 6)\n\
                   local = os.open('/etc/passwd', os.O_RDONLY)\n\
                   for _ in range(500): os.fstat(local)\n\
                   print(os.fstat(f).st_ino == os.stat(sys.argv[1]).st_ino)";
    let o = r.run_as_nobody(CACHED, &["--summary"], &["python3", "-c", program, &file]);
    assert_eq!(stdout(&o), "True\n", "{}", stderr(&o));
    let summary = stderr(&o);
    let in_process = summary
        .split_once("in-process (fast path)")
        .map(|(_, rest)| rest)
        .unwrap_or_else(|| panic!("no fast path in the summary: {summary}"));
    let fstats: u64 = in_process
        .lines()
        .find_map(|l| l.trim().strip_prefix("fstat "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(fstats >= 500, "{fstats} fstats in-process: {summary}");
}

/// A remote file's preferred I/O size (`st_blksize`) is the client's, whether asked by name
/// or by descriptor: the size of one request, not the server's disk block (the 4 KiB that
/// had stdio read a linker's archives 4 KiB a round trip).
#[test]
fn remote_files_report_one_request_as_their_preferred_io_size() {
    let r = Remote::start();
    populate(&r.root().join("t"));
    let (file, dir) = (r.url("/t/a.txt"), r.url("/t"));
    let program = "import os, sys\n\
                   print([(os.stat(p).st_blksize, os.fstat(os.open(p, os.O_RDONLY)).st_blksize)\n\
                          for p in sys.argv[1:]])";
    for mode in MODES {
        let o = r.run(mode, &[], &["python3", "-c", program, &file, &dir]);
        assert_eq!(
            stdout(&o),
            "[(65536, 65536), (65536, 65536)]\n",
            "{mode:?}: {}",
            stderr(&o)
        );
    }
}

/// Python's view: scandir's inodes are stat's, a descriptor's identity is its name's
/// (`os.path.samestat`, as shutil.rmtree checks it), and `os.path.samefile` tells names
/// of one file from names of two, with the cwd on the server.
#[test]
fn python_scandir_fstat_and_samefile_agree_with_stat_on_a_remote_tree() {
    let r = Remote::start();
    let root = r.root();
    populate(&root.join("t"));
    let local = tempfile::tempdir().unwrap();
    populate(&local.path().join("t"));
    let program = r#"
import os, sys
os.chdir(sys.argv[1])
for top, dirs, files in sorted(os.walk('.')):
    with os.scandir(top) as it:
        for e in sorted(it, key=lambda e: e.name):
            st = os.stat(e.path, follow_symlinks=False)
            fd = os.open(e.path, os.O_RDONLY)
            fst = os.fstat(fd)
            os.close(fd)
            print(e.path, e.inode() == st.st_ino, os.path.samestat(st, fst),
                  e.is_dir(), st.st_size == fst.st_size, st.st_mtime == fst.st_mtime)
print(os.path.samefile('hard1', 'hard2'), os.path.samefile('a.txt', 'hard1'),
      os.path.samefile('.', os.getcwd()), os.path.samefile('sub/..', '.'))
"#;
    let o = Command::new("python3")
        .args(["-c", program])
        .arg(local.path().join("t"))
        .output()
        .unwrap();
    let native = stdout(&o) + &stderr(&o);
    assert!(native.contains("True False True True"), "{native}");
    for mode in MODES {
        let o = r.run(mode, &[], &["python3", "-c", program, &r.url("/t")]);
        assert_eq!(native, stdout(&o) + &stderr(&o), "{mode:?}");
    }
}
