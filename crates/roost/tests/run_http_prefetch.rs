//! `roost run` over HTTP when a program opens many files (`docs/httpfs.md`,
//! "Prefetching"): a Python package tree served by nginx on 127.0.0.1 is imported with its
//! modules fetched ahead of Python, on several connections at once, as nginx's access log
//! shows; a tampered module is still refused; `--http-prefetch 0` fetches only what is
//! opened. And indexes fetched again once their TTL is over (`docs/httpfs.md`, "Conditional
//! requests"): asked for with `If-None-Match` / `If-Modified-Since`, answered 304 by nginx,
//! by python's http.server and through a caching proxy while unchanged, 200 once changed;
//! and kept in the cache for later runs, used without a request within their TTL.

use roost_testkit::run::*;
use roost_testkit::web::*;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

/// Modules of the package tree in each subpackage.
const A: usize = 20;
const B: usize = 15;

/// A package `pkg` under `lib/` of `s`: `pkg.a` with [`A`] modules and `pkg.b` with [`B`],
/// imported in order by their packages' `__init__.py`. Each module sleeps `sleep` seconds
/// (Python is slower than the fetches: prefetching can get ahead of it) and then notes
/// that it is done, with the time, in `pkg.DONE`. `pkg/b/unused.py` is imported by nothing.
fn package_tree(s: &Site, sleep: f64) {
    s.write("lib/pkg/__init__.py", b"DONE = []\nfrom . import a, b\n");
    for (sub, count) in [("a", A), ("b", B)] {
        let imports: String = (0..count)
            .map(|i| format!("from . import m{i:02}\n"))
            .collect();
        s.write(&format!("lib/pkg/{sub}/__init__.py"), imports.as_bytes());
        for i in 0..count {
            let module = format!(
                "import time\nimport pkg\n\nV = {i} * {}\ntime.sleep({sleep})\n\
                 pkg.DONE.append((__name__, time.time()))\n",
                if sub == "a" { 1 } else { 100 }
            );
            s.write(&format!("lib/pkg/{sub}/m{i:02}.py"), module.as_bytes());
        }
    }
    s.write(
        "lib/pkg/b/unused.py",
        b"raise SystemExit('never imported')\n",
    );
}

/// The program importing `pkg` from `root`: prints the modules in the order they were
/// imported and the sum of their values (stdout), and each module's time (stderr, `TIME
/// NAME SECONDS`).
fn importer(root: &str) -> String {
    format!(
        "import sys\nsys.path.insert(0, {root:?})\nimport pkg\n\
         print(' '.join(n for n, _ in pkg.DONE))\n\
         print(sum(sys.modules[n].V for n, _ in pkg.DONE))\n\
         for n, t in pkg.DONE:\n    print('TIME', n, t, file=sys.stderr)\n"
    )
}

/// The module file of module `name` (`pkg.a.m03`) under `/lib`.
fn module_path(name: &str) -> String {
    format!("/lib/{}.py", name.replace('.', "/"))
}

/// One request of nginx's timed log.
#[derive(Debug)]
struct Request {
    connection: u64,
    start: f64,
    end: f64,
    path: String,
    status: u16,
}

/// The requests of nginx's timed log (`CONNECTION END DURATION "METHOD PATH HTTP/1.1"
/// STATUS`).
fn requests(log: &str) -> Vec<Request> {
    log.lines()
        .map(|l| {
            let (head, rest) = l.split_once(" \"").unwrap();
            let (request, status) = rest.rsplit_once("\" ").unwrap();
            let f: Vec<&str> = head.split(' ').collect();
            let (end, took): (f64, f64) = (f[1].parse().unwrap(), f[2].parse().unwrap());
            Request {
                connection: f[0].parse().unwrap(),
                start: end - took,
                end,
                path: request.split(' ').nth(1).unwrap().to_string(),
                status: status.trim().parse().unwrap(),
            }
        })
        .collect()
}

/// Each module's time (`TIME NAME SECONDS` lines), in import order.
fn times(stderr: &str) -> Vec<(String, f64)> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("TIME "))
        .map(|l| {
            let (name, t) = l.split_once(' ').unwrap();
            (name.to_string(), t.parse().unwrap())
        })
        .collect()
}

