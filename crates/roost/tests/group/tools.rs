//! `roost pgrep` and `roost pcp` against real servers, flat and through relay trees; with
//! `--catalog`, members on servers the catalog shows down skipped at once.

use roost_testkit::group::Cluster;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn roost(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_roost"))
        .args(args)
        .env_remove("ROOST_HMAC_KEY")
        .output()
        .expect("run roost")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn services(i: usize) -> Vec<u8> {
    let mut text = String::from("domain 53/udp\nhttp 80/tcp\n");
    if i % 3 == 0 {
        text.push_str("ntp 123/udp\n");
    }
    text.push_str(&format!("host{i} 9{i}/tcp\n"));
    text.into_bytes()
}

#[test]
fn pgrep_prints_each_distinct_line_once_with_its_member_set() {
    let c = Cluster::start(7, "rl");
    c.write_files("/services", services);
    let dir = c.link_group("/services");
    let key = c.key_arg();
    let dir = dir.to_str().unwrap();
    let out = roost(&["pgrep", "--key", &key, "-F", "udp", dir]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        stdout(&out),
        "node[1-7]: domain 53/udp\nnode[1-7/3]: ntp 123/udp\n"
    );
    // Regular expressions and line numbers; the same through trees of fan-out 2 and 4.
    let flat = roost(&["pgrep", "--key", &key, "-n", "^(ntp|host[0-9]) ", dir]);
    assert_eq!(
        stdout(&flat),
        "node2:3: host1 91/tcp\nnode3:3: host2 92/tcp\nnode5:3: host4 94/tcp\n\
         node6:3: host5 95/tcp\nnode[1-7/3]:3: ntp 123/udp\nnode1:4: host0 90/tcp\n\
         node4:4: host3 93/tcp\nnode7:4: host6 96/tcp\n",
        "{flat:?}"
    );
    for fanout in ["2", "4"] {
        let relay = c.authority(0);
        let tree = roost(&[
            "pgrep",
            "--key",
            &key,
            "--relay",
            &relay,
            "--fanout",
            fanout,
            "-n",
            "^(ntp|host[0-9]) ",
            dir,
        ]);
        assert_eq!(stdout(&tree), stdout(&flat), "fanout {fanout}: {tree:?}");
    }
}

#[test]
fn pgrep_over_a_hosts_file_reports_unreadable_members() {
    let c = Cluster::start(3, "rl");
    c.write_files("/services", services);
    std::fs::remove_file(c.servers[1].root().join("services")).unwrap();
    let hosts = c.keys.path().join("hosts");
    let list: String = (0..3).map(|i| format!("{}\n", c.authority(i))).collect();
    std::fs::write(&hosts, format!("# members\n{list}")).unwrap();
    let key = c.key_arg();
    let hosts = hosts.to_str().unwrap();
    let out = roost(&["pgrep", "--key", &key, "--hosts", hosts, "http", "services"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let members = roost_group::hostset::format(&[c.authority(0), c.authority(2)]);
    let expected = format!("{members}: http 80/tcp\n");
    assert_eq!(stdout(&out), expected);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&c.authority(1)) && err.to_lowercase().contains("no such file"),
        "{err}"
    );
    let none = roost(&[
        "pgrep",
        "--key",
        &key,
        "--hosts",
        hosts,
        "nothing",
        "/services",
    ]);
    assert_eq!(stdout(&none), "");
}

#[test]
fn pgrep_without_a_match_exits_1() {
    let c = Cluster::start(2, "rl");
    c.write_files("/services", services);
    let dir = c.link_group("/services");
    let out = roost(&["pgrep", "--key", &c.key_arg(), "zzz", dir.to_str().unwrap()]);
    assert_eq!((out.status.code(), stdout(&out)), (Some(1), String::new()));
    let bad = roost(&["pgrep", "--key", &c.key_arg(), "(", dir.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn pcp_copies_a_file_to_every_member_flat_and_through_a_tree() {
    let c = Cluster::start(5, "rwl");
    let source = c.keys.path().join("payload");
    // Several group writes: 2.5 blocks of 1 MiB.
    let data: Vec<u8> = (0..(5 << 19)).map(|i: u32| (i % 251) as u8).collect();
    std::fs::write(&source, &data).unwrap();
    std::fs::set_permissions(&source, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    let src = source.to_str().unwrap();
    let key = c.key_arg();
    let dir = c.link_group("/copy");
    // An old copy longer than the new one is replaced, not written over.
    std::fs::write(c.servers[3].root().join("copy"), vec![7u8; 3 << 20]).unwrap();
    let out = roost(&["pcp", "--key", &key, src, dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    for s in &c.servers {
        assert_eq!(std::fs::read(s.root().join("copy")).unwrap(), data);
        let mode = std::fs::metadata(s.root().join("copy")).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
            0o640
        );
    }
    let dir = c.link_group("/tree-copy");
    let relay = c.authority(2);
    let out = roost(&[
        "pcp",
        "--key",
        &key,
        "--relay",
        &relay,
        "--fanout",
        "2",
        src,
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    for s in &c.servers {
        assert_eq!(std::fs::read(s.root().join("tree-copy")).unwrap(), data);
    }
    // Nothing but the copies is left in the exports.
    for names in exports(&c) {
        let names: Vec<&str> = names.keys().map(String::as_str).collect();
        assert_eq!(names, ["copy", "tree-copy"]);
    }
}

#[test]
fn pcp_names_the_members_it_could_not_write() {
    let c = Cluster::start_with(3, |i| if i == 1 { "rl".into() } else { "rwl".into() });
    let source = c.keys.path().join("payload");
    std::fs::write(&source, b"config\n").unwrap();
    let dir = c.link_group("/etc-copy");
    let out = roost(&[
        "pcp",
        "--key",
        &c.key_arg(),
        source.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("node2"), "{err}");
    assert_eq!(
        std::fs::read(c.servers[0].root().join("etc-copy")).unwrap(),
        b"config\n"
    );
    assert!(!c.servers[1].root().join("etc-copy").exists());
}

/// Every file directly in each server's export, by name, with its content.
fn exports(c: &Cluster) -> Vec<std::collections::BTreeMap<String, Vec<u8>>> {
    c.servers
        .iter()
        .map(|s| {
            std::fs::read_dir(s.root())
                .unwrap()
                .filter_map(|e| {
                    let e = e.ok()?;
                    let name = e.file_name().to_string_lossy().into_owned();
                    Some((name, std::fs::read(e.path()).ok()?))
                })
                .collect()
        })
        .collect()
}

/// Bytes in all the servers' exports.
fn exported_bytes(c: &Cluster) -> u64 {
    c.servers
        .iter()
        .flat_map(|s| std::fs::read_dir(s.root()).unwrap())
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// A `roost pcp` caught mid-copy, stopped (SIGSTOP), and what the exports held before it.
struct StoppedPcp {
    child: std::process::Child,
    before: Vec<std::collections::BTreeMap<String, Vec<u8>>>,
}

/// Starts `roost pcp` with `options` copying `data` to `target`, and stops it once a MiB
/// has reached the servers, checking that it was caught mid-copy.
fn stop_pcp_midway(c: &Cluster, options: &[&str], data: &[u8], target: &str) -> StoppedPcp {
    let source = c.keys.path().join("large");
    std::fs::write(&source, data).unwrap();
    let before = exports(c);
    let baseline = exported_bytes(c);
    let mut child = Command::new(env!("CARGO_BIN_EXE_roost"))
        .args(["pcp", "--key", &c.key_arg()])
        .args(options)
        .arg(&source)
        .arg(target)
        .env_remove("ROOST_HMAC_KEY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while exported_bytes(c) < baseline + (1 << 20) {
        assert!(Instant::now() < deadline, "pcp wrote nothing in 30 s");
        assert!(child.try_wait().unwrap().is_none(), "pcp ended first");
        std::thread::sleep(Duration::from_millis(1));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGSTOP) };
    let whole = baseline + (data.len() * c.servers.len()) as u64;
    assert!(
        exported_bytes(c) < whole,
        "pcp was not caught mid-copy: make the source larger"
    );
    StoppedPcp { child, before }
}

/// Ends a stopped pcp with SIGTERM; every member must then be what it was or the whole
/// source, and the exports must hold nothing else.
fn interrupt_pcp(c: &Cluster, options: &[&str], data: &[u8], target: &str) {
    let StoppedPcp { mut child, before } = stop_pcp_midway(c, options, data, target);
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
        libc::kill(child.id() as i32, libc::SIGCONT);
    }
    let status = child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGTERM)
    );
    settle(c, &before, data);
}

/// Waits (the servers notice connections end) until [`left_whole`] holds, at most 10 s.
fn settle(c: &Cluster, before: &[std::collections::BTreeMap<String, Vec<u8>>], data: &[u8]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while let Err(why) = left_whole(&exports(c), before, data) {
        assert!(Instant::now() < deadline, "{why}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether every export holds what it held `before`, except that each member (`copy`) may
/// instead be the whole of `data`.
fn left_whole(
    now: &[std::collections::BTreeMap<String, Vec<u8>>],
    before: &[std::collections::BTreeMap<String, Vec<u8>>],
    data: &[u8],
) -> Result<(), String> {
    for (i, (after, was)) in now.iter().zip(before).enumerate() {
        let others = |m: &std::collections::BTreeMap<String, Vec<u8>>| -> Vec<String> {
            m.keys().filter(|n| *n != "copy").cloned().collect()
        };
        if others(after) != others(was) {
            return Err(format!(
                "server {i}: files left behind: {:?}",
                others(after)
            ));
        }
        match (after.get("copy"), was.get("copy")) {
            (None, None) => {}
            (None, Some(_)) => return Err(format!("server {i}: the old copy is gone")),
            (Some(got), _) if got.as_slice() == data => {}
            (Some(got), old) if Some(got) == old => {}
            (Some(got), _) => {
                return Err(format!(
                    "server {i}: a copy of {} bytes is neither the old file nor the new",
                    got.len()
                ))
            }
        }
    }
    Ok(())
}

/// A source of `mib` MiB that no member holds.
fn large_source(mib: usize) -> Vec<u8> {
    (0..mib << 20).map(|i| (i % 253) as u8).collect()
}

#[test]
fn an_interrupted_pcp_leaves_each_member_old_or_whole_flat_and_through_a_tree() {
    let c = Cluster::start(5, "rwl");
    let data = large_source(64);
    // Members 1 and 3 hold an old copy; the others have none.
    for i in [0, 2] {
        std::fs::write(c.servers[i].root().join("copy"), b"old copy\n").unwrap();
    }
    let dir = c.link_group("/copy");
    let dir = dir.to_str().unwrap();
    interrupt_pcp(&c, &[], &data, dir);
    let relay = c.authority(1);
    interrupt_pcp(&c, &["--relay", &relay, "--fanout", "2"], &data, dir);
}

#[test]
fn a_member_that_cannot_take_the_new_copy_keeps_what_it_has() {
    // On node2 alice may only create files (put), never replace one: a file that appears
    // there while pcp copies makes that member's commit fail.
    let c = Cluster::start_with(3, |i| if i == 1 { "pl".into() } else { "rwl".into() });
    let data = large_source(32);
    let dir = c.link_group("/copy");
    let StoppedPcp { child, mut before } = stop_pcp_midway(
        &c,
        &["--relay", &c.authority(0)],
        &data,
        dir.to_str().unwrap(),
    );
    let theirs = b"someone else's copy\n".to_vec();
    std::fs::write(c.servers[1].root().join("copy"), &theirs).unwrap();
    before[1].insert("copy".into(), theirs.clone());
    unsafe { libc::kill(child.id() as i32, libc::SIGCONT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("node2")
            && err.contains("not replace them")
            && err.contains("keep their old files"),
        "{err}"
    );
    settle(&c, &before, &data);
    let now = exports(&c);
    assert_eq!(now[1]["copy"], theirs);
    assert!(now[0]["copy"] == data && now[2]["copy"] == data);
}

/// `roost ptail` with the cluster's key and `options` on group directory `dir`, started
/// with its standard output piped.
fn spawn_ptail(c: &Cluster, options: &[&str], dir: &std::path::Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_roost"))
        .args(["ptail", "--key", &c.key_arg()])
        .args(options)
        .arg(dir)
        .env_remove("ROOST_HMAC_KEY")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn ptail_follows_appended_lines_and_folds_them_across_hosts() {
    use std::io::Write;
    let c = Cluster::start(3, "rl");
    c.write_files("/syslog", |i| {
        format!("Nov 22 07:00:00 node{i} cron[1]: old\n").into_bytes()
    });
    let dir = c.link_group("/syslog");
    let child = spawn_ptail(
        &c,
        &["--strip-syslog", "--interval", "50", "--for", "3"],
        &dir,
    );
    std::thread::sleep(std::time::Duration::from_millis(1000));
    for (i, s) in c.servers.iter().enumerate() {
        let mut log = std::fs::OpenOptions::new()
            .append(true)
            .open(s.root().join("syslog"))
            .unwrap();
        let pid = 100 + i;
        writeln!(
            log,
            "Nov 22 07:01:02 node{i} sshd[{pid}]: Accepted key for alice"
        )
        .unwrap();
        if i == 1 {
            writeln!(log, "Nov 22 07:01:03 node{i} kernel: disk full").unwrap();
        }
    }
    // A line written in two pieces is printed once, whole.
    let append = |text: &str| {
        let path = c.servers[0].root().join("syslog");
        let mut log = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        log.write_all(text.as_bytes()).unwrap();
    };
    append("Nov 22 07:01:04 node0 app[9]: par");
    std::thread::sleep(std::time::Duration::from_millis(400));
    append("tial\n");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        stdout(&out),
        "node[1-3]: Nov 22 07:01:02 sshd: Accepted key for alice\n\
         node2: Nov 22 07:01:03 kernel: disk full\n\
         node1: Nov 22 07:01:04 app: partial\n"
    );
}

/// Each line of a `--json` stream, parsed.
fn json_lines(text: &str) -> Vec<roost_catalog::json::Value> {
    text.lines()
        .map(|l| {
            roost_catalog::json::parse(l.as_bytes())
                .unwrap_or_else(|e| panic!("not JSON ({e:?}): {l}"))
        })
        .collect()
}

#[test]
fn ptail_json_streams_each_distinct_line_as_an_object() {
    let c = Cluster::start(3, "rl");
    c.write_files("/log", |_| b"old\n".to_vec());
    let dir = c.link_group("/log");
    let child = spawn_ptail(&c, &["--json", "--interval", "50ms", "--for", "2s"], &dir);
    std::thread::sleep(Duration::from_millis(700));
    for (i, s) in c.servers.iter().enumerate() {
        let text = if i == 2 {
            "new\nonly \"three\"\n"
        } else {
            "new\n"
        };
        let mut log = std::fs::OpenOptions::new()
            .append(true)
            .open(s.root().join("log"))
            .unwrap();
        std::io::Write::write_all(&mut log, text.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let lines = json_lines(&stdout(&out));
    let fields: Vec<(&str, &str, usize)> = lines
        .iter()
        .map(|v| {
            let members = match v.get("members") {
                Some(roost_catalog::json::Value::Array(m)) => m.len(),
                other => panic!("members: {other:?}"),
            };
            assert_eq!(v.get("line"), Some(&roost_catalog::json::Value::Null));
            let text = v.get("text").and_then(|t| t.as_str()).unwrap();
            (
                v.get("hosts").and_then(|h| h.as_str()).unwrap(),
                text,
                members,
            )
        })
        .collect();
    assert_eq!(
        fields,
        [("node[1-3]", "new", 3), ("node3", "only \"three\"", 1)],
        "{}",
        stdout(&out)
    );
}

#[test]
fn ptop_json_holds_each_refresh_with_what_the_table_shows() {
    let c = Cluster::start(3, "rl");
    for (i, s) in c.servers.iter().enumerate() {
        fake_process(s.root(), 100, "sshd", 0, 10, 1000);
        fake_process(s.root(), 102, "worker", 1000, 50, 5000 * (i as u64 + 1));
    }
    let dir = c.link_group("/");
    let key = c.key_arg();
    let args = ["ptop", "--key", &key, "--json", "--iterations", "2"];
    let out = roost(
        &[
            &args[..],
            &["--interval", "100ms", "--by-user", dir.to_str().unwrap()],
        ]
        .concat(),
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let refreshes = json_lines(&stdout(&out));
    assert_eq!(refreshes.len(), 2, "{}", stdout(&out));
    let int = |v: &roost_catalog::json::Value, k: &str| v.get(k).and_then(|x| x.as_i64());
    for (n, r) in refreshes.iter().enumerate() {
        assert_eq!(int(r, "hosts"), Some(3));
        assert_eq!(int(r, "processes"), Some(6));
        assert_eq!(int(r, "commands"), Some(2));
        let Some(roost_catalog::json::Value::Array(rows)) = r.get("rows") else {
            panic!("rows: {}", r.to_json())
        };
        let worker = rows
            .iter()
            .find(|row| row.get("command").and_then(|c| c.as_str()) == Some("worker"))
            .unwrap_or_else(|| panic!("no worker row: {}", r.to_json()));
        assert_eq!(int(worker, "user"), Some(1000));
        assert_eq!(int(worker, "processes"), Some(3));
        assert_eq!(int(worker, "rss_total_kib"), Some(30000));
        assert_eq!(int(worker, "rss_avg_kib"), Some(10000));
        assert_eq!(int(worker, "rss_max_kib"), Some(15000));
        assert_eq!(
            worker.get("hosts").and_then(|h| h.as_str()),
            Some("node[1-3]")
        );
        // CPU use is growth since the last refresh: none to tell on the first, and the
        // fake processes' CPU time does not move.
        let cpu = worker.get("cpu_percent").and_then(|c| c.as_f64());
        assert_eq!(
            cpu,
            if n == 0 { None } else { Some(0.0) },
            "{}",
            r.to_json()
        );
    }
}

#[test]
fn psync_sends_only_what_differs_to_each_distinct_copy() {
    let c = Cluster::start(6, "rwl");
    // Three contents: current (nodes 1-2), an old version (nodes 3-5), missing (node 6).
    let new: Vec<u8> = (0..200_000u32).map(|i| (i * 7 % 253) as u8).collect();
    let mut old = new.clone();
    old.splice(
        100_000..100_000,
        b"an old line that went away\n".iter().copied(),
    );
    c.write_files(
        "/etc.conf",
        |i| if i < 2 { new.clone() } else { old.clone() },
    );
    std::fs::remove_file(c.servers[5].root().join("etc.conf")).unwrap();
    let old_file = std::fs::File::open(c.servers[2].root().join("etc.conf")).unwrap();
    let source = c.keys.path().join("etc.conf");
    std::fs::write(&source, &new).unwrap();
    let dir = c.link_group("/etc.conf");
    let relay = c.authority(0);
    let out = roost(&[
        "psync",
        "--key",
        &c.key_arg(),
        "--relay",
        &relay,
        "--fanout",
        "2",
        source.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    for s in &c.servers {
        assert_eq!(std::fs::read(s.root().join("etc.conf")).unwrap(), new);
    }
    // A patched member is a new file renamed over the old one, which is left whole (so a
    // full disk or a killed server never leaves a mix); no temporary stays behind.
    let mut kept = Vec::new();
    std::io::Read::read_to_end(&mut &old_file, &mut kept).unwrap();
    assert_eq!(kept, old);
    for names in exports(&c) {
        assert_eq!(names.keys().collect::<Vec<_>>(), ["etc.conf"]);
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("6 members, 2 distinct contents, 2 already current, 1 created"),
        "{err}"
    );
    // The old copies cost a block or two plus copy instructions; the missing one all of it.
    let sent: usize = err
        .split("sent ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(sent < new.len() + 2048 + 4 * 200, "{err}");
    assert!(sent >= new.len(), "{err}");
}

#[test]
fn psync_creates_members_that_have_no_file_as_pcp_does() {
    let c = Cluster::start(3, "rwl");
    let source = c.keys.path().join("app.conf");
    std::fs::write(&source, b"setting = 1\n").unwrap();
    std::fs::set_permissions(&source, std::os::unix::fs::PermissionsExt::from_mode(0o640)).unwrap();
    let dir = c.link_group("/app.conf");
    let run = || {
        let out = roost(&[
            "psync",
            "--key",
            &c.key_arg(),
            "--relay",
            &c.authority(0),
            source.to_str().unwrap(),
            dir.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // No member has the file: none opens for patching, and all are created whole.
    let err = run();
    assert!(
        err.contains("3 members, 0 distinct contents, 0 already current, 3 created"),
        "{err}"
    );
    for s in &c.servers {
        let path = s.root().join("app.conf");
        assert_eq!(std::fs::read(&path).unwrap(), b"setting = 1\n");
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o640);
    }
    let err = run();
    assert!(
        err.contains("3 members, 1 distinct contents, 3 already current, 0 created"),
        "{err}"
    );
}

/// A fake process directory: `stat` and `status` as Linux writes them.
fn fake_process(root: &std::path::Path, pid: u32, command: &str, uid: u32, ticks: u64, rss: u64) {
    let dir = root.join(pid.to_string());
    std::fs::create_dir_all(&dir).unwrap();
    let stat = format!("{pid} ({command}) S 1 {pid} {pid} 0 -1 0 0 0 0 0 {ticks} 0 0 0 20 0 1 0 1");
    std::fs::write(dir.join("stat"), stat).unwrap();
    let status = format!("Name:\t{command}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nVmRSS:\t{rss} kB\n");
    std::fs::write(dir.join("status"), status).unwrap();
}

#[test]
fn ptop_groups_processes_across_hosts_by_command() {
    let c = Cluster::start(3, "rl");
    for (i, s) in c.servers.iter().enumerate() {
        fake_process(s.root(), 100, "sshd", 0, 10, 1000);
        fake_process(s.root(), 101, "sshd", 0, 5, 1000);
        fake_process(s.root(), 102, "worker", 1000, 50, 5000 * (i as u64 + 1));
    }
    std::fs::write(c.servers[0].root().join("notaprocess"), b"x").unwrap();
    let dir = c.link_group("/");
    let key = c.key_arg();
    let dir = dir.to_str().unwrap();
    let out = roost(&[
        "ptop",
        "--key",
        &key,
        "--iterations",
        "1",
        "--sort",
        "mem",
        dir,
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "ptop: 3 hosts, 9 processes, 2 commands", "{text}");
    let words = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
    assert_eq!(
        words(lines[2]),
        [
            "worker",
            "*",
            "3",
            "-",
            "30000K",
            "10000K",
            "15000K",
            "node[1-3]"
        ]
    );
    assert_eq!(
        words(lines[3]),
        [
            "sshd",
            "*",
            "6",
            "-",
            "6000K",
            "1000K",
            "1000K",
            "node[1-3]"
        ]
    );
    let relay = c.authority(0);
    let by_user = roost(&[
        "ptop",
        "--key",
        &key,
        "--by-user",
        "--relay",
        &relay,
        "--fanout",
        "2",
        "--iterations",
        "1",
        "--sort",
        "procs",
        dir,
    ]);
    let text = stdout(&by_user);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(&words(lines[2])[..3], ["sshd", "0", "6"], "{text}");
    assert_eq!(&words(lines[3])[..3], ["worker", "1000", "3"], "{text}");
}

#[test]
fn ptop_reads_a_real_proc_served_by_roost() {
    let keys = tempfile::tempdir().unwrap();
    let mut args =
        roost_testkit::serve::TestServer::with_keys(keys.path(), &[roost_testkit::group::USER]);
    args.extend([
        "--acl".into(),
        format!("hmac:{}=rl", roost_testkit::group::USER),
    ]);
    let mut server = Command::new(env!("CARGO_BIN_EXE_roost"))
        .args(["serve", "/proc", "--listen", "127.0.0.1", "--port", "0"])
        .args(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    let port = roost_server::announced_addr(&first).unwrap().port();
    let hosts = keys.path().join("hosts");
    std::fs::write(&hosts, format!("127.0.0.1:{port}\n")).unwrap();
    let key = format!(
        "{}={}",
        roost_testkit::group::USER,
        keys.path().join("alice.key").display()
    );
    let out = roost(&[
        "ptop",
        "--key",
        &key,
        "--hosts",
        hosts.to_str().unwrap(),
        "--iterations",
        "2",
        "--interval",
        "0.2",
        "--rows",
        "1000",
        "/",
    ]);
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = stdout(&out);
    // The server itself is one of the processes; the second table has CPU figures.
    assert!(text.lines().any(|l| l.starts_with("roost ")), "{text}");
    let second = text.split("ptop: ").nth(2).unwrap();
    let roost_row = second.lines().find(|l| l.starts_with("roost ")).unwrap();
    let cpu = roost_row.split_whitespace().nth(3).unwrap();
    assert!(cpu.parse::<f64>().is_ok(), "{second}");
}

#[test]
fn with_a_catalog_members_on_down_servers_are_skipped_at_once_and_never_relay() {
    let (_catalog, port) = roost_testkit::pool::start_catalog(&["--down-after", "1.5"]);
    let catalog = format!("127.0.0.1:{port}");
    let c = Cluster::reporting(5, "rwl", port);
    c.write_files("/services", services);
    let state = |i: usize| {
        let records = roost_catalog::query("127.0.0.1", port, Duration::from_secs(5)).unwrap();
        let servers = roost_catalog::servers::Servers::new(&records);
        servers.find(&c.authority(i)).map(|s| s.up)
    };
    roost_testkit::pool::wait_for("every server up", Duration::from_secs(10), || {
        (0..5).all(|i| state(i) == Some(true))
    });
    // node4's server hangs: the kernel still takes connections, nothing answers them.
    let hung = 3;
    unsafe { libc::kill(c.servers[hung].pid() as i32, libc::SIGSTOP) };
    roost_testkit::pool::wait_for("the hung server down", Duration::from_secs(10), || {
        state(hung) == Some(false)
    });
    let key = c.key_arg();
    let dir = c.link_group("/services");
    let dir = dir.to_str().unwrap();
    let skipped = format!(
        "roost: node4: {} is down in the catalog (no report for ",
        c.authority(hung)
    );
    // `roost TOOL --key K --timeout SECONDS [--catalog C] REST...`, and how long it took.
    let timed = |tool: &str, timeout: &str, catalog: Option<&str>, rest: &[&str]| {
        let mut args = vec![tool, "--key", &key, "--timeout", timeout];
        args.extend(catalog.map(|c| ["--catalog", c]).iter().flatten());
        args.extend_from_slice(rest);
        let start = Instant::now();
        let out = roost(&args);
        (out, start.elapsed())
    };
    let catalog = Some(catalog.as_str());
    let (out, took) = timed("pgrep", "6", catalog, &["-F", "udp", dir]);
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("pgrep with --catalog: {took:?}\n{err}");
    assert!(
        took < Duration::from_secs(2),
        "skipped at once, not after 6 s: {took:?}"
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "a member left out is an error: {out:?}"
    );
    assert_eq!(
        stdout(&out),
        "node[1-3,5]: domain 53/udp\nnode1: ntp 123/udp\n"
    );
    assert_eq!(
        err.lines().filter(|l| l.starts_with(&skipped)).count(),
        1,
        "{err}"
    );
    assert!(
        err.lines()
            .all(|l| !l.contains("node4") || l.starts_with(&skipped)),
        "{err}"
    );
    // Without the catalog the same search waits for the hung server.
    let (out, took) = timed("pgrep", "3", None, &["-F", "udp", dir]);
    eprintln!("pgrep without --catalog: {took:?}");
    assert!(took >= Duration::from_millis(2500), "{took:?} {out:?}");
    // Through a tree of fan-out 2 from node1, node4 would relay for node5: left out, it
    // relays for no one, and node5 still gets its copy.
    let source = c.keys.path().join("payload");
    std::fs::write(&source, b"new config\n").unwrap();
    let copy = c.link_group("/copy");
    let relay = c.authority(0);
    let (out, took) = timed(
        "pcp",
        "6",
        catalog,
        &[
            "--relay",
            &relay,
            "--fanout",
            "2",
            source.to_str().unwrap(),
            copy.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(err.starts_with(&skipped), "{err}");
    for (i, s) in c.servers.iter().enumerate() {
        let copied = std::fs::read(s.root().join("copy")).ok();
        let want = (i != hung).then(|| b"new config\n".to_vec());
        assert_eq!(copied, want, "server {i}");
    }
    // A root relay the catalog shows down is refused.
    let down_relay = c.authority(hung);
    let (out, took) = timed("pgrep", "6", catalog, &["--relay", &down_relay, "x", dir]);
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is down in the catalog")
            || String::from_utf8_lossy(&out.stderr).contains(": down in the catalog"),
        "{out:?}"
    );
    unsafe { libc::kill(c.servers[hung].pid() as i32, libc::SIGCONT) };
}

fn json_of(out: &Output) -> roost_catalog::json::Value {
    roost_catalog::json::parse(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e:?}): {}", stdout(out)))
}

fn names(v: &roost_catalog::json::Value, key: &str) -> Vec<String> {
    let Some(roost_catalog::json::Value::Array(items)) = v.get(key) else {
        panic!("{key}: not an array in {}", v.to_json());
    };
    let mut names: Vec<String> = items
        .iter()
        .map(|i| i.as_str().expect("a name").to_string())
        .collect();
    names.sort();
    names
}

fn number(v: &roost_catalog::json::Value, key: &str) -> i64 {
    match v.get(key) {
        Some(roost_catalog::json::Value::Int(i)) => *i,
        other => panic!("{key}: not an integer: {other:?} in {}", v.to_json()),
    }
}

#[test]
fn pgrep_json_gives_each_line_with_the_members_whose_file_has_it() {
    let c = Cluster::start(7, "rl");
    c.write_files("/services", services);
    let dir = c.link_group("/services");
    let out = roost(&[
        "pgrep",
        "--key",
        &c.key_arg(),
        "--json",
        "-n",
        "udp|host",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let roost_catalog::json::Value::Array(classes) = json_of(&out) else {
        panic!("not an array: {}", stdout(&out));
    };
    // The same lines, numbers and members as reading each server's file here.
    let mut expected = std::collections::BTreeMap::<(i64, String), Vec<String>>::new();
    for (i, s) in c.servers.iter().enumerate() {
        let text = std::fs::read_to_string(s.root().join("services")).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.contains("udp") || line.contains("host") {
                let key = (n as i64 + 1, line.to_string());
                expected
                    .entry(key)
                    .or_default()
                    .push(format!("node{}", i + 1));
            }
        }
    }
    let mut got = std::collections::BTreeMap::new();
    for class in &classes {
        let text = class
            .get("text")
            .and_then(|t| t.as_str())
            .unwrap()
            .to_string();
        got.insert((number(class, "line"), text), names(class, "members"));
        let hosts = class.get("hosts").and_then(|h| h.as_str()).unwrap();
        let members = names(class, "members");
        assert_eq!(
            hosts,
            roost_group::hostset::format(&members),
            "{}",
            class.to_json()
        );
    }
    for members in expected.values_mut() {
        members.sort();
    }
    assert_eq!(got, expected);
}

#[test]
fn pcp_and_psync_json_summaries_say_what_each_member_got() {
    let c = Cluster::start_with(3, |i| if i == 1 { "rl".into() } else { "rwl".into() });
    let source = c.keys.path().join("payload");
    let data: Vec<u8> = (0..300_000u32).map(|i| (i % 241) as u8).collect();
    std::fs::write(&source, &data).unwrap();
    let dir = c.link_group("/copy");
    let out = roost(&[
        "pcp",
        "--key",
        &c.key_arg(),
        "--json",
        source.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let summary = json_of(&out);
    assert_eq!(number(&summary, "members"), 3);
    assert_eq!(number(&summary, "bytes"), data.len() as i64);
    assert_eq!(number(&summary, "skipped"), 0);
    assert!(summary.get("seconds").and_then(|s| s.as_f64()).is_some());
    // "ok" names exactly the members whose server holds the whole file.
    let holding = || -> Vec<String> {
        (0..3)
            .filter(|&i| std::fs::read(c.servers[i].root().join("copy")).ok() == Some(data.clone()))
            .map(|i| format!("node{}", i + 1))
            .collect()
    };
    assert_eq!(names(&summary, "ok"), holding());
    assert_eq!(names(&summary, "failed"), vec!["node2".to_string()]);

    // psync: one member current, one stale, one refused; the summary counts them.
    let stale: Vec<u8> = data.iter().map(|b| b ^ 1).take(1000).collect();
    std::fs::write(c.servers[2].root().join("copy"), stale).unwrap();
    let out = roost(&[
        "psync",
        "--key",
        &c.key_arg(),
        "--json",
        source.to_str().unwrap(),
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let summary = json_of(&out);
    assert_eq!(number(&summary, "file_bytes"), data.len() as i64);
    assert_eq!(number(&summary, "current"), 1);
    assert!(number(&summary, "sent_bytes") >= data.len() as i64 - 1000);
    assert_eq!(holding(), vec!["node1".to_string(), "node3".to_string()]);
    assert_eq!(names(&summary, "ok"), holding());
    assert_eq!(names(&summary, "failed"), vec!["node2".to_string()]);
    assert_eq!(number(&summary, "members"), 3);
}
