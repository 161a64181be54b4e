//! Group operations through trees of relaying `roost serve` processes: every shape gives
//! the flat client's results; dead and stopped relays fail only their subtree, within the
//! wave timeout; leaves apply the user's ACLs, never the relay's.

use roost_group::aggregate::{DataAggr, StatusAggr};
use roost_group::api::{
    gopen_members, FileOp, Group, GroupData, GroupError, GroupOptions, Outcome,
};
use roost_group::lines::{LineSpec, Pattern};
use roost_group::message::Whence;
use roost_testkit::group::{address_options, Cluster};
use roost_wire::ErrorCode;
use std::time::{Duration, Instant};

/// Files with a line common to all, one shared by every third member, and one of their own.
fn content(i: usize) -> Vec<u8> {
    format!("all: same\nthird: {}\nown: {i}\nall: same again\n", i % 3).into_bytes()
}

/// The results of a fixed script of operations, with the depth of the tree left out.
fn script(g: &mut Group) -> Vec<Outcome> {
    let mut outs = Vec::new();
    let mut keep = |mut o: Outcome| {
        o.depth = 0;
        outs.push(o);
    };
    keep(g.read(7).unwrap());
    keep(g.lseek(0, Whence::End).unwrap());
    g.lseek(0, Whence::Set).unwrap();
    g.gbindaggr(
        FileOp::Read,
        Some(StatusAggr::Average),
        Some(DataAggr::Lines(LineSpec {
            pattern: Pattern::regex("^(all|third)").unwrap(),
            numbers: true,
            strip_syslog: false,
            complete_lines: false,
        })),
    );
    keep(g.read(4096).unwrap());
    keep(g.pread(4096, 0).unwrap());
    g.gbindaggr(FileOp::Pread, Some(StatusAggr::Min), None);
    keep(g.pread(4096, 0).unwrap());
    let mut statuses = g.fstat().unwrap();
    // Stat lines carry access times that reading changes; compare sizes only.
    statuses.data = GroupData::PerMember(
        Group::stats(&statuses)
            .into_iter()
            .map(|s| s.map(|s| s.size.to_string().into_bytes()))
            .collect(),
    );
    keep(statuses);
    outs
}

fn run(c: &Cluster, options: &GroupOptions) -> (Vec<Outcome>, u32) {
    let mut g = gopen_members(c.members("/data"), libc::O_RDONLY, 0, options).unwrap();
    let depth = g.read(0).unwrap().depth;
    let outs = script(&mut g);
    g.close().unwrap();
    (outs, depth)
}

#[test]
fn every_tree_shape_gives_the_flat_clients_results() {
    let c = Cluster::start(8, "rwl");
    c.write_files("/data", content);
    let (flat, flat_depth) = run(&c, &c.flat());
    assert_eq!(flat_depth, 1);
    let GroupData::Lines(classes) = &flat[2].data else {
        panic!("{:?}", flat[2].data)
    };
    let same = classes.iter().find(|l| l.text == b"all: same").unwrap();
    assert_eq!(same.members, (0..8).collect::<Vec<_>>());
    // (fanout, depth): the root holds a member too, so 7 other servers remain; at fanout 2
    // they split into runs of 4 and 3, the run of 4 into a leader with runs of 2 and 1.
    for (fanout, depth) in [(2, 4), (4, 3), (8, 2), (32, 2)] {
        let (tree, d) = run(&c, &c.tree(0, fanout));
        assert_eq!(d, depth, "fanout {fanout}");
        assert_eq!(tree, flat, "fanout {fanout}");
    }
}

#[test]
fn deeper_trees_from_a_root_without_members() {
    // A root relay that holds no member relays everything: fanout 2 over 6 servers is
    // root -> 2 runs of 3 -> each run's leader -> its 2 others.
    let c = Cluster::start(7, "rwl");
    c.write_files("/data", content);
    let members: Vec<_> = c.members("/data").into_iter().skip(1).collect();
    let open = |o: &GroupOptions| gopen_members(members.clone(), libc::O_RDONLY, 0, o).unwrap();
    let flat = open(&c.flat()).read(4096).unwrap();
    let mut g = open(&c.tree(0, 2));
    let tree = g.read(4096).unwrap();
    assert_eq!(tree.depth, 3);
    assert_eq!((tree.status, &tree.data), (flat.status, &flat.data));
    let mut g1 = open(&c.tree(0, 1));
    // Fanout 1 is a chain through all seven servers.
    assert_eq!(g1.read(4096).unwrap().depth, 7);
}

