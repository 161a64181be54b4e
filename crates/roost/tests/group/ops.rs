//! Group file operations against real `roost serve` processes: gopen over a group directory,
//! each operation with its default aggregation, bound aggregations, gstatus, partial
//! failure and best effort.

use roost_group::aggregate::{DataAggr, StatusAggr};
use roost_group::api::{
    gopen, gopen_members, FileOp, Group, GroupData, GroupError, E_GROUP, O_BESTEFFORT,
};
use roost_group::message::Whence;
use roost_testkit::group::Cluster;
use roost_wire::ErrorCode;

fn content(i: usize) -> Vec<u8> {
    format!("host {i}\ncommon line\n").into_bytes()
}

#[test]
fn gopen_reads_every_member_with_sum_and_concatenate() {
    let c = Cluster::start(4, "rwl");
    c.write_files("/data", content);
    let dir = c.link_group("/data");
    let mut g = gopen(dir.to_str().unwrap(), libc::O_RDONLY, 0, &c.flat()).unwrap();
    assert_eq!(g.gsize(), 4);
    assert_eq!(g.gfiles(), ["node1", "node2", "node3", "node4"]);
    assert_eq!(g.gindex("node3"), Some(2));
    assert_eq!(g.gindex("node9"), None);
    let out = g.read(4096).unwrap();
    let total: usize = (0..4).map(|i| content(i).len()).sum();
    assert_eq!(out.status, Some(total as i64));
    let GroupData::PerMember(per) = &out.data else {
        panic!("{:?}", out.data)
    };
    for (i, data) in per.iter().enumerate() {
        assert_eq!(data.as_deref(), Some(&content(i)[..]), "member {i}");
    }
    assert!(out.failed.is_empty() && out.silent.is_empty());
    assert_eq!(out.depth, 1);
    // The offset advanced on every member: the next read is at end of file.
    assert_eq!(g.read(4096).unwrap().status, Some(0));
    assert_eq!(g.gstatus().unwrap(), vec![Ok(0); 4]);
    g.close().unwrap();
}

#[test]
fn writes_seeks_stats_truncates_and_closes_every_member() {
    let c = Cluster::start(3, "rwl");
    let dir = c.link_group("/new");
    let flags = libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC;
    let mut g = gopen(dir.to_str().unwrap(), flags, 0o644, &c.flat()).unwrap();
    assert_eq!(g.write(b"hello\n").unwrap().status, Some(18));
    // lseek's equal: the common offset...
    assert_eq!(g.lseek(0, Whence::Current).unwrap().status, Some(6));
    assert_eq!(g.pwrite(b"J", 0).unwrap().status, Some(3));
    assert_eq!(g.pread(5, 0).unwrap().status, Some(15));
    let stats = Group::stats(&g.fstat().unwrap());
    assert!(
        stats.iter().all(|s| s.as_ref().map(|s| s.size) == Some(6)),
        "{stats:?}"
    );
    assert_eq!(g.ftruncate(2).unwrap().status, Some(0));
    assert_eq!(g.fsync().unwrap().status, Some(0));
    let stats = Group::stats(&g.fstat().unwrap());
    assert!(stats.iter().all(|s| s.as_ref().map(|s| s.size) == Some(2)));
    g.close().unwrap();
    for s in &c.servers {
        assert_eq!(std::fs::read(s.root().join("new")).unwrap(), b"Je");
    }
    assert!(matches!(g.read(1), Err(GroupError::Usage(_))));
}

#[test]
fn lseek_offsets_that_differ_have_no_equal_value() {
    let c = Cluster::start(3, "rwl");
    c.write_files("/data", |i| vec![b'x'; 10 * (i + 1)]);
    let mut g = gopen_members(c.members("/data"), libc::O_RDONLY, 0, &c.flat()).unwrap();
    assert_eq!(g.lseek(-5, Whence::End).unwrap().status, None);
    let statuses = g.gstatus().unwrap();
    assert_eq!(statuses, vec![Ok(5), Ok(15), Ok(25)]);
    // Bound aggregations replace the defaults: the largest offset, then the average.
    g.gbindaggr(FileOp::Lseek, Some(StatusAggr::Max), None);
    assert_eq!(g.lseek(0, Whence::End).unwrap().status, Some(30));
    g.gbindaggr(FileOp::Lseek, Some(StatusAggr::Average), None);
    let out = g.lseek(0, Whence::End).unwrap();
    assert_eq!((out.status, out.mean), (Some(20), Some(20.0)));
    g.gbindaggr(FileOp::Read, Some(StatusAggr::Min), Some(DataAggr::None));
    g.lseek(0, Whence::Set).unwrap();
    let out = g.read(100).unwrap();
    assert_eq!((out.status, out.data), (Some(10), GroupData::None));
}

