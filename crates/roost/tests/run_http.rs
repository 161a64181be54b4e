//! `roost run` over HTTP: real programs on a tree indexed by `roost index` (or cctools'
//! `make_growfs`) and served by real web servers on 127.0.0.1 (`python3 -m http.server`,
//! nginx), reached as `/http/HOST:PORT/...` and through mounts, with notifications and with
//! `--no-notify`. What they see must be what they see of the same tree locally; a file
//! that does not match its index must never be shown.

use roost_group::fuzz_check::Rng;
use roost_testkit::run::*;
use roost_testkit::web::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// Runs `script` with `/m` mapped to `local` and then to `remote` (with `options`), in both
/// delivery modes: all four must agree.
fn same_as_local(s: &Site, local: &Path, remote: &str, options: &[&str], script: &str) -> String {
    let mut seen: Vec<(String, String)> = Vec::new();
    for mode in MODES {
        for (what, target) in [
            ("local", local.display().to_string()),
            ("http", remote.to_string()),
        ] {
            let mount = format!("/m={target}");
            let options = [&["--mount", &mount][..], options].concat();
            let o = s.run(mode, &options, &["sh", "-c", script]);
            seen.push((
                format!("{what} {mode:?}"),
                format!("{}\nexit {:?}", text(&o), o.status.code()),
            ));
        }
    }
    for (what, out) in &seen[1..] {
        assert_eq!(&seen[0].1, out, "{} vs {what}", seen[0].0);
    }
    seen.remove(0).1
}

/// Files, directories, a symlink, a script and a file over a megabyte under `base`.
fn populate(s: &Site, base: &str) {
    s.write(&format!("{base}/top.txt"), b"top level\nneedle one\n");
    s.write(&format!("{base}/sub/deep/f"), b"deep file\n");
    s.write(&format!("{base}/sub/g.txt"), b"needle two\n");
    s.write(&format!("{base}/with space.txt"), b"spaced\n");
    let big: Vec<u8> = (0..1_500_000u32).map(|i| (i * 7 % 251) as u8).collect();
    s.write(&format!("{base}/big"), &big);
    s.executable(
        &format!("{base}/run.sh"),
        b"#!/bin/sh\necho \"script $0 $*\"\n",
    );
    std::os::unix::fs::symlink("top.txt", s.root().join(format!("{base}/link"))).unwrap();
}

/// What the tree comparisons run (index files and their signatures are the server's, not
/// the tree's).
const SURVEY: &str = "cd /m && ls -lR && find . -name '.roostindex*' -prune -o \
     -printf '%p %y %s %m %n %Ts %l\\n' | sort && stat -c '%s %a %F %h %Y' /m /m/ && grep -rn --exclude='.roostindex*' needle . | sort \
     && cat sub/deep/f link 'with space.txt' && wc -c big && md5sum big \
     && stat -c '%s %a %F %h %Y' link sub big && readlink link && test -d sub && test -L link \
     && test -x run.sh && ./run.sh a b && cd sub && pwd && ls ../sub/deep && cat ../top.txt | wc -l";

#[test]
fn coreutils_see_the_served_tree_as_the_local_one() {
    let s = Site::new();
    populate(&s, "t");
    s.index("t");
    let web = Web::python(s.root());
    let out = same_as_local(&s, &s.root().join("t"), &web.url("/t"), &[], SURVEY);
    assert!(out.contains("needle two"), "{out}");
    assert!(out.contains("script ./run.sh a b"), "{out}");
    assert!(out.contains("1500000 big"), "{out}");
    assert!(out.ends_with("exit Some(0)"), "{out}");
}

#[test]
fn nginx_serves_the_tree_too_with_no_mount_at_all() {
    let mut s = Site::new();
    populate(&s, "t");
    s.index("t");
    let web = Web::nginx(s.root());
    let out = same_as_local(&s, &s.root().join("t"), &web.url("/t"), &[], SURVEY);
    assert!(out.ends_with("exit Some(0)"), "{out}");
    let script = format!("cat {0}/t/top.txt && ls /http", web.url(""));
    s.each_mode(
        Cache::Kept,
        &[],
        &["sh", "-c", &script],
        &format!("top level\nneedle one\n127.0.0.1:{}\n", web.port),
        &[],
    );
}

#[test]
fn the_tree_is_read_only() {
    let mut s = Site::new();
    populate(&s, "t");
    s.index("t");
    let web = Web::python(s.root());
    let mount = format!("/m=http://127.0.0.1:{}/t", web.port);
    s.each_mode(
        Cache::Kept,
        &["--mount", &mount],
        &[
            "sh",
            "-c",
            "for c in 'mkdir /m/d' 'rm /m/top.txt' 'mv /m/top.txt /m/x' 'chmod 600 /m/top.txt' \
             'touch /m/top.txt' 'ln -s a /m/l2'; do $c 2>&1 | grep -c 'Read-only file system'; done; \
             (echo x >> /m/top.txt) 2>/dev/null; echo $?; cat /m/top.txt",
        ],
        "1\n1\n1\n1\n1\n1\n2\ntop level\nneedle one\n",
        &[],
    );
}

#[test]
fn programs_and_scripts_run_from_http() {
    let mut s = Site::new();
    let src = s.write(
        "tools/src/hello.c",
        b"#include <stdio.h>\n#include <unistd.h>\nint main(int c, char **v) {\n  char exe[256] = {0};\n  readlink(\"/proc/self/exe\", exe, sizeof exe - 1);\n  printf(\"%s %s %d\\n\", v[0], exe, c);\n  return 0;\n}\n",
    );
    std::fs::create_dir(s.root().join("tools/bin")).unwrap();
    let st = Command::new("gcc")
        .arg("-o")
        .arg(s.root().join("tools/bin/hello"))
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    // A script whose interpreter is itself a script on the server.
    s.executable("tools/bin/inner.sh", b"#!/bin/sh\necho \"inner: $*\"\n");
    s.executable("tools/bin/outer", b"#!/tools/bin/inner.sh -x\nignored\n");
    s.index("tools");
    let web = Web::python(s.root());
    let mount = format!("/tools={}", web.url("/tools"));
    s.each_mode(
        Cache::Kept,
        &["--mount", &mount],
        &[
            "sh",
            "-c",
            "/tools/bin/hello a && cd /tools/bin && ./hello && ./outer y",
        ],
        "/tools/bin/hello /tools/bin/hello 2\n./hello /tools/bin/hello 1\ninner: -x ./outer y\n",
        &[],
    );
}

#[test]
fn python_imports_a_package_tree_served_over_http() {
    let mut s = Site::new();
    s.write("lib/pkg/__init__.py", b"from .core import VALUE\n");
    s.write("lib/pkg/core.py", b"VALUE = sum(range(10))\n");
    s.write("lib/pkg/sub/__init__.py", b"");
    s.write(
        "lib/pkg/sub/leaf.py",
        b"import json\nNAME = json.dumps({'leaf': 1})\n",
    );
    s.index("lib");
    let web = Web::python(s.root());
    let mount = format!("/py={}", web.url("/lib"));
    let program = "import sys; sys.path.insert(0, '/py'); import pkg, pkg.sub.leaf; \
                   print(pkg.VALUE, pkg.sub.leaf.NAME, pkg.__file__)";
    // Bytecode cannot be written back (read-only): Python goes on without it.
    s.each_mode(
        Cache::Kept,
        &["--mount", &mount],
        &python3_writing_bytecode(program),
        "45 {\"leaf\": 1} /py/pkg/__init__.py\n",
        &[],
    );
}

#[test]
fn a_file_changed_after_indexing_is_refused_with_eio() {
    let mut s = Site::new();
    populate(&s, "t");
    s.index("t");
    // Same size and time, other content: only the hash can tell.
    rewrite_keeping_time(&s.root().join("t/sub/g.txt"), b"tampered!!\n");
    // Another size.
    s.write("t/top.txt", b"grown since it was indexed\n");
    let web = Web::python(s.root());
    let script = format!(
        "cat {0}/sub/g.txt; echo $?; cat {0}/top.txt; echo $?; cat {0}/sub/deep/f",
        web.url("/t")
    );
    s.each_mode(
        Cache::Kept,
        &[],
        &["sh", "-c", &script],
        "1\n1\ndeep file\n",
        &[
            "/t/sub/g.txt: content does not match its index",
            "/t/top.txt: content does not match its index",
            "Input/output error",
        ],
    );
}

#[test]
fn without_an_index_files_read_and_directories_cannot_be_listed() {
    let mut s = Site::new();
    s.write("plain/f.txt", b"plain file\n");
    s.write("plain/d/inner", b"inner\n");
    let web = Web::python(s.root());
    let script = format!(
        "cat {0}/f.txt {0}/d/inner && stat -c '%s %F' {0}/f.txt {0}/d \
         && ls {0}/nope; ls {0}/d; echo $?",
        web.url("/plain")
    );
    s.each_mode(
        Cache::Kept,
        &[],
        &["sh", "-c", &script],
        "plain file\ninner\n11 regular file\n4096 directory\n2\n",
        &[
            "nope': No such file or directory",
            "/plain/d: cannot list a directory without an index",
        ],
    );
}

#[test]
fn a_tree_indexed_by_make_growfs_reads_as_the_local_one() {
    let s = Site::new();
    populate(&s, "g");
    s.make_growfs("g");
    assert!(s.root().join("g/.growfsdir").exists());
    let web = Web::python(s.root());
    let script = "cd /m && find . -mindepth 1 -name '.growfs*' -prune -o -mindepth 1 \
                  -printf '%p %y %s %m %Ts %l\\n' | sort \
                  && grep -rn --exclude='.growfs*' needle . | sort && cat sub/deep/f link \
                  && md5sum big 'with space.txt' && ./run.sh a";
    let out = same_as_local(&s, &s.root().join("g"), &web.url("/g"), &[], script);
    assert!(out.contains("./sub/g.txt:1:needle two"), "{out}");
    assert!(out.ends_with("script ./run.sh a\n\nexit Some(0)"), "{out}");
    // With no TTL, the listing is fetched again from the tree's top for every directory.
    let mount = format!("/m={}", web.url("/g"));
    let o = s.run(
        &[],
        &["--http-ttl", "0", "--mount", &mount],
        &[
            "sh",
            "-c",
            "find /m ! -name '.growfs*' | wc -l && cat /m/sub/deep/f",
        ],
    );
    assert_eq!(stdout(&o), "10\ndeep file\n", "{}", stderr(&o));
}