/// nginx serving `root`, each request delayed as needed to keep to 200 a second (so that
/// requests made at once are seen at once in its log: on loopback, a small file takes
/// less than the log's millisecond).
fn slow_nginx(root: &Path) -> Web {
    Web::nginx_with(|_| {
        format!(
            "root {};\n    location / {{ limit_req zone=slow burst=1000; }}",
            root.display()
        )
    })
}

/// The native run of `importer` on the local tree of `s`: its stdout.
fn native(s: &Site) -> String {
    let program = importer(&s.root().join("lib").display().to_string());
    let o = Command::new("python3")
        .args(["-B", "-c", &program])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
}

#[test]
fn python_imports_a_package_tree_with_its_modules_prefetched_in_parallel() {
    let mut s = Site::new();
    package_tree(&s, 0.03);
    s.index("lib");
    let want = native(&s);
    assert!(want.starts_with("pkg.a.m00 pkg.a.m01 "), "{want}");
    let web = slow_nginx(s.root());
    let mount = format!("/py={}", web.url("/lib"));
    for mode in MODES {
        s.cache = tempfile::tempdir().unwrap();
        let skip = web.timed_log().lines().count();
        let o = s.run(
            mode,
            &["--mount", &mount],
            &["python3", "-B", "-c", &importer("/py")],
        );
        let err = stderr(&o);
        assert_eq!(stdout(&o), want, "{mode:?}: {err}");
        let done = times(&err);
        assert_eq!(done.len(), A + B, "{mode:?}: {err}");
        let log = web.timed_log();
        let all = requests(&log.lines().skip(skip).collect::<Vec<_>>().join("\n"));
        let asked =
            |path: &str| -> Vec<&Request> { all.iter().filter(|r| r.path == path).collect() };
        // Each module fetched once, and the unused one too (it is in a directory whose
        // files were opened): prefetching.
        let mut modules = Vec::new();
        for (name, _) in &done {
            let got = asked(&module_path(name));
            assert_eq!(got.len(), 1, "{mode:?}: {name}: {log}");
            assert_eq!(got[0].status, 200, "{mode:?}: {name}: {log}");
            modules.push(got[0]);
        }
        assert_eq!(asked("/lib/pkg/b/unused.py").len(), 1, "{mode:?}: {log}");
        // Python opens a module's file only once the module before it is done: most were
        // asked for before that (all but the first of each directory could be).
        let early = (1..done.len())
            .filter(|&k| modules[k].start < done[k - 1].1)
            .count();
        assert!(
            early >= (A + B) * 2 / 3,
            "{mode:?}: only {early} of {} modules asked for before Python could open them\n\
             {log}\n{done:?}",
            A + B
        );
        // On several connections, with requests on different connections under way at the
        // same time.
        let connections: std::collections::BTreeSet<u64> =
            modules.iter().map(|r| r.connection).collect();
        assert!(connections.len() > 1, "{mode:?}: {log}");
        let overlapping = modules
            .iter()
            .enumerate()
            .flat_map(|(i, x)| modules[i + 1..].iter().map(move |y| (x, y)))
            .filter(|(x, y)| x.connection != y.connection && x.start < y.end && y.start < x.end)
            .count();
        assert!(overlapping > 0, "{mode:?}: no two requests at once\n{log}");
        // No request for what the indexes say is not there (Python's __pycache__).
        assert!(!log.contains("__pycache__"), "{mode:?}: {log}");
    }
}

#[test]
fn without_prefetching_only_the_files_opened_are_fetched() {
    let s = Site::new();
    package_tree(&s, 0.0);
    s.index("lib");
    let want = native(&s);
    let web = Web::nginx(s.root());
    let mount = format!("/py={}", web.url("/lib"));
    let o = s.run(
        &[],
        &["--mount", &mount, "--http-prefetch", "0"],
        &["python3", "-B", "-c", &importer("/py")],
    );
    assert_eq!(stdout(&o), want, "{}", stderr(&o));
    let mut fetched: Vec<String> = requests(&web.timed_log())
        .into_iter()
        .filter(|r| r.status == 200 && !r.path.ends_with("/.roostindex"))
        .map(|r| r.path)
        .collect();
    fetched.sort();
    let mut opened: Vec<String> = times(&stderr(&o))
        .iter()
        .map(|(name, _)| module_path(name))
        .chain(
            ["pkg", "pkg/a", "pkg/b"]
                .iter()
                .map(|p| format!("/lib/{p}/__init__.py")),
        )
        .collect();
    opened.sort();
    assert_eq!(fetched, opened, "{}", web.timed_log());
}