#[test]
fn a_killed_relay_fails_only_its_subtree() {
    let mut c = Cluster::start(7, "rwl");
    c.write_files("/data", content);
    // Root 0 with fanout 2: runs {1,2,3} led by 1 and {4,5,6} led by 4.
    let mut g = gopen_members(c.members("/data"), libc::O_RDONLY, 0, &c.tree(0, 2)).unwrap();
    assert!(g.read(5).is_ok());
    drop(c.servers.remove(4)); // relay for nodes 5..7 (indices 4, 5, 6)
    let GroupError::Group { failed, outcome } = g.read(5).err().unwrap() else {
        panic!()
    };
    let names: Vec<_> = failed.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["node5", "node6", "node7"]);
    assert!(failed
        .iter()
        .all(|(_, code)| *code == ErrorCode::Disconnected));
    let outcome = outcome.unwrap();
    assert_eq!(outcome.silent, vec![4, 5, 6]);
    assert_eq!(outcome.status, Some(5 * 4));
    let statuses = g.gstatus().unwrap();
    assert_eq!(&statuses[..4], &[Ok(5), Ok(5), Ok(5), Ok(5)]);
    assert!(statuses[4..].iter().all(|s| *s == Err(libc::ECONNRESET)));
}

/// Waits until every thread of `pid` is stopped: SIGSTOP is delivered asynchronously, and
/// a thread still running could answer a request sent just after `kill` returned.
fn wait_until_stopped(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let all_stopped = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .flatten()
            .all(|t| {
                let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
                // The state follows the command name, which is in parentheses.
                let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
                state.is_some_and(|s| s.starts_with('T') || s.starts_with('t'))
            });
        if all_stopped {
            return;
        }
        assert!(Instant::now() < deadline, "server {pid} did not stop");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_stopped_server_is_bounded_by_the_wave_timeout() {
    let c = Cluster::start(4, "rwl");
    c.write_files("/data", content);
    let mut options = c.tree(0, 2);
    options.timeout = Duration::from_secs(2);
    let flags = libc::O_RDONLY | roost_group::api::O_BESTEFFORT;
    let mut g = gopen_members(c.members("/data"), flags, 0, &options).unwrap();
    let pid = c.servers[3].pid();
    unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
    wait_until_stopped(pid);
    let started = Instant::now();
    let out = g.read(5);
    let elapsed = started.elapsed();
    unsafe { libc::kill(pid as i32, libc::SIGCONT) };
    let out = out.unwrap();
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    assert_eq!(out.failed, vec![3]);
    assert_eq!(out.silent, vec![3]);
    assert_eq!(out.status, Some(15));
    let statuses = g.gstatus().unwrap();
    assert_eq!(statuses[3], Err(libc::ETIMEDOUT));
}

#[test]
fn leaves_apply_the_users_acls_through_relays() {
    // alice may read on servers 0 and 1 but only list on server 2.
    let c = Cluster::start_with(3, |i| if i == 2 { "l".into() } else { "rl".into() });
    c.write_files("/data", content);
    let flags = libc::O_RDONLY | roost_group::api::O_BESTEFFORT;
    let mut g = gopen_members(c.members("/data"), flags, 0, &c.tree(0, 32)).unwrap();
    assert_eq!(g.gfiles(), ["node1", "node2"]);
    let strict = gopen_members(c.members("/data"), libc::O_RDONLY, 0, &c.tree(0, 32));
    let Err(GroupError::Group { failed, .. }) = strict else {
        panic!()
    };
    assert_eq!(
        failed,
        vec![("node3".to_string(), ErrorCode::NotAuthorized)]
    );
    assert!(g.read(10).is_ok());
}

#[test]
fn a_relay_without_a_delegation_token_relays_nothing() {
    // address:127.0.0.1 may read everywhere, but a client that has no key to delegate gets
    // only the root's own member: the relay would otherwise lend its own identity.
    let c = Cluster::start(3, "rl");
    c.write_files("/data", content);
    let options = GroupOptions {
        connect: address_options(),
        ..c.tree(0, 32)
    };
    let flags = libc::O_RDONLY | roost_group::api::O_BESTEFFORT;
    let g = gopen_members(c.members("/data"), flags, 0, &options).unwrap();
    assert_eq!(g.gfiles(), ["node1"]);
    let strict = gopen_members(c.members("/data"), libc::O_RDONLY, 0, &options);
    let Err(GroupError::Group { failed, .. }) = strict else {
        panic!()
    };
    assert!(failed
        .iter()
        .all(|(_, code)| *code == ErrorCode::NotAuthorized));
    // The same client flat reaches every server under its own identity.
    let flat = GroupOptions {
        connect: address_options(),
        ..c.flat()
    };
    assert!(gopen_members(c.members("/data"), libc::O_RDONLY, 0, &flat).is_ok());
}

#[test]
fn forged_tokens_are_refused() {
    use roost_group::delegation::Token;
    use roost_group::message::{Member, OpenRequest};
    let c = Cluster::start(1, "rl");
    c.write_files("/data", content);
    let mut raw = c.servers[0].connect();
    let token = Token::mint("alice", b"not her secret", Duration::from_secs(60)).unwrap();
    let req = OpenRequest {
        local: c.authority(0),
        fanout: 32,
        timeout_ms: 1000,
        flags: roost_wire::OpenFlags::from_letters(b"r").unwrap(),
        mode: 0,
        token: Some(token),
        members: vec![Member {
            index: 0,
            server: c.authority(0),
            path: "/data".into(),
        }],
        replace: false,
    };
    let payload = req.encode();
    let result = raw.rpc_with(&format!("group_open {}", payload.len()), &payload);
    assert_eq!(result, ErrorCode::NotAuthenticated.as_i64());
    // Malformed messages and unknown groups are refused, and the connection goes on.
    assert_eq!(
        raw.rpc_with("group_open 3", b"xyz"),
        ErrorCode::InvalidRequest.as_i64()
    );
    let op = b"5:fsync 4:zero 4:none 0 ";
    let line = format!("group_op 9 {}", op.len());
    assert_eq!(raw.rpc_with(&line, op), ErrorCode::BadFd.as_i64());
    assert_eq!(raw.rpc("whoami 100"), "address:127.0.0.1".len() as i64);
}

#[test]
fn a_field_aggregation_averages_load_through_the_tree() {
    use roost_group::fields::FieldSpec;
    // The paper's custom aggregation (its Figure 2b), described instead of compiled.
    let c = Cluster::start(5, "rl");
    c.write_files("/loadavg", |i| {
        format!("{}.50 {}.25 0.{i}0 1/120 4242\n", i, 2 * i).into_bytes()
    });
    let spec = FieldSpec::new(r"^(\S+) (\S+) (\S+)").unwrap();
    let mut results = Vec::new();
    for options in [c.flat(), c.tree(0, 2)] {
        let mut g = gopen_members(c.members("/loadavg"), libc::O_RDONLY, 0, &options).unwrap();
        g.gbindaggr(FileOp::Read, None, Some(DataAggr::Fields(spec.clone())));
        let out = g.read(4096).unwrap();
        let GroupData::Fields(stats) = out.data else {
            panic!("{:?}", out.data)
        };
        results.push(stats);
    }
    assert_eq!(results[0], results[1]);
    let load = &results[0];
    assert_eq!(load.len(), 3);
    assert_eq!(load[0].mean(), Some(2.5)); // (0.5 + 1.5 + ... + 4.5) / 5
    assert_eq!(load[1].max(), Some(8.25));
    assert_eq!(load[2].min(), Some(0.0));
    assert_eq!(load[2].count, 5);
}

#[test]
fn a_relay_killed_during_a_stream_of_writes_fails_only_its_subtree() {
    let mut c = Cluster::start(7, "rwl");
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | roost_group::api::O_BESTEFFORT;
    let mut g = gopen_members(c.members("/big"), flags, 0o644, &c.tree(0, 2)).unwrap();
    // Server 4 relays for members 4..6. It dies while 8 MiB writes are streaming through it.
    let victim = c.servers.remove(4);
    let block = vec![b'x'; 8 << 20];
    let writer = std::thread::spawn(move || {
        let mut outcomes = Vec::new();
        for _ in 0..12 {
            outcomes.push(g.write(&block).unwrap());
        }
        outcomes
    });
    std::thread::sleep(Duration::from_millis(150));
    drop(victim);
    let outcomes = writer.join().unwrap();
    let last = outcomes.last().unwrap();
    assert_eq!(last.failed, vec![4, 5, 6]);
    assert_eq!(last.silent, vec![4, 5, 6]);
    assert_eq!(last.status, Some(4 * (8 << 20)));
    // Every write reached every surviving member, whatever the moment of the kill.
    for s in &c.servers[..4] {
        let len = std::fs::metadata(s.root().join("big")).unwrap().len();
        assert_eq!(len, 12 * (8 << 20));
    }
}