/// The modification time of each index file under `root`, by path.
fn index_times(root: &Path) -> Vec<(PathBuf, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if e.file_type().unwrap().is_dir() {
                dirs.push(p);
            } else if e.file_name() == ".roostindex" {
                out.push((
                    p.clone(),
                    std::fs::metadata(&p).unwrap().modified().unwrap(),
                ));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn roost_index_rewrites_only_what_changed() {
    let s = Site::new();
    populate(&s, "t");
    let first = stdout(&s.index("t"));
    assert!(first.contains("3 directories"), "{first}");
    assert!(first.contains("3 indexes written"), "{first}");
    let before = index_times(&s.root().join("t"));
    assert_eq!(before.len(), 3);
    let dir_time = |rel: &str| {
        std::fs::metadata(s.root().join(rel))
            .unwrap()
            .modified()
            .unwrap()
    };
    let sub_time = dir_time("t/sub");
    std::thread::sleep(Duration::from_millis(20));
    let again = stdout(&s.index("t"));
    assert!(
        again.contains("0 indexes written") && again.contains("0 bytes hashed"),
        "{again}"
    );
    assert_eq!(
        index_times(&s.root().join("t")),
        before,
        "nothing rewritten"
    );
    // A file changed in sub/deep: only that directory's index changes (directories keep
    // their times, so their parents' indexes stay as they are).
    s.write("t/sub/deep/f", b"changed, and longer\n");
    let third = stdout(&s.index("t"));
    assert!(third.contains("1 indexes written"), "{third}");
    let after = index_times(&s.root().join("t"));
    let changed: Vec<&PathBuf> = before
        .iter()
        .zip(&after)
        .filter(|(b, a)| b != a)
        .map(|(_, (p, _))| p)
        .collect();
    assert_eq!(changed, [&s.root().join("t/sub/deep/.roostindex")]);
    assert_eq!(dir_time("t/sub"), sub_time);
    // -q prints nothing but errors, and indexes all the same.
    s.write("t/sub/g.txt", b"changed again\n");
    let quiet = s.index_with("t", &["-q"]);
    assert_eq!(
        (stdout(&quiet), stderr(&quiet)),
        (String::new(), String::new())
    );
    assert_ne!(index_times(&s.root().join("t")), after);
}

#[test]
fn a_changed_index_is_seen_once_the_ttl_is_over() {
    let s = Site::new();
    s.write("t/f", b"old content\n");
    s.index("t");
    let web = Web::python(s.root());
    let change = format!(
        "echo new > {0}/t/f && {1} index {0}/t >/dev/null",
        s.root().display(),
        env!("CARGO_BIN_EXE_roost")
    );
    let script = format!(
        "cat {0}/f && {change} && sleep 1.5 && cat {0}/f",
        web.url("/t")
    );
    for (ttl, then) in [("300", "old content\n"), ("1", "new\n")] {
        s.write("t/f", b"old content\n");
        s.index("t");
        let o = s.run(&[], &["--http-ttl", ttl], &["sh", "-c", &script]);
        assert_eq!(
            stdout(&o),
            format!("old content\n{then}"),
            "--http-ttl {ttl}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn https_to_a_server_that_speaks_no_tls_fails_with_one_line() {
    let s = Site::new();
    s.write("t/f", b"x\n");
    s.index("t");
    let web = Web::python(s.root());
    let url = format!("/https/127.0.0.1:{}/t", web.port);
    let o = s.run(
        &[],
        &[],
        &["sh", "-c", &format!("cat {url}/f; ls {url}; echo $?")],
    );
    assert_eq!(stdout(&o), "2\n", "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.matches("roost: https://127.0.0.1").count(), 1, "{err}");
    assert!(err.contains("tls"), "{err}");
    assert!(err.contains("Input/output error"), "{err}");
}

/// A TLS server that answers every ClientHello with a warning alert (unrecognized_name),
/// which rustls logs as a warning through the `log` crate, and then hangs up. Serves until
/// the test process ends.
fn warning_alert_server() -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut header = [0u8; 5];
            if stream.read_exact(&mut header).is_err() {
                continue;
            }
            let mut hello = vec![0u8; usize::from(u16::from_be_bytes([header[3], header[4]]))];
            let _ = stream.read_exact(&mut hello);
            // An alert record (21), TLS 1.2, 2 bytes: level warning (1), unrecognized_name (112).
            let _ = stream.write_all(&[21, 3, 3, 0, 2, 1, 112]);
        }
    });
    port
}

#[test]
fn library_warnings_reach_stderr_unless_quiet() {
    // rustls logs what it receives through the `log` crate: roost run passes it on as
    // roost serve does, as an event=library line.
    let s = Site::new();
    let port = warning_alert_server();
    let url = format!("/https/127.0.0.1:{port}/t/f");
    let o = s.run(&[], &[], &["cat", &url]);
    let err = stderr(&o);
    let line = err
        .lines()
        .find(|l| l.contains("event=library"))
        .unwrap_or_else(|| panic!("no library line: {err}"));
    assert!(
        line.contains("level=error")
            && line.contains("target=rustls::")
            && line.contains("TLS alert warning received")
            && line.contains("UnrecognisedName"),
        "{line}"
    );
    // With -q only the libraries' errors come out; roost's own error about the file stays.
    let o = s.run(&[], &["-q"], &["cat", &url]);
    let err = stderr(&o);
    assert!(!err.contains("event=library"), "{err}");
    assert!(err.contains(&format!("https://127.0.0.1:{port}")), "{err}");
}

/// A throwaway CA made by the openssl command (nothing committed): `ca.pem` (its
/// certificate) in `dir`, and certificates it signs.
struct TestCa {
    dir: tempfile::TempDir,
}

impl TestCa {
    /// A CA named `name` (its subject's CN).
    fn new(name: &str) -> TestCa {
        let ca = TestCa {
            dir: tempfile::tempdir().unwrap(),
        };
        ca.new_key(
            "ca.key",
            &["-x509", "-out", "ca.pem", "-days", "2"],
            &format!("/CN={name}"),
        );
        ca
    }

    /// `openssl req` making a new P-256 key in `key` for `subject`, with `more` arguments
    /// (a self-signed certificate, or a signing request).
    fn new_key(&self, key: &str, more: &[&str], subject: &str) {
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let mut args = vec!["req"];
        args.extend(ec);
        args.extend(["-keyout", key, "-subj", subject]);
        args.extend(more);
        self.openssl(&args);
    }

    fn openssl(&self, args: &[&str]) {
        let o = Command::new("openssl")
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .expect("openssl (apt-get install openssl)");
        assert!(o.status.success(), "openssl {args:?}: {}", stderr(&o));
    }

    /// The CA's certificate (PEM).
    fn pem(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A server certificate `NAME.pem` and key `NAME.key` for `alt` (a subjectAltName
    /// value: `IP:127.0.0.1`), signed by this CA.
    fn sign(&self, name: &str, alt: &str) -> (PathBuf, PathBuf) {
        let (key, csr, pem, ext) = (
            format!("{name}.key"),
            format!("{name}.csr"),
            format!("{name}.pem"),
            format!("{name}.ext"),
        );
        std::fs::write(
            self.dir.path().join(&ext),
            format!("subjectAltName={alt}\nbasicConstraints=CA:FALSE\n"),
        )
        .unwrap();
        self.new_key(&key, &["-out", &csr], &format!("/CN={name}"));
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &pem,
            "-days",
            "2",
            "-extfile",
            &ext,
        ]);
        (self.dir.path().join(pem), self.dir.path().join(key))
    }
}

/// `s`'s tree served over https by nginx, with a certificate for `names` (openssl's
/// subjectAltName form) from a new test CA.
fn served_over_tls(s: &Site, names: &str) -> (TestCa, Web) {
    let ca = TestCa::new("roost test CA");
    let (cert, key) = ca.sign("server", names);
    let web = Web::nginx_tls(s.root(), &cert, &key);
    (ca, web)
}

/// `SSL_CERT_FILE=PEM` for roost run.
fn trusting(pem: &Path) -> Vec<(String, String)> {
    vec![("SSL_CERT_FILE".to_string(), pem.display().to_string())]
}

#[test]
fn a_signed_tree_served_over_https_reads_as_the_local_one() {
    let mut s = Site::new();
    populate(&s, "t");
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = gen_key(keys.path(), "k");
    s.index_signed("t", &key);
    let (ca, web) = served_over_tls(&s, "IP:127.0.0.1,DNS:localhost");
    // The test CA is trusted the way rustls-native-certs is told: SSL_CERT_FILE.
    s.env = trusting(&ca.pem());
    let pin = pinned(&[&public]);
    let url = format!("/https/127.0.0.1:{}/t", web.port);
    let out = same_as_local(&s, &s.root().join("t"), &url, &strs(&pin), SURVEY);
    assert!(out.ends_with("exit Some(0)"), "{out}");
    assert!(out.contains("script ./run.sh a b"), "{out}");
    // By a mount written as a URL, with no key pinned, too.
    let mount = format!("/m=https://localhost:{}/t", web.port);
    s.each_mode(
        Cache::Emptied,
        &["--mount", &mount],
        &["sh", "-c", "cat /m/sub/deep/f && /m/run.sh x"],
        "deep file\nscript /m/run.sh x\n",
        &[],
    );
}

/// Runs `cat` and `ls` of `url` (an https tree with `t/f`) and checks both fail with EIO
/// and one line naming `authority` and holding each of `said`.
fn refused(s: &Site, url: &str, authority: &str, said: &[&str]) {
    for mode in MODES {
        let o = s.run(
            mode,
            &[],
            &["sh", "-c", &format!("cat {url}/f; ls {url}; echo $?")],
        );
        let err = stderr(&o);
        assert_eq!(stdout(&o), "2\n", "{err}");
        let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("roost:")).collect();
        assert_eq!(lines.len(), 1, "{err}");
        let line = lines[0];
        assert!(
            line.contains(&format!("the certificate of {authority} is refused")),
            "{err}"
        );
        for part in said.iter().chain(&["--http-insecure"]) {
            assert!(line.contains(part), "{part}: {err}");
        }
        assert!(err.contains("Input/output error"), "{err}");
    }
}