#[test]
fn a_tampered_module_that_was_prefetched_is_still_refused_with_eio() {
    let mut s = Site::new();
    s.write("lib/tam/__init__.py", b"");
    for i in 0..8 {
        s.write(&format!("lib/tam/k{i}.py"), format!("K = {i}\n").as_bytes());
    }
    s.index("lib");
    // Same size and time, other content: only the hash can tell.
    rewrite_keeping_time(&s.root().join("lib/tam/k5.py"), b"K = 9\n");
    let web = Web::nginx(s.root());
    let mount = format!("/py={}", web.url("/lib"));
    // The package's open queues its modules; the program gives them time to arrive.
    let program = "import sys, time\nsys.path.insert(0, '/py')\nimport tam\ntime.sleep(1)\n\
                   for i in (0, 1, 2, 3, 4, 6, 7):\n    __import__(f'tam.k{i}')\n\
                   try:\n    import tam.k5\nexcept OSError as e:\n    print('k5', e.strerror)\n\
                   print(sum(sys.modules[f'tam.k{i}'].K for i in (0, 1, 2, 3, 4, 6, 7)))\n";
    let runs = s.each_mode(
        Cache::Emptied,
        &["--mount", &mount, "--summary"],
        &["python3", "-B", "-c", program],
        "k5 Input/output error\n23\n",
        &[
            "/lib/tam/k5.py: content does not match its index",
            "refused after 3 attempts",
            "7 files prefetched (1 dropped)",
        ],
    );
    for (mode, err) in runs {
        // The prefetch's copy was dropped without a word: the line is the open's, once.
        let said = err.matches("content does not match").count();
        assert_eq!(said, 1, "{mode:?}: {err}");
    }
    // In each run, one GET by the prefetch, then three by the open.
    let asked = requests(&web.timed_log())
        .iter()
        .filter(|r| r.path == "/lib/tam/k5.py")
        .count();
    assert_eq!(asked, 2 * 4, "{}", web.timed_log());
}

/// The statuses of the GETs of `path` in an access log (nginx's or python's: `"GET PATH
/// HTTP/1.1" STATUS`), in order.
fn statuses(log: &str, path: &str) -> Vec<String> {
    let asked = format!("\"GET {path} HTTP/1.1\" ");
    log.lines()
        .filter_map(|l| l.split_once(&asked))
        .map(|(_, rest)| rest.split(' ').next().unwrap().to_string())
        .collect()
}

/// Sets the modification time of every index under `root` a minute back: an index
/// written just before it is served keeps no validators (see `client/conditional.rs`).
fn age_indexes(root: &Path) {
    let then = SystemTime::now() - Duration::from_secs(60);
    let mut dirs = vec![root.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                dirs.push(e.path());
            } else if e.file_name() == ".roostindex" {
                let f = std::fs::File::options().write(true).open(e.path()).unwrap();
                f.set_modified(then).unwrap();
            }
        }
    }
}

/// `cat` of `t/f` three times 0.8 s apart under `--http-ttl 0.5` (and `options`), the tree
/// changed (`f` rewritten, `roost index` run) before the third if `change`: the output.
fn cat_thrice(s: &Site, web: &Web, options: &[&str], change: bool) -> String {
    s.write("t/f", b"old content\n");
    s.index("t");
    age_indexes(&s.root().join("t"));
    let rewrite = format!(
        "echo new > {0}/t/f && {1} index {0}/t >/dev/null",
        s.root().display(),
        env!("CARGO_BIN_EXE_roost")
    );
    let script = format!(
        "cat {0}/f && sleep 0.8 && cat {0}/f && {1} sleep 0.8 && cat {0}/f",
        web.url("/t"),
        if change {
            format!("{rewrite} &&")
        } else {
            String::new()
        }
    );
    let options = [&["--http-ttl", "0.5"], options].concat();
    let o = s.run(&[], &options, &["sh", "-c", &script]);
    assert!(o.status.success(), "{}", stderr(&o));
    stdout(&o)
}