#[test]
fn a_missing_member_fails_gopen_unless_best_effort() {
    let c = Cluster::start(3, "rwl");
    c.write_files("/data", content);
    std::fs::remove_file(c.servers[1].root().join("data")).unwrap();
    let err = gopen_members(c.members("/data"), libc::O_RDONLY, 0, &c.flat())
        .err()
        .expect("gopen must fail");
    assert_eq!(err.errno(), E_GROUP);
    let GroupError::Group { failed, .. } = &err else {
        panic!("{err}")
    };
    assert_eq!(failed, &vec![("node2".to_string(), ErrorCode::DoesntExist)]);

    let flags = libc::O_RDONLY | O_BESTEFFORT;
    let mut g = gopen_members(c.members("/data"), flags, 0, &c.flat()).unwrap();
    assert_eq!(g.gfiles(), ["node1", "node3"]);
    let out = g.read(4096).unwrap();
    assert_eq!(
        out.status,
        Some((content(0).len() + content(2).len()) as i64)
    );
}

#[test]
fn a_dead_server_fails_its_members_with_e_group_and_gstatus_names_them() {
    let mut c = Cluster::start(3, "rwl");
    c.write_files("/data", content);
    let mut g = gopen_members(c.members("/data"), libc::O_RDONLY, 0, &c.flat()).unwrap();
    c.servers.remove(2); // kills the process
    let err = g.read(4096).expect_err("a member is gone");
    let GroupError::Group { failed, outcome } = err else {
        panic!()
    };
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].0, "node3");
    let outcome = outcome.unwrap();
    assert_eq!(outcome.silent, vec![2]);
    assert_eq!(
        outcome.status,
        Some((content(0).len() + content(1).len()) as i64)
    );
    let statuses = g.gstatus().unwrap();
    assert_eq!(statuses[0], Ok(content(0).len() as i64));
    assert!(statuses[2].is_err(), "{statuses:?}");
    // The member stays failed for the group's life, without waiting for it again.
    assert!(g.pread(1, 0).is_err());
}

#[test]
fn best_effort_groups_carry_on_past_dead_members() {
    let mut c = Cluster::start(3, "rwl");
    c.write_files("/data", content);
    let flags = libc::O_RDONLY | O_BESTEFFORT;
    let mut g = gopen_members(c.members("/data"), flags, 0, &c.flat()).unwrap();
    c.servers.remove(0);
    let out = g.read(4096).unwrap();
    assert_eq!(out.failed, vec![0]);
    assert_eq!(
        out.status,
        Some((content(1).len() + content(2).len()) as i64)
    );
    let GroupData::PerMember(per) = out.data else {
        panic!()
    };
    assert_eq!(per[0], None);
}

#[test]
fn a_group_directory_can_live_on_a_server() {
    let c = Cluster::start(3, "rwl");
    c.write_files("/data", content);
    let grp = c.servers[0].root().join("grp");
    std::fs::create_dir(&grp).unwrap();
    for i in [2, 0, 1] {
        let target = format!("chirp://{}/data", c.authority(i));
        std::os::unix::fs::symlink(target, grp.join(format!("m{}", i + 1))).unwrap();
    }
    let dir = format!("chirp://{}/grp", c.authority(0));
    let mut g = gopen(&dir, libc::O_RDONLY, 0, &c.flat()).unwrap();
    assert_eq!(g.gfiles(), ["m1", "m2", "m3"]);
    let GroupData::PerMember(per) = g.read(100).unwrap().data else {
        panic!()
    };
    assert_eq!(per[2].as_deref(), Some(&content(2)[..]));
    let missing = format!("chirp://{}/nothing", c.authority(0));
    let err = gopen(&missing, libc::O_RDONLY, 0, &c.flat()).err().unwrap();
    assert!(matches!(err, GroupError::Directory(_)), "{err}");
}