#[test]
fn untrusted_or_misnamed_certificates_are_refused_unless_insecure() {
    let mut s = Site::new();
    s.write("t/f", b"over tls\n");
    s.index("t");
    let (ca, web) = served_over_tls(&s, "IP:127.0.0.1");
    let authority = format!("127.0.0.1:{}", web.port);
    let url = format!("/https/{authority}/t");
    // The system's CAs do not vouch for the test CA.
    refused(&s, &url, &authority, &["UnknownIssuer", "SSL_CERT_FILE="]);
    // Another CA trusted instead.
    let other = TestCa::new("another roost test CA");
    s.env = trusting(&other.pem());
    refused(&s, &url, &authority, &["UnknownIssuer", "SSL_CERT_FILE="]);
    // A trust store that cannot be read trusts nothing, and says so.
    s.env = trusting(Path::new("/nonexistent/ca.pem"));
    let o = s.run(&[], &[], &["cat", &format!("{url}/f")]);
    let err = stderr(&o);
    assert!(
        err.starts_with(
            "roost run: SSL_CERT_FILE=/nonexistent/ca.pem: No such file or directory (os error \
             2); https servers will be refused\n"
        ),
        "{err}"
    );
    assert!(err.contains("UnknownIssuer"), "{err}");
    // The CA trusted, but the certificate is for another name.
    s.env = trusting(&ca.pem());
    let (cert, key) = ca.sign("elsewhere", "DNS:elsewhere.example");
    let misnamed = Web::nginx_tls(s.root(), &cert, &key);
    let authority = format!("127.0.0.1:{}", misnamed.port);
    let misnamed_url = format!("/https/{authority}/t");
    refused(
        &s,
        &misnamed_url,
        &authority,
        &[
            "certificate not valid for name \"127.0.0.1\"",
            "elsewhere.example",
            "name it as its certificate does",
        ],
    );
    eprintln!(
        "{}",
        stderr(&s.run(&[], &[], &["cat", &format!("{misnamed_url}/f")]))
    );
    // With --http-insecure both read, still over TLS; the warning is said once.
    s.env.clear();
    for url in [&url, &misnamed_url] {
        for (mode, err) in s.each_mode(
            Cache::Emptied,
            &["--http-insecure"],
            &["sh", "-c", &format!("cat {url}/f; ls {url}; cat {url}/f")],
            "over tls\nf\nover tls\n",
            &[],
        ) {
            let warned = "roost run: --http-insecure: the certificates of https servers are \
                          not checked";
            assert_eq!(err.matches(warned).count(), 1, "{mode:?}: {err}");
            assert_eq!(err.lines().count(), 1, "{mode:?}: {err}");
        }
    }
    // `--insecure` is the same option.
    let o = s.run(&[], &["--insecure"], &["cat", &format!("{url}/f")]);
    assert_eq!(stdout(&o), "over tls\n", "{}", stderr(&o));
}

/// A forward proxy on 127.0.0.1 that answers only `CONNECT HOST:PORT` (as a proxy does
/// for https: a byte pipe, seeing no more than the server's name), for as long as the test
/// runs; each CONNECT's target goes to the returned list.
fn connect_proxy() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let log = log.clone();
            std::thread::spawn(move || {
                let mut reader = std::io::BufReader::new(client.try_clone().unwrap());
                let mut request = String::new();
                reader.read_line(&mut request).unwrap_or(0);
                let mut line = String::new();
                while reader.read_line(&mut line).unwrap_or(0) > 2 {
                    line.clear();
                }
                let mut client = client;
                let target = match request.split_whitespace().collect::<Vec<_>>()[..] {
                    ["CONNECT", target, _] => target.to_string(),
                    _ => {
                        let _ = client.write_all(b"HTTP/1.1 405 Not Allowed\r\n\r\n");
                        return;
                    }
                };
                log.lock().unwrap().push(target.clone());
                let Ok(server) = std::net::TcpStream::connect(&target) else {
                    let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n");
                    return;
                };
                client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .unwrap();
                let (mut from_client, mut to_server) = (reader, server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from_client, &mut to_server);
                    let _ = to_server.shutdown(std::net::Shutdown::Write);
                });
                let (mut from_server, mut to_client) = (server, client);
                let _ = std::io::copy(&mut from_server, &mut to_client);
                let _ = to_client.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    (format!("http://127.0.0.1:{port}"), seen)
}