#[test]
fn indexes_are_asked_for_again_conditionally_once_their_ttl_is_over() {
    let mut s = Site::new();
    s.write("t/sub/g", b"below\n");
    for (web, what) in [
        (Web::nginx(s.root()), "nginx"),
        (Web::python(s.root()), "python's http.server"),
    ] {
        // Unchanged: the first answer whole, then 304s; the same content throughout.
        s.cache = tempfile::tempdir().unwrap();
        let skip = web.log().len();
        let out = cat_thrice(&s, &web, &[], false);
        assert_eq!(out, "old content\n".repeat(3), "{what}");
        let log = web.log()[skip..].to_string();
        let got = statuses(&log, "/t/.roostindex");
        assert_eq!(got, ["200", "304", "304"], "{what}: {log}");
        // Changed before the third: 200, with the new index and the new content. From an
        // empty cache again (the index kept by the runs above is current within the TTL).
        s.cache = tempfile::tempdir().unwrap();
        let skip = web.log().len();
        let out = cat_thrice(&s, &web, &[], true);
        assert_eq!(out, "old content\nold content\nnew\n", "{what}");
        let log = web.log()[skip..].to_string();
        let got = statuses(&log, "/t/.roostindex");
        assert_eq!(got, ["200", "304", "200"], "{what}: {log}");
    }
    // Through a caching proxy (nginx's proxy_cache before python's server): the proxy
    // answers 304 from its copy, and the server sees the first request only.
    let (web, proxy) = (Web::python(s.root()), Web::caching_proxy(&[]));
    s.cache = tempfile::tempdir().unwrap();
    let out = cat_thrice(&s, &web, &["--http-proxy", &proxy.proxy()], false);
    assert_eq!(out, "old content\n".repeat(3));
    let url = format!("http://127.0.0.1:{}/t/.roostindex", web.port);
    assert_eq!(
        statuses(&proxy.log(), &url),
        ["200", "304", "304"],
        "{}",
        proxy.log()
    );
    assert_eq!(
        statuses(&web.log(), "/t/.roostindex"),
        ["200"],
        "{}",
        web.log()
    );
}

/// Makes every index kept in the cache `cache` (`objects/KEY/note`) ten minutes older.
fn age_notes(cache: &Path) {
    let then = SystemTime::now() - Duration::from_secs(600);
    let mut aged = 0;
    for key in std::fs::read_dir(cache.join("objects")).unwrap().flatten() {
        if let Ok(f) = std::fs::File::options()
            .write(true)
            .open(key.path().join("note"))
        {
            f.set_modified(then).unwrap();
            aged += 1;
        }
    }
    assert!(aged > 0, "no index kept in {}", cache.display());
}

/// Removes the copies of files from the cache `cache`, keeping the kept indexes.
fn drop_copies(cache: &Path) {
    for key in std::fs::read_dir(cache.join("objects")).unwrap().flatten() {
        for e in std::fs::read_dir(key.path()).unwrap().flatten() {
            if e.file_name() != "note" {
                std::fs::remove_file(e.path()).unwrap();
            }
        }
    }
}

/// The statuses of the GETs of `/t/.roostindex` and `/t/sub/.roostindex` in `web`'s log
/// after its first `skip` bytes.
fn index_statuses(web: &Web, skip: usize) -> Vec<String> {
    let log = web.log()[skip..].to_string();
    let mut got = statuses(&log, "/t/.roostindex");
    got.extend(statuses(&log, "/t/sub/.roostindex"));
    got
}

