//! Group operations across hosts: each server runs in a network namespace of its own (its
//! own address, the same port), joined by a bridge, with the client outside. The tree gives
//! the flat client's results, and a host cut off from the network (its link down, so
//! packets vanish instead of being refused) fails only its member, within the wave timeout.
//!
//! Needs root and `ip` (iproute2); as another user the test says so and does nothing.

mod group_support;
mod serve_support;

use group_support::{alice_options, USER};
use roost_client::ChirpUrl;
use roost_group::api::{gopen_members, GroupData, GroupOptions, MemberSpec, O_BESTEFFORT};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("run ip");
    assert!(status.success(), "ip {}", args.join(" "));
}

/// Namespaces `roost-PID-K` with veth links `rgPIDhK` on bridge `rgPIDb`, addresses
/// 10.SUBNET.0.(10+K); the bridge holds 10.SUBNET.0.1. Dropping it removes everything.
struct Hosts {
    tag: String,
    subnet: u32,
    count: usize,
    servers: Vec<Child>,
}

impl Hosts {
    fn create(count: usize) -> Hosts {
        let pid = std::process::id();
        let hosts = Hosts {
            tag: format!("{}", pid % 100_000),
            subnet: 100 + pid % 150,
            count,
            servers: Vec::new(),
        };
        let bridge = hosts.bridge();
        ip(&["link", "add", &bridge, "type", "bridge"]);
        ip(&[
            "addr",
            "add",
            &format!("10.{}.0.1/24", hosts.subnet),
            "dev",
            &bridge,
        ]);
        ip(&["link", "set", &bridge, "up"]);
        for k in 0..count {
            let (ns, host_end) = (hosts.ns(k), hosts.link(k));
            let ns_end = format!("rg{}n{k}", hosts.tag);
            ip(&["netns", "add", &ns]);
            ip(&[
                "link", "add", &host_end, "type", "veth", "peer", "name", &ns_end,
            ]);
            ip(&["link", "set", &ns_end, "netns", &ns]);
            ip(&["link", "set", &host_end, "master", &bridge, "up"]);
            let addr = format!("{}/24", hosts.addr(k));
            ip(&["-n", &ns, "addr", "add", &addr, "dev", &ns_end]);
            ip(&["-n", &ns, "link", "set", &ns_end, "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        hosts
    }

    fn bridge(&self) -> String {
        format!("rg{}b", self.tag)
    }

    fn ns(&self, k: usize) -> String {
        format!("roost-{}-{k}", self.tag)
    }

    fn link(&self, k: usize) -> String {
        format!("rg{}h{k}", self.tag)
    }

    fn addr(&self, k: usize) -> String {
        format!("10.{}.0.{}", self.subnet, 10 + k)
    }

    /// Starts `roost serve` in host `k`'s namespace on port 9094, exporting `dir`.
    fn serve(&mut self, k: usize, dir: &std::path::Path, key: &std::path::Path) {
        let mut child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns(k),
                env!("CARGO_BIN_EXE_roost"),
                "serve",
            ])
            .arg(dir)
            .args([
                "--listen",
                &self.addr(k),
                "--port",
                "9094",
                "--log-level",
                "error",
            ])
            .arg("--key")
            .arg(format!("{USER}={}", key.display()))
            .args(["--acl", &format!("hmac:{USER}=rwl")])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start roost serve in a namespace");
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(first.contains("listening"), "{first}");
        self.servers.push(child);
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for child in &mut self.servers {
            let _ = child.kill();
            let _ = child.wait();
        }
        for k in 0..self.count {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(k)])
                .status();
            let _ = Command::new("ip")
                .args(["link", "del", &self.link(k)])
                .status();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge()])
            .status();
    }
}

#[test]
fn groups_span_hosts_in_network_namespaces() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("group_netns: skipped, network namespaces need root");
        return;
    }
    let mut hosts = Hosts::create(4);
    let keys = tempfile::tempdir().unwrap();
    let key = keys.path().join("alice.key");
    std::fs::write(&key, USER.chars().rev().collect::<String>()).unwrap();
    let exports: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    for (k, dir) in exports.iter().enumerate() {
        std::fs::write(dir.path().join("log"), format!("boot ok\nhost {k}\n")).unwrap();
        hosts.serve(k, dir.path(), &key);
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
