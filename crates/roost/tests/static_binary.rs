//! The one-file build for grid nodes (`scripts/release`): a static, stripped `roost` under
//! 15 MiB that runs alone in an otherwise empty root (a chroot holding only it, a static
//! test program and a `/proc`): `--version`, `serve` answering a client outside, and `run`.

use roost_testkit::peer;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const LIMIT: u64 = 15 << 20;

/// Builds the release binary with the script, in a target directory of its own (the outer
/// `cargo test` holds the workspace's), and returns its path.
fn release_binary(out: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let exe = std::env::current_exe().unwrap();
    let target = exe.ancestors().nth(3).unwrap().join("static-test");
    let status = Command::new(root.join("scripts/release"))
        .arg(out)
        .env("CARGO_TARGET_DIR", &target)
        .env("RELEASE_CARGO_FLAGS", "--offline --quiet")
        .status()
        .expect("run scripts/release");
    assert!(status.success(), "scripts/release failed");
    out.join("roost")
}

/// Runs `ARGS` inside a chroot of `root` with a fresh `/proc`, in a mount namespace of
/// its own (so the proc mount goes when it ends).
fn in_chroot(root: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("unshare");
    let script = format!(
        "mount -t proc proc {0}/proc && exec chroot {0} \"$@\"",
        root.display()
    );
    c.args(["--mount", "--fork", "sh", "-c", &script, "sh"]);
    c.args(args);
    c
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn the_static_binary_runs_alone_in_an_empty_root() {
    if !peer::root("chroot") {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let roost = release_binary(&work.path().join("dist"));
    let size = std::fs::metadata(&roost).unwrap().len();
    assert!(size < LIMIT, "roost is {size} bytes, over 15 MiB");
    assert!(
        work.path().join("dist/roost.debug").exists(),
        "no symbols file"
    );
    for made in [
        "man/man1/roost.1",
        "man/man1/roost-run.1",
        "completions/roost.bash",
        "completions/_roost",
        "completions/roost.fish",
    ] {
        let file = work.path().join("dist").join(made);
        let len = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
        assert!(len > 0, "scripts/release made no {made}");
    }
    let headers = Command::new("readelf")
        .args(["-lS"])
        .arg(&roost)
        .output()
        .unwrap();
    let headers = text(&headers.stdout);
    assert!(
        !headers.contains("INTERP"),
        "roost asks for a dynamic loader"
    );
    assert!(!headers.contains(".debug_info"), "roost is not stripped");

    // The root: the binary, a static C program, an exported directory, /proc and /tmp.
    let root = work.path().join("root");
    for d in ["bin", "srv", "proc", "tmp"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::copy(&roost, root.join("bin/roost")).unwrap();
    std::fs::write(root.join("srv/hello"), "hello from the node\n").unwrap();
    let src = work.path().join("cat.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\nint main(int c,char**v){FILE*f=fopen(v[1],\"r\");int ch;\
         if(!f){perror(v[1]);return 1;}while((ch=fgetc(f))!=EOF)putchar(ch);return 0;}\n",
    )
    .unwrap();
    let st = Command::new("gcc")
        .args(["-static", "-O1", "-o"])
        .arg(root.join("bin/cat"))
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success(), "gcc -static");

    let o = in_chroot(&root, &["/bin/roost", "--version"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).starts_with("roost "), "{}", text(&o.stdout));

    // roost run: a mount maps /data to /srv inside the root.
    let o = in_chroot(
        &root,
        &[
            "/bin/roost",
            "run",
            "--mount",
            "/data=/srv",
            "--",
            "/bin/cat",
            "/data/hello",
        ],
    )
    .output()
    .unwrap();
    assert_eq!(
        (text(&o.stdout).as_str(), o.status.code()),
        ("hello from the node\n", Some(0)),
        "{}",
        text(&o.stderr)
    );

    // roost serve inside, a client outside.
    let mut server = in_chroot(
        &root,
        &[
            "/bin/roost",
            "serve",
            "/srv",
            "--listen",
            "127.0.0.1",
            "--port",
            "0",
            "--acl",
            "address:127.0.0.1=rl",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit())
    .spawn()
    .unwrap();
    let mut first = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let addr =
        roost_server::announced_addr(&first).unwrap_or_else(|| panic!("no address in {first:?}"));
    let o = Command::new(env!("CARGO_BIN_EXE_roost"))
        .args(["cat", &format!("chirp://{addr}/hello"), "--auth", "address"])
        .output()
        .unwrap();
    // unshare waits for its child with signals blocked: end the child (the server), and
    // unshare returns with it.
    let children = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", server.id()));
    for child in children.unwrap_or_default().split_whitespace() {
        // SAFETY: a plain kill of a process this test started.
        unsafe { libc::kill(child.parse().unwrap_or(0), libc::SIGTERM) };
    }
    let _ = server.wait();
    assert_eq!(
        text(&o.stdout),
        "hello from the node\n",
        "{}",
        text(&o.stderr)
    );
}