#[test]
fn https_goes_through_a_proxy_by_connect_with_tls_end_to_end() {
    let mut s = Site::new();
    s.write("t/f", b"over tls\n");
    s.index("t");
    let (ca, web) = served_over_tls(&s, "IP:127.0.0.1");
    let (proxy, seen) = connect_proxy();
    let authority = format!("127.0.0.1:{}", web.port);
    let url = format!("/https/{authority}/t");
    let script = format!("cat {url}/f; ls {url}");
    // The server's certificate is checked through the tunnel: refused without its CA...
    let o = s.run(&[], &["--http-proxy", &proxy], &["sh", "-c", &script]);
    let err = stderr(&o);
    assert!(
        err.contains(&format!("the certificate of {authority} is refused")),
        "{err}"
    );
    assert!(
        !err.contains("roost: proxy"),
        "the proxy is not at fault: {err}"
    );
    // ...read with it, and with --http-insecure.
    s.env = trusting(&ca.pem());
    let o = s.run(&[], &["--http-proxy", &proxy], &["sh", "-c", &script]);
    assert_eq!(stdout(&o), "over tls\nf\n", "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    s.env.clear();
    s.cache = tempfile::tempdir().unwrap();
    let o = s.run(
        &[],
        &["--http-proxy", &proxy, "--http-insecure"],
        &["sh", "-c", &script],
    );
    assert_eq!(stdout(&o), "over tls\nf\n", "{}", stderr(&o));
    let seen = seen.lock().unwrap();
    assert!(seen.len() >= 3, "{seen:?}");
    assert!(seen.iter().all(|t| *t == authority), "{seen:?}");
}

#[test]
fn a_large_file_is_fetched_in_blocks_over_https() {
    let mut s = Site::new();
    let data = big_data(BIG);
    let local = s.write("t/big.dat", &data);
    s.index_with("t", &INDEX_BLOCKS);
    let (ca, web) = served_over_tls(&s, "IP:127.0.0.1");
    s.env = trusting(&ca.pem());
    let url = format!("/https/127.0.0.1:{}/t/big.dat", web.port);
    let script = format!("cmp {url} {} && echo same", local.display());
    let o = s.run(&[], &FETCH_BLOCKS, &["sh", "-c", &script]);
    assert_eq!(stdout(&o), "same\n", "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    // One 206 for each block, over TLS.
    let got = asked_for(&web, 0, "/t/big.dat");
    assert_eq!(got.len(), 4, "{got:?}");
    for range in BIG_RANGES {
        let want = format!("206 - \"bytes={range}\"");
        assert!(got.iter().any(|l| l.ends_with(&want)), "{range}: {got:?}");
    }
}

#[test]
fn plain_http_to_an_https_port_fails_cleanly() {
    let s = Site::new();
    s.write("t/f", b"over tls\n");
    s.index("t");
    let (_ca, web) = served_over_tls(&s, "IP:127.0.0.1");
    let url = web.url("/t");
    let o = s.run(
        &[],
        &[],
        &["sh", "-c", &format!("cat {url}/f; ls {url}; echo $?")],
    );
    let err = stderr(&o);
    assert_eq!(stdout(&o), "2\n", "{err}");
    let said = format!(
        "roost: http://127.0.0.1:{p}: the server answers HTTP status 400 (bad request); a \
         server that speaks only https answers so: try /https/127.0.0.1:{p}\n",
        p = web.port
    );
    assert_eq!(err.matches(&said).count(), 1, "{err}");
    assert!(err.contains("cat: '/http/127.0.0.1"), "{err}");
    assert!(err.contains("Input/output error"), "{err}");
    assert_eq!(err.lines().count(), 3, "{err}");
}

/// The lines of `err` that say a fall-back from a proxy.
fn fall_backs(err: &str) -> Vec<&str> {
    err.lines()
        .filter(|l| l.starts_with("roost: proxy "))
        .collect()
}

#[test]
fn reads_go_through_a_caching_proxy() {
    let s = Site::new();
    populate(&s, "t");
    s.index("t");
    let web = Web::python(s.root());
    let proxy = Web::caching_proxy(&[]);
    let via = ["--http-proxy", &proxy.proxy()];
    let out = same_as_local(&s, &s.root().join("t"), &web.url("/t"), &via, SURVEY);
    assert!(out.ends_with("exit Some(0)"), "{out}");
    assert!(!out.contains("roost:"), "{out}");
    let log = proxy.log();
    let asked = |path: &str| format!("\"GET http://127.0.0.1:{}{path} HTTP/1.1\" 200", web.port);
    for path in [
        "/t/.roostindex",
        "/t/sub/.roostindex",
        "/t/big",
        "/t/run.sh",
    ] {
        assert!(log.contains(&asked(path)), "{path}: {log}");
    }
    // Another job (an empty cache of its own) finds the files in the proxy's cache.
    let o = Site::new().run(&[], &via, &["md5sum", &web.url("/t/big")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        proxy.log().contains(&format!("{} HIT", asked("/t/big"))),
        "{}",
        proxy.log()
    );
}

#[test]
fn files_fetched_through_a_proxy_share_one_kept_alive_connection() {
    let mut s = Site::new();
    populate(&s, "t");
    s.index("t");
    let web = Web::python(s.root());
    let proxy = Web::caching_proxy(&[]);
    let files = ["top.txt", "sub/g.txt", "sub/deep/f", "big", "run.sh"];
    let script = files
        .iter()
        .map(|f| format!("md5sum {}/{f}", web.url("/t")))
        .collect::<Vec<_>>()
        .join(" && ");
    // Without prefetching, which fetches the other files of a directory on connections of
    // their own (run_http_prefetch.rs).
    for mode in MODES {
        let skip = proxy.log().lines().count();
        // Each mode from an empty cache, which asks for every index and file.
        s.cache = tempfile::tempdir().unwrap();
        let o = s.run(
            mode,
            &["--http-proxy", &proxy.proxy(), "--http-prefetch", "0"],
            &["sh", "-c", &script],
        );
        assert!(o.status.success(), "{mode:?}: {}", stderr(&o));
        assert_eq!(stdout(&o).lines().count(), files.len(), "{mode:?}");
        // nginx's log: `CONNECTION REQUESTS "REQUEST" ...`, one line a request.
        let log = proxy.log();
        let run: Vec<(&str, usize)> = log
            .lines()
            .skip(skip)
            .map(|l| {
                let mut fields = l.split(' ');
                let connection = fields.next().unwrap();
                (connection, fields.next().unwrap().parse().unwrap())
            })
            .collect();
        // Each directory's index, then each file.
        assert!(run.len() >= 4, "{mode:?}: {log}");
        assert!(
            run.iter().all(|(c, _)| *c == run[0].0),
            "{mode:?}: not all on one connection: {log}"
        );
        let counts: Vec<usize> = run.iter().map(|r| r.1).collect();
        assert_eq!(
            counts,
            (1..=run.len()).collect::<Vec<_>>(),
            "{mode:?}: {log}"
        );
    }
}

#[test]
fn a_proxy_that_is_down_is_left_for_the_next_and_then_for_the_origin() {
    let s = Site::new();
    populate(&s, "t");
    s.index("t");
    let web = Web::python(s.root());
    let good = Web::caching_proxy(&[]);
    let dead = format!("http://127.0.0.1:{}", free_port());
    let script = format!("cat {0}/top.txt {0}/sub/g.txt && ls {0}/sub", web.url("/t"));
    let want = "top level\nneedle one\nneedle two\ndeep\ng.txt\n";
    // Every run starts cold, so that it asks for something (a warm one asks for nothing
    // within the TTL, not even for the server root's missing index).
    let cold = || {
        let _ = std::fs::remove_dir_all(s.cache.path().join("objects"));
    };
    for mode in MODES {
        // Only a dead proxy: the origin, said once however many requests follow.
        cold();
        let o = s.run(mode, &["--http-proxy", &dead], &["sh", "-c", &script]);
        assert_eq!(stdout(&o), want, "{mode:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert_eq!(
            fall_backs(&err),
            [format!(
                "roost: proxy {dead} failed (Connection Failed: Connect error: Connection \
                 refused (os error 111)); using the origin server instead"
            )],
            "{mode:?}: {err}"
        );
        // A dead proxy and a good one (either may be picked first): the good one is used.
        let before = good.log().lines().count();
        cold();
        let o = s.run(
            mode,
            &["--http-proxy", &dead, "--http-proxy", &good.proxy()],
            &["sh", "-c", &script],
        );
        assert_eq!(stdout(&o), want, "{mode:?}: {}", stderr(&o));
        let err = stderr(&o);
        let lines = fall_backs(&err);
        assert!(
            lines.is_empty()
                || lines
                    == [format!(
                        "roost: proxy {dead} failed (Connection Failed: Connect error: Connection \
                     refused (os error 111)); using proxy {} instead",
                        good.proxy()
                    )],
            "{mode:?}: {err}"
        );
        assert!(good.log().lines().count() > before, "{}", good.log());
    }
    // From the environment: http_proxy, unless no_proxy lists the server.
    for (no_proxy, said) in [("", 1), ("localhost,127.0.0.0/8", 0), ("127.0.0.1", 0)] {
        cold();
        let o = s
            .command(&[], &[], &["sh", "-c", &script])
            .env("http_proxy", &dead)
            .env("no_proxy", no_proxy)
            .output()
            .unwrap();
        assert_eq!(stdout(&o), want, "no_proxy={no_proxy}: {}", stderr(&o));
        assert_eq!(fall_backs(&stderr(&o)).len(), said, "{}", stderr(&o));
    }
    // A malformed proxy is refused before anything runs.
    let o = s.run(&[], &["--http-proxy", "ftp://h:1"], &["true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--http-proxy: proxy ftp://h:1: expected"),
        "{}",
        stderr(&o)
    );
    // A malformed variable, meant for other programs perhaps, is said and ignored.
    let o = s
        .command(&[], &[], &["sh", "-c", &script])
        .env("HTTP_PROXY", "socks5://h:1")
        .output()
        .unwrap();
    assert_eq!(stdout(&o), want, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("roost run: http_proxy: proxy socks5://h:1: expected"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn with_the_origin_and_its_proxies_down_calls_fail_with_eio_within_the_timeout() {
    let s = Site::new();
    let origin = free_port();
    let dead = format!("http://127.0.0.1:{}", free_port());
    // A proxy that takes connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent = format!("http://127.0.0.1:{}", silent.local_addr().unwrap().port());
    let url = format!("/http/127.0.0.1:{origin}/t");
    for mode in MODES {
        let started = Instant::now();
        let o = s.run(
            mode,
            &[
                "--io-timeout",
                "2",
                "--http-proxy",
                &dead,
                "--http-proxy",
                &silent,
            ],
            &[
                "sh",
                "-c",
                &format!("cat {url}/f; echo $?; ls {url}; echo $?"),
            ],
        );
        let took = started.elapsed();
        assert_eq!(stdout(&o), "1\n2\n", "{mode:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert_eq!(fall_backs(&err).len(), 2, "{mode:?}: {err}");
        assert!(
            err.lines().any(
                |l| l.starts_with(&format!("roost: proxy {silent} failed ("))
                    && l.contains("timed out")
            ),
            "{mode:?}: {err}"
        );
        assert_eq!(
            err.matches(&format!(
                "roost: http://127.0.0.1:{origin}/.roostindex: Connection Failed"
            ))
            .count(),
            1,
            "{mode:?}: {err}"
        );
        assert!(err.contains("Input/output error"), "{mode:?}: {err}");
        // One timeout (the silent proxy, once), not one a request.
        assert!(took < Duration::from_secs(10), "{mode:?}: {took:?}");
    }
}

#[test]
fn a_tampered_copy_on_a_proxy_is_refused_and_fetched_again() {
    let mut s = Site::new();
    populate(&s, "t");
    s.index("t");
    let web = Web::python(s.root());
    // Same size as "needle two\n": only the hash can tell.
    let tampered = Web::caching_proxy(&[("/t/sub/g.txt", b"needle TWO\n")]);
    let good = Web::caching_proxy(&[]);
    let g = format!(
        "\"GET http://127.0.0.1:{}/t/sub/g.txt HTTP/1.1\" 200",
        web.port
    );
    let script = format!("cat {0}/sub/g.txt {0}/top.txt", web.url("/t"));
    let want = "needle two\ntop level\nneedle one\n";
    for mode in MODES {
        // The tampered proxy alone: the origin's copy.
        s.cache = tempfile::tempdir().unwrap();
        let o = s.run(
            mode,
            &["--http-proxy", &tampered.proxy()],
            &["sh", "-c", &script],
        );
        assert_eq!(stdout(&o), want, "{mode:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(tampered.log().contains(&g), "{}", tampered.log());
        assert!(
            err.contains(&format!(
                "/t/sub/g.txt: content does not match its index (sha {}, the index says {} \
                 through proxy {}); fetching it again",
                hex_sha256(b"needle TWO\n"),
                hex_sha256(b"needle two\n"),
                tampered.proxy()
            )),
            "{mode:?}: {err}"
        );
        assert!(!err.contains("Input/output error"), "{mode:?}: {err}");
        // With a good proxy as well: the good proxy's copy, whichever is picked first.
        s.cache = tempfile::tempdir().unwrap();
        let o = s.run(
            mode,
            &[
                "--http-proxy",
                &tampered.proxy(),
                "--http-proxy",
                &good.proxy(),
            ],
            &["sh", "-c", &script],
        );
        assert_eq!(stdout(&o), want, "{mode:?}: {}", stderr(&o));
        assert!(good.log().contains(&g), "{}", good.log());
    }
    // The origin's copy wrong too: EIO, after the proxy's and the origin's attempts.
    rewrite_keeping_time(&s.root().join("t/sub/g.txt"), b"needle 2!!\n");
    s.each_mode(
        Cache::Emptied,
        &["--http-proxy", &tampered.proxy()],
        &["sh", "-c", &format!("{script}; echo $?")],
        "top level\nneedle one\n1\n",
        &[
            "/t/sub/g.txt: content does not match its index (sha ",
            "refused after 4 attempts",
            "Input/output error",
        ],
    );
}

#[test]
fn a_stale_index_on_a_proxy_is_fetched_again_from_the_origin() {
    let mut s = Site::new();
    s.write("t/f", b"old content\n");
    s.index("t");
    let web = Web::python(s.root());
    let proxy = Web::caching_proxy(&[]);
    let via = ["--http-proxy", &proxy.proxy()];
    // The proxy keeps the index (for ten minutes)...
    let o = s.run(&[], &via, &["ls", &web.url("/t")]);
    assert_eq!(stdout(&o), "f\n", "{}", stderr(&o));
    // ... while the tree changes on the server.
    s.write("t/f", b"new content, longer\n");
    s.index("t");
    let runs = s.each_mode(
        Cache::Emptied,
        &via,
        &["cat", &web.url("/t/f")],
        "new content, longer\n",
        &[],
    );
    for (mode, err) in runs {
        assert!(!err.contains("Input/output error"), "{mode:?}: {err}");
    }
}

/// The SHA-256 of `data` in hex, as `sha256sum` says it.
/// `data` as lowercase hexadecimal (as Python's `bytes.hex()`).
fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

fn hex_sha256(data: &[u8]) -> String {
    let mut c = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(c.stdin.as_mut().unwrap(), data).unwrap();
    let out = c.wait_with_output().unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_string()
}

/// `roost index --gen-key DIR/NAME`: the private key file and the public one (whose line
/// the command printed).
fn gen_key(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let key = dir.join(name);
    let o = try_gen_key(&key);
    assert!(o.status.success(), "{}", stderr(&o));
    let public = dir.join(format!("{name}.pub"));
    let line = std::fs::read_to_string(&public).unwrap();
    assert_eq!(stdout(&o), line);
    assert!(
        line.starts_with("roost-ed25519 ") && line.len() == 14 + 64 + 1,
        "{line}"
    );
    (key, public)
}

/// `roost index --gen-key KEY`, however it ends.
fn try_gen_key(key: &Path) -> Output {
    roost()
        .arg("index")
        .arg("--gen-key")
        .arg(key)
        .output()
        .unwrap()
}

/// `--http-key PUBFILE` for each of `keys`.
fn pinned(keys: &[&Path]) -> Vec<String> {
    keys.iter()
        .flat_map(|k| ["--http-key".to_string(), k.display().to_string()])
        .collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn a_signed_tree_reads_as_the_local_one_with_its_key_pinned() {
    let mut s = Site::new();
    populate(&s, "t");
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = gen_key(keys.path(), "k");
    let out = stdout(&s.index_signed("t", &key));
    assert!(out.contains("3 signatures written"), "{out}");
    let web = Web::python(s.root());
    let pin = pinned(&[&public]);
    let out = same_as_local(&s, &s.root().join("t"), &web.url("/t"), &strs(&pin), SURVEY);
    assert!(out.ends_with("exit Some(0)"), "{out}");
    // The signatures are the server's, not entries of the tree; a file changed on the
    // server after signing is refused as ever (fetched anew: another cache).
    rewrite_keeping_time(&s.root().join("t/sub/g.txt"), b"needle TWO\n");
    s.cache = tempfile::tempdir().unwrap();
    let mount = format!("/m={}", web.url("/t"));
    let options = [strs(&pin), vec!["--mount", &mount]].concat();
    s.each_mode(
        Cache::Kept,
        &options,
        &["sh", "-c", "ls -a /m/sub; cat /m/sub/g.txt; echo $?"],
        ".\n..\ndeep\ng.txt\n1\n",
        &[
            "/t/sub/g.txt: content does not match its index",
            "Input/output error",
        ],
    );
}

#[test]
fn tampered_moved_unsigned_or_foreign_indexes_are_refused() {
    let mut s = Site::new();
    populate(&s, "t");
    s.write("t/other/o", b"other\n");
    s.write("u/f", b"unsigned\n");
    s.index("u");
    s.write("plain/f", b"no index\n");
    populate(&s, "g");
    s.make_growfs("g");
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = gen_key(keys.path(), "k");
    let (_, foreign) = gen_key(keys.path(), "foreign");
    s.index_signed("t", &key);
    // sub/deep's index changed after signing (f's hash), its old signature kept.
    let deep = s.root().join("t/sub/deep/.roostindex");
    let text = std::fs::read_to_string(&deep).unwrap();
    let changed = text.replace(&hex_sha256(b"deep file\n"), &hex_sha256(b"deep FILE\n"));
    assert_ne!(text, changed);
    std::fs::write(&deep, changed).unwrap();
    // other's index and signature replaced by sub's (signed for /sub).
    for name in [".roostindex", ".roostindex.sig"] {
        std::fs::copy(
            s.root().join("t/sub").join(name),
            s.root().join("t/other").join(name),
        )
        .unwrap();
    }
    let web = Web::python(s.root());
    let mounts: Vec<String> = [("m", "t"), ("u", "u"), ("p", "plain"), ("g", "g")]
        .iter()
        .flat_map(|(at, dir)| {
            [
                "--mount".into(),
                format!("/{at}={}", web.url(&format!("/{dir}"))),
            ]
        })
        .collect();
    let script = "cat /m/top.txt /m/sub/g.txt; ls /m/sub/deep; echo $?; cat /m/sub/deep/f; \
                  echo $?; ls /m/other; echo $?; cat /u/f; echo $?; cat /p/f; echo $?; \
                  ls /g; echo $?";
    let url = |path: &str| format!("roost: http://127.0.0.1:{}{path}", web.port);
    let said = [
        url(
            "/t/sub/deep/.roostindex: signature does not verify with the pinned key (the \
             index or its signature changed after signing); directory refused",
        ),
        url(
            "/t/other/.roostindex: the signature is for directory /sub of a tree, not this \
             one; directory refused",
        ),
        url("/u/.roostindex: no signature; directory refused"),
        url("/plain/f: no signed index lists it; refused"),
        url("/g/.growfsdir: a GROW-FS tree cannot be signed; refused"),
    ];
    let options = [pinned(&[&public]), mounts.clone()].concat();
    let runs = s.each_mode(
        Cache::Kept,
        &strs(&options),
        &["sh", "-c", script],
        "top level\nneedle one\nneedle two\n2\n1\n2\n1\n1\n2\n",
        &[],
    );
    for (mode, err) in runs {
        for line in &said {
            assert_eq!(
                err.matches(line.as_str()).count(),
                1,
                "{mode:?}: {line}\n{err}"
            );
        }
        assert_eq!(
            err.matches("Input/output error").count(),
            6,
            "{mode:?}: {err}"
        );
    }
    // Signed by a key that is not pinned: refused, naming the key; with both pinned, used.
    let only_foreign = [pinned(&[&foreign]), mounts[..2].to_vec()].concat();
    let wrong = s.run(&[], &strs(&only_foreign), &["cat", "/m/top.txt"]);
    assert_eq!(stdout(&wrong), "", "{}", stderr(&wrong));
    let public_line = std::fs::read_to_string(&public).unwrap();
    assert!(
        stderr(&wrong).contains(&format!(
            "/t/.roostindex: signature does not verify with the pinned key (it names the key \
             {}, not pinned); directory refused",
            public_line.trim()
        )),
        "{}",
        stderr(&wrong)
    );
    let both = [pinned(&[&foreign, &public]), mounts[..2].to_vec()].concat();
    let o = s.run(&[], &strs(&both), &["cat", "/m/top.txt"]);
    assert_eq!(stdout(&o), "top level\nneedle one\n", "{}", stderr(&o));
}

#[test]
fn a_kept_index_is_used_with_pinned_keys_only_while_its_signature_verifies() {
    let s = Site::new();
    s.write("t/f", b"signed\n");
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = gen_key(keys.path(), "k");
    s.index_signed("t", &key);
    let web = Web::python(s.root());
    let options = pinned(&[&public]);
    let f = web.url("/t/f");
    let asked = || web.log().matches("\"GET /t/.roostindex HTTP").count();
    let stat = || {
        let o = s.run(&[], &strs(&options), &["stat", "-c", "%a %s", &f]);
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o)
    };
    assert_eq!(stat(), "644 7\n");
    assert_eq!(asked(), 1, "{}", web.log());
    // A later run takes the index (and its signature, checked again) from the cache.
    assert_eq!(stat(), "644 7\n");
    assert_eq!(asked(), 1, "{}", web.log());
    // The kept index changed in the cache (f's mode 0644 made 0666): its signature no
    // longer verifies, so it is not used but fetched again.
    let mut changed = 0;
    for k in std::fs::read_dir(s.cache.path().join("objects"))
        .unwrap()
        .flatten()
    {
        let note = k.path().join("note");
        if let Ok(bytes) = std::fs::read(&note) {
            let text = String::from_utf8_lossy(&bytes).replace("f 0644 ", "f 0666 ");
            changed += usize::from(text.as_bytes() != bytes);
            std::fs::write(&note, text).unwrap();
        }
    }
    assert_eq!(changed, 1);
    assert_eq!(stat(), "644 7\n");
    assert_eq!(asked(), 2, "{}", web.log());
}

#[test]
fn a_bad_signature_on_a_proxy_is_fetched_again_from_the_origin() {
    let mut s = Site::new();
    s.write("t/f", b"signed\n");
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = gen_key(keys.path(), "k");
    s.index_signed("t", &key);
    let web = Web::python(s.root());
    // The proxy's copy of the signature: one digit changed.
    let sig = std::fs::read_to_string(s.root().join("t/.roostindex.sig")).unwrap();
    let at = sig.find("\nsignature ").unwrap() + 11;
    let digit = if &sig[at..at + 1] == "0" { "1" } else { "0" };
    let forged = format!("{}{digit}{}", &sig[..at], &sig[at + 1..]);
    let proxy = Web::caching_proxy(&[("/t/.roostindex.sig", forged.as_bytes())]);
    let options = [
        pinned(&[&public]),
        vec!["--http-proxy".into(), proxy.proxy()],
    ]
    .concat();
    let refetched = format!(
        "roost: http://127.0.0.1:{}/t/.roostindex: signature does not verify with the pinned \
         key (the index or its signature changed after signing) through proxy {}; fetching \
         it again",
        web.port,
        proxy.proxy()
    );
    // An emptied cache: a kept index (with the origin's signature) would be used without
    // asking the proxy.
    let runs = s.each_mode(
        Cache::Emptied,
        &strs(&options),
        &["cat", &web.url("/t/f")],
        "signed\n",
        &[&refetched],
    );
    for (mode, err) in runs {
        assert!(!err.contains("refused"), "{mode:?}: {err}");
    }
    let sig_get = format!(
        "\"GET http://127.0.0.1:{}/t/.roostindex.sig HTTP/1.1\" 200",
        web.port
    );
    assert!(proxy.log().contains(&sig_get), "{}", proxy.log());
}

#[test]
fn keys_are_made_once_and_signatures_kept_only_while_they_verify() {
    let s = Site::new();
    populate(&s, "t");
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = gen_key(keys.path(), "k");
    let mode = std::fs::metadata(&key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // --gen-key never overwrites: neither the public key nor the private one.
    let before = std::fs::read(&key).unwrap();
    let again = |what: &Path| {
        let o = try_gen_key(&key);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!(
                "{}: exists already; not overwritten",
                what.display()
            )),
            "{}",
            stderr(&o)
        );
    };
    again(&public);
    let public_text = std::fs::read(&public).unwrap();
    std::fs::remove_file(&public).unwrap();
    again(&key);
    assert!(!public.exists());
    assert_eq!(std::fs::read(&key).unwrap(), before);
    std::fs::write(&public, public_text).unwrap();
    // Bad key files: exit status 2 and the file named.
    let missing = keys.path().join("missing");
    for (file, want) in [
        (&public, "not an Ed25519 private key in PKCS#8 DER"),
        (&missing, "No such file or directory"),
    ] {
        let o = s.try_index("t", &["--sign", file.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let want = format!("roost index: --sign {}: {want}", file.display());
        assert!(stderr(&o).contains(&want), "{}", stderr(&o));
    }
    for (file, want) in [
        (&key, "not a public key"),
        (&missing, "No such file or directory"),
    ] {
        let o = s.run(&[], &strs(&pinned(&[file])), &["true"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let want = format!("roost run: --http-key {}: {want}", file.display());
        assert!(stderr(&o).contains(&want), "{}", stderr(&o));
    }
    // Signing an unchanged tree again writes nothing; a changed file re-signs its own
    // directory only; another key re-signs all; no key removes the signatures.
    let sig_times = || {
        let mut v: Vec<_> = ["t", "t/sub", "t/sub/deep"]
            .iter()
            .map(|d| {
                let p = s.root().join(d).join(".roostindex.sig");
                (
                    p.clone(),
                    std::fs::metadata(&p).unwrap().modified().unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    s.index_signed("t", &key);
    let first = sig_times();
    std::thread::sleep(Duration::from_millis(20));
    let out = stdout(&s.index_signed("t", &key));
    assert!(
        out.contains("0 indexes written, 0 signatures written"),
        "{out}"
    );
    assert_eq!(sig_times(), first);
    s.write("t/sub/deep/f", b"changed, and longer\n");
    let out = stdout(&s.index_signed("t", &key));
    assert!(
        out.contains("1 indexes written, 1 signatures written"),
        "{out}"
    );
    let changed: Vec<PathBuf> = first
        .iter()
        .zip(sig_times())
        .filter(|(b, a)| *b != a)
        .map(|(_, (p, _))| p)
        .collect();
    assert_eq!(changed, [s.root().join("t/sub/deep/.roostindex.sig")]);
    let (other, _) = gen_key(keys.path(), "other");
    let out = stdout(&s.index_signed("t", &other));
    assert!(
        out.contains("0 indexes written, 3 signatures written"),
        "{out}"
    );
    let out = stdout(&s.index("t"));
    assert!(
        out.contains("0 indexes written, 3 signatures removed"),
        "{out}"
    );
    assert!(index_times(&s.root().join("t")).len() == 3);
    assert!(!s.root().join("t/sub/.roostindex.sig").exists());
}

/// The revision and expiry in the signature file `sig`.
fn revision_and_expiry(sig: &Path) -> (u64, i64) {
    let text = std::fs::read_to_string(sig).unwrap();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap()
            .parse::<i64>()
            .unwrap()
    };
    (field("revision ") as u64, field("expires "))
}

#[test]
fn signatures_carry_a_growing_revision_and_an_expiry_renewed_at_half_time() {
    let s = Site::new();
    s.write("t/f", b"one\n");
    s.write("t/sub/g", b"two\n");
    let keys = tempfile::tempdir().unwrap();
    let (key, _) = gen_key(keys.path(), "k");
    let key = key.to_str().unwrap();
    let sig = s.root().join("t/.roostindex.sig");
    let before = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    s.index_with("t", &["--sign", key]);
    let (rev, expires) = revision_and_expiry(&sig);
    assert!(
        rev as i64 >= before * 1000,
        "a revision is the signing time in ms: {rev}"
    );
    assert!(
        (expires - before - 30 * 86_400).abs() < 60,
        "30 days: {expires}"
    );
    // A changed directory is signed again at a higher revision, even within the second.
    s.write("t/f", b"changed\n");
    s.index_with("t", &["--sign", key]);
    let (rev2, _) = revision_and_expiry(&sig);
    assert!(rev2 > rev, "{rev2} after {rev}");
    // A signature with at least half of --expires-in left is kept (30 days of 40); one
    // with less (30 days of 90) is made again, at a higher revision, though nothing
    // changed.
    let out = stdout(&s.index_with("t", &["--sign", key, "--expires-in", "40d"]));
    assert!(out.contains("0 signatures written"), "{out}");
    let renewed = stdout(&s.index_with("t", &["--sign", key, "--expires-in", "90d"]));
    assert!(
        renewed.contains("0 indexes written, 2 signatures written"),
        "{renewed}"
    );
    let (rev3, expires3) = revision_and_expiry(&sig);
    assert!(rev3 > rev2, "{rev3} after {rev2}");
    assert!(
        (expires3 - before - 90 * 86_400).abs() < 60,
        "90 days: {expires3}"
    );
    let out = stdout(&s.index_with("t", &["--sign", key, "--expires-in", "90d"]));
    assert!(out.contains("0 signatures written"), "{out}");
    // A shorter --expires-in takes effect at once: 90 days left of 7 is too many.
    let out = stdout(&s.index_with("t", &["--sign", key, "--expires-in", "7d"]));
    assert!(out.contains("2 signatures written"), "{out}");
    let (rev4, expires4) = revision_and_expiry(&sig);
    assert!(
        rev4 > rev3 && (expires4 - before - 7 * 86_400).abs() < 60,
        "{expires4}"
    );
    // A signature of version 1 (roosts before revisions) is made again.
    std::fs::write(
        &sig,
        "#roost-signature 1\npath /\nkey roost-ed25519 00\nsignature 00\n",
    )
    .unwrap();
    let out = stdout(&s.index_with("t", &["--sign", key, "--expires-in", "7d"]));
    assert!(out.contains("1 signatures written"), "{out}");
    assert!(revision_and_expiry(&sig).0 > rev4);
    // A bad --expires-in, or one without --sign, exits with status 2 and one line.
    for (options, want) in [
        (
            vec!["--sign", key, "--expires-in", "0s"],
            "--expires-in 0s: must be at least",
        ),
        (
            vec!["--sign", key, "--expires-in", "2w"],
            "--expires-in 2w: expected",
        ),
        (vec!["--expires-in", "2d"], "--sign"),
    ] {
        let o = s.try_index("t", &options);
        assert_eq!(o.status.code(), Some(2), "{options:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{options:?}: {}", stderr(&o));
    }
}

#[test]
fn an_expired_signature_is_refused_until_the_tree_is_signed_again() {
    let s = Site::new();
    s.write("t/f", b"signed\n");
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = gen_key(keys.path(), "k");
    s.index_with(
        "t",
        &["--sign", key.to_str().unwrap(), "--expires-in", "3s"],
    );
    let web = Web::python(s.root());
    let options = pinned(&[&public]);
    let cat = || s.run(&[], &strs(&options), &["cat", &web.url("/t/f")]);
    let o = cat();
    assert_eq!(stdout(&o), "signed\n", "{}", stderr(&o));
    // Expired: refused, though this cache kept the index (and its signature) when it
    // was valid.
    std::thread::sleep(Duration::from_millis(3100));
    let o = cat();
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(
        err.contains("/t/.roostindex: the signature expired")
            && err.contains("sign the tree again with roost index --sign; directory refused"),
        "{err}"
    );
    s.index_signed("t", &key);
    let o = cat();
    assert_eq!(stdout(&o), "signed\n", "{}", stderr(&o));
}

#[test]
fn an_older_signed_index_served_again_is_refused_as_a_rollback() {
    let s = Site::new();
    s.write("t/f", b"old\n");
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = gen_key(keys.path(), "k");
    s.index_signed("t", &key);
    let saved = |name: &str| std::fs::read(s.root().join("t").join(name)).unwrap();
    let old = [".roostindex", ".roostindex.sig", "f"].map(|n| (n, saved(n)));
    let old_f_time = std::fs::metadata(s.root().join("t/f"))
        .unwrap()
        .modified()
        .unwrap();
    let web = Web::python(s.root());
    let options = pinned(&[&public]);
    let cat = |extra: &[&str]| {
        let options = [strs(&options), extra.to_vec()].concat();
        s.run(&[], &options, &["cat", &web.url("/t/f")])
    };
    assert_eq!(stdout(&cat(&[])), "old\n");
    // The publisher changes the file and signs again (a higher revision); a client
    // sees the new tree.
    s.write("t/f", b"new and longer\n");
    s.index_signed("t", &key);
    let new = [".roostindex", ".roostindex.sig", "f"].map(|n| (n, saved(n)));
    assert_eq!(stdout(&cat(&["--http-ttl", "0"])), "new and longer\n");
    // A proxy serving the older signed index, signature and file (a stale or hostile
    // cache): refused, and the origin's newer one used.
    let forged: Vec<(String, &[u8])> = old
        .iter()
        .map(|(n, b)| (format!("/t/{n}"), b.as_slice()))
        .collect();
    let forged: Vec<(&str, &[u8])> = forged.iter().map(|(n, b)| (n.as_str(), *b)).collect();
    let proxy = Web::caching_proxy(&forged);
    let o = cat(&["--http-ttl", "0", "--http-proxy", &proxy.proxy()]);
    assert_eq!(stdout(&o), "new and longer\n", "{}", stderr(&o));
    assert!(
        stderr(&o).contains("revision") && stderr(&o).contains("fetching it again"),
        "{}",
        stderr(&o)
    );
    // The origin itself serving the older tree again: refused, by this user's runs,
    // even with the kept indexes gone from the cache (the revision seen is kept apart).
    for (n, bytes) in &old {
        std::fs::write(s.root().join("t").join(n), bytes).unwrap();
    }
    std::fs::remove_dir_all(s.cache.path().join("objects")).unwrap();
    let o = cat(&["--http-ttl", "0"]);
    assert!(!o.status.success(), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(
        err.contains("/t/.roostindex: revision ")
            && err.contains("is older than revision")
            && err.contains("directory refused"),
        "{err}"
    );
    // A cache that never saw the newer one takes the older (what it can know).
    let fresh = tempfile::tempdir().unwrap();
    let o = run_with_cache(
        fresh.path(),
        &[],
        &strs(&options),
        &["cat", &web.url("/t/f")],
    )
    .output()
    .unwrap();
    assert_eq!(stdout(&o), "old\n", "{}", stderr(&o));
    // The newer one back: served again.
    for (n, bytes) in &new {
        std::fs::write(s.root().join("t").join(n), bytes).unwrap();
    }
    assert_eq!(stdout(&cat(&["--http-ttl", "0"])), "new and longer\n");
    // A publisher going back on purpose: the older tree put back as it was (times too, as
    // `rsync -a` puts it) and signed again with --resign (its signatures verify, so a plain
    // --sign keeps them) is taken.
    for (n, bytes) in &old {
        std::fs::write(s.root().join("t").join(n), bytes).unwrap();
    }
    std::fs::File::options()
        .write(true)
        .open(s.root().join("t/f"))
        .unwrap()
        .set_modified(old_f_time)
        .unwrap();
    let kept = stdout(&s.index_signed("t", &key));
    assert!(kept.contains("0 signatures written"), "{kept}");
    let err = stderr(&cat(&["--http-ttl", "0"]));
    assert!(err.contains("roost index --sign --resign"), "{err}");
    let resigned = stdout(&s.index_with("t", &["--sign", key.to_str().unwrap(), "--resign"]));
    assert!(resigned.contains("1 signatures written"), "{resigned}");
    assert_eq!(stdout(&cat(&["--http-ttl", "0"])), "old\n");
}

// Large files in blocks: `roost index --block-threshold/--block-size` records block hashes,
// `roost run --http-block-threshold` fetches such files as parallel Range requests.

const MIB: usize = 1 << 20;
/// A large file of 4 blocks of 1 MiB, the last one short.
const BIG: usize = 3 * MIB + 12345;
/// `roost index` options that give files of 2 MiB or more block hashes of 1 MiB.
const INDEX_BLOCKS: [&str; 4] = ["--block-threshold", "2M", "--block-size", "1M"];
/// `roost run` options that fetch those files in blocks.
const FETCH_BLOCKS: [&str; 2] = ["--http-block-threshold", "2M"];
/// The block ranges of [`BIG`], as a Range header names them.
const BIG_RANGES: [&str; 4] = [
    "0-1048575",
    "1048576-2097151",
    "2097152-3145727",
    "3145728-3158072",
];

/// `len` bytes without repeats a block apart (a block moved elsewhere would not match).
fn big_data(len: usize) -> Vec<u8> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

/// The lines of nginx's access log after the first `skip` that ask for `path`.
fn asked_for(web: &Web, skip: usize, path: &str) -> Vec<String> {
    web.log()
        .lines()
        .skip(skip)
        .filter(|l| l.contains(&format!("{path} HTTP/1.1\"")))
        .map(String::from)
        .collect()
}

#[test]
fn a_large_file_is_fetched_in_blocks_by_parallel_range_requests() {
    let mut s = Site::new();
    let data = big_data(BIG);
    let local = s.write("t/big.dat", &data);
    s.write("t/small.txt", b"small\n");
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = gen_key(keys.path(), "k");
    s.index_with(
        "t",
        &[&INDEX_BLOCKS[..], &["--sign", key.to_str().unwrap()]].concat(),
    );
    let index = std::fs::read_to_string(s.root().join("t/.roostindex")).unwrap();
    let hashes: Vec<String> = data.chunks(MIB).map(hex_sha256).collect();
    assert!(index.starts_with("#roost-index 2\n"), "{index}");
    let entry = format!(
        " {} big.dat\nb 1048576 {}\n",
        hex_sha256(&data),
        hashes.join(" ")
    );
    assert!(index.contains(&entry), "{index}");
    assert_eq!(index.matches("\nb ").count(), 1, "{index}");
    let web = Web::nginx(s.root());
    let url = web.url("/t/big.dat");
    let script = format!(
        "cmp {url} {} && echo same && cat {}",
        local.display(),
        web.url("/t/small.txt")
    );
    // With the signed index's key pinned: the block hashes are what the key signed.
    let keys = pinned(&[&public]);
    let options = [&FETCH_BLOCKS[..], &strs(&keys)].concat();
    for mode in MODES {
        s.cache = tempfile::tempdir().unwrap();
        let before = web.log().lines().count();
        let o = s.run(mode, &options, &["sh", "-c", &script]);
        assert_eq!(stdout(&o), "same\nsmall\n", "{mode:?}: {}", stderr(&o));
        assert_eq!(stderr(&o), "", "{mode:?}");
        // One 206 for each block.
        let got = asked_for(&web, before, "/t/big.dat");
        assert_eq!(got.len(), 4, "{mode:?}: {got:?}");
        for range in BIG_RANGES {
            let want = format!("206 - \"bytes={range}\"");
            assert!(got.iter().any(|l| l.ends_with(&want)), "{range}: {got:?}");
        }
    }
    // One stream: the blocks one after another on one kept-alive connection.
    s.cache = tempfile::tempdir().unwrap();
    let before = web.log().lines().count();
    let options = [&FETCH_BLOCKS[..], &["--http-streams", "1"]].concat();
    let o = s.run(&[], &options, &["cmp", &url, local.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let got = asked_for(&web, before, "/t/big.dat");
    assert_eq!(got.len(), 4, "{got:?}");
    let connections: std::collections::HashSet<&str> =
        got.iter().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(connections.len(), 1, "{got:?}");
    // Under the threshold (64M by default): one GET of the whole file, checked whole.
    s.cache = tempfile::tempdir().unwrap();
    let before = web.log().lines().count();
    let o = s.run(&[], &[], &["cmp", &url, local.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let got = asked_for(&web, before, "/t/big.dat");
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].ends_with(" 200 - \"-\""), "{got:?}");
}

/// A program that reads a few bytes of a large file fetches only the blocks they lie in
/// (the file is read in place through a virtual descriptor); one that reads on gets the
/// next blocks fetched ahead; a copy the cache holds whole is read from there. Without
/// notifications (`--no-notify`) the whole file is fetched as before.
#[test]
fn a_program_reading_part_of_a_large_file_fetches_only_its_blocks() {
    let s = Site::new();
    let data = big_data(BIG);
    s.write("t/big.dat", &data);
    s.index_with("t", &INDEX_BLOCKS);
    let web = Web::nginx(s.root());
    let url = web.url("/t/big.dat");
    // 10 bytes at 2.5 MiB (block 2), then 4 bytes across the end of block 0.
    let program = format!(
        "import os\n\
         fd = os.open({url:?}, os.O_RDONLY)\n\
         print(os.pread(fd, 10, {}).hex(), os.pread(fd, 4, {}).hex(), os.fstat(fd).st_size)",
        2 * MIB + MIB / 2,
        MIB - 2
    );
    let want = format!(
        "{} {} {BIG}\n",
        hex(&data[2 * MIB + MIB / 2..2 * MIB + MIB / 2 + 10]),
        hex(&data[MIB - 2..MIB + 2])
    );
    let before = web.log().lines().count();
    let o = s.run(&[], &FETCH_BLOCKS, &["python3", "-c", &program]);
    assert_eq!(stdout(&o), want, "{}", stderr(&o));
    let got = asked_for(&web, before, "/t/big.dat");
    let mut ranges: Vec<&str> = got
        .iter()
        .map(|l| l.rsplit("bytes=").next().unwrap().trim_end_matches('"'))
        .collect();
    ranges.sort();
    assert_eq!(
        ranges,
        [BIG_RANGES[0], BIG_RANGES[1], BIG_RANGES[2]],
        "{got:?}"
    );
    // The blocks fetched are kept in the cache: the same reads again ask for nothing.
    let before = web.log().lines().count();
    let o = s.run(&[], &FETCH_BLOCKS, &["python3", "-c", &program]);
    assert_eq!(stdout(&o), want, "{}", stderr(&o));
    assert_eq!(asked_for(&web, before, "/t/big.dat"), Vec::<String>::new());
    // A kept block that was changed in the cache (bytes the program reads) is not used,
    // but fetched again.
    let copy = std::fs::read_dir(s.cache.path().join("objects"))
        .unwrap()
        .flatten()
        .flat_map(|k| std::fs::read_dir(k.path()).unwrap().flatten())
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "blocks"))
        .expect("a copy filled block by block");
    let f = std::fs::File::options().write(true).open(&copy).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, b"XX", MIB as u64).unwrap();
    let before = web.log().lines().count();
    let o = s.run(&[], &FETCH_BLOCKS, &["python3", "-c", &program]);
    assert_eq!(stdout(&o), want, "{}", stderr(&o));
    let got = asked_for(&web, before, "/t/big.dat");
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].contains(BIG_RANGES[1]), "{got:?}");
    // Read through: only the block never fetched, the same bytes; the file is then
    // whole in the cache, and used whole (also without notifications).
    let before = web.log().lines().count();
    let local = s.root().join("t/big.dat");
    let o = s.run(&[], &FETCH_BLOCKS, &["cmp", &url, local.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let got = asked_for(&web, before, "/t/big.dat");
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].contains(BIG_RANGES[3]), "{got:?}");
    assert!(!copy.exists(), "the copy became the object");
    for mode in MODES {
        let before = web.log().lines().count();
        let o = s.run(mode, &FETCH_BLOCKS, &["python3", "-c", &program]);
        assert_eq!(stdout(&o), want, "{mode:?}: {}", stderr(&o));
        assert_eq!(asked_for(&web, before, "/t/big.dat"), Vec::<String>::new());
    }
    // Without notifications the file is fetched whole (in blocks), and kept: the next
    // run's partial read finds it in the cache and asks the server nothing.
    let mut s = s;
    s.cache = tempfile::tempdir().unwrap();
    let before = web.log().lines().count();
    let o = s.run(
        &["--no-notify"],
        &FETCH_BLOCKS,
        &["python3", "-c", &program],
    );
    assert_eq!(stdout(&o), want, "{}", stderr(&o));
    assert_eq!(asked_for(&web, before, "/t/big.dat").len(), 4);
    let before = web.log().lines().count();
    let o = s.run(&[], &FETCH_BLOCKS, &["python3", "-c", &program]);
    assert_eq!(stdout(&o), want, "{}", stderr(&o));
    assert_eq!(asked_for(&web, before, "/t/big.dat"), Vec::<String>::new());
}

#[test]
fn a_tampered_block_on_a_proxy_is_refused_and_fetched_again_from_the_origin() {
    let mut s = Site::new();
    let data = big_data(BIG);
    let local = s.write("t/big.dat", &data);
    s.index_with("t", &INDEX_BLOCKS);
    // One bit of block 2 changed: the same size, only its hash can tell.
    let mut tampered = data.clone();
    tampered[2 * MIB + 100] ^= 1;
    let web = Web::nginx(s.root());
    let proxy = Web::caching_proxy(&[("/t/big.dat", &tampered)]);
    let proxy_url = proxy.proxy();
    let via = [&FETCH_BLOCKS[..], &["--http-proxy", &proxy_url]].concat();
    let url = web.url("/t/big.dat");
    let block2 = (2 * MIB..3 * MIB, "2097152-3145727");
    let said = format!(
        "roost: http://127.0.0.1:{}/t/big.dat: content does not match its index (block 2, \
         bytes {}: sha {}, the index says {} through proxy {}); fetching it again\n",
        web.port,
        block2.1,
        hex_sha256(&tampered[block2.0.clone()]),
        hex_sha256(&data[block2.0.clone()]),
        proxy.proxy()
    );
    let by_proxy = format!(
        "\"GET http://127.0.0.1:{}/t/big.dat HTTP/1.1\" 206",
        web.port
    );
    for mode in MODES {
        s.cache = tempfile::tempdir().unwrap();
        let before = web.log().lines().count();
        let script = format!("cmp {url} {} && echo same", local.display());
        let o = s.run(mode, &via, &["sh", "-c", &script]);
        assert_eq!(stdout(&o), "same\n", "{mode:?}: {}", stderr(&o));
        assert_eq!(stderr(&o), said, "{mode:?}");
        assert!(proxy.log().contains(&by_proxy), "{}", proxy.log());
        // The origin gave the wrong block (and maybe others asked for after it was found
        // wrong), never block 0, which the proxy gave before any other was asked for.
        let origin = asked_for(&web, before, "/t/big.dat");
        let again = format!("206 - \"bytes={}\"", block2.1);
        assert!(origin.iter().any(|l| l.ends_with(&again)), "{origin:?}");
        assert!(
            !origin.iter().any(|l| l.contains(BIG_RANGES[0])),
            "{origin:?}"
        );
    }
    // The origin's block wrong too: EIO, after the index was fetched again.
    rewrite_keeping_time(&local, &tampered);
    let refused = format!(
        "/t/big.dat: content does not match its index (block 2, bytes {}: sha {}, the index \
         says {}); refused after 3 attempts",
        block2.1,
        hex_sha256(&tampered[block2.0.clone()]),
        hex_sha256(&data[block2.0.clone()]),
    );
    s.each_mode(
        Cache::Emptied,
        &via,
        &["sh", "-c", &format!("cat {url} >/dev/null; echo $?")],
        "1\n",
        &[&refused, "Input/output error"],
    );
}

#[test]
fn a_server_without_range_requests_sends_a_large_file_whole_checked_whole() {
    let mut s = Site::new();
    let data = big_data(BIG);
    let local = s.write("t/big.dat", &data);
    s.index_with("t", &INDEX_BLOCKS);
    // Python's http.server (3.11) answers a Range request with the whole file (200).
    let web = Web::python(s.root());
    let url = web.url("/t/big.dat");
    let said = format!(
        "roost: http://127.0.0.1:{}: a Range request was answered with the whole file; \
         large files are fetched whole from it\n",
        web.port
    );
    let script = format!("cmp {url} {} && echo same", local.display());
    let runs = s.each_mode(
        Cache::Emptied,
        &FETCH_BLOCKS,
        &["sh", "-c", &script],
        "same\n",
        &[],
    );
    for (mode, err) in runs {
        assert_eq!(err, said, "{mode:?}");
    }
    // Changed on the server (same size and time): refused by the whole file's hash.
    let mut tampered = data.clone();
    tampered[BIG - 1] ^= 1;
    rewrite_keeping_time(&local, &tampered);
    let refused = format!(
        "/t/big.dat: content does not match its index (sha {}, the index says {}); refused \
         after 3 attempts",
        hex_sha256(&tampered),
        hex_sha256(&data)
    );
    s.each_mode(
        Cache::Emptied,
        &FETCH_BLOCKS,
        &["sh", "-c", &format!("cat {url} >/dev/null; echo $?")],
        "1\n",
        &[&refused],
    );
}

#[test]
fn roost_index_writes_block_hashes_for_large_files_only_when_needed() {
    let s = Site::new();
    let data = big_data(BIG);
    s.write("t/big.dat", &data);
    s.write("t/small", b"x");
    let at = s.root().join("t/.roostindex");
    let index = || std::fs::read_to_string(&at).unwrap();
    let block_line = || {
        index()
            .lines()
            .find(|l| l.starts_with("b "))
            .map(String::from)
    };
    let hashed = |o: &Output| {
        stdout(o)
            .trim_end()
            .rsplit(", ")
            .next()
            .unwrap()
            .to_string()
    };
    let o = s.index_with("t", &INDEX_BLOCKS);
    assert_eq!(hashed(&o), format!("{} bytes hashed", BIG + 1));
    let hashes: Vec<String> = data.chunks(MIB).map(hex_sha256).collect();
    assert_eq!(
        block_line(),
        Some(format!("b 1048576 {}", hashes.join(" ")))
    );
    // Again: nothing read, nothing written.
    let o = s.index_with("t", &INDEX_BLOCKS);
    assert!(stdout(&o).contains(" 0 indexes written"), "{}", stdout(&o));
    assert_eq!(hashed(&o), "0 bytes hashed");
    // Another block size: the large file is read again.
    let o = s.index_with("t", &["--block-threshold", "2M", "--block-size", "2M"]);
    assert_eq!(hashed(&o), format!("{BIG} bytes hashed"));
    let two: Vec<String> = data.chunks(2 * MIB).map(hex_sha256).collect();
    assert_eq!(block_line(), Some(format!("b 2097152 {}", two.join(" "))));
    // The default threshold (64M): no block hashes, a version 1 index.
    let o = s.index("t");
    assert_eq!(hashed(&o), format!("{BIG} bytes hashed"));
    assert!(index().starts_with("#roost-index 1\n"), "{}", index());
    assert_eq!(block_line(), None);
    // Bad options: exit status 2 and a line naming them.
    for (options, want) in [
        (
            ["--block-size", "3M"],
            "roost index: --block-size: bad block size 3145728 (expected a power of two \
             from 65536 to 1073741824)",
        ),
        (["--block-size", "32K"], "bad block size 32768"),
        (
            ["--block-threshold", "lots"],
            "roost index: --block-threshold lots: expected a number with K, M or G",
        ),
    ] {
        let o = s.try_index("t", &options);
        assert_eq!(o.status.code(), Some(2), "{options:?}");
        assert!(stderr(&o).contains(want), "{options:?}: {}", stderr(&o));
    }
}

#[test]
fn a_malformed_block_line_refuses_the_directory_naming_the_line() {
    let s = Site::new();
    s.write("t/big.dat", &big_data(BIG));
    s.index_with("t", &INDEX_BLOCKS);
    let at = s.root().join("t/.roostindex");
    let text = std::fs::read_to_string(&at).unwrap();
    let line = text.lines().position(|l| l.starts_with("b ")).unwrap() + 1;
    // The last block hash dropped.
    let bad: String = text
        .lines()
        .map(|l| match l.starts_with("b ") {
            true => format!("{}\n", &l[..l.len() - 65]),
            false => format!("{l}\n"),
        })
        .collect();
    std::fs::write(&at, bad).unwrap();
    let web = Web::python(s.root());
    let o = s.run(&[], &FETCH_BLOCKS, &["ls", &web.url("/t")]);
    assert!(!o.status.success());
    let want = format!(
        "roost: http://127.0.0.1:{}/t/.roostindex: malformed index: line {line}: expected 4 \
         block hashes for {BIG} bytes in blocks of 1048576, found 3",
        web.port
    );
    assert!(stderr(&o).contains(&want), "{}", stderr(&o));
    assert!(stderr(&o).contains("Input/output error"), "{}", stderr(&o));
    // Bad options of roost run: exit status 2 and a line naming them.
    for (options, want) in [
        (
            ["--http-block-threshold", "x"],
            "roost run: --http-block-threshold x: expected a number with K, M or G",
        ),
        (
            ["--http-streams", "0"],
            "roost run: --http-streams 0: expected 1 to 16",
        ),
    ] {
        let o = s.run(&[], &options, &["true"]);
        assert_eq!(o.status.code(), Some(2), "{options:?}");
        assert!(stderr(&o).contains(want), "{options:?}: {}", stderr(&o));
    }
}
