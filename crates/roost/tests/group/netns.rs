//! Group operations across hosts: each server runs in a network namespace of its own (its
//! own address, the same port), joined by a bridge, with the client outside. The tree gives
//! the flat client's results, and a host cut off from the network (its link down, so
//! packets vanish instead of being refused) fails only its member, within the wave timeout.
//!
//! Needs root and `ip` (iproute2); as another user the test says so and does nothing.

use roost_client::ChirpUrl;
use roost_group::api::{gopen_members, GroupData, GroupOptions, MemberSpec, O_BESTEFFORT};
use roost_testkit::group::{alice_options, USER};
use roost_testkit::netns::{ip, Hosts};
use roost_testkit::peer;
use std::time::{Duration, Instant};

#[test]
fn groups_span_hosts_in_network_namespaces() {
    if !peer::namespaces() {
        return;
    }
    let mut hosts = Hosts::create(4, 0);
    let keys = tempfile::tempdir().unwrap();
    let key = keys.path().join("alice.key");
    roost_testkit::serve::write_private(&key, &USER.chars().rev().collect::<String>());
    let exports: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    for (k, dir) in exports.iter().enumerate() {
        std::fs::write(dir.path().join("log"), format!("boot ok\nhost {k}\n")).unwrap();
        let args = [
            "serve".to_string(),
            dir.path().display().to_string(),
            "--listen".into(),
            hosts.addr(k),
            "--port".into(),
            "9094".into(),
            "--log-level".into(),
            "error".into(),
            "--key".into(),
            format!("{USER}={}", key.display()),
            "--acl".into(),
            format!("hmac:{USER}=rwl"),
        ];
        hosts.start_roost(k, &args);
    }
    let members: Vec<MemberSpec> = (0..4)
        .map(|k| MemberSpec {
            name: format!("host{k}"),
            url: ChirpUrl::parse(&format!("chirp://{}:9094/log", hosts.addr(k))).unwrap(),
        })
        .collect();
    let flat = GroupOptions {
        connect: alice_options(),
        timeout: Duration::from_secs(3),
        ..GroupOptions::default()
    };
    let tree = GroupOptions {
        relay: Some(format!("{}:9094", hosts.addr(0))),
        fanout: 2,
        ..flat.clone()
    };
    let flags = libc::O_RDONLY | O_BESTEFFORT;
    let mut f = gopen_members(members.clone(), flags, 0, &flat).unwrap();
    let mut t = gopen_members(members, flags, 0, &tree).unwrap();
    let (a, b) = (f.read(100).unwrap(), t.read(100).unwrap());
    assert_eq!((a.status, &a.data), (b.status, &b.data));
    assert_eq!((a.depth, b.depth), (1, 3));
    let GroupData::PerMember(per) = &b.data else {
        panic!()
    };
    assert_eq!(per[3].as_deref(), Some(&b"boot ok\nhost 3\n"[..]));

    // Cut host 3 off: its packets now vanish; the wave timeout bounds the wait.
    ip(&["link", "set", &hosts.link(3), "down"]);
    let started = Instant::now();
    let out = t.pread(4, 0).unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_eq!((out.failed.clone(), out.silent.clone()), (vec![3], vec![3]));
    assert_eq!(out.status, Some(12));
    assert_eq!(t.gstatus().unwrap()[3], Err(libc::ETIMEDOUT));
}