#[test]
fn a_later_run_takes_indexes_from_the_cache_within_their_ttl() {
    let s = Site::new();
    s.write("t/f", b"first\n");
    s.write("t/sub/g", b"below\n");
    s.index("t");
    age_indexes(&s.root().join("t"));
    let web = Web::nginx(s.root());
    let survey = format!("ls -lR {0} && cat {0}/f {0}/sub/g", web.url("/t"));
    let run = |options: &[&str]| {
        let options = [options, &["--summary"]].concat();
        let o = s.run(&[], &options, &["sh", "-c", &survey]);
        assert!(o.status.success(), "{}", stderr(&o));
        (stdout(&o), stderr(&o))
    };
    // The first run fetches both indexes; the next, within the TTL (the default, 300 s),
    // asks for none and shows the same.
    let (first, _) = run(&[]);
    assert!(first.ends_with("first\nbelow\n"), "{first}");
    assert_eq!(index_statuses(&web, 0), ["200", "200"], "{}", web.log());
    let skip = web.log().len();
    let (second, err) = run(&[]);
    assert_eq!(second, first);
    assert_eq!(index_statuses(&web, skip), [""; 0], "{}", web.log());
    assert!(err.contains(" 2 indexes from the cache"), "{err}");
    // Past the TTL (the kept indexes made ten minutes older), a kept index is asked for
    // conditionally: 304, no body.
    age_notes(s.cache.path());
    let skip = web.log().len();
    let (third, err) = run(&[]);
    assert_eq!(third, first);
    assert_eq!(index_statuses(&web, skip), ["304", "304"], "{}", web.log());
    assert!(err.contains(" 2 indexes unchanged (304)"), "{err}");
    // A 304 makes the kept index current again: the next run asks for nothing.
    let skip = web.log().len();
    run(&[]);
    assert_eq!(index_statuses(&web, skip), [""; 0], "{}", web.log());
    // The tree changed: within the TTL a run still sees the tree as the kept index has
    // it (with the copy of the old content). Without that copy, the file fetched does
    // not match the kept index, which is dropped and fetched again (200): the new
    // content is shown, and the run after that takes the new index from the cache.
    s.write("t/f", b"second!\n");
    s.index("t");
    let skip = web.log().len();
    let (within, _) = run(&[]);
    assert_eq!(within, first);
    assert_eq!(index_statuses(&web, skip), [""; 0], "{}", web.log());
    drop_copies(s.cache.path());
    let skip = web.log().len();
    let (changed, _) = run(&[]);
    assert!(changed.ends_with("second!\nbelow\n"), "{changed}");
    assert_eq!(index_statuses(&web, skip), ["200"], "{}", web.log());
    let skip = web.log().len();
    let (after, _) = run(&[]);
    assert!(after.ends_with("second!\nbelow\n"), "{after}");
    assert_eq!(index_statuses(&web, skip), [""; 0], "{}", web.log());
}

/// With the origin down, a warm cache within its TTL serves the whole mapped tree: the
/// mount's root, listings, files, and Python imports from it rather than from elsewhere.
/// (The server's root has no index; that it has none is remembered for the TTL too.) The
/// mount names the server colon-free (`/http/127.0.0.1+PORT`).
#[test]
fn a_warm_cache_serves_the_mapped_tree_while_the_origin_is_down() {
    let s = Site::new();
    s.write("sw/lib/roost_offline_mod.py", b"ANSWER = 42\n");
    s.write("sw/data/f", b"kept\n");
    s.index("sw");
    age_indexes(&s.root().join("sw"));
    let web = Web::nginx(s.root());
    let mount = format!("/sw=/http/127.0.0.1+{}/sw", web.port);
    let survey = "ls /sw /sw/lib && stat -c %F /sw && cat /sw/data/f && python3 -B -c \
                  'import roost_offline_mod as m; print(m.ANSWER, m.__file__)'";
    let run = || {
        s.command(&[], &["--mount", &mount], &["sh", "-c", survey])
            .env("PYTHONPATH", "/sw/lib")
            .output()
            .unwrap()
    };
    let warm = run();
    assert!(warm.status.success(), "{}", stderr(&warm));
    assert!(
        stdout(&warm).ends_with("directory\nkept\n42 /sw/lib/roost_offline_mod.py\n"),
        "{}",
        stdout(&warm)
    );
    let port = web.port;
    drop(web);
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    let offline = run();
    assert_eq!(stdout(&offline), stdout(&warm), "{}", stderr(&offline));
    assert!(offline.status.success(), "{}", stderr(&offline));
}

#[test]
fn a_bad_prefetch_size_is_refused_at_start() {
    for option in ["--http-prefetch", "--http-prefetch-max"] {
        let o = roost()
            .args(["run", option, "16Q", "--", "true"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{option}");
        assert_eq!(
            stderr(&o),
            format!("roost run: {option} 16Q: expected a number with K, M or G\n")
        );
    }
}
